"""The integrity scrub's work: what one location should hold and must not, and what was found there.

A scrub asks the warehouse two questions the ledger can answer from its log alone: does every file
a readable version, a pinned version or a restorable dropped instance names exist, at the size its
commit recorded; and is every file a receipt says deleted still absent (R20, R25)? The ledger turns
its state into one ``Look`` a location (a table instance's folder: its id), the executors answer
each with a ``Finding``, and the ledger records what they found (``ScrubFinished``). Nothing is
deleted or changed: a scrub only looks.

A scrub looks twice only where it must, as anti-entropy repair compares Merkle trees before it
sends anything: first each location is listed and answered with one digest of what lies there
(a ``Glance``), which the ledger compares with the digest of what it expects (``Expected``); a
location whose digests agree holds exactly the files the ledger names, at their sizes, and none
it deleted, so nothing more is shipped for it. Only a location that differs (a file missing,
of another size, back, or anything the ledger does not name, such as an expired version's files
not yet vacuumed) is looked at again with its files (a ``Look``): its files travel packed
(``pack``: their sizes and names, compressed), a few bytes a file, so that the driver's memory
holds the looks of one batch, never the warehouse's file list.

The checked files are committed to by a Merkle root, in two levels like a receipt (``ledger.chain``):
a location's root is the RFC 6962 root over its files in pages (``PAGE`` files, sorted by key, a
leaf: each file's ``key NUL recorded size NUL``), so that a file is proven checked by its page and
the page's audit path, and hashing costs one pass over the names, not two hashes a file (which
took as long as the ``stat`` of every file did); the scrub's root is the RFC 6962 root over one leaf
a location, ``leaf_input(location, files) || location root``, sorted by location. An auditor who
has the same ledger recomputes both from its file lists.

The standard library only (R19): the ledger builds the looks, the executors answer them.
"""

from __future__ import annotations

import array
import hashlib
import json
import struct
import sys
import zlib
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Iterable, Iterator, Mapping

from .leaves import EMPTY_ROOT, leaf, leaf_input, root_of_leaves

SCRUB = "scrub"

PAGE = 1_000
"""Files a leaf of a location's Merkle tree holds (see the module docstring)."""

GONE = -1
"""The size a missing file is found at: not there at all."""


def pack(entries: Iterable[tuple[str, int]]) -> bytes:
    """``(path, size)`` pairs as a look carries them, compressed: the sizes as 8-byte little-endian
    integers, then the paths joined by NUL (which no file name holds). Both ways run in C: a look of
    200,000 files is packed and read in tens of milliseconds, not the seconds a leaf at a time took."""
    paths: list[str] = []
    sizes = array.array("q")
    for path, size in entries:
        paths.append(path)
        sizes.append(size)
    if sys.byteorder == "big":
        sizes.byteswap()
    return zlib.compress(struct.pack("<Q", len(paths)) + sizes.tobytes() + "\0".join(paths).encode(), 1) \
        if paths else b""


def unpack(data: bytes) -> Iterator[tuple[str, int]]:
    """The ``(path, size)`` pairs ``pack`` packed, in order."""
    if not data:
        return iter(())
    raw = zlib.decompress(data)
    (n,) = struct.unpack_from("<Q", raw)
    sizes = array.array("q", raw[8:8 + 8 * n])
    if sys.byteorder == "big":
        sizes.byteswap()
    paths = raw[8 + 8 * n:].decode().split("\0")
    if len(paths) != n:
        raise ValueError(f"a packed look names {len(paths)} paths for {n} sizes")
    return zip(paths, sizes)


@dataclass(frozen=True)
class Look:
    """One location to look at (``location``: relative to the warehouse root, a table instance's
    folder): the files it should hold (``present``, packed ``(path, recorded size)``, paths relative
    to the location, sorted) and those receipts say are deleted (``absent``, packed the same way)."""
    location: str
    present: bytes = b""
    absent: bytes = b""
    files: int = 0
    """How many files ``present`` and ``absent`` name together: what a batch is cut by."""

    kind: ClassVar[str] = SCRUB

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.location}"


@dataclass(frozen=True)
class Finding:
    """What a look found. ``files`` and ``bytes``: the files the location should hold, as recorded;
    ``root``: their Merkle root (hex); ``missing``: ``(key, recorded size, size found or GONE)`` of each
    one not there at its size; ``resurrected``: ``(key, size found)`` of each file a receipt says
    deleted that is there again; ``absent_checked``: how many such files were looked for. Keys are
    relative to the warehouse root. ``error``: why the location could not be looked at (nothing
    else is then to be believed)."""
    location: str
    files: int = 0
    bytes: int = 0
    root: str = EMPTY_ROOT.hex()
    missing: tuple[tuple[str, int, int], ...] = ()
    resurrected: tuple[tuple[str, int], ...] = ()
    absent_checked: int = 0
    error: str | None = None
    listed: bool = field(default=False, compare=False)
    """Whether the location was listed once (an object store) rather than each file looked at."""


def digest(entries: Iterable[tuple[str, int]]) -> str:
    """The digest of a location's files, ``(path relative to it, size)`` sorted by path: the SHA-256
    (hex) of their list as the ledger stores a commit's file list (``[[path,size],...]``, compact
    JSON, UTF-8), so that where a location holds one commit's files the ledger has the digest
    already (its commit carries it). A listing's entry that is not a regular file has size
    ``GONE``, so it never agrees with a recorded file. Were some name ever written otherwise by the
    ledger's JSON, the two digests would only differ, and the location be looked at again."""
    text = json.dumps([[path, size] for path, size in entries], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Glance:
    """What a first listing of a location found: the ``digest`` of every file under it, and how many
    ``files`` and ``bytes`` and their Merkle ``root`` (hex), which are the location's as recorded
    where the digest is the ledger's (None with ``error``: why it could not be listed)."""
    location: str
    digest: str | None = None
    files: int = 0
    bytes: int = 0
    root: str = EMPTY_ROOT.hex()
    error: str | None = None


@dataclass(frozen=True)
class Expected:
    """What the ledger expects of a location, in brief: the ``digest`` of its files, and how many
    files receipts say are deleted there (``absent``)."""
    location: str
    digest: str
    absent: int

    def confirmed(self, glance: Glance) -> Finding | None:
        """The finding, if ``glance`` saw exactly the files expected (then no receipted file is back
        either, since none of them is expected); None if the location must be looked at again."""
        if glance.error is not None or glance.digest != self.digest:
            return None
        return Finding(self.location, glance.files, glance.bytes, glance.root, absent_checked=self.absent,
                       listed=True)


def compare(look: Look, sizes: Callable[[list[str]], Mapping[str, int]], *, listed: bool = False) -> Finding:
    """The finding of ``look`` given ``sizes``: for the paths asked (relative to the location), the
    size of each that is there (a path not in the answer is not there). Pure: the executor's storage
    answers ``sizes`` by one listing of the location or by a ``stat`` of each path."""
    present = list(unpack(look.present))
    absent = list(unpack(look.absent))
    found = sizes([p for p, _ in present] + [p for p, _ in absent])
    prefix = look.location.rstrip("/") + "/"
    missing = tuple((prefix + p, size, found.get(p, GONE)) for p, size in present if found.get(p) != size)
    back = tuple((prefix + p, found[p]) for p, _ in absent if p in found)
    root = page_root(prefix, present)
    return Finding(look.location, len(present), sum(s for _, s in present), root.hex(), missing, back, len(absent),
                   listed=listed)


def pages(prefix: str, entries: list[tuple[str, int]]) -> Iterator[bytes]:
    """Files (paths under ``prefix``, sizes, sorted) as the leaves of a location's tree hold them:
    ``PAGE`` files a page, each ``key NUL size NUL`` (see the module docstring)."""
    return ("".join(f"{prefix}{path}\0{size}\0" for path, size in entries[at:at + PAGE]).encode()
            for at in range(0, len(entries), PAGE))


def page_root(prefix: str, entries: list[tuple[str, int]]) -> bytes:
    """The root over files (paths under ``prefix``, recorded sizes, sorted), a page a leaf."""
    return root_of_leaves(map(leaf, pages(prefix, entries)))


def scrub_root(findings: Iterable[Finding]) -> str:
    """The scrub's root over its locations' (hex), sorted by location: see the module docstring."""
    ordered = sorted(findings, key=lambda f: f.location)
    return root_of_leaves(leaf(leaf_input(f.location, f.files) + bytes.fromhex(f.root)) for f in ordered).hex()


def batches(looks: Iterable[Look], files: int) -> Iterator[list[Look]]:
    """``looks`` cut into runs of about ``files`` files each (a look is never split), so that one
    batch at a time is held: the driver's memory stays flat however many files the ledger knows."""
    batch: list[Look] = []
    held = 0
    for look in looks:
        if batch and held + look.files > files:
            yield batch
            batch, held = [], 0
        batch.append(look)
        held += look.files
    if batch:
        yield batch
