"""A ledger's tables by name in a Spark session (``attach``, ``refresh``, ``detach``).

Each live table is a view ``database.table`` over exactly the files of one version (``text``),
put in Spark's session catalog (``spark_catalog``). Each version a view names is pinned (R21)
while it is attached, so no vacuum deletes files under a query.

An attachment is one session's: the session's temporary functions are its own, while the views
go in a catalog that the session may share (with the other sessions of a Spark application, or
of a Spark Connect server). Each view says whose it is, so one session's attach never replaces or
drops another's (``spark_catalog``).

Names follow the ledger: the attachment watches the ``Ledger`` it was given (``Ledger.watch``),
and after every change made through it (a write, an overwrite, a restore, a drop, an undrop)
re-points, adds or removes the names that change touched, before the call that made it returns.
What other processes change is seen after ``refresh``, which re-reads the whole catalog and
renews the pins, as a caching catalog does.

One way names change (``sync``): pin the versions to show (the ledger chooses them, in one
append), check their files are there, point the views at exactly what was pinned, then release
the pins of what the views showed before. A name is never shown without its pin.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import uuid
from datetime import datetime, timedelta
from typing import Any, Iterable

import attrs
from pyspark.sql import SparkSession

from ledger import (
    InvalidArgument, Ledger, LedgerError, Pin, PinRefused, TableDataMissing, TableNotFound,
    VersionExpired, VersionNotFound,
)
from ledger import Change, TableInstance, TableVersion

from ..executor import fs
from ..executor.stores import storage_for
from ..session import kind_of
from ..tables import check_filesystem
from . import functions
from .spark_catalog import SparkCatalog
from .views import View
from .text import VersionFiles, check_globbable, files_relation, folder_relation

ATTACH_PIN_LEASE = timedelta(hours=1)
"""The lease of the pins an attachment holds unless told otherwise; ``refresh`` renews them, and so
does any change followed once a third of the lease has passed."""
RETRIES = 3
"""How many times a sync reads the ledger again after another process changed it under the pins."""

NOTHING_YET = "nothing written to it yet"
EXIT_TIMEOUT = 10.0
"""Seconds a process that ends attached to a Spark Connect session gives the server to drop its
views (they outlive the process there); past that it ends anyway, and the views, which nothing
pins any more, are taken over by the next attach of the ledger."""

log = logging.getLogger("spark_ops.attach")


@attrs.frozen
class Named:
    """What one Spark name shows: an instance's version (None: a table written before versions,
    read from its folder), and the pin that holds it (None once it ran out: pinned anew)."""
    table_id: str
    version: int | None
    pin_id: str | None


@attrs.frozen
class Plan:
    """A name about to be shown: its view, and what it will show once the view is there."""
    view: View
    named: Named
    folder: bool = False  # read from its folder: Spark finding nothing there means nothing written yet


class Attachment:
    """One ledger's names in one Spark session: what each shows, the pins that hold them, and
    the functions; kept in step with the ledger by ``sync``."""

    def __init__(self, spark: SparkSession, ledger: Ledger, database: str | None, lease: Any) -> None:
        self.spark = spark
        self.ledger = ledger
        self.database = database
        self.lease = lease
        self.id = uuid.uuid4().hex
        self.catalog = SparkCatalog(spark, address=ledger.path, attachment=self.id)
        self.functions = functions.Functions(spark)
        self.storage = storage_for(ledger.warehouse)  # built once: a name's files are looked at on it
        self.named: dict[str, Named] = {}
        self.unnamed: dict[str, str] = {}
        """Live tables that have no name, and why (nothing written yet; files missing; files in
        different partition folders): looked at again by every full sync."""
        self.created_databases: set[str] = set()
        self.renewed_at: datetime | None = None  # when the pins were last renewed (or first taken)
        self.lease_seconds = ATTACH_PIN_LEASE.total_seconds()
        self._lock = threading.RLock()
        self._syncing = False  # read under the lock: only this thread's own pins can see it set
        self._unwatch = ledger.watch(self._follow)

    # --- the one way names change ------------------------------------------------------------

    def sync(self, names: Iterable[str] | None = None) -> None:
        """Make the names in ``names`` (None: every name) show what the ledger holds now. Another
        process may drop or overwrite a table between the read and the pins (the pins are then
        refused, all of them, and nothing changed): read again and retry."""
        with self._lock:
            self._syncing = True  # the pins taken here are not changes to follow
            try:
                for attempt in range(RETRIES):
                    try:
                        self._sync_once(None if names is None else set(names))
                        return
                    except (TableNotFound, VersionNotFound, VersionExpired, PinRefused):
                        if attempt == RETRIES - 1:
                            raise
            finally:
                self._syncing = False

    def _sync_once(self, names: set[str] | None) -> None:
        live = self._live(names)
        wanted = set(live) | set(self.named) if names is None else names
        gone = sorted(n for n in wanted if n in self.named and n not in live)
        moved = sorted(n for n in wanted if n in live and self._stale(n, live[n], full=names is None))
        replaced: list[Named] = []
        try:
            self._put(moved, live, replaced)
            if gone:
                self.catalog.drop(gone)
            replaced += [self.named.pop(name) for name in gone]
        finally:
            self._release([old.pin_id for old in replaced if old.pin_id is not None])
        self.functions.update(self.ledger, self.named, None if names is None else wanted)

    def _live(self, names: set[str] | None) -> dict[str, TableInstance]:
        """The live tables among ``names`` (None: all of them, of the attached database if one)."""
        if names is None:
            return {t.name: t for t in self.ledger.tables(database=self.database)}
        found = {}
        for name in names:
            try:
                table = self.ledger.table(name)
            except TableNotFound:
                continue
            if self.database in (None, table.database):
                found[name] = table
        return found

    def _stale(self, name: str, table: TableInstance, *, full: bool) -> bool:
        shown = self.named.get(name)
        if shown is None:  # a table with no name yet is looked at again by a full sync, or once written to
            return full or name not in self.unnamed or table.current_version is not None
        return shown.table_id != table.id or shown.version != table.current_version or \
            (shown.pin_id is None and table.current_version is not None)

    def _put(self, names: list[str], live: dict[str, TableInstance], replaced: list[Named]) -> None:
        """Show ``names``, adding what they showed before to ``replaced`` (whose pins the caller
        releases, whatever happens here). Every view goes to Spark in one ``put``: on Spark
        Connect a view is a round trip, and many go in one (``statements``)."""
        free, lost = self.catalog.claim(names, set(self.named), self._live_pins)
        if lost:
            log.warning("%s no longer shown by this session: another session took %s over, or replaced %s; "
                        "refresh(spark, ledger) after it detaches shows them here again", ", ".join(sorted(lost)),
                        "it" if len(lost) == 1 else "them", "it" if len(lost) == 1 else "them")
            replaced.extend(self.named.pop(n) for n in sorted(lost))
        nameable = self._nameable([n for n in names if n not in lost], live)
        replaced.extend(self.named.pop(n) for n in names if n not in nameable and n in self.named)
        names = nameable
        versioned = [n for n in names if live[n].current_version is not None]
        pins = {p.table: p for p in self.ledger.pin_tables(versioned, lease=self.lease)} if versioned else {}
        if pins and self.renewed_at is None:
            self.renewed_at, self.lease_seconds = self.ledger.now(), next(iter(pins.values())).lease.total_seconds()
        try:
            plans = {name: self._plan(live[name], pins.get(name)) for name in names}
            views = [p.view for p in plans.values() if isinstance(p, Plan)]
            errors = dict(zip((v.key for v in views), self.catalog.put(views, free)))
            self._release(self.catalog.abandoned)  # the pins of a session the server no longer has
            failure = self._shown(plans, errors, pins, replaced)
        except BaseException:
            self._release([p.id for p in pins.values()])  # taken, not shown
            raise
        self._release([p.id for p in pins.values()])  # taken for a name that could not be shown
        if failure is not None:
            raise failure

    def _shown(self, plans: dict[str, Plan | str], errors: dict[str, Exception | None], pins: dict[str, Pin],
               replaced: list[Named]) -> Exception | None:
        """Record what each name shows now that Spark did what it could; ``pins`` keeps the pins of
        the names not shown. Returns the first failure that is not just a name left without a
        view (the other names are recorded all the same, so a detach finds every view made)."""
        failure: Exception | None = None
        unnamed: dict[str, str] = {}
        for name, plan in plans.items():
            error = errors.get(name) if isinstance(plan, Plan) else None
            # A folder's view Spark refused because there is nothing in the folder to read yet: no name yet.
            if isinstance(plan, str) or (error is not None and plan.folder and (
                    "PATH_NOT_FOUND" in str(error) or "UNABLE_TO_INFER_SCHEMA" in str(error))):
                unnamed[name] = plan if isinstance(plan, str) else NOTHING_YET
                if name in self.named:
                    replaced.append(self.named.pop(name))
            elif error is not None:
                failure = failure or error  # what the name showed before is still shown, and held
            else:
                pins.pop(name, None)  # shown: its pin is the name's now
                if name in self.named:
                    replaced.append(self.named.pop(name))
                self.named[name] = plan.named
                self.unnamed.pop(name, None)
        self._unnamed(unnamed)
        return failure

    def _nameable(self, names: list[str], live: dict[str, TableInstance]) -> list[str]:
        """Those of ``names`` Spark can show (their databases made here if need be). The others get
        no name, and no pin (which every sync would take and release again, an append each): a
        table in a database Spark reserves (``global_temp``), a version in a folder no glob can walk."""
        unnamed: dict[str, str] = {}
        for name in names:
            if live[name].current_version is not None:
                try:
                    check_globbable(live[name].location, name)
                except InvalidArgument as exc:
                    unnamed[name] = str(exc)
        created, refused = self.catalog.ensure_databases(n.split(".", 1)[0] for n in names if n not in unnamed)
        self.created_databases |= created
        for name in names:
            if name not in unnamed and name.split(".", 1)[0] in refused:
                unnamed[name] = refused[name.split(".", 1)[0]]
        self._unnamed(unnamed)
        return [n for n in names if n not in unnamed]

    def _plan(self, table: TableInstance, pin: Pin | None) -> Plan | str:
        """The view of what ``pin`` holds (no pin: a table written before versions, read from its
        folder as ``read_table`` does), or why the name cannot be shown."""
        database, short = table.name.split(".", 1)
        if pin is None:
            if self.storage.absent(table.location):
                return NOTHING_YET  # asking Spark would cost a failed inference
            text = f"SELECT * FROM {folder_relation(table.location)}"
            return Plan(View(database, short, text, None, None), Named(table.id, None, None), folder=True)
        # The pin says which instance and version: another process may have moved the name since
        # ``table`` was read, and the view must show exactly what is held.
        location = self.ledger.instance(pin.table_id).location
        versions = self.ledger.versions(table_id=pin.table_id)
        version = next(v for v in versions if v.number == pin.version)
        try:
            text, files = self._text(table.name, location, version, versions)
        except (InvalidArgument, TableDataMissing) as exc:
            return str(exc)
        return Plan(View(database, short, text, version.schema, pin.id, files), Named(pin.table_id, version.number, pin.id))

    def _text(self, name: str, location: str, version: TableVersion,
              versions: list[TableVersion]) -> tuple[str, VersionFiles | None]:
        """The view's text over exactly the version's files, and the files with their recorded
        schema (None: not recorded), which the catalog may read another way (``spark_catalog``)."""
        files = tuple(entry.path for entry in version.files)
        missing = fs.first_missing(self.storage, [f"{location}/{f}" for f in files])
        if missing is not None:  # a brace glob skips what is not there: fewer rows, never an error
            raise TableDataMissing(f"{name} version {version.number} names {missing}, which is not there")
        if version.schema is None:  # adopted files: Spark infers the columns, as read_table lets it
            return f"SELECT * FROM {files_relation(location, files, name)}", None
        merged = any(v.schema != version.schema for v in versions if v.number < version.number)
        recorded = VersionFiles(location, files, version.schema, merged, name)
        return recorded.text(), recorded

    def _unnamed(self, why: dict[str, str]) -> None:
        """Leave each name in ``why`` without a view (its own dropped, if it had one), saying why."""
        if not why:
            return
        self.catalog.drop(why)
        for name, reason in why.items():
            if self.unnamed.get(name) != reason and reason != NOTHING_YET:  # a table just made is about to be written
                log.warning("%s has no name in Spark SQL: %s (read_table says more)", name, reason)
            self.unnamed[name] = reason

    def _live_pins(self) -> set[str]:
        """The ids of the ledger's live pins (another session's view is taken over only if its pin
        is not among them)."""
        return {p.id for p in self.ledger.pins()}

    def _release(self, pin_ids: list[str]) -> None:
        if pin_ids:
            with contextlib.suppress(LedgerError):
                self.ledger.release_pins(pin_ids)

    # --- following this process's changes ----------------------------------------------------

    def _follow(self, change: Change) -> None:
        """After each append through the attached ``Ledger``: sync the names it may have moved."""
        with self._lock:
            if self._syncing:
                return  # this thread's own pins
            try:
                names = None if change.everything else self.ledger.names_touched(
                    change, database=self.database, shown={n: s.table_id for n, s in self.named.items()})
                if names is None or names:
                    self.sync(names)
                if self.renewed_at is not None and \
                        (self.ledger.now() - self.renewed_at).total_seconds() > self.lease_seconds / 3:
                    self.renew()  # once a third of the pins' lease has passed (``refresh`` always renews)
            except Exception as exc:  # the change landed; only the names lag behind it
                log.warning("Spark's names did not follow a change to the ledger (%s): refresh(spark, ledger) "
                            "makes them show it", exc)

    # --- refresh and detach --------------------------------------------------------------------

    def renew(self) -> None:
        """Renew every pin the names hold. A pin that ended (its lease ran out, or an erasure request
        ended it: R25 wins over R21) holds nothing any more: its name is shown again at once, over
        what the ledger holds now, with a new pin."""
        with self._lock:
            held = {shown.pin_id: name for name, shown in self.named.items() if shown.pin_id is not None}
            if not held:
                return
            self._syncing = True
            try:
                views = self.ledger.renew_pins(list(held))
            finally:
                self._syncing = False
            self.renewed_at = self.ledger.now()
            ended = [held[view.id] for view in views if not view.live]
            for name in ended:
                self.named[name] = attrs.evolve(self.named[name], pin_id=None)
            if ended:
                self.sync(ended)

    def refresh(self) -> list[str]:
        with self._lock:
            self.renew()
            self.sync()
            return sorted(self.named)

    def detach(self) -> list[str]:
        with self._lock:
            self._unwatch()
            names = sorted(self.named)
            try:
                self._drop_views()
                self.functions.drop()
            finally:
                self._release([s.pin_id for s in self.named.values() if s.pin_id is not None])
                self.named.clear()
            return names

    def let_go(self) -> list[str]:
        """Stop following and let every pin go, leaving the views where they are (unheld: the
        next ``attach`` of this ledger takes them over). Returns the names shown."""
        with self._lock:
            self._unwatch()
            self._release([s.pin_id for s in self.named.values() if s.pin_id is not None])
            return sorted(self.named)

    def release_all(self) -> None:
        """At the process's end: stop following, let every pin go. On Spark Connect the views
        outlive the process (they are in the server's catalog): they are dropped too, if the
        session still runs and the server answers within ``EXIT_TIMEOUT``."""
        self.let_go()
        kind = kind_of(self.spark)
        if kind.catalog_outlives_process and not kind.ended():
            dropping = threading.Thread(target=self._drop_views, daemon=True)
            dropping.start()
            dropping.join(EXIT_TIMEOUT)

    def _drop_views(self) -> None:
        self.catalog.drop_all(sorted(self.named), self.created_databases)


_attached: dict[str, Attachment] = {}
"""The attachment of each Spark session: one ledger at a time, so no two ledgers' names or
functions meet in it."""


def attach(spark: SparkSession, ledger: Ledger, *, database: str | None = None, lease: Any = None) -> list[str]:
    """Make every live table of ``ledger`` (of ``database``, if given) a name in ``spark``'s SQL:
    ``spark.sql("SELECT * FROM sales.orders")``, ``spark.table(...)``, ``SHOW TABLES IN sales``.
    Each name reads exactly the files of the version it shows, with Spark's own Parquet reader,
    and that version is pinned (R21) for ``lease`` (an hour by default, at most 7 days; renewed
    by ``refresh``). Changes made through ``ledger`` are followed at once; others' after
    ``refresh``. Writes stay ``write_table``. Returns the names attached.

    Attaching the same ledger again changes ``database`` and ``lease`` and refreshes; another
    ledger is refused while one is attached to the session (``InvalidArgument``: ``detach`` it
    first); a Spark Connect session that has ended is ``SparkUnavailable``, nothing pinned. The views go in the session's catalog, which other sessions may share (those of the
    same Spark application; every session of a Spark Connect server) and so see: a name Spark
    holds that is not this ledger's, or that another session shows and holds, is never replaced
    or dropped (``TableExists``); one of this ledger's that nothing holds any more (its session
    ended without ``detach``) is taken over."""
    kind_of(spark).require_live()  # a session that ended (or whose server is down) pins nothing
    key = kind_of(spark).id  # its attachment holds the session, so its name is no other's while attached
    found = _attached.get(key)
    if found is not None and found.ledger is not ledger:
        raise InvalidArgument(f"another ledger ({found.ledger.path}) is attached to this Spark session: "
                              "detach(spark, that_ledger) first")
    if found is not None:
        found.database, found.lease = database, ATTACH_PIN_LEASE if lease is None else lease
        return found.refresh()
    check_filesystem(spark, ledger.warehouse)
    attachment = Attachment(spark, ledger, database, ATTACH_PIN_LEASE if lease is None else lease)
    try:
        attachment.sync()
    except BaseException:
        attachment.detach()
        raise
    _attached[key] = attachment
    return sorted(attachment.named)


def refresh(spark: SparkSession, ledger: Ledger) -> list[str]:
    """Show what the ledger holds now, changes from other processes and hosts included, and renew
    the pins of what is shown. Returns the names attached. A Spark Connect session that has ended
    is ``SparkUnavailable``, nothing renewed."""
    found = _attached.get(kind_of(spark).id)
    if found is None or found.ledger is not ledger:
        raise TableNotFound("this ledger is not attached to this Spark session: attach(spark, ledger) first")
    kind_of(spark).require_live()  # before any pin is renewed: a session its server no longer has shows nothing
    return found.refresh()


def detach(spark: SparkSession, ledger: Ledger) -> list[str]:
    """Remove the ledger's names from ``spark`` and release their pins. Returns the names removed.
    Of a Spark Connect session that has ended, only the pins can go: its views stay on the server,
    unheld, until the next ``attach`` of this ledger there takes them over (a warning says so)."""
    kind = kind_of(spark)
    found = _attached.get(kind.id)
    if found is None or found.ledger is not ledger:
        return []
    del _attached[kind.id]
    if kind.ended(ask=True):  # asked of the server: a session restarted under its client does not know yet
        names = found.let_go()
        log.warning("the Spark session had ended: released the pins of %d name(s); any views it left (a Spark "
                    "Connect server's outlive it) stay there, unheld, until this ledger is attached there again",
                    len(names))
        return names
    return found.detach()


def _release_at_exit() -> None:
    """A process that ends holds nothing: its pins are released rather than left to their lease."""
    for attachment in list(_attached.values()):
        with contextlib.suppress(Exception):
            attachment.release_all()


def _at_exit(call: Any) -> None:
    """Run ``call`` when the process ends, before Python stops its thread pools: the Spark Connect
    client sends and releases its requests through one (``cannot schedule new futures after
    interpreter shutdown`` at ``atexit``, and the views stayed on the server). Python's own
    ``threading._register_atexit`` is what ``concurrent.futures`` uses for that; where there is
    none, ``atexit``."""
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        atexit.register(call)
    else:
        register(call)


_at_exit(_release_at_exit)  # after ``statements`` imported concurrent.futures: run before its own exit
