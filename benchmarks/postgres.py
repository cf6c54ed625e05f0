"""The PostgreSQL store against its floors, on one real server started here (R18).

Three measurements, each against a baseline measured in the same run on the same server
(started with ``fsync = on``: commits are durable, as in production):

* **Append.** ``Ledger.advance_watermark`` (one ``WatermarkAdvanced`` event per call, through
  the public API: decide, conditional append under the ledger's lock, fold) against raw
  ``psycopg`` one-row transactions (``BEGIN; INSERT; COMMIT`` into a table with the DDL of the
  ledger's own events table). Blocks alternate; the verdict is the median paired ratio.
  Target: >= 0.8x.
* **Open.** A 1,000,000-event ledger (the same simulated churn as ``benchmarks/fold.py``,
  copied into PostgreSQL with ``copy_ledger``): a first open (folds all, stores the snapshot),
  then, in fresh processes, open + decide an undrop, against the floor: ``psycopg.connect``
  and reading the same rows (the log's head, the snapshot's head, the dozen entries the
  decision reads). Target: <= 20x the floor.
* **Hosts.** Commands per second with 1 and with 4 processes (each its own connection) creating
  tables in one ledger, each in a database of its own and all in one, and how many appends were
  refused and retried; on PostgreSQL and on a SQLite file. Reported (issue 62; it was a target of
  >= 1.0x, R18): 4 processes in different databases against the single process's rate in all,
  beside the floor's own 4 against 1 (on two cores, four processes and four backends measure the
  scheduler). The disk's fsync latency drifts by several times within a minute on a shared
  machine, so that pair is run ``--rounds`` times, 1 and 4 processes back to back (in turns,
  first one then the other), on a fresh ledger each; the figure is the median of the rounds'
  ratios.

    python benchmarks/postgres.py [-n 3000] [--block 100] [--events 1000000] [--seconds 8] [--rounds 3] [--only hosts]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
from _common import REPO_ROOT, UNDROP_READS, environment, load, print_table, scratch_dir, verdict

sys.path.insert(0, str(REPO_ROOT))
from tests.pg import PostgresServer  # noqa: E402  (the tests' real server, started the same way)

from ledger import Ledger, copy_ledger  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
_RAW_DDL = ("CREATE TABLE events (seq BIGINT PRIMARY KEY, stream TEXT NOT NULL, version BIGINT NOT NULL, "
            "type TEXT NOT NULL, schema_version INTEGER NOT NULL, time BIGINT NOT NULL, actor TEXT NOT NULL, "
            "payload TEXT NOT NULL, hash TEXT NOT NULL, UNIQUE (stream, version))")


def append(server: PostgresServer, n: int, block: int, folder: Path) -> float:
    url = server.database("append")
    raw_url = server.database("raw")
    led = Ledger.open(url, warehouse=folder / "warehouse", actor="bench@localhost")
    raw = psycopg.connect(raw_url)
    raw.execute(_RAW_DDL)
    raw.commit()
    payload = '{"scope": "database:bench", "to": 1767225600000000, "previous": 1767225599000000}'
    counter = {"raw": 0, "ledger": 0}
    mark = [T0]

    def raw_block() -> None:
        for _ in range(block):
            i = counter["raw"] = counter["raw"] + 1
            raw.execute("INSERT INTO events VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        (i, "watermark:database:bench", i, "WatermarkAdvanced", 1, 1_767_225_600_000_000 + i,
                         "bench@localhost", payload, "%064x" % i))
            raw.commit()

    def ledger_block() -> None:
        for _ in range(block):
            mark[0] += timedelta(microseconds=1)
            led.advance_watermark(mark[0], scope="database:bench")
            counter["ledger"] += 1

    raw_block(), ledger_block()  # warm up (connections, prepared statements), untimed
    ratios, rates = [], {"raw": [], "ledger": []}
    for turn in range(max(1, n // block)):
        timed = {}
        for name, run in (("raw", raw_block), ("ledger", ledger_block))[:: 1 if turn % 2 == 0 else -1]:
            start = time.perf_counter()
            run()
            timed[name] = block / (time.perf_counter() - start)
            rates[name].append(timed[name])
        ratios.append(timed["ledger"] / timed["raw"])
    appended = led.event_count()
    led.close()
    raw.close()
    assert appended == counter["ledger"], "a call appended nothing"
    print_table(("contender", "commits/s (median block)", "best block"),
                [("raw psycopg (1-row txn)", statistics.median(rates["raw"]), max(rates["raw"])),
                 ("ledger advance_watermark", statistics.median(rates["ledger"]), max(rates["ledger"]))])
    return statistics.median(ratios)


_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import psycopg  # imported before timing, as the floor's is
from ledger import Ledger
from ledger.core.tables import TableUndropped, UndropTable
start = time.perf_counter()
led = Ledger.open(sys.argv[2])
opened = time.perf_counter()
decision = led.runner.prepare(UndropTable(sys.argv[3])).decision
done = time.perf_counter()
led.close()
print(json.dumps({"open": opened - start, "decide": done - opened,
                  "ok": bool(decision.events) and type(decision.events[0][1]) is TableUndropped}))
"""

_FLOOR = r"""
import json, sys, time
import psycopg
url, name = sys.argv[1], sys.argv[2]
start = time.perf_counter()
base_url, _, schema = url.partition("?schema=")
db = psycopg.connect(base_url, autocommit=True)
gen, base = db.execute("SELECT gen, base FROM snapshot_generations ORDER BY gen DESC LIMIT 1").fetchone()
db.execute("SELECT seq, time, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
def entry(part, key):
    row = db.execute("SELECT value FROM snapshot_entries WHERE part = %s AND key = %s AND gen BETWEEN %s AND %s "
                     "ORDER BY gen DESC LIMIT 1", (part, key, base, gen)).fetchone()
    return None if row is None or row[0] is None else json.loads(bytes(row[0])[4:])
""" + UNDROP_READS


def _child(script: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"a child process failed:\n{out.stderr[-3000:]}")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if not found["ok"]:
        raise SystemExit("benchmark bug: the undrop's instance was not found")
    return found


def open_ledger(server: PostgresServer, events: int, folder: Path, opens: int) -> float:
    sys.path.insert(0, str(Path(__file__).parent))
    from fold import build  # the same simulated churn as the SQLite open benchmark
    sqlite_file = folder / "churn.db"
    start = time.perf_counter()
    built = build(sqlite_file, events)
    url = server.database("open")  # its own database: the floor reads it without a search_path
    copied = copy_ledger(sqlite_file, url)
    print(f"built {events:,} events and copied them into PostgreSQL in {time.perf_counter() - start:.1f} s "
          f"({copied.events:,} events)")
    start = time.perf_counter()
    Ledger.open(url).close()  # folds the whole log and stores the snapshot
    first = time.perf_counter() - start
    runs = [_child(_CHILD, str(REPO_ROOT), url, built.restorable) for _ in range(opens)]
    floors = [_child(_FLOOR, url, built.restorable)["floor"] for _ in range(opens)]
    total = statistics.median(r["open"] + r["decide"] for r in runs)
    floor = statistics.median(floors)
    print_table(("measurement", "seconds"),
                [("first open, no snapshot (folds all, stores one)", first),
                 (f"open (median of {opens})", statistics.median(r["open"] for r in runs)),
                 ("  then decide the undrop", statistics.median(r["decide"] for r in runs)),
                 ("open + decide", total),
                 ("floor: psycopg connect + the rows the decision reads", floor)])
    return total / floor


_HOST = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ledger import Ledger
where, host, seconds, database = sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
led = Ledger.open(where, actor="host" + host)
led.create_table(f"{database}.h{host}_warm")
print("ready", flush=True)
sys.stdin.readline()
done, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    led.create_table(f"{database}.h{host}_t{done}")
    done += 1
print(json.dumps({"done": done, "retries": led.retries}), flush=True)
led.close()
"""


_LOCKED = r"""
import json, sys, time
import psycopg
url, host, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
db = psycopg.connect(url, autocommit=True)
print("ready", flush=True)
sys.stdin.readline()
done, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    db.execute("SELECT floor_append(%s)", (f"h{host}",))
    done += 1
print(json.dumps({"done": done, "retries": 0}), flush=True)
"""


_LOCKED_SQLITE = r"""
import json, sqlite3, sys, time
path, host, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
db = sqlite3.connect(path, isolation_level=None, timeout=10)
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA synchronous = FULL")
print("ready", flush=True)
sys.stdin.readline()
done, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    db.execute("BEGIN IMMEDIATE")  # the file's one write lock, as the ledger takes it
    db.execute("INSERT INTO events SELECT coalesce(max(seq), 0) + 1, ?, coalesce(max(seq), 0) + 1, 'T', 1, 1, "
               "'bench', '{}', '' FROM events", (f"h{host}",))
    db.execute("COMMIT")
    done += 1
print(json.dumps({"done": done, "retries": 0}), flush=True)
"""


def _run_hosts(script: str, args: list[list[str]], seconds: float) -> tuple[float, int]:
    procs = [subprocess.Popen([sys.executable, "-c", script, *a], text=True, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE) for a in args]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [json.loads(p.communicate(timeout=seconds + 120)[0].strip().splitlines()[-1]) for p in procs]
    return sum(r["done"] for r in results) / seconds, sum(r["retries"] for r in results)


def floor(server: PostgresServer | Path, count: int, seconds: float) -> float:
    """Appends per second in all of ``count`` processes through the one lock, with nothing but the
    insert under it (the floor of a chain in one store: measured beside the ledger). ``server`` a
    folder: the same on a SQLite file there."""
    if isinstance(server, Path):
        path = server / f"floor-{count}-{uuid.uuid4().hex[:4]}.db"
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute(_RAW_DDL.replace("UNIQUE (stream, version)", "UNIQUE (seq)"))
        return _run_hosts(_LOCKED_SQLITE, [[str(path), str(n), str(seconds)] for n in range(count)], seconds)[0]
    url = server.database("floor")
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(_RAW_DDL.replace("UNIQUE (stream, version)", "UNIQUE (seq)"))
        # The floor of any chained log on one server: each append takes the one lock, reads the head
        # and inserts one row after it, and commits (fsync on), in one round trip; nothing else.
        db.execute("CREATE FUNCTION floor_append(s text) RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
                   "PERFORM pg_advisory_xact_lock(1, 1); INSERT INTO events SELECT coalesce(max(seq), 0) + 1, s, "
                   "coalesce(max(seq), 0) + 1, 'T', 1, 1, 'bench', '{}', '' FROM events; END $$")
    return _run_hosts(_LOCKED, [[url, str(n), str(seconds)] for n in range(count)], seconds)[0]


def hosts(where: str, count: int, seconds: float, shared_database: bool) -> tuple[float, int]:
    """Commands per second in all, and appends refused and retried, with ``count`` processes creating
    tables in the ledger at ``where``: each in a database of its own, or all in one."""
    return _run_hosts(_HOST, [[str(REPO_ROOT), where, str(n), str(seconds), "shared" if shared_database else f"h{n}"]
                              for n in range(count)], seconds)


def _new_ledger(server: PostgresServer, store: str, count: int, folder: Path) -> str:
    if store == "postgresql":
        where = server.database(f"hosts{count}_{uuid.uuid4().hex[:4]}")
        Ledger.open(where, warehouse=folder / "warehouse").close()
    else:
        where = str(folder / f"hosts-{count}-{uuid.uuid4().hex[:4]}.db")
        Ledger.open(where).close()
    return where


def fleet(server: PostgresServer, seconds: float, folder: Path, rounds: int) -> None:
    """1 and 4 processes, in different databases and in one, on PostgreSQL and on SQLite; reported
    (issue 62: on two cores, four processes and four backends measure the scheduler): 4 processes
    in different databases against the single process's rate in all (R18: they condition on
    nothing the others write; the store's one lock for the chain is the floor), the median of
    ``rounds`` pairs run back to back, beside the floor's own ratio."""
    rows = []
    for store in ("postgresql", "sqlite"):
        raw = {count: floor(server if store == "postgresql" else folder, count, seconds) for count in (1, 4)}
        rows += [(f"{store}: the floor (raw lock + insert)", count, "-", rate, 0, rate / raw[1])
                 for count, rate in raw.items()]
        pairs: list[dict[int, tuple[float, int]]] = []
        for turn in range(rounds):
            pair = {count: hosts(_new_ledger(server, store, count, folder), count, seconds, False)
                    for count in ((1, 4) if turn % 2 == 0 else (4, 1))}
            pairs.append(pair)
            rows += [(store, count, "one each", rate, retries, rate / pair[1][0])
                     for count, (rate, retries) in sorted(pair.items())]
        ratios = [pair[4][0] / pair[1][0] for pair in pairs]
        shared_rate, shared_retries = hosts(_new_ledger(server, store, 4, folder), 4, seconds, True)
        rows.append((store, 4, "one", shared_rate, shared_retries, shared_rate / pairs[-1][1][0]))
        # Reported, no target (issue 62): four processes and four backends on two cores measure the
        # scheduler; the floor's own ratio, printed beside it, says how much.
        print(f"REPORTED  {store}: 4 processes in different databases / 1 process (commands/s in all; median of "
              f"{rounds}: {', '.join(f'{r:.2f}' for r in ratios)}): {statistics.median(ratios):.3f}x")
        rate = statistics.median(pair[4][0] for pair in pairs)
        print(f"      beside it, the floor's own 4 processes / 1 process: {raw[4] / raw[1]:.2f}x; "
              f"the ledger's 4 processes (median) / the floor's 4: {rate / raw[4]:.2f}x")
    print_table(("store", "processes", "databases", "commands/s in all", "appends refused and retried",
                 "x 1 process (its round's)"), rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=3000, help="appends per contender")
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0, help="per hosts run")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of 1 and 4 processes in different databases")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--only", choices=("append", "open", "hosts"), default=None, help="one measurement")
    args = parser.parse_args()
    print(environment())
    server = PostgresServer(fsync=True)
    try:
        with scratch_dir(args.dir) as folder:
            if args.only in (None, "append"):
                print(f"\nappend: {args.n:,} single-event commands each, in blocks of {args.block}, fsync on")
                verdict("ledger advance_watermark / raw psycopg 1-row txn (median paired ratio)",
                              append(server, args.n, args.block, folder), 0.8, higher_is_better=True, unit="x")
            if args.only in (None, "open"):
                print(f"\nopen: a {args.events:,}-event ledger")
                verdict(f"open {args.events:,}-event PostgreSQL ledger + decide undrop / floor (median)",
                              open_ledger(server, args.events, folder, args.opens), 20.0, higher_is_better=False,
                              unit="x")
            if args.only in (None, "hosts"):
                print(f"\nhosts: processes creating tables in one ledger for {args.seconds:.0f} s each")
                fleet(server, args.seconds, folder, max(1, args.rounds))
    finally:
        server.close()
    print(f"finished; {load()}")
    return 0  # a MISS is printed, never an exit status: benchmarks do not gate


if __name__ == "__main__":
    raise SystemExit(main())
