"""A PostgreSQL ledger's address: read by libpq's own parser, shown without its password (R23).

Every form libpq accepts opens: ``postgresql://`` and ``postgres://`` URLs (host in the
authority or in the query, several hosts, a socket folder), a driver-style scheme
(``postgresql+psycopg://``, its driver part dropped), and a ``key=value`` connection string.
The ledger adds one option of its own, ``schema`` (``?schema=tenant``, or ``schema=tenant`` in
a connection string): a tenant's ledger in a schema of its own, named as a database is (R23).

What is shown (``Address.shown``: every message, ``Ledger.path``, ``repr``) is built from the
parsed parts, never from the text given: the user, hosts, ports, database and schema. A
password never appears in it, nor in an error made here: a libpq complaint is scrubbed of every
piece of the text that may hold one (``Address.scrub``). A URL whose password holds an ``@`` or a
``/`` that is not percent-encoded cannot be read as its writer meant (libpq takes part of the
password for the host, the port or the database), so it is refused without being shown.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

import attrs
from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import InvalidArgument
from .contract import postgres_scheme

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]*")
MAX_SCHEMA = 63
"""PostgreSQL's identifier limit (NAMEDATALEN - 1, in bytes): a longer name would be cut, silently in
``search_path``, and two tenants would meet in one schema."""
_ENCODE = "percent-encode it (in Python: urllib.parse.quote(password, safe=''))"


@attrs.frozen
class Address:
    conninfo: str = attrs.field(repr=False)
    """What libpq connects with: the password included, never shown."""
    schema: str | None
    shown: str
    """The address as every message shows it: no password."""
    secrets: tuple[str, ...] = attrs.field(repr=False, default=())

    def scrub(self, text: str) -> str:
        """``text`` with every piece of the address that may hold a password cut out."""
        return scrub(text, self.secrets)


def parse(where: str) -> Address:
    """The address at ``where``; ``InvalidArgument`` (showing no secret) if libpq cannot read it,
    it names no database, or its schema is not a name a tenant may have."""
    text = where.strip()
    url = postgres_scheme(text)
    secrets = _secret_pieces(text, url is not None)
    if url is not None:
        text = f"{url.group(1).lower()}://" + text[url.end():]
        _refuse_ambiguous_at(text)
        text, schema = _take_query_option(text, "schema")
    else:
        text, schema = _take_dsn_option(text, "schema")
    try:
        params = conninfo_to_dict(text)
    except ProgrammingError as exc:
        said = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                     (*secrets, where, text))
        raise InvalidArgument(f"the PostgreSQL address cannot be read ({said}): check its options against libpq's "
                              "(https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS); "
                              "nothing was opened") from None
    if params.get("password"):
        secrets = (*secrets, str(params["password"]))
    shown = _shown(params, schema)
    if not params.get("dbname"):
        raise InvalidArgument(f"{shown} is not a PostgreSQL ledger URL: it names no database; give one such as "
                              "postgresql://user@host:5432/database (optionally ?schema=tenant)")
    if schema is not None:
        check_schema(schema, shown)
    return Address(make_conninfo("", **params), schema, shown, tuple(dict.fromkeys(s for s in secrets if s)))


def check_schema(name: str, where: str) -> None:
    """A tenant's schema is named as a database is: PostgreSQL folds unquoted names to lower case
    and cuts them at 63 bytes, so any other name could be another tenant's (R23)."""
    if not name:
        raise InvalidArgument(f"the schema in {where} is empty; give ?schema=name or leave it out")
    if not _SCHEMA_NAME.fullmatch(name) or len(name.encode()) > MAX_SCHEMA or name.startswith("pg_") \
            or name == "information_schema":
        lower = name.lower()
        hint = f" (perhaps {lower}?)" if lower != name and _SCHEMA_NAME.fullmatch(lower) else ""
        raise InvalidArgument(
            f"schema {name[:80]!r}{'...' if len(name) > 80 else ''} is not a ledger's schema name{hint}: use lower-case "
            f"ASCII letters, digits and underscores, starting with a letter or underscore, at most {MAX_SCHEMA} "
            "bytes, not beginning pg_ (PostgreSQL would fold or cut another name, and two tenants could meet); "
            "nothing was created")


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return text


def _shown(params: dict[str, Any], schema: str | None) -> str:
    user = f"{params['user']}@" if params.get("user") else ""
    hosts = str(params.get("host") or params.get("hostaddr") or "").split(",")
    ports = str(params.get("port") or "").split(",")
    where = ",".join(f"{'[' + h + ']' if ':' in h else h}{':' + p if p else ''}"
                     for h, p in zip(hosts, ports + [ports[-1]] * (len(hosts) - len(ports))))
    shown = f"postgresql://{user}{where}/{params.get('dbname') or ''}"
    return shown + (f"?schema={schema}" if schema is not None else "")


def _secret_pieces(text: str, is_url: bool) -> tuple[str, ...]:
    """What in the text may be a password, however libpq would read it: in a URL, everything after
    the user name up to the last ``@`` (a password may hold ``/``, ``?``, ``#``, ``@`` unencoded), and
    each ``password=`` value."""
    pieces = [unquote(v) for v in re.findall(r"password\s*=\s*('(?:[^'\\]|\\.)*'|[^&\s]+)", text, re.IGNORECASE)]
    pieces += [v.strip("'") for v in pieces]
    if is_url:
        rest = text.split("://", 1)[1]
        if "@" in rest:
            credentials = rest.rsplit("@", 1)[0]
            if ":" in credentials:
                password = credentials.split(":", 1)[1]
                pieces += [password, unquote(password)]
    return tuple(p for p in pieces if p)


def _credentials_end(url: str) -> int:
    """Where the user and password of a URL end (just after their ``@``; just after ``://`` if it has
    none), as libpq reads them: up to the first ``@`` before the first ``/``. A ``?`` or a ``#`` in a
    password is the password's."""
    start = url.index("://") + 3
    for i in range(start, len(url)):
        if url[i] == "@":
            return i + 1
        if url[i] == "/":
            break
    return start


def _refuse_ambiguous_at(url: str) -> None:
    """An ``@`` left after the user and password (in the host or the database) means the password
    held an unencoded ``@`` or ``/``."""
    authority, _, path = url[_credentials_end(url):].partition("/")
    if "@" in authority.split("?", 1)[0] or "@" in path.split("?", 1)[0]:
        raise InvalidArgument(f"the PostgreSQL URL cannot be read as written: its password (or user) holds an '@' or "
                              f"a '/' that is not percent-encoded, so libpq would take part of it for the host or the "
                              f"database; {_ENCODE}. (The URL is not shown: it holds a password.)")


def _take_query_option(url: str, key: str) -> tuple[str, str | None]:
    """The URL without ``key=`` in its query, and that option's (percent-decoded) value."""
    head = _credentials_end(url)
    base, mark, query = url[head:].partition("?")
    base = url[:head] + base
    if not mark:
        return url, None
    kept, value = [], None
    for pair in query.split("&"):
        name, _, found = pair.partition("=")
        if unquote(name) == key:
            value = unquote(found)
        elif pair:
            kept.append(pair)
    return base + ("?" + "&".join(kept) if kept else ""), value


def _take_dsn_option(dsn: str, key: str) -> tuple[str, str | None]:
    found = re.search(rf"(^|\s){key}\s*=\s*('(?:[^'\\]|\\.)*'|\S*)", dsn)
    if found is None:
        return dsn, None
    value = found.group(2)
    if value.startswith("'"):
        value = re.sub(r"\\(.)", r"\1", value[1:-1])
    return (dsn[:found.start()] + dsn[found.end():]).strip(), value
