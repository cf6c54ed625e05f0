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
from ledger import Ledger, PinRefused
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


def test_r26_the_metadata_keeps_the_ordering_iceberg_java_checks_on_load(ledger, clock, tmp_path) -> None:
    three_versions(ledger, clock)
    arrow_ops.publish(ledger, str(tmp_path / "catalog.db"))
    # Version 1 was superseded longer ago than the table's retention (7 days): it is due to expire,
    # so it leaves the publication (whose pin would otherwise keep the vacuum from expiring it).
    clock.advance(timedelta(days=7) - HOUR / 2)
    assert arrow_ops.publish(ledger, str(tmp_path / "catalog.db")).written == (TABLE,)
    location = catalog_of(tmp_path / "catalog.db").load_table(TABLE).metadata_location
    raw = json.loads(Path(location).read_text())
    log = [e["timestamp-ms"] for e in raw["snapshot-log"]]
    assert log == sorted(log) and len(log) == 2  # version 1 left with its snapshot
    assert raw["metadata-log"] == []
    assert raw["last-updated-ms"] >= log[-1]
    assert [s["summary"]["ledger.version"] for s in raw["snapshots"]] == ["2", "3"]
    assert raw["current-snapshot-id"] == raw["snapshots"][-1]["snapshot-id"]


# --- what a publication exposes is pinned until the next one drops it (R21, R26) --------------------

def publication_pins(catalog: SqlCatalog) -> dict[str, str]:
    return json.loads(catalog.load_table(TABLE).properties["ledger.pins"])


def test_r21_r26_a_publication_pins_what_it_exposes_and_the_next_renews_the_kept_and_releases_the_rest(
        ledger, clock, tmp_path) -> None:
    where = str(tmp_path / "catalog.db")
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    arrow_ops.publish(ledger, where)
    first = publication_pins(catalog_of(tmp_path / "catalog.db"))
    assert set(first) == {"1"}
    [pin] = ledger.pins(TABLE)
    assert pin.id == first["1"] and pin.version == 1 and pin.lease == timedelta(days=7)
    clock.advance(HOUR)
    write(ledger, TABLE, ORDERS.slice(0, 1), partition_by=("region",), mode="overwrite")
    report = arrow_ops.publish(ledger, where)
    second = publication_pins(catalog_of(tmp_path / "catalog.db"))
    assert second["1"] == first["1"] and set(second) == {"1", "2"} and report.pins_taken == 1
    assert {p.id for p in ledger.pins(TABLE)} == set(second.values())
    # Four days on, less than half the lease is left: a publication with nothing to change renews them.
    clock.advance(timedelta(days=4))
    report = arrow_ops.publish(ledger, where)
    assert report.written == () and report.pins_renewed == 2
    assert all(p.expires_at > ledger.now() + timedelta(days=6) for p in ledger.pins(TABLE))
    # The publication's pin keeps the retention mark off version 1 ...
    with pytest.raises(PinRefused):
        ledger.advance_retention_mark(TABLE, ledger.version(TABLE, version=1).committed_at)
    # ... until version 1 is due (superseded longer ago than the retention): the next publication
    # drops its snapshot, then releases its pin, and the mark moves; then it is expired.
    clock.advance(timedelta(days=3, hours=1))
    report = arrow_ops.publish(ledger, where)
    assert report.written == (TABLE,) and report.pins_released == 1
    third = publication_pins(catalog_of(tmp_path / "catalog.db"))
    assert third == {"2": second["2"]}
    assert {p.id for p in ledger.pins(TABLE)} == {second["2"]}
    ledger.advance_retention_mark(TABLE, ledger.version(TABLE, version=1).committed_at)
    assert ledger.version(TABLE, version=2).current and arrow_ops.publish(ledger, where).unchanged == (TABLE,)


def test_r26_a_dropped_table_leaves_the_catalog_and_comes_back_on_undrop(ledger, tmp_path) -> None:
    where = str(tmp_path / "catalog.db")
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    write(ledger, "sales.kept", ORDERS)
    arrow_ops.publish(ledger, where)
    pin_ids = set(publication_pins(catalog_of(tmp_path / "catalog.db")).values())
    ledger.drop_table(TABLE)
    report = arrow_ops.publish(ledger, where)
    assert report.removed == (TABLE,) and report.unchanged == ("sales.kept",)
    assert catalog_of(tmp_path / "catalog.db").list_tables("sales") == [("sales", "kept")]
    assert not any(p.id in pin_ids for p in ledger.pins())  # its publication's pins released
    ledger.undrop_table(TABLE)
    assert arrow_ops.publish(ledger, where).written == (TABLE,)
    assert ids(catalog_of(tmp_path / "catalog.db").load_table(TABLE).scan().to_arrow()) == [1, 2, 3, 4, 5, 6]


# --- R25: an erased version is never in a publication made after its request ------------------------

def test_r25_r26_an_erased_version_is_gone_from_the_next_publication(ledger, clock, tmp_path) -> None:
    where = str(tmp_path / "catalog.db")
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    clock.advance(HOUR)
    arrow_ops.publish(ledger, where)
    # Erase id 1 as an engine does: rewrite without it (a new version), then record the request
    # naming the files that held it (no Spark needed: the request is the ledger's public API).
    replaced = write(ledger, TABLE, ORDERS.slice(1), partition_by=("region",), mode="overwrite")
    table = ledger.table(TABLE)
    [held] = [f for f in ledger.version(TABLE, version=1).files if "region=eu" in f.path]
    key = os.path.relpath(os.path.join(table.location, held.path), ledger.warehouse)
    status = ledger.request_erasure(TABLE, reason="ticket 7", predicate="id = 1", files=[(key, held.size)],
                                    replaced_by=replaced)
    assert ledger.versions(TABLE)[-1].erased_by == status.request_id
    report = arrow_ops.publish(ledger, where)
    assert report.written == (TABLE,)
    published = catalog_of(tmp_path / "catalog.db").load_table(TABLE)
    assert [s.summary["ledger.version"] for s in published.snapshots()] == [str(replaced)]
    assert ids(published.scan().to_arrow()) == [2, 3, 4, 5, 6]
    assert held.path not in json.dumps([str(f.file.file_path) for f in published.scan().plan_files()])
    # Read from another process, as another engine would.
    script = ("import sys; from pyiceberg.catalog.sql import SqlCatalog;"
              f"t = SqlCatalog('ledger', uri={'sqlite:///' + where!r}).load_table({TABLE!r});"
              "print(sorted(t.scan().to_arrow().column('id').to_pylist()), len(t.snapshots()))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split() == ["[2,", "3,", "4,", "5,", "6]", "1"]


# --- catalogs: SQLite, PostgreSQL, and one that cannot be reached -----------------------------------

def test_r26_a_postgresql_catalog_read_from_another_process(ledger, tmp_path) -> None:
    url = shared().database("iceberg")
    write(ledger, TABLE, ORDERS, partition_by=("region", "day"))
    report = arrow_ops.publish(ledger, url, metadata=str(tmp_path / "iceberg"))
    assert report.written == (TABLE,)
    script = ("from pyiceberg.catalog.sql import SqlCatalog;"
              f"t = SqlCatalog('ledger', uri={url.replace('postgresql://', 'postgresql+psycopg://')!r})"
              f".load_table({TABLE!r});"
              "r = t.scan(row_filter=\"region == 'a/b%c'\").to_arrow();"
              "print(r.column('id').to_pylist(), r.column('day').to_pylist()[0].isoformat())")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split() == ["[2]", "2024-01-01"]
    assert arrow_ops.publish(ledger, url, metadata=str(tmp_path / "iceberg")).written == ()


def test_r23_r26_a_catalog_that_cannot_be_reached_is_a_typed_error_without_its_password(ledger, tmp_path) -> None:
    write(ledger, TABLE, ORDERS)
    events = ledger.event_count()
    server = shared()
    wrong = f"postgresql://{PASSWORD_ROLE}:s3cret-Pa55@127.0.0.1:{server.port}/postgres"
    with pytest.raises(CatalogUnavailable) as refused:
        arrow_ops.publish(ledger, wrong, metadata=str(tmp_path / "iceberg"))
    assert "s3cret-Pa55" not in str(refused.value) and "127.0.0.1" in str(refused.value)
    with pytest.raises(CatalogUnavailable, match="cannot be reached"):
        arrow_ops.publish(ledger, str(tmp_path / "no" / "such" / "folder" / "catalog.db"))
    assert ledger.event_count() == events and ledger.pins() == []
    assert not (tmp_path / "iceberg").exists()


def test_r26_a_column_a_merge_added_is_a_new_schema_read_as_null_in_older_snapshots(ledger, tmp_path) -> None:
    from tests.test_arrow_ops import append_a_new_column
    write(ledger, TABLE, ORDERS.drop_columns(["region", "day"]))
    append_a_new_column(ledger)
    arrow_ops.publish(ledger, str(tmp_path / "catalog.db"))
    table = catalog_of(tmp_path / "catalog.db").load_table(TABLE)
    now = table.scan().to_arrow()
    assert dict(zip(now.column("id").to_pylist(), now.column("note").to_pylist()))[9] == "new"
    assert now.filter(pa.compute.field("id") == 1).column("note").to_pylist() == [None]
    first, second = sorted(table.snapshots(), key=lambda s: s.timestamp_ms)
    assert first.schema_id != second.schema_id
    assert "note" not in table.scan(snapshot_id=first.snapshot_id).to_arrow().column_names


# --- faults: two publishers at once, a publication killed mid-way ----------------------------------

def test_r26_two_publishers_at_once_one_order_no_lost_update_no_pin_left_behind(ledger, ledger_path, clock,
                                                                                 tmp_path) -> None:
    import threading
    url = shared().database("iceberg")
    names = [f"sales.t{n}" for n in range(12)]
    for name in names:
        write(ledger, name, ORDERS.slice(0, 2))
    gate = threading.Barrier(2)
    reports: list[arrow_ops.PublishReport] = []

    def publisher() -> None:
        with Ledger.open(ledger_path, clock=clock, max_clock_skew=None, actor="publisher") as own:
            gate.wait()
            reports.append(arrow_ops.publish(own, url, metadata=str(tmp_path / "iceberg")))

    threads = [threading.Thread(target=publisher) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(reports) == 2
    a, b = reports
    # Each table was written once, by one of them; the other found it done (or lost the race and
    # then found it done): one order, nothing written twice, nothing lost.
    assert sorted(a.written + b.written) == sorted(names) and not set(a.written) & set(b.written)
    assert a.left_out == b.left_out == {}
    # A publisher that lost a table's race released the pins it took for it.
    assert a.pins_taken - a.pins_released + b.pins_taken - b.pins_released == len(names)
    catalog = catalog_of(url)
    published = {name: json.loads(catalog.load_table(name).properties["ledger.pins"])["1"] for name in names}
    assert {p.id for p in ledger.pins()} == set(published.values())  # the loser's pins released


def test_r26_a_publication_killed_mid_way_leaves_every_table_at_its_old_or_new_snapshot(
        ledger, ledger_path, tmp_path) -> None:
    import sqlite3
    import time
    names = [f"sales.t{n:02d}" for n in range(40)]
    for name in names:
        write(ledger, name, ORDERS, partition_by=("region",))
    where = tmp_path / "catalog.db"
    script = ("import arrow_ops; from ledger import Ledger\n"
              f"with Ledger.open({str(ledger_path)!r}, max_clock_skew=None, actor='killed') as led:\n"
              f"    arrow_ops.publish(led, {str(where)!r})\n")
    child = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        try:
            with sqlite3.connect(where) as db:
                if db.execute("SELECT count(*) FROM iceberg_tables").fetchone()[0] >= 3:
                    break
        except sqlite3.Error:
            pass
        time.sleep(0.005)
    child.kill()
    child.wait()
    catalog = catalog_of(where)
    landed = catalog.list_tables("sales")
    assert landed  # it was killed after some tables landed ...
    for namespace, table in landed:  # ... and each of those reads whole
        assert ids(catalog.load_table((namespace, table)).scan().to_arrow()) == [1, 2, 3, 4, 5, 6]
    # The next publication finishes the job.
    report = arrow_ops.publish(ledger, str(where))
    assert set(report.written) | set(report.unchanged) == set(names)
    assert len(catalog.list_tables("sales")) == len(names)
    # Each table was pinned just before its metadata named the pins: the kill left the pins of
    # the one table in flight at most, not those of every table still to publish (7 days each).
    shown = {p for name in names for p in json.loads(catalog.load_table(name).properties["ledger.pins"]).values()}
    left = [p for p in ledger.pins() if p.live and p.id not in shown]
    assert len({p.table for p in left}) <= 1, left


# --- what cannot be published is left out, with a warning that says why ----------------------------

def test_r26_a_table_whose_partitioning_changed_is_left_out_with_a_warning_and_the_others_published(
        ledger, clock, tmp_path, caplog) -> None:
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    clock.advance(HOUR)
    write(ledger, TABLE, ORDERS, partition_by=("day",), mode="overwrite")
    write(ledger, "sales.fine", ORDERS)
    write(ledger, "hr.people", ORDERS)
    with caplog.at_level("WARNING", logger="arrow_ops.iceberg"):
        report = arrow_ops.publish(ledger, str(tmp_path / "catalog.db"), database="sales")
    assert report.written == ("sales.fine",)  # hr is another database: not asked for
    assert "partitioned differently" in report.left_out[TABLE] and TABLE not in report.removed
    assert f"{TABLE} is not published: its kept versions are partitioned differently" in caplog.text
    assert [p.table for p in ledger.pins()] == ["sales.fine"]  # nothing pinned for what was left out
    assert arrow_ops.publish(ledger, str(tmp_path / "catalog.db"), tables=["hr.people"]).written == ("hr.people",)


def test_r26_without_pyiceberg_publish_says_in_one_line_which_extra_to_install(tmp_path: Path) -> None:
    script = ("import sys; sys.modules['pyiceberg'] = None\n"
              "import arrow_ops; from ledger import ExtraMissing, Ledger\n"
              f"led = Ledger.open({str(tmp_path / 'l.db')!r})\n"
              "try:\n    arrow_ops.publish(led, 'catalog.db')\n"
              "except ExtraMissing as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out == "pyiceberg is not installed: pip install 'retention-ledger[iceberg]'\n"


def test_r26_a_published_table_that_can_no_longer_be_published_leaves_the_catalog(ledger, clock, tmp_path) -> None:
    where = str(tmp_path / "catalog.db")
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    arrow_ops.publish(ledger, where)
    clock.advance(HOUR)
    write(ledger, TABLE, ORDERS, partition_by=("day",), mode="overwrite")
    report = arrow_ops.publish(ledger, where)
    assert report.removed == (TABLE,) and TABLE in report.left_out
    assert catalog_of(tmp_path / "catalog.db").list_tables("sales") == [] and ledger.pins() == []


# --- the ledger's record of its publications (R25, R26) -------------------------------------------

def test_r23_r26_each_publication_is_on_record_without_its_password_and_once_while_nothing_changes(
        ledger, tmp_path) -> None:
    write(ledger, TABLE, ORDERS)
    write(ledger, "sales.items", ORDERS.select(["id"]))
    server = shared()
    role = server.password_role("pub-Pa55word")
    url = shared().database("iceberg").replace("postgres@", f"{role}:pub-Pa55word@")
    arrow_ops.publish(ledger, url, metadata=str(tmp_path / "pg-iceberg"))
    arrow_ops.publish(ledger, tmp_path / "catalog.db", tables=[TABLE])
    [pg, lite] = ledger.publications()
    assert "pub-Pa55word" not in repr(ledger.publications()) and f"{role}@" in pg.catalog
    assert (pg.catalog_name, pg.metadata, sorted(pg.tables)) == ("ledger", str(tmp_path / "pg-iceberg"), ["sales.items", TABLE])
    assert (lite.catalog, lite.metadata, lite.tables) == (f"sqlite:///{tmp_path / 'catalog.db'}",
                                                          str(tmp_path / "catalog.iceberg"), (TABLE,))
    assert [p.catalog for p in ledger.publications(table_id=ledger.table("sales.items").id)] == [pg.catalog]
    events = ledger.event_count()
    arrow_ops.publish(ledger, tmp_path / "catalog.db", tables=[TABLE])
    assert ledger.event_count() == events  # nothing changed: nothing appended
    [entry] = [e for e in ledger.history(TABLE) if e.type == "TablesPublished"][-1:]
    assert "published 1 table to readers of catalog 'ledger' at sqlite:///" in entry.text


def test_r23_a_publication_with_a_password_or_an_unknown_table_is_refused_and_nothing_recorded(ledger) -> None:
    from ledger import InvalidArgument
    write(ledger, TABLE, ORDERS)
    table_id = ledger.table(TABLE).id
    events = ledger.event_count()
    with pytest.raises(InvalidArgument, match="password"):
        ledger.record_publication("postgresql://me:secret@host/db", "ledger", "/m", [table_id])
    with pytest.raises(InvalidArgument, match="does not know: nope"):
        ledger.record_publication("sqlite:////c.db", "ledger", "/m", [table_id, "nope"])
    with pytest.raises(InvalidArgument, match="empty"):
        ledger.record_publication("sqlite:////c.db", "", "/m", [table_id])
    assert ledger.event_count() == events and ledger.publications() == []


def test_r26_the_command_line_publishes_and_lists_the_publications(ledger, ledger_path, tmp_path) -> None:
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    ledger.close()
    catalog = tmp_path / "catalog.db"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "retention_ledger", "--ledger", str(ledger_path), *args],
                              capture_output=True, text=True, cwd=REPO)

    done = cli("publish", "--iceberg", str(catalog), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["written"] == [TABLE]
    assert cli("publish", "--iceberg", str(catalog)).stdout.startswith(
        f"published to sqlite:///{catalog} (catalog 'ledger'): 0 written, 1 unchanged")
    [listed] = json.loads(cli("publications", "--json").stdout)
    assert (listed["catalog"], listed["tables"]) == (f"sqlite:///{catalog}", [TABLE])
    assert ids(catalog_of(catalog).load_table(TABLE).scan().to_arrow()) == [1, 2, 3, 4, 5, 6]
    refused = cli("publish", "--iceberg", "postgresql://me:hunter2-secret@127.0.0.1:1/x", "--metadata", str(tmp_path))
    assert refused.returncode == 1 and refused.stderr.startswith("error: CatalogUnavailable: ")
    assert "hunter2-secret" not in refused.stderr + refused.stdout and len(refused.stderr.splitlines()) == 1


def test_r26_metadata_a_publication_superseded_a_day_ago_is_deleted_by_the_next_and_the_data_never(
        ledger, tmp_path) -> None:
    write(ledger, TABLE, ORDERS)
    catalog = tmp_path / "catalog.db"
    arrow_ops.publish(ledger, catalog)
    folder = tmp_path / "catalog.iceberg" / ledger.table(TABLE).id / "metadata"
    first = set(folder.iterdir())
    day_and_more = os.path.getmtime(catalog) - 2 * 86_400
    for path in first:  # as if published two days ago
        os.utime(path, (day_and_more, day_and_more))
    write(ledger, TABLE, ORDERS.slice(0, 1))
    arrow_ops.publish(ledger, catalog)
    now = set(folder.iterdir())
    assert not first & now and now  # the old metadata gone, the new one there
    assert ids(catalog_of(catalog).load_table(TABLE).scan().to_arrow()) == [1, 1, 2, 3, 4, 5, 6]
    data = [Path(ledger.table(TABLE).location, f.path) for f in ledger.version(TABLE).files]
    assert all(p.exists() for p in data)
    # A day has not passed since this publication replaced those: the next leaves them.
    write(ledger, TABLE, ORDERS.slice(1, 1))
    arrow_ops.publish(ledger, catalog)
    assert now < set(folder.iterdir())


def test_r23_r25_r26_a_publication_by_instance_follows_it_under_a_new_name_and_no_password_form_is_kept(
        ledger, tmp_path, monkeypatch) -> None:
    from ledger import InvalidArgument
    write(ledger, TABLE, ORDERS)
    table_id = ledger.table(TABLE).id
    monkeypatch.chdir(tmp_path)
    arrow_ops.publish(ledger, "sqlite:///relative.db")  # recorded absolute: a republication from elsewhere finds it
    [found] = ledger.publications()
    assert found.catalog == f"sqlite:///{tmp_path / 'relative.db'}"
    ledger.drop_table(TABLE)
    ledger.undrop_table(TABLE, new_name="sales.renamed")
    report = arrow_ops.publish(ledger, found.catalog, metadata=found.metadata, table_ids=[table_id])
    assert (report.written, report.removed) == (("sales.renamed",), (TABLE,))
    assert [t[1] for t in catalog_of(tmp_path / "relative.db").list_tables("sales")] == ["renamed"]
    # A password in the query string (libpq takes it there too) is never shown nor kept.
    url = shared().database("iceberg").replace("postgres@", f"{shared().password_role('q-Pa55')}@") + "?password=q-Pa55"
    report = arrow_ops.publish(ledger, url, metadata=str(tmp_path / "pg"))
    assert "q-Pa55" not in report.catalog and "q-Pa55" not in repr(ledger.publications())
    # Another catalog's metadata folder is refused: a publication prunes its own folder only.
    with pytest.raises(InvalidArgument, match="metadata folder .* holds the Iceberg metadata of catalog"):
        arrow_ops.publish(ledger, tmp_path / "other.db", metadata=str(tmp_path / "pg"))


@pytest.mark.parametrize("bad, error, said", [
    ({"catalog_name": ""}, "InvalidArgument", "the catalog name must be a non-empty text"),
    ({"metadata": " "}, "InvalidArgument", "metadata= must name a folder"),
    ({"lease": "8d"}, "InvalidArgument", "a publication's pins hold for its lease, which must be from 1 second to 7 days"),
    ({"metadata": "<table>"}, "InvalidArgument", "is inside the ledger's warehouse"),
    ({"metadata": "<warehouse>/meta"}, "InvalidArgument", "is inside the ledger's warehouse"),
    ({"tables": ["sales.nope"]}, "TableNotFound", "no table sales.nope in the ledger, live or dropped"),
    ({"tables": ["nope"]}, "InvalidName", "nope"),
    ({"database": "nope"}, "TableNotFound", "no table was ever in database nope"),
])
def test_r26_a_publication_that_could_only_fail_or_publish_nothing_is_refused_before_any_pin_or_record(
        ledger, tmp_path, bad, error, said) -> None:
    """A tester's empty catalog name was refused only after the tables were pinned (for 7 days, and
    no later publication released them); a metadata folder inside the warehouse was accepted, and a
    purge then deleted the other tables' Iceberg metadata with its table's files; an unknown table
    or database published nothing and said it had succeeded."""
    write(ledger, TABLE, ORDERS)
    where = tmp_path / "catalog.db"
    events, pins = ledger.event_count(), ledger.pins()
    options = dict(bad)
    if options.get("metadata") == "<table>":
        options["metadata"] = ledger.table(TABLE).location
    elif str(options.get("metadata", "")).startswith("<warehouse>"):
        options["metadata"] = options["metadata"].replace("<warehouse>", ledger.warehouse)
    with pytest.raises(Exception) as refused:
        arrow_ops.publish(ledger, str(where), **options)
    assert type(refused.value).__name__ == error and said in str(refused.value), refused.value
    assert ledger.event_count() == events and ledger.pins() == pins and not where.exists()


def test_r25_r26_after_an_erasure_no_metadata_the_catalog_showed_before_is_left_to_read(ledger, clock, tmp_path) -> None:
    """A tester read the erased rows after the erasure's republication through the catalog row's
    ``previous_metadata_location``, and found the person in the old manifests' column bounds after
    the request was done (superseded metadata stayed a day, or for good while nothing changed).
    Now the publication that follows an erasure clears that pointer and deletes, at once, every
    metadata file of the table its metadata does not name."""
    import sqlite3
    from pyiceberg.table import StaticTable
    where = tmp_path / "catalog.db"
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    clock.advance(HOUR)
    arrow_ops.publish(ledger, str(where))
    replaced = write(ledger, TABLE, ORDERS.slice(1), partition_by=("region",), mode="overwrite")
    arrow_ops.publish(ledger, str(where))  # before the request: v1 and v2 shown, v1's metadata kept a day
    table = ledger.table(TABLE)
    [held] = [f for f in ledger.version(TABLE, version=1).files if "region=eu" in f.path]
    key = os.path.relpath(os.path.join(table.location, held.path), ledger.warehouse)
    ledger.request_erasure(TABLE, reason="ticket 7", predicate="id = 1", files=[(key, held.size)], replaced_by=replaced)
    assert arrow_ops.publish(ledger, str(where)).written == (TABLE,)
    with sqlite3.connect(where) as db:
        [(current, previous)] = db.execute("SELECT metadata_location, previous_metadata_location FROM iceberg_tables")
    assert previous is None
    folder = tmp_path / "catalog.iceberg" / table.id / "metadata"
    assert [p.name for p in folder.glob("*.metadata.json")] == [Path(current).name]
    shown = StaticTable.from_metadata(current)
    assert [s.summary["ledger.version"] for s in shown.snapshots()] == [str(replaced)]
    assert ids(shown.scan().to_arrow()) == [2, 3, 4, 5, 6]
    manifests = {Path(m.manifest_path).name for s in shown.snapshots() for m in s.manifests(shown.io)}
    lists = {Path(s.manifest_list).name for s in shown.snapshots()}
    assert {p.name for p in folder.iterdir()} == manifests | lists | {Path(current).name}


def test_r23_an_ssl_keys_password_a_stray_at_or_several_hosts_in_a_catalog_address_is_never_shown_or_kept(
        ledger, tmp_path) -> None:
    """A fleet operator found ``?sslpassword=`` recorded in the chain (for good) and shown in the
    report, the CLI and ``publications()``; a password with an unencoded ``@`` shown in the error
    (SQLAlchemy took the rest of it for the host); several hosts a bare ``ValueError``."""
    from ledger import InvalidArgument
    write(ledger, TABLE, ORDERS)
    server = shared()
    events = ledger.event_count()
    for address in (f"postgresql://{PASSWORD_ROLE}:ab@Zq7Secret99@127.0.0.1:{server.port}/postgres",
                    f"postgresql://{PASSWORD_ROLE}:Zq7Secret99@127.0.0.1:{server.port},127.0.0.1:1/postgres"):
        with pytest.raises(InvalidArgument) as refused:
            arrow_ops.publish(ledger, address, metadata=str(tmp_path / "never"))
        assert "Zq7Secret99" not in str(refused.value) and "nothing was published" in str(refused.value)
    assert ledger.event_count() == events and ledger.pins() == [] and not (tmp_path / "never").exists()
    with pytest.raises(InvalidArgument, match="SSL key's password"):
        ledger.record_publication("postgresql://u@h/db?SSLPassword=Zq7Secret99", "ledger", "/m", [])
    url = server.database("iceberg_ssl") + "?sslpassword=Zq7Secret99"
    report = arrow_ops.publish(ledger, url, metadata=str(tmp_path / "pg"))
    assert report.written == (TABLE,) and "Zq7Secret99" not in repr(report)
    assert "Zq7Secret99" not in repr(ledger.publications()) and "Zq7Secret99" not in json.dumps(
        [e.data for e in ledger.history(type="TablesPublished")])
