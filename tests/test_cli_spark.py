"""The CLI's Spark commands, vacuum and demo, in-process on the session's SparkSession."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger, ManualClock
from retention_ledger.cli import cli
from tests.connect import free_port

pytestmark = pytest.mark.spark


@pytest.fixture
def aged_ledger(tmp_path: Path) -> tuple[Path, str]:
    """A ledger whose one table was dropped ten days ago (real time: the CLI uses the real clock)."""
    path = tmp_path / "ledger.db"
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=10))
    with Ledger.open(path, clock=clock) as led:
        location = Path(led.create_table("sales.orders").location)
        location.mkdir(parents=True)
        for i in range(3):
            (location / f"part-{i}.parquet").write_bytes(b"x" * (10 + i))
        led.drop_table("sales.orders")
        led.create_table("sales.live")
    return path, str(location)


def run(spark, *args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_vacuum_dry_run_lists_files_and_changes_nothing(spark, aged_ledger) -> None:
    path, location = aged_ledger
    before = Ledger.open(path).event_count()
    result = run(spark, "--ledger", str(path), "vacuum", "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    (item,) = report["instances"]
    assert report["dry_run"] and item["name"] == "sales.orders" and item["files"] == 3
    assert sorted(f["size"] for f in item["would_delete"]) == [10, 11, 12]
    assert sorted(os.listdir(location)) == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    assert Ledger.open(path).event_count() == before


def test_r3_cli_vacuum_purges_and_the_undrop_is_refused(spark, aged_ledger) -> None:
    path, location = aged_ledger
    result = run(spark, "--ledger", str(path), "vacuum")
    assert result.exit_code == 0, result.stderr
    assert "purged 1 table(s), deleted 3 file(s) (33 B)" in result.stdout and "watermark ledger ->" in result.stdout
    assert not os.path.exists(location)
    refused = run(spark, "--ledger", str(path), "undrop", "sales.orders")
    assert refused.exit_code == 1 and refused.stderr.startswith("error: UndropBlocked: ")


def test_cli_vacuum_exits_1_when_a_table_cannot_be_purged(spark, aged_ledger, tmp_path) -> None:
    path, location = aged_ledger
    moved = tmp_path / "elsewhere"
    os.rename(location, moved)
    os.symlink(moved, location)  # refused: a location that is a link (R9)
    result = run(spark, "--ledger", str(path), "vacuum")
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: VacuumIncomplete: ")
    assert "sales.orders" in result.stderr and "symbolic link" in result.stderr
    assert len(os.listdir(moved)) == 3


def test_cli_demo_runs_the_whole_story(spark, tmp_path) -> None:
    folder = tmp_path / "demo"
    result = run(spark, "demo", "--dir", str(folder), "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["purged"] == ["sales.orders", "staging.events"]
    assert "at or before the vacuum watermark" in summary["undrop_refused"]
    assert summary["undrop_allowed"] == "sales.customers" and summary["rows_after_undrop"] == 97
    assert summary["versions_expired"] == {"sales.customers": [1, 2]}
    assert "sales.customers version 2" in summary["restore_refused"] and "is expired" in summary["restore_refused"]
    again = run(spark, "demo", "--dir", str(folder), "--json")  # its own folder: recreated
    assert again.exit_code == 0, again.stderr


def test_cli_demo_refuses_a_folder_it_did_not_make(spark, tmp_path) -> None:
    (tmp_path / "precious.txt").write_text("mine")
    result = run(spark, "demo", "--dir", str(tmp_path))
    assert result.exit_code == 1 and "DemoFolderInUse" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "mine"


def test_r15_cli_vacuum_only_uncommitted_sweeps_abandoned_writes_and_purges_nothing(spark, aged_ledger) -> None:
    path, location = aged_ledger
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=1))
    with Ledger.open(path, clock=clock) as led:
        write = led.begin_write("sales.live", lease="1h")
        os.makedirs(write.folder)
        Path(write.folder, "part-0.parquet").write_bytes(b"a" * 4)
    result = run(spark, "--ledger", str(path), "vacuum", "--only-uncommitted", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["instances"] == [] and os.path.exists(location)  # the dropped table waits for a vacuum
    [swept] = report["swept"]
    assert swept["writes"] == [{"id": write.id, "why": "lease expired"}] and swept["files"] == 1
    assert not os.path.exists(write.folder)


# --- on a Spark Connect server: --remote, SPARK_REMOTE (R24) -------------------------------------

REPO = Path(__file__).resolve().parent.parent


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The command line in a process of its own, as a shell runs it (no Connect mark inherited)."""
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    for name in ("SPARK_CONNECT_MODE_ENABLED", *(() if env and "SPARK_REMOTE" in env else ("SPARK_REMOTE",))):
        full.pop(name, None)
    return subprocess.run([sys.executable, "-m", "retention_ledger", *args], capture_output=True, text=True,
                          env=full, timeout=600)


def test_r24_cli_vacuum_dry_run_on_a_connect_server(connect_server, aged_ledger) -> None:
    path, location = aged_ledger
    before = Ledger.open(path).event_count()
    done = run_cli("--ledger", str(path), "vacuum", "--dry-run", "--json", "--remote", connect_server.address)
    assert done.returncode == 0, done.stderr[-3000:]
    (item,) = json.loads(done.stdout)["instances"]
    assert item["name"] == "sales.orders" and item["files"] == 3
    assert sorted(os.listdir(location)) == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    assert Ledger.open(path).event_count() == before


@pytest.mark.parametrize("how", ["--remote", "SPARK_REMOTE"])
def test_r24_cli_remote_reaches_the_connect_server_it_names(connect_server, aged_ledger, how: str) -> None:
    """The address (from --remote, or PySpark's own SPARK_REMOTE) is the server the command talks
    to: this server answers that it cannot change a static setting given with --conf, and that
    answer is one line naming it; the vacuum itself never starts, so nothing is recorded. (The
    whole dry run on this server is the test above, until the vacuum's port lands.)"""
    path, location = aged_ledger
    before = Ledger.open(path).event_count()
    argv = ["--ledger", str(path), "vacuum", "--dry-run", "--conf", "spark.executor.memory=1g"]
    done = run_cli(*argv, *(["--remote", connect_server.address] if how == "--remote" else []),
                   env={"SPARK_REMOTE": connect_server.address} if how == "SPARK_REMOTE" else None)
    assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr[-3000:]
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: SparkUnavailable: the Spark Connect server at {connect_server.address} "
                                  "refused the setting spark.executor.memory=1g ("), done.stderr
    assert len(os.listdir(location)) == 3 and Ledger.open(path).event_count() == before


@pytest.mark.parametrize("how", ["--remote", "SPARK_REMOTE"])
@pytest.mark.parametrize("command", ["vacuum", "demo"])
def test_r24_cli_on_a_connect_address_nobody_listens_on_is_one_line_and_changes_nothing(
        aged_ledger, tmp_path, how: str, command: str) -> None:
    """The address reaches local_session (from --remote, or PySpark's own SPARK_REMOTE), which
    says in one line that nothing answers there, before anything is recorded."""
    path, _ = aged_ledger
    before = Ledger.open(path).event_count()
    address = f"sc://127.0.0.1:{free_port()}"
    argv = ["--ledger", str(path), "vacuum", "--dry-run"] if command == "vacuum" else \
        ["demo", "--dir", str(tmp_path / "demo")]
    done = run_cli(*argv, *(["--remote", address] if how == "--remote" else []),
                   env={"SPARK_REMOTE": address} if how == "SPARK_REMOTE" else None)
    # The demo's first line says where it goes (it said "starting a local SparkSession" for any address).
    narrated = "" if command == "vacuum" else f"connecting to the Spark Connect server at {address} ...\n"
    assert done.returncode == 1 and done.stdout == narrated, done.stdout + done.stderr[-3000:]
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: SparkUnavailable: cannot reach the Spark Connect server at "
                                  f"{address[len('sc://'):]} (Connection refused)")
    assert Ledger.open(path).event_count() == before


@pytest.mark.parametrize("remote_from", ["--remote", "SPARK_REMOTE"])
@pytest.mark.parametrize("master_from", ["--master", "RETENTION_LEDGER_SPARK_MASTER"])
def test_r24_cli_remote_and_master_together_is_a_one_line_usage_error(
        aged_ledger, remote_from: str, master_from: str) -> None:
    path, _ = aged_ledger
    before = Ledger.open(path).event_count()
    argv = ["--ledger", str(path), "vacuum", "--dry-run"]
    env: dict[str, str] = {}
    for given, name, value in ((remote_from, "--remote", "sc://127.0.0.1:1/;token=s3cr3t"),
                               (master_from, "--master", "local[1]")):
        if given.startswith("--"):
            argv += [name, value]
        else:
            env[given] = value
    result = CliRunner(env=env).invoke(cli, argv)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"Error: {'--remote was given' if remote_from == '--remote' else 'SPARK_REMOTE is set'}"
                                    " (sc://127.0.0.1:1;...) and so is --master")
    assert "s3cr3t" not in result.stderr
    assert Ledger.open(path).event_count() == before


@pytest.fixture
def users_ledger(spark, tmp_path: Path) -> Path:
    """A ledger (written ten days ago: the CLI runs on the real clock) whose crm.users holds user 42's
    rows only, in one file of its version 1 (partitioned: erasing every row then writes no file, and
    the version that empties the table is an overwrite, after which the vacuum deletes the old
    write's folder whole)."""
    from spark_ops import write_table
    path = tmp_path / "ledger.db"
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=10))
    with Ledger.open(path, clock=clock) as led:
        write_table(spark.createDataFrame([(42, "a", "d1"), (42, "b", "d1")], "user_id int, item string, day string")
                    .coalesce(1), led, "crm.users", partition_by="day")
    return path


def test_r25_cli_erase_then_erasure_shows_each_file_and_the_bundle_checks_offline(spark, users_ledger,
                                                                                   tmp_path) -> None:
    path = str(users_ledger)
    result = run(spark, "--ledger", path, "erase", "crm.users", "--where", "user_id = 42", "--reason", "GDPR art. 17",
                 "--expire-now", "--json")
    assert result.exit_code == 0, result.stderr
    request = json.loads(result.stdout)
    table_id = Ledger.open(path).table("crm.users").id
    assert request["replaced"] == [f"{table_id}/2"] and request["versions"] == [f"{table_id}/1"]
    assert len(request["files"]) == 1
    request_id, key = request["request_id"], request["files"][0]["key"]
    pending = run(spark, "--ledger", path, "erasure", request_id)
    assert pending.exit_code == 0, pending.stderr
    assert f"0 of 1 file deleted" in pending.stdout and f"  {key}  " in pending.stdout and "pending" in pending.stdout

    assert run(spark, "--ledger", path, "vacuum").exit_code == 0
    done = run(spark, "--ledger", path, "erasure", request_id)
    assert "1 of 1 file deleted - done" in done.stdout and "deleted by vacuum run" in done.stdout, done.stdout
    cp, export, bundle = tmp_path / "cp.json", tmp_path / "log.jsonl", tmp_path / "erasure.json"
    assert run(spark, "--ledger", path, "checkpoint", "--out", str(cp)).exit_code == 0
    assert run(spark, "--ledger", path, "export", str(export)).exit_code == 0
    wrote = run(spark, "--ledger", path, "erasure", request_id, "--out", str(bundle), "--checkpoint", str(cp))
    assert wrote.exit_code == 0 and f"proof bundle written to {bundle}" in wrote.stdout, wrote.stderr
    checked = subprocess.run([sys.executable, "-m", "ledger.audit", "prove-erasure", str(bundle), str(export), str(cp)],
                             capture_output=True, text=True)
    assert checked.returncode == 0 and "all 1 files of its set deleted" in checked.stdout, checked.stderr


def test_r25_cli_erase_says_what_it_did_and_refuses_bad_input_in_one_line(spark, users_ledger, tmp_path) -> None:
    path = str(users_ledger)
    before = Ledger.open(path).event_count()
    refused = run(spark, "--ledger", path, "erase", "crm.users", "--where", "nobody = 1", "--reason", "r")
    assert refused.exit_code == 1 and refused.stderr.startswith("error: InvalidArgument: ")
    assert refused.stderr.count("\n") == 1 and Ledger.open(path).event_count() == before
    usage = run(spark, "--ledger", path, "erasure", "x", "--checkpoint", str(tmp_path / "cp.json"))
    assert usage.exit_code == 2
    said = run(spark, "--ledger", path, "erase", "crm.users", "--where", "user_id = 7", "--reason", "asked")
    assert said.exit_code == 0, said.stderr
    assert "recorded for crm.users (user_id = 7): 0 files, 0 B in its set" in said.stdout
    assert "no new version" in said.stdout and "unreadable from now on: no version" in said.stdout


def test_r27_cli_scrub_records_what_it_found_and_exits_1_when_something_is_missing(spark, tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        led.create_table("sales.orders")
        w = led.begin_write("sales.orders")
        for i in range(3):
            (Path(w.folder) / f"part-{i}.parquet").parent.mkdir(parents=True, exist_ok=True)
            (Path(w.folder) / f"part-{i}.parquet").write_bytes(b"x" * 5)
        led.commit_write(w.id, [(f"{w.relative_folder}/part-{i}.parquet", 5) for i in range(3)])
        before = led.event_count()
    clean = run(spark, "--ledger", str(path), "scrub")
    assert clean.exit_code == 0, clean.stderr
    assert "3 files" in clean.stdout and "everything the ledger names is there" in clean.stdout
    (Path(w.folder) / "part-1.parquet").unlink()
    found = run(spark, "--ledger", str(path), "scrub", "--json")
    assert found.exit_code == 1 and "1 missing" in found.stderr and "\n" not in found.stderr.strip()
    report = json.loads(found.stdout)
    assert not report["ok"] and [m["key"].rsplit("/", 1)[-1] for m in report["missing"]] == ["part-1.parquet"]
    assert report["missing"][0]["versions"] == [1]
    refused = run(spark, "--ledger", str(path), "scrub", "--database", "nosuch")
    assert refused.exit_code != 0 and "no table was ever in database nosuch" in refused.stderr
    with Ledger.open(path) as led:
        assert led.event_count() == before + 2  # one event a scrub, none for the refusal
        assert [e.data["missing"] for e in led.history(type="ScrubFinished")] == [0, 1]
    history = run(spark, "--ledger", str(path), "history", "--type", "ScrubFinished")
    assert history.exit_code == 0 and "1 missing" in history.stdout
