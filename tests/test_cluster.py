"""The vacuum on a real cluster whose executors carry only what they need (R19), from a classic
session and from a Spark Connect client (R24).

``tests/cluster_job.py`` runs in a process of its own on Spark's ``local-cluster[2,1,1024]``
master: two executor JVMs apart from the driver, whose Python is a virtualenv made here with
pyarrow and obstore (this Python's own files, linked in) and nothing of retention-ledger (nor
attrs, immutables, orjson). The
driver ships what the executors run; a pipeline writes, reads an old version, dry-runs,
vacuums (a purge, an expiry, a sweep, a refused link) and verifies. A second run gives the
executors an interpreter without pyarrow: the vacuum must say so before it records anything.

Each runs twice: the job's own classic session on the cluster, and a Connect client of a server
(``tests/connect.py``) that runs the cluster with the same executors' Python, the client a
process with no JVM. The server's own folder is on its Python path (it runs ``tests``), and
executors inherit the server's environment, so their ``PYTHONPATH`` is set empty: they find
PySpark through Spark's own path, and nothing of the ledger.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

from tests.connect import ConnectServer

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent


def _interpreter(folder: Path, dists: list[str]) -> str:
    """A virtualenv holding the distributions ``dists`` only (the executors' Python), each the very
    files this process imports, linked in (hard links; a copy across file systems). pip installing
    pyarrow and obstore into it took 28-37 s of the 82 s of this module's first setup (5.5 CPU-s;
    the rest unpacking wheels), on every xdist worker that ran it, and needed an index; linking
    takes 2 s (0.5 CPU-s). The venv's ``site-packages`` holds what pip put there (the two and
    obstore's typing-extensions), at the driver's own versions."""
    venv.create(folder, with_pip=False)
    [site] = (folder / "lib").glob("python*/site-packages")
    for name in dists:
        _link_distribution(name, site)
    return str(folder / "bin" / "python")


def _link_distribution(name: str, site: Path, seen: set[str] | None = None) -> None:
    """Put ``name``'s installed files (its RECORD) and those of what it requires on this Python
    into ``site``, as pip would have; each distribution once."""
    from importlib.metadata import distribution

    from packaging.requirements import Requirement

    seen = set() if seen is None else seen
    if name.lower() in seen:
        return
    seen.add(name.lower())
    dist = distribution(name)
    if dist.files is None:
        raise RuntimeError(f"{name} was installed without a RECORD of its files: the executors' venv cannot hold it")
    for file in dist.files:
        source, target = Path(str(dist.locate_file(file))), site / file
        if ".." in file.parts or not source.is_file() or target.exists():
            continue  # a RECORD also names the scripts it put in bin/ (..), and files since gone
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
    for required in map(Requirement, dist.requires or []):
        if required.marker is None or required.marker.evaluate({"extra": ""}):
            _link_distribution(required.name, site, seen)


KINDS = ("classic", "connect")


def _run(work: Path, python: str, mode: str, kind: str = "classic", workers: str = "2,1,1024") -> dict[str, Any]:
    """``cluster_job``'s facts, on a classic session of its own or from a Connect client of a server
    over ``local-cluster[workers]`` whose executors' Python is ``python``."""
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_MODE_ENABLED"}
    server = None
    if kind == "connect":
        server = ConnectServer(work / "server.log", master=f"local-cluster[{workers}]", env={
            "PYSPARK_PYTHON": python, "PYSPARK_SUBMIT_ARGS": "--conf spark.executorEnv.PYTHONPATH= pyspark-shell"})
    else:
        env.update(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=sys.executable)
    try:
        remote = [f"--remote={server.address}"] if server else []
        done = subprocess.run([sys.executable, "-m", "tests.cluster_job", str(work), mode, *remote], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=900)
    finally:
        if server is not None:
            server.stop()
    facts_file = work / "facts.json"
    assert facts_file.exists(), done.stderr[-3000:]
    facts = json.loads(facts_file.read_text())
    assert "crash" not in facts, facts["crash"]
    return facts


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The executors' Python: pyarrow and obstore, nothing of retention-ledger."""
    return _interpreter(tmp_path_factory.mktemp("cluster") / "executor-python", ["pyarrow", "obstore"])


@pytest.fixture(scope="module", params=KINDS)
def cluster(request: pytest.FixtureRequest, bare_python: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp(f"cluster-{request.param}")
    return {"python": bare_python, "kind": request.param,
            "facts": _run(base / "pipeline", bare_python, "pipeline", request.param)}


def test_r19_the_executors_python_has_nothing_of_the_ledger(cluster: dict[str, Any]) -> None:
    seen = cluster["facts"]["executors"]
    assert {e["python"] for e in seen} == {cluster["python"]}
    assert not any(e["ledger"] or e["attrs"] or e["immutables"] or e["orjson"] for e in seen)
    assert all(e["pyarrow"] and e["obstore"] for e in seen)


def test_r11_writes_and_time_travel_work_on_the_cluster(cluster: dict[str, Any]) -> None:
    facts = cluster["facts"]
    assert facts["read_version_1"] == list(range(6)) and facts["read_current"] == list(range(100, 106))


def test_r2_a_dry_run_on_the_cluster_changes_nothing(cluster: dict[str, Any]) -> None:
    dry = cluster["facts"]["dry_run"]
    assert dry["files"] > 0 and dry["events_unchanged"] and dry["location_still_there"]


def test_r2_r13_r15_r19_the_vacuum_runs_on_executors_that_have_only_what_it_ships(cluster: dict[str, Any]) -> None:
    facts = cluster["facts"]
    report = facts["vacuum"]
    assert [i["name"] for i in report["instances"] if i["error"] is None] == ["sales.gone"]
    assert not facts["gone_location_exists"] and facts["undrop_purged"] == "UndropBlocked"
    [expired] = report["expired"]
    assert expired["versions_expired"] == [1] and expired["error"] is None and not facts["first_folder_exists"]
    assert facts["read_expired"] == "VersionExpired" and facts["read_current_after"] == list(range(100, 106))
    [swept] = report["swept"]
    assert swept["error"] is None and swept["files"] == 1 and not facts["abandoned_folder_exists"]
    assert facts["verified_events"]


def test_r9_a_link_out_of_the_warehouse_is_refused_on_the_cluster(cluster: dict[str, Any]) -> None:
    facts = cluster["facts"]
    [linked] = [i for i in facts["vacuum"]["instances"] if i["name"] == "sales.linked"]
    assert "symbolic link" in linked["error"] and facts["outside_intact"] and facts["linked_state"] == "blocked"


def test_r20_a_failed_task_attempt_is_seen_from_the_tasks_own_answers(cluster: dict[str, Any]) -> None:
    """A task attempt that failed may have left a receipt part no result names, which the run then
    looks for in its scratch folder: the vacuum's jobs see a retried attempt from the tasks' own
    answers (each says its attempt number), on either kind of session, where the status tracker
    (a classic session's only) told it before."""
    retries = cluster["facts"]["retries"]
    assert retries["steady"] == [list(range(8)), False]
    assert retries["failing"] == [list(range(8)), True]


def test_r19_r21_tables_by_name_and_the_ledgers_functions_run_on_executors_without_the_ledger(
        cluster: dict[str, Any]) -> None:
    facts = cluster["facts"]
    assert "by_name_failed" not in facts, facts["by_name_failed"]
    assert facts["attached"] == ["sales.days", "sales.orders"]
    assert facts["sql_count"] == 6 and facts["sql_day"] == [i for i in range(30) if i % 3 == 1]
    assert sorted(facts["sql_versions"]) == [[1, False], [2, True]]
    assert facts["sql_history_types"][:3] == ["TableCreated", "WriteBegun", "VersionCommitted"]
    assert "PinTaken" in facts["sql_history_types"]
    assert facts["sql_dropped"] == ["sales.linked"]  # sales.gone was purged: no undrop brings it back
    assert facts["pins_while_attached"] == ["sales.days", "sales.orders"]
    assert facts["detached"] == facts["attached"] and facts["pins_after_detach_unchanged"]


@pytest.mark.parametrize("kind", KINDS)
def test_r19_executors_that_cannot_run_the_vacuum_are_named_before_anything_is_recorded(
        tmp_path: Path, kind: str) -> None:
    empty = _interpreter(tmp_path / "no-pyarrow", [])
    facts = _run(tmp_path / "preflight", empty, "preflight", kind, workers="1,1,1024")
    refused = facts["refused"]
    assert refused is not None and refused.startswith("SparkUnavailable: the executors cannot run the vacuum: ")
    assert "No module named 'pyarrow'" in refused and "\n" not in refused
    assert facts["events_unchanged"] and facts["files_there"]
    if kind == "connect":
        return  # the command line on a Connect server (--remote) is the CLI's own tests'
    # The command line, pointed at the same cluster: one line, exit 1, nothing recorded.
    ledger = tmp_path / "preflight" / "ledger.db"
    from ledger import Ledger
    with Ledger.open(ledger, create=False) as led:
        before = [e.seq for e in led.history()]
    env = {**os.environ, "PYSPARK_PYTHON": empty, "RETENTION_LEDGER_SPARK_MASTER": "local-cluster[1,1,1024]"}
    done = subprocess.run([sys.executable, "-m", "retention_ledger.cli", "--ledger", str(ledger), "vacuum"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr[-2000:]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: SparkUnavailable: the executors cannot run the vacuum: "), line
    with Ledger.open(ledger, create=False) as led:
        assert [e.seq for e in led.history()] == before


_HOST = r"""
import json, sys, time
from pathlib import Path
from ledger import Ledger
from spark_ops import local_session, vacuum
path, barrier = sys.argv[1], Path(sys.argv[2])
spark = local_session("host-" + sys.argv[3])
spark.sparkContext.parallelize(range(4), 4).count()  # warm: both start deleting at once
led = Ledger.open(path, actor="host-" + sys.argv[3])
print("ready", flush=True)
while not barrier.exists():
    time.sleep(0.005)
report = vacuum(spark, led, limit=3)
print(json.dumps({"run": report.run_id, "purged": sorted(i.id for i in report.purged), "files": report.files,
                  "failed": len(report.failures), "busy": list(report.busy_runs)}), flush=True)
"""


def test_r4_r10_two_drivers_vacuuming_one_ledger_at_once_share_it_out_and_count_exactly(tmp_path: Path) -> None:
    """Two processes (two hosts' drivers, each with its own Spark) vacuum the same ledger and
    warehouse at the same moment: the leases keep them off each other's tables, every table is
    purged once, and each run records exactly the files it deleted."""
    from datetime import datetime, timedelta, timezone

    from ledger import Ledger, ManualClock
    path = tmp_path / "ledger.db"
    clock = ManualClock(datetime.now(timezone.utc) - timedelta(days=30))
    with Ledger.open(path, clock=clock) as led:
        tables = []
        for t in range(6):
            table = led.create_table(f"sales.t{t}")
            os.makedirs(table.location)
            for f in range(200):
                Path(table.location, f"part-{f:04d}.parquet").write_bytes(b"x" * 3)
            led.drop_table(table.name)
            clock.advance(timedelta(minutes=1))
            tables.append(table)
    barrier = tmp_path / "go"
    hosts = [subprocess.Popen([sys.executable, "-c", _HOST, str(path), str(barrier), str(n)], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for n in range(2)]
    for host in hosts:
        assert host.stdout is not None and host.stdout.readline().strip() == "ready", host.stderr.read() if host.stderr else ""
    barrier.touch()
    reports = []
    for host in hosts:
        out, err = host.communicate(timeout=300)
        assert host.returncode == 0, err[-2000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    purged = [i for r in reports for i in r["purged"]]
    assert sorted(purged) == sorted(t.id for t in tables) and len(set(purged)) == 6  # each once, all of them
    assert [len(r["purged"]) for r in reports] == [3, 3] and not any(r["failed"] for r in reports)
    assert sum(r["files"] for r in reports) == 6 * 200
    assert not any(os.path.exists(t.location) for t in tables)
    with Ledger.open(path, create=False) as led:
        finished = {e.data["run_id"]: e.data["files"] for e in led.history(type="VacuumFinished")}
        assert finished == {r["run"]: r["files"] for r in reports}
        assert sorted(e.data["table_id"] for e in led.history(type="TablePurged")) == sorted(t.id for t in tables)
        led.verify()
