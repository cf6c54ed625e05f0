"""The contract every ledger backend must pass (``ledger.persistence.contract``), tested
without any domain code and without knowing the backend.

The store knows streams, versions, times and opaque payloads; it knows nothing of
tables. So do these tests: streams are ``s1``, ``s2``..., the event type is
``Thing``, payloads are small JSON strings. A backend's suite subclasses
``EventStoreContract`` with a ``make_store`` (as the ``eventsourcing`` package's recorder
tests are subclassed per recorder); ``tests/test_store.py`` does it for SQLite (a file and
``":memory:"``). What only one backend can have (SQLite's WAL, its triggers, a file's
format version) is tested in that backend's suite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.errors import Conflict, LedgerError
from ledger.persistence.contract import MANY, EventStore, Generation, NewEvent, SnapshotGone, Store, seal

ACTOR = "tester"
T = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in microseconds: an arbitrary "now"


def event(stream: str = "s1", payload: str = '{"x":1}', type_: str = "Thing") -> NewEvent:
    return NewEvent(stream, type_, 1, payload)


def rows_of(store: EventStore, *args: Any, **kwargs: Any) -> list[tuple]:
    return list(store.read(*args, **kwargs))


def seqs(rows: list[tuple]) -> list[int]:
    return [r[0] for r in rows]


def append_n(store: EventStore, n: int, stream: str = "s1", now: int = T) -> None:
    """n single-event appends, with payloads {"i": 0}, {"i": 1}, ..."""
    for i in range(n):
        store.append([event(stream, f'{{"i":{i}}}')], {}, now + i, ACTOR)


class EventStoreContract:
    """Every backend must pass these. Subclass and define ``make_store``."""

    def make_store(self, tmp_path: Path, **options: Any) -> Store:
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

    # --- snapshots ----------------------------------------------------------------------------

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

    def test_many_keys_read_at_once_as_each_reads_alone(self, store: EventStore) -> None:
        """``get_many``: the newest entry of each key asked for along the chain, none for a key deleted
        or never stored, across more keys than one statement asks for."""
        keys = [f"k{i:05d}" for i in range(MANY * 2 + 7)]
        full = store.write_generation(10, 8, b"h1", [("p", k, k.encode()) for k in keys[::2]] + [("q", "k00000", b"q")],
                                      extends=None)
        delta = store.write_generation(20, 8, b"h2", [("p", keys[0], None), ("p", keys[1], b"new"),
                                                      ("p", keys[2], b"changed")], extends=full)
        assert full is not None and delta is not None
        part = store.generation_part(delta, "p")
        asked = [*keys, "absent", keys[2]]
        found = part.get_many(asked)
        assert found == {k: v for k in asked if (v := part.get(k)) is not None}
        assert found[keys[1]] == b"new" and found[keys[2]] == b"changed" and keys[0] not in found
        assert store.generation_part(full, "p").get_many([keys[0], keys[1]]) == {keys[0]: keys[0].encode()}
        assert part.get_many([]) == {}
        store.delete_generations()
        with pytest.raises(SnapshotGone):
            part.get_many([keys[4]])

    def test_a_delta_extends_only_the_newest_of_its_chain_and_a_full_one_only_a_new_event(
            self, store: EventStore) -> None:
        full = store.write_generation(10, 8, b"h", [("p", "a", b"1")], extends=None)
        assert full is not None
        assert store.write_generation(10, 8, b"h", [("p", "a", b"2")], extends=full) is None  # not after it
        assert store.write_generation(10, 8, b"h", [("p", "a", b"2")], extends=None) is None  # one is there
        delta = store.write_generation(20, 8, b"h", [("p", "a", b"2")], extends=full)
        assert delta is not None and delta.base == full.gen
        assert store.write_generation(30, 8, b"h", [("p", "a", b"3")], extends=full) is None  # not the newest
        again = store.write_generation(10, 8, b"h2", [("p", "a", b"one")], extends=None, replace=True)
        assert again is not None and again.seq == 10 and store.latest_generation() == delta
        assert [(g.gen, g.base, g.seq) for g in store.generations()] == [
            (full.gen, full.gen, 10), (again.gen, again.gen, 10), (delta.gen, full.gen, 20)]
        assert store.generation_entries(delta) == [("p", "a", seal("p", "a", b"2"))]  # as stored: sealed

    def test_r17_generations_are_kept_and_chains_that_interleave_read_apart(self, store: EventStore) -> None:
        """Every generation stays readable (``as_of`` starts from any; a reader holding one is never
        cut off), and a chain's reads skip the entries of another chain's generations between its own."""
        one = store.write_generation(10, 8, b"h", [("p", "a", b"1"), ("p", "b", b"1")], extends=None)
        other = store.write_generation(15, 8, b"h", [("p", "a", b"x"), ("p", "c", b"x")], extends=None)
        two = store.write_generation(20, 8, b"h", [("p", "b", None), ("p", "d", b"2")], extends=one)
        later = store.write_generation(25, 8, b"h", [("p", "a", b"y")], extends=other)
        assert None not in (one, other, two, later)
        assert dict(store.generation_part(two, "p").scan()) == {"a": b"1", "d": b"2"}
        assert store.generation_part(two, "p").get("c") is None
        assert store.generation_part(two, "p").get_many(["a", "b", "c", "d"]) == {"a": b"1", "d": b"2"}
        assert dict(store.generation_part(later, "p").scan()) == {"a": b"y", "c": b"x"}
        assert dict(store.generation_part(one, "p").scan()) == {"a": b"1", "b": b"1"}
        assert store.chain_entries(two) == (2, 2) and store.chain_entries(later) == (2, 1)
        assert store.latest_generation() == later
        assert sorted(store.generation_entries(two)) == [("p", "b", None), ("p", "d", seal("p", "d", b"2"))]

    def test_discarded_generations_are_gone_to_their_readers(self, store: EventStore) -> None:
        one = store.write_generation(10, 8, b"h", [("p", "a", b"1")], extends=None)
        store.delete_generations()
        assert store.latest_generation() is None
        with pytest.raises(SnapshotGone):
            store.generation_part(one, "p").get("a")

    # --- meta ---------------------------------------------------------------------------------

    def test_meta_keeps_what_is_set_and_set_once_keeps_the_first(self, store: EventStore) -> None:
        assert store.get_meta("root") is None
        assert store.set_meta_once("root", "/a") == "/a" and store.set_meta_once("root", "/b") == "/a"
        assert store.get_meta("root") == "/a"

    # --- leases (upkeep that runs once at a time: maintain, R22) -----------------------------------

    def test_a_lease_is_had_by_one_holder_until_it_ends_or_is_released(self, tmp_path: Path) -> None:
        store, other = self.make_store(tmp_path), None
        try:
            assert store.take_lease("maintain", "a", T + 100, T) is None
            assert store.take_lease("maintain", "a", T + 200, T + 50) is None  # its holder renews it
            assert store.take_lease("other", "b", T + 100, T) is None  # another lease is another thing
            other = self.reopen(store, tmp_path)  # another process, on the same ledger
            assert other.take_lease("maintain", "b", T + 300, T + 150) == ("a", T + 200)  # who, until when
            assert other.take_lease("maintain", "b", T + 300, T + 200) is None  # a's ended at T + 200
            store.release_lease("maintain", "a")  # not a's any more: nothing happens
            assert store.take_lease("maintain", "a", T + 400, T + 250) == ("b", T + 300)
            other.release_lease("maintain", "b")
            assert store.take_lease("maintain", "a", T + 400, T + 250) is None
        finally:
            store.close()
            if other is not None and other is not store:
                other.close()

    def test_a_lease_whose_holder_is_gone_is_taken_over_once_under_the_stores_lock(self, tmp_path: Path) -> None:
        """A killed ``maintain`` on this host holds nothing: ``gone`` (asked inside the take) says
        its holder ended, and the first to ask takes the lease over; the next finds that one."""
        store, other = self.make_store(tmp_path), None
        asked: list[str] = []

        def gone(holder: str) -> bool:
            asked.append(holder)
            return holder == "killed"
        try:
            assert store.take_lease("maintain", "killed", T + 1_000, T) is None
            other = self.reopen(store, tmp_path)
            assert other.take_lease("maintain", "b", T + 300, T + 10, gone=gone) is None  # taken over at once
            assert store.take_lease("maintain", "c", T + 300, T + 10, gone=gone) == ("b", T + 300)
            assert asked == ["killed", "b"]
            assert store.take_lease("maintain", "c", T + 300, T + 10) == ("b", T + 300)  # no one asked: it holds
        finally:
            store.close()
            if other is not None and other is not store:
                other.close()

    def reopen(self, store: Store, tmp_path: Path) -> Store:
        """Another connection to ``store``'s ledger (a backend whose test has no other: override)."""
        from ledger.persistence.stores import open_store
        assert store.location is not None
        return open_store(store.location, create=False, max_skew=None)  # the suite's times are its own
