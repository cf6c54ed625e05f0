"""Erasure requests in the ledger (R25, issue 47 items 2-4, the ledger's half): no Spark.

A request records the erasure set (keys and sizes of the files that held the rows); from then on
no read, restore, undrop or pin reaches a version or an instance holding one (``VersionErased``,
naming the request); the files go by the normal rules, marks first; ``erasure`` says file by file
which run deleted each or why it still waits; ``prove_erasure`` is one bundle the offline check
(``python -m ledger.audit prove-erasure``) accepts only whole. The vacuum here is its driver's
calls made by hand, deleting exactly the files the ledger's plan names (an honest executor).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
import zlib
from datetime import timedelta
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from ledger import (
    Conflict, ErasureInProgress, ErasureProof, InvalidArgument, Ledger, LedgerCorrupt, ManualClock, NotDeleted,
    PinEnded, VersionErased,
)
from ledger.errors import InvalidName, TableNotFound
from tests.conftest import T0
from tests.pg import MANUAL
from vacuum_work import Part, Result
from vacuum_work.leaves import leaf_input, tree_root

DAY = timedelta(days=1)
NAME = "crm.users"
BOTH_STORES = True  # the tests that take ``ledger`` run on SQLite and on a PostgreSQL server (R18)


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock):
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as ledger:
        yield ledger


def commit(led: Ledger, *names: str, mode: str = "append", removes: tuple[str, ...] = (),
           name: str = NAME) -> list[str]:
    """A write of files ``names`` (10 bytes each), committed by hand: their keys (relative to the root)."""
    w = led.begin_write(name)
    paths = [f"{w.relative_folder}/{n}" for n in names]
    led.commit_write(w.id, [(p, 10) for p in paths], mode=mode, removes=removes)
    table_id = led.table(name).id
    return [f"{table_id}/{p}" for p in paths]


def rel(key: str) -> str:
    """A key relative to its table's location (as ``removes`` and ``versions`` give paths)."""
    return key.split("/", 1)[1]


def vacuum(led: Ledger, **options) -> str | None:
    """A vacuum run carried out by hand: start it (marks and watermarks first), delete exactly what
    its plan names (the files the ledger knows of each purge and each expired folder), record one
    receipt part over them, and finish. Returns the run id (None: nothing to do)."""
    run = led.start_vacuum(override_floor=True, **options)
    plan = run.plan
    if plan.run_id is None:
        return None
    keys: dict[str, int] = {}
    for purge in plan.purges:
        for v in led.versions(table_id=purge.table_id):
            keys.update((f"{purge.table_id}/{f.path}", f.size) for f in v.files)
    for expiry in plan.expiries:
        for folder in expiry.folders:
            if folder.listed is not None:
                keys.update((f"{expiry.table_id}/{p}", s) for p, s in led._manifest(folder.listed))
    if keys:
        leaves = sorted(keys.items())
        entries = [leaf_input(k, s) for k, s in leaves]
        data = zlib.compress(b"".join(entries))
        part = Part(leaves[0][0], leaves[-1][0], len(leaves), sum(keys.values()), tree_root(entries).hex(),
                    hashlib.sha256(data).hexdigest(), "scratch")
        run.record_deleted([(part, data)])
    run.finish([Result(p, 1, 10) for p in plan.purges] + [Result(e, len(e.folders), 10) for e in plan.expiries])
    return run.run_id


@pytest.fixture
def erased(led: Ledger, clock: ManualClock):
    """A table whose user-42 rows sat in a dropped instance of its name (``x``), in a file of version 1
    only (``a``, overwritten by version 2), and in a file of the current version (``c``), which a
    replace (version 3) rewrote without them (``c2``). Then the request, naming all three."""
    led.create_table(NAME)
    x, _y = commit(led, "x", "y")
    led.drop_table(NAME)
    clock.advance(DAY)
    led.create_table(NAME)
    a, _b = commit(led, "a", "b")
    clock.advance(DAY)
    c, d = commit(led, "c", "d", mode="overwrite")
    clock.advance(DAY)
    [c2] = commit(led, "c2", mode="replace", removes=(rel(c),))
    clock.advance(DAY)
    events = led.event_count()
    status = led.request_erasure(NAME, predicate="user_id = 42", reason="GDPR art. 17, ticket 991",
                                 files=[(x, 10), (a, 10), (c, 10)], replaced_by=3)
    assert led.event_count() == events + 1
    return {"x": x, "a": a, "c": c, "d": d, "c2": c2, "status": status}


# --- the request, and what it makes unreadable ---------------------------------------------

def test_r25_a_request_records_its_set_and_names_every_version_holding_a_file_of_it(led, erased) -> None:
    status = erased["status"]
    live = led.table(NAME).id
    dropped = led.dropped_tables(name=NAME)[0].id
    assert sorted(status.versions) == sorted([f"{dropped}/1", f"{live}/1", f"{live}/2"])
    assert {f.key for f in status.files} == {erased["x"], erased["a"], erased["c"]}
    assert not status.done and all(f.why for f in status.files)
    assert (status.table, status.table_id, status.predicate, status.replaced_by) == (NAME, live, "user_id = 42", 3)
    assert [v.erased_by for v in led.versions(NAME)] == [None, status.request_id, status.request_id]
    [entry] = led.history(type="ErasureRequested")
    assert entry.data["count"] == 3 and entry.data["bytes"] == 30 and "3 files (30 B)" in entry.text
    led.verify()


def test_r25_no_read_restore_undrop_or_pin_reaches_an_erased_version_and_each_refusal_records_nothing(
        led, erased) -> None:
    request_id = erased["status"].request_id
    dropped = led.dropped_tables(name=NAME)[0]
    events = led.event_count()
    attempts = {
        "read version 1": lambda: led.version(NAME, version=1),
        "read version 2": lambda: led.version(NAME, version=2),
        "read as of version 2's time": lambda: led.version(NAME, as_of=led.versions(NAME)[1].committed_at),
        "restore": lambda: led.restore_table(NAME, version=2),
        "pin": lambda: led.pin(NAME, version=1),
        "pin the dropped instance": lambda: led.pin(table_id=dropped.id),
        "undrop": lambda: led.undrop_table(NAME, table_id=dropped.id, new_name="crm.users_old"),
    }
    for what, attempt in attempts.items():
        with pytest.raises(VersionErased) as refused:
            attempt()
        assert refused.value.request_id == request_id, what
        assert request_id in str(refused.value) and "\n" not in str(refused.value), what
        assert led.event_count() == events, what  # nothing recorded
    assert {f.path for f in led.version(NAME).files} == {rel(erased["d"]), rel(erased["c2"])}  # the current reads
    with led.pin(NAME) as pin:
        assert pin.version == 3


def test_r25_an_erasure_takes_versions_never_the_table_dropped_it_comes_back_with_its_clean_current_version(
        ledger: Ledger, clock) -> None:
    """Issue 57 item 1: a table whose rows were erased (the current files rewritten, the older versions
    erased) is dropped and undropped like any other (by name, by id, under a new name, pinned whole,
    with its database), each time with its clean current version; its erased versions stay refused one
    by one. On SQLite and PostgreSQL."""
    ledger.create_table(NAME)
    [a] = commit(ledger, "a", name=NAME)
    clock.advance(DAY)
    [c2] = commit(ledger, "c2", mode="replace", removes=(rel(a),), name=NAME)
    table_id = ledger.table(NAME).id
    status = ledger.request_erasure(NAME, predicate="user_id = 3", reason="GDPR", files=[(a, 10)], replaced_by=2)
    assert status.versions == (f"{table_id}/1",)

    def back(table) -> None:
        assert table.id == table_id and table.current_version == 2
        assert [f.path for f in ledger.version(table.name).files] == [rel(c2)]
        with pytest.raises(VersionErased):
            ledger.version(table.name, version=1)

    ledger.drop_table(NAME)
    back(ledger.undrop_table(NAME))
    ledger.drop_table(NAME)
    back(ledger.undrop_table(NAME, table_id=table_id))
    ledger.drop_table(NAME)
    back(ledger.undrop_table(NAME, table_id=table_id, new_name="crm.users_back"))
    ledger.drop_table("crm.users_back")
    with ledger.pin(table_id=table_id) as pin:  # a dropped instance pinned whole: its clean current version
        assert pin.version == 2
    back(ledger.undrop_table("crm.users_back", new_name=NAME))
    ledger.drop_database("crm")
    [undropped] = ledger.undrop_database("crm")
    back(ledger.instance(undropped) if isinstance(undropped, str) else undropped)
    ledger.verify()


def test_r25_a_dropped_instance_whose_current_version_holds_an_erased_file_stays_dropped(led, clock) -> None:
    """The undrop would make the erased file the table's again: refused, naming the request."""
    led.create_table(NAME)
    [x] = commit(led, "x")
    led.drop_table(NAME)
    request = led.request_erasure(NAME, predicate="id = 1", reason="r", files=[(x, 10)])
    events = led.event_count()
    for attempt in (lambda: led.undrop_table(NAME), lambda: led.pin(table_id=led.dropped_tables()[0].id)):
        with pytest.raises(VersionErased, match=request.request_id):
            attempt()
    assert led.event_count() == events


def test_r25_undrop_of_a_database_holding_an_erased_instance_is_refused(led, clock) -> None:
    led.create_table(NAME)
    [x] = commit(led, "x")
    led.drop_database("crm")
    led.request_erasure(NAME, predicate="id = 1", reason="r", files=[(x, 10)])
    events = led.event_count()
    with pytest.raises(VersionErased):
        led.undrop_database("crm")
    assert led.event_count() == events


def test_r4_r25_a_restore_decided_before_a_request_lands_is_refused_when_it_tries_to_append(led, clock) -> None:
    """A restore and a request that erases the version it restores have one order (R4): the restore
    decided first is refused at its append (the request moved the erasures' stream), and decided
    again, it is ``VersionErased``."""
    from ledger.core.versions import RestoreVersion
    from ledger.errors import Conflict
    led.create_table(NAME)
    [a] = commit(led, "a")
    clock.advance(DAY)
    commit(led, "b", mode="overwrite")
    with Ledger.open(led.path, clock=clock, actor="other") as other:
        prepared = other.runner.prepare(RestoreVersion(NAME, 1))
        assert prepared.decision.events
        led.request_erasure(NAME, predicate="user_id = 42", reason="GDPR", files=[(a, 10)])
        events = led.event_count()
        with pytest.raises(Conflict):
            other.runner.commit(prepared)
        with pytest.raises(VersionErased):
            other.restore_table(NAME, version=1)
        assert led.event_count() == events


@pytest.mark.parametrize("case", ["unknown-key", "wrong-size", "current-version", "expired-version", "twice",
                                  "no-table", "bad-name", "empty-reason", "replaced-by-nothing"])
def test_r25_a_request_that_cannot_be_is_refused_typed_and_records_nothing(led, clock, case: str) -> None:
    led.create_table(NAME)
    [a] = commit(led, "a")
    clock.advance(DAY)
    [b] = commit(led, "b", mode="overwrite")
    if case == "expired-version":
        clock.advance(timedelta(days=30))
        led.advance_retention_mark(NAME, led.now())
    events = led.event_count()
    name, files, reason, replaced_by = NAME, [(a, 10)], "because", None
    if case == "unknown-key":
        files = [(f"{led.table(NAME).id}/_writes/nope/z.parquet", 10)]
    elif case == "wrong-size":
        files = [(a, 11)]
    elif case == "current-version":
        files = [(b, 10)]
    elif case == "twice":
        files = [(a, 10), (a, 10)]
    elif case == "no-table":
        name = "crm.nobody"
    elif case == "bad-name":
        name = "no dots here"
    elif case == "empty-reason":
        reason = " "
    elif case == "replaced-by-nothing":
        replaced_by = 7
    expected = {"no-table": TableNotFound, "bad-name": InvalidName}.get(case, InvalidArgument)
    with pytest.raises(expected) as refused:
        led.request_erasure(name, predicate="user_id = 42", reason=reason, files=files, replaced_by=replaced_by)
    message = str(refused.value)
    assert "\n" not in message
    if expected is InvalidArgument and case not in ("empty-reason",):
        assert "nothing was recorded" in message
    assert led.event_count() == events


def test_r25_a_predicate_that_matches_nothing_records_the_request_with_an_empty_set(led) -> None:
    led.create_table(NAME)
    commit(led, "a")
    events = led.event_count()
    status = led.request_erasure(NAME, predicate="user_id = 404", reason="asked", files=[])
    assert led.event_count() == events + 1
    assert status.files == () and status.versions == () and status.done
    assert led.version(NAME).number == 1  # nothing made unreadable
    bundle = led.prove_erasure(status.request_id)
    assert bundle.files == () and bundle.proofs.answers == ()


# --- R25 wins over R21: a pin on what a request erases ends with it ---------------------------------

def test_r25_r21_a_pin_on_an_erased_version_ends_with_the_request_and_is_never_renewed(ledger: Ledger,
                                                                                         clock) -> None:
    """Issue 57 item 3: a reader's pin on version 1, taken before the request, holds nothing from the
    moment the request lands (recorded with it, ``PinOverridden``): it is not listed, a renewal is
    ``PinEnded`` saying why (one alone, or left out of a batch), and the mark moves past version 1.
    A pin on a version the request left readable holds as before."""
    ledger.create_table(NAME)
    [a] = commit(ledger, "a")
    clock.advance(DAY)
    [b] = commit(ledger, "b", mode="overwrite")
    clock.advance(DAY)
    commit(ledger, "c", mode="overwrite")
    on_1, on_2 = ledger.pin(NAME, version=1), ledger.pin(NAME, version=2)
    request = ledger.request_erasure(NAME, predicate="user_id = 3", reason="GDPR", files=[(a, 10)])
    assert [p.id for p in ledger.pins(NAME)] == [on_2.id]
    [overridden] = ledger.history(type="PinOverridden")
    assert overridden.data == {"pin_id": on_1.id, "table_id": ledger.table(NAME).id, "request_id": request.request_id}
    assert overridden.seq == request.seq + 1  # one append with the request
    events = ledger.event_count()
    with pytest.raises(PinEnded, match=f"erasure request {request.request_id} erased the version it holds") as ended:
        on_1.renew()
    assert "R25" in str(ended.value) and "\n" not in str(ended.value)
    assert [v.live for v in ledger.renew_pins([on_1.id, on_2.id])] == [False, True]
    assert ledger.event_count() == events + 1  # the batch renewed only the pin that holds
    ledger.advance_retention_mark(NAME, ledger.versions(NAME)[2].committed_at)  # past version 1: no pin holds it
    with pytest.raises(Exception, match=on_2.id):
        ledger.advance_retention_mark(NAME, ledger.versions(NAME)[1].committed_at)  # version 2's pin still holds
    on_1.release()  # ended already: changes nothing
    ledger.verify()


def test_r25_r16_verify_refuses_a_pin_ended_for_a_request_that_did_not_erase_its_version(tmp_path: Path,
                                                                                          clock) -> None:
    from tests.forge import forge
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        led.create_table(NAME)
        [a] = commit(led, "a")
        clock.advance(DAY)
        commit(led, "b", mode="overwrite")
        pin = led.pin(NAME, version=2)
        request = led.request_erasure(NAME, predicate="p", reason="r", files=[(a, 10)])
        table_id = led.table(NAME).id
    forge(path, stream=f"data:{table_id}", type="PinOverridden",
          payload=json.dumps({"pin_id": pin.id, "table_id": table_id, "request_id": request.request_id},
                             separators=(",", ":")))
    with pytest.raises(LedgerCorrupt, match="did not erase the version it holds"):
        with Ledger.open(path, clock=clock) as led:  # the fold refuses it as it opens (verify would too)
            led.verify()


# --- the request decided on what was scanned (issue 57 item 2) -----------------------------------

def test_r4_r25_a_request_is_refused_if_a_commit_landed_since_its_set_was_scanned(ledger_path, ledger: Ledger,
                                                                                   clock) -> None:
    """The engine scanned version 2 for the rows; another writer's append (version 3) lands before the
    request is recorded, perhaps holding the same person's rows: ``Conflict``, nothing recorded, so the
    engine scans version 3 and records again. Decided where the request is appended: a commit that
    lands between the decision and its append refuses it too (R4)."""
    from ledger.core.erasures import RequestErasure
    ledger.create_table(NAME)
    [a] = commit(ledger, "a")
    clock.advance(DAY)
    commit(ledger, "b", mode="overwrite")
    table_id = ledger.table(NAME).id
    commit(ledger, "late")  # version 3, not scanned
    events = ledger.event_count()
    with pytest.raises(Conflict, match="changed since the erasure set was found"):
        ledger.request_erasure(NAME, predicate="user_id = 3", reason="GDPR", files=[(a, 10)], scanned={table_id: 2})
    assert ledger.event_count() == events
    status = ledger.request_erasure(NAME, predicate="user_id = 3", reason="GDPR", files=[(a, 10)],
                                    scanned={table_id: 3})
    assert status.versions == (f"{table_id}/1",)
    with Ledger.open(ledger_path, clock=clock, actor="other", max_clock_skew=MANUAL) as other:
        prepared = other.runner.prepare(RequestErasure("r2", (NAME,), ("",), 0, b"{}", "GDPR", (), ((table_id, 3),),
                                                       ()))
        commit(ledger, "later")
        with pytest.raises(Conflict):
            other.runner.commit(prepared)
    ledger.verify()


def test_r25_r4_a_fence_holds_other_commits_off_until_its_request_is_recorded(ledger_path, ledger: Ledger,
                                                                               clock) -> None:
    """An engine that lost its race once holds the table's commits off (``fence_erasure``) while it
    scans the last commits and records: another writer's commit waits for the request (it is not
    refused, and not lost), then lands after it; another request's fence is ``ErasureInProgress``."""
    ledger.create_table(NAME)
    [a] = commit(ledger, "a")
    clock.advance(DAY)
    commit(ledger, "b", mode="overwrite")
    table_id = ledger.table(NAME).id
    with Ledger.open(ledger_path, clock=clock, actor="writer", max_clock_skew=MANUAL) as writer:
        w = writer.begin_write(NAME)
        fence = ledger.fence_erasure(NAME)
        with pytest.raises(ErasureInProgress, match=fence.request_id) as refused:
            writer.fence_erasure(NAME)
        assert refused.value.request_id == fence.request_id and "\n" not in str(refused.value)
        landed: list = []
        waiting = threading.Thread(target=lambda: landed.append(
            writer.commit_write(w.id, [(f"{w.relative_folder}/late", 10)])))
        waiting.start()
        time.sleep(1.5)
        assert not landed and ledger.version(NAME).number == 2  # waiting, not refused
        status = ledger.request_erasure(NAME, predicate="user_id = 3", reason="GDPR", files=[(a, 10)],
                                        scanned={table_id: 2}, request_id=fence.request_id)
        waiting.join(60)
        assert [v.number for v in landed] == [3] and ledger.history(type="VersionCommitted")[-1].seq > status.seq
        assert fence.lift() is False  # the request lifted it
    ledger.verify()


def test_r25_a_fence_whose_engine_died_lets_writers_through_at_its_end(ledger: Ledger, clock) -> None:
    ledger.create_table(NAME)
    commit(ledger, "a")
    fence = ledger.fence_erasure(NAME)
    clock.advance(timedelta(minutes=3))  # past its end: nobody renewed it
    commit(ledger, "b")
    assert ledger.version(NAME).number == 2 and fence.lift() is True  # its record was still there to lift
    fence = ledger.fence_erasure(NAME)
    assert fence.lift() is True
    commit(ledger, "c")  # lifted: commits go at once
    ledger.verify()


@pytest.mark.parametrize("case", ["long-predicate", "nul-reason", "long-reason", "bad-name"])
def test_r25_what_a_request_records_is_checked_before_an_engine_does_anything(led, case: str) -> None:
    """Issue 57 item 8: ``check_erasure`` refuses, typed and in one line, what the request would refuse
    of itself, so an engine asks before it rewrites anything."""
    predicate, reason, name = "user_id = 3", "GDPR", NAME
    if case == "long-predicate":  # over 1,000,000 characters: a predicate is not the chain's, but one request's
        predicate = "user_id IN (" + ", ".join(str(100_000 + i) for i in range(150_000)) + ")"
    elif case == "nul-reason":
        reason = "GDPR\x00"
    elif case == "long-reason":
        reason = "x" * 10_001
    else:
        name = "not a name"
    with pytest.raises(InvalidName if case == "bad-name" else InvalidArgument) as refused:
        led.check_erasure(name, predicate=predicate, reason=reason)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 300
    assert led.event_count() == 0


# --- status and proof ---------------------------------------------------------------------

def test_r25_status_says_why_each_file_waits_and_until_when_then_which_run_deleted_it(led, clock, erased) -> None:
    request_id = erased["status"].request_id
    dropped = led.dropped_tables(name=NAME)[0]
    status = {f.key: f for f in led.erasure(request_id).files}
    x, a, c = status[erased["x"]], status[erased["a"]], status[erased["c"]]
    assert "dropped instance" in x.why and x.until == dropped.dropped_at + timedelta(days=7)
    versions = {v.number: v for v in led.versions(NAME)}
    assert "retention" in a.why and a.until == versions[1].superseded_at + timedelta(days=7)
    assert "retention" in c.why and c.until == versions[2].superseded_at + timedelta(days=7)
    with led.pin(NAME, version=3):  # a pin on a version the request left readable holds nothing erased
        pass
    clock.advance(timedelta(days=8))
    run_id = vacuum(led)
    status = {f.key: f for f in led.erasure(request_id).files}
    assert status[erased["x"]].run_id == run_id and status[erased["x"]].deleted_at is not None  # purged
    assert status[erased["a"]].run_id == run_id  # version 1 expired: its write's folder went whole
    # c's write folder is still named by version 3 (it keeps d): the expiry leaves it; c is a trim's
    # (this hand-run vacuum carries out none), due now, and the status says so.
    pending = status[erased["c"]]
    assert not pending.deleted and "the next vacuum deletes it" in pending.why and pending.until is not None
    assert not led.erasure(request_id).done
    led.verify()


def test_r25_one_bundle_proves_the_request_offline_and_an_edited_proof_is_refused(led, clock, tmp_path) -> None:
    led.create_table(NAME)
    [x] = commit(led, "x")
    led.drop_table(NAME)
    led.create_table(NAME)
    [a] = commit(led, "a")
    clock.advance(DAY)
    commit(led, "b", mode="overwrite")
    request = led.request_erasure(NAME, predicate="user_id = 42", reason="GDPR", files=[(x, 10), (a, 10)])
    early = led.prove_erasure(request.request_id)
    assert len(early.proofs.not_deleted) == 2
    clock.advance(timedelta(days=8))
    vacuum(led)
    assert led.erasure(request.request_id).done
    cp = led.checkpoint()
    bundle = led.prove_erasure(request.request_id, checkpoint=cp)
    assert bundle.inclusion is not None and bundle.proofs.verify()
    out, export, checkpoint = tmp_path / "erasure.json", tmp_path / "log.jsonl", tmp_path / "cp.json"
    bundle.write(out)
    led.export(export)
    checkpoint.write_text(cp.to_json())
    ok = _audit("prove-erasure", out, export, checkpoint)
    assert ok.returncode == 0 and "all 2 files of its set deleted" in ok.stdout, ok.stderr

    data = json.loads(out.read_text())  # one file's proof edited: its audit path no longer leads to the root
    data["answers"][0]["leaf_path"] = ["00" * 32]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    refused = _audit("prove-erasure", edited, export, checkpoint)
    assert refused.returncode == 1 and "LedgerCorrupt" in refused.stderr and "was edited" in refused.stderr

    data = json.loads(out.read_text())  # a file left out of the set: the set no longer hashes to the request's
    data["files"], data["answers"] = data["files"][1:], data["answers"][1:]
    short = tmp_path / "short.json"
    short.write_text(json.dumps(data))
    refused = _audit("prove-erasure", short, export, checkpoint)
    assert refused.returncode == 1 and "erasure set is not the one" in refused.stderr

    early_path = tmp_path / "early.json"  # a bundle taken before the vacuum proves nothing yet
    early.write(early_path)
    refused = _audit("prove-erasure", early_path, export, checkpoint)
    assert refused.returncode == 1 and "NotDeleted" in refused.stderr
    assert ErasureProof.read(out).request_id == request.request_id


def test_r25_the_offline_check_in_process_refuses_a_request_edited_in_the_bundle(led, clock, tmp_path) -> None:
    from ledger.audit.offline import verify_erasure
    led.create_table(NAME)
    [a] = commit(led, "a")
    clock.advance(DAY)
    commit(led, "b", mode="overwrite")
    request = led.request_erasure(NAME, predicate="user_id = 42", reason="GDPR", files=[(a, 10)])
    clock.advance(timedelta(days=8))
    vacuum(led)
    cp = led.checkpoint()
    led.export(tmp_path / "log.jsonl")
    bundle = led.prove_erasure(request.request_id)
    verify_erasure(bundle, tmp_path / "log.jsonl", cp)
    for edit in ({"predicate": "user_id = 43"}, {"statement": "00" * 32}, {"reason": "GDPR art. 18"},
                 {"tables": ("crm.other",)}, {"keys": 3}):
        forged = ErasureProof(attrs.evolve(bundle.request, **edit), bundle.files, bundle.proofs)
        with pytest.raises(LedgerCorrupt, match="not the one the log records"):
            verify_erasure(forged, tmp_path / "log.jsonl", cp)
    with pytest.raises(NotDeleted):
        verify_erasure(ErasureProof(bundle.request, bundle.files, type(bundle.proofs)(())), tmp_path / "log.jsonl", cp)


def test_r25_r16_a_request_survives_a_reopen_and_verify(tmp_path: Path, clock) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        led.create_table(NAME)
        [a] = commit(led, "a")
        clock.advance(DAY)
        commit(led, "b", mode="overwrite")
        request_id = led.request_erasure(NAME, predicate="p", reason="r", files=[(a, 10)]).request_id
    with Ledger.open(path, clock=clock) as led:
        with pytest.raises(VersionErased):
            led.version(NAME, version=1)
        assert led.erasure(request_id).files[0].key == a
        led.verify()
        led.maintain()
    with Ledger.open(path, clock=clock) as led:  # from the stored state this time
        with pytest.raises(VersionErased):
            led.restore_table(NAME, version=1)


def _audit(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger.audit", *map(str, args)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])


def test_r25_r16_verify_refuses_a_chained_request_hiding_a_version_that_holds_none_of_its_files(
        tmp_path: Path, clock) -> None:
    """A forger who knows the chain's encoding records a request that makes version 1 unreadable
    for a file only version 2 holds: the fold cannot tell (it holds no file lists); verify can."""
    from tests.forge import forge
    from tests.test_versions import _forge_blob
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        table = led.create_table(NAME)
        commit(led, "a")
        clock.advance(DAY)
        commit(led, "b")
        [c] = commit(led, "c", mode="overwrite")
        led.verify()
    digest = _forge_blob(path, [(c, 10)])
    forge(path, stream="catalog:crm", type="ErasureRequested",
          payload=json.dumps({"request_id": "forged", "table_id": table.id, "name": NAME, "predicate": "p",
                              "reason": "r", "files": digest, "count": 1, "bytes": 10,
                              "versions": [f"{table.id}/1"], "replaced_by": None}, separators=(",", ":")))
    with Ledger.open(path, clock=clock) as led:
        with pytest.raises(LedgerCorrupt, match="makes version .*/1 unreadable, which names no file of its set"):
            led.verify()

HISTORY = st.lists(st.tuples(st.sampled_from(["append", "overwrite", "replace", "restore"]), st.integers(0, 2),
                             st.integers(0, 99)), min_size=2, max_size=10)


@settings(max_examples=40, deadline=None)
@given(before=HISTORY, after=HISTORY, pick=st.lists(st.integers(0, 99), max_size=4))
def test_r25_no_read_restore_or_pin_ever_reaches_a_version_holding_a_file_of_the_set(before, after, pick) -> None:
    """Random histories of appends, overwrites, replaces and restores; a request naming files of the
    kept versions (none of the current one's); more history after it. No version whose files hold
    one of the set is ever read, restored or pinned, and every other kept version still is."""
    clock = ManualClock(T0)
    with Ledger.open(":memory:", clock=clock, actor="prop") as led:
        led.create_table(NAME)

        def play(steps) -> None:
            for kind, count, seed in steps:
                clock.advance(timedelta(minutes=1))
                versions = led.versions(NAME)
                current = versions[0] if versions else None
                if kind == "restore":
                    candidates = [v.number for v in versions if not v.current and v.erased_by is None]
                    if candidates:
                        led.restore_table(NAME, version=candidates[seed % len(candidates)])
                    continue
                paths = sorted(f.path for f in current.files) if current else []
                removes = tuple(paths[seed % len(paths):][:1]) if kind == "replace" and paths else ()
                if kind == "replace" and (current is None or (set(removes) == set(paths) and not count)):
                    continue
                commit(led, *[f"f{seed}-{i}" for i in range(count)], mode=kind, removes=removes)

        play([("append", 1, 0), *before])
        table_id = led.table(NAME).id
        current = {f"{table_id}/{f.path}" for f in led.version(NAME).files}
        kept = sorted({(f"{table_id}/{f.path}", f.size) for v in led.versions(NAME) for f in v.files} -
                      {(k, 10) for k in current})
        chosen = sorted({kept[i % len(kept)] for i in pick}) if kept else []
        request_id = led.request_erasure(NAME, predicate="p", reason="r", files=chosen).request_id
        play(after)
        erased = {k for k, _ in chosen}
        for v in led.versions(NAME):
            holds = bool({f"{table_id}/{f.path}" for f in v.files} & erased)
            assert (v.erased_by == request_id) == holds, v.number
            if holds:
                for attempt in (lambda: led.version(NAME, version=v.number),
                                lambda: led.restore_table(NAME, version=v.number),
                                lambda: led.pin(NAME, version=v.number)):
                    with pytest.raises(VersionErased):
                        attempt()
            else:
                assert led.version(NAME, version=v.number).number == v.number
        led.verify()


# --- issue 59: nothing personal kept in the chain, every request listed --------------------------

def _store_text(ledger: Ledger, path: object) -> bytes:
    """Everything the ledger's store holds, as bytes to search: a SQLite file and its WAL, or every row
    of every table of a PostgreSQL ledger, as text."""
    if isinstance(path, Path):
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    from tests.forge import _Raw
    raw = _Raw(path)
    try:
        tables = [r[0] for r in raw.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r'").fetchall()]
        return b"".join(str(row).encode() for t in tables for row in raw.execute(f'SELECT t::text FROM "{t}" t'))
    finally:
        raw.close()


def test_r25_a_request_keeps_a_commitment_in_the_chain_and_its_keys_only_until_done(ledger_path, ledger: Ledger,
                                                                                      clock, tmp_path) -> None:
    """Issue 59 item 3: the chain holds the SHA-256 of the request's salted statement; the statement
    (the keys, the salt) is shown while the request is open and deleted once it is done, from the
    store's files too; verify, history, as_of and an export keep working; the offline check takes the
    statement and proves the request named exactly those keys. On SQLite and PostgreSQL."""
    ledger.create_table(NAME)
    [a] = commit(ledger, "a")
    clock.advance(DAY)
    commit(ledger, "b", mode="overwrite")
    status = ledger.request_erasure({NAME: "email"}, keys=["u42@x.org", "u97@x.org", "u42@x.org"], reason="GDPR",
                                    files=[(a, 10)])
    assert status.statement is not None and status.statement["keys"] == ["u42@x.org", "u97@x.org"]
    assert status.keys == 2 and status.columns == ("email",) and status.predicate is None
    [entry] = ledger.history(type="ErasureRequested")
    assert "u42@x.org" not in json.dumps(entry.data) and "2 keys" in entry.text
    assert "it names the keys u42@x.org, u97@x.org" in entry.text  # said while the request is open
    assert entry.data["statement"] == status.commitment == hashlib.sha256(
        Path(_written(status, tmp_path)).read_bytes()).hexdigest()
    assert _holds(ledger, ledger_path, "u42@x.org")  # kept while open
    clock.advance(timedelta(days=8))
    vacuum(ledger)  # the request's last file deleted: what it named is forgotten as the run ends
    done = ledger.erasure(status.request_id)
    assert done.done and done.statement is None and done.forgotten_at is not None
    assert not _holds(ledger, ledger_path, "u42@x.org")
    [entry] = ledger.history(type="ErasureRequested")
    assert "u42@x.org" not in entry.text and "2 keys" in entry.text  # only the commitment after
    [forgotten] = ledger.history(type="ErasureForgotten")
    assert forgotten.data["request_id"] == status.request_id
    with pytest.raises(InvalidArgument, match="forgotten"):
        done.write_statement(tmp_path / "late.json")
    ledger.verify()
    assert [v.erased_by for v in ledger.as_of(seq=status.seq).versions(NAME)] == [None, status.request_id]
    cp = ledger.checkpoint()
    ledger.prove_erasure(status.request_id, checkpoint=cp).write(tmp_path / "bundle.json")
    ledger.export(tmp_path / "log.jsonl")
    (tmp_path / "cp.json").write_text(cp.to_json())
    ok = _audit("prove-erasure", tmp_path / "bundle.json", tmp_path / "log.jsonl", tmp_path / "cp.json",
                "--keys", tmp_path / "statement.json")
    assert ok.returncode == 0 and "2 keys (u42@x.org, u97@x.org) in crm.users.email" in ok.stdout, ok.stderr
    other = json.loads((tmp_path / "statement.json").read_text())
    other["keys"] = ["u42@x.org"]  # a statement that is not the one committed to
    (tmp_path / "other.json").write_text(json.dumps(other))
    refused = _audit("prove-erasure", tmp_path / "bundle.json", tmp_path / "log.jsonl", tmp_path / "cp.json",
                     "--keys", tmp_path / "other.json")
    assert refused.returncode == 1 and "not the one erasure request" in refused.stderr


def test_r25_a_statement_a_reader_kept_in_the_wal_leaves_it_at_the_first_append_after_that_reader(
        tmp_path: Path, clock) -> None:
    """A privacy officer found the forgotten keys still in the SQLite WAL while another connection
    (a backup, a BI tool) was reading the file: SQLite cannot truncate the WAL under a reader. Now
    the truncation is tried again, without waiting, after each later append and on close, so the
    keys leave the WAL as soon as the reader has finished and the ledger is used again."""
    import sqlite3
    path = tmp_path / "l.db"
    led = Ledger.open(path, clock=clock, busy_timeout=0.2)
    led.create_table(NAME)
    [a] = commit(led, "a")
    commit(led, "b", mode="overwrite")
    status = led.request_erasure({NAME: "email"}, keys=["u42@x.org"], reason="GDPR", files=[(a, 10)])
    reader = sqlite3.connect(path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM events").fetchone()  # holds a snapshot from before the forget
    led.forget_erasure(status.request_id)
    assert led.erasure(status.request_id).statement is None
    assert b"u42@x.org" in Path(f"{path}-wal").read_bytes()  # SQLite could not truncate it under the reader
    led.create_table("crm.other")  # the reader still reads: the append does not wait on it
    assert b"u42@x.org" in Path(f"{path}-wal").read_bytes()
    reader.rollback()
    led.create_table("crm.third")  # the first append after the reader finished truncates it
    assert b"u42@x.org" not in Path(f"{path}-wal").read_bytes() and b"u42@x.org" not in path.read_bytes()
    reader.close()
    led.verify()
    led.close()


def _holds(ledger: Ledger, path: object, text: str) -> bool:
    """Whether the store holds ``text`` anywhere, as it is or as PostgreSQL shows bytes (hex)."""
    found = _store_text(ledger, path)
    return text.encode() in found or text.encode().hex().encode() in found


def _written(status, tmp_path: Path) -> Path:
    out = tmp_path / "statement.json"
    status.write_statement(out)
    return out


def test_r25_forget_deletes_an_open_requests_statement_at_once_and_changes_nothing_else(led, clock) -> None:
    led.create_table(NAME)
    [a] = commit(led, "a")
    clock.advance(DAY)
    commit(led, "b", mode="overwrite")
    status = led.request_erasure(NAME, predicate="email = 'u3@x.org'", reason="GDPR", files=[(a, 10)])
    assert status.predicate == "email = 'u3@x.org'"
    events = led.event_count()
    after = led.forget_erasure(status.request_id)
    assert after.statement is None and after.predicate is None and after.forgotten_at is not None
    assert not after.done and after.versions == status.versions  # still open: its files go by the rules
    assert led.event_count() == events + 1
    led.forget_erasure(status.request_id)  # again: nothing more to record
    assert led.event_count() == events + 1
    assert b"u3@x.org" not in Path(led.path).read_bytes()
    with pytest.raises(VersionErased):
        led.version(NAME, version=1)
    led.verify()


def test_r25_a_store_redacts_only_a_0_7_request_and_refuses_anything_else_the_same_way(ledger: Ledger) -> None:
    """Redaction is the one change an event ever takes, and only a 0.7 erasure request's (R25): every
    store refuses any other event, or none, with one check and one message, and changes nothing."""
    ledger.create_table(NAME)
    [before] = list(ledger.store.read(0, upto=1))
    for seq in (1, 99):
        with pytest.raises(InvalidArgument, match=f"event #{seq} is no 0.7 erasure request"):
            ledger.store.redact(seq, "{}")
    assert list(ledger.store.read(0, upto=1)) == [before]
    ledger.verify()


def test_r25_r16_a_0_7_request_in_clear_is_forgotten_by_redacting_its_predicate_and_still_verifies(
        ledger_path, tmp_path: Path, clock) -> None:
    """A request recorded by 0.7 holds its predicate in its event. Forgetting it redacts that one field
    in place, recording first the digest of what the event holds from then on: verify, an export and
    the offline check accept it, the predicate is gone from the file, and any other edit of that
    event is still caught."""
    from tests.forge import _Raw, forge
    path = ledger_path
    with Ledger.open(path, clock=clock, max_clock_skew=MANUAL) as led:
        table = led.create_table(NAME)
        [a] = commit(led, "a")
        clock.advance(DAY)
        commit(led, "b", mode="overwrite")
        files = _forge_set(path, [(a, 10)])
    payload = {"request_id": "old07", "table_id": table.id, "name": NAME, "predicate": "email = 'u3@x.org'",
               "reason": "GDPR", "files": files, "count": 1, "bytes": 10, "versions": [f"{table.id}/1"],
               "replaced_by": None}
    seq = forge(path, stream="catalog:crm", type="ErasureRequested", payload=json.dumps(payload, separators=(",", ":")),
                schema_version=1, actor="0.7")
    with Ledger.open(path, clock=clock, max_clock_skew=MANUAL) as led:
        assert led.erasure("old07").predicate == "email = 'u3@x.org'"
        cp_before = led.checkpoint()
        led.forget_erasure("old07")
        assert led.erasure("old07").predicate is None
        report = led.verify(against=cp_before)  # the event's hash is the one the checkpoint covers
        assert report.events == seq + 1
        led.export(tmp_path / "log.jsonl")
        cp = led.checkpoint()
        assert not _holds(led, path, "u3@x.org")
    (tmp_path / "cp.json").write_text(cp.to_json())
    assert _audit("verify", tmp_path / "log.jsonl", tmp_path / "cp.json").returncode == 0
    with Ledger.open(path, clock=clock, max_clock_skew=MANUAL) as led:  # a fresh fold from the redacted log
        assert led.erasure("old07").forgotten_at is not None
    raw = _Raw(path)  # now edit the redacted event further: its reason
    raw.execute("ALTER TABLE events DISABLE TRIGGER events_append_only" if raw.pg else "DROP TRIGGER events_no_update")
    raw.execute("UPDATE events SET payload = replace(payload, 'GDPR', 'CCPA') WHERE seq = ?", (seq,))
    raw.commit()
    raw.close()
    with pytest.raises(LedgerCorrupt, match=f"event #{seq}"):
        with Ledger.open(path, clock=clock, max_clock_skew=MANUAL) as led:
            led.verify()


def _forge_set(path: object, files: list[tuple[str, int]]) -> str:
    """An erasure set stored as 0.7 stored one (attachments are insert-only), on either store."""
    from ledger.core.versions import manifest
    from tests.forge import _Raw
    digest, data = manifest(files)
    raw = _Raw(path)
    raw.execute("INSERT INTO blobs(digest, data) VALUES (?, ?) ON CONFLICT DO NOTHING", (digest, data))
    raw.commit()
    raw.close()
    return digest


def test_r25_every_request_is_listed_with_by_when_it_is_done(led, clock) -> None:
    """Issue 59 item 4: ``erasures`` lists every request; an open one says by when its last file goes
    under today's retentions (``due``), a done one says so."""
    led.create_table(NAME)
    [a] = commit(led, "a")
    clock.advance(DAY)
    [b] = commit(led, "b", mode="overwrite")
    clock.advance(DAY)
    commit(led, "c", mode="overwrite")
    first = led.request_erasure({NAME: "user_id"}, keys=[1], reason="GDPR", files=[(a, 10)])
    second = led.request_erasure({NAME: "user_id"}, keys=[2], reason="GDPR", files=[(b, 10)])
    listed = led.erasures()
    assert [s.request_id for s in listed] == [first.request_id, second.request_id]
    versions = {v.number: v for v in led.versions(NAME)}
    assert listed[0].due == versions[1].superseded_at + timedelta(days=7)
    assert listed[1].due == versions[2].superseded_at + timedelta(days=7)
    assert [s.request_id for s in led.erasures(open=True)] == [first.request_id, second.request_id]
    clock.advance(timedelta(days=7, hours=1))
    vacuum(led)
    assert led.erasures(open=True) == [] and all(s.done for s in led.erasures(open=False))


def test_r25_the_bundles_inclusion_proof_checks_with_an_rfc_6962_verifier_written_here(led, clock) -> None:
    """Issue 59 item 5: a third party checks the request's inclusion in a checkpoint with its own
    RFC 6962 verifier; this one is written from RFC 9162 section 2.1.3.2 with hashlib alone, none of
    the library's code: leaf = SHA-256(0x00 || event hash), node = SHA-256(0x01 || left || right)."""
    led.create_table(NAME)
    for i in range(6):  # a tree of some size, the request not at its edge
        commit(led, f"f{i}")
    [a] = [f"{led.table(NAME).id}/{f.path}" for f in led.versions(NAME)[-1].files]
    commit(led, "g", mode="overwrite")
    request = led.request_erasure(NAME, predicate="user_id = 1", reason="GDPR", files=[(a, 10)])
    for i in range(5):
        led.create_table(f"crm.t{i}")
    cp = led.checkpoint()
    bundle = json.loads(led.prove_erasure(request.request_id, checkpoint=cp).to_json())
    inclusion = bundle["inclusion"]

    def verify(index: int, size: int, leaf_hash: bytes, path: list[bytes], root: bytes) -> bool:
        fn, sn, r = index, size - 1, leaf_hash  # RFC 9162 2.1.3.2, step by step
        for p in path:
            if sn == 0:
                return False
            if fn % 2 == 1 or fn == sn:
                r = hashlib.sha256(b"\x01" + p + r).digest()
                if fn % 2 == 0:
                    while fn % 2 == 0 and fn != 0:
                        fn, sn = fn >> 1, sn >> 1
            else:
                r = hashlib.sha256(b"\x01" + r + p).digest()
            fn, sn = fn >> 1, sn >> 1
        return sn == 0 and r == root

    event_hash = bytes.fromhex(inclusion["event_hash"])
    leaf_hash = hashlib.sha256(b"\x00" + event_hash).digest()
    path = [bytes.fromhex(p) for p in inclusion["path"]]
    assert inclusion["seq"] == request.seq
    assert verify(request.seq - 1, cp.seq, leaf_hash, path, bytes.fromhex(cp.root))
    assert not verify(request.seq - 1, cp.seq, hashlib.sha256(b"\x00" + bytes(32)).digest(), path,
                      bytes.fromhex(cp.root))
