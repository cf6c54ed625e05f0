"""What a vacuum's tasks do with the plan's items (``vacuum_work``): re-check each, then delete.

Every function here is handed to Spark by reference (``functools.partial`` of a function of
this module, never a lambda of the driver's), so an executor needs this package and
``vacuum_work`` and nothing of the ledger (R19). What each kind of item does is its runner's
(``dispatch``, which says what every runner re-checks).

Three shapes of work, each answering with ``vacuum_work.Result``:

* ``run_items``: whole items, several a task, of any kind (on the driver too, with the ledger's
  lists at hand: trims, and on an object store what the ledger knows);
* ``look_or_purge``, then ``share_task`` and ``finish_purge`` of each: dropped tables split below
  the table, their sub-folders shared out over several tasks (``Share``: which share of which
  table), each share's result naming its part, the results summed per table on the driver between;
* ``preflight``: can this executor run the rest at all.

Each takes a task's slice of the items and yields what goes back; ``on_spark`` runs it in a Spark
task on either kind of session.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, TypeVar

from vacuum_work import Item, Part, Purge, Result

from . import dispatch, fs, runners  # noqa: F401  (runners: every kind's runner registers itself)
from .job import Files, Job
from .probe import sees as probe_sees
from .receipts import DeletionLog
from .run_purge import purge_location
from .storage import StoreError, Unsafe

__all__ = ["Files", "Job", "Listed", "Share", "each", "finish_purge", "look_or_purge", "per_table", "preflight",
           "run_items", "share_task"]

T = TypeVar("T")

LISTING_SAMPLE = 20
"""Files of each item sent back to the driver when a dry run's listing goes to its dataset."""


def _closing(receipt: DeletionLog | None) -> Iterator[Result]:
    """The result a task ends with to hand over its receipt's parts (it names no item)."""
    if receipt is not None:
        yield Result(None, parts=_parts(receipt))


# --- whole items ---------------------------------------------------------------------------

def run_items(job: Job, items: Iterable[Item], *, files: Files | None = None) -> Iterator[Result | Listed]:
    """Each item's result; a dry run writes each item's listing to the job's dataset (or, with
    ``job.stream``, sends it back in ``Listed`` chunks before the result) and keeps a sample in the
    result. ``files``: on the driver, the ledger's file lists, so that on an object store what it
    knows is deleted by key, without listing (R20)."""
    receipt = job.receipt()
    for done in dispatch.run(dispatch.Task(job, receipt, files), items):
        if done.listing and (job.stream or job.listing is not None):
            assert done.item is not None
            if job.stream or job.listing is None:
                yield from _chunks(done.item, done.listing)
            else:
                _write_listing(job.listing, done.item, done.listing)
            done = replace(done, listing=done.listing[:LISTING_SAMPLE])
        yield done
    yield from _closing(None if job.dry_run else receipt)


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


def _chunks(item: Item, entries: tuple[tuple[str, int], ...]) -> Iterator[Listed]:
    for start in range(0, len(entries), LISTED_CHUNK):
        yield Listed(item.key, item.kind, item.table_id, entries[start:start + LISTED_CHUNK])


def _write_listing(folder: str, item: Item, entries: tuple[tuple[str, int], ...]) -> None:
    """One item's listing as one Parquet file of the dry run's dataset."""
    import pyarrow.parquet as pq
    name = hashlib.sha256(item.key.encode()).hexdigest()[:24]
    pq.write_table(Listed(item.key, item.kind, item.table_id, entries).table(),
                   os.path.join(folder, f"part-{name}.parquet"))


# --- tables split below the table ------------------------------------------------------------

@dataclass(frozen=True)
class Share:
    """Which share of a table split below the table a task deletes: share ``n`` of ``of``."""
    item: Purge
    n: int
    of: int


def look_or_purge(job: Job, items: Iterable[Purge]) -> Iterator[Result | tuple[Purge, int]]:
    """The tables with fewer than two sub-folders purged here and now, several at once
    (``fs.purge_each``), the refused ones reported (each a ``Result``); the bigger ones only counted
    (``(item, pieces)``), for a second job to share out."""
    receipt = job.receipt()
    items = list(items)
    yield from (Result(i, error=i.refusal()) for i in items if i.refusal() is not None)
    whole: list[Purge] = []
    for item in (i for i in items if i.refusal() is None):
        pieces = len(fs.pieces(job.store, job.at(item)))
        if pieces < 2:
            whole.append(item)
        else:
            yield item, pieces
    for item, done in zip(whole, fs.purge_each(job.store, [job.at(i) for i in whole], receipt=receipt)):
        yield replace(done, item=item)
    yield from _closing(receipt)


def each(one: Callable[[Job, T], Result], job: Job, items: Iterable[T]) -> Iterator[Result]:
    """A task's ``one`` of each of its items (``share_task`` of shares, ``finish_purge`` of tables)."""
    return (one(job, item) for item in items)


def share_task(job: Job, share: Share) -> Result:
    """Re-check the table, then delete the sub-folders that are this share's (``Storage.share``),
    several at once. Its result names part ``share.n`` of the purge; a table with fewer than two
    sub-folders is purged whole by share 0, whose result then names the whole purge (nothing is
    left for the finishing task). A sub-folder that appears meanwhile is left to the final purge of
    the location."""
    item, part = share.item, replace(share.item, part=share.n)
    refused = item.refusal()
    if refused is not None:
        return Result(part, error=refused)
    here = job.at(item)
    pieces = fs.pieces(job.store, here)
    receipt = job.receipt()
    if len(pieces) < 2:
        if share.n:
            return Result(part)
        done = purge_location(job, item, receipt)
        return replace(done, parts=_parts(receipt))
    folders = job.store.share(pieces, share.n, share.of)
    outside = next((f for f in folders if not f.startswith(here.rstrip("/") + "/")), None)
    if outside is not None:
        return Result(part, error=f"refused: {outside} is not inside {here}")
    done = fs.total(fs.purge_each(job.store, folders, keep=True, receipt=receipt))
    return replace(done, item=part, parts=_parts(receipt))


def _parts(receipt: DeletionLog | None) -> tuple[Part, ...]:
    return () if receipt is None else receipt.close()


def per_table(shares: Iterable[Result]) -> list[Result]:
    """The shares' results summed table by table (a few numbers each: the driver sums them between
    the share-out and the finishing job). A sum names the whole purge if one of its shares purged
    the table whole, else a part of it (the finishing task has the rest to do)."""
    summed: dict[str, Result] = {}
    for share in shares:
        assert share.item is not None
        key = share.item.base_key
        if key not in summed:
            summed[key] = share
        else:
            whole = share if share.item.part is None else summed[key]
            summed[key] = replace(summed[key] + share, item=whole.item)
    return list(summed.values())


def finish_purge(job: Job, done: Result) -> Result:
    """After the shares (``done``: their results summed), purge the rest of the location (or report
    the first error); the result names the whole purge."""
    assert isinstance(done.item, Purge)
    item = replace(done.item, part=None)
    if done.error is not None or done.item.part is None:
        return replace(done, item=item)
    receipt = job.receipt()
    more = purge_location(job, item, receipt)
    return Result(item, done.files + more.files, done.bytes + more.bytes, more.error,
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
