"""The shared backend: the event log and its snapshots in a PostgreSQL database, for a ledger
that pipelines on several hosts share (R18). The only module that imports ``psycopg``.

How it keeps the contract (``contract``; the same suite as SQLite's, ``tests/test_postgres.py``):

* **One total order.** Every append takes a transaction-scoped advisory lock (one per ledger:
  per schema), reads the head, checks the conditioned streams' versions (R4), computes each
  row's chain hash (R16) and inserts, then commits. Appends queue on the lock; readers never
  wait for it (MVCC), and the lock goes with the transaction, so a host that dies mid-append
  holds nothing. Sequence numbers and ``(stream, version)`` are also unique keys.
* **One round trip a command.** A host appending alone sends rows it chained itself on the head
  it knows; one that another host got ahead of has the server chain them, and gets back, with
  its own rows, the others' since its state, which it folds without reading the log again.
* **Durable at commit**, as the server is configured (``synchronous_commit``).
* **Append-only.** Triggers refuse UPDATE, DELETE and TRUNCATE of events and attachments.
* **A lost acknowledgement is looked up, not guessed (R18).** Each append carries an attempt id,
  stored in the same transaction (``attempts``). If the connection breaks while an append is
  in flight (the server restarted, the network dropped after COMMIT was sent), the store
  reconnects and looks the id up: found, the append happened and its rows are returned; not
  found, it did not, and it is made again (its conditions checked again). Reads reconnect and
  are asked again. A server that stays away is ``LedgerUnavailable`` after ``reconnect_for``.
* Snapshot generations, history snapshots, attachments and meta are tables beside the log, with
  the same semantics as SQLite's (``contract.SnapshotStore``).

A ledger is a database, or a schema of one (``?schema=tenant`` in the URL): one per tenant.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

import psycopg
from psycopg import errors as pg

from ..clock import Micros, iso
from ..errors import (
    ClockSkew, Conflict, InvalidArgument, LedgerCorrupt, LedgerError, LedgerNotFound, LedgerUnavailable, OutcomeUnknown,
)
from . import pgaddress
from .contract import (
    COLUMNS, FORMAT_VERSION, MANY, MAX_CLOCK_SKEW, Appended, Generation, NewEvent, NoLedgerYet, Row, SealedPart, SQLStore,
    chained_rows, check_append, check_redactable, moved,
)

_LOCK_CLASS = 0x524C4447
"""The first key of the ledger's advisory locks ("RLDG"); the second is the schema's hash."""
_T = TypeVar("_T")

log = logging.getLogger(__name__)

_AHEAD = 1000
"""At most this many rows of other hosts' are returned with an append (``ledger_append_v2``): a host
further behind reads them as it would have."""

_MOVED, _SKEWED = "RL001", "RL002"
"""The append function's refusals (SQLSTATEs of its own): a conditioned stream moved; a clock too far."""

_APPEND_TEMPLATE = """
CREATE OR REPLACE FUNCTION %(name)s(
    p_lock integer, p_after bigint, p_conditions text[], p_versions bigint[], p_streams text[], p_types text[],
    p_schemas integer[], p_payloads text[], p_now bigint, p_actor text, p_attempt text, p_skew bigint,
    p_digests text[], p_blobs bytea[])
RETURNS TABLE (r_seq bigint, r_stream text, r_version bigint, r_type text, r_schema integer, r_time bigint,
               r_actor text, r_payload text, r_hash text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan  -- each statement's plan made once, not again at every call
AS $fn$
DECLARE
    head_seq bigint; head_time bigint; head_hash text; prev bytea; v bigint; i integer; pos integer; h bytea;
    moved record;
    server bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    n integer := array_length(p_streams, 1); t bigint; a bytea := convert_to(p_actor, 'UTF8'); s bytea; ty bytea;
    pl bytea;
BEGIN
    PERFORM pg_advisory_xact_lock(%(lock_class)s, p_lock);
    IF p_skew IS NOT NULL AND abs(p_now - server) > p_skew THEN
        RAISE EXCEPTION USING ERRCODE = '%(skewed)s', MESSAGE = server::text;
    END IF;
    SELECT seq, time, hash INTO head_seq, head_time, head_hash FROM events ORDER BY seq DESC LIMIT 1;
    head_seq := coalesce(head_seq, 0);
    head_time := coalesce(head_time, 0);
    IF p_after IS DISTINCT FROM head_seq THEN  -- the log grew since the caller's state: check what it read
        -- One index probe a stream (max() of one stream reads the last entry of its index).
        SELECT c.stream, c.expected, f.found INTO moved
          FROM unnest(p_conditions, p_versions) AS c(stream, expected),
               LATERAL (SELECT coalesce(max(e.version), 0) AS found FROM events e WHERE e.stream = c.stream) f
         WHERE f.found <> c.expected LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION USING ERRCODE = '%(moved)s', MESSAGE = moved.stream, DETAIL = moved.found::text,
                HINT = moved.expected::text;
        END IF;%(ahead)s
    END IF;
    prev := CASE WHEN head_hash IS NULL THEN decode(repeat('00', 32), 'hex') ELSE decode(head_hash, 'hex') END;
    t := greatest(p_now, head_time + 1);
    FOR i IN 1 .. n LOOP
        pos := array_position(p_conditions, p_streams[i]);  -- the stream's version so far, if known
        IF pos IS NULL THEN
            v := (SELECT coalesce(max(e.version), 0) FROM events e WHERE e.stream = p_streams[i]) + 1;
            p_conditions := p_conditions || p_streams[i];
            p_versions := p_versions || v;
        ELSE
            v := p_versions[pos] + 1;
            p_versions[pos] := v;
        END IF;
        -- The chain (ledger.chain.event_hash): the previous hash, u64 seq, u64 version, u32 schema
        -- version, i64 time, then stream, type, actor and payload as u32 length and UTF-8 bytes.
        s := convert_to(p_streams[i], 'UTF8');
        ty := convert_to(p_types[i], 'UTF8');
        pl := convert_to(p_payloads[i], 'UTF8');
        h := sha256(prev || int8send(head_seq + i) || int8send(v) || int4send(p_schemas[i]) || int8send(t + i - 1)
                    || int4send(octet_length(s)) || s || int4send(octet_length(ty)) || ty
                    || int4send(octet_length(a)) || a || int4send(octet_length(pl)) || pl);
        r_seq := head_seq + i; r_stream := p_streams[i]; r_version := v; r_type := p_types[i];
        r_schema := p_schemas[i]; r_time := t + i - 1; r_actor := p_actor; r_payload := p_payloads[i];
        r_hash := encode(h, 'hex');
        INSERT INTO events VALUES (r_seq, r_stream, r_version, r_type, r_schema, r_time, r_actor, r_payload, r_hash);
        prev := h;
        RETURN NEXT;
    END LOOP;
    INSERT INTO blobs SELECT d, b FROM unnest(p_digests, p_blobs) AS x(d, b) ON CONFLICT DO NOTHING;
    INSERT INTO attempts VALUES (p_attempt, head_seq + 1, head_seq + n);
END $fn$
"""
_APPEND_FUNCTION = _APPEND_TEMPLATE % {"name": "ledger_append_v1", "ahead": "", "lock_class": _LOCK_CLASS,
                                       "skewed": _SKEWED, "moved": _MOVED}
"""An append, whole, in one round trip (R4, R16, R18): under the ledger's lock, the clock held to the
server's, the conditions checked (only if the log grew since the caller's state), each event's
version and chain hash computed here, then the rows, attachments and attempt id inserted; it returns
the rows. The lock is held for no round trip, so hosts queue on it for the server's own work only."""

_APPEND_AFTER_FUNCTION = _APPEND_TEMPLATE % {
    "name": "ledger_append_v2", "lock_class": _LOCK_CLASS, "skewed": _SKEWED, "moved": _MOVED, "ahead": f"""
        -- What other hosts appended since the caller's state, returned first: the caller reads it next.
        -- Bounded on both sides, so the plan kept for every call is a short walk of the key's index.
        RETURN QUERY SELECT e.seq, e.stream, e.version, e.type, e.schema_version, e.time, e.actor, e.payload,
                            e.hash FROM events e WHERE e.seq > p_after AND e.seq <= least(head_seq, p_after + {_AHEAD})
                      ORDER BY e.seq;"""}
"""``ledger_append_v1`` for a host whose state is behind the log (another host appended since): under
the same lock, first the rows after ``p_after`` (at most ``_AHEAD``), which that host reads next
anyway, then the append's own. One statement a command where there were 2.6 at four hosts (the
statement on the tip, refused; the function; the read after), for about 50 us more of the server's
time under the lock (a walk of the key's index; read as ``seq > p_after ... LIMIT``, the plan kept
for every call scanned the log, 280 us at a few thousand events). ``ledger_append_v1`` is
unchanged, so hosts of an earlier release append beside this one's."""

_APPEND = ("SELECT * FROM ledger_append_v1(%s::integer, %s::bigint, %s::text[], %s::bigint[], %s::text[], "
           "%s::text[], %s::integer[], %s::text[], %s::bigint, %s::text, %s::text, %s::bigint, %s::text[], "
           "%s::bytea[])")
_APPEND_AFTER = _APPEND.replace("ledger_append_v1", "ledger_append_v2")

_BY_GEN = "CREATE INDEX IF NOT EXISTS snapshot_entries_by_gen ON snapshot_entries (gen)"
"""A generation's own entries (``generation_entries``: verify reads every one's)."""

_DDL = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE events (seq BIGINT PRIMARY KEY, stream TEXT NOT NULL, version BIGINT NOT NULL, "
    "type TEXT NOT NULL, schema_version INTEGER NOT NULL, time BIGINT NOT NULL, actor TEXT NOT NULL, "
    "payload TEXT NOT NULL, hash TEXT NOT NULL, UNIQUE (stream, version))",
    "CREATE INDEX events_time ON events (time)",
    # One row per append: the id a host that lost its connection looks up (R18).
    "CREATE TABLE attempts (attempt TEXT PRIMARY KEY, first_seq BIGINT NOT NULL, last_seq BIGINT NOT NULL)",
    "CREATE TABLE blobs (digest TEXT PRIMARY KEY, data BYTEA NOT NULL)",
    "CREATE TABLE snapshots (name TEXT PRIMARY KEY, seq BIGINT NOT NULL, format INTEGER NOT NULL, data BYTEA NOT NULL)",
    "CREATE TABLE snapshot_generations (gen BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, base BIGINT NOT NULL, "
    "seq BIGINT NOT NULL, format INTEGER NOT NULL, head BYTEA NOT NULL, entries INTEGER NOT NULL, written BIGINT NOT NULL)",
    "CREATE TABLE snapshot_entries (part TEXT NOT NULL, key TEXT NOT NULL, gen BIGINT NOT NULL, value BYTEA, "
    "PRIMARY KEY (part, key, gen))",
    _BY_GEN,
    "CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'the event log is append-only (%)', TG_TABLE_NAME; END $$",
    *(f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} FOR EACH ROW "
      "EXECUTE FUNCTION refuse_change()" for table in ("events", "blobs", "attempts")),
    *(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} FOR EACH STATEMENT "
      "EXECUTE FUNCTION refuse_change()" for table in ("events", "blobs", "attempts")),
    _APPEND_FUNCTION,
    _APPEND_AFTER_FUNCTION,
    # For auditors with psql: times as ISO 8601 UTC text to the microsecond, as the ledger shows them.
    "CREATE VIEW event_log AS SELECT seq, stream, version, type, to_char(timestamp 'epoch' + time * interval "
    "'1 microsecond', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS time_utc, actor, payload, hash FROM events",
]


_TABLES = frozenset({"meta", "events", "attempts", "blobs", "snapshots", "snapshot_generations", "snapshot_entries",
                     "event_log"})
"""What a ledger's schema holds (``_DDL``): a schema holding anything less is not a ledger."""


class PostgresStore(SQLStore[psycopg.Connection[Any]]):
    """One ledger in a PostgreSQL database (or schema). Safe to share between threads; one
    connection per store, as a host would hold."""

    def __init__(self, url: str, *, create: bool = True, busy_timeout: float = 10.0,
                 connect_timeout: float = 10.0, reconnect_for: float = 30.0,
                 max_skew: Micros | None = MAX_CLOCK_SKEW) -> None:
        self._address = pgaddress.parse(url)
        self._conninfo, self.schema, self.path = self._address.conninfo, self._address.schema, self._address.shown
        self.location = url
        self.busy_timeout = busy_timeout
        self.connect_timeout = connect_timeout
        self.reconnect_for = reconnect_for
        self._chains = {}
        self.max_skew = max_skew
        """How far (microseconds) an append's ``now`` may be from the server's clock (None: any)."""
        self.format = 0
        self._lock = threading.RLock()
        self._closed = False
        self._seen = (-1, -1)
        self._tip: tuple[int, Micros, str | None] | None = None
        """The head as this store last knew it (seq, time, hash; the last event it appended, or the head
        when it opened): still the head unless another host wrote since. None: one did, lately."""
        self._ahead: tuple[int, list[Row]] | None = None
        """The log after a seq, returned with this store's last append, for the read that follows it."""
        self._backend: tuple[Any, ...] = ()
        """This connection's server process: ``(pid, backend_start)``."""
        self._conn = self._connect()
        try:
            # The ledger's lock is its schema's, named before the schema exists (a first open makes
            # it): every host's key is the same from the first statement on.
            self._lock_key = _one(self._conn, "SELECT hashtext(coalesce(%s, current_schema(), 'public'))",
                                  (self.schema,))[0]
            self._ensure_schema(create)
            head = self._conn.execute("SELECT seq, time, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
            self._tip = (head[0], head[1], head[2]) if head else (0, 0, None)
        except BaseException:
            self._conn.close()
            raise

    # --- connecting -------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=max(1, int(self.connect_timeout)))
        except psycopg.Error as exc:
            raise self._translate(exc) from None
        try:
            conn.execute(f"SET lock_timeout = {int(self.busy_timeout * 1000)}")
            if self.schema is not None:
                conn.execute("SELECT set_config('search_path', %s, false)", (_quoted(self.schema),))
            # Who this connection is on the server: a store that loses it mid-append ends that
            # backend before looking its append up (``_recover``).
            self._backend = _one(conn, "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()")
        except psycopg.Error as exc:
            conn.close()
            raise self._translate(exc) from None
        return conn

    def _reconnect(self, cause: Exception) -> None:
        """After the connection broke: connect again, for up to ``reconnect_for`` seconds (a server
        restarting), else ``LedgerUnavailable``. Said in the log (the command line shows it on
        stderr): a command that waits must say why."""
        with contextlib.suppress(Exception):
            self._conn.close()
        log.warning("%s: lost the connection to the PostgreSQL server (%s); reconnecting, for up to %.0f s",
                    self.path, self._address.scrub(_first_line(cause)), self.reconnect_for)
        deadline = time.monotonic() + self.reconnect_for
        wait = 0.05
        while True:
            try:
                self._conn = self._connect()
                log.info("%s: reconnected", self.path)
                return
            except LedgerUnavailable:
                if time.monotonic() > deadline:
                    raise LedgerUnavailable(f"{self.path}: lost the connection to the PostgreSQL server "
                                            f"({self._address.scrub(_first_line(cause))}) and could not reconnect "
                                            f"within {self.reconnect_for:.0f} s; check the server") from None
                time.sleep(wait)
                wait = min(1.0, wait * 2)

    def _recover(self, attempt: str, cause: Exception) -> list[Row] | None:
        """After the connection broke during an append: whether it landed (its rows) or not (None),
        known for certain. The backend that carried it may still be alive, its COMMIT on the way
        (a relay that delivers late): it is ended first (only that backend: its pid and start time),
        and the lookup takes the ledger's lock, which that transaction held until it ended, so the
        answer is never read while the append is still in flight (R18: applied once or not at all)."""
        lost = self._backend
        deadline = time.monotonic() + self.reconnect_for
        while True:
            self._reconnect(cause)
            try:
                with contextlib.suppress(pg.InsufficientPrivilege):
                    self._conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s AND "
                                       "backend_start = %s", lost)
                with self._conn.transaction():
                    self._conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._lock_key))
                    return self._attempt(attempt)
            except psycopg.Error as exc:
                if time.monotonic() > deadline or not (self._broken() or isinstance(exc, pg.LockNotAvailable)):
                    raise self._translate(exc) from None
                cause = exc

    def _broken(self) -> bool:
        return self._conn.broken or (self._conn.closed and not self._closed)

    def _run(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """``work`` on the connection, asked again after a reconnect if the connection broke (for
        reads, and writes that are safe to repeat); the server's errors typed."""
        with self._lock:
            if self._closed:
                raise LedgerUnavailable(f"{self.path}: the ledger was closed; open it again")
            while True:
                try:
                    return work(self._conn)
                except psycopg.Error as exc:
                    if not self._broken() or self._exclusive:
                        raise self._translate(exc) from None
                    self._reconnect(exc)

    def _write(self, work: Callable[[psycopg.Connection[Any]], _T], lock: int | None = None) -> _T:
        def transaction(conn: psycopg.Connection[Any]) -> _T:
            with conn.transaction():
                if lock is not None:  # appends, generations and leases each one at a time, under a lock of their own
                    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS + lock, self._lock_key))
                return work(conn)
        return self._run(transaction)

    def _fetch(self, db: psycopg.Connection[Any], sql: str, params: Sequence[Any] = ()) -> list[Any]:
        cursor = db.execute(sql.replace("?", "%s"), params or None)
        return cursor.fetchall() if cursor.description is not None else []

    def _many(self, db: psycopg.Connection[Any], sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with db.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), list(rows))

    def _copy(self, db: psycopg.Connection[Any], table: str, columns: str, rows: Iterable[Sequence[Any]]) -> None:
        with db.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def _ensure_schema(self, create: bool) -> None:
        conn = self._conn
        if self._holds_ledger():
            return
        if not create:
            raise NoLedgerYet(f"there is no ledger at {self.path}: check the URL (nothing was created)")
        try:
            with conn.transaction():
                # Hosts making the same ledger at once: one makes it, the others find it made.
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._lock_key))
                if self.schema is not None:
                    conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_quoted(self.schema)}")
                if not self._holds_ledger():
                    for statement in _DDL:
                        conn.execute(statement)
                    conn.execute("INSERT INTO meta VALUES ('format_version', %s)", (str(FORMAT_VERSION),))
        except psycopg.Error as exc:
            raise self._translate(exc) from None
        self._check_format(conn)

    def _holds_ledger(self) -> bool:
        """Whether the ledger's schema holds a ledger (False: it holds nothing). One that holds
        tables that are not a ledger's is refused: a ledger is never written among an
        application's own tables, nor read from them."""
        names, appends, by_gen = _one(self._conn, "SELECT array_agg(c.relname) FILTER (WHERE c.relkind <> 'i'), "
                                      "to_regproc('ledger_append_v1') IS NOT NULL AND "
                                      "to_regproc('ledger_append_v2') IS NOT NULL, "
                                      "coalesce(bool_or(c.relname = 'snapshot_entries_by_gen'), false) "
                              "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = "
                              "coalesce(%s, current_schema()) AND c.relkind IN ('r', 'v', 'm', 'p', 'f', 'i')",
                              (self.schema,))
        found = set(names or ())
        if not found:
            return False
        if _TABLES <= found:
            self._check_format(self._conn)
            if not appends or not by_gen:  # made by 0.3 (whose appends were made by the client) or 0.4
                with self._conn.transaction():
                    self._conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._lock_key))
                    self._conn.execute(_APPEND_FUNCTION)
                    self._conn.execute(_APPEND_AFTER_FUNCTION)
                    self._conn.execute(_BY_GEN)
            return True
        shown = ", ".join(sorted(found)[:5]) + (", ..." if len(found) > 5 else "")
        raise InvalidArgument(f"{self.path} holds tables that are not a ledger's ({shown}): a ledger needs a database "
                              "or a schema of its own; give another database, or ?schema=name for a new schema; "
                              "nothing was written")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._conn.close()

    # --- transactions -----------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise LedgerUnavailable(f"{self.path}: the ledger was closed; open it again")
            try:
                with self._conn.transaction():
                    self._conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, self._lock_key))
                    self._exclusive = True
                    try:
                        yield
                    finally:
                        self._exclusive = False
            except psycopg.Error as exc:
                raise self._translate(exc) from None

    # --- the log ----------------------------------------------------------------------------

    def append(self, events: Sequence[NewEvent], conditions: Mapping[str, int], now: Micros, actor: str, *,
               expected_head: int | None = None, blobs: Mapping[str, bytes] | None = None) -> Appended:
        check_append(events, blobs)
        attempt = uuid.uuid4().hex
        streams = sorted(conditions)
        arguments = (self._lock_key, expected_head, streams, [conditions[s] for s in streams],
                     [e.stream for e in events], [e.type for e in events], [e.schema_version for e in events],
                     [e.payload for e in events], now, actor, attempt, self.max_skew, list((blobs or {}).keys()),
                     list((blobs or {}).values()))
        with self._lock:
            if self._closed:
                raise LedgerUnavailable(f"{self.path}: the ledger was closed; open it again")
            self._ahead = None
            while True:
                try:
                    found = self._append_on_tip(events, conditions, now, actor, expected_head, blobs, attempt) \
                        or self._append_by_function(arguments, expected_head, len(events))
                    break
                except psycopg.Error as exc:
                    if exc.sqlstate in (_MOVED, _SKEWED):
                        raise self._refusal(exc, now) from None
                    if not self._broken() or self._exclusive:
                        raise self._translate(exc) from None
                    try:
                        landed = self._recover(attempt, exc)
                    except LedgerUnavailable as gone:
                        raise OutcomeUnknown(
                            f"{str(gone).removesuffix('; check the server')}: the command was sent and its answer "
                            f"lost, so it may or may not have been recorded (attempt {attempt}); once the server is "
                            f"back, ledger.outcome({attempt!r}) says which: ask before retrying it", attempt) from None
                    if landed is not None:  # it was committed; only the answer was lost
                        found = landed
                        break
                    # Not committed: made again (its conditions checked again, on the server).
            rows = found
            previous = rows[0][0] - 1
            if self._seen[0] == previous:
                self._seen = (rows[-1][0], self._seen[1])
            # The tip is worth trying next time only if no other host wrote between the caller's
            # state and this append: where another does, the tip's statement would fail (and take
            # the lock) before the function appends (2.6 statements a command, not 1, at 4 hosts).
            alone = expected_head is None or expected_head == previous
            self._tip = (rows[-1][0], rows[-1][5], rows[-1][8]) if alone else None
        return Appended([(r[0], r[1], r[2], r[5]) for r in rows], previous)

    def _append_by_function(self, arguments: tuple[Any, ...], expected_head: int | None, count: int) -> list[Row]:
        """The ``count`` rows appended by the server's function: ``ledger_append_v1`` where the caller's
        state is this store's tip (no other host wrote since, most likely), else ``ledger_append_v2``,
        which also returns the rows other hosts appended after ``expected_head``: kept for the read
        that follows (``HeldState.extend`` reads them next), so the caller's state catches up without
        asking again."""
        tip = self._tip
        if expected_head is None or (tip is not None and tip[0] == expected_head):
            return self._conn.execute(_APPEND, arguments).fetchall()
        rows: list[Row] = self._conn.execute(_APPEND_AFTER, arguments).fetchall()
        own, before = rows[-count:], rows[:-count]
        if before and len(before) == own[0][0] - 1 - expected_head:  # all of them (not cut at _AHEAD)
            self._ahead = (expected_head, rows)
        return own

    def _append_on_tip(self, events: Sequence[NewEvent], conditions: Mapping[str, int], now: Micros, actor: str,
                       expected_head: int | None, blobs: Mapping[str, bytes] | None, attempt: str) -> list[Row]:
        """A host that appends alone, in one statement whose rows it computed itself (cheaper on the
        server than ``ledger_append_v1``: a single-event command at 0.87x a raw one-row transaction,
        against 0.71x): the caller decided on the log as this store last left it (``expected_head``
        is our tip), so no conditioned stream can have moved unless the log grew. The rows are
        computed from the tip and inserted, under the lock, only if the log's head is still the tip
        and the clock is the server's (R18); empty (nothing written) if not, or if the append needs
        more than the tip tells (a stream it does not condition on, attachments): then the
        function appends it."""
        tip = self._tip
        if tip is None or expected_head != tip[0] or blobs or self._exclusive or \
                any(e.stream not in conditions for e in events):
            return []
        last_seq, last_time, previous_hex = tip
        rows = chained_rows(events, dict(conditions), last_seq, max(now, last_time + 1), actor, previous_hex)
        values = ", ".join(["(%s::bigint, %s::text, %s::bigint, %s::text, %s::integer, %s::bigint, %s::text, "
                            "%s::text, %s::text)"] * len(rows))
        # One statement, so one round trip and its own transaction: the lock, the rows (only if the
        # head is still the tip) and the attempt id. Should another writer commit between this
        # statement's snapshot and its lock, the rows collide with its sequence numbers (a unique
        # key), and nothing is written.
        try:
            landed, server = _one(
                self._conn, "WITH locked AS (SELECT pg_advisory_xact_lock(%s, %s)), "
                f"landed AS (INSERT INTO events ({COLUMNS}, hash) SELECT v.* FROM (VALUES {values}) AS v, locked "
                f"WHERE (SELECT coalesce(max(seq), 0) FROM events) = %s AND abs(%s - {_SERVER_NOW}) <= %s "
                "RETURNING seq), "
                "noted AS (INSERT INTO attempts SELECT %s, %s, %s WHERE EXISTS (SELECT 1 FROM landed)) "
                f"SELECT count(*), {_SERVER_NOW} FROM landed",
                [_LOCK_CLASS, self._lock_key, *(field for row in rows for field in row), last_seq, now,
                 2 ** 62 if self.max_skew is None else self.max_skew, attempt, rows[0][0], rows[-1][0]])
        except pg.UniqueViolation:
            landed, server = 0, now
        if not landed:
            self._hold(now, server)  # refused on the server's clock here, as the function would refuse it
            self._tip = None  # another writer appended since our tip: the function decides
            return []
        return rows

    def _refusal(self, exc: psycopg.Error, now: Micros) -> LedgerError:
        """The append function's own refusals: a stream that moved (R4), a clock too far (R18)."""
        diag = exc.diag
        if exc.sqlstate == _MOVED:
            return moved(diag.message_primary or "", int(diag.message_hint or 0), int(diag.message_detail or 0))
        return self._skew(now, int(diag.message_primary or 0))

    def _skew(self, now: Micros, server: Micros) -> ClockSkew:
        """R6, R18: no host's clock may move the others' time. An append whose ``now`` (this host's
        clock, or the one given to ``Ledger.open``) is further than ``max_skew`` from the server's
        is refused (by ``ledger_append``, on the server) before anything is written."""
        ahead = now > server
        return ClockSkew(
            f"{self.path}: this host's clock reads {iso(now)}, {abs(now - server) / 1e6:.1f} s "
            f"{'ahead of' if ahead else 'behind'} the PostgreSQL server's {iso(server)} (at most "
            f"{(self.max_skew or 0) / 1e6:g} s is allowed): "
            + ("its events would move every host's time, and a table dropped elsewhere could be purged early"
               if ahead else "its leases and retention would be judged on another time than the other hosts'")
            + "; nothing was recorded. Set this host's clock (NTP), or, for a test that drives its own clock, "
              "open the ledger with max_clock_skew=None")

    def attempt_landed(self, attempt: str) -> bool:
        """Looked up under the ledger's append lock, which the append held until it ended: never
        read while it may still be in flight."""
        def look(conn: psycopg.Connection[Any]) -> bool:
            return conn.execute("SELECT 1 FROM attempts WHERE attempt = %s", (attempt,)).fetchone() is not None
        return self._write(look, lock=0)

    def _attempt(self, attempt: str) -> list[Row] | None:
        """The rows an append with this id committed, or None if it never was."""
        found = self._conn.execute("SELECT first_seq, last_seq FROM attempts WHERE attempt = %s", (attempt,)).fetchone()
        if found is None:
            return None
        return self._conn.execute(f"SELECT {COLUMNS}, hash FROM events WHERE seq BETWEEN %s AND %s ORDER BY seq",
                                  found).fetchall()

    def changed_elsewhere(self) -> bool:
        def look(c: psycopg.Connection[Any]) -> tuple[Any, ...]:
            return _one(c, "SELECT coalesce((SELECT max(seq) FROM events), 0), "
                             "coalesce((SELECT max(gen) FROM snapshot_generations), 0)")
        seen = self._run(look)
        changed, self._seen, self._ahead = seen != self._seen, seen, None  # a read after this reads on to the head
        return changed

    _CONTAINS = "strpos"

    def read(self, after: int = 0, *, upto: int | None = None, batch: int = 20_000, with_hash: bool = False,
             actor: str | None = None, types: Sequence[str] | None = None,
             containing: Sequence[str] | None = None) -> Iterator[Row]:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == after and batch >= 1 and actor is None and types is None \
                and containing is None:
            # Returned with the last append (``ledger_append_v2``): the log as it stood when that
            # append committed, a moment ago, as a read then would have found it.
            yield from (row if with_hash else row[:8] for row in ahead[1] if upto is None or row[0] <= upto)
        else:
            yield from super().read(after, upto=upto, batch=batch, with_hash=with_hash, actor=actor, types=types,
                                    containing=containing)

    def seq_at(self, time_: Micros) -> int:
        row = self._run(lambda c: c.execute("SELECT seq FROM events WHERE time <= %s ORDER BY time DESC LIMIT 1",
                                            (time_,)).fetchone())
        return 0 if row is None else row[0]

    _STATEMENTS = "CREATE TABLE IF NOT EXISTS statements (digest TEXT PRIMARY KEY, data BYTEA NOT NULL, " \
                  "kept_at BIGINT NOT NULL)"

    def forget_statement(self, digest: str) -> bool:
        """Deleted, then the table vacuumed, so its dead row is gone from its pages too (best effort:
        a transaction another session holds open keeps it until the next vacuum)."""
        if not self._has_statements():
            return False
        gone = self._run(lambda c: c.execute("DELETE FROM statements WHERE digest = %s", (digest,)).rowcount > 0)
        with contextlib.suppress(LedgerError):
            self._run(lambda c: c.execute("VACUUM statements"))
        return bool(gone)

    def redact(self, seq: int, payload: str) -> None:
        """The append-only trigger is disabled for the one update, in its transaction (the ledger's
        role owns its tables), then the table vacuumed so the old row's bytes go from its pages."""
        def update(c: psycopg.Connection[Any]) -> None:
            with c.transaction():
                check_redactable(seq, c.execute("SELECT type, schema_version FROM events WHERE seq = %s FOR UPDATE",
                                                (seq,)).fetchone())
                c.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
                c.execute("UPDATE events SET payload = %s WHERE seq = %s", (payload, seq))
                c.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")
        self._run(update)
        with contextlib.suppress(LedgerError):
            self._run(lambda c: c.execute("VACUUM events"))

    def _has_statements(self) -> bool:
        return bool(self._run(lambda c: _one(c, "SELECT to_regclass(%s) IS NOT NULL",
                                             (f"{_quoted(self.schema)}.statements" if self.schema else "statements",))[0]))

    def integrity_problems(self) -> list[str]:
        """What the server cannot catch by itself: a gap in the sequence (rows deleted with the
        triggers dropped). Pages are the server's own business (``amcheck``, checksums)."""
        count, last = self._run(lambda c: _one(c, "SELECT count(*), coalesce(max(seq), 0) FROM events"))
        return [] if count == last else [f"the log holds {count} events but its last is #{last}: events are missing"]

    def generation_part(self, generation: Generation, part: str) -> PostgresPart:
        return PostgresPart(self, generation, part)

    def check_clock(self, now: Micros) -> None:
        self._hold(now, self._run(lambda conn: _one(conn, f"SELECT {_SERVER_NOW}"))[0])

    def _hold(self, now: Micros, server: Micros) -> None:
        """Hold a reading of this host's clock to the server's, as ``ledger_append`` does (R18)."""
        if self.max_skew is not None and abs(now - server) > self.max_skew:
            raise self._skew(now, server)

    # --- errors -------------------------------------------------------------------------------

    def _translate(self, exc: psycopg.Error) -> LedgerError:
        """The server's error as the ledger's typed one, in one line naming the ledger (and never
        its password: what libpq says is scrubbed of it, R23)."""
        where, what = self.path, self._address.scrub(_first_line(exc))
        option = _BAD_OPTION.search(what)
        if isinstance(exc, psycopg.OperationalError) and option is not None:
            name = option.group("n1") or option.group("n2") or option.group("n3")
            return InvalidArgument(f"{where}: the address's option {name} is not valid ({what}); "
                                   "fix it in the URL (libpq's options: https://www.postgresql.org/docs/current/"
                                   "libpq-connect.html#LIBPQ-PARAMKEYWORDS); nothing was opened")
        if isinstance(exc, psycopg.OperationalError) and _SERVICE_FAULT.search(what):
            return InvalidArgument(f"{where}: libpq cannot use the address's service ({what}); define it in a service "
                                   f"file libpq reads ({pgaddress.SERVICES}), or fix that file; nothing was opened")
        if isinstance(exc, (pg.LockNotAvailable, pg.QueryCanceled, pg.SerializationFailure, pg.DeadlockDetected)):
            return Conflict(f"{where}: the ledger stayed locked by another writer ({what})")
        if isinstance(exc, pg.UniqueViolation):
            return Conflict(f"{where}: another writer appended at the same place ({what})")
        if isinstance(exc, pg.InvalidCatalogName):
            return LedgerNotFound(f"{where}: {what}; create the database first (createdb), then open the ledger")
        if isinstance(exc, (pg.InvalidPassword, pg.InvalidAuthorizationSpecification)):
            return LedgerUnavailable(f"{where}: the server refused the login ({what}); check the user and password "
                                     "(or ~/.pgpass)")
        if isinstance(exc, pg.InsufficientPrivilege):
            return LedgerUnavailable(f"{where}: permission denied ({what}); the ledger's user needs to read and "
                                     "write its tables")
        if isinstance(exc, pg.ReadOnlySqlTransaction):
            return LedgerUnavailable(f"{where}: the server is read-only ({what}); nothing was written (is it a standby?)")
        if isinstance(exc, (pg.DiskFull, pg.OutOfMemory, pg.InsufficientResources)):
            return LedgerUnavailable(f"{where}: the server is out of space or memory ({what}); nothing was written")
        if isinstance(exc, pg.RaiseException):
            return LedgerCorrupt(f"{where}: {what}")
        if isinstance(exc, psycopg.OperationalError) and "does not exist" in what and "database" in what:
            database = what.split('database "', 1)[-1].split('"', 1)[0]
            return LedgerNotFound(f"{where}: the database {database} does not exist; create it first "
                                  f"(createdb {database}), then open the ledger")
        if isinstance(exc, psycopg.OperationalError) and "authentication failed" in what:
            return LedgerUnavailable(f"{where}: the server refused the login ({what.split('FATAL:')[-1].strip()}); "
                                     "check the user and password (or ~/.pgpass)")
        if isinstance(exc, psycopg.OperationalError):
            return LedgerUnavailable(f"{where}: cannot reach the PostgreSQL server ({what}); check that it runs and "
                                     "that this host may connect")
        return LedgerUnavailable(f"{where}: PostgreSQL error: {what}")


class PostgresPart(SealedPart[PostgresStore]):
    """One part of one generation (``contract.StoredPart``): an entry is the newest of its key in
    the generation's chain up to it."""

    __slots__ = ()

    def get(self, key: str) -> bytes | None:
        exists, value = self._store._run(lambda c: _one(
            c, "SELECT EXISTS (SELECT 1 FROM snapshot_generations WHERE gen = %(gen)s), "
            "(SELECT value FROM snapshot_entries WHERE part = %(part)s AND key = %(key)s "
            "AND gen = ANY(%(chain)s) ORDER BY gen DESC LIMIT 1)",
            {"gen": self._gen, "chain": sorted(self._chain), "part": self._part, "key": key}))
        if not exists:
            raise self._gone("is no longer stored")
        return None if value is None else self._unseal(key, value)

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), MANY):
            rows = self._read("SELECT DISTINCT ON (key) key, value FROM snapshot_entries WHERE part = %s AND "
                              "key = ANY(%s) AND gen = ANY(%s) ORDER BY key, gen DESC",
                              (self._part, list(keys[start:start + MANY]), sorted(self._chain)))
            found.update((key, self._unseal(key, value)) for key, value in rows if value is not None)
        return found

    def scan_sealed(self) -> Iterator[tuple[str, object]]:
        return ((key, value) for key, value in self._read(
            "SELECT DISTINCT ON (key) key, value FROM snapshot_entries WHERE part = %s AND gen = ANY(%s) "
            "ORDER BY key, gen DESC", (self._part, sorted(self._chain))) if value is not None)

    def _read(self, query: str, params: Sequence[Any]) -> list[tuple[str, Any]]:
        """The rows of ``query``, in one snapshot with the check that the generation is still stored
        (``SnapshotGone`` if not)."""
        def rows(c: psycopg.Connection[Any]) -> tuple[bool, list[tuple[str, Any]]]:
            with c.transaction():  # one snapshot for both
                exists = _one(c, "SELECT EXISTS (SELECT 1 FROM snapshot_generations WHERE gen = %s)", (self._gen,))[0]
                return exists, c.execute(query, params).fetchall()
        exists, found = self._store._run(rows)
        if not exists:
            raise self._gone("is no longer stored")
        return found


def _one(conn: psycopg.Connection[Any], query: str, params: Any = ()) -> tuple[Any, ...]:
    """The row a query always answers (an aggregate, an ``EXISTS``, a ``RETURNING`` of one insert)."""
    row = conn.execute(query, params).fetchone()
    if row is None:
        raise LedgerCorrupt("the database answered no row where one always comes; check the server")
    return tuple(row)


_SERVICE_FAULT = re.compile(r'service "[^"]*" not found|service file')
"""libpq's words when the address's service is not defined, or its service file is missing or unreadable."""
_BAD_OPTION = re.compile(r'invalid (?:(?P<n1>\w+) value|integer value "[^"]*" for connection option "(?P<n2>\w+)"|'
                         r'connection option "(?P<n3>\w+)")')


_SERVER_NOW = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
"""The server's clock, in the log's unit: what every host's time is held to (R18)."""


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]

