"""The auditor's ledger (R16, R17): the hash chain, checkpoints and proofs, as-of replay,
history, export and the offline verifier.

Tampering is done as an outsider would: with ``sqlite3`` on a copy of a real ledger
file (the append-only triggers dropped first, as anyone with the file can). Detection
means ``verify`` (or opening the file) raises ``LedgerCorrupt``, naming an event.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from ledger import LEDGER, Checkpoint, Ledger, ManualClock, Scope
from ledger.clock import iso_utc
from ledger.audit import generate_key, verify_export
from ledger.chain import (
    consistency_proof, inclusion_proof, merkle_root, root_from_inclusion, verify_consistency,
)
from ledger.persistence import snapshot
from ledger.core.model import State, fold_rows
from ledger.errors import (
    CheckpointInvalid, IncompatibleLedger, InvalidArgument, InvalidTime, LedgerCorrupt, LedgerError, TableNotFound,
)
from tests.conftest import T0
from tests.forge import forge, rehash
from vacuum_work import Result

FORMAT1 = Path(__file__).parent / "data" / "format1-0.1.0.db"


# --- a small ledger with one of most kinds of event -----------------------------------------

def build_small(path: Path, *, clock: ManualClock | None = None, history_every: int = 25_000) -> ManualClock:
    """Tables created, dropped, undropped, renamed on undrop; a database dropped; retention;
    writes committed, aborted and overwritten; a mark; a vacuum that purges. ~30 events.
    Its warehouse root is recorded absolute, so copies of the file elsewhere agree on locations."""
    clock = clock or ManualClock(T0)
    with Ledger.open(path, clock=clock, actor="alice@etl-3", history_every=history_every,
                     warehouse=path.parent / "warehouse") as led:
        led.set_retention(LEDGER, timedelta(days=7))
        for name in ("sales.orders", "sales.items", "hr.people", "hr.pay"):
            led.create_table(name)
        clock.advance(timedelta(hours=1))
        for n in range(3):
            w = led.begin_write("sales.orders")
            led.commit_write(w.id, [(f"{w.relative_folder}/part-{n}.parquet", 100 + n)],
                             mode="overwrite" if n == 2 else "append")
            clock.advance(timedelta(minutes=10))
        led.abort_write(led.begin_write("sales.items").id)
        led.drop_table("sales.items")
        led.undrop_table("sales.items", new_name="sales.items_restored")
        led.drop_table("sales.items_restored")
        led.drop_database("hr")
        clock.advance(timedelta(days=8))
        led.advance_retention_mark("sales.orders", clock())
        run = led.start_vacuum()
        run.finish([Result(t, 1, 10) for t in run.plan.purges])
        led.create_table("sales.items")
        led.maintain()  # as a pipeline does after its vacuum: the snapshots as_of and opens start from
    return clock


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("small") / "ledger.db"
    build_small(path)
    return path


def copy_of(db: Path, dest: Path) -> Path:
    shutil.copy(db, dest)
    return dest


def raw(path: Path) -> sqlite3.Connection:
    """The file as anyone with sqlite3 sees it, with the append-only triggers out of the way."""
    conn = sqlite3.connect(path, isolation_level=None)
    for trigger in ("events_no_update", "events_no_delete"):
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    return conn


def fingerprint(led: Ledger) -> tuple:
    """What 'the ledger unchanged' means: the same events, ending in the same hash."""
    return led.event_count(), led.checkpoint().head


def detected(path: Path) -> LedgerCorrupt | None:
    """Open and verify; the LedgerCorrupt raised, or None if the file passed."""
    try:
        with Ledger.open(path, create=False) as led:
            led.verify()
    except LedgerCorrupt as exc:
        return exc
    return None


# --- R16: the chain as documented ----------------------------------------------------------

def documented_hash(previous: bytes, seq: int, stream: str, version: int, type_: str, schema: int,
                    time_: int, actor: str, payload: str) -> bytes:
    """README's canonical encoding, re-implemented here from the text alone."""
    def text(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">I", len(b)) + b
    return hashlib.sha256(previous + struct.pack(">QQIq", seq, version, schema, time_) + text(stream)
                          + text(type_) + text(actor) + text(payload)).digest()


def test_r16_every_stored_hash_is_the_documented_encoding_chained(small_db: Path) -> None:
    assert assert_documented_chain(small_db) > 20


def assert_documented_chain(path: Path) -> int:
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT seq, stream, version, type, schema_version, time, actor, payload, hash "
                        "FROM events ORDER BY seq").fetchall()
    previous = bytes(32)
    for row in rows:
        previous = documented_hash(previous, *row[:8])
        assert previous.hex() == row[8], f"event #{row[0]}"
    with Ledger.open(path, create=False) as led:
        assert led.checkpoint().head == rows[-1][8]
    return len(rows)


# --- R16: RFC 6962's own test vectors ------------------------------------------------------

# From Certificate Transparency's reference implementation (merkle_tree_test.cc): leaf inputs,
# and the tree hash of each prefix of them.
CT_LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f")]
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = [  # (leaf index, 1-based as in the source; tree size; audit path)
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (2, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]
CT_CONSISTENCY = [  # (old size, new size, proof)
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]


def test_r16_rfc6962_test_vectors_for_the_merkle_tree_hash_pass() -> None:
    assert merkle_root([]).hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    for size, expected in enumerate(CT_ROOTS, start=1):
        assert merkle_root(CT_LEAVES[:size]).hex() == expected, f"tree of {size}"


def test_r16_rfc6962_inclusion_and_consistency_vectors_pass() -> None:
    for index, size, path in CT_INCLUSION:
        assert [p.hex() for p in inclusion_proof(index - 1, CT_LEAVES[:size])] == path
        root = root_from_inclusion(index - 1, size, CT_LEAVES[index - 1], [bytes.fromhex(p) for p in path])
        assert root is not None and root.hex() == CT_ROOTS[size - 1]
    for old, new, path in CT_CONSISTENCY:
        proof = consistency_proof(old, CT_LEAVES[:new])
        assert [p.hex() for p in proof] == path, (old, new)
        assert verify_consistency(old, new, bytes.fromhex(CT_ROOTS[old - 1]), bytes.fromhex(CT_ROOTS[new - 1]),
                                  proof)


def test_r16_every_proof_between_small_trees_verifies_and_a_wrong_one_does_not() -> None:
    entries = [hashlib.sha256(bytes([i])).digest() for i in range(19)]
    roots = [merkle_root(entries[:n]) for n in range(len(entries) + 1)]
    for new in range(1, len(entries) + 1):
        for i in range(new):
            proof = inclusion_proof(i, entries[:new])
            assert root_from_inclusion(i, new, entries[i], proof) == roots[new]
            assert root_from_inclusion(i, new, entries[(i + 1) % new], proof) != roots[new] or new == 1
        for old in range(1, new + 1):
            proof = consistency_proof(old, entries[:new])
            assert verify_consistency(old, new, roots[old], roots[new], proof)
            if old < new:
                assert not verify_consistency(old, new, roots[old - 1] if old > 1 else roots[new], roots[new], proof)


# --- R16: tampering with the file ----------------------------------------------------------

FLIP_COLUMNS = ("payload", "hash", "time", "stream", "actor")
MASKS = (0x01, 0x20, 0x80, 0xFF)  # rotated by position: ASCII stays ASCII, or becomes invalid UTF-8


def flipped(value: object, index: int, mask: int) -> tuple[object, int]:
    """``value`` with byte ``index`` of its stored form XOR ``mask``; returns (new value, bytes)."""
    if isinstance(value, int):
        data = bytearray(struct.pack(">q", value))
        data[index] ^= mask
        return struct.unpack(">q", bytes(data))[0], 8
    data = bytearray(str(value).encode())
    data[index] ^= mask
    return bytes(data), len(data)


def test_r16_every_single_byte_flip_in_the_events_table_is_detected(small_db: Path, tmp_path: Path,
                                                                    record_property) -> None:
    """Each byte of each event's payload, hash, time, stream and actor, flipped in turn in a copy
    of the file (and flipped back), is caught by verify: target 100%."""
    path = copy_of(small_db, tmp_path / "flips.db")
    conn = raw(path)
    rows = conn.execute(f"SELECT seq, {', '.join(FLIP_COLUMNS)} FROM events ORDER BY seq").fetchall()
    flips, missed = 0, []
    with Ledger.open(path, create=False) as led:
        for seq, *values in rows:
            for column, value in zip(FLIP_COLUMNS, values):
                size = 8 if isinstance(value, int) else len(str(value).encode())
                for index in range(size):
                    bad, _ = flipped(value, index, MASKS[index % len(MASKS)])
                    setter = "CAST(? AS TEXT)" if isinstance(bad, bytes) else "?"
                    conn.execute(f"UPDATE events SET {column} = {setter} WHERE seq = ?", (bad, seq))
                    try:
                        led.verify()
                        missed.append((seq, column, index))
                    except LedgerCorrupt as exc:
                        assert f"#{seq}" in str(exc) or "event" in str(exc), str(exc)
                    finally:
                        conn.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (value, seq))
                    flips += 1
        record_property("byte_flips", flips)
        print(f"\n{flips} single-byte flips, {flips - len(missed)} detected ({len(missed)} missed)")
        assert missed == [], f"{len(missed)} of {flips} flips passed verify: {missed[:10]}"
        assert flips > 2_000
        assert led.verify().events == len(rows)  # flipped back: the copy is whole again


def test_r16_a_flipped_hash_names_the_first_bad_event_and_why(small_db: Path, tmp_path: Path) -> None:
    path = copy_of(small_db, tmp_path / "l.db")
    with raw(path) as conn:
        conn.execute("UPDATE events SET payload = replace(payload, 'sales.orders', 'sales.ordurs') WHERE seq = 2")
    found = detected(path)
    assert found is not None
    assert "#2" in str(found) and "hash" in str(found)


def test_r16_an_edit_that_also_breaks_a_rule_is_named_as_the_edit(small_db: Path, tmp_path: Path) -> None:
    """The chain is checked on each row before the fold meets it: what ``verify`` names is the edit
    (the event no longer matches its hash), not the rule it then seems to break."""
    path = copy_of(small_db, tmp_path / "l.db")
    with Ledger.open(path, create=False) as led:
        led.maintain()  # so that opening it does not fold the edit: verify must
    with raw(path) as conn:
        seq = conn.execute("SELECT min(seq) FROM events WHERE type = 'TableUndropped'").fetchone()[0]
        conn.execute("UPDATE events SET payload = '{}' WHERE seq = ?", (seq,))
    with Ledger.open(path, create=False) as led:
        with pytest.raises(LedgerCorrupt, match=f"event #{seq} does not match its hash"):
            led.verify()


def _no_snapshots(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        for table in ("snapshots", "snapshot_entries", "snapshot_generations"):
            conn.execute(f"DELETE FROM {table}")


def test_r22_a_first_open_folds_in_its_own_process_and_says_maintain_stores_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Nothing stored to start from: the open folds the log itself (no process beside it), answers,
    and says in one log record that ``maintain`` stores the state for the next opens (storing it
    here would double the wait, and no answer needs it); ``maintain`` does, and the next open
    reads it instead of folding."""
    path = tmp_path / "l.db"
    build_small(path)
    with Ledger.open(path, create=False) as led:
        truth, head = answers(led), led.event_count()
    _no_snapshots(path)
    before = children()
    with caplog.at_level("WARNING", "ledger"), Ledger.open(path, create=False, snapshot_every=5) as led:
        assert children() == before  # nothing started beside the open
        assert answers(led) == truth and led.runner.cache.generation is None
        [said] = [r.getMessage() for r in caplog.records if r.name.startswith("ledger")]
        assert said == (f"{path}: no stored state fits this release and this log, so the open folded all {head} "
                        "events; run `retention-ledger maintain` (or Ledger.maintain()) to store it, and later "
                        "opens read it instead")
        assert led.store.latest_generation() is None
        assert led.maintain().newest == head
    with Ledger.open(path, create=False) as led:
        assert led.runner.cache.snapshot_seq == head and answers(led) == truth
    assert children() == before


def test_r17_r22_maintain_stores_the_states_as_of_starts_from(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    build_small(path)
    with Ledger.open(path, create=False) as led:
        head, past = led.event_count(), answers(led.as_of(seq=12))
    _no_snapshots(path)
    with Ledger.open(path, create=False, history_every=5) as led:
        done = led.maintain()
        points = [*range(5, head + 1, 5), *([head] if head % 5 else [])]
        assert done.done and done.written == len(points) == done.generations and done.newest == head
        assert [g.seq for g in led.store.generations()] == points
        again = led.maintain()  # nothing missing: nothing written
        assert again.done and again.written == 0 and again.generations == len(points)
        assert answers(led.as_of(seq=12)) == past
        report = led.verify()
        assert (report.generations_compared, report.generations_discarded, report.snapshot_discarded) == \
            (len(points), 0, False)


def children() -> set[int]:
    """This process's living child processes (Linux: read from /proc)."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read().decode(errors="replace")
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[1]) == me and fields[0] != "Z":
                found.add(int(entry))
    return found


def test_r16_an_inserted_row_is_detected(small_db: Path, tmp_path: Path) -> None:
    """Forged with a correct hash for its place, then later events renumbered: the next event's
    stored hash no longer follows."""
    path = copy_of(small_db, tmp_path / "l.db")
    with raw(path) as conn:
        last = conn.execute("SELECT max(seq) FROM events").fetchone()[0]
        for seq in range(last, 5, -1):
            conn.execute("UPDATE events SET seq = seq + 1 WHERE seq = ?", (seq,))
    # the chain up to #5 is intact; #6 is the forger's, chained to #5
    rows = sqlite3.connect(path).execute("SELECT seq FROM events WHERE seq <= 5").fetchall()
    assert len(rows) == 5
    conn = raw(path)
    prev = conn.execute("SELECT hash, time FROM events WHERE seq = 5").fetchone()
    payload = '{"scope":"database:sales","seconds":86400}'
    h = documented_hash(bytes.fromhex(prev[0]), 6, "retention:database:sales", 1, "RetentionSet", 1, prev[1] + 1,
                        "mallory", payload)
    conn.execute("INSERT INTO events(seq, stream, version, type, schema_version, time, actor, payload, hash) "
                 "VALUES (6, 'retention:database:sales', 1, 'RetentionSet', 1, ?, 'mallory', ?, ?)",
                 (prev[1] + 1, payload, h.hex()))
    conn.close()
    found = detected(path)
    assert found is not None and "#7" in str(found)


def test_r16_a_deleted_row_is_detected(small_db: Path, tmp_path: Path) -> None:
    path = copy_of(small_db, tmp_path / "gap.db")
    with raw(path) as conn:
        conn.execute("DELETE FROM events WHERE seq = 9")
    found = detected(path)
    assert found is not None and "#9" in str(found) or "#10" in str(found)
    # and with the later events renumbered to close the gap
    path = copy_of(small_db, tmp_path / "closed.db")
    with raw(path) as conn:
        last = conn.execute("SELECT max(seq) FROM events").fetchone()[0]
        conn.execute("DELETE FROM events WHERE seq = 9")
        for seq in range(10, last + 1):
            conn.execute("UPDATE events SET seq = seq - 1 WHERE seq = ?", (seq,))
    found = detected(path)
    assert found is not None and "#9" in str(found)


def test_r16_two_swapped_rows_are_detected(small_db: Path, tmp_path: Path) -> None:
    path = copy_of(small_db, tmp_path / "swap.db")
    with raw(path) as conn:
        conn.execute("UPDATE events SET seq = -1 WHERE seq = 3")
        conn.execute("UPDATE events SET seq = 3 WHERE seq = 4")
        conn.execute("UPDATE events SET seq = 4 WHERE seq = -1")
    found = detected(path)
    # One of the two swapped rows is named: the fold meets the swap at #4 (timed before #3, now
    # that the two events sit on streams of their own databases), the chain walk at #3.
    assert found is not None and ("event #3 " in str(found) or "event #4 " in str(found)), found


def test_r16_a_row_appended_with_a_wrong_hash_is_detected(small_db: Path, tmp_path: Path) -> None:
    path = copy_of(small_db, tmp_path / "l.db")
    seq = forge(path, stream="retention:ledger", type="RetentionSet", payload='{"scope":"ledger","seconds":86400}',
                hash="ab" * 32)
    found = detected(path)
    assert found is not None and f"#{seq}" in str(found)


def test_r16_a_rewritten_log_with_a_fresh_chain_is_caught_only_by_a_checkpoint(small_db: Path,
                                                                               tmp_path: Path) -> None:
    """A forger who knows the encoding edits an old event and recomputes every hash after it: the
    chain alone cannot tell, a checkpoint taken before can."""
    path = copy_of(small_db, tmp_path / "l.db")
    with Ledger.open(path, create=False) as led:
        cp = led.checkpoint()
    with raw(path) as conn:
        conn.execute("UPDATE events SET actor = 'someone-else' WHERE seq = 6")
    rehash(path, after=5)
    assert detected(path) is None
    with Ledger.open(path, create=False) as led:
        with pytest.raises(LedgerCorrupt, match=f"event #{cp.seq} is not the event the checkpoint ended at"):
            led.verify(against=cp)


def test_r16_a_log_truncated_and_re_extended_after_a_checkpoint_fails_verify_against(small_db: Path,
                                                                                    tmp_path: Path) -> None:
    path = copy_of(small_db, tmp_path / "l.db")
    clock = ManualClock(T0 + timedelta(days=30))
    with Ledger.open(path, create=False, clock=clock) as led:
        cp = led.checkpoint()
        assert led.verify(against=cp).checkpoint == cp
    with raw(path) as conn:
        conn.execute("DELETE FROM events WHERE seq > ?", (cp.seq - 3,))
        for table in ("snapshots", "snapshot_entries", "snapshot_generations"):
            conn.execute(f"DELETE FROM {table}")
    with Ledger.open(path, create=False, clock=clock) as led:
        with pytest.raises(LedgerCorrupt, match="truncated"):
            led.verify(against=cp)
        for name in ("x.a", "x.b", "x.c", "x.d"):  # as many events again, and more
            led.create_table(name)
        assert led.event_count() > cp.seq
        assert led.verify().events == led.event_count()  # the chain alone is sound
        with pytest.raises(LedgerCorrupt, match="rewritten"):
            led.verify(against=cp)


def test_r16_a_later_log_extends_its_checkpoint_with_a_consistency_proof(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    clock = build_small(path)
    with Ledger.open(path, clock=clock) as led:
        cp = led.checkpoint()
        led.create_table("x.y")
        led.drop_table("x.y")
        report = led.verify(against=cp)
        now = led.checkpoint()
    assert report.checkpoint == cp and report.root == now.root
    assert verify_consistency(cp.seq, now.seq, bytes.fromhex(cp.root), bytes.fromhex(now.root),
                              [bytes.fromhex(p) for p in report.consistency_proof])


# --- R16: checkpoints, signatures, inclusion proofs ----------------------------------------

def test_r16_a_checkpoint_signed_with_one_key_fails_verification_with_another(small_db: Path,
                                                                               tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.pem", tmp_path / "theirs.pem"
    generate_key(ours), generate_key(theirs)
    with Ledger.open(small_db, create=False) as led:
        cp = led.checkpoint(key=ours)
        before = fingerprint(led)
        assert cp.signature and cp.public_key
        assert led.verify(against=cp, public_key=Path(f"{ours}.pub")).signature_checked
        with pytest.raises(CheckpointInvalid, match="signed with another key"):
            led.verify(against=cp, public_key=Path(f"{theirs}.pub"))
        assert fingerprint(led) == before
    # the same, offline, and for a signed checkpoint edited after signing
    forged = Checkpoint.from_json(cp.to_json().replace(f'"seq": {cp.seq}', f'"seq": {cp.seq - 1}'))
    with pytest.raises(CheckpointInvalid):
        forged.check_signature(Path(f"{ours}.pub"))
    with pytest.raises(CheckpointInvalid):
        cp.check_signature(Path(f"{theirs}.pub"))


def test_r16_a_checkpoint_round_trips_through_json_and_its_key_never_enters_the_ledger(small_db: Path,
                                                                                      tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    assert generate_key(key) == tmp_path / "k.pem.pub"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    path = copy_of(small_db, tmp_path / "l.db")
    with Ledger.open(path, create=False) as led:
        cp = led.checkpoint(key=key)
        assert Checkpoint.from_json(cp.to_json()) == cp
        assert cp.seq == led.event_count() and cp.time == led.as_of(seq=cp.seq).time
    secret = key.read_bytes().split(b"-----")[2].strip()
    assert secret not in path.read_bytes()


def test_r16_an_unsigned_checkpoint_checked_against_a_key_is_refused(small_db: Path, tmp_path: Path) -> None:
    public = generate_key(tmp_path / "k.pem")
    with Ledger.open(small_db, create=False) as led:
        with pytest.raises(CheckpointInvalid, match="not signed"):
            led.verify(against=led.checkpoint(), public_key=public)


def test_r16_an_edited_checkpoint_time_is_refused(small_db: Path) -> None:
    with Ledger.open(small_db, create=False) as led:
        cp = led.checkpoint()
        edited = Checkpoint(cp.seq, cp.time + timedelta(seconds=1), cp.head, cp.root)
        with pytest.raises(CheckpointInvalid, match="time"):
            led.verify(against=edited)


def test_r16_inclusion_proofs_verify_for_random_seqs_and_fail_for_a_wrong_event(small_db: Path,
                                                                                 tmp_path: Path) -> None:
    rng = random.Random(16)
    path = copy_of(small_db, tmp_path / "l.db")  # it appends: the module's ledger stays as built
    with Ledger.open(path, create=False) as led:
        cp = led.checkpoint()
        hashes = {r[0]: r[1] for r in sqlite3.connect(path).execute("SELECT seq, hash FROM events")}
        for seq in rng.sample(range(1, cp.seq + 1), 12) + [1, cp.seq]:
            proof = led.inclusion_proof(seq, cp)
            assert proof.event_hash == hashes[seq]
            assert proof.verify(cp)
            other = hashes[seq % cp.seq + 1]
            assert not proof.verify(cp, event_hash=other)
            assert not proof.verify(Checkpoint(cp.seq, cp.time, cp.head, "0" * 64))
        # a proof against an older checkpoint is its own tree's
        old = Checkpoint.from_json(cp.to_json())
        led.create_table("x.later")
        assert led.inclusion_proof(3, old).verify(old)
        assert not led.inclusion_proof(3, led.checkpoint()).verify(old)


def test_r16_bad_audit_arguments_are_typed_errors_and_leave_the_ledger_unchanged(small_db: Path,
                                                                                tmp_path: Path) -> None:
    path = copy_of(small_db, tmp_path / "l.db")
    with Ledger.open(path, create=False) as led:
        before = fingerprint(led)
        cp = led.checkpoint()
        future = Checkpoint(cp.seq + 5, cp.time, cp.head, cp.root)
        cases = [
            (lambda: led.inclusion_proof(0, cp), InvalidArgument, "not covered"),
            (lambda: led.inclusion_proof(cp.seq + 1, cp), InvalidArgument, "not covered"),
            (lambda: led.inclusion_proof(2, future), LedgerCorrupt, "truncated"),
            (lambda: led.verify(against="cp.json"), InvalidArgument, "Checkpoint"),
            (lambda: led.verify(public_key=tmp_path / "k.pub"), InvalidArgument, "against="),
            (lambda: led.checkpoint(key=tmp_path / "missing.pem"), InvalidArgument, "missing.pem"),
            (lambda: led.checkpoint(key=b"not a key"), InvalidArgument, "key"),
            (lambda: led.export(tmp_path / "x.csv", format="csv"), InvalidArgument, "jsonl"),
            (lambda: led.as_of(), InvalidArgument, "exactly one"),
            (lambda: led.as_of(seq=1, time=T0), InvalidArgument, "exactly one"),
            (lambda: led.as_of(seq=-1), InvalidArgument, ">= 0"),
            (lambda: led.as_of(seq=cp.seq + 1), InvalidArgument, "no event"),
            (lambda: led.as_of(time="2026-01-01"), InvalidTime, "datetime"),
            (lambda: led.as_of(time=T0.replace(tzinfo=None)), InvalidTime, "aware"),
            (lambda: list(led.history("no.such")), TableNotFound, "ever existed"),
            (lambda: led.history(since=T0, until=T0 - timedelta(days=1)), InvalidTime, "before since"),
            (lambda: led.history(type="NoSuchEvent"), InvalidArgument, "NoSuchEvent"),
            (lambda: Checkpoint.from_json("{}"), CheckpointInvalid, "format"),
            (lambda: Checkpoint.from_json(cp.to_json().replace(cp.head, "xyz")), CheckpointInvalid, "hex"),
            (lambda: Checkpoint.read(tmp_path / "none.json"), InvalidArgument, "none.json"),
        ]
        for call, error, words in cases:
            with pytest.raises(error, match=words):
                call()
            assert fingerprint(led) == before
        assert not (tmp_path / "x.csv").exists()


# --- R16: upgrading a ledger written before the chain --------------------------------------

def test_r16_a_format_1_ledger_is_upgraded_once_in_place_and_recorded(tmp_path: Path) -> None:
    path = copy_of(FORMAT1, tmp_path / "old.db")
    old_rows = sqlite3.connect(path).execute("SELECT * FROM events ORDER BY seq").fetchall()
    with Ledger.open(path, warehouse="/tmp/format1-warehouse") as led:
        report = led.verify()
        entries = list(led.history(type="LedgerUpgraded"))
        assert report.chained and report.hashed_by_upgrade == len(old_rows)
        assert report.events == len(old_rows) + 1
        assert len(entries) == 1 and "upgraded the ledger file from format 1 to 2" in entries[0].text
        tables = [t.name for t in led.tables()]
    # the old events are as they were, each now with its hash; a second open changes nothing
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT seq, stream, version, type, schema_version, time, actor, payload FROM events "
                        "WHERE seq <= ? ORDER BY seq", (len(old_rows),)).fetchall() == \
        [r[:8] for r in old_rows]
    assert conn.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone() == ("2",)
    with Ledger.open(path) as led:
        assert led.event_count() == len(old_rows) + 1 and [t.name for t in led.tables()] == tables
    assert assert_documented_chain(path) == len(old_rows) + 1


def big_format1(path: Path, events: int) -> None:
    """The format-1 fixture grown to ``events`` rows (retention changes, cheap to fold)."""
    copy_of(FORMAT1, path)
    conn = sqlite3.connect(path)
    seq, t = conn.execute("SELECT max(seq), max(time) FROM events").fetchone()
    version = conn.execute("SELECT max(version) FROM events WHERE stream = 'retention:ledger'").fetchone()[0]
    conn.executemany(
        "INSERT INTO events(seq, stream, version, type, schema_version, time, actor, payload) "
        "VALUES (?, 'retention:ledger', ?, 'RetentionSet', 1, ?, 'filler', ?)",
        ((seq + i, version + i, t + i, f'{{"scope":"ledger","seconds":{604800 + i}}}')
         for i in range(1, events - seq + 1)))
    conn.commit()
    conn.close()


def test_r16_an_upgrade_killed_midway_leaves_the_old_file_and_a_later_open_finishes_it(tmp_path: Path) -> None:
    """The upgrade is one transaction: a process SIGKILLed while it hashes leaves format 1, whole."""
    path = tmp_path / "old.db"
    big_format1(path, 300_000)
    before = sqlite3.connect(path).execute("SELECT count(*), max(seq) FROM events").fetchone()
    script = ("import sys; from ledger import Ledger; print('opening', flush=True); "
              "Ledger.open(sys.argv[1], warehouse='/tmp/format1-warehouse'); print('done', flush=True)")
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).parent.parent)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "opening"
    wal = Path(f"{path}-wal")
    deadline = time.monotonic() + 60
    while not (wal.exists() and wal.stat().st_size > 1_000_000) and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_midway = proc.returncode == -signal.SIGKILL
    conn = sqlite3.connect(path)
    columns = [c[1] for c in conn.execute("PRAGMA table_info(events)")]
    if killed_midway:
        assert "hash" not in columns
        assert conn.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone() == ("1",)
        assert conn.execute("SELECT count(*), max(seq) FROM events").fetchone() == before
    conn.close()
    with Ledger.open(path, warehouse="/tmp/format1-warehouse") as led:
        report = led.verify()
    assert report.events == before[0] + 1 and report.hashed_by_upgrade == before[0]
    assert killed_midway, "the open finished before it could be killed: grow the ledger"


def test_r16_a_ledger_from_a_newer_release_is_refused_not_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    Ledger.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
    with pytest.raises(IncompatibleLedger, match="99"):
        Ledger.open(path)


# --- R17: as of ----------------------------------------------------------------------------

def truncated_copy(db: Path, seq: int, dest: Path) -> Path:
    """The ledger as a file that only ever had its first ``seq`` events."""
    copy_of(db, dest)
    with raw(dest) as conn:
        conn.execute("DELETE FROM events WHERE seq > ?", (seq,))
        for table in ("snapshots", "snapshot_entries", "snapshot_generations"):
            conn.execute(f"DELETE FROM {table}")
    return dest


def answers(view) -> dict:
    """Every query the present answers, asked of ``view`` (a Ledger or an AsOf)."""
    names = sorted({t.name for t in view.tables()} | {t.name for t in view.dropped_tables()})
    live = {t.name for t in view.tables()}
    return {
        "tables": view.tables(),
        "dropped": view.dropped_tables(),
        "watermark": view.watermark(),
        "retention": view.effective_retention(),
        "databases": {n.split(".")[0]: (view.watermark(Scope.database(n.split(".")[0])),
                                        view.retention(Scope.database(n.split(".")[0]))) for n in names},
        "versions": {n: view.versions(n) for n in live},
        "marks": {n: view.retention_mark(n) for n in live},
        "writes": view.open_writes(),
    }


def test_r17_as_of_answers_every_query_as_a_ledger_holding_only_that_prefix(small_db: Path,
                                                                           tmp_path: Path) -> None:
    with Ledger.open(small_db, create=False) as led:
        head = led.event_count()
        for seq in range(0, head + 1):
            view = led.as_of(seq=seq)
            assert view.seq == seq
            prefix = truncated_copy(small_db, seq, tmp_path / f"p{seq}.db")
            clock = ManualClock(view.time or T0)
            with Ledger.open(prefix, clock=clock, create=False) as past:
                assert answers(view) == answers(past), f"as of #{seq}"
                assert view.state == past.state


def test_r17_as_of_time_means_after_every_event_at_or_before_it(small_db: Path) -> None:
    conn = sqlite3.connect(small_db)
    times = dict(conn.execute("SELECT seq, time FROM events"))
    with Ledger.open(small_db, create=False) as led:
        for seq in (1, 5, 17, len(times)):
            at = led.as_of(seq=seq).time
            assert led.as_of(time=at).seq == seq
            before = max((s for s, t in times.items() if t < times[seq]), default=0)
            assert led.as_of(time=at - timedelta(microseconds=1)).seq == before
        assert led.as_of(time=T0 - timedelta(days=1)).seq == 0
        assert led.as_of(time=T0 - timedelta(days=1)).tables() == []
        assert led.as_of(time=led.now() + timedelta(days=365)).seq == len(times)


def test_r17_as_of_is_read_only_and_a_past_name_resolves_as_it_did(small_db: Path) -> None:
    with Ledger.open(small_db, create=False) as led:
        first = next(e for e in led.history("sales.items") if e.type == "TableCreated")
        then = led.as_of(seq=first.seq)
        assert then.table("sales.items").id == first.data["table_id"]
        assert led.table("sales.items").id != first.data["table_id"]  # a later instance bears it now
        assert not hasattr(then, "drop_table") and not hasattr(then, "create_table")


class Logs:
    """A random log, built through the public API on a manual clock (refusals skipped)."""

    names = ("a.t1", "a.t2", "b.t1")

    @staticmethod
    def step(led: Ledger, clock: ManualClock, op: int, n: int, hours: int) -> None:
        name = Logs.names[n % len(Logs.names)]
        try:
            if op == 0:
                led.create_table(name)
            elif op == 1:
                led.drop_table(name)
            elif op == 2:
                led.undrop_table(name)
            elif op == 3:
                led.drop_database(name.split(".")[0])
            elif op == 4:
                scope = Scope.table(led.table(name).id) if n % 2 else Scope.database(name.split(".")[0])
                led.advance_watermark(led.now(), scope=scope if n % 5 else LEDGER)
            elif op == 5:
                led.set_retention(Scope.database(name.split(".")[0]), timedelta(days=1 + n % 9))
            elif op == 6:
                w = led.begin_write(name)
                if n % 3:
                    led.commit_write(w.id, [(f"{w.relative_folder}/f{n}", n)],
                                     mode="overwrite" if n % 2 else "append")
            elif op == 7:
                open_ = led.open_writes(name=name)
                if open_:
                    led.abort_write(open_[0].id)
            elif op == 8:
                led.advance_retention_mark(name, led.now())
            elif op == 9:
                run = led.start_vacuum(retention=timedelta(hours=1), override_floor=True)
                run.finish([Result(t, 0, 0) for t in run.plan.purges])
        except LedgerError:
            pass
        clock.advance(timedelta(hours=hours))


@settings(max_examples=30 if os.environ.get("CI") else 15)
@given(steps=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 20), st.integers(0, 30)), min_size=1,
                      max_size=40),
       points=st.lists(st.floats(0, 1), min_size=1, max_size=5),
       every=st.integers(3, 12))
def test_r17_as_of_equals_a_fresh_fold_up_to_that_point_of_a_random_log(tmp_path_factory, steps, points,
                                                                         every) -> None:
    path = tmp_path_factory.mktemp("r17") / "l.db"
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock, history_every=every) as led:
        for step in steps:
            Logs.step(led, clock, *step)
        head = led.event_count()
        for p in points:
            seq = round(p * head)
            view = led.as_of(seq=seq)
            assert view.state == fold_rows(State(), led.store.read(0, upto=seq))
            assert view.seq == seq
        led.maintain()  # a stored state every `every` events: as_of folds on from the one before
        for p in points:
            seq = round(p * head)
            assert led.as_of(seq=seq).state == fold_rows(State(), led.store.read(0, upto=seq))
        assert led.verify().generations_discarded == 0


def test_r17_as_of_on_a_present_read_lazily_answers_as_the_log_and_leaves_the_present_true(tmp_path: Path) -> None:
    """A past state is read lazily from a stored one and asks, for every table its events create,
    whether the id was taken: read many at a time (``snapshot.prefetch``). Each past state equals
    the fold, and the present answers as it did."""
    path = tmp_path / "l.db"
    clock = build_small(path, history_every=4)
    with Ledger.open(path, create=False, clock=clock, history_every=4) as led:
        for i in range(12):
            led.create_table(f"late.t{i}")
            if i % 3 == 0:
                led.drop_table(f"late.t{i}")
            clock.advance(timedelta(hours=1))
        led.runner.cache.save_snapshot()
        head = led.event_count()
        ids = sorted(i.id for i in led.state.tables.all_instances())
        truth = answers(led), [led.instance(i) for i in ids]
    with Ledger.open(path, create=False, history_every=4) as again:  # the present read lazily, as stored
        assert again.runner.cache.generation is not None
        views = [again.as_of(seq=seq) for seq in range(head)]
        assert (answers(again), [again.instance(i) for i in ids]) == truth  # before anything reads it all
        for seq, view in enumerate(views):
            assert view.state == fold_rows(State(), again.store.read(0, upto=seq))


def test_r17_an_as_of_whose_stored_states_are_discarded_answers_the_same(tmp_path: Path) -> None:
    """A past state reads its stored state lazily (reading it all made a cold ``as_of`` on a big
    ledger take seconds). If another process discards every stored state (as ``verify`` does
    with one that lies) before the view is asked, the view heals from the log."""
    path = tmp_path / "l.db"
    build_small(path, history_every=5)
    with Ledger.open(path, create=False, history_every=5) as led:
        led.runner.cache.save_snapshot()
        head = led.event_count()
        purged = sorted(i.id for i in led.state.tables.all_instances() if i.purged_at is not None)
        truth = {seq: (led.as_of(seq=seq).warehouse, answers(led.as_of(seq=seq)),
                       [led.as_of(seq=seq).instance(i) for i in purged]) for seq in (head - 3, head - 1, head)}
    assert purged
    with Ledger.open(path, create=False, history_every=5) as a, Ledger.open(path, create=False) as b:
        views = {seq: a.as_of(seq=seq) for seq in truth}
        b.store.delete_generations()
        for seq, view in views.items():
            assert (view.warehouse, answers(view), [view.instance(i) for i in purged]) == truth[seq]
            assert view.state == fold_rows(State(), a.store.read(0, upto=seq))


def _stored_entry(conn: sqlite3.Connection, at: int, part: str) -> tuple[int, str, bytes]:
    """A stored entry of ``part`` written by the generation at event ``at``: its generation, key, value."""
    found = conn.execute("SELECT e.gen, e.key, e.value FROM snapshot_entries e JOIN snapshot_generations g "
                         "ON g.gen = e.gen WHERE g.seq = ? AND e.part = ? AND e.value IS NOT NULL LIMIT 1",
                         (at, part)).fetchone()
    assert found is not None, (at, part)
    return found


def test_r16_r17_a_hand_edited_stored_state_is_not_believed_and_verify_discards_it(tmp_path: Path) -> None:
    """An edit that breaks an entry's check: ``as_of`` heals that part from the log (so it does for
    an entry deleted, which leaves fewer than the head counts). A forger who recomputes the check
    (here: a name bound to another table) gets past ``as_of``, which trusts a cache that checks out; ``verify`` refolds, finds it disagrees with
    the log, and discards every stored state; ``maintain`` stores them again from the log."""
    from ledger.persistence.contract import seal

    path = tmp_path / "l.db"
    build_small(path, history_every=5)
    conn = sqlite3.connect(path)
    stored = [at for (at,) in conn.execute("SELECT seq FROM snapshot_generations ORDER BY seq")]
    assert len(stored) >= 4
    at = stored[1]
    with Ledger.open(path, create=False, history_every=5) as led:
        truth = answers(led.as_of(seq=at + 2))
    gen, key, value = _stored_entry(conn, stored[0], "tables.bindings")
    conn.execute("UPDATE snapshot_entries SET value = ? WHERE gen = ? AND part = 'tables.bindings' AND key = ?",
                 (value[:-3] + b"xyz", gen, key))
    conn.commit()
    with Ledger.open(path, create=False, history_every=5) as led:
        assert answers(led.as_of(seq=at + 2)) == truth  # healed from the log
        report = led.verify()
        assert report.generations_discarded >= 1 and report.snapshot_discarded
        assert led.store.generations() == [led.store.latest_generation()]  # only the present's, rebuilt
        assert led.maintain().written >= 4
        assert led.verify().generations_discarded == 0
    first = stored[0]
    (gen,) = conn.execute("SELECT gen FROM snapshot_generations WHERE seq = ?", (first,)).fetchone()
    (one, one_value), (other, other_value) = conn.execute(
        "SELECT key, value FROM snapshot_entries WHERE gen = ? AND part = 'tables.bindings' ORDER BY key LIMIT 2",
        (gen,)).fetchall()
    forgeries = [{one: other_value[4:]},  # a name bound to another table's instance (its own vanishes)
                 {one: other_value[4:], other: one_value[4:]}]  # two tables' names swapped
    for forged in forgeries:
        for key, value in forged.items():
            conn.execute("UPDATE snapshot_entries SET value = ? WHERE gen = ? AND part = 'tables.bindings' "
                         "AND key = ?", (None if value is None else seal("tables.bindings", key, value), gen, key))
        conn.commit()
        with Ledger.open(path, create=False, history_every=5) as led:
            fold = fold_rows(State(), led.store.read(0, upto=first))
            assert led.as_of(seq=first).state != fold  # believed: it checks out
            assert led.verify().generations_discarded >= 1
            assert led.as_of(seq=first).state == fold
            assert answers(led.as_of(seq=at + 2)) == truth
            assert led.maintain().written >= 4  # stored again, from the log
            assert led.verify().generations_discarded == 0
        (gen,) = conn.execute("SELECT gen FROM snapshot_generations WHERE seq = ?", (first,)).fetchone()
    conn.close()


def test_r16_a_full_stored_state_with_an_entry_turned_into_a_deletion_is_caught_by_verify(tmp_path: Path) -> None:
    """A full generation records no deletions. One whose entry was replaced by a deletion of a key
    the fold never had (as many rows as the fold has entries, every other entry as the fold has it)
    reads that name as unbound to a reader asking for it alone: ``verify`` compares the generation
    part by part and discards it, and ``as_of`` then answers from the log."""
    path = tmp_path / "l.db"
    build_small(path, history_every=5)
    conn = sqlite3.connect(path)
    gen, at = conn.execute("SELECT gen, seq FROM snapshot_generations WHERE gen = base ORDER BY seq LIMIT 1").fetchone()
    (key,) = conn.execute("SELECT key FROM snapshot_entries WHERE gen = ? AND part = 'tables.bindings' LIMIT 1",
                          (gen,)).fetchone()
    conn.execute("UPDATE snapshot_entries SET key = 'nowhere.none', value = NULL WHERE gen = ? AND "
                 "part = 'tables.bindings' AND key = ?", (gen, key))
    conn.commit()
    conn.close()
    with Ledger.open(path, create=False, history_every=5) as led:
        fold = fold_rows(State(), led.store.read(0, upto=at))
        report = led.verify()
        assert report.generations_discarded >= 1 and report.snapshot_discarded
        assert led.as_of(seq=at).state == fold
        assert led.maintain().written >= 1 and led.verify().generations_discarded == 0


def test_r16_a_full_stored_state_that_repeats_an_entry_in_place_of_another_disagrees(tmp_path: Path) -> None:
    """``verify`` compares a generation's rows as they come (a list of keys and one of bytes a
    part), not gathered into a dict: rows that repeat one entry in place of another (as many rows
    as the fold has entries, each as the fold has it) must still disagree. No store lets a
    generation hold a key twice (its primary key), so the rows are given as a store would hand
    them, to the comparison itself."""
    from ledger.persistence import checks

    path = tmp_path / "l.db"
    build_small(path, history_every=5)
    with Ledger.open(path, create=False) as led:
        store = led.store
        full = next(g for g in store.generations() if g.gen == g.base)
        rows = store.generation_entries(full)
        folded = snapshot.Folded()
        for _ in folded.stops(State(), lambda after, upto: store.read(after, upto=upto), [full.seq]):
            pass
    assert checks._full_agrees(checks._by_part(rows), folded)
    bound = [i for i, row in enumerate(rows) if row[0] == "tables.bindings"]
    assert len(bound) >= 2
    repeated = list(rows)
    repeated[bound[1]] = rows[bound[0]]
    assert not checks._full_agrees(checks._by_part(repeated), folded)


def test_r16_r17_an_entry_damaged_where_as_of_reads_a_part_whole_heals_on_first_use(tmp_path: Path) -> None:
    """An ``as_of`` folding many drops on a stored state reads its names in one pass and checks
    each entry when the fold first asks for it: one damaged there heals the part from the log, as a
    part that fails on read does, and the past state and its answers are the log's."""
    path = tmp_path / "l.db"
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock, history_every=100) as led:
        for i in range(200):
            led.create_table(f"big.t{i:03d}")
        for i in range(150):
            led.drop_table(f"big.t{i:03d}")
        led.maintain()
        at = 340  # 40 drops on the stored state at event 300: more names than a part is read key by key for
        truth = fold_rows(State(), led.store.read(0, upto=at))
        tables = [t.name for t in led.as_of(seq=at).tables()]
    damaged = "big.t135"  # dropped at event 336, past the 33 names asked for one at a time
    with raw(path) as conn:
        found = conn.execute("UPDATE snapshot_entries SET value = CAST(substr(value, 1, length(value) - 1) || x'21' "
                             "AS BLOB) WHERE part = 'tables.bindings' AND key = ? AND value IS NOT NULL",
                             (damaged,)).rowcount
    assert found >= 1
    with Ledger.open(path, create=False, history_every=100) as led:
        view = led.as_of(seq=at)
        assert view.state == truth and [t.name for t in view.tables()] == tables
        assert led.verify().generations_discarded >= 1  # and verify throws the damaged ones away


def test_r16_r17_a_stored_state_of_another_log_is_not_trusted(tmp_path: Path) -> None:
    """Stored states are bound to the chain hash at their event: ones copied from a different
    ledger (valid checks, a different past) are passed over rather than believed."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    build_small(a, history_every=5)
    build_small(b, clock=ManualClock(T0 + timedelta(days=1)), history_every=5)
    with sqlite3.connect(a) as ca:
        (copied,) = ca.execute("SELECT count(*) FROM snapshot_generations").fetchone()
    with raw(b) as cb:
        cb.execute(f"ATTACH DATABASE '{a}' AS a")
        for table in ("snapshot_entries", "snapshot_generations"):
            cb.execute(f"DELETE FROM main.{table}")
            cb.execute(f"INSERT INTO main.{table} SELECT * FROM a.{table}")
        cb.execute("DETACH DATABASE a")
    with Ledger.open(b, create=False, history_every=5) as led:
        held = led.runner.cache.generation  # none fits: the open folded the log, and stored its own
        assert held is not None and held.gen > copied
        for seq in range(led.event_count() + 1):
            assert led.as_of(seq=seq).state == fold_rows(State(), led.store.read(0, upto=seq))
        assert led.verify().generations_discarded == copied


# --- who did what --------------------------------------------------------------------------

def test_history_filters_by_name_across_renames_id_actor_time_and_type(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock, actor="alice@etl-3") as led:
        orders = led.create_table("sales.orders")
        clock.advance(timedelta(hours=1))
        led.drop_table("sales.orders")
    with Ledger.open(path, clock=clock, actor="bob@laptop") as led:
        clock.advance(timedelta(hours=1))
        led.undrop_table("sales.orders", new_name="sales.orders_old")
        led.create_table("sales.orders")
        clock.advance(timedelta(hours=1))
        led.drop_table("sales.orders_old")

        by_name = [(e.actor, e.type) for e in led.history("sales.orders_old")]
        assert by_name == [("alice@etl-3", "TableCreated"), ("alice@etl-3", "TableDropped"),
                           ("bob@laptop", "TableUndropped"), ("bob@laptop", "TableDropped")]
        assert len(list(led.history("sales.orders"))) == 5  # both instances that bore the name
        assert [e.type for e in led.history(table_id=orders.id)] == [t for _, t in by_name]
        assert {e.actor for e in led.history(actor="bob@laptop")} == {"bob@laptop"}
        assert [e.type for e in led.history(since=T0 + timedelta(hours=2),
                                            until=T0 + timedelta(hours=2, seconds=1))] == \
            ["TableUndropped", "TableCreated"]
        assert [e.seq for e in led.history(type=["TableDropped"])] == [2, 5]
        dropped = [e.text for e in led.history(type="TableDropped")]
        assert dropped[0] == f"alice@etl-3 dropped sales.orders (id {orders.id})"
        assert dropped[1] == f"bob@laptop dropped sales.orders_old (id {orders.id})"
        assert "undropped sales.orders" in led.history(type="TableUndropped")[0].text


def test_history_streams_rather_than_loading_the_log(tmp_path: Path) -> None:
    """The first entry of a long log arrives before the rest is read; each iteration reads the log
    again, up to the last event there was when the query was made."""
    path = tmp_path / "l.db"
    with Ledger.open(path, clock=ManualClock(T0)) as led:
        for i in range(30):
            led.create_table(f"s.t{i}")
        entries = led.history()
        walk = iter(entries)
        first = next(walk)
        led.create_table("s.late")  # appended while the caller iterates: not in this history
        assert first.seq == 1 and [e.seq for e in walk] == list(range(2, 31))
        assert [e.seq for e in entries] == list(range(1, 31))  # again, and the same


def test_history_counts_and_gives_the_latest_without_a_list(tmp_path: Path) -> None:
    """What users of delta-rs's history() reach for first: len(), [-1], the last N; and the first."""
    path = tmp_path / "l.db"
    with Ledger.open(path, clock=ManualClock(T0)) as led:
        for i in range(12):
            led.create_table(f"s.t{i}")
            if i % 3 == 0:
                led.drop_table(f"s.t{i}")
        everything, drops = led.history(), led.history(type="TableDropped")
        assert len(everything) == 16 and len(drops) == 4 and len(led.history("s.t3")) == 2
        assert everything[-1].seq == 16 and everything[0].seq == 1 and everything[5].seq == 6
        assert [e.seq for e in everything.last(3)] == [14, 15, 16] == [e.seq for e in everything[-3:]]
        assert [e.seq for e in drops.last(10)] == [e.seq for e in drops]  # fewer than asked: all of them
        assert drops.last(0) == [] and [e.seq for e in everything[2:4]] == [3, 4]
        assert [e.seq for e in everything[::-5]] == [16, 11, 6, 1]
        for index in (16, -17, 2 ** 70, -(2 ** 70)):  # beyond any size: as a list says it
            with pytest.raises(IndexError, match="out of range: 16 events match"):
                everything[index]
        assert [e.seq for e in everything.last(2 ** 70)] == list(range(1, 17))  # past its length: all of it
        assert everything[2 ** 70:] == [] and [e.seq for e in everything[14:2 ** 70]] == [15, 16]
        for bad in (-1, 1.5, True, "3"):
            with pytest.raises(InvalidArgument, match=r"last\(n\) takes a whole number"):
                everything.last(bad)  # type: ignore[arg-type]


def test_history_gives_sizes_in_the_units_versions_use(tmp_path: Path) -> None:
    """One unit system (binary) wherever a size is shown: history's words and versions alike."""
    from ledger.views import format_bytes
    with Ledger.open(tmp_path / "l.db", clock=ManualClock(T0)) as led:
        led.create_table("s.t")
        w = led.begin_write("s.t")
        led.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", 104_448)])
        assert format_bytes(104_448) == "102.0 KiB"
        assert led.history(type="VersionCommitted")[-1].text.endswith("1 file, 102.0 KiB")


def test_every_event_type_is_described_in_words(small_db: Path) -> None:
    with Ledger.open(small_db, create=False) as led:
        for entry in led.history():
            assert entry.text.startswith(entry.actor + " ")
            assert "{" not in entry.text, entry.text  # words, not a payload dump



def _sample(hint: object) -> object:
    """A value of the type ``hint`` names, for building an event of any registered type."""
    import types
    import typing
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _sample(args[0])
    if origin is tuple:
        return (_sample(args[0]),)
    if origin is dict:
        return {_sample(args[0]): _sample(args[1])}
    return {str: "ab12cd34ef56ab78cd90", int: 3}[hint]  # type: ignore[index]


def test_every_registered_event_type_is_said_in_words_not_recorded_x() -> None:
    """Every type, not only the ones a small ledger holds: a new event with no words would read
    "alice recorded PinTaken" (as the pins did in 0.4)."""
    import typing
    from ledger.audit.words import describe
    from ledger.core.events import registered
    for type_name, cls in registered().items():
        hints = typing.get_type_hints(cls)
        event = cls(**{f.name: _sample(hints[f.name]) for f in attrs.fields(cls)})
        text = describe(type_name, "alice", event, lambda table_id: "sales.orders")
        assert text.startswith("alice ") and "recorded " + type_name not in text, text


def test_pins_are_said_in_words_and_history_leaves_them_out_unless_asked(tmp_path: Path) -> None:
    """Every read_table and attach pins: 6 of the 10 latest events of a table read by name were
    pins. history() leaves them out unless ``pins=True`` (or a pin type is asked for by name)."""
    clock = ManualClock(T0)
    with Ledger.open(tmp_path / "l.db", clock=clock, actor="alice@etl-3") as led:
        table = led.create_table("sales.orders")
        w = led.begin_write("sales.orders")
        led.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", 10)])
        clock.advance(timedelta(hours=1))  # past the events before, so the pin's times are the clock's
        pin = led.pin("sales.orders", lease=timedelta(hours=2))
        clock.advance(timedelta(minutes=30))
        pin.renew()
        pin.release()
        led.drop_table("sales.orders")

        assert [e.type for e in led.history("sales.orders")] == \
            ["TableCreated", "WriteBegun", "VersionCommitted", "TableDropped"]
        assert len(led.history()) == 4 and led.history().last(1)[0].type == "TableDropped"
        said = [e.text for e in led.history("sales.orders", pins=True) if e.type.startswith("Pin")]
        assert said == [
            f"alice@etl-3 pinned version 1 of sales.orders (id {table.id}) for 2h (pin {pin.id}, until "
            f"{iso_utc(T0 + timedelta(hours=3))})",
            f"alice@etl-3 renewed pin {pin.id} on sales.orders (id {table.id}) until "
            f"{iso_utc(T0 + timedelta(hours=3, minutes=30))}",
            f"alice@etl-3 released pin {pin.id} on sales.orders (id {table.id})"]
        assert len(led.history(pins=True)) == 7
        assert [e.type for e in led.history(type="PinReleased")] == ["PinReleased"]  # asked for by name
        events = led.event_count()
        with pytest.raises(InvalidArgument, match="pins must be True or False"):
            led.history(pins="yes")  # type: ignore[arg-type]
        assert led.event_count() == events


# --- export and the offline verifier -------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_r16_export_holds_every_event_with_its_hash(small_db: Path, tmp_path: Path, fmt: str) -> None:
    from ledger.audit import export
    out = tmp_path / f"log.{fmt}"
    with Ledger.open(small_db, create=False) as led:
        report = led.export(out, format=fmt)
        stored = sqlite3.connect(small_db).execute(
            "SELECT seq, stream, version, type, schema_version, time, actor, payload, hash FROM events "
            "ORDER BY seq").fetchall()
    assert report.events == len(stored)
    assert [tuple(r) for r in export.read(out)] == stored
    assert not list(tmp_path.glob("*.partial"))


def run_offline(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger.audit", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parent.parent)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_r16_the_offline_verifier_checks_an_export_with_the_ledger_file_deleted(small_db: Path, tmp_path: Path,
                                                                               fmt: str) -> None:
    path = copy_of(small_db, tmp_path / "l.db")
    key = tmp_path / "k.pem"
    generate_key(key)
    with Ledger.open(path, create=False) as led:
        cp = led.checkpoint(key=key)
        led.export(tmp_path / f"log.{fmt}", format=fmt)
    cp.write(tmp_path / "cp.json")
    for f in tmp_path.glob("l.db*"):
        f.unlink()

    good = run_offline("verify", tmp_path / f"log.{fmt}", tmp_path / "cp.json", "--public-key", f"{key}.pub")
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith(f"ok: {cp.seq} events, chain intact; checkpoint #{cp.seq}")
    assert "signature verified" in good.stdout

    other = generate_key(tmp_path / "other.pem")
    wrong_key = run_offline("verify", tmp_path / f"log.{fmt}", tmp_path / "cp.json", "--public-key", other)
    assert wrong_key.returncode == 1 and wrong_key.stderr.startswith("error: CheckpointInvalid: ")
    assert wrong_key.stderr.count("\n") == 1

    usage = run_offline("verify", tmp_path / f"log.{fmt}")
    assert usage.returncode == 2


def test_r16_the_offline_verifier_catches_an_edited_export(small_db: Path, tmp_path: Path) -> None:
    with Ledger.open(small_db, create=False) as led:
        cp = led.checkpoint()
        led.export(tmp_path / "log.jsonl")
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    edited = json.loads(lines[4])
    edited["actor"] = "nobody"
    (tmp_path / "edited.jsonl").write_text("\n".join(lines[:4] + [json.dumps(edited)] + lines[5:]) + "\n")
    (tmp_path / "short.jsonl").write_text("\n".join(lines[:-2]) + "\n")
    cp.write(tmp_path / "cp.json")
    for name, words in (("edited.jsonl", "#5"), ("short.jsonl", "removed")):
        result = run_offline("verify", tmp_path / name, tmp_path / "cp.json")
        assert result.returncode == 1, result
        assert result.stderr.startswith("error: LedgerCorrupt: ") and words in result.stderr
    with pytest.raises(LedgerCorrupt):
        verify_export(tmp_path / "edited.jsonl", cp)


# --- the log in Spark ----------------------------------------------------------------------

@pytest.mark.spark
def test_r16_read_log_gives_one_typed_row_per_event_for_spark_sql(spark, small_db: Path, tmp_path: Path) -> None:
    from spark_ops import read_log
    stored = sqlite3.connect(small_db).execute("SELECT seq, type, actor, hash, time FROM events ORDER BY seq").fetchall()
    with Ledger.open(small_db, create=False) as led:
        log = read_log(spark, led)
        dropped = {e.seq: e.data for e in led.history(type=["TableDropped", "DatabaseDropped"])}
    types = dict(log.dtypes)
    assert types["seq"] == "bigint" and types["time"] == "timestamp" and types["files"] == "bigint"
    assert types["table_ids"] == "array<string>" and types["to"] == "timestamp"
    rows = log.collect()
    assert [(r.seq, r.type, r.actor, r.hash, r.time_micros) for r in rows] == stored
    assert rows[0].time.replace(tzinfo=None) == T0.replace(tzinfo=None)  # the session runs in UTC

    log.createOrReplaceTempView("ledger_log")
    drops = spark.sql("SELECT seq, table_id, name, database, table_ids FROM ledger_log "
                      "WHERE type IN ('TableDropped', 'DatabaseDropped') ORDER BY seq").collect()
    assert [r.seq for r in drops] == sorted(dropped)
    for r in drops:
        data = dropped[r.seq]
        assert (r.table_id, r.name, r.table_ids) == (data.get("table_id"), data.get("name"), data.get("table_ids"))
        assert r.database == (data.get("database") or data["name"].split(".")[0])
    purged = spark.sql("SELECT count(*) AS n, sum(files) AS files FROM ledger_log WHERE type = 'TablePurged'").first()
    assert purged.n >= 1 and purged.files == purged.n  # build_small records one file per purge
    assert not list(Path(tempfile.gettempdir()).glob("retention-ledger-log-*"))  # the temporary export is gone

    kept = tmp_path / "kept.parquet"
    with Ledger.open(small_db, create=False) as led:
        assert read_log(spark, led, path=kept).count() == len(stored)
    assert kept.exists()


# --- where an auditor's files go, and what a checkpoint or key may be (issues 25, 26) ------------

@pytest.mark.parametrize("format", ["jsonl", "parquet"])
def test_r10_an_export_never_replaces_the_ledger_and_replaces_another_file_only_when_asked(
        small_db: Path, tmp_path: Path, format: str) -> None:
    """``export(led.path)`` used to replace the ledger with the export: every event gone."""
    path = copy_of(small_db, tmp_path / "l.db")
    with Ledger.open(path, create=False) as led:
        events, original = led.event_count(), path.read_bytes()
        for target in (path, f"{path}-wal", f"{path}-shm"):
            for overwrite in (False, True):
                with pytest.raises(InvalidArgument, match="which it would destroy"):
                    led.export(target, format=format, overwrite=overwrite)
        assert path.read_bytes() == original and led.event_count() == events
        other = tmp_path / f"old.{format}"
        other.write_text("keep me")
        with pytest.raises(InvalidArgument, match=r"exists; refusing to replace it \(pass overwrite=True"):
            led.export(other, format=format)
        assert other.read_text() == "keep me"
        assert led.export(other, format=format, overwrite=True).events == events
        assert led.export(tmp_path / "new" / "folder" / f"log.{format}", format=format).events == events
    with Ledger.open(path, create=False) as led:
        assert led.verify().events == events


@pytest.mark.parametrize("bad", [None, 42, b"log.jsonl", "", "a\x00b.jsonl"])
def test_export_and_checkpoint_targets_and_keys_of_the_wrong_kind_are_invalid_argument(
        small_db: Path, tmp_path: Path, bad: object) -> None:
    with Ledger.open(small_db, create=False) as led:
        with pytest.raises(InvalidArgument):
            led.export(bad)  # type: ignore[arg-type]
        if bad is not None:  # key=None is "unsigned"
            with pytest.raises(InvalidArgument):
                led.checkpoint(key=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            led.checkpoint().write(bad)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("time", [1234, None, ["2026-01-01T00:00:00Z"]])
def test_r16_a_checkpoint_whose_time_is_not_text_is_checkpoint_invalid(small_db: Path, time: object) -> None:
    with Ledger.open(small_db, create=False) as led:
        data = json.loads(led.checkpoint().to_json())
    data["time"] = time
    with pytest.raises(CheckpointInvalid, match="time must be ISO 8601 text"):
        Checkpoint.from_json(json.dumps(data))


def test_r16_an_edited_checkpoint_seq_is_blamed_on_the_checkpoint_not_the_log(small_db: Path, tmp_path: Path) -> None:
    """Its head is still the hash of the event it was taken at: the seq is what changed."""
    with Ledger.open(small_db, create=False) as led:
        cp = led.checkpoint()
        exported = led.export(tmp_path / "log.jsonl").path
        for seq in (cp.seq - 1, cp.seq + 5):
            edited = attrs.evolve(cp, seq=seq)
            with pytest.raises(CheckpointInvalid, match=rf"says it ends at event #{seq}, but its head is the hash "
                                                        rf"of event #{cp.seq}: the checkpoint's seq was edited"):
                led.verify(against=edited)
            with pytest.raises(CheckpointInvalid, match="the checkpoint's seq was edited"):
                verify_export(exported, edited)
        led.verify(against=cp)


def test_r16_a_private_key_is_refused_where_the_signers_public_key_belongs(small_db: Path, tmp_path: Path) -> None:
    key = tmp_path / "keys" / "signer.pem"
    public = generate_key(key)  # the keys/ folder is made
    with Ledger.open(small_db, create=False) as led:
        cp = led.checkpoint(key=key)
        with pytest.raises(InvalidArgument, match="that is a private key: .* the signer's public key"):
            led.verify(against=cp, public_key=key)
        assert led.verify(against=cp, public_key=public).signature_checked


def test_r10_a_checkpoint_file_never_replaces_its_signing_key_nor_an_existing_file_unasked(
        small_db: Path, tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    generate_key(key)
    secret = key.read_bytes()
    with Ledger.open(small_db, create=False) as led:
        cp = led.checkpoint(key=key)
        for overwrite in (False, True):
            with pytest.raises(InvalidArgument, match="which it would destroy"):
                cp.write(key, overwrite=overwrite, protected=[str(key)])
        cp.write(tmp_path / "cp.json")
        with pytest.raises(InvalidArgument, match="exists; refusing to replace it"):
            attrs.evolve(cp, signature=None).write(tmp_path / "cp.json")
    assert key.read_bytes() == secret and Checkpoint.read(tmp_path / "cp.json") == cp


def test_r16_the_offline_verifier_says_a_missing_file_is_missing_not_corrupt(small_db: Path, tmp_path: Path) -> None:
    with Ledger.open(small_db, create=False) as led:
        cp = led.checkpoint()
    with pytest.raises(InvalidArgument, match="cannot read the export .*MISSING.jsonl: No such file"):
        verify_export(tmp_path / "MISSING.jsonl", cp)


def _stored_then_dropped(path: Path) -> tuple[int, int]:
    """300 tables in a stored state, then drops, an undrop, a database drop and a create after it
    (few enough that what they name is read by key, not in one pass): the stored state's event and
    the log's head."""
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock) as led:
        for i in range(300):
            led.create_table(f"db1.t{i}" if i < 5 else f"db0.t{i}")
        led.runner.cache.save_snapshot()
        stored = led.event_count()
        for i in range(6, 60, 6):
            led.drop_table(f"db0.t{i}")
            clock.advance(timedelta(minutes=1))
        led.undrop_table("db0.t12", new_name="db2.back")
        led.drop_database("db1")
        led.create_table("db2.new")
        return stored, led.event_count()


def _point_reads(statements: list[str], parts: tuple[str, ...]) -> list[str]:
    """The statements that read one key of one of ``parts`` of a stored state (``SQLitePart.get``)."""
    return [s for s in statements if "key = " in s and "snapshot_entries" in s and any(f"'{p}'" in s for p in parts)]


def test_r17_as_of_reads_what_its_fold_asks_of_a_stored_state_many_keys_to_a_statement(tmp_path: Path) -> None:
    """A past state folds on from a stored one, and its events name the instances and names the
    fold asks for: they are read many to a statement before the fold (``snapshot.prefetch``), not
    one at a time (at a million events, thousands of reads and then whole parts along a chain)."""
    path = tmp_path / "l.db"
    stored, head = _stored_then_dropped(path)
    tables = ("tables.instances", "tables.bindings", "tables.dropped", "tables.archive")
    with Ledger.open(path, create=False) as led:
        assert led.store.latest_generation().seq == stored
        statements: list[str] = []
        led.store._db.set_trace_callback(statements.append)
        for seq in (head - 1, head - 2, stored + 5):
            view = led.as_of(seq=seq)
            assert _point_reads(statements, tables) == [] and any("IN (" in s for s in statements)
            assert view.state == fold_rows(State(), led.store.read(0, upto=seq))
            assert answers(view) == answers(Ledger.open(path, create=False).as_of(seq=seq))
        led.store._db.set_trace_callback(None)


def test_a_listing_of_tables_read_from_a_stored_state_reads_their_instances_many_to_a_statement(
        tmp_path: Path) -> None:
    """``tables()`` on a state read from a stored one asks an instance for every name it lists: they
    are read many to a statement first (``snapshot.prefetch_instances``), not one at a time (after
    a fresh open of a million events' churn, a point read for each of 3,627 tables). The listing is
    the one a fold of the log gives."""
    path = tmp_path / "l.db"
    with Ledger.open(path, clock=ManualClock(T0)) as led:
        for i in range(1200):
            led.create_table(f"db0.t{i}")
        for i in range(40):
            led.create_table(f"db1.t{i}")
        led.runner.cache.save_snapshot()
    with Ledger.open(path, create=False) as led:
        statements: list[str] = []
        led.store._db.set_trace_callback(statements.append)
        listed = led.tables(database="db1")
        led.store._db.set_trace_callback(None)
        assert _point_reads(statements, ("tables.instances",)) == []
        assert any("IN (" in s and "'tables.instances'" in s for s in statements)
        folded = fold_rows(State(), led.store.read(0))
        assert [t.id for t in listed] == [folded.tables.bindings[f"db1.t{i}"] for i in sorted(range(40), key=str)]
        assert listed == [led.instance(t.id) for t in listed]


def test_r16_r17_a_stored_entry_fetched_ahead_that_fails_its_check_heals_from_the_log(tmp_path: Path) -> None:
    """An entry ``as_of`` reads ahead of its fold (a dropped table's name) edited so that it fails
    its check: that part is taken from the log, and the past state is the log's fold."""
    path = tmp_path / "l.db"
    stored, head = _stored_then_dropped(path)
    conn = sqlite3.connect(path)
    (value,) = conn.execute("SELECT value FROM snapshot_entries WHERE part = 'tables.bindings' AND key = 'db0.t6'"
                            ).fetchone()
    conn.execute("UPDATE snapshot_entries SET value = ? WHERE part = 'tables.bindings' AND key = 'db0.t6'",
                 (value[:-3] + b"xyz",))
    conn.commit()
    conn.close()
    with Ledger.open(path, create=False) as led:
        view = led.as_of(seq=head - 1)
        assert view.state == fold_rows(State(), led.store.read(0, upto=head - 1))
        assert "db0.t6" in {t.name for t in view.dropped_tables()}
