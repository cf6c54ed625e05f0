"""``Ledger``: the one object pipelines, the CLI and the Spark jobs talk to.

A small face over three parts: a ``Runner`` (the command loop, in ``runner``)
that decides commands with the pure core and appends them to a store (``persistence``);
the audit readers (``audit``); and the views callers get back (``views``).
Each method below states a command or a query in the caller's terms (names,
aware datetimes, durations such as ``"7d"``) and turns the answer into a view.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import secrets
import socket
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Mapping, Sequence, TypeVar

import attrs
from vacuum_work import Plan, new_run_id
from vacuum_work.where import NotUnderRoot, Root, is_uri

from .audit import (
    copy as copies, erasures as erasure_reader, export as exports, history as histories, outputs, proofs,
    receipts as receipt_reader, verify as verifier,
)
from .audit.erasures import ErasureProof, ErasureStatus
from .audit.receipts import DeletionProof, DeletionProofs, Receipt
from .audit.copy import CopyReport
from .audit.checkpoints import Checkpoint, InclusionProof, KeyLike
from .audit.export import ExportReport
from .audit.scrub import ScrubPlan
from .audit.verify import VerifyReport
from .catalog import AsOf, Catalog
from .clock import Clock, Micros, from_micros, iso_utc, parse_duration, system_clock, to_micros
from .core.erasures import (
    FenceErasure, ForgetErasure, LiftErasureFence, Request, RequestErasure, check_request as check_erasure_request,
    considered, redaction, statement_bytes,
)
from .core.guard import AdvanceWatermark, SetRetention
from .core.publications import RecordPublication
from .core.pins import DEFAULT_LEASE_SECONDS as DEFAULT_PIN_LEASE_SECONDS, MAX_LEASE_SECONDS, PinBatch, ReleasePin, RenewPin, \
    TakePin
from .core.streams import touched
from .core.model import State
from .core.tables import (
    CreateTable, DropDatabase, DropTable, RecordPurge, UndropDatabase, UndropTable, name_of, require_live,
)
from .core.vacuums import DEFAULT_GRACE_SECONDS, DEFAULT_LEASE_SECONDS, StartVacuum
from .core.versions import (
    DEFAULT_WRITE_LEASE_SECONDS, AbortWrite, AdoptFiles, AdvanceRetentionMark, BeginWrite, CommitWrite,
    RenewWrite, RestoreVersion, version_key,
)
from .core.warehouse import MoveWarehouse
from . import names
from .errors import (
    Conflict, ErasureInProgress, InvalidArgument, InvalidTime, LedgerNotFound, PinEnded, WarehouseMismatch,
)
from .names import LEDGER, Scope
from .runner import Attempts, Runner
from .persistence import maintain as maintenance
from .persistence.contract import MAX_CLOCK_SKEW, NoLedgerYet, Store
from .persistence.holders import Holder
from .persistence.maintain import MaintainReport
from .persistence.stores import is_url, open_store, shown
from .vacuum_run import VacuumRun
from .views import Change, History, PinView, PublicationView, TableInstance, TableVersion, WriteView

Duration = str | timedelta | int | float


MAX_PIN_LEASE = timedelta(seconds=MAX_LEASE_SECONDS)
"""The longest lease a pin may have (R21: no reader blocks a vacuum for ever); a longer read renews."""
DEFAULT_WAREHOUSE = "warehouse"
"""Recorded for a ledger created without a root: ``warehouse/`` beside the file, wherever
the file is, so a ledger and its warehouse can be moved together."""


class Ledger(Catalog):
    """An open ledger file (or a throw-away in-memory one).

    Build one with ``Ledger.open(path)``, or hand the constructor a store of your own
    (a test that injects faults does: subclass ``SQLiteStore`` and override ``append``).
    """

    def __init__(self, store: Store, *, warehouse: str | os.PathLike[str] | None = None,
                 clock: Clock | None = None, actor: str | None = None, **options: Any) -> None:
        if clock is not None and not callable(clock):
            raise InvalidArgument(f"clock must be a function returning an aware UTC datetime, got "
                                  f"{type(clock).__name__} {clock!r}")
        if actor is not None and (not isinstance(actor, str) or not actor.strip()):
            raise InvalidArgument(f"actor must be non-empty text such as 'etl@host', got {actor!r}")
        if actor is not None and any(ord(c) < 32 or ord(c) == 127 for c in actor):
            raise InvalidArgument(f"actor {actor!r} holds a control character (a newline, a tab...), which could "
                                  "forge a line of the history: use printable text such as 'etl@host'")
        self.store = store
        self.runner = Runner(store, clock=clock or system_clock, actor=actor or _default_actor(), **options)
        recorded = _record_root(store, _root_argument(warehouse))
        self._recorded_root = recorded if recorded != DEFAULT_WAREHOUSE or store.path == ":memory:" else \
            str(Path(store.path).resolve().parent / DEFAULT_WAREHOUSE)  # beside the file: resolved once
        self._check_root(warehouse)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, warehouse: str | os.PathLike[str] | None = None,
             clock: Clock | None = None, actor: str | None = None, create: bool = True,
             synchronous: str = "FULL", busy_timeout: float = 10.0,
             max_clock_skew: Duration | None = timedelta(microseconds=MAX_CLOCK_SKEW), **options: Any) -> Ledger:
        """Open the ledger at ``path`` (creating it unless ``create=False``); ``":memory:"`` for a
        throw-away one; a PostgreSQL address (``postgresql://user@host:port/database``, with
        ``?schema=name`` for a schema of its own; any form libpq reads) for one that several hosts
        share (R18).

        ``warehouse`` is the root under which table data lives. A new ledger records it
        (default: ``warehouse/`` beside the ledger file; a fresh temporary folder for an
        in-memory ledger); every later open uses the recorded root, and naming another
        one is refused with ``WarehouseMismatch`` (see ``move_warehouse``).

        On PostgreSQL every host is held to the server's clock: a command decided on a clock
        further from it than ``max_clock_skew`` (default one minute) is refused with ``ClockSkew``
        before it records anything. ``None`` lets any clock through: for a test that drives its
        own (``ManualClock``), never for hosts that share a ledger.
        """
        path = _path_argument(path)
        skew = None if max_clock_skew is None else \
            int(parse_duration(max_clock_skew, "max_clock_skew", InvalidArgument) / timedelta(microseconds=1))
        try:
            # A shared ledger is made only with its warehouse root (``_record_root``): refused before
            # anything is made.
            must_exist = not create or (warehouse is None and is_url(path))
            store = open_store(path, create=not must_exist, synchronous=synchronous, busy_timeout=busy_timeout,
                               max_skew=skew)
        except NoLedgerYet as exc:
            if create:
                _record_root_missing(shown(path))
            raise LedgerNotFound(str(exc)) from None
        try:
            return cls(store, warehouse=warehouse, clock=clock, actor=actor, **options)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Close the store (the file, or the connection to the server); a ``with`` block does it for you."""
        self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- where things are -----------------------------------------------------------------

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def actor(self) -> str:
        return self.runner.actor

    @property
    def clock(self) -> Clock:
        return self.runner.clock

    @property
    def retries(self) -> int:
        return self.runner.retries

    def retrying(self) -> ContextManager[Attempts]:
        """Run a step you retry on ``Conflict`` (an erase's second round) inside this: the ledger calls
        in it, and your retries, share one bound on lost races (``max_attempts``) instead of each
        retrying as often again."""
        return self.runner.retrying()

    @property
    def state(self) -> State:
        """The folded state, caught up with the log and read in full (for tools and tests of the core)."""
        return self.runner.cache.full_state()

    @property
    def warehouse(self) -> str:
        """The warehouse root: the one recorded at creation, or the latest recorded move."""
        return self._root(self.runner.held)

    def _current(self) -> State:
        return self.runner.state

    def _check_root(self, warehouse: str | os.PathLike[str] | None) -> None:
        if warehouse is None or self.path == ":memory:":
            return
        asked, current = _normalise_root(os.fspath(warehouse)), self.warehouse
        if asked != current:
            raise WarehouseMismatch(
                f"{self.path} keeps its tables under {current}, not {asked}: tables written under another "
                "root would be invisible to every vacuum; open it without a warehouse, or, if the files "
                f"were moved, record the move first (retention-ledger move-warehouse {asked})")

    def now(self) -> datetime:
        """The ledger's now: its clock, but never before the last event (R6)."""
        return self.runner.now()

    # --- commands -------------------------------------------------------------------------

    def create_table(self, name: str) -> TableInstance:
        """Create a live table; its files go in a fresh location derived from its new id."""
        return self._view(self.runner.run(lambda now: CreateTable(name, _new_id())))

    def drop_table(self, name: str) -> TableInstance:
        """Soft-drop: the name is freed, the instance and its files stay until purged."""
        return self._view(self.runner.run(DropTable(name)))

    def undrop_table(self, name: str, *, table_id: str | None = None,
                     new_name: str | None = None) -> TableInstance:
        """Restore the newest dropped instance of ``name`` (or ``table_id``), as ``new_name`` if given.

        Refused with ``UndropBlocked`` once a watermark covers its drop time (R3).
        """
        return self._view(self.runner.run(UndropTable(name, table_id, new_name)))

    def drop_database(self, database: str) -> list[TableInstance]:
        """Drop every live table of ``database`` in one event."""
        return [self._view(i) for i in self.runner.run(DropDatabase(database))]

    def undrop_database(self, database: str) -> list[TableInstance]:
        """Restore exactly the tables the latest drop of ``database`` took: all of them or none."""
        return [self._view(i) for i in self.runner.run(UndropDatabase(database))]

    def advance_watermark(self, to: datetime, *, scope: Scope | str | None = LEDGER) -> datetime | None:
        """Fetch-and-set: move the watermark forward to ``to`` and return what it was (None if unset).

        A ``to`` at or before the current value changes nothing and returns the
        current value (R1); a ``to`` past the ledger's current time is refused.
        """
        target, where = to_micros(to), Scope.parse(scope)
        found = self.runner.run(lambda now: AdvanceWatermark(where, target, now))
        return None if found is None else from_micros(found)

    def set_retention(self, scope: Scope | str | None, duration: Duration | None,
                      *, override_floor: bool = False) -> timedelta | None:
        """Set how long dropped tables in ``scope`` stay restorable (``None`` removes the setting).

        Values under the 24-hour floor are refused unless ``override_floor=True``.
        """
        seconds = None if duration is None else int(parse_duration(duration).total_seconds())
        result = self.runner.run(SetRetention(Scope.parse(scope), seconds, override_floor))
        return None if result is None else timedelta(seconds=result)

    def record_purge(self, table_id: str, *, run_id: str, files: int, bytes: int) -> TableInstance:
        """Record that an instance's files are gone, deleted outside a vacuum run (by hand, once its
        watermark passed it; a vacuum's run records its own purges): only a dropped instance behind its
        watermark that no pin holds (R8, R21)."""
        return self._view(self.runner.run(lambda now: RecordPurge(table_id, run_id, files, bytes, now)))

    def move_warehouse(self, to: str | os.PathLike[str]) -> str:
        """Record that the warehouse now lives at ``to`` (copy the files there first); returns the
        new root. Refused while a vacuum run is unfinished, since its plan names the old locations."""
        if self.path == ":memory:":
            raise InvalidArgument("an in-memory ledger has no recorded warehouse to move")
        target = _normalise_root(_root_argument(to) or "")
        try:
            folder = Root.parse(target)
        except NotUnderRoot as exc:
            raise InvalidArgument(f"{exc}; nothing was recorded") from None
        if folder.on_disk and not os.path.isdir(folder.prefix):
            raise InvalidArgument(f"the new warehouse root {target} does not exist: copy the warehouse's files there "
                                  f"first (from {self.warehouse}), then record the move; nothing was recorded")
        self.runner.run(MoveWarehouse(self.warehouse, target))
        return self.warehouse

    # --- writes and versions (spark_ops.write_table and read_table call these) -------------

    def begin_write(self, name: str, *, lease: Duration | None = None) -> WriteView:
        """Register a write before its first file (R14): an id, a folder of its own under the
        table's location, and a lease (default 6 hours; ``renew_write`` extends it)."""
        seconds = DEFAULT_WRITE_LEASE_SECONDS if lease is None else _lease_seconds(lease, "a write's lease")
        write_id = _new_id()
        self.runner.run(lambda now: BeginWrite(name, write_id, now, seconds))
        return self._write_view(write_id)

    def renew_write(self, write_id: str) -> WriteView:
        """Extend an open write's lease by its length, from now. A write that was swept is
        ``WriteExpired``: the job must write again."""
        self.runner.run(lambda now: RenewWrite(write_id, now))
        return self._write_view(write_id)

    def abort_write(self, write_id: str) -> WriteView:
        """Give a write up: its folder is never committed (a vacuum's sweep reclaims it)."""
        self.runner.run(AbortWrite(write_id))
        return self._write_view(write_id)

    def commit_write(self, write_id: str, files: Iterable[tuple[str, int]], *, mode: str = "append",
                     schema: str | None = None, merge_schema: bool = False,
                     merged_from: str | None = None, removes: Iterable[str] = (),
                     base: int | None = None, partition_by: Sequence[str] | None = None,
                     fence: str | None = None) -> TableVersion:
        """Make the next version of the write's table: ``files`` are ``(path, size)`` pairs, paths
        relative to the table's location and inside the write's folder. ``append`` keeps the
        current version's files too; ``overwrite`` names only these (the old ones stay, R11);
        ``replace`` keeps the current version's files but ``removes`` (their paths, as its ``files``
        give them) and adds these: a partition overwrite, or an erasure's rewrite. The removed files
        stay named by the older versions, and go only when a vacuum expires those (R11, R13). A
        replace decided while another commit landed is decided again on the new current version, with
        the same ``removes``; ``base`` (the number of the version ``removes`` was chosen from)
        refuses it instead with ``Conflict`` if the current version is no longer that one, for a caller
        whose ``removes`` depend on the files (a partition overwrite chooses them again); given to an
        overwrite, it refuses the overwrite likewise (one that empties a table loses no append).

        ``schema`` (text, for Spark a StructType's JSON) is recorded with the version and read back
        with every read of it. An append (or a replace) whose schema is not the table's is
        ``SchemaMismatch``, unless ``merge_schema`` (then ``schema`` is the union the writer computed
        from ``merged_from``, which must still be the table's schema).

        ``partition_by`` (the columns whose ``col=value`` folders hold the files, outermost first;
        ``[]``: none) is recorded with the version: the table's layout, which outlives a version of no
        files. An append or a replace keeps the table's (other columns are ``InvalidArgument``); None
        keeps the table's there, and in an overwrite with no files (an erasure that emptied it).

        While an erasure request is being recorded on the table (``fence_erasure``), the commit waits
        for it, up to ``FENCE_WAIT_SECONDS`` (then ``ErasureInProgress``); ``fence``: the request whose
        rewrite this is, which commits under its own fence."""
        pairs = _pairs(files)
        if isinstance(partition_by, (str, bytes)) or not (partition_by is None or isinstance(partition_by, Iterable)):
            raise InvalidArgument(f"partition_by is a list of column names, not {partition_by!r}; nothing was recorded")
        columns = None if partition_by is None else tuple(partition_by)
        if isinstance(removes, (str, bytes)) or not isinstance(removes, Iterable):
            raise InvalidArgument(f"removes must be paths of the current version's files, got {type(removes).__name__}")
        removed = tuple(removes)
        if base is not None and (mode == "append" or isinstance(base, bool) or not isinstance(base, int)):
            raise InvalidArgument(f"base is the number of the version a replace's removes (or an overwrite) were "
                                  f"chosen from, for mode='replace' or 'overwrite', not {base!r} with mode={mode!r}; "
                                  "nothing was recorded")
        wanted = CommitWrite(write_id, pairs, mode, schema, merge_schema, merged_from, removed, base,
                             partition_by=columns, fence=fence)
        number = _past_fences(lambda: self._replace(write_id, wanted) if mode == "replace" else
                              self.runner.run(lambda now: attrs.evolve(wanted, now=now)))
        return self._version(self._write_view(write_id).table_id, number)

    def _replace(self, write_id: str, wanted: CommitWrite) -> int:
        """A replace, decided on the current version's files as read now (``_replace_base``), again on
        the newer one if a commit landed meanwhile, unless ``wanted.base`` says which it must be."""
        with self.runner.retrying() as attempts:  # its retries and the runner's share one bound
            while True:
                began = attempts.lost
                current, base_files = self._replace_base(write_id)
                if wanted.base is not None and current != wanted.base:
                    raise Conflict(f"write {write_id}'s replace was chosen from version {wanted.base}, but the "
                                   f"table's current version is now {current}: choose its removes again; nothing "
                                   "was recorded")
                try:
                    return int(self.runner.run(lambda now: attrs.evolve(wanted, base=current, base_files=base_files,
                                                                        now=now)))
                except Conflict as exc:
                    if wanted.base is not None or self._replace_base(write_id, files=False)[0] == current:
                        raise
                    attempts.lose(exc, since=began)

    def _replace_base(self, write_id: str, *, files: bool = True) -> tuple[int | None, tuple[tuple[str, int], ...]]:
        """The current version of the write's table and (``files``) its files, from the state caught
        up with the log: what a replace's ``removes`` refers to (the core checks both)."""
        state = self.runner.refresh()
        w = state.data.writes.get(write_id) if isinstance(write_id, str) else None
        current = None if w is None else state.data.current(w.table_id)
        if current is None or not files:
            return (None if current is None else current.number), ()
        return current.number, tuple(self._version_files(state, current))

    def adopt_files(self, name: str, files: Iterable[tuple[str, int]]) -> TableVersion:
        """Make the files a table held before it was versioned (written straight into its location)
        its version 1, so that its first versioned write appends to them."""
        number = self.runner.run(AdoptFiles(name, _pairs(files)))
        return self._version(self.table(name).id, number)

    def restore_table(self, name: str, *, version: int | None = None, as_of: datetime | None = None) -> TableVersion:
        """A new version equal to an earlier one (Delta's RESTORE): undoes an overwrite. An expired
        version is refused with ``VersionExpired``."""
        at = None if as_of is None else to_micros(as_of)
        number = _past_fences(lambda: self.runner.run(lambda now: RestoreVersion(name, version, at, now)))
        return self._version(self.table(name).id, number)

    def advance_retention_mark(self, name: str, to: datetime) -> datetime | None:
        """Fetch-and-set: move the table's retention mark forward to the commit time of the newest
        version committed at or before ``to`` (never the current one's) and return what it was."""
        target = to_micros(to)
        found = self.runner.run(lambda now: AdvanceRetentionMark(name, target, now))
        return None if found is None else from_micros(found)

    # A command's result is read from the state we hold, which includes the command.

    def _write_view(self, write_id: str) -> WriteView:
        state = self.runner.held
        return WriteView.of(state, state.data.writes[write_id], self._root(state))

    def _version(self, table_id: str, number: int) -> TableVersion:
        state = self.runner.held
        v = state.data.version(table_id, number)
        assert v is not None
        return TableVersion.of(state, v, self._files_of(state))

    # --- pins (R21): readers hold what they read ------------------------------------------

    def pin(self, name: str | None = None, *, version: int | None = None, as_of: datetime | None = None,
            table_id: str | None = None, lease: Duration | None = None) -> Pin:
        """Keep a version's files from every vacuum while a read of it runs (R21): the current
        version of the live table ``name`` by default, ``version=`` or ``as_of=`` an earlier one, or
        ``table_id=`` any instance (a dropped one too: then it is not purged). The lease (default
        an hour, at most 7 days) ends the pin unless renewed; ``release`` (or leaving a ``with``
        block) ends it now. An expired version is ``VersionExpired``, a purged instance or a
        dropped one behind its watermark ``PinRefused``: a pin never resurrects."""
        seconds = DEFAULT_PIN_LEASE_SECONDS if lease is None else _lease_seconds(lease, "a pin's lease")
        at = None if as_of is None else to_micros(as_of)
        pin_id = self.runner.run(lambda now: TakePin(_new_id(), now, name, table_id, version, at, seconds))
        return Pin(self, self._pin_view(pin_id))

    def renew_pin(self, pin_id: str) -> PinView:
        """Extend a live pin by its lease, from now; one that ended is ``PinEnded`` (also when it
        ended in the instant between the decision and the renewal's landing: then it changed nothing)."""
        self.runner.run(lambda now: RenewPin(pin_id, now))
        view = self._pin_view(pin_id)
        if view.released_at is None and view.expires_at <= from_micros(self.runner.held.last_time):
            raise PinEnded(f"cannot renew pin {pin_id}: it ran out at {iso_utc(view.expires_at)}, as the renewal "
                           "was being recorded, and a vacuum may have deleted what it held since; take a new pin")
        return view

    def release_pin(self, pin_id: str) -> PinView:
        """End a pin now (a pin that ended already is left as it is)."""
        self.runner.run(lambda now: ReleasePin(pin_id, now))
        return self._pin_view(pin_id)

    def pin_tables(self, names: Iterable[str], *, lease: Duration | None = None) -> list[Pin]:
        """Pin the current version of each live table in ``names`` in one append (``pin`` for each
        would be an append each: a thousand tables, seconds). All or none: one table that cannot
        be pinned refuses the batch, and nothing is recorded."""
        seconds = DEFAULT_PIN_LEASE_SECONDS if lease is None else _lease_seconds(lease, "a pin's lease")
        wanted = list(names)
        ids = self.runner.run(lambda now: PinBatch(tuple(TakePin(_new_id(), now, n, None, None, None, seconds)
                                                           for n in wanted)))
        return [Pin(self, self._pin_view(pin_id)) for pin_id in ids]

    def renew_pins(self, pin_ids: Iterable[str]) -> list[PinView]:
        """Renew several pins in one append; one that ended is not renewed (its view says
        ``live=False``) and does not stop the others: the caller takes a new one in its place."""
        return self._pin_batch(pin_ids, RenewPin)

    def release_pins(self, pin_ids: Iterable[str]) -> list[PinView]:
        """End several pins now, in one append (those that ended already are left as they are)."""
        return self._pin_batch(pin_ids, ReleasePin)

    def _pin_batch(self, pin_ids: Iterable[str],
                   make: Callable[[str, Micros], RenewPin | ReleasePin]) -> list[PinView]:
        wanted = list(dict.fromkeys(pin_ids))
        self.runner.run(lambda now: PinBatch(tuple(make(p, now) for p in wanted)))
        return [self._pin_view(p) for p in wanted]

    def watch(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``callback`` after every append made through this object, with what it may have
        changed; returns the function that stops it. What other processes append is not seen here
        until this object next reads the log (a follower asks for it: ``spark_ops.refresh``). The
        callback runs in the thread that appended, once the append has landed and the ledger's
        locks are let go; an error it raises is logged (the ``ledger`` logger), never taken for
        the append's."""
        def listener(streams: frozenset[str]) -> None:
            callback(Change(*touched(streams)))
        self.runner.listeners.append(listener)
        return lambda: self.runner.listeners.remove(listener) if listener in self.runner.listeners else None

    def record_publication(self, catalog: str, catalog_name: str, metadata: str,
                           table_ids: Iterable[str]) -> PublicationView:
        """Record that the publication at ``catalog`` (its address with no password: R23) under
        ``catalog_name`` shows ``table_ids``, its metadata under ``metadata`` (R26). Recording the
        same again appends nothing. ``arrow_ops.publish`` records each publication it makes, so an
        erasure request anywhere republishes what it shows (R25)."""
        self.runner.run(RecordPublication(catalog, catalog_name, metadata, tuple(table_ids)))
        return next(p for p in self.publications() if (p.catalog, p.catalog_name) == (catalog, catalog_name))

    def publications(self, *, table_id: str | None = None) -> list[PublicationView]:
        """Every recorded publication (of one instance, if ``table_id``), oldest first."""
        state = self._current()
        found = state.publications.showing(table_id) if table_id is not None else \
            sorted(state.publications.published.values(), key=lambda p: p.time)
        return [PublicationView(p.catalog, p.catalog_name, p.metadata, tuple(p.table_ids),
                                tuple(name_of(state, t) for t in p.table_ids), from_micros(p.time)) for p in found]

    def names_touched(self, change: Change, *, database: str | None = None,
                      shown: Mapping[str, str] | None = None) -> set[str]:
        """The names ``change`` may have moved (of ``database`` only, if given): every live table
        of its databases, the live name of each instance it touched, and each of ``shown`` (name to
        the instance it shows) in those databases or over those instances. What a follower of
        ``watch`` shows by name (Spark's and DuckDB's attachments) is brought up to date for these."""
        databases = change.databases if database is None else change.databases & {database}
        names = {t.name for d in databases for t in self.tables(database=d)}
        names |= {n for n, table_id in (shown or {}).items()
                  if table_id in change.table_ids or n.split(".", 1)[0] in databases}
        for table_id in change.table_ids:
            table = self.instance(table_id)
            if table.is_live and database in (None, table.database):
                names.add(table.name)
        return names

    def pins(self, name: str | None = None, *, table_id: str | None = None) -> list[PinView]:
        """The live pins (of one table, by live name or id), soonest to end first."""
        state = self._current()
        now = to_micros(self.now())
        if name is not None or table_id is not None:
            inst = self._instance(state, table_id) if table_id is not None else require_live(state, str(name))
            found = state.pins.live(inst.id, now)
        else:
            found = state.pins.every_live(now)
        return [PinView.of(state, p, now) for p in found]

    def _pin_view(self, pin_id: str) -> PinView:
        state = self.runner.held
        return PinView.of(state, state.pins.pins[pin_id], to_micros(self.now()))

    # --- the integrity scrub (spark_ops.scrub drives it) ----------------------------------------

    def plan_scrub(self, *, database: str | None = None) -> ScrubPlan:
        """An integrity scrub of the warehouse (or of ``database``) on the ledger's word now: its
        ``looks()``, one a location, say what each should hold and what must stay gone; its
        ``finish(findings)`` asks the ledger again and records one ``ScrubFinished`` (R27: a scrub
        checks and records, and changes nothing). Records nothing until then."""
        scope = None if database is None else names.database_name(database)
        state = self.runner.refresh()
        if scope is not None and not any(inst.database == scope for inst in state.tables.all_instances()):
            raise InvalidArgument(f"no table was ever in database {scope}: nothing to scrub (`retention-ledger "
                                  "tables --all` lists the databases); nothing was recorded")
        return ScrubPlan(self.runner, self.store, state, self.warehouse,
                         lambda at: lambda v: self._version_files(at, v), scope, self.runner.reading())

    # --- the vacuum: a plan, then a run on record (spark_ops.vacuum drives these) ---------------

    def plan_vacuum(self, *, retention: Duration | None = None, database: str | None = None,
                    limit: int | None = None, override_floor: bool = False, uncommitted: bool = True,
                    only_uncommitted: bool = False, grace: Duration | None = None,
                    run_id: str | None = None) -> Plan:
        """What a vacuum would do now (purges, watermarks, expiries, sweeps, straggler scans), as the
        typed records its executors take (``vacuum_work``); records nothing. ``run_id``: the id the
        run would have, refused here as ``start_vacuum`` would refuse it. On PostgreSQL a host whose
        clock the server refuses is refused (``ClockSkew``), as its ``start_vacuum`` would be: a plan
        on that clock would show purges that are not due."""
        command = self._start_command(retention, database, limit, override_floor, DEFAULT_LEASE_SECONDS,
                                      uncommitted, only_uncommitted, grace, run_id)
        plan = self.runner.preview(lambda now: attrs.evolve(command, now=now)).result
        return self._named(replace(plan, run_id=None, lease_until=None))

    def start_vacuum(self, *, retention: Duration | None = None, database: str | None = None,
                     limit: int | None = None, override_floor: bool = False,
                     lease: Duration = timedelta(seconds=DEFAULT_LEASE_SECONDS), uncommitted: bool = True,
                     only_uncommitted: bool = False, grace: Duration | None = None,
                     run_id: str | None = None) -> VacuumRun:
        """Decide a plan and durably advance its watermarks and marks, and record its sweeps,
        before any file is touched (R2, R13, R15); returns the run (``run.plan`` is what it may
        delete), through which its driver renews the lease, records its receipt and finishes.

        When this returns, every purge in the plan is unrestorable and carries the watermark now
        in the log; if it raises, nothing was recorded and nothing may be deleted. The run holds a
        lease that keeps other vacuums off its work. ``uncommitted`` (default on) also sweeps
        abandoned writes and cleans committed write folders of stragglers older than ``grace``
        (default 6h); ``only_uncommitted`` does only that. With nothing to do, nothing is recorded:
        the run's ``plan.run_id`` is None.

        ``run_id`` (default: a fresh one, ``vacuum_work.new_run_id()``) names the run. A caller that
        must release the lease if it is stopped (a Ctrl-C handler) chooses it first, so it knows the
        id (``VacuumRun.of(ledger, run_id).release()``) even if it is stopped the moment the start
        lands; an id already on record is refused.
        """
        seconds = max(1, _lease_seconds(lease, "a vacuum's lease"))
        command = self._start_command(retention, database, limit, override_floor, seconds, uncommitted,
                                      only_uncommitted, grace, run_id)
        plan = self.runner.run(lambda now: attrs.evolve(command, now=now))
        plan = self._named(replace(plan, run_id=None, lease_until=None) if plan.empty else plan)
        return VacuumRun(self, command.run_id, plan)

    def _named(self, plan: Plan) -> Plan:
        """The plan with what each scan keeps read in: a straggler scan's version's files, a foreign
        scan's adopted ones (the lists a purge or an expiry deletes by key are read one at a time
        while it runs, ``VacuumRun.files``)."""
        def named(digest: str | None) -> frozenset[str]:
            return frozenset() if digest is None else frozenset(p for p, _ in self._manifest(digest))
        return replace(plan, stragglers=tuple(replace(sc, named=named(sc.folder.listed)) for sc in plan.stragglers),
                       foreign=tuple(replace(f, named=named(f.adopted)) for f in plan.foreign))

    def receipt(self, run_id: str) -> Receipt:
        """What vacuum run ``run_id`` deleted: counts, bytes, its parts and the Merkle root over them
        (R20). A run still going (or one that died) has its parts and no root yet."""
        return receipt_reader.receipt(self.runner.refresh(), run_id)

    def prove_deleted(self, key: str) -> DeletionProof:
        """That a vacuum deleted ``key``: the run, the time and the audit paths to its receipt's root,
        which the chain records (``proof.verify()``; offline, ``python -m ledger.audit prove-deleted``).
        ``key`` is spelt any way Spark gives a file (``ledger.audit.object_keys``): relative to the
        warehouse root or to the table, a path, a ``file:`` or store URI. ``NotDeleted`` if no receipt
        holds it."""
        return receipt_reader.prove_deleted(self.store, self.runner.refresh(), key, self.warehouse)

    def prove_deleted_many(self, keys: Iterable[str]) -> DeletionProofs:
        """For each of ``keys`` (spelt as for ``prove_deleted``), in order, its ``DeletionProof`` or a
        ``NotDeletedKey`` saying why there is none, reading each receipt part once (one by one,
        each key reads and hashes a part of up to 10,000 objects). ``.require_all()`` raises
        ``NotDeleted`` naming the keys not proven; ``.write(path)`` is the bundle the offline check
        (``python -m ledger.audit prove-deleted``) reads."""
        return receipt_reader.prove_deleted_many(self.store, self.runner.refresh(), keys, self.warehouse)

    # --- erasure requests (R25) ---------------------------------------------------------------

    def request_erasure(self, tables: str | Mapping[str, str | None], *, reason: str,
                        files: Iterable[tuple[str, int]], predicate: str | None = None,
                        keys: Sequence[int] | Sequence[str] | None = None, replaced: Mapping[str, int] | None = None,
                        replaced_by: int | None = None, scanned: Mapping[str, int] | None = None,
                        request_id: str | None = None) -> ErasureStatus:
        """Record an erasure request (R25) of the rows ``predicate`` names in ``tables`` (a name), or of
        those whose key column holds one of ``keys`` (``tables``: names to key columns, ``{"crm.users":
        "user_id", "sales.orders": "customer_id"}``), for ``reason`` (a ticket, an article of law).
        The chain keeps a commitment to what it names, not the keys (``ErasureStatus.statement`` while
        the ledger keeps them; forgotten once the request is done, or ``forget_erasure``).

        ``files`` is the erasure set: ``(key, size)`` of every file that held such rows, keys relative
        to the warehouse root (``<table id>/_writes/...``), each a file of a kept version of one of the
        tables or of a dropped instance of one of their names not yet purged; an empty set is recorded
        too (the request was answered). The current versions must hold none of them: commit a replace
        without them first (``replaced``: each table's version that did; ``replaced_by``: the one
        table's; ``spark_ops.erase`` does both). From then on no read, restore, undrop or pin reaches a
        version holding one (``VersionErased``), and a pin on one ends (R25 wins over R21).
        ``scanned``: the instance ids the set was found in (the live ones and the dropped ones of the
        names), each with the number of its current version then (0: none); a request whose names hold
        anything else now (a commit landed since) is ``Conflict``, decided as it is appended: scan what
        was committed since and record again. A file that is none of those is ``InvalidArgument``, and
        nothing is recorded. ``request_id``: the id a fence was put up for (``fence_erasure``), which
        the request lifts; a new one otherwise. Returns the request's status (``erasure``)."""
        named, canonical = check_erasure_request(tables, reason, predicate=predicate, keys=keys)
        if isinstance(files, (str, bytes)) or not isinstance(files, Iterable):
            raise InvalidArgument(f"files must be (key, size) pairs, got {type(files).__name__}; nothing was recorded")
        if scanned is not None and not isinstance(scanned, Mapping):
            raise InvalidArgument(f"scanned maps each instance id scanned to its current version's number, not "
                                  f"{type(scanned).__name__}; nothing was recorded")
        if replaced_by is not None:
            if len(named) != 1 or replaced:
                raise InvalidArgument("replaced_by names the version that rewrote a request's one table: with several, "
                                      "give replaced={name: version}; nothing was recorded")
            replaced = {next(iter(named)): replaced_by}
        rewrites = tuple(sorted((names.table_name(n), v) for n, v in (replaced or {}).items()))
        wanted = _pairs(files)
        request_id = _new_id() if request_id is None else request_id
        statement = statement_bytes(secrets.token_hex(32), named, predicate=predicate, keys=canonical)
        commitment = hashlib.sha256(statement).hexdigest()
        tables_in_order = tuple(sorted(named))
        columns = tuple(named[n] or "" for n in tables_in_order)
        # Kept before the request is appended (so a request on record always has it), and deleted
        # again if the request is not: a crash in between leaves one no request names, which
        # ``forget_done_erasures`` sweeps.
        self.store.keep_statement(commitment, statement, to_micros(self.now()))
        try:
            with self.runner.retrying() as attempts:  # its retries and the runner's share one bound
                while True:
                    began = attempts.lost
                    seen, holders = self._holders(tables_in_order, wanted)
                    if scanned is not None:
                        seen = tuple(sorted(scanned.items()))
                    try:
                        self.runner.run(lambda now: RequestErasure(
                            request_id, tables_in_order, columns, len(canonical or ()), statement, reason, wanted,
                            seen, holders, rewrites, now))
                    except Conflict as exc:
                        # With ``scanned``, what moved is the caller's to scan: the decision said so on the
                        # latest state.
                        if scanned is not None:
                            raise
                        attempts.lose(exc, since=began)
                        continue
                    return self.erasure(request_id)
        except BaseException:
            self.store.forget_statement(commitment)
            raise

    def forget_erasure(self, request_id: str) -> ErasureStatus:
        """Forget what erasure request ``request_id`` named (its keys or predicate, and its salt): the
        ledger deletes its statement and records that it did (``ErasureForgotten``); the chain keeps
        the commitment, which only a holder of the statement can check a bundle against. Done for
        every request once it is done (``forget_done_erasures``, after each vacuum); this does it now
        (a request still open goes on: its files are still deleted by the normal rules). A 0.7
        request, whose event holds its predicate, has that field redacted in place."""
        state = self.runner.refresh()
        r = erasure_reader.request_of(state, request_id)
        if r.statement == "":
            self._redact(r)
        else:
            self.runner.run(ForgetErasure(r.request_id))
            self.store.forget_statement(r.statement)
        return self.erasure(request_id)

    def forget_done_erasures(self) -> list[str]:
        """Forget the statement of every request that is done (every file of its set deleted or found
        absent), and delete statements no request names (left by a crash between keeping one and
        recording its request, over an hour ago). The vacuum calls it after each run; returns the ids
        of the requests forgotten."""
        state = self.runner.refresh()
        forgotten = []
        for r in list(state.erasures.requests.values()):
            if r.forgotten is None and r.statement and self.erasure(r.request_id).done:
                self.forget_erasure(r.request_id)
                forgotten.append(r.request_id)
        named = {r.statement for r in state.erasures.requests.values()}
        hour_ago = to_micros(self.now()) - 3600 * 1_000_000
        for digest, kept_at in self.store.statement_digests():
            if digest not in named and kept_at < hour_ago:
                self.store.forget_statement(digest)
        return forgotten

    def _redact(self, r: Request) -> None:
        """A 0.7 request's predicate, forgotten: its event's payload is stored without it, and the
        fact (with the redacted payload's digest, which ``verify`` holds the row to) recorded first."""
        [row] = list(self.store.read(r.seq - 1, upto=r.seq))
        redacted = redaction(row[7])
        if r.forgotten is None:
            self.runner.run(ForgetErasure(r.request_id, hashlib.sha256(redacted.encode()).hexdigest()))
        if redacted != row[7]:
            self.store.redact(r.seq, redacted)
        self.runner.refresh(force=True)

    def erasures(self, *, open: bool | None = None) -> list[ErasureStatus]:
        """Every erasure request, oldest first (``open=True``: those not done yet; ``False``: those
        done): each one's tables, when, its files and which are deleted, and for an open one by when
        its last file will be deleted under today's retentions, marks and pins (``due``) or what
        holds it (``pending``)."""
        state = self.runner.refresh()
        found = [self.erasure(r.request_id) for r in sorted(state.erasures.requests.values(), key=lambda r: r.seq)]
        return found if open is None else [s for s in found if s.done != open]

    def fence_erasure(self, name: str, *, request_id: str | None = None) -> ErasureFence:
        """Hold commits and restores of the live table ``name`` off while an erasure request is being
        recorded (R25): an engine that lost its race with other writers once scans the last commits,
        rewrites what holds the rows and records the request (``request_erasure(...,
        request_id=fence.request_id)``, which lifts it) with nothing landing in between. Writers wait
        (``commit_write``); the fence lasts ``FENCE_SECONDS`` unless renewed (``renew``), so one whose
        engine died lets them through soon. Another request's fence is ``ErasureInProgress``. As a
        context manager, it is lifted on leaving the block if the request was not recorded."""
        request_id = _new_id() if request_id is None else request_id
        until = self.runner.run(lambda now: FenceErasure(request_id, name, now))
        return ErasureFence(self, names.table_name(name), request_id, from_micros(until))

    def check_erasure(self, tables: str | Mapping[str, str | None], *, reason: str, predicate: str | None = None,
                      keys: Sequence[int] | Sequence[str] | None = None) -> None:
        """Refuse, typed, what ``request_erasure`` would refuse of the request itself (a name that is
        not one, a reason not 1 to 10,000 characters of text without NUL, a predicate not 1 to
        1,000,000, keys that are not whole numbers or text of one kind, a NULL, none or over a
        million), before an engine rewrites anything: ``spark_ops.erase`` asks this first."""
        check_erasure_request(tables, reason, predicate=predicate, keys=keys)

    def _holders(self, tables: tuple[str, ...], wanted: tuple[tuple[str, int], ...]) -> tuple[
            tuple[tuple[str, int], ...], tuple[tuple[str, tuple[str, ...]], ...]]:
        """The instances a request of ``tables`` covers (with their current version numbers) and, for
        each wanted key, the kept versions whose files list it with that size: read here, from the
        stored lists, for the core to check (it holds no file lists)."""
        state = self.runner.refresh()
        seen = tuple(pair for name in tables for pair in considered(state, name))
        sizes = {key: size for key, size in wanted if isinstance(key, str)}
        holders: dict[str, list[str]] = {}
        read: dict[str, list[tuple[str, int]]] = {}
        for table_id, _head in seen:
            for v in state.data.history(table_id):
                if state.data.is_expired(v):
                    continue
                for path, size in self._version_files(state, v, read):
                    key = f"{table_id}/{path}"
                    if sizes.get(key) == size:
                        holders.setdefault(key, []).append(version_key(table_id, v.number))
        return seen, tuple((k, tuple(found)) for k, found in sorted(holders.items()))

    def erasure(self, request_id: str) -> ErasureStatus:
        """Where erasure request ``request_id`` stands (R25): each file of its set deleted (by which
        vacuum run, when: from the receipts) or pending, with why and until when (the retention that
        keeps a version or a dropped instance holding it, a pin, a purge due, a folder still named)."""
        state = self.runner.refresh()
        return erasure_reader.status(self.store, state, request_id, self.warehouse,
                                     lambda v: self._version_files(state, v), to_micros(self.now()))

    def prove_erasure(self, request_id: str, *, checkpoint: Checkpoint | None = None) -> ErasureProof:
        """One bundle proving erasure request ``request_id``: the request, its erasure set, each file's
        deletion proof (or why there is none yet) and, with a ``checkpoint`` taken after the request,
        the request event's inclusion proof. ``bundle.write(path)``; checked offline by ``python -m
        ledger.audit prove-erasure BUNDLE EXPORT CHECKPOINT``, which refuses it until every file is
        proven deleted."""
        state = self.runner.refresh()
        include = None if checkpoint is None else (lambda seq: self.inclusion_proof(seq, checkpoint))
        return erasure_reader.prove(self.store, state, request_id, self.warehouse, include)

    def _start_command(self, retention: Duration | None, database: str | None, limit: int | None,
                       override_floor: bool, lease_seconds: int, uncommitted: bool, only_uncommitted: bool,
                       grace: Duration | None, run_id: str | None = None) -> StartVacuum:
        """The start, checked; its ``now`` (0 here) is the ledger's when it is decided (``attrs.evolve``)."""
        seconds = None if retention is None else int(parse_duration(retention).total_seconds())
        grace_seconds = DEFAULT_GRACE_SECONDS if grace is None else \
            int(parse_duration(grace, "the straggler grace period").total_seconds())
        for name, flag in (("uncommitted", uncommitted), ("only_uncommitted", only_uncommitted)):
            if not isinstance(flag, bool):
                raise InvalidArgument(f"{name} must be True or False, got {flag!r}")
        return StartVacuum(new_run_id() if run_id is None else names.run_id(run_id), 0, self.warehouse, seconds,
                           override_floor, database, limit, lease_seconds, uncommitted or only_uncommitted,
                           only_uncommitted, grace_seconds)

    # --- queries --------------------------------------------------------------------------

    def _view(self, table_id: str) -> TableInstance:
        """An instance as of the state we hold (a command's result: that state includes it)."""
        state = self.runner.held
        instance = state.tables.instance(table_id)
        assert instance is not None  # the command that named it was decided on this state
        return TableInstance.of(state, instance, self._root(state))

    def event_count(self) -> int:
        """How many events the log holds now."""
        return self.store.count()

    def outcome(self, attempt: str) -> bool:
        """Whether the command an ``OutcomeUnknown`` named (its ``attempt``) was recorded (R18): on
        a shared store, a command whose answer was lost while the server stayed away. Ask once the
        server is back, and retry the command only if this says False."""
        if not isinstance(attempt, str) or not attempt:
            raise InvalidArgument(f"an attempt is the id an OutcomeUnknown gives (its .attempt), not {attempt!r}")
        return self.store.attempt_landed(attempt)

    def history(self, name: str | None = None, *, table_id: str | None = None, actor: str | None = None,
                since: datetime | None = None, until: datetime | None = None,
                type: str | Iterable[str] | None = None, pins: bool = False) -> History:
        """The events that match every filter given, oldest first, each with what happened in words
        (``entry.text``): by table name (every instance that ever bore it, across renames) or id,
        by actor, within ``since``..``until`` (inclusive), of an event type (or several).

        Pins (``PinTaken``, ``PinRenewed``, ``PinReleased``: every ``read_table`` and ``attach``
        takes one) are left out unless ``pins=True``, or ``type`` names them.

        Streamed: iterating reads the log in batches, never whole. ``len()`` counts the matches,
        ``.last(n)`` (or ``[-n:]``) gives the latest ``n`` and ``[-1]`` the latest, each holding
        no more than it returns. Arguments are checked when called, so a bad filter fails here
        rather than in your loop.
        """
        return histories.history(self.runner, name, table_id=table_id, actor=actor, since=since, until=until,
                                 type=type, pins=pins)

    def maintain(self, *, progress: Callable[[int, int], None] | None = None) -> MaintainReport:
        """Store the states no command needs (R22): one at least every ``history_every`` events
        (``as_of`` folds on from the nearest before it), and one at the log's head, which the next
        open reads. Each costs what changed since the one before. In this process, to the end of
        the call, and once at a time across processes and hosts: a second caller meanwhile is told
        who holds it and until when (``done`` False) and does nothing. Killed, it leaves each stored
        state whole or absent, and the next goes on: at once on the same host (the killed process is
        no more), from another once its lease has ended. On PostgreSQL a host whose clock the server
        refuses is refused (``ClockSkew``), as its commands are. ``progress(events folded, events to
        fold)`` is called as it goes."""
        return maintenance.maintain(self.runner.store, self.runner.cache, history_every=self.runner.history_every,
                                    holder=Holder.here(self.actor), now=self.runner.reading, progress=progress)

    def verify(self, *, against: Checkpoint | None = None, public_key: KeyLike | None = None) -> VerifyReport:
        """Check the file, recompute the hash chain, refold the whole log from nothing, and compare
        every stored state with the fold at its event (one that disagrees: all are discarded, and the
        present's rebuilt).

        With ``against`` (a checkpoint kept outside the ledger) it also proves the log still begins
        with exactly the events the checkpoint covered; with ``public_key`` it first checks the
        checkpoint's signature. Raises ``LedgerCorrupt`` naming the first bad event and why
        (``CheckpointInvalid`` for a checkpoint that is not good); returns counts when all is well.
        """
        return verifier.verify(self.runner, against=against, public_key=public_key)

    def checkpoint(self, *, key: KeyLike | None = None) -> Checkpoint:
        """The log's head now (seq, time, head hash, Merkle root), to keep outside the ledger
        (``to_json()``); signed if ``key`` (an Ed25519 private key or its PEM file) is given."""
        self.runner.refresh()
        return proofs.checkpoint(self.store, key=key)

    def inclusion_proof(self, seq: int, checkpoint: Checkpoint) -> InclusionProof:
        """The RFC 6962 audit path proving event ``seq`` is one of those ``checkpoint`` covers
        (``proof.verify(checkpoint)``)."""
        return proofs.inclusion_proof(self.store, seq, checkpoint)

    def export(self, path: str | os.PathLike[str], *, format: str = "jsonl", overwrite: bool = False) -> ExportReport:
        """Write every event, with its seq and hash, to ``path`` (``jsonl`` or ``parquet``): with a
        checkpoint, all the offline verifier (``python -m ledger.audit verify``) needs.

        An existing file is replaced only with ``overwrite=True``, and the ledger's own files never."""
        exports.check_format(format)
        out = outputs.target(path, "export", overwrite=overwrite, protected=outputs.ledger_files(self.path))
        head = self.store.head()[0]
        return exports.write(self.store.read(0, upto=head, with_hash=True), out, format)

    def as_of(self, *, seq: int | None = None, time: datetime | None = None) -> AsOf:
        """The catalog as it was after event ``seq``, or after every event at or before ``time``
        (R17): a read-only view answering the same queries as the ledger (tables, dropped tables,
        watermarks, retention, versions, marks, open writes), equal to the fold of the log up to
        that point. It reads through this ledger (it borrows purged instances from the present):
        use it while the ledger is open."""
        if (seq is None) == (time is None):
            raise InvalidArgument("as_of needs exactly one of seq= (an event number) or time= (an aware datetime)")
        head = self.runner.refresh().seq
        if seq is not None:
            if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
                raise InvalidArgument(f"seq must be a whole number >= 0, got {seq!r}")
            if seq > head:
                raise InvalidArgument(f"the log has {head} events; there is no event #{seq} to look back to")
            target = seq
        else:
            if not isinstance(time, datetime):
                raise InvalidTime(f"time must be an aware datetime, got {type(time).__name__} {time!r}")
            target = self.store.seq_at(to_micros(time))
        return AsOf(self.store, self.runner.cache.state_at(target), self._recorded_root)


class Pin:
    """A pin you hold (``Ledger.pin``): its fields are a ``PinView``'s; ``renew`` extends it,
    ``release`` ends it, and as a context manager it is released on leaving the block."""

    def __init__(self, ledger: Ledger, view: PinView) -> None:
        self._ledger = ledger
        self.view = view

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)

    def __repr__(self) -> str:
        return f"<Pin {self.view.id} on {self.view.table} version {self.view.version} until " \
               f"{self.view.expires_at.isoformat()}>"

    def renew(self) -> Pin:
        self.view = self._ledger.renew_pin(self.view.id)
        return self

    def release(self) -> Pin:
        self.view = self._ledger.release_pin(self.view.id)
        return self

    def __enter__(self) -> Pin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ErasureFence:
    """A fence an erasure's engine holds on a table (``Ledger.fence_erasure``): ``renew`` extends it
    by ``FENCE_SECONDS`` from now, ``lift`` ends it (the request recorded with its ``request_id``
    lifts it too); as a context manager it is lifted on leaving the block."""

    def __init__(self, ledger: Ledger, table: str, request_id: str, until: datetime) -> None:
        self._ledger, self.table, self.request_id, self.until = ledger, table, request_id, until

    def __repr__(self) -> str:
        return f"<ErasureFence of request {self.request_id} on {self.table} until {self.until.isoformat()}>"

    def renew(self) -> ErasureFence:
        until = self._ledger.runner.run(lambda now: FenceErasure(self.request_id, self.table, now))
        self.until = from_micros(until)
        return self

    def lift(self) -> bool:
        """End the fence now; False if it was not held any more (the request recorded, or run out)."""
        return bool(self._ledger.runner.run(LiftErasureFence(self.request_id, self.table)))

    def __enter__(self) -> ErasureFence:
        return self

    def __exit__(self, *exc: object) -> None:
        self.lift()


_T = TypeVar("_T")


def copy_ledger(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> CopyReport:
    """Copy the ledger at ``source`` into a new (or empty) one at ``destination``, either a file or a
    ``postgresql://`` URL, event for event with hashes unchanged (R18): a checkpoint taken before
    verifies against the copy. Refuses a destination that holds events."""
    try:
        src = open_store(_path_argument(source), create=False)
    except NoLedgerYet as exc:
        raise LedgerNotFound(str(exc)) from None
    try:
        dst = open_store(_path_argument(destination), create=True)
        try:
            return copies.copy_ledger(src, dst)
        finally:
            dst.close()
    finally:
        src.close()


FENCE_WAIT_SECONDS = 300.0
"""How long a commit or a restore waits for an erasure's fence to lift (real time) before it says
``ErasureInProgress``: the engine holds one only to scan and rewrite the last commits, and renews it
while it works; one whose process died runs out within ``core.erasures.FENCE_SECONDS``."""


def _past_fences(run: Callable[[], _T]) -> _T:
    """``run()``, again every fifth of a second while an erasure's fence holds the table (R25), for up
    to ``FENCE_WAIT_SECONDS``: a writer waits for the request to be recorded, as a DML statement waits
    for a table's lock, instead of losing its write."""
    deadline = time.monotonic() + FENCE_WAIT_SECONDS
    while True:
        try:
            return run()
        except ErasureInProgress:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def _lease_seconds(lease: Duration, what: str) -> int:
    """A lease's length: a duration (``"6h"``, seconds, a timedelta); a bad one is ``InvalidArgument``
    (it is not a retention, so not ``InvalidRetention``)."""
    return int(parse_duration(lease, what, InvalidArgument).total_seconds())


def _pairs(files: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    """``(path, size)`` pairs as the core checks them (anything else is refused there, typed)."""
    if isinstance(files, (str, bytes)) or not isinstance(files, Iterable):
        raise InvalidArgument(f"files must be (path, size) pairs, got {type(files).__name__}")
    return tuple(tuple(f) if isinstance(f, (list, tuple)) else f for f in files)  # type: ignore[misc]


def _new_id() -> str:
    """A fresh id: 16 hex digits, 64 random bits. ``uuid4().hex[:16]`` gave the same shape with 60
    (a fixed version digit) and cost 6 us to ``token_hex``'s 1.5 us, a twentieth of a command's Python."""
    return secrets.token_hex(8)


def _default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def _path_argument(path: object) -> str:
    """A ledger path must be text or a path object naming a file; anything else is a typed refusal."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise InvalidArgument(f"the ledger path must be text or a pathlib.Path, such as 'tenant.db', "
                              f"got {type(path).__name__} {path!r}")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise InvalidArgument(f"the ledger path must be text, got {type(text).__name__} {text!r}")
    if not text.strip():
        raise InvalidArgument("the ledger path is empty; give a file name such as 'tenant.db' or ':memory:'")
    if "\x00" in text:
        raise InvalidArgument(f"the ledger path {text!r} contains a NUL character, which no file name can hold")
    return text


def _root_argument(root: object) -> str | None:
    if root is None:
        return None
    if isinstance(root, bytes) or not isinstance(root, (str, os.PathLike)):
        raise InvalidArgument(f"the warehouse must be a folder path or a URI such as 's3://bucket/prefix', "
                              f"got {type(root).__name__} {root!r}")
    text = os.fspath(root)
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        raise InvalidArgument(f"the warehouse {text!r} is not a usable folder path or URI")
    return text


def _record_root(store: Store, warehouse: str | None) -> str:
    """The root recorded when the ledger was first opened (recording it now if this is that open)."""
    if store.path == ":memory:":
        return _normalise_root(warehouse) if warehouse is not None else \
            tempfile.mkdtemp(prefix="retention-ledger-warehouse-")
    recorded = store.get_meta("warehouse")
    if recorded is None:  # a new ledger (another process may be creating it too: first one wins)
        if warehouse is None and is_url(store.path):
            _record_root_missing(store.path)
        recorded = store.set_meta_once(
            "warehouse", DEFAULT_WAREHOUSE if warehouse is None else _normalise_root(warehouse))
    return recorded


def _record_root_missing(where: str) -> None:
    raise InvalidArgument(f"{where} holds no ledger yet, and a new one that several hosts may share needs its "
                          "warehouse root: give warehouse= ('s3://bucket/prefix', or a folder every host sees; "
                          "--warehouse on the command line); nothing was created")


def _normalise_root(root: str) -> str:
    if is_uri(root):
        return root.rstrip("/")
    return str(Path(root).expanduser().resolve())
