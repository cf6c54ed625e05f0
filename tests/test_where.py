"""Where a file is (R9, R20, R25): every spelling of one file is one key, in one function.

``vacuum_work.where.Root.keys`` is the one reading of a file's name that the ledger (proofs of
deletion), the Spark jobs (an erasure's scan) and the offline verifier share. These properties
hold it to what Spark and users give: a path, ``file:/``, ``file:///``, ``file://localhost/``,
percent-encoded partition folders, ``s3a://``/``s3n://`` for ``s3://``; and whatever is outside the
root is refused with a typed error (a ``ValueError`` in ``vacuum_work``, which may not import the
ledger; ``InvalidArgument`` on the ledger's side; ``LedgerError`` in an erasure).
"""

from __future__ import annotations

import urllib.parse
from pathlib import PurePosixPath

import pytest
from hypothesis import given, strategies as st

from ledger.audit.object_keys import warehouse_keys
from ledger.core.model import State
from ledger.errors import InvalidArgument, LedgerError
from vacuum_work.where import NotUnderRoot, Root, is_uri

# What a folder or file name of a table holds: partition values with ':', '=', '%', spaces, non-ASCII.
_SEGMENT = st.text(st.sampled_from("ab=:% -_.0Z\u00e4\u6f22"), min_size=1, max_size=8).filter(
    lambda s: s not in (".", ".."))
KEYS = st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join)

LOCAL_ROOTS = ["/data/wh", "/data/wh/", "file:///data/wh", "file:/data/wh", "file://localhost/data/wh/"]
S3_ROOTS = ["s3://bucket/wh", "s3a://bucket/wh/", "S3N://bucket/wh"]


def _local_spellings(key: str) -> tuple[list[str], list[str]]:
    """(spellings whose first reading is the key, spellings the key is one reading of)."""
    path = f"/data/wh/{key}"
    quoted = urllib.parse.quote(path)
    exact = [path, f"file:{quoted}", f"file://{quoted}", f"file://localhost{quoted}", PurePosixPath(path).as_uri()]
    return exact, [f"file:{path}"]  # Hadoop's Path in a plan: the name as on disk


def _s3_spellings(key: str) -> tuple[list[str], list[str]]:
    quoted = urllib.parse.quote(f"wh/{key}")
    exact = [f"{scheme}://bucket/{quoted}" for scheme in ("s3", "s3a", "s3n", "S3A")]
    return exact, [f"s3a://bucket/wh/{key}"]


@given(KEYS, st.sampled_from(LOCAL_ROOTS))
def test_r20_every_spelling_of_a_local_file_is_one_key(key: str, root: str) -> None:
    exact, raw = _local_spellings(key)
    parsed = Root.parse(root)
    for name in exact:
        assert parsed.keys(name)[0] == key, name
        assert warehouse_keys(name, root, State())[0] == key, name
    for name in raw:
        assert key in parsed.keys(name), name


@given(KEYS, st.sampled_from(S3_ROOTS))
def test_r20_every_spelling_of_an_object_is_one_key(key: str, root: str) -> None:
    exact, raw = _s3_spellings(key)
    for name in exact:
        assert Root.parse(root).keys(name)[0] == key, name
    for name in raw:
        assert key in Root.parse(root).keys(name), name


def test_r20_a_root_is_parsed_once_and_its_spellings_are_one_root() -> None:
    assert len({Root.parse(r) for r in LOCAL_ROOTS}) == 1
    assert len({Root.parse(r) for r in S3_ROOTS}) == 1
    assert Root.parse("s3://bucket").prefix == ""  # a whole bucket: keys start bare
    assert Root.parse("s3://bucket").keys("s3a://bucket/t-1/a.parquet") == ("t-1/a.parquet",)
    assert Root.parse("/").keys("/t-1/a.parquet") == ("t-1/a.parquet",)


def test_r9_whether_a_warehouse_is_on_a_disk_is_one_question_of_its_root() -> None:
    """A path or any ``file:`` URI is a folder on a disk; any other scheme is a store's keys. The
    ledger (``move_warehouse``), ``write_table`` and the probe of Spark's file systems all ask it."""
    assert all(Root.parse(r).on_disk for r in [*LOCAL_ROOTS, "/", "relative/wh"])
    assert not any(Root.parse(r).on_disk for r in [*S3_ROOTS, "gs://bucket", "abfss://c@acct.dfs.core.windows.net/wh"])
    assert Root.parse("file:///data/wh/").prefix == "/data/wh/"  # the folder a disk's root is
    assert [is_uri(n) for n in ("/data/wh", "wh", "file:/data/wh", "file:///data/wh", "s3://b/wh")] == \
        [False, False, True, True, True]


def test_r20_what_spark_says_it_wrote_is_read_as_the_paths_listed_in_the_write_folder() -> None:
    pytest.importorskip("pyspark")
    from spark_ops.tables import _in_folder

    folder, listed = Root.parse("/data/wh/t-1/_writes/w-1"), {"dt=a%3Ab/part-0.parquet", "part-1.parquet"}
    assert _in_folder(folder, "file:/data/wh/t-1/_writes/w-1/dt=a%253Ab/part-0.parquet", listed) == \
        "dt=a%3Ab/part-0.parquet"
    assert _in_folder(folder, "file:///data/wh/t-1/_writes/w-1/part-1.parquet", listed) == "part-1.parquet"
    assert _in_folder(folder, "file:/mnt/other/t-1/_writes/w-1/part-1.parquet", listed) == \
        "file:/mnt/other/t-1/_writes/w-1/part-1.parquet"  # elsewhere: not what this process sees


OUTSIDE = st.one_of(
    KEYS.map(lambda k: f"/data/other/{k}"),
    KEYS.map(lambda k: f"/data/whx/{k}"),  # a sibling whose name starts like the root's
    KEYS.map(lambda k: f"file:///data/{k}"),
    KEYS.map(lambda k: f"file://otherhost/data/wh/{k}"),
    KEYS.map(lambda k: f"s3://bucket/wh/{k}"),  # another store than the root's
    KEYS.map(lambda k: f"gs://bucket/wh/{k}"),
    st.sampled_from(["/data/wh", "/data/wh/", "file:///data/wh/"]),  # the root itself names no file
)


@given(OUTSIDE, st.sampled_from(LOCAL_ROOTS))
def test_r9_a_file_outside_the_root_is_refused_with_a_typed_error(name: str, root: str) -> None:
    with pytest.raises(NotUnderRoot):
        Root.parse(root).keys(name)
    assert issubclass(NotUnderRoot, ValueError)  # vacuum_work imports nothing of the ledger
    with pytest.raises(InvalidArgument):
        warehouse_keys(name, root, State())


@given(KEYS.map(lambda k: f"s3://other/wh/{k}") | KEYS.map(lambda k: f"s3a://bucket/whx/{k}")
       | KEYS.map(lambda k: f"/data/wh/{k}"))
def test_r9_an_object_outside_the_root_is_refused(name: str) -> None:
    with pytest.raises(NotUnderRoot):
        Root.parse("s3://bucket/wh").keys(name)


def test_r9_a_relative_name_is_not_read_as_a_key_under_the_root() -> None:
    with pytest.raises(NotUnderRoot, match="relative"):
        Root.parse("/data/wh").keys("t-1/a.parquet")


def test_r25_an_erasure_refuses_a_file_spark_read_outside_what_it_asked_for() -> None:
    pytest.importorskip("pyspark")
    from spark_ops.erase import _key_of

    files = {"t-1/dt=a%3Ab/p.parquet": ("t", "t-1", "dt=a%3Ab/p.parquet", 1, None)}
    root = Root.parse("/data/wh")
    assert _key_of("file:/data/wh/t-1/dt=a%253Ab/p.parquet", root, files) == "t-1/dt=a%3Ab/p.parquet"
    assert _key_of("file:/data/wh/t-1/dt=a%3Ab/p.parquet", root, files) == "t-1/dt=a%3Ab/p.parquet"  # as a plan
    for name in ("file:/data/other/t-1/p.parquet", "file:/data/wh/t-2/p.parquet"):
        with pytest.raises(LedgerError, match="did not ask for"):
            _key_of(name, root, files)
