"""The embedded backend: the event log and its snapshots in one SQLite file. The only module
that imports ``sqlite3``. It knows streams, versions and bytes; not tables.

How it keeps the contract (``contract``; tested by ``tests/test_store.py`` without any domain code):

* ``append`` checks the conditioned streams and writes every event in one ``BEGIN IMMEDIATE``
  transaction (a single event on the tip: one statement, its own transaction, that lands only
  if the head is still the row this connection last wrote).
* The file is in WAL mode with ``synchronous=FULL`` unless told otherwise, so
  an append is durable when it returns; a busy timeout lets several processes
  share it. Updates and deletes of events are refused by triggers.
* Each event row carries the SHA-256 hash chaining it to the row before (R16; the encoding is
  ``chain.event_hash``), computed here in the appending transaction, so no writer can leave
  a row out of the chain.
* The file records its format version; a newer format is refused, never guessed. A
  format-1 file (before the chain) can be read, and is upgraded in place by ``upgrade_chain``.
* SQLite's own errors never escape raw: contention becomes ``Conflict`` (which
  callers retry), a read-only or full disk ``LedgerUnavailable``, a damaged file
  ``LedgerCorrupt``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from ..chain import GENESIS, chain
from ..clock import Micros
from ..errors import Conflict, IncompatibleLedger, InvalidArgument, LedgerCorrupt, LedgerError, LedgerUnavailable
from .contract import (
    CHAIN_FORMAT, COLUMNS, FORMAT_VERSION, MANY, SELECT_GENERATIONS, Appended, Generation, NewEvent, Row, SealedPart, SQLStore,
    chained_rows, check_append, check_redactable, moved,
)

_T = TypeVar("_T")
APPLICATION_ID = 0x524C4447  # "RLDG": marks the file as a ledger for `file` and for us
SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")

_EVENT_LOG_VIEW = (
    # Auditors can read the log with any SQLite tool; this view shows times as ISO 8601 UTC text
    # to the microsecond, as the ledger does (events may be a microsecond apart).
    "CREATE VIEW event_log AS SELECT seq, stream, version, type, "
    "strftime('%Y-%m-%dT%H:%M:%S', time / 1000000, 'unixepoch') || '.' || printf('%06d', time % 1000000) "
    "|| 'Z' AS time_utc, actor, payload, hash FROM events ORDER BY seq")
_EVENT_LOG_VIEW_V1 = _EVENT_LOG_VIEW.replace(", hash FROM", " FROM")
_HASHED = COLUMNS + ", hash"
_INSERT_EVENT = f"INSERT INTO events({_HASHED}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_ON_TIP = (f"INSERT INTO events({_HASHED}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
                  "CASE WHEN (SELECT hash FROM events ORDER BY seq DESC LIMIT 1) = ? THEN ? END)")
"""One event whose row was computed from the tip (``_append_on_tip``): its hash is NULL, which the
column refuses, unless the log's head is still the tip's very row (its hash, not only its number:
a file replaced under the connection may have as many rows)."""


_GENERATIONS = (
    # AUTOINCREMENT: a number is never given twice, even after every generation was deleted, so a
    # reader of an old one can never mistake a newer one for it. ``written``: when (wall-clock
    # microseconds), for people reading the file.
    "CREATE TABLE IF NOT EXISTS snapshot_generations (gen INTEGER PRIMARY KEY AUTOINCREMENT, base INTEGER NOT NULL, "
    "seq INTEGER NOT NULL, format INTEGER NOT NULL, head BLOB NOT NULL, entries INTEGER NOT NULL, written INTEGER)",
    # An entry's value is a CRC-32 (of its part, key and bytes) and the bytes; NULL records a deletion.
    # Kept in the order they are written (by generation): writing one appends, and reading a
    # generation's own entries, or a part of a chain's, reads runs of the file in order.
    "CREATE TABLE IF NOT EXISTS snapshot_entries (gen INTEGER NOT NULL, part TEXT NOT NULL, key TEXT NOT NULL, "
    "value BLOB, PRIMARY KEY (gen, part, key)) WITHOUT ROWID",
    # One key's entries, along the generations (a read of a few keys).
    "CREATE INDEX IF NOT EXISTS snapshot_entries_by_key ON snapshot_entries (part, key, gen)",
)


class SQLiteStore(SQLStore[sqlite3.Connection]):
    """One ledger file. Safe to share between threads; open one per process."""

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout: float = 10.0) -> None:
        level = synchronous.upper() if isinstance(synchronous, str) else None
        if level not in SYNCHRONOUS_LEVELS:
            raise InvalidArgument(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, not {synchronous!r}")
        self.path = path
        self.location = None if path == ":memory:" else os.path.abspath(path)
        self.synchronous = level
        self._chains = {}
        self._lock = threading.RLock()
        self._data_version = -1
        self._tip: tuple[int, Micros, str] | None = None
        """The last row this connection appended (seq, time, hash), while it appended alone: the head, unless
        another connection wrote since (``_append_on_tip`` checks)."""
        self._busy_timeout_ms = int(busy_timeout * 1000)
        self._wal_keeps_forgotten = False
        """A forget's checkpoint could not truncate the WAL (another connection was reading): it is
        tried again, without waiting, after each append and on close, until it lands."""
        self._refuses_null_hash = False
        """Whether the events' hash column refuses NULL, which ``_append_on_tip`` relies on to write
        nothing when the head is not the tip: so in a file made by this release, not in one upgraded
        from format 1, whose column ``upgrade_chain`` added (``ALTER TABLE`` adds it nullable). Read
        with the schema; a single event then always takes the transaction where it is false."""
        self.format = 0
        """The file's format version (``FORMAT_VERSION``, or 1 for a file not yet upgraded)."""
        _refuse_non_sqlite(path)
        with translate_errors(path):
            self._db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
                                       check_same_thread=False)
            try:
                self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
                self._refuse_foreign()
                self._configure(level)
                self._ensure_schema()
            except BaseException:
                self._db.close()
                raise

    # --- opening ---------------------------------------------------------------------------

    def _refuse_foreign(self) -> None:
        """Refuse someone else's SQLite file before changing anything in it (even its journal)."""
        app_id = self._db.execute("PRAGMA application_id").fetchone()[0]
        has_tables = self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
        if app_id != APPLICATION_ID and (app_id != 0 or has_tables):
            raise LedgerCorrupt(f"{self.path} is an SQLite file but not a retention-ledger ledger")

    def _configure(self, level: str) -> None:
        if self.path != ":memory:":
            mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise LedgerUnavailable(f"{self.path}: could not switch the ledger to WAL mode (got {mode})")
        self._db.execute(f"PRAGMA synchronous = {level}")

    def _ensure_schema(self) -> None:
        self._ensure_schema_once()
        self._refuses_null_hash = any(column[1] == "hash" and column[3]
                                      for column in self._db.execute("PRAGMA table_info(events)"))

    def _ensure_schema_once(self) -> None:
        if self._db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
            self._check_format(self._db)
            self._upgrade()
            return
        with self.transaction():
            # Another process may have created it while we waited for the write lock.
            if self._db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
                return
            self._create_schema()
        self._check_format(self._db)

    def _create_schema(self) -> None:
        import sqlite_utils  # only a new file needs it, and importing it (numpy and all) costs more than an open
        db = sqlite_utils.Database(self._db)
        db.table("meta").create({"key": str, "value": str}, pk="key", not_null={"value"})
        db.table("events").create(
            {"seq": int, "stream": str, "version": int, "type": str, "schema_version": int,
             "time": int, "actor": str, "payload": str, "hash": str},
            pk="seq",
            not_null={"stream", "version", "type", "schema_version", "time", "actor", "payload", "hash"},
        )
        db.table("events").create_index(["stream", "version"], unique=True)
        db.table("snapshots").create({"name": str, "seq": int, "format": int, "data": bytes},
                               pk="name", not_null={"seq", "format", "data"})
        self._create_triggers()
        self._create_blobs()
        for statement in _GENERATIONS:
            self._db.execute(statement)
        self._db.execute(_EVENT_LOG_VIEW)
        db.table("meta").insert_all([{"key": "format_version", "value": str(FORMAT_VERSION)}])
        self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        self.format = FORMAT_VERSION

    def _create_triggers(self) -> None:
        for action in ("UPDATE", "DELETE"):
            self._db.execute(
                f"CREATE TRIGGER IF NOT EXISTS events_no_{action.lower()} BEFORE {action} ON events "
                "BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END"
            )

    def _create_blobs(self) -> None:
        """Content-addressed attachments of events (a write's file list): written in the same
        transaction as the event that names their digest, and append-only like the log."""
        self._db.execute("CREATE TABLE IF NOT EXISTS blobs (digest TEXT PRIMARY KEY, data BLOB NOT NULL)")
        for action in ("UPDATE", "DELETE"):
            self._db.execute(
                f"CREATE TRIGGER IF NOT EXISTS blobs_no_{action.lower()} BEFORE {action} ON blobs "
                "BEGIN SELECT RAISE(ABORT, 'attachments are append-only'); END")

    def _upgrade(self) -> None:
        """Bring a ledger made by an earlier release up to this one's schema, in place: today's
        event_log view (times to the microsecond) and the attachments table. No event is
        touched (the chain is ``upgrade_chain``'s, which records an event). A read-only file
        is left as it is (it can still be read)."""
        view = _EVENT_LOG_VIEW if self.format >= CHAIN_FORMAT else _EVENT_LOG_VIEW_V1
        found = self._db.execute("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'event_log'").fetchone()
        tables = {name for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
        written = "snapshot_generations" in tables and any(
            column[1] == "written" for column in self._db.execute("PRAGMA table_info(snapshot_generations)"))
        if found is not None and found[0] == view and {"blobs", "snapshot_entries_by_key"} <= tables and written:
            return
        with contextlib.suppress(LedgerUnavailable, Conflict), self.transaction() as db:
            db.execute("DROP VIEW IF EXISTS event_log")
            db.execute(view)
            self._create_blobs()
            if "snapshot_entries" in tables and "snapshot_entries_by_key" not in tables:
                # Laid out by key before 0.4: the stored states are caches, so they go, not the log.
                db.execute("DROP TABLE snapshot_entries")
                db.execute("DELETE FROM snapshot_generations")
            for statement in _GENERATIONS:
                db.execute(statement)
            if "snapshot_generations" in tables and not written:  # made by a release before the grace period
                db.execute("ALTER TABLE snapshot_generations ADD COLUMN written INTEGER")

    def upgrade_chain(self, note: NewEvent, now: Micros, actor: str) -> bool:
        """Give a format-1 ledger its hash chain, in place, in one transaction: a ``hash`` column,
        every existing row hashed in order, then ``note`` (the caller's record of the upgrade)
        appended as the first event the chain was computed for at write time. Returns False if
        there was nothing to do (another process upgraded it first).

        The append-only trigger is lifted for the backfill and restored before the commit; a
        crash anywhere leaves the file exactly as it was.
        """
        with self.transaction() as db:
            self.format = self._read_format(db)
            if self.chained:
                return False
            db.execute("ALTER TABLE events ADD COLUMN hash TEXT")
            db.execute("DROP TRIGGER IF EXISTS events_no_update")
            previous, after = GENESIS, 0
            while True:
                rows = db.execute(f"SELECT {COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT 20000",
                                  (after,)).fetchall()
                if not rows:
                    break
                hashes = chain(rows, previous)
                db.executemany("UPDATE events SET hash = ? WHERE seq = ?",
                               [(h.hex(), r[0]) for h, r in zip(hashes, rows)])
                previous, after = hashes[-1], rows[-1][0]
            self._create_triggers()
            db.execute("UPDATE meta SET value = ? WHERE key = 'format_version'", (str(CHAIN_FORMAT),))
            db.execute("DROP VIEW IF EXISTS event_log")
            db.execute(_EVENT_LOG_VIEW)
            self.format = CHAIN_FORMAT
            try:
                self._insert(db, [note], {note.stream: 0}, now, actor, None)
            except BaseException:
                self.format = 1
                raise
        return True

    def close(self) -> None:
        with self._lock:
            if self._wal_keeps_forgotten:
                self._truncate_wal(wait=False)
            self._db.close()

    # --- transactions ----------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE``: take the write lock up front, so a check and the write it
        guards can never be split by another writer."""
        with self._lock, translate_errors(self.path):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._rollback()
                raise
            else:
                try:
                    self._db.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self.transaction():
            self._exclusive = True
            try:
                yield
            finally:
                self._exclusive = False

    @property
    def connection(self) -> sqlite3.Connection:
        """The underlying SQLite connection, for tools and tests that inspect the file (as
        ``sqlite_utils.Database.conn``). Writing through it bypasses every check of the ledger."""
        return self._db

    def settings(self) -> dict[str, object]:
        """The connection's journal mode and synchronous level, as SQLite reports them."""
        with self._lock, translate_errors(self.path):
            mode = self._db.execute("PRAGMA journal_mode").fetchone()[0]
            level = self._db.execute("PRAGMA synchronous").fetchone()[0]
        return {"journal_mode": mode, "synchronous": SYNCHRONOUS_LEVELS[level]}

    def _rollback(self) -> None:
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

    def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._lock, translate_errors(self.path):
            return work(self._db)

    def _write(self, work: Callable[[sqlite3.Connection], _T], lock: int | None = None) -> _T:
        with self.transaction() as db:
            return work(db)

    def _fetch(self, db: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return db.execute(sql, params).fetchall()

    def _many(self, db: sqlite3.Connection, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        db.executemany(sql, rows)

    def _copy(self, db: sqlite3.Connection, table: str, columns: str, rows: Iterable[Sequence[Any]]) -> None:
        self._many(db, f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * (columns.count(',') + 1))})", rows)

    # --- the log ---------------------------------------------------------------------------

    def append(self, events: Sequence[NewEvent], conditions: Mapping[str, int],
               now: Micros, actor: str, *, expected_head: int | None = None,
               blobs: Mapping[str, bytes] | None = None) -> Appended:
        check_append(events, blobs)
        with self._lock:  # the hot path: try/except here, not the transaction() helper
            db = self._db
            if self._exclusive:  # inside exclusive(): its transaction is ours (and may yet roll back)
                self._tip = None
                rows = self._insert(db, events, conditions, now, actor, expected_head, blobs)
                return Appended([(r[0], r[1], r[2], r[5]) for r in rows], rows[0][0] - 1)
            on_tip = self._append_on_tip(db, events, conditions, now, actor, expected_head, blobs)
            if on_tip is not None:
                rows = on_tip
            else:
                try:
                    db.execute("BEGIN IMMEDIATE")
                    try:
                        rows = self._insert(db, events, conditions, now, actor, expected_head, blobs)
                        db.execute("COMMIT")
                    except BaseException:
                        self._rollback()
                        raise
                except sqlite3.Error as exc:
                    raise _translate(self.path, exc) from exc
            previous = rows[0][0] - 1
            # Worth trying next time only if no other writer appended between the caller's state and
            # this append: where one does, the tip's statement would be refused before the transaction.
            last = rows[-1]
            self._tip = (last[0], last[5], last[8]) if expected_head == previous and self._refuses_null_hash else None
            if self._wal_keeps_forgotten:
                self._truncate_wal(wait=False)
        return Appended([(r[0], r[1], r[2], r[5]) for r in rows], previous)

    def _append_on_tip(self, db: sqlite3.Connection, events: Sequence[NewEvent], conditions: Mapping[str, int],
                       now: Micros, actor: str, expected_head: int | None,
                       blobs: Mapping[str, bytes] | None) -> list[Row] | None:
        """A single event appended by a writer that appends alone, in one statement that is its own
        transaction: its row computed from the tip (the last row this connection appended), written
        only if the log's head is still the tip. None (nothing written) if it is not, or if the
        append needs more than the tip tells (several events, a stream it does not condition on,
        attachments, a transaction already open): then the transaction appends it.

        The caller decided on the log as this store last left it (``expected_head`` is the tip), so
        no conditioned stream can have moved unless the log grew. The statement takes the write lock
        before it reads, as ``BEGIN IMMEDIATE`` does, and checks the head with the write: a head that
        is not the tip (another connection or process appended, or the log is not what this
        connection wrote) leaves the hash NULL, which the column refuses (``_refuses_null_hash``), so nothing
        lands. It
        replaces four statements (``BEGIN IMMEDIATE``, the head's read, the insert, ``COMMIT``):
        about 53,000 instructions against 69,000 a command (callgrind, synchronous=OFF). Checking
        the head as ``INSERT ... SELECT ... WHERE`` instead costs more than it saves (86,000):
        SQLite copies the selected row to a temporary table first, as it reads the table it
        writes."""
        tip = self._tip
        if tip is None or expected_head != tip[0] or blobs or len(events) != 1 or db.in_transaction \
                or events[0].stream not in conditions:
            return None
        last_seq, last_time, previous_hex = tip
        rows = chained_rows(events, dict(conditions), last_seq, max(now, last_time + 1), actor, previous_hex)
        row = rows[0]
        try:
            db.execute(_INSERT_ON_TIP, (*row[:8], previous_hex, row[8]))
        except sqlite3.IntegrityError:
            self._tip = None  # the head is not the tip: the transaction reads it and decides
            return None
        except sqlite3.Error as exc:
            self._tip = None
            raise _translate(self.path, exc) from exc
        return rows

    def _insert(self, db: sqlite3.Connection, events: Sequence[NewEvent], conditions: Mapping[str, int],
                now: Micros, actor: str, expected_head: int | None,
                blobs: Mapping[str, bytes] | None = None) -> list[Row]:
        if not self.chained:
            raise IncompatibleLedger(f"{self.path} predates the hash chain (format {self.format}); open it "
                                     "writable with Ledger.open once to upgrade it, then append")
        head = db.execute("SELECT seq, time, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        last_seq, last_time, previous = head if head else (0, 0, None)
        versions: dict[str, int] = dict(conditions)
        if expected_head is None or expected_head != last_seq:
            for stream, expected in conditions.items():
                actual = self._version(db, stream)
                if actual != expected:
                    raise moved(stream, expected, actual)
        rows = chained_rows(events, versions, last_seq, max(now, last_time + 1), actor, previous,
                            lambda stream: self._version(db, stream))
        self.insert_rows(db, rows)
        if blobs:
            db.executemany("INSERT OR IGNORE INTO blobs(digest, data) VALUES (?, ?)", blobs.items())
        return rows

    def insert_rows(self, db: sqlite3.Connection, rows: list[Row]) -> None:
        """The one statement that writes events inside the append's transaction (a single event on
        the tip is its own transaction: ``_append_on_tip``). A subclass may override it to inject a
        fault between the write and the commit (the crash tests do, with several events)."""
        if len(rows) == 1:  # a single-event command: ``execute`` costs less than ``executemany``'s set-up
            db.execute(_INSERT_EVENT, rows[0])
        else:
            db.executemany(_INSERT_EVENT, rows)

    def changed_elsewhere(self) -> bool:
        """By ``PRAGMA data_version``: no table is read, and this connection's own commits do not count."""
        with self._lock:
            try:
                version: int = self._db.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:
                raise _translate(self.path, exc) from exc
        changed = version != self._data_version
        self._data_version = version
        return changed

    @staticmethod
    def _version(db: sqlite3.Connection, stream: str) -> int:
        version: int = db.execute("SELECT coalesce(max(version), 0) FROM events WHERE stream = ?",
                                  (stream,)).fetchone()[0]
        return version

    _CONTAINS = "instr"

    def _batch(self, sql: str, params: Sequence[Any], after: int, last: int) -> list[Any]:
        with self._lock, translate_errors(self.path):
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if "decode" not in str(exc).lower():
                    raise
                raise self._undecodable(after, last) from None

    def _undecodable(self, after: int, last: int) -> LedgerCorrupt:
        """Find the row whose text is not UTF-8 (the error path only: one row at a time)."""
        for (seq,) in self._db.execute("SELECT seq FROM events WHERE seq > ? AND seq <= ? ORDER BY seq",
                                       (after, last)).fetchall():
            try:
                self._db.execute(f"SELECT {COLUMNS} FROM events WHERE seq = ?", (seq,)).fetchall()
            except sqlite3.OperationalError:
                return LedgerCorrupt(f"{self.path}: event #{seq} holds bytes that are not UTF-8 text; "
                                     "restore the ledger file from a backup")
        return LedgerCorrupt(f"{self.path}: an event after #{after} holds bytes that are not UTF-8 text; "
                             "restore the ledger file from a backup")

    def seq_at(self, time: Micros) -> int:
        """Event times strictly increase with seq, so this is a binary search of point reads."""
        with self._lock, translate_errors(self.path):
            head = self._db.execute("SELECT seq, time FROM events ORDER BY seq DESC LIMIT 1").fetchone()
            if head is None or head[1] <= time:
                return 0 if head is None else head[0]
            low, high = 0, head[0]  # event `low` is at or before time (0: before everything); `high` after
            while high - low > 1:
                middle = (low + high) // 2
                row = self._db.execute("SELECT time FROM events WHERE seq = ?", (middle,)).fetchone()
                if row is None:
                    raise LedgerCorrupt(f"{self.path}: event #{middle} is missing; run verify")
                if row[0] <= time:
                    low = middle
                else:
                    high = middle
            return low

    _STATEMENTS = "CREATE TABLE IF NOT EXISTS statements (digest TEXT PRIMARY KEY, data BLOB NOT NULL, " \
                  "kept_at INTEGER NOT NULL)"

    def forget_statement(self, digest: str) -> bool:
        if not self._has_statements():
            return False
        with self._zeroed(), self.transaction() as db:
            return bool(db.execute("DELETE FROM statements WHERE digest = ?", (digest,)).rowcount > 0)

    def redact(self, seq: int, payload: str) -> None:
        """The append-only trigger is lifted for the one update and restored before the commit."""
        with self._zeroed(), self.transaction() as db:
            check_redactable(seq, db.execute("SELECT type, schema_version FROM events WHERE seq = ?", (seq,)).fetchone())
            db.execute("DROP TRIGGER IF EXISTS events_no_update")
            db.execute("UPDATE events SET payload = ? WHERE seq = ?", (payload, seq))
            self._create_triggers()

    @contextlib.contextmanager
    def _zeroed(self) -> Iterator[None]:
        """With ``secure_delete`` on for what is deleted or changed inside (its pages, overflow ones
        included, zeroed), then the WAL checkpointed and truncated, so neither file keeps the old
        bytes. A reader that holds an old snapshot open keeps the WAL from being truncated (after the
        busy timeout): then it is tried again after each later append and on close (``_truncate_wal``)."""
        with self._lock, translate_errors(self.path):
            self._db.execute("PRAGMA secure_delete = ON")
            try:
                yield
            finally:
                self._db.execute("PRAGMA secure_delete = OFF")
            if self.path != ":memory:":
                self._truncate_wal(wait=True)

    def _truncate_wal(self, *, wait: bool) -> None:
        """Checkpoint the WAL and truncate it to nothing; remember whether a reader kept SQLite from
        it. ``wait=False``: give up at once if one still does (an append must not wait on a reader)."""
        try:
            if not wait:
                self._db.execute("PRAGMA busy_timeout = 0")
            try:
                busy = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                if not wait:
                    self._db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        except sqlite3.Error:
            if wait:
                raise
            busy = 1  # tried again later; what was committed stands
        self._wal_keeps_forgotten = bool(busy)

    def _has_statements(self) -> bool:
        return bool(self._rows("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'statements'"))

    # --- snapshots: a cache of folded state, never the truth -------------------------------

    def _generations(self, order: str) -> list[Generation]:
        with self._lock, translate_errors(self.path):
            try:
                rows = self._db.execute(f"{SELECT_GENERATIONS} ORDER BY {order}").fetchall()
            except sqlite3.OperationalError:  # a read-only file from before generations
                return []
        return [Generation(*row) for row in rows]

    def generation_part(self, generation: Generation, part: str) -> SQLitePart:
        return SQLitePart(self, generation, part)

    # --- health ----------------------------------------------------------------------------

    def integrity_problems(self) -> list[str]:
        """SQLite's own page-level check; an empty list means the file is sound."""
        with self._lock, translate_errors(self.path):
            rows = self._db.execute("PRAGMA quick_check").fetchall()
        return [] if rows == [("ok",)] else [r[0] for r in rows]


class SQLitePart(SealedPart[SQLiteStore]):
    """One part of one generation (``contract.StoredPart``): an entry is the newest of its key in
    the generation's chain up to it. Each read also checks that the generation is still stored
    and each entry its CRC; either failing is ``SnapshotGone``."""

    __slots__ = ()

    def get(self, key: str) -> bytes | None:
        value = self._newest(self._read(
            "SELECT gen, value FROM snapshot_entries WHERE part = :part AND key = :key "
            "AND gen BETWEEN :base AND :gen AND EXISTS (SELECT 1 FROM snapshot_generations WHERE gen = :gen) "
            "ORDER BY gen DESC", {"gen": self._gen, "base": self._base, "part": self._part, "key": key}))
        return None if value is None else self._unseal(key, value)

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found, chain = dict[str, object](), self._chain
        for start in range(0, len(keys), MANY):
            chunk = keys[start:start + MANY]
            rows = self._read(
                "SELECT key, gen, value FROM snapshot_entries WHERE part = ? AND gen BETWEEN ? AND ? AND key IN "
                f"({', '.join('?' * len(chunk))}) AND EXISTS (SELECT 1 FROM snapshot_generations WHERE gen = ?) "
                "ORDER BY key, gen", (self._part, self._base, self._gen, *chunk, self._gen))
            # by key, then generation: the newest of each key in the chain is the one kept
            found.update((key, value) for key, gen, value in rows if gen in chain)
        return {key: self._unseal(key, value) for key, value in found.items() if value is not None}

    def scan_sealed(self) -> Iterator[tuple[str, bytes]]:
        gens = sorted(self._chain)
        # In the order written: a later generation's entry replaces an earlier one's.
        rows = self._read(
            f"SELECT key, value FROM snapshot_entries WHERE gen IN ({', '.join('?' * len(gens))}) AND part = ? "
            "AND EXISTS (SELECT 1 FROM snapshot_generations WHERE gen = ?) ORDER BY gen",
            (*gens, self._part, self._gen))
        return ((key, value) for key, value in dict(rows).items() if value is not None)

    def _read(self, sql: str, params: Any) -> list[Any]:
        """The rows of ``sql``, which finds none once the generation is gone: then ``SnapshotGone``."""
        store = self._store
        with store._lock, translate_errors(store.path):
            rows = store._db.execute(sql, params).fetchall()
            if not rows and store._db.execute("SELECT 1 FROM snapshot_generations WHERE gen = ?",
                                              (self._gen,)).fetchone() is None:
                raise self._gone("is no longer stored")
        return rows

_UNAVAILABLE = ("readonly", "read-only", "disk is full", "disk i/o error", "unable to open",
                "out of memory", "no such file", "permission")
_CORRUPT = ("not a database", "malformed", "corrupt", "no such table", "no such column",
            "could not decode")


@contextlib.contextmanager
def translate_errors(path: str) -> Iterator[None]:
    """Turn SQLite's exceptions into the ledger's typed errors, with the file named."""
    try:
        yield
    except LedgerError:
        raise
    except sqlite3.Error as exc:
        raise _translate(path, exc) from exc
    except UnicodeDecodeError as exc:  # SQLite's own message or a column was not UTF-8: damage
        raise LedgerCorrupt(f"{path}: the ledger file holds bytes that are not text where text "
                            f"belongs ({exc.reason}); restore it from a backup") from None


def _translate(path: str, exc: sqlite3.Error) -> LedgerError:
    text = str(exc).lower()
    if "closed database" in text:
        return LedgerUnavailable(f"{path}: the ledger was closed; open it again (a view such as a version's "
                                 "file list reads through the ledger it came from)")
    if "locked" in text or "busy" in text:
        return Conflict(f"{path}: the ledger stayed locked by another writer ({exc})")
    if any(marker in text for marker in _CORRUPT) or isinstance(exc, sqlite3.DatabaseError) \
            and not isinstance(exc, sqlite3.OperationalError):
        return LedgerCorrupt(f"{path}: the ledger file is damaged or not a ledger: {exc}; restore it "
                             "from a backup (retention-ledger verify says what is wrong)")
    if any(marker in text for marker in _UNAVAILABLE):
        hint = ""
        if "readonly" in text or "read-only" in text:
            hint = "; check the file's and its folder's permissions (SQLite writes -wal and -shm files beside it)"
        elif "unable to open" in text and path != ":memory:" and \
                not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            hint = f"; its folder {os.path.dirname(os.path.abspath(path))} does not exist"
        elif "full" in text:
            hint = "; free some space and retry: nothing was written"
        elif "unable to open" in text:
            hint = "; check that the file and its folder exist and are writable (SQLite writes -wal and -shm files beside it)"
        elif "i/o error" in text:
            hint = "; check free space, file size limits and the file system; nothing was written"
        return LedgerUnavailable(f"{path}: cannot use the ledger file: {exc}{hint}")
    return LedgerUnavailable(f"{path}: SQLite error: {exc}")


_SQLITE_HEADER = b"SQLite format 3\x00"


def _refuse_non_sqlite(path: str) -> None:
    """SQLite happily treats a short file of garbage as an empty database and overwrites it;
    a ledger must not eat a file it did not write."""
    if path == ":memory:" or path.startswith("file:"):
        return
    for wait in (0.0, 0.05, 0.2, 0.5, 1.0):
        time.sleep(wait)
        try:
            with open(path, "rb") as handle:
                head = handle.read(len(_SQLITE_HEADER))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise LedgerUnavailable(f"{path}: cannot read the ledger file: {exc}") from None
        if head or os.path.exists(path + "-wal"):
            break
        # An empty file: another process creating a ledger there writes its header within
        # microseconds of making it; one that stays empty is not a ledger, and not ours to claim.
    else:
        raise LedgerCorrupt(f"{path} is an empty file, not a ledger; refusing to turn it into one: remove it, "
                            "or give the path of the ledger you meant")
    if head and head != _SQLITE_HEADER:
        raise LedgerCorrupt(f"{path} is not an SQLite file, so not a ledger; refusing to touch it")
