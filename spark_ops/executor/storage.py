"""Where a warehouse's files are, chosen once from its root: a local disk or an object store.

A vacuum asks the same few things of wherever its files are (``Storage``): confine a location to
the root (R9), list what lies under it a page at a time, delete entries in batches, list the
folders right under one, and, where the store has folders, remove the emptied ones.
``disk.LocalDisk`` answers on a local (or shared) file system, ``objects.ObjectStore`` on S3, GCS
or Azure; ``stores.storage_for(root)`` picks one, and everything above it (``fs``, ``tasks``,
``receipts``) is written once against the answers.

Each storage names files its own way: a real absolute path on a disk, a key of the bucket on a
store (``uri`` gives back what a user sees). A name is checked against the folder it was planned
under before it joins a batch (``inside``).

Deleting is bound by the store's latency, not by CPU: one thread deleting one file at a time
leaves a disk or a store mostly idle. So the ``Deleter`` here deletes on a small pool of I/O
threads while the caller goes on listing, for both.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Protocol, TypeVar



class Recorder(Protocol):
    """What a ``Deleter`` tells of each file it deleted (``receipts.DeletionLog``: a receipt's leaves)."""

    def add_many(self, entries: Iterable[tuple[str, int]], /) -> None: ...


class Unsafe(Exception):
    """A location, path or key that is not confined to where it was planned, inside the warehouse (R9)."""


class StoreError(Exception):
    """The store would not do something after every retry; the message says what and why."""


class StoredFile(NamedTuple):
    """One file as a storage lists it: its name there (a path, a key, or one relative to a folder),
    its size and when it was last modified (the ledger's ``FileEntry`` is a version's file, named
    relative to its table)."""
    path: str
    size: int
    """Bytes; ``UNSIZED`` when listed without a stat (the deleting thread takes it)."""
    modified: float | None = None
    """Seconds since the epoch by the store's own clock (a file's mtime, S3's LastModified), where listed."""


UNSIZED = -1

BATCH = 1_000
"""Entries a deletion batch holds at most: S3's DeleteObjects limit; on a disk, files of one folder."""

AHEAD = 2
"""Batches a ``Deleter`` holds beyond those its threads are deleting. Its lister is far quicker than a
delete (a ledger's list gives 1,000 keys in about a millisecond; a store's listing page comes in one
request, as a delete does), so two keep every thread busy. Each more is 1,000 names held, 0.2 MB of
a driver's heap (R20): twice ``threads`` were 16,000, which a vacuum of 20,000 known files never
filled and one of 200,000 always did (its peak grew with the files, 5.5 MB to 7.5 MB)."""


def hidden(relative: str) -> bool:
    """Whether Spark's reader skips this path: a name starting with ``_`` or ``.`` at any depth
    (``_temporary``, ``_SUCCESS``, ``.crc``, a table's ``_writes``) is not data."""
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


class Storage(ABC):
    """What a vacuum asks of where a warehouse's files are. ``root``: the warehouse root, as given.

    Built once per job (``tasks.Job.store``) and passed down; pickled, it is its root, and is built
    again where it lands (an executor's settings, such as its deletes in flight, are its own).

    The questions of policy, where a disk and a store differ, are asked of it, never of which it
    is: ``deletes_by_key``, ``splits_below_table``, ``tasks_per_core``, ``shares_batches``,
    ``looks_again``, ``share``."""

    root: str
    keyed: bool
    """True on an object store: a delete by key is cheap, a listing is a request, and there are no
    folders. False on a disk, whose folders are real and whose unlinks in one folder queue on its
    lock. The fact the policies below follow: ask them."""
    deletes_by_key: bool
    """What the ledger knows lies in a location is deleted by key, without listing it, and from the
    driver, where the ledger's lists are (a store: a listing is a request, and a delete of 1,000
    keys one more). On a disk a listing is cheap and a delete a system call a file: the executors
    list and delete."""
    splits_below_table: bool
    """A big dropped table is purged split below the table, its sub-folders shared out over the
    cores (a disk: deleting is a system call a file). On a store each location is one streamed
    listing, its pages deleted in batches as they arrive: split, the store answered a listing per
    folder and another to prove each empty (421 listings for 20,000 objects in 200 folders, where
    21 do)."""
    tasks_per_core: int
    """Tasks a job gives each core: a few where each task deletes alone (enough for the progress bar
    to move in steps and for work to balance); one on a store, where a task keeps several batches
    in flight itself."""
    shares_batches: bool
    """Pages of several folders share a deletion batch (a store: a hundred small tables are a few
    requests); on a disk a page is one folder, whose unlinks queue on its lock, a batch of its own."""
    base: str
    """The root's own name here (a real path; a key prefix, ``""`` for a whole bucket)."""
    threads: int
    """Deletion batches in flight at once."""

    @abstractmethod
    def confine(self, location: str, within: str | None = None) -> str:
        """The name of ``location`` (a path or URI) if it lies strictly inside ``within`` (a name;
        by default the root) and is plain (no ``..``, no symbolic link); else ``Unsafe``."""

    @abstractmethod
    def inside(self, name: str, within: str) -> None:
        """``Unsafe`` unless the listed ``name`` lies strictly inside the name ``within``."""

    @abstractmethod
    def pages(self, where: str, *, sizes: bool = True, visible: bool = False) -> Iterator[list[StoredFile]]:
        """Every file under the name ``where``, a page at a time, never through a link; nothing if it
        is not there. Without ``sizes`` a disk lists ``UNSIZED`` (no call per file); ``visible``:
        only what Spark's reader sees as data (no ``hidden`` name, regular files)."""

    @abstractmethod
    def folders(self, where: str) -> list[str]:
        """The names of the folders right under ``where`` (a store's common prefixes)."""

    @abstractmethod
    def delete(self, batch: list[StoredFile]) -> tuple[list[int | None], str | None]:
        """Delete one batch: for each entry the bytes it freed, or None if it is not known gone by
        this call (already gone: another run's; or still there), and the first error."""

    @abstractmethod
    def present(self, names: list[str]) -> set[str]:
        """Which of ``names`` are there now (a look at each: a store answers "deleted" for a key
        already gone, so what a stopped run may have deleted is looked at before it is counted)."""

    @abstractmethod
    def settle(self, where: str, *, keep: bool = False) -> str | None:
        """After ``where`` was emptied: a fresh look that finds nothing, the emptied folders removed
        where the store has folders (``keep``: ``where`` itself stays). Else why it is not clean."""

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.root,)

    def name(self, relative: str) -> str:
        """The name here of ``relative``, a path under the root."""
        return f"{self.base}/{relative}" if self.base else relative

    @abstractmethod
    def looks_again(self, found: int, *, known: bool, verify: bool) -> bool:
        """Whether a folder just emptied needs a fresh look (``settle``): it was listed and ``found``
        files, ``known`` whether the ledger's lists named what lay there, ``verify`` whether even
        then a look must prove it empty."""

    @abstractmethod
    def share(self, pieces: list[str], share: int, shares: int) -> list[str]:
        """The sub-folders share ``share`` of ``shares`` deletes, out of a listing it made itself
        while other shares delete. Every share must pick from the same listing, or a folder may fall
        between two (and be left, with all such, to the one task that finishes the location)."""

    def still_holding(self, names: list[str], siblings: int) -> set[str]:
        """Which of the emptied ``names`` may still hold anything (all, unless one look at their
        parent, which holds about ``siblings`` folders, is cheaper than one at each)."""
        return set(names)

    @abstractmethod
    def uri(self, name: str) -> str:
        """A name as a user (and Spark) sees it: a path, or ``scheme://bucket/key``."""

    @abstractmethod
    def first_missing(self, uris: list[str]) -> str | None:
        """The first of ``uris`` that is not a file here, or None when all are there."""

    @abstractmethod
    def absent(self, location: str) -> bool:
        """Whether ``location`` is known, without a request, to be no folder here (a store cannot
        say without asking: never)."""

    @abstractmethod
    def put(self, name: str, data: bytes) -> None:
        """One file written whole (a receipt's part, waiting for the driver)."""

    @abstractmethod
    def get(self, name: str) -> bytes: ...

    @abstractmethod
    def remove(self, names: Iterable[str]) -> None:
        """Files removed each by its own name (a receipt's parts, once recorded: no listing, never
        a batch), and the folders they leave empty; what is not there is not an error."""


class Totals:
    """What one location (or folder) had deleted: files, bytes, and the first error."""

    __slots__ = ("files", "bytes", "error")

    def __init__(self) -> None:
        self.files = self.bytes = 0
        self.error: str | None = None

    def failed(self, error: str | None) -> None:
        self.error = self.error or error


class Deleter:
    """Entries deleted in batches on a small pool of I/O threads while the caller goes on listing.

    ``add(page, totals, within)`` checks that every entry lies inside ``within`` (R9) before any
    joins a batch, and counts to ``totals`` what the storage says each batch deleted (and the
    ``receipt`` is told each). On a keyed store the pages of several locations share batches (a
    hundred small tables are a few requests); on a disk a page is one folder, whose unlinks queue
    on its lock, so it goes to one thread as a batch of its own. At most ``AHEAD`` batches more
    than ``threads`` are held, so memory stays flat however many entries are listed. Leaving the
    ``with`` block waits for every batch: nothing of ours runs on after the call.
    """

    def __init__(self, store: Storage, receipt: Recorder | None = None) -> None:
        self._store, self._receipt = store, receipt
        self._pool = pool("delete", store.threads)
        self._entries: list[StoredFile] = []
        self._owners: list[Totals] = []
        self._pending: deque[Future[None]] = deque()
        self._lock = threading.Lock()

    def add(self, page: list[StoredFile], totals: Totals, within: str) -> None:
        for entry in page:
            self._store.inside(entry.path, within)
        with self._lock:
            self._entries += page
            self._owners += [totals] * len(page)
            ready = self._take(everything=not self._store.shares_batches)
        for batch in ready:
            self._submit(*batch)

    def _take(self, *, everything: bool) -> list[tuple[list[StoredFile], list[Totals]]]:
        """The full batches gathered (and, with ``everything``, the last one too); call with the lock."""
        ready = []
        while len(self._entries) >= BATCH or (everything and self._entries):
            ready.append((self._entries[:BATCH], self._owners[:BATCH]))
            del self._entries[:BATCH], self._owners[:BATCH]
        return ready

    def _submit(self, entries: list[StoredFile], owners: list[Totals]) -> None:
        """Hand a batch to the threads. A lister ahead of the deletes first waits for a batch to end:
        the first to end, not the oldest, so that one batch sent again with backoff holds up no other."""
        while True:
            with self._lock:
                ended = [future for future in self._pending if future.done()]
                for future in ended:
                    self._pending.remove(future)
                room = len(self._pending) < self._store.threads + AHEAD
                if room and not ended:
                    self._pending.append(self._pool.submit(self._run, entries, owners))
                    return
                held = list(self._pending)
            failed = next((exc for exc in map(Future.exception, ended) if exc is not None), None)
            if failed is not None:  # a batch's own error ends the listing, as it always did
                raise failed
            if not room:
                wait(held, return_when=FIRST_COMPLETED)

    def _run(self, entries: list[StoredFile], owners: list[Totals]) -> None:
        freed, error = self._store.delete(entries)
        with self._lock:
            for totals, size in zip(owners, freed):
                if size is not None:
                    totals.files += 1
                    totals.bytes += size
            if error is not None:  # only the locations with a key not known gone: the others are done
                for totals in {t for t, size in zip(owners, freed) if size is None}:
                    totals.failed(error)
        if self._receipt is not None:
            self._receipt.add_many((e.path, size) for e, size in zip(entries, freed) if size is not None)

    def finish(self) -> None:
        """Send what is gathered and wait for every batch (the deleter can be used again)."""
        with self._lock:
            ready = self._take(everything=True)
        for batch in ready:
            self._submit(*batch)
        while True:
            with self._lock:
                if not self._pending:
                    return
                future = self._pending.popleft()
            future.result()

    def __enter__(self) -> Deleter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


_POOLS: dict[tuple[int, str, int], ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def pool(purpose: str, threads: int) -> ThreadPoolExecutor:
    """One pool of I/O threads per process and purpose (a Spark Python worker runs many tasks in
    turn): threads are started once, not once per call. Keyed by process id too: a forked child
    inherits the parent's pool object but none of its threads."""
    key = (os.getpid(), purpose, threads)
    with _POOLS_LOCK:
        found = _POOLS.get(key)
        if found is None:
            found = _POOLS[key] = ThreadPoolExecutor(threads, thread_name_prefix=f"vacuum-{purpose}")
        return found


LISTERS = 8
"""Locations listed at once: a task with many small tables keeps the store as busy as one with a big one."""

T = TypeVar("T")


def each(call: Callable[[T], Any], items: list[T]) -> list[Any]:
    """``call`` of every item, up to ``LISTERS`` at once (listings are round trips too)."""
    if len(items) < 2:
        return [call(item) for item in items]
    return list(pool("list", LISTERS).map(call, items))
