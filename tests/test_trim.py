"""Then gone: the files a replace removed from a write folder that stays named (R13, R20, R25).

A replace (a partition overwrite, an erasure's rewrite) removes some files of a write folder whose
other files the current version keeps naming. An expiry deletes a folder only whole, so before
this those files stayed for ever, and an erasure request waited for ever on them. Now, once no
unexpired version names them, a vacuum deletes them by key (a *trim*): marks first (R13), each key
confined to its table's location (R9), receipted (R20), resumable (a stopped run's trim is taken
over looking at each key first, so nothing is counted twice), on a local disk and on S3 (moto),
on both kinds of Spark session (R24).
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from ledger import Ledger, LedgerCorrupt, ManualClock
from ledger.errors import InvalidArgument
from tests.conftest import T0
from tests.forge import forge
from tests.test_s3 import DELETES, _die_after_deleting, objects_under, put
from tests.test_s3 import connect_spark, lake, proxy, s3  # noqa: F401  (S3 on moto, and a Connect server that reaches it)

BOTH_SESSIONS = True
DAY = timedelta(days=1)
WEEK = timedelta(days=7)
NAME = "sales.orders"


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock):
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as ledger:
        ledger.create_table(NAME)
        yield ledger


def write(led: Ledger, parts: dict[int, list[int]], *, mode: str = "append", removes: tuple[str, ...] = ()) -> list[str]:
    """A write of one real Parquet file per partition ``p`` (holding the rows ``ids``), committed:
    its paths relative to the table's location."""
    w = led.begin_write(NAME)
    files = []
    for p, ids in parts.items():
        path = Path(w.folder) / f"p={p}" / "part-00000.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
        files.append((f"{w.relative_folder}/p={p}/part-00000.parquet", path.stat().st_size))
    led.commit_write(w.id, files, mode=mode, removes=removes)
    return [p for p, _ in files]


def on_disk(led: Ledger) -> set[str]:
    """Every file under the table's location, relative to it."""
    home = led.table(NAME).location
    return {os.path.relpath(os.path.join(folder, f), home) for folder, _, files in os.walk(home) for f in files}


def size(led: Ledger, path: str) -> int:
    return os.path.getsize(os.path.join(led.table(NAME).location, path))


# --- on a local disk, through Spark ----------------------------------------------------------

@pytest.mark.spark
def test_r13_r25_a_file_a_replace_removed_is_deleted_once_no_kept_version_names_it(spark, led, clock) -> None:
    from spark_ops import read_table, vacuum
    table_id = led.table(NAME).id
    p1, p2, p3 = write(led, {1: [1, 2], 2: [3, 4], 3: [5, 6]})
    clock.advance(DAY)
    [p2b] = write(led, {2: [3]}, mode="replace", removes=(p2,))  # partition 2 rewritten without row 4
    removed_bytes = size(led, p2)
    clock.advance(DAY)

    kept = vacuum(spark, led)  # version 1 is within its retention: it names p2, which stays
    assert kept.files == 0 and on_disk(led) == {p1, p2, p3, p2b}

    clock.advance(WEEK)
    report = vacuum(spark, led)
    assert on_disk(led) == {p1, p3, p2b}  # exactly the removed file; the rest of its folder stays
    assert report.failures == [] and [(t.version, t.files, t.bytes) for t in report.trimmed] == \
        [(2, 1, removed_bytes)]
    assert sorted(r.id for r in read_table(spark, led, NAME).collect()) == [1, 2, 3, 5, 6]
    assert led.prove_deleted(f"{table_id}/{p2}").run_id == report.run_id  # R20
    [trimmed] = led.history(type="RemovalsDeleted")
    assert (trimmed.data["versions"], trimmed.data["files"], trimmed.data["bytes"]) == ([2], 1, removed_bytes)

    again = vacuum(spark, led)  # recorded: a second vacuum has nothing of it to do
    assert again.trimmed == () and again.files == 0 and len(led.history(type="RemovalsDeleted")) == 1
    assert on_disk(led) == {p1, p3, p2b}
    led.verify()


@pytest.mark.spark
def test_r13_r25_a_file_adopted_from_before_versioning_that_a_replace_removed_is_deleted_by_key(
        spark, led, clock) -> None:
    """An adopted file lies outside every write folder; the replace's list names it, so once no kept
    version does, the trim deletes it as it deletes a write's (before, it stayed until a purge of the
    whole instance, which a live table never has, while the log said the removals were deleted)."""
    from spark_ops import vacuum
    home = Path(led.table(NAME).location)
    for p, ids in {1: [1, 42], 2: [2]}.items():
        (home / f"p={p}").mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), home / f"p={p}" / "part-0.parquet")
    led.adopt_files(NAME, [(f"p={p}/part-0.parquet", size(led, f"p={p}/part-0.parquet")) for p in (1, 2)])
    clock.advance(DAY)
    [p1b] = write(led, {1: [1]}, mode="replace", removes=("p=1/part-0.parquet",))
    clock.advance(DAY + WEEK)
    report = vacuum(spark, led)
    assert on_disk(led) == {"p=2/part-0.parquet", p1b}
    assert [(t.version, t.files) for t in report.trimmed] == [(2, 1)]
    assert led.prove_deleted(f"{led.table(NAME).id}/p=1/part-0.parquet").run_id == report.run_id
    led.verify()


@pytest.mark.spark
def test_r25_an_erasure_request_waits_on_the_rewritten_file_until_the_vacuum_deletes_it(spark, led, clock) -> None:
    from spark_ops import vacuum
    table_id = led.table(NAME).id
    p1, p2 = write(led, {1: [1, 2], 2: [42, 3]})
    clock.advance(DAY)
    write(led, {2: [3]}, mode="replace", removes=(p2,))
    key = f"{table_id}/{p2}"
    request = led.request_erasure(NAME, predicate="id = 42", reason="GDPR art. 17", files=[(key, size(led, p2))],
                                  replaced_by=2)
    [waiting] = led.erasure(request.request_id).files
    assert "retention" in waiting.why and waiting.until is not None
    clock.advance(WEEK + DAY)
    led.start_vacuum(uncommitted=False).release()  # its mark lands first; then it stops, deleting nothing
    [due] = led.erasure(request.request_id).files
    assert "the next vacuum deletes it" in due.why and due.until == led.now()

    dry = vacuum(spark, led, dry_run=True)  # lists it, with its size, and deletes nothing
    [listed] = dry.trimmed
    where = os.path.realpath(os.path.join(led.table(NAME).location, p2))
    assert [(f.path, f.size) for f in listed.would_delete] == [(where, size(led, p2))] and p2 in on_disk(led)

    report = vacuum(spark, led)
    status = led.erasure(request.request_id)
    assert status.done and [f.run_id for f in status.files] == [report.run_id] and p2 not in on_disk(led)
    assert p1 in on_disk(led)
    led.verify()


# --- what keeps them: a kept version naming them (R13), a restore, a pin (R21) ---------------

def test_r13_a_restore_of_a_version_before_the_replace_keeps_its_removed_files(led, clock) -> None:
    a, b = write(led, {1: [1], 2: [2]})
    clock.advance(DAY)
    write(led, {2: [3]}, mode="replace", removes=(b,))
    clock.advance(DAY)
    led.restore_table(NAME, version=1)  # version 3 names b again
    clock.advance(WEEK * 2)
    assert led.plan_vacuum().trims == ()
    write(led, {1: [9]}, mode="overwrite")  # version 4 names none of it: once 3 expires, b goes
    assert led.plan_vacuum().trims == ()  # version 3 is kept for its retention after being overwritten
    clock.advance(WEEK * 2)
    [trim] = led.plan_vacuum().trims
    assert (trim.version, trim.fresh) == (2, False)
    # Version 1's write is named by no version the plan leaves: its folder goes whole, not by the trim.
    assert trim.skip == (a.split("/")[1],)
    assert set(trim.skip) <= {f.write_id for e in led.plan_vacuum().expiries for f in e.folders}


def test_r21_a_pin_on_a_version_that_names_them_keeps_them(led, clock) -> None:
    _, b = write(led, {1: [1], 2: [2]})
    clock.advance(DAY)
    write(led, {2: [3]}, mode="replace", removes=(b,))
    with led.pin(NAME, version=1, lease=WEEK) as pin:
        clock.advance(WEEK - DAY)
        plan = led.plan_vacuum(retention=DAY)  # version 1 would expire but for the pin
        assert plan.trims == () and [h.pin_id for h in plan.held] == [pin.id]
    [trim] = led.plan_vacuum(retention=DAY).trims
    assert trim.version == 2


# --- the record: planned, typed, checked on replay (R4, R10, R16) -------------------------------

def test_r13_a_trim_result_the_run_did_not_plan_is_refused_typed_and_nothing_is_recorded(led, clock) -> None:
    from vacuum_work import Result, Trim
    _, b = write(led, {1: [1], 2: [2]})
    clock.advance(DAY)
    write(led, {2: [3]}, mode="replace", removes=(b,))
    clock.advance(WEEK * 2)
    run = led.start_vacuum(uncommitted=False)
    [trim] = run.plan.trims
    events = led.event_count()
    for forged in (Trim(trim.table_id, trim.name, trim.path, 1, trim.listed),  # version 1: no replace
                   Trim("0123456789abcdef", trim.name, trim.path, 2, trim.listed)):
        with pytest.raises(InvalidArgument, match="did not plan to delete the files version"):
            run.finish([Result(forged, 1, 10)])
        assert led.event_count() == events
    with pytest.raises(InvalidArgument, match="two results name"):
        run.finish([Result(trim, 1, 10), Result(trim, 1, 10)])
    assert led.event_count() == events
    run.finish([Result(trim, 1, 10)])
    assert len(led.history(type="RemovalsDeleted")) == 1
    led.verify()


@pytest.mark.parametrize("forged", ["not due", "no replace", "twice"])
def test_r16_verify_catches_a_forged_trim(tmp_path: Path, clock: ManualClock, forged: str) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock, actor="test") as led:
        led.create_table(NAME)
        _, b = write(led, {1: [1], 2: [2]})
        clock.advance(DAY)
        write(led, {2: [3]}, mode="replace", removes=(b,))
        if forged == "twice":
            clock.advance(WEEK * 2)
            run = led.start_vacuum(uncommitted=False)
            from vacuum_work import Result
            run.finish([Result(t, 1, 10) for t in run.plan.trims])
        table_id = led.table(NAME).id
        led.verify()
    number = 1 if forged == "no replace" else 2
    forge(path, stream=f"data:{table_id}", type="RemovalsDeleted",
          payload=json.dumps({"table_id": table_id, "run_id": "forger", "versions": [number], "files": 1, "bytes": 1},
                             separators=(",", ":")))
    with pytest.raises(LedgerCorrupt, match="R13"):
        with Ledger.open(path, clock=clock) as led:
            led.verify()


# --- R13 over any history: no trim ever names a file a kept version names ----------------------

REPLACE = st.tuples(st.just("replace"), st.integers(0, 2), st.lists(st.integers(0, 50), min_size=1, max_size=3))
VACUUM = st.tuples(st.just("vacuum"), st.integers(0, 10))
STEPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 3)),
    st.tuples(st.just("overwrite"), st.integers(1, 3)),
    REPLACE, REPLACE,
    st.tuples(st.just("restore"), st.integers(1, 20)),
    st.tuples(st.just("pin"), st.integers(1, 20)),
    VACUUM, VACUUM,
    st.tuples(st.just("wait"), st.integers(1, 10)),
), min_size=1, max_size=30)


@settings(max_examples=100, deadline=None)
@given(steps=STEPS)
def test_r13_no_planned_trim_ever_names_a_file_a_version_it_leaves_unexpired_names(steps) -> None:
    """Random appends, overwrites, replaces, restores, pins and vacuums (started and finished, trims
    and expiries recorded as a run would): no trim a vacuum plans holds a file that a version left
    unexpired by the plan's mark names, outside the folders it skips; and each replace is trimmed at
    most once, checked again by ``verify``."""
    from ledger import from_micros
    from vacuum_work import Result
    clock = ManualClock(T0)
    with Ledger.open(":memory:", clock=clock, actor="prop") as led:
        led.create_table(NAME)
        serial = 0
        for step in [("append", 3), *steps]:
            clock.advance(timedelta(hours=1))
            kind, current = step[0], led.table(NAME).current_version
            if kind in ("append", "overwrite", "replace"):
                base = sorted(f.path for f in led.version(NAME).files) if current else []
                removes = tuple(dict.fromkeys(base[i % len(base)] for i in step[2])) if kind == "replace" and base \
                    else ()
                if kind == "replace" and (not removes or (set(removes) == set(base) and not step[1])):
                    continue
                w = led.begin_write(NAME)
                serial += 1
                led.commit_write(w.id, [(f"{w.relative_folder}/f{serial}-{i}", 10) for i in range(step[1])],
                                 mode=kind, removes=removes)
            elif kind == "restore" and current:
                version = led.versions(NAME)[current - (step[1] % current + 1)]
                if not version.current and not version.expired:
                    led.restore_table(NAME, version=version.number)
            elif kind == "pin" and current:
                version = led.versions(NAME)[current - (step[1] % current + 1)]
                if not version.expired:
                    led.pin(NAME, version=version.number, lease=timedelta(hours=step[1]))
            elif kind == "vacuum":
                run = led.start_vacuum(retention=timedelta(hours=step[1]), override_floor=True, uncommitted=False)
                plan = run.plan
                for trim in plan.trims:
                    expiry = next((e for e in plan.expiries if e.table_id == trim.table_id), None)
                    mark = expiry.mark if expiry is not None and expiry.mark is not None else \
                        led.state.data.mark(trim.table_id)
                    named = {f.path for v in led.versions(NAME)
                             if v.current or mark is None or v.committed_at > from_micros(mark) for f in v.files}
                    doomed = {p for p, _ in run.files(trim.listed) if trim.takes(p)}
                    assert not doomed & named, (trim, doomed & named)
                if plan.run_id is not None:
                    run.finish([Result(e, len(e.folders), 0) for e in plan.expiries if e.folders]
                               + [Result(t, 0, 0) for t in plan.trims])
            elif kind == "wait":
                clock.advance(timedelta(hours=step[1]))
        trimmed = [n for e in led.history(type="RemovalsDeleted") for n in e.data["versions"]]
        assert len(trimmed) == len(set(trimmed))
        led.verify()


# --- on S3 (moto): by key in batches, and a stopped run's trim not counted twice ---------------

@pytest.mark.spark
def test_r10_r20_on_s3_removed_files_go_by_key_and_a_stopped_runs_trim_is_taken_over_fresh(spark, lake, clock,
                                                                                           s3) -> None:
    from spark_ops import vacuum
    lake.create_table(NAME)
    w1 = lake.begin_write(NAME)
    keys = [put(f"{w1.folder}/p={p}/part-0.parquet", b"v" * 5) for p in range(4)]
    lake.commit_write(w1.id, [(f"{w1.relative_folder}/p={p}/part-0.parquet", 5) for p in range(4)])
    clock.advance(DAY)
    w2 = lake.begin_write(NAME)
    [new] = [put(f"{w2.folder}/p=0/part-0.parquet", b"n" * 5)]
    lake.commit_write(w2.id, [(f"{w2.relative_folder}/p=0/part-0.parquet", 5)], mode="replace",
                      removes=tuple(f"{w1.relative_folder}/p={p}/part-0.parquet" for p in range(3)))
    clock.advance(WEEK * 2)
    dead = _die_after_deleting(lake, keys[:1])  # it planned the trim, deleted one of its three, and died
    clock.advance(timedelta(minutes=11))  # its lease ran out

    s3.clear()
    report = vacuum(spark, lake)
    home = lake.table(NAME).location
    assert [k for k in objects_under(home) if "/.retention-ledger/" not in k] == sorted([keys[3], new])
    assert report.resumed_runs == (dead,) and report.failures == []
    assert [(t.version, t.files, t.bytes) for t in report.trimmed] == [(2, 2, 10)]  # not the one already gone
    deletes = [r for r in s3.requests if DELETES(r.method, r.target)]
    assert sorted(s3.deleted_keys()) == sorted(keys[1:3])
    assert len([r for r in deletes if set(r.keys) & set(keys)]) == 1  # one DeleteObjects, not one request a key
    for key in keys[:3]:  # each in one receipt: the run that deleted it
        assert lake.prove_deleted(f"s3://lake/{key}").run_id == (dead if key == keys[0] else report.run_id)
    assert lake.receipt(report.run_id).files == 2
    assert vacuum(spark, lake).trimmed == ()
    assert [t.fresh for t in lake.plan_vacuum().trims] == []
    lake.verify()

