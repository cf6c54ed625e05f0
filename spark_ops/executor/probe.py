"""Whether a process sees the warehouse the ledger's files are in: a file one side writes under the
root, the other reads back (R10, R19, R24).

A folder that merely exists at the root's path proves nothing: a Spark Connect server on another
machine, or in another mount, sees an empty folder there, and a vacuum that listed nothing in it
would record every table purged with every file still in place (purged is final, R8); a write would
commit a version of no files. So before the ledger records anything, the driver writes a probe (a
random token) under the root (``leave``) and the executors (or Spark's own reader) read it back
(``sees``); then it is removed. Probes live under ``PROBES``, beside the receipts' scratch folder
(no table's location can be there: a database name never starts with a dot).

Standard library only (R19): the executors import this module.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import Iterator

from vacuum_work import location

from .storage import Storage, StoreError, Unsafe
from .stores import of

PROBES = ".retention-ledger/probes"


@dataclass(frozen=True)
class Probe:
    """A probe under a warehouse root: its path relative to the root, and what it holds."""
    root: str
    relative: str
    token: str

    @property
    def uri(self) -> str:
        """Where it is, as the root was given (a path, or ``scheme://bucket/key``)."""
        return location(self.root, self.relative)


@contextlib.contextmanager
def leave(where: Storage | str) -> Iterator[Probe]:
    """A probe written under the warehouse (its storage, or its root) for the block (removed after
    it, whatever happens). Raises ``OSError``, ``StoreError`` or ``Unsafe`` if this process cannot
    write it there."""
    token = uuid.uuid4().hex
    store, relative = of(where), f"{PROBES}/{token}"
    name = store.name(relative)
    store.put(name, token.encode())
    try:
        yield Probe(store.root, relative, token)
    finally:
        with contextlib.suppress(OSError, StoreError, Unsafe):
            store.remove([name])


def sees(where: Storage | str, relative: str, token: str) -> bool:
    """Whether the probe ``relative`` (under the warehouse: its storage, or its root) is here and
    holds ``token``."""
    store = of(where)
    try:
        return store.get(store.name(relative)) == token.encode()
    except (OSError, StoreError):
        return False
