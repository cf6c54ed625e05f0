"""The integrity scrub, as the ledger sees it: what to look for, and what a look found (R20, R25, R27).

``ScrubPlan.looks()`` turns the ledger's state, taken once at the start, into one
``vacuum_work.scrub.Look`` a location (and ``expectations()`` into the brief of each that a first
listing's digest is compared with): the files its unexpired, unerased versions name (a live
instance's and a dropped, restorable one's; a pin keeps the versions it holds unexpired, R21), each
with its recorded size, and the files receipts say were deleted there (or found gone). The looks
are made one location at a time, reading each file list once, so a caller that sends them on in
batches (``vacuum_work.scrub.batches``) never holds the warehouse's list.

``ScrubPlan.finish(findings)`` asks the ledger again before it records anything: a file missing
now that the ledger no longer expects (a vacuum expired, trimmed or purged it while the scrub
looked, by the rules) is not missing, only counted as ``gone_by_rule``. Each file still missing is
named with the versions it breaks (and whether its instance is dropped); each one back after a
receipt names the runs that deleted it and the erasure requests it was in. Then one
``ScrubFinished`` is recorded; a scrub stopped before that records nothing.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections import defaultdict
from datetime import datetime
from typing import Any, Callable, Collection, Iterable, Iterator

import attrs
from vacuum_work.leaves import unpack as unpack_part
from vacuum_work.scrub import Expected, Finding, Look, pack, scrub_root

from ..clock import Micros, iso_utc
from ..core.model import State
from ..core.scrubs import RecordScrub, ScrubFinished, findings_bytes
from ..core.tables import Instance
from ..core.versions import Version, manifest, version_key
from ..errors import InvalidArgument, LedgerCorrupt
from ..persistence.contract import EventStore
from ..runner import Runner
from .erasures import erasure_set
from .history import history

_HEX64 = re.compile(r"[0-9a-f]{64}")

FilesOf = Callable[[Version], list[tuple[str, int]]]
"""A version's ``(path, size)`` pairs, paths relative to its instance's location (the catalog's)."""


@attrs.frozen
class Missing:
    """A file that should be there and is not, or not at its size (``found``: -1 for not at all)."""
    key: str
    size: int
    found: int
    table_id: str
    name: str
    versions: tuple[int, ...]
    """The versions it breaks: the unexpired, unerased versions of its instance that name it."""
    dropped: bool
    """Its instance is dropped (so the file breaks an undrop, not a read)."""

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, value_serializer=lambda _i, _a, v: list(v) if isinstance(v, tuple) else v)


@attrs.frozen
class Resurrected:
    """A file a receipt says was deleted (or a run found gone) that is there again."""
    key: str
    size: int
    runs: tuple[str, ...]
    requests: tuple[str, ...]
    """The erasure requests whose erasure set named it (R25): data a person asked to be erased is back."""

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "size": self.size, "runs": list(self.runs), "requests": list(self.requests)}


@attrs.frozen
class ScrubReport:
    """What a scrub found, as recorded by event ``seq``."""
    scrub_id: str
    database: str | None
    seq: int
    as_of: int
    checked_at: datetime
    locations: int
    files: int
    bytes: int
    absent_checked: int
    root: str
    missing: tuple[Missing, ...]
    resurrected: tuple[Resurrected, ...]
    errors: tuple[tuple[str, str], ...]
    """``(location, why)`` of each location that could not be looked at."""
    gone_by_rule: int
    """Files missing at the look that the ledger no longer expected by the end (a vacuum's, by the rules)."""

    @property
    def ok(self) -> bool:
        """Nothing missing, nothing back, every location looked at."""
        return not (self.missing or self.resurrected or self.errors)

    def to_dict(self) -> dict[str, Any]:
        return {"scrub_id": self.scrub_id, "database": self.database, "seq": self.seq, "as_of": self.as_of,
                "checked_at": iso_utc(self.checked_at), "ok": self.ok, "locations": self.locations,
                "files": self.files, "bytes": self.bytes, "absent_checked": self.absent_checked, "root": self.root,
                "missing": [m.to_dict() for m in self.missing],
                "resurrected": [r.to_dict() for r in self.resurrected],
                "errors": [{"location": loc, "error": why} for loc, why in self.errors],
                "gone_by_rule": self.gone_by_rule}

    def summary(self) -> str:
        scope = "the warehouse" if self.database is None else f"database {self.database}"
        lines = [f"scrub {self.scrub_id} of {scope} (event #{self.seq}): {self.files} files "
                 f"({self.bytes} bytes) in {self.locations} locations checked present, {self.absent_checked} "
                 f"checked gone; root {self.root[:16]}..."]
        if self.ok:
            lines.append("  everything the ledger names is there at its size, and nothing it deleted is back")
        for m in self.missing:
            state = "missing" if m.found < 0 else f"{m.found} bytes, recorded {m.size}"
            what = f"dropped {m.name}" if m.dropped else m.name
            lines.append(f"  MISSING {m.key} ({state}): breaks {what} (id {m.table_id}) version(s) "
                         f"{', '.join(map(str, m.versions))}")
        for r in self.resurrected:
            why = f"; erasure request(s) {', '.join(r.requests)}" if r.requests else ""
            lines.append(f"  RESURRECTED {r.key} ({r.size} bytes): deleted by run(s) {', '.join(r.runs)}{why}")
        for loc, why in self.errors:
            lines.append(f"  NOT CHECKED {loc}: {why}")
        if self.gone_by_rule:
            lines.append(f"  ({self.gone_by_rule} files went by the rules while it looked: not missing)")
        return "\n".join(lines)


def expected(state: State, inst: Instance, files_of: FilesOf) -> dict[str, int]:
    """``path -> recorded size`` of every file an unexpired, unerased version of ``inst`` names
    (nothing for a purged instance). An erased version is refused to every reader (R25), so its
    files are the vacuum's to delete; a file an unerased version names too stays expected."""
    if inst.purged_at is not None:
        return {}
    found: dict[str, int] = {}
    for v in reversed(_kept(state, inst)):  # oldest first: a path's size is the same in every version naming it
        found.update(files_of(v))
    return found


def _kept(state: State, inst: Instance) -> list[Version]:
    erased = state.erasures.versions
    return [v for v in state.data.unexpired(inst.id) if version_key(inst.id, v.number) not in erased]


def _one_list(state: State, inst: Instance) -> str | None:
    """The digest of the one stored list of files that is all ``inst`` expects (one unexpired,
    unerased version, made by one commit that removed nothing), or None."""
    kept = _kept(state, inst)
    if len(kept) != 1 or state.data.removals(kept[0]):
        return None
    parts = state.data.parts(kept[0])
    return parts[0][1] if len(parts) == 1 else None


def _in_scope(inst: Instance | None, database: str | None) -> bool:
    return database is None or (inst is not None and inst.database == database)


def _location(key: str) -> str:
    """A key's location: its first folder (an instance's location is its id, ``tables.location_path``)."""
    return key.split("/", 1)[0]


def _finding_problem(f: Finding) -> str | None:
    """What makes ``f`` no look's finding (None: nothing)."""
    if not isinstance(f, Finding) or not isinstance(f.location, str) or not f.location:
        return "is not a vacuum_work.scrub.Finding of a location"
    if not (isinstance(f.root, str) and _HEX64.fullmatch(f.root)):
        return "has no Merkle root (64 hex digits)"
    if len(f.missing) > f.files or len(f.resurrected) > f.absent_checked:
        return "names more found than was looked at"
    prefix = f.location + "/"
    keys = [m[0] for m in f.missing] + [r[0] for r in f.resurrected]
    if not all(isinstance(key, str) and key.startswith(prefix) for key in keys):
        return "names files outside the location"
    return None


class ScrubPlan:
    """One scrub, from the state at its start to its record: see the module docstring."""

    def __init__(self, runner: Runner, store: EventStore, state: State, root: str, files_of: Callable[[State], FilesOf],
                 database: str | None, started_at: Micros) -> None:
        self.root = root
        self.database = database
        self.scrub_id = uuid.uuid4().hex[:16]
        self.as_of = state.seq
        self.started_at = started_at
        self._runner, self._store, self._state, self._files_of = runner, store, state, files_of
        self._part = functools.lru_cache(maxsize=8)(self._read_part)
        self._scoped: tuple[dict[str, Instance], dict[str, list[tuple[str, str]]]] | None = None

    def _read_part(self, digest: str) -> list[tuple[str, int]]:
        data = self._store.read_blob(digest)
        try:
            if data is None:
                raise ValueError("it is missing")
            return unpack_part(data)
        except ValueError as exc:
            raise LedgerCorrupt(f"{self._store.path}: the receipt part {digest} cannot be read ({exc}); restore the "
                                "ledger file from a backup") from None

    def _receipted(self, state: State) -> dict[str, list[tuple[str, str]]]:
        """``location -> [(run id, part digest)]`` of every part of deleted (or found gone) files:
        a part of one location is placed without reading it, one spanning several is read once."""
        where: dict[str, list[tuple[str, str]]] = defaultdict(list)
        receipts = state.receipts
        for part in [*receipts.parts.values(), *receipts.absent.values()]:
            first, last = _location(part.first), _location(part.last)
            spanned = {first} if first == last else {_location(k) for k, _ in self._part(part.digest)}
            for loc in spanned:
                if _in_scope(state.tables.instance(loc), self.database):
                    where[loc].append((part.run_id, part.digest))
        return where

    def expectations(self) -> Iterator[Expected]:
        """What each location in scope should hold, in brief (the digest of its files), sorted by
        location, made as asked for: the first look compares a listing's digest with it. A location
        that holds one commit's list of files, and no receipt's, is not even read: its commit
        carries the digest."""
        state = self._state
        instances, receipted = self._scope()
        for loc in self.locations():
            inst = instances.get(loc)
            carried = None if inst is None or loc in receipted else _one_list(state, inst)
            if carried is not None:
                yield Expected(loc, carried, 0)
            else:
                present, gone = self._files(loc)
                yield Expected(loc, manifest(present)[0], len(gone))

    def looks(self, locations: Collection[str] | None = None) -> Iterator[Look]:
        """One look a location in scope (or each of ``locations``), with its files, sorted by
        location, made as asked for."""
        for loc in self.locations() if locations is None else sorted(locations):
            present, gone = self._files(loc)
            yield Look(loc, pack(present), pack(gone), len(present) + len(gone))

    def locations(self) -> list[str]:
        """Every location in scope, sorted."""
        instances, receipted = self._scope()
        return sorted(set(instances) | set(receipted))

    def _scope(self) -> tuple[dict[str, Instance], dict[str, list[tuple[str, str]]]]:
        if self._scoped is None:
            state = self._state
            instances = {inst.path: inst for inst in state.tables.all_instances()
                         if inst.purged_at is None and _in_scope(inst, self.database)}
            self._scoped = instances, self._receipted(state)
        return self._scoped

    def _files(self, loc: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """A location's files expected there and those receipts say are gone, ``(path relative to
        it, size)`` sorted (each file list read once)."""
        state = self._state
        instances, receipted = self._scope()
        inst = instances.get(loc)
        present = {} if inst is None else expected(state, inst, self._files_of(state))
        gone: dict[str, int] = {}
        prefix = loc + "/"
        for _run, digest in receipted.get(loc, ()):
            for key, size in self._part(digest):
                if key.startswith(prefix) and key[len(prefix):] not in present:
                    gone.setdefault(key[len(prefix):], size)
        return sorted(present.items()), sorted(gone.items())

    def finish(self, findings: Iterable[Finding]) -> ScrubReport:
        """Ask the ledger again about what was found missing, then record the scrub (see the module
        docstring) and return what it found."""
        findings = sorted(findings, key=lambda f: f.location)
        for f in findings:
            problem = _finding_problem(f)
            if problem is not None:
                raise InvalidArgument(f"the finding of location {f.location!r} {problem}: no executor's look could "
                                      "have found that; nothing was recorded")
        looked = [f for f in findings if f.error is None]
        state = self._runner.refresh()
        missing, gone_by_rule = self._still_missing(state, looked)
        resurrected = self._resurrected(state, looked)
        errors = tuple((f.location, f.error) for f in findings if f.error is not None)
        digest, data = None, None
        if missing or resurrected or errors:
            digest, data = findings_bytes({"missing": [m.to_dict() for m in missing],
                                           "resurrected": [r.to_dict() for r in resurrected],
                                           "errors": [{"location": loc, "error": why} for loc, why in errors]})
        root = scrub_root(looked)
        event = ScrubFinished(self.scrub_id, self.database, self.as_of, self.started_at, len(findings),
                              sum(f.files for f in looked), sum(f.bytes for f in looked),
                              sum(f.absent_checked for f in looked), root, len(missing), len(resurrected),
                              len(errors), digest, gone_by_rule)
        self._runner.execute(RecordScrub(event, data))
        # Its number and time are the store's: found back by its id among the latest scrubs.
        entry = next(e for e in reversed(history(self._runner, type="ScrubFinished").last(16))
                     if e.data["scrub_id"] == self.scrub_id)
        return ScrubReport(self.scrub_id, self.database, entry.seq, self.as_of, entry.time, event.locations,
                           event.files, event.bytes, event.absent_checked, root, tuple(missing), tuple(resurrected),
                           errors, gone_by_rule)

    def _still_missing(self, state: State, looked: list[Finding]) -> tuple[list[Missing], int]:
        files_of = self._files_of(state)
        found: list[Missing] = []
        gone = 0
        for f in looked:
            if not f.missing:
                continue
            inst = state.tables.instance(f.location)
            now = {} if inst is None else expected(state, inst, files_of)
            kept = [] if inst is None else [(v.number, {p for p, _ in files_of(v)}) for v in _kept(state, inst)]
            for key, size, size_found in f.missing:
                path = key[len(f.location) + 1:]
                if inst is None or path not in now:
                    gone += 1
                    continue
                versions = tuple(sorted(n for n, paths in kept if path in paths))
                found.append(Missing(key, size, size_found, inst.id, inst.name, versions, inst.dropped_at is not None))
        return found, gone

    def _resurrected(self, state: State, looked: list[Finding]) -> list[Resurrected]:
        back = [(key, size) for f in looked for key, size in f.resurrected]
        if not back:
            return []
        wanted = {key for key, _ in back}
        runs: dict[str, set[str]] = defaultdict(set)
        receipts = state.receipts
        for part in [*receipts.parts.values(), *receipts.absent.values()]:
            if any(part.first <= key <= part.last for key in wanted):
                for key, _ in self._part(part.digest):
                    if key in wanted:
                        runs[key].add(part.run_id)
        requests: dict[str, set[str]] = defaultdict(set)
        for r in state.erasures.requests.values():
            for key, _ in erasure_set(self._store, r):
                if key in wanted:
                    requests[key].add(r.request_id)
        return [Resurrected(key, size, tuple(sorted(runs[key])), tuple(sorted(requests[key]))) for key, size in back]
