"""The integrity scrub on an executor: each location looked at, nothing changed (R27).

On an object store a location is listed once (a page of a thousand keys a request, never a request
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

from vacuum_work.scrub import Finding, Look, compare

from .storage import Storage, StoreError, Unsafe
from .stores import storage_for


def look_at(root: str, looks: Sequence[Look]) -> Iterator[Finding]:
    """A task's looks, each answered with what was found there (the storage made once a task)."""
    store = storage_for(root)
    for look in looks:
        try:
            yield _look(store, look)
        except (OSError, StoreError, Unsafe) as exc:
            yield Finding(look.location, error=f"{type(exc).__name__}: {exc}")


def _look(store: Storage, look: Look) -> Finding:
    where = f"{store.base}/{look.location}" if store.base else look.location
    if store.keyed:
        listed: dict[str, int] = {}
        for page in store.pages(where):
            listed.update((e.path[len(where) + 1:], e.size) for e in page)
        return compare(look, lambda _paths: listed, listed=True)
    if not os.path.isdir(store.base):
        raise FileNotFoundError(f"the warehouse {store.base} is not here (not mounted on this executor?)")
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
