"""A warehouse on an object store, at the store's speed (R9, R20): streamed listings, batched deletes.

Runs on executors. An object store answers a request in tens of milliseconds (a local
S3-compatible server in a few), whatever it holds, so a vacuum that sends one DELETE per
object spends its life waiting: 20 objects a second, 8 days for 13.5 million. S3's
DeleteObjects takes up to 1,000 keys a request, so every deletion goes out in such batches
(``storage.Deleter``), several in flight at once, through ``obstore`` (the Rust
``object_store`` crate that delta-rs uses; it sends DeleteObjects on S3 and the store's own
bulk call or concurrent deletes elsewhere). Listings are streamed a page (1,000 keys) at a
time, so a listing never waits for the deletes and nothing is held whole.

Confinement (R9) is checked per key, before the key joins a batch: it must be a plain key
(no ``..``, no empty segment) strictly inside the prefix it was planned under, which is
itself inside the warehouse root's bucket and prefix. ``s3://lake/wh-evil/t1`` is not inside
``s3://lake/wh``; a key that only looks like the prefix is refused, not deleted.

Faults. The client retries throttling (503 SlowDown) and failed reads by itself; a batch
that still fails (a timeout, a connection reset mid-request, a key the store refused) is
sent again, whole, with backoff: deleting a key that is already gone succeeds, so a batch
is idempotent. What still fails after ``ATTEMPTS`` is reported, and only the keys the store
then says are gone (HEAD, one by one) are counted deleted.

Imports: the standard library; ``obstore`` when a store is first reached.
"""

from __future__ import annotations

import os
import posixpath
import re
import threading
import time
import zlib
from contextlib import contextmanager, suppress
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence
from urllib.parse import urlsplit

from .storage import StoredFile, Storage, StoreError, Unsafe, hidden, pool

if TYPE_CHECKING:  # obstore is imported where a store is reached, not by every executor
    from obstore.store import ClientConfig, RetryConfig

__all__ = ["ObjectStore", "StoreError", "Unsafe", "check_key", "inside"]

IN_FLIGHT = 8
"""Batches sent at once per task: a store whose requests take 50 ms deletes 8 x 1,000 keys in
that time; a local test server that answers one request at a time gains nothing, loses nothing.
``RETENTION_LEDGER_DELETES_IN_FLIGHT`` (in the executors' environment) sets another number, for a
store with a tight request budget."""

ATTEMPTS = 4
"""Tries of one batch before its keys are reported as not deleted. Inside each, the client retries
what it knows to be passing (throttling, 5xx answers, dropped connections: ``RETRIES``)."""

RETRIES: RetryConfig = {"max_retries": 4, "retry_timeout": timedelta(seconds=60),
                        "backoff": {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=2)}}
"""The client's own retries of one request: 4, from 50 ms apart to 2 s (its default, 10 up to 15 s
apart, keeps a vacuum waiting minutes on a key the store will never delete)."""

PAGE = 1_000
"""Keys a listing asks for at a time."""

SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss", "adl", "azure")
"""Object stores the vacuum deletes on (obstore's); a warehouse elsewhere (``hdfs://``) is refused."""


def in_flight() -> int:
    text = os.environ.get("RETENTION_LEDGER_DELETES_IN_FLIGHT", "")
    return max(1, int(text)) if text.isdigit() else IN_FLIGHT


def check_key(key: str) -> None:
    """A plain key: no leading or trailing ``/``, no empty, ``.`` or ``..`` segment."""
    if not key or key != posixpath.normpath(key) or key.startswith("/") or "//" in key or \
            any(part in (".", "..") for part in key.split("/")):
        raise Unsafe(f"{key!r} is not a plain key")


def inside(key: str, prefix: str) -> str:
    """``key`` if it lies strictly inside ``prefix`` (in ``prefix/``; ``""``: the whole bucket),
    else ``Unsafe`` (R9)."""
    check_key(key)
    if prefix and not key.startswith(prefix + "/"):
        raise Unsafe(f"{key} is not inside {prefix}/")
    return key


class ObjectStore(Storage):
    """The bucket (or container) a warehouse root is in. Names are the bucket's keys. Making one
    costs no request: the client is made (once per process) when the store is first reached."""

    keyed = True
    deletes_by_key = True
    splits_below_table = False
    tasks_per_core = 1
    shares_batches = True

    def __init__(self, root: str) -> None:
        parts = urlsplit(root)
        self.root, self.scheme, self.bucket = root, parts.scheme, parts.netloc
        self.base = self._key(root, root=True)
        self.threads = in_flight()

    def _key(self, uri: str, *, root: bool = False) -> str:
        """The key of ``uri`` in this bucket; ``Unsafe`` if it is in another store or bucket, or not
        a plain key. A ``root`` may be the bucket itself (``""``)."""
        parts = urlsplit(uri)
        if parts.scheme != self.scheme or parts.netloc != self.bucket:
            raise Unsafe(f"{uri} is not inside the warehouse {self.root}")
        key = parts.path.rstrip("/")[1:] if parts.path.startswith("/") else parts.path.rstrip("/")
        if key or not root:
            check_key(key)
        return key

    def confine(self, location: str, within: str | None = None) -> str:
        return inside(self._key(location), self.base if within is None else within)

    def inside(self, name: str, within: str) -> None:
        inside(name, within)

    @property
    def client(self) -> Any:
        return _client(self.scheme, self.bucket)

    def pages(self, where: str, *, sizes: bool = True, visible: bool = False) -> Iterator[list[StoredFile]]:
        import obstore
        check_key(where)
        with _failing(f"listing {self.uri(where)}/"), suppress(FileNotFoundError):
            for page in obstore.list(self.client, where + "/", chunk_size=PAGE):
                found = [StoredFile(o["path"], o["size"], o["last_modified"].timestamp()) for o in page]
                yield [e for e in found if not hidden(e.path[len(where) + 1:])] if visible else found

    def folders(self, where: str) -> list[str]:
        import obstore
        if where:
            check_key(where)
        found: Sequence[str] = ()
        with _failing(f"listing {self.uri(where)}/"), suppress(FileNotFoundError):
            found = obstore.list_with_delimiter(self.client, where + "/" if where else None)["common_prefixes"]
        return [inside(folder.rstrip("/"), where) for folder in found]

    def delete(self, batch: list[StoredFile]) -> tuple[list[int | None], str | None]:
        keys = [entry.path for entry in batch]
        try:
            self._send(keys)
        except StoreError as exc:  # some of the batch may be gone all the same: the store says which
            held = self.present(keys)
            return [None if entry.path in held else entry.size for entry in batch], str(exc)
        return [entry.size for entry in batch], None

    def _send(self, keys: list[str]) -> None:
        """One batch, sent again with backoff until the store has answered it without an error."""
        import obstore
        from obstore.exceptions import PermissionDeniedError
        for attempt in range(ATTEMPTS):
            try:
                obstore.delete(self.client, keys)
                return
            except (PermissionDeniedError, FileNotFoundError) as exc:  # the store said no, for good
                raise StoreError(f"{len(keys)} objects could not be deleted: {_one_line(exc)}") from None
            except Exception as exc:  # noqa: BLE001 - a timeout, a reset, a key the store refused
                if attempt == ATTEMPTS - 1:
                    raise StoreError(f"{len(keys)} objects could not be deleted after {ATTEMPTS} attempts: "
                                     f"{_one_line(exc)}") from None
                time.sleep(min(2.0, 0.05 * 2 ** attempt))

    def present(self, keys: list[str]) -> set[str]:
        """Which of ``keys`` the store holds, asked one by one, a few at once (after a batch that
        failed: a store reports a batch, not which of its keys went; before deleting what a stopped
        run may have deleted). A key it cannot answer for counts as held: nothing is taken for
        deleted unless the store said it is gone."""
        import obstore

        def held(key: str) -> bool:
            try:
                obstore.head(self.client, key)
            except FileNotFoundError:
                return False
            except Exception:  # noqa: BLE001 - unknown: not taken for deleted
                return True
            return True
        return {key for key, there in zip(keys, pool("head", IN_FLIGHT).map(held, keys)) if there}

    def settle(self, where: str, *, keep: bool = False) -> str | None:
        if next(iter(self.pages(where)), []):
            return (f"objects under {self.uri(where)}/ remain (new ones arrived, or deletes were lost); "
                    "run the vacuum again")
        return None

    def still_holding(self, names: list[str], siblings: int) -> set[str]:
        """A delimiter listing of a parent costs a request per ``PAGE`` of its folders: cheaper than
        a listing of each of its emptied folders when they are many. One it does not name holds
        nothing (a fresh listing found nothing: clean)."""
        by_parent: dict[str, list[str]] = {}
        for name in names:
            by_parent.setdefault(name.rpartition("/")[0], []).append(name)
        holding: set[str] = set()
        for parent, group in by_parent.items():
            try:
                holding.update(group if len(group) <= 1 + siblings // PAGE else set(group) & set(self.folders(parent)))
            except (Unsafe, StoreError):
                holding.update(group)  # each is listed instead
        return holding

    def uri(self, name: str) -> str:
        return f"{self.scheme}://{self.bucket}/{name}"

    def looks_again(self, found: int, *, known: bool, verify: bool) -> bool:
        """A listing that found nothing was itself the fresh look; one of a folder the ledger knew the
        files of is its last look, unless asked to ``verify``."""
        return bool(found) and (verify or not known)

    def share(self, pieces: list[str], share: int, shares: int) -> list[str]:
        """No empty folders are kept here, so a share takes the folders whose name's CRC falls to it:
        the same in every process (Python's own hash is salted per process), evenly spread over many
        random ids, less so over a few."""
        return [p for p in pieces if zlib.crc32(p.encode()) % shares == share]

    def first_missing(self, uris: list[str]) -> str | None:
        # One listing (a request per 1,000 keys) of each folder the paths are in, not a request per path.
        present: set[str] = set()
        for folder in sorted({uri.rsplit("/", 1)[0] for uri in uris}):
            present.update(self.uri(e.path) for page in self.pages(self.confine(folder)) for e in page)
        return next((uri for uri in uris if uri not in present), None)

    def absent(self, location: str) -> bool:
        return False

    def put(self, name: str, data: bytes) -> None:
        import obstore
        check_key(name)
        with _failing(f"writing {self.uri(name)}"):
            obstore.put(self.client, name, data)

    def get(self, name: str) -> bytes:
        import obstore
        check_key(name)
        with _failing(f"reading {self.uri(name)}"):
            return bytes(obstore.get(self.client, name).bytes())

    def remove(self, names: Iterable[str]) -> None:
        import obstore
        for name in names:
            check_key(name)
            with _failing(f"deleting {self.uri(name)}"), suppress(FileNotFoundError):
                obstore.delete(self.client, name)


@contextmanager
def _failing(what: str) -> Iterator[None]:
    """The store's error in what is inside, as ``StoreError``: ``{what} failed: ...``."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - obstore's errors have no common base worth naming
        raise StoreError(f"{what} failed: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    """The client's error in one line: its first line, and the store's own error code and key
    where its answer carried them (they come after an XML header, on later lines)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    first = first.split(" - Server returned", 1)[0]
    said = [f"{what} {found}" for what in ("Code", "Key", "Message")
            for found in re.findall(rf"<{what}>(.*?)</{what}>", text)[:1]]
    return (f"{type(exc).__name__}: {first}" + (f" ({', '.join(said)})" if said else ""))[:600]


_CLIENTS: dict[tuple[int, str, str, tuple[str | None, ...]], Any] = {}
_CLIENTS_LOCK = threading.Lock()

_SETTINGS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION",
             "RETENTION_LEDGER_STORE_TIMEOUT")


def _client(scheme: str, bucket: str) -> Any:
    """The client of a bucket, made once per process (a forked child makes its own) and settings.

    S3: the endpoint may come from ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (an
    S3-compatible store: MinIO, Ceph, moto), addressed path-style; credentials and region
    from the usual ``AWS_*`` variables. Other stores (``gs://``, ``az://``, ...) as obstore
    reads their URLs and environment. On Spark, set these for the executors too
    (``spark.executorEnv.AWS_ENDPOINT_URL``).
    """
    if scheme not in SCHEMES:
        raise StoreError(f"{scheme}://{bucket}: the vacuum deletes on local disks and on object stores "
                         f"({', '.join(s + '://' for s in SCHEMES)}), not on {scheme}://")
    settings = tuple(os.environ.get(name) for name in _SETTINGS)  # a changed setting makes a new client
    key = (os.getpid(), scheme, bucket, settings)
    with _CLIENTS_LOCK:
        found = _CLIENTS.get(key)
        if found is None:
            found = _CLIENTS[key] = _new_client(scheme, bucket)
        return found


def _timeout() -> str:
    """A request's time limit: ``RETENTION_LEDGER_STORE_TIMEOUT`` seconds (default 120)."""
    text = os.environ.get("RETENTION_LEDGER_STORE_TIMEOUT", "")
    return f"{int(text)}s" if text.isdigit() and int(text) > 0 else "120s"


def _new_client(scheme: str, name: str) -> Any:
    from obstore.store import S3Store, from_url
    if scheme in ("s3", "s3a"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        options: ClientConfig = {"timeout": _timeout(), "connect_timeout": "10s"}
        if endpoint is None:
            return S3Store(name, client_options=options, retry_config=RETRIES)
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        return S3Store(name, endpoint=endpoint, region=region, virtual_hosted_style_request=False,
                       client_options={**options, "allow_http": endpoint.startswith("http://")},
                       retry_config=RETRIES)
    return from_url(f"{scheme}://{name}", retry_config=RETRIES)
