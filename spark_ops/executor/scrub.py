"""The integrity scrub on an executor: each location looked at, nothing changed (R27).

First each location is listed and answered with the digest of what lies there (``glance_at``):
where it agrees with the ledger's, that is all. A location that differs is looked at again with
its files (``look_at``). On an object store a location is listed (a page of a thousand keys a request, never a request
a file); on a disk each file is ``stat``-ed, which costs no more than a listing and finds a file that
was truncated or replaced just as well. Either way the sizes found go to ``vacuum_work.scrub.compare``,
which says what is missing and what is back. A location that cannot be looked at (the store refuses,
the warehouse is not mounted here) is an error of its own, never a finding of missing files.

Standard library only, but for the object store's client (R19).
"""

from __future__ import annotations

import os
import stat
from typing import Iterable, Iterator, Mapping, Sequence

from vacuum_work.scrub import GONE, Finding, Glance, Look, compare, digest, page_root

from .storage import Storage, StoreError, Unsafe
from .stores import storage_for


def glance_at(root: str, locations: Sequence[str]) -> Iterator[Glance]:
    """A task's locations, each answered with the digest of every file under it."""
    store = storage_for(root)
    for location in locations:
        try:
            listed = sorted(_listing(store, location))
            yield Glance(location, digest(listed), len(listed), sum(size for _, size in listed),
                         page_root(location + "/", listed).hex())
        except (OSError, StoreError, Unsafe) as exc:
            yield Glance(location, error=f"{type(exc).__name__}: {exc}")


def _listing(store: Storage, location: str) -> Iterator[tuple[str, int]]:
    """``(path relative to the location, size)`` of everything under it: a store's keys, a disk's
    entries (one that is not a regular file or a folder with size ``GONE``, links not followed)."""
    where = _where(store, location)
    if store.keyed:
        for page in store.pages(where):
            yield from ((e.path[len(where) + 1:], e.size) for e in page)
        return
    _mounted(store)
    pending = [where]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    else:
                        st = entry.stat(follow_symlinks=False)
                        yield entry.path[len(where) + 1:], st.st_size if stat.S_ISREG(st.st_mode) else GONE
        except FileNotFoundError:
            continue


def look_at(root: str, looks: Sequence[Look]) -> Iterator[Finding]:
    """A task's looks, each answered with what was found there (the storage made once a task)."""
    store = storage_for(root)
    for look in looks:
        try:
            yield _look(store, look)
        except (OSError, StoreError, Unsafe) as exc:
            yield Finding(look.location, error=f"{type(exc).__name__}: {exc}")


def _where(store: Storage, location: str) -> str:
    return f"{store.base}/{location}" if store.base else location


def _mounted(store: Storage) -> None:
    if not os.path.isdir(store.base):
        raise FileNotFoundError(f"the warehouse {store.base} is not here (not mounted on this executor?)")


def _look(store: Storage, look: Look) -> Finding:
    where = _where(store, look.location)
    if store.keyed:
        listed: dict[str, int] = {}
        for page in store.pages(where):
            listed.update((e.path[len(where) + 1:], e.size) for e in page)
        return compare(look, lambda _paths: listed, listed=True)
    _mounted(store)
    return compare(look, lambda paths: _stat_each(where, paths))


def _stat_each(folder: str, paths: Iterable[str]) -> Mapping[str, int]:
    """The size of each regular file among ``paths`` (relative to ``folder``) that is there; a link,
    a folder or nothing at the name is not the file the ledger recorded."""
    found: dict[str, int] = {}
    folder += "/"
    for path in paths:
        try:
            st = os.stat(folder + path, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat.S_ISREG(st.st_mode):
            found[path] = st.st_size
    return found
