"""The contract's rules, one or more tests each, on both stores: a real SQLite file and a real
PostgreSQL server (``BOTH_STORES``: every test that takes ``ledger`` or ``ledger_path`` runs on
each, unless marked ``sqlite_only`` because it reads the file itself).

Times are written as seconds after T0 so the scenarios read like the seed
documents' timelines.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Callable

import pytest

from ledger import (
    Conflict, DatabaseChanged, DatabaseNotFound, InvalidArgument, InvalidTime, Ledger, LedgerNotFound, ManualClock,
    TableExists, TableNotFound, UndropBlocked, VacuumRun, WarehouseMismatch,
)
from ledger.clock import iso, to_micros
from vacuum_work import Result, location, new_run_id
from tests.conftest import T0
from tests.pg import MANUAL
from tests.forge import forge
from tests.stores import Faults, faulty_store


BOTH_STORES = True


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


def drop_at(ledger: Ledger, clock: ManualClock, name: str, seconds: float):
    clock.set(at(seconds))
    if not any(t.name == name for t in ledger.tables()):
        ledger.create_table(name)
    return ledger.drop_table(name)


# --- R1 monotonic watermark --------------------------------------------------------------

def test_r1_fetch_and_set_returns_previous_and_never_moves_back(ledger: Ledger, clock: ManualClock) -> None:
    clock.set(at(3000))
    assert ledger.advance_watermark(at(1000)) is None
    assert ledger.advance_watermark(at(500)) == at(1000)
    assert ledger.watermark() == at(1000)
    assert ledger.advance_watermark(at(2000)) == at(1000)
    assert ledger.watermark() == at(2000)


def test_r1_equal_or_older_advance_appends_nothing(ledger: Ledger, clock: ManualClock) -> None:
    clock.set(at(3000))
    ledger.advance_watermark(at(1000), scope="database:sales")
    count = ledger.event_count()
    assert ledger.advance_watermark(at(1000), scope="database:sales") == at(1000)
    assert ledger.advance_watermark(at(10), scope="database:sales") == at(1000)
    assert ledger.event_count() == count


def test_r1_watermark_past_now_is_refused(ledger: Ledger, clock: ManualClock) -> None:
    clock.set(at(100))
    with pytest.raises(InvalidTime, match="past the ledger's current time"):
        ledger.advance_watermark(at(101))
    assert ledger.event_count() == 0


# --- R3 the guard --------------------------------------------------------------------------

def test_r3_no_watermark_set_undrop_allowed(ledger: Ledger, clock: ManualClock) -> None:
    drop_at(ledger, clock, "sales.orders", 100)
    assert ledger.watermark() is None
    assert ledger.undrop_table("sales.orders").is_live


def test_r3_undrop_blocked_when_dropped_before_watermark(ledger: Ledger, clock: ManualClock) -> None:
    dropped = drop_at(ledger, clock, "sales.orders", 100)
    clock.set(at(300))
    ledger.advance_watermark(at(200))
    count = ledger.event_count()
    with pytest.raises(UndropBlocked) as refused:
        ledger.undrop_table("sales.orders")
    message = str(refused.value)
    assert "sales.orders" in message and dropped.id in message
    assert iso(to_micros(dropped.dropped_at)) in message and "2026-01-01T00:03:20.000000Z" in message
    assert ledger.event_count() == count


def test_r3_undrop_allowed_when_dropped_after_watermark(ledger: Ledger, clock: ManualClock) -> None:
    clock.set(at(300))
    ledger.advance_watermark(at(200))
    drop_at(ledger, clock, "sales.orders", 400)
    assert ledger.undrop_table("sales.orders").is_live


def test_r3_undrop_blocked_at_watermark(ledger: Ledger, clock: ManualClock) -> None:
    dropped = drop_at(ledger, clock, "sales.orders", 100)
    clock.set(at(300))
    ledger.advance_watermark(dropped.dropped_at)
    with pytest.raises(UndropBlocked):
        ledger.undrop_table("sales.orders")


@pytest.mark.parametrize("scope_of", [
    lambda t: "ledger", lambda t: "database:sales", lambda t: f"table:{t.id}"])
def test_r3_effective_watermark_is_latest_of_three_scopes(ledger: Ledger, clock: ManualClock, scope_of) -> None:
    dropped = drop_at(ledger, clock, "sales.orders", 100)
    other = drop_at(ledger, clock, "other.orders", 100.5)
    clock.set(at(300))
    ledger.advance_watermark(at(150), scope=scope_of(dropped))
    with pytest.raises(UndropBlocked):
        ledger.undrop_table("sales.orders")
    if scope_of(dropped) != "ledger":  # a narrower scope leaves others restorable
        assert ledger.undrop_table("other.orders").id == other.id


# --- R4 checked, not hoped ------------------------------------------------------------------

def test_r4_undrop_redecided_when_watermark_moves_between_read_and_append(
        ledger_path: Path, clock: ManualClock) -> None:
    """A vacuum (another connection) advances the watermark after the undrop has read
    and decided, before it appends: the append is refused, refolded, and refused again
    by the guard, and the undrop never commits."""
    undropper = Ledger(faulty_store(ledger_path), clock=clock, actor="undropper")
    vacuum = Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, actor="vacuum")
    dropped = drop_at(undropper, clock, "sales.orders", 100)
    clock.set(at(200))

    raced = []

    def vacuum_first(store: Faults) -> None:
        if not raced:
            raced.append(vacuum.advance_watermark(dropped.dropped_at))

    undropper.store.before_append = vacuum_first
    with pytest.raises(UndropBlocked):
        undropper.undrop_table("sales.orders")
    assert raced == [None] and undropper.retries == 1
    assert [e.type for e in undropper.history()][-1] == "WatermarkAdvanced"
    assert undropper.dropped_tables()[0].id == dropped.id
    undropper.close()
    vacuum.close()


def test_r4_r18_a_create_racing_one_in_its_database_retries_and_one_in_another_does_not(
        ledger_path: Path, clock: ManualClock) -> None:
    """A create conditions on its database's catalog (and the ledger-wide one, which only a
    cross-database undrop moves): another database's create is no conflict at all."""
    first = Ledger(faulty_store(ledger_path), clock=clock)
    second = Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL)

    def raced_once_by(name: str) -> Callable[[Faults], None]:
        names = [name]
        return lambda store: names and second.create_table(names.pop())

    first.store.before_append = raced_once_by("other.t")
    first.create_table("other.mine")  # raced in its database: retried once
    assert first.retries == 1
    first.store.before_append = raced_once_by("sales.items")
    first.create_table("sales.orders")  # likewise
    assert first.retries == 2
    first.store.before_append = lambda store: second.create_table(f"elsewhere.t{second.event_count()}")
    first.create_table("sales.customers")  # raced in another database at every attempt: no retry
    assert first.retries == 2
    assert {t.name for t in first.tables()} >= {"other.t", "other.mine", "sales.items", "sales.orders",
                                                "sales.customers"}


def test_r4_gives_up_with_conflict_after_retry_budget(ledger_path: Path, clock: ManualClock) -> None:
    stubborn = Ledger(faulty_store(ledger_path), clock=clock, max_attempts=3)
    other = Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL)
    names = iter(f"sales.t{i}" for i in range(100))  # its database's: each one moves what it read
    stubborn.store.before_append = lambda store: other.create_table(next(names))
    before = stubborn.event_count()
    with pytest.raises(Conflict, match="gave up after 3 attempts"):
        stubborn.create_table("sales.orders")
    assert stubborn.event_count() == before + 3  # only the other writer's three creates
    assert "sales.orders" not in {t.name for t in stubborn.tables()}


def test_r4_a_writer_that_keeps_losing_decides_under_the_write_lock_and_wins(
        ledger_path: Path, clock: ManualClock) -> None:
    """Liveness: after ``optimistic_attempts`` lost races a command reads, decides and
    appends inside one write transaction, where nobody can move what it read."""
    stubborn = Ledger(faulty_store(ledger_path), clock=clock, optimistic_attempts=3)
    other = Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL)
    names = iter(f"sales.t{i}" for i in range(100))

    def beaten_unless_locked(store: Faults) -> None:
        if not store.in_exclusive:  # under the lock the other writer would just wait
            other.create_table(next(names))

    stubborn.store.before_append = beaten_unless_locked
    created = stubborn.create_table("sales.orders")
    assert stubborn.retries == 3 and created.is_live
    assert len(other.tables()) == 4 and stubborn.verify().events == 4


# --- R6 evidence, not clocks ---------------------------------------------------------------

def test_r6_event_times_strictly_increase_when_clock_steps_back(ledger: Ledger, clock: ManualClock) -> None:
    clock.set(at(1000))
    ledger.create_table("a.one")
    clock.set(at(10))  # the host's clock jumps back
    ledger.create_table("a.two")
    ledger.create_table("a.three")
    times = [e.time for e in ledger.history()]
    assert times == sorted(set(times)) and len(times) == 3
    assert times[1] > at(1000)


def test_r6_watermark_cannot_pass_ledger_time_even_with_slow_clock(ledger: Ledger, clock: ManualClock) -> None:
    clock.set(at(1000))
    dropped = drop_at(ledger, clock, "a.t", 1000)
    clock.set(at(10))  # behind the log: the ledger's now is the log's last time
    assert ledger.advance_watermark(dropped.dropped_at) is None
    with pytest.raises(InvalidTime):
        ledger.advance_watermark(at(2000))


# --- R7 names ------------------------------------------------------------------------------

def test_r7_name_reuse_makes_new_instances_and_undrop_picks_newest(ledger: Ledger, clock: ManualClock) -> None:
    first = drop_at(ledger, clock, "sales.orders", 10)
    second = drop_at(ledger, clock, "sales.orders", 20)
    third = drop_at(ledger, clock, "sales.orders", 30)
    assert len({first.id, second.id, third.id}) == 3
    assert len({first.location, second.location, third.location}) == 3
    assert [t.id for t in ledger.dropped_tables(name="sales.orders")] == [third.id, second.id, first.id]
    assert ledger.undrop_table("sales.orders").id == third.id


def test_r7_undrop_by_id_and_under_new_name(ledger: Ledger, clock: ManualClock) -> None:
    first = drop_at(ledger, clock, "sales.orders", 10)
    second = drop_at(ledger, clock, "sales.orders", 20)
    restored = ledger.undrop_table("sales.orders", table_id=first.id)
    assert restored.id == first.id and restored.name == "sales.orders"
    renamed = ledger.undrop_table("sales.orders", table_id=second.id, new_name="archive.orders_old")
    assert renamed.id == second.id and renamed.name == "archive.orders_old"
    assert ledger.table("archive.orders_old").location == second.location


def test_r7_undrop_onto_bound_name_is_refused(ledger: Ledger, clock: ManualClock) -> None:
    old = drop_at(ledger, clock, "sales.orders", 10)
    ledger.create_table("sales.orders")
    count = ledger.event_count()
    with pytest.raises(TableExists, match="already a live table"):
        ledger.undrop_table("sales.orders")
    with pytest.raises(TableExists):
        ledger.undrop_table("sales.orders", table_id=old.id)
    assert ledger.event_count() == count
    assert ledger.undrop_table("sales.orders", new_name="sales.orders_v1").id == old.id


def test_r7_undrop_by_id_must_match_name(ledger: Ledger, clock: ManualClock) -> None:
    other = drop_at(ledger, clock, "sales.other", 10)
    with pytest.raises(TableNotFound, match="is sales.other, not sales.orders"):
        ledger.undrop_table("sales.orders", table_id=other.id)


def test_r7_database_drop_and_undrop_all_or_nothing(ledger: Ledger, clock: ManualClock) -> None:
    clock.set(at(10))
    ids = {ledger.create_table(n).id for n in ("sales.a", "sales.b", "sales.c")}
    ledger.create_table("other.keep")
    dropped = ledger.drop_database("sales")
    assert {t.id for t in dropped} == ids
    assert len({t.dropped_at for t in dropped}) == 1  # one event, one time
    assert [t.name for t in ledger.tables()] == ["other.keep"]

    ledger.create_table("sales.b")  # a name of the dropped database is taken again
    count = ledger.event_count()
    with pytest.raises(TableExists):
        ledger.undrop_database("sales")
    assert ledger.event_count() == count
    assert len(ledger.dropped_tables(database="sales")) == 3  # none restored

    ledger.drop_table("sales.b")
    restored = ledger.undrop_database("sales")
    assert {t.id for t in restored} == ids
    with pytest.raises(DatabaseNotFound):
        ledger.undrop_database("sales")


def test_r7_database_undrop_refused_whole_when_one_table_is_blocked(ledger: Ledger, clock: ManualClock) -> None:
    clock.set(at(10))
    for n in ("sales.a", "sales.b"):
        ledger.create_table(n)
    dropped = ledger.drop_database("sales")
    clock.set(at(100))
    ledger.advance_watermark(dropped[0].dropped_at, scope=f"table:{dropped[0].id}")
    with pytest.raises(UndropBlocked):
        ledger.undrop_database("sales")
    assert {t.state for t in ledger.dropped_tables(database="sales")} == {"blocked", "dropped"}
    assert ledger.undrop_table(dropped[1].name).id == dropped[1].id  # the other one alone is fine


# --- R8 purged is final --------------------------------------------------------------------

def test_r8_purged_instance_is_never_undropped_and_stays_in_history(ledger: Ledger, clock: ManualClock) -> None:
    dropped = drop_at(ledger, clock, "sales.orders", 10)
    clock.set(at(100))
    ledger.advance_watermark(dropped.dropped_at)
    ledger.record_purge(dropped.id, run_id="run1", files=3, bytes=300)
    count = ledger.event_count()
    for attempt in (lambda: ledger.undrop_table("sales.orders"),
                    lambda: ledger.undrop_table("sales.orders", table_id=dropped.id),
                    lambda: ledger.undrop_table("sales.orders", table_id=dropped.id, new_name="x.y")):
        with pytest.raises(UndropBlocked, match="purged"):
            attempt()
    assert ledger.event_count() == count
    assert ledger.dropped_tables() == []
    assert ledger.instance(dropped.id).state == "purged"
    assert [e.type for e in ledger.history("sales.orders")] == [
        "TableCreated", "TableDropped", "TablePurged"]


def test_r8_purge_of_restorable_table_is_refused(ledger: Ledger, clock: ManualClock) -> None:
    from ledger.errors import PurgeRefused
    dropped = drop_at(ledger, clock, "sales.orders", 10)
    with pytest.raises(PurgeRefused, match="still restorable"):
        ledger.record_purge(dropped.id, run_id="run1", files=0, bytes=0)


# --- R10 nothing lost ----------------------------------------------------------------------

@pytest.mark.sqlite_only
def test_r10_ledger_file_is_wal_with_full_sync(ledger: Ledger) -> None:
    settings = ledger.store.settings()  # as SQLite reports them on the ledger's own connection
    assert settings["journal_mode"] == "wal"
    assert settings["synchronous"] == "FULL"


def test_r10_event_durable_when_call_returns_even_if_process_dies(tmp_path: Path) -> None:
    """A writer that is killed right after a command returns (no close, no exit handlers)
    still leaves that command's event in the file."""
    path = tmp_path / "ledger.db"
    script = textwrap.dedent(f"""
        import os, sys
        from ledger import Ledger
        led = Ledger.open({str(path)!r})
        led.create_table("sales.orders")
        print("returned", flush=True)
        os.kill(os.getpid(), 9)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=Path(__file__).parent.parent)
    assert result.returncode == -9 and "returned" in result.stdout
    with Ledger.open(path) as led:
        assert led.table("sales.orders").is_live
        assert led.verify().events == 1


def test_r10_other_processes_appends_are_folded_incrementally(ledger_path: Path, clock: ManualClock) -> None:
    reader = Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL)
    reader.create_table("a.one")
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_create_tables, args=(str(ledger_path), ["a.two", "a.three"]))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert [t.name for t in reader.tables()] == ["a.one", "a.three", "a.two"]
    reader.verify()


def _create_tables(path: str, names: list[str]) -> None:
    with Ledger.open(path) as led:
        for name in names:
            led.create_table(name)


@pytest.mark.sqlite_only
def test_r10_stale_or_damaged_snapshot_is_rebuilt_from_the_log(ledger_path: Path, clock: ManualClock) -> None:
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, snapshot_every=5) as led:
        for i in range(12):
            led.create_table(f"a.t{i}")
        snap_seq = led.store.latest_generation().seq
        assert snap_seq >= 5
        expected = led.state
    raw = sqlite3.connect(ledger_path)
    # Every stored entry damaged (its CRC no longer matches): found as soon as one is read.
    raw.execute("UPDATE snapshot_entries SET value = CAST(x'00000000' || substr(value, 5) AS BLOB) WHERE value IS NOT NULL")
    raw.commit()
    raw.close()
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        assert led.table("a.t3").name == "a.t3"
        assert led.runner.cache.snapshot_seq == 12  # rebuilt from the log, and stored afresh
        assert led.state == expected
        assert led.verify().events == 12
    raw = sqlite3.connect(ledger_path)
    raw.execute("UPDATE snapshot_generations SET head = ?", (b'{"not": "a catalog"}',))
    foreign = raw.execute("SELECT max(gen) FROM snapshot_generations").fetchone()[0]
    raw.commit()
    raw.close()
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        # A head this release did not write is not trusted: the log is folded, and the snapshot
        # stored afresh in its place (it used to stay, and every open folded the whole log).
        assert led.store.latest_generation().gen > foreign
        assert led.runner.cache.snapshot_seq == 12
        assert led.state == expected
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        assert led.runner.cache.snapshot_seq == 12 and led.state == expected


def test_r10_snapshot_speeds_open_and_matches_fold(ledger_path: Path, clock: ManualClock) -> None:
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, snapshot_every=10) as led:
        for i in range(25):
            led.create_table(f"a.t{i}")
            if i % 3 == 0:
                led.drop_table(f"a.t{i}")
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        assert led.runner.cache.snapshot_seq > 0
        report = led.verify()
        assert report.snapshot_seq == led.runner.cache.snapshot_seq
        assert report.live == 25 - 9 and report.dropped == 9


def test_r10_crash_leaves_no_partial_command(tmp_path: Path) -> None:
    """A multi-event append killed before commit leaves none of its events."""
    path = tmp_path / "ledger.db"
    Ledger.open(path).close()
    script = textwrap.dedent(f"""
        import os
        from ledger.persistence.contract import NewEvent
        from ledger.persistence.sqlite import SQLiteStore
        class Killer(SQLiteStore):
            def insert_rows(self, db, rows):
                super().insert_rows(db, rows)
                os.kill(os.getpid(), 9)   # after the rows, before COMMIT
        store = Killer({str(path)!r})
        store.append([NewEvent("s", "TableCreated", 1, "{{}}")] * 3, {{}}, 1, "x")
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parent.parent)
    assert result.returncode == -9
    with Ledger.open(path) as led:
        assert led.event_count() == 0
        led.verify()


def test_unknown_event_type_is_refused_as_newer_release(ledger_path: Path, clock: ManualClock) -> None:
    from ledger import IncompatibleLedger
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        led.create_table("a.t")
    forge(ledger_path, stream="catalog", version=2, type="TableTeleported", time=9999999999999999,
          actor="future", payload="{}")
    with pytest.raises(IncompatibleLedger, match="TableTeleported.*upgrade"):
        Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL)



def test_r8_r10_purged_instances_archived_by_a_snapshot_stay_final(ledger_path: Path, clock: ManualClock) -> None:
    """After a snapshot moves purged instances to the archive, a reopened ledger still
    refuses their undrop with the full message, knows their ids, and equals a fresh fold."""
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, snapshot_every=1) as led:
        purged = drop_at(led, clock, "sales.orders", 10)
        drop_at(led, clock, "sales.orders", 20)
        clock.set(at(100))
        led.advance_watermark(purged.dropped_at)
        led.record_purge(purged.id, run_id="r1", files=1, bytes=10)
        led.create_table("sales.more")  # one more event, so a snapshot lands after the purge
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        state = led.state
        assert purged.id in state.tables.archive.ids and purged.id not in state.tables.instances
        with pytest.raises(UndropBlocked, match=f"{purged.id}.*purged at"):
            led.undrop_table("sales.orders", table_id=purged.id)
        assert led.instance(purged.id).state == "purged"
        assert led.undrop_table("sales.orders").id != purged.id  # the newer drop is fine
        from ledger.core.model import decide
        from ledger.core.tables import CreateTable
        with pytest.raises(TableExists, match="already taken"):
            decide(led.state, CreateTable("sales.reuse", purged.id))
        assert led.verify().purged == 1


# --- defects found by trying it as a new user would (each test failed before its fix) ---------

def test_r10_another_warehouse_is_refused_and_a_move_is_a_recorded_command(tmp_path: Path, clock: ManualClock) -> None:
    """Opening an existing ledger with another root used to write tables there, where no
    vacuum looked (it then recorded them purged with 0 files and left the files for ever)."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        home = Path(led.create_table("sales.orders").location)
        home.mkdir(parents=True)
        (home / "part-0.parquet").write_bytes(b"x" * 10)
        count = led.event_count()
    other = tmp_path / "other"
    with pytest.raises(WarehouseMismatch, match=rf"keeps its tables under {tmp_path}/warehouse, not {other}.*"
                                                r"move-warehouse"):
        Ledger.open(path, warehouse=other, clock=clock)
    assert not other.exists()

    with Ledger.open(path, clock=clock, actor="ops") as led:  # not yet copied: refused, nothing recorded
        with pytest.raises(InvalidArgument, match=rf"the new warehouse root {other} does not exist: copy the "
                                                  rf"warehouse's files there first \(from {tmp_path}/warehouse\)"):
            led.move_warehouse(other)
        assert led.event_count() == count and led.warehouse == str(tmp_path / "warehouse")
    shutil.copytree(tmp_path / "warehouse", other)  # the files are copied, then the move recorded
    with Ledger.open(path, clock=clock, actor="ops") as led:
        assert led.event_count() == count
        assert led.move_warehouse(other) == str(other)
        assert [(e.type, e.actor) for e in led.history()][-1] == ("WarehouseMoved", "ops")
    with Ledger.open(path, warehouse=other, clock=clock) as led:  # the recorded root now
        assert led.table("sales.orders").location == str(other / home.name)
        led.drop_table("sales.orders")
        clock.advance(timedelta(days=8))
        plan = led.start_vacuum().plan
        assert plan.root == str(other)
        assert [location(plan.root, t.path) for t in plan.purges] == [str(other / home.name)]
        # The vacuum looks where the files are.
        assert os.path.exists(location(plan.root, plan.purges[0].path) + "/part-0.parquet")
    with pytest.raises(WarehouseMismatch):
        Ledger.open(path, warehouse=tmp_path / "warehouse", clock=clock)


def test_r10_open_without_create_refuses_a_missing_ledger_and_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "tenant-typo.db"
    with pytest.raises(LedgerNotFound, match="there is no ledger at .*tenant-typo.db: check the path"):
        Ledger.open(typo, create=False)
    assert list(tmp_path.iterdir()) == []


def test_r7_database_undrop_refused_when_one_table_was_restored_on_its_own(ledger: Ledger, clock: ManualClock) -> None:
    """create d.a d.b d.c; drop database d; undrop d.a; drop d.a; undrop database d used to
    restore d.b and d.c and leave d.a dropped, silently. All or none: refused, naming d.a and
    how to restore tables by id; nothing changes."""
    clock.set(at(10))
    ids = {n: ledger.create_table(n).id for n in ("d.a", "d.b", "d.c")}
    ledger.drop_database("d")
    clock.set(at(20))
    ledger.undrop_table("d.a")
    ledger.drop_table("d.a")
    count = ledger.event_count()
    with pytest.raises(DatabaseChanged) as refused:
        ledger.undrop_database("d")
    message = str(refused.value)
    assert f"d.a (id {ids['d.a']}) was restored on its own and dropped again" in message
    assert f"undrop d.a --id {ids['d.a']}" in message and f"undrop d.b --id {ids['d.b']}" in message
    assert ledger.event_count() == count and ledger.tables() == []
    assert {t.name for t in ledger.dropped_tables()} == {"d.a", "d.b", "d.c"}
    for name in ("d.b", "d.c"):  # what the message says to do
        assert ledger.undrop_table(name, table_id=ids[name]).is_live


def test_r4_a_vacuum_never_takes_over_a_live_run_and_each_run_records_what_it_deleted(
        ledger_path: Path, clock: ManualClock) -> None:
    """A second vacuum started 70 ms after the first used to take over the first's run while it
    was still deleting; the first then printed "deleted 3315 files" and the log recorded 0.
    Now a run holds a lease it renews: a second vacuum leaves it alone, and takes over only
    a run whose lease has run out."""
    a = Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, actor="vacuum-a")
    b = Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, actor="vacuum-b")
    files = 0
    for t in range(3):
        folder = Path(a.create_table(f"sales.t{t}").location)
        folder.mkdir(parents=True)
        for f in range(5):
            (folder / f"part-{f}").write_bytes(b"x" * 7)
            files += 1
        a.drop_table(f"sales.t{t}")
    clock.advance(timedelta(days=8))
    first = a.start_vacuum(lease="10m")
    clock.advance(timedelta(milliseconds=70))
    second = b.start_vacuum().plan
    assert second.purges == () and second.run_id is None and second.busy == (first.run_id,)

    clock.advance(timedelta(minutes=8))
    assert first.renew(lease="10m")
    clock.advance(timedelta(minutes=8))  # 16 minutes after the start, but renewed at 8
    assert b.plan_vacuum().busy == (first.run_id,)

    from spark_ops.executor.fs import purge
    root = first.plan.root
    deleted = [replace(purge(root, location(root, t.path), dry_run=False), item=t) for t in first.plan.purges]
    assert first.finish(deleted) == 3
    [finished] = [e for e in a.history() if e.type == "VacuumFinished"]
    assert (finished.data["files"], finished.data["bytes"], finished.data["purged"]) == (files, files * 7, 3)
    a.close()
    b.close()


def test_r4_a_run_whose_lease_ran_out_is_taken_over(ledger_path: Path, clock: ManualClock) -> None:
    a = Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, actor="vacuum-a")
    a.create_table("sales.t")
    a.drop_table("sales.t")
    clock.advance(timedelta(days=8))
    first = a.start_vacuum(lease="10m")
    clock.advance(timedelta(minutes=10, microseconds=1))  # silent for a whole lease: taken to be dead
    second = a.start_vacuum().plan
    assert second.resumes == (first.run_id,) and [t.resumed for t in second.purges] == [True]
    assert first.renew() is False  # the first learns it no longer holds its tables
    a.close()


def test_r10_a_vacuum_run_id_chosen_before_the_start_can_release_its_lease(
        ledger_path: Path, clock: ManualClock) -> None:
    """A caller that must release a run's lease if it is stopped (the CLI's Ctrl-C) picks the run
    id before the start: a release before the start lands is refused and records nothing; once
    it lands, the release frees the run's tables for the next vacuum at once. An id on record,
    running or finished, is never given to another run."""
    from ledger import InvalidArgument
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        table = led.create_table("sales.orders")
        led.drop_table("sales.orders")
        run_id = new_run_id()
        with pytest.raises(InvalidArgument, match=f"vacuum run {run_id} is unknown"):
            VacuumRun.of(led, run_id).release()  # stopped before the start landed: nothing to release
        assert led.event_count() == 2

        run = led.start_vacuum(retention="0s", override_floor=True, run_id=run_id)
        assert run.run_id == run.plan.run_id == run_id and [t.table_id for t in run.plan.purges] == [table.id]
        events = led.event_count()
        with pytest.raises(InvalidArgument, match=f"vacuum run id '{run_id}' is taken"):
            led.start_vacuum(retention="0s", override_floor=True, run_id=run_id)
        assert led.event_count() == events

        assert VacuumRun.of(led, run_id).release()  # stopped right after: the lease goes at once
        clock.advance(timedelta(seconds=1))
        nxt = led.start_vacuum(retention="0s", override_floor=True, run_id="nightly-2026-11-23")
        assert nxt.run_id == nxt.plan.run_id == "nightly-2026-11-23"
        assert [t.table_id for t in nxt.plan.purges] == [table.id]
        assert nxt.finish([Result(nxt.plan.purges[0], 0, 0)]) == 1
        with pytest.raises(InvalidArgument, match="'nightly-2026-11-23' is taken"):
            led.start_vacuum(run_id="nightly-2026-11-23")  # finished: still its id for good
        led.verify()


def test_r16_a_second_run_under_an_id_on_record_is_a_corrupt_log(ledger_path: Path, clock: ManualClock) -> None:
    """The fold re-checks that a run id is used once: a forged start under a finished run's id
    would make that run's purges and history ambiguous."""
    from ledger import LedgerCorrupt
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        led.create_table("sales.orders")
        led.drop_table("sales.orders")
        run = led.start_vacuum(retention="0s", override_floor=True, run_id="nightly")
        run.finish([Result(run.plan.purges[0], 0, 0)])
        reader = Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL)
    seq = forge(ledger_path, stream="vacuums", type="VacuumStarted", schema_version=2,
                payload='{"run_id": "nightly", "table_ids": []}')
    with pytest.raises(LedgerCorrupt, match=f"event #{seq} starts vacuum nightly, an id an earlier run already has"):
        Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL)
    with pytest.raises(LedgerCorrupt, match=f"event #{seq} starts vacuum nightly"):
        reader.verify()
    reader.close()
