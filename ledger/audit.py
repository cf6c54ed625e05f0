"""Reading the log as an auditor: history, and ``verify``.

``verify`` trusts nothing it did not recompute: SQLite's own page check, then a
fold of the whole log from nothing (which re-checks every rule the fold knows:
an undrop behind its watermark, a purge of a restorable table, a watermark that
moves back are corrupt logs, not history), then a comparison with the state the
ledger holds and with the stored snapshot. A snapshot that disagrees with the log
is discarded and rebuilt here, not merely reported: it is a cache, and reopening
would otherwise trust it again.
"""

from __future__ import annotations

import hashlib
from typing import Iterator

import attrs

from .core import snapshot
from .core.events import Recorded, decode
from .core.model import State, fold_rows
from .errors import LedgerCorrupt, TableNotFound
from .names import table_id as valid_table_id, table_name
from .runner import SNAPSHOT_NAME, Runner
from .store import EventStore
from .views import HistoryEntry


@attrs.frozen
class VerifyReport:
    events: int
    last_seq: int
    instances: int
    live: int
    dropped: int
    purged: int
    snapshot_seq: int | None
    snapshot_discarded: bool = False
    """A stored snapshot disagreed with the log (edited, or damaged): it was thrown away and rebuilt."""


def records(runner: Runner, after: int = 0, upto: int | None = None) -> Iterator[Recorded]:
    for row in runner.store.read(after, upto=upto):
        yield decode(*row)


def history(runner: Runner, name: str | None = None, *, table_id: str | None = None) -> list[HistoryEntry]:
    """Every event, or those that concern one table: by name (every instance that ever bore it,
    across renames) or by id."""
    everything = list(records(runner))
    if name is None and table_id is None:
        return [HistoryEntry.of(r) for r in everything]
    ids = {valid_table_id(table_id)} if table_id is not None else set()
    key = table_name(name) if name is not None else None
    if key is not None:
        ids |= {getattr(r.event, "table_id") for r in everything
                if getattr(r.event, "name", None) == key and hasattr(r.event, "table_id")}
    if not ids or (table_id is not None and not runner.state.tables.has_id(valid_table_id(table_id))):
        raise TableNotFound(f"no table {'with id ' + table_id if table_id else key} has ever "
                            "existed in this ledger")
    return [HistoryEntry.of(r) for r in everything if _concerns(r, ids)]


def _concerns(rec: Recorded, ids: set[str]) -> bool:
    event = rec.event
    if getattr(event, "table_id", None) in ids:
        return True
    if any(i in ids for i in getattr(event, "table_ids", ())):
        return True
    return getattr(event, "scope", None) in {f"table:{i}" for i in ids}


def verify(runner: Runner) -> VerifyReport:
    """Check the file, refold the whole log from nothing, and compare with what is held and cached.

    Raises ``LedgerCorrupt`` naming what is wrong; returns counts when all is well.
    """
    store = runner.store
    problems = store.integrity_problems()
    if problems:
        found = "; ".join(" ".join(p.split()) for p in problems[:5])
        raise LedgerCorrupt(f"{store.path}: SQLite integrity check failed: {found}; "
                            "restore the ledger file from a backup")
    head = store.head()[0]
    fresh = fold_rows(State(), store.read(0, upto=head))
    _check_manifests(store, fresh)
    discarded = _check_snapshot(runner, fresh)
    held = runner.refresh(force=True)
    if held.seq == fresh.seq and held != fresh:
        discarded = True  # what we held came from a snapshot that lied
    if discarded:
        runner.rebuild(fresh)
    instances = list(fresh.tables.all_instances())
    snap = store.load_snapshot(SNAPSHOT_NAME)
    return VerifyReport(
        events=store.count(), last_seq=fresh.seq, instances=len(instances),
        live=len(fresh.tables.bindings), dropped=sum(i.is_dropped for i in instances),
        purged=sum(i.purged_at is not None for i in instances),
        snapshot_seq=None if snap is None else snap.seq, snapshot_discarded=discarded,
    )


def _check_manifests(store: EventStore, state: State) -> None:
    """Every file list a commit names is stored, and hashes to the digest the event carries."""
    for v in state.data.versions.values():
        if v.manifest is None:
            continue
        data = store.read_blob(v.manifest)
        if data is None or hashlib.sha256(data).hexdigest() != v.manifest:
            what = "is missing" if data is None else "does not match its digest"
            raise LedgerCorrupt(f"{store.path}: the file list of {v.table_id} version {v.number} ({v.manifest}) "
                                f"{what}; restore the ledger file from a backup")


def _check_snapshot(runner: Runner, fresh: State) -> bool:
    """Compare the stored snapshot with a fold of the log up to the same event; discard it
    if it disagrees (whatever its digest says). Returns whether it was discarded."""
    store = runner.store
    snap = store.load_snapshot(SNAPSHOT_NAME)
    if snap is None:
        return False
    try:
        cached = snapshot.load(snap.data)
        agrees = cached.seq == snap.seq and cached == _fold_upto(store, fresh, snap.seq)
    except (snapshot.SnapshotMismatch, LedgerCorrupt):
        agrees = False
    if not agrees:
        store.delete_snapshot(SNAPSHOT_NAME)
    return not agrees


def _fold_upto(store: object, fresh: State, seq: int) -> State:
    if seq == fresh.seq:
        return fresh
    return fold_rows(State(), store.read(0, upto=seq))  # type: ignore[attr-defined]
