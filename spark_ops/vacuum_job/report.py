"""What a vacuum did (or, for a dry run, would do): the report ``spark_ops.vacuum`` returns.

Built on the driver from the ledger's order and each work item's outcome; ``summary()``
(and ``str()``) says it in a few lines, ``to_dict()`` in JSON for the CLI.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import attrs

from ledger import VacuumOrder
from ledger.clock import iso_utc
from ledger.views import format_bytes, held_line

from ..executor.fs import FileEntry
from ..executor.work import EXPIRE, FOREIGN, NOTHING, PURGE, STRAGGLERS, SWEEP, Outcome


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
    listing: str | None = None
    """For a dry run of more than ``listing_threshold`` files: the Parquet dataset holding the whole
    listing (columns ``item``, ``kind``, ``table_id``, ``path``, ``size``); each item's
    ``would_delete`` then holds only the first ``LISTING_SAMPLE`` of its files."""

    @property
    def purged(self) -> list[InstanceReport]:
        return [] if self.dry_run else [i for i in self.instances if i.ok]

    @property
    def _items(self) -> tuple[Any, ...]:
        return (*self.instances, *self.expired, *self.swept, *self.stragglers)

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


def build_report(order: VacuumOrder, dry_run: bool, outcomes: dict[str, Outcome], started: float,
                 timings: dict[str, float]) -> VacuumReport:
    """Every work item's outcome, by kind (an item with nothing to delete did nothing)."""
    def out(kind: str, id_: str) -> Outcome:
        """The outcome of one item, or the sum of the parts a big item was split into."""
        key = f"{kind}:{id_}"
        parts = [o for k, o in outcomes.items() if k == key or k.startswith(key + "#")]
        total = NOTHING
        for part in parts:
            total = part if total is NOTHING else total + part
        return total

    def files(outcome: Outcome) -> tuple[FileEntry, ...]:
        return tuple(FileEntry(p, s) for p, s in outcome.listing or ())

    purged = {t.id: out(PURGE, t.id) for t in order.targets}
    expired = {e.id: out(EXPIRE, e.id) for e in order.expiries}
    swept = {w.id: out(SWEEP, w.id) for w in order.sweeps}
    cleaned = {c.write_id: out(STRAGGLERS, c.write_id) for c in order.stragglers}
    foreign = {i: out(FOREIGN, i) for i, *_ in order.written}
    return VacuumReport(
        run_id=order.run_id,
        dry_run=dry_run,
        watermarks=dict(order.watermarks),
        instances=tuple(InstanceReport(t.id, t.name, t.location, purged[t.id].files, purged[t.id].bytes,
                                       purged[t.id].error, resumed=t.resumed, would_delete=files(purged[t.id]))
                        for t in order.targets),
        resumed_runs=order.resumes,
        duration=time.monotonic() - started,
        timings=timings,
        busy_runs=order.busy,
        waiting=order.waiting,
        held=order.held,
        expired=tuple(ExpiryReport(e.id, e.name, e.location, e.mark, e.versions, tuple(f for _, f in e.folders),
                                   expired[e.id].files, expired[e.id].bytes, expired[e.id].error,
                                   would_delete=files(expired[e.id])) for e in order.expiries),
        swept=tuple(SweepReport(w.id, w.name, w.location, tuple((i, why) for i, _, why in w.writes),
                                swept[w.id].files, swept[w.id].bytes, swept[w.id].error,
                                would_delete=files(swept[w.id])) for w in order.sweeps),
        # A folder that held only what its version names had nothing cleaned: not reported.
        stragglers=tuple(StragglerReport(c.id, c.name, c.write_id, c.folder, cleaned[c.write_id].files,
                                         cleaned[c.write_id].bytes, left=cleaned[c.write_id].left,
                                         error=cleaned[c.write_id].error, would_delete=files(cleaned[c.write_id]))
                         for c in order.stragglers
                         if cleaned[c.write_id].files or cleaned[c.write_id].error or cleaned[c.write_id].left),
        foreign=tuple((name, location, files(foreign[i])) for i, name, location, _ in order.written
                      if dry_run and foreign[i].listing),
    )
