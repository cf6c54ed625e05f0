"""Who holds an upkeep lease: a process, named so that another on the same host can tell it ended.

A lease (``maintain``'s) ends at a time, and a process killed while it held one renews it no more.
Waiting for that time is right for a holder on another host, whose processes cannot be looked at
from here; but on the host the holder ran on, whether it still runs is a fact, not a wait: its pid
names no process, or a zombie (killed, not yet reaped), or another process (pids are reused: the
start time, ``/proc/<pid>/stat``'s ``starttime`` on Linux, tells them apart). Such a holder's lease
holds nothing, and the next run takes it over at once (inside the store's lock: ``take_lease``).

"This host" is the host name and, where Linux tells them, the boot and the pid namespace: two
containers (or two machines) of one name are two hosts, whose pids are not each other's.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
from pathlib import Path

import attrs


@attrs.frozen
class Holder:
    host: str
    pid: int
    started: int | None
    """When the process started (Linux: clock ticks after boot); None where that cannot be read."""
    space: str | None
    """Which pids ``pid`` is one of: the boot and the pid namespace (Linux); None elsewhere."""
    actor: str
    call: str
    """This call's own id: two calls in one process are two holders, so one waits for the other."""

    @classmethod
    def here(cls, actor: str) -> Holder:
        """This process, for a call about to take a lease."""
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _started(pid), _space(), actor, uuid.uuid4().hex[:12])

    def text(self) -> str:
        """As the store keeps it (the lease's holder)."""
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def read(cls, text: str) -> Holder | None:
        """A holder as ``text`` wrote it; None for any other text (0.4 wrote ``actor (pid N)``,
        which says no host: its lease holds until it ends)."""
        try:
            holder = cls(**json.loads(text))
        except (ValueError, TypeError):
            return None
        return holder if isinstance(holder.pid, int) and isinstance(holder.host, str) else None

    def shown(self) -> str:
        return f"pid {self.pid} on {self.host}, as {self.actor}"

    def gone(self) -> bool:
        """Whether this holder is known to have ended: it ran on this host and its process is no
        more. False for a holder on another host (it cannot be looked at from here)."""
        if (self.host, self.space) != (socket.gethostname(), _space()):
            return False
        if not _has_proc():
            return not _signal_reaches(self.pid)
        stat = _stat(self.pid)
        return stat is None or stat[0] in "ZXx" or (self.started is not None and stat[1] != self.started)


def gone(text: str) -> bool:
    """Whether the holder a store keeps as ``text`` is known to have ended (``Holder.gone``)."""
    holder = Holder.read(text)
    return holder is not None and holder.gone()


def shown(text: str) -> str:
    """A stored holder as a person reads it (an unreadable one as it is)."""
    holder = Holder.read(text)
    return text if holder is None else holder.shown()


_PROC = Path("/proc")


def _stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and start time from ``/proc/<pid>/stat``; None where there is no
    such file (no such process, or no ``/proc``)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name, in parentheses, may hold anything
    return fields[0], int(fields[19])  # state (field 3), starttime (field 22)


def _started(pid: int) -> int | None:
    stat = _stat(pid)
    return None if stat is None else stat[1]


def _has_proc() -> bool:
    return (_PROC / "self" / "stat").exists()


def _signal_reaches(pid: int) -> bool:
    """Without ``/proc``: whether ``pid`` names a process, as a signal 0 finds (pid reuse cannot be
    told apart there: a live pid is taken for its holder)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process
    return True


def _space() -> str | None:
    """The boot and the pid namespace this process's pids are of (Linux); None elsewhere."""
    with contextlib.suppress(OSError):
        boot = (_PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    return None
