"""A trim: the files a replace removed from write folders that stay, deleted by key as the ledger
lists them (R13, R20). Standard library only (R19)."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from vacuum_work import Result, Trim

from . import fs
from .dispatch import Task, runs
from .job import LedgerList


@runs(Trim)
def run_trims(task: Task, items: list[Trim]) -> Iterator[Result]:
    """The files each replace removed, by key, read from the ledger's list as they go: only those in
    write folders the item does not ``skip`` (R9: each inside the table's location). Refused where
    the ledger's lists are not at hand (an executor): a listing would find the files the folder
    keeps too."""
    job, files = task.job, task.files
    for item in items:
        if files is None:
            yield Result(item, error=f"refused: the trim of {item.base_key} deletes what the ledger lists, and its "
                                     "lists are read where the run is driven; nothing was deleted")
            continue
        wanted = ((path, size) for path, size in LedgerList(files, item.listed) if item.takes(path))
        done = fs.delete_files(job.store, job.at(item), wanted, dry_run=job.dry_run, look=item.fresh,
                               receipt=task.receipt)
        yield replace(done, item=item)
