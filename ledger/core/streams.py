"""The log's streams, named in one place.

Each concern owns the streams its events go to, but a decision conditions its append on
every stream it read (R4), and those are often another concern's: a commit reads the
catalog's and the warehouse's, a vacuum the watermarks', the data's and its own. So the
names sit here, below every concern, and each concern imports the ones it reads.
"""

from __future__ import annotations

CATALOG_STREAM = "catalog"
"""The ledger-wide catalog: an undrop that moves a table to another database (and, in logs
written before 0.4, every create, drop, undrop and purge). Every catalog decision reads it, so
the rare command that touches two databases has one order with everything else."""

VACUUM_STREAM = "vacuums"
"""Every run's start, renewals and finish: one stream, because a run can be taken over by
another (``VacuumStarted.resumes``), and a takeover must see the lease it overrides."""

WAREHOUSE_STREAM = "warehouse"
"""The warehouse root's recorded moves."""

LEDGER_STREAM = "ledger"
"""Facts about the ledger itself (its upgrades)."""


def catalog_stream(database: str) -> str:
    """One stream per database orders its names and instances (creates, drops, undrops, database
    drops, purges): hosts working in different databases never make each other retry (R18)."""
    return f"catalog:{database}"


def catalog_streams(*databases: str) -> frozenset[str]:
    """What a decision that read the catalog of ``databases`` conditions on (R4): their streams,
    and the ledger-wide one, which a cross-database undrop moves."""
    return frozenset({CATALOG_STREAM, *map(catalog_stream, databases)})


def data_stream(table_id: str) -> str:
    """One stream per instance orders every decision about its data (writes, versions, marks)."""
    return f"data:{table_id}"


def watermark_stream(scope: object) -> str:
    """Each scope's watermark is a stream of its own: an undrop reads exactly the three that guard it."""
    return f"watermark:{scope}"


def retention_stream(scope: object) -> str:
    return f"retention:{scope}"


def receipt_stream(run_id: str) -> str:
    """Each vacuum run's receipt is a stream of its own: recording what one run deleted never makes
    another run, or any other command, retry."""
    return f"receipt:{run_id}"


def touched(streams: frozenset[str] | set[str]) -> tuple[frozenset[str], frozenset[str], bool]:
    """What appends to ``streams`` may have changed, for a reader that follows the catalog (a Spark
    session's names): the instances whose data moved, the databases whose names moved, and whether
    the ledger-wide catalog moved (then any name may have)."""
    ids = frozenset(s[len("data:"):] for s in streams if s.startswith("data:"))
    databases = frozenset(s[len("catalog:"):] for s in streams if s.startswith("catalog:"))
    return ids, databases, CATALOG_STREAM in streams
