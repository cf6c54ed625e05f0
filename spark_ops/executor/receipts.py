"""What a vacuum task deleted, written down as it goes: the executor's half of a receipt (R20).

Every deletion (``storage.Deleter``'s batches, on a disk or a store) tells a task's ``DeletionLog``
each object the storage has confirmed gone, with its size. The receipt keeps at most ``PART_LEAVES`` of them
in memory: then it seals a **part** (the leaves sorted by key, hashed into an RFC 6962 tree,
compressed) and writes it to the run's scratch folder in the warehouse, which every executor and
the driver see (a local warehouse is on a shared file system; a store is a store). The task
sends the driver only each part's summary; the driver reads the parts one at a time, records
each in the ledger (``ReceiptPart``: its root, and the bytes as an attachment) and removes the
scratch. So however many objects a run deletes, no process holds their list whole, and the
driver holds one part at most.

A task that looks at what it deletes first (a trim taken over from a stopped run) also writes
down each object it found already gone, in parts of their own (``Part.absent``): what the run
observed, so that a file the stopped run deleted without writing it down is still accounted for
(R25), and never counted as this run's deletion (R20).

The encoding is ``vacuum_work.leaves``, which ``ledger.chain`` documents and checks with; this
module imports the standard library only (R19); parts are written, read and removed through the run's ``Storage``.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
import zlib
from typing import Iterable

from vacuum_work import Part
from vacuum_work.leaves import leaf_input, tree_root, unpack

from .storage import Storage
from .stores import of

PART_LEAVES = 10_000
"""Objects per part at most: 0.2-0.5 MB compressed (random ids compress least), the most of a receipt
the driver holds at a time."""

SEAL_LEAVES = 256
"""Leaves encoded at a time while a part is compressed."""

SCRATCH = ".retention-ledger/receipts"
"""Where parts wait for the driver, under the warehouse root (no table's location can be there:
a database name never starts with a dot)."""

ABSENT = ".absent.part"
"""How the scratch file of a part of objects found absent ends (a deletions' part ends ``.part``):
a part a dead run left says by its name which it is."""


class DeletionLog:
    """One task's record of what it deleted, sealed into receipt parts as it goes (thread-safe: the
    deleting threads add to it). The ledger's ``Receipt`` is what a whole run's parts become once
    recorded; this is a task's half, written where the storage ``store`` keeps the run's scratch."""

    def __init__(self, store: Storage, run_id: str) -> None:
        self._store = store
        self._strip = f"{self._store.base}/" if self._store.base else ""
        self._folder = store.name(f"{SCRATCH}/{run_id}")
        self._leaves: dict[bool, list[tuple[str, int]]] = {False: [], True: []}
        self._parts: list[Part] = []
        self._lock = threading.Lock()

    def add_many(self, deleted: Iterable[tuple[str, int]]) -> None:
        """Objects confirmed gone, by their storage's names (real paths, or keys of the warehouse's bucket)."""
        self._add(deleted, absent=False)

    def add_absent(self, found: Iterable[tuple[str, int]]) -> None:
        """Objects looked for, to be deleted, and found already gone (by their storage's names, with
        the sizes the ledger's lists give them): written down apart, in parts of their own."""
        self._add(found, absent=True)

    def _add(self, objects: Iterable[tuple[str, int]], *, absent: bool) -> None:
        """Their leaves are made under the lock: a thread that waits here while a part is sealed holds
        no copy of its batch's keys."""
        n = len(self._strip)
        with self._lock:
            self._leaves[absent].extend((p[n:], s) for p, s in objects if p.startswith(self._strip))
            if len(self._leaves[absent]) >= PART_LEAVES:
                self._seal(absent)

    def close(self) -> tuple[Part, ...]:
        """Seal what is left; every part this task made."""
        with self._lock:
            self._seal(False)
            self._seal(True)
            return tuple(self._parts)

    def _seal(self, absent: bool) -> None:
        if not self._leaves[absent]:
            return
        leaves, self._leaves[absent] = self._leaves[absent], []
        leaves.sort()  # by key, in code points: UTF-8's byte order
        # Encoded and compressed a few hundred leaves at a time, and hashed one at a time: the part
        # holds its leaves and its compressed bytes (their encoding whole and the tree's levels were
        # 3 MB more for 10,000, on a driver that seals parts as it deletes, R20).
        packer = zlib.compressobj(6)
        pieces = [packer.compress(b"".join(leaf_input(key, size) for key, size in leaves[at:at + SEAL_LEAVES]))
                  for at in range(0, len(leaves), SEAL_LEAVES)]
        pieces.append(packer.flush())
        data = b"".join(pieces)
        where = f"{self._folder}/{uuid.uuid4().hex}{ABSENT if absent else '.part'}"
        self._store.put(where, data)
        self._parts.append(_part(leaves, data, where))


def summarize(data: bytes, where: str) -> Part:
    """A part's summary recomputed from its bytes (a part a dead run's task left, which no summary
    reached a driver for; its name says whether it holds deletions or objects found absent);
    ``ValueError`` if they are not a whole, sorted part."""
    leaves = unpack(data)
    if not leaves or any(a[0] > b[0] for a, b in zip(leaves, leaves[1:])):
        raise ValueError("no leaves, or not sorted by key")
    return _part(leaves, data, where)


def _part(leaves: list[tuple[str, int]], data: bytes, where: str) -> Part:
    """The summary of a part of ``leaves`` (sorted by key), kept as ``data`` at ``where`` (whose name
    says whether it holds deletions or objects found absent)."""
    return Part(leaves[0][0], leaves[-1][0], len(leaves), sum(s for _, s in leaves),
                tree_root(leaf_input(k, s) for k, s in leaves).hex(), hashlib.sha256(data).hexdigest(), where,
                where.endswith(ABSENT))


def stranded(where: Storage | str, run_id: str) -> list[str]:
    """The parts a run's tasks left in its scratch folder (a run that died before its driver
    recorded them): where each is. ``where``: the warehouse's storage (or its root)."""
    store = of(where)
    return sorted(entry.path for page in store.pages(store.name(f"{SCRATCH}/{run_id}"), sizes=False) for entry in page)


def read_part(store: Storage | str, where: str) -> bytes:
    """A part's compressed leaves, as its task wrote them (the driver reads them one at a time)."""
    return of(store).get(where)


def clear(store: Storage | str, run_id: str, wheres: Iterable[str]) -> None:
    """Remove a run's parts from its scratch folder once they are recorded, each by its own name
    (no listing; on a store, single deletes, never mistaken for the vacuum's batches), and the
    folders they leave empty where the disk has folders. What is not there is not an error."""
    of(store).remove(wheres)
