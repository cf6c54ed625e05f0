"""``verify``: trust nothing that was not recomputed (R16).

One way through, in this process, to the end of the call (R22), three checks on one reading of
the log: the store's own check of its storage first; then every row, from the first to the head,
through the hash chain (recomputed over the documented encoding: an edited, inserted, deleted or
reordered row breaks it there) on its way into a fold from nothing, which re-checks every rule the
fold knows (an undrop behind its watermark, a commit of a swept write, a mark that moves back are
corrupt logs, not history); and, as the fold passes them, the stored snapshots compared with it
(``persistence.checks``). Then the file lists the commits name. A snapshot that disagrees with the
log is discarded and rebuilt here, not merely reported: it is a cache, and reopening would
otherwise trust it again.

Given a checkpoint (``against``), it also proves the log still begins with exactly the
events the checkpoint covered: an RFC 6962 consistency proof from the checkpoint's tree
to today's. Only a checkpoint kept outside the ledger can catch a log that was rewritten
whole with a freshly computed chain, or truncated and extended again.
"""

from __future__ import annotations

from typing import Iterable

import attrs

from ..chain import ChainCheck, consistency_proof, leaf, root_of_leaves, verify_consistency
from ..core.events import Row
from ..core.erasures import redaction_problem
from ..core.model import State
from .erasures import erasure_set
from ..core.versions import Version, manifest_problem, parse_manifest, removal_problem
from ..errors import CheckpointInvalid, InvalidArgument, LedgerCorrupt
from ..persistence import checks
from ..persistence.contract import EventStore
from ..runner import Runner
from .receipts import check_receipts
from .checkpoints import Checkpoint, KeyLike, blame_edited_seq


@attrs.frozen
class VerifyReport:
    events: int
    last_seq: int
    instances: int
    live: int
    dropped: int
    purged: int
    snapshot_seq: int | None
    """The event the newest stored state (generation) ends at, after the check."""
    snapshot_discarded: bool = False
    """A stored state disagreed with the log (edited, or damaged): every one was thrown away, and
    the state of the present rebuilt and stored again."""
    head: str | None = None
    """The chain hash of the last event (None: an empty log, or a file from before the chain)."""
    chained: bool = True
    """False only for a read-only file from before the chain: nothing could be hashed."""
    hashed_by_upgrade: int = 0
    """Events hashed when the file was upgraded to the chain, not as they were written: the chain
    proves they were not changed since the upgrade, not before it."""
    checkpoint: Checkpoint | None = None
    """The checkpoint the log was proven to extend (``against``)."""
    signature_checked: bool = False
    consistency_proof: tuple[str, ...] = ()
    """RFC 6962 PROOF(checkpoint.seq, today's tree), hex: a third party holding the checkpoint and
    today's root can re-check the extension with it alone."""
    root: str | None = None
    """Today's Merkle tree hash (computed when a checkpoint is given)."""
    generations_compared: int = 0
    """Stored states (the present's, and those ``as_of`` starts from) compared with the fold."""
    generations_discarded: int = 0
    """How many of them disagreed with the log (then every one was deleted: see ``snapshot_discarded``)."""
    receipted: int = 0
    """Objects the vacuums' receipts hold, every part re-hashed against the root its event carries (R20)."""


def verify(runner: Runner, *, against: Checkpoint | None = None,
           public_key: KeyLike | None = None) -> VerifyReport:
    """Check the storage, the chain, and every rule; raises ``LedgerCorrupt`` naming the first bad
    event and why; returns counts when all is well."""
    if against is not None and not isinstance(against, Checkpoint):
        raise InvalidArgument(f"against must be a Checkpoint (Checkpoint.from_json or .read), got "
                              f"{type(against).__name__}")
    if public_key is not None:
        if against is None:
            raise InvalidArgument("public_key checks a checkpoint's signature: pass the checkpoint as against=")
        against.check_signature(public_key)
    store = runner.store
    if against is not None and not store.chained:
        raise LedgerCorrupt(f"{store.path} predates the hash chain (format {store.format}), so it cannot be "
                            "checked against a checkpoint; open it writable once to upgrade it")
    problems = store.integrity_problems()
    if problems:
        found = "; ".join(" ".join(p.split()) for p in problems[:5])
        raise LedgerCorrupt(f"{store.path}: the store's own integrity check failed: {found}; restore the ledger "
                            "from a backup")
    head = store.head()[0]
    chain = ChainCheck(store.path, keep_hashes=against is not None) if store.chained else None

    def rows(after: int, upto: int) -> Iterable[Row]:
        found = store.read(after, upto=upto, with_hash=chain is not None)
        return found if chain is None else chain.rows(found)

    runner.refresh()
    compared = checks.fold_and_compare(store, rows, head)
    fresh = compared.fresh
    if chain is not None:
        confirm_redactions(store.path, chain, fresh)
    _check_manifests(store, fresh)
    _check_erasures(store, fresh)
    deleted = check_receipts(store, fresh)
    extension: dict[str, object] = {}
    if against is not None:
        assert chain is not None and chain.hashes is not None
        extension = _prove_extension(store, against, chain.hashes)
        extension["signature_checked"] = public_key is not None
    # Only now, with the chain proven, is a disagreement the snapshot's fault and not the log's.
    checks.discard(store, compared)
    discarded = bool(compared.disagreed)
    if not runner.cache.checked_by(compared.agreed):
        held = runner.refresh(force=True)
        if held.seq == fresh.seq and held != fresh:
            discarded = True  # what we held came from a snapshot that lied
    if discarded:
        runner.cache.rebuild(fresh)
    instances = list(fresh.tables.all_instances())
    snap = store.latest_generation()
    return VerifyReport(
        events=store.count(), last_seq=fresh.seq, instances=len(instances),
        live=len(fresh.tables.bindings), dropped=sum(i.is_dropped for i in instances),
        purged=sum(i.purged_at is not None for i in instances),
        snapshot_seq=None if snap is None else snap.seq, snapshot_discarded=discarded,
        head=chain.head.hex() if chain is not None and chain.seq else None, chained=chain is not None,
        hashed_by_upgrade=fresh.upkeep.hashed_by_upgrade, generations_compared=len(compared.agreed) + len(compared.disagreed),
        generations_discarded=len(compared.disagreed), receipted=deleted,
        **extension,  # type: ignore[arg-type]
    )


def _prove_extension(store: EventStore, cp: Checkpoint, hashes: list[bytes]) -> dict[str, object]:
    """That today's log begins with exactly the checkpoint's events: its head at the same place,
    and an RFC 6962 consistency proof from its tree to today's that verifies."""
    where, n = store.path, len(hashes)
    blame_edited_seq(cp, hashes)
    if cp.seq > n:
        raise LedgerCorrupt(f"{where}: the checkpoint covers {cp.seq} events but the log holds {n}: events "
                            f"#{n + 1} to #{cp.seq} were removed since the checkpoint (the log was truncated)")
    leaves = [leaf(h) for h in hashes]
    today = root_of_leaves(leaves)
    if cp.seq == 0:
        return {"checkpoint": cp, "root": today.hex()}
    if hashes[cp.seq - 1].hex() != cp.head:
        raise LedgerCorrupt(
            f"{where}: event #{cp.seq} is not the event the checkpoint ended at (its hash is "
            f"{hashes[cp.seq - 1].hex()[:16]}..., the checkpoint's {cp.head[:16]}...): the log up to the "
            "checkpoint was rewritten since it was taken (or truncated and extended again)")
    if store.event_time(cp.seq) != cp.time_micros:
        raise CheckpointInvalid(f"checkpoint #{cp.seq}'s time is not that of event #{cp.seq}: the checkpoint "
                                "was edited (its head and root still match the log)")
    proof = consistency_proof(cp.seq, hashes, leaves=leaves)
    if not verify_consistency(cp.seq, n, bytes.fromhex(cp.root), today, proof):
        raise LedgerCorrupt(f"{where}: the log does not extend checkpoint #{cp.seq}: the Merkle tree of its "
                            "first events is not the checkpoint's (an event before the checkpoint was changed)")
    return {"checkpoint": cp, "root": today.hex(), "consistency_proof": tuple(p.hex() for p in proof)}


def _check_manifests(store: EventStore, state: State) -> None:
    """Every file list a commit names is stored, hashes to the digest the event carries, and names
    only what the commit may name (R14: its own write's folder; ``versions.manifest_problem``); the
    list of files a replace removes names files of its base, each once (``versions.removal_problem``)."""
    lists: dict[str, list[tuple[str, int]]] = {}

    def read(v: Version, digest: str, which: str) -> list[tuple[str, int]]:
        if digest not in lists:
            where = f"{store.path}: the {which} of {v.table_id} version {v.number} ({digest})"
            lists[digest] = store.checked_blob(digest, where, parse_manifest)
        return lists[digest]

    def problem_of(v: Version) -> str | None:
        try:
            found = manifest_problem(state, v, read(v, v.manifest or "", "file list"))
            if found is not None or v.removes is None or v.base is None:
                return found
            base = state.data.version(v.table_id, v.base)
            assert base is not None  # the fold refused a replace of nothing
            removed = {p for d in state.data.removals(base) for p, _ in read(base, d, "list of removed files")}
            base_files = [f for _, d in state.data.parts(base) for f in read(base, d, "file list") if f[0] not in removed]
            return removal_problem(v, read(v, v.removes, "list of removed files"), base_files)
        except (ValueError, TypeError) as exc:
            return f"cannot be read ({exc})"

    for v in state.data.versions.values():
        if v.manifest is None:
            continue
        problem = problem_of(v)
        if problem is not None:
            raise LedgerCorrupt(f"{store.path}: the file list of {v.table_id} version {v.number} ({v.manifest}) is "
                                f"not one its commit could have made: {problem} (R14); restore the ledger file "
                                "from a backup")


def confirm_redactions(where: str, chain: ChainCheck, state: State) -> None:
    """That every event the chain took at its stored hash because its payload was redacted is a 0.7
    erasure request the log forgot, to exactly that payload (R25): anything else is an edit."""
    for seq, digest in sorted(chain.redacted.items()):
        problem = redaction_problem(state, seq, digest)
        if problem is not None:
            raise LedgerCorrupt(f"{where}: event #{seq} does not match its hash, and {problem}: the event was "
                                "edited; restore the ledger from a backup")


def _check_erasures(store: EventStore, state: State) -> None:
    """Every erasure request's set is stored and hashes to its digest; each version the request
    made unreadable names a file of the set, and each file of the set is named by one of those
    versions (R25): a request that hid versions holding none of its files, or named files none of
    them hold, is not one its decision could have made."""
    lists: dict[str, list[tuple[str, int]]] = {}

    def listed(digest: str) -> list[tuple[str, int]]:
        if digest not in lists:
            lists[digest] = store.checked_blob(digest, f"{store.path}: the file list {digest}", parse_manifest)
        return lists[digest]

    for r in state.erasures.requests.values():
        wanted = set(erasure_set(store, r))
        held: set[tuple[str, int]] = set()
        for name in r.versions:
            table_id, _, number = name.rpartition("/")
            v = state.data.version(table_id, int(number))
            assert v is not None  # the fold checked it
            removed = {p for d in state.data.removals(v) for p, _ in listed(d)}
            keys = {(f"{table_id}/{p}", s) for _, d in state.data.parts(v) for p, s in listed(d) if p not in removed}
            if not keys & wanted:
                raise LedgerCorrupt(f"{store.path}: erasure request {r.request_id} (event #{r.seq}) makes version "
                                    f"{name} unreadable, which names no file of its set (R25); restore the ledger "
                                    "file from a backup")
            held |= keys & wanted
        if held != wanted:
            missing = sorted(wanted - held)[0][0]
            raise LedgerCorrupt(f"{store.path}: erasure request {r.request_id} (event #{r.seq}) names {missing}, which "
                                "no version it made unreadable holds (R25); restore the ledger file from a backup")
