"""DuckDB by name (``arrow_ops.attach``) against DuckDB's ``read_parquet`` of the same files.

    python benchmarks/duckdb_by_name.py [--rows 4000000] [--files 100,10000] [--days 100] [--rounds 5]

For each file count in ``--files``, a table of ``--rows`` rows (``id`` bigint, ``a`` bigint, ``s``
a string of 11 characters, ``r`` double) partitioned by a string ``day`` with ``--days`` values
(``'007'``), written as a writer on Spark writes it (a write's folder, ``day=...`` folders, the
partition column only in the folder names) with pyarrow, and committed through the ledger's API
with its schema recorded: exactly that many files in one version. It is attached to a fresh
DuckDB connection (timed once and printed, with no target), then two contenders are timed, each
once to warm up and then ``--rounds`` rounds, their order alternating from round to round:

1. a full scan: ``SELECT count(*), sum(a), max(s), avg(r) FROM bench.t`` by name, against the
   same query over ``read_parquet([<every file of the version>], hive_partitioning = true)``;
2. one partition: ``... WHERE day = '042'`` by name, against the same query over ``read_parquet``
   of the same files (DuckDB prunes the other days' files from their folder names in both);
3. reported, no target: the same query by name against ``read_parquet`` of just that day's files
   (a peer that knows which files hold the day). DuckDB binds every file a ``read_parquet`` is
   given before its filter prunes any (about 15 us a file here), so a name over 10,000 files pays
   that where the peer over 100 does not.

Then ``--tables`` (1,000) tables of one small file each, in 10 databases, are attached to a fresh
connection, refreshed with nothing changed, and detached: each timed, median of ``--rounds``
(reported, no target; Spark's classic attach of 1,000 tables is held to 1 s).

Rows are checked equal. Target (issue 61; DESIGN.md, "Performance", other engines): by name at
least 0.9x DuckDB's ``read_parquet`` of the same files (ratio = the peer's median / the name's),
a full scan and a one-partition filter, at each file count.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from _common import environment, print_table, scratch_dir, verdict
import arrow_ops
from ledger import Ledger

SCHEMA = ('{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},'
          '{"name":"a","type":"long","nullable":true,"metadata":{}},'
          '{"name":"s","type":"string","nullable":true,"metadata":{}},'
          '{"name":"r","type":"double","nullable":true,"metadata":{}},'
          '{"name":"day","type":"string","nullable":true,"metadata":{}}]}')
QUERY = "SELECT count(*), sum(a), max(s), avg(r) FROM {source}{where}"


def make_table(led: Ledger, name: str, rows: int, files: int, days: int) -> dict[str, list[str]]:
    """The table, written and committed; returns each day's files (absolute paths)."""
    led.create_table(name)
    write = led.begin_write(name)
    location = Path(led.table(name).location)
    per_file = rows // files
    by_day: dict[str, list[str]] = {}
    recorded = []
    for n in range(files):
        day = f"{n % days:03d}"
        start = n * per_file
        ids = pa.array(range(start, start + per_file), pa.int64())
        table = pa.table({"id": ids, "a": pa.array([i * 7 % 1000 for i in range(start, start + per_file)], pa.int64()),
                          "s": pa.array([f"s-{i:09d}" for i in range(start, start + per_file)]),
                          "r": pa.array([i / 3 for i in range(start, start + per_file)])})
        rel = f"{write.relative_folder}/day={day}/part-{n:05d}.parquet"
        path = location / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        recorded.append((rel, path.stat().st_size))
        by_day.setdefault(day, []).append(str(path))
    version = led.commit_write(write.id, recorded, schema=SCHEMA, partition_by=["day"])
    assert version.file_count == files
    return by_day


def timed(con: duckdb.DuckDBPyConnection, query: str) -> tuple[float, tuple]:
    start = time.perf_counter()
    row = con.execute(query).fetchone()
    return time.perf_counter() - start, row


def race(con: duckdb.DuckDBPyConnection, named: str, peer: str, rounds: int) -> tuple[float, float]:
    """The medians of ``named`` and ``peer`` over ``rounds``, after a warm-up; rows checked equal."""
    _, a = timed(con, named)
    _, b = timed(con, peer)
    assert a[:3] == b[:3] and math.isclose(a[3], b[3]), (a, b)  # a float sum's order is the scan's
    times: dict[str, list[float]] = {named: [], peer: []}
    for n in range(rounds):
        for query in (named, peer) if n % 2 == 0 else (peer, named):
            times[query].append(timed(con, query)[0])
    return statistics.median(times[named]), statistics.median(times[peer])


def attach_rounds(work: Path, tables: int, rounds: int) -> None:
    led = Ledger.open(work / "many.db", warehouse=work / "many")
    small = pa.table({"id": pa.array([1], pa.int64()), "a": pa.array([1], pa.int64()), "s": ["x"], "r": [1.0],
                      "day": ["001"]})
    for n in range(tables):
        name = f"db{n % 10}.t{n:04d}"
        led.create_table(name)
        write = led.begin_write(name)
        path = Path(led.table(name).location, write.relative_folder, "part-0.parquet")
        path.parent.mkdir(parents=True)
        pq.write_table(small, path)
        led.commit_write(write.id, [(f"{write.relative_folder}/part-0.parquet", path.stat().st_size)], schema=SCHEMA)
    steps: dict[str, list[float]] = {"attach": [], "refresh": [], "detach": []}
    for _ in range(rounds):
        con = duckdb.connect()
        for step, call in (("attach", arrow_ops.attach), ("refresh", arrow_ops.refresh), ("detach", arrow_ops.detach)):
            start = time.perf_counter()
            call(con, led)
            steps[step].append(time.perf_counter() - start)
            if step == "attach":
                assert con.execute("SELECT count(*) FROM db3.t0003").fetchone() == (1,)
    print_table([f"{tables:,} tables", "median s", "rounds s"],
                [(step, statistics.median(t), " ".join(f"{x:.2f}" for x in t)) for step, t in steps.items()])
    led.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", default="100,10000")
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--work")
    args = parser.parse_args()
    print(environment())
    print(f"duckdb {duckdb.__version__}, pyarrow {pa.__version__}")
    results = []
    with scratch_dir(args.work) as work:
        for files in [int(f) for f in args.files.split(",")]:
            led = Ledger.open(work / f"ledger-{files}.db", warehouse=work / f"warehouse-{files}")
            by_day = make_table(led, "bench.t", args.rows, files, args.days)
            every = [p for day in sorted(by_day) for p in by_day[day]]
            con = duckdb.connect()
            start = time.perf_counter()
            arrow_ops.attach(con, led)
            attach_s = time.perf_counter() - start
            literal = "[" + ", ".join(f"'{p}'" for p in every) + "]"
            one_day = "[" + ", ".join(f"'{p}'" for p in by_day["042"]) + "]"
            full = race(con, QUERY.format(source="bench.t", where=""),
                        QUERY.format(source=f"read_parquet({literal}, hive_partitioning = true)", where=""),
                        args.rounds)
            day = " WHERE day = '042'"
            part = race(con, QUERY.format(source="bench.t", where=day),
                        QUERY.format(source=f"read_parquet({literal}, hive_partitioning = true)", where=day),
                        args.rounds)
            alone = race(con, QUERY.format(source="bench.t", where=day),
                         QUERY.format(source=f"read_parquet({one_day}, hive_partitioning = true)", where=day),
                         args.rounds)
            results.append((files, attach_s, full, part, alone))
            arrow_ops.detach(con, led)
            led.close()
        if args.tables:
            attach_rounds(work, args.tables, args.rounds)
    print_table(["files", "attach s", "scan by name s", "read_parquet s", "ratio", "one day by name s",
                 "read_parquet s", "ratio", "its files alone s", "ratio (reported)"],
                [(f, a, full[0], full[1], full[1] / full[0], part[0], part[1], part[1] / part[0], alone[1],
                  alone[1] / alone[0]) for f, a, full, part, alone in results])
    for files, _, full, part, _ in results:
        verdict(f"a full scan by name against read_parquet, {files:,} files", full[1] / full[0], 0.9,
                higher_is_better=True, unit="x")
        verdict(f"one partition by name against read_parquet of the same files, {files:,} files", part[1] / part[0],
                0.9, higher_is_better=True, unit="x")


if __name__ == "__main__":
    main()
