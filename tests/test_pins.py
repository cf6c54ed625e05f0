"""Pins (R21): a reader's lease on a version, or on a dropped instance, that every vacuum
respects; refused before anything is recorded on what a vacuum may have touched; bounded.

The vacuum here is the ledger's half of it (``plan_vacuum``/``start_vacuum``'s plan: what it
would expire and purge): the files themselves are the Spark tests' (``test_pins_spark``). Every test
runs on SQLite and on a real PostgreSQL server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from ledger import Ledger, ManualClock
from ledger.clock import to_micros
from ledger.core.pins import MAX_LEASE_SECONDS, MAX_PER_TABLE
from ledger.errors import (
    InvalidArgument, LedgerCorrupt, PinEnded, PinRefused, PurgeRefused, TableNotFound, VersionExpired, VersionNotFound,
)
from vacuum_work import Expiry, Held, Plan

from .forge import forge
from .pg import MANUAL

BOTH_STORES = True
DAY = timedelta(days=1)


def _versions(led: Ledger, clock: ManualClock, name: str, count: int) -> None:
    """``count`` overwrites of ``name``, a day apart: version n is superseded a day after it was made."""
    for i in range(count):
        w = led.begin_write(name)
        led.commit_write(w.id, [(f"{w.relative_folder}/part-{i}.parquet", 100 + i)], mode="overwrite")
        clock.advance(DAY)


@pytest.fixture
def table(ledger: Ledger, clock: ManualClock) -> str:
    ledger.create_table("sales.orders")
    _versions(ledger, clock, "sales.orders", 3)
    return "sales.orders"


def _expiry(plan: Plan) -> Expiry | None:
    found = [e for e in plan.expiries if e.mark is not None]
    return found[0] if found else None


# --- what a pin holds -------------------------------------------------------------------------

def test_r21_a_pinned_version_is_not_expired_and_the_vacuum_says_which_pin_held_it(
        ledger: Ledger, clock: ManualClock, table: str) -> None:
    pin = ledger.pin(table, version=1, lease="7d")
    clock.advance(3 * DAY)
    held = ledger.plan_vacuum(retention="1d")
    assert _expiry(held) is None  # version 1 is the oldest: the mark has nowhere to go below it
    assert held.held == (Held(pin.table_id, table, "expiry", 1, pin.id, to_micros(pin.expires_at)),)
    run = ledger.start_vacuum(retention="1d")
    assert ledger.versions(table)[-1].expired is False and ledger.retention_mark(table) is None
    run.finish([]) if run.plan.run_id else None

    pin.release()
    after = ledger.plan_vacuum(retention="1d")
    assert after.held == () and {v for e in after.expiries for v in e.versions} == {1, 2}


def test_r21_a_mark_stops_short_of_the_oldest_pinned_version(ledger: Ledger, clock: ManualClock, table: str) -> None:
    ledger.pin(table, version=2, lease="7d")
    clock.advance(DAY)
    plan = ledger.start_vacuum(retention="1d").plan
    assert [e.versions for e in plan.expiries] == [(1,)]
    versions = {v.number: v.expired for v in ledger.versions(table)}
    assert versions == {1: True, 2: False, 3: False}


def test_r21_a_pinned_dropped_instance_is_neither_purged_nor_newly_blocked(ledger: Ledger, clock: ManualClock) -> None:
    kept = ledger.create_table("sales.kept")
    gone = ledger.create_table("sales.gone")
    ledger.drop_table("sales.kept")
    ledger.drop_table("sales.gone")
    pin = ledger.pin(table_id=kept.id, lease="7d")
    assert pin.version is None  # no versions: the instance itself is held
    clock.advance(2 * DAY)
    plan = ledger.start_vacuum(retention="1d").plan
    assert [t.table_id for t in plan.purges] == [gone.id]
    assert [h.what for h in plan.held] == ["purge"] and plan.held[0].pin_id == pin.id
    assert ledger.undrop_table("sales.kept", table_id=kept.id).id == kept.id  # still restorable (R5)


def test_r21_a_pin_taken_after_the_vacuum_recorded_its_mark_is_refused_and_records_nothing(
        ledger: Ledger, clock: ManualClock, table: str) -> None:
    clock.advance(DAY)
    ledger.start_vacuum(retention="1d")
    count = ledger.event_count()
    with pytest.raises(VersionExpired, match="version 1 .* is expired"):
        ledger.pin(table, version=1)
    assert ledger.event_count() == count and ledger.pins() == []


def test_r21_a_pin_on_a_dropped_instance_behind_its_watermark_or_purged_is_refused(
        ledger: Ledger, clock: ManualClock) -> None:
    t = ledger.create_table("sales.old")
    ledger.drop_table("sales.old")
    clock.advance(DAY)
    ledger.advance_watermark(ledger.now())
    count = ledger.event_count()
    with pytest.raises(PinRefused, match=r"cannot pin sales\.old .* at or before its watermark"):
        ledger.pin(table_id=t.id)
    ledger.record_purge(t.id, run_id="by-hand", files=0, bytes=0)
    count = ledger.event_count()
    with pytest.raises(PinRefused, match="purged"):
        ledger.pin(table_id=t.id)
    assert ledger.event_count() == count


def test_r21_a_pinned_instance_refuses_a_purge_and_a_mark_over_it(ledger: Ledger, clock: ManualClock,
                                                                  table: str) -> None:
    pin = ledger.pin(table, version=1)
    count = ledger.event_count()
    with pytest.raises(PinRefused, match=f"pin {pin.id} holds version 1"):
        ledger.advance_retention_mark(table, ledger.now())
    assert ledger.retention_mark(table) is None and ledger.event_count() == count
    ledger.drop_table(table)
    ledger.advance_watermark(ledger.now())  # by hand: blocks the undrop, deletes nothing
    count = ledger.event_count()
    with pytest.raises(PurgeRefused, match=f"pin {pin.id} holds it"):
        ledger.record_purge(pin.table_id, run_id="by-hand", files=0, bytes=0)
    assert ledger.event_count() == count
    assert ledger.start_vacuum().plan.purges == ()  # and the vacuum leaves it for when the pin ends
    clock.advance(timedelta(hours=2))  # the default lease (an hour) ran out, with no event
    assert [t.table_id for t in ledger.start_vacuum().plan.purges] == [pin.table_id]


# --- leases: bounded, and ending on their own -------------------------------------------------

def test_r21_a_pin_ends_at_its_lease_without_an_event_and_cannot_be_renewed_after(
        ledger: Ledger, clock: ManualClock, table: str) -> None:
    pin = ledger.pin(table, lease="10m")
    assert [p.id for p in ledger.pins(table)] == [pin.id] and pin.version == 3
    clock.advance(timedelta(minutes=5))
    assert pin.renew().expires_at == ledger.now() + timedelta(minutes=10)
    clock.advance(timedelta(minutes=11))
    count = ledger.event_count()
    assert ledger.pins() == []
    with pytest.raises(PinEnded, match=f"cannot renew pin {pin.id}: it ran out at"):
        pin.renew()
    assert pin.release().live is False and ledger.event_count() == count  # nothing to release


def test_r21_a_pin_as_a_context_manager_is_released_on_leaving(ledger: Ledger, table: str) -> None:
    with ledger.pin(table) as pin:
        assert ledger.pins()[0].id == pin.id
    assert ledger.pins() == [] and pin.released_at is not None
    kinds = [e.type for e in ledger.history(table, pins=True)][-2:]
    assert kinds == ["PinTaken", "PinReleased"]


@pytest.mark.parametrize("lease", [0, -5, MAX_LEASE_SECONDS + 1, "8d", "soon"])
def test_r21_a_lease_past_its_maximum_or_not_a_duration_is_refused_and_records_nothing(
        ledger: Ledger, table: str, lease: object) -> None:
    count = ledger.event_count()
    with pytest.raises(InvalidArgument, match="lease"):
        ledger.pin(table, lease=lease)  # type: ignore[arg-type]
    assert ledger.event_count() == count


def test_r21_bad_pins_are_typed_errors_that_record_nothing(ledger: Ledger, table: str) -> None:
    count = ledger.event_count()
    with pytest.raises(TableNotFound):
        ledger.pin("sales.nothing")
    with pytest.raises(InvalidArgument, match="not sales.other"):
        ledger.pin("sales.other", table_id=ledger.table(table).id)
    with pytest.raises(InvalidArgument, match="no pin with id"):
        ledger.renew_pin("nope")
    with pytest.raises(InvalidArgument, match="a version or a time"):
        ledger.pin(table, version=1, as_of=ledger.now())
    assert ledger.event_count() == count


@pytest.mark.sqlite_only
def test_r21_a_table_holds_a_bounded_number_of_pins(tmp_path: Path, clock: ManualClock) -> None:
    with Ledger.open(tmp_path / "l.db", clock=clock, synchronous="OFF") as led:
        led.create_table("a.t")
        _versions(led, clock, "a.t", 1)
        for _ in range(MAX_PER_TABLE):
            led.pin("a.t")
        count = led.event_count()
        with pytest.raises(PinRefused, match=f"holds {MAX_PER_TABLE} live pins already"):
            led.pin("a.t")
        assert led.event_count() == count
        clock.advance(timedelta(hours=2))
        led.pin("a.t")  # the others ran out


# --- the log keeps the rule: verify re-checks it ----------------------------------------------

def test_r21_verify_finds_a_mark_moved_over_a_live_pin(ledger_path: Path, clock: ManualClock) -> None:
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        led.create_table("sales.orders")
        _versions(led, clock, "sales.orders", 3)
        pin = led.pin("sales.orders", version=1, lease="7d")
        table_id, first = pin.table_id, led.versions("sales.orders")[-1].committed_at
    forge(ledger_path, stream=f"data:{table_id}", type="RetentionMarkAdvanced",
          payload=orjson.dumps({"table_id": table_id, "to": int(first.timestamp() * 1_000_000),
                                "run_id": None}).decode())
    with pytest.raises(LedgerCorrupt, match=f"over version 1, which pin {pin.id} holds"):
        with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
            led.verify()


def test_r21_verify_finds_a_pin_that_resurrects_an_expired_version(ledger_path: Path, clock: ManualClock) -> None:
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
        led.create_table("sales.orders")
        _versions(led, clock, "sales.orders", 3)
        led.start_vacuum(retention="1d")
        table_id = led.table("sales.orders").id
        assert led.versions("sales.orders")[-1].expired
        now = int(led.now().timestamp() * 1_000_000) + 10
    forge(ledger_path, stream=f"data:{table_id}", type="PinTaken", time=now,
          payload=json.dumps({"pin_id": "p1", "table_id": table_id, "version": 1, "lease_seconds": 60,
                              "expires_at": now + 60_000_000}))
    with pytest.raises(LedgerCorrupt, match=r"version 1, but that version is expired \(R12\) \(R21\)"):
        with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL) as led:
            led.verify()


# --- the CLI ----------------------------------------------------------------------------------

@pytest.mark.sqlite_only
def test_r21_the_cli_lists_pins(ledger_path: Path, clock: ManualClock) -> None:
    with Ledger.open(ledger_path, clock=clock) as led:
        led.create_table("sales.orders")
        _versions(led, clock, "sales.orders", 1)
        pin = led.pin("sales.orders", lease="7d")
    # The pin's lease runs on the manual clock's time (2026-01), so the CLI's real clock sees it ended.
    run = subprocess.run([sys.executable, "-m", "ledger", "--ledger", str(ledger_path), "pins", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stderr, json.loads(run.stdout)) == (0, "", [])
    with Ledger.open(ledger_path) as led:  # the real clock: a pin that holds now
        live = led.pin("sales.orders")
    run = subprocess.run([sys.executable, "-m", "ledger", "--ledger", str(ledger_path), "pins"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and live.id in run.stdout and pin.id not in run.stdout
    assert run.stdout.splitlines()[0].split() == ["PIN", "TABLE", "TABLE_ID", "VERSION", "TAKEN_AT", "EXPIRES_AT"]


# --- pins in batches, and following a ledger's changes ----------------------------------------

def test_r21_pins_taken_renewed_and_released_in_one_append_each(ledger: Ledger, clock: ManualClock) -> None:
    for name in ("sales.a", "sales.b", "hr.c"):
        ledger.create_table(name)
        _versions(ledger, clock, name, 2)
    events = ledger.event_count()
    appends: list[object] = []
    ledger.watch(appends.append)
    pins = ledger.pin_tables(["sales.a", "sales.b", "hr.c"], lease="2h")
    assert len(appends) == 1 and ledger.event_count() == events + 3
    assert [(p.table, p.version) for p in pins] == [("sales.a", 2), ("sales.b", 2), ("hr.c", 2)]
    clock.advance(timedelta(minutes=90))
    renewed = ledger.renew_pins([p.id for p in pins])
    assert all(v.live and v.expires_at - ledger.now() > timedelta(minutes=119) for v in renewed)
    assert len(appends) == 2 and ledger.event_count() == events + 6
    released = ledger.release_pins([pins[0].id, pins[1].id])
    assert [v.live for v in released] == [False, False] and [p.table for p in ledger.pins()] == ["hr.c"]
    clock.advance(timedelta(hours=3))  # hr.c's pin ran out: a batch renewal leaves it ended, renews nothing
    [ended] = ledger.renew_pins([pins[2].id])
    assert not ended.live and ledger.pins() == []
    ledger.verify()


def test_r21_a_batch_with_one_pin_refused_records_nothing(ledger: Ledger, clock: ManualClock) -> None:
    ledger.create_table("sales.a")
    _versions(ledger, clock, "sales.a", 1)
    ledger.create_table("sales.unwritten")
    events = ledger.event_count()
    with pytest.raises(VersionNotFound):
        ledger.pin_tables(["sales.a", "sales.unwritten"])
    with pytest.raises(TableNotFound):
        ledger.pin_tables(["sales.a", "sales.nope"])
    with pytest.raises(InvalidArgument, match="twice"):
        ledger.pin_tables(["sales.a", "sales.a"])
    with pytest.raises(InvalidArgument, match="lease"):
        ledger.pin_tables(["sales.a"], lease="8d")
    assert ledger.event_count() == events and ledger.pins() == []
    assert ledger.pin_tables([]) == [] and ledger.event_count() == events


def test_watch_says_which_tables_and_databases_each_append_touched(ledger: Ledger, clock: ManualClock) -> None:
    seen = []
    stop = ledger.watch(seen.append)
    table = ledger.create_table("sales.orders")
    assert seen[-1].databases == {"sales"} and not seen[-1].everything
    write = ledger.begin_write("sales.orders")
    assert seen[-1].table_ids == {table.id} and seen[-1].databases == frozenset()
    ledger.commit_write(write.id, [(f"{write.relative_folder}/p.parquet", 1)])
    ledger.pin_tables(["sales.orders"])
    assert seen[-1].table_ids == {table.id}
    count = len(seen)
    with pytest.raises(TableNotFound):  # a refusal appends nothing, so says nothing
        ledger.drop_table("sales.nope")
    assert len(seen) == count
    stop()
    ledger.drop_table("sales.orders")
    assert len(seen) == count


def test_a_watchers_error_is_logged_and_the_append_stands(ledger: Ledger, ledger_path, clock: ManualClock,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    def broken(change: object) -> None:
        raise RuntimeError("a follower's own trouble")
    ledger.watch(broken)
    table = ledger.create_table("sales.orders")  # returns: the append landed
    assert "a follower's own trouble" in caplog.text
    with Ledger.open(ledger_path, clock=clock) as fresh:
        assert fresh.table("sales.orders").id == table.id
    assert ledger.table("sales.orders").id == table.id
