"""The command loop: decide on folded state, append on condition, fold what was appended.

Every command runs the same loop (``execute``): decide on the folded state, and
append on the condition that every stream the decision read is still where it
was (R4). If another writer got there first the append is refused, the state is
refolded from the log, and the command is decided again. After
``optimistic_attempts`` lost races the command reads, decides and appends under
the write lock, where it cannot lose; only a lock that is never free ends in
``Conflict``. Refusals are always decided on the latest state.

How often a call may lose is bounded here and only here (``Attempts``): a caller that retries a
whole step of its own (a replace decided again on a newer version, an erasure scanned again) runs
it inside ``retrying()``, and every command inside draws on the same budget, so nested loops share
one bound (``max_attempts`` lost races) instead of multiplying theirs.

Keeping the folded state in step with the log, and the snapshot that makes opening
fast, is the held state's work (``persistence.held``); the loop only asks it for the
state and tells it what was appended.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from datetime import datetime
from typing import Any, Callable, Iterator, Union

import attrs

from .clock import Clock, Micros, from_micros, read_clock
from .core.concern import Decision
from .core.events import encode, type_of
from .core.model import Command, State, decide
from .core.upkeep import LEDGER_STREAM, LedgerUpgraded
from .errors import Conflict, InvalidArgument, LedgerError, LedgerUnavailable
from .persistence.contract import CHAIN_FORMAT, NewEvent, Store
from .persistence.held import HeldState

HISTORY_EVERY = 15_000
"""By default, ``maintain`` stores a history snapshot at every multiple of this many events:
``as_of`` folds at most this many (``history_every=`` changes it). Denser costs disk and
``maintain``'s time; at a million events, 15,000 against 25,000: ``as_of`` at the worst of 20 points
0.37 s against 0.51 s, 82 MB of history snapshots against 50 MB."""

CommandOrBuilder = Union[Command, Callable[[Micros], Command]]
"""A command, or a function of the ledger's now that makes one (for commands that need the time)."""

log = logging.getLogger("ledger")


class Attempts:
    """The lost races one call has had, against the one bound it may have (``Runner.max_attempts``),
    whatever loop lost them: the runner's own, or a caller's that retries a whole step. Once the
    bound is spent, nothing inside the call tries again."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lost = 0
        self._gave_up: Conflict | None = None

    def lose(self, conflict: Conflict, *, since: int | None = None) -> None:
        """Count a lost race; ``Conflict`` if that was the last one the bound allows. ``since``:
        ``lost`` when the caller's step began; a race the runner inside counted after it is this
        one, not counted twice."""
        if since is None or self.lost == since:
            self.lost += 1
        if self.lost >= self.limit and self._gave_up is None:
            self._gave_up = Conflict(f"gave up after {self.limit} attempts: other writers kept changing what this "
                                     f"command depends on (last: {conflict})", stream=conflict.stream)
        self.check()

    def check(self) -> None:
        """``Conflict`` if the bound is spent."""
        if self._gave_up is not None:
            raise Conflict(str(self._gave_up), stream=self._gave_up.stream) from None


@attrs.frozen(slots=False)
class Prepared:
    """A decided command and the stream versions it was decided on, not yet appended.

    Exposed so tests (and tools) can split a command into its read, decide and
    append steps and interleave them with other writers. Without slots (still frozen), as
    ``Decision``: built once a command, in half the instructions.
    """

    decision: Decision
    conditions: dict[str, int]
    now: Micros
    seq: int
    """The last sequence number of the state it was decided on."""
    reading: Micros | None = None
    """What the clock said (``now`` is that, held to the log's time): the store gets the reading, so a
    shared store can hold each host's clock to its own (R18); an event's time is never before ``now``."""

    @property
    def clock(self) -> Micros:
        """What the store holds to its own clock: the reading (``now``, if none was kept)."""
        return self.now if self.reading is None else self.reading


class Runner:
    """Runs commands against one store, with the state cache holding the folded state."""

    def __init__(self, store: Store, *, clock: Clock, actor: str, max_attempts: int = 30,
                 optimistic_attempts: int = 8, snapshot_every: int = 20_000,
                 history_every: int = HISTORY_EVERY) -> None:
        self.store = store
        self.clock = clock
        self.actor = actor
        self.max_attempts = max_attempts
        self.optimistic_attempts = optimistic_attempts
        if not isinstance(history_every, int) or isinstance(history_every, bool) or history_every < 1:
            raise InvalidArgument(f"history_every must be a whole number of events >= 1, got {history_every!r}")
        self.retries = 0
        """How many appends were refused and retried since opening (for benchmarks and tests)."""
        self._lock = threading.RLock()
        self._calls = threading.local()  # this thread's call in progress: its ``Attempts``
        self.listeners: list[Callable[[frozenset[str]], None]] = []
        """Called after each append this runner made, with the streams it wrote to (``Ledger.watch``)."""
        self.history_every = history_every
        """The spacing of the history snapshots ``maintain`` stores."""
        self._upgrade()
        self.cache = HeldState(store, snapshot_every=snapshot_every)

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

    @property
    def held(self) -> State:
        """The state as last folded, without asking the store whether others wrote since."""
        return self.cache.held

    @property
    def state(self) -> State:
        """The folded state, caught up with the log."""
        return self.cache.refresh()

    def refresh(self, *, force: bool = False) -> State:
        return self.cache.refresh(force=force)

    # --- time -----------------------------------------------------------------------------

    def reading(self) -> Micros:
        """What the clock says, as it is: what a shared store holds to its own (R18)."""
        return read_clock(self.clock)

    def now_micros(self, state: State | None = None) -> Micros:
        # The log's time never goes back, so neither does the ledger's idea of now.
        return max(self.reading(), (state or self.cache.held).last_time)

    def now(self) -> datetime:
        return from_micros(self.now_micros(self.refresh()))

    # --- the loop -------------------------------------------------------------------------

    def prepare(self, command: CommandOrBuilder) -> Prepared:
        """Read and decide: the first two steps of a command, on the latest state."""
        with self._lock:
            return self._decide(self.refresh(), command)

    def _decide(self, state: State, command: CommandOrBuilder) -> Prepared:
        reading = self.reading()
        now = max(reading, state.last_time)  # the log's time never goes back, so neither does now
        if callable(command):
            command = command(now)
        decision = decide(state, command)
        return Prepared(decision, {s: state.version(s) for s in decision.reads}, now, state.seq, reading)

    def preview(self, command: CommandOrBuilder) -> Decision:
        """Decide without appending (a dry run), held to the store's clock as an append is: a host
        whose clock a shared store refuses (``ClockSkew``) is not shown what it may not do (R18)."""
        prepared = self.prepare(command)
        self.store.check_clock(prepared.clock)
        return prepared.decision

    def commit(self, prepared: Prepared) -> None:
        """Append a prepared decision; raises ``Conflict`` if a stream it read has moved.

        On return the runner's state includes the appended events.
        """
        decided = prepared.decision.events
        if not decided:
            return
        # The store times the events after its last one, so at or after ``now`` either way.
        appended = self.store.append(
            [NewEvent(stream, *type_of(event), encode(event)) for stream, event in decided],
            prepared.conditions, prepared.clock, self.actor,
            expected_head=prepared.seq,
            blobs=dict(prepared.decision.attachments))
        with self._lock:
            self.cache.extend([(seq, stream, version, time_, event)
                               for (seq, stream, version, time_), (_, event) in zip(appended.rows, decided)],
                              appended.previous_head)

    def execute(self, command: CommandOrBuilder) -> Decision:
        """Decide and append with retries.

        The first attempt decides on the state we already hold, without asking the
        file whether others wrote: if they did, and it matters, the conditional append
        refuses (R4) and we retry on fresh state. A refusal or a no-op, which append
        nothing and so are not checked by the store, is always re-decided on the latest
        state before the caller hears it.
        """
        with self.retrying() as attempts:
            decision = self._attempt(command, attempts)
        self._tell(decision)
        return decision

    def _attempt(self, command: CommandOrBuilder, attempts: Attempts) -> Decision:
        """``execute``'s loop, drawing on the call's budget; the decision that landed."""
        fresh = False
        while True:
            attempts.check()
            if attempts.lost >= self.optimistic_attempts:
                return self._execute_exclusively(command)
            with self._lock:
                state = self.refresh() if fresh or self.cache.due else self.cache.held
                try:
                    prepared = self._decide(state, command)
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
                attempts.lose(exc)
                fresh = True
                self.retries += 1
                time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** attempts.lost)))
                continue
            return prepared.decision

    @contextlib.contextmanager
    def retrying(self) -> Iterator[Attempts]:
        """The attempt budget of the call in progress on this thread: a fresh one for the outermost
        call, the same one for every call made inside it. A caller that retries a step of its own
        after a ``Conflict`` counts it here too (``Attempts.lose``), and gives up when the budget does."""
        held: Attempts | None = getattr(self._calls, "attempts", None)
        if held is not None:
            yield held
            return
        self._calls.attempts = attempts = Attempts(self.max_attempts)
        try:
            yield attempts
        finally:
            self._calls.attempts = None

    def _execute_exclusively(self, command: CommandOrBuilder) -> Decision:
        """Read, decide and append inside one write transaction. Slower for everyone (others
        wait for the lock), so only for a command that lost ``optimistic_attempts`` races in a
        row, typically a vacuum on a busy catalog; it cannot lose another. If the lock is not
        had within the busy timeout, that is ``Conflict``."""
        with self._lock, self.store.exclusive():
            prepared = self._decide(self.refresh(force=True), command)
            self.commit(prepared)
        return prepared.decision

    def _tell(self, decision: Decision) -> None:
        """Tell the listeners what an append wrote to, once it has landed and every lock is let go
        (a listener may take its own locks, and call the ledger). A listener's error is logged:
        the append landed, and its caller must hear that."""
        if not decision.events or not self.listeners:
            return
        streams = frozenset(stream for stream, _ in decision.events)
        for listener in tuple(self.listeners):
            try:
                listener(streams)
            except Exception:  # noqa: BLE001 - a follower's trouble is not the append's
                log.exception("a listener of the ledger's appends failed")

    def run(self, command: CommandOrBuilder) -> Any:
        """``execute`` and return only what the decision tells the caller."""
        return self.execute(command).result
