"""A table's version as a ``pyarrow`` dataset: what DuckDB, Polars and pandas read in this process.

    with arrow_ops.reading(ledger, "sales.orders") as data:     # pinned (R21, R26) for the block
        duckdb.sql("SELECT region, sum(amount) FROM data GROUP BY 1")
        polars.scan_pyarrow_dataset(data).filter(pl.col("region") == "eu").collect()

The dataset is over exactly the version's files, with its recorded schema (a column a merge added
reads as null in older files), and each file's partition values typed as recorded and attached to
the file (a filter on a partition column skips the other files unopened). No Spark, no JVM.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ledger import Heartbeat, Ledger, Pin, TableInstance, TableNotFound, TableVersion
from .files import VersionFiles, check_present, typed, version_files
from .types import arrow_schema

READ_PIN_LEASE = "1h"
"""How long ``dataset``'s pin holds the version it returns (``reading`` holds it for its block)."""


def dataset(ledger: Ledger, name: str, *, version: int | None = None, as_of: datetime | None = None,
            lease: Any = None) -> ds.Dataset:
    """The current version of ``name`` (or version ``version``, or the one current at ``as_of``)
    as a ``pyarrow.dataset.Dataset``, pinned for ``lease`` (an hour by default): no vacuum deletes
    its files while the pin holds. An expired version is ``VersionExpired``, an erased one
    ``VersionErased`` (R25), a file gone ``TableDataMissing``; each before anything is read."""
    return _pinned(ledger, name, version, as_of, lease)[0]


@contextlib.contextmanager
def reading(ledger: Ledger, name: str, *, version: int | None = None, as_of: datetime | None = None,
            lease: Any = None) -> Iterator[ds.Dataset]:
    """``dataset`` with its pin held for the block: renewed every third of its lease while the
    block runs, released on leaving it."""
    data, held = _pinned(ledger, name, version, as_of, lease)
    try:
        with Heartbeat(f"pin-{held.id}", held.lease.total_seconds() / 3, held.renew):
            yield data
    finally:
        held.release()


def _pinned(ledger: Ledger, name: str, version: int | None, as_of: datetime | None,
            lease: Any) -> tuple[ds.Dataset, Pin]:
    table = ledger.table(name)
    if table.current_version is None and version is None and as_of is None:
        raise TableNotFound(f"{name} has no version yet: nothing has been written to it through the ledger")
    held = ledger.pin(name, version=version, as_of=as_of, lease=READ_PIN_LEASE if lease is None else lease)
    try:
        instance = ledger.instance(held.table_id)  # the pin says which instance: the name may have moved
        chosen = next(v for v in ledger.versions(table_id=held.table_id) if v.number == held.version)
        return of_version(instance, chosen), held
    except BaseException:
        held.release()
        raise


def of_version(table: TableInstance, version: TableVersion) -> ds.Dataset:
    """The dataset of a version the caller holds (its files checked to be there)."""
    files = version_files(table.location, version)
    check_present(table.name, version.number, files)
    schema = arrow_schema(version.schema) if version.schema is not None else _found_schema(files)
    if not files.paths:
        return ds.dataset(schema.empty_table())
    return ds.FileSystemDataset.from_paths(
        list(files.paths), schema=schema, format=parquet_format(), filesystem=files.filesystem,
        partitions=_partitions(files, schema))


def parquet_format() -> ds.ParquetFileFormat:
    """Parquet as Spark writes it: its default timestamps (INT96) read as microseconds, the unit
    of Spark's ``timestamp`` (nanoseconds would overflow for dates Spark holds)."""
    return ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit="us"))


def _partitions(files: VersionFiles, schema: pa.Schema) -> list[ds.Expression]:
    """Each file's partition values as the expression a dataset attaches to it: a filter on them
    skips the file unread, and a column not in the file reads as its value."""
    if not files.columns:
        return [ds.scalar(True)] * len(files.paths)
    columns = [typed((v[i] for v in files.values), schema.field(c).type) for i, c in enumerate(files.columns)]
    made: dict[tuple[object, ...], ds.Expression] = {}
    found = []
    for row in zip(*columns):
        if row not in made:
            terms = [pc.field(c).is_null() if value is None else pc.field(c) == value
                     for c, value in zip(files.columns, row)]
            expression = terms[0]
            for term in terms[1:]:
                expression = expression & term
            made[row] = expression
        found.append(made[row])
    return found


def _found_schema(files: VersionFiles) -> pa.Schema:
    """The columns of a version recorded without a schema (files adopted from before versions):
    its first file's, then its partition columns as strings, as Spark infers them."""
    if not files.paths:
        return pa.schema([])
    with files.filesystem.open_input_file(files.paths[0]) as handle:
        found = pq.read_schema(handle)
    fields = [f for f in found if f.name not in files.columns]
    fields = [f.with_type(pa.timestamp("us", tz="UTC")) if f.type == pa.timestamp("ns") else f for f in fields]
    return pa.schema(fields + [pa.field(c, pa.string()) for c in files.columns])
