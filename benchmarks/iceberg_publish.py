"""Publishing a ledger's tables into an Iceberg SQL catalog, and publishing again with nothing changed.

    python benchmarks/iceberg_publish.py [--tables 1000] [--dir DIR]

A SQLite ledger of ``--tables`` tables, each with one version of one small Parquet file (two
partitions, written in Spark's layout without Spark), published into a SQLite Iceberg catalog
(``arrow_ops.publish``: metadata, manifest list and manifest for each table, one pin append for
all of them), then published again with nothing changed (the catalog's rows and each table's
metadata properties read, nothing written). Target (issue 61): the republication at most 0.1x
the first publication.
"""

from __future__ import annotations

import argparse
import time

import pyarrow as pa
from _common import environment, print_table, scratch_dir, verdict

import arrow_ops
from ledger import Ledger
from tests.test_arrow_ops import write

TARGET = 0.10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1_000)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    print(f"iceberg publish benchmark: {args.tables:,} tables of one version each; {environment()}")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "region": ["eu", "us", "eu"]})
    with scratch_dir(args.dir) as scratch:
        with Ledger.open(scratch / "ledger.db", warehouse=scratch / "warehouse") as led:
            started = time.perf_counter()
            for n in range(args.tables):
                write(led, f"bench.t{n:05d}", rows, partition_by=("region",))
            print(f"  (setup: {args.tables:,} versions written in {time.perf_counter() - started:.1f} s)")
            catalog = str(scratch / "catalog.db")
            started = time.perf_counter()
            first = arrow_ops.publish(led, catalog)
            publish = time.perf_counter() - started
            assert len(first.written) == args.tables, first.left_out
            started = time.perf_counter()
            again = arrow_ops.publish(led, catalog)
            republish = time.perf_counter() - started
            assert again.written == () and len(again.unchanged) == args.tables
    print_table(["what", "seconds", "per table (ms)"], [
        ["publish", f"{publish:.2f}", f"{publish / args.tables * 1000:.1f}"],
        ["publish again, nothing changed", f"{republish:.2f}", f"{republish / args.tables * 1000:.2f}"],
    ])
    verdict("republish / publish", republish / publish, TARGET, higher_is_better=False, unit="x")


if __name__ == "__main__":
    main()
