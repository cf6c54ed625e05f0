"""Deletion receipts (R20): every object a vacuum deletes is in its run's receipt, provably.

A real local SparkSession deletes real files; the receipt is read back through the public API,
a key is proven deleted and the proof checked offline (``python -m ledger.audit``, in a process
of its own, with only an export and a checkpoint), and a receipt edited in the store is found by
``verify``. The S3 half (a batch that half failed) is in ``test_s3``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tracemalloc
import urllib.parse
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest
from hypothesis import given, strategies as st

from ledger import InvalidArgument, Ledger, LedgerCorrupt, ManualClock, NotDeleted
from ledger.audit.receipts import DeletionProof, DeletionProofs, NotDeletedKey, merkle_levels
from ledger.chain import deleted_leaf, leaf, merkle_root, read_deleted
from ledger.persistence.sqlite import SQLiteStore
from spark_ops import read_table, vacuum, write_table
from tests.forge import rehash
from tests.test_audit import raw
from tests.test_cli import event_count, invoke, ok, ok_json, refused
from tests.test_s3 import proxy, s3  # noqa: F401  (the S3 server, for the s3a spellings)
from vacuum_work.leaves import Summary, leaf_input, tree_root

REPO = Path(__file__).resolve().parent.parent
WEEK = timedelta(days=7)
BOTH_SESSIONS = True  # R24: every vacuum here runs on a classic and a Spark Connect session


def put_files(location: str, count: int, *, folders: int = 1) -> dict[str, int]:
    """Files written by hand (a pipeline's own jobs, outside the ledger): path -> size."""
    made = {}
    for i in range(count):
        path = os.path.join(location, f"day={i % folders:03d}", f"part-{i:06d}.parquet")
        if i < folders:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(b"x" * (i % 7 + 1))
        made[path] = i % 7 + 1
    return made


def files_under(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock):
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="auditor-test") as ledger:
        yield ledger


# --- the executors' hashing is the ledger's (R19: they cannot import it) ----------------------

def _rfc6962_mth(entries: list[bytes]) -> bytes:
    """RFC 6962 section 2.1's MTH, word for word: split at the largest power of two below n."""
    if not entries:
        return hashlib.sha256(b"").digest()
    if len(entries) == 1:
        return hashlib.sha256(b"\x00" + entries[0]).digest()
    k = 1
    while k * 2 < len(entries):
        k *= 2
    return hashlib.sha256(b"\x01" + _rfc6962_mth(entries[:k]) + _rfc6962_mth(entries[k:])).digest()


@given(st.lists(st.tuples(st.text(min_size=1, max_size=30), st.integers(0, 2**63 - 1)), max_size=40))
def test_r19_r20_the_executors_receipt_hashing_is_the_documented_one(leaves: list[tuple[str, int]]) -> None:
    """The executors write receipts with ``vacuum_work.leaves`` (the standard library's only), and
    ``ledger.chain`` checks them with the same functions: so the encoding is held to the one
    ``ledger.chain`` documents, spelt out here, for any keys (non-ASCII, empty tree, odd sizes);
    its root (the one root function, which the chain uses too) to RFC 6962's recursive definition,
    and the levels an audit keeps to read paths off (``merkle_levels``) to the same root;
    and its leaves read back to what went in."""
    encoded = [leaf_input(k, s) for k, s in leaves]
    assert encoded == [len(k.encode()).to_bytes(4, "big") + k.encode() + s.to_bytes(8, "big") for k, s in leaves]
    assert tree_root(encoded) == merkle_root(encoded) == _rfc6962_mth(encoded)
    if encoded:
        assert merkle_levels([leaf(e) for e in encoded])[-1] == [tree_root(encoded)]
    assert list(read_deleted(b"".join(encoded))) == leaves


def test_r20_a_receipt_leaf_and_part_root_match_hand_computed_vectors() -> None:
    """Fixed vectors, so that a change to the encoding or the tree on every side at once still fails:
    a leaf is ``u32(len(utf8(key))) || utf8(key) || u64(size)``; a part's root is RFC 6962's tree
    hash (three leaves: the first two paired, the third carried up)."""
    assert leaf_input("db/t/\u00e4.parquet", 258) == \
        b"\x00\x00\x00\x0f" + b"db/t/\xc3\xa4.parquet" + b"\x00\x00\x00\x00\x00\x00\x01\x02"
    assert tree_root([]).hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    entries = [leaf_input(k, n) for k, n in (("a", 1), ("b", 2), ("c", 3))]
    h = [hashlib.sha256(b"\x00" + e).digest() for e in entries]
    pair = hashlib.sha256(b"\x01" + h[0] + h[1]).digest()
    assert tree_root(entries) == hashlib.sha256(b"\x01" + pair + h[2]).digest()
    # A part's entry in its receipt's tree: text(first) || text(last) || u64(count) || u64(bytes) || root.
    assert Summary("a", "c", 3, 6, tree_root(entries).hex()).entry() == \
        b"\x00\x00\x00\x01a" + b"\x00\x00\x00\x01c" + (3).to_bytes(8, "big") + (6).to_bytes(8, "big") + tree_root(entries)


# --- receipts on a local disk ---------------------------------------------------------------

def test_r20_receipts_on_local_disk_prove_each_deleted_file_offline(spark, led, clock, tmp_path: Path) -> None:
    """A purge (files written outside the ledger), an expiry (an overwritten version's files) and a
    sweep in one run: the receipt holds exactly the files that went, with their sizes; each is
    proven deleted, and the proof checks out offline against an export and a checkpoint."""
    dropped = led.create_table("sales.old")
    made = put_files(dropped.location, 60, folders=4)
    led.drop_table("sales.old")
    df = spark.createDataFrame([(i, f"n{i}") for i in range(20)], "id int, name string")
    write_table(df.repartition(2), led, "sales.orders")
    clock.advance(timedelta(hours=1))
    write_table(df.repartition(1), led, "sales.orders", mode="overwrite")
    abandoned = led.begin_write("sales.orders", lease="1h")
    Path(abandoned.folder).mkdir(parents=True)
    (Path(abandoned.folder) / "part-0.parquet").write_bytes(b"half a file")
    led.abort_write(abandoned.id)
    before = files_under(tmp_path / "warehouse")
    clock.advance(WEEK * 2)

    report = vacuum(spark, led)
    gone = {p: s for p, s in before.items() if not os.path.exists(p)}
    assert set(made) <= set(gone) and len(gone) > len(made) + 2  # the purge, the old version, the swept write
    receipt = led.receipt(report.run_id)
    root = os.path.realpath(tmp_path / "warehouse") + os.sep
    assert receipt.files == len(gone) == report.files and receipt.bytes == sum(gone.values())
    assert receipt.finished_at is not None and receipt.root is not None and receipt.seq is not None
    held = {}
    for part in receipt.parts:
        keys = [p for p in gone if part.first <= os.path.realpath(p)[len(root):] <= part.last]
        assert keys and part.count <= len(keys)
        held.update((os.path.realpath(p)[len(root):], gone[p]) for p in keys)
    assert len(held) == len(gone)
    assert not (tmp_path / "warehouse" / ".retention-ledger").exists()  # the parts' scratch is gone

    for path, size in gone.items():
        proof = led.prove_deleted(path)  # a full path, or the key relative to the root, both do
        assert proof.verify() and proof.size == size and proof.run_id == report.run_id
        assert proof.receipt_root == receipt.root and proof.deleted_at == receipt.finished_at
    key = os.path.realpath(next(iter(made)))[len(root):]
    proof = led.prove_deleted(key)
    assert proof.key == key

    # Offline: the auditor has the proof, an export and a checkpoint taken after the receipt.
    (tmp_path / "proof.json").write_text(proof.to_json())
    led.export(tmp_path / "log.jsonl")
    led.checkpoint().write(tmp_path / "cp.json")
    checked = _audit("prove-deleted", tmp_path / "proof.json", tmp_path / "log.jsonl", tmp_path / "cp.json")
    assert checked.returncode == 0 and f"{key} ({proof.size} bytes) was deleted by vacuum run {report.run_id}" \
        in checked.stdout, checked.stderr
    # A proof edited (another size claimed) does not hold; nor one whose root is not the chain's.
    forged = json.loads(proof.to_json())
    forged["size"] += 1
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    bad = _audit("prove-deleted", tmp_path / "forged.json", tmp_path / "log.jsonl", tmp_path / "cp.json")
    assert bad.returncode == 1 and "does not hold" in bad.stderr
    other = DeletionProof(**{**_fields(proof), "receipt_root": "ab" * 32, "part_path": (), "parts": 1,
                             "part_index": 0})
    (tmp_path / "other.json").write_text(other.to_json())
    bad = _audit("prove-deleted", tmp_path / "other.json", tmp_path / "log.jsonl", tmp_path / "cp.json")
    assert bad.returncode == 1


def _fields(proof: DeletionProof) -> dict:
    return {a.name: getattr(proof, a.name) for a in attrs.fields(DeletionProof)}


def _audit(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger.audit", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_r20_a_checkpoint_taken_before_the_receipt_does_not_cover_it(spark, led, clock, tmp_path: Path) -> None:
    table = led.create_table("sales.old")
    put_files(table.location, 3)
    led.drop_table("sales.old")
    led.checkpoint().write(tmp_path / "early.json")
    clock.advance(WEEK * 2)
    report = vacuum(spark, led)
    proof = led.prove_deleted(led.receipt(report.run_id).parts[0].first)
    (tmp_path / "proof.json").write_text(proof.to_json())
    led.export(tmp_path / "log.jsonl")
    early = _audit("prove-deleted", tmp_path / "proof.json", tmp_path / "log.jsonl", tmp_path / "early.json")
    assert early.returncode == 1 and "after the checkpoint" in early.stderr and "take a checkpoint after" in early.stderr


def test_r20_a_receipt_edited_in_the_store_is_found_by_verify(spark, led, clock, tmp_path: Path) -> None:
    """The leaves are an attachment, outside the chain: one changed (a deleted key taken out, and
    put back compressed) no longer matches the digest its event carries, and ``verify`` says so;
    so does a receipt whose closing event was edited (the chain, then the fold, catch it)."""
    table = led.create_table("sales.old")
    put_files(table.location, 30, folders=2)
    led.drop_table("sales.old")
    clock.advance(WEEK * 2)
    report = vacuum(spark, led)
    assert led.verify().receipted == 30
    part = led.receipt(report.run_id).parts[0]
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        [(data,)] = db.execute("SELECT data FROM blobs WHERE digest = ?", (part.digest,)).fetchall()
        leaves = list(read_deleted(zlib.decompress(data)))
        edited = zlib.compress(b"".join(deleted_leaf(k, s) for k, s in leaves[1:]))
        db.execute("DROP TRIGGER blobs_no_update")  # a hand with the file, not the ledger
        db.execute("UPDATE blobs SET data = ? WHERE digest = ?", (edited, part.digest))
    with Ledger.open(tmp_path / "ledger.db") as again:
        with pytest.raises(LedgerCorrupt, match=f"receipt part of vacuum {report.run_id}.*does not match its digest"):
            again.verify()

    # A forger who rewrites the closing event's count, and every hash after it, meets the fold.
    with raw(tmp_path / "ledger.db") as db:
        [(seq, payload)] = db.execute("SELECT seq, payload FROM events WHERE type = 'VacuumReceipt'").fetchall()
        db.execute("UPDATE events SET payload = ? WHERE seq = ?",
                   (payload.replace('"files":30', '"files":29'), seq))
        assert db.total_changes == 1
    rehash(tmp_path / "ledger.db", after=seq - 1)
    with pytest.raises(LedgerCorrupt, match=f"event #{seq}'s receipt of vacuum {report.run_id} is not the one"):
        Ledger.open(tmp_path / "ledger.db").verify()


def test_r20_a_key_no_vacuum_deleted_is_not_deleted_and_bad_keys_are_refused(spark, led, clock, tmp_path) -> None:
    table = led.create_table("sales.old")
    put_files(table.location, 5)
    led.drop_table("sales.old")
    clock.advance(WEEK * 2)
    report = vacuum(spark, led)
    before = led.event_count()
    with pytest.raises(NotDeleted, match="is not in any vacuum's receipt"):
        led.prove_deleted("sales/never-written.parquet")
    first = led.receipt(report.run_id).parts[0].first
    with pytest.raises(NotDeleted):
        led.prove_deleted(first + "x")  # inside a part's key range, not in it
    with pytest.raises(InvalidArgument, match="not inside the warehouse"):
        led.prove_deleted("/etc/passwd")
    with pytest.raises(InvalidArgument, match="is the path of an object"):
        led.prove_deleted("")
    with pytest.raises(InvalidArgument, match="no vacuum run 'nope' is on record"):
        led.receipt("nope")
    assert led.event_count() == before


# --- every spelling Spark gives a file (issue 44) ---------------------------------------------

def _hadoop_path(spark, uri: str) -> str:
    """How Spark's plans print a file: Hadoop's ``Path`` of the URI, as text (not percent-encoded)."""
    jvm = spark.sparkContext._jvm
    return str(jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(uri)).toString())


@pytest.mark.classic_only
def test_r20_every_spelling_spark_gives_a_deleted_file_proves_it(spark, clock, tmp_path: Path) -> None:
    """Classic only: one spelling is Hadoop's ``Path`` of a URI, made here through the session's
    JVM, which a Connect client has no handle on (the vacuum itself runs on both in this module).

    Issue 44: ``prove_deleted`` of the path Spark's ``_metadata.file_path`` gives
    (``file:/...``) was ``NotDeleted`` for a file in the run's receipt. Every spelling Spark
    gives a file now proves it: ``_metadata.file_path`` and ``inputFiles()`` (URIs, with a space
    as ``%20`` and the ``%3A`` Spark writes for ':' in a partition value as ``%253A``), a plan's
    (Hadoop's ``Path``: ``file:/`` and the name as on disk), RFC 8089's ``file://localhost/``, the
    plain path, the warehouse-relative key, and the key relative to the table as ``versions``
    lists it (a write folder belongs to one table). The warehouse's own name has a space."""
    with Ledger.open(tmp_path / "ledger.db", warehouse=tmp_path / "my warehouse", clock=clock) as led:
        table = led.create_table("sales.events")
        df = spark.createDataFrame([(1, "2024-01-01 10:00:00"), (2, "a=b%c d#e"), (3, "plain")],
                                   "id int, dt string")
        write_table(df.repartition(1), led, "sales.events", partition_by=["dt"])
        read = read_table(spark, led, "sales.events")
        input_files = sorted(read.inputFiles())
        metadata = sorted(r[0] for r in read.select("_metadata.file_path").distinct().collect())
        files = {f.path: f.size for f in led.versions("sales.events")[0].files}
        assert any("%3A" in path for path in files) and any("%3D" in path for path in files)  # Spark's escapes
        led.drop_table("sales.events")
        clock.advance(WEEK * 2)
        report = vacuum(spark, led)
        root = led.warehouse
        assert " " in root
        for relative, size in files.items():
            key = f"{table.id}/{relative}"
            local = f"{root}/{key}"
            assert not os.path.exists(local)
            [meta] = [m for m in metadata if urllib.parse.unquote(m) == f"file:{local}"]
            [listed] = [i for i in input_files if urllib.parse.unquote(i) == f"file://{local}"]
            spellings = [meta, listed, _hadoop_path(spark, listed), "file://localhost" + urllib.parse.quote(local),
                         local, key, relative]
            for spelling in spellings:
                proof = led.prove_deleted(spelling)
                assert (proof.key, proof.size, proof.run_id) == (key, size, report.run_id), spelling
                assert proof.verify()


def test_r20_a_spelling_that_could_name_two_deleted_files_is_refused(spark, led, clock, tmp_path: Path) -> None:
    """A URI is percent-decoded, but a plan prints a file's name as it is on disk, ``%3D`` and all,
    with ``file:`` in front: ``file:.../k=a%3Db/x`` is the file ``k=a=b/x`` as a URI and the file
    ``k=a%3Db/x`` as a plan prints it. When a receipt holds both, the proof would be a guess:
    ``InvalidArgument`` names both keys and nothing is recorded. A key relative to a table's own
    folder that no write folder starts is ``NotDeleted``, saying the key starts with the table's id."""
    table = led.create_table("sales.old")
    for folder in ("k=a=b", "k=a%3Db", "k=c%3Dd"):
        os.makedirs(os.path.join(table.location, folder))
        Path(table.location, folder, "x.parquet").write_bytes(b"12345")
    led.drop_table("sales.old")
    clock.advance(WEEK * 2)
    vacuum(spark, led)
    before = led.event_count()
    with pytest.raises(InvalidArgument, match=f"could name {table.id}/k=a=b/x.parquet or "
                                              f"{table.id}/k=a%3Db/x.parquet"):
        led.prove_deleted(f"file:{table.location}/k=a%3Db/x.parquet")
    assert led.prove_deleted(f"file:{table.location}/k=a%253Db/x.parquet").key == f"{table.id}/k=a%3Db/x.parquet"
    assert led.prove_deleted(f"file:{table.location}/k=c%3Dd/x.parquet").key == f"{table.id}/k=c%3Dd/x.parquet"
    with pytest.raises(NotDeleted, match="starts with its table's id"):
        led.prove_deleted("k=a=b/x.parquet")
    assert led.event_count() == before


@pytest.mark.classic_only
def test_r20_on_s3_the_s3a_and_s3n_spellings_prove_an_s3_key(spark, s3, tmp_path: Path) -> None:
    """Classic only: the S3 endpoint reaches the classic session's executors from this process;
    a Connect server's executors are given it when the server starts, as ``test_s3``'s own
    server is (the vacuum on S3 runs on Connect there).

    On an object store Spark names a file ``s3a://`` (Hadoop's connector) where the warehouse
    says ``s3://``: one bucket, one key, proven either way, percent-encoded as Spark's URIs are."""
    from tests.test_s3 import put
    clock = ManualClock(datetime.now(timezone.utc))  # the store's LastModified is on the real clock
    with Ledger.open(tmp_path / "ledger.db", warehouse=f"s3://lake/wh-{tmp_path.name}", clock=clock) as lake:
        table = lake.create_table("sales.old")
        relative = "dt=2024-01-01 10%3A00%3A00/part-0.parquet"
        put(f"{table.location}/{relative}", b"12345")
        lake.drop_table("sales.old")
        clock.advance(WEEK * 2)
        report = vacuum(spark, lake)
        key = f"{table.id}/{relative}"
        after = table.location[len("s3://"):]
        for spelling in (f"s3://{after}/{relative}", f"s3a://{after}/{urllib.parse.quote(relative)}",
                         f"s3n://{after}/{urllib.parse.quote(relative)}", f"s3a://{after}/{relative}"):
            proof = lake.prove_deleted(spelling)
            assert (proof.key, proof.size, proof.run_id) == (key, 5, report.run_id) and proof.verify(), spelling
        with pytest.raises(InvalidArgument, match="not inside the warehouse"):
            lake.prove_deleted(f"s3a://other/wh-{tmp_path.name}/{key}")


def test_r20_the_cli_shows_a_receipt_and_writes_a_proof(spark, led, clock, tmp_path: Path) -> None:
    table = led.create_table("sales.old")
    made = put_files(table.location, 4)
    led.drop_table("sales.old")
    clock.advance(WEEK * 2)
    report = vacuum(spark, led)
    db = tmp_path / "ledger.db"
    shown = ok_json(db, "receipt", report.run_id)
    assert shown["files"] == 4 and shown["root"] == led.receipt(report.run_id).root
    assert "4 objects deleted" in ok(db, "receipt", report.run_id).stdout
    ok(db, "prove-deleted", next(iter(made)), "--out", str(tmp_path / "p.json"))
    assert DeletionProof.read(tmp_path / "p.json").verify()
    before = event_count(db)
    refused(db, "prove-deleted", "sales/nothing.parquet", error="NotDeleted")
    assert event_count(db) == before


# --- many keys at once (issue 44) ---------------------------------------------------------------

class CountingStore(SQLiteStore):
    """A ledger file that notes every attachment read (a receipt part is one)."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.reads: list[str] = []

    def read_blob(self, digest: str) -> bytes | None:
        self.reads.append(digest)
        return super().read_blob(digest)


def test_r20_many_keys_are_proven_in_order_reading_each_part_once(spark, clock, tmp_path: Path) -> None:
    """Issue 44: proving a run's keys one by one read and hashed a whole part (up to 10,000 objects)
    for each key. ``prove_deleted_many`` reads each part once, and answers every key in the order
    asked: its proof (the one ``prove_deleted`` gives), or a ``NotDeletedKey`` saying why there is
    none, typed, not dropped; ``require_all()`` raises ``NotDeleted`` naming those."""
    store = CountingStore(tmp_path / "ledger.db")
    with Ledger(store, clock=clock, actor="auditor-test") as led:
        table = led.create_table("sales.old")
        made = put_files(table.location, 3_000, folders=3)
        led.drop_table("sales.old")
        clock.advance(WEEK * 2)
        report = vacuum(spark, led)
        parts = led.receipt(report.run_id).parts
        assert len(parts) >= 2
        root = led.warehouse + "/"
        spell = (lambda p: p, lambda p: f"file:{p}", lambda p: p[len(root):])  # a path, Spark's URI, the key
        spelt = [(spell[i % 3](p), p) for i, p in enumerate(made)]
        missing = [("sales/never.parquet", None), (f"{table.id}/day=000/missing.parquet", None)]
        asked = [missing[0], *spelt[:1500], missing[1], *spelt[1500:]]
        before = led.event_count()
        store.reads.clear()
        proofs = led.prove_deleted_many(iter(name for name, _ in asked))
        assert sorted(store.reads) == sorted(p.digest for p in parts)  # each part once, and nothing else
        assert len(proofs) == len(asked) == 3_002 and proofs.verify() and len(proofs.proofs) == 3_000
        for (name, path), answer in zip(asked, proofs):
            if path is None:
                assert isinstance(answer, NotDeletedKey) and answer.key == name
                assert "not in any vacuum's receipt" in answer.reason
            else:
                assert isinstance(answer, DeletionProof) and answer.run_id == report.run_id
                assert (answer.key, answer.size) == (path[len(root):], made[path])
        assert [a.key for a in proofs.not_deleted] == ["sales/never.parquet", f"{table.id}/day=000/missing.parquet"]
        proven = [(name, answer) for (name, path), answer in zip(asked, proofs) if path is not None]
        for name, answer in proven[::250]:
            assert led.prove_deleted(name) == answer
        with pytest.raises(NotDeleted, match=f"2 of the 3002 keys are in no vacuum's receipt: sales/never.parquet, "
                                             f"{table.id}/day=000/missing.parquet; "):
            proofs.require_all()
        assert led.prove_deleted_many(name for name, _ in spelt[:5]).require_all().proofs == proofs.proofs[:5]
        assert len(led.prove_deleted_many([])) == 0

        store.reads.clear()
        with pytest.raises(InvalidArgument, match="not inside the warehouse"):
            led.prove_deleted_many([spelt[0][0], "/etc/passwd"])
        with pytest.raises(InvalidArgument, match="for one key, prove_deleted"):
            led.prove_deleted_many(spelt[0][0])  # a string is an iterable of characters, not of keys
        with pytest.raises(InvalidArgument, match="must be a list"):
            led.prove_deleted_many(None)  # type: ignore[arg-type]
        assert store.reads == [] and led.event_count() == before


def test_r20_a_bundle_of_proofs_is_checked_offline(spark, led, clock, tmp_path: Path) -> None:
    """The proofs of many keys are one file: the offline check (``python -m ledger.audit
    prove-deleted``, a process of its own) checks each proof against the export and the
    checkpoint. A proof edited in the bundle fails it; a bundle with a key not deleted is exit 1
    naming the key (every proof in it still checked)."""
    table = led.create_table("sales.old")
    made = put_files(table.location, 40, folders=2)
    led.drop_table("sales.old")
    clock.advance(WEEK * 2)
    report = vacuum(spark, led)
    bundle = led.prove_deleted_many(made)
    bundle.write(tmp_path / "bundle.json")
    assert DeletionProofs.read(tmp_path / "bundle.json") == bundle
    with pytest.raises(InvalidArgument, match="exists; refusing to replace it"):
        led.prove_deleted_many(list(made)[:1]).write(tmp_path / "bundle.json")
    assert DeletionProofs.read(tmp_path / "bundle.json") == bundle
    led.export(tmp_path / "log.jsonl")
    led.checkpoint().write(tmp_path / "cp.json")
    checked = _audit("prove-deleted", tmp_path / "bundle.json", tmp_path / "log.jsonl", tmp_path / "cp.json")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith(f"ok: all 40 keys were deleted, by vacuum run {report.run_id}"), checked.stdout

    text = (tmp_path / "bundle.json").read_text().splitlines()
    edited = json.loads(text[5].rstrip(","))
    edited["size"] += 1
    text[5] = json.dumps(edited) + ","
    (tmp_path / "edited.json").write_text("\n".join(text))
    bad = _audit("prove-deleted", tmp_path / "edited.json", tmp_path / "log.jsonl", tmp_path / "cp.json")
    assert bad.returncode == 1 and f"the proof that {edited['key']} was deleted does not hold" in bad.stderr

    led.prove_deleted_many([*made, "sales/nothing.parquet"]).write(tmp_path / "short.json")
    short = _audit("prove-deleted", tmp_path / "short.json", tmp_path / "log.jsonl", tmp_path / "cp.json")
    assert short.returncode == 1 and short.stdout == ""
    assert short.stderr.startswith("error: NotDeleted: 40 of the 41 keys in the bundle are proven deleted; "
                                   "sales/nothing.parquet is not in any vacuum's receipt"), short.stderr
    (tmp_path / "cut.json").write_text("\n".join(text[:10]))
    cut = _audit("prove-deleted", tmp_path / "cut.json", tmp_path / "log.jsonl", tmp_path / "cp.json")
    assert cut.returncode == 1 and "error: InvalidArgument: not a deletion proof or a bundle" in cut.stderr


def test_r20_the_cli_proves_keys_from_a_file_into_one_bundle(spark, led, clock, tmp_path: Path) -> None:
    """``prove-deleted --keys-from FILE --out BUNDLE``: keys one a line, spelt any way, proven
    at once into one bundle. A key no receipt holds is exit 1 naming it, the bundle written all the
    same (its answer says why); nothing is recorded either way."""
    table = led.create_table("sales.old")
    made = put_files(table.location, 30, folders=3)
    led.drop_table("sales.old")
    clock.advance(WEEK * 2)
    report = vacuum(spark, led)
    db = tmp_path / "ledger.db"
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"file://{p}\n" for p in made) + "\n")  # a blank line, as editors leave
    shown = ok(db, "prove-deleted", "--keys-from", str(keys), "--out", str(tmp_path / "b.json")).stdout
    assert shown == f"30 of 30 keys proven deleted (by vacuum run {report.run_id}); proofs written to " \
                    f"{tmp_path / 'b.json'}\n"
    bundle = DeletionProofs.read(tmp_path / "b.json")
    assert len(bundle) == 30 and bundle.verify() and [p.size for p in bundle.proofs] == list(made.values())
    assert ok_json(db, "prove-deleted", "--keys-from", str(keys))["proven"] == 30
    lines = ok(db, "prove-deleted", "--keys-from", str(keys)).stdout.splitlines()
    assert len(lines) == 31 and lines[0].endswith(f"deleted by vacuum run {report.run_id}") and \
        lines[0].startswith(os.path.relpath(next(iter(made)), led.warehouse))

    keys.write_text("".join(f"{p}\n" for p in made) + "sales/nothing.parquet\n")
    before = event_count(db)
    result = invoke(db, "prove-deleted", "--keys-from", str(keys), "--out", str(tmp_path / "c.json"))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("error: NotDeleted: sales/nothing.parquet is not in any vacuum's receipt")
    assert result.stderr.count("\n") == 1 and event_count(db) == before
    written = DeletionProofs.read(tmp_path / "c.json")
    assert len(written.proofs) == 30 and [a.key for a in written.not_deleted] == ["sales/nothing.parquet"]


# --- the driver's memory ---------------------------------------------------------------------

def test_r20_a_receipt_part_is_sealed_in_a_fraction_of_what_its_leaves_take(tmp_path: Path) -> None:
    """A receipt (a task's; the driver's too, deleting what the ledger knows on a store) holds up to
    ``PART_LEAVES`` deleted objects, then seals them into a part: sorted, encoded, compressed, hashed,
    while every thread deleting for it waits. It encoded them whole, joined that, and hashed the tree
    level by level: 1.6 times the leaves' own memory more, at the driver's peak. Now it encodes a few
    hundred at a time and hashes as it goes: less than half; the part is the same part."""
    from spark_ops.executor import receipts
    from spark_ops.executor.stores import storage_for
    root = str(tmp_path)
    receipt = receipts.DeletionLog(storage_for(root), "run-1")
    deleted = [(f"{root}/sales/t/_writes/{i % 97:032x}/part-{i:06d}.parquet", i % 7)
               for i in range(receipts.PART_LEAVES - 1)]
    tracemalloc.start()
    try:
        receipt.add_many(deleted)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        (part,) = receipt.close()
        sealing = tracemalloc.get_traced_memory()[1] - held
    finally:
        tracemalloc.stop()
    assert receipts.summarize(receipts.read_part(root, part.where), part.where) == part
    assert part.count == len(deleted) and part.bytes == sum(size for _, size in deleted)
    assert sealing < held / 2, (sealing, held)


def test_r20_a_purge_of_200000_files_leaves_the_drivers_memory_flat(spark, led, clock, tmp_path: Path) -> None:
    """200,000 files in 200 folders of one dropped table: every one is in the receipt, yet the
    driver never held their list (Python's own count of what it allocated, at its peak, stays far
    below what 200,000 keys and sizes take in memory). The tasks write their parts to the run's
    scratch folder; the driver records them a few at a time. A small vacuum runs first, so that
    what the first vacuum of a process allocates once (its modules, Spark's first job of the kind)
    is not counted as the files': run alone, that put the peak at 1.03 of the bound."""
    warm = led.create_table("sales.warm")
    warmed = put_files(warm.location, 10, folders=2)
    led.drop_table("sales.warm")
    clock.advance(WEEK * 2)
    assert vacuum(spark, led).files == len(warmed)
    table = led.create_table("sales.huge")
    made = put_files(table.location, 200_000, folders=200)
    led.drop_table("sales.huge")
    clock.advance(WEEK * 2)
    as_list = sum(sys.getsizeof(os.path.relpath(p, tmp_path)) + 80 for p in made)  # the keys, and a tuple each
    tracemalloc.start()
    try:
        report = vacuum(spark, led)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    receipt = led.receipt(report.run_id)
    assert receipt.files == 200_000 == report.files and receipt.bytes == sum(made.values())
    assert peak < as_list / 10, (peak, as_list)
    assert led.verify().receipted == 200_000 + len(warmed)
