"""R26 in this process: a version as a ``pyarrow`` dataset, and a ledger's tables by name in DuckDB.

Real components only: ledgers on a real SQLite file and a real PostgreSQL server (every test that
takes ``ledger`` runs on both), real Parquet files written in Spark's layout (a write's folder,
``column=value`` folders escaped as Spark escapes them), real DuckDB and Polars. The tests that
need Spark (a vacuum, an erasure) take the session's SparkSession; the rest need no JVM, as a
user of these engines needs none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import arrow_ops
from arrow_ops.files import filesystem_for
from ledger import (
    ExtraMissing, InvalidArgument, Ledger, TableDataMissing, TableNotFound, VersionExpired,
)
from tests.conftest import T0

BOTH_STORES = True
REPO = Path(__file__).resolve().parent.parent
TABLE = "sales.orders"
HOUR = timedelta(hours=1)

_SPARK_TYPES = {pa.int64(): "long", pa.int32(): "integer", pa.string(): "string", pa.float64(): "double",
                pa.date32(): "date", pa.bool_(): "boolean", pa.timestamp("us", tz="UTC"): "timestamp"}
_ESCAPED = set('"#%\'*/:=?\\{[]^') | {chr(c) for c in range(32)} | {"\x7f"}


def spark_json(schema: pa.Schema) -> str:
    """The schema as Spark records it (its StructType's JSON), as a Spark writer would give it."""
    return json.dumps({"type": "struct", "fields": [
        {"name": f.name, "type": _SPARK_TYPES[f.type], "nullable": True, "metadata": {}} for f in schema]},
        separators=(",", ":"))


def folder_text(value: object) -> str:
    """A partition value's folder text, escaped as Spark escapes it."""
    if value is None or value == "":
        return "__HIVE_DEFAULT_PARTITION__"
    if isinstance(value, datetime):  # as Spark writes a timestamp: in its session's zone (UTC here), no offset
        value = value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in str(value))


def write(led: Ledger, name: str, rows: pa.Table, *, partition_by: tuple[str, ...] = (), mode: str = "append",
          files_per_part: int = 1) -> int:
    """Write ``rows`` as a writer on Spark does: a registered write, one folder a partition, the
    partition columns only in the folder names, committed with the recorded schema. On whatever
    filesystem the warehouse is (a local folder, a bucket)."""
    if not any(t.name == name for t in led.tables()):
        led.create_table(name)
    write = led.begin_write(name)
    filesystem, base = filesystem_for(led.table(name).location)
    files = []
    keys = [tuple(r[c] for c in partition_by) for r in rows.select(list(partition_by)).to_pylist()] \
        if partition_by else [()] * rows.num_rows
    data = rows.drop_columns(list(partition_by))
    for n, key in enumerate(sorted(set(keys), key=repr)):
        chosen = data.filter(pa.array([k == key for k in keys]))
        folder = "/".join(f"{c}={folder_text(v)}" for c, v in zip(partition_by, key))
        cuts = [part * chosen.num_rows // files_per_part for part in range(files_per_part + 1)]
        for part in range(files_per_part):
            rel = "/".join(x for x in (write.relative_folder, folder, f"part-{n:05d}-{part}.parquet") if x)
            files.append((rel, put(filesystem, f"{base}/{rel}", chosen.slice(cuts[part], cuts[part + 1] - cuts[part]))))
    version = led.commit_write(write.id, files, mode=mode, schema=spark_json(rows.schema), partition_by=partition_by)
    return version.number


def put(filesystem, path: str, rows: pa.Table) -> int:
    """Write ``rows`` as one Parquet file at ``path``; its size. Into a bucket in one request (the
    test server fails Arrow's multipart uploads)."""
    if filesystem.type_name == "local":
        filesystem.create_dir(path.rsplit("/", 1)[0])
        pq.write_table(rows, path, filesystem=filesystem)
        return filesystem.get_file_info(path).size
    import boto3
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink)
    bucket, _, key = path.partition("/")
    boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).put_object(
        Bucket=bucket, Key=key, Body=sink.getvalue().to_pybytes())
    return sink.getvalue().size


ORDERS = pa.table({
    "id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
    "amount": pa.array([1.5, 2.5, 3.5, 4.5, 5.5, 6.5]),
    "region": pa.array(["eu", "a/b%c", None, 'q"\'=:', "x+y z", "007"]),
    "day": pa.array([date(2024, 1, 1)] * 3 + [date(2024, 1, 2)] * 3, pa.date32()),
})


def append_a_new_column(led: Ledger) -> None:
    """Append row 9 with a column ``note`` the table did not have, as ``merge_schema=True`` does."""
    wider = pa.table({"id": pa.array([9], pa.int64()), "amount": [9.5], "note": ["new"]})
    write = led.begin_write(TABLE)
    path = Path(led.table(TABLE).location, write.relative_folder, "part-0.parquet")
    path.parent.mkdir(parents=True)
    pq.write_table(wider, path)
    led.commit_write(write.id, [(f"{write.relative_folder}/part-0.parquet", path.stat().st_size)],
                     schema=spark_json(wider.schema), merge_schema=True, merged_from=led.version(TABLE).schema)


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


# --- a version as a dataset ------------------------------------------------------------------

def test_r26_a_version_as_a_dataset_reads_exactly_its_files_with_partition_values_typed_as_recorded(ledger) -> None:
    write(ledger, TABLE, ORDERS, partition_by=("region", "day"))
    data = arrow_ops.dataset(ledger, TABLE)
    assert data.schema == pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("region", pa.string()),
                                     ("day", pa.date32())])
    rows = {r["id"]: r for r in data.to_table().to_pylist()}
    assert {i: (r["region"], r["day"]) for i, r in rows.items()} == {
        1: ("eu", date(2024, 1, 1)), 2: ("a/b%c", date(2024, 1, 1)), 3: (None, date(2024, 1, 1)),
        4: ('q"\'=:', date(2024, 1, 2)), 5: ("x+y z", date(2024, 1, 2)), 6: ("007", date(2024, 1, 2))}
    # A filter on a partition column is answered from the values the files carry: the other files stay unread.
    assert data.count_rows(filter=pc.field("region") == "a/b%c") == 1
    assert len(list(data.get_fragments(filter=pc.field("region") == "007"))) == 1
    assert data.count_rows(filter=pc.field("region").is_null()) == 1


def test_r26_time_travel_by_version_and_by_time_and_each_read_is_pinned(ledger, clock) -> None:
    write(ledger, TABLE, ORDERS.slice(0, 2))
    clock.advance(HOUR)
    write(ledger, TABLE, ORDERS.slice(2, 3), mode="overwrite")
    assert ids(arrow_ops.dataset(ledger, TABLE).to_table()) == [3, 4, 5]
    assert ids(arrow_ops.dataset(ledger, TABLE, version=1).to_table()) == [1, 2]
    assert ids(arrow_ops.dataset(ledger, TABLE, as_of=T0 + timedelta(minutes=30)).to_table()) == [1, 2]
    assert sorted(p.version for p in ledger.pins(TABLE)) == [1, 1, 2]
    # Each ends a lease after it was taken (its end is the decision's now plus the lease; the event's time a hair later).
    assert all(HOUR - timedelta(milliseconds=1) <= p.expires_at - p.taken_at <= HOUR for p in ledger.pins(TABLE))


def test_r21_r26_reading_holds_its_pin_for_the_block_and_releases_it_after(ledger) -> None:
    write(ledger, TABLE, ORDERS)
    with arrow_ops.reading(ledger, TABLE) as data:
        [pin] = ledger.pins(TABLE)
        assert (pin.version, pin.live) == (1, True)
        assert pl.scan_pyarrow_dataset(data).filter(pl.col("region") == "eu").collect()["id"].to_list() == [1]
        assert duckdb.sql("SELECT sum(amount) FROM data").fetchone() == (24.0,)
    assert ledger.pins(TABLE) == []


def test_r26_a_column_a_merge_added_reads_as_null_in_older_files(ledger) -> None:
    write(ledger, TABLE, ORDERS.select(["id", "amount"]))
    append_a_new_column(ledger)
    rows = arrow_ops.dataset(ledger, TABLE).to_table().sort_by("id").to_pylist()
    assert [(r["id"], r["note"]) for r in rows] == [(i, None) for i in range(1, 7)] + [(9, "new")]


def test_r26_bad_reads_are_refused_before_anything_is_read_and_leave_no_pin(ledger) -> None:
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    ledger.create_table("sales.empty")
    with pytest.raises(TableNotFound, match="no version yet"):
        arrow_ops.dataset(ledger, "sales.empty")
    with pytest.raises(TableNotFound):
        arrow_ops.dataset(ledger, "sales.nothing")
    version = ledger.version(TABLE)
    Path(ledger.table(TABLE).location, version.files[0].path).unlink()
    with pytest.raises(TableDataMissing, match="which is not there"):
        arrow_ops.dataset(ledger, TABLE)
    assert [p for p in ledger.pins() if p.live] == []


def test_r26_a_missing_engine_says_in_one_line_which_extra_to_install(tmp_path: Path) -> None:
    script = (  # a process where ``import duckdb`` fails, as it does where the extra was left out
        "import sys; sys.modules['duckdb'] = None\n"
        "import arrow_ops\nfrom ledger import Ledger, ExtraMissing\n"
        f"led = Ledger.open({str(tmp_path / 'l.db')!r})\n"
        "try:\n    arrow_ops.attach(object(), led)\nexcept ExtraMissing as exc:\n    print(exc)\n"
        "print(len(led.pins()), led.event_count())\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.splitlines() == ["duckdb is not installed: pip install 'retention-ledger[duckdb]'", "0 0"]
    assert issubclass(ExtraMissing, ImportError)


# --- DuckDB by name --------------------------------------------------------------------------

@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def plan(con, query: str) -> str:
    return "\n".join(row[1] for row in con.execute(f"EXPLAIN {query}").fetchall())


def test_r26_attach_names_every_live_table_over_exactly_its_versions_files_with_duckdbs_own_reader(ledger, con) -> None:
    write(ledger, TABLE, ORDERS, partition_by=("region",))
    write(ledger, "sales.items", ORDERS.select(["id", "amount"]))
    write(ledger, "hr.people", ORDERS.select(["id"]))
    ledger.drop_table("hr.people")
    assert arrow_ops.attach(con, ledger) == ["sales.items", TABLE]
    assert con.sql("SELECT count(*), sum(amount) FROM sales.orders").fetchone() == (6, 24.0)
    assert con.sql("SELECT id FROM sales.orders WHERE region = 'a/b%c'").fetchall() == [(2,)]
    assert con.sql("SELECT id FROM sales.orders WHERE region = '007'").fetchall() == [(6,)]
    assert con.sql("SELECT id FROM sales.orders WHERE region IS NULL").fetchall() == [(3,)]
    assert "READ_PARQUET" in plan(con, "SELECT * FROM sales.orders").upper().replace(" ", "_") \
        or "PARQUET_SCAN" in plan(con, "SELECT * FROM sales.orders").upper()
    assert [c[0] for c in con.sql("DESCRIBE sales.orders").fetchall()] == ["id", "amount", "region", "day"]
    assert {(p.table, p.version) for p in ledger.pins() if p.live} == {(TABLE, 1), ("sales.items", 1)}
    with pytest.raises(duckdb.CatalogException):
        con.sql("SELECT * FROM hr.people")


def test_r26_attach_follows_this_ledgers_changes_at_once_and_others_after_refresh(ledger, ledger_path, clock, con) -> None:
    write(ledger, TABLE, ORDERS.slice(0, 2))
    arrow_ops.attach(con, ledger)
    write(ledger, TABLE, ORDERS.slice(2, 2))  # through the attached ledger: followed before the write returns
    assert ids(con.sql("SELECT id FROM sales.orders").to_arrow_table()) == [1, 2, 3, 4]
    assert [(p.version, p.live) for p in ledger.pins(TABLE) if p.live] == [(2, True)]
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=None, actor="other") as other:
        write(other, TABLE, ORDERS.slice(5, 1), mode="overwrite")
        write(other, "sales.items", ORDERS.select(["id"]))
    assert ids(con.sql("SELECT id FROM sales.orders").to_arrow_table()) == [1, 2, 3, 4]  # held, until asked
    assert arrow_ops.refresh(con, ledger) == ["sales.items", TABLE]
    assert ids(con.sql("SELECT id FROM sales.orders").to_arrow_table()) == [6]
    assert sorted((p.table, p.version) for p in ledger.pins() if p.live) == [("sales.items", 1), (TABLE, 3)]
    ledger.drop_table(TABLE)
    assert con.sql("SELECT count(*) FROM duckdb_views() WHERE view_name = 'orders'").fetchone() == (0,)
    assert arrow_ops.detach(con, ledger) == ["sales.items"]
    assert [p for p in ledger.pins() if p.live] == []
    assert con.sql("SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'sales'").fetchone() == (0,)


def test_r26_the_ledgers_history_versions_and_dropped_tables_in_duckdb_sql(ledger, clock, con) -> None:
    write(ledger, TABLE, ORDERS.slice(0, 2))
    clock.advance(HOUR)
    write(ledger, TABLE, ORDERS.slice(2, 2), mode="overwrite")
    write(ledger, "sales.gone", ORDERS.select(["id"]))
    ledger.drop_table("sales.gone")
    arrow_ops.attach(con, ledger)
    assert con.sql("SELECT number, mode, file_count, current FROM ledger_versions('sales.orders')").fetchall() == [
        (1, "append", 1, False), (2, "overwrite", 1, True)]
    assert [r[0] for r in con.sql("SELECT type FROM ledger_history('sales.orders')").fetchall()] == [
        "TableCreated", "WriteBegun", "VersionCommitted", "WriteBegun", "VersionCommitted"]
    assert "PinTaken" in {r[0] for r in con.sql("SELECT type FROM ledger_history('sales.orders', pins := true)").fetchall()}
    assert con.sql("SELECT name FROM ledger_dropped_tables()").fetchall() == [("sales.gone",)]
    assert con.sql("SELECT name FROM ledger_dropped_tables(within := 'hr')").fetchall() == []
    write(ledger, TABLE, ORDERS.slice(4, 1))  # followed: the functions too
    assert con.sql("SELECT max(number) FROM ledger_versions('sales.orders')").fetchone() == (3,)
    assert con.sql("SELECT count(*) FROM ledger_erasures()").fetchone() == (0,)
    # Undropped under a new name, an instance brings its past along, and the name shows it at once.
    ledger.undrop_table("sales.gone", new_name="sales.back")
    assert [r[0] for r in con.sql("SELECT type FROM ledger_history('sales.back')").fetchall()] == [
        "TableCreated", "WriteBegun", "VersionCommitted", "TableDropped", "TableUndropped"]
    assert con.sql("SELECT count(*) FROM sales.back").fetchone() == (6,)
    assert con.sql("SELECT name FROM ledger_dropped_tables()").fetchall() == []


def test_r26_attach_never_replaces_a_name_of_the_users_and_a_second_ledger_is_refused(ledger, tmp_path, con) -> None:
    write(ledger, TABLE, ORDERS)
    write(ledger, "sales.items", ORDERS.select(["id"]))
    con.execute("CREATE SCHEMA sales; CREATE TABLE sales.items AS SELECT 42 AS answer")
    assert arrow_ops.attach(con, ledger) == [TABLE]  # sales.items is the user's: left as it is, with a warning
    assert con.sql("SELECT answer FROM sales.items").fetchall() == [(42,)]
    assert [(p.table) for p in ledger.pins() if p.live] == [TABLE]
    with Ledger.open(tmp_path / "other.db") as other:
        events = other.event_count()
        with pytest.raises(InvalidArgument, match="another ledger"):
            arrow_ops.attach(con, other)
        assert other.event_count() == events and other.pins() == []
    with pytest.raises(TableNotFound, match="not attached"):
        arrow_ops.refresh(duckdb.connect(), ledger)
    arrow_ops.detach(con, ledger)
    assert con.sql("SELECT answer FROM sales.items").fetchall() == [(42,)]  # the user's schema stays


def test_r26_a_table_whose_schema_a_merge_widened_is_read_through_arrow(ledger, con) -> None:
    write(ledger, TABLE, ORDERS.select(["id", "amount"]))
    append_a_new_column(ledger)
    arrow_ops.attach(con, ledger)
    assert con.sql("SELECT count(*), count(note) FROM sales.orders").fetchone() == (7, 1)
    assert "ARROW_SCAN" in plan(con, "SELECT * FROM sales.orders").upper()


def test_r26_partition_values_duckdbs_folder_parsing_would_misread_are_read_as_recorded(ledger, con) -> None:
    stamps = pa.array([datetime(2024, 1, 1, 10, 30, tzinfo=timezone.utc)] * 2, pa.timestamp("us", tz="UTC"))
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "region": ["NULL", None], "ts": stamps})
    write(ledger, TABLE, rows, partition_by=("region", "ts"))
    # DuckDB's own reader takes a folder "NULL" for null and a timestamp in the connection's zone:
    # this name reads through Arrow, with the values the ledger's file list holds.
    con.execute("SET TimeZone = 'America/New_York'")
    arrow_ops.attach(con, ledger)
    assert con.sql("SELECT id, region, epoch(ts) FROM sales.orders ORDER BY id").fetchall() == [
        (1, "NULL", 1704105000.0), (2, None, 1704105000.0)]
    assert "ARROW_SCAN" in plan(con, "SELECT * FROM sales.orders").upper()
    assert arrow_ops.dataset(ledger, TABLE).to_table().sort_by("id").column("region").to_pylist() == ["NULL", None]


def test_r21_a_connection_closed_without_detach_lets_its_pins_go_at_the_next_change(ledger) -> None:
    write(ledger, TABLE, ORDERS)
    connection = duckdb.connect()
    arrow_ops.attach(connection, ledger)
    assert [p.table for p in ledger.pins() if p.live] == [TABLE]
    connection.close()
    write(ledger, TABLE, ORDERS.slice(0, 1))  # followed: the connection is gone, so are its pins
    assert [p for p in ledger.pins() if p.live] == []


def test_r26_views_left_in_a_duckdb_file_read_nothing_once_their_connection_closed(ledger, clock, tmp_path) -> None:
    """A tester's DuckDB file kept the views after its connection closed without ``detach``, and
    read them with no pin: the expired version, then files the vacuum had deleted. A view now reads
    through a name of its connection's own (a temporary macro, or a registered dataset), so once the
    connection has gone the view reads nothing; the next attach replaces it, and detach removes it."""
    write(ledger, TABLE, ORDERS)
    write(ledger, "sales.wide", ORDERS.select(["id"]))
    append_a_new_column(ledger)  # read through Arrow: a schema a merge widened
    where = str(tmp_path / "user.duckdb")
    connection = duckdb.connect(where)
    assert arrow_ops.attach(connection, ledger) == [TABLE, "sales.wide"]
    assert connection.sql("SELECT count(*) FROM sales.orders").fetchone() == (7,)
    connection.close()
    write(ledger, TABLE, ORDERS.slice(0, 1), mode="overwrite")  # followed: its pins go
    ledger.advance_retention_mark(TABLE, ledger.version(TABLE, version=1).committed_at)
    assert [v.expired for v in ledger.versions(TABLE)] == [False, False, True]  # newest first
    assert [p for p in ledger.pins() if p.live] == []
    reopened = duckdb.connect(where)
    try:
        for name in ("sales.orders", "sales.wide"):
            with pytest.raises(duckdb.CatalogException, match="__ledger_"):
                reopened.sql(f"SELECT * FROM {name}").fetchall()
        assert arrow_ops.attach(reopened, ledger) == [TABLE, "sales.wide"]
        assert reopened.sql("SELECT id FROM sales.orders").fetchall() == [(1,)]
        arrow_ops.detach(reopened, ledger)
        assert reopened.sql("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone() == (0,)
    finally:
        reopened.close()


def test_r26_attach_to_a_closed_connection_or_no_connection_is_refused_and_records_nothing(ledger) -> None:
    write(ledger, TABLE, ORDERS)
    closed = duckdb.connect()
    closed.close()
    events = ledger.event_count()
    with pytest.raises(InvalidArgument, match=r"^this DuckDB connection cannot run a query \(.*closed.*\): attach "):
        arrow_ops.attach(closed, ledger)
    with pytest.raises(InvalidArgument, match="^attach takes a DuckDB connection .*, not a object; nothing was recorded"):
        arrow_ops.attach(object(), ledger)
    assert ledger.event_count() == events and ledger.pins() == []


def test_r21_refresh_of_a_closed_connection_is_refused_and_detach_of_one_lets_its_pins_go(ledger) -> None:
    write(ledger, TABLE, ORDERS)
    for ending in ("refresh", "detach"):
        connection = duckdb.connect()
        arrow_ops.attach(connection, ledger)
        assert [p.table for p in ledger.pins() if p.live] == [TABLE]
        connection.close()
        if ending == "refresh":
            with pytest.raises(InvalidArgument, match="^this DuckDB connection was closed, and the ledger's names "
                                                      r"with it \(their pins are released now\)"):
                arrow_ops.refresh(connection, ledger)
        else:
            assert arrow_ops.detach(connection, ledger) == [TABLE]
        assert [p for p in ledger.pins() if p.live] == []
