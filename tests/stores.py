"""An event store for injecting faults and races: tests build a ``Ledger`` on one of these
instead of patching the ledger's insides."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ledger.persistence.contract import Appended, Store
from ledger.persistence.sqlite import SQLiteStore
from ledger.persistence.stores import is_url


class Faults:
    """A store whose appends can be made to fail, or to let another writer in first.

    ``before_append`` runs before each append (a racing writer's work goes there), and
    ``after_append`` after it (another process's work that lands between a command's append
    and the reading of its result); ``fail_with``, if set, is raised instead of appending.
    """

    def __init__(self, path: str | Path, **options: Any) -> None:
        super().__init__(str(path), **options)  # type: ignore[call-arg]
        self.before_append: Callable[[Any], None] | None = None
        self.after_append: Callable[[Any], None] | None = None
        self.fail_with: Exception | None = None
        self.appends = 0

    def append(self, *args: Any, **kwargs: Any) -> Appended:
        self.appends += 1
        if self.fail_with is not None:
            raise self.fail_with
        if self.before_append is not None:
            self.before_append(self)
        appended: Appended = super().append(*args, **kwargs)  # type: ignore[misc]
        if self.after_append is not None:
            self.after_append(self)
        return appended


class FaultyStore(Faults, SQLiteStore):
    """A SQLite file with faults."""


def faulty_store(where: str | Path, **options: Any) -> Store:
    """A store with faults for ``where``: a SQLite file, or a PostgreSQL URL (whose clock check is
    off, ``max_skew=None``: the tests that inject faults drive a ManualClock)."""
    if is_url(str(where)):
        from ledger.persistence.postgres import PostgresStore

        class FaultyPostgresStore(Faults, PostgresStore):
            """A PostgreSQL ledger with faults."""
        return FaultyPostgresStore(str(where), **{"max_skew": None, **options})
    return FaultyStore(where, **options)
