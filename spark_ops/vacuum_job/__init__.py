"""The vacuum on Spark, in files that say which side of the wire they run on.

Driver side (this package): ``driver`` (the order, the jobs, the record), ``report`` (what
comes back to the caller), ``listing`` (a dry run's dataset), ``progress`` (the progress
bar's source), ``ship`` (the executors' code, and the pre-flight check). Executor side:
``spark_ops.executor``, which imports nothing of the ledger (R19).
"""

from .budget import SHARES_PER_CORE
from .driver import LISTING_THRESHOLD_DEFAULT, sweep, vacuum, work_of
from .progress import Progress
from .report import ItemReport, VacuumReport, build_report

__all__ = ["vacuum", "sweep", "work_of", "build_report", "VacuumReport", "ItemReport", "Progress",
           "LISTING_THRESHOLD_DEFAULT", "SHARES_PER_CORE"]
