"""``retention-ledger``: the ledger from a shell.

Exit codes: 0 done, 1 the ledger refused the command (one line on stderr that
starts with ``error:``), 2 the command line itself was wrong. ``--json`` prints
machine-readable output; times are always ISO 8601 UTC.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from typing import Any, Callable, Iterator

import attrs
import click
import rich.console

from .api import Ledger
from .clock import format_duration, iso_utc, parse_time
from .errors import LedgerError
from .names import Scope
from .views import TableInstance

DEFAULT_LEDGER = "ledger.db"


class Context:
    def __init__(self, path: str, warehouse: str | None, actor: str | None, as_json: bool) -> None:
        self.path, self.warehouse, self.actor, self.as_json = path, warehouse, actor, as_json
        self._ledger: Ledger | None = None

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger.open(self.path, warehouse=self.warehouse, actor=self.actor)
        return self._ledger

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()

    def emit(self, data: Any, text: str | Callable[[], str]) -> None:
        if self.as_json:
            click.echo(json.dumps(data, indent=2))
        else:
            click.echo(text() if callable(text) else text)


def command(group: click.Group, name: str, **kwargs: Any) -> Callable:
    """A subcommand that accepts --json in either place and turns ledger refusals into exit 1."""
    def wrap(fn: Callable) -> click.Command:
        @group.command(name, **kwargs)
        @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
        @click.pass_obj
        @functools.wraps(fn)
        def run(ctx: Context, as_json: bool, **params: Any) -> None:
            ctx.as_json = ctx.as_json or as_json
            try:
                fn(ctx, **params)
            except LedgerError as exc:
                click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
                sys.exit(1)
            finally:
                ctx.close()
        return run
    return wrap


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--ledger", "path", envvar="RETENTION_LEDGER", default=DEFAULT_LEDGER, show_default=True,
              help="Ledger file (env RETENTION_LEDGER).")
@click.option("--warehouse", envvar="RETENTION_WAREHOUSE", default=None,
              help="Warehouse root; default: the recorded one, else warehouse/ beside the ledger.")
@click.option("--actor", default=None, help="Who to record as the actor; default user@host.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def cli(click_ctx: click.Context, path: str, warehouse: str | None, actor: str | None, as_json: bool) -> None:
    """Record table drops, undrops and vacuum watermarks; refuse unsafe undrops."""
    click_ctx.obj = Context(path, warehouse, actor, as_json)


def _table_line(t: TableInstance) -> str:
    when = iso_utc(t.dropped_at) or "-"
    return f"{t.id}  {t.name:<32} {t.state:<8} dropped {when}  {t.location}"


def _emit_tables(ctx: Context, tables: list[TableInstance], empty: str) -> None:
    ctx.emit([t.to_dict() for t in tables],
             lambda: "\n".join(map(_table_line, tables)) if tables else empty)


@command(cli, "create")
@click.argument("name")
def create(ctx: Context, name: str) -> None:
    """Create table NAME (database.table)."""
    t = ctx.ledger.create_table(name)
    ctx.emit(t.to_dict(), f"created {t.name} (id {t.id}) at {t.location}")


@command(cli, "drop")
@click.argument("name")
def drop(ctx: Context, name: str) -> None:
    """Soft-drop table NAME; it stays restorable until a vacuum's watermark passes it."""
    t = ctx.ledger.drop_table(name)
    ctx.emit(t.to_dict(), f"dropped {t.name} (id {t.id}) at {iso_utc(t.dropped_at)}")


@command(cli, "undrop")
@click.argument("name")
@click.option("--id", "table_id", help="Restore this instance instead of the newest dropped one.")
@click.option("--as", "new_name", help="Restore under this name instead.")
def undrop(ctx: Context, name: str, table_id: str | None, new_name: str | None) -> None:
    """Restore the newest dropped instance of NAME."""
    t = ctx.ledger.undrop_table(name, table_id=table_id, new_name=new_name)
    ctx.emit(t.to_dict(), f"restored {t.name} (id {t.id})")


@command(cli, "drop-database")
@click.argument("database")
def drop_database(ctx: Context, database: str) -> None:
    """Drop every live table of DATABASE at once."""
    tables = ctx.ledger.drop_database(database)
    ctx.emit([t.to_dict() for t in tables], f"dropped database {database}: {len(tables)} table(s)")


@command(cli, "undrop-database")
@click.argument("database")
def undrop_database(ctx: Context, database: str) -> None:
    """Restore the tables the latest drop of DATABASE took, all or none."""
    tables = ctx.ledger.undrop_database(database)
    ctx.emit([t.to_dict() for t in tables], f"restored database {database}: {len(tables)} table(s)")


@command(cli, "show")
@click.argument("name")
def show(ctx: Context, name: str) -> None:
    """Show the live table NAME."""
    t = ctx.ledger.table(name)
    ctx.emit(t.to_dict(), lambda: "\n".join(f"{k}: {v}" for k, v in t.to_dict().items()))


@command(cli, "tables")
@click.option("--database", default=None)
def tables(ctx: Context, database: str | None) -> None:
    """List live tables."""
    _emit_tables(ctx, ctx.ledger.tables(database=database), "no live tables")


@command(cli, "show-dropped")
@click.option("--database", default=None)
@click.option("--name", default=None)
def show_dropped(ctx: Context, database: str | None, name: str | None) -> None:
    """List dropped, unpurged tables, newest first; 'blocked' ones can no longer be undropped."""
    _emit_tables(ctx, ctx.ledger.dropped_tables(database=database, name=name), "no dropped tables")


@command(cli, "watermark")
@click.option("--scope", default="ledger", show_default=True,
              help="ledger, database:<name> or table:<id>.")
@click.option("--advance", "to", default=None, metavar="TIME",
              help="Advance to this ISO 8601 time (with a zone, e.g. 2026-01-31T00:00:00Z) or 'now'.")
def watermark(ctx: Context, scope: str, to: str | None) -> None:
    """Show a watermark, or advance it (it never moves back)."""
    where = Scope.parse(scope)
    if to is None:
        mark = ctx.ledger.watermark(where)
        ctx.emit({"scope": str(where), "watermark": iso_utc(mark)}, f"{where}: {iso_utc(mark) or 'not set'}")
        return
    target = ctx.ledger.now() if to.strip().lower() == "now" else parse_time(to)
    previous = ctx.ledger.advance_watermark(target, scope=where)
    current = ctx.ledger.watermark(where)
    ctx.emit({"scope": str(where), "previous": iso_utc(previous), "watermark": iso_utc(current)},
             f"{where}: {iso_utc(previous) or 'not set'} -> {iso_utc(current)}")


@command(cli, "retention")
@click.argument("duration", required=False)
@click.option("--scope", default="ledger", show_default=True)
@click.option("--override-floor", is_flag=True, help="Allow a retention under the 24h floor.")
def retention(ctx: Context, duration: str | None, scope: str, override_floor: bool) -> None:
    """Show, set (e.g. 7d, 36h) or clear ('none') the retention of a scope."""
    where = Scope.parse(scope)
    if duration is not None:
        value = None if duration.strip().lower() == "none" else duration
        ctx.ledger.set_retention(where, value, override_floor=override_floor)
    found = ctx.ledger.retention(where)
    seconds = None if found is None else int(found.total_seconds())
    ctx.emit({"scope": str(where), "retention_seconds": seconds},
             f"{where}: {format_duration(seconds) if seconds is not None else 'not set (inherits)'}")


@command(cli, "history")
@click.argument("name", required=False)
@click.option("--id", "table_id", default=None)
def history(ctx: Context, name: str | None, table_id: str | None) -> None:
    """Every event, or those of one table (by NAME across renames, or --id)."""
    entries = ctx.ledger.history(name, table_id=table_id)
    ctx.emit([e.to_dict() for e in entries], lambda: "\n".join(
        f"#{e.seq:<6} {iso_utc(e.time)}  {e.actor:<20} {e.type:<18} {json.dumps(e.data)}"
        for e in entries) or "no events")


@command(cli, "verify")
def verify(ctx: Context) -> None:
    """Check the file and refold the whole log; exit 1 if anything is wrong."""
    report = ctx.ledger.verify()
    ctx.emit(attrs.asdict(report), f"ok: {report.events} events, {report.live} live, {report.dropped} dropped, "
                   f"{report.purged} purged")


@command(cli, "vacuum")
@click.option("--retention", default=None, metavar="DURATION",
              help="Use instead of the ledger-wide retention for this run (e.g. 7d); "
                   "database and table settings still apply.")
@click.option("--database", default=None, help="Only tables dropped from this database.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N tables, oldest first.")
@click.option("--dry-run", is_flag=True, help="List what would be deleted; change nothing.")
@click.option("--override-floor", is_flag=True, help="Allow --retention under the 24h floor.")
def vacuum_command(ctx: Context, retention: str | None, database: str | None, limit: int | None,
                   dry_run: bool, override_floor: bool) -> None:
    """Purge dropped tables past their retention (watermark first, then delete on Spark)."""
    from spark_ops import local_session, vacuum  # Spark is heavy: only for the commands that need it

    led = ctx.ledger
    options = dict(retention=retention, database=database, limit=limit, override_floor=override_floor)
    # Plan first (it changes nothing): bad options, or nothing to do, need no Spark start-up.
    if not led.plan_vacuum(**options).instances:
        ctx.emit({"run_id": None, "dry_run": dry_run, "instances": [], "purged": 0, "failed": 0,
                  "files": 0, "bytes": 0, "watermarks": {}}, "nothing to vacuum")
        return
    spark = local_session()
    with _progress_bar("deleting" if not dry_run else "listing", quiet=ctx.as_json) as progress:
        report = vacuum(spark, led, dry_run=dry_run, progress=progress, **options)
    ctx.emit(report.to_dict(), lambda: _vacuum_text(report))
    if report.failures:
        first = report.failures[0]
        raise VacuumIncomplete(
            f"{len(report.failures)} table(s) could not be purged and stay blocked; first: "
            f"{first.name} (id {first.id}): {first.error}")


class VacuumIncomplete(LedgerError):
    """Some planned tables could not be purged; they stay blocked for the next vacuum."""


def _vacuum_text(report: Any) -> str:
    verb = "would delete" if report.dry_run else "deleted"
    lines = [f"{'dry run' if report.dry_run else 'vacuum ' + str(report.run_id)}: "
             f"{len(report.instances)} table(s), {verb} {report.files} file(s), {report.bytes} bytes "
             f"in {report.duration:.1f}s"]
    lines += [f"  watermark {scope} -> {iso_utc(at)}" for scope, at in report.watermarks.items()]
    for item in report.instances:
        status = "FAILED " + str(item.error) if item.error else f"{item.files} files, {item.bytes} bytes"
        lines.append(f"  {item.id}  {item.name:<32} {status}{'  (resumed)' if item.resumed else ''}")
        lines += [f"      {f.path}  {f.size}" for f in item.would_delete]
    if report.resumed_runs:
        lines.append(f"  took over unfinished run(s): {', '.join(report.resumed_runs)}")
    return "\n".join(lines)


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


@command(cli, "demo")
@click.option("--dir", "folder", default="retention-demo", show_default=True,
              help="Folder for the demo's ledger and warehouse (recreated on each run).")
def demo_command(ctx: Context, folder: str) -> None:
    """Run the quickstart: write tables with Spark, drop, vacuum, and try two undrops."""
    from .demo import run_demo

    summary = run_demo(folder, echo=None if ctx.as_json else click.echo)
    if ctx.as_json:
        click.echo(json.dumps(summary, indent=2))


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="retention-ledger")


if __name__ == "__main__":
    main()
