"""A lease kept alive while work runs elsewhere: a write's (R14), a vacuum run's, a reader's pin (R21), an
erasure's fence. A thread in this process, beating on the caller's behalf, never a process (R22)."""

from __future__ import annotations

import contextlib
import threading
from typing import Callable

from .errors import LedgerError


class Heartbeat:
    """Calls ``beat`` every ``every`` seconds until the block ends, or until ``beat`` says the
    lease is no longer ours (returns False). A refused beat (a busy ledger) is simply tried again
    at the next one; the lease is long enough to miss a few."""

    def __init__(self, name: str, every: float, beat: Callable[[], object]) -> None:
        self._beat = beat
        self._every = max(1.0, every)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self._every):
            with contextlib.suppress(LedgerError):
                if self._beat() is False:
                    return
