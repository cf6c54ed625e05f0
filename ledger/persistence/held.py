"""The held state: the folded log, kept in step with it, read from a stored state when it can.

Opening a ledger reads the newest stored generation (``writing``) lazily (``lazy``), one key at a
time, when it fits this release and this log; else it folds the log from nothing, in this
process, and says once that ``maintain`` stores it (a log shorter than ``snapshot_every`` events
is folded every time: that costs less than a stored state). After that the state follows the
log: another writer's events are read and folded when it looks (``refresh``), the caller's own
without reading them back (``extend``), and a delta generation (what changed since the last) is
stored every ``snapshot_every`` events. ``as_of`` starts from the newest generation at or before
the event asked for (``state_at``): ``maintain`` stores them, asked for. Nothing here starts a
process (R22).

Generations are kept, so a state read lazily is never cut off. If an entry cannot be read all
the same (the store was damaged or edited, or ``verify`` discarded every generation), its part
*heals* from a fold of the log up to the generation's event, and a fresh generation replaces a
damaged one at the next refresh (R16). That is the only place such a failure is handled; nothing
above this package meets it.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any, Callable, Iterable

from ..core.fold import Placed
from ..core.model import State, fold_placed, fold_rows
from ..errors import LedgerCorrupt
from . import collector, snapshot, writing
from .contract import Generation, Store
from .lazy import Heal

log = logging.getLogger(__name__)

RECHECK = 60.0
"""Seconds after which a held state asks the store whether others wrote, and whether its generation
is still stored, even if nothing else made it look."""
BATCH = 50_000
"""Events folded in one batch when catching up with the log."""


class HeldState:
    """The folded state of one store's log. Thread-safe."""

    def __init__(self, store: Store, *, snapshot_every: int) -> None:
        self.store = store
        self.snapshot_every = snapshot_every
        self.snapshot_seq = 0
        """The sequence number of the generation the held state started from or last wrote (0: none)."""
        self._lock = threading.RLock()
        self._state = State()
        self._generation: Generation | None = None
        """The stored generation the held state reads from (None: held in full, in memory)."""
        self._damaged = False
        """A part of the held generation could not be read and healed from the log: replace it."""
        self._healed: dict[int, dict[str, dict[str, Any]]] = {}
        self._replace = False
        """The newest stored generation could not be used: the next one stored replaces it."""
        self._looked = time.monotonic()
        self.load()

    # --- loading ----------------------------------------------------------------------------

    def load(self) -> State:
        """Start from the newest stored generation that can be trusted, else from nothing, and fold
        to the end. A long fold from nothing is not stored here (that would double the wait, and no
        answer needs it): the open says, once, that ``maintain`` stores it for the next opens."""
        with self._lock:
            self._state, self._generation, self.snapshot_seq, self._damaged = State(), None, 0, False
            latest = self.store.latest_generation()
            found = self._stored_at(None, latest)
            self._replace = latest is not None and (found is None or found[1].seq < latest.seq)
            if found is None:  # folded from nothing: stored by maintain, or after snapshot_every events more
                self._state = self.fold_to(State(), None)
                self.snapshot_seq = self._state.seq
                if self._state.seq >= self.snapshot_every:
                    log.warning("%s: no stored state fits this release and this log, so the open folded all %s "
                                "events; run `retention-ledger maintain` (or Ledger.maintain()) to store it, and "
                                "later opens read it instead", self.store.path, f"{self._state.seq:,}")
                elif self._replace:  # a short log: storing it costs little, and the one stored did not fit
                    self.save_snapshot()
                return self._state
            self._state, self._generation = found
            self.snapshot_seq = found[1].seq
            self.refresh(force=True)
            return self._state

    def _stored_at(self, seq: int | None, latest: Generation | None = None) -> tuple[State, Generation] | None:
        """The newest stored generation at or before event ``seq`` (None: any; ``latest``: the newest
        of all, tried first) that fits this release and this log, read lazily; None if none does."""
        if latest is None and seq is None:
            return None
        for generation in itertools.chain([latest] if latest else [], reversed(self.store.generations())):
            if seq is not None and generation.seq > seq:
                continue
            try:
                return writing.read_generation(self.store, generation, self._heal_for(generation)), generation
            except snapshot.SnapshotMismatch:
                continue
        return None

    # --- healing: a stored part that cannot be read is taken from the log ---------------------

    def _heal_for(self, generation: Generation) -> Callable[[str], Heal]:
        def heal_part(part: str) -> Heal:
            return lambda: self._heal(generation, part)
        return heal_part

    def _heal(self, generation: Generation, part: str) -> dict[str, Any]:
        with self._lock:
            if self._generation is not None and self._generation.gen == generation.gen:
                self._damaged = True
            entries = self._healed.get(generation.gen)
            if entries is None:
                with collector.paused():
                    entries = snapshot.entries_of(fold_rows(State(), self.store.read(0, upto=generation.seq)))
                self._healed[generation.gen] = entries
            return entries[part]

    # --- the held state ---------------------------------------------------------------------

    @property
    def held(self) -> State:
        """The state as last folded, without asking the store whether others wrote since."""
        return self._state

    @property
    def generation(self) -> Generation | None:
        """The stored generation the held state reads from (None: held in full, in memory)."""
        return self._generation

    @property
    def due(self) -> bool:
        """Whether the held state has gone ``RECHECK`` seconds without looking at the store."""
        return time.monotonic() - self._looked > RECHECK

    def refresh(self, *, force: bool = False) -> State:
        """Fold whatever other writers appended since we last looked; returns the state."""
        with self._lock:
            self._looked = time.monotonic()
            if force or self._damaged or self.store.changed_elsewhere():
                if self._superseded():
                    return self.load()
                self._state = self.fold_to(self._state, None)
                self._maybe_snapshot()
            return self._state

    def _superseded(self) -> bool:
        """Whether the generation we read from is no longer stored (``verify`` discarded them all):
        then read from the newest there is, rather than heal part after part from the log."""
        return self._generation is not None and self.store.chain_entries(self._generation)[0] == 0

    def full_state(self) -> State:
        """The folded state with every stored entry read (and checked) now, not when asked for:
        for tools and tests that compare or walk whole states."""
        state = self.refresh()
        snapshot.read_all(state)
        return state

    def extend(self, placed: Iterable[Placed], previous_head: int) -> State:
        """After our own append of events (``(seq, stream, version, time, event)`` each) on top of
        event ``previous_head``: fold them without reading them back if nobody else wrote in
        between, else refold from the log."""
        with self._lock:
            if previous_head != self._state.seq:
                return self.refresh(force=True)
            self._state = fold_placed(self._state, placed)
            self._maybe_snapshot()
            return self._state

    def fold_to(self, state: State, upto: int | None) -> State:
        """Fold the log after ``state`` up to event ``upto`` (None: the end)."""
        with collector.paused():
            while True:
                stop = state.seq + BATCH if upto is None else min(upto, state.seq + BATCH)
                state = fold_rows(state, self.store.read(state.seq, upto=stop))
                if state.seq < stop or state.seq == upto:  # the log (or what was asked for) ends here
                    return state

    def checked_by(self, generations: set[int]) -> bool:
        """Whether the held state is the log's own fold, or read from one of ``generations`` (checked
        by ``verify``): then comparing it with a fold again would prove nothing more."""
        return self._generation is None or self._generation.gen in generations

    def rebuild(self, base: State) -> None:
        """Replace the held state with ``base`` (a fold from nothing) caught up with the log, and
        store a fresh, full generation: for when the state we held came from a snapshot that lied."""
        with self._lock:
            self._state, self._generation, self._damaged = self.fold_to(base, None), None, False
            if self._state.seq:
                self.save_snapshot()

    # --- the past (R17) -----------------------------------------------------------------------

    def state_at(self, seq: int) -> State:
        """The fold of the log up to event ``seq`` (R17): from the newest stored generation at or
        before it that can be trusted, else from nothing."""
        present = self.refresh()
        if seq >= present.seq:
            return present
        with collector.paused():  # a past state is many young objects: no cycles among them
            found = self._stored_at(seq)
            if found is not None:
                base, generation = found
                try:
                    return self._fold_past(base, seq)
                except LedgerCorrupt:  # the log does not follow on from it: the cache lied, not the log
                    log.warning("%s: the stored state at event #%s does not fit the log after it; `verify` "
                                "discards it", self.store.path, generation.seq)
            return self.fold_to(State(), seq)

    def _fold_past(self, base: State, seq: int) -> State:
        """Fold ``base`` (read from a stored generation) on to event ``seq``, reading first, many to a
        statement, what the fold will ask of the stored state (``snapshot.prefetch``). The rows are
        read once and kept for the fold when they are a batch or less (a generation every
        ``snapshot_every`` events: nearly always); else read twice, a batch at a time."""
        if seq - base.seq > BATCH:
            snapshot.prefetch(base, self.store.read(base.seq, upto=seq))
            return self.fold_to(base, seq)
        rows = list(self.store.read(base.seq, upto=seq))
        snapshot.prefetch(base, rows)
        return fold_rows(base, rows)

    # --- storing the keyed generation ----------------------------------------------------------

    def _maybe_snapshot(self) -> None:
        """After a fold: a generation that healed is replaced at once; otherwise one is stored every
        ``snapshot_every`` events (a delta costs what changed since the last, so a fixed interval
        keeps it flat per event)."""
        if self._damaged:
            self._damaged = False
            self.save_snapshot(replace=True)
        elif self._state.seq - self.snapshot_seq >= self.snapshot_every:
            self.save_snapshot()

    def save_snapshot(self, *, replace: bool = False) -> None:
        """Store the held state as a generation: a delta of the one it reads from, or a full one
        (``writing.store_generation``). ``replace``: also when the newest stored one is at the same
        event (it was damaged, or did not fit). Then read on from what was stored."""
        with self._lock:
            if self.store.in_exclusive:
                return  # inside a command's write transaction: the next refresh writes it
            written = writing.store_generation(self.store, self._state, self._generation,
                                               replace=replace or self._replace)
            if written is writing.MOVED:  # another process extended our chain: read on from the newest
                self.load()
            elif written is None:  # one is stored at or after this event: look again after snapshot_every
                self.snapshot_seq = self._state.seq
            else:
                generation, stored = written
                self._replace = False
                self._healed.clear()  # what healed is stored again: a later heal folds the log afresh
                self._state = snapshot.rebased(stored, lambda part: self.store.generation_part(generation, part),
                                               generation.gen, self._heal_for(generation))
                self._generation, self.snapshot_seq = generation, generation.seq
