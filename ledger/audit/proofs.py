"""Taking checkpoints and inclusion proofs from a ledger file (R16).

A checkpoint only ever pins a chain that holds: taking one recomputes the chain from
the first event (not the fold: that is ``verify``'s), so a log edited before the
checkpoint cannot be blessed by it.
"""

from __future__ import annotations

from ..chain import GENESIS, ChainCheck, inclusion_proof as audit_path, leaf, root_of_leaves
from ..clock import from_micros
from ..errors import IncompatibleLedger, InvalidArgument, LedgerCorrupt
from ..persistence.contract import EventStore
from .checkpoints import Checkpoint, InclusionProof, KeyLike


def _checked_hashes(store: EventStore, upto: int) -> list[bytes]:
    if not store.chained:
        raise IncompatibleLedger(f"{store.path} predates the hash chain (format {store.format}); open it "
                                 "writable once to upgrade it, then take checkpoints")
    check = ChainCheck(store.path, keep_hashes=True)
    for row in store.read(0, upto=upto, with_hash=True):
        check.check(row)
    assert check.hashes is not None
    if check.seq != upto:
        raise LedgerCorrupt(f"{store.path}: the log ends at event #{check.seq}, not #{upto}; run verify")
    return check.hashes


def checkpoint(store: EventStore, *, key: KeyLike | None = None) -> Checkpoint:
    """The head of the log now: seq, the last event's time and hash, and the Merkle root;
    signed with ``key`` (an Ed25519 private key, or the path of its PEM file) if given."""
    seq, time = store.head()
    hashes = _checked_hashes(store, seq)
    taken = Checkpoint(seq, from_micros(time), (hashes[-1] if hashes else GENESIS).hex(),
                       root_of_leaves([leaf(h) for h in hashes]).hex())
    return taken if key is None else taken.signed(key)


def inclusion_proof(store: EventStore, seq: int, cp: Checkpoint) -> InclusionProof:
    """The audit path proving event ``seq`` is in the checkpoint's tree. Refused if the log no
    longer holds what the checkpoint covered (then nothing in it can be proven)."""
    if not isinstance(cp, Checkpoint):
        raise InvalidArgument(f"the checkpoint must be a Checkpoint, got {type(cp).__name__}")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= cp.seq:
        raise InvalidArgument(f"event {seq!r} is not covered by checkpoint #{cp.seq} (events 1 to {cp.seq})")
    if store.head()[0] < cp.seq:
        raise LedgerCorrupt(f"{store.path}: the log holds fewer events than checkpoint #{cp.seq} covers: "
                            "it was truncated; run verify(against=checkpoint)")
    hashes = _checked_hashes(store, cp.seq)
    leaves = [leaf(h) for h in hashes]
    if root_of_leaves(leaves).hex() != cp.root:
        raise LedgerCorrupt(f"{store.path}: the log's first {cp.seq} events are not those checkpoint #{cp.seq} "
                            "covered; run verify(against=checkpoint)")
    path = audit_path(seq - 1, hashes, leaves=leaves)
    return InclusionProof(seq, hashes[seq - 1].hex(), cp.seq, tuple(p.hex() for p in path))
