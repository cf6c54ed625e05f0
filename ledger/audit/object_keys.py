"""How a user names a deleted object, and the key a receipt holds it under (R20, issue 44).

A receipt names every object by its key relative to the warehouse root, exactly as it was on
the disk or in the bucket: ``<table id>/_writes/<write id>/dt=0/part-0.parquet``. A user holds
the name some tool gave them: Spark alone spells one file four ways (a plan, ``inputFiles()``,
``_metadata.file_path``, the path it was asked to read), and on an object store with another
scheme (``s3a://`` for the warehouse's ``s3://``). ``warehouse_keys`` turns any of them into the
key, for ``prove_deleted`` and ``prove_deleted_many`` alike: an absolute spelling by the one
function the executors share (``vacuum_work.where``), a key relative to a table by the state.
"""

from __future__ import annotations

from vacuum_work.where import NotUnderRoot, Root, place

from ..core.model import State
from ..core.tables import location_path
from ..core.versions import WRITES_FOLDER
from ..errors import InvalidArgument


def warehouse_keys(name: str, root: str, state: State) -> tuple[str, ...]:
    """The keys, relative to the warehouse ``root``, that ``name`` can mean: one, or two when it is
    a URI whose escapes could also be the file's own name (the receipts then decide). Spellings:

    * the key itself, ``<table id>/_writes/<write id>/dt=0/part-0.parquet``, taken as it is;
    * a key relative to the table's location, as ``versions`` lists files
      (``_writes/<write id>/dt=0/part-0.parquet``): a write folder is in exactly one table's
      location, so the write's id names the table;
    * any absolute spelling (a path, ``file:`` URIs, ``s3a://``...), read by the one function the
      executors and the verifier share, ``vacuum_work.where.Root.keys``.

    ``InvalidArgument`` for what is not text, or names nothing under the warehouse."""
    if not isinstance(name, str) or not name.strip() or "\x00" in name:
        raise InvalidArgument(f"a key is the path of an object in the warehouse, such as 'sales/t-1/a.parquet' "
                              f"or '{root.rstrip('/')}/sales/t-1/a.parquet', not {name!r}")
    try:
        if place(name) is None:
            return (_from_table(name, state),)
        return Root.parse(root).keys(name)
    except NotUnderRoot as exc:
        raise InvalidArgument(str(exc)) from None


def _from_table(key: str, state: State) -> str:
    """A relative key: the warehouse's as it is, or the table's (``_writes/<write id>/...``) with its
    table's id in front."""
    folder, _, rest = key.partition("/")
    write_id, _, _ = rest.partition("/")
    if folder == WRITES_FOLDER and write_id:
        write = state.data.writes.get(write_id)
        if write is not None:
            return f"{location_path(write.table_id)}/{key}"
    return key


def why_not_held(key: str, state: State) -> str:
    """Why no receipt holds ``key``, with what a misspelt key would need."""
    reason = (f"{key} is not in any vacuum's receipt: no vacuum run recorded deleting it (a file a vacuum never "
              "reached, one outside the warehouse, or one deleted by other means)")
    first, _, rest = key.partition("/")
    if first == WRITES_FOLDER:
        return (f"{reason}; no write {rest.partition('/')[0]!r} is on record, so it names no table (a key "
                "relative to a table's location is read inside a write's folder, _writes/<write id>/...)")
    if not state.tables.has_id(first):
        return (f"{reason}; a key relative to the warehouse starts with its table's id, and {first!r} is no "
                f"table's: give the id in front, <table id>/{key} (tables and show-dropped list the ids)")
    return reason
