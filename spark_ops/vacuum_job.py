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
import threading
import time
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator

import attrs
from pyspark.sql import SparkSession

from ledger import Ledger, VacuumOrder
from ledger.clock import iso_utc

from . import fs
from .heartbeat import Heartbeat

Progress = Callable[[int, int], None]
"""Called with (tasks done, tasks in all) while the executors work."""


@attrs.frozen
class InstanceReport:
    id: str
    name: str
    location: str
    files: int
    bytes: int
    error: str | None = None
    resumed: bool = False
    would_delete: tuple[fs.FileEntry, ...] = ()
    """For a dry run: each file that would be deleted, with its size."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "location": self.location,
                                "files": self.files, "bytes": self.bytes, "error": self.error,
                                "resumed": self.resumed}
        if self.would_delete:
            data["would_delete"] = [{"path": f.path, "size": f.size} for f in self.would_delete]
        return data


@attrs.frozen
class ExpiryReport:
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

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "location": self.location,
                                "mark": iso_utc(self.mark), "versions_expired": list(self.versions),
                                "folders": list(self.folders), "files": self.files, "bytes": self.bytes,
                                "error": self.error}
        if self.would_delete:
            data["would_delete"] = [{"path": f.path, "size": f.size} for f in self.would_delete]
        return data


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

    @property
    def purged(self) -> list[InstanceReport]:
        return [] if self.dry_run else [i for i in self.instances if i.ok]

    @property
    def failures(self) -> list[InstanceReport | ExpiryReport]:
        return [i for i in (*self.instances, *self.expired) if not i.ok]

    @property
    def files(self) -> int:
        return sum(i.files for i in (*self.instances, *self.expired) if i.ok)

    @property
    def bytes(self) -> int:
        return sum(i.bytes for i in (*self.instances, *self.expired) if i.ok)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "dry_run": self.dry_run,
            "watermarks": {scope: iso_utc(at) for scope, at in self.watermarks.items()},
            "instances": [i.to_dict() for i in self.instances],
            "expired": [e.to_dict() for e in self.expired],
            "purged": len(self.purged), "failed": len(self.failures),
            "files": self.files, "bytes": self.bytes,
            "resumed_runs": list(self.resumed_runs), "busy_runs": list(self.busy_runs),
            "waiting": list(self.waiting), "duration_seconds": round(self.duration, 3),
            "timings": {phase: round(seconds, 3) for phase, seconds in self.timings.items()},
        }


def vacuum(spark: SparkSession, ledger: Ledger, *, retention: Any = None, database: str | None = None,
           dry_run: bool = False, limit: int | None = None, override_floor: bool = False,
           progress: Progress | None = None,
           on_start: Callable[[VacuumOrder], None] | None = None) -> VacuumReport:
    """Purge the dropped tables that are past their retention; see the module docstring.

    ``on_start`` is called with the order once it is on record (before any file is touched),
    so that a caller can, say, release the run's lease if it is interrupted."""
    started = time.monotonic()
    timings: dict[str, float] = {}
    options = dict(retention=retention, database=database, limit=limit, override_floor=override_floor)
    order = ledger.plan_vacuum(**options) if dry_run else ledger.start_vacuum(**options)
    timings["plan"] = time.monotonic() - started
    if on_start is not None and order.run_id is not None:
        on_start(order)
    if order.empty:
        return _report(order, dry_run, (), (), started, timings)
    with contextlib.nullcontext() if dry_run else _lease_keeper(ledger, order):
        outcomes = _on_executors(spark, order, dry_run, progress)
    timings["delete"] = time.monotonic() - started - timings["plan"]
    reports = tuple(
        InstanceReport(t.id, t.name, t.location, *outcomes["purge:" + t.id][:3], resumed=t.resumed,
                       would_delete=_entries(outcomes["purge:" + t.id][3]))
        for t in order.targets)
    expired = tuple(
        ExpiryReport(e.id, e.name, e.location, e.mark, e.versions, tuple(f for _, f in e.folders),
                     *outcomes.get("expire:" + e.id, (0, 0, None, None))[:3],
                     would_delete=_entries(outcomes.get("expire:" + e.id, (0, 0, None, None))[3]))
        for e in order.expiries)
    if not dry_run:
        assert order.run_id is not None
        folders = {e.id: tuple(w for w, _ in e.folders) for e in order.expiries}
        ledger.finish_vacuum(order.run_id, [(r.id, r.files, r.bytes) for r in reports if r.ok],
                             failed=sum(not r.ok for r in (*reports, *expired)),
                             expired=[(r.id, folders[r.id], r.files, r.bytes) for r in expired
                                      if r.ok and folders[r.id]])
    timings["record"] = time.monotonic() - started - timings["plan"] - timings["delete"]
    return _report(order, dry_run, reports, expired, started, timings)


def _entries(listing: list | None) -> tuple[fs.FileEntry, ...]:
    return tuple(fs.FileEntry(*f) for f in listing or ())


def _report(order: VacuumOrder, dry_run: bool, reports: tuple[InstanceReport, ...],
            expired: tuple[ExpiryReport, ...], started: float, timings: dict[str, float]) -> VacuumReport:
    return VacuumReport(
        run_id=order.run_id,
        dry_run=dry_run,
        watermarks=dict(order.watermarks),
        instances=reports,
        resumed_runs=order.resumes,
        duration=time.monotonic() - started,
        timings=timings,
        busy_runs=order.busy,
        waiting=order.waiting,
        expired=expired or tuple(ExpiryReport(e.id, e.name, e.location, e.mark, e.versions, (), 0, 0)
                                 for e in order.expiries),
    )


def _lease_keeper(ledger: Ledger, order: VacuumOrder) -> Heartbeat:
    """Renews the run's lease from the driver while the executors delete, so that no other
    vacuum takes its tables over (it would only duplicate the work, never corrupt it)."""
    lease = (order.lease_until - ledger.now()).total_seconds() if order.lease_until else 0
    assert order.run_id is not None
    return Heartbeat("vacuum-lease", lease / 3, lambda: ledger.renew_vacuum(order.run_id))


def _on_executors(spark: SparkSession, order: VacuumOrder, dry_run: bool,
                  progress: Progress | None) -> dict[str, tuple]:
    """Each work item's (files, bytes, error, dry-run listing), deleted (or listed) on the executors:
    ``purge:<id>`` for a dropped table's whole location, ``expire:<id>`` for a table's old write folders."""
    context = spark.sparkContext
    items: dict[str, dict[str, Any]] = {
        "purge:" + t.id: {"location": t.location, "dropped_at": t.dropped_at, "watermark": t.watermark}
        for t in order.targets}
    items.update(("expire:" + e.id, {"location": e.location, "folders": [f for _, f in e.folders]})
                 for e in order.expiries if e.folders)
    plan = context.broadcast({"root": order.root, "items": items})
    ids = sorted(items)
    if not ids:
        return {}
    # A few tasks per core: enough for the progress bar to move in steps and for work to
    # balance; each more costs Spark's per-task overhead (a Python worker round trip).
    slices = max(1, min(len(ids), context.defaultParallelism * 4))
    if progress is not None:
        progress(0, slices)
    group = f"retention-ledger-vacuum-{time.monotonic_ns()}"
    context.setJobGroup(group, "retention-ledger vacuum", interruptOnCancel=True)
    watcher = _ProgressWatcher(context, group, progress) if progress else None
    try:
        rows = context.parallelize(ids, slices).mapPartitions(
            lambda part: _purge_partition(plan, part, dry_run)).collect()
    finally:
        if watcher:
            watcher.stop()
        context.setLocalProperty("spark.jobGroup.id", None)
        plan.unpersist()
    return {row[0]: row[1:] for row in rows}


def _purge_partition(plan: Any, keys: Iterable[str], dry_run: bool) -> Iterator[tuple]:
    """On an executor: re-check each work item against the broadcast plan, then delete (or list)."""
    spec = plan.value
    for key in keys:
        item = spec["items"].get(key)
        if item is None:
            yield (key, 0, 0, "refused: not in this vacuum's plan", None)
        elif key.startswith("purge:"):
            yield (key, *_purge_location(spec["root"], item, dry_run))
        else:
            yield (key, *_delete_folders(spec["root"], item, dry_run))


def _purge_location(root: str, item: dict[str, Any], dry_run: bool) -> tuple:
    mark = item["watermark"]
    if not dry_run and (mark is None or item["dropped_at"] > mark):
        return (0, 0, "refused: not behind its watermark, so still restorable", None)
    outcome = fs.purge(root, item["location"], dry_run=dry_run)
    return (outcome.files, outcome.bytes, outcome.error,
            None if outcome.listing is None else [tuple(entry) for entry in outcome.listing])


def _delete_folders(root: str, item: dict[str, Any], dry_run: bool) -> tuple:
    """A table's old write folders: each must lie in the table's own ``_writes`` folder (R9)."""
    inside = item["location"].rstrip("/") + "/_writes/"
    files = size = 0
    listing: list[tuple] | None = [] if dry_run else None
    for folder in item["folders"]:
        if not folder.startswith(inside) or "/" in folder[len(inside):].strip("/"):
            return (files, size, f"refused: {folder} is not a write folder of {item['location']}", listing)
        outcome = fs.purge(root, folder, dry_run=dry_run)
        if outcome.error is not None:
            return (files, size, outcome.error, listing)
        files += outcome.files
        size += outcome.bytes
        if listing is not None and outcome.listing is not None:
            listing.extend(tuple(entry) for entry in outcome.listing)
    return (files, size, None, listing)


class _ProgressWatcher:
    """Polls Spark's status tracker and reports task counts of the vacuum's job."""

    def __init__(self, context: Any, group: str, progress: Progress, every: float = 0.2) -> None:
        self._context, self._group, self._progress, self._every = context, group, progress, every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self._every):
            self._report()

    def _report(self) -> None:
        tracker = self._context.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        if total:
            self._progress(done, total)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        self._report()
