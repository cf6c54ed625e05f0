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
  the present; every one is a point ``as_of`` starts from, R17), and a few named documents.
  Generations are kept (only ``delete_generations`` forgets them), so a reader holding one is
  never cut off.

``tests/store_contract.py`` holds the tests every backend must pass; a backend's own test module
subclasses them. The state cache (``cache``) and the command loop (``ledger.runner``) use
only what is here.
"""

from __future__ import annotations

import json
import re
import zlib
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple, Protocol, Sequence

from ..chain import GENESIS, REDACTABLE, event_hash, redacted_row
from ..clock import Micros
from ..core import events
from ..errors import InvalidArgument, LedgerCorrupt, LedgerNotFound

CHAIN_FORMAT = 2
"""The first log format whose rows carry the hash chain (format 1: a SQLite file of an early release)."""

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


class Snapshot(NamedTuple):
    """A named snapshot document."""
    seq: int
    format: int
    data: bytes


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


class SealedPart:
    """What every backend's ``StoredPart`` shares: which part of which generation it reads, the
    generations of its chain (chains interleave: a backend reads the entries of a range of
    generations and keeps those of the chain), and the refusals (``SnapshotGone``) for a
    generation no longer stored or an entry whose seal (``seal``) does not match."""

    __slots__ = ("_where", "_gen", "_base", "_part", "_chain")

    def __init__(self, where: str, generation: Generation, part: str, chain: frozenset[int]) -> None:
        self._where = where
        self._gen, self._base, self._part = generation.gen, generation.base, part
        self._chain = chain

    @property
    def depth(self) -> int:
        """The generations a pass over the part reads: every version of every key along its chain
        (``lazy.WHOLE`` weighs a pass by it)."""
        return len(self._chain)

    def _newest(self, rows: Iterable[tuple[int, object]]) -> object:
        """Of ``(gen, value)`` rows, newest first, the value of the newest of the chain (None: none)."""
        chain = self._chain
        return next((value for gen, value in rows if gen in chain), None)

    def _unseal(self, key: str, value: object) -> bytes:
        body = unseal(self._part, key, value)
        if body is None:
            raise self._gone("holds an entry that fails its check (the store was damaged or edited)")
        return body

    def _gone(self, why: str) -> SnapshotGone:
        return SnapshotGone(f"{self._where}: the stored snapshot (generation {self._gen}) {why}")


def own_rows(where: str, generation: Generation, rows: list[tuple[str, str, bytes | None]],
             stored: bool) -> list[tuple[str, str, bytes | None]]:
    """``generation_entries``: a generation's own rows, if it is still stored."""
    if not stored:
        raise SnapshotGone(f"{where}: the stored snapshot (generation {generation.gen}) is no longer stored")
    return rows


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
    def set_meta(self, key: str, value: str) -> None: ...

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

    @abstractmethod
    def close(self) -> None: ...


class SnapshotStore(ABC):
    """Caches of folded state beside the log: never the truth, always checked against it."""

    @abstractmethod
    def load_snapshot(self, name: str) -> Snapshot | None: ...

    @abstractmethod
    def snapshots(self, prefix: str = "") -> list[tuple[str, int]]:
        """``(name, seq)`` of the named snapshots starting with ``prefix``, by seq."""

    @abstractmethod
    def save_snapshot(self, name: str, snapshot: Snapshot) -> None: ...

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
