"""Append throughput: single-event ledger commands against raw one-row SQLite transactions.

Targets (DESIGN.md, "Performance"): a single-event command commits at no less
than 60% of the rate raw ``sqlite3`` manages for one-row transactions at the
same ``synchronous`` level, on the same machine, in the same run (issue 35's
target, kept by issue 48); 80% stays the aim. A line each.

The contenders, each appending to its own file in one scratch folder (on the
repository's filesystem unless ``--dir`` says otherwise), all at the same
``synchronous`` level (default FULL, as the ledger's default):

* ``raw sqlite3``, the baseline: the Python ``sqlite3`` module, WAL,
  ``isolation_level=None``, and per row ``BEGIN IMMEDIATE; INSERT; COMMIT`` into
  a table created with *the very DDL of the ledger's own events table and its
  unique (stream, version) index* (copied from a fresh ledger file's
  ``sqlite_master``), with a payload of the same size as the ledger's. That is
  the floor a durable one-event append costs through this driver: the same
  statement shape, the same index upkeep, the same fsync per commit. Sequence
  numbers, versions and times are plain Python counters, so the baseline pays
  nothing for deciding or checking anything: the ratio is the whole price of
  the ledger's API, decision and guard.
* ``ledger advance_watermark`` (the headline): ``Ledger.advance_watermark(to,
  scope="database:bench")`` through the public API, a later ``to`` every call,
  so each call appends exactly one ``WatermarkAdvanced`` event on the stream
  ``watermark:database:bench``. It pays for everything a real command does:
  catching up with the log, deciding, the conditional append (the version
  check and head read inside the transaction), and folding its event back in.
* ``ledger create_table``: ``Ledger.create_table("bench.t<i>")``, distinct
  names; exactly one ``TableCreated`` event on the ``catalog`` stream per call
  (plus the lookup of the new instance that ``create_table`` returns).

How: every contender is opened and warmed up (untimed), then they take turns in
short blocks (``--block`` operations, rotating who goes first) until each has
done ``-n`` operations; ``time.perf_counter`` brackets each block. Neighbouring
blocks see the same machine, so the verdict uses the median over blocks of the
*paired* ratio (ledger block rate / raw block rate of the same turn): a burst of
disk or CPU contention from other work hits both sides of a pair alike, which
"best of N rounds" does not guarantee on a shared machine. Overall and best
block rates are shown too. The events each ledger appended are counted
afterwards, so a call that appended nothing cannot inflate its rate.

    python benchmarks/append.py [-n 30000] [--block 200] [--synchronous FULL] [--dir PATH]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from _common import environment, load, print_table, scratch_dir, verdict

from ledger import Ledger, Scope
from ledger.core.events import encode, type_of
from ledger.core.guard import WatermarkAdvanced
from ledger.persistence.sqlite import SYNCHRONOUS_LEVELS

TARGETS = (0.60, 0.80)
"""The target (issue 35, kept by issue 48) and the aim (DESIGN.md): each gets its own PASS/MISS line."""
WARMUP = 100
ACTOR = "bench@localhost"
T0 = datetime(2020, 1, 1, tzinfo=timezone.utc)  # watermark targets: always in the past, so allowed
SCOPE = Scope.database("bench")
HASH = "5e" * 32  # what a chain hash weighs on disk


def events_ddl(folder: Path, synchronous: str) -> list[str]:
    """The ledger's own DDL for its events table and indexes, read from a fresh ledger file."""
    with Ledger.open(folder / "ddl.db", synchronous=synchronous, actor=ACTOR):
        pass
    db = sqlite3.connect(folder / "ddl.db")
    try:
        rows = db.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'events' AND type IN ('table', 'index') "
            "AND sql IS NOT NULL ORDER BY type = 'index'").fetchall()
    finally:
        db.close()
    return [r[0] for r in rows]


class Raw:
    """One-row transactions straight through sqlite3."""

    def __init__(self, path: Path, synchronous: str, ddl: list[str]) -> None:
        self.db = sqlite3.connect(path, timeout=10.0, isolation_level=None)
        self.db.execute("PRAGMA busy_timeout = 10000")
        assert self.db.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() == "wal"
        self.db.execute(f"PRAGMA synchronous = {synchronous}")
        for sql in ddl:
            self.db.execute(sql)
        self.stream = f"watermark:{SCOPE}"
        self.type_name, self.schema_version = type_of(WatermarkAdvanced(str(SCOPE), 0))
        self.payload = encode(WatermarkAdvanced(str(SCOPE), 1_577_836_800_000_000))  # the ledger's size
        self.insert = ("INSERT INTO events(seq, stream, version, type, schema_version, time, actor, "
                       "payload, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
        self.done = 0
        self.run(WARMUP)

    def run(self, k: int) -> float:
        db, insert, stream, type_name, schema_version, payload = (
            self.db, self.insert, self.stream, self.type_name, self.schema_version, self.payload)
        first = self.done + 1
        start = time.perf_counter()
        for i in range(first, first + k):
            db.execute("BEGIN IMMEDIATE")
            db.execute(insert, (i, stream, i, type_name, schema_version, 1_700_000_000_000_000 + i,
                                ACTOR, payload, HASH))
            db.execute("COMMIT")
        elapsed = time.perf_counter() - start
        self.done += k
        return elapsed

    def appended(self) -> int:
        return self.db.execute("SELECT count(*) FROM events").fetchone()[0] - WARMUP

    def close(self) -> None:
        self.db.close()


class LedgerCommand:
    """Single-event commands through the public Ledger API."""

    def __init__(self, path: Path, synchronous: str, command: str, total: int) -> None:
        self.led = Ledger.open(path, synchronous=synchronous, actor=ACTOR)
        self.command = command
        if command == "advance_watermark":
            self.args = [T0 + timedelta(microseconds=i) for i in range(1, WARMUP + total + 1)]
        else:
            self.args = [f"bench.t{i}" for i in range(WARMUP + total)]
        self.done = 0
        self.run(WARMUP)
        self.start_count = self.led.event_count()

    def run(self, k: int) -> float:
        args = self.args[self.done:self.done + k]
        if self.command == "advance_watermark":
            advance = self.led.advance_watermark
            start = time.perf_counter()
            for to in args:
                advance(to, scope=SCOPE)
        else:
            create = self.led.create_table
            start = time.perf_counter()
            for name in args:
                create(name)
        elapsed = time.perf_counter() - start
        self.done += k
        return elapsed

    def appended(self) -> int:
        return self.led.event_count() - self.start_count

    def close(self) -> None:
        self.led.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--ops", type=int, default=30_000, help="operations per contender")
    parser.add_argument("--block", type=int, default=200, help="operations per turn")
    parser.add_argument("--synchronous", default="FULL", type=str.upper, choices=SYNCHRONOUS_LEVELS)
    parser.add_argument("--dir", default=None, help="make the scratch folder in here (default: a temp "
                                                    "folder on the repository's filesystem)")
    parser.add_argument("--skip-create", action="store_true", help="measure only advance_watermark")
    args = parser.parse_args()

    print(f"append benchmark: {args.ops:,} ops per contender in turns of {args.block}, "
          f"synchronous={args.synchronous}")
    print(environment())
    with scratch_dir(args.dir) as folder:
        print(f"scratch folder: {folder}")
        ddl = events_ddl(folder, args.synchronous)
        contenders: dict[str, Raw | LedgerCommand] = {
            "raw sqlite3 (1-row txn)": Raw(folder / "raw.db", args.synchronous, ddl),
            "ledger advance_watermark": LedgerCommand(folder / "watermark.db", args.synchronous,
                                                      "advance_watermark", args.ops),
        }
        if not args.skip_create:
            contenders["ledger create_table"] = LedgerCommand(folder / "create.db", args.synchronous,
                                                              "create_table", args.ops)
        names = list(contenders)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        sizes: list[int] = []
        try:
            done, turn = 0, 0
            while done < args.ops:
                k = min(args.block, args.ops - done)
                shift = turn % len(names)
                for name in names[shift:] + names[:shift]:  # rotate who goes first
                    seconds[name].append(contenders[name].run(k))
                sizes.append(k)
                done += k
                turn += 1
            for name, contender in contenders.items():
                if contender.appended() != args.ops:
                    raise SystemExit(f"benchmark bug: {name} appended {contender.appended()} "
                                     f"events for {args.ops} operations")
        finally:
            for contender in contenders.values():
                contender.close()

    raw = names[0]
    rates = {name: [k / s for k, s in zip(sizes, seconds[name])] for name in names}
    rows = []
    paired: dict[str, float] = {}
    for name in names:
        overall = args.ops / sum(seconds[name])
        ratios = [mine / base for mine, base in zip(rates[name], rates[raw])]
        paired[name] = statistics.median(ratios)
        rows.append((name, overall, statistics.median(rates[name]), max(rates[name]),
                     1e6 / overall, overall / (args.ops / sum(seconds[raw])), paired[name]))
    print()
    print_table(("contender", "commits/s overall", "median block", "best block", "us/commit",
                 "ratio overall", "ratio (median of paired blocks)"), rows)
    spread = [min(rates[raw]), max(rates[raw])]
    print(f"({len(sizes)} turns; raw sqlite3 block rates ranged {spread[0]:,.0f}-{spread[1]:,.0f}/s)")
    print()
    for target in TARGETS:
        for name in names[1:]:
            verdict(f"{name} / raw sqlite3 at synchronous={args.synchronous} (median paired ratio)",
                    paired[name], target, higher_is_better=True, unit="x")
    print(f"finished; {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
