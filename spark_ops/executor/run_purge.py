"""The purge of dropped instances' locations (R2, R8, R9): each re-checked against its watermark,
then every file under it deleted (or, for a dry run, listed). Standard library only (R19)."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from vacuum_work import Purge, Result

from . import fs
from .dispatch import Task, runs
from .job import Files, Job, LedgerList
from .receipts import DeletionLog


@runs(Purge)
def run_purges(task: Task, items: list[Purge]) -> Iterator[Result]:
    """On the driver (``files``), in a run that deletes, the purges go together, several locations
    listed at once: those the ledger knows files of, then those it knows nothing of, apart, as when
    those ran on the executors (a batch that fails fails every location with a key in it). Elsewhere
    one at a time."""
    job, files = task.job, task.files
    if files is None or job.dry_run:
        for item in items:
            yield purge_location(job, item, task.receipt)
        return
    for together in ([i for i in items if i.listed], [i for i in items if not i.listed]):
        if together:
            yield from _purge_together(job, together, task.receipt, files)


def _purge_together(job: Job, items: list[Purge], receipt: DeletionLog | None, files: Files) -> Iterator[Result]:
    """Dropped tables on an object store, from the driver: each re-checked, then purged together
    (the keys the ledger knows, if any, then what a listing of each location finds, several
    locations listed at once, sharing DeleteObjects batches)."""
    allowed = []
    for item in items:
        refused = item.refusal()
        if refused is not None:
            yield Result(item, error=refused)
        else:
            allowed.append(item)
    if allowed:
        done = fs.purge_each(job.store, [job.at(i) for i in allowed],
                             known=[[LedgerList(files, d) for d in i.listed] for i in allowed],
                             siblings=job.siblings, receipt=receipt)
        for item, result in zip(allowed, done):
            yield replace(result, item=item)


def purge_location(job: Job, item: Purge, receipt: DeletionLog | None) -> Result:
    """One location purged whole (a dry run: listed), once re-checked."""
    refused = None if job.dry_run else item.refusal()
    if refused is not None:
        return Result(item, error=refused)
    return replace(fs.purge(job.store, job.at(item), dry_run=job.dry_run, receipt=receipt), item=item)
