"""A warehouse on a local (or shared) file system, never through a symbolic link (R9).

A location is confined when it is a plain path strictly inside the root that resolves to itself
(no link on the way, no ``..`` games in a recorded path). A walk never follows a link: a link
inside a folder is deleted as a link, its target never touched, and a folder swapped for a link
during the walk stops it. ``os.scandir``, since pyarrow's local file system follows links when it
lists recursively.

A page of a listing is one folder: unlinks in one folder queue on that folder's lock, so the
``Deleter`` gives each folder to one thread (8 threads unlink 3-4x faster than one).
"""

from __future__ import annotations

import errno
import os
from contextlib import suppress
from typing import Iterable, Iterator

from .storage import UNSIZED, StoredFile, Storage, Unsafe

THREADS = 8
"""Deleting threads: enough to keep a disk's queue full, few enough to be polite."""


def _path(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri


class LocalDisk(Storage):
    keyed = False
    deletes_by_key = False
    splits_below_table = True
    tasks_per_core = 4
    shares_batches = False
    threads = THREADS

    def __init__(self, root: str) -> None:
        self.root = root
        self.head = "file://" if root.startswith("file://") else ""
        self.base = os.path.realpath(_path(root))

    def confine(self, location: str, within: str | None = None) -> str:
        path = _path(location)
        parent = self.base if within is None else within
        if os.path.normpath(path) != path.rstrip("/") or not path.startswith(parent + os.sep):
            raise Unsafe(f"{location} is not a plain path inside "
                         + (f"the warehouse {self.base}" if within is None else within))
        if os.path.islink(path):
            raise Unsafe(f"{location} is a symbolic link; a vacuum never follows one")
        real = os.path.realpath(path)
        if real != path.rstrip("/"):
            raise Unsafe(f"{location} resolves to {real}, through a symbolic link")
        return real

    def inside(self, name: str, within: str) -> None:
        if not name.startswith(within + os.sep):
            raise Unsafe(f"{name} is outside {within}")

    def pages(self, where: str, *, sizes: bool = True, visible: bool = False) -> Iterator[list[StoredFile]]:
        return (files for _, files in self._walk(where, sizes=sizes, visible=visible))

    def _walk(self, where: str, *, sizes: bool = True,
              visible: bool = False) -> Iterator[tuple[str, list[StoredFile]]]:
        """Each folder under ``where`` (a child always after its parent) with its files."""
        pending = [where]
        while pending:
            folder = pending.pop()
            if os.path.realpath(folder) != folder:
                raise Unsafe(f"{folder} turned into a symbolic link during the walk")
            files: list[StoredFile] = []
            try:
                with os.scandir(folder) as listing:
                    for entry in listing:
                        if visible and entry.name.startswith(("_", ".")):
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        elif not sizes:
                            files.append(StoredFile(entry.path, UNSIZED))
                        elif not visible or entry.is_file(follow_symlinks=False):
                            stat = entry.stat(follow_symlinks=False)
                            files.append(StoredFile(entry.path, stat.st_size, stat.st_mtime))
            except FileNotFoundError:
                continue
            yield folder, files

    def folders(self, where: str) -> list[str]:
        try:
            with os.scandir(where) as listing:
                return [entry.path for entry in listing if entry.is_dir(follow_symlinks=False)]
        except FileNotFoundError:  # purged meanwhile (by another share)
            return []

    def delete(self, batch: list[StoredFile]) -> tuple[list[int | None], str | None]:
        freed: list[int | None] = []
        for entry in batch:
            try:
                size = entry.size if entry.size != UNSIZED else os.lstat(entry.path).st_size
                os.unlink(entry.path)
            except FileNotFoundError:
                freed.append(None)  # another run got there first: gone, but not ours
                continue
            except OSError as exc:
                return freed + [None] * (len(batch) - len(freed)), f"{type(exc).__name__}: {exc}"
            freed.append(size)
        return freed, None

    def present(self, names: list[str]) -> set[str]:
        return {name for name in names if os.path.lexists(name)}

    def settle(self, where: str, *, keep: bool = False) -> str | None:
        for folder, files in reversed(list(self._walk(where, sizes=False))):  # children before parents
            if files:
                return f"{folder} gained new files during the vacuum"
            if keep and folder == where:
                continue
            try:
                os.rmdir(folder)
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    return f"{folder} gained new files during the vacuum"
                raise
        return None

    def uri(self, name: str) -> str:
        return self.head + name

    def looks_again(self, found: int, *, known: bool, verify: bool) -> bool:
        return True  # the look removes the emptied folders

    def share(self, pieces: list[str], share: int, shares: int) -> list[str]:
        """Each share empties its folders but keeps them (the finish removes them), so every share
        lists the same folders, and takes every ``shares``-th: evenly."""
        return sorted(pieces)[share::shares]

    def first_missing(self, uris: list[str]) -> str | None:
        return next((uri for uri in uris if not os.path.isfile(_path(uri))), None)

    def absent(self, location: str) -> bool:
        return not os.path.isdir(_path(location))

    def put(self, name: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(name), exist_ok=True)
        with open(name, "wb") as out:
            out.write(data)

    def get(self, name: str) -> bytes:
        with open(name, "rb") as source:
            return source.read()

    def remove(self, names: Iterable[str]) -> None:
        folders = set()
        for name in names:
            with suppress(FileNotFoundError):
                os.unlink(name)
            folders.add(os.path.dirname(name))
        for folder in folders:
            while folder.startswith(self.base + os.sep):
                try:
                    os.rmdir(folder)
                except OSError:  # not empty (another run's parts), or gone
                    break
                folder = os.path.dirname(folder)
