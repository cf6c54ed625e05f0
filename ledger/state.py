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

from typing import Any, Callable, Iterable

import attrs
from immutables import Map

from .clock import Micros
from .errors import LedgerCorrupt
from .events import (
    DatabaseDropped, DatabaseUndropped, Recorded, RetentionSet, TableCreated, TableDropped,
    TablePurged, TableUndropped, VacuumFinished, VacuumStarted, WatermarkAdvanced,
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
    """A vacuum that recorded its start; ``finished`` is False while it may still be deleting."""

    run_id: str
    started_at: Micros
    table_ids: tuple[str, ...]
    finished: bool = False


_EMPTY: Map = Map()


@attrs.frozen
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
    vacuums: Map = _EMPTY             # run id -> VacuumRun

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
        return [run for run in self.vacuums.values() if not run.finished]


def evolve(state: Catalog, record: Recorded) -> Catalog:
    """The next state after one recorded event."""
    return fold(state, (record,))


def fold(state: Catalog, records: Iterable[Recorded]) -> Catalog:
    """The state after a batch of recorded events, in sequence order."""
    builder = _Builder(state)
    for record in records:
        builder.apply(record)
    return builder.finish()


class _Builder:
    """Transient, mutable views of a catalog's maps, frozen again by ``finish``.

    Only ``fold`` sees one, and it never escapes: callers only ever hold
    frozen catalogs.
    """

    _MAPS = ("versions", "instances", "bindings", "dropped", "database_drops",
             "watermarks", "retentions", "vacuums")

    def __init__(self, state: Catalog) -> None:
        self.seq = state.seq
        self.last_time = state.last_time
        for name in self._MAPS:
            setattr(self, name, getattr(state, name).mutate())

    def finish(self) -> Catalog:
        maps = {name: getattr(self, name).finish() for name in self._MAPS}
        return Catalog(seq=self.seq, last_time=self.last_time, **maps)

    def apply(self, rec: Recorded) -> None:
        if rec.seq <= self.seq:
            raise LedgerCorrupt(f"event #{rec.seq} follows #{self.seq}: sequence numbers must increase")
        if rec.time <= self.last_time:
            raise LedgerCorrupt(
                f"event #{rec.seq} is timed at or before the event before it; event times must increase"
            )
        expected = self.versions.get(rec.stream, 0) + 1
        if rec.version != expected:
            raise LedgerCorrupt(
                f"event #{rec.seq} is version {rec.version} of stream {rec.stream!r}, expected {expected}"
            )
        handler = _HANDLERS.get(type(rec.event))
        if handler is None:
            raise LedgerCorrupt(f"event #{rec.seq}: no fold rule for {type(rec.event).__name__}")
        handler(self, rec.event, rec)
        self.seq = rec.seq
        self.last_time = rec.time
        self.versions[rec.stream] = rec.version

    # --- helpers shared by the handlers -------------------------------------------------

    def instance(self, id_: str, rec: Recorded) -> Instance:
        inst = self.instances.get(id_)
        if inst is None:
            raise LedgerCorrupt(f"event #{rec.seq} names table id {id_}, which was never created")
        return inst

    def drop(self, id_: str, rec: Recorded) -> None:
        inst = self.instance(id_, rec)
        if self.bindings.get(inst.name) != id_:
            raise LedgerCorrupt(f"event #{rec.seq} drops {inst.name} ({id_}), which is not live")
        del self.bindings[inst.name]
        self.dropped[inst.name] = self.dropped.get(inst.name, ()) + (id_,)
        self.instances[id_] = attrs.evolve(inst, dropped_at=rec.time)

    def undrop(self, id_: str, name: str, rec: Recorded) -> None:
        inst = self.instance(id_, rec)
        if not inst.is_dropped or name in self.bindings:
            raise LedgerCorrupt(f"event #{rec.seq} restores {id_} as {name}, which the state forbids")
        self._forget_dropped(inst)
        drops = self.database_drops.get(inst.database)
        if drops is not None and id_ in drops:
            self._set_or_delete(self.database_drops, inst.database, tuple(i for i in drops if i != id_))
        self.bindings[name] = id_
        self.instances[id_] = attrs.evolve(inst, name=name, dropped_at=None)

    def _forget_dropped(self, inst: Instance) -> None:
        remaining = tuple(i for i in self.dropped.get(inst.name, ()) if i != inst.id)
        self._set_or_delete(self.dropped, inst.name, remaining)

    @staticmethod
    def _set_or_delete(mapping: Any, key: str, value: Any) -> None:
        if value:
            mapping[key] = value
        elif key in mapping:
            del mapping[key]


def _on_created(b: _Builder, e: TableCreated, rec: Recorded) -> None:
    if e.table_id in b.instances or e.name in b.bindings:
        raise LedgerCorrupt(f"event #{rec.seq} creates {e.name} ({e.table_id}) over an existing one")
    b.instances[e.table_id] = Instance(e.table_id, e.name, e.path, rec.time)
    b.bindings[e.name] = e.table_id


def _on_dropped(b: _Builder, e: TableDropped, rec: Recorded) -> None:
    b.drop(e.table_id, rec)


def _on_undropped(b: _Builder, e: TableUndropped, rec: Recorded) -> None:
    b.undrop(e.table_id, e.name, rec)


def _on_database_dropped(b: _Builder, e: DatabaseDropped, rec: Recorded) -> None:
    for id_ in e.table_ids:
        b.drop(id_, rec)
    b.database_drops[e.database] = e.table_ids


def _on_database_undropped(b: _Builder, e: DatabaseUndropped, rec: Recorded) -> None:
    for id_ in e.table_ids:
        b.undrop(id_, b.instance(id_, rec).name, rec)
    if e.database in b.database_drops:
        del b.database_drops[e.database]


def _on_watermark(b: _Builder, e: WatermarkAdvanced, rec: Recorded) -> None:
    current = b.watermarks.get(e.scope)
    if current is not None and e.to <= current:
        raise LedgerCorrupt(f"event #{rec.seq} moves watermark {e.scope} back or nowhere")
    b.watermarks[e.scope] = e.to


def _on_retention(b: _Builder, e: RetentionSet, rec: Recorded) -> None:
    if e.seconds is not None:  # zero is a real setting: "no retention"
        b.retentions[e.scope] = e.seconds
    elif e.scope in b.retentions:
        del b.retentions[e.scope]


def _on_purged(b: _Builder, e: TablePurged, rec: Recorded) -> None:
    inst = b.instance(e.table_id, rec)
    if not inst.is_dropped:
        raise LedgerCorrupt(f"event #{rec.seq} purges {inst.name} ({inst.id}), which is not dropped")
    b._forget_dropped(inst)
    b.instances[e.table_id] = attrs.evolve(inst, purged_at=rec.time)


def _on_vacuum_started(b: _Builder, e: VacuumStarted, rec: Recorded) -> None:
    for earlier in e.resumes:
        run = b.vacuums.get(earlier)
        if run is not None:
            b.vacuums[earlier] = attrs.evolve(run, finished=True)
    b.vacuums[e.run_id] = VacuumRun(e.run_id, rec.time, e.table_ids)


def _on_vacuum_finished(b: _Builder, e: VacuumFinished, rec: Recorded) -> None:
    run = b.vacuums.get(e.run_id)
    if run is None:
        raise LedgerCorrupt(f"event #{rec.seq} finishes vacuum {e.run_id}, which never started")
    b.vacuums[e.run_id] = attrs.evolve(run, finished=True)


_HANDLERS: dict[type, Callable[[_Builder, Any, Recorded], None]] = {
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

