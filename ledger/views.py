"""What callers get back: plain values with datetimes and absolute locations.

The folded state keeps integer microseconds and paths relative to the
warehouse; these views turn them into what a person or a pipeline wants to
hold, and into JSON with ISO 8601 UTC times for the CLI. Every judgement in
them (is it blocked? until when is it restorable?) was made by the core.
"""

from __future__ import annotations

import collections
import itertools
import json
import sys
from datetime import datetime, timedelta
from typing import Any, Callable, Iterator, NamedTuple, overload

import attrs
from vacuum_work import location

from .clock import Micros, format_duration, from_micros, iso, iso_utc
from .core.events import Recorded, type_of
from .core.model import State
from .core.pins import PinRecord
from .core.tables import Instance, name_of
from .core.versions import Version, Write
from .errors import InvalidArgument


def format_bytes(n: int) -> str:
    """Sizes as people read them, in one unit system everywhere (binary: KiB, MiB, ...)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _dt(us: Micros | None) -> datetime | None:
    return None if us is None else from_micros(us)


@attrs.frozen(slots=False)
class TableInstance:
    """One incarnation of a table, as the ledger sees it now.

    Every ``create_table`` returns one: built by position and without slots (still frozen), it
    costs about 25,000 instructions fewer than by keyword with slots, of a command's 350,000."""

    id: str
    name: str
    location: str
    created_at: datetime
    dropped_at: datetime | None
    purged_at: datetime | None
    effective_watermark: datetime | None
    retention: timedelta
    retention_from: str
    """Where the retention comes from: ``table:<id>``, ``database:<name>``, ``ledger`` or ``default``."""
    state: str
    """``live``, ``dropped`` (restorable), ``blocked`` (behind a watermark) or ``purged``."""
    restorable_until: datetime | None
    """For a restorable dropped table: when it becomes due for a vacuum (None otherwise)."""
    current_version: int | None = None
    """The number of its current version (None: nothing committed through the ledger yet)."""
    retention_mark: datetime | None = None
    """Versions committed at or before it (but the current one) are expired (R12)."""

    @classmethod
    def of(cls, state: State, inst: Instance, warehouse: str) -> TableInstance:
        guard = state.guard
        source, seconds = guard.retention_source(inst)
        return cls(  # by position, in the order of the fields above
            inst.id,
            inst.name,
            location(warehouse, inst.path),
            from_micros(inst.created_at),
            _dt(inst.dropped_at),
            _dt(inst.purged_at),
            _dt(guard.effective_watermark(inst)),
            timedelta(0, seconds),  # by position: by keyword, a timedelta costs 30% more
            source,
            guard.status(inst),
            _dt(guard.restorable_until(inst)),
            state.data.heads.get(inst.id),
            _dt(state.data.mark(inst.id)),
        )

    @property
    def database(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def is_live(self) -> bool:
        return self.dropped_at is None

    def to_dict(self) -> dict[str, Any]:
        seconds = int(self.retention.total_seconds())
        return {
            "id": self.id,
            "name": self.name,
            "state": self.state,
            "location": self.location,
            "created_at": iso_utc(self.created_at),
            "dropped_at": iso_utc(self.dropped_at),
            "purged_at": iso_utc(self.purged_at),
            "restorable_until": iso_utc(self.restorable_until),
            "effective_watermark": iso_utc(self.effective_watermark),
            "retention": format_duration(seconds),
            "retention_seconds": seconds,
            "retention_from": self.retention_from,
            "current_version": self.current_version,
            "retention_mark": iso_utc(self.retention_mark),
        }


class FileEntry(NamedTuple):
    """One file a version names: ``path`` relative to the table's location, ``size`` in bytes."""
    path: str
    size: int


@attrs.frozen
class TableVersion:
    """One version of a table instance. ``files`` is read from the ledger on first use (a version
    of a big table names thousands), the rest comes from the folded state."""

    table: str
    table_id: str
    number: int
    committed_at: datetime
    mode: str
    """``append``, ``overwrite``, ``replace`` (its base's files but some, and its write's), ``restore``
    (of ``restored_from``) or ``adopt``."""
    file_count: int
    bytes: int
    expired: bool
    current: bool
    write_id: str | None
    restored_from: int | None
    superseded_at: datetime | None
    _load: Callable[[], tuple[FileEntry, ...]] = attrs.field(eq=False, repr=False)
    schema: str | None = None
    """Its columns as recorded by the writer (for Spark, a StructType's JSON), read back with every
    read of it; None for a version written without one (adopted files, an older release)."""
    erased_by: str | None = None
    """The erasure request that made it unreadable (R25: never read, restored or pinned again), or None."""
    partition_by: tuple[str, ...] | None = None
    """Its partition columns, outermost first (``()``: not partitioned): the table's layout, kept by a
    version of no files. None for a version whose writer did not say (adopted files, an older
    release): its files' ``col=value`` folders tell."""

    @classmethod
    def of(cls, state: State, v: Version, load: Callable[[Version], tuple[FileEntry, ...]]) -> TableVersion:
        return cls(
            table=name_of(state, v.table_id), table_id=v.table_id, number=v.number,
            committed_at=from_micros(v.committed_at), mode=v.mode, file_count=v.files, bytes=v.bytes,
            expired=state.data.is_expired(v), current=state.data.heads.get(v.table_id) == v.number,
            write_id=v.write_id, restored_from=v.base if v.mode == "restore" else None,
            superseded_at=_dt(v.superseded_at), load=lambda: load(v), schema=state.data.schema_of(v),
            erased_by=state.erasures.versions.get(f"{v.table_id}/{v.number}"), partition_by=v.partition_by)

    @property
    def files(self) -> tuple[FileEntry, ...]:
        return self._load()

    def to_dict(self, *, with_files: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "table": self.table, "table_id": self.table_id, "number": self.number,
            "committed_at": iso_utc(self.committed_at), "mode": self.mode, "file_count": self.file_count,
            "bytes": self.bytes, "expired": self.expired, "current": self.current, "write_id": self.write_id,
            "restored_from": self.restored_from, "superseded_at": iso_utc(self.superseded_at),
            "schema": None if self.schema is None else json.loads(self.schema), "erased_by": self.erased_by,
            "partition_by": None if self.partition_by is None else list(self.partition_by)}
        if with_files:  # the names Python uses: ``file_count``, and ``files`` for the list
            data["files"] = [{"path": f.path, "size": f.size} for f in self.files]
        return data


@attrs.frozen
class WriteView:
    """A registered write (R14): where its files go, and until when its lease holds."""

    id: str
    table: str
    table_id: str
    folder: str
    """Absolute: the folder the job writes its files into (and nothing else)."""
    relative_folder: str
    """The same, relative to the table's location (as the paths a commit names are)."""
    began_at: datetime
    expires_at: datetime
    lease: timedelta
    status: str
    """``open``, ``committed``, ``aborted`` or ``swept``."""
    version: int | None

    @classmethod
    def of(cls, state: State, w: Write, warehouse: str) -> WriteView:
        inst = state.tables.instance(w.table_id)
        assert inst is not None
        return cls(id=w.id, table=inst.name, table_id=w.table_id,
                   folder=location(location(warehouse, inst.path), w.folder), relative_folder=w.folder,
                   began_at=from_micros(w.began_at), expires_at=from_micros(w.expires_at),
                   lease=timedelta(seconds=w.lease_seconds), status=w.status, version=w.version)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "table": self.table, "table_id": self.table_id, "folder": self.folder,
                "began_at": iso_utc(self.began_at), "expires_at": iso_utc(self.expires_at),
                "lease": format_duration(int(self.lease.total_seconds())), "status": self.status,
                "version": self.version}


@attrs.frozen
class Change:
    """What one append made through this ``Ledger`` may have changed (``Ledger.watch``): the
    instances whose data moved (writes, versions, marks, pins), the databases whose names moved
    (creates, drops, undrops, purges), and ``everything`` when the ledger-wide catalog moved (an
    undrop into another database). A follower re-reads those, not the whole catalog."""

    table_ids: frozenset[str]
    databases: frozenset[str]
    everything: bool


@attrs.frozen
class PinView:
    """A reader's pin (R21): what it holds, and until when. ``live`` is False once it was
    released or its lease ran out (as the ledger's clock saw it when this view was made)."""

    id: str
    table: str
    table_id: str
    version: int | None
    """The version it holds (None: a dropped instance that has no versions, held whole)."""
    taken_at: datetime
    expires_at: datetime
    lease: timedelta
    released_at: datetime | None
    live: bool

    @classmethod
    def of(cls, state: State, pin: PinRecord, now: Micros) -> PinView:
        inst = state.tables.instance(pin.table_id)
        assert inst is not None
        return cls(id=pin.id, table=inst.name, table_id=pin.table_id, version=pin.version,
                   taken_at=from_micros(pin.taken_at), expires_at=from_micros(pin.expires_at),
                   lease=timedelta(seconds=pin.lease_seconds),
                   released_at=None if pin.released_at is None else from_micros(pin.released_at),
                   live=pin.holds(now))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "table": self.table, "table_id": self.table_id, "version": self.version,
                "taken_at": iso_utc(self.taken_at), "expires_at": iso_utc(self.expires_at),
                "lease": format_duration(int(self.lease.total_seconds())),
                "released_at": iso_utc(self.released_at), "live": self.live}


class History:
    """The events a ``Ledger.history`` query matches, oldest first.

    Iterate it to stream them: the log is read in batches as you go, never held whole, and
    each iteration reads it again (up to the last event there was when the query was made).
    The common questions have answers that hold at most what they return: ``len(h)`` counts,
    ``h.last(10)`` (or ``h[-10:]``) gives the ten latest, ``h[-1]`` the latest, ``h[0]`` the
    first. Other slices read the matches into a list first.
    """

    def __init__(self, entries: Callable[[], Iterator[HistoryEntry]], count: Callable[[], int]) -> None:
        self._entries, self._count = entries, count

    def __iter__(self) -> Iterator[HistoryEntry]:
        return self._entries()

    def __len__(self) -> int:
        return self._count()

    def last(self, n: int) -> list[HistoryEntry]:
        """The ``n`` latest matches, oldest first (fewer if there are fewer)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise InvalidArgument(f"last(n) takes a whole number of events >= 0, got {n!r}")
        # No log holds more than sys.maxsize events: a larger n asks for all of them.
        return list(collections.deque(self, maxlen=min(n, sys.maxsize))) if n else []

    @overload
    def __getitem__(self, index: int) -> HistoryEntry: ...

    @overload
    def __getitem__(self, index: slice) -> list[HistoryEntry]: ...

    def __getitem__(self, index: int | slice) -> HistoryEntry | list[HistoryEntry]:
        if isinstance(index, slice):
            start, stop, step = index.start, index.stop, index.step
            if start is not None and start < 0 and stop is None and step in (None, 1):
                return self.last(-start)
            if all(v is None or v >= 0 for v in (start, stop)) and (step is None or step > 0):
                return list(itertools.islice(self, *(None if v is None else min(v, sys.maxsize)
                                                     for v in (start, stop, step))))
            return list(self)[index]
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"history indices are whole numbers or slices, not {type(index).__name__}")
        if index >= sys.maxsize:
            raise IndexError(f"history index {index} is out of range: {len(self)} events match")
        found = self.last(-index) if index < 0 else list(itertools.islice(self, index, index + 1))
        if len(found) < (-index if index < 0 else 1):
            raise IndexError(f"history index {index} is out of range: {len(self)} events match")
        return found[0]

    def __repr__(self) -> str:
        return "<History: iterate it, or ask len(), [-1], last(n)>"


def concerned(event: Any) -> set[str]:
    """The table instances an event concerns: its own, a run's or a database drop's, the one whose
    watermark or retention it sets (``table:<id>``), or those an erasure request covers."""
    found = set(getattr(event, "table_ids", ()))
    if getattr(event, "table_id", None) is not None:
        found.add(event.table_id)
    if hasattr(event, "live"):  # an erasure request: its tables' live instances, and every one it erased from
        found.update(i for i in event.live if i)
        found.update(v.rpartition("/")[0] for v in event.versions)
    scope = getattr(event, "scope", None)
    if isinstance(scope, str) and scope.startswith("table:"):
        found.add(scope[len("table:"):])
    return found


@attrs.frozen
class PublicationView:
    """Where the ledger's tables are published (``Ledger.publications``): the catalog's address (no
    password), the catalog name its readers use, the metadata folder, and the instances it shows."""
    catalog: str
    catalog_name: str
    metadata: str
    table_ids: tuple[str, ...]
    tables: tuple[str, ...]
    """The names of those instances, as the ledger holds them now (a dropped one's too)."""
    recorded_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"catalog": self.catalog, "catalog_name": self.catalog_name, "metadata": self.metadata,
                "table_ids": list(self.table_ids), "tables": list(self.tables), "recorded_at": iso_utc(self.recorded_at)}


@attrs.frozen
class HistoryEntry:
    """One event of the log, for auditors."""

    seq: int
    time: datetime
    actor: str
    stream: str
    type: str
    data: dict[str, Any]
    text: str = ""
    """What happened, in words: "alice@etl-3 dropped sales.orders (id ...)"."""
    table_ids: tuple[str, ...] = ()
    """The instances it concerns (a table's own events, a run's or a database drop's tables, a
    watermark or retention of one table)."""

    @classmethod
    def of(cls, rec: Recorded, text: str = "") -> HistoryEntry:
        # Optional fields left at their default of None (a watermark advanced by hand has no run)
        # say nothing, so they are left out.
        data = {f.name: getattr(rec.event, f.name) for f in attrs.fields(type(rec.event))
                if not (f.default is None and getattr(rec.event, f.name) is None)}
        for key in ("to", "lease_until", "until", "expires_at"):  # times: microseconds in the log
            if isinstance(data.get(key), int):
                data[key] = iso(data[key])
        for key in ("watermarks", "marks"):
            if key in data:
                data[key] = {where: iso(us) for where, us in data[key].items()}
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        return cls(rec.seq, from_micros(rec.time), rec.actor, rec.stream, type_of(rec.event)[0], data, text,
                   tuple(sorted(concerned(rec.event))))

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "time": iso_utc(self.time), "actor": self.actor,
                "stream": self.stream, "type": self.type, "text": self.text, "data": self.data}
