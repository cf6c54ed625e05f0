"""The ledger in SQL: table-valued functions an attached session can call.

    SELECT * FROM ledger_history('sales.orders')          -- what happened to it, event by event
    SELECT * FROM ledger_versions('sales.orders')         -- its versions (DESCRIBE HISTORY's rows)
    SELECT * FROM ledger_dropped_tables()                 -- what an undrop could bring back

They are Python UDTFs, and Python UDTFs run on the executors, which never import the ledger
(R19): so the rows are computed here, on the driver, when the attachment syncs (attach, refresh,
and every change made through the attached ``Ledger``), and each function carries its rows as
plain tuples. The classes are made inside a function, so Spark pickles them whole instead of
asking the executors to import this module.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from pyspark.sql import SparkSession

from ledger import Ledger

HISTORY = "ledger_history"
VERSIONS = "ledger_versions"
DROPPED = "ledger_dropped_tables"

_HISTORY_COLUMNS = "seq BIGINT, time TIMESTAMP, actor STRING, stream STRING, type STRING, text STRING, data STRING"
_VERSION_COLUMNS = ("table STRING, table_id STRING, number BIGINT, committed_at TIMESTAMP, mode STRING, "
                    "file_count BIGINT, bytes BIGINT, expired BOOLEAN, current BOOLEAN, write_id STRING, "
                    "restored_from BIGINT, superseded_at TIMESTAMP, schema STRING")
_TABLE_COLUMNS = ("id STRING, name STRING, state STRING, location STRING, created_at TIMESTAMP, "
                  "dropped_at TIMESTAMP, purged_at TIMESTAMP, restorable_until TIMESTAMP, "
                  "effective_watermark TIMESTAMP, retention STRING, retention_seconds BIGINT, "
                  "retention_from STRING, current_version BIGINT, retention_mark TIMESTAMP")


def _by_name(rows: Mapping[str, list[tuple[Any, ...]]]) -> type:
    """A UDTF that yields the rows kept for the table name it is called with (none for a name
    not attached)."""
    class ByName:
        kept = dict(rows)

        def eval(self, name: str):  # type: ignore[no-untyped-def]
            yield from ByName.kept.get(name, ())
    return ByName


def _all(rows: list[tuple[Any, ...]]) -> type:
    class All:
        kept = list(rows)

        def eval(self):  # type: ignore[no-untyped-def]
            yield from All.kept
    return All


class Functions:
    """The three functions of one attachment, re-registered when their rows change. The history
    is read from the log once, then only what was appended since; a table's versions are read
    again only when a change touched it."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.events: dict[str, list[tuple[Any, ...]]] = {}  # table id -> its history rows
        self.versions: dict[str, list[tuple[Any, ...]]] = {}  # table name -> its version rows
        self.last: tuple[int, Any] = (0, None)  # the seq and time of the last event read
        self.kept: set[str] = set()  # the tables whose every event up to the last is in ``events``
        self.registered: tuple[dict[str, str], list[Any]] | None = None  # the names and dropped rows registered

    def update(self, ledger: Ledger, shown: Mapping[str, Any], touched: Iterable[str] | None) -> None:
        """Bring the rows of ``touched`` names (None: all) up to date, and register each function
        whose rows changed (registering pickles all its rows: not done for nothing)."""
        ids = {name: s.table_id for name, s in shown.items()}
        if self._read_history(ledger, set(ids.values())) or self.registered is None or ids != self.registered[0]:
            history = {name: list(self.events.get(table_id, ())) for name, table_id in ids.items()}
            self.spark.udtf.register(HISTORY, _udtf(_by_name(history), _HISTORY_COLUMNS))
        versions_moved = False
        for name in set(self.versions) - set(shown):
            del self.versions[name]
            versions_moved = True
        for name in shown if touched is None else set(touched) & set(shown):
            rows = [_version_row(v) for v in ledger.versions(table_id=shown[name].table_id)]
            versions_moved |= self.versions.get(name) != rows
            self.versions[name] = rows
        if versions_moved or self.registered is None:
            self.spark.udtf.register(VERSIONS, _udtf(_by_name(self.versions), _VERSION_COLUMNS))
        dropped = [_table_row(t) for t in ledger.dropped_tables()]
        if self.registered is None or dropped != self.registered[1]:
            self.spark.udtf.register(DROPPED, _udtf(_all(dropped), _TABLE_COLUMNS))
        self.registered = (ids, dropped)

    def _read_history(self, ledger: Ledger, shown: set[str]) -> bool:
        """Read the events appended since the last read, keeping those of live and shown tables (a
        dropped table's are let go: an undropped one's history is read again, whole); True if a
        shown table's history moved."""
        last_seq, last_time = self.last
        keep = shown | {t.id for t in ledger.tables()}
        moved = False
        for table_id in sorted(shown - self.kept) if last_seq else ():
            self.events[table_id] = [_history_row(e) for e in ledger.history(table_id=table_id) if e.seq <= last_seq]
            moved = True
        for entry in ledger.history(since=last_time):
            if entry.seq <= last_seq:
                continue
            for table_id in keep.intersection(entry.table_ids):
                self.events.setdefault(table_id, []).append(_history_row(entry))
                moved |= table_id in shown
            last_seq, last_time = entry.seq, entry.time
        for table_id in set(self.events) - keep:
            del self.events[table_id]
        self.kept = keep
        self.last = (last_seq, last_time)
        return moved

    def drop(self) -> None:
        for name in (HISTORY, VERSIONS, DROPPED):
            self.spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {name}")


def _udtf(cls: type, columns: str) -> Any:
    from pyspark.sql.functions import udtf
    return udtf(cls, returnType=columns, useArrow=False)


def _history_row(entry: Any) -> tuple[Any, ...]:
    return (entry.seq, entry.time, entry.actor, entry.stream, entry.type, entry.text,
            json.dumps(entry.data, sort_keys=True, default=str))


def _version_row(v: Any) -> tuple[Any, ...]:
    return (v.table, v.table_id, v.number, v.committed_at, v.mode, v.file_count, v.bytes, v.expired, v.current,
            v.write_id, v.restored_from, v.superseded_at, v.schema)


def _table_row(t: Any) -> tuple[Any, ...]:
    return (t.id, t.name, t.state, t.location, t.created_at, t.dropped_at, t.purged_at, t.restorable_until,
            t.effective_watermark, str(t.retention), int(t.retention.total_seconds()), t.retention_from,
            t.current_version, t.retention_mark)
