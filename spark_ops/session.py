"""The local SparkSession every entry point uses unless the caller brings its own.

UTC everywhere (the ledger's times are UTC; a session in local time would make
timestamps in tables disagree with the ledger's), no UI, quiet logs (the JVM's and PySpark's
own), and the driver's own Python for the workers so they import the same ``spark_ops``.

Spark needs a Java runtime; without one PySpark prints forty lines of py4j
traceback, so we look for it first and say in one line what is missing.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import dataclasses
import importlib.util
import logging
import os
import re
import shutil
import signal
import site
import socket
import subprocess
import sys
import threading
import time
import warnings
import weakref
from importlib import resources
from typing import Any, Callable, ContextManager, Iterator, Mapping, cast

import attrs
from pyspark import SparkContext
from pyspark.sql import SparkSession

from ledger import LedgerError

MIN_JAVA = 17


class SparkUnavailable(LedgerError):
    """A local SparkSession could not be started."""


class JavaNotFound(SparkUnavailable):
    """Spark needs a Java runtime (17 or newer) and none was found."""


def local_session(app_name: str = "retention-ledger", *, master: str = "local[2]", remote: str | None = None,
                  shuffle_partitions: int = 4, jvm_log: str | None = None,
                  scratch: str | None = None, conf: Mapping[str, str] | None = None) -> SparkSession:
    """The process's local SparkSession, started if need be. With ``jvm_log``, the JVM's own
    output (its start-up banner, and anything it prints later) goes to that file instead of
    this process's stderr, which a command line keeps for its one-line answers. With
    ``scratch``, Spark's own temporary files (block manager, shipped files, native libraries)
    go in that folder instead of the system's, for the caller to remove afterwards. ``conf``:
    Spark settings as ``spark-submit --conf`` takes them (``spark.executorEnv.AWS_REGION``...);
    the user's ``spark-defaults.conf`` (in ``SPARK_CONF_DIR``) is read as Spark reads it.

    With ``remote`` (or PySpark's own ``SPARK_REMOTE`` variable), a Spark Connect session instead:
    ``sc://host:port`` (a server of one's own, Databricks' or Snowpark Connect's address), or
    ``local[2]`` for a Connect server PySpark starts in this process; ``master`` then does not
    apply (the server chose its own), and ``conf`` is given to the session as runtime settings.
    A server started in this process (``local[2]``) is set up as a classic session's JVM is (UTC,
    no UI, quiet logs, ``jvm_log`` and ``scratch``, the workers' Python); ``conf`` then configures
    it at its start, static settings included.
    ``remote=""`` asks for a classic session even where ``SPARK_REMOTE`` is set."""
    remote = _remote(remote)
    if remote:
        return connect_session(app_name, remote, shuffle_partitions, dict(conf or {}), jvm_log=jvm_log,
                               scratch=scratch)
    active = SparkSession.getActiveSession()
    if active is None:
        check_java()
        check_master(master)
    _workers_python()
    try:
        with _stderr_to(jvm_log) if jvm_log and active is None else contextlib.nullcontext(), _classic_build():
            builder = SparkSession.builder.master(master).appName(app_name)
            for key, value in _jvm_settings(shuffle_partitions, scratch, dict(conf or {})).items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
    except Exception as exc:  # py4j and PySpark raise their own types; the caller needs one line
        where = f"; the JVM's output is in {jvm_log}" if jvm_log else ""
        first = _cause_in(jvm_log) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SparkUnavailable(f"Spark did not start: {first}{where}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    _quiet_query_context_logs()
    return spark


def _remote(remote: str | None) -> str | None:
    return (remote if remote is not None else os.environ.get("SPARK_REMOTE")) or None


def starting(remote: str | None = None, master: str = "local[2]") -> str:
    """What ``local_session(remote=remote, master=master)`` is about to start or reach, in words,
    for a command that says so before the wait (a secret in a Connect address is not shown)."""
    remote = _remote(remote)
    if remote is None and not master.startswith("local"):
        return f"starting a SparkSession on {master}"
    if remote is None:
        return "starting a local SparkSession" + (f" ({master})" if master != "local[2]" else "")
    if in_process(remote):
        return f"starting a Spark Connect server in this process ({remote.strip()})"
    return f"connecting to the Spark Connect server at {shown(remote)}"


@contextlib.contextmanager
def _classic_build() -> Iterator[None]:
    """Hide PySpark's Connect variables while a classic session is built: its builder makes a
    Connect session instead whenever SPARK_REMOTE (or the Connect mark) is set, so ``remote=""``
    gave a Connect session, or none, where SPARK_REMOTE was set."""
    saved = {name: os.environ.pop(name) for name in ("SPARK_REMOTE", CONNECT_MARK) if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def connect_session(app_name: str, remote: str, shuffle_partitions: int, conf: dict[str, str], *,
                    jvm_log: str | None = None, scratch: str | None = None) -> SparkSession:
    """A Spark Connect session on ``remote`` with the same settings a classic one gets where a
    client may set them (UTC, static partition overwrite). A malformed address, a server that does
    not answer, a setting it refuses, or a client without Connect's libraries is one line, not
    gRPC's page (nor its ten minutes of retries); and a failed attempt leaves this process as it
    was (PySpark's Connect mark unset, so a classic session here keeps classic columns).

    A server in this process (``in_process``) is started with a classic session's settings
    (``_jvm_settings``): without them PySpark starts it with Spark's default logging, and its JVM
    printed every warning on this process's stderr (``attach`` gave about 190 lines of Java stack
    traces, Spark probing each version's glob of files as a streaming sink's folder) and its
    progress bars, and its Python workers went without what keeps the caller's folders off their
    path (R22)."""
    _require(lambda: importlib.import_module("pyspark.sql.connect.utils").check_dependencies(),
             "Spark Connect needs PySpark's connect extras",
             "pip install 'retention-ledger[connect]' (or 'pyspark[connect]')")
    jvm: dict[str, str] | None = None
    if in_process(remote):
        check_java()  # PySpark starts the Connect server in this process's own JVM
        _check_local_port(remote)
        _workers_python()
        jvm = _jvm_settings(shuffle_partitions, scratch, conf)
    else:
        check_remote(remote)
    settings = {"spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": str(shuffle_partitions),
                "spark.sql.sources.partitionOverwriteMode": "static", **conf}
    mark = os.environ.get(CONNECT_MARK)
    try:
        # Where the JVM it starts writes (one already running writes where it did at its start).
        log = jvm_log if jvm is not None and SparkContext._active_spark_context is None else None
        with _stderr_to(log) if log else contextlib.nullcontext():
            spark = _first_contact(app_name, remote, jvm or {})
        if jvm is not None:
            settings = {}  # given to the server at its start: PySpark sets the runtime ones on the session
        for key, value in settings.items():
            try:
                spark.conf.set(key, value)
            except Exception as exc:  # the server answered: it refuses this one
                raise SparkUnavailable(f"the Spark Connect server at {shown(remote)} refused the setting "
                                       f"{key}={value} ({_first_line(exc)}): leave it out, or set it where the "
                                       "server is started") from None
    except BaseException:
        if mark is None:
            os.environ.pop(CONNECT_MARK, None)
        else:
            os.environ[CONNECT_MARK] = mark
        raise
    _quiet_query_context_logs()
    return spark


CONNECT_MARK = "SPARK_CONNECT_MODE_ENABLED"
"""PySpark's mark of a Connect process: while it is set, ``pyspark.sql.functions`` build Connect columns."""

FIRST_CONTACT_RETRIES = dict(max_retries=7, initial_backoff=50, backoff_multiplier=4.0, max_backoff=2000)
"""gRPC retries for the first call to a Connect server, about ten seconds in all (as
``MASTER_TIMEOUT``): PySpark's own policy, kept for every later call, waits ten minutes for a port
that accepts connections but does not speak Spark Connect before it says anything."""


def _first_contact(app_name: str, remote: str, jvm: Mapping[str, str]) -> SparkSession:
    """The Connect session on ``remote``, once its server has answered one call within
    ``FIRST_CONTACT_RETRIES``. ``jvm``: the settings of a server this process starts.

    The session this process made for the address before is reused only if it still answers as
    itself: one its server no longer has (restarted, or timed out for idleness) answered its
    first call after the restart with ``INVALID_HANDLE.SESSION_CHANGED``, which the setting of the
    time zone then reported as the server refusing that setting; a second call worked. It is let
    go, and a new session made, at once."""
    spark: SparkSession | None = None
    try:
        spark = _connect(app_name, remote, jvm)
        try:
            _answer(spark)
        except Exception as exc:
            if in_process(remote) or _said_ended(spark, exc) is None:
                raise
            _forget(remote, spark)
            spark = _connect(app_name, remote, jvm)
            _answer(spark)
    except SparkUnavailable:
        raise
    except Exception as exc:  # gRPC's and PySpark's own types; the caller needs one line
        _forget(remote, spark)
        raise SparkUnavailable(f"the Spark Connect server at {shown(remote)} did not answer ({_first_line(exc)}): "
                               "check that a Spark Connect server listens there; nothing was recorded") from None
    return spark


def _answer(spark: SparkSession) -> None:
    """One small call to a Connect session's server (a setting read back), within
    ``FIRST_CONTACT_RETRIES`` and ``MASTER_TIMEOUT`` a try, instead of PySpark's ten minutes of
    retries and its hour's deadline: raises what PySpark raises if it does not answer as this
    session's server (restarted under it, or gone)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client = spark.client
    policies = client.get_retry_policies()
    deadlines = getattr(client, "_rpc_deadlines", None)  # PySpark 4.1+: a deadline per kind of call
    client.set_retry_policies([DefaultPolicy(**FIRST_CONTACT_RETRIES)])  # type: ignore[arg-type]
    if dataclasses.is_dataclass(deadlines) and not isinstance(deadlines, type) and hasattr(deadlines, "config"):
        brief: Any = dataclasses.replace(deadlines, config=MASTER_TIMEOUT)
        client._rpc_deadlines = brief
    try:
        with warnings.catch_warnings():  # PySpark warns RETRIES_EXCEEDED on stderr, then raises
            warnings.simplefilter("ignore")
            spark.conf.get("spark.sql.session.timeZone")
    finally:
        client.set_retry_policies(policies)
        if deadlines is not None:
            client._rpc_deadlines = deadlines


_CONNECTED: dict[str, SparkSession] = {}
"""The Connect session made for each address, reused while it is open (a second call for the same
address gets the same server session, as a classic ``getOrCreate`` gets the same context)."""


def _forget(remote: str, spark: SparkSession | None) -> None:
    """Close a session whose server did not answer, without another call to it: PySpark would
    release it on ``stop()``, and clean up after it when Python exits, each with ten minutes of
    retries."""
    _CONNECTED.pop(remote, None)
    if spark is not None and not in_process(remote):
        spark.release_session_on_close = False  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            spark.stop()


def _connect(app_name: str, remote: str, jvm: Mapping[str, str]) -> SparkSession:
    """A Connect session on ``remote``, without calling its server yet. PySpark's ``getOrCreate``
    gives the process's current Connect session whatever address it is asked for (a second
    server's address got the first server's session), so an address's own session is kept here;
    and a server's application is the server's own, so ``app_name`` names only an in-process one."""
    if in_process(remote):  # PySpark starts the server, with these settings, and connects to it
        builder = SparkSession.builder.remote(remote).appName(app_name)
        for key, value in jvm.items():
            builder = builder.config(key, value)
        with warnings.catch_warnings():
            # PySpark then sets every one of them on the session too, and the server warns, one
            # UserWarning each, that a static one (spark.ui.enabled) cannot be set there: it was, at
            # the server's start.
            warnings.filterwarnings("ignore", message="Failed to set ", category=UserWarning)
            spark = builder.getOrCreate()
        # Its server goes with this process's SparkContext (stop_local_spark, or the JVM killed):
        # PySpark's calls to it as Python exits would then wait out ten minutes of retries.
        atexit.register(_brief_goodbye, spark)
        return spark
    known = _CONNECTED.get(remote)
    if known is not None and not known.is_stopped:  # type: ignore[attr-defined]
        return known
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    os.environ[CONNECT_MARK] = "1"  # pyspark.sql.functions build Connect columns
    # Not PySpark's own builder (pyspark.sql.SparkSession.builder), which refuses a Connect session
    # in a process that also runs a classic one; create(), not getOrCreate(), for the reason above.
    # PySpark types a Connect session as a class of its own; every call here takes either kind (R24).
    spark = cast(SparkSession, ConnectSession.builder.remote(remote).create())
    _CONNECTED[remote] = spark
    atexit.register(_brief_goodbye, spark)  # runs before PySpark's own clean-up (atexit: last in, first out)
    return spark


EXIT_RETRIES = dict(max_retries=2, initial_backoff=50, backoff_multiplier=4.0, max_backoff=200)
"""gRPC retries for the calls PySpark makes to a Connect server as Python exits (clear the ML
cache, release the session): a server that answers does so at once, and one that has gone away
(stopped, or its host gone) kept the process from exiting for ten minutes per call."""


def _brief_goodbye(spark: SparkSession) -> None:
    """Shorten PySpark's calls to the server as Python exits; if it has gone, they fail quietly
    (PySpark would warn RETRIES_EXCEEDED on stderr after the command's last line)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]", category=UserWarning)
    with contextlib.suppress(Exception):
        spark.client.set_retry_policies([DefaultPolicy(**EXIT_RETRIES)])  # type: ignore[arg-type]


LOCAL_CONNECT_PORT = 15002
"""Where PySpark's in-process Connect server listens (its client connects to sc://localhost), unless
SPARK_TESTING is set, when it takes a free port."""


def _check_local_port(remote: str) -> None:
    """The port PySpark's in-process server needs is free: where it is not, the JVM fails to start
    the server's plugin and says only that a JavaSparkContext could not be made."""
    if "SPARK_TESTING" in os.environ:
        return
    try:
        socket.create_connection(("localhost", LOCAL_CONNECT_PORT), timeout=MASTER_TIMEOUT).close()
    except OSError:
        return  # nothing answers there: free
    raise SparkUnavailable(f"a Spark Connect server in this process ({remote}) needs port {LOCAL_CONNECT_PORT}, "
                           f"which is in use: connect to the server there with sc://localhost:{LOCAL_CONNECT_PORT} "
                           "if it is one, or free the port")


def check_arrow_jobs() -> None:
    """What PySpark needs in this process for the Arrow jobs ``spark_ops`` runs (``mapInArrow``:
    pandas and pyarrow, at PySpark's own minimum versions), or ``SparkUnavailable`` in one line
    naming what to install. The base install brings them; without this check, an install without
    them (``--no-deps``, a platform's own packages) met PySpark's raw ``PySparkImportError`` in the
    middle of the job, after the vacuum had recorded its start. The vacuum asks before it records
    anything (``ship.preflight``)."""
    def check() -> None:
        from pyspark.sql.pandas.utils import require_minimum_pandas_version, require_minimum_pyarrow_version
        require_minimum_pandas_version()
        require_minimum_pyarrow_version()
    _require(check, "Spark's Arrow jobs (mapInArrow, the vacuum's) need pandas and pyarrow in this process",
             "pip install 'pyspark[sql]' (retention-ledger's own install brings them)")


def _require(check: Callable[[], None], needs: str, install: str) -> None:
    """PySpark's own check of the libraries a call needs, its ImportError said in one line with
    the install that gives them."""
    try:
        check()
    except ImportError as exc:  # PySpark's PySparkImportError is one, as is a missing module
        raise SparkUnavailable(f"{needs} ({_first_line(exc)}): {install}") from None


def _first_line(exc: BaseException) -> str:
    """What an error says, in one line: gRPC's own detail where there is one, in it or in what
    caused it (a gRPC error's text is a page that starts "<_InactiveRpcError of RPC ...")."""
    for seen in _causes(exc):
        details = getattr(seen, "details", None)
        if callable(details):
            with contextlib.suppress(Exception):
                said = details()
                if said:
                    return " ".join(str(said).split())
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every error behind it (PySpark wraps gRPC's, and its own), each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


# --- the kind of session, in one place (R24) -----------------------------------------------------

ENDED = ("NO_ACTIVE_SESSION", "INVALID_HANDLE.SESSION_NOT_FOUND", "INVALID_HANDLE.SESSION_CHANGED",
         "INVALID_HANDLE.SESSION_CLOSED", "incorrect server side session identifier")
"""What PySpark says of a Connect session its server no longer has: it was stopped, or its server
restarted under it (a new server answers ``SESSION_CHANGED``, an operation of the old one
``SESSION_NOT_FOUND``, the latter wrapped in ``RESPONSE_ALREADY_RECEIVED``), or timed it out."""

UNREACHABLE = ("UNAVAILABLE", "DEADLINE_EXCEEDED")
"""gRPC's status codes for a server that does not answer (down, or its host unreachable): told by
the code a call ended with, never by text (a task's own error may say "Connection refused")."""


@attrs.frozen
class Java:
    """A classic session's JVM, for the one speed-up that needs it (``spark_ops.catalog.jvm_catalog``):
    the session's JVM object and the gateway's view of the JVM's classes."""
    session: Any
    classes: Any


class SessionKind(abc.ABC):
    """What differs between a classic session (a JVM of this process's, reached through py4j) and a Spark
    Connect one (a server's, reached through gRPC): every spark_ops call asks ``kind_of(spark)``, and no
    other module tells them apart. Shipping code needs no answer: ``addArtifacts(..., pyfile=True)``
    ships it to either kind."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    @property
    @abc.abstractmethod
    def id(self) -> str:
        """The session's one name, for what is remembered of it (its attachment, the executor code
        shipped to it, a pre-flight that passed): two client objects of one Connect session share it;
        a new session (a Connect server restarted under the old one answers only a new one) has another."""

    catalog_outlives_process = False
    """Whether the views a session puts in its catalog outlive this process (a Connect server's do)."""

    driver_is_here = False
    """Whether the session's driver is this process, so that a folder of this process's is one its
    catalog can be given (a database's, an empty one for a table to be made over)."""

    @abc.abstractmethod
    def require_live(self) -> None:
        """``SparkUnavailable`` in one line, before anything is recorded, unless the session can take
        work now. Never remembered: what it proves is that the session is there now."""

    @abc.abstractmethod
    def ended(self, *, ask: bool = False) -> bool:
        """Whether the session has ended: without ``ask``, as far as this process knows already (no
        call); with it, a Connect server is asked (a session restarted under its client does not know
        it ended until a call finds out)."""

    @abc.abstractmethod
    def unavailable(self, exc: BaseException, *, during: str | None = None, ended: str | None = None,
                    unreachable: str | None = None) -> SparkUnavailable | None:
        """What a Spark failure says if it is the session's, not the work's: the session ended, or
        its server does not answer. None for any other failure (the work's own, the caller says it).
        ``during``: what was under way (the session then ended "while the vacuum ran"); ``ended``
        and ``unreachable``: how the message ends in each case (by default, nothing was recorded)."""

    def shares_files(self) -> bool:
        """Whether the session's executors see exactly this process's files (the classic-only
        speed-ups): what others see is asked, never assumed."""
        return False

    def on_server(self) -> tuple[str, str | None] | None:
        """The session's id and user id on its server, for another client to ask about
        (``has_session``); None where no other client can reach it (a classic session)."""
        return None

    def has_session(self, session_id: str) -> bool | None:
        """Whether the session's server still has the session ``session_id`` of this client's user:
        True, False (it says it has no such session), or None (it cannot tell)."""
        return None

    @abc.abstractmethod
    def watch_tasks(self, report: Callable[[int], None], wanted: bool) -> ContextManager[None]:
        """While inside, the jobs this thread runs are counted, tasks done so far given to ``report``
        as they finish (if ``wanted``)."""

    def java(self) -> Java | None:
        """The session's JVM where it is this process's (None: Spark Connect's is the server's)."""
        return None


def kind_of(spark: SparkSession) -> SessionKind:
    """What ``spark``'s kind answers: asked once per call, told by its class so that asking never
    needs Connect's libraries on a classic session."""
    return Connect(spark) if type(spark).__module__.startswith("pyspark.sql.connect") else Classic(spark)


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (for the tests, which run on both kinds)."""
    return isinstance(kind_of(spark), Connect)


class Classic(SessionKind):
    """A session of this process's own JVM: it ends only when stopped (its application with it)."""

    driver_is_here = True

    @property
    def id(self) -> str:
        """Its application's id and the session object's: the first answer is kept for as long as
        the object lives, so a session asked again once stopped is still named as it was."""
        known = _CLASSIC_NAMES.get(self.spark)
        if known is None:
            try:
                application = self.spark.sparkContext.applicationId
            except Exception:  # noqa: BLE001 - stopped before it was first named: its context is gone
                application = "stopped"
            known = _CLASSIC_NAMES[self.spark] = f"classic:{application}:{id(self.spark)}"
        return known

    def require_live(self) -> None:
        if self.ended():
            raise SparkUnavailable("this SparkSession was stopped: make a new one (local_session()); "
                                   "nothing was recorded")

    def ended(self, *, ask: bool = False) -> bool:
        try:
            return bool(self.spark.sparkContext._jsc.sc().isStopped())
        except Exception:  # noqa: BLE001 - its gateway is gone too: stopped
            return True

    def unavailable(self, exc: BaseException, *, during: str | None = None, ended: str | None = None,
                    unreachable: str | None = None) -> SparkUnavailable | None:
        if not self.ended():
            return None
        return SparkUnavailable("this SparkSession was stopped: make a new one (local_session()); "
                                + (ended or "nothing was recorded"))

    def shares_files(self) -> bool:
        """A ``local`` master's executors are threads of this process's JVM; a cluster's are not."""
        master = self.spark.conf.get("spark.master") or ""
        return master == "local" or master.startswith("local[")

    def watch_tasks(self, report: Callable[[int], None], wanted: bool) -> ContextManager[None]:
        return _Tracker(self.spark.sparkContext, report, wanted)

    def java(self) -> Java:
        return Java(self.spark._jsparkSession, self.spark._jvm)


_CLASSIC_NAMES: weakref.WeakKeyDictionary[SparkSession, str] = weakref.WeakKeyDictionary()


class Connect(SessionKind):
    """A session of a Spark Connect server's: it ends when stopped, when the server restarts under
    it or times it out, and it cannot take work while its server does not answer."""

    catalog_outlives_process = True

    @property
    def id(self) -> str:
        return f"connect:{self.spark.session_id}"  # type: ignore[attr-defined]

    def require_live(self) -> None:
        if self.ended():
            raise _ended_error(self.spark, "it was stopped, or its server restarted under it")
        try:
            _answer(self.spark)
        except Exception as exc:  # PySpark's and gRPC's own types
            raise self.unavailable(exc) or SparkUnavailable(
                f"the Spark Connect server at {address_of(self.spark)} does not answer as it should "
                f"({_first_line(exc)}): nothing was recorded") from None

    def ended(self, *, ask: bool = False) -> bool:
        if getattr(self.spark, "is_stopped", False) or not ask:
            return bool(getattr(self.spark, "is_stopped", False))
        try:
            self.require_live()
        except SparkUnavailable:
            return True
        return False

    def unavailable(self, exc: BaseException, *, during: str | None = None, ended: str | None = None,
                    unreachable: str | None = None) -> SparkUnavailable | None:
        why = _said_ended(self.spark, exc)
        if why is not None:
            _stop_retrying(self.spark)
            return _ended_error(self.spark, why, ended, during)
        if _unreachable(exc):
            _stop_retrying(self.spark)
            stopped = f"stopped answering while {during}" if during else "does not answer"
            return SparkUnavailable(f"the Spark Connect server at {address_of(self.spark)} {stopped} "
                                    f"({_first_line(exc)}): "
                                    + (unreachable or "check that it runs, and its address; nothing was recorded"))
        return None

    def on_server(self) -> tuple[str, str | None]:
        return str(self.spark.session_id), getattr(self.spark.client, "_user_id", None) or None  # type: ignore[attr-defined]

    def has_session(self, session_id: str) -> bool | None:
        """One call that changes nothing: a reattach to an operation no session has, which the server
        answers with ``OPERATION_NOT_FOUND`` from a session it has and ``SESSION_NOT_FOUND`` or
        ``SESSION_CLOSED`` otherwise (Spark 3.5 and later)."""
        import uuid as uuids

        import pyspark.sql.connect.proto as pb2

        client = self.spark.client
        request = pb2.ReattachExecuteRequest(session_id=session_id, operation_id=str(uuids.uuid4()))
        user = getattr(client, "_user_id", None)
        if user:
            request.user_context.user_id = user
        try:
            next(iter(client._stub.ReattachExecute(request, metadata=client._builder.metadata(),
                                                   timeout=MASTER_TIMEOUT)), None)
            return True
        except Exception as exc:  # gRPC's own error: its details name the server's error class
            said = _all_said(exc)
            if "SESSION_NOT_FOUND" in said or "SESSION_CLOSED" in said:
                return False
            if "OPERATION_NOT_FOUND" in said or "OPERATION_ABANDONED" in said:
                return True
            return None

    def watch_tasks(self, report: Callable[[int], None], wanted: bool) -> ContextManager[None]:
        return _Handler(self.spark, report, wanted)


class _Handler:
    """A Connect session's progress handler (``registerProgressHandler``, which a classic session
    refuses) while the jobs run: the tasks done in each of its operations, as the server reports
    its stages (the handler is the session's, so calls from another thread's operations are not
    counted)."""

    def __init__(self, spark: SparkSession, report: Callable[[int], None], wanted: bool) -> None:
        self._spark, self._report, self._wanted = spark, report, wanted
        self._thread = threading.get_ident()
        self._done: dict[str, int] = {}

    def __enter__(self) -> None:
        if self._wanted:
            self._spark.registerProgressHandler(self)  # type: ignore[arg-type]

    def __call__(self, stages: Any = None, inflight_tasks: int = 0, operation_id: str | None = None,
                 done: bool = False, **_: Any) -> None:
        if threading.get_ident() != self._thread or not stages:
            return
        self._done[operation_id or ""] = sum(stage.num_completed_tasks for stage in stages)
        self._report(sum(self._done.values()))

    def __exit__(self, *exc: object) -> None:
        if self._wanted:
            self._spark.removeProgressHandler(self)  # type: ignore[arg-type]


class _Tracker:
    """A classic session's job group for the jobs run inside (set with ``interruptOnCancel``, so
    that cancelling the group, as PySpark's own Ctrl-C handler cancels every job, stops the tasks'
    threads, not only the scheduler), and, if progress is wanted, a thread that polls the status
    tracker for the tasks its jobs finished."""

    def __init__(self, context: Any, report: Callable[[int], None], wanted: bool, every: float = 0.2) -> None:
        self._context, self._report, self._wanted, self._every = context, report, wanted, every
        self._group = f"retention-ledger-vacuum-{time.monotonic_ns()}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> None:
        self._context.setJobGroup(self._group, "retention-ledger vacuum", interruptOnCancel=True)
        if self._wanted:
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            tracker = self._context.statusTracker()
            done = 0
            for job_id in tracker.getJobIdsForGroup(self._group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage:
                        done += stage.numCompletedTasks
            self._report(done)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._wanted:
            self._thread.join()
        self._context.setLocalProperty("spark.jobGroup.id", None)


def _stop_retrying(spark: SparkSession) -> None:
    """Stop the calls PySpark is still retrying in the background for a session whose server has
    gone (its release of each finished query's results, ten minutes of retries each): once the
    server did not answer, or answered that it has no such session, a process whose query had just
    finished when its server died did not exit for ten minutes (Python waits for those threads).
    A retry loop reads its policy's limit at every turn, so the policies they hold are told to stop;
    the session's later calls get fresh copies of them (PySpark's retries, unchanged)."""
    import copy

    with contextlib.suppress(Exception):
        client = spark.client
        policies = client.get_retry_policies()
        client.set_retry_policies([copy.copy(policy) for policy in policies])
        for policy in policies:
            policy.max_retries = 0


def _ended_error(spark: SparkSession, why: str, then: str | None = None, during: str | None = None) -> SparkUnavailable:
    ended = f"ended while {during}" if during else "has ended"
    return SparkUnavailable(f"the Spark Connect session on {address_of(spark)} {ended} ({why}): make a new session "
                            "(local_session(remote=...)) and call again; " + (then or "nothing was recorded"))


def _said_ended(spark: SparkSession, exc: BaseException) -> str | None:
    """Why a Connect session ended, if ``exc`` (or the session itself) says it did; else None."""
    text = _all_said(exc)
    if "SESSION_CHANGED" in text or "incorrect server side session identifier" in text:
        return "its server restarted under it"
    if "SESSION_NOT_FOUND" in text or "SESSION_CLOSED" in text:
        return "its server no longer has it: restarted, or timed it out"
    if any(mark in text for mark in ENDED) or getattr(spark, "is_stopped", False):
        return "it was stopped, or its server restarted under it"
    return None


def _unreachable(exc: BaseException) -> bool:
    """Whether a call ended because its server did not answer: gRPC's own error (or PySpark's
    wrapping of it) with a status code of ``UNAVAILABLE`` (down, refused) or ``DEADLINE_EXCEEDED``."""
    for current in _causes(exc):
        code: object = getattr(current, "_grpc_status_code", None)
        if code is None and callable(getattr(current, "code", None)):
            with contextlib.suppress(Exception):
                code = current.code()  # type: ignore[attr-defined]
        if getattr(code, "name", None) in UNREACHABLE:
            return True
    return False


def _all_said(exc: BaseException) -> str:
    """The text of an error and of every error behind it."""
    said = []
    for current in _causes(exc):
        said.append(f"{type(current).__name__} {current}")
        details = getattr(current, "details", None)
        if callable(details):
            with contextlib.suppress(Exception):
                said.append(str(details()))
    return " ".join(said)


def address_of(spark: SparkSession) -> str:
    """A Connect session's server as a message shows it: the address it was made for (without its
    token, R23), else its host and port."""
    for address, known in list(_CONNECTED.items()):
        if known is spark:
            return shown(address)
    builder = getattr(getattr(spark, "client", None), "_builder", None)
    endpoint = getattr(builder, "endpoint", None)
    return f"sc://{endpoint}" if isinstance(endpoint, str) and endpoint else "its server"


_IN_PROCESS = re.compile(r"local(-cluster)?(\[[^\]]*\])?")


def in_process(remote: str) -> bool:
    """Whether ``remote`` asks PySpark to start a Connect server in this process (``local``,
    ``local[N]``, ``local-cluster[...]``). PySpark itself takes anything that starts with "local"
    for one, so ``localhost:15002`` started a Spark of its own with that as its master."""
    return _IN_PROCESS.fullmatch(remote.strip()) is not None


def shown(remote: str) -> str:
    """A Connect address as a message may show it: without its parameters (``;token=...``), which
    can hold a secret (R23)."""
    address, sep, _ = remote.partition(";")
    return address.rstrip("/") + (";..." if sep else "")


def check_remote(remote: str) -> None:
    """A Connect address (``sc://host:port/;token=...``) that is malformed, or that nothing answers,
    is said at once: gRPC itself retries for ten minutes and then prints a page."""
    from urllib.parse import urlsplit

    usage = "give sc://host:port (or local[N] for a server in this process)"
    parts = urlsplit(remote.split(";", 1)[0])
    if parts.scheme != "sc" or not parts.hostname:
        raise SparkUnavailable(f"{shown(remote)!r} is not a Spark Connect address: {usage}")
    try:
        port = parts.port or 15002
    except ValueError:
        raise SparkUnavailable(f"{shown(remote)!r} is not a Spark Connect address (its port "
                               f"{parts.netloc.rpartition(':')[2]!r} is not a number from 1 to 65535): {usage}") from None
    try:
        socket.create_connection((parts.hostname, port), timeout=MASTER_TIMEOUT).close()
    except OSError as exc:
        raise SparkUnavailable(f"cannot reach the Spark Connect server at {parts.hostname}:{port} "
                               f"({exc.strerror or exc}): check the address, and that the server runs; "
                               "nothing was recorded") from None


QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
"""PySpark's loggers that log each analysis error it raises (a query naming a dropped table, a
column that is not there) at ERROR, with the Java stack trace, to stderr (handlers of their own,
not propagated), before the caller's ``except`` runs: the error itself carries the same message."""


def _quiet_query_context_logs() -> None:
    """Quiet PySpark's query-context loggers as the JVM's are quieted: an error reaches the caller
    as the exception it is, not also as a stack trace on stderr. A level the caller set is kept."""
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        logger = PySparkLogger.getLogger(name)
        if logger.level == logging.WARNING:  # PySpark's own default: nobody chose it
            logger.setLevel(logging.CRITICAL)


def _workers_python() -> None:
    """The Python workers of a Spark this process starts run this interpreter (they import the
    same ``spark_ops``), unless the caller chose one."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _jvm_settings(shuffle_partitions: int, scratch: str | None, conf: Mapping[str, str]) -> dict[str, str]:
    """The settings of a Spark this process starts, a classic session's or an in-process Spark
    Connect server's: no UI and no progress bars, UTC, static partition overwrite, our quiet logs,
    ``scratch`` for Spark's temporary files, the workers kept from the caller's folders (R22);
    then ``conf``, the caller's, over them (Java options added to ours)."""
    settings = {
        **({"spark.local.dir": scratch} if scratch else {}),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.sources.partitionOverwriteMode": "static",
        **conf,
    }
    # Ours go in the *default* Java options, which Spark puts before the extra ones: a user's
    # spark.driver.extraJavaOptions (here or in spark-defaults.conf) is left as it is.
    ours = ["-Duser.timezone=UTC", *([f"-Djava.io.tmpdir={scratch}"] if scratch else [])]
    for side, options in (("driver", [*ours, *_quiet_logs()]), ("executor", ours)):
        key = f"spark.{side}.defaultJavaOptions"
        settings[key] = " ".join([*options, *([conf[key]] if conf.get(key) else [])])
    # The Python workers Spark starts run ``python -m pyspark.daemon`` in the JVM's folder, which is
    # the caller's: without -P, that folder comes first on their import path, and a ``pyarrow.py``
    # there would run in every task (R22). PYTHONSAFEPATH is -P, set as an executor environment
    # variable so it reaches every worker, in local mode and on a cluster.
    settings.setdefault("spark.executorEnv.PYTHONSAFEPATH", "1")
    # Nor from the user's site-packages folder (Python's -s), unless what the workers import lives
    # there. Spark builds the workers' command itself, so -I cannot be given, and its third part
    # must not be: -E (ignore PYTHON* variables) has no variable of its own, Spark needs PYTHONPATH
    # to find pyspark, and -E makes Python ignore PYTHONHASHSEED, which Spark sets so that every
    # worker hashes a text key alike (with -E each worker hashes "a" differently, and a
    # reduceByKey, as the vacuum's sum per table, would send one key's rows to different tasks).
    # -P and -s are what -I adds that can be had: no code from the caller's folders.
    if not _workers_need_user_site():
        settings.setdefault("spark.executorEnv.PYTHONNOUSERSITE", "1")
    return settings


def _workers_need_user_site() -> bool:
    """Whether a module the Python workers import (pyspark, pyarrow, obstore) is installed in the
    user's site-packages (``pip install --user``): then they must keep it on their path."""
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if not user_site:
        return False
    for name in ("pyspark", "pyarrow", "obstore"):
        found = importlib.util.find_spec(name)
        if found is not None and found.origin and os.path.realpath(found.origin).startswith(
                os.path.realpath(user_site) + os.sep):
            return True
    return False


def _quiet_logs() -> list[str]:
    """Our quiet log4j2 settings, unless the user's Spark configuration folder has its own
    (which Spark then reads, as it reads the folder's spark-defaults.conf: never hidden)."""
    folder = os.environ.get("SPARK_CONF_DIR") or \
        (os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else None)
    if folder and os.path.exists(os.path.join(folder, "log4j2.properties")):
        return []
    return [f"-Dlog4j2.configurationFile=file:{resources.files('spark_ops').joinpath('conf', 'log4j2.properties')}"]


def check_master(master: str) -> None:
    """A standalone master (``spark://host:port[,host:port...]``) that no address answers is said
    at once, in one line: Spark itself retries for about a minute and then names no cause."""
    if not master.startswith("spark://"):
        return
    reasons = []
    for where in master[len("spark://"):].split(","):
        host, _, port = where.strip().rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=MASTER_TIMEOUT).close()
            return
        except (OSError, ValueError) as exc:
            reasons.append(f"{where}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}")
    raise SparkUnavailable(f"cannot reach the Spark master {master} ({'; '.join(reasons)}): check the host and "
                           "port, and that the master runs; nothing was recorded")


MASTER_TIMEOUT = 10.0
"""Seconds to wait for a standalone master to accept a connection before saying it cannot be reached."""

_CAUSES = ("All masters are unresponsive", "Failed to connect to master", "Could not connect to",
           "Connection refused", "UnknownHostException")


def _cause_in(log: str | None) -> str | None:
    """The first line of the JVM's log that says why Spark did not start, if it names one we know."""
    if not log or not os.path.exists(log):
        return None
    with open(log, errors="replace") as handle:
        for line in handle:
            if any(cause in line for cause in _CAUSES):
                return line.strip()
    return None


@contextlib.contextmanager
def _stderr_to(path: str) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` while the JVM starts: the JVM inherits it and keeps
    it, and ours is put back afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def check_java() -> str:
    """The java executable Spark will start (as ``spark-class`` finds it), if it is 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    where = f"in JAVA_HOME ({home})" if home else "on PATH"
    if not java or not os.access(java, os.X_OK):
        raise JavaNotFound(f"Spark needs Java {MIN_JAVA} or newer and there is no java {where}; install one "
                           "(e.g. apt-get install openjdk-17-jre-headless) or point JAVA_HOME at one")
    try:
        shown = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError) as exc:
        raise JavaNotFound(f"Spark needs Java {MIN_JAVA} or newer, and {java} does not run: {exc}") from None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', shown)
    major = 0 if found is None else int(found.group(2) if found.group(1) == "1" else found.group(1))
    if major < MIN_JAVA:
        raise JavaNotFound(f"Spark needs Java {MIN_JAVA} or newer, and {java} is "
                           f"{'Java ' + str(major) if major else 'of an unknown version'}; install a newer one "
                           "or point JAVA_HOME at one")
    return java


def stop_local_spark() -> None:
    """Stop this process's SparkContext and make sure its JVM is gone, even if it was still
    starting (an interrupted start leaves a JVM that Python has no handle on yet)."""
    context = SparkContext._active_spark_context
    if context is not None:
        with contextlib.suppress(Exception):
            context.stop()
    kill_local_jvms()


def kill_local_jvms() -> None:
    """Kill the JVMs this process started (its children named java, Linux: read from /proc), without
    talking to them (for an interrupt that must not wait on py4j). Their Python workers exit when
    their JVM does."""
    me = os.getpid()
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError):  # gone meanwhile (ProcessLookupError), or not ours to kill
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read().decode(errors="replace")
                name = stat[stat.index("(") + 1: stat.rindex(")")]
                if int(stat[stat.rindex(")") + 2:].split()[1]) == me and name == "java":
                    os.kill(int(entry), signal.SIGKILL)
