"""Erasure requests on Spark (R25): "erase user 42's rows from crm.users, and prove it", or a
privacy team's batch: "erase these 10,000 people from every table that holds them".

``erase`` does, in order:

1. Refuses what cannot be done before anything is recorded: a request the ledger could not record
   (``Ledger.check_erasure``: its reason, its predicate or keys), a predicate Spark cannot plan on
   a table's columns, or one whose rows are not said by its own text (not deterministic, a
   subquery, a Python UDF), a key column a table lacks in every version or of a type the keys do
   not compare with, a name with no table on this ledger, and with ``expire_now`` a pin on a
   version the request would expire but not erase.
2. Finds the files holding matching rows: every distinct file of each table's kept versions and of
   every dropped instance of its name not yet purged, scanned once each with the recorded columns
   of a version that names it (and, as NULL, the columns other versions have that it has not: a
   read of the table shows them so), filtered by the predicate or semi-joined with the keys, then
   ``_metadata.file_path`` per read (the hidden column does not survive a union), mapped back to the
   version's paths: one Spark job for every table of the request.
3. Rewrites only each current version's matching files without the matching rows (SQL ``DELETE``
   semantics: a row whose predicate is NULL, or whose key is, stays), partitioned as they were,
   into a new write committed as a ``replace`` of those files, on the condition that the version
   it read is still current: every other file stays as it is.
4. Records the request (``Ledger.request_erasure``) on the condition that every instance of the
   names is still at the version scanned: the rewritten files and every matching file of the older
   versions and the dropped instances are its erasure set, unreadable from then on, and a pin on
   a version holding one ends with it (R25 wins over R21). The chain keeps a commitment to the keys
   or predicate, not them; the status holds them until the request is done (``statement``).
5. With ``expire_now``, moves each live table's retention mark past every version holding one, and
   the watermark of each dropped instance whose current version holds one to its drop time, on
   record: the next vacuum deletes them.

A commit that lands anywhere between the scan and the request (another writer's append, a
partition overwrite, another erase) refuses step 3 or 4 with ``Conflict``: the erase then holds the
tables' commits off (a fence, recorded: writers wait for it), scans what was committed since (what
it scanned already is not read again), rewrites what holds the rows, and records the request, so no
matching row escapes it, however often the tables are written to.
"""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from typing import Any, Callable, Mapping, Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession, functions as F
from pyspark.sql.types import IntegralType, StringType, StructField, StructType

from ledger import (
    Conflict, ErasureStatus, InvalidArgument, Ledger, LedgerError, PinRefused, Scope, TableInstance, TableNotFound,
    TableVersion,
)
from ledger.errors import TableDataMissing
from vacuum_work.where import NotUnderRoot, Root

from . import schemas
from .executor import fs
from arrow_ops import CatalogUnavailable, publish
from ledger import Heartbeat
from .session import kind_of
from .tables import (
    adopt_unversioned_files, check_filesystem, file_frames, new_write, partition_columns_of, read_unversioned,
    union_all,
)
from .vacuum_job.progress import Progress, Watch, watching

KEY = "__retention_ledger_key"
"""The keys' column in the DataFrame they are joined with (named so no table's column is taken for it)."""

Files = dict[str, tuple[str, str, str, int, "str | None"]]
"""Files to scan: key (``<table id>/<path>``) -> (table name, table id, path, size, the recorded schema to read it with)."""


def erase(spark: SparkSession, ledger: Ledger, tables: str | Mapping[str, str | None], where: str | None = None, *,
          keys: Sequence[int] | Sequence[str] | DataFrame | None = None, reason: str, expire_now: bool = False,
          progress: Progress | None = None) -> ErasureStatus:
    """Erase rows and record the request (R25); returns its status (``Ledger.erasure``).

    Either ``tables`` is a name and ``where`` a Spark SQL predicate that says by itself which rows
    (``"user_id = 42"``: columns, literals and built-in functions, deterministic, no subquery, no
    Python UDF), or ``tables`` maps names to their key columns (``{"crm.users": "user_id",
    "sales.orders": "customer_id"}``) and ``keys`` names the values to erase (whole numbers or text,
    a list or a one-column DataFrame; up to a million, duplicates counted once, a NULL refused):
    one request across every table, one scan of each table's files, one status and one proof.
    ``reason`` is recorded (a ticket, an article of law); the keys or predicate are not: the chain
    keeps a commitment, the status the statement itself until the request is done. A request that
    matches nothing is recorded too, with an empty set. ``expire_now``: expire every version of a
    live table holding a matching row at once (refused with ``PinRefused`` if a pin holds an older
    version that holds none, which the mark would pass), and make a dropped instance whose current
    version holds one due to be purged, instead of at retention. ``progress``: called with (tasks
    done, tasks in all) while Spark scans and rewrites. Bad input is a typed one-line refusal and
    records nothing."""
    if not isinstance(expire_now, bool):
        raise InvalidArgument(f"expire_now must be True or False, got {expire_now!r}; nothing was recorded")
    rows = _rows(spark, ledger, tables, where, keys, reason)
    instances = {name: _instances(ledger, name) for name in rows.names}
    check_filesystem(spark, ledger.warehouse)
    for name, (live, _dropped) in instances.items():
        if live is not None and live.current_version is None:
            _versioned(spark, ledger, live, rows)
    scan = _Scan(spark, ledger, rows)
    request = _Request(ledger, rows, reason, expire_now, scan)
    with watching(spark, progress, 0) as watch, ledger.retrying():  # one bound on every retry inside
        status = request.attempt(watch)
        if status is None:  # a commit landed after the scan: hold commits off, scan it, record
            status = request.fenced(watch)
    if expire_now:
        _expire(ledger, status)
        status = ledger.erasure(status.request_id)
    _republish(ledger, status)
    return status


def _republish(ledger: Ledger, status: ErasureStatus) -> None:
    """R25 over R26: publish again, before the erase returns, every publication that shows an
    instance the request names (by instance, whatever name it bears now or bore when published), so
    that no reader of it (an Iceberg reader in another process) is shown a version the request made
    unreadable. The request is on record whatever happens here. Every publication is tried; one
    that cannot be reached, or that left such a table as it was, is an error naming each, and the
    next publication to it (``retention-ledger publish``) leaves the erased versions out all the same."""
    erased = {t for t in status.table_ids if t} | {v.rpartition("/")[0] for v in status.versions}
    shown: dict[tuple[str, str, str], set[str]] = {}
    for table_id in sorted(erased):
        for found in ledger.publications(table_id=table_id):
            shown.setdefault((found.catalog, found.catalog_name, found.metadata), set()).add(table_id)
    failed: list[str] = []
    for (catalog, catalog_name, metadata), table_ids in sorted(shown.items()):
        try:
            report = publish(ledger, catalog, catalog_name=catalog_name, metadata=metadata, table_ids=sorted(table_ids))
        except LedgerError as exc:
            failed.append(f"{catalog_name!r} at {catalog} ({type(exc).__name__}: {exc})")
            continue
        if report.left_out:
            failed.append(f"{catalog_name!r} at {catalog} (left {', '.join(sorted(report.left_out))} as it was: "
                          + "; ".join(report.left_out.values()) + ")")
    if failed:
        raise CatalogUnavailable(
            f"erasure request {status.request_id} is recorded, but {len(failed)} Iceberg publication(s) still show "
            f"the tables as they were: {'; '.join(failed)}. Publish each again (retention-ledger publish --iceberg "
            "...) once it can be: the erased versions are left out of every publication made from now on")


class _Request:
    """One erasure request's way to the record: an attempt with other writers going on (most find
    nothing committed between their scan and their request), then, if one did land, a second under
    a fence on every live table (``Ledger.fence_erasure``), where only the rewrite of what landed is
    waited for."""

    def __init__(self, ledger: Ledger, rows: _Rows, reason: str, expire_now: bool, scan: _Scan) -> None:
        self.ledger, self.rows, self.reason, self.expire_now, self.scan = ledger, rows, reason, expire_now, scan
        self.replaced: dict[str, tuple[str, int]] = {}  # name -> (its live instance's id, the version that rewrote it)

    def fenced(self, watch: Watch) -> ErasureStatus:
        with contextlib.ExitStack() as held:
            request_id = None
            for name in self.rows.names:
                live = _instances(self.ledger, name)[0]
                if live is not None:
                    fence = held.enter_context(self.ledger.fence_erasure(name, request_id=request_id))
                    request_id = fence.request_id
                    every = (fence.until - self.ledger.now()).total_seconds() / 3
                    held.enter_context(Heartbeat(f"fence-{request_id}-{name}", every, fence.renew))
            status = self.attempt(watch, request_id)
        if status is None:  # only a drop, an undrop or a purge of a name can have moved it
            raise Conflict(f"{', '.join(self.rows.names)} changed while the erasure was recorded under a fence "
                           "(dropped, undropped or purged meanwhile): the request was not recorded (any rewrite made "
                           "stays, without the rows); erase again")
        return status

    def attempt(self, watch: Watch, fence: str | None = None) -> ErasureStatus | None:
        """Scan what is not scanned yet, rewrite the current files holding matches, record the request
        on the condition that nothing was committed since the scan: its status, or None if a commit
        came first (the scan keeps what it read: the next attempt reads only what is new)."""
        ledger, scan = self.ledger, self.scan
        instances = {name: _instances(ledger, name) for name in self.rows.names}
        kept = {name: _all_kept(ledger, live, dropped) for name, (live, dropped) in instances.items()}
        scanned = {i.id: i.current_version or 0 for live, dropped in instances.values()
                   for i in [*([live] if live else []), *dropped]}
        scan.check(kept)
        watch.expect(scan.cost(kept))
        scan.files(kept)
        for name, (live, _dropped) in sorted(instances.items()):
            current = next((v for v in kept[name] if v.current and live is not None and v.table_id == live.id), None)
            if self.expire_now and live is not None:
                _check_pins(ledger, live, kept[name], scan.matched)
            holding = [] if current is None else [f.path for f in current.files
                                                  if scan.key(current, f.path) in scan.matched]
            if holding:
                assert live is not None and current is not None
                try:
                    version = _replace(scan.spark, ledger, live, current, self.rows, holding, fence)
                except Conflict:
                    return None  # another commit came first
                self.replaced[name], scanned[live.id] = (live.id, version.number), version.number
                scan.clean(version)
            if name in self.replaced and (live is None or self.replaced[name][0] != live.id):
                del self.replaced[name]  # the instance it rewrote is no longer the name's live one
        now_kept = [v for live, dropped in instances.values() for v in _all_kept(ledger, live, dropped)]
        erasure_set = scan.erasure_set(now_kept)
        try:
            return ledger.request_erasure(self.rows.tables, reason=self.reason, files=sorted(erasure_set.items()),
                                          scanned=scanned, replaced={n: v for n, (_, v) in self.replaced.items()},
                                          request_id=fence, **self.rows.statement())
        except Conflict:
            return None  # a commit landed since the scan


# --- what a request names -----------------------------------------------------------------------

class _Rows(ABC):
    """The rows a request names, as Spark finds them in a table's files: by a predicate, or by keys
    in each table's key column."""
    tables: dict[str, str | None]

    @property
    def names(self) -> list[str]:
        return sorted(self.tables)

    @abstractmethod
    def statement(self) -> dict[str, Any]:
        """What ``Ledger.request_erasure`` records a commitment to."""

    @abstractmethod
    def check(self, spark: SparkSession, name: str, columns: StructType, version: int) -> None:
        """Refuse, before anything is recorded, what Spark cannot find on these columns."""

    @abstractmethod
    def matching(self, frame: DataFrame, name: str) -> DataFrame:
        """Each file of ``frame`` holding a matching row: one column, its path as Spark spells it."""

    @abstractmethod
    def keeping(self, frame: DataFrame, name: str) -> DataFrame:
        """The rows of ``frame`` that stay (SQL ``DELETE``'s: one a NULL keeps from matching stays)."""

    @abstractmethod
    def failed(self, name: str, exc: BaseException) -> InvalidArgument:
        """Spark's refusal of the scan, once planned on the files (their columns not recorded)."""


class _Predicate(_Rows):
    def __init__(self, spark: SparkSession, name: str, where: object) -> None:
        self.tables = {name: None}
        self.where = str(where)
        try:
            self.column = F.expr(self.where)  # one parse for the scan and the rewrite alike
        except Exception as exc:  # classic parses here (ParseException); Connect when the plan is analysed
            raise _unplannable(self.where, exc) from None

    def statement(self) -> dict[str, Any]:
        return {"predicate": self.where}

    def check(self, spark: SparkSession, name: str, columns: StructType, version: int) -> None:
        try:
            spark.createDataFrame([], columns).where(self.column).schema  # Connect plans when asked
        except Exception as exc:
            raise _unplannable(self.where, exc, f" on {name} version {version}'s columns "
                               f"{schemas.simple(columns.json())}") from None
        _check_said(spark, self.where, self.column, columns)

    def matching(self, frame: DataFrame, name: str) -> DataFrame:
        return frame.where(self.column).select(F.col("_metadata.file_path").alias("f")).distinct()

    def keeping(self, frame: DataFrame, name: str) -> DataFrame:
        return frame.where(~F.coalesce(self.column, F.lit(False)))

    def failed(self, name: str, exc: BaseException) -> InvalidArgument:
        return _unplannable(self.where, exc, f" on the files of {name}")


class _Keys(_Rows):
    def __init__(self, spark: SparkSession, tables: dict[str, str | None], keys: list[Any]) -> None:
        self.tables = tables
        self.keys = sorted(set(keys))
        self.text = isinstance(self.keys[0], str)
        # Joined broadcast: a batch of keys is small beside the tables it is looked for in.
        self.frame = F.broadcast(spark.createDataFrame([(k,) for k in self.keys],
                                                       f"{KEY} {'string' if self.text else 'bigint'}"))

    def statement(self) -> dict[str, Any]:
        return {"keys": self.keys}

    def check(self, spark: SparkSession, name: str, columns: StructType, version: int) -> None:
        wanted = str(self.tables[name]).lower()
        field = next((f for f in columns.fields if f.name.lower() == wanted), None)
        if field is None:
            raise InvalidArgument(f"{name} has no column {self.tables[name]!r} in any version kept (its columns: "
                                  f"{', '.join(f.name for f in columns.fields)}); nothing was recorded")
        if not isinstance(field.dataType, StringType if self.text else IntegralType):
            raise InvalidArgument(f"{name}.{field.name} is {field.dataType.simpleString()}, which keys of "
                                  f"{'text' if self.text else 'whole numbers'} do not compare with: give keys of its "
                                  "kind, or erase it by a predicate; nothing was recorded")

    def matching(self, frame: DataFrame, name: str) -> DataFrame:
        found = frame.select(F.col("_metadata.file_path").alias("f"), F.col(str(self.tables[name])).alias("k"))
        return found.join(self.frame, F.col("k") == F.col(KEY), "left_semi").select("f").distinct()

    def keeping(self, frame: DataFrame, name: str) -> DataFrame:
        return frame.join(self.frame, F.col(str(self.tables[name])) == F.col(KEY), "left_anti")

    def failed(self, name: str, exc: BaseException) -> InvalidArgument:
        return InvalidArgument(f"Spark cannot look for the keys in {name}.{self.tables[name]} ({_said(exc)}); "
                               "nothing was recorded")


def _rows(spark: SparkSession, ledger: Ledger, tables: object, where: object, keys: object, reason: str) -> _Rows:
    """The request's rows, once the ledger has said it can record what they are (its checks first)."""
    if keys is None:
        if not isinstance(where, str) or not where.strip():
            raise InvalidArgument(f"where is a Spark SQL predicate such as \"user_id = 42\" (or give keys=), not "
                                  f"{where!r:.80}; nothing was recorded")
        if not isinstance(tables, str):
            raise InvalidArgument("an erasure by a predicate names one table (a name, not a mapping: erase each table, "
                                  "or erase by keys across several); nothing was recorded")
        ledger.check_erasure(tables, reason=reason, predicate=where)
        return _Predicate(spark, tables.lower(), where)
    if where is not None:
        raise InvalidArgument("an erasure names its rows by a predicate or by keys, not both; nothing was recorded")
    if isinstance(keys, DataFrame):
        if len(keys.columns) != 1:
            raise InvalidArgument(f"a DataFrame of keys has one column, the keys, not {keys.columns}; nothing was "
                                  "recorded")
        keys = [row[0] for row in keys.distinct().collect()]
    if isinstance(tables, str):
        raise InvalidArgument(f"an erasure by keys names each table's key column: {{{tables!r}: 'user_id'}}; nothing "
                              "was recorded")
    ledger.check_erasure(tables, reason=reason, keys=keys)  # type: ignore[arg-type]
    assert isinstance(tables, Mapping) and isinstance(keys, (list, tuple, set, frozenset))
    return _Keys(spark, {str(n).lower(): c for n, c in tables.items()}, list(keys))


# --- the predicate ------------------------------------------------------------------------------

def _unplannable(where: str, exc: BaseException, on: str = "") -> InvalidArgument:
    return InvalidArgument(f"Spark cannot use the predicate {where!r:.200}{on} ({_said(exc)}); nothing was recorded")


def _said(exc: BaseException) -> str:
    """Spark's first line: what is wrong, without the plan and the stack that follow. A JVM error
    PySpark did not convert (py4j's "An error occurred while calling ...") says it further down, a
    job's failure wrapping its tasks' ([STAGE_MATERIALIZATION_MULTIPLE_FAILURES]): the first of
    those that names its own error class."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    named = [line for line in lines if _ERROR_CLASS.search(line) and not line.startswith("at ")]
    inner = [line for line in named if not any(wrapper in line for wrapper in WRAPPERS)]
    said = (inner or named or lines or [type(exc).__name__])[0]
    return re.sub(r"^(\d+\.\s*)?(:\s*)?([\w.$]+(Exception|Error):\s*)?", "", said).rstrip(";")


_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)*\]")
WRAPPERS = ("[STAGE_MATERIALIZATION_MULTIPLE_FAILURES]", "[FAILED_EXECUTE_UDF]", "[TASK_WRITE_FAILED]")
"""Error classes Spark gives a job that failed for its tasks' errors: the task's says what is wrong."""


NOT_SAID_BY_ITS_TEXT = {
    "INVALID_NON_DETERMINISTIC_EXPRESSIONS": (
        "is not deterministic (rand(), uuid(), spark_partition_id(), monotonically_increasing_id(), a UDF marked "
        "nondeterministic): it would match other rows on every read, so the rewrite would keep some and the "
        "request could not say which went"),
    "UNSUPPORTED_SUBQUERY_EXPRESSION_CATEGORY": (
        "reads another relation (a subquery, perhaps over a session's temporary view): the log would record its "
        "text, not the rows it named; give the values themselves (user_id IN (3, 5, 8))"),
    "LAMBDA_FUNCTION_WITH_PYTHON_UDF": (
        "calls a Python UDF, whose code is not in the predicate's text: the log would not say whose rows went; "
        "give the values themselves, with built-in functions"),
}
"""Spark's refusals of the probes ``_check_said`` plans, by error class, and what each means here."""


def _check_said(spark: SparkSession, where: str, predicate: Column, columns: StructType) -> None:
    """That ``predicate`` names its rows by its own text, the one thing the log keeps of it (R25).
    Spark decides both, at planning, with no JVM handle: a join condition must be deterministic,
    and a lambda may hold no subquery and no Python UDF."""
    empty = spark.createDataFrame([], columns)
    probe = spark.createDataFrame([], "`__retention_ledger_probe` int")
    plans: tuple[Callable[[], object], ...] = (
        lambda: empty.select(F.exists(F.array(F.lit(1)), lambda _: predicate)).schema,
        lambda: empty.join(probe, predicate, "left_semi").schema)
    for plan in plans:
        try:
            plan()
        except Exception as exc:
            said = _said(exc)
            why = next((text for kind, text in NOT_SAID_BY_ITS_TEXT.items() if kind in said), None)
            raise InvalidArgument(f"the erasure predicate {where!r:.200} " + (why or f"cannot be checked ({said})") +
                                  "; nothing was recorded") from None


def _evaluated(rows: _Rows, spark: SparkSession, exc: Exception) -> LedgerError:
    """A Spark error met while the request's rows were looked for in the files, in one line:
    Spark's own (a cast that fails under ANSI, ``raise_error``) is the predicate's; a session that
    ended is Spark's."""
    names = ", ".join(rows.names)
    lost = kind_of(spark).unavailable(exc, during=f"the erasure scanned {names}")
    if lost is not None:
        return lost
    what = f"the predicate {rows.where!r:.200}" if isinstance(rows, _Predicate) else "the keys"
    return InvalidArgument(f"Spark failed evaluating {what} on the files of {names} ({_said(exc)}); nothing was "
                           "recorded")


# --- what a request covers ----------------------------------------------------------------------

def _instances(ledger: Ledger, name: str) -> tuple[TableInstance | None, list[TableInstance]]:
    """The live instance of ``name`` (None: none) and its dropped, unpurged ones: what a request covers.
    Only the restorable ones are scanned (R25): one behind its watermark is being purged already."""
    try:
        live: TableInstance | None = ledger.table(name)
    except TableNotFound:
        live = None
    dropped = ledger.dropped_tables(name=name)
    if live is None and not any(d.state == "dropped" for d in dropped):
        raise TableNotFound(f"cannot erase from {name}: this ledger has no live table and no dropped instance of "
                            "that name (is it another ledger's?); nothing was recorded")
    return live, dropped


def _versioned(spark: SparkSession, ledger: Ledger, live: TableInstance, rows: _Rows) -> None:
    """A live table written before versioning, its files made version 1 (as its first versioned
    write would), once the request's rows can be looked for in them: an erasure names versions' files."""
    try:
        legacy = read_unversioned(spark, live)
    except TableNotFound:
        return  # no data at all: nothing to adopt
    rows.check(spark, live.name, legacy.schema, 1)
    adopt_unversioned_files(ledger, live)
    if ledger.table(live.name).current_version is None:
        raise InvalidArgument(f"{live.name} holds files written before versioning that the ledger cannot adopt here "
                              "(an object store is not listed for them): write the table once through write_table, "
                              "then erase; nothing was recorded")


def _kept(ledger: Ledger, instance: TableInstance | None) -> list[TableVersion]:
    """The versions of an instance not expired, whose files may still be read (newest first)."""
    if instance is None:
        return []
    return [v for v in ledger.versions(table_id=instance.id) if not v.expired]


def _all_kept(ledger: Ledger, live: TableInstance | None, dropped: list[TableInstance]) -> list[TableVersion]:
    """What a request covers of one name: the live instance's kept versions, then its restorable
    dropped ones' (one behind its watermark is being purged already: its purge takes its files)."""
    return [*_kept(ledger, live), *(v for d in dropped if d.state == "dropped" for v in _kept(ledger, d))]


# --- the scan -----------------------------------------------------------------------------------

class _Scan:
    """What the erase has read so far: every file scanned once, whatever the round; the files
    holding a matching row (``matched``: key -> size); the schemas the rows were checked on."""

    def __init__(self, spark: SparkSession, ledger: Ledger, rows: _Rows) -> None:
        self.spark, self.ledger, self.rows = spark, ledger, rows
        self.matched: dict[str, int] = {}
        self.seen: set[str] = set()
        self.checked: set[tuple[str, str]] = set()
        self.widened: dict[str, dict[str | None, StructType | None]] = {}

    @staticmethod
    def key(version: TableVersion, path: str) -> str:
        return f"{version.table_id}/{path}"

    def check(self, kept: dict[str, list[TableVersion]]) -> None:
        """That Spark can look for the rows in the columns of every kept version of each table, as a
        read shows them (``_widened``): an unknown column, a type it cannot compare, a predicate that
        is not true or false, or not said by its text; a key column no version has."""
        if not any(v.files for versions in kept.values() for v in versions) and not self.seen:
            raise InvalidArgument(f"{', '.join(self.rows.names)} hold no data to erase from (no version of them, live "
                                  "or dropped, names a file), so Spark cannot check the request against their "
                                  "columns; nothing was recorded")
        for name, versions in kept.items():
            self.widened[name] = widened = _widened(versions)
            for text, struct in widened.items():
                if text is None or struct is None or (name, struct.json()) in self.checked:
                    continue
                self.rows.check(self.spark, name, struct, min(v.number for v in versions if v.schema == text))
                self.checked.add((name, struct.json()))

    def cost(self, kept: dict[str, list[TableVersion]]) -> int:
        """The files this round reads (what the progress counts its tasks against)."""
        return len({self.key(v, f.path) for versions in kept.values() for v in versions for f in v.files} - self.seen)

    def files(self, kept: dict[str, list[TableVersion]]) -> None:
        """Scan the files of ``kept`` not scanned yet, each once, in one Spark job for every table."""
        wanted: Files = {}
        for name, versions in kept.items():
            for v in sorted(versions, key=lambda v: (v.table_id, -v.number)):  # the oldest last: its schema wins
                for f in v.files:
                    key = self.key(v, f.path)
                    if key not in self.seen:
                        wanted[key] = (name, v.table_id, f.path, f.size, v.schema)
        if not wanted:
            return
        locations = {t: self.ledger.instance(t).location for t in {t for _, t, _, _, _ in wanted.values()}}
        self.matched.update(self._scan(locations, wanted))
        self.seen |= set(wanted)

    def clean(self, version: TableVersion) -> None:
        """The files a rewrite made were written without the rows: nothing to scan there."""
        self.seen |= {self.key(version, f.path) for f in version.files}

    def erasure_set(self, kept: list[TableVersion]) -> dict[str, int]:
        """The matching files still named by a kept version (a vacuum may have expired one since)."""
        named = {self.key(v, f.path) for v in kept for f in v.files}
        return {key: size for key, size in self.matched.items() if key in named}

    def _scan(self, locations: dict[str, str], files: Files) -> dict[str, int]:
        """The files holding a row the request names: key -> size. Per read, the rows, then the
        distinct ``_metadata.file_path``, the reads of every table unioned into one job."""
        missing = fs.first_missing(self.ledger.warehouse,
                                   [f"{locations[t]}/{p}" for _, t, p, _, _ in files.values()])
        if missing is not None:
            raise TableDataMissing(f"{missing} is named by a kept version but is not there: an erasure cannot tell "
                                   "whether it held matching rows (was it deleted outside the ledger?); nothing was "
                                   "recorded")
        groups: dict[tuple[str, str, str | None], list[str]] = {}
        for name, table_id, path, _size, schema in files.values():
            groups.setdefault((name, table_id, schema), []).append(path)
        hits: list[DataFrame] = []
        for (name, table_id, schema), paths in sorted(groups.items(), key=lambda g: (g[0][1], g[0][2] or "")):
            struct = self.widened.get(name, {}).get(schema)
            for frame in file_frames(self.spark, locations[table_id], sorted(paths), struct):
                hits.append(self.rows.matching(frame, name))
        try:
            found = union_all(hits).collect()
        except AnalysisException as exc:  # files whose version recorded no columns: planned only here
            raise self.rows.failed(", ".join(self.rows.names), exc) from None
        except LedgerError:
            raise
        except Exception as exc:  # PySpark's errors, and py4j's for a JVM error it did not convert
            raise _evaluated(self.rows, self.spark, exc) from None
        root = Root.parse(self.ledger.warehouse)
        return {key: files[key][3] for key in (_key_of(row["f"], root, files) for row in found)}


def _widened(kept: list[TableVersion]) -> dict[str | None, StructType | None]:
    """Each recorded schema of ``kept``, with the columns it lacks that another kept version has
    (the newest's type, nullable) added at its end: a file is read as a read of the table shows it,
    a column added later (``merge_schema``) NULL in files written before it, and a dropped instance's
    files likewise, so one predicate is evaluated on every file. Matched by name as Spark matches
    columns, regardless of case."""
    every: dict[str, StructField] = {}
    for v in kept:  # the live instance's first, each instance's newest first
        if v.schema is not None:
            for field in schemas.struct(v.schema).fields:
                every.setdefault(field.name.lower(), field)
    widened: dict[str | None, StructType | None] = {None: None}
    for text in {v.schema for v in kept if v.schema is not None}:
        own = schemas.struct(text)
        names = {f.name.lower() for f in own.fields}
        widened[text] = StructType([*own.fields, *(StructField(f.name, f.dataType, True)
                                                   for n, f in every.items() if n not in names)])
    return widened


def _key_of(file_path: str, root: Root, files: Files) -> str:
    """The key of a file Spark spelt ``file_path`` (``file:/x`` percent-encoded, ``file:///x``,
    ``s3a://b/k``...), read by the one function the ledger shares (``vacuum_work.where``): decoded
    once first (Spark encodes a space as ``%20``, and a ``%`` its writer put in a partition value
    as ``%25``), else as it is."""
    try:
        key = next((k for k in root.keys(file_path) if k in files), None)
    except NotUnderRoot:
        key = None
    if key is None:
        raise LedgerError(f"Spark read a file the erasure did not ask for ({file_path}): nothing was recorded")
    return key


# --- the rewrite and the expiry -------------------------------------------------------------------

def _check_pins(ledger: Ledger, live: TableInstance, kept: list[TableVersion], matched: dict[str, int]) -> None:
    """``expire_now`` moves the mark past every version of the live instance up to the newest one
    holding a matching file. A pin on one of those that holds a matching file ends with the request
    (R25 wins over R21); a pin on one that holds none is the reader's, and refuses ``expire_now``
    now, before anything is recorded (R21)."""
    versions = [v for v in kept if v.table_id == live.id]
    holding = {v.number for v in versions if any(f"{v.table_id}/{f.path}" in matched for f in v.files)}
    if not holding:
        return
    newest = max(holding)
    for pin in ledger.pins(table_id=live.id):
        if pin.live and pin.version is not None and pin.version <= newest and pin.version not in holding:
            raise PinRefused(f"cannot erase from {live.name} with expire_now: pin {pin.id} holds version {pin.version} "
                             f"until {pin.expires_at.isoformat()}, which holds no row to erase but is older than "
                             f"version {newest}, which does (R21); release the pin, or erase without expire_now (the "
                             "versions go at retention); nothing was recorded")


def _replace(spark: SparkSession, ledger: Ledger, live: TableInstance, current: TableVersion, rows: _Rows,
             paths: list[str], fence: str | None) -> TableVersion:
    """One version: ``current``'s files but ``paths``, plus those files' rows the request does not
    name (``_Rows.keeping``: SQL ``DELETE``'s), written partitioned as they were. Removing every file
    and keeping no row is an overwrite with no files, which says so on record (a replace may not empty
    a table). Either is committed only if ``current`` is still current: ``Conflict`` otherwise (the
    write aborted), for the caller to scan what came first. ``fence``: the request whose fence holds
    other commits off, under which this one is made."""
    struct = None if current.schema is None else schemas.struct(current.schema)
    layouts: dict[tuple[str, ...], list[str]] = {}
    for path in paths:
        layouts.setdefault(partition_columns_of(path), []).append(path)
    frames = []
    for columns, group in sorted(layouts.items()):
        kept = union_all([rows.keeping(f, live.name) for f in file_frames(spark, live.location, sorted(group), struct)])
        frames.append((kept if struct is None else kept.select(*struct.fieldNames()), columns))
    with new_write(ledger, live, frames) as (write, files):
        if files or len(paths) < current.file_count:
            return ledger.commit_write(write.id, files, mode="replace", removes=paths, schema=current.schema,
                                       base=current.number, fence=fence)
        return ledger.commit_write(write.id, [], mode="overwrite", schema=current.schema, base=current.number,
                                   fence=fence)


def _expire(ledger: Ledger, status: ErasureStatus) -> None:
    """Move each live table's retention mark to the newest of its versions the request made
    unreadable, so each one holding a file of the set is expired on record (R12, R13); and move the
    watermark of each dropped instance whose current version is erased to its drop time (R3, R6: its
    own drop is the evidence), so the next vacuum purges it: nothing of it is readable or undroppable
    any more. A dropped instance whose current version is clean keeps its undrop window; its erased
    versions go at retention. A pin taken since the check refuses the mark: the request stands, and
    the message says so."""
    erased: dict[str, list[int]] = {}
    for v in status.versions:
        table_id, _, number = v.rpartition("/")
        erased.setdefault(table_id, []).append(int(number))
    for table_id, numbers in sorted(erased.items()):
        inst = ledger.instance(table_id)
        newest = max(numbers)
        if inst.state == "live":
            at = next(v.committed_at for v in ledger.versions(table_id=table_id) if v.number == newest)
            try:
                ledger.advance_retention_mark(inst.name, at)
            except PinRefused as exc:
                raise PinRefused(f"erasure request {status.request_id} WAS recorded (its versions are unreadable), but "
                                 f"the retention mark of {inst.name} was not advanced: {exc}; they go at retention, or "
                                 "run advance_retention_mark once the pin is released") from exc
        elif inst.state == "dropped" and inst.current_version == newest and inst.dropped_at is not None:
            ledger.advance_watermark(inst.dropped_at, scope=Scope.table(table_id))


__all__ = ["erase"]
