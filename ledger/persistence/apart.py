"""Work on a long log done by a process of its own, on another core.

Two jobs are worth a process on a long log: writing the snapshots a first open would
otherwise wait for (``backfill``), and walking ``verify``'s hash chain beside its fold
(``ledger.audit.chainwalk``). Both reach the same ledger as the caller through its
``EventStore.location``; neither is ever needed for an answer to be right, only for it to
be quick.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

APART_FROM = 50_000
"""A log at least this long has its first open's snapshots written (``backfill``) and ``verify``'s
chain walked (``audit.chainwalk``) by a process of its own, on another core; below it, starting a
process costs more than the work."""


def start_with_store(module: str, args: list[str], location: str, variable: str, *,
                     stdout: int | None = subprocess.DEVNULL) -> subprocess.Popen[bytes] | None:
    """Run ``python -m module args`` in a process of its own, reaching the ledger at ``location``
    (an ``EventStore.location``) through environment variable ``variable``: never its command
    line, which every user of the machine can read and a PostgreSQL URL may carry a password.
    None if no process could be started."""
    package_root = str(Path(__file__).resolve().parents[2])  # this release, installed or not
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, variable: location,
           "PYTHONPATH": package_root if not path else f"{package_root}{os.pathsep}{path}"}
    try:
        return subprocess.Popen([sys.executable, "-m", module, *args], env=env, stdin=subprocess.DEVNULL,
                                stdout=stdout, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # not killed with the caller's terminal
    except OSError:
        return None
