"""An erasure request's status, file by file, and the one bundle that proves it offline (R25).

``status``: for each file of the request's erasure set, deleted (the vacuum run whose receipt
holds it, and when: ``receipts.settle_many``), found absent (no receipt holds it, but a run that
looked for it to delete it found it gone, and recorded that: a run it took over deleted it and was
stopped before writing it down), or pending, with why and until when: the
retention still keeping a version or a dropped instance that holds it, a pin holding it, a
dropped instance due to be purged, an expired version's file that the next vacuum deletes (its
whole write folder, or the file alone, by key, where a replace removed it and the folder stays for
files still named), or a kept version whose chain still reaches the file's write.

``ErasureProof``: the request (its fields and event number), its erasure set (whose list must hash
to the digest the event carries, so no file can be left out of the bundle), the request event's
inclusion proof in a checkpoint when one was given, and each file's deletion proof (or the proof
that a run found it absent). ``check``
(``python -m ledger.audit prove-erasure BUNDLE EXPORT CHECKPOINT``) checks it against an export and
a checkpoint, with no ledger. What it proves: the ledger recorded the request, and the vacuum runs
recorded deleting every file of the set (or finding it already gone), under the warehouse. What it
does not: copies outside the
warehouse (exports, engine caches, backups, replicas), nor files the set did not name.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime
from typing import Any, Callable, Iterable

import attrs

from ..clock import Micros, from_micros, iso, iso_utc
from ..core.erasures import Request, read_statement, statement_bytes, upcast_request
from ..core.model import State
from ..core.versions import WRITES_FOLDER, Version, manifest, parse_manifest, version_key
from ..errors import InvalidArgument, LedgerCorrupt, NotDeleted
from ..persistence.contract import EventStore
from . import outputs
from .checkpoints import InclusionProof
from .receipts import (
    AbsenceProof, DeletionProof, DeletionProofs, NotDeletedKey, answer_from, check_absence_against, check_against,
    read_json, read_text, read_time, settle_many, well_typed,
)

BUNDLE_KIND = "retention-ledger erasure proof"

FilesOf = Callable[[Version], list[tuple[str, int]]]
"""A version's ``(path, size)`` pairs, paths relative to its instance's location (``Catalog._version_files``)."""


@attrs.frozen
class ErasureFile:
    """One file of an erasure set: deleted (``run_id``, ``deleted_at``), found absent (``run_id``, the
    run that looked for it to delete it and found it gone, ``found_absent_at``), or pending (``why``,
    and ``until`` when the wait has a known end; None when it waits on something with none)."""
    key: str
    size: int
    run_id: str | None = None
    deleted_at: datetime | None = None
    why: str | None = None
    until: datetime | None = None
    found_absent_at: datetime | None = None

    @property
    def deleted(self) -> bool:
        """A vacuum run's receipt holds it: that run deleted it."""
        return self.run_id is not None and self.found_absent_at is None

    @property
    def found_absent(self) -> bool:
        """No receipt holds it; run ``run_id`` looked for it, to delete it, and found it gone (a run it
        took over deleted it and was stopped before writing that down)."""
        return self.found_absent_at is not None

    @property
    def settled(self) -> bool:
        """Deleted, or found absent: nothing is left for a vacuum to do for it."""
        return self.run_id is not None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "size": self.size, "deleted": self.deleted, "found_absent": self.found_absent,
                "run_id": self.run_id, "deleted_at": iso_utc(self.deleted_at),
                "found_absent_at": iso_utc(self.found_absent_at), "why": self.why, "until": iso_utc(self.until)}


@attrs.frozen
class ErasureStatus:
    """Where erasure request ``request_id`` stands: each file of its set (``files``), deleted or why
    not yet. ``statement`` is what it names (its tables and key columns, its keys or predicate, and
    its salt) while the ledger keeps it, None once forgotten (``forgotten_at``): the chain keeps
    only ``commitment``, its SHA-256 (R25). Keep the statement (``write_statement``) to prove later
    what was asked."""
    request_id: str
    tables: tuple[str, ...]
    table_ids: tuple[str | None, ...]
    """Each table's live instance when the request was made (None: it had none)."""
    columns: tuple[str | None, ...]
    """Each table's key column (None: a predicate names the rows)."""
    keys: int
    """How many keys the request names (0: a predicate)."""
    commitment: str
    statement: dict[str, Any] | None = attrs.field(eq=False, repr=False)
    reason: str
    requested_at: datetime
    seq: int
    versions: tuple[str, ...]
    """The versions (``<table id>/<number>``) it made unreadable."""
    replaced: tuple[str, ...]
    """The versions (``<table id>/<number>``) that rewrote live tables without the rows."""
    files: tuple[ErasureFile, ...]
    _request: Request = attrs.field(eq=False, repr=False)
    """The request as the state keeps it: what it says of its first table is the status's answer too."""
    forgotten_at: datetime | None = None
    legacy_predicate: str | None = None
    """A 0.7 request's predicate, which its event holds in clear until forgotten."""

    @property
    def table(self) -> str:
        """Its first table (the only one, for a request of one)."""
        return self._request.name

    @property
    def table_id(self) -> str | None:
        """Its first table's live instance when the request was made (None: it had none)."""
        return self._request.table_id

    @property
    def predicate(self) -> str | None:
        """The predicate, while the ledger keeps it (None: a request by keys, or forgotten)."""
        if self.statement is not None:
            return self.statement.get("predicate")
        return self.legacy_predicate

    @property
    def replaced_by(self) -> int | None:
        """The version that rewrote its first table, if one did."""
        return self._request.replaced_by

    @property
    def done(self) -> bool:
        """Every file of the set deleted or found absent (an empty set is done at once: the request
        was answered)."""
        return all(f.settled for f in self.files)

    @property
    def pending(self) -> tuple[ErasureFile, ...]:
        return tuple(f for f in self.files if not f.settled)

    @property
    def due(self) -> datetime | None:
        """By when the last file of its set will be deleted under the retentions, marks and pins of
        now (the time a vacuum may delete it: its run after that does); None when done, or when one
        waits on something with no known end (``pending`` says what)."""
        waits = [f.until for f in self.pending]
        return None if not waits or None in waits else max(w for w in waits if w is not None)

    def write_statement(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """The statement as the ledger keeps it (while it does): the file ``python -m ledger.audit
        prove-erasure ... --keys FILE`` checks the commitment against."""
        if self.statement is None:
            raise InvalidArgument(f"erasure request {self.request_id}'s statement was forgotten"
                                  f"{'' if self.forgotten_at is None else f' at {iso_utc(self.forgotten_at)}'}: only "
                                  "its commitment is kept; nothing was written")
        out = outputs.target(path, "erasure statement", overwrite=overwrite)
        with open(out, "wb") as sink:
            sink.write(statement_bytes(self.statement["salt"], self.statement["tables"],
                                       predicate=self.statement.get("predicate"), keys=self.statement.get("keys")))

    def to_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "tables": list(self.tables), "table_ids": list(self.table_ids),
                "columns": list(self.columns), "keys": self.keys, "commitment": self.commitment,
                "statement": self.statement, "predicate": self.predicate, "reason": self.reason,
                "requested_at": iso_utc(self.requested_at), "seq": self.seq, "versions": list(self.versions),
                "replaced": list(self.replaced), "done": self.done,
                "due": iso_utc(self.due), "forgotten_at": iso_utc(self.forgotten_at),
                "files": [f.to_dict() for f in self.files]}


def request_of(state: State, request_id: object) -> Request:
    found = state.erasures.requests.get(request_id) if isinstance(request_id, str) else None
    if found is None:
        raise InvalidArgument(f"no erasure request {request_id!r} is on record (request_erasure returns its id; "
                              "`retention-ledger history --type ErasureRequested` lists them)")
    return found


def erasure_set(store: EventStore, r: Request) -> list[tuple[str, int]]:
    """A request's erasure set as stored, checked against the digest its event carries."""
    return store.checked_blob(r.files, f"{store.path}: the erasure set of request {r.request_id} ({r.files})",
                              parse_manifest, "does not match the digest its request carries (it was edited)")


def statement_of(store: EventStore, r: Request) -> dict[str, Any] | None:
    """What request ``r`` names, while the ledger keeps it (None: forgotten, or a 0.7 request)."""
    data = None if r.forgotten is not None or not r.statement else store.read_statement(r.statement)
    if data is None:
        return None
    if hashlib.sha256(data).hexdigest() != r.statement:
        raise LedgerCorrupt(f"{store.path}: the statement of erasure request {r.request_id} does not match the "
                            "commitment its event carries (it was edited); restore the ledger from a backup")
    return read_statement(data)


def status(store: EventStore, state: State, request_id: str, root: str, files_of: FilesOf,
           now: Micros) -> ErasureStatus:
    r = request_of(state, request_id)
    wanted = erasure_set(store, r)
    answers = settle_many(store, state, [k for k, _ in wanted], root).answers if wanted else ()
    holders = _holders(state, r, files_of)
    found = []
    for (key, size), answer in zip(wanted, answers):
        if isinstance(answer, DeletionProof):
            found.append(ErasureFile(key, size, answer.run_id, answer.deleted_at))
        elif isinstance(answer, AbsenceProof):
            found.append(ErasureFile(key, size, answer.run_id, found_absent_at=answer.found_absent_at))
        else:
            why, until = _waiting(state, key, holders.get(key, ()), now)
            found.append(ErasureFile(key, size, why=why, until=None if until is None else from_micros(until)))
    return ErasureStatus(r.request_id, r.tables, tuple(t or None for t in r.live), tuple(c or None for c in r.columns),
                         r.keys, r.statement, statement_of(store, r), r.reason, from_micros(r.time), r.seq, r.versions,
                         r.replaced, tuple(found), r, None if r.forgotten is None else from_micros(r.forgotten),
                         r.predicate)


def _holders(state: State, r: Request, files_of: FilesOf) -> dict[str, list[Version]]:
    """For each key of the set, the versions the request erased that name it."""
    held: dict[str, list[Version]] = {}
    for name in r.versions:
        table_id, _, number = name.rpartition("/")
        v = state.data.version(table_id, int(number))
        assert v is not None  # the fold checked it
        for path, _size in files_of(v):
            held.setdefault(f"{table_id}/{path}", []).append(v)
    return held


def _waiting(state: State, key: str, versions: Iterable[Version], now: Micros) -> tuple[str, Micros | None]:
    """Why a file of the set is not deleted yet, and until when (None: no known end)."""
    reasons: list[tuple[str, Micros | None]] = []
    for v in versions:
        inst = state.tables.instance(v.table_id)
        assert inst is not None
        said = f"version {v.number} of {inst.name} (id {inst.id})"
        if inst.purged_at is not None:
            reasons.append((f"{inst.name} (id {inst.id}) was recorded purged at {iso_utc(from_micros(inst.purged_at))},"
                            " but no vacuum's receipt holds this file", None))
        elif inst.dropped_at is not None:
            pin = state.pins.holding_instance(inst.id, now)
            if pin is not None:
                reasons.append((f"pin {pin.id} holds the dropped instance {inst.name} (id {inst.id})", pin.expires_at))
            elif state.guard.is_blocked(inst):
                reasons.append((f"the dropped instance {inst.name} (id {inst.id}) is behind its watermark: the next "
                                "vacuum purges it", now))
            else:
                source, seconds = state.guard.retention_source(inst)
                reasons.append((f"the dropped instance {inst.name} (id {inst.id}) is kept by its retention ({source}) "
                                "until then; a vacuum purges it after", inst.dropped_at + seconds * 1_000_000))
        elif not state.data.is_expired(v):
            pin = state.pins.holding_versions(inst.id, now)
            if pin is not None and pin.version is not None and pin.version <= v.number:
                reasons.append((f"pin {pin.id} holds {inst.name} version {pin.version}, and so {said}",
                                pin.expires_at))
            else:
                source, seconds = state.guard.retention_source(inst)
                since = v.superseded_at if v.superseded_at is not None else now
                reasons.append((f"{said} is kept by the table's retention ({source}) until then; a vacuum expires it "
                                "after (marks first)", since + seconds * 1_000_000))
        else:
            reasons.append(_expired(state, key, v, said, now))
    if not reasons:
        return "no version the request erased names it any more, and no receipt holds it", None
    untils = [u for _, u in reasons]
    return "; ".join(w for w, _ in reasons), None if None in untils else max(u for u in untils if u is not None)


def _expired(state: State, key: str, v: Version, said: str, now: Micros) -> tuple[str, Micros | None]:
    parts = key.split("/")
    write = state.data.writes.get(parts[2]) if len(parts) > 3 and parts[1] == WRITES_FOLDER else None
    data = state.data
    if write is None:  # adopted from before versioning (version 1), outside every write folder
        if any(1 in {c.number for c in data.chain(data.versions[version_key(v.table_id, r.base or 0)])}
               for r in data.due_removals(v.table_id)):
            return (f"{said} is expired, and no kept version names this file (a replace removed it): the next vacuum "
                    "deletes it", now)
        return (f"{said} is expired, but a kept version still names the files the table held before versioning: "
                "this file goes once none names it, or with a purge of the instance", None)
    if write.deleted_at is not None:
        return (f"write folder {write.id} was recorded deleted at {iso_utc(from_micros(write.deleted_at))}, but no "
                "vacuum's receipt holds this file", None)
    if write.id not in data.referenced_writes(v.table_id):
        return f"{said} is expired: the next vacuum deletes write folder {write.id}", now
    if any(write.version in {c.number for c in data.chain(data.versions[version_key(v.table_id, r.base or 0)])}
           for r in data.due_removals(v.table_id)):
        return (f"{said} is expired, and no kept version names this file (a replace removed it): the next vacuum "
                f"deletes it from write folder {write.id}, which stays for the files still named", now)
    holder = next(u for u in data.unexpired(v.table_id) if write.id in {w for w, _ in data.parts(u)})
    return (f"{said} is expired, but version {holder.number} (kept) still names write folder {write.id}: this file "
            "goes once no kept version names it", None)


# --- the bundle ----------------------------------------------------------------------------

@attrs.frozen
class ErasureProof:
    """One bundle proving a whole erasure request (``Ledger.prove_erasure``)."""
    request: Request
    """The request as the log keeps it: its event's fields (``files``: the digest of its erasure set),
    and the event's number (``seq``) and time (``time``, microseconds since the epoch, UTC)."""
    files: tuple[tuple[str, int], ...]
    proofs: DeletionProofs
    inclusion: InclusionProof | None = None

    @property
    def request_id(self) -> str:
        return self.request.request_id

    def to_dict(self) -> dict[str, Any]:
        return {"kind": BUNDLE_KIND, "request": _recorded(self.request),
                "requested_at": iso(self.request.time), "files": [list(f) for f in self.files],
                "inclusion": None if self.inclusion is None else self.inclusion.to_dict(),
                "answers": [a.to_dict() for a in self.proofs.answers]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def write(self, path: str | os.PathLike[str], *, overwrite: bool = False, protected: Iterable[str] = ()) -> None:
        out = outputs.target(path, "erasure proof", overwrite=overwrite, protected=protected)
        with open(out, "w", encoding="utf-8") as sink:
            sink.write(self.to_json())

    @classmethod
    def from_json(cls, text: str) -> ErasureProof:
        """A bundle as ``write`` wrote it. ``InvalidArgument`` for what is no bundle (not JSON, a field
        missing or of the wrong type); ``LedgerCorrupt`` for one whose fields disagree with each other
        (a field no bundle has, ``requested_at`` not its request's time): those are edits, and
        ``check`` binds the rest to the log."""
        data = read_json(text, "an erasure proof (Ledger.prove_erasure(...).write(FILE) writes one)")
        if not isinstance(data, dict) or data.get("kind") != BUNDLE_KIND:
            raise InvalidArgument("not an erasure proof (Ledger.prove_erasure(...).write(FILE) writes one)")
        if set(data) != _FIELDS:
            raise LedgerCorrupt(f"an erasure proof that holds {sorted(set(data))}, not {sorted(_FIELDS)}: the bundle "
                                "was edited")
        carried = data["request"]
        if isinstance(carried, dict) and set(carried) not in _REQUEST_FIELDS:
            raise LedgerCorrupt(f"an erasure proof whose request holds {sorted(set(carried))}, not the fields of "
                                "a request's event: the bundle was edited")
        try:
            files = tuple(_file(f) for f in data["files"])
            inclusion = None if data["inclusion"] is None else well_typed(InclusionProof(
                **{**data["inclusion"], "path": tuple(data["inclusion"]["path"])}))
            answers = DeletionProofs(tuple(answer_from(a) for a in data["answers"]))
            request = Request(**upcast_request(data["request"]))
            requested_at = read_time(data["requested_at"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"an erasure proof that is cut short or edited: {exc!r:.120}") from None
        if not isinstance(request.time, int) or requested_at != from_micros(request.time):
            raise LedgerCorrupt(f"the erasure proof's requested_at ({iso_utc(requested_at)}) is not the time of "
                                f"its request's event ({iso(request.time) if isinstance(request.time, int) else '?'}): "
                                "the bundle was edited")
        return cls(request, files, answers, inclusion)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ErasureProof:
        return cls.from_json(read_text(path, "erasure proof"))


def _recorded(r: Request) -> dict[str, Any]:
    """A request as a bundle carries it: its event's fields, number and time (not what happened to
    it since: a statement forgotten, a 0.7 predicate redacted)."""
    fields = attrs.asdict(r, recurse=False)
    del fields["forgotten"]
    return {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}


def same_request(logged: Request, carried: Request) -> bool:
    """Whether a bundle's request is the log's: every field of its event, but the predicate of a 0.7
    request the log has forgotten since (redacted)."""
    if not logged.statement and logged.forgotten is not None:  # a 0.7 request: its predicate was redacted
        carried = attrs.evolve(carried, predicate=None)
    return _recorded(logged) == _recorded(carried)


_FIELDS = {"kind", "request", "requested_at", "files", "inclusion", "answers"}
"""A bundle's fields, as ``ErasureProof.to_dict`` writes them."""

_REQUEST_FIELDS = (
    {"request_id", "tables", "live", "columns", "keys", "statement", "reason", "files", "count", "bytes", "versions",
     "replaced", "predicate", "seq", "time", "redacted"},
    {"request_id", "name", "table_id", "predicate", "reason", "files", "count", "bytes", "versions", "replaced_by",
     "seq", "time"},
    {"request_id", "name", "table_id", "predicate", "reason", "files", "count", "bytes", "versions", "seq", "time"},
)
"""A bundle's request, as this release writes it and as 0.7 and 0.8 wrote it (the first 0.7 releases
without ``replaced_by``): any other set is an edit."""


def _file(pair: Any) -> tuple[str, int]:
    """One ``[key, size]`` of a bundle's erasure set, as written (``TypeError`` if not)."""
    if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], int)
            and not isinstance(pair[1], bool)):
        raise TypeError(f"a file of the set is [key, size], not {pair!r:.80}")
    return pair[0], pair[1]


def prove(store: EventStore, state: State, request_id: str, root: str,
          inclusion: Callable[[int], InclusionProof] | None = None) -> ErasureProof:
    """The bundle: the request, its set, its event's inclusion proof (``inclusion``, when a checkpoint
    was given) and each file's deletion proof, or the proof that a run found it absent, or why there
    is neither (``check`` then refuses it)."""
    r = request_of(state, request_id)
    wanted = erasure_set(store, r)
    answers = settle_many(store, state, [k for k, _ in wanted], root) if wanted else DeletionProofs(())
    return ErasureProof(r, tuple(wanted), answers, None if inclusion is None else inclusion(r.seq))


def check(bundle: ErasureProof, state: State, upto: int, hashes: list[bytes] | None = None,
          checkpoint: Any = None) -> None:
    """That the bundle proves its request in a log (folded into ``state``, covered up to ``upto``):
    the request is the log's, before the checkpoint; the set is the one its event names; each file
    has a deletion proof that holds, anchored in the log (``receipts.check_against``), or a proof
    that a run found it absent (``receipts.check_absence_against``). Raises
    ``LedgerCorrupt`` for what does not match, ``NotDeleted`` naming files not yet proven."""
    r = state.erasures.requests.get(bundle.request_id)
    if r is None:
        raise LedgerCorrupt(f"the log holds no erasure request {bundle.request_id}: the bundle is not this ledger's")
    if not same_request(r, bundle.request):
        raise LedgerCorrupt(f"erasure request {r.request_id} in the bundle is not the one the log records at event "
                            f"#{r.seq} (the bundle was edited)")
    if r.seq > upto:
        raise LedgerCorrupt(f"erasure request {r.request_id} is event #{r.seq}, after the checkpoint (#{upto}): take "
                            "a checkpoint after it")
    digest, _ = manifest(bundle.files)
    if digest != r.files or len(bundle.files) != len(set(k for k, _ in bundle.files)):
        raise LedgerCorrupt(f"the bundle's erasure set is not the one request {r.request_id} recorded (a file was "
                            "added, left out or edited)")
    if bundle.inclusion is not None:
        event_hash = None if hashes is None else hashes[r.seq - 1].hex()
        if bundle.inclusion.seq != r.seq or (event_hash is not None and bundle.inclusion.event_hash != event_hash) \
                or (checkpoint is not None and not bundle.inclusion.verify(checkpoint)):
            raise LedgerCorrupt(f"the inclusion proof of request {r.request_id} does not lead from event #{r.seq} to "
                                "the checkpoint's root (it was edited, or made for another checkpoint)")
    place = {key: i for i, (key, _) in enumerate(bundle.files)}
    given = [place.get(a.key, -1) for a in bundle.proofs.answers]
    if -1 in given or given != sorted(set(given)):
        raise LedgerCorrupt(f"the bundle's answers are not for the files of request {r.request_id}'s set, each once, "
                            "in its order (the bundle was edited)")
    answers = {a.key: a for a in bundle.proofs.answers}
    missing: list[str] = []
    for key, size in bundle.files:
        answer = answers.get(key)
        if isinstance(answer, (DeletionProof, AbsenceProof)):
            if answer.size != size:
                raise LedgerCorrupt(f"the proof of {key} is of {answer.size} bytes, the request's file of {size} (the "
                                    "bundle was edited)")
            if isinstance(answer, DeletionProof):
                check_against(answer, state, upto)
            else:
                check_absence_against(answer, state, upto)
        else:
            missing.append(f"{key} ({answer.reason})" if isinstance(answer, NotDeletedKey) else key)
    if missing:
        raise NotDeleted(f"{len(bundle.files) - len(missing)} of the {len(bundle.files)} files of erasure request "
                         f"{r.request_id} are proven deleted (or found absent); not yet: {'; '.join(missing[:3])}"
                         f"{' ...' if len(missing) > 3 else ''}")
