"""An example of testing a pipeline with retention-ledger's pytest plugin (README, "Testing
your pipeline"). It uses only the plugin's fixtures: ``ledger`` (a throw-away ledger on a
manual clock), ``advance_time``, ``warehouse`` and ``spark``. Copy it into your own suite.

The "pipeline" here is a nightly job that rebuilds ``sales.daily`` and drops yesterday's
staging table; the test checks what the ledger promises about the table it dropped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import spark_ops
from ledger.errors import UndropBlocked


def nightly_job(spark, ledger, day: int) -> None:
    """Stage a day's orders, publish the daily totals, drop the staging table."""
    staged = spark.createDataFrame([(day, i, 10.0 * i) for i in range(1, 6)], "day int, order_id int, amount double")
    spark_ops.write_table(staged, ledger, "staging.orders", mode="overwrite")
    orders = spark_ops.read_table(spark, ledger, "staging.orders")
    spark_ops.write_table(orders.groupBy("day").sum("amount"), ledger, "sales.daily", mode="append")
    ledger.drop_table("staging.orders")


def test_a_dropped_staging_table_is_undoable_for_a_week_then_vacuumed_for_good(
        ledger, advance_time, warehouse, spark) -> None:
    ledger.set_retention("ledger", "7d")
    nightly_job(spark, ledger, day=1)
    staging = ledger.dropped_tables(name="staging.orders")[0]
    assert any(warehouse.rglob("*.parquet")), "the job wrote real files under the warehouse"

    # Within the week, a mistaken drop is undone, data and all.
    advance_time("3d")
    assert spark_ops.vacuum(spark, ledger).purged == []  # not due yet: nothing deleted
    ledger.undrop_table("staging.orders")
    assert spark_ops.read_table(spark, ledger, "staging.orders").count() == 5
    ledger.drop_table("staging.orders")

    # A week after the drop, the vacuum deletes it, and the ledger refuses to bring it back.
    files = Path(staging.location)
    assert files.is_relative_to(warehouse) and list(files.rglob("*.parquet"))
    advance_time("8d")
    report = spark_ops.vacuum(spark, ledger)
    assert [i.id for i in report.purged] == [staging.id]
    with pytest.raises(UndropBlocked, match="staging.orders"):
        ledger.undrop_table("staging.orders")
    assert not list(files.rglob("*.parquet"))

    # What the pipeline published is untouched.
    assert spark_ops.read_table(spark, ledger, "sales.daily").first()["sum(amount)"] == 150.0
