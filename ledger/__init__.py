"""retention-ledger: an event-sourced ledger of table drops, undrops and vacuum watermarks.

    >>> from ledger import Ledger
    >>> with Ledger.open(":memory:") as led:
    ...     t = led.create_table("sales.orders")
    ...     _ = led.drop_table("sales.orders")
    ...     led.undrop_table("sales.orders").id == t.id
    True
"""

from . import plan as _plan  # registers the vacuum commands with decide()
from .api import Ledger, Prepared, VerifyReport
from .clock import ManualClock
from .errors import (
    Conflict, DatabaseNotFound, IncompatibleLedger, InvalidArgument, InvalidName, InvalidRetention, InvalidScope,
    InvalidTime, LedgerCorrupt, LedgerError, LedgerUnavailable, PurgeRefused, TableExists,
    TableNotFound, UndropBlocked,
)
from .names import LEDGER, Scope
from .views import HistoryEntry, TableInstance

__all__ = [
    "Ledger", "Prepared", "VerifyReport", "ManualClock", "Scope", "LEDGER", "TableInstance",
    "HistoryEntry", "LedgerError", "TableNotFound", "DatabaseNotFound", "TableExists",
    "UndropBlocked", "Conflict", "InvalidArgument", "InvalidName", "InvalidRetention", "InvalidScope", "InvalidTime",
    "LedgerCorrupt", "IncompatibleLedger", "LedgerUnavailable", "PurgeRefused",
]
