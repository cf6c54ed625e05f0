"""The PostgreSQL backend (``ledger.persistence.postgres``) on a real server started by the tests.

The backend-neutral contract (``tests/store_contract.py``), then what only a server shared by
hosts has: triggers that keep the log append-only, typed errors for what a server says, a
lost acknowledgement looked up rather than guessed (R18), a server restarted under a ledger in
use, several tenants in one database, the command line on a URL, and what a host does on its
clock without appending (upkeep's lease, a dry run's plan) held to the server's, as its commands are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest
from psycopg.pq import Trace

from ledger import ClockSkew, InvalidArgument, Ledger, LedgerNotFound, LedgerUnavailable, ManualClock
from ledger.persistence import postgres as backend
from ledger.persistence.contract import NewEvent, Store
from ledger.persistence.postgres import PostgresStore

from .pg import PostgresServer, fresh_url
from .pgproxy import PostgresProxy
from .store_contract import ACTOR, T, EventStoreContract, append_n, event, rows_of

REPO = Path(__file__).resolve().parent.parent


class TestPostgresEventStore(EventStoreContract):
    """The contract every backend passes, on a schema of its own in the shared server."""

    @pytest.fixture(autouse=True)
    def _server(self, postgres: PostgresServer) -> None:
        self.server = postgres

    def make_store(self, tmp_path: Path, **options: Any) -> Store:
        return PostgresStore(fresh_url(), **{"max_skew": None, **options})  # the suite's times are its own


def _raw(url: str) -> psycopg.Connection[Any]:
    """A plain connection to a ledger's schema, as a person with psql would have."""
    base, _, schema = url.partition("?schema=")
    conn = psycopg.connect(base, autocommit=True)
    conn.execute(f'SET search_path TO "{schema}"')
    return conn


@pytest.mark.parametrize("statement", ["UPDATE events SET payload = '{}' WHERE seq = 1", "DELETE FROM events",
                                       "TRUNCATE events", "DELETE FROM blobs", "UPDATE attempts SET last_seq = 9"])
def test_r16_the_log_refuses_updates_and_deletes_in_the_database_too(postgres: PostgresServer, statement: str) -> None:
    url = fresh_url()
    store = PostgresStore(url, max_skew=None)  # the contract suite's own times
    try:
        append_n(store, 2)
        store.append([event()], {}, T + 10, ACTOR, blobs={hashlib.sha256(b"files").hexdigest(): b"files"})
        before = rows_of(store, with_hash=True)
        with _raw(url) as conn, pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute(statement)
        assert rows_of(store, with_hash=True) == before
    finally:
        store.close()


def test_r18_a_ledger_per_schema_one_database_for_several_tenants(postgres: PostgresServer, tmp_path: Path) -> None:
    base = postgres.database("tenants")
    with Ledger.open(f"{base}?schema=sales", warehouse=tmp_path / "sales") as sales, \
            Ledger.open(f"{base}?schema=crm", warehouse=tmp_path / "crm") as crm:
        sales.create_table("db.orders")
        crm.create_table("db.contacts")
        crm.create_table("db.leads")
        assert [t.name for t in sales.tables()] == ["db.orders"] and sales.event_count() == 1
        assert [t.name for t in crm.tables()] == ["db.contacts", "db.leads"]
        assert sales.warehouse == str(tmp_path / "sales") and crm.warehouse == str(tmp_path / "crm")


def test_r18_bad_addresses_are_typed_one_line_refusals_that_make_nothing(postgres: PostgresServer,
                                                                        tmp_path: Path) -> None:
    missing = postgres.url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(LedgerNotFound, match=r"the database no_such_database does not exist; create it first"):
        Ledger.open(missing, warehouse=tmp_path)
    with pytest.raises(InvalidArgument, match="is not a PostgreSQL ledger URL"):
        Ledger.open("postgresql://127.0.0.1:5432/", warehouse=tmp_path)
    closed_port = PostgresProxy(1)  # a port nothing listens behind: connections are cut at once
    closed_port.close()
    with pytest.raises(LedgerUnavailable, match="cannot reach the PostgreSQL server"):
        Ledger.open(f"postgresql://postgres@127.0.0.1:{closed_port.port}/x", warehouse=tmp_path)
    url = fresh_url()
    with pytest.raises(InvalidArgument, match="needs its warehouse root: give warehouse="):
        Ledger.open(url)
    with pytest.raises(LedgerNotFound, match="there is no ledger at"):
        Ledger.open(url, create=False)
    with _raw(url) as conn:  # refused before anything was made
        assert conn.execute("SELECT to_regclass('meta')").fetchone()[0] is None
    for secret in ("postgresql://postgres:hunter2@127.0.0.1:1/x",):
        with pytest.raises(LedgerUnavailable) as refused:
            Ledger.open(secret, warehouse=tmp_path)
        assert "hunter2" not in str(refused.value)  # a password is never shown


def test_r18_a_commit_whose_answer_is_lost_is_found_not_appended_twice(postgres: PostgresServer,
                                                                       tmp_path: Path) -> None:
    """The network fails after COMMIT reached the server: the store reconnects, finds its attempt
    id in the log, and answers with the rows that landed; the command is there once."""
    proxy = PostgresProxy(postgres.port)
    url = fresh_url()
    path = url.split(str(postgres.port), 1)[1]
    try:
        with Ledger.open(proxy.url(path), warehouse=tmp_path) as led:
            led.create_table("sales.orders")
            proxy.lose_answer_to_commit()
            dropped = led.drop_table("sales.orders")
            assert proxy.fired == 1 and dropped.state == "dropped"
            assert [e.type for e in led.history()] == ["TableCreated", "TableDropped"]
            proxy.lose_commit()  # this time the COMMIT never arrives: rolled back, made again once
            assert led.undrop_table("sales.orders").state == "live"
            assert proxy.fired == 2
            assert [e.type for e in led.history()] == ["TableCreated", "TableDropped", "TableUndropped"]
            assert led.verify().events == 3
    finally:
        proxy.close()


def test_r18_a_lost_answer_while_the_server_stays_away_says_the_outcome_is_unknown_and_how_to_learn_it(
        postgres: PostgresServer, tmp_path: Path) -> None:
    """A fleet operator stopped the server mid-command for longer than the store reconnects: the
    caller got "could not reconnect" for a command that had in fact been recorded, and no way to
    learn which. Now it is ``OutcomeUnknown`` with the attempt's id, and ``outcome`` says which once
    the server is back: recorded (its answer was lost) or not (its COMMIT was)."""
    from ledger import OutcomeUnknown
    proxy = PostgresProxy(postgres.port)
    path = fresh_url().split(str(postgres.port), 1)[1]
    try:
        with Ledger(PostgresStore(proxy.url(path), reconnect_for=0.5), warehouse=str(tmp_path)) as led:
            led.create_table("sales.orders")
            for lose, recorded in ((proxy.lose_answer_to_commit, True), (proxy.lose_commit, False)):
                before = led.event_count()
                lose()
                proxy.refusing = True
                with pytest.raises(OutcomeUnknown) as unknown:
                    led.create_table(f"sales.t{int(recorded)}")
                said = str(unknown.value)
                assert "may or may not have been recorded" in said and f"ledger.outcome({unknown.value.attempt!r})" \
                    in said and "\n" not in said
                proxy.refusing = False
                assert led.outcome(unknown.value.attempt) is recorded
                assert led.event_count() == before + recorded
                assert [t.name for t in led.tables()].count(f"sales.t{int(recorded)}") == int(recorded)
            with pytest.raises(InvalidArgument, match="an attempt is the id an OutcomeUnknown gives"):
                led.outcome("")
            assert led.outcome("no-such-attempt") is False
            led.verify()
    finally:
        proxy.close()
    with Ledger.open(":memory:") as local, pytest.raises(InvalidArgument, match="is not a shared store"):
        local.outcome("abc")


def test_r10_r18_a_server_restarted_under_a_ledger_in_use_loses_nothing(tmp_path: Path) -> None:
    """Stopped in immediate mode (as a crash) and started again between commands: the ledger
    reconnects, every acknowledged command is there once, and the chain verifies."""
    server = PostgresServer(fsync=True)
    try:
        url = server.database()
        with Ledger.open(url, warehouse=tmp_path) as led:
            for i in range(5):
                led.create_table(f"a.t{i}")
            server.restart("immediate")
            led.drop_table("a.t0")
            assert led.table("a.t1").name == "a.t1"
            server.restart("immediate")
            assert [t.name for t in led.dropped_tables()] == ["a.t0"]
            assert led.verify().events == 6
    finally:
        server.close()


def test_r18_the_command_line_takes_a_url(postgres: PostgresServer, tmp_path: Path) -> None:
    url = fresh_url()
    env = {**os.environ, "RETENTION_LEDGER": url}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "retention_ledger.cli", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    refused = cli("create", "sales.orders")
    assert refused.returncode == 1 and refused.stderr.startswith("error: InvalidArgument: ") \
        and len(refused.stderr.strip().splitlines()) == 1
    made = cli("--warehouse", str(tmp_path / "wh"), "create", "sales.orders")
    assert made.returncode == 0, made.stderr
    assert cli("drop", "sales.orders").returncode == 0
    listed = cli("--json", "show-dropped")
    assert listed.returncode == 0 and "sales.orders" in listed.stdout
    missing = cli("--ledger", postgres.url.rsplit("/", 1)[0] + "/nowhere", "tables")
    assert missing.returncode == 1 and missing.stderr.startswith("error: LedgerNotFound: ")


def _busy_ledger(path: str | Path, tmp_path: Path) -> None:
    """A few tables, drops, an undrop, a watermark and a committed write (an attachment)."""
    with Ledger.open(path, warehouse=tmp_path / "warehouse") as led:
        for i in range(4):
            led.create_table(f"sales.t{i}")
        led.drop_table("sales.t1")
        led.undrop_table("sales.t1")
        led.drop_table("sales.t2")
        write = led.begin_write("sales.t0")
        led.commit_write(write.id, [(f"{write.relative_folder}/part-0.parquet", 128)])


def test_r16_r18_a_copy_to_postgresql_and_back_keeps_every_hash_and_verifies_against_an_old_checkpoint(
        postgres: PostgresServer, tmp_path: Path) -> None:
    from ledger import copy_ledger
    original = tmp_path / "tenant.db"
    _busy_ledger(original, tmp_path)
    with Ledger.open(original) as led:
        checkpoint = led.checkpoint()
        rows = list(led.store.read(0, with_hash=True))
        tables = [(t.id, t.name, t.location) for t in led.tables()]
    url = fresh_url()
    report = copy_ledger(original, url)
    assert report.events == len(rows) and report.attachments == 1 and report.head == rows[-1][8]
    back = tmp_path / "back.db"
    copy_ledger(url, back)
    for where in (url, back):
        with Ledger.open(where) as led:
            assert list(led.store.read(0, with_hash=True)) == rows  # seq, time, actor, hash: all unchanged
            assert led.verify(against=checkpoint).checkpoint == checkpoint
            assert [(t.id, t.name, t.location) for t in led.tables()] == tables  # same root, same locations
            assert led.versions("sales.t0")[0].files[0].size == 128  # the attachment came too


def test_r18_a_copy_refuses_a_destination_with_events_and_a_source_edited_since(postgres: PostgresServer,
                                                                                tmp_path: Path) -> None:
    from ledger import LedgerCorrupt, copy_ledger
    source = tmp_path / "tenant.db"
    _busy_ledger(source, tmp_path)
    url = fresh_url()
    copy_ledger(source, url)
    with _raw(url) as conn:
        before = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    with pytest.raises(InvalidArgument, match="already holds .* events; a ledger is copied only into an empty one"):
        copy_ledger(source, url)
    with _raw(url) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == before
    import sqlite3
    raw = sqlite3.connect(source)
    raw.execute("DROP TRIGGER events_no_update")
    raw.execute("UPDATE events SET actor = 'someone else' WHERE seq = 3")
    raw.commit()
    raw.close()
    elsewhere = fresh_url()
    with pytest.raises(LedgerCorrupt, match="copied event #3 does not carry the hash"):
        copy_ledger(source, elsewhere)
    with _raw(elsewhere) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0
    done = subprocess.run([sys.executable, "-m", "retention_ledger.cli", "copy", str(tmp_path / "missing.db"),
                           fresh_url()], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.startswith("error: LedgerNotFound: there is no ledger at")


def test_r18_a_lost_answer_to_a_commit_with_attachments_is_found_too(postgres: PostgresServer, tmp_path: Path) -> None:
    """A version's commit carries its file list: it takes the append's longer path (a transaction
    of several steps); the answer to its COMMIT is lost, and it is found all the same."""
    proxy = PostgresProxy(postgres.port)
    path = fresh_url().split(str(postgres.port), 1)[1]
    try:
        with Ledger.open(proxy.url(path), warehouse=tmp_path) as led:
            led.create_table("sales.orders")
            write = led.begin_write("sales.orders")
            proxy.lose_answer_to_commit()
            version = led.commit_write(write.id, [(f"{write.relative_folder}/part-0.parquet", 64)])
            assert proxy.fired == 1 and version.number == 1 and version.files[0].size == 64
            assert [e.type for e in led.history()].count("VersionCommitted") == 1
            assert led.verify().events == 3
    finally:
        proxy.close()


# --- what a host does on its clock without appending, held to the server's (R6, R18) -------------

AHEAD = (r"this host's clock reads \S+Z, \d+\.\d s ahead of the PostgreSQL server's \S+Z \(at most 60 s is "
         r"allowed\).*nothing was recorded")
"""``ClockSkew``'s message, the one a command on that clock is refused with."""


def test_r6_r18_a_host_whose_clock_is_refused_is_refused_maintain_and_a_dry_run_plan_too(
        postgres: PostgresServer, tmp_path: Path) -> None:
    """Host B's clock runs 8 days ahead, and its commands are refused (``ClockSkew``). Its
    ``maintain`` took the hosts' upkeep lease all the same, on its own clock: it found host A's
    running one ended (A's lease ends two minutes after A's now) and ran beside it. Its dry run
    (``plan_vacuum``, which ``spark_ops.vacuum(dry_run=True)`` shows) listed as due the purge of a
    table A had dropped a minute before. Both are refused now, with the commands' message."""
    url = fresh_url()
    with Ledger.open(url, warehouse=tmp_path, actor="host-a") as a:
        a.create_table("sales.orders")
        a.drop_table("sales.orders")
        fast = ManualClock(datetime.now(timezone.utc) + timedelta(days=8))
        with Ledger.open(url, clock=fast, actor="host-b") as b:
            with pytest.raises(ClockSkew, match=AHEAD):
                b.create_table("crm.contacts")
            with pytest.raises(ClockSkew, match=AHEAD):
                b.plan_vacuum()
            beside: list[object] = []

            def while_a_maintains(done: int, total: int) -> None:  # A holds the upkeep lease here
                try:
                    beside.append(b.maintain())
                except ClockSkew as exc:
                    beside.append(exc)
            assert a.maintain(progress=while_a_maintains).done
            assert len(beside) == 1 and isinstance(beside[0], ClockSkew) and re.search(AHEAD, str(beside[0])), beside
            assert a.plan_vacuum().purges == ()  # on the server's time, nothing is due
        # What the check prevents, let through on purpose (max_clock_skew=None): the same plan
        # shows A's table as due.
        with Ledger.open(url, clock=fast, max_clock_skew=None, actor="host-b") as told:
            assert [t.name for t in told.plan_vacuum().purges] == ["sales.orders"]


# --- what hosts appending side by side ask the server (R18) ---------------------------------------

@contextlib.contextmanager
def _statements(led: Ledger) -> Iterator[list[str]]:
    """What the ledger's connection runs on the server in the block, a round trip each: for every
    statement executed, the text the client sent for it (libpq's own trace of the protocol)."""
    conn = led.runner.store._conn  # type: ignore[attr-defined]
    sent: list[str] = []
    with tempfile.TemporaryFile("w+") as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        try:
            yield sent
        finally:
            conn.pgconn.untrace()
            trace.seek(0)
            parsed = "(a statement prepared before)"
            for line in trace.read().splitlines():
                if line.startswith("F") and "\tParse\t" in line:
                    parsed = line
                elif line.startswith("F") and ("\tExecute\t" in line or "\tQuery\t" in line):
                    sent.append(line if "\tQuery\t" in line else parsed)


_ON_TIP, _BEHIND = "INSERT INTO attempts SELECT", "ledger_append_v2("
"""The statement of a host that appends on the head it knows, and of one that another host got ahead of."""


def test_r18_a_host_another_got_ahead_of_appends_and_catches_up_in_one_round_trip(postgres: PostgresServer,
                                                                                  tmp_path: Path) -> None:
    """Host A appends while host B does too: one statement appends A's event and brings back B's,
    and A's state holds both without reading the log again. It was three: A's statement on the
    head it knew (refused: B had moved it), the append, then the read of B's events. A tries the
    head it knows once after appending alone, and again once B is quiet."""
    url = fresh_url()
    Ledger.open(url, warehouse=tmp_path).close()
    with Ledger.open(url, actor="host-a") as a, Ledger.open(url, actor="host-b") as b:
        with _statements(a) as opened:  # on the head it opened on
            a.create_table("a.first")
        b.create_table("b.first")
        with _statements(a) as overtaken:
            a.create_table("a.second")
        b.create_table("b.second")
        b.create_table("b.third")
        with _statements(a) as beside:
            a.create_table("a.third")
        assert a.runner.held.seq == 6 and a.runner.held.version("catalog:b") == 3  # B's three, and its own
        with _statements(a) as caught_up:  # B is quiet: the append finds nothing new
            a.create_table("a.fourth")
        with _statements(a) as alone:
            a.create_table("a.fifth")
        assert [[_ON_TIP in s, _BEHIND in s] for s in overtaken] == [[True, False], [False, True]], overtaken
        assert [[_BEHIND in s for s in sent] for sent in (beside, caught_up)] == [[True], [True]], (beside, caught_up)
        assert [[_ON_TIP in s for s in sent] for sent in (opened, alone)] == [[True], [True]], (opened, alone)
        with Ledger.open(url) as fresh:
            assert [t.name for t in a.tables()] == [t.name for t in fresh.tables()] == \
                ["a.fifth", "a.first", "a.fourth", "a.second", "a.third", "b.first", "b.second", "b.third"]
            assert fresh.verify().chained


def test_r18_a_host_further_behind_than_one_append_brings_back_reads_the_rest(postgres: PostgresServer,
                                                                             tmp_path: Path) -> None:
    """More events than an append returns (``_AHEAD``) came since host A's state: it reads them all."""
    url = fresh_url()
    Ledger.open(url, warehouse=tmp_path).close()
    behind = backend._AHEAD + 3
    b = PostgresStore(url)
    try:
        with Ledger.open(url, actor="host-a") as a:
            a.create_table("a.first")
            for n in range(behind):
                b.append([NewEvent("catalog:b", "TableCreated", 1, _created(f"b.t{n}"))], {}, time.time_ns() // 1000,
                         "host-b")
            with _statements(a) as sent:
                a.create_table("a.second")
            # Its head, refused; the append, with the first _AHEAD of B's; then a read of the rest.
            assert [_BEHIND in s for s in sent] == [False, True, False] and "FROM events WHERE seq >" in sent[2], sent
            assert a.runner.held.seq == behind + 2 and a.runner.held.version("catalog:b") == behind
            assert len(a.tables()) == behind + 2
    finally:
        b.close()


def _created(name: str) -> str:
    """A ``TableCreated`` event's payload, as a host appends it."""
    table_id = uuid.uuid4().hex[:16]
    return json.dumps({"table_id": table_id, "name": name, "path": table_id})


def test_r18_a_ledger_made_before_ledger_append_v2_gets_it_and_a_host_of_that_release_appends_beside(
        postgres: PostgresServer, tmp_path: Path) -> None:
    """A ledger made by 0.4 has only ``ledger_append_v1``: opening it adds ``ledger_append_v2`` (once,
    under the ledger's lock), and ``ledger_append_v1`` stays as it was, so a host still running 0.4
    appends beside one running this release."""
    url = fresh_url()
    Ledger.open(url, warehouse=tmp_path).close()
    with _raw(url) as conn:
        conn.execute("DROP FUNCTION ledger_append_v2")
    with Ledger.open(url, actor="host-a") as a, Ledger.open(url, actor="host-b") as b, _raw(url) as old_host:
        a.create_table("a.first")
        old_host.execute(backend._APPEND, (  # an append as 0.4 makes it: its hash made by ledger_append_v1
            a.runner.store._lock_key, None, ["catalog", "catalog:old"], [0, 0], ["catalog:old"],  # type: ignore
            ["TableCreated"], [1], [_created("old.t")], time.time_ns() // 1000, "host-old", uuid.uuid4().hex, None,
            [], []))
        b.create_table("b.first")
        with _statements(a) as behind:
            a.create_table("a.second")
        assert [_BEHIND in s for s in behind] == [False, True], behind
        assert a.runner.held.version("catalog:old") == 1 and a.runner.held.version("catalog:b") == 1
        assert [t.name for t in a.tables()] == ["a.first", "a.second", "b.first", "old.t"]
        assert a.verify().chained
