"""Which backend a ledger's address names: a path is SQLite (the embedded default, one file per
tenant), a ``postgresql://`` URL or a libpq connection string PostgreSQL (one database or schema
per tenant, shared by hosts: R18). The PostgreSQL driver is imported only for a text that may be
one of those (a URL, or a text holding an ``=``)."""

from __future__ import annotations

import os

from .contract import MAX_CLOCK_SKEW, NoLedgerYet, Store, postgres_scheme


def is_url(where: str) -> bool:
    """Whether ``where`` names a PostgreSQL ledger (else it is a SQLite path): a ``postgresql://``
    URL, or a text libpq reads as a connection string, or would but cannot (``pgaddress.is_conninfo``:
    that one is refused, never made a file). Only a text holding an ``=`` can be one."""
    if postgres_scheme(where):
        return True
    if "=" not in where:
        return False
    from .pgaddress import is_conninfo
    return is_conninfo(where)


def shown(where: str) -> str:
    """``where`` as a message may show it: a PostgreSQL address without its password (R23); a
    path as it is. An address that cannot be read is refused here, showing nothing of it."""
    if not is_url(where):
        return where
    from .pgaddress import parse
    return parse(where).shown


def open_store(where: str, *, create: bool = True, synchronous: str = "FULL", busy_timeout: float = 10.0,
               max_skew: int | None = MAX_CLOCK_SKEW) -> Store:
    """The store at ``where``, created there unless ``create=False`` (then ``LedgerNotFound``).
    ``synchronous`` is SQLite's; a PostgreSQL ledger is as durable as its server's
    ``synchronous_commit``, and holds every host to its clock within ``max_skew`` microseconds
    (None: any clock; one SQLite file has one host's)."""
    if is_url(where):
        from .postgres import PostgresStore
        return PostgresStore(where, create=create, busy_timeout=busy_timeout, max_skew=max_skew)
    if not create and where != ":memory:" and not os.path.exists(where):
        raise NoLedgerYet(f"there is no ledger at {where}: check the path (nothing was created)")
    from .sqlite import SQLiteStore
    return SQLiteStore(where, synchronous=synchronous, busy_timeout=busy_timeout)
