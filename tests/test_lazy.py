"""Overlay maps (``core.maps``) over stored entries (``persistence.lazy``): a stored snapshot's part
plus folded changes reads exactly like the persistent map it stands for, reads from its source
only what is asked for, and heals from the log when the source cannot answer. No SQLite here:
the source is a dict that counts its reads."""

from __future__ import annotations

from typing import Iterator

import pytest
from hypothesis import given, strategies as st
from immutables import Map

from ledger.core.maps import OverlayMap
from ledger.persistence.contract import SnapshotGone
from ledger.persistence.lazy import StoredEntries


class DictSource:
    def __init__(self, entries: dict[str, int]) -> None:
        self.entries = {k: str(v).encode() for k, v in entries.items()}
        self.gets = 0
        self.scans = 0
        self.gone = False
        """Set: every read raises ``SnapshotGone``, as a deleted or damaged generation's does."""

    def get(self, key: str) -> bytes | None:
        self.gets += 1
        if self.gone:
            raise SnapshotGone("generation g1 is no longer stored")
        return self.entries.get(key)

    def scan(self) -> Iterator[tuple[str, bytes]]:
        self.scans += 1
        if self.gone:
            raise SnapshotGone("generation g1 is no longer stored")
        return iter(self.entries.items())


class FromTheLog:
    """The heal: every entry as a fold of the log gives it (counted)."""

    def __init__(self, entries: dict[str, int]) -> None:
        self.entries, self.calls = entries, 0

    def __call__(self) -> dict[str, int]:
        self.calls += 1
        return dict(self.entries)


def lazy(entries: dict[str, int], heal: FromTheLog | None = None) -> tuple[OverlayMap, DictSource]:
    source = DictSource(entries)
    heal = heal or FromTheLog(entries)
    return OverlayMap(StoredEntries(source, lambda key, data: int(data), len(entries), "g1", heal)), source


KEYS = st.sampled_from([f"k{i}" for i in range(12)])
OPS = st.lists(st.tuples(st.sampled_from(["set", "del", "update"]), KEYS, st.integers(0, 9)), max_size=30)


@given(st.dictionaries(KEYS, st.integers(0, 9)), OPS, st.booleans())
def test_a_lazy_map_folded_on_reads_like_the_map_it_stands_for(base: dict[str, int], ops: list,
                                                                held: bool) -> None:
    """Over a stored snapshot's part, or over a dict a replay built (``OverlayMap.held``)."""
    model = Map(base)
    found = OverlayMap.held(dict(base)) if held else lazy(base)[0]
    for op, key, value in ops:
        if op == "update":
            model, found = model.update({key: value}), found.update({key: value})
            continue
        m, f = model.mutate(), found.mutate()
        if op == "set":
            m[key], f[key] = value, value
        elif key in m:
            assert key in f
            del m[key], f[key]
        else:
            with pytest.raises(KeyError):
                del f[key]
        model, found = m.finish(), f.finish()
        assert len(found) == len(model)  # counted from the changed keys, without reading the rest
    for key in (f"k{i}" for i in range(12)):
        assert found.get(key) == model.get(key) and (key in found) == (key in model)
    assert len(found) == len(model) and dict(found.items()) == dict(model.items())
    assert found == model and sorted(found) == sorted(model)


def test_only_the_keys_asked_for_are_read_and_each_once() -> None:
    found, source = lazy({f"k{i}": i for i in range(1000)})
    assert found["k7"] == 7 and found.get("k7") == 7 and "k8" in found and "zz" not in found
    assert source.gets == 3 and source.scans == 0  # k7 once (then cached), k8, zz
    changed = found.update({"k9": 90})
    assert changed["k7"] == 7 and source.gets == 3  # a map folded from the same base shares its reads
    assert len(changed) == 1000 and source.scans == 0
    assert sum(changed.values()) == sum(range(1000)) - 9 + 90 and source.scans == 1


def test_held_entries_are_complete_and_the_dict_is_never_changed() -> None:
    entries = {f"k{i}": i for i in range(5)}
    found = OverlayMap.held(entries).update({"k9": 9})
    assert found["k3"] == 3 and "zz" not in found and len(found) == 6
    assert dict(found.items()) == {**entries, "k9": 9}
    assert entries == {f"k{i}": i for i in range(5)}  # folding on never changes the dict it holds


def test_r16_a_source_short_of_its_recorded_entries_heals_from_the_log() -> None:
    """The head says 2 entries, the part holds 1 (an edit): the whole part comes from the log."""
    source = DictSource({"a": 1})
    log = FromTheLog({"a": 1, "b": 2})
    found = OverlayMap(StoredEntries(source, lambda key, data: int(data), 2, "g1", log))
    assert dict(found.items()) == {"a": 1, "b": 2} and log.calls == 1
    assert found.base.stamp is None  # no longer what generation g1 holds: the next one is written in full


def test_r16_a_read_of_a_generation_that_is_gone_answers_from_the_log_not_with_an_error() -> None:
    found, source = lazy({"a": 1, "b": 2}, FromTheLog({"a": 1, "b": 2}))
    assert found["a"] == 1 and source.gets == 1
    source.gone = True
    changed = found.update({"c": 3})
    assert changed["b"] == 2 and changed.get("zz") is None and len(changed) == 3
    assert found.base.heal.calls == 1  # once for the part, then from memory
    assert dict(changed.items()) == {"a": 1, "b": 2, "c": 3}


class SealedDictSource(DictSource):
    """A source that gives a part as stored and checks an entry when asked (``lazy.SealedSource``),
    as the stores do: an entry stored as ``b"!"`` fails its check."""

    def __init__(self, entries: dict[str, int]) -> None:
        super().__init__(entries)
        self.checks = 0

    def scan(self) -> Iterator[tuple[str, bytes]]:
        return ((key, self.checked(key, value)) for key, value in self.scan_sealed())

    def scan_sealed(self) -> Iterator[tuple[str, object]]:
        self.scans += 1
        return iter(self.entries.items())

    def checked(self, key: str, stored: object) -> bytes:
        self.checks += 1
        if stored == b"!":
            raise SnapshotGone(f"the entry of {key} fails its check")
        assert isinstance(stored, bytes)
        return stored


def _read_whole(entries: dict[str, int], heal: FromTheLog, damaged: str | None = None
                ) -> tuple[OverlayMap, SealedDictSource]:
    """A part of 1,000 entries whose first 100 keys were asked for one at a time: read in one pass
    (with the entry of ``damaged`` failing its check)."""
    source = SealedDictSource(entries)
    if damaged is not None:
        source.entries[damaged] = b"!"
    found = OverlayMap(StoredEntries(source, lambda key, data: int(data), len(entries), "g1", heal))
    for i in range(100):
        found.get(f"k{i}")
    assert source.scans == 1
    return found, source


def test_a_part_read_in_one_pass_checks_and_decodes_each_entry_on_first_use() -> None:
    """An ``as_of`` folding thousands of events reads a part whole, and asks for a fraction of it:
    only the entries asked for are checked and decoded, each once."""
    entries = {f"k{i}": i for i in range(1000)}
    found, source = _read_whole(entries, FromTheLog(entries))
    asked = source.gets + source.checks
    assert asked <= 100 and source.checks < 100  # not the 1,000 the pass read
    assert found["k500"] == 500 and found["k500"] == 500 and "zz" not in found
    assert source.checks == asked - source.gets + 1
    assert dict(found.items()) == entries and source.checks == 1000 - source.gets  # walked: each checked once


def test_r16_an_entry_that_fails_its_check_on_first_use_heals_the_part_from_the_log() -> None:
    """Read in one pass, checked on first use: a damaged entry met then heals the part as a damaged
    part met on read does, and the answer is the log's."""
    entries = {f"k{i}": i for i in range(1000)}
    heal = FromTheLog({**entries, "k700": 7000})  # the log's truth differs from the damaged entry's
    found, source = _read_whole(entries, heal, damaged="k700")
    assert heal.calls == 0 and found["k600"] == 600  # an entry that checks out is believed
    assert found["k700"] == 7000 and heal.calls == 1 and found.base.stamp is None
    changed = found.update({"k1": 10})
    assert changed["k700"] == 7000 and changed["k1"] == 10 and heal.calls == 1
    assert dict(found.items()) == {**entries, "k700": 7000}


class DeepSource(DictSource):
    """A part along a chain of ``depth`` generations: a pass over it reads every version of every key."""

    def __init__(self, entries: dict[str, int], depth: int) -> None:
        super().__init__(entries)
        self.depth = depth


def test_a_part_deep_along_its_chain_is_read_key_by_key_for_longer() -> None:
    """A pass costs the rows along the chain (entries times generations), a key alone a few of them:
    a tenth of a part ten generations deep is still read key by key, a third of it in one pass."""
    entries = {f"k{i}": i for i in range(1000)}
    source = DeepSource(entries, depth=10)
    found = OverlayMap(StoredEntries(source, lambda key, data: int(data), len(entries), "g1", FromTheLog(entries)))
    assert [found[f"k{i}"] for i in range(100)] == list(range(100))
    assert source.gets == 100 and source.scans == 0
    assert [found[f"k{i}"] for i in range(100, 400)] == list(range(100, 400))
    assert source.scans == 1 and source.gets < 400
    assert dict(found.items()) == entries and source.scans == 1


def test_keys_fetched_ahead_from_a_small_part_read_it_in_one_pass() -> None:
    """A part of a few entries is one statement whole, as a few keys are: it is read in one pass,
    with its count checked (a short part heals from the log)."""
    entries = {f"k{i}": i for i in range(10)}
    found, source = lazy(entries)
    found.base.prefetch(["k1", "k2", "zz"])
    assert source.scans == 1 and source.gets == 0
    assert found["k1"] == 1 and "zz" not in found and dict(found.items()) == entries and source.gets == 0
    short, log = DictSource({"a": 1}), FromTheLog({"a": 1, "b": 2})
    healed = OverlayMap(StoredEntries(short, lambda key, data: int(data), 2, "g1", log))
    healed.base.prefetch(["b"])
    assert healed["b"] == 2 and log.calls == 1 and healed.base.stamp is None
