"""Writes, versions and retention marks: everything about one table instance's data (R11-R14).

A **write** is registered before its first file (``begin_write``): an id, a folder of
its own under the instance's location (``_writes/<id>``, which Spark's own listing
ignores), and a lease. It ends committed (a new version), aborted, or swept (the
vacuum's sweep, issue 9). A **version** names exactly its files: ``append`` is the
previous version's files plus the write's, ``overwrite`` the write's alone,
``replace`` the previous version's files minus some it names (``removes``) plus the write's
(a partition overwrite, an erasure's rewrite), ``restore`` the files of an earlier version,
``adopt`` the files a table held before it was versioned. No write deletes anything (R11):
the files a replace removes stay named by the versions before it, until a vacuum expires them;
then they go by key (a *trim*, ``RemovalsDeleted``) once no unexpired version names them, since
their write folder stays as long as other files of it are named. The file list of a write is a
content-addressed attachment stored with its commit event (a *manifest*), so the
folded state holds only its digest, count and size, however many files it has.

The **retention mark** is fetch-and-set and only moves forward (R12); it snaps to the
commit time of an actual version and never reaches the current one's (R6). A version
committed at or before it is expired: never read or restored again.

A version also records its **partition columns** (the ``col=value`` folders its writer put its
files in), because they are the table's, not only its files': a version of no files (an erasure
that matched every row) has none to read them from, and the next partition overwrite or append
must still write the table's layout (which a new version keeps: ``_partitioning``).

Why one concern and one stream per instance for all of this (DESIGN.md lists
"versions and marks" and "writes and sweeps" apart): a commit is one fact that both
ends a write and makes a version, and every decision here (commit, renew, abort,
sweep, restore, mark) must be ordered against the others of the same instance. One
``data:<id>`` stream gives that order with one condition (R4); splitting it would need
two events for one fact, or a handler that writes two slices.
"""

from __future__ import annotations

import hashlib
import posixpath
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Union

import attrs
import orjson

from ..clock import MAX_MICROS, Micros, Seconds, iso
from ..errors import (
    Conflict, InvalidArgument, InvalidTime, PinRefused, SchemaMismatch, TableNotFound, VersionErased, VersionExpired,
    VersionNotFound, WriteClosed, WriteExpired,
)
from .concern import Concern, Decision, corrupt, mapping
from .events import UPCASTERS, as_ids, event
from .streams import WAREHOUSE_STREAM, catalog_streams, data_stream
from .tables import Instance, name_of, require_live

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State
    from .pins import PinRecord

WRITES_FOLDER = "_writes"
"""Write folders live under ``<location>/_writes/``: Spark's listing skips names that start with
``_``, so a reader of the plain folder never sees uncommitted data."""

DEFAULT_WRITE_LEASE_SECONDS = 6 * 3600
WRITE_MODES = ("append", "overwrite", "replace")
EXTENDING = ("append", "replace")
"""The modes whose version keeps (some of) its base's files: the chain of bases is walked to list them."""
_LONGEST_LEASE = 100 * 366 * 86_400
MAX_BYTES = 2 ** 63 - 1
"""The most bytes a file, or a version in all, may have: the log and its snapshots keep sizes as
signed 64-bit integers (as SQLite and Parquet do), so a larger one is refused, not truncated."""


def write_folder(write_id: str) -> str:
    """A write's folder, relative to its instance's location: derived from its id, so two writes
    (whose ids are unique) can never share one (R14). The fold holds every ``WriteBegun`` to it."""
    return f"{WRITES_FOLDER}/{write_id}"


def is_plain_id(write_id: object) -> bool:
    """A write id usable as one folder name: no separator, no ``.``/``..``, nothing hidden."""
    return isinstance(write_id, str) and bool(write_id) and "/" not in write_id and "\\" not in write_id \
        and "\x00" not in write_id and not write_id.startswith((".", "_"))


def manifest(files: Iterable[tuple[str, int]]) -> tuple[str, bytes]:
    """The canonical bytes of a file list, ``[[path, size], ...]`` sorted by path, and their
    SHA-256 in hex: what a commit event names, and what ``verify`` re-hashes."""
    data = orjson.dumps([[path, size] for path, size in sorted(files)])
    return hashlib.sha256(data).hexdigest(), data


def parse_manifest(data: bytes) -> list[tuple[str, int]]:
    return [(path, size) for path, size in orjson.loads(data)]


def read_manifest(data: bytes, chunk: int = 32 << 10) -> Iterator[tuple[str, int]]:
    """The pairs of a stored file list, in order, parsed about ``chunk`` bytes (a few hundred files) at a time: what
    ``parse_manifest`` returns, for a reader that takes each pair once (the vacuum's driver deletes
    the files the ledger knows by key, R20), so that its memory does not grow with the list.
    ``orjson.loads`` of a whole list builds a parse tree of about 15 times its size before the first
    pair: 10 MB for the 0.7 MB list of 10,000 files, 200 MB for 200,000 in one commit. A chunk ends
    where a pair does: at a ``],["`` outside every string. One inside a path leaves the chunk ending
    inside a string, which does not parse, so the cut moves on. ``ValueError`` where the bytes are
    not a JSON list of pairs."""
    if len(data) <= chunk:
        yield from ((path, size) for path, size in orjson.loads(data))
        return
    if data[:1] != b"[" or data[-1:] != b"]":
        raise ValueError("a file list is not a JSON list")
    at, end = 1, len(data) - 1
    while at < end:
        span = chunk
        while True:
            cut = data.find(b'],["', at + span, end)
            stop = end if cut < 0 else cut + 1
            try:
                pairs = orjson.loads(b"[" + data[at:stop] + b"]")
                break
            except orjson.JSONDecodeError:
                if cut < 0:
                    raise
                span = 2 * (stop - at)  # a cut inside a path: a longer chunk, never one cut at a time
        yield from ((path, size) for path, size in pairs)
        at = stop + 1


def manifest_problem(state: State, v: Version, files: list[tuple[str, int]]) -> str | None:
    """What is wrong with the file list a committed version names, or None (R14, for ``verify``:
    the fold holds only the list's digest). A write's files lie inside its own folder, adopted ones
    outside every write folder; each is named once, with a size; and the event's counts are the
    list's. A validly chained event that breaks this is a corrupt log, not history."""
    inside = None
    if v.write_id is not None:
        w = state.data.writes.get(v.write_id)
        if w is None:
            return f"it names write {v.write_id}, which was never begun"
        inside = w.folder
    try:
        checked = _check_files(files, inside, "its file list")
    except InvalidArgument as exc:
        return str(exc)
    base = state.data.version(v.table_id, v.base) if v.mode in EXTENDING and v.base is not None else None
    own_files = v.files - (base.files - v.removed_files if base else 0)
    own_bytes = v.bytes - (base.bytes - v.removed_bytes if base else 0)
    if (len(checked), sum(s for _, s in checked)) != (own_files, own_bytes):
        return (f"the event counts {own_files} files and {own_bytes} bytes, the list it names holds "
                f"{len(checked)} and {sum(s for _, s in checked)}")
    return None


def removal_problem(v: Version, removed: list[tuple[str, int]], base_files: list[tuple[str, int]]) -> str | None:
    """What is wrong with the list of files a replace version removes from its base, or None (for
    ``verify``, which reads both lists: the fold holds only digests and counts). Each removed file is
    a file of the base, with the base's size, named once; the event's counts are the list's."""
    sizes = dict(base_files)
    seen: set[str] = set()
    for path, size in removed:
        if path in seen:
            return f"its list of removed files names {path} twice"
        seen.add(path)
        if sizes.get(path) != size:
            return f"it removes {path} ({size} bytes), which is not a file of version {v.base}, its base"
    if (len(removed), sum(s for _, s in removed)) != (v.removed_files, v.removed_bytes):
        return (f"the event counts {v.removed_files} removed files and {v.removed_bytes} bytes, the list it names "
                f"holds {len(removed)} and {sum(s for _, s in removed)}")
    return None


# --- events --------------------------------------------------------------------------------

def as_numbers(value: Iterable[int]) -> tuple[int, ...]:
    """A converter for version-number lists: JSON gives lists, events hold tuples."""
    return tuple(value)


def as_columns(value: Iterable[str] | None) -> tuple[str, ...] | None:
    """A converter for a list of column names that may be unknown (None): JSON gives lists."""
    return None if value is None else tuple(value)


@event("WriteBegun")
@attrs.frozen
class WriteBegun:
    """``folder`` is relative to the instance's location; the lease runs until ``expires_at``."""
    write_id: str
    table_id: str
    folder: str
    lease_seconds: Seconds
    expires_at: Micros


@event("WriteRenewed")
@attrs.frozen
class WriteRenewed:
    write_id: str
    table_id: str
    expires_at: Micros


@event("WriteAborted")
@attrs.frozen
class WriteAborted:
    write_id: str
    table_id: str


@event("VersionCommitted", version=4)
@attrs.frozen
class VersionCommitted:
    """Version ``number`` of the instance: ``mode`` append, overwrite, replace or adopt. ``manifest``
    is the digest of the new files' list (``files`` of them, ``bytes`` in all), stored alongside.
    ``schema`` is the whole version's columns as the engine that wrote it describes them (for
    Spark, a StructType's JSON), read back with every read of the version (None: not recorded).
    A replace also names ``removes``, the digest of the list of its base's files it does not keep
    (``removed_files`` of them, ``removed_bytes`` in all), stored alongside too: a second manifest,
    so a version of a big table that rewrites three files names three, not the thousands it keeps.
    ``partition_by`` is the whole version's partition columns, outermost first (``()``: not
    partitioned; None: not known, as in a commit of an earlier release, or adopted files)."""
    table_id: str
    number: int
    mode: str
    write_id: str | None
    manifest: str
    files: int
    bytes: int
    schema: str | None = None
    removes: str | None = None
    removed_files: int = 0
    removed_bytes: int = 0
    partition_by: tuple[str, ...] | None = attrs.field(default=None, converter=as_columns)


UPCASTERS[("VersionCommitted", 1)] = lambda data: {**data, "schema": None}
UPCASTERS[("VersionCommitted", 2)] = lambda data: {**data, "removes": None, "removed_files": 0, "removed_bytes": 0}
UPCASTERS[("VersionCommitted", 3)] = lambda data: {**data, "partition_by": None}


@event("VersionRestored")
@attrs.frozen
class VersionRestored:
    """Version ``number`` names exactly the files of version ``restored`` (Delta's RESTORE)."""
    table_id: str
    number: int
    restored: int


@event("RetentionMarkAdvanced")
@attrs.frozen
class RetentionMarkAdvanced:
    """The instance's retention mark moves forward to ``to`` (a version's commit time); ``run_id``
    names the vacuum that moved it (None: by hand)."""
    table_id: str
    to: Micros
    run_id: str | None = None


@event("WritesSwept")
@attrs.frozen
class WritesSwept:
    """A vacuum gave these writes up (aborted, or their lease ran out): from now on their folders
    may be deleted, and a commit or a renewal of any of them is refused (R15)."""
    table_id: str
    run_id: str
    write_ids: tuple[str, ...] = attrs.field(converter=as_ids)


@event("StragglersDeleted")
@attrs.frozen
class StragglersDeleted:
    """A vacuum deleted the files in these committed writes' folders that their versions do not
    name (older than the grace period); the folders now hold exactly what was committed."""
    table_id: str
    run_id: str
    write_ids: tuple[str, ...] = attrs.field(converter=as_ids)
    files: int = 0
    bytes: int = 0


@event("RemovalsDeleted")
@attrs.frozen
class RemovalsDeleted:
    """A vacuum deleted the files these replace ``versions`` of the instance removed (those in write
    folders that stay; a folder that went whole took its own): no unexpired version names them (R13)."""
    table_id: str
    run_id: str
    versions: tuple[int, ...] = attrs.field(converter=as_numbers)
    files: int = 0
    bytes: int = 0


@event("WriteFoldersDeleted")
@attrs.frozen
class WriteFoldersDeleted:
    """A vacuum deleted these write folders of the instance: no unexpired version named them."""
    table_id: str
    run_id: str
    write_ids: tuple[str, ...] = attrs.field(converter=as_ids)
    files: int = 0
    bytes: int = 0


# --- state ---------------------------------------------------------------------------------

@attrs.frozen
class Write:
    id: str
    table_id: str
    folder: str
    began_at: Micros
    lease_seconds: int
    expires_at: Micros
    status: str = "open"
    """``open``, ``committed``, ``aborted`` or ``swept``."""
    ended_at: Micros | None = None
    version: int | None = None
    """The version that committed it."""
    deleted_at: Micros | None = None
    """When a vacuum deleted its folder (no unexpired version named it any more, or it was swept)."""
    cleaned_at: Micros | None = None
    """When a vacuum deleted the stragglers in its (committed) folder."""
    aborted_at: Micros | None = None

    def sweep_reason(self, now: Micros) -> str | None:
        """Why a sweep may take this write now (R15), or None: aborted, or its lease ran out."""
        if self.deleted_at is not None:
            return None
        if self.status == "aborted":
            return "aborted"
        if self.status == "open" and self.expires_at <= now:
            return "lease expired"
        return None

    @property
    def is_open(self) -> bool:
        return self.status == "open"


@attrs.frozen
class Version:
    table_id: str
    number: int
    committed_at: Micros
    mode: str
    """``append``, ``overwrite``, ``replace``, ``adopt`` or ``restore``."""
    write_id: str | None
    base: int | None
    """The version whose files this one extends (append, replace) or repeats (restore)."""
    manifest: str | None
    files: int
    bytes: int
    """Totals of the whole version, not only of its own write."""
    superseded_at: Micros | None = None
    """When the next version was committed: the moment this one stopped being current."""
    schema: str | None = None
    """The digest of its schema (``Data.schemas`` holds the text, once per distinct schema)."""
    removes: str | None = None
    """A replace: the digest of the list of its base's files it does not name."""
    removed_files: int = 0
    removed_bytes: int = 0
    trimmed_at: Micros | None = None
    """A replace: when a vacuum recorded the files it removed deleted (``RemovalsDeleted``)."""
    partition_by: tuple[str, ...] | None = None
    """Its partition columns, outermost first (``()``: none); None where no commit said (an earlier
    release's, adopted files): a reader then reads them from the files' folders."""


def version_key(table_id: str, number: int) -> str:
    return f"{table_id}/{number}"


@attrs.frozen
class Data:
    writes: Mapping[str, Write] = mapping(Write)        # write id -> Write
    versions: Mapping[str, Version] = mapping(Version)  # "<table id>/<number>" -> Version
    heads: Mapping[str, int] = mapping()                # table id -> number of the current version
    marks: Mapping[str, Micros] = mapping()             # table id -> the retention mark
    schemas: Mapping[str, str] = mapping()              # schema digest -> its text (few: tables rarely change)

    def schema_of(self, v: Version) -> str | None:
        return None if v.schema is None else self.schemas[v.schema]

    def version(self, table_id: str, number: int) -> Version | None:
        return self.versions.get(version_key(table_id, number))

    def current(self, table_id: str) -> Version | None:
        head = self.heads.get(table_id)
        return None if head is None else self.versions[version_key(table_id, head)]

    def history(self, table_id: str) -> list[Version]:
        """Every version, newest first."""
        return [self.versions[version_key(table_id, n)] for n in range(self.heads.get(table_id, 0), 0, -1)]

    def mark(self, table_id: str) -> Micros | None:
        return self.marks.get(table_id)

    def is_expired(self, v: Version) -> bool:
        """R12: committed at or before the mark, unless it is the current version."""
        mark = self.marks.get(v.table_id)
        return mark is not None and v.committed_at <= mark and v.number != self.heads.get(v.table_id)

    def as_of(self, table_id: str, time: Micros) -> Version | None:
        """The newest version committed at or before ``time``."""
        return next((v for v in self.history(table_id) if v.committed_at <= time), None)

    def chain(self, v: Version) -> list[Version]:
        """The commits whose file lists make up a version, newest first: itself (or, for a restore,
        the version it restores) and, through appends and replaces, their bases."""
        found: list[Version] = []
        while True:
            if v.mode == "restore":
                assert v.base is not None  # a restore always names the version it restores
                v = self.versions[version_key(v.table_id, v.base)]
                continue
            found.append(v)
            if v.mode not in EXTENDING or v.base is None:
                return found
            v = self.versions[version_key(v.table_id, v.base)]

    def parts(self, v: Version) -> list[tuple[str | None, str]]:
        """The (write id, manifest digest) pairs whose files make up a version, newest first. A version
        with a replace in its chain names these files minus those its ``removals`` list."""
        return [(c.write_id, c.manifest) for c in self.chain(v) if c.manifest is not None]  # no restore in a chain

    def removals(self, v: Version) -> list[str]:
        """The digests of the lists of files the replaces in a version's chain removed: the version's
        files are its ``parts``' files minus these. No file a replace removed comes back further up
        its chain: a write names only files in its own folder, and each write commits once (R14)."""
        return [c.removes for c in self.chain(v) if c.removes is not None]

    def unexpired(self, table_id: str, mark: Micros | None = None) -> list[Version]:
        """The versions a mark (the current one, or ``mark`` if given) leaves unexpired, newest first:
        every version committed after it, and the current one."""
        mark = self.marks.get(table_id) if mark is None else mark
        head = self.heads.get(table_id)
        return [v for v in self.history(table_id) if mark is None or v.committed_at > mark or v.number == head]

    def referenced_writes(self, table_id: str, mark: Micros | None = None) -> set[str]:
        """The writes whose files an unexpired version names (under the current mark, or under
        ``mark`` if given): their folders must stay (R13). A write a replace took some, or all, of
        the files of stays referenced while a version whose chain holds it is unexpired: the core
        holds no file lists, so a folder goes whole only once no unexpired version's chain reaches
        its write; files a replace removed from a folder still referenced go by key (``due_removals``)."""
        return {w for v in self.unexpired(table_id, mark) for w, _ in self.parts(v) if w is not None}

    def due_removals(self, table_id: str, mark: Micros | None = None) -> list[Version]:
        """The replaces of an instance whose removed files no unexpired version names (under the
        current mark, or ``mark``), not yet recorded deleted, oldest first: a vacuum deletes those
        files by key (R13). Decided without file lists, so conservatively: a version names a file a
        replace R removed only if its chain holds the commit of the file's write (which is in the
        chain of R's base) and not R itself (nothing R removed comes back later in a chain: each
        write commits once, R14). So R's removals are due when every unexpired version either has R
        in its chain, or shares no commit with R's base's chain (a later overwrite). Once due they
        stay due: a new version extends an unexpired one's chain or starts one of its own, and a
        mark only moves forward. An unexpired restore of a version before R keeps them waiting."""
        pending = [v for v in self.history(table_id) if v.removes is not None and v.trimmed_at is None]
        if not pending:
            return []
        chains = [{c.number for c in self.chain(u)} for u in self.unexpired(table_id, mark)]
        due = []
        for r in reversed(pending):
            assert r.base is not None  # a replace always has a base (the fold checks it)
            before = {c.number for c in self.chain(self.versions[version_key(table_id, r.base)])}
            if all(r.number in chain or not chain & before for chain in chains):
                due.append(r)
        return due

    def unreferenced_writes(self, table_id: str, mark: Micros | None = None) -> list[Write]:
        """Committed writes whose folders are still there and that no unexpired version names."""
        named = self.referenced_writes(table_id, mark)
        return sorted((w for w in self.writes.values() if w.table_id == table_id and w.status == "committed"
                       and w.deleted_at is None and w.id not in named), key=lambda w: w.began_at)

    def sweepable(self, table_id: str, now: Micros) -> list[Write]:
        """Writes whose folders a sweep deletes now: aborted, or open with a lease that ran out (R15),
        and those an earlier sweep recorded but whose folders it did not live to delete (R10)."""
        return sorted((w for w in self.writes.values() if w.table_id == table_id and (w.sweep_reason(now) or (
            w.status == "swept" and w.deleted_at is None))), key=lambda w: (w.began_at, w.id))

    def straggler_candidates(self, table_id: str, cutoff: Micros) -> list[Write]:
        """Committed writes, committed at or before ``cutoff`` (now minus the grace), whose folders
        are there and were never cleaned: where a late task's file may sit unnamed."""
        return sorted((w for w in self.writes.values() if w.table_id == table_id and w.status == "committed"
                       and w.deleted_at is None and w.cleaned_at is None and (w.ended_at or 0) <= cutoff),
                      key=lambda w: (w.began_at, w.id))

    def known_manifests(self, table_id: str) -> tuple[str, ...]:
        """The file lists of an instance's commits (and adopted files) whose folders are not recorded
        deleted: every file the ledger knows lies in its location."""
        found = {v.manifest for v in self.history(table_id) if v.manifest is not None and
                 (v.write_id is None or self.writes[v.write_id].deleted_at is None)}
        return tuple(sorted(found))

    def write_manifest(self, w: Write) -> str | None:
        """The digest of the file list a committed write's version named (its own files only)."""
        v = None if w.version is None else self.version(w.table_id, w.version)
        return None if v is None else v.manifest

    def open_writes(self, table_id: str | None = None) -> list[Write]:
        found = [w for w in self.writes.values() if w.is_open and (table_id is None or w.table_id == table_id)]
        return sorted(found, key=lambda w: (w.began_at, w.id))

    def mark_for(self, table_id: str, until: Micros) -> Micros | None:
        """Where a mark asked to move to ``until`` lands: the commit time of the newest version
        committed at or before ``until``, never the current one's (R6, R12)."""
        head = self.heads.get(table_id)
        return next((v.committed_at for v in self.history(table_id) if v.number != head and v.committed_at <= until),
                    None)

    def retention_allows(self, table_id: str, until: Micros, below: int | None = None) -> Micros | None:
        """The mark a retention allows: the commit time of the newest version that stopped being
        current (was superseded) at or before ``until`` (now minus the retention). A version so
        marked, and every older one, has been overwritten for at least the retention: an
        overwritten version stays restorable that long after it was overwritten. ``below``: only
        versions numbered below it (a pinned version and every newer one stay unexpired, R21)."""
        return next((v.committed_at for v in self.history(table_id) if v.superseded_at is not None
                     and v.superseded_at <= until and (below is None or v.number < below)), None)


# --- commands ------------------------------------------------------------------------------

@attrs.frozen
class BeginWrite:
    name: str
    write_id: str
    now: Micros
    lease_seconds: int = DEFAULT_WRITE_LEASE_SECONDS


@attrs.frozen
class RenewWrite:
    write_id: str
    now: Micros


@attrs.frozen
class AbortWrite:
    write_id: str


@attrs.frozen
class CommitWrite:
    write_id: str
    files: tuple[tuple[str, int], ...]
    mode: str = "append"
    schema: str | None = None
    """The new version's schema (None: not recorded; an append then keeps the current one's)."""
    merge_schema: bool = False
    """An append whose schema differs from the current one's records ``schema``, the union of both
    that the writer computed from ``merged_from``: refused if the table's schema moved since."""
    merged_from: str | None = None
    removes: tuple[str, ...] = ()
    """A replace: the paths of the base version's files the new version does not name."""
    base: int | None = None
    """A replace: the number of the version ``removes`` refers to, which must still be current. An
    overwrite: the version it was decided on, which must still be current (None: whatever is)."""
    base_files: tuple[tuple[str, int], ...] = ()
    """A replace: every file of version ``base``, read from its stored lists by the caller (the core
    holds only digests and counts; the counts are checked against these)."""
    partition_by: tuple[str, ...] | None = None
    """The partition columns the files were written by (``()``: none; None: not said, see ``_partitioning``)."""
    now: Micros = 0
    """When the committer decided (the ledger's clock): what an erasure's fence is measured against."""
    fence: str | None = None
    """The erasure request whose fence this commit is the rewrite of (it alone commits under it)."""


@attrs.frozen
class AdoptFiles:
    """The files a table held before it was versioned become its version 1."""
    name: str
    files: tuple[tuple[str, int], ...]


@attrs.frozen
class RestoreVersion:
    name: str
    version: int | None = None
    as_of: Micros | None = None
    now: Micros = 0


@attrs.frozen
class AdvanceRetentionMark:
    name: str
    to: Micros
    now: Micros


Command = Union[BeginWrite, RenewWrite, AbortWrite, CommitWrite, AdoptFiles, RestoreVersion, AdvanceRetentionMark]


# --- decisions -----------------------------------------------------------------------------

def _write(state: State, write_id: object) -> Write:
    found = state.data.writes.get(write_id) if isinstance(write_id, str) else None
    if found is None:
        raise InvalidArgument(f"there is no write with id {write_id!r} (see open_writes)")
    return found


def check_open(state: State, w: Write, doing: str) -> None:
    """Refuse to act on a write that has ended, saying what ended it and what to do (R14)."""
    name = name_of(state, w.table_id)
    if w.status == "swept":
        why = f"it had been aborted at {iso(w.aborted_at)}" if w.aborted_at is not None \
            else f"its lease ran out at {iso(w.expires_at)}"
        raise WriteExpired(f"cannot {doing} write {w.id} to {name}: it was swept at {iso(w.ended_at)} ({why}) and "
                           "its folder may already be deleted; the job must write again")
    if w.status == "aborted":
        raise WriteClosed(f"cannot {doing} write {w.id} to {name}: it was aborted at {iso(w.ended_at)}; "
                          "begin a new write")
    if w.status == "committed":
        raise WriteClosed(f"cannot {doing} write {w.id} to {name}: it was committed as version {w.version} at "
                          f"{iso(w.ended_at)}; a committed write's folder is never written again: begin a new write")


def _check_lease(seconds: object) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= _LONGEST_LEASE:
        raise InvalidArgument(f"a write's lease must be a whole number of seconds from 1 to a century, not {seconds!r}")
    return seconds


def _lease_end(now: Micros, seconds: int, what: str) -> Micros:
    """When a lease from ``now`` runs out; refused (before anything is written) if that is past the
    last time a datetime can show, which only a clock near the end of time gives."""
    until = now + seconds * 1_000_000
    if until > MAX_MICROS:
        raise InvalidTime(f"cannot {what}: a lease of {seconds}s from {iso(now)} would run past "
                          f"{iso(MAX_MICROS)}, the last time the ledger can record; check the clock")
    return until


def _begin(state: State, cmd: BeginWrite) -> Decision:
    inst = require_live(state, cmd.name, "begin a write to")
    lease = _check_lease(cmd.lease_seconds)
    if not is_plain_id(cmd.write_id) or cmd.write_id in state.data.writes:
        raise InvalidArgument(f"write id {cmd.write_id!r} is empty, taken, or not a plain folder name")
    until = _lease_end(cmd.now, lease, f"begin a write to {inst.name}")
    began = WriteBegun(cmd.write_id, inst.id, write_folder(cmd.write_id), lease, until)
    stream = data_stream(inst.id)
    # The warehouse's stream too: a move and a begin have one order, so the folder handed out is
    # under the root the write will be committed against (a move refuses open writes).
    return Decision(((stream, began),), catalog_streams(inst.database) | {stream, WAREHOUSE_STREAM}, cmd.write_id)


def _renew(state: State, cmd: RenewWrite) -> Decision:
    w = _write(state, cmd.write_id)
    check_open(state, w, "renew")
    check_not_moved(state, w, "renew")
    stream = data_stream(w.table_id)
    until = _lease_end(cmd.now, w.lease_seconds, f"renew write {w.id}")
    return Decision(((stream, WriteRenewed(w.id, w.table_id, until)),), frozenset({stream}), until)


def _abort(state: State, cmd: AbortWrite) -> Decision:
    """Aborting twice, or a write already swept, changes nothing; a committed one is refused."""
    w = _write(state, cmd.write_id)
    stream = data_stream(w.table_id)
    if w.status in ("aborted", "swept"):
        return Decision((), frozenset({stream}), w.id)
    check_open(state, w, "abort")
    return Decision(((stream, WriteAborted(w.id, w.table_id)),), frozenset({stream}), w.id)


def _check_files(files: object, inside: str | None, what: str) -> tuple[tuple[str, int], ...]:
    """Paths relative to the location, plain (no ``..``, no leading ``/``), each once, with a size;
    inside the write's own folder when ``inside`` is given, outside every write folder when not."""
    if isinstance(files, (str, bytes)) or not isinstance(files, Iterable):
        raise InvalidArgument(f"{what}: files must be (path, size) pairs, got {type(files).__name__}")
    checked: dict[str, int] = {}
    for entry in files:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
            raise InvalidArgument(f"{what}: each file must be a (path, size) pair, got {entry!r}")
        path, size = entry
        if not isinstance(path, str) or not path or "\x00" in path or path.startswith("/") or \
                posixpath.normpath(path) != path or path.split("/")[0] == "..":
            raise InvalidArgument(f"{what}: {path!r} is not a plain path relative to the table's location")
        if inside is not None and not path.startswith(inside + "/"):
            raise InvalidArgument(
                f"{what}: {path} is outside the write's folder {inside}/; a version names only files its "
                "own writes put in their folders (so no copy or move can make two versions share a file)")
        if inside is None and (path == WRITES_FOLDER or path.startswith(WRITES_FOLDER + "/")):
            raise InvalidArgument(f"{what}: {path} is inside a write folder; only files outside them are adopted")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_BYTES:
            raise InvalidArgument(f"{what}: the size of {path} must be a whole number of bytes from 0 to "
                                  f"2**63-1, got {size!r}")
        if path in checked:
            raise InvalidArgument(f"{what}: {path} is named twice")
        checked[path] = size
    return tuple(sorted(checked.items()))


def _total(sizes: Iterable[int], what: str) -> int:
    total = sum(sizes)
    if total > MAX_BYTES:
        raise InvalidArgument(f"{what}: the version would hold {total} bytes, more than the 2**63-1 the ledger "
                              "can record")
    return total


def check_not_moved(state: State, w: Write, doing: str) -> None:
    """A write begun before the warehouse moved has its folder under the old root, where no vacuum
    looks: it is never committed (R10). Its job must write again, under the new root."""
    moved = state.warehouse.moved_at
    if moved is not None and w.began_at < moved:
        raise WriteExpired(f"cannot {doing} write {w.id} to {name_of(state, w.table_id)}: the warehouse moved to "
                           f"{state.warehouse.root} at {iso(moved)}, after the write began, so its files are under "
                           "the old root; the job must write again")


def _commit(state: State, cmd: CommitWrite) -> Decision:
    w = _write(state, cmd.write_id)
    check_open(state, w, "commit")
    check_not_moved(state, w, "commit")
    if cmd.mode not in WRITE_MODES:
        raise InvalidArgument(f"write mode must be one of {', '.join(WRITE_MODES)}, not {cmd.mode!r}")
    inst = state.tables.instance(w.table_id)
    if inst is None or not inst.is_live:
        raise TableNotFound(f"cannot commit write {w.id}: its table {name_of(state, w.table_id)} is no longer live "
                            "(dropped since the write began); undrop it and write again")
    check_unfenced(state, inst, cmd.now, cmd.fence)
    what = f"commit of write {w.id}"
    files = _check_files(cmd.files, w.folder, what)
    digest, data = manifest(files)
    current = state.data.current(w.table_id)
    size = _total((s for _, s in files), what)
    if cmd.mode == "append" and current is not None:
        _total((size, current.bytes), what)
    attachments = [(digest, data)]
    removes, removed_files, removed_bytes = None, 0, 0
    if cmd.mode == "replace":
        removed = _removed(state, current, cmd, files, f"{what} (replace) to {name_of(state, w.table_id)}")
        removes, removes_data = manifest(removed)
        removed_files, removed_bytes = len(removed), sum(s for _, s in removed)
        assert current is not None  # _removed refused a table without a version
        _total((size, current.bytes - removed_bytes), what)
        if removes != digest:
            attachments.append((removes, removes_data))
    elif cmd.removes or cmd.base_files or (cmd.base is not None and cmd.mode != "overwrite"):
        raise InvalidArgument(f"{what}: only mode='replace' removes files of the current version; an {cmd.mode} "
                              "names none to remove")
    elif cmd.base is not None and (0 if current is None else current.number) != cmd.base:
        # An overwrite decided on what version ``base`` held (an erasure emptying the table): one that
        # landed since would be lost by it, so the caller decides again.
        raise Conflict(f"{what}: the overwrite was decided on version {cmd.base}, but version "
                       f"{0 if current is None else current.number} is current now; decide again on it",
                       stream=data_stream(w.table_id))
    number = state.data.heads.get(w.table_id, 0) + 1
    schema = _check_schema(state, current, cmd, f"{name_of(state, w.table_id)} (write {w.id})")
    partition_by = _partitioning(current, cmd, bool(files), f"{what} to {name_of(state, w.table_id)}")
    committed = VersionCommitted(w.table_id, number, cmd.mode, w.id, digest, len(files), size, schema, removes,
                                 removed_files, removed_bytes, partition_by)
    stream = data_stream(w.table_id)
    # The warehouse stream too: a move racing the commit lands first (and the commit is refused) or after.
    reads = catalog_streams(state.tables.instances[w.table_id].database) | {stream, WAREHOUSE_STREAM}
    return Decision(((stream, committed),), reads, number, tuple(attachments))


def _removed(state: State, current: Version | None, cmd: CommitWrite, files: tuple[tuple[str, int], ...],
             what: str) -> list[tuple[str, int]]:
    """The files a replace removes, with their sizes: each a file of the current version (the base the
    caller read), named once. Removing every file while adding none is refused: a version that
    empties the table is an overwrite with no files, which says so on record (a replace that empties
    it is more likely a writer that lost its files than one that meant it)."""
    if current is None:
        raise InvalidArgument(f"{what}: the table has no version yet, so no files to replace; commit with "
                              "mode='append' or 'overwrite'")
    if cmd.base != current.number:
        # The caller read another version's files: the API reads the current one's again and retries.
        raise Conflict(f"{what}: the removed files were read from version {cmd.base}, but version "
                       f"{current.number} is current now; read its files and commit again",
                       stream=data_stream(current.table_id))
    base = {}
    for entry in cmd.base_files:
        if not (isinstance(entry, tuple) and len(entry) == 2):
            raise InvalidArgument(f"{what}: the base version's files are (path, size) pairs, not {entry!r}")
        base[entry[0]] = entry[1]
    if (len(base), sum(base.values())) != (current.files, current.bytes):
        raise InvalidArgument(f"{what}: the base files given are not version {current.number}'s ({len(base)} files "
                              f"of {sum(base.values())} bytes; it holds {current.files} of {current.bytes})")
    if isinstance(cmd.removes, (str, bytes)) or not isinstance(cmd.removes, tuple):
        raise InvalidArgument(f"{what}: removes is a list of paths of the current version's files, not "
                              f"{type(cmd.removes).__name__}")
    removed: dict[str, int] = {}
    for path in cmd.removes:
        if not isinstance(path, str) or path not in base:
            raise InvalidArgument(f"{what}: {path!r} is not a file of version {current.number}, the current one; "
                                  "removes names only paths its files list gives (relative to the table's location)")
        if path in removed:
            raise InvalidArgument(f"{what}: {path} is named twice in removes")
        removed[path] = base[path]
    if len(removed) == len(base) and base and not files:
        raise InvalidArgument(f"{what}: it removes every file of version {current.number} and adds none; to empty "
                              "the table, commit an overwrite with no files (it says so on record)")
    return sorted(removed.items())


def _partitioning(current: Version | None, cmd: CommitWrite, has_files: bool, what: str) -> tuple[str, ...] | None:
    """The partition columns the new version records. An append or a replace adds files to the
    table's, so it keeps the table's layout: other columns are refused (a version of two layouts
    cannot be overwritten by partition, nor named in Spark SQL). An overwrite replaces the table and
    may set others; one that names none keeps the table's if it has no files (an erasure that
    emptied the table: the table is still partitioned as it was). None stays None: not known."""
    given = cmd.partition_by
    if given is not None:
        if isinstance(given, (str, bytes)) or not isinstance(given, tuple) or \
                not all(isinstance(c, str) and c and "\x00" not in c for c in given):
            raise InvalidArgument(f"{what}: partition_by is a list of column names, not {repr(given)[:200]}")
        if len(set(given)) != len(given) or sum(len(c) for c in given) > 1_000_000:
            raise InvalidArgument(f"{what}: partition_by names a column twice, or runs past 1 MB: {repr(given)[:200]}")
    kept = None if current is None else current.partition_by
    if cmd.mode in EXTENDING and current is not None:
        if given is not None and kept is not None and given != kept:
            raise InvalidArgument(f"{what}: its files are {_layout_text(given)}, and the table (version "
                                  f"{current.number}) is {_layout_text(kept)}: {'an' if cmd.mode == 'append' else 'a'} "
                                  f"{cmd.mode} keeps the table's layout; write by its columns, or overwrite the table")
        return kept if given is None else given
    return kept if given is None and not has_files else given


def _layout_text(columns: Iterable[str]) -> str:
    """A layout in words: ``partitioned by day, hour``, or ``not partitioned``."""
    listed = ", ".join(columns)
    return f"partitioned by {listed}" if listed else "not partitioned"


def schema_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _check_schema(state: State, current: Version | None, cmd: CommitWrite, what: str) -> str | None:
    """The schema the new version records. An append keeps the table's columns: another schema is
    refused, naming both, unless the writer asked to merge (and merged from the schema that is
    still the table's). An overwrite may change them; an append without one keeps the current."""
    schema = cmd.schema
    if schema is not None:
        if not isinstance(schema, str) or not schema or len(schema) > 1_000_000:
            raise InvalidArgument(f"{what}: a schema is the columns' description as text (at most 1 MB), got "
                                  f"{type(schema).__name__}")
        try:
            if not isinstance(orjson.loads(schema), dict):
                raise ValueError("not an object")
        except ValueError:
            raise InvalidArgument(f"{what}: the schema is not a JSON object: {schema[:80]!r}") from None
    if not isinstance(cmd.merge_schema, bool):
        raise InvalidArgument(f"merge_schema must be True or False, got {cmd.merge_schema!r}")
    if cmd.mode not in EXTENDING or current is None or current.schema is None:
        return schema
    table = state.data.schema_of(current)
    if schema is None or schema == table:
        return table
    # A replace (a partition overwrite, an erasure's rewrite) keeps the table's other files, so its
    # columns: say what it is, and no merge (a partition overwrite takes none).
    doing = "append to" if cmd.mode == "append" else "replace files of"
    if not cmd.merge_schema:
        remedy = "Write with merge_schema=True to record the union of both, or" if cmd.mode == "append" else \
            "A replace keeps the table's other files, so it keeps its columns: write with them, or commit"
        raise SchemaMismatch(f"cannot {doing} {what}: its columns are not the table's. The table (version "
                             f"{current.number}): {table}; this write: {schema}. {remedy} mode='overwrite' to "
                             "replace them")
    if cmd.merged_from != table:
        raise SchemaMismatch(f"cannot {doing} {what}: the table's schema changed while this write ran (it is "
                             f"now, as of version {current.number}: {table}); the job must merge again")
    return schema


def _adopt(state: State, cmd: AdoptFiles) -> Decision:
    inst = require_live(state, cmd.name, "adopt files into")
    if state.data.heads.get(inst.id):
        raise InvalidArgument(f"{inst.name} already has versions: only an unversioned table's files are adopted")
    what = f"adopting the files of {inst.name}"
    files = _check_files(cmd.files, None, what)
    digest, data = manifest(files)
    adopted = VersionCommitted(inst.id, 1, "adopt", None, digest, len(files), _total((s for _, s in files), what))
    stream = data_stream(inst.id)
    return Decision(((stream, adopted),), catalog_streams(inst.database) | {stream}, 1, ((digest, data),))


def check_unfenced(state: State, inst: Instance, now: Micros, holder: str | None = None) -> None:
    """R25: no commit or restore changes the current version of a table an erasure's fence holds
    (its engine is recording the request: ``ErasureInProgress``), but the request's own rewrite. The
    erasures concern says whether one holds (it is asked here); the fence is on the data stream every
    commit and restore reads (R4), so the two have one order."""
    held = state.erasures.fence_refusal(inst.name, inst.id, state.landing(now), holder)
    if held is not None:
        raise held


def choose(state: State, inst: Instance, version: int | None = None, as_of: Micros | None = None) -> Version:
    """The version a read or a restore asks for, or a refusal before any file is read (R12)."""
    data = state.data
    if version is not None and as_of is not None:
        raise InvalidArgument("give a version or a time (as_of), not both")
    current = data.current(inst.id)
    if current is None:
        raise VersionNotFound(f"{inst.name} has no versions yet (nothing was committed to it)")
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidArgument(f"a version is a whole number, not {version!r}")
        chosen = data.version(inst.id, version)
        if chosen is None:
            raise VersionNotFound(f"{inst.name} has no version {version}: its versions are 1 to {current.number}")
    elif as_of is not None:
        chosen = data.as_of(inst.id, as_of)
        if chosen is None:
            raise VersionNotFound(_none_at(state, inst, as_of))
    else:
        return current
    erased = state.erasures.version_refusal(inst.name, inst.id, chosen.number)
    if erased is not None:
        raise VersionErased(erased[0], request_id=erased[1])
    if data.is_expired(chosen):
        oldest = min((v.number for v in data.history(inst.id) if not data.is_expired(v)), default=current.number)
        raise VersionExpired(
            f"{inst.name} version {chosen.number} (committed at {iso(chosen.committed_at)}) is expired: it is at or "
            f"before the table's retention mark {iso(data.mark(inst.id))}, so its files may be gone; the oldest "
            f"version still readable is {oldest}")
    return chosen


def _none_at(state: State, inst: Instance, as_of: Micros) -> str:
    """Why no version of this instance was current at ``as_of``: it did not exist yet (and the name
    belonged to another instance, which the caller probably means), or nothing was committed yet."""
    if inst.created_at > as_of:
        earlier = [i for i in state.tables.dropped_instances(name=inst.name) if i.created_at <= as_of]
        then = f"; the name then belonged to instance {earlier[0].id}, dropped at {iso(earlier[0].dropped_at)}: " \
               f"undrop it (undrop_table({inst.name!r}, table_id={earlier[0].id!r}, new_name=...)) to read it" \
            if earlier else ""
        return f"{inst.name} (id {inst.id}) did not exist at {iso(as_of)}: it was created at {iso(inst.created_at)}{then}"
    first = state.data.version(inst.id, 1)
    assert first is not None
    return f"{inst.name} had no version at {iso(as_of)}: version 1 was committed at {iso(first.committed_at)}"


def _restore(state: State, cmd: RestoreVersion) -> Decision:
    inst = require_live(state, cmd.name, "restore")
    if cmd.version is None and cmd.as_of is None:
        raise InvalidArgument(f"restoring {inst.name} needs version= (a number) or as_of= (a time): which earlier "
                              "version to make current (versions lists them)")
    chosen = choose(state, inst, cmd.version, cmd.as_of)
    head = state.data.heads[inst.id]
    if chosen.number == head:
        raise InvalidArgument(f"{inst.name} version {head} is the current version already; nothing to restore")
    check_unfenced(state, inst, cmd.now)
    stream = data_stream(inst.id)
    restored = VersionRestored(inst.id, head + 1, chosen.number)
    # The catalog's streams order it with an erasure request of the table too (R25: on its database's stream).
    return Decision(((stream, restored),), catalog_streams(inst.database) | {stream}, head + 1)


def _advance_mark(state: State, cmd: AdvanceRetentionMark) -> Decision:
    """R12: fetch-and-set, snapped to an actual commit time, never the current version's."""
    inst = require_live(state, cmd.name, "advance the retention mark of")
    if cmd.to > cmd.now:
        raise InvalidTime(f"cannot advance the retention mark of {inst.name} to {iso(cmd.to)}: that is past the "
                          f"ledger's current time {iso(cmd.now)}")
    stream = data_stream(inst.id)
    current = state.data.mark(inst.id)
    target = state.data.mark_for(inst.id, cmd.to)
    if target is None or (current is not None and target <= current):
        return Decision((), frozenset({stream}), current)
    over = _pin_over(state.data, state.pins.holding_versions(inst.id, cmd.now), inst.id, target)
    if over is not None:
        pin, number = over
        held = state.data.versions[version_key(inst.id, number)]
        raise PinRefused(f"cannot advance the retention mark of {inst.name} to {iso(target)}: pin {pin.id} holds "
                         f"version {held.number} (committed at {iso(held.committed_at)}) until "
                         f"{iso(pin.expires_at)} (R21); advance it to before that version, or release the pin")
    return Decision(((stream, RetentionMarkAdvanced(inst.id, target)),), frozenset({stream}), current)


def _pin_over(data: Data, pin: PinRecord | None, table_id: str, mark: Micros) -> tuple[PinRecord, int] | None:
    """``pin`` (the one on the instance's oldest pinned version) and that version's number, if a
    retention mark at ``mark`` would expire it, measured as the pins concern says: by version number (R21)."""
    reached = data.as_of(table_id, mark)  # the newest version the mark covers
    # (``Pins.holding_versions`` never gives a pin without a version: that test is for the type checker)
    if pin is None or pin.version is None or reached is None or reached.number < pin.version:
        return None
    return pin, pin.version


def advance_mark(table_id: str, to: Micros, run_id: str) -> tuple[str, RetentionMarkAdvanced]:
    """A vacuum's mark advance (it has chosen ``to`` by ``Data.retention_allows``)."""
    return data_stream(table_id), RetentionMarkAdvanced(table_id, to, run_id)


def sweep(state: State, table_id: str, run_id: str, write_ids: tuple[str, ...],
          now: Micros) -> tuple[str, WritesSwept]:
    """The record that a vacuum gives writes up: each must be aborted or past its lease (R15)."""
    for write_id in write_ids:
        w = state.data.writes.get(write_id)
        if w is None or w.table_id != table_id or not w.sweep_reason(now):
            raise InvalidArgument(f"vacuum {run_id} cannot sweep write {write_id}: it is not aborted, and its "
                                  "lease has not run out")
    return data_stream(table_id), WritesSwept(table_id, run_id, write_ids)


def stragglers_deleted(state: State, table_id: str, run_id: str, write_ids: tuple[str, ...], files: int,
                       size: int) -> tuple[str, StragglersDeleted]:
    for write_id in write_ids:
        w = state.data.writes.get(write_id)
        if w is None or w.table_id != table_id or w.status != "committed":
            raise InvalidArgument(f"vacuum {run_id} cannot record stragglers of write {write_id}: it is not a "
                                  "committed write of that table")
    return data_stream(table_id), StragglersDeleted(table_id, run_id, write_ids, files, size)


def removals_deleted(state: State, table_id: str, run_id: str, versions: tuple[int, ...], files: int,
                     size: int) -> tuple[str, RemovalsDeleted]:
    """The record that a vacuum deleted the files replaces removed: only of replaces whose removals
    are due (``Data.due_removals``) and not recorded already."""
    due = {v.number for v in state.data.due_removals(table_id)}
    for number in versions:
        if number not in due:
            raise InvalidArgument(f"vacuum {run_id} cannot record deleting the files version {number} of {table_id} "
                                  "removed: it is no replace, an unexpired version still names them, or they were "
                                  "recorded deleted already")
    return data_stream(table_id), RemovalsDeleted(table_id, run_id, versions, files, size)


def folders_deleted(state: State, table_id: str, run_id: str, write_ids: tuple[str, ...], files: int,
                    size: int) -> tuple[str, WriteFoldersDeleted]:
    """The record that a vacuum deleted write folders: only of ended writes no unexpired version names."""
    named = state.data.referenced_writes(table_id)
    for write_id in write_ids:
        w = state.data.writes.get(write_id)
        if w is None or w.table_id != table_id or w.is_open or write_id in named:
            raise InvalidArgument(f"vacuum {run_id} cannot record deleting write folder {write_id} of {table_id}: "
                                  "it is open, or an unexpired version names it")
    return data_stream(table_id), WriteFoldersDeleted(table_id, run_id, write_ids, files, size)


# --- fold ----------------------------------------------------------------------------------

def _fold_write(b: Builder, write_id: str, seq: int) -> Write:
    w: Write | None = b.data.writes.get(write_id)
    if w is None:
        raise corrupt(f"event #{seq} names write {write_id}, which was never begun")
    return w


def _on_begun(b: Builder, e: WriteBegun, seq: int, time: Micros) -> None:
    if e.write_id in b.data.writes:
        raise corrupt(f"event #{seq} begins write {e.write_id} a second time")
    if not is_plain_id(e.write_id) or e.folder != write_folder(e.write_id):
        raise corrupt(f"event #{seq} begins write {e.write_id!r} in folder {e.folder!r}, not its own "
                      f"{WRITES_FOLDER}/<id> (R14: no two writes share a folder)")
    inst = b.tables.instances.get(e.table_id)
    if inst is None or not inst.is_live:
        raise corrupt(f"event #{seq} begins a write to {e.table_id}, which is not a live table")
    b.data.writes[e.write_id] = Write(e.write_id, e.table_id, e.folder, time, e.lease_seconds, e.expires_at)


def _on_renewed(b: Builder, e: WriteRenewed, seq: int, time: Micros) -> None:
    w = _fold_write(b, e.write_id, seq)
    if not w.is_open:
        raise corrupt(f"event #{seq} renews write {w.id}, which is {w.status} (R14)")
    b.data.writes[w.id] = attrs.evolve(w, expires_at=e.expires_at)


def _on_aborted(b: Builder, e: WriteAborted, seq: int, time: Micros) -> None:
    w = _fold_write(b, e.write_id, seq)
    if not w.is_open:
        raise corrupt(f"event #{seq} aborts write {w.id}, which is {w.status}")
    b.data.writes[w.id] = attrs.evolve(w, status="aborted", ended_at=time, aborted_at=time)


def _next_version(b: Builder, table_id: str, number: int, seq: int, time: Micros) -> Version | None:
    """Check a new version's number, mark the current one superseded, and return that one."""
    data = b.data
    head = data.heads.get(table_id, 0)
    if number != head + 1:
        raise corrupt(f"event #{seq} makes version {number} of {table_id}, whose next version is {head + 1}")
    if not head:
        return None
    previous: Version = data.versions[version_key(table_id, head)]
    data.versions[version_key(table_id, head)] = attrs.evolve(previous, superseded_at=time)
    return previous


def _on_committed(b: Builder, e: VersionCommitted, seq: int, time: Micros) -> None:
    data = b.data
    inst = b.tables.instances.get(e.table_id)
    if inst is None or not inst.is_live:
        raise corrupt(f"event #{seq} commits a version of {e.table_id}, which is not a live table")
    if e.write_id is not None:
        w = _fold_write(b, e.write_id, seq)
        if not w.is_open or w.table_id != e.table_id:
            raise corrupt(f"event #{seq} commits write {w.id}, which is {w.status} or not of {e.table_id} (R14)")
        moved = b.warehouse.moves.get("moved_at")
        if moved is not None and w.began_at < moved:
            raise corrupt(f"event #{seq} commits write {w.id}, begun before the warehouse moved (R10)")
        data.writes[w.id] = attrs.evolve(w, status="committed", ended_at=time, version=e.number)
    elif e.mode != "adopt" or e.number != 1:
        raise corrupt(f"event #{seq} commits a version of {e.table_id} without a write")
    previous = _next_version(b, e.table_id, e.number, seq, time)
    files, size = e.files, e.bytes
    base = None
    if e.mode == "replace":
        _check_replace(e, previous, seq)
        assert previous is not None  # _check_replace refused a replace of nothing
        files, size = files + previous.files - e.removed_files, size + previous.bytes - e.removed_bytes
        base = previous.number
    elif e.removes is not None or e.removed_files or e.removed_bytes:
        raise corrupt(f"event #{seq} is an {e.mode} commit that removes files: only a replace does")
    if e.mode == "append" and previous is not None:
        files, size, base = files + previous.files, size + previous.bytes, previous.number
    digest = None
    if e.schema is not None:
        digest = schema_digest(e.schema)
        if digest not in data.schemas:
            data.schemas[digest] = e.schema
    data.versions[version_key(e.table_id, e.number)] = Version(e.table_id, e.number, time, e.mode, e.write_id, base,
                                                        e.manifest, files, size, schema=digest, removes=e.removes,
                                                        removed_files=e.removed_files,
                                                        removed_bytes=e.removed_bytes, partition_by=e.partition_by)
    data.heads[e.table_id] = e.number


def _check_replace(e: VersionCommitted, previous: Version | None, seq: int) -> None:
    """A replace removes files of the version before it, no more than it holds, and never all of them
    while adding none (``_removed``); ``verify`` checks the lists themselves (``removal_problem``)."""
    if previous is None or e.write_id is None or e.removes is None:
        raise corrupt(f"event #{seq} replaces files of {e.table_id} without a write, a version before it, or a "
                      "list of the files it removes")
    if not (0 <= e.removed_files <= previous.files and 0 <= e.removed_bytes <= previous.bytes):
        raise corrupt(f"event #{seq} removes {e.removed_files} files ({e.removed_bytes} bytes) from version "
                      f"{previous.number}, which holds {previous.files} ({previous.bytes} bytes)")
    if e.removed_files == previous.files and previous.files and not e.files:
        raise corrupt(f"event #{seq} replaces every file of version {previous.number} with none (R11: an "
                      "overwrite empties a table)")


def _on_restored(b: Builder, e: VersionRestored, seq: int, time: Micros) -> None:
    data = b.data
    source = data.versions.get(version_key(e.table_id, e.restored))
    if source is None or data.is_expired(source):
        raise corrupt(f"event #{seq} restores version {e.restored} of {e.table_id}, which does not exist or is "
                      "expired (R12)")
    if b.erasures.version_refusal(e.table_id, e.table_id, e.restored) is not None:
        raise corrupt(f"event #{seq} restores version {e.restored} of {e.table_id}, which an erasure request "
                      "erased (R25)")
    _next_version(b, e.table_id, e.number, seq, time)
    data.versions[version_key(e.table_id, e.number)] = Version(e.table_id, e.number, time, "restore", None, e.restored,
                                                        None, source.files, source.bytes, schema=source.schema,
                                                        partition_by=source.partition_by)
    data.heads[e.table_id] = e.number


def _on_mark(b: Builder, e: RetentionMarkAdvanced, seq: int, time: Micros) -> None:
    data = b.data
    if not isinstance(e.to, int):
        raise TypeError(f"retention mark {e.to!r}")
    current = data.marks.get(e.table_id)
    head = data.heads.get(e.table_id)
    if current is not None and e.to <= current:
        raise corrupt(f"event #{seq} moves the retention mark of {e.table_id} back or nowhere (R12)")
    if head is None or e.to >= data.versions[version_key(e.table_id, head)].committed_at:
        raise corrupt(f"event #{seq} moves the retention mark of {e.table_id} to or past its current version (R12)")
    over = _pin_over(data, b.pins.holding_versions(e.table_id, time), e.table_id, e.to)
    if over is not None:
        pin, number = over
        raise corrupt(f"event #{seq} moves the retention mark of {e.table_id} over version {number}, which "
                      f"pin {pin.id} holds until {iso(pin.expires_at)} (R21)")
    data.marks[e.table_id] = e.to


def _on_folders_deleted(b: Builder, e: WriteFoldersDeleted, seq: int, time: Micros) -> None:
    data = b.data
    named = data.referenced_writes(e.table_id)
    for write_id in e.write_ids:
        w = _fold_write(b, write_id, seq)
        if w.is_open or w.table_id != e.table_id or write_id in named:
            raise corrupt(f"event #{seq} deletes the folder of write {write_id}, which is open or named by an "
                          "unexpired version (R13)")
        data.writes[write_id] = attrs.evolve(w, deleted_at=time)


def _on_removals_deleted(b: Builder, e: RemovalsDeleted, seq: int, time: Micros) -> None:
    data = b.data
    due = {v.number for v in data.due_removals(e.table_id)}
    for number in e.versions:
        v = data.versions.get(version_key(e.table_id, number))
        if v is None or number not in due or v.trimmed_at is not None:
            raise corrupt(f"event #{seq} deletes the files version {number} of {e.table_id} removed: it is no "
                          "replace, an unexpired version still names them, or they were deleted already (R13)")
        data.versions[version_key(e.table_id, number)] = attrs.evolve(v, trimmed_at=time)


def _on_swept(b: Builder, e: WritesSwept, seq: int, time: Micros) -> None:
    data = b.data
    for write_id in e.write_ids:
        w = _fold_write(b, write_id, seq)
        if w.table_id != e.table_id or not w.sweep_reason(time):
            raise corrupt(f"event #{seq} sweeps write {write_id}, which is {w.status} with a lease until "
                          f"{iso(w.expires_at)} (R15)")
        data.writes[write_id] = attrs.evolve(w, status="swept", ended_at=time)


def _on_stragglers(b: Builder, e: StragglersDeleted, seq: int, time: Micros) -> None:
    data = b.data
    for write_id in e.write_ids:
        w = _fold_write(b, write_id, seq)
        if w.status != "committed" or w.table_id != e.table_id:
            raise corrupt(f"event #{seq} deletes stragglers of write {write_id}, which is not committed")
        data.writes[write_id] = attrs.evolve(w, cleaned_at=time)


CONCERN = Concern(
    initial=Data(),
    evolve={
        WritesSwept: _on_swept,
        StragglersDeleted: _on_stragglers,
        WriteBegun: _on_begun,
        WriteRenewed: _on_renewed,
        WriteAborted: _on_aborted,
        VersionCommitted: _on_committed,
        VersionRestored: _on_restored,
        RetentionMarkAdvanced: _on_mark,
        WriteFoldersDeleted: _on_folders_deleted,
        RemovalsDeleted: _on_removals_deleted,
    },
    decide={
        BeginWrite: _begin,
        RenewWrite: _renew,
        AbortWrite: _abort,
        CommitWrite: _commit,
        AdoptFiles: _adopt,
        RestoreVersion: _restore,
        AdvanceRetentionMark: _advance_mark,
    },
)
