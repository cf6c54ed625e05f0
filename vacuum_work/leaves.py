"""How a receipt writes down a deleted object (R20), for the executors that write it and the ledger
that checks it: one copy of the encoding, the standard library's only.

A leaf is ``u32(len(utf8(key))) || utf8(key) || u64(size)`` (big-endian), the key relative to the
warehouse root; a part is the RFC 6962 tree hash over its leaves sorted by key, summed up as a
``Summary`` (the one shape of a receipt part: the executors seal ``vacuum_work.Part``, a summary
with where its leaves wait; the ledger's ``ReceiptPart`` and ``FoundAbsent`` events store its
fields under the same names). ``ledger.chain`` documents both levels of a receipt's tree for
auditors, and builds the receipt's level, the chain's checkpoints and its proofs on the one RFC
6962 root function here (``root_of_leaves``).
"""

from __future__ import annotations

import builtins
import hashlib
import struct
import zlib
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

EMPTY_ROOT = hashlib.sha256(b"").digest()


def _text(value: str) -> bytes:
    data = value.encode("utf-8")
    return struct.pack(">I", len(data)) + data


def leaf_input(key: str, size: int) -> bytes:
    """The leaf input for one deleted object."""
    return _text(key) + struct.pack(">Q", size)


@dataclass(frozen=True)
class Summary:
    """A receipt part (R20): ``count`` objects of ``bytes`` bytes, keys ``first`` to ``last``, whose
    leaves sorted by key have the RFC 6962 root ``root`` (hex). What is recorded of a part, and what
    its leaves are checked against, by the ledger as it records one and by ``verify`` ever after."""
    first: str
    last: str
    count: int
    bytes: int
    root: str

    def entry(self) -> builtins.bytes:
        """The part's leaf input in its receipt's tree:
        ``text(first) || text(last) || u64(count) || u64(bytes) || root``."""
        return _text(self.first) + _text(self.last) + struct.pack(">QQ", self.count, self.bytes) + \
            builtins.bytes.fromhex(self.root)

    def problem(self, leaves: Sequence[tuple[str, int]], root: builtins.bytes) -> str | None:
        """What the part's ``leaves`` (and ``root``, their tree's) contradict in this summary, worded
        to follow "the part"; None when they agree. One check for the ledger's record (refused) and
        ``verify`` (corrupt)."""
        keys = [key for key, _ in leaves]
        if not leaves:
            return "holds no objects"
        if any(a > b for a, b in zip(keys, keys[1:])):
            return "is not sorted by key"
        if (keys[0], keys[-1]) != (self.first, self.last):
            return "does not run from its first key to its last"
        if (len(leaves), sum(s for _, s in leaves)) != (self.count, self.bytes):
            return "does not hold as many objects, or bytes, as its summary says"
        if root.hex() != self.root:
            return "does not hash to the Merkle root its summary carries"
        return None


def read_leaves(data: bytes) -> Iterator[tuple[str, int]]:
    """The ``(key, size)`` of each leaf in a part's (uncompressed) leaf data, in order; a
    ``ValueError`` if the data is not a whole number of leaves."""
    at, end = 0, len(data)
    while at < end:
        n = int.from_bytes(data[at:at + 4], "big")  # the slice may be short: then so is the leaf
        if at + 4 + n + 8 > end:
            raise ValueError(f"a leaf is cut short at byte {at}")
        yield data[at + 4:at + 4 + n].decode("utf-8"), int.from_bytes(data[at + 4 + n:at + 12 + n], "big")
        at += 12 + n


def unpack(data: bytes) -> list[tuple[str, int]]:
    """The ``(key, size)`` of each leaf of a part as it is kept (compressed); a ``ValueError`` saying
    why if the bytes are not a part's (not compressed, a leaf cut short, a key not UTF-8)."""
    try:
        return list(read_leaves(zlib.decompress(data)))
    except (zlib.error, UnicodeError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def leaf(entry: bytes) -> bytes:
    """RFC 6962's leaf hash: ``SHA-256(0x00 || entry)``."""
    return hashlib.sha256(b"\x00" + entry).digest()


def node(left: bytes, right: bytes) -> bytes:
    """RFC 6962's interior node: ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_of_leaves(leaves: Iterable[bytes]) -> bytes:
    """RFC 6962's Merkle tree hash over leaf *hashes*, taken as they come: it keeps the roots of
    the whole subtrees made so far (the binary digits of the count, at most 64), pairing the last
    two while they are of one size, then folds them from the right, which is RFC 6962's split at
    the largest power of two below the count. So a part of 10,000 leaves is hashed in a few KB, not
    in 1 MB of levels (R20: a vacuum's driver seals parts as it deletes). The one root function:
    receipts (here), the chain's checkpoints and proofs (``ledger.chain``) all call it."""
    whole: list[tuple[int, bytes]] = []  # (leaves, root) of each whole subtree, largest first
    for hashed in leaves:
        size = 1
        while whole and whole[-1][0] == size:
            size, hashed = 2 * size, node(whole.pop()[1], hashed)
        whole.append((size, hashed))
    if not whole:
        return EMPTY_ROOT
    hashed = whole.pop()[1]
    while whole:
        hashed = node(whole.pop()[1], hashed)
    return hashed


def tree_root(entries: Iterable[bytes]) -> bytes:
    """RFC 6962's Merkle tree hash over leaf *inputs* (``root_of_leaves`` of their leaf hashes)."""
    return root_of_leaves(leaf(entry) for entry in entries)
