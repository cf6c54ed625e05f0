"""R2, R3, R8, R10, R11, R21, R24 on Spark Connect when the server is elsewhere, down or restarted
(issue 58): nothing is recorded before Spark can act, nothing is recorded that Spark did not see,
the calls that must reach a server elsewhere do (a dry run's listing, ``read_log``), and a session
the server no longer has holds nothing and is said in one line.

Real servers only, each a process of its own (``tests/connect.py``): one the tests kill (SIGKILL),
restart on the same port under a client's session, or keep down; one started with folders it sees
empty (an empty folder mounted over each in the server's own mount namespace: the client's
temporary folder, whole warehouses, one table's location), as a server on another machine or
another mount sees them; one that forgets an idle session within seconds, as every server does
after its idle timeout. Ledgers are real SQLite files; the files Spark must not be asked to write
(a warehouse the server does not see) are real Parquet files written here with pyarrow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ledger import Ledger, ManualClock
from spark_ops import SparkUnavailable, attach, detach, local_session, read_log, read_table, refresh, vacuum, write_table
from tests.conftest import T0
from tests.connect import REPO, ConnectServer

pytestmark = pytest.mark.spark

DAY = timedelta(days=1)


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    """The refusal's message: one line a user can act on, never Spark's, gRPC's or Java's page."""
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text and "\tat " not in text, text
    return text


@pytest.fixture
def connect_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process is a Connect client while the test runs (PySpark's mark: its functions build
    Connect columns), as the ``spark`` fixture makes it for a Connect test."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")


def session_on(server: ConnectServer) -> Any:
    """A client session on ``server``, as a user's process makes one."""
    return server.client(local_session("retention-ledger-tests", remote=server.address))


def put_version(led: Ledger, name: str, first: int = 0, *, files: int = 2, rows: int = 10, mode: str = "append") -> Any:
    """A version of ``name`` (created if need be) of real Parquet files written here, as another host
    that can write to the warehouse writes them: ``files`` files of ``rows`` ids each from ``first``."""
    if name not in [t.name for t in led.tables()]:
        led.create_table(name)
    write = led.begin_write(name)
    found = []
    for i in range(files):
        path = Path(write.folder) / f"part-{i:05d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        start = first + i * rows
        pq.write_table(pa.table({"id": pa.array(range(start, start + rows), pa.int64())}), path)
        found.append((f"{write.relative_folder}/{path.name}", path.stat().st_size))
    return led.commit_write(write.id, found, mode=mode)


def files_under(folder: str | Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in Path(folder).rglob("*") if p.is_file()}


def aged(led: Ledger, clock: ManualClock, name: str = "sales.gone") -> str:
    """A table of two versions (the first expires) dropped past its retention; its location."""
    put_version(led, name)
    clock.advance(DAY)
    put_version(led, name, 100, mode="overwrite")
    location = led.table(name).location
    led.drop_table(name)
    clock.advance(8 * DAY)
    return location


def vacuumed_once(server: ConnectServer, led: Ledger, clock: ManualClock) -> tuple[Any, str]:
    """A session on ``server`` that has vacuumed ``led`` once (its pre-flight is remembered, as in a
    pipeline that vacuums every night), and ``sales.gone`` dropped past its retention since, for
    the next vacuum: the session, and that table's location."""
    aged(led, clock, "sales.first")
    spark = session_on(server)
    assert len(vacuum(spark, led).purged) == 1
    return spark, aged(led, clock)


# --- a server the tests kill, restart and keep down -------------------------------------------

@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Connect server the tests take away from under their sessions (each test starts it again if
    an earlier one left it down)."""
    server = ConnectServer(tmp_path_factory.mktemp("restartable") / "server.log")
    yield server
    server.close()


@pytest.fixture
def server(restartable: ConnectServer) -> ConnectServer:
    if restartable.process is None or restartable.process.poll() is not None:
        restartable.start()
    return restartable


def test_r2_r3_r24_a_vacuum_on_a_session_whose_server_restarted_records_nothing_and_the_table_stays_restorable(
        server: ConnectServer, connect_mode: None, tmp_path: Path) -> None:
    """Issue 58, item 1: the session had vacuumed before (its pre-flight remembered), then its server
    restarted under it. The vacuum recorded a watermark and ``VacuumStarted`` before Spark was asked
    anything, then failed with PySpark's ``[NO_ACTIVE_SESSION]``: nothing deleted, yet the table it
    planned could never be undropped. A dead session is refused before anything is recorded, and
    the next session made for the address works at once (item 9: the first ``local_session`` after
    a restart blamed a setting the server never refused)."""
    clock = ManualClock(T0)
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as led:
        spark, location = vacuumed_once(server, led, clock)
        before = led.event_count()
        server.restart()
        for dry_run in (False, True):
            with pytest.raises(SparkUnavailable) as refused:
                vacuum(spark, led, dry_run=dry_run)
            said = one_line(refused)
            assert said.startswith(f"the Spark Connect session on {server.address} has ended"), said
            assert "make a new session" in said and said.endswith("nothing was recorded")
        assert led.event_count() == before
        assert files_under(location) and led.undrop_table("sales.gone").name == "sales.gone"
        led.drop_table("sales.gone")
        clock.advance(8 * DAY)
        again = session_on(server)  # the first call after the restart: a new session, no refusal
        assert again is not spark and again.range(3).count() == 3
        report = vacuum(again, led)
        assert len(report.purged) == 1 and not report.failures and not os.path.exists(location)


def test_r24_refresh_erase_and_a_new_session_after_a_restart_are_one_line_and_renew_nothing(
        server: ConnectServer, connect_mode: None, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 58, item 9: after a restart, ``refresh`` renewed every pin (``PinRenewed`` recorded) and
    then raised ``[NO_ACTIVE_SESSION]``; ``erase`` blamed a predicate that works
    (``InvalidArgument: Spark cannot use the predicate 'k = 1' ... ([NO_ACTIVE_SESSION] ...)``);
    ``write_table`` and ``read_table`` raised PySpark's own error; and the first ``local_session``
    for the address said the server refused the session's time zone. Each is now one line,
    ``SparkUnavailable``, saying the session ended, before anything is recorded or renewed."""
    from spark_ops import erase

    clock = ManualClock(T0)
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as led:
        spark = session_on(server)
        write_table(spark.range(6).selectExpr("id AS k"), led, "crm.users")
        assert attach(spark, led) == ["crm.users"]
        pins = sorted(p.id for p in led.pins())
        server.restart()
        before = led.event_count()
        calls = {
            "refresh": lambda: refresh(spark, led),
            "erase": lambda: erase(spark, led, "crm.users", "k = 1", reason="a test"),
            "write_table": lambda: write_table(spark.range(3).selectExpr("id AS k"), led, "crm.users"),
            "read_table": lambda: read_table(spark, led, "crm.users"),
            "attach": lambda: attach(spark, led),
        }
        for call, run in calls.items():
            with pytest.raises(SparkUnavailable) as refused:
                run()
            said = one_line(refused)
            assert said.startswith(f"the Spark Connect session on {server.address} has ended"), (call, said)
            assert led.event_count() == before, call
        assert sorted(p.id for p in led.pins()) == pins  # nothing renewed, nothing released
        assert detach(spark, led) == ["crm.users"]  # the pins go; the views went with the server
        assert led.pins() == []
        again = session_on(server)
        assert again is not spark and attach(again, led) == ["crm.users"]
        assert sorted(r.k for r in again.table("crm.users").collect()) == [0, 1, 2, 3, 4, 5]
        assert erase(again, led, "crm.users", "k = 1", reason="a test").files
        assert detach(again, led) == ["crm.users"]


def test_r24_the_first_local_session_after_a_restart_is_a_new_session_that_works(
        server: ConnectServer, connect_mode: None) -> None:
    """Issue 58, item 9: the first ``local_session(remote=...)`` after its server restarted said
    ``SparkUnavailable: ... refused the setting spark.sql.session.timeZone=UTC
    ([INVALID_HANDLE.SESSION_CHANGED] ...): leave it out``, though the server refused nothing and
    a second call worked. The session it made before for the address, which the server no longer
    has, is let go and a new one made, with its settings."""
    spark = session_on(server)
    assert spark.range(2).count() == 2
    server.restart()
    again = session_on(server)
    assert again is not spark and again.range(3).count() == 3
    assert again.conf.get("spark.sql.session.timeZone") == "UTC"


def test_r10_r24_a_vacuum_whose_server_restarts_mid_run_is_one_line_and_the_next_run_finishes_it(
        server: ConnectServer, connect_mode: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 58, item 9: a vacuum whose server died mid-run and came back was told PySpark's
    ``[RESPONSE_ALREADY_RECEIVED] INVALID_HANDLE.SESSION_NOT_FOUND ...``. Now one line saying the
    session ended while the vacuum ran; its start is on record, its lease released, so a vacuum on
    a new session takes the run over at once and finishes it: nothing lost, nothing half-recorded."""
    clock = ManualClock(T0)
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as led:
        location = aged(led, clock)
        spark = session_on(server)
        started = led.start_vacuum

        def start_then_restart(**options: Any) -> Any:
            run = started(**options)
            server.restart()  # the server goes, and another takes its port, while the run is on record
            return run
        monkeypatch.setattr(led, "start_vacuum", start_then_restart)
        with pytest.raises(SparkUnavailable) as refused:
            vacuum(spark, led)
        said = one_line(refused)
        assert said.startswith(f"the Spark Connect session on {server.address} ended while the vacuum ran"), said
        assert "the next vacuum takes its work over" in said
        monkeypatch.undo()
        assert files_under(location)  # nothing lost: every file is still there for the next run
        [run] = [e for e in led.history() if e.type == "VacuumStarted"]
        report = vacuum(session_on(server), led)
        assert report.resumed_runs == (run.data["run_id"],) and len(report.purged) == 1 and not report.failures
        assert not os.path.exists(location)


def test_r2_r24_a_vacuum_whose_server_is_down_is_refused_within_seconds_and_records_nothing(
        server: ConnectServer, connect_mode: None, tmp_path: Path) -> None:
    """Issue 58, item 2: with the server down when the call started (the session had vacuumed
    before, so its pre-flight was remembered), the vacuum recorded its watermark and
    ``VacuumStarted`` at once, then waited out gRPC's retries (611 s) with its lease renewed, and
    said gRPC's page (``_InactiveRpcError ... UNAVAILABLE ... Connection refused``)."""
    clock = ManualClock(T0)
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as led:
        spark, location = vacuumed_once(server, led, clock)
        before = led.event_count()
        server.kill()
        began = time.monotonic()
        with pytest.raises(SparkUnavailable) as refused:
            vacuum(spark, led)
        waited = time.monotonic() - began
        said = one_line(refused)
        assert said.startswith(f"the Spark Connect server at {server.address} does not answer ("), said
        assert said.endswith("check that it runs, and its address; nothing was recorded") and waited < 30, \
            (waited, said)
        assert led.event_count() == before and files_under(location)
        assert led.undrop_table("sales.gone").name == "sales.gone"


# --- a server that sees other folders than the client -------------------------------------------

class Elsewhere:
    """What the ``elsewhere`` server does not see: the client's temporary folder, two whole
    warehouses (it sees an empty folder at each), a live table's location (an empty folder there)
    and a dropped table's (not there at all), in ledgers made before it started, so that their
    tables' locations are known."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.client_tmp = home / "client-tmp"
        self.blind = {n: home / f"blind-{n}" for n in ("write", "vacuum")}
        self.clock = ManualClock(T0)
        self.partial = home / "partial.db"  # sales.hidden: a live table whose location the server sees empty
        self.gone = home / "gone.db"        # sales.gone: a dropped table whose location it does not see
        with Ledger.open(self.partial, clock=self.clock, actor="test") as led:
            self.hidden = [Path(led.create_table("sales.hidden").location)]
        with Ledger.open(self.gone, clock=self.clock, actor="test", warehouse=home / "gone-warehouse") as led:
            self.concealed = [Path(aged(led, self.clock, "sales.gone"))]
        self.server: ConnectServer | None = None

    def ledger(self, path: Path, **options: Any) -> Ledger:
        return Ledger.open(path, clock=self.clock, actor="test", **options)


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Elsewhere]:
    scene = Elsewhere(tmp_path_factory.mktemp("elsewhere"))
    scene.client_tmp.mkdir()
    scene.server = ConnectServer(scene.home / "server.log", hide=[scene.client_tmp, *scene.blind.values(), *scene.hidden],
                                 conceal=scene.concealed)
    yield scene
    scene.server.close()


@pytest.fixture
def client_tmp(elsewhere: Elsewhere, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process's temporary folder is one the server does not see (as on any remote server)."""
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere.client_tmp))
    return elsewhere.client_tmp


def test_r10_r11_r24_a_write_the_servers_executors_make_where_the_client_does_not_see_is_refused(
        elsewhere: Elsewhere, connect_mode: None) -> None:
    """Issue 58, item 3: the server's executors wrote where the client does not see (an empty mount on
    the server's side), and ``write_table`` committed a version of no files: 20 rows written,
    version 1 read 0 rows, silently. Now a warehouse the executors do not see is refused before
    anything is recorded; and what Spark wrote must be what the client lists before a commit (one
    location hidden from the server, the warehouse seen): the write is aborted, nothing committed."""
    assert elsewhere.server is not None
    spark = session_on(elsewhere.server)
    with elsewhere.ledger(elsewhere.home / "blind-write.db", warehouse=elsewhere.blind["write"]) as led:
        with pytest.raises(SparkUnavailable) as refused:
            write_table(spark.range(20), led, "sales.orders")
        said = one_line(refused)
        assert said.startswith("Spark's executors do not see the warehouse "), said
        assert said.endswith("nothing was recorded")
        assert led.event_count() == 0 and led.tables() == []
    with elsewhere.ledger(elsewhere.partial) as led:
        before = led.event_count()
        with pytest.raises(SparkUnavailable) as refused:
            write_table(spark.range(20), led, "sales.hidden")
        said = one_line(refused)
        assert "sales.hidden: Spark wrote" in said and "this process sees none of them" in said, said
        assert said.endswith("nothing was committed (the write is aborted)")
        assert led.table("sales.hidden").current_version is None and led.open_writes() == []
        assert led.event_count() - before == 2  # begun before Spark wrote, aborted: nothing committed
        assert [e.type for e in led.history("sales.hidden")][-2:] == ["WriteBegun", "WriteAborted"]


def test_r2_r8_r24_a_vacuum_whose_executors_see_an_empty_warehouse_records_nothing_and_purges_nothing(
        elsewhere: Elsewhere, connect_mode: None) -> None:
    """Issue 58, item 4: the pre-flight asked only whether a folder exists at the root's path, so a
    server that sees an empty folder there passed it; the vacuum then recorded every purge (and an
    expiry's folders deleted) with 0 files deleted, every file still in the warehouse the client
    and the ledger use, and purged is final (R8). Now the executors must read back a file this
    process wrote under the root, or nothing is recorded; and a purge whose location an executor
    found empty where the ledger knows files (the root seen, one location not) is not recorded."""
    assert elsewhere.server is not None
    spark = session_on(elsewhere.server)
    root = elsewhere.blind["vacuum"]
    with elsewhere.ledger(elsewhere.home / "blind-vacuum.db", warehouse=root) as led:
        location = aged(led, elsewhere.clock, "sales.orders")
        put_version(led, "sales.live")
        elsewhere.clock.advance(DAY)
        put_version(led, "sales.live", 50, mode="overwrite")
        elsewhere.clock.advance(8 * DAY)
        held = files_under(root)
        before = led.event_count()
        for dry_run in (True, False):
            with pytest.raises(SparkUnavailable) as refused:
                vacuum(spark, led, dry_run=dry_run)
            said = one_line(refused)
            assert f"does not see the warehouse {root}" in said, said
            assert said.endswith("nothing was recorded")
        assert led.event_count() == before and files_under(root) == held
        assert led.undrop_table("sales.orders").location == location
    with elsewhere.ledger(elsewhere.gone) as led:
        [hidden] = led.dropped_tables(name="sales.gone")
        kept = files_under(hidden.location)
        for attempt in range(2):  # the next run (the table blocked by then) is refused as well
            report = vacuum(spark, led)
            [failed] = report.failures
            said = str(failed.error)
            assert failed.id == hidden.id and said.startswith(f"refused: the executor found no file in {hidden.location}, "
                                                              "where this process sees files"), said
            assert led.instance(hidden.id).purged_at is None and files_under(hidden.location) == kept
            assert not [e for e in led.history(table_id=hidden.id) if e.type == "TablePurged"]


def test_r2_r24_a_dry_run_lists_through_spark_where_the_server_does_not_see_the_clients_folders(
        elsewhere: Elsewhere, client_tmp: Path, connect_mode: None) -> None:
    """Issue 58, item 5: a dry run's listing went to a temporary folder of the client's, which a
    remote server cannot see: the executors failed with a page of the worker's traceback
    (``FileNotFoundError: Failed to open local file '<client tmp>/retention-ledger-dry-run-.../
    part-....parquet'``). The listing now comes back through Spark, to this process, whatever the
    size: in the report, or in the dataset the caller names; nothing is recorded."""
    assert elsewhere.server is not None
    spark = session_on(elsewhere.server)
    with elsewhere.ledger(elsewhere.home / "dry-run.db") as led:
        location = aged(led, elsewhere.clock, "sales.orders")
        before = led.event_count()
        report = vacuum(spark, led, dry_run=True)
        [item] = report.instances
        assert item.files == 4 and len(item.would_delete) == 4 and report.listing is None
        assert led.event_count() == before and len(files_under(location)) == 4
        kept = client_tmp / "listing"
        report = vacuum(spark, led, dry_run=True, listing_dir=kept, listing_threshold=1)
        assert report.listing == str(kept)
        listed = pq.read_table(kept).to_pylist()
        assert sorted(r["path"] for r in listed) == sorted(f"{location}/{f}" for f in files_under(location))
        assert led.event_count() == before


def test_r24_the_cli_dry_run_on_a_server_that_does_not_see_the_clients_folders(
        elsewhere: Elsewhere, client_tmp: Path) -> None:
    """Issue 58, item 5: the command printed 98 lines, and had no way to name another folder."""
    assert elsewhere.server is not None
    path = elsewhere.home / "cli.db"
    with elsewhere.ledger(path) as led:
        location = aged(led, elsewhere.clock, "sales.orders")
        before = led.event_count()
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(client_tmp)}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    kept = client_tmp / "cli-listing"
    done = subprocess.run([sys.executable, "-m", "retention_ledger", "--ledger", str(path), "vacuum", "--dry-run",
                           "--json", "--remote", elsewhere.server.address, "--listing-dir",
                           str(kept)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    [item] = json.loads(done.stdout)["instances"]
    assert item["files"] == 4 and len(files_under(location)) == 4
    assert sorted(r["path"] for r in pq.read_table(kept).to_pylist()) == \
        sorted(f"{location}/{f}" for f in files_under(location))
    with elsewhere.ledger(path) as led:
        assert led.event_count() == before


def test_r24_read_log_reads_the_log_through_the_session_on_a_server_elsewhere(
        elsewhere: Elsewhere, client_tmp: Path, connect_mode: None) -> None:
    """Issue 58, item 6: ``read_log`` exported the log to the client's temporary folder and asked the
    server to read that path (``[PATH_NOT_FOUND]``, then the JVM's stack). The rows now go through
    the session; with ``path=`` the export is kept there all the same."""
    assert elsewhere.server is not None
    spark = session_on(elsewhere.server)
    with elsewhere.ledger(elsewhere.home / "log.db") as led:
        aged(led, elsewhere.clock, "sales.orders")
        rows = read_log(spark, led).collect()
        assert [(r.seq, r.type) for r in rows] == [(e.seq, e.type) for e in led.history(pins=True)]
        assert rows[-1].type == "TableDropped" and rows[-1].name == "sales.orders"
        kept = client_tmp / "log.parquet"
        log = read_log(spark, led, path=kept)
        assert log.count() == led.event_count() and kept.exists()
        assert log.where("type = 'VersionCommitted'").select("files").first()[0] == 2


# --- a client killed while attached ----------------------------------------------------------------

SESSION_TIMEOUT = 8
"""Seconds the ``forgetful`` server keeps a session no client uses (Spark's default is an hour)."""

KILLED_CLIENT = """
import sys
from ledger import Ledger
from spark_ops import attach, local_session
spark = local_session(remote=sys.argv[2])
led = Ledger.open(sys.argv[1], actor="killed")
print(attach(spark, led), flush=True)
sys.stdin.read()  # until killed
"""


@pytest.fixture(scope="module")
def forgetful(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A server that forgets a session nobody used for ``SESSION_TIMEOUT`` seconds (as every server
    does after its idle timeout, ``spark.connect.session.manager.defaultSessionTimeout``)."""
    server = ConnectServer(tmp_path_factory.mktemp("forgetful") / "server.log", conf={
        "spark.connect.session.manager.defaultSessionTimeout": f"{SESSION_TIMEOUT}s",
        "spark.connect.session.manager.maintenanceInterval": "1s",
    })
    yield server
    server.close()


def test_r21_r24_the_views_of_a_killed_clients_session_the_server_no_longer_has_are_taken_over(
        forgetful: ConnectServer, connect_mode: None, tmp_path: Path) -> None:
    """Issue 58, item 8: a client SIGKILLed while attached left its views held by pins for their whole
    lease (an hour), and another client's attach was refused for that hour with ``TableExists:
    ... another Spark session shows this ledger's ... and holds its pin ...: detach it there``,
    naming a session that no longer exists. A session the server no longer has holds nothing: the
    next attach takes its views over, and lets its pins go."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    path = tmp_path / "ledger.db"
    with Ledger.open(path, actor="test") as led:
        put_version(led, "sales.orders")
        put_version(led, "sales.returns")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    child = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, str(path), forgetful.address], cwd=REPO,
                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "['sales.orders', 'sales.returns']", \
            child.stderr.read() if child.stderr else ""
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with Ledger.open(path, actor="test") as led:
        held = sorted(p.id for p in led.pins())
        assert len(held) == 2
        time.sleep(SESSION_TIMEOUT + 4)  # the server forgets the killed client's session
        spark = forgetful.client(ConnectSession.builder.remote(forgetful.address).create())  # a user's own, as Databricks gives one
        assert attach(spark, led) == ["sales.orders", "sales.returns"]
        assert sorted(r.id for r in spark.table("sales.orders").collect()) == list(range(20))
        assert not set(p.id for p in led.pins()) & set(held) and len(led.pins()) == 2  # the killed one's went
        assert detach(spark, led) == ["sales.orders", "sales.returns"]
        assert led.pins() == []


def test_r21_a_live_session_on_the_server_still_holds_its_views(
        forgetful: ConnectServer, connect_mode: None, tmp_path: Path) -> None:
    """The other side of item 8: a session the server still has (its client alive) keeps its views
    held; another attach of them is refused as before (``TableExists``), nothing pinned."""
    from ledger.errors import TableExists
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with Ledger.open(tmp_path / "ledger.db", actor="test") as led:
        put_version(led, "hr.people")
        first = forgetful.client(ConnectSession.builder.remote(forgetful.address).create())
        second = forgetful.client(ConnectSession.builder.remote(forgetful.address).create())
        assert attach(first, led) == ["hr.people"]
        try:
            pins = led.pins()
            with pytest.raises(TableExists, match="another Spark session shows this ledger's hr.people"):
                attach(second, led)
            assert led.pins() == pins
        finally:
            detach(first, led)
