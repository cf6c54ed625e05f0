"""retention-ledger: an event-sourced ledger of what a data pipeline destroys.

    >>> from ledger import Ledger
    >>> with Ledger.open(":memory:") as led:
    ...     t = led.create_table("sales.orders")
    ...     _ = led.drop_table("sales.orders")
    ...     led.undrop_table("sales.orders").id == t.id
    True

The public names are importable from here; ``ledger.core`` holds the pure core
(events, folded state, decisions), ``ledger.persistence`` how state is kept (the store
contract, the SQLite backend, the state cache and its snapshots), ``ledger.runner`` the
command loop that joins them.
"""

from .api import Ledger, Pin, copy_ledger
from .audit.copy import CopyReport
from .audit import Checkpoint, InclusionProof, VerifyReport
from .audit.receipts import DeletionProof, DeletionProofs, NotDeletedKey, Receipt
from .catalog import AsOf
from .clock import ManualClock
from .errors import (
    CheckpointInvalid, ClockSkew, Conflict, DatabaseChanged, DatabaseNotFound, IncompatibleLedger, InvalidArgument,
    InvalidName, InvalidRetention, InvalidScope, InvalidTime, LedgerCorrupt, LedgerError, LedgerNotFound,
    LedgerUnavailable, NotDeleted, PinEnded, PinRefused, PurgeRefused, SchemaMismatch, TableDataMissing, TableExists, TableNotFound, UndropBlocked,
    VersionExpired, VersionNotFound, WarehouseMismatch, WriteClosed, WriteExpired,
)
from .names import LEDGER, Scope
from .runner import Prepared
from .vacuum_run import VacuumRun
from .views import Change, History, HistoryEntry, PinView, TableInstance

__all__ = [
    "Ledger", "Prepared", "VerifyReport", "ManualClock", "Scope", "LEDGER", "TableInstance", "ClockSkew",
    "History", "HistoryEntry", "VacuumRun", "LedgerError", "TableNotFound", "DatabaseNotFound",
    "DatabaseChanged", "TableExists", "UndropBlocked", "Conflict", "InvalidArgument", "InvalidName",
    "InvalidRetention", "InvalidScope", "InvalidTime", "LedgerCorrupt", "LedgerNotFound",
    "IncompatibleLedger", "LedgerUnavailable", "PurgeRefused", "WarehouseMismatch", "VersionNotFound",
    "VersionExpired", "SchemaMismatch", "WriteClosed", "WriteExpired", "TableDataMissing", "CheckpointInvalid", "Checkpoint",
    "InclusionProof", "AsOf", "copy_ledger", "CopyReport", "PinRefused", "PinEnded", "PinView", "Pin", "Change",
    "NotDeleted", "Receipt", "DeletionProof", "DeletionProofs", "NotDeletedKey",
]
