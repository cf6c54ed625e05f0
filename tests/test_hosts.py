"""Hosts, for real (R18): several processes, each with its own connection to one PostgreSQL
ledger, racing (undrops against vacuums, commits against sweeps, restores against retention
marks); one host SIGKILLed mid-run; the server itself stopped in immediate mode (as a crash)
and started again while they work. Afterwards every acknowledged command is in the log
exactly once, the chain is intact, ``verify`` passes (so no rule is broken anywhere in the
log), and each host's own ``verify`` passed as it finished.
"""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger

from .pg import PostgresServer

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent
HOSTS, SECONDS = 4, 12.0


def _host(url: str, n: int, out: Path, warehouse: Path | None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.host_job", url, str(n), str(1000 + n), str(SECONDS),
                             str(out), *([str(warehouse)] if warehouse else [])], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _acks(out: Path) -> list[dict[str, Any]]:
    lines = out.read_text().splitlines() if out.exists() else []
    return [json.loads(line) for line in lines if line.endswith("}")]  # a line cut by SIGKILL is no ack


@pytest.mark.parametrize("made_by", ["beforehand", "every host"])
def test_r4_r10_r18_hosts_racing_a_killed_host_and_a_crashed_server_leave_every_acknowledged_command_once(
        tmp_path: Path, made_by: str) -> None:
    """``every host``: the ledger is a new schema, which all the hosts make as they start."""
    server = PostgresServer(fsync=True)
    try:
        url = server.database("hosts")
        warehouse = tmp_path / "warehouse"
        if made_by == "beforehand":
            Ledger.open(url, warehouse=warehouse).close()
        else:
            url += "?schema=made_by_all"
        outs = [tmp_path / f"host{n}.jsonl" for n in range(HOSTS)]
        hosts = [_host(url, n, outs[n], None if made_by == "beforehand" else warehouse) for n in range(HOSTS)]
        for host in hosts:
            assert host.stdout is not None and host.stdout.readline().strip() == "ready", host.stderr.read()
        time.sleep(SECONDS / 4)
        hosts[0].send_signal(signal.SIGKILL)  # mid-command, most likely: it spends its time in them
        time.sleep(SECONDS / 4)
        server.restart("immediate")  # every host loses its connection at once
        results = [host.communicate(timeout=180) for host in hosts]
        assert hosts[0].returncode == -signal.SIGKILL
        for host, (out, err) in zip(hosts[1:], results[1:]):
            assert host.returncode == 0 and out.strip().endswith("done"), err[-3000:]

        acks = [a for out in outs for a in _acks(out)]
        kinds = collections.Counter(a["kind"] for a in acks)
        refused = collections.Counter(a["error"] for a in acks if a["kind"] == "refused")
        assert kinds["create"] > 20 and kinds["commit"] > 5 and kinds["vacuum"] > 3, kinds
        # The races ran: undrops lost to vacuums' watermarks, commits to sweeps.
        assert refused["UndropBlocked"] > 0 and refused["WriteExpired"] > 0, refused
        with Ledger.open(url) as led:
            report = led.verify()
            events = list(led.history())
            assert report.events == len(events) and report.chained
            by_type: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
            for e in events:
                by_type[e.type].append(e.data)
            created = collections.Counter(d["table_id"] for d in by_type["TableCreated"])
            committed = collections.Counter(d["write_id"] for d in by_type["VersionCommitted"] if d.get("write_id"))
            started = collections.Counter(d["run_id"] for d in by_type["VacuumStarted"])
            for a in acks:  # each acknowledged command is there, once
                if a["kind"] == "create":
                    assert created[a["id"]] == 1, a
                elif a["kind"] == "commit":
                    assert committed[a["write"]] == 1, a
                    assert led.instance(a["table"]) is not None
                elif a["kind"] == "vacuum":
                    assert started[a["run"]] == 1, a
            assert all(n == 1 for n in created.values()) and all(n == 1 for n in started.values())
            purged = {d["table_id"] for d in by_type["TablePurged"]}
            undropped = [a["id"] for a in acks if a["kind"] == "undrop"]
            assert purged, "no vacuum purged anything: the race was not run"
            for id_ in undropped:  # an undrop that was acknowledged came before any purge of it
                undrop_seqs = [e.seq for e in events if e.type == "TableUndropped" and e.data["table_id"] == id_]
                purge_seqs = [e.seq for e in events if e.type == "TablePurged" and e.data["table_id"] == id_]
                assert all(u < p for u in undrop_seqs for p in purge_seqs), id_
    finally:
        server.close()
