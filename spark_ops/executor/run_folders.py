"""An expiry's or a sweep's write folders (R9, R13, R15): each must lie in its table's own
``_writes`` folder, then each is emptied and removed. Standard library only (R19)."""

from __future__ import annotations

from vacuum_work import Expiry, Result, Sweep, location

from . import fs
from .dispatch import Task, each, runs
from .job import LedgerList


@runs(Expiry, Sweep)
@each
def run_folders(task: Task, item: Expiry | Sweep) -> Result:
    """A table's old (or swept) write folders, several at once: each must lie in the table's own
    ``_writes`` folder (R9), and one that does not refuses them all before any is touched. What the
    ledger's lists name is deleted by key where the storage does so (``Storage.deletes_by_key``)."""
    job = task.job
    for folder in item.folders:
        if not folder.path.startswith("_writes/") or "/" in folder.path[len("_writes/"):].strip("/") or \
                ".." in folder.path.split("/"):
            return Result(item, error=f"refused: {folder.path} is not a write folder of {job.at(item)}",
                          listing=() if job.dry_run else None)
    here = job.at(item)
    files = task.files
    known = [LedgerList(files, f.listed) if f.listed else None for f in item.folders] \
        if files is not None and job.store.deletes_by_key else []
    return fs.delete_folders(job.store, here, [location(here, f.path) for f in item.folders], known,
                             dry_run=job.dry_run, receipt=task.receipt)
