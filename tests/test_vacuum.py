"""The vacuum end to end: a real local SparkSession, real Parquet files, a real ledger file."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ledger import InvalidArgument, InvalidRetention, Ledger, LedgerUnavailable, ManualClock, TableNotFound, UndropBlocked
from ledger.core.events import encode
from ledger.core.tables import TableCreated
from spark_ops import read_table, vacuum, write_table
from tests.conftest import T0
from tests.forge import forge
from tests.stores import FaultyStore

if TYPE_CHECKING:
    from spark_ops.executor.tasks import Job
    from vacuum_work import Purge

pytestmark = pytest.mark.spark
BOTH_SESSIONS = True  # R24: every Spark test here runs on a classic and a Spark Connect session
WEEK = timedelta(days=7)


def count_files(root: str) -> int:
    """Files under root, tolerating folders that vanish mid-walk (a vacuum is deleting them)."""
    return sum(len(files) for _, _, files in os.walk(root))


def files_under(location: str) -> list[str]:
    return sorted(str(p) for p in Path(location).rglob("*") if p.is_file() or p.is_symlink())


@pytest.fixture
def rows(spark):
    return spark.createDataFrame([(i, f"name-{i}", i * 1.5) for i in range(50)],
                                 "id int, name string, score double")


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock):
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as ledger:
        yield ledger


def make_table(led: Ledger, df, name: str, parts: int = 2) -> str:
    write_table(df.repartition(parts), led, name)
    return led.table(name).location


def test_r2_drop_then_vacuum_deletes_files_and_undrop_is_refused(spark, led, clock, rows) -> None:
    location = make_table(led, rows, "sales.orders")
    assert files_under(location)
    dropped = led.drop_table("sales.orders")
    clock.advance(WEEK + timedelta(hours=1))

    report = vacuum(spark, led)

    assert [r.id for r in report.purged] == [dropped.id]
    assert report.files == report.purged[0].files > 0 and report.bytes > 0
    assert report.watermarks == {"ledger": dropped.dropped_at}  # R6: a drop time, not a clock reading
    assert not os.path.exists(location)
    with pytest.raises(UndropBlocked, match=dropped.id):
        led.undrop_table("sales.orders")
    assert led.instance(dropped.id).state == "purged"
    types = [e.type for e in led.history()]
    start = types.index("WatermarkAdvanced")
    # R2: the watermark, then the start, then what was deleted (R20: the receipt's parts), then the end.
    parts = types[start + 2:-3]
    assert parts and set(parts) == {"ReceiptPart"}
    assert types[start:start + 2] + types[-3:] == ["WatermarkAdvanced", "VacuumStarted", "TablePurged",
                                                   "VacuumReceipt", "VacuumFinished"]


def test_the_report_reads_as_what_was_done_or_would_be(spark, led, clock, rows) -> None:
    make_table(led, rows, "sales.old")
    led.drop_table("sales.old")
    clock.advance(WEEK + timedelta(hours=1))
    make_table(led, rows, "sales.recent")
    led.drop_table("sales.recent")
    dry = vacuum(spark, led, dry_run=True)
    assert str(dry).splitlines()[0].startswith("dry run: would purge 1 table(s), would delete ")
    assert "1 dropped table(s) not yet due (the first: sales.recent, due " in str(dry)
    done = vacuum(spark, led)
    assert done.summary().startswith(f"vacuum {done.run_id}: purged 1 table(s), deleted {done.files} file(s) (")


def test_r5_instance_dropped_after_the_watermark_keeps_its_files_and_undrops(spark, led, clock, rows) -> None:
    old = make_table(led, rows, "sales.old")
    recent = make_table(led, rows, "sales.recent")
    recent_files = files_under(recent)
    led.drop_table("sales.old")
    clock.advance(WEEK + timedelta(hours=1))
    led.drop_table("sales.recent")

    report = vacuum(spark, led)

    assert [r.name for r in report.purged] == ["sales.old"] and not os.path.exists(old)
    assert files_under(recent) == recent_files
    restored = led.undrop_table("sales.recent")
    assert read_table(spark, led, "sales.recent").count() == 50 and restored.location == recent


def test_r2_dry_run_changes_no_state_and_no_file_and_lists_every_file(spark, led, clock, rows) -> None:
    location = make_table(led, rows, "sales.orders", parts=3)
    led.drop_table("sales.orders")
    clock.advance(WEEK * 2)
    before_files = {p: os.path.getsize(p) for p in files_under(location)}
    before_events = led.event_count()

    report = vacuum(spark, led, dry_run=True)

    assert led.event_count() == before_events
    assert {p: os.path.getsize(p) for p in files_under(location)} == before_files
    (item,) = report.instances
    assert {f.path: f.size for f in item.would_delete} == before_files
    assert item.files == len(before_files) and item.bytes == sum(before_files.values())
    assert report.run_id is None and report.purged == [] and "ledger" in report.watermarks
    led.undrop_table("sales.orders")  # still restorable: a dry run blocks nothing


def test_r2_failed_watermark_append_aborts_with_nothing_deleted(spark, led, clock, rows) -> None:
    location = make_table(led, rows, "sales.orders")
    led.drop_table("sales.orders")
    clock.advance(WEEK * 2)
    before = files_under(location)
    events = led.event_count()

    store = FaultyStore(led.path)
    store.fail_with = LedgerUnavailable("ledger.db: database or disk is full")
    with Ledger(store, clock=clock) as full_disk:
        with pytest.raises(LedgerUnavailable):
            vacuum(spark, full_disk)
    assert files_under(location) == before
    assert led.event_count() == events
    assert led.undrop_table("sales.orders").is_live


def test_r9_symbolic_link_inside_a_location_is_removed_but_never_followed(spark, led, clock, rows, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    (outside / "nested").mkdir()
    (outside / "nested" / "also.txt").write_text("keep me too")
    location = make_table(led, rows, "sales.orders")
    os.symlink(outside, Path(location) / "escape_dir")
    os.symlink(outside / "precious.txt", Path(location) / "escape_file")
    led.drop_table("sales.orders")
    clock.advance(WEEK * 2)

    dry = vacuum(spark, led, dry_run=True)
    assert not any("precious" in f.path or "also.txt" in f.path for f in dry.instances[0].would_delete)
    report = vacuum(spark, led)

    assert report.failures == [] and not os.path.exists(location)
    assert (outside / "precious.txt").read_text() == "keep me"
    assert (outside / "nested" / "also.txt").read_text() == "keep me too"


def test_r9_location_that_is_a_link_out_of_the_warehouse_is_refused(spark, led, clock, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    table = led.create_table("sales.orders")
    os.makedirs(led.warehouse, exist_ok=True)
    os.symlink(outside, table.location)
    led.drop_table("sales.orders")
    clock.advance(WEEK * 2)

    report = vacuum(spark, led)

    (failure,) = report.failures
    assert failure.id == table.id and "symbolic link" in failure.error
    assert (outside / "precious.txt").read_text() == "keep me"
    assert led.instance(table.id).state == "blocked"  # stays unrestorable, and unpurged
    # the readable summary does not call a failed purge purged
    assert str(report).splitlines()[0].startswith(f"vacuum {report.run_id}: purged 0 table(s), deleted 0 file(s)")
    assert f"failed: sales.orders: refused: {table.location} is a symbolic link" in str(report)


def test_r9_recorded_path_escaping_the_warehouse_is_refused(spark, tmp_path, clock) -> None:
    """A ledger whose log says an instance lives at ``../victim`` (a bug, or a tampered
    file) must not make the vacuum delete outside the warehouse."""
    path = tmp_path / "ledger.db"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "data.parquet").write_text("not yours")
    Ledger.open(path, clock=clock).close()
    forge(path, stream="catalog", version=1, type="TableCreated", time=1, actor="mallory",
          payload=encode(TableCreated("e" * 16, "sales.evil", "../victim")))
    with Ledger.open(path, clock=clock) as led:
        led.drop_table("sales.evil")
        clock.advance(WEEK * 2)
        report = vacuum(spark, led)
        (failure,) = report.failures
        assert "refused" in failure.error
    assert (victim / "data.parquet").read_text() == "not yours"


def test_r5_vacuum_narrowed_by_database_leaves_other_databases_restorable(spark, led, clock, rows) -> None:
    for name in ("hr.a", "hr.b", "sales.a", "sales.b"):  # hr older: a ledger mark would block it
        make_table(led, rows, name, parts=1)
        led.drop_table(name)
        clock.advance(60)
    clock.advance(WEEK * 2)

    report = vacuum(spark, led, database="sales")

    assert sorted(r.name for r in report.purged) == ["sales.a", "sales.b"]
    assert set(report.watermarks) == {"database:sales"}
    assert {t.name: t.state for t in led.dropped_tables()} == {"hr.a": "dropped", "hr.b": "dropped"}
    assert led.undrop_table("hr.a").is_live and led.undrop_table("hr.b").is_live


def test_r5_vacuum_cut_by_limit_purges_oldest_and_leaves_the_rest_restorable(spark, led, clock, rows) -> None:
    names = [f"sales.t{i}" for i in range(4)]
    for name in names:
        make_table(led, rows, name, parts=1)
        led.drop_table(name)
        clock.advance(60)
    clock.advance(WEEK * 2)

    report = vacuum(spark, led, limit=2)

    assert [r.name for r in report.purged] == names[:2]
    assert all(led.undrop_table(name).is_live for name in names[2:])


def test_r5_longer_retention_override_keeps_that_database_restorable(spark, led, clock, rows) -> None:
    led.set_retention("database:finance", "30d")
    for name in ("finance.ledger", "sales.orders"):
        make_table(led, rows, name, parts=1)
        led.drop_table(name)
    clock.advance(WEEK * 2)

    report = vacuum(spark, led)

    assert [r.name for r in report.purged] == ["sales.orders"]
    assert led.undrop_table("finance.ledger").is_live


def test_vacuum_retention_under_the_floor_needs_an_override(spark, led, clock, rows) -> None:
    make_table(led, rows, "sales.orders", parts=1)
    led.drop_table("sales.orders")
    clock.advance(timedelta(hours=2))
    events = led.event_count()
    with pytest.raises(InvalidRetention, match="floor"):
        vacuum(spark, led, retention="1h")
    assert led.event_count() == events
    report = vacuum(spark, led, retention="1h", override_floor=True)
    assert [r.name for r in report.purged] == ["sales.orders"]


def test_failed_deletion_stays_blocked_and_is_finished_by_the_next_vacuum(spark, led, clock, rows, tmp_path) -> None:
    """The location was swapped for a link (refused, R9); once an operator puts the real
    folder back, the next vacuum picks the blocked instance up first and purges it."""
    location = make_table(led, rows, "sales.orders")
    led.drop_table("sales.orders")
    clock.advance(WEEK * 2)
    moved = tmp_path / "moved-aside"
    os.rename(location, moved)
    os.symlink(moved, location)

    first = vacuum(spark, led)
    assert len(first.failures) == 1 and "symbolic link" in first.failures[0].error
    assert led.dropped_tables()[0].state == "blocked" and files_under(str(moved))
    with pytest.raises(UndropBlocked):
        led.undrop_table("sales.orders")

    os.unlink(location)
    os.rename(moved, location)
    second = vacuum(spark, led)
    assert [r.name for r in second.purged] == ["sales.orders"] and second.instances[0].resumed
    # The first run finished (recording one failure), so no crashed run is taken over.
    assert second.resumed_runs == () and not os.path.exists(location)
    assert [e.data["failed"] for e in led.history() if e.type == "VacuumFinished"] == [1, 0]
    assert not led.state.vacuums.unfinished()


def test_write_table_data_reads_back_identical_after_undrop(spark, led, rows) -> None:
    write_table(rows, led, "sales.orders")
    write_table(rows.limit(5), led, "sales.orders", mode="append")
    before = sorted(read_table(spark, led, "sales.orders").collect())
    led.drop_table("sales.orders")
    with pytest.raises(TableNotFound):
        read_table(spark, led, "sales.orders")
    with pytest.raises(TableNotFound):
        write_table(rows, led, "sales.orders", create=False)
    led.undrop_table("sales.orders")
    assert sorted(read_table(spark, led, "sales.orders").collect()) == before
    write_table(rows.limit(3), led, "sales.orders", mode="overwrite")
    assert read_table(spark, led, "sales.orders").count() == 3


def test_r10_vacuum_killed_mid_delete_is_finished_by_the_next_run(spark, spark_kind, request, tmp_path, clock) -> None:
    """A real vacuum process (its own Spark, or its own client of the Connect server, whose tasks
    run on after their client is killed) is SIGKILLed while executors delete. The undrop is
    refused at every point after the watermark lands, and the next vacuum finishes the purge and
    records it."""
    remote = request.getfixturevalue("connect_server").address if spark_kind == "connect" else ""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        for t in range(24):  # many small files, so deleting them takes a while
            folder = Path(led.create_table(f"sales.t{t}").location)
            folder.mkdir(parents=True)
            for f in range(600):
                (folder / f"part-{f:05d}.parquet").write_bytes(b"x" * 64)
            led.drop_table(f"sales.t{t}")
        warehouse = led.warehouse
    total = count_files(warehouse)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            from datetime import datetime, timezone
            from ledger import Ledger
            from spark_ops import local_session, vacuum
            spark = local_session("killed-vacuum", remote={remote!r})
            led = Ledger.open({str(path)!r}, clock=lambda: datetime({T0.year + 1}, 1, 1, tzinfo=timezone.utc))
            vacuum(spark, led)
        """)],
        cwd=Path(__file__).parent.parent, start_new_session=True, env=_without_connect_mark(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watcher = Ledger.open(path, clock=clock)
    blocked_seen = False
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and child.poll() is None:
            if watcher.watermark() is not None:
                blocked_seen = True
                with pytest.raises(UndropBlocked):
                    watcher.undrop_table("sales.t0")
            remaining = count_files(warehouse)
            if remaining < total:
                break  # executors are deleting: now
            time.sleep(0.005)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert blocked_seen, "the child never got as far as its watermark"
    remaining = count_files(warehouse)
    state = watcher.state
    assert state.vacuums.unfinished(), "the kill must land before the run finished"
    assert 0 <= remaining < total
    for t in range(24):
        with pytest.raises(UndropBlocked):
            watcher.undrop_table(f"sales.t{t}")
    watcher.verify()

    clock.set(T0 + timedelta(days=366))
    report = vacuum(spark, watcher)
    assert len(report.purged) == 24 and report.failures == []
    assert report.resumed_runs and not watcher.state.vacuums.unfinished()
    assert count_files(warehouse) == 0, [os.path.join(d, f) for d, _, fs in os.walk(warehouse) for f in fs]
    assert all(watcher.instance(r.id).state == "purged" for r in report.purged)
    watcher.close()


def _without_connect_mark() -> dict[str, str]:
    """This process's environment for a child that makes its own session: without PySpark's mark
    of a Connect process (the ``spark`` fixture sets it for a Connect test), which would make a
    classic child build Connect columns."""
    return {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_MODE_ENABLED"}


def test_r4_a_vacuum_started_while_another_deletes_leaves_it_alone_and_counts_stay_exact(
        spark, led, clock) -> None:
    """Found by a user: a second vacuum started 70 ms after the first "took over" the first's run
    while it was still deleting; the first printed "deleted 3315 files" and the log recorded 0.
    Here the second starts from inside the first's deletion (its progress callback): it leaves
    the live run alone, and the log records exactly what the first deleted."""
    total = 0
    for t in range(4):
        folder = Path(led.create_table(f"sales.t{t}").location)
        folder.mkdir(parents=True)
        for f in range(200):
            (folder / f"part-{f:04d}.parquet").write_bytes(b"x" * 3)
            total += 1
        led.drop_table(f"sales.t{t}")
    clock.advance(WEEK * 2)
    seconds: list = []
    with Ledger.open(led.path, clock=clock, actor="second-vacuum") as other:
        def start_the_second(done: int, of: int) -> None:
            if not seconds:
                seconds.append(vacuum(spark, other))

        first = vacuum(spark, led, progress=start_the_second)
        [second] = seconds
        assert second.instances == () and second.run_id is None and second.busy_runs == (first.run_id,)
        assert first.files == total and first.bytes == total * 3 and len(first.purged) == 4
        finished = [e.data for e in other.history() if e.type == "VacuumFinished"]
        assert [(d["run_id"], d["files"], d["bytes"], d["purged"]) for d in finished] == \
            [(first.run_id, total, total * 3, 4)]


def test_progress_starts_at_zero_of_a_known_total_and_ends_complete(spark, led, clock, rows) -> None:
    """The CLI's progress bar used to sit without a total and jump from 0 to 100%."""
    for name in ("sales.a", "sales.b", "sales.c"):
        make_table(led, rows, name)
        led.drop_table(name)
    clock.advance(WEEK * 2)
    calls: list[tuple[int, int]] = []
    vacuum(spark, led, progress=lambda done, total: calls.append((done, total)))
    first, last = calls[0], calls[-1]
    assert first[0] == 0 and first[1] > 0 and last[0] == last[1] == first[1]


def test_r10_a_vacuum_that_fails_on_the_way_releases_its_lease_for_the_next(spark, led, clock, rows) -> None:
    """A run that raised after its start held its lease until it ran out (an hour), and the next
    vacuum left its tables alone meanwhile (``busy``); released, the next takes its work over at once."""
    make_table(led, rows, "sales.a")
    led.drop_table("sales.a")
    clock.advance(WEEK * 2)

    def broken(done: int, total: int) -> None:
        raise RuntimeError("the caller's progress bar broke")
    with pytest.raises(RuntimeError, match="progress bar broke"):
        vacuum(spark, led, progress=broken)
    [failed] = [e.data["run_id"] for e in led.history() if e.type == "VacuumStarted"]
    plan = led.plan_vacuum()
    assert plan.busy == () and failed in plan.resumes
    assert [r.name for r in vacuum(spark, led).purged] == ["sales.a"]


# --- deletion split below the table, on a pool of I/O threads (issue 11) -----------------------

def test_r9_every_path_is_checked_against_its_location_before_it_joins_a_batch(tmp_path: Path) -> None:
    from spark_ops.executor.storage import Deleter, StoredFile, Totals, Unsafe
    from spark_ops.executor.stores import storage_for
    inside, outside = tmp_path / "loc", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (outside / "precious.parquet").write_bytes(b"x")
    (inside / "a.parquet").write_bytes(b"x")
    totals = Totals()
    with pytest.raises(Unsafe, match="elsewhere"):
        with Deleter(storage_for(str(tmp_path))) as deleter:
            deleter.add([StoredFile(str(inside / "a.parquet"), 1)], totals, str(inside))
            deleter.add([StoredFile(str(outside / "precious.parquet"), 1)], totals, str(inside))
    assert (outside / "precious.parquet").exists() and not (inside / "a.parquet").exists()
    assert (totals.files, totals.bytes, totals.error) == (1, 1, None)


def test_pieces_are_the_sub_folders_two_levels_down_and_never_follow_a_link(tmp_path: Path) -> None:
    from spark_ops.executor import fs
    root = tmp_path / "warehouse"
    loc = root / "t1"
    for w in range(3):
        (loc / "_writes" / f"w{w}").mkdir(parents=True)
    (loc / "top.parquet").write_bytes(b"x")
    target = tmp_path / "outside"
    target.mkdir()
    (loc / "_writes" / "link").symlink_to(target)
    assert sorted(fs.pieces(str(root), str(loc))) == [str(loc / "_writes" / f"w{w}") for w in range(3)]
    flat = root / "t2"
    flat.mkdir()
    (flat / "a.parquet").write_bytes(b"x")
    assert fs.pieces(str(root), str(flat)) == []
    assert fs.pieces(str(root), str(tmp_path / "outside")) == []  # not inside the warehouse: no pieces
    # Given as file:// URIs, the pieces come back in the same form, so the share that deletes them
    # finds them inside the table's location (they used to be plain paths, and every share refused).
    assert sorted(fs.pieces(f"file://{root}", f"file://{loc}")) == [f"file://{loc}/_writes/w{w}" for w in range(3)]


def test_r9_a_remote_location_must_share_the_roots_host_and_prefix() -> None:
    """The root's filesystem deletes the location's path, so a location on another host with the
    same path would be deleted on the root's host: refused before anything is listed."""
    from spark_ops.executor import fs
    outcome = fs.purge("hdfs://nn1:8020/lake", "hdfs://nn2:8020/lake/t1", dry_run=False)
    assert outcome.error is not None and "not inside the warehouse" in outcome.error and outcome.files == 0


def test_shares_of_a_flat_table_running_side_by_side_each_find_their_folders(tmp_path: Path) -> None:
    """Partition folders holding files, no deeper level: a share scans them all to learn that, and
    one deleted meanwhile by the share running beside it used to end its listing (no pieces, so it
    left its folders to the finish, or as share 0 purged the whole table beside the others)."""
    from concurrent.futures import ThreadPoolExecutor

    from spark_ops.executor import tasks
    root = tmp_path / "warehouse"
    loc = root / "t1"
    for p in range(300):
        (loc / f"p={p:04d}").mkdir(parents=True)
        for f in range(3):
            (loc / f"p={p:04d}" / f"part-{f}.parquet").write_bytes(b"abc")
    job, purge = _one_purge(root, loc)
    with ThreadPoolExecutor(2) as pool:  # two at a time, as on two cores
        done = list(pool.map(lambda j: tasks.share_task(job, tasks.Share(purge, j, 8)), range(8)))
    assert [d.error for d in done] == [None] * 8
    assert [d.item for d in done] == [replace(purge, part=j) for j in range(8)]  # shares, none of them the whole
    assert sum(d.files for d in done) == 900 and _files_under(loc) == 0


def _one_purge(root: Path, location: Path) -> tuple[Job, Purge]:
    """A run's job and its one purge, of ``location`` (behind its watermark), as the driver hands
    them over."""
    from spark_ops.executor import tasks
    from vacuum_work import Purge
    return tasks.Job(str(root), run_id="r1"), Purge("t1", "sales.t1", str(location.relative_to(root)), 1, 2)


def _files_under(folder: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


def test_few_tables_share_a_fixed_budget_of_tasks() -> None:
    """Shares per table shrink as tables grow (a budget of SHARES_PER_CORE a core), and a table is
    never split into more shares than it has sub-folders."""
    from spark_ops.vacuum_job import budget

    cores = 8
    total = cores * budget.SHARES_PER_CORE
    assert budget.shares(cores, {"a": None}) == {"a": total}
    assert sum(budget.shares(cores, dict.fromkeys("abcdefgh")).values()) == total
    assert budget.shares(cores, {"a": 3, "b": None}) == {"a": 3, "b": total // 2}
    assert budget.first_purge_tasks(cores, 8) <= total + 8


def test_r20_a_few_locations_the_ledger_knows_nothing_of_are_purged_from_the_driver_on_a_store() -> None:
    """Issue 48: on an object store, a run's driver deletes everything itself (one streamed listing
    a location, several locations at once), where a few dropped locations written outside the
    ledger went to a Spark job that listed each as one chain of pages all the same, at a job's cost.
    More of them than the driver lists at once still go to the executors; a dry run writes its
    listing there, and on a local disk only trims are the driver's."""
    from spark_ops.executor.storage import LISTERS
    from spark_ops.executor.stores import storage_for
    from spark_ops.vacuum_job.driver import driver_items
    from vacuum_work import Purge, Trim

    def unknown(i: int) -> Purge:
        return Purge(f"u{i}", f"sales.u{i}", f"sales/u{i}", 1, 2)
    known, trim = Purge("k1", "sales.k1", "sales/k1", 1, 2, listed=("d1",)), Trim("t1", "sales.t1", "sales/t1", 3, "d2")
    few = [known, trim] + [unknown(i) for i in range(LISTERS)]
    store, disk = storage_for("s3://lake/wh"), storage_for("/lake/wh")
    assert driver_items(few, dry_run=False, store=store) == few
    many = few + [unknown(LISTERS)]
    assert driver_items(many, dry_run=False, store=store) == [known, trim]
    assert driver_items(few, dry_run=True, store=store) == [trim]
    assert driver_items(few, dry_run=False, store=disk) == [trim]


def test_shares_that_run_one_after_another_leave_nothing_to_the_finish(tmp_path: Path) -> None:
    """Tasks run in waves, and each share lists the table afresh while earlier ones have deleted.
    Shares chosen by place in a listing that shrank skipped a third of the folders (all left to
    the one task that finishes the location); now every share sees the same folders (emptied,
    kept for the finish), so between them they take every one, and as many each."""
    from spark_ops.executor import tasks
    from vacuum_work import Result
    root = tmp_path / "warehouse"
    loc = root / "t1"
    for w in range(40):
        folder = loc / "_writes" / f"{w * 0x9E3779B97F4A7C15 % 2**64:016x}"  # random-looking ids, as real ones
        folder.mkdir(parents=True)
        (folder / "part-0.parquet").write_bytes(b"abc")
    job, purge = _one_purge(root, loc)
    done = [tasks.share_task(job, tasks.Share(purge, j, 8)) for j in range(8)]
    assert [d.error for d in done] == [None] * 8
    assert sum(d.files for d in done) == 40 and sum(d.bytes for d in done) == 120
    assert [d.files for d in done] == [5] * 8
    assert len(os.listdir(loc / "_writes")) == 40 and _files_under(loc) == 0  # emptied, kept
    [summed] = tasks.per_table(done)  # as the driver sums them
    assert (summed.item.part, summed.files, summed.bytes, summed.error) == (0, 40, 120, None)  # not the whole: a finish to do
    # The finish removes them: nothing more to count, and the location is gone.
    assert tasks.finish_purge(job, Result(replace(purge, part=0), 40, 120)) == Result(purge, 40, 120)
    assert not loc.exists()


def test_the_purges_a_task_deletes_by_key_are_told_apart_by_key_not_compared_item_to_item(tmp_path: Path) -> None:
    """``run_items`` sets the purges whose files the ledger knows apart from the rest. It asked, for
    each item, whether it was in the list of those (a scan, with dataclass equality: quadratic, some
    23 s for 10,000 tables in a line like it); it now asks a set of their keys. Counted here, not
    timed: each of 300 tables is compared with no other item."""
    from dataclasses import dataclass

    from spark_ops.executor import tasks
    from vacuum_work import Purge
    compared = []

    @dataclass(frozen=True, eq=False)
    class Counted(Purge):
        def __eq__(self, other: object) -> bool:
            compared.append(1)
            return super().__eq__(other)

        __hash__ = Purge.__hash__

    root = tmp_path / "warehouse"
    root.mkdir()
    items = [Counted(f"t{i:04d}", f"sales.t{i:04d}", f"sales/t{i:04d}", 1, 2, listed=(f"{i:064x}",))
             for i in range(300)]
    done = list(tasks.run_items(tasks.Job(str(root), run_id="r1"), items, files=lambda digest: ()))
    assert [r.key for r in done if r.item is not None] == [i.key for i in items] and all(r.ok for r in done)
    assert len(compared) <= len(items), len(compared)


@pytest.mark.spark
def test_r2_r9_a_big_table_is_purged_in_pieces_and_counted_exactly(spark, led, clock) -> None:
    """One table of many write folders (as versioned tables are): its purge is spread over tasks,
    and the run records exactly the files and bytes it deleted."""
    table = led.create_table("big.one")
    total = 0
    for w in range(24):
        folder = Path(table.location, "_writes", f"w{w:03d}")
        folder.mkdir(parents=True)
        for f in range(w % 5 + 1):
            (folder / f"part-{f}.parquet").write_bytes(b"y" * 10)
            total += 1
    Path(table.location, "loose.parquet").write_bytes(b"y" * 10)
    total += 1
    led.drop_table("big.one")
    clock.advance(WEEK * 2)
    report = vacuum(spark, led)
    assert [i.id for i in report.purged] == [table.id]
    assert (report.files, report.bytes) == (total, total * 10)
    assert not Path(table.location).exists()
    purged = [e.data for e in led.history(type="TablePurged")]
    assert [(p["table_id"], p["files"], p["bytes"]) for p in purged] == [(table.id, total, total * 10)]


@pytest.mark.spark
def test_r2_a_large_dry_run_leaves_its_listing_in_a_parquet_dataset_not_in_the_driver(spark, led, clock,
                                                                                       tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    expected = {}
    for t in range(3):
        table = led.create_table(f"big.t{t}")
        Path(table.location).mkdir(parents=True)
        for f in range(30):
            path = Path(table.location, f"part-{f:02d}.parquet")
            path.write_bytes(b"z" * (f + 1))
            expected[str(path)] = f + 1
        led.drop_table(f"big.t{t}")
    clock.advance(WEEK * 2)
    before = led.event_count()

    report = vacuum(spark, led, dry_run=True, listing_threshold=50)
    assert report.listing is not None and report.files == 90 and report.bytes == sum(expected.values())
    assert all(0 < len(i.would_delete) <= 20 for i in report.instances)  # samples only
    rows = pq.read_table(report.listing).to_pylist()
    assert {r["path"]: r["size"] for r in rows} == expected
    assert {r["kind"] for r in rows} == {"purge"} and {r["table_id"] for r in rows} == {i.id for i in report.instances}
    assert all(Path(p).exists() for p in expected) and led.event_count() == before
    shutil.rmtree(report.listing)

    small = vacuum(spark, led, dry_run=True)  # under the default threshold: all in the report
    assert small.listing is None
    assert {f.path: f.size for i in small.instances for f in i.would_delete} == expected

    with pytest.raises(InvalidArgument, match="exists"):
        vacuum(spark, led, dry_run=True, listing_dir=tmp_path)
    assert led.event_count() == before


# --- one vacuum for both kinds of session (R24, issue 46) ---------------------------------------

def _warehouse_of_every_kind_of_work(led: Ledger, clock: ManualClock) -> dict[str, str]:
    """Files written by hand (as a pipeline's own jobs leave them; no Spark write): a dropped table
    to purge, a dropped table and an overwritten version each to be held by a pin, an overwritten
    version to expire, and an aborted write to sweep. Each table's location by name (and the held
    dropped table's instance id as ``held``)."""
    def committed(name: str, files: int, mode: str = "append") -> None:
        w = led.begin_write(name)
        os.makedirs(w.folder)
        for i in range(files):
            Path(w.folder, f"part-{i}.parquet").write_bytes(b"v" * (i + 1))
        led.commit_write(w.id, [(f"{w.relative_folder}/part-{i}.parquet", i + 1) for i in range(files)], mode=mode)
    made = {}
    for name in ("sales.old", "sales.held"):
        made[name] = led.create_table(name).location
        for i in range(30):
            folder = Path(made[name]) / f"day={i % 3}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"part-{i:03d}.parquet").write_bytes(b"x" * (i % 5 + 1))
        made["held"] = led.drop_table(name).id
    for name in ("sales.orders", "sales.pinned"):
        made[name] = led.create_table(name).location
        committed(name, 4)
        clock.advance(timedelta(hours=1))
        committed(name, 2, mode="overwrite")
    aborted = led.begin_write("sales.orders")
    os.makedirs(aborted.folder)
    Path(aborted.folder, "part-0.parquet").write_bytes(b"half a file")
    led.abort_write(aborted.id)
    clock.advance(WEEK * 2)
    return made


def _vacuum_as_seen(spark, kind: str, base: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """A dry run, then the vacuum with progress, on ``spark`` (of ``kind``), of a fresh warehouse under
    ``base``: what each said and recorded, each path as its table's name and the path inside it
    (the same for both kinds, whose locations are random)."""
    if kind == "connect":  # PySpark's mark of a Connect process, as the ``spark`` fixture sets it
        monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    else:
        monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    clock = ManualClock(T0)
    base.mkdir()
    with Ledger.open(base / "ledger.db", clock=clock, actor="test") as led:
        made = _warehouse_of_every_kind_of_work(led, clock)
        held = led.pin(table_id=made.pop("held"), lease="1h")
        pinned = led.pin("sales.pinned", version=1, lease="1h")

        def named(path: str) -> str:
            name, where = next((n, w) for n, w in made.items() if path.startswith(w + os.sep))
            inside = os.path.relpath(path, where).split(os.sep)
            return "/".join([name] + (["<write>"] + inside[2:] if inside[0] == "_writes" else inside))
        dry = vacuum(spark, led, dry_run=True)
        listed = [e.path for i in dry.instances + dry.expired + dry.swept for e in i.would_delete]
        calls: list[tuple[int, int]] = []
        done = vacuum(spark, led, progress=lambda n, total: calls.append((n, total)))
        receipt = led.receipt(done.run_id)
        proven = all(led.prove_deleted(path).verify() for path in listed)
        held.release()
        pinned.release()
        return {"listed": sorted(named(p) for p in listed), "dry": (dry.files, dry.bytes),
                "done": (done.files, done.bytes), "purged": [r.name for r in done.purged],
                "expired": [e.name for e in done.expired], "swept": [s.name for s in done.swept],
                "failures": list(done.failures), "receipt": (receipt.files, receipt.bytes), "proven": proven,
                "progress": (calls[0][0], calls[-1][0] == calls[-1][1] == calls[0][1] > 0),
                "left": sorted(named(p) for p in files_under(str(base / "warehouse")) if ".retention-ledger" not in p)}


def test_r24_a_vacuum_on_a_connect_session_does_what_it_does_on_a_classic_one(
        classic_spark, connect_spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46: on a Spark Connect session the vacuum, its dry run too, failed with PySpark's
    ``[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext`` (its jobs were RDDs, with a status tracker): a
    Connect session has no SparkContext. The same warehouse, vacuumed on each kind: the dry run
    lists the same files, the vacuum deletes exactly those (pins held), reports its progress from
    0 to a known total, and its receipt proves each file deleted."""
    seen = {kind: _vacuum_as_seen(spark, kind, tmp_path / kind, monkeypatch)
            for kind, spark in (("classic", classic_spark), ("connect", connect_spark))}
    assert seen["connect"] == seen["classic"]
    classic = seen["classic"]
    assert classic["purged"] == ["sales.old"] and classic["expired"] == ["sales.orders"]
    assert classic["swept"] == ["sales.orders"] and classic["failures"] == []
    assert len(classic["listed"]) == 30 + 4 + 1 and classic["dry"] == classic["done"] == classic["receipt"]
    assert classic["proven"] and classic["progress"] == (0, True)
    assert len(classic["left"]) == 30 + 4 + 2 + 2  # the held table, the pinned version, two current ones
