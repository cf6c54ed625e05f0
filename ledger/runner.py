"""The command loop: decide on folded state, append on condition, fold what was appended.

Every command runs the same loop (``execute``): decide on the folded state, and
append on the condition that every stream the decision read is still where it
was (R4). If another writer got there first the append is refused, the state is
refolded from the log, and the command is decided again. After
``optimistic_attempts`` lost races the command reads, decides and appends under
the write lock, where it cannot lose; only a lock that is never free ends in
``Conflict``. Refusals are always decided on the latest state.

The runner also keeps the folded state current (``refresh`` folds what other
processes appended) and writes snapshots, which are caches, never the truth: the
stored snapshot of the present, every ``snapshot_every`` events, as a generation of
keyed entries that the next open reads lazily (``core.lazy``; a delta of the
generation it was read from, so its cost is what changed), and history snapshots
every ``history_every`` events, from which ``state_at`` folds a past state (R17)
without replaying the log from the start.

A state read lazily depends on its generation staying stored. Another process's
full generation deletes the chains before the previous one, and an entry may fail
its CRC; either way a read raises ``SnapshotGone``, and the runner
reloads (from the newest generation, or for a damaged one from the log) and
decides again.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from datetime import datetime
from typing import Any, Callable, Union

import attrs

from .clock import Clock, Micros, from_micros, read_clock
from .core import snapshot
from .core.concern import Decision
from .core.events import Recorded, encode, type_of
from .core.model import Command, State, decide, fold, fold_rows
from .core.upkeep import LEDGER_STREAM, LedgerUpgraded
from .errors import Conflict, InvalidArgument, LedgerCorrupt, LedgerError, LedgerUnavailable, SnapshotGone
from .store import CHAIN_FORMAT, EventStore, Generation, NewEvent, Snapshot, StoredPart

SNAPSHOT_NAME = "catalog"
"""Where releases before the keyed snapshot kept theirs (one JSON document): read once, then dropped."""
HISTORY_PREFIX = "history:"
HISTORY_EVERY = 25_000
"""By default, a history snapshot at every multiple of this many events: ``state_at`` folds at
most this many (``history_every=`` changes it)."""

CommandOrBuilder = Union[Command, Callable[[Micros], Command]]
"""A command, or a function of the ledger's now that makes one (for commands that need the time)."""


@attrs.frozen
class Prepared:
    """A decided command and the stream versions it was decided on, not yet appended.

    Exposed so tests (and tools) can split a command into its read, decide and
    append steps and interleave them with other writers.
    """

    decision: Decision
    conditions: dict[str, int]
    now: Micros
    seq: int
    """The last sequence number of the state it was decided on."""


class Runner:
    """Runs commands against one store, holding the folded state in step with the log."""

    def __init__(self, store: EventStore, *, clock: Clock, actor: str, max_attempts: int = 30,
                 optimistic_attempts: int = 8, snapshot_every: int = 20_000,
                 history_every: int = HISTORY_EVERY) -> None:
        self.store = store
        self.clock = clock
        self.actor = actor
        self.max_attempts = max_attempts
        self.optimistic_attempts = optimistic_attempts
        self.snapshot_every = snapshot_every
        if not isinstance(history_every, int) or isinstance(history_every, bool) or history_every < 1:
            raise InvalidArgument(f"history_every must be a whole number of events >= 1, got {history_every!r}")
        self.history_every = history_every
        self.retries = 0
        """How many appends were refused and retried since opening (for benchmarks and tests)."""
        self.snapshot_seq = 0
        """The sequence number of the snapshot this runner started from or last wrote (0: none)."""
        self._lock = threading.RLock()
        self._state = State()
        self._generation: Generation | None = None
        """The stored generation the held state reads from (None: held in full, in memory)."""
        self._parts: list[StoredPart] = []
        self._upgrade()
        self._load()

    def _upgrade(self) -> None:
        """Chain a ledger written before the hash chain, once, recording it as an event (R16).
        A file this process may not write stays as it is: it can still be read."""
        if self.store.chained:
            return
        hashed = self.store.count()
        note = LedgerUpgraded(self.store.format, CHAIN_FORMAT, hashed)
        try:
            self.store.upgrade_chain(NewEvent(LEDGER_STREAM, *type_of(note), encode(note)),
                                     max(read_clock(self.clock), self.store.head()[1]), self.actor)
        except LedgerUnavailable:
            pass

    # --- the folded state -----------------------------------------------------------------

    def _load(self, *, trust_stored: bool = True) -> None:
        """Start from the stored snapshot when it can be trusted, else from nothing; a stored one
        that could not be used is replaced once the log is folded."""
        self._state, self._generation, self._parts, self.snapshot_seq = State(), None, [], 0
        state = self._load_stored() if trust_stored else None
        unused = state is None and self.store.latest_generation() is not None
        if state is None and trust_stored:
            state = self._load_legacy()
        if state is not None:
            self._state = state
        self.refresh(force=True)
        if unused:
            self.save_snapshot(replace=True)

    def read_generation(self, generation: Generation, *, hold: bool = False) -> State:
        """The state a stored generation holds, read lazily; ``SnapshotMismatch`` if it does not fit
        this release or this log. ``hold``: it becomes the state this runner holds, whose parts
        ``refresh`` watches for failures."""
        state = snapshot.load_keyed(generation.head, self.store.hash_at(generation.seq),
                                    self._parts_of(generation) if hold else
                                    lambda part: self.store.generation_part(generation, part), generation.gen)
        if state.seq != generation.seq or self.store.event_time(generation.seq) != state.last_time:
            raise snapshot.SnapshotMismatch("its head does not match the event it claims to end at")
        return state

    def _load_stored(self) -> State | None:
        """The newest generation, read lazily, if it fits this release and this log."""
        generation = self.store.latest_generation()
        if generation is None or generation.format != snapshot.KEYED_FORMAT:
            return None
        try:
            state = self.read_generation(generation, hold=True)
        except snapshot.SnapshotMismatch:
            self._parts = []
            return None
        self._generation, self.snapshot_seq = generation, generation.seq
        return state

    def _load_legacy(self) -> State | None:
        """A snapshot written by a release before the keyed one: used once, then replaced."""
        snap = self.store.load_snapshot(SNAPSHOT_NAME)
        if snap is None:
            return None
        with contextlib.suppress(Conflict, OSError):
            self.store.delete_snapshot(SNAPSHOT_NAME)
        if snap.format != snapshot.FORMAT:
            return None
        try:
            state = snapshot.load(snap.data, self.store.hash_at(snap.seq))
        except snapshot.SnapshotMismatch:
            return None
        if state.seq != snap.seq or self.store.event_time(snap.seq) != state.last_time:
            return None
        return state

    def _parts_of(self, generation: Generation) -> Callable[[str], StoredPart]:
        def part(name: str) -> StoredPart:
            found = self.store.generation_part(generation, name)
            self._parts.append(found)
            return found
        return part

    def _stale(self) -> bool:
        """Whether the generation the held state reads from is gone or failed a check."""
        if self._generation is None:
            return False
        return any(p.failed for p in self._parts) or not self.store.generation_exists(self._generation.gen)

    def recover(self) -> State:
        """After ``SnapshotGone``: reload (from the newest generation, unless the one we read
        from was damaged: then from the log) and fold to the end."""
        with self._lock:
            self._load(trust_stored=not any(p.failed == "bad" for p in self._parts))
            return self._state

    @property
    def held(self) -> State:
        """The state as last folded, without asking the file whether others wrote since."""
        return self._state

    @property
    def state(self) -> State:
        """The folded state, caught up with the log."""
        return self.refresh()

    def full_state(self) -> State:
        """The folded state with every stored entry read (and checked) now, not when asked for:
        for tools and tests that compare or walk whole states."""
        for _ in range(3):
            state = self.refresh()
            try:
                snapshot.read_all(state)
                return state
            except SnapshotGone:
                self.recover()  # damaged: from the log, which is whole; gone: from the newer one
        return self.recover()  # three generations replaced under us in a row: read the log

    def refresh(self, *, force: bool = False) -> State:
        """Fold whatever other writers appended since we last looked; returns the state."""
        with self._lock:
            if self.store.changed_elsewhere() or force or any(p.failed for p in self._parts):
                if self._stale():
                    return self.recover()
                try:
                    self._state = self._fold_to(self._state, None)
                except SnapshotGone:
                    return self.recover()
                self._maybe_snapshot()
            return self._state

    def _fold_to(self, state: State, upto: int | None) -> State:
        """Fold the log after ``state`` up to event ``upto`` (None: the end), keeping a history
        snapshot at each multiple of ``history_every`` passed on the way."""
        every = self.history_every
        while True:
            boundary = (state.seq // every + 1) * every
            stop = boundary if upto is None or upto > boundary else upto
            state = fold_rows(state, self.store.read(state.seq, upto=stop))
            if state.seq == boundary:
                self._save_history(state)
            if state.seq < stop or state.seq == upto:
                return state

    def _save_history(self, state: State) -> None:
        name = f"{HISTORY_PREFIX}{state.seq:012d}"
        if self.store.load_snapshot(name) is not None:
            return
        try:
            data = snapshot.dump(state, self.store.hash_at(state.seq))
            self.store.save_snapshot(name, Snapshot(state.seq, snapshot.FORMAT, data))
        except (Conflict, OSError):
            pass  # a cache: a busy or read-only file goes without

    def state_at(self, seq: int) -> State:
        """The fold of the log up to event ``seq`` (R17): from the newest history snapshot at or
        before it that can be trusted, else from nothing. One that cannot be trusted (edited,
        or of another log) is deleted, to be rebuilt by the next fold that passes its place."""
        # Not read in full (that costs seconds on a big ledger): the past state borrows from this
        # one lazily, and whoever reads it meets ``SnapshotGone`` if the generation is replaced
        # meanwhile; ``AsOf`` then folds it again.
        present = self.refresh()
        if seq >= present.seq:
            return present
        for name, at in reversed(self.store.snapshots(HISTORY_PREFIX)):
            if at > seq:
                continue
            base = self.load_history(name, present)
            if base is None:
                continue
            try:
                return self._fold_to(base, seq)
            except LedgerCorrupt:  # the log does not follow on from it: the cache lied, not the log
                with contextlib.suppress(Conflict, OSError):
                    self.store.delete_snapshot(name)
        return self._fold_to(State(), seq)

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

    def _maybe_snapshot(self) -> None:
        # A delta costs what changed since the last one, so a fixed interval keeps it flat per event.
        if self._state.seq - self.snapshot_seq >= self.snapshot_every:
            self.save_snapshot()

    def rebuild(self, base: State) -> None:
        """Replace the held state with ``base`` (a fold from nothing) caught up with the log, and
        write a fresh, full snapshot: for when the state we held came from a snapshot that lied."""
        with self._lock:
            self._state, self._generation, self._parts = self._fold_to(base, None), None, []
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
                self._save_generation(replace)
            except (Conflict, OSError):
                pass  # a snapshot is only a cache; a busy or read-only file just goes without

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
                self._load()
                return
            full, deltas = store.chain_entries(latest)
            extends = self._generation if deltas <= full else None
        stored = snapshot.keyed(state, store.hash_at(state.seq), delta_of=None if extends is None else extends.gen)
        written = store.write_generation(state.seq, snapshot.KEYED_FORMAT, stored.head, stored.rows,
                                         extends=extends if stored.delta else None, replace=replace)
        if written is not None:
            self._parts = []
            self._state = snapshot.rebased(stored, self._parts_of(written), written.gen)
            self._generation, self.snapshot_seq = written, written.seq

    # --- time -----------------------------------------------------------------------------

    def now_micros(self, state: State | None = None) -> Micros:
        # The log's time never goes back, so neither does the ledger's idea of now.
        return max(read_clock(self.clock), (state or self._state).last_time)

    def now(self) -> datetime:
        return from_micros(self.now_micros(self.refresh()))

    # --- the loop -------------------------------------------------------------------------

    def prepare(self, command: CommandOrBuilder) -> Prepared:
        """Read and decide: the first two steps of a command, on the latest state."""
        with self._lock:
            try:
                return self._decide(self.refresh(), command)
            except SnapshotGone:
                return self._decide(self.recover(), command)

    def _decide(self, state: State, command: CommandOrBuilder) -> Prepared:
        now = self.now_micros(state)
        if callable(command):
            command = command(now)
        decision = decide(state, command)
        return Prepared(decision, {s: state.version(s) for s in decision.reads}, now, state.seq)

    def commit(self, prepared: Prepared) -> None:
        """Append a prepared decision; raises ``Conflict`` if a stream it read has moved.

        On return the runner's state includes the appended events.
        """
        decided = prepared.decision.events
        if not decided:
            return
        appended = self.store.append(
            [NewEvent(stream, *type_of(event), encode(event)) for stream, event in decided],
            prepared.conditions, prepared.now, self.actor, expected_head=prepared.seq,
            blobs=dict(prepared.decision.attachments))
        with self._lock:
            if appended.previous_head != self._state.seq:
                self.refresh(force=True)
                return
            # Nobody else wrote since our state: fold our own events without reading them back.
            try:
                self._state = fold(self._state, (
                    Recorded(seq, stream, version, time_, self.actor, event)
                    for (seq, stream, version, time_), (_, event) in zip(appended.rows, decided)))
            except SnapshotGone:  # the events are in: reload, and the fold reads them back
                self.recover()
                return
            if self._state.seq // self.history_every > appended.previous_head // self.history_every:
                self._save_history(self._state)
            self._maybe_snapshot()

    def execute(self, command: CommandOrBuilder) -> Decision:
        """Decide and append with retries.

        The first attempt decides on the state we already hold, without asking the
        file whether others wrote: if they did, and it matters, the conditional append
        refuses (R4) and we retry on fresh state. A refusal or a no-op, which append
        nothing and so are not checked by the store, is always re-decided on the latest
        state before the caller hears it.
        """
        last: Conflict | None = None
        fresh = False
        for attempt in range(self.max_attempts):
            if attempt >= self.optimistic_attempts:
                return self._execute_exclusively(command)
            with self._lock:
                state = self.refresh() if fresh else self._state
                try:
                    prepared = self._decide(state, command)
                except SnapshotGone:  # the stored snapshot went from under the state: reload, decide again
                    self.recover()
                    continue
                except LedgerError:
                    if fresh or self.refresh().seq == state.seq:
                        raise  # decided on the latest state: the refusal stands
                    fresh = True
                    continue
                if not prepared.decision.events and not fresh:
                    fresh = True
                    continue
            try:
                self.commit(prepared)
            except Conflict as exc:
                last = exc
                fresh = True
                self.retries += 1
                time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** attempt)))
                continue
            return prepared.decision
        raise Conflict(
            f"gave up after {self.max_attempts} attempts: other writers kept changing what this "
            f"command depends on (last: {last})",
            stream=last.stream if last else None,
        )

    def _execute_exclusively(self, command: CommandOrBuilder) -> Decision:
        """Read, decide and append inside one write transaction. Slower for everyone (others
        wait for the lock), so only for a command that lost ``optimistic_attempts`` races in a
        row, typically a vacuum on a busy catalog; it cannot lose another. If the lock is not
        had within the busy timeout, that is ``Conflict``."""
        with self._lock, self.store.exclusive():
            try:
                prepared = self._decide(self.refresh(force=True), command)
            except SnapshotGone:
                prepared = self._decide(self.recover(), command)
            self.commit(prepared)
            return prepared.decision

    def run(self, command: CommandOrBuilder) -> Any:
        """``execute`` and return only what the decision tells the caller."""
        return self.execute(command).result
