"""The auditor's costs on a million-event ledger: verify, checkpoints, as-of replay, export.

Targets (issue 10): ``verify`` of a 1,000,000-event ledger reported in events per
second; ``as_of`` at a random point answers "in well under a second". The append
rate with the chain is ``benchmarks/append.py``'s job (its baseline writes a hash
column too).

The ledger is ``benchmarks/fold.py``'s simulated one (a million valid events of
every kind the fold handles, each with its chain hash), built here or reused
(``--reuse``, a file kept by ``fold.py --keep`` or ``audit.py --keep``).

Baselines measured in the same run, on the same file:

* **chain floor**: plain ``sqlite3`` reading every row and SHA-256 over each row's
  fields chained (``ledger.chain.chain``): what any verifier must at least do.
  ``verify`` also refolds the log from nothing and re-checks every rule, so its
  ratio to this floor is the price of the fold's checks.
* **open**: opening the ledger with its snapshot (what any question costs a new
  process); ``as_of`` is reported beside it.

What is timed:

* ``Ledger.open`` the first time (no snapshots: it folds the log and writes the
  catalog snapshot and a history snapshot every 25,000 events);
* ``verify()`` (chain + refold + history snapshots compared), events/s;
* ``checkpoint()`` (the Merkle root over a million hashes);
* ``as_of(seq=)`` at ``--points`` random points: *cold* (a fresh process: open, then
  one ``as_of`` and a ``tables()`` query, the open reported apart) and *warm* (one
  open ledger asked again and again), median and worst;
* ``export`` to Parquet.

    python benchmarks/audit.py [--events 1000000] [--points 12] [--dir PATH] [--keep]
    python benchmarks/audit.py --reuse /path/kept/ledger.db
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import REPO_ROOT, environment, print_table, scratch_dir, verdict
from fold import build, drop_snapshot

from ledger import Ledger
from ledger.chain import chain

AS_OF_TARGET = 1.0
"""Seconds: "well under a second" for one as_of at a random point, warm or cold (open apart)."""


def chain_floor(path: Path) -> float:
    """Seconds for plain sqlite3 to read every row and recompute the chain."""
    db = sqlite3.connect(path)
    try:
        start = time.perf_counter()
        previous, after = bytes(32), 0
        while True:
            rows = db.execute("SELECT seq, stream, version, type, schema_version, time, actor, payload FROM events "
                              "WHERE seq > ? ORDER BY seq LIMIT 50000", (after,)).fetchall()
            if not rows:
                break
            previous = chain(rows, previous)[-1]
            after = rows[-1][0]
        return time.perf_counter() - start
    finally:
        db.close()


_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ledger import Ledger
t0 = time.perf_counter()
led = Ledger.open(sys.argv[2], create=False)
t1 = time.perf_counter()
view = led.as_of(seq=int(sys.argv[3]))
n = len(view.tables()) + len(view.dropped_tables())
t2 = time.perf_counter()
print(json.dumps({"open": t1 - t0, "as_of": t2 - t1, "answers": n}))
"""


def cold_as_of(path: Path, seq: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(REPO_ROOT), str(path), str(seq)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the child process failed (as_of #{seq}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--points", type=int, default=12, help="random as_of points")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--dir", default=None, help="make the scratch folder in here")
    parser.add_argument("--keep", action="store_true", help="keep the ledger file for --reuse")
    parser.add_argument("--reuse", metavar="LEDGER", default=None, help="measure a kept file")
    args = parser.parse_args()

    print(environment())
    with scratch_dir(args.dir, keep=args.keep and args.reuse is None) as folder:
        if args.reuse:
            path = Path(args.reuse)
            print(f"audit benchmark: reusing {path}")
        else:
            path = folder / "ledger.db"
            start = time.perf_counter()
            built = build(path, args.events)
            print(f"audit benchmark: built {built.events:,} events in {time.perf_counter() - start:.1f} s")
            if args.keep:
                built.save(path)
        drop_snapshot(path)  # the first open below is the one that writes them

        rows: list[tuple[str, float, str]] = []
        start = time.perf_counter()
        led = Ledger.open(path)
        first_open = time.perf_counter() - start
        n = led.event_count()
        rows.append(("first open (folds, writes snapshots)", first_open, f"{n / first_open:,.0f} events/s"))

        floor = chain_floor(path)
        rows.append(("chain floor: sqlite3 read + SHA-256 chain", floor, f"{n / floor:,.0f} events/s"))
        start = time.perf_counter()
        report = led.verify()
        verified = time.perf_counter() - start
        assert report.events == n and report.history_discarded == 0 and not report.snapshot_discarded
        rows.append(("verify (chain + refold + snapshots)", verified, f"{n / verified:,.0f} events/s"))

        start = time.perf_counter()
        cp = led.checkpoint()
        rows.append(("checkpoint (Merkle root)", time.perf_counter() - start, f"#{cp.seq}"))
        start = time.perf_counter()
        again = led.verify(against=cp)
        rows.append(("verify against that checkpoint", time.perf_counter() - start,
                     f"{len(again.consistency_proof)} proof hashes"))

        rng = random.Random(args.seed)
        points = [rng.randint(1, n) for _ in range(args.points)]
        warm = []
        for seq in points:
            start = time.perf_counter()
            view = led.as_of(seq=seq)
            view.tables()
            warm.append(time.perf_counter() - start)
        export_path = folder / "log.parquet"
        start = time.perf_counter()
        exported = led.export(export_path, format="parquet")
        export_time = time.perf_counter() - start
        led.close()
        cold = [cold_as_of(path, seq) for seq in points]
        cold_as = [c["as_of"] for c in cold]
        opens = [c["open"] for c in cold]
        rows += [
            (f"as_of, warm: median of {len(points)} random points", statistics.median(warm), f"worst {max(warm):.3f} s"),
            ("as_of, cold process: median (open apart)", statistics.median(cold_as), f"worst {max(cold_as):.3f} s"),
            ("  the open before it: median", statistics.median(opens), f"worst {max(opens):.3f} s"),
            ("export to Parquet", export_time,
             f"{exported.events / export_time:,.0f} events/s, {export_path.stat().st_size / 1e6:.0f} MB"),
        ]
        print()
        print_table(("measurement", "seconds", ""), rows)
        print()
        print(f"verify runs at {floor / verified:.2f}x the chain floor (the rest is the refold and its checks)")
        verdict("as_of at a random point, warm (worst)", max(warm), AS_OF_TARGET, higher_is_better=False, unit=" s")
        verdict("as_of at a random point, cold process, open apart (worst)", max(cold_as), AS_OF_TARGET,
                higher_is_better=False, unit=" s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
