"""The vacuum: the ledger decides, the executors re-check and delete, the ledger records.

1. **Order (R2).** ``ledger.start_vacuum`` decides which dropped instances are due
   and appends their watermarks and a ``VacuumStarted`` event (with a lease) in one
   conditional append; what it returns is already on record, and each target
   carries the effective watermark it has now. If that raises, we stop here:
   nothing is listed, nothing deleted. A dry run only asks ``ledger.plan_vacuum``,
   which records nothing.
2. **Delete on executors (R9).** The driver broadcasts one small record per
   target (its location, drop time and watermark, as the ledger decided them) and
   distributes the instance ids. Each executor re-checks its instance against that
   record, then lists and deletes its files with ``spark_ops.fs``, which stays
   inside the location and never follows a symbolic link. Only per-instance
   totals come back, so the driver's memory depends on the number of instances,
   not of files. Meanwhile the driver renews the run's lease, so no other vacuum
   takes its tables over while it works.
3. **Record.** One append records a ``TablePurged`` per instance whose files are
   all gone and a ``VacuumFinished`` with what this run deleted. An instance whose
   deletion failed stays blocked and unpurged; the report says why, and the next
   vacuum picks it up first, as it does everything a dead vacuum left.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator

import attrs
from pyspark.sql import SparkSession

from ledger import InvalidArgument, Ledger, VacuumOrder
from ledger.clock import iso_utc
from ledger.views import format_bytes

from . import fs, objects
from .heartbeat import Heartbeat

Progress = Callable[[int, int], None]
"""Called with (tasks done, tasks in all) while the executors work."""

LISTING_THRESHOLD_DEFAULT = 10_000
"""A dry run listing more files than this (by default) leaves its listing in a Parquet dataset
(``report.listing``) rather than in the report."""

LISTING_SAMPLE = 20
"""Files of each item kept in the report when the listing stays in its dataset."""


class _ItemReport:
    """What every item of a vacuum report shares: an error (None when it went well) and, for a
    dry run, the files it would delete."""

    __slots__ = ()
    error: str | None
    would_delete: tuple[fs.FileEntry, ...]

    @property
    def ok(self) -> bool:
        return self.error is None

    def _listed(self, data: dict[str, Any]) -> dict[str, Any]:
        if self.would_delete:
            data["would_delete"] = [{"path": f.path, "size": f.size} for f in self.would_delete]
        return data


@attrs.frozen
class InstanceReport(_ItemReport):
    id: str
    name: str
    location: str
    files: int
    bytes: int
    error: str | None = None
    resumed: bool = False
    would_delete: tuple[fs.FileEntry, ...] = ()
    """For a dry run: each file that would be deleted, with its size."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "location": self.location,
                                "files": self.files, "bytes": self.bytes, "error": self.error,
                                "resumed": self.resumed}
        return self._listed(data)


@attrs.frozen
class ExpiryReport(_ItemReport):
    """What a vacuum did to one table's old versions (R13)."""
    id: str
    name: str
    location: str
    mark: datetime | None
    versions: tuple[int, ...]
    """The versions that expired with this run's mark."""
    folders: tuple[str, ...]
    """The write folders it deleted (or, for a dry run, would delete)."""
    files: int
    bytes: int
    error: str | None = None
    would_delete: tuple[fs.FileEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "location": self.location,
                                "mark": iso_utc(self.mark), "versions_expired": list(self.versions),
                                "folders": list(self.folders), "files": self.files, "bytes": self.bytes,
                                "error": self.error}
        return self._listed(data)


@attrs.frozen
class SweepReport(_ItemReport):
    """Abandoned writes of one table a vacuum gave up, and their folders it deleted (R15)."""
    id: str
    name: str
    location: str
    writes: tuple[tuple[str, str], ...]
    """(write id, why: ``aborted`` or ``lease expired``)."""
    files: int
    bytes: int
    error: str | None = None
    would_delete: tuple[fs.FileEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "location": self.location,
                                "writes": [{"id": w, "why": why} for w, why in self.writes],
                                "files": self.files, "bytes": self.bytes, "error": self.error}
        return self._listed(data)


@attrs.frozen
class StragglerReport(_ItemReport):
    """A committed write's folder cleaned of files its version does not name (R15)."""
    id: str
    name: str
    write_id: str
    folder: str
    files: int
    bytes: int
    left: int = 0
    """Unnamed files younger than the grace period: left for a later vacuum."""
    error: str | None = None
    would_delete: tuple[fs.FileEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "write_id": self.write_id, "folder": self.folder,
                                "files": self.files, "bytes": self.bytes, "left": self.left, "error": self.error}
        return self._listed(data)


@attrs.frozen
class VacuumReport:
    run_id: str | None
    dry_run: bool
    watermarks: dict[str, datetime]
    """The watermarks this run advanced (or, for a dry run, would advance), by scope."""
    instances: tuple[InstanceReport, ...]
    resumed_runs: tuple[str, ...]
    duration: float
    busy_runs: tuple[str, ...] = ()
    """Other runs still holding a live lease: their tables were left to them."""
    waiting: tuple[dict[str, Any], ...] = ()
    """Dropped tables not yet due, with when they become due and which retention decided."""
    timings: dict[str, float] = attrs.field(factory=dict)
    """Seconds spent planning (with the watermark append), deleting, and recording."""
    expired: tuple[ExpiryReport, ...] = ()
    """Tables whose old versions this run expired, and the write folders it deleted."""
    swept: tuple[SweepReport, ...] = ()
    stragglers: tuple[StragglerReport, ...] = ()
    foreign: tuple[tuple[str, str, tuple[fs.FileEntry, ...]], ...] = ()
    """For a dry run: (table, location, files) outside every write folder that no version names.
    No vacuum deletes them (only a purge of the whole table does)."""
    listing: str | None = None
    """For a dry run of more than ``listing_threshold`` files: the Parquet dataset holding the whole
    listing (columns ``item``, ``kind``, ``table_id``, ``path``, ``size``); each item's
    ``would_delete`` then holds only the first ``LISTING_SAMPLE`` of its files."""

    @property
    def purged(self) -> list[InstanceReport]:
        return [] if self.dry_run else [i for i in self.instances if i.ok]

    @property
    def _items(self) -> tuple[Any, ...]:
        return (*self.instances, *self.expired, *self.swept, *self.stragglers)

    @property
    def failures(self) -> list[Any]:
        return [i for i in self._items if not i.ok]

    @property
    def files(self) -> int:
        return sum(i.files for i in self._items if i.ok)

    @property
    def bytes(self) -> int:
        return sum(i.bytes for i in self._items if i.ok)

    def summary(self) -> str:
        """What the run did (or, for a dry run, would do), in a few lines a person reads."""
        def said(would: str, did: str) -> str:
            return would if self.dry_run else did
        head = "dry run" if self.dry_run else f"vacuum {self.run_id}"
        ok = [i for i in self.instances if i.ok]
        lines = [f"{head}: {said('would purge', 'purged')} {len(ok)} table(s), {said('would delete', 'deleted')} "
                 f"{self.files} file(s) ({format_bytes(self.bytes)}) in {self.duration:.1f}s"]
        expired = [e for e in self.expired if e.ok]
        if expired:
            lines.append(f"  {said('would expire', 'expired')} {sum(len(e.versions) for e in expired)} old "
                         f"version(s) of {len(expired)} table(s)")
        if self.swept:
            lines.append(f"  {said('would sweep', 'swept')} {sum(len(s.writes) for s in self.swept if s.ok)} "
                         "abandoned write(s)")
        if self.stragglers:
            lines.append(f"  {said('would clean', 'cleaned')} {sum(1 for s in self.stragglers if s.ok)} write "
                         "folder(s) of stragglers")
        for item in self.failures:
            lines.append(f"  failed: {getattr(item, 'name', item.id)}: {item.error}")
        if self.waiting:
            lines.append(f"  {len(self.waiting)} dropped table(s) not yet due (the first: {self.waiting[0]['name']}, "
                         f"due {self.waiting[0]['due_at']})")
        if self.busy_runs:
            lines.append(f"  left to running vacuum(s): {', '.join(self.busy_runs)}")
        if self.listing:
            lines.append(f"  the whole listing: {self.listing}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "dry_run": self.dry_run,
            "watermarks": {scope: iso_utc(at) for scope, at in self.watermarks.items()},
            "instances": [i.to_dict() for i in self.instances],
            "expired": [e.to_dict() for e in self.expired],
            "swept": [s.to_dict() for s in self.swept],
            "stragglers": [s.to_dict() for s in self.stragglers],
            "foreign": [{"name": name, "location": location, "files": [{"path": f.path, "size": f.size} for f in files]}
                        for name, location, files in self.foreign],
            "purged": len(self.purged), "failed": len(self.failures),
            "files": self.files, "bytes": self.bytes,
            "resumed_runs": list(self.resumed_runs), "busy_runs": list(self.busy_runs),
            "waiting": list(self.waiting), "duration_seconds": round(self.duration, 3),
            "timings": {phase: round(seconds, 3) for phase, seconds in self.timings.items()},
            "listing": self.listing,
        }


def vacuum(spark: SparkSession, ledger: Ledger, *, retention: Any = None, database: str | None = None,
           dry_run: bool = False, limit: int | None = None, override_floor: bool = False,
           uncommitted: bool = True, only_uncommitted: bool = False, grace: Any = None,
           progress: Progress | None = None,
           run_id: str | None = None,
           listing_dir: str | os.PathLike[str] | None = None,
           listing_threshold: int = LISTING_THRESHOLD_DEFAULT) -> VacuumReport:
    """Purge the dropped tables that are past their retention, expire old versions, and (unless
    ``uncommitted=False``) sweep abandoned writes and stragglers; see the module docstring.

    ``run_id`` names the run (default: a fresh one). A caller that must release the run's lease
    if it is interrupted chooses it before the call (``Ledger.new_run_id()``): it then knows the
    id even if it is stopped the moment the start lands. A dry run records no run, and ignores it.

    A dry run's executors write what they list to a Parquet dataset (in ``listing_dir``, a new
    folder that must not exist yet; default a fresh temporary one) and send the driver only
    totals and a sample. If the whole listing has at most ``listing_threshold`` files it is read
    back into the report and the dataset removed; otherwise ``report.listing`` says where it is,
    so the driver's memory stays flat however many files would go."""
    started = time.monotonic()
    timings: dict[str, float] = {}
    options = dict(retention=retention, database=database, limit=limit, override_floor=override_floor,
                   uncommitted=uncommitted, only_uncommitted=only_uncommitted, grace=grace)
    order = ledger.plan_vacuum(**options) if dry_run else ledger.start_vacuum(run_id=run_id, **options)
    timings["plan"] = time.monotonic() - started
    if order.empty and not (dry_run and order.written):
        return _report(order, dry_run, {}, started, timings)
    listing = _listing_folder(listing_dir) if dry_run else None
    try:
        with contextlib.nullcontext() if dry_run else _lease_keeper(ledger, order):
            outcomes = _on_executors(spark, order, dry_run, progress, listing)
        kept = None if listing is None else \
            _settle_listing(listing, outcomes, keep=listing_dir is not None, threshold=listing_threshold)
    except BaseException:
        if listing is not None and listing_dir is None:
            shutil.rmtree(listing, ignore_errors=True)
        raise
    timings["delete"] = time.monotonic() - started - timings["plan"]
    report = attrs.evolve(_report(order, dry_run, outcomes, started, timings), listing=kept)
    if not dry_run:
        assert order.run_id is not None
        folders = {e.id: tuple(w for w, _ in e.folders) for e in order.expiries}
        ledger.finish_vacuum(
            order.run_id, [(r.id, r.files, r.bytes) for r in report.instances if r.ok],
            failed=len(report.failures),
            expired=[(r.id, folders[r.id], r.files, r.bytes) for r in report.expired if r.ok and folders[r.id]]
            + [(r.id, tuple(w for w, _ in r.writes), r.files, r.bytes) for r in report.swept if r.ok],
            stragglers=[(r.id, (r.write_id,), r.files, r.bytes) for r in report.stragglers if r.ok and not r.left])
    timings["record"] = time.monotonic() - started - timings["plan"] - timings["delete"]
    return attrs.evolve(report, duration=time.monotonic() - started, timings=timings)


def sweep(spark: SparkSession, ledger: Ledger, **options: Any) -> VacuumReport:
    """Only the uncommitted data (R15): abandoned writes and stragglers; no purge, no expiry."""
    return vacuum(spark, ledger, only_uncommitted=True, **options)


def _chunks_of(outcomes: dict[str, tuple], key: str) -> int:
    return sum(1 for k in outcomes if k.startswith(key + "#"))


def _split(key: str, item: dict[str, Any], folders: list[str], pieces: int,
           named: tuple[bytes | None, ...] = ()) -> dict[str, dict[str, Any]]:
    """A table's many write folders as several items (``key#0``, ``key#1``, ...), so that a sweep
    of one big table is spread over every executor core rather than left to one task. ``named``:
    for each folder, the files the ledger knows it holds (deleted by key on an object store)."""
    size = max(1, -(-len(folders) // pieces))
    return {f"{key}#{i}": {**item, "folders": folders[start:start + size],
                           "named": list(named[start:start + size]) if named else None}
            for i, start in enumerate(range(0, len(folders), size))}


def _entries(listing: list | None) -> tuple[fs.FileEntry, ...]:
    return tuple(fs.FileEntry(*f) for f in listing or ())


_NOTHING = (0, 0, None, None, 0)


def _report(order: VacuumOrder, dry_run: bool, outcomes: dict[str, tuple], started: float,
            timings: dict[str, float]) -> VacuumReport:
    """Every work item's outcome, by kind (an item with nothing to delete did nothing)."""
    def out(key: str) -> tuple:
        """The outcome of one item, or the sum of the chunks a big item was split into."""
        parts = [outcomes[k] for k in (key, *(f"{key}#{i}" for i in range(_chunks_of(outcomes, key))))
                 if k in outcomes]
        if not parts:
            return _NOTHING
        listings = [p[3] for p in parts if p[3] is not None]
        return (sum(p[0] for p in parts), sum(p[1] for p in parts), next((p[2] for p in parts if p[2]), None),
                [entry for listing in listings for entry in listing] if listings else None, sum(p[4] for p in parts))

    return VacuumReport(
        run_id=order.run_id,
        dry_run=dry_run,
        watermarks=dict(order.watermarks),
        instances=tuple(InstanceReport(t.id, t.name, t.location, *out("purge:" + t.id)[:3], resumed=t.resumed,
                                       would_delete=_entries(out("purge:" + t.id)[3])) for t in order.targets),
        resumed_runs=order.resumes,
        duration=time.monotonic() - started,
        timings=timings,
        busy_runs=order.busy,
        waiting=order.waiting,
        expired=tuple(ExpiryReport(e.id, e.name, e.location, e.mark, e.versions, tuple(f for _, f in e.folders),
                                   *out("expire:" + e.id)[:3], would_delete=_entries(out("expire:" + e.id)[3]))
                      for e in order.expiries),
        swept=tuple(SweepReport(w.id, w.name, w.location, tuple((i, why) for i, _, why in w.writes),
                                *out("sweep:" + w.id)[:3], would_delete=_entries(out("sweep:" + w.id)[3]))
                    for w in order.sweeps),
        stragglers=tuple(StragglerReport(c.id, c.name, c.write_id, c.folder, *out("stragglers:" + c.write_id)[:2],
                                         left=out("stragglers:" + c.write_id)[4],
                                         error=out("stragglers:" + c.write_id)[2],
                                         would_delete=_entries(out("stragglers:" + c.write_id)[3]))
                         for c in order.stragglers),
        foreign=tuple((name, location, _entries(out("foreign:" + i)[3])) for i, name, location, _ in order.written
                      if dry_run and out("foreign:" + i)[3]),
    )


def _lease_keeper(ledger: Ledger, order: VacuumOrder) -> Heartbeat:
    """Renews the run's lease from the driver while the executors delete, so that no other
    vacuum takes its tables over (it would only duplicate the work, never corrupt it)."""
    lease = (order.lease_until - ledger.now()).total_seconds() if order.lease_until else 0
    assert order.run_id is not None
    return Heartbeat("vacuum-lease", lease / 3, lambda: ledger.renew_vacuum(order.run_id))


def _on_executors(spark: SparkSession, order: VacuumOrder, dry_run: bool,
                  progress: Progress | None, listing: str | None = None) -> dict[str, tuple]:
    """Each work item's (files, bytes, error, dry-run listing), deleted (or listed) on the executors:
    ``purge:<id>`` for a dropped table's whole location, ``expire:<id>`` for a table's old write folders."""
    context = spark.sparkContext
    # On an object store what the ledger knows is deleted by key (R20): not for a run taking a dead
    # one's table over, whose listing then counts exactly what is left (a key answers "deleted"
    # whether or not the dead run had got to it).
    items: dict[str, dict[str, Any]] = {
        "purge:" + t.id: {"location": t.location, "dropped_at": t.dropped_at, "watermark": t.watermark,
                          "named": list(t.named) if t.named and not t.resumed else None}
        for t in order.targets}
    pieces = context.defaultParallelism * 2
    for e in order.expiries:
        if e.folders:
            items.update(_split("expire:" + e.id, {"location": e.location}, [f for _, f in e.folders], pieces,
                                e.named))
    for w in order.sweeps:
        items.update(_split("sweep:" + w.id, {"location": w.location}, [f for _, f, _ in w.writes], pieces))
    items.update(("stragglers:" + c.write_id, {"location": c.location, "folder": c.folder, "named": c.named,
                                               "cutoff": c.cutoff.timestamp()}) for c in order.stragglers)
    if dry_run:
        items.update(("foreign:" + i, {"location": location, "named": named})
                     for i, _, location, named in order.written)
    spec = {"root": order.root, "items": items, "listing": listing, "siblings": order.locations}
    ids = sorted(items)
    if not ids:
        return {}
    # On an object store, what the ledger knows (the files of the tables it purges, of the versions
    # it expires) and the small listings of write folders are deleted from the driver, with the
    # same code and checks as on an executor, a few DeleteObjects batches in flight: the store does
    # the work, and a Spark job would cost more than the deletes themselves (0.1-0.3 s against
    # 0.55 s for 20,000 objects here), as Iceberg's Spark actions and delta-rs delete from one
    # process. What the ledger does not know (a dropped location written outside it) is listed on
    # the executors, split below the table.
    on_driver = [] if dry_run or fs.is_local(order.root) else \
        [k for k in ids if not (k.startswith("purge:") and not items[k]["named"])]
    ids = [k for k in ids if k not in set(on_driver)]
    driver = _DRIVER.submit(lambda: list(_work_partition(_Here(spec), on_driver, False))) if on_driver else None
    try:
        rows = _on_spark(context, spec, ids, dry_run, progress, order) if ids else []
    finally:
        done = [] if driver is None else driver.result()
    if progress is not None and on_driver and not ids:
        progress(1, 1)
    return {row[0]: row[1:] for row in rows + done}


class _Here:
    """The plan as the driver holds it, in the shape of a broadcast (``.value``)."""

    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value


_DRIVER = ThreadPoolExecutor(1, thread_name_prefix="vacuum-driver")


def _on_spark(context: Any, spec: dict[str, Any], ids: list[str], dry_run: bool, progress: Progress | None,
              order: VacuumOrder) -> list[tuple]:
    """The items given to the executors: one job for the whole-item work, and the purges split
    below the table in one or two more."""
    items = spec["items"]
    plan = context.broadcast(spec)
    # A few tasks per core: enough for the progress bar to move in steps and for work to
    # balance; each more costs Spark's per-task overhead (a Python worker round trip, ~0.1 s
    # here). On an object store a task keeps several batches in flight itself: one a core.
    per_core = 4 if fs.is_local(order.root) else 1
    slices = max(1, min(len(ids), context.defaultParallelism * per_core))
    # Purges the ledger knows the files of (object stores) go with the other items, several tables a
    # task, their keys sharing batches; the others are split below the table (their folders listed).
    purges = [] if dry_run else [k for k in ids if k.startswith("purge:") and not items[k]["named"]]
    others = sorted(set(ids) - set(purges))
    # Known up front, except the second purge job's, which starts only if a big table is found.
    total = (max(1, min(len(others), slices)) if others else 0) + _first_purge_tasks(context, len(purges))
    if progress is not None:
        progress(0, total)
    group = f"retention-ledger-vacuum-{time.monotonic_ns()}"
    context.setJobGroup(group, "retention-ledger vacuum", interruptOnCancel=True)
    watcher = _ProgressWatcher(context, group, progress, total) if progress else None
    try:
        rows = context.parallelize(others, max(1, min(len(others), slices))).mapPartitions(
            lambda part: _purge_partition(plan, part, dry_run)).collect() if others else []
        if purges:
            rows += _purge_below_tables(context, plan, purges, watcher)
    finally:
        if watcher:
            watcher.stop()
        context.setLocalProperty("spark.jobGroup.id", None)
        plan.unpersist()
    return rows


SHARES_PER_CORE = 4
"""Tasks per core that big tables' sub-folders are shared out over, all tables together."""


def _purge_below_tables(context: Any, plan: Any, keys: list[str], watcher: _ProgressWatcher | None) -> list[tuple]:
    """Purge dropped tables with the work split below the table, in one or two jobs.

    Fewer tables than cores cannot keep the executors busy one task each, so each is shared out
    at once (``_share_out``). Many are looked at one task each first: a table with fewer than
    two sub-folders (``fs.pieces``: write folders, partitions) is purged whole there, and that
    is usually every table, so one single-stage job does it all; only the bigger ones are
    counted and shared out by a second job. The driver receives one row per table from each
    job, never a path."""
    cores = context.defaultParallelism
    if len(keys) <= cores:
        return _share_out(context, plan, _shares(context, dict.fromkeys(keys)))
    first = dict(context.parallelize(keys, _first_purge_tasks(context, len(keys)))
                 .mapPartitions(lambda part: _look_or_purge(plan, part)).collect())
    rows = [(key, *done[:3], None, 0) for key, (done, _) in first.items() if done[3]]
    big = _shares(context, {key: pieces for key, (done, pieces) in first.items() if not done[3]})
    if not big:
        return rows
    if watcher is not None:
        watcher.expect(_share_tasks(context, big))
    return rows + _share_out(context, plan, big)


def _shares(context: Any, tables: dict[Any, int | None]) -> dict[Any, int]:
    """How many tasks each table is shared out over: ``SHARES_PER_CORE`` a core split between the
    tables, and no more than a table has sub-folders (None: not counted yet)."""
    each = max(1, context.defaultParallelism * SHARES_PER_CORE // max(1, len(tables)))
    return {key: each if pieces is None else max(1, min(pieces, each)) for key, pieces in tables.items()}


def _first_purge_tasks(context: Any, tables: int) -> int:
    """Tasks of the first purge job: for fewer tables than cores, the share-out's; else a few per
    core (each costs a Python worker round trip)."""
    cores = context.defaultParallelism
    if not tables:
        return 0
    if tables <= cores:
        return _share_tasks(context, _shares(context, dict.fromkeys(range(tables))))
    return min(tables, cores * 4)


def _share_tasks(context: Any, shares: dict[Any, int]) -> int:
    return sum(shares.values()) + _finishing_tasks(context, shares)


def _finishing_tasks(context: Any, shares: dict[Any, int]) -> int:
    return max(1, min(len(shares), context.defaultParallelism))


def _share_out(context: Any, plan: Any, shares: dict[str, int]) -> list[tuple]:
    """Each table's sub-folders shared out over ``shares[key]`` tasks (``_share_of_listing``; a
    table with fewer than two is purged whole by share 0), each deleting several at once; the
    totals summed per table on the executors; then one task per table purges what is left (files
    at the top, emptied folders, any late file) and removes the location."""
    work = [(key, j, k) for key, k in sorted(shares.items()) for j in range(k)]
    return (context.parallelize(work, len(work))
            .map(lambda share: (share[0], _delete_share(plan, *share)))
            .reduceByKey(_add, numPartitions=_finishing_tasks(context, shares))
            .map(lambda kv: _finish_purge(plan, *kv))
            .collect())


Done = tuple  # (files, bytes, error, finished): a table's totals so far, and whether nothing is left to do


def _look_or_purge(plan: Any, keys: Iterable[str]) -> Iterator[tuple[str, tuple[Done, int]]]:
    """On an executor: the tables with fewer than two sub-folders purged here and now, several at
    once (``fs.purge_each``), the refused ones reported; the bigger ones only counted, for the
    second job to share out."""
    spec = plan.value
    whole: list[str] = []
    for key in keys:
        item = spec["items"].get(key)
        refused = "refused: not in this vacuum's plan" if item is None else _refusal(item)
        if refused is not None:
            yield key, ((0, 0, refused, True), 0)
            continue
        pieces = len(fs.pieces(spec["root"], item["location"]))
        if pieces < 2:
            whole.append(key)
        else:
            yield key, ((0, 0, None, False), pieces)
    outcomes = fs.purge_each(spec["root"], [spec["items"][key]["location"] for key in whole])
    for key, outcome in zip(whole, outcomes):
        yield key, ((outcome.files, outcome.bytes, outcome.error, True), 0)


def _delete_share(plan: Any, key: str, share: int, shares: int) -> Done:
    """On an executor: re-check the table against the plan, then delete the sub-folders that are
    this share's (``_share_of_listing``), several at once (a table with fewer than two: share 0
    purges it whole). One that appears meanwhile is left to the final purge of the location."""
    spec = plan.value
    item = spec["items"].get(key)
    refused = "refused: not in this vacuum's plan" if item is None else _refusal(item)
    if refused is not None:
        return (0, 0, refused, False)
    pieces = fs.pieces(spec["root"], item["location"])
    if len(pieces) < 2:
        if share:
            return (0, 0, None, False)
        files, size, error, _ = _purge_location(spec["root"], item, False)
        return (files, size, error, True)
    inside = item["location"].rstrip("/") + "/"
    local = fs.is_local(spec["root"])
    folders = _share_of_listing(pieces, share, shares, local)
    outside = next((f for f in folders if not f.startswith(inside)), None)
    if outside is not None:
        return (0, 0, f"refused: {outside} is not inside {item['location']}", False)
    return (*_totals(fs.purge_each(spec["root"], folders, keep=local)), False)


def _totals(outcomes: list[fs.Outcome]) -> tuple[int, int, str | None]:
    """Files and bytes deleted by several purges, and the first error among them."""
    error = next((o.error for o in outcomes if o.error is not None), None)
    return sum(o.files for o in outcomes), sum(o.bytes for o in outcomes), error


def _share_of_listing(pieces: list[str], share: int, shares: int, local: bool) -> list[str]:
    """The sub-folders share ``share`` of ``shares`` deletes, out of a listing it made itself while
    other shares delete. Every share must pick from the same listing, or a folder may fall
    between two (and be left, with all such, to the one task that finishes the location).

    On a local disk each share empties its folders but keeps them (the finish removes them), so
    every share lists the same folders, and takes every ``shares``-th: evenly. An object store
    has no empty folders to keep, so there a share takes the folders whose name's CRC falls to
    it: the same in every process (Python's own hash is salted per process), evenly spread over
    many random ids, less so over a few."""
    if local:
        return sorted(pieces)[share::shares]
    return [p for p in pieces if zlib.crc32(p.encode()) % shares == share]


def _add(a: Done, b: Done) -> Done:
    return (a[0] + b[0], a[1] + b[1], a[2] or b[2], a[3] or b[3])


def _finish_purge(plan: Any, key: str, done: Done) -> tuple:
    """On an executor: after the pieces, purge the rest of the location (or report the first error)."""
    files, size, error, finished = done
    if error is None and not finished:
        more_files, more_bytes, error, _ = _purge_location(plan.value["root"], plan.value["items"][key], False)
        files, size = files + more_files, size + more_bytes
    return (key, files, size, error, None, 0)


def _refusal(item: dict[str, Any]) -> str | None:
    """Why an executor refuses to purge a table (the ledger's decision re-checked), or None."""
    mark = item["watermark"]
    if mark is None or item["dropped_at"] > mark:
        return "refused: not behind its watermark, so still restorable"
    return None


def _purge_partition(plan: Any, keys: Iterable[str], dry_run: bool) -> Iterator[tuple]:
    """On an executor: re-check each work item against the broadcast plan, then delete (or list:
    a dry run writes each item's listing to the dataset and sends back a sample)."""
    listing = plan.value.get("listing")
    for row in _work_partition(plan, keys, dry_run):
        if listing is not None and row[4]:
            _write_listing(listing, row[0], row[4])
            row = (*row[:4], row[4][:LISTING_SAMPLE], *row[5:])
        yield row


def _work_partition(plan: Any, keys: Iterable[str], dry_run: bool) -> Iterator[tuple]:
    spec = plan.value
    keys = list(keys)
    known = [k for k in keys if not dry_run and k.startswith("purge:") and (spec["items"].get(k) or {}).get("named")]
    yield from _purge_known(spec, known)
    for key in (k for k in keys if k not in set(known)):
        item = spec["items"].get(key)
        if item is None:
            yield (key, 0, 0, "refused: not in this vacuum's plan", None, 0)
        elif key.startswith("purge:"):  # split items (key#n) keep their kind's prefix
            yield (key, *_purge_location(spec["root"], item, dry_run), 0)
        elif key.startswith("stragglers:"):
            outcome, left = fs.delete_unnamed(spec["root"], item["location"], item["folder"], set(item["named"]),
                                              item["cutoff"], dry_run=dry_run)
            yield (key, outcome.files, outcome.bytes, outcome.error,
                   None if outcome.listing is None else [tuple(e) for e in outcome.listing], left)
        elif key.startswith("foreign:"):
            found = fs.foreign_files(spec["root"], item["location"], set(item["named"]))
            yield (key, len(found), sum(f.size for f in found), None, [tuple(f) for f in found], 0)
        else:
            yield (key, *_delete_folders(spec["root"], item, dry_run), 0)


def _purge_known(spec: dict[str, Any], keys: list[str]) -> Iterator[tuple]:
    """Dropped tables on an object store whose files the ledger knows: each re-checked against the
    plan, then purged together (their known keys, then what a listing finds, sharing DeleteObjects
    batches)."""
    allowed = []
    for key in keys:
        refused = _refusal(spec["items"][key])
        if refused is not None:
            yield (key, 0, 0, refused, None, 0)
        else:
            allowed.append(key)
    if not allowed:
        return
    done = objects.purge(spec["root"], [spec["items"][k]["location"] for k in allowed],
                         named=[spec["items"][k]["named"] for k in allowed], siblings=spec.get("siblings"))
    for key, (files, size, error) in zip(allowed, done):
        yield (key, files, size, error, None, 0)


def _purge_location(root: str, item: dict[str, Any], dry_run: bool) -> tuple:
    refused = None if dry_run else _refusal(item)
    if refused is not None:
        return (0, 0, refused, None)
    outcome = fs.purge(root, item["location"], dry_run=dry_run)
    return (outcome.files, outcome.bytes, outcome.error,
            None if outcome.listing is None else [tuple(entry) for entry in outcome.listing])


def _delete_folders(root: str, item: dict[str, Any], dry_run: bool) -> tuple:
    """A table's old write folders, several at once: each must lie in the table's own ``_writes``
    folder (R9), and one that does not refuses them all before any is touched."""
    inside = item["location"].rstrip("/") + "/_writes/"
    listing: list[tuple] | None = [] if dry_run else None
    for folder in item["folders"]:
        if not folder.startswith(inside) or "/" in folder[len(inside):].strip("/"):
            return (0, 0, f"refused: {folder} is not a write folder of {item['location']}", listing)
    if item.get("named") and not dry_run:  # on an object store: what the ledger knows goes by key (R20)
        done = objects.delete_named(root, item["location"], list(zip(item["folders"], item["named"])))
        error = next((e for _, _, e in done if e is not None), None)
        return (sum(f for f, _, _ in done), sum(b for _, b, _ in done), error, None)
    outcomes = fs.purge_each(root, list(item["folders"]), dry_run=dry_run)
    if listing is not None:
        listing.extend(tuple(entry) for outcome in outcomes for entry in outcome.listing or ())
    return (*_totals(outcomes), listing)


# --- a dry run's listing, as a dataset ------------------------------------------------------


def _listing_folder(listing_dir: str | os.PathLike[str] | None) -> str:
    if listing_dir is None:
        return tempfile.mkdtemp(prefix="retention-ledger-dry-run-")
    folder = Path(listing_dir)
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        raise InvalidArgument(f"{folder} exists: a dry run writes its listing to a new folder") from None
    return str(folder.resolve())


def _write_listing(folder: str, key: str, entries: list[tuple]) -> None:
    """On an executor: one item's listing as one Parquet file of the dataset."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    kind, _, rest = key.partition(":")
    table = pa.table({"item": [key] * len(entries), "kind": [kind] * len(entries),
                      "table_id": [rest.split("#")[0]] * len(entries),
                      "path": [e[0] for e in entries], "size": pa.array([e[1] for e in entries], pa.int64())})
    name = hashlib.sha256(key.encode()).hexdigest()[:24]
    pq.write_table(table, os.path.join(folder, f"part-{name}.parquet"))


def _settle_listing(folder: str, outcomes: dict[str, tuple], *, keep: bool, threshold: int) -> str | None:
    """Small listings go back into the outcomes (and the dataset away, unless the caller named
    its folder); a large one stays where it is."""
    total = sum(o[0] for k, o in outcomes.items() if o[3])
    if total > threshold:
        return folder
    if any(Path(folder).iterdir()):
        import pyarrow.parquet as pq
        found: dict[str, list[tuple]] = {}
        for row in pq.read_table(folder, columns=["item", "path", "size"]).to_pylist():
            found.setdefault(row["item"], []).append((row["path"], row["size"]))
        for key, entries in found.items():
            outcomes[key] = (*outcomes[key][:3], entries, *outcomes[key][4:])
    if keep:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    return None


class _ProgressWatcher:
    """Polls Spark's status tracker and reports task counts of the vacuum's job."""

    def __init__(self, context: Any, group: str, progress: Progress, total: int, every: float = 0.2) -> None:
        self._context, self._group, self._progress, self._every = context, group, progress, every
        self._total = total  # known up front: the tracker only sees a job's stages once it starts
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self._every):
            self._report()

    def _report(self) -> None:
        tracker = self._context.statusTracker()
        done = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    done += stage.numCompletedTasks
        self._progress(min(done, self._total), self._total)

    def expect(self, more: int) -> None:
        """A job decided on the way (the second purge job) adds its tasks to the total."""
        self._total += more

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        self._report()
