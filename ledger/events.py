"""The facts the ledger records, and how they are written to and read from the log.

Every event is a frozen attrs class with a stable type name and a schema
version. The store keeps the type name, the schema version and a JSON payload
of the fields; time, actor, stream and sequence number live in the envelope
(`Recorded`), because the store assigns them when the event is appended.

Changing an event's fields means bumping its schema version and registering an
upcaster that turns the old payload into the new one, so that old logs keep
folding. A log that holds a type or a schema version this code does not know
was written by a newer release; reading it is refused instead of guessed.

Events carry no validators: they are checked once, by ``decide``, before they
are written, and replay should not pay for checking them again.
"""

from __future__ import annotations

from typing import Any, Callable, Union

import attrs
import orjson

from .clock import Micros
from .errors import IncompatibleLedger, LedgerCorrupt

CATALOG_STREAM = "catalog"
"""Tables and databases share one stream; see ``decide`` for why."""


def watermark_stream(scope: object) -> str:
    return f"watermark:{scope}"


def retention_stream(scope: object) -> str:
    return f"retention:{scope}"


VACUUM_STREAM = "vacuums"
"""Every run's start and finish: one stream, because a run can be taken over by another
(``VacuumStarted.resumes``), and the run being finished must see that. Vacuums are rare,
so sharing a stream costs nothing."""


_TYPES: dict[str, tuple[type, int]] = {}
_NAMES: dict[type, tuple[str, int]] = {}
_FIELDS: dict[type, tuple[str, ...]] = {}
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def _event(name: str, version: int = 1):
    def register(cls: type) -> type:
        _TYPES[name] = (cls, version)
        _NAMES[cls] = (name, version)
        _FIELDS[cls] = tuple(f.name for f in attrs.fields(cls))
        return cls
    return register


def _ids(value: Any) -> tuple[str, ...]:
    return tuple(value)


@_event("TableCreated")
@attrs.frozen
class TableCreated:
    """A new instance, bound to ``name``, stored at ``path`` under the warehouse root."""
    table_id: str
    name: str
    path: str


@_event("TableDropped")
@attrs.frozen
class TableDropped:
    table_id: str
    name: str


@_event("TableUndropped")
@attrs.frozen
class TableUndropped:
    """The instance is live again, bound to ``name`` (its old name or a new one)."""
    table_id: str
    name: str


@_event("DatabaseDropped")
@attrs.frozen
class DatabaseDropped:
    """Every live table of ``database`` dropped in one fact, at one time."""
    database: str
    table_ids: tuple[str, ...] = attrs.field(converter=_ids)


@_event("DatabaseUndropped")
@attrs.frozen
class DatabaseUndropped:
    database: str
    table_ids: tuple[str, ...] = attrs.field(converter=_ids)


@_event("WatermarkAdvanced")
@attrs.frozen
class WatermarkAdvanced:
    """``scope`` is its text form; ``to`` is microseconds since the epoch."""
    scope: str
    to: Micros


@_event("RetentionSet")
@attrs.frozen
class RetentionSet:
    """``seconds`` None removes a database or table override."""
    scope: str
    seconds: int | None


@_event("TablePurged")
@attrs.frozen
class TablePurged:
    """The instance's files are gone; ``run_id`` names the vacuum that removed them."""
    table_id: str
    run_id: str
    files: int
    bytes: int


@_event("VacuumStarted")
@attrs.frozen
class VacuumStarted:
    """Written in the same append as the watermarks, before any file is touched (R2)."""
    run_id: str
    table_ids: tuple[str, ...] = attrs.field(converter=_ids)
    watermarks: dict[str, Micros] = attrs.field(factory=dict)
    database: str | None = None
    limit: int | None = None
    resumes: tuple[str, ...] = attrs.field(default=(), converter=_ids)
    """Earlier runs that died before finishing; this run takes over their instances."""


@_event("VacuumFinished")
@attrs.frozen
class VacuumFinished:
    run_id: str
    purged: int
    failed: int
    files: int
    bytes: int


Event = Union[
    TableCreated, TableDropped, TableUndropped, DatabaseDropped, DatabaseUndropped,
    WatermarkAdvanced, RetentionSet, TablePurged, VacuumStarted, VacuumFinished,
]


@attrs.frozen
class Recorded:
    """An event as the log holds it: where it sits and when and by whom it was written."""
    seq: int
    stream: str
    version: int
    time: Micros
    actor: str
    event: Event


def type_of(event: Event) -> tuple[str, int]:
    """The stored type name and schema version of an event."""
    return _NAMES[type(event)]


def encode(event: Event) -> str:
    cls = type(event)
    return orjson.dumps({name: getattr(event, name) for name in _FIELDS[cls]}).decode()


def register_upcaster(type_name: str, from_version: int,
                      upcast: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Teach the reader to turn a payload of ``from_version`` into ``from_version + 1``."""
    _UPCASTERS[(type_name, from_version)] = upcast


def decode(seq: int, stream: str, version: int, type_name: str, schema_version: int,
           time: Micros, actor: str, payload: str | bytes) -> Recorded:
    """Rebuild one stored row; refuse what this release cannot understand."""
    return Recorded(seq, stream, version, time, actor, decode_event(seq, type_name, schema_version, payload))


def decode_event(seq: int, type_name: str, schema_version: int, payload: str | bytes) -> Event:
    """The event of one stored row, upcast to the current schema (``seq`` is for messages)."""
    known = _TYPES.get(type_name)
    if known is None:
        raise IncompatibleLedger(
            f"event #{seq} has type {type_name!r}, which this release of retention-ledger "
            "does not know; it was written by a newer release: upgrade to read this ledger"
        )
    cls, current = known
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise LedgerCorrupt(f"event #{seq} ({type_name}) has an unreadable payload: {exc}; "
                            "restore the ledger file from a backup") from None
    if not isinstance(data, dict):
        raise LedgerCorrupt(f"event #{seq} ({type_name}) has a payload that is not an object")
    if schema_version != current:
        if not isinstance(schema_version, int):
            raise LedgerCorrupt(f"event #{seq} ({type_name}) has schema version {schema_version!r}")
        data = _upcast(seq, type_name, schema_version, current, data)
    try:
        return cls(**data)
    except TypeError as exc:
        raise LedgerCorrupt(f"event #{seq} ({type_name}) has a payload that does not fit: {exc}") from None


def _upcast(seq: int, type_name: str, found: int, current: int, data: dict[str, Any]) -> dict[str, Any]:
    if found > current:
        raise IncompatibleLedger(
            f"event #{seq} is {type_name} schema version {found}, newer than the {current} "
            "this release reads; upgrade retention-ledger to read this ledger"
        )
    while found < current:
        upcast = _UPCASTERS.get((type_name, found))
        if upcast is None:
            raise LedgerCorrupt(f"event #{seq}: no upcaster from {type_name} schema version {found}")
        data = upcast(data)
        found += 1
    return data
