"""Erasure requests: the files that held the rows a request names, made unreadable at once (R25).

A privacy team is asked "erase user 42's data, and prove it", for a person whose id sits in
several tables, in batches of thousands. The engine (``spark_ops.erase``) finds the files of the
tables that hold the rows (a predicate's, or those whose key column holds one of the keys),
rewrites those of each current version without them (a ``replace`` version, ``versions``), and
then records the request here: one ``ErasureRequested`` event naming the **erasure set** (the
``(key, size)`` of every file of a kept version of one of the tables, or of a dropped instance of
one of their names not yet purged, that held a matching row; keys relative to the warehouse root,
as receipts name objects), stored as a content-addressed list beside the event, as a commit's file
list is.

**What was asked, without who.** The log must prove what was asked for ever, and must not keep
the person's identifiers for ever (it is the one place nothing may delete). So the event holds a
commitment, not the keys: ``statement``, the SHA-256 of the request's *statement* (its tables and
key columns, its keys or predicate, and 32 random bytes of salt: ``statement_bytes``). The
statement itself is an attachment the ledger deletes once the request is done (or when told to
forget it: ``ErasureForgotten``). Whoever kept the statement (the privacy team, from the request's
status while it is open) can check a proof bundle against the commitment offline; anyone else
holds a hash they can neither invert nor test guesses against, since the salt is gone with the
statement (a ledger-wide secret would let whoever held it test every user id in turn). A 0.7
request recorded its predicate in the event itself (``predicate``); forgetting it redacts that
one field of that one event, recorded and checked as ``ErasureForgotten.redacted`` says.

From then on no read, restore, undrop or pin through the ledger reaches a version that holds a
file of the set (``VersionErased``, naming the request): the event lists those versions, so the
fold knows them without reading any file list. The current version of each live table must hold
none (the rewrite comes first), so no version made later can hold one either: an append or a
replace builds on the current version, and a restore of an erased one is refused. An erasure
takes versions, never the table: dropped and undropped later, the table comes back with its clean
current version; only a dropped instance whose current version is erased stays dropped. A pin on
an erased version is ended by the request, in its append (``pins.overridden``: R25 wins over
R21). The files themselves go by the normal rules, marks first (R13); ``Ledger.erasure`` says, file
by file, the run that deleted each or why it is still waiting, from the receipts (R20).

Its stream is its database's catalog stream (``catalog:<database>``), or the ledger-wide one for a
request across databases, not one of its own: every restore, undrop and pin of an instance of those
names already reads them, so a request and any of them that would reach what it erases have one
order (R4) with no new condition on any of them; and the request reads the data streams of the
instances it covers, so a commit that lands first makes it decide again.

The core holds no file lists, so the caller (``Ledger.request_erasure``) reads the kept versions'
lists and hands over, for each key of the set, the versions that hold it, with the instances'
current version numbers it scanned; the decision checks those against the state (a commit that
landed meanwhile is a ``Conflict``, and the caller scans it), and ``verify`` re-reads the lists.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

import attrs
import orjson

from ..clock import Micros, iso
from ..errors import Conflict, ErasureInProgress, InvalidArgument, TableNotFound
from ..names import database_of, table_name
from .concern import Concern, Decision, corrupt, mapping
from .events import UPCASTERS, as_ids, event
from .pins import overridden
from .streams import CATALOG_STREAM, catalog_stream, catalog_streams, data_stream
from .tables import name_of, require_live
from .versions import MAX_BYTES, is_plain_id, manifest, version_key

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State

MAX_TEXT = 10_000
"""The longest reason recorded (characters): a request says why, it does not hold the rows."""
MAX_PREDICATE = 1_000_000
"""The longest predicate (characters): it is an attachment, not the chain's, but still one request's."""
MAX_KEYS = 1_000_000
"""The most keys one request names: a batch is thousands; more is a table, erased by a predicate."""
STATEMENT_KIND = "retention-ledger erasure statement"
"""What a statement says it is, first of its fields, so no other JSON hashes to a commitment by chance."""
FENCE_SECONDS = 120
"""How long a fence holds a table's commits off unless renewed: its engine renews it while it works,
so one whose process died lets writers through this long after."""


# --- events --------------------------------------------------------------------------------

@event("ErasureRequested", version=2)
@attrs.frozen
class ErasureRequested:
    """Erasure request ``request_id`` of the rows its statement names in ``tables`` (their live
    instances then: ``live``, "" for a name with none), for ``reason``. ``statement`` is the SHA-256
    of the statement (``statement_bytes``: the salt, the tables and ``columns``, the keys or the
    predicate), stored alongside until the request is done or forgotten; ``columns`` is each
    table's key column ("" for a predicate), ``keys`` how many keys (0: a predicate). ``files`` is
    the digest of the erasure set's list (``[[key, size], ...]`` sorted, ``count`` files, ``bytes``
    in all), stored alongside; ``versions`` are the versions (``<table id>/<number>``) holding one
    of them, unreadable from now on; ``replaced`` the live tables' versions that rewrote their
    current files without the rows. ``predicate``: the text a 0.7 request recorded in clear (None
    since, and once forgotten). Its time (the envelope's) is when the request was made."""
    request_id: str
    tables: tuple[str, ...] = attrs.field(converter=as_ids)
    live: tuple[str, ...] = attrs.field(converter=as_ids)
    columns: tuple[str, ...] = attrs.field(converter=as_ids)
    keys: int
    statement: str
    reason: str
    files: str
    count: int
    bytes: int
    versions: tuple[str, ...] = attrs.field(converter=as_ids)
    replaced: tuple[str, ...] = attrs.field(converter=as_ids)
    predicate: str | None = None


def _from_0_7(data: dict[str, Any]) -> dict[str, Any]:
    """A 0.7 request: one table, its predicate in clear, no statement."""
    table_id, replaced_by = data["table_id"], data.get("replaced_by")
    return {"request_id": data["request_id"], "tables": [data["name"]], "live": [table_id or ""], "columns": [""],
            "keys": 0, "statement": "", "reason": data["reason"], "files": data["files"], "count": data["count"],
            "bytes": data["bytes"], "versions": data["versions"],
            "replaced": [] if replaced_by is None or not table_id else [f"{table_id}/{replaced_by}"],
            "predicate": data["predicate"]}


UPCASTERS[("ErasureRequested", 1)] = _from_0_7


def upcast_request(fields: dict[str, Any]) -> dict[str, Any]:
    """A request's fields as a bundle carries them, in this release's shape (a 0.7 bundle's too)."""
    return _from_0_7(fields) | {k: fields[k] for k in ("seq", "time") if k in fields} if "name" in fields else fields


@event("ErasureForgotten")
@attrs.frozen
class ErasureForgotten:
    """Request ``request_id``'s statement (its keys or predicate) is forgotten: the attachment is
    deleted, and only the commitment remains. For a 0.7 request, whose predicate is in its event
    (``#seq``), that field is redacted too: ``redacted`` is the SHA-256 of the event's payload as it
    is stored from then on, which ``verify`` holds it to (the event's own hash stays as it was, bound
    by the events after it)."""
    request_id: str
    seq: int
    redacted: str | None = None


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
    """A request as the state keeps it: its event's fields, the event's number and time, and when its
    statement was forgotten (None: not yet)."""
    seq: int = 0
    time: Micros = 0
    forgotten: Micros | None = None
    redacted: str | None = None
    """A 0.7 request forgotten: the SHA-256 of its event's payload as redacted."""

    @property
    def name(self) -> str:
        """Its first table's name (the only one, for most requests)."""
        return self.tables[0]

    @property
    def table_id(self) -> str | None:
        """Its first table's live instance then (None: it had none)."""
        return self.live[0] or None

    @property
    def replaced_by(self) -> int | None:
        """The version that rewrote its first table, if one did."""
        first = self.table_id
        return next((int(v.rpartition("/")[2]) for v in self.replaced if v.rpartition("/")[0] == first), None)


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
    tables: tuple[str, ...]
    """The names the request covers, each once."""
    columns: tuple[str, ...]
    """Each table's key column ("": the statement's predicate names the rows)."""
    keys: int
    """How many keys the statement names (0: a predicate)."""
    statement: bytes
    """The statement (``statement_bytes``): recorded by its SHA-256, kept as an attachment."""
    reason: str
    files: tuple[tuple[str, int], ...]
    """The erasure set: ``(key, size)``, keys relative to the warehouse root."""
    seen: tuple[tuple[str, int], ...]
    """Each instance the caller scanned (the live ones and the dropped, unpurged ones of the names)
    with its current version's number then (0: none)."""
    holders: tuple[tuple[str, tuple[str, ...]], ...]
    """For each key the caller found, the unexpired versions (``<table id>/<number>``) whose files
    list it with the same size."""
    replaced: tuple[tuple[str, int], ...] = ()
    """Each live table the caller rewrote, with the number of the version that holds it without the rows."""
    now: Micros = 0
    """When the caller decided (the ledger's clock): the pins the request ends are those live then."""


@attrs.frozen
class ForgetErasure:
    """Forget request ``request_id``'s statement; ``redacted``: for a 0.7 request, the SHA-256 of its
    event's payload without the predicate (``redaction``), which the caller then stores in its place."""
    request_id: str
    redacted: str | None = None


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


Command = Union[RequestErasure, FenceErasure, LiftErasureFence, ForgetErasure]


def _text(value: object, what: str, longest: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > longest or "\x00" in value:
        said = f"{len(value):,} characters" if isinstance(value, str) and len(value) > longest else \
            "text with a NUL character" if isinstance(value, str) and "\x00" in value else repr(value)[:80]
        raise InvalidArgument(f"an erasure request's {what} is text of 1 to {longest:,} characters with no NUL, not "
                              f"{said}; nothing was recorded")
    return value


def _tables(tables: object) -> dict[str, str | None]:
    """``tables`` as the statement names them: a name (a predicate's table), or a mapping of names to
    their key columns (None: the predicate's)."""
    if isinstance(tables, str):
        return {table_name(tables): None}
    if not isinstance(tables, Mapping) or not tables:
        raise InvalidArgument(f"an erasure names a table, or a mapping of tables to their key columns "
                              f"({{'crm.users': 'user_id'}}), not {tables!r:.80}; nothing was recorded")
    named: dict[str, str | None] = {}
    for name, column in tables.items():
        key = table_name(name)
        if key in named:
            raise InvalidArgument(f"{key} is named twice in the erasure's tables; nothing was recorded")
        if column is not None and not (isinstance(column, str) and column.strip() and len(column) <= 1000
                                       and "\x00" not in column):
            raise InvalidArgument(f"{key}'s key column is a column's name, not {column!r:.80}; nothing was recorded")
        named[key] = column
    return named


def canonical_keys(keys: object) -> list[int] | list[str]:
    """A batch of keys as a statement records them: whole numbers or text, all one kind, each once,
    sorted (NULL is no key: refused, as is a batch that is empty or too big)."""
    if isinstance(keys, (str, bytes)) or not isinstance(keys, (Sequence, set, frozenset)):
        raise InvalidArgument(f"keys are a list of the values to erase (whole numbers or text), not "
                              f"{type(keys).__name__}; nothing was recorded")
    if not keys:
        raise InvalidArgument("an erasure by keys names at least one key; nothing was recorded")
    if len(keys) > MAX_KEYS:
        raise InvalidArgument(f"an erasure names at most {MAX_KEYS:,} keys, not {len(keys):,}: erase a larger "
                              "set by a predicate, or in several requests; nothing was recorded")
    kinds = {bool if isinstance(k, bool) else int if isinstance(k, int) else str if isinstance(k, str) else type(k)
             for k in keys}
    if None.__class__ in kinds:
        raise InvalidArgument("the keys hold a NULL, which matches no row (SQL equality): remove it, it is "
                              "likely a gap in the list; nothing was recorded")
    if kinds - {int, str} or len(kinds) > 1:
        raise InvalidArgument(f"keys are whole numbers or text, all of one kind, not {sorted(k.__name__ for k in kinds)}:"
                              " erase by a predicate for other types; nothing was recorded")
    if str in kinds and any("\x00" in k or len(k) > 10_000 for k in keys):
        raise InvalidArgument("a text key holds a NUL or more than 10,000 characters; nothing was recorded")
    return sorted(set(keys))


def statement_bytes(salt: str, tables: Mapping[str, str | None], *, predicate: str | None = None,
                    keys: Sequence[int] | Sequence[str] | None = None) -> bytes:
    """A request's statement as it is kept and committed to: canonical JSON (keys sorted, no spaces)
    of what it names, salted. Its SHA-256 is what the chain records (``ErasureRequested.statement``);
    the offline check recomputes it from a statement file (``python -m ledger.audit prove-erasure
    --keys``)."""
    named = {"predicate": predicate} if predicate is not None else {"keys": list(keys or ())}
    return orjson.dumps({"kind": STATEMENT_KIND, "salt": salt, "tables": dict(sorted(tables.items())), **named},
                        option=orjson.OPT_SORT_KEYS)


def read_statement(data: bytes) -> dict[str, Any]:
    """A statement file's fields, checked for shape (``statement_bytes`` made it); its commitment is
    ``commitment(data)``."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"an erasure statement is JSON, and this is not ({exc}); nothing was read") from None
    if not isinstance(body, dict) or body.get("kind") != STATEMENT_KIND or not isinstance(body.get("salt"), str) \
            or not isinstance(body.get("tables"), dict) or ("predicate" in body) == ("keys" in body):
        raise InvalidArgument("this is not an erasure statement (its kind, salt, tables and keys or predicate); "
                              "write it with `retention-ledger erasure ID --statement FILE` while the request is "
                              "open")
    return body


def commitment(data: bytes) -> str:
    """The commitment to a statement: SHA-256 of its canonical form, however the file was laid out."""
    body = read_statement(data)
    canonical = statement_bytes(body["salt"], body["tables"], predicate=body.get("predicate"), keys=body.get("keys"))
    return hashlib.sha256(canonical).hexdigest()


def check_request(tables: object, reason: object, *, predicate: object = None,
                  keys: object = None) -> tuple[dict[str, str | None], list[int] | list[str] | None]:
    """What a request will record of itself, checked before the engine does anything
    (``Ledger.check_erasure``): a reason too long, or keys that cannot be recorded, found only at the
    request, after the rewrites committed, would leave the rows rewritten and the request unrecorded,
    every time. Returns the tables (normalised names to key columns) and the keys as the statement
    keeps them (None: a predicate)."""
    named = _tables(tables)
    _text(reason, "reason")
    if (predicate is None) == (keys is None):
        raise InvalidArgument("an erasure names its rows by a predicate or by keys, one of the two; nothing was "
                              "recorded")
    if predicate is not None:
        _text(predicate, "predicate", MAX_PREDICATE)
        return named, None
    canonical = canonical_keys(keys)
    missing = sorted(n for n, column in named.items() if column is None)
    if missing:
        raise InvalidArgument(f"an erasure by keys names each table's key column; {', '.join(missing)} has none "
                              "({'crm.users': 'user_id'}); nothing was recorded")
    return named, canonical


def considered(state: State, name: str) -> list[tuple[str, int]]:
    """The instances a request of ``name`` covers, with their current versions: the live one, and
    every dropped one of that name not purged (restorable, or due to be purged), oldest last."""
    found = [state.tables.live(name), *state.tables.dropped_instances(name=name)]
    return [(i.id, state.data.heads.get(i.id, 0)) for i in found if i is not None]


MAX_STATEMENT = 64 * 1024 * 1024
"""The largest statement kept (bytes): a million keys of text fits."""


def _request(state: State, cmd: RequestErasure) -> Decision:
    if not is_plain_id(cmd.request_id) or cmd.request_id in state.erasures.requests:
        raise InvalidArgument(f"erasure request id {cmd.request_id!r} is empty, taken, or not plain text")
    reason = _text(cmd.reason, "reason")
    if not cmd.tables or len(set(cmd.tables)) != len(cmd.tables) or len(cmd.columns) != len(cmd.tables):
        raise InvalidArgument("an erasure request names each of its tables once, each with its key column ('' for "
                              "a predicate); nothing was recorded")
    names = tuple(table_name(n) for n in cmd.tables)
    if not isinstance(cmd.statement, bytes) or not cmd.statement or len(cmd.statement) > MAX_STATEMENT:
        raise InvalidArgument("an erasure request's statement is the bytes of its keys or predicate (at most 64 MiB); "
                              "nothing was recorded")
    instances = [pair for name in names for pair in considered(state, name)]
    for name in names:
        if not considered(state, name):
            raise TableNotFound(f"cannot record an erasure request of {name}: no live table and no dropped instance "
                                "of that name holds files; nothing was recorded")
    if sorted(instances) != sorted(cmd.seen):
        # What the caller scanned is not what the names hold now (a commit, a drop, an undrop landed
        # since): a row the scan never saw may be there. Decided here, on the state the request is
        # appended on (its reads include every data stream below), so nothing slips in between.
        now_held = ", ".join(f"{i} at version {n}" for i, n in sorted(instances))
        raise Conflict(f"the files of {', '.join(names)} changed since the erasure set was found ({now_held} now): "
                       "scan what was committed since and record the request again; nothing was recorded",
                       stream=data_stream(instances[0][0]))
    lives = {name: state.tables.live(name) for name in names}
    heads = dict(instances)
    live_ids = {inst.id for inst in lives.values() if inst is not None}
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
            raise InvalidArgument(f"{key} ({size} bytes) is not a file of a kept version of {', '.join(names)}, nor of "
                                  "a dropped instance of one not yet purged: an erasure set names only those; nothing "
                                  "was recorded")
        for held in found:
            table_id, _, number = held.rpartition("/")
            v = state.data.version(table_id, int(number)) if table_id in heads and number.isdigit() else None
            if v is None or state.data.is_expired(v):
                raise InvalidArgument(f"{key} is said to be held by version {held}, which is no kept version of "
                                      f"{', '.join(names)}; nothing was recorded")
            if table_id in live_ids and v.number == heads[table_id]:
                raise InvalidArgument(f"{key} is a file of {name_of(state, table_id)}'s current version {v.number}: "
                                      "commit a version without it first (a replace, as spark_ops.erase does), then "
                                      "record the request; nothing was recorded")
            erased.add(held)
    replaced: list[str] = []
    for table, made in cmd.replaced:
        inst = lives.get(table) if isinstance(table, str) else None
        if inst is None or isinstance(made, bool) or not isinstance(made, int) or \
                state.data.version(inst.id, made) is None:
            raise InvalidArgument(f"{table!r} version {made!r} is not a version of one of the request's live tables "
                                  "that rewrote it; nothing was recorded")
        replaced.append(version_key(inst.id, made))
    digest, data = manifest(files.items())
    statement = hashlib.sha256(cmd.statement).hexdigest()
    live = tuple(getattr(lives[n], "id", "") for n in names)
    requested = ErasureRequested(cmd.request_id, names, live,
                                 cmd.columns, cmd.keys, statement, reason, digest, len(files), sum(files.values()),
                                 tuple(sorted(erased)), tuple(sorted(replaced)))
    databases = sorted({database_of(n) for n in names})
    stream = catalog_stream(databases[0]) if len(databases) == 1 else CATALOG_STREAM
    reads = frozenset({*catalog_streams(*databases), *(data_stream(i) for i, _ in instances)})
    ended = overridden(state, frozenset(erased), cmd.request_id, cmd.now)  # R25 wins over R21
    return Decision(((stream, requested), *ended), reads, cmd.request_id, ((digest, data),))


def redaction(payload: str) -> str:
    """A 0.7 request's stored payload with its predicate forgotten: the same JSON, ``predicate``
    null. What ``ErasureForgotten.redacted`` hashes, and what the store keeps in its place."""
    body = orjson.loads(payload)
    body["predicate"] = None
    return orjson.dumps(body).decode()


def _forget(state: State, cmd: ForgetErasure) -> Decision:
    """Forgetting is recorded once (a second call deletes what a first left behind, and records
    nothing); a 0.7 request's says what its event's payload is redacted to."""
    r = state.erasures.requests.get(cmd.request_id) if isinstance(cmd.request_id, str) else None
    if r is None:
        raise InvalidArgument(f"no erasure request {cmd.request_id!r} is on record; nothing was recorded")
    if r.forgotten is not None:
        return Decision((), frozenset(), False)
    if (r.statement == "") != (cmd.redacted is not None):
        raise InvalidArgument(f"erasure request {r.request_id}'s event {'holds' if not r.statement else 'holds no'} "
                              "predicate to redact; nothing was recorded")
    databases = sorted({database_of(n) for n in r.tables})
    stream = catalog_stream(databases[0]) if len(databases) == 1 else CATALOG_STREAM
    return Decision(((stream, ErasureForgotten(r.request_id, r.seq, cmd.redacted)),), frozenset({stream}), True)


def _fence(state: State, cmd: FenceErasure) -> Decision:
    """A fence (or its renewal) for a request not recorded yet, on a live table no other request's
    fence holds: the engine then scans, rewrites and records with nothing landing in between."""
    if not is_plain_id(cmd.request_id) or cmd.request_id in state.erasures.requests:
        raise InvalidArgument(f"erasure request id {cmd.request_id!r} is empty, recorded already, or not plain text")
    if isinstance(cmd.seconds, bool) or not isinstance(cmd.seconds, int) or not 1 <= cmd.seconds <= 3600:
        raise InvalidArgument(f"a fence lasts 1 to 3600 seconds (renewed while its engine works), not {cmd.seconds!r}")
    inst = require_live(state, cmd.name, "hold commits off for an erasure of")
    at = state.landing(cmd.now)
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
    holds = fence is not None and fence.request_id == cmd.request_id
    return Decision(((stream, ErasureFenceLifted(cmd.request_id, inst.id)),) if holds else (), frozenset({stream}),
                    holds)


# --- fold ----------------------------------------------------------------------------------

def _on_requested(b: Builder, e: ErasureRequested, seq: int, time: Micros) -> None:
    erasures = b.erasures
    if e.request_id in erasures.requests:
        raise corrupt(f"event #{seq} records erasure request {e.request_id} a second time")
    if e.count < 0 or e.bytes < 0 or (e.count == 0) != (not e.versions) or not e.tables or \
            len(e.live) != len(e.tables) or len(e.columns) != len(e.tables):
        raise corrupt(f"event #{seq} records an erasure set of {e.count} files and {e.bytes} bytes held by "
                      f"{len(e.versions)} versions, of {len(e.tables)} tables, which no request can be")
    for held in e.versions:
        table_id, _, number = held.rpartition("/")
        v = b.data.version(table_id, int(number)) if number.isdigit() else None
        inst = b.tables.instances.get(table_id)
        if v is None or inst is None or b.data.is_expired(v):
            raise corrupt(f"event #{seq} erases version {held}, which is no kept version (R25)")
        if inst.is_live and (inst.id not in e.live or v.number == b.data.heads.get(table_id)):
            raise corrupt(f"event #{seq} erases version {held}, the current version or one of another live table "
                          "(R25: the rewrite comes first)")
        if held not in erasures.versions:  # (no setdefault: the fold's maps track what is set)
            erasures.versions[held] = e.request_id
    erasures.requests[e.request_id] = Request(**attrs.asdict(e, recurse=False), seq=seq, time=time)
    for table_id in e.live:
        fence = erasures.fences.get(table_id) if table_id else None
        if fence is not None and fence.request_id == e.request_id:
            del erasures.fences[table_id]  # recorded: its fence is lifted


def _on_forgotten(b: Builder, e: ErasureForgotten, seq: int, time: Micros) -> None:
    r = b.erasures.requests.get(e.request_id)
    if r is None or r.forgotten is not None or r.seq != e.seq or (r.statement == "") != (e.redacted is not None):
        raise corrupt(f"event #{seq} forgets erasure request {e.request_id} (event #{e.seq}), which is not one to "
                      "forget (R25)")
    b.erasures.requests[e.request_id] = attrs.evolve(r, predicate=None, forgotten=time, redacted=e.redacted)


def redaction_problem(state: State, seq: int, digest: str) -> str | None:
    """Why the payload of event #``seq``, found redacted (its SHA-256 ``digest``), is not one the log
    forgot (R25): no request there was forgotten, or not to that payload. None when it was."""
    found = next((r for r in state.erasures.requests.values() if r.seq == seq), None)
    if found is None or found.redacted is None:
        return "no ErasureForgotten event forgets the erasure request it holds"
    if found.redacted != digest:
        return f"its payload is not the one erasure request {found.request_id}'s ErasureForgotten event names"
    return None


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
    evolve={ErasureRequested: _on_requested, ErasureFenced: _on_fenced, ErasureFenceLifted: _on_lifted,
            ErasureForgotten: _on_forgotten},
    decide={RequestErasure: _request, FenceErasure: _fence, LiftErasureFence: _lift, ForgetErasure: _forget},
)

__all__ = ["ErasureRequested", "ErasureForgotten", "ErasureFenced", "ErasureFenceLifted", "Request", "Fence",
           "Erasures", "RequestErasure", "ForgetErasure", "FenceErasure", "LiftErasureFence", "check_request",
           "canonical_keys", "statement_bytes", "read_statement", "commitment", "redaction", "considered",
           "upcast_request", "redaction_problem",
           "FENCE_SECONDS", "CONCERN"]
