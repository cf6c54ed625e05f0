"""``maintain``: the stored states no command needs, stored when asked for (R22).

A command needs the state at the log's head, which the held state keeps (and stores as a
generation as it goes, so that the next open reads it instead of folding). What no command
needs is the past: a generation at least every ``history_every`` events, from which ``as_of``
folds a short way (R17) instead of from the first event. Writing them costs a fold of the log,
so it is asked for, as Iceberg's maintenance actions are: a pipeline calls ``Ledger.maintain()``
(or ``retention-ledger maintain``) after its vacuum, or a scheduler does. It runs in the
caller's process, to the end of the call, and nothing else.

Each generation it writes is a delta of the one before (what the fold says it changed since),
so writing one costs what changed, and the one at the head is what the next open reads. It
runs once at a time, across processes and hosts: it takes a lease in the store first (as a
vacuum run does), renews it as it goes, and a second caller meanwhile is told who holds it, until
when, and does nothing. Killed at any point, it leaves what it stored whole (each generation is one
transaction) and the rest absent, and the next ``maintain`` writes what is missing: on the same
host at once (a holder whose process is no more holds nothing: ``holders``), from another host
once the lease has ended (``LEASE_SECONDS`` at most). On a shared store the lease is held to the
server's clock, as commands are: a host whose clock the store refuses is refused (``ClockSkew``).
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime
from typing import Callable, NoReturn

import attrs

from ..clock import Micros, from_micros, iso_utc
from ..core.model import State
from ..errors import Conflict
from . import collector, holders, snapshot, writing
from .contract import Generation, Lease, Store
from .held import HeldState
from .lazy import Heal
from .holders import Holder

LEASE = "maintain"
LEASE_SECONDS = 120
"""How long the upkeep lease lasts unless renewed (it is renewed at every generation written): a
process killed on another host while it held it holds the next one off for at most this long (on
its own host, not at all)."""

Progress = Callable[[int, int], None]
"""``progress(events folded, events to fold)``."""


@attrs.frozen
class MaintainReport:
    done: bool
    """False: another process holds the upkeep lease, and nothing was done here."""
    holder: str | None
    """Who holds the lease (``pid N on host, as actor``), when not done."""
    written: int
    """Stored states (generations) written by this call."""
    generations: int
    """Stored states kept in all, after it."""
    newest: int | None
    """The event the newest stored state ends at, after it."""
    seconds: float
    until: datetime | None = None
    """When not done: when the holder's lease ends unless it renews it (it does at every stored
    state); a run then goes on."""

    def summary(self) -> str:
        if not self.done:
            until = "" if self.until is None else f", its lease until {iso_utc(self.until)} unless it renews it"
            return f"maintain is running elsewhere ({self.holder}){until}; nothing was done here"
        return (f"maintained in {self.seconds:.1f} s: {self.written} stored state(s) written ({self.generations} "
                f"in all), the newest at event #{self.newest or 0}")


def maintain(store: Store, held: HeldState, *, history_every: int, holder: Holder, now: Callable[[], Micros],
             progress: Progress | None = None) -> MaintainReport:
    """Store the generations missing up to the log's head; see the module docstring. ``now``:
    this host's clock, which a shared store holds to its own."""
    started = time.monotonic()
    me = holder.text()

    def lease() -> Lease | None:
        at = now()
        return store.take_lease(LEASE, me, at + LEASE_SECONDS * 1_000_000, at, gone=holders.gone)

    taken = lease()
    if taken is not None:
        return MaintainReport(False, holders.shown(taken.holder), 0, 0, None, time.monotonic() - started,
                              until=from_micros(taken.until))
    try:
        _forget_earlier(store)
        head = held.refresh().seq
        stored = [g for g in store.generations() if g.format == snapshot.KEYED_FORMAT]
        points = missing(sorted({g.seq for g in stored}), head, history_every)
        written = _write(store, stored, points, lease, progress) if points else 0
        if written:
            held.load()  # read on from the generation at the head, as the next open will
        generations = store.generations()
        return MaintainReport(True, None, written, len(generations), generations[-1].seq if generations else None,
                              time.monotonic() - started)
    finally:
        store.release_lease(LEASE, me)


def missing(stored: list[int], head: int, every: int) -> list[int]:
    """Where generations are missing, given those ``stored`` (their events, ascending): wherever
    ``every`` events pass without one, and at the ``head``."""
    points: list[int] = []
    last = 0
    for at in [*stored, head]:
        while at - last > every:
            last += every
            points.append(last)
        last = max(last, at)
    if head and head not in stored and head not in points:
        points.append(head)
    return points


def _write(store: Store, stored: list[Generation], points: list[int], renew: Callable[[], object],
           progress: Progress | None) -> int:
    """Store a generation at each of ``points`` (ascending), folded on from the newest stored one
    before the first (read in full), else from nothing: the first full, the rest deltas, a fresh
    full one whenever the deltas outgrow it (``snapshot.GROWTH``)."""
    base = _newest_before(store, stored, points[0])
    folded, written, extends = snapshot.Folded(), 0, None
    full = deltas = 0
    since: dict[str, set[str]] = {}
    with collector.paused():
        for state, changed in folded.stops(base, lambda after, upto: store.read(after, upto=upto), points):
            for part, keys in changed.items():
                since.setdefault(part, set()).update(keys)
            if deltas > snapshot.GROWTH * full:
                extends = None
            rows = folded.rows(None if extends is None else since)
            try:
                generation = store.write_generation(state.seq, snapshot.KEYED_FORMAT,
                                                    folded.head(state, store.hash_at(state.seq)), rows,
                                                    extends=extends)
            except (Conflict, OSError):
                generation = None  # busy: what is missing is written by the next maintain
            if generation is None:  # one is stored at this event (written meanwhile), or the chain moved on
                extends = None
            else:
                written, extends, since = written + 1, generation, {}
                full, deltas = (len(rows), 0) if generation.gen == generation.base else (full, deltas + len(rows))
            renew()
            if progress is not None:
                progress(state.seq, points[-1])
    return written


def _newest_before(store: Store, stored: list[Generation], seq: int) -> State:
    """The state of the newest stored generation before event ``seq`` that fits, read in full (a
    fold on from it asks for much of it), else the empty state."""
    for generation in reversed(stored):
        if generation.seq < seq:
            try:
                state = writing.read_generation(store, generation, _refuse)
                snapshot.read_all(state)
                return state
            except (snapshot.SnapshotMismatch, _Unreadable):
                continue
    return State()


class _Unreadable(Exception):
    """A generation that cannot be read in full: ``maintain`` starts from an earlier one."""


def _refuse(part: str) -> Heal:
    def refuse() -> NoReturn:
        raise _Unreadable(part)
    return refuse


def _forget_earlier(store: Store) -> None:
    """Delete what earlier releases stored that this one never reads (``writing.EARLIER``, and
    generations of another format: a state whose shape changed, as when a concern was added)."""
    if any(g.format != snapshot.KEYED_FORMAT for g in store.generations()):
        with contextlib.suppress(Conflict, OSError):
            store.delete_generations()
    whole, prefix = writing.EARLIER
    for name, _ in [(whole, 0), *store.snapshots(prefix)]:
        with contextlib.suppress(Conflict, OSError):
            store.delete_snapshot(name)
