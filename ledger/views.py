"""What callers get back: plain values with datetimes and absolute locations.

The folded state keeps integer microseconds and paths relative to the
warehouse; these views turn them into what a person or a pipeline wants to
hold, and into JSON with ISO 8601 UTC times for the CLI.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import attrs

from .clock import Micros, from_micros, iso, iso_utc
from .events import Recorded, type_of
from .state import Catalog, Instance


def join_location(root: str, path: str) -> str:
    return root.rstrip("/") + "/" + path


@attrs.frozen
class TableInstance:
    """One incarnation of a table, as the ledger sees it now."""

    id: str
    name: str
    location: str
    created_at: datetime
    dropped_at: datetime | None
    purged_at: datetime | None
    effective_watermark: datetime | None
    retention: timedelta

    @classmethod
    def of(cls, state: Catalog, inst: Instance, warehouse: str) -> TableInstance:
        mark = state.effective_watermark(inst)
        return cls(
            id=inst.id,
            name=inst.name,
            location=join_location(warehouse, inst.path),
            created_at=from_micros(inst.created_at),
            dropped_at=_dt(inst.dropped_at),
            purged_at=_dt(inst.purged_at),
            effective_watermark=_dt(mark),
            retention=timedelta(seconds=state.retention_seconds(inst)),
        )

    @property
    def database(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def is_live(self) -> bool:
        return self.dropped_at is None

    @property
    def state(self) -> str:
        """``live``, ``dropped`` (restorable), ``blocked`` (behind a watermark) or ``purged``."""
        if self.purged_at is not None:
            return "purged"
        if self.dropped_at is None:
            return "live"
        mark = self.effective_watermark
        return "blocked" if mark is not None and self.dropped_at <= mark else "dropped"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "state": self.state,
            "location": self.location,
            "created_at": iso_utc(self.created_at),
            "dropped_at": iso_utc(self.dropped_at),
            "purged_at": iso_utc(self.purged_at),
            "effective_watermark": iso_utc(self.effective_watermark),
            "retention_seconds": int(self.retention.total_seconds()),
        }


@attrs.frozen
class HistoryEntry:
    """One event of the log, for auditors."""

    seq: int
    time: datetime
    actor: str
    stream: str
    type: str
    data: dict[str, Any]

    @classmethod
    def of(cls, rec: Recorded) -> HistoryEntry:
        data = attrs.asdict(rec.event, recurse=False)
        if isinstance(data.get("to"), int):  # a watermark's time: microseconds in the log
            data["to"] = iso(data["to"])
        if "watermarks" in data:
            data["watermarks"] = {scope: iso(us) for scope, us in data["watermarks"].items()}
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        return cls(rec.seq, from_micros(rec.time), rec.actor, rec.stream, type_of(rec.event)[0], data)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "time": iso_utc(self.time), "actor": self.actor,
                "stream": self.stream, "type": self.type, "data": self.data}


def _dt(us: Micros | None) -> datetime | None:
    return None if us is None else from_micros(us)
