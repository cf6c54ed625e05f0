"""What a vacuum's tasks do on an executor: re-check each item against the plan, then delete.

Every function here is handed to Spark by reference (``functools.partial`` of a function of
this module, never a lambda of the driver's), so an executor needs this package and nothing
of the ledger (R19). Each re-checks what it is given: an item the plan does not hold is
refused; a purge runs only if its table was dropped at or before its watermark (the ledger's
decision, re-checked, R2). What is done to the files then is ``fs``'s, the same wherever they are
(every path confined to its location, R9): ``storage_for(root)`` is the one place that knows a
local disk from an object store.

Three shapes of work:

* ``run_items``: whole items, several a task (expiries, sweeps, stragglers, a dry run's
  listings, and on an object store the purges the ledger knows the files of);
* ``look_or_purge``, then ``delete_share`` and ``finish_purge``: dropped tables split below
  the table, their sub-folders shared out over several tasks (a local disk, or an object
  store location the ledger does not know);
* ``preflight``: can this executor run the rest at all.
"""

from __future__ import annotations

import hashlib
import os
import sys
import zlib
from dataclasses import replace
from typing import Any, Iterable, Iterator

from . import fs
from .receipts import Receipt
from .storage import StoreError, Unsafe, storage_for
from .work import EXPIRE, FOREIGN, PARTS, PURGE, STRAGGLERS, SWEEP, Outcome, Plan, Share, Work

LISTING_SAMPLE = 20
"""Files of each item sent back to the driver when a dry run's listing goes to its dataset."""

NOT_PLANNED = "refused: not in this vacuum's plan"


class Held:
    """A plan held where it is used (the driver), in the shape of a broadcast (``.value``)."""

    def __init__(self, value: Plan) -> None:
        self.value = value


def receipt_of(spec: Plan, dry_run: bool = False) -> Receipt | None:
    """A task's receipt of what it deletes (R20); none for a dry run."""
    return None if dry_run or spec.run_id is None else Receipt(spec.root, spec.run_id)


def refusal(item: Work) -> str | None:
    """Why a purge is refused here (the ledger's decision re-checked), or None."""
    if item.watermark is None or item.dropped_at > item.watermark:
        return "refused: not behind its watermark, so still restorable"
    return None


# --- whole items ---------------------------------------------------------------------------

def run_items(plan: Any, keys: Iterable[str], *, dry_run: bool) -> Iterator[Outcome]:
    """Each item's outcome; a dry run writes each item's listing to the plan's dataset and sends
    back a sample."""
    spec: Plan = plan.value
    receipt = receipt_of(spec, dry_run)
    for outcome in _run(spec, list(keys), dry_run, receipt):
        if spec.listing is not None and outcome.listing:
            _write_listing(spec.listing, spec.items[outcome.key], outcome.listing)
            outcome = Outcome(outcome.key, outcome.files, outcome.bytes, outcome.error,
                              outcome.listing[:LISTING_SAMPLE], outcome.left)
        yield outcome
    if receipt is not None:
        yield Outcome(PARTS, parts=receipt.close())


def _run(spec: Plan, keys: list[str], dry_run: bool, receipt: Receipt | None) -> Iterator[Outcome]:
    known = [k for k in keys if not dry_run and k in spec.items and spec.items[k].kind == PURGE
             and spec.items[k].manifests]
    yield from _purge_known(spec, known, receipt)
    for key in keys:
        if key in known:
            continue
        item = spec.items.get(key)
        if item is None:
            yield Outcome(key, error=NOT_PLANNED)
        elif item.kind == PURGE:
            yield _purge_location(spec.root, item, dry_run, receipt)
        elif item.kind == STRAGGLERS:
            yield replace(fs.delete_unnamed(spec.root, item.location, item.folder, set(item.named), item.cutoff,
                                            dry_run=dry_run, receipt=receipt), key=key)
        elif item.kind == FOREIGN:
            found = fs.foreign_files(spec.root, item.location, set(item.named))
            yield Outcome(key, len(found), sum(f.size for f in found), None, tuple((f.path, f.size) for f in found))
        elif item.kind in (EXPIRE, SWEEP):
            yield _delete_folders(spec.root, item, dry_run, receipt)
        else:
            yield Outcome(key, error=f"refused: no such kind of work {item.kind!r}")


def _purge_known(spec: Plan, keys: list[str], receipt: Receipt | None) -> Iterator[Outcome]:
    """Dropped tables on an object store whose files the ledger knows: each re-checked, then
    purged together (their known keys, then what a listing finds, sharing DeleteObjects batches)."""
    allowed = []
    for key in keys:
        refused = refusal(spec.items[key])
        if refused is not None:
            yield Outcome(key, error=refused)
        else:
            allowed.append(spec.items[key])
    if allowed:
        done = fs.purge_each(spec.root, [i.location for i in allowed], known=[i.manifests for i in allowed],
                             siblings=spec.siblings, receipt=receipt)
        for item, outcome in zip(allowed, done):
            yield replace(outcome, key=item.key)


def _purge_location(root: str, item: Work, dry_run: bool, receipt: Receipt | None) -> Outcome:
    refused = None if dry_run else refusal(item)
    if refused is not None:
        return Outcome(item.key, error=refused)
    return replace(fs.purge(root, item.location, dry_run=dry_run, receipt=receipt), key=item.key)


def _delete_folders(root: str, item: Work, dry_run: bool, receipt: Receipt | None) -> Outcome:
    """A table's old (or swept) write folders, several at once: each must lie in the table's own
    ``_writes`` folder (R9), and one that does not refuses them all before any is touched."""
    inside = item.location.rstrip("/") + "/_writes/"
    for folder in item.folders:
        if not folder.startswith(inside) or "/" in folder[len(inside):].strip("/"):
            return Outcome(item.key, error=f"refused: {folder} is not a write folder of {item.location}",
                           listing=() if dry_run else None)
    done = fs.delete_folders(root, item.location, list(item.folders), item.manifests, dry_run=dry_run, receipt=receipt)
    return replace(done, key=item.key)


def _totals(outcomes: list[Outcome]) -> tuple[int, int, str | None]:
    """Files and bytes deleted by several purges, and the first error among them."""
    error = next((o.error for o in outcomes if o.error is not None), None)
    return sum(o.files for o in outcomes), sum(o.bytes for o in outcomes), error


def _write_listing(folder: str, item: Work, entries: tuple[tuple[str, int], ...]) -> None:
    """One item's listing as one Parquet file of the dry run's dataset (pyarrow: the one library
    besides the standard one an executor needs, and only for a dry run)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    n = len(entries)
    table = pa.table({"item": [item.key] * n, "kind": [item.kind] * n, "table_id": [item.table_id] * n,
                      "path": [e[0] for e in entries], "size": pa.array([e[1] for e in entries], pa.int64())})
    name = hashlib.sha256(item.key.encode()).hexdigest()[:24]
    pq.write_table(table, os.path.join(folder, f"part-{name}.parquet"))


# --- tables split below the table ------------------------------------------------------------

def look_or_purge(plan: Any, keys: Iterable[str]) -> Iterator[tuple[str, tuple[Share, int]]]:
    """The tables with fewer than two sub-folders purged here and now, several at once
    (``fs.purge_each``), the refused ones reported; the bigger ones only counted, for a second
    job to share out."""
    spec: Plan = plan.value
    receipt = receipt_of(spec)
    whole: list[Work] = []
    for key in keys:
        item = spec.items.get(key)
        refused = NOT_PLANNED if item is None else refusal(item)
        if refused is not None:
            yield key, (Share(error=refused, finished=True), 0)
            continue
        assert item is not None
        pieces = len(fs.pieces(spec.root, item.location))
        if pieces < 2:
            whole.append(item)
        else:
            yield key, (Share(), pieces)
    for item, done in zip(whole, fs.purge_each(spec.root, [i.location for i in whole], receipt=receipt)):
        yield item.key, (Share(done.files, done.bytes, done.error, True), 0)
    if receipt is not None:
        yield PARTS, (Share(finished=True, parts=receipt.close()), 0)


def share_task(plan: Any, share: tuple[str, int, int]) -> tuple[str, Share]:
    """``delete_share`` of one (key, share, shares), keyed for the sum per table."""
    key, j, k = share
    return key, delete_share(plan, key, j, k)


def delete_share(plan: Any, key: str, share: int, shares: int) -> Share:
    """Re-check the table, then delete the sub-folders that are this share's (``share_of_listing``),
    several at once (a table with fewer than two: share 0 purges it whole). One that appears
    meanwhile is left to the final purge of the location."""
    spec: Plan = plan.value
    item = spec.items.get(key)
    refused = NOT_PLANNED if item is None else refusal(item)
    if refused is not None:
        return Share(error=refused)
    assert item is not None
    pieces = fs.pieces(spec.root, item.location)
    receipt = receipt_of(spec)
    if len(pieces) < 2:
        if share:
            return Share()
        done = _purge_location(spec.root, item, False, receipt)
        return Share(done.files, done.bytes, done.error, True, _parts(receipt))
    inside = item.location.rstrip("/") + "/"
    folders = share_of_listing(pieces, share, shares, not storage_for(spec.root).keyed)
    outside = next((f for f in folders if not f.startswith(inside)), None)
    if outside is not None:
        return Share(error=f"refused: {outside} is not inside {item.location}")
    return Share(*_totals(fs.purge_each(spec.root, folders, keep=True, receipt=receipt)), parts=_parts(receipt))


def _parts(receipt: Receipt | None) -> tuple:
    return () if receipt is None else receipt.close()


def share_of_listing(pieces: list[str], share: int, shares: int, local: bool) -> list[str]:
    """The sub-folders share ``share`` of ``shares`` deletes, out of a listing it made itself while
    other shares delete. Every share must pick from the same listing, or a folder may fall
    between two (and be left, with all such, to the one task that finishes the location).

    On a local disk each share empties its folders but keeps them (the finish removes them), so
    every share lists the same folders, and takes every ``shares``-th: evenly. An object store
    has no empty folders to keep, so there a share takes the folders whose name's CRC falls to
    it: the same in every process (Python's own hash is salted per process), evenly spread over
    many random ids, less so over a few."""
    if local:
        return sorted(pieces)[share::shares]
    return [p for p in pieces if zlib.crc32(p.encode()) % shares == share]


def add_shares(a: Share, b: Share) -> Share:
    return a + b


def finish_purge(plan: Any, pair: tuple[str, Share]) -> Outcome:
    """After the shares, purge the rest of the location (or report the first error)."""
    key, done = pair
    if done.error is not None or done.finished:
        return Outcome(key, done.files, done.bytes, done.error, parts=done.parts)
    receipt = receipt_of(plan.value)
    more = _purge_location(plan.value.root, plan.value.items[key], False, receipt)
    return Outcome(key, done.files + more.files, done.bytes + more.bytes, more.error,
                   parts=done.parts + _parts(receipt))


# --- can this executor run a vacuum at all ---------------------------------------------------

def root_seen(root: str) -> bool:
    """Whether the warehouse root is there, as seen from here (a local folder; a store: True)."""
    return not storage_for(root).absent(root)


def preflight(root: str, driver_sees_root: bool, _partition: Iterable[Any]) -> Iterator[str]:
    """What stops this executor from running the vacuum's tasks (an empty answer: nothing).
    Asked of every executor before the ledger records anything: a missing library, a store it
    cannot reach, a warehouse folder it does not see (a local warehouse must be on a file system
    every executor shares, or a vacuum would find nothing there and call it purged)."""
    where = f"executor {os.uname().nodename} ({sys.executable})"
    try:
        import pyarrow  # noqa: F401  (a dry run's dataset)
    except ImportError as exc:
        yield f"{where}: {type(exc).__name__}: {exc}"
    try:
        store = storage_for(root)
        if driver_sees_root and store.absent(root):
            yield (f"{where} does not see the warehouse {store.base}: a local warehouse must be on a file system "
                   "the driver and every executor share")
        elif store.keyed:  # one page of a listing: the store's client is here, and the store answers
            next(iter(store.pages(store.base or "_retention_ledger_preflight")), None)
    except ImportError as exc:
        yield f"{where}: {type(exc).__name__}: {exc} (the object-store client, needed for {root})"
    except (StoreError, Unsafe, OSError) as exc:
        yield f"{where}: cannot list {root}: {exc}"
