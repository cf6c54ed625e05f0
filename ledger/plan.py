"""The vacuum's decisions: what it may delete, and which watermarks make exactly that final.

Pure, like ``decide``: the Spark job asks the ledger to *start* a vacuum, and
the ledger decides the plan on folded state and appends the watermarks and a
``VacuumStarted`` event in one conditional append (R2, R4). Files are touched
only after that append has landed.

Choosing watermarks (R5, R6). Each planned instance must end at or before its
effective watermark; no other dropped instance may become newly blocked. A
watermark is always set to the drop time of a planned instance (evidence, not a
clock reading), and the widest scope that blocks nothing else is used, so a
full vacuum writes one ledger watermark while a narrow one (a database, a
``limit``, or a longer retention elsewhere) falls back to database or table
watermarks. Ties (a database drop gives its tables one time) are resolved the
safe way: a scope is used only if every spared instance was dropped strictly
after the mark.
"""

from __future__ import annotations

from collections import defaultdict

import attrs

from .clock import Micros
from .decide import Decision, _DECIDERS, check_purge_counts, check_retention, guard_streams
from .errors import InvalidArgument, PurgeRefused
from .events import (
    CATALOG_STREAM, VACUUM_STREAM, TablePurged, VacuumFinished, VacuumStarted, WatermarkAdvanced,
    retention_stream,
    watermark_stream,
)
from .names import database_name
from .state import Catalog, Instance


@attrs.frozen
class PlannedInstance:
    id: str
    name: str
    path: str
    dropped_at: Micros
    watermark: Micros
    """Its effective watermark once the plan's watermarks are set: at or after ``dropped_at``."""
    resumed: bool
    """Already behind a watermark before this run: an earlier vacuum started on it."""


@attrs.frozen
class VacuumPlan:
    run_id: str
    now: Micros
    instances: tuple[PlannedInstance, ...]
    watermarks: dict[str, Micros]
    resumes: tuple[str, ...]


@attrs.frozen
class StartVacuum:
    run_id: str
    now: Micros
    retention_seconds: int | None = None
    override_floor: bool = False
    database: str | None = None
    limit: int | None = None


@attrs.frozen
class FinishVacuum:
    run_id: str
    purged: tuple[tuple[str, int, int], ...]
    """(table id, files deleted, bytes deleted) for each instance whose files are all gone."""
    failed: int


def plan_vacuum(state: Catalog, cmd: StartVacuum) -> VacuumPlan:
    if cmd.limit is not None and (isinstance(cmd.limit, bool) or not isinstance(cmd.limit, int)
                                  or cmd.limit < 1):
        raise InvalidArgument(f"vacuum limit must be a whole number of at least 1, not {cmd.limit!r}")
    if cmd.retention_seconds is not None:
        check_retention(cmd.retention_seconds, cmd.override_floor, "for this vacuum")
    database = None if cmd.database is None else database_name(cmd.database)
    candidates = state.dropped_instances(database=database)
    due = [i for i in candidates if state.is_blocked(i)
           or i.dropped_at <= cmd.now - _retention(state, i, cmd.retention_seconds) * 1_000_000]
    # Finish what earlier runs started first, then oldest drops first.
    due.sort(key=lambda i: (not state.is_blocked(i), i.dropped_at, i.id))
    chosen = due[: cmd.limit] if cmd.limit is not None else due
    marks = choose_watermarks(state, chosen)
    resumed_ids = {i.id for i in chosen if state.is_blocked(i)}
    resumes = tuple(sorted(run.run_id for run in state.unfinished_vacuums()
                           if resumed_ids.intersection(run.table_ids)))
    planned = tuple(
        PlannedInstance(i.id, i.name, i.path, i.dropped_at or 0,
                        _effective_after(state, i, marks), i.id in resumed_ids)
        for i in chosen)
    return VacuumPlan(cmd.run_id, cmd.now, planned, marks, resumes)


def _retention(state: Catalog, inst: Instance, run_default: int | None) -> int:
    """Seconds. Table and database settings win; the run's retention replaces only the ledger-wide one."""
    for scope in (f"table:{inst.id}", f"database:{inst.database}"):
        seconds = state.retentions.get(scope)
        if seconds is not None:
            return seconds
    return run_default if run_default is not None else state.retention_seconds(inst)


def choose_watermarks(state: Catalog, chosen: list[Instance]) -> dict[str, Micros]:
    need = [i for i in chosen if not state.is_blocked(i)]
    if not need:
        return {}
    chosen_ids = {i.id for i in chosen}
    spared = [i for i in state.dropped_instances()
              if i.id not in chosen_ids and not state.is_blocked(i)]
    top = max(i.dropped_at or 0 for i in need)
    if all((i.dropped_at or 0) > top for i in spared):
        return {"ledger": top}
    by_database: dict[str, list[Instance]] = defaultdict(list)
    for inst in need:
        by_database[inst.database].append(inst)
    marks: dict[str, Micros] = {}
    for database, group in sorted(by_database.items()):
        top = max(i.dropped_at or 0 for i in group)
        if all((i.dropped_at or 0) > top for i in spared if i.database == database):
            marks[f"database:{database}"] = top
        else:
            marks.update((f"table:{i.id}", i.dropped_at or 0) for i in group)
    return marks


def _effective_after(state: Catalog, inst: Instance, marks: dict[str, Micros]) -> Micros:
    found = [m for m in (state.effective_watermark(inst), *map(marks.get, state.covering_scopes(inst)))
             if m is not None]
    return max(found)


def _start(state: Catalog, cmd: StartVacuum) -> Decision:
    plan = plan_vacuum(state, cmd)
    if not plan.instances:
        return Decision((), frozenset({CATALOG_STREAM}), plan)
    events: list[tuple[str, object]] = [
        (watermark_stream(scope), WatermarkAdvanced(scope, to)) for scope, to in plan.watermarks.items()]
    events.append((VACUUM_STREAM, VacuumStarted(
        cmd.run_id, tuple(p.id for p in plan.instances), dict(plan.watermarks),
        None if cmd.database is None else database_name(cmd.database), cmd.limit, plan.resumes)))
    reads = {VACUUM_STREAM}
    for planned in plan.instances:
        inst = state.instances[planned.id]
        reads |= guard_streams(state, inst)
        # Its retention decided that it is due: a longer one set meanwhile must stop the plan.
        reads |= {retention_stream(scope) for scope in state.covering_scopes(inst)}
    reads |= {watermark_stream(scope) for scope in plan.watermarks}
    return Decision(tuple(events), frozenset(reads), plan)  # type: ignore[arg-type]


def _finish(state: Catalog, cmd: FinishVacuum) -> Decision:
    if cmd.run_id not in state.vacuums:
        raise InvalidArgument(f"vacuum run {cmd.run_id} is unknown or already finished")
    events: list[tuple[str, object]] = []
    reads = {VACUUM_STREAM}
    files = size = 0
    for table_id, n_files, n_bytes in cmd.purged:
        check_purge_counts(cmd.run_id, n_files, n_bytes)
        inst = state.instance(table_id)
        if inst is not None and inst.purged_at is not None:
            continue  # a concurrent vacuum recorded it first; the files are gone either way
        if inst is None or not inst.is_dropped or not state.is_blocked(inst):
            raise PurgeRefused(
                f"vacuum {cmd.run_id} cannot record a purge of {table_id}: it is not a dropped "
                "table behind its watermark")
        events.append((CATALOG_STREAM, TablePurged(table_id, cmd.run_id, n_files, n_bytes)))
        reads |= guard_streams(state, inst)
        files += n_files
        size += n_bytes
    purged = len(events)
    # A run another vacuum took over (it seemed dead) may still finish: its purges are facts.
    events.append((VACUUM_STREAM, VacuumFinished(cmd.run_id, purged, cmd.failed, files, size)))
    return Decision(tuple(events), frozenset(reads), purged)  # type: ignore[arg-type]


_DECIDERS[StartVacuum] = _start
_DECIDERS[FinishVacuum] = _finish

__all__ = ["PlannedInstance", "VacuumPlan", "StartVacuum",
           "FinishVacuum", "plan_vacuum", "choose_watermarks"]
