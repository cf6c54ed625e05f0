"""What a vacuum does, as typed records: one shape from the ledger's plan to the record of its end.

The ledger decides a vacuum (``ledger.core.vacuums``) and returns its ``Plan``: the dropped
instances it purges, the old versions it expires, the files replaces removed that no kept version
names any more, the abandoned writes it sweeps, the committed folders it cleans of stragglers, each an item of work with what an executor re-checks before it
touches a file. The Spark job hands the items to executors (split into parts where big), which
answer each with a ``Result``; the run handle (``ledger.VacuumRun``) records the results as they
are, and the ledger decides from them what is purged, deleted and cleaned. Nothing changes shape
on the way, so a field added here reaches every side at once.

This package imports the standard library only: the ledger imports it, and so do the executors,
which carry nothing of the ledger (R19). Times are integer microseconds since the epoch, UTC, as
in the ledger's log; paths are relative (an item's ``path`` to the warehouse root, a folder's to
the item's location) and made absolute with ``location``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field, replace
from typing import ClassVar, Iterator, Union

from .leaves import Summary

PURGE, EXPIRE, TRIM, SWEEP, STRAGGLERS, FOREIGN = "purge", "expire", "trim", "sweep", "stragglers", "foreign"


def new_run_id() -> str:
    """A run id no other run has: the UTC start time, then 8 random hex digits. A caller that must
    release a run's lease if it is stopped (a Ctrl-C handler) chooses the id before the start."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def location(root: str, path: str) -> str:
    """``path`` (relative, with ``/``) made absolute under ``root`` (a folder or a URI)."""
    return root.rstrip("/") + "/" + path


# --- what to delete -------------------------------------------------------------------------

@dataclass(frozen=True)
class Folder:
    """A write's folder: ``path`` relative to its table's location."""
    write_id: str
    path: str
    listed: str | None = None
    """The digest of the file list its write's commit named (a ledger attachment), if it committed
    and no stopped run set out to delete it (which may have deleted some already): on an object
    store those files are deleted by key, without listing (R20). None: the folder is listed."""
    why: str = ""
    """Why a sweep takes it: ``aborted``, ``lease expired``, or an earlier run's unfinished sweep."""


@dataclass(frozen=True)
class _Item:
    """What every item of work shares: the instance it is about, and where that lives."""
    table_id: str
    name: str
    path: str
    """The instance's location, relative to the warehouse root."""
    part: int | None = field(default=None, kw_only=True)
    """Which part of a split item this is (None: the whole item)."""

    kind: ClassVar[str]

    @property
    def key(self) -> str:
        """Unique in its plan: ``<kind>:<id>``, and ``#<n>`` for part ``n`` of a split item."""
        return f"{self.kind}:{self._id}" + ("" if self.part is None else f"#{self.part}")

    @property
    def base_key(self) -> str:
        """The key of the whole item a part belongs to."""
        return self.key.split("#", 1)[0]

    @property
    def _id(self) -> str:
        return self.table_id


@dataclass(frozen=True)
class Purge(_Item):
    """A dropped instance's whole location (R2, R8): gone, then recorded purged."""
    dropped_at: int
    watermark: int
    """Its effective watermark once the run's watermarks are in the log: the executor purges only
    if ``dropped_at <= watermark`` (the ledger's decision, re-checked)."""
    resumed: bool = False
    """Behind a watermark before this run: an earlier vacuum (or a hand) blocked it."""
    listed: tuple[str, ...] = ()
    """Digests of the file lists its commits named whose folders are still there: what the ledger
    knows lies in the location (on an object store, deleted by key before the rest is listed).
    Empty for a resumed purge: an earlier run may have deleted some, and a store answers "deleted"
    for a key already gone, so its location is listed and the run counts only what it deletes."""

    kind: ClassVar[str] = PURGE

    def refusal(self) -> str | None:
        """Why an executor must not purge it (None: it may)."""
        if self.dropped_at > self.watermark:
            return "refused: not behind its watermark, so still restorable"
        return None


@dataclass(frozen=True)
class Expiry(_Item):
    """An instance's old versions (R13): its mark moved (``mark``; None if it stays), ``versions``
    expired with it, and ``folders`` no unexpired version names, to delete."""
    mark: int | None
    versions: tuple[int, ...]
    folders: tuple[Folder, ...]

    kind: ClassVar[str] = EXPIRE


@dataclass(frozen=True)
class Trim(_Item):
    """The files replace ``version`` removed from write folders that stay (other files of them are
    still named), now that no unexpired version names them (R13): deleted by key, each a file of
    the list ``listed`` (the replace's ``removes``), read from the ledger while the run works. An
    expiry deletes a folder only whole; without this a file an erasure's rewrite removed (R25) would
    wait for ever beside the files its folder keeps."""
    version: int
    listed: str
    """The digest of the list of files the replace removed (paths relative to the location)."""
    skip: tuple[str, ...] = ()
    """Write ids whose folders go whole (no unexpired version names them) or went already: their
    files are an expiry's, not this item's."""
    fresh: bool = False
    """Taken over from a stopped run, which may have deleted some of the files: each key is looked
    at before it is deleted, so that a store's "deleted" for a key already gone is never counted or
    receipted (R20)."""

    kind: ClassVar[str] = TRIM

    @property
    def _id(self) -> str:
        return f"{self.table_id}/{self.version}"

    def takes(self, path: str) -> bool:
        """Whether ``path`` (of the list, relative to the location) is this item's to delete: a file
        in a write folder (``_writes/<id>/...``) not in ``skip``, or one outside every write folder
        (adopted from before versioning: the replace's list names it, so it is the ledger's to
        delete by key; R15's "never swept" is about files no version ever named)."""
        parts = path.split("/")
        if len(parts) > 2 and parts[0] == "_writes":
            return parts[1] not in self.skip
        return parts[0] != "_writes"


@dataclass(frozen=True)
class Sweep(_Item):
    """An instance's abandoned writes (R15): given up on record, their ``folders`` to delete."""
    folders: tuple[Folder, ...]

    kind: ClassVar[str] = SWEEP


@dataclass(frozen=True)
class StragglerScan(_Item):
    """A committed write's folder to clean of files its version does not name, once older than
    ``cutoff`` (now minus the grace period, on the ledger's clock)."""
    folder: Folder
    cutoff: int
    named: frozenset[str] | None = None
    """What the version names (relative to the location): the list ``folder.listed``, read in by the
    ledger when it hands the plan out (``Ledger.start_vacuum``, ``plan_vacuum``). None: not read in,
    and an executor refuses the scan (an empty set would say the version names nothing, and every
    old file in the folder would go)."""

    kind: ClassVar[str] = STRAGGLERS

    @property
    def _id(self) -> str:
        return self.folder.write_id


@dataclass(frozen=True)
class ForeignScan(_Item):
    """For a dry run: files in a location outside every write folder that no version names. No
    vacuum deletes them (only a purge of the whole instance does); they are reported."""
    adopted: str | None = None
    """The digest of the files adopted as its version 1, which are not foreign."""
    named: frozenset[str] = frozenset()

    kind: ClassVar[str] = FOREIGN


Work = Union[Purge, Expiry, Trim, Sweep, StragglerScan, ForeignScan]


def split(item: Expiry | Sweep, pieces: int) -> list[Expiry | Sweep]:
    """An expiry's or a sweep's folders in up to ``pieces`` parts, so that one big table is
    spread over every core. Each part's result names the part it did."""
    size = max(1, -(-len(item.folders) // max(1, pieces)))
    return [replace(item, folders=item.folders[start:start + size], part=n)
            for n, start in enumerate(range(0, len(item.folders), size))]


# --- what the plan says besides ------------------------------------------------------------

@dataclass(frozen=True)
class Waiting:
    """A dropped instance the plan leaves restorable: when it becomes due, and the retention that
    decided (a scope, ``vacuum`` for the run's own, or ``default``)."""
    table_id: str
    name: str
    dropped_at: int
    due_at: int
    retention_seconds: int
    retention_from: str


@dataclass(frozen=True)
class Held:
    """What a pin kept from this run (R21): a dropped instance not purged (``what`` is ``purge``;
    ``version`` None when the pin is on an instance without versions), or a version its mark
    stopped short of (``expiry``)."""
    table_id: str
    name: str
    what: str
    version: int | None
    pin_id: str
    until: int


@dataclass(frozen=True)
class Plan:
    """What the ledger decided a vacuum may do. From ``Ledger.start_vacuum`` it is on record: its
    watermarks, marks, sweeps and lease are in the log before the caller sees it (R2, R13, R15).
    From ``Ledger.plan_vacuum`` (a dry run) nothing was recorded, and ``run_id`` is None."""
    run_id: str | None
    root: str
    now: int
    purges: tuple[Purge, ...] = ()
    expiries: tuple[Expiry, ...] = ()
    sweeps: tuple[Sweep, ...] = ()
    stragglers: tuple[StragglerScan, ...] = ()
    foreign: tuple[ForeignScan, ...] = ()
    """The instances whose writes were looked at: a dry run lists their foreign files."""
    watermarks: tuple[tuple[str, int], ...] = ()
    """(scope, time) of each watermark the run advances (or would)."""
    resumes: tuple[str, ...] = ()
    """Runs whose lease ran out before they finished: this run takes over their work."""
    busy: tuple[str, ...] = ()
    """Runs still holding a live lease: their tables are left to them."""
    waiting: tuple[Waiting, ...] = ()
    held: tuple[Held, ...] = ()
    lease_until: int | None = None
    locations: int = 0
    """How many instances (live or dropped, not purged) have a location under the root: about what
    a listing of the root's folders returns."""
    trims: tuple[Trim, ...] = ()
    """Replaces whose removed files no unexpired version names any more: deleted by key."""

    @property
    def empty(self) -> bool:
        """Nothing a run would record: no purge, no mark, no sweep, no scan, no stopped run to take
        over (then ``start_vacuum`` records nothing either)."""
        return not (self.purges or self.expiries or self.trims or self.sweeps or self.stragglers or self.resumes)

    def idle(self, dry_run: bool) -> bool:
        """Nothing for a vacuum to do, so no Spark job is needed: the plan is ``empty``, and for a
        dry run there are no foreign files to list either (it lists them; a run never deletes them)."""
        return self.empty and not (dry_run and self.foreign)

    def items(self) -> Iterator[Work]:
        """Every item that deletes (or, for a dry run, lists): purges, expiries with folders, trims,
        sweeps, straggler scans."""
        yield from self.purges
        yield from (e for e in self.expiries if e.folders)
        yield from self.trims
        yield from self.sweeps
        yield from self.stragglers


# --- what comes back -------------------------------------------------------------------------

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
    item: Work | None
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


__all__ = [
    "PURGE", "EXPIRE", "TRIM", "SWEEP", "STRAGGLERS", "FOREIGN", "new_run_id", "location", "Folder", "Purge",
    "Expiry", "Trim", "Sweep", "StragglerScan", "ForeignScan", "Work", "split", "Waiting", "Held", "Plan", "Part", "Result",
]
