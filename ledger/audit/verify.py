"""``verify``: trust nothing that was not recomputed (R16).

In order: SQLite's own page check; the hash chain, recomputed row by row from the
first event (an edited, inserted, deleted or reordered row breaks it there); a fold of
the whole log from nothing, which re-checks every rule the fold knows (an undrop behind
its watermark, a commit of a swept write, a mark that moves back are corrupt logs, not
history); the file lists the commits name; then a comparison with the state the ledger
holds and with the stored snapshot (on a long log the chain walker, folding the log a second time
on the other core, compares the stored generation). A snapshot that disagrees with the log is
discarded and rebuilt here, not merely reported: it is a cache, and reopening would
otherwise trust it again.

Given a checkpoint (``against``), it also proves the log still begins with exactly the
events the checkpoint covered: an RFC 6962 consistency proof from the checkpoint's tree
to today's. Only a checkpoint kept outside the ledger can catch a log that was rewritten
whole with a freshly computed chain, or truncated and extended again.
"""

from __future__ import annotations

import hashlib

import attrs
import orjson

from ..chain import consistency_proof, root_of_leaves, leaf, verify_consistency
from ..core.model import State, fold_in_steps, fold_rows
from ..core.versions import manifest_problem, parse_manifest
from ..errors import CheckpointInvalid, InvalidArgument, LedgerCorrupt
from ..persistence.cache import HISTORY_PREFIX, generation_agrees
from ..persistence.history import HistoryEncoder
from ..persistence.contract import EventStore, Generation, Store
from ..runner import Runner
from .chainwalk import ChainWalk, damage
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
    snapshot_discarded: bool = False
    """A stored snapshot disagreed with the log (edited, or damaged): it was thrown away and rebuilt."""
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
    history_discarded: int = 0
    """History snapshots (``as_of``'s caches) that disagreed with the log and were deleted."""


def verify(runner: Runner, *, against: Checkpoint | None = None,
           public_key: KeyLike | None = None) -> VerifyReport:
    """Check the file, the chain, and every rule; raises ``LedgerCorrupt`` naming the first bad
    event and why; returns counts when all is well."""
    if against is not None and not isinstance(against, Checkpoint):
        raise InvalidArgument(f"against must be a Checkpoint (Checkpoint.from_json or .read), got "
                              f"{type(against).__name__}")
    if public_key is not None:
        if against is None:
            raise InvalidArgument("public_key checks a checkpoint's signature: pass the checkpoint as against=")
        against.check_signature(public_key)
    store = runner.store
    head = store.head()[0]
    if against is not None and not store.chained:
        raise LedgerCorrupt(f"{store.path} predates the hash chain (format {store.format}), so it cannot be "
                            "checked against a checkpoint; open it writable once to upgrade it")
    compared = store.latest_generation()
    walk = ChainWalk(store, head, keep_hashes=against is not None, apart_from=runner.apart_from,
                     generation=compared if _walker_share(compared, head) else None) if store.chained else None
    if walk is None or not walk.apart:  # else the walker checks the pages first, beside the fold
        damaged = damage(store)
        if damaged is not None:
            if walk is not None:
                walk.abandon()
            raise damaged
    try:
        fresh, stale = _fold_comparing_snapshots(runner, walk, head, compared)
    except LedgerCorrupt:
        if walk is not None:
            walk.finish()  # an edited event is the cause of any rule it then seems to break: name it
        raise
    except BaseException:
        if walk is not None:
            walk.abandon()
        raise
    check = walk.finish() if walk is not None else None
    if walk is not None and walk.generation is not None:
        stale.generation = not _walker_found_generation_true(store, walk, fresh)
    _check_manifests(store, fresh)
    extension: dict[str, object] = {}
    if against is not None:
        assert check is not None and check.hashes is not None
        extension = _prove_extension(store, against, check.hashes)
        extension["signature_checked"] = public_key is not None
    # Only now, with the chain proven, is a disagreement the snapshot's fault and not the log's.
    for name in stale.history:
        store.delete_snapshot(name)
    discarded = stale.generation
    if discarded:
        store.delete_generations()
    if not runner.cache.held_checked_by(stale.compared):
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
        head=check.head.hex() if check is not None and check.seq else None, chained=check is not None,
        hashed_by_upgrade=fresh.upkeep.hashed_by_upgrade, history_discarded=stale.history_discarded,
        **extension,  # type: ignore[arg-type]
    )


@attrs.define
class _Stale:
    """What the fold found the snapshots to disagree with it in (deleted once the chain is proven)."""
    history: list[str] = attrs.Factory(list)
    history_discarded: int = 0
    """History snapshots that disagreed or could not be read (those already deleted as unreadable too)."""
    generation: bool = False
    """Whether the stored generation disagreed."""
    compared: Generation | None = None
    """The stored generation that was compared."""


def _fold_comparing_snapshots(runner: Runner, walk: ChainWalk | None, head: int,
                              compared: Generation | None) -> tuple[State, _Stale]:
    """Fold the whole log from nothing (its rows going past the chain walk), stopping at each
    history snapshot and at the stored generation ``compared`` (unless the walker compares it) to
    compare it with the fold there; returns the fold and what disagreed. One fold's snapshots
    share their encodings, so each comparison costs what changed since the last."""
    store, cache = runner.store, runner.cache
    history = {at: name for name, at in store.snapshots(HISTORY_PREFIX) if at <= head}
    stale = _Stale(compared=compared)
    generation = compared if walk is None or walk.generation is None else None
    stops = set(history) | ({generation.seq} if generation is not None and generation.seq <= head else set())
    present = runner.refresh()
    steps, encoder = fold_in_steps(State()), HistoryEncoder()
    fresh = steps.state
    for stop in sorted(stops | {head}):
        rows = store.read(fresh.seq, upto=stop, with_hash=walk is not None and walk.with_hash)
        fresh = steps.fold_rows(walk.rows(rows) if walk is not None else rows)
        if fresh.seq != stop:
            continue
        if stop in history and not cache.history_agrees(history[stop], fresh, present, encoder):
            stale.history_discarded += 1
            if store.load_snapshot(history[stop]) is not None:
                stale.history.append(history[stop])
        if generation is not None and stop == generation.seq:
            stale.generation = not generation_agrees(store, generation, fresh, encoder)
    if generation is not None and generation.seq > head:  # written since verify began (folded apart: the
        stale.generation = not generation_agrees(  # steps' last state is the one returned)
            store, generation, fold_rows(fresh, store.read(fresh.seq, upto=generation.seq)), encoder)
    return fresh, stale


EVENTS_PER_ENTRY = 2
"""A chain walked apart also compares the stored generation when the log holds at least this many
events per entry of it. This process's share of the work beside the fold (re-encoding what changed
between history snapshots) grows with the events, the walker's (reading and encoding the
generation) with its entries: in the audit benchmark, 100,000 events and 87,000 entries (compared
here; the walker's share would be the longer), 1,000,000 and 400,000 (walked apart: 21 s -> 16 s)."""


def _walker_share(generation: Generation | None, head: int) -> bool:
    """Whether a walker apart should compare ``generation`` (``EVENTS_PER_ENTRY``)."""
    if generation is None:
        return False
    try:
        entries = sum(orjson.loads(generation.head)["counts"].values())
    except (ValueError, KeyError, TypeError, AttributeError):
        return False  # a head this release cannot read: it is compared here, and found wanting
    return head >= EVENTS_PER_ENTRY * entries


def _walker_found_generation_true(store: Store, walk: ChainWalk, fresh: State) -> bool:
    """The walker's verdict on the generation it compared; if it could not give one, the comparison
    is made here (with a fold to the generation's event, when that is not ``fresh``'s)."""
    generation = walk.generation
    assert generation is not None
    if walk.generation_agrees is not None:
        return walk.generation_agrees
    at = fresh if generation.seq == fresh.seq else fold_rows(State(), store.read(0, upto=generation.seq))
    return generation_agrees(store, generation, at)


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
    only what the commit may name (R14: its own write's folder; ``versions.manifest_problem``)."""
    for v in state.data.versions.values():
        if v.manifest is None:
            continue
        data = store.read_blob(v.manifest)
        where = f"{store.path}: the file list of {v.table_id} version {v.number} ({v.manifest})"
        if data is None or hashlib.sha256(data).hexdigest() != v.manifest:
            what = "is missing" if data is None else "does not match its digest"
            raise LedgerCorrupt(f"{where} {what}; restore the ledger file from a backup")
        try:
            problem = manifest_problem(state, v, parse_manifest(data))
        except (ValueError, TypeError) as exc:  # orjson's errors are ValueErrors
            problem = f"cannot be read ({exc})"
        if problem is not None:
            raise LedgerCorrupt(f"{where} is not one its commit could have made: {problem} (R14); restore the "
                                "ledger file from a backup")
