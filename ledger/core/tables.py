"""Table lifecycle and names: create, drop, undrop, database drops, and purges.

Rules owned here: **R7** (names: a name reuse makes a new instance; undrop by name
picks the newest dropped instance, by id another, under a new name if asked; a
database undrop restores exactly what its drop took, all or none) and the
lifecycle half of **R8** (a purge happens only to a dropped instance behind its
watermark; purged is final). Whether an undrop is *allowed* is the guard's rule
(``guard.Guard.check_undroppable``), asked here and re-checked on replay.

Streams. Each database's names and instances have a stream of their own
(``catalog:<database>``): a create, drop, undrop, database drop or purge goes to its
database's, and conditions on the streams of the databases it read and on the ledger-wide
``catalog`` stream (R4). So hosts working in different databases never make each other retry
(R18), while a database drop still has one order with every create and undrop in it (R7). An
undrop that moves a table to another database touches two: its event goes to the ledger-wide
stream, which every catalog decision reads. An undrop also reads the three watermark streams
that guard the instance.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Union

import attrs

from ..clock import Micros, iso
from ..errors import (
    DatabaseChanged, DatabaseNotFound, InvalidArgument, PurgeRefused, TableExists, TableNotFound, VersionErased,
)
from ..names import database_name, database_of, table_id, table_name
from .concern import Concern, Decision, corrupt, mapping
from .events import as_ids, event
from .fold import set_or_delete
from .streams import CATALOG_STREAM, catalog_stream, catalog_streams

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State


# --- events --------------------------------------------------------------------------------

@event("TableCreated")
@attrs.frozen
class TableCreated:
    """A new instance, bound to ``name``, stored at ``path`` under the warehouse root."""
    table_id: str
    name: str
    path: str


CREATES = ("TableCreated",)
"""The stored type of the event that makes an instance: the fold asks of each id it creates
whether it is taken (``_on_created``), so a read ahead of the fold asks the archive of those ids."""


@event("TableDropped")
@attrs.frozen
class TableDropped:
    table_id: str
    name: str


@event("TableUndropped")
@attrs.frozen
class TableUndropped:
    """The instance is live again, bound to ``name`` (its old name or a new one)."""
    table_id: str
    name: str


@event("DatabaseDropped")
@attrs.frozen
class DatabaseDropped:
    """Every live table of ``database`` dropped in one fact, at one time."""
    database: str
    table_ids: tuple[str, ...] = attrs.field(converter=as_ids)


@event("DatabaseUndropped")
@attrs.frozen
class DatabaseUndropped:
    database: str
    table_ids: tuple[str, ...] = attrs.field(converter=as_ids)


@event("TablePurged")
@attrs.frozen
class TablePurged:
    """The instance's files are gone; ``run_id`` names the vacuum that removed them."""
    table_id: str
    run_id: str
    files: int
    bytes: int


# --- state ---------------------------------------------------------------------------------

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
class DatabaseDrop:
    """The latest drop of a database: when, and exactly which instances it took."""
    time: Micros
    table_ids: tuple[str, ...]


class Archive(ABC):
    """Instances purged before the last stored snapshot: final, and rarely asked about.

    A long-lived ledger is mostly purged instances; a stored snapshot keeps them apart from
    the live catalog so that opening it need not build an object for each. How they are kept
    (read one at a time) is the persistence package's business; the core only asks. Nothing is added by the fold: purges stay in
    ``Tables.instances`` until a snapshot moves them here.
    """

    __slots__ = ()

    @property
    @abstractmethod
    def ids(self) -> AbstractSet[str]:
        """The ids archived (membership costs one lookup; walking it may read them all)."""

    @abstractmethod
    def get(self, id_: str) -> Instance | None: ...

    @abstractmethod
    def values(self) -> Iterable[Instance]: ...

    def __len__(self) -> int:
        return len(self.ids)


class _NoArchive(Archive):
    __slots__ = ()

    @property
    def ids(self) -> AbstractSet[str]:
        return frozenset()

    def get(self, id_: str) -> Instance | None:
        return None

    def values(self) -> Iterable[Instance]:
        return ()


NO_ARCHIVE: Archive = _NoArchive()
"""The archive of a state folded from the log (not read from a snapshot)."""


@attrs.frozen(eq=False, slots=False)
class Tables:
    instances: Mapping[str, Instance] = mapping(Instance)           # id -> Instance (the archive aside)
    bindings: Mapping[str, str] = mapping()                         # "db.table" -> id of the live instance
    dropped: Mapping[str, tuple[str, ...]] = mapping(tuple)         # "db.table" -> ids dropped, unpurged, oldest first
    database_drops: Mapping[str, DatabaseDrop] = mapping(DatabaseDrop)  # db -> its latest drop
    archive: Archive = attrs.field(default=NO_ARCHIVE, metadata={"values": Instance, "archive": True})

    def __eq__(self, other: object) -> bool:
        """Equal as catalogs: where a purged instance is kept (archive or map) does not count."""
        if not isinstance(other, Tables):
            return NotImplemented
        if (self.bindings, self.dropped, self.database_drops) != \
                (other.bindings, other.dropped, other.database_drops):
            return False
        if not self.archive.ids and not other.archive.ids:  # nothing archived: compare the maps as they are
            return bool(self.instances == other.instances)
        return self._all_by_id() == other._all_by_id()

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

    def all_instances(self) -> Iterator[Instance]:
        yield from self.instances.values()
        yield from self.archive.values()

    def live(self, name: str) -> Instance | None:
        id_ = self.bindings.get(name)
        return None if id_ is None else self.instances[id_]

    def dropped_instances(self, *, database: str | None = None, name: str | None = None) -> list[Instance]:
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


# --- commands and decisions ----------------------------------------------------------------

@attrs.frozen(slots=False)  # as Decision: built once a command, in half the instructions
class CreateTable:
    name: str
    table_id: str


@attrs.frozen
class DropTable:
    name: str


@attrs.frozen
class UndropTable:
    name: str
    table_id: str | None = None
    new_name: str | None = None


@attrs.frozen
class DropDatabase:
    database: str


@attrs.frozen
class UndropDatabase:
    database: str


@attrs.frozen
class RecordPurge:
    table_id: str
    run_id: str
    files: int
    bytes: int
    now: Micros | None = None
    """When it is decided (a pin that holds then refuses it, R21); None: at the next event's time."""


Command = Union[CreateTable, DropTable, UndropTable, DropDatabase, UndropDatabase, RecordPurge]


def location_path(id_: str) -> str:
    """Where an instance's files live, relative to the warehouse root: derived from the id only,
    so two instances of one name never share a file."""
    return id_


def guard_streams(state: State, inst: Instance) -> frozenset[str]:
    """The streams an undrop (or a purge) of ``inst`` depends on: its database's catalog, the
    ledger-wide one, and its watermarks."""
    return catalog_streams(inst.database) | state.guard.watermark_streams(inst)


def require_live(state: State, name: str, doing: str | None = None) -> Instance:
    """The live instance bound to ``name``, or a ``TableNotFound`` that says what to do."""
    key = table_name(name)
    inst = state.tables.live(key)
    if inst is None:
        hint = " (it is dropped: see show-dropped, or Ledger.dropped_tables; its versions: versions(table_id=...))" \
            if key in state.tables.dropped else ""
        raise TableNotFound(f"cannot {doing} {key}: there is no live table by that name{hint}" if doing
                            else f"there is no live table {key}{hint}")
    return inst


def name_of(state: State, table_id: str) -> str:
    """An instance's name, for a message (its id if the state holds no such instance)."""
    inst = state.tables.instance(table_id)
    return inst.name if inst is not None else table_id


def _require_unbound(state: State, name: str, doing: str) -> None:
    live = state.tables.live(name)
    if live is not None:
        raise TableExists(f"{doing}: {name} is already a live table (id {live.id})")


def _create(state: State, cmd: CreateTable) -> Decision:
    name = table_name(cmd.name)
    _require_unbound(state, name, f"cannot create {name}")
    if state.tables.has_id(cmd.table_id):
        raise TableExists(f"cannot create {name}: table id {cmd.table_id} is already taken")
    event_ = TableCreated(cmd.table_id, name, location_path(cmd.table_id))
    db = database_of(name)
    return Decision(((catalog_stream(db), event_),), catalog_streams(db), cmd.table_id)


def _drop(state: State, cmd: DropTable) -> Decision:
    name = table_name(cmd.name)
    inst = state.tables.live(name)
    if inst is None:
        hint = " (it is dropped; see show-dropped)" if name in state.tables.dropped else ""
        raise TableNotFound(f"cannot drop {name}: there is no live table by that name{hint}")
    db = database_of(name)
    return Decision(((catalog_stream(db), TableDropped(inst.id, name)),), catalog_streams(db), inst.id)


def _undrop(state: State, cmd: UndropTable) -> Decision:
    name = table_name(cmd.name)
    target = table_name(cmd.new_name) if cmd.new_name is not None else None
    inst = _instance_to_undrop(state, name, cmd.table_id)
    if inst.is_live:
        raise TableExists(f"cannot undrop {name} (id {inst.id}): it is live; there is nothing to undrop")
    target = target or inst.name
    _require_unbound(state, target, f"cannot undrop {name} (id {inst.id}) as {target}")
    state.guard.check_undroppable(inst, inst.name)
    check_not_erased(state, inst)
    into = database_of(target)
    # Within its database, on its database's stream; into another, on the ledger-wide one (both read it).
    stream = catalog_stream(into) if into == inst.database else CATALOG_STREAM
    return Decision(((stream, TableUndropped(inst.id, target)),), guard_streams(state, inst) | catalog_streams(into),
                    inst.id)


def check_not_erased(state: State, inst: Instance) -> None:
    """R25: an instance whose current version an erasure request erased is never undropped (nor
    pinned whole): ``VersionErased`` naming the request. One whose current version is clean comes
    back (its erased versions stay refused one by one). The erasures concern says which (it asks
    here); a request is on its database's catalog stream, which every undrop and pin reads (R4)."""
    erased = state.erasures.instance_refusal(inst.name, inst.id, state.data.heads.get(inst.id))
    if erased is not None:
        raise VersionErased(erased[0], request_id=erased[1])


def _instance_to_undrop(state: State, name: str, id_: str | None) -> Instance:
    """R7: by id if one is given, else the newest dropped instance of the name."""
    tables = state.tables
    if id_ is not None:
        id_ = table_id(id_)
        inst = tables.instance(id_)
        if inst is None:
            raise TableNotFound(f"cannot undrop {name}: there is no table with id {id_}")
        if inst.name != name:
            raise TableNotFound(f"cannot undrop {name}: table id {id_} is {inst.name}, not {name}")
        return inst
    ids = tables.dropped.get(name)
    if ids:
        return tables.instances[ids[-1]]
    if name in tables.bindings:
        raise TableNotFound(f"cannot undrop {name}: it is live and has no dropped instance")
    purged = [i for i in tables.all_instances() if i.name == name and i.purged_at is not None]
    if purged:
        newest = max(purged, key=lambda i: i.purged_at or 0)
        state.guard.check_undroppable(newest, newest.name)
    raise TableNotFound(f"cannot undrop {name}: it has no dropped instance")


def _drop_database(state: State, cmd: DropDatabase) -> Decision:
    db = database_name(cmd.database)
    prefix = db + "."
    ids = tuple(id_ for name, id_ in sorted(state.tables.bindings.items()) if name.startswith(prefix))
    if not ids:
        raise DatabaseNotFound(f"cannot drop database {db}: it has no live tables")
    return Decision(((catalog_stream(db), DatabaseDropped(db, ids)),), catalog_streams(db), ids)


def _undrop_database(state: State, cmd: UndropDatabase) -> Decision:
    """R7: restore exactly the tables its latest drop took, all or none, under the guard."""
    db = database_name(cmd.database)
    drop = state.tables.database_drops.get(db)
    if drop is None:
        raise DatabaseNotFound(f"cannot undrop database {db}: no database drop of it is left to undo")
    instances = [state.tables.instance(id_) for id_ in drop.table_ids]
    changed = [i for i in instances if i is not None and i.purged_at is None and i.dropped_at != drop.time]
    if changed:
        raise DatabaseChanged(_changed_message(db, drop, changed, instances))
    reads: set[str] = set(catalog_streams(db))
    for inst in instances:
        assert inst is not None, drop
        state.guard.check_undroppable(inst, inst.name)
        check_not_erased(state, inst)
        _require_unbound(state, inst.name, f"cannot undrop database {db}")
        reads |= guard_streams(state, inst)
    return Decision(((catalog_stream(db), DatabaseUndropped(db, drop.table_ids)),), frozenset(reads),
                    drop.table_ids)


def _changed_message(db: str, drop: DatabaseDrop, changed: list[Instance], all_: list[Any]) -> str:
    first = changed[0]
    since = "is live again (restored on its own)" if first.is_live else \
        f"was restored on its own and dropped again at {iso(first.dropped_at)}"
    others = [i for i in all_ if i is not None and i.id != first.id]
    rest = "; the others one by one: " + ", ".join(f"undrop {i.name} --id {i.id}" for i in others) \
        if others else ""
    return (f"cannot undrop database {db}: its drop at {iso(drop.time)} took {len(drop.table_ids)} table(s), "
            f"and {first.name} (id {first.id}) {since}, so the drop can no longer be undone as a whole; "
            f"restore tables by id instead: `retention-ledger undrop {first.name} --id {first.id}` "
            f"(Python: undrop_table({first.name!r}, table_id={first.id!r})){rest}")


def check_counts(run_id: object, files: object, size: object) -> None:
    """What a purge records stays in the log for good, so it must make sense."""
    if not isinstance(run_id, str) or not run_id:
        raise InvalidArgument(f"a purge needs the vacuum's run id, got {run_id!r}")
    for what, value in (("files", files), ("bytes", size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgument(f"a purge's {what} must be a whole number of 0 or more, got {value!r}")


def purge(state: State, id_: str, run_id: object, files: object, size: object,
          now: Micros | None = None) -> tuple[str, TablePurged]:
    """The event recording that an instance's files are gone: only for a dropped instance
    behind its watermark (R8), with counts that make sense (they stay in the log for good)."""
    check_counts(run_id, files, size)
    inst = state.tables.instance(table_id(id_))
    if inst is None:
        raise TableNotFound(f"cannot record purge of {id_}: there is no table with that id")
    if not inst.is_dropped:
        raise PurgeRefused(f"cannot record purge of {inst.name} (id {inst.id}): it is not a dropped, "
                           "unpurged table")
    if not state.guard.is_blocked(inst):
        raise PurgeRefused(
            f"cannot record purge of {inst.name} (id {inst.id}): it is not behind a watermark, "
            "so it is still restorable")
    pin = state.pins.holding_instance(inst.id, state.last_time + 1 if now is None else now)
    if pin is not None:
        raise PurgeRefused(f"cannot record purge of {inst.name} (id {inst.id}): pin {pin.id} holds it until "
                           f"{iso(pin.expires_at)} (R21); release the pin, or wait for its lease to end")
    return catalog_stream(inst.database), TablePurged(inst.id, run_id, files, size)  # type: ignore[arg-type]


def _purge(state: State, cmd: RecordPurge) -> Decision:
    recorded = purge(state, cmd.table_id, cmd.run_id, cmd.files, cmd.bytes, cmd.now)
    inst = state.tables.instances[recorded[1].table_id]
    return Decision((recorded,), guard_streams(state, inst), inst.id)


# --- fold ----------------------------------------------------------------------------------

def _instance(b: Builder, id_: str, seq: int) -> Instance:
    inst: Instance | None = b.tables.instances.get(id_)
    if inst is None:
        what = "was purged" if id_ in b.before.tables.archive.ids else "was never created"
        raise corrupt(f"event #{seq} names table id {id_}, which {what}")
    return inst


def _drop_one(b: Builder, id_: str, seq: int, time: Micros) -> None:
    tables = b.tables
    inst = _instance(b, id_, seq)
    if tables.bindings.get(inst.name) != id_:
        raise corrupt(f"event #{seq} drops {inst.name} ({id_}), which is not live")
    del tables.bindings[inst.name]
    tables.dropped[inst.name] = tables.dropped.get(inst.name, ()) + (id_,)
    # Direct construction: attrs.evolve is several times slower, and replay does this a lot.
    tables.instances[id_] = Instance(id_, inst.name, inst.path, inst.created_at, time, None)


def _undrop_one(b: Builder, id_: str, name: str, seq: int) -> None:
    tables = b.tables
    inst = _instance(b, id_, seq)
    if not inst.is_dropped or name in tables.bindings:
        raise corrupt(f"event #{seq} restores {id_} as {name}, which the state forbids")
    if b.guard.is_blocked(inst):  # R3 on replay: a forged or misplaced undrop is not history
        raise corrupt(f"event #{seq} undrops {inst.name} ({id_}), dropped at {iso(inst.dropped_at)}, at or "
                      f"before its watermark {iso(b.guard.effective_watermark(inst))}: R3 forbids it")
    if b.erasures.instance_refusal(inst.name, id_, b.data.heads.get(id_)) is not None:
        raise corrupt(f"event #{seq} undrops {inst.name} ({id_}), whose current version an erasure request "
                      "erased (R25)")
    _forget_dropped(tables, inst)
    tables.bindings[name] = id_
    tables.instances[id_] = Instance(id_, name, inst.path, inst.created_at, None, None)


def _forget_dropped(tables: Tables, inst: Instance) -> None:
    set_or_delete(tables.dropped, inst.name, tuple(i for i in tables.dropped.get(inst.name, ()) if i != inst.id))


def _on_created(b: Builder, e: TableCreated, seq: int, time: Micros) -> None:
    if not (isinstance(e.table_id, str) and isinstance(e.name, str) and isinstance(e.path, str)):
        raise TypeError(f"table {e.table_id!r} named {e.name!r} at {e.path!r}")
    tables = b.tables
    if e.table_id in tables.instances or e.table_id in tables.archive.ids or e.name in tables.bindings:
        raise corrupt(f"event #{seq} creates {e.name} ({e.table_id}) over an existing one")
    tables.instances[e.table_id] = Instance(e.table_id, e.name, e.path, time)
    tables.bindings[e.name] = e.table_id


def _on_database_dropped(b: Builder, e: DatabaseDropped, seq: int, time: Micros) -> None:
    for id_ in e.table_ids:
        _drop_one(b, id_, seq, time)
    b.tables.database_drops[e.database] = DatabaseDrop(time, e.table_ids)


def _on_database_undropped(b: Builder, e: DatabaseUndropped, seq: int, time: Micros) -> None:
    drop = b.tables.database_drops.get(e.database)
    if drop is None or not set(e.table_ids) <= set(drop.table_ids):
        raise corrupt(f"event #{seq} undrops database {e.database}, whose latest drop did not take "
                      "those tables")
    for id_ in e.table_ids:
        inst = _instance(b, id_, seq)
        # Logs written before release 0.2 may restore a subset (the tables not restored on
        # their own): each must still be dropped by that very drop.
        if inst.dropped_at != drop.time:
            raise corrupt(f"event #{seq} undrops database {e.database} with {inst.name} ({id_}), which "
                          "its drop no longer holds")
        _undrop_one(b, id_, inst.name, seq)
    del b.tables.database_drops[e.database]


def _on_purged(b: Builder, e: TablePurged, seq: int, time: Micros) -> None:
    tables = b.tables
    inst = _instance(b, e.table_id, seq)
    if not inst.is_dropped:
        raise corrupt(f"event #{seq} purges {inst.name} ({inst.id}), which is not dropped")
    if not b.guard.is_blocked(inst):
        raise corrupt(f"event #{seq} purges {inst.name} ({inst.id}), which is not behind its watermark (R8)")
    pin = b.pins.holding_instance(inst.id, time)
    if pin is not None:
        raise corrupt(f"event #{seq} purges {inst.name} ({inst.id}), which pin {pin.id} holds until "
                      f"{pin.expires_at} (R21)")
    _forget_dropped(tables, inst)
    tables.instances[e.table_id] = Instance(inst.id, inst.name, inst.path, inst.created_at, inst.dropped_at, time)


CONCERN = Concern(
    initial=Tables(),
    evolve={
        TableCreated: _on_created,
        TableDropped: lambda b, e, seq, time: _drop_one(b, e.table_id, seq, time),
        TableUndropped: lambda b, e, seq, time: _undrop_one(b, e.table_id, e.name, seq),
        DatabaseDropped: _on_database_dropped,
        DatabaseUndropped: _on_database_undropped,
        TablePurged: _on_purged,
    },
    decide={
        CreateTable: _create,
        DropTable: _drop,
        UndropTable: _undrop,
        DropDatabase: _drop_database,
        UndropDatabase: _undrop_database,
        RecordPurge: _purge,
    },
)
