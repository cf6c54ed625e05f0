"""Watermarks and retention: the guard that says whether a dropped instance can come back.

This concern owns every rule about "blocked" and "how long":

* **R1** a watermark only moves forward, and advancing is fetch-and-set;
* **R3** an instance dropped at or before its *effective* watermark (the latest of the
  ledger's, its database's and its own) is blocked, and its undrop is refused with a
  message naming the table, its id, its drop time and the watermark;
* **R8** a purged instance is blocked for good;
* retention precedence: the table's setting, then its database's, then (for a vacuum
  that brings one) the run's, then the ledger's, then the built-in seven days; and the
  24-hour floor below which a setting needs an explicit override.

The guard knows an instance only by the four things it needs (``Guarded``), so the
table concern can depend on it without it depending back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Protocol, Union

import attrs

from ..clock import Micros, Seconds, format_duration, iso
from ..errors import InvalidArgument, InvalidRetention, InvalidTime, TableNotFound, UndropBlocked
from ..names import Scope
from .concern import Concern, Decision, corrupt, mapping
from .events import UPCASTERS, event
from .streams import retention_stream, watermark_stream

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State

DEFAULT_RETENTION_SECONDS = 7 * 86_400
RETENTION_FLOOR_SECONDS = 86_400


# --- events --------------------------------------------------------------------------------

@event("WatermarkAdvanced", version=2)
@attrs.frozen
class WatermarkAdvanced:
    """``scope`` is its text form; ``to`` is microseconds since the epoch; ``run_id`` names the
    vacuum that set it (None: advanced by hand)."""
    scope: str
    to: Micros
    run_id: str | None = None


UPCASTERS[("WatermarkAdvanced", 1)] = lambda data: {**data, "run_id": None}


@event("RetentionSet")
@attrs.frozen
class RetentionSet:
    """``seconds`` None removes a database or table override (the ledger's falls back to the default)."""
    scope: str
    seconds: Seconds | None


# --- state ---------------------------------------------------------------------------------

class Guarded(Protocol):
    """What the guard needs to know of an instance (read only: instances are frozen)."""

    @property
    def id(self) -> str: ...

    @property
    def database(self) -> str: ...

    @property
    def dropped_at(self) -> Micros | None: ...

    @property
    def purged_at(self) -> Micros | None: ...


@attrs.frozen
class Watermark:
    to: Micros
    run_id: str | None = None


@attrs.frozen(slots=False)
class Guard:
    watermarks: Mapping[str, Watermark] = mapping(Watermark)  # scope text -> Watermark
    retentions: Mapping[str, int] = mapping()                 # scope text -> seconds

    def watermark(self, scope: object) -> Micros | None:
        found = self.watermarks.get(str(scope))
        return None if found is None else found.to

    @staticmethod
    def covering_scopes(inst: Guarded) -> tuple[str, str, str]:
        """The three scopes whose watermarks guard an instance: the ledger, its database, itself."""
        return ("ledger", f"database:{inst.database}", f"table:{inst.id}")

    def effective(self, inst: Guarded) -> Watermark | None:
        """The latest of the three watermarks that cover an instance (with who set it)."""
        marks = self.watermarks
        if not marks:  # the common case in a young ledger, and on the fold's hot path
            return None
        best = None
        for scope in self.covering_scopes(inst):
            mark = marks.get(scope)
            if mark is not None and (best is None or mark.to > best.to):
                best = mark
        return best

    def effective_watermark(self, inst: Guarded) -> Micros | None:
        best = self.effective(inst)
        return None if best is None else best.to

    def is_blocked(self, inst: Guarded) -> bool:
        """R3 and R8: purged, or dropped at or before its effective watermark: never coming back."""
        if inst.purged_at is not None:
            return True
        dropped = inst.dropped_at
        if dropped is None:
            return False
        # Blocked if *any* covering mark reaches the drop, the latest one included. The ledger's
        # is asked first and usually decides: replay asks this of every purge.
        marks = self.watermarks
        mark = marks.get("ledger")
        if mark is not None and dropped <= mark.to:
            return True
        return any(mark is not None and dropped <= mark.to
                   for mark in map(marks.get, self.covering_scopes(inst)[1:]))

    def status(self, inst: Guarded) -> str:
        """``live``, ``dropped`` (restorable), ``blocked`` (behind a watermark) or ``purged``."""
        if inst.purged_at is not None:
            return "purged"
        if inst.dropped_at is None:
            return "live"
        return "blocked" if self.is_blocked(inst) else "dropped"

    def retention_seconds(self, inst: Guarded, run_default: int | None = None) -> int:
        """The retention that applies: the table's, else its database's, else the vacuum run's
        (if it brings one), else the ledger's, else the built-in default."""
        return self.retention_source(inst, run_default)[1]

    def retention_source(self, inst: Guarded, run_default: int | None = None) -> tuple[str, int]:
        """The retention that applies and where it comes from (a scope, ``vacuum`` or ``default``),
        so that a report can say which setting decided."""
        retentions = self.retentions
        if retentions:  # none set is common (a young ledger): then no scope's text is built, 8,400 instructions
            for scope in (f"table:{inst.id}", f"database:{inst.database}"):  # to 3,200 (a create_table's)
                seconds = retentions.get(scope)
                if seconds is not None:
                    return scope, seconds
        if run_default is not None:
            return "vacuum", run_default
        return self.ledger_retention()

    def ledger_retention(self) -> tuple[str, int]:
        """The ledger-wide retention and where it comes from (``ledger``, or the built-in ``default``)."""
        seconds = self.retentions.get("ledger")
        return ("default", DEFAULT_RETENTION_SECONDS) if seconds is None else ("ledger", seconds)

    def restorable_until(self, inst: Guarded) -> Micros | None:
        """When a dropped instance becomes due for a vacuum (it may be restored until then)."""
        if inst.dropped_at is None or self.is_blocked(inst):
            return None
        return inst.dropped_at + self.retention_seconds(inst) * 1_000_000

    def check_undroppable(self, inst: Guarded, name: str) -> None:
        """R3 and R8: refuse to bring back an instance a vacuum may have touched.

        The message names the table, its id, its drop time and the watermark (and who
        set it), or when its files were purged, so whoever reads it knows what happened.
        """
        if not self.is_blocked(inst):
            return
        reason = f"cannot undrop {name} (id {inst.id}): it was dropped at {iso(inst.dropped_at)}"
        mark = self.effective(inst)
        if mark is not None and inst.dropped_at is not None and inst.dropped_at <= mark.to:
            scope = next(s for s in self.covering_scopes(inst) if self.watermarks.get(s) == mark)
            if mark.run_id:
                reason += f", at or before the vacuum watermark {iso(mark.to)} (scope {scope}) set by run {mark.run_id}"
            else:
                reason += f", at or before the watermark {iso(mark.to)} (scope {scope}), advanced by hand"
        if inst.purged_at is not None:
            raise UndropBlocked(f"{reason}; its files were purged at {iso(inst.purged_at)}, "
                                "so it can never be undropped")
        raise UndropBlocked(f"{reason}; behind a watermark its files may be deleted by any vacuum at any "
                            "time, so restoring it could bring it back half-empty")

    def watermark_streams(self, inst: Guarded) -> frozenset[str]:
        return frozenset(map(watermark_stream, self.covering_scopes(inst)))


# --- commands and decisions ----------------------------------------------------------------

@attrs.frozen(slots=False)  # as Decision: built once a command, in half the instructions
class AdvanceWatermark:
    scope: Scope
    to: Micros
    now: Micros


@attrs.frozen
class SetRetention:
    scope: Scope
    seconds: int | None
    override_floor: bool = False


Command = Union[AdvanceWatermark, SetRetention]


def advance(state: State, scope: str, to: Micros, run_id: str | None = None) -> tuple[str, WatermarkAdvanced]:
    """The event that moves a watermark forward; the caller has checked that it moves (R1)."""
    return watermark_stream(scope), WatermarkAdvanced(scope, to, run_id)


def _advance(state: State, cmd: AdvanceWatermark) -> Decision:
    """R1: fetch-and-set; moving to a time at or before the current value changes nothing."""
    _require_scope_exists(state, cmd.scope)
    if cmd.to > cmd.now:
        raise InvalidTime(
            f"cannot advance watermark {cmd.scope} to {iso(cmd.to)}: that is past the ledger's "
            f"current time {iso(cmd.now)}, and a watermark marks a point already reached"
        )
    scope = str(cmd.scope)  # once: a scope's text costs a call of its own each time
    stream, event_ = advance(state, scope, cmd.to)
    current = state.guard.watermark(scope)
    return Decision(((stream, event_),) if current is None or cmd.to > current else (), frozenset({stream}), current)


def _set_retention(state: State, cmd: SetRetention) -> Decision:
    _require_scope_exists(state, cmd.scope)
    # None removes the setting: a database or table falls back to the wider scope,
    # the ledger to the built-in default.
    seconds = None if cmd.seconds is None else \
        check_retention(cmd.seconds, cmd.override_floor, f"for {cmd.scope}")
    stream = retention_stream(cmd.scope)
    return Decision(((stream, RetentionSet(str(cmd.scope), seconds)),), frozenset({stream}), seconds)


def check_retention(seconds: int, override_floor: bool, where: str = "",
                    floor: int = RETENTION_FLOOR_SECONDS, what: str = "retention",
                    consequence: str = "dropped tables would become unrestorable sooner than that") -> int:
    """The floor: nothing under a day unless the caller says it means it."""
    if not isinstance(override_floor, bool):
        raise InvalidArgument(f"override_floor must be True or False, got {override_floor!r}")
    if seconds < 0:
        raise InvalidRetention(f"{what} {where} is negative ({seconds}s); it must be zero or more")
    if seconds < floor and not override_floor:
        raise InvalidRetention(
            f"{what} {format_duration(seconds)} {where} is below the {format_duration(floor)} floor: "
            f"{consequence}; pass override_floor=True if that is what you mean"
        )
    return seconds


def _require_scope_exists(state: State, scope: Scope) -> None:
    """A table scope must name a table the ledger knows. A database scope need not: a policy
    may be set before the database's first table is created (the CLI says so when it is)."""
    if scope.kind == "table" and not state.tables.has_id(scope.key):
        raise TableNotFound(f"scope {scope}: there is no table with id {scope.key}")


# --- fold ----------------------------------------------------------------------------------

def _on_watermark(b: Builder, e: WatermarkAdvanced, seq: int, time: Micros) -> None:
    if not isinstance(e.to, int) or not isinstance(e.scope, str):
        raise TypeError(f"watermark {e.scope!r} to {e.to!r}")
    current = b.guard.watermarks.get(e.scope)
    if current is not None and e.to <= current.to:
        raise corrupt(f"event #{seq} moves watermark {e.scope} back or nowhere (R1)")
    b.guard.watermarks[e.scope] = Watermark(e.to, e.run_id)


def _on_retention(b: Builder, e: RetentionSet, seq: int, time: Micros) -> None:
    if not (e.seconds is None or isinstance(e.seconds, int)) or not isinstance(e.scope, str):
        raise TypeError(f"retention {e.scope!r} of {e.seconds!r} seconds")
    if e.seconds is not None and e.seconds < 0:
        raise corrupt(f"event #{seq} sets a negative retention for {e.scope}")
    if e.seconds is not None:  # zero is a real setting: "no retention"
        b.guard.retentions[e.scope] = e.seconds
    elif e.scope in b.guard.retentions:
        del b.guard.retentions[e.scope]


CONCERN = Concern(
    initial=Guard(),
    evolve={WatermarkAdvanced: _on_watermark, RetentionSet: _on_retention},
    decide={AdvanceWatermark: _advance, SetRetention: _set_retention},
)
