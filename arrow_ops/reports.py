"""What a publication says back (``PublishReport``) and how it refuses (``CatalogUnavailable``):
apart from ``iceberg``, which loads the code that needs pyiceberg only when it publishes, and from
that code, which reports with them."""

from __future__ import annotations

from typing import Any

import attrs

from ledger import LedgerError


class CatalogUnavailable(LedgerError):
    """The Iceberg catalog (or its metadata folder) cannot be reached or written: nothing was
    published and nothing recorded in the ledger. The message names the catalog, never its password."""


@attrs.frozen
class PublishReport:
    """What one publication did, table by table (two-part names, sorted)."""
    catalog: str
    """The catalog's URL, its password hidden."""
    catalog_name: str
    written: tuple[str, ...]
    """Tables whose metadata was written (new, or what they show changed)."""
    unchanged: tuple[str, ...]
    """Tables left exactly as they were: nothing written, the catalog not touched."""
    removed: tuple[str, ...]
    """Tables taken out of the catalog: dropped in the ledger, or nothing kept to show."""
    left_out: dict[str, str] = attrs.field(factory=dict)
    """Tables not published, each with why (also logged as a warning)."""
    pins_taken: int = 0
    pins_renewed: int = 0
    pins_released: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"catalog": self.catalog, "catalog_name": self.catalog_name, "written": list(self.written),
                "unchanged": list(self.unchanged), "removed": list(self.removed), "left_out": dict(self.left_out),
                "pins_taken": self.pins_taken, "pins_renewed": self.pins_renewed,
                "pins_released": self.pins_released}
