"""What comes back from a vacuum's work: each item's ``Result``, and the receipt parts it wrote.

Standard library only (R19)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .leaves import Summary

if TYPE_CHECKING:
    from .items import Item


@dataclass(frozen=True)
class Part(Summary):
    """A sealed receipt part (R20): its summary (``first``, ``last``, ``count``, ``bytes``, ``root``),
    what the ledger records, and where its leaves wait."""
    digest: str
    """SHA-256 of the compressed leaves, hex: the attachment the ledger keeps."""
    where: str
    """The scratch file the leaves wait in (a path, or a key of the warehouse's bucket)."""
    absent: bool = False
    """The objects were looked for, to be deleted, and found already gone: the run deleted none of
    them (a run it took over had, and was stopped before it wrote them down). The ledger records
    the observation as such (``FoundAbsent``), never as a deletion (R20, R25)."""


@dataclass(frozen=True)
class Result:
    """What an item (or a part of one) did: files and bytes deleted (or, for a dry run, that would
    go), the first error (None: it went well), stragglers left for later, and the receipt parts the
    task wrote."""
    item: Item | None
    """The item it did (None: a task's closing result, which only hands over ``parts``)."""
    files: int = 0
    bytes: int = 0
    error: str | None = None
    left: int = 0
    """Stragglers younger than the grace period, left for a later vacuum."""
    listing: tuple[tuple[str, int], ...] | None = None
    """A dry run's (path, size) of each file that would go (a sample, once written to a dataset)."""
    parts: tuple[Part, ...] = ()

    @property
    def key(self) -> str:
        return "" if self.item is None else self.item.key

    @property
    def ok(self) -> bool:
        return self.error is None

    def __add__(self, other: Result) -> Result:
        """Two parts of one item: their counts added, the first error kept."""
        listing = None if self.listing is None and other.listing is None else \
            (self.listing or ()) + (other.listing or ())
        return Result(self.item, self.files + other.files, self.bytes + other.bytes, self.error or other.error,
                      self.left + other.left, listing, self.parts + other.parts)
