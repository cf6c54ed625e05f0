"""R21 on Spark: readers hold what they read. ``read_table`` pins the version it resolved,
``reading`` holds (and renews) its pin for a block and releases it after, and a vacuum, in this
process or in another one, never expires a version a reader holds.

Every test that takes ``spark`` runs on a classic session and on a Spark Connect one (R24).

Real components only: the session's local SparkSession and the tests' Spark Connect server, ledgers
on real SQLite files, real Parquet files, and for the last test a second real process (its own
SparkSession) on the same ledger file and warehouse.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger, TableDataMissing, VersionExpired
from ledger.clock import iso_utc
from spark_ops import READ_PIN_LEASE, read_table, reading, vacuum, write_table
from tests.conftest import T0

pytestmark = pytest.mark.spark
BOTH_SESSIONS = True

REPO = Path(__file__).resolve().parent.parent
TABLE = "sales.orders"
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
WEEK = timedelta(days=7)


def frame(spark, start: int, count: int, tag: str = "x", parts: int = 1):
    return spark.createDataFrame([(i, f"{tag}-{i}") for i in range(start, start + count)],
                                 "id long, label string").repartition(parts)


def ids(rows) -> list[int]:
    return sorted(r["id"] for r in rows)


def files_of(led: Ledger, name: str, number: int) -> list[Path]:
    """The files version ``number`` of ``name`` names, on disk."""
    location = led.table(name).location
    version = next(v for v in led.versions(name) if v.number == number)
    return [Path(location, f.path) for f in version.files]


def within_a_lease(pin, lease: timedelta) -> bool:
    """The pin ends one lease after it was taken: its end is computed from the decision's now, and
    the event is timed by the store at or a few microseconds after it (never before the last)."""
    return lease - timedelta(milliseconds=1) <= pin.expires_at - pin.taken_at <= lease


def events(led: Ledger, kind: str, pin_id: str | None = None) -> list[Any]:
    return [e for e in led.history(type=kind) if pin_id is None or e.data.get("pin_id") == pin_id]


# --- read_table and reading: what they pin, and when it ends ---------------------------------

def test_r21_read_table_pins_the_version_it_read_for_the_default_lease_and_pin_false_takes_none(
        spark, ledger, clock) -> None:
    write_table(frame(spark, 0, 10), ledger, TABLE)
    clock.advance(HOUR)
    write_table(frame(spark, 100, 5), ledger, TABLE, mode="overwrite")
    assert ledger.pins() == []

    current = read_table(spark, ledger, TABLE)
    [pin] = ledger.pins(TABLE)
    assert (pin.table, pin.version, pin.live, pin.released_at) == (TABLE, 2, True, None)
    assert pin.lease == READ_PIN_LEASE == HOUR
    assert within_a_lease(pin, READ_PIN_LEASE)
    assert ids(current.collect()) == list(range(100, 105))

    old = read_table(spark, ledger, TABLE, version=1, lease="5m")
    assert ids(old.collect()) == list(range(10))
    by_version = {p.version: p for p in ledger.pins(TABLE)}
    assert set(by_version) == {1, 2}
    assert by_version[1].lease == timedelta(minutes=5)
    assert within_a_lease(by_version[1], timedelta(minutes=5))

    at = read_table(spark, ledger, TABLE, as_of=T0 + HOUR / 2)  # the version current then
    assert ids(at.collect()) == list(range(10))
    assert sorted(p.version for p in ledger.pins(TABLE)) == [1, 1, 2]
    assert ledger.pins(TABLE)[0].id == by_version[1].id  # the 5-minute pin ends first

    taken = len(events(ledger, "PinTaken"))
    unpinned = read_table(spark, ledger, TABLE, version=1, pin=False)
    assert ids(unpinned.collect()) == list(range(10))
    assert len(events(ledger, "PinTaken")) == taken == 3
    assert len(ledger.pins(TABLE)) == 3

    # read_table's pins end with their leases, without an event.
    clock.advance(timedelta(minutes=6))
    assert sorted(p.version for p in ledger.pins(TABLE)) == [1, 2]
    clock.advance(READ_PIN_LEASE)
    assert ledger.pins() == []
    assert events(ledger, "PinReleased") == [] and events(ledger, "PinRenewed") == []
    ledger.verify()


def test_r21_reading_releases_its_pin_on_exit_on_an_exception_and_when_the_read_is_refused(
        spark, ledger, clock) -> None:
    write_table(frame(spark, 0, 12, parts=2), ledger, TABLE)

    with reading(spark, ledger, TABLE) as df:
        [pin] = ledger.pins(TABLE)
        assert (pin.version, pin.lease) == (1, READ_PIN_LEASE)
        assert ids(df.collect()) == list(range(12))
    assert ledger.pins() == []
    assert len(events(ledger, "PinReleased", pin.id)) == 1

    with pytest.raises(RuntimeError, match="the job failed"), \
            reading(spark, ledger, TABLE, version=1, lease="10m"):
        [second] = ledger.pins(TABLE)
        assert second.lease == timedelta(minutes=10)
        raise RuntimeError("the job failed")
    assert ledger.pins() == []
    assert len(events(ledger, "PinReleased", second.id)) == 1

    # A read refused after its pin was taken (a named file is missing) leaves no pin behind.
    gone = files_of(ledger, TABLE, 1)[0]
    os.remove(gone)
    with pytest.raises(TableDataMissing, match=gone.name):
        read_table(spark, ledger, TABLE)
    with pytest.raises(TableDataMissing), reading(spark, ledger, TABLE):
        pytest.fail("the block must not run")  # pragma: no cover
    assert ledger.pins() == []
    assert len(events(ledger, "PinTaken")) == len(events(ledger, "PinReleased")) == 4
    ledger.verify()


def test_r21_reading_renews_its_pin_while_the_block_runs_and_stops_after(spark, tmp_path) -> None:
    """The real clock here: a 3 s lease, a block that runs 4.5 s. Only the heartbeat (every
    third of the lease) keeps the pin live past its first lease."""
    with Ledger.open(tmp_path / "real-clock.db", actor="tester") as led:
        write_table(frame(spark, 0, 8), led, TABLE)
        with reading(spark, led, TABLE, lease="3s") as df:
            [first] = led.pins(TABLE)
            assert first.lease == timedelta(seconds=3)
            time.sleep(4.5)  # past the first lease: only renewals keep it
            [now] = led.pins(TABLE)
            assert now.id == first.id and now.live
            assert now.expires_at > first.expires_at + timedelta(seconds=1)
            assert ids(df.collect()) == list(range(8))
            renewed = events(led, "PinRenewed", first.id)
            assert len(renewed) >= 2
        assert led.pins() == []
        after = len(events(led, "PinRenewed", first.id))
        time.sleep(1.5)  # longer than the heartbeat's interval: it has stopped
        assert len(events(led, "PinRenewed", first.id)) == after
        assert len(events(led, "PinReleased", first.id)) == 1
        led.verify()


# --- the vacuum stops short of a pinned version ---------------------------------------------------

def test_r21_a_vacuum_does_not_expire_a_version_held_by_reading(spark, ledger, clock) -> None:
    write_table(frame(spark, 0, 40, "one", parts=4), ledger, TABLE)
    clock.advance(HOUR)
    write_table(frame(spark, 1000, 5, "two"), ledger, TABLE, mode="overwrite")
    v1 = files_of(ledger, TABLE, 1)
    assert len(v1) == 4 and all(p.exists() for p in v1)
    table_id = ledger.table(TABLE).id
    clock.advance(WEEK + DAY)  # version 1 was overwritten more than the default retention ago

    with reading(spark, ledger, TABLE, version=1) as df:
        [pin] = ledger.pins(TABLE)
        report = vacuum(spark, ledger)
        assert report.held == ({"name": TABLE, "id": table_id, "what": "expiry", "version": 1,
                                "pin": pin.id, "until": iso_utc(pin.expires_at)},)
        assert not any(e.versions for e in report.expired)
        assert ledger.retention_mark(TABLE) is None
        assert not any(v.expired for v in ledger.versions(TABLE))
        assert all(p.exists() for p in v1)
        rows = df.collect()
        assert ids(rows) == list(range(40)) and {r["label"] for r in rows} == {f"one-{i}" for i in range(40)}
    assert ledger.pins() == []

    after = vacuum(spark, ledger)
    assert after.held == ()
    assert [(e.name, e.versions) for e in after.expired] == [(TABLE, (1,))]
    assert not any(p.exists() for p in v1)
    assert [v.number for v in ledger.versions(TABLE) if v.expired] == [1]
    with pytest.raises(VersionExpired):
        read_table(spark, ledger, TABLE, version=1)
    assert ids(read_table(spark, ledger, TABLE).collect()) == list(range(1000, 1005))
    ledger.verify()


# --- the real one: a slow reader, and another process that overwrites and vacuums -----------

OTHER = textwrap.dedent("""
    import json, sys
    from datetime import datetime, timedelta
    from ledger import Ledger, ManualClock
    from spark_ops import local_session, vacuum, write_table

    path, start, name = sys.argv[1:4]
    clock = ManualClock(datetime.fromisoformat(start))
    spark = local_session("pin-other-process")
    with Ledger.open(path, clock=clock, actor="other") as led:
        rows = spark.createDataFrame([(i, f"new-{i}") for i in range(5000, 5010)], "id long, label string")
        version = write_table(rows, led, name, mode="overwrite")
        print(json.dumps({"step": "overwritten", "version": version.number}), flush=True)
        clock.advance(timedelta(days=1, hours=1))  # past the one-day retention this vacuum runs with
        report = vacuum(spark, led, retention="1d")
        print(json.dumps({"step": "vacuumed", "now": led.now().isoformat(), "held": list(report.held),
                          "expired": [[e.name, list(e.versions), e.files] for e in report.expired],
                          "failures": len(report.failures)}), flush=True)
    spark.stop()
""")


class Lines:
    """The other process's JSON lines, read by a thread, so waiting for one has a deadline."""

    def __init__(self, child: subprocess.Popen, stderr: Path) -> None:
        self._child, self._stderr, self._lines = child, stderr, queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self._child.stdout is not None
        for line in self._child.stdout:
            if line.startswith("{"):
                self._lines.put(json.loads(line))
        self._lines.put(None)  # the other process closed its output

    def next(self, deadline: float) -> dict[str, Any]:
        try:
            found = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            found = None
        if found is None:
            raise AssertionError(f"the other process said nothing more (exit {self._child.poll()}):\n"
                                 + self._stderr.read_text()[-3000:])
        return found


def test_r21_a_slow_reader_keeps_every_row_while_another_process_overwrites_and_vacuums(
        spark, ledger, ledger_path, clock, tmp_path) -> None:
    """Version 1 (six files) is read by a slow job: one Spark job per partition, run when the
    reader reaches it (``toLocalIterator``). After its first batch, another process, on the same
    ledger file and warehouse with its own SparkSession and a clock a day ahead, overwrites the
    table and vacuums past the retention. The reader then reads the rest, in batches with
    pauses, from files the vacuum had to leave. After the pin is released, the next vacuum
    expires version 1 and deletes its files, and a DataFrame still naming them cannot be read."""
    expected = list(range(600))
    write_table(frame(spark, 0, len(expected), "one", parts=6), ledger, TABLE)
    v1 = files_of(ledger, TABLE, 1)
    assert len(v1) == 6
    table_id = ledger.table(TABLE).id
    errors = tmp_path / "other.stderr"

    with reading(spark, ledger, TABLE, lease="2d") as df:  # longer than the other's day ahead
        [pin] = ledger.pins(TABLE)
        assert pin.version == 1
        rows_iter = df.toLocalIterator()  # prefetch off: partition n+1 is read when asked for
        read = [next(rows_iter) for _ in range(20)]
        with errors.open("w") as stderr:
            child = subprocess.Popen(  # a classic process: without PySpark's mark of a Connect one
                [sys.executable, "-c", OTHER, str(ledger_path), ledger.now().isoformat(), TABLE],
                cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True,
                env={k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_MODE_ENABLED"})
            try:
                lines = Lines(child, errors)
                deadline = time.monotonic() + 180
                while len(read) < 60:  # slow: the other process starts meanwhile
                    read.append(next(rows_iter))
                    time.sleep(0.02)
                assert lines.next(deadline) == {"step": "overwritten", "version": 2}
                done = lines.next(deadline)
                assert child.wait(60) == 0
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait(30)
        assert done["held"] == [{"name": TABLE, "id": table_id, "what": "expiry", "version": 1,
                                 "pin": pin.id, "until": iso_utc(pin.expires_at)}], errors.read_text()[-3000:]
        assert all(versions == [] for _, versions, _ in done["expired"]) and done["failures"] == 0
        assert all(p.exists() for p in v1)
        assert [(v.number, v.expired) for v in ledger.versions(TABLE)] == [(2, False), (1, False)]
        assert [p.id for p in ledger.pins(TABLE)] == [pin.id]  # still live at the others' time

        for n, row in enumerate(rows_iter, start=1):  # the rest, from the files the vacuum left
            read.append(row)
            if n % 100 == 0:
                time.sleep(0.1)
        assert ids(read) == expected
        assert {r["label"] for r in read} == {f"one-{i}" for i in expected}
    assert ledger.pins() == []

    after = vacuum(spark, ledger, retention="1d")  # the ledger's now is the other's, a day on
    assert after.held == ()
    assert [(e.name, e.versions) for e in after.expired] == [(TABLE, (1,))]
    assert not any(p.exists() for p in v1)
    with pytest.raises(VersionExpired):
        read_table(spark, ledger, TABLE, version=1)
    with pytest.raises(Exception, match="(?i)FileNotFound|does not exist"):
        df.collect()  # what the reader would have hit without its pin
    assert ids(read_table(spark, ledger, TABLE).collect()) == list(range(5000, 5010))
    ledger.verify()
