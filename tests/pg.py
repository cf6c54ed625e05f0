"""A real PostgreSQL server for the tests: the machine's own (Debian's ``postgresql`` package),
initialised in a temporary folder, on a free port of 127.0.0.1, stopped at the end.

PostgreSQL refuses to run as root, and these machines run as root, so the server runs as the
``postgres`` system user the package creates (``runuser``). Each test gets a database of its
own (``database()``), as each tenant would. Never a mock of the driver.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import psycopg.sql


def _bin(tool: str) -> str:
    found = shutil.which(tool) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"), reverse=True)), None)
    if found is None:
        raise RuntimeError(f"PostgreSQL's {tool} is not installed (Debian: apt-get install postgresql); "
                           ".ci/run installs it")
    return found


PASSWORD_ROLE = "ledger_pw"
"""The one role of the tests' server that must give its password (``PostgresServer.password_role``)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One server, as the ``postgres`` user, in its own folder; ``url`` names its ``postgres`` database."""

    def __init__(self, *, fsync: bool = False) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="retention-ledger-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.log = self.folder / "server.log"
        as_root = os.geteuid() == 0
        self._user = ["runuser", "-u", "postgres", "--"] if as_root else []
        if as_root:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run(_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-instructions")
        settings = [f"port = {self.port}", "listen_addresses = '127.0.0.1'", f"unix_socket_directories = '{self.folder}'",
                    "max_connections = 200", "shared_buffers = 128MB", f"fsync = {'on' if fsync else 'off'}",
                    "full_page_writes = off" if not fsync else "full_page_writes = on"]
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n".join(settings) + "\n")
        # Every role logs in without a password (trust), but PASSWORD_ROLE, which needs its password:
        # the tests of a login refused, and of a password never shown (R23).
        hba = self.data / "pg_hba.conf"
        hba.write_text(f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        self.start()

    def _run(self, *args: str) -> None:
        subprocess.run([*self._user, *args], check=True, capture_output=True, timeout=120)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "immediate") -> None:
        """Stopped in ``mode`` (immediate: as a crash, no checkpoint), then started again."""
        self.stop(mode)
        self.start()

    def password_role(self, password: str) -> str:
        """Make ``PASSWORD_ROLE`` (a superuser) log in with ``password`` from now on; its name."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (PASSWORD_ROLE,)).fetchone() is None:
                conn.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN SUPERUSER")
            conn.execute(psycopg.sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                psycopg.sql.Identifier(PASSWORD_ROLE), psycopg.sql.Literal(password)))
        return PASSWORD_ROLE

    def database(self, prefix: str = "t") -> str:
        """A new, empty database; its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def close(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        for _ in range(20):
            try:
                shutil.rmtree(self.folder)
                return
            except OSError:
                time.sleep(0.1)


MANUAL = None
"""``max_clock_skew`` for a ledger that a test drives with its own clock (``ManualClock``): on
PostgreSQL every host is held to the server's clock (R18), so such a test says so, with this."""

_shared: PostgresServer | None = None
_ledgers_db: str | None = None


def shared() -> PostgresServer:
    """The test session's server, started on first use and stopped when the session's process ends."""
    global _shared
    if _shared is None:
        import atexit
        _shared = PostgresServer()
        atexit.register(_shared.close)
    return _shared


def ledger_location(kind: str, folder: Path) -> str:
    """Where a test's ledger lives: ``ledger.db`` in ``folder`` (SQLite, not yet made), or a fresh
    schema of one database of the shared server (PostgreSQL), made with its warehouse at
    ``folder/warehouse``, where a SQLite ledger in ``folder`` keeps its own by default."""
    if kind == "sqlite":
        return str(folder / "ledger.db")
    from ledger import Ledger
    url = fresh_url()
    Ledger.open(url, warehouse=folder / "warehouse").close()
    return url


def fresh_url() -> str:
    """A URL naming an empty schema of the shared server's ledger database (no ledger made)."""
    global _ledgers_db
    if _ledgers_db is None:
        _ledgers_db = shared().database("ledgers")
    return f"{_ledgers_db}?schema=l_{uuid.uuid4().hex[:12]}"
