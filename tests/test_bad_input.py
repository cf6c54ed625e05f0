"""Bad input, catalogued: every kind of bad input to every public command and CLI subcommand.

One table, ``CATALOGUE``, drives every test in this file. Each row names

* the Python call (``call(led, facts)``, or None where only the CLI has the input),
* the equivalent CLI argv (or None where there is no CLI form),
* the error class from ``ledger.errors`` the call must raise (exactly that class:
  ``type(exc) is error``; ``DatabaseNotFound`` is the one documented subclass and is
  named as such where it is expected),
* a regex the message must match (``re.search``); it names the offending value or
  says what to do, and ``cli_match`` overrides it where the CLI words things its
  own way (its time parsing, click's usage errors).

The Python side asserts: that exact class, ``isinstance(exc, LedgerError)``, the
message, and that neither the event count nor ``led.state`` moved. The CLI side
(``CliRunner`` on ``ledger.cli.cli`` with ``--ledger`` on the same prepared file)
asserts: exit 1, exactly one stderr line ``error: <ErrorClassName>: ...`` that
matches the regex, nothing on stdout, no crash (the exception is ``SystemExit``),
and neither the event count nor the folded state moved. Rows marked ``usage`` are
caught by click itself (``--limit`` is a ``click.IntRange``): exit 2, click's
``Error:`` on stderr naming the value, nothing on stdout, nothing appended.

Spark. No row starts a JVM. ``spark_ops.vacuum``, ``write_table`` and ``read_table``
get a stand-in whose every attribute access fails the test, and the CLI's
``vacuum`` gets the same stand-in in place of ``spark_ops.local_session``: a
refusal must come before Spark is touched, and these rows prove it does. (The real
CLI builds its SparkSession before the ledger plans, so a refused ``vacuum`` in a
shell still pays JVM start-up and prints Spark's start-up lines on stderr; the
stand-in hides that, and no row here covers it.)

Time. The prepared ledger runs on a ``ManualClock`` at ``tests.conftest.T0``
(2026-01-01), in the past; the CLI opens the same file with the system clock,
whose "now" is later, so every relative fact (blocked, restorable, past now)
holds on both sides.

Rows that show a library defect are ``xfail(strict=True)`` with the reason, per
side (``py_xfail``/``cli_xfail``), so the suite stays green and a fix turns them
into failures that ask for the mark to go.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Union

import pytest
from click.testing import CliRunner

import ledger
from ledger import (
    DatabaseNotFound, InvalidArgument, InvalidName, InvalidRetention, InvalidScope, InvalidTime,
    Ledger, LedgerError, LedgerUnavailable, ManualClock, Scope, TableExists, TableNotFound,
    UndropBlocked, LedgerNotFound, VacuumRun, WarehouseMismatch,
)
from retention_ledger.cli import cli
from ledger.clock import iso, to_micros
from tests.conftest import T0
from vacuum_work import Expiry, Folder, ForeignScan, Part, Purge, Result, StragglerScan, Sweep, split
from vacuum_work.leaves import leaf_input, tree_root

UNKNOWN_ID = "0123456789abcdef"  # well-formed, names no table in the prepared ledger
LONG = "x" * 65                  # one over the 64-character identifier limit


# --- the prepared ledger ---------------------------------------------------------------------

@dataclass(frozen=True)
class Facts:
    """Ids and times of the prepared ledger, for calls, argv and message regexes."""

    dir: str
    live: str
    purged: str
    purged_dropped: str
    purged_at: str
    purge_mark: str
    purge_run: str
    blocked: str
    blocked_dropped: str
    blocked_mark: str
    old_a: str
    old_dropped: str
    old_mark: str
    restorable: str
    reused_old: str
    reused_new: str
    crm_new: str


def _iso(value: datetime) -> str:
    return iso(to_micros(value))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Facts, datetime, int]:
    """The prepared ledger, built by real commands once per module (see ``prepared``)."""
    folder = tmp_path_factory.mktemp("bad-input-template")
    clock = ManualClock(T0)
    with Ledger.open(folder / "ledger.db", clock=clock, actor="tester") as led:
        facts = _prepare(led, clock)
        events = led.event_count()
    return folder / "ledger.db", facts, clock(), events


@pytest.fixture
def prepared(template: tuple[Path, Facts, datetime, int], tmp_path: Path) -> Iterator[tuple[Ledger, Facts]]:
    """A fresh prepared ledger for each test: its own file, ``Ledger`` and ``ManualClock``.

    One of everything a bad input can hit:

    * ``sales.live``: a live table;
    * ``sales.purged``: dropped, then purged by a real ``start_vacuum`` and its run's ``finish``
      (the vacuum set the ledger watermark at its drop time);
    * ``sales.blocked``: dropped behind a ``table:<id>`` watermark;
    * database ``old`` (``old.a``, ``old.b``): dropped behind a ``database:old`` watermark;
    * ``sales.restorable``: dropped after every watermark;
    * ``sales.reused``: dropped, then created again (a bound name with a dropped instance);
    * database ``archive`` (``archive.a``, ``archive.b``): dropped, restorable;
    * database ``crm``: dropped, then ``crm.a`` created again (its undrop would collide).

    The commands run once per module and each test gets a byte copy of the closed file
    (some 260 tests; a copy costs a fraction of the 20-odd durable appends), so what
    one row does, even a row that wrongly appends, never reaches another.
    """
    source, facts, now, events = template
    for file in source.parent.glob(source.name + "*"):  # the closed file, and a -wal if one is left
        shutil.copyfile(file, tmp_path / file.name)
    with Ledger.open(tmp_path / source.name, clock=ManualClock(now), actor="tester") as led:
        assert led.event_count() == events
        yield led, dataclasses.replace(facts, dir=str(tmp_path))


def _prepare(led: Ledger, clock: ManualClock) -> Facts:
    live = led.create_table("sales.live")

    purged = led.create_table("sales.purged")
    purged_drop = led.drop_table("sales.purged").dropped_at
    clock.advance(60)
    run = led.start_vacuum(retention="0s", override_floor=True)
    assert [p.table_id for p in run.plan.purges] == [purged.id]
    assert run.finish([Result(run.plan.purges[0], 0, 0)]) == 1
    purged_view = led.instance(purged.id)

    clock.advance(60)
    blocked = led.create_table("sales.blocked")
    blocked_drop = led.drop_table("sales.blocked").dropped_at
    old_a = led.create_table("old.a")
    led.create_table("old.b")
    old_drop = led.drop_database("old")[0].dropped_at
    clock.advance(60)
    led.advance_watermark(blocked_drop, scope=f"table:{blocked.id}")
    led.advance_watermark(old_drop, scope="database:old")

    clock.advance(60)
    restorable = led.create_table("sales.restorable")
    led.drop_table("sales.restorable")
    reused_old = led.create_table("sales.reused")
    led.drop_table("sales.reused")
    reused_new = led.create_table("sales.reused")
    led.create_table("archive.a")
    led.create_table("archive.b")
    led.drop_database("archive")
    led.create_table("crm.a")
    led.drop_database("crm")
    crm_new = led.create_table("crm.a")

    facts = Facts(
        dir="",  # set per test, to that test's tmp_path
        live=live.id,
        purged=purged.id, purged_dropped=_iso(purged_drop), purged_at=_iso(purged_view.purged_at),
        purge_mark=_iso(purged_view.effective_watermark), purge_run=run.run_id,
        blocked=blocked.id, blocked_dropped=_iso(blocked_drop), blocked_mark=_iso(blocked_drop),
        old_a=old_a.id, old_dropped=_iso(old_drop), old_mark=_iso(old_drop),
        restorable=restorable.id, reused_old=reused_old.id, reused_new=reused_new.id,
        crm_new=crm_new.id,
    )
    # The setup is what the rows assume: check it once here rather than fail obscurely there.
    assert {t.name: t.state for t in led.dropped_tables()} == {
        "sales.blocked": "blocked", "old.a": "blocked", "old.b": "blocked",
        "sales.restorable": "dropped", "sales.reused": "dropped", "archive.a": "dropped",
        "archive.b": "dropped", "crm.a": "dropped"}
    assert led.instance(purged.id).state == "purged"
    return facts


class NoSpark:
    """Stands in for a SparkSession or a DataFrame: a refusal must come before Spark is touched."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"Spark was touched ({name}) before the bad input was refused")


def _vacuum(led: Ledger, **options: Any) -> Any:
    from spark_ops import vacuum
    return vacuum(NoSpark(), led, **options)


def _write(led: Ledger, name: Any, **options: Any) -> Any:
    from spark_ops import write_table
    return write_table(NoSpark(), led, name, **options)


def _read(led: Ledger, name: Any) -> Any:
    from spark_ops import read_table
    return read_table(NoSpark(), led, name)


def _with_clock(led: Ledger, clock: Callable[[], datetime], name: str) -> Any:
    """Open the same file with another clock and run a command on it."""
    with Ledger.open(led.path, clock=clock, actor="tester") as other:
        return other.create_table(name)


# --- the catalogue ---------------------------------------------------------------------------

Text = Union[str, Callable[[Facts], str]]
Argv = Union[list, Callable[[Facts], list], None]


@dataclass(frozen=True)
class Row:
    id: str
    call: Callable[[Ledger, Facts], Any] | None
    argv: Argv
    error: type[LedgerError]
    match: Text
    cli_match: Text | None = None
    usage: bool = False
    """The CLI form is a usage error caught by click: exit 2, not 1."""
    rule: str | None = None
    py_xfail: str | None = None
    cli_xfail: str | None = None

    def regex(self, facts: Facts, side: str) -> str:
        text = self.cli_match if side == "cli" and self.cli_match is not None else self.match
        return text(facts) if callable(text) else text

    def args(self, facts: Facts) -> list[str]:
        return list(self.argv(facts) if callable(self.argv) else self.argv)


r = Row  # short, for the table below


IDENT = r"is not an identifier: use ASCII letters, digits and underscores, not starting with a digit"
NOT_ID = r"is not a table id \(ids are 16 hex digits, see show-dropped\)"
TWO_PARTS = r"must be 'database\.table' \(two identifiers and one dot\)"
NOT_DURATION = r"is not a duration; use a number with a unit, e.g\. 7d, 36h, 90m, 3600s"
FLOOR = r"is below the 1d floor: .*pass (override_floor=True|--override-floor) if that is what you mean"
"""Python names its argument, the command line its flag (``cli.in_cli_terms``; ``test_cli`` checks
the CLI never says ``override_floor=True``)."""
LIMIT = r"vacuum limit must be a whole number of at least 1, not "
NOT_ONE_OF = r"is not one of 'ledger', 'database:<name>', 'table:<id>'"
RAW = "raises a raw {} instead of a LedgerError"


def _blocked_message(name: str, id_: str, dropped: str, mark: str, scope: str) -> str:
    """R3: the table, its id, its drop time and the watermark, in ISO 8601 UTC; the prepared
    ledger's watermarks were advanced by hand, and the message says so (it blames no vacuum)."""
    return (rf"cannot undrop {re.escape(name)} \(id {id_}\): it was dropped at {re.escape(dropped)}, "
            rf"at or before the watermark {re.escape(mark)} \(scope {re.escape(scope)}\), advanced by hand; "
            r"behind a watermark its files may be deleted by any vacuum at any time")


def _purged_message(f: Facts) -> str:
    """R8: purged is final, and the message says when the files went."""
    return (rf"cannot undrop sales\.purged \(id {f.purged}\): it was dropped at {re.escape(f.purged_dropped)}"
            rf".*; its files were purged at {re.escape(f.purged_at)}, so it can never be undropped")


CATALOGUE: list[Row] = [
    # --- names: create_table / create ------------------------------------------------------
    r("create-65-char-table-part", lambda L, f: L.create_table("sales." + LONG), ["create", "sales." + LONG],
      InvalidName, rf"table part of 'sales\.{LONG}' is 65 characters long; the limit is 64"),
    r("create-65-char-database-part", lambda L, f: L.create_table(LONG + ".t"), ["create", LONG + ".t"],
      InvalidName, rf"database part of '{LONG}\.t' is 65 characters long; the limit is 64"),
    r("create-three-dots", lambda L, f: L.create_table("a.b.c.d"), ["create", "a.b.c.d"],
      InvalidName, rf"table name 'a\.b\.c\.d' {TWO_PARTS}"),
    r("create-no-dot", lambda L, f: L.create_table("orders"), ["create", "orders"],
      InvalidName, rf"table name 'orders' {TWO_PARTS}"),
    r("create-empty-string", lambda L, f: L.create_table(""), ["create", ""],
      InvalidName, rf"table name '' {TWO_PARTS}"),
    r("create-empty-table-part", lambda L, f: L.create_table("sales."), ["create", "sales."],
      InvalidName, r"table part of 'sales\.' is empty"),
    r("create-empty-database-part", lambda L, f: L.create_table(".orders"), ["create", ".orders"],
      InvalidName, r"database part of '\.orders' is empty"),
    r("create-space", lambda L, f: L.create_table("sales.my orders"), ["create", "sales.my orders"],
      InvalidName, rf"'my orders' {IDENT}"),
    r("create-unicode-letter", lambda L, f: L.create_table("sales.bestellungen_ä"),
      ["create", "sales.bestellungen_ä"], InvalidName, rf"'bestellungen_ä' {IDENT}"),
    r("create-unicode-digit", lambda L, f: L.create_table("sales.x\u0661"), ["create", "sales.x\u0661"],
      InvalidName, rf"'x\u0661' {IDENT}"),
    r("create-leading-digit", lambda L, f: L.create_table("sales.1st"), ["create", "sales.1st"],
      InvalidName, rf"'1st' {IDENT}"),
    r("create-hyphen", lambda L, f: L.create_table("sales-eu.orders"), ["create", "sales-eu.orders"],
      InvalidName, rf"'sales-eu' {IDENT}"),
    r("create-trailing-newline", lambda L, f: L.create_table("sales.orders\n"), ["create", "sales.orders\n"],
      InvalidName, rf"'orders\\n' {IDENT}"),  # shown as repr, so the CLI's error stays one line
    r("create-none", lambda L, f: L.create_table(None), None,
      InvalidName, r"a table name must be a string like 'sales\.orders', got NoneType"),
    r("create-int", lambda L, f: L.create_table(42), None,
      InvalidName, r"a table name must be a string like 'sales\.orders', got int"),
    r("create-bytes", lambda L, f: L.create_table(b"sales.orders"), None,
      InvalidName, r"a table name must be a string like 'sales\.orders', got bytes"),
    r("create-bound-name", lambda L, f: L.create_table("Sales.Live"), ["create", "Sales.Live"],
      TableExists, lambda f: rf"cannot create sales\.live: sales\.live is already a live table \(id {f.live}\)"),

    # --- drop_table / drop -------------------------------------------------------------------
    r("drop-65-char-name", lambda L, f: L.drop_table("sales." + LONG), ["drop", "sales." + LONG],
      InvalidName, rf"table part of 'sales\.{LONG}' is 65 characters long; the limit is 64"),
    r("drop-no-dot", lambda L, f: L.drop_table("live"), ["drop", "live"],
      InvalidName, rf"table name 'live' {TWO_PARTS}"),
    r("drop-int", lambda L, f: L.drop_table(7), None,
      InvalidName, r"a table name must be a string like 'sales\.orders', got int"),
    r("drop-unknown-table", lambda L, f: L.drop_table("sales.nope"), ["drop", "sales.nope"],
      TableNotFound, r"cannot drop sales\.nope: there is no live table by that name"),
    r("drop-unknown-database", lambda L, f: L.drop_table("nowhere.live"), ["drop", "nowhere.live"],
      TableNotFound, r"cannot drop nowhere\.live: there is no live table by that name"),
    r("drop-dropped-table", lambda L, f: L.drop_table("sales.restorable"), ["drop", "sales.restorable"],
      TableNotFound, r"cannot drop sales\.restorable: .*\(it is dropped; see show-dropped\)"),

    # --- undrop_table / undrop: names and ids -------------------------------------------------
    r("undrop-malformed-name", lambda L, f: L.undrop_table("sales orders"), ["undrop", "sales orders"],
      InvalidName, rf"table name 'sales orders' {TWO_PARTS}"),
    r("undrop-65-char-name", lambda L, f: L.undrop_table("sales." + LONG), ["undrop", "sales." + LONG],
      InvalidName, rf"table part of 'sales\.{LONG}' is 65 characters long; the limit is 64"),
    r("undrop-none", lambda L, f: L.undrop_table(None), None,
      InvalidName, r"a table name must be a string like 'sales\.orders', got NoneType"),
    r("undrop-malformed-new-name", lambda L, f: L.undrop_table("sales.restorable", new_name="no dots"),
      ["undrop", "sales.restorable", "--as", "no dots"], InvalidName, rf"table name 'no dots' {TWO_PARTS}"),
    r("undrop-65-char-new-name", lambda L, f: L.undrop_table("sales.restorable", new_name="sales." + LONG),
      ["undrop", "sales.restorable", "--as", "sales." + LONG], InvalidName,
      rf"table part of 'sales\.{LONG}' is 65 characters long"),
    r("undrop-int-new-name", lambda L, f: L.undrop_table("sales.restorable", new_name=5), None,
      InvalidName, r"a table name must be a string like 'sales\.orders', got int"),
    r("undrop-id-not-hex", lambda L, f: L.undrop_table("sales.restorable", table_id="g" * 16),
      ["undrop", "sales.restorable", "--id", "g" * 16], InvalidName, rf"'g{{16}}' {NOT_ID}"),
    r("undrop-id-too-short", lambda L, f: L.undrop_table("sales.restorable", table_id=UNKNOWN_ID[:15]),
      ["undrop", "sales.restorable", "--id", UNKNOWN_ID[:15]], InvalidName, rf"'{UNKNOWN_ID[:15]}' {NOT_ID}"),
    r("undrop-id-too-long", lambda L, f: L.undrop_table("sales.restorable", table_id=UNKNOWN_ID + "0"),
      ["undrop", "sales.restorable", "--id", UNKNOWN_ID + "0"], InvalidName, rf"'{UNKNOWN_ID}0' {NOT_ID}"),
    r("undrop-id-empty", lambda L, f: L.undrop_table("sales.restorable", table_id=""),
      ["undrop", "sales.restorable", "--id", ""], InvalidName, rf"'' {NOT_ID}"),
    r("undrop-id-int", lambda L, f: L.undrop_table("sales.restorable", table_id=12345), None,
      InvalidName, rf"12345 {NOT_ID}"),
    r("undrop-unknown-table", lambda L, f: L.undrop_table("sales.nope"), ["undrop", "sales.nope"],
      TableNotFound, r"cannot undrop sales\.nope: it has no dropped instance"),
    r("undrop-unknown-database", lambda L, f: L.undrop_table("nowhere.orders"), ["undrop", "nowhere.orders"],
      TableNotFound, r"cannot undrop nowhere\.orders: it has no dropped instance"),
    r("undrop-unknown-id", lambda L, f: L.undrop_table("sales.restorable", table_id=UNKNOWN_ID),
      ["undrop", "sales.restorable", "--id", UNKNOWN_ID], TableNotFound,
      rf"cannot undrop sales\.restorable: there is no table with id {UNKNOWN_ID}"),
    r("undrop-id-of-another-name", lambda L, f: L.undrop_table("sales.restorable", table_id=f.reused_old),
      lambda f: ["undrop", "sales.restorable", "--id", f.reused_old], TableNotFound,
      lambda f: rf"table id {f.reused_old} is sales\.reused, not sales\.restorable"),
    r("undrop-live-table-by-name", lambda L, f: L.undrop_table("sales.live"), ["undrop", "sales.live"],
      TableNotFound, r"cannot undrop sales\.live: it is live and has no dropped instance"),
    r("undrop-live-table-by-id", lambda L, f: L.undrop_table("sales.live", table_id=f.live),
      lambda f: ["undrop", "sales.live", "--id", f.live], TableExists,
      lambda f: rf"cannot undrop sales\.live \(id {f.live}\): it is live; there is nothing to undrop"),

    # R7: undrop onto a bound name
    r("undrop-as-a-bound-name", lambda L, f: L.undrop_table("sales.restorable", new_name="sales.live"),
      ["undrop", "sales.restorable", "--as", "sales.live"], TableExists,
      lambda f: rf"cannot undrop sales\.restorable \(id {f.restorable}\) as sales\.live: "
                rf"sales\.live is already a live table \(id {f.live}\)", rule="R7"),
    r("undrop-onto-its-rebound-name", lambda L, f: L.undrop_table("sales.reused"), ["undrop", "sales.reused"],
      TableExists, lambda f: rf"cannot undrop sales\.reused \(id {f.reused_old}\) as sales\.reused: "
                             rf"sales\.reused is already a live table \(id {f.reused_new}\)", rule="R7"),
    r("undrop-database-onto-a-rebound-name", lambda L, f: L.undrop_database("crm"), ["undrop-database", "crm"],
      TableExists, lambda f: rf"cannot undrop database crm: crm\.a is already a live table \(id {f.crm_new}\)",
      rule="R7"),

    # R3: undrop of an instance behind its effective watermark
    r("undrop-blocked-by-name", lambda L, f: L.undrop_table("sales.blocked"), ["undrop", "sales.blocked"],
      UndropBlocked, lambda f: _blocked_message("sales.blocked", f.blocked, f.blocked_dropped,
                                                f.blocked_mark, f"table:{f.blocked}"), rule="R3"),
    r("undrop-blocked-by-id", lambda L, f: L.undrop_table("sales.blocked", table_id=f.blocked),
      lambda f: ["undrop", "sales.blocked", "--id", f.blocked], UndropBlocked,
      lambda f: _blocked_message("sales.blocked", f.blocked, f.blocked_dropped,
                                 f.blocked_mark, f"table:{f.blocked}"), rule="R3"),
    r("undrop-blocked-as-a-free-name", lambda L, f: L.undrop_table("sales.blocked", new_name="sales.copy"),
      ["undrop", "sales.blocked", "--as", "sales.copy"], UndropBlocked,
      lambda f: _blocked_message("sales.blocked", f.blocked, f.blocked_dropped,
                                 f.blocked_mark, f"table:{f.blocked}"), rule="R3"),
    r("undrop-blocked-database", lambda L, f: L.undrop_database("old"), ["undrop-database", "old"],
      UndropBlocked, lambda f: _blocked_message("old.a", f.old_a, f.old_dropped, f.old_mark, "database:old"),
      rule="R3"),

    # R8: undrop of a purged instance
    r("undrop-purged-by-name", lambda L, f: L.undrop_table("sales.purged"), ["undrop", "sales.purged"],
      UndropBlocked, _purged_message, rule="R8"),
    r("undrop-purged-by-id", lambda L, f: L.undrop_table("sales.purged", table_id=f.purged),
      lambda f: ["undrop", "sales.purged", "--id", f.purged], UndropBlocked, _purged_message, rule="R8"),
    r("undrop-purged-as-a-free-name", lambda L, f: L.undrop_table("sales.purged", new_name="sales.copy"),
      ["undrop", "sales.purged", "--as", "sales.copy"], UndropBlocked, _purged_message, rule="R8"),

    # --- drop_database / undrop_database ---------------------------------------------------------
    r("drop-database-malformed", lambda L, f: L.drop_database("bad-name"), ["drop-database", "bad-name"],
      InvalidName, rf"database name 'bad-name' {IDENT}"),
    r("drop-database-dotted", lambda L, f: L.drop_database("sales.live"), ["drop-database", "sales.live"],
      InvalidName, rf"database name 'sales\.live' {IDENT}"),
    r("drop-database-empty", lambda L, f: L.drop_database(""), ["drop-database", ""],
      InvalidName, r"database name is empty"),
    r("drop-database-65-chars", lambda L, f: L.drop_database(LONG), ["drop-database", LONG],
      InvalidName, r"database name is 65 characters long; the limit is 64"),
    r("drop-database-leading-digit", lambda L, f: L.drop_database("9lives"), ["drop-database", "9lives"],
      InvalidName, rf"database name '9lives' {IDENT}"),
    r("drop-database-none", lambda L, f: L.drop_database(None), None,
      InvalidName, r"database name must be a string, got NoneType"),
    r("drop-database-unknown", lambda L, f: L.drop_database("nothing"), ["drop-database", "nothing"],
      DatabaseNotFound, r"cannot drop database nothing: it has no live tables"),
    r("drop-database-already-dropped", lambda L, f: L.drop_database("archive"), ["drop-database", "archive"],
      DatabaseNotFound, r"cannot drop database archive: it has no live tables"),
    r("undrop-database-malformed", lambda L, f: L.undrop_database("Bad-Name"), ["undrop-database", "Bad-Name"],
      InvalidName, rf"database name 'Bad-Name' {IDENT}"),
    r("undrop-database-unknown", lambda L, f: L.undrop_database("nothing"), ["undrop-database", "nothing"],
      DatabaseNotFound, r"cannot undrop database nothing: no database drop of it is left to undo"),
    r("undrop-database-never-dropped", lambda L, f: L.undrop_database("sales"), ["undrop-database", "sales"],
      DatabaseNotFound, r"cannot undrop database sales: no database drop of it is left to undo"),

    # --- queries: table / show, tables, dropped_tables / show-dropped, instance, history -------
    r("show-malformed", lambda L, f: L.table("orders"), ["show", "orders"],
      InvalidName, rf"table name 'orders' {TWO_PARTS}"),
    r("show-unknown", lambda L, f: L.table("sales.nope"), ["show", "sales.nope"],
      TableNotFound, r"there is no live table sales\.nope"),
    r("show-dropped-table", lambda L, f: L.table("sales.restorable"), ["show", "sales.restorable"],
      TableNotFound, r"there is no live table sales\.restorable \(it is dropped: see show-dropped"),
    r("tables-malformed-database", lambda L, f: L.tables(database="bad-name"), ["tables", "--database", "bad-name"],
      InvalidName, rf"database name 'bad-name' {IDENT}"),
    r("tables-empty-database", lambda L, f: L.tables(database=""), ["tables", "--database", ""],
      InvalidName, r"database name is empty"),
    r("dropped-tables-malformed-database", lambda L, f: L.dropped_tables(database="9lives"),
      ["show-dropped", "--database", "9lives"], InvalidName, rf"database name '9lives' {IDENT}"),
    r("dropped-tables-malformed-name", lambda L, f: L.dropped_tables(name="orders"),
      ["show-dropped", "--name", "orders"], InvalidName, rf"table name 'orders' {TWO_PARTS}"),
    r("dropped-tables-65-char-name", lambda L, f: L.dropped_tables(name="sales." + LONG),
      ["show-dropped", "--name", "sales." + LONG], InvalidName,
      rf"table part of 'sales\.{LONG}' is 65 characters long"),
    r("instance-malformed-id", lambda L, f: L.instance("xyz"), None, InvalidName, rf"'xyz' {NOT_ID}"),
    r("instance-unknown-id", lambda L, f: L.instance(UNKNOWN_ID), None,
      TableNotFound, rf"there is no table with id {UNKNOWN_ID}"),
    r("history-malformed-name", lambda L, f: L.history("orders"), ["history", "orders"],
      InvalidName, rf"table name 'orders' {TWO_PARTS}"),
    r("history-unknown-name", lambda L, f: L.history("sales.nope"), ["history", "sales.nope"],
      TableNotFound, r"no table sales\.nope has ever existed in this ledger"),
    r("history-malformed-id", lambda L, f: L.history(table_id="xyz"), ["history", "--id", "xyz"],
      InvalidName, rf"'xyz' {NOT_ID}"),
    r("history-unknown-id", lambda L, f: L.history(table_id=UNKNOWN_ID), ["history", "--id", UNKNOWN_ID],
      TableNotFound, rf"no table with id {UNKNOWN_ID} has ever existed in this ledger"),

    # --- scopes: watermark(scope) / watermark --scope ------------------------------------------
    r("watermark-scope-unknown-kind", lambda L, f: L.watermark("tenant:x"), ["watermark", "--scope", "tenant:x"],
      InvalidScope, rf"scope 'tenant:x' {NOT_ONE_OF}"),
    r("watermark-scope-empty-database", lambda L, f: L.watermark("database:"), ["watermark", "--scope", "database:"],
      InvalidScope, rf"scope 'database:' {NOT_ONE_OF}"),
    r("watermark-scope-malformed-database", lambda L, f: L.watermark("database:bad-name"),
      ["watermark", "--scope", "database:bad-name"], InvalidScope, rf"scope 'database:bad-name': .*{IDENT}"),
    r("watermark-scope-table-not-hex", lambda L, f: L.watermark("table:nothex"),
      ["watermark", "--scope", "table:nothex"], InvalidScope, rf"scope 'table:nothex': 'nothex' {NOT_ID}"),
    r("watermark-scope-not-text", lambda L, f: L.watermark(5), None,
      InvalidScope, r"a scope must be text like 'database:sales', got int"),
    r("watermark-scope-unknown-table", lambda L, f: L.watermark("table:" + UNKNOWN_ID),
      ["watermark", "--scope", "table:" + UNKNOWN_ID], TableNotFound,
      rf"there is no table with id {UNKNOWN_ID}"),
    r("watermark-scope-ledger-with-empty-key", lambda L, f: L.watermark("ledger:"),
      ["watermark", "--scope", "ledger:"], InvalidScope, rf"scope 'ledger:' {NOT_ONE_OF}"),

    # --- advance_watermark / watermark --advance ----------------------------------------------
    r("advance-naive-datetime", lambda L, f: L.advance_watermark(datetime(2025, 6, 1)),
      ["watermark", "--advance", "2025-06-01T00:00:00"], InvalidTime,
      r"naive datetime 2025-06-01T00:00:00 has no timezone; pass an aware one",
      cli_match=r"naive datetime 2025-06-01T00:00:00 has no timezone: add Z for UTC"),
    r("advance-past-now", lambda L, f: L.advance_watermark(L.now() + timedelta(seconds=1)),
      ["watermark", "--advance", "2999-01-01T00:00:00Z"], InvalidTime,
      r"cannot advance watermark ledger to \S+Z: that is past the ledger's current time \S+Z",
      cli_match=r"cannot advance watermark ledger to 2999-01-01T00:00:00\.000000Z: that is past the "
                r"ledger's current time"),
    r("advance-past-now-on-a-table-scope",
      lambda L, f: L.advance_watermark(L.now() + timedelta(days=1), scope=f"table:{f.restorable}"),
      lambda f: ["watermark", "--scope", f"table:{f.restorable}", "--advance", "2999-01-01T00:00:00+02:00"],
      InvalidTime, lambda f: rf"cannot advance watermark table:{f.restorable} to \S+Z: that is past"),
    r("advance-text-instead-of-datetime", lambda L, f: L.advance_watermark("June 1st"),
      ["watermark", "--advance", "June 1st"], InvalidTime,
      r"expected a timezone-aware datetime, got str 'June 1st'",
      cli_match=r"'June 1st' is not an ISO 8601 time like 2026-01-31T12:00:00Z"),
    r("advance-empty-time", lambda L, f: L.advance_watermark(""), ["watermark", "--advance", ""],
      InvalidTime, r"expected a timezone-aware datetime, got str ''",
      cli_match=r"'' is not an ISO 8601 time"),
    r("advance-impossible-date", None, ["watermark", "--advance", "2025-13-01T00:00:00Z"],
      InvalidTime, r"'2025-13-01T00:00:00Z' is not an ISO 8601 time"),
    r("advance-none", lambda L, f: L.advance_watermark(None), None,
      InvalidTime, r"expected a timezone-aware datetime, got NoneType None"),
    r("advance-scope-unknown-kind", lambda L, f: L.advance_watermark(L.now(), scope="tenant:x"),
      ["watermark", "--scope", "tenant:x", "--advance", "now"], InvalidScope, rf"scope 'tenant:x' {NOT_ONE_OF}"),
    r("advance-scope-empty-database", lambda L, f: L.advance_watermark(L.now(), scope="database:"),
      ["watermark", "--scope", "database:", "--advance", "now"], InvalidScope, rf"scope 'database:' {NOT_ONE_OF}"),
    r("advance-scope-table-not-hex", lambda L, f: L.advance_watermark(L.now(), scope="table:nothex"),
      ["watermark", "--scope", "table:nothex", "--advance", "now"], InvalidScope,
      rf"scope 'table:nothex': 'nothex' {NOT_ID}"),
    r("advance-scope-unknown-table", lambda L, f: L.advance_watermark(L.now(), scope="table:" + UNKNOWN_ID),
      ["watermark", "--scope", "table:" + UNKNOWN_ID, "--advance", "now"], TableNotFound,
      rf"scope table:{UNKNOWN_ID}: there is no table with id {UNKNOWN_ID}"),
    r("advance-hand-built-scope-unknown-kind", lambda L, f: L.advance_watermark(L.now(), scope=Scope("tenant", "x")),
      None, InvalidScope, r"tenant"),
    r("advance-hand-built-scope-table-not-hex",
      lambda L, f: L.advance_watermark(L.now(), scope=Scope("table", "nothex")), None,
      InvalidScope, r"'nothex' is not a table id"),

    # --- clocks -------------------------------------------------------------------------------
    r("clock-returns-naive-time",
      lambda L, f: _with_clock(L, lambda: datetime(2026, 6, 1), "sales.fresh"), None, InvalidTime,
      r"the ledger's clock returned a bad time: naive datetime 2026-06-01T00:00:00 has no timezone"),
    r("manual-clock-naive-start", lambda L, f: ManualClock(datetime(2026, 6, 1)), None,
      InvalidTime, r"naive datetime 2026-06-01T00:00:00 has no timezone"),

    # --- set_retention / retention ---------------------------------------------------------------
    r("retention-negative-timedelta", lambda L, f: L.set_retention("ledger", timedelta(hours=-1)), None,
      InvalidRetention, r"retention .*-1.* is negative; it must be zero or more"),
    r("retention-negative-seconds-with-override",
      lambda L, f: L.set_retention("ledger", -3600, override_floor=True), None,
      InvalidRetention, r"retention -3600 is negative; it must be zero or more"),
    r("retention-negative-text-with-override",
      lambda L, f: L.set_retention("ledger", "-1h", override_floor=True),
      ["retention", "--override-floor", "--", "-1h"], InvalidRetention, r"'-1h' is negative"),
    # Found by a user: "--retention 7" silently meant 7 seconds; "retention -1d" was taken for an option.
    r("retention-bare-number", lambda L, f: L.set_retention("ledger", "7"), ["retention", "7"],
      InvalidRetention, r"'7' has no unit; write e\.g\. 7d, 7h, 7m or 7s"),
    r("vacuum-retention-bare-number", lambda L, f: L.plan_vacuum(retention="7"),
      ["vacuum", "--dry-run", "--retention", "7"], InvalidRetention, r"'7' has no unit; write e\.g\. 7d"),
    r("retention-negative-without-dashes", lambda L, f: L.set_retention("ledger", "-1d", override_floor=True),
      ["retention", "-1d", "--override-floor"], InvalidRetention, r"'-1d' is negative"),
    r("retention-under-floor", lambda L, f: L.set_retention("ledger", "1h"), ["retention", "1h"],
      InvalidRetention, rf"retention 1h for ledger {FLOOR}"),
    r("retention-just-under-floor-on-a-database", lambda L, f: L.set_retention("database:sales", "23h"),
      ["retention", "23h", "--scope", "database:sales"], InvalidRetention,
      rf"retention 23h for database:sales {FLOOR}"),
    r("retention-zero", lambda L, f: L.set_retention(f"table:{f.restorable}", 0),
      lambda f: ["retention", "0", "--scope", f"table:{f.restorable}"], InvalidRetention,
      lambda f: rf"retention 0s for table:{f.restorable} {FLOOR}"),
    r("retention-words", lambda L, f: L.set_retention("ledger", "seven days"), ["retention", "seven days"],
      InvalidRetention, rf"'seven days' {NOT_DURATION}"),
    r("retention-unknown-unit", lambda L, f: L.set_retention("ledger", "7y"), ["retention", "7y"],
      InvalidRetention, rf"'7y' {NOT_DURATION}"),
    r("retention-comma-decimal", lambda L, f: L.set_retention("ledger", "1,5d"), ["retention", "1,5d"],
      InvalidRetention, rf"'1,5d' {NOT_DURATION}"),
    r("retention-empty", lambda L, f: L.set_retention("ledger", ""), ["retention", ""],
      InvalidRetention, rf"'' {NOT_DURATION}"),
    r("retention-bool", lambda L, f: L.set_retention("ledger", True), None,
      InvalidRetention, r"retention must be a duration, got True"),
    r("retention-list", lambda L, f: L.set_retention("ledger", [7]), None,
      InvalidRetention, r"retention must be a duration such as '7d', got list"),
    r("retention-nan", lambda L, f: L.set_retention("ledger", float("nan")), ["retention", "nan"],
      InvalidRetention, r"nan", cli_match=rf"'nan' {NOT_DURATION}"),
    r("retention-infinite", lambda L, f: L.set_retention("ledger", float("inf")), None,
      InvalidRetention, r"inf"),
    r("retention-too-large", lambda L, f: L.set_retention("ledger", "99999999999d"),
      ["retention", "99999999999d"], InvalidRetention, r"99999999999d"),
    r("retention-override-floor-not-a-bool",
      lambda L, f: L.set_retention("ledger", "1h", override_floor="no"), None,
      InvalidArgument, r"override_floor"),
    r("retention-scope-unknown-kind", lambda L, f: L.set_retention("tenant:x", "7d"),
      ["retention", "7d", "--scope", "tenant:x"], InvalidScope, rf"scope 'tenant:x' {NOT_ONE_OF}"),
    r("retention-scope-empty-database", lambda L, f: L.set_retention("database:", "7d"),
      ["retention", "7d", "--scope", "database:"], InvalidScope, rf"scope 'database:' {NOT_ONE_OF}"),
    r("retention-scope-table-not-hex", lambda L, f: L.set_retention("table:nothex", "7d"),
      ["retention", "7d", "--scope", "table:nothex"], InvalidScope, rf"scope 'table:nothex': 'nothex' {NOT_ID}"),
    r("retention-scope-unknown-table", lambda L, f: L.set_retention("table:" + UNKNOWN_ID, "7d"),
      ["retention", "7d", "--scope", "table:" + UNKNOWN_ID], TableNotFound,
      rf"scope table:{UNKNOWN_ID}: there is no table with id {UNKNOWN_ID}"),
    r("retention-clear-on-unknown-table", lambda L, f: L.set_retention("table:" + UNKNOWN_ID, None),
      ["retention", "none", "--scope", "table:" + UNKNOWN_ID], TableNotFound,
      rf"there is no table with id {UNKNOWN_ID}"),
    r("retention-query-unknown-table", lambda L, f: L.retention("table:" + UNKNOWN_ID),
      ["retention", "--scope", "table:" + UNKNOWN_ID], TableNotFound, rf"there is no table with id {UNKNOWN_ID}"),
    r("retention-hand-built-scope-malformed-database",
      lambda L, f: L.set_retention(Scope("database", "Bad-Name"), "7d"), None, InvalidScope, r"Bad-Name"),

    # --- vacuum: plan_vacuum / start_vacuum / spark_ops.vacuum / vacuum ---------------------------
    r("vacuum-limit-zero", lambda L, f: L.start_vacuum(limit=0), ["vacuum", "--limit", "0"],
      InvalidArgument, rf"{LIMIT}0", usage=True,
      cli_match=r"Invalid value for '--limit': 0 is not in the range x>=1"),
    r("vacuum-limit-negative", lambda L, f: L.start_vacuum(limit=-1), ["vacuum", "--limit", "-1"],
      InvalidArgument, rf"{LIMIT}-1", usage=True,
      cli_match=r"Invalid value for '--limit': -1 is not in the range x>=1"),
    r("vacuum-limit-text", lambda L, f: L.start_vacuum(limit="x"), ["vacuum", "--limit", "x"],
      InvalidArgument, rf"{LIMIT}'x'", usage=True,
      cli_match=r"Invalid value for '--limit': 'x' is not a valid integer"),
    r("vacuum-limit-fraction", lambda L, f: L.plan_vacuum(limit=1.5), ["vacuum", "--dry-run", "--limit", "1.5"],
      InvalidArgument, rf"{LIMIT}1\.5", usage=True,
      cli_match=r"Invalid value for '--limit': '1\.5' is not a valid integer"),
    r("vacuum-limit-bool", lambda L, f: L.plan_vacuum(limit=True), None, InvalidArgument, rf"{LIMIT}True"),
    r("spark-vacuum-limit-zero", lambda L, f: _vacuum(L, limit=0), None, InvalidArgument, rf"{LIMIT}0"),
    r("spark-vacuum-dry-run-limit-text", lambda L, f: _vacuum(L, dry_run=True, limit="x"), None,
      InvalidArgument, rf"{LIMIT}'x'"),
    r("vacuum-retention-under-floor", lambda L, f: _vacuum(L, retention="1h"), ["vacuum", "--retention", "1h"],
      InvalidRetention, rf"retention 1h for this vacuum {FLOOR}"),
    r("vacuum-dry-run-retention-under-floor", lambda L, f: L.plan_vacuum(retention="23h"),
      ["vacuum", "--dry-run", "--retention", "23h"], InvalidRetention, rf"retention 23h for this vacuum {FLOOR}"),
    r("vacuum-retention-zero-without-override", lambda L, f: L.start_vacuum(retention=0),
      ["vacuum", "--retention", "0s"], InvalidRetention, rf"retention 0s for this vacuum {FLOOR}"),
    r("vacuum-retention-negative-with-override",
      lambda L, f: _vacuum(L, retention="-1h", override_floor=True),
      ["vacuum", "--override-floor", "--retention", "-1h"], InvalidRetention, r"'-1h' is negative"),
    r("vacuum-retention-negative-timedelta-with-override",
      lambda L, f: L.start_vacuum(retention=timedelta(hours=-2), override_floor=True), None,
      InvalidRetention, r"is negative; it must be zero or more"),
    r("vacuum-retention-malformed", lambda L, f: L.plan_vacuum(retention="a week"),
      ["vacuum", "--retention", "a week"], InvalidRetention, rf"'a week' {NOT_DURATION}"),
    r("vacuum-retention-too-large", lambda L, f: L.start_vacuum(retention="99999999999d"),
      ["vacuum", "--retention", "99999999999d"], InvalidRetention, r"99999999999d"),
    r("vacuum-retention-nan", lambda L, f: _vacuum(L, retention=float("nan")), None,
      InvalidRetention, r"nan"),
    r("vacuum-database-malformed", lambda L, f: _vacuum(L, database="bad-name"),
      ["vacuum", "--database", "bad-name"], InvalidName, rf"database name 'bad-name' {IDENT}"),
    r("vacuum-database-empty", lambda L, f: L.plan_vacuum(database=""), ["vacuum", "--dry-run", "--database", ""],
      InvalidName, r"database name is empty"),
    r("vacuum-run-id-with-a-space", lambda L, f: L.start_vacuum(run_id="nightly run"), None,
      InvalidName, r"'nightly run' is not a vacuum run id: use 1 to 100 ASCII letters, digits"),
    r("vacuum-run-id-empty", lambda L, f: _vacuum(L, run_id=""), None, InvalidName, r"'' is not a vacuum run id"),
    r("vacuum-run-id-not-text", lambda L, f: _vacuum(L, run_id=7), None, InvalidName, r"7 is not a vacuum run id"),
    r("vacuum-run-id-too-long", lambda L, f: L.start_vacuum(run_id="r" * 101), None,
      InvalidName, r"is not a vacuum run id: use 1 to 100"),
    # The id of a run already on record (here: finished) is never given to a second one.
    r("vacuum-run-id-taken", lambda L, f: L.start_vacuum(run_id=f.purge_run), None, InvalidArgument,
      lambda f: rf"vacuum run id '{f.purge_run}' is taken: a run of that id is already on record; "
                r"choose another, or leave run_id out for a fresh one"),
    r("finish-vacuum-unknown-run", lambda L, f: VacuumRun.of(L, "no-such-run").finish([]), None,
      InvalidArgument, r"vacuum run no-such-run is unknown or already finished"),

    # --- record_purge (public on Ledger, though a vacuum's run records its own purges) -----------
    r("record-purge-malformed-id", lambda L, f: L.record_purge("xyz", run_id="r", files=0, bytes=0), None,
      InvalidName, rf"'xyz' {NOT_ID}"),
    r("record-purge-unknown-id", lambda L, f: L.record_purge(UNKNOWN_ID, run_id="r", files=0, bytes=0), None,
      TableNotFound, UNKNOWN_ID),
    r("record-purge-negative-files", lambda L, f: L.record_purge(f.blocked, run_id="r", files=-5, bytes=0), None,
      InvalidArgument, r"-5"),
    r("record-purge-bytes-not-a-number",
      lambda L, f: L.record_purge(f.blocked, run_id="r", files=0, bytes="lots"), None,
      InvalidArgument, r"lots"),

    # --- spark_ops tables -----------------------------------------------------------------------
    r("write-table-bad-mode", lambda L, f: _write(L, "sales.live", mode="upsert"), None,
      InvalidArgument, r"write mode must be one of append, overwrite, not 'upsert'"),
    r("write-table-malformed-name", lambda L, f: _write(L, "sales.my orders"), None,
      InvalidName, rf"'my orders' {IDENT}"),
    r("write-table-dropped-without-create", lambda L, f: _write(L, "sales.restorable", create=False), None,
      TableNotFound, r"there is no live table sales\.restorable"),
    r("read-table-unknown", lambda L, f: _read(L, "sales.nope"), None,
      TableNotFound, r"there is no live table sales\.nope"),
    r("read-table-malformed-name", lambda L, f: _read(L, "sales"), None,
      InvalidName, rf"table name 'sales' {TWO_PARTS}"),
    r("write-table-merge-schema-not-a-flag", lambda L, f: _write(L, "sales.live", merge_schema="yes"), None,
      InvalidArgument, r"merge_schema must be True or False, got 'yes'"),

    # --- an auditor's outputs and inputs (issues 25, 26) ----------------------------------------
    r("export-onto-the-ledger", lambda L, f: L.export(L.path, overwrite=True),
      lambda f: ["export", os.path.join(f.dir, "ledger.db"), "--overwrite"], InvalidArgument,
      r"refusing to write the export to .*ledger\.db: that is .*, which it would destroy", rule="R10"),
    r("export-onto-the-ledgers-wal", lambda L, f: L.export(L.path + "-wal"),
      lambda f: ["export", os.path.join(f.dir, "ledger.db-wal")], InvalidArgument, r"which it would destroy",
      rule="R10"),
    r("checkpoint-out-onto-the-ledger", None,
      lambda f: ["checkpoint", "--out", os.path.join(f.dir, "ledger.db"), "--overwrite"], InvalidArgument,
      r"refusing to write the checkpoint to .*ledger\.db", rule="R10"),
    r("export-to-none", lambda L, f: L.export(None), None, InvalidArgument,
      r"the export path must be text or a pathlib\.Path, got NoneType None"),
    r("export-to-a-number", lambda L, f: L.export(42), None, InvalidArgument, r"got int 42"),
    r("export-nul-in-path", lambda L, f: L.export(os.path.join(f.dir, "a\x00b.jsonl")), None, InvalidArgument,
      r"contains a NUL character"),
    r("checkpoint-key-a-number", lambda L, f: L.checkpoint(key=42), None, InvalidArgument,
      r"a private key is an Ed25519 key object, a PEM file's path or its bytes, got int 42"),
    r("actor-with-a-newline", lambda L, f: Ledger.open(L.path, actor="alice\nmallory"),
      lambda f: ["--actor", "alice\nmallory", "tables"], InvalidArgument, r"holds a control character"),
    r("vacuum-only-uncommitted-and-no-uncommitted", None, ["vacuum", "--only-uncommitted", "--no-uncommitted"],
      InvalidArgument, r"--only-uncommitted sweeps only uncommitted data; it cannot be combined with --no-uncommitted",
      usage=True),

    # --- versions and leases (found by a new user: a wrong reason, or the wrong error type) -----
    r("restore-without-version-or-time", lambda L, f: L.restore_table("sales.live"), None,
      InvalidArgument, r"restoring sales\.live needs version= \(a number\) or as_of= \(a time\)"),
    r("begin-write-negative-lease", lambda L, f: L.begin_write("sales.live", lease="-1h"), None,
      InvalidArgument, r"a write's lease '-1h' is negative"),
    r("start-vacuum-negative-lease", lambda L, f: L.start_vacuum(lease="-5m"), None,
      InvalidArgument, r"a vacuum's lease '-5m' is negative"),
    r("versions-of-nothing", lambda L, f: L.versions(), ["versions"],
      InvalidArgument, r"versions needs a live table's name, or table_id= for any instance"),
    r("versions-of-a-dropped-name", lambda L, f: L.versions("sales.restorable"), None,
      TableNotFound, r"there is no live table sales\.restorable \(it is dropped: .*versions\(table_id=\.\.\.\)\)"),
    r("versions-of-an-unknown-id", lambda L, f: L.versions(table_id=UNKNOWN_ID), ["versions", "--id", UNKNOWN_ID],
      TableNotFound, rf"there is no table with id {UNKNOWN_ID}"),

    # --- opening a ledger: Ledger.open / --ledger (a second --ledger wins over the fixture's) ---
    r("open-a-directory", lambda L, f: Ledger.open(f.dir), lambda f: ["--ledger", f.dir, "tables"],
      LedgerUnavailable, lambda f: rf"{re.escape(f.dir)}: cannot read the ledger file: .*Is a directory"),
    r("open-in-a-missing-folder", lambda L, f: Ledger.open(os.path.join(f.dir, "no", "l.db")),
      lambda f: ["--ledger", os.path.join(f.dir, "no", "l.db"), "create", "a.b"], LedgerUnavailable,
      lambda f: rf"its folder {re.escape(os.path.join(f.dir, 'no'))} does not exist"),
    r("open-bad-synchronous", lambda L, f: Ledger.open(os.path.join(f.dir, "s.db"), synchronous="SOMETIMES"),
      None, InvalidArgument, r"synchronous must be one of OFF, NORMAL, FULL, EXTRA, not 'SOMETIMES'"),
    # Found by a new user: each of these escaped as a raw TypeError/ValueError/AttributeError, or,
    # for a clock that cannot be called, was accepted and broke every later command.
    r("open-none", lambda L, f: Ledger.open(None), None, InvalidArgument,
      r"the ledger path must be text or a pathlib\.Path, such as 'tenant\.db', got NoneType None"),
    r("open-a-number", lambda L, f: Ledger.open(123), None, InvalidArgument,
      r"the ledger path must be text or a pathlib\.Path, such as 'tenant\.db', got int 123"),
    r("open-bytes", lambda L, f: Ledger.open(b"x.db"), None, InvalidArgument,
      r"the ledger path must be text or a pathlib\.Path, such as 'tenant\.db', got bytes b'x\.db'"),
    r("open-nul-in-path", lambda L, f: Ledger.open(os.path.join(f.dir, "a\x00b.db")), None, InvalidArgument,
      r"contains a NUL character, which no file name can hold"),
    r("open-empty-path", lambda L, f: Ledger.open(""), lambda f: ["--ledger", "", "tables"], InvalidArgument,
      r"the ledger path is empty"),
    r("open-warehouse-a-number", lambda L, f: Ledger.open(os.path.join(f.dir, "w.db"), warehouse=123), None,
      InvalidArgument, r"the warehouse must be a folder path or a URI such as 's3://bucket/prefix', got int 123"),
    r("open-clock-not-callable", lambda L, f: Ledger.open(os.path.join(f.dir, "c.db"), clock="2026-01-01"), None,
      InvalidArgument, r"clock must be a function returning an aware UTC datetime, got str '2026-01-01'"),
    r("open-actor-empty", lambda L, f: Ledger.open(os.path.join(f.dir, "a.db"), actor="  "),
      lambda f: ["--actor", "  ", "tables"], InvalidArgument, r"actor must be non-empty text"),
    r("open-missing-without-create", lambda L, f: Ledger.open(os.path.join(f.dir, "typo.db"), create=False),
      lambda f: ["--ledger", os.path.join(f.dir, "typo.db"), "verify"], LedgerNotFound,
      lambda f: rf"there is no ledger at {re.escape(os.path.join(f.dir, 'typo.db'))}: check the path"),
    r("open-another-warehouse", lambda L, f: Ledger.open(L.path, warehouse=os.path.join(f.dir, "elsewhere")),
      lambda f: ["--warehouse", os.path.join(f.dir, "elsewhere"), "create", "sales.new"], WarehouseMismatch,
      lambda f: rf"keeps its tables under .*, not {re.escape(os.path.join(f.dir, 'elsewhere'))}: tables written "
                r"under another root would be invisible to every vacuum", rule="R10"),
]


# --- the checks --------------------------------------------------------------------------------

def _python_refuses(row: Row, led: Ledger, facts: Facts) -> None:
    before, state = led.event_count(), led.state
    try:
        row.call(led, facts)
    except Exception as exc:  # noqa: BLE001 - the point is to see exactly what comes out
        refused = exc
    else:
        pytest.fail(f"{row.id}: accepted; expected {row.error.__name__}")
    assert type(refused) is row.error, f"{type(refused).__module__}.{type(refused).__name__}: {refused}"
    assert isinstance(refused, ledger.LedgerError)
    assert re.search(row.regex(facts, "python"), str(refused)), str(refused)
    assert led.event_count() == before
    assert led.state == state


def _cli_refuses(row: Row, led: Ledger, facts: Facts) -> None:
    before, state = led.event_count(), led.state
    result = CliRunner().invoke(cli, ["--ledger", led.path, "--actor", "tester", *row.args(facts)])
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not a crash
    assert result.stdout == ""
    if row.usage:
        assert result.exit_code == 2, (result.stdout, result.stderr)
        assert re.search(r"^Error: " + row.regex(facts, "cli"), result.stderr, re.M), result.stderr
    else:
        assert result.exit_code == 1, (result.stdout, result.stderr)
        assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, result.stderr
        line = result.stderr.rstrip("\n")
        assert line.startswith(f"error: {row.error.__name__}: "), line
        assert re.search(row.regex(facts, "cli"), line), line
    assert led.event_count() == before
    assert led.state == state


def _cases(rule: str | None, rows: list[Row] = CATALOGUE) -> list:
    """(row, side) params for the rows of one rule (None: rows without a rule), with xfail marks."""
    params = []
    for row in rows:
        if row.rule != rule:
            continue
        for side, present, reason in (("python", row.call is not None, row.py_xfail),
                                      ("cli", row.argv is not None, row.cli_xfail)):
            if present:
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                params.append(pytest.param(row, side, id=f"{row.id}-{side}", marks=marks))
    return params


@pytest.fixture
def no_spark_for_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's vacuum gets the stand-in instead of a real local SparkSession."""
    import spark_ops
    monkeypatch.setattr(spark_ops, "local_session", lambda *args, **kwargs: NoSpark())


def _check(row: Row, side: str, prepared: tuple[Ledger, Facts]) -> None:
    led, facts = prepared
    (_python_refuses if side == "python" else _cli_refuses)(row, led, facts)


# --- the tests ---------------------------------------------------------------------------------

@pytest.mark.usefixtures("no_spark_for_the_cli")
@pytest.mark.parametrize("row, side", _cases(None))
def test_bad_input_is_refused_with_a_typed_error_and_changes_nothing(row: Row, side: str, prepared) -> None:
    _check(row, side, prepared)


@pytest.mark.parametrize("row, side", _cases("R3"))
def test_r3_undrop_behind_a_watermark_is_refused_naming_table_id_drop_time_and_watermark(
        row: Row, side: str, prepared) -> None:
    _check(row, side, prepared)


@pytest.mark.parametrize("row, side", _cases("R7"))
def test_r7_undrop_onto_a_bound_name_is_refused_with_table_exists(row: Row, side: str, prepared) -> None:
    _check(row, side, prepared)


@pytest.mark.parametrize("row, side", _cases("R8"))
def test_r8_undrop_of_a_purged_instance_is_refused_for_good(row: Row, side: str, prepared) -> None:
    _check(row, side, prepared)


# --- what a vacuum's driver tells its run (issue 45) --------------------------------------------

ROOT64 = "0" * 64
"""A well-formed Merkle root (64 hex digits), so that a part's other fields are what is wrong."""


def _part(first: str = "a", last: str = "b", count: int = 1, size: int = 1, root: str = ROOT64) -> Part:
    return Part(first, last, count, size, root, "d" * 64, "scratch/part")


def _sealed(objects: tuple[tuple[str, int], ...] = (("a", 1), ("b", 2)), **wrong: Any) -> tuple[Part, bytes]:
    """A part as a task seals it (``objects`` in the order given), its summary then given ``wrong``
    fields: a summary that contradicts its leaves, which would make ``verify`` call the receipt
    edited for ever after had it been recorded."""
    entries = [leaf_input(key, size) for key, size in objects]
    data = zlib.compress(b"".join(entries))
    part = Part(objects[0][0], objects[-1][0], len(objects), sum(size for _, size in objects), tree_root(entries).hex(),
                hashlib.sha256(data).hexdigest(), "scratch/part")
    return dataclasses.replace(part, **wrong), data


RUN_ROWS: list[tuple[str, Callable[[Ledger, VacuumRun, Facts], Any], type[LedgerError], Text]] = [
    # (id, the call given the ledger and a run in progress, the error, the message)
    ("finish-with-tuples", lambda L, run, f: run.finish([(f.restorable, 0, 0)]), InvalidArgument,
     r"a run's results are vacuum_work\.Result values, one for each item \(or part\) it carried out"),
    ("finish-negative-files", lambda L, run, f: run.finish([Result(run.plan.purges[0], files=-5)]), InvalidArgument,
     r"a purge's files must be a whole number of 0 or more, got -5"),
    ("finish-bytes-not-a-number", lambda L, run, f: run.finish([Result(run.plan.purges[0], bytes="lots")]),
     InvalidArgument, r"a purge's bytes must be a whole number of 0 or more, got 'lots'"),
    ("finish-a-listing", lambda L, run, f: run.finish([Result(ForeignScan(f.live, "sales.live", f.live), 1, 1)]),
     InvalidArgument, r"a foreign item lists files, it deletes none: there is nothing of it to record"),
    ("finish-a-purge-of-a-live-table",
     lambda L, run, f: run.finish([Result(Purge(f.live, "sales.live", f.live, 0, 0))]), InvalidArgument,
     lambda f: rf"^vacuum \S+ did not plan a purge of table id {f.live}: a run records only what it set out to do"),
    ("record-deleted-old-tuple", lambda L, run, f: run.record_deleted([("a", "b", 1, 1, ROOT64, b"x")]),
     InvalidArgument, r"is a \(vacuum_work\.Part, leaves\) pair, not tuple"),
    ("record-deleted-no-leaves", lambda L, run, f: run.record_deleted([(_part(), b"")]), InvalidArgument,
     r"a receipt part of run \S+ has no leaves"),
    ("record-deleted-no-objects", lambda L, run, f: run.record_deleted([(_part(count=0), b"x")]), InvalidArgument,
     r"counts 0 objects of 1 bytes: whole numbers, at least one object, are needed"),
    ("record-deleted-not-a-key-range", lambda L, run, f: run.record_deleted([(_part("b", "a"), b"x")]),
     InvalidArgument, r"runs from 'b' to 'a', which is not a key range"),
    ("record-deleted-no-root", lambda L, run, f: run.record_deleted([(_part(root="xyz"), b"x")]), InvalidArgument,
     r"has no Merkle root \(64 hex digits\)"),
    ("record-deleted-a-count-its-leaves-do-not-hold",
     lambda L, run, f: run.record_deleted([_sealed(count=3, bytes=99, root=ROOT64)]), InvalidArgument,
     r"a receipt part of run \S+ does not hold as many objects, or bytes, as its summary says: not recorded"),
    ("record-deleted-bytes-its-leaves-do-not-hold", lambda L, run, f: run.record_deleted([_sealed(bytes=4)]),
     InvalidArgument, r"a receipt part of run \S+ does not hold as many objects, or bytes, as its summary says"),
    ("record-deleted-a-key-range-its-leaves-do-not-run", lambda L, run, f: run.record_deleted([_sealed(last="c")]),
     InvalidArgument, r"a receipt part of run \S+ does not run from its first key to its last"),
    ("record-deleted-a-root-its-leaves-do-not-hash-to", lambda L, run, f: run.record_deleted([_sealed(root=ROOT64)]),
     InvalidArgument, r"a receipt part of run \S+ does not hash to the Merkle root its summary carries"),
    ("record-deleted-leaves-not-sorted",
     lambda L, run, f: run.record_deleted([_sealed((("b", 2), ("a", 1)), first="a", last="b")]), InvalidArgument,
     r"a receipt part of run \S+ is not sorted by key"),
    ("record-deleted-a-digest-its-leaves-do-not-hash-to",
     lambda L, run, f: run.record_deleted([_sealed(digest="d" * 64)]), InvalidArgument,
     r"a receipt part of run \S+ does not hash to its digest"),
    ("record-deleted-leaves-not-compressed",
     lambda L, run, f: run.record_deleted([(_sealed(digest=hashlib.sha256(b"x").hexdigest())[0], b"x")]),
     InvalidArgument, r"a receipt part of run \S+ cannot be read \(.*\): not recorded"),
    ("renew-a-finished-run", lambda L, run, f: VacuumRun.of(L, f.purge_run).renew(), InvalidArgument,
     lambda f: rf"vacuum run {f.purge_run} is unknown or already finished"),
    ("handle-on-a-number", lambda L, run, f: VacuumRun.of(L, 7), InvalidName, r"^7 is not a vacuum run id"),
    ("handle-on-a-run-id-with-a-space", lambda L, run, f: VacuumRun.of(L, "nightly run"), InvalidName,
     r"^'nightly run' is not a vacuum run id: use 1 to 100 ASCII letters, digits"),
    ("finish-a-result-of-text", lambda L, run, f: run.finish([Result("purge:x")]), InvalidArgument,
     r"a result's item is an item of the run's plan \(vacuum_work\.Purge, Expiry, Trim, Sweep or StragglerScan\), or "
     r"None for a task's closing result, not str 'purge:x'"),
    ("finish-a-result-of-a-number", lambda L, run, f: run.finish([Result(42)]), InvalidArgument,
     r"a result's item is an item of the run's plan .*, not int 42"),
    ("finish-none", lambda L, run, f: run.finish(None), InvalidArgument,
     r"a run's results are vacuum_work\.Result values, one for each item \(or part\) it carried out, not NoneType"),
    ("finish-the-same-purge-twice", lambda L, run, f: run.finish([Result(run.plan.purges[0], 1, 1)] * 2),
     InvalidArgument, r"two results name the purge of table id [0-9a-f]{16}: one result an item \(or a part\)"),
    ("record-deleted-none", lambda L, run, f: run.record_deleted(None), InvalidArgument,
     r"a run's receipt parts are \(vacuum_work\.Part, leaves\) pairs, not NoneType"),
]


@pytest.mark.parametrize("call, error, match", [row[1:] for row in RUN_ROWS], ids=[row[0] for row in RUN_ROWS])
def test_a_runs_calls_refuse_bad_input_typed_and_change_nothing(call, error, match, prepared) -> None:
    """What a driver (``spark_ops.vacuum``, or a vacuum of one's own) tells a run in progress is
    checked before anything is recorded: its results and receipt parts are ``vacuum_work`` records
    with counts that make sense, about items a vacuum may record. A refusal says what was wrong,
    and the run, its receipt and the ledger are as they were."""
    led, facts = prepared
    run = led.start_vacuum(retention="0s", override_floor=True)
    assert run.plan.run_id == run.run_id and run.plan.purges  # on record, not finished
    before, state = led.event_count(), led.state
    with pytest.raises(LedgerError) as refused:
        call(led, run, facts)
    assert type(refused.value) is error, f"{type(refused.value).__name__}: {refused.value}"
    assert re.search(match(facts) if callable(match) else match, str(refused.value)), str(refused.value)
    assert led.event_count() == before and led.state == state
    assert led.receipt(run.run_id).parts == ()
    led.verify()


# A run records only what it planned (R2, R10): what its driver hands ``finish`` about anything
# else (a purge of another table behind a watermark, a folder it never set out to delete, a scan it
# never made) is refused, the ledger as it was. (Before: a purge of a table another watermark had
# blocked was recorded TablePurged, its files still on disk; an aborted write's folder was
# recorded deleted.)
UNPLANNED: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    # (id, the result given the narrow run's facts, the message)
    ("a-purge-of-another-blocked-table", lambda f: Purge(f["u"], "a.u", f["u"], f["u_dropped"], f["u_dropped"]),
     r"vacuum \S+ did not plan a purge of table id {u}: a run records only what it set out to do"),
    ("an-expiry-of-a-folder-it-never-planned",
     lambda f: Expiry(f["v"], "a.v", f["v"], None, (), (Folder(f["aborted"], f["aborted_folder"]),)),
     r"vacuum \S+ did not plan to delete write folder {aborted} \(an expiry's result names it\)"),
    ("a-sweep-of-a-folder-it-never-planned",
     lambda f: Sweep(f["v"], "a.v", f["v"], (Folder(f["aborted"], f["aborted_folder"]),)),
     r"vacuum \S+ did not plan to delete write folder {aborted} \(a sweep's result names it\)"),
    ("a-straggler-scan-it-never-planned",
     lambda f: StragglerScan(f["v"], "a.v", f["v"], Folder(f["committed"], f["committed_folder"]), 0),
     r"vacuum \S+ did not plan a straggler scan of write {committed}"),
]


@pytest.mark.parametrize("result, match", [row[1:] for row in UNPLANNED], ids=[row[0] for row in UNPLANNED])
def test_r2_r10_a_run_records_only_the_items_it_planned(result, match, tmp_path: Path) -> None:
    clock = ManualClock(T0)
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="tester") as led:
        t, u = led.create_table("a.t"), led.create_table("a.u")
        v = led.create_table("a.v")
        aborted = led.begin_write("a.v")
        led.abort_write(aborted.id)
        committed = led.begin_write("a.v")
        led.commit_write(committed.id, [(f"{committed.relative_folder}/part-0.parquet", 1)])
        led.drop_table("a.t")
        clock.advance(60)
        u_dropped = led.drop_table("a.u").dropped_at
        clock.advance(60)
        run = led.start_vacuum(retention="0s", override_floor=True, limit=1, uncommitted=False)
        assert [p.table_id for p in run.plan.purges] == [t.id] and not run.plan.sweeps and not run.plan.stragglers
        led.advance_watermark(u_dropped, scope=f"table:{u.id}")  # by hand: a.u is blocked, but not this run's
        facts = dict(u=u.id, u_dropped=to_micros(u_dropped), v=v.id, aborted=aborted.id,
                     aborted_folder=aborted.relative_folder, committed=committed.id,
                     committed_folder=committed.relative_folder)
        before, state = led.event_count(), led.state
        with pytest.raises(InvalidArgument, match=match.format(**facts)):
            run.finish([Result(run.plan.purges[0], 1, 1), Result(result(facts), 7, 70)])
        assert led.event_count() == before and led.state == state
        assert led.instance(u.id).state == "blocked" and led.instance(t.id).state == "blocked"
        led.verify()


def test_a_runs_finish_takes_each_item_or_part_once(tmp_path: Path) -> None:
    """An expiry split into parts (as the driver spreads a big table over the cores) is recorded from
    its parts, each folder once. The same result twice, or a part beside its whole item, names a
    folder twice: refused, nothing recorded (before: accepted, and WriteFoldersDeleted listed the
    write twice, its files and bytes counted twice)."""
    clock = ManualClock(T0)
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="tester") as led:
        led.create_table("a.v")
        writes = []
        for mode in ("append", "append", "overwrite"):
            w = led.begin_write("a.v")
            led.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", 1)], mode=mode)
            writes.append(w.id)
            clock.advance(60)
        run = led.start_vacuum(retention="0s", override_floor=True, uncommitted=False)
        [expiry] = run.plan.expiries
        assert [f.write_id for f in expiry.folders] == writes[:2]
        first, second = split(expiry, 2)
        before, state = led.event_count(), led.state
        for twice in ([Result(expiry, 2, 2), Result(expiry, 2, 2)], [Result(first, 1, 1), Result(expiry, 2, 2)]):
            with pytest.raises(InvalidArgument, match=rf"two results name write folder {writes[0]}: one result an "
                                                      r"item \(or a part\)"):
                run.finish(twice)
            assert led.event_count() == before and led.state == state
        run.finish([Result(first, 1, 1), Result(second, 1, 1)])
        [deleted] = led.history(type="WriteFoldersDeleted")
        assert (list(deleted.data["write_ids"]), deleted.data["files"]) == (writes[:2], 2)
        led.verify()


# --- every duration argument, given a number no float holds (issue 44) -------------------------

HUGE = 10 ** 400
"""Past any float: ``float(HUGE)`` is an ``OverflowError``, which escaped raw from ``parse_duration``
(``led.pin("db.t", lease=10**400)``), whatever the argument."""
HUGE_TEXT = "1" + "0" * 400 + "d"
"""The same on the command line, which used to call it "not a finite duration"."""

DURATION_ARGUMENTS: list[tuple[str, Callable[[Ledger, Facts, Any], Any], type[LedgerError], str, list | None]] = [
    # (id, the call given the value, the error, how the message names the argument, the CLI's argv)
    ("set-retention", lambda L, f, v: L.set_retention("ledger", v, override_floor=True), InvalidRetention,
     "retention", ["retention", "--override-floor", "--"]),
    ("set-retention-on-a-table", lambda L, f, v: L.set_retention(f"table:{f.live}", v), InvalidRetention,
     "retention", None),
    ("plan-vacuum-retention", lambda L, f, v: L.plan_vacuum(retention=v), InvalidRetention, "retention",
     ["vacuum", "--dry-run", "--retention"]),
    ("start-vacuum-retention", lambda L, f, v: L.start_vacuum(retention=v), InvalidRetention, "retention", None),
    ("spark-ops-vacuum-retention", lambda L, f, v: _vacuum(L, retention=v), InvalidRetention, "retention", None),
    ("plan-vacuum-grace", lambda L, f, v: L.plan_vacuum(grace=v), InvalidRetention, "the straggler grace period",
     ["vacuum", "--dry-run", "--grace"]),
    ("start-vacuum-grace", lambda L, f, v: L.start_vacuum(grace=v), InvalidRetention,
     "the straggler grace period", None),
    ("spark-ops-vacuum-grace", lambda L, f, v: _vacuum(L, grace=v, dry_run=True), InvalidRetention,
     "the straggler grace period", None),
    ("start-vacuum-lease", lambda L, f, v: L.start_vacuum(lease=v), InvalidArgument, "a vacuum's lease", None),
    ("renew-vacuum-lease", lambda L, f, v: VacuumRun.of(L, f.purge_run).renew(lease=v), InvalidArgument,
     "a vacuum's lease", None),
    ("begin-write-lease", lambda L, f, v: L.begin_write("sales.live", lease=v), InvalidArgument, "a write's lease",
     None),
    ("pin-lease", lambda L, f, v: L.pin("sales.live", lease=v), InvalidArgument, "a pin's lease", None),
    ("pin-tables-lease", lambda L, f, v: L.pin_tables(["sales.live"], lease=v), InvalidArgument, "a pin's lease",
     None),
    ("open-max-clock-skew", lambda L, f, v: Ledger.open(L.path, max_clock_skew=v), InvalidArgument,
     "max_clock_skew", None),
]


def _duration_rows() -> list[Row]:
    """Each duration argument given ``HUGE`` and ``-HUGE`` (on the command line, as text): a typed
    refusal whose message names the argument and shows the value short."""
    rows = []
    for name, call, error, what, argv in DURATION_ARGUMENTS:
        for sign, why in (("", "is longer than a century; use e\\.g\\. 365d"),
                          ("-", "is negative; it must be zero or more")):
            value = -HUGE if sign else HUGE
            rows.append(Row(f"{name}-{'minus-' if sign else ''}1e400",
                            lambda L, f, call=call, value=value: call(L, f, value),
                            None if argv is None else [*argv, sign + HUGE_TEXT], error,
                            rf"^{re.escape(what)} \S{{1,48}} {why}$", cli_match=rf" {re.escape(what)} \S{{1,48}} {why}$"))
    return rows


DURATION_ROWS = _duration_rows()


@pytest.mark.usefixtures("no_spark_for_the_cli")
@pytest.mark.parametrize("row, side", _cases(None, DURATION_ROWS))
def test_every_duration_argument_refuses_a_number_no_float_holds_typed_and_changes_nothing(
        row: Row, side: str, prepared) -> None:
    _check(row, side, prepared)


def test_the_catalogue_is_well_formed() -> None:
    """Unique ids, an error class from ledger.errors, a CLI or Python form, and xfails only where a side exists."""
    ids = [row.id for row in CATALOGUE]
    assert len(ids) == len(set(ids))
    for row in CATALOGUE:
        assert getattr(ledger.errors, row.error.__name__) is row.error, row.id
        assert row.call is not None or row.argv is not None, row.id
        assert row.py_xfail is None or row.call is not None, row.id
        assert row.cli_xfail is None or row.argv is not None, row.id
        assert not row.usage or row.argv is not None, row.id
