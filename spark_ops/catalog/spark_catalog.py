"""Views in Spark's session catalog, put there fast.

``CREATE VIEW`` costs ~10 ms in Spark (a parse, an analysis that reads a Parquet footer in a Spark
job, a command run): a thousand tables, ten seconds. The view's schema is known (the ledger
recorded it), so a view is put straight into the session catalog instead: a copy of a template
view's catalog entry with its name, schema, text and one property changed, which Spark resolves
at query time exactly as it resolves a view it made (the text parsed and analyzed, each column
up-cast to the recorded type). About six calls into the JVM, well under a millisecond.

Where the JVM is not reachable (Spark Connect) or the schema is not known (a table written
before versions were recorded), the view is made with SQL instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from pyspark.sql import SparkSession

from ledger import InvalidName, TableExists

from ..tables import spark_uri
from .text import literal, quote

MARK = "retention_ledger"
"""The property that says whose a view is: its value names the ledger (its address, without a
password). Nothing that does not carry this ledger's is replaced or dropped."""
TEMPLATE = "retention_ledger_template"


class SparkCatalog:
    def __init__(self, spark: SparkSession, *, owner: str) -> None:
        self.spark = spark
        self.mark = owner
        session = getattr(spark, "_jsparkSession", None)
        self._catalog = session.sessionState().catalog() if session is not None else None
        self._parser = session.sessionState().sqlParser() if session is not None else None
        self._databases: set[str] = set()
        self._reserved: dict[str, str] = {}  # a database Spark refused -> why
        self._schemas: dict[str, Any] = {}
        self._template: Any = None
        self._scratch: str | None = None
        self._database_classes: tuple[Any, Any, Any] | None = None
        self._handles: dict[tuple[str, str], tuple[Any, ...]] = {}
        """The JVM objects of each view put here (its name, entry and text), held while it is
        shown: py4j frees every handle it lets go of with a round trip to the JVM of its own, which
        doubled the cost of putting a view; held, they are let go with the view."""

    def ensure_database(self, database: str) -> bool:
        """Create the database if need be; True if it was created here. Its folder (Spark makes
        one for every database, ``./spark-warehouse/<name>.db`` unless told) goes in a scratch
        folder of the attachment's, not in the caller's: a view holds no data. A name Spark
        reserves (``global_temp``, its global temporary views') is ``InvalidName``."""
        if database in self._databases:
            return False
        if database in self._reserved:
            raise InvalidName(self._reserved[database])
        try:
            return self._create_database(database)
        except Exception as exc:  # Spark's AnalysisException, or py4j's error that holds it
            if "RESERVED_DATABASE_NAME" not in str(exc):
                raise
            self._reserved[database] = f"Spark reserves the database name {database} for its own use (no view " \
                                       "can be put in it)"
            raise InvalidName(self._reserved[database]) from None

    def _create_database(self, database: str) -> bool:
        exists = self._catalog.databaseExists(database) if self._catalog is not None else \
            self.spark.catalog.databaseExists(database)
        if not exists:
            if self._scratch is None:
                self._scratch = tempfile.mkdtemp(prefix="retention-ledger-spark-databases-")
            where = spark_uri(os.path.join(self._scratch, f"{database}.db"))
            if self._catalog is None:
                self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(database)} LOCATION {literal(where)}")
            else:  # what that statement does, without its 15 ms of parsing and planning
                self._catalog.createDatabase(self._jvm_database(database, where), True)
        self._databases.add(database)
        return not exists

    def names(self, database: str) -> set[str]:
        """The names in ``database`` (views and tables, the ledger's or not; not temporary views)."""
        if self._catalog is None:
            return {t.name for t in self.spark.catalog.listTables(database) if not t.isTemporary} \
                if self.spark.catalog.databaseExists(database) else set()
        if not self._catalog.databaseExists(database):
            return set()
        listed = str(self._catalog.listTables(database).mkString("\u0001"))
        # Spark lists the session's temporary views in every database, unqualified: not the database's.
        return {ident.rsplit(".", 1)[-1].strip("`") for ident in listed.split("\u0001") if "." in ident}

    def owner(self, database: str, name: str) -> str | None:
        """Whose the object of this name is: the ledger its ``MARK`` names, "" for an object that is
        no ledger's, None when there is nothing of that name."""
        if self._catalog is None:
            if not self.spark.catalog.tableExists(f"{quote(database)}.{quote(name)}"):
                return None
            rows = self.spark.sql(f"SHOW TBLPROPERTIES {quote(database)}.{quote(name)} ('{MARK}')").collect()
            value = str(rows[0][1]) if rows else ""
            return "" if "does not have property" in value else value
        ident = self._ident(database, name)
        if (database, name) not in self._handles and not self._catalog.tableExists(ident):
            return None
        props = self._catalog.getTableMetadata(ident).properties()
        return str(props.apply(MARK)) if props.contains(MARK) else ""

    def ours(self, database: str, name: str) -> bool:
        return self.owner(database, name) == self.mark

    def absent(self, names: list[str]) -> set[str]:
        """Which of ``names`` (``database.table``) the catalog does not hold. One it holds that is
        not this ledger's view (a user's own table, another ledger's view) is ``TableExists``."""
        by_database: dict[str, list[str]] = {}
        for name in names:
            by_database.setdefault(name.split(".", 1)[0], []).append(name)
        found = set()
        for database, wanted in by_database.items():
            there = self.names(database)
            for name in wanted:
                short = name.split(".", 1)[1]
                if short not in there:
                    found.add(name)
                elif not self.ours(database, short):
                    raise TableExists(f"cannot attach {name}: Spark's catalog holds a {name} that is not this "
                                      "ledger's (drop it there, or attach with database= to leave that database out)")
        return found

    def put(self, database: str, name: str, text: str, schema_json: str | None, *, new: bool = False) -> None:
        """Create or replace the view ``database.name`` (the caller checked that what it replaces is
        the ledger's; ``new``: it checked that there is nothing to replace)."""
        if self._catalog is None or schema_json is None:
            self.spark.sql(f"CREATE OR REPLACE VIEW {quote(database)}.{quote(name)} "
                           f"TBLPROPERTIES ('{MARK}' = {literal(self.mark)}) AS {text}")
            return
        template = self._template or self._make_template(database)
        ident = self._ident(database, name)
        entry, wrapped = self._entry(template, ident, text, schema_json)
        if new:
            self._catalog.createTable(entry, False, False)
        else:  # in one step: a query in another thread never finds the name missing
            self._catalog.alterTable(entry)
        self._handles[(database, name)] = (ident, entry, wrapped)

    def drop(self, database: str, name: str) -> None:
        if self._catalog is None:
            self.spark.sql(f"DROP VIEW IF EXISTS {quote(database)}.{quote(name)}")
        else:
            self._catalog.dropTable(self._ident(database, name), True, False)
        self._handles.pop((database, name), None)

    def _jvm_database(self, database: str, where: str) -> Any:
        if self._database_classes is None:  # looked up once: each step of a JVM path is a round trip
            jvm: Any = self.spark._jvm  # type: ignore[attr-defined]
            self._database_classes = (jvm.org.apache.spark.sql.catalyst.catalog.CatalogDatabase, jvm.java.net.URI,
                                      jvm.org.apache.spark.api.python.PythonUtils.toScalaMap({}))
        make, uri, no_properties = self._database_classes
        return make(database, "", uri(where), no_properties)

    def drop_database_if_empty(self, database: str) -> None:
        if not self.names(database) and self.spark.catalog.databaseExists(database):
            self.spark.sql(f"DROP DATABASE IF EXISTS {quote(database)}")
        self._databases.discard(database)

    def close(self) -> None:
        """Remove the scratch folder of the databases made here (after they were dropped)."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def _ident(self, database: str, name: str) -> Any:
        held = self._handles.get((database, name))
        if held is not None:
            return held[0]
        if self._template is not None:
            return self._template.identifier(database, name)
        assert self._parser is not None
        return self._parser.parseTableIdentifier(f"{quote(database)}.{quote(name)}")

    def _entry(self, template: _Template, ident: Any, text: str, schema_json: str) -> tuple[Any, Any]:
        """A view's catalog entry: the template's, with this name, schema and text (and the text's
        JVM handle)."""
        schema = self._schemas.get(schema_json)
        if schema is None:
            schema = self._schemas[schema_json] = template.parse_type(schema_json)
        changed = {"identifier": ident, "schema": schema, "properties": template.properties,
                   "viewText": (wrapped := template.some(text)), "viewOriginalText": wrapped}
        return template.entry.copy(*(changed.get(f, v) for f, v in zip(template.fields, template.values))), wrapped

    def _make_template(self, database: str) -> _Template:
        assert self._catalog is not None
        self.spark.sql(f"CREATE OR REPLACE VIEW {quote(database)}.{TEMPLATE} AS SELECT 1 AS x")
        ident = self._ident(database, TEMPLATE)
        entry = self._catalog.getTableMetadata(ident)
        self._catalog.dropTable(ident, True, False)
        self._template = _Template(self.spark, entry, self.mark)
        return self._template


class _Template:
    """A throw-away view's catalog entry, read field by field (by name, so a Spark release that
    adds a field still works), its properties without the query's recorded column names (the
    view's schema gives them), and the JVM functions each copy needs, looked up once.

    This leans on Spark's internals (``SessionCatalog``, ``CatalogTable.copy``), stable across the
    4.x releases it was tried on; the tests put and read views through it on every run, so a Spark
    that changed them fails there, not in a user's session."""

    def __init__(self, spark: SparkSession, entry: Any, mark: str) -> None:
        jvm: Any = spark._jvm
        self.entry = entry
        self.fields = list(str(entry.productElementNames().toList().mkString("\u0001")).split("\u0001"))
        self.values = [entry.productElement(i) for i in range(len(self.fields))]
        multipart = self.fields.index("multipartIdentifier") if "multipartIdentifier" in self.fields else None
        if multipart is not None:  # Spark 4.1+: the view's own full name, which a copy must not keep
            self.values[multipart] = jvm.scala.Option.empty()
        properties = entry.properties()
        for key in list(str(properties.keys().mkString("\u0001")).split("\u0001")):
            if key.startswith("view.query.out."):
                properties = properties.removed(key)
        self.properties = properties.updated(MARK, mark)
        self.parse_type = jvm.org.apache.spark.sql.types.DataType.fromJson
        self.some = jvm.scala.Some
        self._name = entry.identifier()
        self._catalog_name = self._name.catalog()
        self._databases: dict[str, Any] = {}

    def identifier(self, database: str, name: str) -> Any:
        """``database.name`` as the catalog's key (a copy of the template's: one call, where the
        SQL parser takes three times as long)."""
        db = self._databases.get(database)
        if db is None:
            db = self._databases[database] = self.some(database)
        return self._name.copy(name, db, self._catalog_name)
