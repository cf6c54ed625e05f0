"""What a vacuum's tasks do with the plan's items (``vacuum_work``): re-check each, then delete.

Every function here is handed to Spark by reference (``functools.partial`` of a function of
this module, never a lambda of the driver's), so an executor needs this package and
``vacuum_work`` and nothing of the ledger (R19). Each re-checks what it is given: a purge runs
only if its table was dropped at or before its watermark (the ledger's decision, re-checked, R2);
every folder must lie in its table's ``_writes`` folder, and every path inside its location (R9,
``fs``). What is done to the files is ``fs``'s, the same wherever they are: ``storage_for(root)``
is the one place that knows a local disk from an object store.

Three shapes of work, each answering with ``vacuum_work.Result``:

* ``run_items``: whole items, several a task (expiries, sweeps, stragglers, a dry run's
  listings, and on an object store purges, from the driver); trims, which
  delete what the ledger lists by key, run where the ledger's lists are (the driver);
* ``look_or_purge``, then ``share_out`` and ``finish_purges``: dropped tables split below
  the table, their sub-folders shared out over several tasks (a local disk, or an object
  store location the ledger does not know), the shares summed per table on the driver between;
* ``preflight``: can this executor run the rest at all.

Each takes a task's slice of the items and yields what goes back; ``on_spark`` runs it in a Spark
task on either kind of session.
"""

from __future__ import annotations

import hashlib
import os
import sys
import zlib
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator

from vacuum_work import Expiry, ForeignScan, Part, Purge, Result, StragglerScan, Sweep, Trim, Work, location

from . import fs
from .probe import sees as probe_sees
from .receipts import Receipt
from .storage import StoreError, Unsafe, storage_for

LISTING_SAMPLE = 20
"""Files of each item sent back to the driver when a dry run's listing goes to its dataset."""

Files = Callable[[str], Iterable[tuple[str, int]]]
"""A file list the ledger keeps, by digest: ``(path, size)`` pairs relative to the table's location.
Only the driver has one (``VacuumRun.files``); executors list what they delete."""


@dataclass(frozen=True)
class Job:
    """What every task of one vacuum shares besides its items."""
    root: str
    run_id: str | None = None
    """The run whose receipt the tasks write (None: a dry run, which deletes nothing)."""
    listing: str | None = None
    """A dry run's dataset folder: each item's listing is written there."""
    siblings: int = 0
    """About how many table locations the root holds (for the one-listing check on object stores)."""
    stream: bool = False
    """A dry run's listing goes back through Spark (``Listed`` chunks, which the driver writes to its
    dataset) instead of being written to ``listing`` here: executors that may not see the driver's
    folders (a Spark Connect server elsewhere, a cluster's) never write there."""

    def receipt(self) -> Receipt | None:
        """A task's receipt of what it deletes (R20); none for a dry run."""
        return None if self.run_id is None else Receipt(self.root, self.run_id)

    def at(self, item: Work) -> str:
        """An item's location, absolute."""
        return location(self.root, item.path)


def _closing(receipt: Receipt | None) -> Iterator[Result]:
    """The result a task ends with to hand over its receipt's parts (it names no item)."""
    if receipt is not None:
        yield Result(None, parts=receipt.close())


# --- whole items ---------------------------------------------------------------------------

def run_items(job: Job, items: Iterable[Work], *, files: Files | None = None) -> Iterator[Result | Listed]:
    """Each item's result; a dry run writes each item's listing to the job's dataset (or, with
    ``job.stream``, sends it back in ``Listed`` chunks before the result) and keeps a sample in the
    result. ``files``: on the driver, the ledger's file lists, so that on an object store what it
    knows is deleted by key, without listing (R20)."""
    receipt = job.receipt()
    dry_run = job.run_id is None
    for done in _run(job, list(items), receipt, files):
        if done.listing and (job.stream or job.listing is not None):
            assert done.item is not None
            if job.stream or job.listing is None:
                yield from _chunks(done.item, done.listing)
            else:
                _write_listing(job.listing, done.item, done.listing)
            done = replace(done, listing=done.listing[:LISTING_SAMPLE])
        yield done
    yield from _closing(None if dry_run else receipt)


def _run(job: Job, items: list[Work], receipt: Receipt | None, files: Files | None) -> Iterator[Result]:
    dry_run = job.run_id is None
    # On the driver (``files``), purges go together, several locations listed at once: those the
    # ledger knows files of, then those it knows nothing of, apart, as when those ran on the
    # executors (a batch that fails fails every location with a key in it).
    purges = [i for i in items if isinstance(i, Purge) and files is not None and not dry_run]
    for together in ([i for i in purges if i.listed], [i for i in purges if not i.listed]):
        yield from _purge_together(job, together, receipt, files) if together and files is not None else ()
    done = {i.key for i in purges}  # keys: a list's ``in`` compares whole records, item by item
    for item in items:
        if item.key in done:
            continue
        if isinstance(item, Purge):
            yield _purge_location(job, item, receipt)
        elif isinstance(item, (Expiry, Sweep)):
            yield _delete_folders(job, item, receipt, files)
        elif isinstance(item, Trim):
            yield _trim(job, item, receipt, files)
        elif isinstance(item, StragglerScan):
            yield _scan(job, item, receipt)
        elif isinstance(item, ForeignScan):
            found = fs.foreign_files(job.root, job.at(item), set(item.named))
            yield Result(item, len(found), sum(f.size for f in found), listing=tuple((f.path, f.size) for f in found))
        else:
            yield Result(item, error=f"refused: no such kind of work {item.kind!r}")


class _Listed:
    """One of the ledger's file lists, read when a deletion comes to it (never all at once)."""

    def __init__(self, files: Files, digest: str) -> None:
        self._files, self._digest = files, digest

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._files(self._digest))


def _purge_together(job: Job, items: list[Purge], receipt: Receipt | None, files: Files) -> Iterator[Result]:
    """Dropped tables on an object store, from the driver: each re-checked, then purged together
    (the keys the ledger knows, if any, then what a listing of each location finds, several
    locations listed at once, sharing DeleteObjects batches)."""
    allowed = []
    for item in items:
        refused = item.refusal()
        if refused is not None:
            yield Result(item, error=refused)
        else:
            allowed.append(item)
    if allowed:
        done = fs.purge_each(job.root, [job.at(i) for i in allowed],
                             known=[[_Listed(files, d) for d in i.listed] for i in allowed],
                             siblings=job.siblings, receipt=receipt)
        for item, result in zip(allowed, done):
            yield replace(result, item=item)


def _purge_location(job: Job, item: Purge, receipt: Receipt | None) -> Result:
    refused = None if job.run_id is None else item.refusal()
    if refused is not None:
        return Result(item, error=refused)
    return replace(fs.purge(job.root, job.at(item), dry_run=job.run_id is None, receipt=receipt), item=item)


def _delete_folders(job: Job, item: Expiry | Sweep, receipt: Receipt | None, files: Files | None) -> Result:
    """A table's old (or swept) write folders, several at once: each must lie in the table's own
    ``_writes`` folder (R9), and one that does not refuses them all before any is touched."""
    for folder in item.folders:
        if not folder.path.startswith("_writes/") or "/" in folder.path[len("_writes/"):].strip("/") or \
                ".." in folder.path.split("/"):
            return Result(item, error=f"refused: {folder.path} is not a write folder of {job.at(item)}",
                          listing=() if job.run_id is None else None)
    here = job.at(item)
    known = [_Listed(files, f.listed) if f.listed else None for f in item.folders] \
        if files is not None and storage_for(job.root).keyed else []
    done = fs.delete_folders(job.root, here, [location(here, f.path) for f in item.folders], known,
                             dry_run=job.run_id is None, receipt=receipt)
    return replace(done, item=item)


def _trim(job: Job, item: Trim, receipt: Receipt | None, files: Files | None) -> Result:
    """The files a replace removed, by key, read from the ledger's list as they go: only those in
    write folders the item does not ``skip`` (R9: each inside the table's location). Refused
    where the ledger's lists are not at hand (an executor): a listing would find the files the
    folder keeps too."""
    if files is None:
        return Result(item, error=f"refused: the trim of {item.base_key} deletes what the ledger lists, and its "
                                  "lists are read where the run is driven; nothing was deleted")
    wanted = ((path, size) for path, size in _Listed(files, item.listed) if item.takes(path))
    done = fs.delete_files(job.root, job.at(item), wanted, dry_run=job.run_id is None, look=item.fresh,
                           receipt=receipt)
    return replace(done, item=item)


def _scan(job: Job, item: StragglerScan, receipt: Receipt | None) -> Result:
    """A committed folder's stragglers: what its version does not name, once old enough. Refused
    if what the version names was never read in (``named`` None): nothing would count as named."""
    if item.named is None:
        return Result(item, error=f"refused: the straggler scan of write {item.folder.write_id} does not say what "
                                  "its version names (read in by the ledger's plan); nothing was deleted")
    here = job.at(item)
    done = fs.delete_unnamed(job.root, here, location(here, item.folder.path), set(item.named),
                             item.cutoff / 1e6, dry_run=job.run_id is None, receipt=receipt)
    return replace(done, item=item)


LISTED_CHUNK = 10_000
"""Files of a dry run's listing sent back to the driver in one ``Listed`` (about 1 MB pickled)."""


@dataclass(frozen=True)
class Listed:
    """Part of one item's dry-run listing: the rows of the dry run's dataset, written here
    (``_write_listing``) or on their way back to the driver (``Job.stream``)."""
    item: str
    kind: str
    table_id: str
    entries: tuple[tuple[str, int], ...]

    def table(self) -> Any:
        """As rows of the dataset (columns ``item``, ``kind``, ``table_id``, ``path``, ``size``): a
        pyarrow table (pyarrow: the one library besides the standard one an executor needs, and
        only for a dry run)."""
        import pyarrow as pa
        n = len(self.entries)
        return pa.table({"item": [self.item] * n, "kind": [self.kind] * n, "table_id": [self.table_id] * n,
                         "path": [e[0] for e in self.entries],
                         "size": pa.array([e[1] for e in self.entries], pa.int64())})


def _chunks(item: Work, entries: tuple[tuple[str, int], ...]) -> Iterator[Listed]:
    for start in range(0, len(entries), LISTED_CHUNK):
        yield Listed(item.key, item.kind, item.table_id, entries[start:start + LISTED_CHUNK])


def _write_listing(folder: str, item: Work, entries: tuple[tuple[str, int], ...]) -> None:
    """One item's listing as one Parquet file of the dry run's dataset."""
    import pyarrow.parquet as pq
    name = hashlib.sha256(item.key.encode()).hexdigest()[:24]
    pq.write_table(Listed(item.key, item.kind, item.table_id, entries).table(),
                   os.path.join(folder, f"part-{name}.parquet"))


# --- tables split below the table ------------------------------------------------------------

@dataclass(frozen=True)
class Share:
    """One task's share of a table split below the table: its counts, and whether the table is done
    (nothing left for the finishing task)."""
    item: Purge
    files: int = 0
    bytes: int = 0
    error: str | None = None
    finished: bool = False
    parts: tuple[Part, ...] = ()

    def __add__(self, other: Share) -> Share:
        return Share(self.item, self.files + other.files, self.bytes + other.bytes, self.error or other.error,
                     self.finished or other.finished, self.parts + other.parts)


def look_or_purge(job: Job, items: Iterable[Purge]) -> Iterator[Result | tuple[Purge, int]]:
    """The tables with fewer than two sub-folders purged here and now, several at once
    (``fs.purge_each``), the refused ones reported (each a ``Result``); the bigger ones only counted
    (``(item, pieces)``), for a second job to share out."""
    receipt = job.receipt()
    whole: list[Purge] = []
    for item in items:
        refused = item.refusal()
        if refused is not None:
            yield Result(item, error=refused)
            continue
        pieces = len(fs.pieces(job.root, job.at(item)))
        if pieces < 2:
            whole.append(item)
        else:
            yield item, pieces
    for item, done in zip(whole, fs.purge_each(job.root, [job.at(i) for i in whole], receipt=receipt)):
        yield replace(done, item=item)
    yield from _closing(receipt)


def share_out(job: Job, shares: Iterable[tuple[Purge, int, int]]) -> Iterator[Share]:
    """A task's shares of tables split below the table (``share_task`` each)."""
    for share in shares:
        yield share_task(job, share)


def share_task(job: Job, share: tuple[Purge, int, int]) -> Share:
    """Re-check the table, then delete the sub-folders that are this share's (``share_of_listing``),
    several at once (a table with fewer than two: share 0 purges it whole). One that appears
    meanwhile is left to the final purge of the location."""
    item, share_n, shares = share
    refused = item.refusal()
    if refused is not None:
        return Share(item, error=refused)
    here = job.at(item)
    pieces = fs.pieces(job.root, here)
    receipt = job.receipt()
    if len(pieces) < 2:
        if share_n:
            return Share(item)
        done = _purge_location(job, item, receipt)
        return Share(item, done.files, done.bytes, done.error, True, _parts(receipt))
    folders = share_of_listing(pieces, share_n, shares, not storage_for(job.root).keyed)
    outside = next((f for f in folders if not f.startswith(here.rstrip("/") + "/")), None)
    if outside is not None:
        return Share(item, error=f"refused: {outside} is not inside {here}")
    done = fs.total(fs.purge_each(job.root, folders, keep=True, receipt=receipt))
    return Share(item, done.files, done.bytes, done.error, parts=_parts(receipt))


def _parts(receipt: Receipt | None) -> tuple[Part, ...]:
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


def per_table(shares: Iterable[Share]) -> list[Share]:
    """The shares summed table by table (a few numbers each: the driver sums them between the
    share-out and the finishing job)."""
    summed: dict[str, Share] = {}
    for share in shares:
        key = share.item.key
        summed[key] = summed[key] + share if key in summed else share
    return list(summed.values())


def finish_purges(job: Job, tables: Iterable[Share]) -> Iterator[Result]:
    """A task's tables after their shares (``finish_purge`` each)."""
    for done in tables:
        yield finish_purge(job, done)


def finish_purge(job: Job, done: Share) -> Result:
    """After the shares, purge the rest of the location (or report the first error)."""
    if done.error is not None or done.finished:
        return Result(done.item, done.files, done.bytes, done.error, parts=done.parts)
    receipt = job.receipt()
    more = _purge_location(job, done.item, receipt)
    return Result(done.item, done.files + more.files, done.bytes + more.bytes, more.error,
                  parts=done.parts + _parts(receipt))


# --- can this executor run a vacuum at all ---------------------------------------------------

def preflight(root: str, probe: str, token: str) -> Iterator[str]:
    """What stops this executor from running the vacuum's tasks (an empty answer: nothing).
    Asked of every executor before the ledger records anything: a missing library, a store it
    cannot reach, a warehouse it does not see. Seeing is reading back the probe the driver wrote
    under the root (``probe.leave``): a folder at the root's path is not enough (a server in another
    mount, or on another machine, sees an empty one there, and a vacuum that finds nothing in a
    location records it purged)."""
    where = f"executor {os.uname().nodename} ({sys.executable})"
    try:
        import pyarrow  # noqa: F401  (a dry run's dataset)
    except ImportError as exc:
        yield f"{where}: {type(exc).__name__}: {exc}"
    try:
        if not probe_sees(root, probe, token):
            yield (f"{where} does not see the warehouse {root} the ledger's files are in (a file the driver wrote there "
                   f"is not there for it): the warehouse must be the same place for the driver and every executor, an "
                   "object store both reach or a file system both mount at the same path")
    except ImportError as exc:
        yield f"{where}: {type(exc).__name__}: {exc} (the object-store client, needed for {root})"
    except (StoreError, Unsafe, OSError) as exc:
        yield f"{where}: cannot read {root}: {exc}"
