"""A pipeline on a real cluster, in a process of its own: ``tests/test_cluster.py`` runs it.

Spark's ``local-cluster[2,1,1024]`` master starts two executor JVMs apart from the driver,
whose Python workers run the interpreter named by ``PYSPARK_PYTHON``: here a virtualenv that
holds pyarrow and obstore and nothing of retention-ledger, as a cluster's executors would.
Every step writes what it saw to a JSON file (``facts``), which the tests read; one
SparkSession does them all, since a process has one and a cluster takes seconds to start.
With ``--remote sc://host:port`` the session is a Spark Connect client of a server that runs
the cluster (``tests/test_cluster_connect.py`` starts one): the same steps, from a process that
has no JVM, whose executors' Python is the server's.

    python -m tests.cluster_job WORKDIR [pipeline|preflight] [--remote sc://host:port]
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


def probe(batches: Any) -> Any:
    """What an executor's Python is (its interpreter, and whether the ledger could be imported),
    as one JSON row of a ``mapInArrow`` task (this module is ``__main__``: it goes by value)."""
    import importlib.util
    import sys as executor_sys

    import pyarrow as pa
    for _ in batches:
        pass
    seen = {"python": executor_sys.executable, **{name: importlib.util.find_spec(name) is not None for name in
                                                  ("ledger", "attrs", "immutables", "orjson", "pyarrow", "obstore")}}
    yield pa.RecordBatch.from_arrays([pa.array([json.dumps(seen)])], names=["seen"])


def executors(spark: Any) -> list[dict[str, Any]]:
    """What each of four tasks' Python is (a DataFrame job: it runs on either kind of session)."""
    return [json.loads(r["seen"]) for r in spark.range(0, 4, numPartitions=4).mapInArrow(probe, "seen string").collect()]


def echo(items: Any) -> list[Any]:
    return list(items)


def flaky(items: Any) -> list[Any]:
    """The first attempt of the task holding item 0 fails; Spark runs it again."""
    from pyspark import TaskContext
    context = TaskContext.get()
    if 0 in items and context is not None and context.attemptNumber() == 0:
        raise RuntimeError("the first attempt of this task fails, on purpose")
    return list(items)


def retries(spark: Any) -> dict[str, Any]:
    """Whether the vacuum's jobs see a task attempt that failed (it may have left a receipt part
    that no result names, which the run then looks for): one job where none fails, one where one
    does. A cluster retries a failed task (``local`` masters do not)."""
    from spark_ops.vacuum_job import ship
    from spark_ops.vacuum_job.jobs import Jobs
    ship.ship(spark)  # as the vacuum does before its first job: these executors have nothing of ours
    steady, failing = Jobs(spark), Jobs(spark)
    return {"steady": (steady.run(echo, list(range(8)), 4), steady.retried),
            "failing": (failing.run(flaky, list(range(8)), 4), failing.retried)}


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
    try:
        by_name(spark, led, facts)
    except Exception as exc:  # noqa: BLE001 - the test shows it
        facts["by_name_failed"] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"
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


def session(remote: str | None) -> Any:
    """The cluster's session: a classic one on ``local-cluster``, or a Connect client of ``remote``."""
    if remote:
        from spark_ops import local_session
        return local_session("retention-ledger-cluster-test", remote=remote)
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local-cluster[2,1,1024]").appName("retention-ledger-cluster-test")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
            .getOrCreate())


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--remote")]
    remote = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--remote=")), None)
    work, mode = Path(args[0]), (args[1] if len(args) > 1 else "pipeline")
    facts: dict[str, Any] = {}
    spark = session(remote)
    try:
        if mode == "pipeline":  # (executors without pyarrow cannot answer a DataFrame job's probe)
            facts["executors"] = executors(spark)
            facts["retries"] = retries(spark)
        (pipeline if mode == "pipeline" else preflight_only)(spark, work, facts)
    except Exception:  # noqa: BLE001 - the test shows it
        facts["crash"] = traceback.format_exc()
    finally:
        (work / "facts.json").write_text(json.dumps(facts, default=str))
        spark.stop()


if __name__ == "__main__":
    main()
