"""Replay and open: folding a million-event ledger, and opening one to answer an undrop.

Targets (issue 11): a full replay folds at least 250,000 events a second; opening
a ledger of a million events and deciding an undrop, in a fresh process with its
imports done, costs at most 20x the floor measured in the same run: a plain
``sqlite3`` connect plus reading the rows that decision depends on (the log's head
and the stored snapshot's entries for the name, the instance, the three watermarks
that cover it and the streams it reads), again in a fresh process.

The ledger file. ``Ledger.open`` creates an empty ledger (schema, meta, format
version), which is closed again; then ``--events`` events (default 1,000,000)
are written straight into its ``events`` table with one ``executemany``, each with its chain hash (R16), far
faster than a million durable commands would be. The events are what the
ledger itself would have written over some seven months of busy pipeline churn:
payloads from ``ledger.events.encode``, types from ``ledger.events.type_of``,
seq = rowid, strictly increasing times, per-stream versions 1, 2, 3, ... on the
streams ``catalog``, ``watermark:<scope>``, ``retention:<scope>`` and
``vacuum:<run>``. A small simulator keeps it valid: tables are created under
reused names in many databases and dropped, some are undropped (only while no
watermark covers their drop, and under a new name if the old one was taken),
whole databases are dropped and sometimes undropped, and a daily vacuum (plus
occasional one-database vacuums) advances a watermark to the newest eligible
drop time (7-day retention), purges exactly the instances at or behind it and
records its start and finish. The fold checks every invariant it knows and
raises ``LedgerCorrupt`` otherwise, so the first measured fold also validates
the file; its result is then compared with the simulator's own counts.

What is timed (``time.perf_counter``; the OS page cache is warm in every case,
since the file was just written: "cold" below means *without a snapshot*):

* full fold, end to end from the SQLite file:
  ``fold_rows(State(), store.read(0))`` (what ``Ledger`` replays with), best of
  ``--rounds``; and, split, the read alone (rows into a list), decode alone
  (those rows into ``Recorded``), and fold alone (of those records);
* ``Ledger.open(path)`` followed by ``led.runner.prepare(UndropTable(name))`` for a
  dropped, restorable table: first with no snapshot in the file (the open folds
  the whole log), then ``maintain`` (which stores it), then, several times, with that snapshot;
  and once an open plus a real ``undrop_table`` (which commits one event). Each
  of these runs in a fresh interpreter, as a CLI call or a newly started
  pipeline would, so the benchmark's own heap does not skew the garbage
  collector; the import of ``ledger`` is reported apart and not counted.

* the floor of that open, in a fresh interpreter too, with nothing but ``sqlite3``: connect,
  read the log's head, and read the newest stored entry of each key the undrop decision
  depends on (about a dozen). It checks no CRC and no chain hash, which the ledger does:
  the comparison favours the floor.

The replay target is absolute (events per second); the open target is a multiple of the
floor, measured interleaved with the opens. What keeps the figures honest is that the log
is not a toy (hundreds of thousands of instances, all event types the fold handles in
normal operation) and that the full fold includes reading and decoding, not just applying
events.

    python benchmarks/fold.py [--events 1000000] [--rounds 2] [--opens 5] [--dir PATH] [--keep]
    python benchmarks/fold.py --reuse /path/kept/ledger.db    # measure a kept file again
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import attrs
from _common import REPO_ROOT, UNDROP_READS, environment, load, print_table, scratch_dir, verdict

from ledger import Ledger
from ledger.chain import GENESIS, chain
from ledger.clock import to_micros
from ledger.core.events import decode, encode, type_of
from ledger.core.guard import RetentionSet, WatermarkAdvanced, retention_stream, watermark_stream
from ledger.core.model import State, fold, fold_rows
from ledger.core.tables import (
    CATALOG_STREAM, DatabaseDropped, DatabaseUndropped, TableCreated, TableDropped, TablePurged,
    TableUndropped,
)
from ledger.core.vacuums import VACUUM_STREAM, VacuumFinished, VacuumStarted
from ledger.persistence.sqlite import SQLiteStore

FOLD_TARGET = 250_000          # events per second
OPEN_TARGET = 20.0             # open a 1M-event ledger and decide an undrop, as a multiple of the floor
DAY = 86_400_000_000
RETENTION = 7 * DAY


# --- a valid, plausible log ----------------------------------------------------------------

class _Bag:
    """A set with O(1) add, remove and uniform random choice."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def add(self, item: str) -> None:
        self.index[item] = len(self.items)
        self.items.append(item)

    def remove(self, item: str) -> None:
        i = self.index.pop(item)
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.index[last] = i

    def choice(self, rng: random.Random) -> str:
        return self.items[int(rng.random() * len(self.items))]


class Churn:
    """Simulates pipelines and vacuums, emitting the rows the ledger would have stored.

    It mirrors just enough of the catalog (live names, dropped instances and
    their drop times, watermarks, the latest drop of each database) to emit only
    events the fold accepts and ``decide`` would have allowed.
    """

    ACTORS = ("etl@airflow-1", "etl@airflow-2", "dbt@ci-runner", "alice@laptop", "bob@notebook")
    VACUUM_ACTOR = "vacuum@spark-driver"

    def __init__(self, seed: int = 20_260_101, databases: int = 40, names_per_db: int = 400,
                 target_live: int = 8_000) -> None:
        self.rng = random.Random(seed)
        words = ("sales", "marketing", "finance", "staging", "raw", "analytics", "ml_features", "ops")
        self.databases = [f"{words[i % len(words)]}_{i // len(words):02d}" for i in range(databases)]
        kinds = ("stg", "tmp", "fact", "dim", "agg", "snap")
        self.names_per_db = names_per_db
        self.kinds = kinds
        self.target_live = target_live
        self.t = to_micros(datetime(2025, 1, 1, tzinfo=timezone.utc))
        self.seq = 0
        self.versions: dict[str, int] = collections.defaultdict(int)
        self.ids: set[str] = set()
        self.name_of: dict[str, str] = {}            # id -> current (or last) name
        self.live: dict[str, str] = {}               # name -> id
        self.live_names = _Bag()
        self.dropped: dict[str, int] = {}            # id -> drop time, unpurged only
        self.drop_order: collections.deque[tuple[int, str]] = collections.deque()  # may hold stale entries
        self.ledger_wm = 0
        self.db_wm: dict[str, int] = {}
        self.database_drops: dict[str, tuple[str, ...]] = {}
        self.next_vacuum = self.t + DAY
        self.instances = 0
        self.purged = 0
        self.counts: collections.Counter[str] = collections.Counter()

    # -- emitting rows ------------------------------------------------------------------

    def _row(self, stream: str, event: Any, actor: str) -> tuple:
        self.seq += 1
        self.t += 1
        self.versions[stream] += 1
        type_name, schema_version = type_of(event)
        self.counts[type_name] += 1
        return (self.seq, stream, self.versions[stream], type_name, schema_version, self.t, actor,
                encode(event))

    def _new_id(self) -> str:
        while True:
            id_ = f"{self.rng.getrandbits(64):016x}"
            if id_ not in self.ids:
                self.ids.add(id_)
                return id_

    def _effective_wm(self, id_: str) -> int:
        return max(self.ledger_wm, self.db_wm.get(self.name_of[id_].split(".", 1)[0], 0))

    # -- commands -----------------------------------------------------------------------

    def rows(self, n: int) -> Iterator[tuple]:
        """Exactly n rows, ending on a command boundary so the mirror matches the log.

        Only a vacuum appends several events at once; none runs in the last
        stretch, so every command there is one row and the count comes out exact.
        """
        actor = self.ACTORS[0]
        pending = [self._row(retention_stream("ledger"),
                             RetentionSet("ledger", RETENTION // 1_000_000), actor)]
        emitted = 0
        while True:
            for row in pending:
                yield row
            emitted += len(pending)
            if emitted >= n:
                assert emitted == n
                return
            room = n - emitted > 50_000
            self.t += self.rng.randint(1, 40_000_000)  # mean 20 s between commands
            if self.t >= self.next_vacuum:
                self.next_vacuum += DAY
                if room:
                    pending = self._vacuum(None)
                    continue
            actor = self.ACTORS[int(self.rng.random() * len(self.ACTORS))]
            live = len(self.live)
            r = self.rng.random()
            # Creates outpace drops until there are about target_live live tables.
            r -= 0.52 if live < self.target_live * 0.9 else 0.47 if live < self.target_live * 1.1 else 0.42
            if r < 0:
                pending = self._create(actor)
            elif (r := r - 0.45) < 0:
                pending = self._drop(actor)
            elif (r := r - 0.02) < 0:
                pending = self._undrop(actor)
            elif (r := r - 0.002) < 0:
                db = self.databases[int(self.rng.random() * len(self.databases))]
                pending = self._vacuum(db) if room else []
            elif (r := r - 0.001) < 0:
                pending = self._drop_database(actor)
            elif (r := r - 0.0005) < 0:
                pending = self._undrop_database(actor)
            else:
                pending = self._create(actor)

    def _create(self, actor: str) -> list[tuple]:
        for _ in range(4):
            db = self.databases[int(self.rng.random() * len(self.databases))]
            kind = self.kinds[int(self.rng.random() * len(self.kinds))]
            name = f"{db}.{kind}_{int(self.rng.random() * self.names_per_db):04d}"
            if name not in self.live:
                break
        else:
            return []
        id_ = self._new_id()
        self.name_of[id_] = name
        self.live[name] = id_
        self.live_names.add(name)
        self.instances += 1
        return [self._row(CATALOG_STREAM, TableCreated(id_, name, id_), actor)]

    def _forget_live(self, name: str) -> str:
        id_ = self.live.pop(name)
        self.live_names.remove(name)
        self.dropped[id_] = self.t + 1  # the time the next row gets
        self.drop_order.append((self.t + 1, id_))
        return id_

    def _drop(self, actor: str) -> list[tuple]:
        if not self.live:
            return []
        name = self.live_names.choice(self.rng)
        id_ = self._forget_live(name)
        return [self._row(CATALOG_STREAM, TableDropped(id_, name), actor)]

    def _restorable(self, id_: str) -> bool:
        at = self.dropped.get(id_)
        return at is not None and at > self._effective_wm(id_)

    def _bind(self, id_: str, name: str) -> None:
        del self.dropped[id_]
        self.name_of[id_] = name
        self.live[name] = id_
        self.live_names.add(name)

    def _undrop(self, actor: str) -> list[tuple]:
        """Someone restores one of the tables dropped lately (undrops come soon after drops)."""
        if not self.drop_order:
            return []
        at, id_ = self.drop_order[-1 - int(self.rng.random() * min(300, len(self.drop_order)))]
        if self.dropped.get(id_) != at or not self._restorable(id_):
            return []
        name = self.name_of[id_]
        if name in self.live:  # the name was reused: restore under a new one (once)
            name = name + "_restored"
            if name in self.live or name.count("_restored") > 1:
                return []
        self._bind(id_, name)
        # A table restored on its own: its database's drop can no longer be undone as a whole.
        for db, ids in list(self.database_drops.items()):
            if id_ in ids:
                del self.database_drops[db]
        return [self._row(CATALOG_STREAM, TableUndropped(id_, name), actor)]

    def _drop_database(self, actor: str) -> list[tuple]:
        db = self.databases[int(self.rng.random() * len(self.databases))]
        prefix = db + "."
        names = sorted(n for n in self.live if n.startswith(prefix))
        if not names:
            return []
        ids = tuple(self._forget_live(n) for n in names)
        self.database_drops[db] = ids
        return [self._row(CATALOG_STREAM, DatabaseDropped(db, ids), actor)]

    def _undrop_database(self, actor: str) -> list[tuple]:
        if not self.database_drops:
            return []
        db = sorted(self.database_drops)[int(self.rng.random() * len(self.database_drops))]
        ids = self.database_drops[db]
        if not all(self._restorable(i) and self.name_of[i] not in self.live for i in ids):
            return []
        for id_ in ids:
            self._bind(id_, self.name_of[id_])
        del self.database_drops[db]
        return [self._row(CATALOG_STREAM, DatabaseUndropped(db, ids), actor)]

    def _vacuum(self, database: str | None) -> list[tuple]:
        """Watermark first (to the newest eligible drop), then purge exactly what it covers."""
        cutoff = self.t - RETENTION
        if database is None:
            eligible = []
            while self.drop_order and self.drop_order[0][0] <= cutoff:
                at, id_ = self.drop_order.popleft()
                if self.dropped.get(id_) == at:
                    eligible.append(id_)
            scope, current = "ledger", self.ledger_wm
        else:
            eligible = [i for i, at in self.dropped.items()
                        if at <= cutoff and self.name_of[i].split(".", 1)[0] == database]
            scope, current = f"database:{database}", self.db_wm.get(database, 0)
        if not eligible:
            return []
        mark = max(self.dropped[i] for i in eligible)
        if mark <= current:
            return []
        # As Ledger.start_vacuum and its run's finish append them: the watermark and
        # VacuumStarted in one append, then the purges and VacuumFinished in another.
        run_id = (datetime.fromtimestamp(self.t / 1e6, timezone.utc).strftime("%Y%m%dT%H%M%SZ")
                  + f"-{self.rng.getrandbits(32):08x}")
        actor = self.VACUUM_ACTOR
        rows = [self._row(watermark_stream(scope), WatermarkAdvanced(scope, mark), actor),
                self._row(VACUUM_STREAM,
                          VacuumStarted(run_id=run_id, table_ids=tuple(eligible), watermarks={scope: mark},
                                        database=database, limit=None), actor)]
        if database is None:
            self.ledger_wm = mark
        else:
            self.db_wm[database] = mark
        self.t += self.rng.randint(10_000_000, 600_000_000)  # the deletes take a while
        files = bytes_ = 0
        for id_ in eligible:
            f, b = self.rng.randint(1, 200), self.rng.randint(10_000, 5_000_000_000)
            files, bytes_ = files + f, bytes_ + b
            rows.append(self._row(CATALOG_STREAM, TablePurged(id_, run_id, f, b), actor))
            del self.dropped[id_]
            self.purged += 1
        rows.append(self._row(VACUUM_STREAM,
                              VacuumFinished(run_id, len(eligible), 0, files, bytes_), actor))
        return rows

    def _watermark_only(self, database: str | None) -> list[tuple]:
        """A watermark advanced by hand to the newest drop older than a week, with no vacuum to
        purge what it blocks: the state keeps every instance (``LargeState``)."""
        cutoff, newest = self.t - RETENTION, 0
        while self.drop_order and self.drop_order[0][0] <= cutoff:
            at, id_ = self.drop_order.popleft()
            if self.dropped.get(id_) == at:
                newest = at
        if newest <= self.ledger_wm:
            return []
        self.ledger_wm = newest
        return [self._row(watermark_stream("ledger"), WatermarkAdvanced("ledger", newest), self.VACUUM_ACTOR)]

    def restorable_name(self) -> str:
        """The name of the newest dropped instance an undrop would bring back right now."""
        for at, id_ in reversed(self.drop_order):
            if self.dropped.get(id_) == at and self._restorable(id_) and self.name_of[id_] not in self.live:
                return self.name_of[id_]
        raise SystemExit("benchmark bug: the simulated ledger has no restorable dropped table")


@attrs.frozen
class Built:
    """What the simulator knows about the file it wrote, kept after the simulator is freed
    (and saved beside a kept file, so ``--reuse`` can measure it again without rebuilding)."""
    events: int
    mix: list[tuple[str, int]]
    instances: int
    live: int
    purged: int
    restorable: str

    def save(self, path: Path) -> None:
        Path(f"{path}.bench.json").write_text(json.dumps(attrs.asdict(self)))

    @classmethod
    def load(cls, path: Path) -> Built:
        raw = json.loads(Path(f"{path}.bench.json").read_text())
        return cls(**{**raw, "mix": [tuple(m) for m in raw["mix"]]})


class LargeState(Churn):
    """The churn of creates, drops, undrops and watermark advances over many tables in 50
    databases, about one table every three events, and no vacuum: the state grows with the log
    (every instance stays), the hardest case for whoever compares snapshots with a fold."""

    def __init__(self) -> None:
        super().__init__(databases=50, names_per_db=100_000, target_live=1 << 30)
        self._vacuum = self._watermark_only  # type: ignore[method-assign]


SHAPES = {"churn": Churn, "large-state": LargeState}


def build(path: Path, n: int, shape: str = "churn") -> Built:
    with Ledger.open(path, actor="bench@localhost") as led:
        assert led.event_count() == 0, f"{path} already holds events"
    churn = SHAPES[shape]()
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous = OFF")
        db.execute("BEGIN")
        rows = churn.rows(n)
        insert = ("INSERT INTO events(seq, stream, version, type, schema_version, time, actor, payload, hash) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
        previous = GENESIS
        while True:
            chunk = [row for _, row in zip(range(100_000), rows)]
            if not chunk:
                break
            hashes = chain(chunk, previous)  # the chain the store would have computed (R16)
            previous = hashes[-1]
            db.executemany(insert, [(*row, h.hex()) for row, h in zip(chunk, hashes)])
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return Built(n, churn.counts.most_common(), churn.instances, len(churn.live), churn.purged,
                 churn.restorable_name())


# --- measurements --------------------------------------------------------------------------

def full_fold(path: Path) -> tuple[float, State]:
    store = SQLiteStore(str(path))
    try:
        start = time.perf_counter()
        state = fold_rows(State(), store.read(0))  # exactly what Ledger.refresh runs
        return time.perf_counter() - start, state
    finally:
        store.close()


def split_fold(path: Path) -> tuple[float, float, float]:
    store = SQLiteStore(str(path))
    try:
        start = time.perf_counter()
        rows = list(store.read(0))
        read = time.perf_counter() - start
    finally:
        store.close()
    start = time.perf_counter()
    records = [decode(*row) for row in rows]
    decoded = time.perf_counter() - start
    del rows
    start = time.perf_counter()
    fold(State(), records)
    folded = time.perf_counter() - start
    return read, decoded, folded


def drop_snapshot(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for table in ("snapshots", "snapshot_entries", "snapshot_generations"):
            db.execute(f"DELETE FROM {table}")
    finally:
        db.close()


def snapshot_info(path: Path) -> tuple[int, int, int] | None:
    """(seq, entries, bytes) of the ledger's stored snapshot (its newest generation's chain), read
    with plain sqlite3 while no ledger is open."""
    db = sqlite3.connect(path)
    try:
        found = db.execute("SELECT gen, base, seq FROM snapshot_generations ORDER BY seq DESC, gen DESC "
                           "LIMIT 1").fetchone()
        if found is None:
            return None
        gen, base, seq = found
        entries, size = db.execute("SELECT count(*), sum(length(value)) FROM snapshot_entries WHERE gen IN "
                                   "(SELECT gen FROM snapshot_generations WHERE base = ? AND gen <= ?)",
                                   (base, gen)).fetchone()
        return seq, entries, size
    finally:
        db.close()


# Run in a fresh interpreter, as a CLI call or a new pipeline process would: the
# benchmark's own heap (a million-event simulation) must not slow the garbage
# collector down, or speed it up by having run it already.
_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.perf_counter()
from ledger import Ledger
from ledger.core.tables import TableUndropped, UndropTable
t1 = time.perf_counter()
led = Ledger.open(sys.argv[2])
t2 = time.perf_counter()
if sys.argv[4] == "prepare":
    decision = led.runner.prepare(UndropTable(sys.argv[3])).decision
    ok = bool(decision.events) and type(decision.events[0][1]) is TableUndropped
else:
    ok = led.undrop_table(sys.argv[3]).dropped_at is None
t3 = time.perf_counter()
led.close()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "decide": t3 - t2, "ok": bool(ok)}))
"""


# The floor: what deciding an undrop cannot do without, with nothing but sqlite3 (imported, as
# the ledger's child has its imports done): connect, read the log's head, and read the newest
# stored entry of each key the decision depends on.
_FLOOR = r"""
import json, sqlite3, sys, time
path, name = sys.argv[1], sys.argv[2]
start = time.perf_counter()
db = sqlite3.connect(path)
gen, base = db.execute("SELECT gen, base FROM snapshot_generations ORDER BY gen DESC LIMIT 1").fetchone()
db.execute("SELECT seq, time, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
def entry(part, key):
    row = db.execute("SELECT value FROM snapshot_entries WHERE part = ? AND key = ? AND gen BETWEEN ? AND ? "
                     "ORDER BY gen DESC LIMIT 1", (part, key, base, gen)).fetchone()
    return None if row is None or row[0] is None else json.loads(row[0][4:])
""" + UNDROP_READS


def floor(path: Path, name: str) -> float:
    out = subprocess.run([sys.executable, "-c", _FLOOR, str(path), name], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the floor's child process failed:\n{out.stderr[-3000:]}")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if not found["ok"]:
        raise SystemExit(f"benchmark bug: the floor did not find the dropped instance of {name}")
    return found["floor"]


def open_and_decide(path: Path, name: str, mode: str = "prepare") -> dict[str, float]:
    """In a child process: seconds to import ledger, to open, and to then decide (or do) an undrop."""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(REPO_ROOT), str(path), name, mode],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the child process failed ({mode} undrop of {name}):\n{out.stderr[-3000:]}")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if not found["ok"]:
        raise SystemExit(f"benchmark bug: the undrop of {name} ({mode}) did not come out as expected")
    return found


def print_rows(rows: list[tuple[str, float, float | None]]) -> None:
    print_table(("measurement", "seconds", "events/s"),
                [(label, secs, "" if rate is None else rate) for label, secs, rate in rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="full-fold repetitions (best is kept)")
    parser.add_argument("--opens", type=int, default=5, help="opens with the snapshot (median is judged)")
    parser.add_argument("--no-split", action="store_true", help="skip the read/decode/fold split")
    parser.add_argument("--dir", default=None, help="make the scratch folder in here")
    parser.add_argument("--keep", action="store_true", help="keep the ledger file (and a sidecar "
                                                            "describing it) for --reuse")
    parser.add_argument("--reuse", metavar="LEDGER", default=None,
                        help="measure a file kept by --keep instead of building one (it gains one "
                             "undrop event per run)")
    args = parser.parse_args()

    print(environment())
    with scratch_dir(args.dir, keep=args.keep and args.reuse is None) as folder:
        if args.reuse:
            path = Path(args.reuse)
            built = Built.load(path)
            with Ledger.open(path) as led:
                present = led.event_count()
            print(f"fold benchmark: reusing {path} ({present:,} events; built with {built.events:,})")
            if present != built.events:  # earlier runs' undrops: refold the file as the truth
                raise SystemExit("--reuse needs a file no earlier run has undropped in; rebuild it")
        else:
            print(f"fold benchmark: {args.events:,} events")
            path = folder / "ledger.db"
            start = time.perf_counter()
            built = build(path, args.events)
            print(f"built {path} in {time.perf_counter() - start:.1f} s")
            if args.keep:
                built.save(path)
        gc.collect()
        size = sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{path}{s}").exists())
        print(f"{size / 1e6:.0f} MB; event mix:")
        for type_name, count in built.mix:
            print(f"  {type_name:<18} {count:>9,}")
        n = built.events

        # (a) full fold; the first one also proves the file valid.
        folds, state = [], None
        for _ in range(args.rounds):
            state = None
            seconds, state = full_fold(path)
            folds.append(seconds)
        assert state is not None
        expected = (n, built.instances, built.live, built.purged)
        found = (state.seq, len(state.tables.instances), len(state.tables.bindings),
                 sum(i.purged_at is not None for i in state.tables.instances.values()))
        if found != expected:
            raise SystemExit(f"benchmark bug: folded (seq, instances, live, purged) {found}, "
                             f"the simulator says {expected}")
        dropped = sum(i.is_dropped for i in state.tables.instances.values())
        print(f"final state: {len(state.tables.instances):,} instances ({len(state.tables.bindings):,} live, "
              f"{dropped:,} dropped, {built.purged:,} purged), {len(state.streams):,} streams, "
              f"{len(state.vacuums.runs):,} vacuum runs")
        del state
        gc.collect()

        best = min(folds)
        rows: list[tuple[str, float, float | None]] = [
            (f"full fold, read+decode+fold (best of {args.rounds})", best, n / best)]
        if not args.no_split:
            read, decoded, folded = split_fold(path)
            gc.collect()
            rows += [("  read only (rows into a list)", read, n / read),
                     ("  decode only (rows -> Recorded)", decoded, n / decoded),
                     ("  fold only (Recorded -> State)", folded, n / folded)]
        print()
        print_rows(rows)
        print()

        # (b) open and decide an undrop, each in a fresh process: without a snapshot,
        # then with the one ``maintain`` stores (an open stores none: R22).
        name = built.restorable
        drop_snapshot(path)
        cold = open_and_decide(path, name)
        rows = [("open without snapshot (folds all)", cold["open"], None),
                ("  then prepare(UndropTable)", cold["decide"], None)]
        started = time.perf_counter()
        with Ledger.open(path, create=False) as led:
            led.maintain()
        rows.append(("maintain() (stores the snapshot the next opens read)", time.perf_counter() - started, None))
        snap = snapshot_info(path)
        if snap is None or snap[0] != n:
            print(f"note: maintain left snapshot {snap} (seq, entries, bytes), not one at seq {n}: "
                  "the next opens fold from scratch too")
        # Interleaved, so that the floor and the ledger see the same machine.
        warm, floors = [], []
        for _ in range(args.opens):
            if snap is not None:
                floors.append(floor(path, name))
            warm.append(open_and_decide(path, name))
        totals = [w["open"] + w["decide"] for w in warm]
        rows += [(f"open with snapshot (median of {args.opens})",
                  statistics.median(w["open"] for w in warm), None),
                 ("  then prepare(UndropTable)", statistics.median(w["decide"] for w in warm), None),
                 ("open + decide undrop, with snapshot (median)", statistics.median(totals), None),
                 ("open + decide undrop, with snapshot (best)", min(totals), None),
                 *([("floor: sqlite3 connect + the rows the decision reads (median)",
                     statistics.median(floors), None)] if floors else [])]
        if args.reuse is None and not args.keep:  # it appends an event: not to a file kept for reuse
            real = open_and_decide(path, name, "undrop")
            rows.append(("open + real undrop_table, with snapshot (1 commit)",
                         real["open"] + real["decide"], None))
        rows.append(("(import ledger, not counted above)",
                     statistics.median(w["import"] for w in warm), None))
        print_rows(rows)
        print(f"(undrop target: {name}; snapshot at seq {snap[0] if snap else None}, "
              f"{snap[1] if snap else 0:,} entries, {(snap[2] if snap else 0) / 1e6:.1f} MB; "
              "opens run in fresh processes)")
        print()
        verdict("full fold events/s", n / best, FOLD_TARGET, higher_is_better=True)
        if floors:
            verdict(f"open {n:,}-event ledger + decide undrop / floor (median)",
                    statistics.median(totals) / statistics.median(floors), OPEN_TARGET,
                    higher_is_better=False, unit="x")
        print(f"info  the same without a snapshot (first open): {cold['open'] + cold['decide']:.3f} s")
    print(f"finished; {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
