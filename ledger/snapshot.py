"""Folded state to bytes and back, so opening a big ledger does not replay all of it.

A snapshot is a cache: it is trusted only if its format matches this release's
and the event it claims to end at is still in the log with the same time;
otherwise the ledger folds from the start and writes a fresh one. It is plain
JSON (not pickle), because auditors open ledgers they did not write, and
opening a file must never run code that the file brought with it.
"""

from __future__ import annotations

from typing import Any

import orjson
from immutables import Map

from .state import Catalog, Instance, VacuumRun

SNAPSHOT_FORMAT = 2


def dump(state: Catalog) -> bytes:
    return orjson.dumps({
        "seq": state.seq,
        "last_time": state.last_time,
        "versions": dict(state.versions),
        "instances": [
            (i.id, i.name, i.path, i.created_at, i.dropped_at, i.purged_at)
            for i in state.instances.values()
        ],
        "bindings": dict(state.bindings),
        "dropped": dict(state.dropped),
        "database_drops": dict(state.database_drops),
        "watermarks": dict(state.watermarks),
        "retentions": dict(state.retentions),
        "vacuums": [(v.run_id, v.started_at, v.table_ids) for v in state.vacuums.values()],
    })


def load(data: bytes) -> Catalog:
    raw: dict[str, Any] = orjson.loads(data)
    return Catalog(
        seq=raw["seq"],
        last_time=raw["last_time"],
        versions=Map(raw["versions"]),
        instances=Map({row[0]: Instance(*row) for row in raw["instances"]}),
        bindings=Map(raw["bindings"]),
        dropped=Map({name: tuple(ids) for name, ids in raw["dropped"].items()}),
        database_drops=Map({db: tuple(ids) for db, ids in raw["database_drops"].items()}),
        watermarks=Map(raw["watermarks"]),
        retentions=Map(raw["retentions"]),
        vacuums=Map({row[0]: VacuumRun(row[0], row[1], tuple(row[2])) for row in raw["vacuums"]}),
    )
