"""How a vacuum's tasks run inside Spark, the same on a classic session and a Spark Connect one.

A Connect session has no SparkContext: no RDD, no broadcast, no status tracker (R24). What
both kinds have is the DataFrame, so each of the vacuum's jobs is one: a row a task
(``spark.range(0, n, numPartitions=n)``) mapped through ``run`` by ``mapInArrow``, given the
function of ``tasks`` to run and the items cut in ``n`` slices. Task ``i`` runs the function on
slice ``i`` and sends back everything it yields pickled, a binary row each, then a ``Done``.

``Done`` carries the task's attempt number, which is how the driver learns that an attempt
failed and was retried (it may have left a receipt part that no result names), where the status
tracker used to tell it. Spark's ``TaskContext`` is read from the module the Python worker has
already loaded: this package imports no pyspark (R19's contract keeps it usable without Spark,
as the driver uses ``tasks`` itself on an object store).
"""

from __future__ import annotations

import pickle
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

OUTPUT = "out binary"
"""The jobs' output schema: one pickled object a row."""

T = TypeVar("T")


@dataclass(frozen=True)
class Done:
    """A task's last row: which task (its partition) and which attempt of it this was (0: the
    first; more means an earlier attempt failed, or Spark ran the task again)."""
    task: int
    attempt: int


def run(work: Callable[[Sequence[T]], Iterable[Any]], slices: Sequence[Sequence[T]],
        batches: Iterable[Any]) -> Iterator[Any]:
    """``mapInArrow``'s function: each row of the task's input is the number of a slice, and
    ``work`` runs on that slice; what it yields goes back pickled, with a ``Done`` at the end."""
    for batch in batches:
        for number in batch.column(0).to_pylist():
            yield _rows(work(slices[number]))
    yield _rows((), done=True)


def ask(question: Callable[[], Iterable[Any]], batches: Iterable[Any]) -> Iterator[Any]:
    """``mapInArrow``'s function for a question every task answers once, whatever its rows (the
    pre-flight check: one task a core, each asked whether its executor can run the vacuum)."""
    for _ in batches:
        pass
    yield _rows(question(), done=True)


def _rows(values: Iterable[Any], *, done: bool = False) -> Any:
    """A record batch of ``values`` pickled (and the task's ``Done`` after them, if it ends here)."""
    import pyarrow as pa

    rows = [pickle.dumps(v) for v in values]
    if done:
        task, attempt = _this_task()
        rows.append(pickle.dumps(Done(task, attempt)))
    return pa.RecordBatch.from_arrays([pa.array(rows, pa.binary())], names=["out"])


def _this_task() -> tuple[int, int]:
    """This task's partition and attempt number, from the worker's ``TaskContext`` ((0, 0) outside
    Spark, as when a test runs ``run`` itself)."""
    module = sys.modules.get("pyspark.taskcontext")
    context = module.TaskContext.get() if module is not None else None
    return (0, 0) if context is None else (context.partitionId(), context.attemptNumber())
