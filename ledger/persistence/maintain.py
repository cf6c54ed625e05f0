"""``maintain``: the snapshots no command needs, stored when asked for (R22).

A command needs the state at the log's head, which the held state keeps (and stores as a keyed
generation as it goes, so that the next open reads it instead of folding). What no command
needs is the past: a history snapshot every ``history_every`` events, from which ``as_of``
folds a short way (R17) instead of from the first event. Writing them costs a fold of the log
and an encoding of each, so it is asked for, as Iceberg's maintenance actions are: a pipeline
calls ``Ledger.maintain()`` (or ``retention-ledger maintain``) after its vacuum, or a scheduler
does. It runs in the caller's process, to the end of the call, and nothing else.

It runs once at a time, across processes and hosts: it takes a lease in the store first (as a
vacuum run does), renews it as it goes, and a second caller meanwhile is told who holds it and
does nothing. Killed at any point, it leaves what it stored whole (each snapshot is one
transaction) and the rest absent; the lease ends on its own, and the next ``maintain`` writes
what is missing, from the newest history snapshot there is.
"""

from __future__ import annotations

import time
from typing import Callable

import attrs

from ..clock import Micros
from ..core.model import State, fold_in_steps, fold_rows
from ..core.tables import CREATES
from . import archive, collector, writing
from .contract import Store
from .held import HeldState
from .history import HistoryEncoder

LEASE = "maintain"
LEASE_SECONDS = 120
"""How long the upkeep lease lasts unless renewed (it is renewed at every history snapshot): a
process killed while it held it holds the next one off for at most this long."""

Progress = Callable[[int, int], None]
"""``progress(events folded, events to fold)``."""


@attrs.frozen
class MaintainReport:
    done: bool
    """False: another process holds the upkeep lease, and nothing was done here."""
    holder: str | None
    """Who holds the lease, when not done."""
    history_written: int
    """History snapshots stored by this call."""
    history: int
    """History snapshots stored in all, after it."""
    generation: int | None
    """The event the newest stored generation ends at, after it."""
    seconds: float

    def summary(self) -> str:
        if not self.done:
            return f"maintain is running elsewhere ({self.holder}); nothing was done here"
        return (f"maintained in {self.seconds:.1f} s: {self.history_written} history snapshot(s) written "
                f"({self.history} in all), the stored state at event #{self.generation or 0}")


def maintain(store: Store, held: HeldState, *, history_every: int, holder: str, now: Callable[[], Micros],
             progress: Progress | None = None) -> MaintainReport:
    """Store the history snapshots missing up to the log's head, and the keyed generation of the
    state at the head; see the module docstring."""
    started = time.monotonic()

    def lease() -> str | None:
        at = now()
        return store.take_lease(LEASE, holder, at + LEASE_SECONDS * 1_000_000, at)

    taken = lease()
    if taken is not None:
        return MaintainReport(False, taken, 0, 0, None, time.monotonic() - started)
    try:
        present = held.refresh()
        existing = {at for _, at in store.snapshots(writing.HISTORY_PREFIX)}
        missing = [at for at in range(history_every, present.seq + 1, history_every) if at not in existing]
        written = _history(store, present, missing, lease, progress) if missing else 0
        held.save_snapshot()
        latest = store.latest_generation()
        return MaintainReport(True, None, written, len(store.snapshots(writing.HISTORY_PREFIX)),
                              None if latest is None else latest.seq, time.monotonic() - started)
    finally:
        store.release_lease(LEASE, holder)


def _history(store: Store, present: State, missing: list[int], renew: Callable[[], object],
             progress: Progress | None) -> int:
    """Store a history snapshot at each of ``missing`` (ascending): folded on from the newest stored
    one before the first, else from nothing."""
    base = _newest_before(store, missing[0], present)
    total, written = missing[-1], 0
    with collector.paused():
        if base is None:  # from nothing: the fold says what it changed, so each costs what changed
            steps, encoder, seq = fold_in_steps(State()), HistoryEncoder(), 0
            for at in missing:
                seq = steps.fold_rows(store.read(seq, upto=at))
                state, changed = steps.look()
                written += writing.save_history(store, state, encoder, changed)
                renew()
                if progress is not None:
                    progress(at, total)
            return written
        state, encoder = base, HistoryEncoder()
        for at in missing:
            archive.prefetch_created(state.tables, store.read(state.seq, upto=at, types=CREATES))
            state = fold_rows(state, store.read(state.seq, upto=at))
            written += writing.save_history(store, state, encoder)
            renew()
            if progress is not None:
                progress(at, total)
    return written


def _newest_before(store: Store, seq: int, present: State) -> State | None:
    """The newest history snapshot before event ``seq`` that can be trusted, read (None: none)."""
    for name, at in reversed(store.snapshots(writing.HISTORY_PREFIX)):
        if at < seq:
            found = writing.load_history(store, name, present)
            if found is not None:
                return found
    return None
