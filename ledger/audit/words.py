"""Each event in words, for people reading the history: "alice@etl-3 dropped sales.orders (id …)".

The data is the event's own fields; ``name_of`` finds the name of a table the event
names only by id (a purge, a commit), as the catalog knows it now.
"""

from __future__ import annotations

from typing import Any, Callable

from ..clock import format_duration, iso
from ..views import format_bytes

NameOf = Callable[[str], str | None]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _table(e: Any, name_of: NameOf) -> str:
    name = getattr(e, "name", None) or name_of(e.table_id) or "a table"
    return f"{name} (id {e.table_id})"


def _scope(scope: str, name_of: NameOf) -> str:
    if scope == "ledger":
        return "the ledger"
    kind, _, key = scope.partition(":")
    if kind == "table":
        return f"table {name_of(key) or key} (id {key})"
    return f"{kind} {key}"


def _run(e: Any) -> str:
    return f" (vacuum run {e.run_id})" if getattr(e, "run_id", None) else ""


def _retention(e: Any, n: NameOf) -> str:
    if e.seconds is None:
        return f"removed the retention set on {_scope(e.scope, n)}"
    return f"set the retention of {_scope(e.scope, n)} to {format_duration(e.seconds)}"


def _commit(e: Any, n: NameOf) -> str:
    how = "adopted the existing files of" if e.mode == "adopt" else f"committed ({e.mode})"
    text = f"{how} {_table(e, n)} as version {e.number}: {_plural(e.files, 'file')}, {format_bytes(e.bytes)}"
    if e.mode == "replace":
        text += f", in place of {_plural(e.removed_files, 'file')} ({format_bytes(e.removed_bytes)}) of version " \
                f"{e.number - 1}"
    return text


def _vacuum_started(e: Any, n: NameOf) -> str:
    parts = [_plural(len(e.table_ids), "table") + " to purge"]
    if e.marks:
        parts.append(_plural(len(e.marks), "retention mark") + " to advance")
    return f"started vacuum run {e.run_id}: " + ", ".join(parts)


def _vacuum_finished(e: Any, n: NameOf) -> str:
    text = (f"finished vacuum run {e.run_id}: {_plural(e.purged, 'table')} purged, "
            f"{_plural(e.files, 'file')} and {format_bytes(e.bytes)} deleted")
    return text + (f", {e.failed} failed" if e.failed else "")


def _pin_taken(e: Any, n: NameOf) -> str:
    what = f"dropped {_table(e, n)}" if e.version is None else f"version {e.version} of {_table(e, n)}"
    return f"pinned {what} for {format_duration(e.lease_seconds)} (pin {e.pin_id}, until {iso(e.expires_at)})"


_WORDS: dict[str, Callable[[Any, NameOf], str]] = {
    "TableCreated": lambda e, n: f"created {_table(e, n)}",
    "TableDropped": lambda e, n: f"dropped {_table(e, n)}",
    "TableUndropped": lambda e, n: f"undropped {_table(e, n)}",
    "DatabaseDropped": lambda e, n: f"dropped database {e.database} ({_plural(len(e.table_ids), 'table')})",
    "DatabaseUndropped": lambda e, n: f"undropped database {e.database} ({_plural(len(e.table_ids), 'table')})",
    "TablePurged": lambda e, n: f"purged {_table(e, n)}: {_plural(e.files, 'file')}, {format_bytes(e.bytes)}{_run(e)}",
    "WatermarkAdvanced": lambda e, n: f"advanced the watermark of {_scope(e.scope, n)} to {iso(e.to)}{_run(e)}",
    "RetentionSet": _retention,
    "LedgerUpgraded": lambda e, n: (f"upgraded the ledger file from format {e.from_format} to {e.to_format} "
                                    f"(hashing {_plural(e.events_hashed, 'earlier event')})"),
    "WriteBegun": lambda e, n: f"began write {e.write_id} to {_table(e, n)}, leased until {iso(e.expires_at)}",
    "WriteRenewed": lambda e, n: f"renewed write {e.write_id} to {_table(e, n)} until {iso(e.expires_at)}",
    "WriteAborted": lambda e, n: f"aborted write {e.write_id} to {_table(e, n)}",
    "VersionCommitted": _commit,
    "VersionRestored": lambda e, n: f"restored {_table(e, n)} to version {e.restored}, as version {e.number}",
    "RetentionMarkAdvanced": lambda e, n: f"advanced the retention mark of {_table(e, n)} to {iso(e.to)}{_run(e)}",
    "WritesSwept": lambda e, n: f"swept {_plural(len(e.write_ids), 'uncommitted write')} of {_table(e, n)}{_run(e)}",
    "RemovalsDeleted": lambda e, n: (f"deleted {_plural(e.files, 'file')} ({format_bytes(e.bytes)}) that "
                                     f"{_plural(len(e.versions), 'replace')} of {_table(e, n)} removed{_run(e)}"),
    "StragglersDeleted": lambda e, n: (f"deleted {_plural(e.files, 'straggler file')} ({format_bytes(e.bytes)}) from "
                                       f"{_plural(len(e.write_ids), 'write folder')} of {_table(e, n)}{_run(e)}"
                                       if e.files else
                                       f"found no stragglers in {_plural(len(e.write_ids), 'write folder')} of "
                                       f"{_table(e, n)}{_run(e)}"),
    "WriteFoldersDeleted": lambda e, n: (f"deleted {_plural(len(e.write_ids), 'write folder')} of {_table(e, n)}: "
                                         f"{_plural(e.files, 'file')}, {format_bytes(e.bytes)}{_run(e)}"),
    "VacuumStarted": _vacuum_started,
    "VacuumLeased": lambda e, n: f"extended vacuum run {e.run_id}'s lease to {iso(e.until)}",
    "VacuumFinished": _vacuum_finished,
    "ReceiptPart": lambda e, n: (f"recorded {_plural(e.count, 'object')} ({format_bytes(e.bytes)}) vacuum run "
                                 f"{e.run_id} deleted, {e.first} to {e.last} (Merkle root {e.root[:16]}...)"),
    "FoundAbsent": lambda e, n: (f"recorded {_plural(e.count, 'object')} ({format_bytes(e.bytes)}) vacuum run "
                                 f"{e.run_id} looked for to delete and found already gone, {e.first} to {e.last} "
                                 f"(Merkle root {e.root[:16]}...)"),
    "VacuumReceipt": lambda e, n: (f"closed vacuum run {e.run_id}'s receipt: {_plural(e.files, 'object')} deleted "
                                   f"({format_bytes(e.bytes)}) in {_plural(e.parts, 'part')}, Merkle root "
                                   f"{e.root[:16]}..."),
    "WarehouseMoved": lambda e, n: f"moved the warehouse from {e.from_root} to {e.to_root}",
    "PinTaken": _pin_taken,
    "PinRenewed": lambda e, n: f"renewed pin {e.pin_id} on {_table(e, n)} until {iso(e.expires_at)}",
    "PinReleased": lambda e, n: f"released pin {e.pin_id} on {_table(e, n)}",
    "PinOverridden": lambda e, n: (f"ended pin {e.pin_id} on {_table(e, n)}: erasure request {e.request_id} erased "
                                   "the version it held (R25 wins over R21)"),
    "ErasureFenced": lambda e, n: (f"held commits to {_table(e, n)} off until {iso(e.until)} while erasure request "
                                   f"{e.request_id} is recorded"),
    "ErasureFenceLifted": lambda e, n: f"lifted erasure request {e.request_id}'s hold on commits to {_table(e, n)}",
    "ErasureRequested": lambda e, n: (f"recorded erasure request {e.request_id} of "
                                      + (f"the rows {e.predicate!r}" if e.predicate else
                                         f"{_plural(e.keys, 'key')}" if e.keys else "the rows its statement names")
                                      + f" in {', '.join(e.tables)} (statement {e.statement[:16]}...)"
                                      f": {_plural(e.count, 'file')} ({format_bytes(e.bytes)}) in "
                                      f"{_plural(len(e.versions), 'version')} made unreadable"),
    "ScrubFinished": lambda e, n: (f"scrubbed {'the warehouse' if e.database is None else 'database ' + e.database}"
                                   f" (scrub {e.scrub_id}): {_plural(e.files, 'file')} ({format_bytes(e.bytes)}) "
                                   f"in {_plural(e.locations, 'location')} checked present, {e.absent_checked} "
                                   f"checked gone: " + (", ".join(
                                       f"{count} {what}" for count, what in ((e.missing, "missing"),
                                                                             (e.resurrected, "resurrected"),
                                                                             (e.errors, "not checked")) if count)
                                       or "all as recorded") + f" (root {e.root[:16]}...)"),
    "TablesPublished": lambda e, n: (f"published {_plural(len(e.table_ids), 'table')} to readers of catalog "
                                     f"{e.catalog_name!r} at {e.catalog} (metadata in {e.metadata})"),
    "ErasureForgotten": lambda e, n: (f"forgot what erasure request {e.request_id} named (event #{e.seq})"
                                      + (": its predicate redacted there" if e.redacted else
                                         ": only its commitment remains")),
}


def describe(type_name: str, actor: str, event: Any, name_of: NameOf) -> str:
    words = _WORDS.get(type_name)
    return f"{actor} {words(event, name_of) if words else 'recorded ' + type_name}"


def known(type_name: str) -> bool:
    return type_name in _WORDS
