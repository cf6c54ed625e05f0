"""The ledger in SQL: table-valued functions an attached session can call.

    SELECT * FROM ledger_history('sales.orders')          -- what happened to it, event by event
    SELECT * FROM ledger_history('sales.orders', true)    -- and the pins readers took
    SELECT * FROM ledger_versions('sales.orders')         -- its versions (DESCRIBE HISTORY's rows)
    SELECT * FROM ledger_dropped_tables()                 -- what an undrop could bring back
    SELECT * FROM ledger_dropped_tables('sales')          -- of one database (or one name)
    SELECT * FROM ledger_erasures()                       -- every erasure request, and by when it is done

They are Python UDTFs, and Python UDTFs run on the executors, which never import the ledger
(R19): so the rows are computed here, on the driver, when the attachment syncs (attach, refresh,
and every change made through the attached ``Ledger``), and each function carries its rows as
plain tuples. The classes are made inside a function, so Spark pickles them whole instead of
asking the executors to import this module.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from typing import Any, Callable, Iterable, Mapping

from pyspark.sql import SparkSession

from ledger import Ledger
from ledger import PIN_EVENTS

HISTORY = "ledger_history"
VERSIONS = "ledger_versions"
DROPPED = "ledger_dropped_tables"
ERASURES = "ledger_erasures"

_HISTORY_COLUMNS = "seq BIGINT, time TIMESTAMP, actor STRING, stream STRING, type STRING, text STRING, data STRING"
_VERSION_COLUMNS = ("table STRING, table_id STRING, number BIGINT, committed_at TIMESTAMP, mode STRING, "
                    "file_count BIGINT, bytes BIGINT, expired BOOLEAN, current BOOLEAN, write_id STRING, "
                    "restored_from BIGINT, superseded_at TIMESTAMP, schema STRING")
_HISTORY_TYPE = 4  # the column of a history row that holds the event's type
_TABLE_NAME = 1  # the column of a table row that holds its name
_ERASURE_COLUMNS = ("request_id STRING, tables STRING, requested_at TIMESTAMP, reason STRING, files BIGINT, "
                    "deleted BIGINT, done BOOLEAN, due TIMESTAMP, waiting_on STRING, forgotten_at TIMESTAMP")
_TABLE_COLUMNS = ("id STRING, name STRING, state STRING, location STRING, created_at TIMESTAMP, "
                  "dropped_at TIMESTAMP, purged_at TIMESTAMP, restorable_until TIMESTAMP, "
                  "effective_watermark TIMESTAMP, retention STRING, retention_seconds BIGINT, "
                  "retention_from STRING, current_version BIGINT, retention_mark TIMESTAMP")


def _name_parts() -> Callable[[Any], tuple[str, ...] | None]:
    """How the functions read a name on the executors: as Spark's parser reads a multi-part name
    (parts joined by dots, each bare or in backticks, a doubled backtick in one being a backtick,
    any case, the session catalog's own name ``spark_catalog`` first or not). None for what is
    not a name (a number, an array, a map, NULL, an unclosed backtick): no rows, not an error.
    Made by a function, so Spark pickles it with the class instead of importing this module."""
    part = re.compile(r"\s*(?:`((?:[^`]|``)*)`|([^.`\s]+))\s*(\.|\Z)")

    def parts(value: Any) -> tuple[str, ...] | None:
        if not isinstance(value, str):
            return None
        found: list[str] = []
        at = 0
        while True:
            match = part.match(value, at)
            if match is None:
                return None
            quoted, bare, dot = match.groups()
            found.append((bare if quoted is None else quoted.replace("``", "`")).lower())
            if not dot:
                break
            at = match.end()
        return tuple(found[1:]) if len(found) == 3 and found[0] == "spark_catalog" else tuple(found)
    return parts


def _by_name(rows: Mapping[str, list[tuple[Any, ...]]]) -> type:
    """A UDTF that yields the rows kept for the table name it is called with (none for a name
    not attached, or for what is not a table's name)."""
    class ByName:
        kept = dict(rows)
        parts = staticmethod(_name_parts())

        def eval(self, name: Any):  # type: ignore[no-untyped-def]
            found = ByName.parts(name)
            if found is not None and len(found) == 2:
                yield from ByName.kept.get(".".join(found), ())
    return ByName


def _history(rows: Mapping[str, list[tuple[Any, ...]]]) -> type:
    """``ledger_history(name)``: the name's events, pins' left out as ``Ledger.history`` leaves
    them; ``ledger_history(name, true)``: with them."""
    class History(_by_name(rows)):  # type: ignore[misc]
        pin_events = PIN_EVENTS
        type_at = _HISTORY_TYPE

        def eval(self, name: Any, pins: Any = False):  # type: ignore[no-untyped-def]
            for row in super().eval(name):
                if pins is True or row[History.type_at] not in History.pin_events:
                    yield row
    return History


def _dropped(rows: list[tuple[Any, ...]]) -> type:
    """``ledger_dropped_tables()``: every dropped table; given a name, the dropped tables of that
    name (``'sales.orders'``) or database (``'sales'``), as ``Ledger.dropped_tables`` filters them."""
    class Dropped:
        kept = list(rows)
        parts = staticmethod(_name_parts())
        name_at = _TABLE_NAME

        def eval(self, *name: Any):  # type: ignore[no-untyped-def]
            if not name:
                yield from Dropped.kept
                return
            found = Dropped.parts(name[0]) if len(name) == 1 else None
            if found is None:
                return
            for row in Dropped.kept:
                database, _, table = row[Dropped.name_at].partition(".")
                if found in ((database,), (database, table)):  # one part names a database, two a table
                    yield row
    return Dropped


def _all(rows: list[tuple[Any, ...]]) -> type:
    """A UDTF of no arguments that yields the rows kept (``ledger_erasures()``)."""
    class All:
        kept = list(rows)

        def eval(self):  # type: ignore[no-untyped-def]
            yield from All.kept
    return All


class Functions:
    """The four functions of one attachment, re-registered when their rows change (registering
    pickles all of a function's rows: not done for nothing). The history comes from the ledger's
    follower (``follower``), which reads only what was appended since it last read; a table's
    versions are read again only when a change touched it."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.versions: dict[str, list[tuple[Any, ...]]] = {}  # table name -> its version rows
        self.registered: tuple[dict[str, Any], list[Any]] | None = None  # the history marks and dropped rows registered
        self.erasures: list[tuple[Any, ...]] | None = None  # the erasure rows registered

    def update(self, ledger: Ledger, shown: Mapping[str, Any], touched: Iterable[str] | None) -> None:
        """Bring the rows of ``touched`` names (None: all) up to date, and register each function
        whose rows changed."""
        history = follower(ledger)
        with history.lock:
            history.read(ledger, set(shown))
            marks = {name: history.mark(name) for name in shown}
            if self.registered is None or marks != self.registered[0]:
                rows = {name: history.of(name) for name in shown}
                self.spark.udtf.register(HISTORY, _udtf(_history(rows), _HISTORY_COLUMNS))
        versions_moved = False
        for name in set(self.versions) - set(shown):
            del self.versions[name]
            versions_moved = True
        for name in shown if touched is None else set(touched) & set(shown):
            rows_of = [_version_row(v) for v in ledger.versions(table_id=shown[name].table_id)]
            versions_moved |= self.versions.get(name) != rows_of
            self.versions[name] = rows_of
        if versions_moved or self.registered is None:
            self.spark.udtf.register(VERSIONS, _udtf(_by_name(self.versions), _VERSION_COLUMNS))
        dropped = [_table_row(t) for t in ledger.dropped_tables()]
        if self.registered is None or dropped != self.registered[1]:
            self.spark.udtf.register(DROPPED, _udtf(_dropped(dropped), _TABLE_COLUMNS))
        self.registered = (marks, dropped)
        if touched is None or self.erasures is None:  # a request's "by when" moves with time: every full sync
            erasures = [_erasure_row(e) for e in ledger.erasures()]
            if erasures != self.erasures:
                self.spark.udtf.register(ERASURES, _udtf(_all(erasures), _ERASURE_COLUMNS))
                self.erasures = erasures

    def drop(self) -> None:
        for name in (HISTORY, VERSIONS, DROPPED, ERASURES):
            self.spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {name}")


_followers: weakref.WeakKeyDictionary[Ledger, _History] = weakref.WeakKeyDictionary()
_followers_lock = threading.Lock()


def follower(ledger: Ledger) -> _History:
    """The history follower of ``ledger`` (the object: one log), shared by every attachment made
    through it, in any session, and kept while the ``Ledger`` is: an attach after a detach reads
    only what was appended since the last one read, never the log's past again. That past grows
    with every attachment: an attach, a refresh and a detach of 1,000 tables append 3,000 pin
    events, and the history is read at about 35 us of CPU an event (its rows made included), so
    reading it took 0.13, 0.25, 0.35 s of the benchmark's rounds of attach (issue 48), and a
    long-lived ledger's attach grew with its past."""
    with _followers_lock:
        found = _followers.get(ledger)
        if found is None:
            found = _followers[ledger] = _History()
        return found


class _History:
    """Each name's history as ``Ledger.history(name, pins=True)`` gives it (the function leaves the
    pins out unless asked): the events of every instance that ever bore the name. Read as the log
    grows; held only for the names that are live or shown (an instance that comes back under a
    held name, by an undrop, has its events read again, whole). Shared by the attachments of one
    ``Ledger`` (``follower``): each reads and asks under ``lock``, and knows by ``mark`` whether a
    name's rows changed since it registered them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bore: dict[str, set[str]] = {}  # name -> every instance that bore it
        self.events: dict[str, list[tuple[Any, ...]]] = {}  # instance -> its rows, for the held names
        self.held: set[str] = set()  # the instances whose every event up to ``last`` is in ``events``
        self.seen: set[str] = set()  # every instance a name was given to, held or not
        self.last: tuple[int, Any] = (0, None)  # the seq and time of the last event read
        self.changes = 0  # how many times an instance's rows changed, ever
        self.changed: dict[str, int] = {}  # instance -> the count at which its rows last changed

    def read(self, ledger: Ledger, shown: set[str]) -> None:
        """Read what was appended since the last read, for ``shown`` and the live names."""
        names = shown | {t.name for t in ledger.tables()}
        first = self.last[0] == 0
        self._follow(ledger, names)
        wanted = set().union(*(self.bore.get(n, set()) for n in names))
        for table_id in sorted(wanted - self.held) if not first else ():
            self.events[table_id] = [_history_row(e) for e in ledger.history(table_id=table_id, pins=True)
                                     if e.seq <= self.last[0]]
            self._changed(table_id)
        for table_id in set(self.events) - wanted:
            del self.events[table_id]
            self.changed.pop(table_id, None)
        self.held = wanted

    def _follow(self, ledger: Ledger, names: set[str]) -> None:
        last_seq, last_time = self.last
        for entry in ledger.history(since=last_time, pins=True):
            if entry.seq <= last_seq:
                continue
            name, table_id = entry.data.get("name"), entry.data.get("table_id")
            if isinstance(name, str) and isinstance(table_id, str):
                if name in names and table_id not in self.seen:
                    self.held.add(table_id)  # a new instance: held from its first event on
                self.bore.setdefault(name, set()).add(table_id)
                self.seen.add(table_id)
            for table_id in self.held.intersection(entry.table_ids):
                self.events.setdefault(table_id, []).append(_history_row(entry))
                self._changed(table_id)
            last_seq, last_time = entry.seq, entry.time
        self.last = (last_seq, last_time)

    def _changed(self, table_id: str) -> None:
        self.changes += 1
        self.changed[table_id] = self.changes

    def mark(self, name: str) -> frozenset[tuple[str, int]]:
        """What ``name``'s rows are made of now: equal marks, equal rows."""
        return frozenset((table_id, self.changed.get(table_id, 0)) for table_id in self.bore.get(name, ()))

    def of(self, name: str) -> list[tuple[Any, ...]]:
        """The rows of ``name``'s history, oldest first (an event about two of its instances once)."""
        rows = {row[0]: row for table_id in self.bore.get(name, ()) for row in self.events.get(table_id, ())}
        return [rows[seq] for seq in sorted(rows)]


def _udtf(cls: type, columns: str) -> Any:
    from pyspark.sql.functions import udtf
    return udtf(cls, returnType=columns, useArrow=False)


def _history_row(entry: Any) -> tuple[Any, ...]:
    return (entry.seq, entry.time, entry.actor, entry.stream, entry.type, entry.text,
            json.dumps(entry.data, sort_keys=True, default=str))


def _version_row(v: Any) -> tuple[Any, ...]:
    return (v.table, v.table_id, v.number, v.committed_at, v.mode, v.file_count, v.bytes, v.expired, v.current,
            v.write_id, v.restored_from, v.superseded_at, v.schema)


def _erasure_row(e: Any) -> tuple[Any, ...]:
    return (e.request_id, ", ".join(e.tables), e.requested_at, e.reason, len(e.files), sum(f.settled for f in e.files),
            e.done, e.due, None if e.done or e.due else (e.pending[0].why if e.pending else None), e.forgotten_at)


def _table_row(t: Any) -> tuple[Any, ...]:
    return (t.id, t.name, t.state, t.location, t.created_at, t.dropped_at, t.purged_at, t.restorable_until,
            t.effective_watermark, str(t.retention), int(t.retention.total_seconds()), t.retention_from,
            t.current_version, t.retention_mark)
