"""Interleavings: concurrent actors' read, decide and append steps, chosen by Hypothesis.

R4 promises that a command decided on stale facts is never appended: every
command decides on folded state and appends on the condition that the streams it
read are where it read them. ``test_state_machine`` runs one command at a time,
so it never sees that promise tested. Here two to four *actors* share one real
ledger file, each through its own ``Ledger`` (its own SQLite connection), and
each command is split into the steps a real process takes:

* **prepare** (``Ledger.prepare``): read the log and decide. A refusal ends the
  command; otherwise the actor holds a decision it has not appended yet.
* **commit** (``Ledger.commit``): the conditional append. ``Conflict`` if a
  stream the decision read has moved, and then the actor must **retry**
  (prepare again on fresh state), as ``Ledger.execute`` does in its loop.
* a vacuum, once its plan is committed, **deletes files** for real, one planned
  instance per step (``spark_ops.executor.fs.purge``), then prepares and commits its
  **finish**, which records the purges.

Hypothesis picks which actor takes its next step, what an idle actor sets out
to do, and when the shared manual clock moves (forward mostly, sometimes back).
The rules are checked after every step, against the log read through a separate
"auditor" connection:

1. No undrop (of a table or of a database) is ever committed for an instance
   that was at or before its effective watermark in the state just before that
   event (R3 under R4).
2. Watermarks never move back: per scope, appended values strictly increase (R1).
3. No instance is both live and purged (R8).
4. A vacuum never deletes a file of a live instance: each delete step checks the
   planned instance is behind its watermark in a fresh fold, and after every
   step every file of every instance that can still come back (live, or dropped
   and not blocked) is on disk. That is the corruption the ledger exists to stop.
5. A fresh fold of the whole log equals each actor's state after ``refresh()``
   (and an actor holding an uncommitted decision is not refreshed, so that its
   commit takes the path it would take in production; its held state must still
   equal the fold of the log up to the point it has read).
6. Event times strictly increase and sequence numbers have no gaps (R6).
7. Readers hold what they read (R21): while a pin holds (by the ledger's now), its instance is
   not purged, its version is not expired, and every file of either is on disk. Event by event:
   no retention mark passes a held version, no vacuum plans (or records) the purge of a held
   instance or newly blocks it, a pin is taken only on what no vacuum may have touched (never on
   an expired version, a purged instance or one behind its watermark), and renewed or released
   only while it holds. The pins these checks use are read from the events by the audit itself.
   A pin racing a vacuum is either refused (``VersionExpired``, ``PinRefused``: appending
   nothing, as every refusal here) or keeps its files.

Also, for each vacuum start: it lands after its watermarks, which cover every
instance it lists (R2), are drop times of those instances (R6) and newly block
no other instance except at an equal drop time (R5), and it takes no instance
that a table or database retention in force at that point keeps restorable.
At each commit, R4 itself: the append lands if and only if no stream the
decision read has moved since it was decided. At each prepare, the decision is
what ``decide`` gives on a fresh fold of the whole log, with that fold's stream
versions as its conditions, so a re-decision after a ``Conflict`` is consistent
with the new state.

Failing examples shrink to a story: actors are ``actor0``..``actor3``, tables
have names from a tiny universe (two databases, two table names each) so that
they collide, table ids say where they were born and when (``a100000000000007``:
the seventh table created, born ``a.t1``; printed ``a.t1#7``), and each step leaves
a note saying what it did.

``test_r21_pin_and_vacuum_interleavings_never_lose_pinned_files`` runs a machine aimed at R21
alone (``PinInterleavingMachine``): readers pin old versions a vacuum wants to expire and dropped
instances it wants to purge, pins end at their lease, and the vacuum expires, purges and deletes.

The ``test_r*`` functions at the end drive the same machine by hand through
the races the rules are about, so each has a named, deterministic test. The last
two replay, through the public API, two bugs this machine found (both since
fixed): a vacuum's finish landing on a run another vacuum had taken over (a log
that no longer folds), and a vacuum plan landing after a longer retention was set. The
``test_r21_*`` ones after them drive pins against vacuums and marks by hand, both ways round;
the last two replay a bug the pin machine's author found: a pin's renewal or release decided
while the pin held and timed after its lease ran out was appended, and the log stopped folding
(now such an event changes nothing, and the caller is told).

Budget: ``ci`` runs 150 interleavings per actor count (450, plus those Hypothesis
adds while it steers towards races with ``target``), in well under a minute on
two cores; ``HYPOTHESIS_PROFILE=long`` runs 3000 per actor count. The pin machine runs at
least ``PIN_EXAMPLES`` (150), about ten seconds.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from hypothesis import event, note, settings, target
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import (
    RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test,
)

from ledger import Conflict, Ledger, LedgerError, ManualClock, Prepared
from ledger.clock import from_micros, to_micros
from ledger.core.events import Recorded, decode
from ledger.core.guard import AdvanceWatermark, SetRetention, WatermarkAdvanced
from ledger.core.model import State, decide, fold
from ledger.core.pins import PinReleased, PinRenewed, PinTaken, ReleasePin, RenewPin, TakePin
from ledger.core.tables import (
    CreateTable, DatabaseUndropped, DropDatabase, DropTable, Instance, TablePurged, TableUndropped,
    UndropDatabase, UndropTable,
)
from ledger.core.vacuums import FinishVacuum, StartVacuum, VacuumStarted
from ledger.core.versions import (
    AbortWrite, AdvanceRetentionMark, BeginWrite, CommitWrite, RenewWrite, RestoreVersion, RetentionMarkAdvanced,
    VersionCommitted, VersionRestored, WriteFoldersDeleted, WriteRenewed, WritesSwept, parse_manifest,
)
from ledger.errors import InvalidArgument as RunUnknown
from ledger.errors import PinEnded, TableNotFound
from ledger.names import Scope
from ledger.persistence.stores import open_store
from tests.pg import MANUAL, ledger_location
from spark_ops.executor import fs
from tests.conftest import T0
from vacuum_work import Expiry, Plan, Purge, Result, Sweep, location

SECOND = 1_000_000
HOUR = 3600 * SECOND
DAY = 24 * HOUR

NAMES = ("a.t1", "a.t2", "b.t1", "b.t2")
"""Two databases with two table names each: small, so names collide and get reused."""

ACTOR_COUNTS = (2, 3, 4)

STEPS = 50
"""Steps per interleaving: enough for several commands per actor to overlap."""

RACES = ("an undrop lost to the watermark that blocks it", "a vacuum lost to an undrop",
         "a vacuum lost to another vacuum", "a restore lost to the mark that expires it",
         "a vacuum lost to a commit or a restore", "a commit or renewal lost to the sweep that took its write",
         "a sweep lost to a commit or a renewal", "a pin lost to the vacuum or mark that takes what it pins",
         "a vacuum lost to a pin")
"""The races R4 is about, counted when the loser's commit is refused (see ``count_race``)."""

STATS: collections.Counter[str] = collections.Counter()
"""What the runs did (examples, steps, conflicts, ...), so the tests can insist races happened."""


def _say(text: str) -> None:
    """A line in the falsifying example's story (a no-op outside Hypothesis)."""
    with contextlib.suppress(InvalidArgument):
        note(f"# {text}")


def _count(label: str) -> None:
    """Count an outcome, for --hypothesis-show-statistics and for STATS."""
    STATS[label] += 1
    with contextlib.suppress(InvalidArgument):
        event(label)


def retention_keeps(state: State, inst: Instance, at: int) -> bool:
    """Whether a table or database retention in ``state`` still keeps a dropped instance
    restorable at time ``at`` (a vacuum's own retention only replaces the ledger-wide one)."""
    for scope in (f"table:{inst.id}", f"database:{inst.database}"):
        seconds = state.guard.retentions.get(scope)
        if seconds is not None:
            return inst.dropped_at is not None and inst.dropped_at > at - seconds * SECOND
    return False


def _ids(result: str | tuple[str, ...]) -> tuple[str, ...]:
    """The table ids an undrop decided on (one for a table, several for a database)."""
    return (result,) if isinstance(result, str) else tuple(result)


# --- what an actor can set out to do -------------------------------------------------------
# Intents are the values Hypothesis draws and prints: short reprs that read like a
# story. Each is turned into a ledger command at its prepare step.

@dataclass(frozen=True)
class Intent:
    def __repr__(self) -> str:
        shown = [repr(getattr(self, f.name)) if i == 0 else f"{f.name}={getattr(self, f.name)!r}"
                 for i, f in enumerate(fields(self)) if i == 0 or getattr(self, f.name) is not None]
        return f"{type(self).__name__}({', '.join(shown)})"


@dataclass(frozen=True, repr=False)
class Create(Intent):
    name: str


@dataclass(frozen=True, repr=False)
class Drop(Intent):
    name: str


@dataclass(frozen=True, repr=False)
class Undrop(Intent):
    name: str
    as_name: str | None = None


@dataclass(frozen=True, repr=False)
class DropDb(Intent):
    database: str


@dataclass(frozen=True, repr=False)
class UndropDb(Intent):
    database: str


@dataclass(frozen=True, repr=False)
class Vacuum(Intent):
    """Retention 0 (floor overridden) unless ``retention`` says "1h": everything dropped is due."""
    database: str | None = None
    limit: int | None = None
    retention: str | None = None
    only_uncommitted: bool | None = None
    """A sweep alone (R15): abandoned writes only."""

    def __repr__(self) -> str:
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                 if getattr(self, f.name) is not None]
        return f"Vacuum({', '.join(shown)})"


@dataclass(frozen=True, repr=False)
class Advance(Intent):
    """A manual watermark advance: to the newest drop the scope covers, or to now."""
    scope: str
    to: str = "newest drop"


@dataclass(frozen=True, repr=False)
class Retain(Intent):
    """Set (or unset) how long dropped tables of a scope stay restorable; the floor is overridden."""
    scope: str
    keep: str = "30d"


@dataclass(frozen=True, repr=False)
class Write(Intent):
    """A pipeline's write: begun (and its files written) at once; its commit is the step that races."""
    name: str
    mode: str = "append"


@dataclass(frozen=True, repr=False)
class Begin(Intent):
    """A job registers a write (a 1-hour lease) and writes its files; it may never commit (R15)."""
    name: str


@dataclass(frozen=True, repr=False)
class Finish(Intent):
    """The job behind the oldest open write of the table does ``step``: commit, renew or abort."""
    name: str
    step: str = "commit"


@dataclass(frozen=True, repr=False)
class Restore(Intent):
    """Restore the version before the current one (or version 1)."""
    name: str
    to: str = "previous"


@dataclass(frozen=True, repr=False)
class Mark(Intent):
    """Advance the table's retention mark to now (it lands below the current version)."""
    name: str


@dataclass(frozen=True, repr=False)
class PinVersion(Intent):
    """A reader pins a version of a live table before a long read of it (R21, a 1-hour lease): the
    current one, the one before it, version 1, or the one current an hour ago. The number is chosen
    once, as a reader chooses what to read: decided again after a ``Conflict`` it pins the same one."""
    name: str
    version: str = "current"


@dataclass(frozen=True, repr=False)
class PinDropped(Intent):
    """A reader pins, by table id, the newest instance born or last named ``name`` that is not live
    (dropped, or purged already: then the pin is refused), so that no vacuum purges it (R21)."""
    name: str


@dataclass(frozen=True, repr=False)
class Unpin(Intent):
    """The reader of the soonest-ending live pin on an instance named ``name`` releases (or renews) it.
    Drawn ones run at once (``Ledger.release_pin``/``renew_pin``, one step); ``split=True`` makes it a
    command with prepare and commit steps like the others (see ``PIN_ENDINGS_SPLIT``)."""
    name: str
    step: str = "release"
    split: bool | None = None


@dataclass(frozen=True, repr=False)
class Restart(Intent):
    """Not a command: the actor's process restarts (with snapshots written often, or not)."""
    snapshots: bool = False

    def __repr__(self) -> str:
        return "Restart(snapshots=True)" if self.snapshots else "Restart()"


RETENTIONS = {"30d": 30 * 86_400, "0s": 0, "unset": None}

PIN_ENDINGS_SPLIT: tuple[Intent, ...] = tuple(
    Unpin(n, s, split=True) for n in ("a.t1", "b.t2") for s in ("release", "renew"))
"""Renewals and releases as commands with prepare and commit steps, like every other command here."""

INTENTS: tuple[Intent, ...] = (
    *(Create(n) for n in NAMES),
    *(Drop(n) for n in NAMES),
    *(Undrop(n) for n in NAMES),
    Undrop("a.t1", as_name="b.t1"), Undrop("b.t2", as_name="a.t2"),
    DropDb("a"), DropDb("b"), UndropDb("a"), UndropDb("b"),
    Vacuum(), Vacuum(), Vacuum(database="a"), Vacuum(database="b"), Vacuum(limit=1),
    Vacuum(retention="1h"),
    Advance("ledger"), Advance("database:a"), Advance("database:b", to="now"),
    Retain("database:a"), Retain("database:a", keep="0s"), Retain("database:b", keep="unset"),
    Restart(), Restart(snapshots=True),
    *(Write(n) for n in NAMES), Write("a.t1", "overwrite"), Write("b.t2", "overwrite"),
    Restore("a.t1"), Restore("b.t2", "first"), Mark("a.t1"), Mark("b.t2"),
    *(Begin(n) for n in NAMES), Finish("a.t1"), Finish("a.t1", "renew"), Finish("b.t2", "abort"),
    Vacuum(only_uncommitted=True),
    *(PinVersion(n) for n in NAMES), PinVersion("a.t1", "previous"), PinVersion("b.t2", "first"),
    PinVersion("a.t2", "an hour ago"), *(PinDropped(n) for n in NAMES), Unpin("a.t1"), Unpin("b.t2", "renew"),
    *PIN_ENDINGS_SPLIT,
)

PIN_INTENTS: tuple[Intent, ...] = (
    *(PinVersion(n, v) for n in NAMES for v in ("current", "previous", "first")), *(PinDropped(n) for n in NAMES),
    *(Unpin(n, step) for n in NAMES for step in ("release", "renew")),
)
"""The pins ``InterleavingMachine.aimed`` may choose (R21): a version a pending vacuum expires,
an instance it purges, a pin to end while a vacuum is pending."""

AIMED: tuple[Intent, ...] = (
    *(Undrop(n) for n in NAMES for _ in range(3)), *(Vacuum() for _ in range(3)),
    *(Drop(n) for n in NAMES), *(Create(n) for n in NAMES),
    DropDb("a"), DropDb("b"), UndropDb("a"), UndropDb("b"),
    Vacuum(limit=1), Advance("ledger"), Retain("database:a"), Retain("database:b"),
    *(Write(n) for n in NAMES), *(Write(n, "overwrite") for n in NAMES),
    *(Restore(n) for n in NAMES), *(Restore(n, "first") for n in NAMES), *(Mark(n) for n in NAMES),
    *(Begin(n) for n in NAMES), *(Finish(n, step) for n in NAMES for step in ("commit", "renew", "abort")),
    Vacuum(only_uncommitted=True), Vacuum(only_uncommitted=True),
    *PIN_INTENTS, Vacuum(retention="1h"), *PIN_ENDINGS_SPLIT,
)
"""What ``InterleavingMachine.aimed`` may choose from, in a fixed order (so a shrunk example
keeps its meaning), with undrops and vacuums listed three times to be drawn more often."""

TICKS = {"+1s": SECOND, "+1h": HOUR, "+1d": DAY, "+1us": 1, "0": 0, "-1s": -SECOND, "-1h": -HOUR}
"""Clock steps, named; forward ones are listed (and so drawn) more often."""
TICK_CHOICES = ("+1s", "+1h", "+1s", "+1d", "+1us", "0", "-1s", "-1h")


# --- what an actor is doing ----------------------------------------------------------------

@dataclass
class Attempt:
    """One command in flight: how to build it on the state it is decided on, and what follows."""

    label: str
    build: Callable[[State, int], Any]
    """(state decided on, now) -> the ledger command."""
    after: Callable[[Prepared], None]
    """Runs once the commit has landed."""
    refused: Callable[[LedgerError], None] = lambda exc: None
    """Runs when the command is refused at its prepare step (after any retry)."""
    prepared: Prepared | None = None
    """The decision not yet appended; None after a Conflict, until the actor retries."""


@dataclass
class VacuumJob:
    """A vacuum whose plan (and watermarks) landed: it deletes, then records what it deleted."""

    run_id: str
    plan: Plan
    pending: list[Purge]
    expiring: list[Expiry] = field(default_factory=list)
    """Tables whose old write folders it still has to delete (R13), after the purges."""
    sweeping: list[Sweep] = field(default_factory=list)
    """Tables whose swept writes' folders it still has to delete (R15)."""
    done: list[Result] = field(default_factory=list)
    """What each item it carried out did, for its finish."""


@dataclass
class PinLease:
    """A pin as the log records it (R21): the instance and version it holds, until when."""

    table_id: str
    version: int | None
    expires_at: int
    released_at: int | None = None

    def holds(self, at: int) -> bool:
        return self.expires_at > at and (self.released_at is None or at < self.released_at)


@dataclass
class Actor:
    name: str
    led: Ledger
    attempt: Attempt | None = None
    vacuum: VacuumJob | None = None

    @property
    def idle(self) -> bool:
        return self.attempt is None and self.vacuum is None

    @property
    def can_commit(self) -> bool:
        return self.attempt is not None and self.attempt.prepared is not None

    @property
    def must_retry(self) -> bool:
        return self.attempt is not None and self.attempt.prepared is None

    @property
    def can_delete(self) -> bool:
        return self.attempt is None and self.vacuum is not None and \
            bool(self.vacuum.pending or self.vacuum.expiring or self.vacuum.sweeping)

    @property
    def can_finish(self) -> bool:
        return self.attempt is None and self.vacuum is not None and not self.vacuum.pending \
            and not self.vacuum.expiring and not self.vacuum.sweeping


ACTOR_NAMES = tuple(f"actor{i}" for i in range(max(ACTOR_COUNTS)))


def actors_that(test: Callable[[Actor], bool]) -> st.SearchStrategy[str]:
    """The name of an actor that can take this kind of step now (the rule's precondition
    guarantees there is one), printed as a plain name. Drawn from the fixed list of names
    and filtered, so that deleting an earlier step, as the shrinker does, leaves the choice
    meaning the same actor wherever it can."""
    return st.runner().flatmap(lambda m: st.sampled_from(ACTOR_NAMES).filter(
        lambda name: name in m.by_name and test(m.by_name[name])))


class InterleavingMachine(RuleBasedStateMachine):
    """Actors on one ledger file, taking their read/decide/append steps in an order Hypothesis picks."""

    ACTORS = 2
    STORE = "sqlite"
    """The backend: a SQLite file, or a schema of the test session's PostgreSQL server."""
    UNIVERSE: tuple[Intent, ...] = INTENTS
    """What an idle actor may set out to do, unaimed."""
    AIMS: tuple[Intent, ...] = AIMED
    """What ``aimed`` may choose from."""
    TARGETS: tuple[str, ...] = (RACES[0], RACES[3], RACES[5])
    """The races Hypothesis is steered towards (``target``)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ledger-interleave-"))
        self.path = ledger_location(self.STORE, self.dir)
        self.clock = ManualClock(T0)
        first = Ledger.open(self.path, warehouse=self.dir / "warehouse", clock=self.clock, max_clock_skew=MANUAL,
                            actor="actor0")
        self.actors = [Actor("actor0", first)]
        self.actors += [Actor(f"actor{i}", Ledger.open(self.path, clock=self.clock, max_clock_skew=MANUAL,
                                                       actor=f"actor{i}"))
                        for i in range(1, self.ACTORS)]
        self.by_name = {a.name: a for a in self.actors}
        self.auditor = open_store(self.path, create=False)
        """A connection of its own, for reading the log as an outsider would."""
        self.records: list[Recorded] = []
        self.states: list[State] = [State()]
        """``states[n]``: the fold of the first n events, built one event at a time by the audit."""
        self.begun = 0
        self.begun_files: dict[str, tuple[tuple[str, int], ...]] = {}
        """Write id -> the files its job wrote (what a commit of it names)."""
        self.files: dict[str, list[str]] = {}
        """Table id -> the data files written into its location when it was created."""
        self.labels: dict[str, str] = {}
        self.created = self.vacuums = self.pinned = 0
        self.leases: dict[str, PinLease] = {}
        """Pin id -> what the log says it holds and until when, kept by the audit from the events
        themselves (not from the ledger's own fold of pins), for the R21 checks."""
        self.races: collections.Counter[str] = collections.Counter(dict.fromkeys(RACES, 0))
        """Lost races between a guard and what it guards (see ``count_race``): Hypothesis is
        steered towards interleavings with more of them (``target``)."""
        self.last = ""
        """The outcome of the latest step: "prepared", "committed", "Conflict", an error's name, ..."""
        self.last_result: Any = None
        STATS["examples"] += 1
        _say("actors: " + ", ".join(a.name for a in self.actors))

    def teardown(self) -> None:
        with contextlib.suppress(InvalidArgument):
            # Steer towards the races where a guard must win: an undrop or a restore decided before
            # the watermark or mark that forbids it. The vacuums' lost races happen often unaided, and
            # a target that keeps climbing makes Hypothesis's optimiser outrun the examples themselves.
            for race in self.TARGETS:
                target(float(self.races[race]), label=race)
        for actor in self.actors:
            actor.led.close()
        self.auditor.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- naming, for readable stories ----------------------------------------------------

    def actor(self, name: str) -> Actor:
        return self.by_name[name]

    def new_table_id(self, name: str) -> str:
        """``a1`` + a counter: born ``a.t1``, the seventh created is ``a100000000000007``."""
        self.created += 1
        db, table = name.split(".")
        id_ = f"{db}{table[1:]}{self.created:014d}"
        self.labels[id_] = f"{name}#{self.created}"
        return id_

    def describe(self, id_: str) -> str:
        return self.labels.get(id_, id_)

    # --- the log, as the auditor reads it ------------------------------------------------

    def head(self) -> int:
        return self.auditor.head()[0]

    def fresh(self) -> State:
        """A fold of the whole log from nothing."""
        return fold(State(), (decode(*row) for row in self.auditor.read(0)))

    # --- turning intents into attempts ---------------------------------------------------

    def attempt_for(self, actor: Actor, intent: Intent) -> Attempt:
        done = lambda prepared: None  # noqa: E731
        if isinstance(intent, Create):
            id_ = self.new_table_id(intent.name)
            return Attempt(f"create {intent.name} as {self.describe(id_)}",
                           lambda state, now: CreateTable(intent.name, id_),
                           lambda prepared: self.write_files(id_, actor.led))
        if isinstance(intent, Drop):
            return Attempt(f"drop {intent.name}", lambda state, now: DropTable(intent.name), done)
        if isinstance(intent, Undrop):
            label = f"undrop {intent.name}" + (f" as {intent.as_name}" if intent.as_name else "")
            return Attempt(label, lambda state, now: UndropTable(intent.name, None, intent.as_name), done)
        if isinstance(intent, DropDb):
            return Attempt(f"drop database {intent.database}",
                           lambda state, now: DropDatabase(intent.database), done)
        if isinstance(intent, UndropDb):
            return Attempt(f"undrop database {intent.database}",
                           lambda state, now: UndropDatabase(intent.database), done)
        if isinstance(intent, Advance):
            scope = Scope.parse(intent.scope)

            def advance(state: State, now: int) -> AdvanceWatermark:
                to = now
                if intent.to == "newest drop":
                    covered = [i for i in state.tables.dropped_instances()
                               if str(scope) in state.guard.covering_scopes(i)]
                    to = covered[0].dropped_at if covered else state.last_time
                return AdvanceWatermark(scope, to or now, now)
            return Attempt(f"advance {scope} to {intent.to}", advance, done)
        if isinstance(intent, Vacuum):
            self.vacuums += 1
            run_id = f"{actor.name}-vacuum{self.vacuums}"
            seconds = 3600 if intent.retention == "1h" else 0
            return Attempt(
                ("sweep " if intent.only_uncommitted else "vacuum ") + run_id
                + (f" of database {intent.database}" if intent.database else "")
                + (f" limit {intent.limit}" if intent.limit else "")
                + (f" retention {intent.retention}" if intent.retention else ""),
                lambda state, now: StartVacuum(run_id, now, actor.led.warehouse, seconds, True, intent.database,
                                               intent.limit, only_uncommitted=bool(intent.only_uncommitted)),
                lambda prepared: self.vacuum_started(actor, run_id, prepared))
        if isinstance(intent, Write):
            write = actor.led.begin_write(intent.name)  # refused here if the table is not live
            files = self.write_version_files(write.folder, write.relative_folder, write.id)
            return Attempt(f"commit {intent.mode} of {intent.name} ({write.id[:6]})",
                           lambda state, now: CommitWrite(write.id, files, intent.mode), done)
        if isinstance(intent, Begin):
            self.begun += 1
            write_id = f"{intent.name.replace('.', '')}w{self.begun:013d}"
            return Attempt(f"begin a write to {intent.name} ({write_id[-4:]})",
                           lambda state, now: BeginWrite(intent.name, write_id, now, 3600),
                           lambda prepared: self.write_begun(actor, write_id))
        if isinstance(intent, Finish):
            chosen: dict[str, str] = {}  # the job's own write: decided again after a Conflict, it is the same one

            def finish(state: State, now: int) -> Any:
                if "id" not in chosen:
                    inst = state.tables.live(intent.name)
                    found = state.data.open_writes(inst.id) if inst is not None else []
                    if not found:
                        raise RunUnknown(f"no open write to {intent.name}")
                    chosen["id"] = found[0].id
                write_id = chosen["id"]
                if intent.step == "renew":
                    return RenewWrite(write_id, now)
                if intent.step == "abort":
                    return AbortWrite(write_id)
                return CommitWrite(write_id, self.begun_files.get(write_id, ()), "append")
            return Attempt(f"{intent.step} the oldest open write to {intent.name}", finish, done)
        if isinstance(intent, Restore):
            def restore(state: State, now: int) -> RestoreVersion:
                inst = state.tables.live(intent.name)
                head = state.data.heads.get(inst.id, 0) if inst is not None else 0
                return RestoreVersion(intent.name, 1 if intent.to == "first" else max(1, head - 1))
            return Attempt(f"restore {intent.name} to {intent.to}", restore, done)
        if isinstance(intent, Mark):
            return Attempt(f"mark {intent.name}", lambda state, now: AdvanceRetentionMark(intent.name, now, now), done)
        if isinstance(intent, Retain):
            seconds = RETENTIONS[intent.keep]
            return Attempt(f"retention of {intent.scope} {intent.keep}",
                           lambda state, now: SetRetention(Scope.parse(intent.scope), seconds, True), done)
        if isinstance(intent, (PinVersion, PinDropped)):
            return self.pin_attempt(actor, intent)
        if isinstance(intent, Unpin):
            held: dict[str, str] = {}  # the reader's own pin: decided again, it is the same one

            def unpin(state: State, now: int) -> RenewPin | ReleasePin:
                if "id" not in held:
                    held["id"] = self.pin_to_end(state, intent.name, now)
                return (RenewPin if intent.step == "renew" else ReleasePin)(held["id"], now)
            return Attempt(f"{'extend' if intent.step == 'renew' else 'release'} the soonest-ending pin of "
                           f"{intent.name}", unpin, done)
        raise AssertionError(f"unknown intent {intent!r}")

    def pin_attempt(self, actor: Actor, intent: PinVersion | PinDropped) -> Attempt:
        """R21: a reader's pin, on a version of a live table or on a dropped instance by id."""
        self.pinned += 1
        pin_id = f"{actor.name}-pin{self.pinned}"
        chosen: dict[str, Any] = {}  # what the reader chose to read: decided again, it pins the same

        def pin(state: State, now: int) -> TakePin:
            if isinstance(intent, PinDropped):
                if "id" not in chosen:
                    found = sorted((i for i in state.tables.all_instances()
                                    if i.name == intent.name and not i.is_live), key=lambda i: (i.created_at, i.id))
                    if not found:
                        raise TableNotFound(f"no instance named {intent.name} was ever dropped")
                    chosen["id"] = found[-1].id
                return TakePin(pin_id, now, table_id=chosen["id"])
            if "version" not in chosen:
                inst = state.tables.live(intent.name)
                head = state.data.heads.get(inst.id, 0) if inst is not None else 0
                chosen["version"] = {"current": None, "first": 1, "previous": max(1, head - 1)}.get(intent.version)
                chosen["as_of"] = now - HOUR if intent.version == "an hour ago" else None
            return TakePin(pin_id, now, intent.name, version=chosen["version"], as_of=chosen["as_of"])
        what = f"dropped {intent.name}" if isinstance(intent, PinDropped) else f"{intent.name} version {intent.version}"
        return Attempt(f"pin {what} ({pin_id})", pin, lambda prepared: self.pin_taken(actor, pin_id))

    def pin_taken(self, actor: Actor, pin_id: str) -> None:
        self.audit_the_log()
        lease = self.leases[pin_id]
        _say(f"{actor.name}: {pin_id} holds {self.describe(lease.table_id)}"
             + (f" version {lease.version}" if lease.version is not None else "") + f" until {lease.expires_at}")

    def pin_to_end(self, state: State, name: str, now: int) -> str:
        """The soonest-ending live pin on an instance named ``name`` (the reader's own pin id)."""
        found = [p for p in state.pins.every_live(now) if state.tables.instance(p.table_id).name == name]
        if not found:
            raise RunUnknown(f"no live pin on {name}")
        return min(found, key=lambda p: (p.expires_at, p.id)).id

    def unpin_at_once(self, actor: Actor, intent: Unpin) -> None:
        """A reader ends (or extends) its pin through the public API, in one step."""
        runner = actor.led.runner
        state = runner.refresh()
        before = self.head()
        try:
            pin_id = self.pin_to_end(state, intent.name, runner.now_micros(state))
            if intent.step == "renew":
                actor.led.renew_pin(pin_id)
            else:
                actor.led.release_pin(pin_id)
        except LedgerError as exc:
            assert self.head() == before, \
                f"{actor.name}: a refused {intent.step} of a pin appended events ({type(exc).__name__}: {exc})"
            self.last, self.last_result = type(exc).__name__, exc
            _count(f"unpin {intent.step}: refused {type(exc).__name__}")
            return
        _count(f"unpin {intent.step}: ok")
        _say(f"{actor.name}: {intent.step}d pin {pin_id} of {intent.name}")
        self.last, self.last_result = "ok", pin_id

    def write_files(self, id_: str, led: Ledger) -> None:
        """A pipeline writes data once its table exists: 1 to 3 small files, so a vacuum has work."""
        folder = Path(location(led.warehouse, led.runner.held.tables.instances[id_].path))
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for part in range(1 + int(id_[2:]) % 3):
            path = folder / f"part-{part:05d}.parquet"
            path.write_bytes(b"x" * (100 * (part + 1)))
            paths.append(str(path))
        self.files[id_] = paths

    def write_version_files(self, folder: str, relative: str, write_id: str) -> tuple[tuple[str, int], ...]:
        """A writer's data: one or two small files in its write folder, known to the audit."""
        os.makedirs(folder, exist_ok=True)
        files = []
        for part in range(1 + int(write_id, 16) % 2):
            Path(folder, f"part-{part}.bin").write_bytes(b"v" * (10 + part))
            files.append((f"{relative}/part-{part}.bin", 10 + part))
        return tuple(files)

    def write_begun(self, actor: Actor, write_id: str) -> None:
        """The job writes its files once its write is registered (never before: R14)."""
        w = actor.led.runner.held.data.writes[write_id]
        inst = actor.led.runner.held.tables.instances[w.table_id]
        folder = location(location(actor.led.warehouse, inst.path), w.folder)
        self.begun_files[write_id] = self.write_version_files(folder, w.folder, "0" if self.begun % 2 else "1")

    def vacuum_started(self, actor: Actor, run_id: str, prepared: Prepared) -> None:
        plan: Plan = prepared.decision.result
        for held in plan.held:
            _count(f"vacuum: a pin held back a {held.what}")
            _say(f"{actor.name}: {run_id} left {self.describe(held.table_id)} ({held.what}) to pin {held.pin_id}")
        if not plan.purges and not plan.expiries and not plan.sweeps:
            _say(f"{actor.name}: {run_id} had nothing to do")
            return
        actor.vacuum = VacuumJob(run_id, plan, list(plan.purges),
                                 expiring=[e for e in plan.expiries if e.folders], sweeping=list(plan.sweeps))
        _say(f"{actor.name}: {run_id} set watermarks {dict(plan.watermarks)} and will delete "
             + ", ".join(self.describe(p.table_id) for p in plan.purges))

    # --- the steps -----------------------------------------------------------------------

    def _decide(self, actor: Actor) -> None:
        """Read and decide (``Ledger.prepare``), then check the decision against a fresh fold."""
        attempt = actor.attempt
        assert attempt is not None
        before = self.head()
        state = actor.led.runner.refresh()
        try:
            prepared = actor.led.runner.prepare(lambda now: attempt.build(state, now))
        except LedgerError as exc:
            assert self.head() == before, f"{actor.name}: a refused {attempt.label} appended events"
            fresh = self.fresh()
            with pytest.raises(type(exc)):  # refused on the latest state, not a stale one
                decide(fresh, attempt.build(fresh, actor.led.runner.now_micros(fresh)))
            actor.attempt = None
            attempt.refused(exc)
            self.last, self.last_result = type(exc).__name__, exc
            _count(f"prepare {attempt.label.split()[0]}: refused {type(exc).__name__}")
            _say(f"{actor.name}: {attempt.label} refused: {type(exc).__name__}: {exc}")
            return
        fresh = self.fresh()
        assert prepared.seq == fresh.seq == before, "prepare must decide on the latest state"
        assert prepared.conditions == {s: fresh.version(s) for s in prepared.decision.reads}
        assert prepared.decision == decide(fresh, attempt.build(fresh, prepared.now)), \
            f"{actor.name}: {attempt.label} decided differently from a fresh fold of the log"
        attempt.prepared = prepared
        self.last, self.last_result = "prepared", prepared
        reads = ", ".join(f"{s}@{v}" for s, v in sorted(prepared.conditions.items()))
        _say(f"{actor.name}: {attempt.label} decided on event {prepared.seq}, reading {reads}")

    @initialize(tables=st.lists(st.sampled_from(NAMES), unique=True, max_size=len(NAMES)))
    def start(self, tables: list[str]) -> None:
        """Some live tables (with files) before the actors start, so drops have work from step one."""
        led = self.actors[0].led
        for name in tables:
            id_ = self.new_table_id(name)
            led.runner.execute(CreateTable(name, id_))
            self.write_files(id_, led)
        self.last = "ok"

    def aimed(self) -> set[Intent]:
        """Intents aimed at what other actors are about to commit or are doing (a vacuum or a
        watermark against a pending undrop; an undrop, a longer retention or another vacuum
        against a pending or running vacuum)
        or, if nobody holds such a decision, at what the log holds now (a live name to drop,
        a restorable one to undrop, ...): so that successes and the races R4 is about are
        common, not just refusals. (Half the intents are drawn from everything, unaimed.)"""
        state = self.states[-1]
        against: set[Intent] = set()
        for other in self.actors:
            if other.vacuum is not None:  # deleting or finishing: another vacuum may take it over
                against.add(Vacuum())  # and a pin on what it deletes must be refused (R21)
                against |= {PinDropped(p.name) for p in other.vacuum.plan.purges}
                against |= {PinVersion(e.name, "first") for e in other.vacuum.plan.expiries}
            if other.can_commit and other.attempt is not None and other.attempt.prepared is not None:
                pending = other.attempt.prepared.decision.result
                if other.attempt.label.startswith("undrop"):
                    against |= {Vacuum(), Advance("ledger")}
                elif other.attempt.label.startswith(("restore", "commit")):
                    name = other.attempt.label.split()[-1] if other.attempt.label.startswith("restore ") else None
                    against |= {Vacuum(), *(Mark(n) for n in NAMES if name is None or n == name)}
                elif other.attempt.label.startswith("pin "):  # R21: what would expire or purge it
                    words = other.attempt.label.split()
                    name = words[2] if words[1] == "dropped" else words[1]
                    against |= {Vacuum(), Vacuum(retention="1h"), Advance("ledger"), Mark(name)}
                elif other.attempt.label.startswith(("release ", "extend ")):
                    against |= {Vacuum()}
                elif isinstance(pending, Plan):
                    for planned in pending.purges:
                        inst = state.tables.instances[planned.table_id]
                        against |= {Undrop(inst.name), Retain(f"database:{inst.database}"), Vacuum(),
                                    PinDropped(inst.name)}
                    for expiry in pending.expiries:
                        against |= {Restore(expiry.name), Restore(expiry.name, "first"), Write(expiry.name),
                                    PinVersion(expiry.name, "first"), PinVersion(expiry.name, "previous"),
                                    Unpin(expiry.name)}
        aims = set(self.AIMS)
        if against & aims:
            return against & aims
        restorable = {name for name, ids in state.tables.dropped.items()
                      if not state.guard.is_blocked(state.tables.instances[ids[-1]])}
        versioned = [name for name, id_ in state.tables.bindings.items() if state.data.heads.get(id_, 0) >= 2]
        pending = [name for name, id_ in state.tables.bindings.items() if state.data.open_writes(id_)]
        found: set[Intent] = {
            *(Write(name) for name in state.tables.bindings),
            *(Write(name, "overwrite") for name in state.tables.bindings),
            *(Restore(name) for name in versioned), *(Restore(name, "first") for name in versioned),
            *(Mark(name) for name in versioned),
            *(Begin(name) for name in state.tables.bindings),
            *(Finish(name, step) for name in pending for step in ("commit", "renew", "abort")),
            *([Vacuum(only_uncommitted=True)] if pending else []),
            *(Drop(name) for name in state.tables.bindings),
            *(Create(name) for name in NAMES if name not in state.tables.bindings),
            *(DropDb(name.split(".")[0]) for name in state.tables.bindings),
            *(UndropDb(db) for db in state.tables.database_drops),
            *(Undrop(name) for name in restorable),
            *([Vacuum()] if restorable else []),
            *([Vacuum(limit=1)] if state.tables.dropped else []),
            *(PinVersion(name, v) for name in versioned for v in ("previous", "first")),
            *(PinVersion(name) for name, id_ in state.tables.bindings.items() if id_ in state.data.heads),
            *(PinDropped(i.name) for i in state.tables.all_instances() if not i.is_live),
        }
        now = self.actors[0].led.runner.now_micros(state)
        pinned = {state.tables.instance(p.table_id).name for p in state.pins.every_live(now)}
        if pinned:  # a vacuum that must leave pinned files alone, a pin that ends while one is pending
            found |= {Vacuum(), Vacuum(retention="1h"), *(Unpin(n, s) for n in pinned for s in ("release", "renew"))}
        return (found & aims) or aims

    @precondition(lambda self: any(a.idle for a in self.actors))
    @rule(who=actors_that(lambda a: a.idle),
          intent=st.runner().flatmap(lambda m: st.sampled_from(m.AIMS).filter(m.aimed().__contains__))
          | st.runner().flatmap(lambda m: st.sampled_from(m.UNIVERSE)))
    def prepare(self, who: str, intent: Intent) -> None:
        """An idle actor sets out to do something: its read and decide steps."""
        actor = self.actor(who)
        if isinstance(intent, Restart):
            return self.restart(actor, intent)
        if isinstance(intent, Unpin) and not intent.split:
            return self.unpin_at_once(actor, intent)
        try:
            actor.attempt = self.attempt_for(actor, intent)
        except LedgerError as exc:  # a write to a table that is not live is refused at its begin
            self.last, self.last_result = type(exc).__name__, exc
            _count(f"begin write: refused {type(exc).__name__}")
            return
        self._decide(actor)

    @precondition(lambda self: any(a.can_commit for a in self.actors))
    @rule(who=actors_that(lambda a: a.can_commit))
    def commit(self, who: str) -> None:
        """The conditional append of a decision made earlier, whatever happened since (R4)."""
        actor = self.actor(who)
        attempt = actor.attempt
        assert attempt is not None and attempt.prepared is not None
        prepared, attempt.prepared = attempt.prepared, None
        self.audit_the_log()
        before, now = self.head(), self.states[-1]
        moved = sorted(s for s, v in prepared.conditions.items() if now.version(s) != v)
        verb = attempt.label.split()[0]
        try:
            actor.led.runner.commit(prepared)
        except Conflict as exc:
            assert self.head() == before, f"{who}: a refused append wrote events"
            assert moved, f"{who}: {attempt.label} got a Conflict although nothing it read has moved"
            self.count_race(who, verb, prepared, moved)
            _count("commit: Conflict")
            _count(f"commit {verb}: Conflict")
            _say(f"{who}: {attempt.label} refused at commit: {', '.join(moved)} moved since it decided")
            self.last, self.last_result = "Conflict", exc
            return
        if prepared.decision.events:  # a decision with nothing to append is neither appended nor checked
            assert not moved, f"{who}: {attempt.label} was appended although {', '.join(moved)} moved (R4)"
            assert actor.led.runner.held.seq == self.head(), f"{who}: its state lacks the events it appended"
        actor.attempt = None
        _count(f"commit {verb}: ok" if prepared.decision.events else f"commit {verb}: nothing to append")
        _say(f"{who}: {attempt.label} committed" + ("" if prepared.decision.events else " (no events)"))
        self.last, self.last_result = "committed", prepared
        attempt.after(prepared)

    def count_race(self, who: str, verb: str, prepared: Prepared, moved: list[str]) -> None:
        """Name the races the rules are about when one is lost, and steer Hypothesis towards them."""
        since = [r for r in self.records if r.seq > prepared.seq]
        lost = {
            RACES[0]: verb == "undrop" and any(s.startswith("watermark:") for s in moved) and any(
                self.states[-1].guard.is_blocked(self.states[-1].tables.instances[id_])
                for id_ in _ids(prepared.decision.result)),
            RACES[1]: verb == "vacuum" and any(
                isinstance(r.event, (TableUndropped, DatabaseUndropped)) for r in since),
            RACES[2]: verb in ("vacuum", "finish") and any(
                isinstance(r.event, VacuumStarted) and r.actor != who for r in since),
            RACES[3]: verb == "restore" and any(isinstance(r.event, RetentionMarkAdvanced) for r in since),
            RACES[4]: verb == "vacuum" and any(isinstance(r.event, (VersionCommitted, VersionRestored))
                                              for r in since),
            RACES[5]: verb in ("commit", "renew") and any(isinstance(r.event, WritesSwept) for r in since),
            RACES[6]: verb == "sweep" and any(isinstance(r.event, (VersionCommitted, WriteRenewed)) for r in since),
            RACES[7]: verb == "pin" and any(
                isinstance(r.event, (VacuumStarted, RetentionMarkAdvanced, WatermarkAdvanced)) for r in since),
            RACES[8]: verb == "vacuum" and any(isinstance(r.event, PinTaken) for r in since),
        }
        for race in (race for race, happened in lost.items() if happened):
            _count(f"race: {race}")
            self.races[race] += 1

    @precondition(lambda self: any(a.must_retry for a in self.actors))
    @rule(who=actors_that(lambda a: a.must_retry))
    def retry(self, who: str) -> None:
        """After a Conflict, the same command is decided again on the latest state."""
        self._decide(self.actor(who))
        _count(f"retry after Conflict: {self.last}")

    @precondition(lambda self: any(a.can_delete for a in self.actors))
    @rule(who=actors_that(lambda a: a.can_delete))
    def delete_files(self, who: str) -> None:
        """A vacuum deletes the files of its next planned instance (or one table's old write
        folders, once its purges are done), for real (rule 4)."""
        actor = self.actor(who)
        job = actor.vacuum
        assert job is not None
        if not job.pending and job.expiring:
            return self.delete_write_folders(actor, job)
        if not job.pending:
            return self.delete_swept_folders(actor, job)
        planned = job.pending.pop(0)
        table_id = planned.table_id
        state = self.fresh()
        inst = state.tables.instance(table_id)
        assert inst is not None and not inst.is_live and table_id not in state.tables.bindings.values(), \
            f"{who}: {job.run_id} is about to delete the files of live {self.describe(table_id)}"
        assert state.guard.is_blocked(inst), (
            f"{who}: {job.run_id} is about to delete {self.describe(table_id)}, which is not behind "
            f"its watermark (dropped {inst.dropped_at}, watermark {state.guard.effective_watermark(inst)})")
        now = actor.led.runner.now_micros(state)
        holding = [p for p, lease in self.leases.items() if lease.table_id == table_id and lease.holds(now)]
        assert not holding, (f"{who}: {job.run_id} is about to delete {self.describe(table_id)}, which pin "
                             f"{holding[0]} holds until {self.leases[holding[0]].expires_at} (R21)")
        pinned_before = any(lease.table_id == table_id for lease in self.leases.values())
        outcome = fs.purge(actor.led.warehouse, location(actor.led.warehouse, planned.path),
                           dry_run=False)
        assert outcome.error is None, outcome.error
        job.done.append(replace(outcome, item=planned))
        _count("delete: files gone" if outcome.files else "delete: nothing left to delete")
        if pinned_before:
            _count("delete: files of an instance whose pins ended")
        _say(f"{who}: {job.run_id} deleted {outcome.files} files of {self.describe(table_id)}")
        self.last, self.last_result = "deleted", outcome

    def delete_write_folders(self, actor: Actor, job: VacuumJob) -> None:
        """R13: only folders of ended writes that no unexpired version names, in a fresh fold."""
        expiry = job.expiring.pop(0)
        state = self.fresh()
        named = state.data.referenced_writes(expiry.table_id)
        here = location(actor.led.warehouse, expiry.path)
        files = size = 0
        for folder in expiry.folders:
            assert folder.write_id not in named and not state.data.writes[folder.write_id].is_open, (
                f"{actor.name}: {job.run_id} is about to delete write folder {folder.write_id} of "
                f"{self.describe(expiry.table_id)}, which an unexpired version names (or is open)")
            outcome = fs.purge(actor.led.warehouse, location(here, folder.path), dry_run=False)
            assert outcome.error is None, outcome.error
            files, size = files + outcome.files, size + outcome.bytes
        job.done.append(Result(expiry, files, size))
        _count("delete: old write folders")
        _say(f"{actor.name}: {job.run_id} deleted {len(expiry.folders)} old write folder(s) of "
             f"{self.describe(expiry.table_id)}")
        self.last, self.last_result = "deleted", None

    def delete_swept_folders(self, actor: Actor, job: VacuumJob) -> None:
        """R15: only the folders of writes the log says are swept (in a fresh fold)."""
        sweep_ = job.sweeping.pop(0)
        state = self.fresh()
        here = location(actor.led.warehouse, sweep_.path)
        files = size = 0
        for folder in sweep_.folders:
            assert state.data.writes[folder.write_id].status == "swept", (
                f"{actor.name}: {job.run_id} is about to delete the folder of write {folder.write_id}, which is "
                f"{state.data.writes[folder.write_id].status}, not swept")
            outcome = fs.purge(actor.led.warehouse, location(here, folder.path), dry_run=False)
            assert outcome.error is None, outcome.error
            files, size = files + outcome.files, size + outcome.bytes
        job.done.append(Result(sweep_, files, size))
        _count("delete: swept write folders")
        _say(f"{actor.name}: {job.run_id} deleted {len(sweep_.folders)} swept write folder(s) of "
             f"{self.describe(sweep_.table_id)}")
        self.last, self.last_result = "deleted", None

    @precondition(lambda self: any(a.can_finish for a in self.actors))
    @rule(who=actors_that(lambda a: a.can_finish))
    def finish(self, who: str) -> None:
        """A vacuum that has deleted everything it planned decides to record its purges."""
        actor = self.actor(who)
        job = actor.vacuum
        assert job is not None
        command = FinishVacuum(job.run_id, tuple(job.done))

        def finished(prepared: Prepared) -> None:
            actor.vacuum = None

        def refused(exc: LedgerError) -> None:
            # Its files are gone and its instances are behind their watermarks: nothing may stop
            # it recording that, not even a later vacuum that took its run over.
            raise AssertionError(f"{who}: the finish of {job.run_id} was refused: {exc}")

        actor.attempt = Attempt(f"finish {job.run_id}", lambda state, now: command, finished, refused)
        self._decide(actor)

    @rule(by=st.sampled_from(TICK_CHOICES))
    def tick(self, by: str) -> None:
        """The shared clock moves, sometimes back: event times must still increase (R6)."""
        self.clock.advance(timedelta(microseconds=TICKS[by]))
        self.last = "ok"

    def restart(self, actor: Actor, intent: Restart) -> None:
        """An idle actor's process restarts, sometimes writing snapshots while others append."""
        actor.led.close()
        actor.led = Ledger.open(self.path, clock=self.clock, max_clock_skew=MANUAL, actor=actor.name,
                                snapshot_every=1 if intent.snapshots else 20_000)
        _say(f"{actor.name}: restarted" + (", from a snapshot" if actor.led.runner.cache.snapshot_seq else ""))
        self.last = "ok"

    # --- the rules, after every step -----------------------------------------------------

    @invariant()
    def rules_hold(self) -> None:
        """Every rule, after every step (one invariant, so the printed story has one line per step)."""
        STATS["steps"] += 1
        self.audit_the_log()
        self.actors_agree_with_a_fresh_fold()
        self.restorable_tables_keep_their_files()
        self.unexpired_versions_keep_their_files()
        self.pinned_files_stay()

    def audit_the_log(self) -> None:
        """Rules 1, 2, 3 and 6, and the vacuum's R2/R5/R6, event by event on the new events."""
        for row in self.auditor.read(self.states[-1].seq):
            rec = decode(*row)
            before = self.states[-1]
            assert rec.seq == before.seq + 1, f"event #{rec.seq} follows #{before.seq}: a gap"
            assert rec.time > before.last_time, f"event #{rec.seq} is not later than the one before"
            self.check_event(before, rec)
            self.check_pins(before, rec)
            after = fold(before, (rec,))
            for id_ in after.tables.bindings.values():
                assert after.tables.instances[id_].purged_at is None, \
                    f"event #{rec.seq}: {self.describe(id_)} is live and purged"
            self.records.append(rec)
            self.states.append(after)

    def check_event(self, before: State, rec: Recorded) -> None:
        event_ = rec.event
        what = f"event #{rec.seq} by {rec.actor}"
        if isinstance(event_, (TableUndropped, DatabaseUndropped)):
            ids = (event_.table_id,) if isinstance(event_, TableUndropped) else event_.table_ids
            for id_ in ids:
                inst = before.tables.instances[id_]
                assert not before.guard.is_blocked(inst), (
                    f"{what} undropped {self.describe(id_)}, dropped at {inst.dropped_at}, at or before "
                    f"its watermark {before.guard.effective_watermark(inst)}: the guard was bypassed")
        elif isinstance(event_, WatermarkAdvanced):
            current = before.guard.watermark(event_.scope)
            assert current is None or event_.to > current, \
                f"{what} moves watermark {event_.scope} from {current} back to {event_.to}"
        elif isinstance(event_, TablePurged):
            inst = before.tables.instances[event_.table_id]
            assert inst.is_dropped and before.guard.is_blocked(inst), \
                f"{what} purges {self.describe(inst.id)}, which is not dropped and blocked"
        elif isinstance(event_, VacuumStarted):
            self.check_vacuum_start(before, rec, event_)
        elif isinstance(event_, VersionCommitted) and event_.write_id is not None:
            assert before.data.writes[event_.write_id].is_open, f"{what} commits a write that was not open (R14)"
        elif isinstance(event_, VersionRestored):
            source = before.data.version(event_.table_id, event_.restored)
            assert source is not None and not before.data.is_expired(source), \
                f"{what} restores version {event_.restored}, which was expired (R12 under R4)"
        elif isinstance(event_, RetentionMarkAdvanced):
            current = before.data.mark(event_.table_id)
            assert current is None or event_.to > current, f"{what} moves a retention mark back (R12)"
        elif isinstance(event_, WritesSwept):
            for write_id in event_.write_ids:
                w = before.data.writes[write_id]
                assert w.status == "aborted" or (w.is_open and w.expires_at <= rec.time), \
                    f"{what} sweeps write {write_id}, which is {w.status} with a live lease (R15 under R4)"
        elif isinstance(event_, WriteFoldersDeleted):
            named = before.data.referenced_writes(event_.table_id)
            assert not named.intersection(event_.write_ids), f"{what} records deleting a folder still named (R13)"

    def holding(self, table_id: str, at: int) -> dict[str, PinLease]:
        """The pins the log says hold ``table_id`` at ``at``."""
        return {p: lease for p, lease in self.leases.items() if lease.table_id == table_id and lease.holds(at)}

    def check_pins(self, before: State, rec: Recorded) -> None:
        """R21 event by event, against the pins as the events before this one recorded them: no mark
        passes a held version, no purge or vacuum plan takes a held instance; a pin is taken only on
        what no vacuum may have touched (it never resurrects), and renewed or released only while it
        holds. Then the leases are brought up to date."""
        event_, at = rec.event, rec.time
        what = f"event #{rec.seq} by {rec.actor}"
        if isinstance(event_, RetentionMarkAdvanced):
            for pin_id, lease in self.holding(event_.table_id, at).items():
                v = before.data.version(event_.table_id, lease.version) if lease.version is not None else None
                assert v is None or v.committed_at > event_.to, (
                    f"{what} moves the retention mark of {self.describe(event_.table_id)} over version "
                    f"{lease.version}, which pin {pin_id} holds until {lease.expires_at} (R21)")
            if any(lease.table_id == event_.table_id and lease.version is not None
                   and before.data.version(event_.table_id, lease.version).committed_at <= event_.to
                   for lease in self.leases.values()):
                _count("expire: a version whose pins ended")
        elif isinstance(event_, TablePurged):
            held = self.holding(event_.table_id, at)
            assert not held, f"{what} purges {self.describe(event_.table_id)}, which pin {next(iter(held))} holds (R21)"
            if any(lease.table_id == event_.table_id for lease in self.leases.values()):
                _count("purge: an instance whose pins ended")
        elif isinstance(event_, VacuumStarted):
            for id_ in event_.table_ids:
                held = self.holding(id_, at)
                assert not held, (f"vacuum {event_.run_id} plans to purge {self.describe(id_)}, which pin "
                                  f"{next(iter(held))} holds (R21)")
        elif isinstance(event_, PinTaken):
            inst = before.tables.instance(event_.table_id)
            assert inst is not None and inst.purged_at is None, f"{what} pins a purged instance (R21)"
            assert not (inst.is_dropped and before.guard.is_blocked(inst)), \
                f"{what} pins {self.describe(inst.id)}, dropped behind its watermark: a vacuum may be deleting it (R21)"
            if event_.version is not None:
                v = before.data.version(inst.id, event_.version)
                assert v is not None and not before.data.is_expired(v), \
                    f"{what} pins version {event_.version} of {self.describe(inst.id)}, which is expired (R21)"
            else:
                assert inst.is_dropped and inst.id not in before.data.heads, \
                    f"{what} pins {self.describe(inst.id)} without a version, though it has versions"
            assert event_.expires_at <= at + event_.lease_seconds * SECOND, f"{what} pins past its lease"
            self.leases[event_.pin_id] = PinLease(event_.table_id, event_.version, event_.expires_at)
        elif isinstance(event_, (PinRenewed, PinReleased)):
            lease = self.leases.get(event_.pin_id)
            doing = "renews" if isinstance(event_, PinRenewed) else "releases"
            assert lease is not None, f"{what} {doing} pin {event_.pin_id}, which was never taken"
            if not lease.holds(at):
                pass  # decided while the pin held, landed after it ended: it changes nothing (a vacuum may
                # have taken what the pin held), so the lease stays ended here, and ``pinned_files_stay``
                # holds the ledger's own pins to these
            elif isinstance(event_, PinRenewed):
                lease.expires_at = event_.expires_at
            else:
                lease.released_at = at

    def check_vacuum_start(self, before: State, rec: Recorded, started: VacuumStarted) -> None:
        """R2: its watermarks landed in the same append, just before it, and cover what it lists.
        R6: each is the drop time of a listed instance. R5: nothing else newly blocked, ties aside."""
        mine: list[Recorded] = []  # its own append: watermarks, retention marks (R13), sweeps (R15)
        for r in reversed(self.records):
            if getattr(r.event, "run_id", None) != started.run_id or r.seq != rec.seq - 1 - len(mine):
                break
            mine.insert(0, r)
        marks = len(mine)
        assert [(r.event.scope, r.event.to) for r in mine if isinstance(r.event, WatermarkAdvanced)] == \
            list(started.watermarks.items()) and all(r.actor == rec.actor for r in mine), \
            f"vacuum {started.run_id}: its watermarks are not the events just before its start"
        assert {r.event.table_id: r.event.to for r in mine if isinstance(r.event, RetentionMarkAdvanced)} == \
            started.marks, f"vacuum {started.run_id}: its retention marks are not in its own append"
        base = self.states[rec.seq - 1 - marks]
        for id_ in started.table_ids:
            inst = before.tables.instances[id_]
            assert inst.is_dropped and before.guard.is_blocked(inst), \
                f"vacuum {started.run_id} lists {self.describe(id_)}, which its watermarks do not cover"
        for id_ in started.table_ids:
            inst = base.tables.instances[id_]
            assert base.guard.is_blocked(inst) or not retention_keeps(base, inst, rec.time), (
                f"vacuum {started.run_id} takes {self.describe(id_)}, dropped at {inst.dropped_at}, "
                f"which a table or database retention keeps restorable at {rec.time}")
        drop_times = {base.tables.instances[i].dropped_at for i in started.table_ids}
        assert set(started.watermarks.values()) <= drop_times, \
            f"vacuum {started.run_id} set a watermark that is not a drop time of what it purges"
        for inst in before.tables.dropped_instances():
            if inst.id not in started.table_ids and before.guard.is_blocked(inst) and \
                    not base.guard.is_blocked(base.tables.instances[inst.id]):
                assert inst.dropped_at in started.watermarks.values(), (
                    f"vacuum {started.run_id} newly blocked {self.describe(inst.id)}, which it does not purge")
                held = self.holding(inst.id, rec.time)
                assert not held, (f"vacuum {started.run_id} newly blocked {self.describe(inst.id)}, which pin "
                                  f"{next(iter(held))} holds (R21: a pinned instance is left out, ties too)")

    def actors_agree_with_a_fresh_fold(self) -> None:
        """Rule 5: incremental states equal a fold from nothing (without disturbing a pending commit)."""
        fresh = self.fresh()
        assert fresh == self.states[-1]
        for inst in fresh.tables.all_instances():
            assert not (inst.is_live and inst.purged_at is not None), \
                f"{self.describe(inst.id)} is live and purged"
        for actor in self.actors:
            held = actor.led.runner.held
            assert held == self.states[held.seq], f"{actor.name} holds a state the log does not explain"
            if not actor.can_commit:
                assert actor.led.runner.refresh() == fresh, f"{actor.name} differs from a fresh fold after refresh"

    def unexpired_versions_keep_their_files(self) -> None:
        """R11-R13: every file of every unexpired version (the current one above all) of every table
        that is live or can come back is on disk: no vacuum expired a version under a read."""
        state = self.states[-1]
        warehouse = self.actors[0].led.warehouse
        for table_id in state.data.heads:
            inst = state.tables.instance(table_id)
            if inst is None or state.guard.is_blocked(inst):
                continue
            for v in state.data.history(table_id):
                if state.data.is_expired(v):
                    continue
                for _, digest in state.data.parts(v):
                    for path, _size in parse_manifest(self.auditor.read_blob(digest)):
                        full = location(location(warehouse, inst.path), path)
                        assert os.path.exists(full), (
                            f"{self.describe(table_id)} version {v.number} ({'current' if v.number == state.data.heads[table_id] else 'unexpired'}) "
                            f"names {path}, which is gone")

    def pinned_files_stay(self) -> None:
        """R21: while a pin holds (by the ledger's now: the clock, held to the log's time), its instance
        is not purged, its version is not expired, and every file of either is on disk: the
        instance's data files and each file the pinned version names. The pins are the audit's own,
        read from the events (``leases``), so a fold that lost a pin would not hide a deleted file."""
        state = self.states[-1]
        now = self.actors[0].led.runner.now_micros(state)
        warehouse = self.actors[0].led.warehouse
        live = {p for p, lease in self.leases.items() if lease.holds(now)}
        assert {p.id for p in state.pins.every_live(now)} == live, \
            "the ledger's live pins are not those its events took, renewed and released (R21)"
        for pin_id, lease in self.leases.items():
            if not lease.holds(now):
                continue
            inst = state.tables.instance(lease.table_id)
            assert inst is not None and inst.purged_at is None, \
                f"{self.describe(lease.table_id)} was purged while pin {pin_id} holds it (R21)"
            missing = [p for p in self.files.get(inst.id, ()) if not os.path.exists(p)]
            assert not missing, (f"{self.describe(inst.id)} lost {len(missing)} of its files while pin {pin_id} "
                                 f"holds it until {lease.expires_at} (R21)")
            if lease.version is None:
                continue
            v = state.data.version(inst.id, lease.version)
            assert v is not None and not state.data.is_expired(v), \
                f"{self.describe(inst.id)} version {lease.version} expired while pin {pin_id} holds it (R21)"
            for _, digest in state.data.parts(v):
                for path, _size in parse_manifest(self.auditor.read_blob(digest)):
                    full = location(location(warehouse, inst.path), path)
                    assert os.path.exists(full), (f"{self.describe(inst.id)} version {lease.version} names {path}, "
                                                  f"which is gone while pin {pin_id} holds it (R21)")

    def restorable_tables_keep_their_files(self) -> None:
        """Rule 4: a vacuum never deleted a file of an instance that is live or can still come back."""
        state = self.states[-1]
        for id_, paths in self.files.items():
            inst = state.tables.instance(id_)
            if inst is None or state.guard.is_blocked(inst):
                continue
            missing = [p for p in paths if not os.path.exists(p)]
            assert not missing, (f"{self.describe(id_)} is {'live' if inst.is_live else 'restorable'} "
                                 f"but lost {len(missing)} of its {len(paths)} files")


def _with_actors(count: int, store: str = "sqlite") -> type[InterleavingMachine]:
    return type(f"Interleave{count}Actors{store.title()}", (InterleavingMachine,), {"ACTORS": count, "STORE": store})


MACHINES = {count: _with_actors(count) for count in ACTOR_COUNTS}
ON_POSTGRES = {2: _with_actors(2, "postgresql")}
"""On PostgreSQL, two actors (hosts) racing: the same rules, the same races (R18)."""


@pytest.mark.parametrize("actors, store", [*((n, "sqlite") for n in ACTOR_COUNTS), (2, "postgresql")],
                         ids=lambda v: f"{v} actors" if isinstance(v, int) else v)
def test_interleavings_keep_the_rules(actors: int, store: str) -> None:
    """Hypothesis interleaves 2, 3 or 4 actors' steps; every rule holds after every step.

    Each example is one interleaving of up to ``STEPS`` steps; the profile sets how
    many examples (``ci`` 150 per actor count, so 450 in all; ``long`` thousands).
    Races must actually happen: some commits are refused with Conflict and decided again.
    """
    STATS.clear()
    run_state_machine_as_test(MACHINES[actors] if store == "sqlite" else ON_POSTGRES[actors],
                              settings=settings(settings.default, stateful_step_count=STEPS))
    races = ", ".join(f"{STATS['race: ' + race]} x {race}" for race in RACES)
    print(f"\n{actors} actors: {STATS['examples']} interleavings, {STATS['steps']} steps, "
          f"{STATS['commit: Conflict']} conflicts; {races}")
    assert STATS["commit: Conflict"] > 0, "no interleaving made two commands race"
    assert sum(n for label, n in STATS.items() if label.startswith("retry after Conflict")) > 0


# --- R21: readers' pins against the vacuum that expires and purges ---------------------------

PIN_NAMES = ("a.t1", "a.t2", "b.t2")
"""Two tables of database a (dropped together by a database drop: equal drop times) and one of b."""

PIN_UNIVERSE: tuple[Intent, ...] = (
    *(Create(n) for n in PIN_NAMES), *(Write(n, mode) for n in PIN_NAMES for mode in ("append", "overwrite")),
    *(Drop(n) for n in PIN_NAMES), DropDb("a"), Undrop("a.t1"), Undrop("b.t2"),
    *(PinVersion(n, v) for n in PIN_NAMES for v in ("current", "previous", "first")),
    PinVersion("b.t2", "an hour ago"), *(PinDropped(n) for n in PIN_NAMES),
    Unpin("a.t1"), Unpin("b.t2", "renew"), *PIN_ENDINGS_SPLIT,
    Vacuum(), Vacuum(retention="1h"), Vacuum(database="a"), Vacuum(limit=1),
    Mark("a.t1"), Restore("a.t1", "first"), Advance("ledger"), Restart(),
)
"""What the pin machine's actors may set out to do: write versions, drop tables, pin what a vacuum
wants, vacuum (expiring and purging), and the other guards a pin must lose to (a mark, a watermark)."""

PIN_AIMS: tuple[Intent, ...] = (
    *PIN_UNIVERSE, *(PinVersion(n, v) for n in PIN_NAMES for v in ("previous", "first")),
    *(PinDropped(n) for n in PIN_NAMES), Vacuum(), Vacuum(), Vacuum(retention="1h"),
)
"""``PIN_UNIVERSE``, with pins and vacuums listed again to be drawn more often."""


PIN_EXAMPLES = 150
"""Interleavings for the pin machine at least (the profile's count if more): the races it must
show (both ways, and pins that end before a vacuum) need that many to come up every run."""


class PinInterleavingMachine(InterleavingMachine):
    """R21 under R4. Three actors on tables that start with up to four versions a day apart:
    readers pin old versions (that a vacuum with retention 0 or 1h wants to expire) and dropped
    instances by id (that it wants to purge), vacuums plan, delete for real and finish, pins end
    at their 1-hour lease (the clock moves by hours and days) or are released or renewed. Every
    rule of ``InterleavingMachine`` holds after every step, and R21's own: a pin is refused
    (``VersionExpired``, ``PinRefused``, appending nothing) or everything it holds stays on disk,
    unexpired and unpurged, until it ends (``check_pins``, ``pinned_files_stay``)."""

    ACTORS = 3
    UNIVERSE = PIN_UNIVERSE
    AIMS = PIN_AIMS
    TARGETS = ()

    @initialize(tables=st.lists(st.sampled_from(PIN_NAMES), unique=True, min_size=1, max_size=len(PIN_NAMES)),
                versions=st.integers(0, 4), dropped=st.lists(st.sampled_from(PIN_NAMES), unique=True))
    def start(self, tables: list[str], versions: int = 0, dropped: list[str] | None = None) -> None:
        """The tables, each overwritten ``versions`` times a day apart (old versions a vacuum may
        expire), then those in ``dropped`` dropped a second apart (instances a vacuum may purge)."""
        super().start(tables)
        led = self.actors[0].led
        for _ in range(versions):
            for name in tables:
                write = led.begin_write(name)
                files = self.write_version_files(write.folder, write.relative_folder, write.id)
                led.runner.execute(CommitWrite(write.id, files, "overwrite"))
            self.clock.advance(timedelta(days=1))
        for name in dropped or ():
            if name in tables:
                led.runner.execute(DropTable(name))
                self.clock.advance(timedelta(seconds=1))
        self.last = "ok"

    def aimed(self) -> set[Intent]:
        """``InterleavingMachine.aimed``, narrowed to pins, what they race (vacuums, marks, watermarks)
        and the writes that make versions to expire (the drops and creates that set the scene are
        still drawn, unaimed, half the time)."""
        found = super().aimed()
        return {i for i in found if isinstance(i, (PinVersion, PinDropped, Unpin, Vacuum, Advance, Mark, Write))} \
            or found


def test_r21_pin_and_vacuum_interleavings_never_lose_pinned_files() -> None:
    """Hypothesis interleaves the read/decide/append steps of pins with a vacuum's mark advance
    (expiry), its purge plan, its deletes and its finish, in every order: after every step, either
    the pin was refused (and appended nothing) or the files it holds are all there. The races must
    happen both ways: a pin refused at its append because a vacuum took what it pins (and decided
    again, refused), and a vacuum refused because a pin landed (and decided again, holding it)."""
    STATS.clear()
    run_state_machine_as_test(PinInterleavingMachine, settings=settings(
        settings.default, stateful_step_count=STEPS, max_examples=max(PIN_EXAMPLES, settings.default.max_examples)))
    pins = {label: n for label, n in sorted(STATS.items()) if "pin" in label}
    print(f"\npins: {STATS['examples']} interleavings, {STATS['steps']} steps; {pins}")
    assert STATS["commit pin: ok"] > 0, "no pin was ever taken"
    assert STATS["race: " + RACES[7]] > 0, "no pin lost a race to the vacuum (or mark) that takes what it pins"
    assert STATS["race: " + RACES[8]] > 0, "no vacuum lost a race to a pin"
    assert STATS["prepare pin: refused VersionExpired"] + STATS["prepare pin: refused PinRefused"] > 0, \
        "no pin was refused on what a vacuum had taken"  # each refusal by hand: test_r21_a_vacuum_that_lands_first_*
    assert STATS["vacuum: a pin held back a purge"] > 0 and STATS["vacuum: a pin held back a expiry"] > 0
    assert STATS["purge: an instance whose pins ended"] + STATS["expire: a version whose pins ended"] > 0, \
        "no pin ended before a vacuum took what it had held"


# --- hand-written interleavings, one per race the rules are about -------------------------

@contextlib.contextmanager
def scenario(tables: list[str], actors: int = 2) -> Iterator[InterleavingMachine]:
    """A machine driven by hand; every step is still checked by every invariant."""
    m = MACHINES[actors]()
    try:
        m.start(tables)
        m.rules_hold()
        yield m
    finally:
        m.teardown()


def do(m: InterleavingMachine, step: str, expect: str, **arguments: Any) -> Any:
    """Run one step, insist on its outcome, then check every invariant; returns what it produced."""
    getattr(m, step)(**arguments)
    assert m.last == expect, f"{step}({arguments}): got {m.last} ({m.last_result}), expected {expect}"
    m.rules_hold()
    return m.last_result


def run(m: InterleavingMachine, who: str, intent: Intent) -> Any:
    """One actor's command, start to end, with nobody in between."""
    do(m, "prepare", "prepared", who=who, intent=intent)
    return do(m, "commit", "committed", who=who)


def planned(m: InterleavingMachine, who: str) -> list[str]:
    """The tables (by born name) in the plan the actor holds or is carrying out."""
    actor = m.actor(who)
    if actor.vacuum is not None:
        plan = actor.vacuum.plan
    else:
        assert actor.attempt is not None and actor.attempt.prepared is not None
        plan = actor.attempt.prepared.decision.result
    return [m.describe(p.table_id) for p in plan.purges]


def vacuum_to_the_end(m: InterleavingMachine, who: str) -> None:
    while m.actor(who).can_delete:
        do(m, "delete_files", "deleted", who=who)
    do(m, "finish", "prepared", who=who)
    do(m, "commit", "committed", who=who)


def test_r4_undrop_prepared_before_vacuum_commit_is_refused_at_commit() -> None:
    """The undrop decided while nothing blocked it; the vacuum's watermark landed first;
    the undrop's append is refused, and decided again it is blocked (and the files go)."""
    with scenario(["a.t1"]) as m:
        do(m, "tick", "ok", by="+1h")
        run(m, "actor0", Drop("a.t1"))
        do(m, "tick", "ok", by="+1h")
        do(m, "prepare", "prepared", who="actor1", intent=Undrop("a.t1"))
        do(m, "prepare", "prepared", who="actor0", intent=Vacuum())
        assert planned(m, "actor0") == ["a.t1#1"]
        do(m, "commit", "committed", who="actor0")
        conflict = do(m, "commit", "Conflict", who="actor1")
        assert conflict.stream == "watermark:ledger"
        blocked = do(m, "retry", "UndropBlocked", who="actor1")
        assert "a.t1" in str(blocked)
        vacuum_to_the_end(m, "actor0")
        assert m.states[-1].tables.instances["a100000000000001"].purged_at is not None
        assert not os.path.exists(m.files["a100000000000001"][0])


def test_r4_vacuum_plan_prepared_before_undrop_commit_is_refused() -> None:
    """The vacuum planned a.t1 and a.t2; a.t1 was undropped before the plan landed; the plan
    is refused, and decided again it no longer includes a.t1, whose files stay."""
    with scenario(["a.t1", "a.t2"]) as m:
        run(m, "actor0", Drop("a.t2"))
        do(m, "tick", "ok", by="+1s")
        run(m, "actor0", Drop("a.t1"))
        do(m, "tick", "ok", by="+1h")
        do(m, "prepare", "prepared", who="actor0", intent=Vacuum())
        assert planned(m, "actor0") == ["a.t2#2", "a.t1#1"]
        run(m, "actor1", Undrop("a.t1"))
        conflict = do(m, "commit", "Conflict", who="actor0")
        assert conflict.stream == "catalog:a"  # the database both read (R4)
        do(m, "retry", "prepared", who="actor0")
        assert planned(m, "actor0") == ["a.t2#2"]
        do(m, "commit", "committed", who="actor0")
        vacuum_to_the_end(m, "actor0")
        state = m.states[-1]
        assert state.tables.live("a.t1").id == "a100000000000001"
        assert not state.guard.is_blocked(state.tables.instances["a100000000000001"])
        assert all(os.path.exists(p) for p in m.files["a100000000000001"])
        assert state.tables.instances["a200000000000002"].purged_at is not None


def test_r5_vacuum_narrowed_to_one_database_leaves_a_concurrently_dropped_table_elsewhere_restorable(
) -> None:
    """b.t1 is dropped while a vacuum of database a is in flight: the vacuum's append goes through
    without a retry (b's drop touched another database's stream, R18), takes only a.t1, and b.t1,
    dropped after the watermark the vacuum set (R6: times only grow), can be undropped with all
    its files."""
    with scenario(["a.t1", "b.t1"], actors=3) as m:
        run(m, "actor0", Drop("a.t1"))
        do(m, "tick", "ok", by="+1h")
        do(m, "prepare", "prepared", who="actor0", intent=Vacuum(database="a"))
        assert planned(m, "actor0") == ["a.t1#1"]
        run(m, "actor1", Drop("b.t1"))
        do(m, "commit", "committed", who="actor0")
        do(m, "delete_files", "deleted", who="actor0")
        state = m.states[-1]
        assert not state.guard.is_blocked(state.tables.instances["b100000000000002"])
        run(m, "actor2", Undrop("b.t1"))
        vacuum_to_the_end(m, "actor0")
        assert all(os.path.exists(p) for p in m.files["b100000000000002"])


def test_r5_narrow_vacuum_does_not_make_an_undrop_in_another_database_retry() -> None:
    """b.t1 was dropped before a.t1, so a vacuum of database a must not use the ledger-wide
    watermark: it writes database a's, and an undrop of b.t1 in flight is not even disturbed."""
    with scenario(["a.t1", "b.t1"]) as m:
        run(m, "actor0", Drop("b.t1"))
        do(m, "tick", "ok", by="+1s")
        run(m, "actor0", Drop("a.t1"))
        do(m, "tick", "ok", by="+1h")
        do(m, "prepare", "prepared", who="actor1", intent=Undrop("b.t1"))
        do(m, "prepare", "prepared", who="actor0", intent=Vacuum(database="a"))
        assert [s for s, _ in m.actor("actor0").attempt.prepared.decision.result.watermarks] == ["database:a"]
        do(m, "commit", "committed", who="actor0")
        do(m, "commit", "committed", who="actor1")
        vacuum_to_the_end(m, "actor0")
        assert m.states[-1].tables.live("b.t1").id == "b100000000000002"


def test_r4_two_vacuums_racing_for_one_table_delete_it_once_and_record_it_once() -> None:
    """The second vacuum's plan is refused (the first moved the watermark); decided again once
    the first run's lease has run out (its driver stalled, say) it resumes the first run's
    table. Both delete (the second finds nothing left), both finish, and the purge is
    recorded once, by the first run to record it."""
    with scenario(["b.t2"]) as m:
        run(m, "actor0", Drop("b.t2"))
        do(m, "tick", "ok", by="+1s")
        do(m, "prepare", "prepared", who="actor0", intent=Vacuum())
        do(m, "prepare", "prepared", who="actor1", intent=Vacuum())
        do(m, "commit", "committed", who="actor0")
        do(m, "commit", "Conflict", who="actor1")
        do(m, "tick", "ok", by="+1h")  # past actor0's lease: its run may be taken over
        plan = do(m, "retry", "prepared", who="actor1").decision.result
        assert [p.resumed for p in plan.purges] == [True] and plan.resumes == ("actor0-vacuum1",)
        do(m, "commit", "committed", who="actor1")
        first = do(m, "delete_files", "deleted", who="actor0")
        second = do(m, "delete_files", "deleted", who="actor1")
        assert (first.files, second.files) == (len(m.files["b200000000000001"]), 0)
        do(m, "finish", "prepared", who="actor0")  # its run was taken over: it still finishes
        do(m, "commit", "committed", who="actor0")
        do(m, "finish", "prepared", who="actor1")
        do(m, "commit", "committed", who="actor1")
        purges = [(r.event.table_id, r.event.run_id) for r in m.records if isinstance(r.event, TablePurged)]
        assert purges == [("b200000000000001", "actor0-vacuum1")]


def test_r4_finish_decided_before_another_vacuum_took_the_run_over_is_refused_and_decided_again() -> None:
    """The shrunk story of the first bug this machine found: a finish decided before a
    second vacuum resumed its run used to land anyway, and the log stopped folding. Its
    append must be refused (the run it read has changed) and, decided again, land."""
    with scenario(["a.t1"]) as m:
        run(m, "actor0", Drop("a.t1"))
        run(m, "actor0", Vacuum())
        do(m, "delete_files", "deleted", who="actor0")
        do(m, "finish", "prepared", who="actor0")
        do(m, "tick", "ok", by="+1h")  # past actor0's lease: its run may be taken over
        plan = run(m, "actor1", Vacuum()).decision.result
        assert plan.resumes == ("actor0-vacuum1",)
        do(m, "commit", "Conflict", who="actor0")
        do(m, "retry", "prepared", who="actor0")
        do(m, "commit", "committed", who="actor0")
        assert m.states[-1].tables.instances["a100000000000001"].purged_at is not None


def test_r6_event_times_increase_while_actors_race_and_the_clock_steps_back() -> None:
    """Decisions made before the clock stepped back still land after the events before them."""
    with scenario(["a.t1", "a.t2", "b.t1"], actors=3) as m:
        do(m, "prepare", "prepared", who="actor0", intent=Drop("a.t1"))
        do(m, "tick", "ok", by="-1h")
        do(m, "prepare", "prepared", who="actor1", intent=Drop("a.t2"))
        do(m, "commit", "committed", who="actor1")
        do(m, "commit", "Conflict", who="actor0")
        do(m, "retry", "prepared", who="actor0")
        do(m, "commit", "committed", who="actor0")
        do(m, "tick", "ok", by="-1s")
        run(m, "actor2", Vacuum())
        times = [r.time for r in m.records]
        assert times == sorted(set(times)) and len(times) == 7


def test_r4_finish_of_a_vacuum_taken_over_after_it_decided_leaves_a_ledger_that_folds(tmp_path: Path) -> None:
    """Two overlapping vacuums, public API only (before 1402406 this poisoned the log with
    ``LedgerCorrupt: event #7 finishes vacuum ..., which is not in progress``). Vacuum a
    starts; vacuum b starts while a is still deleting, after a's lease ran out (a stalled), and
    resumes a's unfinished run; a then
    records its finish, decided on the state it holds. R4: that stale append is refused and
    decided again; R10: whatever happens, the ledger still opens and folds, and the purge is
    recorded once."""
    path = tmp_path / "ledger.db"
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock, actor="vacuum-a") as a, \
            Ledger.open(path, clock=clock, actor="vacuum-b") as b:
        a.create_table("db.t")
        a.drop_table("db.t")
        run_a = a.start_vacuum(retention=0, override_floor=True)
        clock.advance(timedelta(hours=1))
        run_b = b.start_vacuum(retention=0, override_floor=True)
        assert run_b.plan.resumes == (run_a.run_id,)
        with contextlib.suppress(Conflict, RunUnknown):  # a refusal is fine; a poisoned log is not
            run_a.finish([Result(run_a.plan.purges[0], 1, 10)])
        run_b.finish([Result(run_b.plan.purges[0], 0, 0)])
    with Ledger.open(path, clock=clock) as fresh:
        assert fresh.verify().purged == 1
        assert [e.type for e in fresh.history("db.t")].count("TablePurged") == 1


def test_r4_vacuum_decided_before_a_retention_change_does_not_take_what_the_new_retention_keeps(
        tmp_path: Path) -> None:
    """Public API, one thread. A long-lived vacuum service has read the ledger; then the
    sales database is given 30 days of retention; then the vacuum starts with a 1-day
    retention, deciding on the state it holds (``execute``'s first attempt does not re-read).
    sales.orders was dropped 2 days ago, so 30 days keep it restorable: the plan must not
    take it (R4: the retention the plan read has moved, so the append is refused and the
    plan decided again). Before 1402406 the stale plan landed and blocked the table."""
    path = tmp_path / "ledger.db"
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock, actor="ops") as ops, \
            Ledger.open(path, clock=clock, actor="vacuum") as vacuum:
        ops.create_table("sales.orders")
        ops.drop_table("sales.orders")
        clock.advance(timedelta(days=2))
        assert vacuum.dropped_tables()[0].name == "sales.orders"  # the service has looked
        ops.set_retention("database:sales", "30d")
        plan = vacuum.start_vacuum(retention="1d").plan
        assert [p.name for p in plan.purges] == [], "the plan takes a table its retention keeps"
        assert ops.dropped_tables()[0].state == "dropped"


def test_r4_r13_a_vacuum_decided_before_a_restore_lands_keeps_the_files_the_restore_names() -> None:
    """The vacuum planned to expire version 1 and delete its write folder; a restore of version 1
    landed first. The vacuum's append is refused (the table's data stream moved), and decided
    again it keeps that folder: the current version names it."""
    with scenario(["a.t1"]) as m:
        run(m, "actor0", Write("a.t1"))
        do(m, "tick", "ok", by="+1d")
        run(m, "actor0", Write("a.t1", "overwrite"))
        do(m, "tick", "ok", by="+1d")
        do(m, "prepare", "prepared", who="actor1", intent=Vacuum())
        first_plan = m.actor("actor1").attempt.prepared.decision.result
        assert [len(e.folders) for e in first_plan.expiries] == [1]  # version 1's folder, for now
        run(m, "actor0", Restore("a.t1", "first"))
        do(m, "commit", "Conflict", who="actor1")
        plan = do(m, "retry", "prepared", who="actor1").decision.result
        [expiry] = plan.expiries
        written = sorted(m.states[-1].data.writes.values(), key=lambda w: w.began_at)
        assert [f.write_id for f in expiry.folders] == [written[1].id]  # the overwrite's folder, not version 1's
        do(m, "commit", "committed", who="actor1")
        vacuum_to_the_end(m, "actor1")
        assert m.states[-1].data.heads["a100000000000001"] == 3


def test_r4_r12_a_restore_decided_before_a_vacuum_moved_the_mark_is_refused_when_decided_again() -> None:
    with scenario(["a.t1"]) as m:
        run(m, "actor0", Write("a.t1"))
        do(m, "tick", "ok", by="+1d")
        run(m, "actor0", Write("a.t1", "overwrite"))
        do(m, "tick", "ok", by="+1d")
        do(m, "prepare", "prepared", who="actor1", intent=Restore("a.t1", "first"))
        run(m, "actor0", Vacuum())
        do(m, "commit", "Conflict", who="actor1")
        do(m, "retry", "VersionExpired", who="actor1")
        vacuum_to_the_end(m, "actor0")


def test_r4_r15_a_commit_decided_before_the_sweep_landed_is_refused_with_write_expired() -> None:
    """The seed's blocker 1 in its racing form: the job decided to commit; the sweep of its write
    (its lease had run out) landed first. The commit's append is refused, and decided again it
    is WriteExpired: no version names the folder the sweep will delete."""
    with scenario(["a.t1"]) as m:
        run(m, "actor0", Begin("a.t1"))
        do(m, "tick", "ok", by="+1d")
        do(m, "prepare", "prepared", who="actor0", intent=Finish("a.t1"))
        run(m, "actor1", Vacuum(only_uncommitted=True))
        do(m, "commit", "Conflict", who="actor0")
        do(m, "retry", "WriteExpired", who="actor0")
        vacuum_to_the_end(m, "actor1")
        assert m.states[-1].data.heads.get("a100000000000001") is None


def test_r4_r15_a_sweep_decided_before_the_commit_landed_leaves_the_write_alone() -> None:
    with scenario(["a.t1"]) as m:
        run(m, "actor0", Begin("a.t1"))
        do(m, "tick", "ok", by="+1d")
        do(m, "prepare", "prepared", who="actor1", intent=Vacuum(only_uncommitted=True))
        run(m, "actor0", Finish("a.t1"))  # the commit of a write past its lease: allowed, nothing deleted yet
        do(m, "commit", "Conflict", who="actor1")
        plan = do(m, "retry", "prepared", who="actor1").decision.result
        assert plan.sweeps == ()
        assert m.states[-1].data.heads["a100000000000001"] == 1


# --- R21 by hand: a pin against the vacuum that expires or purges what it pins -----------------

def versions_a_day_apart(m: InterleavingMachine, name: str, count: int) -> None:
    """``count`` versions of ``name`` (an append, then overwrites), a day apart."""
    for i in range(count):
        run(m, "actor0", Write(name, "overwrite" if i else "append"))
        do(m, "tick", "ok", by="+1d")


def test_r21_a_pin_that_lands_first_makes_the_vacuum_decide_again_and_hold_the_pinned_version() -> None:
    """The vacuum planned to expire versions 1 and 2; a reader pinned version 2 before the plan
    landed. The plan is refused (the table's data stream moved), and decided again it expires
    version 1 only and says which pin held version 2; version 2 keeps every file."""
    with scenario(["a.t1"]) as m:
        versions_a_day_apart(m, "a.t1", 3)
        do(m, "prepare", "prepared", who="actor1", intent=Vacuum())
        assert sorted(m.actor("actor1").attempt.prepared.decision.result.expiries[0].versions) == [1, 2]
        run(m, "actor0", PinVersion("a.t1", "previous"))
        conflict = do(m, "commit", "Conflict", who="actor1")
        assert conflict.stream == "data:a100000000000001"
        plan = do(m, "retry", "prepared", who="actor1").decision.result
        assert [e.versions for e in plan.expiries] == [(1,)]
        assert [(h.table_id, h.what, h.version, h.pin_id) for h in plan.held] == \
            [("a100000000000001", "expiry", 2, "actor0-pin1")]
        do(m, "commit", "committed", who="actor1")
        vacuum_to_the_end(m, "actor1")
        data = m.states[-1].data
        assert [data.is_expired(data.version("a100000000000001", n)) for n in (1, 2, 3)] == [True, False, False]


def test_r21_a_vacuum_that_lands_first_refuses_the_pin_of_a_version_it_expires() -> None:
    """The reader decided to pin version 1 while it was unexpired; the vacuum's mark landed first.
    The pin's append is refused, and decided again it is VersionExpired, recording nothing."""
    with scenario(["a.t1"]) as m:
        versions_a_day_apart(m, "a.t1", 3)
        do(m, "prepare", "prepared", who="actor0", intent=PinVersion("a.t1", "first"))
        run(m, "actor1", Vacuum())
        conflict = do(m, "commit", "Conflict", who="actor0")
        assert conflict.stream == "data:a100000000000001"
        head = m.head()
        do(m, "retry", "VersionExpired", who="actor0")
        assert m.head() == head and not m.states[-1].pins.pins
        vacuum_to_the_end(m, "actor1")


def test_r21_a_mark_decided_before_a_pin_landed_is_refused_when_decided_again() -> None:
    """A hand's mark advance (to now: over versions 1 and 2) decided before a reader pinned
    version 1: refused at its append, and decided again, PinRefused."""
    with scenario(["a.t1"]) as m:
        versions_a_day_apart(m, "a.t1", 3)
        do(m, "prepare", "prepared", who="actor1", intent=Mark("a.t1"))
        run(m, "actor0", PinVersion("a.t1", "first"))
        do(m, "commit", "Conflict", who="actor1")
        do(m, "retry", "PinRefused", who="actor1")
        assert m.states[-1].data.mark("a100000000000001") is None


def test_r21_a_pin_on_a_dropped_table_that_lands_first_keeps_it_from_the_vacuum_until_the_pin_ends() -> None:
    """The vacuum planned to purge a.t2 and a.t1; a reader pinned a.t1 (by table id) before the
    plan landed. The plan is refused, and decided again it purges a.t2 only, holds a.t1 for the
    pin, and does not block it (its watermark stops at a.t2's drop). Once the pin's lease has run
    out, the next vacuum purges a.t1."""
    with scenario(["a.t1", "a.t2"]) as m:
        run(m, "actor0", Drop("a.t2"))
        do(m, "tick", "ok", by="+1s")
        run(m, "actor0", Drop("a.t1"))
        do(m, "tick", "ok", by="+1s")
        do(m, "prepare", "prepared", who="actor1", intent=Vacuum())
        assert planned(m, "actor1") == ["a.t2#2", "a.t1#1"]
        run(m, "actor0", PinDropped("a.t1"))
        conflict = do(m, "commit", "Conflict", who="actor1")
        assert conflict.stream == "data:a100000000000001"
        plan = do(m, "retry", "prepared", who="actor1").decision.result
        assert planned(m, "actor1") == ["a.t2#2"]
        assert [(h.table_id, h.what, h.pin_id) for h in plan.held] == [("a100000000000001", "purge", "actor0-pin1")]
        do(m, "commit", "committed", who="actor1")
        vacuum_to_the_end(m, "actor1")
        state = m.states[-1]
        pinned = state.tables.instances["a100000000000001"]
        assert pinned.purged_at is None and not state.guard.is_blocked(pinned)
        assert all(os.path.exists(p) for p in m.files["a100000000000001"])
        do(m, "tick", "ok", by="+1h")  # the pin's lease runs out
        run(m, "actor1", Vacuum())
        assert planned(m, "actor1") == ["a.t1#1"]
        vacuum_to_the_end(m, "actor1")
        assert m.states[-1].tables.instance("a100000000000001").purged_at is not None


def test_r21_a_pinned_table_dropped_with_its_database_is_not_blocked_by_a_vacuum_of_its_sibling() -> None:
    """a.t1 and a.t2 were dropped together (one drop time); a.t1 is pinned. The vacuum purges a.t2
    with a watermark of a.t2's own: a ledger or database watermark at that time would block a.t1
    too (R5's tie), and a pinned instance is not newly blocked."""
    with scenario(["a.t1", "a.t2"]) as m:
        run(m, "actor0", DropDb("a"))
        do(m, "tick", "ok", by="+1s")
        run(m, "actor0", PinDropped("a.t1"))
        plan = run(m, "actor1", Vacuum()).decision.result
        assert planned(m, "actor1") == ["a.t2#2"] and [s for s, _ in plan.watermarks] == ["table:a200000000000002"]
        vacuum_to_the_end(m, "actor1")
        state = m.states[-1]
        assert not state.guard.is_blocked(state.tables.instances["a100000000000001"])
        assert all(os.path.exists(p) for p in m.files["a100000000000001"])


def test_r21_a_vacuum_that_lands_first_refuses_the_pin_of_a_dropped_table_it_purges() -> None:
    """The reader decided to pin dropped a.t1 while it was restorable; the vacuum's watermark
    landed first. The pin's append is refused, and decided again it is PinRefused (a vacuum may be
    deleting its files); once purged, a pin on it is refused too."""
    with scenario(["a.t1"]) as m:
        run(m, "actor0", Drop("a.t1"))
        do(m, "tick", "ok", by="+1s")
        do(m, "prepare", "prepared", who="actor0", intent=PinDropped("a.t1"))
        run(m, "actor1", Vacuum())
        conflict = do(m, "commit", "Conflict", who="actor0")
        assert conflict.stream == "watermark:ledger"
        head = m.head()
        do(m, "retry", "PinRefused", who="actor0")
        assert m.head() == head
        vacuum_to_the_end(m, "actor1")
        assert not any(os.path.exists(p) for p in m.files["a100000000000001"])
        do(m, "prepare", "PinRefused", who="actor0", intent=PinDropped("a.t1"))


@pytest.mark.parametrize("step", ["renew", "release"])
def test_r21_a_renewal_or_release_decided_before_its_pin_ran_out_does_not_poison_the_log(step: str) -> None:
    """The reader decided to renew (or release) its pin on dropped a.t1 while the pin held; its
    lease ran out, and a vacuum then planned a.t1 (rightly: no pin holds it). The renewal's append
    must not land as if the pin still held (R4): refused, then PinEnded (or, a release, nothing to
    do). Today it is appended, and the ledger stops folding."""
    with scenario(["a.t1"]) as m:
        run(m, "actor0", Drop("a.t1"))
        do(m, "tick", "ok", by="+1s")
        run(m, "actor0", PinDropped("a.t1"))
        do(m, "tick", "ok", by="+1s")
        do(m, "prepare", "prepared", who="actor0", intent=Unpin("a.t1", step, split=True))
        do(m, "tick", "ok", by="+1h")  # the lease runs out before the append
        run(m, "actor1", Vacuum())
        assert planned(m, "actor1") == ["a.t1#1"]
        m.commit(who="actor0")
        m.rules_hold()
        if m.last == "Conflict":
            do(m, "retry", "PinEnded" if step == "renew" else "prepared", who="actor0")
            if m.actor("actor0").can_commit:
                do(m, "commit", "committed", who="actor0")
        vacuum_to_the_end(m, "actor1")
        assert m.states[-1].tables.instance("a100000000000001").purged_at is not None


@pytest.mark.parametrize("step", ["renew", "release"])
def test_r21_a_pin_renewed_or_released_in_its_last_microsecond_does_not_poison_the_log(
        tmp_path: Path, step: str) -> None:
    """One process, public API, no race: the log's last event is a microsecond before the pin ends
    and the clock has not moved past it. The renewal (or release) is decided at that microsecond
    (the pin holds) and timed one later (the log's times increase): the pin has ended by then."""
    path = tmp_path / "ledger.db"
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock, max_clock_skew=MANUAL, actor="reader") as led:
        led.create_table("db.t")
        write = led.begin_write("db.t")
        led.commit_write(write.id, [(f"{write.relative_folder}/part-0.parquet", 10)])
        clock.advance(timedelta(seconds=1))
        pin = led.pin("db.t", lease=60)
        clock.set(from_micros(to_micros(pin.expires_at) - 1))
        led.create_table("db.u")
        with contextlib.suppress(PinEnded):
            led.renew_pin(pin.id) if step == "renew" else led.release_pin(pin.id)
    with Ledger.open(path, clock=clock, max_clock_skew=MANUAL) as fresh:
        assert fresh.verify().events >= 5
