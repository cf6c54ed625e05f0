"""The Spark side of retention-ledger: tables on ledger-assigned locations, and the vacuum.

    spark = local_session()
    write_table(df, ledger, "sales.orders")
    report = vacuum(spark, ledger, retention="7d")
"""

from .session import local_session
from .tables import read_table, write_table
from .vacuum_job import InstanceReport, VacuumReport, vacuum

__all__ = ["local_session", "read_table", "write_table", "vacuum", "VacuumReport", "InstanceReport"]
