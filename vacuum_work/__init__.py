"""What a vacuum does, as typed records: one shape from the ledger's plan to the record of its end.

The ledger decides a vacuum (``ledger.core.vacuums``) and returns its ``Plan``: the dropped
instances it purges, the old versions it expires, the files replaces removed that no kept version
names any more, the abandoned writes it sweeps, the committed folders it cleans of stragglers, each
an item of work (``items``: one class a kind, each answering for itself) with what an executor
re-checks before it touches a file. The Spark job hands the items to executors (split into parts
where big), which answer each with a ``Result`` (``items``); the run handle (``ledger.VacuumRun``)
records the results as they are, and the ledger decides from them what is purged, deleted and
cleaned. Nothing changes shape on the way, so a field added here reaches every side at once.

This package imports the standard library only: the ledger imports it, and so do the executors,
which carry nothing of the ledger (R19). Times are integer microseconds since the epoch, UTC, as
in the ledger's log; paths are relative (an item's ``path`` to the warehouse root, a folder's to
the item's location) and made absolute with ``location``.
"""

from __future__ import annotations

from .items import KINDS, Expiry, Folder, ForeignScan, Item, Part, Purge, Result, StragglerScan, Sweep, Trim, Work
from .names import EXPIRE, FOREIGN, PURGE, STRAGGLERS, SWEEP, TRIM, iso, location, new_run_id
from .plan import Held, Plan, Waiting


def split(item: Item, pieces: int) -> list[Item]:
    """``Item.split``, as a list."""
    return list(item.split(pieces))


__all__ = [
    "PURGE", "EXPIRE", "TRIM", "SWEEP", "STRAGGLERS", "FOREIGN", "new_run_id", "location", "iso", "Folder", "Item",
    "KINDS", "Purge", "Expiry", "Trim", "Sweep", "StragglerScan", "ForeignScan", "Work", "split", "Waiting", "Held",
    "Plan", "Part", "Result",
]
