"""Erasure requests on Spark (R25, issue 47 items 1-5) and partition overwrites, on both kinds of
session (R24).

``spark_ops.erase`` rewrites only the files of the current version that held matching rows, finds
every file of the older kept versions and of the dropped instances of that name that held one, and
records the request: from then on no read, restore, undrop or pin reaches them; after the vacuum
every file of the set is deleted and one bundle proves it offline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from ledger import InvalidArgument, Ledger, ManualClock, PinRefused, TableNotFound, VersionErased
from spark_ops import erase, read_table, vacuum, write_table

pytestmark = pytest.mark.spark
BOTH_SESSIONS = True  # R24: every Spark test here runs on a classic session and on a Spark Connect one

NAME = "crm.users"
DAY = timedelta(days=1)
SCHEMA = "user_id int, item string, day string"


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock):
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="erase-test") as ledger:
        yield ledger


def rows(spark, data: list[tuple[int, str, str]]):
    """One file per day (a single task writes every day's rows)."""
    return spark.createDataFrame(data, SCHEMA).coalesce(1)


def collected(df) -> list[tuple]:
    return ordered(tuple(r) for r in df.collect())


def ordered(found) -> list[tuple]:
    """Rows in one order (by their text: a row may hold a NULL, which does not compare with a number)."""
    return sorted(found, key=repr)


def keys(led: Ledger, version) -> set[str]:
    return {f"{version.table_id}/{f.path}" for f in version.files}


@pytest.fixture
def history(spark, led: Ledger, clock: ManualClock) -> dict:
    """A dropped instance of crm.users holding user 42's rows; then the live instance: version 1 (an
    overwrite) holds user 42 on day 0 only; version 2 (an overwrite) holds it on days 1 and 2, not on
    day 3; version 3 (an append) on day 4, not on day 3; version 4 (an append) not at all."""
    write_table(rows(spark, [(42, "old", "d0"), (7, "old", "d0"), (8, "old", "d9")]), led, NAME, partition_by="day")
    led.drop_table(NAME)
    clock.advance(DAY)
    write_table(rows(spark, [(42, "a", "d0"), (1, "a", "d0")]), led, NAME, partition_by="day")
    clock.advance(DAY)
    v2 = [(42, "b", "d1"), (1, "b", "d1"), (42, "c", "d2"), (2, "c", "d2"), (3, "d", "d3")]
    write_table(rows(spark, v2), led, NAME, mode="overwrite", partition_by="day")
    clock.advance(DAY)
    write_table(rows(spark, [(42, "e", "d4"), (4, "e", "d4"), (None, "f", "d3")]), led, NAME, partition_by="day")
    clock.advance(DAY)
    write_table(rows(spark, [(5, "g", "d5")]), led, NAME, partition_by="day")
    clock.advance(DAY)
    dropped = led.dropped_tables(name=NAME)[0]
    versions = {v.number: v for v in led.versions(NAME)}
    holding = {k for v in [*led.versions(table_id=dropped.id), *versions.values()] for k in keys(led, v)
               if "day=d0" in k or any(f"day={d}" in k for d in ("d1", "d2", "d4"))}
    return {"dropped": dropped, "versions": versions, "holding": holding}


# --- erase: the rewrite, the set, and what is refused after it ----------------------------------

def test_r25_erasing_one_users_rows_rewrites_only_the_files_that_held_them(spark, led, history) -> None:
    before = led.version(NAME)
    everything = collected(read_table(spark, led, NAME, pin=False))
    events = led.event_count()
    status = erase(spark, led, NAME, "user_id = 42", reason="GDPR art. 17, ticket 991")

    after = led.version(NAME)
    assert (after.number, after.mode, status.replaced_by) == (5, "replace", 5)
    assert collected(read_table(spark, led, NAME, pin=False)) == [r for r in everything if r[0] != 42]
    old, new = {f.path for f in before.files}, {f.path for f in after.files}
    removed, added = old - new, new - old
    assert len(old) == 6 and len(removed) == 3  # days 1, 2, 4 of versions 2 and 3; days 3 (twice) and 5 kept
    assert {p.split("/")[-2] for p in removed} == {"day=d1", "day=d2", "day=d4"}
    assert len(added) == 3 and {p.split("/")[1] for p in added} == {after.write_id}
    assert {p.split("/")[-2] for p in added} == {"day=d1", "day=d2", "day=d4"}
    assert old & new == {p for p in old if p.split("/")[-2] in ("day=d3", "day=d5")}  # the same files, by path
    # The set: the rewritten files, version 1's day-0 file, and the dropped instance's day-0 file.
    assert {f.key for f in status.files} == history["holding"]
    assert len(status.files) == 5 and all(not f.deleted for f in status.files)
    live, dropped = led.table(NAME).id, history["dropped"].id
    assert sorted(status.versions) == sorted([f"{dropped}/1", *(f"{live}/{n}" for n in (1, 2, 3, 4))])
    assert led.event_count() == events + 3  # the write begun, its replace, the request
    led.verify()


def test_r25_reads_restores_undrops_and_pins_of_the_set_are_refused_naming_the_request(spark, led, history) -> None:
    status = erase(spark, led, NAME, "user_id = 42", reason="GDPR")
    dropped = history["dropped"]
    events = led.event_count()
    attempts = {
        "read version 4": lambda: read_table(spark, led, NAME, version=4, pin=False),
        "read version 1": lambda: read_table(spark, led, NAME, version=1),
        "restore": lambda: led.restore_table(NAME, version=3),
        "undrop": lambda: led.undrop_table(NAME, table_id=dropped.id, new_name="crm.users_old"),
        "pin": lambda: led.pin(NAME, version=2),
    }
    for what, attempt in attempts.items():
        with pytest.raises(VersionErased) as refused:
            attempt()
        assert refused.value.request_id == status.request_id, what
        assert status.request_id in str(refused.value) and "\n" not in str(refused.value), what
    assert led.event_count() == events
    assert read_table(spark, led, NAME, pin=False).where("user_id = 42").count() == 0


def test_r25_a_predicate_that_matches_nothing_is_recorded_with_an_empty_set(spark, led, history) -> None:
    events = led.event_count()
    status = erase(spark, led, NAME, "user_id = 404", reason="asked")
    assert status.files == () and status.versions == () and status.replaced_by is None and status.done
    assert led.event_count() == events + 1 and led.version(NAME).number == 4


def test_r25_sql_delete_semantics_a_row_whose_predicate_is_null_stays(spark, led, history) -> None:
    """``user_id <> 1`` is NULL for the row with no user: DELETE keeps it, and so does erase."""
    erase(spark, led, NAME, "user_id <> 1", reason="keep only user 1")
    assert collected(read_table(spark, led, NAME, pin=False)) == ordered([(None, "f", "d3"), (1, "b", "d1")])


def test_r25_erasing_every_row_empties_the_table_with_an_overwrite_of_no_files(spark, led, clock) -> None:
    write_table(rows(spark, [(42, "a", "d0"), (42, "b", "d1")]), led, NAME, partition_by="day")
    clock.advance(DAY)
    status = erase(spark, led, NAME, "user_id = 42", reason="all of it")
    current = led.version(NAME)
    assert (current.mode, current.file_count, status.replaced_by) == ("overwrite", 0, 2)
    df = read_table(spark, led, NAME, pin=False)
    assert df.count() == 0 and df.columns == ["user_id", "item", "day"]
    assert len(status.files) == 2 and led.open_writes() == []


def test_r25_a_commit_landing_between_the_scan_and_the_replace_is_scanned_and_rewritten_too(
        spark, led, history, tmp_path) -> None:
    """Another writer appends user 42's rows just as the erase registers its write: the replace,
    decided on the version scanned, is refused (``Conflict``, its write aborted), and the erase scans
    the appended file and goes again, on the append's version."""
    class Racing(Ledger):
        raced = False

        def begin_write(self, name, **options):
            if not Racing.raced:
                Racing.raced = True
                write_table(rows(spark, [(42, "late", "d6"), (6, "late", "d6")]), led, NAME, partition_by="day")
            return super().begin_write(name, **options)

    with Racing.open(led.path, clock=led.clock, actor="racer") as racing:
        status = erase(spark, racing, NAME, "user_id = 42", reason="GDPR")
    assert Racing.raced
    current = led.version(NAME)
    assert read_table(spark, led, NAME, pin=False).where("user_id = 42").count() == 0
    assert read_table(spark, led, NAME, pin=False).where("user_id = 6").count() == 1
    late = [k for k in keys(led, led.versions(NAME)[1]) if "day=d6" in k]  # version 5: the late append
    assert len(late) == 1 and late[0] in {f.key for f in status.files}
    assert current.number == status.replaced_by == 6  # 5 the append, 6 the one replace, decided on it


# --- expire_now --------------------------------------------------------------------------

def test_r25_r21_expire_now_is_refused_under_a_pin_and_records_nothing(spark, led, history) -> None:
    pin = led.pin(NAME, version=3)
    events = led.event_count()
    with pytest.raises(PinRefused) as refused:
        erase(spark, led, NAME, "user_id = 42", reason="GDPR", expire_now=True)
    assert pin.id in str(refused.value) and "\n" not in str(refused.value)
    assert led.event_count() == events and led.version(NAME).number == 4
    pin.release()


def test_r25_expire_now_expires_every_version_holding_the_rows_at_once(spark, led, history) -> None:
    erase(spark, led, NAME, "user_id = 42", reason="GDPR", expire_now=True)
    assert [v.number for v in led.versions(NAME) if not v.expired] == [5]
    assert led.dropped_tables(name=NAME)  # a dropped instance goes at its own retention


# --- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["unknown-column", "unparseable", "not-a-predicate", "empty-reason",
                                  "reason-not-text", "no-table", "another-ledgers-table", "empty-where"])
def test_r25_bad_input_is_refused_typed_in_one_line_and_records_nothing(spark, led, history, tmp_path, case) -> None:
    where, reason, name = "user_id = 42", "GDPR", NAME
    if case == "unknown-column":
        where = "customer = 42"
    elif case == "unparseable":
        where = "user_id = = 42"
    elif case == "not-a-predicate":
        where = "user_id + 1"
    elif case == "empty-reason":
        reason = "  "
    elif case == "reason-not-text":
        reason = 42
    elif case == "no-table":
        name = "crm.nobody"
    elif case == "another-ledgers-table":
        with Ledger.open(tmp_path / "other.db", warehouse=tmp_path / "other-warehouse", clock=led.clock) as other:
            write_table(rows(spark, [(42, "x", "d0")]), other, "crm.elsewhere")
        name = "crm.elsewhere"
    elif case == "empty-where":
        where = ""
    events = led.event_count()
    expected = TableNotFound if case in ("no-table", "another-ledgers-table") else InvalidArgument
    with pytest.raises(expected) as refused:
        erase(spark, led, name, where, reason=reason)
    message = str(refused.value)
    assert "\n" not in message and "nothing was recorded" in message
    if case in ("unknown-column", "unparseable", "not-a-predicate"):
        assert where in message
    assert led.event_count() == events


# --- the vacuum, the status and the proof ------------------------------------------------------

def test_r25_after_the_vacuum_every_file_is_deleted_and_the_bundle_checks_offline(
        spark, led, clock, history, tmp_path) -> None:
    status = erase(spark, led, NAME, "user_id = 42", reason="GDPR", expire_now=True)
    clock.advance(timedelta(days=8))  # past the dropped instance's retention
    report = vacuum(spark, led)
    done = led.erasure(status.request_id)
    assert done.done, [(f.key, f.why) for f in done.pending]
    assert {f.run_id for f in done.files} == {report.run_id}
    assert all(not (Path(led.warehouse) / f.key).exists() for f in done.files)
    # ...and nothing the current version names went with them: it reads whole, every file there.
    current = led.version(NAME)
    assert all((Path(led.table(NAME).location) / f.path).exists() for f in current.files)
    assert collected(read_table(spark, led, NAME, pin=False)) == ordered(
        [(1, "b", "d1"), (2, "c", "d2"), (3, "d", "d3"), (4, "e", "d4"), (None, "f", "d3"), (5, "g", "d5")])
    cp = led.checkpoint()
    bundle = led.prove_erasure(status.request_id, checkpoint=cp)
    out, export, checkpoint = tmp_path / "erasure.json", tmp_path / "log.jsonl", tmp_path / "cp.json"
    bundle.write(out)
    led.export(export)
    checkpoint.write_text(cp.to_json())
    ok = audit("prove-erasure", out, export, checkpoint)
    assert ok.returncode == 0 and "all 5 files of its set deleted" in ok.stdout, ok.stderr
    data = json.loads(out.read_text())
    data["answers"][0]["leaf_path"] = ["00" * 32]  # one file's proof edited
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    refused = audit("prove-erasure", edited, export, checkpoint)
    assert refused.returncode == 1 and "LedgerCorrupt" in refused.stderr


def test_r25_a_table_written_before_versioning_has_its_files_adopted_and_erased(spark, led) -> None:
    table = led.create_table("crm.legacy")
    rows(spark, [(42, "x", "d1"), (1, "y", "d1"), (2, "z", "d2")]).write.partitionBy("day").parquet(table.location)
    status = erase(spark, led, "crm.legacy", "user_id = 42", reason="GDPR")
    assert len(status.files) == 1 and "day=d1" in status.files[0].key  # the adopted file that held the row
    assert collected(read_table(spark, led, "crm.legacy", pin=False)) == ordered([(1, "y", "d1"), (2, "z", "d2")])
    with pytest.raises(VersionErased):
        read_table(spark, led, "crm.legacy", version=1, pin=False)


def test_r25_a_table_with_no_data_is_refused_and_records_nothing(spark, led) -> None:
    led.create_table("crm.empty")
    events = led.event_count()
    with pytest.raises(InvalidArgument, match="no data to erase"):
        erase(spark, led, "crm.empty", "user_id = = 42", reason="GDPR")
    assert led.event_count() == events


def test_r25_a_dropped_instance_behind_its_watermark_is_not_read_its_purge_takes_it(spark, led, clock) -> None:
    """One being purged may have lost files already: the request covers restorable ones only."""
    write_table(rows(spark, [(42, "old", "d0")]), led, NAME, partition_by="day")
    gone = led.drop_table(NAME)
    clock.advance(DAY)
    led.advance_watermark(led.now())  # behind its watermark: never restored again; the next vacuum purges it
    for f in led.versions(table_id=gone.id)[0].files:
        (Path(gone.location) / f.path).unlink()  # a purge that stopped half-way
    write_table(rows(spark, [(42, "new", "d1"), (1, "new", "d1")]), led, NAME, partition_by="day")
    status = erase(spark, led, NAME, "user_id = 42", reason="GDPR")
    assert [f.key.split("/")[0] for f in status.files] == [led.table(NAME).id]


def audit(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger.audit", *map(str, args)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])


# --- partition overwrite ---------------------------------------------------------------------

@pytest.fixture
def by_day(spark, led: Ledger, clock: ManualClock):
    write_table(rows(spark, [(1, "a", "d1"), (2, "b", "d2"), (3, "c", "d3")]), led, "sales.daily", partition_by="day")
    clock.advance(DAY)
    return led.version("sales.daily")


def test_dynamic_partition_overwrite_replaces_only_the_partitions_the_dataframe_holds(spark, led, by_day) -> None:
    v2 = write_table(rows(spark, [(20, "new", "d2"), (40, "new", "d4")]), led, "sales.daily", mode="overwrite",
                     partitions="dynamic")
    assert (v2.number, v2.mode) == (2, "replace")
    assert collected(read_table(spark, led, "sales.daily", pin=False)) == \
        ordered([(1, "a", "d1"), (3, "c", "d3"), (20, "new", "d2"), (40, "new", "d4")])
    old = {f.path for f in by_day.files}
    kept = old & {f.path for f in v2.files}
    assert {p.split("/")[-2] for p in kept} == {"day=d1", "day=d3"} and len(v2.files) == 4
    assert collected(read_table(spark, led, "sales.daily", version=1, pin=False)) == \
        ordered([(1, "a", "d1"), (2, "b", "d2"), (3, "c", "d3")])  # the older version is unchanged and readable


def test_dynamic_partition_overwrite_of_an_empty_dataframe_makes_no_version(spark, led, by_day) -> None:
    empty = spark.createDataFrame([], SCHEMA)
    got = write_table(empty, led, "sales.daily", mode="overwrite", partitions="dynamic")
    assert got.number == 1 and led.version("sales.daily").number == 1 and led.open_writes() == []


@pytest.mark.parametrize("case", ["append", "bad-kind", "other-columns", "unpartitioned", "merge"])
def test_dynamic_partition_overwrite_bad_combinations_are_typed_and_record_nothing(spark, led, by_day, case) -> None:
    name, options = "sales.daily", {"mode": "overwrite", "partitions": "dynamic"}
    if case == "append":
        options["mode"] = "append"
    elif case == "bad-kind":
        options["partitions"] = "some"
    elif case == "other-columns":
        options["partition_by"] = ["item"]
    elif case == "merge":
        options["merge_schema"] = True
    elif case == "unpartitioned":
        write_table(rows(spark, [(1, "a", "d1")]), led, "sales.flat")
        name = "sales.flat"
    events = led.event_count()
    with pytest.raises(InvalidArgument) as refused:
        write_table(rows(spark, [(9, "z", "d1")]), led, name, **options)
    assert "\n" not in str(refused.value)
    assert led.event_count() == events


# --- on S3 (moto): Spark here has no s3a connector, so the files are written with pyarrow ----------

# Classic only: the suite's Connect server has no S3 endpoint in its executors' environment (the
# vacuum on S3 over Connect is tests/test_s3.py's, with a server of its own).
@pytest.mark.classic_only
@pytest.mark.parametrize("rewrite", ["overwrite", "replace"])
def test_r25_on_s3_an_erased_file_is_deleted_with_its_write_folder_and_the_bundle_checks_offline(
        spark, s3, tmp_path, rewrite: str) -> None:
    """The one file of a write held user 42's rows; a later version names its rows without them (a
    replace of that file, or an overwrite of the table), and the request names the file. Once its
    versions expire, the vacuum deletes the write's folder on S3 by key; the status says so, the
    bundle checks offline, and one with a file's proof edited is refused."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    from datetime import datetime, timezone

    from tests.test_s3 import objects_under, put

    def commit(lake: Ledger, data: list[tuple[int, str, str]], **options) -> tuple[str, int, str]:
        """One Parquet file of ``data`` put into a new write's folder and committed: (key, size, folder)."""
        sink = io.BytesIO()
        pq.write_table(pa.table({k: [r[i] for r in data] for i, k in enumerate(("user_id", "item", "day"))}), sink)
        w = lake.begin_write(NAME)
        put(f"{w.folder}/part-0.parquet", sink.getvalue())
        size = len(sink.getvalue())
        lake.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", size)], **options)
        return f"{w.table_id}/{w.relative_folder}/part-0.parquet", size, w.folder

    clock = ManualClock(datetime.now(timezone.utc))  # the store's LastModified is on the real clock
    with Ledger.open(tmp_path / "ledger.db", warehouse=f"s3://lake/wh-{tmp_path.name}", clock=clock) as lake:
        lake.create_table(NAME)
        held, size, folder = commit(lake, [(42, "a", "d0"), (1, "a", "d0")])
        clock.advance(timedelta(hours=1))
        commit(lake, [(2, "b", "d1")])
        clock.advance(timedelta(hours=1))
        if rewrite == "replace":
            commit(lake, [(1, "a", "d0")], mode="replace", removes=[held.split("/", 1)[1]])
        else:
            commit(lake, [(1, "a", "d0"), (2, "b", "d1")], mode="overwrite")
        status = lake.request_erasure(NAME, predicate="user_id = 42", reason="GDPR", files=[(held, size)],
                                      replaced_by=3)
        assert [f.key for f in status.pending] == [held]
        clock.advance(timedelta(days=8))
        report = vacuum(spark, lake)
        done = lake.erasure(status.request_id)
        assert done.done and done.files[0].run_id == report.run_id
        assert objects_under(folder) == []
        cp = lake.checkpoint()
        out, export, checkpoint = tmp_path / "erasure.json", tmp_path / "log.jsonl", tmp_path / "cp.json"
        lake.prove_erasure(status.request_id, checkpoint=cp).write(out)
        lake.export(export)
        checkpoint.write_text(cp.to_json())
    ok = audit("prove-erasure", out, export, checkpoint)
    assert ok.returncode == 0 and "all 1 files of its set deleted" in ok.stdout, (ok.stdout, ok.stderr)
    data = json.loads(out.read_text())
    data["answers"][0]["leaf_path"] = ["11" * 32]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    refused = audit("prove-erasure", edited, export, checkpoint)
    assert refused.returncode == 1 and "LedgerCorrupt" in refused.stderr


from tests.test_s3 import proxy, s3  # noqa: E402,F401  the moto server, as test_s3.py starts it
