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

from ledger.errors import SchemaMismatch


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
