"""Versioned tables (R11-R14): no write destroys anything, time travel, restore, the retention mark,
and a vacuum that expires old versions. Real files, real SparkSessions of both kinds where Spark
reads or writes (a local classic one, and a Spark Connect one on the tests' server: R24), the
ledger alone where it decides.
"""

from __future__ import annotations

import os
import sqlite3
import tracemalloc
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, strategies as st

from ledger import Conflict, Ledger, ManualClock, VacuumRun
from ledger.clock import iso_utc
from ledger.core.versions import manifest, parse_manifest, read_manifest
from ledger.errors import (
    InvalidArgument, InvalidTime, LedgerCorrupt, TableDataMissing, TableNotFound, VersionExpired,
    SchemaMismatch, VersionNotFound, WriteClosed, WriteExpired,
)
from spark_ops import read_table, schemas, vacuum, write_table
from tests.conftest import T0
from tests.stores import FaultyStore

DAY = timedelta(days=1)
BOTH_SESSIONS = True  # R24: every Spark test here runs on a classic session and on a Spark Connect one


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock):
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as ledger:
        yield ledger


def frame(spark, start: int, count: int, tag: str = "x"):
    return spark.createDataFrame([(i, f"{tag}-{i}", i % 3) for i in range(start, start + count)],
                                 "id long, label string, bucket int")


def ids(df) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def commit_files(led: Ledger, name: str, *sizes: int, mode: str = "append") -> int:
    """A write of small files made by hand (no Spark): returns the new version's number."""
    w = led.begin_write(name)
    os.makedirs(w.folder, exist_ok=True)
    files = []
    for i, size in enumerate(sizes):
        Path(w.folder, f"part-{i}.bin").write_bytes(b"x" * size)
        files.append((f"{w.relative_folder}/part-{i}.bin", size))
    return led.commit_write(w.id, files, mode=mode).number


# --- R11: versions on Spark ---------------------------------------------------------------

@pytest.mark.spark
def test_r11_overwrite_keeps_the_old_version_readable_and_restore_undoes_it(spark, led, clock) -> None:
    first = write_table(frame(spark, 0, 10), led, "sales.orders")
    clock.advance(DAY)
    second = write_table(frame(spark, 100, 5), led, "sales.orders", mode="overwrite")
    assert (first.number, second.number, second.mode) == (1, 2, "overwrite")
    assert ids(read_table(spark, led, "sales.orders")) == list(range(100, 105))
    assert ids(read_table(spark, led, "sales.orders", version=1)) == list(range(10))
    assert ids(read_table(spark, led, "sales.orders", as_of=T0 + DAY / 2)) == list(range(10))
    for entry in first.files:  # the overwrite deleted nothing
        assert os.path.exists(f"{led.table('sales.orders').location}/{entry.path}")

    restored = led.restore_table("sales.orders", version=1)
    assert (restored.number, restored.mode, restored.restored_from) == (3, "restore", 1)
    assert ids(read_table(spark, led, "sales.orders")) == list(range(10))


@pytest.mark.spark
def test_r11_append_then_overwrite_then_restore_to_version_1_reads_exactly_version_1(spark, led, clock) -> None:
    one = frame(spark, 0, 7, "one")
    write_table(one, led, "sales.orders")
    write_table(frame(spark, 7, 3, "two"), led, "sales.orders")  # append: version 2 has 10 rows
    write_table(frame(spark, 50, 4, "three"), led, "sales.orders", mode="overwrite")
    assert ids(read_table(spark, led, "sales.orders", version=2)) == list(range(10))
    led.restore_table("sales.orders", version=1)
    back = read_table(spark, led, "sales.orders")
    assert sorted(map(tuple, back.select("id", "label", "bucket").collect())) == \
        sorted(map(tuple, one.collect()))


@pytest.mark.spark
def test_r11_a_straggler_file_in_a_committed_write_folder_never_appears_in_a_read(spark, led) -> None:
    version = write_table(frame(spark, 0, 6), led, "sales.orders")
    location = led.table("sales.orders").location
    folder = Path(location, version.files[0].path).parent
    frame(spark, 1000, 50).write.mode("append").parquet(f"file://{folder}")  # a task that finished late
    assert len(list(folder.glob("*.parquet"))) > version.file_count
    assert ids(read_table(spark, led, "sales.orders")) == list(range(6))


@pytest.mark.spark
def test_r11_a_deleted_named_file_is_table_data_missing_not_fewer_rows(spark, led) -> None:
    version = write_table(frame(spark, 0, 20).repartition(3), led, "sales.orders")
    gone = version.files[0].path
    os.remove(f"{led.table('sales.orders').location}/{gone}")
    with pytest.raises(TableDataMissing, match=f"sales.orders version 1 names .*{gone}.*not there"):
        read_table(spark, led, "sales.orders")


@pytest.mark.spark
def test_r11_partitioned_writes_keep_their_partition_columns_across_versions_of_several_writes(
        spark, led) -> None:
    write_table(frame(spark, 0, 6), led, "sales.orders", partition_by=["bucket"])
    write_table(frame(spark, 6, 6), led, "sales.orders", partition_by=["bucket"])
    version = led.versions("sales.orders")[0]
    assert all("/bucket=" in f.path for f in version.files)
    df = read_table(spark, led, "sales.orders")
    assert set(df.columns) == {"id", "label", "bucket"}
    assert sorted((r["id"], r["bucket"]) for r in df.collect()) == [(i, i % 3) for i in range(12)]
    assert df.where("bucket = 1").count() == 4


@pytest.mark.spark
def test_r11_an_exception_in_spark_aborts_the_write_and_changes_no_version(spark, led) -> None:
    write_table(frame(spark, 0, 3), led, "sales.orders")
    bad = frame(spark, 0, 3).selectExpr("id", "CAST(raise_error('boom') AS string) AS label", "bucket")
    with pytest.raises(Exception, match="boom"):
        write_table(bad, led, "sales.orders")
    assert [v.number for v in led.versions("sales.orders")] == [1] and led.open_writes() == []
    aborted = [e for e in led.history("sales.orders") if e.type == "WriteAborted"]
    assert len(aborted) == 1


@pytest.mark.spark
def test_r11_a_table_written_before_versioning_reads_as_before_and_is_adopted_by_its_first_write(
        spark, led) -> None:
    """Before versioning, write_table put Parquet straight into the location. Such a table keeps
    reading as it did; its first versioned write adopts those files as version 1, so an append
    keeps its rows."""
    table = led.create_table("legacy.t")
    frame(spark, 0, 4).write.parquet(f"file://{table.location}")
    assert ids(read_table(spark, led, "legacy.t")) == [0, 1, 2, 3]
    version = write_table(frame(spark, 4, 2), led, "legacy.t")
    assert version.number == 2 and [v.mode for v in led.versions("legacy.t")] == ["append", "adopt"]
    assert ids(read_table(spark, led, "legacy.t")) == list(range(6))
    assert ids(read_table(spark, led, "legacy.t", version=1)) == [0, 1, 2, 3]


# --- R12: the retention mark --------------------------------------------------------------

def versioned(led: Ledger, clock: ManualClock, name: str = "sales.orders", count: int = 3) -> list[datetime]:
    """``count`` versions a day apart; returns their commit times."""
    if not any(t.name == name for t in led.tables()):
        led.create_table(name)
    times = []
    for _ in range(count):
        clock.advance(DAY)
        number = commit_files(led, name, 10)
        times.append(led.versions(name)[0].committed_at)
        assert led.versions(name)[0].number == number
    return times


def test_r12_the_mark_only_moves_forward_and_returns_the_previous_value(led, clock) -> None:
    times = versioned(led, clock, count=4)
    assert led.advance_retention_mark("sales.orders", times[1]) is None
    assert led.retention_mark("sales.orders") == times[1]
    count = led.event_count()
    assert led.advance_retention_mark("sales.orders", times[0]) == times[1]  # back: nothing changes
    assert led.event_count() == count and led.retention_mark("sales.orders") == times[1]
    assert led.advance_retention_mark("sales.orders", times[2]) == times[1]
    assert led.retention_mark("sales.orders") == times[2]
    with pytest.raises(InvalidTime, match="past the ledger's current time"):
        led.advance_retention_mark("sales.orders", led.now() + DAY)


def test_r12_a_mark_advanced_between_two_commits_lands_on_the_older_commit_time(led, clock) -> None:
    times = versioned(led, clock, count=3)
    led.advance_retention_mark("sales.orders", times[1] + DAY / 2)  # between versions 2 and 3
    assert led.retention_mark("sales.orders") == times[1]
    assert [(v.number, v.expired) for v in led.versions("sales.orders")] == [(3, False), (2, True), (1, True)]


def test_r12_r6_a_clock_ten_years_ahead_moves_the_mark_only_to_a_real_commit_and_never_hides_the_current(
        tmp_path: Path) -> None:
    """Seed 3's "hurried" marker: a host whose clock runs ten years ahead asks for a mark at its
    now. The mark lands on the commit time of the newest version older than the current one;
    the current version stays readable, and versions committed later (by honest clocks) too."""
    honest = ManualClock(T0)
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=honest) as led:
        times = versioned(led, honest, count=3)
    hurried = ManualClock(T0 + timedelta(days=3653))
    with Ledger.open(path, clock=hurried, actor="hurried") as fast:
        fast.advance_retention_mark("sales.orders", fast.now())
        assert fast.retention_mark("sales.orders") == times[1]  # a real commit, not 2036
        assert fast.version("sales.orders").number == 3  # the current version: always visible
        fast.start_vacuum()  # its retention, measured on that clock, does not reach the current either
        assert fast.version("sales.orders").number == 3 and not fast.versions("sales.orders")[0].expired
    with Ledger.open(path, clock=honest) as led:
        honest.advance(DAY)
        commit_files(led, "sales.orders", 5)  # a later commit by an honest clock
        assert [v.expired for v in led.versions("sales.orders")][:2] == [False, False]


def test_r12_as_of_picks_the_newest_version_at_or_before_and_before_version_1_is_not_found(led, clock) -> None:
    times = versioned(led, clock, count=3)
    assert led.version("sales.orders", as_of=times[1]).number == 2
    assert led.version("sales.orders", as_of=times[1] + DAY / 2).number == 2
    assert led.version("sales.orders", as_of=times[2] + DAY).number == 3
    with pytest.raises(VersionNotFound, match=f"had no version at {iso_utc(times[0] - DAY)}: version 1 was "
                                              f"committed at {iso_utc(times[0])}"):
        led.version("sales.orders", as_of=times[0] - DAY)
    with pytest.raises(VersionNotFound, match="has no version 9: its versions are 1 to 3"):
        led.version("sales.orders", version=9)


@pytest.mark.spark
def test_r12_time_travel_and_restore_behind_the_mark_are_refused_before_spark_reads_anything(
        spark, led, clock) -> None:
    first = write_table(frame(spark, 0, 4), led, "sales.orders")
    clock.advance(DAY)
    write_table(frame(spark, 10, 4), led, "sales.orders", mode="overwrite")
    led.advance_retention_mark("sales.orders", led.now())
    location = led.table("sales.orders").location
    for entry in first.files:  # the files are even gone: the refusal comes first, not TableDataMissing
        os.remove(f"{location}/{entry.path}")
    count = led.event_count()
    message = (f"sales.orders version 1 \\(committed at {iso_utc(first.committed_at)}\\) is expired: it is at or "
               f"before the table's retention mark {iso_utc(first.committed_at)}")
    with pytest.raises(VersionExpired, match=message):
        read_table(spark, led, "sales.orders", version=1)
    with pytest.raises(VersionExpired, match=message):
        read_table(spark, led, "sales.orders", as_of=first.committed_at)
    with pytest.raises(VersionExpired, match=message):
        led.restore_table("sales.orders", version=1)
    assert led.event_count() == count
    assert ids(read_table(spark, led, "sales.orders")) == [10, 11, 12, 13]


def test_r8_r12_an_undropped_table_comes_back_with_its_versions_and_a_drop_does_not_move_the_mark(
        led, clock) -> None:
    times = versioned(led, clock, count=3)
    led.advance_retention_mark("sales.orders", times[0])
    led.drop_table("sales.orders")
    led.undrop_table("sales.orders")
    assert led.retention_mark("sales.orders") == times[0]
    assert [(v.number, v.expired) for v in led.versions("sales.orders")] == [(3, False), (2, False), (1, True)]


def test_r4_a_restore_racing_a_mark_advance_is_decided_again_and_refused(tmp_path: Path, clock) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as setup:
        times = versioned(setup, clock, count=3)
    marker = Ledger.open(path, clock=clock, actor="marker")
    restorer = Ledger(FaultyStore(path), clock=clock, actor="restorer")
    raced = []

    def mark_first(store: FaultyStore) -> None:
        if not raced:
            raced.append(marker.advance_retention_mark("sales.orders", times[1]))

    restorer.store.before_append = mark_first
    with pytest.raises(VersionExpired):
        restorer.restore_table("sales.orders", version=1)
    assert raced == [None] and restorer.retries == 1
    assert [v.number for v in restorer.versions("sales.orders")] == [3, 2, 1]
    marker.close()
    restorer.close()


def test_r4_two_commits_racing_on_one_table_get_consecutive_versions(tmp_path: Path, clock) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as setup:
        setup.create_table("sales.orders")
    other = Ledger.open(path, clock=clock)
    first = Ledger(FaultyStore(path), clock=clock)
    w = first.begin_write("sales.orders")
    raced: list[int] = []

    def other_commits_first(store: FaultyStore) -> None:
        if not raced:
            raced.append(commit_files(other, "sales.orders", 3))

    first.store.before_append = other_commits_first
    version = first.commit_write(w.id, [(f"{w.relative_folder}/p.bin", 1)])
    assert version.number == 2 and first.retries == 1
    assert [(v.number, v.file_count) for v in first.versions("sales.orders")] == [(2, 2), (1, 1)]
    other.close()
    first.close()


def _raced_replace(tmp_path: Path, clock) -> tuple[Ledger, Ledger, str, list[str], list[tuple[str, int]]]:
    """A table of one version, a ledger on a store where ``other`` appends to the table before
    every append it tries (``max_attempts=4``), and a write of it ready to replace that version's file."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as setup:
        setup.create_table("sales.orders")
        commit_files(setup, "sales.orders", 3)
    other = Ledger.open(path, clock=clock)
    stubborn = Ledger(FaultyStore(path), clock=clock, max_attempts=4)
    removes = [f.path for f in stubborn.versions("sales.orders")[0].files]
    w = stubborn.begin_write("sales.orders")
    stubborn.store.before_append = lambda store: commit_files(other, "sales.orders", 1)
    stubborn.store.appends = 0
    return stubborn, other, w.id, removes, [(f"{w.relative_folder}/new.bin", 2)]


def test_r4_a_replace_retried_and_the_runner_under_it_give_up_after_one_bound(tmp_path: Path, clock) -> None:
    """A replace is decided again on each newer version, each try run by the runner's own retry loop:
    against a writer that commits before every append, the two loops share one bound (``max_attempts``
    lost races in all), not the replace's tries times the runner's."""
    stubborn, other, write_id, removes, files = _raced_replace(tmp_path, clock)
    with pytest.raises(Conflict, match="gave up after 4 attempts"):
        stubborn.commit_write(write_id, files, mode="replace", removes=removes)
    assert stubborn.store.appends == 4 and stubborn.retries == 3
    assert [v.number for v in other.versions("sales.orders")][0] == 5  # 1, and the other writer's four
    other.close()
    stubborn.close()


def test_r4_a_caller_that_retries_its_own_rounds_shares_the_one_bound(tmp_path: Path, clock) -> None:
    """A caller's own rounds around the ledger's calls (as ``spark_ops.erase``'s, inside
    ``Ledger.retrying``) draw on the same bound: once it is spent, no round tries another append."""
    stubborn, other, write_id, removes, files = _raced_replace(tmp_path, clock)
    refused = 0
    with stubborn.retrying():
        for _round in range(5):
            try:
                stubborn.commit_write(write_id, files, mode="replace", removes=removes)
            except Conflict as exc:
                refused += 1
                assert "gave up after 4 attempts" in str(exc)
    assert refused == 5 and stubborn.store.appends == 4
    stubborn.store.before_append = None
    assert stubborn.commit_write(write_id, files, mode="replace", removes=removes).number == 6  # a new call: a new budget
    other.close()
    stubborn.close()


# --- R13: the vacuum expires old versions -------------------------------------------------

@pytest.mark.spark
def test_r13_vacuum_moves_marks_first_and_deletes_only_write_folders_no_unexpired_version_names(
        spark, led, clock) -> None:
    v1 = write_table(frame(spark, 0, 4, "one"), led, "sales.orders")
    clock.advance(DAY)
    v2 = write_table(frame(spark, 10, 4, "two"), led, "sales.orders", mode="overwrite")
    clock.advance(DAY)
    v3 = write_table(frame(spark, 20, 4, "three"), led, "sales.orders", mode="overwrite")
    clock.advance(DAY)
    led.restore_table("sales.orders", version=1)  # version 4 names version 1's files again
    location = led.table("sales.orders").location
    folders = {v.number: Path(location, v.files[0].path).parent for v in (v1, v2, v3)}
    on_disk = sum(1 for n in (2, 3) for f in folders[n].rglob("*") if f.is_file())  # with _SUCCESS, .crc
    clock.advance(timedelta(days=8))

    dry = vacuum(spark, led, dry_run=True)
    [expiry] = dry.expired
    assert expiry.versions == (1, 2, 3) and dry.run_id is None
    assert {Path(f.path).parent for f in expiry.would_delete} == {folders[2], folders[3]}
    assert all(f.exists() for f in folders.values()) and led.retention_mark("sales.orders") is None

    report = vacuum(spark, led)
    [expiry] = report.expired
    assert expiry.mark == led.retention_mark("sales.orders") and expiry.versions == (1, 2, 3)
    assert not folders[2].exists() and not folders[3].exists() and folders[1].exists()
    assert expiry.files == on_disk and expiry.error is None
    assert ids(read_table(spark, led, "sales.orders")) == [0, 1, 2, 3]  # the current version: whole
    with pytest.raises(VersionExpired):
        read_table(spark, led, "sales.orders", version=2)
    types = [e.type for e in led.history("sales.orders")]
    assert types.index("RetentionMarkAdvanced") < types.index("WriteFoldersDeleted")  # mark first
    assert vacuum(spark, led).expired == ()  # nothing left to do
    led.verify()


def test_r13_the_vacuum_mark_waits_a_full_retention_after_a_version_was_overwritten(led, clock) -> None:
    """Retention is how long an overwritten version stays restorable: counted from the overwrite,
    not from its own commit (a version written a year ago and overwritten now stays a week)."""
    versioned(led, clock, count=1)
    clock.advance(timedelta(days=365))
    commit_files(led, "sales.orders", 3, mode="overwrite")
    clock.advance(timedelta(days=6))
    assert led.plan_vacuum().expiries == ()
    clock.advance(DAY + timedelta(seconds=1))  # a week and a second after the overwrite
    [expiry] = led.plan_vacuum().expiries
    assert expiry.versions == (1,)


# --- R14: writes are leases ---------------------------------------------------------------

def test_r14_a_committed_or_aborted_write_is_never_written_through_the_ledger_again(led, clock) -> None:
    led.create_table("sales.orders")
    w = led.begin_write("sales.orders")
    led.commit_write(w.id, [(f"{w.relative_folder}/a.bin", 1)])
    count = led.event_count()
    with pytest.raises(WriteClosed, match=f"write {w.id} to sales.orders: it was committed as version 1"):
        led.commit_write(w.id, [(f"{w.relative_folder}/b.bin", 1)])
    with pytest.raises(WriteClosed):
        led.renew_write(w.id)
    with pytest.raises(WriteClosed):
        led.abort_write(w.id)
    aborted = led.begin_write("sales.orders")
    led.abort_write(aborted.id)
    with pytest.raises(WriteClosed, match="it was aborted at"):
        led.commit_write(aborted.id, [])
    assert led.event_count() == count + 2


def test_r14_a_commit_naming_a_file_outside_its_own_write_folder_is_refused(led) -> None:
    """Why lakeFS's copy and move races do not arise: a version names only files its own writes
    put in their own folders, so no two writes (or versions of two tables) share a file."""
    led.create_table("sales.orders")
    mine, other = led.begin_write("sales.orders"), led.begin_write("sales.orders")
    count = led.event_count()
    for path in (f"{other.relative_folder}/a.bin", "part-0.parquet", f"{mine.relative_folder}/../x.bin",
                 "/etc/passwd", f"{mine.relative_folder}"):
        with pytest.raises(InvalidArgument):
            led.commit_write(mine.id, [(path, 1)])
    assert led.event_count() == count


def test_r14_a_write_to_a_table_dropped_meanwhile_is_not_committed(led) -> None:
    led.create_table("sales.orders")
    w = led.begin_write("sales.orders")
    led.drop_table("sales.orders")
    with pytest.raises(TableNotFound, match="no longer live"):
        led.commit_write(w.id, [(f"{w.relative_folder}/a.bin", 1)])


# --- R16 (in part): file lists are covered by verify --------------------------------------

def test_r16_verify_refuses_a_file_list_that_was_edited_or_is_missing(tmp_path: Path, clock) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        led.create_table("sales.orders")
        commit_files(led, "sales.orders", 3, 4)
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER blobs_no_update")
    raw.execute("UPDATE blobs SET data = replace(data, '3', '9')")
    raw.commit()
    raw.close()
    with Ledger.open(path, clock=clock) as led:
        with pytest.raises(LedgerCorrupt, match="file list of .* version 1 .* does not match its digest"):
            led.verify()


# --- defects found by hostile testing (issue 25; each test failed before its fix) ---------------

def _forge_blob(path: Path, files: list[tuple[str, int]]) -> str:
    """Store a file list as a forger would (attachments are content-addressed: insert-only)."""
    from ledger.core.versions import manifest
    digest, data = manifest(files)
    raw = sqlite3.connect(path)
    raw.execute("INSERT OR IGNORE INTO blobs(digest, data) VALUES (?, ?)", (digest, data))
    raw.commit()
    raw.close()
    return digest


def _committed(table_id: str, number: int, write_id: str, digest: str, files: int, size: int) -> str:
    return (f'{{"table_id":"{table_id}","number":{number},"mode":"append","write_id":"{write_id}",'
            f'"manifest":"{digest}","files":{files},"bytes":{size}}}')


@pytest.mark.parametrize("named", ["other-write", "other-table"])
def test_r14_r16_verify_refuses_a_chained_commit_naming_a_file_its_write_could_not_have_written(
        tmp_path: Path, clock, named: str) -> None:
    from tests.forge import forge
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        mine = led.create_table("sales.orders")
        theirs = led.create_table("sales.other")
        w, other = led.begin_write("sales.orders"), led.begin_write("sales.orders")
        led.verify()
    target = f"{other.relative_folder}/part-0.bin" if named == "other-write" else f"../{theirs.id}/part-0.bin"
    digest = _forge_blob(path, [(target, 5)])
    forge(path, stream=f"data:{mine.id}", type="VersionCommitted", payload=_committed(mine.id, 1, w.id, digest, 1, 5))
    with Ledger.open(path, clock=clock) as led:
        with pytest.raises(LedgerCorrupt, match=r"version 1 .* is not one its commit could have made: .*R14"):
            led.verify()


def test_r14_r16_a_chained_write_begun_in_another_writes_folder_is_a_corrupt_log(tmp_path: Path, clock) -> None:
    """The worst of them: a forged write in the current version's folder, once its lease ran out,
    had the next vacuum sweep the folder and delete the current version's files."""
    from tests.forge import forge
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        table = led.create_table("sales.orders")
        committed = led.begin_write("sales.orders")
        led.commit_write(committed.id, [(f"{committed.relative_folder}/a.bin", 1)])
    forge(path, stream=f"data:{table.id}", type="WriteBegun",
          payload=f'{{"write_id":"forged","table_id":"{table.id}","folder":"{committed.relative_folder}",'
                  f'"lease_seconds":1,"expires_at":1}}')
    with pytest.raises(LedgerCorrupt, match=r"begins write 'forged' in folder .* not its own .*R14"):
        Ledger.open(path, clock=clock)


def test_r11_r16_an_edited_file_list_is_refused_by_every_read_and_by_the_vacuum(
        tmp_path: Path, clock) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        led.create_table("sales.orders")
        w = led.begin_write("sales.orders")
        os.makedirs(w.folder)
        for name in ("a.bin", "b.bin"):
            Path(w.folder, name).write_bytes(b"x")
        led.commit_write(w.id, [(f"{w.relative_folder}/a.bin", 1), (f"{w.relative_folder}/b.bin", 1)])
    raw = sqlite3.connect(path)  # the list now names a.bin only: a read would lose b's rows
    raw.execute("DROP TRIGGER blobs_no_update")
    raw.execute("UPDATE blobs SET data = ?", (f'[["{w.relative_folder}/a.bin",1]]'.encode(),))
    raw.commit()
    raw.close()
    clock.advance(DAY)  # b.bin, unnamed by the edited list, is past the straggler grace period
    with Ledger.open(path, clock=clock) as led:
        with pytest.raises(LedgerCorrupt, match="does not match the digest its commit carries"):
            led.versions("sales.orders")[0].files
        with pytest.raises(LedgerCorrupt, match="does not match the digest"):
            led.version("sales.orders").files
        with pytest.raises(LedgerCorrupt, match="does not match the digest"):
            led.start_vacuum(only_uncommitted=True)
    assert Path(w.folder, "b.bin").exists()


# Paths made of what a chunk's cut could be fooled by: the ``],["`` a pair ends with, quotes and
# backslashes (escaped in the list), a newline, and characters of two and three UTF-8 bytes.
TRICKY = st.text(alphabet=st.sampled_from(list('ab/],["\\\n\u00e9\u2603')), min_size=1, max_size=12)


@given(files=st.lists(st.tuples(TRICKY, st.integers(0, 2 ** 63 - 1)), max_size=60), chunk=st.integers(1, 64))
@example(files=[("a],[", 1), ("b", 2)], chunk=1)  # a path ending in a pair's end: the first cut is in it
def test_r20_a_file_list_read_a_chunk_at_a_time_is_the_list_read_whole(files: list[tuple[str, int]],
                                                                        chunk: int) -> None:
    """The vacuum's driver reads the files the ledger knows a few hundred at a time
    (``read_manifest``): whatever the paths hold, and wherever a chunk would end, it reads the
    pairs a whole read does, in order; a list cut short is refused, not read short."""
    _, data = manifest(files)
    assert list(read_manifest(data, chunk)) == parse_manifest(data)
    if len(data) > 2:
        with pytest.raises(ValueError):
            list(read_manifest(data[:-2] + b"]", chunk))


def test_r20_the_vacuums_driver_holds_a_known_file_list_as_stored_never_parsed_whole(tmp_path: Path, clock) -> None:
    """On an object store the driver deletes the files the ledger knows by key, reading each list
    as its keys go (``VacuumRun.files``). It parsed each list whole first: 16 times the list's
    stored size at its peak (orjson's parse tree, then every pair; 43 MB for these 50,000 files in
    one commit), in the middle of the deletes. Now it holds the list as stored and a chunk of it."""
    with Ledger.open(tmp_path / "ledger.db", warehouse="s3://lake/lists", clock=clock) as led:
        led.create_table("sales.known")
        w = led.begin_write("sales.known")
        files = [(f"{w.relative_folder}/part-{i:06d}.parquet", 100) for i in range(50_000)]
        led.commit_write(w.id, files)
        led.drop_table("sales.known")
        clock.advance(DAY * 14)
        plan = led.plan_vacuum()
        (purge,) = plan.items()
        (digest,) = purge.listed
        stored = len(manifest(files)[1])
        tracemalloc.start()
        try:
            read = sum(1 for _ in VacuumRun(led, "dry run", plan).files(digest))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert read == 50_000 and peak < 1.5 * stored, (peak, stored)


def test_r14_sizes_past_what_the_ledger_can_record_are_refused_typed(led) -> None:
    led.create_table("sales.orders")
    w = led.begin_write("sales.orders")
    count = led.event_count()
    for files in ([(f"{w.relative_folder}/a.bin", 2 ** 64)],
                  [(f"{w.relative_folder}/a.bin", 2 ** 62), (f"{w.relative_folder}/b.bin", 2 ** 62)]):
        with pytest.raises(InvalidArgument, match=r"2\*\*63-1"):
            led.commit_write(w.id, files)
    assert led.event_count() == count
    assert led.commit_write(w.id, [(f"{w.relative_folder}/a.bin", 2 ** 63 - 1)]).bytes == 2 ** 63 - 1


def test_r14_a_clock_near_the_end_of_time_refuses_a_lease_before_writing_anything(tmp_path: Path) -> None:
    clock = ManualClock(datetime.max.replace(tzinfo=T0.tzinfo) - timedelta(hours=1))
    with Ledger.open(tmp_path / "ledger.db", clock=clock) as led:
        led.create_table("sales.orders")
        count = led.event_count()
        with pytest.raises(InvalidTime, match="would run past 9999-12-31T23:59:59.999999Z"):
            led.begin_write("sales.orders")
        assert led.event_count() == count and led.open_writes() == []
        w = led.begin_write("sales.orders", lease="30m")
        clock.advance(timedelta(minutes=45))
        with pytest.raises(InvalidTime, match="renew write"):
            led.renew_write(w.id)
        assert [x.id for x in led.open_writes()] == [w.id]


def test_r10_the_warehouse_does_not_move_under_open_writes(tmp_path: Path, clock) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        led.create_table("sales.orders")
        w = led.begin_write("sales.orders")
        count = led.event_count()
        (tmp_path / "moved").mkdir()
        with pytest.raises(InvalidArgument, match=rf"while 1 write\(s\) are open: {w.id} \(sales.orders\)"):
            led.move_warehouse(tmp_path / "moved")
        assert led.event_count() == count and led.warehouse == str(tmp_path / "warehouse")
        led.abort_write(w.id)
        assert led.move_warehouse(tmp_path / "moved") == str(tmp_path / "moved")


def test_r4_r10_a_write_begun_while_a_move_was_decided_is_never_committed(tmp_path: Path, clock) -> None:
    """The move decided on no open writes; a write began before it landed: the commit is refused,
    since the job wrote under the old root, where no vacuum looks."""
    from ledger.core.warehouse import MoveWarehouse
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        led.create_table("sales.orders")
        move = led.runner.prepare(MoveWarehouse(led.warehouse, str(tmp_path / "moved")))
        w = led.begin_write("sales.orders")
        led.runner.commit(move)
        assert led.warehouse == str(tmp_path / "moved")
        count = led.event_count()
        with pytest.raises(WriteExpired, match="the warehouse moved to .* after the write began"):
            led.commit_write(w.id, [(f"{w.relative_folder}/a.bin", 1)])
        assert led.event_count() == count
        led.verify()


# --- schemas recorded with versions (issue 26; each test failed before its fix) -------------------

@pytest.mark.spark
def test_r11_an_append_with_other_columns_is_refused_naming_both_and_writes_nothing(spark, led) -> None:
    write_table(frame(spark, 0, 4), led, "sales.orders")
    count, location = led.event_count(), led.table("sales.orders").location
    folders = set(os.listdir(f"{location}/_writes"))
    with pytest.raises(SchemaMismatch, match=r"has struct<id:bigint,label:string,bucket:int>; this DataFrame has "
                                             r"struct<other:bigint>.*merge_schema=True"):
        write_table(spark.range(3).toDF("other"), led, "sales.orders")
    assert led.event_count() == count and set(os.listdir(f"{location}/_writes")) == folders
    assert ids(read_table(spark, led, "sales.orders")) == [0, 1, 2, 3]
    # the same columns in another order are the same table
    write_table(frame(spark, 4, 2).select("bucket", "id", "label"), led, "sales.orders")
    df = read_table(spark, led, "sales.orders")
    assert df.columns == ["id", "label", "bucket"] and ids(df) == list(range(6))


@pytest.mark.spark
def test_r11_merge_schema_records_the_union_and_every_version_reads_whole(spark, led) -> None:
    write_table(frame(spark, 0, 2), led, "sales.orders")
    wider = frame(spark, 2, 2).selectExpr("*", "id * 1.5 AS price")
    v2 = write_table(wider, led, "sales.orders", merge_schema=True)
    rows = sorted(read_table(spark, led, "sales.orders").collect(), key=lambda r: r["id"])
    assert [(r["id"], r["label"], r["price"]) for r in rows] == [(0, "x-0", None), (1, "x-1", None),
                                                                 (2, "x-2", 3.0), (3, "x-3", 4.5)]
    assert read_table(spark, led, "sales.orders", version=1).columns == ["id", "label", "bucket"]
    assert "price" in v2.schema and led.versions("sales.orders")[1].schema != v2.schema
    with pytest.raises(SchemaMismatch, match="column id is bigint in the table and string in this write"):
        write_table(frame(spark, 4, 1).selectExpr("cast(id AS string) AS id"), led, "sales.orders", merge_schema=True)


@pytest.mark.spark
def test_r11_merge_schema_matches_columns_as_spark_resolves_them(spark, led) -> None:
    """Spark resolves column names without regard to case by default: ``ID`` is ``id``. A merge
    that recorded both made every read of the table fail (COLUMN_ALREADY_EXISTS)."""
    write_table(spark.createDataFrame([(1, "a")], "id long, name string"), led, "sales.orders")
    wider = spark.createDataFrame([(2, "b", 2.5)], "ID long, Name string, price double")
    v2 = write_table(wider, led, "sales.orders", merge_schema=True)
    assert [f.name for f in schemas.struct(v2.schema).fields] == ["id", "name", "price"]
    rows = sorted(read_table(spark, led, "sales.orders").collect(), key=lambda r: r["id"])
    assert [tuple(r) for r in rows] == [(1, "a", None), (2, "b", 2.5)]
    # the same columns spelled otherwise are the same columns: no merge needed
    write_table(spark.createDataFrame([(3, "c", 1.0)], "Id long, NAME string, Price double"), led, "sales.orders")
    assert sorted(r["id"] for r in read_table(spark, led, "sales.orders").collect()) == [1, 2, 3]
    count = led.event_count()
    clash = spark.createDataFrame([("4", "d")], "ID string, name string")
    with pytest.raises(SchemaMismatch, match=r"column id \(written ID here\) is bigint in the table and string"):
        write_table(clash, led, "sales.orders", merge_schema=True)
    with pytest.raises(SchemaMismatch) as refused:
        write_table(clash, led, "sales.orders")
    assert "merge_schema=True" not in str(refused.value) and "A merge would not do either" in str(refused.value)
    assert led.event_count() == count
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:  # where Spark tells names apart by case, ID is another column, and readable beside id
        v4 = write_table(spark.createDataFrame([(5, 6)], "id long, ID long"), led, "sales.orders", merge_schema=True)
        assert [f.name for f in schemas.struct(v4.schema).fields] == ["id", "name", "price", "ID"]
        assert read_table(spark, led, "sales.orders").count() == 4
    finally:
        spark.conf.unset("spark.sql.caseSensitive")


@pytest.mark.spark
def test_r11_a_warehouse_spark_cannot_write_to_is_said_before_anything_is_recorded(spark, tmp_path: Path) -> None:
    """``s3://`` with no s3a connector used to create the table, then fail with a raw Py4J
    "No FileSystem for scheme s3"."""
    from spark_ops import SparkUnavailable
    with Ledger.open(tmp_path / "l.db", warehouse="s3://lake-bucket/prod") as led:
        with pytest.raises(SparkUnavailable, match=r"Spark has no file system for the warehouse s3://lake-bucket/prod "
                                                   r"\(No FileSystem for scheme \"s3\"\): add the Hadoop connector "
                                                   r"for s3:// \(for S3: the hadoop-aws connector.*nothing was recorded"):
            write_table(spark.range(3), led, "sales.orders")
        assert led.event_count() == 0 and led.tables() == []


@pytest.mark.spark
def test_r11_string_partition_values_read_back_as_written(spark, led) -> None:
    df = spark.createDataFrame([(1, "007"), (2, "010")], "id long, code string")
    write_table(df, led, "sales.orders", partition_by=["code"])
    back = read_table(spark, led, "sales.orders")
    assert back.columns == ["id", "code"] and back.schema["code"].dataType.simpleString() == "string"
    assert sorted((r["id"], r["code"]) for r in back.collect()) == [(1, "007"), (2, "010")]


def test_r4_r11_the_ledger_refuses_an_append_of_another_schema_and_a_merge_from_a_stale_one(led) -> None:
    """The check is the ledger's, decided on the state it appends to: a writer whose schema check
    passed before another job overwrote the table's columns is refused at commit."""
    one, two = '{"fields":[{"name":"a"}]}', '{"fields":[{"name":"b"}]}'
    led.create_table("sales.orders")
    first = led.begin_write("sales.orders")
    led.commit_write(first.id, [], schema=one)
    appending, overwriting = led.begin_write("sales.orders"), led.begin_write("sales.orders")
    led.commit_write(overwriting.id, [], mode="overwrite", schema=two)
    count = led.event_count()
    with pytest.raises(SchemaMismatch, match=r"columns are not the table's.*version 2.*merge_schema=True"):
        led.commit_write(appending.id, [], schema=one)
    with pytest.raises(SchemaMismatch, match="the table's schema changed while this write ran"):
        led.commit_write(appending.id, [], schema='{"fields":[{"name":"a"},{"name":"c"}]}', merge_schema=True,
                         merged_from=one)
    with pytest.raises(InvalidArgument, match="not a JSON object"):
        led.commit_write(appending.id, [], schema="struct<a:int>")
    assert led.event_count() == count
    assert led.commit_write(appending.id, []).schema == two  # an append without one keeps the table's


def test_r17_a_dropped_tables_versions_are_listed_by_id_and_time_travel_names_the_instance_then(
        led, clock) -> None:
    led.create_table("sales.orders")
    commit_files(led, "sales.orders", 3)
    old = led.drop_table("sales.orders")
    clock.advance(DAY)
    then = clock()
    clock.advance(DAY)
    new = led.create_table("sales.orders")
    commit_files(led, "sales.orders", 4)
    assert [(v.number, v.bytes) for v in led.versions(table_id=old.id)] == [(1, 3)]
    assert [(v.number, v.bytes) for v in led.versions("sales.orders")] == [(1, 4)]
    with pytest.raises(VersionNotFound, match=rf"sales.orders \(id {new.id}\) did not exist at .*: it was created at "
                                              rf".*; the name then belonged to instance {old.id}, dropped at"):
        led.version("sales.orders", as_of=then)


# --- a table's partitioning and an append's types (issue 57 items 12-13; each failed before its fix) ----

def new_write_folders(led: Ledger, name: str) -> set[str]:
    """The write folders under a table's location: a refused write must have made none."""
    folder = Path(led.table(name).location, "_writes")
    return set(os.listdir(folder)) if folder.exists() else set()


def test_r11_r16_a_version_records_its_partition_columns_and_one_of_no_files_keeps_the_tables(
        tmp_path: Path, clock) -> None:
    """The ledger's half of issue 57 items 12-13: the layout is the table's, recorded with each
    version, kept by an append, a replace, a restore and an overwrite of no files; an append or a
    replace of another layout is refused before anything is recorded. It folds the same from the
    log and from a stored state, and an older commit event reads as not saying."""
    from ledger.core.events import decode_event
    path = tmp_path / "ledger.db"

    def commit(led: Ledger, mode: str = "append", partition_by=None, files: int = 1, **options):
        w = led.begin_write("sales.orders")
        named = [(f"{w.relative_folder}/day=1/part-{i}.parquet", 5) for i in range(files)]
        return led.commit_write(w.id, named, mode=mode, partition_by=partition_by, **options)

    with Ledger.open(path, clock=clock) as led:
        led.create_table("sales.orders")
        assert commit(led, partition_by=["day"]).partition_by == ("day",)
        assert commit(led).partition_by == ("day",)  # not said: the table's
        w = led.begin_write("sales.orders")
        events, named = led.event_count(), [(f"{w.relative_folder}/hour=1/part-0.parquet", 5)]
        for other in (["hour"], [], ["day", "hour"]):
            with pytest.raises(InvalidArgument, match=r"its files are (partitioned by .*|not partitioned), and the "
                                                      r"table \(version 2\) is partitioned by day: an append keeps"):
                led.commit_write(w.id, named, partition_by=other)
        for bad in ("day", [""], ["day", "day"], [3]):
            with pytest.raises(InvalidArgument, match="partition_by"):
                led.commit_write(w.id, named, partition_by=bad)
        assert led.event_count() == events  # nothing recorded
        led.abort_write(w.id)
        assert commit(led, "overwrite", files=0).partition_by == ("day",)  # what an erasure of every row makes
        assert commit(led, "replace", removes=(), files=1).partition_by == ("day",)
        assert led.restore_table("sales.orders", version=1).partition_by == ("day",)
        assert commit(led, "overwrite").partition_by is None  # files, and not said: their folders tell
        assert commit(led, "overwrite", partition_by=[]).partition_by == ()
        listed = [v.partition_by for v in led.versions("sales.orders")]
        assert listed == [(), None, ("day",), ("day",), ("day",), ("day",), ("day",)]
        led.verify()
    with Ledger.open(path, clock=clock) as led:  # folded from the log
        assert [v.partition_by for v in led.versions("sales.orders")] == listed
        led.maintain()
    with Ledger.open(path, clock=clock) as led:  # read from the stored state
        assert [v.partition_by for v in led.versions("sales.orders")] == listed
        assert led.versions("sales.orders")[2].to_dict()["partition_by"] == ["day"]
        led.verify()
    old = decode_event(1, "VersionCommitted", 3, '{"table_id":"t","number":1,"mode":"append","write_id":"w",'
                                                 '"manifest":"m","files":1,"bytes":1,"schema":null}')
    assert old.partition_by is None


@pytest.mark.spark
def test_r11_r25_a_partitioned_table_an_erase_emptied_keeps_its_partitioning(spark, led, clock) -> None:
    """An erase that matched every row empties the table with an overwrite of no files; a partition
    overwrite was then refused ("has no partition columns"), as the partitioning was only read from
    the current files. Each version records its partition columns, and one of no files keeps its
    table's, so partition overwrites and appends after it go on as before."""
    from spark_ops import erase
    write_table(frame(spark, 0, 6), led, "sales.orders", partition_by="bucket")
    clock.advance(DAY)
    erase(spark, led, "sales.orders", "id >= 0", reason="every row")
    emptied = led.version("sales.orders")
    assert (emptied.mode, emptied.file_count) == ("overwrite", 0)

    again = write_table(frame(spark, 10, 3), led, "sales.orders", mode="overwrite", partitions="dynamic",
                        partition_by=["bucket"])
    assert all("/bucket=" in f.path for f in again.files)
    assert emptied.partition_by == again.partition_by == ("bucket",)
    # the columns are the table's when not given: id 20 (bucket 2) replaces id 11's partition only
    write_table(frame(spark, 20, 1), led, "sales.orders", mode="overwrite", partitions="dynamic")
    assert ids(read_table(spark, led, "sales.orders", pin=False)) == [10, 12, 20]
    led.verify()


@pytest.mark.spark
def test_r11_an_append_without_partition_by_takes_the_tables_partitioning(spark, led) -> None:
    """It wrote unpartitioned files beside the partitioned ones: a partition overwrite was then refused
    ("files of several partition layouts") and attach gave the table no name. As Delta does, an
    append (and a partition overwrite) takes the table's partition columns."""
    from spark_ops import attach, detach
    write_table(frame(spark, 0, 3), led, "sales.orders", partition_by=["bucket"])
    appended = write_table(frame(spark, 3, 3), led, "sales.orders")
    assert all("/bucket=" in f.path for f in appended.files) and appended.partition_by == ("bucket",)
    write_table(frame(spark, 9, 1), led, "sales.orders", mode="overwrite", partitions="dynamic")  # bucket 0
    assert ids(read_table(spark, led, "sales.orders", pin=False)) == [1, 2, 4, 5, 9]
    try:
        assert attach(spark, led) == ["sales.orders"]
        assert spark.sql("SELECT count(*) AS n FROM sales.orders WHERE bucket = 2").collect()[0]["n"] == 2
    finally:
        detach(spark, led)
    # a static overwrite replaces the table, its columns and its partitioning with it
    flat = write_table(frame(spark, 0, 2), led, "sales.orders", mode="overwrite")
    assert flat.partition_by == () and not any("=" in f.path for f in flat.files)
    assert write_table(frame(spark, 2, 2), led, "sales.orders").partition_by == ()


@pytest.mark.spark
@pytest.mark.parametrize("case", ["append-other-columns", "append-to-unpartitioned", "dynamic-other-columns"])
def test_r11_partition_columns_other_than_the_tables_are_refused_before_anything_is_written(
        spark, led, case: str) -> None:
    write_table(frame(spark, 0, 3), led, "sales.orders", partition_by=None if case == "append-to-unpartitioned"
                else ["bucket"])
    options = {"partition_by": ["bucket"]} if case == "append-to-unpartitioned" else {"partition_by": ["label"]}
    if case == "dynamic-other-columns":
        options.update(mode="overwrite", partitions="dynamic")
    events, folders = led.event_count(), new_write_folders(led, "sales.orders")
    with pytest.raises(InvalidArgument) as refused:
        write_table(frame(spark, 3, 3), led, "sales.orders", **options)
    said = str(refused.value)
    assert "\n" not in said and "nothing was recorded" in said and "partition" in said
    assert ("is partitioned by bucket" if case != "append-to-unpartitioned" else "is not partitioned") in said, said
    assert led.event_count() == events and new_write_folders(led, "sales.orders") == folders


@pytest.mark.spark
def test_r11_an_append_widens_a_column_as_a_spark_insert_does_and_writes_the_tables_type(spark, led) -> None:
    """A column written as ``int`` where the table has ``bigint`` was ``SchemaMismatch``, where Spark's
    own INSERT casts it. The safe widenings are taken (a smaller integer to a larger, float to double,
    an integer to a double or a wide enough decimal), the files hold the table's type, and the version
    records the table's schema; a narrowing, or another kind of value, is still refused."""
    import pyarrow.parquet as pq
    from decimal import Decimal
    table = "id long, score double, price decimal(12,2), bucket int"
    write_table(spark.createDataFrame([(1, 0.5, Decimal(1), 0)], table), led, "sales.orders", partition_by=["bucket"])
    recorded = led.version("sales.orders").schema
    narrower = spark.createDataFrame([(2, 1.5, Decimal(3), 1)],
                                     "id int, score float, price decimal(5,1), bucket smallint")
    v2 = write_table(narrower, led, "sales.orders")
    assert v2.schema == recorded
    location = led.table("sales.orders").location
    own = [f for f in v2.files if f.path not in {g.path for g in led.version("sales.orders", version=1).files}]
    written = pq.read_schema(f"{location}/{own[0].path}")
    assert (str(written.field("id").type), str(written.field("score").type)) == ("int64", "double")
    back = read_table(spark, led, "sales.orders", pin=False)
    assert sorted((r["id"], r["score"], r["bucket"]) for r in back.collect()) == [(1, 0.5, 0), (2, 1.5, 1)]
    # a partition overwrite widens too
    write_table(spark.createDataFrame([(3, 2.5, 7, 1)], "id int, score double, price int, bucket int"), led,
                "sales.orders", mode="overwrite", partitions="dynamic")
    assert ids(read_table(spark, led, "sales.orders", pin=False)) == [1, 3]

    events = led.event_count()
    for wider, column, was, now in [("id long, score double, price decimal(12,2), bucket long", "bucket", "int",
                                     "bigint"),
                                    ("id long, score double, price decimal(13,3), bucket int", "price",
                                     "decimal(12,2)", "decimal(13,3)"),
                                    ("id long, score double, price decimal(12,2), bucket string", "bucket", "int",
                                     "string"),
                                    ("id double, score double, price decimal(12,2), bucket int", "id", "bigint",
                                     "double")]:
        with pytest.raises(SchemaMismatch) as refused:
            write_table(spark.createDataFrame([], wider), led, "sales.orders")
        assert f"column {column} is {was} in the table and {now} in this write" in str(refused.value)
    assert led.event_count() == events


@pytest.mark.spark
def test_r11_a_partition_overwrite_of_other_columns_says_what_the_caller_did_and_what_to_do(spark, led) -> None:
    """Its refusal said "cannot append" and suggested mode='overwrite', which the caller had passed."""
    write_table(frame(spark, 0, 3), led, "sales.orders", partition_by=["bucket"])
    events = led.event_count()
    with pytest.raises(SchemaMismatch) as refused:
        write_table(frame(spark, 3, 1).selectExpr("*", "id AS extra"), led, "sales.orders", mode="overwrite",
                    partitions="dynamic")
    said = str(refused.value)
    assert said.startswith("cannot overwrite partitions of sales.orders: its columns are not the table's"), said
    assert "cannot append" not in said and "merge_schema" not in said and "partitions='static'" in said
    assert "\n" not in said and led.event_count() == events
