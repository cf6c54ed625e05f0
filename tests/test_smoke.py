from ledger import Ledger


def test_open_create_drop_undrop_round_trip(ledger: Ledger) -> None:
    created = ledger.create_table("sales.orders")
    ledger.drop_table("sales.orders")
    restored = ledger.undrop_table("sales.orders")
    assert restored.id == created.id and restored.is_live
    assert ledger.event_count() == 3
