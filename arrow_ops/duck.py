"""A ledger's tables by name in a DuckDB connection (``attach``, ``refresh``, ``detach``).

    con = duckdb.connect()
    arrow_ops.attach(con, ledger)
    con.sql("SELECT region, sum(amount) FROM sales.orders GROUP BY 1")
    con.sql("SELECT * FROM ledger_versions('sales.orders')")

Each live table is a view ``database.table`` over exactly the files of its current version, and
that version is pinned (R21, R26) while it is attached, as Spark's ``attach`` does. The view reads
with DuckDB's own Parquet reader where it can (files on a local disk under plain paths, one schema
in every file), so a query by name costs what a ``read_parquet`` of the same files costs; anywhere
else (an object store, a schema a merge widened) it scans the version's ``pyarrow`` dataset. A
view says whose it is (its comment names the ledger), so a name the user made is never replaced.

Changes made through the attached ``Ledger`` move the names before the call that made them
returns (``Ledger.watch``); others' are seen after ``refresh``, which also renews the pins.
The ledger's history is in SQL as table macros: ``ledger_history(name[, pins])``,
``ledger_versions(name)``, ``ledger_dropped_tables()``, ``ledger_erasures()``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from typing import Any, Iterable

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from ledger import (
    PIN_EVENTS, Change, InvalidArgument, Ledger, LedgerError, Pin, PinRefused, TableDataMissing, TableInstance,
    TableNotFound, TableVersion, VersionExpired, VersionNotFound, parse_duration,
)
from .datasets import of_version
from .extras import need
from .files import VersionFiles, check_present, version_files
from .types import columns as recorded_columns, duckdb_type

ATTACH_PIN_LEASE = "1h"
RETRIES = 3
MARK = "retention-ledger attachment of "
"""The start of the comment on every view an attachment makes: a view without it is the user's."""
NOTHING_YET = "nothing written to it through the ledger yet"
GLOB = set("*?[]{}")  # DuckDB reads a path with any of these as a pattern

log = logging.getLogger("arrow_ops.attach")


@attrs.frozen
class Named:
    """What one name shows: an instance's version, and the pin that holds it."""
    table_id: str
    version: int
    pin_id: str


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class Attachment:
    """One ledger's names in one DuckDB connection, kept in step with the ledger by ``sync``."""

    def __init__(self, con: Any, ledger: Ledger, database: str | None, lease: Any) -> None:
        self.con = con
        self.ledger = ledger
        self.database = database
        self.lease = lease
        self.mark = MARK + ledger.path
        self.named: dict[str, Named] = {}
        self.unnamed: dict[str, str] = {}
        self.schemas: set[str] = set()  # the schemas this attachment made (dropped with it, if empty)
        self.functions = Functions(con)
        self._lock = threading.RLock()
        self._syncing = False
        self.renewed_at = ledger.now()  # when the pins were last renewed (or first taken)
        self.lease_seconds = parse_duration(lease, "a pin's lease", InvalidArgument).total_seconds()
        self._unwatch = ledger.watch(self._follow)

    # --- the one way names change ------------------------------------------------------------

    def sync(self, names: Iterable[str] | None = None) -> None:
        """Show what the ledger holds now for ``names`` (None: every name): pin the versions to
        show, point the views at exactly what was pinned, then release what the views held before.
        Another process may move a name between the read and the pins: read again."""
        with self._lock:
            self._syncing = True
            try:
                moved = False
                for attempt in range(RETRIES):
                    try:
                        moved = self._sync_once(None if names is None else set(names))
                        break
                    except (TableNotFound, VersionNotFound, VersionExpired, PinRefused):
                        if attempt == RETRIES - 1:
                            raise
                if names is None or moved:  # a followed pin or renewal elsewhere moves nothing here
                    self.functions.update(self.ledger, self.named, None if names is None else set(names))
            finally:
                self._syncing = False

    def _sync_once(self, names: set[str] | None) -> bool:
        """One sync; whether any name moved, came or went."""
        if names is None:
            live = {t.name: t for t in self.ledger.tables(database=self.database)}
            wanted = set(live) | set(self.named) | set(self.unnamed)
        else:
            live = {n: t for n in names if (t := self._live(n)) is not None}
            wanted = names
        gone = sorted(n for n in wanted if n not in live and (n in self.named or n in self.unnamed))
        moved = sorted(n for n in wanted if n in live and self._stale(n, live[n]))
        if not gone and not moved:
            return False
        released: list[str] = []
        try:
            self._show(moved, live, released)
            self._drop_views([n for n in gone if n in self.named])
            for name in gone:
                if name in self.named:
                    released.append(self.named.pop(name).pin_id)
                self.unnamed.pop(name, None)
        finally:
            self._release(released)
        return True

    def _live(self, name: str) -> TableInstance | None:
        try:
            table = self.ledger.table(name)
        except TableNotFound:
            return None
        return table if self.database in (None, table.database) else None

    def _stale(self, name: str, table: TableInstance) -> bool:
        shown = self.named.get(name)
        return shown is None or shown.table_id != table.id or shown.version != table.current_version

    def _show(self, names: list[str], live: dict[str, TableInstance], released: list[str]) -> None:
        """Show ``names``: pin their versions (one append), make every view in one batch of
        statements (a statement a call costs about a millisecond in DuckDB), then record what each
        name shows, adding what it showed before to ``released``."""
        versioned = [n for n in names if live[n].current_version is not None]
        for name in names:
            if live[name].current_version is None:
                self._leave_out(name, NOTHING_YET, released)
        pins = {p.table: p for p in self.ledger.pin_tables(versioned, lease=self.lease)} if versioned else {}
        try:
            owners, schemas = self._owners(), self._schemas()
            made: dict[str, list[str]] = {}
            for name in versioned:
                try:
                    made[name] = self._view(name, pins[name], owners, schemas)
                except (InvalidArgument, TableDataMissing) as exc:
                    self._leave_out(name, str(exc), released)
            for name, error in self._run(made).items():
                del made[name]
                self._hide(pins[name].id)
                self._leave_out(name, f"DuckDB refused its view: {error}", released)
            for name in made:
                pin = pins.pop(name)
                old = self.named.get(name)
                if old is not None:
                    released.append(old.pin_id)
                    self._hide(old.pin_id)
                self.named[name] = Named(pin.table_id, pin.version, pin.id)
                self.unnamed.pop(name, None)
        finally:
            released.extend(p.id for p in pins.values())  # taken for a name not shown

    def _view(self, name: str, pin: Pin, owners: dict[tuple[str, str], str], schemas: set[str]) -> list[str]:
        """The statements that point ``name``'s view at exactly what ``pin`` holds; ``InvalidArgument``
        if the name is not this attachment's to take (a table or view of the user's has it)."""
        schema, table = name.split(".", 1)
        owner = owners.get((schema, table))
        if owner is not None and owner != self.mark:
            raise InvalidArgument(f"{name} is already a table or view in this DuckDB connection, not this ledger's: "
                                  "it is left as it is")
        instance = self.ledger.instance(pin.table_id)
        versions = self.ledger.versions(table_id=pin.table_id)  # the pin's instance: the name may have moved
        version = next(v for v in versions if v.number == pin.version)
        files = version_files(instance.location, version)
        check_present(name, version.number, files)
        statements = []
        if schema not in schemas:
            statements.append(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
            schemas.add(schema)
            self.schemas.add(schema)
        target, hidden = f"{quote(schema)}.{quote(table)}", _hidden(pin.id)
        # The view reads through a name that lives and dies with this connection: in a DuckDB file
        # the view outlives the connection and its pin, and must then read nothing, never files a
        # vacuum may have deleted (R26). Its own reader where it can, as a temporary table macro
        # (DuckDB inlines it: filters still reach the Parquet files); else the version's dataset,
        # registered under that name.
        if version.schema is not None and _native(files, version.schema, versions):
            statements.append(f"CREATE OR REPLACE TEMP MACRO {quote(hidden)}() AS TABLE "
                              f"SELECT * FROM {_parquet_scan(files, version.schema)}")
            source = f"{quote(hidden)}()"
        else:
            self.con.register(hidden, of_version(instance, version))
            source = quote(hidden)
        return statements + [f"CREATE OR REPLACE VIEW {target} AS SELECT * FROM {source}",
                              f"COMMENT ON VIEW {target} IS {literal(self.mark)}"]

    def _run(self, made: dict[str, list[str]]) -> dict[str, str]:
        """Run every name's statements in one call; if DuckDB refuses one, each name's on its own,
        so that only the names refused are left out. Returns the refused names and why."""
        if not made:
            return {}
        try:
            self.con.execute(";\n".join(s for statements in made.values() for s in statements))
            return {}
        except duckdb_error() as exc:
            log.debug("a batch of views was refused (%s): made one by one", exc)
        refused = {}
        for name, statements in made.items():
            try:
                self.con.execute(";\n".join(statements))
            except duckdb_error() as exc:
                refused[name] = str(exc).splitlines()[0]
        return refused

    def _owners(self) -> dict[tuple[str, str], str]:
        """Whose each name of the connection's database is: a view's comment, "" for a table or an
        unmarked view."""
        found = self.con.execute(
            "SELECT schema_name, view_name, coalesce(comment, '') FROM duckdb_views() WHERE NOT internal "
            "AND database_name = current_database() UNION ALL SELECT schema_name, table_name, '' FROM duckdb_tables() "
            "WHERE database_name = current_database()").fetchall()
        return {(schema, name): comment for schema, name, comment in found}

    def _schemas(self) -> set[str]:
        return {row[0] for row in self.con.execute(
            "SELECT schema_name FROM duckdb_schemas() WHERE database_name = current_database()").fetchall()}

    def _drop_views(self, names: Iterable[str]) -> None:
        """Drop the views of ``names`` that are this ledger's, in one call."""
        owners = self._owners()
        split = [(n.split(".", 1)[0], n.split(".", 1)[1]) for n in names]
        mine = [pair for pair in split if owners.get(pair) == self.mark]
        if mine:
            self.con.execute(";\n".join(f"DROP VIEW IF EXISTS {quote(schema)}.{quote(table)}" for schema, table in mine))
        for name in names:
            shown = self.named.get(name)
            if shown is not None:
                self._hide(shown.pin_id)

    def _hide(self, pin_id: str) -> None:
        """Let go of what a pin's view read through (a registered dataset, or a temporary macro)."""
        hidden = _hidden(pin_id)
        with contextlib.suppress(Exception):
            self.con.unregister(hidden)
        with contextlib.suppress(Exception):
            self.con.execute(f"DROP MACRO TABLE IF EXISTS {quote(hidden)}")

    def _leave_out(self, name: str, why: str, released: list[str]) -> None:
        if name in self.named:
            self._drop_views([name])
            released.append(self.named.pop(name).pin_id)
        if self.unnamed.get(name) != why and why != NOTHING_YET:  # a table just made is about to be written
            log.warning("%s has no name in DuckDB: %s (arrow_ops.dataset says more)", name, why)
        self.unnamed[name] = why

    def _release(self, pin_ids: list[str]) -> None:
        if pin_ids:
            with contextlib.suppress(LedgerError):
                self.ledger.release_pins(pin_ids)

    # --- following this process's changes, refresh and detach --------------------------------

    def _follow(self, change: Change) -> None:
        with self._lock:
            if self._syncing:
                return  # this attachment's own pins
            try:
                if self._closed():
                    self._let_go()
                    return
                names = None if change.everything else self.ledger.names_touched(
                    change, database=self.database, shown={n: s.table_id for n, s in self.named.items()})
                if names is None or names:
                    self.sync(names)
                if self.renewed_at is not None and \
                        (self.ledger.now() - self.renewed_at).total_seconds() > self.lease_seconds / 3:
                    self.refresh()  # once a third of the pins' lease has passed, as Spark's attachment does
            except Exception as exc:  # the change landed; only the names lag behind it
                log.warning("DuckDB's names did not follow a change to the ledger (%s): "
                            "arrow_ops.refresh(con, ledger) makes them show it", exc)

    def _closed(self) -> bool:
        try:
            self.con.execute("SELECT 1")
            return False
        except duckdb_error():
            return True

    def _let_go(self) -> None:
        """The connection was closed without ``detach``: stop following, release every pin."""
        self._unwatch()
        self._release([s.pin_id for s in self.named.values()])
        self.named.clear()
        _attached.pop(id(self.con), None)

    def refresh(self) -> list[str]:
        with self._lock:
            if self._closed():
                self._let_go()
                raise InvalidArgument("this DuckDB connection was closed, and the ledger's names with it (their pins "
                                      "are released now): attach the ledger to an open connection")
            held = {s.pin_id: name for name, s in self.named.items()}
            self.renewed_at = self.ledger.now()
            if held:
                self._syncing = True
                try:
                    views = self.ledger.renew_pins(list(held))
                    ended = [held[v.id] for v in views if not v.live]
                    if views:
                        self.lease_seconds = views[0].lease.total_seconds()
                finally:
                    self._syncing = False
                self._drop_views(ended)  # an erasure ended them (R25 wins over R21): shown anew, over what is there now
                for name in ended:
                    del self.named[name]
            self.sync()
            return sorted(self.named)

    def detach(self) -> list[str]:
        with self._lock:
            self._unwatch()
            names = sorted(self.named)
            if self._closed():  # its names went with it: only the pins are left to release
                self._let_go()
                return names
            try:
                self._drop_views(names)
                for schema in sorted(self.schemas):
                    with contextlib.suppress(Exception):  # not empty: the user put something in it
                        self.con.execute(f"DROP SCHEMA IF EXISTS {quote(schema)}")
                self.functions.drop()
            finally:
                self._release([s.pin_id for s in self.named.values()])
                self.named.clear()
            return names


def _hidden(pin_id: str) -> str:
    return f"__ledger_{pin_id}"


def duckdb_error() -> type[Exception]:
    error: type[Exception] = need("duckdb", "duckdb").Error
    return error


def _native(files: VersionFiles, schema: str, versions: list[TableVersion]) -> bool:
    """Whether DuckDB's own reader reads exactly these files as recorded: on the local disk, under
    paths it reads as names (not patterns, and with no ``x=y`` folder above the table's own that
    its partition discovery would take for a column), one schema in every file, and partition
    values its folder parsing reads as Spark wrote them (it reads a folder ``NULL`` as null, and a
    timestamp in the connection's time zone, where Spark wrote it in UTC)."""
    if not files.local or not files.paths:
        return False
    if any(GLOB & set(p) for p in files.paths):
        return False
    base = files.paths[0].split("/_writes/")[0] if "/_writes/" in files.paths[0] else None
    if base is None or "=" in base:
        return False
    types = recorded_columns(schema)
    if any(str(types.get(c)).startswith("timestamp") for c in files.columns):
        return False
    if any(v is not None and v.upper() == "NULL" for row in files.values for v in row):
        return False
    return not any(v.schema not in (None, schema) for v in versions)


def _parquet_scan(files: VersionFiles, schema: str) -> str:
    """``read_parquet`` over exactly the files, the recorded columns in their order, partition
    columns typed as recorded, Spark's timestamps (INT96, no zone) read as the instants they are."""
    types = recorded_columns(schema)
    hive = ", ".join(f"{literal(c)}: {literal(duckdb_type(types[c]))}" for c in files.columns)
    paths = "[" + ", ".join(literal(p) for p in files.paths) + "]"
    options = f"hive_partitioning = true, hive_types = {{{hive}}}" if files.columns else "hive_partitioning = false"
    naive = set()
    if any(t == "timestamp" for t in types.values()):
        with files.filesystem.open_input_file(files.paths[0]) as handle:
            found = pq.read_schema(handle)
        naive = {f.name for f in found if pa.types.is_timestamp(f.type) and f.type.tz is None}
    select = ", ".join(f"timezone('UTC', {quote(c)}) AS {quote(c)}" if c in naive and types[c] == "timestamp"
                       else quote(c) for c in types)
    return f"(SELECT {select} FROM read_parquet({paths}, {options}))"


class Functions:
    """The ledger's history as DuckDB table macros over Arrow tables this connection holds, kept up
    to date by every sync at the cost of what changed: the log is read from where the last sync
    stopped, and each read adds a batch; a name's history is the events of every instance that
    ever bore it (an undrop under a new name brings its past along), joined at query time; a
    table's versions are read again only when a sync touches it."""

    NAMES = ("ledger_history", "ledger_versions", "ledger_dropped_tables", "ledger_erasures")

    def __init__(self, con: Any) -> None:
        self.con = con
        self.batches: list[pa.RecordBatch] = []
        self.bore: set[tuple[str, str]] = set()  # (name, instance) for every name an instance bore
        self.last: tuple[int, Any] = (0, None)
        self.versions: dict[str, list[dict[str, Any]]] = {}  # shown name -> its version rows
        self.made = False

    def update(self, ledger: Ledger, named: dict[str, Named], touched: set[str] | None) -> None:
        """Bring the rows up to date after a sync of ``touched`` names (None: all of them)."""
        if self._read_history(ledger) or not self.made:
            self.con.register("__ledger_history", pa.Table.from_batches(self.batches, schema=_HISTORY))
            self.con.register("__ledger_bore", pa.table({"bore": [n for n, _ in sorted(self.bore)],
                                                         "table_id": [t for _, t in sorted(self.bore)]},
                                                        schema=_BORE))
        for name in set(self.versions) - set(named):
            del self.versions[name]
        for name in named if touched is None else touched & set(named):
            self.versions[name] = [v.to_dict() | {"committed_at": v.committed_at, "superseded_at": v.superseded_at,
                                                  "schema": v.schema} for v in ledger.versions(name)]
        rows = [row for name in sorted(self.versions) for row in self.versions[name]]
        self.con.register("__ledger_versions", pa.Table.from_pylist(rows, schema=_VERSIONS))
        dropped = [t.to_dict() | _times(t) for t in ledger.dropped_tables()]
        self.con.register("__ledger_dropped", pa.Table.from_pylist(dropped, schema=_TABLES))
        erasures = [{"request_id": e.request_id, "tables": ", ".join(e.tables), "requested_at": e.requested_at,
                     "reason": e.reason, "files": len(e.files), "deleted": sum(f.settled for f in e.files),
                     "done": e.done, "due": e.due} for e in ledger.erasures()]
        self.con.register("__ledger_erasures", pa.Table.from_pylist(erasures, schema=_ERASURES))
        if not self.made:
            self._make_macros()

    def _read_history(self, ledger: Ledger) -> bool:
        """Add what was appended since the last read as one batch; whether there was any."""
        last_seq, last_time = self.last
        rows = []
        for entry in ledger.history(since=last_time, pins=True):
            if entry.seq <= last_seq:
                continue
            name, table_id = entry.data.get("name"), entry.data.get("table_id")
            if isinstance(name, str) and isinstance(table_id, str):
                self.bore.add((name, table_id))
            rows.append({
                "seq": entry.seq, "time": entry.time, "actor": entry.actor, "stream": entry.stream,
                "type": entry.type, "text": entry.text, "data": json.dumps(entry.data, sort_keys=True, default=str),
                "pin": entry.type in PIN_EVENTS, "table_ids": list(entry.table_ids)})
            last_seq, last_time = entry.seq, entry.time
        self.last = (last_seq, last_time)
        if rows:
            self.batches.append(pa.RecordBatch.from_pylist(rows, schema=_HISTORY))
        return bool(rows)

    def _make_macros(self) -> None:
        columns = ", ".join(f.name for f in _HISTORY if f.name not in ("pin", "table_ids"))
        self.con.execute(
            f"CREATE OR REPLACE TEMP MACRO ledger_history(name, pins := false) AS TABLE SELECT {columns} "
            "FROM __ledger_history WHERE (pins OR NOT pin) AND list_has_any(table_ids, "
            "(SELECT coalesce(list(table_id), []) FROM __ledger_bore WHERE bore = name)) ORDER BY seq")
        self.con.execute("CREATE OR REPLACE TEMP MACRO ledger_versions(name) AS TABLE "
                         "SELECT * FROM __ledger_versions WHERE \"table\" = name ORDER BY number")
        self.con.execute("CREATE OR REPLACE TEMP MACRO ledger_dropped_tables(within := NULL) AS TABLE "
                         "SELECT * FROM __ledger_dropped WHERE within IS NULL OR name = within "
                         "OR starts_with(name, within || '.') ORDER BY dropped_at")
        self.con.execute("CREATE OR REPLACE TEMP MACRO ledger_erasures() AS TABLE "
                         "SELECT * FROM __ledger_erasures ORDER BY requested_at")
        self.made = True

    def drop(self) -> None:
        for name in self.NAMES:
            with contextlib.suppress(Exception):
                self.con.execute(f"DROP MACRO TABLE IF EXISTS {name}")
        for hidden in ("__ledger_history", "__ledger_bore", "__ledger_versions", "__ledger_dropped", "__ledger_erasures"):
            with contextlib.suppress(Exception):
                self.con.unregister(hidden)
        self.made = False


def _times(table: TableInstance) -> dict[str, Any]:
    return {"created_at": table.created_at, "dropped_at": table.dropped_at, "purged_at": table.purged_at,
            "restorable_until": table.restorable_until, "effective_watermark": table.effective_watermark,
            "retention_mark": table.retention_mark}


_TS = pa.timestamp("us", tz="UTC")
_HISTORY = pa.schema([("seq", pa.int64()), ("time", _TS), ("actor", pa.string()), ("stream", pa.string()),
                      ("type", pa.string()), ("text", pa.string()), ("data", pa.string()), ("pin", pa.bool_()),
                      ("table_ids", pa.list_(pa.string()))])
_BORE = pa.schema([("bore", pa.string()), ("table_id", pa.string())])
_VERSIONS = pa.schema([("table", pa.string()), ("table_id", pa.string()), ("number", pa.int64()),
                       ("committed_at", _TS), ("mode", pa.string()), ("file_count", pa.int64()),
                       ("bytes", pa.int64()), ("expired", pa.bool_()), ("current", pa.bool_()),
                       ("write_id", pa.string()), ("restored_from", pa.int64()), ("superseded_at", _TS),
                       ("schema", pa.string()), ("erased_by", pa.string())])
_TABLES = pa.schema([("id", pa.string()), ("name", pa.string()), ("state", pa.string()), ("location", pa.string()),
                     ("created_at", _TS), ("dropped_at", _TS), ("purged_at", _TS), ("restorable_until", _TS),
                     ("effective_watermark", _TS), ("retention", pa.string()), ("retention_seconds", pa.int64()),
                     ("retention_from", pa.string()), ("current_version", pa.int64()), ("retention_mark", _TS)])
_ERASURES = pa.schema([("request_id", pa.string()), ("tables", pa.string()), ("requested_at", _TS),
                       ("reason", pa.string()), ("files", pa.int64()), ("deleted", pa.int64()), ("done", pa.bool_()),
                       ("due", _TS)])


_attached: dict[int, Attachment] = {}
"""Each connection's attachment (by the connection's id: DuckDB's connections take no weak reference)."""


def attach(con: Any, ledger: Ledger, *, database: str | None = None, lease: Any = None) -> list[str]:
    """Make every live table of ``ledger`` (of ``database``, if given) a name in the DuckDB
    connection ``con``: ``con.sql("SELECT * FROM sales.orders")``. Each name reads exactly the
    files of the version it shows, and that version is pinned (R21) for ``lease`` (an hour by
    default; ``refresh`` renews). Changes made through ``ledger`` are followed at once, others'
    after ``refresh``. Attaching the same ledger again refreshes; another ledger is refused while
    one is attached (``InvalidArgument``: ``detach`` it first). Returns the names attached."""
    need("duckdb", "duckdb")
    _check_open(con)
    found = _attached.get(id(con))
    if found is not None and found.con is con:
        if found.ledger is not ledger:
            raise InvalidArgument(f"another ledger ({found.ledger.path}) is attached to this DuckDB connection: "
                                  "detach(con, that_ledger) first")
        found.database, found.lease = database, ATTACH_PIN_LEASE if lease is None else lease
        return found.refresh()
    attachment = Attachment(con, ledger, database, ATTACH_PIN_LEASE if lease is None else lease)
    try:
        attachment.sync()
    except BaseException:
        attachment.detach()
        raise
    _attached[id(con)] = attachment
    return sorted(attachment.named)


def _check_open(con: Any) -> None:
    """Refuse, before anything is pinned, what is not an open DuckDB connection."""
    try:
        con.execute("SELECT 1")
    except duckdb_error() as exc:
        raise InvalidArgument(f"this DuckDB connection cannot run a query ({str(exc).splitlines()[0]}): attach the "
                              "ledger to an open one (duckdb.connect()); nothing was recorded") from None
    except (AttributeError, TypeError):
        raise InvalidArgument(f"attach takes a DuckDB connection (duckdb.connect()), not a {type(con).__name__}; "
                              "nothing was recorded") from None


def refresh(con: Any, ledger: Ledger) -> list[str]:
    """Show what the ledger holds now (other processes' changes included) and renew the pins."""
    found = _attached.get(id(con))
    if found is None or found.con is not con or found.ledger is not ledger:
        raise TableNotFound("this ledger is not attached to this DuckDB connection: arrow_ops.attach(con, ledger) first")
    return found.refresh()


def detach(con: Any, ledger: Ledger) -> list[str]:
    """Remove the ledger's names from ``con`` and release their pins. Returns the names removed."""
    found = _attached.get(id(con))
    if found is None or found.con is not con or found.ledger is not ledger:
        return []
    del _attached[id(con)]
    return found.detach()
