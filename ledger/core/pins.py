"""Pins: a reader's lease on what it reads, recorded in the chain (R21).

A long read (a month-end backfill of version 41) must not lose its files to a vacuum that
expires version 41 meanwhile. Lakehouses guard it with a clock and a hope (keep retention
longer than the longest job); writes here already hold leases (R14). A **pin** does the same
for a read: a lease on one version of an instance (or on a dropped instance, which keeps it from
being purged), taken before the read, renewed while it runs, released after.

What a live pin holds (answered here, by ``Pins.holding_instance`` and ``Pins.holding_versions``,
for the decisions and the folds of the other concerns, so ``verify`` re-checks it):

* a retention mark stops short of every pinned version (so its write folders stay named by an
  unexpired version, and no vacuum deletes them, R13);
* a pinned instance is not purged (a vacuum leaves it out of its plan, so it is not newly
  blocked either, R5);
* a sweep never touches a committed version's folder anyway (R15).

A pin is refused, before anything is recorded, on what a vacuum may already have touched: an
expired version, a purged instance, a dropped one behind its watermark. It never resurrects.

An erasure request wins over a pin (R25 over R21): a pin on a version the request erases is
ended by the request itself, in the same append (``PinOverridden``, decided by ``overridden``), so
it holds nothing from that moment and can never be renewed; its holder reads the current version
instead. A pin taken before 0.8 on a version erased then (when requests did not end pins) is not
renewed either, and ends at its lease.
It conditions on the instance's data stream (where marks move) and on the catalog and
watermark streams that guard the instance (where a drop or a vacuum's watermark lands), and a
vacuum conditions on the data stream of each table it plans, so a pin and a vacuum that race
have one order (R4): either the pin is refused or the vacuum leaves its files alone.

Bounded: a lease is at most ``MAX_LEASE_SECONDS`` (renewals are the holder's, made while it
lives), a table holds at most ``MAX_PER_TABLE`` live pins, and a pin whose lease ran out ends
without an event (a process that dies leaves pins that end on their own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Union

import attrs

from ..clock import Micros, iso
from ..errors import InvalidArgument, PinEnded, PinRefused, TableNotFound
from ..names import table_id as valid_table_id, table_name
from .concern import Concern, Decision, corrupt, mapping
from .events import event
from .streams import data_stream
from .tables import Instance, check_not_erased, guard_streams, name_of, require_live
from .versions import choose, version_key

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State

DEFAULT_LEASE_SECONDS = 3600
"""A pin's lease unless its taker says otherwise: an hour, renewable."""
MAX_LEASE_SECONDS = 7 * 86_400
"""The longest lease one call may ask for: no pin blocks a vacuum for longer unless renewed."""
MAX_PER_TABLE = 1000
"""The most live pins one instance may hold: each is a row a vacuum looks at."""


# --- events --------------------------------------------------------------------------------

@event("PinTaken")
@attrs.frozen
class PinTaken:
    """A pin on ``version`` of the instance (None: a dropped instance that has no versions)."""
    pin_id: str
    table_id: str
    version: int | None
    lease_seconds: int
    expires_at: Micros


@event("PinRenewed")
@attrs.frozen
class PinRenewed:
    pin_id: str
    table_id: str
    expires_at: Micros


@event("PinReleased")
@attrs.frozen
class PinReleased:
    pin_id: str
    table_id: str


@event("PinOverridden")
@attrs.frozen
class PinOverridden:
    """Erasure request ``request_id`` ended the pin: the version it held holds files the request
    erased, and an erasure beats a reader's pin (R25 over R21). Appended with the request."""
    pin_id: str
    table_id: str
    request_id: str


# --- state ---------------------------------------------------------------------------------

@attrs.frozen
class PinRecord:
    """A pin as the chain has it (taken, renewed, released); ``ledger.Pin`` is the caller's handle on one."""

    id: str
    table_id: str
    version: int | None
    taken_at: Micros
    lease_seconds: int
    expires_at: Micros
    released_at: Micros | None = None

    def holds(self, now: Micros) -> bool:
        """Not released, and its lease has not run out."""
        return self.released_at is None and self.expires_at > now

    def ended_at(self) -> Micros:
        return self.expires_at if self.released_at is None else min(self.released_at, self.expires_at)


@attrs.frozen
class Pins:
    pins: Mapping[str, PinRecord] = mapping(PinRecord)
    """Pin id -> its record: every pin ever taken (ids are used once)."""
    by_table: Mapping[str, tuple[str, ...]] = mapping(tuple)
    """Table id -> the ids of its pins not released (some may have run out)."""

    def live(self, table_id: str, now: Micros) -> list[PinRecord]:
        """The pins that hold the instance at ``now``, soonest to end first."""
        found = (self.pins[p] for p in self.by_table.get(table_id, ()))
        return sorted((p for p in found if p.holds(now)), key=lambda p: (p.expires_at, p.id))

    # What a live pin allows, asked by the other concerns (purges, marks, the vacuum's plan) as they
    # decide and as they fold: the rule lives here, by one measure (the version number held).

    def holding_instance(self, table_id: str, now: Micros) -> PinRecord | None:
        """The pin that keeps the instance from being purged at ``now`` (the live one that ends last),
        or None: no pin holds it, and a purge may go ahead as far as pins are concerned."""
        held = self.live(table_id, now)
        return held[-1] if held else None

    def holding_versions(self, table_id: str, now: Micros) -> PinRecord | None:
        """The live pin on the instance's oldest pinned version, or None. A retention mark may expire
        only versions numbered below that pin's ``version``: it and every newer one stay readable."""
        versioned = [p for p in self.live(table_id, now) if p.version is not None]
        return min(versioned, key=lambda p: (p.version, p.id)) if versioned else None

    def every_live(self, now: Micros) -> list[PinRecord]:
        return sorted((p for ids in self.by_table.values() for p in map(self.pins.__getitem__, ids)
                       if p.holds(now)), key=lambda p: (p.table_id, p.expires_at, p.id))


# --- commands ------------------------------------------------------------------------------

@attrs.frozen
class TakePin:
    pin_id: str
    now: Micros
    name: str | None = None
    table_id: str | None = None
    version: int | None = None
    as_of: Micros | None = None
    lease_seconds: int = DEFAULT_LEASE_SECONDS


@attrs.frozen
class RenewPin:
    pin_id: str
    now: Micros


@attrs.frozen
class ReleasePin:
    pin_id: str
    now: Micros


@attrs.frozen
class PinBatch:
    """Pins taken, renewed and released in one append: ``spark_ops.attach`` holds a version of
    each of a thousand tables, and a thousand appends would cost seconds. Each command is decided
    on the same state, which is sound because none changes what another decides: takes name
    distinct tables (checked), and a renewal or release of one pin does not touch another. A
    renewal of a pin that ended is left out (its result False) instead of refusing the batch."""
    commands: tuple[TakePin | RenewPin | ReleasePin, ...]


Command = Union[TakePin, RenewPin, ReleasePin, PinBatch]


# --- decisions -----------------------------------------------------------------------------

def check_lease(seconds: object) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= MAX_LEASE_SECONDS:
        raise InvalidArgument(f"a pin's lease must be from 1 second to {MAX_LEASE_SECONDS // 86_400} days "
                              f"({MAX_LEASE_SECONDS} s), not {seconds!r}: a longer read renews its pin")
    return seconds


def _instance(state: State, cmd: TakePin) -> Instance:
    if cmd.table_id is None:
        if cmd.name is None:
            raise InvalidArgument("a pin needs a live table's name, or table_id= for any instance")
        return require_live(state, cmd.name, "pin")
    inst = state.tables.instance(valid_table_id(cmd.table_id))
    if inst is None:
        raise TableNotFound(f"cannot pin table id {cmd.table_id}: there is no table with that id")
    if cmd.name is not None and table_name(cmd.name) != inst.name:
        raise InvalidArgument(f"table id {inst.id} is {inst.name}, not {table_name(cmd.name)}: give one of them")
    return inst


def refusal(state: State, inst: Instance) -> str | None:
    """Why no pin may be taken on this instance (R21: never on what a vacuum may have touched)."""
    if inst.purged_at is not None:
        return f"it was purged at {iso(inst.purged_at)}: its files are gone (R8)"
    if inst.is_dropped and state.guard.is_blocked(inst):
        return (f"it was dropped at {iso(inst.dropped_at)}, at or before its watermark "
                f"{iso(state.guard.effective_watermark(inst))}: a vacuum may be deleting its files (R3)")
    return None


def _take(state: State, cmd: TakePin) -> Decision:
    lease = check_lease(cmd.lease_seconds)
    inst = _instance(state, cmd)
    why = refusal(state, inst)
    if why is not None:
        raise PinRefused(f"cannot pin {inst.name} (id {inst.id}): {why}")
    if inst.is_dropped:
        check_not_erased(state, inst)  # R25: a dropped instance an erasure reached is never pinned
    if inst.is_dropped and inst.id not in state.data.heads and cmd.version is None and cmd.as_of is None:
        version = None  # a dropped instance without versions: the pin keeps it from being purged
    else:
        version = choose(state, inst, cmd.version, cmd.as_of).number  # refuses an expired one (R12)
    if len(state.pins.live(inst.id, cmd.now)) >= MAX_PER_TABLE:
        raise PinRefused(f"cannot pin {inst.name} (id {inst.id}): it holds {MAX_PER_TABLE} live pins already, "
                         "the most one table may; release some (pins lists them)")
    if cmd.pin_id in state.pins.pins:
        raise InvalidArgument(f"pin id {cmd.pin_id!r} is taken")
    taken = PinTaken(cmd.pin_id, inst.id, version, lease, cmd.now + lease * 1_000_000)
    stream = data_stream(inst.id)
    return Decision(((stream, taken),), guard_streams(state, inst) | {stream}, cmd.pin_id)


def overridden(state: State, erased: frozenset[str], request_id: str,
               now: Micros) -> list[tuple[str, PinOverridden]]:
    """The pins an erasure request of the versions ``erased`` (``<table id>/<number>``) ends as it is
    recorded (R25 wins over R21), as events on each pin's data stream (which the request reads)."""
    ended = []
    for table_id in sorted({key.rpartition("/")[0] for key in erased}):
        for pin in state.pins.live(table_id, state.landing(now)):
            if pin.version is not None and version_key(table_id, pin.version) in erased:
                ended.append((data_stream(table_id), PinOverridden(pin.id, table_id, request_id)))
    return ended


def erased_under(state: State, pin: PinRecord) -> str | None:
    """Why ``pin`` may not be renewed because an erasure request erased the version it holds (R25),
    or None. Asked of every renewal: a pin taken before requests ended pins (0.7) is caught here."""
    if pin.version is None:
        return None
    name = name_of(state, pin.table_id)
    erased = state.erasures.version_refusal(name, pin.table_id, pin.version)
    if erased is None:
        return None
    return (f"cannot renew pin {pin.id}: erasure request {erased[1]} erased the version it holds ({pin.version} of "
            f"{name}), and an erasure beats a reader's pin (R25 over R21): it holds "
            "nothing since; read the current version, with a new pin")


def _pin(state: State, pin_id: object) -> PinRecord:
    found = state.pins.pins.get(pin_id) if isinstance(pin_id, str) else None
    if found is None:
        raise InvalidArgument(f"there is no pin with id {pin_id!r} (see pins)")
    return found


def _renew(state: State, cmd: RenewPin) -> Decision:
    """A pin is renewed only while it holds, when the renewal lands: one that ended may already have
    let a vacuum in."""
    pin = _pin(state, cmd.pin_id)
    at = state.landing(cmd.now)
    erased = erased_under(state, pin)
    if erased is not None:
        raise PinEnded(erased)
    if not pin.holds(at):
        how = "was released" if pin.released_at is not None else "ran out"
        raise PinEnded(f"cannot renew pin {pin.id}: it {how} at {iso(pin.ended_at())}, and a vacuum may have "
                       "deleted what it held since; take a new pin")
    stream = data_stream(pin.table_id)
    renewed = PinRenewed(pin.id, pin.table_id, at + pin.lease_seconds * 1_000_000)
    return Decision(((stream, renewed),), frozenset({stream}), pin.id)


def _release(state: State, cmd: ReleasePin) -> Decision:
    """Releasing a pin that ended already changes nothing (result False)."""
    pin = _pin(state, cmd.pin_id)
    stream = data_stream(pin.table_id)
    holds = pin.holds(state.landing(cmd.now))
    return Decision(((stream, PinReleased(pin.id, pin.table_id)),) if holds else (), frozenset({stream}), holds)


def _batch(state: State, cmd: PinBatch) -> Decision:
    taken: set[str] = set()
    named: set[str] = set()
    events: list[tuple[str, Any]] = []
    reads: set[str] = set()
    results: list[Any] = []
    for one in cmd.commands:
        if isinstance(one, TakePin):
            inst = _instance(state, one).id
            if inst in taken:
                raise InvalidArgument(f"a batch of pins takes table id {inst} twice: take one pin per table")
            taken.add(inst)
        elif isinstance(one, (RenewPin, ReleasePin)):
            if one.pin_id in named:
                raise InvalidArgument(f"a batch of pins names pin {one.pin_id} twice")
            named.add(one.pin_id)
        else:
            raise InvalidArgument(f"a batch of pins holds takes, renewals and releases, not {type(one).__name__}")
        if isinstance(one, RenewPin) and (not _pin(state, one.pin_id).holds(state.landing(one.now))
                                          or erased_under(state, _pin(state, one.pin_id)) is not None):
            results.append(False)
            continue
        decided = DECIDE[type(one)](state, one)
        events += decided.events
        reads |= decided.reads
        results.append(decided.result)
    return Decision(tuple(events), frozenset(reads), tuple(results))


DECIDE: dict[type, Any] = {TakePin: _take, RenewPin: _renew, ReleasePin: _release}


# --- fold ----------------------------------------------------------------------------------

def _on_taken(b: Builder, e: PinTaken, seq: int, time: Micros) -> None:
    if e.pin_id in b.pins.pins:
        raise corrupt(f"event #{seq} takes pin {e.pin_id} a second time")
    inst = b.tables.instances.get(e.table_id)
    if inst is None:
        raise corrupt(f"event #{seq} pins table id {e.table_id}, which was never created")
    why = refusal(b, inst)  # type: ignore[arg-type]  # a builder reads as a state
    if why is None and inst.is_dropped and \
            b.erasures.instance_refusal(inst.name, inst.id, b.data.heads.get(inst.id)) is not None:
        why = "an erasure request erased its current version (R25)"
    if why is None and e.version is not None:
        v = b.data.version(e.table_id, e.version)
        why = "that version does not exist" if v is None else \
            "that version is expired (R12)" if b.data.is_expired(v) else \
            "an erasure request erased that version (R25)" if \
            b.erasures.version_refusal(inst.name, inst.id, e.version) is not None else None
    elif why is None and (inst.is_live or e.table_id in b.data.heads):
        why = "it names no version of a table that has versions"
    if why is not None:
        raise corrupt(f"event #{seq} pins {inst.name} ({inst.id}) version {e.version}, but {why} (R21)")
    if not 1 <= e.lease_seconds <= MAX_LEASE_SECONDS or e.expires_at > time + e.lease_seconds * 1_000_000:
        raise corrupt(f"event #{seq} takes pin {e.pin_id} with a lease of {e.lease_seconds} s until "
                      f"{e.expires_at}: not a lease the ledger grants (R21)")
    pins = b.pins
    pins.pins[e.pin_id] = PinRecord(e.pin_id, e.table_id, e.version, time, e.lease_seconds, e.expires_at)
    kept = tuple(p for p in pins.by_table.get(e.table_id, ()) if pins.pins[p].holds(time))
    pins.by_table[e.table_id] = (*kept, e.pin_id)


def _pin_of(b: Builder, pin_id: str, table_id: str, seq: int, doing: str) -> PinRecord:
    pin: PinRecord | None = b.pins.pins.get(pin_id)
    if pin is None or pin.table_id != table_id:
        raise corrupt(f"event #{seq} {doing} pin {pin_id}, which is not a pin on {table_id} (R21)")
    return pin


# A renewal or a release is decided for the earliest time its event can land (``State.landing``), but
# another host's events on other streams can land first and time it later still: one that lands
# after its pin ended changes nothing. The pin stays ended (a vacuum may have planned with it so),
# and the caller is told (``PinEnded``); the log stays a log every release can fold.

def _on_renewed(b: Builder, e: PinRenewed, seq: int, time: Micros) -> None:
    pin = _pin_of(b, e.pin_id, e.table_id, seq, "renews")
    if e.expires_at > time + pin.lease_seconds * 1_000_000:
        raise corrupt(f"event #{seq} renews pin {pin.id} past its lease (R21)")
    if pin.holds(time):
        b.pins.pins[pin.id] = attrs.evolve(pin, expires_at=e.expires_at)


def _on_released(b: Builder, e: PinReleased, seq: int, time: Micros) -> None:
    pin = _pin_of(b, e.pin_id, e.table_id, seq, "releases")
    if pin.released_at is not None:
        raise corrupt(f"event #{seq} releases pin {pin.id} a second time (R21)")
    _end(b, pin, time)


def _on_overridden(b: Builder, e: PinOverridden, seq: int, time: Micros) -> None:
    pin = _pin_of(b, e.pin_id, e.table_id, seq, "overrides")
    if pin.released_at is not None or pin.version is None or \
            b.erasures.versions.get(version_key(pin.table_id, pin.version)) != e.request_id:
        raise corrupt(f"event #{seq} ends pin {pin.id} for erasure request {e.request_id}, which did not erase the "
                      "version it holds, or the pin had ended (R25)")
    _end(b, pin, time)


def _end(b: Builder, pin: PinRecord, time: Micros) -> None:
    """A pin released (by its holder, or by an erasure request) at ``time``: one whose lease ran out
    first had ended already, and stays as it was."""
    if not pin.holds(time):
        return
    pins = b.pins
    pins.pins[pin.id] = attrs.evolve(pin, released_at=time)
    left = tuple(p for p in pins.by_table.get(pin.table_id, ()) if p != pin.id)
    if left:
        pins.by_table[pin.table_id] = left
    else:
        del pins.by_table[pin.table_id]


CONCERN = Concern(
    initial=Pins(),
    evolve={PinTaken: _on_taken, PinRenewed: _on_renewed, PinReleased: _on_released,
            PinOverridden: _on_overridden},
    decide={**DECIDE, PinBatch: _batch},
)
