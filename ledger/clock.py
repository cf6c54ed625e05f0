"""Time: aware UTC datetimes at the edge, integer microseconds inside.

The fold runs over millions of events, and integers are cheap to store, compare
and build; datetimes are made only when a caller asks to see a time. Naive
datetimes are refused everywhere: a time without a zone is a guess, and the
guard compares times to the microsecond.
"""

from __future__ import annotations

import re
import reprlib
import threading
import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Annotated, Callable

import msgspec
from vacuum_work.names import iso as iso  # the one format users see, shared with the vacuum's reports

from .errors import InvalidRetention, InvalidTime, LedgerError

MIN_MICROS = -62_135_596_800_000_000
"""0001-01-01T00:00:00Z, the first instant a ``datetime`` can show."""
MAX_MICROS = 253_402_300_799_999_999
"""9999-12-31T23:59:59.999999Z, the last instant a ``datetime`` can show: a time the ledger
would record past it (a lease from a clock near the end of time) is refused before it is
written, or every later read of it would fail."""

Micros = Annotated[int, msgspec.Meta(ge=MIN_MICROS, le=MAX_MICROS)]
"""Microseconds since 1970-01-01T00:00:00Z. An event's time field is decoded against this
range (``core.events``): a stored time no ``datetime`` can show is a corrupt event, named when it
is read, never an ``OverflowError`` in whoever shows it later."""

LONGEST_SECONDS = 100 * 366 * 86_400
"""A retention or lease past a century is a typo, not a policy (``parse_duration``)."""

Seconds = Annotated[int, msgspec.Meta(ge=0, le=LONGEST_SECONDS)]
"""A duration an event records (a retention, a lease), in whole seconds: decoded against this
range, as a time is, so that a time computed from it can always be shown."""

Clock = Callable[[], datetime]
"""Any zero-argument callable returning an aware UTC datetime."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def system_clock() -> datetime:
    return datetime.now(timezone.utc)


def to_micros(value: datetime) -> Micros:
    """Convert an aware datetime to microseconds; refuse naive ones."""
    if not isinstance(value, datetime):
        raise InvalidTime(f"expected a timezone-aware datetime, got {type(value).__name__} {value!r}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise InvalidTime(
            f"naive datetime {value.isoformat()} has no timezone; "
            "pass an aware one, e.g. datetime(..., tzinfo=timezone.utc)"
        )
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(us: Micros) -> datetime:
    """The aware UTC datetime of ``us``. The microseconds are passed by position: by keyword,
    ``timedelta`` cost 30% more (every command that returns a time makes one)."""
    return _EPOCH + timedelta(0, 0, us)


def iso_utc(value: datetime | None) -> str | None:
    """The same ISO 8601 UTC text for an aware datetime (what callers hold)."""
    return None if value is None else iso(to_micros(value))


def parse_time(text: str) -> datetime:
    """Parse an ISO 8601 time given on the command line; it must carry a zone."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidTime(f"{text!r} is not an ISO 8601 time like 2026-01-31T12:00:00Z") from None
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise InvalidTime(f"naive datetime {value.isoformat()} has no timezone: add Z for UTC "
                          f"({value.isoformat()}Z) or an offset such as +02:00")
    return value.astimezone(timezone.utc)


def read_clock(clock: Clock) -> Micros:
    """Ask an injected clock for now, and insist it answers with an aware time.

    The system clock is read without a datetime: ``system_clock`` floors the same system time to
    whole microseconds, and going through it cost 8,300 instructions against 1,500 (callgrind),
    on every command."""
    if clock is system_clock:
        return time.time_ns() // 1000
    value = clock()
    try:
        return to_micros(value)
    except InvalidTime as exc:
        raise InvalidTime(f"the ledger's clock returned a bad time: {exc}") from None


class ManualClock:
    """A clock that moves only when told to: for tests and for replaying a scenario."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = to_micros(start or datetime(2026, 1, 1, tzinfo=timezone.utc))
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return from_micros(self._now)

    def advance(self, delta: timedelta | float) -> datetime:
        """Move forward (or back, with a negative delta) by a timedelta or seconds."""
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        with self._lock:
            self._now += delta // timedelta(microseconds=1)
            return from_micros(self._now)

    def set(self, value: datetime) -> None:
        with self._lock:
            self._now = to_micros(value)


_DURATION = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(w|d|h|m|s)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}


def parse_duration(value: str | timedelta | int | float, what: str = "retention",
                   error: type[LedgerError] = InvalidRetention) -> timedelta:
    """Accept a timedelta, a number of seconds, or text with a unit such as ``7d``, ``36h``, ``90m``.

    Negative durations are refused here; the floor is checked by the caller
    because only it knows whether the floor was overridden. ``what`` names the duration in
    messages and ``error`` is what a bad one raises (a lease is not a retention).
    Every duration argument comes through here, so a whole number no float holds (``10**400``)
    is compared as the integer it is, and refused like any other, never an ``OverflowError``.
    """
    seconds = _seconds(value, what, error)
    if seconds != seconds:  # NaN: neither more nor less than anything
        raise error(f"{what} {_shown(value)} is not a finite duration")
    if seconds < 0:
        raise error(f"{what} {_shown(value)} is negative; it must be zero or more")
    if seconds > LONGEST_SECONDS:
        raise error(f"{what} {_shown(value)} is longer than a century; use e.g. 365d")
    return timedelta(seconds=seconds)


def _seconds(value: object, what: str, error: type[LedgerError]) -> int | float:
    """How many seconds ``value`` says, unchecked: an ``int`` stays one, however large."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool):
        raise error(f"{what} must be a duration, got {value!r}")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise error(f"{what} {_shown(value)} is not a duration; use a number with a unit, e.g. 7d, 36h, 90m, "
                        "3600s")
        amount, unit = match.groups()
        if unit is None and float(amount) != 0:  # "7" could mean seconds or days: never guess
            raise error(f"{what} {_shown(value)} has no unit; write e.g. {amount}d, {amount}h, {amount}m or "
                        f"{amount}s")
        return float(amount) * _UNIT_SECONDS[(unit or "s").lower()]  # past any float: inf, longer than a century
    raise error(f"{what} must be a duration such as '7d', got {type(value).__name__}")


def _shown(value: object) -> str:
    """A value as a message shows it: short, whatever its size (``10**400`` as ``1.000e+400``)."""
    if isinstance(value, int) and abs(value) > 10 ** 20:
        return f"{Decimal(value):.3e}"
    return reprlib.repr(value) if isinstance(value, str) else repr(value)


def format_duration(seconds: int) -> str:
    for unit in ("d", "h", "m"):  # days, not weeks: retention is spoken of in days
        size = _UNIT_SECONDS[unit]
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
