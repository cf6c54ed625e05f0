"""The vacuum: the ledger decides, the executors re-check and delete, the ledger records.

1. **Order (R2).** ``ledger.start_vacuum`` decides which dropped instances are due and
   appends their watermarks and a ``VacuumStarted`` event (with a lease) in one conditional
   append; what it returns is already on record, and each target carries the effective
   watermark it has now. If that raises, we stop here: nothing is listed, nothing deleted.
   A dry run only asks ``ledger.plan_vacuum``, which records nothing. Before either, the
   executors are asked whether they can run the job at all (``ship.preflight``, R19).
2. **Delete (R9, R20).** The order becomes a ``Plan`` of typed ``Work`` items
   (``spark_ops.executor.work``), broadcast once; the executors re-check each item against
   it and delete with ``spark_ops.executor``, which stays inside each location and never
   follows a link. Only per-item totals come back, so the driver's memory depends on the
   number of items, not of files. On an object store, what the ledger knows is deleted from
   the driver itself with the same code (a Spark job would cost more than the deletes);
   the executors list what it does not know. Meanwhile the driver renews the run's lease.
3. **Record.** The tasks' receipt parts (what each deleted, object by object, R20) are recorded
   a few at a time as ``ReceiptPart`` events (``executor.receipts``). Then one append records a
   ``TablePurged`` per instance whose files are all gone, the ``VacuumReceipt`` that closes the
   run's receipt, and a ``VacuumFinished`` with what this run deleted. An instance whose deletion failed stays
   blocked and unpurged; the report says why, and the next vacuum picks it up first, as it
   does everything a dead vacuum left.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
from pyspark.sql import SparkSession

from ledger import Ledger, LedgerError, VacuumOrder

from ..executor import objects, receipts, tasks
from ..executor.storage import storage_for
from ..executor.work import EXPIRE, FOREIGN, PARTS, PURGE, STRAGGLERS, SWEEP, Outcome, Plan, Work
from ..heartbeat import Heartbeat
from . import budget, listing as listings, progress as progress_of, ship
from .progress import Progress, ProgressWatcher
from .report import VacuumReport, build_report

_log = logging.getLogger("spark_ops.vacuum")

RECORD_BYTES = 256 << 10
"""Small receipt parts are recorded several in one append, up to about this many bytes of leaves
(a part is 0.2-0.5 MB when full): few appends, and the driver holds at most this and one part."""

LISTING_THRESHOLD_DEFAULT = 10_000
"""A dry run listing more files than this (by default) leaves its listing in a Parquet dataset
(``report.listing``) rather than in the report."""



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
    # Records nothing: bad options (a run id too), or nothing to do, end here, before Spark is asked.
    plan = ledger.plan_vacuum(run_id=None if dry_run else run_id, **options)
    if plan.empty and not (dry_run and plan.written):
        timings["plan"] = time.monotonic() - started
        return build_report(plan, dry_run, {}, started, timings)
    ship.preflight(spark.sparkContext, plan.root)  # R19: before anything is recorded
    order = plan if dry_run else ledger.start_vacuum(run_id=run_id, **options)
    timings["plan"] = time.monotonic() - started
    if order.empty and not (dry_run and order.written):
        return build_report(order, dry_run, {}, started, timings)
    folder = listings.folder_for(listing_dir) if dry_run else None
    try:
        with contextlib.nullcontext() if dry_run else _lease_keeper(ledger, order):
            outcomes, parts, retried = _carry_out(spark, order, dry_run, progress, folder)
            if not dry_run:
                assert order.run_id is not None
                _record_receipt(ledger, order.root, order.run_id, parts)
                # Parts no summary came back for: a task attempt that failed after writing one (its
                # retry found those files gone), or, for the runs this one took over, a task of a
                # dead run that ran on after its driver was killed. The run's own folder is looked
                # at only if an attempt failed: on a store, a listing is a request.
                for run in ((order.run_id,) if retried else ()) + tuple(order.resumes):
                    _adopt_stranded(ledger, order.root, run)
        kept = None if folder is None else \
            listings.settle(folder, outcomes, keep=listing_dir is not None, threshold=listing_threshold)
    except BaseException:
        if folder is not None and listing_dir is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    timings["delete"] = time.monotonic() - started - timings["plan"]
    report = attrs.evolve(build_report(order, dry_run, outcomes, started, timings), listing=kept)
    if not dry_run:
        _record(ledger, order, report, outcomes)
    timings["record"] = time.monotonic() - started - timings["plan"] - timings["delete"]
    return attrs.evolve(report, duration=time.monotonic() - started, timings=timings)


def sweep(spark: SparkSession, ledger: Ledger, **options: Any) -> VacuumReport:
    """Only the uncommitted data (R15): abandoned writes and stragglers; no purge, no expiry."""
    return vacuum(spark, ledger, only_uncommitted=True, **options)


def _record(ledger: Ledger, order: VacuumOrder, report: VacuumReport, outcomes: dict[str, Outcome]) -> None:
    """The run's end: what was purged, which write folders went, which were cleaned (R10: what
    failed is not recorded, and the next vacuum finishes it). A committed folder found to hold
    only what its version names is recorded checked as well (with nothing deleted, and so not in
    the report): no later vacuum need list it again."""
    assert order.run_id is not None
    folders = {e.id: tuple(w for w, _ in e.folders) for e in order.expiries}
    scanned = [(c, outcomes.get(f"{STRAGGLERS}:{c.write_id}")) for c in order.stragglers]
    ledger.finish_vacuum(
        order.run_id, [(r.id, r.files, r.bytes) for r in report.instances if r.ok],
        failed=len(report.failures),
        expired=[(r.id, folders[r.id], r.files, r.bytes) for r in report.expired if r.ok and folders[r.id]]
        + [(r.id, tuple(w for w, _ in r.writes), r.files, r.bytes) for r in report.swept if r.ok],
        stragglers=[(c.id, (c.write_id,), o.files, o.bytes) for c, o in scanned
                    if o is not None and o.error is None and not o.left])


def _record_receipt(ledger: Ledger, root: str, run_id: str, parts: list[receipts.Part]) -> None:
    """Record what the tasks deleted, a part at a time (read from the run's scratch folder, then
    appended with its ``ReceiptPart``): the driver never holds more than one part's leaves (R20).
    A part that cannot be read is said in the log and left out: the deletions stand, and the
    finish must still be recorded (R10)."""
    batch: list[tuple[str, str, int, int, str, bytes]] = []
    for part in parts:
        try:
            data = receipts.read_part(root, part.where)
        except (OSError, objects.StoreError) as exc:
            _log.warning("vacuum %s: a receipt part (%d objects, %s to %s) could not be read back, so it is "
                         "not recorded: %s", run_id, part.leaves, part.first, part.last, exc)
            continue
        batch.append((part.first, part.last, part.leaves, part.size, part.root, data))
        if sum(len(p[-1]) for p in batch) >= RECORD_BYTES:
            ledger.record_deleted(run_id, batch)
            batch = []
    ledger.record_deleted(run_id, batch)
    try:
        receipts.clear(root, run_id, [p.where for p in parts])
    except (OSError, objects.StoreError) as exc:
        _log.warning("vacuum %s: its receipt's scratch folder could not be removed: %s", run_id, exc)


def _adopt_stranded(ledger: Ledger, root: str, run_id: str) -> None:
    """The parts left in a run's scratch folder that no summary reached a driver for: what they hold
    is recorded in the run's receipt now, from the parts themselves (each re-hashed here), and the
    scratch removed (R10: the next vacuum finishes what one left). A part cut short by a kill is
    not a part."""
    parts: list[receipts.Part] = []
    for where in receipts.stranded(root, run_id):
        try:
            parts.append(receipts.summarize(receipts.read_part(root, where), where))
        except ValueError as exc:
            _log.warning("vacuum run %s left %s, which is not a whole receipt part (%s): removed", run_id, where, exc)
            receipts.clear(root, run_id, [where])
    try:
        if parts:
            _record_receipt(ledger, root, run_id, parts)
    except LedgerError as exc:  # it finished after all: its receipt is closed
        _log.warning("vacuum run %s left receipt parts that cannot be added to its receipt: %s", run_id, exc)


def _lease_keeper(ledger: Ledger, order: VacuumOrder) -> Heartbeat:
    """Renews the run's lease from the driver while the executors delete, so that no other
    vacuum takes its tables over (it would only duplicate the work, never corrupt it)."""
    lease = (order.lease_until - ledger.now()).total_seconds() if order.lease_until else 0
    assert order.run_id is not None
    run_id = order.run_id
    return Heartbeat("vacuum-lease", lease / 3, lambda: ledger.renew_vacuum(run_id))


# --- the order as work items -------------------------------------------------------------------

def plan_of(order: VacuumOrder, dry_run: bool, listing: str | None, pieces: int) -> Plan:
    """The typed work items of an order. A table's many write folders are split into parts, so
    that one big table is spread over every core. On an object store what the ledger knows is
    deleted by key (R20): not for a run taking a dead one's table over, whose listing then counts
    exactly what is left (a key answers "deleted" whether or not the dead run had got to it)."""
    items: list[Work] = [Work(f"{PURGE}:{t.id}", PURGE, t.id, t.location, t.dropped_at, t.watermark,
                              manifests=t.named if not t.resumed else ()) for t in order.targets]
    for e in order.expiries:
        if e.folders:
            whole = Work(f"{EXPIRE}:{e.id}", EXPIRE, e.id, e.location, folders=tuple(f for _, f in e.folders),
                         manifests=e.named)
            items += _split(whole, pieces)
    for w in order.sweeps:
        items += _split(Work(f"{SWEEP}:{w.id}", SWEEP, w.id, w.location, folders=tuple(f for _, f, _ in w.writes)),
                        pieces)
    items += [Work(f"{STRAGGLERS}:{c.write_id}", STRAGGLERS, c.id, c.location, folder=c.folder,
                   named=frozenset(c.named), cutoff=c.cutoff.timestamp()) for c in order.stragglers]
    if dry_run:
        items += [Work(f"{FOREIGN}:{i}", FOREIGN, i, location, named=frozenset(named))
                  for i, _, location, named in order.written]
    return Plan(order.root, {item.key: item for item in items}, listing, order.locations,
                None if dry_run else order.run_id)


def _split(item: Work, pieces: int) -> list[Work]:
    size = max(1, -(-len(item.folders) // pieces))
    return [item.part(n, folders=item.folders[start:start + size],
                      manifests=item.manifests[start:start + size] if item.manifests else ())
            for n, start in enumerate(range(0, len(item.folders), size))]


# --- carrying it out ---------------------------------------------------------------------------

_DRIVER = ThreadPoolExecutor(1, thread_name_prefix="vacuum-driver")


def _carry_out(spark: SparkSession, order: VacuumOrder, dry_run: bool, progress: Progress | None,
               listing: str | None) -> tuple[dict[str, Outcome], list[receipts.Part], bool]:
    """Every item's outcome, by key, the receipt parts the tasks wrote, and whether a task attempt
    failed (``_on_spark``).

    On an object store, what the ledger knows (the files of the tables it purges, of the versions
    it expires) and the small listings of write folders are deleted from the driver, with the
    same code and checks as on an executor, a few DeleteObjects batches in flight: the store does
    the work, and a Spark job would cost more than the deletes themselves (0.1-0.3 s against
    0.55 s for 20,000 objects here), as Iceberg's Spark actions and delta-rs delete from one
    process. What the ledger does not know (a dropped location written outside it) is listed on
    the executors, once per location. A dry run, and everything on a local disk, runs on the
    executors."""
    context = spark.sparkContext
    plan = plan_of(order, dry_run, listing, context.defaultParallelism * 2)
    keys = sorted(plan.items)
    if not keys:
        return {}, [], False
    on_driver = [] if dry_run or not storage_for(plan.root).keyed else \
        [k for k in keys if not (plan.items[k].kind == PURGE and not plan.items[k].manifests)]
    driving = set(on_driver)
    keys = [k for k in keys if k not in driving]
    here = _DRIVER.submit(lambda: list(tasks.run_items(tasks.Held(plan), on_driver, dry_run=False))) \
        if on_driver else None
    try:
        outcomes, retried = _on_spark(context, plan, keys, dry_run, progress) if keys else ([], False)
    finally:
        done = [] if here is None else here.result()
    if progress is not None and on_driver and not keys:
        progress(1, 1)
    everything = outcomes + done
    return {o.key: o for o in everything if o.key != PARTS}, [p for o in everything for p in o.parts], retried


def _on_spark(context: Any, plan: Plan, keys: list[str], dry_run: bool,
              progress: Progress | None) -> tuple[list[Outcome], bool]:
    """The items given to the executors: one job for whole items, and the purges split below the
    table in one or two more. Also whether a task attempt failed (or Spark cannot say): a failed
    attempt may have left a receipt part no outcome names."""
    ship.ship(context)
    # A few tasks per core: enough for the progress bar to move in steps and for work to
    # balance; each more costs Spark's per-task overhead (a Python worker round trip, ~0.1 s
    # here). On an object store a task keeps several batches in flight itself: one a core.
    per_core = 1 if storage_for(plan.root).keyed else 4
    slices = max(1, min(len(keys), context.defaultParallelism * per_core))
    # Purges the ledger knows the files of go with the other items; on a local disk the others
    # are split below the table (their folders listed and shared out over the cores, which pays
    # where deleting is a system call a file). On an object store each is one item: one streamed
    # listing of its location, pages of 1,000 keys deleted in batches as they arrive, and one
    # listing that proves it empty (R20). Split below the table, the store answered a listing per
    # folder and another to prove each empty: 421 listings for 20,000 objects in 200 folders,
    # where 21 do.
    purges = [] if dry_run or storage_for(plan.root).keyed else \
        [k for k in keys if plan.items[k].kind == PURGE and not plan.items[k].manifests]
    others = sorted(set(keys) - set(purges))
    # Known up front, except the second purge job's, which starts only if a big table is found.
    total = (max(1, min(len(others), slices)) if others else 0) + \
        budget.first_purge_tasks(context.defaultParallelism, len(purges))
    if progress is not None:
        progress(0, total)
    group = f"retention-ledger-vacuum-{time.monotonic_ns()}"
    context.setJobGroup(group, "retention-ledger vacuum", interruptOnCancel=True)
    watcher = ProgressWatcher(context, group, progress, total) if progress else None
    shared = context.broadcast(plan)
    try:
        rows: list[Outcome] = context.parallelize(others, max(1, min(len(others), slices))).mapPartitions(
            functools.partial(tasks.run_items, shared, dry_run=dry_run)).collect() if others else []
        if purges:
            rows += _purge_below_tables(context, shared, purges, watcher)
        retried = progress_of.failed_attempts(context, group) != 0
    finally:
        if watcher:
            watcher.stop()
        context.setLocalProperty("spark.jobGroup.id", None)
        shared.unpersist()
    return rows, retried


def _purge_below_tables(context: Any, plan: Any, keys: list[str], watcher: ProgressWatcher | None) -> list[Outcome]:
    """Purge dropped tables with the work split below the table, in one or two jobs.

    Fewer tables than cores cannot keep the executors busy one task each, so each is shared out
    at once (``_share_out``). Many are looked at one task each first: a table with fewer than
    two sub-folders (``fs.pieces``: write folders, partitions) is purged whole there, and that
    is usually every table, so one single-stage job does it all; only the bigger ones are
    counted and shared out by a second job. The driver receives one row per table from each
    job, never a path."""
    cores = context.defaultParallelism
    if len(keys) <= cores:
        return _share_out(context, plan, budget.shares(cores, dict.fromkeys(keys)))
    looked = context.parallelize(keys, budget.first_purge_tasks(cores, len(keys))) \
        .mapPartitions(functools.partial(tasks.look_or_purge, plan)).collect()
    first = {key: found for key, found in looked if key != PARTS}  # every task hands over its parts
    rows = [Outcome(key, done.files, done.bytes, done.error, parts=done.parts)
            for key, (done, _) in looked if done.finished]
    big = budget.shares(cores, {key: pieces for key, (done, pieces) in first.items() if not done.finished})
    if not big:
        return rows
    if watcher is not None:
        watcher.expect(budget.share_tasks(cores, big))
    return rows + _share_out(context, plan, big)


def _share_out(context: Any, plan: Any, shares: dict[str, int]) -> list[Outcome]:
    """Each table's sub-folders shared out over ``shares[key]`` tasks (``tasks.share_of_listing``;
    a table with fewer than two is purged whole by share 0), each deleting several at once; the
    totals summed per table on the executors; then one task per table purges what is left
    (files at the top, emptied folders, any late file) and removes the location."""
    work = [(key, j, k) for key, k in sorted(shares.items()) for j in range(k)]
    return (context.parallelize(work, len(work))
            .map(functools.partial(tasks.share_task, plan))
            .reduceByKey(tasks.add_shares, numPartitions=budget.finishing_tasks(context.defaultParallelism, shares))
            .map(functools.partial(tasks.finish_purge, plan))
            .collect())
