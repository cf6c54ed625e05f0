"""Folded state to stored form and back, so that opening a big ledger does not replay all of it.

Two forms. The *stored snapshot* of the present state is keyed: one entry per key of
every slice field (and of the stream versions), written by the runner as a numbered
generation in the store and read back lazily (``lazy``), one key at a time, so that
opening a ledger of a million events and deciding an undrop reads a handful of
entries, not all of them. A generation is either full or a *delta*: only the entries
changed since the generation the state was read from (a ``LazyMap``'s changes, with
deletions), so writing one costs what changed, not the size of the catalog. Its head
(``keyed_head``) holds the scalars, each part's entry count and the ``tip``.

A snapshot is a cache, never the truth. It is trusted only if its digest matches
its bytes, its format is this release's, and the event it claims to end at is
still in the log with the same chain hash (its ``tip``: a snapshot cannot outlive
an edit of the log before it, R16); otherwise the ledger folds from the start and
writes a fresh one (and ``verify`` discards one that disagrees with the log).

The layout is derived from ``State``'s fields and each slice field's codec, so a new
concern needs nothing here. It is plain JSON (not pickle), because auditors open
ledgers they did not write, and opening a file must never run code it brought:

    <sha-256 of the rest, hex>\\n<head JSON>\\n<raw part>\\n<raw part>...

The head holds everything a command needs; the raw parts (the archive of purged
instances) are kept apart so that they are parsed only on demand.

The rest of this module is the second form, one document:

A *history* snapshot (``history=True``) is a past state kept so that ``as_of`` (R17)
folds a few thousand events, not a million. Many are kept, so each leaves out what the
present state can give back exactly (a slice's ``for_history``/``from_history``: the
purged instances, which are final), and is compressed.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any, Callable, Iterator


import attrs
import orjson
from immutables import Map

from .concern import codec_of
from .fold import gc_paused
from .lazy import GONE, Base, LazyMap, Source
from .model import CONCERNS, State

FORMAT = 7
"""Of history snapshots (one document each)."""
KEYED_FORMAT = 8
"""Of the stored, keyed snapshot of the present."""
STREAMS = "streams"
"""The part holding each stream's version."""


class SnapshotMismatch(ValueError):
    """The bytes are not a snapshot this release wrote, or were changed since."""


# --- the stored snapshot: one entry per key, read lazily --------------------------------------

Row = tuple[str, str, "bytes | None"]
"""``(part, key, entry)``: an entry is JSON bytes; None records a key deleted since the last one."""


def _parts(state: State, *, compact: bool = True) -> Iterator[tuple[str, Any, Any]]:
    """``(part name, keyed codec, the field's entries)`` of what a stored snapshot keeps (of the
    state as it is, without ``compact``: as a snapshot keeps it, purges archived)."""
    yield STREAMS, None, state.streams
    for name in CONCERNS:
        part = getattr(state, name)
        compacted = getattr(part, "for_snapshot", None) if compact else None
        if compacted is not None:
            part = compacted()
        for field in attrs.fields(type(part)):
            codec = codec_of(field)
            yield f"{name}.{field.name}", codec, codec.entries(getattr(part, field.name))


def keyed(state: State, tip: str | None, *, delta_of: object = None) -> tuple[bytes, list[Row], bool]:
    """The head and entries of a stored snapshot of ``state``: only what changed since stored
    snapshot ``delta_of`` if every part was read from it (the third value says so), else all."""
    parts = list(_parts(state))
    delta = delta_of is not None and all(
        isinstance(entries, LazyMap) and entries.base.stamp == delta_of for _, _, entries in parts)
    rows: list[Row] = []
    counts: dict[str, int] = {}
    with gc_paused():
        for part, codec, entries in parts:
            encode = (lambda item: item) if codec is None else codec.encode_item
            if delta:
                rows.extend((part, key, None if item is GONE else orjson.dumps(encode(item)))
                            for key, item in entries.changes.items())
            else:
                rows.extend((part, key, orjson.dumps(encode(item))) for key, item in entries.items())
            counts[part] = len(entries)
    head = orjson.dumps({"format": KEYED_FORMAT, "seq": state.seq, "last_time": state.last_time,
                         "tip": tip, "counts": counts})
    return head, rows, delta


def load_keyed(head: bytes, tip: str | None, part: Callable[[str], Source], stamp: object) -> State:
    """The state a stored snapshot holds, reading its entries only when asked for (``lazy``);
    ``SnapshotMismatch`` if its head is not this release's or it was taken of another log."""
    try:
        raw = orjson.loads(head)
        if raw["format"] != KEYED_FORMAT:
            raise SnapshotMismatch(f"snapshot format {raw['format']}, this release writes {KEYED_FORMAT}")
        if raw["tip"] != tip:
            raise SnapshotMismatch("the snapshot was taken of a different log (its tip is not the log's hash there)")
        counts = raw["counts"]

        def lazy(name: str, codec: Any) -> LazyMap:
            return LazyMap(Base(part(name), _decoder(codec), counts[name], stamp))

        slices = {}
        for name, concern in CONCERNS.items():
            cls = type(concern.initial)
            slices[name] = cls(**{field.name: codec_of(field).stored(lazy(f"{name}.{field.name}", codec_of(field)))
                                  for field in attrs.fields(cls)})
        return State(seq=raw["seq"], last_time=raw["last_time"], streams=lazy(STREAMS, None), **slices)
    except (ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, SnapshotMismatch):
            raise
        raise SnapshotMismatch(f"the snapshot's head does not fit this release: {exc}") from None


def _decoder(codec: Any) -> Callable[[str, bytes], Any]:
    if codec is None:  # stream versions: plain integers
        return lambda key, data: orjson.loads(data)
    decode_item = codec.decode_item
    return lambda key, data: decode_item(key, orjson.loads(data))


def read_all(state: State) -> None:
    """Read every stored entry ``state`` still reads lazily (``SnapshotGone`` if one fails)."""
    for _, _, entries in _parts(state, compact=False):
        if isinstance(entries, LazyMap):
            entries.base.everything()


def rebased(state: State, head: bytes, part: Callable[[str], Source], stamp: object) -> State:
    """``state``, just written as stored snapshot ``stamp``: its maps now read from that one, with
    no changes on top, keeping everything already decoded (all of it, for a map held in full), so
    that the next snapshot can be a delta of this one."""
    counts = orjson.loads(head)["counts"]

    def rebase(name: str, codec: Any, entries: Any) -> LazyMap:
        if isinstance(entries, LazyMap):
            return LazyMap(entries.base.rebased(part(name), entries.changes, counts[name], stamp))
        base = Base(part(name), _decoder(codec), counts[name], stamp)
        base.found, base.complete = dict(entries.items()), True
        return LazyMap(base)

    slices = {}
    for name in CONCERNS:
        current = getattr(state, name)
        compact = getattr(current, "for_snapshot", None)
        if compact is not None:
            current = compact()
        values = {}
        for field in attrs.fields(type(current)):
            codec = codec_of(field)
            entries = codec.entries(getattr(current, field.name))
            values[field.name] = codec.stored(rebase(f"{name}.{field.name}", codec, entries))
        slices[name] = type(current)(**values)
    return attrs.evolve(state, streams=rebase(STREAMS, None, state.streams), **slices)


# --- history snapshots: one document each -----------------------------------------------------


def dump(state: State, tip: str | None, *, history: bool = False) -> bytes:
    """``tip`` is the chain hash of event ``state.seq`` (None for a log without the chain)."""
    slices: dict[str, dict[str, Any]] = {}
    raw_index: list[list[str]] = []
    raw_parts: list[bytes] = []
    for name in CONCERNS:
        part = getattr(state, name)
        compact = getattr(part, "for_history" if history else "for_snapshot", None)
        if compact is not None:
            part = compact()
        encoded: dict[str, Any] = {}
        for field in attrs.fields(type(part)):
            codec = codec_of(field)
            value = codec.encode(getattr(part, field.name))
            if codec.raw:
                raw_index.append([name, field.name])
                raw_parts.append(value)
            else:
                encoded[field.name] = value
        slices[name] = encoded
    head = orjson.dumps({"format": FORMAT, "seq": state.seq, "last_time": state.last_time, "tip": tip,
                         "history": history, "streams": dict(state.streams), "slices": slices,
                         "raw": raw_index})
    body = b"\n".join([head, *raw_parts])
    data = hashlib.sha256(body).hexdigest().encode() + b"\n" + body
    return zlib.compress(data, 1) if history else data


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
    with gc_paused():  # like a replay: many small objects, no cycles
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
        if raw["history"] and hasattr(slices[name], "from_history"):
            slices[name] = slices[name].from_history(getattr(present, name), raw["last_time"])
    return State(seq=raw["seq"], last_time=raw["last_time"], streams=Map(raw["streams"]), **slices)


def history_equal(a: State, b: State) -> bool:
    """Equal in everything a history snapshot stores (what it leaves out, the present gives back)."""
    if (a.seq, a.last_time, a.streams) != (b.seq, b.last_time, b.streams):
        return False
    for name in CONCERNS:
        left, right = getattr(a, name), getattr(b, name)
        if hasattr(left, "history_equal"):
            if not left.history_equal(right):
                return False
        elif left != right:
            return False
    return True
