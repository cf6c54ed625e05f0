"""A dry run's foreign files: data files in a location, outside every write folder, that no
version names. Listed, never deleted (R15). Standard library only (R19)."""

from __future__ import annotations

from vacuum_work import ForeignScan, Result

from . import fs
from .dispatch import Task, each, runs


@runs(ForeignScan)
@each
def run_foreign(task: Task, item: ForeignScan) -> Result:
    found = fs.foreign_files(task.job.store, task.job.at(item), set(item.named))
    return Result(item, len(found), sum(f.size for f in found), listing=tuple((f.path, f.size) for f in found))
