"""The vacuum's Spark jobs, as DataFrame operations: the same on a classic session and a Spark
Connect one (R24), which has no SparkContext, so no RDD, broadcast or status tracker.

A job is the items cut in slices, a task a slice: ``spark.range(0, n, numPartitions=n)`` (one
row a task, the slice's number) mapped through ``spark_ops.executor.on_spark.run`` by
``mapInArrow``, which runs a function of ``spark_ops.executor.tasks`` on the slice and sends back
what it yields, pickled, and a ``Done`` with the task's attempt number. The items travel inside
the function, as the items of an RDD's slices travelled in its tasks: they are the plan's records
(a few per table), never file lists, so the driver's memory depends on the number of items, not
of files (R20).
"""

from __future__ import annotations

import functools
import pickle
from typing import Any, Callable, Iterable, Sequence, TypeVar

from pyspark.sql import DataFrame, SparkSession

from ..executor import on_spark

T = TypeVar("T")

PROBE_ROWS = 1 << 16
"""Rows of the pre-flight's DataFrame: Spark cuts a DataFrame of this many into as many partitions
as it runs tasks at once (its default parallelism), so one task a core asks its executor."""


class Jobs:
    """The Spark jobs of one vacuum on one session; ``retried`` turns True once any task of them
    was a second attempt (the first failed, and may have left a receipt part no result names)."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self.retried = False

    def run(self, work: Callable[[Sequence[T]], Iterable[Any]], items: Sequence[T], tasks: int,
            sink: Callable[[Any], bool] | None = None) -> list[Any]:
        """What ``work`` yields on each of at most ``tasks`` slices of ``items`` (in order, as
        ``parallelize`` cuts them), each slice in a task of its own. ``sink``: each value is offered
        to it as it arrives, and those it takes (returns True) are not kept: the rows are then
        streamed to this process (``toLocalIterator``), never held whole (a dry run's listing)."""
        n = max(1, min(len(items), tasks))
        slices = tuple(tuple(items[i * len(items) // n:(i + 1) * len(items) // n]) for i in range(n))
        frame = self._spark.range(0, n, numPartitions=n).mapInArrow(
            functools.partial(on_spark.run, work, slices), on_spark.OUTPUT)
        values, done = _collect(frame, sink)
        self.retried = self.retried or any(d.attempt for d in done)
        return values


def ask(spark: SparkSession, question: Callable[[], Iterable[Any]]) -> tuple[list[Any], int]:
    """Every answer to ``question``, asked once in each of a default DataFrame's tasks, and how
    many tasks that was."""
    frame = spark.range(0, PROBE_ROWS).mapInArrow(functools.partial(on_spark.ask, question), on_spark.OUTPUT)
    values, done = _collect(frame)
    return values, len(done)


def _collect(frame: DataFrame, sink: Callable[[Any], bool] | None = None) -> tuple[list[Any], list[on_spark.Done]]:
    """A job's rows unpickled: what its tasks sent back (but what ``sink`` took), and their ``Done`` rows."""
    values: list[Any] = []
    done: list[on_spark.Done] = []
    for row in frame.collect() if sink is None else frame.toLocalIterator():
        value = pickle.loads(row[0])
        if isinstance(value, on_spark.Done):
            done.append(value)
        elif sink is None or not sink(value):
            values.append(value)
    return values, done
