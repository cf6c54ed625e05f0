"""Entries read one key at a time from a stored snapshot, so that opening a big ledger reads
only what the next command looks at.

A ledger of a million events folds to hundreds of thousands of entries, nearly all of
which a command never touches: an undrop reads one name, one instance and three
watermarks. Parsing all of them on every open (half a second) is what this avoids.
``StoredEntries`` are the entries (``core.maps.Entries``) under a state's overlay maps
when the state was read from a stored snapshot: each key is read through a ``Source``
(the store's rows for one part of one generation) and decoded the first time it is asked
for, and kept: every map folded from the same entries shares them. Anything that walks a
whole map (a vacuum's plan, a history snapshot, ``verify``) reads the part once, in full.
A part read in one pass because a fold asks for much of it (``as_of``) keeps its entries as
stored and checks and decodes each on first use: such a fold uses a fraction of what it reads.

A read that cannot be answered from the snapshot (its generation was deleted, an entry
fails its check, the part holds fewer entries than its head recorded) never reaches the
core as an error: the entries *heal*, taking every entry of their part from a fold of the
log up to the snapshot's event (``heal``, given by the state cache, which then replaces the
damaged snapshot). The log is the truth (R16); a snapshot only saves time.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from ..core.maps import GONE, OverlayMap
from .contract import SnapshotGone

_ABSENT: Any = object()


class Source(Protocol):
    """One part (one slice field) of one stored generation: entries as bytes, by key. Either
    method raises ``SnapshotGone`` if the generation is no longer stored or an entry fails
    its check."""

    def get(self, key: str) -> bytes | None: ...

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Those of ``keys`` that are stored (one round trip for many: ``prefetch``)."""

    def scan(self) -> Iterator[tuple[str, bytes]]: ...


def _depth(source: Source) -> int:
    """How many generations a pass over ``source`` reads (``depth``; 1 for a source that has no chain)."""
    return max(1, getattr(source, "depth", 1))


class SealedSource(Source, Protocol):
    """A ``Source`` that can also give a part's entries as stored, unchecked, and check one later:
    what lets a part read in one pass check and decode only the entries a caller asks for."""

    def scan_sealed(self) -> Iterator[tuple[str, object]]:
        """Every entry of the part as stored (raises ``SnapshotGone`` if the generation is gone)."""

    def checked(self, key: str, stored: object) -> bytes:
        """The bytes of an entry ``scan_sealed`` gave; ``SnapshotGone`` if it fails its check."""


def _unchecked(source: Source) -> tuple[Iterable[tuple[str, object]], Callable[[str, Any], bytes]]:
    """A part's entries as stored and how to check one: a source that checks as it scans (a test's
    dict) gives them checked already."""
    if hasattr(source, "scan_sealed"):
        sealed: SealedSource = source  # type: ignore[assignment]
        return sealed.scan_sealed(), sealed.checked
    return source.scan(), _as_it_is


def _as_it_is(key: str, data: Any) -> bytes:
    return data  # type: ignore[no-any-return]


WHOLE, FEW = 32, 32
"""A part read one key at a time reads the rest in one pass once more than ``FEW`` keys were asked
for, and ``1/WHOLE`` of the rows a pass reads: about its entries times the generations of its chain
(``Source.depth``), for a pass reads every version of every key along the chain. A pass costs
1.1-1.5 us a row, a key read alone about 28 us (a million events' churn: 239,061 rows for 20,484
instances along 17 generations, 0.37 s; 1,515 keys one at a time, 0.04 s). Scaled by the entries
alone (a sixteenth), an ``as_of`` listing 4,000 tables read a 24,000-entry part whole, 0.4-0.6 s."""

AHEAD = 8
"""A key fetched ahead (``prefetch``, many to a statement) costs about what this many rows of a
pass do (11 us: two index seeks in a file of millions of rows, against 1.1-1.5 us a row): keys
wanted beyond ``1/AHEAD`` of the rows a pass reads are read in one pass instead (at a million
events' churn, 13,800 names of a 4,300-entry part six generations deep: a pass, 0.04 s)."""

Heal = Callable[[], dict[str, Any]]
"""Every entry of one part, decoded, as a fold of the log up to the snapshot's event gives them."""


class StoredEntries:
    """A stored part and what has been decoded of it.

    ``stamp`` names the stored generation (None once healed: then they are held, stored
    nowhere), so the writer of the next generation can tell whether a map's changes are
    relative to it, and so whether a delta can be written."""

    __slots__ = ("source", "decode", "size", "stamp", "found", "complete", "heal", "reads", "unread", "check", "rows")

    def __init__(self, source: Source, decode: Callable[[str, bytes], Any], size: int, stamp: object,
                 heal: Heal, everything: dict[str, Any] | None = None) -> None:
        """``everything``: every entry, already decoded (complete, and the dict is taken over)."""
        self.source = source
        self.decode = decode
        self.size = size
        self.stamp = stamp
        self.heal = heal
        self.found: dict[str, Any] = {} if everything is None else everything
        """key -> decoded value, or GONE for a key asked for and not in the snapshot."""
        self.complete = everything is not None
        self.unread: dict[str, Any] = {}
        """Entries of a part read in one pass, as stored: checked (``check``) and decoded on first use."""
        self.check: Callable[[str, Any], bytes] = _as_it_is
        self.reads = 0
        """Keys read one at a time: past ``1/WHOLE`` of ``rows``, the part is read in one pass."""
        self.rows = size * _depth(source)
        """About how many rows a pass over the part reads (every version along its chain)."""

    def get(self, key: str) -> Any:
        found = self.found.get(key, _ABSENT)
        if found is _ABSENT:
            if self.complete:
                return self._first_use(key)
            self.reads += 1
            if self.reads > FEW and self.reads * WHOLE > self.rows:  # a fold of many events asks for much of it: read it all
                return self._first_use(key) if self._read_part() else self.found.get(key, GONE)
            try:
                data = self.source.get(key)
            except SnapshotGone:
                return self._healed().get(key, GONE)
            found = GONE if data is None else self.decode(key, data)
            self.found[key] = found
        return found

    def prefetch(self, keys: Iterable[str]) -> None:
        """Read and decode those of ``keys`` not read yet, many to a statement, or the whole part in
        one pass if that costs less (``AHEAD``): for a caller that knows the keys it is about to ask
        for one at a time (``snapshot.prefetch``)."""
        if self.complete:
            return
        found = self.found
        wanted = [key for key in dict.fromkeys(keys) if key not in found]
        if not wanted:
            return
        if self.size <= FEW or len(wanted) * AHEAD > self.rows:  # a pass costs less
            self._read_part()
            return
        try:
            stored = self.source.get_many(wanted)
        except SnapshotGone:
            self._healed()
            return
        decode = self.decode
        for key in wanted:
            data = stored.get(key)
            found[key] = GONE if data is None else decode(key, data)

    def everything(self) -> dict[str, Any]:
        """Every entry, decoded (read in one pass the first time)."""
        if not self.complete and not self._read_part():
            return self.found
        if self.unread:
            unread, check, decode = self.unread, self.check, self.decode
            try:
                checked = [(key, check(key, stored)) for key, stored in unread.items()]
            except SnapshotGone:
                return self._healed()
            self.found.update((key, decode(key, data)) for key, data in checked)
            self.unread = {}
        return self.found

    def _read_part(self) -> bool:
        """Read the whole part in one pass, keeping its entries as stored (``unread``); False if it
        could not be read and healed instead."""
        try:
            stored, check = _unchecked(self.source)
            unread = dict(stored)
        except SnapshotGone:
            self._healed()
            return False
        if len(unread) != self.size:  # the head or the entries were changed
            self._healed()
            return False
        found = self.found
        for key in found:
            unread.pop(key, None)  # decoded already (a point read): kept as it is
        self.found = {key: value for key, value in found.items() if value is not GONE}
        self.unread, self.check, self.complete = unread, check, True
        return True

    def _first_use(self, key: str) -> Any:
        """An entry of a part read whole, checked and decoded the first time it is asked for: one
        that fails its check heals the part, as a part that fails on read does."""
        stored = self.unread.get(key, _ABSENT)
        if stored is _ABSENT:  # not in the part, or decoded meanwhile by another thread (kept before dropped)
            return self.found.get(key, GONE)
        try:
            data = self.check(key, stored)
        except SnapshotGone:
            return self._healed().get(key, GONE)
        found = self.found[key] = self.decode(key, data)
        self.unread.pop(key, None)
        return found

    def _healed(self) -> dict[str, Any]:
        self.found, self.complete, self.stamp, self.unread = self.heal(), True, None, {}
        self.size = len(self.found)
        return self.found

    def rebased(self, source: Source, changes: Any, size: int, stamp: object, heal: Heal) -> StoredEntries:
        """These entries with ``changes`` applied, now stored as ``source``: what was decoded stays."""
        found = dict(self.found)
        found.update(changes)
        if self.complete:
            found = {key: value for key, value in found.items() if value is not GONE}
        entries = StoredEntries(source, self.decode, size, stamp, heal)
        entries.found, entries.complete, entries.check = found, self.complete, self.check
        entries.unread = {key: stored for key, stored in self.unread.items() if key not in changes}
        return entries


def prefetch(entries: Any, keys: Iterable[str]) -> None:
    """Read, many to a statement, those of ``keys`` that ``entries`` (a map read from a stored state)
    holds neither decoded nor changed since; nothing for a map held in memory."""
    if isinstance(entries, OverlayMap) and isinstance(entries.base, StoredEntries):
        changes = entries.changes
        entries.base.prefetch(key for key in keys if key not in changes)
