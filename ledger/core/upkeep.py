"""The ledger file's own history: in-place upgrades of its format, recorded like any decision.

An upgrade changes what the file holds (format 2 added the hash chain, R16), so it is
an event: an auditor reading the log sees when a ledger began to be chained, by whom,
and how many older events were hashed after the fact rather than as they were written.
No command decides it; the runner records it when the store upgrades a file on open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import attrs

from .concern import Concern, corrupt, mapping
from .events import event
from .streams import LEDGER_STREAM as LEDGER_STREAM  # named here too: the stream an upgrade is recorded on

if TYPE_CHECKING:
    from .fold import Builder



@event("LedgerUpgraded")
@attrs.frozen
class LedgerUpgraded:
    from_format: int
    to_format: int
    events_hashed: int
    """How many events were already in the log, and were hashed by the upgrade, not as written."""


@attrs.frozen
class Upkeep:
    formats: Mapping[str, int] = mapping()
    """``format``: the format the latest upgrade brought the file to; ``hashed_by_upgrade``: how many
    events an upgrade hashed, not their writer (absent: none)."""

    @property
    def format(self) -> int | None:
        return self.formats.get("format")

    @property
    def hashed_by_upgrade(self) -> int:
        """The number of events hashed by an upgrade rather than as they were written (0: none)."""
        return self.formats.get("hashed_by_upgrade", 0)


def _on_upgraded(b: Builder, e: LedgerUpgraded, seq: int, time: int) -> None:
    if not (isinstance(e.from_format, int) and isinstance(e.to_format, int) and e.from_format < e.to_format):
        raise corrupt(f"event #{seq} upgrades the ledger from format {e.from_format!r} to {e.to_format!r}")
    current = b.upkeep.formats.get("format")
    if current is not None and current >= e.to_format:
        raise corrupt(f"event #{seq} upgrades the ledger to format {e.to_format}, which it already had")
    b.upkeep.formats["format"] = e.to_format
    if e.events_hashed:
        b.upkeep.formats["hashed_by_upgrade"] = e.events_hashed


CONCERN = Concern(initial=Upkeep(), evolve={LedgerUpgraded: _on_upgraded}, decide={})
