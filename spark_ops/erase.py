"""Erasure requests on Spark (R25): "erase user 42's rows from crm.users, and prove it".

``erase`` does, in order:

1. Refuses what cannot be done before anything is recorded: a reason or predicate the request
   could not record (``Ledger.check_erasure``), a predicate Spark cannot plan on the table's
   columns, or one whose rows are not said by its own text (not deterministic, a subquery, a
   Python UDF), a name with no table on this ledger, and with ``expire_now`` a pin on a version
   the request would expire but not erase.
2. Finds the files holding matching rows: every distinct file of the live table's kept versions
   and of every dropped instance of that name not yet purged, scanned once each with the recorded
   columns of a version that names it (and, as NULL, the columns other versions have that it has
   not: a read of the table shows them so), ``where(predicate)`` then ``_metadata.file_path`` per
   read (the hidden column does not survive a union), mapped back to the version's paths.
3. Rewrites only the current version's matching files without the matching rows (SQL ``DELETE``
   semantics: a row whose predicate is NULL stays), partitioned as they were, into a new write
   committed as a ``replace`` of those files, on the condition that the version it read is still
   current: every other file stays as it is.
4. Records the request (``Ledger.request_erasure``) on the condition that every instance of the
   name is still at the version scanned: the rewritten files and every matching file of the older
   versions and the dropped instances are its erasure set, unreadable from then on, and a pin on
   a version holding one ends with it (R25 wins over R21).
5. With ``expire_now``, moves the table's retention mark past every version holding one, on
   record: the next vacuum deletes them (a dropped instance still goes at its own retention).

A commit that lands anywhere between the scan and the request (another writer's append, a
partition overwrite, another erase) refuses step 3 or 4 with ``Conflict``: the erase then holds the
table's commits off (a fence, recorded: writers wait for it), scans what was committed since (what
it scanned already is not read again), rewrites what holds the rows, and records the request, so no
matching row escapes it, however often the table is written to.
"""

from __future__ import annotations

import re
import urllib.parse

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession, functions as F
from pyspark.sql.types import StructField, StructType

from ledger import (
    Conflict, ErasureStatus, InvalidArgument, Ledger, LedgerError, PinRefused, TableInstance, TableNotFound,
    TableVersion,
)
from ledger.errors import TableDataMissing

from . import schemas
from .executor import fs
from .session import SparkUnavailable, is_connect
from .tables import (
    adopt_unversioned_files, check_filesystem, file_frames, new_write, partition_columns_of, read_unversioned,
    union_all,
)
from .heartbeat import Heartbeat
from .vacuum_job.progress import Progress, Watch, watching

SAME_STORE = {"s3a": "s3", "s3n": "s3"}
"""Schemes Spark may give for the warehouse's (Hadoop's S3 connectors for ``s3://``)."""

Files = dict[str, tuple[str, str, int, "str | None"]]
"""Files to scan: key (``<table id>/<path>``) -> (table id, path, size, the recorded schema to read it with)."""


def erase(spark: SparkSession, ledger: Ledger, name: str, where: str, *, reason: str,
          expire_now: bool = False, progress: Progress | None = None) -> ErasureStatus:
    """Erase the rows ``where`` names from table ``name`` and record the request (R25); returns its
    status (``Ledger.erasure``). ``where`` is a Spark SQL predicate (``"user_id = 42"``) that says
    by itself which rows: columns, literals and built-in functions, deterministic, no subquery and
    no Python UDF. ``reason`` is recorded with it (a ticket, an article of law). A predicate that
    matches nothing is recorded too, with an empty set. ``expire_now``: expire every version of the
    live table holding a matching row at once (refused with ``PinRefused`` if a pin holds an older
    version that holds none, which the mark would pass), instead of at retention. ``progress``:
    called with (tasks done, tasks in all) while Spark scans and rewrites. Bad input is a typed
    one-line refusal and records nothing."""
    if not isinstance(expire_now, bool):
        raise InvalidArgument(f"expire_now must be True or False, got {expire_now!r}; nothing was recorded")
    ledger.check_erasure(name, predicate=where, reason=reason)
    predicate = _predicate(spark, where)
    live, _dropped = _instances(ledger, name)
    check_filesystem(spark, ledger.warehouse)
    if live is not None and live.current_version is None:
        live = _versioned(spark, ledger, live, where, predicate)
    scan = _Scan(spark, ledger, name, where, predicate)
    request = _Request(ledger, name, where, reason, expire_now, scan)
    with watching(spark, progress, 0) as watch:
        status = request.attempt(watch)
        if status is None:  # a commit landed after the scan: hold commits off, scan it, record
            status = request.fenced(watch)
    if expire_now and status.table_id is not None:
        _expire(ledger, name, status, status.table_id)
    return ledger.erasure(status.request_id) if expire_now else status


class _Request:
    """One erasure request's way to the record: an attempt with other writers going on (most find
    nothing committed between their scan and their request), then, if one did land, a second under
    a fence (``Ledger.fence_erasure``), where only the rewrite of what landed is waited for."""

    def __init__(self, ledger: Ledger, name: str, where: str, reason: str, expire_now: bool, scan: _Scan) -> None:
        self.ledger, self.name, self.where, self.reason, self.expire_now, self.scan = \
            ledger, name, where, reason, expire_now, scan
        self.replaced_by: tuple[str, int] | None = None  # (the live instance's id, the version that rewrote it)

    def fenced(self, watch: Watch) -> ErasureStatus:
        with self.ledger.fence_erasure(self.name) as fence:
            every = (fence.until - self.ledger.now()).total_seconds() / 3
            with Heartbeat(f"fence-{fence.request_id}", every, fence.renew):
                status = self.attempt(watch, fence.request_id)
        if status is None:  # only a drop, an undrop or a purge of the name can have moved it
            raise Conflict(f"{self.name} changed while its erasure was recorded under a fence (dropped, undropped or "
                           "purged meanwhile): the request was not recorded (any rewrite made stays, without the "
                           "rows); erase again")
        return status

    def attempt(self, watch: Watch, fence: str | None = None) -> ErasureStatus | None:
        """Scan what is not scanned yet, rewrite the current files holding matches, record the request
        on the condition that nothing was committed since the scan: its status, or None if a commit
        came first (the scan keeps what it read: the next attempt reads only what is new)."""
        ledger, scan = self.ledger, self.scan
        live, dropped = _instances(ledger, self.name)
        kept = [*_kept(ledger, live), *(v for d in dropped if d.state == "dropped" for v in _kept(ledger, d))]
        scanned = {i.id: i.current_version or 0 for i in [*([live] if live else []), *dropped]}
        scan.check(kept)
        watch.expect(scan.cost(kept))
        scan.files(kept)
        current = next((v for v in kept if v.current and live is not None and v.table_id == live.id), None)
        if self.expire_now and live is not None:
            _check_pins(ledger, live, kept, scan.matched)
        holding = [] if current is None else [f.path for f in current.files
                                              if scan.key(current, f.path) in scan.matched]
        if holding:
            assert live is not None and current is not None
            try:
                version = _replace(scan.spark, ledger, live, current, scan.predicate, holding, fence)
            except Conflict:
                return None  # another commit came first
            self.replaced_by, scanned[live.id] = (live.id, version.number), version.number
            scan.clean(version)
        if self.replaced_by is not None and (live is None or self.replaced_by[0] != live.id):
            self.replaced_by = None  # the instance it rewrote is no longer the name's live one
        erasure_set = scan.erasure_set(
            [*_kept(ledger, live), *(v for d in dropped if d.state == "dropped" for v in _kept(ledger, d))])
        try:
            return ledger.request_erasure(self.name, predicate=self.where, reason=self.reason,
                                          files=sorted(erasure_set.items()), scanned=scanned,
                                          replaced_by=None if self.replaced_by is None else self.replaced_by[1],
                                          request_id=fence)
        except Conflict:
            return None  # a commit landed since the scan


# --- the predicate ------------------------------------------------------------------------------

def _predicate(spark: SparkSession, where: str) -> Column:
    """``where`` as a Column Spark parsed (one parse for the scan and the rewrite alike)."""
    try:
        return F.expr(where)
    except Exception as exc:  # classic parses here (ParseException); Connect when the plan is analysed
        raise _unplannable(where, exc) from None


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
    for plan in (lambda: empty.select(F.exists(F.array(F.lit(1)), lambda _: predicate)).schema,
                 lambda: empty.join(probe, predicate, "left_semi").schema):
        try:
            plan()
        except Exception as exc:
            said = _said(exc)
            why = next((text for kind, text in NOT_SAID_BY_ITS_TEXT.items() if kind in said), None)
            raise InvalidArgument(f"the erasure predicate {where!r:.200} " + (why or f"cannot be checked ({said})") +
                                  "; nothing was recorded") from None


def _evaluated(where: str, name: str, spark: SparkSession, exc: Exception) -> LedgerError:
    """A Spark error met while the predicate ran over the files, in one line: Spark's own (a cast
    that fails under ANSI, ``raise_error``) is the predicate's; a session that ended is Spark's."""
    if is_connect(spark) and getattr(spark, "is_stopped", False):
        return SparkUnavailable(f"the Spark Connect session ended while the erasure scanned {name} ({_said(exc)}): "
                                "make a new one and erase again; nothing was recorded")
    return InvalidArgument(f"Spark failed evaluating the predicate {where!r:.200} on {name}'s files ({_said(exc)}); "
                           "nothing was recorded")


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


def _versioned(spark: SparkSession, ledger: Ledger, live: TableInstance, where: str,
               predicate: Column) -> TableInstance:
    """A live table written before versioning, its files made version 1 (as its first versioned
    write would), once the predicate plans on them: an erasure names versions' files."""
    try:
        legacy = read_unversioned(spark, live)
    except TableNotFound:
        return live  # no data at all: nothing to adopt
    try:
        legacy.where(predicate).schema
    except Exception as exc:
        raise _unplannable(where, exc, f" on {live.name}'s columns") from None
    _check_said(spark, where, predicate, legacy.schema)
    adopt_unversioned_files(ledger, live)
    adopted = ledger.table(live.name)
    if adopted.current_version is None:
        raise InvalidArgument(f"{live.name} holds files written before versioning that the ledger cannot adopt here "
                              "(an object store is not listed for them): write the table once through write_table, "
                              "then erase; nothing was recorded")
    return adopted


def _kept(ledger: Ledger, instance: TableInstance | None) -> list[TableVersion]:
    """The versions of an instance not expired, whose files may still be read (newest first)."""
    if instance is None:
        return []
    return [v for v in ledger.versions(table_id=instance.id) if not v.expired]


# --- the scan -----------------------------------------------------------------------------------

class _Scan:
    """What the erase has read so far: every file scanned once, whatever the round; the files
    holding a matching row (``matched``: key -> size); the schemas the predicate was checked on."""

    def __init__(self, spark: SparkSession, ledger: Ledger, name: str, where: str, predicate: Column) -> None:
        self.spark, self.ledger, self.name, self.where, self.predicate = spark, ledger, name, where, predicate
        self.matched: dict[str, int] = {}
        self.seen: set[str] = set()
        self.checked: set[tuple[str, str]] = set()
        self.widened: dict[str | None, StructType | None] = {}

    @staticmethod
    def key(version: TableVersion, path: str) -> str:
        return f"{version.table_id}/{path}"

    def check(self, kept: list[TableVersion]) -> None:
        """That Spark can plan the predicate on the columns of every kept version, as a read shows
        them (``_widened``), and that it names its rows by its own text: an unknown column, a type it
        cannot compare, a predicate that is not true or false, or not said by its text."""
        if not any(v.files for v in kept) and not self.seen:
            raise InvalidArgument(f"{self.name} holds no data to erase from (no version of it, live or dropped, names "
                                  "a file), so Spark cannot check the predicate against its columns; nothing was "
                                  "recorded")
        self.widened = _widened(kept)
        for text, struct in self.widened.items():
            if text is None or struct is None or (text, struct.json()) in self.checked:
                continue
            try:
                self.spark.createDataFrame([], struct).where(self.predicate).schema  # Connect plans when asked
            except Exception as exc:
                held = min(v.number for v in kept if v.schema == text)
                raise _unplannable(self.where, exc, f" on {self.name} version {held}'s columns "
                                   f"{schemas.simple(text)}") from None
            _check_said(self.spark, self.where, self.predicate, struct)
            self.checked.add((text, struct.json()))

    def cost(self, kept: list[TableVersion]) -> int:
        """The files this round reads (what the progress counts its tasks against)."""
        return len({self.key(v, f.path) for v in kept for f in v.files} - self.seen)

    def files(self, kept: list[TableVersion]) -> None:
        """Scan the files of ``kept`` not scanned yet, each once, in one Spark job."""
        wanted: Files = {}
        for v in sorted(kept, key=lambda v: (v.table_id, -v.number)):  # the oldest last: its schema wins
            for f in v.files:
                key = self.key(v, f.path)
                if key not in self.seen:
                    wanted[key] = (v.table_id, f.path, f.size, v.schema)
        if not wanted:
            return
        locations = {t: self.ledger.instance(t).location for t in {t for t, _, _, _ in wanted.values()}}
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
        """The files holding a row the predicate matches: key -> size. Per read, ``where`` then the
        distinct ``_metadata.file_path``, the reads unioned into one job."""
        missing = fs.first_missing(self.ledger.warehouse, [f"{locations[t]}/{p}" for t, p, _, _ in files.values()])
        if missing is not None:
            raise TableDataMissing(f"{missing} is named by a kept version but is not there: an erasure cannot tell "
                                   "whether it held matching rows (was it deleted outside the ledger?); nothing was "
                                   "recorded")
        groups: dict[tuple[str, str | None], list[str]] = {}
        for table_id, path, _size, schema in files.values():
            groups.setdefault((table_id, schema), []).append(path)
        hits: list[DataFrame] = []
        for (table_id, schema), paths in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1] or "")):
            struct = self.widened.get(schema)
            for frame in file_frames(self.spark, locations[table_id], sorted(paths), struct):
                hits.append(frame.where(self.predicate).select(F.col("_metadata.file_path").alias("f")).distinct())
        spelt = _spellings({f"{locations[t]}/{p}": key for key, (t, p, _, _) in files.items()})
        try:
            rows = union_all(hits).collect()
        except AnalysisException as exc:  # files whose version recorded no columns: planned only here
            raise InvalidArgument(f"Spark cannot use the predicate {self.where!r:.200} on the files of {self.name} "
                                  f"({_said(exc)}); nothing was recorded") from None
        except LedgerError:
            raise
        except Exception as exc:  # PySpark's errors, and py4j's for a JVM error it did not convert
            raise _evaluated(self.where, self.name, self.spark, exc) from None
        return {key: files[key][2] for key in (_key_of(row["f"], spelt) for row in rows)}


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


def _spellings(paths: dict[str, str]) -> dict[str, str]:
    """The lookup ``_key_of`` uses: each location as we gave it to Spark, normalised (a local path as
    it is; ``s3a://`` as ``s3://``), to its key."""
    return {_normal(location, decode=False): key for location, key in paths.items()}


def _key_of(file_path: str, spelt: dict[str, str]) -> str:
    """The key of a file Spark spelt ``file_path`` (``file:/x`` percent-encoded, ``file:///x``,
    ``s3a://b/k``...): decoded once first (Spark encodes a space as ``%20``, and a ``%`` its
    writer put in a partition value as ``%25``), else as it is."""
    for decode in (True, False):
        key = spelt.get(_normal(file_path, decode=decode))
        if key is not None:
            return key
    raise LedgerError(f"Spark read a file the erasure did not ask for ({file_path}): nothing was recorded")


def _normal(location: str, *, decode: bool) -> str:
    """A location as one text for the same file: ``/x`` for a local file (``file:/x``, ``file:///x``,
    ``file://localhost/x``), ``<scheme>://<bucket>/<key>`` for an object (S3's schemes as one)."""
    if location.startswith("file:"):
        rest = location[len("file:"):]
        if rest.startswith("//"):
            rest = "/" + rest[2:].partition("/")[2]
        return urllib.parse.unquote(rest) if decode else rest
    scheme, sep, rest = location.partition("://")
    if not sep:
        return location
    return f"{SAME_STORE.get(scheme.lower(), scheme.lower())}://{urllib.parse.unquote(rest) if decode else rest}"


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


def _replace(spark: SparkSession, ledger: Ledger, live: TableInstance, current: TableVersion, predicate: Column,
             paths: list[str], fence: str | None) -> TableVersion:
    """One version: ``current``'s files but ``paths``, plus those files' rows the predicate does not
    match (``NOT coalesce(predicate, false)``: SQL ``DELETE``), written partitioned as they were.
    Removing every file and keeping no row is an overwrite with no files, which says so on record (a
    replace may not empty a table). Either is committed only if ``current`` is still current:
    ``Conflict`` otherwise (the write aborted), for the caller to scan what came first. ``fence``: the
    request whose fence holds other commits off, under which this one is made."""
    struct = None if current.schema is None else schemas.struct(current.schema)
    layouts: dict[tuple[str, ...], list[str]] = {}
    for path in paths:
        layouts.setdefault(partition_columns_of(path), []).append(path)
    frames = []
    for columns, group in sorted(layouts.items()):
        kept = union_all([f.where(~F.coalesce(predicate, F.lit(False))) for f in
                          file_frames(spark, live.location, sorted(group), struct)])
        frames.append((kept if struct is None else kept.select(*struct.fieldNames()), columns))
    with new_write(ledger, live, frames) as (write, files):
        if files or len(paths) < current.file_count:
            return ledger.commit_write(write.id, files, mode="replace", removes=paths, schema=current.schema,
                                       base=current.number, fence=fence)
        return ledger.commit_write(write.id, [], mode="overwrite", schema=current.schema, base=current.number,
                                   fence=fence)


def _expire(ledger: Ledger, name: str, status: ErasureStatus, table_id: str) -> None:
    """Move the live table's retention mark to the newest version the request made unreadable, so
    each one holding a file of the set is expired on record (R12, R13). A pin taken since the check
    refuses it: the request stands, and the message says so."""
    numbers = [int(v.rpartition("/")[2]) for v in status.versions if v.rpartition("/")[0] == table_id]
    if not numbers:
        return
    newest = max(numbers)
    at = next(v.committed_at for v in ledger.versions(table_id=table_id) if v.number == newest)
    try:
        ledger.advance_retention_mark(name, at)
    except PinRefused as exc:
        raise PinRefused(f"erasure request {status.request_id} WAS recorded (its versions are unreadable), but the "
                         f"retention mark was not advanced: {exc}; they go at retention, or run erase's expiry "
                         f"again with advance_retention_mark once the pin is released") from exc


__all__ = ["erase"]
