"""``VacuumRun``: a vacuum run on record, and what its driver tells the ledger while it deletes.

``Ledger.start_vacuum`` decides a plan and records its watermarks, marks, sweeps and lease before
any file is touched (R2, R13, R15); what it returns is this handle, as ``Ledger.pin`` returns a
``Pin``. The driver (``spark_ops.vacuum``, or a vacuum of your own) then deletes what the plan
names and talks back through the handle only: it renews the lease while it works, reads the file
lists the plan names by digest (one at a time, so its memory does not grow with the number of
files the ledger knows, R20), records its receipt's parts as they come, and finishes with the
results its executors gave, item by item (``vacuum_work.Result``). What those results record is
decided by the ledger (``core.vacuums``), on the plan's own records.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Iterable, Iterator, Protocol

from vacuum_work import Part, Plan, Result

from . import names
from .clock import parse_duration
from .core.model import State
from .core.receipts import RecordDeleted
from .core.vacuums import DEFAULT_LEASE_SECONDS, FinishVacuum, RenewVacuum
from .errors import InvalidArgument
from .runner import Runner


class OnRecord(Protocol):
    """What a run asks of the ledger it is on record in (``ledger.Ledger`` is one). Said here, so that
    this module needs nothing above it: ``ledger.api`` imports it, never the other way (issue 60)."""

    runner: Runner

    @property
    def state(self) -> State: ...

    def _manifest_pairs(self, digest: str) -> Iterator[tuple[str, int]]: ...

    def forget_done_erasures(self) -> list[str]: ...


class VacuumRun:
    """A vacuum run on record. ``plan`` is what it may delete (None for a handle made with
    ``VacuumRun.of`` on a run that another call started). Use it as a context manager to release
    its lease if the block fails: the next vacuum then takes its work over at once."""

    def __init__(self, ledger: OnRecord, run_id: str, plan: Plan | None = None) -> None:
        self._ledger = ledger
        self.run_id = run_id
        self.plan = plan

    @classmethod
    def of(cls, ledger: OnRecord, run_id: str) -> VacuumRun:
        """A handle on run ``run_id``, already on record (started by another call, or another
        process): to renew, release or finish it. A Ctrl-C handler that chose the id before the start
        (``vacuum_work.new_run_id``) releases the run with it, even if the start's answer never came."""
        return cls(ledger, names.run_id(run_id))

    def __repr__(self) -> str:
        return f"<VacuumRun {self.run_id}>"

    def renew(self, lease: object = timedelta(seconds=DEFAULT_LEASE_SECONDS)) -> bool:
        """Extend the run's lease from now; False if another vacuum took the run over meanwhile (its
        deletions stay safe, but it no longer holds its tables)."""
        seconds = max(1, int(parse_duration(lease, "a vacuum's lease", InvalidArgument).total_seconds()))  # type: ignore[arg-type]
        return bool(self._ledger.runner.run(lambda now: RenewVacuum(self.run_id, now, seconds)))

    def release(self) -> bool:
        """End the run's lease now (it stopped without finishing), so that the next vacuum takes its
        work over at once instead of waiting for the lease to run out."""
        return bool(self._ledger.runner.run(lambda now: RenewVacuum(self.run_id, now, 0)))

    def files(self, digest: str) -> Iterator[tuple[str, int]]:
        """The file list the plan names by ``digest`` (a purge's ``listed``, a folder's ``listed``, a
        trim's ``listed``): ``(path, size)`` pairs, paths relative to the table's location, checked
        against the digest, then parsed a few hundred at a time as they are taken, so that the
        driver's memory does not grow with the list (R20). It reads the ledger only, records nothing:
        a dry run's driver reads a trim's list through a handle on its plan
        (``VacuumRun(ledger, "dry run", plan)``) too."""
        return self._ledger._manifest_pairs(digest)

    def record_deleted(self, parts: Iterable[tuple[Part, bytes]]) -> int:
        """Record parts of the run's receipt (R20), each with its compressed leaves as its task wrote
        them (``spark_ops.executor.receipts``); ``finish`` closes the receipt. Returns how many."""
        batch = _batch(parts)
        return self._ledger.runner.run(RecordDeleted(self.run_id, batch)) if batch != () else 0

    def finish(self, results: Iterable[Result]) -> int:
        """Record the run's end from what each item (or part of one) did: the ledger records a purge
        for each instance whose location went whole, the write folders that went, the committed
        folders cleaned, and closes the receipt (R10: what failed is not recorded, and the next
        vacuum finishes it). Returns how many purges were recorded."""
        batch = _batch(results)
        purged: int = self._ledger.runner.run(lambda now: FinishVacuum(self.run_id, batch, now))
        # What the run finished may be the last file of an erasure request: what it named is then
        # forgotten (R25), here, as the run ends, not whenever someone next asks.
        if self._ledger.state.erasures.requests:
            self._ledger.forget_done_erasures()
        return purged

    def __enter__(self) -> VacuumRun:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:
            try:
                self.release()
            except Exception:  # noqa: BLE001 - the block's own error is the one to see
                pass


def _batch(values: Iterable[Any]) -> Any:
    """``values`` as a tuple, or as given when it is no collection (``None``, a number, text): the
    ledger then refuses it, typed, saying what it got, as it refuses a wrong value inside one."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        return values
    return tuple(values)
