"""A TCP proxy in front of the real PostgreSQL server that can lose one acknowledgement.

Armed with ``lose_answer_to_commit``, it forwards the next append (the message that records its
attempt id) to the server, waits until the server says its transaction is over (ReadyForQuery,
idle: committed), and then drops the connection instead of passing the answer on: the client
committed and never heard back, as when a network fails at the worst moment. Armed with
``lose_commit``, it drops the connection with that message unsent: nothing is committed.
Armed with ``cut_in_flight``, it forwards the next append and cuts the client at once, leaving the
server's side open: the append is still running (and holding the ledger's lock) when the client
reconnects and looks it up, as when a relay fails mid-flight.
While ``refusing`` is set, every new connection is cut at once: a server that stays away.
Everything else passes through untouched.
"""

from __future__ import annotations

import socket
import threading
_APPENDS = (b"* FROM ledger_append_v1(", b"* FROM ledger_append_v2(", b"INSERT INTO attempts SELECT")
"""In the message that appends (the store's append function, or its one statement on its own tip;
either records its attempt id too)."""
_COMMIT = b"COMMIT\x00"
_IDLE = b"Z\x00\x00\x00\x05I"
_IN_TRANSACTION = b"Z\x00\x00\x00\x05T"
"""ReadyForQuery, idle: the server's transaction is over (committed, for an append that succeeded)."""


class PostgresProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._armed: str | None = None
        self._lock = threading.Lock()
        self.fired = 0
        self.refusing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        """``path`` (``/database?schema=...``) on this proxy."""
        return f"postgresql://postgres@127.0.0.1:{self.port}{path}"

    def lose_answer_to_commit(self) -> None:
        self._armed = "answer"

    def lose_commit(self) -> None:
        self._armed = "commit"

    def cut_in_flight(self) -> None:
        self._armed = "in flight"

    def _take(self) -> str | None:
        with self._lock:
            armed, self._armed = self._armed, None
            return armed

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refusing:
                _close(client)
                continue
            server = socket.create_connection(self.upstream)
            state = {"mute": False}
            threading.Thread(target=self._pump_up, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._pump_down, args=(server, client, state), daemon=True).start()

    def _pump_up(self, client: socket.socket, server: socket.socket, state: dict) -> None:
        def cut() -> None:
            for s in (client, server):
                _close(s)
        while True:
            data = _recv(client)
            if not data:
                cut()
                return
            if state.get("at_commit") and _COMMIT in data:
                state["at_commit"], state["mute"] = False, True
            elif any(a in data for a in _APPENDS) and self._armed is not None:
                armed = self._take()
                if armed == "in flight":
                    self.fired += 1
                    state["late"] = True  # the server's side stays open: the append runs on
                    try:
                        server.sendall(data)
                    finally:
                        _close(client)
                    return
                if armed == "commit":
                    self.fired += 1
                    cut()
                    return
                if armed == "answer":
                    self.fired += 1
                    state["mute"] = True  # the next answer is read from the server and thrown away
            try:
                server.sendall(data)
            except OSError:
                cut()
                return

    def _pump_down(self, server: socket.socket, client: socket.socket, state: dict) -> None:
        while True:
            data = _recv(server)
            if not data:
                _close(client)
                return
            if state["mute"]:  # answers up to the commit's are held back; once it is in, the line is cut
                state["held"] = state.get("held", b"") + data
                if _IDLE in state["held"]:
                    for s in (client, server):
                        _close(s)
                    return
                if not state["held"].endswith(_IN_TRANSACTION):
                    continue
                # The append was a step of a transaction the client commits next: let these answers
                # through, and lose the answer to its COMMIT instead.
                data, state["mute"], state["at_commit"] = state.pop("held"), False, True
            try:
                client.sendall(data)
            except OSError:
                if not state.get("late"):  # a late delivery still needs the server's side open
                    _close(server)
                return

    def close(self) -> None:
        _close(self._listener)


def _recv(s: socket.socket) -> bytes:
    try:
        return s.recv(65536)
    except OSError:
        return b""


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
