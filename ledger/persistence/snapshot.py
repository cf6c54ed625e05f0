"""Folded state to stored form and back, so that opening a big ledger does not replay all of it.

Two forms, both plain JSON (never pickle: auditors open ledgers they did not write,
and opening a file must never run code it brought), both laid out from ``State``'s
fields and each slice field's codec (``codecs``), so a new concern needs nothing here.

The *stored snapshot* of the present (``keyed``/``load_keyed``) is one entry per key of
every slice field and of the stream versions, written by the state cache as a numbered
generation in the store and read back lazily (``lazy``), one key at a time: opening a
ledger of a million events and deciding an undrop reads a dozen entries. A generation
is full, or a *delta*: only the entries changed since the generation the state was read
from (an ``OverlayMap``'s changes, deletions included), so writing one costs what changed.
Its head holds the scalars, each part's entry count and the ``tip``: the chain hash of
its last event, so a snapshot cannot outlive an edit of the log before it (R16). The
store checks each entry's CRC when it is read; ``verify`` compares the whole of it with
the fold.

A *history* snapshot (``dump``/``load``) is one compressed document: a past state kept so
that ``as_of`` (R17) folds a few thousand events, not a million. Many are kept, so each
leaves out what the present state can give back exactly (``archive``: the purged
instances, which are final). ``load`` also
reads the one-document catalog snapshot of earlier releases, once, on upgrade.
"""

from __future__ import annotations

import hashlib
import itertools
import zlib
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple


import attrs
import orjson
from immutables import Map

from ..core.maps import GONE, OverlayMap
from ..core.model import CONCERNS, State
from . import archive, collector, history
from .codecs import PLAIN, KeyedCodec, MapOf, codec_of
from .history import HistoryEncoder
from .lazy import Heal, Source, StoredEntries

FORMAT = history.FORMAT
"""Of history snapshots (one document each: ``history``)."""
KEYED_FORMAT = 11
"""Of the stored, keyed snapshot of the present (11: versions' schemas)."""
STREAMS = "streams"
"""The part holding each stream's version."""
_STREAMS = MapOf(PLAIN)


class SnapshotMismatch(ValueError):
    """The bytes are not a snapshot this release wrote, or were changed since."""


def _encoded_afresh(part: str, items: Iterable[tuple[str, Any]], encode: Callable[[Any], Any]) -> list[bytes]:
    dumps = orjson.dumps
    return [dumps(encode(item)) for _, item in items]


# --- the stored snapshot: one entry per key, read lazily --------------------------------------

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


def keyed(state: State, tip: str | None, *, delta_of: object = None, encoder: HistoryEncoder | None = None) -> Stored:
    """A stored snapshot of ``state``: only what changed since stored snapshot ``delta_of`` if every
    part was read from it, else all of it."""
    with collector.paused():  # compacting and encoding allocate per entry and make no cycles
        return _keyed(compacted(state), tip, delta_of, _encoded_afresh if encoder is None else encoder.all_of)


def _keyed(state: State, tip: str | None, delta_of: object,
           encoded: Callable[[str, Iterable[tuple[str, Any]], Any], list[bytes]]) -> Stored:
    parts = [(part, codec, codec.entries(value)) for part, codec, value in _fields(state)]
    delta = delta_of is not None and all(
        isinstance(entries, OverlayMap) and isinstance(entries.base, StoredEntries)
        and entries.base.stamp == delta_of for _, _, entries in parts)
    rows: list[Row] = []
    counts: dict[str, int] = {}
    for part, codec, entries in parts:
        encode = codec.encode_item
        if delta and isinstance(entries, OverlayMap):
            changed = [(key, item) for key, item in entries.changes.items() if item is not GONE]
            rows.extend((part, key, None) for key, item in entries.changes.items() if item is GONE)
        else:
            changed = list(entries.items())
        rows.extend(zip(itertools.repeat(part), (key for key, _ in changed), encoded(part, changed, encode)))
        counts[part] = len(entries)
    head = orjson.dumps({"format": KEYED_FORMAT, "seq": state.seq, "last_time": state.last_time,
                         "tip": tip, "counts": counts})
    return Stored(head, rows, delta, state)


def entries_match(stored: Stored, scan: Callable[[str], Iterator[tuple[str, bytes]]]) -> bool:
    """Whether every part ``scan`` gives (each stored part's entries, as bytes) holds exactly the
    entries of ``stored``, a full stored snapshot just encoded: no more, no fewer, no other bytes."""
    wanted: dict[str, dict[str, bytes | None]] = {part: {} for part, _, _ in _fields(stored.state)}
    for part, key, entry in stored.rows:
        wanted[part][key] = entry
    return all(dict(scan(part)) == entries for part, entries in wanted.items())


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


# --- history snapshots: one document each -----------------------------------------------------


def dump(state: State, tip: str | None, *, encoder: HistoryEncoder | None = None,
         changed: Mapping[str, Iterable[str]] | None = None) -> bytes:
    """A history snapshot of ``state``; ``tip`` is the chain hash of event ``state.seq`` (None for a
    log without the chain). ``encoder``: the one that encoded this fold's previous snapshots, and
    ``changed`` what the fold changed since (``HistoryEncoder.body``)."""
    with collector.paused():  # on a big heap the collector's rescans cost twice the encoding
        body = (encoder or HistoryEncoder()).body(state, tip, changed)
    return zlib.compress(hashlib.sha256(body).hexdigest().encode() + b"\n" + body, 1)


def history_matches(data: bytes, state: State, tip: str | None, encoder: HistoryEncoder) -> bool:
    """Whether the stored history snapshot ``data`` is intact and holds exactly the bytes a snapshot
    of ``state`` would (``encoder`` brought up to it: ``HistoryEncoder.sync``): proof it agrees with
    the fold, without decoding it. False proves nothing (a snapshot of an earlier release is laid
    out otherwise): compare decoded states then."""
    try:
        plain = zlib.decompress(data)
    except zlib.error:
        return False
    start = plain.find(b"\n") + 1
    with collector.paused():
        fresh = encoder.document(state, tip)
    return bool(start) and plain[:start - 1] == hashlib.sha256(fresh).hexdigest().encode() and \
        memoryview(plain)[start:] == fresh


def load(data: bytes, tip: str | None, *, present: State | None = None) -> State:
    """The state a snapshot holds, if it ends at the event whose chain hash is ``tip``;
    ``SnapshotMismatch`` if it cannot be trusted. A history snapshot needs ``present``, a
    state at or after it, to give back what it left out."""
    if data[:1] == b"x":  # a zlib stream (a history snapshot); a plain one starts with hex digits
        try:
            data = zlib.decompress(data)
        except zlib.error as exc:
            raise SnapshotMismatch(f"the snapshot cannot be decompressed: {exc}") from None
    start = data.find(b"\n") + 1
    # Hashed and cut up in place: copying a snapshot of tens of MB costs as much as parsing its head.
    if not start or hashlib.sha256(memoryview(data)[start:]).hexdigest().encode() != data[:start - 1]:
        raise SnapshotMismatch("the snapshot's digest does not match its contents")
    with collector.paused():  # like a replay: many small objects, no cycles
        try:
            return _load(_lines(data, start), tip, present)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise SnapshotMismatch(f"the snapshot does not fit this release: {exc}") from None


def _lines(data: bytes, start: int) -> list[bytes]:
    """``data[start:].split(b"\n")`` without first copying ``data[start:]``."""
    parts = []
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            parts.append(data[start:])
            return parts
        parts.append(data[start:end])
        start = end + 1


def _load(lines: list[bytes], tip: str | None, present: State | None) -> State:
    head, *raw_parts = lines
    raw = orjson.loads(head)
    if raw["format"] != FORMAT:
        raise SnapshotMismatch(f"snapshot format {raw['format']}, this release writes {FORMAT}")
    if raw["tip"] != tip:
        raise SnapshotMismatch("the snapshot was taken of a different log (its tip is not the log's hash there)")
    if raw["history"] and (present is None or present.seq < raw["seq"]):
        raise SnapshotMismatch("a history snapshot is read with a later state to complete it")
    raws = {(name, field): part for (name, field), part in zip(raw["raw"], raw_parts)}
    slices = {}
    for name, concern in CONCERNS.items():
        cls = type(concern.initial)
        stored = raw["slices"][name]
        slices[name] = cls(**{
            field.name: codec_of(field).decode(raws[name, field.name] if codec_of(field).raw
                                               else stored[field.name])
            for field in attrs.fields(cls)})
        if raw["history"] and name == "tables":
            slices[name] = archive.from_history(slices[name], getattr(present, name), raw["last_time"])
    return State(seq=raw["seq"], last_time=raw["last_time"], streams=Map(raw["streams"]), **slices)


def history_equal(a: State, b: State) -> bool:
    """Equal in everything a history snapshot stores (what it leaves out, the present gives back)."""
    if (a.seq, a.last_time, a.streams) != (b.seq, b.last_time, b.streams):
        return False
    for name in CONCERNS:
        left, right = getattr(a, name), getattr(b, name)
        if name == "tables":
            if not archive.history_equal(left, right):
                return False
        elif left != right:
            return False
    return True
