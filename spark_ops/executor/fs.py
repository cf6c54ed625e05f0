"""A location's files, wherever they are: purged, listed, split into pieces, stragglers swept (R9, R20).

Runs on executors (and on the driver, for what the ledger knows on an object store). Every
function takes the warehouse's ``Storage`` (a job's, built once; or, for a one-off call, its root)
and a location (or folder) in it, and does the same on a local disk and on an object store: it confines
the location to the root before it looks (R9), hands each page of a listing to the ``Deleter``
as it arrives (a listing never waits for the deletes, and nothing is held whole), deletes what
the ledger already knows by name without listing, and takes a location for clean only when a
fresh look finds nothing left (R20). Except ``committed_files`` and ``first_missing`` (whose callers,
a read and a check of a version's files, want the store's own error), none raises: the first error
comes back in the ``Result``.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from vacuum_work import Result

from .storage import BATCH, Deleter, Storage, StoredFile, StoreError, Totals, Unsafe, each
from .stores import of

if TYPE_CHECKING:
    from .receipts import DeletionLog

__all__ = ["StoredFile", "Unsafe", "committed_files", "delete_files", "delete_folders", "delete_unnamed", "first_missing",
           "foreign_files", "pieces", "purge", "purge_each", "total", "usage"]

Known = Sequence[Iterable[tuple[str, int]] | None]
"""What the ledger knows lies in a location: file lists of ``(path, size)``, paths relative to the
location (None where it knows nothing), read from the ledger one at a time as they are deleted."""


def purge(store: Storage | str, location: str, *, dry_run: bool, keep: bool = False, receipt: DeletionLog | None = None) -> Result:
    """Delete (or, for a dry run, list) every file under ``location``. ``keep``: on a disk, leave
    the emptied folder itself, for a later purge of its parent. ``receipt``: told every file deleted."""
    return purge_each(store, [location], dry_run=dry_run, keep=keep, receipt=receipt)[0]


def purge_each(store: Storage | str, locations: list[str], *, dry_run: bool = False, keep: bool = False,
               known: list[Known] | None = None, siblings: int | None = None,
               receipt: DeletionLog | None = None) -> list[Result]:
    """``purge`` of several locations, listed a few at once, their deletes sharing batches (a task
    with many small tables keeps the store as busy as one with a big one). ``known``: for each
    location, what the ledger knows lies there, deleted first, without listing; then each location
    is listed for what only the store knows. ``siblings``: about how many folders the locations'
    parent holds; when many were emptied by name, one look at the parent may say which still hold
    anything (``Storage.still_holding``)."""
    totals = [Totals() for _ in locations]
    try:
        store = of(store)
    except (Unsafe, StoreError) as exc:
        return [Result(None, error=_why(exc)) for _ in locations]
    wheres = _confine(store, locations, totals)
    if dry_run:
        listings = each(lambda job: _list(store, *job), list(zip(wheres, totals)))
        return [_result(found, listing) for found, listing in zip(totals, listings)]
    jobs = [(where, found, _named(where, lists))
            for where, found, lists in zip(wheres, totals, known or [()] * len(locations)) if where is not None]
    _delete(store, jobs, receipt, siblings=siblings, keep=keep, verify=True)
    return [_result(found) for found in totals]


def delete_folders(store: Storage | str, location: str, folders: list[str], known: Known, *, dry_run: bool,
                   receipt: DeletionLog | None = None) -> Result:
    """A table's write folders (an expiry's or a sweep's), their counts added up. ``known``: for each
    folder the ledger's stored list of its files (paths relative to ``location``; None where it has
    none), deleted by name without listing; then each folder is listed for what only the store
    knows (Spark's ``_SUCCESS``, a late task's file). A committed write's folder gains nothing after
    its commit, so that listing is its last look. A folder with no list (an abandoned write's, whose
    zombie task may still be writing, or one a stopped run began) is listed and, if that found
    anything, looked at afresh once emptied: it is clean only if that look finds nothing (R15)."""
    if not known or dry_run:
        return total(purge_each(store, folders, dry_run=dry_run, receipt=receipt))
    found = Totals()
    try:
        store = of(store)
        home = store.confine(location)
        jobs = [(store.confine(folder, within=home), found, _named(home, [data]))
                for folder, data in zip(folders, known)]
    except (Unsafe, StoreError) as exc:
        return Result(None, error=_why(exc))
    _delete(store, jobs, receipt, verify=False)
    return _result(found)


def _delete(store: Storage, jobs: list[tuple[str, Totals, Iterator[StoredFile] | None]], receipt: DeletionLog | None, *,
            siblings: int | None = None, keep: bool = False, verify: bool) -> None:
    """Empty each job's folder (its name, its totals, the files the ledger knows lie there): the
    known files first, by name; then what a listing finds; then a fresh look (on a disk always,
    since it removes the emptied folders; on a store for every folder the ledger knows no files of,
    and with ``verify`` for the others too). A store's listing that found nothing was itself the
    fresh look. The known files are read a list at a time as they go (the driver's memory does not
    grow with how many the ledger knows, R20)."""
    with Deleter(store, receipt) as deleter:
        if any(named is not None for _, _, named in jobs):
            for where, found, named in jobs:
                if named is not None:
                    _add(deleter, named, found, where)
            deleter.finish()  # gone before the listings, which would find them again
            if siblings is not None:
                holding = store.still_holding([where for where, _, _ in jobs], siblings)
                jobs = [job for job in jobs if job[0] in holding]
        seen = each(lambda job: _empty(store, deleter, job[0], job[1]), jobs)
    looks = [job for job, n in zip(jobs, seen) if store.looks_again(n, known=job[2] is not None, verify=verify)]
    each(lambda job: _settle(store, job[0], job[1], keep=keep), looks)


def _empty(store: Storage, deleter: Deleter, where: str, found: Totals) -> int:
    """List ``where`` a page at a time, each page to the deleter; how many files it found."""
    seen = 0
    with _failing(found):
        for page in store.pages(where, sizes=False):  # a disk: no stat while listing (the deleting thread takes it)
            deleter.add(page, found, where)
            seen += len(page)
    return seen


def _settle(store: Storage, where: str, found: Totals, *, keep: bool) -> None:
    if found.error is None:
        with _failing(found):
            found.failed(store.settle(where, keep=keep))


def _named(home: str, lists: Iterable[Iterable[tuple[str, int]] | None]) -> Iterator[StoredFile] | None:
    """The files the ledger's lists name, paths relative to the location ``home``, read as they are
    deleted; None where the ledger knows of none."""
    lists = list(lists)
    if all(listed is None for listed in lists):
        return None
    return (StoredFile(f"{home}/{path}", size) for listed in lists for path, size in listed or ())


def _add(deleter: Deleter, entries: Iterator[StoredFile], found: Totals, within: str) -> None:
    """Known files to the deleter a batch at a time, as they are read."""
    with _failing(found, Unsafe):  # the ledger checked them when they were committed: never expected
        while page := list(itertools.islice(entries, BATCH)):
            deleter.add(page, found, within)


def delete_files(store: Storage | str, location: str, files: Iterable[tuple[str, int]], *, dry_run: bool, look: bool,
                 receipt: DeletionLog | None = None) -> Result:
    """Delete (or, for a dry run, list) files the ledger names, by key, without listing: ``files``
    are ``(path, size)`` pairs relative to ``location``, read a batch at a time as they go, each
    confined to the location (R9) before it joins a batch (a trim's: files a replace removed from
    folders that stay). ``look``: each batch is looked at first and only what is there is deleted
    and counted (a stopped run may have deleted some, and a store answers "deleted" for a key
    already gone, R20); what is not there goes in the receipt as found absent (the stopped run may
    have died before it wrote its deletion down: R25 needs the observation); a dry run lists only
    what is there. A location that is not there, as seen from here, is an error: nothing is taken
    for deleted that was never seen."""
    found = Totals()
    listing: list[tuple[str, int]] = []
    with _failing(found):
        store = of(store)
        home = store.confine(location)
        if store.absent(home):
            return Result(None, error=f"{location} is not there, as seen from here; nothing was deleted")
        entries = iter(files)
        with Deleter(store, receipt) as deleter:
            while page := [StoredFile(store.confine(store.uri(f"{home}/{path}"), within=home), size)
                           for path, size in itertools.islice(entries, BATCH)]:
                if look or dry_run:
                    there = store.present([e.path for e in page])
                    if receipt is not None and not dry_run:
                        receipt.add_absent((e.path, e.size) for e in page if e.path not in there)
                    page = [e for e in page if e.path in there]
                _going(store, deleter, page, found, home, listing if dry_run else None)
    return _result(found, listing if dry_run else None)


def delete_unnamed(store: Storage | str, location: str, folder: str, named: set[str], cutoff: float, *,
                   dry_run: bool, receipt: DeletionLog | None = None) -> Result:
    """Delete (or list) the files in a committed write's ``folder`` that its version does not name
    (``named``, relative to ``location``) and that were last modified at or before ``cutoff``
    (seconds since the epoch, by the store's own clock): stragglers. The result's ``left``: the
    unnamed files younger than that, left for a later vacuum."""
    found, left = Totals(), 0
    listing: list[tuple[str, int]] = []
    with _failing(found):
        store = of(store)
        home = store.confine(location)
        where = store.confine(folder, within=f"{home}/_writes")
        with Deleter(store, receipt) as deleter:
            for page in store.pages(where):
                unnamed = [e for e in page if e.path[len(home) + 1:] not in named]
                old = [e for e in unnamed if e.modified is not None and e.modified <= cutoff]
                left += len(unnamed) - len(old)
                _going(store, deleter, old, found, where, listing if dry_run else None)
    return _result(found, listing if dry_run else None, left=left)


def _going(store: Storage, deleter: Deleter, page: list[StoredFile], found: Totals, within: str,
           listing: list[tuple[str, int]] | None) -> None:
    """A page of files that go: handed to the deleter (each checked inside ``within``, R9) or, for a
    dry run, added to its ``listing`` as a user sees them."""
    if listing is None:
        deleter.add(page, found, within)
    else:
        listing += [(store.uri(e.path), e.size) for e in page]


def committed_files(store: Storage | str, folder: str) -> list[StoredFile]:
    """The data files under ``folder`` (paths relative to it), as Spark's own reader sees them (no
    ``_``/``.`` names at any depth). Confined like a purge; raises what the store raises."""
    store = of(store)
    where = store.confine(folder)
    return sorted(StoredFile(e.path[len(where) + 1:], e.size)
                  for page in store.pages(where, visible=True) for e in page)


def foreign_files(store: Storage | str, location: str, named: set[str]) -> list[StoredFile]:
    """Data files in a table's location that no version names (adopted ones do), outside every write
    folder (``_writes`` is hidden): someone put them there without the ledger. Reported; never swept."""
    try:
        return [f for f in committed_files(store, location) if f.path not in named]
    except (Unsafe, StoreError, OSError):
        return []


def first_missing(store: Storage | str, paths: list[str]) -> str | None:
    """The first of ``paths`` that is not a file, or None when all are there."""
    return of(store).first_missing(paths)


def usage(store: Storage | str, location: str) -> tuple[int, int]:
    """How many files lie under a location, and their total size (a dry run's listing, summed)."""
    outcome = purge(store, location, dry_run=True)
    return (0, 0) if outcome.error else (outcome.files, outcome.bytes)


def pieces(store: Storage | str, location: str, depth: int = 2) -> list[str]:
    """The sub-folders ``depth`` levels below ``location`` (shallower ones where the tree is
    shallower), each a separate piece of work for ``purge``: a big table's write folders or
    partitions, spread over several tasks. Whatever lies above them (files at the top, empty
    folders) is left to the final ``purge`` of the whole location. Confined like a purge."""
    try:
        store = of(store)
        base = store.confine(location)
        level = [base]
        for _ in range(depth):
            below = [sub for folder in level for sub in store.folders(folder)]
            if not below:
                break
            level = below
        return [] if level == [base] else [store.uri(name) for name in level]
    except (Unsafe, StoreError, OSError):
        return []  # the whole-location purge that follows reports it


# --- small helpers ------------------------------------------------------------------------------

def _confine(store: Storage, locations: list[str], totals: list[Totals]) -> list[str | None]:
    """Each location's name, or None (and its refusal in its totals)."""
    names: list[str | None] = []
    for location, found in zip(locations, totals):
        try:
            names.append(store.confine(location))
        except Unsafe as exc:
            found.failed(_why(exc))
            names.append(None)
    return names


def _list(store: Storage, where: str | None, found: Totals) -> list[tuple[str, int]]:
    """A dry run's listing of ``where``: each file that would go, as a user sees it, and its size."""
    listed: list[tuple[str, int]] = []
    if where is None:  # refused: the reason is in ``found``
        return listed
    with _failing(found):
        for page in store.pages(where):
            for entry in page:
                store.inside(entry.path, where)
                listed.append((store.uri(entry.path), entry.size))
    return listed


def _result(found: Totals, listing: list[tuple[str, int]] | None = None, *, left: int = 0) -> Result:
    """What ``found`` counted; for a dry run, what its ``listing`` holds (no listing after an error)."""
    if listing is None or found.error is not None:
        return Result(None, files=found.files, bytes=found.bytes, error=found.error, left=left)
    return Result(None, files=len(listing), bytes=sum(size for _, size in listing), listing=tuple(listing), left=left)


def total(results: list[Result]) -> Result:
    """Several folders' results as one: counts added, the first error kept."""
    return sum(results, Result(None))


@contextmanager
def _failing(found: Totals, *errors: type[Exception]) -> Iterator[None]:
    """An error inside (of ``errors``; by default the storage's or the disk's) is ``found``'s, as ``_why`` says it."""
    try:
        yield
    except errors or (Unsafe, StoreError, OSError) as exc:
        found.failed(_why(exc))


def _why(exc: Exception) -> str:
    """An error as an outcome says it: a refusal (R9) says so; a store's message is its own."""
    if isinstance(exc, Unsafe):
        return f"refused: {exc}"
    return str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
