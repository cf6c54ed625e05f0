"""What every task of one vacuum shares besides its items: the ``Job``, with the warehouse's
``Storage`` built once for it, and the ledger's file lists where they are at hand (``Files``).

Standard library only (R19)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from vacuum_work import Item, location

from .receipts import DeletionLog
from .storage import Storage
from .stores import storage_for

Files = Callable[[str], Iterable[tuple[str, int]]]
"""A file list the ledger keeps, by digest: ``(path, size)`` pairs relative to the table's location.
Only the driver has one (``VacuumRun.files``); executors list what they delete."""


@dataclass(frozen=True)
class Job:
    """What every task of one vacuum shares besides its items."""
    root: str
    run_id: str | None = None
    """The run whose receipt the tasks write (None: a dry run, which deletes nothing)."""
    listing: str | None = None
    """A dry run's dataset folder: each item's listing is written there."""
    siblings: int = 0
    """About how many table locations the root holds (for the one-listing check on object stores)."""
    stream: bool = False
    """A dry run's listing goes back through Spark (``Listed`` chunks, which the driver writes to its
    dataset) instead of being written to ``listing`` here: executors that may not see the driver's
    folders (a Spark Connect server elsewhere, a cluster's) never write there."""
    store: Storage = field(init=False, repr=False, compare=False)
    """Where the files are, built once from ``root`` (and again where the job is unpickled) and
    passed down to everything that touches them."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "store", storage_for(self.root))

    @property
    def dry_run(self) -> bool:
        return self.run_id is None

    def receipt(self) -> DeletionLog | None:
        """A task's log of what it deletes, for the run's receipt (R20); none for a dry run."""
        return None if self.run_id is None else DeletionLog(self.store, self.run_id)

    def at(self, item: Item) -> str:
        """An item's location, absolute."""
        return location(self.root, item.path)


class LedgerList:
    """One of the ledger's file lists, read when a deletion comes to it (never all at once)."""

    def __init__(self, files: Files, digest: str) -> None:
        self._files, self._digest = files, digest

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._files(self._digest))
