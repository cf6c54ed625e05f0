"""The vacuum on a Spark Connect session against the same vacuum on a classic one (issue 46).

    python benchmarks/vacuum_connect.py [--files 20000] [--tables 100] [--folders 100] [--rounds 3]
                                        [--stores disk,s3]

Both sessions run the same code (the vacuum's jobs are DataFrame operations, R24) on the same
master, ``local[2]``: the classic session in this process, and a Connect server in a process of
its own (``tests/connect.py``'s, as the suite's), reached over gRPC on the loopback address, as a
Connect user reaches a remote one. Each is started, shipped the executor code and warmed before
timing; a vacuum's own pre-flight check (once per session and warehouse: a Connect session's
executors are always asked, a classic local one's are this process) is paid in the first round
of each shape, as a pipeline pays it on its first vacuum. Identical trees are built for each
(``benchmarks/vacuum.py``'s shapes: ``many-tables``, ``one-table``), deleted in an order
shuffled afresh each round, and the medians compared.

Each shape runs on a local disk and on an S3 API (``moto``'s server on 127.0.0.1, started here,
reached by both sessions; ``benchmarks/vacuum_s3.py``'s layout: a committed write a folder, the
objects put untimed). On a store the driver deletes what the ledger knows by key itself, on both
kinds of session (``vacuum_job.driver.driver_items``), so what differs there is the pre-flight and
the session's own round trips.

Target (issue 46): on the same 20,000 files, the vacuum on Connect at least 0.9x as fast as on
the classic session (classic seconds / Connect seconds).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
from pathlib import Path

import vacuum_s3
from _common import REPO_ROOT, environment, load, print_table, scratch_dir, verdict, warm
from vacuum import layout, ledger_tables, timed

from spark_ops import local_session, vacuum
from tests.connect import ConnectServer

KINDS = ("classic", "connect")


def sessions(log: Path, env: dict[str, str]) -> tuple[dict[str, object], ConnectServer]:
    """A classic session here and a Connect client of a server of its own, both warmed; ``env``:
    what both sessions' executors are given (the S3 server's address and credentials)."""
    classic = local_session("retention-ledger-bench-classic")
    classic.sparkContext.environment.update(env)
    server = ConnectServer(log, env=env)
    connect = local_session("retention-ledger-bench-connect", remote=server.address)
    found = {"classic": classic, "connect": connect}
    for kind, spark in found.items():
        with marked(kind):
            warm(spark)
    return found, server


class marked:
    """PySpark's mark of a Connect process (``pyspark.sql.functions`` build Connect columns while it
    is set), for the kind of session in use: one process here holds both kinds, as the suite does."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __enter__(self) -> None:
        if self.kind == "connect":
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        else:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)

    def __exit__(self, *exc: object) -> None:
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


def race(found: dict[str, object], scratch: Path, shape: str, store: str, args: argparse.Namespace) -> dict[str, float]:
    """Each kind's vacuum ``rounds`` times on identical trees, interleaved in a shuffled order; the medians."""
    rounds = args.rounds
    if store == "s3":
        keys = vacuum_s3.layout(shape, args.files, args.tables, args.folders)
        n, count = sum(len(plan) for plan in keys), len(keys)
    else:
        tables = layout(shape, args.files, args.tables, args.folders)
        n, count = sum(c for plan in tables for _, c in plan), len(tables)
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    shuffler = random.Random(f"{shape}-{store}")
    # On S3, a bucket a kind, the same every round, as a pipeline's warehouse (its pre-flight is
    # paid once a session and warehouse, in the first round).
    buckets = {kind: vacuum_s3.fresh_bucket() for kind in KINDS} if store == "s3" else {}
    orders = []
    for _ in range(rounds):
        order = shuffler.sample(KINDS, len(KINDS))
        orders.append(" ".join(order))
        for kind in order:
            base = scratch / f"{shape}-{kind}"  # the same warehouse every round, as a pipeline's
            if store == "s3":
                base.mkdir()
                led, _ = vacuum_s3.ledger_on_s3(shape, keys, base, store=buckets[kind])
            else:
                led = ledger_tables(base, tables)
            report = None

            def run() -> None:
                nonlocal report
                with marked(kind):
                    report = vacuum(found[kind], led)
            times[kind].append(timed(run))
            assert report is not None and report.files == n and not report.failures, report
            led.close()
            shutil.rmtree(base, ignore_errors=True)
    medians = {kind: statistics.median(times[kind]) for kind in KINDS}
    where = "objects on an S3 API (moto)" if store == "s3" else "files on a local disk"
    print(f"\n{shape}: {count} table(s), {n:,} {where}; median of {rounds} round(s), orders {', '.join(orders)}")
    print_table(("session", "seconds", "files/s", "every round (s)"),
                [(kind, medians[kind], f"{n / medians[kind]:,.0f}", " ".join(f"{t:.2f}" for t in times[kind]))
                 for kind in KINDS])
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000, help="files per shape")
    parser.add_argument("--tables", type=int, default=100, help="tables in the many-tables shape")
    parser.add_argument("--folders", type=int, default=100, help="sub-folders in the one-table shape")
    parser.add_argument("--shapes", default="many-tables,one-table")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stores", default="disk,s3", help="comma-separated, of disk, s3")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temp folder)")
    args = parser.parse_args()
    print(environment())
    stores = [s for s in args.stores.split(",") if s]
    if set(stores) - {"disk", "s3"}:
        parser.error(f"unknown store(s): {', '.join(sorted(set(stores) - {'disk', 's3'}))}")
    env: dict[str, str] = {}
    moto = None
    if "s3" in stores:
        moto, endpoint = vacuum_s3.start_server()
        env = {**vacuum_s3.CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}
        os.environ.update(env)
    with scratch_dir(args.dir) as scratch:
        found, server = sessions(scratch / "connect-server.log", env)
        try:
            print(f"classic: local[2] in this process; Connect: a server over local[2] at {server.address} "
                  f"(started from {REPO_ROOT})")
            for store in stores:
                for shape in filter(None, args.shapes.split(",")):
                    medians = race(found, scratch, shape, store, args)
                    verdict(f"{shape} on {'S3' if store == 's3' else 'a local disk'}: Connect vacuum speed / "
                            "classic's", medians["classic"] / medians["connect"], 0.9, higher_is_better=True, unit="x")
        finally:
            server.stop()
            if moto is not None:
                moto.kill()
    print(f"finished; {load()}")


if __name__ == "__main__":
    main()
