"""Overlay maps: entries from somewhere else, plus the changes folded on top of them.

The fold needs one thing of a slice's maps: a persistent map that can be mutated in a
batch and frozen again (``immutables.Map`` is one). A replay from nothing builds big maps
as plain dicts; copying those into persistent maps was a tenth of a million-event replay,
so the fold freezes a big dict as an ``OverlayMap`` over ``Held`` entries instead: the
dict itself, complete, plus a persistent map of what later folds change (``GONE`` for a
deletion). Every map folded from the same entries shares them.

Where entries come from is not the core's business. ``Entries`` is the protocol: answer
one key (``GONE`` if absent), or all of them. The persistence package gives a state read
from a stored snapshot entries that read one key at a time from the store; the core only
ever sees the mapping.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ItemsView, Iterator, KeysView, Mapping, Protocol, ValuesView

from immutables import Map

GONE: Any = object()
"""In an overlay's changes: the key was deleted. From ``Entries.get``: the key is not there."""
_ABSENT: Any = object()


class Entries(Protocol):
    """The entries under an overlay: fixed once made (the overlay holds every change)."""

    size: int
    """How many entries there are (known without reading them)."""

    def get(self, key: str) -> Any:
        """The value of ``key``, or ``GONE``."""

    def everything(self) -> dict[str, Any]:
        """Every entry (the caller must not change the dict)."""


class Held:
    """Entries held in memory, complete: a dict a replay built, taken over as it is."""

    __slots__ = ("found", "size")

    def __init__(self, entries: dict[str, Any]) -> None:
        self.found = entries
        self.size = len(entries)

    def get(self, key: str) -> Any:
        return self.found.get(key, GONE)

    def everything(self) -> dict[str, Any]:
        return self.found


class _Reads(ABC):
    """Reading one key, through ``_lookup`` (GONE: not there)."""

    __slots__ = ()

    @abstractmethod
    def _lookup(self, key: str) -> Any:
        """The value of ``key``, from the changes first, then the entries."""

    def get(self, key: str, default: Any = None) -> Any:
        value = self._lookup(key)
        return default if value is GONE else value

    def __getitem__(self, key: str) -> Any:
        value = self._lookup(key)
        if value is GONE:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._lookup(key) is not GONE


class OverlayMap(_Reads, Mapping[str, Any]):
    """``base`` entries plus the ``changes`` folded on top of them; reads like ``immutables.Map``."""

    __slots__ = ("base", "changes")

    def __init__(self, base: Entries, changes: Map[str, Any] = Map()) -> None:
        self.base = base
        self.changes = changes

    @classmethod
    def held(cls, entries: dict[str, Any]) -> OverlayMap:
        """Over a dict, taken over as it is (nothing may change it afterwards)."""
        return cls(Held(entries))

    def _lookup(self, key: str) -> Any:
        value = self.changes.get(key, _ABSENT)
        if value is _ABSENT:
            value = self.base.get(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        base = self.base
        size = base.size  # without reading every entry: only the changed keys are looked up
        for key, value in self.changes.items():
            size += (value is not GONE) - (base.get(key) is not GONE)
        return size

    def items(self) -> ItemsView[str, Any]:
        return self._merged().items()

    def values(self) -> ValuesView[Any]:
        return self._merged().values()

    def keys(self) -> KeysView[str]:
        return self._merged().keys()

    def _merged(self) -> dict[str, Any]:
        merged = self.base.everything()
        if self.changes:
            merged = dict(merged)
            for key, value in self.changes.items():
                if value is GONE:
                    merged.pop(key, None)
                else:
                    merged[key] = value
        return merged

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return self._merged() == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def update(self, more: Mapping[str, Any]) -> OverlayMap:
        return OverlayMap(self.base, self.changes.update(more))

    def mutate(self) -> OverlayMutation:
        return OverlayMutation(self)

    def __repr__(self) -> str:
        return f"<OverlayMap of {self.base.size} entries, {len(self.changes)} changed>"


class OverlayMutation(_Reads):
    """``OverlayMap.mutate()``: what the fold changes in place, frozen again by ``finish``."""

    __slots__ = ("_map", "_changes")

    def __init__(self, of: OverlayMap) -> None:
        self._map = of
        self._changes = of.changes.mutate()

    def _lookup(self, key: str) -> Any:
        value = self._changes.get(key, _ABSENT)
        if value is _ABSENT:
            value = self._map.base.get(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self._changes[key] = value

    def __delitem__(self, key: str) -> None:
        if self._lookup(key) is GONE:
            raise KeyError(key)
        self._changes[key] = GONE

    def finish(self) -> OverlayMap:
        return OverlayMap(self._map.base, self._changes.finish())
