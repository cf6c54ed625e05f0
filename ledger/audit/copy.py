"""A ledger copied from one store to another, event for event, hashes unchanged (R18).

Moving a tenant from a SQLite file to a PostgreSQL database (or back, or to a new server) must
not cost its evidence: every event keeps its seq, time, actor and hash, so a checkpoint taken
before the copy verifies against the copy (``verify(against=...)``) exactly as against the
original. The destination checks each copied row's chain as it goes in (``copy_in``), so a
source edited since its last ``verify`` is refused, not copied. Attachments (file lists) and
the warehouse root go with the events; snapshots are caches and are rebuilt on first open.
"""

from __future__ import annotations

from pathlib import Path

import attrs
from vacuum_work.where import is_uri

from ..core.events import Row
from ..errors import InvalidArgument, WarehouseMismatch
from ..persistence.contract import Store

BATCH = 20_000
"""Events per transaction of the destination: a copy interrupted between two leaves a prefix
of the log, which a checkpoint still proves (``verify``) and a second copy refuses to extend."""


@attrs.frozen
class CopyReport:
    source: str
    destination: str
    events: int
    attachments: int
    head: str | None
    """The hash of the last event copied: the same in both ledgers."""
    warehouse: str


def copy_ledger(source: Store, destination: Store) -> CopyReport:
    """Copy every event and attachment of ``source`` into ``destination``, which must hold no events."""
    held = destination.count()
    if held:
        raise InvalidArgument(f"{destination.path} already holds {held} events; a ledger is copied only into an "
                              "empty one (give a new file, database or schema)")
    root = _root(source)
    recorded = destination.set_meta_once("warehouse", root)
    if recorded != root:
        raise WarehouseMismatch(f"{destination.path} keeps its tables under {recorded}, not {root} (the source's); "
                                "copy into a new ledger")
    digests = source.blob_digests()
    for start in range(0, len(digests), 1000):
        chunk = {d: data for d in digests[start:start + 1000] if (data := source.read_blob(d)) is not None}
        destination.copy_in([], chunk)
    events, head = 0, None
    batch: list[Row] = []
    for row in source.read(0, with_hash=True):
        batch.append(row)
        if len(batch) == BATCH:
            # Each batch goes on after exactly what this copy put there: a copy racing this one into
            # the same destination is refused, whichever batch it meets.
            destination.copy_in(batch, {}, after=(events, head))
            events, head, batch = events + len(batch), batch[-1][8], []
    if batch:
        destination.copy_in(batch, {}, after=(events, head))
        events, head = events + len(batch), batch[-1][8]
    return CopyReport(source.path, destination.path, events, len(digests), head, root)


def _root(source: Store) -> str:
    """The source's warehouse root as an absolute location: a SQLite ledger made without one
    records ``warehouse`` (beside its file), which means nothing in another store."""
    root = source.get_meta("warehouse")
    if root is None:
        raise InvalidArgument(f"{source.path} records no warehouse root; open it once with Ledger.open, then copy")
    if is_uri(root) or Path(root).is_absolute():
        return root
    return str(Path(source.path).resolve().parent / root)
