"""Uncommitted data (R14, R15): the online hard delete that lakeFS shelved, fenced by the ledger.

Every write is registered before its first file, and every decision is a conditional append
(R4): so a sweep of abandoned writes and a commit, a renewal or an abort that race have one
order, and no committed version ever loses a file. Each race from the lakeFS design has a test
here that names it; the README's table points at them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest

from ledger import Ledger, ManualClock
from ledger.errors import InvalidRetention, WriteClosed, WriteExpired
from spark_ops import read_table, sweep, vacuum, write_table
from spark_ops.executor.fs import purge
from tests.conftest import T0
from tests.stores import FaultyStore
from vacuum_work import Plan, Result, location

HOUR = timedelta(hours=1)
BOTH_SESSIONS = True  # R24: the sweeps on Spark run on a classic and a Spark Connect session
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock):
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as ledger:
        ledger.create_table("sales.orders")
        yield ledger


def begin_with_files(led: Ledger, name: str = "sales.orders", files: int = 2, lease: str = "1h"):
    """A job that registered a write and put its files in the write's folder (not yet committed)."""
    w = led.begin_write(name, lease=lease)
    os.makedirs(w.folder)
    for i in range(files):
        Path(w.folder, f"part-{i}.parquet").write_bytes(b"w" * (10 + i))
    return w, [(f"{w.relative_folder}/part-{i}.parquet", 10 + i) for i in range(files)]


def sweep_now(led: Ledger, **options) -> Plan:
    """The sweep without Spark: start (the swept writes recorded), delete the folders, finish.
    Its plan, for what it swept."""
    run = led.start_vacuum(only_uncommitted=True, **options)
    plan, swept = run.plan, []
    for s in plan.sweeps:
        here = location(plan.root, s.path)
        gone = [purge(plan.root, location(here, folder.path), dry_run=False) for folder in s.folders]
        swept.append(Result(s, sum(o.files for o in gone), sum(o.bytes for o in gone)))
    if plan.run_id is not None:
        run.finish(swept)
    return plan


# --- the sweep itself ------------------------------------------------------------------------

@pytest.mark.spark
def test_r15_a_vacuum_sweeps_aborted_and_expired_writes_and_their_jobs_must_write_again(
        spark, led, clock) -> None:
    committed = write_table(spark.range(5).toDF("id"), led, "sales.orders")
    live, _ = begin_with_files(led, lease="10h")
    expired, expired_files = begin_with_files(led, lease="1h")
    aborted, _ = begin_with_files(led)
    led.abort_write(aborted.id)
    clock.advance(2 * HOUR)

    dry = vacuum(spark, led, dry_run=True)
    [planned] = dry.swept
    assert dict(planned.writes) == {expired.id: "lease expired", aborted.id: "aborted"}
    assert {Path(f.path).parent for f in planned.would_delete} == {Path(expired.folder), Path(aborted.folder)}
    assert dry.run_id is None and os.path.isdir(expired.folder) and led.open_writes()[0].id in (live.id, expired.id)

    report = vacuum(spark, led)
    [swept] = report.swept
    assert swept.files == 4 and swept.bytes == 2 * (10 + 11) and swept.error is None
    assert not os.path.exists(expired.folder) and not os.path.exists(aborted.folder)
    assert os.path.isdir(live.folder) and [w.id for w in led.open_writes()] == [live.id]
    with pytest.raises(WriteExpired, match=f"write {expired.id} to sales.orders: it was swept at .*its lease "
                                           "ran out at .*the job must write again"):
        led.commit_write(expired.id, expired_files)
    with pytest.raises(WriteExpired, match="it had been aborted"):
        led.renew_write(aborted.id)
    assert read_table(spark, led, "sales.orders").count() == 5 and committed.number == 1
    types = [e.type for e in led.history("sales.orders")]
    assert types.index("WritesSwept") < types.index("WriteFoldersDeleted")  # recorded before deleted
    led.verify()


@pytest.mark.spark
def test_r15_stragglers_older_than_the_grace_period_are_deleted_and_recorded(spark, led, clock) -> None:
    """A task that finished after the commit, a speculative duplicate: files in a committed write's
    folder that its version does not name. Deleted once older than the grace period (6h by
    default, by modification time against the ledger's clock); younger ones wait."""
    version = write_table(spark.range(4).toDF("id"), led, "sales.orders")
    folder = Path(led.table("sales.orders").location, version.files[0].path).parent
    late = folder / "part-99999-late.parquet"
    late.write_bytes(b"x" * 7)
    young = folder / "part-99998-young.parquet"
    young.write_bytes(b"y" * 3)
    ledger_now = led.now() + 7 * HOUR  # the test's clock is in January: date the files by it
    for each in folder.iterdir():  # Spark's own _SUCCESS and .crc files are unnamed too
        os.utime(each, (ledger_now.timestamp() - 7 * 3600,) * 2)
    os.utime(young, (ledger_now.timestamp() - 60,) * 2)
    named = {Path(led.table("sales.orders").location, f.path) for f in version.files}
    unnamed = {p: p.stat().st_size for p in folder.iterdir() if p not in named and p != young}
    assert late in unnamed
    clock.advance(7 * HOUR)

    report = sweep(spark, led)
    [cleaned] = report.stragglers
    assert (cleaned.files, cleaned.bytes, cleaned.left) == (len(unnamed), sum(unnamed.values()), 1)
    assert not late.exists() and young.exists()
    assert all(Path(led.table("sales.orders").location, f.path).exists() for f in version.files)
    assert read_table(spark, led, "sales.orders").count() == 4
    assert "StragglersDeleted" not in [e.type for e in led.history("sales.orders")]  # one left: not done
    os.utime(young, (ledger_now.timestamp() - 7 * 3600,) * 2)
    [again] = sweep(spark, led).stragglers
    assert (again.files, again.left) == (1, 0) and not young.exists()
    assert [e.type for e in led.history("sales.orders")].count("StragglersDeleted") == 1
    assert sweep(spark, led).stragglers == ()  # cleaned once, never scanned again


@pytest.mark.spark
def test_r15_a_folder_holding_only_its_named_files_is_not_reported_cleaned(spark, led, clock) -> None:
    """Past the grace period, a committed folder with nothing unnamed in it: no vacuum says it
    cleaned (or would clean) it; the check is recorded in words that say nothing was found, once."""
    w, files = begin_with_files(led)
    led.commit_write(w.id, files)
    for name in os.listdir(w.folder):
        os.utime(Path(w.folder, name), (clock().timestamp(),) * 2)
    clock.advance(7 * HOUR)

    dry = vacuum(spark, led, dry_run=True)
    assert dry.stragglers == () and "clean" not in dry.summary()
    report = vacuum(spark, led)
    assert report.stragglers == () and "clean" not in report.summary() and report.files == 0
    assert report.to_dict()["stragglers"] == [] and "None" not in str(report)
    [checked] = led.history(type="StragglersDeleted")
    assert "found no stragglers in 1 write folder of sales.orders" in checked.text
    again = vacuum(spark, led)
    assert again.run_id is None and str(again).startswith("nothing to vacuum") and "None" not in str(again)
    assert sorted(os.listdir(w.folder)) == ["part-0.parquet", "part-1.parquet"]


@pytest.mark.spark
def test_r15_foreign_files_are_never_swept_and_the_dry_run_reports_them(spark, led, clock) -> None:
    """lakeFS: "not responsible for data outside the repository path". Files in a table's location
    outside every write folder were not written through the ledger: reported, never swept."""
    write_table(spark.range(3).toDF("id"), led, "sales.orders")
    location = Path(led.table("sales.orders").location)
    (location / "dropped-in-by-hand.parquet").write_bytes(b"f" * 9)
    abandoned, _ = begin_with_files(led)
    clock.advance(2 * HOUR)
    dry = vacuum(spark, led, dry_run=True)
    [found] = dry.foreign
    assert found.name == "sales.orders" and found.location == str(location)
    assert [(f.path, f.size) for f in found.would_delete] == [("dropped-in-by-hand.parquet", 9)]
    assert dry.to_dict()["foreign"] == [{"id": found.id, "name": "sales.orders", "location": str(location),
                                         "files": [{"path": "dropped-in-by-hand.parquet", "size": 9}]}]
    vacuum(spark, led)
    assert (location / "dropped-in-by-hand.parquet").exists() and not os.path.exists(abandoned.folder)


def test_r15_uncommitted_off_leaves_abandoned_writes_and_only_uncommitted_purges_nothing(led, clock) -> None:
    abandoned, _ = begin_with_files(led)
    led.create_table("sales.old")
    led.drop_table("sales.old")
    clock.advance(timedelta(days=8))
    assert led.plan_vacuum(uncommitted=False).sweeps == ()
    only = led.plan_vacuum(only_uncommitted=True)
    assert only.purges == () and [f.write_id for f in only.sweeps[0].folders] == [abandoned.id]
    assert [t.name for t in led.plan_vacuum().purges] == ["sales.old"] and led.plan_vacuum().sweeps


def test_r15_a_grace_under_an_hour_needs_the_override(led) -> None:
    with pytest.raises(InvalidRetention, match="grace period 30m for stragglers is below the 1h floor"):
        led.plan_vacuum(grace="30m")
    led.plan_vacuum(grace="30m", override_floor=True)


# --- the races of the lakeFS design, one test each (the README's race table) -------------------

def test_r4_r15_commit_before_the_sweep_wins_and_the_sweep_leaves_the_write(led, clock) -> None:
    w, files = begin_with_files(led)
    clock.advance(2 * HOUR)  # the lease ran out, but no sweep has taken the write yet
    version = led.commit_write(w.id, files)  # allowed: nothing was deleted (documented)
    order = sweep_now(led)
    assert order.sweeps == () and os.path.isdir(w.folder) and version.number == 1
    assert all(os.path.exists(os.path.join(led.table("sales.orders").location, p)) for p, _ in files)


def test_r4_r15_sweep_before_the_commit_refuses_the_commit_with_write_expired(led, clock) -> None:
    """The seed's blocker 1 ("write to object is completed after commit") cannot happen: once
    the sweep is recorded, the commit is refused, so no version can name the deleted files."""
    w, files = begin_with_files(led)
    clock.advance(2 * HOUR)
    sweep_now(led)
    count = led.event_count()
    with pytest.raises(WriteExpired, match="the job must write again"):
        led.commit_write(w.id, files)
    assert led.event_count() == count and led.versions("sales.orders") == []


def test_r4_r15_a_sweep_decided_first_loses_to_a_commit_that_lands_before_its_append(
        tmp_path: Path, clock: ManualClock) -> None:
    """The interleaving that broke every design in the seed: the sweeper has decided to sweep a
    write whose lease ran out; before its append lands, the writer commits. The sweep's append
    is refused (the table's data stream moved), and decided again it leaves the write alone."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as setup:
        setup.create_table("sales.orders")
        w, files = begin_with_files(setup)
    clock.advance(2 * HOUR)
    writer = Ledger.open(path, clock=clock, actor="writer")
    sweeper = Ledger(FaultyStore(path), clock=clock, actor="sweeper")
    committed: list = []

    def commit_first(store: FaultyStore) -> None:
        if not committed:
            committed.append(writer.commit_write(w.id, files))

    sweeper.store.before_append = commit_first
    plan = sweeper.start_vacuum(only_uncommitted=True).plan
    assert committed and sweeper.retries == 1 and plan.sweeps == () and plan.run_id is None
    assert os.path.isdir(w.folder) and sweeper.version("sales.orders").number == 1
    writer.close()
    sweeper.close()


def test_r4_r15_renewal_and_sweep_have_one_order_either_way(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        led.create_table("sales.orders")
        renewed, _ = begin_with_files(led)
        late, _ = begin_with_files(led)
    clock.advance(2 * HOUR)
    writer = Ledger.open(path, clock=clock, actor="writer")
    sweeper = Ledger(FaultyStore(path), clock=clock, actor="sweeper")
    raced: list = []

    def renew_first(store: FaultyStore) -> None:  # the renewal lands between decision and append
        if not raced:
            raced.append(writer.renew_write(renewed.id))

    sweeper.store.before_append = renew_first
    plan = sweeper.start_vacuum(only_uncommitted=True).plan
    assert [f.write_id for f in plan.sweeps[0].folders] == [late.id]  # decided again: the renewed one stays
    with pytest.raises(WriteExpired):
        writer.renew_write(late.id)  # the other order: the sweep landed first
    assert [w.id for w in writer.open_writes()] == [renewed.id]
    writer.close()
    sweeper.close()


def test_r4_r14_abort_and_commit_have_one_order(led) -> None:
    first, files = begin_with_files(led)
    led.commit_write(first.id, files)
    with pytest.raises(WriteClosed, match="committed as version 1"):
        led.abort_write(first.id)
    second, files = begin_with_files(led)
    led.abort_write(second.id)
    with pytest.raises(WriteClosed, match="it was aborted at"):
        led.commit_write(second.id, files)


def test_r6_r15_a_sweep_host_ten_years_ahead_may_sweep_open_writes_but_no_version_loses_a_file(
        tmp_path: Path) -> None:
    """Its clock makes every lease look run out: it sweeps open writes early, and their commits are
    refused with WriteExpired; but it deletes only swept folders and unnamed files, so every
    file of every committed version stays."""
    honest = ManualClock(T0)
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=honest) as led:
        led.create_table("sales.orders")
        done, files = begin_with_files(led)
        led.commit_write(done.id, files)
        open_one, open_files = begin_with_files(led, lease="6h")
    hurried = ManualClock(T0 + timedelta(days=3653))
    with Ledger.open(path, clock=hurried, actor="hurried") as fast:
        order = sweep_now(fast, grace="6h")
        assert [f.write_id for f in order.sweeps[0].folders] == [open_one.id]
    with Ledger.open(path, clock=honest) as led:
        with pytest.raises(WriteExpired):
            led.commit_write(open_one.id, open_files)
        location = led.table("sales.orders").location
        assert all(os.path.exists(os.path.join(location, p)) for p, _ in files)
        assert [f.path for f in led.version("sales.orders").files] == [p for p, _ in files]
        led.verify()


_STALE_WRITER = textwrap.dedent("""
    import os, sys, time
    from ledger import Ledger
    led = Ledger.open(sys.argv[1], actor="stale-writer")
    w = led.begin_write("sales.orders", lease="1s")
    os.makedirs(w.folder)
    open(os.path.join(w.folder, "part-0.parquet"), "wb").write(b"s" * 8)
    print(w.id, flush=True)
    time.sleep(60)
""")


def test_r15_a_stale_lock_is_reclaimed_after_its_lease_with_no_manual_unlock(tmp_path: Path) -> None:
    """The seed's race 4: a writer SIGKILLed mid-write leaves an open write (a lock that nobody
    will release). Its lease runs out, and the next sweep reclaims it; nobody unlocks anything."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        led.create_table("sales.orders")
    child = subprocess.Popen([sys.executable, "-c", _STALE_WRITER, str(path)], cwd=REPO, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    write_id = child.stdout.readline().strip()
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    with Ledger.open(path) as led:
        [stale] = led.open_writes()
        assert stale.id == write_id and sweep_now(led).sweeps == ()  # its lease still holds
        time.sleep(1.1)
        order = sweep_now(led)
        assert [f.write_id for f in order.sweeps[0].folders] == [write_id]
        assert led.open_writes() == [] and not os.path.exists(stale.folder)
        led.verify()


# --- a sweep on record whose folders are not gone: the next vacuum finishes it (R10, R15) --------

@pytest.mark.spark
def test_r10_r15_a_sweep_recorded_by_a_run_that_died_is_finished_by_the_next_vacuum(spark, led, clock) -> None:
    abandoned, _ = begin_with_files(led)
    led.abort_write(abandoned.id)
    dead = led.start_vacuum(only_uncommitted=True)  # the sweep is on record; then the run dies
    assert [f.write_id for f in dead.plan.sweeps[0].folders] == [abandoned.id]
    assert os.path.isdir(abandoned.folder)
    clock.advance(timedelta(minutes=11))  # its lease runs out

    report = vacuum(spark, led)
    assert report.resumed_runs == (dead.run_id,)
    [swept] = report.swept
    assert swept.ok and swept.files == 2 and [w for w, _ in swept.writes] == [abandoned.id]
    assert not os.path.exists(abandoned.folder)
    again = vacuum(spark, led, dry_run=True)
    assert again.swept == () and again.resumed_runs == ()
    assert led.verify().events == led.event_count()


def test_r15_a_swept_folder_whose_deletion_failed_is_deleted_by_the_next_sweep(led, clock) -> None:
    abandoned, _ = begin_with_files(led)
    led.abort_write(abandoned.id)
    first = led.start_vacuum(only_uncommitted=True)
    [planned] = first.plan.sweeps
    first.finish([Result(planned, error="PermissionError: cannot delete")])  # failed: nothing recorded gone
    assert os.path.isdir(abandoned.folder)

    order = sweep_now(led)
    assert [(f.write_id, f.why) for f in order.sweeps[0].folders] == \
        [(abandoned.id, "swept by an earlier run that did not delete its folder")]
    assert not os.path.exists(abandoned.folder)
    assert sweep_now(led).sweeps == ()  # recorded deleted: never planned again
    assert [e.type for e in led.history(type="WritesSwept")] == ["WritesSwept"]  # swept once, not twice
    led.verify()


def test_r15_a_straggler_scan_that_reaches_an_executor_without_the_versions_files_deletes_nothing(
        tmp_path: Path) -> None:
    """A straggler scan carries what its version names (``named``, read in by the ledger). One that
    reached an executor without it (a plan a caller built, or one not filled in) said "the version
    names nothing": every old file of a committed folder was deleted as a straggler, the version's
    own data too. Now it is refused, in its result, and nothing is deleted or receipted."""
    from spark_ops.executor import tasks
    from vacuum_work import Folder, StragglerScan
    folder = tmp_path / "warehouse" / "sales" / "t1" / "_writes" / "w1"
    folder.mkdir(parents=True)
    data = [folder / f"part-{i}.parquet" for i in range(3)]
    for path in data:
        path.write_bytes(b"v" * 5)
        os.utime(path, (time.time() - 86_400,) * 2)  # a day old: past any grace period
    item = StragglerScan("t1", "sales.t1", "sales/t1", Folder("w1", "_writes/w1", "d" * 64), int(time.time() * 1e6))
    outcome, closing = tasks.run_items(tasks.Job(str(tmp_path / "warehouse"), run_id="r1"), [item])
    assert outcome.item == item and outcome.files == 0
    assert outcome.error is not None and outcome.error.startswith("refused: ") and "names" in outcome.error
    assert all(path.exists() for path in data) and closing.parts == ()
    assert item.named is None  # unfilled, by default
