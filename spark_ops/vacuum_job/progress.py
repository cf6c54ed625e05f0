"""A vacuum's progress, from Spark's status tracker: tasks done out of tasks in all."""

from __future__ import annotations

import threading
from typing import Any, Callable

Progress = Callable[[int, int], None]
"""Called with (tasks done, tasks in all) while the executors work."""


class ProgressWatcher:
    """Polls Spark's status tracker and reports task counts of the vacuum's job."""

    def __init__(self, context: Any, group: str, progress: Progress, total: int, every: float = 0.2) -> None:
        self._context, self._group, self._progress, self._every = context, group, progress, every
        self._total = total  # known up front: the tracker only sees a job's stages once it starts
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self._every):
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
        self._progress(min(done, self._total), self._total)

    def expect(self, more: int) -> None:
        """A job decided on the way (the second purge job) adds its tasks to the total."""
        self._total += more

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        self._report()


def failed_attempts(context: Any, group: str) -> int | None:
    """How many task attempts of the group's jobs failed (and were retried, or failed the job);
    None when the tracker no longer knows one of its jobs or stages (then assume some did)."""
    tracker = context.statusTracker()
    failed = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        if job is None:
            return None
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is None:
                return None
            failed += stage.numFailedTasks
    return failed
