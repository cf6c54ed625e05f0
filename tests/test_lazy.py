"""``LazyMap``: a stored snapshot's part plus folded changes reads exactly like the persistent map
it stands for, and reads from its source only what is asked for. No SQLite here: the source
is a dict that counts its reads."""

from __future__ import annotations

from typing import Iterator

import pytest
from hypothesis import given, strategies as st
from immutables import Map

from ledger.core.lazy import Base, LazyMap
from ledger.errors import SnapshotGone


class DictSource:
    def __init__(self, entries: dict[str, int]) -> None:
        self.entries = {k: str(v).encode() for k, v in entries.items()}
        self.gets = 0
        self.scans = 0
        self.failed: str | None = None

    def get(self, key: str) -> bytes | None:
        self.gets += 1
        return self.entries.get(key)

    def scan(self) -> Iterator[tuple[str, bytes]]:
        self.scans += 1
        return iter(self.entries.items())


def lazy(entries: dict[str, int]) -> tuple[LazyMap, DictSource]:
    source = DictSource(entries)
    return LazyMap(Base(source, lambda key, data: int(data), len(entries), "g1")), source


KEYS = st.sampled_from([f"k{i}" for i in range(12)])
OPS = st.lists(st.tuples(st.sampled_from(["set", "del", "update"]), KEYS, st.integers(0, 9)), max_size=30)


@given(st.dictionaries(KEYS, st.integers(0, 9)), OPS, st.booleans())
def test_a_lazy_map_folded_on_reads_like_the_map_it_stands_for(base: dict[str, int], ops: list,
                                                                held: bool) -> None:
    """Over a stored snapshot's part, or over a dict a replay built (``Base.held``)."""
    model = Map(base)
    found = LazyMap(Base.held(dict(base))) if held else lazy(base)[0]
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


def test_a_held_base_is_complete_and_stored_nowhere() -> None:
    entries = {f"k{i}": i for i in range(5)}
    base = Base.held(entries)
    assert not base.stored and lazy(entries)[0].base.stored
    found = LazyMap(base).update({"k9": 9})
    assert found["k3"] == 3 and "zz" not in found and len(found) == 6
    assert dict(found.items()) == {**entries, "k9": 9}
    assert entries == {f"k{i}": i for i in range(5)}  # folding on never changes the dict it holds


def test_a_source_short_of_its_recorded_entries_is_snapshot_gone() -> None:
    source = DictSource({"a": 1})
    found = LazyMap(Base(source, lambda key, data: int(data), 2, "g1"))
    with pytest.raises(SnapshotGone, match="holds 1 entries where it recorded 2"):
        list(found.items())
    assert source.failed == "bad"  # so that the ledger rebuilds it rather than reading it again
