"""The JVM-only speed-up of Spark's catalog: a classic session's views put straight into its
catalog (``JvmCatalog``), where SQL (``spark_catalog._Sql``, every kind of session) takes about
ten times as long.

The view's schema is known (the ledger recorded it), so a view's entry is a copy of a template
view's with its name, schema, text and properties changed, which Spark resolves at query time
exactly as one it made (the text parsed and analysed, each column up-cast to the recorded type).
Five calls into the JVM, sent without py4j's per-argument checks (``_Wire``: 0.11-0.18 ms of the
driver's CPU a view here, where py4j's own calls, and the frees, took 0.5-0.7), and no Spark job.

Only a session whose JVM is this process's has one (``session.SessionKind.java``): the catalog
asks for it there and nowhere else. What it earns (``benchmarks/attach_connect.py``, parts
``classic`` and ``classic-sql``): see ``spark_catalog``'s note.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from pyspark.sql import SparkSession

from ..session import Java
from ..tables import quote
from .views import HOLDER, MARK, TEMPLATE, View, ViewOwner


class JvmCatalog:
    """A classic session's catalog, through its JVM (``session.Classic.java``)."""

    def __init__(self, spark: SparkSession, java: Java, mark: str) -> None:
        self.spark = spark
        self.mark = mark
        self._java = java
        self._catalog = java.session.sessionState().catalog()
        self._parser = java.session.sessionState().sqlParser()
        self._wire = _Wire()
        self._schemas: dict[str, Any] = {}
        self._template: _Template | None = None
        self._handles: dict[str, tuple[Any, ...]] = {}
        """The JVM objects of each view put here (its name, entry, text and properties), held while
        it is shown: py4j frees every handle it lets go of with a round trip to the JVM of its own,
        which doubled the cost of putting a view; held, they are let go with the view (at detach,
        where they cost the same round trips: an attach is what a user waits on to query)."""

    def databases_among(self, databases: list[str]) -> set[str]:
        return {d for d in databases if self._catalog.databaseExists(d)}

    def drop_database_if_empty(self, database: str) -> None:
        if self._catalog.databaseExists(database) and not self._names(database):
            self.spark.sql(f"DROP DATABASE IF EXISTS {quote(database)}")

    def _names(self, database: str) -> set[str]:
        tables = self._catalog.listTables(database)
        listed = str(tables.mkString("\u0001"))
        _let_go(tables)
        # Spark lists the session's temporary views in every database, unqualified: not the database's.
        return {ident.rsplit(".", 1)[-1].strip("`") for ident in listed.split("\u0001") if "." in ident}

    def holders(self, database: str, names: list[str]) -> dict[str, ViewOwner | None]:
        """The database's names listed in one call (a call a name was the attach's most frequent)."""
        found: dict[str, ViewOwner | None] = {}
        there = self._names(database)
        for name in names:
            if name not in there:
                continue
            metadata = self._wire.call(self._catalog.getTableMetadata, self._ident(database, name))
            props = metadata.properties()
            found[name] = ViewOwner.parse(str(props.apply(HOLDER))) if props.contains(HOLDER) else None
            _let_go(metadata, props)
        return found

    def put(self, views: Sequence[View], free: set[str], holder: Callable[[str | None], ViewOwner]) -> list[Exception | None]:
        results: list[Exception | None] = []
        for view in views:
            try:
                self._put(view, view.key in free, holder(view.pin))
                results.append(None)
            except Exception as exc:  # noqa: BLE001 - the caller decides what each failure means
                results.append(exc)
        return results

    def _put(self, view: View, new: bool, holder: ViewOwner) -> None:
        assert view.schema is not None
        template = self._template or self._make_template(view.database)
        ident = self._ident(view.database, view.name)
        entry, made = self._entry(template, ident, view.text, view.schema, holder)
        if new:
            self._wire.call(self._catalog.createTable, entry, False, False)
        else:  # in one step: a query in another thread never finds the name missing
            self._wire.call(self._catalog.alterTable, entry)
        self._handles[view.key] = (ident, entry, *made)

    def drop(self, names: Sequence[str], *, whole: bool = False) -> None:
        for name in names:
            database, short = name.split(".", 1)
            self._wire.call(self._catalog.dropTable, self._ident(database, short), True, False)
            self._handles.pop(name, None)

    def _ident(self, database: str, name: str) -> Any:
        held = self._handles.get(f"{database}.{name}")
        if held is not None:
            return held[0]
        if self._template is not None:
            return self._template.identifier(database, name)
        return self._parser.parseTableIdentifier(f"{quote(database)}.{quote(name)}")

    def _entry(self, template: _Template, ident: Any, text: str, schema_json: str,
               holder: ViewOwner) -> tuple[Any, tuple[Any, Any]]:
        """A view's catalog entry: the template's, with this name, schema, text and holder (and
        the JVM handles of the text and the properties made for it)."""
        schema = self._schemas.get(schema_json)
        if schema is None:
            schema = self._schemas[schema_json] = template.parse_type(schema_json)
        properties = self._wire.call(template.properties.updated, HOLDER, holder.text())
        wrapped = self._wire.call(template.some, text)
        changed = {"identifier": ident, "schema": schema, "properties": properties, "viewText": wrapped,
                   "viewOriginalText": wrapped}
        return template.copy(changed), (wrapped, properties)

    def _make_template(self, database: str) -> _Template:
        self.spark.sql(f"CREATE OR REPLACE VIEW {quote(database)}.{TEMPLATE} AS SELECT 1 AS x")
        ident = self._ident(database, TEMPLATE)
        entry = self._catalog.getTableMetadata(ident)
        self._catalog.dropTable(ident, True, False)
        self._template = _Template(self._java, entry, self.mark, self._wire)
        return self._template


def _let_go(*handles: Any) -> None:
    """Free JVM handles now. py4j keeps each method called on a handle, and the method its handle:
    a cycle, which only Python's cyclic collector frees, a round trip each, at whatever call it
    happens to run in (after a detach of 1,000 views, about 1,000 of them landed in the next
    attach or refresh here)."""
    for handle in handles:
        handle._detach()


class _Template:
    """A throw-away view's catalog entry, read field by field (by name, so a Spark release that
    adds a field still works), its properties without the query's recorded column names (the
    view's schema gives them), and the JVM functions each copy needs, looked up once.

    This leans on Spark's internals (``SessionCatalog``, ``CatalogTable.copy``), stable across the
    4.x releases it was tried on; the tests put and read views through it on every run, so a Spark
    that changed them fails there, not in a user's session."""

    def __init__(self, java: Java, entry: Any, mark: str, wire: _Wire) -> None:
        classes = java.classes
        self.entry = entry
        self.fields = list(str(entry.productElementNames().toList().mkString("\u0001")).split("\u0001"))
        self.values = [entry.productElement(i) for i in range(len(self.fields))]
        multipart = self.fields.index("multipartIdentifier") if "multipartIdentifier" in self.fields else None
        if multipart is not None:  # Spark 4.1+: the view's own full name, which a copy must not keep
            self.values[multipart] = classes.scala.Option.empty()
        properties = entry.properties()
        for key in list(str(properties.keys().mkString("\u0001")).split("\u0001")):
            if key.startswith("view.query.out."):
                properties = properties.removed(key)
        self.properties = properties.updated(MARK, mark)
        self.parse_type = classes.org.apache.spark.sql.types.DataType.fromJson
        self.some = classes.scala.Option.apply  # Some(text), for a text never null
        self.wire = wire
        self._copy = entry.copy
        self._values = [self.wire.part(value) for value in self.values]  # encoded once: most never change
        self._name = entry.identifier()
        self._catalog_name = self._name.catalog()
        self._databases: dict[str, Any] = {}

    def copy(self, changed: dict[str, Any]) -> Any:
        """A copy of the template's entry with the ``changed`` fields (by name)."""
        parts = [self.wire.part(changed[field]) if field in changed else value
                 for field, value in zip(self.fields, self._values)]
        return self.wire.send(self._copy, parts)

    def identifier(self, database: str, name: str) -> Any:
        """``database.name`` as the catalog's key (a copy of the template's: one call, where the
        SQL parser takes three times as long)."""
        db = self._databases.get(database)
        if db is None:
            db = self._databases[database] = self.wire.call(self.some, database)
        return self.wire.call(self._name.copy, name, db, self._catalog_name)


class _Wire:
    """Calls into the JVM with py4j's own protocol, minus what py4j does for every argument of
    every call: try it against each of PySpark's converters (lists, dicts, dates) and check
    whether it is a Python object the JVM should call back, which it does for a JVM handle by
    asking it for an attribute named ``Java``: kept as a method, it leaves the handle in the cycle
    ``_let_go`` describes (about 1,000 of an attach's 6,300 round trips here). And the cost: copying a catalog entry passes 22 arguments, 220 us of CPU a copy through
    py4j's call here against 31 us with its arguments encoded once (``_Template.copy``). The
    arguments given here are JVM handles, strings, numbers and booleans, which no converter
    takes, so what is sent is what py4j sends. py4j's wire protocol has been stable since 0.10
    (PySpark 4 ships 0.10.9); the tests put and read views through this on every run, and count
    what an attach sends."""

    def __init__(self) -> None:
        from py4j import protocol
        from py4j.java_gateway import JavaObject, get_return_value
        self._protocol = protocol
        self._handle = JavaObject
        self._answer = get_return_value

    def part(self, value: Any) -> str:
        """``value`` as py4j sends an argument."""
        if isinstance(value, self._handle):
            return str(self._protocol.REFERENCE_TYPE) + str(value._get_object_id()) + "\n"
        return str(self._protocol.get_command_part(value))

    def call(self, member: Any, *args: Any) -> Any:
        """``member(*args)``, ``member`` a py4j method of a JVM object or class."""
        return self.send(member, [self.part(arg) for arg in args])

    def send(self, member: Any, parts: list[str]) -> Any:
        """``member`` called with arguments already encoded (``part``)."""
        command = self._protocol.CALL_COMMAND_NAME + member.command_header + "".join(parts) + \
            self._protocol.END_COMMAND_PART
        answer = member.gateway_client.send_command(command)
        return self._answer(answer, member.gateway_client, member.target_id, member.name)
