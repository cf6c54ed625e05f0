"""The sweep of abandoned writes against a plain unlink loop measured in the same run.

    python benchmarks/sweep.py [--writes 1000] [--files 100] [--rounds 2]

Speed. Two identical trees are built: ``--writes`` write folders of ``--files`` small files
each. One is a ledger's table whose writes were begun and never committed (their leases
ran out); ``spark_ops.sweep`` records them swept, deletes their folders on the executors
and records what it deleted. The other is deleted by a plain ``os.walk`` + ``unlink`` loop
in one process. Spark's start-up is excluded. Target: the sweep is no slower than the loop.

Memory. The driver's Python heap peak (``tracemalloc``) during the sweep at N and 10N
files (the same number of writes, ten times the files each). Target: flat (10N within
1.5x of N).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

from _common import environment, scratch_dir
from vacuum import unlink_one_thread

from ledger import Ledger, ManualClock
from spark_ops import local_session, sweep

PAYLOAD = b"u" * 128


def plain_tree(root: Path, writes: int, files: int) -> None:
    for w in range(writes):
        folder = root / f"w{w:05d}"
        folder.mkdir(parents=True)
        for f in range(files):
            (folder / f"part-{f:05d}.parquet").write_bytes(PAYLOAD)


def abandoned(base: Path, writes: int, files: int) -> Ledger:
    """A ledger whose one table has ``writes`` writes begun, filled and never committed."""
    clock = ManualClock()
    base.mkdir(parents=True)
    with Ledger.open(base / "ledger.db", warehouse=base / "warehouse", clock=clock, synchronous="OFF") as led:
        led.create_table("bench.t")
        for _ in range(writes):
            w = led.begin_write("bench.t", lease="1h")
            os.makedirs(w.folder)
            for f in range(files):
                Path(w.folder, f"part-{f:05d}.parquet").write_bytes(PAYLOAD)
    clock.advance(timedelta(hours=2))
    return Ledger.open(base / "ledger.db", clock=clock, actor="bench")


def timed_sweep(spark, base: Path, writes: int, files: int) -> tuple[float, int, int]:
    led = abandoned(base, writes, files)
    os.sync()
    tracemalloc.start()
    started = time.perf_counter()
    report = sweep(spark, led)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert not report.failures and sum(len(s.writes) for s in report.swept) == writes, report.to_dict()
    led.close()
    return elapsed, report.files, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    n = args.writes * args.files
    print(f"sweep benchmark: {args.writes:,} abandoned writes x {args.files} files = {n:,} files; {environment()}")
    spark = local_session("retention-ledger-bench-sweep")
    spark.sparkContext.parallelize(range(100), 8).map(lambda x: x).count()  # warm the workers
    with scratch_dir(args.dir) as scratch:
        plain, swept = [], []
        for r in range(args.rounds):  # alternate, best of rounds, to damp machine noise
            plain_tree(scratch / f"plain{r}", args.writes, args.files)
            os.sync()
            start = time.perf_counter()
            unlink_one_thread(scratch / f"plain{r}")  # the plain unlink loop the vacuum is judged against
            plain.append(time.perf_counter() - start)
            assert not any(files for _, _, files in os.walk(scratch / f"plain{r}"))
            seconds, deleted, _ = timed_sweep(spark, scratch / f"sweep{r}", args.writes, args.files)
            assert deleted == n, deleted
            swept.append(seconds)
            shutil.rmtree(scratch / f"plain{r}")
            shutil.rmtree(scratch / f"sweep{r}")
        base, mine = min(plain), min(swept)
        print(f"  plain os.walk + unlink, 1 process : {base:7.3f} s  ({n / base:10,.0f} files/s)")
        print(f"  spark_ops.sweep (local[2])        : {mine:7.3f} s  ({n / mine:10,.0f} files/s)")
        print(f"  ratio sweep / plain               : {mine / base:7.2f}x   target <= 1.00x  "
              f"{'PASS' if mine <= base else 'MISS'}")
        small = max(1, args.files // 10)
        writes = max(1, args.writes // 10)
        _, _, peak_small = timed_sweep(spark, scratch / "mem1", writes, small)
        _, _, peak_large = timed_sweep(spark, scratch / "mem10", writes, small * 10)
    growth = peak_large / peak_small
    print(f"driver Python heap peak during the sweep ({writes} writes):")
    print(f"  N   = {writes * small:>8} files : {peak_small / 1024:9.1f} KiB")
    print(f"  10N = {writes * small * 10:>8} files : {peak_large / 1024:9.1f} KiB")
    print(f"  growth 10N / N                    : {growth:7.2f}x   target <= 1.50x (flat)  "
          f"{'PASS' if growth <= 1.5 else 'MISS'}")
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
