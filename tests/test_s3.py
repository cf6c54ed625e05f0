"""The vacuum on an object store, for real: a local S3-compatible server (``moto``'s server
mode, started here on 127.0.0.1), reached through pyarrow's S3 filesystem.

Spark here has no s3a connector, so the tables' objects are written with pyarrow (Parquet
files, as a Spark job would leave them); the vacuum itself runs on Spark, whose Python
workers delete through pyarrow. The endpoint reaches them as ``AWS_ENDPOINT_URL``, set for
the executors the way a deployment sets ``spark.executorEnv.*``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import pytest

from ledger import Ledger, LedgerUnavailable, ManualClock
from spark_ops import fs
from tests.conftest import T0
from tests.stores import FaultyStore

pytestmark = pytest.mark.spark
pafs = pytest.importorskip("pyarrow.fs")
pq = pytest.importorskip("pyarrow.parquet")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("moto")

WEEK = timedelta(days=7)
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3(spark) -> Iterator[str]:
    """A moto S3 server on the loopback address, with buckets ``lake`` and ``other``; stopped at the end."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("the moto S3 server did not start")
            time.sleep(0.1)
    settings = {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    spark.sparkContext.environment.update(settings)  # the executors' Python workers
    store = pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http", allow_bucket_creation=True)
    for bucket in ("lake", "other"):
        store.create_dir(bucket)
    try:
        yield endpoint
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
            spark.sparkContext.environment.pop(key, None)
        server.terminate()
        server.wait(timeout=30)


def objects(prefix: str) -> list[str]:
    store, path = fs.filesystem(prefix)
    return sorted(i.path for i in store.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
                  if i.type == pafs.FileType.File)


def put(path: str, data: bytes) -> None:
    """One object, ``bucket/key``, in a single PUT. (pyarrow's output streams use multipart
    uploads, whose completion moto's server rejects; a single PUT is what small files get.)"""
    import boto3
    bucket, _, key = path.partition("/")
    boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).put_object(Bucket=bucket, Key=key, Body=data)


def put_table(location: str, files: int, *, folders: int = 1) -> list[str]:
    """Parquet objects at a table's location, as a job writes them (in write folders if several)."""
    _, path = fs.filesystem(location)
    written = []
    for f in range(files):
        sub = f"/_writes/w{f % folders}" if folders > 1 else ""
        key = f"{path}{sub}/part-{f:03d}.parquet"
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table({"id": [f]}), sink)
        put(key, sink.getvalue().to_pybytes())
        written.append(key)
    return written


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def lake(s3: str, tmp_path: Path, clock: ManualClock) -> Iterator[Ledger]:
    prefix = f"s3://lake/wh-{tmp_path.name}"
    with Ledger.open(tmp_path / "ledger.db", warehouse=prefix, clock=clock, actor="s3-tester") as led:
        yield led


def test_r2_r9_a_table_on_s3_is_written_dropped_vacuumed_and_gone(spark, lake: Ledger, clock: ManualClock) -> None:
    from spark_ops import vacuum
    big = lake.create_table("sales.big")
    small = lake.create_table("sales.small")
    kept = lake.create_table("sales.kept")
    put_table(big.location, 24, folders=6)
    put_table(small.location, 3)
    kept_objects = put_table(kept.location, 2)
    lake.drop_table("sales.big")
    lake.drop_table("sales.small")
    clock.advance(WEEK * 2)

    dry = vacuum(spark, lake, dry_run=True)
    assert dry.files == 27 and objects(big.location) and objects(small.location)

    report = vacuum(spark, lake)
    assert sorted(i.id for i in report.purged) == sorted([big.id, small.id]) and report.files == 27
    assert objects(big.location) == [] and objects(small.location) == []
    assert objects(kept.location) == kept_objects
    purged = {e.data["table_id"]: e.data["files"] for e in lake.history(type="TablePurged")}
    assert purged == {big.id: 24, small.id: 3}


def test_r2_a_failed_watermark_append_deletes_nothing_in_the_bucket(spark, s3: str, tmp_path: Path,
                                                                   clock: ManualClock) -> None:
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
    assert objects(table.location) == written and led.event_count() == before
    led.close()


@pytest.mark.parametrize("location", [
    "s3://other/wh/t1",          # another bucket
    "s3://lake/wh-evil/t1",      # a key that only looks like the prefix
    "s3://lake/wh/../elsewhere",  # a path that climbs out
    "s3://lake/wh",              # the root itself
])
def test_r9_a_purge_outside_the_warehouse_prefix_is_refused_and_touches_nothing(s3: str, location: str) -> None:
    victims = put_table("s3://other/wh/t1", 2) + put_table("s3://lake/wh-evil/t1", 2) + put_table("s3://lake/wh/t9", 1)
    outcome = fs.purge("s3://lake/wh", location, dry_run=False)
    assert outcome.error is not None and outcome.error.startswith("refused: "), outcome
    assert outcome.files == 0
    store, _ = fs.filesystem("s3://lake")
    assert all(store.get_file_info(v).type == pafs.FileType.File for v in victims)


class _Flaky(pafs.FileSystemHandler):
    """The real S3 filesystem, but each delete fails ``failures`` times first (a throttled store),
    or each delete also writes a new object beside it (a writer racing the purge)."""

    def __init__(self, inner: Any, *, failures: int = 0, racing: bool = False, delay: float = 0.0) -> None:
        self.inner, self.failures, self.racing, self.delay = inner, failures, racing, delay
        self.attempts: dict[str, int] = {}

    def delete_file(self, path: str) -> None:
        time.sleep(self.delay)
        self.attempts[path] = self.attempts.get(path, 0) + 1
        if self.attempts[path] <= self.failures:
            raise OSError(f"AWS Error SLOW_DOWN during DeleteObject operation: Please reduce your request rate ({path})")
        self.inner.delete_file(path)
        if self.racing and not path.endswith("-late.parquet"):
            put(path.replace(".parquet", "-late.parquet"), b"late")

    # everything else as the real store does it
    def get_type_name(self) -> str: return "flaky"
    def normalize_path(self, path: str) -> str: return self.inner.normalize_path(path)
    def get_file_info(self, paths: Any) -> Any: return self.inner.get_file_info(paths)
    def get_file_info_selector(self, selector: Any) -> Any: return self.inner.get_file_info(selector)
    def create_dir(self, path: str, recursive: bool) -> None: self.inner.create_dir(path, recursive=recursive)
    def delete_dir(self, path: str) -> None: self.inner.delete_dir(path)
    def delete_dir_contents(self, path: str, missing_dir_ok: bool) -> None:
        self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)
    def delete_root_dir_contents(self) -> None: raise NotImplementedError
    def move(self, src: str, dest: str) -> None: self.inner.move(src, dest)
    def copy_file(self, src: str, dest: str) -> None: self.inner.copy_file(src, dest)
    def open_input_stream(self, path: str) -> Any: return self.inner.open_input_stream(path)
    def open_input_file(self, path: str) -> Any: return self.inner.open_input_file(path)
    def open_output_stream(self, path: str, metadata: Any) -> Any: return self.inner.open_output_stream(path)
    def open_append_stream(self, path: str, metadata: Any) -> Any: return self.inner.open_append_stream(path)


def test_throttled_deletes_are_retried_until_every_object_is_gone(s3: str) -> None:
    keys = put_table("s3://lake/retry/t1", 6)
    real, _ = fs.filesystem("s3://lake")
    flaky = _Flaky(real, failures=2)
    store = pafs.PyFileSystem(flaky)
    with fs.Deleter(lambda e: e.size if fs.delete_remote(store, e.path) else None, "lake/retry/t1/") as deleter:
        for key in keys:
            deleter.add(fs.FileEntry(key, 1))
        assert deleter.finish() == (6, 6)
    assert all(flaky.attempts[k] == 3 for k in keys)
    assert objects("s3://lake/retry/t1") == []


def test_a_purge_is_only_clean_when_every_object_is_gone(s3: str) -> None:
    """A writer racing the purge leaves objects behind: the outcome says so (and the vacuum then
    records no purge: the table stays blocked for the next run)."""
    put_table("s3://lake/race/t1", 4)
    real, _ = fs.filesystem("s3://lake")
    outcome = fs.purge_with(pafs.PyFileSystem(_Flaky(real, racing=True)), "lake/race", "lake/race/t1")
    assert outcome.error is not None and "remain" in outcome.error
    assert len(objects("s3://lake/race/t1")) == 4  # the late ones


_SLOW_VACUUM = r"""
import sys
from pyarrow import fs as pafs
from ledger import Ledger
from spark_ops import fs
from tests.test_s3 import _Flaky
led = Ledger.open(sys.argv[1], actor="doomed-vacuum")
order = led.start_vacuum()
print("started", order.run_id, flush=True)
real, _ = fs.filesystem("s3://lake")
slow = pafs.PyFileSystem(_Flaky(real, delay=0.05))
for target in order.targets:
    _, path = fs.filesystem(target.location)
    fs.purge_with(slow, path.rsplit("/", 1)[0], path)
print("finished", flush=True)
"""


def test_r10_a_vacuum_killed_mid_delete_on_s3_is_finished_by_the_next(spark, s3: str, tmp_path: Path) -> None:
    """A vacuum process SIGKILLed while it deletes objects leaves its tables blocked and half
    deleted; the next vacuum takes the dead run over, deletes the rest, and records each purge
    once, with what it deleted."""
    from datetime import datetime, timezone

    from spark_ops import vacuum
    path = tmp_path / "ledger.db"
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=30))
    with Ledger.open(path, warehouse=f"s3://lake/r10-{tmp_path.name}", clock=clock, actor="s3-tester") as led:
        tables = [led.create_table(f"sales.t{i}") for i in range(2)]
        for t in tables:
            put_table(t.location, 40)
            led.drop_table(t.name)
    child = subprocess.Popen([sys.executable, "-c", _SLOW_VACUUM, str(path)], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).parent.parent, env=dict(os.environ))
    assert child.stdout is not None and child.stdout.readline().startswith("started")
    deadline = time.monotonic() + 60
    while sum(len(objects(t.location)) for t in tables) > 70 and time.monotonic() < deadline:
        time.sleep(0.02)
    child.kill()
    child.wait()
    left = sum(len(objects(t.location)) for t in tables)
    assert 0 < left < 80, left  # killed mid-delete

    clock.set(datetime.now(timezone.utc) + timedelta(days=1))  # the dead run's lease has run out
    with Ledger.open(path, clock=clock, actor="s3-tester") as led:
        report = vacuum(spark, led)
        assert report.resumed_runs and sorted(i.id for i in report.purged) == sorted(t.id for t in tables)
        assert report.files == left
        assert all(objects(t.location) == [] for t in tables)
        purged = [e.data["table_id"] for e in led.history(type="TablePurged")]
        assert sorted(purged) == sorted(t.id for t in tables)


def test_r15_stragglers_on_s3_are_swept_by_the_stores_own_age(spark, s3: str, tmp_path: Path) -> None:
    """A late task's object in a committed write's folder, that the version does not name, goes once
    it is older than the grace period by the store's LastModified against the ledger's clock; the
    named objects stay. (Before: every vacuum refused it and reported a failure, for ever.)"""
    from datetime import datetime, timezone

    from spark_ops import vacuum
    clock = ManualClock(datetime.now(timezone.utc))
    with Ledger.open(tmp_path / "ledger.db", warehouse=f"s3://lake/r15-{tmp_path.name}", clock=clock,
                     actor="s3-tester") as led:
        led.create_table("sales.orders")
        w = led.begin_write("sales.orders")
        _, folder = fs.filesystem(w.folder)
        for name in ("part-0.parquet", "part-1.parquet", "late-task.parquet"):
            put(f"{folder}/{name}", b"x" * 7)
        led.commit_write(w.id, [(f"{w.relative_folder}/part-{i}.parquet", 7) for i in range(2)])
        young = vacuum(spark, led)  # within the grace period: nothing goes, nothing fails
        assert young.failures == [] and young.stragglers == ()

        clock.advance(timedelta(hours=7))
        report = vacuum(spark, led)
        [cleaned] = report.stragglers
        assert cleaned.ok and (cleaned.files, cleaned.bytes, cleaned.left) == (1, 7, 0) and report.failures == []
        assert objects(w.folder) == [f"{folder}/part-0.parquet", f"{folder}/part-1.parquet"]
        assert [e.type for e in led.history(type="StragglersDeleted")] == ["StragglersDeleted"]
        assert vacuum(spark, led).failures == []  # and the next vacuum is clean too
