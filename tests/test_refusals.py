"""Every refused command raises a typed error from ledger.errors and appends nothing."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ledger import (
    DatabaseNotFound, InvalidName, InvalidRetention, InvalidScope, InvalidTime, Ledger,
    LedgerError, ManualClock, TableExists, TableNotFound, UndropBlocked,
)
from tests.conftest import T0


@pytest.fixture
def busy(ledger: Ledger, clock: ManualClock) -> Ledger:
    """A ledger with one live table, one restorable drop, one blocked drop, one purged."""
    ledger.create_table("sales.live")
    for name in ("sales.purged", "sales.blocked"):
        ledger.create_table(name)
        ledger.drop_table(name)
    clock.advance(60)
    blocked = ledger.dropped_tables(name="sales.blocked")[0]
    ledger.advance_watermark(blocked.dropped_at)
    ledger.record_purge(ledger.dropped_tables(name="sales.purged")[0].id, run_id="r", files=0, bytes=0)
    ledger.create_table("sales.restorable")
    ledger.drop_table("sales.restorable")
    return ledger


REFUSALS = [
    ("create bound name", lambda L: L.create_table("sales.live"), TableExists),
    ("create bad name", lambda L: L.create_table("sales"), InvalidName),
    ("create too long", lambda L: L.create_table("sales." + "x" * 65), InvalidName),
    ("create non-ascii", lambda L: L.create_table("sales.bestellungen_ä"), InvalidName),
    ("create leading digit", lambda L: L.create_table("sales.1st"), InvalidName),
    ("create not a string", lambda L: L.create_table(42), InvalidName),
    ("drop unknown", lambda L: L.drop_table("sales.nope"), TableNotFound),
    ("drop dropped", lambda L: L.drop_table("sales.restorable"), TableNotFound),
    ("undrop live", lambda L: L.undrop_table("sales.live"), TableNotFound),
    ("undrop live by id", lambda L: L.undrop_table("sales.live", table_id=L.table("sales.live").id), TableExists),
    ("undrop unknown", lambda L: L.undrop_table("sales.nope"), TableNotFound),
    ("undrop unknown id", lambda L: L.undrop_table("sales.nope", table_id="0" * 16), TableNotFound),
    ("undrop malformed id", lambda L: L.undrop_table("sales.restorable", table_id="xyz"), InvalidName),
    ("undrop blocked", lambda L: L.undrop_table("sales.blocked"), UndropBlocked),
    ("undrop purged", lambda L: L.undrop_table("sales.purged"), UndropBlocked),
    ("undrop onto bound", lambda L: L.undrop_table("sales.restorable", new_name="sales.live"), TableExists),
    ("undrop bad new name", lambda L: L.undrop_table("sales.restorable", new_name="no dots"), InvalidName),
    ("drop empty database", lambda L: L.drop_database("nothing"), DatabaseNotFound),
    ("drop bad database", lambda L: L.drop_database("bad-name"), InvalidName),
    ("undrop never dropped database", lambda L: L.undrop_database("sales"), DatabaseNotFound),
    ("watermark naive", lambda L: L.advance_watermark(datetime(2026, 1, 1)), InvalidTime),
    ("watermark future", lambda L: L.advance_watermark(L.now() + timedelta(seconds=1)), InvalidTime),
    ("watermark not a time", lambda L: L.advance_watermark("2026-01-01"), InvalidTime),
    ("watermark unknown scope", lambda L: L.advance_watermark(T0, scope="tenant:x"), InvalidScope),
    ("watermark unknown table", lambda L: L.advance_watermark(T0, scope="table:" + "0" * 16), TableNotFound),
    ("retention negative", lambda L: L.set_retention("ledger", timedelta(hours=-1)), InvalidRetention),
    ("retention below floor", lambda L: L.set_retention("ledger", "1h"), InvalidRetention),
    ("retention malformed", lambda L: L.set_retention("ledger", "seven days"), InvalidRetention),
    ("retention bad scope", lambda L: L.set_retention("database:", "7d"), InvalidScope),
]


@pytest.mark.parametrize("what, attempt, error", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused_command_raises_typed_error_and_appends_nothing(busy: Ledger, what, attempt, error) -> None:
    before = busy.event_count()
    state = busy.state
    with pytest.raises(error) as refused:
        attempt(busy)
    assert isinstance(refused.value, LedgerError)
    assert str(refused.value)  # a message a user can act on, never empty
    assert busy.event_count() == before
    assert busy.state == state


def test_retention_floor_can_be_overridden_explicitly(busy: Ledger) -> None:
    assert busy.set_retention("database:sales", "1h", override_floor=True) == timedelta(hours=1)
    assert busy.retention("database:sales") == timedelta(hours=1)
