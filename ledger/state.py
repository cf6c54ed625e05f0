"""The catalog as a fold of the log: ``evolve(state, event) -> state``, and nothing else.

No I/O happens here. The state is a frozen value built from persistent
(hash-array-mapped-trie) maps, so ``evolve`` returns a new catalog that shares
almost everything with the old one instead of copying it; ``fold`` applies a
batch of events through the maps' transient "mutation" views and freezes the
result once, which is what makes replaying a million events cheap.

Folding also checks the log as it goes: sequence numbers, stream versions and
times must each increase, and every event must fit the state it lands on.
A log that breaks those rules is reported as ``LedgerCorrupt`` with the event's
sequence number, instead of being folded into a state that lies.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Callable, Iterable, Iterator

import attrs
import orjson
from immutables import Map

from .clock import Micros
from .errors import LedgerCorrupt
from .events import (
    DatabaseDropped, DatabaseUndropped, Event, Recorded, RetentionSet, TableCreated, TableDropped,
    TablePurged, TableUndropped, VacuumFinished, VacuumStarted, WatermarkAdvanced, decode_event,
)
from .names import database_of

DEFAULT_RETENTION_SECONDS = 7 * 86_400
RETENTION_FLOOR_SECONDS = 86_400


@attrs.frozen
class Instance:
    """One incarnation of a table. ``name`` is its current name, or its last one once dropped."""

    id: str
    name: str
    path: str
    created_at: Micros
    dropped_at: Micros | None = None
    purged_at: Micros | None = None

    @property
    def database(self) -> str:
        return database_of(self.name)

    @property
    def is_live(self) -> bool:
        return self.dropped_at is None

    @property
    def is_dropped(self) -> bool:
        """Dropped and not yet purged: listed, and restorable unless blocked."""
        return self.dropped_at is not None and self.purged_at is None


@attrs.frozen
class VacuumRun:
    """A vacuum that recorded its start and not yet its end: it may still be deleting,
    or it died; the next vacuum takes over its instances."""

    run_id: str
    started_at: Micros
    table_ids: tuple[str, ...]
    taken_over: bool = False
    """A later vacuum took over its tables; it may still finish, but is not resumed again."""


_EMPTY: Map = Map()


class Archive:
    """Instances purged before the last snapshot: final, and rarely asked about.

    A long-lived ledger is mostly purged instances. Opening it from a snapshot
    must not build an object for each, so the archive keeps their ids as a
    set (enough to refuse reusing one) and their details as JSON bytes, parsed
    the first time anyone asks (an undrop by id of a purged table, history,
    verify). Nothing is ever added to it: purges after the snapshot stay in
    ``Catalog.instances`` until the next snapshot moves them here.
    """

    __slots__ = ("ids", "_blob", "_parsed")

    def __init__(self, ids: frozenset[str] = frozenset(), blob: bytes = b"{}") -> None:
        self.ids = ids
        self._blob = blob
        self._parsed: dict[str, Instance] | None = None if ids else {}

    def _details(self) -> dict[str, Instance]:
        if self._parsed is None:
            self._parsed = {id_: Instance(id_, *row) for id_, row in orjson.loads(self._blob).items()}
        return self._parsed

    def get(self, id_: str) -> Instance | None:
        return self._details().get(id_) if id_ in self.ids else None

    def values(self) -> Iterable[Instance]:
        return self._details().values()

    def __len__(self) -> int:
        return len(self.ids)


_NO_ARCHIVE = Archive()


@attrs.frozen(eq=False)
class Catalog:
    seq: int = 0
    last_time: Micros = 0
    versions: Map = _EMPTY            # stream -> version of its newest event
    instances: Map = _EMPTY           # id -> Instance, purged ones included
    bindings: Map = _EMPTY            # "db.table" -> id of the live instance
    dropped: Map = _EMPTY             # "db.table" -> ids dropped and not purged, oldest first
    database_drops: Map = _EMPTY      # db -> ids of its latest drop that are still dropped
    watermarks: Map = _EMPTY          # scope text -> Micros
    retentions: Map = _EMPTY          # scope text -> seconds
    vacuums: Map = _EMPTY             # run id -> VacuumRun, runs not yet finished
    archive: Archive = _NO_ARCHIVE    # purged before the last snapshot (not in instances)

    def __eq__(self, other: object) -> bool:
        """Equal as catalogs: where a purged instance is kept (archive or map) does not count."""
        if not isinstance(other, Catalog):
            return NotImplemented
        same = all(getattr(self, f) == getattr(other, f) for f in _COMPARED)
        return same and self._all_by_id() == other._all_by_id()

    __hash__ = None  # type: ignore[assignment]

    def _all_by_id(self) -> dict[str, Instance]:
        merged = {i.id: i for i in self.archive.values()} if self.archive.ids else {}
        merged.update(self.instances.items())
        return merged

    def instance(self, id_: str) -> Instance | None:
        """Any instance by id, archived ones included."""
        found = self.instances.get(id_)
        return found if found is not None else self.archive.get(id_)

    def has_id(self, id_: str) -> bool:
        return id_ in self.instances or id_ in self.archive.ids

    def all_instances(self) -> Iterable[Instance]:
        yield from self.instances.values()
        yield from self.archive.values()

    def version(self, stream: str) -> int:
        return self.versions.get(stream, 0)

    def live(self, name: str) -> Instance | None:
        id_ = self.bindings.get(name)
        return None if id_ is None else self.instances[id_]

    def dropped_instances(self, *, database: str | None = None,
                          name: str | None = None) -> list[Instance]:
        """Dropped, unpurged instances, newest drop first (ties: newest created first)."""
        if name is not None:
            ids: Iterable[str] = self.dropped.get(name, ())
        elif database is not None:
            ids = (i for n, group in self.dropped.items() if database_of(n) == database for i in group)
        else:
            ids = (i for group in self.dropped.values() for i in group)
        found = [self.instances[i] for i in ids]
        found.sort(key=lambda inst: (inst.dropped_at, inst.created_at), reverse=True)
        return found

    def watermark(self, scope: object) -> Micros | None:
        return self.watermarks.get(str(scope))

    def covering_scopes(self, inst: Instance) -> tuple[str, str, str]:
        """The three scopes whose watermarks guard an instance: ledger, its database, itself."""
        return ("ledger", f"database:{inst.database}", f"table:{inst.id}")

    def effective_watermark(self, inst: Instance) -> Micros | None:
        marks = [m for m in map(self.watermarks.get, self.covering_scopes(inst)) if m is not None]
        return max(marks) if marks else None

    def is_blocked(self, inst: Instance) -> bool:
        """R3: dropped at or before its effective watermark (or purged): never coming back."""
        if inst.purged_at is not None:
            return True
        if inst.dropped_at is None:
            return False
        mark = self.effective_watermark(inst)
        return mark is not None and inst.dropped_at <= mark

    def retention_seconds(self, inst: Instance) -> int:
        """The most specific retention that applies: table, then database, then ledger."""
        for scope in (f"table:{inst.id}", f"database:{inst.database}", "ledger"):
            seconds = self.retentions.get(scope)
            if seconds is not None:
                return seconds
        return DEFAULT_RETENTION_SECONDS

    def unfinished_vacuums(self) -> list[VacuumRun]:
        """Runs that started, did not finish, and no later run took over."""
        return sorted((run for run in self.vacuums.values() if not run.taken_over),
                      key=lambda run: run.started_at)


_COMPARED = ("seq", "last_time", "versions", "bindings", "dropped", "database_drops", "watermarks",
             "retentions", "vacuums")


def evolve(state: Catalog, record: Recorded) -> Catalog:
    """The next state after one recorded event."""
    return fold(state, (record,))


def fold(state: Catalog, records: Iterable[Recorded]) -> Catalog:
    """The state after a batch of recorded events, in sequence order."""
    builder = _Builder(state)
    for r in records:
        try:
            builder.apply(r.seq, r.stream, r.version, r.time, r.event)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise _malformed(r.seq, exc) from None
    return builder.finish()


def fold_rows(state: Catalog, rows: Iterable[tuple]) -> Catalog:
    """``fold`` straight from stored rows ``(seq, stream, version, type, schema_version,
    time, actor, payload)``, without building a ``Recorded`` envelope for each, and with
    the cyclic garbage collector paused: replay is the hot path."""
    builder = _Builder(state)
    seq = state.seq
    with gc_paused():
        try:
            for seq, stream, version, type_name, schema_version, time, _actor, payload in rows:
                builder.apply(seq, stream, version, time, decode_event(seq, type_name, schema_version, payload))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise _malformed(seq, exc) from None
    return builder.finish()


def _malformed(seq: int, exc: Exception) -> LedgerCorrupt:
    """A field of the wrong type (a time stored as text, an id that is a list): the fold does
    not check every field's type on its hot path, but it never lets such a row through."""
    return _corrupt(f"event #{seq} has a field of the wrong type or shape ({type(exc).__name__}: {exc})")


def _corrupt(message: str) -> LedgerCorrupt:
    """Every inconsistency the fold finds means the file was damaged or edited by hand."""
    return LedgerCorrupt(f"{message}; restore the ledger file from a backup")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """A fold allocates millions of small objects and makes no reference cycles, so the
    cyclic collector would only rescan them again and again (it was 40% of replay time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Builder:
    """Transient, mutable views of a catalog's maps, frozen again by ``finish``.

    Only ``fold`` sees one, and it never escapes: callers only ever hold
    frozen catalogs. Stream versions are kept in a plain dict until the end,
    because every event moves one and only the last value matters.
    """

    _MAPS = ("instances", "bindings", "dropped", "database_drops", "watermarks", "retentions", "vacuums")

    def __init__(self, state: Catalog) -> None:
        self._state = state
        self.seq = state.seq
        self.last_time = state.last_time
        self._base_versions = state.versions
        self._versions: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        """A map's mutable view, made the first time a handler touches it (a command's
        single event usually touches two maps of seven). An empty map, as in a replay
        from nothing, is built as a plain dict, several times cheaper, and frozen once."""
        if name not in self._MAPS:
            raise AttributeError(name)
        base = getattr(self._state, name)
        view = base.mutate() if len(base) else {}
        setattr(self, name, view)
        return view

    def finish(self) -> Catalog:
        maps = {name: self._frozen(name) for name in self._MAPS}
        versions = self._base_versions.update(self._versions) if self._versions else self._base_versions
        return Catalog(seq=self.seq, last_time=self.last_time, versions=versions,
                       archive=self._state.archive, **maps)

    def _frozen(self, name: str) -> Map:
        view = self.__dict__.get(name)
        if view is None:
            return getattr(self._state, name)
        return Map(view) if isinstance(view, dict) else view.finish()

    def apply(self, seq: int, stream: str, version: int, time: Micros, event: Event) -> None:
        if seq != self.seq + 1:
            raise _corrupt(f"event #{seq} follows #{self.seq}: sequence numbers must run without "
                           "gaps (an event is missing or out of place)")
        if not isinstance(time, int):
            raise TypeError(f"time {time!r} is not whole microseconds")
        if time <= self.last_time:
            raise _corrupt(f"event #{seq} is timed at or before the event before it; event times must increase")
        current = self._versions.get(stream)
        if current is None:
            current = self._base_versions.get(stream, 0)
        if version != current + 1:
            raise _corrupt(f"event #{seq} is version {version} of stream {stream!r}, expected {current + 1}")
        handler = _HANDLERS.get(event.__class__)
        if handler is None:
            raise _corrupt(f"event #{seq}: no fold rule for {type(event).__name__}")
        handler(self, event, seq, time)
        self.seq = seq
        self.last_time = time
        self._versions[stream] = version

    # --- helpers shared by the handlers -------------------------------------------------

    def instance(self, id_: str, seq: int) -> Instance:
        inst = self.instances.get(id_)
        if inst is None:
            what = "was purged" if id_ in self._state.archive.ids else "was never created"
            raise _corrupt(f"event #{seq} names table id {id_}, which {what}")
        return inst

    def drop(self, id_: str, seq: int, time: Micros) -> None:
        inst = self.instance(id_, seq)
        if self.bindings.get(inst.name) != id_:
            raise _corrupt(f"event #{seq} drops {inst.name} ({id_}), which is not live")
        del self.bindings[inst.name]
        self.dropped[inst.name] = self.dropped.get(inst.name, ()) + (id_,)
        # Direct construction: attrs.evolve is several times slower, and replay does this a lot.
        self.instances[id_] = Instance(id_, inst.name, inst.path, inst.created_at, time, None)

    def undrop(self, id_: str, name: str, seq: int) -> None:
        inst = self.instance(id_, seq)
        if not inst.is_dropped or name in self.bindings:
            raise _corrupt(f"event #{seq} restores {id_} as {name}, which the state forbids")
        self._forget_dropped(inst)
        drops = self.database_drops.get(inst.database)
        if drops is not None and id_ in drops:
            _set_or_delete(self.database_drops, inst.database, tuple(i for i in drops if i != id_))
        self.bindings[name] = id_
        self.instances[id_] = Instance(id_, name, inst.path, inst.created_at, None, None)

    def _forget_dropped(self, inst: Instance) -> None:
        remaining = tuple(i for i in self.dropped.get(inst.name, ()) if i != inst.id)
        _set_or_delete(self.dropped, inst.name, remaining)


def _set_or_delete(mapping: Any, key: str, value: Any) -> None:
    if value:
        mapping[key] = value
    elif key in mapping:
        del mapping[key]


def _on_created(b: _Builder, e: TableCreated, seq: int, time: Micros) -> None:
    if not (isinstance(e.table_id, str) and isinstance(e.name, str) and isinstance(e.path, str)):
        raise TypeError(f"table {e.table_id!r} named {e.name!r} at {e.path!r}")
    if e.table_id in b.instances or e.table_id in b._state.archive.ids or e.name in b.bindings:
        raise _corrupt(f"event #{seq} creates {e.name} ({e.table_id}) over an existing one")
    b.instances[e.table_id] = Instance(e.table_id, e.name, e.path, time)
    b.bindings[e.name] = e.table_id


def _on_dropped(b: _Builder, e: TableDropped, seq: int, time: Micros) -> None:
    b.drop(e.table_id, seq, time)


def _on_undropped(b: _Builder, e: TableUndropped, seq: int, time: Micros) -> None:
    b.undrop(e.table_id, e.name, seq)


def _on_database_dropped(b: _Builder, e: DatabaseDropped, seq: int, time: Micros) -> None:
    for id_ in e.table_ids:
        b.drop(id_, seq, time)
    b.database_drops[e.database] = e.table_ids


def _on_database_undropped(b: _Builder, e: DatabaseUndropped, seq: int, time: Micros) -> None:
    for id_ in e.table_ids:
        b.undrop(id_, b.instance(id_, seq).name, seq)
    if e.database in b.database_drops:
        del b.database_drops[e.database]


def _on_watermark(b: _Builder, e: WatermarkAdvanced, seq: int, time: Micros) -> None:
    if not isinstance(e.to, int) or not isinstance(e.scope, str):
        raise TypeError(f"watermark {e.scope!r} to {e.to!r}")
    current = b.watermarks.get(e.scope)
    if current is not None and e.to <= current:
        raise _corrupt(f"event #{seq} moves watermark {e.scope} back or nowhere")
    b.watermarks[e.scope] = e.to


def _on_retention(b: _Builder, e: RetentionSet, seq: int, time: Micros) -> None:
    if not (e.seconds is None or isinstance(e.seconds, int)) or not isinstance(e.scope, str):
        raise TypeError(f"retention {e.scope!r} of {e.seconds!r} seconds")
    if e.seconds is not None:  # zero is a real setting: "no retention"
        b.retentions[e.scope] = e.seconds
    elif e.scope in b.retentions:
        del b.retentions[e.scope]


def _on_purged(b: _Builder, e: TablePurged, seq: int, time: Micros) -> None:
    inst = b.instance(e.table_id, seq)
    if not inst.is_dropped:
        raise _corrupt(f"event #{seq} purges {inst.name} ({inst.id}), which is not dropped")
    b._forget_dropped(inst)
    b.instances[e.table_id] = Instance(inst.id, inst.name, inst.path, inst.created_at, inst.dropped_at, time)


def _on_vacuum_started(b: _Builder, e: VacuumStarted, seq: int, time: Micros) -> None:
    for earlier in e.resumes:
        run = b.vacuums.get(earlier)
        if run is not None:
            b.vacuums[earlier] = VacuumRun(run.run_id, run.started_at, run.table_ids, True)
    b.vacuums[e.run_id] = VacuumRun(e.run_id, time, e.table_ids)


def _on_vacuum_finished(b: _Builder, e: VacuumFinished, seq: int, time: Micros) -> None:
    if e.run_id not in b.vacuums:
        raise _corrupt(f"event #{seq} finishes vacuum {e.run_id}, which is not in progress")
    del b.vacuums[e.run_id]


_HANDLERS: dict[type, Callable[[_Builder, Any, int, Micros], None]] = {
    TableCreated: _on_created,
    TableDropped: _on_dropped,
    TableUndropped: _on_undropped,
    DatabaseDropped: _on_database_dropped,
    DatabaseUndropped: _on_database_undropped,
    WatermarkAdvanced: _on_watermark,
    RetentionSet: _on_retention,
    TablePurged: _on_purged,
    VacuumStarted: _on_vacuum_started,
    VacuumFinished: _on_vacuum_finished,
}
