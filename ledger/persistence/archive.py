"""The purged-instance archive's stored forms, and the compaction that fills it.

Purges are final (R8), and a long-lived ledger is mostly purged instances, so the
snapshots keep them apart from the live catalog (``core.tables.Archive``):

* the stored snapshot of the present moves every purged instance to the archive
  (``for_snapshot``), one entry each, read when asked for (``StoredArchive``);
* a history snapshot leaves them out altogether (``left_to_the_present``): the present state
  holds every one of them exactly, and gives back those purged by the snapshot's time
  (``from_history``, ``PurgedBy``);
* a history snapshot of an earlier release kept them as one document (``HeldArchive``).
"""

from __future__ import annotations

from collections.abc import KeysView, Set as AbstractSet
from typing import Any, Iterable, Iterator, Mapping

import attrs
import orjson
from immutables import Map

from ..clock import Micros
from ..core.fold import HOLD_AT
from ..core.maps import GONE, OverlayMap
from ..core.tables import NO_ARCHIVE, Archive, Instance, Tables, ids_created
from ..errors import LedgerError
from .lazy import StoredEntries


class HeldArchive(Archive):
    """The archive as a history snapshot keeps it, or as a snapshot's compaction builds it.

    Opening a snapshot must not build an object for each purged instance, so this keeps
    their ids as a set (enough to refuse reusing one) and their details as JSON bytes,
    parsed the first time anyone asks (an undrop by id of a purged table, history, verify).
    """

    __slots__ = ("_ids", "_blob", "_parsed", "_times", "_times_raw")

    def __init__(self, ids: frozenset[str] = frozenset(), blob: bytes | None = b"{}",
                 times: tuple[bytes, bytes] | None = None) -> None:
        self._ids = ids
        self._blob = blob
        self._parsed: dict[str, Instance] | None = None if ids else {}
        self._times_raw = times
        """When each was purged, as the snapshot stores it: the JSON list of ids and the JSON list
        of their purge times, in the same order."""
        self._times: dict[str, Micros] | None = None if ids else {}

    @property
    def blob(self) -> bytes:
        """The details, as a history snapshot stores them: ``{id: [name, path, created, dropped,
        purged]}`` (made when first asked for: only such a snapshot needs them as bytes)."""
        if self._blob is None:
            self._blob = ArchiveCodec.blob(self.values())
        return self._blob

    def _details(self) -> dict[str, Instance]:
        if self._parsed is None:
            self._parsed = {id_: Instance(id_, *row) for id_, row in orjson.loads(self.blob).items()}
        return self._parsed

    def purge_times(self) -> dict[str, Micros]:
        """id -> when it was purged, without parsing the details (what ``as_of`` needs to know
        which of them a past state had purged)."""
        if self._times is None:
            if self._times_raw is not None:
                order, times = self._times_raw
                self._times = dict(zip(orjson.loads(order), orjson.loads(times)))
            else:
                self._times = {id_: i.purged_at for id_, i in self._details().items()}  # type: ignore[misc]
        return self._times

    @property
    def ids(self) -> AbstractSet[str]:
        return self._ids

    def get(self, id_: str) -> Instance | None:
        return self._details().get(id_) if id_ in self._ids else None

    def purged_at(self, id_: str) -> Micros | None:
        """When ``id_`` was purged, if it is here (from the purge times alone: no details parsed)."""
        return self.purge_times().get(id_)

    def values(self) -> Iterable[Instance]:
        return self._details().values()

    @classmethod
    def of(cls, details: dict[str, Instance]) -> HeldArchive:
        archive = cls(frozenset(details), None)
        archive._parsed = details
        return archive


@attrs.frozen
class ArchiveCodec:
    """Snapshot codec of ``Tables.archive``: raw bytes kept apart from the rest, so that opening
    a ledger never parses the details of the instances it purged long ago. The part is the ids
    (a JSON list), a tab, their purge times in the same order (a JSON list, parsed only by
    ``as_of``), a tab, then the details (JSON text never holds a raw tab)."""
    raw: bool = True

    def encode(self, archive: Archive) -> bytes:
        times = archive.purge_times()
        order = sorted(times)
        blob = archive.blob if isinstance(archive, HeldArchive) else ArchiveCodec.blob(archive.values())
        return b"\t".join((orjson.dumps(order), orjson.dumps([times[i] for i in order]), blob))

    def decode(self, data: bytes) -> Archive:
        # Slices by position: partitioning twice would copy the (tens of MB of) details twice.
        first = data.index(b"\t")
        second = data.index(b"\t", first + 1)
        ids, times, blob = data[:first], data[first + 1:second], data[second + 1:]
        found = frozenset(orjson.loads(ids))
        return HeldArchive(found, blob, (ids, times)) if found else NO_ARCHIVE

    @staticmethod
    def blob(instances: Iterable[Instance]) -> bytes:
        return orjson.dumps({i.id: [i.name, i.path, i.created_at, i.dropped_at, i.purged_at]
                             for i in instances})

    # As a keyed part of the stored snapshot: one entry per purged instance.

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


class StoredArchive(Archive):
    """The archive of a state read from a stored snapshot: each purged instance is read when it
    is asked for (an undrop by id, ``instance``), and the whole set only if someone walks it."""

    __slots__ = ("_entries", "_times")

    def __init__(self, entries: OverlayMap) -> None:
        self._entries = entries
        self._times: dict[str, Micros] | None = None

    @property
    def ids(self) -> AbstractSet[str]:
        return KeysView(self._entries)  # membership costs one lookup; iterating reads them all

    def entries(self) -> OverlayMap:
        return self._entries

    def get(self, id_: str) -> Instance | None:
        return self._entries.get(id_)

    def purged_at(self, id_: str) -> Micros | None:
        found = self._entries.get(id_)  # one entry read, not all of them
        return None if found is None else found.purged_at

    def values(self) -> Iterable[Instance]:
        return self._entries.values()

    def purge_times(self) -> dict[str, Micros]:
        if self._times is None:
            self._times = {i.id: i.purged_at for i in self._entries.values()}  # type: ignore[misc]
        return self._times

    def __len__(self) -> int:
        return len(self._entries)


class PurgedBy(Archive):
    """The archive of a past state, taken from a later one: every instance the later state knows
    purged at or before ``upto``. Purges are final, so the later state holds them exactly as
    they were; a history snapshot (R17) need not store them again.

    ``as_of`` folds on from such a state, and the fold asks of every created id whether it is
    taken, so membership is answered from the later state's purge times one id at a time;
    the whole set is only worked out if someone iterates or counts it."""

    __slots__ = ("_present", "_upto", "_parsed", "_times")

    def __init__(self, present: Tables, upto: Micros) -> None:
        self._present = present
        self._upto = upto
        self._parsed: dict[str, Instance] | None = None
        self._times: dict[str, Micros] | None = None

    def _details(self) -> dict[str, Instance]:
        if self._parsed is None:
            present = self._present
            self._parsed = {id_: present.instance(id_) for id_ in self.purge_times()}  # type: ignore[misc]
        return self._parsed

    def purged_at(self, id_: str) -> Micros | None:
        """When ``id_`` was purged, if at or before ``upto`` (None otherwise): no set is built."""
        present = self._present
        inst = present.instances.get(id_)
        when = inst.purged_at if inst is not None else present.archive.purged_at(id_)
        return when if when is not None and when <= self._upto else None

    def purge_times(self) -> dict[str, Micros]:
        if self._times is None:
            upto = self._upto
            times = {id_: t for id_, t in self._present.archive.purge_times().items() if t <= upto}
            times.update((i.id, i.purged_at) for i in self._present.instances.values()
                         if i.purged_at is not None and i.purged_at <= upto)
            self._times = times
        return self._times

    @property
    def ids(self) -> _PurgedIds:
        return _PurgedIds(self)

    def get(self, id_: str) -> Instance | None:
        return self._present.instance(id_) if self.purged_at(id_) is not None else None

    def prefetch(self, ids: list[str]) -> None:
        """Read what the later state holds of ``ids`` in a few statements, where ``purged_at`` would
        read it one id at a time (two reads each, from a state read lazily)."""
        present = self._present
        _prefetch(present.instances, ids)
        if isinstance(present.archive, StoredArchive):
            _prefetch(present.archive.entries(), [id_ for id_ in ids if present.instances.get(id_) is None])

    def values(self) -> Iterable[Instance]:
        return self._details().values()

    def __len__(self) -> int:
        return len(self.purge_times())


class _PurgedIds(AbstractSet[str]):
    """``PurgedBy.ids``: a set whose membership test costs one lookup."""

    __slots__ = ("_archive",)

    def __init__(self, archive: PurgedBy) -> None:
        self._archive = archive

    def __contains__(self, id_: object) -> bool:
        return isinstance(id_, str) and self._archive.purged_at(id_) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._archive.purge_times())

    def __len__(self) -> int:
        return len(self._archive.purge_times())


def _prefetch(entries: Any, keys: list[str]) -> None:
    if isinstance(entries, OverlayMap) and isinstance(entries.base, StoredEntries):
        changes = entries.changes
        entries.base.prefetch(key for key in keys if key not in changes)


def prefetch_created(tables: Tables, rows: Iterable[tuple]) -> None:
    """Before a fold of stored ``rows`` on top of ``tables`` (a history snapshot's, completed from
    the present: ``from_history``): read what the present holds of each instance they create,
    for the fold asks of every one whether its id was taken before (on a present read lazily,
    those reads one by one were most of an ``as_of``). ``rows`` need only be the creations
    (``core.tables.CREATES``)."""
    archive = tables.archive
    if isinstance(archive, PurgedBy):
        try:
            ids = ids_created(rows)
        except (LedgerError, TypeError, ValueError, KeyError, AttributeError):
            return  # only a saving: the fold that follows finds, and names, what is wrong with the rows
        archive.prefetch(ids)


# --- the tables slice as each snapshot keeps it -----------------------------------------------

def plus(archive: Archive, purged: Iterable[Instance]) -> Archive:
    """``archive`` with more purged instances (what a snapshot moves there)."""
    if isinstance(archive, StoredArchive):
        return StoredArchive(archive.entries().update({i.id: i for i in purged}))
    details = {i.id: i for i in archive.values()}
    details.update((i.id, i) for i in purged)
    return HeldArchive.of(details)


def for_snapshot(tables: Tables) -> Tables:
    """The same catalog with every purged instance moved to the archive (what a stored snapshot keeps)."""
    instances = tables.instances
    # Read from a stored snapshot, which archived every purge before it: only the instances
    # changed since can have been purged since.
    stored = isinstance(instances, OverlayMap) and isinstance(instances.base, StoredEntries) \
        and instances.base.stamp is not None
    changed = instances.changes.values() if stored else instances.values()
    purged = [i for i in changed if i is not GONE and i.purged_at is not None]
    if not purged:
        return tables
    if stored:
        mutation = instances.mutate()
        for i in purged:
            del mutation[i.id]
        kept = mutation.finish()
    else:  # all in memory: a new map is one pass, where deleting each purged one is a change of a persistent map
        left = {id_: i for id_, i in instances.items() if i.purged_at is None}
        kept = OverlayMap.held(left) if len(left) >= HOLD_AT else Map(left)
    return attrs.evolve(tables, instances=kept, archive=plus(tables.archive, purged))


def left_to_the_present(instance: Instance) -> bool:
    """Whether a history snapshot leaves ``instance`` out (with the whole archive): a purged one,
    which the present state holds exactly as it was (``from_history``)."""
    return instance.purged_at is not None


def history_equal(a: Tables, b: Tables) -> bool:
    """Equal in what a history snapshot keeps (``left_to_the_present``), without building that copy of
    a big catalog: the unpurged instances and the name maps."""
    if (a.bindings, a.dropped, a.database_drops) != (b.bindings, b.dropped, b.database_drops):
        return False
    mine = [i for i in a.instances.values() if i.purged_at is None]
    theirs = b.instances
    return sum(i.purged_at is None for i in theirs.values()) == len(mine) and \
        all(theirs.get(i.id) == i for i in mine)


def from_history(tables: Tables, present: Tables, upto: Micros) -> Tables:
    """A history snapshot's catalog, completed with what ``present`` knows was purged by ``upto``."""
    return attrs.evolve(tables, archive=PurgedBy(present, upto))
