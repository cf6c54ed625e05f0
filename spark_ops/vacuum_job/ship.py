"""The driver ships the executors their code, and asks them first whether they can run it (R19).

A cluster's executors have PySpark, pyarrow and (for object stores) obstore; they need not
have retention-ledger. So the driver zips what they run (``spark_ops.executor``, which imports
nothing of the ledger, the ``spark_ops`` package's small ``__init__``, and ``vacuum_work``, the
standard-library records of a vacuum) and adds it to the session once, as a Python artifact
(``SparkSession.addArtifacts(..., pyfile=True)``: on a classic session PySpark 4 makes that
``addPyFile``, on a Spark Connect one it uploads the zip to the server, which puts it on the
path of that session's Python workers). The functions given to Spark are that package's, by
reference, so an executor imports exactly that.

Before the ledger records anything, the session is asked whether it still answers as itself
(``SessionKind.require_live``: every vacuum, since a server restarted under a session, or down, takes
no work), and a small job asks every executor whether it can do the work: import what it needs,
and see the warehouse the ledger's files are in, by reading back a file this process wrote under
the root (``executor.probe``: a folder of the root's name is not enough, as a server in another
mount sees an empty one). A vacuum whose session or executors cannot run it says so in one line
(``SparkUnavailable``) with nothing recorded, instead of failing in the middle with a hundred-line
traceback after its watermarks are in the log. The executors are asked once per session and
warehouse root (``SessionKind.id``: a restarted server's sessions are new ones). The same
job says how many tasks Spark runs at once (its tasks are as many as a default DataFrame has
partitions), which the vacuum sizes its jobs by.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import io
import os
import re
import shutil
import sys
import tempfile
import threading
import zipfile
from importlib import resources

from pyspark.sql import SparkSession

from ..executor import tasks
from ..executor import probe
from ..executor.storage import StoreError, Unsafe
from ..session import SparkUnavailable, check_arrow_jobs, kind_of
from . import jobs

_SHIPPED: set[str] = set()
"""Sessions (``session_key``) that have the executor package."""
_CHECKED: set[tuple[str, str]] = set()
"""(session, root) of the pre-flight checks that passed."""
_CORES: dict[str, int] = {}
"""Tasks each session runs at once, as its last pre-flight found."""
_LOCK = threading.Lock()
_ARCHIVE: list[str] = []
"""The zip, written once a process (in a temporary folder removed when the process ends: a
classic session's file server serves it from there for as long as the session lives)."""


def ship(spark: SparkSession) -> None:
    """Put ``spark_ops.executor`` on every executor's path, once per session."""
    key = kind_of(spark).id
    with _LOCK:
        if key in _SHIPPED:
            return
        try:
            spark.addArtifacts(_archive(), pyfile=True)
        except Exception as exc:  # a server that takes no Python artifacts
            raise kind_of(spark).unavailable(exc) or SparkUnavailable(f"Spark did not take the vacuum's executor code: {_python_error(exc)}; nothing "
                                   "was recorded (the server must accept Python artifacts: "
                                   "SparkSession.addArtifacts(..., pyfile=True))") from None
        _SHIPPED.add(key)


def _archive() -> str:
    """The executor package as a zip file, named by its content (so that a session never holds
    two different archives of one name)."""
    if not _ARCHIVE:
        data = io.BytesIO()
        with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, text in executor_files():
                archive.writestr(name, text)
        folder = tempfile.mkdtemp(prefix="retention-ledger-executor-")
        atexit.register(shutil.rmtree, folder, True)
        path = os.path.join(folder, f"retention_ledger_executor_{hashlib.sha256(data.getvalue()).hexdigest()[:16]}.zip")
        with open(path, "wb") as out:
            out.write(data.getvalue())
        _ARCHIVE.append(path)
    return _ARCHIVE[0]


def preflight(spark: SparkSession, root: str) -> int:
    """``SparkUnavailable`` in one line if this driver (``check_arrow_jobs``), the session
    (``require_live``: it must still answer, as itself) or an executor cannot run a vacuum of
    ``root``; else how many tasks Spark runs at once. Asks the executors once per session and root
    (one small task a core, each reading back a probe this process wrote under the root), and the
    session every time: what is remembered is remembered by the session's own id and its server's
    (``SessionKind.id``), so it never outlives a server restart, and a session that ended is refused
    here, before anything is recorded, however often it vacuumed before."""
    check_arrow_jobs()  # the driver's side of the jobs: PySpark's own libraries for mapInArrow
    kind = kind_of(spark)
    kind.require_live()
    key = kind.id
    ship(spark)
    if (key, root) not in _CHECKED:
        _CORES[key] = _local_cores(spark) if _own_python_here(spark) else _ask_executors(spark, root)
        _CHECKED.add((key, root))
    return _CORES[key]


def _ask_executors(spark: SparkSession, root: str) -> int:
    """How many tasks Spark runs at once, once every executor said it can run the vacuum."""
    try:
        with probe.leave(root) as left:
            answers, cores = jobs.ask(spark, functools.partial(tasks.preflight, root, left.relative, left.token))
    except (OSError, StoreError, Unsafe) as exc:
        raise SparkUnavailable(f"cannot write under the warehouse {root} ({exc}): the vacuum checks that the executors "
                               "see the warehouse by a file this process writes there and they read back; nothing "
                               "was recorded") from None
    except Exception as exc:  # the executor's Python error, wrapped in pages of Java (or of gRPC)
        raise kind_of(spark).unavailable(exc) or SparkUnavailable(
            f"the executors cannot run the vacuum: {_python_error(exc)}; nothing was recorded (README, "
            "\"Running on a cluster\": what executors need)") from None
    problems = sorted(set(answers))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SparkUnavailable(f"the executors cannot run the vacuum: {problems[0]}{more}; nothing was recorded")
    return cores


def _own_python_here(spark: SparkSession) -> bool:
    """Whether the executors run in this driver's JVM (a classic session on a ``local`` master)
    with this very interpreter: then they import what this process imports and see what it sees,
    and asking them is a Spark job (a tenth of a second a vacuum) that can only say yes. Of a
    Connect session's executors nothing is known here (its server may run on this machine, with
    another Python): they are asked."""
    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    return kind_of(spark).shares_files() and os.path.realpath(python) == os.path.realpath(sys.executable)


def _local_cores(spark: SparkSession) -> int:
    """Tasks a ``local`` master runs at once, as Spark counts them (its default parallelism)."""
    chosen = spark.conf.get("spark.default.parallelism", None)
    if chosen:
        return max(1, int(chosen))
    found = re.match(r"local\[(\d+|\*)", spark.conf.get("spark.master") or "")
    if found is None:
        return 1
    return (os.cpu_count() or 1) if found.group(1) == "*" else max(1, int(found.group(1)))


def _python_error(exc: BaseException) -> str:
    """The last line of the Python traceback inside a Spark job's failure (what went wrong on
    the executor), or the first line of the failure itself."""
    text = str(exc)
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line and ("Error:" in line or "Exception:" in line) and not line.startswith(("at ", "py4j", "org.")):
            return line[:400]
    return (text.strip().splitlines() or [type(exc).__name__])[0][:400]


def executor_files() -> list[tuple[str, str]]:
    """What executors run, as (name in the archive, source): ``spark_ops.executor`` with the
    ``spark_ops`` package's small ``__init__``, and ``vacuum_work``, the records it takes and gives."""
    package = resources.files("spark_ops")
    found = [("spark_ops/__init__.py", package.joinpath("__init__.py").read_text())]
    for home, folder in (("spark_ops/executor", package.joinpath("executor")), ("vacuum_work", resources.files("vacuum_work"))):
        found += [(f"{home}/{e.name}", e.read_text()) for e in sorted(folder.iterdir(), key=lambda e: e.name)
                  if e.name.endswith(".py")]
    return found
