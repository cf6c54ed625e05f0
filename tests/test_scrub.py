"""The integrity scrub (R27): a look at the warehouse against the ledger, recorded, changing nothing.

Every file a readable, pinned or restorable version names must be there at its recorded size;
every file a receipt says deleted must still be gone. Checked here against files deleted,
truncated and replaced by hand, put back after a vacuum (and after an erasure's vacuum, R25), a
scrub killed half-way (a real process), and a scrub racing a vacuum; on a local disk on both kinds
of Spark session (R24), and on the S3 server (moto) listing each location once.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger import Ledger, ManualClock
from ledger.errors import InvalidArgument, InvalidName
from tests.test_s3 import LISTINGS, objects_under, put
from tests.test_s3 import connect_spark, lake, proxy, s3  # noqa: F401  (S3 on moto, and a Connect server that reaches it)
from vacuum_work.scrub import (GONE, Expected, Finding, Glance, Look, batches, compare, digest, pack, page_root,
                                scrub_root, unpack)

BOTH_SESSIONS = True
DAY = timedelta(days=1)
WEEK = timedelta(days=7)
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock):
    with Ledger.open(tmp_path / "ledger.db", warehouse=tmp_path / "wh", clock=clock, actor="test") as ledger:
        yield ledger


def write(led: Ledger, name: str, files: int, *, mode: str = "append", size: int = 10) -> list[str]:
    """A write of ``files`` plain files of ``size`` bytes, committed: their keys under the warehouse root."""
    if name not in {t.name for t in led.tables()}:
        led.create_table(name)
    w = led.begin_write(name)
    pairs = []
    for i in range(files):
        path = Path(w.folder) / f"d={i % 2}" / f"part-{i:05d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        pairs.append((f"{w.relative_folder}/d={i % 2}/part-{i:05d}.parquet", size))
    led.commit_write(w.id, pairs, mode=mode)
    table_id = led.table(name).id
    return [f"{table_id}/{p}" for p, _ in pairs]


def snapshot(root: str) -> dict[str, tuple[int, int]]:
    """Every file under the warehouse with its size and modification time: what a scrub must not change."""
    found = {}
    for folder, _, files in os.walk(root):
        for f in files:
            st = os.stat(os.path.join(folder, f))
            found[os.path.relpath(os.path.join(folder, f), root)] = (st.st_size, st.st_mtime_ns)
    return found


# --- the pure part: a look and what it found -------------------------------------------------

def test_r27_a_look_names_the_missing_the_wrong_sized_and_the_resurrected() -> None:
    look = Look("t1", pack([("a", 3), ("b", 4), ("c", 5)]), pack([("gone", 7)]), 4)
    asked: list[list[str]] = []

    def sizes(paths: list[str]) -> dict[str, int]:
        asked.append(paths)
        return {"a": 3, "b": 9, "gone": 7}

    found = compare(look, sizes)
    assert asked == [["a", "b", "c", "gone"]]
    assert found.missing == (("t1/b", 4, 9), ("t1/c", 5, GONE))
    assert found.resurrected == (("t1/gone", 7),)
    assert (found.files, found.bytes, found.absent_checked) == (3, 12, 1)
    # the root commits to the keys and recorded sizes, not to what was found
    assert compare(look, lambda _: {"a": 3, "b": 4, "c": 5}).root == found.root
    assert compare(Look("t1", pack([("a", 3), ("b", 4), ("c", 6)])), lambda _: {}).root != found.root
    assert list(unpack(look.present)) == [("a", 3), ("b", 4), ("c", 5)]


def test_r27_a_listing_that_agrees_gives_the_finding_a_full_look_would_and_any_difference_looks_again() -> None:
    present = [("a/x.parquet", 3), ("b/y.parquet", 4)]
    expected = Expected("t1", digest(present), absent=2)
    full = compare(Look("t1", pack(present), pack([("gone", 7), ("old", 1)]), 4), lambda _paths: dict(present))
    listing = Glance("t1", digest(present), 2, 7, page_root("t1/", present).hex())
    assert expected.confirmed(listing) == full and not full.missing
    for listed in ([present[0]],                                  # a file missing
                   [present[0], ("b/y.parquet", 5)],              # of another size
                   [*present, ("gone", 7)],                       # one back after its receipt
                   [*present, ("stray.parquet", 1)],              # one the ledger does not name
                   [present[0], ("b/y.parquet", GONE)]):          # a link where the file was
        assert expected.confirmed(Glance("t1", digest(sorted(listed)))) is None
    assert expected.confirmed(Glance("t1", error="OSError: refused")) is None


@given(st.lists(st.tuples(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1), st.integers(0, 2**62)),
                unique_by=lambda pair: pair[0]))
def test_r27_a_listings_digest_is_the_digest_the_ledger_stores_with_a_commits_files(files) -> None:
    """The executor's digest (standard library JSON) and the ledger's stored file list (orjson) are
    the same bytes for any name, so a location holding one commit's files is checked by the digest
    its commit carries, without reading its list."""
    from ledger.core.versions import manifest
    assert digest(sorted(files)) == manifest(files)[0]


def test_r27_looks_are_batched_by_files_and_never_split() -> None:
    looks = [Look(f"t{i}", files=n) for i, n in enumerate([5, 5, 20, 1, 1])]
    assert [[lk.location for lk in b] for b in batches(looks, 10)] == [["t0", "t1"], ["t2"], ["t3", "t4"]]


def test_r27_the_scrub_root_depends_on_every_location_and_not_on_their_order() -> None:
    a, b = Finding("a", 1, 1, "00" * 32), Finding("b", 2, 2, "11" * 32)
    assert scrub_root([a, b]) == scrub_root([b, a])
    assert scrub_root([a, b]) != scrub_root([a, Finding("b", 2, 2, "22" * 32)])
    assert scrub_root([a, b]) != scrub_root([a])


# --- bad input ------------------------------------------------------------------------------------

def test_r27_a_scrub_of_a_database_the_ledger_never_had_is_refused_and_records_nothing(led: Ledger) -> None:
    write(led, "sales.orders", 2)
    before = led.event_count()
    with pytest.raises(InvalidArgument, match="no table"):
        led.plan_scrub(database="nosuch")
    with pytest.raises(InvalidName, match="not an identifier"):
        led.plan_scrub(database="not a name!")
    assert led.event_count() == before


def test_r27_a_finding_that_contradicts_its_look_is_refused_and_records_nothing(led: Ledger) -> None:
    write(led, "sales.orders", 2)
    plan = led.plan_scrub()
    [look] = list(plan.looks())
    before = led.event_count()
    # more missing than files looked at: no executor could have found that
    bogus = Finding(look.location, 1, 10, "00" * 32, ((f"{look.location}/a", 1, GONE), (f"{look.location}/b", 1, GONE)))
    with pytest.raises(InvalidArgument, match="more found than was looked at"):
        plan.finish([bogus])
    with pytest.raises(InvalidArgument, match="Merkle root"):
        plan.finish([Finding(look.location, 1, 10, "not a root")])
    with pytest.raises(InvalidArgument, match="outside the location"):
        plan.finish([Finding(look.location, 1, 10, "00" * 32, (("elsewhere/a", 1, GONE),))])
    assert led.event_count() == before


# --- on a local disk, through Spark -----------------------------------------------------------

@pytest.mark.spark
def test_r27_a_clean_warehouse_is_checked_recorded_once_and_left_as_it_was(spark, led: Ledger, clock) -> None:
    from spark_ops import scrub
    keys = write(led, "sales.orders", 6) + write(led, "sales.items", 3)
    clock.advance(DAY)
    keys += write(led, "sales.orders", 2, mode="overwrite")  # version 1 stays readable (retention)
    led.drop_table("sales.items")                             # restorable: its files are expected
    before, files = led.event_count(), snapshot(led.warehouse)

    report = scrub(spark, led)

    assert report.ok and not report.missing and not report.resurrected and not report.errors
    assert (report.files, report.locations, report.bytes) == (len(keys), 2, 10 * len(keys))
    assert led.event_count() == before + 1 and snapshot(led.warehouse) == files
    [entry] = led.history(type="ScrubFinished")
    assert entry.seq == report.seq and entry.data["root"] == report.root and entry.data["findings"] is None
    assert "scrubbed the warehouse" in entry.text and "all as recorded" in entry.text
    # the same warehouse, the same root: an auditor's recomputation agrees
    assert scrub(spark, led).root == report.root
    # A file the ledger does not name (a stray, a write's before its commit) sends its location to a
    # second look with its files, which finds nothing wrong and the same root.
    (Path(led.warehouse) / keys[0].split("/")[0] / "_stray.tmp").write_bytes(b"?")
    again = scrub(spark, led)
    assert again.ok and (again.root, again.files) == (report.root, report.files)


@pytest.mark.spark
def test_r27_files_deleted_truncated_or_replaced_by_hand_are_named_with_what_they_break(
        spark, led: Ledger, clock) -> None:
    from spark_ops import scrub
    orders = write(led, "sales.orders", 4)
    clock.advance(DAY)
    write(led, "sales.orders", 1)  # version 2 appends: version 1's files are named by both
    items = write(led, "sales.items", 2)
    led.drop_table("sales.items")
    root = Path(led.warehouse)
    (root / orders[0]).unlink()                      # deleted by hand
    (root / orders[1]).write_bytes(b"x" * 4)         # truncated
    (root / orders[2]).write_bytes(b"y" * 99)        # replaced by a file of another size
    (root / items[0]).unlink()                       # a dropped table's: breaks its undrop
    (root / orders[3]).unlink()
    os.symlink("0123456789", root / orders[3])       # a link of the recorded size (10) is not the file
    before = led.event_count()

    report = scrub(spark, led)

    assert not report.ok and led.event_count() == before + 1
    by_key = {m.key: m for m in report.missing}
    assert set(by_key) == {orders[0], orders[1], orders[2], orders[3], items[0]}
    assert [by_key[k].found for k in orders] == [GONE, 4, 99, GONE]
    assert by_key[orders[0]].versions == (1, 2) and by_key[orders[0]].name == "sales.orders"
    assert not by_key[orders[0]].dropped
    assert by_key[items[0]].dropped and by_key[items[0]].versions == (1,)
    assert "MISSING" in report.summary() and "breaks dropped sales.items" in report.summary()
    entry = led.history(type="ScrubFinished")[-1]
    assert entry.data["missing"] == 5 and entry.data["findings"] is not None
    assert "5 missing" in entry.text


@pytest.mark.spark
def test_r20_r25_r27_a_file_put_back_after_its_vacuum_is_reported_resurrected_with_its_erasure(
        spark, led: Ledger, clock) -> None:
    from spark_ops import erase, scrub, vacuum, write_table
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "user_id long, v string")
    write_table(df, led, "crm.users")
    held = {k: (Path(led.warehouse) / k).read_bytes() for k in _keys_of(led, "crm.users")}
    status = erase(spark, led, "crm.users", "user_id = 2", reason="GDPR art. 17", expire_now=True)
    old = {f.key: held[f.key] for f in status.files}  # the files that held the person's row
    assert old
    vacuum(spark, led)
    assert all(not (Path(led.warehouse) / k).exists() for k in old)  # the erased version's files went
    assert scrub(spark, led).ok
    back = sorted(old)[0]
    (Path(led.warehouse) / back).parent.mkdir(parents=True, exist_ok=True)
    (Path(led.warehouse) / back).write_bytes(old[back])  # a backup restored by hand

    report = scrub(spark, led)

    [r] = report.resurrected
    assert r.key == back and r.size == len(old[back]) and r.requests == (status.request_id,) and len(r.runs) == 1
    assert "RESURRECTED" in report.summary() and status.request_id in report.summary()
    assert (Path(led.warehouse) / back).exists()  # reported, not deleted: a scrub changes nothing


def _keys_of(led: Ledger, name: str) -> list[str]:
    t = led.table(name)
    return [f"{t.id}/{f.path}" for f in led.versions(name)[0].files]


@pytest.mark.spark
def test_r27_a_scrub_racing_a_vacuum_never_reports_what_the_vacuum_deleted_by_the_rules(
        spark, led: Ledger, clock) -> None:
    from spark_ops import vacuum
    from spark_ops.executor.scrub import look_at
    old = write(led, "sales.orders", 3)
    clock.advance(DAY)
    write(led, "sales.orders", 2, mode="overwrite")
    clock.advance(WEEK + DAY)
    plan = led.plan_scrub()  # the ledger's word at the start: version 1 is still unexpired
    looks = list(plan.looks())
    vacuum(spark, led)  # expires version 1 and deletes its files, while the scrub looks
    assert not any((Path(led.warehouse) / k).exists() for k in old)
    findings = list(look_at(plan.root, looks))
    assert sum(len(f.missing) for f in findings) == 3  # missing at the look...

    report = plan.finish(findings)  # ...but the ledger, asked again at the end, no longer expects them

    assert report.ok and report.gone_by_rule == 3 and not report.missing


@pytest.mark.spark
def test_r25_r27_a_scrub_racing_a_write_and_an_erase_reports_neither_as_missing(spark, led: Ledger, clock) -> None:
    from spark_ops import erase, scrub, vacuum, write_table
    from spark_ops.executor.scrub import glance_at, look_at
    users = spark.createDataFrame([(42, "a", "d0"), (7, "b", "d1")], "user_id int, item string, day string")
    write_table(users.coalesce(1), led, "crm.users", partition_by="day")
    write_table(users.where("user_id = 7").coalesce(1), led, "crm.users", partition_by="day")
    clock.advance(DAY)
    plan = led.plan_scrub()  # the ledger's word at the start: both versions, user 42's file among them
    expected = {e.location: e for e in plan.expectations()}
    looks = list(plan.looks())
    held = [k for k in _keys_of(led, "crm.users") if "day=d0" in k]
    # While the scrub looks: a write lands, and an erasure rewrites user 42 away, expires every
    # version that held the rows and has its vacuum delete their files.
    write_table(users.where("user_id = 7").coalesce(1), led, "crm.users", partition_by="day")
    erase(spark, led, "crm.users", "user_id = 42", reason="GDPR art. 17", expire_now=True)
    vacuum(spark, led)
    assert held and not any((Path(led.warehouse) / k).exists() for k in held)

    [glance] = glance_at(plan.root, list(expected))
    assert expected[glance.location].confirmed(glance) is None  # the location differs: looked at again
    findings = list(look_at(plan.root, looks))
    assert {m[0] for f in findings for m in f.missing} == set(held)  # missing at the look...
    report = plan.finish(findings)  # ...and the ledger, asked again, no longer expects them

    assert report.ok and report.gone_by_rule == len(held) and not report.missing
    assert scrub(spark, led).ok  # and the next scrub, on the ledger's word after both, agrees


def test_r27_a_scrub_killed_half_way_records_nothing_and_the_next_runs_whole(tmp_path: Path, clock) -> None:
    with Ledger.open(tmp_path / "ledger.db", warehouse=tmp_path / "wh", clock=clock) as led:
        for n in range(4):
            write(led, f"db.t{n}", 5)
        before = led.event_count()
    script = textwrap.dedent(f"""
        import os, signal
        from ledger import Ledger
        from spark_ops.executor.scrub import look_at
        led = Ledger.open({str(tmp_path / "ledger.db")!r})
        plan = led.plan_scrub()
        for n, look in enumerate(plan.looks()):
            list(look_at(plan.root, [look]))
            if n == 1:
                print("killed", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)  # half-way: after two of four locations
        plan.finish([])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == -signal.SIGKILL and "killed" in done.stdout
    with Ledger.open(tmp_path / "ledger.db") as led:
        assert led.event_count() == before and len(led.history(type="ScrubFinished")) == 0
        plan = led.plan_scrub()
        from spark_ops.executor.scrub import look_at
        report = plan.finish(look_at(plan.root, list(plan.looks())))
        assert report.ok and report.files == 20 and report.locations == 4


def test_r19_r27_an_executor_that_does_not_see_the_warehouse_reports_an_error_not_missing_files(
        led: Ledger, tmp_path: Path) -> None:
    from spark_ops.executor.scrub import look_at
    write(led, "sales.orders", 3)
    plan = led.plan_scrub()
    looks = list(plan.looks())
    moved = tmp_path / "elsewhere"
    shutil.move(led.warehouse, moved)  # the warehouse is not mounted here
    try:
        [finding] = look_at(plan.root, looks)
        report = plan.finish([finding])
    finally:
        shutil.move(moved, led.warehouse)
    assert finding.error and "not here" in finding.error and not finding.missing
    assert report.errors and not report.missing and not report.ok


@pytest.mark.spark
def test_r27_a_scrub_of_one_database_looks_only_at_its_tables(spark, led: Ledger) -> None:
    from spark_ops import scrub
    write(led, "sales.orders", 2)
    gone = write(led, "hr.people", 2)
    (Path(led.warehouse) / gone[0]).unlink()
    report = scrub(spark, led, database="sales")
    assert report.ok and report.locations == 1 and report.database == "sales"
    assert "database sales" in led.history(type="ScrubFinished")[-1].text


# --- on the S3 server ------------------------------------------------------------------------------

@pytest.mark.spark
def test_r20_r27_a_scrub_on_s3_lists_a_clean_location_once_and_finds_what_was_deleted_and_put_back(
        spark, lake: Ledger, clock, s3) -> None:
    from spark_ops import scrub, vacuum
    names = ["sales.orders", "sales.items", "sales.clean"]
    keys: dict[str, list[str]] = {}
    for name in names:
        lake.create_table(name)
        w = lake.begin_write(name)
        keys[name] = [put(f"{w.folder}/part-{i}.parquet", b"v" * 5) for i in range(30)]
        lake.commit_write(w.id, [(f"{w.relative_folder}/part-{i}.parquet", 5) for i in range(30)])
    clock.advance(DAY)
    w = lake.begin_write("sales.orders")
    newer = put(f"{w.folder}/part-0.parquet", b"n" * 7)
    lake.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", 7)], mode="overwrite")
    clock.advance(WEEK + DAY)
    vacuum(spark, lake)  # version 1 of sales.orders expires: its 30 objects go, receipted
    assert objects_under(lake.table("sales.orders").location) == [newer]
    bucket_key = keys["sales.orders"][0]
    put(f"s3://lake/{bucket_key}", b"v" * 5)            # put back (a bucket's versioning restored it)
    from tests.test_s3 import client
    items = keys["sales.items"]
    client().delete_object(Bucket="lake", Key=items[3])  # deleted by hand
    client().put_object(Bucket="lake", Key=items[4], Body=b"v" * 2)  # truncated
    client().put_object(Bucket="lake", Key=items[5], Body=b"w" * 9)  # replaced by an object of another size
    s3.clear()

    report = scrub(spark, lake)

    listings = [r for r in s3.requests if LISTINGS(r.method, r.target)]
    clean = lake.table("sales.clean").id
    # The clean location is listed once; the two that differ a second time, with their files: never a request a file.
    assert sorted(r.target.count(clean) for r in listings) == [0, 0, 0, 0, 1] and len(s3.requests) == 5
    assert all(r.method in ("GET",) for r in s3.requests)  # it only reads
    found = {m.key: (m.size, m.found, m.name, m.versions) for m in report.missing}
    assert found == {key.split("/", 1)[1]: (5, size, "sales.items", (1,))
                     for key, size in zip(items[3:6], (-1, 2, 9))}  # keys relative to the warehouse root
    entry = lake.history(type="ScrubFinished")[-1]
    assert entry.data["missing"] == 3 and entry.data["resurrected"] == 1 and entry.data["findings"] is not None
    [back] = report.resurrected
    assert bucket_key.endswith(back.key) and back.runs
    assert report.files == 61 and report.absent_checked == 30 and report.locations == 3
