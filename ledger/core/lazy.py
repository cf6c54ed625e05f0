"""Maps read one key at a time from a stored snapshot, so that opening a big ledger reads only
what the next command looks at.

A ledger of a million events folds to hundreds of thousands of entries, nearly all of
which a command never touches: an undrop reads one name, one instance and three
watermarks. Parsing all of them on every open (half a second) is what this avoids.
A ``LazyMap`` stands where a slice's persistent map would, answering from:

* its *changes*: a persistent map of what the fold set (or deleted: ``GONE``) since the
  snapshot, so a state stays a value and each fold returns a new map sharing the rest;
* the *base*: the snapshot's entries, read through a ``Source`` (the store's rows) and
  decoded the first time each key is asked for. Decoded entries are cached in an object
  that every map folded from the same base shares: the base never changes.

A replay from nothing builds its maps as plain dicts; a big one becomes the *held* base of
a ``LazyMap`` (``Base.held``), stored nowhere and complete from the start, rather than being
copied into a persistent map (that copy was about a tenth of a million-event replay).

Anything that walks the whole map (a vacuum's plan, a history snapshot, ``verify``)
reads the base once, in full, and from then on the map answers from memory.

The core knows nothing of SQLite: a ``Source`` is anything that answers ``get`` and
``scan`` for one part of one snapshot. A source whose snapshot was deleted under it,
or whose entry fails its check, raises ``SnapshotGone``: the runner
then reloads from the newest snapshot (or the log) and decides again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Iterator, Mapping, Protocol

from immutables import Map

from ..errors import SnapshotGone

GONE: Any = object()
"""In a map's changes: the key was deleted since the snapshot."""
_ABSENT: Any = object()


class Source(Protocol):
    """One part (one slice field) of one stored snapshot: entries as bytes, by key. ``failed`` is
    set (to "bad": damaged, "gone": replaced) when a read of it raised ``SnapshotGone``."""

    failed: str | None

    def get(self, key: str) -> bytes | None: ...

    def scan(self) -> Iterator[tuple[str, bytes]]: ...


class Base:
    """A snapshot part and what has been decoded of it; shared by every map folded from it.

    ``stamp`` names the stored snapshot (the runner's generation number), so the writer of
    the next one can tell whether a map's changes are relative to it."""

    __slots__ = ("source", "decode", "size", "stamp", "found", "complete")

    def __init__(self, source: Source, decode: Callable[[str, bytes], Any], size: int, stamp: object,
                 everything: dict[str, Any] | None = None) -> None:
        """``everything``: every entry, already decoded (the base is then complete, and takes the
        dict over: nothing may change it afterwards)."""
        self.source = source
        self.decode = decode
        self.size = size
        self.stamp = stamp
        self.found: dict[str, Any] = {} if everything is None else everything
        """key -> decoded value, or GONE for a key asked for and not in the snapshot."""
        self.complete = everything is not None

    @classmethod
    def held(cls, entries: dict[str, Any]) -> Base:
        """A base of entries held in memory, stored in no snapshot (``stamp`` None)."""
        return cls(_HELD, _never_decoded, len(entries), None, entries)

    @property
    def stored(self) -> bool:
        """Whether the entries come from a stored snapshot (which archived what it had purged)."""
        return self.stamp is not None

    def get(self, key: str) -> Any:
        found = self.found.get(key, _ABSENT)
        if found is _ABSENT:
            if self.complete:
                return GONE
            data = self.source.get(key)
            found = GONE if data is None else self.decode(key, data)
            self.found[key] = found
        return found

    def everything(self) -> dict[str, Any]:
        """Every entry, decoded (read in one pass the first time)."""
        if not self.complete:
            decode = self.decode
            found = {key: decode(key, data) for key, data in self.source.scan()}
            if len(found) != self.size:
                self.source.failed = "bad"  # the head or the entries were changed: not to be read again
                raise SnapshotGone(f"a stored snapshot holds {len(found)} entries where it recorded "
                                   f"{self.size}; it is ignored and rebuilt: retry")
            self.found, self.complete = found, True
        return self.found

    def rebased(self, source: Source, changes: Map, size: int, stamp: object) -> Base:
        """This base with ``changes`` applied, now stored as ``source``: what was decoded stays."""
        base = Base(source, self.decode, size, stamp)
        found = dict(self.found)
        found.update(changes)
        if self.complete:
            found = {key: value for key, value in found.items() if value is not GONE}
        base.found, base.complete = found, self.complete
        return base


class _Held:
    """The source of a held base: complete from the start, so never read."""
    failed: str | None = None

    def get(self, key: str) -> bytes | None:
        raise AssertionError("a held base is never read from a source")

    def scan(self) -> Iterator[tuple[str, bytes]]:
        raise AssertionError("a held base is never read from a source")


_HELD = _Held()


def _never_decoded(key: str, data: bytes) -> Any:
    raise AssertionError("a held base is never decoded")


class _Reads(ABC):
    """Reading one key, through ``_lookup`` (GONE: not there)."""

    __slots__ = ()

    @abstractmethod
    def _lookup(self, key: str) -> Any:
        """The value of ``key``, from the changes first, then the base."""

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


class LazyMap(_Reads, Mapping[str, Any]):
    """A snapshot part plus the changes folded on top of it; reads like ``immutables.Map``."""

    __slots__ = ("base", "changes")

    def __init__(self, base: Base, changes: Map = Map()) -> None:
        self.base = base
        self.changes = changes

    def _lookup(self, key: str) -> Any:
        value = self.changes.get(key, _ABSENT)
        if value is _ABSENT:
            value = self.base.get(key)
        return value


    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        base = self.base
        size = base.size  # without reading the whole base: only the changed keys are looked up
        for key, value in self.changes.items():
            size += (value is not GONE) - (base.get(key) is not GONE)
        return size

    def items(self):  # type: ignore[override]
        return self._merged().items()

    def values(self):  # type: ignore[override]
        return self._merged().values()

    def keys(self):  # type: ignore[override]
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

    def update(self, more: Mapping[str, Any]) -> LazyMap:
        return LazyMap(self.base, self.changes.update(more))

    def mutate(self) -> LazyMutation:
        return LazyMutation(self)

    def __repr__(self) -> str:
        return f"<LazyMap of {self.base.size} stored entries, {len(self.changes)} changed>"


class LazyMutation(_Reads):
    """``LazyMap.mutate()``: what the fold changes in place, frozen again by ``finish``."""

    __slots__ = ("_map", "_changes")

    def __init__(self, of: LazyMap) -> None:
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

    def finish(self) -> LazyMap:
        return LazyMap(self._map.base, self._changes.finish())
