"""How a user names a deleted object, and the key a receipt holds it under (R20, issue 44).

A receipt names every object by its key relative to the warehouse root, exactly as it was on
the disk or in the bucket: ``<table id>/_writes/<write id>/dt=0/part-0.parquet``. A user holds
the name some tool gave them: Spark alone spells one file four ways (a plan, ``inputFiles()``,
``_metadata.file_path``, the path it was asked to read), and on an object store with another
scheme (``s3a://`` for the warehouse's ``s3://``). ``warehouse_keys`` is the one place that turns
any of them into the key, for ``prove_deleted`` and ``prove_deleted_many`` alike.
"""

from __future__ import annotations

import re
import urllib.parse

from ..core.model import State
from ..core.tables import location_path
from ..core.versions import WRITES_FOLDER
from ..errors import InvalidArgument

SAME_STORE = {"s3a": "s3", "s3n": "s3"}
"""Schemes that name the same buckets as another: Hadoop's S3 connectors, old and new, for ``s3://``."""

_NOT_A_URI = re.compile(r"[\x00-\x20\"<>\\^`{|}\x7f]|%(?![0-9A-Fa-f]{2})")
"""A character no URI holds unescaped (RFC 3986: a space, a quote, a brace...), or a ``%`` that
is not an escape: text with one is a path as Hadoop prints it, not a URI."""


def warehouse_keys(name: str, root: str, state: State) -> tuple[str, ...]:
    """The keys, relative to the warehouse ``root``, that ``name`` can mean: one, or two when it is
    a URI whose escapes could also be the file's own name (the receipts then decide). Spellings:

    * the key itself, ``<table id>/_writes/<write id>/dt=0/part-0.parquet``, taken as it is;
    * a key relative to the table's location, as ``versions`` lists files
      (``_writes/<write id>/dt=0/part-0.parquet``): a write folder is in exactly one table's
      location, so the write's id names the table;
    * a plain absolute path, ``/data/warehouse/<table id>/...``, taken as it is;
    * ``file:/x`` (Spark's ``_metadata.file_path``), ``file:///x`` (``inputFiles()``, Python's
      ``Path.as_uri()``) and ``file://localhost/x`` (RFC 8089): URIs, percent-decoded once, so a
      space is ``%20`` and the ``%3A`` Spark's writer puts for ':' in a partition value
      (``dt=2024-01-01 10%3A00%3A00``) is ``%253A``;
    * the same as Spark's plans print it (Hadoop's ``Path``): ``file:/x`` with the name as on
      disk, so ``dt=2024-01-01 10%3A00%3A00`` as it is. Text holding what no URI holds (a space,
      a lone ``%``) is only this; text that could be either (``k=a%3Db``) means both, decoded first;
    * on an object store, ``s3://b/x``, ``s3a://b/x`` and ``s3n://b/x`` alike (one bucket), and the
      warehouse's own scheme (``gs://``, ``abfss://``...), read as URIs as above.

    ``InvalidArgument`` for what is not text, or names nothing under the warehouse."""
    if not isinstance(name, str) or not name.strip() or "\x00" in name:
        raise InvalidArgument(f"a key is the path of an object in the warehouse, such as 'sales/t-1/a.parquet' "
                              f"or '{root.rstrip('/')}/sales/t-1/a.parquet', not {name!r}")
    place = _place(name)
    if place is None:
        return (_from_table(name, state),)
    home, base = _root_place(root)
    prefix = f"{base}/" if base or home == "file" else ""  # a bucket's keys, unlike paths, start bare
    found: list[str] = []
    for path in _readings(place[1], is_path=name.startswith("/")):
        key = path[len(prefix):]
        if place[0] == home and path.startswith(prefix) and key and key not in found:
            found.append(key)
    if not found:
        raise InvalidArgument(f"{name} is not inside the warehouse {root}: receipts name objects under it")
    return tuple(found)


def _place(name: str) -> tuple[str, str] | None:
    """(where, path): ``file`` and an absolute path, or ``<scheme>://<bucket>`` and a key; None for a
    relative key. ``where`` is spelt as the warehouse's would be (``s3a`` as ``s3``)."""
    if name.startswith("/"):
        return "file", name
    if name.startswith("file:"):
        rest = name[len("file:"):]
        if rest.startswith("//"):
            host, slash, path = rest[2:].partition("/")
            if host not in ("", "localhost"):
                raise InvalidArgument(f"{name} names a file on host {host!r}: a deletion is proven by its path "
                                      "in the warehouse, such as file:///data/warehouse/<table id>/...")
            return "file", slash + path
        return "file", rest
    scheme, sep, rest = name.partition("://")
    if not sep:
        return None
    bucket, _, key = rest.partition("/")
    return f"{SAME_STORE.get(scheme.lower(), scheme.lower())}://{bucket}", key


def _root_place(root: str) -> tuple[str, str]:
    """The warehouse root as ``_place`` spells a name (a local root taken as the executors take it)."""
    if "://" not in root or root.startswith("file://"):
        path = root[len("file://"):] if root.startswith("file://") else root
        return "file", path.rstrip("/")
    where, key = _place(root) or ("", "")
    return where, key.rstrip("/")


def _readings(path: str, *, is_path: bool) -> list[str]:
    """What a path may mean: a plain path as it is; a URI's path decoded, and, unless it holds what
    no URI can, as it is (a plan's spelling)."""
    if is_path or _NOT_A_URI.search(path):
        return [path]
    try:
        decoded = urllib.parse.unquote(path, errors="strict")
    except UnicodeDecodeError:  # escapes that are no UTF-8: a name with '%' in it
        return [path]
    return [decoded, path] if decoded != path else [path]


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
