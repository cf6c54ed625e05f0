"""What a vacuum did (or, for a dry run, would do): the report ``spark_ops.vacuum`` returns.

Built on the driver from the ledger's order and each work item's outcome; ``summary()``
(and ``str()``) says it in a few lines, ``to_dict()`` in JSON for the CLI.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import attrs

from ledger import FileEntry, format_bytes, format_duration, from_micros, iso_utc
from vacuum_work import Held, Plan, Result, Waiting, location


class _ItemReport:
    """What every item of a vacuum report shares: an error (None when it went well) and, for a
    dry run, the files it would delete."""

    __slots__ = ()
    error: str | None
    would_delete: tuple[FileEntry, ...]

    @property
    def ok(self) -> bool:
        return self.error is None

    def _listed(self, data: dict[str, Any]) -> dict[str, Any]:
        if self.would_delete:
            data["would_delete"] = [{"path": f.path, "size": f.size} for f in self.would_delete]
        return data


@attrs.frozen
class InstanceReport(_ItemReport):
    id: str
    name: str
    location: str
    files: int
    bytes: int
    error: str | None = None
    resumed: bool = False
    would_delete: tuple[FileEntry, ...] = ()
    """For a dry run: each file that would be deleted, with its size."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "location": self.location,
                                "files": self.files, "bytes": self.bytes, "error": self.error,
                                "resumed": self.resumed}
        return self._listed(data)


@attrs.frozen
class ExpiryReport(_ItemReport):
    """What a vacuum did to one table's old versions (R13)."""
    id: str
    name: str
    location: str
    mark: datetime | None
    versions: tuple[int, ...]
    """The versions that expired with this run's mark."""
    folders: tuple[str, ...]
    """The write folders it deleted (or, for a dry run, would delete)."""
    files: int
    bytes: int
    error: str | None = None
    would_delete: tuple[FileEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "location": self.location,
                                "mark": iso_utc(self.mark), "versions_expired": list(self.versions),
                                "folders": list(self.folders), "files": self.files, "bytes": self.bytes,
                                "error": self.error}
        return self._listed(data)


@attrs.frozen
class TrimReport(_ItemReport):
    """The files a replace removed from write folders that stay, deleted by key once no kept version
    named them (R13; an erasure's rewrite leaves such files, R25)."""
    id: str
    name: str
    location: str
    version: int
    """The replace whose removed files these are."""
    files: int
    bytes: int
    error: str | None = None
    would_delete: tuple[FileEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "location": self.location,
                                "version": self.version, "files": self.files, "bytes": self.bytes,
                                "error": self.error}
        return self._listed(data)


@attrs.frozen
class SweepReport(_ItemReport):
    """Abandoned writes of one table a vacuum gave up, and their folders it deleted (R15)."""
    id: str
    name: str
    location: str
    writes: tuple[tuple[str, str], ...]
    """(write id, why: ``aborted`` or ``lease expired``)."""
    files: int
    bytes: int
    error: str | None = None
    would_delete: tuple[FileEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "location": self.location,
                                "writes": [{"id": w, "why": why} for w, why in self.writes],
                                "files": self.files, "bytes": self.bytes, "error": self.error}
        return self._listed(data)


@attrs.frozen
class StragglerReport(_ItemReport):
    """A committed write's folder cleaned of files its version does not name (R15)."""
    id: str
    name: str
    write_id: str
    folder: str
    files: int
    bytes: int
    left: int = 0
    """Unnamed files younger than the grace period: left for a later vacuum."""
    error: str | None = None
    would_delete: tuple[FileEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "write_id": self.write_id, "folder": self.folder,
                                "files": self.files, "bytes": self.bytes, "left": self.left, "error": self.error}
        return self._listed(data)


@attrs.frozen
class VacuumReport:
    run_id: str | None
    dry_run: bool
    watermarks: dict[str, datetime]
    """The watermarks this run advanced (or, for a dry run, would advance), by scope."""
    instances: tuple[InstanceReport, ...]
    resumed_runs: tuple[str, ...]
    duration: float
    busy_runs: tuple[str, ...] = ()
    """Other runs still holding a live lease: their tables were left to them."""
    waiting: tuple[dict[str, Any], ...] = ()
    """Dropped tables not yet due, with when they become due and which retention decided."""
    held: tuple[dict[str, Any], ...] = ()
    """What pins kept from this run (R21): the table, ``purge`` or ``expiry``, the pin and until when."""
    timings: dict[str, float] = attrs.field(factory=dict)
    """Seconds spent planning (with the watermark append), deleting, and recording."""
    expired: tuple[ExpiryReport, ...] = ()
    """Tables whose old versions this run expired, and the write folders it deleted."""
    swept: tuple[SweepReport, ...] = ()
    stragglers: tuple[StragglerReport, ...] = ()
    """Committed write folders this run cleaned of files their versions do not name (only those
    where there was something to delete, or something failed or was left)."""
    foreign: tuple[tuple[str, str, tuple[FileEntry, ...]], ...] = ()
    """For a dry run: (table, location, files) outside every write folder that no version names.
    No vacuum deletes them (only a purge of the whole table does)."""
    trimmed: tuple[TrimReport, ...] = ()
    """Replaces whose removed files this run deleted (or, for a dry run, would delete) by key."""
    listing: str | None = None
    """For a dry run of more than ``listing_threshold`` files: the Parquet dataset holding the whole
    listing (columns ``item``, ``kind``, ``table_id``, ``path``, ``size``); each item's
    ``would_delete`` then holds only the first ``LISTING_SAMPLE`` of its files."""

    @property
    def purged(self) -> list[InstanceReport]:
        return [] if self.dry_run else [i for i in self.instances if i.ok]

    @property
    def _items(self) -> tuple[Any, ...]:
        return (*self.instances, *self.expired, *self.trimmed, *self.swept, *self.stragglers)

    @property
    def failures(self) -> list[Any]:
        return [i for i in self._items if not i.ok]

    @property
    def files(self) -> int:
        return sum(i.files for i in self._items if i.ok)

    @property
    def bytes(self) -> int:
        return sum(i.bytes for i in self._items if i.ok)

    def summary(self) -> str:
        """What the run did (or, for a dry run, would do), in a few lines a person reads."""
        def said(would: str, did: str) -> str:
            return would if self.dry_run else did
        ok = [i for i in self.instances if i.ok]
        if self.run_id is None and not self.dry_run:  # nothing was due: no run was recorded
            lines = ["nothing to vacuum: no dropped table is past its retention, no old version is due to expire "
                     "and no write is due to be swept"]
        else:
            head = "dry run" if self.dry_run else f"vacuum {self.run_id}"
            lines = [f"{head}: {said('would purge', 'purged')} {len(ok)} table(s), "
                     f"{said('would delete', 'deleted')} {self.files} file(s) ({format_bytes(self.bytes)}) in "
                     f"{self.duration:.1f}s"]
        expired = [e for e in self.expired if e.ok]
        if expired:
            lines.append(f"  {said('would expire', 'expired')} {sum(len(e.versions) for e in expired)} old "
                         f"version(s) of {len(expired)} table(s)")
        trimmed = [t for t in self.trimmed if t.ok]
        if trimmed:
            lines.append(f"  {said('would delete', 'deleted')} {sum(t.files for t in trimmed)} file(s) that "
                         f"{len(trimmed)} replace(s) removed, by key")
        if self.swept:
            lines.append(f"  {said('would sweep', 'swept')} {sum(len(s.writes) for s in self.swept if s.ok)} "
                         "abandoned write(s)")
        if self.stragglers:
            lines.append(f"  {said('would clean', 'cleaned')} {sum(1 for s in self.stragglers if s.ok)} write "
                         "folder(s) of stragglers")
        for item in self.failures:
            lines.append(f"  failed: {getattr(item, 'name', item.id)}: {item.error}")
        if self.waiting:
            lines.append(f"  {len(self.waiting)} dropped table(s) not yet due (the first: {self.waiting[0]['name']}, "
                         f"due {self.waiting[0]['due_at']})")
        if self.busy_runs:
            lines.append(f"  left to running vacuum(s): {', '.join(self.busy_runs)}")
        lines += [held_line(h) for h in self.held]
        if self.listing:
            lines.append(f"  the whole listing: {self.listing}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "dry_run": self.dry_run,
            "watermarks": {scope: iso_utc(at) for scope, at in self.watermarks.items()},
            "instances": [i.to_dict() for i in self.instances],
            "expired": [e.to_dict() for e in self.expired],
            "trimmed": [t.to_dict() for t in self.trimmed],
            "swept": [s.to_dict() for s in self.swept],
            "stragglers": [s.to_dict() for s in self.stragglers],
            "foreign": [{"name": name, "location": location, "files": [{"path": f.path, "size": f.size} for f in files]}
                        for name, location, files in self.foreign],
            "purged": len(self.purged), "failed": len(self.failures),
            "files": self.files, "bytes": self.bytes,
            "resumed_runs": list(self.resumed_runs), "busy_runs": list(self.busy_runs),
            "waiting": list(self.waiting), "held": list(self.held), "duration_seconds": round(self.duration, 3),
            "timings": {phase: round(seconds, 3) for phase, seconds in self.timings.items()},
            "listing": self.listing,
        }


def held_line(h: dict[str, Any]) -> str:
    """One thing a pin kept from a vacuum (``VacuumReport.held``), said as a user needs it (R21)."""
    what = "not purged" if h["what"] == "purge" else f"version {h['version']} and newer not expired"
    return f"  held by pin {h['pin']} until {h['until']}: {h['name']} (id {h['id']}) {what}"


def _waiting(w: Waiting) -> dict[str, Any]:
    return {"id": w.table_id, "name": w.name, "dropped_at": iso_utc(from_micros(w.dropped_at)), "due_at": iso_utc(from_micros(w.due_at)),
            "retention": format_duration(w.retention_seconds), "retention_from": w.retention_from}


def _held(h: Held) -> dict[str, Any]:
    return {"name": h.name, "id": h.table_id, "what": h.what, "version": h.version, "pin": h.pin_id,
            "until": iso_utc(from_micros(h.until))}


def build_report(plan: Plan, dry_run: bool, results: dict[str, Result], started: float,
                 timings: dict[str, float]) -> VacuumReport:
    """Every item's result, by kind (an item with nothing to delete did nothing); ``results`` holds
    each item's (or part's) by key, a split item's parts added up here."""
    totals: dict[str, Result] = {}
    for key, result in results.items():
        base = key.split("#", 1)[0]
        totals[base] = totals[base] + result if base in totals else result

    def out(item: Any) -> Result:
        return totals.get(item.key, Result(item))

    def files(result: Result) -> tuple[FileEntry, ...]:
        return tuple(FileEntry(p, s) for p, s in result.listing or ())

    def at(path: str) -> str:
        return location(plan.root, path)

    purged = {t.key: out(t) for t in plan.purges}
    expired = {e.key: out(e) for e in plan.expiries}
    trimmed = {t.key: out(t) for t in plan.trims}
    swept = {w.key: out(w) for w in plan.sweeps}
    cleaned = {c.key: out(c) for c in plan.stragglers}
    foreign = {f.key: out(f) for f in plan.foreign}
    return VacuumReport(
        run_id=plan.run_id,
        dry_run=dry_run,
        watermarks={scope: from_micros(us) for scope, us in plan.watermarks},
        instances=tuple(InstanceReport(t.table_id, t.name, at(t.path), r.files, r.bytes, r.error, resumed=t.resumed,
                                       would_delete=files(r))
                        for t, r in ((t, purged[t.key]) for t in plan.purges)),
        resumed_runs=plan.resumes,
        duration=time.monotonic() - started,
        timings=timings,
        busy_runs=plan.busy,
        waiting=tuple(_waiting(w) for w in plan.waiting),
        held=tuple(_held(h) for h in plan.held),
        expired=tuple(ExpiryReport(e.table_id, e.name, at(e.path), None if e.mark is None else from_micros(e.mark),
                                   e.versions, tuple(location(at(e.path), f.path) for f in e.folders),
                                   r.files, r.bytes, r.error, would_delete=files(r))
                      for e, r in ((e, expired[e.key]) for e in plan.expiries)),
        trimmed=tuple(TrimReport(t.table_id, t.name, at(t.path), t.version, r.files, r.bytes, r.error,
                                 would_delete=files(r))
                      for t, r in ((t, trimmed[t.key]) for t in plan.trims)),
        swept=tuple(SweepReport(w.table_id, w.name, at(w.path), tuple((f.write_id, f.why) for f in w.folders),
                                r.files, r.bytes, r.error, would_delete=files(r))
                    for w, r in ((w, swept[w.key]) for w in plan.sweeps)),
        # A folder that held only what its version names had nothing cleaned: not reported.
        stragglers=tuple(StragglerReport(c.table_id, c.name, c.folder.write_id, location(at(c.path), c.folder.path),
                                         r.files, r.bytes, left=r.left, error=r.error, would_delete=files(r))
                         for c, r in ((c, cleaned[c.key]) for c in plan.stragglers)
                         if r.files or r.error or r.left),
        foreign=tuple((f.name, at(f.path), files(r)) for f, r in ((f, foreign[f.key]) for f in plan.foreign)
                      if dry_run and r.listing),
    )
