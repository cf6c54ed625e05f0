"""The fold engine: recorded events applied to a state, with the log's own rules checked.

The state is a frozen value of persistent (hash-array-mapped-trie) maps, so a
fold returns a new state that shares almost everything with the old one. A batch
is applied through transient mutable views of the slices it touches (a plain
dict for an empty map, as in a replay from nothing: several times cheaper) and
frozen once at the end, which is what makes replaying a million events cheap.

The engine checks what every log must satisfy whatever its events mean:
sequence numbers run without gaps, times strictly increase (R6), each stream's
versions run 1, 2, 3, ... The concerns' handlers check the rest (an undrop
behind its watermark, a watermark that moves back): a log that breaks a rule is
``LedgerCorrupt`` naming the event, never a state that lies.
"""

from __future__ import annotations

import functools
import itertools
import operator
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, Mapping, Protocol, TypeVar

import attrs
from immutables import Map

from ..clock import MAX_MICROS, Micros
from ..errors import LedgerCorrupt
from .concern import Handler, corrupt
from .events import Recorded, Row, decode_event
from .maps import Held, OverlayMap


class Folded(Protocol):
    """A state as the engine needs it (``model.State``): its ``seq``, and the slices ``Folder.slices`` names."""

    @property
    def seq(self) -> int:
        """The sequence number of the last event folded (0: none)."""


Placed = tuple[int, str, int, Micros, Any]
"""An event where the store placed it: ``(seq, stream, version, time, event)``."""
S = TypeVar("S", bound=Folded)
"""The shape of the states a ``Folder`` folds (``model.State``)."""
Thawed = Any
"""A slice as the fold's handlers see it (``builder.tables``, say): the slice's class, each of its
maps a mutable view (a dict, an ``immutables`` mutation, an ``OverlayMutation``, a ``Tracked``
dict) read and written by key. No one static type describes all of them; a handler names the type
of what it reads (``inst: Instance | None = b.tables.instances.get(id_)``)."""

HOLD_AT = 4096
"""A map built as a dict with at least this many entries (a replay from nothing) is frozen as a
``OverlayMap`` over the dict itself (``OverlayMap.held``), not copied into a persistent map: the copy
cost about a tenth of a million-event replay. Smaller ones become ``Map``, which read a little faster."""
BULK = 1000
"""A batch of at least this many rows thaws a big map held in memory into a dict of its own (a
copy, in C) and folds into that, as a replay from nothing does: three times faster per event than
changes on top of the held entries, which a command's few events keep (a copy would cost more)."""


class Builder:
    """Transient, mutable views of a state's slices, frozen again by ``finish``.

    Only the fold sees one, and it never escapes: callers only ever hold frozen
    states. ``b.tables`` (say) is a view of the tables slice (``_thawing``) made the
    first time a handler touches it, and each of its maps is made mutable the first
    time a handler touches that map: a command's single event touches one or two
    maps of one or two slices, and the others stay the very objects the state before
    holds. Stream versions are kept in a plain dict until the end, because every
    event moves one and only the last value matters.
    """

    def __init__(self, state: Any, handlers: Mapping[type, Handler], *, bulk: bool = False,
                 tracked: bool = False) -> None:
        self.before = state
        """The state before this batch (read-only)."""
        self._bulk = bulk
        self._tracked = tracked
        """Every map a ``Tracked`` dict of its own (``Steps``)."""
        self.seq: int = state.seq
        self.last_time: Micros = state.last_time
        self._handlers = handlers
        self.touched: list[str] = []
        """The slices this batch thawed (changed, or about to be)."""
        self._streams: dict[str, int] = {}

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Thawed:
            """A slice's view, ``b.tables`` (say): ``_SliceOnTouch`` makes it, in a ``_builder_class``."""

    def apply(self, seq: int, stream: str, version: int, time: Micros, event: Any) -> None:
        if seq != self.seq + 1:
            raise corrupt(f"event #{seq} follows #{self.seq}: sequence numbers must run without "
                          "gaps (an event is missing or out of place)")
        if not isinstance(time, int):
            raise TypeError(f"time {time!r} is not whole microseconds")
        if time <= self.last_time:
            raise corrupt(f"event #{seq} is timed at or before the event before it; event times must increase")
        if time > MAX_MICROS:
            raise corrupt(f"event #{seq} is timed {time} microseconds after 1970, past the last time a date can "
                          "show (9999-12-31)")
        current = self._streams.get(stream)
        if current is None:
            current = self.before.streams.get(stream, 0)
        if version != current + 1:
            raise corrupt(f"event #{seq} is version {version} of stream {stream!r}, expected {current + 1}")
        handler = self._handlers.get(event.__class__)
        if handler is None:
            raise corrupt(f"event #{seq}: no fold rule for {type(event).__name__}")
        handler(self, event, seq, time)
        self.seq = seq
        self.last_time = time
        self._streams[stream] = version

    def finish(self) -> Any:
        """The state after the batch. A builder whose maps are all ``Tracked`` dicts (``Steps``) may
        go on folding afterwards: the state shares those dicts, and changes with them."""
        before = self.before
        cls = before.__class__
        values = list(_values_of(cls)(before))
        at = _positions(cls)
        for name in self.touched:
            values[at[name]] = _freeze(self.__dict__[name])
        values[at["seq"]], values[at["last_time"]] = self.seq, self.last_time
        if self._streams:
            values[at["streams"]] = before.streams.update(self._streams)
        return cls(*values)


class _OnTouch:
    """A descriptor without ``__set__`` for the attribute ``name``, whose ``__get__`` makes the value
    the first time and keeps it on the instance, where Python then finds it without a call."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _SliceOnTouch(_OnTouch):
    """A slice of a builder (``b.tables``): the first time a handler reads it, a view of the state's
    slice (``_thaw``), which the builder then keeps as its own attribute.

    It replaced a ``__getattr__``, which Python calls only after a failed lookup: that cost about
    5,000 instructions more a slice (callgrind)."""

    __slots__ = ()

    def __get__(self, builder: Any, owner: type | None = None) -> Any:
        if builder is None:
            return self
        name = self.name
        view = _thaw(getattr(builder.before, name), builder._bulk, builder._tracked)
        builder.__dict__[name] = view
        builder.touched.append(name)
        return view


@functools.cache
def _builder_class(slices: frozenset[str]) -> type[Builder]:
    """``Builder`` with a ``_SliceOnTouch`` for each of ``slices``."""
    return type("Builder", (Builder,), {name: _SliceOnTouch(name) for name in slices})


class Folder(Generic[S]):
    """Folds recorded events (or stored rows) into states of one shape, ``S``."""

    def __init__(self, slices: Iterable[str], handlers: Mapping[type, Handler]) -> None:
        self.slices = frozenset(slices)
        self.handlers = dict(handlers)
        self.builder = _builder_class(self.slices)
        """The class of this folder's builders: ``Builder`` with a ``_SliceOnTouch`` for each slice."""

    def fold(self, state: S, records: Iterable[Recorded]) -> S:
        """The state after a batch of recorded events, in sequence order."""
        return self.fold_placed(state, ((r.seq, r.stream, r.version, r.time, r.event) for r in records))

    def fold_placed(self, state: S, placed: Iterable[Placed]) -> S:
        """``fold`` of events as the store placed them, without a ``Recorded`` envelope for each:
        a command folds back what it appended this way (an envelope cost 8,000 instructions of
        the 300,000 a one-event command takes, callgrind)."""
        builder = self.builder(state, self.handlers)
        for seq, stream, version, time, event in placed:
            try:
                builder.apply(seq, stream, version, time, event)
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                raise _malformed(seq, exc) from None
        after: S = builder.finish()  # a state of ``state``'s class
        return after

    def fold_rows(self, state: S, rows: Iterable[Row], *, bulk: bool | None = None) -> S:
        """``fold`` straight from stored rows ``(seq, stream, version, type, schema_version,
        time, actor, payload, ...)``, without building a ``Recorded`` envelope for each: replay
        is the hot path.

        ``bulk`` (None: a batch of ``BULK`` rows or more) folds big in-memory maps as dicts of
        their own; False keeps them as changes on top of what they held."""
        rows = iter(rows)
        first = list(itertools.islice(rows, BULK))
        builder = self.builder(state, self.handlers, bulk=len(first) >= BULK if bulk is None else bulk)
        _apply_rows(builder, itertools.chain(first, rows))
        after: S = builder.finish()  # a state of ``state``'s class
        return after


class Steps(Generic[S]):
    """One long fold from nothing, stopped at chosen events to look at the state there, as a
    replay that writes history snapshots (or ``verify``, comparing them) makes it.

    Folded batch by batch, a long fold copied its big maps at the start of every batch (a frozen
    state's dict may never change), and whoever encoded the state at each stop had to compare
    every entry to find what changed: both cost the whole state at every stop. Here every map
    stays one dict from the first stop to the last, and the fold says which keys it changed
    since the last stop (``look``). So what ``look`` gives is a view, good until the fold goes
    on: encode or compare it then, and keep only the last one."""

    def __init__(self, folder: Folder[S], state: S) -> None:
        self._builder = folder.builder(state, folder.handlers, bulk=True, tracked=True)
        self._state = state

    def fold_rows(self, rows: Iterable[Row]) -> int:
        """Fold on through stored ``rows`` (as ``Folder.fold_rows``); returns the seq reached."""
        _apply_rows(self._builder, rows)
        return self._builder.seq

    def look(self) -> tuple[S, dict[str, set[str]]]:
        """The state where the fold stands (a view: see the class), and for each map field
        (``"slice.field"``) the keys set or deleted since the last look (every key, the first time)."""
        builder = self._builder
        if builder.seq != self._state.seq:
            self._state = builder.finish()
        changed: dict[str, set[str]] = {}
        for name in builder.touched:
            view = builder.__dict__[name]
            for field in view._thawed:  # every map of the slice: a tracked slice thaws them all at once
                changed[f"{name}.{field}"] = getattr(view, field).take_changed()
        return self._state, changed


class Tracked(dict):  # type: ignore[type-arg]
    """A map of a fold in ``Steps``: a dict that remembers the keys set or deleted since
    ``take_changed`` was last called (the fold's handlers only ever set and delete keys)."""

    __slots__ = ("_changed",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._changed: set[str] = set(self)

    def __setitem__(self, key: str, value: Any) -> None:
        self._changed.add(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        self._changed.add(key)
        dict.__delitem__(self, key)

    def take_changed(self) -> set[str]:
        """The keys changed since the last call (every key, the first time), and start again."""
        changed, self._changed = self._changed, set()
        return changed


def _apply_rows(builder: Builder, rows: Iterable[Row]) -> None:
    """Stored rows ``(seq, stream, version, type, schema_version, time, actor, payload, ...)`` into
    ``builder``, without building a ``Recorded`` envelope for each: replay's hot loop."""
    apply = builder.apply
    seq = builder.seq
    try:
        for row in rows:
            seq = row[0]
            apply(seq, row[1], row[2], row[5], decode_event(seq, row[3], row[4], row[7]))
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise _malformed(seq, exc) from None


def _malformed(seq: int, exc: Exception) -> LedgerCorrupt:
    """A field of the wrong type (a time stored as text, an id that is a list): the fold does
    not check every field's type on its hot path, but it never lets such a row through."""
    return corrupt(f"event #{seq} has a field of the wrong type or shape ({type(exc).__name__}: {exc})")


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in attrs.fields(cls))


@functools.cache
def _positions(cls: type) -> dict[str, int]:
    """Where each field of an attrs class sits among its ``__init__``'s positional arguments."""
    return {name: i for i, name in enumerate(_names(cls))}


@functools.cache
def _values_of(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """Every field's value of an instance of ``cls``, in field order, in one C call.

    A state, a slice or an event is rebuilt after each fold with its fields passed by position:
    by keyword (``cls(**values)``), a 12-field ``State`` cost 29,000 instructions against 12,000
    (callgrind), and the fold of one event rebuilds the state and one or two slices."""
    names = _names(cls)
    if len(names) == 1:  # attrgetter of one name gives the value, not a tuple
        only = names[0]
        return lambda instance: (getattr(instance, only),)
    return operator.attrgetter(*names)


class _ThawOnTouch(_OnTouch):
    """A field of a thawed view (``_thawing``): the first time a handler reads it, the slice's own
    value, its maps made mutable (``_thaw_map``), which the view then keeps as its own attribute.

    Each field costs one call, the first time. Thawing only the maps a handler touches saves the
    others a thaw and a freeze: thawing and freezing a whole
    slice cost 19,000 instructions for the guard and 34,000 for the tables (callgrind, 100
    tables), of the 67,000 / 89,000 a fold of one event took (a watermark / a table created),
    and the event changes one or two of their maps; with this and ``_SliceOnTouch``, 59,000 /
    76,000. (A ``__getattr__`` costs a failed lookup a field, on a slotted slice an exception:
    10,000 instructions against this descriptor's 2,500.)"""

    __slots__ = ()

    def __get__(self, view: Any, owner: type | None = None) -> Any:
        if view is None:
            return self
        fields = view.__dict__
        name = self.name
        value = getattr(fields["_of"], name)
        if value.__class__ is Map:  # the common case, inline: a call costs as much as the thaw
            value = value.mutate() if value else {}
        elif isinstance(value, (Map, OverlayMap)):
            value = _thaw_map(value, fields["_bulk"], False)
        else:  # not a map (the tables' archive): the slice's own, as it is
            fields[name] = value
            return value
        fields["_thawed"].append(name)
        fields[name] = value
        return value


@functools.cache
def _thawing(cls: type) -> type[Any]:
    """The class of a thawed view of a ``cls`` slice: ``cls`` itself (its methods read the view's
    maps) with every field thawed on first touch (``_ThawOnTouch``). The view holds the slice it
    stands for (``_of``), whether the batch is ``bulk``, and the names of the maps it thawed so
    far, in the order it did."""
    return type(f"Thawed{cls.__name__}", (cls,), {name: _ThawOnTouch(name) for name in _names(cls)})


def _thaw(part: Any, bulk: bool, tracked: bool = False) -> Any:
    """A view of a slice whose maps can be changed in place, each thawed when first touched
    (``bulk``: a long batch, see ``BULK``; ``tracked``: every map a ``Tracked`` dict, see ``Steps``,
    all thawed at once, so that ``Steps.look`` sees every map's changes)."""
    view: Any = object.__new__(_thawing(part.__class__))
    thawed: list[str] = []
    fields = view.__dict__
    fields["_of"], fields["_bulk"], fields["_thawed"] = part, bulk, thawed
    if tracked:
        for name, value in zip(_names(part.__class__), _values_of(part.__class__)(part)):
            if isinstance(value, (Map, OverlayMap)):
                fields[name] = _thaw_map(value, bulk, True)
                thawed.append(name)
    return view


def _thaw_map(value: Map[str, Any] | OverlayMap, bulk: bool, tracked: bool) -> Any:
    """A map a handler can change, which never changes ``value`` itself (other states hold it)."""
    if tracked:
        return Tracked(value.items())
    if isinstance(value, Map):
        return value.mutate() if len(value) else {}
    return dict(value.items()) if bulk and isinstance(value.base, Held) else value.mutate()


def _freeze(view: Any) -> Any:
    """The slice a view stands for now: its thawed maps frozen, every other field the very object
    the slice it was made from holds (the slice itself, if no map was thawed)."""
    part = view._of
    if not view._thawed:
        return part
    cls = part.__class__
    values = list(_values_of(cls)(part))
    at = _positions(cls)
    for name in view._thawed:
        values[at[name]] = _freeze_map(getattr(view, name))
    return cls(*values)


def _freeze_map(value: Any) -> Any:
    if isinstance(value, dict):
        return OverlayMap.held(value) if len(value) >= HOLD_AT else Map(value)
    return value.finish()  # an ``immutables`` mutation, or an ``OverlayMutation``


def set_or_delete(mapping: Any, key: str, value: Any) -> None:
    """Keep a map free of empty entries: an empty tuple means the key is gone."""
    if value:
        mapping[key] = value
    elif key in mapping:
        del mapping[key]
