"""Vacuum runs: what a vacuum may delete, the watermarks that make exactly that final, and its lease.

The Spark job asks the ledger to *start* a vacuum; the plan is decided here, on
folded state, and appended with its watermarks and a ``VacuumStarted`` event in
one conditional append (R2, R4). Files are touched only after that append has
landed, and only the instances the plan names, each carrying the effective
watermark it has once the append is in (the executors re-check it).

Choosing watermarks (R5, R6). Each planned instance must end at or before its
effective watermark; no other dropped instance may become newly blocked. A
watermark is always set to the drop time of a planned instance (evidence, not a
clock reading), and the widest scope that blocks nothing else is used, so a full
vacuum writes one ledger watermark while a narrow one (a database, a ``limit``,
or a longer retention elsewhere) falls back to database or table watermarks.
Ties (a database drop gives its tables one time) are resolved the safe way: a
scope is used only if every spared instance was dropped strictly after the mark.

Runs hold a lease. A running vacuum renews it while it deletes; another vacuum
leaves a run with a live lease alone (its tables are not planned again, and the
plan says which runs it left alone) and takes over only a run whose lease has
expired, which it records (``resumes``). Every run records exactly the files and
bytes it deleted itself.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Union

import attrs
from vacuum_work import (
    EXPIRE, PURGE, STRAGGLERS, SWEEP, TRIM, Expiry, Folder, ForeignScan, Held, Plan, Purge, Result, StragglerScan,
    Sweep, Trim, Waiting, Work,
)

from ..clock import Micros
from ..errors import InvalidArgument, PurgeRefused
from ..names import database_name
from .concern import Concern, Decision, corrupt, mapping
from .events import UPCASTERS, as_ids, event
from .guard import advance, check_retention
from .receipts import close as close_receipt
from .streams import (
    CATALOG_STREAM, VACUUM_STREAM, catalog_streams, data_stream, receipt_stream, retention_stream, watermark_stream,
)
from .tables import Instance, check_counts, guard_streams, purge
from .versions import advance_mark, folders_deleted, removals_deleted, stragglers_deleted, sweep, version_key

DEFAULT_GRACE_SECONDS = 6 * 3600
GRACE_FLOOR_SECONDS = 3600
"""A straggler (a late task's file) is deleted only once older than the grace period: long enough
for every task of the write's job to have finished."""

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State


UNFINISHED_SWEEP = "swept by an earlier run that did not delete its folder"
"""Why a sweep takes a write that is swept already: the run that recorded it died or failed before
its folder was recorded deleted, so this one deletes it (R10: the next vacuum finishes what one left)."""

DEFAULT_LEASE_SECONDS = 600
"""A vacuum renews its lease every third of this while it deletes; a run silent for this long
is taken to be dead, and the next vacuum takes its tables over."""


# --- events --------------------------------------------------------------------------------

@event("VacuumStarted", version=3)
@attrs.frozen
class VacuumStarted:
    """Written in the same append as the watermarks, before any file is touched (R2)."""
    run_id: str
    table_ids: tuple[str, ...] = attrs.field(converter=as_ids)
    watermarks: dict[str, Micros] = attrs.field(factory=dict)
    database: str | None = None
    limit: int | None = None
    resumes: tuple[str, ...] = attrs.field(default=(), converter=as_ids)
    """Earlier runs whose lease expired before they finished; this run takes over their instances."""
    lease_until: Micros | None = None
    """Until when no other vacuum may take this run's tables (None: logs before leases existed)."""
    marks: dict[str, Micros] = attrs.field(factory=dict)
    """Retention marks this run advanced, by table id (R13: in this same append)."""
    write_folders: tuple[str, ...] = attrs.field(default=(), converter=as_ids)
    """Write folders this run will delete: no version that stays unexpired names them."""
    trims: tuple[str, ...] = attrs.field(default=(), converter=as_ids)
    """Replace versions (``<table id>/<number>``) whose removed files this run will delete by key."""


UPCASTERS[("VacuumStarted", 1)] = lambda data: {**data, "lease_until": None}
UPCASTERS[("VacuumStarted", 2)] = lambda data: {**data, "trims": []}


@event("VacuumLeased")
@attrs.frozen
class VacuumLeased:
    """The run's lease now runs until ``until``: renewed while it works, or released (``until``
    is the event's own time) when it stops, so that the next vacuum need not wait for it."""
    run_id: str
    until: Micros


@event("VacuumFinished")
@attrs.frozen
class VacuumFinished:
    """``files`` and ``bytes`` are what this run deleted itself; ``purged`` counts the purges it
    recorded (an instance another run recorded first is not counted twice)."""
    run_id: str
    purged: int
    failed: int
    files: int
    bytes: int


# --- state ---------------------------------------------------------------------------------

@attrs.frozen
class OpenRun:
    """A vacuum that recorded its start and not yet its end: it is deleting, or it died
    (``ledger.VacuumRun`` is its driver's handle on it)."""

    run_id: str
    started_at: Micros
    table_ids: tuple[str, ...]
    lease_until: Micros | None = None
    taken_over: bool = False
    """A later vacuum took over its tables; it may still finish, but is not resumed again."""
    write_folders: tuple[str, ...] = ()
    """The write folders it set out to delete."""
    trims: tuple[str, ...] = ()
    """The replace versions (``<table id>/<number>``) whose removed files it set out to delete."""

    def is_live(self, now: Micros) -> bool:
        return not self.taken_over and self.lease_until is not None and self.lease_until > now


@attrs.frozen
class Vacuums:
    runs: Any = mapping(OpenRun)   # run id -> OpenRun, runs not yet finished
    ended: Any = mapping()                   # run id -> when it finished: a run id is used once

    def taken(self, run_id: str) -> bool:
        """Whether a run of that id is on record, running or finished: a caller that chose its own
        id (to release the lease should it be stopped) must never find it naming another run."""
        return run_id in self.runs or run_id in self.ended

    def unfinished(self) -> list[OpenRun]:
        """Runs that started, did not finish, and no later run took over."""
        return sorted((run for run in self.runs.values() if not run.taken_over),
                      key=lambda run: run.started_at)


# --- plans ---------------------------------------------------------------------------------
# A plan is ``vacuum_work``'s: the typed records the executors re-check and the run's finish
# records (one shape from the decision to the record).

@attrs.frozen
class StartVacuum:
    run_id: str
    now: Micros
    root: str
    """The warehouse root the plan's paths are under (the executors make them absolute)."""
    retention_seconds: int | None = None
    override_floor: bool = False
    database: str | None = None
    limit: int | None = None
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    uncommitted: bool = True
    """Also sweep abandoned writes and clean stragglers (R15)."""
    only_uncommitted: bool = False
    """Only that: no purges, no expiries."""
    grace_seconds: int = DEFAULT_GRACE_SECONDS


@attrs.frozen
class RenewVacuum:
    run_id: str
    now: Micros
    lease_seconds: int = DEFAULT_LEASE_SECONDS


@attrs.frozen
class FinishVacuum:
    """A run's end: what each item of its plan did (``vacuum_work.Result``), as its executors said.
    Which purges, folder deletions and cleanings that records is decided here (``_finish``)."""
    run_id: str
    results: tuple[Result, ...]
    now: Micros | None = None
    """When it is decided (None: at the next event's time)."""


Command = Union[StartVacuum, RenewVacuum, FinishVacuum]


def plan_vacuum(state: State, cmd: StartVacuum) -> Plan:
    if cmd.limit is not None and (isinstance(cmd.limit, bool) or not isinstance(cmd.limit, int)
                                  or cmd.limit < 1):
        raise InvalidArgument(f"vacuum limit must be a whole number of at least 1, not {cmd.limit!r}")
    if cmd.retention_seconds is not None:
        check_retention(cmd.retention_seconds, cmd.override_floor, "for this vacuum")
    _check_lease(cmd.lease_seconds)
    check_retention(cmd.grace_seconds, cmd.override_floor, "for stragglers", floor=GRACE_FLOOR_SECONDS,
                    what="grace period", consequence="a task still writing its file could lose it")
    guard = state.guard
    database = None if cmd.database is None else database_name(cmd.database)
    busy_runs = [run for run in state.vacuums.unfinished() if run.is_live(cmd.now)]
    held = {id_ for run in busy_runs for id_ in run.table_ids}
    due: list[Instance] = []
    waiting: list[Waiting] = []
    pinned: list[Held] = []
    for inst in [] if cmd.only_uncommitted else state.tables.dropped_instances(database=database):
        if inst.id in held:
            continue
        pin = state.pins.holding_instance(inst.id, cmd.now)
        if pin is not None:  # R21: not purged, and so not newly blocked either (choose_watermarks spares it)
            pinned.append(Held(inst.id, inst.name, "purge", pin.version, pin.id, pin.expires_at))
            continue
        source, seconds = guard.retention_source(inst, cmd.retention_seconds)
        due_at = (inst.dropped_at or 0) + seconds * 1_000_000
        if guard.is_blocked(inst) or due_at <= cmd.now:
            due.append(inst)
        else:
            waiting.append(Waiting(inst.id, inst.name, inst.dropped_at or 0, due_at, seconds, source))
    # Finish what earlier runs (or hands) started first, then oldest drops first.
    due.sort(key=lambda i: (not guard.is_blocked(i), i.dropped_at, i.id))
    chosen = due[: cmd.limit] if cmd.limit is not None else due
    marks = choose_watermarks(state, chosen)
    resumed_ids = {i.id for i in chosen if guard.is_blocked(i)}
    # A purge an earlier run (or a hand) began may have lost files already: it is listed, never
    # deleted by the ledger's lists, or a store that answers "deleted" for a key already gone would
    # have this run count, and receipt, what the other deleted (R10, R20).
    planned = tuple(
        Purge(i.id, i.name, i.path, i.dropped_at or 0, _effective_after(state, i, marks), i.id in resumed_ids,
              () if i.id in resumed_ids else state.data.known_manifests(i.id))
        for i in chosen)
    waiting.sort(key=lambda w: (w.due_at, w.table_id))
    stopped_runs = [run for run in state.vacuums.unfinished() if not run.is_live(cmd.now)]
    held_folders = {w for run in busy_runs for w in run.write_folders}
    stopped_folders = {w for run in stopped_runs for w in run.write_folders}
    written = _versioned(state, database, {i.id for i in chosen})
    versioned = [] if cmd.only_uncommitted else [i for i in written if i.id in state.data.heads]
    expiries = tuple(e for e in (_expiry(state, i, cmd, held_folders, stopped_folders, pinned) for i in versioned)
                     if e is not None)
    marked = {e.table_id: e.mark for e in expiries if e.mark is not None}
    held_trims = {t for run in busy_runs for t in run.trims}
    stopped_trims = {t for run in stopped_runs for t in run.trims}
    trims = tuple(t for i in versioned
                  for t in _trims(state, i, marked.get(i.id, state.data.mark(i.id)), held_trims, stopped_trims))
    # A folder this run deletes whole is not also scanned for stragglers (the two would race over it).
    going = {w for e in expiries for w in e.recorded()}
    sweeps, stragglers = _uncommitted(state, written, cmd, held_folders | going) if cmd.uncommitted else ((), ())
    planned_folders = set(_write_folders(expiries, sweeps, stragglers))
    planned_trims = {version_key(t.table_id, t.version) for t in trims}
    resumes = tuple(sorted(run.run_id for run in stopped_runs if (
        resumed_ids.intersection(run.table_ids) or planned_folders.intersection(run.write_folders)
        or planned_trims.intersection(run.trims) or not _work_left(state, run))))
    return Plan(
        run_id=cmd.run_id, root=cmd.root, now=cmd.now, purges=planned, expiries=expiries, trims=trims, sweeps=sweeps,
        stragglers=stragglers,
        foreign=tuple(ForeignScan(i.id, i.name, i.path, _adopted(state, i.id)) for i in written)
        if cmd.uncommitted else (),
        watermarks=tuple(sorted(marks.items())), resumes=resumes, busy=tuple(run.run_id for run in busy_runs),
        waiting=tuple(waiting), held=tuple(pinned), lease_until=cmd.now + cmd.lease_seconds * 1_000_000,
        locations=len(state.tables.bindings) + sum(len(ids) for ids in state.tables.dropped.values()))


def _adopted(state: State, table_id: str) -> str | None:
    first = state.data.version(table_id, 1)
    return first.manifest if first is not None and first.mode == "adopt" else None


def _uncommitted(state: State, instances: list[Instance], cmd: StartVacuum,
                 held: set[str]) -> tuple[tuple[Sweep, ...], tuple[StragglerScan, ...]]:
    """R15: the writes to sweep (aborted, or past their lease by the ledger's time) and the
    committed write folders to clean of stragglers older than the grace period."""
    data = state.data
    cutoff = cmd.now - cmd.grace_seconds * 1_000_000
    sweeps, scans = [], []
    for inst in instances:
        writes = tuple(Folder(w.id, w.folder, why=w.sweep_reason(cmd.now) or UNFINISHED_SWEEP)
                       for w in data.sweepable(inst.id, cmd.now) if w.id not in held)
        if writes:
            sweeps.append(Sweep(inst.id, inst.name, inst.path, writes))
        for w in data.straggler_candidates(inst.id, cutoff):
            version = data.version(inst.id, w.version or 0)
            if w.id not in held and version is not None and version.manifest is not None:
                scans.append(StragglerScan(inst.id, inst.name, inst.path, Folder(w.id, w.folder, version.manifest),
                                           cutoff))
    return tuple(sweeps), tuple(scans)


def _write_folders(*kinds: tuple[Expiry, ...] | tuple[Sweep, ...] | tuple[StragglerScan, ...]) -> tuple[str, ...]:
    return tuple(w for items in kinds for item in items for w in item.recorded())


def _work_left(state: State, run: OpenRun) -> bool:
    """Whether a run that stopped left anything undone: a table not purged, a folder not recorded gone,
    a replace's removed files not recorded deleted."""
    tables = (state.tables.instance(i) for i in run.table_ids)
    writes = (state.data.writes.get(w) for w in run.write_folders)
    trims = (state.data.versions.get(key) for key in run.trims)
    return any(t is not None and t.purged_at is None for t in tables) or \
        any(w is not None and w.deleted_at is None for w in writes) or \
        any(v is not None and v.trimmed_at is None for v in trims)


def _versioned(state: State, database: str | None, purging: set[str]) -> list[Instance]:
    """Live instances, and dropped ones still restorable and not purged by this run, that have
    writes: those whose old versions a vacuum expires (R13) and whose abandoned writes it
    sweeps (R15)."""
    found = []
    for id_ in {w.table_id for w in state.data.writes.values()}:
        inst = state.tables.instances.get(id_)
        if inst is None or inst.purged_at is not None or id_ in purging or state.guard.is_blocked(inst):
            continue
        if database is None or inst.database == database:
            found.append(inst)
    return sorted(found, key=lambda i: (i.name, i.id))


def _expiry(state: State, inst: Instance, cmd: StartVacuum, held: set[str], stopped: set[str],
            pinned: list[Held]) -> Expiry | None:
    """R13 for one instance: the mark its retention allows (evidence: the commit time of a version
    superseded at or before now minus the retention), stopped short of a pinned version (R21,
    added to ``pinned`` when it stopped one), and the folders that then go. A folder a stopped run
    set out to delete (``stopped``) may have lost files already: it carries no list, so it is
    listed, as a resumed purge is."""
    data = state.data
    seconds = state.guard.retention_seconds(inst, cmd.retention_seconds)
    until = cmd.now - seconds * 1_000_000
    pin = state.pins.holding_versions(inst.id, cmd.now)
    allowed = data.retention_allows(inst.id, until, None if pin is None else pin.version)
    if pin is not None and allowed != data.retention_allows(inst.id, until):
        pinned.append(Held(inst.id, inst.name, "expiry", pin.version, pin.id, pin.expires_at))
    current = data.mark(inst.id)
    mark = allowed if allowed is not None and (current is None or allowed > current) else None
    effective = mark if mark is not None else current
    expired = tuple(v.number for v in reversed(data.history(inst.id))
                    if mark is not None and v.committed_at <= mark and not data.is_expired(v)
                    and v.number != data.heads[inst.id])
    gone = [w for w in data.unreferenced_writes(inst.id, effective) if w.id not in held]
    if mark is None and not gone:
        return None
    return Expiry(inst.id, inst.name, inst.path, mark, expired,
                  tuple(Folder(w.id, w.folder, None if w.id in stopped else data.write_manifest(w)) for w in gone))


def _trims(state: State, inst: Instance, mark: Micros | None, held: set[str], stopped: set[str]) -> list[Trim]:
    """R13 for the files replaces removed from write folders that stay: one item per replace whose
    removals are due under ``mark`` (the one this run leaves), but those a live run holds
    (``held``). Its ``skip``: the writes of its base whose folders no version this run leaves
    unexpired names, which go whole (in this run, another, or gone already). One a stopped run set
    out to do (``stopped``) may have lost files already: it is taken over ``fresh``."""
    data = state.data
    named = data.referenced_writes(inst.id, mark)
    found = []
    for r in data.due_removals(inst.id, mark):
        key = version_key(inst.id, r.number)
        if key in held:
            continue
        assert r.removes is not None and r.base is not None  # due_removals gives replaces only
        base = data.versions[version_key(inst.id, r.base)]
        skip = tuple(sorted({w for w, _ in data.parts(base) if w is not None and w not in named}))
        found.append(Trim(inst.id, inst.name, inst.path, r.number, r.removes, skip, key in stopped))
    return found


def choose_watermarks(state: State, chosen: list[Instance]) -> dict[str, Micros]:
    """The widest scopes whose watermarks cover ``chosen`` and newly block nothing else (R5)."""
    guard = state.guard
    need = [i for i in chosen if not guard.is_blocked(i)]
    if not need:
        return {}
    chosen_ids = {i.id for i in chosen}
    spared = [i for i in state.tables.dropped_instances()
              if i.id not in chosen_ids and not guard.is_blocked(i)]
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


def _effective_after(state: State, inst: Instance, marks: dict[str, Micros]) -> Micros:
    return max(m for m in (state.guard.effective_watermark(inst), *map(marks.get, state.guard.covering_scopes(inst)))
               if m is not None)


def _check_lease(seconds: object) -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        raise InvalidArgument(f"a vacuum's lease must be a whole number of seconds of at least 1, not {seconds!r}")


# --- decisions -----------------------------------------------------------------------------

def _start(state: State, cmd: StartVacuum) -> Decision:
    if state.vacuums.taken(cmd.run_id):
        raise InvalidArgument(f"vacuum run id {cmd.run_id!r} is taken: a run of that id is already on "
                              "record; choose another, or leave run_id out for a fresh one")
    plan = plan_vacuum(state, cmd)
    if plan.empty:
        return Decision((), frozenset({CATALOG_STREAM, VACUUM_STREAM}), plan)
    events: list[tuple[str, Any]] = [advance(state, scope, to, cmd.run_id) for scope, to in plan.watermarks]
    events += [advance_mark(e.table_id, e.mark, cmd.run_id) for e in plan.expiries if e.mark is not None]
    for sw in plan.sweeps:  # an earlier run's unfinished sweep is on record already: only its folders are left
        given_up = tuple(f.write_id for f in sw.folders if f.why != UNFINISHED_SWEEP)
        if given_up:
            events.append(sweep(state, sw.table_id, cmd.run_id, given_up, cmd.now))
    events.append((VACUUM_STREAM, VacuumStarted(
        cmd.run_id, tuple(p.table_id for p in plan.purges), dict(plan.watermarks),
        None if cmd.database is None else database_name(cmd.database), cmd.limit, plan.resumes,
        plan.lease_until, {e.table_id: e.mark for e in plan.expiries if e.mark is not None},
        _write_folders(plan.expiries, plan.sweeps, plan.stragglers),
        tuple(version_key(t.table_id, t.version) for t in plan.trims))))
    reads = {VACUUM_STREAM}
    # A commit or renewal racing the sweep lands first or is refused (R4, R15).
    reads |= {data_stream(item.table_id) for item in (*plan.sweeps, *plan.stragglers)}
    for item in (*plan.expiries, *plan.trims, *plan.purges):
        inst = state.tables.instances[item.table_id]
        # A commit, restore, mark or pin of the table since the plan was made must stop it (R4,
        # R21); so must a longer retention than the one that decided it was due.
        reads |= {data_stream(inst.id)} | {retention_stream(scope) for scope in state.guard.covering_scopes(inst)}
        reads |= guard_streams(state, inst) if isinstance(item, Purge) else catalog_streams(inst.database)
    reads |= {watermark_stream(scope) for scope, _ in plan.watermarks}
    return Decision(tuple(events), frozenset(reads), plan)


def _renew(state: State, cmd: RenewVacuum) -> Decision:
    """Extend a live run's lease (or, with a lease of 0, release it). A run taken over is told so
    (result False) and appends nothing: its deletions stay safe (its tables are behind their
    watermarks), but it no longer holds them."""
    if cmd.lease_seconds != 0:
        _check_lease(cmd.lease_seconds)
    run = state.vacuums.runs.get(cmd.run_id)
    if run is None:
        raise InvalidArgument(f"vacuum run {cmd.run_id} is unknown or already finished")
    if run.taken_over:
        return Decision((), frozenset({VACUUM_STREAM}), False)
    until = cmd.now + cmd.lease_seconds * 1_000_000
    return Decision(((VACUUM_STREAM, VacuumLeased(cmd.run_id, until)),), frozenset({VACUUM_STREAM}), True)


def _finish(state: State, cmd: FinishVacuum) -> Decision:
    """What a run's results record (R10: what failed is not recorded, and the next vacuum finishes
    it): a purge for each instance whose whole location went; the write folders of each expiry or
    sweep (or part of one) that went without an error; the replaces whose removed files went; each committed folder cleaned of stragglers
    with none left (one found to hold only what its version names is recorded too, with nothing
    deleted, so that no later vacuum lists it again). The folders of one item's parts are recorded
    together, their counts added up."""
    run = state.vacuums.runs.get(cmd.run_id)
    if run is None:
        raise InvalidArgument(f"vacuum run {cmd.run_id} is unknown or already finished")
    done = _done(run, cmd.results)
    events: list[tuple[str, Any]] = []
    reads = {VACUUM_STREAM}
    for item, result in done[PURGE]:
        inst = state.tables.instance(item.table_id)
        if inst is not None and inst.purged_at is not None:
            continue  # a run that took this one over recorded it first; the files are gone either way
        try:
            events.append(purge(state, item.table_id, cmd.run_id, result.files, result.bytes, cmd.now))
        except PurgeRefused as exc:
            raise PurgeRefused(f"vacuum {cmd.run_id}: {exc}") from None
        reads |= guard_streams(state, state.tables.instances[item.table_id])
    purged = len(events)
    for kind, record, pending in ((EXPIRE, folders_deleted, _not_deleted), (SWEEP, folders_deleted, _not_deleted),
                                  (STRAGGLERS, stragglers_deleted, _not_cleaned),
                                  (TRIM, removals_deleted, _not_trimmed)):
        for table_id, group in _by_table(done[kind]).items():
            ids = tuple(i for item, _ in group for i in item.recorded() if pending(state, table_id, i))
            if ids:  # a run that took this one over may have recorded them first
                events.append(record(state, table_id, cmd.run_id, ids, sum(r.files for _, r in group),
                                     sum(r.bytes for _, r in group)))
                reads.add(data_stream(table_id))
    # A run another vacuum took over may still finish: its purges are facts, and so is what it deleted.
    events.append(close_receipt(state, cmd.run_id))
    reads.add(receipt_stream(cmd.run_id))
    every = [(r.item, r) for r in cmd.results if r.item is not None]
    events.append((VACUUM_STREAM, VacuumFinished(
        cmd.run_id, purged, len({item.base_key for item, r in every if not r.ok}),
        sum(r.files for _, r in every), sum(r.bytes for _, r in every))))
    return Decision(tuple(events), frozenset(reads), purged)


Done = list[tuple[Work, Result]]
ITEMS = (Purge, Expiry, Trim, Sweep, StragglerScan, ForeignScan)


def _done(run: OpenRun, results: object) -> dict[str, Done]:
    """The results worth recording, by kind, each with its item (each part of a split item names its
    own folders); none that failed or, for stragglers, left some. A run's driver hands over one
    result for each item it carried out, or for each part of a split one, the shares of one purge
    added up first (``spark_ops``: ``tasks.finish_purge``): an item, a table or a folder named
    twice would be recorded twice, and is refused, as is any item the run did not plan (R2, R10)."""
    run_id = run.run_id
    odd = results if not isinstance(results, tuple) else next((r for r in results if not isinstance(r, Result)), None)
    if odd is not None or not isinstance(results, tuple):
        raise InvalidArgument(f"vacuum {run_id}: a run's results are vacuum_work.Result values, one for each item "
                              f"(or part) it carried out, not {type(odd).__name__}")
    by_kind: dict[str, Done] = {PURGE: [], EXPIRE: [], TRIM: [], SWEEP: [], STRAGGLERS: []}
    named: set[str] = set()
    for result in results:
        item = result.item
        if item is None:
            continue  # a task's closing result: only receipt parts, recorded as they came
        if not isinstance(item, ITEMS):
            raise InvalidArgument(f"vacuum {run_id}: a result's item is an item of the run's plan (vacuum_work.Purge, "
                                  "Expiry, Trim, Sweep or StragglerScan), or None for a task's closing result, not "
                                  f"{type(item).__name__} {item!r:.60}")
        check_counts(run_id, result.files, result.bytes)
        if item.kind not in by_kind:
            raise InvalidArgument(f"vacuum {run_id}: a {item.kind} item lists files, it deletes none: there is "
                                  "nothing of it to record")
        # Its watermarks and marks, recorded at its start, cover exactly the tables, write folders
        # and replaces its start names: anything else is not its to record.
        started = {PURGE: run.table_ids, TRIM: run.trims}.get(item.kind, run.write_folders)
        unplanned = next((planned for key, planned, _ in item.claims() if key not in started), None)
        if unplanned is not None:
            raise InvalidArgument(f"vacuum {run_id} did not plan {unplanned}: a run records only what it set out to "
                                  "do, as its start recorded it; nothing was recorded")
        for _, _, claim in item.claims():
            if claim in named:
                raise InvalidArgument(f"vacuum {run_id}: two results name {claim}: one result an item (or a part) "
                                      "of the plan, the shares of one purge added up first; nothing was recorded")
            named.add(claim)
        if result.ok and (item.kind == PURGE or not result.left):
            by_kind[item.kind].append((item, result))
    return by_kind


def _by_table(done: Done) -> dict[str, Done]:
    grouped: dict[str, Done] = defaultdict(list)
    for item, result in done:
        grouped[item.table_id].append((item, result))
    return dict(sorted(grouped.items()))


def _not_deleted(state: State, table_id: str, write_id: str) -> bool:
    w = state.data.writes.get(write_id)
    return w is None or w.deleted_at is None  # an unknown write is refused by the record, by name


def _not_trimmed(state: State, table_id: str, number: int) -> bool:
    v = state.data.versions.get(version_key(table_id, number))
    return v is None or v.trimmed_at is None  # an unknown version is refused by the record, by number


def _not_cleaned(state: State, table_id: str, write_id: str) -> bool:
    w = state.data.writes.get(write_id)
    return w is None or w.cleaned_at is None


# --- fold ----------------------------------------------------------------------------------

def _on_started(b: Builder, e: VacuumStarted, seq: int, time: Micros) -> None:
    if b.vacuums.taken(e.run_id):
        raise corrupt(f"event #{seq} starts vacuum {e.run_id}, an id an earlier run already has")
    for id_ in e.table_ids:  # R2 on replay: its watermarks landed first and cover what it lists
        inst = b.tables.instances.get(id_)
        if inst is None or not inst.is_dropped or not b.guard.is_blocked(inst):
            raise corrupt(f"event #{seq} starts vacuum {e.run_id} on table id {id_}, which is not a "
                          "dropped table behind its watermark (R2)")
    for key in e.trims:  # R13 on replay: its marks landed first, and no version they leave names those files
        table_id, _, number = key.rpartition("/")
        if not number.isdigit() or int(number) not in {v.number for v in b.data.due_removals(table_id)}:
            raise corrupt(f"event #{seq} starts vacuum {e.run_id} deleting the files version {key} removed, which is "
                          "no replace whose removals no unexpired version names (R13)")
    runs = b.vacuums.runs
    for earlier in e.resumes:
        run = runs.get(earlier)
        if run is not None:
            runs[earlier] = attrs.evolve(run, taken_over=True)
    runs[e.run_id] = OpenRun(e.run_id, time, e.table_ids, e.lease_until, False, e.write_folders, e.trims)


def _on_leased(b: Builder, e: VacuumLeased, seq: int, time: Micros) -> None:
    run = b.vacuums.runs.get(e.run_id)
    if run is None:
        raise corrupt(f"event #{seq} sets the lease of vacuum {e.run_id}, which is not in progress")
    b.vacuums.runs[e.run_id] = attrs.evolve(run, lease_until=e.until)


def _on_finished(b: Builder, e: VacuumFinished, seq: int, time: Micros) -> None:
    if e.run_id not in b.vacuums.runs:
        raise corrupt(f"event #{seq} finishes vacuum {e.run_id}, which is not in progress")
    del b.vacuums.runs[e.run_id]
    b.vacuums.ended[e.run_id] = time


CONCERN = Concern(
    initial=Vacuums(),
    evolve={VacuumStarted: _on_started, VacuumLeased: _on_leased, VacuumFinished: _on_finished},
    decide={StartVacuum: _start, RenewVacuum: _renew, FinishVacuum: _finish},
)

__all__ = ["VACUUM_STREAM", "VacuumStarted", "VacuumLeased", "VacuumFinished", "OpenRun", "Vacuums",
           "StartVacuum", "RenewVacuum", "FinishVacuum", "plan_vacuum", "choose_watermarks", "CONCERN"]
