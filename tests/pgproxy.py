"""A TCP proxy in front of the real PostgreSQL server that can lose one acknowledgement.

Armed with ``lose_answer_to_commit``, it forwards the next COMMIT to the server, waits for the
server's answer (so the transaction is committed), and then drops the connection instead of
passing the answer on: the client sent COMMIT and never heard back, as when a network fails at
the worst moment. Armed with ``lose_commit``, it drops the connection with the COMMIT unsent:
the server rolls the transaction back. Everything else passes through untouched.
"""

from __future__ import annotations

import socket
import threading
from typing import Callable

_COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"  # the simple-query message psycopg sends at a transaction's end


class PostgresProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._armed: str | None = None
        self._lock = threading.Lock()
        self.fired = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        """``path`` (``/database?schema=...``) on this proxy."""
        return f"postgresql://postgres@127.0.0.1:{self.port}{path}"

    def lose_answer_to_commit(self) -> None:
        self._armed = "answer"

    def lose_commit(self) -> None:
        self._armed = "commit"

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
            if _COMMIT in data and self._armed is not None:
                armed = self._take()
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
            if state["mute"]:  # the commit's answer: the transaction is in, the client never hears it
                for s in (client, server):
                    _close(s)
                return
            try:
                client.sendall(data)
            except OSError:
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
    for step in (lambda: s.shutdown(socket.SHUT_RDWR), s.close):  # type: Callable[[], None]
        try:
            step()
        except OSError:
            pass
