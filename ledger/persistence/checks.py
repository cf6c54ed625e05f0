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
from typing import Callable, Iterable, Mapping, NamedTuple

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
    since[snapshot.ARCHIVE] = since.get(snapshot.ARCHIVE, set()) | (
        since.get(snapshot.INSTANCES, set()) & folded.entries(snapshot.ARCHIVE).keys())  # a purge moves an instance there
    for part, written in stored.items():
        if not _holds(written, folded.entries(part)):
            return False
        since.setdefault(part, set()).difference_update(written.keys)
    # Changed by the fold but not written: each must read (from earlier in its chain) as the fold has it.
    entry = folded.entry
    try:
        for part, keys in since.items():
            wanted = list(keys)
            if wanted and any(value != entry(part, key) for key, value in _read(store, generation, part, wanted)):
                return False
    except (SnapshotGone, LedgerCorrupt):
        return False
    return True


class _Written(NamedTuple):
    """One part's rows of a generation: the keys, and each one's entry past its seal (None: the
    key deleted), in the same order."""
    keys: list[str]
    bodies: list[bytes | None]


def _by_part(rows: list[tuple[str, str, bytes | None]]) -> dict[str, _Written]:
    """A generation's own rows, by part, each entry past its seal. An entry is compared by its
    bytes, past its seal: one whose seal alone was damaged holds the truth, and a reader that
    finds the seal broken takes the part from the log. Kept as two lists a part and compared
    with the fold's entries looked up in C (``_holds``), not put in a dict of their own: building
    the dicts of a full generation (757,000 rows on the large state) cost 0.62 s of CPU, the lists
    0.18 s; what is left is reading the rows."""
    found: dict[str, _Written] = {}
    for part, group in itertools.groupby(rows, _PART):
        group_rows = list(group)
        written = found.setdefault(part, _Written([], []))
        written.keys.extend(map(_KEY, group_rows))
        written.bodies.extend([None if value is None else value[4:] for value in map(_VALUE, group_rows)])
    return found


_PART, _KEY, _VALUE = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


def _full_agrees(stored: dict[str, _Written], folded: snapshot.Folded) -> bool:
    """Whether a full generation's rows are exactly the fold's entries, part for part: each key
    once, none deleted (a full generation records no deletions), each as the fold has it, and as
    many as the fold has (so none missing)."""
    return all(None not in written.bodies and len(set(written.keys)) == len(written.keys)
               and _holds(written, folded.entries(part)) for part, written in stored.items()) and \
        sum(len(written.keys) for written in stored.values()) == folded.size()


def _holds(written: _Written, entries: Mapping[str, bytes]) -> bool:
    """Whether a generation's rows of one part hold the fold's entries for their keys (None: gone)."""
    return written.bodies == list(map(entries.get, written.keys))


def _read(store: Store, generation: Generation, part: str, keys: list[str]) -> Iterable[tuple[str, bytes | None]]:
    found = store.generation_part(generation, part).get_many(keys)
    return ((key, found.get(key)) for key in keys)


def discard(store: Store, compared: Compared) -> None:
    """Delete every stored generation if one disagreed with the log (``verify``, once the chain is proven)."""
    if compared.disagreed:
        store.delete_generations()
