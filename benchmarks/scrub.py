"""The integrity scrub against a plain listing of the same locations, and its driver's memory.

    python benchmarks/scrub.py [--sizes 20000,200000] [--per-table 2000] [--rounds 3] [--stores disk,s3]
                               [--cases 'as recorded,each differs']

For each store (a local disk; the S3 API of ``moto``'s server on 127.0.0.1, started here) and each
size, a ledger knows that many files (``--per-table`` files a table, one committed write each),
all put in place (not timed). Then, in the same run and the same Spark session (``local[2]``,
warmed first), in alternating order, median of ``--rounds``:

* ``plain listing (floor)``: the same locations listed by the same executors in one Spark job of
  the same shape, each file's name and size and nothing else (on a disk a walk with a ``stat`` a
  file; on S3 a paged listing, 1,000 keys a request): what no scrub on this session can beat;
* ``spark_ops.scrub``: the whole scrub: the executors' listing and its digests, the ledger's file
  lists read, the second look where a location differs, the ledger asked again, one
  ``ScrubFinished`` recorded.

With ``--commits 1`` a location holds one commit's files, whose digest the commit carries, so the
ledger reads no list of files for the first look; with ``--commits 2`` it reads every list, as for
a table of appends. Each size is measured twice: with every location holding what the ledger names (``as recorded``:
a warehouse just vacuumed; each location is listed once and its digest agrees), and again after a
stray file is put in every location (``each differs``: as between vacuums, when expired versions'
files still lie there), which sends every location to the second look with its files.

The ratio is the floor's seconds over the scrub's. Target (issue 60): at least 0.8x at 200,000
files on both stores.

Memory: the driver's Python heap peak (``tracemalloc``) during a scrub of the smallest and of the
largest size on the disk, the larger of the two cases; target (issue 60): the largest at most
1.2x the smallest.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import environment, load, print_table, scratch_dir, verdict, warm
from vacuum_s3 import CREDENTIALS, fresh_bucket, start_server, store_bucket

PAYLOAD = b"x" * 64


def build(store: str, base: Path, tables: int, per_table: int, commits: int = 1) -> object:
    """A ledger on ``store`` (``disk`` or ``s3``) knowing ``tables`` x ``per_table`` files, all in place,
    each table's in ``commits`` appends."""
    from ledger import Ledger
    if store == "disk":
        warehouse: str = str(base / "wh")
    else:
        bucket = fresh_bucket()
        warehouse = f"s3://{store_bucket(bucket)}/wh"
    led = Ledger.open(base / "ledger.db", warehouse=warehouse, actor="bench")
    keys: list[str] = []
    for t in range(tables):
        name = f"bench.t{t:05d}"
        led.create_table(name)
        for c in range(commits):
            w = led.begin_write(name)
            paths = [f"{w.relative_folder}/d={i % 10}/part-{i:06d}.parquet" for i in range(per_table)
                     if i % commits == c]
            led.commit_write(w.id, [(p, len(PAYLOAD)) for p in paths])
            location = led.table(name).location
            keys += [f"{location}/{p}" for p in paths]
    if store == "disk":
        for key in keys:
            os.makedirs(os.path.dirname(key), exist_ok=True)
            with open(key, "wb") as f:
                f.write(PAYLOAD)
    else:
        import obstore
        prefix = f"s3://{store_bucket(bucket)}/"
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda key: obstore.put(bucket, key[len(prefix):], PAYLOAD), keys))
    return led


def plain_listing(spark, root: str, locations: list[str], cores: int) -> int:
    """The floor: each location listed by the executors (name and size of each file), nothing else."""
    from spark_ops.vacuum_job.jobs import Jobs

    def listed(root: str, locs):  # nested: cloudpickle ships it by value
        from spark_ops.executor.stores import storage_for
        store = storage_for(root)
        for loc in locs:
            where = f"{store.base}/{loc}" if store.base else loc
            yield sum(len(page) for page in store.pages(where))

    return sum(Jobs(spark).run(functools.partial(listed, root), locations, cores))


def add_strays(store: str, led) -> None:
    """One file the ledger does not name in every location."""
    for t in led.tables():
        key = f"{t.location.rstrip('/')}/_stray.tmp"
        if store == "disk":
            Path(key).write_bytes(PAYLOAD)
        else:
            import boto3
            bucket, _, inside = key[len("s3://"):].partition("/")
            boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).put_object(Bucket=bucket, Key=inside,
                                                                                      Body=PAYLOAD)


def measure(spark, led, rounds: int) -> tuple[float, float, list[float], list[float]]:
    from spark_ops import scrub
    from spark_ops.vacuum_job import ship
    root = led.warehouse
    locations = sorted(t.location.rstrip("/").rsplit("/", 1)[-1] for t in led.tables())
    cores = ship.preflight(spark, root)
    files = sum(t.file_count for t in led.tables()) if hasattr(led.tables()[0], "file_count") else None
    floor_times, scrub_times = [], []
    for r in range(rounds):
        for who in (("floor", "scrub") if r % 2 == 0 else ("scrub", "floor")):
            start = time.perf_counter()
            if who == "floor":
                n = plain_listing(spark, root, locations, cores)
                floor_times.append(time.perf_counter() - start)
                assert files is None or n == files, (n, files)
            else:
                report = scrub(spark, led)
                scrub_times.append(time.perf_counter() - start)
                assert report.ok, report.summary()
    return statistics.median(floor_times), statistics.median(scrub_times), floor_times, scrub_times


def heap_peak(spark, led) -> int:
    from spark_ops import scrub
    tracemalloc.start()
    report = scrub(spark, led)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert report.ok
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,200000")
    parser.add_argument("--per-table", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stores", default="disk,s3")
    parser.add_argument("--cases", default="as recorded,each differs")
    parser.add_argument("--commits", type=int, default=1,
                        help="appends a table's files are committed in: above 1, the ledger reads each list")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    stores = args.stores.split(",")
    server = None
    if "s3" in stores:
        server, endpoint = start_server()
        os.environ.update(CREDENTIALS, AWS_ENDPOINT_URL=endpoint, AWS_ALLOW_HTTP="true")
    from spark_ops import local_session
    spark = local_session("scrub-bench")
    warm(spark)
    print(environment())
    rows, ratios, peaks = [], {}, {}
    try:
        for store in stores:
            for n in sizes:
                with scratch_dir() as base:
                    led = build(store, base, max(1, n // args.per_table), args.per_table, args.commits)
                    for case in args.cases.split(","):
                        if case == "each differs":
                            add_strays(store, led)
                        floor, ours, floors, scrubs = measure(spark, led, args.rounds)
                        ratios[(store, n, case)] = floor / ours
                        rows.append((store, f"{n:,}", case, floor, ours, f"{floor / ours:.3f}x",
                                     " ".join(f"{t:.2f}" for t in floors), " ".join(f"{t:.2f}" for t in scrubs),
                                     load()))
                        if store == "disk" and n in (min(sizes), max(sizes)):
                            peaks[n] = max(peaks.get(n, 0), heap_peak(spark, led))
                    led.close()
    finally:
        if server is not None:
            server.kill()
    print(f"\n{args.per_table:,} files a table in {args.commits} commit(s); median of {args.rounds} round(s), "
          "alternating order")
    print_table(("store", "files", "locations", "floor s", "scrub s", "floor/scrub", "floor rounds", "scrub rounds",
                 "load"), rows)
    for (store, n, case), ratio in ratios.items():
        if n == max(sizes) and case == "as recorded":
            verdict(f"scrub of {n:,} files on {store}: plain listing's seconds / the scrub's", ratio, 0.8,
                    higher_is_better=True, unit="x")
        elif n == max(sizes):
            print(f"reported: scrub of {n:,} files on {store}, {case}: {ratio:.3f}x the plain listing")
    if len(peaks) == 2:
        small, large = peaks[min(sizes)], peaks[max(sizes)]
        print(f"driver heap peak: {small / 2**20:.2f} MB at {min(sizes):,} files, {large / 2**20:.2f} MB at "
              f"{max(sizes):,}")
        verdict(f"driver heap, {max(sizes):,} files over {min(sizes):,}", large / small, 1.2,
                higher_is_better=False, unit="x")


if __name__ == "__main__":
    sys.exit(main())
