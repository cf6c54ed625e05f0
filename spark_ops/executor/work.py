"""What the driver hands the executors, and what comes back: plain values of the standard library.

A vacuum's order, as the ledger decided it, becomes a ``Plan``: the warehouse root and one
``Work`` item per thing to delete (a dropped table's location, a table's old write folders,
its swept writes, a committed folder's stragglers, and, for a dry run, its foreign files),
each carrying what the executor re-checks before it touches a file (R9: the location; for a
purge, the drop time and the watermark, R2). Each item comes back as an ``Outcome``: what it
deleted (or would), and the first error. Big items are split into parts (``key#n``) whose
outcomes add up.
"""

from __future__ import annotations

from dataclasses import dataclass

from .receipts import Part

PURGE, EXPIRE, SWEEP, STRAGGLERS, FOREIGN = "purge", "expire", "sweep", "stragglers", "foreign"
"""Kinds of work: a dropped table's whole location; the write folders no unexpired version names;
the folders of writes given up; a committed folder's stragglers; a dry run's foreign files."""


@dataclass(frozen=True)
class Work:
    key: str
    """Unique in its plan: ``<kind>:<id>``, and ``#<n>`` for a part of a split item."""
    kind: str
    table_id: str
    location: str
    """The table's location (absolute: a path, or a URI on an object store)."""
    dropped_at: int = 0
    watermark: int | None = None
    """A purge's re-check (R2): done only if the table was dropped at or before its watermark."""
    folders: tuple[str, ...] = ()
    """Write folders to delete (absolute), for an expiry or a sweep."""
    manifests: tuple[bytes | None, ...] = ()
    """On an object store, the stored file lists of what the ledger knows lies there (a purge: the
    whole table's; an expiry: one for each of ``folders``): deleted by key, without listing."""
    folder: str = ""
    """The committed write folder a straggler scan cleans."""
    named: frozenset[str] = frozenset()
    """Paths (relative to the location) a straggler scan or a foreign-file listing must keep."""
    cutoff: float = 0.0
    """A straggler goes only if last modified at or before this (seconds since the epoch)."""

    def part(self, n: int, **changes: object) -> Work:
        """Part ``n`` of a split item: its key is ``<key>#<n>``."""
        values = {**self.__dict__, **changes, "key": f"{self.key}#{n}"}
        return Work(**values)  # type: ignore[arg-type]

    @property
    def base_key(self) -> str:
        """The key of the whole item a part belongs to."""
        return self.key.split("#", 1)[0]


@dataclass(frozen=True)
class Plan:
    """A vacuum's order as the executors see it (broadcast once)."""
    root: str
    items: dict[str, Work]
    listing: str | None = None
    """A dry run's dataset folder: each item's listing is written there."""
    siblings: int = 0
    """About how many table locations the root holds (for the one-listing check on object stores)."""
    run_id: str | None = None
    """The run whose receipt the tasks write (None: a dry run, which deletes nothing)."""


@dataclass(frozen=True)
class Outcome:
    key: str = ""
    """The item's (empty as a location's operation returns it, before a task names its item)."""
    files: int = 0
    bytes: int = 0
    error: str | None = None
    listing: tuple[tuple[str, int], ...] | None = None
    """A dry run's (path, size) of each file that would go (a sample, once written to the dataset)."""
    left: int = 0
    """Stragglers younger than the grace period, left for a later vacuum."""
    parts: tuple[Part, ...] = ()
    """The receipt parts a task wrote (on the outcome ``PARTS`` a task ends with, or on a table's)."""

    def __add__(self, other: Outcome) -> Outcome:
        """Two parts of one item: their counts added, the first error kept."""
        listing = None if self.listing is None and other.listing is None else \
            (self.listing or ()) + (other.listing or ())
        return Outcome(self.key.split("#", 1)[0], self.files + other.files, self.bytes + other.bytes,
                       self.error or other.error, listing, self.left + other.left, self.parts + other.parts)


@dataclass(frozen=True)
class Share:
    """One task's share of a table split below the table: its counts, and whether the table is done
    (nothing left for the finishing task)."""
    files: int = 0
    bytes: int = 0
    error: str | None = None
    finished: bool = False
    parts: tuple[Part, ...] = ()

    def __add__(self, other: Share) -> Share:
        return Share(self.files + other.files, self.bytes + other.bytes, self.error or other.error,
                     self.finished or other.finished, self.parts + other.parts)


NOTHING = Outcome("")
"""An item with nothing to do (no part of it was run)."""

PARTS = "receipt-parts"
"""The key of the outcome a task ends with to hand over its receipt's parts (no item has it)."""

__all__ = ["PURGE", "EXPIRE", "SWEEP", "STRAGGLERS", "FOREIGN", "Work", "Plan", "Outcome", "Share", "NOTHING", "PARTS"]
