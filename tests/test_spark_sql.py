"""Tables by name in Spark SQL (``spark_ops.attach``): every live table a view over exactly the
files of the version it shows, pinned while attached (R21), following this process's changes at
once and other processes' after ``refresh``; and the ledger's history as table-valued functions.

Every test that takes ``spark`` runs on a classic session and on a Spark Connect one (R24).

Real components only: the session's local SparkSession and the tests' Spark Connect server, ledgers
on real SQLite files (and a real PostgreSQL server for the secret), real Parquet files, and a
second real process for changes made elsewhere. Each test detaches what it attached: the session
catalog outlives a test.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from ledger import InvalidArgument, Ledger, TableExists, TableNotFound
from ledger.persistence.sqlite import SQLiteStore
from spark_ops import SparkUnavailable, attach, detach, read_table, refresh, vacuum, write_table
from spark_ops.catalog.statements import Statements
from spark_ops.catalog.text import partition_columns, view_text
from spark_ops.session import is_connect

pytestmark = pytest.mark.spark
BOTH_SESSIONS = True

REPO = Path(__file__).resolve().parent.parent
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
WEEK = timedelta(days=7)


@pytest.fixture
def named(spark, ledger: Ledger) -> Iterator[Ledger]:
    """The test's ledger; whatever it attached to the session is detached afterwards."""
    yield ledger
    detach(spark, ledger)


def frame(spark, start: int, count: int, tag: str = "x", parts: int = 1):
    return spark.createDataFrame([(i, f"{tag}-{i}") for i in range(start, start + count)],
                                 "id long, label string").repartition(parts)


def ids(df) -> list[int]:
    return sorted(r["id"] for r in df.collect())


def count(spark, name: str) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0]["n"]


def version_tables(spark) -> list[str]:
    """The tables of the recorded columns that views read on Spark Connect (``spark_catalog``), in
    every attachment's database of them."""
    return [f"{d.name}.{t.name}" for d in spark.catalog.listDatabases() if d.name.startswith("retention_ledger_")
            for t in spark.catalog.listTables(d.name)]


def files_read(df) -> int:
    """How many files the query's scans opened (Spark's own ``numFiles`` metric), after running it:
    from the executed plan's nodes on a classic session, from the metrics a Spark Connect server
    sends with the result on a Connect one."""
    df.collect()
    if is_connect(df.sparkSession):
        nodes = df.executionInfo.metrics._metrics  # PySpark 4 keeps the plan's metrics there, unnamed publicly
        return sum(int(m.value) for node in nodes for m in node.metrics if m.name == "numFiles")

    def walk(node: Any) -> int:
        if node.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            node = node.finalPhysicalPlan()
        found = node.metrics().apply("numFiles").value() if node.metrics().contains("numFiles") else 0
        if node.getClass().getSimpleName().endswith("QueryStageExec"):
            found += walk(node.plan())
        children = node.children().iterator()
        while children.hasNext():
            found += walk(children.next())
        return found
    return walk(df._jdf.queryExecution().executedPlan())


# --- names -----------------------------------------------------------------------------------

def test_attach_names_every_live_table_for_sql_table_and_show_tables(spark, named: Ledger) -> None:
    write_table(frame(spark, 0, 10, parts=2), named, "sales.orders")
    write_table(frame(spark, 100, 3), named, "hr.people")
    named.create_table("sales.empty")  # nothing written yet: nothing to name
    write_table(frame(spark, 0, 1), named, "sales.gone")
    named.drop_table("sales.gone")

    assert attach(spark, named) == ["hr.people", "sales.orders"]
    assert count(spark, "sales.orders") == 10
    assert ids(spark.table("hr.people")) == [100, 101, 102]
    shown = spark.sql("SHOW TABLES IN sales").collect()  # (temporary views of other tests are listed too)
    assert {r["tableName"] for r in shown if not r["isTemporary"]} == {"orders"}
    by_name = sorted(map(tuple, spark.table("sales.orders").collect()))
    assert by_name == sorted(map(tuple, read_table(spark, named, "sales.orders", pin=False).collect()))
    assert spark.table("sales.orders").schema.simpleString() == "struct<id:bigint,label:string>"
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql("SELECT * FROM sales.gone").collect()
    with pytest.raises(AnalysisException):  # a view: writes go through write_table
        spark.sql("INSERT INTO sales.orders VALUES (1, 'x')")


def test_r11_a_file_deleted_under_an_attached_name_fails_its_query_never_fewer_rows(spark, named: Ledger) -> None:
    """A hostile tester deleted one of four files of a version by hand after attach: on a classic
    session the name read 30 rows of 40, no error (its view read one glob of the files, which
    skips what is not there). Each file is now its own relation: a query of the name fails, on
    both kinds of session, until ``refresh`` (or the next attach) leaves the name out."""
    write_table(frame(spark, 0, 40, parts=4), named, "sales.holey")
    version = named.version("sales.holey")
    assert len(version.files) == 4
    attach(spark, named)
    try:
        assert count(spark, "sales.holey") == 40
        Path(named.table("sales.holey").location, version.files[1].path).unlink()  # deleted outside the ledger
        with pytest.raises(Exception, match="PATH_NOT_FOUND|FILE_NOT_EXIST|does not exist"):
            count(spark, "sales.holey")
    finally:
        detach(spark, named)


def test_r11_a_name_reads_exactly_its_versions_files_never_a_straggler(spark, named: Ledger) -> None:
    write_table(frame(spark, 0, 8, parts=2), named, "sales.orders")
    location = named.table("sales.orders").location
    file = named.version("sales.orders").files[0].path
    folder = Path(location, file).parent
    shutil.copy(Path(location, file), folder / "part-99999-straggler.parquet")  # beside the version's files
    shutil.copy(Path(location, file), Path(location, "part-00000-outside.parquet"))  # at the table's root
    attach(spark, named)
    assert count(spark, "sales.orders") == 8
    assert files_read(spark.sql("SELECT * FROM sales.orders")) == len(named.version("sales.orders").files)


def test_tables_of_the_same_columns_each_read_their_own_versions_files(spark, named: Ledger, clock) -> None:
    """On Connect a version's table is made ``LIKE`` another of the same columns (its schema
    copied, its own files named): each name reads its own rows, also once the table it was made
    like is gone and a new one is made like another."""
    for i, name in enumerate(["a.one", "a.two", "b.three"]):
        write_table(frame(spark, 10 * i, i + 1), named, name)
    attach(spark, named)
    assert [ids(spark.table(n)) for n in ("a.one", "a.two", "b.three")] == [[0], [10, 11], [20, 21, 22]]
    clock.advance(HOUR)
    write_table(frame(spark, 100, 2), named, "a.one", mode="overwrite")  # its first table dropped
    write_table(frame(spark, 300, 1), named, "b.four")
    assert [ids(spark.table(n)) for n in ("a.one", "a.two", "b.three", "b.four")] == \
        [[100, 101], [10, 11], [20, 21, 22], [300]]
    assert len(version_tables(spark)) == (4 if is_connect(spark) else 0)


def test_names_follow_this_processs_changes_with_no_second_call(spark, named: Ledger, clock) -> None:
    write_table(frame(spark, 0, 4), named, "sales.orders")
    attach(spark, named)
    clock.advance(HOUR)
    write_table(frame(spark, 100, 2), named, "sales.orders", mode="overwrite")
    assert ids(spark.table("sales.orders")) == [100, 101]
    write_table(frame(spark, 200, 1), named, "sales.orders")
    assert ids(spark.table("sales.orders")) == [100, 101, 200]
    named.restore_table("sales.orders", version=1)
    assert ids(spark.table("sales.orders")) == [0, 1, 2, 3]
    named.drop_table("sales.orders")
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.table("sales.orders").collect()  # a Connect DataFrame is resolved when it runs
    named.undrop_table("sales.orders")
    assert ids(spark.table("sales.orders")) == [0, 1, 2, 3]
    write_table(frame(spark, 7, 1), named, "fresh.table")  # a new table in a new database
    assert ids(spark.table("fresh.table")) == [7]
    # Exactly one pin per name, on the version it shows; on Connect, one table of its version's files.
    pins = sorted((p.table, p.version) for p in named.pins())
    assert pins == [("fresh.table", 1), ("sales.orders", 4)]
    assert len(version_tables(spark)) == (2 if is_connect(spark) else 0)


OTHER = textwrap.dedent("""
    import sys
    from ledger import Ledger
    path = sys.argv[1]
    with Ledger.open(path, actor="other") as led:
        led.drop_table("sales.gone")
        led.restore_table("sales.orders", version=1)
""")


def test_changes_made_by_another_process_are_seen_after_refresh(spark, named: Ledger, ledger_path) -> None:
    if not isinstance(ledger_path, Path):
        pytest.skip("the other process opens the file")
    write_table(frame(spark, 0, 3), named, "sales.orders")
    write_table(frame(spark, 50, 2), named, "sales.orders", mode="overwrite")
    write_table(frame(spark, 9, 1), named, "sales.gone")
    attach(spark, named)
    done = subprocess.run([sys.executable, "-c", OTHER, str(ledger_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ids(spark.table("sales.orders")) == [50, 51]  # what this session was shown, still pinned
    assert ids(spark.table("sales.gone")) == [9]
    assert refresh(spark, named) == ["sales.orders"]
    assert ids(spark.table("sales.orders")) == [0, 1, 2]
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.table("sales.gone").collect()


# --- pins (R21) ------------------------------------------------------------------------------

def test_r21_an_attached_version_is_pinned_and_no_vacuum_expires_it(spark, named: Ledger, ledger_path, clock) -> None:
    write_table(frame(spark, 0, 6, parts=3), named, "sales.orders")
    attach(spark, named, lease="3d")
    shown = named.version("sales.orders")
    # Another Ledger on the same store is "elsewhere": its overwrite is not followed until refresh.
    with Ledger.open(ledger_path, clock=clock, actor="elsewhere") as other:
        clock.advance(HOUR)
        write_table(frame(spark, 100, 1), other, "sales.orders", mode="overwrite")
        clock.advance(DAY + HOUR)
        report = vacuum(spark, other, retention="1d")
    [held] = report.held
    assert (held["name"], held["what"], held["version"]) == ("sales.orders", "expiry", 1)
    assert all(Path(named.table("sales.orders").location, f.path).exists() for f in shown.files)
    assert ids(spark.table("sales.orders")) == list(range(6))  # the query in flight still has its files

    assert refresh(spark, named) == ["sales.orders"]
    assert [(p.table, p.version) for p in named.pins()] == [("sales.orders", 2)]
    assert vacuum(spark, named, retention="1d").held == ()
    assert ids(spark.table("sales.orders")) == [100]
    assert not any(Path(named.table("sales.orders").location, f.path).exists() for f in shown.files)


def test_r21_refresh_renews_the_pins_and_detach_releases_them(spark, named: Ledger, clock) -> None:
    write_table(frame(spark, 0, 2), named, "renewals.orders")
    write_table(frame(spark, 0, 2), named, "renewals.lines")
    attach(spark, named)
    before = {p.table: p.expires_at for p in named.pins()}
    assert set(before) == {"renewals.orders", "renewals.lines"}
    clock.advance(timedelta(minutes=40))
    refresh(spark, named)
    after = {p.table: p.expires_at for p in named.pins()}
    # Renewed for a lease from now: 40 minutes later than before (give or take the microseconds by
    # which the log's times step past a clock that stands still).
    assert all(abs(after[t] - before[t] - timedelta(minutes=40)) < timedelta(milliseconds=1) for t in before)
    clock.advance(2 * HOUR)  # the pins ran out: refresh pins the versions anew
    assert named.pins() == []
    refresh(spark, named)
    assert sorted(p.table for p in named.pins()) == ["renewals.lines", "renewals.orders"]
    assert detach(spark, named) == ["renewals.lines", "renewals.orders"]
    assert named.pins() == []
    assert not spark.catalog.databaseExists("renewals")  # attach made it; detach leaves nothing behind
    assert detach(spark, named) == []


def test_r21_a_pin_refused_leaves_the_ledger_and_the_catalog_unchanged(spark, named: Ledger) -> None:
    write_table(frame(spark, 0, 2), named, "sales.orders")
    events = named.event_count()
    with pytest.raises(TableNotFound):
        named.pin_tables(["sales.orders", "sales.nope"])
    with pytest.raises(InvalidArgument, match="twice"):
        named.pin_tables(["sales.orders", "sales.orders"])
    assert named.event_count() == events and named.pins() == []


# --- a user's own objects, and bad input -----------------------------------------------------

def test_attach_never_replaces_a_table_spark_holds_that_is_not_the_ledgers(spark, named: Ledger) -> None:
    write_table(frame(spark, 0, 2), named, "mine.orders")
    spark.sql("CREATE DATABASE IF NOT EXISTS mine")
    spark.sql("CREATE OR REPLACE VIEW mine.orders AS SELECT 42 AS answer")
    try:
        events = named.event_count()
        with pytest.raises(TableExists, match="mine.orders .*not this ledger's"):
            attach(spark, named)
        assert spark.sql("SELECT * FROM mine.orders").collect()[0]["answer"] == 42
        assert named.event_count() == events and named.pins() == []
        assert attach(spark, named, database="other") == []
    finally:
        spark.sql("DROP VIEW IF EXISTS mine.orders")
        spark.sql("DROP DATABASE IF EXISTS mine")


def test_bad_arguments_are_typed_errors_that_record_nothing(spark, named: Ledger) -> None:
    write_table(frame(spark, 0, 2), named, "sales.orders")
    events = named.event_count()
    with pytest.raises(InvalidArgument, match="lease"):
        attach(spark, named, lease="9000d")
    with pytest.raises(TableNotFound, match="not attached"):
        refresh(spark, named)
    assert named.event_count() == events and named.pins() == []
    assert not spark.catalog.tableExists("sales.orders")


# --- partitions ------------------------------------------------------------------------------

def test_a_partition_filter_reads_only_that_partitions_files(spark, named: Ledger) -> None:
    rows = spark.createDataFrame([(i, f"{i % 10:03d}") for i in range(200)], "id long, day string")
    write_table(rows, named, "sales.days", partition_by=["day"])
    write_table(rows.limit(20), named, "sales.days", partition_by=["day"])
    attach(spark, named)
    files = named.version("sales.days").files
    in_007 = [f for f in files if "/day=007/" in f.path]
    query = spark.sql("SELECT id, day FROM sales.days WHERE day = '007'")
    assert files_read(query) == len(in_007) and len(in_007) < len(files)
    assert {r["day"] for r in query.collect()} == {"007"}  # a string partition value as written
    assert ids(query) == sorted([i for i in range(200) if i % 10 == 7] + [i for i in range(20) if i % 10 == 7])


def jobs_run(spark, call) -> int | None:
    """How many Spark jobs ``call`` ran (None on Spark Connect, whose client cannot see them)."""
    if is_connect(spark):
        return None
    group = f"count-{id(call)}"
    spark.sparkContext.setJobGroup(group, "counted")
    try:
        call()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_a_partition_filter_on_a_version_of_many_files_plans_no_listing_and_reads_exactly_its_files(
        spark, named: Ledger) -> None:
    """Above 32 files Spark lists a glob's files in a Spark job, at every query of a view over
    them; a name over a version table plans none once attached. A straggler beside a kept file
    and the files a replace removed (still in their folder) are never read (R11)."""
    rows = spark.createDataFrame([(i, f"{i % 40:03d}") for i in range(400)], "id long, day string")
    write_table(rows, named, "sales.days", partition_by=["day"])
    write_table(rows.limit(80), named, "sales.days", partition_by=["day"])
    replaced = named.version("sales.days").files
    write_table(spark.createDataFrame([(1000, "007")], "id long, day string"), named, "sales.days", "overwrite",
                partitions="dynamic")
    files = named.version("sales.days").files
    assert {f.path for f in replaced if "/day=007/" in f.path}.isdisjoint(f.path for f in files)
    location = named.table("sales.days").location
    kept = next(f.path for f in files if "/day=008/" in f.path)
    shutil.copy(Path(location, kept), Path(location, kept).parent / "part-99999-straggler.parquet")
    attach(spark, named)
    query = "SELECT id, day FROM sales.days WHERE day = '008'"
    spark.sql(query).collect()
    assert jobs_run(spark, lambda: spark.sql(query)._jdf.queryExecution().executedPlan()) in (0, None)
    in_008 = [f for f in files if "/day=008/" in f.path]
    assert files_read(spark.sql(query)) == len(in_008) and len(files) > 32
    assert ids(spark.sql(query)) == sorted([i for i in range(400) if i % 40 == 8] + [8, 48])
    assert ids(spark.sql("SELECT id FROM sales.days WHERE day = '007'")) == [1000]
    by_name = sorted(map(tuple, spark.table("sales.days").collect()))
    assert by_name == sorted(map(tuple, read_table(spark, named, "sales.days", pin=False).collect()))


def test_a_version_of_many_files_reads_every_partition_type_and_follows_its_changes(spark, named: Ledger) -> None:
    """Over a version table (more than 32 files): null and escaped string values, ints and dates
    read back as read_table reads them; an overwrite is shown at once, and detach leaves no
    table behind."""
    values = ["a b", "50%", "x+y", "c=d", "t:1", "é", None] + [f"v{i}" for i in range(30)]
    rows = spark.createDataFrame([(i, v, i % 3) for i, v in enumerate(values)], "id long, tag string, n int") \
        .withColumn("d", F.expr("date_add(DATE'2026-01-01', CAST(id % 2 AS INT))"))
    write_table(rows, named, "sales.tags", partition_by=["tag", "n", "d"])
    assert len(named.version("sales.tags").files) > 32
    attach(spark, named)
    by_name = sorted(map(tuple, spark.table("sales.tags").collect()), key=lambda r: r[0])
    assert by_name == sorted(map(tuple, read_table(spark, named, "sales.tags", pin=False).collect()), key=lambda r: r[0])
    assert spark.table("sales.tags").schema.simpleString() == "struct<id:bigint,tag:string,n:int,d:date>"
    assert ids(spark.sql("SELECT id FROM sales.tags WHERE tag IS NULL AND n = 0 AND d = DATE'2026-01-01'")) == [6]
    assert ids(spark.sql("SELECT id FROM sales.tags WHERE tag = 't:1'")) == [4]
    def of_versions() -> list[str]:  # (a classic session's template of the columns aside)
        return [t for t in version_tables(spark) if ".v_" in t]
    assert len(of_versions()) == 1
    write_table(rows.where("id < 2"), named, "sales.tags", "overwrite", partition_by=["tag", "n", "d"])
    assert ids(spark.table("sales.tags")) == [0, 1]  # a version of 2 files: no table of its own any more
    assert len(of_versions()) == (1 if is_connect(spark) else 0)
    detach(spark, named)
    assert version_tables(spark) == [] and not spark.catalog.tableExists("sales.tags")


def test_partition_values_spark_escapes_read_back_as_written(spark, named: Ledger) -> None:
    values = ["a b", "50%", "x+y", "a,b", "c=d", "t:1", "é", "{x}", "[y]", "sl/ash", None, "007"]
    rows = spark.createDataFrame([(i, v, i % 2) for i, v in enumerate(values)], "id long, tag string, n int")
    write_table(rows, named, "sales.tags", partition_by=["tag", "n"])
    attach(spark, named)
    by_name = sorted(map(tuple, spark.table("sales.tags").collect()), key=lambda r: r[0])
    assert by_name == sorted(map(tuple, read_table(spark, named, "sales.tags", pin=False).collect()), key=lambda r: r[0])
    assert [r[1] for r in by_name] == values
    assert spark.table("sales.tags").schema.simpleString() == "struct<id:bigint,tag:string,n:int>"
    assert spark.sql("SELECT id FROM sales.tags WHERE tag = 'a,b'").collect()[0]["id"] == 3


def test_a_merged_schema_reads_old_files_with_nulls_and_a_table_written_before_versions_reads_its_folder(
        spark, named: Ledger) -> None:
    write_table(frame(spark, 0, 2), named, "sales.orders")
    wider = spark.createDataFrame([(5, "y", 1.5)], "id long, label string, price double")
    write_table(wider, named, "sales.orders", merge_schema=True)
    legacy = named.create_table("sales.legacy")  # filled by a pipeline's own job, not write_table
    frame(spark, 30, 3).write.parquet("file://" + legacy.location)
    attach(spark, named)
    got = sorted((r["id"], r["price"]) for r in spark.table("sales.orders").collect())
    assert got == [(0, None), (1, None), (5, 1.5)]
    assert ids(spark.table("sales.legacy")) == [30, 31, 32]


# --- the ledger in SQL -----------------------------------------------------------------------

def test_the_ledgers_history_versions_and_dropped_tables_as_table_valued_functions(spark, named: Ledger) -> None:
    write_table(frame(spark, 0, 2), named, "sales.orders")
    write_table(frame(spark, 5, 1), named, "sales.orders", mode="overwrite")
    write_table(frame(spark, 0, 1), named, "sales.gone")
    named.drop_table("sales.gone")
    attach(spark, named)
    versions = spark.sql("SELECT * FROM ledger_versions('sales.orders') ORDER BY number").collect()
    python = named.versions("sales.orders")
    assert [(r["number"], r["mode"], r["current"], r["file_count"], r["bytes"]) for r in versions] == \
        sorted((v.number, v.mode, v.current, v.file_count, v.bytes) for v in python)
    assert versions[0]["committed_at"] is not None and json.loads(versions[0]["schema"])["type"] == "struct"

    history = spark.sql("SELECT * FROM ledger_history('sales.orders') ORDER BY seq").collect()
    expected = list(named.history("sales.orders"))
    assert [(r["seq"], r["type"], r["actor"], r["text"]) for r in history] == \
        [(e.seq, e.type, e.actor, e.text) for e in expected]
    assert json.loads(history[0]["data"])["name"] == "sales.orders"

    dropped = spark.sql("SELECT id, name, state FROM ledger_dropped_tables()").collect()
    assert [(r["id"], r["name"], r["state"]) for r in dropped] == \
        [(t.id, t.name, t.state) for t in named.dropped_tables()]
    # They follow the ledger too: an undrop moves sales.gone out of the dropped tables.
    named.undrop_table("sales.gone")
    assert spark.sql("SELECT * FROM ledger_dropped_tables()").collect() == []
    assert [r["number"] for r in spark.sql("SELECT number FROM ledger_versions('sales.gone')").collect()] == [1]
    undropped = spark.sql("SELECT seq, type FROM ledger_history('sales.gone', true) ORDER BY seq").collect()
    assert [(r["seq"], r["type"]) for r in undropped] == \
        [(e.seq, e.type) for e in named.history("sales.gone", pins=True)]
    assert {"TableDropped", "TableUndropped", "PinTaken"} <= {r["type"] for r in undropped}
    assert spark.sql("SELECT * FROM ledger_versions('sales.nope')").collect() == []


# --- the view's text, without Spark -----------------------------------------------------------

SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "day", "type": "string", "nullable": True, "metadata": {}}]})


def test_a_views_text_names_exactly_the_files_with_glob_characters_taken_literally() -> None:
    files = ["_writes/a/day=1/p,1.parquet", "_writes/b/day=2/p[2].parquet"]
    text = view_text("/wh/s{a}les/orders", files, SCHEMA)
    # One relation a file (R11: a glob of several would skip one that is gone), joined.
    first, second = text.split(" UNION ALL ")
    assert first.endswith(" FROM parquet.`file:///wh/s\\{a\\}les/orders/{_writes/a/day=1/p\\,1.parquet}`")
    assert second.endswith(" FROM parquet.`file:///wh/s\\{a\\}les/orders/{_writes/b/day=2/p\\[2\\].parquet}`")
    assert first.startswith("SELECT `id`, CAST(") and first.split(" FROM ")[0].endswith("AS STRING) AS `day`")
    merged = view_text("/wh/s{a}les/orders", files, SCHEMA, merge_schema=True)  # merged schemas: one relation
    assert "{_writes/a/day=1/p\\,1.parquet,_writes/b/day=2/p\\[2\\].parquet}` WITH ('mergeSchema' = 'true')" in merged
    assert view_text("s3://lake/wh/t", [], SCHEMA) == "SELECT CAST(NULL AS BIGINT) AS `id`, CAST(NULL AS STRING) AS `day` WHERE false"
    assert "`s3://lake/wh/t/{_writes/a/day=1/p.parquet}`" in view_text("s3://lake/wh/t", ["_writes/a/day=1/p.parquet"], SCHEMA)
    for location in ("/wh:1/t", "s3://lake/wh:1/t"):  # no glob can walk it: no view, not a broken one
        with pytest.raises(InvalidArgument, match="sales.orders in Spark SQL: its folder .* holds ':'"):
            view_text(location, ["_writes/a/day=1/p.parquet"], SCHEMA, table="sales.orders")


def test_files_in_different_partition_folders_cannot_be_named() -> None:
    assert partition_columns(["_writes/a/x=1/y=2/p.parquet"]) == [(2, "x"), (1, "y")]
    with pytest.raises(InvalidArgument, match="different partition folders"):
        partition_columns(["_writes/a/x=1/p.parquet", "_writes/b/p.parquet"], "sales.orders")


# --- secrets (R23) ---------------------------------------------------------------------------

def test_r23_no_password_reaches_sparks_catalog_its_plans_or_the_logs(spark, postgres, tmp_path, caplog) -> None:
    secret = "Alpha#Bravo"
    role = postgres.password_role(secret)
    database = postgres.database("sql").rsplit("/", 1)[1]
    url = f"postgresql://{role}:{secret}@127.0.0.1:{postgres.port}/{database}"
    with Ledger.open(url, warehouse=tmp_path / "wh") as led:
        try:
            write_table(frame(spark, 0, 3), led, "sales.orders")
            attach(spark, led)
            said = [spark.sql("DESCRIBE TABLE EXTENDED sales.orders").collect(),
                    spark.sql("SHOW TBLPROPERTIES sales.orders").collect(),
                    spark.sql("SHOW CREATE TABLE sales.orders").collect(),
                    spark.sql("EXPLAIN EXTENDED SELECT * FROM sales.orders").collect(),
                    spark.sql("SELECT * FROM ledger_history('sales.orders')").collect(),
                    spark.sql("SELECT * FROM ledger_versions('sales.orders')").collect(),
                    spark.conf.getAll]
            for piece in ("Alpha", "Bravo"):
                assert piece not in repr(said) and piece not in caplog.text
            assert count(spark, "sales.orders") == 3
        finally:
            detach(spark, led)


# --- what a review found ---------------------------------------------------------------------

def test_a_change_made_in_another_thread_during_a_refresh_is_followed(spark, named: Ledger, clock) -> None:
    import threading
    write_table(frame(spark, 0, 2), named, "sales.orders")
    write_table(frame(spark, 10, 2), named, "sales.orders", mode="overwrite")
    attach(spark, named)
    stop = threading.Event()

    def refreshing() -> None:
        while not stop.is_set():
            refresh(spark, named)
    thread = threading.Thread(target=refreshing)
    thread.start()
    try:
        for i in range(12):
            named.restore_table("sales.orders", version=1 + i % 2)
    finally:
        stop.set()
        thread.join()
    assert ids(spark.table("sales.orders")) == ids(read_table(spark, named, "sales.orders", pin=False))
    shown = named.table("sales.orders").current_version
    assert [(p.table, p.version) for p in named.pins()] == [("sales.orders", shown)]


def test_a_table_that_cannot_be_named_is_left_out_and_the_others_are_named(spark, named: Ledger, caplog) -> None:
    write_table(frame(spark, 0, 3), named, "sales.orders")
    parted = spark.createDataFrame([(1, "a"), (2, "b")], "id long, day string")
    write_table(parted, named, "sales.mixed", partition_by=["day"])
    # the same columns, not partitioned, committed through the ledger's own API (write_table takes the
    # table's layout): no one layout to name
    loose = named.begin_write("sales.mixed")
    parted.write.parquet(f"file://{loose.folder}")
    named.commit_write(loose.id, [(f"{loose.relative_folder}/{f.name}", f.stat().st_size)
                                  for f in Path(loose.folder).glob("*.parquet")])
    write_table(frame(spark, 0, 4, parts=2), named, "sales.holed")
    version = named.version("sales.holed")
    Path(named.table("sales.holed").location, version.files[0].path).unlink()  # deleted outside the ledger
    assert attach(spark, named) == ["sales.orders"]
    assert "sales.mixed has no name" in caplog.text and "different partition folders" in caplog.text
    assert "sales.holed has no name" in caplog.text and "not there" in caplog.text
    assert [p.table for p in named.pins()] == ["sales.orders"]  # no pin left on what has no name
    assert not spark.catalog.tableExists("sales.holed")  # never fewer rows than the version has (R11)
    with pytest.raises(Exception, match="TableDataMissing|not there"):
        read_table(spark, named, "sales.holed", pin=False)


def test_one_ledger_at_a_time_and_another_ledgers_view_is_never_replaced(spark, named: Ledger, tmp_path, clock) -> None:
    write_table(frame(spark, 0, 2), named, "sales.orders")
    attach(spark, named)
    with Ledger.open(tmp_path / "other.db", clock=clock) as other:
        write_table(frame(spark, 50, 1), other, "sales.orders")
        events = other.event_count()
        with pytest.raises(InvalidArgument, match="another ledger .* is attached"):
            attach(spark, other)
        assert other.event_count() == events and detach(spark, other) == []
        assert ids(spark.table("sales.orders")) == [0, 1]
        detach(spark, named)
        attach(spark, other)
        try:
            assert ids(spark.table("sales.orders")) == [50]
        finally:
            detach(spark, other)


def test_a_name_recreated_elsewhere_is_shown_after_refresh_and_its_history_follows_the_name(
        spark, named: Ledger, ledger_path, clock) -> None:
    write_table(frame(spark, 0, 2), named, "sales.orders")
    attach(spark, named)
    with Ledger.open(ledger_path, clock=clock, actor="elsewhere") as other:
        other.drop_table("sales.orders")
        write_table(frame(spark, 70, 1), other, "sales.orders")
    refresh(spark, named)
    assert ids(spark.table("sales.orders")) == [70]
    rows = spark.sql("SELECT seq, type FROM ledger_history('Sales.Orders') ORDER BY seq").collect()
    assert [(r["seq"], r["type"]) for r in rows] == [(e.seq, e.type) for e in named.history("sales.orders")]
    assert [r["type"] for r in rows].count("TableCreated") == 2  # both instances that bore the name


CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from ledger import Ledger
    from spark_ops import attach, local_session
    path, go, remote = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    spark = local_session("attach-child", remote=remote)
    led = Ledger.open(path, actor="child")
    print(attach(spark, led), flush=True)
    while not go.exists():
        time.sleep(0.01)
    # leaves without detach: its pins must go with it, and the exit must not take new ones
""")


def test_r21_a_process_that_ends_attached_leaves_no_pin_behind(spark, spark_kind, request, named: Ledger,
                                                                ledger_path, tmp_path) -> None:
    """The child attaches on a session of the same kind: a classic one of its own, or one on the
    same Spark Connect server, whose catalog outlives the child: its views go with it too."""
    if not isinstance(ledger_path, Path):
        pytest.skip("the other process opens the file")
    write_table(frame(spark, 0, 2), named, "sales.orders")
    write_table(frame(spark, 5, 2), named, "sales.orders", mode="overwrite")
    go = tmp_path / "go"
    remote = request.getfixturevalue("connect_server").address if spark_kind == "connect" else ""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(ledger_path), str(go), remote], cwd=REPO, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "['sales.orders']", \
            child.stderr.read() if child.stderr else ""
        assert [p.version for p in named.pins()] == [2]
        assert spark_kind == "classic" or ids(spark.table("sales.orders")) == [5, 6]  # the server's catalog
        named.restore_table("sales.orders", version=1)  # a change the child would follow if it ran on
        go.touch()
        assert child.wait(timeout=120) == 0, child.stderr.read() if child.stderr else ""
    finally:
        child.kill()
    assert named.pins() == []
    assert not spark.catalog.tableExists("sales.orders") and not spark.catalog.databaseExists("sales")
    assert version_tables(spark) == []


def test_r11_a_warehouse_whose_folder_holds_glob_characters_reads_by_read_table_and_by_name(
        spark, tmp_path, clock) -> None:
    """Spark reads every path as a Hadoop glob: a warehouse in a folder named ``w[1]{a,b}`` named
    nothing (``PATH_NOT_FOUND``) to ``read_table``; its paths are now given to Spark escaped."""
    with Ledger.open(tmp_path / "ledger.db", warehouse=tmp_path / "w[1]{a,b}", clock=clock) as led:
        try:
            rows = spark.createDataFrame([(i, f"{i % 2}") for i in range(6)], "id long, p string")
            write_table(rows, led, "globs.plain")
            write_table(rows, led, "globs.parted", partition_by=["p"])
            for name in ("globs.plain", "globs.parted"):
                assert ids(read_table(spark, led, name, pin=False)) == list(range(6))
            attach(spark, led)
            assert ids(spark.table("globs.parted")) == list(range(6)) and count(spark, "globs.plain") == 6
        finally:
            detach(spark, led)


# --- what issue 44 found ---------------------------------------------------------------------

def test_a_table_in_a_database_spark_reserves_has_no_name_and_holds_no_pin(spark, named: Ledger, caplog) -> None:
    """``global_temp`` is Spark's: a view cannot be made in it. The table gets no name, with a
    warning, as any other that cannot be named; the pin taken for it is released."""
    write_table(frame(spark, 0, 3), named, "sales.orders")
    write_table(frame(spark, 0, 2), named, "global_temp.t")
    assert attach(spark, named) == ["sales.orders"]
    assert "global_temp.t has no name in Spark SQL" in caplog.text and "reserves" in caplog.text
    assert [p.table for p in named.pins()] == ["sales.orders"]
    assert count(spark, "sales.orders") == 3
    write_table(frame(spark, 5, 1), named, "global_temp.t")  # followed: still no name, still no pin
    assert [p.table for p in named.pins()] == ["sales.orders"]
    assert ids(read_table(spark, named, "global_temp.t", pin=False)) == [0, 1, 5]


def test_r21_any_failure_while_showing_a_view_releases_that_views_pin(spark, named: Ledger) -> None:
    """A version whose recorded schema Spark refuses (committed through the ledger's own API, not
    write_table): putting its view fails, and the pin taken for it goes with the failure."""
    write_table(frame(spark, 0, 2), named, "sales.odd")
    location = Path(named.table("sales.odd").location)
    write = named.begin_write("sales.odd")
    Path(write.folder).mkdir(parents=True)
    source = location / named.version("sales.odd").files[0].path
    shutil.copy(source, Path(write.folder, "part-0.parquet"))
    schema = json.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "decimal(40,2)", "nullable": True, "metadata": {}},
        {"name": "label", "type": "string", "nullable": True, "metadata": {}}]})
    named.commit_write(write.id, [(f"{write.relative_folder}/part-0.parquet", source.stat().st_size)],
                       mode="overwrite", schema=schema)
    with pytest.raises(Exception, match="(?i)decimal"):
        attach(spark, named)
    assert named.pins() == []
    assert not spark.catalog.tableExists("sales.odd")


def test_r11_a_warehouse_whose_folder_holds_a_colon_reads_by_read_table_and_its_versions_have_no_name(
        spark, tmp_path, clock, caplog) -> None:
    """A view names a version's files with one brace glob, and Hadoop's glob cannot walk a folder
    named ``wh:1`` (it reads it as the URI scheme ``wh``; no escape changes that): such views failed
    at query (``FAILED_TO_CREATE_PLAN_FOR_DIRECT_QUERY``) where ``read_table``, which names each
    file, gave the rows. They get no name now, with a warning, and are not pinned. A table written
    before versions is read from its folder, with no glob: it keeps its name."""
    with Ledger.open(tmp_path / "ledger.db", warehouse=tmp_path / "wh:1", clock=clock) as led:
        try:
            rows = spark.createDataFrame([(i, f"{i % 2}") for i in range(6)], "id long, p string")
            write_table(rows, led, "colons.plain")
            write_table(rows, led, "colons.parted", partition_by=["p"])
            legacy = led.create_table("colons.legacy")  # filled by a pipeline's own job, not write_table
            rows.write.parquet("file://" + legacy.location)
            for name in ("colons.plain", "colons.parted", "colons.legacy"):
                assert ids(read_table(spark, led, name, pin=False)) == list(range(6))
            assert attach(spark, led) == ["colons.legacy"]
            assert ids(spark.table("colons.legacy")) == list(range(6))
            assert "colons.plain has no name in Spark SQL" in caplog.text and "holds ':'" in caplog.text
            assert "colons.parted has no name in Spark SQL" in caplog.text
            assert len(led.history(type="PinTaken")) == 0  # nothing pinned, to be let go again at once
        finally:
            detach(spark, led)


def test_the_sql_functions_give_no_rows_for_what_is_not_a_name_and_match_back_quoted_names(
        spark, named: Ledger) -> None:
    """``ledger_versions(array('sales.orders'))`` was a Python traceback from this project's own
    code; a value that is not a name is now as NULL is, no rows. Names are matched as Spark
    matches them: back-quoted parts, any case, with or without its catalog."""
    write_table(frame(spark, 0, 2), named, "sales.orders")
    write_table(frame(spark, 0, 1), named, "sales.gone")
    named.drop_table("sales.gone")
    attach(spark, named)
    for bad in ("array('sales.orders')", "map('sales.orders', 1)", "42", "NULL", "named_struct('a', 1)",
                "'sales.orders.x'", "'`sales.orders`'", "'`sales'", "''"):
        for function in ("ledger_versions", "ledger_history", "ledger_dropped_tables"):
            assert spark.sql(f"SELECT * FROM {function}({bad})").collect() == [], (function, bad)
    assert spark.sql("SELECT * FROM ledger_versions('sales')").collect() == []  # a database is not a table
    for spelled in ("sales.orders", "`sales`.`orders`", "`Sales`.orders", "spark_catalog.sales.`orders`"):
        versions = spark.sql(f"SELECT number FROM ledger_versions('{spelled}')").collect()
        assert [r["number"] for r in versions] == [1], spelled
        history = spark.sql(f"SELECT seq FROM ledger_history('{spelled}')").collect()
        assert [r["seq"] for r in history] == [e.seq for e in named.history("sales.orders")], spelled
        dropped = spark.sql(f"SELECT name FROM ledger_dropped_tables('{spelled.replace('orders', 'gone')}')")
        assert [r["name"] for r in dropped.collect()] == ["sales.gone"], spelled
    assert [r["name"] for r in spark.sql("SELECT name FROM ledger_dropped_tables('`sales`')").collect()] == \
        ["sales.gone"]  # one part: a database's dropped tables, as dropped_tables(database=...)


def test_ledger_history_in_sql_leaves_pins_out_unless_asked(spark, named: Ledger) -> None:
    """6 of the 10 latest rows of ``ledger_history('sales.orders')`` were pins taken by reads."""
    write_table(frame(spark, 0, 2), named, "sales.orders")
    read_table(spark, named, "sales.orders")
    attach(spark, named)
    rows = spark.sql("SELECT type, text FROM ledger_history('sales.orders') ORDER BY seq").collect()
    assert [r["type"] for r in rows] == ["TableCreated", "WriteBegun", "VersionCommitted"]
    pinned = spark.sql("SELECT seq, type, text FROM ledger_history('sales.orders', true) ORDER BY seq").collect()
    assert [(r["seq"], r["text"]) for r in pinned] == \
        [(e.seq, e.text) for e in named.history("sales.orders", pins=True)]
    assert [r["type"] for r in pinned].count("PinTaken") == 2  # read_table's and attach's
    assert all("recorded" not in r["text"] for r in pinned)
    assert spark.sql("SELECT * FROM ledger_history('sales.orders', false)").count() == 3


class CountingStore(SQLiteStore):
    """A ledger file that counts the events read from it."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.event_reads = 0

    def read(self, *args: Any, **kwargs: Any) -> Iterator[tuple]:
        for row in super().read(*args, **kwargs):
            self.event_reads += 1
            yield row


def test_an_attach_after_a_detach_reads_what_was_appended_since_never_the_logs_past_again(
        spark, clock, tmp_path: Path) -> None:
    """Issue 48: every new attachment read the whole log again for ``ledger_history`` (about 30 us
    an event), and every attach, refresh and detach appends a pin event a table, so an attach grew
    with the ledger's past (the benchmark's 1,000 tables: reading it took 0.13, 0.25, 0.35 s of CPU,
    round by round).
    The attachments of one ``Ledger`` share what was read: a second attach reads only the events
    appended since, and answers exactly as ``Ledger.history`` does, the past's rows included."""
    store = CountingStore(tmp_path / "ledger.db")
    with Ledger(store, clock=clock, actor="tester") as led:
        write_table(frame(spark, 0, 2), led, "sales.orders")
        for _ in range(150):  # a past: 300 events, each a row of ledger_history('sales.orders', true)
            led.pin("sales.orders").release()
        past = led.event_count()
        try:
            before = store.event_reads
            attach(spark, led)
            assert store.event_reads - before >= past  # the first attach of this Ledger reads it all, once
            detach(spark, led)
            appended, before = led.event_count(), store.event_reads
            attach(spark, led)
            read = store.event_reads - before
            # this attach's pin, the detach's release before it, and the last event read (``since`` is inclusive)
            assert read <= led.event_count() - appended + 2, read
            pinned = spark.sql("SELECT seq, type FROM ledger_history('sales.orders', true) ORDER BY seq").collect()
            assert [(r["seq"], r["type"]) for r in pinned] == \
                [(e.seq, e.type) for e in led.history("sales.orders", pins=True)]
            assert len(pinned) > 300
        finally:
            detach(spark, led)


def tables_like(led: Ledger, name: str, count: int, first: int = 0) -> None:
    """``count`` more tables (``sales.c<first>`` on), each a version of a copy of ``name``'s file,
    made through the ledger's API (no Spark write)."""
    version = led.versions(name)[-1]
    [entry] = version.files
    source = os.path.join(led.table(name).location, entry.path)
    for t in range(first, first + count):
        led.create_table(f"sales.c{t:03d}")
        write = led.begin_write(f"sales.c{t:03d}")
        os.makedirs(write.folder, exist_ok=True)
        shutil.copyfile(source, os.path.join(write.folder, "part-0.parquet"))
        led.commit_write(write.id, [(f"{write.relative_folder}/part-0.parquet", entry.size)], schema=version.schema)


@pytest.fixture
def jvm_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """What this thread asks of a classic session's JVM: its calls (py4j's round trips), and the
    JVM handles it lets go of (each freed with a round trip of its own, which py4j sends from a
    thread of its own a moment later), counted as they happen."""
    from py4j.clientserver import ClientServerConnection, JavaClient
    counts = {"calls": 0, "frees": 0}
    send, free, me = ClientServerConnection.send_command, JavaClient.garbage_collect_object, threading.get_ident()

    def sent(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["calls"] += threading.get_ident() == me
        return send(self, *args, **kwargs)

    def freed(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["frees"] += threading.get_ident() == me
        return free(self, *args, **kwargs)
    monkeypatch.setattr(ClientServerConnection, "send_command", sent)
    monkeypatch.setattr(JavaClient, "garbage_collect_object", freed)
    return counts


def test_a_classic_attach_puts_a_view_in_five_jvm_calls_and_leaves_nothing_to_free_later(
        spark, spark_kind, named: Ledger, jvm_calls: dict[str, int]) -> None:
    """Issue 48: an attach of 1,000 tables made 6,300 calls into the JVM: five a view, and about
    a thousand frees of JVM handles that py4j had left in reference cycles (each handle passed to
    a call, each a method was called on), which Python's cyclic collector freed, a call each, in
    whatever call it ran in: an attach's, a refresh's. Now five calls a view, and nothing an attach
    or a detach used is left for the collector. Counted per view as the difference between 40
    tables and 20 (what an attach costs whatever its size cancels out)."""
    if spark_kind == "connect":
        pytest.skip("a Spark Connect session has no JVM of ours: its views are made with SQL")
    write_table(frame(spark, 0, 2), named, "sales.orders")
    calls, left = [], []

    def collected() -> int:
        """The frees Python's cyclic collector makes now."""
        jvm_calls.update(calls=0, frees=0)
        gc.collect()
        return jvm_calls["frees"]
    collecting = gc.isenabled()
    gc.disable()  # the collector runs when the test says, not in the middle of a count
    try:
        for more in (19, 20):
            tables_like(named, "sales.orders", more, first=len(named.tables()) - 1)
            collected()
            jvm_calls.update(calls=0, frees=0)
            assert len(attach(spark, named)) == len(named.tables())
            calls.append(jvm_calls["calls"] + jvm_calls["frees"])
            after_attach = collected()
            detach(spark, named)
            left.append(after_attach + collected())
    finally:
        if collecting:
            gc.enable()
    assert calls[1] - calls[0] <= 5 * 20, calls
    assert left[1] <= left[0], left

QUERIES_A_GONE_TABLE = textwrap.dedent("""
    from pyspark.errors import AnalysisException
    from spark_ops import local_session
    spark = local_session("gone-child")
    for query in (lambda: spark.sql("SELECT * FROM sales.gone").collect(), lambda: spark.table("sales.gone"),
                  lambda: spark.range(1).select("nope").collect()):
        try:
            query()
        except AnalysisException as exc:
            print(exc.getCondition(), flush=True)
""")


def test_a_query_naming_a_dropped_table_prints_no_stack_trace_to_stderr() -> None:
    """PySpark logs every AnalysisException it raises with its Java stack trace (its
    ``SQLQueryContextLogger``, at ERROR) to stderr, though the caller catches it: a local_session's
    logs are quiet, so a caught error prints nothing."""
    done = subprocess.run([sys.executable, "-c", QUERIES_A_GONE_TABLE], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == \
        ["TABLE_OR_VIEW_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND", "UNRESOLVED_COLUMN.WITH_SUGGESTION"]
    for trace in ("\tat ", "Traceback", "Exception", "SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        assert trace not in done.stderr, done.stderr[-3000:]


# --- sessions that share a catalog (issue 46) -------------------------------------------------

@pytest.fixture
def second(spark, spark_kind: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Another session on ``spark``'s catalog: a second client of the same Spark Connect server (as
    another user of a shared Databricks cluster has), or a new session of the same classic
    application."""
    if spark_kind == "classic":
        yield spark.newSession()
        return
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    session = ConnectSession.builder.remote(request.getfixturevalue("connect_server").address).create()
    try:
        yield session
    finally:
        session.stop()


def test_sessions_that_share_a_catalog_never_replace_or_drop_each_others_views(
        spark, second, named: Ledger, tmp_path, clock) -> None:
    """The views are in the catalog, which the sessions of one Spark application share, and so do
    all the sessions of a Spark Connect server: each sees the other's names (as any view made
    there), and neither's attach replaces, nor its detach drops, a view the other shows."""
    write_table(frame(spark, 0, 3), named, "sales.orders")
    assert attach(spark, named) == ["sales.orders"]
    assert count(second, "sales.orders") == 3  # seen from the other session
    events = named.event_count()
    with pytest.raises(TableExists, match="another Spark session shows this ledger's sales.orders .* detach it there"):
        attach(second, named)
    assert named.event_count() == events and [p.table for p in named.pins()] == ["sales.orders"]
    with Ledger.open(tmp_path / "other.db", clock=clock) as other:
        write_table(frame(spark, 50, 1), other, "sales.orders")
        write_table(frame(spark, 60, 2), other, "hr.people")
        with pytest.raises(TableExists, match="sales.orders that is not this ledger's"):
            attach(second, other)
        try:
            assert attach(second, other, database="hr") == ["hr.people"]
            assert count(spark, "hr.people") == 2
            assert spark.sql("SELECT * FROM ledger_versions('hr.people')").collect() == []  # each session's own
            assert second.sql("SELECT number FROM ledger_versions('hr.people')").collect()[0]["number"] == 1
        finally:
            assert detach(second, other) == ["hr.people"]
    assert not spark.catalog.tableExists("hr.people") and not spark.catalog.databaseExists("hr")
    assert ids(spark.table("sales.orders")) == [0, 1, 2]  # left alone throughout
    assert [r["number"] for r in spark.sql("SELECT number FROM ledger_versions('sales.orders')").collect()] == [1]
    assert detach(spark, named) == ["sales.orders"]
    assert not second.catalog.tableExists("sales.orders") and named.pins() == [] and version_tables(spark) == []
    assert ids(read_table(spark, named, "sales.orders", pin=False)) == [0, 1, 2]  # what the views read stays


def test_attachments_of_one_ledger_each_show_history_another_of_them_read_first(
        spark, second, named: Ledger, ledger_path) -> None:
    """Two sessions' attachments of one ``Ledger`` share one reader of its history: events one of
    them read first (here a pin another ``Ledger`` took, seen by the first's refresh) still reach
    the other's ``ledger_history`` at its next sync."""
    write_table(frame(spark, 0, 2), named, "sales.orders")
    write_table(frame(spark, 5, 1), named, "hr.people")
    try:
        assert attach(spark, named, database="sales") == ["sales.orders"]
        assert attach(second, named, database="hr") == ["hr.people"]
        with Ledger.open(ledger_path, clock=named.clock, max_clock_skew=None, actor="elsewhere") as other:
            other.pin("hr.people").release()
        refresh(spark, named)  # reads the pin events first
        named.create_table("hr.later")  # followed by the hr attachment: its sync reads only that
        rows = second.sql("SELECT seq, actor FROM ledger_history('hr.people', true) ORDER BY seq").collect()
        assert [(r["seq"], r["actor"]) for r in rows] == \
            [(e.seq, e.actor) for e in named.history("hr.people", pins=True)]
        assert "elsewhere" in {r["actor"] for r in rows}
    finally:
        detach(second, named)


def test_a_view_nothing_holds_any_more_is_taken_over_and_its_old_session_lets_it_be(
        spark, second, named: Ledger, caplog) -> None:
    """A session that ends without detach (a notebook's kernel killed) leaves its views in a shared
    catalog, and nothing holds them once its pins end: the next attach of the ledger takes them
    over, and the old session, if it still runs, lets them be. The database its attach made was
    left behind by both detaches until 0.7.5 (a later test that expected no ``sales`` there failed
    when it ran after this one on the same worker)."""
    write_table(frame(spark, 0, 2), named, "sales.orders")
    try:
        assert attach(second, named) == ["sales.orders"]
        named.release_pins([p.id for p in named.pins()])  # as its process's end, or its lease running out, does
        assert attach(spark, named) == ["sales.orders"]
        [pin] = named.pins()
        write_table(frame(spark, 7, 1), named, "sales.orders")  # followed by both: shown by the new holder only
        assert ids(spark.table("sales.orders")) == [0, 1, 7] and ids(second.table("sales.orders")) == [0, 1, 7]
        assert "sales.orders no longer shown by this session: another session took it over" in caplog.text
        assert [(p.table, p.version) for p in named.pins()] == [("sales.orders", 2)] and named.pins()[0].id != pin.id
        assert detach(second, named) == []
        assert ids(spark.table("sales.orders")) == [0, 1, 7]
        assert detach(spark, named) == ["sales.orders"]
    finally:
        detach(second, named)
    # the database the old session's attach made goes with the last view in it, though the
    # session that drops that view did not make it
    assert not spark.catalog.databaseExists("sales")


def test_a_view_taken_over_leaves_no_table_of_its_old_session_behind_and_that_session_shows_it_again_later(
        spark, second, named: Ledger) -> None:
    """A taken-over view's version table (Connect; a classic view of many files too) was its old
    session's, which ended without ``detach`` or let its pins lapse: nothing else would ever drop
    it, so the takeover does, and that session's database of them once empty. A session that still
    runs makes its database again when it shows the name again, after the other detaches."""
    write_table(frame(spark, 0, 2), named, "sales.orders")
    assert attach(second, named) == ["sales.orders"]
    before = [t for t in version_tables(spark) if ".v_" in t]
    assert len(before) == (1 if is_connect(spark) else 0)
    named.release_pins([p.id for p in named.pins()])
    try:
        assert attach(spark, named) == ["sales.orders"]
        after = [t for t in version_tables(spark) if ".v_" in t]
        assert len(after) == len(before) and not set(after) & set(before)
        assert len({t.split(".")[0] for t in version_tables(spark)}) == len(after)  # its database gone too
        assert detach(spark, named) == ["sales.orders"]
        assert refresh(second, named) == ["sales.orders"]
        assert ids(second.table("sales.orders")) == [0, 1] and [p.table for p in named.pins()] == ["sales.orders"]
        assert len([t for t in version_tables(spark) if ".v_" in t]) == len(before)
    finally:
        detach(second, named)
    assert version_tables(spark) == []


def test_r24_statements_run_as_scripts_say_which_failed_and_still_run_where_scripts_are_refused(spark, second) -> None:
    """Attach sends its statements as SQL scripts, several at a time; a script stops at its first
    failing statement, so which one failed, and why, comes from running that script's statements
    one by one; a server that runs no scripts (Spark 4.0 unless told) gets them one by one."""
    statements = [f"CREATE OR REPLACE TEMPORARY VIEW scripted_{i} AS SELECT {i} AS x" for i in range(9)]
    statements[4] = "CREATE OR REPLACE TEMPORARY VIEW scripted_4 AS SELECT no_such_column"
    for session, scripts in ((spark, True), (second, False)):
        if not scripts:
            session.conf.set("spark.sql.scripting.enabled", "false")
        runner = Statements(session)
        results = runner.run(statements)
        assert [i for i, r in enumerate(results) if r is not None] == [4]
        assert "no_such_column" in str(results[4])
        assert [session.sql(f"SELECT x FROM scripted_{i}").collect()[0]["x"] for i in range(9) if i != 4] == \
            [0, 1, 2, 3, 5, 6, 7, 8]
        assert runner.scripts is scripts
        for i in range(9):
            session.catalog.dropTempView(f"scripted_{i}")


def test_r24_a_connect_session_that_has_ended_is_said_in_one_line_and_pins_nothing(
        spark, spark_kind: str, second, named: Ledger) -> None:
    """A Spark Connect session can end while its process runs (``stop()``; a server restarted
    under it): then it answers every request with PySpark's ``NO_ACTIVE_SESSION`` from deep in
    the attach. ``attach`` and ``refresh`` say so in one line (``SparkUnavailable``, naming what
    to do) before anything is pinned; ``detach`` lets the pins go all the same. A classic session
    cannot end alone (stopping it stops the application every test shares): Connect only."""
    if spark_kind == "classic":
        pytest.skip("a classic session cannot end alone: stopping it stops the shared application")
    write_table(frame(spark, 0, 3), named, "sales.orders")
    assert attach(second, named) == ["sales.orders"]
    [pin] = named.pins()
    second.stop()
    ended = r"^the Spark Connect session on sc://\S+ has ended \(it was stopped, or its server restarted under it\): " \
        r"make a new session \(local_session\(remote=\.\.\.\)\) and call again; nothing was recorded$"
    before = len(named.history())
    with pytest.raises(SparkUnavailable, match=ended) as said:
        refresh(second, named)
    assert "\n" not in str(said.value)
    assert [p.id for p in named.pins()] == [pin.id] and len(named.history()) == before  # nothing renewed
    assert detach(second, named) == ["sales.orders"]
    assert named.pins() == []
    after = len(named.history())
    with pytest.raises(SparkUnavailable, match=ended) as said:
        attach(second, named)
    assert "\n" not in str(said.value)
    assert named.pins() == [] and len(named.history()) == after  # nothing pinned, nothing recorded
    assert attach(spark, named) == ["sales.orders"]  # a live session takes the unheld view over
    assert ids(spark.table("sales.orders")) == [0, 1, 2]
    assert len(version_tables(spark)) == 1  # the ended session's table of the version went with its view
