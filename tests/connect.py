"""Start a Spark Connect server (``tests/connect_server.py``) from the tests, and a client on it.

A server is a process of its own, as a Connect user's is: the tests kill it (SIGKILL, as a crash
or an out-of-memory kill does), start it again on the same port (a restart under a client's
session), keep it down, or start it with a view of the file system the client does not share
(``hide``: folders it sees as empty, each an empty folder bind-mounted over that path in a mount
namespace of the server's own, as a server on another machine, or another mount, sees them).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 240.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ConnectServer:
    """A Connect server process; ``address`` is what ``SparkSession.builder.remote`` takes.

    ``hide``: folders the server sees empty (an empty folder mounted over each, in the server's own
    mount namespace: Linux, as root); ``conceal``: folders it does not see at all (an overlay over
    each one's parent, with a whiteout for it; what the server writes there stays its own). The
    client and every other process still see what is there.
    ``conf``: more Spark settings for the server. ``kill``, ``start`` (again, on the same port) and
    ``restart`` let a test take the server away from under a client, as a crash and a restart do.
    Every server it starts dies with the process that started it (``tests/connect_server.py``)."""

    def __init__(self, log: Path, master: str = "local[2]", env: dict[str, str] | None = None, *,
                 hide: Iterable[Path] = (), conceal: Iterable[Path] = (), conf: Mapping[str, str] | None = None) -> None:
        self.port = free_port()
        self.address = f"sc://127.0.0.1:{self.port}"
        self.log = log
        self.master = master
        self.env = dict(env or {})
        self.hide = [Path(p) for p in hide]
        self.conceal = [Path(p) for p in conceal]
        self.conf = dict(conf or {})
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.clients: list[Any] = []
        """The sessions a test made on this server (``client``), told to give up on it at ``close``."""
        self.start()

    def client(self, session: Any) -> Any:
        """``session`` (one on this server), remembered for ``close``."""
        self.clients.append(session)
        return session

    def close(self) -> None:
        """Kill the server for good, once this process's sessions on it (``clients``) are told to
        give up their calls to it. PySpark releases each query's results in background threads, each
        with ten minutes of retries, and Python waits for those threads at exit: a server killed
        just after a query (or one a test left down) kept the test process from exiting for ten
        minutes. A retry loop reads its policies' limit at each turn, so setting it stops them."""
        for session in self.clients:
            for policy in session.client.get_retry_policies():
                policy.max_retries = 0
        self.stop()

    def command(self) -> list[str]:
        server = [sys.executable, "-m", "tests.connect_server", str(self.port), self.master,
                  *(f"{key}={value}" for key, value in self.conf.items())]
        if not self.hide and not self.conceal:
            return server
        empty = self.log.parent / f"{self.log.stem}-empty"
        empty.mkdir(exist_ok=True)
        steps = [f"mount --bind {shlex.quote(str(empty))} {shlex.quote(str(path))}" for path in self.hide]
        for n, parent in enumerate(sorted({path.parent for path in self.conceal})):
            # An overlay over the parent, a whiteout for each concealed name: absent there, for this
            # server only; what it writes under the parent goes to the overlay's own folder.
            upper, work = (self.log.parent / f"{self.log.stem}-overlay-{n}-{kind}" for kind in ("upper", "work"))
            upper.mkdir(exist_ok=True)
            work.mkdir(exist_ok=True)
            for path in self.conceal:
                if path.parent == parent and not (upper / path.name).exists():
                    os.mknod(upper / path.name, 0o600 | stat.S_IFCHR, os.makedev(0, 0))
            steps.append(f"mount -t overlay overlay -o lowerdir={shlex.quote(str(parent))},"
                         f"upperdir={shlex.quote(str(upper))},workdir={shlex.quote(str(work))} {shlex.quote(str(parent))}")
        mounts = " && ".join(steps)
        # unshare execs the shell and the shell execs Python: one process, whose parent is this one
        # (the server watches it to die with it), in a mount namespace of its own.
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                f"{mounts} && exec {shlex.join(server)}"]

    def start(self) -> None:
        """Start the server (again, on the same port); returns once it listens."""
        assert self.process is None or self.process.poll() is not None, "the server is running"
        for path in self.hide:
            path.mkdir(parents=True, exist_ok=True)  # a mount point must be there
        self.starts += 1
        log = self.log if self.starts == 1 else self.log.with_name(f"{self.log.stem}-{self.starts}{self.log.suffix}")
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                self.command(), cwd=REPO, env={**os.environ, **self.env, "PYTHONPATH": str(REPO)}, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while b"READY" not in log.read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL the server and its JVM (its own process group), as a crash does; wait until the
        port is free."""
        self.stop()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.1)

    def restart(self) -> None:
        """Kill the server and start another on the same port: a client's session is not there any more."""
        self.kill()
        self.start()

    def stop(self) -> None:
        """Kill the server and its JVM (its own process group)."""
        if self.process is not None and self.process.poll() is None:
            with_group = True
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                with_group = False
            if not with_group:
                self.process.kill()
        if self.process is not None:
            self.process.wait()


def connect_client(address: str) -> Any:
    """A Connect session on ``address``, as a user's process makes one. PySpark marks the whole
    process as a Connect one when it does (``pyspark.sql.functions`` then builds Connect columns);
    the tests' ``spark`` fixture sets that mark per test, for the session kind the test runs on."""
    from spark_ops import local_session

    session = local_session("retention-ledger-tests", remote=address)
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return session
