"""How a slice field is written to a snapshot and read back: derived from its declaration.

A concern declares each field of its slice with ``core.concern.mapping(values)`` and
nothing more; the forms here follow from that declaration, so a new concern needs nothing
in the persistence package. A stored state keeps every field one entry per key (``KeyedCodec``),
read back lazily. The one field with a form of its own is the tables' archive of purged
instances (``archive``).
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Mapping, Protocol

import attrs
from ..core.maps import OverlayMap
from .archive import ARCHIVE_CODEC


class Codec(Protocol):
    """Turns one value of a map into JSON-able data and back."""

    def encode(self, value: Any) -> Any: ...

    def decode(self, data: Any) -> Any: ...


@attrs.frozen
class Plain:
    """Values JSON holds as they are: text, integers, None."""

    def encode(self, value: Any) -> Any:
        return value

    def decode(self, data: Any) -> Any:
        return data


@attrs.frozen
class Ids:
    """A tuple of ids (JSON gives back a list)."""

    def encode(self, value: Any) -> Any:
        return list(value)

    def decode(self, data: Any) -> Any:
        return tuple(data)


@attrs.frozen
class Record:
    """A frozen attrs value written as the list of its fields, in order; tuple fields come back
    as tuples (JSON gives lists)."""
    cls: type

    def encode(self, value: Any) -> Any:
        return _fields_of(self.cls)(value)

    def decode(self, data: Any) -> Any:
        tuples = _tuple_fields(self.cls)
        if tuples:
            data = list(data)
            for i in tuples:
                data[i] = None if data[i] is None else tuple(data[i])
        return self.cls(*data)


@functools.cache
def _fields_of(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """A value's fields as a tuple, in order (JSON writes it as a list): ``attrgetter`` does in C
    what a comprehension of ``getattr`` does four times slower, for every entry of a snapshot."""
    names = tuple(f.name for f in attrs.fields(cls))
    if len(names) == 1:
        get = operator.attrgetter(names[0])
        return lambda value: (get(value),)
    return operator.attrgetter(*names)


@functools.cache
def _tuple_fields(cls: type) -> tuple[int, ...]:
    """Positions of the fields declared as tuples, or as tuples or None (annotations are text here:
    see __future__)."""
    return tuple(i for i, f in enumerate(attrs.fields(cls)) if str(f.type).startswith("tuple"))


@attrs.frozen
class MapOf:
    """A persistent map of text keys to values of one codec, one entry per key (read when asked
    for: see ``lazy``)."""
    values: Codec

    def entries(self, value: Mapping[str, Any]) -> Mapping[str, Any]:
        return value

    def encode_item(self, item: Any) -> Any:
        return self.values.encode(item)

    def decode_item(self, key: str, data: Any) -> Any:
        return self.values.decode(data)

    def stored(self, entries: OverlayMap) -> Any:
        return entries


class KeyedCodec(Protocol):
    """A slice field stored one entry per key (every field is): ``MapOf``, the tables' archive."""

    def entries(self, value: Any) -> Mapping[str, Any]:
        """The field as a mapping of text keys to items (an ``OverlayMap`` if it was read from a stored snapshot)."""

    def encode_item(self, item: Any) -> Any:
        """One item as JSON-able data."""

    def decode_item(self, key: str, data: Any) -> Any:
        """``encode_item`` undone (the key is given back: an item need not store it twice)."""

    def stored(self, entries: OverlayMap) -> Any:
        """The field's value whose entries are read lazily from a stored snapshot."""


PLAIN, IDS = Plain(), Ids()


def encoder(codec: KeyedCodec) -> Callable[[Any], Any] | None:
    """``codec.encode_item`` as the one call it comes down to (a record's ``attrgetter``, ``list``),
    None for items JSON holds as they are: for ``map`` over many items, where the three Python
    calls an item of ``encode_item`` cost more than encoding it."""
    if isinstance(codec, MapOf):
        if isinstance(codec.values, Record):
            return _fields_of(codec.values.cls)
        if isinstance(codec.values, Ids):
            return list
        if isinstance(codec.values, Plain):
            return None
    return codec.encode_item


@functools.cache
def _map_codec(values: type | None) -> MapOf:
    if values is None:
        return MapOf(PLAIN)
    if values is tuple:
        return MapOf(IDS)
    return MapOf(Record(values))


def codec_of(field: attrs.Attribute[Any]) -> Any:
    """The field's ``KeyedCodec``."""
    if field.metadata.get("archive"):
        return ARCHIVE_CODEC
    return _map_codec(field.metadata["values"])
