"""Snapshots stored, and read back: the keyed generation of the present, and history snapshots.

Both are caches (R16): written only if the store is writable and not busy, read only if they fit
this release and this log, never the truth. The held state (``held``) stores a generation as the
log grows and reads it on open; ``maintain`` stores the history snapshots ``as_of`` starts from;
``checks`` compares both with a fold for ``verify``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Mapping

from ..core.model import State
from ..errors import Conflict
from . import collector, snapshot
from .contract import Generation, Snapshot, Store
from .history import HistoryEncoder
from .lazy import Heal

HISTORY_PREFIX = "history:"
JOIN: Any = object()
"""``store_generation``'s answer when another process started a newer chain of generations: the
caller reads its state from that one instead."""


def history_name(seq: int) -> str:
    return f"{HISTORY_PREFIX}{seq:012d}"


def save_history(store: Store, state: State, encoder: HistoryEncoder | None = None,
                 changed: Mapping[str, Iterable[str]] | None = None) -> bool:
    """Store a history snapshot of ``state`` unless one is stored at its event; whether one was
    written. ``encoder`` and ``changed``: see ``HistoryEncoder.body``."""
    name = history_name(state.seq)
    if store.load_snapshot(name) is not None:
        return False
    try:
        data = snapshot.dump(state, store.hash_at(state.seq), encoder=encoder, changed=changed)
        store.save_snapshot(name, Snapshot(state.seq, snapshot.FORMAT, data))
        return True
    except (Conflict, OSError):
        return False  # a cache: a busy or read-only store goes without


def load_history(store: Store, name: str, present: State) -> State | None:
    """A stored history snapshot, completed from ``present``; None (and it is deleted) if it
    cannot be trusted."""
    snap = store.load_snapshot(name)
    if snap is None:
        return None
    try:
        if snap.format != snapshot.FORMAT:
            raise snapshot.SnapshotMismatch(f"format {snap.format}")
        state = snapshot.load(snap.data, store.hash_at(snap.seq), present=present)
        if state.seq != snap.seq:
            raise snapshot.SnapshotMismatch("its seq is not the one it is stored under")
        return state
    except snapshot.SnapshotMismatch:
        with contextlib.suppress(Conflict, OSError):
            store.delete_snapshot(name)
        return None


def read_generation(store: Store, generation: Generation, heal: Callable[[str], Heal]) -> State:
    """The state a stored generation holds, read lazily (``heal(part)`` gives a part from the log if
    an entry cannot be read); ``SnapshotMismatch`` if it does not fit this release or this log."""
    state = snapshot.load_keyed(generation.head, store.hash_at(generation.seq),
                                lambda part: store.generation_part(generation, part), generation.gen, heal)
    if state.seq != generation.seq or store.event_time(generation.seq) != state.last_time:
        raise snapshot.SnapshotMismatch("its head does not match the event it claims to end at")
    return state


def store_generation(store: Store, state: State, reads_from: Generation | None, *,
                     replace: bool = False) -> tuple[Generation, snapshot.Stored] | None:
    """Store ``state`` as the next generation: a delta of ``reads_from`` (the generation its maps
    read from) while the chain's deltas have not outgrown its full generation, else a full one.
    Only if newer than the newest stored (``replace``: or at its event). Returns what was written
    and the stored form it holds, None if nothing was, or ``JOIN``."""
    if not state.seq:
        return None
    try:
        with collector.paused():  # sealing and inserting a row per entry make no cycles
            latest = store.latest_generation()
            if latest is not None and latest.seq >= state.seq and not (replace and latest.seq == state.seq):
                return None
            extends = None
            if latest is not None and reads_from is not None:
                if latest.base != reads_from.base:
                    return JOIN
                full, deltas = store.chain_entries(latest)
                extends = reads_from if deltas <= full else None
            stored = snapshot.keyed(state, store.hash_at(state.seq), delta_of=None if extends is None else extends.gen)
            written = store.write_generation(state.seq, snapshot.KEYED_FORMAT, stored.head, stored.rows,
                                             extends=extends if stored.delta else None, replace=replace)
            return None if written is None else (written, stored)
    except (Conflict, OSError):
        return None  # a snapshot is only a cache; a busy or read-only store just goes without
