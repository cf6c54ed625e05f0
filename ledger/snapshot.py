"""Folded state to bytes and back, so opening a big ledger does not replay all of it.

A snapshot is a cache: it is trusted only if its format matches this release's
and the event it claims to end at is still in the log with the same time;
otherwise the ledger folds from the start and writes a fresh one. It is plain
JSON (not pickle), because auditors open ledgers they did not write, and
opening a file must never run code that the file brought with it.

Layout: two JSON documents separated by a newline (JSON text never holds a
raw one). The first is everything a command needs; the second holds the
details of purged instances, which ``state.Archive`` parses only on demand.
"""

from __future__ import annotations

from typing import Any

import orjson
from immutables import Map

from .state import Archive, Catalog, Instance, VacuumRun, gc_paused

SNAPSHOT_FORMAT = 4


def dump(state: Catalog) -> bytes:
    active, purged = [], {}
    for i in state.all_instances():
        if i.purged_at is None:
            active.append((i.id, i.name, i.path, i.created_at, i.dropped_at))
        else:
            purged[i.id] = (i.name, i.path, i.created_at, i.dropped_at, i.purged_at)
    head = orjson.dumps({
        "seq": state.seq,
        "last_time": state.last_time,
        "versions": dict(state.versions),
        "instances": active,
        "archived_ids": list(purged),
        "bindings": dict(state.bindings),
        "dropped": dict(state.dropped),
        "database_drops": dict(state.database_drops),
        "watermarks": dict(state.watermarks),
        "retentions": dict(state.retentions),
        "vacuums": [(v.run_id, v.started_at, v.table_ids, v.taken_over) for v in state.vacuums.values()],
    })
    return head + b"\n" + orjson.dumps(purged)


def load(data: bytes) -> Catalog:
    with gc_paused():  # like a replay: many small objects, no cycles
        return _load(data)


def _load(data: bytes) -> Catalog:
    head, _, archived = data.partition(b"\n")
    raw: dict[str, Any] = orjson.loads(head)
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
        vacuums=Map({row[0]: VacuumRun(row[0], row[1], tuple(row[2]), row[3]) for row in raw["vacuums"]}),
        archive=Archive(frozenset(raw["archived_ids"]), archived) if raw["archived_ids"] else Archive(),
    )
