"""Table names, database names, table ids and watermark/retention scopes.

Name policy (documented in README.md, enforced here and nowhere else):

* A table name is ``database.table``: exactly two identifiers joined by one dot.
* An identifier starts with a letter or underscore, continues with letters,
  digits or underscores, and is 1 to 64 characters long (ASCII only).
* Names are case-insensitive and stored in lower case, so ``Sales.Orders`` and
  ``sales.orders`` are the same table, as in most SQL engines' unquoted names.

Anything else is refused with ``InvalidName`` rather than quietly mangled: a
name that round-trips differently through the ledger and the warehouse is a
bug waiting for an audit.
"""

from __future__ import annotations

import functools
import re

import attrs

from .errors import InvalidName, InvalidScope

MAX_IDENTIFIER = 64
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,%d}\.[A-Za-z_][A-Za-z0-9_]{0,%d}" % (MAX_IDENTIFIER - 1,
                                                                                     MAX_IDENTIFIER - 1))
"""A valid ``database.table`` in one match: what every command that names a table checks first. The
part-by-part checks (and their messages) run only for a name this refuses."""
_TABLE_ID = re.compile(r"[0-9a-f]{16}")
MAX_RUN_ID = 100
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")


def database_name(text: object) -> str:
    """Validate and normalise a database name."""
    return _identifier(text, "database name")


def table_name(text: object) -> str:
    """Validate and normalise ``database.table``; returns the lower-case form."""
    if isinstance(text, str) and _TABLE_NAME.fullmatch(text):
        return text.lower()
    if not isinstance(text, str):
        raise InvalidName(f"a table name must be a string like 'sales.orders', got {type(text).__name__}")
    parts = text.split(".")
    if len(parts) != 2:
        raise InvalidName(
            f"table name {_shown(text)} must be 'database.table' (two identifiers and one dot)"
        )
    return f"{_identifier(parts[0], 'database part of ' + _shown(text))}." \
           f"{_identifier(parts[1], 'table part of ' + _shown(text))}"


def database_of(name: str) -> str:
    """The database part of an already-normalised table name."""
    return name.split(".", 1)[0]


def table_id(text: object) -> str:
    """Validate a ledger-assigned table id (16 lower-case hex digits)."""
    if not isinstance(text, str) or not _TABLE_ID.fullmatch(text.strip().lower()):
        raise InvalidName(f"{_shown(text)} is not a table id (ids are 16 hex digits, see show-dropped)")
    return text.strip().lower()


def run_id(text: object) -> str:
    """Validate a vacuum run id chosen by the caller: it is shown in reports, history and lease
    messages, so it is plain text (letters, digits, ``.``, ``_``, ``:``, ``-``), kept as given."""
    if not isinstance(text, str) or not 0 < len(text) <= MAX_RUN_ID or not _RUN_ID.fullmatch(text):
        raise InvalidName(f"{_shown(text)} is not a vacuum run id: use 1 to {MAX_RUN_ID} ASCII letters, "
                          "digits, '.', '_', ':' or '-', starting with a letter or digit")
    return text


def _identifier(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise InvalidName(f"{what} must be a string, got {type(text).__name__}")
    if not text:
        raise InvalidName(f"{what} is empty")
    if len(text) > MAX_IDENTIFIER:
        raise InvalidName(f"{what} is {len(text)} characters long; the limit is {MAX_IDENTIFIER}")
    if not _IDENTIFIER.fullmatch(text):
        raise InvalidName(
            f"{what} {_shown(text)} is not an identifier: use ASCII letters, digits and "
            "underscores, not starting with a digit"
        )
    return text.lower()


def _shown(text: object) -> str:
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."


@attrs.frozen
class Scope:
    """Where a watermark or a retention applies: the whole ledger, a database, or one instance.

    Written as text: ``ledger``, ``database:sales``, ``table:<id>``.
    """

    kind: str
    key: str = ""

    @classmethod
    def database(cls, name: str) -> Scope:
        return cls("database", database_name(name))

    @classmethod
    def table(cls, id_: str) -> Scope:
        return cls("table", table_id(id_))

    @classmethod
    def parse(cls, value: Scope | str | None) -> Scope:
        """Accept a Scope, None (the whole ledger), or its text form."""
        if value is None:
            return LEDGER
        if isinstance(value, Scope):  # built by hand, perhaps: check it like text
            return _parse_scope_text(str(value))
        if not isinstance(value, str):
            raise InvalidScope(f"a scope must be text like 'database:sales', got {type(value).__name__}")
        return _parse_scope_text(value)

    def __str__(self) -> str:
        return self.kind if self.kind == "ledger" else f"{self.kind}:{self.key}"


@functools.lru_cache(maxsize=4096)  # scopes are few and immutable; pipelines pass the same text often
def _parse_scope_text(value: str) -> Scope:
    kind, colon, key = value.partition(":")
    kind = kind.strip().lower()
    try:
        if kind == "ledger" and not colon:
            return LEDGER
        if kind == "database" and key:
            return Scope.database(key)
        if kind == "table" and key:
            return Scope.table(key)
    except InvalidName as exc:
        raise InvalidScope(f"scope {_shown(value)}: {exc}") from None
    raise InvalidScope(
        f"scope {_shown(value)} is not one of 'ledger', 'database:<name>', 'table:<id>'"
    )


LEDGER = Scope("ledger")
