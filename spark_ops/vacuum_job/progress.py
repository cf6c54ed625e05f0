"""A vacuum's progress: tasks done out of tasks in all, while its Spark jobs run.

The count comes from Spark, as tasks finish, not from the jobs' outputs: those arrive only when a
job ends, and most vacuums are one job, so the CLI's bar would jump from 0 to 100%. Where it
comes from depends on the kind of session (``session.SessionKind.watch_tasks``), because PySpark
4.3 offers each kind one source and not the other's:

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
from typing import Callable, Iterator

from pyspark.sql import SparkSession

from ..session import kind_of

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
    with kind_of(spark).watch_tasks(watch.report, progress is not None):
        yield watch
    watch.report(watch.total)
