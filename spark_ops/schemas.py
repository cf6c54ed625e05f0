"""A table's columns, as recorded with each version: how Spark's schemas are compared and merged.

The ledger records a version's schema as text it does not interpret (Spark's StructType JSON,
here) and refuses an append whose text is not the table's (R11: a read of the new version
would otherwise lose one side's columns). This module makes that text canonical, so that
what does not matter to a reader does not count as a difference:

* nullability: Parquet written by Spark reads back nullable whatever the DataFrame said, so
  every field is recorded nullable (``spark.range``'s ``id`` is not, a literal column is);
* field metadata (comments, Spark-internal markers);
* the order of the top-level columns, for appends: files are read by column name, so an
  append with the same columns in another order keeps the table's schema.

A merge (``merge_schema=True``) keeps the table's columns in their order and adds the new
ones after them; a column both have with different types is refused, never widened.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.types import StructType

from ledger.errors import InvalidArgument, SchemaMismatch


def canonical(schema: StructType) -> str:
    """The schema as the ledger records it: every field nullable, no metadata, compact JSON."""
    return json.dumps(_relaxed(schema.jsonValue()), separators=(",", ":"))


def _relaxed(node: Any) -> Any:
    if isinstance(node, dict):
        out = {key: _relaxed(value) for key, value in node.items()}
        for flag in ("nullable", "containsNull", "valueContainsNull"):
            if flag in out:
                out[flag] = True
        if "metadata" in out:
            out["metadata"] = {}
        return out
    if isinstance(node, list):
        return [_relaxed(item) for item in node]
    return node


def struct(text: str) -> StructType:
    return StructType.fromJson(json.loads(text))


def simple(text: str) -> str:
    """What a person reads: ``struct<id:bigint,label:string>``."""
    return struct(text).simpleString()


def _columns(text: str, case_sensitive: bool) -> dict[str, tuple[str, Any]]:
    """Each top-level column by the name Spark resolves it by (lowercased unless
    ``spark.sql.caseSensitive``): its spelling and its type."""
    return {(field["name"] if case_sensitive else field["name"].lower()): (field["name"], field["type"])
            for field in json.loads(text)["fields"]}


def same_columns(table: str, new: str, *, case_sensitive: bool = False) -> bool:
    """The same columns with the same types, in any order (files are read by name, and by Spark's
    rule for case: ``ID`` is ``id`` unless ``spark.sql.caseSensitive``)."""
    ours, theirs = _columns(table, case_sensitive), _columns(new, case_sensitive)
    return ours.keys() == theirs.keys() and all(ours[k][1] == theirs[k][1] for k in ours)


def merge(table: str, new: str, name: str, *, case_sensitive: bool = False) -> str:
    """The table's columns, then the new ones; a column both have must have one type. A column
    Spark would take for one of the table's (``ID`` for ``id``, unless ``spark.sql.caseSensitive``)
    is that column, never a second one: a schema holding both could never be read."""
    fields = json.loads(table)["fields"]
    known = _columns(table, case_sensitive)
    for field in json.loads(new)["fields"]:
        key = field["name"] if case_sensitive else field["name"].lower()
        if key not in known:
            fields.append(field)
            known[key] = (field["name"], field["type"])
        elif known[key][1] != field["type"]:
            spelled, was_type = known[key]
            was, now = (_type_text(t) for t in (was_type, field["type"]))
            same = spelled if spelled == field["name"] else f"{spelled} (written {field['name']} here)"
            raise SchemaMismatch(f"cannot merge the schema of {name}: column {same} is {was} in the table and "
                                 f"{now} in this write; a merge adds columns, it never changes a type (cast the "
                                 "column, or overwrite the table)")
    return json.dumps({"type": "struct", "fields": fields}, separators=(",", ":"))


def _type_text(node: Any) -> str:
    return StructType.fromJson({"type": "struct", "fields": [{"name": "c", "type": node, "nullable": True,
                                                              "metadata": {}}]}).fields[0].dataType.simpleString()


# --- what Spark's Parquet writer refuses at once ------------------------------------------------
#
# Spark checks these when a write is planned, before any task runs: a write that breaks one fails
# at once. ``write_table`` asks them first, so that such a write records nothing (R24): not a
# created table, not a begun write and its abort. Each is Spark's own rule (4.x:
# ``SchemaUtils.checkColumnNameDuplication``, ``PartitioningUtils.validatePartitionColumn``,
# ``DataSource.disallowWritingIntervals``, ``DataSourceUtils.verifySchema``), said in words.

NOT_ATOMIC = ("void", "interval", "variant")
"""Type names Spark does not take as a partition column's (not an ``AtomicType``); structs,
arrays, maps and user-defined types, which are not names but objects, neither."""


def check_writable(text: str, partition_by: list[str], name: str, *, case_sensitive: bool = False) -> None:
    """Refuse, with ``InvalidArgument``, a DataFrame schema (``canonical`` text) that Spark's
    Parquet writer would refuse at once with ``partition_by`` as its partition columns."""
    fields = json.loads(text)["fields"]
    if not fields:
        _refuse(name, "the DataFrame has no columns, and Parquet files need at least one")
    spelled: dict[str, str] = {}
    for field in fields:
        key = field["name"] if case_sensitive else field["name"].lower()
        if key in spelled:
            _refuse(name, f"the DataFrame has two columns named {spelled[key]} ({spelled[key]}, {field['name']}), "
                          f"which Spark takes for one{'' if case_sensitive else ' (spark.sql.caseSensitive is off)'}:"
                          " rename one")
        spelled[key] = field["name"]
        _check_holdable(field["name"], field["type"], name)
    _check_partition_columns(fields, spelled, partition_by, name, case_sensitive)


def _check_holdable(column: str, node: Any, name: str) -> None:
    """A column's type, nested types included, is one a Parquet file can hold."""
    if node == "interval":
        _refuse(name, f"column {column} is interval, which Parquet cannot hold (a calendar interval: use "
                      "make_dt_interval or make_ym_interval, or cast it to a string)")
    if not isinstance(node, dict):
        return
    if node.get("type") == "struct":
        if not node["fields"]:
            _refuse(name, f"column {column} holds a struct with no fields, which Parquet cannot hold")
        for field in node["fields"]:
            _check_holdable(column, field["type"], name)
    for inner in ("elementType", "keyType", "valueType", "sqlType"):
        if inner in node:
            _check_holdable(column, node[inner], name)


def _check_partition_columns(fields: list[dict[str, Any]], spelled: dict[str, str], partition_by: list[str],
                             name: str, case_sensitive: bool) -> None:
    types = {(f["name"] if case_sensitive else f["name"].lower()): f["type"] for f in fields}
    seen: set[str] = set()
    for column in partition_by:
        key = column if case_sensitive else column.lower()
        if key not in types:
            _refuse(name, f"partition_by names {column}, which is not a column of the DataFrame "
                          f"({', '.join(spelled.values())})")
        if key in seen:
            _refuse(name, f"partition_by names {spelled[key]} twice")
        seen.add(key)
        kind = types[key]
        if isinstance(kind, dict) or kind in NOT_ATOMIC:
            _refuse(name, f"cannot partition by {column}: it is {_type_text(kind)}, and a partition column must be "
                          "a plain value (a number, a string, a date...), since it becomes a folder name")
    if partition_by and len(seen) == len(fields):
        _refuse(name, f"partition_by names every column ({', '.join(partition_by)}), and at least one column must "
                      "stay in the files")


def _refuse(name: str, why: str) -> None:
    raise InvalidArgument(f"cannot write {name}: {why}; nothing was recorded")
