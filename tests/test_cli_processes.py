"""The command line as a shell runs it, in real processes: no Java, Ctrl-C, and a clean stderr.

Each test here began as something a new user saw: forty lines of py4j traceback when Java
is missing; about 145 lines of tracebacks and exit 1 on Ctrl-C during a vacuum; an
orphaned JVM after Ctrl-C while Spark was starting; Spark's start-up lines on stderr
even with ``--json``. Spark starts for real in these processes (a few seconds each).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ledger import Ledger, ManualClock

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent


def aged(path: Path, tables: int = 2, files: int = 50) -> list[str]:
    """A ledger whose tables were dropped ten days ago (the CLI runs on the real clock)."""
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=10))
    locations = []
    with Ledger.open(path, clock=clock) as led:
        for t in range(tables):
            folder = Path(led.create_table(f"sales.t{t}").location)
            folder.mkdir(parents=True)
            for f in range(files):
                (folder / f"part-{f:05d}.parquet").write_bytes(b"x" * 4)
            led.drop_table(f"sales.t{t}")
            locations.append(str(folder))
    return locations


MARK = "RETENTION_LEDGER_TEST_COMMAND"
"""Set in each command's environment, which every process it starts inherits (its JVM too): the
JVMs a command started are those whose environment holds its mark, whatever else runs Spark on
the machine (another suite, a notebook, a second checkout's CI)."""


def cli(*args: str, env: dict | None = None) -> subprocess.Popen:
    """``python -m ledger ARGS`` in a process of its own (``env`` replaces variables; None removes one);
    ``proc.mark`` is the mark its processes carry (``started_jvms``)."""
    mark = uuid.uuid4().hex
    merged = {**os.environ, MARK: mark, **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "ledger", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={k: v for k, v in merged.items() if v is not None})
    proc.mark = mark  # type: ignore[attr-defined]
    return proc


def started_jvms(mark: str) -> set[int]:
    """The running JVMs whose environment carries ``mark``: those the marked command started."""
    found = subprocess.run(["pgrep", "-x", "java"], capture_output=True, text=True).stdout.split()
    wanted = f"{MARK}={mark}".encode()
    mine = set()
    for pid in map(int, found):
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # it ended meanwhile, or is not ours to read
            continue
        if wanted in environment:
            mine.add(pid)
    return mine


def assert_no_jvm_left(proc: subprocess.Popen, wait: float = 5.0) -> None:
    """A JVM the command started must be gone soon after it exits (an orphan would stay)."""
    deadline = time.monotonic() + wait
    while started_jvms(proc.mark) and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.1)
    assert not started_jvms(proc.mark), "the command left a JVM running"  # type: ignore[attr-defined]


def test_only_the_jvms_a_command_started_count_as_left_behind(tmp_path: Path) -> None:
    """The checks above counted every JVM on the machine that was not there before the command:
    where anything else started Spark meanwhile (seen twice in a fresh clone), they failed. A JVM
    another program started is not the command's; one that carries its mark is."""
    source = tmp_path / "Wait.java"
    source.write_text("class Wait { public static void main(String[] a) throws Exception "
                      "{ Thread.sleep(120000); } }")
    bystander = subprocess.Popen(["java", str(source)])
    ours = subprocess.Popen(["java", str(source)], env={**os.environ, MARK: "this-command"})
    ours.mark = "this-command"  # type: ignore[attr-defined]
    try:
        assert started_jvms("this-command") == {ours.pid}
        with pytest.raises(AssertionError, match="left a JVM running"):
            assert_no_jvm_left(ours, wait=0)
        ours.kill()
        ours.wait(timeout=30)
        assert bystander.poll() is None  # still running, and not counted
        assert_no_jvm_left(ours)
    finally:
        for proc in (bystander, ours):
            proc.kill()
            proc.wait(timeout=30)


def vacuum_started(path: Path) -> bool:
    raw = sqlite3.connect(path)
    try:
        return raw.execute("SELECT count(*) FROM events WHERE type = 'VacuumStarted'").fetchone()[0] > 0
    finally:
        raw.close()


@pytest.mark.parametrize("args", [["vacuum"], ["demo", "--dir", "{tmp}/demo"]], ids=["vacuum", "demo"])
def test_without_java_the_cli_says_what_is_missing_in_one_line(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "ledger.db"
    aged(path)
    no_java = {"PATH": os.path.dirname(sys.executable), "JAVA_HOME": None}
    proc = cli("--ledger", str(path), *[a.format(tmp=tmp_path) for a in args], env=no_java)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    [line] = err.splitlines()
    assert line.startswith("error: JavaNotFound: Spark needs Java 17 or newer and there is no java on PATH; "
                           "install one"), line


def test_ctrl_c_while_spark_starts_exits_130_in_one_line_and_leaves_no_jvm(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    aged(path)
    proc = cli("--ledger", str(path), "vacuum")
    # Ctrl-C once the command's JVM exists (Spark is starting): a fixed sleep of 1.5 s sent it,
    # on a busy machine, while Python was still importing, before the command had started at all.
    # The first JVM seen may be Spark's launcher (`spark-class` runs a short-lived java to build the
    # command, then starts the real one): asking again after it was seen failed at load 7-9, when
    # the launcher had gone and the driver's JVM was not there yet. Both are Spark starting.
    deadline = time.monotonic() + 120
    seen: set[int] = set()
    while not seen and proc.poll() is None and time.monotonic() < deadline:
        seen = started_jvms(proc.mark)  # type: ignore[attr-defined]
        time.sleep(0.05)
    assert seen, "the vacuum started no JVM"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert err.splitlines() == ["interrupted: vacuum stopped; the ledger is consistent (an interrupted "
                                "vacuum is finished by the next one)"]
    assert_no_jvm_left(proc)
    with Ledger.open(path) as led:
        led.verify()


def test_r10_ctrl_c_during_a_vacuum_exits_130_and_the_next_vacuum_finishes_it(tmp_path: Path) -> None:
    """Interrupted after its watermark is in the log: one line, exit 130, the JVM gone, the run's
    lease released; the next vacuum (with --json, which keeps stderr empty: Spark's start-up
    lines go to the JVM's log) takes the run over at once and purges everything."""
    path = tmp_path / "ledger.db"
    locations = aged(path, tables=3, files=400)
    proc = cli("--ledger", str(path), "vacuum")
    deadline = time.monotonic() + 120
    while not vacuum_started(path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    # At once: the CLI chose the run's id before starting it, so even a Ctrl-C the moment the run
    # is on record (before the CLI holds its order) releases the lease.
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert len(err.splitlines()) == 1 and err.startswith("interrupted: vacuum stopped")
    assert_no_jvm_left(proc)
    with Ledger.open(path) as led:
        led.verify()
        [run] = led.state.vacuums.unfinished()
        assert run.lease_until is not None and run.lease_until <= led.state.last_time  # released

    nxt = cli("--ledger", str(path), "--json", "vacuum")
    out, err = nxt.communicate(timeout=180)
    assert (nxt.returncode, err) == (0, ""), err
    report = json.loads(out)
    assert report["resumed_runs"] == [run.run_id] and report["purged"] == 3
    assert not any(os.path.exists(loc) for loc in locations)


def test_a_cli_vacuum_leaves_nothing_in_the_temporary_folder(tmp_path: Path) -> None:
    """Spark's block manager, shipped files and native libraries, and the JVM's log, used to stay in
    the temporary folder after every CLI vacuum."""
    path = tmp_path / "ledger.db"
    locations = aged(path, tables=1, files=3)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = cli("--ledger", str(path), "vacuum", env={"TMPDIR": str(temporary)})
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert "purged 1 table(s), deleted 3 file(s)" in out and not os.path.exists(locations[0])
    assert sorted(os.listdir(temporary)) == []


def test_an_unreachable_master_is_said_at_once_in_one_line_and_nothing_is_recorded(tmp_path: Path) -> None:
    """``vacuum --master spark://nosuchhost:7077`` was silent for about 70 s, then named no cause."""
    import socket
    path = tmp_path / "ledger.db"
    aged(path, tables=1, files=2)
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = cli("--ledger", str(path), "vacuum", "--master", f"spark://127.0.0.1:{port}")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and out == "", (out, err)
    [line] = err.splitlines()
    assert line.startswith(f"error: SparkUnavailable: cannot reach the Spark master spark://127.0.0.1:{port} "
                           f"(127.0.0.1:{port}: Connection refused)"), line
    assert not vacuum_started(path)


def test_spark_settings_are_taken_as_spark_submit_takes_them_and_spark_defaults_is_read(tmp_path: Path) -> None:
    """``--conf KEY=VALUE`` reaches the session; the user's spark-defaults.conf is no longer hidden
    (the library used to point SPARK_CONF_DIR at its own folder)."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.retention.fromdefaults  yes\n")
    script = ("from spark_ops import local_session; "
              "s = local_session(conf={'spark.retention.probe': '7'}); "
              "print(s.conf.get('spark.retention.probe'), s.conf.get('spark.retention.fromdefaults'), "
              "s.conf.get('spark.sql.session.timeZone'))")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPARK_CONF_DIR": str(conf_dir)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["7", "yes", "UTC"]
    assert " INFO " not in done.stderr  # our quiet logs still apply: the folder has no log4j2.properties
    bad = cli("--ledger", str(tmp_path / "l.db"), "vacuum", "--conf", "no-equals-sign")
    out, err = bad.communicate(timeout=60)
    assert bad.returncode == 2 and "is not KEY=VALUE" in err
