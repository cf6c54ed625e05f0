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

An append (a merge, a partition overwrite) whose column has a type Spark's own ``INSERT``
would widen to the table's without loss (``widens``: an ``int`` into a ``bigint``, a ``float``
into a ``double``...) is taken, and written as the table's type, so the table's schema and its
files' types stay one. Any other difference of type is refused, never guessed: a narrowing could
lose values, and Spark's ANSI store assignment, which takes narrowings too, fails them only at
run time, half written.

A merge (``merge_schema=True``) keeps the table's columns in their order and adds the new
ones after them.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.types import DataType, StructType

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


def _key(name: str, case_sensitive: bool) -> str:
    """A column's name as Spark resolves it: lowercased unless ``spark.sql.caseSensitive``."""
    return name if case_sensitive else name.lower()


def _columns(text: str, case_sensitive: bool) -> dict[str, tuple[str, Any]]:
    """Each top-level column by its ``_key``: its spelling and its type."""
    return {_key(field["name"], case_sensitive): (field["name"], field["type"]) for field in json.loads(text)["fields"]}


def same_columns(table: str, new: str, *, case_sensitive: bool = False) -> bool:
    """The same columns, in any order (files are read by name, and by Spark's rule for case: ``ID``
    is ``id`` unless ``spark.sql.caseSensitive``), each of the table's type or one ``widens`` to it."""
    ours, theirs = _columns(table, case_sensitive), _columns(new, case_sensitive)
    return ours.keys() == theirs.keys() and all(widens(theirs[k][1], ours[k][1]) for k in ours)


INTEGRAL = ("byte", "short", "integer", "long")
"""Spark's integer types, narrowest first (their names in a schema's JSON)."""
_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}
"""How many decimal digits each integer type may need (Spark's ``DecimalType.forType``)."""
_EXACT_IN = {"float": ("byte", "short"), "double": ("byte", "short", "integer", "float")}
"""The types a floating type holds every value of (a ``float`` has 24 bits of mantissa, a ``double``
53): ``int`` into ``float``, or ``bigint`` into ``double``, could change a value, so they are no
widening here, though Spark's ``Cast.canUpCast`` calls them one."""


def widens(new: Any, table: Any) -> bool:
    """A column of type ``new`` (a schema's JSON for a type) goes into one of type ``table`` as a
    Spark ``INSERT`` casts it, and loses nothing: the same type; a narrower integer into a wider
    one; an integer or a ``float`` into a floating type that holds all its values; an integer or a
    decimal into a decimal with as many digits before and after the point. Top-level and atomic
    only: a struct, an array or a map must match as it is."""
    if new == table:
        return True
    if not (isinstance(new, str) and isinstance(table, str)):
        return False
    if new in INTEGRAL and table in INTEGRAL:
        return INTEGRAL.index(new) < INTEGRAL.index(table)
    if table in _EXACT_IN:
        return new in _EXACT_IN[table]
    wide = _decimal(table)
    if wide is None:
        return False
    narrow = (_DIGITS[new], 0) if new in _DIGITS else _decimal(new)
    return narrow is not None and wide[1] >= narrow[1] and wide[0] - wide[1] >= narrow[0] - narrow[1]


def _decimal(node: str) -> tuple[int, int] | None:
    """``(precision, scale)`` of a ``decimal(p,s)`` type, else None."""
    if not (node.startswith("decimal(") and node.endswith(")")):
        return None
    precision, _, scale = node[len("decimal("):-1].partition(",")
    return int(precision), int(scale)


def casts(table: str, new: str, *, case_sensitive: bool = False) -> dict[str, DataType]:
    """The columns of ``new`` to cast to the table's type before writing (those ``widens`` takes),
    by the name ``new`` spells them: so the files hold the table's types."""
    ours = _columns(table, case_sensitive)
    return {spelled: data_type(ours[key][1]) for key, (spelled, kind) in _columns(new, case_sensitive).items()
            if key in ours and ours[key][1] != kind}


def type_clash(table: str, new: str, *, case_sensitive: bool = False) -> str | None:
    """The first column both have whose type in ``new`` does not widen to the table's, in words
    (``column id is bigint in the table and string in this write``), or None."""
    ours = _columns(table, case_sensitive)
    for key, (spelled, kind) in _columns(new, case_sensitive).items():
        if key in ours and not widens(kind, ours[key][1]):
            same = ours[key][0] if ours[key][0] == spelled else f"{ours[key][0]} (written {spelled} here)"
            return f"column {same} is {_type_text(ours[key][1])} in the table and {_type_text(kind)} in this write"
    return None


WIDENING = ("a write widens a column only as Spark's INSERT does without loss (a smaller integer to a larger, "
            "float to double, an integer to a double or a wide enough decimal)")


def merge(table: str, new: str, name: str, *, case_sensitive: bool = False) -> str:
    """The table's columns, then the new ones; a column both have keeps the table's type, which the
    new one's must widen to (``widens``). A column Spark would take for one of the table's (``ID``
    for ``id``, unless ``spark.sql.caseSensitive``) is that column, never a second one: a schema
    holding both could never be read."""
    clash = type_clash(table, new, case_sensitive=case_sensitive)
    if clash is not None:
        raise SchemaMismatch(f"cannot merge the schema of {name}: {clash}; a merge adds columns, it never changes a "
                             f"type, and {WIDENING} (cast the column, or overwrite the table)")
    fields = json.loads(table)["fields"]
    known = _columns(table, case_sensitive)
    for field in json.loads(new)["fields"]:
        if (key := _key(field["name"], case_sensitive)) not in known:
            fields.append(field)
            known[key] = (field["name"], field["type"])
    return json.dumps({"type": "struct", "fields": fields}, separators=(",", ":"))


def data_type(node: Any) -> DataType:
    """A type from a schema's JSON for it (``"long"``, ``{"type": "array", ...}``)."""
    return StructType.fromJson({"type": "struct", "fields": [{"name": "c", "type": node, "nullable": True,
                                                              "metadata": {}}]}).fields[0].dataType


def _type_text(node: Any) -> str:
    return data_type(node).simpleString()


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
        if (key := _key(field["name"], case_sensitive)) in spelled:
            _refuse(name, f"the DataFrame has two columns named {spelled[key]} ({spelled[key]}, {field['name']}), "
                          f"which Spark takes for one{'' if case_sensitive else ' (spark.sql.caseSensitive is off)'}:"
                          " rename one")
        spelled[key] = field["name"]
        _check_holdable(field["name"], field["type"], name)
    _check_partition_columns(_columns(text, case_sensitive), partition_by, name, case_sensitive)


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


def _check_partition_columns(columns: dict[str, tuple[str, Any]], partition_by: list[str], name: str,
                             case_sensitive: bool) -> None:
    """``columns``: the DataFrame's (``_columns``), no two of one ``_key``."""
    seen: set[str] = set()
    for column in partition_by:
        key = _key(column, case_sensitive)
        if key not in columns:
            _refuse(name, f"partition_by names {column}, which is not a column of the DataFrame "
                          f"({', '.join(spelled for spelled, _ in columns.values())})")
        if key in seen:
            _refuse(name, f"partition_by names {columns[key][0]} twice")
        seen.add(key)
        kind = columns[key][1]
        if isinstance(kind, dict) or kind in NOT_ATOMIC:
            _refuse(name, f"cannot partition by {column}: it is {_type_text(kind)}, and a partition column must be "
                          "a plain value (a number, a string, a date...), since it becomes a folder name")
    if partition_by and len(seen) == len(columns):
        _refuse(name, f"partition_by names every column ({', '.join(partition_by)}), and at least one column must "
                      "stay in the files")


def _refuse(name: str, why: str) -> None:
    raise InvalidArgument(f"cannot write {name}: {why}; nothing was recorded")
