"""The stored snapshots compared with a fold of the log: what ``verify`` asks of them (R16).

Plain functions over a store. ``verify`` hands ``fold_and_compare`` the log's rows (already
going past its chain check) and gets back the fold from nothing and what disagreed; the
snapshots' formats stay in this package. Every history snapshot and the newest stored
generation are compared with the fold at their event, by their bytes: one fold's snapshots
share their encodings (``HistoryEncoder``), so each comparison costs what changed since the
last. A stored snapshot that disagrees is a cache that lied: ``discard`` deletes it once the
chain is proven, to be written again (the log is the truth).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable

import attrs

from ..core.model import State, fold_in_steps, fold_rows
from ..errors import Conflict, LedgerCorrupt
from . import collector, snapshot, writing
from .contract import Generation, SnapshotGone, Store
from .history import HistoryEncoder
from .lazy import Heal

Rows = Callable[[int, int], Iterable[tuple]]
"""``rows(after, upto)``: the log's rows ``after < seq <= upto``, as ``verify`` has them checked."""


@attrs.define
class Compared:
    """A fold of the whole log, and what of the stored snapshots disagreed with it."""
    fresh: State
    history: list[str] = attrs.Factory(list)
    """History snapshots that disagreed (deleted by ``discard``)."""
    history_discarded: int = 0
    """History snapshots that disagreed or could not be read at all (those are deleted already)."""
    generation: Generation | None = None
    """The stored generation compared (None: there was none)."""
    generation_agrees: bool = True


def fold_and_compare(store: Store, rows: Rows, head: int, present: State) -> Compared:
    """Fold the log from nothing up to ``head`` (its rows through ``rows``), stopping at each history
    snapshot and at the newest stored generation to compare them with the fold there."""
    history = {at: name for name, at in store.snapshots(writing.HISTORY_PREFIX) if at <= head}
    generation = store.latest_generation()
    compared = Compared(State(), generation=generation)
    stops = sorted(set(history) | {head} | ({generation.seq} if generation and generation.seq <= head else set()))
    steps, encoder = fold_in_steps(State()), HistoryEncoder()
    with collector.paused():
        seq = 0
        for stop in stops:
            seq = steps.fold_rows(rows(seq, stop))
            if seq != stop:
                continue  # the log ends before this stop (never: stops are at or before the head)
            fresh, changed = steps.look()
            encoder.sync(fresh, changed)  # every stop's changes, so that the next is encoded from this one
            if stop in history and not history_agrees(store, history[stop], fresh, present, encoder):
                compared.history_discarded += 1
                if store.load_snapshot(history[stop]) is not None:
                    compared.history.append(history[stop])
            if generation is not None and stop == generation.seq:
                compared.generation_agrees = generation_agrees(store, generation, fresh, encoder)
        compared.fresh = steps.look()[0]
        if generation is not None and generation.seq > head:  # written since verify began
            later = fold_rows(compared.fresh, store.read(head, upto=generation.seq))
            compared.generation_agrees = generation_agrees(store, generation, later, encoder)
    return compared


def discard(store: Store, compared: Compared) -> None:
    """Delete the snapshots that disagreed with the log (``verify``, once the chain is proven)."""
    for name in compared.history:
        with contextlib.suppress(Conflict, OSError):
            store.delete_snapshot(name)
    if not compared.generation_agrees:
        store.delete_generations()


def history_agrees(store: Store, name: str, fresh: State, present: State, encoder: HistoryEncoder) -> bool:
    """Whether history snapshot ``name`` holds ``fresh`` (a fold of the log to its event; ``encoder``
    brought up to it): by its bytes, else (an earlier release's layout, or a lie) by its decoded
    state. One that cannot be read or trusted at all is deleted here; one that disagrees is the
    caller's to delete."""
    snap = store.load_snapshot(name)
    if snap is None:
        return True  # deleted meanwhile: nothing is left to lie
    if snap.format == snapshot.FORMAT and snap.seq == fresh.seq and \
            snapshot.history_matches(snap.data, fresh, store.hash_at(fresh.seq), encoder):
        return True
    kept = writing.load_history(store, name, present)
    return kept is not None and snapshot.history_equal(kept, fresh)


def generation_agrees(store: Store, generation: Generation, fresh: State,
                      encoder: HistoryEncoder | None = None) -> bool:
    """Whether stored ``generation`` holds ``fresh`` (a fold of the log to its event), read
    strictly: an entry that fails its check counts against it. By bytes, entry for entry,
    else by decoded states. ``encoder``: one that encoded ``fresh`` (its entries are reused)."""
    stored = snapshot.keyed(fresh, store.hash_at(fresh.seq), encoder=encoder)
    try:
        if stored.head == generation.head and snapshot.entries_match(
                stored, lambda part: store.generation_part(generation, part).scan()):
            return True
        return writing.read_generation(store, generation, _strict) == fresh
    except (snapshot.SnapshotMismatch, SnapshotGone, LedgerCorrupt):
        return False


def _strict(part: str) -> Heal:
    def refuse() -> dict[str, Any]:
        raise snapshot.SnapshotMismatch(f"its part {part} cannot be read (an entry fails its check, or "
                                        "the generation is gone)")
    return refuse

