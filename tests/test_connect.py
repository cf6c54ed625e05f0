"""R24 for the table calls: ``write_table``, ``read_table``, ``reading`` and ``read_log`` on a
classic SparkSession and on a Spark Connect one alike; nothing recorded for a write Spark refuses
at once; ``local_session(remote=...)`` saying in one line what is wrong with a Connect address; and
the pytest plugin's ``spark`` fixture on a Connect server.

Real components only: ledgers on real SQLite files, real Parquet files, the tests' own Connect
server (a process of its own, ``tests/connect.py``), real TCP listeners that are not Connect
servers, and real subprocesses where a test needs a process of its own kind.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from ledger import Ledger, ManualClock
from ledger.errors import InvalidArgument, TableNotFound
from spark_ops import SparkUnavailable, local_session, read_log, read_table, reading, write_table
from tests.connect import free_port

BOTH_SESSIONS = True
pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent
DAY = timedelta(days=1)


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as ledger:
        yield ledger


def frame(spark: Any, start: int, count: int, tag: str = "x") -> Any:
    return spark.createDataFrame([(i, f"{tag}-{i}", i % 3) for i in range(start, start + count)],
                                 "id long, label string, bucket int")


def ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    """The refusal's message, which must be one line a user can act on."""
    text = str(exc.value)
    assert "\n" not in text, text
    return text


# --- every mode and every read, on this session -------------------------------------------------

def test_r24_append_merge_overwrite_and_every_read_work_on_this_session(spark, led, clock) -> None:
    """The tester's Connect session failed every write with PySpark's ``errorifexists is not
    supported``, after the ledger had recorded the table and the write."""
    first = write_table(frame(spark, 0, 4), led, "sales.orders")
    clock.advance(DAY)
    wider = frame(spark, 4, 2).selectExpr("*", "id * 1.5 AS price")
    write_table(wider, led, "sales.orders", merge_schema=True)
    clock.advance(DAY)
    third = write_table(frame(spark, 100, 3), led, "sales.orders", mode="overwrite")
    assert [(v.number, v.mode) for v in led.versions("sales.orders")] == [(3, "overwrite"), (2, "append"),
                                                                          (1, "append")]
    assert ids(read_table(spark, led, "sales.orders")) == [100, 101, 102]
    merged = read_table(spark, led, "sales.orders", version=2)
    assert merged.columns == ["id", "label", "bucket", "price"]
    assert sorted((r["id"], r["price"]) for r in merged.collect()) == [(0, None), (1, None), (2, None), (3, None),
                                                                        (4, 6.0), (5, 7.5)]
    assert ids(read_table(spark, led, "sales.orders", as_of=first.committed_at + DAY / 2)) == [0, 1, 2, 3]
    held = {p.id for p in led.pins("sales.orders")}  # each read_table above holds one for its lease
    with reading(spark, led, "sales.orders", version=1) as df:
        [pin] = [p for p in led.pins("sales.orders") if p.id not in held]
        assert pin.version == 1 and ids(df) == [0, 1, 2, 3]
    assert pin.id not in [p.id for p in led.pins()]  # released on leaving the block
    assert third.number == 3


def test_r24_partitioned_writes_read_back_with_their_partition_columns(spark, led) -> None:
    write_table(frame(spark, 0, 6), led, "sales.orders", partition_by=["bucket"])
    write_table(frame(spark, 6, 6), led, "sales.orders", partition_by="bucket")
    assert all("/bucket=" in f.path for f in led.version("sales.orders").files)
    df = read_table(spark, led, "sales.orders")
    assert df.columns == ["id", "label", "bucket"]
    assert sorted((r["id"], r["bucket"]) for r in df.collect()) == [(i, i % 3) for i in range(12)]
    assert df.where("bucket = 1").count() == 4


def test_r24_read_log_gives_every_event_on_this_session(spark, led) -> None:
    write_table(frame(spark, 0, 3), led, "sales.orders")
    led.drop_table("sales.orders")
    log = read_log(spark, led)
    rows = log.collect()
    assert [(r.seq, r.type) for r in rows] == [(e.seq, e.type) for e in led.history(pins=True)]
    assert rows[-1].type == "TableDropped" and rows[-1].name == "sales.orders"
    assert log.where("type = 'VersionCommitted'").select("files").first()[0] >= 1


def test_r24_read_log_reads_a_ledger_that_holds_an_erasure_request(spark, led) -> None:
    """An erasure request's ``files`` is the digest of its set, not a count: read_log cast it to
    a number as it does a commit's file count, and every read_log of a ledger that had ever
    answered an erasure request failed (Spark's CAST_INVALID_INPUT). Found while running the
    README's calls on the base install (issue 57, item 4)."""
    from spark_ops import erase

    write_table(frame(spark, 0, 6), led, "crm.users")
    status = erase(spark, led, "crm.users", "id = 1", reason="a test")
    rows = read_log(spark, led).collect()
    assert [r.seq for r in rows] == [e.seq for e in led.history(pins=True)]
    (request,) = [r for r in rows if r.type == "ErasureRequested"]
    assert request.name == "crm.users" and request.files is None
    assert json.loads(request.payload)["request_id"] == status.request_id


def sample(kind: Any, field: str) -> Any:
    """A value of the annotated ``kind`` for an event's ``field``: text that is no number (a digest,
    an id), so that a column read_log takes for a number cannot read it as one by chance."""
    import typing

    args = [a for a in typing.get_args(kind) if a is not type(None)]
    origin = typing.get_origin(kind)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType")):
        return sample(args[0], field)
    if origin is tuple:
        return (sample(args[0], field),)
    if origin is dict:
        return {"k": sample(args[1], field)}
    if kind is bool:
        return True
    if kind is int:
        return 1_767_225_600_000_000
    return "sales.orders" if field == "name" else f"{field}-9f86d081884c7d65"


def test_r24_read_log_reads_one_event_of_every_registered_type_and_any_payload(spark, led) -> None:
    """Issue 58, item 7: an auditor's read of the log must keep working whatever events it holds.
    read_log cast every payload's ``files`` to a number, and an ``ErasureRequested``'s is a digest:
    every read_log of a ledger that had answered one failed (``[CAST_INVALID_INPUT]`` under ANSI).
    One event of every registered type (its payload as the store keeps it), and one of a type no
    release has (each flattened field of the other kind: a newer release's, or a hand's), each
    reads, its flattened fields null where they are not of the column's kind."""
    import typing

    import attrs

    from ledger.core.events import encode, registered, type_of
    from tests.forge import forge

    led.create_table("sales.orders")  # a ledger with a head, as every real one has
    kinds = registered()
    for type_name, cls in sorted(kinds.items()):
        hints = typing.get_type_hints(cls)
        event = cls(**{f.name: sample(hints[f.name], f.name) for f in attrs.fields(cls)})
        forge(led.path, stream=f"probe-{type_name}", type=type_name, payload=encode(event),
              schema_version=type_of(event)[1], actor="test")
    odd = {"to": "soon", "number": "one", "files": {"n": 1}, "bytes": [1], "table_ids": "t1", "table_id": 7,
           "name": 3, "database": ["a"]}
    forge(led.path, stream="probe-odd", type="NotYetInvented", payload=json.dumps(odd), actor="test")
    rows = read_log(spark, led).orderBy("seq").collect()
    assert len(rows) == led.event_count() == len(kinds) + 2
    assert {r.type for r in rows} == {*kinds, "NotYetInvented"}
    for row in rows[1:-1]:
        payload = json.loads(row.payload)
        for column in ("number", "files", "bytes"):
            value = payload.get(column)
            assert getattr(row, column) == (value if isinstance(value, int) else None), (row.type, column)
        assert row.to == (None if "to" not in payload else row.to) and row.hash
    last = rows[-1]
    assert (last.to, last.number, last.files, last.bytes, last.table_ids) == (None, None, None, None, None)
    assert last.payload == json.dumps(odd)


def test_r24_a_table_with_no_data_yet_reads_as_table_not_found_in_one_line(spark, led) -> None:
    """On Connect a read is planned lazily: the empty location's PATH_NOT_FOUND came out of the
    first action, as 111 lines of gRPC error, not out of ``read_table``."""
    led.create_table("sales.empty")
    before = led.event_count()
    with pytest.raises(TableNotFound) as refused:
        read_table(spark, led, "sales.empty")
    assert "sales.empty" in one_line(refused) and "has no data yet" in str(refused.value)
    assert led.event_count() == before


# --- nothing recorded for a write Spark refuses at once (R24) -------------------------------------

REFUSED: dict[str, tuple[Callable[[Any], Any], dict[str, Any], str]] = {
    "two-columns-spark-takes-for-one": (
        lambda s: s.range(3).selectExpr("id", "id * 2 AS ID"), {},
        r"two columns named id \(id, ID\).*rename one"),
    "a-partition-column-it-does-not-have": (
        lambda s: frame(s, 0, 3), {"partition_by": ["region"]},
        r"partition_by names region, which is not a column of the DataFrame \(id, label, bucket\)"),
    "partitioned-by-every-column": (
        lambda s: s.range(3), {"partition_by": ["id"]},
        r"partition_by names every column .*at least one column must stay in the files"),
    "a-partition-column-named-twice": (
        lambda s: frame(s, 0, 3), {"partition_by": ["bucket", "BUCKET"]},
        r"partition_by names bucket twice"),
    "partitioned-by-a-struct": (
        lambda s: s.range(3).selectExpr("id", "named_struct('a', id) AS nested"), {"partition_by": ["nested"]},
        r"cannot partition by nested: it is struct<a:bigint>.*a partition column must be a plain value"),
    "a-calendar-interval-column": (
        lambda s: s.range(3).selectExpr("id", "make_interval(0, 0, 0, 1, 0, 0, 0) AS every"), {},
        r"column every is interval, which Parquet cannot hold"),
    "no-columns": (lambda s: s.range(3).select(), {}, r"the DataFrame has no columns"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_r24_a_write_spark_refuses_at_once_is_refused_before_anything_is_recorded(
        spark, led, case: str) -> None:
    """Each of these used to record a created table, a begun write and its abort, then raise
    Spark's AnalysisException with its plan (a table created for a write that failed at once)."""
    build, options, message = REFUSED[case]
    df = build(spark)
    led.create_table("sales.live")  # a live table: no write may be begun on it either
    before, tables = led.event_count(), led.tables()
    for name in ("sales.orders", "sales.live"):
        with pytest.raises(InvalidArgument, match=message) as refused:
            write_table(df, led, name, **options)
        assert "nothing was recorded" in one_line(refused)
    assert (led.event_count(), led.tables(), led.open_writes()) == (before, tables, [])
    assert not os.path.exists(led.warehouse) or os.listdir(led.warehouse) == []


@pytest.mark.parametrize("mode, said", [
    ("errorifexists", r"'errorifexists' \('errorifexists' is a Spark DataFrameWriter mode: a table here is a "
                      r"sequence of versions"),
    ("error", r"'error' \('error' is a Spark DataFrameWriter mode"),
    ("ignore", r"'ignore' \('ignore' is a Spark DataFrameWriter mode"),
    ("default", r"'default' \('default' is a Spark DataFrameWriter mode"),
    ("Overwrite", r"'Overwrite'$"),
    ("upsert", r"'upsert'$"),
])
def test_r24_a_write_mode_write_table_does_not_take_is_refused_before_anything_is_recorded(
        spark, led, mode: str, said: str) -> None:
    """Spark's writer has modes a ledger table has not (no path is ever "already there" to refuse or
    skip; a Connect client refuses ``errorifexists`` too): each, and a mode neither has, is one line
    naming the two there are, before Spark is asked, on a new name and on a live table."""
    led.create_table("sales.live")
    before = led.event_count()
    for name in ("sales.orders", "sales.live"):
        with pytest.raises(InvalidArgument, match=r"^write mode must be one of append, overwrite, not " + said) as no:
            write_table(frame(spark, 0, 3), led, name, mode=mode)
        one_line(no)
    assert (led.event_count(), [t.name for t in led.tables()], led.open_writes()) == (before, ["sales.live"], [])


def test_r24_a_refused_write_to_a_live_table_begins_no_write(spark, led) -> None:
    write_table(frame(spark, 0, 3), led, "sales.orders")
    before = led.event_count()
    with pytest.raises(InvalidArgument, match="two columns named label"):
        write_table(frame(spark, 3, 3).selectExpr("id", "label", "bucket AS LABEL"), led, "sales.orders")
    assert led.event_count() == before and led.open_writes() == []
    assert ids(read_table(spark, led, "sales.orders", pin=False)) == [0, 1, 2]


def test_r24_a_dataframe_spark_cannot_analyse_records_nothing(spark, spark_kind, led) -> None:
    """A classic DataFrame is analysed when it is built, so Spark refuses it before ``write_table``
    sees it; a Connect one only when its plan first reaches the server, which used to be after the
    table was created. Both leave the ledger as it was."""
    from pyspark.errors import AnalysisException

    before = led.event_count()
    if spark_kind == "classic":
        with pytest.raises(AnalysisException, match="nope"):
            spark.range(3).select("nope")
    else:
        with pytest.raises(InvalidArgument, match=r"sales.orders: Spark cannot plan the DataFrame \(\[UNRESOLVED_"
                                                  r"COLUMN.*`nope`.*nothing was recorded") as refused:
            write_table(spark.range(3).select("nope"), led, "sales.orders")
        one_line(refused)
    assert led.event_count() == before and led.tables() == []


@pytest.mark.parametrize("root, said", [
    ("s3a://lake-bucket/prod", r"Class org.apache.hadoop.fs.s3a.S3AFileSystem not found"),
    ("s3://lake-bucket/prod", r"No FileSystem for scheme \"s3\""),
])
def test_r24_a_warehouse_spark_has_no_file_system_for_is_refused_before_anything_is_recorded(
        spark, tmp_path: Path, root: str, said: str) -> None:
    """No s3a connector here: on Connect the write used to create the table and begin a write
    first (the check asked the JVM, which a Connect client has not got), and a read to pin."""
    with Ledger.open(tmp_path / "l.db", warehouse=root) as led:
        with pytest.raises(SparkUnavailable, match=rf"Spark has no file system for the warehouse {root} \({said}\): "
                                                   r"add the Hadoop connector .*nothing was recorded") as refused:
            write_table(spark.range(3), led, "sales.orders")
        one_line(refused)
        assert led.event_count() == 0 and led.tables() == []
        led.create_table("sales.orders")  # a version recorded by another host, which can write there
        w = led.begin_write("sales.orders")
        led.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", 10)])
        before = led.event_count()
        for call in (lambda: write_table(spark.range(3), led, "sales.orders"),
                     lambda: read_table(spark, led, "sales.orders"),
                     lambda: reading(spark, led, "sales.orders").__enter__()):
            with pytest.raises(SparkUnavailable, match="Spark has no file system for the warehouse"):
                call()
        assert led.event_count() == before and led.pins() == [] and led.open_writes() == []


def test_r24_a_first_write_that_fails_in_spark_leaves_no_table_behind(spark, led) -> None:
    """A table ``write_table`` created for a write that then failed used to stay, live and empty
    (its reads failing on a missing folder). It is dropped again, so the name is as it was; a
    table created beforehand stays, its write aborted."""
    bad = frame(spark, 0, 3).selectExpr("id", "CAST(raise_error('boom') AS string) AS label", "bucket")
    with pytest.raises(Exception, match="boom"):
        write_table(bad, led, "sales.orders")
    assert led.tables() == [] and led.open_writes() == []
    [failed] = led.dropped_tables(name="sales.orders")
    assert [e.type for e in led.history(table_id=failed.id)] == ["TableCreated", "WriteBegun", "WriteAborted",
                                                                 "TableDropped"]
    version = write_table(frame(spark, 0, 3), led, "sales.orders")  # the name is free: a new instance
    assert version.number == 1 and led.table("sales.orders").id != failed.id

    kept = led.create_table("sales.kept")
    with pytest.raises(Exception, match="boom"):
        write_table(bad, led, "sales.kept")
    assert led.table("sales.kept").id == kept.id and led.open_writes() == []


# --- local_session(remote=...) ---------------------------------------------------------------

@pytest.mark.parametrize("address, said", [
    ("sc://127.0.0.1:notaport", r"'sc://127.0.0.1:notaport' is not a Spark Connect address \(its port"),
    ("sc://127.0.0.1:99999", r"'sc://127.0.0.1:99999' is not a Spark Connect address \(its port"),
    ("localhost:15002", r"'localhost:15002' is not a Spark Connect address: give sc://host:port"),
    ("sc:///tenant", r"'sc:///tenant' is not a Spark Connect address: give sc://host:port"),
    ("grpc://127.0.0.1:15002", r"'grpc://127.0.0.1:15002' is not a Spark Connect address"),
])
def test_r24_a_malformed_connect_address_is_one_typed_line(address: str, said: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad port escaped as a raw ValueError; ``localhost:15002`` was taken for ``local[N]`` and
    started a Spark of its own in this process."""
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    with pytest.raises(SparkUnavailable, match=said) as refused:
        local_session(remote=address)
    one_line(refused)
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ


def test_r23_r24_a_connect_address_in_a_message_never_shows_its_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    for address in ("sc://127.0.0.1:notaport/;token=s3cr3t-value", f"sc://127.0.0.1:{free_port()}/;token=s3cr3t-value",
                    "grpc://127.0.0.1:1/;user_id=me;token=s3cr3t-value"):
        with pytest.raises(SparkUnavailable) as refused:
            local_session(remote=address)
        assert "s3cr3t" not in str(refused.value)


def test_r24_an_address_nobody_listens_on_is_one_typed_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    port = free_port()
    with pytest.raises(SparkUnavailable, match=rf"cannot reach the Spark Connect server at 127.0.0.1:{port} "
                                               r"\(Connection refused\)") as refused:
        local_session(remote=f"sc://127.0.0.1:{port}")
    one_line(refused)
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ


@pytest.fixture
def not_a_connect_server() -> Iterator[int]:
    """A real TCP listener that accepts and hangs up: a port that answers, but not with Spark Connect."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)  # so that the loop sees ``stop``: closing does not wake an accept
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.close()
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    listener.close()


def test_r24_a_port_that_is_not_a_connect_server_is_one_typed_line_and_leaves_this_process_classic(
        not_a_connect_server: int, connect_spark, monkeypatch: pytest.MonkeyPatch) -> None:
    """gRPC's default retries waited ten minutes before saying anything; PySpark's Connect mark
    stayed set, so this process's ``pyspark.sql.functions`` built Connect columns for a classic
    session after the attempt failed; and where this process already had a Connect session (here,
    on the tests' server), PySpark's ``getOrCreate`` handed that one back for any address."""
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    address = f"sc://127.0.0.1:{not_a_connect_server}"
    with pytest.raises(SparkUnavailable, match=rf"the Spark Connect server at {address} did not answer") as refused:
        local_session(remote=address)
    one_line(refused)
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ
    assert connect_spark.range(3).count() == 3  # the other server's session is untouched


def test_r24_a_setting_the_connect_server_refuses_is_named(connect_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A static setting (the executors' memory) cannot be changed on a running server: that used
    to be reported as a server that "did not answer"."""
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    with pytest.raises(SparkUnavailable, match=rf"the Spark Connect server at {connect_server.address} refused "
                                               r"the setting spark.executor.memory=1g \(.*CANNOT_MODIFY_CONFIG") as no:
        local_session(remote=connect_server.address, conf={"spark.executor.memory": "1g"})
    one_line(no)


def run_python(folder: Path, code: str, env: dict[str, str] | None = None,
               timeout: float = 600) -> subprocess.CompletedProcess:
    """``code`` as a script of its own, run in a process of its own (no Connect mark inherited)."""
    script = folder / "script.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_what_local_session_is_about_to_start_is_said_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo said "starting a local SparkSession" whatever it started or reached (issue 57):
    what a command says before the wait comes from the session adapter, which reads SPARK_REMOTE
    as local_session does, and never shows a token (R23)."""
    from spark_ops.session import starting

    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert starting() == "starting a local SparkSession"
    assert starting(master="local[4]") == "starting a local SparkSession (local[4])"
    assert starting(master="spark://h:7077") == "starting a SparkSession on spark://h:7077"
    assert starting(remote="local[2]") == "starting a Spark Connect server in this process (local[2])"
    assert starting(remote="sc://h:15002/;token=s3cr3t") == "connecting to the Spark Connect server at sc://h:15002;..."
    monkeypatch.setenv("SPARK_REMOTE", "sc://h:15002")
    assert starting() == "connecting to the Spark Connect server at sc://h:15002"
    assert starting(remote="") == "starting a local SparkSession"


def test_r24_remote_empty_is_a_classic_session_even_where_spark_remote_is_set(tmp_path: Path) -> None:
    """PySpark's builder makes a Connect session whenever SPARK_REMOTE is set, so ``remote=""``
    (which the docstring promised is classic) tried the address in SPARK_REMOTE instead."""
    done = run_python(tmp_path, """
        import os
        from spark_ops import local_session
        from spark_ops.session import is_connect
        spark = local_session(remote="")
        print(is_connect(spark), spark.range(3).count(), os.environ["SPARK_REMOTE"])
        spark.stop()
    """, env={"SPARK_REMOTE": f"sc://127.0.0.1:{free_port()}"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[:2] == ["False", "3"] and done.stdout.split()[2].startswith("sc://")


def test_r24_a_client_without_connect_libraries_is_told_what_to_install(tmp_path: Path) -> None:
    """In a process where gRPC cannot be imported (Python refuses the import, as it would were
    grpcio not installed), a Connect address is one line naming the package to install. (A script,
    not ``python -c``: PySpark's check takes a main module without a file for its doctests.)"""
    done = run_python(tmp_path, """
        import sys
        sys.modules["grpc"] = None  # what an import of a package that is not installed meets
        from spark_ops import SparkUnavailable, local_session
        try:
            local_session(remote="sc://127.0.0.1:1")
        except SparkUnavailable as exc:
            print(exc)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Spark Connect needs PySpark's connect extras (") and done.stdout.count("\n") == 1
    assert "pip install 'retention-ledger[connect]'" in done.stdout


def test_a_vacuum_in_a_process_without_pandas_is_one_typed_line_naming_the_install_and_records_nothing(
        spark, led, clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 57: without pandas (which PySpark's mapInArrow needs in the driver) the vacuum failed
    with PySpark's raw ``PySparkImportError`` in the middle of its job, after it had recorded its
    start. Now the driver's libraries are asked for before anything is recorded, as the
    executors are (R19), and the answer names what to install."""
    write_table(frame(spark, 0, 4), led, "sales.orders")
    location = Path(led.table("sales.orders").location)
    led.drop_table("sales.orders")
    clock.advance(8 * DAY)
    before = led.event_count()
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an import of a package that is not installed meets
    from spark_ops import vacuum
    for dry_run in (True, False):
        with pytest.raises(SparkUnavailable) as refused:
            vacuum(spark, led, dry_run=dry_run)
        said = one_line(refused)
        assert said.startswith("Spark's Arrow jobs (mapInArrow, the vacuum's) need pandas and pyarrow in this "
                               "process ([PACKAGE_NOT_INSTALLED] Pandas >= "), said
        assert said.endswith(": pip install 'pyspark[sql]' (retention-ledger's own install brings them)")
    assert led.event_count() == before and any(location.rglob("*.parquet"))


def test_r24_a_connect_server_in_this_process_writes_and_reads_as_the_tester_did(tmp_path: Path) -> None:
    """``remote="local[2]"``: PySpark starts a Connect server in the calling process (the issue's
    reproduction). A process holds one kind of session, so this runs in a process of its own.

    Its JVM is this process's, and writes on its stderr: it is set up as a classic session's
    (quiet logs, no progress bars). Before, PySpark started it with Spark's default logging, and
    ``attach`` printed about 190 lines of Java stack traces (issue 57: Spark's FileStreamSink
    probes a table's one path, here a glob of the version's files, as a streaming sink's folder,
    and warns with the trace when no such file is there)."""
    done = run_python(tmp_path, f"""
        import json, sys
        from ledger import Ledger
        from spark_ops import attach, local_session, read_log, read_table, write_table
        from spark_ops.session import is_connect
        spark = local_session(remote="local[2]")
        with Ledger.open({str(tmp_path / 'l.db')!r}) as led:
            version = write_table(spark.range(5).repartition(2), led, "sales.orders")
            rows = read_table(spark, led, "sales.orders").count()
            print("-- attach --", file=sys.stderr, flush=True)
            attach(spark, led)
            named = spark.sql("SELECT count(*) FROM sales.orders").first()[0]
            print(json.dumps({{"connect": is_connect(spark), "version": version.number, "rows": rows,
                              "events": read_log(spark, led).count() == led.event_count(), "named": named}}))
        spark.stop()
    """, env={"SPARK_TESTING": "1"})  # PySpark's own switch: the server on a port of its own, not 15002
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"connect": True, "version": 1, "rows": 5,
                                                                "events": True, "named": 5}
    said = done.stderr[done.stderr.index("-- attach --"):]
    assert "\tat org.apache" not in said and "Exception" not in said and " WARN " not in said, said[:3000]
    assert "[Stage " not in done.stderr and "UserWarning" not in done.stderr, done.stderr[-3000:]


def test_r24_an_error_the_in_process_connect_server_sends_this_process_is_raised_not_also_printed_in_java(
        tmp_path: Path) -> None:
    """CI saw ``spark.stop()`` print a 30-line Java stack trace after the previous test's attach:
    PySpark releases the session while a finished query's results are still being released in the
    background, and the server logged the second call's "session closed" with its trace. The
    client (this process) gets every such error already, so the server's copy is not printed.
    Here the race is made certain: the session is released and then used."""
    done = run_python(tmp_path, """
        import sys
        from spark_ops import local_session
        spark = local_session(remote="local[2]")
        print(spark.range(3).count(), flush=True)
        print("-- released --", file=sys.stderr, flush=True)
        spark.client.release_session()
        try:
            spark.range(2).count()
        except Exception as exc:
            print("SESSION_CLOSED" in str(exc), flush=True)
        spark.stop()
    """, env={"SPARK_TESTING": "1"})
    assert done.returncode == 0 and done.stdout == "3\nTrue\n", done.stdout + done.stderr[-3000:]
    said = done.stderr[done.stderr.index("-- released --"):]
    assert "\tat org.apache" not in said and "ERROR" not in said, said[:3000]


def test_r22_a_process_whose_in_process_connect_server_was_stopped_exits_at_once_and_quietly(tmp_path: Path) -> None:
    """``retention-ledger demo --remote local[2]`` printed its last line and then did not exit for
    ten minutes: the command stops the Spark it started (``stop_local_spark``), which takes the
    in-process Connect server with it, and PySpark's calls to that server as Python exits (release
    the session) waited out their retries. As for a remote server, they are now brief, and say
    nothing."""
    done = run_python(tmp_path, """
        from spark_ops import local_session, stop_local_spark
        spark = local_session(remote="local[2]")
        print(spark.range(3).count(), flush=True)
        stop_local_spark()
    """, env={"SPARK_TESTING": "1"}, timeout=240)
    assert done.returncode == 0 and done.stdout == "3\n", done.stdout + done.stderr[-3000:]
    assert "RETRIES_EXCEEDED" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]


def test_r24_an_in_process_connect_server_whose_port_is_taken_is_one_typed_line(tmp_path: Path) -> None:
    """PySpark's in-process server always listens on 15002 (it connects to sc://localhost): with
    that port taken, by another Connect server or anything else, the JVM failed to start its plugin
    and the message named only "JavaSparkContext"."""
    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", 15002))
        taken.listen(1)
    except OSError:  # already taken (by another Connect server on this machine): as good
        pass
    try:
        done = run_python(tmp_path, """
            from spark_ops import SparkUnavailable, local_session
            try:
                local_session(remote="local[2]")
            except SparkUnavailable as exc:
                print(exc)
        """)
    finally:
        taken.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("\n") == 1, done.stdout
    assert done.stdout.startswith("a Spark Connect server in this process (local[2]) needs port 15002, which is in use")


# --- the pytest plugin, for a pipeline's own tests ---------------------------------------------

PIPELINE_TEST = """
from spark_ops import read_table, write_table
from spark_ops.session import is_connect


def test_my_pipeline(spark, ledger):
    assert is_connect(spark)
    write_table(spark.range(4), ledger, "sales.orders")
    assert read_table(spark, ledger, "sales.orders").count() == 4
"""


@pytest.mark.parametrize("how", ["--spark-remote", "SPARK_REMOTE"])
def test_r24_a_pipelines_own_tests_run_on_a_connect_server(connect_server, tmp_path: Path, how: str) -> None:
    """The plugin's ``spark`` fixture is a Connect session when asked: ``--spark-remote`` or
    PySpark's own SPARK_REMOTE (a user's own pytest run, in a process of its own)."""
    (tmp_path / "test_pipeline.py").write_text(PIPELINE_TEST)
    argv = ["--spark-remote", connect_server.address] if how == "--spark-remote" else []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    if how == "SPARK_REMOTE":
        env["SPARK_REMOTE"] = connect_server.address
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path), *argv],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout
