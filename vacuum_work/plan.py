"""What the ledger decided a vacuum may do: its ``Plan``, and what it leaves (``Waiting``, ``Held``).

Standard library only (R19)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterator

from .items import Expiry, ForeignScan, Item, Purge, StragglerScan, Sweep, Trim

WORK: dict[str, Any] = {"work": True}
"""The metadata of a ``Plan`` field that holds items of work (one kind a field)."""


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


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What the ledger decided a vacuum may do. From ``Ledger.start_vacuum`` it is on record: its
    watermarks, marks, sweeps and lease are in the log before the caller sees it (R2, R13, R15).
    From ``Ledger.plan_vacuum`` (a dry run) nothing was recorded, and ``run_id`` is None.

    Built by keyword. Its items of work are in one field a kind (marked ``WORK``), in the order a
    run carries them out and a report shows them; what a run does with them is asked of the items
    (``work``), never of the fields by name."""
    run_id: str | None
    root: str
    now: int
    purges: tuple[Purge, ...] = field(default=(), metadata=WORK)
    expiries: tuple[Expiry, ...] = field(default=(), metadata=WORK)
    trims: tuple[Trim, ...] = field(default=(), metadata=WORK)
    """Replaces whose removed files no unexpired version names any more: deleted by key."""
    sweeps: tuple[Sweep, ...] = field(default=(), metadata=WORK)
    stragglers: tuple[StragglerScan, ...] = field(default=(), metadata=WORK)
    foreign: tuple[ForeignScan, ...] = field(default=(), metadata=WORK)
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

    def planned(self) -> Iterator[Item]:
        """Every item the plan holds, of every kind, in order (with nothing to do, too: an expiry
        that only moves a mark; a dry run's foreign scans)."""
        for f in fields(self):
            if f.metadata.get("work"):
                yield from getattr(self, f.name)

    @property
    def empty(self) -> bool:
        """Nothing a run would record: no purge, no mark, no sweep, no scan, no stopped run to take
        over (then ``start_vacuum`` records nothing either)."""
        return not (self.resumes or any(not i.dry_run_only for i in self.planned()))

    def idle(self, dry_run: bool) -> bool:
        """Nothing for a vacuum to do, so no Spark job is needed: the plan is ``empty``, and for a
        dry run there are no foreign files to list either (it lists them; a run never deletes them)."""
        return self.empty and not (dry_run and self.foreign)

    def items(self) -> Iterator[Item]:
        """Every item a run carries out: purges, expiries with folders, trims, sweeps, straggler scans."""
        return self.work(dry_run=False)

    def work(self, *, dry_run: bool) -> Iterator[Item]:
        """Every item with something to do, and for a dry run what only a dry run lists (foreign files)."""
        return (i for i in self.planned() if i.busy() and (dry_run or not i.dry_run_only))
