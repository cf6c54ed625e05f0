"""An event store for injecting faults and races: tests build a ``Ledger`` on one of these
instead of patching the ledger's insides."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ledger.persistence.contract import Appended
from ledger.persistence.sqlite import SQLiteStore


class FaultyStore(SQLiteStore):
    """An ``SQLiteStore`` whose appends can be made to fail, or to let another writer in first.

    ``before_append`` runs before each append (a racing writer's work goes there), and
    ``after_append`` after it (another process's work that lands between a command's append
    and the reading of its result); ``fail_with``, if set, is raised instead of appending.
    """

    def __init__(self, path: str | Path, **options: Any) -> None:
        super().__init__(str(path), **options)
        self.before_append: Callable[[FaultyStore], None] | None = None
        self.after_append: Callable[[FaultyStore], None] | None = None
        self.fail_with: Exception | None = None
        self.appends = 0

    def append(self, *args: Any, **kwargs: Any) -> Appended:
        self.appends += 1
        if self.fail_with is not None:
            raise self.fail_with
        if self.before_append is not None:
            self.before_append(self)
        appended = super().append(*args, **kwargs)
        if self.after_append is not None:
            self.after_append(self)
        return appended
