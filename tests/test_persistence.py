"""The wall between meaning and mechanism (``ledger.core`` and ``ledger.persistence``).

The core decides on a state and reads no storage of its own: a reopened ledger's state
reads its stored snapshot lazily, but only through the entries the persistence package put
under its maps, and a state read in once decides with the store closed. A stored snapshot
that another process supersedes stays readable for its readers (the grace period), and one
that cannot be read heals from the log: no decision or query ever meets a vanished snapshot.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest

from ledger import LEDGER, Ledger, ManualClock, UndropBlocked
from ledger.core.guard import AdvanceWatermark
from ledger.core.model import State, decide, fold_rows
from ledger.core.tables import CreateTable, DropTable, UndropTable
from ledger.persistence.contract import Generation
from ledger.persistence.sqlite import SQLiteStore

from .conftest import T0


class CountingStore(SQLiteStore):
    """A SQLite store that counts what is read from it: events, and stored snapshot entries."""

    def __init__(self, path: str | Path, **options: Any) -> None:
        super().__init__(str(path), **options)
        self.event_reads = 0
        self.entry_reads = 0

    def read(self, *args: Any, **kwargs: Any) -> Iterator[tuple]:
        for row in super().read(*args, **kwargs):
            self.event_reads += 1
            yield row

    def generation_part(self, generation: Generation, part: str) -> Any:
        inner, store = super().generation_part(generation, part), self

        class Counted:
            def get(self, key: str) -> bytes | None:
                store.entry_reads += 1
                return inner.get(key)

            def scan(self) -> Iterator[tuple[str, bytes]]:
                for item in inner.scan():
                    store.entry_reads += 1
                    yield item
        return Counted()


def _catalog(path: Path, clock: ManualClock, tables: int = 300) -> None:
    """Many tables, two dropped (one behind the ledger's watermark), and a stored snapshot."""
    with Ledger.open(path, clock=clock, snapshot_every=10**6) as led:
        for i in range(tables):
            led.create_table(f"db.t{i}")
        led.drop_table("db.t1")
        clock.advance(timedelta(hours=1))
        led.advance_watermark(led.now())
        led.drop_table("db.t2")
        led.runner.cache.save_snapshot()


COMMANDS = [UndropTable("db.t1"), UndropTable("db.t2"), DropTable("db.t7"), CreateTable("db.t1", "f" * 16),
            AdvanceWatermark(LEDGER, 2_000_000_000_000_000, 2_000_000_000_000_001)]


def _decisions(state: State) -> list[Any]:
    found = []
    for command in COMMANDS:
        try:
            found.append(decide(state, command))
        except Exception as exc:  # a refusal is a decision too
            found.append((type(exc), str(exc)))
    return found


def test_r16_the_core_decides_on_a_reopened_ledger_with_the_store_closed(tmp_path: Path) -> None:
    """A state read in (by the persistence package) decides every command with the store closed,
    exactly as a fold of the log does: the core reads nothing itself."""
    path, clock = tmp_path / "ledger.db", ManualClock(T0)
    _catalog(path, clock)
    plain = SQLiteStore(str(path))
    from_the_log = fold_rows(State(), plain.read(0))
    plain.close()
    led = Ledger(CountingStore(path), clock=clock)
    state = led.runner.cache.full_state()
    led.close()
    with pytest.raises(sqlite3.ProgrammingError):
        led.store.connection.execute("SELECT 1")  # closed: nothing can be read from it any more
    assert _decisions(state) == _decisions(from_the_log)
    assert _decisions(state)[0][0] is UndropBlocked  # db.t1 is behind the watermark


def test_r16_an_undrop_on_a_reopened_ledger_reads_a_dozen_entries_through_persistence(tmp_path: Path) -> None:
    """Lazily: the decision reads only what it looks at, and only through the entries the state
    cache put under the state's maps (``persistence.lazy``); no event is read to decide."""
    path, clock = tmp_path / "ledger.db", ManualClock(T0)
    _catalog(path, clock, tables=2000)
    store = CountingStore(path)
    led = Ledger(store, clock=clock)
    try:
        state = led.runner.held
        events, entries = store.event_reads, store.entry_reads
        decision = decide(state, UndropTable("db.t2"))
        assert store.event_reads == events and 0 < store.entry_reads - entries <= 20
        read = store.entry_reads
        store.close()  # everything the decision looked at is held now: deciding it again reads nothing
        assert decide(state, UndropTable("db.t2")) == decision and store.entry_reads == read
    finally:
        led.close()


def test_r16_a_reader_of_a_generation_goes_on_reading_it_while_others_store_newer_ones(tmp_path: Path) -> None:
    """Another process stores two new full generations (a new chain each) while this one holds a
    state read lazily from the first: generations are kept, so its reads still answer from that
    one (no heal, no log replay), and its next look folds what the other wrote."""
    path, clock = tmp_path / "ledger.db", ManualClock(T0)
    _catalog(path, clock)
    store = CountingStore(path)
    a = Ledger(store, clock=clock)
    b = Ledger.open(path, clock=clock)
    try:
        held, read_from = a.runner.held, a.runner.cache.generation
        for i in range(2):
            b.create_table(f"other.t{i}")
            b.runner.cache.rebuild(fold_rows(State(), b.store.read(0)))  # a fresh chain
        assert len(b.store.generations()) == 3
        events = store.event_reads
        assert held.tables.live("db.t5") is not None and held.tables.instance(held.tables.bindings["db.t9"])
        assert store.event_reads == events  # answered by the generation it read, not healed from the log
        assert [t.name for t in a.tables(database="other")] == ["other.t0", "other.t1"]
        assert a.runner.cache.generation == read_from
    finally:
        a.close()
        b.close()


def test_r16_a_snapshot_deleted_under_a_reader_heals_from_the_log_inside_the_decision(tmp_path: Path) -> None:
    """Past the grace period (or deleted by ``verify``), a held generation cannot answer: the part
    a decision reads is taken from the log there and then, the decision stands, and the next look
    stores a fresh generation."""
    path, clock = tmp_path / "ledger.db", ManualClock(T0)
    _catalog(path, clock)
    a, b = Ledger.open(path, clock=clock), Ledger.open(path, clock=clock)
    try:
        state = a.runner.held
        b.store.delete_generations()
        with pytest.raises(UndropBlocked):
            decide(state, UndropTable("db.t1"))  # the guard holds: decided on what the log says
        assert b.store.latest_generation() is None
        assert a.undrop_table("db.t2").name == "db.t2"
        assert a.store.latest_generation() is not None
        a.verify()
    finally:
        a.close()
        b.close()


def test_r16_r17_stored_states_are_the_same_bytes_whichever_process_or_writer_made_them(tmp_path: Path) -> None:
    """What lets verify compare stored states by their bytes: generations written by another
    process (its own string hashing, its own map orders) by ``maintain``'s fold from nothing, and
    by the held state here (its maps' changes), are each exactly what this process's fold makes
    of the log at their event. The catalog is big enough (over HOLD_AT instances) for maps held
    in buckets."""
    from ledger.core.fold import HOLD_AT

    path, clock = tmp_path / "l.db", ManualClock(T0)
    with Ledger.open(path, clock=clock, synchronous="OFF") as led:
        for i in range(HOLD_AT + 300):
            led.create_table(f"db{i % 7}.t{i}")
            if i % 5 == 0:
                led.drop_table(f"db{i % 7}.t{i}")
            if i % 50 == 0:
                clock.advance(timedelta(seconds=1))
        led.undrop_table("db0.t0")
    with sqlite3.connect(path) as conn:
        for table in ("snapshots", "snapshot_entries", "snapshot_generations"):
            conn.execute(f"DELETE FROM {table}")
    script = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r}); "
              f"from ledger import Ledger; Ledger.open({str(path)!r}, create=False, history_every=1000).maintain()")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    with Ledger.open(path, create=False, snapshot_every=100) as led:
        assert len(led.store.generations()) >= 5
        for i in range(150):
            led.create_table(f"late.t{i}")  # the held state stores a delta of maintain's last one
        assert len(led.store.generations()) >= 6
        report = led.verify()
        assert report.generations_compared == len(led.store.generations()) and report.generations_discarded == 0
        assert len(led.runner.held.tables.instances) > HOLD_AT



def test_r16_stored_states_laid_out_by_an_earlier_release_are_dropped_not_misread(tmp_path: Path) -> None:
    """Before 0.4 a stored state's entries were kept by key; now by generation (written in order,
    read in runs). Opening such a file writable drops them (they are caches) and keeps the log."""
    path, clock = tmp_path / "ledger.db", ManualClock(T0)
    _catalog(path, clock)
    with Ledger.open(path, clock=clock) as led:
        truth = led.tables()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE snapshot_entries")
        conn.execute("CREATE TABLE snapshot_entries (part TEXT NOT NULL, key TEXT NOT NULL, gen INTEGER NOT NULL, "
                     "value BLOB, PRIMARY KEY (part, key, gen)) WITHOUT ROWID")
        conn.execute("INSERT INTO snapshot_entries VALUES ('tables.bindings', 'db.t1', 1, x'00')")
    with Ledger.open(path, clock=clock, create=False) as led:
        assert led.tables() == truth and led.runner.cache.generation is None
        with sqlite3.connect(path) as conn:
            pk = [row[2] for row in conn.execute("PRAGMA index_xinfo('snapshot_entries_by_key')") if row[5]]
            assert pk[:3] == ["part", "key", "gen"] and conn.execute("SELECT count(*) FROM snapshot_entries "
                                                                     "WHERE value = x'00'").fetchone() == (0,)
        led.runner.cache.save_snapshot()
        assert led.store.latest_generation() is not None and led.verify().generations_discarded == 0


def test_what_a_command_builds_or_returns_stays_frozen_though_built_without_slots(tmp_path: Path) -> None:
    """A command's own values are attrs classes without slots (half the instructions to build):
    still frozen, so a value returned to a caller, or held, never changes afterwards."""
    import attrs
    with Ledger.open(tmp_path / "l.db", clock=ManualClock(T0)) as led:
        created = led.create_table("db.t")
        prepared = led.runner.prepare(lambda now: AdvanceWatermark(LEDGER, now, now))
        values = [(created, "state"), (prepared, "seq"), (prepared.decision, "result"),
                  (AdvanceWatermark(LEDGER, 1, 2), "to"), (CreateTable("db.u", "a" * 16), "name"),
                  (led.runner.held, "seq"), (led.runner.held.guard, "watermarks"), (led.runner.held.tables, "bindings")]
        for value, field in values:
            with pytest.raises(attrs.exceptions.FrozenInstanceError):
                setattr(value, field, None)
        assert created.state == "live" and prepared.seq == 1


def test_the_default_clock_is_read_as_system_clock_reads_it(tmp_path: Path) -> None:
    """A ledger on the system clock reads the time without a datetime (a command's hot path):
    the same floor to whole microseconds as ``system_clock``, so between two of its readings."""
    from ledger.clock import read_clock, system_clock
    with Ledger.open(tmp_path / "l.db") as led:
        for _ in range(100):
            before = read_clock(system_clock)
            reading = led.runner.reading()
            assert before <= reading <= read_clock(system_clock)
