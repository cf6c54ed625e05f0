"""Stored states written, and read back: the keyed generations (R16, R17).

A generation is a cache (R16): written only if the store is writable and not busy, read only if
it fits this release and this log, never the truth. The held state (``held``) stores one as the
log grows and reads the newest on open; ``maintain`` stores those ``as_of`` starts from;
``checks`` compares every one with a fold for ``verify``.
"""

from __future__ import annotations

from typing import Any, Callable

from ..core.model import State
from ..errors import Conflict
from . import collector, snapshot
from .contract import Generation, Store
from .lazy import Heal

MOVED: Any = object()
"""``store_generation``'s answer when another process extended the chain the state was read
from: its changes are not relative to the newest of that chain, so the caller reads on from it."""
EARLIER = ("catalog", "history:")
"""The documents earlier releases stored (the state as one document; history snapshots, by
prefix): this one neither reads nor writes them, and ``maintain`` deletes them."""


def read_generation(store: Store, generation: Generation, heal: Callable[[str], Heal]) -> State:
    """The state a stored generation holds, read lazily (``heal(part)`` gives a part from the log if
    an entry cannot be read); ``SnapshotMismatch`` if it does not fit this release or this log."""
    if generation.format != snapshot.KEYED_FORMAT:
        raise snapshot.SnapshotMismatch(f"format {generation.format}, this release writes {snapshot.KEYED_FORMAT}")
    state = snapshot.load_keyed(generation.head, store.hash_at(generation.seq),
                                lambda part: store.generation_part(generation, part), generation.gen, heal)
    if state.seq != generation.seq or store.event_time(generation.seq) != state.last_time:
        raise snapshot.SnapshotMismatch("its head does not match the event it claims to end at")
    return state


def store_generation(store: Store, state: State, reads_from: Generation | None, *,
                     replace: bool = False) -> tuple[Generation, snapshot.Stored] | None:
    """Store ``state`` as a generation: a delta of ``reads_from`` (the generation its maps read
    from) while that chain's deltas have not outgrown its full generation (``snapshot.GROWTH``),
    else a full one. Not if one is stored at or after its event (unless
    ``replace``: one at its event could not be used). Returns what was written and the stored
    form it holds, None if nothing was, or ``MOVED``."""
    if not state.seq:
        return None
    try:
        with collector.paused():  # sealing and inserting a row per entry make no cycles
            latest = store.latest_generation()
            if latest is not None and latest.seq >= state.seq and not (replace and latest.seq == state.seq):
                return None
            extends = None
            if reads_from is not None and not replace:
                full, deltas = store.chain_entries(reads_from)
                extends = reads_from if full and deltas <= snapshot.GROWTH * full else None
            stored = snapshot.keyed(state, store.hash_at(state.seq), delta_of=None if extends is None else extends.gen)
            written = store.write_generation(state.seq, snapshot.KEYED_FORMAT, stored.head, stored.rows,
                                             extends=extends if stored.delta else None, replace=replace)
            if written is None:
                return MOVED if stored.delta else None
            return written, stored
    except (Conflict, OSError):
        return None  # a stored state is only a cache; a busy or read-only store just goes without
