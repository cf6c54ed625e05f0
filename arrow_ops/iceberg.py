"""The ledger's tables in an Iceberg SQL catalog, for readers in other processes (R26).

    report = arrow_ops.publish(ledger, "/data/catalog.db")          # or "postgresql://..."
    # then, anywhere: SqlCatalog("ledger", uri="sqlite:////data/catalog.db").load_table("sales.orders")

Every live table's kept versions (not expired, not erased, and not due to expire: a version
superseded longer ago than its table's retention is left out, so that a publication's pins never
keep the vacuum from expiring it) become one Iceberg table of the same
two-part name, one snapshot a version: its files exactly the version's files (the Parquet files the
ledger recorded, never copied), its schema and identity partition spec the recorded ones, its
timestamp the version's commit time, its summary ``ledger.version`` and ``ledger.table-id``. Time
travel by snapshot id or by timestamp gives the ledger's version at that time. The catalog is the
one pyiceberg's ``SqlCatalog``, Iceberg Java's ``JdbcCatalog`` and Trino's JDBC catalog share.

How a publication changes a table: when the set of versions it shows changes, its metadata is
written anew (all its snapshots, stable snapshot ids, timestamps in ledger order, so Java's
ordering checks hold), and the catalog's pointer is swapped from the metadata it read to the new
one in one conditional UPDATE (the catalog's own optimistic commit; a lost race is read again and
recomputed). Killed before the swap, a table stays at its old metadata; after, at its new one.

What a publication exposes is pinned (R21) for ``lease`` (7 days, the most a pin may have): the
pins' ids are in a table property (``ledger.pins``), so the next publication, from any process,
renews the ones it keeps (once less than half their lease is left) and releases the others once
its swap has landed. A table not republished within the lease loses its pins: its current
version's files stay (a current version is never expired), but an older snapshot's files may be
deleted by a vacuum once that version expires, and a dropped table's whole files once it is
purged; the catalog would then name files that are gone. Publish at least every few days.

Iceberg metadata (metadata JSON, manifest lists, manifests) goes under ``metadata=`` (a folder
of the caller's; beside a SQLite catalog by default, ``<catalog>.iceberg``), one folder a ledger
table id, never into a table's location (which the vacuum owns, R9). The publication keeps that
folder: metadata it superseded more than a day ago is deleted by the next publication that changes
the table. The design's "the vacuum's to delete" would take the vacuum outside the warehouse.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from ledger import Ledger
from .extras import need
from .reports import CatalogUnavailable, PublishReport

__all__ = ["CatalogUnavailable", "PUBLISH_PIN_LEASE", "PublishReport", "publish"]

PUBLISH_PIN_LEASE = "7d"
"""How long a publication's pins hold what it exposes, unless the next publication renews them."""

log = logging.getLogger("arrow_ops.iceberg")


def publish(ledger: Ledger, catalog: str, *, catalog_name: str = "ledger", database: str | None = None,
            tables: Iterable[str] | None = None, metadata: str | None = None,
            lease: Any = None, table_ids: Iterable[str] | None = None) -> PublishReport:
    """Publish every live table's kept versions (of ``database``, or only ``tables``) into the
    Iceberg SQL catalog ``catalog`` (a SQLite file's path, ``sqlite:///...``, or
    ``postgresql://...``), under the catalog name ``catalog_name`` (every reader must use the same).
    Iceberg metadata goes under ``metadata`` (required for PostgreSQL; beside a SQLite catalog by
    default). Tables this ledger published before that are dropped now, or have nothing kept, leave
    the catalog. Publishing again with nothing changed writes nothing. ``CatalogUnavailable`` if the
    catalog cannot be reached or written (nothing recorded); ``ExtraMissing`` without pyiceberg.
    ``table_ids`` publishes only those instances, whatever names they bear in the ledger or in the
    catalog (an erasure request's republication)."""
    need("pyiceberg", "iceberg")
    need("sqlalchemy", "iceberg")
    from .iceberg_build import Publisher
    return Publisher(ledger, catalog, catalog_name=catalog_name, database=database,
                     tables=None if tables is None else list(tables), metadata=metadata,
                     lease=PUBLISH_PIN_LEASE if lease is None else lease,
                     table_ids=None if table_ids is None else list(table_ids)).run()
