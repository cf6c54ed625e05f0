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

from .api import MAX_PIN_LEASE, ErasureFence, Ledger, Pin, copy_ledger
from .audit.copy import CopyReport
from .audit import Checkpoint, InclusionProof, VerifyReport, generate_key
from .audit.history import PIN_EVENTS
from .audit.outputs import ledger_files, target as output_target
from .audit.erasures import ErasureFile, ErasureProof, ErasureStatus
from .audit.receipts import DeletionProof, DeletionProofs, NotDeletedKey, Receipt
from .catalog import AsOf, Catalog
from .clock import ManualClock, format_duration, from_micros, iso_utc, parse_duration, parse_time
from .errors import (
    CheckpointInvalid, ClockSkew, Conflict, DatabaseChanged, ErasureInProgress, ExtraMissing, DatabaseNotFound, IncompatibleLedger, InvalidArgument,
    InvalidName, InvalidRetention, InvalidScope, InvalidTime, LedgerCorrupt, LedgerError, LedgerNotFound,
    LedgerUnavailable, NotDeleted, OutcomeUnknown, PinEnded, PinRefused, PurgeRefused, SchemaMismatch, TableDataMissing, TableExists, TableNotFound, UndropBlocked,
    VersionErased, VersionExpired, VersionNotFound, WarehouseMismatch, WriteClosed, WriteExpired,
)
from .heartbeat import Heartbeat
from .names import LEDGER, Scope
from .runner import Prepared
from .vacuum_run import VacuumRun
from .views import (
    Change, FileEntry, History, HistoryEntry, PinView, PublicationView, TableInstance, TableVersion, WriteView,
    format_bytes,
)

__all__ = [
    "Ledger", "Prepared", "VerifyReport", "ManualClock", "Scope", "LEDGER", "TableInstance", "ClockSkew",
    "History", "HistoryEntry", "VacuumRun", "LedgerError", "TableNotFound", "DatabaseNotFound",
    "DatabaseChanged", "TableExists", "UndropBlocked", "Conflict", "InvalidArgument", "InvalidName",
    "InvalidRetention", "InvalidScope", "InvalidTime", "LedgerCorrupt", "LedgerNotFound",
    "IncompatibleLedger", "LedgerUnavailable", "OutcomeUnknown", "PurgeRefused", "WarehouseMismatch", "VersionNotFound",
    "VersionExpired", "SchemaMismatch", "WriteClosed", "WriteExpired", "TableDataMissing", "CheckpointInvalid", "Checkpoint",
    "InclusionProof", "AsOf", "copy_ledger", "CopyReport", "PinRefused", "PinEnded", "PinView", "Pin", "Change",
    "NotDeleted", "Receipt", "DeletionProof", "DeletionProofs", "NotDeletedKey", "Catalog", "TableVersion",
    "FileEntry", "VersionErased", "ErasureStatus", "ErasureFile", "ErasureProof", "WriteView", "ErasureFence",
    "ErasureInProgress", "ExtraMissing", "Heartbeat", "PublicationView", "MAX_PIN_LEASE",
    # For the edges (the command line, spark_ops, a pipeline's own reports): times, sizes and durations
    # said as the ledger says them, and the files a ledger's outputs must never overwrite.
    "iso_utc", "parse_time", "format_duration", "parse_duration", "from_micros", "format_bytes", "generate_key",
    "output_target", "ledger_files", "PIN_EVENTS",
]
