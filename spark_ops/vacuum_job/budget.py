"""How many Spark tasks a vacuum's purges get: arithmetic on the number of cores, nothing else.

Each task costs Spark's per-task overhead (a Python worker round trip, about 0.1 s here), so a
vacuum asks for a few a core: enough to balance work and move the progress bar, no more.
"""

from __future__ import annotations

from typing import Hashable, Mapping, TypeVar

SHARES_PER_CORE = 4
"""Tasks per core that big tables' sub-folders are shared out over, all tables together."""

K = TypeVar("K", bound=Hashable)


def shares(cores: int, tables: Mapping[K, int | None]) -> dict[K, int]:
    """How many tasks each table is shared out over: ``SHARES_PER_CORE`` a core split between the
    tables, and no more than a table has sub-folders (None: not counted yet)."""
    each = max(1, cores * SHARES_PER_CORE // max(1, len(tables)))
    return {key: each if pieces is None else max(1, min(pieces, each)) for key, pieces in tables.items()}


def first_purge_tasks(cores: int, tables: int) -> int:
    """Tasks of the first purge job: for fewer tables than cores, the share-out's; else a few per
    core."""
    if not tables:
        return 0
    if tables <= cores:
        return share_tasks(cores, shares(cores, dict.fromkeys(range(tables))))
    return min(tables, cores * 4)


def share_tasks(cores: int, shared: Mapping[K, int]) -> int:
    """Tasks of a share-out: every share, and the tasks that finish the tables."""
    return sum(shared.values()) + finishing_tasks(cores, shared)


def finishing_tasks(cores: int, shared: Mapping[K, int]) -> int:
    """Tasks that sum the shares and finish each table's location: one a table, at most one a core."""
    return max(1, min(len(shared), cores))
