"""Folded state to stored form and back, so that neither an open nor ``as_of`` replays the log.

One form, plain JSON (never pickle: auditors open ledgers they did not write, and opening a
file must never run code it brought), laid out from ``State``'s fields and each slice field's
codec (``codecs``), so a new concern needs nothing here.

A stored state is one entry per key of every slice field and of the stream versions, written
as a numbered *generation* in the store and read back lazily (``lazy``), one key at a time:
opening a ledger of a million events and deciding an undrop reads a dozen entries. A
generation is full, or a *delta*: only the entries changed since the one before it in its
chain, deletions included, so writing one costs what changed. Its head holds the scalars, each
part's entry count and the ``tip``: the chain hash of its last event, so a stored state cannot
outlive an edit of the log before it (R16). The store checks each entry's CRC when it is read.

Two writers make the same bytes: the held state (``keyed``: its maps' changes since the
generation it read from) and a fold from nothing stopped at chosen events (``Folded``: the keys
the fold says it changed), which ``maintain`` writes and ``verify`` compares with.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple

import attrs
import orjson

from ..core import events
from ..core.maps import GONE, Held, OverlayMap
from ..core.model import CONCERNS, State, fold_in_steps
from ..core.tables import CREATES, Tables
from ..errors import LedgerError
from . import archive, collector, lazy
from .archive import ARCHIVE_CODEC
from .codecs import PLAIN, KeyedCodec, MapOf, codec_of, encoder
from .lazy import Heal, Source, StoredEntries

KEYED_FORMAT = 13
"""Of stored states (11: versions' schemas; 12: pins; 13: versions' partition columns, erasures' fences
and no instances, objects vacuum runs found absent). A release that adds a concern (or a field of
one) changes the state's shape, so it bumps this: an earlier generation does not fit, and
`maintain` replaces them."""
GROWTH = 4
"""A chain of generations takes deltas until they hold this many times the entries of its full
generation; then the next is full, starting a new chain. A key's read (and a part's scan) costs
what its chain holds; every full generation costs the whole state, to write and to ``verify``."""
STREAMS = "streams"
"""The part holding each stream's version."""
INSTANCES, ARCHIVE = "tables.instances", "tables.archive"
"""The parts a stored state splits the fold's instances between: live ones, and purged ones."""
BY_ID = (INSTANCES, "pins.by_table")
"""The parts keyed by an instance's id: what a fold asks of the ids its events name. Of the
archive it asks only whether an id it creates was taken (``core.tables.CREATES``)."""
BY_NAME = ("tables.bindings", "tables.dropped")
"""The parts keyed by a table's name: what a fold asks of the names its events name, and of the
names of the instances they name (a purge or a database drop names only ids)."""
_STREAMS = MapOf(PLAIN)
_INSTANCES_FIELD = attrs.fields_dict(Tables)["instances"]


class SnapshotMismatch(ValueError):
    """The bytes are not a snapshot this release wrote, or were changed since."""


Row = tuple[str, str, "bytes | None"]
"""``(part, key, entry)``: an entry is JSON bytes; None records a key deleted since the last one."""


class Stored(NamedTuple):
    """A stored snapshot about to be written, and the state it stores (slices compacted)."""
    head: bytes
    rows: list[Row]
    delta: bool
    """Whether ``rows`` are only the changes since the generation ``keyed`` was asked to extend."""
    state: State


def _fields(state: State) -> Iterator[tuple[str, KeyedCodec, Any]]:
    """``(part name, the field's codec, its value)`` of every field a stored snapshot keeps."""
    yield STREAMS, _STREAMS, state.streams
    for name in CONCERNS:
        part = getattr(state, name)
        for field in attrs.fields(type(part)):
            yield f"{name}.{field.name}", codec_of(field), getattr(part, field.name)


def _mapped(state: State, value: Callable[[str, KeyedCodec, Any], Any]) -> State:
    """``state`` with every field a stored snapshot keeps replaced by ``value(part, codec, old)``."""
    slices = {}
    for name in CONCERNS:
        part = getattr(state, name)
        slices[name] = type(part)(**{field.name: value(f"{name}.{field.name}", codec_of(field),
                                                       getattr(part, field.name))
                                     for field in attrs.fields(type(part))})
    return attrs.evolve(state, streams=value(STREAMS, _STREAMS, state.streams), **slices)


def compacted(state: State) -> State:
    """The state as a stored snapshot keeps it: purged instances in the archive."""
    return attrs.evolve(state, tables=archive.for_snapshot(state.tables))


def entries_of(state: State) -> dict[str, dict[str, Any]]:
    """Every part a stored snapshot of ``state`` holds, each as ``{key: decoded item}``: what a
    stored part heals from when it cannot be read (``lazy``)."""
    return {part: dict(codec.entries(value).items()) for part, codec, value in _fields(compacted(state))}


def head_of(state: State, tip: str | None, counts: Mapping[str, int]) -> bytes:
    """A generation's head: the same bytes whichever writer made it (``verify`` compares them)."""
    return orjson.dumps({"format": KEYED_FORMAT, "seq": state.seq, "last_time": state.last_time,
                         "tip": tip, "counts": counts})


def keyed(state: State, tip: str | None, *, delta_of: object = None) -> Stored:
    """A stored state of ``state``: only what changed since generation ``delta_of`` if every part
    was read from it, else all of it."""
    with collector.paused():  # compacting and encoding allocate per entry and make no cycles
        return _keyed(compacted(state), tip, delta_of)


def _keyed(state: State, tip: str | None, delta_of: object) -> Stored:
    parts = [(part, codec, codec.entries(value)) for part, codec, value in _fields(state)]
    delta = delta_of is not None and all(
        isinstance(entries, OverlayMap) and isinstance(entries.base, StoredEntries)
        and entries.base.stamp == delta_of for _, _, entries in parts)
    rows: list[Row] = []
    counts: dict[str, int] = {}
    dumps = orjson.dumps
    for part, codec, entries in parts:
        encode = codec.encode_item
        if delta and isinstance(entries, OverlayMap):
            changed = [(key, item) for key, item in entries.changes.items() if item is not GONE]
            rows.extend((part, key, None) for key, item in entries.changes.items() if item is GONE)
        else:
            changed = list(entries.items())
        rows.extend(zip(itertools.repeat(part), (key for key, _ in changed), (dumps(encode(item)) for _, item in changed)))
        counts[part] = len(entries)
    return Stored(head_of(state, tip, counts), rows, delta, state)


def load_keyed(head: bytes, tip: str | None, part: Callable[[str], Source], stamp: object,
               heal: Callable[[str], Heal]) -> State:
    """The state a stored snapshot holds, reading its entries only when asked for (``lazy``);
    ``SnapshotMismatch`` if its head is not this release's or it was taken of another log.
    ``heal(part)`` gives a part's entries from the log if the snapshot cannot."""
    try:
        raw = orjson.loads(head)
        if raw["format"] != KEYED_FORMAT:
            raise SnapshotMismatch(f"snapshot format {raw['format']}, this release writes {KEYED_FORMAT}")
        if raw["tip"] != tip:
            raise SnapshotMismatch("the snapshot was taken of a different log (its tip is not the log's hash there)")
        counts = raw["counts"]
        return _mapped(State(seq=raw["seq"], last_time=raw["last_time"]), lambda name, codec, _: codec.stored(
            OverlayMap(StoredEntries(part(name), _decoder(codec), counts[name], stamp, heal(name)))))
    except SnapshotMismatch:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotMismatch(f"the snapshot's head does not fit this release: {exc}") from None


def prefetch(state: State, rows: Iterable[events.Row]) -> None:
    """Before a fold of stored ``rows`` on top of ``state`` read from a stored state (``as_of``):
    read, many to a statement, the entries of ``BY_ID`` and ``BY_NAME`` the fold will ask for, by
    the ids and names its events carry. Asked one key at a time they were a few thousand point
    reads and then, past a sixteenth of a part, a read of the whole part with every version along
    its chain (at the worst point of a million events' churn: 13,234 instances, 8,084 names and
    10,241 dropped names asked; three whole parts of 136,000-239,000 rows, 0.8 s of 1.3 s).
    Only a saving: a key not fetched here is read when asked for, as before."""
    try:
        ids, created, names = _named(rows)
    except (LedgerError, TypeError, ValueError, KeyError, AttributeError):
        return  # the fold that follows finds, and names, what is wrong with the rows
    parts = {part: codec.entries(value) for part, codec, value in _fields(state)}
    for part in BY_ID:
        lazy.prefetch(parts[part], ids)
    lazy.prefetch(parts[ARCHIVE], created)
    instances = parts[INSTANCES]
    names.update(found.name for found in map(instances.get, ids) if found is not None)
    for part in BY_NAME:
        lazy.prefetch(parts[part], names)


def prefetch_instances(state: State, ids: Iterable[str]) -> None:
    """Before asking ``state`` read from a stored state for many instances one at a time (a listing
    of its tables): read those of ``ids`` not read yet, many to a statement. After a fresh open of a
    million events' churn, ``tables()`` made a point read for each of its 3,627 tables (3,898
    statements; 279 with this). Only a saving, as ``prefetch``."""
    lazy.prefetch(codec_of(_INSTANCES_FIELD).entries(state.tables.instances), ids)


def _named(rows: Iterable[events.Row]) -> tuple[set[str], set[str], set[str]]:
    """The instance ids (``table_id``, ``table_ids``), those created, and the table names (``name``)
    the events of ``rows`` (``(seq, stream, version, type, schema_version, time, actor, payload)``) carry."""
    ids: set[str] = set()
    created: set[str] = set()
    names: set[str] = set()
    decode = events.decode_event
    for row in rows:
        event = decode(row[0], row[3], row[4], row[7])
        one, many, name = (getattr(event, field, None) for field in ("table_id", "table_ids", "name"))
        if isinstance(one, str):
            ids.add(one)
            if row[3] in CREATES:
                created.add(one)
        if isinstance(many, tuple):
            ids.update(many)
        if isinstance(name, str):
            names.add(name)
    return ids, created, names


def _decoder(codec: KeyedCodec) -> Callable[[str, bytes], Any]:
    decode_item = codec.decode_item
    return lambda key, data: decode_item(key, orjson.loads(data))


def read_all(state: State) -> None:
    """Read every stored entry ``state`` still reads lazily (a part that cannot be read heals)."""
    for _, codec, value in _fields(state):
        entries = codec.entries(value)
        if isinstance(entries, OverlayMap):
            entries.base.everything()


def rebased(written: Stored, part: Callable[[str], Source], stamp: object, heal: Callable[[str], Heal]) -> State:
    """The state just written as stored snapshot ``stamp``: its maps now read from that one, with
    no changes on top, keeping everything already decoded (all of it, for a map held in full), so
    that the next snapshot can be a delta of this one."""
    counts = orjson.loads(written.head)["counts"]

    def rebase(name: str, codec: KeyedCodec, value: Any) -> Any:
        entries = codec.entries(value)
        if isinstance(entries, OverlayMap) and isinstance(entries.base, StoredEntries):
            return codec.stored(OverlayMap(entries.base.rebased(part(name), entries.changes, counts[name], stamp,
                                                                heal(name))))
        return codec.stored(OverlayMap(StoredEntries(part(name), _decoder(codec), counts[name], stamp, heal(name),
                                                     dict(entries.items()))))

    return _mapped(written.state, rebase)


class Folded:
    """A fold (``core.fold.Steps``), stop by stop, as a stored state keeps it.

    It keeps every entry's bytes, re-encoding at each stop only the keys the fold says it changed:
    so the rows of a delta cost what changed, a full generation's cost no encoding at all, and
    the head only counting. ``maintain`` writes them; ``verify`` compares the stored ones with them."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, bytes]] = {}
        """Each part's entries, as a stored state of the fold's state at the last stop holds them."""
        self._streams: set[str] = set()
        """The streams of the rows folded since the last stop (stream versions are not a map the
        fold tracks)."""

    def stops(self, base: State, read: Callable[[int, int], Iterable[events.Row]],
              at: Iterable[int]) -> Iterator[tuple[State, dict[str, set[str]]]]:
        """Fold on from ``base`` through ``read(after, upto)``'s rows, stopping at each of ``at``
        (ascending): there, the state (good until the next stop) and the keys changed since the
        last stop, by part (every key, at the first)."""
        steps, seq = fold_in_steps(base), base.seq
        first = True
        for stop in at:
            seq = steps.fold_rows(self._through(read(seq, stop)))
            state, changed = steps.look()
            changed[STREAMS], self._streams = self._streams, set()
            if first:  # what the fold does not track (it only grows by compaction) is all new too
                changed[STREAMS] = set(state.streams.keys())
                changed[ARCHIVE] = {i.id for i in state.tables.archive.values()}
                first = False
            self._saw(state, changed)
            yield state, changed

    def _through(self, rows: Iterable[events.Row]) -> Iterator[events.Row]:
        add = self._streams.add
        for row in rows:
            add(row[1])
            yield row

    def _saw(self, state: State, changed: Mapping[str, Iterable[str]]) -> None:
        """Re-encode the keys ``changed`` (by part); a purged instance moves to the archive.

        Each step is ``map`` over C functions (a dict's ``get``, a record's ``attrgetter``, orjson),
        not a Python loop an entry: re-encoding what a million events changed went from 1.48 to
        1.32 chain floors that way (issue 48); looking the keys up in the fold's own dicts
        (``_getter``) rather than through each map's ``get`` (1.3 us a key), and the instances
        split by ``compress`` instead of a loop, took ``_saw`` from 8.3 to 7.0 s of CPU on the
        large state (810,000 events; one fold, the two alternating, load 15). What is left is the
        encoding itself (orjson and a record's fields, about 0.8 us an entry on a quiet machine)."""
        entries = self._entries
        fields = {part: (encoder(codec), codec.entries(value)) for part, codec, value in _fields(state)}
        for part in fields:
            entries.setdefault(part, {})
        for part, keys in changed.items():
            if part != INSTANCES:
                encode, value = fields[part]
                _encoded(entries[part], keys, _getter(value), encode)
        self._saw_instances(fields[INSTANCES][1], changed.get(INSTANCES, ()))

    def _saw_instances(self, instances: Mapping[str, Any], changed: Iterable[str]) -> None:
        """The instances ``changed``: a live one re-encoded where it is, a purged one moved to the
        archive (its details re-encoded there), one gone dropped."""
        keys = list(changed)
        found = list(map(_getter(instances), keys, itertools.repeat(None)))
        kept, archived = self._entries[INSTANCES], self._entries[ARCHIVE]
        present = list(map(operator.is_not, found, itertools.repeat(None)))
        for key in itertools.compress(keys, map(operator.not_, present)):
            kept.pop(key, None)
        keys, found = list(itertools.compress(keys, present)), list(itertools.compress(found, present))
        live = list(map(operator.is_, map(_PURGED_AT, found), itertools.repeat(None)))
        kept.update(zip(itertools.compress(keys, live),
                        map(orjson.dumps, map(_LIVE, itertools.compress(found, live)))))
        purged = list(map(operator.not_, live))
        for key in itertools.compress(keys, purged):
            kept.pop(key, None)
        archived.update(zip(itertools.compress(keys, purged),
                            map(orjson.dumps, map(ARCHIVE_CODEC.encode_item, itertools.compress(found, purged)))))

    def head(self, state: State, tip: str | None) -> bytes:
        """The head of a generation of the state at the last stop."""
        return head_of(state, tip, {part: len(entries) for part, entries in self._entries.items()})

    def entries(self, part: str) -> Mapping[str, bytes]:
        """One part's entries of a stored state of the state at the last stop (read them, never change them)."""
        return self._entries.get(part, {})

    def size(self) -> int:
        """How many entries a full stored state of the state at the last stop holds."""
        return sum(map(len, self._entries.values()))

    def entry(self, part: str, key: str) -> bytes | None:
        """One entry of a stored state of the state at the last stop (None: there is none)."""
        return self._entries[part].get(key)

    def rows(self, keys: Mapping[str, Iterable[str]] | None = None) -> list[Row]:
        """The entries of a generation of the state at the last stop: all of them (``keys`` None),
        else those of ``keys`` (by part), a key gone recorded as None. An instance changed is
        written in the archive too if it is there (a purge)."""
        entries = self._entries
        if keys is None:
            return [(part, key, entry) for part, found in entries.items() for key, entry in found.items()]
        rows: list[Row] = []
        for part, wanted in keys.items():
            found = entries[part].get
            rows.extend((part, key, found(key)) for key in wanted)
        archived = entries[ARCHIVE]
        rows.extend((ARCHIVE, key, archived[key]) for key in keys.get(INSTANCES, ()) if key in archived)
        return list({(part, key): (part, key, entry) for part, key, entry in rows}.values())  # each key once


_PURGED_AT = operator.attrgetter("purged_at")
_LIVE: Callable[[Any], Any] = encoder(codec_of(_INSTANCES_FIELD)) or codec_of(_INSTANCES_FIELD).encode_item
"""A live instance as a stored state keeps it (a record's fields, in order: an ``attrgetter``)."""


def _getter(value: Mapping[str, Any]) -> Callable[[str, Any], Any]:
    """``value``'s ``get(key, default)``, straight from the dict under it where the fold holds one
    (a big map of a fold in ``core.fold.Steps`` is an ``OverlayMap`` over the fold's own dict, with
    nothing on top): about 0.1 us a key against 1.3 us through the overlay's ``get``."""
    if isinstance(value, OverlayMap) and not value.changes and isinstance(value.base, Held):
        return value.base.everything().get
    return value.get


def _encoded(mine: dict[str, bytes], keys: Iterable[str], get: Callable[[str, Any], Any],
             encode: Callable[[Any], Any] | None) -> None:
    """``mine`` (a part's entries, encoded) brought up to date for ``keys``, read through ``get``:
    each key present re-encoded (``encode``, then orjson; None: the item as it is), each gone dropped."""
    keys = list(keys)
    items = list(map(get, keys, itertools.repeat(GONE)))
    present = list(map(operator.is_not, items, itertools.repeat(GONE)))
    for key in itertools.compress(keys, map(operator.not_, present)):
        mine.pop(key, None)
    values = itertools.compress(items, present)
    mine.update(zip(itertools.compress(keys, present), map(orjson.dumps, values if encode is None else map(encode, values))))
