"""Views in Spark's catalog: whose each one is, and putting and dropping many at once, on a
classic session and on a Spark Connect one.

Whose. A catalog is often shared: the sessions of one Spark application share theirs, and every
session of a Spark Connect server shares the server's (every user of a Databricks cluster, say).
So every view an attachment makes carries two properties: ``MARK`` names the ledger (its
address, without a password) for whoever reads ``SHOW TBLPROPERTIES``, and ``HOLDER`` says which
attachment made it and which pin holds what it shows (``ViewOwner``). A name is an attachment's to
replace or drop only if ``HOLDER`` says so; another's is left alone (``TableExists``), unless it
shows the same ledger and its pin has ended (the session that made it ended without ``detach``,
or left its lease to run out): then nothing holds it, and it is taken over.

Putting views there: with SQL on every kind of session (``_Sql``, below). Where the session's JVM
is this process's (a classic session: ``session.SessionKind.java``), views of a recorded schema go
straight into its catalog instead (``jvm_catalog``), a speed-up that earns its lines: on a busy
two-core machine here, an attach of 1,000 tables took 1.7-3.6 s there against 33-34 s with SQL, its
detach 1.4 s against 18-24 s; of 200 tables, 0.6 s against 3.7 s (``python
benchmarks/attach_connect.py --parts classic,classic-sql [--tables 200 --databases 4]``). A version
of more than 32 files is the exception (``SparkCatalog._over_table``): its view reads a version
table (as with SQL, below), which Spark lists once and keeps listed, where a glob is listed again,
in a Spark job, at every query.

SQL. ``CREATE VIEW`` analyses its query, and a query over Parquet files infers their schema from a
footer in a Spark job of its own; so does ``DROP VIEW`` (it looks the view's plan up in the cache):
~35 ms a view each way on a busy two-core Connect server here, however the statements are sent. SQL
has one way to give Spark a schema instead: a table's. So each version is an external table of its
recorded columns over exactly its files, in a database of the attachment's own
(``retention_ledger_<attachment>``), and the view reads that table: ~9 ms a view to make, ~4 ms to
drop, and no inference at query time either. A table made with its columns written out has Spark
resolve its files as it makes it (and the view resolves them again); one made ``LIKE`` a table of
the same columns copies its schema and resolves nothing, so only the first table of each set of
columns is written out (``_make_tables``). The statements go as scripts, several at a time
(``statements``). These tables are the attachment's plumbing, never to be written to; the database
goes, whole, with ``detach``.

Figures: ``benchmarks/attach_connect.py``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
import uuid
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import attrs
from pyspark.sql import SparkSession

from ledger import TableExists

from ..session import SessionKind, kind_of
from ..tables import quote, spark_uri
from .statements import Statements
from .text import VersionFiles, literal
from .views import HOLDER, MARK, View, ViewOwner, ledger_digest, user_digest

if TYPE_CHECKING:
    from .jvm_catalog import JvmCatalog

log = logging.getLogger("spark_ops.attach")

FILES_DATABASE = "retention_ledger_"
"""The start of the name of an attachment's database of version tables (``_Sql``), which ends with
the attachment's id."""
DATABASE_NOTE = "made by retention-ledger's attach for the views it puts here; dropped once empty"
"""The description of a database ``attach`` made. Whichever attachment of the ledger drops the last
view in it drops the database: after a takeover, the session that made it (ended, or lapsed) shows
nothing there any more, and the one that took its views over did not make it. A database made by
anyone else (no such description) is never dropped."""
RESERVED = "RESERVED_DATABASE_NAME"
_GONE = ("SCHEMA_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND")
"""Spark's error classes for a statement naming a database, or a table, that is not there."""
SHOWN_PER_QUERY = 200
"""Names asked about in one ``SHOW TABLE EXTENDED`` (each answer carries the view's text)."""


class SparkCatalog:
    """One attachment's views in one session's catalog."""

    def __init__(self, spark: SparkSession, *, address: str, attachment: str) -> None:
        self.mark = address
        self.ledger = ledger_digest(address)
        self.attachment = attachment
        self._spark = spark
        self._kind = kind_of(spark)
        self._scratch = Scratch() if self._kind.driver_is_here else None
        self._sql = _Sql(spark, address, attachment, self._scratch)
        self._entries = _entries(spark, self._kind, address)
        self._threshold: int | None = None
        self._backend: _Sql | JvmCatalog = self._entries or self._sql
        self._reserved: dict[str, str] = {}  # a database Spark refused -> why
        self._taken: dict[str, ViewOwner] = {}  # a name ``claim`` found unheld -> whose view it was
        on_server = self._kind.on_server()
        self.session: str | None = on_server[0].replace("-", "") if on_server else None
        self.user: str | None = user_digest(on_server[1]) if on_server else None
        self._gone: dict[str, bool] = {}  # a session another attachment is in -> the server no longer has it
        self.abandoned: list[str] = []
        """The pins of the views last taken over from a session the server no longer has: nothing
        holds them any more, and the attachment that took the views over lets them go."""

    def holder(self, pin: str | None) -> ViewOwner:
        return ViewOwner(self.ledger, self.attachment, pin, self.session, self.user)

    # --- whose names are whose ------------------------------------------------------------------

    def claim(self, names: Iterable[str], mine: set[str], live_pins: Callable[[], set[str]]) -> tuple[set[str], set[str]]:
        """Of ``names`` (``database.table``) about to be put, which are free (nothing there) and
        which of ``mine`` (the names this attachment shows) are no longer its own (another
        session took over a name whose pin ended, or someone replaced the view). One held by
        anything else is ``TableExists``: a user's own table or view, another ledger's view, or
        one of this ledger's that another session shows and holds."""
        held = self.holders(names)
        free: set[str] = set()
        lost: set[str] = set()
        pins: set[str] | None = None
        self._taken, self._gone = {}, {}
        for name in names:
            if name not in held:
                free.add(name)
                continue
            holder = held[name]
            if holder is not None and holder.attachment == self.attachment:
                continue
            if holder is not None and holder.ledger == self.ledger:
                pins = live_pins() if pins is None else pins
                if holder.pin is None or holder.pin not in pins or self.gone(holder):
                    self._taken[name] = holder  # nothing holds it: the session that showed it ended, or let
                    continue                    # its pin lapse, or the server no longer has that session
            if name in mine:
                lost.add(name)
                continue
            raise TableExists(_not_ours(name, holder, self.ledger))
        return free, lost

    def gone(self, holder: ViewOwner) -> bool:
        """Whether the Spark Connect server no longer has the session ``holder``'s attachment is in
        (released, timed out for idleness, or lost with a restart): a client killed while attached
        leaves its views held by pins for their whole lease, naming a session nothing can detach
        any more. Asked only of a session of this client's own user (the server keys a session by
        user and id: another user's would look absent), once a claim per session; anything short
        of the server's own "no such session" keeps the view held."""
        if holder.session is None or holder.user != self.user or self.session is None:
            return False
        if holder.session not in self._gone:
            self._gone[holder.session] = self._kind.has_session(str(uuid.UUID(holder.session))) is False
        return self._gone[holder.session]

    def holders(self, names: Iterable[str]) -> dict[str, ViewOwner | None]:
        """Whose each of ``names`` that the catalog holds is (None: no attachment's); the names it
        does not hold are left out."""
        by_database: dict[str, list[str]] = {}
        for name in names:
            database, short = name.split(".", 1)
            by_database.setdefault(database, []).append(short)
        there = self._backend.databases_among(list(by_database))
        found: dict[str, ViewOwner | None] = {}
        for database in there:
            for short, holder in self._backend.holders(database, by_database[database]).items():
                found[f"{database}.{short}"] = holder
        return found

    # --- databases ---------------------------------------------------------------------------

    def ensure_databases(self, databases: Iterable[str]) -> tuple[set[str], dict[str, str]]:
        """Create the databases that are not there: those created here, and those Spark refused
        with why (a name it reserves, ``global_temp``: no view can be put in it)."""
        wanted = sorted(set(databases))
        refused = {d: self._reserved[d] for d in wanted if d in self._reserved}
        missing = sorted(set(wanted) - set(refused) - self._backend.databases_among(wanted))
        created = set()
        for database, error in zip(missing, self._sql.create_databases(missing)):  # few: SQL is quick enough
            if error is None:
                created.add(database)
            elif RESERVED in str(error):
                refused[database] = self._reserved[database] = \
                    f"Spark reserves the database name {database} for its own use (no view can be put in it)"
            else:
                raise error
        return created, refused

    # --- views --------------------------------------------------------------------------------

    def put(self, views: Sequence[View], free: set[str]) -> list[Exception | None]:
        """Create or replace each view (the caller ``claim``-ed their names; ``free``: nothing
        is there); for each, None or what Spark raised."""
        by_entry = [v for v in views if self._entries is not None and v.schema is not None]
        by_sql = [v for v in views if self._entries is None or v.schema is None]
        done: dict[str, Exception | None] = {}
        if by_entry:
            done.update(self._put_entries(by_entry, free))
        if by_sql:
            done.update(zip((v.key for v in by_sql), self._sql.put(by_sql, self.holder)))
        taken = [self._taken.pop(v.key) for v in views if done[v.key] is None and v.key in self._taken]
        self.abandoned = [h.pin for h in taken if h.pin is not None and h.session and self._gone.get(h.session)]
        if taken:
            try:
                self._sql.clear_behind(taken)
            except Exception as exc:  # the views are in and must be recorded, whatever this left behind
                log.warning("the version tables of %d view(s) taken over stay in Spark's catalog (%s); nothing "
                            "reads them, and a later takeover or a DROP TABLE removes them", len(taken), exc)
        return [done[v.key] for v in views]

    def _put_entries(self, views: Sequence[View], free: set[str]) -> dict[str, Exception | None]:
        """Put ``views`` straight into a classic session's catalog, those of many files over a
        version table (``_over_table``) made first; the tables they read before are dropped."""
        assert self._entries is not None
        tables, failed = self._sql.tables_for([v for v in views if self._over_table(v)])
        put = [v if tables.get(v.key) is None else attrs.evolve(v, text=files_of(v).text(source=tables[v.key]))
               for v in views if v.key not in failed]
        done: dict[str, Exception | None] = dict(failed)
        done.update(zip((v.key for v in put), self._entries.put(put, free, self.holder)))
        self._sql.settle(views, {v.key: tables.get(v.key) for v in views}, done, failed)
        return done

    def _over_table(self, view: View) -> bool:
        """Whether a classic session's view reads a version table rather than its files' brace
        glob. A view over the glob has every query list the files again and infer their schema,
        each a Spark job once the version has more files than
        ``spark.sql.sources.parallelPartitionDiscovery.threshold`` (32): 0.6 s a query for 200
        files here, several seconds for 10,000, even when a filter on a partition column then
        reads one file in a hundred. A catalog table over the same glob has its schema (no
        inference), and Spark keeps its relation, files listed, from the first query on (the
        session catalog's relation cache): later queries list nothing, and the version's files
        never change, so that is never stale. The table costs a statement at attach (``CREATE
        TABLE ... LIKE``, which lists nothing); at or below the threshold Spark lists on the
        driver, and the view reads its glob as before (an attach of 1,000 one-file tables stays
        under a second)."""
        if view.files is None:
            return False
        if self._threshold is None:
            self._threshold = int(self._spark.conf.get("spark.sql.sources.parallelPartitionDiscovery.threshold",
                                                       "32") or 32)
        return len(view.files.files) > self._threshold

    def drop(self, names: Iterable[str]) -> None:
        """Drop those of ``names`` that are still this attachment's views."""
        self._drop(self._mine(names), whole=False)

    def drop_all(self, names: Iterable[str], databases: Iterable[str]) -> None:
        """Drop the attachment's views among ``names``, then, left empty, those of ``databases``
        (made by it) and those of the views dropped that an attach made (``DATABASE_NOTE``), then
        what else it made (``close``)."""
        mine = self._mine(names)
        self._drop(mine, whole=True)
        held = {name.split(".", 1)[0] for name in mine} - set(databases)
        for database in sorted([*databases, *(d for d in held if self._made_by_attach(d))]):
            self._backend.drop_database_if_empty(database)  # one another session put views in since is kept
        self.close()

    def _made_by_attach(self, database: str) -> bool:
        try:
            return self._spark.catalog.getDatabase(database).description == DATABASE_NOTE
        except Exception:  # noqa: BLE001 - gone meanwhile (another session dropped it): nothing to drop
            return False

    def _drop(self, names: list[str], *, whole: bool) -> None:
        self._backend.drop(names, whole=whole)
        if self._entries is not None:  # a classic session's views of many files read version tables too
            self._sql.forget(names, whole=whole)

    def _mine(self, names: Iterable[str]) -> list[str]:
        held = self.holders(names)
        return sorted(n for n, holder in held.items() if holder is not None and holder.attachment == self.attachment)

    def close(self) -> None:
        """Remove what the attachment made besides its views (after they were dropped): its
        version tables' database first, then the scratch folder its databases were in."""
        self._sql.close()
        if self._scratch is not None:
            self._scratch.close()


def _entries(spark: SparkSession, kind: SessionKind, mark: str) -> JvmCatalog | None:
    """The JVM-only speed-up (``jvm_catalog``), where the session has a JVM of this process's."""
    java = kind.java()
    if java is None:
        return None
    from .jvm_catalog import JvmCatalog  # a classic session's alone: py4j's, never loaded on Connect

    return JvmCatalog(spark, java, mark)


class Scratch:
    """Folders of this process's for the catalog of a session whose driver is this process: the
    databases an attachment makes (Spark makes a folder for every database, in the caller's
    ``./spark-warehouse`` unless told; a view holds no data), and an empty folder for a table to be
    made over, listing nothing. Removed with the attachment, after its databases were dropped."""

    def __init__(self) -> None:
        self._root: str | None = None

    def database(self, name: str) -> str:
        return spark_uri(os.path.join(self._folder(), f"{name}.db"))

    def empty(self) -> str:
        where = os.path.join(self._folder(), "empty")
        os.makedirs(where, exist_ok=True)
        return spark_uri(where)

    def _folder(self) -> str:
        if self._root is None:
            self._root = tempfile.mkdtemp(prefix="retention-ledger-spark-databases-")
        return self._root

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None


def _not_ours(name: str, holder: ViewOwner | None, ledger: str) -> str:
    if holder is not None and holder.ledger == ledger:
        return (f"cannot attach {name}: another Spark session shows this ledger's {name} and holds its pin (the "
                "catalog is shared between the sessions of a Spark application or Connect server): detach it "
                "there, or attach with database= to leave that database out")
    return (f"cannot attach {name}: Spark's catalog holds a {name} that is not this ledger's (drop it there, or "
            "attach with database= to leave that database out)")


class _Sql:
    """The catalog through SQL statements: every kind of session."""

    def __init__(self, spark: SparkSession, mark: str, attachment: str, scratch: Scratch | None = None) -> None:
        self.spark = spark
        self.mark = mark
        self._scratch = scratch
        """Where a session whose driver is this process puts the databases made here (not in the
        caller's warehouse), and an empty folder for a table to be made over (``_create_tables``);
        None: a Spark Connect server's, which puts any database where it puts its own."""
        self.statements = Statements(spark)
        self.files_database = FILES_DATABASE + attachment
        self._tables: dict[str, str] = {}  # a view's name -> the version table it reads
        self._columns: dict[str, str] = {}  # a version table made here -> its columns (``_make_tables``)
        self._files_database_made = False

    def databases_among(self, databases: list[str]) -> set[str]:
        if not databases:
            return set()
        listed = {str(row[0]).lower() for row in self.spark.sql("SHOW DATABASES").collect()}
        return {d for d in databases if d in listed}

    def create_databases(self, databases: list[str], note: str = DATABASE_NOTE) -> list[Exception | None]:
        """In the scratch folder where the session's driver is this process (a view holds no data,
        and Spark would make a folder for each in the caller's ``./spark-warehouse``), else where
        the server puts any database (its warehouse folder): a folder of this process's would mean
        nothing to a server elsewhere. The folder stays empty, and goes with the database."""
        return self.statements.run([f"CREATE DATABASE IF NOT EXISTS {quote(d)} COMMENT {literal(note)}" +
                                    (f" LOCATION {literal(self._scratch.database(d))}" if self._scratch else "")
                                    for d in databases])

    def drop_database_if_empty(self, database: str) -> None:
        if self.spark.catalog.databaseExists(database) and \
                not any(not t.isTemporary for t in self.spark.catalog.listTables(database)):
            self.statements.run([f"DROP DATABASE IF EXISTS {quote(database)}"])  # not empty by now: kept

    def holders(self, database: str, names: list[str]) -> dict[str, ViewOwner | None]:
        """``SHOW TABLE EXTENDED``, ``SHOWN_PER_QUERY`` names at a time: one round trip for many
        names, where ``SHOW TBLPROPERTIES`` is one each."""
        found: dict[str, ViewOwner | None] = {}
        for start in range(0, len(names), SHOWN_PER_QUERY):
            pattern = "|".join(names[start:start + SHOWN_PER_QUERY])
            rows = self.spark.sql(f"SHOW TABLE EXTENDED IN {quote(database)} LIKE {literal(pattern)}").collect()
            for row in rows:
                if not row["isTemporary"]:
                    found[str(row["tableName"]).lower()] = _holder_in(str(row["information"]))
        return found

    def put(self, views: Sequence[View], holder: Callable[[str | None], ViewOwner]) -> list[Exception | None]:
        """The version tables first (a view is analysed against its table), then the views; then
        the tables the views read before, which nothing reads any more."""
        tables, failed = self.tables_for(views)
        made = [v for v in views if v.key not in failed]
        done: dict[str, Exception | None] = dict(failed)
        done.update(zip((v.key for v in made), self.statements.run([
            f"CREATE OR REPLACE VIEW {quote(v.database)}.{quote(v.name)} TBLPROPERTIES "
            f"({literal(MARK)} = {literal(self.mark)}, {literal(HOLDER)} = {literal(holder(v.pin).text())}) "
            f"AS {self._text(v, tables[v.key])}"
            for v in made])))
        self.settle(views, tables, done, failed)
        return [done[v.key] for v in views]

    def clear_behind(self, holders: Sequence[ViewOwner]) -> None:
        """Drop the version tables that views just taken over read (``holders``: whose those views
        were). Their attachment's session ended without ``detach`` (or let its pins lapse), so
        nothing else drops them: on a Connect server, whose catalog outlives every client, each
        killed notebook would leave its tables there for good, each over files no pin holds any
        more. A table is read by the one view of its pin, so the view replaced, nothing reads it.
        The attachment's database goes too once empty; should that session still run, it makes
        the database again for its next table (``_make_tables``)."""
        tables = [f"{quote(FILES_DATABASE + h.attachment)}.{quote('v_' + h.pin)}" for h in holders if h.pin]
        self.statements.run([f"DROP TABLE IF EXISTS {table}" for table in tables])
        for database in sorted({FILES_DATABASE + h.attachment for h in holders}):
            if database != self.files_database:
                self.drop_database_if_empty(database)

    def tables_for(self, views: Sequence[View]) -> tuple[dict[str, str | None], dict[str, Exception]]:
        """Make the version table each of ``views`` will read: the tables by view name (None: it
        reads its files or folder itself), and the failures."""
        tables = {v.key: self._table(v) for v in views}
        wanted = {v.key: (table, v) for v in views if (table := tables[v.key]) is not None}
        return tables, self._make_tables(wanted)

    def settle(self, views: Sequence[View], tables: dict[str, str | None], done: dict[str, Exception | None],
               failed: dict[str, Exception]) -> None:
        """Record the table each view put (``done[key]`` None) reads, and drop the tables nothing
        reads any more: those the views read before, and those made for a view Spark then refused."""
        stale = []
        for view in views:
            table = tables[view.key]
            if done[view.key] is None:
                stale.append(self._tables.pop(view.key, None))
                if table is not None:
                    self._tables[view.key] = table
            elif table is not None and view.key not in failed:
                stale.append(table)  # made for a view Spark then refused
        self._drop_tables([t for t in stale if t is not None and t not in self._tables.values()])

    def _table(self, view: View) -> str | None:
        """The version table ``view`` will read (None: it reads its files or folder itself: a
        schema not recorded, or one a table cannot have)."""
        if view.files is None or view.pin is None or view.files.columns() is None:
            return None
        return f"{quote(self.files_database)}.{quote('v_' + view.pin)}"

    @staticmethod
    def _text(view: View, table: str | None) -> str:
        if view.files is None:
            return view.text
        if table is None:  # its types from its query: cast to the recorded ones, as read_table reads
            return view.files.text(typed=True)
        return view.files.text(source=table)

    def _make_tables(self, tables: dict[str, tuple[str, View]]) -> dict[str, Exception]:
        """Create each version table; the failures, by view name. Another session that took over
        this one's views dropped the tables they read (``clear_behind``), and the database once
        empty: a table made ``LIKE`` one of those, or in that database, is refused; then the
        database is made again if need be, and each table's columns written out anew, once."""
        failed = self._make_tables_once(tables)
        if self._files_database_made and any(gone in str(error) for error in failed.values() for gone in _GONE):
            self._files_database_made = False
            self._columns.clear()
            failed = self._make_tables_once(tables)
        return failed

    def _make_tables_once(self, tables: dict[str, tuple[str, View]]) -> dict[str, Exception]:
        if not tables:
            return {}
        if not self._files_database_made:
            error = self.create_databases([self.files_database],
                                          "views attach made read these: not to be written to")[0]
            if error is not None:
                return {key: error for key in tables}
            self._files_database_made = True
        by_columns = {columns: table for table, columns in self._columns.items()}
        first: dict[str, tuple[str, View, str | None]] = {}  # of columns no table here has yet
        for key, (table, view) in tables.items():
            columns = columns_of(view)
            if columns not in by_columns:
                by_columns[columns] = table
                first[key] = (table, view, None)
        failed = self._create_tables(first)
        unmade = {first[key][0] for key in failed}
        like = {}
        for key, (table, view) in tables.items():
            if key not in first:
                template = by_columns[columns_of(view)]
                like[key] = (table, view, None if template in unmade or template == table else template)
        failed.update(self._create_tables(like))
        return failed

    def _create_tables(self, tables: dict[str, tuple[str, View, str | None]]) -> dict[str, Exception]:
        """Create each ``(table, view, like)``: ``CREATE TABLE ... LIKE`` a table of the same
        columns where one is given, which copies its schema without resolving any files, where a
        table with its columns written out has Spark resolve its files as it makes it (1,000 of
        them on Connect, ``benchmarks/attach_connect.py``: about half the time). On a classic
        session the table written out is a template over an empty folder (``_template``), and
        the version's table is made ``LIKE`` it: a table of 10,000 files written out (or moved
        there by ``SET LOCATION``, which resolves them too) took 150 s to make here. The
        failures, by view name."""
        statements = []
        for table, view, template in tables.values():
            where = literal(files_of(view).glob())
            if template is None and self._scratch is not None:
                template = self._template(view)
            statements.append(f"CREATE TABLE IF NOT EXISTS {table} LIKE {template} LOCATION {where}" if template else
                              f"CREATE TABLE IF NOT EXISTS {table} ({columns_of(view)}) USING parquet "
                              f"OPTIONS ('path' = {where})")
        failed: dict[str, Exception] = {}
        for key, (table, view, _), error in zip(tables, tables.values(), self.statements.run(statements)):
            if error is None:
                self._columns[table] = columns_of(view)
            else:
                failed[key] = error
        return failed

    def _template(self, view: View) -> str | None:
        """A table of ``view``'s columns over an empty folder, to make version tables ``LIKE``
        (a classic session's: ``_create_tables``); None if Spark refused it."""
        columns = columns_of(view)
        assert self._scratch is not None
        table = f"{quote(self.files_database)}.{quote('columns_' + hashlib.sha256(columns.encode()).hexdigest()[:16])}"
        error = self.statements.run([f"CREATE TABLE IF NOT EXISTS {table} ({columns}) USING parquet "
                                     f"OPTIONS ('path' = {literal(self._scratch.empty())})"])[0]
        return None if error is not None else table

    def drop(self, names: Sequence[str], *, whole: bool = False) -> None:
        """Drop the views, then the version tables they read (unless ``whole``: the attachment's
        database of them goes next, whole)."""
        statements = []
        for name in names:
            database, short = name.split(".", 1)
            statements.append(f"DROP VIEW IF EXISTS {quote(database)}.{quote(short)}")
        for error in self.statements.run(statements):
            if error is not None:
                raise error
        self.forget(names, whole=whole)

    def forget(self, names: Sequence[str], *, whole: bool = False) -> None:
        """Drop the version tables the views ``names`` read (they were dropped, or read something
        else now), unless ``whole``: the database of them goes next, whole."""
        tables = [t for t in (self._tables.pop(name, None) for name in names) if t is not None]
        if not whole:
            self._drop_tables([t for t in tables if t not in self._tables.values()])

    def _drop_tables(self, tables: list[str]) -> None:
        for table in tables:
            self._columns.pop(table, None)
        for error in self.statements.run([f"DROP TABLE IF EXISTS {table}" for table in tables]):
            if error is not None:
                raise error

    def close(self) -> None:
        """Drop the attachment's database of version tables, whole: one statement (a table
        dropped on its own costs a listing of its files)."""
        if self._files_database_made:
            error = self.statements.run([f"DROP DATABASE IF EXISTS {quote(self.files_database)} CASCADE"])[0]
            if error is not None:
                raise error
            self._files_database_made = False
            self._tables.clear()
            self._columns.clear()


def files_of(view: View) -> VersionFiles:
    assert view.files is not None
    return view.files


def columns_of(view: View) -> str:
    columns = files_of(view).columns()
    assert columns is not None
    return columns


def _holder_in(information: str) -> ViewOwner | None:
    """The holder in ``SHOW TABLE EXTENDED``'s ``Table Properties: [k=v, ...]`` line."""
    for line in information.splitlines():
        if line.startswith("Table Properties: ["):
            found = re.search(re.escape(HOLDER) + r"=([^,\]\s]*)", line)
            return ViewOwner.parse(found.group(1)) if found else None
    return None
