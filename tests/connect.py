"""Start a Spark Connect server (``tests/connect_server.py``) from the tests, and a client on it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 240.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ConnectServer:
    """A Connect server process; ``address`` is what ``SparkSession.builder.remote`` takes."""

    def __init__(self, log: Path, master: str = "local[2]", env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.address = f"sc://127.0.0.1:{self.port}"
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.connect_server", str(self.port), master], cwd=REPO,
                env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while b"READY" not in log.read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Kill the server and its JVM (its own process group)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def connect_client(address: str) -> Any:
    """A Connect session on ``address``, as a user's process makes one. PySpark marks the whole
    process as a Connect one when it does (``pyspark.sql.functions`` then builds Connect columns);
    the tests' ``spark`` fixture sets that mark per test, for the session kind the test runs on."""
    from spark_ops import local_session

    session = local_session("retention-ledger-tests", remote=address)
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return session
