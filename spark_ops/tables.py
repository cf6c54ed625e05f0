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
import re
import uuid
import weakref
from datetime import datetime, timedelta
from typing import Any, Iterator, Sequence

import attrs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from vacuum_work.where import NotUnderRoot, Root, is_uri

from ledger import Ledger, LedgerError, Pin, TableNotFound
from ledger.errors import Conflict, InvalidArgument, SchemaMismatch, TableDataMissing
from ledger import TableInstance, TableVersion, WriteView

from . import schemas
from .executor import fs, probe
from .executor.storage import StoreError, Unsafe
from .executor.stores import storage_for
from ledger import Heartbeat
from .session import SparkUnavailable, kind_of

WRITE_MODES = ("append", "overwrite")

DYNAMIC_ATTEMPTS = 5
"""How often a partition overwrite chooses its files again when other commits keep landing first."""

PARTITION_OVERWRITES = ("static", "dynamic")
"""``write_table(mode="overwrite", partitions=...)``: ``static`` replaces the whole table; ``dynamic``
only the partitions the DataFrame holds (Delta's ``replaceWhere``, Spark's dynamic partition overwrite)."""

WRITES_FOLDER = "_writes"
"""The folder of a table's location that holds its writes' folders (``_writes/<write id>/...``)."""

SPARK_ONLY_MODES = ("error", "errorifexists", "default", "ignore")
"""``DataFrameWriter`` modes that are not ``write_table``'s: a ledger table is a sequence of versions,
so a write never finds a path "already there" to refuse or skip."""


def write_table(df: DataFrame, ledger: Ledger, name: str, mode: str = "append", *,
                partition_by: Sequence[str] | None = None, create: bool = True,
                merge_schema: bool = False, partitions: str = "static") -> TableVersion:
    """Write ``df`` as the next version of the live table ``name``; returns that version.

    With ``create=True`` (the default) a name with no live table is created first; with
    ``create=False`` that is ``TableNotFound``. The version records ``df``'s schema. An append
    whose columns are not the table's is ``SchemaMismatch`` before anything is written, unless
    ``merge_schema=True``: the version then records the union, and reads of it give the old
    files' rows nulls in the new columns. A column whose type Spark's ``INSERT`` widens to the
    table's without loss (``int`` to ``bigint``, ``float`` to ``double``...) is written as the table's.

    The version records its partition columns: the table's layout (Delta's). An append (and a
    partition overwrite) writes by the table's, ``partition_by`` left out or the same; other ones are
    ``InvalidArgument`` before anything is written, so no version mixes layouts. An overwrite
    (``partitions="static"``) replaces the table, its layout with it: ``partition_by`` or none.

    Nothing is recorded for a write Spark would refuse at once (R24): a warehouse Spark has no
    file system for is ``SparkUnavailable``, a DataFrame Spark cannot plan or write as Parquet
    (two columns it takes for one, a partition column it lacks...) ``InvalidArgument``, each before
    the table is created or the write begun. A table this call created is dropped again if its
    write then fails in Spark, so a failed first write leaves no empty table behind.

    ``partitions="dynamic"`` (with ``mode="overwrite"``) replaces only the partitions ``df`` holds:
    the new version keeps the current one's files in every other partition (a ``replace``). The
    partition columns are the table's (``partition_by`` may repeat them), and so must its columns
    be (as for an append). An empty ``df`` makes no version (its write is aborted) and returns the
    current one. A table with no version yet has nothing to keep: its first write is a plain
    overwrite, partitioned by ``partition_by``.
    """
    _check_mode(mode)
    given = _partition_columns(partition_by)
    if not isinstance(merge_schema, bool):
        raise InvalidArgument(f"merge_schema must be True or False, got {merge_schema!r}")
    try:
        table: TableInstance | None = ledger.table(name)
    except TableNotFound:
        if not create:
            raise
        table = None
    current = None if table is None or table.current_version is None else ledger.version(name)
    dynamic = _dynamic(mode, partitions, merge_schema) and current is not None
    spark = df.sparkSession
    check_filesystem(spark, ledger.warehouse)  # bad input is refused before Spark is asked
    case_sensitive = (spark.conf.get("spark.sql.caseSensitive", "false") or "").lower() == "true"
    doing = Doing(name, "overwrite" if mode == "overwrite" and not dynamic else "append", dynamic)
    columns = _layout(current, given, doing, case_sensitive)
    schema = _writable_schema(df, name, columns, case_sensitive)
    recorded, merged_from = _schema_for(current, schema, doing, merge_schema, case_sensitive)
    df = _widened(df, recorded, schema, case_sensitive)
    if table is not None:
        return _write_version(df, ledger, table, columns, mode, recorded, merged_from, dynamic)
    table = ledger.create_table(name)
    try:
        return _write_version(df, ledger, table, columns, mode, recorded, merged_from)
    except BaseException:
        _drop_if_still_empty(ledger, table)
        raise


@attrs.frozen
class Doing:
    """What a write does to its table, for its checks and their messages: ``mode`` is ``append``
    (an append, or a partition overwrite: ``dynamic``, which keeps the table's other partitions and
    so its columns and layout) or ``overwrite`` (the whole table, its columns and layout with it)."""
    name: str
    mode: str
    dynamic: bool = False

    @property
    def keeps_the_table(self) -> bool:
        """Whether the write must fit the table's columns and layout (not: it replaces them)."""
        return self.mode == "append"

    def __str__(self) -> str:
        """As a refusal starts: ``cannot append to sales.orders``."""
        return f"overwrite partitions of {self.name}" if self.dynamic else f"{self.mode} to {self.name}"

    @property
    def to_replace(self) -> str:
        """What the caller may pass instead to replace the table's columns or layout."""
        return ("partitions='static' (the default) to overwrite the whole table" if self.dynamic else
                "mode='overwrite' to replace the table")


def _check_mode(mode: str) -> None:
    if mode in WRITE_MODES:
        return
    spark = (f" ({mode!r} is a Spark DataFrameWriter mode: a table here is a sequence of versions, so there is no "
             "path to find already there; check ledger.table(name) first to refuse or skip an existing table)"
             if isinstance(mode, str) and mode.lower() in SPARK_ONLY_MODES else "")
    raise InvalidArgument(f"write mode must be one of {', '.join(WRITE_MODES)}, not {mode!r}{spark}")


def _dynamic(mode: str, partitions: str, merge_schema: bool) -> bool:
    """Whether the write is a partition overwrite, its options checked before anything is recorded."""
    if partitions not in PARTITION_OVERWRITES:
        raise InvalidArgument(f"partitions must be one of {', '.join(PARTITION_OVERWRITES)}, not {partitions!r}")
    if partitions == "static":
        return False
    if mode != "overwrite":
        raise InvalidArgument(f"partitions='dynamic' replaces the partitions the DataFrame holds: it needs "
                              f"mode='overwrite', not {mode!r}; nothing was recorded")
    if merge_schema:
        raise InvalidArgument("partitions='dynamic' keeps the table's other partitions, so it keeps its columns: "
                              "merge_schema=True is for appends; nothing was recorded")
    return True


def table_layout(version: TableVersion) -> tuple[str, ...] | None:
    """The partition columns of a version: recorded with it or, for one whose writer did not say
    (adopted files, an earlier release), the ones all its files' folders name; None: not known (no
    files to tell, or files of several layouts)."""
    if version.partition_by is not None:
        return version.partition_by
    layouts = {partition_columns_of(f.path) for f in version.files}
    return layouts.pop() if len(layouts) == 1 else None


def _layout(current: TableVersion | None, given: list[str] | None, doing: Doing, case_sensitive: bool) -> list[str]:
    """The partition columns the write is written (and recorded) by, checked before anything is. A
    write that replaces the table (or makes its first version) takes ``partition_by``; one that keeps
    it takes the table's (Delta's rule), which ``partition_by`` may repeat (spelled as Spark matches
    names) and not change: a version of two layouts could not be overwritten by partition, nor named
    in Spark SQL."""
    if current is None or not doing.keeps_the_table:
        return given or []
    found = table_layout(current)
    if found is None:  # a version no writer said the layout of: as its writes were
        return _unknown_layout(current, given, doing)
    if given is not None and _keys(given, case_sensitive) != _keys(found, case_sensitive):
        refit = "give its columns, or none" if found else "leave partition_by out"
        raise InvalidArgument(f"cannot {doing}: partition_by={given!r} is not its layout, as it is "
                              f"{_layout_text(found)} (version {current.number}); {refit}, or write with "
                              f"{doing.to_replace} and its layout; nothing was recorded")
    if doing.dynamic:
        if not found:
            raise InvalidArgument(f"cannot {doing}: it is not partitioned (version {current.number}), and "
                                  f"partitions='dynamic' replaces partitions; write with {doing.to_replace} instead; "
                                  "nothing was recorded")
        # It replaces files by their partition folders: every current file must sit in the table's layout.
        layouts = {_keys(partition_columns_of(f.path), case_sensitive) for f in current.files}
        if layouts - {_keys(found, case_sensitive)}:
            raise InvalidArgument(f"cannot {doing}: version {current.number} has files of several partition layouts; "
                                  f"write with {doing.to_replace} instead; nothing was recorded")
    return list(found)


def _unknown_layout(current: TableVersion, given: list[str] | None, doing: Doing) -> list[str]:
    """The layout of a write that keeps a table whose current version does not say its own (written
    before layouts were recorded): an append is written as it asks, as then; a partition overwrite
    needs one layout to replace partitions of, given if no file tells."""
    if doing.dynamic and (current.file_count or not given):
        said = ("files of several partition layouts" if current.file_count else
                "no files to tell its partition columns by, and partition_by is not given")
        raise InvalidArgument(f"cannot {doing}: version {current.number} has {said}; "
                              f"{'give partition_by, or ' if not current.file_count else ''}write with "
                              f"{doing.to_replace} instead; nothing was recorded")
    return given or []


def _layout_text(columns: Sequence[str]) -> str:
    return f"partitioned by {', '.join(columns)}" if columns else "not partitioned"


def _keys(columns: Sequence[str], case_sensitive: bool) -> tuple[str, ...]:
    """Column names as Spark matches them (``spark.sql.caseSensitive``)."""
    return tuple(columns) if case_sensitive else tuple(c.lower() for c in columns)


def _writable_schema(df: DataFrame, name: str, columns: list[str], case_sensitive: bool) -> str:
    """``df``'s schema as the ledger records it, once Spark has planned ``df`` (a Connect
    DataFrame is analysed here, on the server, not when it was built) and it passes the checks
    Spark's Parquet writer makes before any task runs."""
    from pyspark.errors import AnalysisException

    try:
        schema = schemas.canonical(df.schema)
    except AnalysisException as exc:
        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(";")
        raise InvalidArgument(f"cannot write {name}: Spark cannot plan the DataFrame ({said}); "
                              "nothing was recorded") from exc
    schemas.check_writable(schema, columns, name, case_sensitive=case_sensitive)
    return schema


def _write_version(df: DataFrame, ledger: Ledger, table: TableInstance, columns: list[str], mode: str,
                   schema: str, merged_from: str | None, dynamic: bool = False) -> TableVersion:
    """Register a write, have Spark write ``df`` into its folder (its lease renewed meanwhile),
    and commit what Spark committed as the next version; any failure aborts the write.
    ``dynamic``: a partition overwrite, committed as a replace of the current files in the
    partitions the new ones have (an empty ``df`` aborts the write: no version)."""
    with new_write(ledger, table, [(df, columns)]) as (write, files):
        if not dynamic:
            return ledger.commit_write(write.id, files, mode=mode, schema=schema, partition_by=columns,
                                       merge_schema=merged_from is not None, merged_from=merged_from)
        if not files:
            ledger.abort_write(write.id)
            return ledger.version(table.name)
        touched = {partition_folder(path) for path, _ in files}
        for _attempt in range(DYNAMIC_ATTEMPTS):
            # The partitions' files are chosen from the current version, and the replace is refused if
            # another commit lands first (its files in those partitions would survive the overwrite):
            # then they are chosen again from the new current version.
            current = ledger.version(table.name)
            removes = [f.path for f in current.files if partition_folder(f.path) in touched]
            try:
                return ledger.commit_write(write.id, files, mode="replace", removes=removes, schema=schema,
                                           base=current.number, partition_by=columns)
            except Conflict:
                continue
        raise Conflict(f"commits to {table.name} kept landing while its partition overwrite chose the files to "
                       f"replace ({DYNAMIC_ATTEMPTS} times); nothing was recorded but the write, now aborted: write "
                       "again")


@contextlib.contextmanager
def new_write(ledger: Ledger, table: TableInstance,
              frames: Sequence[tuple[DataFrame, Sequence[str]]]) -> Iterator[tuple[WriteView, list[tuple[str, int]]]]:
    """A write registered on ``table`` with each frame written into its folder (partitioned by its
    columns; the lease renewed meanwhile), handed to the block with the files Spark committed
    there (``(path, size)``, relative to the table's location) for it to commit or abort. An
    exception, in Spark or in the block, aborts the write."""
    if table.current_version is None:
        adopt_unversioned_files(ledger, table)
    write = ledger.begin_write(table.name)
    try:
        renew = Heartbeat(f"lease-{write.id}", write.lease.total_seconds() / 3, lambda: ledger.renew_write(write.id))
        with renew:
            for i, (df, columns) in enumerate(frames):
                # "error", not "errorifexists": the one spelling of Spark's default mode that a Connect
                # client also takes. The folder is the write's own and new: nothing is there to refuse;
                # a second frame (files of another layout) is added beside the first's.
                writer = df.write.mode("error" if i == 0 else "append")
                if columns:
                    writer = writer.partitionBy(*columns)
                try:
                    writer.parquet(spark_uri(write.folder))
                except Exception as exc:  # the session's end in one line; the work's own failure as it is
                    aborted = "nothing was committed (the write is aborted)"
                    lost = kind_of(df.sparkSession).unavailable(exc, during=f"it wrote {table.name}", ended=aborted,
                                                                unreachable=aborted)
                    if lost is None:
                        raise
                    raise lost from None
        written = fs.committed_files(ledger.warehouse, write.folder)
        if frames and not kind_of(frames[0][0].sparkSession).shares_files():
            _check_written(frames[0][0].sparkSession, table.name, write, [entry.path for entry in written])
        yield write, [(f"{write.relative_folder}/{entry.path}", entry.size) for entry in written]
    except BaseException:
        with contextlib.suppress(LedgerError):
            ledger.abort_write(write.id)
        raise


def _check_written(spark: SparkSession, name: str, write: WriteView, listed: list[str]) -> None:
    """That what Spark wrote into the write's folder is what this process lists there, before the
    commit: Spark's own listing of the folder (a planning round trip, no job) against this
    process's. A server whose executors write where this process does not look (another machine's
    disk, another mount) made ``write_table`` commit a version of no files, silently; such a write
    is refused, and aborted by the caller, nothing committed. Spark's names are read into paths
    under the folder by ``vacuum_work.where`` (a name outside it is one this process does not see)."""
    try:
        seen = spark.read.format("text").load(glob_escape(spark_uri(write.folder))).inputFiles()
    except Exception as exc:  # PATH_NOT_FOUND: Spark sees no such folder (it wrote elsewhere)
        lost = kind_of(spark).unavailable(exc, ended="nothing was committed (the write is aborted)")
        if lost is not None:
            raise lost from None
        seen = []
    folder, here = Root.parse(write.folder), set(listed)
    wrote = {_in_folder(folder, uri, here) for uri in seen}
    unseen, extra = wrote - here, here - wrote
    if not unseen and not extra:
        return
    where = f"{name}: Spark wrote {len(wrote)} file(s) in {write.folder}"
    said = (f"{where}, and this process sees none of them" if unseen == wrote and wrote else
            f"{where}, and this process does not see {len(unseen)} of them" if unseen else
            f"{where}, and this process sees {len(extra)} more there that Spark does not")
    raise SparkUnavailable(f"{said}: Spark's executors do not write where this process and the ledger look (is the "
                           "warehouse the same place for both?); nothing was committed (the write is aborted)")


def _in_folder(folder: Root, name: str, listed: set[str]) -> str:
    """The path under ``folder`` that Spark's ``name`` of a file is (of its readings, the one this
    process listed), or the name itself when it is not under the folder."""
    try:
        paths = folder.keys(name)
    except NotUnderRoot:
        return name
    return next((path for path in paths if path in listed), paths[0])


def partition_folder(path: str) -> str:
    """The ``col=value/...`` folders of a file (relative to the table's location), after its write's
    folder (``_writes/<id>/``) or at the location's root for adopted files; "" when unpartitioned."""
    parts = path.split("/")[:-1]
    if len(parts) >= 2 and parts[0] == WRITES_FOLDER:
        parts = parts[2:]
    return "/".join(parts)


def partition_columns_of(path: str) -> tuple[str, ...]:
    """The partition columns a file's folders name (``day=1/hour=2/part-0`` -> ``("day", "hour")``)."""
    folder = partition_folder(path)
    return tuple(part.split("=", 1)[0] for part in folder.split("/")) if folder else ()


def _drop_if_still_empty(ledger: Ledger, table: TableInstance) -> None:
    """Drop again a table created for a write that failed: a created-then-aborted table is not a
    table anyone asked for, and a live one with no data fails every read. Left alone if, by now,
    it has a version or another writer has a write open on it (theirs may still commit). The
    instance stays in the history, dropped, and goes with the next vacuum."""
    with contextlib.suppress(LedgerError):
        now = ledger.table(table.name)
        if now.id == table.id and now.current_version is None and \
                not any(w.table_id == table.id for w in ledger.open_writes()):
            ledger.drop_table(table.name)


def _schema_for(current: TableVersion | None, schema: str, doing: Doing, merge: bool,
                case_sensitive: bool) -> tuple[str, str | None]:
    """The schema the new version records, and the table's it was merged from (None: no merge).
    Checked here, before Spark writes a file (and before anything is recorded), and again by the
    ledger when it commits. Columns are matched as Spark's reader will match them
    (``spark.sql.caseSensitive``), and a column's type may be one Spark's ``INSERT`` widens to the
    table's (``schemas.widens``). ``current`` None: a table with no version yet."""
    if current is None or current.schema is None or not doing.keeps_the_table:
        return schema, None
    table = current.schema
    if schemas.same_columns(table, schema, case_sensitive=case_sensitive):
        return table, None
    clash = schemas.type_clash(table, schema, case_sensitive=case_sensitive)
    if merge:
        return schemas.merge(table, schema, doing.name, case_sensitive=case_sensitive), table
    if clash is not None and _names(table, case_sensitive) == _names(schema, case_sensitive):
        raise SchemaMismatch(f"cannot {doing}: {clash}; {schemas.WIDENING}: cast it to the table's type, or write "
                             f"with {doing.to_replace} and its columns")
    if doing.dynamic:
        remedy = ("A partition overwrite keeps the table's other partitions, so it keeps its columns: select the "
                  "table's, or write with")
    elif clash is None:  # suggest a merge only where one would be accepted
        remedy = "Pass merge_schema=True to add the new columns (old rows read them as null), or"
    else:
        remedy = f"A merge would not do either ({clash}):"
    raise SchemaMismatch(
        f"cannot {doing}: its columns are not the table's. The table (version {current.number}) "
        f"has {schemas.simple(table)}; this DataFrame has {schemas.simple(schema)}. {remedy} {doing.to_replace} "
        "and its columns")


def _names(schema: str, case_sensitive: bool) -> set[str]:
    return set(_keys(schemas.struct(schema).fieldNames(), case_sensitive))


def _widened(df: DataFrame, recorded: str, schema: str, case_sensitive: bool) -> DataFrame:
    """``df`` with each column whose type widens to the recorded one's cast to it (as Spark's
    ``INSERT`` casts), so the files hold the types the version records."""
    found = schemas.casts(recorded, schema, case_sensitive=case_sensitive)
    if not found:
        return df
    return df.withColumns({column: F.col(quote(column)).cast(kind) for column, kind in found.items()})


def quote(name: str) -> str:
    """A name in backticks (a backtick doubled), as SQL and ``F.col`` take it literally (a dot too)."""
    return "`" + name.replace("`", "``") + "`"


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
        return read_unversioned(spark, table), None
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
        # The frames of ``file_frames`` read with the recorded schema (a partition value written as "007" reads
        # back as "007", a column a merge added as null in older files), in its order (Spark puts partitions last).
        result = union_all(file_frames(spark, table.location, [entry.path for entry in chosen.files], recorded))
        return (result if recorded is None else result.select(*recorded.fieldNames())), held
    except BaseException:
        if held is not None:
            held.release()
        raise


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    result = frames[0]
    for more in frames[1:]:
        result = result.unionByName(more)
    return result


def file_frames(spark: SparkSession, location: str, paths: list[str], schema: StructType | None) -> list[DataFrame]:
    """One DataFrame a partition root over ``paths`` (relative to ``location``; at least one), each
    reading its files straight (so ``_metadata.file_path`` is there until a union hides it). Spark
    infers partition columns (``col=value`` folders) under one root only, and each write's folder
    is a root of its own, so partitioned files are read write by write (with that folder as base
    path); unpartitioned ones are read at once."""
    plain: list[str] = []
    by_write: dict[str, list[str]] = {}
    for path in paths:
        parts = path.split("/")
        if any("=" in part for part in parts[:-1]):
            # _writes/<id> for a write's files; the location itself for files adopted from before
            # versioning (``day=1/part-0.parquet``: their partition root is the location).
            root = "/".join(parts[:2]) if parts[0] == WRITES_FOLDER and len(parts) > 2 else ""
            by_write.setdefault(root, []).append(path)
        else:
            plain.append(path)
    def reader() -> Any:  # a fresh one each time: a reader's options stick to it
        return spark.read if schema is None else spark.read.schema(schema)
    def uris(paths: list[str]) -> list[str]:
        return [glob_escape(spark_uri(f"{location}/{p}")) for p in paths]
    frames = [reader().parquet(*uris(plain))] if plain else []
    frames += [reader().option("basePath", spark_uri(f"{location}/{folder}".rstrip("/"))).parquet(*uris(files))
               for folder, files in sorted(by_write.items())]
    return frames


def read_unversioned(spark: SparkSession, table: TableInstance) -> DataFrame:
    """Parquet straight in the location, as tables were written before versioning. The schema is
    asked for at once: a Connect session plans a read only when asked, and an empty location
    would otherwise fail at the caller's first action, as a page of gRPC error."""
    try:
        df = spark.read.parquet(glob_escape(spark_uri(table.location)))
        df.schema
        return df
    except Exception as exc:  # Spark raises AnalysisException for an empty or missing folder
        if "PATH_NOT_FOUND" in str(exc) or "UNABLE_TO_INFER_SCHEMA" in str(exc):
            raise TableNotFound(f"{table.name} (id {table.id}) has no data yet at {table.location}") from None
        raise


def adopt_unversioned_files(ledger: Ledger, table: TableInstance) -> None:
    """A table written before versioning keeps its data: its files become version 1."""
    if not Root.parse(ledger.warehouse).on_disk or storage_for(ledger.warehouse).absent(table.location):
        return
    found = fs.committed_files(ledger.warehouse, table.location)
    if found:
        ledger.adopt_files(table.name, [(entry.path, entry.size) for entry in found])


def _partition_columns(partition_by: Sequence[str] | str | None) -> list[str] | None:
    """``partition_by`` as a list of names, None when not given (an append then takes the table's)."""
    if partition_by is None:
        return None
    if isinstance(partition_by, str):
        return [partition_by]
    columns = list(partition_by)
    if not all(isinstance(c, str) and c for c in columns):
        raise InvalidArgument(f"partition_by must be column names, got {partition_by!r}")
    return columns


def check_filesystem(spark: SparkSession, root: str) -> None:
    """That Spark can take work under the warehouse ``root`` now, each said in one line before
    anything is recorded: the session answers (``SessionKind.require_live``: a Spark Connect session whose
    server restarted under it, or that is down, is ``SparkUnavailable``); Spark has a file system
    for the root's scheme (``s3a://`` without the hadoop-aws connector is said here, not as a Java
    error after the table was created); and Spark's executors see the warehouse this process and
    the ledger use (``_check_seen``), or a write would commit a version of files nobody here sees.

    The file system's probe, one for both kinds of session: Spark is asked to plan a read of a path
    under the root that is not there. Planning it loads the scheme's file system (where Spark would
    refuse the write) and then finds nothing there (PATH_NOT_FOUND: the file system is there). A
    classic session could ask its JVM's Hadoop directly, which a Connect client cannot reach; the
    probe costs one planning round trip, so its answer is kept per session and scheme (a session
    gets no new file systems while it runs), and one code path serves both. The local disk needs none."""
    kind_of(spark).require_live()
    if not Root.parse(root).on_disk:
        _check_scheme(spark, root, root.partition("://")[0].lower())
    if not kind_of(spark).shares_files():
        _check_seen(spark, root)


def _check_scheme(spark: SparkSession, root: str, scheme: str) -> None:
    known = _FILE_SYSTEMS.setdefault(spark, set())
    if scheme in known:
        return
    from pyspark.errors import AnalysisException

    probe = f"{spark_uri(root).rstrip('/')}/_retention_ledger_probe_{uuid.uuid4().hex}"
    try:
        spark.read.format("text").load(probe).schema  # text: no schema to infer, only the path to find
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" not in str(exc):
            raise _no_file_system(root, scheme, exc) from None
    except Exception as exc:  # py4j's, or Connect's, wrapping of Hadoop's own error
        raise kind_of(spark).unavailable(exc) or _no_file_system(root, scheme, exc) from None
    known.add(scheme)


def _check_seen(spark: SparkSession, root: str) -> None:
    """That Spark's executors see the warehouse this process sees: a probe written under the root
    here is read back by Spark (one small job, once per session and root: ``SessionKind.id``, which a
    server restart changes). A folder at the root's path proves nothing: a Spark Connect server on
    another machine, or in another mount, sees an empty one there, writes into it, and the write
    committed a version of no files. Where this process cannot write under the root (a reader's
    credentials), nothing is probed: Spark's own errors say the rest, and a write is checked again
    against what Spark wrote (``new_write``)."""
    key = (kind_of(spark).id, root)
    if key in _SEEN:
        return
    said = "it reads nothing there"
    try:
        with probe.leave(root) as left:
            try:
                found = [row[0] for row in spark.read.text(glob_escape(spark_uri(left.uri))).collect()]
            except Exception as exc:  # PATH_NOT_FOUND where Spark's driver looked; a task's file-not-found
                lost = kind_of(spark).unavailable(exc)
                if lost is not None:
                    raise lost from None
                found, said = [], _java_cause(exc)
    except (OSError, StoreError, Unsafe):
        return
    if found != [left.token]:
        raise SparkUnavailable(f"Spark's executors do not see the warehouse {root} that this process and the ledger use "
                               f"(a file written there, {left.uri}, is not there for them: {said}): the warehouse must "
                               "be the same place for both, an object store both reach or a file system both mount at "
                               "the same path; nothing was recorded")
    _SEEN.add(key)


_SEEN: set[tuple[str, str]] = set()
"""(session, root) whose executors were shown to see the warehouse (``_check_seen``)."""


_FILE_SYSTEMS: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
"""The schemes each live session has shown it has a file system for."""


def _no_file_system(root: str, scheme: str, exc: BaseException) -> SparkUnavailable:
    said = _java_cause(exc)
    connector = (" (for S3: the hadoop-aws connector, e.g. --packages org.apache.hadoop:hadoop-aws:<Spark's Hadoop "
                 f"version>, and spark.hadoop.fs.{scheme}.impl=org.apache.hadoop.fs.s3a.S3AFileSystem)"
                 if scheme.startswith("s3") else "")
    return SparkUnavailable(f"Spark has no file system for the warehouse {root} ({said}): add the Hadoop connector "
                            f"for {scheme}://{connector}; nothing was recorded")


def _java_cause(exc: BaseException) -> str:
    """The innermost Java error's message, in one line: py4j's text starts "An error occurred while
    calling o45.load.", then ": java.lang.RuntimeException: java.lang.ClassNotFoundException: ...";
    Connect's "(java.lang.RuntimeException) java.lang.ClassNotFoundException: ..."."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    line = (text.strip().splitlines() or [""])[0].strip()
    line = re.sub(r"^\([\w.$]+\)\s*", "", line)
    while re.match(r"^[\w.$]+(Exception|Error): ", line):
        line = line.split(": ", 1)[1]
    return line or type(exc).__name__


_GLOB_SPECIAL = set("\\{}[]*?,")


def glob_escape(path: str) -> str:
    """A path as Spark's readers take it literally: they read every path as a Hadoop glob, so a
    warehouse folder named ``w[1]`` or ``w{a,b}`` would name nothing (or something else)."""
    return "".join("\\" + c if c in _GLOB_SPECIAL else c for c in path)


def spark_uri(location: str) -> str:
    """A location as Spark's file systems take it (a local path as a ``file://`` URI)."""
    return location if is_uri(location) else "file://" + location


__all__ = ["write_table", "read_table", "WRITE_MODES"]
