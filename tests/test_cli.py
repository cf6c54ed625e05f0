"""The ``retention-ledger`` console script, driven as a user drives it.

Most tests go through ``click.testing.CliRunner`` on a real ledger file in
``tmp_path``; a few run ``python -m ledger`` in a real subprocess, so exit codes,
stdout and stderr are checked as a shell sees them.

The CLI's contract (ledger/cli.py, README): exit 0 when done; exit 1 when the
ledger refused the command, with exactly one line on stderr, ``error: <Type>:
<message>``, and the ledger unchanged; exit 2 when the command line itself is
wrong. ``--json`` (before or after the subcommand) prints JSON on stdout. Times
are ISO 8601 UTC with a ``Z``.

The CLI reads the system clock, so tests that need a watermark past a drop use
``--advance now``; tests that need an exact time use one safely in the past.
"""

from __future__ import annotations

import inspect
import json
import os
from datetime import datetime, timedelta, timezone
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from ledger import Ledger, ManualClock
from retention_ledger.cli import cli

ACTOR = "tester"
ISO_Z = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z"
TABLE_ID = r"[0-9a-f]{16}"


# --- helpers -----------------------------------------------------------------------------------

@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


def invoke(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--ledger", str(db), "--actor", ACTOR, *args])


def ok(db: Path, *args: str) -> Result:
    """Run a command that must succeed: exit 0, nothing on stderr."""
    result = invoke(db, *args)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    assert result.stderr == ""
    return result


def ok_json(db: Path, *args: str):
    """Run with the group option ``--json`` and parse stdout."""
    return json.loads(ok(db, "--json", *args).stdout)


def event_count(db: Path) -> int:
    with Ledger.open(db) as led:
        return led.event_count()


def refused(db: Path, *args: str, error: str) -> str:
    """Run a command the ledger must refuse: exit 1, one ``error: <error>: ...`` line on
    stderr, nothing on stdout, and not one event appended. Returns the error line."""
    before = event_count(db)
    result = invoke(db, *args)
    assert isinstance(result.exception, SystemExit), result.exception  # not a crash
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, result.stderr
    line = result.stderr.rstrip("\n")
    assert line.startswith(f"error: {error}: "), line
    assert event_count(db) == before
    return line


def usage_error(db: Path, *args: str) -> Result:
    result = invoke(db, *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "Error: " in result.stderr  # click's wording; "Usage:" too, except for option values
    assert result.stdout == ""
    return result


def empty(db: Path) -> Path:
    """A new ledger with no events (read-only commands refuse a path where there is none)."""
    Ledger.open(db).close()
    return db


def create(db: Path, name: str) -> str:
    """Create a table and return its id."""
    return ok_json(db, "create", name)["id"]


def drop(db: Path, name: str) -> dict:
    return ok_json(db, "drop", name)


def run_module(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m ledger ...`` in a real process, in tmp_path."""
    return subprocess.run([sys.executable, "-m", "ledger", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


# --- create ------------------------------------------------------------------------------------

def test_create_reports_the_new_table_with_its_id_and_location(db: Path, tmp_path: Path) -> None:
    out = ok(db, "create", "sales.orders").stdout

    match = re.fullmatch(rf"created sales\.orders \(id ({TABLE_ID})\) at (.+)\n", out)
    assert match, out
    table_id, location = match.groups()
    assert location == f"{tmp_path}/warehouse/{table_id}"
    assert event_count(db) == 1


def test_create_json_describes_a_live_table(db: Path, tmp_path: Path) -> None:
    data = ok_json(db, "create", "Sales.Orders")  # names are case-insensitive, stored lower case

    assert re.fullmatch(TABLE_ID, data["id"])
    assert data["name"] == "sales.orders"
    assert data["state"] == "live"
    assert data["location"] == f"{tmp_path}/warehouse/{data['id']}"
    assert re.fullmatch(ISO_Z, data["created_at"])
    assert data["dropped_at"] is None and data["purged_at"] is None
    assert data["effective_watermark"] is None
    assert data["retention_seconds"] == 7 * 86_400


def test_create_on_a_bound_name_is_refused(db: Path) -> None:
    table_id = create(db, "sales.orders")
    line = refused(db, "create", "sales.orders", error="TableExists")
    assert "sales.orders is already a live table" in line and table_id in line


@pytest.mark.parametrize("name", ["orders", "sales.orders.2024", "sales.9orders", "bad name",
                                  "sales.", "sales-eu.orders", ""])
def test_create_with_a_bad_name_is_refused_with_invalid_name(db: Path, name: str) -> None:
    refused(db, "create", name, error="InvalidName")


# --- drop --------------------------------------------------------------------------------------

def test_drop_frees_the_name_and_reports_the_drop_time(db: Path) -> None:
    table_id = create(db, "sales.orders")

    out = ok(db, "drop", "sales.orders").stdout

    assert re.fullmatch(rf"dropped sales\.orders \(id {table_id}\) at {ISO_Z}\n", out), out
    assert ok(db, "tables").stdout == "no live tables\n"
    assert event_count(db) == 2


def test_drop_of_a_table_that_is_not_live_is_refused(db: Path) -> None:
    refused(db, "drop", "sales.orders", error="TableNotFound")
    create(db, "sales.orders")
    drop(db, "sales.orders")
    line = refused(db, "drop", "sales.orders", error="TableNotFound")
    assert "it is dropped; see show-dropped" in line


# --- undrop ------------------------------------------------------------------------------------

def test_r7_cli_undrop_by_name_restores_the_newest_dropped_instance(db: Path) -> None:
    create(db, "sales.orders")
    drop(db, "sales.orders")
    newer = create(db, "sales.orders")  # a second instance of the same name
    drop(db, "sales.orders")

    out = ok(db, "undrop", "sales.orders").stdout

    assert out == f"undropped sales.orders (id {newer})\n"
    assert ok_json(db, "show", "sales.orders")["id"] == newer


def test_r7_cli_undrop_by_id_restores_that_instance(db: Path) -> None:
    older = create(db, "sales.orders")
    drop(db, "sales.orders")
    create(db, "sales.orders")
    drop(db, "sales.orders")

    data = ok_json(db, "undrop", "sales.orders", "--id", older)

    assert (data["id"], data["name"], data["state"]) == (older, "sales.orders", "live")
    assert [t["id"] for t in ok_json(db, "tables")] == [older]


def test_r7_cli_undrop_as_a_new_name(db: Path) -> None:
    table_id = create(db, "sales.orders")
    drop(db, "sales.orders")
    create(db, "sales.orders")  # the old name is taken again

    data = ok_json(db, "undrop", "sales.orders", "--as", "sales.orders_old")

    assert (data["id"], data["name"]) == (table_id, "sales.orders_old")
    assert ok_json(db, "show", "sales.orders_old")["id"] == table_id
    assert sorted(t["name"] for t in ok_json(db, "tables")) == ["sales.orders", "sales.orders_old"]


def test_r7_cli_undrop_onto_a_bound_name_is_refused_with_table_exists(db: Path) -> None:
    old = create(db, "sales.orders")
    drop(db, "sales.orders")
    new = create(db, "sales.orders")

    line = refused(db, "undrop", "sales.orders", error="TableExists")

    assert f"cannot undrop sales.orders (id {old})" in line
    assert f"already a live table (id {new})" in line


def test_a_refusal_with_json_still_prints_only_the_error_line(db: Path) -> None:
    create(db, "sales.orders")
    refused(db, "--json", "create", "sales.orders", error="TableExists")
    refused(db, "create", "sales.orders", "--json", error="TableExists")


def test_undrop_refusals_for_missing_or_mismatched_instances(db: Path) -> None:
    refused(db, "undrop", "sales.orders", error="TableNotFound")
    other = create(db, "sales.other")
    create(db, "sales.orders")
    drop(db, "sales.orders")
    line = refused(db, "undrop", "sales.orders", "--id", other, error="TableNotFound")
    assert f"table id {other} is sales.other, not sales.orders" in line
    refused(db, "undrop", "sales.orders", "--id", "not-an-id", error="InvalidName")
    refused(db, "undrop", "sales orders", error="InvalidName")


def test_r3_cli_undrop_blocked_reports_guard_message(db: Path) -> None:
    table_id = create(db, "sales.orders")
    dropped_at = drop(db, "sales.orders")["dropped_at"]
    mark = ok_json(db, "watermark", "--advance", "now")["watermark"]
    assert dropped_at <= mark  # ISO 8601 with a fixed width sorts as time does

    line = refused(db, "undrop", "sales.orders", error="UndropBlocked")

    assert f"cannot undrop sales.orders (id {table_id})" in line  # the table and its id
    assert f"dropped at {dropped_at}" in line                       # its drop time
    assert f"watermark {mark}" in line                              # and the watermark
    assert re.findall(ISO_Z, line) == [dropped_at, mark]            # in ISO 8601 UTC
    assert ok_json(db, "show-dropped")[0]["state"] == "blocked"


def test_r3_cli_undrop_is_allowed_with_no_watermark_set_and_before_it(db: Path) -> None:
    create(db, "sales.orders")
    drop(db, "sales.orders")
    ok(db, "watermark", "--advance", "2020-01-01T00:00:00Z")  # long before the drop

    assert ok_json(db, "undrop", "sales.orders")["state"] == "live"


# --- databases ---------------------------------------------------------------------------------

def test_r7_cli_drop_database_and_undrop_database_restore_exactly_its_tables(db: Path) -> None:
    a, b = create(db, "sales.a"), create(db, "sales.b")
    c = create(db, "other.c")

    assert ok(db, "drop-database", "sales").stdout == "dropped database sales: 2 table(s)\n"
    assert [t["id"] for t in ok_json(db, "tables")] == [c]
    assert {t["id"] for t in ok_json(db, "show-dropped")} == {a, b}
    assert event_count(db) == 4  # one append for the whole database

    restored = ok_json(db, "undrop-database", "sales")

    assert sorted((t["id"], t["name"], t["state"]) for t in restored) == \
        sorted([(a, "sales.a", "live"), (b, "sales.b", "live")])
    assert sorted(t["name"] for t in ok_json(db, "tables")) == ["other.c", "sales.a", "sales.b"]
    assert ok(db, "show-dropped").stdout == "no dropped tables\n"


def test_drop_database_with_no_live_tables_is_refused(db: Path) -> None:
    line = refused(db, "drop-database", "sales", error="DatabaseNotFound")
    assert "cannot drop database sales: it has no live tables" in line
    refused(db, "undrop-database", "sales", error="DatabaseNotFound")
    refused(db, "drop-database", "sales.orders", error="InvalidName")


def test_r7_cli_undrop_database_is_all_or_none(db: Path) -> None:
    create(db, "sales.a")
    create(db, "sales.b")
    ok(db, "drop-database", "sales")
    create(db, "sales.b")  # one of its names is bound again

    refused(db, "undrop-database", "sales", error="TableExists")

    assert [t["name"] for t in ok_json(db, "tables")] == ["sales.b"]  # sales.a not restored alone


def test_r3_cli_undrop_database_blocked_by_its_database_watermark(db: Path) -> None:
    create(db, "sales.a")
    create(db, "sales.b")
    ok(db, "drop-database", "sales")
    ok(db, "watermark", "--scope", "database:sales", "--advance", "now")

    line = refused(db, "undrop-database", "sales", error="UndropBlocked")

    assert "(scope database:sales)" in line
    assert ok(db, "tables").stdout == "no live tables\n"


# --- show, tables, show-dropped ----------------------------------------------------------------

def test_show_prints_one_field_per_line(db: Path, tmp_path: Path) -> None:
    table_id = create(db, "sales.orders")

    lines = ok(db, "show", "sales.orders").stdout.splitlines()

    assert f"id: {table_id}" in lines
    assert "name: sales.orders" in lines and "state: live" in lines
    assert f"location: {tmp_path}/warehouse/{table_id}" in lines
    assert "dropped_at: -" in lines  # not Python's None
    assert any(re.fullmatch(f"created_at: {ISO_Z}", line) for line in lines)


def test_show_of_a_dropped_table_is_refused(db: Path) -> None:
    create(db, "sales.orders")
    drop(db, "sales.orders")
    line = refused(db, "show", "sales.orders", error="TableNotFound")
    assert "no live table sales.orders (it is dropped" in line


def test_tables_lists_live_tables_by_name_and_filters_by_database(db: Path) -> None:
    assert ok(empty(db), "tables").stdout == "no live tables\n"
    ids = {name: create(db, name) for name in ["sales.b", "other.z", "sales.a"]}

    header, *lines = ok(db, "tables").stdout.splitlines()
    assert header.split() == ["ID", "NAME", "STATE", "CREATED_AT", "LOCATION"]
    assert [line.split()[:3] for line in lines] == [
        [ids["other.z"], "other.z", "live"], [ids["sales.a"], "sales.a", "live"],
        [ids["sales.b"], "sales.b", "live"]]
    assert [t["name"] for t in ok_json(db, "tables", "--database", "sales")] == ["sales.a", "sales.b"]
    assert ok(db, "tables", "--database", "nothing").stdout == "no live tables\n"


def test_show_dropped_lists_id_name_iso_drop_time_and_location_newest_first(
        db: Path, tmp_path: Path) -> None:
    assert ok(empty(db), "show-dropped").stdout == "no dropped tables\n"
    first = create(db, "sales.orders")
    first_drop = drop(db, "sales.orders")["dropped_at"]
    second = create(db, "sales.items")
    second_drop = drop(db, "sales.items")["dropped_at"]

    header, *lines = ok(db, "show-dropped").stdout.splitlines()

    assert header.split() == ["ID", "NAME", "STATE", "DROPPED_AT", "RESTORABLE_UNTIL", "FILES", "SIZE", "LOCATION"]
    assert len(lines) == 2
    for line, (table_id, name, when) in zip(lines, [(second, "sales.items", second_drop),
                                                     (first, "sales.orders", first_drop)]):
        fields = line.split()
        until = (datetime.fromisoformat(when.replace("Z", "+00:00")) + timedelta(days=7)).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")  # the default retention: 7 days after the drop
        assert fields == [table_id, name, "dropped", when, until, "0", "0", "B", f"{tmp_path}/warehouse/{table_id}"]
        assert re.fullmatch(ISO_Z, when)


def test_json_works_as_a_group_option_and_as_a_subcommand_option(db: Path) -> None:
    table_id = create(db, "sales.orders")
    drop(db, "sales.orders")

    as_group = json.loads(ok(db, "--json", "show-dropped").stdout)
    as_option = json.loads(ok(db, "show-dropped", "--json").stdout)

    assert as_group == as_option
    assert [(t["id"], t["name"], t["state"]) for t in as_group] == [(table_id, "sales.orders", "dropped")]
    assert re.fullmatch(ISO_Z, as_group[0]["dropped_at"])


def test_show_dropped_filters_by_database_and_name(db: Path) -> None:
    for name in ["sales.a", "sales.b", "other.a"]:
        create(db, name)
        drop(db, name)

    assert [t["name"] for t in ok_json(db, "show-dropped", "--database", "sales")] == ["sales.b", "sales.a"]
    assert [t["name"] for t in ok_json(db, "show-dropped", "--name", "other.a")] == ["other.a"]
    refused(db, "show-dropped", "--name", "a", error="InvalidName")


# --- watermark ---------------------------------------------------------------------------------

def test_watermark_show_when_not_set(db: Path) -> None:
    assert ok(empty(db), "watermark").stdout == "ledger: not set\n"
    assert ok_json(db, "watermark") == {"scope": "ledger", "watermark": None}


def test_r1_cli_watermark_advance_to_a_time_is_fetch_and_set_and_never_moves_back(db: Path) -> None:
    empty(db)  # only create makes a ledger
    first = ok_json(db, "watermark", "--advance", "2020-01-01T02:00:00+02:00")  # converted to UTC
    assert first == {"scope": "ledger", "previous": None, "watermark": "2020-01-01T00:00:00.000000Z"}

    out = ok(db, "watermark", "--advance", "2020-06-01T00:00:00Z").stdout
    assert out == "ledger: 2020-01-01T00:00:00.000000Z -> 2020-06-01T00:00:00.000000Z\n"
    assert event_count(db) == 2

    back = ok_json(db, "watermark", "--advance", "2019-01-01T00:00:00Z")  # at or before: no change
    assert back == {"scope": "ledger", "previous": "2020-06-01T00:00:00.000000Z",
                    "watermark": "2020-06-01T00:00:00.000000Z"}
    assert event_count(db) == 2
    assert ok(db, "watermark").stdout == "ledger: 2020-06-01T00:00:00.000000Z\n"


def test_watermark_advance_now_blocks_what_was_dropped_before(db: Path) -> None:
    create(db, "sales.orders")
    dropped_at = drop(db, "sales.orders")["dropped_at"]

    data = ok_json(db, "watermark", "--advance", "now")

    assert data["previous"] is None and re.fullmatch(ISO_Z, data["watermark"])
    assert data["watermark"] >= dropped_at
    [shown] = ok_json(db, "show-dropped")
    assert (shown["state"], shown["effective_watermark"]) == ("blocked", data["watermark"])


def test_watermark_scopes_database_and_table_block_only_what_they_cover(db: Path) -> None:
    orders = create(db, "sales.orders")
    items = create(db, "sales.items")
    other = create(db, "other.things")
    for name in ["sales.orders", "sales.items", "other.things"]:
        drop(db, name)

    by_table = ok_json(db, "watermark", "--scope", f"table:{orders}", "--advance", "now")
    assert by_table["scope"] == f"table:{orders}" and by_table["previous"] is None
    states = {t["id"]: t["state"] for t in ok_json(db, "show-dropped")}
    assert states == {orders: "blocked", items: "dropped", other: "dropped"}

    by_db = ok_json(db, "watermark", "--scope", "database:sales", "--advance", "now")
    assert by_db["scope"] == "database:sales"
    states = {t["id"]: t["state"] for t in ok_json(db, "show-dropped")}
    assert states == {orders: "blocked", items: "blocked", other: "dropped"}

    assert ok_json(db, "watermark", "--scope", "database:sales") == \
        {"scope": "database:sales", "watermark": by_db["watermark"]}
    assert ok(db, "watermark", "--scope", "database:other").stdout == "database:other: not set\n"
    assert ok_json(db, "undrop", "other.things")["id"] == other


def test_watermark_with_a_naive_time_is_refused_with_invalid_time(db: Path) -> None:
    line = refused(db, "watermark", "--advance", "2026-01-01T00:00:00", error="InvalidTime")
    assert "2026-01-01T00:00:00 has no timezone" in line
    assert ok(db, "watermark").stdout == "ledger: not set\n"


@pytest.mark.parametrize("args, error, words", [
    (["--advance", "2999-01-01T00:00:00Z"], "InvalidTime", "past the ledger's current time"),
    (["--advance", "yesterday"], "InvalidTime", "not an ISO 8601 time"),
    (["--scope", "everything"], "InvalidScope", "is not one of"),
    (["--scope", "table:abc", "--advance", "now"], "InvalidScope", "not a table id"),
    (["--scope", "table:0123456789abcdef", "--advance", "now"], "TableNotFound", "0123456789abcdef"),
])
def test_watermark_refusals(db: Path, args: list[str], error: str, words: str) -> None:
    create(db, "sales.orders")
    assert words in refused(db, "watermark", *args, error=error)


# --- retention ---------------------------------------------------------------------------------

def retention_json(db: Path, *args: str) -> dict:
    """The retention command's JSON: the setting at the scope, and what applies there and why."""
    data = ok_json(db, "retention", *args)
    assert data["effective_seconds"] == data["retention_seconds"] or data["retention_seconds"] is None
    return {k: data[k] for k in ("scope", "retention_seconds")}


def test_retention_show_set_override_and_clear(db: Path) -> None:
    assert ok(empty(db), "retention").stdout == "ledger: not set here; 7d applies (the built-in default)\n"
    assert retention_json(db) == {"scope": "ledger", "retention_seconds": None}

    assert retention_json(db, "7d") == {"scope": "ledger", "retention_seconds": 7 * 86_400}
    assert ok_json(db, "retention") == {"scope": "ledger", "retention_seconds": 7 * 86_400, "retention": "7d",
                                        "effective": "7d", "effective_seconds": 7 * 86_400,
                                        "effective_from": "ledger"}

    assert retention_json(db, "1h", "--override-floor") == {"scope": "ledger", "retention_seconds": 3600}
    assert ok(db, "retention").stdout == "ledger: 1h\n"

    assert retention_json(db, "none") == {"scope": "ledger", "retention_seconds": None}
    assert ok(db, "retention").stdout == "ledger: not set here; 7d applies (the built-in default)\n"
    assert event_count(db) == 3


def test_retention_below_the_floor_is_refused_without_override(db: Path) -> None:
    empty(db)  # only create makes a ledger
    ok(db, "retention", "7d")

    line = refused(db, "retention", "1h", error="InvalidRetention")

    assert "below the 1d floor" in line and "pass --override-floor if" in line and "override_floor=True" not in line
    assert ok_json(db, "retention")["retention_seconds"] == 7 * 86_400


def test_retention_of_a_database_applies_to_its_tables(db: Path) -> None:
    create(db, "sales.orders")
    create(db, "other.things")

    assert retention_json(db, "36h", "--scope", "database:sales") == \
        {"scope": "database:sales", "retention_seconds": 36 * 3600}

    assert ok_json(db, "show", "sales.orders")["retention_seconds"] == 36 * 3600
    assert ok_json(db, "show", "other.things")["retention_seconds"] == 7 * 86_400
    assert ok_json(db, "retention")["retention_seconds"] is None  # the ledger's own is untouched
    assert ok(db, "retention", "--scope", "database:other").stdout == \
        "database:other: not set here; 7d applies (the built-in default)\n"


@pytest.mark.parametrize("args, words", [
    (["abc"], "is not a duration"),
    (["7 days"], "is not a duration"),
    (["--", "-1d"], "is negative"),  # after --, so click does not take it for an option
])
def test_a_malformed_retention_is_refused(db: Path, args: list[str], words: str) -> None:
    assert words in refused(db, "retention", *args, error="InvalidRetention")


# --- history -----------------------------------------------------------------------------------

def test_history_lists_every_event_in_order_with_iso_times(db: Path) -> None:
    a = create(db, "sales.a")
    drop(db, "sales.a")
    ok(db, "watermark", "--advance", "2020-01-01T00:00:00Z")

    entries = ok_json(db, "history")

    assert [e["seq"] for e in entries] == [1, 2, 3]
    assert [e["type"] for e in entries] == ["TableCreated", "TableDropped", "WatermarkAdvanced"]
    assert {e["actor"] for e in entries} == {ACTOR}
    assert all(re.fullmatch(ISO_Z, e["time"]) for e in entries)
    assert [e["time"] for e in entries] == sorted({e["time"] for e in entries})  # strictly increasing
    assert entries[0]["data"]["table_id"] == a
    assert entries[2]["data"] == {"scope": "ledger", "to": "2020-01-01T00:00:00.000000Z"}

    lines = ok(db, "history").stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["#1", "#2", "#3"]
    assert re.fullmatch(rf"#1\s+{ISO_Z}\s+{ACTOR} created sales\.a \(id {a}\)", lines[0])
    assert lines[2].endswith(f"{ACTOR} advanced the watermark of the ledger to 2020-01-01T00:00:00.000000Z")


def test_history_of_one_table_by_name_and_by_id(db: Path) -> None:
    first = create(db, "sales.orders")
    drop(db, "sales.orders")
    second = create(db, "sales.orders")
    create(db, "sales.other")

    by_name = ok_json(db, "history", "sales.orders")
    assert [(e["type"], e["data"]["table_id"]) for e in by_name] == [
        ("TableCreated", first), ("TableDropped", first), ("TableCreated", second)]

    by_id = ok_json(db, "history", "--id", first)
    assert [(e["seq"], e["type"]) for e in by_id] == [(1, "TableCreated"), (2, "TableDropped")]

    assert "nothing.here has ever existed" in refused(db, "history", "nothing.here", error="TableNotFound")
    refused(db, "history", "--id", "0" * 16, error="TableNotFound")
    refused(db, "history", "--id", "xyz", error="InvalidName")


# --- verify ------------------------------------------------------------------------------------

def test_verify_reports_counts(db: Path) -> None:
    create(db, "sales.a")
    create(db, "sales.b")
    drop(db, "sales.a")

    report = ok_json(db, "verify")
    assert ok(db, "verify").stdout == \
        f"ok: 3 events, chain intact to {report['head'][:16]}...; 1 live, 1 dropped, 0 purged\n"
    assert {k: report[k] for k in ("events", "last_seq", "instances", "live", "dropped", "purged")} == \
        {"events": 3, "last_seq": 3, "instances": 2, "live": 1, "dropped": 1, "purged": 0}


def test_a_garbage_ledger_file_is_refused_as_corrupt(db: Path) -> None:
    db.write_bytes(b"this is not a ledger, it is a shopping list\n" * 10)

    result = invoke(db, "verify")

    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: LedgerCorrupt: ")
    assert db.read_bytes() == b"this is not a ledger, it is a shopping list\n" * 10


def test_a_ledger_of_a_newer_format_is_refused_with_a_message_to_upgrade(db: Path) -> None:
    create(db, "sales.orders")
    raw = sqlite3.connect(db)
    raw.execute("UPDATE meta SET value = '999' WHERE key = 'format_version'")
    raw.commit()
    raw.close()

    result = invoke(db, "tables")

    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: IncompatibleLedger: ")
    assert "format 999" in result.stderr and "upgrade" in result.stderr


# --- usage errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["frobnicate"],
    ["create"],
    ["drop"],
    ["undrop"],
    ["drop-database"],
    ["undrop-database"],
    ["show"],
    ["undrop", "sales.orders", "--id"],
    ["watermark", "--advance"],
    ["tables", "--no-such-option"],
    ["create", "sales.a", "sales.b"],
])
def test_usage_errors_exit_2_and_touch_nothing(db: Path, args: list[str]) -> None:
    usage_error(db, *args)
    assert not db.exists()  # the ledger was never opened


def test_unknown_command_is_named_in_the_usage_error(db: Path) -> None:
    unknown = usage_error(db, "frobnicate").stderr
    assert "Usage: " in unknown and "No such command 'frobnicate'" in unknown
    missing = usage_error(db, "create").stderr
    assert "Usage: " in missing and "Missing argument 'NAME'" in missing


# --- a real process ----------------------------------------------------------------------------

def test_subprocess_commands_succeed_with_exit_0_and_json_on_stdout(tmp_path: Path) -> None:
    ledger = str(tmp_path / "proc.db")
    created = run_module(tmp_path, "--ledger", ledger, "--json", "create", "sales.orders")
    assert (created.returncode, created.stderr) == (0, "")
    table_id = json.loads(created.stdout)["id"]

    dropped = run_module(tmp_path, "drop", "sales.orders", env={"RETENTION_LEDGER": ledger})
    assert (dropped.returncode, dropped.stderr) == (0, "")
    assert dropped.stdout.startswith(f"dropped sales.orders (id {table_id}) at ")

    listed = run_module(tmp_path, "--ledger", ledger, "show-dropped", "--json")
    assert (listed.returncode, listed.stderr) == (0, "")
    assert [(t["id"], t["state"]) for t in json.loads(listed.stdout)] == [(table_id, "dropped")]
    assert event_count(Path(ledger)) == 2


def test_r3_subprocess_undrop_blocked_exits_1_with_one_error_line(tmp_path: Path) -> None:
    ledger = tmp_path / "proc.db"
    with Ledger.open(ledger) as led:
        table = led.create_table("sales.orders")
        dropped_at = led.drop_table("sales.orders").dropped_at
        led.advance_watermark(dropped_at)
        before = led.event_count()

    proc = run_module(tmp_path, "--ledger", str(ledger), "undrop", "sales.orders")

    assert proc.returncode == 1
    assert proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"error: UndropBlocked: cannot undrop sales.orders (id {table.id})")
    iso = dropped_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert f"dropped at {iso}" in line and f"watermark {iso}" in line
    assert event_count(ledger) == before


def test_subprocess_usage_error_exits_2_and_a_naive_time_exits_1(tmp_path: Path) -> None:
    ledger = tmp_path / "proc.db"

    usage = run_module(tmp_path, "--ledger", str(ledger), "undrop")
    assert usage.returncode == 2 and usage.stdout == ""
    assert "Missing argument 'NAME'" in usage.stderr
    assert not ledger.exists()

    naive = run_module(tmp_path, "--ledger", str(ledger), "watermark", "--advance", "2026-01-01T00:00:00")
    assert naive.returncode == 1 and naive.stdout == ""
    [line] = naive.stderr.splitlines()
    assert line.startswith("error: InvalidTime: naive datetime 2026-01-01T00:00:00 has no timezone")
    assert event_count(ledger) == 0


def test_r10_cli_another_warehouse_for_an_existing_ledger_is_refused(tmp_path: Path) -> None:
    """The root is recorded when the ledger is created; a command that names another one is
    refused (before, it wrote tables where no vacuum would look), and nothing changes."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        home = led.create_table("sales.orders").location
    assert home == str(tmp_path / "warehouse" / Path(home).name)
    elsewhere = tmp_path / "elsewhere"
    result = CliRunner().invoke(cli, ["--ledger", str(path), "--warehouse", str(elsewhere), "create", "sales.x"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("error: WarehouseMismatch: ") and "move-warehouse" in result.stderr
    assert not elsewhere.exists()
    with Ledger.open(path) as led:
        assert led.table("sales.orders").location == home and led.event_count() == 1


def test_read_only_commands_refuse_a_ledger_that_does_not_exist(tmp_path: Path) -> None:
    """A mistyped --ledger path used to answer "ok: 0 events"; now it is an error and no file appears."""
    typo = tmp_path / "typo.db"
    for args in (["verify"], ["tables"], ["show-dropped"], ["history"], ["watermark"], ["retention"],
                 ["show", "a.b"], ["vacuum", "--dry-run"]):
        result = CliRunner().invoke(cli, ["--ledger", str(typo), *args])
        assert result.exit_code == 1 and result.stdout == "", (args, result.stdout)
        assert result.stderr.startswith("error: LedgerNotFound: there is no ledger at "), result.stderr
        assert result.stderr.count("\n") == 1
        assert not typo.exists()


# --- the docs' promises about the command line -----------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_guide_lists_every_command_and_every_error_a_user_can_meet() -> None:
    """The command list drifted from the code once; now a command or an error type that the guide
    does not mention (or one it mentions that is gone) fails here."""
    import arrow_ops.iceberg
    import ledger.errors
    import retention_ledger.demo
    import spark_ops.session
    from retention_ledger import cli as cli_module

    guide = (DOCS / "guide" / "cli.md").read_text()
    block = guide[guide.index("```bash"):guide.index("```", guide.index("```bash") + 3)]
    documented = set(re.findall(r"^retention-ledger (?:--ledger tenant\.db )?([a-z-]+)", block, re.M))
    assert documented == set(cli.commands), (documented ^ set(cli.commands))

    errors_table = (DOCS / "errors.md").read_text()
    kinds = {cls for module in (ledger.errors, spark_ops.session, cli_module, retention_ledger.demo, arrow_ops.iceberg)
             for cls in vars(module).values()
             if inspect.isclass(cls) and issubclass(cls, ledger.errors.LedgerError)}
    readme = (DOCS.parent / "README.md").read_text()
    short = readme[readme.index("## When it refuses"):readme.index("## Guarantees")]
    for where, text in (("the errors page", errors_table), ("README's short table", short)):
        missing = sorted(cls.__name__ for cls in kinds
                         if cls is not ledger.errors.LedgerError and f"`{cls.__name__}`" not in text)
        assert not missing, f"{where} does not explain {missing}"


def test_the_built_reference_documents_every_command_and_the_python_api(tmp_path: Path) -> None:
    """The site builds with --strict (no broken link, no missing reference), and the references it
    generates hold every command of the CLI and the ledger's public methods."""
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
                           cwd=DOCS.parent, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    reference = (site / "reference" / "cli" / "index.html").read_text()
    missing = sorted(name for name in cli.commands if f"retention-ledger {name}" not in reference)
    assert not missing, f"the CLI reference lacks {missing}"
    api = (site / "reference" / "python" / "index.html").read_text()
    public = [name for name, _ in inspect.getmembers(Ledger, callable) if not name.startswith("_")]
    assert not [name for name in public if f"ledger.Ledger.{name}" not in api]


# --- smaller things a new user noticed (each test failed before its fix) ----------------------

def test_watermark_advance_to_an_earlier_time_says_it_is_unchanged(db: Path) -> None:
    empty(db)  # only create makes a ledger
    ok(db, "watermark", "--advance", "2020-06-01T00:00:00Z")
    out = ok(db, "watermark", "--advance", "2019-01-01T00:00:00Z").stdout
    assert out == ("ledger: unchanged at 2020-06-01T00:00:00.000000Z: watermarks never move back, and "
                   "2019-01-01T00:00:00.000000Z is not after it\n")  # it used to print "X -> X"


def test_cli_undrop_blocked_by_a_hand_advanced_watermark_blames_no_vacuum(db: Path) -> None:
    create(db, "sales.orders")
    drop(db, "sales.orders")
    ok(db, "watermark", "--advance", "now")
    line = refused(db, "undrop", "sales.orders", error="UndropBlocked")
    assert "(scope ledger), advanced by hand" in line and "vacuum watermark" not in line


def test_nothing_to_vacuum_says_which_retention_kept_each_table(db: Path, tmp_path: Path) -> None:
    """A database retention outranks --retention; the user used to see only "nothing to vacuum"."""
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=3))
    with Ledger.open(db, clock=clock) as led:
        led.set_retention("database:sales", "30d")
        table = led.create_table("sales.orders")
        dropped_at = led.drop_table("sales.orders").dropped_at
    out = ok(db, "vacuum", "--retention", "1d").stdout
    due = (dropped_at + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert out == (f"nothing to vacuum\n  sales.orders (id {table.id}) is restorable until {due}: "
                   "retention 30d from database:sales\n")
    report = ok_json(db, "vacuum", "--retention", "1d")
    assert report["waiting"] == [{"id": table.id, "name": "sales.orders", "dropped_at": ISO(dropped_at),
                                  "due_at": due, "retention": "30d", "retention_from": "database:sales"}]


def ISO(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_an_empty_vacuum_report_has_every_field_a_full_one_has(db: Path) -> None:
    from spark_ops.vacuum_job import VacuumReport

    report = ok_json(empty(db), "vacuum")
    full = VacuumReport(run_id="r", dry_run=False, watermarks={}, entries=(), resumed_runs=(),
                        duration=0.0).to_dict()
    assert set(report) == set(full)


def test_retention_for_a_database_with_no_tables_is_allowed_and_says_so(db: Path) -> None:
    """Decided: a policy may come before its tables (the setting applies to tables created in
    the database later), so it is accepted, and the output says the database has no tables."""
    out = ok(empty(db), "retention", "3d", "--scope", "database:nosuch").stdout
    assert out == ("database:nosuch: 3d (database nosuch has no tables yet: the setting applies to "
                   "tables created in it)\n")


def test_help_lists_every_command_in_whole_sentences_and_every_option_has_help(db: Path) -> None:
    top = ok(db, "--help").stdout
    listed = top[top.index("Commands:"):]
    assert "..." not in listed  # click cuts long docstrings mid-sentence unless given a short help
    for name, command in cli.commands.items():
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{name} {param.opts} has no help"
    for param in cli.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help, f"{param.opts} has no help"


def test_version_is_printed(db: Path) -> None:
    out = ok(db, "--version").stdout
    assert re.fullmatch(r"retention-ledger, version \d+\.\d+\.\d+\n", out)


def test_a_release_has_one_version_everywhere(db: Path) -> None:
    """``--version`` and the package said 0.3.0 while the changelog's newest section was
    "Unreleased" and held all of 0.4: what main holds is a release, named alike in the project's
    metadata, the installed package, the command line and the changelog's newest section."""
    import tomllib
    from importlib.metadata import version

    root = Path(__file__).resolve().parent.parent
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    newest = next(line for line in (root / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ["))
    assert re.fullmatch(rf"## \[{re.escape(declared)}\] - \d{{4}}-\d{{2}}-\d{{2}}", newest), newest
    assert version("retention-ledger") == declared, "reinstall: pip install -e ."
    assert ok(db, "--version").stdout == f"retention-ledger, version {declared}\n"


# --- versions, restore, mark, writes ---------------------------------------------------------

def _commit(db: Path, name: str, clock: ManualClock, mode: str = "append") -> int:
    with Ledger.open(db, clock=clock) as led:
        w = led.begin_write(name)
        os.makedirs(w.folder)
        Path(w.folder, "part-0.parquet").write_bytes(b"x" * 5)
        return led.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", 5)], mode=mode).number


def led_versions(db: Path) -> list:
    with Ledger.open(db, create=False) as led:
        return led.versions("sales.orders")


def test_r11_r12_cli_versions_restore_and_mark(db: Path) -> None:
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=3))
    create(db, "sales.orders")
    _commit(db, "sales.orders", clock)
    clock.advance(timedelta(days=1))
    _commit(db, "sales.orders", clock, mode="overwrite")
    assert ok_json(db, "show", "sales.orders")["current_version"] == 2

    header, *lines = ok(db, "versions", "sales.orders").stdout.splitlines()
    assert header.split() == ["VERSION", "COMMITTED_AT", "MODE", "FILES", "SIZE", "STATE"]
    assert [line.split()[0] for line in lines] == ["2", "1"] and lines[0].split()[-1] == "current"
    [first] = [v for v in ok_json(db, "versions", "sales.orders", "--files") if v["number"] == 1]
    assert first["files"][0]["size"] == 5 and first["mode"] == "append"
    # the names Python uses: file_count for the count, files for the list
    assert first["file_count"] == led_versions(db)[-1].file_count == 1 and "file_list" not in first

    out = ok(db, "restore", "sales.orders", "--version", "1").stdout
    assert out == "restored sales.orders to version 1: now version 3 (1 file, 5 B)\n"
    usage_error(db, "restore", "sales.orders")  # neither --version nor --as-of

    marked = ok_json(db, "mark", "sales.orders", "--advance", "now")
    assert marked["previous"] is None and re.fullmatch(ISO_Z, marked["retention_mark"])
    line = refused(db, "restore", "sales.orders", "--version", "1", error="VersionExpired")
    assert "sales.orders version 1 (committed at" in line and "retention mark" in line
    again = ok(db, "mark", "sales.orders", "--advance", "now").stdout
    assert again.startswith("sales.orders: unchanged at ")


def test_versions_files_are_listed_in_text_too(db: Path) -> None:
    """``versions --files`` was ignored without ``--json``: the text showed no file."""
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=1))
    create(db, "sales.orders")
    _commit(db, "sales.orders", clock)
    _commit(db, "sales.orders", clock, mode="overwrite")
    with Ledger.open(db, create=False) as led:
        [v2, v1] = [(v.number, v.files) for v in led.versions("sales.orders")]
    out = ok(db, "versions", "sales.orders", "--files").stdout
    table, second, first = out.rstrip("\n").split("\n\n")
    assert table == ok(db, "versions", "sales.orders").stdout.rstrip("\n")
    for block, (number, files) in ((second, v2), (first, v1)):
        title, header, *rows = block.splitlines()
        assert title == f"version {number} (1 file, 5 B):" and header.split() == ["SIZE", "PATH"]
        assert [row.split() for row in rows] == [["5", "B", f.path] for f in files]
    assert v1[1][0].path != v2[1][0].path


def test_r25_cli_versions_shows_an_erased_version_as_erased_naming_its_request(db: Path) -> None:
    """``versions`` listed a version an erasure made unreadable as ``readable``, and ``--json`` had no
    mark of it (issue 57 item 14): a user reading the list would try to read or restore it."""
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=2))
    table_id = create(db, "sales.orders")
    _commit(db, "sales.orders", clock)
    _commit(db, "sales.orders", clock, mode="overwrite")
    with Ledger.open(db, clock=clock) as led:
        [held] = led.version("sales.orders", version=1).files
        request = led.request_erasure("sales.orders", predicate="user_id = 42", reason="asked",
                                      files=[(f"{table_id}/{held.path}", held.size)]).request_id

    header, current, erased = ok(db, "versions", "sales.orders").stdout.splitlines()
    state = header.index("STATE")
    assert current[state:] == "current" and erased[state:] == f"erased by {request}"
    two, one = ok_json(db, "versions", "sales.orders", "--files")
    assert (two["erased_by"], one["erased_by"]) == (None, request)
    assert one["files"] == [{"path": held.path, "size": held.size}]  # what it held is still listed
    first_block = ok(db, "versions", "sales.orders", "--files").stdout.split("\n\n")[-1]
    assert first_block.startswith(f"version 1 (1 file, 5 B, erased by {request}):")


def test_r14_cli_writes_lists_open_writes_with_their_expiry(db: Path) -> None:
    create(db, "sales.orders")
    assert ok(db, "writes").stdout == "no open writes\n"
    with Ledger.open(db) as led:
        w = led.begin_write("sales.orders", lease="2h")
    [shown] = ok_json(db, "writes")
    assert (shown["id"], shown["table"], shown["lease"], shown["status"]) == (w.id, "sales.orders", "2h", "open")
    header, line = ok(db, "writes").stdout.splitlines()
    assert header.split() == ["WRITE", "TABLE", "BEGAN_AT", "EXPIRES_AT", "LEASE", "FOLDER"]
    assert line.split()[0] == w.id


# --- found by a new user (issue 26; each failed before its fix) --------------------------------

@pytest.mark.parametrize("args", [["drop", "sales.orders"], ["undrop", "sales.orders"], ["drop-database", "sales"],
                                  ["undrop-database", "sales"], ["restore", "sales.orders", "--version", "1"],
                                  ["mark", "sales.orders", "--advance", "2020-01-01T00:00:00Z"],
                                  ["watermark", "--advance", "2020-01-01T00:00:00Z"], ["retention", "7d"],
                                  ["move-warehouse", "/tmp/elsewhere"], ["vacuum"]])
def test_r10_only_create_makes_a_ledger_and_a_mistyped_path_is_ledger_not_found(tmp_path: Path, args: list[str]) -> None:
    """``drop`` on a mistyped ``--ledger`` used to create an empty ledger and answer "no dropped instance"."""
    typo = tmp_path / "tenant-typo.db"
    result = invoke(typo, *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("error: LedgerNotFound: there is no ledger at ") and result.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
    ok(typo, "create", "sales.orders")
    assert typo.exists()


def test_vacuum_only_uncommitted_with_no_uncommitted_is_a_usage_error(db: Path) -> None:
    empty(db)
    before = event_count(db)
    assert "cannot be combined with --no-uncommitted" in usage_error(db, "vacuum", "--only-uncommitted",
                                                                     "--no-uncommitted").stderr
    assert event_count(db) == before


def test_vacuum_listing_dir_without_dry_run_is_a_usage_error(db: Path, tmp_path: Path) -> None:
    """``--listing-dir`` keeps a dry run's listing (issue 58, item 5); a real run has none to keep, so
    the folder is not made and the option is not quietly ignored."""
    empty(db)
    before = event_count(db)
    assert "--listing-dir keeps a dry run's listing: it needs --dry-run" in \
        usage_error(db, "vacuum", "--listing-dir", str(tmp_path / "listing")).stderr
    assert event_count(db) == before and not (tmp_path / "listing").exists()


def test_r16_an_actor_with_a_control_character_cannot_forge_a_history_line(db: Path) -> None:
    empty(db)
    result = CliRunner().invoke(cli, ["--ledger", str(db), "--actor", "alice\n#9 2026-01-01 mallory dropped", "create",
                                      "sales.orders"])
    assert result.exit_code == 1 and "holds a control character" in result.stderr and event_count(db) == 0


def test_an_empty_file_at_the_ledger_path_is_not_taken_for_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    result = invoke(path, "create", "sales.orders")
    assert result.exit_code == 1 and "is an empty file, not a ledger" in result.stderr
    assert path.read_bytes() == b""
