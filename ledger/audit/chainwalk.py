"""``verify``'s walk of the hash chain: in line with the fold, or on the second core beside it.

The chain check and the refold read the same rows and need nothing of each other until
the end, so for a long log that another process can reach, the chain is walked by a
process of its own while this one folds: ``verify`` then costs about the fold, not the fold
plus the chain. What it proves is the same: the file's pages sound (SQLite's own check, which
the walker runs first), and every row from the first up to the head ``verify`` started from,
hashed over the documented encoding and chained (R16). A short
log, an in-memory one, or a walk that must keep every hash (for a checkpoint's proof)
is checked in line, as the fold reads it; so is any log whose walker could not report.

Given the number of the stored generation ``verify`` found, the walker also folds the rows it
walks up to that generation's event and compares the generation with that fold, so that this
process compares only the history snapshots: the two sides then cost about the same.

    RETENTION_LEDGER_CHAINWALK=<location> python -m ledger.audit.chainwalk UPTO WHERE [GENERATION]

prints one JSON line: ``{"seq": n, "head": hex, "generation": true | false | null}`` (null: not
compared, as when a newer generation was written meanwhile), or ``{"corrupt": message}``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from typing import Iterable, Iterator

from ..chain import ChainCheck
from ..core.model import State, fold_rows
from ..errors import LedgerCorrupt
from ..persistence.cache import generation_agrees
from ..persistence.contract import EventStore, Generation
from ..persistence.apart import start_with_store
from ..persistence.stores import open_store

ENV = "RETENTION_LEDGER_CHAINWALK"


def damage(store: EventStore) -> LedgerCorrupt | None:
    """What SQLite's own page check finds wrong with the file (None: nothing), as ``verify`` says it."""
    problems = store.integrity_problems()
    if not problems:
        return None
    found = "; ".join(" ".join(p.split()) for p in problems[:5])
    return LedgerCorrupt(f"{store.path}: SQLite integrity check failed: {found}; restore the ledger file from a backup")


class ChainWalk:
    """The chain check of one ``verify``: ``rows`` sees the fold's rows go past, ``finish`` gives
    the check's result or raises its ``LedgerCorrupt``."""

    def __init__(self, store: EventStore, upto: int, *, keep_hashes: bool, apart_from: int | None,
                 generation: Generation | None = None) -> None:
        """``generation``: a stored generation at or before ``upto`` for a walker apart to compare."""
        self._store, self._upto = store, upto
        self._check = ChainCheck(store.path, keep_hashes=keep_hashes)
        self._process: subprocess.Popen[bytes] | None = None
        self.generation: Generation | None = None
        """The generation the walker compares (None: none; this process compares it)."""
        self.generation_agrees: bool | None = None
        """What the walker found of ``generation`` (None: it could not say; compare it here)."""
        location = store.location
        if not keep_hashes and location is not None and apart_from is not None and upto >= apart_from:
            self.generation = generation if generation is not None and generation.seq <= upto else None
            self._process = _start(location, upto, store.path, self.generation)

    @property
    def apart(self) -> bool:
        """Whether the walk (and the file's page check before it) runs in a process of its own."""
        return self._process is not None

    @property
    def with_hash(self) -> bool:
        """Whether the fold's rows must carry their hashes (they are checked as they go past)."""
        return self._process is None

    def rows(self, rows: Iterable[tuple]) -> Iterator[tuple] | Iterable[tuple]:
        return rows if self._process is not None else self._check.rows(rows)

    def finish(self) -> ChainCheck:
        """The check over every row up to ``upto``; ``LedgerCorrupt`` naming the first that breaks it."""
        process, self._process = self._process, None
        if process is None:
            return self._check
        out, _ = process.communicate()
        try:
            found = json.loads(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            found = None
        if process.returncode != 0 or not isinstance(found, dict):
            return self._walk_here()  # the walker could not report: no answer is not a pass
        if "corrupt" in found:
            raise LedgerCorrupt(found["corrupt"])
        self._check.seq, self._check.head = found["seq"], bytes.fromhex(found["head"])
        agrees = found.get("generation")
        self.generation_agrees = agrees if isinstance(agrees, bool) else None
        return self._check

    def abandon(self) -> None:
        """Stop the walker (the fold failed for a reason of its own)."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def _walk_here(self) -> ChainCheck:
        check = self._check
        for row in self._store.read(0, upto=self._upto, with_hash=True):
            check.check(row)
        return check


def _start(location: str, upto: int, where: str, generation: Generation | None) -> subprocess.Popen[bytes] | None:
    gen = [] if generation is None else [str(generation.gen)]
    return start_with_store("ledger.audit.chainwalk", [str(upto), where, *gen], location, ENV,
                            stdout=subprocess.PIPE)


def main(argv: list[str]) -> int:
    upto, where = int(argv[0]), argv[1]
    store = open_store(os.environ[ENV], create=False)
    try:
        damaged = damage(store)
        if damaged is not None:
            print(json.dumps({"corrupt": str(damaged)}))
            return 0
        check = ChainCheck(where)
        latest = store.latest_generation() if len(argv) > 2 else None
        compared = latest if latest is not None and str(latest.gen) == argv[2] and latest.seq <= upto else None
        agrees = None
        try:
            rows = check.rows(store.read(0, upto=upto, with_hash=True))
            if compared is not None:  # each row checked before the fold sees it: an edit is named as one
                agrees = generation_agrees(store, compared, fold_rows(State(), itertools.islice(rows, compared.seq)))
            for _ in rows:
                pass
        except LedgerCorrupt as exc:
            print(json.dumps({"corrupt": str(exc)}))
            return 0
        print(json.dumps({"seq": check.seq, "head": check.head.hex(), "generation": agrees}))
        return 0
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
