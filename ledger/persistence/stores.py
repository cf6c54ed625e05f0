"""Which backend a ledger's address names: a path is SQLite (the embedded default, one file per
tenant), a ``postgresql://`` URL PostgreSQL (one database or schema per tenant, shared by hosts:
R18). The PostgreSQL driver is imported only for a URL."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from .contract import POSTGRES_SCHEMES, NoLedgerYet, Store


def is_url(where: str) -> bool:
    """Whether ``where`` names a PostgreSQL ledger (else it is a SQLite path)."""
    return "://" in where and urlsplit(where).scheme in POSTGRES_SCHEMES


def open_store(where: str, *, create: bool = True, synchronous: str = "FULL", busy_timeout: float = 10.0) -> Store:
    """The store at ``where``, created there unless ``create=False`` (then ``LedgerNotFound``).
    ``synchronous`` is SQLite's; a PostgreSQL ledger is as durable as its server's
    ``synchronous_commit``."""
    if is_url(where):
        from .postgres import PostgresStore
        return PostgresStore(where, create=create, busy_timeout=busy_timeout)
    if not create and where != ":memory:" and not os.path.exists(where):
        raise NoLedgerYet(f"there is no ledger at {where}: check the path (nothing was created)")
    from .sqlite import SQLiteStore
    return SQLiteStore(where, synchronous=synchronous, busy_timeout=busy_timeout)
