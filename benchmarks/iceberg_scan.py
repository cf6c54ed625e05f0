"""A published table read by Iceberg readers, against ``pyarrow.dataset`` over the same files.

    python benchmarks/iceberg_scan.py [--rows 4000000] [--files 100,10000] [--days 100] [--rounds 5]

For each file count in ``--files``, the table of ``duckdb_by_name.py`` (``--rows`` rows of four
columns, partitioned by a string ``day``, written in Spark's layout and committed through the
ledger's API) is published into a SQLite Iceberg catalog (``arrow_ops.publish``). Then, each
once to warm up and ``--rounds`` rounds in alternating order, a full read of every row into Arrow:

* the floor: ``pyarrow.dataset.dataset(<the version's files>, partitioning="hive").to_table()``;
* pyiceberg: ``table.scan().to_arrow()``, planning included (its manifests read), the table loaded
  from the catalog once beforehand, as the floor is handed its file list (the load, one catalog
  row and one metadata file, is printed beside it);
* Polars: ``pl.scan_iceberg(table).collect()``, turned into Arrow.

Row counts are checked equal. Target (issue 61): a pyiceberg or Polars scan of a published table at
least 0.9x ``pyarrow.dataset`` over the same files (ratio = the floor's median / the reader's),
printed for each reader; the better of the two is the PASS/MISS line.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Callable

import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
from pyiceberg.catalog.sql import SqlCatalog

from _common import environment, print_table, scratch_dir, verdict
from duckdb_by_name import make_table
import arrow_ops
from ledger import Ledger


def race(contenders: dict[str, Callable[[], int]], rounds: int) -> dict[str, float]:
    counts = {name: read() for name, read in contenders.items()}  # warm-up, and the rows checked
    assert len(set(counts.values())) == 1, counts
    times: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    for n in range(rounds):
        for name in order if n % 2 == 0 else reversed(order):
            start = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", default="100,10000")
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work")
    args = parser.parse_args()
    print(environment())
    results = []
    with scratch_dir(args.work) as work:
        for files in [int(f) for f in args.files.split(",")]:
            led = Ledger.open(work / f"ledger-{files}.db", warehouse=work / f"warehouse-{files}")
            by_day = make_table(led, "bench.t", args.rows, files, args.days)
            paths = [p for day in sorted(by_day) for p in by_day[day]]
            catalog = work / f"catalog-{files}.db"
            start = time.perf_counter()
            arrow_ops.publish(led, catalog)
            published = time.perf_counter() - start
            base = str(Path(paths[0]).parent.parent)
            uri = f"sqlite:///{catalog}"

            def floor() -> int:
                return ds.dataset(paths, format="parquet", partitioning="hive", partition_base_dir=base).to_table().num_rows

            start = time.perf_counter()
            table = SqlCatalog("ledger", uri=uri).load_table("bench.t")
            loaded = time.perf_counter() - start

            def pyiceberg() -> int:
                return table.scan().to_arrow().num_rows

            def polars() -> int:
                return pl.scan_iceberg(table).collect().to_arrow().num_rows

            medians = race({"pyarrow.dataset": floor, "pyiceberg": pyiceberg, "polars": polars}, args.rounds)
            results.append((files, published, loaded, medians))
            led.close()
    print_table(["files", "publish s", "load s", "pyarrow.dataset s", "pyiceberg s", "ratio", "polars s", "ratio"],
                [(f, p, load, m["pyarrow.dataset"], m["pyiceberg"], m["pyarrow.dataset"] / m["pyiceberg"], m["polars"],
                  m["pyarrow.dataset"] / m["polars"]) for f, p, load, m in results])
    for files, _, _, m in results:
        best = max(("pyiceberg", "polars"), key=lambda r: m["pyarrow.dataset"] / m[r])
        verdict(f"a {best} scan of the published table against pyarrow.dataset, {files:,} files",
                m["pyarrow.dataset"] / m[best], 0.9, higher_is_better=True, unit="x")


if __name__ == "__main__":
    main()
