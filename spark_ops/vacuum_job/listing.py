"""A dry run's listing, as a dataset: the executors write it, the driver never holds it whole.

Each item's executor writes the files it would delete to one Parquet file of a dataset
(columns ``item``, ``kind``, ``table_id``, ``path``, ``size``) and sends back only totals and a
sample. A small listing is read back into the report and the dataset removed; a large one
stays where it is, and the report says where.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from vacuum_work import Result

from ledger import InvalidArgument


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
