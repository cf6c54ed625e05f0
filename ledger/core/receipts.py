"""Deletion receipts: what each vacuum run deleted, object by object, provably (R20).

A lake format can say a table was vacuumed; it cannot show later that one given file was
erased, and when (a GDPR erasure request asks exactly that). A vacuum's tasks write down the
``(key, size)`` of every object they delete, sorted, in **parts** of bounded size; each part is
hashed into an RFC 6962 tree where it was made (an executor), kept compressed as a
content-addressed attachment, and recorded as a ``ReceiptPart`` event on the run's own stream.
When the run finishes, one ``VacuumReceipt`` event closes it: the counts, the bytes and a
Merkle root over its parts (``ledger.chain`` documents both levels). A key is then proven
deleted by two audit paths: the leaf in its part, the part in the receipt.

A run that takes over a stopped one looks before it deletes what the stopped run may have deleted
(R20: a store answers "deleted" for a key already gone), and so finds gone what that run deleted
without writing it down (killed between the delete and its receipt). It records that observation,
in parts of the same shape on the same stream: ``FoundAbsent``, the keys it looked for and did
not find, and when; never counted in its receipt, never a deletion proof. An erasure request's
file found so is settled by it (R25: "the run that deleted it, or found it absent").

Decided here on the leaves themselves: a part is recorded only if its bytes hash to its digest
and its leaves to its summary (sorted, its first and last key, its count, bytes and root), so
that no part ``verify`` would call edited is ever recorded; the fold re-checks that a receipt's
root is its parts' root, and ``verify`` re-hashes every part's leaves against the root its event
carries (``audit.verify``), as it re-hashes every file list.
"""

from __future__ import annotations

import builtins
import hashlib
import re
from typing import TYPE_CHECKING, Any, Union

import attrs
from vacuum_work import Part
from vacuum_work.leaves import Summary, leaf_input, tree_root

from ..chain import merkle_root, unpack_part
from ..clock import Micros
from ..errors import InvalidArgument
from .concern import Concern, Decision, corrupt, mapping
from .events import event
from .streams import receipt_stream

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State

_HEX64 = re.compile(r"[0-9a-f]{64}")


# --- events --------------------------------------------------------------------------------

@event("ReceiptPart")
@attrs.frozen
class ReceiptPart:
    """Objects a run deleted, ``count`` of them, keys ``first`` to ``last``: their sorted leaves
    are the attachment ``digest`` (compressed), whose tree has root ``root``."""
    run_id: str
    first: str
    last: str
    count: int
    bytes: int
    root: str
    digest: str


@event("FoundAbsent")
@attrs.frozen
class FoundAbsent(ReceiptPart):
    """Objects a run looked for, to delete them, and found already gone, in a ``ReceiptPart``'s fields
    (the leaves with the sizes the ledger's lists gave them). What the run observed, at the event's
    time; it deleted none of them."""


@event("VacuumReceipt")
@attrs.frozen
class VacuumReceipt:
    """A run's receipt, closed: every object it deleted (``files``, ``bytes``), in ``parts``
    parts, and the Merkle root over them (the empty tree's when it deleted nothing)."""
    run_id: str
    files: int
    bytes: int
    parts: int
    root: str


# --- state ---------------------------------------------------------------------------------

@attrs.frozen
class PartInfo:
    run_id: str
    first: str
    last: str
    count: int
    bytes: int
    root: str
    digest: str
    seq: int
    time: Micros

    def summary(self) -> Summary:
        """The part as it was sealed and recorded: its events store the summary's fields."""
        return Summary(self.first, self.last, self.count, self.bytes, self.root)

    def entry(self) -> builtins.bytes:
        """The part's leaf input in its receipt's tree."""
        return self.summary().entry()

    def order(self) -> tuple[str, str, str]:
        return (self.first, self.last, self.root)


@attrs.frozen
class ReceiptInfo:
    run_id: str
    files: int
    bytes: int
    parts: int
    root: str
    seq: int
    time: Micros


@attrs.frozen
class Receipts:
    parts: Any = mapping(PartInfo)       # "<run id>#<n>" -> PartInfo, in the order recorded
    by_run: Any = mapping(tuple)         # run id -> the keys of its parts
    closed: Any = mapping(ReceiptInfo)   # run id -> its receipt, once the run finished
    absent: Any = mapping(PartInfo)      # "<run id>@<seq>" -> a part of objects the run found already gone

    def of_run(self, run_id: str) -> list[PartInfo]:
        """A run's parts in their receipt's order."""
        return sorted((self.parts[k] for k in self.by_run.get(run_id, ())), key=PartInfo.order)

    def absent_of(self, run_id: str) -> list[PartInfo]:
        """The parts of objects a run found already gone, in the order recorded."""
        return sorted((p for p in self.absent.values() if p.run_id == run_id), key=lambda p: p.seq)


def receipt_root(parts: list[PartInfo]) -> str:
    return merkle_root([p.entry() for p in parts]).hex()


# --- commands ------------------------------------------------------------------------------

@attrs.frozen
class RecordDeleted:
    """Record parts of a running vacuum's receipt: each part's summary with its compressed leaves (a
    part of objects found absent, ``Part.absent``, as the observation it is: ``FoundAbsent``)."""
    run_id: str
    parts: tuple[tuple[Part, bytes], ...]


Command = Union[RecordDeleted]


def _record(state: State, cmd: RecordDeleted) -> Decision:
    run = state.vacuums.runs.get(cmd.run_id)
    if run is None:
        raise InvalidArgument(f"vacuum run {cmd.run_id} is unknown or already finished: its receipt is closed")
    if not isinstance(cmd.parts, tuple):
        raise InvalidArgument(f"a run's receipt parts are (vacuum_work.Part, leaves) pairs, not "
                              f"{type(cmd.parts).__name__}")
    events, blobs = [], []
    for pair in cmd.parts:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], Part)):
            raise InvalidArgument(f"a receipt part of run {cmd.run_id} is a (vacuum_work.Part, leaves) pair, "
                                  f"not {type(pair).__name__}")
        part, data = pair
        first, last, count, size, root = part.first, part.last, part.count, part.bytes, part.root
        if not isinstance(data, bytes) or not data:
            raise InvalidArgument(f"a receipt part of run {cmd.run_id} has no leaves")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1 or \
                isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidArgument(f"a receipt part of run {cmd.run_id} counts {count!r} objects of {size!r} "
                                  "bytes: whole numbers, at least one object, are needed")
        if not (isinstance(first, str) and isinstance(last, str) and first <= last):
            raise InvalidArgument(f"a receipt part of run {cmd.run_id} runs from {first!r} to {last!r}, "
                                  "which is not a key range")
        if not isinstance(root, str) or not _HEX64.fullmatch(root):
            raise InvalidArgument(f"a receipt part of run {cmd.run_id} has no Merkle root (64 hex digits)")
        digest = hashlib.sha256(data).hexdigest()
        problem = "does not hash to its digest" if digest != part.digest else _contradiction(part, data)
        if problem is not None:
            raise InvalidArgument(f"a receipt part of run {cmd.run_id} {problem}: not recorded (a part is recorded "
                                  "as its task sealed it, its summary and its leaves in agreement)")
        kind = FoundAbsent if part.absent is True else ReceiptPart
        events.append((receipt_stream(cmd.run_id), kind(cmd.run_id, first, last, count, size, root, digest)))
        blobs.append((digest, data))
    return Decision(tuple(events), frozenset({receipt_stream(cmd.run_id)}), len(events), tuple(blobs))


def _contradiction(part: Part, data: bytes) -> str | None:
    """What a part's leaves contradict in its summary (None: nothing). Checked before it is recorded:
    a part recorded otherwise would make ``verify`` call the receipt edited, for ever after. A full
    part (10,000 leaves, 0.5 MB) costs about 30 ms, most of it its tree's 20,000 SHA-256s: some 3 s
    over a vacuum of a million files."""
    try:
        leaves = unpack_part(data)
    except ValueError as exc:
        return f"cannot be read ({exc})"
    return part.problem(leaves, tree_root(leaf_input(k, s) for k, s in leaves))


def close(state: State, run_id: str) -> tuple[str, VacuumReceipt]:
    """The event that closes a finishing run's receipt (``vacuums`` appends it with the finish)."""
    parts = state.receipts.of_run(run_id)
    return receipt_stream(run_id), VacuumReceipt(run_id, sum(p.count for p in parts),
                                                 sum(p.bytes for p in parts), len(parts), receipt_root(parts))


# --- fold ----------------------------------------------------------------------------------

def _part_info(b: Builder, e: ReceiptPart, seq: int, time: Micros, what: str) -> PartInfo:
    if e.run_id not in b.vacuums.runs:
        raise corrupt(f"event #{seq} records objects {what} by vacuum {e.run_id}, which is not in progress")
    if e.count < 1 or e.bytes < 0 or e.first > e.last:
        raise corrupt(f"event #{seq} records a receipt part of {e.count} objects and {e.bytes} bytes from "
                      f"{e.first!r} to {e.last!r}, which no part can be")
    return PartInfo(e.run_id, e.first, e.last, e.count, e.bytes, e.root, e.digest, seq, time)


def _on_part(b: Builder, e: ReceiptPart, seq: int, time: Micros) -> None:
    info = _part_info(b, e, seq, time, "deleted")
    receipts = b.receipts
    keys = receipts.by_run.get(e.run_id, ())
    key = f"{e.run_id}#{len(keys)}"
    receipts.parts[key] = info
    receipts.by_run[e.run_id] = (*keys, key)


def _on_absent(b: Builder, e: FoundAbsent, seq: int, time: Micros) -> None:
    b.receipts.absent[f"{e.run_id}@{seq}"] = _part_info(b, e, seq, time, "found absent")


def _on_receipt(b: Builder, e: VacuumReceipt, seq: int, time: Micros) -> None:
    if e.run_id not in b.vacuums.runs or e.run_id in b.receipts.closed:
        raise corrupt(f"event #{seq} closes the receipt of vacuum {e.run_id}, which is not in progress")
    parts = b.receipts.of_run(e.run_id)
    if (e.files, e.bytes, e.parts, e.root) != (sum(p.count for p in parts), sum(p.bytes for p in parts),
                                               len(parts), receipt_root(parts)):
        raise corrupt(f"event #{seq}'s receipt of vacuum {e.run_id} is not the one its {len(parts)} recorded "
                      "parts make (its counts, bytes or Merkle root differ)")
    b.receipts.closed[e.run_id] = ReceiptInfo(e.run_id, e.files, e.bytes, e.parts, e.root, seq, time)


CONCERN = Concern(
    initial=Receipts(),
    evolve={ReceiptPart: _on_part, FoundAbsent: _on_absent, VacuumReceipt: _on_receipt},
    decide={RecordDeleted: _record},
)

__all__ = ["ReceiptPart", "FoundAbsent", "VacuumReceipt", "PartInfo", "ReceiptInfo", "Receipts", "RecordDeleted",
           "close", "receipt_root", "CONCERN"]
