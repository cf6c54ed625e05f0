"""Vacuum speed against its peers on two table shapes, and the driver's memory.

    python benchmarks/vacuum.py [--files 40000] [--tables 200] [--folders 200] [--no-deltalake]
    python benchmarks/vacuum.py --files 1000000 --shapes one-table     # a million files in one table
    python benchmarks/vacuum.py --master 'local-cluster[2,1,1024]'     # executors apart from the driver

Speed. For each shape, identical trees of small files are built, one per contender,
and each contender deletes its own tree; dirty pages are written back (``os.sync``)
before each. ``rm -rf`` and the vacuum also remove the folders; the unlink loops and
delta-rs leave them (removing 200 folders is a small part of deleting 40,000 files).
delta-rs is timed inside its own process, from after ``import deltalake``. Shapes:

* ``many-tables``: ``--tables`` dropped tables, the files spread evenly, flat in each;
* ``one-table``: one dropped table whose files sit in ``--folders`` sub-folders (write
  folders, as versioned tables have them: ``_writes/<id>/``, 16 hex digits).

Each shape runs ``--rounds`` times (default 3), every contender once per round, in an order
shuffled afresh each round (seeded, printed), and the median of each is judged: deleting
small files is bound by the disk's latency, which drifts by tens of percent over a minute
here, and whoever runs right after a mass deletion meets the journal still settling. (The
order used to be rotated, which keeps every contender behind the same one in every round:
``spark_ops.vacuum`` always ran right after delta-rs.) Contenders, in the same run: ``rm -rf`` of the tree (one process); Python ``os.walk`` +
``unlink`` in one thread; Python ``scandir`` + ``unlink`` on 8 threads (the folders
shared out); the ``deltalake`` package's ``vacuum`` (delta-rs, which deletes
concurrently), on Delta tables whose log references none of the files, with retention
0, table by table; and ``spark_ops.vacuum`` on ledger tables (local[2]; Spark's start-up
excluded: the session is started and warmed before timing; planning, the watermark
append and the purge records are included). ``deltalake`` is installed into the
benchmark's own environment (``benchmarks/.peers``, a virtualenv made on first use), not
as a project dependency; ``--no-deltalake`` skips it, and ``--deltalake-timeout`` (default 30
minutes) stops it: it is then counted at that time, a lower bound.

Targets (issue 11): on both shapes the vacuum is faster than deltalake's and at least
0.7x the 8-thread loop.

Memory. The driver's Python heap peak (``tracemalloc``) during a real vacuum and during a
dry run, at N and 10N files (same number of tables): it must not grow with N. The dry runs
use a listing threshold of N/2, so both write their listing to a dataset, as a dry run over
the default threshold (10,000 files) does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import time
import tracemalloc
import venv
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Callable

from _common import environment, load, print_table, scratch_dir, verdict, warm

from ledger import Ledger, ManualClock
from spark_ops import local_session, vacuum

PAYLOAD = b"x" * 128
PEERS = Path(__file__).resolve().parent / ".peers"


# --- trees ---------------------------------------------------------------------------------

def layout(shape: str, files: int, tables: int, folders: int) -> list[list[tuple[str, int]]]:
    """For each table, its (sub-folder, file count) pairs."""
    if shape == "many-tables":
        each = files // tables
        return [[("", each)] for _ in range(tables)]
    each = files // folders
    # Named like real write folders (16 random-looking hex digits), not in sequence: the vacuum
    # shares folders out by a hash of the name, which spreads a sequence unrealistically evenly.
    return [[(f"_writes/{hashlib.sha256(str(f).encode()).hexdigest()[:16]}", each) for f in range(folders)]]


def fill(location: Path, plan: list[tuple[str, int]]) -> None:
    for sub, n in plan:
        folder = location / sub if sub else location
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            (folder / f"part-{i:05d}.parquet").write_bytes(PAYLOAD)


def plain_tree(root: Path, tables: list[list[tuple[str, int]]]) -> list[Path]:
    locations = []
    for t, plan in enumerate(tables):
        location = root / f"t{t:05d}"
        fill(location, plan)
        locations.append(location)
    return locations


# --- contenders ----------------------------------------------------------------------------

def rm_rf(root: Path) -> None:
    subprocess.run(["rm", "-rf", str(root)], check=True)


def unlink_one_thread(root: Path) -> None:
    for folder, _dirs, names in os.walk(root):
        for name in names:
            os.unlink(os.path.join(folder, name))


def unlink_eight_threads(root: Path) -> None:
    folders = [folder for folder, _dirs, _names in os.walk(root)]

    def clear(folder: str) -> None:
        with os.scandir(folder) as listing:
            for entry in listing:
                if entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(clear, folders))


_DELTA = r"""
import json, sys, time
from deltalake import DeltaTable
tables = json.loads(sys.argv[1])
start = time.perf_counter()
deleted = 0
for path in tables:
    deleted += len(DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False))
print(json.dumps({"seconds": time.perf_counter() - start, "deleted": deleted}))
"""


def peers_python() -> Path | None:
    """The benchmark's own virtualenv with deltalake (made on first use); None if unavailable."""
    python = PEERS / "bin" / "python"
    if not python.exists():
        print("(making benchmarks/.peers with deltalake; once)")
        venv.create(PEERS, with_pip=True)
    ok = subprocess.run([str(python), "-c", "import deltalake"], capture_output=True).returncode == 0
    if not ok:
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "deltalake"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"(deltalake could not be installed: {done.stderr.strip()[-300:]})")
            return None
    return python


def delta_tables(root: Path, tables: list[list[tuple[str, int]]]) -> list[str]:
    """Delta tables whose every data file was added (version 0) and then removed (version 1, as
    an overwrite or a drop does): each file is a tombstone that a vacuum with retention 0 deletes.
    Sub-folders are named as partitions (``w=<id>``): Delta skips ``_``-prefixed folders."""
    tables = [[(sub.replace("_writes/", "w="), n) for sub, n in plan] for plan in tables]
    locations = plain_tree(root, tables)
    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True,
                                                        "metadata": {}}]})
    for location in locations:
        log = location / "_delta_log"
        log.mkdir()
        actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                   {"metaData": {"id": location.name, "format": {"provider": "parquet", "options": {}},
                                 "schemaString": schema, "partitionColumns": [], "configuration": {},
                                 "createdTime": 0}},
                   {"commitInfo": {"timestamp": 0, "operation": "WRITE"}}]
        files = sorted(str(p.relative_to(location)) for p in location.rglob("*.parquet"))
        actions += [{"add": {"path": f, "size": len(PAYLOAD), "partitionValues": {}, "modificationTime": 0,
                             "dataChange": True}} for f in files]
        removes = [{"commitInfo": {"timestamp": 1, "operation": "DELETE"}}]
        removes += [{"remove": {"path": f, "deletionTimestamp": 1, "dataChange": True, "size": len(PAYLOAD)}}
                    for f in files]
        (log / "00000000000000000000.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
        (log / "00000000000000000001.json").write_text("\n".join(json.dumps(a) for a in removes) + "\n")
    return [str(p) for p in locations]


def delta_vacuum(python: Path, paths: list[str], timeout: float) -> tuple[float, int] | None:
    """delta-rs's seconds and files deleted; None if it had not finished after ``timeout`` seconds."""
    try:
        done = subprocess.run([str(python), "-c", _DELTA, json.dumps(paths)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise SystemExit(f"deltalake vacuum failed:\n{done.stderr[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["seconds"], out["deleted"]


def ledger_tables(base: Path, tables: list[list[tuple[str, int]]]) -> Ledger:
    clock = ManualClock()
    base.mkdir(parents=True)
    led = Ledger.open(base / "ledger.db", warehouse=base / "warehouse", clock=clock, actor="bench")
    for t, plan in enumerate(tables):
        name = f"bench.t{t:05d}"
        fill(Path(led.create_table(name).location), plan)
        led.drop_table(name)
    clock.advance(timedelta(days=8))
    return led


def timed(call) -> float:
    os.sync()
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


# --- the run ---------------------------------------------------------------------------------

def race(spark, scratch: Path, shape: str, tables: list[list[tuple[str, int]]], python: Path | None,
         rounds: int, delta_timeout: float) -> tuple[dict, set[str]]:
    """Each contender ``rounds`` times, interleaved, in a new order each round (whoever runs right
    after another's mass deletion meets the file system's journal still settling, so no
    contender may always follow the same one); the median of each, and the contenders stopped
    at their time limit (delta-rs only)."""
    n = sum(c for plan in tables for _, c in plan)
    times: dict[str, list[float]] = {}
    stopped: set[str] = set()

    def plain(name: str, delete) -> Callable[[int], None]:
        def run(round_: int) -> None:
            root = scratch / f"{shape}-{round_}-{name.split()[0]}"
            plain_tree(root, tables)
            times.setdefault(name, []).append(timed(lambda: delete(root)))
            shutil.rmtree(root, ignore_errors=True)
        return run

    def delta(round_: int) -> None:
        assert python is not None
        paths = delta_tables(scratch / f"{shape}-delta", tables)
        os.sync()
        done = delta_vacuum(python, paths, delta_timeout)
        if done is None:  # counted as the time it was given: its ratio is then a lower bound
            stopped.add("deltalake vacuum (delta-rs)")
            seconds = delta_timeout
        else:
            seconds, deleted = done
            assert deleted == n, f"deltalake deleted {deleted} of {n}"
        times.setdefault("deltalake vacuum (delta-rs)", []).append(seconds)
        shutil.rmtree(scratch / f"{shape}-delta", ignore_errors=True)

    def ours(round_: int) -> None:
        led = ledger_tables(scratch / f"{shape}-ledger", tables)
        report = None

        def run() -> None:
            nonlocal report
            report = vacuum(spark, led)
        times.setdefault("spark_ops.vacuum", []).append(timed(run))
        assert report is not None and report.files == n and not report.failures, report
        led.close()
        shutil.rmtree(scratch / f"{shape}-ledger", ignore_errors=True)

    contenders = [plain("rm -rf", rm_rf), plain("os.walk + unlink, 1 thread", unlink_one_thread),
                  plain("scandir + unlink, 8 threads", unlink_eight_threads),
                  *([delta] if python is not None else []), ours]
    shuffler = random.Random(f"{shape}-{len(contenders)}")
    orders = []
    for round_ in range(rounds):
        order = shuffler.sample(range(len(contenders)), len(contenders))
        orders.append(" ".join(map(str, order)))
        for i in order:
            contenders[i](round_)
    order = ["rm -rf", "os.walk + unlink, 1 thread", "scandir + unlink, 8 threads", "deltalake vacuum (delta-rs)",
             "spark_ops.vacuum"]
    medians = {name: statistics.median(times[name]) for name in order if name in times}
    print(f"\n{shape}: {len(tables)} table(s), {n:,} files of {len(PAYLOAD)} bytes; median of {rounds} round(s), "
          f"orders {', '.join(orders)} (of the contenders as listed below)")
    print_table(("contender", "seconds", "files/s", "every round (s)"),
                [(k, f"> {v:.0f} (stopped)" if k in stopped else v, f"{n / v:,.0f}",
                  " ".join(f"{t:.2f}" for t in times[k])) for k, v in medians.items()])
    return medians, stopped


def heap_peak(spark, base: Path, tables: list[list[tuple[str, int]]], dry_run: bool, threshold: int) -> int:
    """The driver's heap peak during one vacuum (or dry run, whose listing goes to a dataset above
    ``threshold`` files: the heap check runs both sizes above it, as a large dry run would)."""
    led = ledger_tables(base, tables)
    tracemalloc.start()
    report = vacuum(spark, led, dry_run=dry_run, listing_threshold=threshold)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert not report.failures and (not dry_run or report.listing)
    if report.listing:
        shutil.rmtree(report.listing, ignore_errors=True)
    led.close()
    shutil.rmtree(base, ignore_errors=True)
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=40_000, help="files per shape")
    parser.add_argument("--tables", type=int, default=200, help="tables in the many-tables shape")
    parser.add_argument("--folders", type=int, default=200, help="sub-folders in the one-table shape")
    parser.add_argument("--shapes", default="many-tables,one-table")
    parser.add_argument("--memory-files", type=int, default=2_000, help="N for the heap check (and 10N)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per shape (median kept)")
    parser.add_argument("--no-deltalake", action="store_true")
    parser.add_argument("--deltalake-timeout", type=float, default=1800,
                        help="seconds before delta-rs's vacuum is stopped (its ratio is then a lower bound)")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temp folder)")
    parser.add_argument("--master", default="local[2]",
                        help="Spark master, e.g. local-cluster[2,1,1024] (executors in JVMs apart from the driver)")
    args = parser.parse_args()
    print(environment())
    python = None if args.no_deltalake else peers_python()
    spark = local_session("retention-ledger-bench", master=args.master)
    print(f"Spark master: {args.master}")
    warm(spark)
    # On the repository's file system, like a warehouse beside the code (not a tmpfs /tmp).
    with scratch_dir(args.dir) as scratch:
        run(spark, scratch, python, args)
    spark.stop()
    print(f"finished; {load()}")


def run(spark, scratch: Path, python: Path | None, args: argparse.Namespace) -> None:
    for shape in filter(None, args.shapes.split(",")):  # --shapes "" : the heap check alone
        times, stopped = race(spark, scratch, shape, layout(shape, args.files, args.tables, args.folders),
                              python, args.rounds, args.deltalake_timeout)
        ours = times["spark_ops.vacuum"]
        if "deltalake vacuum (delta-rs)" in times:
            bound = " (at least: delta-rs was stopped)" if stopped else ""
            verdict(f"{shape}: vacuum speed / deltalake's{bound}", times["deltalake vacuum (delta-rs)"] / ours,
                    1.0, higher_is_better=True, unit="x")
        verdict(f"{shape}: vacuum speed / the 8-thread loop's", times["scandir + unlink, 8 threads"] / ours,
                0.7, higher_is_better=True, unit="x")
    n = args.memory_files
    rows = []
    for dry_run in (False, True):
        small = heap_peak(spark, scratch / "mem1", layout("many-tables", n, 20, 20), dry_run, n // 2)
        large = heap_peak(spark, scratch / "mem10", layout("many-tables", 10 * n, 20, 20), dry_run, n // 2)
        rows.append(("dry run" if dry_run else "vacuum", f"{small / 1024:,.0f} KiB", f"{large / 1024:,.0f} KiB",
                     f"{large / small:.2f}x"))
        verdict(f"driver heap, {'dry run' if dry_run else 'vacuum'}, 10N / N", large / small, 1.5,
                higher_is_better=False, unit="x")
    print()
    print_table(("driver Python heap peak", f"N = {n:,} files", f"10N = {10 * n:,}", "growth"), rows)


if __name__ == "__main__":
    main()
