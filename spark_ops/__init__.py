"""Spark side of retention-ledger."""
