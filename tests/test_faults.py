"""Faults of the file under the ledger: each gives a typed error from ``ledger.errors``
whose message names the file (or the event) on one line, never a partial state, never
a raw SQLite traceback (R10).

The sandbox tests run as root, which ignores permission bits, so a read-only file is
made with ``chattr +i`` (the immutable flag binds root too) or a read-only mount; a full
disk with a small tmpfs or ext4 loop image, or with ``RLIMIT_FSIZE`` in a subprocess.
Each mechanism skips, saying why, where the machine does not allow it; ``chmod`` is
used where permission bits bind (not root, or root without CAP_DAC_OVERRIDE).

Each test began as the smallest reproduction of a library bug it found (raw
exceptions from damaged files, messages without a next step, gaps in the log
that went unnoticed); the library was fixed and the tests now guard the fixes.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from ledger import IncompatibleLedger, Ledger, LedgerCorrupt, LedgerError, LedgerUnavailable, UndropBlocked
from ledger.core.model import State, fold_rows
from ledger.persistence.sqlite import FORMAT_VERSION
from vacuum_work import Result

from tests.forge import forge
from tests.stores import FaultyStore
from tests.test_processes import check_log

REPO = Path(__file__).resolve().parent.parent
ACTION_WORDS = ("upgrade", "permission", "free some space", "retry", "restore", "backup", "check ")


# --- helpers -----------------------------------------------------------------------------------

def build(path: Path, tables: int = 60) -> State:
    """A closed ledger with every kind of event, checkpointed so the .db holds everything."""
    with Ledger.open(path, actor="builder") as led:
        for i in range(tables):
            name = f"db{i % 4}.t{i}"
            led.create_table(name)
            if i % 3 == 0:
                led.drop_table(name)
        led.drop_database("db1")
        led.undrop_database("db1")
        led.drop_database("db2")
        run = led.start_vacuum(retention="0s", override_floor=True, database="db2")
        run.finish([Result(p, 0, 0) for p in run.plan.purges])
        led.set_retention("database:db3", "2d")
        state = led.state
    checkpoint(path)
    return state


def checkpoint(path: Path) -> None:
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    finally:
        raw.close()


def raw_count(path: Path) -> int:
    raw = sqlite3.connect(path)  # not mode=ro: a read-only connection leaves -wal and -shm behind
    try:
        return raw.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        raw.close()


def raw_insert(path: Path, *, stream: str = "catalog", version: int | None = None, type: str = "TableCreated",
               schema_version: int = 1, time: object = None, payload: object = '{}', seq: int | None = None) -> int:
    """Append one row behind the ledger's back (as a tool or a person who knows the chain might);
    returns its seq."""
    return forge(path, stream=stream, type=type, payload=payload, version=version,  # type: ignore[arg-type]
                 schema_version=schema_version, time=time, seq=seq)


def open_and_verify(path: Path) -> LedgerError:
    """Open and verify; returns the typed error either raised (anything else propagates)."""
    try:
        led = Ledger.open(path)
    except LedgerError as exc:
        exc.raised_by = "open"
        return exc
    try:
        led.verify()
    except LedgerError as exc:
        exc.raised_by = "verify"
        return exc
    finally:
        led.close()
    raise AssertionError(f"{path} opened and verified: the fault went unnoticed")


def assert_clear(exc: BaseException, *, names: str) -> None:
    """One line, naming the file or the event."""
    text = str(exc)
    assert "\n" not in text and "\r" not in text, f"the message is not one line: {text!r}"
    assert names in text, f"the message does not name {names!r}: {text!r}"


def says_what_to_do(text: str) -> bool:
    return any(word in text.lower() for word in ACTION_WORDS)


# --- ways to make things read-only or full -----------------------------------------------------

def chmod_binds(folder: Path) -> bool:
    """Whether a 0444 file refuses our writes (it does not for root with CAP_DAC_OVERRIDE)."""
    probe = folder / "chmod-probe"
    probe.write_bytes(b"x")
    probe.chmod(0o444)
    try:
        with open(probe, "ab"):
            return False
    except PermissionError:
        return True
    finally:
        probe.chmod(0o644)
        probe.unlink()


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture
def immutable(tmp_path: Path):
    """``immutable(path)`` sets the immutable flag (binds root too); cleared at teardown."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    probe = tmp_path / "chattr-probe"
    probe.write_bytes(b"x")
    done = _run("chattr", "+i", str(probe))
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {done.stderr.strip()}")
    try:
        with open(probe, "ab"):
            pass
        works = False
    except PermissionError:
        works = True
    _run("chattr", "-i", str(probe))
    if not works:
        pytest.skip("the immutable flag does not stop writes on this filesystem")
    flagged: list[Path] = []

    def make(path: Path) -> None:
        assert _run("chattr", "+i", str(path)).returncode == 0
        flagged.append(path)

    yield make
    for path in reversed(flagged):
        _run("chattr", "-i", str(path))


@pytest.fixture
def mounts(tmp_path: Path):
    """``mounts("tmpfs", kb)`` or ``mounts("ext4", kb)``: a small filesystem of its own,
    unmounted at teardown; skips if this machine does not let us mount."""
    made: list[Path] = []

    def mount(kind: str, kb: int) -> Path:
        target = tmp_path / f"{kind}-{len(made)}"
        target.mkdir()
        if kind == "tmpfs":
            done = _run("mount", "-t", "tmpfs", "-o", f"size={kb}k", "tmpfs", str(target))
        else:
            image = tmp_path / f"{kind}-{len(made)}.img"
            with open(image, "wb") as handle:
                handle.truncate(kb * 1024)
            made_fs = _run("mkfs.ext4", "-q", "-F", "-O", "^has_journal", str(image))
            if made_fs.returncode != 0:
                pytest.skip(f"mkfs.ext4 failed: {made_fs.stderr.strip()}")
            done = _run("mount", "-o", "loop", str(image), str(target))
        if done.returncode != 0:
            pytest.skip(f"cannot mount a {kind} here: {done.stderr.strip().splitlines()[0]}")
        made.append(target)
        return target

    yield mount
    for target in reversed(made):
        _run("umount", str(target))


# --- (a) read-only ---------------------------------------------------------------------------

def _read_only(mechanism: str, target: Path, immutable_factory) -> Callable[[], None]:
    """Make ``target`` read-only; returns the undo."""
    if mechanism == "chmod":
        if not chmod_binds(target.parent):
            pytest.skip("permission bits do not bind this process (root with CAP_DAC_OVERRIDE); "
                        "the chattr case covers it")
        mode = target.stat().st_mode
        target.chmod(0o555 if target.is_dir() else 0o444)
        return lambda: target.chmod(mode)
    make = immutable_factory()
    make(target)
    return lambda: _run("chattr", "-i", str(target))


@pytest.mark.parametrize("mechanism", ["chattr", "chmod"])
def test_r10_read_only_file_opens_for_reads_and_refuses_the_first_append(
        tmp_path: Path, request, mechanism: str) -> None:
    """Found: a read-only ledger *file* in a writable folder opens, answers queries, and
    the first append is refused with LedgerUnavailable; nothing is written."""
    path = tmp_path / "ledger.db"
    state = build(path)
    events = raw_count(path)
    undo = _read_only(mechanism, path, lambda: request.getfixturevalue("immutable"))
    try:
        with Ledger.open(path) as led:
            assert led.state == state and led.event_count() == events
            assert [t.name for t in led.tables(database="db0")]
            for attempt in (lambda: led.create_table("db0.new"), lambda: led.drop_database("db0"),
                            lambda: led.start_vacuum(retention="0s", override_floor=True)):
                with pytest.raises(LedgerUnavailable) as refused:
                    attempt()
                assert_clear(refused.value, names=str(path))
                assert "permissions" in str(refused.value)
                assert led.event_count() == events and led.state == state
            led.verify()
    finally:
        undo()
    if mechanism == "chmod":
        # Found: SQLite created -wal and -shm with the file's mode (0444), so restoring the
        # file alone leaves the ledger read-only; the message says to look at those too.
        sidecars = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm")]
        assert all(p.exists() and p.stat().st_mode & 0o222 == 0 for p in sidecars)
        with Ledger.open(path) as led, pytest.raises(LedgerUnavailable, match="-wal and -shm"):
            led.create_table("db0.new")
        for sidecar in sidecars:
            sidecar.chmod(0o644)
    with Ledger.open(path) as led:
        assert led.event_count() == events and led.state == state
        led.create_table("db0.new")
        led.verify()


@pytest.mark.parametrize("mechanism", ["chattr", "chmod"])
def test_r10_read_only_folder_refuses_to_open_with_ledger_unavailable(
        tmp_path: Path, request, mechanism: str) -> None:
    """Found: in a read-only folder SQLite cannot create the -wal/-shm files a WAL ledger
    needs, so even opening for reads is refused, with LedgerUnavailable naming the file."""
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "ledger.db"
    state = build(path)
    events = raw_count(path)
    assert sorted(os.listdir(folder)) == ["ledger.db"]  # closed cleanly: no -wal, no -shm
    undo = _read_only(mechanism, folder, lambda: request.getfixturevalue("immutable"))
    try:
        with pytest.raises(LedgerUnavailable) as refused:
            Ledger.open(path)
        assert_clear(refused.value, names=str(path))
        if mechanism == "chmod":  # SQLite says "readonly": the hint follows (chattr: see below)
            assert "permissions" in str(refused.value)
        assert sorted(os.listdir(folder)) == ["ledger.db"]
    finally:
        undo()
    with Ledger.open(path) as led:
        assert led.event_count() == events and led.state == state
        led.verify()


@pytest.mark.parametrize("leftovers", [False, True], ids=["closed-cleanly", "wal-and-shm-beside-it"])
def test_r10_read_only_mount(tmp_path: Path, mounts, leftovers: bool) -> None:
    """Found: on a read-only filesystem a cleanly closed ledger (no -wal, no -shm) cannot
    even be opened: LedgerUnavailable. If -wal and -shm were left beside it (by a
    read-only reader, or a crash), it opens for reads and the first append is refused
    with LedgerUnavailable. Either way nothing is written."""
    target = mounts("tmpfs", 2048)
    path = target / "ledger.db"
    state = build(path)
    events = raw_count(path)
    if leftovers:
        reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        reader.execute("SELECT count(*) FROM events").fetchall()
        reader.close()
    files = sorted(os.listdir(target))
    assert files == (["ledger.db", "ledger.db-shm", "ledger.db-wal"] if leftovers else ["ledger.db"])
    assert _run("mount", "-o", "remount,ro", str(target)).returncode == 0
    try:
        if leftovers:
            with Ledger.open(path) as led:
                assert led.state == state
                with pytest.raises(LedgerUnavailable) as refused:
                    led.drop_database("db0")
                assert "permissions" in str(refused.value)
                assert led.event_count() == events and led.state == state
                led.verify()
        else:
            with pytest.raises(LedgerUnavailable) as refused:
                Ledger.open(path)
        assert_clear(refused.value, names=str(path))
        assert sorted(os.listdir(target)) == files
    finally:
        assert _run("mount", "-o", "remount,rw", str(target)).returncode == 0
    with Ledger.open(path) as led:
        assert led.event_count() == events and led.state == state
        led.create_table("db0.after")
        led.verify()


# --- (b) full disk ---------------------------------------------------------------------------

def commands_until_unavailable(led: Ledger, budget: int = 5000):
    """Run a cycle of single- and multi-event commands until one is refused with
    LedgerUnavailable; returns (label, the command, the error, events before, events after)."""
    last_plan = {}

    def vacuum_start():
        last_plan["run"] = led.start_vacuum(retention="0s", override_floor=True, limit=2)

    def vacuum_finish():  # the run is forgotten only once its finish landed, so a retry redoes it
        run = last_plan.get("run")
        if run is not None and run.plan.purges:
            run.finish([Result(p, 1, 10) for p in run.plan.purges])
        last_plan.pop("run", None)

    for i in range(budget):
        db = f"full{i % 7}"
        cycle = [(f"create {db}.t{k}", lambda k=k: led.create_table(f"{db}.t{k}")) for k in range(3)]
        cycle += [(f"drop database {db}", lambda: led.drop_database(db)),
                  ("start vacuum", vacuum_start), ("finish vacuum", vacuum_finish)]
        for label, command in cycle:
            before = led.event_count()
            try:
                command()
            except LedgerUnavailable as exc:
                return label, command, exc, before, led.event_count()
            except LedgerError:
                pass
    raise AssertionError(f"the disk never filled up in {budget} rounds")


def _fill(folder: Path, leave: int) -> Path:
    """Take all but about ``leave`` bytes of the filesystem's free space."""
    filler = folder / "filler"
    stat = os.statvfs(folder)
    free = stat.f_bavail * stat.f_frsize
    with open(filler, "wb") as handle:
        chunk = b"\0" * 65536
        remaining = max(0, free - leave)
        try:
            while remaining > 0:
                remaining -= handle.write(chunk[:min(len(chunk), remaining)])
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


@pytest.mark.parametrize("kind", ["tmpfs", "ext4"])
def test_r10_full_disk_refuses_the_command_whole_and_recovers(tmp_path: Path, mounts, kind: str) -> None:
    target = mounts(kind, 4096)
    path = target / "ledger.db"
    build(path, tables=12)
    with Ledger.open(path) as led:
        filler = _fill(target, leave=96 * 1024)
        label, command, exc, before, after = commands_until_unavailable(led)
        print(f"\n{kind}: full at {label!r}: {exc}")
        assert_clear(exc, names=str(path))
        assert "full" in str(exc) and "free some space" in str(exc)
        assert after == before, "a refused command left some of its events"
        # Multi-event commands on the full disk: each is refused whole or lands whole.
        for name in ("full9.a", "full9.b"):
            try:
                led.create_table(name)
            except LedgerUnavailable:
                pass
        for label, multi in [("drop database", lambda: led.drop_database("full9")),
                             ("start vacuum", lambda: led.start_vacuum(retention="0s", override_floor=True))]:
            count = led.event_count()
            try:
                multi()
                print(f"{kind}: {label} still fitted")
            except LedgerUnavailable:
                assert led.event_count() == count
            except LedgerError:
                pass
        led.verify()  # reads still work on a full disk
        check_log(led)  # and every command in the log is whole

        filler.unlink()  # space returns
        command()
        assert led.event_count() > before
        led.verify()
        state = led.state
    with Ledger.open(path) as led:
        assert led.state == state == fold_rows(State(), led.store.read(0))
        check_log(led)
        led.create_table("db0.after")


_FSIZE_CHILD = textwrap.dedent("""
    import json, os, resource, signal, sys
    from ledger import Ledger
    from tests.test_faults import commands_until_unavailable
    path = sys.argv[1]
    led = Ledger.open(path)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so a write past the limit fails with EFBIG
    biggest = max(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    resource.setrlimit(resource.RLIMIT_FSIZE, (biggest + 24 * 1024, resource.RLIM_INFINITY))
    label, command, exc, before, after = commands_until_unavailable(led)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    led.verify()
    command()
    print(json.dumps({"label": label, "type": type(exc).__name__, "message": str(exc),
                      "before": before, "after": after, "retried": led.event_count()}))
""")


def test_r10_file_size_limit_refuses_the_command_whole_and_recovers(tmp_path: Path) -> None:
    """Where no filesystem can be mounted this is the full disk: RLIMIT_FSIZE makes the
    WAL's growth fail with EFBIG, in a child process."""
    path = tmp_path / "ledger.db"
    build(path, tables=12)
    done = subprocess.run([sys.executable, "-c", _FSIZE_CHILD, str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    print(f"\nRLIMIT_FSIZE: refused at {result['label']!r}: {result['message']}")
    assert result["type"] == "LedgerUnavailable"
    assert "\n" not in result["message"] and str(path) in result["message"]
    assert result["after"] == result["before"] and result["retried"] > result["before"]
    with Ledger.open(path) as led:
        led.verify()
        check_log(led)
        assert led.event_count() == result["retried"]


# --- (c), (d) truncated and damaged files ----------------------------------------------------

@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.9])
def test_r10_truncated_file_is_corrupt(tmp_path: Path, fraction: float) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(int(size * fraction))
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt), exc
    assert exc.raised_by == "open"
    assert_clear(exc, names=str(path))
    assert "damaged" in str(exc)


def _pages_of(path: Path, btree: str) -> list[int]:
    raw = sqlite3.connect(path)
    try:
        return [r[0] for r in raw.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", (btree,))]
    finally:
        raw.close()


def _garble_page(path: Path, pageno: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "r+b") as handle:
        handle.seek((pageno - 1) * 4096)
        handle.write(bytes(rng.randrange(256) for _ in range(4096)))


def test_r10_garbage_in_a_middle_page_of_the_log_is_corrupt_on_open(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path, tables=150)
    pages = _pages_of(path, "events")
    assert len(pages) >= 3, "the log should span several pages"
    _garble_page(path, pages[len(pages) // 2])
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt) and exc.raised_by == "open"
    assert_clear(exc, names=str(path))


def test_r10_garbage_in_the_index_is_corrupt_on_verify(tmp_path: Path) -> None:
    """Opening reads the log by seq and never touches the (stream, version) index, so only
    verify's integrity check can see this damage, and it does."""
    path = tmp_path / "ledger.db"
    build(path, tables=150)
    _garble_page(path, _pages_of(path, "idx_events_stream_version")[0])
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt) and exc.raised_by == "verify"
    # In words for any store (0.3 said "SQLite integrity check failed" on PostgreSQL too).
    assert str(exc).startswith(f"{path}: the store's own integrity check failed: ")


def test_r10_integrity_failure_message_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path, tables=150)
    _garble_page(path, _pages_of(path, "idx_events_stream_version")[0])
    with Ledger.open(path) as led, pytest.raises(LedgerCorrupt) as caught:
        led.verify()
    assert_clear(caught.value, names=str(path))


def test_r10_random_byte_flips_never_escape_as_raw_errors(tmp_path: Path) -> None:
    """Flip single bytes anywhere past the first page (the schema page has a test of its
    own below): every outcome must be LedgerCorrupt or IncompatibleLedger from open or
    verify, or a ledger that opens and verifies. Flips that change a name or an id inside
    a payload fold into a different, valid state: SQLite keeps no checksums of row
    contents, so these are counted and printed, not failed."""
    path = tmp_path / "ledger.db"
    expected = build(path, tables=80)
    pristine = path.read_bytes()
    copy = tmp_path / "flipped.db"
    rng = random.Random(20260101)
    outcomes: dict[str, int] = {}
    wrong: list[str] = []
    for _ in range(150):
        data = bytearray(pristine)
        offset = rng.randrange(4096, len(data))
        data[offset] ^= rng.randrange(1, 256)
        for leftover in (copy, Path(f"{copy}-wal"), Path(f"{copy}-shm")):
            leftover.unlink(missing_ok=True)
        copy.write_bytes(bytes(data))
        try:
            with Ledger.open(copy) as led:
                led.verify()
                key = "verified, same state" if led.state == expected else "verified, different state"
        except (LedgerCorrupt, IncompatibleLedger) as exc:
            key = type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - the point is to see what escapes
            key = f"wrong: {type(exc).__name__}"
            wrong.append(f"byte {offset}: {type(exc).__name__}: {exc}")
        outcomes[key] = outcomes.get(key, 0) + 1
    print(f"\nbyte flips: {outcomes}")
    assert not wrong, "\n".join(wrong[:5])


def test_r10_damaged_schema_text_is_corrupt_not_a_raw_unicode_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    data = bytearray(path.read_bytes())
    at = data.index(b'CREATE TABLE "meta"')
    data[at + 4] = 0xA4  # 'CREA\xa4E TABLE'
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerCorrupt):
        Ledger.open(path)


# --- (e), (f) newer format, unknown events ---------------------------------------------------

def test_r10_newer_format_version_is_incompatible_and_the_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    raw = sqlite3.connect(path)
    raw.execute("UPDATE meta SET value = ? WHERE key = 'format_version'", (str(FORMAT_VERSION + 1),))
    raw.commit()
    raw.close()
    checkpoint(path)
    before = path.read_bytes()
    with pytest.raises(IncompatibleLedger) as refused:
        Ledger.open(path)
    assert_clear(refused.value, names=str(path))
    assert f"format {FORMAT_VERSION + 1}" in str(refused.value) and "upgrade" in str(refused.value)
    assert path.read_bytes() == before


def test_r10_unknown_event_type_is_incompatible_naming_the_event(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    seq = raw_insert(path, type="TableTeleported", payload='{"table_id": "x"}')
    exc = open_and_verify(path)
    assert isinstance(exc, IncompatibleLedger) and exc.raised_by == "open"
    assert_clear(exc, names=f"event #{seq}")
    assert "TableTeleported" in str(exc) and "upgrade" in str(exc)


def test_r10_newer_event_schema_version_is_incompatible_naming_the_event(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    seq = raw_insert(path, type="TableDropped", schema_version=2, payload='{"table_id": "x", "name": "a.b"}')
    exc = open_and_verify(path)
    assert isinstance(exc, IncompatibleLedger)
    assert_clear(exc, names=f"event #{seq}")
    assert "upgrade" in str(exc)


# --- (g) payloads ----------------------------------------------------------------------------

@pytest.mark.parametrize("payload", [
    "not json at all", '{"table_id": "abc", "name": "db0.t1"', "[1, 2]", "null", '"a string"',
    '{"table_id": "abc"}', '{"table_id": "abc", "name": "db0.t1", "colour": "blue"}',
], ids=["not-json", "cut-short", "list", "null", "string", "missing-field", "extra-field"])
def test_r10_payload_that_is_not_json_or_does_not_fit_is_corrupt(tmp_path: Path, payload: str) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    seq = raw_insert(path, type="TableDropped", payload=payload)
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt), exc
    assert exc.raised_by == "open"
    assert_clear(exc, names=f"event #{seq}")
    assert "TableDropped" in str(exc)


def test_r10_payload_that_is_not_utf8_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    raw = sqlite3.connect(path)
    last_seq, last_time, version = raw.execute(
        "SELECT max(seq), max(time), (SELECT coalesce(max(version), 0) FROM events WHERE stream = 'catalog') "
        "FROM events").fetchone()
    raw.execute("INSERT INTO events VALUES (?, 'catalog', ?, 'TableDropped', 1, ?, 'x', "
                "CAST(x'7b22ff22' AS TEXT), ?)", (last_seq + 1, version + 1, last_time + 1, "0" * 64))
    raw.commit()
    raw.close()
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt), f"{type(exc).__name__}: {exc}"
    assert_clear(exc, names=f"event #{last_seq + 1}")


def test_r10_payload_field_of_the_wrong_type_is_corrupt_on_open(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        table = led.create_table("db0.t")
    raw_insert(path, type="TableDropped", payload=json.dumps({"table_id": [table.id], "name": "db0.t"}))
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt)


def test_r10_watermark_payload_of_the_wrong_type_is_caught_by_open_or_verify(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        led.create_table("db0.t")
        led.drop_table("db0.t")
    raw_insert(path, stream="watermark:ledger", type="WatermarkAdvanced",
               payload='{"scope": "ledger", "to": "soon"}')
    try:
        with Ledger.open(path) as led:
            led.verify()
            led.undrop_table("db0.t")  # raw TypeError here today
    except LedgerCorrupt:
        return
    raise AssertionError("a watermark of the wrong type went unnoticed")


@pytest.mark.parametrize("stream,type_,payload", [
    ("watermark:ledger", "WatermarkAdvanced", {"scope": "ledger", "to": 2 ** 70}),
    ("watermark:ledger", "WatermarkAdvanced", {"scope": "ledger", "to": 2 ** 63 - 1}),
    ("retention:ledger", "RetentionSet", {"scope": "ledger", "seconds": 2 ** 62}),
    ("write", "WriteBegun", {"write_id": "w1", "table_id": "{id}", "folder": "_writes/w1", "lease_seconds": 60,
                             "expires_at": -(2 ** 63)}),
], ids=["2**70", "2**63-1", "retention-2**62", "-2**63"])
def test_r16_a_time_no_date_can_show_is_a_corrupt_event_named_at_decode(
        tmp_path: Path, stream: str, type_: str, payload: dict) -> None:
    """A validly chained payload whose time (or duration) no ``datetime`` can show: refused when
    the log is read, naming the event, never a raw OverflowError from whoever shows it later."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        led.create_table("db0.t")
        table = led.create_table("db0.live")
        led.drop_table("db0.t")
    payload = {key: table.id if value == "{id}" else value for key, value in payload.items()}
    seq = raw_insert(path, stream=stream.replace("write", f"data:{table.id}"), type=type_, payload=json.dumps(payload))
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt), f"{type(exc).__name__}: {exc}"
    assert exc.raised_by == "open"
    assert_clear(exc, names=f"event #{seq}")


def test_r16_a_row_timed_past_the_last_date_is_corrupt_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    seq = raw_insert(path, time=2 ** 63 - 1, payload='{"table_id": "late1", "name": "db9.t", "path": "late1"}')
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt) and exc.raised_by == "open"
    assert_clear(exc, names=f"event #{seq}")


# --- (h) a tampered log ----------------------------------------------------------------------

@pytest.mark.parametrize("statement", [
    "UPDATE events SET time = 0 WHERE seq = 2", "UPDATE events SET payload = '{}' WHERE seq = 2",
    "DELETE FROM events WHERE seq = 2",
])
def test_r10_update_and_delete_of_events_are_refused_by_triggers(tmp_path: Path, statement: str) -> None:
    path = tmp_path / "ledger.db"
    state = build(path)
    events = raw_count(path)
    raw = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(statement)
    raw.close()
    with Ledger.open(path) as led:
        assert led.event_count() == events and led.state == state
        led.verify()


def test_r10_row_timed_before_its_predecessor_is_corrupt_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    raw = sqlite3.connect(path)
    first_time = raw.execute("SELECT time FROM events WHERE seq = 1").fetchone()[0]
    raw.close()
    seq = raw_insert(path, time=first_time, payload='{"table_id": "back1", "name": "db9.t", "path": "back1"}')
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt) and exc.raised_by == "open"
    assert_clear(exc, names=f"event #{seq}")
    assert "time" in str(exc)


def test_r10_stream_version_gap_is_corrupt_naming_the_event(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path)
    raw = sqlite3.connect(path)
    version = raw.execute("SELECT max(version) FROM events WHERE stream = 'catalog:db0'").fetchone()[0]
    raw.close()
    seq = raw_insert(path, stream="catalog:db0", version=version + 2,
                     payload='{"table_id": "gap1", "name": "db0.gap", "path": "gap1"}')
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt) and exc.raised_by == "open"
    assert_clear(exc, names=f"event #{seq}")
    assert f"version {version + 2}" in str(exc) and f"expected {version + 1}" in str(exc)


def test_r10_tampering_under_a_snapshot_is_caught_by_verify(tmp_path: Path) -> None:
    """Open trusts a snapshot that matches the log's head, so an old event rewritten behind
    the triggers' back (they are dropped first) is not seen by open; verify refolds from
    nothing and names the event."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, snapshot_every=1) as led:
        for i in range(6):
            led.create_table(f"db0.t{i}")
        led.drop_table("db0.t0")
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER events_no_update")
    raw.execute("UPDATE events SET time = 1 WHERE seq = 3")
    raw.commit()
    raw.close()
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt) and exc.raised_by == "verify"
    assert_clear(exc, names="event #3")


def test_r10_sequence_gap_is_corrupt_naming_the_event(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        led.create_table("db0.t")
        head = led.event_count()
    raw_insert(path, seq=head + 5, payload='{"table_id": "seqgap", "name": "db0.u", "path": "seqgap"}')
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt)
    assert_clear(exc, names=f"event #{head + 5}")


def test_r10_event_time_that_is_not_a_number_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        led.create_table("db0.t")
    raw_insert(path, time="yesterday", payload='{"table_id": "txt", "name": "db0.u", "path": "txt"}')
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt)


def test_r10_event_schema_version_that_is_not_a_number_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        led.create_table("db0.t")
    raw_insert(path, schema_version="one", payload='{"table_id": "sv", "name": "db0.u", "path": "sv"}')
    exc = open_and_verify(path)
    assert isinstance(exc, LedgerCorrupt)


# --- every message says what to do -----------------------------------------------------------

def _fault_messages() -> dict[str, Callable[[Path], LedgerError]]:
    def truncated(tmp: Path) -> LedgerError:
        path = tmp / "ledger.db"
        build(path)
        with open(path, "r+b") as handle:
            handle.truncate(path.stat().st_size // 2)
        return open_and_verify(path)

    def garbage_page(tmp: Path) -> LedgerError:
        path = tmp / "ledger.db"
        build(path, tables=150)
        pages = _pages_of(path, "events")
        _garble_page(path, pages[len(pages) // 2])
        return open_and_verify(path)

    def not_json(tmp: Path) -> LedgerError:
        path = tmp / "ledger.db"
        build(path)
        raw_insert(path, type="TableDropped", payload="not json")
        return open_and_verify(path)

    def time_back(tmp: Path) -> LedgerError:
        path = tmp / "ledger.db"
        build(path)
        raw_insert(path, time=1, payload='{"table_id": "b", "name": "db9.t", "path": "b"}')
        return open_and_verify(path)

    def newer_format(tmp: Path) -> LedgerError:
        path = tmp / "ledger.db"
        build(path)
        raw = sqlite3.connect(path)
        raw.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
        raw.commit()
        raw.close()
        return open_and_verify(path)

    def unknown_type(tmp: Path) -> LedgerError:
        path = tmp / "ledger.db"
        build(path)
        raw_insert(path, type="TableTeleported")
        return open_and_verify(path)

    return {"truncated": truncated, "garbage-page": garbage_page, "not-json": not_json,
            "time-back": time_back, "newer-format": newer_format, "unknown-type": unknown_type}


@pytest.mark.parametrize("fault", [
    "truncated", "garbage-page", "not-json", "time-back", "newer-format", "unknown-type",
])
def test_r10_fault_message_says_what_to_do(tmp_path: Path, fault: str) -> None:
    exc = _fault_messages()[fault](tmp_path)
    assert says_what_to_do(str(exc)), str(exc)


def test_r10_unwritable_folder_message_says_what_to_do(tmp_path: Path, immutable) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "ledger.db"
    build(path)
    immutable(folder)
    with pytest.raises(LedgerUnavailable) as refused:
        Ledger.open(path)
    assert says_what_to_do(str(refused.value)), str(refused.value)


def test_r10_file_size_limit_message_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build(path, tables=12)
    done = subprocess.run([sys.executable, "-c", _FSIZE_CHILD, str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    message = json.loads(done.stdout)["message"]
    assert says_what_to_do(message), message


# --- the log and its cache edited by hand (each test failed before its fix) --------------------

def test_r3_a_forged_undrop_behind_its_watermark_is_corrupt_on_open_and_verify(tmp_path: Path) -> None:
    """The triggers stop UPDATE and DELETE, not INSERT: a TableUndropped row inserted by hand for
    an instance behind its watermark used to fold and verify. The fold re-checks R3 on replay."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as led:
        table = led.create_table("sales.orders")
        led.drop_table("sales.orders")
        led.advance_watermark(led.now())
        reader = Ledger.open(path)  # open before the forgery: it must find it on verify
    seq = raw_insert(path, type="TableUndropped",
                     payload=json.dumps({"table_id": table.id, "name": "sales.orders"}))
    with pytest.raises(LedgerCorrupt) as on_open:
        Ledger.open(path)
    assert_clear(on_open.value, names=f"event #{seq} undrops sales.orders ({table.id})")
    assert "R3 forbids it" in str(on_open.value)
    with pytest.raises(LedgerCorrupt, match=f"event #{seq} undrops"):
        reader.verify()
    reader.close()


def _edit_snapshot(path: Path, part: str, key: str, edit: Callable[[list], None], *, fix_digest: bool) -> None:
    """Change one entry of the stored snapshot (its newest generation), as someone with sqlite3
    and a text editor might; ``fix_digest`` also recomputes the entry's CRC-32 (of part, key and
    value, as documented in README)."""
    import zlib
    raw = sqlite3.connect(path)
    gen, value = raw.execute("SELECT gen, value FROM snapshot_entries WHERE part = ? AND key = ? "
                             "ORDER BY gen DESC LIMIT 1", (part, key)).fetchone()
    doc = json.loads(value[4:])
    edit(doc)
    body = json.dumps(doc, separators=(",", ":")).encode()
    crc = value[:4] if not fix_digest else \
        zlib.crc32(body, zlib.crc32(f"{part}\0{key}\0".encode())).to_bytes(4, "big")  # as the store seals
    raw.execute("UPDATE snapshot_entries SET value = ? WHERE part = ? AND key = ? AND gen = ?",
                (crc + body, part, key, gen))
    raw.commit()
    raw.close()


def _blocked_ledger_with_snapshot(path: Path, *, padding: int = 0) -> tuple[str, object]:
    """``padding``: events that add no entry to the state (advances of one other watermark)."""
    with Ledger.open(path, snapshot_every=5) as led:
        for i in range(6):
            led.create_table(f"db0.t{i}")
        start = led.event_count()
        while led.event_count() < start + padding:
            led.advance_watermark(led.now(), scope="database:padding")
        table = led.drop_table("db0.t0")
        mark = led.now()
        led.advance_watermark(mark)
        led.runner.cache.save_snapshot()
        assert led.store.latest_generation().seq == led.event_count()
    return table.id, mark


def _zero_the_ledger_watermark(path: Path, *, fix_digest: bool) -> None:
    def zero(entry: list) -> None:
        entry[0] = 0
    _edit_snapshot(path, "guard.watermarks", "ledger", zero, fix_digest=fix_digest)


def test_r16_a_hand_edited_snapshot_is_ignored_on_open_and_rebuilt(tmp_path: Path) -> None:
    """Editing the snapshot's ledger watermark to 0 used to make watermark() say 1970 and let a
    blocked undrop through. Each stored entry carries a CRC checked when it is read: a mismatch
    makes the ledger drop that snapshot, refold the log and store a new one, and the guard holds,
    whether a query or a command reads it first."""
    path = tmp_path / "ledger.db"
    table_id, mark = _blocked_ledger_with_snapshot(path)
    for first in ("query", "command"):
        with Ledger.open(path) as led:
            damaged = led.store.latest_generation().gen
        _zero_the_ledger_watermark(path, fix_digest=False)
        with Ledger.open(path) as led:
            if first == "query":
                assert led.watermark() == mark
            with pytest.raises(UndropBlocked, match=table_id):
                led.undrop_table("db0.t0")
            assert led.watermark() == mark
            assert led.store.latest_generation().gen > damaged  # stored afresh from the log


def test_r16_an_entry_moved_to_another_key_fails_its_check(tmp_path: Path) -> None:
    """The CRC covers the part and the key: the ledger watermark's entry copied over another
    scope's (or a table's over another id) is damage, found when read, and rebuilt from the log."""
    path = tmp_path / "ledger.db"
    table_id, mark = _blocked_ledger_with_snapshot(path)
    raw = sqlite3.connect(path)
    value = raw.execute("SELECT value FROM snapshot_entries WHERE part = 'guard.watermarks' "
                        "AND key = 'ledger' ORDER BY gen DESC LIMIT 1").fetchone()[0]
    gen = raw.execute("SELECT max(gen) FROM snapshot_generations").fetchone()[0]
    raw.execute("INSERT OR REPLACE INTO snapshot_entries(part, key, gen, value) VALUES (?, ?, ?, ?)",
                ("guard.watermarks", f"table:{table_id}", gen, value))
    raw.commit()
    raw.close()
    with Ledger.open(path) as led:
        assert led.watermark(f"table:{table_id}") is None  # as the log says (the part healed from it)
        assert led.watermark(f"table:{table_id}") is None  # the ledger's next look stores it afresh
        assert led.store.latest_generation().gen > gen


def test_r16_a_changed_entry_count_is_rebuilt_not_read_forever(tmp_path: Path) -> None:
    """A head whose count does not match its entries used to send ``state`` round a reload loop
    that read the same generation again and again: it is damage, and the log is folded instead."""
    path = tmp_path / "ledger.db"
    table_id, mark = _blocked_ledger_with_snapshot(path)
    raw = sqlite3.connect(path)
    gen, head = raw.execute("SELECT gen, head FROM snapshot_generations ORDER BY gen DESC LIMIT 1").fetchone()
    doc = json.loads(head)
    doc["counts"]["tables.bindings"] += 1
    raw.execute("UPDATE snapshot_generations SET head = ? WHERE gen = ?", (json.dumps(doc).encode(), gen))
    raw.commit()
    raw.close()
    with Ledger.open(path) as led:
        assert len(led.tables()) == 5 and led.watermark() == mark
        assert led.state.seq == led.event_count()
        assert led.store.latest_generation().gen > gen


@pytest.mark.parametrize("padding", [0, 200], ids=["few events", "many events to each entry"])
def test_r16_verify_discards_a_forged_snapshot_whose_digest_was_recomputed(tmp_path: Path, padding: int) -> None:
    """A forger who also recomputes the digest gets past open (a digest is no secret), but not
    past verify: it refolds the log, sees the snapshot disagree, discards it and rebuilds it,
    so that the next open is right again (it used to say "reopen to rebuild", and reopening
    trusted the same snapshot)."""
    path = tmp_path / "ledger.db"
    table_id, mark = _blocked_ledger_with_snapshot(path, padding=padding)
    _zero_the_ledger_watermark(path, fix_digest=True)
    with Ledger.open(path) as led:
        assert led.watermark() is not None and led.watermark() < mark  # the forgery was believed
        report = led.verify()
        assert report.snapshot_discarded
        assert led.watermark() == mark  # what it holds now is the fold of the log
        with pytest.raises(UndropBlocked, match=table_id):
            led.undrop_table("db0.t0")
    with Ledger.open(path) as led:
        assert led.runner.cache.snapshot_seq > 0 and led.watermark() == mark
        assert not led.verify().snapshot_discarded


def test_r16_a_read_only_ledger_from_before_the_chain_still_opens_for_reads(tmp_path: Path, immutable) -> None:
    """Found while building the upgrade: it needs to write, and a file this process may not
    write must still answer queries (unhashed, said so by verify) rather than refuse to open."""
    path = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "data" / "format1-0.1.0.db", path)
    before = path.read_bytes()
    immutable(path)
    with Ledger.open(path, warehouse="/tmp/format1-warehouse") as led:
        report = led.verify()
        assert not report.chained and report.head is None and report.events == 14
        assert [t.name for t in led.tables()] == ["sales.orders", "sales.returns"]
        with pytest.raises(IncompatibleLedger, match="open it writable with Ledger.open once to upgrade it"):
            led.create_table("x.y")
    _run("chattr", "-i", str(path))
    assert path.read_bytes() == before
    with Ledger.open(path, warehouse="/tmp/format1-warehouse") as led:
        assert led.verify().chained and led.event_count() == 15


def _lazy_pair(path: Path) -> tuple[Ledger, Ledger]:
    """A ledger of a few tables with a stored snapshot, opened twice: ``a`` reads it lazily."""
    with Ledger.open(path, snapshot_every=10**6) as led:
        for i in range(5):
            led.create_table(f"a.t{i}")
        led.create_table("b.x")
        led.runner.cache.save_snapshot()
    return Ledger.open(path, snapshot_every=10**6), Ledger.open(path, snapshot_every=10**6)


def test_r4_a_command_whose_snapshot_goes_after_its_append_is_not_decided_again(tmp_path: Path) -> None:
    """The fold of a command's own events may read a stored entry; if another process replaced the
    snapshot meanwhile, that read fails after the append. It used to count as a lost race: the
    command was decided again on a state that already held it, and a drop that had happened came
    back as DatabaseNotFound."""
    a, b = _lazy_pair(tmp_path / "ledger.db")
    try:
        # Read what the decision will read (the catalog stream's version, every name) but not the
        # instances of a.t0..a.t4: the fold of the drop reads those, from a generation gone by then.
        a.create_table("c.z")
        assert [t.name for t in a.tables(database="b")] == ["b.x"]
        b.store.delete_generations()
        before = a.event_count()
        dropped = a.drop_database("a")
        assert sorted(t.name for t in dropped) == [f"a.t{i}" for i in range(5)]
        assert a.event_count() == before + 1 and [t.name for t in a.tables()] == ["b.x", "c.z"]
    finally:
        a.close()
        b.close()


def test_r16_a_generation_number_is_never_given_twice(tmp_path: Path) -> None:
    """After every generation was deleted (as verify does with one that lies), the next one used to
    be number 1 again, and a process still reading the old number 1 took the new one for it."""
    a, b = _lazy_pair(tmp_path / "ledger.db")
    try:
        old = a.store.latest_generation().gen
        b.store.delete_generations()
        b.runner.refresh(force=True)  # it sees every generation discarded, and folds the log
        for i in range(5, 10):
            b.create_table(f"a.t{i}")
        b.runner.cache.save_snapshot()
        assert b.store.latest_generation().gen > old
        assert a.table("a.t7").name == "a.t7"  # the old generation is gone: a reloads, and finds it
    finally:
        a.close()
        b.close()


def test_r4_a_command_whose_snapshot_goes_before_its_result_is_read_still_returns_it(tmp_path: Path) -> None:
    """A command's result (a table, a version, a vacuum's order with its warehouse root) is read
    from the state that holds the command, lazily. If another process replaced the stored snapshot
    between the append and that read, the command had landed and its caller was told
    ``SnapshotGone``: a vacuum run was recorded, its lease held, and no order came back."""
    from datetime import timedelta

    from ledger import ManualClock
    from tests.conftest import T0
    path = tmp_path / "ledger.db"
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock, snapshot_every=10**6) as led:
        for i in range(5):
            led.create_table(f"a.t{i}")
        led.drop_table("a.t0")
        led.runner.cache.save_snapshot()
    clock.advance(timedelta(days=8))
    store = FaultyStore(path)
    a, b = Ledger(store, clock=clock, snapshot_every=10**6), Ledger.open(path, snapshot_every=10**6)
    try:
        store.after_append = lambda _: b.store.delete_generations()
        w = a.begin_write("a.t1")
        assert a.commit_write(w.id, [(f"{w.relative_folder}/part-0.parquet", 10)]).number == 1
        assert a.drop_table("a.t2").state == "dropped"
        run = a.start_vacuum()
        assert [t.name for t in run.plan.purges] == ["a.t0"]  # a.t2 is within its retention
        assert run.plan.root == a.warehouse
        store.after_append = None
        assert [r.run_id for r in a.runner.state.vacuums.unfinished()] == [run.run_id]
    finally:
        a.close()
        b.close()
