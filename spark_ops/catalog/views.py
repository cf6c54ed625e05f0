"""What a view in Spark's catalog is, and whose: the records the SQL path (``spark_catalog``) and the
JVM speed-up (``jvm_catalog``) both put, so that neither imports the other's."""

from __future__ import annotations

import hashlib
import re

import attrs

from .text import VersionFiles

MARK = "retention_ledger"
"""The property that names the ledger a view shows (its address, without a password)."""
HOLDER = "retention_ledger_holder"
"""The property that says which attachment made a view and which pin holds what it shows."""
TEMPLATE = "retention_ledger_template"


@attrs.frozen
class ViewOwner:
    """Whose a view is: the ledger (a digest of its address), the attachment that made it (one
    per session, per ``attach``), the pin that holds what it shows (None: nothing pinned, a
    table written before versions), and, on Spark Connect, the session the attachment is in (its
    id, and a digest of its user: the server keys a session by both) so that another client can
    ask the server whether it still has that session (None: a classic session, or a view made
    before 0.9.1)."""
    ledger: str
    attachment: str
    pin: str | None
    session: str | None = None
    user: str | None = None

    def text(self) -> str:
        where = f":{self.session}:{self.user or '-'}" if self.session else ""
        return f"{self.ledger}:{self.attachment}:{self.pin or '-'}{where}"

    @classmethod
    def parse(cls, text: str | None) -> ViewOwner | None:
        found = _HOLDER.fullmatch(text or "")
        if found is None:
            return None
        ledger, attachment, pin, session, user = found.groups()
        return cls(ledger, attachment, None if pin == "-" else pin, session, None if user in (None, "-") else user)


_HOLDER = re.compile(r"([0-9a-f]+):([0-9a-f]+):([0-9a-f]+|-)(?::([0-9a-f]{32}):([0-9a-f]+|-))?")


def user_digest(user: str | None) -> str | None:
    """A Connect user id as ``ViewOwner`` keeps it (a digest: safe in any SQL text); None for none."""
    return hashlib.sha256(user.encode()).hexdigest()[:16] if user else None


def ledger_digest(address: str) -> str:
    """A ledger's address as ``ViewOwner`` keeps it: short, and safe in any SQL text."""
    return hashlib.sha256(address.encode()).hexdigest()[:16]


@attrs.frozen
class View:
    """A view to put: ``database.name`` over ``text``, whose columns have the recorded
    ``schema`` (None: not recorded), held by ``pin``; ``files``: the version's files that ``text``
    reads, which SQL may read through a table of the recorded schema instead (``_Sql``)."""
    database: str
    name: str
    text: str
    schema: str | None
    pin: str | None
    files: VersionFiles | None = None

    @property
    def key(self) -> str:
        return f"{self.database}.{self.name}"
