"""Typed errors: every refusal the ledger makes is one of these.

A caller can catch ``LedgerError`` for "the ledger said no", or a subclass for
one reason. Each also derives from the builtin that best describes it
(``ValueError`` for bad input, ``LookupError`` for a missing thing), so generic
code that already handles those keeps working. Messages are written for the
person who has to act on them: they name the table, the id and the times.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base of every error the ledger raises on purpose."""


class TableNotFound(LedgerError, LookupError):
    """No table (or no dropped instance, or no database) matches the request."""


class DatabaseNotFound(TableNotFound):
    """The database has no live tables to drop, or no dropped tables to restore."""


class TableExists(LedgerError):
    """The name is bound to a live table, or the instance is live already."""


class DatabaseChanged(LedgerError):
    """A database drop can no longer be undone as a whole: one of its tables was restored (or
    restored and dropped again) on its own since. The message says how to restore them by id."""


class UndropBlocked(LedgerError):
    """A vacuum may have touched this instance's files, so it can never come back.

    Raised when the instance's drop time is at or before its effective
    watermark (R3), or when the instance has been purged (R8).
    """


class VersionNotFound(LedgerError, LookupError):
    """No such version of the table (a number past the current one, or a time before version 1)."""


class VersionExpired(LedgerError):
    """The version was committed at or before the table's retention mark: its files may be gone,
    so it is never read or restored (R12). The message names table, version, commit time, mark."""


class VersionErased(LedgerError):
    """The version (or the dropped instance) holds a file an erasure request named: from the request
    on, no read, restore, undrop or pin reaches it (R25). ``request_id`` names the request
    (``Ledger.erasure`` says where its files are)."""

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class ErasureInProgress(LedgerError):
    """An erasure request is being recorded on the table: its engine holds commits to it off (a
    *fence*, until ``until``) while it scans the last commits and records the request, so that no
    row lands unscanned in between (R25). ``commit_write`` and ``restore_table`` wait for it to
    lift; this is raised only when it held longer than they wait: commit again."""

    def __init__(self, message: str, *, request_id: str | None = None, until: object = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.until = until


class SchemaMismatch(LedgerError, ValueError):
    """An append whose columns are not the table's: the message names both schemas. Appending
    them would make a read of the new version lose one side's columns; write with
    ``merge_schema=True`` to record the union, or ``mode="overwrite"`` to replace it."""


class WriteClosed(LedgerError):
    """The write is committed or aborted: its folder is never written through the ledger again."""


class WriteExpired(WriteClosed):
    """The write was swept (aborted, or its lease ran out, and a vacuum reclaimed its folder):
    the job must write again."""


class TableDataMissing(LedgerError):
    """A file the chosen version names is not there: the read is refused, never short of rows."""


class PurgeRefused(LedgerError):
    """A purge that the state does not allow: the table is not dropped and behind its
    watermark (a vacuum whose plan went stale), or the counts make no sense."""


class NotDeleted(LedgerError, LookupError):
    """No vacuum's receipt holds that key: no run recorded deleting it (R20)."""


class PinRefused(LedgerError):
    """A pin that cannot be taken (R21): on a purged instance, a dropped one behind its
    watermark, or a table that holds the most pins it may. A pin never resurrects what a vacuum
    may have touched; an expired version is ``VersionExpired``."""


class PinEnded(LedgerError):
    """The pin was released, or its lease ran out: what it held may be gone; take a new pin."""


class Conflict(LedgerError):
    """The streams a command read kept moving under it; it gave up after retrying.

    The store raises it once per refused append; the ledger retries and raises
    it to the caller only when its retry budget is spent.
    """

    def __init__(self, message: str, *, stream: str | None = None,
                 expected: int | None = None, actual: int | None = None) -> None:
        super().__init__(message)
        self.stream = stream
        self.expected = expected
        self.actual = actual


class InvalidName(LedgerError, ValueError):
    """A table or database name does not follow the documented syntax."""


class InvalidRetention(LedgerError, ValueError):
    """A retention is negative, malformed, or below the floor without an override."""


class InvalidTime(LedgerError, ValueError):
    """A time is naive (no timezone), or a watermark would pass the ledger's now."""


class InvalidScope(LedgerError, ValueError):
    """A watermark or retention scope is malformed (a well-formed ``table:<id>`` naming no
    table is ``TableNotFound``)."""


class InvalidArgument(LedgerError, ValueError):
    """Some other argument is out of range: a vacuum limit under 1, an unknown write mode."""


class LedgerCorrupt(LedgerError):
    """The ledger file cannot be trusted: not a ledger, damaged, or inconsistent."""


class CheckpointInvalid(LedgerError, ValueError):
    """A checkpoint cannot be used: malformed JSON, a signature that does not verify with the key
    given, or a proof for another tree. (A log that does not extend a good checkpoint is
    ``LedgerCorrupt``: the fault is the log's, not the checkpoint's.)"""


class IncompatibleLedger(LedgerError):
    """The file was written by a newer, incompatible version of retention-ledger."""


class LedgerUnavailable(LedgerError, OSError):
    """The ledger file cannot be written: read-only, disk full, or I/O failure."""


class OutcomeUnknown(LedgerUnavailable):
    """A command was sent to a shared store (PostgreSQL) and the connection broke before its answer
    came, and the server stayed away: it may or may not have been recorded (R18). ``attempt`` is
    its id; once the server is back, ``Ledger.outcome(attempt)`` says which. It is never recorded
    twice by the ledger itself: ask before retrying it."""

    def __init__(self, message: str, attempt: str) -> None:
        super().__init__(message)
        self.attempt = attempt


class LedgerNotFound(LedgerError, FileNotFoundError):
    """No ledger at that path, and the caller asked not to create one (``create=False``;
    the CLI's read-only commands): a mistyped path must not answer "0 events"."""


class ClockSkew(LedgerError):
    """This host's clock (or the clock given to ``Ledger.open``) is further from the shared store's
    than ``max_clock_skew`` allows: on a ledger that several hosts share, one host's clock must not
    move the others' time (R6, R18). The message names both times; nothing was recorded."""


class WarehouseMismatch(LedgerError, ValueError):
    """A warehouse root other than the one the ledger recorded: tables written there would be
    invisible to every vacuum. Moving a warehouse is its own command (``move_warehouse``)."""


class ExtraMissing(LedgerError, ImportError):
    """A call needs a package the install left out (DuckDB, Polars, pyiceberg): the message names
    the extra that brings it (``pip install 'retention-ledger[duckdb]'``). Nothing was recorded."""
