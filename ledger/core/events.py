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
rules that matter on the state instead). Reading one back is typed decoding (``msgspec``):
the JSON goes straight into the frozen class, each field checked against its annotation on
the way, and a field of the wrong type is named where the fold would have tripped over it
later. msgspec cannot make an attrs class refuse a field it does not have, so a struct of the
same fields (``_shape``), which can, reads the payload first: both passes in C cost less
than half of parsing to a dict and calling the class (a quarter of a replay was that).
"""

from __future__ import annotations

import typing
from typing import Any, Callable, NamedTuple, TypeVar

import attrs
import msgspec
import orjson

from ..clock import Micros
from ..errors import IncompatibleLedger, LedgerCorrupt

E = TypeVar("E", bound=type)


class _Known(NamedTuple):
    cls: type
    version: int
    decoder: msgspec.json.Decoder[Any]
    """Straight into the event class."""
    shape: type
    """A struct of the same fields that refuses any other (``_shape``)."""
    shape_decoder: msgspec.json.Decoder[Any]


_TYPES: dict[str, _Known] = {}
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
        shape = _shape(name, cls)
        _TYPES[name] = _Known(cls, version, msgspec.json.Decoder(cls), shape, msgspec.json.Decoder(shape))
        _NAMES[cls] = (name, version)
        _FIELDS[cls] = tuple(f.name for f in attrs.fields(cls))
        return cls
    return register


def registered() -> dict[str, type]:
    """Every known event type by its stored name (for tests and tools)."""
    return {name: known.cls for name, known in _TYPES.items()}


def _shape(name: str, cls: type) -> type:
    """A struct with ``cls``'s fields, types and defaults that refuses unknown fields."""
    hints = typing.get_type_hints(cls)
    fields: list[Any] = []
    for f in attrs.fields(cls):
        if f.default is attrs.NOTHING:
            fields.append((f.name, hints[f.name]))
        elif isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
            fields.append((f.name, hints[f.name], msgspec.field(default_factory=f.default.factory)))
        else:
            fields.append((f.name, hints[f.name], f.default))
    return msgspec.defstruct(f"{name}Payload", fields, forbid_unknown_fields=True)


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


Row = tuple[Any, ...]
"""An event as a store gives it back: ``(seq, stream, version, type, schema_version, time, actor,
payload[, hash, ...])``, each field as the database returns it (the fold checks them)."""


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
    cls, current = known.cls, known.version
    if schema_version == current:  # the hot path: typed decoding, no dict in between
        try:
            known.shape_decoder.decode(payload)
            return known.decoder.decode(payload)
        except msgspec.ValidationError as exc:
            raise LedgerCorrupt(f"event #{seq} ({type_name}) has a payload that does not fit: {exc}") from None
        except msgspec.DecodeError as exc:
            raise LedgerCorrupt(f"event #{seq} ({type_name}) has an unreadable payload: {exc}; "
                                "restore the ledger file from a backup") from None
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise LedgerCorrupt(f"event #{seq} ({type_name}) has an unreadable payload: {exc}; "
                            "restore the ledger file from a backup") from None
    if not isinstance(data, dict):
        raise LedgerCorrupt(f"event #{seq} ({type_name}) has a payload that is not an object")
    if not isinstance(schema_version, int):
        raise LedgerCorrupt(f"event #{seq} ({type_name}) has schema version {schema_version!r}")
    data = _upcast(seq, type_name, schema_version, current, data)
    try:
        msgspec.convert(data, known.shape)
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as exc:
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
