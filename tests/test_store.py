"""The contract of ``ledger.store.EventStore``, tested without any domain code.

The store knows streams, versions, times and opaque payloads; it knows nothing of
tables. So do these tests: streams are ``s1``, ``s2``..., the event type is
``Thing``, payloads are small JSON strings.

``EventStoreContract`` holds every test that any EventStore must pass; it is run
once per flavour by subclassing it with a ``make_store`` (a file in ``tmp_path``
and ``":memory:"``), in the spirit of the ``eventsourcing`` package's recorder
tests. Behaviour that only a file can have (WAL, format version, foreign files,
several connections, several processes) is tested on the file flavour only.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time
from pathlib import Path

import pytest

from ledger.errors import Conflict, IncompatibleLedger, LedgerCorrupt, LedgerError, SnapshotGone
from ledger.store import FORMAT_VERSION, EventStore, Generation, NewEvent, Snapshot

ACTOR = "tester"
T = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in microseconds: an arbitrary "now"


def event(stream: str = "s1", payload: str = '{"x":1}', type_: str = "Thing") -> NewEvent:
    return NewEvent(stream, type_, 1, payload)


def rows_of(store: EventStore, *args, **kwargs) -> list[tuple]:
    return list(store.read(*args, **kwargs))


def seqs(rows: list[tuple]) -> list[int]:
    return [r[0] for r in rows]


def append_n(store: EventStore, n: int, stream: str = "s1", now: int = T) -> None:
    """n single-event appends, with payloads {"i": 0}, {"i": 1}, ..."""
    for i in range(n):
        store.append([event(stream, f'{{"i":{i}}}')], {}, now + i, ACTOR)


class EventStoreContract:
    """Every EventStore, whatever its file, must pass these. Subclass and define make_store."""

    def make_store(self, tmp_path: Path, **options) -> EventStore:
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path):
        store = self.make_store(tmp_path)
        yield store
        store.close()

    # --- appending: sequence numbers, versions, times ---------------------------------------

    def test_a_new_store_is_empty(self, store: EventStore) -> None:
        assert store.count() == 0
        assert store.head() == (0, 0)
        assert store.version("s1") == 0
        assert rows_of(store) == []

    def test_append_assigns_global_seqs_from_one_and_versions_per_stream_from_one(
            self, store: EventStore) -> None:
        for stream in ["s1", "s2", "s1", "s3", "s1", "s2"]:
            store.append([event(stream)], {}, T, ACTOR)

        rows = rows_of(store)
        assert [(r[0], r[1], r[2]) for r in rows] == [
            (1, "s1", 1), (2, "s2", 1), (3, "s1", 2), (4, "s3", 1), (5, "s1", 3), (6, "s2", 2),
        ]
        assert (store.version("s1"), store.version("s2"), store.version("s3")) == (3, 2, 1)
        assert store.version("never-written") == 0
        assert store.count() == 6

    def test_a_row_holds_exactly_what_was_appended(self, store: EventStore) -> None:
        result = store.append([NewEvent("s1", "Thing", 3, '{"x":1}')], {}, T, "alice@host")

        assert result.rows == [(1, "s1", 1, T)] and result.previous_head == 0
        assert rows_of(store) == [(1, "s1", 1, "Thing", 3, T, "alice@host", '{"x":1}')]
        assert store.head() == (1, T)
        assert store.event_time(1) == T and store.event_time(2) is None

    def test_expected_head_skips_checks_only_while_the_log_has_not_grown(self, store: EventStore) -> None:
        store.append([event("s1")], {}, T, ACTOR)
        # The caller saw head 1 and s1 at version 1: nothing moved, the append lands.
        store.append([event("s1")], {"s1": 1}, T + 1, ACTOR, expected_head=1)
        # Head is now 2: a caller still at head 1 with a stale version is refused.
        with pytest.raises(Conflict) as refused:
            store.append([event("s1")], {"s1": 1}, T + 2, ACTOR, expected_head=1)
        assert refused.value.stream == "s1" and store.count() == 2

    def test_append_of_nothing_is_refused(self, store: EventStore) -> None:
        with pytest.raises(ValueError):
            store.append([], {"s1": 0}, T, ACTOR)
        assert store.count() == 0

    # --- conditional append ------------------------------------------------------------------

    def test_conditional_append_succeeds_when_every_condition_matches(self, store: EventStore) -> None:
        store.append([event("s1"), event("s2"), event("s2")], {}, T, ACTOR)

        result = store.append([event("s1")], {"s1": 1, "s2": 2}, T + 10, ACTOR)

        assert result.rows == [(4, "s1", 2, T + 10)] and result.previous_head == 3
        assert store.version("s1") == 2 and store.version("s2") == 2

    def test_a_stream_can_be_conditioned_without_being_written(self, store: EventStore) -> None:
        store.append([event("read-only")], {}, T, ACTOR)

        store.append([event("s1")], {"read-only": 1, "not-yet": 0}, T + 1, ACTOR)

        assert store.version("read-only") == 1   # read, not written
        assert store.version("not-yet") == 0      # a stream with no events is at version 0
        assert store.version("s1") == 1

    def test_version_zero_condition_on_a_new_stream_then_writing_it(self, store: EventStore) -> None:
        store.append([event("fresh")], {"fresh": 0}, T, ACTOR)
        assert store.version("fresh") == 1

    @pytest.mark.parametrize("moved", ["s1", "s2", "s3"])
    def test_conditional_append_is_refused_when_any_conditioned_stream_moved(
            self, store: EventStore, moved: str) -> None:
        for stream in ["s1", "s2", "s3"]:
            store.append([event(stream)], {}, T, ACTOR)
        read_at = {"s1": 1, "s2": 1, "s3": 1}
        store.append([event(moved)], {}, T, ACTOR)  # another writer moves one of them
        before = store.count()

        with pytest.raises(Conflict) as caught:
            store.append([event("s1"), event("out")], read_at, T + 5, ACTOR)

        exc = caught.value
        assert isinstance(exc, LedgerError)
        assert (exc.stream, exc.expected, exc.actual) == (moved, 1, 2)
        assert repr(moved) in str(exc)
        assert store.count() == before                      # nothing written...
        assert store.version("out") == 0                    # ...not even the other event
        assert store.version(moved) == 2

    def test_a_condition_on_a_stream_that_appeared_is_refused(self, store: EventStore) -> None:
        store.append([event("s2")], {}, T, ACTOR)

        with pytest.raises(Conflict) as caught:
            store.append([event("s1")], {"s2": 0}, T, ACTOR)

        assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("s2", 0, 1)
        assert store.count() == 1

    def test_a_condition_ahead_of_the_stream_is_refused_too(self, store: EventStore) -> None:
        with pytest.raises(Conflict) as caught:
            store.append([event("s1")], {"s1": 3}, T, ACTOR)
        assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("s1", 3, 0)
        assert store.count() == 0

    def test_the_store_is_usable_after_a_refused_append(self, store: EventStore) -> None:
        store.append([event("s1")], {}, T, ACTOR)
        with pytest.raises(Conflict):
            store.append([event("s1")], {"s1": 0}, T, ACTOR)

        store.append([event("s1")], {"s1": 1}, T, ACTOR)

        assert seqs(rows_of(store)) == [1, 2] and store.version("s1") == 2

    # --- several events in one append --------------------------------------------------------

    def test_events_of_one_append_get_consecutive_seqs_versions_and_increasing_times(
            self, store: EventStore) -> None:
        store.append([event("s1")], {}, T, ACTOR)

        result = store.append([event("s1", '{"n":1}'), event("s2", '{"n":2}'), event("s1", '{"n":3}')],
                              {"s1": 1}, T + 100, ACTOR)

        assert result.rows == [(2, "s1", 2, T + 100), (3, "s2", 1, T + 101), (4, "s1", 3, T + 102)]
        batch = rows_of(store, 1)
        assert [(r[0], r[1], r[2], r[7]) for r in batch] == [
            (2, "s1", 2, '{"n":1}'), (3, "s2", 1, '{"n":2}'), (4, "s1", 3, '{"n":3}'),
        ]
        times = [r[5] for r in batch]
        assert times[0] == T + 100 and all(a < b for a, b in zip(times, times[1:]))

    def test_a_refused_multi_event_append_writes_none_of_its_events(self, store: EventStore) -> None:
        store.append([event("s1")], {}, T, ACTOR)

        with pytest.raises(Conflict):
            store.append([event("a"), event("b"), event("c")], {"s1": 0}, T, ACTOR)

        assert store.count() == 1
        assert [store.version(s) for s in "abc"] == [0, 0, 0]

    # --- time ---------------------------------------------------------------------------------

    def test_times_strictly_increase_when_now_goes_backwards_or_repeats(self, store: EventStore) -> None:
        nows = [T, T, T - 1_000_000, T + 5, T + 5, T - 7, T + 1_000]
        for now in nows:
            store.append([event()], {}, now, ACTOR)
        store.append([event(), event()], {}, T - 99, ACTOR)  # a batch from a clock far behind

        times = [r[5] for r in rows_of(store)]
        assert all(a < b for a, b in zip(times, times[1:])), times
        assert times[0] == T                 # a clock that moves forward is taken as it is
        assert times[-3] == T + 1_000        # ...and so is one that caught up again
        assert times[-2:] == [T + 1_001, T + 1_002]
        assert store.head() == (9, T + 1_002)

    def test_append_reports_the_time_it_recorded_not_the_one_it_was_given(self, store: EventStore) -> None:
        store.append([event()], {}, T, ACTOR)
        assert store.append([event()], {}, T - 50, ACTOR).rows[0][3] == T + 1

    # --- reading ------------------------------------------------------------------------------

    @pytest.mark.parametrize("batch", [1, 2, 3, 7, 8, 1000])
    def test_read_returns_every_row_after_a_seq_in_order_across_batches(
            self, store: EventStore, batch: int) -> None:
        append_n(store, 7)

        assert seqs(rows_of(store, batch=batch)) == [1, 2, 3, 4, 5, 6, 7]
        assert seqs(rows_of(store, 3, batch=batch)) == [4, 5, 6, 7]
        assert seqs(rows_of(store, 7, batch=batch)) == []
        assert seqs(rows_of(store, 99, batch=batch)) == []
        assert [r[7] for r in rows_of(store, 5, batch=batch)] == ['{"i":5}', '{"i":6}']

    @pytest.mark.parametrize("batch", [1, 2, 3, 1000])
    def test_read_upto_stops_at_upto_inclusive(self, store: EventStore, batch: int) -> None:
        append_n(store, 9)

        assert seqs(rows_of(store, 1, upto=6, batch=batch)) == [2, 3, 4, 5, 6]
        assert seqs(rows_of(store, 0, upto=9, batch=batch)) == list(range(1, 10))
        assert seqs(rows_of(store, 0, upto=50, batch=batch)) == list(range(1, 10))
        assert seqs(rows_of(store, 4, upto=5, batch=batch)) == [5]
        assert seqs(rows_of(store, 5, upto=5, batch=batch)) == []
        assert seqs(rows_of(store, 6, upto=2, batch=batch)) == []

    def test_read_is_lazy_and_sees_appends_made_between_batches(self, store: EventStore) -> None:
        append_n(store, 4)
        reader = store.read(0, batch=2)
        first = [next(reader), next(reader)]

        store.append([event()], {}, T + 100, ACTOR)

        assert seqs(first + list(reader)) == [1, 2, 3, 4, 5]

    def test_read_of_one_stream_interleaved_with_others_keeps_global_order(self, store: EventStore) -> None:
        for i in range(6):
            store.append([event(f"s{i % 3}")], {}, T + i, ACTOR)

        rows = rows_of(store, batch=4)
        assert seqs(rows) == [1, 2, 3, 4, 5, 6]
        assert [r[1] for r in rows] == ["s0", "s1", "s2"] * 2
        assert [r[2] for r in rows] == [1, 1, 1, 2, 2, 2]

    # --- append-only --------------------------------------------------------------------------

    @pytest.mark.parametrize("statement", [
        "UPDATE events SET payload = '{\"x\":2}' WHERE seq = 1",
        "UPDATE events SET seq = 10",
        "DELETE FROM events WHERE seq = 1",
        "DELETE FROM events",
    ])
    def test_the_events_table_refuses_update_and_delete(self, store: EventStore, statement: str) -> None:
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

    # --- snapshots ----------------------------------------------------------------------------

    def test_snapshots_save_and_load_round_trip(self, store: EventStore) -> None:
        assert store.load_snapshot("state") is None
        data = bytes(range(256)) + b"\x00tail"

        store.save_snapshot("state", Snapshot(seq=41, format=2, data=data))

        loaded = store.load_snapshot("state")
        assert loaded == Snapshot(41, 2, data)
        assert isinstance(loaded.data, bytes)

    def test_a_snapshot_is_replaced_by_name_and_names_are_independent(self, store: EventStore) -> None:
        store.save_snapshot("a", Snapshot(1, 1, b"one"))
        store.save_snapshot("b", Snapshot(2, 1, b"two"))
        store.save_snapshot("a", Snapshot(3, 2, b"three"))

        assert store.load_snapshot("a") == Snapshot(3, 2, b"three")
        assert store.load_snapshot("b") == Snapshot(2, 1, b"two")

    def test_snapshots_are_not_events(self, store: EventStore) -> None:
        store.save_snapshot("a", Snapshot(0, 1, b"x"))
        assert store.count() == 0 and rows_of(store) == []

    # --- generations of the keyed snapshot ---------------------------------------------------

    @staticmethod
    def _entries(store: EventStore, generation: Generation, part: str) -> dict[str, bytes]:
        return dict(store.generation_part(generation, part).scan())

    def test_a_full_generation_reads_back_by_key_and_in_full(self, store: EventStore) -> None:
        assert store.latest_generation() is None
        first = store.write_generation(10, 8, b"head", [("p", "b", b"2"), ("p", "a", b"1"), ("q", "a", b"x")],
                                       extends=None)
        assert first is not None and (first.gen, first.base, first.seq, first.entries) == (1, 1, 10, 3)
        assert store.latest_generation() == first
        part = store.generation_part(first, "p")
        assert (part.get("a"), part.get("b"), part.get("zz")) == (b"1", b"2", None)
        assert self._entries(store, first, "p") == {"a": b"1", "b": b"2"}
        assert self._entries(store, first, "q") == {"a": b"x"}
        assert store.count() == 0  # not events

    def test_a_delta_shadows_and_deletes_and_older_generations_still_read_as_they_were(
            self, store: EventStore) -> None:
        full = store.write_generation(10, 8, b"h1", [("p", "a", b"1"), ("p", "b", b"2")], extends=None)
        delta = store.write_generation(20, 8, b"h2", [("p", "a", b"one"), ("p", "b", None), ("p", "c", b"3")],
                                       extends=full)
        assert delta is not None and (delta.gen, delta.base) == (2, 1)
        assert self._entries(store, delta, "p") == {"a": b"one", "c": b"3"}
        assert store.generation_part(delta, "p").get("b") is None
        assert self._entries(store, full, "p") == {"a": b"1", "b": b"2"}
        assert store.chain_entries(delta) == (2, 3)

    def test_a_generation_not_newer_or_off_its_chain_is_not_written(self, store: EventStore) -> None:
        full = store.write_generation(10, 8, b"h", [("p", "a", b"1")], extends=None)
        assert store.write_generation(10, 8, b"h", [("p", "a", b"2")], extends=full) is None  # not newer
        other = store.write_generation(30, 8, b"h", [("p", "a", b"3")], extends=None)  # a new chain
        assert store.write_generation(40, 8, b"h", [("p", "a", b"4")], extends=full) is None  # off it
        assert store.latest_generation() == other

    def test_a_full_generation_deletes_the_chains_before_the_previous_one(self, store: EventStore) -> None:
        one = store.write_generation(10, 8, b"h", [("p", "a", b"1")], extends=None)
        two = store.write_generation(20, 8, b"h", [("p", "a", b"2")], extends=None)
        three = store.write_generation(30, 8, b"h", [("p", "a", b"3")], extends=None)
        assert not store.generation_exists(one.gen) and store.generation_exists(two.gen)
        assert store.generation_part(two, "p").get("a") == b"2"  # a reader of the previous one goes on
        with pytest.raises(SnapshotGone, match="generation 1"):
            store.generation_part(one, "p").get("a")
        assert store.generation_part(three, "p").get("a") == b"3"

    def test_an_entry_that_fails_its_check_is_snapshot_gone(self, store: EventStore) -> None:
        full = store.write_generation(10, 8, b"h", [("p", "a", b"1")], extends=None)
        store.connection.execute("UPDATE snapshot_entries SET value = CAST(x'00000000' || value AS BLOB)")
        part = store.generation_part(full, "p")
        with pytest.raises(SnapshotGone, match="fails its check"):
            part.get("a")
        assert part.failed == "bad"

    # --- meta ---------------------------------------------------------------------------------

    def test_meta_records_the_format_version_and_keeps_other_keys(self, store: EventStore) -> None:
        assert store.get_meta("format_version") == str(FORMAT_VERSION)
        assert store.get_meta("colour") is None
        store.set_meta("colour", "blue")
        store.set_meta("colour", "green")
        assert store.get_meta("colour") == "green"


class TestFileEventStore(EventStoreContract):
    """The contract on a real SQLite file, plus what only a file can do."""

    def make_store(self, tmp_path: Path, **options) -> EventStore:
        return EventStore(str(tmp_path / "events.db"), **options)

    def test_file_stores_are_in_wal_mode(self, store: EventStore, tmp_path: Path) -> None:
        assert store.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        raw = sqlite3.connect(tmp_path / "events.db")  # WAL is a property of the file
        try:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            raw.close()

    def test_appends_are_there_after_reopening(self, store: EventStore, tmp_path: Path) -> None:
        store.append([event("s1"), event("s2")], {}, T, ACTOR)
        store.close()

        again = EventStore(str(tmp_path / "events.db"))
        try:
            assert [(r[0], r[1], r[2], r[5]) for r in rows_of(again)] == [
                (1, "s1", 1, T), (2, "s2", 1, T + 1)]
            again.append([event("s1")], {"s1": 1}, T - 10, ACTOR)  # versions and time go on
            assert again.head() == (3, T + 2)
        finally:
            again.close()

    def test_the_file_says_it_is_a_ledger(self, store: EventStore, tmp_path: Path) -> None:
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
        EventStore(str(path)).close()
        self._set_format_version(path, str(FORMAT_VERSION + 1))

        with pytest.raises(IncompatibleLedger) as caught:
            EventStore(str(path))

        message = str(caught.value)
        assert str(path) in message
        assert f"format {FORMAT_VERSION + 1}" in message
        assert "upgrade" in message

    def test_a_missing_or_unreadable_format_version_is_corrupt(self, tmp_path: Path) -> None:
        path = tmp_path / "events.db"
        EventStore(str(path)).close()
        self._set_format_version(path, "one")
        with pytest.raises(LedgerCorrupt, match="format version is missing or unreadable"):
            EventStore(str(path))

        self._set_format_version(path, None)
        with pytest.raises(LedgerCorrupt, match="format version is missing or unreadable"):
            EventStore(str(path))

    def test_a_plain_sqlite_file_is_not_a_ledger(self, tmp_path: Path) -> None:
        path = tmp_path / "other.db"
        raw = sqlite3.connect(path)
        raw.execute("CREATE TABLE people (name TEXT)")
        raw.execute("INSERT INTO people VALUES ('ada')")
        raw.commit()
        raw.close()

        with pytest.raises(LedgerCorrupt, match="is an SQLite file but not a retention-ledger ledger"):
            EventStore(str(path))

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
            EventStore(str(path))

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
            EventStore(str(path))

        assert str(path) in str(caught.value)
        assert path.read_bytes() == content

    def test_a_one_byte_garbage_file_is_corrupt_too(self, tmp_path: Path) -> None:
        path = tmp_path / "garbage.db"
        path.write_bytes(b"\n")

        with pytest.raises(LedgerCorrupt):
            EventStore(str(path)).close()
        assert path.read_bytes() == b"\n"

    def test_an_empty_file_is_refused_not_taken_for_a_new_ledger(self, tmp_path: Path) -> None:
        """A file we did not write (an empty one too) never silently becomes a ledger."""
        path = tmp_path / "empty.db"
        path.touch()
        with pytest.raises(LedgerCorrupt, match="is an empty file, not a ledger"):
            EventStore(str(path))
        assert path.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]

    # --- several connections ------------------------------------------------------------------

    def test_two_stores_on_one_file_see_each_others_appends(self, tmp_path: Path) -> None:
        path = str(tmp_path / "events.db")
        a, b = EventStore(path), EventStore(path)
        try:
            a.append([event("s1")], {}, T, ACTOR)
            assert b.count() == 1 and b.version("s1") == 1
            b.append([event("s1")], {"s1": 1}, T - 5, ACTOR)  # b's time follows a's log
            assert a.count() == 2 and a.version("s1") == 2
            assert seqs(rows_of(a)) == seqs(rows_of(b)) == [1, 2]
            assert a.head() == b.head() == (2, T + 1)
        finally:
            a.close()
            b.close()

    def test_a_conflict_between_two_connections_is_detected(self, tmp_path: Path) -> None:
        path = str(tmp_path / "events.db")
        a, b = EventStore(path), EventStore(path)
        try:
            a.append([event("s1")], {}, T, ACTOR)
            seen_by_a, seen_by_b = a.version("s1"), b.version("s1")   # both read version 1

            a.append([event("s1", '{"by":"a"}')], {"s1": seen_by_a}, T + 1, ACTOR)
            with pytest.raises(Conflict) as caught:
                b.append([event("s1", '{"by":"b"}')], {"s1": seen_by_b}, T + 1, ACTOR)

            assert (caught.value.stream, caught.value.expected, caught.value.actual) == ("s1", 1, 2)
            assert [r[7] for r in rows_of(b)] == ['{"x":1}', '{"by":"a"}']
        finally:
            a.close()
            b.close()

    def test_several_processes_never_both_win_the_same_version(self, tmp_path: Path) -> None:
        """Real processes, each round: all read the stream's version, then all append on
        the condition that it has not moved. Exactly one wins each round; the rest get a
        Conflict naming the version the winner made."""
        path = str(tmp_path / "events.db")
        EventStore(path).close()  # create the file once, so the workers only race on appends
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

        store = EventStore(path)
        try:
            rows = rows_of(store)
            assert store.count() == rounds
            assert [(r[1], r[2]) for r in rows] == [("s1", v) for v in range(1, rounds + 1)]
            winners_by_version = {e[1] + 1: f'{{"worker":{e[0]}}}'
                                  for entries in by_round.values() for e in entries if e[2] == "won"}
            assert [r[7] for r in rows] == [winners_by_version[v] for v in range(1, rounds + 1)]
        finally:
            store.close()


def _race_worker(path: str, worker: int, rounds: int, barrier, results) -> None:
    """Run in a spawned process: one conditional append per round, in lock step with the others."""
    try:
        store = EventStore(path)
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
    store = EventStore(str(path))
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
    EventStore(str(path)).close()
    assert [r[0] for r in raw.execute("SELECT time_utc FROM event_log")][1] == "2026-01-01T00:00:00.123457Z"
    raw.close()


class TestMemoryEventStore(EventStoreContract):
    """The contract on a throw-away in-memory store (no WAL: there is no file)."""

    def make_store(self, tmp_path: Path, **options) -> EventStore:
        return EventStore(":memory:", **options)

    def test_memory_stores_have_no_file_and_no_wal(self, store: EventStore, tmp_path: Path) -> None:
        assert store.connection.execute("PRAGMA journal_mode").fetchone()[0] == "memory"
        assert list(tmp_path.iterdir()) == []

    def test_each_memory_store_is_its_own_log(self) -> None:
        a, b = EventStore(":memory:"), EventStore(":memory:")
        try:
            a.append([event()], {}, T, ACTOR)
            assert (a.count(), b.count()) == (1, 0)
        finally:
            a.close()
            b.close()
