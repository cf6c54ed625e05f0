"""The event log as a Spark DataFrame, for auditors who query with Spark SQL.

The log leaves the ledger the way any export does (``Ledger.export``, Parquet: the
public API, no SQLite from here). One row per event, with typed columns, and the payload fields
most events share flattened beside the payload (which stays, as stored, for everything else:
``get_json_object(payload, '$.x')``). A field an event has but not of the column's kind (an
erasure request's ``files`` is its set's digest, not a count) is null there, as a field it does
not have: an auditor's read works whatever events the log holds (R16's log is read, not judged).

Where Spark's executors see this process's files (a classic session on a ``local`` master) Spark
reads the export itself: without ``path`` it goes to a temporary folder and the DataFrame is
materialised (``localCheckpoint``) before the folder is deleted; with ``path`` the Parquet file
is kept there and the DataFrame reads it lazily. Anywhere else (a Spark Connect server, on
another machine or in another mount; a cluster) the server cannot read a file of this process's,
so the rows go to Spark through the session (the export read here, sent as a local relation);
with ``path`` the export is kept there all the same.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ledger import Ledger

from .session import kind_of

_FLATTENED: tuple[tuple[str, str], ...] = (
    ("table_id", "string"), ("name", "string"), ("run_id", "string"), ("write_id", "string"),
    ("scope", "string"), ("number", "bigint"), ("mode", "string"), ("files", "bigint"), ("bytes", "bigint"),
)
"""Payload fields several event types carry, as columns (null where one is not of that kind)."""


def _field(name: str) -> Column:
    return F.get_json_object(F.col("payload"), f"$.{name}")


def read_log(spark: SparkSession, ledger: Ledger, *, path: str | os.PathLike[str] | None = None) -> DataFrame:
    """Every event, oldest first: ``seq``, ``time`` (a UTC timestamp), ``time_micros`` (as the
    chain hashes it), ``actor``, ``stream``, ``version``, ``type``, ``schema_version``, the
    flattened fields (``table_id``, ``name``, ``database``, ``run_id``, ``write_id``, ``scope``,
    ``number``, ``mode``, ``files``, ``bytes``, ``to``, ``table_ids``), then ``payload`` and
    ``hash``.

    ``database`` is the event's own (a database drop) or the first part of its table name (an
    erasure request's ``name`` and ``table_id`` are its first table's; ``payload`` has them all);
    ``to`` is where a watermark or retention mark was moved to; ``table_ids`` lists the tables
    a database drop or a vacuum run concerned.
    """
    kind_of(spark).require_live()
    keep = path is not None
    folder = None if keep else Path(tempfile.mkdtemp(prefix="retention-ledger-log-"))
    target = Path(path) if path is not None else folder / "log.parquet"  # type: ignore[operator]
    local = kind_of(spark).shares_files()
    try:
        ledger.export(target, format="parquet")
        try:
            raw = spark.read.parquet(str(target.resolve())) if local else _sent(spark, target)
            named = {  # an erasure request names its tables in a list: its first table stands for it here
                "table_id": F.coalesce(_field("table_id"), F.nullif(_field("live[0]"), F.lit(""))),
                "name": F.coalesce(_field("name"), _field("tables[0]"))}
            flat = [named.get(name, _field(name).try_cast(kind)).alias(name) for name, kind in _FLATTENED]
            log = raw.select(
                "seq", F.col("time_utc").alias("time"), F.col("time").alias("time_micros"), "actor", "stream",
                "version", "type", "schema_version", *flat,
                F.coalesce(_field("database"), F.substring_index(named["name"], ".", 1)).alias("database"),
                F.timestamp_micros(_field("to").try_cast("bigint")).alias("to"),
                F.from_json(_field("table_ids"), "array<string>").alias("table_ids"),
                "payload", "hash",
            ).orderBy("seq")
            return log.localCheckpoint(eager=True) if local and not keep else log
        except Exception as exc:  # the session's end (or its server's) in one line
            lost = kind_of(spark).unavailable(exc)
            if lost is None:
                raise
            raise lost from None
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _sent(spark: SparkSession, export: Path) -> DataFrame:
    """The export's rows as a DataFrame whose data travels with it (a local relation): no file of
    this process's is read by the server."""
    import pyarrow.parquet as pq

    return spark.createDataFrame(pq.read_table(export))
