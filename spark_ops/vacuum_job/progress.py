"""A vacuum's progress: tasks done out of tasks in all, while its Spark jobs run.

The count comes from Spark, as tasks finish, not from the jobs' outputs: those arrive only when a
job ends, and most vacuums are one job, so the CLI's bar would jump from 0 to 100%. Where it
comes from depends on the kind of session, because PySpark 4.3 offers each kind one source and
not the other's:

* a Spark Connect session: a progress handler (``SparkSession.registerProgressHandler``, which
  a classic session refuses with ``ONLY_SUPPORTED_WITH_SPARK_CONNECT``), called with the stages
  of the running operation as the server reports them;
* a classic session: Spark's status tracker, polled, for the jobs of the vacuum's job group
  (set with ``interruptOnCancel``, so that cancelling the group, as PySpark's own Ctrl-C
  handler cancels every job, stops the tasks' deleting threads, not only the scheduler).

Either way the count only ever reports tasks that finished; when every job has ended, the last
report is the total.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator

from pyspark.sql import SparkSession

from ..session import is_connect

Progress = Callable[[int, int], None]
"""Called with (tasks done, tasks in all) while the executors work."""


class Watch:
    """What a vacuum's jobs tell the progress report: ``expect`` a job decided on the way (the
    second purge job) adds its tasks to the total."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self._progress, self.total = progress, total
        self._lock = threading.Lock()
        self._done = 0

    def expect(self, more: int) -> None:
        with self._lock:
            self.total += more

    def report(self, done: int) -> None:
        """Tasks done so far (as Spark counts them; never more than the total, never fewer than before)."""
        with self._lock:
            self._done = max(self._done, min(done, self.total))
            done, total = self._done, self.total
        if self._progress is not None:
            self._progress(done, total)


@contextlib.contextmanager
def watching(spark: SparkSession, progress: Progress | None, total: int) -> Iterator[Watch]:
    """Reports the progress of the Spark jobs run inside: (0, total) at once, as tasks finish while
    they run, and (total, total) when every one has ended."""
    watch = Watch(progress, total)
    watch.report(0)
    source = _Handler if is_connect(spark) else _Tracker
    with source(spark, watch, progress is not None):
        yield watch
    watch.report(watch.total)


class _Handler:
    """A Connect session's progress handler while the vacuum's jobs run: the tasks done in each of
    its operations (the handler is the session's, so calls from another thread's operations are
    not counted)."""

    def __init__(self, spark: SparkSession, watch: Watch, wanted: bool) -> None:
        self._spark, self._watch, self._wanted = spark, watch, wanted
        self._thread = threading.get_ident()
        self._done: dict[str, int] = {}

    def __enter__(self) -> _Handler:
        if self._wanted:
            self._spark.registerProgressHandler(self)  # type: ignore[arg-type]
        return self

    def __call__(self, stages: Any = None, inflight_tasks: int = 0, operation_id: str | None = None,
                 done: bool = False, **_: Any) -> None:
        if threading.get_ident() != self._thread or not stages:
            return
        self._done[operation_id or ""] = sum(stage.num_completed_tasks for stage in stages)
        self._watch.report(sum(self._done.values()))

    def __exit__(self, *exc: object) -> None:
        if self._wanted:
            self._spark.removeProgressHandler(self)  # type: ignore[arg-type]


class _Tracker:
    """A classic session's job group for the vacuum's jobs, and, if progress is wanted, a thread
    that polls the status tracker for the tasks its jobs finished."""

    def __init__(self, spark: SparkSession, watch: Watch, wanted: bool, every: float = 0.2) -> None:
        self._context, self._watch, self._wanted, self._every = spark.sparkContext, watch, wanted, every
        self._group = f"retention-ledger-vacuum-{time.monotonic_ns()}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Tracker:
        self._context.setJobGroup(self._group, "retention-ledger vacuum", interruptOnCancel=True)
        if self._wanted:
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._report()

    def _report(self) -> None:
        tracker = self._context.statusTracker()
        done = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    done += stage.numCompletedTasks
        self._watch.report(done)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._wanted:
            self._thread.join()
        self._context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
