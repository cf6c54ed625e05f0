"""The auditor's commands: ``--as-of`` on every read command, ``history`` filters,
``checkpoint``, ``prove``, ``export``, ``keygen``, ``verify --against`` (R16, R17), and what
``prove-deleted`` refuses (R20; its proofs, on a real vacuum, are in ``test_receipts``).

The ledger is built through the API on a manual clock, so times are exact; the CLI then
reads it as an auditor would. Helpers and conventions are those of ``test_cli``.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Checkpoint, Ledger, ManualClock
from ledger.clock import iso_utc
from retention_ledger.cli import cli
from tests.conftest import T0
from tests.test_cli import ISO_Z, event_count, invoke, ok, ok_json, refused, usage_error

HOUR = timedelta(hours=1)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """sales.orders created at T0, dropped at T0+1h, undropped at T0+2h; sales.items created at
    T0+3h by bob."""
    path = tmp_path / "ledger.db"
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock, actor="alice@etl-3") as led:
        led.create_table("sales.orders")
        clock.advance(HOUR)
        led.drop_table("sales.orders")
        clock.advance(HOUR)
        led.undrop_table("sales.orders")
    clock.advance(HOUR)
    with Ledger.open(path, clock=clock, actor="bob@laptop") as led:
        led.create_table("sales.items")
    return path


def at(hours: float) -> str:
    return iso_utc(T0 + timedelta(hours=hours))


# --- R17: --as-of --------------------------------------------------------------------------

def test_r17_show_dropped_as_of_a_time_lists_what_was_dropped_then(db: Path) -> None:
    assert ok(db, "show-dropped").stdout == "no dropped tables\n"
    then = ok(db, "show-dropped", "--as-of", at(1.5)).stdout
    assert "sales.orders" in then and at(1) in then
    assert ok_json(db, "show-dropped", "--as-of", at(1.5))[0]["name"] == "sales.orders"
    assert ok_json(db, "show-dropped", "--as-of", at(0.5)) == []


def test_r17_as_of_a_seq_and_every_read_command_takes_it(db: Path) -> None:
    assert [t["name"] for t in ok_json(db, "tables", "--as-of", "1")] == ["sales.orders"]
    assert [t["name"] for t in ok_json(db, "tables")] == ["sales.items", "sales.orders"]
    assert ok(db, "tables", "--as-of", "0").stdout == "no live tables\n"
    assert ok_json(db, "show", "sales.orders", "--as-of", "1")["state"] == "live"
    for command in (["watermark"], ["retention"], ["writes"], ["versions", "sales.orders"],
                    ["mark", "sales.orders"]):
        ok(db, *command, "--as-of", at(2.5))
    refused(db, "show", "sales.items", "--as-of", "2", error="TableNotFound")


def test_r17_bad_as_of_values_are_refused_and_change_nothing(db: Path) -> None:
    refused(db, "tables", "--as-of", "yesterday", error="InvalidTime")
    line = refused(db, "tables", "--as-of", "99", error="InvalidArgument")
    assert "4 events" in line
    assert "--as-of reads the past" in usage_error(db, "watermark", "--as-of", "1", "--advance", "now").stderr


# --- who did what --------------------------------------------------------------------------

def test_history_filters_on_the_command_line_and_says_what_happened_in_words(db: Path) -> None:
    lines = ok(db, "history", "--actor", "alice@etl-3", "--type", "TableDropped").stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"#2      {at(1)}  alice@etl-3 dropped sales.orders (id ")
    window = ok_json(db, "history", "--since", at(1), "--until", at(2))
    assert [e["type"] for e in window] == ["TableDropped", "TableUndropped"]
    assert [e["actor"] for e in ok_json(db, "history", "--actor", "bob@laptop")] == ["bob@laptop"]
    assert ok(db, "history", "--actor", "nobody").stdout == "no events\n"
    refused(db, "history", "--type", "Nonsense", error="InvalidArgument")
    refused(db, "history", "--since", "not-a-time", error="InvalidTime")


def test_history_on_the_command_line_counts_and_gives_the_last_n(db: Path) -> None:
    assert ok(db, "history", "--count").stdout == "4 events\n"
    assert ok_json(db, "history", "--count", "--type", "TableDropped") == {"count": 1}
    assert [e["seq"] for e in ok_json(db, "history", "--last", "2")] == [3, 4]
    assert len(ok(db, "history", "--last", "1").stdout.splitlines()) == 1
    assert ok(db, "history", "--last", "3", "--count").stdout == "3 events\n"
    # One answer with Python's history().last(0): nothing, not a usage error.
    assert ok_json(db, "history", "--last", "0") == [] and ok(db, "history", "--last", "0").stdout == "no events\n"
    assert ok(db, "history", "--last", "0", "--count").stdout == "0 events\n"
    usage_error(db, "history", "--last", "-1")


# --- R16: checkpoints, proofs, export, keys ------------------------------------------------

def test_r16_checkpoint_keygen_and_verify_against_a_signed_checkpoint(db: Path, tmp_path: Path) -> None:
    key = tmp_path / "keys" / "signer.pem"
    key.parent.mkdir()
    made = ok_json(db, "keygen", str(key))
    assert made == {"private_key": str(key), "public_key": f"{key}.pub"}
    assert refused(db, "keygen", str(key), error="InvalidArgument").endswith("(choose another path)")

    unsigned = Checkpoint.from_json(ok(db, "checkpoint").stdout)
    assert unsigned.seq == 4 and unsigned.signature is None
    out = tmp_path / "cp.json"
    said = ok(db, "checkpoint", "--key", str(key), "--out", str(out)).stdout
    assert said.startswith(f"checkpoint #4 ({at(3)}, root ") and said.endswith(f"signed and written to {out}\n")
    cp = Checkpoint.read(out)
    assert cp.signature and cp.time == T0 + 3 * HOUR

    ok(db, "create", "sales.returns")  # the log grows after the checkpoint
    report = ok(db, "verify", "--against", str(out), "--public-key", f"{key}.pub").stdout
    assert report.startswith("ok: 5 events, chain intact to ")
    assert f"extends checkpoint #4 ({at(3)}), signature verified" in report

    other = tmp_path / "other.pem"
    ok(db, "keygen", str(other))
    refused(db, "verify", "--against", str(out), "--public-key", f"{other}.pub", error="CheckpointInvalid")
    assert "--against" in usage_error(db, "verify", "--public-key", f"{key}.pub").stderr


def test_r16_verify_against_a_checkpoint_fails_once_the_log_before_it_is_edited(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "cp.json"
    ok(db, "checkpoint", "--out", str(out))
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET actor = 'mallory' WHERE seq = 2")
    conn.commit()
    conn.close()
    line = refused(db, "verify", "--against", str(out), error="LedgerCorrupt")
    assert "#2" in line


def test_r16_prove_prints_an_audit_path_that_verifies(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "cp.json"
    ok(db, "checkpoint", "--out", str(out))
    proof = ok_json(db, "prove", "3", "--checkpoint", str(out))
    assert proof["verified"] is True and proof["seq"] == 3 and proof["tree_size"] == 4
    assert len(proof["path"]) == 2
    text = ok(db, "prove", "3", "--checkpoint", str(out)).stdout.splitlines()
    assert text[0].startswith("event #3 (hash ") and text[1:] == proof["path"]
    refused(db, "prove", "5", "--checkpoint", str(out), error="InvalidArgument")
    refused(db, "prove", "1", "--checkpoint", str(tmp_path / "missing.json"), error="InvalidArgument")


@pytest.mark.parametrize("name", ["log.jsonl", "log.parquet"])
def test_r16_export_writes_every_event_with_its_hash(db: Path, tmp_path: Path, name: str) -> None:
    from ledger.audit import export
    target = tmp_path / name
    said = ok(db, "export", str(target)).stdout
    assert said == f"exported 4 events to {target} ({name.split('.')[1]})\n"
    rows = list(export.read(target))
    stored = sqlite3.connect(db).execute("SELECT hash FROM events ORDER BY seq").fetchall()
    assert [r[8] for r in rows] == [h for (h,) in stored]
    assert event_count(db) == 4


def test_read_commands_refuse_a_missing_ledger_for_audit_commands_too(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    for args in (["checkpoint"], ["export", str(tmp_path / "x.jsonl")], ["tables", "--as-of", "0"],
                 ["history", "--actor", "a"]):
        result = invoke(missing, *args)
        assert result.exit_code == 1 and result.stderr.startswith("error: LedgerNotFound: "), result.stderr
    assert not missing.exists()


def test_as_of_json_times_are_iso_utc(db: Path) -> None:
    import re
    dropped = ok_json(db, "show-dropped", "--as-of", at(1.5))[0]
    assert re.fullmatch(ISO_Z, dropped["dropped_at"])
    assert json.loads(ok(db, "--json", "checkpoint").stdout)["time"] == at(3)


# --- an auditor's files never replace what matters (issues 25, 26) ------------------------------

def test_r10_cli_checkpoint_and_export_never_replace_the_ledger_nor_the_key(db: Path, tmp_path: Path) -> None:
    key = tmp_path / "keys" / "signer.pem"
    ok(db, "keygen", str(key))  # the keys/ folder did not exist
    secret, original = key.read_bytes(), db.read_bytes()
    for args in (["checkpoint", "--key", str(key), "--out", str(key)],
                 ["checkpoint", "--key", str(key), "--out", str(key), "--overwrite"],
                 ["checkpoint", "--out", str(db), "--overwrite"],
                 ["export", str(db), "--overwrite"], ["export", f"{db}-wal"], ["export", f"{db}-shm", "--format", "parquet"]):
        assert "which it would destroy" in refused(db, *args, error="InvalidArgument")
    assert key.read_bytes() == secret and db.read_bytes() == original

    out = tmp_path / "cp.json"
    ok(db, "checkpoint", "--key", str(key), "--out", str(out))
    signed = out.read_text()
    assert "exists; refusing to replace it" in refused(db, "checkpoint", "--out", str(out), error="InvalidArgument")
    assert out.read_text() == signed
    ok(db, "checkpoint", "--out", str(out), "--overwrite")
    assert Checkpoint.read(out).signature is None
    line = refused(db, "export", str(out), error="InvalidArgument")
    assert "exists" in line and "pass --overwrite if" in line and "overwrite=True" not in line  # the CLI's words
    ok(db, "export", str(out), "--overwrite")


def test_r16_cli_a_bad_checkpoint_or_key_is_one_line_not_a_traceback(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "cp.json"
    ok(db, "checkpoint", "--out", str(out))
    data = json.loads(out.read_text())
    data["time"] = 12345
    out.write_text(json.dumps(data))
    assert "time must be ISO 8601 text" in refused(db, "verify", "--against", str(out), error="CheckpointInvalid")
    key = tmp_path / "k.pem"
    ok(db, "keygen", str(key))
    ok(db, "checkpoint", "--key", str(key), "--out", str(out), "--overwrite")
    line = refused(db, "verify", "--against", str(out), "--public-key", str(key), error="InvalidArgument")
    assert "that is a private key" in line


def test_r16_the_offline_verifier_says_a_missing_file_is_missing(db: Path, tmp_path: Path) -> None:
    """It used to call a mistyped export path a corrupt ledger ("restore the ledger file from a backup")."""
    import subprocess
    import sys
    out = tmp_path / "cp.json"
    ok(db, "checkpoint", "--out", str(out))
    exported = tmp_path / "log.jsonl"
    ok(db, "export", str(exported))
    for args, says in (([str(tmp_path / "MISSING.jsonl"), str(out)], "cannot read the export"),
                       ([str(exported), str(tmp_path / "missing.json")], "cannot read the checkpoint"),
                       ([str(exported), str(out), "--public-key", str(tmp_path / "nokey.pub")], "cannot read the public key")):
        done = subprocess.run([sys.executable, "-m", "ledger.audit", "verify", *args], capture_output=True, text=True)
        assert done.returncode == 1 and done.stdout == "", done
        assert done.stderr.startswith("error: InvalidArgument: ") and says in done.stderr and done.stderr.count("\n") == 1
        assert "LedgerCorrupt" not in done.stderr and "No such file" in done.stderr


def test_r16_the_offline_verifier_names_a_field_edited_into_another_type(
        db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every field of every line of an export, edited into a value of another type (text for a
    number, a number for text, a list, null), is "the export is not valid: line N, <field> ..." and
    exit 1, never a raw TypeError from inside the check."""
    from ledger.audit.__main__ import main
    from ledger.audit.export import COLUMNS
    out, exported = tmp_path / "cp.json", tmp_path / "log.jsonl"
    ok(db, "checkpoint", "--out", str(out))
    ok(db, "export", str(exported))
    lines = exported.read_text().splitlines()
    edited = tmp_path / "edited.jsonl"
    for number, line in enumerate(lines, 1):
        for name in COLUMNS:
            record = json.loads(line)
            for wrong in (str(record[name]) if isinstance(record[name], int) else 5, [record[name]], None):
                record[name] = wrong
                edited.write_text("\n".join([*lines[:number - 1], json.dumps(record), *lines[number:]]) + "\n")
                assert main(["verify", str(edited), str(out)]) == 1
                said = capsys.readouterr()
                assert said.out == "" and said.err.count("\n") == 1, said
                assert said.err.startswith(f"error: LedgerCorrupt: {edited}: the export is not valid: line {number}, "
                                           f"{name} is not "), said.err
    assert main(["verify", str(exported), str(out)]) == 0


def test_r20_prove_deleted_takes_one_key_or_a_file_of_them_and_refuses_bad_ones(db: Path, tmp_path: Path) -> None:
    """``prove-deleted`` takes KEY or ``--keys-from FILE``, exactly one; a keys file that is missing
    is a usage error, one that holds no keys or a key outside the warehouse is refused before
    anything is written, and the bundle never replaces a file without ``--overwrite``."""
    keys, out = tmp_path / "keys.txt", tmp_path / "bundle.json"
    keys.write_text("a/b.parquet\n")
    assert "give one KEY, or --keys-from FILE" in usage_error(db, "prove-deleted").stderr
    assert "not both" in usage_error(db, "prove-deleted", "a/b.parquet", "--keys-from", str(keys)).stderr
    assert "No such file" in usage_error(db, "prove-deleted", "--keys-from", str(tmp_path / "nope.txt")).stderr
    keys.write_text("\n  \n")
    assert "holds no keys" in refused(db, "prove-deleted", "--keys-from", str(keys), "--out", str(out),
                                      error="InvalidArgument")
    keys.write_text("a/b.parquet\n/etc/passwd\n")
    assert "/etc/passwd is not inside the warehouse" in refused(db, "prove-deleted", "--keys-from", str(keys),
                                                                "--out", str(out), error="InvalidArgument")
    assert not out.exists()
    out.write_text("mine")
    keys.write_text("a/b.parquet\n")
    assert "exists" in refused(db, "prove-deleted", "--keys-from", str(keys), "--out", str(out),
                               error="InvalidArgument")
    assert out.read_text() == "mine"
    result = CliRunner().invoke(cli, ["--ledger", str(db), "prove-deleted", "--keys-from", "-", "--out", str(out),
                                      "--overwrite"], input="a/b.parquet\n")  # the keys on stdin
    assert result.exit_code == 1 and result.stderr.startswith("error: NotDeleted: a/b.parquet is not in any vacuum's")
    assert json.loads(out.read_text())["answers"] == [{"key": "a/b.parquet", "not_deleted": result.stderr[
        len("error: NotDeleted: "):].rstrip("\n")}]


def test_history_on_the_command_line_leaves_pins_out_unless_asked(tmp_path: Path) -> None:
    """Every read pins: without --pins, history shows what was done to the tables, not who read them."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=ManualClock(T0), actor="alice@etl-3") as led:
        led.create_table("sales.orders")
        w = led.begin_write("sales.orders")
        led.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", 10)])
        led.pin("sales.orders").release()
    assert [e["type"] for e in ok_json(path, "history", "sales.orders")] == \
        ["TableCreated", "WriteBegun", "VersionCommitted"]
    shown = ok(path, "history", "sales.orders", "--pins").stdout
    assert "pinned version 1 of sales.orders" in shown and "released pin" in shown and "recorded" not in shown
    assert ok(path, "history", "--pins", "--count").stdout == "5 events\n"
    assert ok(path, "history", "--count").stdout == "3 events\n"
