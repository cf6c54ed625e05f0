"""A dry run's listing, as a dataset in a folder of this process's: the driver never holds it whole.

The dataset has the columns ``item``, ``kind``, ``table_id``, ``path``, ``size``; each item's
executor sends back only totals and a sample of it. Where the executors see this process's
folders (a classic session on a ``local`` master: they are threads of its JVM) each writes its
items' listings there itself, a Parquet file an item. Anywhere else (a Spark Connect server, on
another machine or in another mount; a cluster) they cannot, and the listing comes back through
Spark, in chunks (``tasks.Listed``) that ``Sink`` writes as they arrive. A small listing is read
back into the report and the dataset removed; a large one stays where it is, and the report says
where.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from vacuum_work import Result

from ledger import InvalidArgument

from ..executor.tasks import Listed


def folder_for(listing_dir: str | os.PathLike[str] | None) -> str:
    """A new folder for the dataset: ``listing_dir`` (which must not exist yet), or a fresh
    temporary one."""
    if listing_dir is None:
        return tempfile.mkdtemp(prefix="retention-ledger-dry-run-")
    folder = Path(listing_dir)
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        raise InvalidArgument(f"{folder} exists: a dry run writes its listing to a new folder") from None
    return str(folder.resolve())


class Sink:
    """Writes the ``Listed`` chunks a dry run's tasks send back to one Parquet file of the dataset in
    ``folder``, as they arrive (``Jobs.run``'s sink): at most a chunk is held here."""

    def __init__(self, folder: str) -> None:
        self._path = os.path.join(folder, "part-streamed.parquet")
        self._writer: Any = None

    def __call__(self, value: Any) -> bool:
        if not isinstance(value, Listed):
            return False
        import pyarrow.parquet as pq
        table = value.table()
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._path, table.schema)
        self._writer.write_table(table)
        return True

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def settle(folder: str, results: dict[str, Result], *, keep: bool, threshold: int) -> str | None:
    """Small listings go back into the results (and the dataset away, unless the caller named
    its folder); a large one stays where it is, and its folder is returned."""
    total = sum(o.files for o in results.values() if o.listing)
    if total > threshold:
        return folder
    if any(Path(folder).iterdir()):
        import pyarrow.parquet as pq
        found: dict[str, list[tuple[str, int]]] = {}
        for row in pq.read_table(folder, columns=["item", "path", "size"]).to_pylist():
            found.setdefault(row["item"], []).append((row["path"], row["size"]))
        for key, entries in found.items():
            results[key] = dataclasses.replace(results[key], listing=tuple(entries))
    if keep:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    return None
