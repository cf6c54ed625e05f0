"""A fault-injecting HTTP proxy in front of the tests' S3 server, on 127.0.0.1 (standard library only).

Object-store faults are injected on the wire, as a store or a network would cause them, never
by patching the client: the client under test (obstore) talks to this proxy as to S3.

    proxy = FaultProxy(upstream="http://127.0.0.1:5000").start()
    proxy.inject(Fault("status", times=3, status=503, code="SlowDown"))   # throttling
    proxy.inject(Fault("delay", seconds=3, match=DELETES))                # a timeout
    proxy.inject(Fault("reset", forward=True, match=DELETES))             # done upstream, then RST
    proxy.fail_keys({"wh/t1/a.parquet"})      # DeleteObjects answers <Error> for these, and keeps them
    proxy.add_listed("wh-evil/x")             # a listing that names a key outside what was asked
    proxy.inject(Fault("meanwhile", match=LISTINGS, meanwhile=put_late_file))  # another writer, mid-request
    proxy.requests                            # what went by: (method, target, status, fault, keys)

Requests are forwarded byte for byte (the Host header too). A DeleteObjects body from which
keys were removed gets new length and checksum headers; the S3 server the tests use does not
check signatures, which that would break on a real store.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape, unescape

Match = Callable[[str, str], bool]
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
        "content-length"}


def DELETES(method: str, target: str) -> bool:
    """S3's DeleteObjects: ``POST /<bucket>?delete``."""
    return method == "POST" and "delete" in parse_qs(urlsplit(target).query, keep_blank_values=True)


def LISTINGS(method: str, target: str) -> bool:
    """S3's ListObjectsV2: ``GET /<bucket>?list-type=2...``."""
    return method == "GET" and "list-type" in parse_qs(urlsplit(target).query)


def scratch(key: str) -> bool:
    """Whether a key is the library's own scratch object, not data: a vacuum's receipt part waiting
    in ``.retention-ledger/receipts/`` for its driver (deleted once recorded), or a probe a driver
    leaves in ``.retention-ledger/probes/`` for Spark's executors to read back (removed before
    anything is recorded)."""
    return any(folder in f"/{key}" for folder in ("/.retention-ledger/receipts/", "/.retention-ledger/probes/"))


@dataclass
class Fault:
    kind: str
    """``status`` (answer with an S3 error), ``delay`` (wait ``seconds``, then forward), ``reset``
    (close the client's connection with a TCP RST), ``meanwhile`` (forward, run ``meanwhile``, then
    answer)."""
    times: int = 1
    match: Match | None = None
    status: int = 503
    code: str = "SlowDown"
    seconds: float = 0.0
    forward: bool = False
    """``reset``: forward the request first, so it takes effect and only its answer is lost."""
    one_at_a_time: bool = False
    """``delay``: the requests it hits are answered one after another, as by a store that serves one
    request at a time (a client's batches in flight then land ``seconds`` apart)."""
    meanwhile: Callable[[], None] | None = None
    """``meanwhile``: what another writer does after the store answered and before the client reads
    the answer (it should reach the store directly, ``FaultProxy.upstream``, not through the proxy)."""
    hits: int = 0


@dataclass
class Seen:
    method: str
    target: str
    status: int | None
    fault: str | None
    keys: list[str] = field(default_factory=list)
    """A DeleteObjects request's keys, as the client sent them."""


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.lock = threading.Lock()
        self.serial = threading.Lock()
        self.faults: list[Fault] = []
        self.failing: dict[str, str] = {}
        self.listed_extra: list[str] = []
        self.requests: list[Seen] = []
        owner = self

        class Handler(_Handler):
            proxy = owner

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FaultProxy:
        threading.Thread(target=self.server.serve_forever, daemon=True, name="s3-fault-proxy").start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def inject(self, fault: Fault) -> Fault:
        with self.lock:
            self.faults.append(fault)
        return fault

    def fail_keys(self, keys: set[str] | list[str], code: str = "InternalError") -> None:
        """Until ``clear``: DeleteObjects keeps these keys and answers an <Error> for each."""
        with self.lock:
            self.failing.update(dict.fromkeys(keys, code))

    def add_listed(self, key: str) -> None:
        """Until ``clear``: every listing's first page also names ``key`` (a store gone wrong)."""
        with self.lock:
            self.listed_extra.append(key)

    def clear(self) -> None:
        with self.lock:
            self.faults.clear()
            self.failing.clear()
            self.listed_extra.clear()
            self.requests.clear()

    def deleted_keys(self) -> list[str]:
        """Every key of data the client asked the store to delete, in order (not the library's own
        ``scratch`` objects)."""
        with self.lock:
            return [k for seen in self.requests for k in seen.keys if not scratch(k)]

    def take_fault(self, method: str, target: str) -> Fault | None:
        """The next armed fault that matches this request, counted as used (None: pass it on)."""
        with self.lock:
            for fault in self.faults:
                if fault.hits < fault.times and (fault.match is None or fault.match(method, target)):
                    fault.hits += 1
                    return fault
        return None

    def record(self, seen: Seen) -> None:
        """Note a request the proxy answered or passed on."""
        with self.lock:
            self.requests.append(seen)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    proxy: FaultProxy

    def log_message(self, *args: object) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while (size := int(self.rfile.readline().split(b";")[0].strip(), 16)) > 0:
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self, body: bytes, headers: list[tuple[str, str]]) -> tuple[int, str, list, bytes]:
        connection = http.client.HTTPConnection(*self.proxy.upstream, timeout=120)
        try:
            connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body or None)
            answer = connection.getresponse()
            return answer.status, answer.reason, answer.getheaders(), answer.read()
        finally:
            connection.close()

    def _answer(self, status: int, reason: str, headers: list, data: bytes) -> None:
        self.send_response_only(status, reason)
        for name, value in headers:
            if name.lower() not in _HOP:
                self.send_header(name, value)
        # A HEAD's answer has no body but says the object's length (Arrow reads a file's size from it).
        said = [v for n, v in headers if n.lower() == "content-length"] if self.command == "HEAD" else []
        self.send_header("Content-Length", said[0] if said else str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _handle(self) -> None:
        proxy, method, target = self.proxy, self.command, self.path
        body = self._body()
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP]
        keys = [unescape(k.decode()) for k in re.findall(rb"<Key>(.*?)</Key>", body, re.S)] \
            if DELETES(method, target) else []
        fault = proxy.take_fault(method, target)
        if fault is not None and fault.kind == "status":
            proxy.record(Seen(method, target, fault.status, "status", keys))
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{fault.code}</Code>'
                   "<Message>injected by the test proxy</Message></Error>").encode()
            self._answer(fault.status, "Injected", [("Content-Type", "application/xml")], xml)
            return
        if fault is not None and fault.kind == "delay" and fault.one_at_a_time:
            with proxy.serial:
                time.sleep(fault.seconds)
                self._pass(body, headers, keys, fault)
            return
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.seconds)
        if fault is not None and fault.kind == "reset":
            if fault.forward:
                self._forward(body, headers)
            proxy.record(Seen(method, target, None, "reset", keys))
            self._reset()
            return
        self._pass(body, headers, keys, fault)

    def _pass(self, body: bytes, headers: list[tuple[str, str]], keys: list[str], fault: Fault | None) -> None:
        """Forward the request, failing the keys and adding the listed keys the test asked for."""
        proxy, method, target = self.proxy, self.command, self.path
        with proxy.lock:
            failing = {k: proxy.failing[k] for k in keys if k in proxy.failing}
            extra = list(proxy.listed_extra) if LISTINGS(method, target) else []
        if failing:
            body = re.sub(rb"<Object>.*?</Object>", lambda m: b"" if unescape(re.search(
                rb"<Key>(.*?)</Key>", m.group(0), re.S).group(1).decode()) in failing else m.group(0), body, flags=re.S)
            headers = _checksummed(headers, body)
        if failing and len(failing) == len(keys):  # nothing left to send: answer for the store
            status, reason, answer_headers = 200, "OK", [("Content-Type", "application/xml")]
            data = b'<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult></DeleteResult>'
        else:
            status, reason, answer_headers, data = self._forward(body, headers)
        if fault is not None and fault.meanwhile is not None:
            fault.meanwhile()
        if failing and status == 200:
            errors = "".join(f"<Error><Key>{escape(k)}</Key><Code>{code}</Code><Message>injected</Message></Error>"
                             for k, code in failing.items()).encode()
            data = data.replace(b"</DeleteResult>", errors + b"</DeleteResult>")
        if extra and status == 200:
            contents = "".join(f"<Contents><Key>{escape(k)}</Key><Size>1</Size>"
                               "<LastModified>2020-01-01T00:00:00.000Z</LastModified></Contents>" for k in extra)
            data = data.replace(b"</ListBucketResult>", contents.encode() + b"</ListBucketResult>")
        proxy.record(Seen(method, target, status, None if fault is None else fault.kind, keys))
        self._answer(status, reason, answer_headers, data)

    def _guarded(self) -> None:
        try:
            self._handle()
        except (ConnectionError, BrokenPipeError, socket.timeout):
            self.close_connection = True  # the client went away (it timed out during a delay)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _guarded


def _checksummed(headers: list[tuple[str, str]], body: bytes) -> list[tuple[str, str]]:
    """A rewritten body's checksums (S3 requires Content-MD5 or a checksum on DeleteObjects)."""
    fresh = {"content-md5": base64.b64encode(hashlib.md5(body).digest()).decode(),
             "x-amz-content-sha256": hashlib.sha256(body).hexdigest(),
             "x-amz-checksum-sha256": base64.b64encode(hashlib.sha256(body).digest()).decode()}
    return [(name, fresh.get(name.lower(), value)) for name, value in headers]
