"""Erasure requests as a privacy team runs them (R25, issue 59), on both kinds of Spark session:
a person across several tables by keys in one request, batches of thousands of keys, nothing
personal kept in the chain, every request listed with by when it is done.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from ledger import InvalidArgument, Ledger, ManualClock, TableNotFound, VersionErased
from spark_ops import attach, detach, erase, read_table, vacuum, write_table
from tests.pg import MANUAL

pytestmark = pytest.mark.spark
BOTH_SESSIONS = True  # R24
BOTH_STORES = True  # the tests that take ``ledger_path`` also run on a PostgreSQL server (R18)

DAY = timedelta(days=1)
REPO = Path(__file__).resolve().parents[1]
PEOPLE = {"crm.users": "email", "sales.orders": "customer_email", "web.clicks": "email"}


def tables(spark, led: Ledger, clock: ManualClock) -> None:
    """Three tables keyed by a person's email under three column names, two versions each (the
    first overwritten), so the person's rows sit in an old version and in the current one."""
    for version in (1, 2):
        write_table(spark.createDataFrame([("u42@x.org", f"Ann {version}"), ("u7@x.org", "Bo"),
                                           ("u97@x.org", "Cy")], "email string, name string").coalesce(1),
                    led, "crm.users", mode="overwrite")
        write_table(spark.createDataFrame([("u42@x.org", 10 * version), ("u7@x.org", 5), ("u7@x.org", 6)],
                                          "customer_email string, amount int").coalesce(1),
                    led, "sales.orders", mode="overwrite")
        write_table(spark.createDataFrame([("u97@x.org", "/a"), ("u8@x.org", "/b")],
                                          "email string, page string").coalesce(1),
                    led, "web.clicks", mode="overwrite")
        clock.advance(DAY)


def rows_of(spark, led: Ledger, name: str) -> list[tuple]:
    return sorted(tuple(r) for r in read_table(spark, led, name, pin=False).collect())


def _store_bytes(led: Ledger, path: object) -> bytes:
    from tests.test_erasure_core import _store_text
    return _store_text(led, path)


def audit(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger.audit", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO)


def test_r25_a_person_across_three_tables_is_erased_by_keys_in_one_request_and_proven_offline(
        spark, ledger_path, clock, tmp_path) -> None:
    """Issue 59 items 1 and 3: one request by keys across three tables; every other row kept, every
    old version holding one refused; the vacuum deletes them; the bundle checks offline with the
    statement; an edited bundle is refused; the keys are gone from the store once done while verify
    passes. On SQLite and PostgreSQL."""
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, actor="privacy") as led:
        tables(spark, led, clock)
        events = led.event_count()
        status = erase(spark, led, PEOPLE, keys=["u42@x.org", "u97@x.org"], reason="GDPR art. 17, batch 12",
                       expire_now=True)
        assert status.tables == tuple(sorted(PEOPLE)) and status.keys == 2
        assert status.statement is not None and status.statement["keys"] == ["u42@x.org", "u97@x.org"]
        assert rows_of(spark, led, "crm.users") == [("u7@x.org", "Bo")]
        assert rows_of(spark, led, "sales.orders") == [("u7@x.org", 5), ("u7@x.org", 6)]
        assert rows_of(spark, led, "web.clicks") == [("u8@x.org", "/b")]
        for name in PEOPLE:
            with pytest.raises(VersionErased, match=status.request_id):
                read_table(spark, led, name, version=1, pin=False)
        assert {k.split("/")[0] for k in (f.key for f in status.files)} == {led.table(n).id for n in PEOPLE}
        [requested] = led.history(type="ErasureRequested")
        assert "u42@x.org" not in json.dumps(requested.data) and requested.seq > events
        status.write_statement(tmp_path / "statement.json")
        clock.advance(DAY)
        vacuum(spark, led)
        done = led.erasure(status.request_id)
        assert done.done and done.statement is None, [(f.key, f.why) for f in done.pending]
        assert all(not (Path(led.warehouse) / f.key).exists() for f in done.files)
        found = _store_bytes(led, ledger_path)
        assert b"u42@x.org" not in found and b"u42@x.org".hex().encode() not in found
        led.verify()
        cp = led.checkpoint()
        led.prove_erasure(status.request_id, checkpoint=cp).write(tmp_path / "bundle.json")
        led.export(tmp_path / "log.jsonl")
    (tmp_path / "cp.json").write_text(cp.to_json())
    ok = audit("prove-erasure", tmp_path / "bundle.json", tmp_path / "log.jsonl", tmp_path / "cp.json",
               "--keys", tmp_path / "statement.json")
    assert ok.returncode == 0, ok.stderr
    assert "crm.users, sales.orders, web.clicks" in ok.stdout and "2 keys (u42@x.org, u97@x.org)" in ok.stdout
    bundle = json.loads((tmp_path / "bundle.json").read_text())
    bundle["request"]["tables"] = ["crm.users"]
    (tmp_path / "edited.json").write_text(json.dumps(bundle))
    refused = audit("prove-erasure", tmp_path / "edited.json", tmp_path / "log.jsonl", tmp_path / "cp.json")
    assert refused.returncode == 1 and "LedgerCorrupt" in refused.stderr


def test_r25_ten_thousand_keys_in_one_request_each_table_scanned_once(spark, tmp_path, clock) -> None:
    """Issue 59 item 2: a batch of 10,000 keys, as a DataFrame, in one request."""
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="privacy") as led:
        write_table(spark.range(20_000).selectExpr("id AS user_id", "id % 10 AS bucket").repartition(4), led,
                    "crm.users")
        clock.advance(DAY)
        keys = spark.range(0, 20_000, 2).selectExpr("id AS k")
        status = erase(spark, led, {"crm.users": "user_id"}, keys=keys, reason="GDPR batch")
        assert status.keys == 10_000 and len(status.files) == 4
        left = read_table(spark, led, "crm.users", pin=False)
        assert left.count() == 10_000 and left.where("user_id % 2 = 0").count() == 0
        led.verify()


@pytest.mark.parametrize("case", ["unknown-table", "nulls", "empty", "mixed-kinds", "no-such-column",
                                  "wrong-type", "both", "predicate-across-tables", "keys-without-columns"])
def test_r25_a_request_by_keys_that_cannot_be_is_refused_typed_and_records_nothing(spark, tmp_path, clock,
                                                                                 case) -> None:
    """Each refusal before anything is recorded or rewritten: an unknown table among several (none of
    them rewritten), a NULL key (refused: it matches no row, and is likely a gap in the list), no
    keys, keys of two kinds, a key column no version of a table has, keys that do not compare with
    the column, a predicate and keys both."""
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="privacy") as led:
        tables(spark, led, clock)
        which, options = dict(PEOPLE), {"keys": ["u42@x.org"]}
        if case == "unknown-table":
            which["crm.nobody"] = "email"
        elif case == "nulls":
            options["keys"] = spark.createDataFrame([("u42@x.org",), (None,)], "k string")
        elif case == "empty":
            options["keys"] = []
        elif case == "mixed-kinds":
            options["keys"] = ["u42@x.org", 42]
        elif case == "no-such-column":
            which["web.clicks"] = "customer"
        elif case == "wrong-type":
            which = {"sales.orders": "amount"}
        elif case == "both":
            options["where"] = "email = 'u42@x.org'"
        elif case == "predicate-across-tables":
            options = {"where": "email = 'u42@x.org'"}
        elif case == "keys-without-columns":
            which = "crm.users"  # type: ignore[assignment]
        events = led.event_count()
        expected = TableNotFound if case == "unknown-table" else InvalidArgument
        with pytest.raises(expected) as refused:
            erase(spark, led, which, reason="GDPR", **options)
        message = str(refused.value)
        assert "\n" not in message and "nothing was recorded" in message
        assert led.event_count() == events
        assert all(led.version(n).number == 2 for n in PEOPLE)


def test_r25_duplicate_keys_count_once_and_a_column_in_other_case_is_found(spark, tmp_path, clock) -> None:
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="privacy") as led:
        tables(spark, led, clock)
        status = erase(spark, led, {"crm.users": "EMAIL"}, keys=["u42@x.org", "u42@x.org"], reason="GDPR")
        assert status.keys == 1 and rows_of(spark, led, "crm.users") == [("u7@x.org", "Bo"), ("u97@x.org", "Cy")]


KILLED = """
import os, signal, sys
from ledger import Ledger
from spark_ops import erase, local_session

class Dies(Ledger):
    def commit_write(self, write_id, files, **options):
        version = super().commit_write(write_id, files, **options)
        os.kill(os.getpid(), signal.SIGKILL)  # between the first table's rewrite and the second's

spark = local_session("killed")
with Dies.open(sys.argv[1], actor="killed") as led:
    erase(spark, led, {"crm.users": "email", "sales.orders": "customer_email"}, keys=["u42@x.org"], reason="x")
"""


@pytest.mark.classic_only  # the killed process starts its own classic session; the erase again runs on this one
def test_r25_r10_a_request_across_tables_killed_between_two_rewrites_is_finished_by_erasing_again(
        spark, tmp_path) -> None:
    """A process killed (SIGKILL) after the first table's rewrite committed and before the second's:
    nothing is lost, no request is recorded, and erasing again finishes it: no table's current version
    returns the key, and the first table's rewritten files are in the request's set."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, actor="privacy") as led:
        for name, column in (("crm.users", "email"), ("sales.orders", "customer_email")):
            write_table(spark.createDataFrame([("u42@x.org", 1), ("u7@x.org", 2)], f"{column} string, n int")
                        .coalesce(1), led, name)
    done = subprocess.run([sys.executable, "-c", KILLED, str(path)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    with Ledger.open(path, actor="privacy") as led:
        assert not list(led.history(type="ErasureRequested"))
        assert led.version("crm.users").number == 2 and led.version("sales.orders").number == 1  # one rewritten
        status = erase(spark, led, {"crm.users": "email", "sales.orders": "customer_email"}, keys=["u42@x.org"],
                       reason="again")
        for name in ("crm.users", "sales.orders"):
            assert read_table(spark, led, name, pin=False).where("n = 1").count() == 0
        users_v1 = {f"{led.table('crm.users').id}/{f.path}" for f in led.versions("crm.users")[-1].files}
        assert users_v1 <= {f.key for f in status.files}
        led.verify()


def test_r25_r4_a_commit_landing_on_the_second_table_during_the_request_is_scanned_too(spark, tmp_path,
                                                                                        clock) -> None:
    """Issue 57 item 2 for every table of a request: another writer appends the person's row to the
    second table after the erase scanned it; the request goes again behind a fence on every table,
    scans it, rewrites it, and records: at the request, no table returns the key."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock, actor="writer") as writer:
        tables(spark, writer, clock)

        class Racing(Ledger):
            raced = False

            def request_erasure(self, tables, **options):
                if not Racing.raced:
                    Racing.raced = True
                    write_table(spark.createDataFrame([("u42@x.org", 99)], "customer_email string, amount int"),
                                writer, "sales.orders")
                return super().request_erasure(tables, **options)

        with Racing.open(path, clock=clock, actor="privacy") as led:
            status = erase(spark, led, PEOPLE, keys=["u42@x.org"], reason="GDPR")
        assert Racing.raced
        at = writer.as_of(seq=status.seq)
        for name, column in PEOPLE.items():
            number = at.version(name).number
            assert read_table(spark, writer, name, version=number, pin=False).where(
                f"{column} = 'u42@x.org'").count() == 0, name
        assert len(writer.history(type="ErasureFenced")) == 3
        writer.verify()


def test_r25_requests_are_listed_in_python_the_command_line_and_sql_with_by_when(spark, tmp_path, clock) -> None:
    """Issue 59 item 4: ``erasures()``, CLI ``erasures --open --json`` and SQL ``ledger_erasures()``."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock, actor="privacy") as led:
        tables(spark, led, clock)
        first = erase(spark, led, {"crm.users": "email"}, keys=["u7@x.org"], reason="ticket 1")
        second = erase(spark, led, {"web.clicks": "email"}, keys=["u8@x.org"], reason="ticket 2", expire_now=True)
        listed = led.erasures(open=True)
        assert [s.request_id for s in listed] == [first.request_id, second.request_id]
        assert listed[0].due is not None and listed[0].due > led.now()
        attach(spark, led)
        try:
            rows = {r["request_id"]: r for r in spark.sql("SELECT * FROM ledger_erasures()").collect()}
            assert set(rows) == {first.request_id, second.request_id} and not rows[first.request_id]["done"]
        finally:
            detach(spark, led)
        clock.advance(DAY)
        vacuum(spark, led)
        assert [s.request_id for s in led.erasures(open=True)] == [first.request_id]
    done = subprocess.run([sys.executable, "-m", "ledger", "--ledger", str(path), "--json", "erasures", "--open"],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    assert row["request_id"] == first.request_id and row["due"] is not None and row["tables"] == ["crm.users"]
