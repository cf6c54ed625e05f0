"""The SQL text of the view that gives a table version its name in Spark.

A view reads ``parquet.`<location>/{f1}```, a glob of exactly one of the version's files, for
each of them, joined by ``UNION ALL``: Spark's own Parquet reader reads them (never a folder
listing, which would pick up a straggler or another version's files), and a file that is gone
is Spark's ``PATH_NOT_FOUND`` (R11), where one glob of them all would skip it and read fewer rows.
(A version whose files do not all hold every column, after a merge, is read as one glob: Spark
merges their schemas only within one relation.) Each write has a folder of its own, and Spark infers
partition columns (``day=007`` folders) under one root only, so the view does not ask Spark to
infer them: it reads each from its file's path (``_metadata.file_path``), which Spark also uses
to skip the files a filter on it rules out before reading them.

Pure: text in, text out, so every escaping rule here is tested without Spark.
"""

from __future__ import annotations

import json
from typing import Any, Sequence
from urllib.parse import unquote

import attrs

from ledger.errors import InvalidArgument

from ..tables import glob_escape, quote, spark_uri

_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


@attrs.frozen
class VersionFiles:
    """A version's files (paths under ``location``) with its recorded schema, and the ways SQL can
    read them (``view_text``); ``table`` is its name, for messages."""
    location: str
    files: tuple[str, ...]
    schema: str
    merged: bool = False
    table: str = ""

    def text(self, *, typed: bool = False, source: str | None = None) -> str:
        return view_text(self.location, self.files, self.schema, merge_schema=self.merged, table=self.table,
                         typed=typed, source=source)

    def glob(self) -> str:
        """The one path that names exactly the files (``files_relation``)."""
        return files_glob(self.location, self.files, self.table)

    def columns(self) -> str | None:
        """The recorded columns the files hold (not the partition columns: those are in their
        folders' names), as a table's columns in SQL; None if there are none, or one's type SQL
        cannot write (a user-defined type)."""
        partitions = {name.lower() for _, name in partition_columns(self.files, self.table)} if self.files else set()
        fields = [f for f in json.loads(self.schema)["fields"] if f["name"].lower() not in partitions]
        if not fields or not all(_sql_writable(f["type"]) for f in fields):
            return None
        return ", ".join(f"{quote(f['name'])} {_sql_type(f['type'])}" for f in fields)


def view_text(location: str, files: Sequence[str], schema_json: str, *, merge_schema: bool = False,
              table: str = "", typed: bool = False, source: str | None = None) -> str:
    """The view of a version: its ``files`` (paths under ``location``) read with the recorded
    schema's columns in the recorded order. ``merge_schema``: the files do not all hold every
    column (a version after an append with ``merge_schema=True``), so Spark reads them all.
    ``typed``: each column cast to its recorded type in the text, for a view made with SQL,
    which takes its columns' types from its query (as ``read_table`` reads with the recorded
    schema); a view put in the catalog with the recorded schema gets them from there instead.
    ``source``: a table that reads exactly these files with the recorded columns
    (``VersionFiles.columns``), read in their place (no schema for Spark to infer)."""
    fields = json.loads(schema_json)["fields"]
    if not files:
        nothing = ", ".join(f"CAST(NULL AS {_sql_type(f['type'])}) AS {quote(f['name'])}" for f in fields)
        return f"SELECT {nothing} WHERE false"
    partitions = partition_columns(files, table)
    by_name = {name.lower(): depth for depth, name in partitions}
    columns = []
    for field in fields:
        depth = by_name.get(field["name"].lower())
        if depth is not None:
            columns.append(f"CAST({partition_value(depth)} AS {_sql_type(field['type'])}) AS {quote(field['name'])}")
        elif typed and _sql_writable(field["type"]):
            columns.append(f"CAST({quote(field['name'])} AS {_sql_type(field['type'])}) AS {quote(field['name'])}")
        else:
            columns.append(quote(field["name"]))
    if source is not None:
        return f"SELECT {', '.join(columns)} FROM {source}"
    if merge_schema:  # the files do not all hold every column: read together, as one relation
        return f"SELECT {', '.join(columns)} FROM {files_relation(location, files, table)} WITH ('mergeSchema' = 'true')"
    # One relation a file, joined: a glob of several files reads those that are there and skips the
    # rest (fewer rows, no error), where a glob of one that is gone is Spark's PATH_NOT_FOUND (R11).
    return " UNION ALL ".join(f"SELECT {', '.join(columns)} FROM {files_relation(location, [f], table)}" for f in files)


def files_relation(location: str, files: Sequence[str], table: str = "") -> str:
    """Exactly ``files`` under ``location``, as Spark SQL names Parquet files: a brace glob in which
    every character the glob would read as special is taken literally.

    SQL names one path per relation, so many files need a glob, and Hadoop's glob cannot walk a
    folder whose name holds ``:`` (it builds each folder's path from its name, and reads
    ``wh:1`` as the URI scheme ``wh``; no escape changes that). Such a location is
    ``InvalidArgument``: its tables are read with ``read_table``, which names the files one by one."""
    return "parquet." + quote(files_glob(location, files, table))


def files_glob(location: str, files: Sequence[str], table: str = "") -> str:
    """The brace glob of ``files_relation``, as a path."""
    check_globbable(location, table)
    glob = ",".join(glob_escape(f) for f in files)
    return glob_escape(spark_uri(location)) + "/{" + glob + "}"


def check_globbable(location: str, table: str = "") -> None:
    """That a glob can name files under ``location`` (``files_relation``): no ``:`` in its path."""
    if ":" in spark_uri(location).split("://", 1)[1]:
        raise InvalidArgument(
            f"cannot name {table or 'this table'} in Spark SQL: its folder {location} holds ':', which Hadoop's "
            "path globs read as a URI scheme; read it with read_table (or keep the warehouse in a folder "
            "whose path has no ':')")


def folder_relation(location: str) -> str:
    """Everything under ``location`` (a table written before versions, read as ``read_table`` does)."""
    return "parquet." + quote(glob_escape(spark_uri(location)))


def partition_columns(files: Sequence[str], table: str = "") -> list[tuple[int, str]]:
    """``(depth, name)`` of each partition column, outermost first: the ``name=value`` folders a
    file sits in, the one holding the file at depth 1. Every file of a version sits in the same ones (each write was partitioned
    by the version's columns), else the version cannot be named."""
    def of(path: str) -> list[tuple[int, str]]:
        folders = path.split("/")[:-1]
        found = []
        for depth, folder in enumerate(reversed(folders), start=1):
            if "=" not in folder:
                break
            found.append((depth, unquote(folder.split("=", 1)[0])))
        return found[::-1]
    first = of(files[0])
    for path in files[1:]:
        if of(path) != first:
            raise InvalidArgument(
                f"cannot name {table or 'this table'} in Spark: its version's files sit in different partition "
                f"folders ({files[0]} and {path}); read it with read_table")
    return first


def partition_value(depth: int) -> str:
    """A partition value from its file's path, as Spark wrote it: the path is a URI (so ``%20``
    for a space) of a folder name Spark escaped itself (``%3A`` for ``:``, ``%25`` for ``%``);
    both are undone (``+`` is literal in both, so it is kept from ``url_decode``). A null was
    written as ``__HIVE_DEFAULT_PARTITION__``.

    Evaluated on every row the scan reads (Spark prunes the files by it, but keeps it as a
    filter), so its cost is per row. Neither URI nor Spark's escaping writes ``=`` (``%3D``), so
    the folder's one ``=`` splits name from value before decoding, and a value with no ``%`` in it
    (``042``, the usual case) is its own decoding: it is taken as it is, with no array and no
    decoding. Over 4,000,000 rows: 3.4 s of CPU against 11 s for splitting the path into an array
    and decoding every value twice, which was most of what a filtered query by name spent above
    the same files read by path."""
    folder = f"substring_index(substring_index(_metadata.file_path, '/', {-depth - 1}), '/', 1)"
    raw = f"substring_index({folder}, '=', -1)"
    return (f"CASE WHEN instr({raw}, '%') = 0 THEN nullif({raw}, '{_NULL_PARTITION}') "
            f"ELSE {_url_decode(_url_decode(raw))} END")


def _url_decode(expr: str) -> str:
    return f"url_decode(replace({expr}, '+', '%2B'))"


def literal(text: str) -> str:
    """A SQL string literal (a quote or backslash in it escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sql_writable(spark_type: Any) -> bool:
    """Whether SQL can name the type (a user-defined type, such as an ML vector, it cannot: such a
    column keeps the type Spark reads)."""
    try:
        _sql_type(spark_type)
    except InvalidArgument:
        return False
    return True


def _sql_type(spark_type: Any) -> str:
    """A type as SQL writes it, from Spark's JSON form of it."""
    if isinstance(spark_type, str):
        return {"integer": "INT", "long": "BIGINT", "short": "SMALLINT", "byte": "TINYINT"}.get(spark_type,
                                                                                               spark_type.upper())
    kind = spark_type["type"]
    if kind == "array":
        return f"ARRAY<{_sql_type(spark_type['elementType'])}>"
    if kind == "map":
        return f"MAP<{_sql_type(spark_type['keyType'])}, {_sql_type(spark_type['valueType'])}>"
    if kind == "struct":
        inner = ", ".join(f"{quote(f['name'])}: {_sql_type(f['type'])}" for f in spark_type["fields"])
        return f"STRUCT<{inner}>"
    raise InvalidArgument(f"a recorded column type Spark SQL cannot write: {spark_type!r}")

