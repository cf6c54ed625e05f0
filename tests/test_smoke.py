import pytest

from ledger import Ledger

BOTH_SESSIONS = True  # the Spark part runs on a classic session and on a Spark Connect one (R24)


def test_open_create_drop_undrop_round_trip(ledger: Ledger) -> None:
    created = ledger.create_table("sales.orders")
    ledger.drop_table("sales.orders")
    restored = ledger.undrop_table("sales.orders")
    assert restored.id == created.id and restored.is_live
    assert ledger.event_count() == 3


@pytest.mark.spark
def test_write_read_and_the_log_on_spark(ledger: Ledger, spark) -> None:
    from spark_ops import read_log, read_table, write_table

    version = write_table(spark.range(5), ledger, "sales.orders")
    assert version.number == 1 and read_table(spark, ledger, "sales.orders").count() == 5
    assert read_log(spark, ledger).count() == ledger.event_count()
