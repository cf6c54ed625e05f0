"""A committed write's folder cleaned of stragglers: the files its version does not name, once
older than the grace period (R15). Standard library only (R19)."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from vacuum_work import Result, StragglerScan, location

from . import fs
from .dispatch import Task, runs


@runs(StragglerScan)
def run_scans(task: Task, items: list[StragglerScan]) -> Iterator[Result]:
    """Refused if what the version names was never read in (``named`` None): nothing would count as
    named, and every old file of the folder would go."""
    job = task.job
    for item in items:
        if item.named is None:
            yield Result(item, error=f"refused: the straggler scan of write {item.folder.write_id} does not say "
                                     "what its version names (read in by the ledger's plan); nothing was deleted")
            continue
        here = job.at(item)
        done = fs.delete_unnamed(job.store, here, location(here, item.folder.path), set(item.named),
                                 item.cutoff / 1e6, dry_run=job.dry_run, receipt=task.receipt)
        yield replace(done, item=item)
