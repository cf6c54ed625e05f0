"""Vacuum speed and driver memory, against a plain unlink loop measured in the same run.

    python benchmarks/vacuum.py [--tables 200] [--files 500]

Speed. Two identical warehouses of dropped tables (``--tables`` folders of
``--files`` small files each) are built. The baseline walks one of them with
``os.walk`` and unlinks every file in a single Python process: the least work
any deleter must do (it has to find the files too). The vacuum then purges the
other through the whole pipeline: plan, watermark append, broadcast, executors
listing and deleting, purge records. Spark's start-up is excluded (the session
is started and warmed before timing). Target: vacuum time <= 2x baseline.

Memory. The driver's Python heap peak (``tracemalloc``) during the vacuum call
at N files and at 10N files, same number of tables. Executors send back one
row per table, never a path per file, so the peak must not grow with N.
Target: 10N peak within 1.5x of the N peak.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger import Ledger, ManualClock  # noqa: E402
from spark_ops import local_session, vacuum  # noqa: E402

PAYLOAD = b"x" * 128


def build_folders(root: Path, tables: int, files: int) -> list[Path]:
    folders = []
    for t in range(tables):
        folder = root / f"t{t:05d}"
        folder.mkdir(parents=True)
        for f in range(files):
            (folder / f"part-{f:05d}.parquet").write_bytes(PAYLOAD)
        folders.append(folder)
    return folders


def build_ledger(base: Path, tables: int, files: int) -> tuple[Ledger, ManualClock]:
    """A ledger with ``tables`` dropped tables, each holding ``files`` files, all past retention."""
    clock = ManualClock()
    base.mkdir(parents=True)
    led = Ledger.open(base / "ledger.db", warehouse=base / "warehouse", clock=clock,
                      synchronous="FULL", actor="bench")
    for t in range(tables):
        location = Path(led.create_table(f"bench.t{t:05d}").location)
        location.mkdir(parents=True)
        for f in range(files):
            (location / f"part-{f:05d}.parquet").write_bytes(PAYLOAD)
        led.drop_table(f"bench.t{t:05d}")
    clock.advance(timedelta(days=8))
    return led, clock


def unlink_baseline(root: Path) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            os.unlink(os.path.join(folder, name))
            count += 1
    return time.perf_counter() - start, count


def timed_vacuum(spark, base: Path, tables: int, files: int) -> tuple[float, int, int]:
    led, _ = build_ledger(base, tables, files)
    os.sync()
    tracemalloc.start()
    start = time.perf_counter()
    report = vacuum(spark, led)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert not report.failures and len(report.purged) == tables, report.to_dict()
    led.close()
    print(f"    vacuum phases: " + ", ".join(f"{k} {v:.3f}s" for k, v in report.timings.items()))
    return elapsed, report.files, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--files", type=int, default=500, help="files per table at N")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temp folder)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="rl-bench-vacuum-", dir=args.dir))

    spark = local_session("retention-ledger-bench")
    spark.sparkContext.parallelize(range(100), 8).map(lambda x: x).count()  # warm the workers

    n = args.tables * args.files
    print(f"vacuum benchmark: {args.tables} tables x {args.files} files = {n} files of {len(PAYLOAD)} bytes")
    baseline_times, vacuum_times = [], []
    for r in range(args.rounds):  # alternate, best of rounds, to damp machine noise
        build_folders(scratch / f"plain{r}", args.tables, args.files)
        os.sync()  # both sides start with the new files written back, not mid-writeback
        seconds, count = unlink_baseline(scratch / f"plain{r}")
        assert count == n
        baseline_times.append(seconds)
        seconds, deleted, _ = timed_vacuum(spark, scratch / f"vac{r}", args.tables, args.files)
        assert deleted == n
        vacuum_times.append(seconds)
        shutil.rmtree(scratch / f"plain{r}")
        shutil.rmtree(scratch / f"vac{r}")
    base, vac = min(baseline_times), min(vacuum_times)
    ratio = vac / base
    print(f"  plain os.walk + unlink, 1 process : {base:7.3f} s  ({n / base:10,.0f} files/s)")
    print(f"  spark_ops.vacuum (local[2])        : {vac:7.3f} s  ({n / vac:10,.0f} files/s)")
    print(f"  ratio vacuum / plain               : {ratio:7.2f}x   target <= 2.00x  "
          f"{'PASS' if ratio <= 2.0 else 'MISS'}")

    small_files = max(1, args.files // 10)
    _, _, peak_small = timed_vacuum(spark, scratch / "mem1", args.tables, small_files)
    _, _, peak_large = timed_vacuum(spark, scratch / "mem10", args.tables, small_files * 10)
    growth = peak_large / peak_small
    print(f"driver Python heap peak during vacuum ({args.tables} tables):")
    print(f"  N   = {args.tables * small_files:>8} files : {peak_small / 1024:9.1f} KiB")
    print(f"  10N = {args.tables * small_files * 10:>8} files : {peak_large / 1024:9.1f} KiB")
    print(f"  growth 10N / N                     : {growth:7.2f}x   target <= 1.50x (flat)  "
          f"{'PASS' if growth <= 1.5 else 'MISS'}")
    shutil.rmtree(scratch, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
