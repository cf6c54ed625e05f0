"""What every record of a vacuum names alike: the kinds' names, a run's id, where a path is, a time.

Standard library only (R19), as the whole of ``vacuum_work``."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone

PURGE, EXPIRE, TRIM, SWEEP, STRAGGLERS, FOREIGN = "purge", "expire", "trim", "sweep", "stragglers", "foreign"


def new_run_id() -> str:
    """A run id no other run has: the UTC start time, then 8 random hex digits. A caller that must
    release a run's lease if it is stopped (a Ctrl-C handler) chooses the id before the start."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def location(root: str, path: str) -> str:
    """``path`` (relative, with ``/``) made absolute under ``root`` (a folder or a URI)."""
    return root.rstrip("/") + "/" + path


def iso(us: int | None) -> str | None:
    """Microseconds since the epoch as a report shows a time: ISO 8601 UTC with a Z, microsecond
    precision: the one format users see (the ledger's ``clock.iso`` is this)."""
    if us is None:
        return None
    return datetime.fromtimestamp(us // 1_000_000, timezone.utc).replace(microsecond=us % 1_000_000) \
        .strftime("%Y-%m-%dT%H:%M:%S.%fZ")
