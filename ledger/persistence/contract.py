"""What every backend of a ledger must do: an event log, and a place for snapshots.

Two contracts, kept apart because they promise different things:

* ``EventStore``: the log, which is the truth. An append is atomic, conditional on stream
  versions (R4), durable when it returns, and chained (R16): each event gets the next
  global sequence number, the next version of its stream, a time strictly after the
  previous event's, and the SHA-256 hash (``chain.event_hash``) linking it to the event
  before, computed by the store inside the appending transaction. Nothing is ever updated
  or deleted. Errors are the ledger's typed ones: a lost race ``Conflict``, an unreachable
  or read-only store ``LedgerUnavailable``, damage ``LedgerCorrupt``.
* ``SnapshotStore``: caches of folded state, never the truth: numbered *generations* of keyed
  entries, each the state at one event, read one key at a time (the newest is the stored state of
  the present; every one is a point ``as_of`` starts from, R17), and the named documents of earlier
  releases, only listed and deleted.
  Generations are kept (only ``delete_generations`` forgets them), so a reader holding one is
  never cut off.

``SQLStore`` is what the two SQL backends share, written once. ``tests/store_contract.py`` holds
the tests every backend must pass; a backend's own test module
subclasses them. The state cache (``cache``) and the command loop (``ledger.runner``) use
only what is here.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import zlib
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, NamedTuple, Protocol, Sequence, TypeVar

from ..chain import GENESIS, REDACTABLE, event_hash, redacted_row
from ..clock import Micros
from ..core import events
from ..errors import Conflict, IncompatibleLedger, InvalidArgument, LedgerCorrupt, LedgerNotFound

CHAIN_FORMAT = 2
"""The first log format whose rows carry the hash chain (format 1: a SQLite file of an early release)."""
FORMAT_VERSION = 2
"""The log format this release writes; a newer one is refused, never guessed."""

Row = events.Row
"""A stored event, as ``read`` gives it and ``copy_in`` takes it (``core.events.Row``)."""

_POSTGRES_URL = re.compile(r"^\s*(postgresql|postgres)(\+[A-Za-z0-9_.-]+)?://", re.IGNORECASE)


def postgres_scheme(where: str) -> re.Match[str] | None:
    """The scheme of a PostgreSQL URL (group 1: ``postgresql`` or ``postgres``; a driver-style one,
    ``postgresql+psycopg://``, too), or None. A libpq ``key=value`` string has none: whether a text
    is one is libpq's to say (``pgaddress.is_conninfo``)."""
    return _POSTGRES_URL.match(where)

MAX_CLOCK_SKEW = 60 * 1_000_000
"""How far (microseconds) a host's clock may be from a shared store's before its appends are refused
(``ClockSkew``): every host of a PostgreSQL ledger is held to the server's clock (R6, R18). A minute
is far more than NTP leaves between hosts, and far less than any retention."""


def check_redactable(seq: int, kind: Sequence[object] | None) -> None:
    """Refuse to redact event #``seq`` unless it is a 0.7 erasure request (``chain.REDACTABLE``):
    ``kind`` is its stored ``(type, schema_version)``, None if there is no such event. Every store's
    ``redact`` asks it inside the transaction that changes the row."""
    if kind is None or tuple(kind) != REDACTABLE:
        raise InvalidArgument(f"event #{seq} is no 0.7 erasure request: only such a request's predicate is ever "
                              "redacted")


def check_append(events: Sequence[NewEvent], blobs: Mapping[str, bytes] | None) -> None:
    """What every ``append`` refuses before it writes anything."""
    for digest, data in (blobs or {}).items():
        if hashlib.sha256(data).hexdigest() != digest:
            raise ValueError(f"attachment digest {digest} does not match its bytes")
    if not events:
        raise ValueError("append needs at least one event")


def moved(stream: str, expected: int, actual: int) -> Conflict:
    """The refusal of an append whose conditioned ``stream`` moved (R4)."""
    return Conflict(f"stream {stream!r} moved: it was read at version {expected} and is now at {actual}",
                    stream=stream, expected=expected, actual=actual)


def check_copied(rows: Sequence[Row], head: tuple[int, str | None], where: str,
                 after: tuple[int, str | None]) -> None:
    """That the log's last event is ``head`` (its seq and hash), the one the copy last put there
    (``after``; ``(0, None)`` for its first batch), and that the copied rows follow on from it and
    chain on from one another, each hash as ``chain.event_hash`` computes it (``copy_in``)."""
    if tuple(head) != tuple(after):
        raise InvalidArgument(f"{where} is not empty: another copy (or a writer) put events in it while this copy "
                              "ran; nothing more was copied: copy into a new ledger")
    last_seq, last_hash = head
    previous = GENESIS if last_hash is None else bytes.fromhex(last_hash)
    for row in rows:
        if row[0] != last_seq + 1:
            raise LedgerCorrupt(f"{where}: a copied event is #{row[0]} where #{last_seq + 1} comes next; the copy "
                                "stopped (was something else writing to the destination?)")
        previous = event_hash(previous, *row[:8])
        if previous.hex() != row[8] and redacted_row(row):  # a forgotten 0.7 predicate: its verify confirms it
            previous = bytes.fromhex(row[8])
        if previous.hex() != row[8]:
            raise LedgerCorrupt(f"{where}: copied event #{row[0]} does not carry the hash its content and the event "
                                "before give; the source was edited (run verify on it); nothing was copied")
        last_seq = row[0]


def chained_rows(events: Sequence[NewEvent], versions: dict[str, int], last_seq: int, moment: Micros, actor: str,
                 previous_hex: str | None, version_of: Callable[[str], int] | None = None) -> list[Row]:
    """The rows of ``events`` appended after event ``last_seq`` (hash ``previous_hex``; None: the log is
    empty), timed from ``moment`` on, each with the next version of its stream and its chain hash:
    what every backend that chains in the client writes. ``versions`` holds each stream's current
    version (and is moved on); a stream it lacks is asked of ``version_of``."""
    previous = GENESIS if previous_hex is None else bytes.fromhex(previous_hex)
    rows = []
    for offset, event in enumerate(events):
        stream = event.stream
        version = versions.get(stream)
        if version is None:
            if version_of is None:
                raise KeyError(f"no version known for stream {stream!r}")
            version = version_of(stream)
        versions[stream] = version + 1
        row = (last_seq + 1 + offset, stream, version + 1, event.type, event.schema_version, moment + offset,
               actor, event.payload)
        previous = event_hash(previous, *row)
        rows.append((*row, previous.hex()))
    return rows


LEASE_PREFIX = "lease:"
"""Leases are meta rows (``lease:<name>`` -> ``{"holder": ..., "until": micros}``), beside the log."""


class Lease(NamedTuple):
    """Who holds a lease, and until when (unless they renew it)."""
    holder: str
    until: Micros


Gone = Callable[[str], bool]
"""Whether a lease's holder (as stored) is known to have ended, so that its lease holds nothing
(``holders.gone``: a process that ran on this host and is no more)."""


def stored_lease(found: str | None) -> Lease | None:
    """A stored lease (its meta value): None for none, or an unreadable one (it holds nothing)."""
    if found is None:
        return None
    try:
        held = json.loads(found)
        return Lease(str(held["holder"]), int(held["until"]))
    except (ValueError, KeyError, TypeError):
        return None


def lease_held(found: str | None, holder: str, now: Micros, gone: Gone | None = None) -> Lease | None:
    """The lease a stored one (its meta value, or None) holds against ``holder`` at ``now``: None if
    it is free (none, ended, ``holder``'s own, or its holder ``gone``), else who holds it until when."""
    lease = stored_lease(found)
    if lease is None or lease.holder == holder or lease.until <= now or (gone is not None and gone(lease.holder)):
        return None
    return lease


def lease_value(holder: str, until: Micros) -> str:
    return json.dumps({"holder": holder, "until": until})


def seal(part: str, key: str, value: bytes) -> bytes:
    """A snapshot entry as a backend stores it: a CRC-32 over its part, key and bytes, then the
    bytes. Over the part and key too: an entry moved to another key (two scopes' watermarks
    swapped) fails its check like a changed one."""
    return _crc(part, key, value) + value


def unseal(part: str, key: str, stored: object) -> bytes | None:
    """The bytes of a stored entry, or None if it fails its check."""
    if not isinstance(stored, (bytes, bytearray, memoryview)):
        return None
    stored = bytes(stored)
    body = stored[4:]
    return body if len(stored) >= 4 and _crc(part, key, body) == stored[:4] else None


def _crc(part: str, key: str, value: bytes) -> bytes:
    return zlib.crc32(value, zlib.crc32(f"{part}\0{key}\0".encode())).to_bytes(4, "big")


class SnapshotGone(Exception):
    """A stored snapshot could not answer a read: its generation is no longer stored, or an
    entry failed its check. Never leaves the persistence package: the entries that met it
    heal from the log (``lazy``)."""


class NoLedgerYet(LedgerNotFound):
    """The store is there and reachable, and holds no ledger (it was opened with ``create=False``)."""


class NewEvent(NamedTuple):
    """An event as the store sees it: where it goes, what kind it is, and opaque bytes."""
    stream: str
    type: str
    schema_version: int
    payload: str


class Appended(NamedTuple):
    """Where the events landed: ``(seq, stream, version, time)`` each, and the head before them."""
    rows: list[tuple[int, str, int, Micros]]
    previous_head: int


class Generation(NamedTuple):
    """One stored generation of the keyed snapshot: full (``base == gen``), or the entries
    changed since an earlier one of the chain that starts at full generation ``base``."""
    gen: int
    base: int
    seq: int
    format: int
    head: bytes
    entries: int
    """How many entries this generation wrote (deletions included)."""


class StoredPart(Protocol):
    """One part of one generation (``lazy.Source``): each read raises ``SnapshotGone`` if the
    generation is no longer stored or an entry fails its check."""

    def get(self, key: str) -> bytes | None: ...

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]: ...

    def scan(self) -> Iterator[tuple[str, bytes]]: ...


MANY = 500
"""Keys asked for in one statement by ``get_many`` (well inside every backend's limit on parameters)."""


_S = TypeVar("_S", bound="SQLStore[Any]")
_T = TypeVar("_T")


class SealedPart(ABC, Generic[_S]):
    """What every backend's ``StoredPart`` shares: its store, which part of which generation it
    reads, the generations of its chain (chains interleave: a backend reads the entries of a range
    of generations and keeps those of the chain), and the refusals (``SnapshotGone``) for a
    generation no longer stored or an entry whose seal (``seal``) does not match."""

    __slots__ = ("_store", "_gen", "_base", "_part", "_chain")

    def __init__(self, store: _S, generation: Generation, part: str) -> None:
        self._store = store
        self._gen, self._base, self._part = generation.gen, generation.base, part
        self._chain = store._chain(generation)

    @property
    def depth(self) -> int:
        """The generations a pass over the part reads: every version of every key along its chain
        (``lazy.WHOLE`` weighs a pass by it)."""
        return len(self._chain)

    def _newest(self, rows: Iterable[tuple[int, object]]) -> object:
        """Of ``(gen, value)`` rows, newest first, the value of the newest of the chain (None: none)."""
        chain = self._chain
        return next((value for gen, value in rows if gen in chain), None)

    def scan(self) -> Iterator[tuple[str, bytes]]:
        unseal = self._unseal
        return ((key, unseal(key, value)) for key, value in self.scan_sealed())

    @abstractmethod
    def scan_sealed(self) -> Iterator[tuple[str, object]]:
        """Every entry of the part as stored, its check left to ``checked`` (``lazy.SealedSource``)."""

    def checked(self, key: str, stored: object) -> bytes:
        return self._unseal(key, stored)

    def _unseal(self, key: str, value: object) -> bytes:
        body = unseal(self._part, key, value)
        if body is None:
            raise self._gone("holds an entry that fails its check (the store was damaged or edited)")
        return body

    def _gone(self, why: str) -> SnapshotGone:
        return SnapshotGone(f"{self._store.path}: the stored snapshot (generation {self._gen}) {why}")


class EventStore(ABC):
    """The append-only, hash-chained event log of one ledger. Safe to share between threads."""

    path: str
    """Where the log is, for messages: a file path, or a database URL without its password."""
    location: str | None = None
    """What ``open_store`` takes to reach this same log from another process (None: nothing can,
    as for an in-memory file). Never shown: a URL may carry a password."""
    format: int
    """The log's format version."""

    @property
    def chained(self) -> bool:
        """Whether the rows carry the hash chain (false only for an un-upgraded format-1 file)."""
        return self.format >= CHAIN_FORMAT

    def upgrade_chain(self, note: NewEvent, now: Micros, actor: str) -> bool:
        """Give a log written before the chain its hashes, recording ``note``; False if there was
        nothing to do. Only a SQLite file of an early release can need it."""
        return False

    @abstractmethod
    def append(self, events: Sequence[NewEvent], conditions: Mapping[str, int], now: Micros, actor: str, *,
               expected_head: int | None = None, blobs: Mapping[str, bytes] | None = None) -> Appended:
        """Append every event atomically if each stream in ``conditions`` is at its version (0: no
        events), else ``Conflict`` naming the stream, writing nothing. ``expected_head``: the last
        seq the caller had seen when it read those versions (if the log has not grown since, the
        checks may be skipped). ``blobs``: digest (SHA-256, hex) -> bytes, stored in the same
        transaction. Events get times strictly after the log's last (``now`` unless it is behind)."""

    @abstractmethod
    def copy_in(self, rows: Sequence[Row], blobs: Mapping[str, bytes], *,
                after: tuple[int, str | None] = (0, None)) -> None:
        """Append rows copied from another ledger as they are (``read(with_hash=True)``: seq, time,
        actor and hash unchanged), with the attachments they name, in one transaction: the log's
        last event must be ``after`` (the seq and hash the copy last put in; ``InvalidArgument``
        if another copy or a writer got there first), and each row must chain on from the one
        before (else ``LedgerCorrupt``); either way nothing is written. How ``copy_ledger`` moves
        a ledger between stores (R18)."""

    @abstractmethod
    def read(self, after: int = 0, *, upto: int | None = None, batch: int = 20_000, with_hash: bool = False,
             actor: str | None = None, types: Sequence[str] | None = None,
             containing: Sequence[str] | None = None) -> Iterator[Row]:
        """Rows with ``after < seq <= upto`` in order, in batches, each a short read (a long replay
        never holds anything); with the stored hash as a ninth field if ``with_hash``. Optionally
        only rows by ``actor``, of ``types``, or whose payload text contains one of ``containing``
        (a coarse filter the caller refines)."""

    @abstractmethod
    def changed_elsewhere(self) -> bool:
        """Whether another connection has committed since this one last asked (cheap)."""

    @abstractmethod
    def version(self, stream: str) -> int: ...

    @abstractmethod
    def head(self) -> tuple[int, Micros]:
        """The last sequence number and its time; (0, 0) for an empty log."""

    @abstractmethod
    def hash_at(self, seq: int) -> str | None:
        """The stored hash of event ``seq`` (hex; None: no such event, or no chain)."""

    @abstractmethod
    def hashes(self, upto: int | None = None, *, batch: int = 100_000) -> Iterator[bytes]:
        """The stored hashes of events ``1..upto`` in order; a missing or unreadable one is
        ``LedgerCorrupt`` naming it."""

    @abstractmethod
    def seq_at(self, time: Micros) -> int:
        """The last seq whose event is timed at or before ``time`` (0: none)."""

    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def event_time(self, seq: int) -> Micros | None: ...

    @abstractmethod
    def read_blob(self, digest: str) -> bytes | None: ...

    def checked_blob(self, digest: str, what: str, parse: Callable[[bytes], _T],
                     edited: str = "does not match its digest") -> _T:
        """Attachment ``digest`` read, checked against its SHA-256 and ``parse``d, or ``LedgerCorrupt``
        naming it ``what`` (``edited``: what is said of bytes the digest does not match)."""
        data = self.read_blob(digest)
        then = "; restore the ledger from a backup (`retention-ledger verify` says what else is wrong)"
        if data is None or hashlib.sha256(data).hexdigest() != digest:
            raise LedgerCorrupt(f"{what} {'is missing' if data is None else edited}{then}")
        try:
            return parse(data)
        except (ValueError, TypeError) as exc:  # orjson's errors are ValueErrors
            raise LedgerCorrupt(f"{what} cannot be read ({exc}){then}") from None

    @abstractmethod
    def blob_digests(self) -> list[str]: ...

    # Statements: an erasure request's keys or predicate (R25), the one thing a ledger stores that
    # it must later delete. Apart from the append-only attachments, and deleted so that no copy is
    # left where the store can help it (SQLite's pages zeroed and its WAL truncated; PostgreSQL's
    # dead rows vacuumed).

    @abstractmethod
    def keep_statement(self, digest: str, data: bytes, at: Micros) -> None:
        """Keep ``data`` under ``digest`` (its SHA-256), kept at ``at`` (a second time: no change)."""

    @abstractmethod
    def read_statement(self, digest: str) -> bytes | None: ...

    @abstractmethod
    def forget_statement(self, digest: str) -> bool:
        """Delete it, and the copies the store keeps of deleted rows; False if it was not kept."""

    @abstractmethod
    def statement_digests(self) -> list[tuple[str, Micros]]:
        """Every statement kept, with when (for a sweep of those no request names)."""

    @abstractmethod
    def redact(self, seq: int, payload: str) -> None:
        """Store ``payload`` in place of event #``seq``'s, a 0.7 erasure request whose predicate is
        forgotten (R25): the one change an event ever takes, recorded first by an event that names
        the new payload's digest, which ``verify`` holds it to. Its stored hash stays, bound by the
        events after it. Anything else is refused (``InvalidArgument``)."""

    @abstractmethod
    def get_meta(self, key: str) -> str | None: ...

    @abstractmethod
    def set_meta_once(self, key: str, value: str) -> str:
        """Set ``key`` unless it is set already; the value it has now (the warehouse root, R10)."""

    def check_clock(self, now: Micros) -> None:
        """Refuse (``ClockSkew``) a reading ``now`` of this host's clock that the store would refuse
        in an append: what a host does on its clock without appending (a dry run's plan) is held to
        the same time as what it appends. A store on one host has that host's clock only: nothing."""

    @abstractmethod
    def exclusive(self) -> AbstractContextManager[None]:
        """Hold the log's write lock across reads and appends (appends inside join it): the way
        out for a writer that keeps losing races."""

    @property
    @abstractmethod
    def in_exclusive(self) -> bool: ...

    @abstractmethod
    def integrity_problems(self) -> list[str]:
        """The backend's own check of its storage; empty when sound."""

    def attempt_landed(self, attempt: str) -> bool:
        """Whether the append that carried ``attempt`` (``OutcomeUnknown.attempt``) was recorded. Only
        a store reached over a network can lose an answer; a file's append answers or fails whole."""
        raise InvalidArgument(f"{self.path} is not a shared store: its commands never lose their answer, so "
                              "there is no attempt to look up")

    @abstractmethod
    def close(self) -> None: ...


class SnapshotStore(ABC):
    """Caches of folded state beside the log: never the truth, always checked against it."""

    @abstractmethod
    def snapshots(self, prefix: str = "") -> list[tuple[str, int]]:
        """``(name, seq)`` of the named snapshots starting with ``prefix``, by seq."""

    @abstractmethod
    def delete_snapshot(self, name: str) -> None: ...

    @abstractmethod
    def latest_generation(self) -> Generation | None:
        """The generation at the latest event (of several there, the last written)."""

    @abstractmethod
    def generations(self) -> list[Generation]:
        """Every stored generation, by event, then as written."""

    @abstractmethod
    def chain_entries(self, generation: Generation) -> tuple[int, int]:
        """Entries written by the full generation ``generation``'s chain starts at, and by the
        deltas after it up to ``generation``."""

    @abstractmethod
    def write_generation(self, seq: int, format: int, head: bytes, entries: Sequence[tuple[str, str, bytes | None]],
                         *, extends: Generation | None, replace: bool = False) -> Generation | None:
        """Store a generation ending at event ``seq``: a delta on ``extends`` (its entries only what
        changed since), or (None) a full one. A delta is written only if ``extends`` is still the
        newest of its chain and ``seq`` after it (so a chain is one line, each delta on the one
        before); a full one unless one is stored at ``seq`` (``replace``: all the same). Returns
        what was written, or None."""

    @abstractmethod
    def generation_entries(self, generation: Generation) -> list[tuple[str, str, bytes | None]]:
        """The entries ``generation`` itself wrote, ``(part, key, value)``, as stored: sealed (``seal``),
        or None for a key deleted since the one before it. ``SnapshotGone`` if it is no longer stored.
        (``verify`` compares each with the bytes it expects, so it need not check the seal.)"""

    @abstractmethod
    def delete_generations(self) -> None:
        """Forget every generation (one disagreed with the log)."""

    @abstractmethod
    def generation_part(self, generation: Generation, part: str) -> StoredPart: ...

    @abstractmethod
    def take_lease(self, name: str, holder: str, until: Micros, now: Micros, *,
                   gone: Gone | None = None) -> Lease | None:
        """Hold lease ``name`` until ``until`` if nobody else holds it at ``now`` (free, ended,
        ``holder``'s already, or held by one that ``gone`` says ended): None when taken, else who
        has it until when. Atomic between processes and hosts (``gone`` is asked inside: of two that
        find a holder gone, one takes its lease over, and the other finds that one): upkeep that
        must run once at a time (``maintain``) takes one. ``now`` is this host's clock: a shared
        store refuses one too far from its own (``ClockSkew``), as it refuses an append."""

    @abstractmethod
    def release_lease(self, name: str, holder: str) -> None:
        """End ``holder``'s lease ``name`` now (nothing if another holds it)."""


class Store(EventStore, SnapshotStore, ABC):
    """A backend: the log and its snapshots, in one place (one file, one database)."""


_C = TypeVar("_C")
COLUMNS = "seq, stream, version, type, schema_version, time, actor, payload"
"""An event's columns, as ``read`` gives them (then its hash, if asked)."""
SELECT_GENERATIONS = "SELECT gen, base, seq, format, head, entries FROM snapshot_generations"


class SQLStore(Store, Generic[_C]):
    """What the SQL backends share: each statement here is the same in SQLite and PostgreSQL but for
    its placeholders (written ``?``: ``_fetch`` gives the backend's), so a backend keeps only the SQL
    that differs (its hot paths among it) and how it runs statements on its connection ``_C``."""

    _chains: dict[tuple[int, int], frozenset[int]]
    """The generations of each chain up to one (``_chain``): a chain only grows, so they are kept."""
    _STATEMENTS: str
    """The statements' table (``CREATE TABLE IF NOT EXISTS``), made when the first is kept."""
    _CONTAINS: str
    """The SQL function that finds a text in another (``instr``, ``strpos``)."""
    _exclusive = False
    """Whether ``exclusive`` holds the write lock now."""

    @property
    def in_exclusive(self) -> bool:
        return self._exclusive

    @abstractmethod
    def _run(self, work: Callable[[_C], _T]) -> _T:
        """``work`` on the connection, each statement its own transaction; errors typed."""

    @abstractmethod
    def _write(self, work: Callable[[_C], _T], lock: int | None = None) -> _T:
        """``work`` in one write transaction; ``lock``: which of the ledger's locks a shared store also
        takes (0: the log's, 1: the generations', 2: the leases'); errors typed."""

    @abstractmethod
    def _fetch(self, db: _C, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement (none for one that returns none)."""

    @abstractmethod
    def _many(self, db: _C, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    @abstractmethod
    def _copy(self, db: _C, table: str, columns: str, rows: Iterable[Sequence[Any]]) -> None:
        """Insert many rows, as the backend does that fastest."""

    @abstractmethod
    def _has_statements(self) -> bool: ...

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._run(lambda db: self._fetch(db, sql, params))

    def version(self, stream: str) -> int:
        return int(self._rows("SELECT coalesce(max(version), 0) FROM events WHERE stream = ?", (stream,))[0][0])

    def _read_format(self, db: _C) -> int:
        found = self._fetch(db, "SELECT value FROM meta WHERE key = 'format_version'")
        if not found or not str(found[0][0]).isdigit():
            raise LedgerCorrupt(f"{self.path}: the ledger's format version is missing or unreadable")
        return int(found[0][0])

    def _check_format(self, db: _C) -> None:
        found = self.format = self._read_format(db)
        if found > FORMAT_VERSION:
            raise IncompatibleLedger(f"{self.path} was written in ledger format {found}; this release of "
                                     f"retention-ledger reads format {FORMAT_VERSION} and older: upgrade it to open "
                                     "this ledger")

    # --- meta, the log, attachments and statements -------------------------------------------

    def get_meta(self, key: str) -> str | None:
        found = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return str(found[0][0]) if found else None

    def set_meta_once(self, key: str, value: str) -> str:
        def once(db: _C) -> str:
            self._fetch(db, "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, value))
            return str(self._fetch(db, "SELECT value FROM meta WHERE key = ?", (key,))[0][0])
        return self._write(once)

    def copy_in(self, rows: Sequence[Row], blobs: Mapping[str, bytes], *,
                after: tuple[int, str | None] = (0, None)) -> None:
        def copy(db: _C) -> None:
            head = self._fetch(db, "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
            check_copied(rows, head[0] if head else (0, None), self.path, after)
            self._copy(db, "events", f"{COLUMNS}, hash", [row[:9] for row in rows])
            self._many(db, "INSERT INTO blobs (digest, data) VALUES (?, ?) ON CONFLICT DO NOTHING", blobs.items())
        self._write(copy, lock=0)

    def read(self, after: int = 0, *, upto: int | None = None, batch: int = 20_000, with_hash: bool = False,
             actor: str | None = None, types: Sequence[str] | None = None,
             containing: Sequence[str] | None = None) -> Iterator[Row]:
        if batch < 1:
            raise ValueError(f"batch must be at least 1, not {batch}")
        if (types is not None and not types) or (containing is not None and not containing):
            return
        last = upto if upto is not None else 2 ** 63 - 1
        where, params = "", list[Any]()
        if actor is not None:
            where, params = " AND actor = ?", [actor]
        if types is not None:
            where += f" AND type IN ({', '.join('?' * len(types))})"
            params += types
        if containing is not None:
            where += " AND (" + " OR ".join(f"{self._CONTAINS}(payload, ?) > 0" for _ in containing) + ")"
            params += containing
        hashed = (", hash" if self.chained else ", NULL") if with_hash else ""
        sql = f"SELECT {COLUMNS}{hashed} FROM events WHERE seq > ? AND seq <= ?{where} ORDER BY seq LIMIT ?"
        while True:
            rows = self._batch(sql, (after, last, *params, batch), after, last)
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1][0]

    def _batch(self, sql: str, params: Sequence[Any], after: int, last: int) -> list[Any]:
        """One batch of ``read``: events ``after < seq <= last``."""
        return self._rows(sql, params)

    def head(self) -> tuple[int, Micros]:
        found = self._rows("SELECT seq, time FROM events ORDER BY seq DESC LIMIT 1")
        return (found[0][0], found[0][1]) if found else (0, 0)

    def hash_at(self, seq: int) -> str | None:
        found = self._rows("SELECT hash FROM events WHERE seq = ?", (seq,)) if self.chained else []
        return found[0][0] if found else None

    def hashes(self, upto: int | None = None, *, batch: int = 100_000) -> Iterator[bytes]:
        if not self.chained:
            raise IncompatibleLedger(f"{self.path} predates the hash chain (format {self.format}); open it "
                                     "writable with Ledger.open once to upgrade it")
        last, after = upto if upto is not None else 2 ** 63 - 1, 0
        while True:
            rows = self._rows("SELECT seq, hash FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                              (after, last, batch))
            for seq, value in rows:
                try:
                    yield bytes.fromhex(value)
                except (TypeError, ValueError):
                    raise LedgerCorrupt(f"{self.path}: event #{seq} has no readable hash ({value!r}); run verify") \
                        from None
            if len(rows) < batch:
                return
            after = rows[-1][0]

    def count(self) -> int:
        return int(self._rows("SELECT count(*) FROM events")[0][0])

    def event_time(self, seq: int) -> Micros | None:
        found = self._rows("SELECT time FROM events WHERE seq = ?", (seq,))
        return found[0][0] if found else None

    def read_blob(self, digest: str) -> bytes | None:
        found = self._rows("SELECT data FROM blobs WHERE digest = ?", (digest,))
        if not found:
            return None
        data = found[0][0]  # a hand edit with SQL's text functions may leave text where bytes were
        return bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else str(data).encode()

    def blob_digests(self) -> list[str]:
        return [digest for (digest,) in self._rows("SELECT digest FROM blobs ORDER BY digest")]

    def keep_statement(self, digest: str, data: bytes, at: Micros) -> None:
        def keep(db: _C) -> None:
            self._fetch(db, self._STATEMENTS)
            self._fetch(db, "INSERT INTO statements (digest, data, kept_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                        (digest, data, at))
        self._write(keep)

    def read_statement(self, digest: str) -> bytes | None:
        found = self._rows("SELECT data FROM statements WHERE digest = ?", (digest,)) if self._has_statements() else []
        return bytes(found[0][0]) if found else None

    def statement_digests(self) -> list[tuple[str, Micros]]:
        if not self._has_statements():
            return []
        return [(digest, at) for digest, at in self._rows("SELECT digest, kept_at FROM statements ORDER BY digest")]

    # --- snapshots ----------------------------------------------------------------------------

    def snapshots(self, prefix: str = "") -> list[tuple[str, int]]:
        return [(name, seq) for name, seq in self._rows(
            "SELECT name, seq FROM snapshots WHERE substr(name, 1, ?) = ? ORDER BY seq", (len(prefix), prefix))]

    def delete_snapshot(self, name: str) -> None:
        self._write(lambda db: self._fetch(db, "DELETE FROM snapshots WHERE name = ?", (name,)))

    def latest_generation(self) -> Generation | None:
        found = self._generations("seq DESC, gen DESC LIMIT 1")
        return found[0] if found else None

    def generations(self) -> list[Generation]:
        return self._generations("seq, gen")

    def _generations(self, order: str) -> list[Generation]:
        return [Generation(gen, base, seq, format, bytes(head), entries)
                for gen, base, seq, format, head, entries in self._rows(f"{SELECT_GENERATIONS} ORDER BY {order}")]

    def chain_entries(self, generation: Generation) -> tuple[int, int]:
        full, deltas = self._rows("SELECT coalesce(sum(CASE WHEN gen = base THEN entries END), 0), "
                                  "coalesce(sum(CASE WHEN gen > base THEN entries END), 0) FROM snapshot_generations "
                                  "WHERE base = ? AND gen <= ?", (generation.base, generation.gen))[0]
        return int(full), int(deltas)

    def write_generation(self, seq: int, format: int, head: bytes, entries: Sequence[tuple[str, str, bytes | None]],
                         *, extends: Generation | None, replace: bool = False) -> Generation | None:
        def write(db: _C) -> Generation | None:
            if extends is None:
                if not replace and self._fetch(db, "SELECT 1 FROM snapshot_generations WHERE seq = ?", (seq,)):
                    return None
            elif self._fetch(db, "SELECT max(gen) FROM snapshot_generations WHERE base = ?",
                             (extends.base,))[0][0] != extends.gen or seq <= extends.seq:
                return None
            # Written with base 0, which no generation has once its transaction commits: so it is found.
            self._fetch(db, "INSERT INTO snapshot_generations (base, seq, format, head, entries, written) "
                            "VALUES (0, ?, ?, ?, ?, ?)", (seq, format, head, len(entries), time.time_ns() // 1000))
            (gen,) = self._fetch(db, "SELECT gen FROM snapshot_generations WHERE base = 0")[0]
            base = gen if extends is None else extends.base
            self._fetch(db, "UPDATE snapshot_generations SET base = ? WHERE gen = ?", (base, gen))
            # In key order: appending to a B-tree is several times faster than inserting all over it.
            self._copy(db, "snapshot_entries", "part, key, gen, value",
                       [(part, key, gen, None if value is None else seal(part, key, value))
                        for part, key, value in sorted(entries)])
            return Generation(gen, base, seq, format, head, len(entries))
        return self._write(write, lock=1)

    def generation_entries(self, generation: Generation) -> list[tuple[str, str, bytes | None]]:
        # The entries first: a generation deleted after them is still found gone.
        rows = self._rows("SELECT part, key, value FROM snapshot_entries WHERE gen = ?", (generation.gen,))
        if not self._rows("SELECT 1 FROM snapshot_generations WHERE gen = ?", (generation.gen,)):
            raise SnapshotGone(f"{self.path}: the stored snapshot (generation {generation.gen}) is no longer stored")
        return [(part, key, None if value is None else bytes(value)) for part, key, value in rows]

    def delete_generations(self) -> None:
        def delete(db: _C) -> None:
            self._fetch(db, "DELETE FROM snapshot_entries")
            self._fetch(db, "DELETE FROM snapshot_generations")
        self._write(delete)
        self._chains.clear()

    def _chain(self, generation: Generation) -> frozenset[int]:
        """The generations of ``generation``'s chain up to it: what its parts read from."""
        key = (generation.base, generation.gen)
        found = self._chains.get(key)
        if found is None:
            found = self._chains[key] = frozenset(gen for (gen,) in self._rows(
                "SELECT gen FROM snapshot_generations WHERE base = ? AND gen <= ?", key))
        return found

    # --- leases -------------------------------------------------------------------------------

    def take_lease(self, name: str, holder: str, until: Micros, now: Micros, *,
                   gone: Gone | None = None) -> Lease | None:
        self.check_clock(now)  # a lease taken on a refused clock would hold the others off on it
        def take(db: _C) -> Lease | None:
            found = self._fetch(db, "SELECT value FROM meta WHERE key = ?", (LEASE_PREFIX + name,))
            held = lease_held(found[0][0] if found else None, holder, now, gone)
            if held is None:
                self._fetch(db, "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                                "value = excluded.value", (LEASE_PREFIX + name, lease_value(holder, until)))
            return held
        return self._write(take, lock=2)

    def release_lease(self, name: str, holder: str) -> None:
        def release(db: _C) -> None:
            found = self._fetch(db, "SELECT value FROM meta WHERE key = ?", (LEASE_PREFIX + name,))
            lease = stored_lease(found[0][0] if found else None)
            if lease is not None and lease.holder == holder:
                self._fetch(db, "DELETE FROM meta WHERE key = ?", (LEASE_PREFIX + name,))
        self._write(release, lock=2)
