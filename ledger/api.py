"""``Ledger``: the one object pipelines, the CLI and the Spark job talk to.

Every command runs the same loop (``execute``): decide on the folded state,
and append on the condition that every stream the decision read is still
where it was (R4). If another writer got there first the append is refused,
the state is refolded from the log, and the command is decided again. After
``optimistic_attempts`` lost races the command reads, decides and appends
under the write lock, where it cannot lose; only a lock that is never free
ends in ``Conflict``. Refusals are always decided on the latest state.
"""

from __future__ import annotations

import getpass
import os
import random
import socket
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterable

import attrs

from . import snapshot
from .clock import Clock, Micros, from_micros, parse_duration, read_clock, system_clock, to_micros
from .decide import (
    AdvanceWatermark, Command, CreateTable, Decision, DropDatabase, DropTable, RecordPurge,
    SetRetention, UndropDatabase, UndropTable, decide,
)
from .errors import Conflict, LedgerCorrupt, LedgerError, TableNotFound
from .events import Recorded, decode, encode, type_of
from .plan import FinishVacuum, StartVacuum, VacuumPlan
from .names import LEDGER, Scope, table_id as valid_table_id, table_name
from .state import Catalog, fold, fold_rows
from .store import EventStore, NewEvent, Snapshot
from .views import HistoryEntry, TableInstance

SNAPSHOT_NAME = "catalog"


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


@attrs.frozen
class VerifyReport:
    events: int
    last_seq: int
    instances: int
    live: int
    dropped: int
    purged: int
    snapshot_seq: int | None


class Ledger:
    """An open ledger file (or a throw-away in-memory one)."""

    def __init__(self, store: EventStore, *, warehouse: str, clock: Clock, actor: str,
                 max_attempts: int = 30, optimistic_attempts: int = 8,
                 snapshot_every: int = 20_000) -> None:
        self._store = store
        self.optimistic_attempts = optimistic_attempts
        self.warehouse = warehouse
        self.clock = clock
        self.actor = actor
        self.max_attempts = max_attempts
        self.snapshot_every = snapshot_every
        self.retries = 0
        """How many appends were refused and retried since opening (for benchmarks and tests)."""
        self._lock = threading.RLock()
        self._state = Catalog()
        self._snapshot_seq = 0
        self._load()

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, warehouse: str | os.PathLike[str] | None = None,
             clock: Clock | None = None, actor: str | None = None, synchronous: str = "FULL",
             busy_timeout: float = 10.0, **options: Any) -> Ledger:
        """Open (creating if needed) the ledger at ``path``; ``":memory:"`` for a throw-away one.

        ``warehouse`` is the root under which table data lives; by default the
        one recorded when the ledger was created, else ``warehouse/`` beside the
        ledger file (a fresh temporary folder for an in-memory ledger).
        """
        path = os.fspath(path)
        store = EventStore(path, synchronous=synchronous, busy_timeout=busy_timeout)
        try:
            root = _warehouse_root(store, path, warehouse)
            return cls(store, warehouse=root, clock=clock or system_clock,
                       actor=actor or _default_actor(), **options)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> str:
        return self._store.path

    # --- reading the log ------------------------------------------------------------------

    def _load(self) -> None:
        """Start from the snapshot when it still matches the log, else from nothing."""
        snap = self._store.load_snapshot(SNAPSHOT_NAME)
        if snap is not None and snap.format == snapshot.SNAPSHOT_FORMAT:
            try:
                state = snapshot.load(snap.data)
            except (ValueError, KeyError, TypeError):
                state = None
            if state is not None and state.seq == snap.seq and \
                    self._store.event_time(snap.seq) == state.last_time:
                self._state = state
                self._snapshot_seq = snap.seq
        self.refresh()

    def refresh(self, *, force: bool = False) -> Catalog:
        """Fold whatever other writers appended since we last looked; returns the state."""
        with self._lock:
            if self._store.changed_elsewhere() or force:
                self._state = fold_rows(self._state, self._store.read(self._state.seq))
                self._maybe_snapshot()
            return self._state

    def _maybe_snapshot(self) -> None:
        # Every snapshot_every events, or less often for a big state, so the cost per event stays flat.
        if self._state.seq - self._snapshot_seq >= max(self.snapshot_every, len(self._state.instances)):
            self._save_snapshot()

    def _records(self, after: int = 0, upto: int | None = None) -> Iterable[Recorded]:
        for row in self._store.read(after, upto=upto):
            yield decode(*row)

    def _save_snapshot(self) -> None:
        state = self._state
        try:
            self._store.save_snapshot(SNAPSHOT_NAME, Snapshot(state.seq, snapshot.SNAPSHOT_FORMAT,
                                                              snapshot.dump(state)))
            self._snapshot_seq = state.seq
        except (Conflict, OSError):
            pass  # a snapshot is only a cache; a busy or read-only file just goes without

    @property
    def state(self) -> Catalog:
        """The folded catalog, caught up with the log."""
        return self.refresh()

    # --- the command loop -----------------------------------------------------------------

    def now(self) -> datetime:
        return from_micros(self._now(self.refresh()))

    def _now(self, state: Catalog) -> Micros:
        # The log's time never goes back, so neither does the ledger's idea of now.
        return max(read_clock(self.clock), state.last_time)

    def prepare(self, command: Command | Any) -> Prepared:
        """Read and decide: the first two steps of a command, on the latest state."""
        with self._lock:
            return self._decide(self.refresh(), command)

    def _decide(self, state: Catalog, command: Command | Any) -> Prepared:
        now = self._now(state)
        if callable(command):  # a function of now, for commands that need the time
            command = command(now)
        decision = decide(state, command)
        return Prepared(decision, {s: state.version(s) for s in decision.reads}, now, state.seq)

    def commit(self, prepared: Prepared) -> None:
        """Append a prepared decision; raises ``Conflict`` if a stream it read has moved.

        On return the ledger's state includes the appended events.
        """
        decided = prepared.decision.events
        if not decided:
            return
        appended = self._store.append(
            [NewEvent(stream, *type_of(event), encode(event)) for stream, event in decided],
            prepared.conditions, prepared.now, self.actor, expected_head=prepared.seq)
        with self._lock:
            if appended.previous_head == self._state.seq:
                # Nobody else wrote since our state: fold our own events without reading them back.
                self._state = fold(self._state, (
                    Recorded(seq, stream, version, time, self.actor, event)
                    for (seq, stream, version, time), (_, event) in zip(appended.rows, decided)))
                self._maybe_snapshot()
            else:
                self.refresh(force=True)

    def execute(self, command: Command | Any) -> Decision:
        """Decide and append with retries; ``command`` may be a function of now.

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

    def _execute_exclusively(self, command: Command | Any) -> Decision:
        """Read, decide and append inside one write transaction. Slower for everyone (others
        wait for the lock), so only for a command that lost ``optimistic_attempts`` races in a
        row, typically a vacuum on a busy catalog; it cannot lose another. If the lock is not
        had within the busy timeout, that is ``Conflict``."""
        with self._lock, self._store.exclusive():
            prepared = self._decide(self.refresh(force=True), command)
            self.commit(prepared)
            return prepared.decision

    def _view(self, table_id: str) -> TableInstance:
        """An instance as of the state we hold (a command's result: that state includes it)."""
        state = self._state
        return TableInstance.of(state, state.instances[table_id], self.warehouse)

    # --- commands -------------------------------------------------------------------------

    def create_table(self, name: str) -> TableInstance:
        """Create a live table; its files go in a fresh location derived from its new id."""
        return self._view(self.execute(lambda now: CreateTable(name, _new_id())).result)

    def drop_table(self, name: str) -> TableInstance:
        """Soft-drop: the name is freed, the instance and its files stay until purged."""
        return self._view(self.execute(DropTable(name)).result)

    def undrop_table(self, name: str, *, table_id: str | None = None,
                     new_name: str | None = None) -> TableInstance:
        """Restore the newest dropped instance of ``name`` (or ``table_id``), as ``new_name`` if given.

        Refused with ``UndropBlocked`` once a vacuum's watermark covers its drop time.
        """
        return self._view(self.execute(UndropTable(name, table_id, new_name)).result)

    def drop_database(self, database: str) -> list[TableInstance]:
        """Drop every live table of ``database`` in one event."""
        return [self._view(i) for i in self.execute(DropDatabase(database)).result]

    def undrop_database(self, database: str) -> list[TableInstance]:
        """Restore exactly the tables the latest drop of ``database`` took: all of them or none."""
        return [self._view(i) for i in self.execute(UndropDatabase(database)).result]

    def advance_watermark(self, to: datetime, *, scope: Scope | str | None = LEDGER) -> datetime | None:
        """Fetch-and-set: move the watermark forward to ``to`` and return what it was (None if unset).

        A ``to`` at or before the current value changes nothing and returns the
        current value (R1); a ``to`` past the ledger's current time is refused.
        """
        target, where = to_micros(to), Scope.parse(scope)
        found = self.execute(lambda now: AdvanceWatermark(where, target, now)).result
        return None if found is None else from_micros(found)

    def set_retention(self, scope: Scope | str | None, duration: str | timedelta | int | float | None,
                      *, override_floor: bool = False) -> timedelta | None:
        """Set how long dropped tables in ``scope`` stay restorable (``None`` removes the setting).

        Values under the 24-hour floor are refused unless ``override_floor=True``.
        """
        seconds = None if duration is None else int(parse_duration(duration).total_seconds())
        result = self.execute(SetRetention(Scope.parse(scope), seconds, override_floor)).result
        return None if result is None else timedelta(seconds=result)

    def record_purge(self, table_id: str, *, run_id: str, files: int, bytes: int) -> TableInstance:
        """Record that a vacuum deleted an instance's files (the vacuum calls this)."""
        return self._view(self.execute(RecordPurge(table_id, run_id, files, bytes)).result)

    # --- the vacuum's half of the conversation (spark_ops.vacuum calls these) --------------

    def plan_vacuum(self, *, retention: str | timedelta | int | float | None = None,
                    database: str | None = None, limit: int | None = None,
                    override_floor: bool = False) -> VacuumPlan:
        """What a vacuum would purge now, and the watermarks it would set; changes nothing."""
        return self.prepare(self._start_command(retention, database, limit, override_floor)).decision.result

    def start_vacuum(self, *, retention: str | timedelta | int | float | None = None,
                     database: str | None = None, limit: int | None = None,
                     override_floor: bool = False) -> VacuumPlan:
        """Decide a plan and durably advance its watermarks before any file is touched (R2).

        When this returns, every planned instance is unrestorable; if it raises,
        nothing was recorded and nothing may be deleted.
        """
        return self.execute(self._start_command(retention, database, limit, override_floor)).result

    def finish_vacuum(self, run_id: str, purged: Iterable[tuple[str, int, int]], *, failed: int = 0) -> int:
        """Record the purges of a run (id, files, bytes) and its end; returns how many were recorded."""
        return self.execute(FinishVacuum(run_id, tuple(purged), failed)).result

    @staticmethod
    def _start_command(retention: Any, database: str | None, limit: int | None,
                       override_floor: bool) -> Any:
        seconds = None if retention is None else int(parse_duration(retention).total_seconds())
        run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]
        return lambda now: StartVacuum(run_id, now, seconds, override_floor, database, limit)

    # --- queries --------------------------------------------------------------------------

    def table(self, name: str) -> TableInstance:
        """The live instance bound to ``name``."""
        key = table_name(name)
        state = self.refresh()
        inst = state.live(key)
        if inst is None:
            hint = " (it is dropped: see show-dropped, or Ledger.dropped_tables)" if key in state.dropped else ""
            raise TableNotFound(f"there is no live table {key}{hint}")
        return TableInstance.of(state, inst, self.warehouse)

    def instance(self, table_id: str) -> TableInstance:
        """Any instance by id, live, dropped or purged."""
        key = valid_table_id(table_id)
        state = self.refresh()
        inst = state.instance(key)
        if inst is None:
            raise TableNotFound(f"there is no table with id {key}")
        return TableInstance.of(state, inst, self.warehouse)

    def tables(self, *, database: str | None = None) -> list[TableInstance]:
        """Live tables, by name."""
        state = self.refresh()
        prefix = None if database is None else Scope.database(database).key + "."
        return [TableInstance.of(state, state.instances[i], self.warehouse)
                for name, i in sorted(state.bindings.items())
                if prefix is None or name.startswith(prefix)]

    def dropped_tables(self, *, database: str | None = None, name: str | None = None) -> list[TableInstance]:
        """Dropped, unpurged instances, newest drop first."""
        state = self.refresh()
        found = state.dropped_instances(
            database=None if database is None else Scope.database(database).key,
            name=None if name is None else table_name(name))
        return [TableInstance.of(state, inst, self.warehouse) for inst in found]

    def watermark(self, scope: Scope | str | None = LEDGER) -> datetime | None:
        found = self.refresh().watermark(self._known_scope(scope))
        return None if found is None else from_micros(found)

    def retention(self, scope: Scope | str | None = LEDGER) -> timedelta | None:
        """The retention set at exactly this scope (None: not set here)."""
        found = self.refresh().retentions.get(str(self._known_scope(scope)))
        return None if found is None else timedelta(seconds=found)

    def _known_scope(self, scope: Scope | str | None) -> Scope:
        where = Scope.parse(scope)
        if where.kind == "table" and not self._state.has_id(where.key):
            raise TableNotFound(f"scope {where}: there is no table with id {where.key}")
        return where

    def event_count(self) -> int:
        return self._store.count()

    def history(self, name: str | None = None, *, table_id: str | None = None) -> list[HistoryEntry]:
        """Every event, or those that concern one table: by name (every instance that ever
        bore it, across renames) or by id."""
        records = list(self._records())
        if name is None and table_id is None:
            return [HistoryEntry.of(r) for r in records]
        ids = {valid_table_id(table_id)} if table_id is not None else set()
        key = table_name(name) if name is not None else None
        if key is not None:
            ids |= {getattr(r.event, "table_id") for r in records
                    if getattr(r.event, "name", None) == key and hasattr(r.event, "table_id")}
        if not ids or (table_id is not None and not self.state.has_id(valid_table_id(table_id))):
            raise TableNotFound(f"no table {'with id ' + table_id if table_id else key} has ever "
                                "existed in this ledger")
        return [HistoryEntry.of(r) for r in records if _concerns(r, ids)]

    def verify(self) -> VerifyReport:
        """Check the file, refold the whole log from nothing, and compare with the live state.

        Raises ``LedgerCorrupt`` naming what is wrong; returns counts when all is well.
        """
        problems = self._store.integrity_problems()
        if problems:
            found = "; ".join(" ".join(p.split()) for p in problems[:5])
            raise LedgerCorrupt(f"{self.path}: SQLite integrity check failed: {found}; "
                                "restore the ledger file from a backup")
        current = self.refresh()
        fresh = fold_rows(Catalog(), self._store.read(0, upto=current.seq))
        if fresh != current:
            raise LedgerCorrupt(f"{self.path}: the incremental state differs from a fresh fold of the log "
                                "(the log was changed under the snapshot); reopen the ledger to rebuild it")
        snap = self._store.load_snapshot(SNAPSHOT_NAME)
        instances = list(fresh.all_instances())
        return VerifyReport(
            events=self._store.count(), last_seq=fresh.seq, instances=len(instances),
            live=len(fresh.bindings), dropped=sum(i.is_dropped for i in instances),
            purged=sum(i.purged_at is not None for i in instances),
            snapshot_seq=None if snap is None else snap.seq,
        )


def _concerns(rec: Recorded, ids: set[str]) -> bool:
    event = rec.event
    if getattr(event, "table_id", None) in ids:
        return True
    if any(i in ids for i in getattr(event, "table_ids", ())):
        return True
    return getattr(event, "scope", None) in {f"table:{i}" for i in ids}


def _new_id() -> str:
    return uuid.uuid4().hex[:16]


def _default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


DEFAULT_WAREHOUSE = "warehouse"
"""Recorded for a ledger created without a root: ``warehouse/`` beside the file, wherever
the file is, so a ledger and its warehouse can be moved together."""


def _warehouse_root(store: EventStore, path: str, warehouse: str | os.PathLike[str] | None) -> str:
    """The root is recorded once, when the ledger is first opened; an explicit root on a
    later open applies to that open only, so a one-off command cannot move every table."""
    if path == ":memory:":
        return _normalise_root(os.fspath(warehouse)) if warehouse is not None else \
            tempfile.mkdtemp(prefix="retention-ledger-warehouse-")
    recorded = store.get_meta("warehouse")
    if recorded is None:
        recorded = DEFAULT_WAREHOUSE if warehouse is None else _normalise_root(os.fspath(warehouse))
        store.set_meta("warehouse", recorded)
    chosen = recorded if warehouse is None else _normalise_root(os.fspath(warehouse))
    if chosen == DEFAULT_WAREHOUSE:
        return str(Path(path).resolve().parent / DEFAULT_WAREHOUSE)
    return chosen


def _normalise_root(root: str) -> str:
    if "://" in root:
        return root.rstrip("/")
    return str(Path(root).expanduser().resolve())
