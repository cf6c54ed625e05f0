"""Erasure requests: the files that held the rows a request names, made unreadable at once (R25).

A privacy team is asked "erase user 42's data, and prove it". The engine (``spark_ops.erase``)
finds the files of the table that hold the rows, rewrites those of the current version without
them (a ``replace`` version, ``versions``), and then records the request here: one
``ErasureRequested`` event naming the **erasure set** (the ``(key, size)`` of every file of a
kept version of the table, or of a dropped instance of that name not yet purged, that held a
matching row; keys relative to the warehouse root, as receipts name objects), stored as a
content-addressed list beside the event, as a commit's file list is.

From then on no read, restore, undrop or pin through the ledger reaches a version that holds a
file of the set (``VersionErased``, naming the request): the event lists those versions, so the
fold knows them without reading any file list. The current version of the live table must hold
none (the rewrite comes first), so no version made later can hold one either: an append or a
replace builds on the current version, and a restore of an erased one is refused. An erasure
takes versions, never the table: dropped and undropped later, the table comes back with its clean
current version; only a dropped instance whose current version is erased stays dropped. A pin on
an erased version is ended by the request, in its append (``pins.overridden``: R25 wins over R21). The files
themselves go by the normal rules, marks first (R13); ``Ledger.erasure`` says, file by file, the
run that deleted each or why it is still waiting, from the receipts (R20).

Its stream is its database's catalog stream (``catalog:<database>``), not one of its own: every
restore, undrop and pin of an instance of that name already reads it, so a request and any of them
that would reach what it erases have one order (R4) with no new condition on any of them; and the
request reads the data streams of the instances it covers, so a commit that lands first makes it
decide again. (A request is a fact about a name's instances, as a drop or a purge is.)

The core holds no file lists, so the caller (``Ledger.request_erasure``) reads the kept versions'
lists and hands over, for each key of the set, the versions that hold it, with the instances'
current version numbers it read; the decision checks those against the state (a commit that
landed meanwhile is a ``Conflict``, and the caller reads again), and ``verify`` re-reads the lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Union

import attrs

from ..clock import Micros, iso
from ..errors import Conflict, ErasureInProgress, InvalidArgument, TableNotFound
from ..names import database_of, table_name
from .concern import Concern, Decision, corrupt, mapping
from .events import as_ids, event
from .pins import overridden
from .streams import catalog_stream, catalog_streams, data_stream
from .tables import require_live
from .versions import MAX_BYTES, is_plain_id, manifest, version_key

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State

MAX_TEXT = 10_000
"""The longest predicate or reason recorded (characters): a request names rows, it does not hold them."""
FENCE_SECONDS = 120
"""How long a fence holds a table's commits off unless renewed: its engine renews it while it works,
so one whose process died lets writers through this long after."""


# --- events --------------------------------------------------------------------------------

@event("ErasureRequested")
@attrs.frozen
class ErasureRequested:
    """Erasure request ``request_id`` of the rows ``predicate`` names in table ``name`` (``table_id``: its
    live instance then, None if it had none), for ``reason``. ``files`` is the digest of the erasure
    set's list (``[[key, size], ...]`` sorted, ``count`` files, ``bytes`` in all), stored alongside;
    ``versions`` are the versions (``<table id>/<number>``) holding one of them, unreadable from now
    on; ``replaced_by`` the live table's version that rewrote the current files without the rows.
    Its time (the envelope's) is when the request was made."""
    request_id: str
    table_id: str | None
    name: str
    predicate: str
    reason: str
    files: str
    count: int
    bytes: int
    versions: tuple[str, ...] = attrs.field(converter=as_ids)
    replaced_by: int | None = None


@event("ErasureFenced")
@attrs.frozen
class ErasureFenced:
    """Erasure request ``request_id`` (not recorded yet) holds commits to the instance off until
    ``until``: its engine scans what was committed since its first scan, rewrites it, and records the
    request with nothing landing in between. Recorded again to renew it; lifted by the request
    itself, by ``ErasureFenceLifted``, or at ``until``."""
    request_id: str
    table_id: str
    until: Micros


@event("ErasureFenceLifted")
@attrs.frozen
class ErasureFenceLifted:
    """The engine of request ``request_id`` gave up (the request was not recorded): commits go again."""
    request_id: str
    table_id: str


# --- state ---------------------------------------------------------------------------------

@attrs.frozen
class Request(ErasureRequested):
    """A request as the state keeps it: its event's fields, and the event's number and time."""
    seq: int = 0
    time: Micros = 0


@attrs.frozen
class Fence:
    request_id: str
    until: Micros


@attrs.frozen
class Erasures:
    requests: Mapping[str, Request] = mapping(Request)   # request id -> Request
    versions: Mapping[str, str] = mapping()              # "<table id>/<number>" -> the first request erasing it
    fences: Mapping[str, Fence] = mapping(Fence)         # table id -> the fence last put on it (maybe run out)

    def fence_refusal(self, name: str, table_id: str, at: Micros, holder: str | None = None) -> ErasureInProgress | None:
        """Why a commit (or restore) landing at ``at`` may not change the instance's current version:
        another request's fence holds it (R25). Asked by the versions concern; ``holder`` is the
        request whose own rewrite this is."""
        fence = self.fences.get(table_id)
        if fence is None or fence.until <= at or fence.request_id == holder:
            return None
        return ErasureInProgress(
            f"{name} is held for erasure request {fence.request_id} until {iso(fence.until)}: its engine scans the "
            "last commits and records the request before another lands (R25); commit again once it is recorded",
            request_id=fence.request_id, until=fence.until)

    def version_refusal(self, name: str, table_id: str, number: int) -> tuple[str, str] | None:
        """Why version ``number`` of the instance may not be read, restored or pinned (R25), and the
        request's id; None if no request erased it. Asked by ``versions.choose``."""
        request_id = self.versions.get(version_key(table_id, number))
        if request_id is None:
            return None
        r = self.requests[request_id]
        return (f"{name} version {number} (id {table_id}) holds files erasure request {request_id} named at "
                f"{iso(r.time)}: it is never read, restored or pinned again; see erasure({request_id!r})"), request_id

    def instance_refusal(self, name: str, table_id: str, current: int | None) -> tuple[str, str] | None:
        """Why a dropped instance whose current version is ``current`` may not be undropped or pinned
        whole (R25): that version holds files a request erased, and an undrop would make them the
        table's again. An erasure takes versions, never the table: an instance whose current version
        is clean (an erase rewrote it before the drop) comes back like any other, its erased
        versions still refused one by one (``version_refusal``)."""
        request_id = None if current is None else self.versions.get(version_key(table_id, current))
        if request_id is None:
            return None
        r = self.requests[request_id]
        return (f"{name} (id {table_id}) was dropped with version {current} current, which holds files erasure "
                f"request {request_id} named at {iso(r.time)}: it is never undropped or pinned again; see "
                f"erasure({request_id!r})"), request_id


# --- commands ------------------------------------------------------------------------------

@attrs.frozen
class RequestErasure:
    request_id: str
    name: str
    predicate: str
    reason: str
    files: tuple[tuple[str, int], ...]
    """The erasure set: ``(key, size)``, keys relative to the warehouse root."""
    seen: tuple[tuple[str, int], ...]
    """Each instance the caller read (the live one and the dropped, unpurged ones of the name) with
    its current version's number (0: none)."""
    holders: tuple[tuple[str, tuple[str, ...]], ...]
    """For each key the caller found, the unexpired versions (``<table id>/<number>``) whose files
    list it with the same size."""
    replaced_by: int | None = None
    now: Micros = 0
    """When the caller decided (the ledger's clock): the pins the request ends are those live then."""


@attrs.frozen
class FenceErasure:
    """Hold commits to the live table ``name`` off for request ``request_id`` (renewing its fence)."""
    request_id: str
    name: str
    now: Micros
    seconds: int = FENCE_SECONDS


@attrs.frozen
class LiftErasureFence:
    request_id: str
    name: str


Command = Union[RequestErasure, FenceErasure, LiftErasureFence]


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT or "\x00" in value:
        said = f"{len(value):,} characters" if isinstance(value, str) and len(value) > MAX_TEXT else \
            "text with a NUL character" if isinstance(value, str) and "\x00" in value else repr(value)[:80]
        raise InvalidArgument(f"an erasure request's {what} is text of 1 to {MAX_TEXT:,} characters with no NUL, not "
                              f"{said}; nothing was recorded")
    return value


def check_request(name: object, predicate: object, reason: object) -> None:
    """What a request of ``name`` will record of itself, checked before the engine does anything
    (``Ledger.check_erasure``): a predicate too long found only at the request, after the rewrite
    committed, would leave the rows rewritten and the request unrecorded, every time."""
    table_name(name)  # it refuses what is not a name, typed
    _text(predicate, "predicate")
    _text(reason, "reason")


def considered(state: State, name: str) -> list[tuple[str, int]]:
    """The instances a request of ``name`` covers, with their current versions: the live one, and
    every dropped one of that name not purged (restorable, or due to be purged), oldest last."""
    found = [state.tables.live(name), *state.tables.dropped_instances(name=name)]
    return [(i.id, state.data.heads.get(i.id, 0)) for i in found if i is not None]


def _request(state: State, cmd: RequestErasure) -> Decision:
    name = table_name(cmd.name)
    if not is_plain_id(cmd.request_id) or cmd.request_id in state.erasures.requests:
        raise InvalidArgument(f"erasure request id {cmd.request_id!r} is empty, taken, or not plain text")
    predicate, reason = _text(cmd.predicate, "predicate"), _text(cmd.reason, "reason")
    instances = considered(state, name)
    if not instances:
        raise TableNotFound(f"cannot record an erasure request of {name}: no live table and no dropped instance "
                            "of that name holds files; nothing was recorded")
    if sorted(instances) != sorted(cmd.seen):
        # What the caller scanned is not what the name holds now (a commit, a drop, an undrop landed
        # since): a row the scan never saw may be there. Decided here, on the state the request is
        # appended on (its reads include every data stream below), so nothing slips in between.
        now_held = ", ".join(f"{i} at version {n}" for i, n in sorted(instances))
        raise Conflict(f"the files of {name} changed since the erasure set was found ({now_held} now): scan what was "
                       "committed since and record the request again; nothing was recorded",
                       stream=data_stream(instances[0][0]))
    live = state.tables.live(name)
    heads = dict(instances)
    files: dict[str, int] = {}
    for entry in cmd.files:
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str) and entry[0]
                and isinstance(entry[1], int) and not isinstance(entry[1], bool) and 0 <= entry[1] <= MAX_BYTES):
            raise InvalidArgument(f"an erasure set is (key, size) pairs, keys relative to the warehouse root, not "
                                  f"{entry!r:.80}; nothing was recorded")
        if entry[0] in files:
            raise InvalidArgument(f"the erasure set names {entry[0]} twice; nothing was recorded")
        files[entry[0]] = entry[1]
    holders = dict(cmd.holders)
    erased: set[str] = set()
    for key, size in sorted(files.items()):
        found = holders.get(key, ())
        if not found:
            raise InvalidArgument(f"{key} ({size} bytes) is not a file of a kept version of {name}, nor of a dropped "
                                  "instance of it not yet purged: an erasure set names only those; nothing was "
                                  "recorded")
        for held in found:
            table_id, _, number = held.rpartition("/")
            v = state.data.version(table_id, int(number)) if table_id in heads and number.isdigit() else None
            if v is None or state.data.is_expired(v):
                raise InvalidArgument(f"{key} is said to be held by version {held}, which is no kept version of "
                                      f"{name}; nothing was recorded")
            if live is not None and table_id == live.id and v.number == heads[table_id]:
                raise InvalidArgument(f"{key} is a file of {name}'s current version {v.number}: commit a version "
                                      "without it first (a replace, as spark_ops.erase does), then record the "
                                      "request; nothing was recorded")
            erased.add(held)
    if cmd.replaced_by is not None:
        replaced = None if live is None or not isinstance(cmd.replaced_by, int) or isinstance(cmd.replaced_by, bool) \
            else state.data.version(live.id, cmd.replaced_by)
        if replaced is None:
            raise InvalidArgument(f"replaced_by={cmd.replaced_by!r} is not a version of the live table {name}; "
                                  "nothing was recorded")
    digest, data = manifest(files.items())
    requested = ErasureRequested(cmd.request_id, None if live is None else live.id, name, predicate, reason, digest,
                                 len(files), sum(files.values()), tuple(sorted(erased)), cmd.replaced_by)
    reads = frozenset({*catalog_streams(database_of(name)), *(data_stream(i) for i, _ in instances)})
    ended = overridden(state, frozenset(erased), cmd.request_id, cmd.now)  # R25 wins over R21
    return Decision(((catalog_stream(database_of(name)), requested), *ended), reads, cmd.request_id,
                    ((digest, data),))


def _fence(state: State, cmd: FenceErasure) -> Decision:
    """A fence (or its renewal) for a request not recorded yet, on a live table no other request's
    fence holds: the engine then scans, rewrites and records with nothing landing in between."""
    if not is_plain_id(cmd.request_id) or cmd.request_id in state.erasures.requests:
        raise InvalidArgument(f"erasure request id {cmd.request_id!r} is empty, recorded already, or not plain text")
    if isinstance(cmd.seconds, bool) or not isinstance(cmd.seconds, int) or not 1 <= cmd.seconds <= 3600:
        raise InvalidArgument(f"a fence lasts 1 to 3600 seconds (renewed while its engine works), not {cmd.seconds!r}")
    inst = require_live(state, cmd.name, "hold commits off for an erasure of")
    at = max(cmd.now, state.last_time + 1)
    held = state.erasures.fence_refusal(inst.name, inst.id, at, cmd.request_id)
    if held is not None:
        raise held
    stream = data_stream(inst.id)
    until = at + cmd.seconds * 1_000_000
    return Decision(((stream, ErasureFenced(cmd.request_id, inst.id, until)),), frozenset({stream}), until)


def _lift(state: State, cmd: LiftErasureFence) -> Decision:
    """Lifting a fence this request does not hold (it ran out, or another's is there) changes nothing."""
    inst = require_live(state, cmd.name, "lift an erasure's fence on")
    stream = data_stream(inst.id)
    fence = state.erasures.fences.get(inst.id)
    if fence is None or fence.request_id != cmd.request_id:
        return Decision((), frozenset({stream}), False)
    return Decision(((stream, ErasureFenceLifted(cmd.request_id, inst.id)),), frozenset({stream}), True)


# --- fold ----------------------------------------------------------------------------------

def _on_requested(b: Builder, e: ErasureRequested, seq: int, time: Micros) -> None:
    erasures = b.erasures
    if e.request_id in erasures.requests:
        raise corrupt(f"event #{seq} records erasure request {e.request_id} a second time")
    if e.count < 0 or e.bytes < 0 or (e.count == 0) != (not e.versions):
        raise corrupt(f"event #{seq} records an erasure set of {e.count} files and {e.bytes} bytes held by "
                      f"{len(e.versions)} versions, which no request can be")
    for held in e.versions:
        table_id, _, number = held.rpartition("/")
        v = b.data.version(table_id, int(number)) if number.isdigit() else None
        inst = b.tables.instances.get(table_id)
        if v is None or inst is None or b.data.is_expired(v):
            raise corrupt(f"event #{seq} erases version {held}, which is no kept version (R25)")
        if inst.is_live and (inst.id != e.table_id or v.number == b.data.heads.get(table_id)):
            raise corrupt(f"event #{seq} erases version {held}, the current version or one of another live table "
                          "(R25: the rewrite comes first)")
        if held not in erasures.versions:  # (no setdefault: the fold's maps track what is set)
            erasures.versions[held] = e.request_id
    erasures.requests[e.request_id] = Request(**attrs.asdict(e, recurse=False), seq=seq, time=time)
    fence = None if e.table_id is None else erasures.fences.get(e.table_id)
    if fence is not None and fence.request_id == e.request_id:
        del erasures.fences[e.table_id]  # recorded: its fence is lifted


def _on_fenced(b: Builder, e: ErasureFenced, seq: int, time: Micros) -> None:
    inst = b.tables.instances.get(e.table_id)
    held = b.erasures.fences.get(e.table_id)
    if inst is None or not inst.is_live or e.request_id in b.erasures.requests or e.until <= time or \
            (held is not None and held.request_id != e.request_id and held.until > time):
        raise corrupt(f"event #{seq} fences {e.table_id} for erasure request {e.request_id}, which no live table, "
                      "unrecorded request and free table allow (R25)")
    b.erasures.fences[e.table_id] = Fence(e.request_id, e.until)


def _on_lifted(b: Builder, e: ErasureFenceLifted, seq: int, time: Micros) -> None:
    held = b.erasures.fences.get(e.table_id)
    if held is None or held.request_id != e.request_id:
        raise corrupt(f"event #{seq} lifts a fence of erasure request {e.request_id} on {e.table_id}, which it "
                      "does not hold")
    del b.erasures.fences[e.table_id]


CONCERN = Concern(
    initial=Erasures(),
    evolve={ErasureRequested: _on_requested, ErasureFenced: _on_fenced, ErasureFenceLifted: _on_lifted},
    decide={RequestErasure: _request, FenceErasure: _fence, LiftErasureFence: _lift},
)

__all__ = ["ErasureRequested", "ErasureFenced", "ErasureFenceLifted", "Request", "Fence", "Erasures", "RequestErasure",
           "FenceErasure", "LiftErasureFence", "check_request", "considered", "FENCE_SECONDS", "CONCERN"]
