"""The composition: every concern joined into one ``State``, one ``decide`` and one ``fold``.

This is the only module that knows the list of concerns. Adding one (table
versions, say) means writing its module and adding its field to ``State`` below
(and its commands to ``Command``); the fold's handlers, the deciders, equality and
the snapshot codec all follow from that field.

    state = fold(State(), records)          # the catalog as a fold of the log
    decision = decide(state, DropTable("sales.orders"))
    decision.events, decision.reads         # what to append, on which condition (R4)
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, TypeVar, Union

import attrs
from immutables import Map

from ..clock import Micros
from . import erasures, guard, pins, publications, receipts, scrubs, tables, upkeep, vacuums, versions, warehouse
from .concern import EMPTY, Concern, Decision
from .events import Recorded, Row
from .fold import Folder, Placed, Steps


def _concern(concern: Concern) -> Any:
    return attrs.field(default=concern.initial, metadata={"concern": concern})


@attrs.frozen(slots=False)
class State:
    """The folded log. ``seq`` and ``last_time`` are those of its last event; ``streams`` holds
    each stream's version, which conditional appends are checked against (R4)."""

    seq: int = 0
    last_time: Micros = 0
    streams: Map[str, int] = EMPTY
    guard: guard.Guard = _concern(guard.CONCERN)
    tables: tables.Tables = _concern(tables.CONCERN)
    data: versions.Data = _concern(versions.CONCERN)
    vacuums: vacuums.Vacuums = _concern(vacuums.CONCERN)
    warehouse: warehouse.Warehouse = _concern(warehouse.CONCERN)
    upkeep: upkeep.Upkeep = _concern(upkeep.CONCERN)
    pins: pins.Pins = _concern(pins.CONCERN)
    receipts: receipts.Receipts = _concern(receipts.CONCERN)
    erasures: erasures.Erasures = _concern(erasures.CONCERN)
    scrubs: scrubs.Scrubs = _concern(scrubs.CONCERN)
    publications: publications.Publications = _concern(publications.CONCERN)

    def version(self, stream: str) -> int:
        return self.streams.get(stream, 0)

    def landing(self, now: Micros) -> Micros:
        """The earliest time an event decided at ``now`` can be timed: the log's times increase, so a
        clock that stands still (or steps back) times it after the last event, not at ``now``."""
        return max(now, self.last_time + 1)


Command = Union[tables.Command, guard.Command, versions.Command, vacuums.Command, pins.Command, receipts.Command,
                erasures.Command, scrubs.Command, publications.Command, warehouse.MoveWarehouse]

CONCERNS: dict[str, Concern] = {f.name: f.metadata["concern"] for f in attrs.fields(State)
                                if "concern" in f.metadata}


_T = TypeVar("_T")


def _joined(part: Callable[[Concern], Mapping[type, _T]]) -> dict[type, _T]:
    joined: dict[type, _T] = {}
    for name, concern in CONCERNS.items():
        for kind, handler in part(concern).items():
            if kind in joined:
                raise TypeError(f"{kind.__name__} is claimed by two concerns (the second: {name})")
            joined[kind] = handler
    return joined


_DECIDERS = _joined(lambda concern: concern.decide)
_FOLDER: Folder[State] = Folder(CONCERNS, _joined(lambda concern: concern.evolve))


def decide(state: State, command: Command) -> Decision:
    """What a command does on this state: the events to append, the streams read, the result."""
    decider = _DECIDERS.get(type(command))
    if decider is None:
        raise TypeError(f"no decision rule for {type(command).__name__}")
    return decider(state, command)


def evolve(state: State, record: Recorded) -> State:
    """The next state after one recorded event."""
    return _FOLDER.fold(state, (record,))


def fold(state: State, records: Iterable[Recorded]) -> State:
    """The state after a batch of recorded events, in sequence order."""
    return _FOLDER.fold(state, records)


def fold_placed(state: State, placed: Iterable[Placed]) -> State:
    """``fold`` of events as the store placed them ``(seq, stream, version, time, event)``: a
    command's own events, folded back after its append."""
    return _FOLDER.fold_placed(state, placed)


def fold_in_steps(state: State) -> Steps[State]:
    """A long fold from ``state`` (typically nothing), paused wherever its caller needs the state
    (``fold.Steps``): for a replay that writes, or checks, history snapshots on its way."""
    return Steps(_FOLDER, state)


def fold_rows(state: State, rows: Iterable[Row], *, bulk: bool | None = None) -> State:
    """``fold`` straight from stored rows (the replay path); ``bulk``: see ``fold.BULK``."""
    return _FOLDER.fold_rows(state, rows, bulk=bulk)
