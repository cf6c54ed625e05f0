"""Exports: every event with its hash, in a file any tool can read (JSON lines or Parquet).

An export plus a checkpoint is all the offline verifier needs: each row carries the
fields the chain hashes, exactly as stored (the payload is the stored JSON text, as a
string, not re-encoded), so the chain can be recomputed from the export alone. Columns:

    seq, stream, version, type, schema_version, time (microseconds since the epoch, UTC),
    time_utc (the same, as ISO 8601 text in JSON lines and a UTC timestamp in Parquet),
    actor, payload, hash

Files are written beside their target and renamed into place, so a reader never sees
half an export.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Iterator

import attrs
import orjson

from ..clock import iso
from ..core.events import Row
from ..errors import InvalidArgument, LedgerCorrupt

FORMATS = ("jsonl", "parquet")
COLUMNS = ("seq", "stream", "version", "type", "schema_version", "time", "actor", "payload", "hash")
"""The stored row's fields, in the order the chain hashes them (``hash`` last)."""
WHOLE = frozenset({"seq", "version", "schema_version", "time"})
"""The columns that hold whole numbers; every other one holds text."""

_BATCH = 50_000


def schema() -> Any:
    """The Parquet schema. pyarrow is imported here, not at the top: opening a ledger for a CLI
    call must not pay for it."""
    import pyarrow as pa
    return pa.schema([
        ("seq", pa.int64()), ("stream", pa.string()), ("version", pa.int64()), ("type", pa.string()),
        ("schema_version", pa.int32()), ("time", pa.int64()), ("time_utc", pa.timestamp("us", tz="UTC")),
        ("actor", pa.string()), ("payload", pa.string()), ("hash", pa.string()),
    ])


@attrs.frozen
class ExportReport:
    path: str
    format: str
    events: int
    head: str | None
    """The hash of the last event exported (None for an empty log)."""


def check_format(format: str) -> None:
    if format not in FORMATS:
        raise InvalidArgument(f"export format must be one of {', '.join(FORMATS)}, not {format!r}")


def write(rows: Iterable[Row], target: Path, format: str) -> ExportReport:
    """Write stored rows (with their hash) to ``target`` (checked by ``outputs.target``: never over
    the ledger, never over a file unless asked; ``format`` by ``check_format``); returns what was written."""
    partial = target.with_name(f".{target.name}.partial")
    try:
        count, head = (_write_jsonl if format == "jsonl" else _write_parquet)(rows, partial)
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise InvalidArgument(f"cannot write the export {target}: {exc.strerror or exc}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return ExportReport(str(target), format, count, head)


def _write_jsonl(rows: Iterable[Row], path: Path) -> tuple[int, str | None]:
    count, head = 0, None
    with open(path, "wb") as out:
        for row in rows:
            record = dict(zip(COLUMNS, row))
            record["time_utc"] = iso(row[5])
            out.write(orjson.dumps(record) + b"\n")
            count, head = count + 1, row[8]
    return count, head


def _write_parquet(rows: Iterable[Row], path: Path) -> tuple[int, str | None]:
    import pyarrow.parquet as pq
    shape = schema()
    count, head = 0, None
    with pq.ParquetWriter(path, shape, compression="zstd") as writer:
        batch: list[Row] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= _BATCH:
                writer.write_table(_table(batch, shape))
                count, head, batch = count + len(batch), batch[-1][8], []
        if batch or count == 0:
            writer.write_table(_table(batch, shape))
            if batch:
                count, head = count + len(batch), batch[-1][8]
    return count, head


def _table(batch: list[Row], shape: Any) -> Any:
    import pyarrow as pa
    columns: dict[str, Any] = {name: [row[i] for row in batch] for i, name in enumerate(COLUMNS)}
    columns["time_utc"] = columns["time"]
    return pa.table({name: pa.array(columns[name], type=shape.field(name).type) for name in shape.names},
                    schema=shape)


def read(path: str | os.PathLike[str]) -> Iterator[Row]:
    """The rows of an export, in file order, as ``(seq, stream, version, type, schema_version,
    time, actor, payload, hash)``: exactly what the store holds, so the chain can be rechecked."""
    source = Path(path)
    try:
        with open(source, "rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise InvalidArgument(f"cannot read the export {source}: {exc.strerror or exc}") from None
    return _read_parquet(source) if magic == b"PAR1" else _read_jsonl(source)


def _read_jsonl(path: Path) -> Iterator[Row]:
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise _invalid(path, number, f"not JSON ({exc})") from None
            if not isinstance(record, dict):
                raise _invalid(path, number, f"not an object but {type(record).__name__}")
            yield tuple(_field(path, number, record, name) for name in COLUMNS)


def _field(path: Path, number: int, record: dict[str, Any], name: str) -> Any:
    """One column of one exported event, of the type the chain hashes (an edited export must be
    told as such, never fail inside the check with a ``TypeError``)."""
    if name not in record:
        raise _invalid(path, number, f"{name} is missing")
    value = record[name]
    if name in WHOLE:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _invalid(path, number, f"{name} is not an integer ({value!r})")
        if not -(2 ** 63) <= value < 2 ** 63:
            raise _invalid(path, number, f"{name} {value} is out of range")
    elif not isinstance(value, str):
        raise _invalid(path, number, f"{name} is not text ({value!r})")
    return value


def _invalid(path: Path, number: int, why: str) -> LedgerCorrupt:
    return LedgerCorrupt(f"{path}: the export is not valid: line {number}, {why}; it was damaged or edited")


def _read_parquet(path: Path) -> Iterator[Row]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        source = pq.ParquetFile(path)
        missing = set(COLUMNS) - set(source.schema_arrow.names)
        if missing:
            raise LedgerCorrupt(f"{path}: not an export of a ledger (no column(s) {', '.join(sorted(missing))})")
        for name in COLUMNS:
            found = source.schema_arrow.field(name).type
            if not (pa.types.is_integer(found) if name in WHOLE else pa.types.is_string(found)):
                raise LedgerCorrupt(f"{path}: the export is not valid: column {name} holds {found}, not "
                                    f"{'integers' if name in WHOLE else 'text'}; it was damaged or edited")
        for batch in source.iter_batches(batch_size=_BATCH, columns=list(COLUMNS)):
            yield from zip(*(batch.column(name).to_pylist() for name in COLUMNS))
    except (pa.ArrowException, OSError) as exc:
        raise LedgerCorrupt(f"{path}: the Parquet export cannot be read ({exc}); it was damaged") from None
