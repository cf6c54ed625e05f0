"""Snapshots written on the second core: what a first open without a usable snapshot hands over.

A first open (a new release changed the snapshot format, or ``verify`` discarded a
snapshot that lied) must fold the whole log; that much the caller waits for, since the
answer depends on it. Writing the snapshots that spare the next process the same wait
(the keyed generation of the present, a history snapshot every ``history_every`` events)
used to cost several times the fold itself, and nothing the caller asked for depends on
them. So when the log is long, the opening process keeps its fold in memory and starts
this module in a process of its own, which folds the same log on another core and writes
them there, as any process sharing the ledger may (the store's generations are made for
concurrent writers). If it fails or is killed, nothing is lost: they are caches, and the
next open that finds none does the same again.

    RETENTION_LEDGER_BACKFILL=<location> python -m ledger.persistence.backfill SNAPSHOT_EVERY HISTORY_EVERY

The location goes in the environment, not the command line: a PostgreSQL URL may carry a
password, and command lines are visible to every user of the machine.
"""

from __future__ import annotations

import os
import sys

from .cache import BACKFILL_ENV, StateCache
from .stores import open_store


def main(argv: list[str]) -> int:
    snapshot_every, history_every = (int(a) for a in argv)
    store = open_store(os.environ[BACKFILL_ENV], create=False)
    try:
        cache = StateCache(store, snapshot_every=snapshot_every, history_every=history_every, apart_from=None)
        cache.save_snapshot()  # however short the log: the opener is waiting on nobody for it
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
