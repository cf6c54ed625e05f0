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
from typing import Any, Callable, Generic, Iterable, Mapping, Protocol, TypeVar

import attrs
from immutables import Map

from ..clock import MAX_MICROS, Micros
from ..errors import LedgerCorrupt
from .concern import Handler, corrupt
from .events import Recorded, Row, decode_event
from .maps import Held, OverlayMap, OverlayMutation

_MUTATION: Any = type(Map().mutate())


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
    states. ``b.tables`` (say) is a copy of the tables slice whose maps are mutable,
    made the first time a handler touches it; a command's single event usually
    touches one or two slices. Stream versions are kept in a plain dict until the
    end, because every event moves one and only the last value matters.
    """

    def __init__(self, state: Any, slices: frozenset[str], handlers: Mapping[type, Handler], *,
                 bulk: bool = False, tracked: bool = False) -> None:
        self.before = state
        """The state before this batch (read-only)."""
        self._bulk = bulk
        self._tracked = tracked
        """Every map a ``Tracked`` dict of its own (``Steps``)."""
        self.seq: int = state.seq
        self.last_time: Micros = state.last_time
        self._slices = slices
        self._handlers = handlers
        self.touched: list[str] = []
        """The slices this batch thawed (changed, or about to be)."""
        self._streams: dict[str, int] = {}

    def __getattr__(self, name: str) -> Thawed:
        if name not in self._slices:
            raise AttributeError(name)
        view = _thaw(getattr(self.before, name), self._bulk, self._tracked)
        setattr(self, name, view)
        self.touched.append(name)
        return view

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


class Folder(Generic[S]):
    """Folds recorded events (or stored rows) into states of one shape, ``S``."""

    def __init__(self, slices: Iterable[str], handlers: Mapping[type, Handler]) -> None:
        self.slices = frozenset(slices)
        self.handlers = dict(handlers)

    def fold(self, state: S, records: Iterable[Recorded]) -> S:
        """The state after a batch of recorded events, in sequence order."""
        return self.fold_placed(state, ((r.seq, r.stream, r.version, r.time, r.event) for r in records))

    def fold_placed(self, state: S, placed: Iterable[Placed]) -> S:
        """``fold`` of events as the store placed them, without a ``Recorded`` envelope for each:
        a command folds back what it appended this way (an envelope cost 8,000 instructions of
        the 300,000 a one-event command takes, callgrind)."""
        builder = Builder(state, self.slices, self.handlers)
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
        builder = Builder(state, self.slices, self.handlers, bulk=len(first) >= BULK if bulk is None else bulk)
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
        self._builder = Builder(state, folder.slices, folder.handlers, bulk=True, tracked=True)
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
            for field in _names(view.__class__):
                value = getattr(view, field)
                if isinstance(value, Tracked):
                    changed[f"{name}.{field}"] = value.take_changed()
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


def _thaw(part: Any, bulk: bool, tracked: bool = False) -> Any:
    """A copy of a slice whose maps can be changed in place (``bulk``: a long batch, see ``BULK``;
    ``tracked``: every map a ``Tracked`` dict, see ``Steps``)."""
    values = []
    for value in _values_of(part.__class__)(part):
        if tracked and isinstance(value, (Map, OverlayMap)):
            value = Tracked(value.items())
        elif isinstance(value, Map):
            value = value.mutate() if len(value) else {}
        elif isinstance(value, OverlayMap):
            value = dict(value.items()) if bulk and isinstance(value.base, Held) else value.mutate()
        values.append(value)
    return part.__class__(*values)


def _freeze(view: Any) -> Any:
    values = []
    for value in _values_of(view.__class__)(view):
        if isinstance(value, dict):
            value = OverlayMap.held(value) if len(value) >= HOLD_AT else Map(value)
        elif isinstance(value, (_MUTATION, OverlayMutation)):
            value = value.finish()
        values.append(value)
    return view.__class__(*values)


def set_or_delete(mapping: Any, key: str, value: Any) -> None:
    """Keep a map free of empty entries: an empty tuple means the key is gone."""
    if value:
        mapping[key] = value
    elif key in mapping:
        del mapping[key]
