"""What a vacuum did (or, for a dry run, would do): the report ``spark_ops.vacuum`` returns.

The report is the plan plus its results: an ``ItemReport`` an item (its parts' results added up), in
the plan's order, and what the plan says besides (watermarks, runs taken over or left alone, what
waits, what pins hold). One renderer says it three ways, each in the words the items' kinds give
(``vacuum_work.Item``: ``section``, ``facts``, ``record``, ``said``, ``tally``): ``summary()`` (and
``str()``) in a few lines, ``text()`` line by line (the CLI's), ``to_dict()`` in JSON (``--json``),
with a section for every kind of work there is (``vacuum_work.KINDS``).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import attrs

from ledger import FileEntry, format_bytes, format_duration, from_micros, iso_utc
from vacuum_work import KINDS, Item, Plan, Purge, Result, location


@attrs.frozen
class ItemReport:
    """One item of the plan and what it did: its table's ``id`` and ``name``, its counts, its
    ``error`` (None: it went well), and for a dry run the files it would delete. What its kind
    says of it besides is the item's (``entry.versions`` of an expiry, ``entry.version`` of a trim,
    ``entry.resumed`` of a purge: any field of the item)."""
    item: Item
    result: Result
    root: str

    @property
    def id(self) -> str:
        return self.item.table_id

    @property
    def location(self) -> str:
        return location(self.root, self.item.path)

    @property
    def would_delete(self) -> tuple[FileEntry, ...]:
        """For a dry run: each file that would be deleted (or, for a scan that deletes nothing, found), with its size."""
        return tuple(FileEntry(path, size) for path, size in self.result.listing or ())

    @property
    def mark(self) -> datetime | None:
        """An expiry's new retention mark, as every time the report shows (None: none moved)."""
        mark = getattr(self.item, "mark", None)
        return None if mark is None else from_micros(mark)

    def __getattr__(self, name: str) -> Any:
        """Its result's ``files``, ``bytes``, ``error``, ``left`` and ``ok``; any other name, the item's."""
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.result if name in _OF_RESULT else self.item, name)

    def to_dict(self) -> dict[str, Any]:
        return {**self.item.facts(self.root), **self.item.record(self.result)}

    def line(self) -> list[str]:
        """Its line of the report's text, and a line for each file listed."""
        done = self.result
        status = f"FAILED {done.error}" if done.error else _files(done.files, done.bytes)
        return [f"  {self.id}  {self.item.name:<32} {self.item.said(self.root, done, status)}",
                *(f"      {f.path}  {format_bytes(f.size)}" for f in self.would_delete)]


_OF_RESULT = ("files", "bytes", "error", "left", "ok")


def _files(count: int, size: int) -> str:
    """A count of files and their size, in the one unit system every size is shown in."""
    return f"{count} file{'' if count == 1 else 's'}, {format_bytes(size)}"


@attrs.frozen
class VacuumReport:
    run_id: str | None
    dry_run: bool
    watermarks: dict[str, datetime]
    """The watermarks this run advanced (or, for a dry run, would advance), by scope."""
    entries: tuple[ItemReport, ...]
    """Every planned item worth a line (``Item.shown``) and what it did, in the plan's order."""
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
    listing: str | None = None
    """For a dry run of more than ``listing_threshold`` files: the Parquet dataset holding the whole
    listing (columns ``item``, ``kind``, ``table_id``, ``path``, ``size``); each item's
    ``would_delete`` then holds only the first ``LISTING_SAMPLE`` of its files."""

    def section(self, kind: type[Item]) -> tuple[ItemReport, ...]:
        """The entries of one kind of work."""
        return tuple(e for e in self.entries if e.item.kind == kind.kind)

    def __getattr__(self, name: str) -> tuple[ItemReport, ...]:
        """A kind's entries by its section's name (``report.instances``, ``report.expired``,
        ``report.trimmed``, ``report.swept``, ``report.stragglers``, ``report.foreign``, ...)."""
        kind = next((k for k in KINDS.values() if k.section == name), None)
        if kind is None or name.startswith("__"):
            raise AttributeError(name)
        return self.section(kind)

    @property
    def purged(self) -> list[ItemReport]:
        return [] if self.dry_run else [e for e in self.section(Purge) if e.result.ok]

    @property
    def failures(self) -> list[ItemReport]:
        return [e for e in self.entries if not e.result.ok]

    @property
    def files(self) -> int:
        return sum(e.result.files for e in self.entries if e.result.ok and e.item.deletes)

    @property
    def bytes(self) -> int:
        return sum(e.result.bytes for e in self.entries if e.result.ok and e.item.deletes)

    def headline(self) -> str:
        """What the run did (or would do), in one line."""
        if self.run_id is None and not self.dry_run:  # nothing was due: no run was recorded
            return ("nothing to vacuum: no dropped table is past its retention, no old version is due to expire "
                    "and no write is due to be swept")
        head = "dry run" if self.dry_run else f"vacuum {self.run_id}"
        would = self.dry_run
        return (f"{head}: {'would purge' if would else 'purged'} {sum(e.result.ok for e in self.section(Purge))} "
                f"table(s), {'would delete' if would else 'deleted'} {self.files} file(s) ({format_bytes(self.bytes)}) in "
                f"{self.duration:.1f}s")

    def summary(self) -> str:
        """What the run did (or, for a dry run, would do), in a few lines a person reads."""
        lines = [self.headline()]
        for kind in KINDS.values():
            said = kind.tally([(e.item, e.result) for e in self.section(kind) if e.result.ok], self.dry_run)
            lines += [] if said is None else [f"  {said}"]
        lines += [f"  failed: {e.item.name}: {e.result.error}" for e in self.failures]
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

    def text(self) -> str:
        """What the run did, item by item (the CLI's text): the headline, the watermarks, each
        entry's line (and files), where the whole listing is, the runs taken over."""
        lines = [self.headline()]
        lines += [f"  watermark {scope} -> {iso_utc(at)}" for scope, at in self.watermarks.items()]
        for entry in self.entries:
            lines += entry.line()
        if self.listing:
            lines.append(f"  the full listing ({self.files} files) is the Parquet dataset {self.listing}; "
                         "each item above shows its first files only")
        if self.resumed_runs:
            lines.append(f"  took over unfinished run(s): {', '.join(self.resumed_runs)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "dry_run": self.dry_run,
            "watermarks": {scope: iso_utc(at) for scope, at in self.watermarks.items()},
            **{kind.section: [e.to_dict() for e in self.section(kind)] for kind in KINDS.values()},
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


def build_report(plan: Plan, dry_run: bool, results: dict[str, Result], started: float,
                 timings: dict[str, float]) -> VacuumReport:
    """The plan plus its results: every item's, a split item's parts added up (``results`` holds each
    item's or part's by key; an item with nothing to delete did nothing), those worth a line."""
    totals: dict[str, Result] = {}
    for key, result in results.items():
        base = key.split("#", 1)[0]
        totals[base] = totals[base] + result if base in totals else result
    done = ((item, totals.get(item.key, Result(item))) for item in plan.planned())
    return VacuumReport(
        run_id=plan.run_id,
        dry_run=dry_run,
        watermarks={scope: from_micros(us) for scope, us in plan.watermarks},
        entries=tuple(ItemReport(item, result, plan.root) for item, result in done if item.shown(result, dry_run)),
        resumed_runs=plan.resumes,
        duration=time.monotonic() - started,
        timings=timings,
        busy_runs=plan.busy,
        waiting=tuple({"id": w.table_id, "name": w.name, "dropped_at": iso_utc(from_micros(w.dropped_at)),
                       "due_at": iso_utc(from_micros(w.due_at)), "retention": format_duration(w.retention_seconds),
                       "retention_from": w.retention_from} for w in plan.waiting),
        held=tuple({"name": h.name, "id": h.table_id, "what": h.what, "version": h.version, "pin": h.pin_id,
                    "until": iso_utc(from_micros(h.until))} for h in plan.held),
    )
