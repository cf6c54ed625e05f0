"""Which storage a warehouse root is on, chosen from the root: here, apart from ``storage``, so that
the abstract storage and its two kinds (``disk``, ``objects``) import each other in one direction only.

Standard library only, but for the object store's client (R19)."""

from __future__ import annotations

from .disk import LocalDisk
from .storage import Storage


def storage_for(root: str) -> Storage:
    """The storage a warehouse root is on: a local disk for a path or ``file://``, else an object store."""
    if "://" not in root or root.startswith("file://"):
        return LocalDisk(root)
    from .objects import ObjectStore  # obstore, imported only for a store
    return ObjectStore(root)


def of(where: Storage | str) -> Storage:
    """``where`` if it is a storage already (a job's, built once), else the storage of that root (a
    one-off call: a check of a version's files, a test)."""
    return where if isinstance(where, Storage) else storage_for(where)
