"""A pipeline on a real cluster, in a process of its own: ``tests/test_cluster.py`` runs it.

Spark's ``local-cluster[2,1,1024]`` master starts two executor JVMs apart from the driver,
whose Python workers run the interpreter named by ``PYSPARK_PYTHON``: here a virtualenv that
holds pyarrow and obstore and nothing of retention-ledger, as a cluster's executors would.
Every step writes what it saw to a JSON file (``facts``), which the tests read; one
SparkSession does them all, since a process has one and a cluster takes seconds to start.

    python -m tests.cluster_job WORKDIR [preflight-only]
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ledger import Ledger, LedgerError, ManualClock


def executors(spark: Any) -> list[dict[str, Any]]:
    """What an executor's Python is: its interpreter, and whether the ledger could be imported."""
    def probe(_: Any) -> list[dict[str, Any]]:
        import importlib.util
        import sys as executor_sys
        return [{"python": executor_sys.executable,
                 **{name: importlib.util.find_spec(name) is not None
                    for name in ("ledger", "attrs", "immutables", "orjson", "pyarrow", "obstore")}}]
    return spark.sparkContext.parallelize(range(4), 4).mapPartitions(probe).collect()


def pipeline(spark: Any, work: Path, facts: dict[str, Any]) -> None:
    from spark_ops import read_table, vacuum, write_table
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=30))
    led = Ledger.open(work / "ledger.db", warehouse=work / "warehouse", clock=clock, actor="cluster")
    rows = spark.createDataFrame([(i, f"v1-{i}") for i in range(6)], "id long, label string")
    write_table(rows, led, "sales.orders")
    first = led.versions("sales.orders")[0]
    clock.advance(timedelta(hours=1))
    write_table(rows.selectExpr("id + 100 AS id", "label"), led, "sales.orders", mode="overwrite")
    facts["read_version_1"] = sorted(r["id"] for r in read_table(spark, led, "sales.orders", version=1).collect())
    facts["read_current"] = sorted(r["id"] for r in read_table(spark, led, "sales.orders").collect())

    write_table(rows, led, "sales.gone")
    gone = led.table("sales.gone")
    led.drop_table("sales.gone")
    abandoned = led.begin_write("sales.orders", lease="1h")
    os.makedirs(abandoned.folder)
    Path(abandoned.folder, "part-0.parquet").write_bytes(b"abandoned")
    led.abort_write(abandoned.id)
    outside = work / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    linked = led.create_table("sales.linked")
    os.symlink(outside, linked.location)
    led.drop_table("sales.linked")
    clock.advance(timedelta(days=10))

    events = led.event_count()
    dry = vacuum(spark, led, dry_run=True)
    facts["dry_run"] = {"files": dry.files, "events_unchanged": led.event_count() == events,
                        "location_still_there": os.path.isdir(gone.location)}
    report = vacuum(spark, led)
    facts["vacuum"] = report.to_dict()
    facts["gone_location_exists"] = os.path.exists(gone.location)
    facts["first_folder_exists"] = os.path.exists(f"{led.table('sales.orders').location}/_writes/{first.write_id}")
    facts["abandoned_folder_exists"] = os.path.exists(abandoned.folder)
    facts["outside_intact"] = (outside / "precious.txt").read_text() == "keep me"
    facts["linked_state"] = led.instance(linked.id).state
    facts["read_current_after"] = sorted(r["id"] for r in read_table(spark, led, "sales.orders").collect())
    try:
        read_table(spark, led, "sales.orders", version=1)
        facts["read_expired"] = "read"
    except LedgerError as exc:
        facts["read_expired"] = type(exc).__name__
    try:
        led.undrop_table("sales.gone")
        facts["undrop_purged"] = "undropped"
    except LedgerError as exc:
        facts["undrop_purged"] = type(exc).__name__
    facts["verified_events"] = led.verify().events == led.event_count()
    by_name(spark, led, facts)
    led.close()


def by_name(spark: Any, led: Ledger, facts: dict[str, Any]) -> None:
    """Tables by name in Spark SQL: the views' scans and the ledger's table-valued functions run
    on the executors, which cannot import the ledger (R19)."""
    from spark_ops import attach, detach, write_table
    days = spark.createDataFrame([(i, f"{i % 3:03d}") for i in range(30)], "id long, day string")
    write_table(days, led, "sales.days", partition_by=["day"])
    held = sorted(p.id for p in led.pins())  # read_table's own pins
    facts["attached"] = attach(spark, led)
    facts["pins_while_attached"] = sorted(p.table for p in led.pins() if p.id not in held)
    facts["sql_count"] = spark.sql("SELECT count(*) AS n FROM sales.orders").collect()[0]["n"]
    facts["sql_day"] = sorted(r["id"] for r in spark.sql("SELECT id FROM sales.days WHERE day = '001'").collect())
    facts["sql_versions"] = [(r["number"], r["current"]) for r in
                             spark.sql("SELECT number, current FROM ledger_versions('sales.orders')").collect()]
    facts["sql_history_types"] = [r["type"] for r in spark.sql(  # pins asked for; a back-quoted name parsed there
        "SELECT type FROM ledger_history('`sales`.days', true)").collect()]
    facts["sql_dropped"] = [r["name"] for r in spark.sql("SELECT name FROM ledger_dropped_tables()").collect()]
    facts["detached"] = detach(spark, led)
    facts["pins_after_detach_unchanged"] = sorted(p.id for p in led.pins()) == held


def preflight_only(spark: Any, work: Path, facts: dict[str, Any]) -> None:
    """A vacuum whose executors cannot run it: what it says, and what it recorded."""
    from spark_ops import vacuum
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=30))
    led = Ledger.open(work / "ledger.db", warehouse=work / "warehouse", clock=clock, actor="cluster")
    table = led.create_table("sales.gone")
    os.makedirs(table.location)
    Path(table.location, "part-0.parquet").write_bytes(b"x")
    led.drop_table("sales.gone")
    clock.advance(timedelta(days=10))
    events = led.event_count()
    try:
        vacuum(spark, led)
        facts["refused"] = None
    except LedgerError as exc:
        facts["refused"] = f"{type(exc).__name__}: {exc}"
    facts["events_unchanged"] = led.event_count() == events
    facts["files_there"] = os.path.exists(f"{table.location}/part-0.parquet")
    led.close()


def main() -> None:
    work, mode = Path(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "pipeline")
    facts: dict[str, Any] = {}
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("retention-ledger-cluster-test")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    try:
        facts["executors"] = executors(spark)
        (pipeline if mode == "pipeline" else preflight_only)(spark, work, facts)
    except Exception:  # noqa: BLE001 - the test shows it
        facts["crash"] = traceback.format_exc()
    finally:
        (work / "facts.json").write_text(json.dumps(facts, default=str))
        spark.stop()


if __name__ == "__main__":
    main()
