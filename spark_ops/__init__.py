"""The Spark side of retention-ledger: tables on ledger-assigned locations, the vacuum, and
the event log as a DataFrame (``read_log``).

    spark = local_session()
    write_table(df, ledger, "sales.orders")
    report = vacuum(spark, ledger, retention="7d")

Names are imported on first use, so that ``spark_ops.executor`` (the confined file
lister, which needs no Spark) can be used without paying for ``import pyspark``.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "local_session": ".session", "JavaNotFound": ".session", "SparkUnavailable": ".session",
    "stop_local_spark": ".session",
    "read_table": ".tables", "write_table": ".tables", "reading": ".tables", "READ_PIN_LEASE": ".tables",
    "vacuum": ".vacuum_job", "sweep": ".vacuum_job", "VacuumReport": ".vacuum_job",
    "ItemReport": ".vacuum_job", "read_log": ".log",
    "erase": ".erase", "scrub": ".scrub",
    "attach": ".catalog.attach", "refresh": ".catalog.attach", "detach": ".catalog.attach",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'spark_ops' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    # Kept here: importing ``.erase`` made the package's ``erase`` that module, not its function.
    globals()[name] = value
    return value
