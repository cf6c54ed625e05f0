"""How a fact is registered, written to the log, and read back.

Every event is a frozen attrs class with a stable type name and a schema
version, registered with ``@event(name)`` in the concern that owns it. The store
keeps the type name, the schema version and a JSON payload of the fields; time,
actor, stream and sequence number live in the envelope (``Recorded``), because
the store assigns them when the event is appended.

Changing an event's fields means bumping its schema version and registering an
upcaster (``UPCASTERS``) that turns the old payload into the new one, so that old
logs keep folding. A log that holds a type or a schema version this code does not
know was written by a newer release; reading it is refused instead of guessed.

Events carry no validators: they are checked once, by a decision, before they are
written, and replay should not pay for checking them again (the fold re-checks the
rules that matter on the state instead).
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import attrs
import orjson

from ..clock import Micros
from ..errors import IncompatibleLedger, LedgerCorrupt

E = TypeVar("E", bound=type)

_TYPES: dict[str, tuple[type, int]] = {}
_NAMES: dict[type, tuple[str, int]] = {}
_FIELDS: dict[type, tuple[str, ...]] = {}

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""``(type name, schema version) -> upcaster`` to the next schema version. Public so that a
release (or a test) can teach the reader an old payload shape."""


def event(name: str, version: int = 1) -> Callable[[E], E]:
    """Register an attrs class as the event stored under ``name`` at schema ``version``."""
    def register(cls: E) -> E:
        if name in _TYPES:
            raise ValueError(f"event type {name!r} is registered twice")
        _TYPES[name] = (cls, version)
        _NAMES[cls] = (name, version)
        _FIELDS[cls] = tuple(f.name for f in attrs.fields(cls))
        return cls
    return register


def registered() -> dict[str, type]:
    """Every known event type by its stored name (for tests and tools)."""
    return {name: cls for name, (cls, _) in _TYPES.items()}


def as_ids(value: Any) -> tuple[str, ...]:
    """A converter for id-list fields: JSON gives lists, events hold tuples (hashable, frozen)."""
    return tuple(value)


@attrs.frozen
class Recorded:
    """An event as the log holds it: where it sits and when and by whom it was written."""
    seq: int
    stream: str
    version: int
    time: Micros
    actor: str
    event: Any


def type_of(event: Any) -> tuple[str, int]:
    """The stored type name and schema version of an event."""
    return _NAMES[type(event)]


def encode(event: Any) -> str:
    return orjson.dumps({name: getattr(event, name) for name in _FIELDS[type(event)]}).decode()


def decode(seq: int, stream: str, version: int, type_name: str, schema_version: int,
           time: Micros, actor: str, payload: str | bytes) -> Recorded:
    """Rebuild one stored row; refuse what this release cannot understand."""
    return Recorded(seq, stream, version, time, actor, decode_event(seq, type_name, schema_version, payload))


def decode_event(seq: int, type_name: str, schema_version: int, payload: str | bytes) -> Any:
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
        upcast = UPCASTERS.get((type_name, found))
        if upcast is None:
            raise LedgerCorrupt(f"event #{seq}: no upcaster from {type_name} schema version {found}")
        data = upcast(data)
        found += 1
    return data
