"""The state cache: the folded state kept in step with the log, and the snapshots that save
refolding it.

Snapshots are caches, never the truth. The cache keeps two kinds, in the store's
``SnapshotStore`` half:

* the stored snapshot of the present, every ``snapshot_every`` events, as a generation of
  keyed entries (``snapshot.keyed``) that the next open reads lazily (``lazy``), a delta of
  the generation it was read from when it can be, so that its cost is what changed;
* history snapshots every ``history_every`` events, from which ``state_at`` folds a past
  state (R17) without replaying the log from the start.

A state read lazily never fails a reader: the store keeps a superseded chain of generations
for a grace period, and the cache moves to the newest well within it (``RECHECK``). If an
entry cannot be read all the same (the file was damaged or edited, or a process slept
past the grace period), its part heals from a fold of the log up to the generation's
event, and the cache writes a fresh generation at its next refresh (R16). That is the only
place such a failure is handled; nothing above this package meets it.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from typing import Any, Callable, Iterable

from ..core.events import Recorded
from ..core.fold import gc_paused
from ..core.model import State, fold, fold_in_steps, fold_rows
from ..core.tables import CREATES
from ..errors import Conflict, LedgerCorrupt
from . import archive, snapshot
from .apart import APART_FROM, start_with_store
from .contract import Generation, Snapshot, SnapshotGone, Store
from .history import HistoryEncoder
from .lazy import Heal

LEGACY_SNAPSHOT = "catalog"
"""Where releases before the keyed snapshot kept theirs (one JSON document): read once, then dropped."""
HISTORY_PREFIX = "history:"
HISTORY_EVERY = 15_000
"""By default, a history snapshot at every multiple of this many events: ``state_at`` folds at
most this many (``history_every=`` changes it). Denser costs disk and the backfill's time; at a
million events, 15,000 against 25,000: ``as_of`` at the worst of 20 points 0.37 s against 0.51 s,
82 MB of history snapshots against 50 MB, the backfill 33 s against 27 s, ``verify`` the same."""
BACKFILL_ENV = "RETENTION_LEDGER_BACKFILL"
"""How ``backfill`` is told the ledger's location (never on its command line: a URL may hold a password)."""
RECHECK = 60.0
"""Seconds after which a held state asks the store whether its generation was superseded,
even if nothing else made it look: far inside the store's grace period (15 minutes)."""


class StateCache:
    """The folded state of one store's log, and its snapshots. Thread-safe."""

    def __init__(self, store: Store, *, snapshot_every: int, history_every: int,
                 apart_from: int | None = APART_FROM) -> None:
        self.store = store
        self.snapshot_every = snapshot_every
        self.history_every = history_every
        self.apart_from = apart_from
        """Fold at least this many events from nothing on open and the snapshots are written by
        another process (None: always by this one)."""
        self.background: subprocess.Popen[bytes] | None = None
        """The process writing this open's snapshots, if one was started."""
        self._handed = False
        """Whether the held state was offered the generation ``background`` stored (``_handed_back``)."""
        self.snapshot_seq = 0
        """The sequence number of the snapshot the held state started from or last wrote (0: none)."""
        self._lock = threading.RLock()
        self._state = State()
        self._generation: Generation | None = None
        """The stored generation the held state reads from (None: held in full, in memory)."""
        self._damaged = False
        """A part of the held generation could not be read and healed from the log: replace it."""
        self._legacy = False
        """The held state was read from an earlier release's one-document snapshot (not checked)."""
        self._healed: dict[int, dict[str, dict[str, Any]]] = {}
        self._looked = time.monotonic()
        self.load()

    # --- loading ----------------------------------------------------------------------------

    def load(self, *, trust_stored: bool = True) -> State:
        """Start from the stored snapshot when it can be trusted, else from nothing, and fold to
        the end; a stored one that could not be used is replaced once the log is folded."""
        with self._lock:
            self._state, self._generation, self.snapshot_seq, self._damaged = State(), None, 0, False
            self._legacy = False
            state = self._load_stored() if trust_stored else None
            unused = state is None and self.store.latest_generation() is not None
            if state is None and trust_stored:
                state = self._load_legacy()
                self._legacy = state is not None
            if state is not None:
                self._state = state
            elif self._fold_handing_over():
                return self._state
            self.refresh(force=True)
            if unused:
                self.save_snapshot(replace=True)
            return self._state

    def _fold_handing_over(self) -> bool:
        """A long log and nothing stored to start from: fold all of it here, holding it in memory,
        and leave its snapshots to ``backfill`` on another core. False if this open writes them
        itself (a short log, or a store no other process can reach)."""
        location = self.store.location
        if self.apart_from is None or location is None or self.store.head()[0] < self.apart_from:
            return False
        self._state = fold_rows(State(), self.store.read(0))
        self.snapshot_seq = self._state.seq  # the next one is due ``snapshot_every`` events from here
        self.background = start_with_store("ledger.persistence.backfill",
                                           [str(self.snapshot_every), str(self.history_every)],
                                           location, BACKFILL_ENV)
        if self.background is not None:  # reaped when it ends, whether or not anyone waits for it
            threading.Thread(target=self.background.wait, name="retention-ledger-backfill", daemon=True).start()
        return True

    def read_generation(self, generation: Generation) -> State:
        """The state a stored generation holds, read lazily (an entry that cannot be read heals from
        the log); ``SnapshotMismatch`` if it does not fit this release or this log. ``verify`` reads
        one strictly instead (``generation_agrees``)."""
        return _read_generation(self.store, generation, self._heal_for(generation))

    def _load_stored(self) -> State | None:
        """The newest generation, read lazily, if it fits this release and this log."""
        generation = self.store.latest_generation()
        if generation is None or generation.format != snapshot.KEYED_FORMAT:
            return None
        try:
            state = self.read_generation(generation)
        except snapshot.SnapshotMismatch:
            return None
        self._generation, self.snapshot_seq = generation, generation.seq
        return state

    def _load_legacy(self) -> State | None:
        """A snapshot written by a release before the keyed one: used once, then replaced."""
        snap = self.store.load_snapshot(LEGACY_SNAPSHOT)
        if snap is None:
            return None
        with contextlib.suppress(Conflict, OSError):
            self.store.delete_snapshot(LEGACY_SNAPSHOT)
        if snap.format != snapshot.FORMAT:
            return None
        try:
            state = snapshot.load(snap.data, self.store.hash_at(snap.seq))
        except snapshot.SnapshotMismatch:
            return None
        if state.seq != snap.seq or self.store.event_time(snap.seq) != state.last_time:
            return None
        return state

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
                if self._generation is not None and self._superseded():
                    return self.load()
                if self._handed_back():
                    return self._state
                self._state = self.fold_to(self._state, None)
                self._maybe_snapshot()
            return self._state

    def _handed_back(self) -> bool:
        """Once the backfill a first open started (``_fold_handing_over``) has ended, read the held
        state from the generation it stored, as every later open does, and fold on from there;
        True if that was done. A big state held in full costs memory and, on each full pass of
        the cyclic collector, time (hundreds of thousands of objects rescanned: about 0.4 s at a
        million events). A generation that cannot be used leaves the state held as it is."""
        if self._generation is not None or self._handed or self.background is None or self.background.poll() is None:
            return False
        self._handed = True
        stored = self._load_stored()
        if stored is None:
            return False
        self._state = self.fold_to(stored, None)
        return True

    def _superseded(self) -> bool:
        """Whether another process started a newer chain of generations (or all were discarded):
        the one we read from will go once its grace period ends, so move to the newest now."""
        latest = self.store.latest_generation()
        return latest is None or self._generation is None or latest.base != self._generation.base

    def full_state(self) -> State:
        """The folded state with every stored entry read (and checked) now, not when asked for:
        for tools and tests that compare or walk whole states."""
        state = self.refresh()
        snapshot.read_all(state)
        return state

    def extend(self, records: Iterable[Recorded], previous_head: int) -> State:
        """After our own append of ``records`` on top of event ``previous_head``: fold them without
        reading them back if nobody else wrote in between, else refold from the log."""
        with self._lock:
            if previous_head != self._state.seq:
                return self.refresh(force=True)
            self._state = fold(self._state, records)
            if self._state.seq // self.history_every > previous_head // self.history_every:
                self._save_history(self._state)
            self._maybe_snapshot()
            return self._state

    def fold_to(self, state: State, upto: int | None) -> State:
        """Fold the log after ``state`` up to event ``upto`` (None: the end), keeping a history
        snapshot at each multiple of ``history_every`` passed on the way."""
        every, encoder = self.history_every, HistoryEncoder()  # one fold's snapshots, each from the last
        steps = fold_in_steps(state) if not state.seq else None  # from nothing: its maps kept from stop to stop
        while True:
            boundary = (state.seq // every + 1) * every
            stop = boundary if upto is None or upto > boundary else upto
            rows = self.store.read(state.seq, upto=stop)
            state = steps.fold_rows(rows) if steps is not None else fold_rows(state, rows)
            if state.seq == boundary:
                self._save_history(state, encoder)
            if state.seq < stop or state.seq == upto:
                return state

    # --- the past (R17) -----------------------------------------------------------------------

    def _save_history(self, state: State, encoder: HistoryEncoder | None = None) -> None:
        name = f"{HISTORY_PREFIX}{state.seq:012d}"
        if self.store.load_snapshot(name) is not None:
            return
        try:
            data = snapshot.dump(state, self.store.hash_at(state.seq), encoder=encoder)
            self.store.save_snapshot(name, Snapshot(state.seq, snapshot.FORMAT, data))
        except (Conflict, OSError):
            pass  # a cache: a busy or read-only store goes without

    def state_at(self, seq: int) -> State:
        """The fold of the log up to event ``seq`` (R17): from the newest history snapshot at or
        before it that can be trusted, else from nothing. One that cannot be trusted (edited,
        or of another log) is deleted, to be rebuilt by the next fold that passes its place."""
        # Not read in full (that costs seconds on a big ledger): the past state borrows from the
        # present one lazily.
        present = self.refresh()
        if seq >= present.seq:
            return present
        with gc_paused():  # a past state is a million young objects: a collection between its load
            return self._state_at(seq, present)  # and its fold rescans them all, and the present

    def _state_at(self, seq: int, present: State) -> State:
        for name, at in reversed(self.store.snapshots(HISTORY_PREFIX)):
            if at > seq:
                continue
            base = self.load_history(name, present)
            if base is None:
                continue
            archive.prefetch_created(base.tables, self.store.read(base.seq, upto=seq, types=CREATES))
            try:
                return self.fold_to(base, seq)
            except LedgerCorrupt:  # the log does not follow on from it: the cache lied, not the log
                with contextlib.suppress(Conflict, OSError):
                    self.store.delete_snapshot(name)
        return self.fold_to(State(), seq)

    def load_history(self, name: str, present: State) -> State | None:
        """A stored history snapshot, completed from ``present``; None (and it is deleted) if it
        cannot be trusted."""
        snap = self.store.load_snapshot(name)
        if snap is None:
            return None
        try:
            if snap.format != snapshot.FORMAT:
                raise snapshot.SnapshotMismatch(f"format {snap.format}")
            state = snapshot.load(snap.data, self.store.hash_at(snap.seq), present=present)
            if state.seq != snap.seq:
                raise snapshot.SnapshotMismatch("its seq is not the one it is stored under")
            return state
        except snapshot.SnapshotMismatch:
            with contextlib.suppress(Conflict, OSError):
                self.store.delete_snapshot(name)
            return None

    # --- checking the snapshots against a fold (verify) ----------------------------------------

    def history_agrees(self, name: str, fresh: State, present: State, encoder: HistoryEncoder) -> bool:
        """Whether history snapshot ``name`` holds ``fresh`` (a fold of the log to its event): by its
        bytes, else (an earlier release's layout, or a lie) by its decoded state. One that cannot
        be read or trusted at all is deleted here; one that disagrees is the caller's to delete."""
        snap = self.store.load_snapshot(name)
        if snap is None:
            return True  # deleted meanwhile: nothing is left to lie
        if snap.format == snapshot.FORMAT and snap.seq == fresh.seq and \
                snapshot.history_matches(snap.data, fresh, self.store.hash_at(fresh.seq), encoder):
            return True
        kept = self.load_history(name, present)
        return kept is not None and snapshot.history_equal(kept, fresh)

    def held_checked_by(self, generation: Generation | None) -> bool:
        """Whether the held state is the log's own fold, or read from ``generation``: then checking
        that generation checks it too, and comparing it with a fold again would prove nothing more."""
        if self._generation is None:
            return not self._legacy
        return generation is not None and self._generation.gen == generation.gen

    # --- writing the stored snapshot ------------------------------------------------------------

    def _maybe_snapshot(self) -> None:
        """After a fold: a generation that healed is replaced at once; otherwise one is written every
        ``snapshot_every`` events (a delta costs what changed since the last, so a fixed interval
        keeps it flat per event)."""
        if self._damaged:
            self._damaged = False
            self.save_snapshot(replace=True)
        elif self._state.seq - self.snapshot_seq >= self.snapshot_every:
            self.save_snapshot()

    def rebuild(self, base: State) -> None:
        """Replace the held state with ``base`` (a fold from nothing) caught up with the log, and
        write a fresh, full snapshot: for when the state we held came from a snapshot that lied."""
        with self._lock:
            self._state, self._generation, self._damaged = self.fold_to(base, None), None, False
            self._legacy = False
            if self._state.seq:
                self.save_snapshot()

    def save_snapshot(self, *, replace: bool = False) -> None:
        """Store the held state as the next generation: a delta of the one it reads from, or a
        full one when it is held in full or the deltas have outgrown their full generation.
        ``replace``: also when the newest stored one is at the same event (it was damaged)."""
        with self._lock:
            if self.store.in_exclusive:
                return  # inside a command's write transaction: the next refresh writes it
            try:
                with gc_paused():  # sealing and inserting a row per entry make no cycles
                    self._save_generation(replace)
            except (Conflict, OSError):
                pass  # a snapshot is only a cache; a busy or read-only store just goes without

    def _save_generation(self, replace: bool) -> None:
        store, state = self.store, self._state
        if not state.seq:
            return
        latest = store.latest_generation()
        if latest is not None and latest.seq >= state.seq and not (replace and latest.seq == state.seq):
            return
        extends = None
        if latest is not None and self._generation is not None:
            if latest.base != self._generation.base:  # another process started a new chain: join it
                self.load()
                return
            full, deltas = store.chain_entries(latest)
            extends = self._generation if deltas <= full else None
        stored = snapshot.keyed(state, store.hash_at(state.seq), delta_of=None if extends is None else extends.gen)
        written = store.write_generation(state.seq, snapshot.KEYED_FORMAT, stored.head, stored.rows,
                                         extends=extends if stored.delta else None, replace=replace)
        if written is not None:
            self._healed.clear()  # what healed is stored again: a later heal folds the log afresh
            self._state = snapshot.rebased(stored, lambda part: store.generation_part(written, part), written.gen,
                                           self._heal_for(written))
            self._generation, self.snapshot_seq, self._legacy = written, written.seq, False


# --- checking a stored generation against a fold (verify, here or in its chain walker) -----------

def generation_agrees(store: Store, generation: Generation, fresh: State,
                      encoder: HistoryEncoder | None = None) -> bool:
    """Whether stored ``generation`` holds ``fresh`` (a fold of the log to its event), read
    strictly: an entry that fails its check counts against it. By bytes, entry for entry,
    else by decoded states. ``encoder``: the one that encoded this fold's history snapshots."""
    stored = snapshot.keyed(fresh, store.hash_at(fresh.seq), encoder=encoder)
    try:
        if stored.head == generation.head and snapshot.entries_match(
                stored, lambda part: store.generation_part(generation, part).scan()):
            return True
        return _read_generation(store, generation, _strict) == fresh
    except (snapshot.SnapshotMismatch, SnapshotGone, LedgerCorrupt):
        return False


def _read_generation(store: Store, generation: Generation, heal: Callable[[str], Heal]) -> State:
    state = snapshot.load_keyed(generation.head, store.hash_at(generation.seq),
                                lambda part: store.generation_part(generation, part), generation.gen, heal)
    if state.seq != generation.seq or store.event_time(generation.seq) != state.last_time:
        raise snapshot.SnapshotMismatch("its head does not match the event it claims to end at")
    return state


def _strict(part: str) -> Heal:
    def refuse() -> dict[str, Any]:
        raise snapshot.SnapshotMismatch(f"its part {part} cannot be read (an entry fails its check, or "
                                        "the generation is gone)")
    return refuse
