"""Tables on Spark, stored as Parquet at the locations the ledger assigns.

The ledger decides *where* a table's files live (a folder named by the
instance id); Spark only ever reads and writes the live instance's folder. A
dropped table has no live instance, so it cannot be read or written by name.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from ledger import Ledger, TableNotFound
from ledger.errors import InvalidArgument

WRITE_MODES = ("append", "overwrite")


def write_table(df: DataFrame, ledger: Ledger, name: str, mode: str = "append", *,
                create: bool = True) -> str:
    """Write ``df`` into the live instance of ``name``; returns the instance id.

    With ``create=True`` (the default) a name with no live table is created
    first; with ``create=False`` that is ``TableNotFound``.
    """
    if mode not in WRITE_MODES:
        raise InvalidArgument(f"write mode must be one of {', '.join(WRITE_MODES)}, not {mode!r}")
    try:
        table = ledger.table(name)
    except TableNotFound:
        if not create:
            raise
        table = ledger.create_table(name)
    df.write.mode(mode).parquet(_uri(table.location))
    return table.id


def read_table(spark: SparkSession, ledger: Ledger, name: str) -> DataFrame:
    """Read the live instance of ``name``."""
    table = ledger.table(name)
    try:
        return spark.read.parquet(_uri(table.location))
    except Exception as exc:  # Spark raises AnalysisException for an empty or missing folder
        if "PATH_NOT_FOUND" in str(exc) or "UNABLE_TO_INFER_SCHEMA" in str(exc):
            raise TableNotFound(f"{table.name} (id {table.id}) has no data yet at {table.location}") from None
        raise


def _uri(location: str) -> str:
    return location if "://" in location else "file://" + location
