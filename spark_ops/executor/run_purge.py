"""The purge of dropped instances' locations (R2, R8, R9): each re-checked against its watermark,
then every file under it deleted (or, for a dry run, listed). Standard library only (R19)."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from vacuum_work import Purge, Result

from . import fs
from .dispatch import Task, runs
from .job import Job, LedgerList
from .receipts import DeletionLog


@runs(Purge)
def run_purges(task: Task, items: list[Purge]) -> Iterator[Result]:
    """On the driver (``files``), in a run that deletes, the purges go together, each re-checked, several
    locations listed at once and sharing DeleteObjects batches (the keys the ledger knows first): those the
    ledger knows files of, then those it knows nothing of, apart, as when those ran on the executors (a batch
    that fails fails every location with a key in it). Elsewhere one at a time."""
    job, files = task.job, task.files
    if files is None or job.dry_run:
        yield from (purge_location(job, item, task.receipt) for item in items)
        return
    for together in ([i for i in items if i.listed], [i for i in items if not i.listed]):
        yield from (Result(i, error=i.refusal()) for i in together if i.refusal() is not None)
        allowed = [i for i in together if i.refusal() is None]
        if allowed:
            done = fs.purge_each(job.store, [job.at(i) for i in allowed],
                                 known=[[LedgerList(files, d) for d in i.listed] for i in allowed],
                                 siblings=job.siblings, receipt=task.receipt)
            yield from (replace(result, item=item) for item, result in zip(allowed, done))


def purge_location(job: Job, item: Purge, receipt: DeletionLog | None) -> Result:
    """One location purged whole (a dry run: listed), once re-checked."""
    refused = None if job.dry_run else item.refusal()
    if refused is not None:
        return Result(item, error=refused)
    return replace(fs.purge(job.store, job.at(item), dry_run=job.dry_run, receipt=receipt), item=item)
