"""The shape every concern shares: decisions, slices of state, and how a concern is declared.

A *concern* (table lifecycle, watermarks and retention, vacuum runs, ...) owns
its events, its slice of the folded state, the fold handlers that change that
slice, its commands and the decisions that answer them. It is a value, in the
manner of the Decider pattern: ``Concern(initial, evolve, decide)``. The
composition module (``model``) gives each concern a field of ``State`` and joins
their handlers and deciders; nothing else registers anything anywhere.

Rules of the game, which keep the fold cheap and the concerns honest:

* A handler writes only its own concern's slice. It may read any slice.
* A decider reads the whole ``State`` and returns a ``Decision``. It may emit
  another concern's events (a vacuum advances watermarks) but only through that
  concern's own functions, so each rule is checked in one place.
* A slice is a frozen attrs class whose fields are persistent maps declared with
  ``mapping(...)``; its field list is the only description of its shape: the fold's
  mutable views, equality, and (outside the core) its stored form are all derived from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

import attrs
from immutables import Map

from ..clock import Micros
from ..errors import LedgerCorrupt

if TYPE_CHECKING:
    from .fold import Builder

EMPTY: Map[str, Any] = Map()

Json = Any
"""A value as JSON keeps it (text, a whole number): what a ``mapping()`` field declared with no
``values`` holds when its keys hold values of different types (``Warehouse.moves``: a root, a time)."""


@attrs.frozen(slots=False)
class Decision:
    """Events to append as ``(stream, event)``, the streams read, and what to tell the caller.

    The ledger appends only if every stream in ``reads`` is still at the version the
    deciding state saw (R4): a verdict is never acted on after the facts behind it changed.
    Without slots (still frozen) it is built in 3,800 instructions against 7,300: every command
    builds one (callgrind).
    """

    events: tuple[tuple[str, Any], ...] = ()
    reads: frozenset[str] = frozenset()
    result: Any = None
    attachments: tuple[tuple[str, bytes], ...] = ()
    """Content-addressed bytes the events name by digest (a write's file list), stored with them."""


Handler = Callable[["Builder", Any, int, Micros], None]
"""``(builder, event, seq, time)``: apply one event to the builder's mutable slices."""

Decider = Callable[[Any, Any], Decision]
"""``(state, command) -> Decision``; raises a ``LedgerError`` to refuse."""


@attrs.frozen
class Concern:
    initial: Any
    """The empty slice: the state of this concern before any event."""
    evolve: Mapping[type, Handler]
    decide: Mapping[type, Decider]


# --- slice fields -------------------------------------------------------------------------

def mapping(values: type | None = None) -> Any:
    """Declare a slice field: a persistent map of text keys, empty at first. ``values`` says what
    its values are: None for plain JSON values (text, integers), ``tuple`` for tuples of ids,
    or a frozen attrs class. The declaration is all a stored snapshot needs to keep the field
    (``persistence.codecs`` derives its form from it).

    Annotate the field ``Mapping[str, V]``: a frozen state's map is read-only (an ``immutables.Map``
    or a ``maps.OverlayMap``); only the fold's handlers change one, through ``fold.Thawed`` views."""
    return attrs.field(default=EMPTY, metadata={"values": values})


# --- the fold's refusals --------------------------------------------------------------------

def corrupt(message: str) -> LedgerCorrupt:
    """Every inconsistency the fold finds means the file was damaged or edited by hand."""
    return LedgerCorrupt(f"{message}; restore the ledger file from a backup")
