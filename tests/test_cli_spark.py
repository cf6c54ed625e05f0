"""The CLI's Spark commands, vacuum and demo, in-process on the session's SparkSession."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger, ManualClock
from retention_ledger.cli import cli

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
