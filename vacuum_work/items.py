"""The kinds of vacuum work, each one thing: what it is, how it is split, what its result records,
and how it is reported.

Every kind is a frozen dataclass under ``Item`` with a ``kind`` name, and answers for itself what
``Item`` asks (its class attributes and methods: what it is and how it runs, how it is reported,
what its result records). Defining a subclass with a ``kind`` registers it in ``KINDS`` (in the
order defined): the report has a section for every kind, and the executors dispatch on ``kind``
(``spark_ops.executor.dispatch``). Standard library only (R19).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Sequence

from .names import EXPIRE, FOREIGN, PURGE, STRAGGLERS, SWEEP, TRIM, iso, location
from .leaves import Summary

KINDS: dict[str, type[Item]] = {}
"""Every kind of work, by its name, in the order the report shows them."""


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
class Item:
    """What every item of work shares: the instance it is about, and where that lives."""
    table_id: str
    name: str
    path: str
    """The instance's location, relative to the warehouse root."""
    part: int | None = field(default=None, kw_only=True)
    """Which part of a split item this is (None: the whole item)."""

    kind: ClassVar[str]
    section: ClassVar[str]
    """The report's name for the items of this kind (a key of ``VacuumReport.to_dict``)."""
    deletes: ClassVar[bool] = True
    """Its files count as deleted (or, for a dry run, as going): a scan that only reports, False."""
    dry_run_only: ClassVar[bool] = False
    """Only a dry run carries it out (it lists what a vacuum never deletes)."""
    on_driver: ClassVar[bool] = False
    """It runs where the ledger's file lists are read (the driver), never on an executor."""
    tallied: ClassVar[tuple[str, str, str] | None] = None
    """Its kind's line of a report's summary: what a dry run would do, what a run did, and what of
    (``{n}``: the sum of ``counted``, ``{items}``: how many items), or None for no line."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            KINDS[cls.kind] = cls

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

    def busy(self) -> bool:
        """Whether a run has anything to do for it."""
        return True

    def split(self, pieces: int) -> Sequence[Item]:
        """Its parts, up to ``pieces`` of them, so that one big item is spread over every core (each
        part's result names the part it did). Most kinds are one piece."""
        return [self]

    # --- how it is reported -------------------------------------------------------------------

    def facts(self, root: str) -> dict[str, Any]:
        """What names it in a report (JSON values): its table's id and name, and where it is."""
        return {"id": self.table_id, "name": self.name, "location": location(root, self.path)}

    def record(self, result: Result) -> dict[str, Any]:
        """What its result says in a report (JSON values); for a dry run, each file that would go."""
        data: dict[str, Any] = {"files": result.files, "bytes": result.bytes, "error": result.error}
        if result.listing:
            data["would_delete"] = [{"path": path, "size": size} for path, size in result.listing]
        return data

    def shown(self, result: Result, dry_run: bool) -> bool:
        """Whether the report has a line for it (every planned item, by default)."""
        return True

    def said(self, root: str, result: Result, files: str) -> str:
        """Its line of a report's text, after its table's id and name; ``files``: its result's
        counts in words (or ``FAILED`` and why)."""
        return files

    def counted(self, result: Result) -> int:
        """What it adds to its kind's ``{n}`` in the summary's line (``tallied``)."""
        return 1

    @classmethod
    def tally(cls, done: Sequence[tuple[Item, Result]], dry_run: bool) -> str | None:
        """Its kind's line of a report's summary, from the items that went well (None: no line)."""
        if not done or cls.tallied is None:
            return None
        would, did, what = cls.tallied
        return f"{would if dry_run else did} " + what.format(n=sum(i.counted(r) for i, r in done), items=len(done))

    # --- what its result records --------------------------------------------------------------

    def claims(self) -> tuple[tuple[str, str, str], ...]:
        """What a result of it records, each as its run's start names it (a table id, a write id,
        ``<table id>/<version>``), as a refusal says the run did not plan it, and by name: the ledger
        records a result only of what its run set out to do, and none that two results name."""
        return ()

    def recorded(self) -> tuple[Any, ...]:
        """What the ledger records done when a result of it went well, besides a purge: write ids,
        or a trim's version number."""
        return ()


@dataclass(frozen=True)
class Purge(Item):
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
    section: ClassVar[str] = "instances"

    def refusal(self) -> str | None:
        """Why an executor must not purge it (None: it may)."""
        if self.dropped_at > self.watermark:
            return "refused: not behind its watermark, so still restorable"
        return None

    def facts(self, root: str) -> dict[str, Any]:
        return {**super().facts(root), "resumed": self.resumed}

    def claims(self) -> tuple[tuple[str, str, str], ...]:
        return ((self.table_id, f"a purge of table id {self.table_id}", f"the purge of table id {self.table_id}"),)

    def said(self, root: str, result: Result, files: str) -> str:
        return files + ("  (resumed)" if self.resumed else "")


class _Folders(Item):
    """A kind that deletes whole write folders of one instance, split by folder (each kind declares
    ``folders`` where its fields put it)."""
    folders: tuple[Folder, ...]
    whose: ClassVar[str]
    """How a refusal names an item of the kind (``an expiry``)."""

    def busy(self) -> bool:
        return bool(self.folders)

    def recorded(self) -> tuple[str, ...]:
        return tuple(f.write_id for f in self.folders)

    def claims(self) -> tuple[tuple[str, str, str], ...]:
        return tuple((w, f"to delete write folder {w} ({self.whose}'s result names it)", f"write folder {w}")
                     for w in self.recorded())

    def split(self, pieces: int) -> Sequence[Item]:
        size = max(1, -(-len(self.folders) // max(1, pieces)))
        parts: list[dict[str, Any]] = [{"folders": self.folders[start:start + size], "part": n}
                                       for n, start in enumerate(range(0, len(self.folders), size))]
        return [replace(self, **part) for part in parts]


@dataclass(frozen=True)
class Expiry(_Folders):
    """An instance's old versions (R13): its mark moved (``mark``; None if it stays), ``versions``
    expired with it, and ``folders`` no unexpired version names, to delete."""
    mark: int | None
    versions: tuple[int, ...]
    folders: tuple[Folder, ...]

    kind: ClassVar[str] = EXPIRE
    section: ClassVar[str] = "expired"
    whose: ClassVar[str] = "an expiry"
    tallied = ("would expire", "expired", "{n} old version(s) of {items} table(s)")

    def facts(self, root: str) -> dict[str, Any]:
        here = location(root, self.path)
        return {**super().facts(root), "mark": iso(self.mark), "versions_expired": list(self.versions),
                "folders": [location(here, f.path) for f in self.folders]}

    def said(self, root: str, result: Result, files: str) -> str:
        mark = f"mark -> {iso(self.mark)}, expired version(s) {', '.join(map(str, self.versions))}; " \
            if self.mark is not None else ""
        return f"{mark}{len(self.folders)} write folder(s): {files}"

    def counted(self, result: Result) -> int:
        return len(self.versions)


@dataclass(frozen=True)
class Trim(Item):
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
    section: ClassVar[str] = "trimmed"
    on_driver: ClassVar[bool] = True
    tallied = ("would delete", "deleted", "{n} file(s) that {items} replace(s) removed, by key")

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

    def facts(self, root: str) -> dict[str, Any]:
        return {**super().facts(root), "version": self.version}

    def said(self, root: str, result: Result, files: str) -> str:
        return f"files version {self.version} removed: {files}"

    def counted(self, result: Result) -> int:
        return result.files

    def claims(self) -> tuple[tuple[str, str, str], ...]:
        removed = f"the files version {self.version} of table id {self.table_id} removed"
        return ((self._id, f"to delete {removed}", removed),)

    def recorded(self) -> tuple[int, ...]:
        return (self.version,)


@dataclass(frozen=True)
class Sweep(_Folders):
    """An instance's abandoned writes (R15): given up on record, their ``folders`` to delete."""
    folders: tuple[Folder, ...]

    kind: ClassVar[str] = SWEEP
    section: ClassVar[str] = "swept"
    whose: ClassVar[str] = "a sweep"
    tallied = ("would sweep", "swept", "{n} abandoned write(s)")

    @property
    def writes(self) -> tuple[tuple[str, str], ...]:
        """(write id, why) of each write it gives up."""
        return tuple((f.write_id, f.why) for f in self.folders)

    def facts(self, root: str) -> dict[str, Any]:
        return {**super().facts(root), "writes": [{"id": w, "why": why} for w, why in self.writes]}

    def said(self, root: str, result: Result, files: str) -> str:
        return f"swept write(s) {', '.join(f'{w} ({why})' for w, why in self.writes)}: {files}"

    def counted(self, result: Result) -> int:
        return len(self.folders)


@dataclass(frozen=True)
class StragglerScan(Item):
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
    section: ClassVar[str] = "stragglers"
    tallied = ("would clean", "cleaned", "{items} write folder(s) of stragglers")

    @property
    def _id(self) -> str:
        return self.folder.write_id

    def facts(self, root: str) -> dict[str, Any]:
        return {"id": self.table_id, "name": self.name, "write_id": self.folder.write_id,
                "folder": location(location(root, self.path), self.folder.path)}

    def record(self, result: Result) -> dict[str, Any]:
        return {**super().record(result), "left": result.left}

    def shown(self, result: Result, dry_run: bool) -> bool:
        """A folder that held only what its version names had nothing cleaned: not reported."""
        return bool(result.files or result.error or result.left)

    def said(self, root: str, result: Result, files: str) -> str:
        left = f", {result.left} younger than the grace period left" if result.left else ""
        return f"stragglers of write {self.folder.write_id}: {files}{left}"

    def claims(self) -> tuple[tuple[str, str, str], ...]:
        scan = f"straggler scan of write {self.folder.write_id}"
        return ((self.folder.write_id, f"a {scan}", f"the {scan}"),)

    def recorded(self) -> tuple[str, ...]:
        return (self.folder.write_id,)


@dataclass(frozen=True)
class ForeignScan(Item):
    """For a dry run: files in a location outside every write folder that no version names. No
    vacuum deletes them (only a purge of the whole instance does); they are reported."""
    adopted: str | None = None
    """The digest of the files adopted as its version 1, which are not foreign."""
    named: frozenset[str] = frozenset()

    kind: ClassVar[str] = FOREIGN
    section: ClassVar[str] = "foreign"
    deletes: ClassVar[bool] = False
    dry_run_only: ClassVar[bool] = True

    def record(self, result: Result) -> dict[str, Any]:
        return {"files": [{"path": path, "size": size} for path, size in result.listing or ()]}

    def shown(self, result: Result, dry_run: bool) -> bool:
        return dry_run and bool(result.listing)

    def said(self, root: str, result: Result, files: str) -> str:
        return (f"{len(result.listing or ())} foreign file(s) in {location(root, self.path)} outside every write "
                "folder (never swept; they go only if the table is purged)")


Work = Item


# --- what comes back: each item's result, and the receipt parts it wrote ----------------------

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
    item: Item | None
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
