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

from ledger import Ledger, LedgerError, VacuumOrder
from ledger.clock import iso_utc

from . import fs

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

    @property
    def purged(self) -> list[InstanceReport]:
        return [] if self.dry_run else [i for i in self.instances if i.ok]

    @property
    def failures(self) -> list[InstanceReport]:
        return [i for i in self.instances if not i.ok]

    @property
    def files(self) -> int:
        return sum(i.files for i in self.instances if i.ok)

    @property
    def bytes(self) -> int:
        return sum(i.bytes for i in self.instances if i.ok)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "dry_run": self.dry_run,
            "watermarks": {scope: iso_utc(at) for scope, at in self.watermarks.items()},
            "instances": [i.to_dict() for i in self.instances],
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
    if not order.targets:
        return _report(order, dry_run, (), started, timings)
    with contextlib.nullcontext() if dry_run else _LeaseKeeper(ledger, order):
        outcomes = _on_executors(spark, order, dry_run, progress)
    timings["delete"] = time.monotonic() - started - timings["plan"]
    reports = tuple(
        InstanceReport(t.id, t.name, t.location, *outcomes[t.id][:3], resumed=t.resumed,
                       would_delete=tuple(fs.FileEntry(*f) for f in outcomes[t.id][3] or ()))
        for t in order.targets)
    if not dry_run:
        assert order.run_id is not None
        ledger.finish_vacuum(order.run_id, [(r.id, r.files, r.bytes) for r in reports if r.ok],
                             failed=sum(not r.ok for r in reports))
    timings["record"] = time.monotonic() - started - timings["plan"] - timings["delete"]
    return _report(order, dry_run, reports, started, timings)


def _report(order: VacuumOrder, dry_run: bool, reports: tuple[InstanceReport, ...],
            started: float, timings: dict[str, float]) -> VacuumReport:
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
    )


class _LeaseKeeper:
    """Renews a running vacuum's lease from the driver while the executors delete, so that no
    other vacuum takes its tables over (it would only duplicate the work, never corrupt it)."""

    def __init__(self, ledger: Ledger, order: VacuumOrder) -> None:
        self._ledger, self._run_id = ledger, order.run_id
        lease = (order.lease_until - ledger.now()).total_seconds() if order.lease_until else 0
        self._every = max(1.0, lease / 3)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vacuum-lease", daemon=True)

    def __enter__(self) -> _LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self._every):
            try:
                if not self._ledger.renew_vacuum(self._run_id):
                    return  # taken over: nothing more to renew
            except LedgerError:
                continue  # a busy ledger now: try again at the next beat


def _on_executors(spark: SparkSession, order: VacuumOrder, dry_run: bool,
                  progress: Progress | None) -> dict[str, tuple]:
    """Each target's (files, bytes, error, dry-run listing), deleted (or listed) on the executors."""
    context = spark.sparkContext
    targets = {t.id: {"location": t.location, "dropped_at": t.dropped_at, "watermark": t.watermark}
               for t in order.targets}
    plan = context.broadcast({"root": order.root, "targets": targets})
    ids = sorted(targets)
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


def _purge_partition(plan: Any, ids: Iterable[str], dry_run: bool) -> Iterator[tuple]:
    """On an executor: re-check each instance against the broadcast plan, then purge it."""
    spec = plan.value
    for table_id in ids:
        target = spec["targets"].get(table_id)
        if target is None:
            yield (table_id, 0, 0, "refused: not in this vacuum's plan", None)
            continue
        mark = target["watermark"]
        if not dry_run and (mark is None or target["dropped_at"] > mark):
            yield (table_id, 0, 0, "refused: not behind its watermark, so still restorable", None)
            continue
        outcome = fs.purge(spec["root"], target["location"], dry_run=dry_run)
        yield (table_id, outcome.files, outcome.bytes, outcome.error,
               None if outcome.listing is None else [tuple(entry) for entry in outcome.listing])


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
