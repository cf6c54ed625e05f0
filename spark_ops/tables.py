"""Versioned tables on Spark: every write is registered, written into a folder of its own, and
committed as a new version; every read reads exactly the files of the version it asks for.

Writing (R11, R14): ``ledger.begin_write`` gives a write its own folder under the table's
location and a lease; Spark writes there (the lease renewed meanwhile); we list what Spark
committed (not ``_temporary``, ``_SUCCESS`` or ``.crc`` files) and ``ledger.commit_write``
makes the next version. ``overwrite`` deletes nothing: the old version's files stay until a
vacuum expires it. An exception in Spark aborts the write.

Reading (R11, R12): the ledger chooses the version (refusing an expired one before any file
is touched), we check that every file it names is there (a missing one is
``TableDataMissing``, never fewer rows), and Spark reads exactly those files, and partition columns come back across writes (each write's
folder is its own partition root, so partitioned writes are read one by one and unioned).

Pins (R21): a read pins the version it resolved (``read_table`` for a lease, ``reading`` for a
block), so no vacuum deletes its files under it.

Tables written before versioning (Parquet straight into the location) still read as they
did until their first versioned write, which adopts their files as version 1.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import Any, Iterator, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ledger import Ledger, LedgerError, Pin, TableNotFound
from ledger.errors import InvalidArgument, SchemaMismatch, TableDataMissing
from ledger import TableInstance, TableVersion

from . import schemas
from .executor import fs
from .executor.storage import storage_for
from .heartbeat import Heartbeat
from .session import SparkUnavailable

WRITE_MODES = ("append", "overwrite")


def write_table(df: DataFrame, ledger: Ledger, name: str, mode: str = "append", *,
                partition_by: Sequence[str] | None = None, create: bool = True,
                merge_schema: bool = False) -> TableVersion:
    """Write ``df`` as the next version of the live table ``name``; returns that version.

    With ``create=True`` (the default) a name with no live table is created first; with
    ``create=False`` that is ``TableNotFound``. The version records ``df``'s schema. An append
    whose columns are not the table's is ``SchemaMismatch`` before anything is written, unless
    ``merge_schema=True``: the version then records the union, and reads of it give the old
    files' rows nulls in the new columns.
    """
    if mode not in WRITE_MODES:
        raise InvalidArgument(f"write mode must be one of {', '.join(WRITE_MODES)}, not {mode!r}")
    columns = _partition_columns(partition_by)
    if not isinstance(merge_schema, bool):
        raise InvalidArgument(f"merge_schema must be True or False, got {merge_schema!r}")
    try:
        table: TableInstance | None = ledger.table(name)
    except TableNotFound:
        if not create:
            raise
        table = None
    check_filesystem(df.sparkSession, ledger.warehouse)  # bad input is refused before Spark is asked
    if table is None:
        table = ledger.create_table(name)
    if table.current_version is None:
        _adopt_unversioned_files(ledger, table)
    case_sensitive = (df.sparkSession.conf.get("spark.sql.caseSensitive", "false") or "").lower() == "true"
    schema, merged_from = _schema_for(ledger, name, schemas.canonical(df.schema), mode, merge_schema, case_sensitive)
    write = ledger.begin_write(name)
    try:
        renew = Heartbeat(f"lease-{write.id}", write.lease.total_seconds() / 3, lambda: ledger.renew_write(write.id))
        with renew:
            writer = df.write.mode("errorifexists")
            if columns:
                writer = writer.partitionBy(*columns)
            writer.parquet(spark_uri(write.folder))
        files = [(f"{write.relative_folder}/{entry.path}", entry.size)
                 for entry in fs.committed_files(ledger.warehouse, write.folder)]
    except BaseException:
        with contextlib.suppress(LedgerError):
            ledger.abort_write(write.id)
        raise
    return ledger.commit_write(write.id, files, mode=mode, schema=schema, merge_schema=merged_from is not None,
                               merged_from=merged_from)


def _schema_for(ledger: Ledger, name: str, schema: str, mode: str, merge: bool,
                case_sensitive: bool) -> tuple[str, str | None]:
    """The schema the new version records, and the table's it was merged from (None: no merge).
    Checked here, before Spark writes a file, and again by the ledger when it commits. Columns
    are matched as Spark's reader will match them (``spark.sql.caseSensitive``)."""
    table = ledger.table(name)
    if mode != "append" or table.current_version is None:
        return schema, None
    current = ledger.version(name).schema
    if current is None or schemas.same_columns(current, schema, case_sensitive=case_sensitive):
        return current or schema, None
    if merge:
        return schemas.merge(current, schema, name, case_sensitive=case_sensitive), current
    try:  # suggest a merge only where one would be accepted
        schemas.merge(current, schema, name, case_sensitive=case_sensitive)
        remedy = "Pass merge_schema=True to add the new columns (old rows read them as null), or"
    except SchemaMismatch as exc:
        remedy = f"A merge would not do either ({str(exc).split('; ', 1)[0].split(': ', 1)[1]}):"
    raise SchemaMismatch(
        f"cannot append to {name}: its columns are not the table's. The table (version {table.current_version}) "
        f"has {schemas.simple(current)}; this DataFrame has {schemas.simple(schema)}. {remedy} "
        "mode='overwrite' to replace the table's columns")


READ_PIN_LEASE = timedelta(hours=1)
"""The lease of the pin a read takes (R21) unless told otherwise. ``read_table``'s pin ends with it
(a DataFrame used later reads without one); ``reading`` renews it for as long as its block runs."""


def read_table(spark: SparkSession, ledger: Ledger, name: str, *, version: int | None = None,
               as_of: datetime | None = None, pin: bool = True, lease: Any = None) -> DataFrame:
    """Read the current version of ``name``, or version ``version``, or the version current at
    ``as_of``. An expired version is ``VersionExpired`` before any file is read.

    The version read is pinned (R21) for ``lease`` (default ``READ_PIN_LEASE``, an hour): no vacuum
    deletes its files while the pin holds, and the pin ends at its lease. ``reading`` holds the pin
    for a block instead, and releases it after; ``pin=False`` reads without one (a vacuum may then
    expire the version under a long job)."""
    return _read(spark, ledger, name, version, as_of, lease if pin else False)[0]


@contextlib.contextmanager
def reading(spark: SparkSession, ledger: Ledger, name: str, *, version: int | None = None,
            as_of: datetime | None = None, lease: Any = None) -> Iterator[DataFrame]:
    """``read_table`` with its pin held for the block: renewed every third of its lease while the
    block runs, released on leaving it (``with reading(spark, led, "sales.orders") as df: ...``)."""
    df, held = _read(spark, ledger, name, version, as_of, lease)
    if held is None:  # a table not yet versioned: nothing to pin
        yield df
        return
    try:
        with Heartbeat(f"pin-{held.id}", held.lease.total_seconds() / 3, lambda: held.renew()):
            yield df
    finally:
        held.release()


def _read(spark: SparkSession, ledger: Ledger, name: str, version: int | None, as_of: datetime | None,
          lease: Any) -> tuple[DataFrame, Pin | None]:
    """The DataFrame and the pin that holds it (None: not pinned). ``lease`` False: no pin."""
    table = ledger.table(name)
    check_filesystem(spark, ledger.warehouse)
    if table.current_version is None and version is None and as_of is None:
        return _read_unversioned(spark, table), None
    held = None if lease is False else \
        ledger.pin(name, version=version, as_of=as_of, lease=READ_PIN_LEASE if lease is None else lease)
    try:
        chosen = ledger.version(name, version=version, as_of=as_of) if held is None else \
            ledger.version(name, version=held.version)
        paths = [f"{table.location}/{entry.path}" for entry in chosen.files]
        missing = fs.first_missing(ledger.warehouse, paths)
        if missing is not None:
            raise TableDataMissing(
                f"{table.name} version {chosen.number} names {missing}, which is not there: the read is refused "
                "rather than returning fewer rows (was the file deleted outside the ledger?)")
        recorded = None if chosen.schema is None else schemas.struct(chosen.schema)
        if not paths:
            return spark.createDataFrame([], recorded or StructType([])), held
        return _read_files(spark, table.location, [entry.path for entry in chosen.files], recorded), held
    except BaseException:
        if held is not None:
            held.release()
        raise


def _read_files(spark: SparkSession, location: str, paths: list[str], schema: StructType | None) -> DataFrame:
    """Exactly these files, with the version's recorded schema (so a partition value written as
    ``"007"`` reads back as ``"007"``, not 7, and columns a merge added read as null in older
    files). Spark infers partition columns (``col=value`` folders) under one root only, and each
    write's folder is a root of its own, so partitioned files are read write by write (with that
    folder as base path) and unioned; unpartitioned ones are read at once."""
    plain: list[str] = []
    by_write: dict[str, list[str]] = {}
    for path in paths:
        parts = path.split("/")
        if any("=" in part for part in parts[:-1]):
            by_write.setdefault("/".join(parts[:2]), []).append(path)  # _writes/<id>
        else:
            plain.append(path)
    def reader() -> Any:  # a fresh one each time: a reader's options stick to it
        return spark.read if schema is None else spark.read.schema(schema)
    def uris(paths: list[str]) -> list[str]:
        return [glob_escape(spark_uri(f"{location}/{p}")) for p in paths]
    frames = [reader().parquet(*uris(plain))] if plain else []
    frames += [reader().option("basePath", spark_uri(f"{location}/{folder}")).parquet(*uris(files))
               for folder, files in sorted(by_write.items())]
    result = frames[0]
    for more in frames[1:]:
        result = result.unionByName(more)
    # Spark puts partition columns last; the table's order is the recorded one.
    return result if schema is None else result.select(*schema.fieldNames())


def _read_unversioned(spark: SparkSession, table: TableInstance) -> DataFrame:
    try:
        return spark.read.parquet(glob_escape(spark_uri(table.location)))
    except Exception as exc:  # Spark raises AnalysisException for an empty or missing folder
        if "PATH_NOT_FOUND" in str(exc) or "UNABLE_TO_INFER_SCHEMA" in str(exc):
            raise TableNotFound(f"{table.name} (id {table.id}) has no data yet at {table.location}") from None
        raise


def _adopt_unversioned_files(ledger: Ledger, table: TableInstance) -> None:
    """A table written before versioning keeps its data: its files become version 1."""
    if storage_for(ledger.warehouse).keyed or storage_for(ledger.warehouse).absent(table.location):
        return
    found = fs.committed_files(ledger.warehouse, table.location)
    if found:
        ledger.adopt_files(table.name, [(entry.path, entry.size) for entry in found])


def _partition_columns(partition_by: Sequence[str] | str | None) -> list[str]:
    if partition_by is None:
        return []
    if isinstance(partition_by, str):
        return [partition_by]
    columns = list(partition_by)
    if not all(isinstance(c, str) and c for c in columns):
        raise InvalidArgument(f"partition_by must be column names, got {partition_by!r}")
    return columns


def check_filesystem(spark: SparkSession, root: str) -> None:
    """That Spark can write and read under the warehouse ``root``: a scheme it has no Hadoop file
    system for (``s3://`` without the hadoop-aws connector) is said in one line before anything
    is recorded, not as a Py4J error after the table was created."""
    scheme = root.split("://", 1)[0].lower() if "://" in root else "file"
    jvm = getattr(spark, "_jvm", None)
    if scheme == "file" or jvm is None:  # Spark Connect: the server resolves paths itself
        return
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, spark._jsc.hadoopConfiguration())
    except Exception as exc:  # py4j's error, which holds the Java one
        java = getattr(exc, "java_exception", None)
        said = str(java.toString()) if java is not None else (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        cause = said.split(": ", 1)[-1] if "Exception: " in said else said
        connector = (" (for S3: the hadoop-aws connector, e.g. --packages org.apache.hadoop:hadoop-aws:<Spark's Hadoop "
                     f"version>, and spark.hadoop.fs.{scheme}.impl=org.apache.hadoop.fs.s3a.S3AFileSystem)"
                     if scheme.startswith("s3") else "")
        raise SparkUnavailable(f"Spark has no file system for the warehouse {root} ({cause}): add the Hadoop connector "
                               f"for {scheme}://{connector}; nothing was recorded") from None


_GLOB_SPECIAL = set("\\{}[]*?,")


def glob_escape(path: str) -> str:
    """A path as Spark's readers take it literally: they read every path as a Hadoop glob, so a
    warehouse folder named ``w[1]`` or ``w{a,b}`` would name nothing (or something else)."""
    return "".join("\\" + c if c in _GLOB_SPECIAL else c for c in path)


def spark_uri(location: str) -> str:
    """A location as Spark's file systems take it (a local path as a ``file://`` URI)."""
    return location if "://" in location else "file://" + location


__all__ = ["write_table", "read_table", "WRITE_MODES"]
