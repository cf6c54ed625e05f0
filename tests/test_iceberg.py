"""R26 in another process: the ledger's tables published into an Iceberg SQL catalog.

Real components only: ledgers on a real SQLite file and a real PostgreSQL server (every test that
takes ``ledger`` runs on both), Parquet files written in Spark's layout through the ledger's public
API (``tests.test_arrow_ops.write``), Iceberg SQL catalogs in a real SQLite file and a real
PostgreSQL database, and real readers: pyiceberg, Polars' ``scan_iceberg``, DuckDB's
``iceberg_scan`` (its iceberg extension installed offline from its PyPI package). No Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import arrow_ops
from arrow_ops import CatalogUnavailable
from ledger import Ledger
from tests.pg import PASSWORD_ROLE, shared
from tests.test_arrow_ops import ORDERS, TABLE, write

BOTH_STORES = True
REPO = Path(__file__).resolve().parent.parent
HOUR = timedelta(hours=1)


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def catalog_of(path: Path | str) -> SqlCatalog:
    uri = f"sqlite:///{path}" if isinstance(path, Path) else str(path).replace("postgresql://",
                                                                                "postgresql+psycopg://")
    return SqlCatalog("ledger", uri=uri)


def metadata_files(folder: Path) -> set[Path]:
    return set(folder.rglob("*.metadata.json")) if folder.exists() else set()


def three_versions(ledger: Ledger, clock) -> list[int]:
    """v1 all of ORDERS (partitioned by region), v2 appends 7, v3 overwrites with ids 1-2."""
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    clock.advance(HOUR)
    write(ledger, TABLE, pa.table({"id": pa.array([7], pa.int64()), "amount": [7.5], "region": ["eu"],
                                   "day": ORDERS.column("day").slice(0, 1)}), partition_by=("region",))
    clock.advance(HOUR)
    write(ledger, TABLE, ORDERS.slice(0, 2), partition_by=("region",), mode="overwrite")
    return [v.number for v in sorted(ledger.versions(TABLE), key=lambda v: v.number)]


# --- the publication, read by pyiceberg, Polars and DuckDB --------------------------------------

def test_r26_each_kept_version_is_one_snapshot_read_by_id_and_by_time_in_pyiceberg_polars_and_duckdb(
        ledger, clock, tmp_path) -> None:
    three_versions(ledger, clock)
    report = arrow_ops.publish(ledger, str(tmp_path / "catalog.db"))
    assert report.written == (TABLE,) and report.left_out == {}
    table = catalog_of(tmp_path / "catalog.db").load_table(TABLE)
    assert ids(table.scan().to_arrow()) == [1, 2]
    snapshots = sorted(table.snapshots(), key=lambda s: s.timestamp_ms)
    assert [s.summary["ledger.version"] for s in snapshots] == ["1", "2", "3"]
    assert {s.summary["ledger.table-id"] for s in snapshots} == {ledger.table(TABLE).id}
    expected = {1: [1, 2, 3, 4, 5, 6], 2: [1, 2, 3, 4, 5, 6, 7], 3: [1, 2]}
    for snapshot in snapshots:
        number = int(snapshot.summary["ledger.version"])
        version = ledger.version(TABLE, version=number)
        assert snapshot.timestamp_ms == int(version.committed_at.timestamp() * 1000)
        assert ids(table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()) == expected[number]
        # By time: half an hour after the commit, the ledger's version then.
        at = version.committed_at + HOUR / 2
        assert table.snapshot_as_of_timestamp(int(at.timestamp() * 1000)).snapshot_id == snapshot.snapshot_id
        assert ledger.version(TABLE, as_of=at).number == number
        assert ids(pl.scan_iceberg(table, snapshot_id=snapshot.snapshot_id).collect().to_arrow()) == expected[number]
    # The partition values are the ledger's, typed as recorded, with /, %, quotes and nulls intact.
    first = table.scan(snapshot_id=snapshots[0].snapshot_id).to_arrow()
    assert dict(zip(first.column("id").to_pylist(), first.column("region").to_pylist())) == {
        1: "eu", 2: "a/b%c", 3: None, 4: 'q"\'=:', 5: "x+y z", 6: "007"}
    assert table.properties["gc.enabled"] == "false"
    assert table.properties["commit.retry.num-retries"] == "0"
    assert "schema.name-mapping.default" in table.properties
    assert table.properties["ledger.table-id"] == ledger.table(TABLE).id
    # DuckDB's own iceberg_scan over the metadata the catalog names.
    con = duckdb_with_iceberg(tmp_path)
    where = table.metadata_location
    assert sorted(r[0] for r in con.sql(f"SELECT id FROM iceberg_scan('{where}')").fetchall()) == [1, 2]
    old = snapshots[0]
    assert con.sql(f"SELECT count(*) FROM iceberg_scan('{where}', snapshot_from_id={old.snapshot_id})").fetchone()[0] == 6
    assert con.sql(f"SELECT region FROM iceberg_scan('{where}') WHERE id = 2").fetchone()[0] == "a/b%c"


def duckdb_with_iceberg(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    from duckdb_extensions import import_extension
    con = duckdb.connect(config={"extension_directory": str(tmp_path / "duckdb-extensions")})
    import_extension("avro", con=con)
    import_extension("iceberg", con=con)
    con.sql("LOAD iceberg")
    return con


def test_r26_publishing_again_with_nothing_changed_writes_nothing(ledger, clock, tmp_path) -> None:
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    arrow_ops.publish(ledger, str(tmp_path / "catalog.db"))
    folder = tmp_path / "catalog.iceberg"
    files = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    location = catalog_of(tmp_path / "catalog.db").load_table(TABLE).metadata_location
    events = ledger.event_count()
    report = arrow_ops.publish(ledger, str(tmp_path / "catalog.db"))
    assert report.written == () and report.unchanged == (TABLE,) and report.pins_taken == 0
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == files  # not one file written
    assert catalog_of(tmp_path / "catalog.db").load_table(TABLE).metadata_location == location
    assert ledger.event_count() == events  # pins more than half their lease away: not renewed yet
