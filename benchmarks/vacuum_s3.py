"""The vacuum on an S3 API, against delta-rs's vacuum and the store's batched-delete floor.

    python benchmarks/vacuum_s3.py [--sizes 2000,20000] [--rounds 1] [--no-deltalake]
    python benchmarks/vacuum_s3.py --shapes outside-ledger --outside-sizes 20000,200000

One S3-compatible server (``moto``'s server mode on 127.0.0.1, started here) serves every
contender. For each shape and size, identical sets of small objects are put (not timed), one
set per contender, and each contender deletes its own:

* ``many-tables``: ``--tables`` dropped tables, the objects spread evenly, flat in each;
* ``one-table``: one dropped table whose objects sit in ``--folders`` write folders
  (``_writes/<16 hex digits>/``, as versioned tables have them);
* ``outside-ledger``: one table written outside the ledger (issue 38): made with
  ``create_table``, its objects put straight into its location as a pipeline's own Spark job
  writes them (``--outside-folders`` partition folders, ``day=000/part-00000-<uuid>.snappy.parquet``;
  no ``_writes/``, no begin/commit, so the ledger knows none of them), then dropped. Its sizes
  are ``--outside-sizes`` (default 20,000; add 200,000 with ``--outside-sizes 20000,200000``).

Contenders, in the same run, in a seeded order shuffled afresh each round (median kept):

* ``batched-delete floor``: the keys, known in advance (no listing), deleted by DeleteObjects
  in batches of 1,000, 8 in flight, with obstore: what no vacuum can beat on this server;
* ``list + batched delete``: the same after a listing of each table (what a vacuum that must
  find its objects can hope for);
* ``deltalake vacuum (delta-rs)``: Delta tables whose log removed every object (each a
  tombstone that a vacuum with retention 0 deletes), vacuumed table by table in its own
  process (``benchmarks/.peers``, made on first use), timed from after ``import deltalake``;
* ``spark_ops.vacuum``: ledger tables written through the ledger (one committed write a folder)
  and dropped a week and a day ago (local[2], Spark started and warmed before timing; planning,
  the watermark append and the purge records included).

On ``outside-ledger`` the contenders are instead:

* ``list + batched delete (streamed)``: one paged listing of the location (pages of 1,000, with
  obstore), each page deleted by DeleteObjects as it arrives, at most 8 batches in flight, in one
  process: what a vacuum that must find its objects can hope for (the floor here);
* ``deltalake vacuum full (delta-rs)``: a Delta table whose log references none of the objects
  (version 0 holds only its protocol and metadata, ``day`` its partition column), vacuumed with
  ``full=True`` and retention 0 (a full vacuum deletes what the log does not reference);
* ``spark_ops.vacuum``: the table dropped a week and a day ago, as above; its phases and the
  time taken to put each contender's objects (untimed) are printed after the table.

Each contender gets a bucket of its own: this server's listing costs grow with everything in
the bucket (it scans it for each page), which would tax whoever runs last. Both the ledger and
Delta know their files (the ledger's versions name them; Delta's log has them as tombstones),
so both delete by key; the ledger then lists each location once more for what it cannot know.
On ``outside-ledger`` neither knows them: every contender must list the location to find them.

Targets (issue 19): at 20,000 objects, at least 1.0x delta-rs and 0.8x the batched-delete floor on
both shapes; at 2,000 the ratios are reported (Spark's fixed job cost is most of the time there).
Targets (issue 38), on ``outside-ledger`` at 20,000 and 200,000 objects: at least 1.0x delta-rs's
full vacuum and 0.8x the streamed list + batched delete floor (ratio: the other's seconds / the
vacuum's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Callable

from _common import environment, load, print_table, verdict, warm
from vacuum import peers_python

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_REGION": "us-east-1"}
PAYLOAD = b"x" * 128
OUTSIDE = "outside-ledger"
SHAPES = ("many-tables", "one-table", OUTSIDE)
IN_FLIGHT = 8


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            return server, endpoint
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("the moto S3 server did not start")


def layout(shape: str, objects: int, tables: int, folders: int) -> list[list[str]]:
    """For each table, the keys of its objects relative to the table's location."""
    if shape == "many-tables":
        return [[f"part-{i:05d}.parquet" for i in range(objects // tables)] for _ in range(tables)]
    if shape == OUTSIDE:  # as a Spark job writes a partitioned table: one job (one uuid) a folder
        rng = random.Random(f"{shape}-{objects}")
        jobs = [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(folders)]
        return [[f"day={i % folders:03d}/part-{i // folders:05d}-{jobs[i % folders]}.snappy.parquet"
                 for i in range(objects)]]
    names = [hashlib.sha256(str(f).encode()).hexdigest()[:16] for f in range(folders)]
    return [[f"_writes/{names[i % folders]}/part-{i:06d}.parquet" for i in range(objects)]]


def put_all(store, keys: list[str]) -> None:
    import obstore
    start = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: obstore.put(store, key, PAYLOAD), keys))
    PUTS.append(time.perf_counter() - start)


def left(store, prefix: str) -> int:
    import obstore
    return sum(len(page) for page in obstore.list(store, prefix + "/", chunk_size=1000))


# --- contenders: each builds its own objects (untimed), then returns the seconds it took -------

def floor(store, prefix: str, tables: list[list[str]], *, listing: bool) -> float:
    import obstore
    store = fresh_bucket()
    keys = [f"{prefix}/t{t:04d}/{rel}" for t, plan in enumerate(tables) for rel in plan]
    put_all(store, keys)
    start = time.perf_counter()
    if listing:
        found = [o["path"] for t in range(len(tables))
                 for page in obstore.list(store, f"{prefix}/t{t:04d}/", chunk_size=1000) for o in page]
        assert len(found) == len(keys)
        keys = found
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: obstore.delete(store, keys[i:i + 1000]), range(0, len(keys), 1000)))
    seconds = time.perf_counter() - start
    assert left(store, prefix) == 0
    return seconds


def streamed_floor(prefix: str, tables: list[list[str]]) -> float:
    """One paged listing a table, each page of up to 1,000 keys deleted by DeleteObjects as it
    arrives, at most ``IN_FLIGHT`` batches in flight (the listing waits for a free slot)."""
    import obstore
    store = fresh_bucket()
    keys = [f"{prefix}/t{t:04d}/{rel}" for t, plan in enumerate(tables) for rel in plan]
    put_all(store, keys)
    start = time.perf_counter()
    slots = threading.BoundedSemaphore(IN_FLIGHT)
    pending, found = [], 0
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        for t in range(len(tables)):
            for page in obstore.list(store, f"{prefix}/t{t:04d}/", chunk_size=1000):
                slots.acquire()
                batch = pool.submit(obstore.delete, store, [o["path"] for o in page])
                batch.add_done_callback(lambda _: slots.release())
                pending.append(batch)
                found += len(page)
        for batch in pending:
            batch.result()
    seconds = time.perf_counter() - start
    assert found == len(keys), f"listed {found} of {len(keys)}"
    assert left(store, prefix) == 0
    return seconds


_DELTA = r"""
import json, sys, time
from deltalake import DeltaTable
paths, options = json.loads(sys.argv[1]), json.loads(sys.argv[2])
full = {"full": True} if len(sys.argv) > 3 and json.loads(sys.argv[3]) else {}
start = time.perf_counter()
deleted = 0
for path in paths:
    deleted += len(DeltaTable(path, storage_options=options).vacuum(retention_hours=0,
                   enforce_retention_duration=False, dry_run=False, **full))
print(json.dumps({"seconds": time.perf_counter() - start, "deleted": deleted}))
"""


def delta(python: Path, store, endpoint: str, prefix: str, tables: list[list[str]], *,
          untracked: bool = False) -> float:
    """Delta tables whose every object was added (version 0) and removed (version 1): tombstones.
    Write folders are named as partitions (``w=<id>``): Delta skips ``_``-prefixed folders.

    ``untracked``: instead, tables whose log references none of the objects (version 0 holds
    only the protocol and the metadata, partitioned by ``day``), vacuumed with ``full=True``."""
    import obstore
    store = fresh_bucket()
    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True,
                                                        "metadata": {}}]})
    if untracked:
        schema = json.dumps({"type": "struct", "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "day", "type": "string", "nullable": True, "metadata": {}}]})
    paths, keys = [], []
    for t, plan in enumerate(tables):
        base = f"{prefix}/t{t:04d}"
        files = [rel.replace("_writes/", "w=") for rel in plan]
        keys += [f"{base}/{f}" for f in files]
        if untracked:
            head = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                    {"metaData": {"id": f"t{t}", "format": {"provider": "parquet", "options": {}},
                                  "schemaString": schema, "partitionColumns": ["day"], "configuration": {},
                                  "createdTime": 0}},
                    {"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}}]
            obstore.put(store, f"{base}/_delta_log/00000000000000000000.json",
                        ("\n".join(json.dumps(a) for a in head) + "\n").encode())
            paths.append(f"s3://{store_bucket(store)}/{base}")
            continue
        head = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                {"metaData": {"id": f"t{t}", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                              "partitionColumns": [], "configuration": {}, "createdTime": 0}},
                {"commitInfo": {"timestamp": 0, "operation": "WRITE"}}]
        adds = head + [{"add": {"path": f, "size": len(PAYLOAD), "partitionValues": {}, "modificationTime": 0,
                                "dataChange": True}} for f in files]
        removes = [{"commitInfo": {"timestamp": 1, "operation": "DELETE"}}] + [
            {"remove": {"path": f, "deletionTimestamp": 1, "dataChange": True, "size": len(PAYLOAD)}} for f in files]
        obstore.put(store, f"{base}/_delta_log/00000000000000000000.json",
                    ("\n".join(json.dumps(a) for a in adds) + "\n").encode())
        obstore.put(store, f"{base}/_delta_log/00000000000000000001.json",
                    ("\n".join(json.dumps(a) for a in removes) + "\n").encode())
        paths.append(f"s3://{store_bucket(store)}/{base}")
    put_all(store, keys)
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    done = subprocess.run([str(python), "-c", _DELTA, json.dumps(paths), json.dumps(options)] +
                          ([json.dumps(True)] if untracked else []), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"deltalake vacuum failed:\n{done.stderr[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["deleted"] == len(keys), f"deltalake deleted {out['deleted']} of {len(keys)}"
    return out["seconds"]


def ours(spark, store, prefix: str, tables: list[list[str]], scratch: Path, *, known: bool = True) -> float:
    """``known=False``: the objects are put straight into each table's location, the ledger told
    nothing of them (a table written outside the ledger), and the table dropped after."""
    from spark_ops import vacuum
    led, keys = ledger_on_s3(prefix, tables, scratch, known=known)
    start = time.perf_counter()
    report = vacuum(spark, led)
    seconds = time.perf_counter() - start
    PHASES.append(report.timings)
    assert report.files == len(keys) and not report.failures, report.summary()
    led.close()
    return seconds


def ledger_on_s3(prefix: str, tables: list[list[str]], scratch: Path, *, known: bool = True, store=None):
    """A ledger (a SQLite file in ``scratch``) whose warehouse is ``prefix`` in ``store``'s bucket
    (default: a fresh one), holding ``tables`` dropped a week and a day ago, their objects put
    (untimed); and the keys."""
    from ledger import Ledger, ManualClock
    store = store or fresh_bucket()
    clock = ManualClock()
    folder = Path(tempfile.mkdtemp(dir=scratch))
    led = Ledger.open(folder / "ledger.db", warehouse=f"s3://{store_bucket(store)}/{prefix}", clock=clock,
                      actor="bench")
    keys = []
    for t, plan in enumerate(tables):
        name = f"bench.t{t:05d}"
        location = led.create_table(name).location.split("/", 3)[3]  # the key prefix
        if not known:
            keys += [f"{location}/{rel}" for rel in plan]
            continue
        by_folder: dict[str, list[str]] = {}
        for rel in plan:
            by_folder.setdefault(rel.rsplit("/", 1)[0] if "/" in rel else "", []).append(rel.rsplit("/", 1)[-1])
        for names in by_folder.values():  # one committed write a folder, as a versioned table has them
            w = led.begin_write(name)
            keys += [f"{location}/{w.relative_folder}/{n}" for n in names]
            led.commit_write(w.id, [(f"{w.relative_folder}/{n}", len(PAYLOAD)) for n in names])
        led.drop_table(name)
    put_all(store, keys)
    if not known:  # written, then dropped
        for t in range(len(tables)):
            led.drop_table(f"bench.t{t:05d}")
    clock.advance(timedelta(days=8))
    return led, keys


_BUCKETS = iter(range(10**6))
PHASES: list[dict[str, float]] = []
"""The vacuum's own timings of each run (plan, delete, record), printed after each shape."""
PUTS: list[float] = []
"""Seconds each contender's objects took to put (untimed), printed after the outside-ledger shape."""


def fresh_bucket():
    """A new, empty bucket and a client of it."""
    import boto3
    from obstore.store import S3Store
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    name = f"bench{next(_BUCKETS):04d}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    return S3Store(name, endpoint=endpoint, region="us-east-1", virtual_hosted_style_request=False,
                   client_options={"allow_http": True})


def store_bucket(store) -> str:
    return store.config["bucket"] if "bucket" in store.config else store.config["aws_bucket"]


# --- the run ---------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000", help="objects per shape, comma-separated")
    parser.add_argument("--tables", type=int, default=100, help="tables in the many-tables shape")
    parser.add_argument("--folders", type=int, default=100, help="write folders in the one-table shape")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--outside-sizes", default="20000",
                        help=f"objects in the {OUTSIDE} shape, comma-separated (e.g. 20000,200000)")
    parser.add_argument("--outside-folders", type=int, default=200,
                        help=f"partition folders (day=NNN/) in the {OUTSIDE} shape")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-deltalake", action="store_true")
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    if set(shapes) - set(SHAPES):
        parser.error(f"unknown shape(s): {', '.join(sorted(set(shapes) - set(SHAPES)))}")
    runs = [(shape, int(size)) for size in args.sizes.split(",") for shape in shapes if shape != OUTSIDE] + \
        [(OUTSIDE, int(size)) for size in args.outside_sizes.split(",") if OUTSIDE in shapes]
    print(environment())
    server, endpoint = start_server()
    os.environ.update({**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint})
    store = None  # each contender makes a bucket of its own
    python = None if args.no_deltalake else peers_python()
    from spark_ops import local_session
    spark = local_session("retention-ledger-bench-s3")
    spark.sparkContext.environment.update({**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint})
    warm(spark)
    scratch = Path(tempfile.mkdtemp(prefix="ledger-bench-s3-"))
    counter = iter(range(10**6))
    try:
        for shape, size in runs:
            outside = shape == OUTSIDE
            tables = layout(shape, size, args.tables, args.outside_folders if outside else args.folders)
            delta_name = "deltalake vacuum full (delta-rs)" if outside else "deltalake vacuum (delta-rs)"
            floor_name = "list + batched delete (streamed)" if outside else "batched-delete floor (keys known)"
            if outside:
                contenders: dict[str, Callable[[], float]] = {
                    floor_name: lambda: streamed_floor(f"s{next(counter)}", tables),
                    "spark_ops.vacuum": lambda: ours(spark, store, f"v{next(counter)}", tables, scratch, known=False),
                }
            else:
                contenders = {
                    "batched-delete floor (keys known)": lambda: floor(store, f"f{next(counter)}", tables, listing=False),
                    "list + batched delete": lambda: floor(store, f"l{next(counter)}", tables, listing=True),
                    "spark_ops.vacuum": lambda: ours(spark, store, f"v{next(counter)}", tables, scratch),
                }
            if python is not None:
                contenders[delta_name] = \
                    lambda: delta(python, store, endpoint, f"d{next(counter)}", tables, untracked=outside)
            times: dict[str, list[float]] = {name: [] for name in contenders}
            puts: dict[str, list[float]] = {name: [] for name in contenders}
            shuffler = random.Random(f"{shape}-{size}")
            for _ in range(args.rounds):
                for name in shuffler.sample(list(contenders), len(contenders)):
                    times[name].append(contenders[name]())
                    puts[name].append(PUTS[-1])
            medians = {name: statistics.median(t) for name, t in times.items()}
            where = f" in {args.outside_folders} partition folders, written outside the ledger" if outside else ""
            print(f"\n{shape}: {len(tables)} table(s), {size:,} objects of {len(PAYLOAD)} bytes{where} on an S3 API "
                  f"(moto); median of {args.rounds} round(s)")
            print_table(("contender", "seconds", "objects/s", "every round (s)"),
                        [(name, m, f"{size / m:,.0f}", " ".join(f"{t:.2f}" for t in times[name]))
                         for name, m in medians.items()])
            print("spark_ops.vacuum phases (s): " + "; ".join(
                " ".join(f"{k} {v:.2f}" for k, v in t.items()) for t in PHASES[-args.rounds:]))
            if outside:
                print("putting the objects (untimed, s): " + "; ".join(
                    f"{name} {' '.join(f'{p:.1f}' for p in ps)}" for name, ps in puts.items()))
            ours_s = medians["spark_ops.vacuum"]
            strict = size >= 20_000
            against = "delta-rs's full vacuum" if outside else "delta-rs's"
            if delta_name in medians:
                ratio = medians[delta_name] / ours_s
                if strict:
                    verdict(f"{shape}, {size:,}: vacuum speed / {against}", ratio, 1.0, higher_is_better=True,
                            unit="x")
                else:
                    print(f"INFO  {shape}, {size:,}: vacuum speed / {against}: {ratio:.3f}x")
            against = "the list + batched delete floor's" if outside else "the batched-delete floor's"
            ratio = medians[floor_name] / ours_s
            if strict:
                verdict(f"{shape}, {size:,}: vacuum speed / {against}", ratio, 0.8,
                        higher_is_better=True, unit="x")
            else:
                print(f"INFO  {shape}, {size:,}: vacuum speed / {against}: {ratio:.3f}x")
    finally:
        spark.stop()
        server.kill()
        server.wait(timeout=30)
    print(f"finished; {load()}")


if __name__ == "__main__":
    main()
