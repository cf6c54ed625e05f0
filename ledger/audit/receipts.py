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

A run that took over a stopped one may find gone what that run deleted without writing it down:
it records the keys it found absent (``core.receipts.FoundAbsent``), and ``AbsenceProof`` proves
one of them the same way (the leaf's audit path to its part's root, the part's event the anchor).
That is an observation, not a deletion: ``prove_deleted`` still answers ``NotDeleted`` for such a
key, naming the run that found it absent; an erasure request's status and bundle are settled by it
(``settle_many``, R25).

``prove_deleted_many(keys)`` answers for a set of keys (``DeletionProofs``: each key's proof, or
why it has none) reading each part once: a part holds up to 10,000 objects, and reading and
hashing it again for each of its keys made proving a run's 24,000 keys take minutes. A key is
spelt as the user has it (``object_keys``).
"""

from __future__ import annotations

import bisect
import json
import os
import types
import typing
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, TypeVar, Union

import attrs
from attrs import AttrsInstance
from vacuum_work.leaves import Summary

from ..chain import deleted_leaf, leaf, node, root_from_inclusion, unpack_part
from ..clock import Micros, from_micros, iso, iso_utc
from ..core.model import State
from ..core.receipts import PartInfo
from ..errors import InvalidArgument, LedgerCorrupt, NotDeleted
from ..persistence.contract import EventStore
from . import outputs
from .object_keys import warehouse_keys, why_not_held

T = TypeVar("T", bound=AttrsInstance)


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
    found_absent: int = 0
    """Objects it looked for, to delete them, and found already gone (``FoundAbsent``): not its
    deletions, and not in ``files`` or the root."""

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "finished_at": None if self.finished_at is None else iso_utc(self.finished_at),
                "files": self.files, "bytes": self.bytes, "root": self.root, "seq": self.seq,
                "parts": [p.to_dict() for p in self.parts], "found_absent": self.found_absent}


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
            part_path = [bytes.fromhex(p) for p in self.part_path]
        except ValueError:
            return False
        if not _leaf_holds(self):  # which reads the part's root
            return False
        if self.receipt_root is None:
            return not part_path
        if self.part_index is None or self.parts is None:
            return False
        entry = Summary(self.part_first, self.part_last, self.part_count, self.part_bytes, self.part_root).entry()
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
        return cls.from_dict(read_json(text, "a deletion proof (retention-ledger prove-deleted KEY --out FILE "
                                             "writes one)"))

    @classmethod
    def from_dict(cls, data: Any) -> DeletionProof:
        try:
            data = dict(data)
            data.pop("verified", None)  # the CLI's --json output says whether it verified there
            data["deleted_at"] = read_time(data["deleted_at"])
            data["leaf_path"], data["part_path"] = tuple(data["leaf_path"]), tuple(data["part_path"])
            return well_typed(cls(**data))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InvalidArgument(f"not a deletion proof (retention-ledger prove-deleted KEY --out FILE writes one): "
                                  f"{exc}") from None

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> DeletionProof:
        return cls.from_json(read_text(path, "deletion proof"))


def _leaf_holds(proof: _Stated) -> bool:
    """Whether a proof's leaf (its key and size) leads by its audit path to the root of the part it
    names, and its key lies in that part's range."""
    try:
        path = [bytes.fromhex(p) for p in proof.leaf_path]
        root = bytes.fromhex(proof.part_root)
    except ValueError:
        return False
    found = root_from_inclusion(proof.leaf_index, proof.part_count, deleted_leaf(proof.key, proof.size), path)
    return found is not None and found == root and proof.part_first <= proof.key <= proof.part_last


@attrs.frozen
class AbsenceProof:
    """That vacuum run ``run_id``, about to delete ``key`` (``size`` bytes, as the ledger listed it),
    looked and found it already gone, recorded at ``found_absent_at`` by event ``seq`` (its
    ``FoundAbsent`` part, the anchor): what the run observed, not a deletion. A run it took over
    deleted the object and was stopped before writing that down; this settles a file of an erasure
    request (R25) where no deletion proof can exist."""
    key: str
    size: int
    run_id: str
    found_absent_at: datetime
    seq: int
    leaf_index: int
    part_first: str
    part_last: str
    part_count: int
    part_bytes: int
    part_root: str
    leaf_path: tuple[str, ...]

    def verify(self) -> bool:
        """Whether the leaf's audit path leads to the part's root (that the part is the chain's, by
        the run, at that event, is the offline verifier's half: ``check_absence_against``)."""
        return _leaf_holds(self)

    def to_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "found_absent_at": iso_utc(self.found_absent_at),
                "leaf_path": list(self.leaf_path)}

    @classmethod
    def from_dict(cls, data: Any) -> AbsenceProof:
        try:
            data = dict(data)
            data["found_absent_at"] = read_time(data["found_absent_at"])
            data["leaf_path"] = tuple(data["leaf_path"])
            return well_typed(cls(**data))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InvalidArgument(f"not a proof that an object was found absent (an erasure bundle's answer): "
                                  f"{exc}") from None


@attrs.frozen
class NotDeletedKey:
    """Why one of the keys asked has no deletion proof: no vacuum's receipt holds ``key`` (spelt as
    receipts hold keys). It says nothing about whether the object exists."""
    key: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "not_deleted": self.reason}


Answer = Union[DeletionProof, AbsenceProof, NotDeletedKey]
"""A key's answer: its deletion proof, the proof a run found it absent (only where the key is settled,
``settle_many``: an erasure's status and bundle), or why it has neither."""

BUNDLE_KIND = "retention-ledger deletion proofs"


@attrs.frozen
class DeletionProofs:
    """The answer for a set of keys, one per key in the order asked: its ``DeletionProof``, or a
    ``NotDeletedKey`` saying why there is none. A key no receipt holds is an answer, not an error,
    so that 23,999 proofs are not lost to one key missing; ``require_all()`` makes it one."""
    answers: tuple[Answer, ...]

    def __iter__(self) -> Iterator[Answer]:
        return iter(self.answers)

    def __len__(self) -> int:
        return len(self.answers)

    @property
    def proofs(self) -> tuple[DeletionProof, ...]:
        return tuple(a for a in self.answers if isinstance(a, DeletionProof))

    @property
    def not_deleted(self) -> tuple[NotDeletedKey, ...]:
        return tuple(a for a in self.answers if isinstance(a, NotDeletedKey))

    @property
    def found_absent(self) -> tuple[AbsenceProof, ...]:
        """The keys a run found absent, no run having recorded deleting them (only ``settle_many``
        answers so: ``prove_deleted_many`` says why such a key is not proven deleted)."""
        return tuple(a for a in self.answers if isinstance(a, AbsenceProof))

    def verify(self) -> bool:
        """Whether every proof's audit paths lead where they claim (``DeletionProof.verify``)."""
        return all(p.verify() for p in self.proofs) and all(a.verify() for a in self.found_absent)

    @property
    def unproven(self) -> tuple[NotDeletedKey, ...]:
        """Every key with no deletion proof, each with why: none in any receipt, or found absent by a
        run (an observation: no run recorded deleting it)."""
        return tuple(a if isinstance(a, NotDeletedKey) else
                     NotDeletedKey(a.key, f"{a.key} is in no vacuum's receipt: it was found absent by vacuum run "
                                          f"{a.run_id} at {iso_utc(a.found_absent_at)}, which did not delete it")
                     for a in self.answers if not isinstance(a, DeletionProof))

    def require_all(self) -> DeletionProofs:
        """Itself if every key is proven; else ``NotDeleted`` naming the keys that are not."""
        missing = self.unproven
        if len(missing) == 1:
            raise NotDeleted(missing[0].reason)
        if missing:
            shown = ", ".join(m.key for m in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise NotDeleted(f"{len(missing)} of the {len(self.answers)} keys are in no vacuum's receipt: {shown}; no "
                             "vacuum run recorded deleting them (files a vacuum never reached, or deleted by other "
                             "means, or misspelt: each answer says why)")
        return self

    def lines(self) -> Iterator[str]:
        """The JSON bundle, one answer a line (what ``write`` writes and ``read`` reads)."""
        yield json.dumps({"kind": BUNDLE_KIND, "keys": len(self.answers), "proven": len(self.proofs)})[:-1] + \
            ', "answers": [\n'
        for i, answer in enumerate(self.answers):
            yield json.dumps(answer.to_dict()) + (",\n" if i + 1 < len(self.answers) else "\n")
        yield "]}\n"

    def to_json(self) -> str:
        return "".join(self.lines())

    def write(self, path: str | os.PathLike[str], *, overwrite: bool = False, protected: Iterable[str] = ()) -> None:
        """The bundle to a file: never over one that exists without ``overwrite=True``, nor ever over
        one of ``protected`` (``outputs.target``)."""
        out = outputs.target(path, "deletion proofs", overwrite=overwrite, protected=protected)
        with open(out, "w", encoding="utf-8") as sink:
            sink.writelines(self.lines())

    @classmethod
    def from_json(cls, text: str) -> DeletionProofs:
        """A bundle, or a single proof (``prove-deleted KEY --out``) as a bundle of one."""
        data = read_json(text, "a deletion proof or a bundle of them (retention-ledger prove-deleted --out FILE "
                           "writes one)")
        if not isinstance(data, dict) or data.get("kind") != BUNDLE_KIND:
            return cls((DeletionProof.from_dict(data),))
        answers = data.get("answers")
        if not isinstance(answers, list):
            raise InvalidArgument("a bundle of deletion proofs with no list of answers: the file was cut short")
        if set(data) != {"kind", "keys", "proven", "answers"}:
            raise LedgerCorrupt(f"a bundle of deletion proofs that holds {sorted(set(data))}, not kind, keys, proven "
                                "and answers: the bundle was edited")
        bundle = cls(tuple(answer_from(a) for a in answers))
        if data["keys"] != len(bundle) or data["proven"] != len(bundle.proofs):
            raise LedgerCorrupt(f"a bundle of deletion proofs that says it answers {data['keys']!r} keys and proves "
                                f"{data['proven']!r}, but holds {len(bundle)} answers and {len(bundle.proofs)} proofs: "
                                "the bundle was edited")
        return bundle

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> DeletionProofs:
        """A bundle, or a single proof as a bundle of one."""
        return cls.from_json(read_text(path, "deletion proofs"))


def answer_from(data: Any) -> Answer:
    """One answer of a bundle as written: a key's proof, or why it has none."""
    if isinstance(data, dict) and set(data) == {"key", "not_deleted"}:
        if isinstance(data["key"], str) and isinstance(data["not_deleted"], str):
            return NotDeletedKey(data["key"], data["not_deleted"])
    if isinstance(data, dict) and "found_absent_at" in data:
        return AbsenceProof.from_dict(data)
    return DeletionProof.from_dict(data)


def read_text(path: str | os.PathLike[str], what: str) -> str:
    try:
        with open(path, encoding="utf-8") as source:
            return source.read()
    except OSError as exc:
        raise InvalidArgument(f"cannot read the {what} {os.fspath(path)}: {exc.strerror or exc}") from None


def read_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"not {what}: {exc}") from None


def receipt(state: State, run_id: str) -> Receipt:
    if not isinstance(run_id, str) or (run_id not in state.vacuums.ended and run_id not in state.vacuums.runs):
        raise InvalidArgument(f"no vacuum run {run_id!r} is on record (the report of a vacuum gives its run_id; "
                              "`retention-ledger history --type VacuumFinished` lists them)")
    parts = state.receipts.of_run(run_id)
    closed = state.receipts.closed.get(run_id)
    views = tuple(ReceiptPartView(p.first, p.last, p.count, p.bytes, p.root, p.digest, from_micros(p.time))
                  for p in parts)
    absent = sum(p.count for p in state.receipts.absent_of(run_id))
    if closed is None:
        return Receipt(run_id, None, sum(p.count for p in parts), sum(p.bytes for p in parts), None, views, None,
                       absent)
    return Receipt(run_id, from_micros(closed.time), closed.files, closed.bytes, closed.root, views, closed.seq,
                   absent)


def read_part(store: EventStore, part: PartInfo) -> tuple[list[tuple[str, int]], list[list[bytes]]]:
    """A part's leaves as stored and every level of their Merkle tree, checked against the digest and
    the root its event carries."""
    where = f"{store.path}: the receipt part of vacuum {part.run_id} ({part.first} to {part.last}, {part.digest})"
    leaves = store.checked_blob(part.digest, where, unpack_part)
    tree = merkle_levels([leaf(deleted_leaf(k, s)) for k, s in leaves]) if leaves else []
    problem = part.summary().problem(leaves, tree[-1][0] if tree else b"")
    if problem is not None:
        raise LedgerCorrupt(f"{where} {problem}: the receipt was edited; restore the ledger from a backup")
    return leaves, tree


def merkle_levels(leaves: list[bytes]) -> list[list[bytes]]:
    """Every level of RFC 6962's tree over leaf hashes, from the leaves to the root (the tree
    whose root ``vacuum_work.leaves.root_of_leaves`` computes, its levels kept): an audit path is then read off the levels
    (``audit_path``) instead of rehashing the tree for each leaf."""
    levels = [leaves]
    while len(levels[-1]) > 1:
        level = levels[-1]
        paired = [node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        levels.append(paired)
    return levels


def audit_path(levels: list[list[bytes]], index: int) -> tuple[str, ...]:
    """RFC 6962's audit path of leaf ``index``, leaf first: its sibling on each level that has one
    (a last node with none is carried up as it is)."""
    path = []
    for level in levels[:-1]:
        if index ^ 1 < len(level):
            path.append(level[index ^ 1].hex())
        index //= 2
    return tuple(path)


def check_receipts(store: EventStore, state: State) -> int:
    """``verify``'s check: every part of every receipt re-read and re-hashed (the fold has checked
    each receipt's root against its parts). Returns how many objects the receipts hold."""
    total = 0
    for part in state.receipts.parts.values():
        total += len(read_part(store, part)[0])
    for part in state.receipts.absent.values():  # not deletions, not counted; edited all the same if changed
        read_part(store, part)
    return total


def prove_deleted(store: EventStore, state: State, key: str, root: str) -> DeletionProof:
    """The proof that a vacuum deleted ``key`` (any spelling ``object_keys`` reads), or ``NotDeleted``."""
    [answer] = prove_deleted_many(store, state, [key], root).answers
    if isinstance(answer, DeletionProof):
        return answer
    [missing] = DeletionProofs((answer,)).unproven
    raise NotDeleted(missing.reason)


def prove_deleted_many(store: EventStore, state: State, keys: Iterable[str], root: str) -> DeletionProofs:
    """Each key's proof, or why it has none, in the order given; each part read at most once.
    ``InvalidArgument`` (before any part is read) for a key that names nothing in the warehouse."""
    return _answers(store, state, keys, root, settle=False)


def settle_many(store: EventStore, state: State, keys: Iterable[str], root: str) -> DeletionProofs:
    """As ``prove_deleted_many``, but a key no receipt holds that a run found absent is answered with
    that run's ``AbsenceProof``: what settles a file of an erasure request (R25)."""
    return _answers(store, state, keys, root, settle=True)


def _answers(store: EventStore, state: State, keys: Iterable[str], root: str, *, settle: bool) -> DeletionProofs:
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise InvalidArgument(f"keys must be a list (or any iterable) of keys, not {type(keys).__name__} "
                              f"{str(keys)[:60]!r}; for one key, prove_deleted(key)")
    asked = list(keys)
    readings = [warehouse_keys(k, root, state) for k in asked]
    wanted = sorted({k for keys_ in readings for k in keys_})
    found = _held(store, state.receipts.parts.values(), wanted, _Anchors(state).proof)
    rest = [k for k in wanted if k not in found]
    absent = _held(store, state.receipts.absent.values(), rest, _absence) if rest else {}
    return DeletionProofs(tuple(_answer(name, keys_, found, absent, state, settle)
                                for name, keys_ in zip(asked, readings)))


def _answer(name: str, keys: tuple[str, ...], found: dict[str, DeletionProof], absent: dict[str, AbsenceProof],
            state: State, settle: bool) -> Answer:
    held = [found[k] for k in keys if k in found]
    if len(held) > 1:
        raise InvalidArgument(f"{name} could name {keys[0]} or {keys[1]}, both deleted (as a URI, its escapes are "
                              "decoded; as Spark's plans print a path, they are the file's own name): give the key "
                              "relative to the warehouse")
    if held:
        return held[0]
    gone = next((absent[k] for k in keys if k in absent), None)
    if gone is None:
        return NotDeletedKey(keys[0], why_not_held(keys[0], state))
    if settle:
        return gone
    return NotDeletedKey(gone.key, f"{gone.key} is in no vacuum's receipt: no run recorded deleting it, but it was "
                                   f"found absent by vacuum run {gone.run_id} at {iso_utc(gone.found_absent_at)} "
                                   f"(event #{gone.seq}): a run that one took over deleted it and was stopped before "
                                   "writing that down (an erasure request's status and bundle carry the observation)")


P = TypeVar("P")


def _held(store: EventStore, parts: Iterable[PartInfo], wanted: list[str],
          make: Callable[[PartInfo, int, str, int, tuple[str, ...]], P]) -> dict[str, P]:
    """The proofs (``make(part, index, key, size, audit path)``) of those of ``wanted`` (sorted) that
    ``parts`` hold, each from the newest part that holds it. A part is read only if a wanted key falls
    in its key range, and then once."""
    found: dict[str, P] = {}
    if not wanted:
        return found
    for part in sorted(parts, key=lambda p: p.seq, reverse=True):
        todo = [k for k in wanted[bisect.bisect_left(wanted, part.first):bisect.bisect_right(wanted, part.last)]
                if k not in found]
        if not todo:
            continue
        leaves, tree = read_part(store, part)
        keys = [k for k, _ in leaves]
        for key in todo:
            at = bisect.bisect_left(keys, key)
            if at < len(keys) and keys[at] == key:
                found[key] = make(part, at, key, leaves[at][1], audit_path(tree, at))
    return found


def _absence(part: PartInfo, at: int, key: str, size: int, leaf_path: tuple[str, ...]) -> AbsenceProof:
    """The proof that ``part`` (a ``FoundAbsent`` part) holds ``key``, anchored on the part's own event."""
    return AbsenceProof(key, size, part.run_id, from_micros(part.time), part.seq, at, part.first, part.last,
                        part.count, part.bytes, part.root, leaf_path)


class _Anchors:
    """Where each part's proofs lead: its run's receipt (the part's audit path in it, worked out
    once per run), or, for a run that never finished, the part's own event."""

    def __init__(self, state: State) -> None:
        self._state = state
        self._runs: dict[str, tuple[list[PartInfo], list[list[bytes]]]] = {}

    def proof(self, part: PartInfo, at: int, key: str, size: int, leaf_path: tuple[str, ...]) -> DeletionProof:
        closed = self._state.receipts.closed.get(part.run_id)
        if closed is None:
            return DeletionProof(key, size, part.run_id, from_micros(part.time), part.seq, at, part.first, part.last,
                                 part.count, part.bytes, part.root, leaf_path, None, None, (), None)
        if part.run_id not in self._runs:
            parts = self._state.receipts.of_run(part.run_id)
            self._runs[part.run_id] = parts, merkle_levels([leaf(p.entry()) for p in parts])
        parts, tree = self._runs[part.run_id]
        assert tree[-1][0].hex() == closed.root  # the fold checked it
        index = parts.index(part)
        return DeletionProof(key, size, part.run_id, from_micros(closed.time), closed.seq, at, part.first, part.last,
                             part.count, part.bytes, part.root, leaf_path, index, len(parts), audit_path(tree, index),
                             closed.root)


def check_against(proof: DeletionProof, state: State, upto: int) -> None:
    """That a proof is a log's (folded into ``state``), field by field, at or before event ``upto`` (a
    checkpoint's): raises ``LedgerCorrupt`` naming what does not match.

    The audit paths (``verify``) bind the key, its size and the part's summary to the roots the proof
    names; everything else it states is compared with what the log records, because the offline
    check prints it as verified: the run, its receipt's root and event (or, for a run that never
    finished, its part's event), the part's place among the run's parts, and ``deleted_at``, which
    must be that event's time. A proof backdated to 2020 is an edited proof, not an old deletion."""
    if not proof.verify():
        raise LedgerCorrupt(f"the proof that {proof.key} was deleted does not hold: its audit paths do not lead "
                            "to the roots it names (the proof was edited)")
    parts = state.receipts.of_run(proof.run_id)
    if proof.receipt_root is not None:
        closed = state.receipts.closed.get(proof.run_id)
        anchored = closed is not None and closed.root == proof.receipt_root and closed.seq == proof.seq
        what = f"vacuum {proof.run_id}'s receipt with root {proof.receipt_root[:16]}..."
        at = None if closed is None else closed.time
        index = proof.part_index if proof.parts == len(parts) and proof.part_index is not None else None
        part = parts[index] if index is not None and 0 <= index < len(parts) else None
    else:
        part = next((p for p in parts if p.root == proof.part_root and p.seq == proof.seq), None)
        anchored = part is not None
        what = f"a receipt part of vacuum {proof.run_id} with root {proof.part_root[:16]}..."
        at = None if part is None else part.time
        if (proof.part_index, proof.parts) != (None, None):
            part = None  # a proof anchored on its part's event has no place in a receipt to state
    if not anchored:
        raise LedgerCorrupt(f"the log does not hold {what} at event #{proof.seq}: the proof is not this ledger's, "
                            "or was edited")
    check_anchor(f"the proof that {proof.key} was deleted", proof, part, "deleted_at", at, what, upto)


def check_absence_against(proof: AbsenceProof, state: State, upto: int) -> None:
    """That a proof that a run found an object absent is a log's (folded into ``state``), field by
    field, at or before event ``upto``: its audit path holds, the log records that ``FoundAbsent``
    part of that run at that event, with the summary the proof states, and ``found_absent_at`` is
    that event's time. ``LedgerCorrupt`` naming what does not match."""
    said = f"the proof that {proof.key} was found absent"
    if not proof.verify():
        raise LedgerCorrupt(f"{said} does not hold: its audit path does not lead to the root it names (the proof was "
                            "edited)")
    part = state.receipts.absent.get(f"{proof.run_id}@{proof.seq}")
    what = f"vacuum {proof.run_id}'s record of objects found absent with root {proof.part_root[:16]}..."
    if part is None or part.root != proof.part_root:
        raise LedgerCorrupt(f"the log does not hold {what} at event #{proof.seq}: the proof is not this ledger's, or "
                            "was edited")
    check_anchor(said, proof, part, "found_absent_at", part.time, what, upto)


_Stated = Union[DeletionProof, AbsenceProof]
"""A proof (of a deletion, or of an object found absent): what it says of its leaf and of the part
that holds it."""


def check_anchor(said: str, proof: _Stated, part: PartInfo | None, field: str, at: Micros | None, what: str,
                 upto: int) -> None:
    """That the part a proof states (its summary, and for a closed receipt its place among the run's
    parts) is one the log records for its run, that the time it states (``field``) is its anchor
    event's (``at``), and that the event is at or before ``upto``: ``LedgerCorrupt`` if not."""
    stated = (proof.part_first, proof.part_last, proof.part_count, proof.part_bytes, proof.part_root)
    if part is None or (part.first, part.last, part.count, part.bytes, part.root) != stated:
        raise LedgerCorrupt(f"{said} names a part of vacuum {proof.run_id}'s record ({proof.part_first} to "
                            f"{proof.part_last}, {proof.part_count} objects, {proof.part_bytes} bytes, root "
                            f"{proof.part_root[:16]}...) that the log does not record there: the proof was edited")
    when: datetime = getattr(proof, field)
    if at is None or when != from_micros(at):
        raise LedgerCorrupt(f"{said} gives {field} {iso_utc(when)}, but the log records {what} at "
                            f"{iso(at)} (event #{proof.seq}): the proof was edited")
    if proof.seq > upto:
        raise LedgerCorrupt(f"{what} is event #{proof.seq}, after the checkpoint (#{upto}): take a checkpoint after "
                            "it, so that it covers it")


def read_time(text: Any) -> datetime:
    """A proof's time as written (ISO 8601 with its zone); ``ValueError`` for anything else: a time
    with no zone is no instant, and could not be compared with the log's."""
    if not isinstance(text, str):
        raise ValueError(f"a time is ISO 8601 text, not {text!r:.40}")
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"the time {text!r:.40} has no zone")
    return value


def well_typed(value: T) -> T:
    """``value`` (a frozen attrs proof read from a file) if each field holds what its annotation says
    (text, a whole number, a time, a tuple of text, or None where allowed); else ``TypeError``
    naming the field, so an edit of a type is refused in one line, never a traceback from deep in
    the hashing."""
    hints = typing.get_type_hints(type(value))
    for field in attrs.fields(type(value)):
        found = getattr(value, field.name)
        if not _conforms(found, hints[field.name]):
            raise TypeError(f"{field.name} is {found!r:.60}, not {_said(hints[field.name])}")
    return value


def _conforms(value: Any, hint: Any) -> bool:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return any(_conforms(value, h) for h in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        return isinstance(value, tuple) and all(_conforms(v, item) for v in value)
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _said(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_said(h) for h in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        return f"a list of {_said(typing.get_args(hint)[0])}"
    return {str: "text", int: "a whole number", datetime: "a time", type(None): "null"}.get(hint, str(hint))
