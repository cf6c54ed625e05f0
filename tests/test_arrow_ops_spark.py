"""R26 against what Spark writes and what the vacuum and an erasure do: tables written by Spark
(its INT96 timestamps, its escaped partition folders) read by DuckDB and Polars, a vacuum that
keeps the version a DuckDB attachment holds, and an erasure on an attached table.

Real components: the session's local SparkSession writes, vacuums and erases; DuckDB, Polars and
pyarrow read in this process; ledgers on a real SQLite file and a real PostgreSQL server.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
import subprocess
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import polars as pl
import pyarrow.compute as pc
import pytest

import arrow_ops
from ledger import Ledger, TableDataMissing, VersionErased
from spark_ops import erase, read_table, vacuum, write_table
from tests.test_arrow_ops import ORDERS, write
from tests.test_s3 import client, lake, proxy, s3  # noqa: F401  (S3 on moto on the loopback address)

pytestmark = pytest.mark.spark
BOTH_STORES = True
TABLE = "sales.orders"
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def orders(spark, start: int = 0):
    rows = [(start + 1, 42, "eu", datetime(2024, 1, 1, 10, 30)), (start + 2, 7, "a/b%c", datetime(2024, 1, 2)),
            (start + 3, 42, None, None), (start + 4, 8, 'q"\'=:', datetime(2024, 1, 3, 23, 59, 59))]
    return spark.createDataFrame(rows, "id long, user_id int, region string, ts timestamp")


def test_r26_duckdb_and_polars_read_what_spark_wrote_as_spark_reads_it(spark, ledger) -> None:
    write_table(orders(spark), ledger, TABLE, partition_by=["region"])
    expected = sorted(tuple(r) for r in spark_ops_rows(spark, ledger))
    con = duckdb.connect()
    arrow_ops.attach(con, ledger)
    got = sorted(con.sql("SELECT id, user_id, region, ts FROM sales.orders").fetchall())
    assert [(i, u, r, None if t is None else t.astimezone(timezone.utc).replace(tzinfo=None))
            for i, u, r, t in got] == expected
    with arrow_ops.reading(ledger, TABLE) as data:
        polars = pl.scan_pyarrow_dataset(data).filter(pl.col("region") == "a/b%c").collect()
        assert polars["id"].to_list() == [2]
        assert str(polars.schema["ts"]) == "Datetime(time_unit='us', time_zone='UTC')"
    arrow_ops.detach(con, ledger)


def spark_ops_rows(spark, led: Ledger) -> list[tuple]:
    """The rows as Spark reads them back, timestamps in UTC."""
    df = read_table(spark, led, TABLE, pin=False)
    zone = spark.conf.get("spark.sql.session.timeZone")
    return [(r["id"], r["user_id"], r["region"],
             None if r["ts"] is None else _utc(r["ts"], zone)) for r in df.collect()]


def _utc(local: datetime, zone: str) -> datetime:
    return local.replace(tzinfo=ZoneInfo(zone)).astimezone(timezone.utc).replace(tzinfo=None)


def test_r21_r26_a_version_a_duckdb_attachment_shows_is_kept_by_every_vacuum_until_it_moves(
        spark, ledger, ledger_path, clock) -> None:
    write_table(orders(spark), ledger, TABLE)
    con = duckdb.connect()
    arrow_ops.attach(con, ledger, lease="3d")
    shown = ledger.version(TABLE)
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=None, actor="elsewhere") as other:
        clock.advance(HOUR)
        write_table(orders(spark, 100), other, TABLE, mode="overwrite")
        clock.advance(DAY + HOUR)
        report = vacuum(spark, other, retention="1d")
    [held] = report.held
    assert (held["name"], held["what"], held["version"]) == (TABLE, "expiry", 1)
    assert all(Path(ledger.table(TABLE).location, f.path).exists() for f in shown.files)
    assert sorted(r[0] for r in con.sql("SELECT id FROM sales.orders").fetchall()) == [1, 2, 3, 4]

    arrow_ops.refresh(con, ledger)
    assert vacuum(spark, ledger, retention="1d").held == ()
    assert sorted(r[0] for r in con.sql("SELECT id FROM sales.orders").fetchall()) == [101, 102, 103, 104]
    assert not any(Path(ledger.table(TABLE).location, f.path).exists() for f in shown.files)
    arrow_ops.detach(con, ledger)


def test_r25_r26_an_erasure_on_an_attached_table_moves_its_name_and_ends_the_pin_on_the_erased_version(
        spark, ledger) -> None:
    write_table(orders(spark), ledger, TABLE, partition_by=["region"])
    con = duckdb.connect()
    arrow_ops.attach(con, ledger)
    [before] = [p for p in ledger.pins(TABLE) if p.live]
    status = erase(spark, ledger, TABLE, "user_id = 42", reason="GDPR art. 17")
    # Followed before erase returned: the name shows the clean version, and no pin holds the erased one (R25).
    assert sorted(r[0] for r in con.sql("SELECT id FROM sales.orders").fetchall()) == [2, 4]
    assert [p.version for p in ledger.pins(TABLE) if p.live] == [ledger.table(TABLE).current_version]
    assert before.id not in {p.id for p in ledger.pins(TABLE) if p.live}
    with pytest.raises(VersionErased, match=status.request_id):
        arrow_ops.dataset(ledger, TABLE, version=before.version)
    arrow_ops.detach(con, ledger)


def test_r26_on_s3_a_dataset_and_a_name_read_exactly_the_versions_objects(lake: Ledger) -> None:
    write(lake, TABLE, ORDERS, partition_by=("region",))
    with arrow_ops.reading(lake, TABLE) as data:
        assert sorted(data.to_table().column("id").to_pylist()) == [1, 2, 3, 4, 5, 6]
        assert data.count_rows(filter=pc.field("region") == "a/b%c") == 1
    con = duckdb.connect()
    assert arrow_ops.attach(con, lake) == [TABLE]
    assert con.sql("SELECT id FROM sales.orders WHERE region = '007'").fetchall() == [(6,)]
    assert "ARROW_SCAN" in "".join(r[1] for r in con.execute("EXPLAIN SELECT * FROM sales.orders").fetchall())
    arrow_ops.detach(con, lake)
    # An object gone from the bucket: refused, naming it, before a row is read; no pin left.
    location = lake.table(TABLE).location
    gone = lake.version(TABLE).files[0].path
    bucket, _, prefix = location[len("s3://"):].partition("/")
    client().delete_object(Bucket=bucket, Key=f"{prefix}/{gone}")
    with pytest.raises(TableDataMissing, match=gone.split("/")[-1]):
        arrow_ops.dataset(lake, TABLE)
    assert [p for p in lake.pins() if p.live] == []


def test_r25_r26_an_erase_on_a_published_table_republishes_it_before_it_returns(spark, ledger, tmp_path) -> None:
    write_table(orders(spark), ledger, TABLE, partition_by=["region"])
    write_table(orders(spark, 10), ledger, TABLE)  # version 2: both writes' rows, four of them user 42's
    catalog = tmp_path / "catalog.db"
    assert arrow_ops.publish(ledger, catalog).written == (TABLE,)
    read = ("import sys; from pyiceberg.catalog.sql import SqlCatalog\n"
            f"t = SqlCatalog('ledger', uri='sqlite:///{catalog}').load_table({TABLE!r})\n"
            "print(sorted(t.scan().to_arrow().column('id').to_pylist()),"
            " sorted(int(s.summary['ledger.version']) for s in t.snapshots()))")

    def another_process() -> str:  # a reader elsewhere: it knows the catalog, not the ledger
        return subprocess.run([sys.executable, "-c", read], capture_output=True, text=True, check=True).stdout.strip()

    assert another_process() == "[1, 2, 3, 4, 11, 12, 13, 14] [1, 2]"
    status = erase(spark, ledger, TABLE, "user_id = 42", reason="GDPR art. 17")
    # Before erase returned, the publication moved: the clean version only, no version that held the rows.
    clean = ledger.table(TABLE).current_version
    assert another_process() == f"[2, 4, 12, 14] [{clean}]"
    assert set(status.versions) == {f"{ledger.table(TABLE).id}/1", f"{ledger.table(TABLE).id}/2"}


def test_r21_r26_what_a_publication_shows_is_kept_by_every_vacuum_until_the_next_publication_lets_it_go(
        spark, ledger, ledger_path, clock, tmp_path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    ledger.set_retention("database:sales", "1d")  # what a publication keeps is what the retention keeps
    write_table(orders(spark), ledger, TABLE)
    catalog = tmp_path / "catalog.db"
    arrow_ops.publish(ledger, catalog)
    first = ledger.version(TABLE)
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=None, actor="elsewhere") as other:
        clock.advance(HOUR)
        write_table(orders(spark, 100), other, TABLE, mode="overwrite")
        arrow_ops.publish(other, catalog)  # shows versions 1 and 2 now, each pinned
        clock.advance(DAY + HOUR)
        report = vacuum(spark, other)
    assert [(h["name"], h["what"], h["version"]) for h in report.held] == [(TABLE, "expiry", 1)]
    table = SqlCatalog("ledger", uri=f"sqlite:///{catalog}").load_table(TABLE)
    oldest = min(table.snapshots(), key=lambda s: s.timestamp_ms)
    assert sorted(table.scan(snapshot_id=oldest.snapshot_id).to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]

    # The next publication leaves version 1 out (superseded longer ago than the retention) and lets
    # its pin go: the vacuum after it expires the version and deletes its files.
    again = arrow_ops.publish(ledger, catalog)
    assert again.written == (TABLE,) and again.pins_released == 1
    assert vacuum(spark, ledger).held == ()
    assert not any(Path(ledger.table(TABLE).location, f.path).exists() for f in first.files)
    table = SqlCatalog("ledger", uri=f"sqlite:///{catalog}").load_table(TABLE)
    assert [s.summary["ledger.version"] for s in table.snapshots()] == ["2"]
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [101, 102, 103, 104]
