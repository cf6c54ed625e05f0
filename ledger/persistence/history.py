"""History snapshots written, and checked, at the cost of what changed since the last one.

A history snapshot is one document: the state at a multiple of ``history_every`` events,
from which ``as_of`` folds a short way (R17). A fold passes many of them (a first open's
``maintain`` writes them all; ``verify`` compares each with the fold), and encoding the whole
state at each costs the fold several times over. ``HistoryEncoder`` keeps one fold's
encoding from stop to stop and redoes only the entries that changed: those the fold says it
changed (``core.fold.Steps.look``), or else the entries that are not the very objects encoded
last time.

The layout is fixed by the state alone, whatever process folded it and in what order: every
map is a JSON object with its keys sorted, as is everything else. So ``verify`` compares
bytes. Purged instances are left
out, as the present state holds them (``archive.from_history`` gives them back).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import attrs
import orjson

from ..core.maps import GONE
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
    """One map field's encoding: each entry's ``"key":value`` bytes, by key, and their order."""

    __slots__ = ("seen", "items", "pairs", "order", "present", "added", "removed")

    def __init__(self) -> None:
        self.seen: dict[str, Any] | None = {}
        """Every item met under each key, left out or not (compared by identity); None once the fold
        says what changes (``sync``)."""
        self.items: dict[str, Any] = {}
        """The item each key's bytes were made from."""
        self.pairs: dict[str, bytes] = {}
        """Each entry's bytes: the key's JSON, a colon, the item's JSON."""
        self.order: list[str] | None = None
        """The keys of ``pairs`` in order, as the last document laid them out (and as a set)."""
        self.present: set[str] = set()
        self.added: list[str] = []
        """Keys given bytes since the last document that were not in it then (some perhaps gone again)."""
        self.removed = False

    def sync(self, value: Mapping[str, Any], encode: Any, leave_out: Any, changed: Iterable[str] | None) -> None:
        """Bring the encoding up to ``value`` (a map): only the keys in ``changed`` when the fold says
        which changed since the last sync (``core.fold.Steps``), else every entry not seen as it is."""
        if changed is not None:
            self.seen = None  # the fold says what changes: what was seen need not be kept
            get = value.get
            for key in changed:
                self._put(key, get(key, GONE), encode, leave_out)
            return
        seen = self.seen
        if seen is None:  # after syncs the fold told: compare with what was encoded (left-out ones again)
            items = self.items.get
            for key in self.items.keys() - value.keys():
                self._put(key, GONE, encode, leave_out)
            for key, item in [(key, item) for key, item in value.items() if items(key) is not item]:
                self._put(key, item, encode, leave_out)
            return
        known = seen.get
        for key in seen.keys() - value.keys() if seen else ():
            self._put(key, GONE, encode, leave_out)
        for key, item in [(key, item) for key, item in value.items() if known(key) is not item]:
            self._put(key, item, encode, leave_out)

    def _put(self, key: str, item: Any, encode: Any, leave_out: Any) -> None:
        seen = self.seen
        if seen is not None:
            if item is GONE:
                seen.pop(key, None)
            else:
                seen[key] = item
        if item is not GONE and leave_out is not None and leave_out(item):
            item = GONE
        items = self.items
        if item is GONE:
            if items.pop(key, None) is not None:
                del self.pairs[key]
                self.removed = True
            return
        was = items.get(key)
        if was is not item:
            items[key] = item
            if was is None:
                self.added.append(key)
            self.pairs[key] = orjson.dumps(key) + b":" + orjson.dumps(encode(item))

    def value(self, key: str) -> bytes:
        """The item's JSON alone (what a stored generation's entry holds)."""
        pair = self.pairs[key]
        return pair[len(orjson.dumps(key)) + 1:]

    def document(self) -> bytes:
        """The entries as one JSON object, keys in order: the last document's order, less the keys
        gone since, merged with the keys added since (two sorted runs: a linear merge), rather
        than every key sorted again at every snapshot."""
        pairs, order = self.pairs, self.order
        if order is None:
            order = sorted(pairs)
            self.present = set(order)
        else:
            if self.removed:
                order = [key for key in order if key in pairs]
                self.present = set(order)
            new = sorted({key for key in self.added if key in pairs and key not in self.present})
            if new:
                order += new
                order.sort()
                self.present.update(new)
        self.order, self.added, self.removed = order, [], False
        return b"{" + b",".join([pairs[key] for key in order]) + b"}"


class HistoryEncoder:
    """The history snapshots of one fold, each encoded from the previous one's encoding."""

    def __init__(self) -> None:
        self._maps: dict[str, _Map] = {}

    def sync(self, state: State, changed: Mapping[str, Iterable[str]] | None = None) -> None:
        """Bring the encoding up to ``state``. ``changed``: the keys of each map field (``"slice.field"``)
        the fold changed since the state this encoder last saw (``Steps.look``: every look's changes
        must reach it); None: find them by comparing every entry."""
        for where, codec, value in _map_fields(state):
            encoded = self._maps.get(where)
            keys = None if changed is None or encoded is None else changed.get(where, ())
            if encoded is None:
                encoded = self._maps[where] = _Map()
            encoded.sync(value, codec.encode_item, left_to_the_present if where == INSTANCES else None, keys)

    def body(self, state: State, tip: str | None, changed: Mapping[str, Iterable[str]] | None = None) -> bytes:
        """The document (before its digest and compression) of a history snapshot of ``state``;
        ``tip`` is the chain hash of event ``state.seq``; ``changed`` as for ``sync``."""
        self.sync(state, changed)
        return self.document(state, tip)

    def document(self, state: State, tip: str | None) -> bytes:
        """The document of ``state``, which this encoder was last brought up to (``sync``)."""
        slices: dict[str, dict[str, Any]] = {}
        raw_index: list[list[str]] = []
        raw_parts: list[bytes] = []
        for name in CONCERNS:
            part = getattr(state, name)
            fields: dict[str, Any] = {}
            for field in attrs.fields(type(part)):
                codec, where = codec_of(field), f"{name}.{field.name}"
                if isinstance(codec, MapOf):
                    fields[field.name] = orjson.Fragment(self._maps[where].document())
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
        if found is None:
            return [orjson.dumps(encode(item)) for _, item in items]
        known, value, dumps = found.items.get, found.value, orjson.dumps
        return [value(key) if known(key) is item else dumps(encode(item)) for key, item in items]


def _map_fields(state: State) -> Iterable[tuple[str, MapOf, Any]]:
    for name in CONCERNS:
        part = getattr(state, name)
        for field in attrs.fields(type(part)):
            codec = codec_of(field)
            if isinstance(codec, MapOf):
                yield f"{name}.{field.name}", codec, getattr(part, field.name)
