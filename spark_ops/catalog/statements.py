"""Many independent SQL statements, in as few requests as Spark allows, several at a time.

On Spark Connect every statement is a round trip to the server (~15 ms on an idle loopback
here, ~50 ms on a busy one) before Spark parses, analyses and runs it. Spark 4's SQL scripting
runs a compound statement (``BEGIN s1; s2; ... END``) in one request, and the Connect client is
thread-safe (the server runs each request in a thread of its own), so the statements go as
scripts of up to ``SCRIPT_BYTES`` each, ``THREADS`` at a time. Measured here on Connect
(``benchmarks/attach_connect.py``), 1,000 ``CREATE VIEW`` statements: one per request ~16 ms
each; one script ~3.5 ms; four scripts at once ~2.1 ms.

A script stops at its first failing statement, so a script that fails is run again one
statement at a time (the statements given here may run twice: ``CREATE OR REPLACE``, ``DROP
... IF EXISTS``), which says which ones fail and why. A server that runs no scripts (Spark
4.0 unless ``spark.sql.scripting.enabled``) is found by that too: every statement of the failed
script ran alone; from then on they are sent one by one.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

THREADS = 4
"""Requests in flight at once: four of them took 1,000 statements from 3.5 s to 2.1 s on a
two-core server; eight were no faster."""
SCRIPT_BYTES = 4 << 20
"""The most SQL text one script carries (a view of a version of 10,000 files is ~1 MB of text);
well under gRPC's and Spark Connect's 128 MiB limit on a request."""


class Statements:
    """Runs statements on one session; remembers whether its server runs scripts."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.scripts = True
        self._lock = threading.Lock()

    def run(self, statements: Sequence[str]) -> list[Exception | None]:
        """Run every statement; for each, None or the exception Spark raised for it. They must be
        independent of one another: they run in no particular order."""
        batches = _batches(list(statements), SCRIPT_BYTES, THREADS)
        if len(batches) <= 1:
            return [result for batch in batches for result in self._batch(batch)]
        with ThreadPoolExecutor(min(THREADS, len(batches)), thread_name_prefix="retention-ledger-sql") as pool:
            return [result for done in pool.map(self._batch, batches) for result in done]

    def _batch(self, statements: list[str]) -> list[Exception | None]:
        if len(statements) > 1 and self.scripts:
            try:
                self.spark.sql("BEGIN\n" + ";\n".join(statements) + ";\nEND")
                return [None] * len(statements)
            except Exception:  # noqa: BLE001 - which statement failed, if any, is found below
                pass
        results = [self._one(statement) for statement in statements]
        if len(statements) > 1 and all(result is None for result in results):
            with self._lock:
                self.scripts = False  # every statement ran alone: it was the script the server refused
        return results

    def _one(self, statement: str) -> Exception | None:
        try:
            self.spark.sql(statement)
            return None
        except Exception as exc:  # noqa: BLE001 - the caller decides what each failure means
            return exc


def _batches(statements: list[str], most_bytes: int, threads: int) -> list[list[str]]:
    """``statements`` in order, cut into about ``threads`` batches of similar size, none over
    ``most_bytes`` of text (a statement longer than that goes alone)."""
    if not statements:
        return []
    total = sum(len(s) for s in statements)
    target = min(most_bytes, -(-total // threads))
    batches: list[list[str]] = [[]]
    size = 0
    for statement in statements:
        if batches[-1] and size + len(statement) > target:
            batches.append([])
            size = 0
        batches[-1].append(statement)
        size += len(statement)
    return batches
