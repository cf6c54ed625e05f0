"""The shape every concern shares: decisions, slices of state, and how a concern is declared.

A *concern* (table lifecycle, watermarks and retention, vacuum runs, ...) owns
its events, its slice of the folded state, the fold handlers that change that
slice, its commands and the decisions that answer them. It is a value, in the
manner of the Decider pattern: ``Concern(initial, evolve, decide)``. The
composition module (``model``) gives each concern a field of ``State`` and joins
their handlers and deciders; nothing else registers anything anywhere.

Rules of the game, which keep the fold cheap and the concerns honest:

* A handler writes only its own concern's slice. It may read any slice.
* A decider reads the whole ``State`` and returns a ``Decision``. It may emit
  another concern's events (a vacuum advances watermarks) but only through that
  concern's own functions, so each rule is checked in one place.
* A slice is a frozen attrs class whose fields are persistent maps declared with
  ``mapping(...)``; its field list is the only description of its shape: the fold's
  mutable views, equality and the snapshot codec are all derived from it.
"""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

import attrs
from immutables import Map

from ..clock import Micros
from ..errors import LedgerCorrupt
from .lazy import LazyMap

if TYPE_CHECKING:
    from .fold import Builder

EMPTY: Map = Map()


@attrs.frozen
class Decision:
    """Events to append as ``(stream, event)``, the streams read, and what to tell the caller.

    The ledger appends only if every stream in ``reads`` is still at the version the
    deciding state saw (R4): a verdict is never acted on after the facts behind it changed.
    """

    events: tuple[tuple[str, Any], ...] = ()
    reads: frozenset[str] = frozenset()
    result: Any = None
    attachments: tuple[tuple[str, bytes], ...] = ()
    """Content-addressed bytes the events name by digest (a write's file list), stored with them."""


Handler = Callable[["Builder", Any, int, Micros], None]
"""``(builder, event, seq, time)``: apply one event to the builder's mutable slices."""

Decider = Callable[[Any, Any], Decision]
"""``(state, command) -> Decision``; raises a ``LedgerError`` to refuse."""


@attrs.frozen
class Concern:
    initial: Any
    """The empty slice: the state of this concern before any event."""
    evolve: Mapping[type, Handler]
    decide: Mapping[type, Decider]


# --- slice fields and how they are written to a snapshot ------------------------------------

class Codec(Protocol):
    """Turns a slice field into JSON-able data (or, if ``raw``, bytes kept apart) and back."""
    raw: bool

    def encode(self, value: Any) -> Any: ...

    def decode(self, data: Any) -> Any: ...


@attrs.frozen
class Plain:
    """Values JSON holds as they are: text, integers, None."""
    raw: bool = False

    def encode(self, value: Any) -> Any:
        return value

    def decode(self, data: Any) -> Any:
        return data


@attrs.frozen
class Ids:
    """A tuple of ids (JSON gives back a list)."""
    raw: bool = False

    def encode(self, value: Any) -> Any:
        return list(value)

    def decode(self, data: Any) -> Any:
        return tuple(data)


@attrs.frozen
class Record:
    """A frozen attrs value written as the list of its fields, in order; tuple fields come back
    as tuples (JSON gives lists)."""
    cls: type
    raw: bool = False

    def encode(self, value: Any) -> Any:
        return _fields_of(self.cls)(value)

    def decode(self, data: Any) -> Any:
        tuples = _tuple_fields(self.cls)
        if tuples:
            data = list(data)
            for i in tuples:
                data[i] = tuple(data[i])
        return self.cls(*data)


@functools.cache
def _fields_of(cls: type) -> Callable[[Any], tuple]:
    """A value's fields as a tuple, in order (JSON writes it as a list): ``attrgetter`` does in C
    what a comprehension of ``getattr`` does four times slower, for every entry of a snapshot."""
    names = tuple(f.name for f in attrs.fields(cls))
    if len(names) == 1:
        get = operator.attrgetter(names[0])
        return lambda value: (get(value),)
    return operator.attrgetter(*names)


@functools.cache
def _tuple_fields(cls: type) -> tuple[int, ...]:
    """Positions of the fields declared as tuples (annotations are text here: see __future__)."""
    return tuple(i for i, f in enumerate(attrs.fields(cls)) if str(f.type).startswith("tuple"))


@attrs.frozen
class MapOf:
    """A persistent map of text keys to values of one codec."""
    values: Codec
    raw: bool = False

    def encode(self, value: Map) -> Any:
        encode = self.values.encode
        return {key: encode(item) for key, item in value.items()}

    def decode(self, data: Any) -> Map:
        decode = self.values.decode
        return Map({key: decode(item) for key, item in data.items()})

    # As a keyed part of a stored snapshot (one entry per key, read when asked for: see ``lazy``).

    def entries(self, value: Map) -> Mapping[str, Any]:
        return value

    def encode_item(self, item: Any) -> Any:
        return self.values.encode(item)

    def decode_item(self, key: str, data: Any) -> Any:
        return self.values.decode(data)

    def stored(self, entries: LazyMap) -> Any:
        return entries


class KeyedCodec(Protocol):
    """A slice field stored one entry per key (every field is): ``MapOf``, the tables' archive."""

    def entries(self, value: Any) -> Mapping[str, Any]:
        """The field as a mapping of text keys to items (a ``LazyMap`` if it was read lazily)."""

    def encode_item(self, item: Any) -> Any:
        """One item as JSON-able data."""

    def decode_item(self, key: str, data: Any) -> Any:
        """``encode_item`` undone (the key is given back: an item need not store it twice)."""

    def stored(self, entries: LazyMap) -> Any:
        """The field's value whose entries are read lazily from a stored snapshot."""


PLAIN, IDS = Plain(), Ids()


def mapping(values: Codec = PLAIN) -> Any:
    """Declare a slice field: a persistent map, empty at first, whose values use ``values``."""
    return attrs.field(default=EMPTY, metadata={"codec": MapOf(values)})


def codec_of(field: attrs.Attribute) -> Any:
    """The field's codec: a ``Codec`` for history snapshots, ``KeyedCodec`` for the stored snapshot."""
    return field.metadata["codec"]


# --- the fold's refusals --------------------------------------------------------------------

def corrupt(message: str) -> LedgerCorrupt:
    """Every inconsistency the fold finds means the file was damaged or edited by hand."""
    return LedgerCorrupt(f"{message}; restore the ledger file from a backup")
