"""The auditor's and the upgrader's waits: verify, a first open without snapshots, as_of.

Targets (DESIGN.md, "Performance"; issue 62, which restated issue 35's and 48's), each against
what the code above the fold controls, measured in the same run on the same file:

* **full replay**: ``fold_rows`` from nothing over every row, what an open without stored
  states runs (the fold's own speed in Python, which bounds the three below); the best of two
  passes, one before the first open and one after ``verify``;
* ``verify()`` (the chain, a refold from nothing re-checking every rule, every stored
  snapshot compared with the fold), in one process: **<= 2.0x** the full replay;
* a **first open** with every stored snapshot removed (what an upgrade that changes the
  snapshot format, or a snapshot ``verify`` discarded, costs): it folds the log and stores the
  state the next open reads, **<= 1.1x** the full replay;
* ``maintain()`` after it (the stored states ``as_of`` starts from): reported;
* ``as_of`` at the worst of ``--points`` random points, warm (one open ledger asked again and
  again), after ``maintain``: **<= 2.0x** the **window floor** at that point: reading the events
  from the stored generation at or before it (``maintain`` stores one every ``history_every``)
  up to it, and folding them onto the state there (folded beforehand, untimed). The issue's
  floor also counts the reads of stored entries those events ask for; they cannot be timed
  apart from ``as_of``'s own reading of them, so they are left out, and this floor is the
  stricter one. Cold (a fresh process, its open reported apart) beside it.

Reported beside them: the **chain floor**, plain ``sqlite3`` reading every row and SHA-256 over
each row's fields chained (``ledger.chain.chain``), what any auditor's own verifier must at least
do (the best of passes spread through the run), and verify's and the first open's ratios to it
(issue 35's targets, 6-8x and 3x, were set on a machine whose fold ran at 2.7 chain floors; on
this one the fold alone is more than 5).

Also reported: full replay (``fold_rows`` from nothing, what an open without snapshots
runs) in events/s beside the plain read of the rows alone; a checkpoint, a verify
against it, and an export to Parquet. ``--targets-only`` leaves out those three and the cold
``as_of`` (about half a run at a million events), for a run that must fit a time slot.

The ledgers are ``benchmarks/fold.py``'s simulated ones (valid events of every kind the
fold handles, each with its chain hash), one per ``--sizes``, built here or reused
(``--reuse``, a file kept by ``fold.py --keep`` or ``audit.py --keep``; one size then).
``--shape large-state`` builds the log whose state grows with it (``fold.LargeState``: no
vacuum purges), the hardest case for comparing snapshots. ``--stored`` (with ``--reuse``, a file
``maintain`` has stored its states in) keeps them: no first open, no ``maintain``, no replay, only
the chain floor, ``verify`` and ``as_of`` (their targets), for a run that must fit a short slot;
``--only verify`` or ``--only as_of`` with it measures one of the two (on a busy machine the two
at a million events took more than the 8 minutes a locked slot allows).

    python benchmarks/audit.py [--sizes 100000,1000000] [--shape churn|large-state] [--points 20] [--keep] [--targets-only]
    python benchmarks/audit.py --reuse /path/kept/ledger.db [--shape large-state]   (the shape it was built with)
    python benchmarks/audit.py --reuse /path/maintained/ledger.db --stored [--shape large-state] [--only verify|as_of]
    python benchmarks/audit.py --receipts 24000 [--one-by-one 300]

``--receipts N`` measures proving deletions instead (issue 44): a real vacuum (local Spark) deletes
N small files of one dropped table, then every key is proven at once (``prove_deleted_many``, each
receipt part read once) and ``--one-by-one`` keys, chosen at random, with ``prove_deleted`` each
(each reads and hashes a part of up to 10,000 objects), scaled to N: the ratio is how much sooner
the many-keys form answers for all N. Reported, no target.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from _common import REPO_ROOT, environment, print_table, scratch_dir, verdict
from fold import SHAPES, build, drop_snapshot

from ledger import Ledger, ManualClock
from ledger.chain import chain
from ledger.core.model import State, fold_rows
from ledger.persistence.sqlite import SQLiteStore

VERIFY_TARGET = 2.0
"""verify, as a multiple of the full replay of the same log."""
OPEN_TARGET = 1.1
"""A first open without snapshots, as a multiple of the full replay."""
AS_OF_TARGET = 2.0
"""One as_of at a random point, warm, the worst of the points, as a multiple of the window floor."""


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
from ledger import Ledger, ManualClock
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


def read_alone(path: Path) -> float:
    """Seconds for plain sqlite3 to read every row (no hashing): the floor under any replay."""
    db = sqlite3.connect(path)
    try:
        start = time.perf_counter()
        for _ in db.execute("SELECT seq, stream, version, type, schema_version, time, actor, payload FROM events"):
            pass
        return time.perf_counter() - start
    finally:
        db.close()


def replay(path: Path) -> float:
    """Seconds to fold the whole log from nothing, as an open without snapshots does."""
    store = SQLiteStore(str(path))
    try:
        start = time.perf_counter()
        fold_rows(State(), store.read(0))
        return time.perf_counter() - start
    finally:
        store.close()


def window_floor(path: Path, point: int) -> tuple[float, int]:
    """Seconds to read the events between the stored generation at or before ``point`` and
    ``point`` and fold them onto the state there (folded beforehand, untimed); and how many: the
    fold ``as_of(seq=point)`` must do, with none of the reads of stored entries it asks for (a
    floor under it)."""
    store = SQLiteStore(str(path))
    try:
        start = max((g.seq for g in store.generations() if g.seq <= point), default=0)
        state = fold_rows(State(), store.read(0, upto=start)) if start else State()
        began = time.perf_counter()
        fold_rows(state, store.read(start, upto=point))
        return time.perf_counter() - began, point - start
    finally:
        store.close()


def measure(path: Path, points: int, seed: int, folder: Path, shape: str = "churn", extras: bool = True,
            stored: bool = False, only: str | None = None) -> bool:
    """Every figure for one ledger (``extras`` False: only those with a target and their floors;
    ``stored``: only verify's and as_of's, on the stored states the file holds, or the one of them
    ``only`` names); prints them; returns whether every target was met."""
    later: list[tuple[str, float, str]] = []
    if not stored:
        drop_snapshot(path)  # the first open below is the one that has them written
    # The floor is the best of passes spread through the run (two here, one after verify, one at
    # the end): a pass slowed by the machine (a write-back of the freshly built file once doubled
    # it) would flatter every ratio against it.
    floors = [] if only == "as_of" else [chain_floor(path) for _ in range(2)]
    n = sqlite3.connect(path).execute("SELECT count(*) FROM events").fetchone()[0]
    if stored:
        led = Ledger.open(path, create=False)
        return _verify_and_as_of(led, path, n, floors, points, seed, shape, only)
    alone, replays = read_alone(path), [replay(path)]

    start = time.perf_counter()
    led = Ledger.open(path, create=False)
    first_open = time.perf_counter() - start
    start = time.perf_counter()
    maintained = led.maintain()
    upkeep = time.perf_counter() - start

    start = time.perf_counter()
    report = led.verify()
    verified = time.perf_counter() - start
    assert report.events == n and report.generations_discarded == 0 and not report.snapshot_discarded, report
    floors.append(chain_floor(path))
    replays.append(replay(path))  # the best of two, as the chain floor's: a slow pass would flatter every ratio
    replayed = min(replays)

    if extras:
        start = time.perf_counter()
        cp = led.checkpoint()
        later.append(("checkpoint (Merkle root)", time.perf_counter() - start, f"#{cp.seq}"))
        start = time.perf_counter()
        led.verify(against=cp)
        later.append(("verify against that checkpoint (chain in line)", time.perf_counter() - start, ""))

    chosen = _points(n, points, seed)
    warm = _as_of_warm(led, chosen)
    window = window_floor(path, chosen[warm.index(max(warm))])
    later.append((f"as_of, warm: median of {len(chosen)} random points", statistics.median(warm),
                  f"worst {max(warm):.3f} s"))
    exported = _export(led, folder, n) if extras else None
    led.close()
    if exported is not None:
        later += [*_cold(path, chosen), exported]
    floors.append(chain_floor(path))
    floor = min(floors)
    rows = [
        ("chain floor: sqlite3 read + SHA-256 chain", floor,
         f"{n / floor:,.0f} events/s (best of {len(floors)}; worst {max(floors):.2f} s)"),
        ("read the rows alone (sqlite3)", alone, f"{n / alone:,.0f} events/s"),
        ("full replay (fold_rows from nothing)", replayed, f"{n / replayed:,.0f} events/s, {replayed / floor:.2f}x "
                                                           f"the chain floor (best of 2; worst {max(replays):.2f} s)"),
        ("window floor: the worst point's fold past its stored state", window[0], f"{window[1]:,} events"),
        ("first open, no snapshots (folds; stores the state)", first_open,
         f"{first_open / replayed:.2f}x the replay, {first_open / floor:.2f}x the chain floor"),
        ("maintain() after it (stored states as_of starts from)", upkeep,
         f"{maintained.written} written, {maintained.generations} in all"),
        ("verify (chain + refold + every stored state compared)", verified,
         f"{verified / replayed:.2f}x the replay, {verified / floor:.2f}x the chain floor "
         f"({report.generations_compared} compared)"),
        *later,
    ]
    print()
    print(f"--- {n:,} events ---")
    print_table(("measurement", "seconds", ""), rows)
    print()
    met = [
        verdict(f"verify, {n:,} events ({shape}), against the full replay", verified / replayed, VERIFY_TARGET,
                higher_is_better=False, unit="x"),
        verdict(f"first open without snapshots, {n:,} events, against the full replay", first_open / replayed,
                OPEN_TARGET, higher_is_better=False, unit="x"),
        _as_of_verdict(n, warm, window),
    ]
    return all(met)


def _as_of_verdict(n: int, warm: list[float], window: tuple[float, int]) -> bool:
    return verdict(f"as_of at a random point, warm, {n:,} events (worst of {len(warm)}: {max(warm):.3f} s), against "
                   f"the window floor ({window[0]:.3f} s, {window[1]:,} events)", max(warm) / window[0], AS_OF_TARGET,
                   higher_is_better=False, unit="x")


def _verify_and_as_of(led: Ledger, path: Path, n: int, floors: list[float], points: int, seed: int,
                      shape: str, only: str | None) -> bool:
    """``--stored``: verify against the chain floor, and as_of at ``points`` random points, on the
    stored states the file holds (the open reads them, as the next open after ``maintain`` does);
    ``only``: one of the two (``"verify"``, ``"as_of"``)."""
    rows: list[tuple[str, float, str]] = []
    met: list[bool] = []
    if only != "as_of":
        replays = [replay(path)]
        start = time.perf_counter()
        report = led.verify()
        verified = time.perf_counter() - start
        assert report.events == n and report.generations_discarded == 0 and not report.snapshot_discarded, report
        floors.append(chain_floor(path))
    chosen = _points(n, points, seed)
    warm = _as_of_warm(led, chosen) if only != "verify" else []
    window = window_floor(path, chosen[warm.index(max(warm))]) if warm else (0.0, 0)
    led.close()
    if only != "as_of":
        floors.append(chain_floor(path))
        floor = min(floors)
        replays.append(replay(path))
        replayed = min(replays)
        rows += [("chain floor: sqlite3 read + SHA-256 chain", floor,
                  f"{n / floor:,.0f} events/s (best of {len(floors)}; worst {max(floors):.2f} s)"),
                 ("full replay (fold_rows from nothing)", replayed, f"{n / replayed:,.0f} events/s, "
                                                                    f"{replayed / floor:.2f}x the chain floor "
                                                                    f"(best of 2; worst {max(replays):.2f} s)"),
                 ("verify (chain + refold + every stored state compared)", verified,
                  f"{verified / replayed:.2f}x the replay, {verified / floor:.2f}x the chain floor "
                  f"({report.generations_compared} compared)")]
    if warm:
        rows += [("window floor: the worst point's fold past its stored state", window[0], f"{window[1]:,} events"),
                 (f"as_of, warm: median of {len(warm)} random points", statistics.median(warm),
                  f"worst {max(warm):.3f} s")]
    print()
    print(f"--- {n:,} events, stored states as kept ---")
    print_table(("measurement", "seconds", ""), rows)
    print()
    if only != "as_of":
        met.append(verdict(f"verify, {n:,} events ({shape}), against the full replay", verified / replayed,
                           VERIFY_TARGET, higher_is_better=False, unit="x"))
    if warm:
        met.append(_as_of_verdict(n, warm, window))
    return all(met)


def _points(n: int, points: int, seed: int) -> list[int]:
    """``points`` random events of ``n`` (``seed``): where ``as_of`` is asked."""
    rng = random.Random(seed)
    return [rng.randint(1, n) for _ in range(points)]


def _as_of_warm(led: Ledger, chosen: list[int]) -> list[float]:
    """Seconds of ``as_of`` and its ``tables()`` at each of ``chosen``, one open ledger asked again and again."""
    warm = []
    for seq in chosen:
        start = time.perf_counter()
        view = led.as_of(seq=seq)
        view.tables()
        warm.append(time.perf_counter() - start)
    return warm


def _export(led: Ledger, folder: Path, n: int) -> tuple[str, float, str]:
    """An export of the log to Parquet (no target)."""
    export_path = folder / f"log-{n}.parquet"
    start = time.perf_counter()
    exported = led.export(export_path, format="parquet")
    export_time = time.perf_counter() - start
    return ("export to Parquet", export_time,
            f"{exported.events / export_time:,.0f} events/s, {export_path.stat().st_size / 1e6:.0f} MB")


def _cold(path: Path, chosen: list[int]) -> list[tuple[str, float, str]]:
    """``as_of`` in a fresh process at each point, its open apart (no target)."""
    cold = [cold_as_of(path, seq) for seq in chosen]
    cold_as = [c["as_of"] for c in cold]
    opens = [c["open"] for c in cold]
    return [
        ("as_of, cold process: median (open apart)", statistics.median(cold_as), f"worst {max(cold_as):.3f} s"),
        ("  the open before it: median", statistics.median(opens), f"worst {max(opens):.3f} s"),
    ]


def measure_receipts(files: int, one_by_one: int, seed: int, folder: Path) -> None:
    """Proving ``files`` deleted keys at once against one by one (see the module docstring)."""
    from spark_ops import local_session, vacuum
    clock = ManualClock(datetime.now(timezone.utc))
    with Ledger.open(folder / "receipts.db", clock=clock) as led:
        table = led.create_table("bench.old")
        for i in range(files):
            path = os.path.join(table.location, f"day={i % 10:02d}", f"part-{i:06d}.parquet")
            if i < 10:
                os.makedirs(os.path.dirname(path))
            with open(path, "wb") as out:
                out.write(b"x" * (i % 7 + 1))
        led.drop_table("bench.old")
        clock.advance(timedelta(days=14))
        spark = local_session("retention-ledger-bench")
        report = vacuum(spark, led)
        receipt = led.receipt(report.run_id)
        keys = [f"{table.id}/day={i % 10:02d}/part-{i:06d}.parquet" for i in range(files)]
        start = time.perf_counter()
        bundle = led.prove_deleted_many(keys)
        many = time.perf_counter() - start
        assert len(bundle.proofs) == files == receipt.files, (len(bundle.proofs), files, receipt.files)
        chosen = random.Random(seed).sample(keys, min(one_by_one, files))
        start = time.perf_counter()
        for key in chosen:
            led.prove_deleted(key)
        each = (time.perf_counter() - start) / len(chosen)
    print()
    print(f"--- proving {files:,} deleted keys ({len(receipt.parts)} receipt parts) ---")
    print_table(("measurement", "seconds", ""), [
        ("prove_deleted_many: every key at once", many, f"{files / many:,.0f} keys/s"),
        (f"prove_deleted one by one ({len(chosen)} keys, scaled to {files:,})", each * files,
         f"{1 / each:,.1f} keys/s"),
    ])
    print(f"many at once: {each * files / many:,.0f}x sooner than one by one, for {files:,} keys")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="events, comma-separated")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="churn", help="the log's kind (fold.SHAPES)")
    parser.add_argument("--points", type=int, default=20, help="random as_of points")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--dir", default=None, help="make the scratch folder in here")
    parser.add_argument("--keep", action="store_true", help="keep the ledger files for --reuse")
    parser.add_argument("--reuse", metavar="LEDGER", default=None, help="measure a kept file")
    parser.add_argument("--targets-only", action="store_true",
                        help="leave out the figures with no target (checkpoint, verify against it, cold as_of, export)")
    parser.add_argument("--stored", action="store_true",
                        help="with --reuse: keep the stored states the file holds; only verify and as_of (their targets)")
    parser.add_argument("--only", choices=("verify", "as_of"), default=None,
                        help="with --stored: measure only verify (and its floor) or only as_of")
    parser.add_argument("--receipts", type=int, default=None, metavar="N",
                        help="measure proving N deleted keys at once against one by one instead")
    parser.add_argument("--one-by-one", type=int, default=300, metavar="K",
                        help="with --receipts: keys proven one by one, scaled to N")
    args = parser.parse_args()

    print(environment())
    with scratch_dir(args.dir, keep=args.keep and args.reuse is None) as folder:
        if args.receipts:
            measure_receipts(args.receipts, args.one_by_one, args.seed, folder)
            return 0
        if args.reuse:
            print(f"audit benchmark: reusing {args.reuse}")
            measure(Path(args.reuse), args.points, args.seed, folder, args.shape, not args.targets_only, args.stored,
                    args.only)
            return 0
        for size in (int(s) for s in args.sizes.split(",")):
            path = folder / f"ledger-{size}.db"
            start = time.perf_counter()
            built = build(path, size, args.shape)
            print(f"audit benchmark: built {built.events:,} events in {time.perf_counter() - start:.1f} s")
            if args.keep:
                built.save(path)
            measure(path, args.points, args.seed, folder, args.shape, not args.targets_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
