"""Model-based testing of the ledger: random command sequences, a real ledger file, and a model.

Hypothesis drives ``LedgerMachine`` through random sequences of every ledger
command (create, drop, the three kinds of undrop, database drop and undrop,
watermark advances at every scope, retention settings, purges, writes and
versions, pins (R21: taken by name or id with leases valid or not, renewed,
released), malformed input), interleaved with clock steps (forward, none, and
back: pins end at their lease on a step, without an event) and reopening the
file (from the log or from a snapshot). Arguments come from a universe
of two databases with two table names each, so that names collide and get
reused often; a few rules aim the same commands at what the model holds, so
that successes and the guard's boundaries are common too.

The same commands go to a real SQLite ledger and to ``Model``, a
plain re-statement of the rules in ``DESIGN.md`` written from the contract,
not from the library. The model uses nothing from ``ledger.state`` or
``ledger.decide``; the file takes only an error type from the one, and the
fold (for the ledger's self-check) from the other.

For every command the model predicts success or the error type(s) the
contract allows; the ledger must agree, and a refusal must append nothing.
After every step the invariants compare the two in full (live tables, dropped
lists newest first, each instance, watermarks, retentions, versions, marks,
writes, live pins, event count and times) and check the ledger against itself
(a fresh fold of its log equals its incremental state; event times strictly
increase; nothing is both live and purged).

Where the contract leaves precedence open (an undrop that is both blocked and
targets a bound name, say) the model accepts each error the contract allows,
and says so at the point where it does.

The ``test_r*`` functions at the end replay hand-written scenarios through the
same machine, so each rule has a named test whose steps read like the rule,
and the model itself is checked against the rules' literal expectations.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile

import pytest
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import (
    Bundle, RuleBasedStateMachine, initialize, invariant, multiple, precondition, rule,
)

from ledger import Ledger, ManualClock
from tests.pg import MANUAL, ledger_location
from ledger.errors import PurgeRefused  # the error type only; the model decides for itself
from ledger.errors import InvalidArgument as BadArgument
from ledger.errors import (
    DatabaseChanged, DatabaseNotFound, InvalidName, VersionExpired, VersionNotFound,
    WriteClosed, InvalidRetention, InvalidScope, InvalidTime, LedgerError,
    PinEnded, PinRefused, TableExists, TableNotFound, UndropBlocked,
)
from ledger.core.events import decode
from ledger.core.model import State, fold

# --- time, in integer microseconds, computed here rather than with ledger.clock ------------

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SECOND = 1_000_000
DAY = 86_400 * SECOND


def us(value: datetime) -> int:
    """An aware datetime as microseconds since the epoch."""
    return (value - EPOCH) // timedelta(microseconds=1)


def at(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


def opt_us(value: datetime | None) -> int | None:
    return None if value is None else us(value)


def iso_spellings(micros: int) -> tuple[str, ...]:
    """Ways ISO 8601 can write a UTC time; R3's message must use one of them."""
    value = at(micros)
    return (value.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), value.isoformat(),
            value.isoformat().replace("+00:00", "Z"))


# --- the name universe: small, so that collisions, reuse and database ops are frequent -----

DATABASES = ("a", "b")
OTHER_DATABASE = "c"  # never holds a table
NAMES = tuple(f"{db}.{t}" for db in DATABASES for t in ("t1", "t2"))
GHOST_ID = "0123456789abcdef"  # well-formed, but no instance has it
DEFAULT_RETENTION = 7 * 86_400
RETENTION_FLOOR = 86_400
PIN_LEASE = 3600               # R21: a pin's lease unless its taker says otherwise
PIN_LEASE_MAX = 7 * 86_400     # the longest lease one call may ask for
PINS_PER_TABLE = 1000          # the most live pins one instance may hold

def spell(text: str, style: str) -> str:
    """Names are case-insensitive: the ledger is handed any spelling, the model the canonical one."""
    if style == "upper":
        return text.upper()
    if style == "mixed":
        head, dot, tail = text.partition(".")
        return head.upper() + dot + tail
    return text


STYLES = st.sampled_from(["lower", "upper", "mixed"])
names = st.builds(spell, st.sampled_from(NAMES), STYLES)
databases = st.sampled_from((*DATABASES, *DATABASES, OTHER_DATABASE))  # mostly ones with tables
SCOPES = ("ledger", *(f"database:{db}" for db in (*DATABASES, OTHER_DATABASE)), f"table:{GHOST_ID}")


def spell_scope(scope: str, style: str) -> str | None:
    """A scope as a caller may write it: ``None`` and ``LEDGER`` mean the ledger, keys ignore case."""
    if scope == "ledger":
        return {"lower": "ledger", "upper": "LEDGER", "mixed": None}[style]
    kind, _, key = scope.partition(":")
    return f"{kind}:{spell(key, style) if style != 'mixed' else key.upper()}"


# --- the reference model -------------------------------------------------------------------

def _names(errors: set[type[Exception]] | frozenset[type[Exception]]) -> list[str]:
    return sorted(e.__name__ for e in errors)


class Refuse(Exception):
    """The model's verdict that a command is refused, with every error type the contract allows."""

    def __init__(self, *errors: type[Exception], why: str) -> None:
        super().__init__(why)
        self.errors = frozenset(errors)
        self.why = why


@dataclass(frozen=True)
class Accept:
    """The model's verdict that a command succeeds.

    ``events`` is how many events it appends (0 for a watermark that does not
    move, R1). ``commit`` brings the model along once the ledger has answered,
    checking the answer on the way: some facts (a new table's id) only the
    ledger can supply.
    """

    events: int
    commit: Callable[[Any], None]


@dataclass
class ModelTable:
    """One table instance. ``name`` is its current name, or its last one while dropped."""

    id: str
    name: str
    created: int
    dropped: int | None = None
    purged: int | None = None

    @property
    def database(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def live(self) -> bool:
        return self.dropped is None

    @property
    def dropped_unpurged(self) -> bool:
        return self.dropped is not None and self.purged is None


@dataclass
class ModelWrite:
    id: str
    table: str
    folder: str
    status: str = "open"
    version: int | None = None


@dataclass
class ModelVersion:
    number: int
    committed: int
    mode: str
    files: frozenset[str]
    restored_from: int | None = None


@dataclass
class ModelPin:
    """A reader's pin (R21): on ``version`` of instance ``table``, or on the instance (None)."""

    id: str
    table: str
    version: int | None
    taken: int
    lease: int                    # seconds
    expires: int
    released: int | None = None

    def holds(self, at: int) -> bool:
        """Not released, and its lease has not run out: it ends at ``expires``, without an event."""
        return self.released is None and at < self.expires


class Model:
    """DESIGN.md's rules over plain dicts, in the order a reader meets them in the contract."""

    def __init__(self, clock: int) -> None:
        self.clock = clock                           # what the ManualClock reads
        self.last_time = 0                           # time of the newest event
        self.events = 0
        self.tables: dict[str, ModelTable] = {}      # id -> instance, purged ones included
        self.watermarks: dict[str, int] = {}         # canonical scope -> time
        self.retentions: dict[str, int] = {}         # canonical scope -> seconds
        self.db_drops: dict[str, tuple[int, list[str]]] = {}  # db -> (time, ids) of its latest drop
        self.writes: dict[str, ModelWrite] = {}      # write id -> write, whatever its status
        self.versions: dict[str, list[ModelVersion]] = {}  # table id -> its versions, oldest first
        self.marks: dict[str, int] = {}              # table id -> retention mark
        self.pins: dict[str, ModelPin] = {}          # pin id -> pin, released and ended ones included

    # R6: event times strictly increase, even when the clock steps back; now never goes back.

    def now(self) -> int:
        return max(self.clock, self.last_time)

    def next_time(self) -> int:
        return max(self.clock, self.last_time + 1)

    def _appended(self, time: int) -> None:
        self.last_time = time
        self.events += 1

    # --- queries -------------------------------------------------------------------------

    def live(self, name: str) -> ModelTable | None:
        found = [t for t in self.tables.values() if t.live and t.name == name]
        assert len(found) <= 1, f"model bug: {name} bound twice"
        return found[0] if found else None

    def bindings(self) -> dict[str, str]:
        return {t.name: t.id for t in self.tables.values() if t.live}

    def dropped(self, *, database: str | None = None, name: str | None = None) -> list[str]:
        """Dropped, unpurged ids, newest drop first; a database drop's tie goes to the newest created."""
        found = [t for t in self.tables.values() if t.dropped_unpurged
                 and (database is None or t.database == database) and (name is None or t.name == name)]
        found.sort(key=lambda t: (t.dropped, t.created), reverse=True)
        return [t.id for t in found]

    def effective_watermark(self, table: ModelTable) -> int | None:
        """The latest of the ledger's, its (last) name's database's, and its own watermark."""
        marks = [self.watermarks.get(s) for s in
                 ("ledger", f"database:{table.database}", f"table:{table.id}")]
        return max((m for m in marks if m is not None), default=None)

    def blocked(self, table: ModelTable) -> bool:
        """R3 + R8: purged, or dropped at or before its effective watermark."""
        if table.purged is not None:
            return True
        mark = self.effective_watermark(table)
        return table.dropped is not None and mark is not None and table.dropped <= mark

    def retention(self, table: ModelTable) -> int:
        """The most specific retention: the table's, its database's, the ledger's, else 7 days."""
        for scope in (f"table:{table.id}", f"database:{table.database}", "ledger"):
            if scope in self.retentions:
                return self.retentions[scope]
        return DEFAULT_RETENTION

    def status(self, table: ModelTable) -> str:
        if table.purged is not None:
            return "purged"
        if table.live:
            return "live"
        return "blocked" if self.blocked(table) else "dropped"

    def _require_table_scope(self, scope: str) -> None:
        """A ``table:<id>`` scope must name an instance. The README files that under
        TableNotFound ("no such ... id"), errors.py's InvalidScope docstring under "names
        nothing": the contract allows either."""
        kind, _, key = scope.partition(":")
        if kind == "table" and key not in self.tables:
            raise Refuse(TableNotFound, InvalidScope, why=f"{scope} names no instance")

    # --- tables (R7) ---------------------------------------------------------------------

    def create(self, name: str) -> Accept:
        if self.live(name) is not None:
            raise Refuse(TableExists, why=f"{name} is bound")
        time = self.next_time()

        def commit(inst: Any) -> None:
            assert inst.id not in self.tables, "a new instance must get a new id"
            assert (inst.name, us(inst.created_at), inst.dropped_at) == (name, time, None)
            self.tables[inst.id] = ModelTable(inst.id, name, time)
            self._appended(time)
        return Accept(1, commit)

    def drop(self, name: str) -> Accept:
        table = self.live(name)
        if table is None:
            raise Refuse(TableNotFound, why=f"{name} is not live")
        time = self.next_time()

        def commit(inst: Any) -> None:
            assert (inst.id, inst.name, opt_us(inst.dropped_at)) == (table.id, name, time)
            table.dropped = time
            self._appended(time)
        return Accept(1, commit)

    def undrop(self, name: str, table_id: str | None = None, new_name: str | None = None) -> Accept:
        """R7 picks the instance, then refuses a live one or a bound target; R3/R8 guard it."""
        if table_id is not None:
            table = self.tables.get(table_id)
            if table is None or table.name != name:
                raise Refuse(TableNotFound, why=f"no instance {table_id} last named {name}")
        else:
            candidates = [t for t in self.tables.values() if t.name == name and t.dropped_unpurged]
            if not candidates:
                if any(t.name == name and t.purged is not None for t in self.tables.values()):
                    # Only purged instances of the name are left: "nothing dropped to undrop"
                    # and "purged is final" (R8) are both true, and the contract ranks neither.
                    raise Refuse(TableNotFound, UndropBlocked, why=f"{name}: only purged instances")
                raise Refuse(TableNotFound, why=f"{name} has no dropped instance")
            table = max(candidates, key=lambda t: t.dropped or 0)
        if table.live:
            raise Refuse(TableExists, why=f"{table.id} is live")
        target = new_name or table.name
        reasons: set[type[Exception]] = set()
        if self.live(target) is not None:
            reasons.add(TableExists)
        if self.blocked(table):
            reasons.add(UndropBlocked)
        if reasons:  # both may hold; the contract does not say which one wins
            raise Refuse(*reasons, why=f"undrop {table.id} as {target}: {_names(reasons)}")
        time = self.next_time()

        def commit(inst: Any) -> None:
            assert (inst.id, inst.name, inst.dropped_at, inst.purged_at) == (table.id, target, None, None)
            table.name, table.dropped = target, None
            self._appended(time)
        return Accept(1, commit)

    # --- databases (R7) ------------------------------------------------------------------

    def drop_database(self, db: str) -> Accept:
        victims = [t for t in self.tables.values() if t.live and t.database == db]
        if not victims:
            raise Refuse(DatabaseNotFound, why=f"database {db} has no live tables")
        time = self.next_time()

        def commit(result: list[Any]) -> None:
            assert sorted(i.id for i in result) == sorted(t.id for t in victims)
            assert {opt_us(i.dropped_at) for i in result} == {time}, "one drop, one drop time"
            for table in victims:
                table.dropped = time
            self.db_drops[db] = (time, [t.id for t in victims])
            self._appended(time)
        return Accept(1, commit)

    def undrop_database(self, db: str) -> Accept:
        """All or none: any restored (or restored and dropped again) on its own since the drop ->
        DatabaseChanged, any blocked or purged -> UndropBlocked, any name bound -> TableExists."""
        if db not in self.db_drops:
            raise Refuse(DatabaseNotFound, why=f"database {db} has no drop left to undo")
        when, ids = self.db_drops[db]
        tables = [self.tables[i] for i in ids]
        reasons: set[type[Exception]] = set()
        if any(t.purged is None and t.dropped != when for t in tables):
            reasons.add(DatabaseChanged)
        if any(self.blocked(t) for t in tables):
            reasons.add(UndropBlocked)
        if any(self.live(t.name) is not None for t in tables):
            reasons.add(TableExists)
        if reasons:
            raise Refuse(*reasons, why=f"undrop database {db}: {_names(reasons)}")
        time = self.next_time()

        def commit(result: list[Any]) -> None:
            assert sorted((i.id, i.name) for i in result) == sorted((t.id, t.name) for t in tables)
            assert all(i.dropped_at is None for i in result)
            for table in tables:
                table.dropped = None
            del self.db_drops[db]
            self._appended(time)
        return Accept(1, commit)

    # --- watermarks (R1) and retention ---------------------------------------------------

    def advance(self, scope: str, to: int) -> Accept:
        """Fetch-and-set; at or before the current value is a no-op that returns it; past now is refused."""
        self._require_table_scope(scope)
        if to > self.now():
            raise Refuse(InvalidTime, why=f"{to} is past now {self.now()}")
        current = self.watermarks.get(scope)
        if current is not None and to <= current:
            def unchanged(found: datetime | None) -> None:
                assert opt_us(found) == current, "R1: a no-op advance returns the current value"
            return Accept(0, unchanged)
        time = self.next_time()

        def commit(found: datetime | None) -> None:
            assert opt_us(found) == current, "R1: fetch-and-set returns the previous value"
            self.watermarks[scope] = to
            self._appended(time)
        return Accept(1, commit)

    def set_retention(self, scope: str, seconds: int | None, override_floor: bool) -> Accept:
        """Negative or malformed is refused; under the 24 h floor only with ``override_floor``."""
        reasons: set[type[Exception]] = set()
        if seconds is not None and (seconds < 0 or (seconds < RETENTION_FLOOR and not override_floor)):
            reasons.add(InvalidRetention)
        try:
            self._require_table_scope(scope)
        except Refuse as missing:
            reasons |= missing.errors
        if reasons:  # a bad value for a missing scope: either complaint is fair
            raise Refuse(*reasons, why=f"retention {seconds} at {scope}")
        time = self.next_time()

        def commit(result: timedelta | None) -> None:
            assert result == (None if seconds is None else timedelta(seconds=seconds))
            if seconds is None:
                self.retentions.pop(scope, None)
            else:
                self.retentions[scope] = seconds
            self._appended(time)
        return Accept(1, commit)

    # --- writes, versions and marks (R11, R12, R14) ---------------------------------------

    def current(self, table_id: str) -> ModelVersion | None:
        found = self.versions.get(table_id, [])
        return found[-1] if found else None

    def expired(self, table_id: str, v: ModelVersion) -> bool:
        """R12: committed at or before the mark, and not the current version."""
        mark = self.marks.get(table_id)
        return mark is not None and v.committed <= mark and v is not self.current(table_id)

    def begin_write(self, name: str) -> Accept:
        table = self.live(name)
        if table is None:
            raise Refuse(TableNotFound, why=f"{name} is not live")
        time = self.next_time()

        def commit(view: Any) -> None:
            assert view.table_id == table.id and view.status == "open" and view.relative_folder.startswith("_writes/")
            self.writes[view.id] = ModelWrite(view.id, table.id, view.relative_folder)
            self._appended(time)
        return Accept(1, commit)

    def _closed(self, w: ModelWrite) -> None:
        if w.status in ("committed", "aborted"):
            raise Refuse(WriteClosed, why=f"write {w.id} is {w.status}")

    def commit_write(self, write_id: str, mode: str) -> Accept:
        w = self.writes[write_id]
        self._closed(w)
        table = self.tables[w.table]
        if not table.live:
            raise Refuse(TableNotFound, why=f"the table of write {w.id} is not live")
        time = self.next_time()
        versions = self.versions.setdefault(table.id, [])
        number = len(versions) + 1
        new = frozenset({f"{w.folder}/part-0.bin"})
        files = new | (versions[-1].files if mode == "append" and versions else frozenset())

        def commit(view: Any) -> None:
            assert (view.number, view.mode, view.current) == (number, mode, True)
            versions.append(ModelVersion(number, time, mode, files))
            w.status, w.version = "committed", number
            self._appended(time)
        return Accept(1, commit)

    def abort_write(self, write_id: str) -> Accept:
        w = self.writes[write_id]
        if w.status == "aborted":
            return Accept(0, lambda view: None)
        self._closed(w)
        time = self.next_time()

        def commit(view: Any) -> None:
            w.status = "aborted"
            self._appended(time)
        return Accept(1, commit)

    def choose(self, name: str, number: int | None = None, as_of: int | None = None) -> tuple[ModelTable, ModelVersion]:
        """The version a read or restore asks for: TableNotFound, VersionNotFound or VersionExpired."""
        table = self.live(name)
        if table is None:
            raise Refuse(TableNotFound, why=f"{name} is not live")
        return table, self.pick(table, number, as_of)

    def pick(self, table: ModelTable, number: int | None = None, as_of: int | None = None) -> ModelVersion:
        """Of any instance (a pin by id may name a dropped one): the current version, version
        ``number``, or the newest committed at or before ``as_of``; never both; never an expired one."""
        name = table.name
        if number is not None and as_of is not None:
            raise Refuse(BadArgument, why=f"{name}: a version or a time, not both")
        versions = self.versions.get(table.id, [])
        if not versions:
            raise Refuse(VersionNotFound, why=f"{name} has no versions")
        if number is not None:
            if not 1 <= number <= len(versions):
                raise Refuse(VersionNotFound, why=f"{name} has no version {number}")
            chosen = versions[number - 1]
        elif as_of is not None:
            before = [v for v in versions if v.committed <= as_of]
            if not before:
                raise Refuse(VersionNotFound, why=f"{name} had no version at {as_of}")
            chosen = before[-1]
        else:
            chosen = versions[-1]
        if self.expired(table.id, chosen):
            raise Refuse(VersionExpired, why=f"{name} version {chosen.number} is behind the mark")
        return chosen

    def read(self, name: str, number: int | None = None, as_of: int | None = None) -> Accept:
        table, chosen = self.choose(name, number, as_of)

        def check(view: Any) -> None:
            assert view.number == chosen.number and {f.path for f in view.files} == set(chosen.files)
        return Accept(0, check)

    def restore(self, name: str, number: int | None = None, as_of: int | None = None) -> Accept:
        table, chosen = self.choose(name, number, as_of)
        versions = self.versions[table.id]
        if chosen is versions[-1]:
            raise Refuse(BadArgument, why=f"version {chosen.number} is current already")
        time = self.next_time()

        def commit(view: Any) -> None:
            assert (view.number, view.mode, view.restored_from) == (len(versions) + 1, "restore", chosen.number)
            versions.append(ModelVersion(len(versions) + 1, time, "restore", chosen.files, chosen.number))
            self._appended(time)
        return Accept(1, commit)

    def advance_mark(self, name: str, to: int) -> Accept:
        """R12: fetch-and-set, snapped to the newest commit at or before ``to`` but the current one's."""
        table = self.live(name)
        if table is None:
            raise Refuse(TableNotFound, why=f"{name} is not live")
        if to > self.now():
            raise Refuse(InvalidTime, why=f"{to} is past now")
        versions = self.versions.get(table.id, [])
        previous = self.marks.get(table.id)
        target = max((v.committed for v in versions[:-1] if v.committed <= to), default=None)
        if target is None or (previous is not None and target <= previous):
            return Accept(0, lambda found: None if opt_us(found) == previous else
                          pytest.fail(f"mark returned {found}, expected {previous}"))
        held = [p for p in self.live_pins(table.id) if p.version is not None
                and versions[p.version - 1].committed <= target]
        if held:  # R21: a mark stops short of every pinned version; a manual one that would not is refused
            raise Refuse(PinRefused, why=f"{name}: a mark at {target} would expire pinned version {held[0].version}")
        time = self.next_time()

        def commit(found: datetime | None) -> None:
            assert opt_us(found) == previous, "R12: fetch-and-set returns the previous mark"
            self.marks[table.id] = target
            self._appended(time)
        return Accept(1, commit)

    # --- purges (R8) ---------------------------------------------------------------------

    def record_purge(self, table_id: str) -> Accept:
        """Only a dropped, unpurged instance at or behind its effective watermark may be purged."""
        table = self.tables.get(table_id)
        if table is None or not table.dropped_unpurged or not self.blocked(table):
            raise Refuse(PurgeRefused, why=f"{table_id} is not dropped and blocked")
        # R21: a pinned instance is not purged: the pins that hold it now.
        held = self.live_pins(table_id, None)
        if held:
            raise Refuse(PurgeRefused, why=f"{table_id} is held by pin {held[-1].id}")
        time = self.next_time()

        def commit(inst: Any) -> None:
            assert (inst.id, opt_us(inst.purged_at)) == (table_id, time)
            table.purged = time
            self._appended(time)
        return Accept(1, commit)

    # --- pins (R21) ----------------------------------------------------------------------

    def live_pins(self, table_id: str | None = None, at: int | None = None) -> list[ModelPin]:
        """The pins that hold at ``at`` (now by default; released ones and ones past their lease
        do not), soonest to end first (ties by id, so that both sides list them alike)."""
        when = self.now() if at is None else at
        found = [p for p in self.pins.values() if p.holds(when) and (table_id is None or p.table == table_id)]
        return sorted(found, key=lambda p: (p.expires, p.id))

    def _pin_target(self, name: str | None, table_id: str | None, number: int | None,
                    as_of: int | None) -> tuple[ModelTable, int | None]:
        """What a pin would hold: a live table by name, any instance by id; a version as ``pick``
        chooses it, or nothing (None) on a dropped instance that has no versions."""
        if table_id is None:
            if name is None:
                raise Refuse(BadArgument, why="a pin needs a name or an id")
            table = self.live(name)
            if table is None:
                raise Refuse(TableNotFound, why=f"{name} is not live")
        else:
            table = self.tables.get(table_id)
            if table is None:
                raise Refuse(TableNotFound, why=f"no instance {table_id}")
        reasons: set[type[Exception]] = set()
        why = []
        if self.blocked(table):  # purged, or dropped at or before its watermark: never resurrected
            reasons.add(PinRefused)
            why.append(f"{table.id} is {self.status(table)}")
        if len(self.live_pins(table.id)) >= PINS_PER_TABLE:
            reasons.add(PinRefused)
            why.append(f"{table.id} holds {PINS_PER_TABLE} live pins")
        version = None
        if table.live or self.versions.get(table.id) or number is not None or as_of is not None:
            try:
                version = self.pick(table, number, as_of).number
            except Refuse as refused:  # an expired version and a blocked instance: either refusal is
                reasons |= refused.errors  # true, and the contract ranks neither
                why.append(refused.why)
        if reasons:
            raise Refuse(*reasons, why="; ".join(why))
        return table, version

    def take_pin(self, name: str | None, table_id: str | None, number: int | None, as_of: int | None,
                 lease: int | None) -> Accept:
        """A lease of 1 s to 7 days (``None``: one outside that, or malformed) on what ``_pin_target``
        names; a bad lease and a refusal of the target are both fair complaints."""
        reasons: set[type[Exception]] = set()
        why = []
        if lease is None or not 1 <= lease <= PIN_LEASE_MAX:
            reasons.add(BadArgument)
            why.append("a lease from 1 s to 7 days")
        try:
            table, version = self._pin_target(name, table_id, number, as_of)
        except Refuse as refused:
            reasons |= refused.errors
            why.append(refused.why)
        if reasons:
            raise Refuse(*reasons, why="; ".join(why))
        assert lease is not None
        time = self.next_time()
        expires = self.now() + lease * SECOND  # from now (recorded at now, or 1 µs on when the clock stalls)

        def commit(pin: Any) -> None:
            assert pin.id not in self.pins, "a new pin must get a new id"
            assert (pin.table, pin.table_id, pin.version, us(pin.taken_at), us(pin.expires_at), pin.lease,
                    pin.released_at, pin.live) == \
                (table.name, table.id, version, time, expires, timedelta(seconds=lease), None, True)
            self.pins[pin.id] = ModelPin(pin.id, table.id, version, time, lease, expires)
            self._appended(time)
        return Accept(1, commit)

    def renew_pin(self, pin_id: str) -> Accept:
        """Only while it holds (one that ended may have let a vacuum in): its lease again, from now."""
        pin = self.pins[pin_id]
        time = self.next_time()
        if not pin.holds(time):  # held now, ended when its renewal would be recorded: refused all the same
            raise Refuse(PinEnded, why=f"pin {pin_id} ended at {pin.released or pin.expires}")
        expires = time + pin.lease * SECOND

        def commit(view: Any) -> None:
            assert (view.id, us(view.expires_at), view.released_at, view.live) == (pin_id, expires, None, True)
            pin.expires = expires
            self._appended(time)
        return Accept(1, commit)

    def release_pin(self, pin_id: str) -> Accept:
        """Ends a live pin now; one that ended already (released, or past its lease) is left as it is."""
        pin = self.pins[pin_id]
        time = self.next_time()
        if not pin.holds(time):  # ended, or ends before the release could be recorded (its last µs)
            def unchanged(view: Any) -> None:
                assert (view.id, opt_us(view.released_at), us(view.expires_at), view.live) == \
                    (pin_id, pin.released, pin.expires, pin.holds(self.now()))
            return Accept(0, unchanged)

        def commit(view: Any) -> None:
            assert (view.id, view.live, opt_us(view.released_at)) == (pin_id, False, time), view
            pin.released = time
            self._appended(time)
        return Accept(1, commit)


# --- the state machine ---------------------------------------------------------------------

def _record(label: str) -> None:
    """Count outcomes for ``--hypothesis-show-statistics``; a no-op outside Hypothesis."""
    with contextlib.suppress(InvalidArgument):
        event(label)


class LedgerMachine(RuleBasedStateMachine):
    """Random command sequences against a real ledger file and the model, compared at every step."""

    tables = Bundle("tables")  # ids of every instance ever created, live, dropped or purged
    STORE = "sqlite"
    """The backend: a SQLite file, or a schema of the test session's PostgreSQL server."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ledger-sm-"))
        self.path = ledger_location(self.STORE, self.dir)
        self.clock = ManualClock(T0)
        self.model = Model(us(T0))
        self.led = Ledger.open(self.path, clock=self.clock, max_clock_skew=MANUAL, actor="sm")
        self.last = ""
        """The outcome of the latest command: "ok" or the error's type name (for scenario tests)."""
        self.last_result: Any = None
        """What the latest command returned, or the error it raised."""
        self.handles: dict[str, Any] = {}
        """pin id -> the ``Pin`` that ``Ledger.pin`` returned (its ``renew``, ``release``, ``with``),
        while the ledger that made it is open."""

    def teardown(self) -> None:
        try:
            self.led.verify()
        finally:
            self.led.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # --- the comparison every command goes through --------------------------------------

    def _expect(self, label: str, verdict: Callable[[], Accept], call: Callable[[], Any]) -> Any:
        """Ask the model, then the ledger; they must agree, and a refusal must append nothing."""
        try:
            predicted: Accept | Refuse = verdict()
        except Refuse as refusal:
            predicted = refusal
        before = self.led.event_count()
        try:
            result = call()
        except LedgerError as exc:
            self.last, self.last_result = type(exc).__name__, exc
            _record(f"{label}: {self.last}")
            assert isinstance(predicted, Refuse), (
                f"{label}: the model expected success, the ledger refused: {type(exc).__name__}: {exc}")
            assert type(exc) in predicted.errors, (
                f"{label}: the ledger raised {type(exc).__name__} ({exc}); the model allows "
                f"{_names(predicted.errors)} because {predicted.why}")
            assert self.led.event_count() == before, f"{label}: a refusal appended events"
            return exc
        self.last, self.last_result = "ok", result
        assert isinstance(predicted, Accept), (
            f"{label}: the ledger accepted it, the model expected "
            f"{_names(predicted.errors)} because {predicted.why}")
        _record(f"{label}: ok" if predicted.events else f"{label}: ok, nothing to append")
        assert self.led.event_count() == before + predicted.events, f"{label}: wrong number of events"
        predicted.commit(result)
        return result

    # --- tables --------------------------------------------------------------------------

    @initialize(target=tables, first=st.lists(st.sampled_from(NAMES), unique=True, max_size=len(NAMES)))
    def populate(self, first: list[str]) -> Any:
        """Start with some live tables, so that drops and database drops have work from step one."""
        return multiple(*(self.create(name) for name in first))  # distinct names: all succeed

    @rule(target=tables, name=names)
    def create(self, name: str) -> Any:
        found = self._expect("create", lambda: self.model.create(name.lower()),
                             lambda: self.led.create_table(name))
        return multiple() if isinstance(found, LedgerError) else found.id

    @rule(name=names)
    def drop(self, name: str) -> None:
        self._expect("drop", lambda: self.model.drop(name.lower()), lambda: self.led.drop_table(name))

    @rule(name=names)
    def undrop_by_name(self, name: str) -> None:
        self._expect("undrop by name", lambda: self.model.undrop(name.lower()),
                     lambda: self.led.undrop_table(name))

    @rule(table=tables, name=st.none() | names, upper_id=st.booleans(), new_name=st.none() | names)
    def undrop_by_id(self, table: str, name: str | None, upper_id: bool, new_name: str | None) -> None:
        """By id, usually under its own last name (``name=None``); another name must not match."""
        name = name or self.model.tables[table].name
        given_id = table.upper() if upper_id else table
        self._expect("undrop by id",
                     lambda: self.model.undrop(name.lower(), table, new_name and new_name.lower()),
                     lambda: self.led.undrop_table(name, table_id=given_id, new_name=new_name))

    @rule(name=names, new_name=names)
    def undrop_as(self, name: str, new_name: str) -> None:
        self._expect("undrop as", lambda: self.model.undrop(name.lower(), new_name=new_name.lower()),
                     lambda: self.led.undrop_table(name, new_name=new_name))

    # --- databases -----------------------------------------------------------------------

    @rule(db=databases, style=STYLES)
    def drop_database(self, db: str, style: str) -> None:
        self._expect("drop database", lambda: self.model.drop_database(db),
                     lambda: self.led.drop_database(spell(db, style)))

    @rule(db=databases, style=STYLES)
    def undrop_database(self, db: str, style: str) -> None:
        self._expect("undrop database", lambda: self.model.undrop_database(db),
                     lambda: self.led.undrop_database(spell(db, style)))

    # --- the same commands aimed where they can succeed ---------------------------------
    # Names drawn uniformly from the universe mostly exercise refusals; these draw
    # from what the model holds (the model only chooses the argument, the
    # ledger is still checked against it), so that successes, guards at their
    # boundaries and database undrops happen in most runs too.

    def _dropped_names(self) -> list[str]:
        return sorted({t.name for t in self.model.tables.values() if t.dropped is not None})

    @precondition(lambda self: self.model.bindings())
    @rule(data=st.data(), style=STYLES)
    def drop_a_live_table(self, data: st.DataObject, style: str) -> None:
        self.drop(spell(data.draw(st.sampled_from(sorted(self.model.bindings()))), style))

    @precondition(lambda self: self._dropped_names())
    @rule(data=st.data(), style=STYLES)
    def undrop_a_dropped_name(self, data: st.DataObject, style: str) -> None:
        self.undrop_by_name(spell(data.draw(st.sampled_from(self._dropped_names())), style))

    @precondition(lambda self: self.model.bindings())
    @rule(data=st.data(), style=STYLES)
    def drop_a_live_database(self, data: st.DataObject, style: str) -> None:
        live = sorted({name.split(".")[0] for name in self.model.bindings()})
        self.drop_database(data.draw(st.sampled_from(live)), style)

    def _undoable_databases(self) -> list[str]:
        return sorted(self.model.db_drops)

    @precondition(lambda self: self._undoable_databases())
    @rule(data=st.data(), style=STYLES)
    def undrop_a_dropped_database(self, data: st.DataObject, style: str) -> None:
        self.undrop_database(data.draw(st.sampled_from(self._undoable_databases())), style)

    # Lists the rules draw from are in the model's order of creation, never sorted by id: ids are
    # random, and a draw that depends on them makes Hypothesis's replays differ (FlakyStrategyDefinition).

    def _purgeable(self) -> list[str]:
        tables = self.model.tables.values()
        return [t.id for t in tables if t.dropped_unpurged and self.model.blocked(t)]

    @precondition(lambda self: self._purgeable())
    @rule(data=st.data())
    def purge_a_blocked_table(self, data: st.DataObject) -> None:
        """What a vacuum does once a watermark covers an instance (R8 from then on)."""
        self.record_purge(data.draw(st.sampled_from(self._purgeable())))

    # --- watermarks ----------------------------------------------------------------------

    def advance_watermark(self, scope: str, to: int, style: str = "lower", zone_hours: int = 0,
                          label: str = "advance") -> Any:
        """Advance ``scope`` (canonical text) to ``to`` (µs), written in some spelling and zone."""
        when = at(to).astimezone(timezone(timedelta(hours=zone_hours)))  # aware, in any zone
        return self._expect(label, lambda: self.model.advance(scope, to),
                            lambda: self.led.advance_watermark(when, scope=spell_scope(scope, style)))

    @rule(anchor=tables, kind=st.sampled_from(["ledger", "database", "table"]),
          offset=st.sampled_from([0, -1, 1]), style=STYLES)
    def advance_to_a_drop_time(self, anchor: str, kind: str, offset: int, style: str) -> None:
        """To exactly, 1 µs before or 1 µs after an instance's drop time (its creation, if live):
        the guard's boundary (R3). A scope that covers the anchor, so the boundary matters."""
        table = self.model.tables[anchor]
        scope = {"ledger": "ledger", "database": f"database:{table.database}",
                 "table": f"table:{anchor}"}[kind]
        base = table.dropped if table.dropped is not None else table.created
        self.advance_watermark(scope, base + offset, style, label=f"advance {kind} to a drop time")

    @rule(scope=st.sampled_from(SCOPES), back=st.sampled_from([0, 1, SECOND, 3600 * SECOND]),
          style=STYLES, zone_hours=st.sampled_from([0, 5, -3]))
    def advance_to_recent(self, scope: str, back: int, style: str, zone_hours: int) -> None:
        """To a bare time at or before now, in any scope (R1's no-ops happen here too)."""
        self.advance_watermark(scope, self.model.now() - back, style, zone_hours, "advance to recent")

    @rule(scope=st.sampled_from(SCOPES), ahead=st.sampled_from([1, SECOND]), style=STYLES)
    def advance_past_now(self, scope: str, ahead: int, style: str) -> None:
        """A watermark marks a point already reached: past the ledger's now is InvalidTime."""
        self.advance_watermark(scope, self.model.now() + ahead, style, label="advance past now")

    # --- retention and purges ------------------------------------------------------------

    RETENTIONS = [  # (as the caller writes it, seconds; None removes; malformed counts as negative)
        ("7d", 7 * 86_400), ("36h", 129_600), (86_400, 86_400), (timedelta(hours=1), 3_600),
        ("90m", 5_400), (0, 0), (86_399, 86_399), (-1, -1), ("-1h", -1), ("a week", -1), (None, None),
    ]

    @rule(scope=st.sampled_from(SCOPES), value=st.sampled_from(RETENTIONS), override_floor=st.booleans())
    def set_retention(self, scope: str, value: tuple[Any, int | None], override_floor: bool) -> None:
        """Retention does not gate undrop (watermarks do), but its floor and scopes are rules too."""
        given, seconds = value
        self._expect("set retention", lambda: self.model.set_retention(scope, seconds, override_floor),
                     lambda: self.led.set_retention(scope, given, override_floor=override_floor))

    @rule(table=tables, value=st.sampled_from(RETENTIONS), override_floor=st.booleans())
    def set_table_retention(self, table: str, value: tuple[Any, int | None], override_floor: bool) -> None:
        self.set_retention(f"table:{table}", value, override_floor)

    @rule(table=tables)
    def record_purge(self, table: str) -> None:
        self._expect("record purge", lambda: self.model.record_purge(table),
                     lambda: self.led.record_purge(table, run_id="sm-vacuum", files=3, bytes=1024))

    # --- writes, versions and marks --------------------------------------------------------

    writes = Bundle("writes")

    @rule(target=writes, name=names)
    def begin_write(self, name: str) -> Any:
        found = self._expect("begin write", lambda: self.model.begin_write(name.lower()),
                             lambda: self.led.begin_write(name))
        return multiple() if isinstance(found, LedgerError) else found.id

    @rule(write=writes, mode=st.sampled_from(["append", "append", "overwrite"]))
    def commit_write(self, write: str, mode: str) -> None:
        folder = self.model.writes[write].folder
        self._expect(f"commit {mode}", lambda: self.model.commit_write(write, mode),
                     lambda: self.led.commit_write(write, [(f"{folder}/part-0.bin", 1)], mode=mode))

    @rule(write=writes)
    def abort_write(self, write: str) -> None:
        self._expect("abort write", lambda: self.model.abort_write(write), lambda: self.led.abort_write(write))

    @rule(name=names, number=st.sampled_from([1, 2, 3, 5]))
    def restore_version(self, name: str, number: int) -> None:
        self._expect("restore", lambda: self.model.restore(name.lower(), number),
                     lambda: self.led.restore_table(name, version=number))

    @rule(name=names, back=st.sampled_from([0, 1, SECOND, DAY]))
    def read_as_of(self, name: str, back: int) -> None:
        """Time travel (a read's choice of version: R12 refuses before any file would be read)."""
        when = self.model.now() - back
        self._expect("read as of", lambda: self.model.read(name.lower(), as_of=when),
                     lambda: self.led.version(name, as_of=at(when)))

    @rule(name=names, number=st.sampled_from([1, 2, 4]))
    def read_version(self, name: str, number: int) -> None:
        self._expect("read version", lambda: self.model.read(name.lower(), number),
                     lambda: self.led.version(name, version=number))

    @rule(name=names, offset=st.sampled_from([0, -1, 1]), which=st.sampled_from([1, 2, -1]))
    def advance_mark(self, name: str, offset: int, which: int) -> None:
        """To a version's commit time (first, second or current), 1 µs either side: the boundary."""
        table = self.model.live(name.lower())
        versions = self.model.versions.get(table.id, []) if table else []
        base = versions[which if which < 0 else which - 1].committed if len(versions) >= abs(which) else \
            self.model.now()
        to = min(base + offset, self.model.now() + (1 if offset > 0 else 0))
        self._expect("advance mark", lambda: self.model.advance_mark(name.lower(), to),
                     lambda: self.led.advance_retention_mark(name, at(to)))

    def _open_writes(self) -> list[str]:
        return [w.id for w in self.model.writes.values() if w.status == "open" and self.model.tables[w.table].live]

    @precondition(lambda self: self._open_writes())
    @rule(data=st.data(), mode=st.sampled_from(["append", "overwrite"]))
    def commit_an_open_write(self, data: st.DataObject, mode: str) -> None:
        self.commit_write(data.draw(st.sampled_from(self._open_writes())), mode)

    @precondition(lambda self: self.model.bindings())
    @rule(data=st.data(), mode=st.sampled_from(["append", "append", "overwrite"]))
    def write_a_version(self, data: st.DataObject, mode: str) -> None:
        """A pipeline's writes, start to end (begin, then commit), aimed at a live table: one to
        three in a row, so that tables have histories worth a mark and a restore."""
        name = data.draw(st.sampled_from(sorted(self.model.bindings())))
        for _ in range(data.draw(st.integers(1, 3))):
            write = self.begin_write(name)
            if isinstance(write, str):
                self.commit_write(write, mode)

    def _versioned(self) -> list[str]:
        return sorted(t.name for t in self.model.tables.values()
                      if t.live and len(self.model.versions.get(t.id, [])) >= 2)

    @precondition(lambda self: self._versioned())
    @rule(data=st.data(), offset=st.sampled_from([0, -1, 1]))
    def mark_a_versioned_table(self, data: st.DataObject, offset: int) -> None:
        name = data.draw(st.sampled_from(self._versioned()))
        versions = self.model.versions[self.model.live(name).id]
        to = min(data.draw(st.sampled_from(versions)).committed + offset, self.model.now())
        self._expect("advance mark", lambda: self.model.advance_mark(name, to),
                     lambda: self.led.advance_retention_mark(name, at(to)))

    @precondition(lambda self: self._versioned())
    @rule(data=st.data())
    def read_a_versioned_table(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(self._versioned()))
        number = data.draw(st.integers(1, len(self.model.versions[self.model.live(name).id])))
        self.read_version(name, number)

    def _restorable(self) -> list[tuple[str, int]]:
        return [(t.name, v.number) for t in self.model.tables.values() if t.live
                for v in self.model.versions.get(t.id, [])[:-1] if not self.model.expired(t.id, v)]

    @precondition(lambda self: self._restorable())
    @rule(data=st.data())
    def restore_a_readable_version(self, data: st.DataObject) -> None:
        name, number = data.draw(st.sampled_from(self._restorable()))
        self.restore_version(name, number)

    # --- pins (R21) ----------------------------------------------------------------------

    pins = Bundle("pins")

    LEASES = [  # (as the caller writes it, seconds; None: refused, out of range or malformed)
        (None, PIN_LEASE), ("2h", 7200), (60, 60), ("1s", 1), (timedelta(days=7), PIN_LEASE_MAX),
        (PIN_LEASE_MAX + 1, None), ("8d", None), (0, None), (0.5, None), ("-1h", None), ("a week", None),
    ]
    GOOD_LEASES = [lease for lease in LEASES if lease[1] is not None]
    CHOICES = [  # which version a pin asks for: (version=, how long before now as_of= is)
        (None, None), (None, None), (1, None), (2, None), (4, None), (None, 0), (None, SECOND), (None, DAY),
        (1, 0),  # both: refused
    ]

    def _take_pin(self, label: str, name: str | None, table_id: str | None,
                  choice: tuple[int | None, int | None], lease: tuple[Any, int | None]) -> Any:
        number, back = choice
        given, seconds = lease
        as_of = None if back is None else self.model.now() - back
        when = None if as_of is None else at(as_of)
        found = self._expect(label, lambda: self.model.take_pin(name and name.lower(), table_id, number, as_of, seconds),
                             lambda: self.led.pin(name, version=number, as_of=when, table_id=table_id, lease=given))
        if isinstance(found, LedgerError):
            return multiple()
        self.handles[found.id] = found
        return found.id

    @rule(target=pins, name=names, choice=st.sampled_from(CHOICES), lease=st.sampled_from(LEASES))
    def pin_by_name(self, name: str, choice: tuple[int | None, int | None], lease: tuple[Any, int | None]) -> Any:
        """A reader pins the version of a live table it is about to read."""
        return self._take_pin("pin by name", name, None, choice, lease)

    @rule(target=pins, table=tables, choice=st.sampled_from(CHOICES), lease=st.sampled_from(LEASES))
    def pin_by_id(self, table: str, choice: tuple[int | None, int | None], lease: tuple[Any, int | None]) -> Any:
        """Any instance by id: a live one, a dropped one (held whole when it has no versions), or
        one a vacuum may have touched (refused)."""
        return self._take_pin("pin by id", None, table, choice, lease)

    def _pinnable(self) -> list[tuple[str, int | None]]:
        """(instance, version) a pin may hold: an unexpired version of an instance neither purged nor
        behind its watermark, or such a dropped instance that has no versions (None)."""
        found: list[tuple[str, int | None]] = []
        for t in self.model.tables.values():
            if self.model.blocked(t):
                continue
            versions = self.model.versions.get(t.id, [])
            found += [(t.id, v.number) for v in versions if not self.model.expired(t.id, v)]
            if not t.live and not versions:
                found.append((t.id, None))
        return found

    @precondition(lambda self: self._pinnable())
    @rule(target=pins, data=st.data(), lease=st.sampled_from(LEASES), by_name=st.booleans())
    def pin_what_can_be_pinned(self, data: st.DataObject, lease: tuple[Any, int | None], by_name: bool) -> Any:
        """With any lease: a bad one is then the only thing wrong."""
        table_id, number = data.draw(st.sampled_from(self._pinnable()))
        table = self.model.tables[table_id]
        if by_name and table.live:
            return self._take_pin("pin aimed", spell(table.name, "upper"), None, (number, None), lease)
        return self._take_pin("pin aimed", None, table_id, (number, None), lease)

    @precondition(lambda self: self._pinnable())
    @rule(target=pins, data=st.data(), lease=st.sampled_from(GOOD_LEASES),
          wait=st.sampled_from([0, SECOND, 60 * SECOND, 3600 * SECOND]),
          end=st.sampled_from(["renew", "release", "renew, release", "neither"]))
    def read_under_a_pin(self, data: st.DataObject, lease: tuple[Any, int | None], wait: int, end: str) -> Any:
        """A reader's pin, start to end: taken, the read (which takes ``wait``), then renewed (PinEnded
        once its lease ran out) and released, or left to end at its lease."""
        pin = self.pin_what_can_be_pinned(data, lease, data.draw(st.booleans()))
        if not isinstance(pin, str):
            return pin
        self.step_clock(wait)
        held = self.model.pins[pin]
        table = self.model.tables[held.table]
        if table.live and held.version is not None:
            self.read_version(table.name, held.version)
        if "renew" in end:
            self.renew_pin(pin, data.draw(st.sampled_from(["ledger", "handle"])))
        if "release" in end:
            self.release_pin(pin, data.draw(st.sampled_from(["ledger", "handle", "with"])))
        return pin

    def _unpinnable(self) -> list[tuple[str, int | None]]:
        """(instance, version) no pin may hold: any of an instance purged or behind its watermark
        (PinRefused), an expired version of another (VersionExpired). A pin never resurrects."""
        found: list[tuple[str, int | None]] = []
        for t in self.model.tables.values():
            versions = self.model.versions.get(t.id, [])
            if self.model.blocked(t):
                found += [(t.id, None), *((t.id, v.number) for v in versions)]
            else:
                found += [(t.id, v.number) for v in versions if self.model.expired(t.id, v)]
        return found

    @precondition(lambda self: self._unpinnable())
    @rule(target=pins, data=st.data(), lease=st.sampled_from(GOOD_LEASES))
    def pin_what_may_not_be_pinned(self, data: st.DataObject, lease: tuple[Any, int | None]) -> Any:
        table_id, number = data.draw(st.sampled_from(self._unpinnable()))
        return self._take_pin("pin refused", None, table_id, (number, None), lease)

    @rule(pin=pins, via=st.sampled_from(["ledger", "handle"]))
    def renew_pin(self, pin: str, via: str) -> None:
        handle = self.handles.get(pin) if via == "handle" else None
        self._expect("renew pin", lambda: self.model.renew_pin(pin),
                     (lambda: handle.renew()) if handle is not None else (lambda: self.led.renew_pin(pin)))

    @rule(pin=pins, via=st.sampled_from(["ledger", "handle", "with"]))
    def release_pin(self, pin: str, via: str) -> None:
        """By id, by the pin's ``release``, or by leaving a ``with`` block that holds it."""
        handle = self.handles.get(pin) if via != "ledger" else None

        def leave_a_block() -> Any:
            assert handle is not None
            with handle as held:
                assert held is handle
            return handle
        call = (lambda: self.led.release_pin(pin)) if handle is None else \
            (lambda: handle.release()) if via == "handle" else leave_a_block
        self._expect("release pin", lambda: self.model.release_pin(pin), call)

    def _live_pins(self) -> list[str]:
        return [p.id for p in self.model.pins.values() if p.holds(self.model.now())]

    @precondition(lambda self: self._live_pins())
    @rule(data=st.data(), renew=st.booleans())
    def renew_or_release_a_live_pin(self, data: st.DataObject, renew: bool) -> None:
        pin = data.draw(st.sampled_from(self._live_pins()))
        self.renew_pin(pin, "handle") if renew else self.release_pin(pin, "ledger")

    def _pinned_versions(self) -> list[tuple[str, int]]:
        return sorted({(self.model.tables[p.table].name, p.version) for p in self.model.live_pins()
                       if p.version is not None and self.model.tables[p.table].live})

    @precondition(lambda self: self._pinned_versions())
    @rule(data=st.data(), offset=st.sampled_from([0, -1, 1]))
    def mark_a_pinned_version(self, data: st.DataObject, offset: int) -> None:
        """To a pinned version's commit time, 1 µs either side: PinRefused exactly when the mark
        would expire it (never for the current version, which no mark reaches)."""
        name, number = data.draw(st.sampled_from(self._pinned_versions()))
        table = self.model.live(name)
        assert table is not None
        committed = self.model.versions[table.id][number - 1].committed
        to = min(committed + offset, self.model.now())
        self._expect("advance mark to a pin", lambda: self.model.advance_mark(name, to),
                     lambda: self.led.advance_retention_mark(name, at(to)))

    def _pinned_dropped(self) -> list[str]:
        held = {p.table for p in self.model.live_pins()}
        return [t.id for t in self.model.tables.values() if t.id in held and t.dropped_unpurged]

    @precondition(lambda self: self._pinned_dropped())
    @rule(data=st.data())
    def purge_a_pinned_instance(self, data: st.DataObject) -> None:
        """A watermark may reach a pinned dropped instance (a manual advance does), its purge may not."""
        table = self.model.tables[data.draw(st.sampled_from(self._pinned_dropped()))]
        if not self.model.blocked(table):
            assert table.dropped is not None
            self.advance_watermark(f"table:{table.id}", table.dropped, label="advance table to a pinned drop")
        self.record_purge(table.id)

    # --- malformed input: refused before anything is decided ------------------------------

    BAD_INPUT: list[tuple[str, type[Exception], Callable[[Ledger], Any]]] = [
        ("create one part", InvalidName, lambda led: led.create_table("orders")),
        ("create three parts", InvalidName, lambda led: led.create_table("a.b.c")),
        ("create leading digit", InvalidName, lambda led: led.create_table("1a.t1")),
        ("drop empty", InvalidName, lambda led: led.drop_table("")),
        ("undrop bad id", InvalidName, lambda led: led.undrop_table("a.t1", table_id="xyz")),
        ("undrop bad new name", InvalidName, lambda led: led.undrop_table("a.t1", new_name="a-b.t1")),
        ("drop database dotted", InvalidName, lambda led: led.drop_database("a.t1")),
        ("naive time", InvalidTime, lambda led: led.advance_watermark(datetime(2026, 1, 1))),
        ("unknown scope", InvalidScope, lambda led: led.advance_watermark(T0, scope="galaxy")),
        ("bad table scope", InvalidScope, lambda led: led.advance_watermark(T0, scope="table:xyz")),
        ("empty database scope", InvalidScope, lambda led: led.set_retention("database:", "7d")),
        ("pin nothing", BadArgument, lambda led: led.pin()),
        ("pin an id no instance has", TableNotFound, lambda led: led.pin(table_id=GHOST_ID)),
        ("pin a bad id", InvalidName, lambda led: led.pin(table_id="xyz")),
        ("renew no such pin", BadArgument, lambda led: led.renew_pin("no-such-pin")),
        ("release no such pin", BadArgument, lambda led: led.release_pin(GHOST_ID)),
        ("pins of an id no instance has", TableNotFound, lambda led: led.pins(table_id=GHOST_ID)),
    ]

    @rule(case=st.sampled_from(BAD_INPUT))
    def malformed_input(self, case: tuple[str, type[Exception], Callable[[Ledger], Any]]) -> None:
        label, error, call = case

        def verdict() -> Accept:
            raise Refuse(error, why=label)
        self._expect(f"bad input: {label}", verdict, lambda: call(self.led))

    # --- the world around the ledger -----------------------------------------------------

    @rule(step=st.sampled_from([SECOND, 60 * SECOND, 3600 * SECOND, 0, 1, DAY,
                                -SECOND, -3600 * SECOND]))
    def step_clock(self, step: int) -> None:
        """Clocks jump, stall and step back; the ledger's times must still increase (R6)."""
        self.clock.advance(timedelta(microseconds=step))
        self.model.clock += step
        self.last = "ok"

    @rule(snapshot_every=st.sampled_from([20_000, 3, 1]))
    def reopen(self, snapshot_every: int) -> None:
        """Close and open the file again, sometimes from a snapshot: nothing is lost (R10)."""
        self.led.close()
        self.led = Ledger.open(self.path, clock=self.clock, max_clock_skew=MANUAL, actor="sm",
                               snapshot_every=snapshot_every)
        _record("reopen: from a snapshot" if self.led.runner.cache.snapshot_seq else "reopen: from the log")
        self.handles.clear()  # they belong to the ledger just closed
        self.last = "ok"

    # --- invariants, checked after every step --------------------------------------------

    @invariant()
    def live_tables_match(self) -> None:
        """R7: every bound name points at the instance the model says it does."""
        assert {t.name: t.id for t in self.led.tables()} == self.model.bindings()
        for name in NAMES:
            live = self.model.live(name)
            try:
                assert self.led.table(name).id == (live and live.id)
            except TableNotFound:
                assert live is None, f"{name} should be live as {live}"

    @invariant()
    def dropped_lists_match(self) -> None:
        """Dropped, unpurged instances, newest first, overall, per database and per name."""
        ids = lambda found: [t.id for t in found]  # noqa: E731
        assert ids(self.led.dropped_tables()) == self.model.dropped()
        for db in (*DATABASES, OTHER_DATABASE):
            assert ids(self.led.dropped_tables(database=db)) == self.model.dropped(database=db)
        for name in NAMES:
            assert ids(self.led.dropped_tables(name=name.upper())) == self.model.dropped(name=name)

    @invariant()
    def instances_match(self) -> None:
        """Each instance, live, dropped or purged: name, times, status, effective watermark, retention."""
        for table in self.model.tables.values():
            inst = self.led.instance(table.id)
            assert (inst.name, us(inst.created_at), opt_us(inst.dropped_at), opt_us(inst.purged_at)) == \
                (table.name, table.created, table.dropped, table.purged), table
            assert inst.state == self.model.status(table), table
            assert opt_us(inst.effective_watermark) == self.model.effective_watermark(table), table
            assert inst.retention == timedelta(seconds=self.model.retention(table)), table

    @invariant()
    def watermarks_and_retentions_match(self) -> None:
        """R1: the ledger holds exactly the watermarks the model does, at every scope."""
        scopes = (*(s for s in SCOPES if s != f"table:{GHOST_ID}"), *(f"table:{i}" for i in self.model.tables))
        for query in (self.led.watermark, self.led.retention):  # a table that never was: no answer
            with pytest.raises(TableNotFound):
                query(f"table:{GHOST_ID}")
        for scope in scopes:
            assert opt_us(self.led.watermark(scope)) == self.model.watermarks.get(scope), scope
            retention = self.led.retention(scope)
            expected = self.model.retentions.get(scope)
            assert retention == (None if expected is None else timedelta(seconds=expected)), scope

    @invariant()
    def versions_marks_and_writes_match(self) -> None:
        """R11, R12, R14: each live table's versions (number, mode, files, expired, current), its
        mark, and the open writes are what the model says."""
        for table in self.model.tables.values():
            if not table.live:
                continue
            found = [(v.number, us(v.committed_at), v.mode, frozenset(f.path for f in v.files), v.expired, v.current,
                      v.restored_from) for v in self.led.versions(table.name)]
            versions = self.model.versions.get(table.id, [])
            expected = [(v.number, v.committed, v.mode, v.files, self.model.expired(table.id, v),
                         v is versions[-1], v.restored_from) for v in reversed(versions)]
            assert found == expected, table.name
            assert opt_us(self.led.retention_mark(table.name)) == self.model.marks.get(table.id), table.name
        assert sorted(w.id for w in self.led.open_writes()) == \
            sorted(w.id for w in self.model.writes.values() if w.status == "open")

    @invariant()
    def pins_match(self) -> None:
        """R21: the live pins, and only those (released ones and ones past their lease are not), in
        all, per live name and per instance, soonest to end first, each with what it holds and until when."""
        def seen(views: list[Any]) -> list[tuple[Any, ...]]:
            return [(p.id, p.table, p.table_id, p.version, us(p.taken_at), us(p.expires_at), p.lease,
                     p.released_at, p.live) for p in views]

        def expected(pins: list[ModelPin]) -> list[tuple[Any, ...]]:
            return [(p.id, self.model.tables[p.table].name, p.table, p.version, p.taken, p.expires,
                     timedelta(seconds=p.lease), None, True) for p in pins]
        assert sorted(seen(self.led.pins())) == sorted(expected(self.model.live_pins()))
        for table in (self.model.tables[i] for i in {p.table for p in self.model.pins.values()}):  # ever pinned
            held = expected(self.model.live_pins(table.id))
            assert seen(self.led.pins(table_id=table.id)) == held, table
            if table.live:
                assert seen(self.led.pins(spell(table.name, "mixed"))) == held, table

    @invariant()
    def fresh_fold_equals_incremental_state(self) -> None:
        """Replaying the whole log from nothing gives the state the ledger built step by step."""
        fresh = fold(State(), (decode(*row) for row in self.led.store.read(0)))
        assert fresh == self.led.state

    @invariant()
    def event_times_strictly_increase(self) -> None:
        """R6: one event per accepted command, strictly increasing times, now never goes back."""
        rows = list(self.led.store.read(0))
        assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
        times = [r[5] for r in rows]
        assert all(a < b for a, b in zip(times, times[1:])), times
        assert len(rows) == self.model.events == self.led.event_count()
        assert (times[-1] if times else 0) == self.model.last_time
        assert us(self.led.now()) == self.model.now()

    @invariant()
    def nothing_is_live_and_purged(self) -> None:
        """R8: a purged instance never comes back, so it is never bound to a name."""
        state = self.led.state
        for inst in state.tables.instances.values():
            assert not (inst.dropped_at is None and inst.purged_at is not None), inst
        assert all(state.tables.instances[i].purged_at is None for i in state.tables.bindings.values())

    def check_all(self) -> None:
        """Every invariant, for scenarios driven by hand (Hypothesis calls them itself)."""
        for check in (self.live_tables_match, self.dropped_lists_match, self.instances_match,
                      self.watermarks_and_retentions_match, self.versions_marks_and_writes_match,
                      self.pins_match, self.fresh_fold_equals_incremental_state,
                      self.event_times_strictly_increase, self.nothing_is_live_and_purged):
            check()


LedgerMachine.TestCase.settings = settings(settings.default, stateful_step_count=40)
TestLedgerMatchesModel = LedgerMachine.TestCase
"""R1, R3, R6, R7, R8 and R10 over random command sequences, checked against the model."""


class PostgresLedgerMachine(LedgerMachine):
    STORE = "postgresql"


PostgresLedgerMachine.TestCase.settings = settings(settings.default, stateful_step_count=40)
TestLedgerMatchesModelOnPostgres = PostgresLedgerMachine.TestCase
"""The same, on PostgreSQL (R18: every rule holds on either store)."""


# --- hand-written scenarios through the same machine, one or more per rule ----------------

@contextlib.contextmanager
def machine() -> Iterator[LedgerMachine]:
    """A machine driven by hand: every command still goes through the model comparison."""
    m = LedgerMachine()
    try:
        yield m
    finally:
        m.teardown()


def do(m: LedgerMachine, command: str, expect: str = "ok", **arguments: Any) -> Any:
    """Run one rule, insist on its outcome ("ok" or an error's name), then check every invariant.

    The expected outcome is written from the rule, so these tests check the
    model as well as the ledger: a model that agreed with a wrong ledger
    would fail here.
    """
    result = getattr(m, command)(**arguments)
    assert m.last == expect, f"{command}({arguments}): got {m.last}, the rule says {expect}"
    m.check_all()
    return result


def test_r1_watermark_is_fetch_and_set_and_never_moves_back() -> None:
    with machine() as m:
        t = do(m, "create", name="a.t1")
        do(m, "step_clock", step=SECOND)
        do(m, "drop", name="a.t1")
        do(m, "step_clock", step=SECOND)
        dropped = m.model.tables[t].dropped
        assert do(m, "advance_watermark", scope="ledger", to=dropped) is None  # none was set
        count = m.led.event_count()
        for at_or_before in (dropped, dropped - 1, dropped - SECOND):
            assert us(do(m, "advance_watermark", scope="ledger", to=at_or_before)) == dropped
        assert m.led.event_count() == count and us(m.led.watermark()) == dropped
        do(m, "advance_past_now", "InvalidTime", scope="ledger", ahead=1, style="lower")
        later = m.model.now()
        assert us(do(m, "advance_watermark", scope="ledger", to=later, zone_hours=5)) == dropped
        assert m.led.event_count() == count + 1 and us(m.led.watermark()) == later


def test_r3_undrop_is_blocked_at_exactly_the_effective_watermark() -> None:
    """Drop time == watermark blocks; 1 µs later does not; whichever scope holds the watermark."""
    for kind in ("ledger", "database", "table"):
        with machine() as m:
            do(m, "create", name="a.t1")
            second = do(m, "create", name="a.t2")
            do(m, "step_clock", step=SECOND)
            do(m, "drop", name="a.t1")
            do(m, "step_clock", step=SECOND)
            do(m, "drop", name="a.t2")
            do(m, "step_clock", step=SECOND)
            # 1 µs before the second drop, so after the first
            do(m, "advance_to_a_drop_time", anchor=second, kind="database" if kind == "ledger" else "ledger",
               offset=-1, style="lower")
            do(m, "undrop_by_name", "UndropBlocked", name="a.t1")
            do(m, "undrop_by_name", name="A.T2")
            do(m, "drop", name="a.t2")
            do(m, "advance_to_a_drop_time", anchor=second, kind=kind, offset=0, style="upper")
            do(m, "undrop_by_id", "UndropBlocked", table=second, name=None, upper_id=False, new_name=None)
            do(m, "undrop_as", "UndropBlocked", name="a.t2", new_name="b.t2")
    with machine() as m:  # no watermark at all: undrop is allowed
        do(m, "create", name="b.t1")
        do(m, "drop", name="b.t1")
        do(m, "undrop_by_name", name="b.t1")


def test_r3_refusal_names_the_table_its_id_its_drop_time_and_the_watermark() -> None:
    with machine() as m:
        t = do(m, "create", name="a.t1")
        do(m, "step_clock", step=SECOND)
        do(m, "drop", name="a.t1")
        do(m, "step_clock", step=SECOND)
        do(m, "advance_to_recent", scope="database:a", back=0, style="lower", zone_hours=0)
        do(m, "undrop_by_name", "UndropBlocked", name="A.t1")
        message = str(m.last_result)
        dropped, mark = m.model.tables[t].dropped, m.model.watermarks["database:a"]
        assert dropped is not None and mark - dropped == SECOND
        assert "a.t1" in message and t in message, message
        assert any(text in message for text in iso_spellings(dropped)), message
        assert any(text in message for text in iso_spellings(mark)), message


def test_r3_effective_watermark_uses_the_database_of_the_last_name() -> None:
    """An instance renamed on undrop is guarded by its new database once dropped again."""
    with machine() as m:
        t = do(m, "create", name="a.t1")
        do(m, "drop", name="a.t1")
        do(m, "undrop_by_id", table=t, name=None, upper_id=True, new_name="b.t2")
        do(m, "step_clock", step=SECOND)
        do(m, "drop", name="b.t2")
        do(m, "step_clock", step=SECOND)
        do(m, "advance_to_recent", scope="database:a", back=0, style="lower", zone_hours=5)
        do(m, "undrop_by_name", name="b.t2")
        do(m, "drop", name="b.t2")
        do(m, "advance_to_recent", scope="database:b", back=0, style="upper", zone_hours=0)
        do(m, "undrop_by_name", "UndropBlocked", name="b.t2")


def test_r6_event_times_increase_when_the_clock_stalls_or_steps_back() -> None:
    with machine() as m:
        do(m, "create", name="a.t1")
        do(m, "step_clock", step=-3600 * SECOND)
        do(m, "drop", name="a.t1")
        do(m, "create", name="a.t1")
        do(m, "step_clock", step=-SECOND)
        do(m, "drop_database", db="a", style="upper")
        do(m, "advance_to_recent", scope="ledger", back=0, style="mixed", zone_hours=-3)
        do(m, "advance_past_now", "InvalidTime", scope="database:a", ahead=1, style="lower")
        times = [row[5] for row in m.led.store.read(0)]
        assert times == [us(T0) + i for i in range(5)]


def test_r7_names_pick_the_instance_to_undrop() -> None:
    """By name: the newest dropped; by id: that one, if its name matches; new_name: elsewhere."""
    with machine() as m:
        old = do(m, "create", name="a.t1")
        do(m, "drop", name="a.t1")
        new = do(m, "create", name="A.t1")
        assert new != old
        do(m, "drop", name="a.t1")
        do(m, "undrop_by_id", "TableNotFound", table=old, name="b.t1", upper_id=False, new_name=None)
        do(m, "undrop_by_name", name="a.t1")
        assert m.led.table("a.t1").id == new
        do(m, "undrop_by_name", "TableExists", name="a.t1")
        do(m, "undrop_by_id", "TableExists", table=old, name=None, upper_id=False, new_name=None)
        do(m, "undrop_by_id", "TableExists", table=new, name=None, upper_id=False, new_name="b.t1")
        do(m, "undrop_as", name="a.t1", new_name="b.t1")
        do(m, "undrop_by_name", "TableNotFound", name="a.t1")
        do(m, "create", "TableExists", name="a.t1")
        assert m.led.table("b.t1").id == old


def test_r7_database_undrop_restores_exactly_its_tables_all_or_none() -> None:
    with machine() as m:
        t1 = do(m, "create", name="a.t1")
        t2 = do(m, "create", name="a.t2")
        do(m, "step_clock", step=SECOND)
        do(m, "drop_database", db="a", style="lower")
        do(m, "undrop_by_name", name="a.t1")
        do(m, "drop", name="a.t1")
        # t1 was restored (and dropped again) on its own, so the drop of a can no longer be undone
        # as a whole: refused, not a silent restore of t2 alone (which it used to be).
        do(m, "undrop_database", "DatabaseChanged", db="a", style="upper")
        assert m.led.tables() == [] and m.model.tables[t2].dropped is not None
        do(m, "undrop_by_name", name="a.t2")  # what the refusal says to do: restore tables one by one
        assert [t.id for t in m.led.tables()] == [t2]
        do(m, "drop_database", db="a", style="lower")
        do(m, "create", name="a.t2")
        do(m, "undrop_database", "TableExists", db="a", style="lower")
        do(m, "drop", name="a.t2")
        do(m, "step_clock", step=SECOND)
        do(m, "undrop_by_name", name="a.t1")  # t1: dropped alone, not by the database drop
        do(m, "advance_to_a_drop_time", anchor=t2, kind="table", offset=0, style="lower")
        do(m, "undrop_database", "UndropBlocked", db="a", style="lower")
        assert m.model.tables[t2].dropped is not None
        do(m, "undrop_database", "DatabaseNotFound", db="c", style="lower")
        do(m, "drop_database", "DatabaseNotFound", db="c", style="lower")
        assert t1 in m.model.bindings().values()


def test_r8_purged_is_final() -> None:
    with machine() as m:
        t = do(m, "create", name="b.t1")
        do(m, "drop", name="b.t1")
        do(m, "record_purge", "PurgeRefused", table=t)
        do(m, "step_clock", step=SECOND)
        do(m, "advance_to_a_drop_time", anchor=t, kind="table", offset=0, style="upper")
        do(m, "record_purge", table=t)
        do(m, "record_purge", "PurgeRefused", table=t)
        do(m, "undrop_by_id", "UndropBlocked", table=t, name=None, upper_id=False, new_name="b.t2")
        do(m, "reopen", snapshot_every=1)
        assert m.led.dropped_tables() == [] and m.led.instance(t).purged_at is not None
        assert len(list(m.led.history(table_id=t))) == 4  # created, dropped, watermark, purged: kept


def test_r11_r12_r14_versions_restore_mark_and_closed_writes() -> None:
    """Writes make versions and destroy nothing; a restore is a new version; the mark expires what
    is at or before it but never the current version; a committed write is closed."""
    with machine() as m:
        do(m, "create", name="a.t1")
        first = do(m, "begin_write", name="a.t1")
        do(m, "commit_write", write=first, mode="append")
        do(m, "commit_write", "WriteClosed", write=first, mode="append")
        do(m, "step_clock", step=DAY)
        second = do(m, "begin_write", name="a.t1")
        do(m, "commit_write", write=second, mode="overwrite")
        do(m, "read_version", name="a.t1", number=1)  # the overwrite deleted nothing (R11)
        do(m, "restore_version", name="a.t1", number=1)
        do(m, "restore_version", "InvalidArgument", name="a.t1", number=3)  # version 3 is current
        do(m, "step_clock", step=DAY)
        do(m, "advance_mark", name="a.t1", which=2, offset=0)  # to version 2's commit time
        do(m, "read_version", "VersionExpired", name="a.t1", number=1)
        do(m, "restore_version", "VersionExpired", name="a.t1", number=2)
        do(m, "read_version", "VersionNotFound", name="a.t1", number=4)
        do(m, "advance_mark", name="a.t1", which=-1, offset=1)  # past the current: lands below it
        assert m.led.version("a.t1").number == 3  # the current version is always readable
        aborted = do(m, "begin_write", name="a.t1")
        do(m, "abort_write", write=aborted)
        do(m, "abort_write", write=aborted)  # twice: nothing more to do
        do(m, "commit_write", "WriteClosed", write=aborted, mode="append")
        do(m, "drop", name="a.t1")
        do(m, "begin_write", "TableNotFound", name="a.t1")


def _versions(m: LedgerMachine, name: str, modes: tuple[str, ...]) -> None:
    """One write per mode, a second apart: a history for a pin and a mark to work on."""
    for mode in modes:
        do(m, "step_clock", step=SECOND)
        write = do(m, "begin_write", name=name)
        do(m, "commit_write", write=write, mode=mode)
    do(m, "step_clock", step=SECOND)


def test_r21_a_pin_holds_its_version_against_a_mark_until_released_or_its_lease_ends() -> None:
    """A mark may reach just below a pinned version, not over it (PinRefused, nothing appended);
    the pin ends at its lease without an event, and then the mark goes on."""
    with machine() as m:
        t = do(m, "create", name="a.t1")
        _versions(m, "a.t1", ("append", "overwrite", "append"))
        pin = do(m, "pin_by_name", name="A.t1", choice=(2, None), lease=(60, 60))
        assert [(p.id, p.version) for p in m.led.pins("a.t1")] == [(pin, 2)]
        do(m, "advance_mark", name="a.t1", which=1, offset=0)  # version 1: below the pin, allowed
        do(m, "advance_mark", "PinRefused", name="a.t1", which=2, offset=0)  # would expire version 2
        do(m, "advance_mark", "PinRefused", name="a.t1", which=2, offset=1)
        do(m, "read_version", name="a.t1", number=2)  # still readable
        do(m, "step_clock", step=30 * SECOND)
        do(m, "renew_pin", pin=pin, via="handle")  # 60 s again, from now
        do(m, "step_clock", step=59 * SECOND)
        do(m, "advance_mark", "PinRefused", name="a.t1", which=2, offset=0)  # renewed: still held
        do(m, "step_clock", step=SECOND)  # exactly at its lease: it has ended, and no event says so
        assert m.led.pins() == [] and m.led.pins(table_id=t) == []
        do(m, "renew_pin", "PinEnded", pin=pin, via="ledger")  # a vacuum may have come in since
        do(m, "release_pin", pin=pin, via="handle")  # ended already: nothing to append
        do(m, "advance_mark", name="a.t1", which=2, offset=0)
        do(m, "pin_by_name", "VersionExpired", name="a.t1", choice=(2, None), lease=(None, PIN_LEASE))
        do(m, "pin_by_id", "VersionExpired", table=t, choice=(1, None), lease=(60, 60))
        current = do(m, "pin_by_name", name="a.t1", choice=(None, None), lease=("2h", 7200))  # version 3
        do(m, "advance_mark", name="a.t1", which=-1, offset=0)  # the current version: no mark reaches it
        do(m, "release_pin", pin=current, via="with")
        assert m.led.pins() == []


def test_r21_a_pinned_dropped_instance_is_not_purged() -> None:
    """A dropped instance without versions is pinned whole (version None); a watermark may reach
    it, its purge may not, nor a new pin; once the pin is released it is purged like any other."""
    with machine() as m:
        t = do(m, "create", name="b.t1")
        do(m, "step_clock", step=SECOND)
        do(m, "drop", name="b.t1")
        do(m, "pin_by_name", "TableNotFound", name="b.t1", choice=(None, None), lease=(None, PIN_LEASE))
        do(m, "pin_by_id", "VersionNotFound", table=t, choice=(1, None), lease=(None, PIN_LEASE))
        pin = do(m, "pin_by_id", table=t, choice=(None, None), lease=("2h", 7200))
        assert [p.version for p in m.led.pins(table_id=t)] == [None]
        do(m, "step_clock", step=SECOND)
        do(m, "advance_to_a_drop_time", anchor=t, kind="table", offset=0, style="lower")  # it is blocked
        do(m, "record_purge", "PurgeRefused", table=t)
        do(m, "pin_by_id", "PinRefused", table=t, choice=(None, None), lease=(None, PIN_LEASE))
        do(m, "renew_pin", pin=pin, via="ledger")  # the pin it has still holds it, and may be renewed
        do(m, "reopen", snapshot_every=1)  # from a snapshot: the pin is still there
        do(m, "record_purge", "PurgeRefused", table=t)
        do(m, "release_pin", pin=pin, via="ledger")
        do(m, "record_purge", table=t)
        do(m, "pin_by_id", "PinRefused", table=t, choice=(None, None), lease=(None, PIN_LEASE))  # purged: final
        do(m, "undrop_by_id", "UndropBlocked", table=t, name=None, upper_id=False, new_name=None)


def test_r21_a_pin_survives_its_table_being_dropped_and_ends_at_most_seven_days_on() -> None:
    """Leases: 1 s to 7 days, or refused before anything is recorded; a pin taken on a live table
    keeps the dropped instance from its purge until the lease ends, and then holds nothing."""
    with machine() as m:
        t = do(m, "create", name="a.t2")
        do(m, "pin_by_name", "VersionNotFound", name="a.t2", choice=(None, None), lease=(None, PIN_LEASE))
        _versions(m, "a.t2", ("append",))
        for given in ("8d", PIN_LEASE_MAX + 1, 0, 0.5, "-1h", "a week"):
            do(m, "pin_by_name", "InvalidArgument", name="a.t2", choice=(None, None), lease=(given, None))
        do(m, "pin_by_name", "InvalidArgument", name="a.t2", choice=(1, 0), lease=(None, PIN_LEASE))  # both
        do(m, "pin_by_name", "TableNotFound", name="b.t2", choice=(None, None), lease=(None, PIN_LEASE))
        pin = do(m, "pin_by_name", name="a.t2", choice=(None, 0), lease=(timedelta(days=7), PIN_LEASE_MAX))
        do(m, "drop", name="a.t2")
        do(m, "step_clock", step=SECOND)
        do(m, "advance_to_a_drop_time", anchor=t, kind="database", offset=0, style="upper")
        do(m, "record_purge", "PurgeRefused", table=t)
        do(m, "step_clock", step=7 * DAY)  # the longest lease there is has ended
        do(m, "advance_to_recent", scope="database:a", back=0, style="lower", zone_hours=0)
        assert m.led.pins() == []
        do(m, "record_purge", table=t)
        do(m, "renew_pin", "PinEnded", pin=pin, via="handle")


def test_r21_a_pin_is_taken_and_renewed_while_the_clock_stands_still() -> None:
    """Event times increase when the clock stands still (R6), 1 µs past the ledger's now, and a
    pin's lease runs from now: taking or renewing one at a stalled clock is an ordinary command."""
    with machine() as m:
        t = do(m, "create", name="a.t1")
        _versions(m, "a.t1", ("append",))
        do(m, "step_clock", step=0)
        do(m, "drop", "TableNotFound", name="a.t2")  # the clock stays where the last event was
        pin = do(m, "pin_by_name", name="a.t1", choice=(None, None), lease=(None, PIN_LEASE))
        do(m, "renew_pin", pin=pin, via="ledger")
        do(m, "step_clock", step=-SECOND)
        do(m, "renew_pin", pin=pin, via="handle")
        do(m, "pin_by_id", table=t, choice=(1, None), lease=(60, 60))


@pytest.mark.parametrize("ending", ["renew_pin", "release_pin"])
def test_r21_a_pin_renewed_or_released_in_its_last_microsecond(ending: str) -> None:
    """pins() lists a pin until its lease ends. Renewing or releasing it in its last microsecond,
    with the clock standing still, would record the event 1 µs after now, when the lease has ended:
    so it is decided for then, a renewal is PinEnded and a release has nothing to end, and nothing
    is recorded (R21: refused before anything is recorded); the ledger still opens and verifies."""
    with machine() as m:
        do(m, "create", name="a.t1")
        _versions(m, "a.t1", ("append",))
        pin = do(m, "pin_by_name", name="a.t1", choice=(None, None), lease=("1s", 1))
        do(m, "step_clock", step=SECOND - 1)
        do(m, "create", name="a.t2")  # an event 1 µs before the pin's lease ends
        do(m, "step_clock", step=-SECOND)  # the clock steps back: the ledger's now stays there
        assert [p.id for p in m.led.pins()] == [pin]
        before = m.led.event_count()
        try:  # decided for when it would be recorded, when the pin has ended: nothing is recorded
            view = getattr(m.led, ending)(pin)
            assert ending == "release_pin" and view.released_at is None, view
        except PinEnded:
            assert ending == "renew_pin"
        assert m.led.event_count() == before, "a refused renewal or an idle release appended events"
        m.led.close()
        m.led = Ledger.open(m.path, clock=m.clock, max_clock_skew=MANUAL, actor="sm")
        m.led.verify()


def test_r21_a_pin_past_its_lease_holds_nothing() -> None:
    """Pins end at their lease: one that pins() no longer lists keeps nothing from a purge."""
    with machine() as m:
        t = do(m, "create", name="b.t2")
        do(m, "step_clock", step=SECOND)
        do(m, "drop", name="b.t2")
        do(m, "pin_by_id", table=t, choice=(None, None), lease=(60, 60))
        do(m, "advance_to_a_drop_time", anchor=t, kind="table", offset=0, style="lower")
        do(m, "step_clock", step=3600 * SECOND)  # the lease ended an hour ago, and nothing was recorded since
        assert m.led.pins() == []
        do(m, "record_purge", table=t)
