"""``retention-ledger``: the ledger from a shell.

Exit codes: 0 done; 1 the ledger refused the command (one line on stderr that
starts with ``error:``); 2 the command line itself was wrong; 75 ``maintain`` did
nothing because another run holds its lease (try again later); 130 interrupted
(Ctrl-C: one line, Spark stopped, the ledger consistent). ``--json`` prints
machine-readable output; times are always ISO 8601 UTC.

Only ``create`` makes a ledger where there is none: every other command refuses a
missing path, so a mistyped ``--ledger`` is an error, not an empty ledger that answers
"0 events" or "no dropped instance".
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import attrs
import click
import rich.console

from ledger import (
    Catalog, Checkpoint, DeletionProof, ErasureStatus, HistoryEntry, InvalidArgument, Ledger, LedgerError, Scope,
    TableVersion, VacuumRun, copy_ledger, format_bytes, format_duration, generate_key, iso_utc, ledger_files,
    output_target, parse_time,
)
from vacuum_work import new_run_id

DEFAULT_LEDGER = "ledger.db"


class Context:
    def __init__(self, path: str, warehouse: str | None, actor: str | None, as_json: bool) -> None:
        self.path, self.warehouse, self.actor, self.as_json = path, warehouse, actor, as_json
        self.creates = False
        self.as_of: str | None = None
        self._ledger: Ledger | None = None

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger.open(self.path, warehouse=self.warehouse, actor=self.actor, create=self.creates)
        return self._ledger

    @property
    def reader(self) -> Catalog:
        """What read commands ask: the ledger now, or as of ``--as-of`` (a seq, or a time)."""
        if self.as_of is None:
            return self.ledger
        text = self.as_of.strip()
        if text.isdigit():
            return self.ledger.as_of(seq=int(text))
        return self.ledger.as_of(time=parse_time(text))

    def no_as_of(self, what: str) -> None:
        if self.as_of is not None:
            raise click.UsageError(f"--as-of reads the past; it cannot be combined with {what}")

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()

    def emit(self, data: Any, text: str | Callable[[], str]) -> None:
        if self.as_json:
            click.echo(json.dumps(data, indent=2))
        else:
            click.echo(text() if callable(text) else text)


def command(group: click.Group, name: str, *, short_help: str, creates: bool = False, as_of: bool = False,
            **kwargs: Any) -> Callable[[Callable[..., None]], click.Command]:
    """A subcommand that accepts --json in either place, turns ledger refusals into exit 1 and
    Ctrl-C into exit 130. Only ``creates=True`` commands may make a ledger where there is none: every
    other one refuses a missing path (``LedgerNotFound``), so a mistyped ``--ledger`` is an error;
    ``as_of=True`` ones read the past with ``--as-of T|SEQ`` (``ctx.reader``)."""
    def wrap(fn: Callable[..., None]) -> click.Command:
        @group.command(name, short_help=short_help, **kwargs)
        @click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
        @click.pass_obj
        @functools.wraps(fn)
        def run(ctx: Context, /, as_json: bool, **params: Any) -> None:
            ctx.as_json = ctx.as_json or as_json
            ctx.creates = creates
            ctx.as_of = params.pop("as_of_point", None)
            try:
                fn(ctx, **params)
            except LedgerError as exc:
                click.echo(f"error: {type(exc).__name__}: {in_cli_terms(str(exc))}", err=True)
                sys.exit(1)
            except KeyboardInterrupt:
                _stop_spark()
                click.echo(_interrupted(name), err=True)
                sys.exit(130)
            finally:
                ctx.close()
        if as_of:
            click.option("--as-of", "as_of_point", default=None, metavar="TIME|SEQ",
                         help="Answer as of this ISO 8601 time (after every event at or before it) or "
                              "event number.")(run)
        return run
    return wrap


_CLI_TERMS = {"overwrite=True": "--overwrite", "override_floor=True": "--override-floor"}
"""The Python arguments the ledger's messages name, as a command line spells them."""


def in_cli_terms(message: str) -> str:
    """A refusal as the command line's user acts on it: ``--overwrite``, not ``overwrite=True``."""
    for python, flag in _CLI_TERMS.items():
        message = message.replace(f"pass {python}", f"pass {flag}")
    return message


def jvm_log() -> str:
    """Where the JVM's own output goes, so that stderr carries only this command's answers."""
    return os.path.join(tempfile.gettempdir(), f"retention-ledger-spark-{os.getpid()}.log")


def _stop_spark() -> None:
    """Stop a SparkSession this process started, and its JVM, if Spark was ever imported."""
    if "spark_ops.session" in sys.modules:
        sys.modules["spark_ops.session"].stop_local_spark()


def _interrupted(name: str) -> str:
    return (f"interrupted: {name} stopped; the ledger is consistent (an interrupted vacuum is finished "
            "by the next one)")


class _SparkGuard:
    """Around a command that starts Spark: Ctrl-C stops it at once (one line, the vacuum's lease
    released, the JVM killed, exit 130) instead of unwinding through py4j, which prints pages of
    tracebacks; and py4j's and PySpark's own log records go to the JVM's log file, not stderr.

    PySpark puts its own SIGINT handler in when its context starts; call ``started`` right
    after the session is up, to put ours back. ``run`` is the id the vacuum will record, set
    before it is started: a release of a run not (yet) on record is refused, and that is fine."""

    def __init__(self, name: str, ledger_path: str) -> None:
        self.name, self.ledger_path = name, ledger_path
        self.run: str | None = None
        self.scratch = ""
        """Spark's temporary files for this command (removed when it ends)."""

    def __enter__(self) -> _SparkGuard:
        from pyspark.sql import SparkSession
        self._ours = SparkSession.getActiveSession() is None  # a caller's session (a test's) is left running
        self.scratch = tempfile.mkdtemp(prefix="retention-ledger-spark-")
        self._stderr = os.dup(2)  # the JVM's start points fd 2 at its log: keep the real one
        self._log = logging.FileHandler(jvm_log())
        logging.getLogger().addHandler(self._log)
        self._previous = signal.signal(signal.SIGINT, self._stop_now)
        return self

    def started(self) -> None:
        signal.signal(signal.SIGINT, self._stop_now)

    def _stop_now(self, signum: int, frame: Any) -> None:
        from spark_ops.session import kill_local_jvms

        os.write(self._stderr, (_interrupted(self.name) + "\n").encode())
        kill_local_jvms()
        if self.run is not None:  # a new connection: the main thread may be inside ours
            with contextlib.suppress(Exception), Ledger.open(self.ledger_path, create=False) as led:
                VacuumRun.of(led, self.run).release()
        os._exit(130)  # the ledger needs no cleanup: every append is durable or not there (R10)

    def __exit__(self, *exc: object) -> None:
        """Stop Spark and remove what it left in the temporary folder; the JVM's log too, unless the
        command failed (it may say why)."""
        signal.signal(signal.SIGINT, self._previous)
        if self._ours:
            _stop_spark()
        logging.getLogger().removeHandler(self._log)
        self._log.close()
        os.close(self._stderr)
        shutil.rmtree(self.scratch, ignore_errors=True)
        if exc[0] is None:
            with contextlib.suppress(OSError):
                os.remove(jvm_log())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="retention-ledger", prog_name="retention-ledger")
@click.option("--ledger", "path", envvar="RETENTION_LEDGER", default=DEFAULT_LEDGER, show_default=True,
              help="Ledger file, or a postgresql:// URL for one shared by several hosts (env RETENTION_LEDGER).")
@click.option("--warehouse", envvar="RETENTION_WAREHOUSE", default=None,
              help="Warehouse root for a new ledger; an existing ledger must be given its recorded root "
                   "or none (env RETENTION_WAREHOUSE).")
@click.option("--actor", default=None, help="Who to record as the actor of commands; default user@host.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def cli(click_ctx: click.Context, path: str, warehouse: str | None, actor: str | None, as_json: bool) -> None:
    """Record what a pipeline destroys (drops, undrops, watermarks), refuse unsafe undrops,
    and vacuum what is past its retention."""
    click_ctx.obj = Context(path, warehouse, actor, as_json)
    _LedgerWarnings.install()


class _LedgerWarnings(logging.Handler):
    """The ledger's warnings (a lost connection to the server, and how long it retries) on stderr,
    one line each: a command that waits says why."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"warning: {record.getMessage()}", err=True)

    @classmethod
    def install(cls) -> None:
        logger = logging.getLogger("ledger")
        if not any(isinstance(h, cls) for h in logger.handlers):
            logger.addHandler(cls(logging.WARNING))


# --- text output ---------------------------------------------------------------------------

def _text_table(header: Sequence[str], rows: list[Sequence[Any]]) -> str:
    """Columns aligned under a header; the last column is left ragged (it holds locations)."""
    cells = [list(header)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header) - 1)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(row, widths)), row[-1]]) for row in cells)


# --- tables ----------------------------------------------------------------------------------

@command(cli, "create", short_help="Create a table.", creates=True)
@click.argument("name")
def create(ctx: Context, name: str) -> None:
    """Create table NAME (database.table) at a fresh location in the warehouse."""
    t = ctx.ledger.create_table(name)
    ctx.emit(t.to_dict(), f"created {t.name} (id {t.id}) at {t.location}")


@command(cli, "drop", short_help="Soft-drop a table (restorable until vacuumed).")
@click.argument("name")
def drop(ctx: Context, name: str) -> None:
    """Soft-drop table NAME; it stays restorable until a vacuum's watermark passes it."""
    t = ctx.ledger.drop_table(name)
    ctx.emit(t.to_dict(), f"dropped {t.name} (id {t.id}) at {iso_utc(t.dropped_at)}")


@command(cli, "undrop", short_help="Undrop a dropped table (restore is for versions).")
@click.argument("name")
@click.option("--id", "table_id", help="Undrop this instance instead of the newest dropped one.")
@click.option("--as", "new_name", help="Undrop under this name instead.")
def undrop(ctx: Context, name: str, table_id: str | None, new_name: str | None) -> None:
    """Undrop the newest dropped instance of NAME (or --id), under NAME or --as: same id, same
    files, same versions."""
    t = ctx.ledger.undrop_table(name, table_id=table_id, new_name=new_name)
    ctx.emit(t.to_dict(), f"undropped {t.name} (id {t.id})")


@command(cli, "drop-database", short_help="Drop every live table of a database.")
@click.argument("database")
def drop_database(ctx: Context, database: str) -> None:
    """Drop every live table of DATABASE at once (one event, one drop time)."""
    tables = ctx.ledger.drop_database(database)
    ctx.emit([t.to_dict() for t in tables], f"dropped database {database}: {len(tables)} table(s)")


@command(cli, "undrop-database", short_help="Undrop what a database drop took, all or none.")
@click.argument("database")
def undrop_database(ctx: Context, database: str) -> None:
    """Undrop exactly the tables the latest drop of DATABASE took, all of them or none."""
    tables = ctx.ledger.undrop_database(database)
    ctx.emit([t.to_dict() for t in tables], f"undropped database {database}: {len(tables)} table(s)")


@command(cli, "show", short_help="Show one live table.", as_of=True)
@click.argument("name")
def show(ctx: Context, name: str) -> None:
    """Show the live table NAME, one field per line."""
    data = ctx.reader.table(name).to_dict()
    ctx.emit(data, lambda: "\n".join(f"{k}: {'-' if v is None else v}" for k, v in data.items()))


@command(cli, "tables", short_help="List live tables.", as_of=True)
@click.option("--database", default=None, help="Only the tables of this database.")
def tables(ctx: Context, database: str | None) -> None:
    """List live tables, by name."""
    found = ctx.reader.tables(database=database)
    ctx.emit([t.to_dict() for t in found], lambda: _text_table(
        ("ID", "NAME", "STATE", "CREATED_AT", "LOCATION"),
        [(t.id, t.name, t.state, iso_utc(t.created_at), t.location) for t in found]) if found else "no live tables")


@command(cli, "show-dropped", short_help="List dropped tables, their size and until when they can come back.",
         as_of=True)
@click.option("--database", default=None, help="Only tables dropped from this database.")
@click.option("--name", default=None, help="Only instances of this table name.")
def show_dropped(ctx: Context, database: str | None, name: str | None) -> None:
    """List dropped, unpurged tables, newest drop first, with their files and size (on disk now)
    and when each stops being restorable; 'blocked' ones are behind a watermark and can never
    be undropped."""
    from spark_ops.executor.fs import usage  # the confined lister; no Spark needed

    found = ctx.reader.dropped_tables(database=database, name=name)
    sizes = {t.id: usage(ctx.ledger.warehouse, t.location) for t in found}
    ctx.emit([{**t.to_dict(), "files": sizes[t.id][0], "bytes": sizes[t.id][1]} for t in found],
             lambda: _text_table(
                 ("ID", "NAME", "STATE", "DROPPED_AT", "RESTORABLE_UNTIL", "FILES", "SIZE", "LOCATION"),
                 [(t.id, t.name, t.state, iso_utc(t.dropped_at), iso_utc(t.restorable_until),
                   sizes[t.id][0], format_bytes(sizes[t.id][1]), t.location) for t in found])
             if found else "no dropped tables")


# --- versions -----------------------------------------------------------------------------------

@command(cli, "versions", short_help="List a table's versions.", as_of=True)
@click.argument("name", required=False)
@click.option("--id", "table_id", default=None, help="Any instance by id, a dropped one too (see show-dropped).")
@click.option("--files", "with_files", is_flag=True,
              help="Also list each version's files (paths relative to the table's location) and sizes.")
def versions(ctx: Context, name: str | None, table_id: str | None, with_files: bool) -> None:
    """List every version of the live table NAME (or of instance --id), newest first; expired
    ones, and those an erasure request made unreadable (erased by it), can no longer be read or
    restored."""
    found = ctx.reader.versions(name, table_id=table_id)
    name = name or table_id or ""

    def text() -> str:
        if not found:
            return f"{name} has no versions yet"
        table = _text_table(
            ("VERSION", "COMMITTED_AT", "MODE", "FILES", "SIZE", "STATE"),
            [(v.number, iso_utc(v.committed_at), v.mode if v.restored_from is None else f"restore of {v.restored_from}",
              v.file_count, format_bytes(v.bytes), _version_state(v)) for v in found])
        if not with_files:
            return table
        blocks = [f"version {v.number} ({_files(v.file_count, v.bytes)}"
                  f"{'' if v.erased_by is None else f', erased by {v.erased_by}'}):\n" + _text_table(
            ("  SIZE", "PATH"), [(f"  {format_bytes(f.size)}", f.path) for f in v.files]) for v in found]
        return "\n\n".join([table, *blocks])

    ctx.emit([v.to_dict(with_files=with_files) for v in found], text)


def _version_state(v: TableVersion) -> str:
    """What a reader may do with a version, in a word or three. An erased one says which request made
    it unreadable (R25: ``erasure ID`` tells its files' fate); that comes before its being expired,
    which an erasure's ``--expire-now`` also makes it."""
    if v.erased_by is not None:
        return f"erased by {v.erased_by}" if not v.current else f"current, erased by {v.erased_by}"
    return "current" if v.current else "expired" if v.expired else "readable"


@command(cli, "restore", short_help="Restore a table to an earlier version.")
@click.argument("name")
@click.option("--version", "number", type=int, default=None, help="The version to restore.")
@click.option("--as-of", "as_of", default=None, metavar="TIME",
              help="Restore the version that was current at this ISO 8601 time (with a zone).")
def restore(ctx: Context, name: str, number: int | None, as_of: str | None) -> None:
    """Make a new version of NAME equal to an earlier one (--version N or --as-of TIME): undoes an
    overwrite. An expired version is refused."""
    if (number is None) == (as_of is None):
        raise click.UsageError("give exactly one of --version and --as-of")
    v = ctx.ledger.restore_table(name, version=number, as_of=None if as_of is None else parse_time(as_of))
    ctx.emit(v.to_dict(), f"restored {v.table} to version {v.restored_from}: now version {v.number} "
                          f"({_files(v.file_count, v.bytes)})")


@command(cli, "mark", short_help="Show or advance a table's retention mark.", as_of=True)
@click.argument("name")
@click.option("--advance", "to", default=None, metavar="TIME",
              help="Advance to the newest version committed at or before this ISO 8601 time, or 'now'.")
def mark(ctx: Context, name: str, to: str | None) -> None:
    """Show the retention mark of NAME, or advance it: versions committed at or before it (but the
    current one) are expired. It never moves back, and never reaches the current version."""
    if to is None:
        found = ctx.reader.retention_mark(name)
        ctx.emit({"table": name, "retention_mark": iso_utc(found)}, f"{name}: {iso_utc(found) or 'not set'}")
        return
    ctx.no_as_of("--advance")
    led = ctx.ledger
    previous = led.advance_retention_mark(name, led.now() if to.strip().lower() == "now" else parse_time(to))
    _moved(ctx, {"table": name}, "retention_mark", name, previous, led.retention_mark(name),
           "a mark never moves back and only lands on the commit time of a version older than the current one")


def _moved(ctx: Context, data: dict[str, Any], field: str, what: object, previous: datetime | None,
           current: datetime | None, unchanged: str) -> None:
    """What an advance of a watermark or a retention mark did: moved, or why not."""
    text = (f"{what}: unchanged at {iso_utc(current) or 'not set'}: {unchanged}" if previous == current else
            f"{what}: {iso_utc(previous) or 'not set'} -> {iso_utc(current)}")
    ctx.emit({**data, "previous": iso_utc(previous), field: iso_utc(current)}, text)


@command(cli, "writes", short_help="List open writes and their leases.", as_of=True)
@click.option("--name", default=None, help="Only writes to this table.")
def writes(ctx: Context, name: str | None) -> None:
    """List the writes registered and not yet committed, aborted or swept, with their leases."""
    found = ctx.reader.open_writes(name=name)
    ctx.emit([w.to_dict() for w in found], lambda: _text_table(
        ("WRITE", "TABLE", "BEGAN_AT", "EXPIRES_AT", "LEASE", "FOLDER"),
        [(w.id, w.table, iso_utc(w.began_at), iso_utc(w.expires_at), format_duration(int(w.lease.total_seconds())),
          w.folder) for w in found]) if found else "no open writes")


@command(cli, "pins", short_help="List live pins: what readers hold from every vacuum.")
@click.option("--name", default=None, help="Only pins on this live table.")
@click.option("--id", "table_id", default=None, help="Only pins on this instance (a dropped one too).")
def pins(ctx: Context, name: str | None, table_id: str | None) -> None:
    """List the live pins (R21): each keeps a version's files (or a dropped table) from every
    vacuum until it is released or its lease ends."""
    found = ctx.ledger.pins(name, table_id=table_id)
    ctx.emit([p.to_dict() for p in found], lambda: _text_table(
        ("PIN", "TABLE", "TABLE_ID", "VERSION", "TAKEN_AT", "EXPIRES_AT"),
        [(p.id, p.table, p.table_id, "-" if p.version is None else str(p.version), iso_utc(p.taken_at),
          iso_utc(p.expires_at)) for p in found]) if found else "no live pins")


# --- watermarks and retention ----------------------------------------------------------------

@command(cli, "watermark", short_help="Show or advance a watermark.", as_of=True)
@click.option("--scope", default="ledger", show_default=True,
              help="ledger, database:<name> or table:<id>.")
@click.option("--advance", "to", default=None, metavar="TIME",
              help="Advance to this ISO 8601 time (with a zone, e.g. 2026-01-31T00:00:00Z) or 'now'.")
def watermark(ctx: Context, scope: str, to: str | None) -> None:
    """Show the watermark of a scope, or advance it; a watermark never moves back."""
    where = Scope.parse(scope)
    if to is None:
        mark = ctx.reader.watermark(where)
        ctx.emit({"scope": str(where), "watermark": iso_utc(mark)}, f"{where}: {iso_utc(mark) or 'not set'}")
        return
    ctx.no_as_of("--advance")
    target = None if to.strip().lower() == "now" else parse_time(to)
    led = ctx.ledger
    previous = led.advance_watermark(target or led.now(), scope=where)
    _moved(ctx, {"scope": str(where)}, "watermark", where, previous, led.watermark(where),
           f"watermarks never move back, and {iso_utc(target) if target else 'now'} is not after it")


@command(cli, "retention", short_help="Show, set or clear a retention.", as_of=True,
         context_settings={"ignore_unknown_options": True})  # so that "-1d" reaches the ledger, which says why
@click.argument("duration", required=False)
@click.option("--scope", default="ledger", show_default=True, help="ledger, database:<name> or table:<id>.")
@click.option("--override-floor", is_flag=True, help="Allow a retention under the 24h floor.")
def retention(ctx: Context, duration: str | None, scope: str, override_floor: bool) -> None:
    """Show, set (e.g. 7d, 36h; a unit is required) or clear ('none') how long tables dropped in a
    scope stay restorable. Without DURATION, shows the setting and the retention that applies."""
    if duration is not None and duration.startswith("-") and not duration[1:2].isdigit():
        raise click.UsageError(f"No such option: {duration}")
    where = Scope.parse(scope)
    if duration is not None:
        ctx.no_as_of("a new retention")
        value = None if duration.strip().lower() == "none" else duration
        ctx.ledger.set_retention(where, value, override_floor=override_floor)
    led = ctx.reader
    found = led.retention(where)
    effective, source = led.effective_retention(where)
    seconds = None if found is None else int(found.total_seconds())
    data = {"scope": str(where), "retention_seconds": seconds,
            "retention": None if seconds is None else format_duration(seconds),
            "effective": format_duration(int(effective.total_seconds())),
            "effective_seconds": int(effective.total_seconds()), "effective_from": source}
    if seconds is not None:
        text = f"{where}: {format_duration(seconds)}"
    else:
        origin = "the built-in default" if source == "default" else f"from {source}"
        text = f"{where}: not set here; {data['effective']} applies ({origin})"
    if where.kind == "database" and not led.tables(database=where.key) and \
            not led.dropped_tables(database=where.key):
        text += f" (database {where.key} has no tables yet: the setting applies to tables created in it)"
    ctx.emit(data, text)


# --- audit -----------------------------------------------------------------------------------

@command(cli, "history", short_help="List who did what, event by event.")
@click.argument("name", required=False)
@click.option("--id", "table_id", default=None, help="Only the events of this table instance.")
@click.option("--actor", default=None, help="Only events recorded by this actor (e.g. alice@etl-3).")
@click.option("--since", default=None, metavar="TIME", help="Only events at or after this ISO 8601 time.")
@click.option("--until", default=None, metavar="TIME", help="Only events at or before this ISO 8601 time.")
@click.option("--type", "types", multiple=True, metavar="TYPE",
              help="Only events of this type (e.g. TableDropped); repeat for several.")
@click.option("--last", type=click.IntRange(min=0), default=None, metavar="N",
              help="Only the N latest of the events that match.")
@click.option("--count", "count_only", is_flag=True, help="Print how many events match, not the events.")
@click.option("--pins", is_flag=True, help="Also the pins readers took, renewed and released (every read pins).")
def history(ctx: Context, name: str | None, table_id: str | None, actor: str | None, since: str | None,
            until: str | None, types: tuple[str, ...], last: int | None, count_only: bool, pins: bool) -> None:
    """Every event, or those that match every filter given: one table (by NAME across renames, or
    --id), an actor, a time window, event types. Each says in words what happened. Pins are left
    out unless --pins (or --type names them). Printed as it is read, so a long log starts at once
    and never sits in memory."""
    found = ctx.ledger.history(name, table_id=table_id, actor=actor,
                               since=None if since is None else parse_time(since),
                               until=None if until is None else parse_time(until), type=types or None, pins=pins)
    if count_only:
        n = len(found) if last is None else len(found.last(last))
        click.echo(json.dumps({"count": n}) if ctx.as_json else f"{n} event{'' if n == 1 else 's'}")
        return
    entries: Iterable[HistoryEntry] = found if last is None else found.last(last)
    if ctx.as_json:
        click.echo("[", nl=False)
        for i, e in enumerate(entries):
            click.echo(("," if i else "") + "\n  " + json.dumps(e.to_dict()), nl=False)
        click.echo("\n]")
        return
    shown = 0
    for e in entries:
        click.echo(f"#{e.seq:<6} {iso_utc(e.time)}  {e.text}")
        shown += 1
    if not shown:
        click.echo("no events")


@command(cli, "verify", short_help="Check the file, the hash chain and every rule.")
@click.option("--against", "checkpoint", default=None, metavar="CHECKPOINT",
              help="Also prove the log still holds exactly what this checkpoint file covered.")
@click.option("--public-key", default=None, metavar="FILE",
              help="The Ed25519 public key (PEM) the checkpoint must be signed with.")
def verify(ctx: Context, checkpoint: str | None, public_key: str | None) -> None:
    """Check the file, recompute the hash chain, refold the whole log and re-check every rule;
    exit 1 naming the first bad event if anything is wrong; compare every stored state with the
    fold (if one disagrees, all are discarded, and the present's rebuilt). With --against, prove
    the log extends a checkpoint."""
    if public_key is not None and checkpoint is None:
        raise click.UsageError("--public-key checks a checkpoint's signature: give the checkpoint with --against")
    cp = None if checkpoint is None else Checkpoint.read(checkpoint)
    report = ctx.ledger.verify(against=cp, public_key=public_key)
    notes = []
    if report.generations_discarded:
        notes.append(f"{report.generations_discarded} of {report.generations_compared} stored states disagreed with "
                     "the log: every stored state was discarded, the present's rebuilt (run maintain for as_of's)")
    elif report.snapshot_discarded:
        notes.append("the state held disagreed with the log: it was rebuilt from the log")
    if report.hashed_by_upgrade:
        notes.append(f"the first {report.hashed_by_upgrade} events were hashed when the file was upgraded, "
                     "not as written")
    if report.receipted:
        notes.append(f"{report.receipted} deleted objects in receipts, re-hashed")
    if cp is not None:
        notes.append(f"extends checkpoint #{cp.seq} ({iso_utc(cp.time)})"
                     + (", signature verified" if report.signature_checked else ""))
    chain = f"chain intact to {report.head[:16]}..." if report.head else (
        "no hash chain (a format-1 file opened read-only)" if not report.chained else "empty log")
    data = attrs.asdict(report, recurse=False)
    data["checkpoint"] = None if cp is None else json.loads(cp.to_json())
    ctx.emit(data, f"ok: {report.events} events, {chain}; {report.live} live, {report.dropped} dropped, "
                   f"{report.purged} purged" + "".join(f"; {n}" for n in notes))


BUSY = 75
"""``maintain``'s exit code when another run holds its lease and it did nothing: sysexits'
``EX_TEMPFAIL`` (try again later), so that a scheduler never takes it for a run that ran."""


@command(cli, "maintain", short_help="Store the states that keep opens and --as-of fast.")
def maintain_command(ctx: Context) -> None:
    """Store the state at least every 15,000 events (--as-of and as_of fold on from the nearest
    before) and at the log's head (the next open reads it), each costing what changed since the
    one before. Run it after a vacuum, or from a scheduler: nothing else runs it. Once at a time:
    a second one meanwhile says which is running and until when, does nothing and exits 75 (try
    again later). Safe to kill: what it stored is whole, and the next run goes on (at once on the
    same host; from another, once the killed run's lease of two minutes has ended)."""
    led = ctx.ledger
    with _progress_bar("maintaining", quiet=ctx.as_json) as progress:
        report = led.maintain(progress=progress)
    ctx.emit({**attrs.asdict(report), "until": iso_utc(report.until)}, report.summary())
    if not report.done:
        sys.exit(BUSY)


@command(cli, "checkpoint", short_help="Print (or save) a checkpoint of the log's head.")
@click.option("--key", default=None, metavar="FILE", help="Sign it with this Ed25519 private key (PEM).")
@click.option("--out", default=None, metavar="FILE", help="Write it to FILE instead of printing it.")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists (never the ledger or the key).")
def checkpoint_command(ctx: Context, key: str | None, out: str | None, overwrite: bool) -> None:
    """Take a checkpoint of the log: seq, time, head hash and Merkle root, signed with --key if
    given. Keep it outside the ledger; verify --against it later."""
    protected = ledger_files(ctx.path) + ([key] if key else [])
    if out is not None:  # refused before a checkpoint is taken: a bad target changes nothing
        output_target(out, "checkpoint", overwrite=overwrite, protected=protected)
    cp = ctx.ledger.checkpoint(key=key)
    if out is None:
        click.echo(cp.to_json(), nl=False)
        return
    cp.write(out, overwrite=True, protected=protected)
    ctx.emit(json.loads(cp.to_json()), f"checkpoint #{cp.seq} ({iso_utc(cp.time)}, root {cp.root[:16]}...) "
                                       f"{'signed and ' if cp.signature else ''}written to {out}")


@command(cli, "prove", short_help="Prove one event is in a checkpoint (an inclusion proof).")
@click.argument("seq", type=int)
@click.option("--checkpoint", "checkpoint", required=True, metavar="FILE", help="The checkpoint file.")
def prove(ctx: Context, seq: int, checkpoint: str) -> None:
    """Print the RFC 6962 audit path proving event SEQ is one of those the checkpoint covers."""
    cp = Checkpoint.read(checkpoint)
    proof = ctx.ledger.inclusion_proof(seq, cp)
    data = {**proof.to_dict(), "root": cp.root, "verified": proof.verify(cp)}
    ctx.emit(data, lambda: "\n".join([f"event #{seq} (hash {proof.event_hash}) is in checkpoint #{cp.seq} "
                                      f"(root {cp.root}); audit path:", *proof.path]))


@command(cli, "receipt", short_help="Show what one vacuum run deleted (its receipt).")
@click.argument("run_id", metavar="RUN")
def receipt_command(ctx: Context, run_id: str) -> None:
    """Show vacuum run RUN's receipt: the objects it deleted, their bytes, its parts, and the Merkle
    root over them (none yet for a run that has not finished)."""
    r = ctx.ledger.receipt(run_id)
    ctx.emit(r.to_dict(), lambda: "\n".join([
        f"vacuum run {r.run_id}: {r.files} object{'' if r.files == 1 else 's'} deleted ({format_bytes(r.bytes)}) "
        f"in {len(r.parts)} part{'' if len(r.parts) == 1 else 's'}; "
        + (f"receipt closed {iso_utc(r.finished_at)} (event #{r.seq}), root {r.root}" if r.finished_at else
           "the run has not finished: no receipt root yet"),
        *(f"  {p.first} .. {p.last}: {p.count} objects, {format_bytes(p.bytes)}, root {p.root[:16]}..."
          for p in r.parts),
        *([f"  and {r.found_absent} object{'' if r.found_absent == 1 else 's'} it looked for and found already gone "
           "(not its deletions: a run it took over deleted them)"] if r.found_absent else [])]))


@command(cli, "prove-deleted", short_help="Prove a vacuum deleted an object, or many (from its receipt).")
@click.argument("key", required=False)
@click.option("--keys-from", "keys_from", type=click.File("r", encoding="utf-8"), default=None, metavar="FILE",
              help="Prove every key in FILE (one a line; - reads stdin) at once, into one bundle.")
@click.option("--out", default=None, metavar="FILE", help="Write the proof, or the bundle (JSON), to FILE, for the "
                                                          "offline check.")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists (never the ledger itself).")
def prove_deleted_command(ctx: Context, key: str | None, keys_from: Any, out: str | None, overwrite: bool) -> None:
    """Print the proof that KEY was deleted by a vacuum: the run, when, and the audit paths to its
    receipt's root. KEY is relative to the warehouse root or to the table, or a path or URI as Spark
    gives it (file:/..., s3a://...). With --keys-from, every key of FILE, reading each receipt part
    once: a key no receipt holds is exit 1 naming it, after the bundle is written. Check a proof or
    a bundle offline with python -m ledger.audit prove-deleted PROOF EXPORT CHECKPOINT."""
    if (key is None) == (keys_from is None):
        raise click.UsageError("give one KEY, or --keys-from FILE with a key a line" if key is None else
                               "give one KEY or --keys-from FILE, not both")
    if out is not None:
        output_target(out, "deletion proof", overwrite=overwrite, protected=ledger_files(ctx.path))
    if key is None:
        _prove_many(ctx, keys_from, out)
        return
    proof = ctx.ledger.prove_deleted(key)
    if out is not None:
        with open(out, "w", encoding="utf-8") as sink:
            sink.write(proof.to_json())
    ctx.emit({**proof.to_dict(), "verified": proof.verify()}, lambda: (
        f"{proof.key} ({proof.size} bytes) was deleted by vacuum run {proof.run_id}, recorded "
        f"{iso_utc(proof.deleted_at)} (event #{proof.seq}); "
        + (f"receipt root {proof.receipt_root}" if proof.receipt_root else f"part root {proof.part_root} "
           "(the run has not finished)")
        + ("" if out is None else f"; proof written to {out}")))


def _prove_many(ctx: Context, source: Any, out: str | None) -> None:
    """``prove-deleted --keys-from``: the bundle to ``out`` (or stdout: JSON, or a line a key), then
    exit 1 naming the keys no receipt holds, if any."""
    keys = [line.rstrip("\r\n") for line in source if line.strip()]
    if not keys:
        raise InvalidArgument(f"{source.name} holds no keys: give one a line, as prove-deleted KEY takes them")
    bundle = ctx.ledger.prove_deleted_many(keys)
    runs = sorted({p.run_id for p in bundle.proofs})
    summary = (f"{len(bundle.proofs)} of {len(bundle)} keys proven deleted"
               + (f" (by vacuum run {runs[0]})" if len(runs) == 1 else f" (by {len(runs)} vacuum runs)" if runs else ""))
    if out is not None:
        bundle.write(out, overwrite=True, protected=ledger_files(ctx.path))  # target checked first
        if not bundle.unproven:
            ctx.emit({"keys": len(bundle), "proven": len(bundle.proofs), "runs": runs, "out": out},
                     f"{summary}; proofs written to {out}")
    elif ctx.as_json:
        click.echo(bundle.to_json(), nl=False)
    else:
        why = {a.key: a.reason for a in bundle.unproven}
        for answer in bundle:
            click.echo(f"{answer.key}: {answer.size} bytes, recorded {iso_utc(answer.deleted_at)}, deleted by "
                       f"vacuum run {answer.run_id}" if isinstance(answer, DeletionProof) else
                       f"{answer.key}: NOT DELETED ({why[answer.key].partition(': ')[2]})")
        click.echo(summary)
    bundle.require_all()


@command(cli, "export", short_help="Write every event with its hash to a file.")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet"]), default=None,
              help="Default: from the file name (.parquet), else jsonl.")
@click.option("--overwrite", is_flag=True, help="Replace PATH if it exists (never the ledger itself).")
def export_command(ctx: Context, path: str, fmt: str | None, overwrite: bool) -> None:
    """Export the log (JSON lines or Parquet), every event with its seq and hash: with a
    checkpoint, all the offline verifier (python -m ledger.audit verify) needs."""
    fmt = fmt or ("parquet" if path.endswith(".parquet") else "jsonl")
    report = ctx.ledger.export(path, format=fmt, overwrite=overwrite)
    ctx.emit(attrs.asdict(report), f"exported {report.events} events to {report.path} ({report.format})")


@command(cli, "copy", short_help="Copy a ledger into another store, hashes unchanged.")
@click.argument("source")
@click.argument("destination")
def copy_command(ctx: Context, source: str, destination: str) -> None:
    """Copy the ledger at SOURCE into DESTINATION (each a file or a postgresql:// URL), event for
    event, hashes unchanged: a checkpoint taken before verifies against the copy. DESTINATION must
    be new or hold no events. --ledger is not used."""
    report = copy_ledger(source, destination)
    ctx.emit(attrs.asdict(report), f"copied {report.events} events and {report.attachments} attachments from "
                                   f"{report.source} to {report.destination} (head {report.head or '-'}; warehouse "
                                   f"{report.warehouse})")


@command(cli, "keygen", short_help="Make an Ed25519 key pair for signing checkpoints.")
@click.argument("path")
def keygen(ctx: Context, path: str) -> None:
    """Write a new private key to PATH (readable by you only) and its public key to PATH.pub.
    Keep the private key away from the ledger and its writers; give auditors the .pub."""
    public = generate_key(path)
    ctx.emit({"private_key": path, "public_key": str(public)}, f"private key: {path}\npublic key:  {public}")


@command(cli, "move-warehouse", short_help="Record that the warehouse moved.")
@click.argument("root")
def move_warehouse(ctx: Context, root: str) -> None:
    """Record that the warehouse's files now live under ROOT (copy them there first)."""
    before = ctx.ledger.warehouse
    after = ctx.ledger.move_warehouse(root)
    ctx.emit({"from": before, "to": after}, f"warehouse moved: {before} -> {after}")


# --- Spark commands ----------------------------------------------------------------------------

remote_option = click.option(
    "--remote", envvar="SPARK_REMOTE", default=None, metavar="sc://HOST:PORT",
    help="Run on this Spark Connect server instead of a local Spark (Databricks, Snowpark Connect, a server of "
         "your own; env SPARK_REMOTE, as PySpark reads it). Not with --master: the server has its own.")


def spark_options(ships: str = "") -> Callable[[Callable[..., None]], Callable[..., None]]:
    """--master (its help ending with ``ships``), --remote and --conf: where a command's Spark runs."""
    master = click.option("--master", envvar="RETENTION_LEDGER_SPARK_MASTER", default="local[2]", show_default=True,
                          help=f"The Spark master to run on (a cluster's, e.g. spark://host:7077){ships}.")
    conf = click.option(
        "--conf", "spark_conf", multiple=True, metavar="KEY=VALUE", callback=lambda c, p, v: _spark_conf(v),
        help="A Spark setting, as spark-submit takes it (e.g. spark.executorEnv.AWS_REGION=eu-west-1); "
             "repeat for several. spark-defaults.conf in SPARK_CONF_DIR is read as Spark reads it.")
    return lambda fn: master(remote_option(conf(fn)))


def _session(guard: _SparkGuard, master: str, remote: str | None, spark_conf: dict[str, str]) -> Any:
    """The SparkSession a command runs on (local, a cluster's master, or a Connect server), with the
    guard's Ctrl-C handling put back once PySpark has put in its own."""
    from spark_ops import local_session  # Spark is heavy: only for the commands that need it

    spark = local_session(master=master, remote=remote or "", jvm_log=jvm_log(), scratch=guard.scratch,
                          conf=spark_conf)
    guard.started()
    return spark


class OneLineUsageError(click.UsageError):
    """A command line that asks for two things at once: one line on stderr (``Error: ...``), exit 2."""

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


def _one_spark(remote: str | None) -> str | None:
    """The Connect address this command runs on (None: a local Spark), refusing one given beside
    ``--master``: a Connect server runs on its own master, and guessing which one was meant would
    run a vacuum somewhere the user did not ask for."""
    from click.core import ParameterSource

    click_ctx = click.get_current_context()
    if not remote:
        return None
    if "master" in click_ctx.params and click_ctx.get_parameter_source("master") is not ParameterSource.DEFAULT:
        from spark_ops.session import shown
        given = "SPARK_REMOTE is set" if click_ctx.get_parameter_source("remote") is ParameterSource.ENVIRONMENT \
            else "--remote was given"
        raise OneLineUsageError(f"{given} ({shown(remote)}) and so is --master (or RETENTION_LEDGER_SPARK_MASTER): "
                                "a Spark Connect server runs on its own master; give one of them")
    return remote


@command(cli, "vacuum", short_help="Purge dropped tables past their retention.")
@click.option("--retention", default=None, metavar="DURATION",
              help="Use instead of the ledger-wide retention for this run (e.g. 7d); "
                   "database and table settings still apply.")
@click.option("--database", default=None, help="Only tables dropped from this database.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N tables, oldest first.")
@click.option("--dry-run", is_flag=True, help="List what would be deleted, file by file; change nothing.")
@click.option("--listing-dir", default=None, metavar="DIR", type=click.Path(file_okay=False),
              help="With --dry-run: keep the full listing as a Parquet dataset in this new folder "
                   "(by default a large one goes to a temporary folder, a small one only in the report).")
@click.option("--override-floor", is_flag=True, help="Allow --retention under the 24h floor (and --grace under 1h).")
@click.option("--uncommitted/--no-uncommitted", default=True, show_default=True,
              help="Also sweep abandoned writes and stragglers (files a commit did not name).")
@click.option("--only-uncommitted", is_flag=True, help="Only sweep abandoned writes and stragglers.")
@click.option("--grace", default=None, metavar="DURATION",
              help="Delete a straggler only once older than this (default 6h).")
@spark_options("; the executors need PySpark's Python and pyarrow only: the vacuum ships the rest")
def vacuum_command(ctx: Context, retention: str | None, database: str | None, limit: int | None,
                   dry_run: bool, listing_dir: str | None, override_floor: bool, uncommitted: bool,
                   only_uncommitted: bool, grace: str | None, master: str, remote: str | None,
                   spark_conf: dict[str, str]) -> None:
    """Purge dropped tables past their retention, expire old versions, and sweep abandoned writes:
    marks and watermarks first, then delete on Spark, then record."""
    remote = _one_spark(remote)
    if listing_dir is not None and not dry_run:
        raise click.UsageError("--listing-dir keeps a dry run's listing: it needs --dry-run")
    if only_uncommitted and not uncommitted:
        raise click.UsageError("--only-uncommitted sweeps only uncommitted data; it cannot be combined with "
                               "--no-uncommitted, which turns that sweep off")
    led = ctx.ledger
    options: dict[str, Any] = dict(retention=retention, database=database, limit=limit,
                                   override_floor=override_floor, uncommitted=uncommitted,
                                   only_uncommitted=only_uncommitted, grace=grace)
    # Plan first (it records nothing): bad options, or nothing to do, need no Spark start-up.
    plan = led.plan_vacuum(**options)
    if plan.idle(dry_run):
        from spark_ops.vacuum_job.report import build_report
        nothing = build_report(plan, dry_run, {}, time.monotonic(), {})
        ctx.emit(attrs.evolve(nothing, duration=0.0).to_dict(),
                 lambda: "\n".join(["nothing to vacuum", *_left_alone(nothing)]))
        return
    from spark_ops import vacuum  # Spark is heavy: only for the commands that need it

    with _SparkGuard("vacuum", led.path) as guard:
        spark = _session(guard, master, remote, spark_conf)
        # Known before the start lands: a Ctrl-C the moment it does still releases its lease.
        guard.run = None if dry_run else new_run_id()
        with _progress_bar("deleting" if not dry_run else "listing", quiet=ctx.as_json) as progress:
            report = vacuum(spark, led, dry_run=dry_run, progress=progress, run_id=guard.run, listing_dir=listing_dir,
                            **options)
    ctx.emit(report.to_dict(), lambda: "\n".join([report.text(), *_left_alone(report)]))
    if report.failures:
        first = report.failures[0]
        raise VacuumIncomplete(
            f"{len(report.failures)} table(s) could not be purged and stay blocked; first: "
            f"{first.name} (id {first.id}): {first.error}")


def _spark_conf(pairs: tuple[str, ...]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not key.strip().startswith("spark."):
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE with a Spark key (spark.something=value)",
                                     param_hint="--conf")
        conf[key.strip()] = value
    return conf


class VacuumIncomplete(LedgerError):
    """Some planned tables could not be purged; they stay blocked for the next vacuum."""


def _left_alone(report: Any) -> list[str]:
    """What a vacuum left and why: other runs' work, what pins hold, what is not yet due."""
    from spark_ops.vacuum_job.report import held_line

    lines = [f"  vacuum run {run} is still running (its lease is live); its tables are left to it"
             for run in report.busy_runs]
    lines += [held_line(h) for h in report.held]
    lines += [f"  {w['name']} (id {w['id']}) is restorable until {w['due_at']}: retention {w['retention']} from "
              f"{w['retention_from']}" for w in report.waiting]
    return lines


def _files(count: int, size: int) -> str:
    """A count of files and their size, in the one unit system every size is shown in."""
    return f"{count} file{'' if count == 1 else 's'}, {format_bytes(size)}"


@contextlib.contextmanager
def _progress_bar(label: str, *, quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr for interactive runs; nothing when piped or printing JSON."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(console=rich.console.Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@command(cli, "scrub", short_help="Check that every file the ledger names is there, and every deleted one gone.")
@click.option("--database", default=None, help="Only this database's tables (default: the whole warehouse).")
@spark_options()
def scrub_command(ctx: Context, database: str | None, master: str, remote: str | None,
                  spark_conf: dict[str, str]) -> None:
    """Check the warehouse against the ledger and record what was found (R27): every file a readable,
    pinned or restorable version names is there at its recorded size, and every file a receipt says
    deleted is still gone. Changes nothing; exits 1 if anything is missing, back or not checked
    (history --type ScrubFinished lists every scrub)."""
    remote = _one_spark(remote)
    led = ctx.ledger
    led.plan_scrub(database=database)  # a bad --database is refused before Spark starts
    from spark_ops.scrub import scrub

    with _SparkGuard("scrub", led.path) as guard:
        spark = _session(guard, master, remote, spark_conf)
        report = scrub(spark, led, database=database)
    ctx.emit(report.to_dict(), report.summary)
    if not report.ok:
        raise ScrubFound(f"scrub {report.scrub_id} found {len(report.missing)} missing, {len(report.resurrected)} "
                         f"resurrected, {len(report.errors)} not checked (recorded as event #{report.seq})")


class ScrubFound(LedgerError):
    """A scrub found files missing or back, or could not look somewhere: recorded, and exit 1."""


@command(cli, "erase", short_help="Erase rows (a predicate's, or a batch of keys across tables), and record the request.")
@click.argument("tables", nargs=-1, required=True, metavar="TABLE[=COLUMN]...")
@click.option("--where", "predicate", default=None, metavar="SQL",
              help="The rows to erase from the one TABLE, as a Spark SQL predicate (e.g. \"user_id = 42\").")
@click.option("--keys-from", "keys_from", default=None, metavar="FILE",
              help="Erase by keys: FILE holds one key a line (whole numbers, or text), looked for in each "
                   "TABLE=COLUMN given ('-' reads standard input).")
@click.option("--reason", required=True, metavar="TEXT", help="Why (a ticket, an article of law): recorded with it.")
@click.option("--statement", "statement_out", default=None, metavar="FILE",
              help="Write what the request names (its keys or predicate, salted) to FILE: the ledger forgets it once "
                   "the request is done, and the offline check of its proof takes it (--keys).")
@click.option("--expire-now", is_flag=True,
              help="Expire every version holding the rows at once, not at retention (a pin on one of them ends "
                   "with the request; one on an older version holding none refuses it), and make a dropped table "
                   "whose current version held them due to be purged.")
@spark_options()
def erase_command(ctx: Context, tables: tuple[str, ...], predicate: str | None, keys_from: str | None, reason: str,
                  statement_out: str | None, expire_now: bool, master: str, remote: str | None,
                  spark_conf: dict[str, str]) -> None:
    """Erase rows and record the erasure request (R25): those --where names in TABLE, or those whose
    COLUMN holds a key of --keys-from in each TABLE=COLUMN (one request across all of them). The
    current files holding them are rewritten without them; every file of a kept version or a dropped
    instance that held one is unreadable from now on, and the vacuum deletes it (see erasure ID). The
    log keeps a commitment to the keys or predicate, not them."""
    if (predicate is None) == (keys_from is None):
        raise click.UsageError("give --where (a predicate, one TABLE) or --keys-from (keys, TABLE=COLUMN...)")
    if statement_out is not None:  # refused before anything is done: a bad target changes nothing
        output_target(statement_out, "erasure statement", protected=ledger_files(ctx.path))
    remote = _one_spark(remote)
    if predicate is not None:
        if len(tables) != 1 or "=" in tables[0]:
            raise click.UsageError("--where erases from one TABLE (give its name alone)")
        target: str | dict[str, str | None] = tables[0]
        keys = None
    else:
        target = {}
        for given in tables:
            name, sep, column = given.partition("=")
            if not sep or not column:
                raise click.UsageError(f"erasing by keys names each table's key column: TABLE=COLUMN, not {given!r}")
            target[name] = column
        keys = _keys_from(keys_from)
    from spark_ops.erase import erase

    led = ctx.ledger
    with _SparkGuard("erase", led.path) as guard:
        spark = _session(guard, master, remote, spark_conf)
        with _progress_bar("erasing", quiet=ctx.as_json) as progress:
            status = erase(spark, led, target, predicate, keys=keys, reason=reason, expire_now=expire_now,
                           progress=progress)
    if statement_out is not None:
        status.write_statement(statement_out, overwrite=True)
    size = sum(f.size for f in status.files)
    ctx.emit({**status.to_dict(), "statement_written": statement_out}, lambda: "\n".join([
        f"erasure request {status.request_id} recorded for {', '.join(status.tables)} ({_named(status)}): "
        f"{_files(len(status.files), size)} in its set",
        "  " + (f"rewritten without the rows: {', '.join(status.replaced)}" if status.replaced else
                "no current version held a matching row: no new version"),
        f"  unreadable from now on: {', '.join(status.versions) or 'no version'}",
        *(["  expired at once: the next vacuum deletes them"] if expire_now and status.versions else []),
        *([f"  statement (keep it: the ledger forgets it once done) written to {statement_out}"]
          if statement_out else []),
        f"  status and proof: erasure {status.request_id}"]))


def _keys_from(source: str | None) -> list[int] | list[str]:
    """Keys, one a line (blank lines skipped): whole numbers if every one is, text otherwise."""
    try:
        text = sys.stdin.read() if source == "-" else Path(str(source)).read_text(encoding="utf-8")
    except OSError as exc:
        raise click.UsageError(f"cannot read the keys from {source}: {exc.strerror or exc}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and all(re.fullmatch(r"-?\d+", line) for line in lines):
        return [int(line) for line in lines]
    return lines


def _named(status: ErasureStatus) -> str:
    """What a request names, as its status may say it: the predicate, or how many keys in which columns."""
    if status.predicate is not None:
        return status.predicate
    if status.keys:
        columns = ", ".join(f"{t}.{c}" for t, c in zip(status.tables, status.columns))
        return f"{status.keys} key{'' if status.keys == 1 else 's'} in {columns}"
    return f"its statement {status.commitment[:16]}..., forgotten"


@command(cli, "erasure", short_help="Show an erasure request file by file; write its proof bundle or statement.")
@click.argument("request_id", metavar="ID")
@click.option("--out", default=None, metavar="FILE",
              help="Write the request's proof bundle (JSON) to FILE, for the offline check.")
@click.option("--checkpoint", "checkpoint", default=None, metavar="FILE",
              help="With --out: prove the request is in this checkpoint (take it after the request).")
@click.option("--statement", "statement_out", default=None, metavar="FILE",
              help="Write what the request names (its keys or predicate, salted) to FILE, while the ledger keeps it.")
@click.option("--forget", is_flag=True,
              help="Forget what the request names now (the ledger does once it is done): only its commitment stays.")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists (never the ledger itself).")
def erasure_command(ctx: Context, request_id: str, out: str | None, checkpoint: str | None,
                    statement_out: str | None, forget: bool, overwrite: bool) -> None:
    """Show erasure request ID: each file of its set, deleted (by which vacuum run, when) or pending
    (why, until when), and by when its last file goes. With --out, write the bundle that proves it;
    check it offline with python -m ledger.audit prove-erasure FILE EXPORT CHECKPOINT [--keys
    STATEMENT], which accepts it once every file is deleted."""
    if checkpoint is not None and out is None:
        raise click.UsageError("--checkpoint goes into the proof bundle: give the bundle's file with --out")
    for target, what in ((out, "erasure proof"), (statement_out, "erasure statement")):
        if target is not None:  # refused before anything is read: a bad target changes nothing
            output_target(target, what, overwrite=overwrite, protected=ledger_files(ctx.path))
    status = ctx.ledger.forget_erasure(request_id) if forget else ctx.ledger.erasure(request_id)
    if statement_out is not None:
        status.write_statement(statement_out, overwrite=True)
    if out is not None:
        cp = None if checkpoint is None else Checkpoint.read(checkpoint)
        ctx.ledger.prove_erasure(request_id, checkpoint=cp).write(out, overwrite=True,
                                                                  protected=ledger_files(ctx.path))
    gone = sum(f.deleted for f in status.files)
    absent = sum(f.found_absent for f in status.files)
    ctx.emit({**status.to_dict(), "out": out}, lambda: "\n".join([
        f"erasure request {status.request_id} of {', '.join(status.tables)} ({_named(status)}), requested "
        f"{iso_utc(status.requested_at)} (event #{status.seq}) for {status.reason!r}: {gone} of "
        f"{len(status.files)} file{'' if len(status.files) == 1 else 's'} deleted"
        + (f", {absent} found absent" if absent else "") + (" - done" if status.done else f" - due by {iso_utc(status.due)}" if status.due else ""),
        *([f"  statement forgotten at {iso_utc(status.forgotten_at)}: only its commitment "
           f"{status.commitment[:16]}... stays"] if status.forgotten_at else []),
        *(f"  {f.key}  {format_bytes(f.size)}  " + (
            f"deleted by vacuum run {f.run_id} at {iso_utc(f.deleted_at)}" if f.deleted else
            f"found absent by vacuum run {f.run_id} at {iso_utc(f.found_absent_at)}" if f.found_absent else
            f"pending{'' if f.until is None else f' until {iso_utc(f.until)}'}: {f.why}") for f in status.files),
        *([] if statement_out is None else [f"statement written to {statement_out}"]),
        *([] if out is None else [f"proof bundle written to {out}"])]))


@command(cli, "erasures", short_help="List the erasure requests: which are open, and by when each is done.")
@click.option("--open", "only_open", is_flag=True, help="Only those not done yet.")
def erasures_command(ctx: Context, only_open: bool) -> None:
    """Every erasure request, oldest first: its tables, when, its files and how many are deleted, and
    for an open one by when its last file goes under today's retentions and marks (or what holds it)."""
    found = ctx.ledger.erasures(open=True if only_open else None)
    rows: list[dict[str, Any]] = [
        {"request_id": s.request_id, "tables": list(s.tables), "requested_at": iso_utc(s.requested_at),
         "reason": s.reason, "files": len(s.files), "deleted": sum(f.settled for f in s.files), "done": s.done,
             "due": iso_utc(s.due), "waiting_on": None if s.done or s.due else (s.pending[0].why if s.pending else None),
             "forgotten_at": iso_utc(s.forgotten_at)} for s in found]
    ctx.emit(rows, lambda: "\n".join(
        [f"{r['request_id']}  {', '.join(r['tables'])}  requested {r['requested_at']}  {r['deleted']}/{r['files']} "
         f"files deleted  " + ("done" if r["done"] else f"due by {r['due']}" if r["due"] else
                               f"waiting: {r['waiting_on']}") for r in rows] or ["no erasure requests"]))


@command(cli, "publish", short_help="Publish the live tables as Iceberg tables, for readers in other engines.")
@click.option("--iceberg", "catalog", required=True, metavar="URL",
              help="The Iceberg SQL catalog: a SQLite file's path, sqlite:///..., or postgresql://...")
@click.option("--catalog-name", default="ledger", show_default=True,
              help="The catalog name its readers use (pyiceberg's SqlCatalog name, Spark's catalog, Trino's "
                   "iceberg.jdbc-catalog.catalog-name).")
@click.option("--metadata", default=None, metavar="FOLDER",
              help="Where the Iceberg metadata files go (beside a SQLite catalog by default; required for PostgreSQL).")
@click.option("--database", default=None, help="Only this database's tables.")
@click.option("--table", "tables", multiple=True, metavar="NAME", help="Only this table (repeatable).")
def publish_command(ctx: Context, catalog: str, catalog_name: str, metadata: str | None, database: str | None,
                    tables: tuple[str, ...]) -> None:
    """Publish every live table's kept versions into an Iceberg SQL catalog (R26): one Iceberg table a
    ledger table, one snapshot a version, over the very files the ledger holds, pinned until the next
    publication; tables dropped since leave the catalog. Publishing again with nothing changed writes
    nothing. Needs the iceberg extra."""
    from arrow_ops import publish

    report = publish(ctx.ledger, catalog, catalog_name=catalog_name, database=database,
                     tables=list(tables) or None, metadata=metadata)
    ctx.emit(report.to_dict(), lambda: "\n".join([
        f"published to {report.catalog} (catalog {report.catalog_name!r}): {len(report.written)} written, "
        f"{len(report.unchanged)} unchanged, {len(report.removed)} removed, {len(report.left_out)} left out",
        *(f"  written    {name}" for name in report.written),
        *(f"  removed    {name}" for name in report.removed),
        *(f"  left out   {name}: {why}" for name, why in report.left_out.items())]))


@command(cli, "publications", short_help="List where the tables are published to other engines.")
def publications_command(ctx: Context) -> None:
    """Every publication on record (R26): the catalog (no password), its name, the metadata folder,
    and the tables it shows. An erasure request republishes each that shows a table it names."""
    found = ctx.ledger.publications()
    ctx.emit([p.to_dict() for p in found], lambda: "\n".join(
        f"{p.catalog} (catalog {p.catalog_name!r}, metadata in {p.metadata}), recorded {iso_utc(p.recorded_at)}: "
        f"{', '.join(sorted(p.tables)) or 'no tables'}" for p in found) or "no publications")


@command(cli, "demo", short_help="Run the quickstart story (needs Java for Spark).")
@click.option("--dir", "folder", default="retention-demo", show_default=True,
              help="Folder for the demo's ledger and warehouse (recreated on each run).")
@remote_option
def demo_command(ctx: Context, folder: str, remote: str | None) -> None:
    """Run the quickstart: write tables with Spark, drop, vacuum, and try two undrops."""
    from .demo import run_demo

    remote = _one_spark(remote)
    if remote:  # the demo starts its session as local_session does: from SPARK_REMOTE (this process only)
        os.environ["SPARK_REMOTE"] = remote

    with _SparkGuard("demo", ":memory:") as guard:
        summary = run_demo(folder, echo=None if ctx.as_json else click.echo, jvm_log=jvm_log(), scratch=guard.scratch,
                           spark_started=guard.started)
    if ctx.as_json:
        click.echo(json.dumps(summary, indent=2))


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="retention-ledger")


if __name__ == "__main__":
    main()
