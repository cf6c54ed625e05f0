"""Erasure requests on Spark (R25): "erase user 42's rows from crm.users, and prove it".

``erase`` does, in order:

1. Refuses what cannot be done before anything is recorded: a reason that is not text, a
   predicate Spark cannot plan on the table's columns, a name with no table on this ledger, and
   with ``expire_now`` a pin on a version the request would expire.
2. Finds the files holding matching rows: every distinct file of the live table's kept versions
   and of every dropped instance of that name not yet purged, scanned once each with the recorded
   columns of a version that names it, ``where(predicate)`` then ``_metadata.file_path`` per read
   (the hidden column does not survive a union), mapped back to the version's paths.
3. Rewrites only the current version's matching files without the matching rows (SQL ``DELETE``
   semantics: a row whose predicate is NULL stays), partitioned as they were, into a new write
   committed as a ``replace`` of those files: every other file stays as it is. A commit that
   lands meanwhile is scanned too, and the rewrite goes again, so no matching row escapes.
4. Records the request (``Ledger.request_erasure``): the rewritten files and every matching file
   of the older versions and the dropped instances are its erasure set, unreadable from then on.
5. With ``expire_now``, moves the table's retention mark past every version holding one, on
   record: the next vacuum deletes them (a dropped instance still goes at its own retention).
"""

from __future__ import annotations

import urllib.parse
from typing import Iterable

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession, functions as F

from ledger import (
    ErasureStatus, InvalidArgument, Ledger, LedgerError, PinRefused, TableInstance, TableNotFound, TableVersion,
)
from ledger.errors import TableDataMissing

from . import schemas
from .executor import fs
from .tables import (
    adopt_unversioned_files, check_filesystem, file_frames, new_write, partition_columns_of, read_unversioned,
    union_all,
)

REWRITE_ROUNDS = 5
"""How often the rewrite goes again when commits keep landing between a scan and its replace."""

SAME_STORE = {"s3a": "s3", "s3n": "s3"}
"""Schemes Spark may give for the warehouse's (Hadoop's S3 connectors for ``s3://``)."""


def erase(spark: SparkSession, ledger: Ledger, name: str, where: str, *, reason: str,
          expire_now: bool = False) -> ErasureStatus:
    """Erase the rows ``where`` names from table ``name`` and record the request (R25); returns its
    status (``Ledger.erasure``). ``where`` is a Spark SQL predicate (``"user_id = 42"``); ``reason``
    is recorded with it (a ticket, an article of law). A predicate that matches nothing is recorded
    too, with an empty set. ``expire_now``: expire every version of the live table holding a
    matching row at once (refused with ``PinRefused`` if a pin holds one), instead of at retention.
    Bad input is a typed one-line refusal and records nothing."""
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgument(f"an erasure's reason is text (a ticket, an article of law), not {reason!r:.80}; "
                              "nothing was recorded")
    if not isinstance(expire_now, bool):
        raise InvalidArgument(f"expire_now must be True or False, got {expire_now!r}; nothing was recorded")
    predicate = _predicate(spark, where)
    live, dropped = _instances(ledger, name)
    check_filesystem(spark, ledger.warehouse)
    if live is not None and live.current_version is None:
        live = _versioned(spark, ledger, live, where, predicate)
    kept = [*_kept(ledger, live), *(v for d in dropped for v in _kept(ledger, d))]
    if not any(v.files for v in kept):
        raise InvalidArgument(f"{name} holds no data to erase from (no version of it, live or dropped, names a file), "
                              "so Spark cannot check the predicate against its columns; nothing was recorded")
    _check_columns(spark, name, where, predicate, kept)
    locations = {i.id: i.location for i in [*([live] if live else []), *dropped]}
    matched = _scan(spark, ledger, locations, predicate, _files_of(kept))
    current = next((v for v in kept if v.current and live is not None and v.table_id == live.id), None)
    if expire_now and live is not None:
        _check_pins(ledger, live, _newest_holder(kept, matched, live.id))
    rewritten: dict[str, int] = {}
    replaced_by = None
    if current is not None:
        assert live is not None
        replaced_by = _rewrite(spark, ledger, live, current, predicate, matched, rewritten)
    erasure_set = {**matched, **rewritten}
    if replaced_by is not None:  # a vacuum may have expired an older holder during the scan: gone already
        still = {f"{v.table_id}/{f.path}" for d in [live, *dropped] for v in _kept(ledger, d) for f in v.files}
        erasure_set = {key: size for key, size in erasure_set.items() if key in still or key in rewritten}
    try:
        status = ledger.request_erasure(name, predicate=where, reason=reason, files=sorted(erasure_set.items()),
                                        replaced_by=replaced_by)
    except LedgerError as exc:
        if replaced_by is None:
            raise
        raise type(exc)(f"{name}'s rows were rewritten without the matching ones (version {replaced_by}, which "
                        f"stays), but the erasure request was refused ({str(exc).removesuffix('; nothing was recorded')}):"
                        " erase again to record it") from exc
    if expire_now and live is not None:
        _expire(ledger, name, status, live.id)
    return ledger.erasure(status.request_id) if expire_now else status


def _predicate(spark: SparkSession, where: object) -> Column:
    """``where`` as a Column Spark parsed (one parse for the scan and the rewrite alike)."""
    if not isinstance(where, str) or not where.strip():
        raise InvalidArgument(f"where is a Spark SQL predicate such as \"user_id = 42\", not {where!r:.80}; "
                              "nothing was recorded")
    try:
        return F.expr(where)
    except Exception as exc:  # classic parses here (ParseException); Connect when the plan is analysed
        raise _unplannable(where, exc) from None


def _unplannable(where: str, exc: BaseException, on: str = "") -> InvalidArgument:
    return InvalidArgument(f"Spark cannot use the predicate {where!r:.200}{on} ({_said(exc)}); nothing was recorded")


def _said(exc: BaseException) -> str:
    """Spark's first line: what is wrong, without the plan and the stack that follow."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(";")


def _instances(ledger: Ledger, name: str) -> tuple[TableInstance | None, list[TableInstance]]:
    """The live instance of ``name`` (None: none) and its dropped, unpurged ones: what a request covers."""
    try:
        live: TableInstance | None = ledger.table(name)
    except TableNotFound:
        live = None
    # Only restorable ones (R25): one behind its watermark is being purged, its files going already.
    dropped = [d for d in ledger.dropped_tables(name=name) if d.state == "dropped"]
    if live is None and not dropped:
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


def _check_columns(spark: SparkSession, name: str, where: str, predicate: Column, kept: list[TableVersion]) -> None:
    """That Spark can plan ``where`` on the columns of every kept version (once per distinct schema):
    an unknown column, a type it cannot compare, a predicate that is not true or false."""
    for text in {v.schema for v in kept if v.schema is not None}:
        try:
            spark.createDataFrame([], schemas.struct(text)).where(predicate).schema  # Connect plans when asked
        except Exception as exc:
            held = min(v.number for v in kept if v.schema == text)
            raise _unplannable(where, exc, f" on {name} version {held}'s columns {schemas.simple(text)}") from None


def _files_of(kept: Iterable[TableVersion]) -> dict[str, tuple[str, str, int, str | None]]:
    """Each distinct file of these versions: key (``<table id>/<path>``) -> (table id, path, size,
    the recorded schema of the oldest kept version naming it, the nearest to the one that wrote it)."""
    found: dict[str, tuple[str, str, int, str | None]] = {}
    for v in sorted(kept, key=lambda v: (v.table_id, -v.number)):  # the oldest last: it wins
        for f in v.files:
            found[f"{v.table_id}/{f.path}"] = (v.table_id, f.path, f.size, v.schema)
    return found


def _scan(spark: SparkSession, ledger: Ledger, locations: dict[str, str], predicate: Column,
          files: dict[str, tuple[str, str, int, str | None]]) -> dict[str, int]:
    """The files holding a row ``predicate`` matches: key -> size. Each file is read once, in one
    Spark job: per read, ``where`` then the distinct ``_metadata.file_path``, the reads unioned."""
    if not files:
        return {}
    missing = fs.first_missing(ledger.warehouse, [f"{locations[t]}/{p}" for t, p, _, _ in files.values()])
    if missing is not None:
        raise TableDataMissing(f"{missing} is named by a kept version but is not there: an erasure cannot tell "
                               "whether it held matching rows (was it deleted outside the ledger?); nothing was "
                               "recorded")
    groups: dict[tuple[str, str | None], list[str]] = {}
    for table_id, path, _size, schema in files.values():
        groups.setdefault((table_id, schema), []).append(path)
    hits: list[DataFrame] = []
    for (table_id, schema), paths in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1] or "")):
        struct = None if schema is None else schemas.struct(schema)
        for frame in file_frames(spark, locations[table_id], sorted(paths), struct):
            found = frame.where(predicate).select(F.col("_metadata.file_path").alias("f")).distinct()
            hits.append(found)
    spelt = _spellings({f"{locations[t]}/{p}": key for key, (t, p, _, _) in files.items()})
    matched: dict[str, int] = {}
    try:
        rows = union_all(hits).collect()
    except AnalysisException as exc:  # files whose version recorded no columns: planned only here
        raise InvalidArgument(f"Spark cannot use the predicate on the files of {sorted(locations)[0]} "
                              f"({_said(exc)}); nothing was recorded") from None
    for row in rows:
        key = _key_of(row["f"], spelt)
        matched[key] = files[key][2]
    return matched


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


def _newest_holder(kept: list[TableVersion], matched: dict[str, int], table_id: str) -> TableVersion | None:
    """The newest version of the live instance naming a matching file: what ``expire_now`` expires up to."""
    for v in kept:  # newest first
        if v.table_id == table_id and any(f"{table_id}/{f.path}" in matched for f in v.files):
            return v
    return None


def _check_pins(ledger: Ledger, live: TableInstance, newest: TableVersion | None) -> None:
    """``expire_now`` would expire every version up to ``newest``: a live pin on one is refused now,
    before anything is recorded (R21)."""
    if newest is None:
        return
    for pin in ledger.pins(table_id=live.id):
        if pin.live and pin.version is not None and pin.version <= newest.number:
            raise PinRefused(f"cannot erase from {live.name} with expire_now: pin {pin.id} holds version {pin.version} "
                             f"until {pin.expires_at.isoformat()}, which holds rows to erase (R21); release the pin, "
                             "or erase without expire_now (the versions go at retention); nothing was recorded")


def _rewrite(spark: SparkSession, ledger: Ledger, live: TableInstance, current: TableVersion, predicate: Column,
             matched: dict[str, int], rewritten: dict[str, int]) -> int | None:
    """Commit a version that holds the current files without the matching rows: the files that hold
    none are kept as they are. A commit landing between the scan and the replace is scanned (its
    matches added to ``matched``) and rewritten too. Adds the files rewritten to ``rewritten``
    (key -> size); returns the last version made (None: none was needed)."""
    made = None
    scanned = {f"{live.id}/{f.path}" for f in current.files}
    for _round in range(REWRITE_ROUNDS):
        targets = [f for f in current.files if f"{live.id}/{f.path}" in matched]
        if not targets:
            return made
        version = _replace(spark, ledger, live, current, predicate, [f.path for f in targets])
        if version is not None:
            rewritten.update((f"{live.id}/{f.path}", f.size) for f in targets)
            made = version.number
            if version.number == current.number + 1:  # based on the version scanned: nothing escaped
                return made
        latest = ledger.version(live.name)  # a commit landed between: scan what it added, and go again
        ours = None if version is None else f"_writes/{version.write_id}/"
        added = {f"{live.id}/{f.path}": (live.id, f.path, f.size, latest.schema) for f in latest.files
                 if f"{live.id}/{f.path}" not in scanned and not (ours and f.path.startswith(ours))}
        scanned |= set(added)
        matched.update(_scan(spark, ledger, {live.id: live.location}, predicate, added))
        current = latest
    raise LedgerError(f"commits to {live.name} kept landing while its matching files were rewritten "
                      f"({REWRITE_ROUNDS} rounds); the request was not recorded: erase again")


def _replace(spark: SparkSession, ledger: Ledger, live: TableInstance, current: TableVersion, predicate: Column,
             paths: list[str]) -> TableVersion | None:
    """One version: ``current``'s files but ``paths``, plus those files' rows the predicate does not
    match (``NOT coalesce(predicate, false)``: SQL ``DELETE``), written partitioned as they were.
    Removing every file and keeping no row is an overwrite with no files, which says so on record
    (a replace may not empty a table); None if a commit landed first (an overwrite would lose it)."""
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
            return ledger.commit_write(write.id, files, mode="replace", removes=paths, schema=current.schema)
        if ledger.version(live.name).number != current.number:
            ledger.abort_write(write.id)
            return None
        return ledger.commit_write(write.id, [], mode="overwrite", schema=current.schema)


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
