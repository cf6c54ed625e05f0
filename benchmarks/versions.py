"""Versioned writes against plain Spark writes, measured in the same run.

    python benchmarks/versions.py [--files 10000] [--rounds 3] [--versions 1000]

Write. The same DataFrame (three rows per file, ``maxRecordsPerFile``, so Spark writes
``--files`` small Parquet files from a few tasks) is written, alternately, with a plain
``df.write.parquet(folder)`` and with ``spark_ops.write_table`` (register the write,
Spark writes into its folder while the lease is renewed, list what Spark committed,
commit the version). Best of ``--rounds`` each. Target: versioned <= 1.10x plain.

Commit. The ledger's part of that write alone: ``commit_write`` of the 10,000-file list
(checking every path, hashing the manifest, one conditional append with the manifest
stored beside it), on a ledger file with ``synchronous=FULL``.

History. ``versions(name)`` on a table of ``--versions`` versions (each a one-file
append), and the file list of its current version (which names every file), read
from the manifests.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from _common import environment, print_table, scratch_dir

from ledger import Ledger
from spark_ops import local_session, write_table

TARGET = 1.10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--versions", type=int, default=1_000)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    print(f"versions benchmark: {args.files:,} files per write, best of {args.rounds}; {environment()}")

    spark = local_session("retention-ledger-bench-versions")
    # Few tasks, many small files each (three rows a file): Spark's per-task cost would
    # otherwise swamp both contenders alike, and this is how a streaming job's output looks.
    spark.conf.set("spark.sql.files.maxRecordsPerFile", "3")
    df = spark.range(0, args.files * 3, numPartitions=spark.sparkContext.defaultParallelism * 2) \
        .selectExpr("id", "id % 7 AS k").cache()
    df.count()
    with scratch_dir(args.dir) as scratch:
        plain_times, versioned_times = [], []
        with Ledger.open(scratch / "ledger.db", warehouse=scratch / "warehouse") as led:
            for r in range(args.rounds):
                target = scratch / f"plain{r}"
                started = time.perf_counter()
                df.write.parquet(f"file://{target}")
                plain_times.append(time.perf_counter() - started)
                started = time.perf_counter()
                version = write_table(df, led, "bench.t", mode="overwrite")
                versioned_times.append(time.perf_counter() - started)
                assert version.file_count == args.files, version.file_count
                shutil.rmtree(target)
            commit = _commit_alone(led, args.files)
        history, listing, total = _history(scratch, args.versions)
    plain, versioned = min(plain_times), min(versioned_times)
    print_table(["measurement", "seconds", "note"], [
        ["plain df.write.parquet", f"{plain:.3f}", f"{args.files:,} files"],
        ["spark_ops.write_table (versioned)", f"{versioned:.3f}", f"ratio {versioned / plain:.3f}x"],
        ["commit_write alone (ledger part)", f"{commit:.4f}", f"{args.files:,} files, synchronous=FULL"],
        [f"versions() on {args.versions:,} versions", f"{history:.4f}", "without file lists"],
        ["current version's file list", f"{listing:.4f}", f"{total:,} files from {args.versions:,} manifests"],
    ])
    ratio = versioned / plain
    print(f"{'PASS' if ratio <= TARGET else 'MISS'}  versioned write_table / plain df.write.parquet: "
          f"{ratio:.3f}x (target <= {TARGET:.2f}x)")
    spark.stop()


def _commit_alone(led: Ledger, files: int) -> float:
    """commit_write of a write naming ``files`` files (the files themselves are not needed)."""
    best = float("inf")
    for _ in range(3):
        w = led.begin_write("bench.t")
        names = [(f"{w.relative_folder}/part-{i:05d}-x.snappy.parquet", 1000 + i) for i in range(files)]
        started = time.perf_counter()
        led.commit_write(w.id, names)
        best = min(best, time.perf_counter() - started)
    return best


def _history(scratch: Path, count: int) -> tuple[float, float, int]:
    with Ledger.open(scratch / "history.db", warehouse=scratch / "history", synchronous="OFF") as led:
        led.create_table("bench.h")
        for i in range(count):
            w = led.begin_write("bench.h")
            led.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", i)])
        started = time.perf_counter()
        found = led.versions("bench.h")
        history = time.perf_counter() - started
        assert len(found) == count
        started = time.perf_counter()
        total = len(found[0].files)
        listing = time.perf_counter() - started
    return history, listing, total


if __name__ == "__main__":
    sys.exit(main())
