"""Exactly a version's files, where another engine can read them: their full paths, the partition
values their folders hold (typed by the recorded schema), and the filesystem they are on.

The ledger names a version's files relative to the table's location: ``_writes/<id>/part-0``, or
``_writes/<id>/day=2024-01-01/region=a%2Fb/part-0`` for a partitioned table (Spark's layout, its
values escaped as Spark escapes them), or ``day=1/part-0`` for files adopted from before versions.
The values are read here from those folders, once, so no engine parses a path of its own (a
parent folder named ``x=y`` above the warehouse is never mistaken for a column).
"""

from __future__ import annotations

import os
from typing import Iterable
from urllib.parse import unquote, urlsplit

import attrs
import pyarrow as pa
import pyarrow.fs as pafs

from ledger import InvalidArgument, TableDataMissing, TableVersion

WRITES_FOLDER = "_writes"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # Spark's folder name for a null (or empty) value


@attrs.frozen
class VersionFiles:
    """A version's files on one filesystem: ``paths`` as that filesystem names them, and each file's
    partition values (column to its folder's text, None for null), in ``columns`` order."""
    filesystem: pafs.FileSystem
    paths: tuple[str, ...]
    columns: tuple[str, ...]
    values: tuple[tuple[str | None, ...], ...]

    @property
    def local(self) -> bool:
        return bool(self.filesystem.type_name == "local")


def version_files(location: str, version: TableVersion) -> VersionFiles:
    """The files of ``version`` of the table at ``location``, with their partition values."""
    filesystem, base = filesystem_for(location)
    files = version.files
    columns = version.partition_by if version.partition_by is not None else \
        (partition_columns(files[0].path) if files else ())
    values = []
    for entry in files:
        found = dict(_folders(entry.path))
        values.append(tuple(found.get(c) for c in columns))
    return VersionFiles(filesystem, tuple(f"{base}/{entry.path}" for entry in files), tuple(columns), tuple(values))


def partition_columns(path: str) -> tuple[str, ...]:
    return tuple(column for column, _ in _folders(path))


def _folders(path: str) -> Iterable[tuple[str, str | None]]:
    """The ``column=value`` folders of a file, below its write's folder: each value unescaped as
    Spark escapes it (``%2F`` is ``/``; ``+`` stays ``+``), Spark's null folder as None."""
    parts = path.split("/")[:-1]
    if len(parts) >= 2 and parts[0] == WRITES_FOLDER:
        parts = parts[2:]
    for part in parts:
        column, _, text = part.partition("=")
        yield unquote(column), None if text == NULL_PARTITION else unquote(text)


def filesystem_for(location: str) -> tuple[pafs.FileSystem, str]:
    """The Arrow filesystem a table's location is on, and the location as it names it. A path or
    ``file://`` is the local disk; ``s3://`` is S3 with the endpoint and region the vacuum's
    executors use (``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``, ``AWS_REGION``); any other
    scheme Arrow knows by its URI."""
    parts = urlsplit(location)
    if "://" not in location:
        return pafs.LocalFileSystem(), os.path.abspath(location)
    if parts.scheme == "file":
        return pafs.LocalFileSystem(), unquote(parts.path)
    if parts.scheme in ("s3", "s3a", "s3n"):  # Hadoop's names for the same store
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        options: dict[str, object] = {"region": region}
        if endpoint:
            target = urlsplit(endpoint)
            options.update(endpoint_override=target.netloc, scheme=target.scheme or "https")
        return pafs.S3FileSystem(**options), f"{parts.netloc}{parts.path}".rstrip("/")
    filesystem, path = pafs.FileSystem.from_uri(location)
    return filesystem, path.rstrip("/")


def check_present(name: str, number: int, files: VersionFiles) -> None:
    """``TableDataMissing`` naming the first of the files that is not there: a read of fewer files
    would return fewer rows, never an error. On a local disk each file is looked at; on an object
    store the version's folders are listed (a request a thousand keys, not one a file)."""
    if not files.paths:
        return
    if files.local:
        infos = files.filesystem.get_file_info(list(files.paths))
        missing = next((info.path for info in infos if info.type != pafs.FileType.File), None)
    else:
        found: set[str] = set()
        for folder in sorted({p.rsplit("/", 1)[0] for p in files.paths}):
            selector = pafs.FileSelector(folder, allow_not_found=True, recursive=False)
            found |= {info.path for info in files.filesystem.get_file_info(selector)}
        missing = next((p for p in files.paths if p not in found), None)
    if missing is not None:
        raise TableDataMissing(f"{name} version {number} names {missing}, which is not there: the read is refused "
                               "rather than returning fewer rows (was the file deleted outside the ledger?)")


def typed(values: Iterable[str | None], data_type: pa.DataType) -> list[object]:
    """Folder texts as values of the recorded type (``"007"`` stays ``"007"`` for a string; a
    timestamp, which Spark writes without a zone, as the UTC time it is). ``InvalidArgument`` for a
    text that is not one: the version is not read, rather than read with a wrong value."""
    texts = pa.array(list(values), pa.string())
    try:
        if pa.types.is_timestamp(data_type) and data_type.tz is not None:
            try:  # as Spark writes one: no zone, the UTC time
                found: list[object] = texts.cast(pa.timestamp(data_type.unit)).cast(data_type).to_pylist()
            except pa.ArrowInvalid:  # with its offset
                found = texts.cast(data_type).to_pylist()
        else:
            found = (texts.cast(data_type) if data_type != pa.string() else texts).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidArgument(f"a partition folder's value is not a {data_type}: {exc}") from None
    return found
