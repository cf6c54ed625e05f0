"""Listing and deleting one instance's files, and never anything else (R9).

Runs on Spark executors. Every function here takes the warehouse root and one
instance's location, checks that the location is a real folder inside the root
(not a symbolic link out of it, not ``..`` games in a recorded path), and then
walks it without following links: a link inside the folder is removed as a
link, its target is never touched.

Local paths use ``os.scandir`` (pyarrow's local filesystem follows symbolic links
when it lists recursively); object stores (``s3://``, ``gs://``, ``az://``) go through
``spark_ops.objects``: streamed listings and batched deletes by key, each key confined.

Deleting is bound by the file system's latency, not by CPU: one thread unlinking
one file at a time leaves the disk (or the object store) mostly idle. So a purge
lists with one thread and deletes with a small pool of I/O threads
(``DELETE_THREADS``), in batches; every thread checks every path it deletes
against the location it was given. On a local disk, unlinks in one folder queue on
that folder's lock, so a batch is a folder (up to ``FOLDER_BATCH`` files) and the
threads are spread over folders, and ``purge_each`` purges several locations at
once. ``pieces`` splits a big location below the table, so that a single table's
files can be spread over several Spark tasks.
"""

from __future__ import annotations

import errno
import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

from . import objects

if TYPE_CHECKING:
    from .receipts import Receipt


class Unsafe(Exception):
    """A path that is not confined to the instance's location inside the warehouse."""


class FileEntry(NamedTuple):
    path: str
    size: int
    """Bytes; ``UNSIZED`` when listed for deletion without a stat (the deleting thread takes it)."""


UNSIZED = -1


class Outcome(NamedTuple):
    files: int
    bytes: int
    error: str | None
    listing: list[FileEntry] | None  # the files that would go, for a dry run


DELETE_THREADS = 8
"""I/O threads per task deleting files: enough to keep a disk's or an object store's queue
full (8 threads unlink 3-4x faster than one on a local disk), few enough to be polite."""

DELETE_BATCH = 32
"""Files handed to a deleting thread at a time (``Deleter``'s default)."""

FOLDER_BATCH = 1_000
"""Files of one local folder handed to a deleting thread at a time: threads unlinking in the same
folder wait for each other (its lock), so a folder goes to one thread unless it is big."""



class Deleter:
    """Deletes batches of files on a small thread pool while the caller goes on listing.

    ``remove(entry)`` deletes one file and returns the bytes it freed, or None if it was already
    gone (another run got there first: gone, but not counted as ours); an entry listed
    ``UNSIZED`` is measured by the remover, on the pool, not by the lister, whose one thread
    would otherwise stat every file in turn. Every thread checks that each path lies inside
    ``inside`` before it deletes it. At most a few batches wait at a time, so memory
    stays flat however many files are listed. The first error stops further deletions and is
    raised from ``add`` or ``finish``. ``receipt``: told each file deleted, with its size.
    """

    def __init__(self, remove: Callable[[FileEntry], int | None], inside: str,
                 threads: int = DELETE_THREADS, batch: int = DELETE_BATCH, receipt: Receipt | None = None) -> None:
        self._remove, self._inside, self._threads, self._batch_size = remove, inside, threads, batch
        self._receipt = receipt
        self._pool = _pool(threads)
        self._pending: deque[Future[tuple[int, int]]] = deque()
        self._batch: list[FileEntry] = []
        self.files = self.bytes = 0

    def add(self, entry: FileEntry) -> None:
        self._batch.append(entry)
        if len(self._batch) >= self._batch_size:
            self._submit()

    def flush(self) -> None:
        """Hand over what is batched now (the end of a folder: the next batch is another one's)."""
        self._submit()

    def _submit(self) -> None:
        if self._batch:
            self._pending.append(self._pool.submit(self._run, self._batch))
            self._batch = []
        while len(self._pending) > 2 * self._threads:
            self._collect(self._pending.popleft())

    def _run(self, batch: list[FileEntry]) -> tuple[int, int]:
        files = size = 0
        deleted: list[tuple[str, int]] = []
        try:
            for entry in batch:
                if not entry.path.startswith(self._inside):
                    raise Unsafe(f"{entry.path} is outside {self._inside}")
                freed = self._remove(entry)
                if freed is not None:
                    files += 1
                    size += freed
                    deleted.append((entry.path, freed))
        finally:  # what went before an error went all the same
            if self._receipt is not None:
                self._receipt.add_many(deleted)
        return files, size

    def _collect(self, future: Future[tuple[int, int]]) -> None:
        files, size = future.result()
        self.files += files
        self.bytes += size

    def finish(self) -> tuple[int, int]:
        """Wait for every batch; returns (files, bytes) deleted."""
        try:
            self._submit()
            while self._pending:
                self._collect(self._pending.popleft())
        finally:
            self._abandon()
        return self.files, self.bytes

    def _abandon(self) -> None:
        """Cancel what has not started and wait for what has: nothing of ours runs on after us."""
        for future in self._pending:
            future.cancel()
        for future in self._pending:
            if not future.cancelled():
                try:
                    future.result()
                except BaseException:  # the first error was already raised to our caller
                    pass
        self._pending.clear()

    def __enter__(self) -> Deleter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            self._abandon()


_POOLS: dict[tuple[int, int, str], ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(threads: int, purpose: str = "files") -> ThreadPoolExecutor:
    """One pool of I/O threads per process and purpose (a Spark Python worker runs many purges in
    turn): threads are started once, not once per folder. Purges of whole locations run on their
    own pool, since they wait for the deleting one. Keyed by process id too: a forked child
    inherits the parent's pool object but none of its threads."""
    key = (os.getpid(), threads, purpose)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = ThreadPoolExecutor(threads, thread_name_prefix=f"vacuum-{purpose}")
        return pool


def _unlink(entry: FileEntry) -> int | None:
    """Delete a local file; its size (stat here if it was listed unsized), None if already gone."""
    try:
        size = entry.size if entry.size != UNSIZED else os.lstat(entry.path).st_size
        os.unlink(entry.path)
    except FileNotFoundError:
        return None
    return size


def is_local(root: str) -> bool:
    return "://" not in root or root.startswith("file://")


def local_path(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri


def committed_files(root: str, folder: str) -> list[FileEntry]:
    """The data files under ``folder`` (paths relative to it), as Spark's own reader sees them:
    names starting with ``_`` or ``.`` (``_temporary``, ``_SUCCESS``, ``.crc``) at any depth are
    not data. Confined like a purge: inside the root, never through a link."""
    found: list[FileEntry] = []
    if is_local(root):
        real = confine_local(local_path(root), local_path(folder))
        for current, entries in _walk_visible(real):
            found.extend(FileEntry(os.path.relpath(e.path, real), e.size) for e in entries)
    else:
        where = objects.bucket(root)
        prefix = objects.inside(where.key(folder), where.key(root, root=True))
        for obj in objects.listing(root, folder):
            rel = obj.key[len(prefix) + 1:]
            if not any(p.startswith(("_", ".")) for p in rel.split("/")):
                found.append(FileEntry(rel, obj.size))
    return sorted(found)


def _walk_visible(top: str) -> Iterator[tuple[str, list[FileEntry]]]:
    pending = [top]
    while pending:
        folder = pending.pop()
        entries = []
        with os.scandir(folder) as listing:
            for entry in listing:
                if entry.name.startswith(("_", ".")):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    entries.append(FileEntry(entry.path, entry.stat(follow_symlinks=False).st_size))
        yield folder, entries


def delete_unnamed(root: str, location: str, folder: str, named: set[str], cutoff: float, *,
                   dry_run: bool, receipt: Receipt | None = None) -> tuple[Outcome, int]:
    """Delete (or list) the files in a committed write's ``folder`` that its version does not name
    (``named``, relative to ``location``) and that were last modified at or before ``cutoff``
    (seconds since the epoch, on the ledger's clock): stragglers. Returns the outcome and how
    many unnamed files were left because they are younger than that. Never raises."""
    try:
        if not is_local(root):
            return _delete_unnamed_remote(root, location, folder, named, cutoff, dry_run, receipt)
        real = confine_local(local_path(root), local_path(folder))
        base = local_path(location).rstrip("/")
        if not real.startswith(base + os.sep):
            raise Unsafe(f"{folder} is not inside {location}")
        files = size = left = 0
        listing: list[FileEntry] | None = [] if dry_run else None
        for _, entries in walk_local(real):
            for entry in entries:
                rel = os.path.relpath(entry.path, base)
                if rel in named:
                    continue
                if os.lstat(entry.path).st_mtime > cutoff:
                    left += 1
                    continue
                if _remove(entry, listing):
                    files += 1
                    size += entry.size
                    if receipt is not None:
                        receipt.add(entry.path, entry.size)
        return Outcome(files, size, None, listing), left
    except Unsafe as exc:
        return Outcome(0, 0, f"refused: {exc}", None), 0
    except OSError as exc:
        return Outcome(0, 0, f"{type(exc).__name__}: {exc}", None), 0


def _delete_unnamed_remote(root: str, location: str, folder: str, named: set[str], cutoff: float,
                           dry_run: bool, receipt: Receipt | None) -> tuple[Outcome, int]:
    """``delete_unnamed`` on an object store: ages from the store's own LastModified; the files
    listed for deletion go out in batches (``objects.Batches``)."""
    where = objects.bucket(root)
    home = objects.inside(where.key(location), where.key(root, root=True))
    prefix = objects.inside(where.key(folder), home + "/_writes")
    listing: list[FileEntry] | None = [] if dry_run else None
    totals, left = objects.Totals(), 0
    batches = objects.Batches(where, receipt)
    for page in where.pages(prefix):
        for obj in page:
            objects.inside(obj.key, prefix)
            if obj.key[len(home) + 1:] in named:
                continue
            if obj.modified > cutoff:
                left += 1
            elif listing is not None:
                listing.append(FileEntry(f"{where.scheme}://{where.name}/{obj.key}", obj.size))
            else:
                batches.add(obj.key, obj.size, totals, prefix)
    batches.finish()
    if listing is not None:
        return Outcome(len(listing), sum(e.size for e in listing), None, listing), left
    return Outcome(totals.files, totals.bytes, totals.error, None), left


def foreign_files(root: str, location: str, named: set[str]) -> list[FileEntry]:
    """Data files in a table's location outside every write folder that no version names (adopted
    ones do): someone put them there without the ledger. Reported; never swept."""
    try:
        if is_local(root) and not os.path.isdir(local_path(location)):
            return []
        return [f for f in committed_files(root, location) if f.path not in named]
    except (Unsafe, OSError):
        return []


def first_missing(root: str, paths: list[str]) -> str | None:
    """The first of ``paths`` that is not a file, or None when all are there."""
    if is_local(root):
        return next((p for p in paths if not os.path.isfile(local_path(p))), None)
    if not paths:
        return None
    # One listing (a request per 1,000 keys) of each folder the paths are in, not a request per path.
    where = objects.bucket(root)
    present: set[str] = set()
    for folder in sorted({p.rsplit("/", 1)[0] for p in paths}):
        present.update(f"{where.scheme}://{where.name}/{o.key}" for o in objects.listing(root, folder))
    return next((p for p in paths if p not in present), None)


def usage(root: str, location: str) -> tuple[int, int]:
    """How many files lie under a location, and their total size (a dry run's listing, summed)."""
    outcome = purge(root, location, dry_run=True)
    return (0, 0) if outcome.error else (outcome.files, outcome.bytes)


def purge_each(root: str, locations: list[str], *, dry_run: bool = False, keep: bool = False,
               receipt: Receipt | None = None) -> list[Outcome]:
    """``purge`` of several locations, up to ``DELETE_THREADS`` at once (each deleting on the shared
    pool): a task with many small tables keeps the disk as busy as one with a big one."""
    if len(locations) < 2:
        return [purge(root, location, dry_run=dry_run, keep=keep, receipt=receipt) for location in locations]
    if not is_local(root) and not dry_run:  # their keys share DeleteObjects batches
        return [Outcome(files, size, error, None)
                for files, size, error in objects.purge(root, locations, receipt=receipt)]
    return list(_pool(DELETE_THREADS, "locations").map(
        lambda at: purge(root, at, dry_run=dry_run, keep=keep, receipt=receipt), locations))


def purge(root: str, location: str, *, dry_run: bool, keep: bool = False, receipt: Receipt | None = None) -> Outcome:
    """Delete (or, for a dry run, list) every file under ``location``; never raises. ``keep``: on a
    local disk, leave the (emptied) folder ``location`` itself, for a later purge of its parent.
    ``receipt``: told every file deleted."""
    try:
        if is_local(root):
            return _purge_local(local_path(root), local_path(location), dry_run, keep, receipt)
        if dry_run:
            listed = [FileEntry(f"{location.split('://', 1)[0]}://{objects.bucket(root).name}/{o.key}", o.size)
                      for o in objects.listing(root, location)]
            return Outcome(len(listed), sum(e.size for e in listed), None, listed)
        files, size, error = objects.purge(root, [location], receipt=receipt)[0]
        return Outcome(files, size, error, None)
    except (Unsafe, objects.Unsafe) as exc:
        return Outcome(0, 0, f"refused: {exc}", None)
    except (OSError, objects.StoreError) as exc:
        return Outcome(0, 0, f"{type(exc).__name__}: {exc}", None)


# --- local folders -------------------------------------------------------------------------

def confine_local(root: str, location: str) -> str:
    """The real path of ``location`` if it is a folder strictly inside ``root``; else Unsafe."""
    root_real = os.path.realpath(root)
    if os.path.normpath(location) != location.rstrip("/") or not location.startswith(root_real + os.sep):
        raise Unsafe(f"{location} is not a plain path inside the warehouse {root_real}")
    if os.path.islink(location):
        raise Unsafe(f"{location} is a symbolic link; a vacuum never follows one")
    real = os.path.realpath(location)
    if real != location.rstrip("/"):
        raise Unsafe(f"{location} resolves to {real}, through a symbolic link")
    return real


def walk_local(location: str, *, sizes: bool = True) -> Iterator[tuple[str, list[FileEntry]]]:
    """Each folder under ``location`` (deepest last) with its non-folder entries; links not
    followed. Without ``sizes`` the entries are ``UNSIZED``: listing then costs no call per file."""
    pending = [location]
    while pending:
        folder = pending.pop()
        if os.path.realpath(folder) != folder:  # swapped for a link while we walked
            raise Unsafe(f"{folder} turned into a symbolic link during the walk")
        entries: list[FileEntry] = []
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    else:
                        entries.append(FileEntry(
                            entry.path, entry.stat(follow_symlinks=False).st_size if sizes else UNSIZED))
        except FileNotFoundError:
            continue
        yield folder, entries


def _remove(entry: FileEntry, listing: list[FileEntry] | None) -> bool:
    """Unlink a file (or, for a dry run, list it). False if another run deleted it first: it is
    gone, but not counted as ours."""
    if listing is not None:
        listing.append(entry)
        return True
    try:
        os.unlink(entry.path)
    except FileNotFoundError:
        return False
    return True


def _purge_local(root: str, location: str, dry_run: bool, keep: bool = False,
                 receipt: Receipt | None = None) -> Outcome:
    real = confine_local(root, location)
    if not os.path.lexists(real):
        return Outcome(0, 0, None, [] if dry_run else None)
    if dry_run:
        listing = [entry for _, entries in walk_local(real) for entry in entries
                   if _inside(entry, real)]
        return Outcome(len(listing), sum(e.size for e in listing), None, listing)
    folders: list[str] = []
    with Deleter(_unlink, real + os.sep, batch=FOLDER_BATCH, receipt=receipt) as deleter:
        for folder, entries in walk_local(real, sizes=False):
            folders.append(folder)
            for entry in entries:
                deleter.add(entry)
            deleter.flush()
        files, size = deleter.finish()
    for folder in reversed(folders):  # children were found after their parents
        if keep and folder == real:
            continue
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return Outcome(files, size, f"{folder} gained new files during the vacuum", None)
            raise
    return Outcome(files, size, None, None)


def _inside(entry: FileEntry, real: str) -> bool:
    if not entry.path.startswith(real + os.sep):
        raise Unsafe(f"{entry.path} is outside {real}")
    return True


def pieces(root: str, location: str, depth: int = 2) -> list[str]:
    """The sub-folders ``depth`` levels below ``location`` (shallower ones where the tree is
    shallower), each a separate piece of work for ``purge``: a big table's write folders or
    partitions, spread over several tasks. Whatever lies above them (files at the top, empty
    folders) is left to the final ``purge`` of the whole location. Confined like a purge."""
    try:
        if is_local(root):
            real = confine_local(local_path(root), local_path(location))
            if not os.path.isdir(real):
                return []
            level = [real]
            for _ in range(depth):
                below: list[str] = []
                for folder in level:
                    try:
                        with os.scandir(folder) as listing:
                            below.extend(e.path for e in listing if e.is_dir(follow_symlinks=False))
                    except FileNotFoundError:
                        continue  # purged by another share meanwhile: the others are still pieces
                if not below:
                    break
                level = below
            head = location[:len(location) - len(local_path(location))]  # "file://" if it had one
            return [] if level == [real] else [head + p for p in level]
        where = objects.bucket(root)
        base = objects.inside(where.key(location), where.key(root, root=True))
        level = [base]
        for _ in range(depth):
            below = [sub for folder in level for sub in where.folders(folder)]
            if not below:
                break
            level = below
        return [] if level == [base] else [f"{where.scheme}://{where.name}/{p}" for p in level]
    except (Unsafe, OSError, objects.Unsafe, objects.StoreError):
        return []  # the whole-location purge that follows reports it
