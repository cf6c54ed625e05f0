"""Objects on a store, at the store's speed (R9, R20): streamed listings, batched deletes by key.

Runs on executors. An object store answers a request in tens of milliseconds (a local
S3-compatible server in a few), whatever it holds, so a vacuum that sends one DELETE per
object spends its life waiting: 20 objects a second, 8 days for 13.5 million. S3's
DeleteObjects takes up to 1,000 keys a request, so here every deletion goes out in such
batches (``Batches``), several in flight at once, through ``obstore`` (the Rust
``object_store`` crate that delta-rs uses; it sends DeleteObjects on S3 and the store's own
bulk call or concurrent deletes elsewhere). Listings are streamed a page (1,000 keys) at a
time and each page is handed to the deleting threads as it arrives, so a listing never
waits for the deletes and nothing is held whole.

Confinement (R9) is checked per key, before the key joins a batch: it must be a plain key
(no ``..``, no empty segment) strictly inside the prefix it was planned under, which is
itself inside the warehouse root's bucket and prefix. ``s3://lake/wh-evil/t1`` is not inside
``s3://lake/wh``; a key that only looks like the prefix is refused, not deleted.

Faults. The client retries throttling (503 SlowDown) and failed reads by itself; a batch
that still fails (a timeout, a connection reset mid-request, a key the store refused) is
sent again, whole, with backoff: deleting a key that is already gone succeeds, so a batch
is idempotent. What still fails after ``ATTEMPTS`` is reported per location, and nothing
is recorded as gone while an object remains: a purge is clean only when a fresh listing of
its location finds nothing, and a keyed deletion only when every one of its batches was
answered without an error.

Imports: the standard library; ``obstore`` when a store is first opened.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:  # obstore is imported where a store is reached, not by every executor
    from obstore.store import ClientConfig, RetryConfig

    from .receipts import Receipt

BATCH = 1_000
"""Keys a DeleteObjects request takes at most (S3's limit)."""

IN_FLIGHT = 8
"""Batches sent at once per task: a store whose requests take 50 ms deletes 8 x 1,000 keys in
that time; a local test server that answers one request at a time gains nothing, loses nothing.
``RETENTION_LEDGER_DELETES_IN_FLIGHT`` (in the executors' environment) sets another number, for a
store with a tight request budget."""


def in_flight() -> int:
    text = os.environ.get("RETENTION_LEDGER_DELETES_IN_FLIGHT", "")
    return max(1, int(text)) if text.isdigit() else IN_FLIGHT

ATTEMPTS = 4
"""Tries of one batch before its keys are reported as not deleted. Inside each, the client retries
what it knows to be passing (throttling, 5xx answers, dropped connections: ``RETRIES``)."""

RETRIES: RetryConfig = {"max_retries": 4, "retry_timeout": timedelta(seconds=60),
                        "backoff": {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=2)}}
"""The client's own retries of one request: 4, from 50 ms apart to 2 s (its default, 10 up to 15 s
apart, keeps a vacuum waiting minutes on a key the store will never delete)."""

PAGE = 1_000
"""Keys a listing asks for at a time."""


class Unsafe(Exception):
    """A key or prefix that is not confined to the location it was planned under (R9)."""


class StoreError(Exception):
    """The store would not do something after every retry; the message says what and why."""


class Listed(NamedTuple):
    key: str
    size: int
    modified: float
    """Seconds since the epoch, by the store's own clock (S3's LastModified)."""


# --- where keys are ------------------------------------------------------------------------

class Bucket:
    """One bucket (or container) of a store, with the client that reaches it."""

    def __init__(self, scheme: str, name: str, store: Any) -> None:
        self.scheme, self.name, self.store = scheme, name, store

    def key(self, uri: str, *, root: bool = False) -> str:
        """The key of ``uri`` in this bucket; ``Unsafe`` if it is in another store or bucket, or not
        a plain key (a ``..`` segment, an empty one). A ``root`` may be the bucket itself (``""``)."""
        parts = urlsplit(uri)
        if parts.scheme != self.scheme or parts.netloc != self.name:
            raise Unsafe(f"{uri} is not in {self.scheme}://{self.name}")
        key = parts.path.rstrip("/")[1:] if parts.path.startswith("/") else parts.path.rstrip("/")
        if key or not root:
            check_key(key)
        return key

    def pages(self, prefix: str) -> Iterator[list[Listed]]:
        """Every object under ``prefix`` (a key prefix: the objects in ``prefix/``), a page at a time."""
        import obstore
        check_key(prefix)
        try:
            for page in obstore.list(self.store, prefix + "/", chunk_size=PAGE):
                yield [Listed(o["path"], o["size"], o["last_modified"].timestamp()) for o in page]
        except FileNotFoundError:
            return
        except Exception as exc:  # noqa: BLE001 - obstore's errors have no common base worth naming
            raise StoreError(f"listing {self.scheme}://{self.name}/{prefix}/ failed: {_one_line(exc)}") from None

    def folders(self, prefix: str) -> list[str]:
        """The keys of the "folders" right under ``prefix`` (common prefixes of a delimiter listing)."""
        import obstore
        check_key(prefix)
        found: list[str] = []
        try:
            result = obstore.list_with_delimiter(self.store, prefix + "/")
        except FileNotFoundError:
            return found
        except Exception as exc:  # noqa: BLE001
            raise StoreError(f"listing {self.scheme}://{self.name}/{prefix}/ failed: {_one_line(exc)}") from None
        for folder in result["common_prefixes"]:
            folder = folder.rstrip("/")
            inside(folder, prefix)
            found.append(folder)
        return found

    def put(self, key: str, data: bytes) -> None:
        """One object written whole (a receipt's part, waiting for the driver)."""
        import obstore
        check_key(key)
        try:
            obstore.put(self.store, key, data)
        except Exception as exc:  # noqa: BLE001
            raise StoreError(f"writing {self.scheme}://{self.name}/{key} failed: {_one_line(exc)}") from None

    def get(self, key: str) -> bytes:
        import obstore
        check_key(key)
        try:
            return bytes(obstore.get(self.store, key).bytes())
        except Exception as exc:  # noqa: BLE001
            raise StoreError(f"reading {self.scheme}://{self.name}/{key} failed: {_one_line(exc)}") from None

    def delete_one(self, key: str) -> None:
        """One object, by a plain DELETE (a receipt's part, once recorded); gone already is fine."""
        import obstore
        check_key(key)
        try:
            obstore.delete(self.store, key)
        except FileNotFoundError:
            return
        except Exception as exc:  # noqa: BLE001
            raise StoreError(f"deleting {self.scheme}://{self.name}/{key} failed: {_one_line(exc)}") from None

    def remaining(self, keys: list[str]) -> set[str]:
        """Which of ``keys`` the store still holds, asked one by one (after a batch that failed: a
        store reports a batch, not which of its keys went). A key it cannot answer for counts as
        held: nothing is taken for deleted unless the store said it is gone."""
        import obstore

        def held(key: str) -> bool:
            try:
                obstore.head(self.store, key)
            except FileNotFoundError:
                return False
            except Exception:  # noqa: BLE001 - unknown: not taken for deleted
                return True
            return True
        return {key for key, there in zip(keys, _pool("head").map(held, keys)) if there}

    def delete(self, keys: list[str]) -> None:
        """One batch, sent again with backoff until the store has answered it without an error."""
        import obstore
        from obstore.exceptions import PermissionDeniedError
        for attempt in range(ATTEMPTS):
            try:
                obstore.delete(self.store, keys)
                return
            except (PermissionDeniedError, FileNotFoundError) as exc:  # the store said no, for good
                raise StoreError(f"{len(keys)} objects could not be deleted: {_one_line(exc)}") from None
            except Exception as exc:  # noqa: BLE001 - a timeout, a reset, a key the store refused
                if attempt == ATTEMPTS - 1:
                    raise StoreError(f"{len(keys)} objects could not be deleted after {ATTEMPTS} attempts: "
                                     f"{_one_line(exc)}") from None
                time.sleep(min(2.0, 0.05 * 2 ** attempt))


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


def _one_line(exc: BaseException) -> str:
    """The client's error in one line: its first line, and the store's own error code and key
    where its answer carried them (they come after an XML header, on later lines)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    first = first.split(" - Server returned", 1)[0]
    said = [f"{what} {found}" for what in ("Code", "Key", "Message")
            for found in re.findall(rf"<{what}>(.*?)</{what}>", text)[:1]]
    return (f"{type(exc).__name__}: {first}" + (f" ({', '.join(said)})" if said else ""))[:600]


_BUCKETS: dict[tuple[int, str, str, tuple[str | None, ...]], Bucket] = {}
_BUCKETS_LOCK = threading.Lock()


def bucket(uri: str) -> Bucket:
    """The bucket ``uri`` is in, with a client made once per process (a forked child makes its own).

    S3: the endpoint may come from ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (an
    S3-compatible store: MinIO, Ceph, moto), addressed path-style; credentials and region
    from the usual ``AWS_*`` variables. Other stores (``gs://``, ``az://``, ...) as obstore
    reads their URLs and environment. On Spark, set these for the executors too
    (``spark.executorEnv.AWS_ENDPOINT_URL``).
    """
    parts = urlsplit(uri)
    if parts.scheme not in SCHEMES:
        raise StoreError(f"{uri}: the vacuum deletes on local disks and on object stores "
                         f"({', '.join(s + '://' for s in SCHEMES)}), not on {parts.scheme}://")
    settings = tuple(os.environ.get(name) for name in _SETTINGS)  # a changed setting makes a new client
    key = (os.getpid(), parts.scheme, parts.netloc, settings)
    with _BUCKETS_LOCK:
        found = _BUCKETS.get(key)
        if found is None:
            found = _BUCKETS[key] = Bucket(parts.scheme, parts.netloc, _client(parts.scheme, parts.netloc))
        return found


_SETTINGS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION",
             "RETENTION_LEDGER_STORE_TIMEOUT")


def _timeout() -> str:
    """A request's time limit: ``RETENTION_LEDGER_STORE_TIMEOUT`` seconds (default 120)."""
    text = os.environ.get("RETENTION_LEDGER_STORE_TIMEOUT", "")
    return f"{int(text)}s" if text.isdigit() and int(text) > 0 else "120s"


def _client(scheme: str, name: str) -> Any:
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


# --- deleting in batches -------------------------------------------------------------------

class Totals:
    """What one location (or folder) had deleted: files, bytes, and the first error."""

    __slots__ = ("files", "bytes", "error")

    def __init__(self) -> None:
        self.files = self.bytes = 0
        self.error: str | None = None


_POOLS: dict[tuple[int, str], ThreadPoolExecutor] = {}  # by process (a forked child makes its own)
_POOLS_LOCK = threading.Lock()


def _pool(purpose: str, threads: int = IN_FLIGHT) -> ThreadPoolExecutor:
    """One pool per process and purpose: a Spark Python worker runs many tasks in turn."""
    key = (os.getpid(), f"{purpose}-{threads}")
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = ThreadPoolExecutor(threads, thread_name_prefix=f"objects-{purpose}")
        return pool


class Batches:
    """Keys of one bucket gathered into DeleteObjects batches, up to ``IN_FLIGHT`` sent at once.

    Keys of several locations share batches (a hundred small tables are a few requests, not
    a hundred): ``add(key, size, totals, prefix)`` checks the key against its location's prefix
    (R9) before it joins a batch, and a batch's outcome is counted to each key's totals. At
    most a few batches wait at a time, so memory stays flat however many keys are listed.
    """

    def __init__(self, where: Bucket, receipt: Receipt | None = None) -> None:
        self._bucket = where
        self._receipt = receipt
        self._in_flight = in_flight()
        self._keys: list[str] = []
        self._owners: list[tuple[Totals, int]] = []
        self._pending: deque[Future[None]] = deque()
        self._lock = threading.Lock()

    def add(self, key: str, size: int, totals: Totals, prefix: str) -> None:
        inside(key, prefix)
        with self._lock:
            self._keys.append(key)
            self._owners.append((totals, size))
            full = len(self._keys) >= BATCH
        if full:
            self._send()

    def _send(self) -> None:
        with self._lock:
            keys, owners = self._keys, self._owners
            self._keys, self._owners = [], []
        if not keys:
            return
        while True:  # at most ``in_flight`` batches out at once: a lister far ahead waits for them
            with self._lock:
                if len(self._pending) < self._in_flight:
                    self._pending.append(_pool("delete", self._in_flight).submit(self._run, keys, owners))
                    return
                oldest = self._pending.popleft()
            oldest.result()

    def _run(self, keys: list[str], owners: list[tuple[Totals, int]]) -> None:
        gone = [True] * len(keys)
        try:
            self._bucket.delete(keys)
        except StoreError as exc:
            for totals, _ in owners:
                totals.error = totals.error or str(exc)
            # Some of the batch may be gone all the same: the store says which are still there.
            held = self._bucket.remaining(keys)
            gone = [key not in held for key in keys]
        with self._lock:
            for (totals, size), went in zip(owners, gone):
                if went:
                    totals.files += 1
                    totals.bytes += size
        if self._receipt is not None:
            self._receipt.add_many((key, size) for key, (_, size), went in zip(keys, owners, gone) if went)

    def finish(self) -> None:
        """Send what is gathered and wait for every batch."""
        self._send()
        while True:
            with self._lock:
                if not self._pending:
                    return
                future = self._pending.popleft()
            future.result()


# --- what a vacuum does on a store ---------------------------------------------------------

T = TypeVar("T")


def each(call: Callable[[T], Any], items: Iterable[T]) -> list[Any]:
    """``call`` of every item, a few at once (listings are round trips too)."""
    return list(_pool("list").map(call, items))


def purge(root: str, locations: list[str], *, named: list[list[bytes | None]] | None = None,
          verify: bool = True, siblings: int | None = None,
          receipt: Receipt | None = None) -> list[tuple[int, int, str | None]]:
    """Delete every object under each location (all in one bucket, inside the warehouse root),
    their keys sharing batches. ``named``: for each location, the stored file lists of what the
    ledger knows lies there (``[[path, size], ...]``, paths relative to the location): those keys
    are deleted first, without listing; then each location is listed for what only the store
    knows. With ``verify`` a location is clean only when a fresh listing finds nothing under it
    (the listing after the keyed deletes is one, if it found nothing). Returns (files, bytes,
    error) per location; never raises.

    ``siblings``: about how many folders the locations' parent holds (the warehouse's tables).
    When many locations were emptied by key, one listing of the parent's folders (a request per
    1,000 of them) says which still hold anything, instead of a listing of each. ``receipt``: told
    every object deleted."""
    totals = [Totals() for _ in locations]
    stem = root.rstrip("/") + "/"
    for location, found in zip(locations, totals):  # before any client is made for the root's store
        if not location.startswith(stem):
            found.error = f"refused: {location} is not inside the warehouse {root}"
    if all(t.error for t in totals):
        return [(0, 0, t.error) for t in totals]
    try:
        where, base = _root(root)
    except (Unsafe, StoreError) as exc:
        return [(0, 0, t.error or f"refused: {exc}") for t in totals]
    prefixes: list[str | None] = []
    for location, found in zip(locations, totals):
        try:
            prefixes.append(None if found.error else inside(where.key(location), base))
        except Unsafe as exc:
            found.error = f"refused: {exc} (the warehouse is {root})"
            prefixes.append(None)
    jobs = [(p, t) for p, t in zip(prefixes, totals) if p is not None]
    if named:
        batches = Batches(where, receipt)
        for prefix, found, lists in zip(prefixes, totals, named):
            if prefix is not None:
                _add_named(batches, prefix, lists, found)
        batches.finish()
    if named and siblings is not None:
        jobs = _still_holding(where, jobs, siblings)
    listed = _empty(where, jobs, receipt)
    if verify:
        each(lambda job: _check_empty(where, *job), [job for job, n in zip(jobs, listed) if n])
    return [(t.files, t.bytes, t.error) for t in totals]


def _still_holding(where: Bucket, jobs: list[tuple[str, Totals]], siblings: int) -> list[tuple[str, Totals]]:
    """The jobs whose prefix still holds an object, found by a delimiter listing of their parent if
    that costs fewer requests than listing each; a prefix it does not name holds nothing (a fresh
    listing found nothing: clean)."""
    by_parent: dict[str, list[tuple[str, Totals]]] = {}
    for job in jobs:
        by_parent.setdefault(job[0].rpartition("/")[0], []).append(job)
    kept: list[tuple[str, Totals]] = []
    for parent, group in by_parent.items():
        if len(group) <= 1 + siblings // PAGE:
            kept += group
            continue
        try:
            holding = set(where.folders(parent)) if parent else set(_top_folders(where))
        except (Unsafe, StoreError):
            kept += group  # each is listed instead
            continue
        kept += [job for job in group if job[0] in holding]
    return kept


def _top_folders(where: Bucket) -> list[str]:
    import obstore
    return [p.rstrip("/") for p in obstore.list_with_delimiter(where.store)["common_prefixes"]]


def _add_named(batches: Batches, prefix: str, lists: Iterable[bytes | None], found: Totals, *,
               within: str | None = None) -> None:
    """The keys of stored file lists (paths relative to the location ``prefix``), each confined to
    ``within`` (a write folder) or the location, into ``batches``."""
    for data in lists:
        if data is None:
            continue
        try:
            files = json.loads(data)
        except ValueError as exc:
            found.error = found.error or f"refused: a file list the ledger gave cannot be read ({exc})"
            continue
        for path, size in files:
            try:
                batches.add(f"{prefix}/{path}", size, found, within or prefix)
            except Unsafe as exc:  # the ledger checked them when they were committed: never expected
                found.error = found.error or f"refused: {exc}"


def _empty(where: Bucket, jobs: list[tuple[str, Totals]], receipt: Receipt | None = None) -> list[int]:
    """List each prefix and delete what is there (keys of all sharing batches); how many each had."""
    batches = Batches(where, receipt)

    def empty(job: tuple[str, Totals]) -> int:
        prefix, found = job
        seen = 0
        try:
            for page in where.pages(prefix):
                for obj in page:
                    batches.add(obj.key, obj.size, found, prefix)
                seen += len(page)
        except (Unsafe, StoreError) as exc:
            found.error = found.error or (f"refused: {exc}" if isinstance(exc, Unsafe) else str(exc))
        return seen

    counts = each(empty, jobs)
    batches.finish()
    return counts


def _check_empty(where: Bucket, prefix: str, found: Totals) -> None:
    if found.error is not None:
        return
    try:
        left = next(iter(where.pages(prefix)), [])
    except StoreError as exc:
        found.error = str(exc)
        return
    if left:
        found.error = (f"objects under {where.scheme}://{where.name}/{prefix}/ remain (new ones arrived, "
                       "or deletes were lost); run the vacuum again")


def delete_named(root: str, location: str, folders: list[tuple[str, bytes | None]], *,
                 receipt: Receipt | None = None) -> list[tuple[int, int, str | None]]:
    """Write folders whose files the ledger knows (a version named them): those are deleted by
    key, without listing; then each folder is listed for what only the store knows (Spark's
    ``_SUCCESS``, a late task's file) and emptied. ``folders``: (absolute folder, its stored file
    list, paths relative to the location). Returns (files, bytes, error) per folder; never raises."""
    totals = [Totals() for _ in folders]
    try:
        where, base = _root(root)
        home = inside(where.key(location), base)
    except (Unsafe, StoreError) as exc:
        return [(0, 0, f"refused: {exc} (the warehouse is {root})")] * len(folders)
    batches = Batches(where, receipt)
    jobs: list[tuple[str, Totals]] = []
    for (folder, data), found in zip(folders, totals):
        try:
            prefix = inside(where.key(folder), home)
        except Unsafe as exc:
            found.error = f"refused: {exc}"
            continue
        _add_named(batches, home, [data], found, within=prefix)
        jobs.append((prefix, found))
    batches.finish()
    _empty(where, jobs, receipt)  # a committed write's folder gains nothing: no fresh listing after this one
    return [(t.files, t.bytes, t.error) for t in totals]


def listing(root: str, location: str) -> list[Listed]:
    """Every object under a location (a dry run's listing), confined like a purge."""
    where, base = _root(root)
    prefix = inside(where.key(location), base)
    return [obj for page in where.pages(prefix) for obj in page if inside(obj.key, prefix)]


def _root(root: str) -> tuple[Bucket, str]:
    where = bucket(root)
    return where, where.key(root, root=True)


SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss", "adl", "azure")
"""Object stores the vacuum deletes on (obstore's); a warehouse elsewhere (``hdfs://``) is refused."""
