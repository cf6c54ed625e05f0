"""Who did what: the log's events, filtered, in words, streamed rather than loaded whole.

Filters narrow the rows the store reads (by sequence range for a time window, by actor
and type, and by a text search of payloads for table ids) and are then confirmed on
the decoded event, so a long log is never held in memory. A table is found by id, or
by name across renames: every instance that ever bore the name, from its creation on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, Iterator

from ..clock import to_micros
from ..core.events import Recorded, Row, decode, registered
from ..core.pins import PinReleased, PinRenewed, PinTaken
from ..errors import InvalidArgument, InvalidTime, TableNotFound
from ..names import table_id as valid_table_id, table_name
from ..runner import Runner
from ..views import History, HistoryEntry, concerned
from .erasures import statement_of
from .words import describe


PIN_EVENTS = frozenset(name for name, cls in registered().items() if cls in (PinTaken, PinRenewed, PinReleased))
"""The events of pins (R21), which history leaves out unless asked: every ``read_table`` and
``attach`` pins what it reads, so they would crowd out what was done to the tables (6 of the 10
latest events of a table read by name)."""


def history(runner: Runner, name: str | None = None, *, table_id: str | None = None,
            actor: str | None = None, since: datetime | None = None, until: datetime | None = None,
            type: str | Iterable[str] | None = None, pins: bool = False) -> History:
    """The events that match every filter given, oldest first (``since`` and ``until`` inclusive),
    pins' events only with ``pins=True`` or when ``type`` names them.

    Arguments are checked now, before the first entry is asked for: a bad one is a typed
    error from this call, not from the loop that reads it.
    """
    store = runner.store
    state = runner.state
    if not isinstance(pins, bool):
        raise InvalidArgument(f"pins must be True or False, got {pins!r}")
    types = _types(type, pins)
    if actor is not None and (not isinstance(actor, str) or not actor):
        raise InvalidArgument(f"actor must be non-empty text such as 'alice@etl-3', got {actor!r}")
    first, last = _window(runner, since, until)
    ids: set[str] | None = None
    if table_id is not None:
        key = valid_table_id(table_id)
        if not state.tables.has_id(key):
            raise TableNotFound(f"no table with id {key} has ever existed in this ledger")
        ids = {key}
    if name is not None:
        named = _ids_named(runner, table_name(name), last)
        if not named and ids is None:
            raise TableNotFound(f"no table {table_name(name)} has ever existed in this ledger")
        ids = named if ids is None else ids & named
    containing = None if ids is None else sorted(ids)

    def matching() -> Iterator[tuple[Row, Recorded]]:
        for row in store.read(first, upto=last, actor=actor, types=types, containing=containing):
            rec = decode(*row[:8])
            if ids is None or _concerns(rec, ids):
                yield row, rec

    def name_of(id_: str) -> str | None:
        inst = state.tables.instance(id_)
        return None if inst is None else inst.name

    def said(type_name: str, rec: Recorded) -> str:
        """In words; an erasure request open still says what it names (R25: only until it is done)."""
        text = describe(type_name, rec.actor, rec.event, name_of)
        r = state.erasures.requests.get(rec.event.request_id) if type_name == "ErasureRequested" else None
        body = None if r is None else statement_of(store, r)
        if body is not None:
            named = f"the rows {body['predicate']!r}" if "predicate" in body else \
                f"the keys {', '.join(map(str, body['keys'][:20]))}{' ...' if len(body['keys']) > 20 else ''}"
            text += f"; it names {named} (kept until it is done)"
        return text

    def entries() -> Iterator[HistoryEntry]:
        for row, rec in matching():
            yield HistoryEntry.of(rec, said(row[3], rec))

    def count() -> int:
        if ids is None:  # every row the store's filters let through matches: no need to decode them
            return sum(1 for _ in store.read(first, upto=last, actor=actor, types=types))
        return sum(1 for _ in matching())

    return History(entries, count)


def _types(type_: str | Iterable[str] | None, pins: bool) -> list[str] | None:
    """The event types to read (None: all of them)."""
    if type_ is None:
        return None if pins else sorted(set(registered()) - PIN_EVENTS)
    wanted = [type_] if isinstance(type_, str) else list(type_)
    known = registered()
    unknown = [t for t in wanted if t not in known]
    if unknown or not wanted:
        raise InvalidArgument(f"unknown event type(s) {', '.join(map(repr, unknown)) or '(none given)'}; "
                              f"known: {', '.join(sorted(known))}")
    return wanted


def _window(runner: Runner, since: datetime | None, until: datetime | None) -> tuple[int, int]:
    """The sequence range ``(after, upto]`` of events timed within ``[since, until]``."""
    store = runner.store
    for label, value in (("since", since), ("until", until)):
        if value is not None and not isinstance(value, datetime):
            raise InvalidTime(f"{label} must be an aware datetime, got {type(value).__name__} {value!r}")
    start = None if since is None else to_micros(since)
    end = None if until is None else to_micros(until)
    if start is not None and end is not None and end < start:
        raise InvalidTime(f"until ({until}) is before since ({since})")
    after = 0 if start is None else store.seq_at(start - 1)
    upto = store.head()[0] if end is None else store.seq_at(end)
    return after, upto


def _ids_named(runner: Runner, key: str, upto: int) -> set[str]:
    """Every instance that ever bore ``key`` (events that give a name carry it in their payload)."""
    found = set()
    for row in runner.store.read(0, upto=upto, containing=[key]):
        event = decode(*row[:8]).event
        if getattr(event, "name", None) == key and hasattr(event, "table_id"):
            found.add(event.table_id)
    return found


def _concerns(rec: Recorded, ids: set[str]) -> bool:
    return not concerned(rec.event).isdisjoint(ids)
