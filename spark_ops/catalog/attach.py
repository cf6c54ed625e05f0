"""A ledger's tables by name in a Spark session (``attach``, ``refresh``, ``detach``).

Each live table is a view ``database.table`` over exactly the files of one version (``text``),
put in Spark's session catalog (``spark_catalog``). Each version a view names is pinned (R21)
while it is attached, so no vacuum deletes files under a query.

Names follow the ledger: the attachment watches the ``Ledger`` it was given (``Ledger.watch``),
and after every change made through it (a write, an overwrite, a restore, a drop, an undrop)
re-points, adds or removes the names that change touched, before the call that made it returns.
What other processes change is seen after ``refresh``, which re-reads the whole catalog and
renews the pins, as a caching catalog does.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
from datetime import timedelta
from typing import Any, Iterable

import attrs
from pyspark.sql import SparkSession

from ledger import Ledger, LedgerError, PinRefused, TableExists, TableNotFound, VersionExpired, VersionNotFound
from ledger.views import Change, TableInstance

from ..tables import check_filesystem
from . import functions
from .spark_catalog import SparkCatalog
from .text import files_relation, folder_relation, view_text

ATTACH_PIN_LEASE = timedelta(hours=1)
"""The lease of the pins an attachment holds unless told otherwise; ``refresh`` renews them."""

RETRIES = 3
"""How many times a sync reads the ledger again after another process changed it under the pins."""

log = logging.getLogger("spark_ops.attach")


@attrs.frozen
class Named:
    """What one Spark name shows: an instance's version (None: a table written before versions,
    read from its folder), and the pin that holds it."""
    table_id: str
    version: int | None
    pin_id: str | None


class Attachment:
    def __init__(self, spark: SparkSession, ledger: Ledger, database: str | None, lease: timedelta | Any) -> None:
        self.spark = spark
        self.ledger = ledger
        self.database = database
        self.lease = lease
        self.catalog = SparkCatalog(spark)
        self.named: dict[str, Named] = {}
        self.empty: set[str] = set()
        """Instances with nothing to read yet (no version, no files): looked at again by a full sync
        (refresh) or their first version, not on every change to them."""
        self.created_databases: set[str] = set()
        self._lock = threading.RLock()
        self._syncing = False
        self._unwatch = ledger.watch(self._follow)
        self.functions = functions.Functions(spark)

    # --- what the ledger holds -------------------------------------------------------------

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

    # --- the one way names change ------------------------------------------------------------

    def sync(self, names: Iterable[str] | None = None) -> None:
        """Make the names in ``names`` (None: every name) show what the ledger holds now: pin the
        versions to show, point the views at them, then release the pins of what they showed.
        Another process may drop or overwrite a table between the read and the pins (the pins are
        then refused, all of them, and nothing changed): read again and retry."""
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
        replaced = self._put(moved, live) + [self._remove(n) for n in gone]
        self._release([old.pin_id for old in replaced if old.pin_id is not None])
        self.functions.update(self.ledger, self.named, None if names is None else wanted)

    def _stale(self, name: str, table: TableInstance, *, full: bool) -> bool:
        shown = self.named.get(name)
        if shown is None:
            return full or table.id not in self.empty or table.current_version is not None
        return shown.table_id != table.id or shown.version != table.current_version

    def _put(self, names: list[str], live: dict[str, TableInstance]) -> list[Named]:
        """Show ``names``; returns what they showed before."""
        fresh = self._fresh([n for n in names if n not in self.named])
        versioned = [n for n in names if live[n].current_version is not None]
        pins = {p.table: p for p in self.ledger.pin_tables(versioned, lease=self.lease)} if versioned else {}
        replaced = []
        for name in names:
            pin = pins.pop(name, None)
            try:
                shown = self._show(live[name], pin, new=name in fresh)
            except BaseException:
                self._release([p.id for p in ([pin] if pin else []) + list(pins.values())])
                raise
            if name in self.named:
                replaced.append(self.named.pop(name))
            if shown is not None:
                self.named[name] = shown
        return replaced

    def _fresh(self, names: list[str]) -> set[str]:
        """Which of ``names`` Spark's catalog does not hold yet. One it holds that is not the
        ledger's is ``TableExists``: a user's own table is never replaced."""
        by_database: dict[str, list[str]] = {}
        for name in names:
            by_database.setdefault(name.split(".", 1)[0], []).append(name)
        fresh = set()
        for database, wanted in by_database.items():
            there = self.catalog.names(database)
            for name in wanted:
                short = name.split(".", 1)[1]
                if short not in there:
                    fresh.add(name)
                elif self.catalog.owner(database, short) == "":
                    raise TableExists(f"cannot attach {name}: Spark's catalog holds a {name} that is not the "
                                      "ledger's (drop it there, or attach with database= to leave that database out)")
        return fresh

    def _show(self, table: TableInstance, pin: Any, *, new: bool) -> Named | None:
        """Put the view of ``table`` at the pinned version (no pin: a table written before
        versions, read from its folder as ``read_table`` does; None if it holds nothing yet)."""
        database, short = table.name.split(".", 1)
        if self.catalog.ensure_database(database):
            self.created_databases.add(database)
        if pin is None:
            try:
                self.catalog.put(database, short, f"SELECT * FROM {folder_relation(table.location)}", None)
            except Exception as exc:  # Spark's AnalysisException: nothing there to read yet
                if "PATH_NOT_FOUND" not in str(exc) and "UNABLE_TO_INFER_SCHEMA" not in str(exc):
                    raise
                if self.catalog.owner(database, short):
                    self.catalog.drop(database, short)
                self.empty.add(table.id)
                return None
            self.empty.discard(table.id)
            return Named(table.id, None, None)
        version = self.ledger.version(table.name, version=pin.version)
        files = [entry.path for entry in version.files]
        if version.schema is None:  # adopted files: Spark infers the columns, as read_table lets it
            text = f"SELECT * FROM {files_relation(table.location, files)}"
        else:
            merge = any(v.schema != version.schema for v in self.ledger.versions(table_id=table.id)
                        if v.number < version.number)
            text = view_text(table.location, files, version.schema, merge_schema=merge, table=table.name)
        self.catalog.put(database, short, text, version.schema, new=new)
        return Named(table.id, version.number, pin.id)

    def _remove(self, name: str) -> Named:
        database, short = name.split(".", 1)
        if self.catalog.owner(database, short):
            self.catalog.drop(database, short)
        return self.named.pop(name)

    def _release(self, pin_ids: list[str]) -> None:
        if pin_ids:
            with contextlib.suppress(LedgerError):
                self.ledger.release_pins(pin_ids)

    # --- following this process's changes ----------------------------------------------------

    def _follow(self, change: Change) -> None:
        """After each append through the attached ``Ledger``: sync the names it may have moved."""
        if self._syncing:
            return  # our own pins
        with self._lock:
            names: set[str] | None = None
            if not change.everything:
                databases = change.databases if self.database is None else change.databases & {self.database}
                names = {n for n, shown in self.named.items()
                         if shown.table_id in change.table_ids or n.split(".", 1)[0] in databases}
                try:
                    for database in databases:
                        names |= {t.name for t in self.ledger.tables(database=database)}
                    for table_id in change.table_ids - {s.table_id for s in self.named.values()}:
                        table = self.ledger.instance(table_id)
                        if table.is_live and self.database in (None, table.database):
                            names.add(table.name)
                except LedgerError as exc:
                    log.warning("Spark's names did not follow a change to the ledger (%s): refresh(spark, ledger) "
                                "makes them show it", exc)
                    return
                if not names:
                    return
            try:
                self.sync(names)
            except Exception as exc:  # the change landed; only the names lag behind it
                log.warning("Spark's names did not follow a change to the ledger (%s): refresh(spark, ledger) "
                            "makes them show it", exc)

    # --- refresh and detach --------------------------------------------------------------------

    def refresh(self) -> list[str]:
        with self._lock:
            held = [shown.pin_id for shown in self.named.values() if shown.pin_id is not None]
            if held:
                self._syncing = True
                try:
                    renewed = {p.id: p.live for p in self.ledger.renew_pins(held)}
                finally:
                    self._syncing = False
                for name, shown in list(self.named.items()):
                    if shown.pin_id is not None and not renewed.get(shown.pin_id, False):
                        self.named[name] = attrs.evolve(shown, version=None, pin_id=None)  # ended: pin anew
            self.sync()
            return sorted(self.named)

    def detach(self) -> list[str]:
        with self._lock:
            self._unwatch()
            names = sorted(self.named)
            for name in names:
                database, short = name.split(".", 1)
                if self.catalog.owner(database, short):
                    self.catalog.drop(database, short)
            self._release([s.pin_id for s in self.named.values() if s.pin_id is not None])
            self.named.clear()
            for database in sorted(self.created_databases):
                self.catalog.drop_database_if_empty(database)
            self.functions.drop()
            return names



_attached: dict[tuple[int, int], Attachment] = {}


def attach(spark: SparkSession, ledger: Ledger, *, database: str | None = None, lease: Any = None) -> list[str]:
    """Make every live table of ``ledger`` (of ``database``, if given) a name in ``spark``'s SQL:
    ``spark.sql("SELECT * FROM sales.orders")``, ``spark.table(...)``, ``SHOW TABLES IN sales``.
    Each name reads exactly the files of the version it shows, with Spark's own Parquet reader,
    and that version is pinned (R21) for ``lease`` (an hour by default; ``refresh`` renews it).
    Changes made through ``ledger`` are followed at once; others' after ``refresh``. Writes stay
    ``write_table``. Returns the names attached. Attaching again is ``refresh``."""
    key = (id(spark), id(ledger))
    if key in _attached:
        return _attached[key].refresh()
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
    found = _attached.get((id(spark), id(ledger)))
    if found is None:
        raise TableNotFound("this ledger is not attached to this Spark session: attach(spark, ledger) first")
    return found.refresh()


def detach(spark: SparkSession, ledger: Ledger) -> list[str]:
    """Remove the ledger's names from ``spark`` and release their pins. Returns the names removed."""
    found = _attached.pop((id(spark), id(ledger)), None)
    return [] if found is None else found.detach()


@atexit.register
def _release_at_exit() -> None:
    """A process that ends holds nothing: its pins are released rather than left to their lease."""
    for attachment in list(_attached.values()):
        with contextlib.suppress(Exception):
            attachment._release([s.pin_id for s in attachment.named.values() if s.pin_id is not None])
