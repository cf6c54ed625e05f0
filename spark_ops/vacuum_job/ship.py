"""The driver ships the executors their code, and asks them first whether they can run it (R19).

A cluster's executors have PySpark, pyarrow and (for object stores) obstore; they need not
have retention-ledger. So the driver zips what they run (``spark_ops.executor``, which imports
nothing of the ledger, the ``spark_ops`` package's small ``__init__``, and ``vacuum_work``, the
standard-library records of a vacuum) and adds it to the
SparkContext once (``addPyFile``), from where Spark hands it to every executor. The functions
given to Spark are that package's, by reference, so an executor imports exactly that.

Before the ledger records anything, a small job asks every executor whether it can do the
work: import what it needs, see the warehouse. A vacuum whose executors cannot run it says
so in one line (``SparkUnavailable``) with nothing recorded, instead of failing in the middle
with a hundred-line traceback after its watermarks are in the log. Each SparkContext is
asked once per warehouse root.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import zipfile
from importlib import resources
from typing import Any

from ..executor import tasks
from ..session import SparkUnavailable

_SHIPPED: set[str] = set()
"""Application ids of the SparkContexts that have the executor package."""
_CHECKED: set[tuple[str, str]] = set()
"""(application id, root) of the pre-flight checks that passed."""
_LOCK = threading.Lock()


def ship(context: Any) -> None:
    """Put ``spark_ops.executor`` on every executor's path, once per SparkContext."""
    with _LOCK:
        if context.applicationId in _SHIPPED:
            return
        from pyspark import SparkFiles
        # In the SparkContext's own file root: Spark serves it from there and removes it when it stops.
        path = os.path.join(SparkFiles.getRootDirectory(), "retention_ledger_executor.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, text in executor_files():
                archive.writestr(name, text)
        context.addPyFile(path)
        _SHIPPED.add(context.applicationId)


def preflight(context: Any, root: str) -> None:
    """``SparkUnavailable`` in one line if an executor cannot run a vacuum of ``root``; once per
    SparkContext and root. Runs one small task a core."""
    key = (context.applicationId, root)
    if key in _CHECKED:
        return
    ship(context)
    if _own_python_here(context):  # the executors are this process's JVM, this Python, this disk
        _CHECKED.add(key)
        return
    tasks_n = max(1, context.defaultParallelism)
    expected = tasks.root_seen(root)
    try:
        problems = sorted(set(context.parallelize(range(tasks_n), tasks_n)
                              .mapPartitions(functools.partial(tasks.preflight, root, expected)).collect()))
    except Exception as exc:  # py4j wraps the executor's Python error in pages of Java
        raise SparkUnavailable(f"the executors cannot run the vacuum: {_python_error(exc)}; nothing was "
                               "recorded (README, \"Running on a cluster\": what executors need)") from None
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SparkUnavailable(f"the executors cannot run the vacuum: {problems[0]}{more}; nothing was recorded")
    _CHECKED.add(key)


def _own_python_here(context: Any) -> bool:
    """Whether the executors run in this driver's JVM (a ``local`` master) with this very interpreter:
    then they import what this process imports and see what it sees, and asking them is a Spark job
    (a tenth of a second a vacuum) that can only say yes."""
    master = context.master
    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    return (master == "local" or master.startswith("local[")) and os.path.realpath(python) == \
        os.path.realpath(sys.executable)


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

