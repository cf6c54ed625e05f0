"""The vacuum on an object store, for real: a local S3-compatible server (``moto``'s server mode,
started here on 127.0.0.1), reached through a fault-injecting proxy (``tests.s3proxy``) that
throttles, delays, resets and fails keys on the wire, as a store or a network would.

Spark here has no s3a connector, so the tables' objects are put with boto3 (as a Spark job would
leave them); the vacuum itself runs on Spark, whose Python workers delete through obstore in
DeleteObjects batches (R20). The endpoint reaches them as ``AWS_ENDPOINT_URL``, set for the
executors the way a deployment sets ``spark.executorEnv.*``: on the classic session from this
process, and on Spark Connect by the environment of a Connect server of this module's own, as a
cluster's configuration gives its executors theirs (R24: the vacuums here run on both kinds).
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import time
import tracemalloc
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import pytest

from ledger import Ledger, LedgerUnavailable, ManualClock
from spark_ops.executor import fs
from spark_ops.executor.storage import Deleter, StoredFile, Totals, Unsafe
from spark_ops.executor.stores import storage_for
from tests.connect import ConnectServer
from tests.s3proxy import DELETES, LISTINGS, Fault, FaultProxy, scratch
from tests.stores import FaultyStore
from vacuum_work import Result

pytestmark = pytest.mark.spark
BOTH_SESSIONS = True
boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")

WEEK = timedelta(days=7)
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
REPO = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def proxy(classic_spark) -> Iterator[FaultProxy]:
    """A moto S3 server on the loopback address (buckets ``lake`` and ``other``) behind the fault
    proxy, which every client here (and on the classic session's executors) uses as its endpoint;
    stopped at the end."""
    spark = classic_spark
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("the moto S3 server did not start")
            time.sleep(0.1)
    faults = FaultProxy(f"http://127.0.0.1:{port}").start()
    settings = {**CREDENTIALS, "AWS_ENDPOINT_URL": faults.url}
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    spark.sparkContext.environment.update(settings)  # the executors' Python workers
    for bucket in ("lake", "other"):
        client().create_bucket(Bucket=bucket)
    try:
        yield faults
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
            spark.sparkContext.environment.pop(key, None)
        faults.stop()
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def connect_spark(proxy: FaultProxy, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """This module's Spark Connect session (it overrides the suite's): on a server started with the
    store's endpoint and credentials in its environment, which its executors' Python workers
    inherit. A session of its own, not PySpark's ``getOrCreate``, which would hand back the
    suite's session on the other server."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    settings = {**CREDENTIALS, "AWS_ENDPOINT_URL": proxy.url}
    server = ConnectServer(tmp_path_factory.mktemp("connect-s3") / "server.log", env=settings)
    session = ConnectSession.builder.remote(server.address).create()
    session.conf.set("spark.sql.session.timeZone", "UTC")
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # the ``spark`` fixture sets it per test
    try:
        yield session
    finally:
        session.stop()
        server.stop()


@pytest.fixture
def s3(proxy: FaultProxy) -> Iterator[FaultProxy]:
    """The proxy with no fault left over from another test."""
    proxy.clear()
    yield proxy
    proxy.clear()


@functools.lru_cache(maxsize=4)
def _client(endpoint: str):
    return boto3.client("s3", endpoint_url=endpoint)


def client():
    """A boto3 client of the endpoint in use (made once: making one costs more than a request)."""
    return _client(os.environ["AWS_ENDPOINT_URL"])


def objects_under(location: str) -> list[str]:
    """Every key under a location (``s3://bucket/prefix``), straight from the store."""
    bucket, _, prefix = location[len("s3://"):].partition("/")
    pages = client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/")
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def put(uri: str, data: bytes = b"x") -> str:
    bucket, _, key = uri[len("s3://"):].partition("/")
    client().put_object(Bucket=bucket, Key=key, Body=data)
    return key


def put_table(location: str, files: int, *, folders: int = 1, size: int = 10) -> list[str]:
    """Objects at a table's location, as a job writes them (in write folders if several)."""
    from concurrent.futures import ThreadPoolExecutor
    uris = [f"{location}{f'/_writes/w{f % folders:03d}' if folders > 1 else ''}/part-{f:05d}.parquet"
            for f in range(files)]
    with ThreadPoolExecutor(16) as pool:
        return sorted(pool.map(lambda uri: put(uri, b"p" * size), uris))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(timezone.utc))  # the store's LastModified is on the real clock


@pytest.fixture
def lake(s3: FaultProxy, tmp_path: Path, clock: ManualClock) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger.db", warehouse=f"s3://lake/wh-{tmp_path.name}", clock=clock,
                     actor="s3-tester") as led:
        yield led


# --- the vacuum on S3 ----------------------------------------------------------------------

def test_r2_r9_r20_a_table_on_s3_is_dropped_and_purged_in_batches(spark, lake: Ledger, clock, s3) -> None:
    from spark_ops import vacuum
    big = lake.create_table("sales.big")
    small = lake.create_table("sales.small")
    kept = lake.create_table("sales.kept")
    put_table(big.location, 2_400, folders=6)
    put_table(small.location, 3)
    kept_objects = put_table(kept.location, 2)
    lake.drop_table("sales.big")
    lake.drop_table("sales.small")
    clock.advance(WEEK * 2)

    dry = vacuum(spark, lake, dry_run=True)
    assert dry.files == 2_403 and objects_under(big.location) and objects_under(small.location)
    assert not s3.deleted_keys()

    report = vacuum(spark, lake)
    assert sorted(i.id for i in report.purged) == sorted([big.id, small.id]) and report.files == 2_403
    assert objects_under(big.location) == [] and objects_under(small.location) == []
    assert objects_under(kept.location) == kept_objects
    purged = {e.data["table_id"]: e.data["files"] for e in lake.history(type="TablePurged")}
    assert purged == {big.id: 2_400, small.id: 3}
    # R20: a few DeleteObjects requests, not one request per object
    deletes = [r for r in s3.requests if DELETES(r.method, r.target)]
    assert len(s3.deleted_keys()) == 2_403 and len(deletes) <= 12 and all(len(r.keys) <= 1_000 for r in deletes)
    assert not [r for r in s3.requests if r.method == "DELETE"]


def test_r20_tables_the_ledger_knows_go_by_key_and_what_it_does_not_know_is_still_found(
        spark, lake: Ledger, clock, s3) -> None:
    """Dropped tables written through the ledger: their files go by key, without a listing of each;
    one listing of the warehouse's folders then finds the tables that still hold something (a
    ``_SUCCESS``, a file written outside the ledger), which are listed and emptied."""
    from spark_ops import vacuum
    kept = lake.create_table("sales.kept")
    kept_objects = put_table(kept.location, 2)
    tables = [lake.create_table(f"sales.t{i}") for i in range(4)]
    for i, t in enumerate(tables):
        _commit(lake, t.name, 5, marker=i < 2)  # tables 0 and 1 have Spark's _SUCCESS beside their files
    put(f"{tables[2].location}/written-outside.parquet", b"f" * 3)
    for t in tables:
        lake.drop_table(t.name)
    clock.advance(WEEK * 2)
    s3.clear()
    report = vacuum(spark, lake)
    seen = list(s3.requests)
    assert sorted(i.id for i in report.purged) == sorted(t.id for t in tables) and report.failures == []
    assert report.files == 4 * 5 + 2 + 1  # the named files, two _SUCCESS, the foreign one
    assert all(objects_under(t.location) == [] for t in tables)
    assert objects_under(kept.location) == kept_objects
    listed = {t.id for t in tables for r in seen if LISTINGS(r.method, r.target) and "delimiter" not in r.target
              and f"%2F{t.id}%2F" in r.target}
    assert listed == {tables[0].id, tables[1].id, tables[2].id}  # not the one the keyed deletes emptied


def test_r2_a_failed_watermark_append_deletes_nothing_in_the_bucket(spark, s3, tmp_path: Path, clock) -> None:
    from spark_ops import vacuum
    store = FaultyStore(tmp_path / "ledger.db")
    led = Ledger(store, warehouse=f"s3://lake/r2-{tmp_path.name}", clock=clock, actor="s3-tester")
    table = led.create_table("sales.orders")
    written = put_table(table.location, 5)
    led.drop_table("sales.orders")
    clock.advance(WEEK * 2)
    store.fail_with = LedgerUnavailable("disk full (injected)")
    before = led.event_count()
    with pytest.raises(LedgerUnavailable):
        vacuum(spark, led)
    assert objects_under(table.location) == written and led.event_count() == before and not s3.deleted_keys()
    led.close()


@pytest.mark.parametrize("location", [
    "s3://other/wh/t1",           # another bucket
    "s3://lake/wh-evil/t1",       # a key that only looks like the prefix
    "s3://lake/wh/../elsewhere",  # a path that climbs out
    "s3://lake/wh",               # the root itself
    "gs://lake/wh/t1",            # another store
])
def test_r9_a_purge_outside_the_warehouse_prefix_is_refused_and_touches_nothing(s3, location: str) -> None:
    victims = put_table("s3://other/wh/t1", 2) + put_table("s3://lake/wh-evil/t1", 2) + put_table("s3://lake/wh/t9", 1)
    outcome = fs.purge("s3://lake/wh", location, dry_run=False)
    assert outcome.error is not None and outcome.error.startswith("refused: "), outcome
    assert outcome.files == 0 and not s3.deleted_keys()
    assert objects_under("s3://other/wh") + objects_under("s3://lake/wh-evil") + objects_under("s3://lake/wh") \
        == sorted(victims[:2]) + sorted(victims[2:4]) + victims[4:]


def test_r9_r20_each_key_is_checked_before_it_joins_a_batch(s3) -> None:
    """A listing that names a key outside the location (a store gone wrong, a key crafted to look
    like the prefix): that key never reaches a DeleteObjects request, and the purge is not clean."""
    keys = put_table("s3://lake/wh9/t1", 3)
    victim = put("s3://lake/wh9/t1-evil/precious.parquet")
    s3.add_listed(victim)
    outcome = fs.purge("s3://lake/wh9", "s3://lake/wh9/t1", dry_run=False)
    assert outcome.error is not None and outcome.error.startswith("refused: ")
    assert "t1-evil/precious.parquet is not inside" in outcome.error and victim not in s3.deleted_keys()
    s3.clear()
    assert objects_under("s3://lake/wh9/t1-evil") == [victim]
    with pytest.raises(Unsafe), Deleter(storage_for("s3://lake")) as deleter:
        deleter.add([StoredFile(victim, 1)], Totals(), "wh9/t1")
    assert outcome.files <= 3 and set(keys) >= set(objects_under("s3://lake/wh9/t1"))


def test_r20_a_deleter_holds_at_most_two_batches_more_than_its_threads_delete(proxy, monkeypatch) -> None:
    """A lister ahead of the deletes (the driver reading the ledger's lists gives 1,000 keys in a
    millisecond or two, a DeleteObjects takes a request) waits for a batch to end. It let twice its
    threads' worth wait (16,000 keys), which a vacuum of 20,000 known files never filled and one of
    200,000 always did: the driver's heap grew with the files. Now it holds at most ``AHEAD``
    batches more than its threads delete (Python's own count: a batch held is its keys). The store
    is reached without the fault proxy, which runs in this process and keeps every request it sees."""
    from spark_ops.executor.storage import AHEAD, BATCH
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://{}:{}".format(*proxy.upstream))
    store = storage_for("s3://lake/ahead")
    pages = 6 * store.threads

    def page(n: int) -> list[FileEntry]:
        return [StoredFile(f"ahead/t/_writes/{n:032x}/part-{i:06d}.parquet", 1) for i in range(BATCH)]
    totals = Totals()
    with Deleter(store) as deleter:
        deleter.add(page(-1), totals, "ahead/t")  # the client made, the threads started
        deleter.finish()
        tracemalloc.start()
        try:
            one = page(-2)
            a_page = tracemalloc.get_traced_memory()[0]
            del one
            tracemalloc.reset_peak()
            for n in range(pages):
                deleter.add(page(n), totals, "ahead/t")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert totals.files == (pages + 1) * BATCH and totals.error is None
    held = store.threads + AHEAD + 1  # and the batch waiting to join them
    assert peak < (held + 2) * a_page, (peak / a_page, held)  # 12.1 here; 18.4 with twice the threads


# --- R20: faults on the wire ------------------------------------------------------------------

def test_r20_throttling_is_retried_until_every_object_is_gone(s3) -> None:
    keys = put_table("s3://lake/thr/t1", 1_500)
    s3.inject(Fault("status", times=4, status=503, code="SlowDown", match=DELETES))
    s3.inject(Fault("status", times=2, status=500, code="InternalError", match=LISTINGS))
    assert fs.purge("s3://lake/thr", "s3://lake/thr/t1", dry_run=False) == Result(None, files=1_500, bytes=15_000)
    assert objects_under("s3://lake/thr/t1") == [] and sorted(set(s3.deleted_keys())) == keys
    assert [r.status for r in s3.requests if r.fault == "status"] == [500, 500, 503, 503, 503, 503]


@pytest.mark.parametrize("fault", [
    Fault("reset", match=DELETES),                # the connection reset before the store saw it
    Fault("reset", forward=True, match=DELETES),  # done by the store, the answer lost
    Fault("delay", seconds=3, match=DELETES),     # past the client's time limit (here 1 s)
], ids=["reset", "reset-after-the-store-acted", "timeout"])
def test_r20_a_batch_whose_answer_is_lost_is_sent_again(s3, fault: Fault, monkeypatch) -> None:
    monkeypatch.setenv("RETENTION_LEDGER_STORE_TIMEOUT", "1")
    put_table("s3://lake/lost/t1", 10)
    s3.inject(fault)
    assert fs.purge("s3://lake/lost", "s3://lake/lost/t1", dry_run=False) == Result(None, files=10, bytes=100)
    assert objects_under("s3://lake/lost/t1") == []
    sent = [r.fault for r in s3.requests if DELETES(r.method, r.target)]
    assert fault.hits == 1 and None in sent, sent  # the fault hit one batch, and it was sent again


def test_r20_keys_a_batch_failed_are_sent_again_and_a_purge_is_recorded_only_when_none_is_left(
        spark, lake: Ledger, clock, s3) -> None:
    """DeleteObjects answers per key: the keys it failed stay, the batch is sent again; a key that
    keeps failing leaves the table blocked and unpurged, and the next vacuum finishes it."""
    from spark_ops import vacuum
    table = lake.create_table("sales.orders")
    keys = put_table(table.location, 30)
    lake.drop_table("sales.orders")
    clock.advance(WEEK * 2)
    s3.fail_keys(keys[:2], code="InternalError")
    report = vacuum(spark, lake)
    [failed] = report.failures
    assert failed.id == table.id and "could not be deleted" in failed.error and "InternalError" in failed.error
    assert objects_under(table.location) == keys[:2]  # the keys it failed, and only those, remain
    assert lake.instance(table.id).state == "blocked" and not list(lake.history(type="TablePurged"))

    s3.clear()
    clock.advance(timedelta(minutes=11))
    again = vacuum(spark, lake)
    assert [i.id for i in again.purged] == [table.id] and again.files == 2 and objects_under(table.location) == []
    assert [e.data["files"] for e in lake.history(type="TablePurged")] == [2]


def test_r20_a_batch_two_tables_share_fails_only_the_table_whose_keys_stayed(
        spark, lake: Ledger, clock, s3) -> None:
    """Small tables share DeleteObjects batches. When the store fails some keys of a shared batch,
    only the table holding them fails: the other, whose keys all went, is purged in the same run
    (after its own final listing finds nothing), not left for the next vacuum."""
    from spark_ops import vacuum
    kept, gone = lake.create_table("sales.kept"), lake.create_table("sales.gone")
    kept_keys, gone_keys = put_table(kept.location, 10), put_table(gone.location, 10)
    lake.drop_table("sales.kept")
    lake.drop_table("sales.gone")
    clock.advance(WEEK * 2)
    s3.fail_keys(kept_keys[:1], code="InternalError")
    report = vacuum(spark, lake)
    shared = [r.keys for r in s3.requests if DELETES(r.method, r.target)
              if set(r.keys) & set(kept_keys) and set(r.keys) & set(gone_keys)]
    assert shared, "the two tables' keys never shared a batch: the test shows nothing"
    assert [f.id for f in report.failures] == [kept.id] and objects_under(kept.location) == kept_keys[:1]
    assert [i.id for i in report.purged] == [gone.id] and objects_under(gone.location) == []
    assert [e.data["table_id"] for e in lake.history(type="TablePurged")] == [gone.id]


def test_r20_a_half_failed_batch_on_s3_leaves_exactly_the_deleted_keys_in_the_receipt(
        spark, lake: Ledger, clock, s3) -> None:
    """Receipts on an S3 API: a table the ledger knows the files of (deleted by key) and one written
    outside it (listed), in one run whose DeleteObjects batch half failed. The store reports the
    batch, not its keys, so the vacuum asks the store which are still there: the receipt holds
    exactly the keys that went, each provable; the two it failed are not, until the next run
    deletes them, and its receipt holds just those two. The parts' scratch objects are gone."""
    from ledger import NotDeleted
    from spark_ops import vacuum
    outside = lake.create_table("sales.orders")
    keys = put_table(outside.location, 30)
    lake.create_table("sales.known")
    write, named = _commit(lake, "sales.known", 3)
    known = named + [f"{write.folder[len('s3://lake/'):]}/_SUCCESS"]  # deleted by key, and found by listing
    lake.drop_table("sales.orders")
    lake.drop_table("sales.known")
    clock.advance(WEEK * 2)
    s3.fail_keys(keys[:2], code="InternalError")
    first = vacuum(spark, lake)
    assert [f.id for f in first.failures] == [outside.id] and objects_under(outside.location) == keys[:2]
    base = lake.warehouse[len("s3://lake/"):] + "/"
    receipt = lake.receipt(first.run_id)
    assert receipt.files == 28 + 4 and receipt.bytes == 28 * 10 + 3 * 5
    for key in keys[2:] + known:
        proof = lake.prove_deleted(f"s3://lake/{key}")
        assert proof.verify() and proof.key == key[len(base):] and proof.run_id == first.run_id
    for key in keys[:2]:
        with pytest.raises(NotDeleted):
            lake.prove_deleted(key[len(base):])

    s3.clear()
    clock.advance(timedelta(minutes=11))
    second = vacuum(spark, lake)
    assert [i.id for i in second.purged] == [outside.id]
    assert lake.receipt(second.run_id).files == 2
    assert {lake.prove_deleted(key[len(base):]).run_id for key in keys[:2]} == {second.run_id}
    assert objects_under(f"{lake.warehouse}/.retention-ledger") == []
    assert lake.verify().receipted == 30 + len(known)


# --- R10, R13, R15 on S3 -----------------------------------------------------------------------

_SLOW_VACUUM = r"""
import sys
from ledger import Ledger
from spark_ops.executor import fs
from vacuum_work import location
led = Ledger.open(sys.argv[1], actor="doomed-vacuum")
run = led.start_vacuum()
print("started", run.run_id, flush=True)
fs.purge_each(run.plan.root, [location(run.plan.root, t.path) for t in run.plan.purges])
print("finished", flush=True)
"""


def test_r10_a_vacuum_killed_between_batches_on_s3_is_finished_by_the_next(spark, s3, tmp_path: Path) -> None:
    """A vacuum process SIGKILLed between DeleteObjects batches leaves its tables blocked and half
    deleted; the next vacuum takes the dead run over, deletes the rest, and records each purge
    once, with what it deleted."""
    from spark_ops import vacuum
    path = tmp_path / "ledger.db"
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=30))
    with Ledger.open(path, warehouse=f"s3://lake/r10-{tmp_path.name}", clock=clock, actor="s3-tester") as led:
        tables = [led.create_table(f"sales.t{i}") for i in range(2)]
        for t in tables:
            put_table(t.location, 1_500, folders=3)
            led.drop_table(t.name)
    s3.inject(Fault("delay", times=100, seconds=0.5, match=DELETES, one_at_a_time=True))  # batches land 0.5 s apart
    child = subprocess.Popen([sys.executable, "-c", _SLOW_VACUUM, str(path)], stdout=subprocess.PIPE, text=True,
                             cwd=REPO, env={**os.environ, "RETENTION_LEDGER_DELETES_IN_FLIGHT": "1"})
    assert child.stdout is not None and child.stdout.readline().startswith("started")
    deadline = time.monotonic() + 60
    while not [r for r in s3.requests if DELETES(r.method, r.target) and r.status == 200] \
            and time.monotonic() < deadline:  # the first batch answered; the next waits its turn at the store
        time.sleep(0.01)
    child.kill()
    child.wait()
    time.sleep(1.0)  # a batch it had sent is still done by the store (the proxy forwards it)
    left = sum(len(objects_under(t.location)) for t in tables)
    assert 0 < left < 3_000 and left % 1_000 == 0, left  # killed between batches

    s3.clear()
    clock.set(datetime.now(timezone.utc) + timedelta(days=1))  # the dead run's lease has run out
    with Ledger.open(path, clock=clock, actor="s3-tester") as led:
        report = vacuum(spark, led)
        assert report.resumed_runs and sorted(i.id for i in report.purged) == sorted(t.id for t in tables)
        assert report.files == left
        assert all(objects_under(t.location) == [] for t in tables)
        purged = [e.data["table_id"] for e in led.history(type="TablePurged")]
        assert sorted(purged) == sorted(t.id for t in tables)


def _commit(led: Ledger, name: str, files: int, *, mode: str = "append",
            marker: bool = True) -> tuple[object, list[str]]:
    """A write's objects put by hand (Spark's ``_SUCCESS`` marker too, unless not ``marker``), committed."""
    w = led.begin_write(name)
    if marker:
        put(f"{w.folder}/_SUCCESS", b"")
    keys = [put(f"{w.folder}/part-{i}.parquet", b"v" * 5) for i in range(files)]
    led.commit_write(w.id, [(f"{w.relative_folder}/part-{i}.parquet", 5) for i in range(files)], mode=mode)
    return w, keys

def _die_after_deleting(led: Ledger, keys: list[str]) -> str:
    """A run started that deleted ``keys`` (as its tasks do: in a batch, each written down in its
    receipt, whose part its driver recorded), then died: its lease runs out, it never finishes."""
    from spark_ops.executor import receipts
    dead = led.start_vacuum()
    root = dead.plan.root
    store = storage_for(root)
    receipt = receipts.DeletionLog(store, dead.run_id)
    with Deleter(store, receipt) as deleter:
        deleter.add([StoredFile(key, 5) for key in keys], Totals(), store.base)
    parts = receipt.close()
    dead.record_deleted([(part, receipts.read_part(root, part.where)) for part in parts])
    receipts.clear(root, dead.run_id, [part.where for part in parts])
    return dead.run_id


def test_r10_r20_a_run_taking_over_on_s3_counts_and_receipts_only_what_it_deleted(
        spark, lake: Ledger, clock, s3) -> None:
    """A run died having deleted some of the files the ledger knows of a dropped table and of an
    expired version. The next takes it over: it used to delete the ledger's whole lists again by key,
    which S3 answers "deleted" for keys already gone, so it counted them (TablePurged, the expiry's
    WriteFoldersDeleted) and put them in its receipt too, and prove_deleted named it, not the run that
    deleted them. Now what a stopped run had is listed: each run counts and receipts only its own."""
    from spark_ops import vacuum
    dropped = lake.create_table("sales.dropped")
    _, dropped_keys = _commit(lake, "sales.dropped", 6, marker=False)
    lake.create_table("sales.orders")
    old, old_keys = _commit(lake, "sales.orders", 4, marker=False)
    _commit(lake, "sales.orders", 1, mode="overwrite", marker=False)
    lake.drop_table("sales.dropped")
    clock.advance(WEEK * 2)
    gone = dropped_keys[:4] + old_keys[:3]
    dead = _die_after_deleting(lake, gone)
    clock.advance(timedelta(minutes=11))  # its lease ran out

    report = vacuum(spark, lake)
    assert report.resumed_runs == (dead,) and report.failures == []
    assert [i.id for i in report.purged] == [dropped.id] and objects_under(dropped.location) == []
    assert objects_under(old.folder) == []
    assert (report.files, report.bytes) == (3, 15)  # two of the dropped table's, one of the old version's
    assert [(e.data["files"], e.data["bytes"]) for e in lake.history(type="TablePurged")] == [(2, 10)]
    assert [(e.data["files"], e.data["bytes"]) for e in lake.history(type="WriteFoldersDeleted")] == [(1, 5)]
    assert lake.receipt(report.run_id).files == 3
    for key in dropped_keys + old_keys:  # each in one receipt: the run that deleted it
        assert lake.prove_deleted(f"s3://lake/{key}").run_id == (dead if key in gone else report.run_id), key



def test_r13_r20_an_expired_versions_files_are_deleted_by_key_without_listing_them(
        spark, lake: Ledger, clock, s3) -> None:
    from spark_ops import vacuum
    lake.create_table("sales.orders")
    old, old_keys = _commit(lake, "sales.orders", 1_200)
    clock.advance(timedelta(hours=1))
    current, current_keys = _commit(lake, "sales.orders", 3, mode="overwrite")
    clock.advance(WEEK + timedelta(hours=1))
    s3.clear()

    report = vacuum(spark, lake)
    seen = list(s3.requests)  # the vacuum's requests (the checks below list too)
    [expiry] = report.expired
    assert expiry.ok and expiry.versions == (1,) and expiry.files == 1_201  # its files and its _SUCCESS
    assert objects_under(old.folder) == []
    assert objects_under(current.folder) == sorted(current_keys)  # (its _SUCCESS went as a straggler)
    # the 1,200 named files went by key in two batches; only what the ledger could not know was listed
    deletes = [(i, r) for i, r in enumerate(seen) if DELETES(r.method, r.target) and old.id in r.keys[0]]
    assert sorted(k for _, r in deletes[:2] for k in r.keys) == sorted(old_keys)
    old_listings = [i for i, r in enumerate(seen)  # answered: moto may fail a listing that meets a delete
                    if LISTINGS(r.method, r.target) and old.id in r.target and r.status == 200]
    first_delete = deletes[0][0]
    assert len(old_listings) == 1 and old_listings[0] > first_delete  # after the keyed deletes: it found _SUCCESS


def test_r15_an_abandoned_write_on_s3_is_swept(spark, lake: Ledger, clock, s3) -> None:
    from spark_ops import vacuum
    lake.create_table("sales.orders")
    w = lake.begin_write("sales.orders", lease="1h")
    put(f"{w.folder}/part-0.parquet", b"x" * 3)
    put(f"{w.folder}/part-1.parquet", b"x" * 4)
    clock.advance(timedelta(hours=2))
    report = vacuum(spark, lake)
    [swept] = report.swept
    assert swept.ok and (swept.files, swept.bytes) == (2, 7) and objects_under(w.folder) == []
    assert lake.open_writes() == [] and [e.type for e in lake.history(type="WriteFoldersDeleted")] == \
        ["WriteFoldersDeleted"]


def test_r15_a_late_file_in_a_swept_folder_on_s3_is_found_by_a_fresh_look_and_not_recorded_gone(
        spark, lake: Ledger, clock, s3) -> None:
    """A zombie task of an abandoned write puts a file into its folder while the vacuum lists it (the
    listing's answer is already on its way, without it). The swept folder used to be recorded deleted
    on that one listing, with the late file still there; now a folder the ledger knows no files of
    is looked at afresh once emptied: the sweep fails, nothing is recorded deleted, and the next
    vacuum deletes the late file and records the folder."""
    from spark_ops import vacuum
    from spark_ops.executor import tasks
    lake.create_table("sales.orders")
    w = lake.begin_write("sales.orders", lease="1h")
    put(f"{w.folder}/part-0.parquet", b"x" * 3)
    clock.advance(timedelta(hours=2))
    run = lake.start_vacuum()
    assert [f.write_id for sw in run.plan.sweeps for f in sw.folders] == [w.id]
    late = f"{w.folder}/part-1.parquet"
    upstream = _client("http://{}:{}".format(*s3.upstream))
    bucket, _, late_key = late[len("s3://"):].partition("/")
    s3.inject(Fault("meanwhile", match=lambda method, target: LISTINGS(method, target) and w.id in target,
                    meanwhile=lambda: upstream.put_object(Bucket=bucket, Key=late_key, Body=b"z" * 4)))
    results = list(tasks.run_items(tasks.Job(run.plan.root, run.run_id), run.plan.items(), files=run.files))
    [swept] = [r for r in results if r.item is not None]
    assert swept.files == 1 and swept.error is not None and "remain" in swept.error, swept
    run.finish(results)
    assert objects_under(w.folder) == [late_key]
    assert len(lake.history(type="WriteFoldersDeleted")) == 0

    s3.clear()
    report = vacuum(spark, lake)
    [again] = report.swept
    assert again.ok and (again.files, again.bytes) == (1, 4) and objects_under(w.folder) == []
    assert len(lake.history(type="WriteFoldersDeleted")) == 1


def test_r15_stragglers_on_s3_are_swept_by_the_stores_own_age(spark, lake: Ledger, clock, s3) -> None:
    """A late task's object in a committed write's folder, that the version does not name, goes once
    it is older than the grace period by the store's LastModified against the ledger's clock; the
    named objects stay. (Before: every vacuum refused it and reported a failure, for ever.)"""
    from spark_ops import vacuum
    lake.create_table("sales.orders")
    w = lake.begin_write("sales.orders")
    named = [put(f"{w.folder}/part-{i}.parquet", b"x" * 7) for i in range(2)]
    put(f"{w.folder}/late-task.parquet", b"x" * 7)
    lake.commit_write(w.id, [(f"{w.relative_folder}/part-{i}.parquet", 7) for i in range(2)])
    young = vacuum(spark, lake)  # within the grace period: nothing goes, nothing fails
    assert young.failures == [] and young.stragglers == ()

    clock.advance(timedelta(hours=7))
    report = vacuum(spark, lake)
    [cleaned] = report.stragglers
    assert cleaned.ok and (cleaned.files, cleaned.bytes, cleaned.left) == (1, 7, 0) and report.failures == []
    assert objects_under(w.folder) == sorted(named)
    assert [e.type for e in lake.history(type="StragglersDeleted")] == ["StragglersDeleted"]
    assert vacuum(spark, lake).failures == []  # and the next vacuum is clean too


def test_r15_r20_a_straggler_scan_the_store_will_not_list_is_reported_and_the_vacuum_goes_on(
        spark, lake: Ledger, clock, s3) -> None:
    """A committed write's folder whose listing the store keeps failing: its straggler scan reports
    why and deletes nothing, and the rest of the run is recorded. (Before: the scan caught only the
    disk's errors; the store's escaped it and failed the whole vacuum.)"""
    from spark_ops import vacuum
    lake.create_table("sales.orders")
    w = lake.begin_write("sales.orders")
    named = [put(f"{w.folder}/part-{i}.parquet", b"x" * 7) for i in range(2)]
    late = put(f"{w.folder}/late-task.parquet", b"x" * 7)
    lake.commit_write(w.id, [(f"{w.relative_folder}/part-{i}.parquet", 7) for i in range(2)])
    gone = lake.create_table("sales.gone")
    put_table(gone.location, 3)
    lake.drop_table("sales.gone")
    clock.advance(WEEK * 2)
    s3.inject(Fault("status", times=1_000, status=500, code="InternalError",
                    match=lambda method, target: LISTINGS(method, target) and w.id in target))
    report = vacuum(spark, lake)
    [cleaned] = report.stragglers
    assert cleaned.error is not None and "InternalError" in cleaned.error and cleaned.files == 0
    assert [i.id for i in report.purged] == [gone.id] and objects_under(gone.location) == []
    s3.clear()
    assert objects_under(w.folder) == sorted(named + [late])
    assert not list(lake.history(type="StragglersDeleted"))


@pytest.mark.parametrize("path, victim", [
    ("../other/wh/t1", "s3://lake/other/wh/t1/_writes/w1/late.parquet"),  # out of the warehouse's prefix
    ("s3://other/wh/t1", "s3://other/wh/t1/_writes/w1/late.parquet"),     # another bucket, spelt whole
], ids=["climbs-out", "another-bucket"])
def test_r9_a_straggler_scan_outside_the_warehouse_is_refused_and_touches_nothing(s3, path: str, victim: str) -> None:
    """A straggler item whose table lies outside the warehouse (a plan gone wrong: its path, which
    is relative to the root, climbs out of it or names another bucket): the executor's re-check
    refuses it and says so in its result. (Before: the object store's refusal escaped the scan,
    which caught only the disk's, and failed the task.)"""
    from spark_ops.executor import tasks
    from vacuum_work import Folder, StragglerScan
    key = put(victim)
    item = StragglerScan("t1", "sales.t1", path, Folder("w1", "_writes/w1"), int((time.time() + 3_600) * 1e6),
                         named=frozenset())
    outcome, closing = tasks.run_items(tasks.Job("s3://lake/wh", run_id="r9-scan"), [item])
    assert outcome.item == item and outcome.error is not None and outcome.error.startswith("refused: ")
    assert outcome.files == 0 and closing.item is None and closing.parts == ()  # nothing deleted, nothing receipted
    assert not s3.deleted_keys() and key in objects_under(victim.rsplit("/", 1)[0])


# --- tables by name in Spark SQL ---------------------------------------------------------------

def test_r21_attach_on_a_warehouse_spark_has_no_file_system_for_says_so_and_records_nothing(
        spark, lake: Ledger, clock, s3) -> None:
    """Spark here has no s3a connector (no Maven): ``attach`` says so in one line, as a read does,
    before it pins anything or names anything; the views it would put name exactly the keys the
    version lists, under the bucket's own URI (no credential in them: those stay in the
    environment)."""
    from spark_ops import SparkUnavailable, attach
    from spark_ops.catalog.text import files_relation
    table = lake.create_table("lake_sql.orders")
    _, keys = _commit(lake, table.name, 3, marker=False)
    events = lake.event_count()
    with pytest.raises(SparkUnavailable, match="no file system for the warehouse s3://lake/"):
        attach(spark, lake)
    assert lake.event_count() == events and lake.pins() == []
    assert not spark.catalog.databaseExists("lake_sql")
    relation = files_relation(table.location, [f.path for f in lake.version(table.name).files])
    bucket_uri = table.location.split("/wh-")[0]
    named = relation[len("parquet.`"):-1]
    assert named.startswith(table.location + "/{") and named.endswith("}")
    assert sorted(f"{bucket_uri}/" + k for k in keys) == sorted(
        f"{table.location}/{p}" for p in named[len(table.location) + 2:-1].split(","))
    assert "AWS" not in relation and "secret" not in relation.lower()


# --- a table the ledger does not know the files of: one listing per location (R20) ------------

def test_r20_a_dropped_table_written_outside_the_ledger_is_listed_once_and_deleted_in_batches(
        spark, lake: Ledger, clock, s3) -> None:
    """A table made with ``create_table`` and filled by a pipeline's own job, in 25 partition
    folders: its purge lists the location with one streamed listing (pages of 1,000 keys, deleted
    in batches as they arrive) and proves it empty with one more, where split below the table it
    listed each folder twice. Nothing outside it is touched."""
    from spark_ops import vacuum
    table = lake.create_table("sales.outside")
    for day in range(25):
        for part in range(100):
            put(f"{table.location}/day={day:03d}/part-{part:05d}.parquet", b"p" * 7)
    kept = lake.create_table("sales.kept")
    kept_objects = put_table(kept.location, 3)
    lake.drop_table("sales.outside")
    clock.advance(WEEK * 2)
    s3.clear()
    report = vacuum(spark, lake)
    seen = list(s3.requests)
    assert [i.id for i in report.purged] == [table.id] and report.files == 2_500 and report.bytes == 2_500 * 7
    assert objects_under(table.location) == [] and objects_under(kept.location) == kept_objects
    # The listings the store answered: a page the store failed (moto answers 500 now and then when
    # a listing walks the bucket while a delete batch changes it) is asked again by the client.
    mine = [r for r in seen if LISTINGS(r.method, r.target) and f"%2F{table.id}" in r.target and r.status == 200]
    said = "\n".join(f"{r.status} {r.target}" for r in seen if LISTINGS(r.method, r.target))
    assert not [r for r in mine if "delimiter" in r.target], said  # no folder is listed apart
    assert len(mine) == 3 + 1, said  # three pages of 1,000, and the listing that proves it empty
    deletes = [r for r in seen if DELETES(r.method, r.target) and not all(map(scratch, r.keys))]
    assert len(deletes) == 3 and sorted(len(r.keys) for r in deletes) == [500, 1_000, 1_000]


@pytest.mark.classic_only
def test_r20_a_few_locations_written_outside_the_ledger_are_purged_by_the_driver_without_a_spark_job(
        spark, lake: Ledger, clock, s3, monkeypatch) -> None:
    """Classic only: the executors' endpoint is the session's to change here (a Connect server's
    executors take theirs from its environment); the test above purges on both kinds.

    Issue 48: a dropped table written outside the ledger went to a Spark job, whose one task listed
    the location as one chain of pages, as the driver does, at a job's cost. Now the driver purges
    a few such locations itself, several at once: here the
    executors' endpoint leads nowhere, and each purge is whole, in the receipt and recorded."""
    from spark_ops import vacuum
    tables = [lake.create_table(f"sales.outside{i}") for i in range(3)]
    for t in tables:
        for day in range(4):
            for part in range(5):
                put(f"{t.location}/day={day:03d}/part-{part:05d}.parquet", b"p" * 7)
        lake.drop_table(t.name)
    clock.advance(WEEK * 2)
    monkeypatch.setitem(spark.sparkContext.environment, "AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    s3.clear()
    report = vacuum(spark, lake)
    assert report.failures == [] and sorted(i.id for i in report.purged) == sorted(t.id for t in tables)
    assert report.files == 3 * 20 and all(objects_under(t.location) == [] for t in tables)
    assert lake.receipt(report.run_id).files == 3 * 20
    assert len([r for r in s3.requests if DELETES(r.method, r.target) and not all(map(scratch, r.keys))]) == 1


# --- the driver's memory on a store (R20) --------------------------------------------------------

def _dropped_known_table(led: Ledger, name: str, files: int, per_write: int = 10_000) -> None:
    """A dropped table whose files the ledger knows, ``per_write`` a commit. Their objects are never
    put: a key that is not there deletes as a key that is (DeleteObjects answers both "deleted"), so
    the ledger can know 200,000 without 200,000 puts."""
    led.create_table(name)
    for start in range(0, files, per_write):
        w = led.begin_write(name)
        led.commit_write(w.id, [(f"{w.relative_folder}/part-{i:06d}.parquet", 100)
                                for i in range(start, min(files, start + per_write))])
    led.drop_table(name)


def test_r20_the_drivers_heap_over_a_vacuum_of_known_files_on_s3_does_not_grow_with_them(
        spark, proxy: FaultProxy, tmp_path: Path, clock: ManualClock, monkeypatch) -> None:
    """On a store the driver deletes what the ledger knows itself, by key (R20). It loaded every file
    list the plan named into its memory and broadcast them: its heap grew with the files. Now each
    list is read as its keys go, so a vacuum of 200,000 known files peaks within 1.5x of one of
    20,000 (Python's own count of what it allocated). It still grew, to 1.53x in a fresh clone
    ({20000: 10.7 MB, 200000: 16.4 MB}): each list was parsed whole (orjson's parse tree, 10 MB for
    10,000 files), a receipt part was sealed with two more copies of its leaves, and 16 batches
    could wait for the deleting threads, which 20,000 files never filled and 200,000 always did. Now
    a list is parsed a chunk at a time, a part is hashed as it is encoded, and two batches wait beyond
    the threads: about 6 MB at either size. The store is reached without the fault proxy, which runs
    in this process and keeps every request it sees."""
    from spark_ops import vacuum
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://{}:{}".format(*proxy.upstream))
    peaks = {}
    for files in (20_000, 200_000):
        with Ledger.open(tmp_path / f"heap-{files}.db", warehouse=f"s3://lake/heap-{files}-{tmp_path.name}",
                         clock=clock) as led:
            _dropped_known_table(led, "sales.known", files)
            clock.advance(WEEK * 2)
            tracemalloc.start()
            try:
                report = vacuum(spark, led)
                peaks[files] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert report.failures == [] and report.files == files == led.receipt(report.run_id).files
    assert peaks[200_000] <= 1.5 * peaks[20_000], peaks
