"""Publications: where the ledger's tables are exposed to other engines' readers (R26, R25).

A publication copies no data: it writes another format's metadata (an Iceberg table in a SQL
catalog) naming the files the ledger holds. The ledger records each one, so that anyone who
changes what may be read knows where else it is shown: an erasure request republishes every
publication that shows a table it names before it returns (R25), from whichever process or host
made it, and ``publications()`` tells a privacy officer where a table is exposed.

What is recorded is where (the catalog's address with no password, R23; the catalog name readers
use; the metadata folder) and which instances it shows; never what a reader read. A publication is
keyed by its catalog's address and name, so publishing again into the same place replaces the
record, and only when the set of instances it shows changed (publishing with nothing changed
appends nothing).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Mapping

import attrs

from ..clock import Micros
from ..errors import InvalidArgument
from .concern import Concern, Decision, corrupt, mapping
from .events import event

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State

PUBLICATION_STREAM = "publications"
"""Every publication's record: read by erasure requests' engines and people, by no decision."""

_PASSWORD = re.compile(r"://[^/@]*:[^/@]*@|[?&]password=", re.IGNORECASE)
_SSL_PASSWORD = re.compile(r"[?&]sslpassword=", re.IGNORECASE)
"""libpq's other secret: refused in a new record only (a log written before 0.11.2 that holds one
still folds: the chain keeps it, and refusing it would make that log unreadable)."""


@event("TablesPublished")
@attrs.frozen
class TablesPublished:
    """The publication at ``catalog`` (its address, no password) under ``catalog_name``, with its
    metadata under ``metadata``, shows these instances (``table_ids``, sorted) from now on."""
    catalog: str
    catalog_name: str
    metadata: str
    table_ids: tuple[str, ...]


@attrs.frozen
class Published(TablesPublished):
    """A publication as the state keeps it: its event's fields and when it was recorded."""
    time: Micros = 0


@attrs.frozen
class Publications:
    published: Mapping[str, Published] = mapping(Published)
    """``key(catalog, catalog_name)`` -> the publication's latest record."""

    def showing(self, table_id: str) -> list[Published]:
        """The publications that show ``table_id``, oldest first."""
        return sorted((p for p in self.published.values() if table_id in p.table_ids), key=lambda p: p.time)


def key(catalog: str, catalog_name: str) -> str:
    return f"{catalog_name}@{catalog}"


@attrs.frozen
class RecordPublication:
    catalog: str
    catalog_name: str
    metadata: str
    table_ids: tuple[str, ...]


Command = RecordPublication


def _problem(e: TablesPublished) -> str | None:
    """What is wrong with a publication's record (None: nothing), for the decision and the fold alike."""
    texts = (e.catalog, e.catalog_name, e.metadata)
    if not all(isinstance(t, str) and t for t in texts):
        return "an empty catalog address, catalog name or metadata folder"
    if _PASSWORD.search(e.catalog):
        return "a catalog address with a password in it (R23)"
    if not isinstance(e.table_ids, tuple) or not all(isinstance(t, str) and t for t in e.table_ids) \
            or list(e.table_ids) != sorted(set(e.table_ids)):
        return "table ids that are not a sorted list of distinct ids"
    return None


def _record(state: State, cmd: RecordPublication) -> Decision:
    e = TablesPublished(cmd.catalog, cmd.catalog_name, cmd.metadata, tuple(sorted(set(cmd.table_ids))))
    problem = _problem(e) or ("a catalog address with an SSL key's password in it (R23)"
                              if _SSL_PASSWORD.search(e.catalog) else None)
    if problem is not None:
        raise InvalidArgument(f"a publication with {problem} is not recorded")
    unknown = [t for t in e.table_ids if state.tables.instance(t) is None]
    if unknown:
        raise InvalidArgument(f"a publication names table id(s) the ledger does not know: {', '.join(unknown)}")
    found = state.publications.published.get(key(e.catalog, e.catalog_name))
    if found is not None and (found.metadata, found.table_ids) == (e.metadata, e.table_ids):
        return Decision((), frozenset(), found)  # nothing changed: nothing appended
    return Decision(((PUBLICATION_STREAM, e),), frozenset({PUBLICATION_STREAM}), e)


def _on_published(b: Builder, e: TablesPublished, seq: int, time: Micros) -> None:
    problem = _problem(e)
    if problem is not None:
        raise corrupt(f"event #{seq} records a publication with {problem}")
    b.publications.published[key(e.catalog, e.catalog_name)] = Published(
        e.catalog, e.catalog_name, e.metadata, tuple(e.table_ids), time)


CONCERN = Concern(initial=Publications(), evolve={TablesPublished: _on_published},
                  decide={RecordPublication: _record})
