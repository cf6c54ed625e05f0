"""A ledger's tables by name in a Spark session (``attach``, ``refresh``, ``detach``).

Each live table is a view ``database.table`` over exactly the files of one version (``text``),
put in Spark's session catalog (``spark_catalog``). Each version a view names is pinned (R21)
while it is attached, so no vacuum deletes files under a query.

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
from datetime import datetime, timedelta
from typing import Any, Iterable

import attrs
from pyspark.sql import SparkSession

from ledger import (
    InvalidArgument, InvalidName, Ledger, LedgerError, Pin, PinRefused, TableDataMissing, TableNotFound,
    VersionExpired, VersionNotFound,
)
from ledger import Change, TableInstance, TableVersion

from ..executor import fs
from ..executor.storage import storage_for
from ..tables import check_filesystem
from . import functions
from .spark_catalog import SparkCatalog
from .text import check_globbable, files_relation, folder_relation, view_text

ATTACH_PIN_LEASE = timedelta(hours=1)
"""The lease of the pins an attachment holds unless told otherwise; ``refresh`` renews them, and so
does any change followed once a third of the lease has passed."""
RETRIES = 3
"""How many times a sync reads the ledger again after another process changed it under the pins."""

NOTHING_YET = "nothing written to it yet"

log = logging.getLogger("spark_ops.attach")


@attrs.frozen
class Named:
    """What one Spark name shows: an instance's version (None: a table written before versions,
    read from its folder), and the pin that holds it (None once it ran out: pinned anew)."""
    table_id: str
    version: int | None
    pin_id: str | None


class Attachment:
    """One ledger's names in one Spark application: what each shows, the pins that hold them, and
    the functions; kept in step with the ledger by ``sync``."""

    def __init__(self, spark: SparkSession, ledger: Ledger, database: str | None, lease: Any) -> None:
        self.spark = spark
        self.ledger = ledger
        self.database = database
        self.lease = lease
        self.catalog = SparkCatalog(spark, owner=ledger.path)
        self.functions = functions.Functions(spark)
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
            replaced += [self._remove(n) for n in gone]
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
        releases, whatever happens here)."""
        fresh = self.catalog.absent([n for n in names if n not in self.named])
        nameable = self._nameable(names, live)
        replaced.extend(self.named.pop(n) for n in names if n not in nameable and n in self.named)
        names = nameable
        versioned = [n for n in names if live[n].current_version is not None]
        pins = {p.table: p for p in self.ledger.pin_tables(versioned, lease=self.lease)} if versioned else {}
        if pins and self.renewed_at is None:
            self.renewed_at, self.lease_seconds = self.ledger.now(), next(iter(pins.values())).lease.total_seconds()
        try:
            for name in names:
                pin = pins.get(name)
                shown = self._show(live[name], pin, new=name in fresh)
                pins.pop(name, None)  # shown, its pin is the name's; not shown, it is released below
                if name in self.named:
                    replaced.append(self.named.pop(name))
                if shown is not None:
                    self.named[name] = shown
                    self.unnamed.pop(name, None)
                elif pin is not None:
                    self._release([pin.id])
        except BaseException:
            self._release([p.id for p in pins.values()])  # taken, not shown (the one that failed among them)
            raise

    def _nameable(self, names: list[str], live: dict[str, TableInstance]) -> list[str]:
        """Those of ``names`` Spark can show (their databases made here if need be). The others get
        no name, and no pin (which every sync would take and release again, an append each): a
        table in a database Spark reserves (``global_temp``), a version in a folder no glob can walk."""
        allowed = []
        for name in names:
            database = name.split(".", 1)[0]
            try:
                if live[name].current_version is not None:
                    check_globbable(live[name].location, name)
                if self.catalog.ensure_database(database):
                    self.created_databases.add(database)
            except (InvalidArgument, InvalidName) as exc:
                self._unnamed(name, str(exc))
                continue
            allowed.append(name)
        return allowed

    def _show(self, table: TableInstance, pin: Pin | None, *, new: bool) -> Named | None:
        """Put the view of what ``pin`` holds (no pin: a table written before versions, read from
        its folder as ``read_table`` does). None, and the reason kept, when it cannot be named."""
        database, short = table.name.split(".", 1)
        if pin is None:
            if storage_for(self.ledger.warehouse).absent(table.location):
                return self._unnamed(table.name, NOTHING_YET)  # asking Spark would cost a failed inference
            try:
                self.catalog.put(database, short, f"SELECT * FROM {folder_relation(table.location)}", None, new=new)
            except Exception as exc:  # Spark's AnalysisException: nothing there to read yet
                if "PATH_NOT_FOUND" not in str(exc) and "UNABLE_TO_INFER_SCHEMA" not in str(exc):
                    raise
                return self._unnamed(table.name, NOTHING_YET)
            return Named(table.id, None, None)
        # The pin says which instance and version: another process may have moved the name since
        # ``table`` was read, and the view must show exactly what is held.
        location = self.ledger.instance(pin.table_id).location
        versions = self.ledger.versions(table_id=pin.table_id)
        version = next(v for v in versions if v.number == pin.version)
        try:
            text = self._text(table.name, location, version, versions)
        except (InvalidArgument, TableDataMissing) as exc:
            return self._unnamed(table.name, str(exc))
        self.catalog.put(database, short, text, version.schema, new=new)
        return Named(pin.table_id, version.number, pin.id)

    def _text(self, name: str, location: str, version: TableVersion, versions: list[TableVersion]) -> str:
        files = [entry.path for entry in version.files]
        missing = fs.first_missing(self.ledger.warehouse, [f"{location}/{f}" for f in files])
        if missing is not None:  # a brace glob skips what is not there: fewer rows, never an error
            raise TableDataMissing(f"{name} version {version.number} names {missing}, which is not there")
        if version.schema is None:  # adopted files: Spark infers the columns, as read_table lets it
            return f"SELECT * FROM {files_relation(location, files, name)}"
        merged = any(v.schema != version.schema for v in versions if v.number < version.number)
        return view_text(location, files, version.schema, merge_schema=merged, table=name)

    def _unnamed(self, name: str, why: str) -> Named | None:
        database, short = name.split(".", 1)
        if self.catalog.ours(database, short):
            self.catalog.drop(database, short)
        if self.unnamed.get(name) != why and why != NOTHING_YET:  # a table just made is about to be written
            log.warning("%s has no name in Spark SQL: %s (read_table says more)", name, why)
        self.unnamed[name] = why
        return None

    def _remove(self, name: str) -> Named:
        database, short = name.split(".", 1)
        if self.catalog.ours(database, short):
            self.catalog.drop(database, short)
        return self.named.pop(name)

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
                names = None if change.everything else self._touched(change)
                if names is None or names:
                    self.sync(names)
                self._renew_if_due()
            except Exception as exc:  # the change landed; only the names lag behind it
                log.warning("Spark's names did not follow a change to the ledger (%s): refresh(spark, ledger) "
                            "makes them show it", exc)

    def _touched(self, change: Change) -> set[str]:
        databases = change.databases if self.database is None else change.databases & {self.database}
        names = {n for n, shown in self.named.items()
                 if shown.table_id in change.table_ids or n.split(".", 1)[0] in databases}
        for database in databases:
            names |= {t.name for t in self.ledger.tables(database=database)}
        for table_id in change.table_ids - {s.table_id for s in self.named.values()}:
            table = self.ledger.instance(table_id)
            if table.is_live and self.database in (None, table.database):
                names.add(table.name)
        return names

    def _renew_if_due(self) -> None:
        """Renew the pins once a third of their lease has passed (``refresh`` always does)."""
        if self.renewed_at is not None and \
                (self.ledger.now() - self.renewed_at).total_seconds() > self.lease_seconds / 3:
            self.renew()

    # --- refresh and detach --------------------------------------------------------------------

    def renew(self) -> None:
        """Renew every pin the names hold; one that ran out is taken anew by the next sync."""
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
            for view in views:
                if not view.live:
                    name = held[view.id]
                    self.named[name] = attrs.evolve(self.named[name], pin_id=None)

    def refresh(self) -> list[str]:
        with self._lock:
            self.renew()
            self.sync()
            return sorted(self.named)

    def detach(self) -> list[str]:
        with self._lock:
            self._unwatch()
            names = sorted(self.named)
            removed: list[Named] = []
            try:
                removed += [self._remove(name) for name in names]
                for database in sorted(self.created_databases):
                    self.catalog.drop_database_if_empty(database)
                self.catalog.close()
                self.functions.drop()
            finally:
                self._release([s.pin_id for s in [*removed, *self.named.values()] if s.pin_id is not None])
                self.named.clear()
            return names

    def release_all(self) -> None:
        """At the process's end: stop following, let every pin go."""
        self._unwatch()
        self._release([s.pin_id for s in self.named.values() if s.pin_id is not None])


_attached: dict[int, Attachment] = {}
"""The attachment of each Spark application (its views are in the application's catalog, which its
sessions share): one ledger at a time, so no two ledgers' names or functions meet."""


def attach(spark: SparkSession, ledger: Ledger, *, database: str | None = None, lease: Any = None) -> list[str]:
    """Make every live table of ``ledger`` (of ``database``, if given) a name in ``spark``'s SQL:
    ``spark.sql("SELECT * FROM sales.orders")``, ``spark.table(...)``, ``SHOW TABLES IN sales``.
    Each name reads exactly the files of the version it shows, with Spark's own Parquet reader,
    and that version is pinned (R21) for ``lease`` (an hour by default, at most 7 days; renewed
    by ``refresh``). Changes made through ``ledger`` are followed at once; others' after
    ``refresh``. Writes stay ``write_table``. Returns the names attached.

    Attaching the same ledger again changes ``database`` and ``lease`` and refreshes; another
    ledger is refused while one is attached (``InvalidArgument``: ``detach`` it first). A name
    Spark holds that is not this ledger's is never replaced (``TableExists``)."""
    key = id(spark.sparkContext)
    found = _attached.get(key)
    if found is not None and found.ledger is not ledger:
        raise InvalidArgument(f"another ledger ({found.ledger.path}) is attached to this Spark application: "
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
    the pins of what is shown. Returns the names attached."""
    found = _attached.get(id(spark.sparkContext))
    if found is None or found.ledger is not ledger:
        raise TableNotFound("this ledger is not attached to this Spark session: attach(spark, ledger) first")
    return found.refresh()


def detach(spark: SparkSession, ledger: Ledger) -> list[str]:
    """Remove the ledger's names from ``spark`` and release their pins. Returns the names removed."""
    key = id(spark.sparkContext)
    found = _attached.get(key)
    if found is None or found.ledger is not ledger:
        return []
    del _attached[key]
    return found.detach()


@atexit.register
def _release_at_exit() -> None:
    """A process that ends holds nothing: its pins are released rather than left to their lease."""
    for attachment in list(_attached.values()):
        with contextlib.suppress(Exception):
            attachment.release_all()
