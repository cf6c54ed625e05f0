"""One call, one process (R22): no call leaves a process behind or runs code from the caller's
folders; upkeep (``maintain``) is asked for, runs once at a time across processes, and is whole
or absent when killed.

In 0.3.0 a first open of a long log started a detached backfill process and ``verify`` a chain
walker, both as ``python -m ledger...`` with the caller's folder first on their import path: a
user's own ``ledger.py`` there was imported and run by every one of them, a stopped walker held
``verify`` for ever, and ten CLI calls started ten backfills. Each test here failed then.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest

from ledger import Ledger, ManualClock
from ledger.clock import iso_utc
from ledger.persistence.snapshot import KEYED_FORMAT
from tests.conftest import T0
from tests.test_audit import children, copy_of as copy

REPO = Path(__file__).resolve().parent.parent


def long_log(path: Path, tables: int = 4_000) -> int:
    """A log of creates, drops and undrops over many tables (about 2.5 events a table)."""
    with Ledger.open(path, clock=ManualClock(T0), synchronous="OFF", actor="builder") as led:
        for i in range(tables):
            name = f"d{i % 50}.t{i}"
            led.create_table(name)
            if i % 2:
                led.drop_table(name)
            if i % 10 == 1:
                led.undrop_table(name)
        return led.event_count()


@pytest.fixture(scope="module")
def long_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("long") / "ledger.db"
    long_log(path)
    return path


def planted(tmp_path: Path, *names: str) -> tuple[Path, Path]:
    """A user's project folder holding, for each name, a module and a package of that name that
    write a marker when imported (the folder, and the marker's path)."""
    user, marker = tmp_path / "project", tmp_path / "MARKER"
    plant = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in names:
        (user / name).mkdir(parents=True)
        (user / name / "__init__.py").write_text(plant)
        (user / f"{name}.py").write_text(plant)
    return user, marker


def test_r22_no_call_runs_code_from_the_callers_folders(long_ledger: Path, tmp_path: Path) -> None:
    """A folder holding a ``ledger.py`` and a ``ledger/`` package of the user's own, each of which
    writes a marker when imported; from it, a long log is opened (no snapshot stored), maintained
    and verified: the marker never appears, and no process is left."""
    path = copy(long_ledger, tmp_path / "l.db")
    user, marker = planted(tmp_path, "ledger")
    script = textwrap.dedent(f"""
        import os, sqlite3, sys
        sys.path.insert(0, {str(REPO)!r})  # this process imports the real package; its children may not
        from ledger import Ledger
        with sqlite3.connect({str(path)!r}) as db:
            for table in ("snapshots", "snapshot_entries", "snapshot_generations"):
                db.execute(f"DELETE FROM {{table}}")
        with Ledger.open({str(path)!r}, create=False) as led:
            assert led.maintain().done
            assert led.verify().events == led.event_count()
        print(os.getpid())
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=user, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(user)})
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), marker.read_text()


USER_SITE_ON = """\
import site, sys
# On the test's PYTHONPATH: a virtualenv turns the user site off, so its usercustomize would run
# nowhere and prove nothing. Here it is on, as outside one: unless -s or PYTHONNOUSERSITE says
# not (CPython's own condition), its folder is a site folder and its usercustomize runs.
if not site.ENABLE_USER_SITE and not sys.flags.no_user_site:
    site.ENABLE_USER_SITE = True
    site.addsitedir(site.getusersitepackages())
"""


def with_user_site(tmp_path: Path) -> dict[str, str]:
    """The environment of a Python whose user site is ``tmp_path/userbase``'s, on in a virtualenv as
    well as outside one: a ``sitecustomize`` first on its path turns it on where a virtualenv
    turned it off, on the condition CPython itself uses, so a Python started with ``-s`` or
    ``PYTHONNOUSERSITE`` reads no user site here either. Inherited by whatever it starts."""
    shim = tmp_path / "user-site-on"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(USER_SITE_ON)
    path = os.pathsep.join([str(shim), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONUSERBASE": str(tmp_path / "userbase"), "PYTHONPATH": path}


def test_r22_the_python_workers_spark_starts_for_a_vacuum_run_nothing_from_the_callers_folder(tmp_path: Path) -> None:
    """Spark starts its Python workers as ``python -m pyspark.daemon`` in the caller's folder; a
    ``pyarrow.py`` and a ``spark_ops/`` there (the executors import both) must never run, nor a
    ``usercustomize`` in the user site, though the caller's own Python runs it. The vacuum, from
    the command line, deletes the dropped table's file all the same. In a virtualenv, which turns
    the user site off, the usercustomize ran nowhere and the test failed, its marker empty: the
    user site is now turned on there as outside one (``with_user_site``), so it proves as much in
    both (without the workers' ``PYTHONNOUSERSITE``, ``pyspark.worker`` writes the marker)."""
    path = tmp_path / "l.db"
    with Ledger.open(path, clock=ManualClock(T0)) as led:
        table = led.create_table("sales.old")
        Path(table.location).mkdir(parents=True)
        data = Path(table.location) / "part-0.parquet"
        data.write_bytes(b"PAR1")
        led.drop_table("sales.old")
    user, marker = planted(tmp_path, "pyarrow", "spark_ops")
    # And a user site-packages folder whose usercustomize runs in every Python that reads it: the
    # caller's own does (it chose to); the workers, started as ``python -m pyspark.daemon``, must not.
    env = with_user_site(tmp_path)
    user_site = Path(subprocess.run([sys.executable, "-c", "import site; print(site.getusersitepackages())"],
                                    env=env, capture_output=True, text=True, check=True).stdout.strip())
    user_site.mkdir(parents=True)
    (user_site / "usercustomize.py").write_text(
        f"import sys\nopen({str(marker)!r}, 'a').write('usercustomize ' + repr(sys.argv) + '\\n')\n")
    command = Path(sys.executable).parent / "retention-ledger"  # its own folder first, as an installed one has
    done = subprocess.run([str(command), "--ledger", str(path), "--json", "vacuum"], cwd=user, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["purged"] == 1 and not data.exists()
    seen = marker.read_text().splitlines() if marker.exists() else []
    assert seen and all(line.startswith("usercustomize") and "retention-ledger" in line for line in seen), seen


def test_r22_open_maintain_and_verify_leave_no_process_behind(long_ledger: Path, tmp_path: Path) -> None:
    path = copy(long_ledger, tmp_path / "l.db")
    before = children()
    with Ledger.open(path, create=False) as led:
        led.maintain()
        led.verify()
        assert children() == before
    assert children() == before


def test_r22_verify_runs_nothing_beside_itself_and_returns_whatever_is_stopped(long_ledger: Path,
                                                                                tmp_path: Path) -> None:
    """Whatever ``verify`` ran beside itself is stopped (SIGSTOP) as soon as it appears, as a
    swapped-out process would be: ``verify`` still returns its verdict. (It used to wait on its
    chain walker with no bound.)"""
    path = copy(long_ledger, tmp_path / "l.db")
    before, stopped, verdict = children(), [], []
    with Ledger.open(path, create=False) as led:
        head = led.event_count()
        runner = threading.Thread(target=lambda: verdict.append(led.verify()))
        runner.start()
        while runner.is_alive():
            for pid in children() - before:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            time.sleep(0.01)
        runner.join()
    for pid in stopped:  # none, but never leave one stopped
        os.kill(pid, signal.SIGKILL)
    assert stopped == [] and verdict and verdict[0].events == head


_MAINTAIN = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from ledger import Ledger
with Ledger.open(sys.argv[2], create=False, history_every=int(sys.argv[3])) as led:
    if sys.argv[5] == "wait":  # until told to go, so that several runs start at once
        print("ready", flush=True)
        sys.stdin.readline()
    def slowly(done, total):
        print("progress", done, flush=True)
        time.sleep(float(sys.argv[4]))
    report = led.maintain(progress=slowly)
    print(json.dumps({"pid": os.getpid(), "done": report.done, "holder": report.holder, "written": report.written,
                      "until": None if report.until is None else report.until.isoformat()}), flush=True)
"""


def _maintain(path: Path, every: int, pause: float, *, wait: bool = False,
              host: str | None = None) -> subprocess.Popen[str]:
    """A ``maintain`` in a process of its own, pausing ``pause`` s at each stored state; ``wait``:
    it says ``ready`` and waits for a line on its stdin; ``host``: it runs under that host name (a
    UTS namespace of its own, as on another host)."""
    command = [sys.executable, "-c", _MAINTAIN, str(REPO), str(path), str(every), str(pause),
               "wait" if wait else "go"]
    if host is not None:
        command = ["unshare", "--uts", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *command]
    return subprocess.Popen(command, stdin=subprocess.PIPE if wait else subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _killed_midway(path: Path, every: int, *, host: str | None = None) -> int:
    """A ``maintain`` SIGKILLed after it stored three states (and reaped, as its parent would); its pid."""
    victim = _maintain(path, every, 0.2, host=host)
    assert victim.stdout is not None
    for _ in range(3):
        line = victim.stdout.readline()
        assert line.startswith("progress"), (line, victim.stderr.read() if victim.stderr else "")
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    return victim.pid


def _said(run: subprocess.Popen[str]) -> dict:
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_r22_maintain_runs_once_at_a_time_the_other_says_which_runs(long_ledger: Path, tmp_path: Path) -> None:
    path = copy(long_ledger, tmp_path / "l.db")
    # The second is started and opens the ledger first, and is told to go once the first holds the
    # lease: started after it, on a busy machine its start-up outlasted the first's whole run.
    second = _maintain(path, 1_000, 0.0, wait=True)
    assert second.stdout is not None and second.stdout.readline().startswith("ready")
    first = _maintain(path, 1_000, 0.3)
    assert first.stdout is not None and first.stdout.readline().startswith("progress")  # it holds the lease
    out, err = second.communicate("go\n", timeout=120)
    said = json.loads(out.strip().splitlines()[-1])
    assert said["done"] is False and said["written"] == 0 and "pid" in said["holder"], (out, err)
    rest, _ = first.communicate(timeout=300)
    assert json.loads(rest.strip().splitlines()[-1])["done"] is True
    with Ledger.open(path, create=False, history_every=1_000) as led:
        again = led.maintain()  # the lease ended with the first: it is free, and nothing is missing
        assert again.done and again.written == 0


def test_r22_a_killed_maintain_is_taken_over_at_once_by_exactly_one_of_the_runs_that_find_it(
        long_ledger: Path, tmp_path: Path) -> None:
    """Killed midway, it leaves whole stored states, and its lease holds nothing: its pid is dead on
    this very host. Three runs started at that moment find it: one takes the lease over (atomically:
    the others then find that one, alive, and say so, and until when), and stores what is missing.
    (In 0.4 the dead run held every next one off for two minutes, each told it was running.)"""
    path = copy(long_ledger, tmp_path / "l.db")
    dead = _killed_midway(path, 500)
    with Ledger.open(path, create=False) as led:
        head, written_before = led.event_count(), len(led.store.generations())
    assert 3 <= written_before < head // 500
    runs = [_maintain(path, 500, 0.3, wait=True) for _ in range(3)]
    for run in runs:
        assert run.stdout is not None and run.stdout.readline().strip() == "ready"
    for run in runs:
        assert run.stdin is not None
        run.stdin.write("go\n")
        run.stdin.flush()
    said = [_said(run) for run in runs]
    winners = [s for s in said if s["done"]]
    every = head // 500 + (1 if head % 500 else 0)  # every 500 events, and at the head
    assert len(winners) == 1 and winners[0]["written"] == every - written_before, said
    for loser in (s for s in said if not s["done"]):
        assert loser["holder"].startswith(f"pid {winners[0]['pid']} on {socket.gethostname()}, as "), loser
        assert f"pid {dead} " not in loser["holder"] and loser["until"] is not None and loser["written"] == 0
    with Ledger.open(path, create=False, history_every=500) as led:
        assert len(led.store.generations()) == every
        report = led.verify()
        assert (report.generations_compared, report.generations_discarded, report.snapshot_discarded) == (every, 0, False)


def test_r22_maintain_from_the_command_line_exits_non_zero_when_it_did_nothing_and_says_until_when(
        long_ledger: Path, tmp_path: Path) -> None:
    """A scheduler reads the exit code: 75 (try again later) when another run holds the lease, with
    who and until when; once that run is killed, the next one here goes on at once, and exits 0."""
    path = copy(long_ledger, tmp_path / "l.db")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ledger", "--ledger", str(path), *args, "maintain"], cwd=REPO,
                              capture_output=True, text=True, timeout=300)

    holder = _maintain(path, 500, 5.0)
    assert holder.stdout is not None and holder.stdout.readline().startswith("progress")  # it holds the lease
    busy, busy_json = cli(), cli("--json")
    assert busy.returncode == 75, (busy.stdout, busy.stderr)
    assert re.fullmatch(rf"maintain is running elsewhere \(pid {holder.pid} on {re.escape(socket.gethostname())}, "
                        r"as [^)]+\), its lease until \S+Z unless it renews it; nothing was done here\n", busy.stdout), \
        busy.stdout
    said = json.loads(busy_json.stdout)
    assert busy_json.returncode == 75 and said["done"] is False and said["written"] == 0
    assert re.fullmatch(r"\S+Z", said["until"]) and said["holder"].startswith(f"pid {holder.pid} on ")  # renewed since
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    done = cli("--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["done"] is True and json.loads(done.stdout)["written"] > 0


def test_r22_a_maintain_killed_on_another_host_holds_its_lease_to_its_end_and_the_wait_is_said(
        long_ledger: Path, tmp_path: Path) -> None:
    """Another host's pids cannot be looked at from here (a process under another host name: a UTS
    namespace of its own): its killed run's lease holds until it ends, which the next run says;
    at that moment (a clock set to it) the next one goes on."""
    if subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode != 0:
        pytest.skip("this machine does not let a test run a process under another host name (unshare --uts)")
    path = copy(long_ledger, tmp_path / "l.db")
    dead = _killed_midway(path, 500, host="elsewhere-host")
    with Ledger.open(path, create=False, history_every=500) as led:
        waiting = led.maintain()
    assert waiting.done is False and waiting.written == 0, waiting
    assert waiting.holder is not None and waiting.holder.startswith(f"pid {dead} on elsewhere-host, as ")
    until = waiting.until
    assert until is not None and f"until {iso_utc(until)} unless it renews it" in waiting.summary()
    with Ledger.open(path, create=False, history_every=500, clock=ManualClock(until - timedelta(microseconds=1))) as led:
        assert led.maintain().done is False  # to the microsecond
    with Ledger.open(path, create=False, history_every=500, clock=ManualClock(until)) as led:
        assert led.maintain().done is True


def test_r22_a_lease_holder_is_gone_when_its_pid_is_dead_reused_or_a_zombie_on_this_host() -> None:
    """What a run on this host is told of a holder on this host: gone (its lease holds nothing) when
    its pid names no process, another process (a pid reused: its start time differs), or a zombie
    (killed, not yet reaped); not gone while it runs, nor when it ran on another host."""
    from ledger.persistence.holders import Holder
    me = Holder.here("tester")
    assert not me.gone()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0] != "Z":
        time.sleep(0.01)  # exited, not yet reaped: a zombie
    zombie = attrs.evolve(me, pid=child.pid, started=None)
    assert zombie.gone()
    child.wait()
    assert zombie.gone()  # reaped: no such process
    assert attrs.evolve(me, started=me.started + 1).gone()  # this pid, another process
    assert not attrs.evolve(me, host="elsewhere-host").gone()  # not ours to look at
    assert not attrs.evolve(me, space="another-boot").gone()
    assert Holder.read(me.text()) == me and Holder.read("etl@host (pid 12)") is None  # 0.4's text: no one's


def test_r22_maintain_replaces_the_stored_states_of_a_release_whose_state_had_another_shape(
        long_ledger: Path, tmp_path: Path) -> None:
    """A release that adds a concern (0.4: pins) changes the state's shape: what an earlier one
    stored does not fit, so the open folds, and ``maintain`` replaces it (never kept for ever, never
    believed)."""
    path = copy(long_ledger, tmp_path / "l.db")
    with Ledger.open(path, create=False) as led:
        led.maintain()
        truth = led.tables()
    with sqlite3.connect(path) as conn:  # as the release before left them: another format
        conn.execute("UPDATE snapshot_generations SET format = ?", (KEYED_FORMAT - 1,))
    with Ledger.open(path, create=False, snapshot_every=1000) as led:  # a long log, as these go
        assert led.runner.cache.generation is None and led.tables() == truth  # folded: nothing fitted
        report = led.maintain()
        assert report.written >= 1 and {g.format for g in led.store.generations()} == {KEYED_FORMAT}
    with Ledger.open(path, create=False) as led:
        assert led.runner.cache.generation is not None and led.tables() == truth
        assert led.verify().generations_discarded == 0
