"""The purged-instance archive as a stored state keeps it, and the compaction that fills it.

Purges are final (R8), and a long-lived ledger is mostly purged instances, so a stored state
keeps them apart from the live catalog (``core.tables.Archive``): compaction (``for_snapshot``)
moves every purged instance to the archive, one entry each, read when asked for
(``StoredArchive``); a state held in memory keeps its archive as a dict (``HeldArchive``).
"""

from __future__ import annotations

from collections.abc import KeysView, Set as AbstractSet
from typing import Any, Iterable, Mapping

import attrs
from immutables import Map

from ..core.fold import HOLD_AT
from ..core.maps import GONE, OverlayMap
from ..core.tables import Archive, Instance, Tables
from .lazy import StoredEntries


class HeldArchive(Archive):
    """The archive of a state compacted in memory (a fold from nothing, about to be stored)."""

    __slots__ = ("_details",)

    def __init__(self, details: dict[str, Instance]) -> None:
        self._details = details

    @property
    def ids(self) -> AbstractSet[str]:
        return self._details.keys()

    def get(self, id_: str) -> Instance | None:
        return self._details.get(id_)

    def values(self) -> Iterable[Instance]:
        return self._details.values()


class StoredArchive(Archive):
    """The archive of a state read from a stored one: each purged instance is read when it is
    asked for (an undrop by id, ``instance``), and the whole set only if someone walks it."""

    __slots__ = ("_entries",)

    def __init__(self, entries: OverlayMap) -> None:
        self._entries = entries

    @property
    def ids(self) -> AbstractSet[str]:
        return KeysView(self._entries)  # membership costs one lookup; iterating reads them all

    def entries(self) -> OverlayMap:
        return self._entries

    def get(self, id_: str) -> Instance | None:
        found: Instance | None = self._entries.get(id_)  # the entries are instances (``ArchiveCodec``)
        return found

    def values(self) -> Iterable[Instance]:
        return self._entries.values()

    def __len__(self) -> int:
        return len(self._entries)


@attrs.frozen
class ArchiveCodec:
    """``codecs.KeyedCodec`` of ``Tables.archive``: one entry per purged instance."""

    def entries(self, archive: Archive) -> Mapping[str, Instance]:
        if isinstance(archive, StoredArchive):
            return archive.entries()
        return {i.id: i for i in archive.values()}

    def encode_item(self, i: Instance) -> Any:
        return [i.name, i.path, i.created_at, i.dropped_at, i.purged_at]

    def decode_item(self, key: str, data: Any) -> Instance:
        return Instance(key, *data)

    def stored(self, entries: OverlayMap) -> Archive:
        return StoredArchive(entries)


ARCHIVE_CODEC = ArchiveCodec()


def plus(archive: Archive, purged: Iterable[Instance]) -> Archive:
    """``archive`` with more purged instances (what a compaction moves there)."""
    if isinstance(archive, StoredArchive):
        return StoredArchive(archive.entries().update({i.id: i for i in purged}))
    details = {i.id: i for i in archive.values()}
    details.update((i.id, i) for i in purged)
    return HeldArchive(details)


def for_snapshot(tables: Tables) -> Tables:
    """The same catalog with every purged instance moved to the archive (what a stored state keeps)."""
    instances = tables.instances
    # Read from a stored state, which archived every purge before it: only the instances
    # changed since can have been purged since.
    stored = instances if isinstance(instances, OverlayMap) and isinstance(instances.base, StoredEntries) \
        and instances.base.stamp is not None else None
    changed = stored.changes.values() if stored is not None else instances.values()
    purged = [i for i in changed if i is not GONE and i.purged_at is not None]
    if not purged:
        return tables
    kept: Mapping[str, Instance]
    if stored is not None:
        mutation = stored.mutate()
        for i in purged:
            del mutation[i.id]
        kept = mutation.finish()
    else:  # all in memory: a new map is one pass, where deleting each purged one is a change of a persistent map
        left = {id_: i for id_, i in instances.items() if i.purged_at is None}
        kept = OverlayMap.held(left) if len(left) >= HOLD_AT else Map(left)
    return attrs.evolve(tables, instances=kept, archive=plus(tables.archive, purged))
