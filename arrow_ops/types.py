"""A version's recorded schema in the types other engines speak.

The ledger records a version's columns as the writer gave them: for Spark, a StructType's JSON
(``{"type":"struct","fields":[{"name":..,"type":..,"nullable":..}]}``). This module reads that
text without Spark, into an Arrow schema (what a ``pyarrow`` dataset, Polars, pandas and DuckDB's
Arrow scan read) and into DuckDB's type names (what a partition column is cast to). A type with
no Arrow equivalent is refused by name, never guessed.

Spark's ``timestamp`` is an instant: Arrow's ``timestamp[us, tz=UTC]``, DuckDB's
``TIMESTAMPTZ``; ``timestamp_ntz`` is a wall-clock time, without a zone.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa

from ledger import InvalidArgument

_ARROW = {
    "boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "binary": pa.binary(),
    "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),
}
_DUCKDB = {
    "boolean": "BOOLEAN", "byte": "TINYINT", "short": "SMALLINT", "integer": "INTEGER", "long": "BIGINT",
    "float": "FLOAT", "double": "DOUBLE", "string": "VARCHAR", "binary": "BLOB", "date": "DATE",
    "timestamp": "TIMESTAMPTZ", "timestamp_ntz": "TIMESTAMP",
}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_TEXT = re.compile(r"(?:var)?char\(\d+\)")  # Spark keeps a CHAR/VARCHAR column as a string in its files


def arrow_schema(recorded: str) -> pa.Schema:
    """The Arrow schema of a recorded StructType's JSON, in its column order, every field nullable
    (as the ledger records them: Parquet written by Spark reads back nullable)."""
    return pa.schema([pa.field(f["name"], arrow_type(f["type"])) for f in json.loads(recorded)["fields"]])


def arrow_type(node: Any) -> pa.DataType:
    if isinstance(node, str):
        if node in _ARROW:
            return _ARROW[node]
        if _TEXT.fullmatch(node):
            return pa.string()
        decimal = _DECIMAL.fullmatch(node)
        if decimal:
            return pa.decimal128(int(decimal[1]), int(decimal[2]))
    elif node.get("type") == "array":
        return pa.list_(arrow_type(node["elementType"]))
    elif node.get("type") == "map":
        return pa.map_(arrow_type(node["keyType"]), arrow_type(node["valueType"]))
    elif node.get("type") == "struct":
        return pa.struct([pa.field(f["name"], arrow_type(f["type"])) for f in node["fields"]])
    raise InvalidArgument(f"a column of type {json.dumps(node)} has no Arrow type: read this table with Spark")


def duckdb_type(node: Any) -> str:
    """DuckDB's name for a recorded primitive type (a partition column's: Spark partitions only by
    those)."""
    if isinstance(node, str):
        if node in _DUCKDB:
            return _DUCKDB[node]
        if _TEXT.fullmatch(node):
            return "VARCHAR"
        decimal = _DECIMAL.fullmatch(node)
        if decimal:
            return f"DECIMAL({decimal[1]},{decimal[2]})"
    raise InvalidArgument(f"a partition column of type {json.dumps(node)} has no DuckDB type")


def columns(recorded: str) -> dict[str, Any]:
    """Each top-level column's recorded type, by name, in order."""
    return {f["name"]: f["type"] for f in json.loads(recorded)["fields"]}
