"""Where a file is: any spelling of a file turned into its key under the warehouse root, in one place.

A key is a file's path relative to the warehouse root, exactly as it is on the disk or in the bucket:
``<table id>/_writes/<write id>/dt=0/part-0.parquet``. Receipts hold files by it (R20) and erasures
name them by it (R25). Spark alone spells one file four ways (a plan, ``inputFiles()``,
``_metadata.file_path``, the path it was asked to read), and on an object store with another
scheme (``s3a://`` for the warehouse's ``s3://``); a user adds a plain path. ``Root.keys`` is the one
function that reads them all, for the ledger (``ledger.audit.object_keys``), the Spark jobs
(``spark_ops.erase``) and the offline verifier alike. A key relative to a table's location needs the
ledger's state to name its table, so the ledger reads that spelling itself.

The standard library only (R19): a name that is not under the root is a ``NotUnderRoot``, a
``ValueError`` the ledger turns into its own typed error.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field

SAME_STORE = {"s3a": "s3", "s3n": "s3"}
"""Schemes that name the same buckets as another: Hadoop's S3 connectors, old and new, for ``s3://``."""

LOCAL = "file"
"""The place of a file on a disk (the executors' and the driver's alike)."""

_NOT_A_URI = re.compile(r"[\x00-\x20\"<>\\^`{|}\x7f]|%(?![0-9A-Fa-f]{2})")
"""A character no URI holds unescaped (RFC 3986: a space, a quote, a brace...), or a ``%`` that
is not an escape: text with one is a path as Hadoop prints it, not a URI."""


class NotUnderRoot(ValueError):
    """A name that no key under the warehouse root can be: outside it, on another host or store."""


def is_uri(name: str) -> bool:
    """Whether a name is spelt as a URI (``file:/x``, ``file:///x``, ``s3://b/x``), not as a path:
    a path is resolved (``~``, symbolic links, the working folder), a URI is taken as it is."""
    return name.startswith(f"{LOCAL}:") or "://" in name


def place(name: str) -> tuple[str, str] | None:
    """``(where, path)`` of an absolute name: ``file`` and an absolute path, or
    ``<scheme>://<bucket>`` and a key, the scheme spelt as the warehouse's would be (``s3a`` as
    ``s3``); None for a relative name. ``NotUnderRoot`` for a ``file:`` URI naming another host."""
    if name.startswith("/"):
        return LOCAL, name
    if name.startswith("file:"):
        rest = name[len("file:"):]
        if rest.startswith("//"):
            host, slash, path = rest[2:].partition("/")
            if host not in ("", "localhost"):
                raise NotUnderRoot(f"{name} names a file on host {host!r}: a file in the warehouse is named by its "
                                   "path, such as file:///data/warehouse/<table id>/...")
            return LOCAL, slash + path
        return LOCAL, rest
    scheme, sep, rest = name.partition("://")
    if not sep:
        return None
    bucket, _, key = rest.partition("/")
    return f"{SAME_STORE.get(scheme.lower(), scheme.lower())}://{bucket}", key


def readings(path: str, *, is_path: bool) -> list[str]:
    """What a name's path may mean: a plain path as it is; a URI's path percent-decoded once (a
    space is ``%20``, the ``%3A`` Spark's writer puts for ':' in a partition value is ``%253A``)
    and, unless it holds what no URI can, as it is (Hadoop's ``Path`` in a plan prints the name as
    on disk): ``k=a%3Db`` could be either, so it is both, decoded first."""
    if is_path or _NOT_A_URI.search(path):
        return [path]
    try:
        decoded = urllib.parse.unquote(path, errors="strict")
    except UnicodeDecodeError:  # escapes that are no UTF-8: a name with '%' in it
        return [path]
    return [decoded, path] if decoded != path else [path]


@dataclass(frozen=True)
class Root:
    """A warehouse root, parsed once: its place (``file``, or ``<scheme>://<bucket>``) and the
    prefix every key under it starts after (a folder's path and ``/``; a bucket's prefix and ``/``,
    or nothing for a whole bucket: its keys, unlike paths, start bare). Two spellings of one root
    (``/data/wh`` and ``file:///data/wh/``) are equal."""

    text: str = field(compare=False)
    where: str
    prefix: str

    @classmethod
    def parse(cls, root: str) -> Root:
        """The root as it was given to the ledger: a path, ``file:`` URI or object-store URI."""
        found = place(root) if is_uri(root) else None
        where, base = found if found is not None else (LOCAL, root)
        base = base.rstrip("/")
        return cls(root, where, f"{base}/" if base or where == LOCAL else "")

    @property
    def on_disk(self) -> bool:
        """Whether the root is a folder on a disk (its ``prefix`` the folder's path), not keys in an
        object store's bucket: the one question of where a warehouse is, which the ledger, the Spark
        jobs and the offline verifier ask here (a path or ``file:`` URI is a disk, any other URI a store)."""
        return self.where == LOCAL

    def keys(self, name: str) -> tuple[str, ...]:
        """The keys that the absolute ``name`` can mean: one, or two when it is a URI whose escapes
        could also be the file's own name (what holds the key then decides). Spellings: a plain
        path (as it is); ``file:/x`` (Spark's ``_metadata.file_path``), ``file:///x``
        (``inputFiles()``, ``Path.as_uri()``) and ``file://localhost/x`` (RFC 8089), read by
        ``readings``; ``s3://b/x``, ``s3a://b/x`` and ``s3n://b/x`` alike, and any other store's
        own scheme, read likewise. ``NotUnderRoot`` for a relative name or one outside the root."""
        found = place(name)
        if found is None:
            raise NotUnderRoot(f"{name} is relative: a key under the warehouse {self.text} is read from an "
                               "absolute path or URI")
        keys: list[str] = []
        for path in readings(found[1], is_path=name.startswith("/")):
            key = path[len(self.prefix):]
            if found[0] == self.where and path.startswith(self.prefix) and key and key not in keys:
                keys.append(key)
        if not keys:
            raise NotUnderRoot(f"{name} is not inside the warehouse {self.text}: a key names a file under it")
        return tuple(keys)
