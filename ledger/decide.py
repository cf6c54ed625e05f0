"""What each command does, decided on folded state: ``decide(state, command) -> Decision``.

Pure: no clock, no store, no randomness. Anything a decision needs from the
outside world (the current time, a fresh id) arrives inside the command.

A decision says which events to append, to which streams, and which streams it
*read* to reach its verdict. The ledger appends only if every read stream is
still at the version this state saw (R4), so a verdict can never be acted on
after the facts behind it changed.

Streams. Table and database lifecycle events share one ``catalog`` stream;
each watermark scope and each retention scope has its own. One catalog stream
means a database drop, a rename on undrop, or a name reuse is always a single
event on a single stream, so no command ever has to keep two catalog streams in
step. Its cost is that two unrelated catalog commands racing each other retry
once; SQLite admits one writer at a time anyway, so that cost is small. The
watermark streams are separate because they are the ones an undrop and a
vacuum race on, and an undrop must name exactly the scopes that guard it.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from .clock import Micros, format_duration, iso
from .errors import (
    DatabaseNotFound, InvalidArgument, InvalidRetention, InvalidTime, PurgeRefused, TableExists,
    TableNotFound, UndropBlocked,
)
from .events import (
    CATALOG_STREAM, DatabaseDropped, DatabaseUndropped, Event, RetentionSet, TableCreated,
    TableDropped, TablePurged, TableUndropped, WatermarkAdvanced, retention_stream,
    watermark_stream,
)
from .names import Scope, database_name, table_id, table_name
from .state import RETENTION_FLOOR_SECONDS, Catalog, Instance


# --- commands ------------------------------------------------------------------------------

@attrs.frozen
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
class AdvanceWatermark:
    scope: Scope
    to: Micros
    now: Micros


@attrs.frozen
class SetRetention:
    scope: Scope
    seconds: int | None
    override_floor: bool = False


@attrs.frozen
class RecordPurge:
    table_id: str
    run_id: str
    files: int
    bytes: int


Command = Any


@attrs.frozen
class Decision:
    """Events to append as ``(stream, event)``, the streams read, and what to tell the caller."""

    events: tuple[tuple[str, Event], ...] = ()
    reads: frozenset[str] = frozenset()
    result: Any = None


def decide(state: Catalog, command: Command) -> Decision:
    handler = _DECIDERS.get(type(command))
    if handler is None:
        raise TypeError(f"no decision rule for {type(command).__name__}")
    return handler(state, command)


# --- shared wording and checks -------------------------------------------------------------

def guard_streams(state: Catalog, inst: Instance) -> frozenset[str]:
    """The streams an undrop of ``inst`` depends on: the catalog and its three watermarks."""
    return frozenset((CATALOG_STREAM, *map(watermark_stream, state.covering_scopes(inst))))


def check_undroppable(state: Catalog, inst: Instance) -> None:
    """R3 and R8: refuse to bring back an instance a vacuum may have touched.

    The message names the table, its id, its drop time and the watermark (and,
    once purged, when its files went), so whoever reads it knows what happened.
    """
    mark = state.effective_watermark(inst)
    blocked = inst.dropped_at is not None and mark is not None and inst.dropped_at <= mark
    if not blocked and inst.purged_at is None:
        return
    reason = f"cannot undrop {inst.name} (id {inst.id}): it was dropped at {iso(inst.dropped_at)}"
    if blocked:
        scope = next(s for s in state.covering_scopes(inst) if state.watermarks.get(s) == mark)
        reason += f", at or before the vacuum watermark {iso(mark)} (scope {scope})"
    if inst.purged_at is not None:
        raise UndropBlocked(f"{reason}; its files were purged at {iso(inst.purged_at)}, "
                            "so it can never be undropped")
    raise UndropBlocked(f"{reason}; a vacuum may have deleted its files, so restoring it "
                        "could bring it back half-empty")


def _require_unbound(state: Catalog, name: str, doing: str) -> None:
    live = state.live(name)
    if live is not None:
        raise TableExists(f"{doing}: {name} is already a live table (id {live.id})")


# --- tables --------------------------------------------------------------------------------

def _create(state: Catalog, cmd: CreateTable) -> Decision:
    name = table_name(cmd.name)
    _require_unbound(state, name, f"cannot create {name}")
    if state.has_id(cmd.table_id):
        raise TableExists(f"cannot create {name}: table id {cmd.table_id} is already taken")
    event = TableCreated(cmd.table_id, name, location_path(cmd.table_id))
    return Decision(((CATALOG_STREAM, event),), frozenset({CATALOG_STREAM}), cmd.table_id)


def location_path(id_: str) -> str:
    """Where an instance's files live, relative to the warehouse root: derived from the id only,
    so two instances of one name never share a file."""
    return id_


def _drop(state: Catalog, cmd: DropTable) -> Decision:
    name = table_name(cmd.name)
    inst = state.live(name)
    if inst is None:
        hint = " (it is dropped; see show-dropped)" if name in state.dropped else ""
        raise TableNotFound(f"cannot drop {name}: there is no live table by that name{hint}")
    event = TableDropped(inst.id, name)
    return Decision(((CATALOG_STREAM, event),), frozenset({CATALOG_STREAM}), inst.id)


def _undrop(state: Catalog, cmd: UndropTable) -> Decision:
    name = table_name(cmd.name)
    target = table_name(cmd.new_name) if cmd.new_name is not None else None
    inst = _instance_to_undrop(state, name, cmd.table_id)
    if inst.is_live:
        raise TableExists(f"cannot undrop {name} (id {inst.id}): it is live; there is nothing to undrop")
    target = target or inst.name
    _require_unbound(state, target, f"cannot undrop {name} (id {inst.id}) as {target}")
    check_undroppable(state, inst)
    event = TableUndropped(inst.id, target)
    return Decision(((CATALOG_STREAM, event),), guard_streams(state, inst), inst.id)


def _instance_to_undrop(state: Catalog, name: str, id_: str | None) -> Instance:
    """R7: by id if one is given, else the newest dropped instance of the name."""
    if id_ is not None:
        id_ = table_id(id_)
        inst = state.instance(id_)
        if inst is None:
            raise TableNotFound(f"cannot undrop {name}: there is no table with id {id_}")
        if inst.name != name:
            raise TableNotFound(f"cannot undrop {name}: table id {id_} is {inst.name}, not {name}")
        return inst
    ids = state.dropped.get(name)
    if ids:
        return state.instances[ids[-1]]
    if name in state.bindings:
        raise TableNotFound(f"cannot undrop {name}: it is live and has no dropped instance")
    purged = [i for i in state.all_instances() if i.name == name and i.purged_at is not None]
    if purged:
        check_undroppable(state, max(purged, key=lambda i: i.purged_at or 0))
    raise TableNotFound(f"cannot undrop {name}: it has no dropped instance")


# --- databases -----------------------------------------------------------------------------

def _drop_database(state: Catalog, cmd: DropDatabase) -> Decision:
    db = database_name(cmd.database)
    prefix = db + "."
    ids = tuple(id_ for name, id_ in sorted(state.bindings.items()) if name.startswith(prefix))
    if not ids:
        raise DatabaseNotFound(f"cannot drop database {db}: it has no live tables")
    event = DatabaseDropped(db, ids)
    return Decision(((CATALOG_STREAM, event),), frozenset({CATALOG_STREAM}), ids)


def _undrop_database(state: Catalog, cmd: UndropDatabase) -> Decision:
    """R7: restore exactly the tables its latest drop took, all or none, under the guard."""
    db = database_name(cmd.database)
    ids = state.database_drops.get(db)
    if not ids:
        raise DatabaseNotFound(f"cannot undrop database {db}: no database drop of it is left to undo")
    reads: set[str] = set()
    for id_ in ids:
        inst = state.instance(id_)  # purged ones may sit in the archive
        assert inst is not None, id_
        check_undroppable(state, inst)
        _require_unbound(state, inst.name, f"cannot undrop database {db}")
        reads |= guard_streams(state, inst)
    event = DatabaseUndropped(db, ids)
    return Decision(((CATALOG_STREAM, event),), frozenset(reads), ids)


# --- watermarks and retention --------------------------------------------------------------

def _advance(state: Catalog, cmd: AdvanceWatermark) -> Decision:
    """R1: fetch-and-set; moving to a time at or before the current value changes nothing."""
    _require_scope_exists(state, cmd.scope)
    if cmd.to > cmd.now:
        raise InvalidTime(
            f"cannot advance watermark {cmd.scope} to {iso(cmd.to)}: that is past the ledger's "
            f"current time {iso(cmd.now)}, and a watermark marks a point already reached"
        )
    stream = watermark_stream(cmd.scope)
    current = state.watermark(cmd.scope)
    if current is not None and cmd.to <= current:
        return Decision((), frozenset({stream}), current)
    event = WatermarkAdvanced(str(cmd.scope), cmd.to)
    return Decision(((stream, event),), frozenset({stream}), current)


def _set_retention(state: Catalog, cmd: SetRetention) -> Decision:
    _require_scope_exists(state, cmd.scope)
    # None removes the setting: a database or table falls back to the wider scope,
    # the ledger to the built-in default.
    seconds = None if cmd.seconds is None else \
        check_retention(cmd.seconds, cmd.override_floor, f"for {cmd.scope}")
    stream = retention_stream(cmd.scope)
    event = RetentionSet(str(cmd.scope), seconds)
    return Decision(((stream, event),), frozenset({stream}), seconds)


def check_purge_counts(run_id: object, files: object, size: object) -> None:
    """What a purge records stays in the log for good, so it must make sense."""
    if not isinstance(run_id, str) or not run_id:
        raise InvalidArgument(f"a purge needs the vacuum's run id, got {run_id!r}")
    for what, value in (("files", files), ("bytes", size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgument(f"a purge's {what} must be a whole number of 0 or more, got {value!r}")


def check_retention(seconds: int, override_floor: bool, where: str = "") -> int:
    """The floor: no retention under a day unless the caller says it means it."""
    if not isinstance(override_floor, bool):
        raise InvalidArgument(f"override_floor must be True or False, got {override_floor!r}")
    if seconds < 0:
        raise InvalidRetention(f"retention {where} is negative ({seconds}s); it must be zero or more")
    if seconds < RETENTION_FLOOR_SECONDS and not override_floor:
        raise InvalidRetention(
            f"retention {format_duration(seconds)} {where} is below the "
            f"{format_duration(RETENTION_FLOOR_SECONDS)} floor: dropped tables would become "
            "unrestorable sooner than that; pass override_floor=True (CLI: --override-floor) "
            "if that is what you mean"
        )
    return seconds


def _require_scope_exists(state: Catalog, scope: Scope) -> None:
    if scope.kind == "table" and not state.has_id(scope.key):
        raise TableNotFound(f"scope {scope}: there is no table with id {scope.key}")


# --- purges (recorded by the vacuum) -------------------------------------------------------

def _purge(state: Catalog, cmd: RecordPurge) -> Decision:
    check_purge_counts(cmd.run_id, cmd.files, cmd.bytes)
    inst = state.instance(table_id(cmd.table_id))
    if inst is None:
        raise TableNotFound(f"cannot record purge of {cmd.table_id}: there is no table with that id")
    if not inst.is_dropped:
        raise PurgeRefused(f"cannot record purge of {cmd.table_id}: it is not a dropped, unpurged table")
    if not state.is_blocked(inst):
        raise PurgeRefused(
            f"cannot record purge of {inst.name} (id {inst.id}): it is not behind a watermark, "
            "so it is still restorable"
        )
    event = TablePurged(inst.id, cmd.run_id, cmd.files, cmd.bytes)
    return Decision(((CATALOG_STREAM, event),), guard_streams(state, inst), inst.id)


_DECIDERS: dict[type, Callable[[Catalog, Any], Decision]] = {
    CreateTable: _create,
    DropTable: _drop,
    UndropTable: _undrop,
    DropDatabase: _drop_database,
    UndropDatabase: _undrop_database,
    AdvanceWatermark: _advance,
    SetRetention: _set_retention,
    RecordPurge: _purge,
}
