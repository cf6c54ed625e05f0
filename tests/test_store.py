"""The SQLite backend (``ledger.persistence.sqlite``): the backend-neutral contract
(``tests/store_contract.py``) on both flavours (a file in ``tmp_path`` and ``":memory:"``),
and what only SQLite has (triggers, synchronous levels, entry checks); behaviour that only
a file can have (WAL, format version, foreign files, several connections, several
processes) on the file flavour only.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from ledger import Ledger
from ledger.chain import ChainCheck, event_hash
from ledger.errors import Conflict, IncompatibleLedger, LedgerCorrupt
from ledger.persistence.contract import NewEvent, SnapshotGone, Store
from ledger.persistence.sqlite import FORMAT_VERSION, SQLiteStore

from .store_contract import ACTOR, T, EventStoreContract, append_n, event, rows_of, seqs

FORMAT1 = Path(__file__).parent / "data" / "format1-0.1.0.db"


class SQLiteOnly:
    """What only the SQLite backend has: triggers, synchronous levels, CRCs it checks."""

    make_store: Any

    @pytest.mark.parametrize("statement", [
        "UPDATE events SET payload = '{\"x\":2}' WHERE seq = 1",
        "UPDATE events SET seq = 10",
        "DELETE FROM events WHERE seq = 1",
        "DELETE FROM events",
    ])
    def test_the_events_table_refuses_update_and_delete(self, store: SQLiteStore, statement: str) -> None:
        append_n(store, 2)
        before = rows_of(store)

        # Through the raw connection SQLite's own error arrives untranslated: the trigger's
        # RAISE(ABORT) is an IntegrityError (store methods would translate it).
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            store.connection.execute(statement)

        assert rows_of(store) == before
        store.append([event()], {"s1": 2}, T + 10, ACTOR)  # and the store still works
        assert store.count() == 3

    # --- synchronous levels -------------------------------------------------------------------

    @pytest.mark.parametrize("level, number", [
        (None, 2), ("FULL", 2), ("NORMAL", 1), ("EXTRA", 3), ("OFF", 0), ("normal", 1),
    ])
    def test_synchronous_reads_back_as_configured(self, tmp_path: Path, level: str | None,
                                                   number: int) -> None:
        store = self.make_store(tmp_path, **({} if level is None else {"synchronous": level}))
        try:
            assert store.connection.execute("PRAGMA synchronous").fetchone()[0] == number
            assert store.synchronous == (level or "FULL").upper()
        finally:
            store.close()

    @pytest.mark.parametrize("level", ["", "FAST", "2", "FULLY"])
    def test_an_invalid_synchronous_level_is_a_value_error(self, tmp_path: Path, level: str) -> None:
        with pytest.raises(ValueError, match="synchronous must be one of OFF, NORMAL, FULL, EXTRA"):
            self.make_store(tmp_path, synchronous=level)
        assert list(tmp_path.iterdir()) == []  # refused before any file was made

    def test_an_entry_that_fails_its_check_is_snapshot_gone(self, store: SQLiteStore) -> None:
        full = store.write_generation(10, 8, b"h", [("p", "a", b"1")], extends=None)
        store.connection.execute("UPDATE snapshot_entries SET value = CAST(x'00000000' || value AS BLOB)")
        part = store.generation_part(full, "p")
        with pytest.raises(SnapshotGone, match="fails its check"):
            part.get("a")

    def test_meta_records_the_format_version(self, store: SQLiteStore) -> None:
        assert store.get_meta("format_version") == str(FORMAT_VERSION)

    # --- an append on a head given by the caller (``expected_head``) -----------------------------

    def test_an_append_rolled_back_with_its_exclusive_transaction_is_never_written_on(self,
                                                                                    store: SQLiteStore) -> None:
        store.append([event()], {}, T, ACTOR)
        with pytest.raises(RuntimeError), store.exclusive():
            store.append([event("s1", '{"gone":1}')], {"s1": 1}, T + 1, ACTOR, expected_head=1)
            raise RuntimeError("the caller gave up: its transaction rolls back")

        store.append([event("s1", '{"x":2}')], {"s1": 1}, T + 2, ACTOR, expected_head=1)
        store.append([event("s1", '{"x":3}')], {"s1": 2}, T + 3, ACTOR, expected_head=2)

        assert [(r[0], r[2], r[5], r[7]) for r in rows_of(store)] == [
            (1, 1, T, '{"x":1}'), (2, 2, T + 2, '{"x":2}'), (3, 3, T + 3, '{"x":3}')]
        assert_chained(store)

    # --- a single event on the tip (the last row this connection appended) ----------------------

    def test_a_single_event_on_the_tip_is_one_statement(self, store: SQLiteStore) -> None:
        """Once this connection has appended alone, the next single event that follows its own is
        one INSERT, its own transaction; a first append, or one on a head the caller did not see
        from here, reads the head in a transaction."""
        statements: list[str] = []
        store.connection.set_trace_callback(statements.append)
        store.append([event("s1")], {"s1": 0}, T, ACTOR, expected_head=0)
        first = list(statements)
        statements.clear()
        store.append([event("s1", '{"x":2}')], {"s1": 1}, T + 1, ACTOR, expected_head=1)
        store.connection.set_trace_callback(None)

        assert first[0] == "BEGIN IMMEDIATE" and first[-1] == "COMMIT" and len(first) == 4
        assert len(statements) == 1 and statements[0].startswith("INSERT INTO events")
        assert [(r[0], r[2], r[5]) for r in rows_of(store)] == [(1, 1, T), (2, 2, T + 1)]
        assert_chained(store)

    def test_a_head_behind_the_tip_is_not_written_past(self, store: SQLiteStore) -> None:
        """The tip is this connection's memory, not the log: should the head be anything else (here
        the last row taken out by hand, the append-only trigger lifted), the event follows the head
        that is there, with no gap in the sequence and chained to it (R16)."""
        store.append([event("s1")], {"s1": 0}, T, ACTOR, expected_head=0)
        store.append([event("s2")], {"s2": 0}, T + 1, ACTOR, expected_head=1)  # the tip: event 2
        db = store.connection
        db.execute("DROP TRIGGER events_no_delete")
        db.execute("DELETE FROM events WHERE seq = 2")
        store._create_triggers()

        store.append([event("s1", '{"x":2}')], {"s1": 1}, T + 2, ACTOR, expected_head=2)

        assert [(r[0], r[1], r[2]) for r in rows_of(store)] == [(1, "s1", 1), (2, "s1", 2)]
        assert_chained(store)


    def test_a_head_replaced_under_the_tip_by_as_many_rows_is_not_chained_past(self, store: SQLiteStore) -> None:
        """Should the head be another row of the tip's number (a file restored under the connection,
        a row rewritten by hand), the event chains to the row that is there, not to the tip this
        connection remembers (R16): the statement checks the head's hash, not its number alone."""
        store.append([event("s1")], {"s1": 0}, T, ACTOR, expected_head=0)
        store.append([event("s2")], {"s2": 0}, T + 1, ACTOR, expected_head=1)  # the tip: event 2
        db = store.connection
        first = bytes.fromhex(db.execute("SELECT hash FROM events WHERE seq = 1").fetchone()[0])
        other = (2, "s3", 1, "Thing", 1, T + 5, "someone", '{"x":9}')
        db.execute("DROP TRIGGER events_no_delete")
        db.execute("DELETE FROM events WHERE seq = 2")
        db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (*other, event_hash(first, *other).hex()))
        store._create_triggers()

        store.append([event("s1", '{"x":2}')], {"s1": 1}, T + 2, ACTOR, expected_head=2)

        assert [(r[0], r[1], r[2]) for r in rows_of(store)] == [(1, "s1", 1), (2, "s3", 1), (3, "s1", 2)]
        assert_chained(store)


class TestFileEventStore(SQLiteOnly, EventStoreContract):
    """The contract on a real SQLite file, plus what only a file can do."""

    def make_store(self, tmp_path: Path, **options) -> SQLiteStore:
        return SQLiteStore(str(tmp_path / "events.db"), **options)

    def test_a_file_upgraded_from_format_1_never_takes_a_row_without_its_hash(self, tmp_path: Path) -> None:
        """Its hash column was added by ``ALTER TABLE``, which adds it nullable, so a statement
        whose hash is NULL when the head is not the tip would land there: such a file always
        appends through the transaction that reads the head (here the head taken out by hand
        behind the tip), and every row keeps its hash (R16)."""
        path = tmp_path / "old.db"
        shutil.copy(FORMAT1, path)
        Ledger.open(path).close()  # upgrades it
        store = SQLiteStore(str(path))
        try:
            head = store.count()
            store.append([event("new1")], {"new1": 0}, T, ACTOR, expected_head=head)
            store.append([event("new2")], {"new2": 0}, T + 1, ACTOR, expected_head=head + 1)
            db = store.connection
            db.execute("DROP TRIGGER events_no_delete")
            db.execute("DELETE FROM events WHERE seq = ?", (head + 2,))
            store._create_triggers()

            store.append([event("new1", '{"x":2}')], {"new1": 1}, T + 2, ACTOR, expected_head=head + 2)

            assert [(r[0], r[1], r[2]) for r in rows_of(store, head)] == [(head + 1, "new1", 1), (head + 2, "new1", 2)]
            assert db.execute("SELECT count(*) FROM events WHERE hash IS NULL").fetchone()[0] == 0
            assert_chained(store)
        finally:
            store.close()

    def test_file_stores_are_in_wal_mode(self, store: SQLiteStore, tmp_path: Path) -> None:
        assert store.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        raw = sqlite3.connect(tmp_path / "events.db")  # WAL is a property of the file
        try:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            raw.close()

    def test_appends_are_there_after_reopening(self, store: SQLiteStore, tmp_path: Path) -> None:
        store.append([event("s1"), event("s2")], {}, T, ACTOR)
        store.close()

        again = SQLiteStore(str(tmp_path / "events.db"))
        try:
            assert [(r[0], r[1], r[2], r[5]) for r in rows_of(again)] == [
                (1, "s1", 1, T), (2, "s2", 1, T + 1)]
            again.append([event("s1")], {"s1": 1}, T - 10, ACTOR)  # versions and time go on
            assert again.head() == (3, T + 2)
        finally:
            again.close()

    def test_the_file_says_it_is_a_ledger(self, store: SQLiteStore, tmp_path: Path) -> None:
        store.close()
        raw = sqlite3.connect(tmp_path / "events.db")
        try:
            assert raw.execute("PRAGMA application_id").fetchone()[0] == 0x524C4447
            assert raw.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone() == \
                (str(FORMAT_VERSION),)
        finally:
            raw.close()

    # --- format version and foreign files ------------------------------------------------------

    def _set_format_version(self, path: Path, value: str | None) -> None:
        raw = sqlite3.connect(path)
        try:
            if value is None:
                raw.execute("DELETE FROM meta WHERE key = 'format_version'")
            else:
                raw.execute("UPDATE meta SET value = ? WHERE key = 'format_version'", (value,))
            raw.commit()
        finally:
            raw.close()

    def test_a_newer_format_is_refused_with_a_message_to_upgrade(self, tmp_path: Path) -> None:
        path = tmp_path / "events.db"
        SQLiteStore(str(path)).close()
        self._set_format_version(path, str(FORMAT_VERSION + 1))

        with pytest.raises(IncompatibleLedger) as caught:
            SQLiteStore(str(path))

        message = str(caught.value)
        assert str(path) in message
        assert f"format {FORMAT_VERSION + 1}" in message
        assert "upgrade" in message

    def test_a_missing_or_unreadable_format_version_is_corrupt(self, tmp_path: Path) -> None:
        path = tmp_path / "events.db"
        SQLiteStore(str(path)).close()
        self._set_format_version(path, "one")
        with pytest.raises(LedgerCorrupt, match="format version is missing or unreadable"):
            SQLiteStore(str(path))

        self._set_format_version(path, None)
        with pytest.raises(LedgerCorrupt, match="format version is missing or unreadable"):
            SQLiteStore(str(path))

    def test_a_plain_sqlite_file_is_not_a_ledger(self, tmp_path: Path) -> None:
        path = tmp_path / "other.db"
        raw = sqlite3.connect(path)
        raw.execute("CREATE TABLE people (name TEXT)")
        raw.execute("INSERT INTO people VALUES ('ada')")
        raw.commit()
        raw.close()

        with pytest.raises(LedgerCorrupt, match="is an SQLite file but not a retention-ledger ledger"):
            SQLiteStore(str(path))

        raw = sqlite3.connect(path)
        try:  # its data is untouched and no ledger schema was added
            assert raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == \
                [("people",)]
            assert raw.execute("SELECT name FROM people").fetchall() == [("ada",)]
        finally:
            raw.close()

    def test_refusing_a_plain_sqlite_file_leaves_its_journal_mode_alone(self, tmp_path: Path) -> None:
        path = tmp_path / "other.db"
        raw = sqlite3.connect(path)
        raw.execute("CREATE TABLE people (name TEXT)")
        raw.commit()
        raw.close()

        with pytest.raises(LedgerCorrupt):
            SQLiteStore(str(path))

        raw = sqlite3.connect(path)
        try:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        finally:
            raw.close()

    @pytest.mark.parametrize("content", [
        b"this is not an SQLite database, just some text\n" * 3,
        b"\x00\xff" * 4096,
        b"SQLite format 3",            # almost the magic header, but short of it
        b"xy",
    ], ids=["text", "binary", "near-magic", "two-bytes"])
    def test_a_garbage_file_is_corrupt_and_left_as_it_was(self, tmp_path: Path, content: bytes) -> None:
        path = tmp_path / "garbage.db"
        path.write_bytes(content)

        with pytest.raises(LedgerCorrupt) as caught:
            SQLiteStore(str(path))

        assert str(path) in str(caught.value)
        assert path.read_bytes() == content

    def test_a_one_byte_garbage_file_is_corrupt_too(self, tmp_path: Path) -> None:
        path = tmp_path / "garbage.db"
        path.write_bytes(b"\n")

        with pytest.raises(LedgerCorrupt):
            SQLiteStore(str(path)).close()
        assert path.read_bytes() == b"\n"

    def test_an_empty_file_is_refused_not_taken_for_a_new_ledger(self, tmp_path: Path) -> None:
        """A file we did not write (an empty one too) never silently becomes a ledger."""
        path = tmp_path / "empty.db"
        path.touch()
        with pytest.raises(LedgerCorrupt, match="is an empty file, not a ledger"):
            SQLiteStore(str(path))
        assert path.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]

    # --- several connections ------------------------------------------------------------------

    @pytest.fixture
    def two(self, tmp_path: Path) -> Iterator[tuple[SQLiteStore, SQLiteStore]]:
        """Two connections to one file, as two processes have."""
        path = str(tmp_path / "events.db")
        a, b = SQLiteStore(path), SQLiteStore(path)
        try:
            yield a, b
        finally:
            a.close()
            b.close()

    def test_two_stores_on_one_file_see_each_others_appends(self, two: tuple[SQLiteStore, SQLiteStore]) -> None:
        a, b = two
        a.append([event("s1")], {}, T, ACTOR)
        assert b.count() == 1 and b.version("s1") == 1
        b.append([event("s1")], {"s1": 1}, T - 5, ACTOR)  # b's time follows a's log
        assert a.count() == 2 and a.version("s1") == 2
        assert seqs(rows_of(a)) == seqs(rows_of(b)) == [1, 2]
        assert a.head() == b.head() == (2, T + 1)

    def test_a_conflict_between_two_connections_is_detected(self, two: tuple[SQLiteStore, SQLiteStore]) -> None:
        a, b = two
        a.append([event("s1")], {}, T, ACTOR)
        seen_by_a, seen_by_b = a.version("s1"), b.version("s1")   # both read version 1

        a.append([event("s1", '{"by":"a"}')], {"s1": seen_by_a}, T + 1, ACTOR)
        with pytest.raises(Conflict) as caught:
            b.append([event("s1", '{"by":"b"}')], {"s1": seen_by_b}, T + 1, ACTOR)

        assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("s1", 1, 2)
        assert [r[7] for r in rows_of(b)] == ['{"x":1}', '{"by":"a"}']

    def test_a_head_another_connection_moved_is_not_written_on(self, two: tuple[SQLiteStore, SQLiteStore]) -> None:
        """a's head is stale once b appends: a's event lands after b's, chained to it, since the stream
        a read has not moved (R4, R16)."""
        a, b = two
        a.append([event("s1")], {}, T, ACTOR)  # a read the log at event 1
        b.append([event("s2")], {}, T + 5, ACTOR)
        a.append([event("s1", '{"by":"a"}')], {"s1": 1}, T + 1, ACTOR, expected_head=1)
        a.append([event("s1", '{"again":"a"}')], {"s1": 2}, T + 2, ACTOR, expected_head=3)

        assert [(r[0], r[1], r[2], r[5]) for r in rows_of(b)] == [
            (1, "s1", 1, T), (2, "s2", 1, T + 5), (3, "s1", 2, T + 6), (4, "s1", 3, T + 7)]
        assert_chained(b)

    def test_a_stream_another_connection_moved_refuses_an_append_on_a_stale_head(
            self, two: tuple[SQLiteStore, SQLiteStore]) -> None:
        a, b = two
        a.append([event("s1")], {}, T, ACTOR)
        b.append([event("s1", '{"by":"b"}')], {"s1": 1}, T + 1, ACTOR, expected_head=1)
        with pytest.raises(Conflict) as caught:
            a.append([event("s1", '{"by":"a"}')], {"s1": 1}, T + 2, ACTOR, expected_head=1)

        assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("s1", 1, 2)
        assert [r[7] for r in rows_of(a)] == ['{"x":1}', '{"by":"b"}']

    def test_a_tip_another_process_appended_after_is_not_trusted(self, store: SQLiteStore, tmp_path: Path) -> None:
        """Another process appends after this connection's tip: an append decided on the tip lands
        after that process's event, chained to it, when the stream it read has not moved, and is
        refused when it has (R4, R16); the tip is not used again until this connection appends alone."""
        store.append([event("s1")], {"s1": 0}, T, ACTOR, expected_head=0)
        store.append([event("s2")], {"s2": 0}, T + 1, ACTOR, expected_head=1)  # the tip: event 2
        other = textwrap.dedent(f"""
            from ledger.persistence.contract import NewEvent
            from ledger.persistence.sqlite import SQLiteStore
            store = SQLiteStore({store.path!r})
            store.append([NewEvent("s2", "Thing", 1, '{{"by":"other"}}')], {{"s2": 1}}, {T + 10}, "other")
            store.close()
        """)
        done = subprocess.run([sys.executable, "-c", other], cwd=Path(__file__).parent.parent)
        assert done.returncode == 0

        with pytest.raises(Conflict) as caught:
            store.append([event("s2", '{"by":"us"}')], {"s2": 1}, T + 2, ACTOR, expected_head=2)
        assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("s2", 1, 2)
        store.append([event("s1", '{"by":"us"}')], {"s1": 1}, T + 3, ACTOR, expected_head=2)

        assert [(r[0], r[1], r[2], r[5], r[7]) for r in rows_of(store)] == [
            (1, "s1", 1, T, '{"x":1}'), (2, "s2", 1, T + 1, '{"x":1}'), (3, "s2", 2, T + 10, '{"by":"other"}'),
            (4, "s1", 2, T + 11, '{"by":"us"}')]
        assert_chained(store)

    def test_several_processes_never_both_win_the_same_version(self, tmp_path: Path) -> None:
        """Real processes, each round: all read the stream's version, then all append on
        the condition that it has not moved. Exactly one wins each round; the rest get a
        Conflict naming the version the winner made."""
        path = str(tmp_path / "events.db")
        SQLiteStore(path).close()  # create the file once, so the workers only race on appends
        workers, rounds = 4, 8
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(workers)
        results = ctx.Queue()
        procs = [ctx.Process(target=_race_worker, args=(path, w, rounds, barrier, results))
                 for w in range(workers)]
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        errors = [o for o in outcomes if isinstance(o, str)]
        assert not errors, errors

        by_round: dict[int, list[tuple]] = {}
        for worker_outcomes in outcomes:
            for round_, worker, expected, outcome in worker_outcomes:
                by_round.setdefault(round_, []).append((worker, expected, outcome))
        for round_, entries in sorted(by_round.items()):
            assert {e[1] for e in entries} == {round_}, "all read the same version"
            winners = [e for e in entries if e[2] == "won"]
            assert len(winners) == 1, (round_, entries)
            assert all(e[2] == ("conflict", "s1", round_, round_ + 1)
                       for e in entries if e[2] != "won"), entries

        store = SQLiteStore(path)
        try:
            rows = rows_of(store)
            assert store.count() == rounds
            assert [(r[1], r[2]) for r in rows] == [("s1", v) for v in range(1, rounds + 1)]
            winners_by_version = {e[1] + 1: f'{{"worker":{e[0]}}}'
                                  for entries in by_round.values() for e in entries if e[2] == "won"}
            assert [r[7] for r in rows] == [winners_by_version[v] for v in range(1, rounds + 1)]
        finally:
            store.close()


def assert_chained(store: SQLiteStore) -> None:
    """Every stored row carries the hash that chains it to the one before (R16)."""
    check = ChainCheck(store.path)
    for row in store.read(with_hash=True):
        check.check(row)
    assert check.seq == store.count()


def _race_worker(path: str, worker: int, rounds: int, barrier, results) -> None:
    """Run in a spawned process: one conditional append per round, in lock step with the others."""
    try:
        store = SQLiteStore(path)
        outcomes = []
        for round_ in range(rounds):
            barrier.wait(timeout=60)
            expected = store.version("s1")
            barrier.wait(timeout=60)  # everyone has read before anyone appends
            try:
                store.append([event("s1", f'{{"worker":{worker}}}')], {"s1": expected},
                             time.time_ns() // 1000, f"worker{worker}@{os.getpid()}")
                outcomes.append((round_, worker, expected, "won"))
            except Conflict as exc:
                outcomes.append((round_, worker, expected, ("conflict", exc.stream, exc.expected, exc.actual)))
        store.close()
        results.put(outcomes)
    except BaseException as exc:  # report, so the test fails with a reason instead of a timeout
        results.put(f"worker {worker}: {type(exc).__name__}: {exc}")
        barrier.abort()


def test_event_log_view_shows_times_to_the_microsecond_and_old_views_are_replaced(tmp_path: Path) -> None:
    """Events may be a microsecond apart; the auditors' view used to show milliseconds."""
    path = tmp_path / "ledger.db"
    store = SQLiteStore(str(path))
    store.append([NewEvent("s", "T", 1, "{}")], {}, 1_767_225_600_123_456, "me")
    store.append([NewEvent("s", "T", 1, "{}")], {}, 0, "me")  # the clock stepped back: 1 us later
    store.close()
    raw = sqlite3.connect(path)
    assert [r[0] for r in raw.execute("SELECT time_utc FROM event_log")] == [
        "2026-01-01T00:00:00.123456Z", "2026-01-01T00:00:00.123457Z"]
    raw.execute("DROP VIEW event_log")  # a ledger made by an earlier release
    raw.execute("CREATE VIEW event_log AS SELECT seq, strftime('%Y-%m-%dT%H:%M:%fZ', time / 1000000.0, "
                "'unixepoch') AS time_utc FROM events")
    raw.commit()
    SQLiteStore(str(path)).close()
    assert [r[0] for r in raw.execute("SELECT time_utc FROM event_log")][1] == "2026-01-01T00:00:00.123457Z"
    raw.close()


class TestMemoryEventStore(SQLiteOnly, EventStoreContract):
    """The contract on a throw-away in-memory store (no WAL: there is no file)."""

    def make_store(self, tmp_path: Path, **options) -> SQLiteStore:
        return SQLiteStore(":memory:", **options)

    def reopen(self, store: Store, tmp_path: Path) -> Store:
        return store  # nothing else can reach an in-memory log: it is its own other process

    def test_memory_stores_have_no_file_and_no_wal(self, store: SQLiteStore, tmp_path: Path) -> None:
        assert store.connection.execute("PRAGMA journal_mode").fetchone()[0] == "memory"
        assert list(tmp_path.iterdir()) == []

    def test_each_memory_store_is_its_own_log(self) -> None:
        a, b = SQLiteStore(":memory:"), SQLiteStore(":memory:")
        try:
            a.append([event()], {}, T, ACTOR)
            assert (a.count(), b.count()) == (1, 0)
        finally:
            a.close()
            b.close()
