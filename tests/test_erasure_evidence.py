"""The evidence an erasure request ends with (R16, R20, R25; issue 57 items 5 and 6).

* **Every field the offline check prints or relies on is bound to the chain, or refused.** A
  deletion proof, a bundle of them and an erasure request's bundle are written from a real vacuum;
  each field is then edited, one at a time, to a value an honest ledger could have given (another
  run's id, its receipt's root, its time, 2020), and ``python -m ledger.audit`` must refuse every
  edit in one line (``error: LedgerCorrupt: ...``, exit 1) instead of printing the forged value as
  verified.
* **A file the run that took over found absent settles the request.** A vacuum process is
  SIGKILLed right after the store deleted an erased file and before the run learnt it (so no
  receipt part holds it): on S3, the tests' fault proxy kills it between the store's answer to the
  DeleteObjects and the client's reading of it. The next vacuum takes the run over, looks at the
  key, finds it gone, and records that observation in the chain; the request's status is done and
  names the run that found the file absent and when, and its bundle checks offline saying so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable

import pytest

from ledger import Ledger, ManualClock, NotDeleted
from tests.s3proxy import DELETES, Fault
from tests.pg import MANUAL
from tests.test_cli import ok as cli_ok
from tests.test_s3 import objects_under, put
from tests.test_s3 import connect_spark, lake, proxy, s3  # noqa: F401  (S3 on moto, and a Connect server that reaches it)

pytestmark = pytest.mark.spark
BOTH_SESSIONS = True  # R24: every vacuum here runs on a classic session and on a Spark Connect one
BOTH_STORES = True  # R18: a test that asks for ``ledger_path`` runs on SQLite and on PostgreSQL

REPO = Path(__file__).resolve().parent.parent
NAME = "crm.users"


def audit(*args: object) -> subprocess.CompletedProcess:
    """The offline check, as an auditor runs it: a process of its own, with only the files given."""
    return subprocess.run([sys.executable, "-m", "ledger.audit", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


# --- item 5: every field the offline check prints or relies on is bound, or refused ----------------

DAY = timedelta(days=1)
SCHEMA = "user_id int, item string, day string"
Edit = Callable[[dict], object]


@pytest.fixture
def evidence(spark, tmp_path: Path, clock: ManualClock) -> dict:
    """A real erase and two real vacuums on a local disk: the erased files (days 0 and 1 of one
    write, whose day 2 the table keeps) go by a trim in run ``a``; a dropped table's purge is run
    ``b``, whose id, receipt root, event and time are what a forger would paste in. Written out:
    a deletion proof, a bundle of proofs from both runs, the request's bundle, an export and a
    checkpoint taken after all of it."""
    from spark_ops import erase, vacuum, write_table
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="evidence-test") as led:
        data = [(42, "a", "d0"), (1, "a", "d0"), (42, "b", "d1"), (2, "b", "d1"), (3, "c", "d2")]
        write_table(spark.createDataFrame(data, SCHEMA).coalesce(1), led, NAME, partition_by="day")
        write_table(spark.createDataFrame([(7, "x", "d0")], SCHEMA), led, "crm.other")
        led.drop_table("crm.other")
        clock.advance(DAY)
        status = erase(spark, led, NAME, "user_id = 42", reason="GDPR art. 17", expire_now=True)
        a = vacuum(spark, led)
        assert led.erasure(status.request_id).done and len(status.files) == 2
        clock.advance(8 * DAY)
        b = vacuum(spark, led)
        assert [t.name for t in b.purged] == ["crm.other"]
        erased = sorted(f.key for f in status.files)
        purged = [p.first for p in led.receipt(b.run_id).parts]
        cp = led.checkpoint()
        paths = {name: tmp_path / name for name in ("proof.json", "proofs.json", "erasure.json", "log.jsonl",
                                                    "cp.json")}
        paths["proof.json"].write_text(led.prove_deleted(erased[0]).to_json())
        led.prove_deleted_many(erased + purged).write(paths["proofs.json"])
        led.prove_erasure(status.request_id, checkpoint=cp).write(paths["erasure.json"])
        led.export(paths["log.jsonl"])
        cp.write(paths["cp.json"])
        other = led.receipt(b.run_id)
        return {**paths, "a": a.run_id, "b": other, "b_part": led.prove_deleted(purged[0]), "erased": erased}


def _refusals(source: Path, edits: dict[str, Edit], export: Path, cp: Path, command: str,
              capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Each edit of ``source`` checked as the auditor's command does (``ledger.audit``'s ``main``,
    in this process: one process per edit would cost a second each): what it answered, by edit."""
    from ledger.audit.__main__ import main
    said = {}
    for name, edit in edits.items():
        data = json.loads(source.read_text())
        edit(data)
        edited = source.with_name(f"edited-{source.name}")
        edited.write_text(json.dumps(data))
        capsys.readouterr()
        code = main([command, str(edited), str(export), str(cp)])
        out, err = capsys.readouterr()
        said[name] = f"exit {code}: {(out + err).strip()}"
    return said


def _proof_edits(e: dict, at: Callable[[dict], dict]) -> dict[str, Edit]:
    """Every field of a deletion proof (``at(data)``: the proof inside the file), edited to what an
    honest ledger could have given: the other run's id, root, event and time, 2020, a neighbour."""
    b, b_part = e["b"], e["b_part"]

    def setting(**values: object) -> Edit:
        return lambda data: at(data).update(values)
    return {
        "deleted_at 2020": setting(deleted_at="2020-01-01T00:00:00.000000Z"),
        "deleted_at of run b": setting(deleted_at=b_part.deleted_at.isoformat()),
        "deleted_at one microsecond on": lambda data: at(data).update(
            deleted_at=(datetime.fromisoformat(at(data)["deleted_at"].replace("Z", "+00:00"))
                        + timedelta(microseconds=1)).isoformat()),
        "run_id of run b": setting(run_id=b.run_id),
        "run b's id, root, event and time": setting(run_id=b.run_id, receipt_root=b.root, seq=b.seq,
                                                    deleted_at=b_part.deleted_at.isoformat()),
        "seq of run b's receipt": setting(seq=b.seq),
        "seq one before": lambda data: at(data).update(seq=at(data)["seq"] - 1),
        "size": lambda data: at(data).update(size=at(data)["size"] + 1),
        "key: the request's other file": setting(key=e["erased"][1]),
        "leaf_index": lambda data: at(data).update(leaf_index=1 - at(data)["leaf_index"]),
        "leaf_path": setting(leaf_path=["00" * 32]),
        "part_first": setting(part_first=""),
        "part_last": lambda data: at(data).update(part_last=at(data)["part_last"] + "~"),
        "part_count": lambda data: at(data).update(part_count=at(data)["part_count"] + 1),
        "part_bytes": lambda data: at(data).update(part_bytes=at(data)["part_bytes"] + 1),
        "part_root of run b's part": setting(part_root=b_part.part_root),
        "part_index": lambda data: at(data).update(part_index=at(data)["part_index"] + 1),
        "parts": lambda data: at(data).update(parts=at(data)["parts"] + 1),
        "part_path": setting(part_path=["00" * 32]),
        "receipt_root of run b": setting(receipt_root=b.root),
        "receipt_root dropped (a part's anchor)": setting(receipt_root=None, part_index=None, parts=None,
                                                          part_path=[]),
    }


def _forged_in_a_process(e: dict, command: str, source: Path, **values: object) -> str:
    """``source`` with ``values`` pasted in, checked as the auditor runs it (a process of its own):
    refused in one line, ``error: LedgerCorrupt: ...``, exit 1, nothing on stdout. Returns the line."""
    forged = json.loads(source.read_text())
    forged.update(values)
    source.with_name("forged.json").write_text(json.dumps(forged))
    refused = audit(command, source.with_name("forged.json"), e["log.jsonl"], e["cp.json"])
    assert (refused.returncode, refused.stdout) == (1, "") and refused.stderr.startswith("error: LedgerCorrupt: ")
    assert refused.stderr.count("\n") == 1, refused.stderr
    return refused.stderr


def _only_ledger_corrupt(said: dict[str, str]) -> dict[str, str]:
    """The edits not refused as an edit: exit 1 and one line, ``error: LedgerCorrupt: ...``."""
    return {name: text for name, text in said.items()
            if not (text.startswith("exit 1: error: LedgerCorrupt: ") and "\n" not in text)}


def test_r16_r20_every_field_of_a_deletion_proof_the_offline_check_prints_or_relies_on_is_bound_to_the_chain(
        evidence: dict, capsys) -> None:
    """``deleted_at`` edited to 2020 passed ``prove-deleted``, which printed the forged date as
    verified; so did the other run's time. Now every field is checked against the log."""
    e = evidence
    single = _refusals(e["proof.json"], _proof_edits(e, lambda data: data), e["log.jsonl"], e["cp.json"],
                       "prove-deleted", capsys)
    assert _only_ledger_corrupt(single) == {}
    in_bundle = _proof_edits(e, lambda data: data["answers"][0])
    in_bundle.update({
        "keys": lambda data: data.update(keys=data["keys"] + 1),
        "proven": lambda data: data.update(proven=data["proven"] - 1),
        "a field no bundle has": lambda data: data.update(note="approved by legal"),
    })
    bundled = _refusals(e["proofs.json"], in_bundle, e["log.jsonl"], e["cp.json"], "prove-deleted", capsys)
    assert _only_ledger_corrupt(bundled) == {}
    assert "gives deleted_at 2020-01-01T00:00:00.000000Z, but the log records" in single["deleted_at 2020"]

    assert "2020" in _forged_in_a_process(e, "prove-deleted", e["proof.json"], deleted_at="2020-01-01T00:00:00Z")
    honest = audit("prove-deleted", e["proof.json"], e["log.jsonl"], e["cp.json"])
    assert honest.returncode == 0 and f"by vacuum run {e['a']}" in honest.stdout, honest.stderr


def test_r16_r25_every_field_of_an_erasure_bundle_the_offline_check_prints_or_relies_on_is_bound_to_the_chain(
        evidence: dict, capsys) -> None:
    """The bundle's ``requested_at`` and a file's ``deleted_at`` edited to 2020 passed
    ``prove-erasure``. Now every field is the log's, or the bundle is refused as edited."""
    e = evidence

    def request(**values: object) -> Edit:
        return lambda data: data["request"].update(values)
    edits = _proof_edits(e, lambda data: data["answers"][0])
    edits.update({
        "requested_at 2020": lambda data: data.update(requested_at="2020-01-01T00:00:00.000000Z"),
        "request time": lambda data: data["request"].update(time=data["request"]["time"] - 86_400_000_000),
        "request time and requested_at together": lambda data: (
            data["request"].update(time=data["request"]["time"] - 86_400_000_000),
            data.update(requested_at="2025-12-31T00:00:00.000002Z")),
        "request seq": lambda data: data["request"].update(seq=data["request"]["seq"] - 1),
        "request id": request(request_id="0000000000000000"),
        "request tables": request(tables=["crm.other"]),
        "request live": request(live=[""]),
        "request columns": request(columns=["user_id"]),
        "request keys": request(keys=1),
        "request statement": request(statement="00" * 32),
        "request redacted": request(redacted="00" * 32),
        "request replaced": request(replaced=[]),
        "a 0.7 request's name beside them": request(name="crm.other"),
        "a 0.7 request's table_id beside them": request(table_id=None),
        "request without its live instances": lambda data: data["request"].pop("live"),
        "request predicate": request(predicate="user_id = 43"),
        "request reason": request(reason="asked nicely"),
        "request files digest": request(files="00" * 32),
        "request count": lambda data: data["request"].update(count=data["request"]["count"] - 1),
        "request bytes": lambda data: data["request"].update(bytes=data["request"]["bytes"] + 1),
        "request versions": lambda data: data["request"].update(versions=data["request"]["versions"][:-1]),
        "a file's key": lambda data: data["files"][0].__setitem__(0, data["files"][0][0] + "x"),
        "a file's size": lambda data: data["files"][0].__setitem__(1, data["files"][0][1] + 1),
        "a file left out": lambda data: data.update(files=data["files"][1:], answers=data["answers"][1:]),
        "the answers in another order": lambda data: data.update(answers=data["answers"][::-1]),
        "an answer given twice": lambda data: data.update(answers=[data["answers"][0]] * 2),
        "inclusion seq": lambda data: data["inclusion"].update(seq=data["inclusion"]["seq"] - 1),
        "inclusion event_hash": lambda data: data["inclusion"].update(event_hash="00" * 32),
        "inclusion tree_size": lambda data: data["inclusion"].update(tree_size=data["inclusion"]["tree_size"] + 1),
        "inclusion path": lambda data: data["inclusion"].update(path=["00" * 32] + data["inclusion"]["path"][1:]),
        "a field no bundle has": lambda data: data.update(note="approved by legal"),
    })
    said = _refusals(e["erasure.json"], edits, e["log.jsonl"], e["cp.json"], "prove-erasure", capsys)
    assert _only_ledger_corrupt(said) == {}
    assert "requested_at (2020-01-01T00:00:00.000000Z) is not the time of its request" in said["requested_at 2020"]

    assert "requested_at" in _forged_in_a_process(e, "prove-erasure", e["erasure.json"],
                                                  requested_at="2020-01-01T00:00:00.000000Z")
    honest = audit("prove-erasure", e["erasure.json"], e["log.jsonl"], e["cp.json"])
    assert honest.returncode == 0 and "all 2 files of its set deleted" in honest.stdout, honest.stderr


def test_r16_a_proof_field_of_another_type_is_refused_in_one_line_not_a_traceback(evidence: dict, capsys) -> None:
    """A size given as text, an index as text, a key as a number, a time with no zone: each was a
    Python traceback from deep in the hashing (``struct.error``, ``TypeError``). Now one line."""
    typed = {"size as text": ("size", "5"), "leaf_index as text": ("leaf_index", "0"), "key a number": ("key", 5),
             "leaf_path of numbers": ("leaf_path", [1]), "part_count a fraction": ("part_count", 1.5),
             "deleted_at with no zone": ("deleted_at", "2026-01-02T00:00:00"), "seq null": ("seq", None),
             "deleted_at a number": ("deleted_at", 20200101)}
    said = _refusals(evidence["proof.json"], {name: (lambda data, f=f, v=v: data.update({f: v}))
                                              for name, (f, v) in typed.items()},
                     evidence["log.jsonl"], evidence["cp.json"], "prove-deleted", capsys)
    assert {name: text for name, text in said.items()
            if not (text.startswith("exit 1: error: InvalidArgument: not a deletion proof") and "\n" not in text)} == {}


# --- item 6: a file found absent by the run that took over ------------------------------------

_DOOMED_VACUUM = textwrap.dedent("""
    import sys
    from datetime import datetime, timezone
    from ledger import Ledger
    from spark_ops import local_session, vacuum
    at = datetime.fromtimestamp(int(sys.argv[2]) / 1e6, timezone.utc)
    spark = local_session("doomed-vacuum", remote="")
    led = Ledger.open(sys.argv[1], clock=lambda: at, actor="doomed-vacuum")
    print("vacuuming", flush=True)
    vacuum(spark, led)
    print("finished", flush=True)
""")


def _micros(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def test_r10_r20_r25_a_file_the_run_that_took_over_found_absent_settles_the_erasure_and_its_bundle_proves_it(
        spark, lake: Ledger, clock, s3, tmp_path: Path) -> None:
    """The erased file shares its write folder with files the table keeps, so it goes by a trim; the
    vacuum that trims it is a real process, killed (SIGKILL, its whole process group) the moment the
    store has deleted the file and before the run's client has read the answer: nothing of the run
    ever wrote it down. The next vacuum takes the run over: it used to find the file gone and neither
    delete nor receipt it, so ``erasure(id).done`` stayed False for ever, naming a wrong reason, and
    the bundle could never pass."""
    from spark_ops import vacuum
    lake.create_table(NAME)
    w1 = lake.begin_write(NAME)
    keys = [put(f"{w1.folder}/day={d}/part-0.parquet", b"r" * (5 + d)) for d in range(3)]
    lake.commit_write(w1.id, [(f"{w1.relative_folder}/day={d}/part-0.parquet", 5 + d) for d in range(3)])
    clock.advance(timedelta(minutes=1))
    w2 = lake.begin_write(NAME)  # erase's rewrite of day 0, without user 42's rows
    put(f"{w2.folder}/day=0/part-0.parquet", b"n" * 4)
    erased = f"{w1.relative_folder}/day=0/part-0.parquet"
    lake.commit_write(w2.id, [(f"{w2.relative_folder}/day=0/part-0.parquet", 4)], mode="replace", removes=(erased,))
    table_id = lake.table(NAME).id
    request = lake.request_erasure(NAME, predicate="user_id = 42", reason="GDPR art. 17",
                                   files=[(f"{table_id}/{erased}", 5)], replaced_by=2)
    lake.advance_retention_mark(NAME, lake.versions(NAME)[-1].committed_at)  # what erase(expire_now=True) does
    clock.advance(timedelta(minutes=1))
    assert [t.version for t in lake.plan_vacuum().trims] == [2]  # the file goes by a trim: its folder stays

    killed = threading.Event()

    def kill_the_vacuum() -> None:
        """The store has deleted the batch; the vacuum has not read the answer: it dies now (the
        proxy answers it only after this returns)."""
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        killed.set()

    s3.inject(Fault("meanwhile", match=DELETES, meanwhile=kill_the_vacuum))
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_MODE_ENABLED"}
    with open(tmp_path / "doomed.log", "w") as log:
        child = subprocess.Popen([sys.executable, "-c", _DOOMED_VACUUM, str(lake.path), str(_micros(lake.now()))],
                                 cwd=REPO, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
        try:
            child.wait(timeout=300)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    said = (tmp_path / "doomed.log").read_text()[-3000:]
    assert killed.wait(timeout=60) and child.returncode == -signal.SIGKILL, (child.returncode, said)
    [dead] = lake.state.vacuums.unfinished()
    assert dead.trims == (f"{table_id}/2",)
    assert keys[0] not in objects_under(w1.folder) and keys[1] in objects_under(w1.folder)  # deleted, unrecorded
    assert lake.receipt(dead.run_id).files == 0
    assert [k for k in objects_under(f"{lake.warehouse}/.retention-ledger") if dead.run_id in k] == []
    with pytest.raises(NotDeleted):
        lake.prove_deleted(f"{table_id}/{erased}")

    s3.clear()
    clock.advance(timedelta(minutes=11))  # the dead run's lease ran out
    report = vacuum(spark, lake)
    assert report.resumed_runs == (dead.run_id,) and report.failures == []
    assert [(t.version, t.files) for t in report.trimmed] == [(2, 0)]  # nothing left to delete, nothing counted
    status = lake.erasure(request.request_id)
    assert status.done, [(f.key, f.why) for f in status.pending]
    [settled] = status.files
    finished = lake.history(type="VacuumFinished")[-1].time
    assert (settled.run_id, settled.found_absent, settled.deleted) == (report.run_id, True, False)
    assert settled.found_absent_at is not None and lake.now() - timedelta(minutes=1) < settled.found_absent_at \
        <= finished
    shown = status.to_dict()["files"][0]
    assert (shown["found_absent"], shown["deleted"], shown["run_id"]) == (True, False, report.run_id)
    with pytest.raises(NotDeleted, match=f"found absent by vacuum run {report.run_id}"):
        lake.prove_deleted(f"{table_id}/{erased}")  # a deletion proof it is not: no run recorded deleting it

    cp = lake.checkpoint()
    out, export, checkpoint = tmp_path / "erasure.json", tmp_path / "log.jsonl", tmp_path / "cp.json"
    lake.prove_erasure(request.request_id, checkpoint=cp).write(out)
    lake.export(export)
    cp.write(checkpoint)
    [answer] = json.loads(out.read_text())["answers"]
    assert answer["run_id"] == report.run_id and "found_absent_at" in answer and "deleted_at" not in answer
    ok = audit("prove-erasure", out, export, checkpoint)
    assert ok.returncode == 0, ok.stderr
    assert "1 found absent" in ok.stdout and f"by vacuum run {report.run_id}" in ok.stdout, ok.stdout
    lake.verify()


def test_r10_r25_on_a_local_disk_the_files_a_stopped_run_deleted_unrecorded_are_found_absent_by_the_next(
        spark, ledger_path: Path | str, tmp_path: Path, clock: ManualClock, capsys) -> None:
    """The same on a local disk, with ``erase(expire_now=True)`` itself, on SQLite and PostgreSQL: a
    run started, unlinked the erased files (as its deleter does) and stopped before writing anything
    down; the next vacuum, a real one, takes it over, finds them gone and says so, and the bundle
    checks offline."""
    from spark_ops import erase, vacuum, write_table
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, actor="evidence-test") as led:
        data = [(42, "a", "d0"), (1, "a", "d0"), (42, "b", "d1"), (2, "b", "d1"), (3, "c", "d2")]
        write_table(spark.createDataFrame(data, SCHEMA).coalesce(1), led, NAME, partition_by="day")
        clock.advance(DAY)
        status = erase(spark, led, NAME, "user_id = 42", reason="GDPR art. 17", expire_now=True)
        erased = sorted(f.key for f in status.files)
        stopped = led.start_vacuum()
        assert [t.version for t in stopped.plan.trims] == [2] and len(erased) == 2
        for key in erased:  # what its deleter did before the run was stopped: nothing written down
            os.unlink(Path(led.warehouse) / key)
        clock.advance(timedelta(minutes=11))  # its lease ran out

        report = vacuum(spark, led)
        assert report.resumed_runs == (stopped.run_id,) and report.failures == []
        done = led.erasure(status.request_id)
        assert done.done and all(f.found_absent and f.run_id == report.run_id for f in done.files), done.files
        assert led.receipt(report.run_id).found_absent == 2
        cp = led.checkpoint()
        led.prove_erasure(status.request_id, checkpoint=cp).write(tmp_path / "erasure.json")
        led.export(tmp_path / "log.jsonl")
        cp.write(tmp_path / "cp.json")
        led.verify()
    ok = audit("prove-erasure", tmp_path / "erasure.json", tmp_path / "log.jsonl", tmp_path / "cp.json")
    assert ok.returncode == 0 and "gone: 0 deleted, 2 found absent" in ok.stdout, (ok.stdout, ok.stderr)

    def answer(**values: object) -> Edit:
        return lambda data: data["answers"][0].update(values)
    first = json.loads((tmp_path / "erasure.json").read_text())["answers"][0]
    edits = {  # the observation is bound to the chain as a deletion is (R16)
        "found_absent_at 2020": answer(found_absent_at="2020-01-01T00:00:00.000000Z"),
        "run_id of the stopped run": answer(run_id=stopped.run_id),
        "seq one before": answer(seq=first["seq"] - 1),
        "size": answer(size=first["size"] + 1),
        "key: the other file": answer(key=erased[1]),
        "leaf_index": answer(leaf_index=1 - first["leaf_index"]),
        "leaf_path": answer(leaf_path=["00" * 32]),
        "part_count": answer(part_count=first["part_count"] + 1),
        "part_bytes": answer(part_bytes=first["part_bytes"] + 1),
        "part_root": answer(part_root="00" * 32),
    }
    said = _refusals(tmp_path / "erasure.json", edits, tmp_path / "log.jsonl", tmp_path / "cp.json", "prove-erasure",
                     capsys)
    assert _only_ledger_corrupt(said) == {}
    shown = cli_ok(ledger_path, "erasure", status.request_id).stdout
    assert "0 of 2 files deleted, 2 found absent - done" in shown
    assert shown.count(f"found absent by vacuum run {report.run_id} at ") == 2, shown
    assert "2 objects it looked for and found already gone" in cli_ok(ledger_path, "receipt",
                                                                      report.run_id).stdout
