"""The log's streams, named in one place.

Each concern owns the streams its events go to, but a decision conditions its append on
every stream it read (R4), and those are often another concern's: a commit reads the
catalog's and the warehouse's, a vacuum the watermarks', the data's and its own. So the
names sit here, below every concern, and each concern imports the ones it reads.
"""

from __future__ import annotations

CATALOG_STREAM = "catalog"
"""Names and instances: creates, drops, undrops and purges."""

VACUUM_STREAM = "vacuums"
"""Every run's start, renewals and finish: one stream, because a run can be taken over by
another (``VacuumStarted.resumes``), and a takeover must see the lease it overrides."""

WAREHOUSE_STREAM = "warehouse"
"""The warehouse root's recorded moves."""

LEDGER_STREAM = "ledger"
"""Facts about the ledger itself (its upgrades)."""


def data_stream(table_id: str) -> str:
    """One stream per instance orders every decision about its data (writes, versions, marks)."""
    return f"data:{table_id}"


def watermark_stream(scope: object) -> str:
    """Each scope's watermark is a stream of its own: an undrop reads exactly the three that guard it."""
    return f"watermark:{scope}"


def retention_stream(scope: object) -> str:
    return f"retention:{scope}"
