"""Spark SQL by name (``spark_ops.attach``) against ``spark.read.parquet`` of the same files, and
what attaching costs.

    python benchmarks/spark_sql.py [--rows 10000000] [--files 100] [--rounds 5]
    python benchmarks/spark_sql.py --parted-rows 4000000 --days 100 --parted-writes 2
    python benchmarks/spark_sql.py --parts scan,parted --rows 2000000 --scan-files 10000 \
        --parted-writes 1 --parted-files-per-day 100      # versions of 10,000 files
    python benchmarks/spark_sql.py --tables 1000 --databases 10 --parts attach
    python benchmarks/spark_sql.py --work /mnt/scratch --keep

One local session (``spark_ops.local_session``, local[2] unless ``--master``), started and warmed
(a Spark job and a SQL statement) before anything is timed; its SQL warehouse folder and its
temporary files go in the scratch folder (``--work``, default a fresh folder in the system's
temporary folder), which is removed afterwards unless ``--keep``. Parts (``--parts``):

* ``attach`` (run first, so that it is the session's first attach): ``--tables`` tables (default
  1,000) in ``--databases`` databases (10), each with one version of one small Parquet file,
  made through the ledger API (``create_table``, ``begin_write``, ``commit_write`` with the
  schema recorded; no Spark writes). Timed, each followed by a query on one name (not timed, to
  check that the views read): ``attach`` in a session that has already run a SQL statement (its
  databases do not exist in Spark yet: the attach creates them), ``refresh`` (nothing changed),
  ``detach`` (which drops the databases the attach created); then ``--attach-rounds`` (3) more
  such rounds, and as many again with the databases made beforehand by ``CREATE DATABASE``
  (which a detach keeps). Medians of the rounds, and every round, are printed, with the median
  CPU time this process spent in each step (``time.process_time``: the driver's Python, not the
  JVM's work), which a busy machine moves far less than the wall time.
* ``scan``: a table of ``--rows`` rows (10,000,000) of four columns (``id`` bigint, ``a`` bigint,
  ``s`` string of 11 characters, ``r`` double) written with ``write_table`` as ``--files`` (100)
  Parquet files: checked to be exactly the current version's file count. The attach that names
  it and the first query by name after it are timed once and printed (no target: over a version
  table Spark lists the files at that first query, and keeps the listing). Contenders, both timed
  from building the query (planning, the file listing and the schema inference included: a
  reader by path pays them every time, as the view does at analysis) to its collected row:
  ``spark.sql("SELECT count(*), sum(a), max(s), avg(r) FROM bench.scan")`` and
  ``spark.read.parquet(<the same 100 file URIs>).agg(<the same>)``. Each is run once to warm up,
  then ``--rounds`` (5) rounds, both in each, the order alternating from round to round; the
  medians are compared and the rows checked equal. Then each one's planning alone (no
  execution) is timed, and the Spark jobs it ran are counted: where a by-name query's extra time
  goes (a listing of more than ``spark.sql.sources.parallelPartitionDiscovery.threshold``, 32,
  paths is a Spark job of a task per path; the schema's inference is a job of its own).
* ``parted``: a table of ``--parted-rows`` rows (4,000,000) partitioned by a string ``day``
  with ``--days`` (100) zero-padded values (``'007'``), written with ``write_table(...,
  partition_by=["day"])`` in ``--parted-writes`` (2) appends, each ``--parted-files-per-day`` (1)
  files per day (``spark.sql.files.maxRecordsPerFile``): two write folders, so the view's
  partition values come from paths under two roots. The attach and the first query are printed
  as for ``scan``. Contenders, timed and alternated as above: ``SELECT count(*), sum(a) FROM bench.parted WHERE day = '042'`` by name,
  and ``spark.read.parquet(<that day's files only>).agg(count(*), sum(a))``. The files each read
  are counted from its executed plan (the scans' ``numFiles`` metric, adaptive plans and query
  stages unwrapped).

Targets (issues 37 and 48; DESIGN.md, "Performance", Spark SQL), each printed with the version's
file count, so a run at 100 files and one at 10,000 give a line each:

1. the scan by name at least 0.9x ``spark.read.parquet`` of the same files (ratio = the
   peer's median time / the name's);
2. a filter on one partition of ``--days`` reads only that partition's files: the by-name
   query's ``numFiles`` equals the number of files the ledger lists under ``day=042``; and it
   takes at least 0.8x the time of reading just those files by path (ratio as above);
3. ``attach`` of the 1,000 tables under 1 second, the first in the session and again after a
   ``detach`` (``refresh`` and ``detach`` are reported, with no target).

Figures are printed, never asserted: the script exits non-zero only on an error (a wrong row
count, a view that does not read, a query whose rows differ from its peer's).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from _common import environment, load, print_table, scratch_dir, verdict
from py4j.protocol import Py4JError

from ledger import Ledger

SCAN = "bench.scan"
PARTED = "bench.parted"


# --- timing ----------------------------------------------------------------------------------

def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def alternate(contenders: dict[str, Callable[[], Any]], rounds: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Each contender once to warm up, then ``rounds`` rounds of each, the order reversed every
    other round; every time kept, and each contender's last result."""
    names = list(contenders)
    results = {name: contenders[name]() for name in names}  # warm-up, not kept
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in (names if round_ % 2 == 0 else names[::-1]):
            seconds, results[name] = timed(contenders[name])
            times[name].append(seconds)
    return times, results


def report(title: str, times: dict[str, list[float]]) -> dict[str, float]:
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"\n{title}")
    print_table(("contender", "median s", "min s", "every round (s)"),
                [(name, medians[name], min(ts), " ".join(f"{t:.3f}" for t in ts)) for name, ts in times.items()])
    return medians


def same_rows(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            if isinstance(u, float) and isinstance(v, float):
                if not math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-9):
                    return False
            elif u != v:
                return False
    return True


# --- plans -----------------------------------------------------------------------------------

def files_read(df: Any) -> int:
    """The files the (executed) query read: the sum of ``numFiles`` over its scans."""
    plan = df._jdf.queryExecution().executedPlan()
    total = 0
    for node in plan_nodes(plan):
        metrics = node.metrics()
        if metrics.contains("numFiles"):
            total += int(metrics.apply("numFiles").value())
    return total


def plan_nodes(node: Any) -> list[Any]:
    """Every node of a physical plan, through adaptive plans and query stages."""
    found = []
    stack = [node]
    while stack:
        node = stack.pop()
        kind = str(node.getClass().getSimpleName())
        if kind == "AdaptiveSparkPlanExec":
            try:
                stack.append(node.finalPhysicalPlan())
            except Py4JError:  # a release without it public: the plan as it stands after execution
                stack.append(node.executedPlan())
            continue
        if kind.endswith("QueryStageExec"):
            stack.append(node.plan())
            continue
        found.append(node)
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return found


def plan_summary(df: Any) -> str:
    """The scans of an executed plan, one line each: node, files, and the filters pushed to it."""
    lines = []
    for node in plan_nodes(df._jdf.queryExecution().executedPlan()):
        if node.metrics().contains("numFiles"):
            lines.append(str(node.simpleString(400)))
    return "\n".join(lines)


def planning(spark: Any, contenders: dict[str, Callable[[], Any]], repeats: int = 5) -> None:
    """Where a query's time goes before it runs: each contender's planning alone (analysis, which
    resolves the files: the glob, the listing, the schema's inference; optimisation; the physical
    plan), median of ``repeats``, and the Spark jobs that planning ran (a listing of more than
    ``spark.sql.sources.parallelPartitionDiscovery.threshold`` paths is a job of a task per path;
    the schema's inference reads a footer in a job of its own)."""
    context = spark.sparkContext
    tracker = context.statusTracker()
    rows = []
    for n, (name, plan) in enumerate(contenders.items()):
        group = f"bench-planning-{n}-{time.monotonic_ns()}"
        context.setJobGroup(group, "planning")
        try:
            plan()
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        jobs = []
        for job in sorted(tracker.getJobIdsForGroup(group)):
            info = tracker.getJobInfo(job)
            stages = [tracker.getStageInfo(s) for s in (info.stageIds if info else [])]
            jobs.append(str(sum(s.numTasks for s in stages if s is not None)))
        seconds = statistics.median(timed(plan)[0] for _ in range(repeats))
        rows.append((name, seconds, f"{len(jobs)} job(s) of {' + '.join(jobs) or '0'} task(s)"))
    print(f"planning alone, no execution (median of {repeats}):")
    print_table(("contender", "seconds", "Spark jobs while planning"), rows)


# --- the attach part ---------------------------------------------------------------------------

def small_file(path: Path) -> tuple[str, int]:
    """One small Parquet file of the benchmark's four columns; its schema as the ledger records it."""
    from pyspark.sql.types import (
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    from spark_ops import schemas
    table = pa.table({"id": pa.array(range(10), pa.int64()), "a": pa.array(range(10, 20), pa.int64()),
                      "s": pa.array([f"k{i:010d}" for i in range(10)], pa.string()),
                      "r": pa.array([i / 10 for i in range(10)], pa.float64())})
    pq.write_table(table, path)
    struct = StructType([StructField("id", LongType()), StructField("a", LongType()), StructField("s", StringType()),
                         StructField("r", DoubleType())])
    return schemas.canonical(struct), path.stat().st_size


def many_tables(base: Path, databases: int, tables: int) -> Path:
    """A ledger of ``tables`` tables over ``databases`` databases, one version of one file each.
    Made at synchronous=OFF (the set-up is not measured); the attach opens it again at FULL."""
    base.mkdir(parents=True)
    sample = base / "sample.parquet"
    schema, size = small_file(sample)
    path = base / "ledger.db"
    with Ledger.open(path, actor="bench", synchronous="OFF") as led:
        for t in range(tables):
            name = f"db{t % databases}.t{t // databases:04d}"
            led.create_table(name)
            write = led.begin_write(name)
            os.makedirs(write.folder, exist_ok=True)
            shutil.copyfile(sample, os.path.join(write.folder, "part-0.parquet"))
            led.commit_write(write.id, [(f"{write.relative_folder}/part-0.parquet", size)], schema=schema)
    return path


def attach_part(spark: Any, scratch: Path, args: argparse.Namespace) -> list[tuple[str, float]]:
    import spark_ops

    n = args.tables
    made, path = timed(lambda: many_tables(scratch / "many", args.databases, n))
    print(f"\nattach: {n:,} tables in {args.databases} databases, one version of one file each "
          f"(made through the ledger API in {made:.1f} s)")
    led = Ledger.open(path, actor="bench")
    probe = f"db{args.databases - 1}.t{(n - 1) // args.databases:04d}"
    rows: list[tuple[str, float, str, str, str, str]] = []

    def check(names: list[str], what: str) -> None:
        if len(names) != n:
            raise SystemExit(f"{what} named {len(names)} tables, not {n}")

    def probe_reads() -> None:
        got = spark.sql(f"SELECT count(*), sum(a) FROM {probe}").collect()[0]
        if (got[0], got[1]) != (10, sum(range(10, 20))):
            raise SystemExit(f"{probe} read {tuple(got)} after the attach")

    def existing() -> str:
        there = {d.name for d in spark.catalog.listDatabases()}
        return f"{sum(f'db{d}' in there for d in range(args.databases))} of {args.databases} existed"

    def cycle(what: str, rounds: int, note: str) -> float:
        """``rounds`` times: attach (timed), a query on one name, refresh, detach (timed); the
        median attach."""
        times: dict[str, list[float]] = {"attach": [], "refresh (nothing changed)": [], "detach": []}
        cpu: dict[str, list[float]] = {step: [] for step in times}
        for _ in range(rounds):
            for step, call in (("attach", spark_ops.attach), ("refresh (nothing changed)", spark_ops.refresh),
                               ("detach", spark_ops.detach)):
                started = time.process_time()
                seconds, names = timed(lambda call=call: call(spark, led))
                cpu[step].append(time.process_time() - started)
                check(names, step)
                times[step].append(seconds)
                if step == "attach":
                    probe_reads()
        for step, ts in times.items():
            rows.append((f"{step}, {what}" if step == "attach" else f"  {step}", statistics.median(ts),
                         f"{statistics.median(ts) / n * 1e3:.2f}", f"{statistics.median(cpu[step]):.3f}",
                         " ".join(f"{t:.3f}" for t in ts), note if step == "attach" else ""))
        return statistics.median(times["attach"])

    first = cycle("the session's first", 1, f"databases: {existing()}")
    again = cycle("after a detach", args.attach_rounds, f"databases: {existing()}")
    for d in range(args.databases):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS db{d}")
    ready = cycle("databases made beforehand", args.attach_rounds, f"databases: {existing()}")
    after = existing()
    for d in range(args.databases):
        spark.sql(f"DROP DATABASE IF EXISTS db{d} CASCADE")
    led.close()
    print_table(("step (median of its rounds)", "seconds", "per table (ms)", "driver CPU (s)", "every round (s)", ""),
                rows)
    print(f"(detach drops the databases the attach created, and keeps the others: afterwards {after})")
    return [(f"attach of {n:,} tables, the session's first", first),
            (f"attach of {n:,} tables, after a detach (median of {args.attach_rounds})", again),
            (f"attach of {n:,} tables, databases made beforehand (median of {args.attach_rounds})", ready)]


# --- the scan and partition parts ---------------------------------------------------------------

def scan_frame(spark: Any, start: int, rows: int, partitions: int) -> Any:
    from pyspark.sql import functions as F
    ids = spark.range(start, start + rows, 1, numPartitions=partitions)
    return ids.select(F.col("id"),
                      ((F.col("id") * 7919) % 1_000_003).alias("a"),
                      F.format_string("k%010d", (F.col("id") * 104_729) % 1_000_000_007).alias("s"),
                      F.rand(7).alias("r"))


def scan_part(spark: Any, led: Ledger, args: argparse.Namespace) -> float:
    from pyspark.sql import functions as F

    import spark_ops
    from spark_ops.tables import spark_uri

    seconds, _ = timed(lambda: spark_ops.write_table(scan_frame(spark, 0, args.rows, args.files), led, SCAN))
    version = led.version(SCAN)
    location = led.table(SCAN).location
    if len(version.files) != args.files:
        raise SystemExit(f"{SCAN}'s current version has {len(version.files)} files, not {args.files}")
    uris = [spark_uri(f"{location}/{f.path}") for f in version.files]
    print(f"\nscan: {SCAN}, {args.rows:,} rows of 4 columns in {len(uris)} Parquet files, "
          f"{version.bytes / 2**20:,.0f} MiB (written in {seconds:.1f} s)")
    attached, _ = timed(lambda: spark_ops.attach(spark, led))  # re-attaching is a refresh: it now names the new table

    def by_name() -> list[Any]:
        return spark.sql(f"SELECT count(*), sum(a), max(s), avg(r) FROM {SCAN}").collect()

    def by_path() -> list[Any]:
        return spark.read.parquet(*uris).agg(F.count("*"), F.sum("a"), F.max("s"), F.avg("r")).collect()

    first, _ = timed(by_name)
    print(f"attach (a refresh naming it) {attached:.3f} s; the first query by name after it {first:.3f} s "
          "(over a version table, Spark lists the files then, once: not in the medians below)")
    times, results = alternate({"by name (spark.sql on the view)": by_name,
                                f"spark.read.parquet({len(uris)} files)": by_path}, args.rounds)
    name_rows, path_rows = results.values()
    if not same_rows(name_rows, path_rows) or name_rows[0][0] != args.rows:
        raise SystemExit(f"the scans disagree: by name {name_rows}, by path {path_rows}")
    medians = report(f"scan: SELECT count(*), sum(a), max(s), avg(r); warm-up, then median of {args.rounds} "
                     "rounds, alternating", times)
    name_t, path_t = medians.values()
    planning(spark, {"by name": lambda: spark.sql(f"SELECT count(*), sum(a), max(s), avg(r) FROM {SCAN}")
                     ._jdf.queryExecution().executedPlan(),
                     "by path": lambda: spark.read.parquet(*uris).agg(F.count("*"), F.sum("a"), F.max("s"), F.avg("r"))
                     ._jdf.queryExecution().executedPlan()})
    print(f"ratio spark.read.parquet time / by-name time: {path_t / name_t:.3f}x")
    return path_t / name_t


def parted_part(spark: Any, led: Ledger, args: argparse.Namespace) -> tuple[float, int, int, int, int]:
    from pyspark.sql import functions as F

    import spark_ops
    from spark_ops.tables import spark_uri

    width = max(3, len(str(args.days - 1)))
    day = f"{min(42, args.days - 1):0{width}d}"
    per_write = args.parted_rows // args.parted_writes
    start = time.perf_counter()
    for w in range(args.parted_writes):
        df = scan_frame(spark, w * per_write, per_write, 8).withColumn(
            "day", F.lpad((F.col("id") % args.days).cast("string"), width, "0"))
        per_file = -(-per_write // (args.days * args.parted_files_per_day))  # rows a file, for that many a day
        spark.conf.set("spark.sql.files.maxRecordsPerFile", str(per_file))
        try:
            spark_ops.write_table(df.repartition("day"), led, PARTED, partition_by=["day"])
        finally:
            spark.conf.unset("spark.sql.files.maxRecordsPerFile")
    seconds = time.perf_counter() - start
    version = led.version(PARTED)
    location = led.table(PARTED).location
    mine = [f for f in version.files if f"/day={day}/" in f"/{f.path}"]
    uris = [spark_uri(f"{location}/{f.path}") for f in mine]
    print(f"\npartition filter: {PARTED}, {per_write * args.parted_writes:,} rows in {len(version.files)} files "
          f"over {args.days} values of day, {args.parted_writes} write(s) "
          f"(written in {seconds:.1f} s); the ledger lists {len(mine)} file(s) under day={day}")
    attached, _ = timed(lambda: spark_ops.attach(spark, led))
    query = f"SELECT count(*), sum(a) FROM {PARTED} WHERE day = '{day}'"
    frames: dict[str, Any] = {}

    def by_name() -> list[Any]:
        frames["name"] = spark.sql(query)
        return frames["name"].collect()

    def by_path() -> list[Any]:
        frames["path"] = spark.read.parquet(*uris).agg(F.count("*"), F.sum("a"))
        return frames["path"].collect()

    first, _ = timed(by_name)
    print(f"attach (a refresh naming it) {attached:.3f} s; the first query by name after it {first:.3f} s "
          "(over a version table, Spark lists the files then, once: not in the medians below)")
    times, results = alternate({f"by name, WHERE day = '{day}'": by_name,
                                f"spark.read.parquet({len(uris)} file(s) of day={day})": by_path}, args.rounds)
    name_rows, path_rows = results.values()
    if not same_rows(name_rows, path_rows) or name_rows[0][0] == 0:
        raise SystemExit(f"the partition reads disagree: by name {name_rows}, by path {path_rows}")
    medians = report(f"partition filter: {query}; warm-up, then median of {args.rounds} rounds, alternating", times)
    name_t, path_t = medians.values()
    name_files, path_files = files_read(frames["name"]), files_read(frames["path"])
    print(f"files read (numFiles of the executed scans): by name {name_files}, by path {path_files}; "
          f"the ledger lists {len(mine)} under day={day}, {len(version.files)} in all; "
          f"{name_rows[0][0]:,} rows match")
    print("the by-name scan:", plan_summary(frames["name"]))
    planning(spark, {"by name": lambda: spark.sql(query)._jdf.queryExecution().executedPlan(),
                     "by path": lambda: spark.read.parquet(*uris).agg(F.count("*"), F.sum("a"))
                     ._jdf.queryExecution().executedPlan()})
    print(f"ratio spark.read.parquet time / by-name time: {path_t / name_t:.3f}x")
    return path_t / name_t, name_files, path_files, len(mine), len(version.files)


# --- the run -----------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="attach,scan,parted", help="which parts, comma-separated")
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the scanned table")
    parser.add_argument("--files", "--scan-files", dest="files", type=int, default=100,
                        help="Parquet files of the scanned table")
    parser.add_argument("--parted-rows", type=int, default=4_000_000, help="rows of the partitioned table")
    parser.add_argument("--days", type=int, default=100, help="partitions (values of day)")
    parser.add_argument("--parted-writes", type=int, default=2, help="appends making the partitioned table")
    parser.add_argument("--parted-files-per-day", type=int, default=1,
                        help="files each append writes per value of day (10,000 files: 100 with --parted-writes 1)")
    parser.add_argument("--tables", type=int, default=1_000, help="tables to attach")
    parser.add_argument("--databases", type=int, default=10, help="databases they are spread over")
    parser.add_argument("--attach-rounds", type=int, default=3,
                        help="attach/refresh/detach rounds after the first (median kept)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per query pair (median kept)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp folder, removed afterwards)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch files")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - {"attach", "scan", "parted"}
    if unknown:
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    print(environment())
    import spark_ops
    with scratch_dir(args.work or tempfile.gettempdir(), keep=args.keep) as scratch:
        spark_tmp = scratch / "spark-tmp"
        spark_tmp.mkdir()
        spark = spark_ops.local_session("retention-ledger-bench", master=args.master, scratch=str(spark_tmp),
                                        conf={"spark.sql.warehouse.dir": str(scratch / "spark-warehouse")})
        try:
            print(f"Spark {spark.version} ({args.master}, {os.cpu_count()} cores), "
                  f"Java {spark._jvm.System.getProperty('java.version')}; scratch in {scratch}")
            spark.sparkContext.parallelize(range(100), 8).map(lambda x: x).count()  # warm the workers
            spark.sql("SELECT 1").collect()  # and SQL: the attach below is not the session's first statement
            run(spark, scratch, parts, args)
        finally:
            spark.stop()
    print(f"finished; {load()}")


def run(spark: Any, scratch: Path, parts: list[str], args: argparse.Namespace) -> None:
    import spark_ops

    verdicts: list[Callable[[], None]] = []
    if "attach" in parts:
        attaches = attach_part(spark, scratch, args)
        for what, seconds in attaches:
            verdicts.append(lambda w=what, s=seconds: verdict(w, s, 1.0, higher_is_better=False, unit=" s"))
    if {"scan", "parted"} & set(parts):
        (scratch / "bench").mkdir()
        led = Ledger.open(scratch / "bench" / "ledger.db", actor="bench")
        try:
            if "scan" in parts:
                ratio = scan_part(spark, led, args)
                verdicts.append(lambda r=ratio: verdict(f"scan by name / spark.read.parquet of the same {args.files:,} "
                                                        "files (peer time / name time)", r, 0.9, higher_is_better=True,
                                                        unit="x"))
            if "parted" in parts:
                parted_ratio, name_files, path_files, listed, total = parted_part(spark, led, args)

                def parted_verdict() -> None:
                    ok = name_files == listed
                    print(f"{'PASS' if ok else 'MISS'}  partition filter by name reads only that partition's "
                          f"files: {name_files} of {total} read, the ledger lists {listed} there (by path: {path_files})")
                    verdict(f"partition filter by name / spark.read.parquet of that partition's files, {total:,} files "
                            "a version (peer time / name time)", parted_ratio, 0.8, higher_is_better=True, unit="x")
                verdicts.append(parted_verdict)
        finally:
            spark_ops.detach(spark, led)
            led.close()
    print()
    for say in verdicts:
        say()


if __name__ == "__main__":
    main()
