"""``attach`` of many tables on a Spark Connect session, the same on a classic one in the same
run, and what each way of making a view costs on Connect (issue 46).

    python benchmarks/attach_connect.py [--tables 1000] [--databases 10] [--rounds 5]
    python benchmarks/attach_connect.py --parts levers --lever-tables 200
    python benchmarks/attach_connect.py --remote sc://host:15002     # a server of one's own

The tables are ``benchmarks/spark_sql.py``'s (``many_tables``): ``--tables`` tables in
``--databases`` databases, one version of one small Parquet file each, made through the ledger's
API with the schema recorded. Unless ``--remote``, a Spark Connect server is started in a process
of its own (``local[2]``, as the tests start theirs), and warmed with a statement. Parts
(``--parts``), in this order:

* ``classic``: on a classic local session (``local[2]``), ``attach`` (timed), a query on one name
  (checked, not timed), ``refresh`` (nothing changed), ``detach`` (timed); ``--rounds`` times,
  medians. It runs first: once a process has made a Connect session, PySpark builds Connect
  columns in it, and the classic session is stopped before the Connect part.
* ``classic-sql``: the same classic session, its views made with SQL as on Connect (the JVM
  path turned off for the part): why the classic attach keeps its JVM path.
* ``connect``: the same on a Connect session.
* ``levers``: on Connect, ``--lever-tables`` (200) of the tables' versions, each way of making
  their views (and dropping them), in ms a view: ``CREATE VIEW`` over the files
  (``parquet.`<glob>```, whose schema Spark infers from a footer in a job), one statement per
  request (on a quarter of them: the slowest), one script, four scripts at once (PySpark's
  Connect client is thread-safe); temporary views the same way (a temporary view has no
  database, so it cannot give a two-part name: measured, not usable); a table of the recorded
  columns over the files, one ``LIKE`` it (its columns copied, no files resolved) and a view
  over that (what ``attach`` does on Connect: nothing to infer);
  and the floor, a ``CREATE VIEW ... AS SELECT 1`` per table (a catalog entry and nothing else),
  four scripts at once: what any thousand views cost there.

Each kind's first round is the session's first attach; the rounds after it each follow a
``detach``. Both are reported: the first round alone, and the median of the others.

Targets (issues 46 and 62): ``attach`` of 1,000 tables on Connect in at most 3 s; the classic
attach unchanged (issue 37: under 1 s). With ``levers``, the Connect attach is also set against
the floor measured on the same server in the same run (1,000 ``CREATE VIEW ... AS SELECT 1``,
four scripts at once): no attach made with SQL can put 1,000 names in less. Figures are printed, never asserted; the script exits non-zero
only on an error (a view that does not read, a count of names that is wrong).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from _common import REPO_ROOT, environment, load, print_table, scratch_dir, verdict
from spark_sql import many_tables

from ledger import Ledger

TARGET_CONNECT = 3.0
TARGET_CLASSIC = 1.0


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def cycles(spark: Any, led: Ledger, args: argparse.Namespace) -> dict[str, list[float]]:
    """``--rounds`` times: attach, a query on one name (checked), refresh, detach."""
    import spark_ops

    probe = f"db{args.databases - 1}.t{(args.tables - 1) // args.databases:04d}"
    times: dict[str, list[float]] = {"attach": [], "refresh (nothing changed)": [], "detach": []}
    for _ in range(args.rounds):
        for step, call in (("attach", spark_ops.attach), ("refresh (nothing changed)", spark_ops.refresh),
                           ("detach", spark_ops.detach)):
            seconds, names = timed(lambda call=call: call(spark, led))
            if len(names) != args.tables:
                raise SystemExit(f"{step} named {len(names)} tables, not {args.tables}")
            times[step].append(seconds)
            if step == "attach":
                got = spark.sql(f"SELECT count(*), sum(a) FROM {probe}").collect()[0]
                if (got[0], got[1]) != (10, sum(range(10, 20))):
                    raise SystemExit(f"{probe} read {tuple(got)} after the attach")
    return times


def report(kind: str, times: dict[str, list[float]], n: int) -> float:
    """Print the rounds; return the attach's median after a detach (the first round's alone if
    there was one round)."""
    attach = times["attach"]
    rows = {"attach, the session's first": attach[:1], "attach after a detach": attach[1:] or attach[:1],
            **{step: ts for step, ts in times.items() if step != "attach"}}
    print(f"\n{kind}: attach, refresh and detach of {n:,} tables ({len(attach)} rounds; medians)")
    print_table(("step", "median s", "per table (ms)", "every round (s)"),
                [(step, statistics.median(ts), f"{statistics.median(ts) / n * 1e3:.2f}",
                  " ".join(f"{t:.2f}" for t in ts)) for step, ts in rows.items()])
    return statistics.median(rows["attach after a detach"])


def classic_part(led: Ledger, scratch: Path, args: argparse.Namespace, parts: list[str]) -> dict[str, float]:
    """The classic attach's medians: ``classic`` (its JVM path) and ``classic-sql`` (SQL, as on
    Connect), of those asked for."""
    import spark_ops
    from spark_ops import session

    spark = spark_ops.local_session("retention-ledger-bench", scratch=str(scratch / "spark-tmp"),
                                    conf={"spark.sql.warehouse.dir": str(scratch / "spark-warehouse")})
    medians: dict[str, float] = {}
    try:
        spark.sql("SELECT 1").collect()
        if "classic" in parts:
            medians["classic"] = report("classic", cycles(spark, led, args), args.tables)
        if "classic-sql" in parts:
            through_jvm = session.Classic.java
            session.Classic.java = lambda self: None  # type: ignore[assignment,method-assign,return-value]
            try:
                medians["classic-sql"] = report("classic, views made with SQL as on Connect",
                                                cycles(spark, led, args), args.tables)
            finally:
                session.Classic.java = through_jvm  # type: ignore[method-assign]
        return medians
    finally:
        spark.stop()


def connect_part(spark: Any, led: Ledger, args: argparse.Namespace) -> float:
    return report("Spark Connect", cycles(spark, led, args), args.tables)


def levers_part(spark: Any, led: Ledger, args: argparse.Namespace) -> float:
    """Each way of making (and dropping) the views of ``--lever-tables`` versions, ms a view;
    returns the floor's."""
    from spark_ops.catalog.statements import Statements
    from spark_ops.catalog.text import VersionFiles, literal

    n = min(args.lever_tables, args.tables)
    versions = []
    for table in led.tables()[:n]:
        version = led.version(table.name)
        assert version.schema is not None
        versions.append(VersionFiles(table.location, tuple(f.path for f in version.files), version.schema))
    tag = f"lever_{os.getpid()}"
    at_once = Statements(spark)
    rows: list[tuple[str, float, float]] = []

    def one_by_one(statements: list[str]) -> None:
        for statement in statements:
            spark.sql(statement)

    def one_script(statements: list[str]) -> None:
        spark.sql("BEGIN\n" + ";\n".join(statements) + ";\nEND")

    def four_scripts(statements: list[str]) -> None:
        errors = [e for e in at_once.run(statements) if e is not None]
        if errors:
            raise SystemExit(str(errors[0]).splitlines()[0])

    def measure(what: str, how: Callable[[list[str]], None], statements: list[str]) -> float:
        seconds, _ = timed(lambda: how(statements))
        per = seconds / len(statements) * 1e3
        rows.append((what, per, per))
        return per

    def inferred(i: int, database: str, kind: str = "VIEW") -> str:
        return f"CREATE OR REPLACE {kind} {database}v{i} AS {versions[i].text()}"

    databases = [f"{tag}_{d}" for d in "abcde"]
    one_script([f"CREATE DATABASE IF NOT EXISTS {d}" for d in databases])
    a, b, c, d, e = (f"{name}." for name in databases)
    try:
        measure("view over the files (inferred), one statement per request", one_by_one,
                [inferred(i, a) for i in range(max(1, n // 4))])
        measure("view over the files (inferred), one script", one_script, [inferred(i, b) for i in range(n)])
        measure("view over the files (inferred), 4 scripts at once", four_scripts, [inferred(i, a) for i in range(n)])
        measure("temporary view over the files, 4 scripts at once (no two-part name)", four_scripts,
                [inferred(i, f"{tag}_", "TEMPORARY VIEW") for i in range(n)])
        table_ms = measure("a table of the recorded columns, 4 scripts at once", four_scripts, [
            f"CREATE TABLE {c}t{i} ({v.columns()}) USING parquet OPTIONS ('path' = {literal(v.glob())})"
            for i, v in enumerate(versions)])
        like_ms = measure("a table LIKE one of the same columns, 4 scripts at once", four_scripts, [
            f"CREATE TABLE {e}t{i} LIKE {c}t0 LOCATION {literal(v.glob())}" for i, v in enumerate(versions)])
        view_ms = measure("a view over that table, 4 scripts at once", four_scripts,
                          [f"CREATE OR REPLACE VIEW {d}v{i} AS {v.text(source=f'{e}t{i}')}" for i, v in enumerate(versions)])
        rows.append(("  columns written out, and a view: what attach made on Connect", table_ms + view_ms,
                     table_ms + view_ms))
        rows.append(("  LIKE, and a view: what attach makes on Connect (but for one table of each columns)",
                     like_ms + view_ms, like_ms + view_ms))
        measure("DROP VIEW of a view over the files (inferred again), 4 scripts at once", four_scripts,
                [f"DROP VIEW IF EXISTS {a}v{i}" for i in range(n)])
        measure("DROP VIEW of a view over a table, 4 scripts at once", four_scripts,
                [f"DROP VIEW IF EXISTS {d}v{i}" for i in range(n)])
        floor = measure("floor: CREATE VIEW ... AS SELECT 1, 4 scripts at once", four_scripts,
                        [f"CREATE OR REPLACE VIEW {a}s{i} AS SELECT 1 AS x" for i in range(n)])
    finally:
        at_once.run([f"DROP DATABASE IF EXISTS {name} CASCADE" for name in databases])
        for i in range(n):
            spark.catalog.dropTempView(f"{tag}_v{i}")
    print(f"\nlevers on Spark Connect: views of {n} versions of one file each (of a quarter of them, one "
          "statement per request), and at that rate for 1,000")
    print_table(("way", "ms a view", "s for 1,000"), rows)
    return floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="classic,classic-sql,connect,levers", help="which parts, comma-separated")
    parser.add_argument("--tables", type=int, default=1_000)
    parser.add_argument("--databases", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="attach/refresh/detach rounds (median kept)")
    parser.add_argument("--lever-tables", type=int, default=200, help="versions the levers part makes views of")
    parser.add_argument("--remote", default=None, help="a Spark Connect server's sc://host:port (default: start one)")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp folder, removed afterwards)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch files")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    known = {"classic", "classic-sql", "connect", "levers"}
    if set(parts) - known:
        parser.error(f"unknown part(s): {', '.join(sorted(set(parts) - known))}")
    print(environment())
    verdicts: list[Callable[[], object]] = []
    medians: dict[str, float] = {}
    with scratch_dir(args.work or tempfile.gettempdir(), keep=args.keep) as scratch:
        (scratch / "spark-tmp").mkdir()
        made, path = timed(lambda: many_tables(scratch / "many", args.databases, args.tables))
        print(f"{args.tables:,} tables in {args.databases} databases, one version of one file each "
              f"(made through the ledger API in {made:.1f} s)")
        led = Ledger.open(path, actor="bench")
        try:
            if {"classic", "classic-sql"} & set(parts):
                medians.update(classic_part(led, scratch, args, parts))
            if "classic" in medians:
                verdicts.append(lambda s=medians["classic"]: verdict(
                    f"classic attach of {args.tables:,} tables (median)", s, TARGET_CLASSIC,
                    higher_is_better=False, unit=" s"))
            if {"connect", "levers"} & set(parts):
                run_connect(led, scratch, parts, args, verdicts, medians)
        finally:
            led.close()
    print()
    for say in verdicts:
        say()
    if {"classic", "classic-sql"} <= medians.keys():
        print(f"ratio   classic attach, views made with SQL / through the JVM, this run: "
              f"{medians['classic-sql'] / medians['classic']:.1f}x")
    if {"classic", "connect"} <= medians.keys():
        print(f"ratio   Spark Connect attach / classic attach of the same {args.tables:,} tables, this run: "
              f"{medians['connect'] / medians['classic']:.1f}x ({medians['connect']:.2f} s / {medians['classic']:.2f} s)")
    print(f"finished; {load()}")


def run_connect(led: Ledger, scratch: Path, parts: list[str], args: argparse.Namespace,
                verdicts: list[Callable[[], object]], medians: dict[str, float]) -> None:
    import spark_ops

    server = None
    if args.remote is None:
        sys.path.insert(0, str(REPO_ROOT))
        from tests.connect import ConnectServer
        seconds, server = timed(lambda: ConnectServer(scratch / "connect-server.log"))
        print(f"\na Spark Connect server (local[2], a process of its own) started in {seconds:.1f} s")
    try:
        spark = spark_ops.local_session("retention-ledger-bench", remote=args.remote or server.address)  # type: ignore[union-attr]
        spark.sql("SELECT 1").collect()
        if "connect" in parts:
            seconds = medians["connect"] = connect_part(spark, led, args)
            verdicts.append(lambda s=seconds: verdict(
                f"Spark Connect attach of {args.tables:,} tables (median after a detach)", s,
                TARGET_CONNECT, higher_is_better=False, unit=" s"))
        if "levers" in parts:
            floor = levers_part(spark, led, args)
            verdicts.append(lambda f=floor: print(
                f"floor   any 1,000 views made with SQL on this Connect server: {f * 1000 / 1e3:.2f} s "
                f"({f:.2f} ms a view, SELECT 1 views in scripts four at once)"))
            if "connect" in medians:
                verdicts.append(lambda f=floor, s=medians["connect"]: print(
                    f"ratio   Spark Connect attach a name / the floor's view, this run: {s / args.tables * 1e3 / f:.1f}x "
                    f"({s / args.tables * 1e3:.2f} ms / {f:.2f} ms); the target of {TARGET_CONNECT:g} s for "
                    f"{args.tables:,} is {TARGET_CONNECT / args.tables * 1e3 / f:.2f}x the floor"))
        spark.stop()
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
