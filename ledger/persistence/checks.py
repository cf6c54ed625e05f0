"""The stored states compared with a fold of the log: what ``verify`` asks of them (R16).

Plain functions over a store. ``verify`` hands ``fold_and_compare`` the log's rows (already
going past its chain check) and gets back the fold from nothing and what disagreed; the
stored form stays in this package. The fold stops at every stored generation and compares it
with the fold there, by its bytes (``snapshot.Folded`` makes the same bytes the writers do): a
full generation entry for entry; a delta by the keys it wrote and the keys the fold changed
since the generation before it in its chain, which proves the rest by induction along the chain
(a key in neither was equal there, and nothing changed it). So comparing them all costs what
changed between them. A stored state that disagrees is a cache that lied: ``discard`` deletes
every generation (a delta leans on those before it) once the chain is proven, to be written
again (the log is the truth).
"""

from __future__ import annotations

import itertools
import operator
from collections import defaultdict
from typing import Callable, Iterable, Mapping

import attrs

from ..core.model import State
from ..errors import LedgerCorrupt
from . import collector, snapshot
from .contract import Generation, Row, SnapshotGone, Store

Rows = Callable[[int, int], Iterable[Row]]
"""``rows(after, upto)``: the log's rows ``after < seq <= upto``, as ``verify`` has them checked."""
Keys = dict[str, set[str]]
"""Keys by part (``"slice.field"``, or ``snapshot.STREAMS``)."""


@attrs.define
class Compared:
    """A fold of the whole log, and how the stored generations compared with it."""
    fresh: State
    agreed: set[int] = attrs.Factory(set)
    """The generations (numbers) that hold the fold at their event."""
    disagreed: list[Generation] = attrs.Factory(list)
    """Those that do not (or cannot be read): ``discard`` deletes every generation then."""


def fold_and_compare(store: Store, rows: Rows, head: int) -> Compared:
    """Fold the log from nothing up to ``head`` (its rows through ``rows``), stopping at each stored
    generation to compare it with the fold there. Generations stored after ``head`` (while this
    ran) are left to the next ``verify``."""
    generations = [g for g in store.generations() if g.seq <= head]
    last_of_chain = {g.base: g.gen for g in generations}
    pending: dict[int, Keys] = {}
    """For each chain with a generation still to compare: the keys the fold changed since its last."""
    compared, folded = Compared(State()), snapshot.Folded()
    with collector.paused():
        fresh = State()
        for fresh, changed in folded.stops(State(), rows, sorted({g.seq for g in generations} | {head})):
            for keys in pending.values():
                for part, found in changed.items():
                    keys.setdefault(part, set()).update(found)
            for generation in (g for g in generations if g.seq == fresh.seq):
                since = pending.pop(generation.base, None)
                agrees = _agrees(store, generation, fresh, folded, since)
                if agrees:
                    compared.agreed.add(generation.gen)
                else:
                    compared.disagreed.append(generation)
                if last_of_chain[generation.base] != generation.gen:
                    pending[generation.base] = defaultdict(set)
        compared.fresh = fresh
    return compared


def _agrees(store: Store, generation: Generation, fresh: State, folded: snapshot.Folded, since: Keys | None) -> bool:
    """Whether ``generation`` holds ``fresh`` (a fold of the log to its event, which ``folded`` is
    at). ``since``: for a delta, the keys the fold changed since the generation before it in its
    chain (None: it is the first of its chain, or the one before it was not compared). An entry is
    compared by its bytes, past its seal: one whose seal alone was damaged holds the truth, and a
    reader that finds the seal broken takes the part from the log."""
    if folded.head(fresh, store.hash_at(fresh.seq)) != generation.head:
        return False
    full = generation.gen == generation.base
    if not full and since is None:
        return False  # a delta on nothing this fold met: nothing proves what it leans on
    try:
        stored = _by_part(store.generation_entries(generation))
    except SnapshotGone:
        return False
    if full:
        return _full_agrees(stored, folded)
    assert since is not None
    entry = folded.entry
    purged = {key for key in since.get(snapshot.INSTANCES, ()) if entry(snapshot.ARCHIVE, key) is not None}
    since.setdefault(snapshot.ARCHIVE, set()).update(purged)  # a purge moves an instance to the archive
    for part, written in stored.items():
        if not _delta_holds(written, folded.entries(part)):
            return False
        since.setdefault(part, set()).difference_update(written)
    # Changed by the fold but not written: each must read (from earlier in its chain) as the fold has it.
    try:
        for part, keys in since.items():
            wanted = list(keys)
            if wanted and any(value != entry(part, key) for key, value in _read(store, generation, part, wanted)):
                return False
    except (SnapshotGone, LedgerCorrupt):
        return False
    return True


def _by_part(rows: list[tuple[str, str, bytes | None]]) -> dict[str, dict[str, bytes | None]]:
    """A generation's own rows, by part, each entry past its seal (None: a key deleted). An entry
    is compared by its bytes, past its seal: one whose seal alone was damaged holds the truth, and
    a reader that finds the seal broken takes the part from the log. Compared a part at a time (a
    dict's equality, in C), not entry by entry in Python: comparing the generations of a million
    events went from 1.89 to 1.64 chain floors (issue 48, a loaded machine); what is left is
    reading their 2.8 million rows."""
    found: dict[str, dict[str, bytes | None]] = {}
    for part, group in itertools.groupby(rows, _PART):
        found.setdefault(part, {}).update((key, _body(value)) for _, key, value in group)
    return found


_PART = operator.itemgetter(0)


def _body(value: bytes | None) -> bytes | None:
    """A stored value past its seal (``contract.seal``: four bytes before the entry's); None stays None."""
    return None if value is None else value[4:]


def _full_agrees(stored: dict[str, dict[str, bytes | None]], folded: snapshot.Folded) -> bool:
    """Whether a full generation's rows are exactly the fold's entries, part for part (a full
    generation records no deletions: a None among its rows is a disagreement)."""
    return all(written == folded.entries(part) for part, written in stored.items()) and \
        sum(map(len, stored.values())) == folded.size()


def _delta_holds(written: dict[str, bytes | None], entries: Mapping[str, bytes]) -> bool:
    """Whether a delta's rows of one part hold the fold's entries for their keys (None: gone)."""
    get = entries.get
    return written == {key: get(key) for key in written}


def _read(store: Store, generation: Generation, part: str, keys: list[str]) -> Iterable[tuple[str, bytes | None]]:
    found = store.generation_part(generation, part).get_many(keys)
    return ((key, found.get(key)) for key in keys)


def discard(store: Store, compared: Compared) -> None:
    """Delete every stored generation if one disagreed with the log (``verify``, once the chain is proven)."""
    if compared.disagreed:
        store.delete_generations()
