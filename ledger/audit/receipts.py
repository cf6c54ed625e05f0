"""Reading receipts, proving a deletion, and checking both (R20).

A receipt proves that a vacuum run deleted (or, deleting a key the store no longer held, found
gone) exactly the objects its leaves name, and when: the run's ``VacuumReceipt`` event is in the
chain, so a checkpoint taken after it pins it. It does not prove that no copy exists elsewhere
(a backup, a replica, another bucket), nor anything about objects the run never touched.

``prove_deleted(key)`` finds the part holding the key and returns a ``DeletionProof``: the
leaf's audit path to its part's root, and the part's to the receipt's root (or, for a run that
never finished, the part's event alone). ``DeletionProof.verify()`` recomputes both paths; the
offline verifier (``python -m ledger.audit prove-deleted``) also checks that the root is the one
the export's chain records, before the checkpoint.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import zlib
from datetime import datetime
from typing import Any

import attrs

from ..chain import deleted_leaf, inclusion_proof, leaf, part_entry, read_deleted, root_from_inclusion, root_of_leaves
from ..clock import from_micros, iso_utc
from ..core.model import State
from ..core.receipts import PartInfo, receipt_root
from ..errors import InvalidArgument, LedgerCorrupt, NotDeleted
from ..persistence.contract import EventStore


@attrs.frozen
class ReceiptPartView:
    first: str
    last: str
    count: int
    bytes: int
    root: str
    digest: str
    recorded_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "recorded_at": iso_utc(self.recorded_at)}


@attrs.frozen
class Receipt:
    """What one vacuum run deleted: ``files`` objects of ``bytes`` bytes, and the Merkle root over
    them (``None`` while the run has not finished: its parts are each on record)."""
    run_id: str
    finished_at: datetime | None
    files: int
    bytes: int
    root: str | None
    parts: tuple[ReceiptPartView, ...]
    seq: int | None
    """The event that closed it (None: not closed)."""

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "finished_at": None if self.finished_at is None else iso_utc(self.finished_at),
                "files": self.files, "bytes": self.bytes, "root": self.root, "seq": self.seq,
                "parts": [p.to_dict() for p in self.parts]}


@attrs.frozen
class DeletionProof:
    """That ``key`` (``size`` bytes, relative to the warehouse root) is one of the objects vacuum
    run ``run_id`` deleted, recorded at ``deleted_at`` by event ``seq``."""
    key: str
    size: int
    run_id: str
    deleted_at: datetime
    seq: int
    leaf_index: int
    part_first: str
    part_last: str
    part_count: int
    part_bytes: int
    part_root: str
    leaf_path: tuple[str, ...]
    part_index: int | None
    parts: int | None
    part_path: tuple[str, ...]
    receipt_root: str | None
    """The run's receipt root (None: the run never finished; ``part_root`` is then the anchor)."""

    def verify(self) -> bool:
        """Whether both audit paths lead where they claim: the leaf to the part's root, the part to
        the receipt's. (That the root is the chain's is the offline verifier's half.)"""
        try:
            leaf_path = [bytes.fromhex(p) for p in self.leaf_path]
            part_path = [bytes.fromhex(p) for p in self.part_path]
            part_root = bytes.fromhex(self.part_root)
        except ValueError:
            return False
        found = root_from_inclusion(self.leaf_index, self.part_count, deleted_leaf(self.key, self.size), leaf_path)
        if found is None or found != part_root or not self.part_first <= self.key <= self.part_last:
            return False
        if self.receipt_root is None:
            return not part_path
        if self.part_index is None or self.parts is None:
            return False
        entry = part_entry(self.part_first, self.part_last, self.part_count, self.part_bytes, part_root)
        top = root_from_inclusion(self.part_index, self.parts, entry, part_path)
        return top is not None and top.hex() == self.receipt_root

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["deleted_at"] = iso_utc(self.deleted_at)
        data["leaf_path"], data["part_path"] = list(self.leaf_path), list(self.part_path)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str) -> DeletionProof:
        try:
            data = json.loads(text)
            data.pop("verified", None)  # the CLI's --json output says whether it verified there
            data["deleted_at"] = datetime.fromisoformat(data["deleted_at"].replace("Z", "+00:00"))
            data["leaf_path"], data["part_path"] = tuple(data["leaf_path"]), tuple(data["part_path"])
            return cls(**data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InvalidArgument(f"not a deletion proof (retention-ledger prove-deleted KEY --out FILE writes one): "
                                  f"{exc}") from None

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> DeletionProof:
        try:
            with open(path, encoding="utf-8") as source:
                return cls.from_json(source.read())
        except OSError as exc:
            raise InvalidArgument(f"cannot read the deletion proof {os.fspath(path)}: {exc.strerror or exc}") from None


def receipt(state: State, run_id: str) -> Receipt:
    if not isinstance(run_id, str) or (run_id not in state.vacuums.ended and run_id not in state.vacuums.runs):
        raise InvalidArgument(f"no vacuum run {run_id!r} is on record (the report of a vacuum gives its run_id; "
                              "`retention-ledger history --type VacuumFinished` lists them)")
    parts = state.receipts.of_run(run_id)
    closed = state.receipts.closed.get(run_id)
    views = tuple(ReceiptPartView(p.first, p.last, p.count, p.bytes, p.root, p.digest, from_micros(p.time))
                  for p in parts)
    if closed is None:
        return Receipt(run_id, None, sum(p.count for p in parts), sum(p.bytes for p in parts), None, views, None)
    return Receipt(run_id, from_micros(closed.time), closed.files, closed.bytes, closed.root, views, closed.seq)


def leaves_of(store: EventStore, part: PartInfo) -> list[tuple[str, int]]:
    """A part's leaves as stored, checked against the digest and the root its event carries."""
    data = store.read_blob(part.digest)
    where = f"{store.path}: the receipt part of vacuum {part.run_id} ({part.first} to {part.last}, {part.digest})"
    if data is None or hashlib.sha256(data).hexdigest() != part.digest:
        raise LedgerCorrupt(f"{where} {'is missing' if data is None else 'does not match its digest'}; restore the "
                            "ledger from a backup")
    try:
        raw = zlib.decompress(data)
        leaves = list(read_deleted(raw))
    except (zlib.error, ValueError, UnicodeError) as exc:
        raise LedgerCorrupt(f"{where} cannot be read ({exc}); restore the ledger from a backup") from None
    keys = [k for k, _ in leaves]
    problem = ("holds no objects" if not leaves else
               "is not sorted by key" if any(a > b for a, b in zip(keys, keys[1:])) else
               "does not run from its first key to its last" if (keys[0], keys[-1]) != (part.first, part.last) else
               "does not hold as many objects, or bytes, as its event says"
               if (len(leaves), sum(s for _, s in leaves)) != (part.count, part.bytes) else
               "does not hash to the Merkle root its event carries"
               if root_of_leaves([leaf(deleted_leaf(k, s)) for k, s in leaves]).hex() != part.root else None)
    if problem is not None:
        raise LedgerCorrupt(f"{where} {problem}: the receipt was edited; restore the ledger from a backup")
    return leaves


def check_receipts(store: EventStore, state: State) -> int:
    """``verify``'s check: every part of every receipt re-read and re-hashed (the fold has checked
    each receipt's root against its parts). Returns how many objects the receipts hold."""
    total = 0
    for part in state.receipts.parts.values():
        total += len(leaves_of(store, part))
    return total


def relative_key(key: str, root: str) -> str:
    """A key as receipts hold it (relative to the warehouse root), from a key or a full path or URI."""
    if not isinstance(key, str) or not key.strip():
        raise InvalidArgument(f"a key is the path of an object in the warehouse, such as 'sales/t-1/a.parquet' "
                              f"or '{root.rstrip('/')}/sales/t-1/a.parquet', not {key!r}")
    stems = [root.rstrip("/") + "/"]
    if "://" not in root:
        stems.append("file://" + stems[0])
    for stem in stems:
        if key.startswith(stem):
            return key[len(stem):]
    if "://" in key or key.startswith("/"):
        raise InvalidArgument(f"{key} is not inside the warehouse {root}: receipts name objects under it")
    return key


def prove_deleted(store: EventStore, state: State, key: str, root: str) -> DeletionProof:
    wanted = relative_key(key, root)
    for part in state.receipts.covering(wanted):
        leaves = leaves_of(store, part)
        keys = [k for k, _ in leaves]
        at = bisect.bisect_left(keys, wanted)
        if at == len(keys) or keys[at] != wanted:
            continue
        entries = [deleted_leaf(k, s) for k, s in leaves]
        leaf_path = tuple(p.hex() for p in inclusion_proof(at, entries))
        closed = state.receipts.closed.get(part.run_id)
        if closed is None:
            return DeletionProof(wanted, leaves[at][1], part.run_id, from_micros(part.time), part.seq, at, part.first,
                                 part.last, part.count, part.bytes, part.root, leaf_path, None, None, (), None)
        parts = state.receipts.of_run(part.run_id)
        index = parts.index(part)
        part_path = tuple(p.hex() for p in inclusion_proof(index, [p.entry() for p in parts]))
        assert receipt_root(parts) == closed.root
        return DeletionProof(wanted, leaves[at][1], part.run_id, from_micros(closed.time), closed.seq, at,
                             part.first, part.last, part.count, part.bytes, part.root, leaf_path, index, len(parts),
                             part_path, closed.root)
    raise NotDeleted(f"{wanted} is not in any vacuum's receipt: no vacuum run recorded deleting it (a file a "
                     "vacuum never reached, one outside the warehouse, or one deleted by other means)")


def check_against(proof: DeletionProof, state: State, upto: int) -> None:
    """That a proof's anchor is in a log (folded into ``state``) at or before event ``upto`` (a
    checkpoint's): raises ``LedgerCorrupt`` naming what does not match."""
    if not proof.verify():
        raise LedgerCorrupt(f"the proof that {proof.key} was deleted does not hold: its audit paths do not lead "
                            "to the roots it names (the proof was edited)")
    if proof.receipt_root is not None:
        closed = state.receipts.closed.get(proof.run_id)
        anchored = closed is not None and closed.root == proof.receipt_root and closed.seq == proof.seq
        what = f"vacuum {proof.run_id}'s receipt with root {proof.receipt_root[:16]}..."
    else:
        anchored = any(p.root == proof.part_root and p.seq == proof.seq for p in state.receipts.of_run(proof.run_id))
        what = f"a receipt part of vacuum {proof.run_id} with root {proof.part_root[:16]}..."
    if not anchored:
        raise LedgerCorrupt(f"the log does not hold {what} at event #{proof.seq}: the proof is not this ledger's, "
                            "or was edited")
    if proof.seq > upto:
        raise LedgerCorrupt(f"{what} is event #{proof.seq}, after the checkpoint (#{upto}): take a checkpoint after "
                            "it, so that it covers the receipt")
