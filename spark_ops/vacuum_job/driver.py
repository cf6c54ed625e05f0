"""The vacuum: the ledger decides, the executors re-check and delete, the ledger records.

1. **Plan (R2).** ``ledger.start_vacuum`` decides which dropped instances are due and appends
   their watermarks, the marks, the sweeps and a ``VacuumStarted`` event (with a lease) in one
   conditional append; the run it returns (``ledger.VacuumRun``) is already on record, and its
   plan's items (``vacuum_work``) carry what the executors re-check, each purge the effective
   watermark it has now. If that raises, we stop here: nothing is listed, nothing deleted. A
   dry run only asks ``ledger.plan_vacuum``, which records nothing. Before either, the
   executors are asked whether they can run the job at all (``ship.preflight``, R19).
2. **Delete (R9, R20).** The plan's items go to the executors as they are (big ones split into
   parts), in DataFrame jobs that run alike on a classic and a Spark Connect session
   (``jobs``, R24); each task re-checks its items and deletes with ``spark_ops.executor``,
   which stays inside each location and never follows a link. Only per-item results come
   back, so the driver's memory depends on the number of items, not of files. On an object store, what the ledger
   knows is deleted from the driver itself with the same code, its file lists read from the
   ledger one at a time (a Spark job would cost more than the deletes), and so are a few
   locations it knows nothing of (each one streamed listing); the executors list more of those.
   Meanwhile the driver renews the run's lease.
3. **Record.** The tasks' receipt parts (what each deleted, object by object, R20) are recorded
   a few at a time (``VacuumRun.record_deleted``). Then ``VacuumRun.finish`` hands the ledger
   every item's result, and the ledger records, in one append, a ``TablePurged`` per instance
   whose files are all gone, the folders deleted and cleaned, the ``VacuumReceipt`` that closes
   the run's receipt and a ``VacuumFinished``. An instance whose deletion failed stays blocked
   and unpurged; the report says why, and the next vacuum picks it up first, as it does
   everything a dead vacuum left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable

import attrs
from pyspark.sql import SparkSession
from vacuum_work import Item, Part, Plan, Purge, Result, location

from ledger import Ledger, LedgerError, VacuumRun

from ..executor import receipts, tasks
from ..executor.storage import LISTERS, Storage, StoreError, Unsafe
from ledger import Heartbeat
from ..session import SparkUnavailable, kind_of
from . import budget, listing as listings, progress as progress_of, ship
from .jobs import Jobs
from .progress import Progress, Watch
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
    if it is interrupted chooses it before the call (``vacuum_work.new_run_id()``): it then knows
    the id even if it is stopped the moment the start lands. A dry run records no run, and ignores it.

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
    if plan.idle(dry_run):
        timings["plan"] = time.monotonic() - started
        return build_report(plan, dry_run, {}, started, timings)
    cores = ship.preflight(spark, plan.root)  # R19: before anything is recorded
    run = None if dry_run else ledger.start_vacuum(run_id=run_id, **options)
    plan = plan if run is None else run.plan  # type: ignore[assignment]
    timings["plan"] = time.monotonic() - started
    if plan.idle(dry_run):
        return build_report(plan, dry_run, {}, started, timings)
    folder = listings.folder_for(listing_dir) if dry_run else None
    job = tasks.Job(plan.root, plan.run_id, folder, plan.locations)  # its Storage, built once for the run
    try:
        # A failure on the way releases the run's lease (``VacuumRun.__exit__``): the next vacuum
        # takes its work over at once instead of waiting for the lease to run out (R10).
        with contextlib.nullcontext() if run is None else run, \
                contextlib.nullcontext() if run is None else _lease_keeper(run):
            # The ledger's file lists, read one at a time as the deletes need them (a dry run's
            # trims list theirs through a handle on its plan, which records nothing).
            lists = (run if run is not None else VacuumRun(ledger, "dry run", plan)).files
            try:
                results, retried = _carry_out(spark, cores, job, plan, run, progress, lists)
            except Exception as exc:  # the session's end, or its server's, in one line (the lease is released)
                lost = _session_lost(spark, exc, run)
                if lost is None:
                    raise  # the work's own failure, as it is
                raise lost from None
            store = job.store
            results = [_unseen(store, plan.root, r) for r in results]
            if run is not None:
                _record_receipt(run, store, [p for r in results for p in r.parts])
                # Parts no summary came back for: a task attempt that failed after writing one (its
                # retry found those files gone), or, for the runs this one took over, a task of a
                # dead run that ran on after its driver was killed. The run's own folder is looked
                # at only if an attempt failed: on a store, a listing is a request.
                for earlier in ((run.run_id,) if retried else ()) + tuple(plan.resumes):
                    _adopt_stranded(VacuumRun.of(ledger, earlier), store)
        by_key = {r.key: r for r in results if r.item is not None}
        kept = None if folder is None else \
            listings.settle(folder, by_key, keep=listing_dir is not None, threshold=listing_threshold)
    except BaseException:
        if folder is not None and listing_dir is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    timings["delete"] = time.monotonic() - started - timings["plan"]
    report = attrs.evolve(build_report(plan, dry_run, by_key, started, timings), listing=kept)
    if run is not None:
        run.finish(results)
    timings["record"] = time.monotonic() - started - timings["plan"] - timings["delete"]
    return attrs.evolve(report, duration=time.monotonic() - started, timings=timings)


def _unseen(store: Storage, root: str, result: Result) -> Result:
    """A purge's result, refused if its executor found nothing in a location where this process sees
    files: the executor does not see the ledger's warehouse there (a Spark Connect server on another
    machine or mount, an executor without the shared mount), and recorded purged the files would
    never be deleted (purged is final, R8). Looked at only for a purge that found nothing (one
    listing page, rare: a location a purge empties held files), so a location emptied by a run that
    stopped mid-way, or by a hand, is a purge, as it was."""
    item = result.item
    if not isinstance(item, Purge) or not result.ok or result.files:
        return result
    here = location(root, item.path)
    try:
        seen = any(page for page in store.pages(store.confine(here), sizes=False))
    except (OSError, StoreError, Unsafe):
        return result  # this process cannot tell: the executor's word stands, as before
    if not seen:
        return result
    return dataclasses.replace(result, error=f"refused: the executor found no file in {here}, where this process "
                                             "sees files: it does not see the warehouse the ledger's files are in (is "
                                             "it the same place for this process and every executor?); not purged, it "
                                             "stays blocked for the next vacuum")


def _session_lost(spark: SparkSession, exc: BaseException, run: VacuumRun | None) -> SparkUnavailable | None:
    """A Spark failure that is the session's (it ended: its server restarted under it, or timed it
    out; or its server stopped answering) in one line, saying what became of the run: PySpark said
    ``[RESPONSE_ALREADY_RECEIVED] INVALID_HANDLE.SESSION_NOT_FOUND`` or gRPC's page. None: the
    work's own failure."""
    after = "nothing was recorded" if run is None else \
        f"vacuum run {run.run_id} is on record, its lease released: the next vacuum takes its work over"
    return kind_of(spark).unavailable(exc, during="the vacuum ran", ended=after, unreachable=f"check that it runs; {after}")


def sweep(spark: SparkSession, ledger: Ledger, **options: Any) -> VacuumReport:
    """Only the uncommitted data (R15): abandoned writes and stragglers; no purge, no expiry."""
    return vacuum(spark, ledger, only_uncommitted=True, **options)


def _record_receipt(run: VacuumRun, store: Storage, parts: list[Part]) -> None:
    """Record what the tasks deleted, a part at a time (read from the run's scratch folder, then
    appended with its ``ReceiptPart``): the driver never holds more than one part's leaves (R20).
    A part that cannot be read is said in the log and left out, and left in the scratch folder,
    where the next vacuum adopts it (``_adopt_stranded``): the deletions stand, and the finish must
    still be recorded (R10)."""
    batch: list[tuple[Part, bytes]] = []
    recorded: list[str] = []
    for part in parts:
        try:
            data = receipts.read_part(store, part.where)
        except (OSError, StoreError) as exc:
            _log.warning("vacuum %s: a receipt part (%d objects, %s to %s) could not be read back, so it is "
                         "not recorded: %s", run.run_id, part.count, part.first, part.last, exc)
            continue
        batch.append((part, data))
        recorded.append(part.where)
        if sum(len(data) for _, data in batch) >= RECORD_BYTES:
            run.record_deleted(batch)
            batch = []
    run.record_deleted(batch)
    try:
        receipts.clear(store, run.run_id, recorded)
    except (OSError, StoreError) as exc:
        _log.warning("vacuum %s: its receipt's scratch folder could not be removed: %s", run.run_id, exc)


def _adopt_stranded(run: VacuumRun, store: Storage) -> None:
    """The parts left in a run's scratch folder that no summary reached a driver for: what they hold
    is recorded in the run's receipt now, from the parts themselves (each re-hashed here), and the
    scratch removed (R10: the next vacuum finishes what one left). A part cut short by a kill is
    not a part."""
    parts: list[Part] = []
    for where in receipts.stranded(store, run.run_id):
        try:
            parts.append(receipts.summarize(receipts.read_part(store, where), where))
        except ValueError as exc:
            _log.warning("vacuum run %s left %s, which is not a whole receipt part (%s): removed", run.run_id,
                         where, exc)
            receipts.clear(store, run.run_id, [where])
    try:
        if parts:
            _record_receipt(run, store, parts)
    except LedgerError as exc:  # it finished after all: its receipt is closed
        _log.warning("vacuum run %s left receipt parts that cannot be added to its receipt: %s", run.run_id, exc)


def _lease_keeper(run: VacuumRun) -> Heartbeat:
    """Renews the run's lease from the driver while the executors delete, so that no other
    vacuum takes its work over (it would only duplicate the work, never corrupt it)."""
    assert run.plan is not None and run.plan.lease_until is not None
    lease = (run.plan.lease_until - run.plan.now) / 1e6
    return Heartbeat("vacuum-lease", lease / 3, run.renew)


# --- the plan as work ---------------------------------------------------------------------------

def work_of(plan: Plan, dry_run: bool, pieces: int) -> list[Item]:
    """The items to carry out (``Plan.work``), each in the parts it splits itself into (``Item.split``)."""
    return [part for item in plan.work(dry_run=dry_run) for part in item.split(pieces)]


_DRIVER = ThreadPoolExecutor(1, thread_name_prefix="vacuum-driver")


def _carry_out(spark: SparkSession, cores: int, job: tasks.Job, plan: Plan, run: VacuumRun | None,
               progress: Progress | None, lists: tasks.Files) -> tuple[list[Result], bool]:
    """Every item's result (those of a split item's parts, and the tasks' closing results with
    their receipt parts), and whether a task attempt failed (``_on_spark``). ``cores``: tasks
    Spark runs at once.

    On an object store, what the ledger knows (the files of the tables it purges, of the versions
    it expires) and the small listings of write folders are deleted from the driver, with the
    same code and checks as on an executor, a few DeleteObjects batches in flight: the store does
    the work, and a Spark job would cost more than the deletes themselves (0.1-0.3 s against
    0.55 s for 20,000 objects here), as Iceberg's Spark actions and delta-rs delete from one
    process. Which items run here: ``driver_items``. Trims run here on a disk too: the files a
    replace removed are found only in the ledger's lists (``lists``)."""
    items = work_of(plan, run is None, cores * 2)
    if not items:
        return [], False
    here = driver_items(items, dry_run=run is None, store=job.store)
    mine = {i.key for i in here}
    there = [i for i in items if i.key not in mine]
    # A dry run's executors write its listing into this process's folder only where they see it (a
    # classic local session's); elsewhere it comes back through Spark and is written here.
    sink = None if job.listing is None or kind_of(spark).shares_files() else listings.Sink(job.listing)
    on_driver = _DRIVER.submit(lambda: [r for r in tasks.run_items(job, here, files=lists) if isinstance(r, Result)]) \
        if here else None
    try:
        results, retried = _on_spark(spark, cores, job, there, progress, sink) if there else ([], False)
    finally:
        done = [] if on_driver is None else on_driver.result()
        if sink is not None:
            sink.close()
    if progress is not None and here and not there:
        progress(1, 1)
    return results + done, retried


def driver_items(items: list[Item], *, dry_run: bool, store: Storage) -> list[Item]:
    """The items the driver carries out itself: those that run where the ledger's lists are
    (``Item.on_driver``: trims), and where the storage deletes what the ledger knows by key from
    the driver (``Storage.deletes_by_key``: an object store), in a run that deletes, every item but
    the purges of more than ``LISTERS`` locations the ledger knows nothing of.

    Those few purges, too: each is one streamed listing of its location, a chain of pages that
    each ask for the next, so no number of executors lists one location faster, and the driver
    lists ``LISTERS`` locations at once (``fs.purge_each``) with the same code, re-checks (R2, R9)
    and fresh look (R20) as a task. A Spark job would only add its own cost: for one location of
    20,000 objects on the tests' S3 server, its first request came 1.5 s after the driver's would
    have (load 13), and its JVM and Python worker took 0.5 s of CPU beside the server (issue 48).
    More are shared out over the executors, which a cluster has many of. Nothing changes for a dry run (it writes its
    listing on the executors) or on a local disk (deleting is a system call a file there)."""
    if dry_run or not store.deletes_by_key:
        return [i for i in items if i.on_driver]
    unknown = {i.key for i in items if isinstance(i, Purge) and not i.listed}
    if len(unknown) <= LISTERS:
        return items
    return [i for i in items if i.key not in unknown]


def _on_spark(spark: SparkSession, cores: int, job: tasks.Job, items: list[Item],
              progress: Progress | None, sink: listings.Sink | None = None) -> tuple[list[Result], bool]:
    """The items given to the executors: one job for whole items, and the purges split below the
    table in one, two or three more. Also whether a task attempt failed: a failed attempt may
    have left a receipt part no result names. ``sink``: where a dry run's listing is written as
    it comes back (its tasks then send it, rather than write it)."""
    ship.ship(spark)
    if sink is not None:
        job = dataclasses.replace(job, stream=True)
    # A few tasks per core where a task deletes alone (``Storage.tasks_per_core``); each more costs
    # Spark's per-task overhead (a Python worker round trip, ~0.1 s here).
    slices = max(1, min(len(items), cores * job.store.tasks_per_core))
    # Purges are split below the table where the storage pays for it (``Storage.splits_below_table``:
    # a local disk); elsewhere each is one item, one streamed listing of its location (R20).
    purges = [i for i in items if isinstance(i, Purge)] if job.run_id is not None and job.store.splits_below_table \
        else []
    purged = {i.key for i in purges}
    others = [i for i in items if i.key not in purged]
    # Known up front, except the second purge job's, which starts only if a big table is found.
    total = (min(len(others), slices) if others else 0) + budget.first_purge_tasks(cores, len(purges))
    jobs = Jobs(spark)
    with progress_of.watching(spark, progress, total) as watch:
        rows: list[Result] = jobs.run(functools.partial(tasks.run_items, job), others, slices, sink) if others else []
        if purges:
            rows += _purge_below_tables(jobs, cores, job, purges, watch)
    return rows, jobs.retried


def _purge_below_tables(jobs: Jobs, cores: int, job: tasks.Job, items: list[Purge], watch: Watch) -> list[Result]:
    """Purge dropped tables with the work split below the table.

    Fewer tables than cores cannot keep the executors busy one task each, so each is shared out
    at once (``_share_out``). Many are looked at one task each first: a table with fewer than
    two sub-folders (``fs.pieces``: write folders, partitions) is purged whole there, and that
    is usually every table, so one job does it all; only the bigger ones are counted and shared
    out after. The driver receives one row per table from each job, never a path."""
    if len(items) <= cores:
        return _share_out(jobs, cores, job, budget.shares(cores, dict.fromkeys(items)))
    looked: Iterable[Result | tuple[Purge, int]] = jobs.run(
        functools.partial(tasks.look_or_purge, job), items, budget.first_purge_tasks(cores, len(items)))
    rows = [r for r in looked if isinstance(r, Result)]
    big = budget.shares(cores, {item: pieces for item, pieces in (r for r in looked if not isinstance(r, Result))})
    if not big:
        return rows
    watch.expect(budget.share_tasks(cores, big))
    return rows + _share_out(jobs, cores, job, big)


def _share_out(jobs: Jobs, cores: int, job: tasks.Job, shares: dict[Purge, int]) -> list[Result]:
    """Each table's sub-folders shared out over ``shares[item]`` tasks (``tasks.share_task``; a
    table with fewer than two is purged whole by share 0), each deleting several at once; the
    shares' few numbers summed per table here; then one task per table (at most one a core)
    purges what is left (files at the top, emptied folders, any late file) and removes the
    location."""
    work = [tasks.Share(item, j, k) for item, k in sorted(shares.items(), key=lambda pair: pair[0].key) for j in range(k)]
    done = tasks.per_table(jobs.run(functools.partial(tasks.each, tasks.share_task, job), work, len(work)))
    return jobs.run(functools.partial(tasks.each, tasks.finish_purge, job), done, budget.finishing_tasks(cores, shares))
