"""History snapshots written, and checked, at the cost of what changed since the last one.

A history snapshot is one document: the state at a multiple of ``history_every`` events,
from which ``as_of`` folds a short way (R17). A fold passes many of them (a first open's
backfill writes them all; ``verify`` compares each with the fold), and encoding the whole
state at each costs the fold several times over. ``HistoryEncoder`` keeps one fold's
encoding from stop to stop and redoes only the entries that changed: in an ``OverlayMap``
still over the entries last seen, those are its ``changes``; in a map of its own (a long fold
copies big maps: ``fold.BULK``), the entries that are not the very objects encoded last time.

The layout is fixed by the state alone, whatever process folded it and in what order: every
map is a JSON object with its keys sorted, as is everything else. So ``verify`` compares
bytes. Purged instances are left
out, as the present state holds them (``archive.from_history`` gives them back).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import attrs
import orjson

from ..core.fold import Tracked
from ..core.maps import GONE, Held, OverlayMap
from ..core.model import CONCERNS, State
from ..core.tables import NO_ARCHIVE
from .archive import left_to_the_present
from .codecs import MapOf, codec_of

FORMAT = 10
"""Of history snapshots. A state's shape changed means a new format: a snapshot of an old one is
ignored and rebuilt from the log (10: versions' schemas). Snapshots whose keys ran in another
order read the same; ``verify`` compares those by their decoded state."""
INSTANCES = "tables.instances"


class _Map:
    """One map field's encoding: each entry's ``"key":value`` bytes, by key."""

    __slots__ = ("seen", "items", "values", "pairs", "base", "changes", "tracked")

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}
        """Every item met under each key, left out or not (compared by identity)."""
        self.items: dict[str, Any] = {}
        """The item each key's bytes were made from."""
        self.values: dict[str, bytes] = {}
        """Each item's JSON (what a stored snapshot's entry holds)."""
        self.pairs: dict[str, bytes] = {}
        self.base: object = None
        """The entries under the ``OverlayMap`` last seen (its changes are what moved since)."""
        self.changes: object = None
        self.tracked: Tracked | None = None
        """The dict of a fold in steps last seen (it tells which keys changed since)."""

    def sync(self, value: Any, encode: Any, leave_out: Any) -> None:
        """Bring the encoding up to ``value`` (a map), encoding only entries not seen as they are."""
        held = value.base.found if isinstance(value, OverlayMap) and isinstance(value.base, Held) else None
        if isinstance(held, Tracked) and not value.changes:
            if held is self.tracked:  # the same fold, paused again: it knows what changed
                for key in held.take_changed():
                    self._put(key, held.get(key, GONE), encode, leave_out)
                return
            held.take_changed()  # from here on, what changes is told; this once, compare all
            self.tracked = held
        else:
            self.tracked = None
        if isinstance(value, OverlayMap) and value.base is self.base:
            if value.changes is not self.changes:
                for key, item in value.changes.items():
                    self._put(key, item, encode, leave_out)
        else:  # a map of its own (a long fold copies big maps): find what changed, in C where it can
            known = self.seen.get
            for key in self.seen.keys() - value.keys() if self.seen else ():
                self._put(key, GONE, encode, leave_out)
            for key, item in [(key, item) for key, item in value.items() if known(key) is not item]:
                self._put(key, item, encode, leave_out)
        if isinstance(value, OverlayMap):
            self.base, self.changes = value.base, value.changes
        else:
            self.base = self.changes = None

    def _put(self, key: str, item: Any, encode: Any, leave_out: Any) -> None:
        if item is GONE:
            self.seen.pop(key, None)
        else:
            self.seen[key] = item
            if leave_out is not None and leave_out(item):
                item = GONE
        if item is GONE:
            if self.items.pop(key, None) is not None:
                del self.values[key], self.pairs[key]
        elif self.items.get(key) is not item:
            self.items[key] = item
            value = self.values[key] = orjson.dumps(encode(item))
            self.pairs[key] = orjson.dumps(key) + b":" + value

    def document(self) -> bytes:
        pairs = self.pairs
        return b"{" + b",".join([pairs[key] for key in sorted(pairs)]) + b"}"


class HistoryEncoder:
    """The history snapshots of one fold, each encoded from the previous one's encoding."""

    def __init__(self) -> None:
        self._maps: dict[str, _Map] = {}

    def body(self, state: State, tip: str | None) -> bytes:
        """The document (before its digest and compression) of a history snapshot of ``state``;
        ``tip`` is the chain hash of event ``state.seq``."""
        slices: dict[str, dict[str, Any]] = {}
        raw_index: list[list[str]] = []
        raw_parts: list[bytes] = []
        for name in CONCERNS:
            part = getattr(state, name)
            fields: dict[str, Any] = {}
            for field in attrs.fields(type(part)):
                codec, where = codec_of(field), f"{name}.{field.name}"
                if isinstance(codec, MapOf):
                    encoded = self._maps.get(where)
                    if encoded is None:
                        encoded = self._maps[where] = _Map()
                    encoded.sync(getattr(part, field.name), codec.encode_item,
                                 left_to_the_present if where == INSTANCES else None)
                    fields[field.name] = orjson.Fragment(encoded.document())
                elif codec.raw:  # the purged instances' archive: left to the present state
                    raw_index.append([name, field.name])
                    raw_parts.append(codec.encode(NO_ARCHIVE))
                else:
                    fields[field.name] = codec.encode(getattr(part, field.name))
            slices[name] = fields
        head = orjson.dumps({"format": FORMAT, "seq": state.seq, "last_time": state.last_time, "tip": tip,
                             "history": True, "streams": dict(state.streams), "slices": slices,
                             "raw": raw_index}, option=orjson.OPT_SORT_KEYS)
        return b"\n".join([head, *raw_parts])

    def all_of(self, part: str, items: Iterable[tuple[str, Any]], encode: Callable[[Any], Any]) -> list[bytes]:
        """Each item's JSON, taken from this encoding where the item is the one last encoded: so a
        stored snapshot of the state just encoded costs a lookup an entry (``snapshot.keyed``)."""
        found = self._maps.get(part)
        known_items = {} if found is None else found.items
        known_values = {} if found is None else found.values
        dumps = orjson.dumps
        return [known_values[key] if known_items.get(key) is item else dumps(encode(item)) for key, item in items]
