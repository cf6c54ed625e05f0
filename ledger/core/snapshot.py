"""Folded state to bytes and back, so that opening a big ledger does not replay all of it.

A snapshot is a cache, never the truth. It is trusted only if its digest matches
its bytes, its format is this release's, and the event it claims to end at is
still in the log with the same time; otherwise the ledger folds from the start and
writes a fresh one (and ``verify`` discards one that disagrees with the log).

The layout is derived from ``State``'s fields and each slice field's codec, so a new
concern needs nothing here. It is plain JSON (not pickle), because auditors open
ledgers they did not write, and opening a file must never run code it brought:

    <sha-256 of the rest, hex>\\n<head JSON>\\n<raw part>\\n<raw part>...

The head holds everything a command needs; the raw parts (the archive of purged
instances) are kept apart so that they are parsed only on demand.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs
import orjson
from immutables import Map

from .concern import codec_of
from .fold import gc_paused
from .model import CONCERNS, State

FORMAT = 5


class SnapshotMismatch(ValueError):
    """The bytes are not a snapshot this release wrote, or were changed since."""


def dump(state: State) -> bytes:
    slices: dict[str, dict[str, Any]] = {}
    raw_index: list[list[str]] = []
    raw_parts: list[bytes] = []
    for name in CONCERNS:
        part = getattr(state, name)
        compact = getattr(part, "for_snapshot", None)
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
    head = orjson.dumps({"format": FORMAT, "seq": state.seq, "last_time": state.last_time,
                         "streams": dict(state.streams), "slices": slices, "raw": raw_index})
    body = b"\n".join([head, *raw_parts])
    return hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def load(data: bytes) -> State:
    """The state a snapshot holds; ``SnapshotMismatch`` if it cannot be trusted."""
    digest, _, body = data.partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != digest:
        raise SnapshotMismatch("the snapshot's digest does not match its contents")
    with gc_paused():  # like a replay: many small objects, no cycles
        try:
            return _load(body)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise SnapshotMismatch(f"the snapshot does not fit this release: {exc}") from None


def _load(body: bytes) -> State:
    head, *raw_parts = body.split(b"\n")
    raw = orjson.loads(head)
    if raw["format"] != FORMAT:
        raise SnapshotMismatch(f"snapshot format {raw['format']}, this release writes {FORMAT}")
    raws = {(name, field): part for (name, field), part in zip(raw["raw"], raw_parts)}
    slices = {}
    for name, concern in CONCERNS.items():
        cls = type(concern.initial)
        stored = raw["slices"][name]
        slices[name] = cls(**{
            field.name: codec_of(field).decode(raws[name, field.name] if codec_of(field).raw
                                               else stored[field.name])
            for field in attrs.fields(cls)})
    return State(seq=raw["seq"], last_time=raw["last_time"], streams=Map(raw["streams"]), **slices)
