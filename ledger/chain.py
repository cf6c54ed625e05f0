"""The hash chain and the Merkle tree over it (R16): what an auditor re-implements to check a log.

**Event hash.** Every event row carries

    hash = SHA-256( previous hash (32 bytes; 32 zero bytes before the first event)
                  || u64(seq) || u64(version) || u32(schema_version) || i64(time)
                  || text(stream) || text(type) || text(actor) || text(payload) )

where ``u64``/``u32``/``i64`` are big-endian (unsigned, unsigned, signed two's complement),
``text(s)`` is ``u32(len(utf8(s))) || utf8(s)``, ``time`` is microseconds since the Unix epoch
(UTC), and ``payload`` is the stored JSON text exactly as it is in the ``events`` table. Every
field is always present; there are no optional ones. The hash is stored as 64 lower-case hex
digits. Editing, inserting, deleting or reordering any event changes the hash of every event
after it.

**Merkle tree.** RFC 6962's tree hash (MTH) over the *event hashes* in sequence order, as leaf
inputs: ``leaf = SHA-256(0x00 || event hash)``, ``node = SHA-256(0x01 || left || right)``, the
left subtree holding the largest power of two of leaves smaller than the whole; the empty tree
is ``SHA-256("")``. A checkpoint is (seq, time, head hash, root); inclusion and consistency
proofs are RFC 6962's audit path and consistency proof (RFC 9162 section 2.1.3 and 2.1.4 give
the verification algorithms used here).

**Deletion receipts (R20).** A vacuum's receipt is a two-level tree of the same kind. A *leaf*
is one object the run deleted, ``u32(len(utf8(key))) || utf8(key) || u64(size)``, the key relative
to the warehouse root (``deleted_leaf``, written by the executors with the same code:
``vacuum_work.leaves``); a *part* (what one task deleted, at most a fixed number of leaves) is the
MTH of its leaves sorted by key (byte order), and is recorded with its first and last key, count
and bytes (``Summary``); the receipt's root is the MTH over the parts' entries
``text(first) || text(last) || u64(count) || u64(bytes) || part root`` (``Summary.entry``), sorted
by (first, last, part root). Proving a key was deleted is two audit paths: the leaf in its part, the part in the
receipt.

**Redaction (R25).** One kind of event may be changed after it is chained: a 0.7 erasure request,
whose predicate is set to null when forgotten. Its stored hash is kept (every later event's hash
binds it); a later ``ErasureForgotten`` event names the SHA-256 of the payload as redacted, and the
check takes the row at its stored hash only if that digest matches (``ChainCheck.redacted``).

Pure functions only: the store computes hashes as it appends, ``audit`` and the offline
verifier (``python -m ledger.audit``) check them.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, Iterable, Iterator, Sequence

from vacuum_work import leaves as _leaves
from vacuum_work.leaves import EMPTY_ROOT as EMPTY_ROOT, leaf as leaf, node as node, root_of_leaves as root_of_leaves

from .errors import LedgerCorrupt

GENESIS = bytes(32)

Row = tuple[Any, ...]
"""A stored event row ``(seq, stream, version, type, schema_version, time, actor, payload[, hash, ...])``
(``core.events.Row``, which sits above this module)."""

# The executors' leaf code (standard library only, R19) under the names the ledger's readers use:
# one copy of how a deleted object's leaf is written and read, exported from here.
deleted_leaf = _leaves.leaf_input
read_deleted = _leaves.read_leaves
unpack_part = _leaves.unpack
merkle_root = _leaves.tree_root

_HEAD = struct.Struct(">QQIq")
_LENGTH = struct.Struct(">I").pack
_sha256 = hashlib.sha256


def event_hash(previous: bytes, seq: int, stream: str, version: int, type_: str, schema_version: int,
               time: int, actor: str, payload: str) -> bytes:
    """The hash of one event row, chained to the one before it (see the module docstring)."""
    # ``text(s)`` (the module docstring's) four times, inline: this runs once an event in every chain walk.
    s, t, a, p = stream.encode(), type_.encode(), actor.encode(), payload.encode()
    return _sha256(b"".join((previous, _HEAD.pack(seq, version, schema_version, time), _LENGTH(len(s)), s,
                             _LENGTH(len(t)), t, _LENGTH(len(a)), a, _LENGTH(len(p)), p))).digest()


def chain(rows: Sequence[Row], previous: bytes = GENESIS) -> list[bytes]:
    """The hashes of consecutive stored rows ``(seq, stream, version, type, schema_version, time,
    actor, payload, ...)``, starting after ``previous``."""
    found = []
    for row in rows:
        previous = event_hash(previous, *row[:8])
        found.append(previous)
    return found


class ChainCheck:
    """Recomputes the chain over stored rows ``(seq, ..., payload, hash)`` as they stream past,
    and stops at the first row that breaks it, naming it and why (R16).

    Used by ``verify`` on the SQLite file and by the offline verifier on an export: the same
    check, whatever the rows were read from. ``hashes`` keeps every event hash (as bytes) when
    asked, for a Merkle tree over them.
    """

    def __init__(self, where: str, *, keep_hashes: bool = False) -> None:
        self.where = where
        self.seq = 0
        self.head = GENESIS
        self.hashes: list[bytes] | None = [] if keep_hashes else None
        self.redacted: dict[int, str] = {}
        """Events whose payload was redacted (``REDACTABLE``): seq -> SHA-256 of the payload as stored,
        taken at their stored hash. The fold must confirm each (``confirm_redactions``)."""

    def rows(self, rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            self.check(row)
            yield row

    def check(self, row: Row) -> None:
        seq = row[0]
        if seq != self.seq + 1:
            gone = f"#{self.seq + 1}" if seq == self.seq + 2 else f"#{self.seq + 1} to #{seq - 1}"
            raise LedgerCorrupt(f"{self.where}: event #{seq} follows #{self.seq}: event {gone} is missing "
                                "(deleted, or renumbered); the log was edited" if seq > self.seq else
                                f"{self.where}: event #{seq} follows #{self.seq}: rows are out of order or "
                                "repeated; the log was edited")
        try:
            expected = event_hash(self.head, *row[:8])
        except (TypeError, AttributeError, struct.error, UnicodeError) as exc:
            raise LedgerCorrupt(f"{self.where}: event #{seq} has a field of the wrong type or range "
                                f"({exc}), so it cannot be hashed; the log was edited") from None
        if row[8] != expected.hex() and redacted_row(row):
            # A 0.7 erasure request whose predicate was forgotten (R25): its hash is the one it was
            # chained with, which every event after it binds; what it holds now is bound by the
            # ErasureForgotten event that names this payload's digest (``confirm_redactions``).
            self.redacted[seq] = hashlib.sha256(row[7].encode()).hexdigest()
            expected = bytes.fromhex(row[8])
        elif row[8] != expected.hex():
            what = "has no hash" if row[8] is None else "does not match its hash"
            raise LedgerCorrupt(f"{self.where}: event #{seq} {what} (the hash over its fields and the hash "
                                "of the event before it): the event, or its stored hash, was edited; "
                                "restore the ledger from a backup")
        self.seq, self.head = seq, expected
        if self.hashes is not None:
            self.hashes.append(expected)


REDACTABLE = ("ErasureRequested", 1)
"""The one kind of event whose stored payload may change: a 0.7 erasure request, whose predicate
(a person's identifier, perhaps) is forgotten by setting it to null (R25)."""


def redacted_row(row: Row) -> bool:
    """Whether a row is a redactable event holding a forgotten predicate, with a well-formed stored hash."""
    return (row[3], row[4]) == REDACTABLE and isinstance(row[7], str) and '"predicate":null' in row[7] and \
        isinstance(row[8], str) and len(row[8]) == 64 and all(c in "0123456789abcdef" for c in row[8])


# --- RFC 6962 ------------------------------------------------------------------------------

def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_proof(index: int, entries: Sequence[bytes], *, leaves: Sequence[bytes] | None = None) -> list[bytes]:
    """RFC 6962 PATH(m, D[n]): the audit path of entry ``index`` (0-based) in the tree of ``entries``
    (``leaves``: their leaf hashes, if the caller has them already)."""
    if not 0 <= index < len(entries):
        raise IndexError(f"entry {index} is not in a tree of {len(entries)}")
    leaves = [leaf(e) for e in entries] if leaves is None else leaves
    proof: list[bytes] = []
    start, end = 0, len(leaves)
    while end - start > 1:
        k = _split(end - start)
        if index - start < k:
            proof.append(root_of_leaves(leaves[start + k:end]))
            end = start + k
        else:
            proof.append(root_of_leaves(leaves[start:start + k]))
            start = start + k
    return list(reversed(proof))


def root_from_inclusion(index: int, size: int, entry: bytes, proof: Sequence[bytes]) -> bytes | None:
    """The root an inclusion proof leads to (RFC 9162 2.1.3.2), or None if it cannot be one."""
    if not 0 <= index < size:
        return None
    fn, sn = index, size - 1
    r = leaf(entry)
    for p in proof:
        if sn == 0:
            return None
        if fn % 2 == 1 or fn == sn:
            r = node(p, r)
            while fn % 2 == 0 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


def consistency_proof(old_size: int, entries: Sequence[bytes], *,
                      leaves: Sequence[bytes] | None = None) -> list[bytes]:
    """RFC 6962 PROOF(m, D[n]): that the first ``old_size`` entries' tree is a prefix of this one
    (``leaves``: their leaf hashes, if the caller has them already)."""
    n = len(entries)
    if not 0 < old_size <= n:
        raise IndexError(f"no consistency proof from a tree of {old_size} to one of {n}")
    leaves = [leaf(e) for e in entries] if leaves is None else leaves
    proof: list[bytes] = []

    def subproof(m: int, start: int, end: int, whole: bool) -> None:
        size = end - start
        if m == size:
            if not whole:
                proof.append(root_of_leaves(leaves[start:end]))
            return
        k = _split(size)
        if m <= k:
            subproof(m, start, start + k, whole)
            proof.append(root_of_leaves(leaves[start + k:end]))
        else:
            subproof(m - k, start + k, end, False)
            proof.append(root_of_leaves(leaves[start:start + k]))

    subproof(old_size, 0, n, True)
    return proof


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """RFC 9162 2.1.4.2: whether ``proof`` shows the tree of ``old_size`` is a prefix of ``new_size``."""
    if old_size > new_size or old_size < 0:
        return False
    if old_size == new_size:
        return old_root == new_root and not proof
    if old_size == 0:
        return not proof
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is the first node
        path.insert(0, old_root)
    if not path:
        return False
    fn, sn = old_size - 1, new_size - 1
    while fn % 2 == 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            fr = node(c, fr)
            sr = node(c, sr)
            while fn % 2 == 0 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root
