"""The offline verifier: an export and a checkpoint, checked without the ledger file.

What an auditor runs on their own machine, with nothing but what they were handed
(``python -m ledger.audit verify EXPORT CHECKPOINT [--public-key K]``): the export's
chain is recomputed from the first event; its events are folded from nothing, which
re-checks every rule; and the checkpoint must match the export (its head hash at its
seq, and the Merkle root of the events up to it), its signature verified with the
auditor's public key if given. Nothing here opens SQLite.
"""

from __future__ import annotations

import os
from typing import Iterator

import attrs

from ..chain import ChainCheck, leaf, root_of_leaves
from ..core.events import Row
from ..core.erasures import commitment, read_statement
from ..core.model import State, fold_rows
from ..errors import CheckpointInvalid, InvalidArgument, LedgerCorrupt, NotDeleted
from . import erasures, export
from .checkpoints import Checkpoint, KeyLike, blame_edited_seq
from .erasures import ErasureProof
from .receipts import DeletionProof, DeletionProofs, check_against
from .verify import confirm_redactions


@attrs.frozen
class OfflineReport:
    events: int
    head: str | None
    checkpoint: Checkpoint
    signature_checked: bool
    live: int
    """Live tables at the end of the export (the fold's answer, for the auditor's notes)."""
    state: State | None = attrs.field(default=None, repr=False, eq=False)
    """The export folded (what a deletion proof is checked against)."""
    hashes: list[bytes] | None = attrs.field(default=None, repr=False, eq=False)
    """Every event's hash, in seq order (what an inclusion proof's event is checked against)."""


def verify_export(path: str | os.PathLike[str], cp: Checkpoint, *,
                  public_key: KeyLike | None = None) -> OfflineReport:
    """Raises ``LedgerCorrupt`` (the export) or ``CheckpointInvalid`` (the checkpoint) naming what
    is wrong; returns what was checked when all is well."""
    if public_key is not None:
        cp.check_signature(public_key)
    where = os.fspath(path)
    check = ChainCheck(where, keep_hashes=True)
    times: dict[int, int] = {}
    source = export.read(path)  # a missing or unreadable file says so here, not as a corrupt event

    def rows() -> Iterator[Row]:
        for row in check.rows(source):
            if row[0] == cp.seq:
                times[cp.seq] = row[5]
            yield row
    state = fold_rows(State(), rows())
    confirm_redactions(where, check, state)
    hashes = check.hashes
    assert hashes is not None
    blame_edited_seq(cp, hashes)
    if cp.seq > len(hashes):
        raise LedgerCorrupt(f"{where}: the export holds {len(hashes)} events but the checkpoint covers {cp.seq}: "
                            "events were removed (or the export was taken before the checkpoint)")
    if cp.seq and hashes[cp.seq - 1].hex() != cp.head:
        raise LedgerCorrupt(f"{where}: event #{cp.seq} is not the event the checkpoint ended at: the log up to "
                            "the checkpoint was rewritten")
    if root_of_leaves([leaf(h) for h in hashes[:cp.seq]]).hex() != cp.root:
        raise LedgerCorrupt(f"{where}: the Merkle root of the first {cp.seq} events is not the checkpoint's")
    if cp.seq and times.get(cp.seq) != cp.time_micros:
        raise CheckpointInvalid(f"checkpoint #{cp.seq}'s time is not that of event #{cp.seq}: the checkpoint "
                                "was edited (its head and root still match the export)")
    return OfflineReport(len(hashes), check.head.hex() if hashes else None, cp, public_key is not None,
                         len(state.tables.bindings), state, hashes)


def verify_deletion(proof: DeletionProof, path: str | os.PathLike[str], cp: Checkpoint, *,
                    public_key: KeyLike | None = None) -> OfflineReport:
    """That ``proof`` holds (both audit paths), that its root is the one the export records, and that
    the export is sound and extends the checkpoint, which covers the receipt (R20, R16)."""
    return verify_deletions(DeletionProofs((proof,)), path, cp, public_key=public_key)


def verify_deletions(proofs: DeletionProofs, path: str | os.PathLike[str], cp: Checkpoint, *,
                     public_key: KeyLike | None = None) -> OfflineReport:
    """Every proof of a bundle checked as ``verify_deletion`` checks one (the export read once);
    then, if the bundle answers a key with no proof, ``NotDeleted`` naming it: the bundle does not
    prove that every key it was asked about was deleted."""
    if not proofs.answers:
        raise InvalidArgument("the bundle of deletion proofs holds no keys: it proves nothing")
    report = verify_export(path, cp, public_key=public_key)
    assert report.state is not None
    for proof in proofs.proofs:
        check_against(proof, report.state, cp.seq)
    missing = proofs.unproven
    if missing:
        said = missing[0].reason if len(missing) == 1 else \
            f"{len(missing)} are not: {', '.join(m.key for m in missing[:5])}{' ...' if len(missing) > 5 else ''} " \
            "(each answer in the bundle says why)"
        raise NotDeleted(f"{len(proofs.proofs)} of the {len(proofs)} keys in the bundle are proven deleted; {said}")
    return report


def check_statement(bundle: ErasureProof, data: bytes) -> dict[str, object]:
    """That a statement file (``erasure ID --statement FILE``, kept by whoever made the request) is
    the one the bundle's request committed to: its fields, when it is (R25). Whoever holds it can show
    what was asked; the log alone shows only that something was."""
    body = read_statement(data)
    if not bundle.request.statement:
        raise LedgerCorrupt(f"erasure request {bundle.request_id} was recorded by 0.7, with its predicate in clear "
                            "and no commitment: there is no statement to check")
    if commitment(data) != bundle.request.statement:
        raise LedgerCorrupt(f"the statement given is not the one erasure request {bundle.request_id} committed to "
                            "(another request's, or edited)")
    if sorted(body["tables"]) != sorted(bundle.request.tables):
        raise LedgerCorrupt(f"the statement names {sorted(body['tables'])}, the request {list(bundle.request.tables)}")
    return body


def verify_erasure(bundle: ErasureProof, path: str | os.PathLike[str], cp: Checkpoint, *,
                   public_key: KeyLike | None = None) -> OfflineReport:
    """That an erasure request's bundle holds against an export and a checkpoint (R25): the export is
    sound and extends the checkpoint; the request is the export's, covered by the checkpoint (and its
    inclusion proof, if the bundle has one, leads to the checkpoint's root); its erasure set is the one
    the request's event names; and every file of it has a deletion proof that holds and is anchored
    in the export (``erasures.check``). ``NotDeleted`` names files the bundle does not prove deleted."""
    report = verify_export(path, cp, public_key=public_key)
    assert report.state is not None
    erasures.check(bundle, report.state, cp.seq, report.hashes, cp)
    return report
