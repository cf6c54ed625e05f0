"""A trim: the files a replace removed from write folders that stay, deleted by key as the ledger
lists them (R13, R20). Standard library only (R19)."""

from __future__ import annotations

from vacuum_work import Result, Trim

from . import fs
from .dispatch import Task, each, runs
from .job import LedgerList


@runs(Trim)
@each
def run_trims(task: Task, item: Trim) -> Result:
    """The files each replace removed, by key, read from the ledger's list as they go: only those in
    write folders the item does not ``skip`` (R9: each inside the table's location). Refused where
    the ledger's lists are not at hand (an executor): a listing would find the files the folder
    keeps too."""
    if task.files is None:
        return Result(item, error=f"refused: the trim of {item.base_key} deletes what the ledger lists, and its "
                                  "lists are read where the run is driven; nothing was deleted")
    wanted = ((path, size) for path, size in LedgerList(task.files, item.listed) if item.takes(path))
    return fs.delete_files(task.job.store, task.job.at(item), wanted, dry_run=task.job.dry_run, look=item.fresh,
                           receipt=task.receipt)
