"""The integrity scrub on Spark: ``scrub(spark, ledger)`` (R27).

    report = scrub(spark, ledger)               # the whole warehouse
    report = scrub(spark, ledger, database="sales")
    report.ok, report.missing, report.resurrected

The ledger says what each location should hold and what must stay gone (``Ledger.plan_scrub``).
The executors list every location in one Spark job and send back a digest of each (``glance_at``),
while the driver makes the ledger's digests of the same locations; where they agree the location
is checked. Only the locations that differ are looked at again with their files, a batch of
locations a job (``vacuum_work.scrub.batches``: the driver holds one batch's looks, never the
warehouse's file list). The jobs are the vacuum's DataFrame jobs, so the same on a classic session
and a Spark Connect one (R24). Then the ledger asks itself again about what was missing and
records one ``ScrubFinished``. Nothing in the warehouse is deleted or changed: the
one file written is the pre-flight's probe, under the ledger's own scratch folder and removed at
once, the first time a session scrubs or vacuums a root (R19: an executor that does not see the
warehouse must not report every file missing). A scrub stopped before its end records nothing.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from vacuum_work.scrub import Finding, batches

from ledger import Ledger

from .executor import scrub as on_executor
from .session import kind_of
from .vacuum_job import ship
from .vacuum_job.jobs import Jobs

if TYPE_CHECKING:
    from ledger.audit.scrub import ScrubReport

BATCH_FILES = 50_000
"""Files a Spark job of the second look ships, about: the driver holds one job's looks (under 3
bytes a file, packed, and a pickled copy on its way to Spark) and the findings, so its memory stays
flat from thousands of files to millions. Two jobs in flight took no less time on two cores and
held two batches."""


def scrub(spark: SparkSession, ledger: Ledger, *, database: str | None = None) -> ScrubReport:
    """Check the warehouse (or ``database``) against the ledger and record what was found: every
    file a readable, pinned or restorable version names is there at its size, every file a receipt
    says deleted is still gone. Returns the recorded report (``.ok``, ``.missing``, ``.resurrected``,
    ``.summary()``)."""
    plan = ledger.plan_scrub(database=database)  # bad input ends here, before Spark is asked
    cores = ship.preflight(spark, plan.root)
    jobs = Jobs(spark)
    findings: list[Finding] = []
    try:
        with ThreadPoolExecutor(1) as listing:  # the executors list while the driver reads the ledger
            glanced = listing.submit(jobs.run, functools.partial(on_executor.glance_at, plan.root),
                                     plan.locations(), cores)
            expected = {e.location: e for e in plan.expectations()}
            glances = glanced.result()
        for glance in glances:
            finding = expected[glance.location].confirmed(glance)
            if finding is not None:
                findings.append(finding)
                del expected[glance.location]
        work = functools.partial(on_executor.look_at, plan.root)
        for batch in batches(plan.looks(expected), BATCH_FILES):  # those that differ: looked at again
            findings.extend(jobs.run(work, batch, cores))
    except Exception as exc:  # the session's end, or its server's, in one line
        lost = kind_of(spark).unavailable(exc, during="the scrub ran", ended="nothing was recorded",
                           unreachable="check that it runs; nothing was recorded")
        if lost is None:
            raise
        raise lost from None
    return plan.finish(findings)
