"""A committed write's folder cleaned of stragglers: the files its version does not name, once
older than the grace period (R15). Standard library only (R19)."""

from __future__ import annotations

from vacuum_work import Result, StragglerScan, location

from . import fs
from .dispatch import Task, each, runs


@runs(StragglerScan)
@each
def run_scans(task: Task, item: StragglerScan) -> Result:
    """Refused if what the version names was never read in (``named`` None): nothing would count as
    named, and every old file of the folder would go."""
    if item.named is None:
        return Result(item, error=f"refused: the straggler scan of write {item.folder.write_id} does not say "
                                  "what its version names (read in by the ledger's plan); nothing was deleted")
    here = task.job.at(item)
    return fs.delete_unnamed(task.job.store, here, location(here, item.folder.path), set(item.named),
                             item.cutoff / 1e6, dry_run=task.job.dry_run, receipt=task.receipt)
