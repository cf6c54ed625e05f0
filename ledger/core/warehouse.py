"""The warehouse root: where every instance's files live, and its recorded moves (R10).

The root is recorded when the ledger is created (in the file's meta table, so
that an empty ledger has no events) and every open uses it: an open that names
another root is refused, because tables written there would be invisible to every
vacuum. Moving a warehouse (after copying its files elsewhere) is this concern's
one command, recorded in the log like any other decision; from then on the moved
root is the one every open uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import attrs

from ..clock import Micros
from ..errors import InvalidArgument, WarehouseMismatch
from .concern import Concern, Decision, Json, mapping
from .events import event
from .streams import VACUUM_STREAM, WAREHOUSE_STREAM
from .tables import name_of

if TYPE_CHECKING:
    from .fold import Builder
    from .model import State



@event("WarehouseMoved")
@attrs.frozen
class WarehouseMoved:
    from_root: str
    to_root: str


@attrs.frozen
class Warehouse:
    moves: Mapping[str, Json] = mapping()
    """``root``: the root since the latest move (absent: the one recorded at creation);
    ``moved_at``: when that move was recorded."""

    @property
    def root(self) -> str | None:
        root: str | None = self.moves.get("root")
        return root

    @property
    def moved_at(self) -> Micros | None:
        """A write begun before this is never committed: its folder is under the old root (R10)."""
        moved_at: Micros | None = self.moves.get("moved_at")
        return moved_at


@attrs.frozen
class MoveWarehouse:
    from_root: str
    """The root the caller believes is current (checked: a stale belief is refused)."""
    to_root: str


def _move(state: State, cmd: MoveWarehouse) -> Decision:
    current = state.warehouse.root
    if current is not None and current != cmd.from_root:
        raise WarehouseMismatch(f"cannot move the warehouse from {cmd.from_root}: it was moved to {current}")
    if cmd.to_root == cmd.from_root:
        raise InvalidArgument(f"the warehouse is already at {cmd.to_root}")
    busy = [run.run_id for run in state.vacuums.unfinished()]
    if busy:
        raise InvalidArgument(f"cannot move the warehouse while vacuum run(s) {', '.join(busy)} are unfinished: "
                              "their plans name the old locations; let them finish (run vacuum again) first")
    writing = state.data.open_writes()
    if writing:
        listed = ", ".join(f"{w.id} ({name_of(state, w.table_id)})" for w in writing[:5])
        more = f" and {len(writing) - 5} more" if len(writing) > 5 else ""
        raise InvalidArgument(f"cannot move the warehouse while {len(writing)} write(s) are open: {listed}{more}; "
                              "their jobs write under the old root. Let them commit or abort them "
                              "(retention-ledger writes lists them), then move")
    return Decision(((WAREHOUSE_STREAM, WarehouseMoved(cmd.from_root, cmd.to_root)),),
                    frozenset({WAREHOUSE_STREAM, VACUUM_STREAM}), cmd.to_root)


def _on_moved(b: Builder, e: WarehouseMoved, seq: int, time: int) -> None:
    if not isinstance(e.to_root, str) or not e.to_root:
        raise TypeError(f"warehouse root {e.to_root!r}")
    b.warehouse.moves["root"] = e.to_root
    b.warehouse.moves["moved_at"] = time


CONCERN = Concern(initial=Warehouse(), evolve={WarehouseMoved: _on_moved}, decide={MoveWarehouse: _move})
