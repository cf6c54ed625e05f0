"""A PostgreSQL ledger's address: read by libpq's own parser, shown without its password (R23).

Every form libpq accepts opens: ``postgresql://`` and ``postgres://`` URLs (host in the
authority or in the query, several hosts, a socket folder), a driver-style scheme
(``postgresql+psycopg://``, its driver part dropped), a ``key=value`` connection string, and a
service (``service=tenant``, ``postgresql:///?service=tenant``) that libpq resolves from its
service file at connect. The ledger adds one option of its own, ``schema`` (``?schema=tenant``,
or ``schema=tenant`` in a connection string): a tenant's ledger in a schema of its own, named as
a database is (R23).

Which text is a connection string, not a SQLite file's name (``is_conninfo``), is libpq's
to say: any text its parser reads as ``key=value`` pairs (every key it accepts is one of its
keywords), and any it cannot read that has a word ``keyword=`` for a keyword it knows (its
``PQconndefaults`` list, in any case, or ``schema``): such a text is refused, never made a
file named after it, password and all. A path with an ``=`` in it (``dt=2026-01-01/ledger.db``,
``run id=7.db``) stays a path, as does ``./host=a.db``.

What is shown (``Address.shown``: every message, ``Ledger.path``, ``repr``) is built from the
parsed parts, never from the text given: the user, hosts, ports, database, service and schema.
A password never appears in it, nor in an error made here: libpq's words about a text it cannot
read are not quoted at all when the text holds a password (they quote the piece where it
stopped, which is the password's own when a ``&`` or a space ended it early), and a message from
libpq or the server is scrubbed of every piece of the text that may hold one (``Address.scrub``).
A URL whose password holds an ``@`` or a ``/`` that is not percent-encoded cannot be read as its
writer meant (libpq takes part of the password for the host, the port or the database), so it is
refused without being shown.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote, unquote

import attrs
from psycopg import ProgrammingError, pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import InvalidArgument
from .contract import postgres_scheme

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]*")
MAX_SCHEMA = 63
"""PostgreSQL's identifier limit (NAMEDATALEN - 1, in bytes): a longer name would be cut, silently in
``search_path``, and two tenants would meet in one schema."""
_ENCODE = "percent-encode it (in Python: urllib.parse.quote(password, safe=''))"
_LIBPQ_OPTIONS = "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS"
SERVICES = "PGSERVICEFILE, or else ~/.pg_service.conf; then PGSYSCONFDIR/pg_service.conf"
"""Where libpq looks for a service's definition, as a message names the places."""
LONG_SECRET = 8
"""A secret at least this long is cut out of a message wherever it appears; a shorter one only where
it stands alone, since two or three letters occur in ordinary words ("se" in "server")."""


_ALSO_SECRET = frozenset({"scram_client_key", "scram_server_key"})
"""Options libpq marks as debug ones (``D``), not as passwords (``*``), that log in as a password does."""


@functools.cache
def _options() -> tuple[frozenset[str], frozenset[str]]:
    """libpq's keywords as installed (``PQconndefaults``), and those whose value is a secret: the ones
    it hides itself (a password field, shown as ``*``) and ``_ALSO_SECRET``."""
    defaults = pq.Conninfo.get_defaults()
    keywords = frozenset(o.keyword.decode() for o in defaults)
    return keywords, frozenset(o.keyword.decode() for o in defaults if o.dispchar == b"*") | (_ALSO_SECRET & keywords)


_WORD_KEY = re.compile(r"(?:^|\s)([^\s=]+)\s*=")


def is_conninfo(text: str) -> bool:
    """Whether ``text`` is a libpq ``key=value`` connection string (see the module's docstring): one
    of its words is ``keyword=`` for a keyword libpq knows, in any case, or the ledger's ``schema``.
    Every text libpq's parser reads has one (its first); one it cannot read is then refused."""
    known = _options()[0] | {"schema"}
    return any(m.group(1).lower() in known for m in _WORD_KEY.finditer(text))


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
    it names no database (nor does its service), or its schema is not a name a tenant may have."""
    text = where.strip()
    url = postgres_scheme(text)
    secrets = _secret_pieces(text, url is not None)
    if url is not None:
        text = f"{url.group(1).lower()}://" + text[url.end():]
        _refuse_ambiguous_at(text)
        text, schema = _take_query_option(text, "schema")
    else:
        text, schema = _take_dsn_option(text, "schema")
    params = _read(text, holds_secret=bool(secrets))
    service = _service(params)
    secrets = (*secrets, *_secret_values(params), *_secret_values(service[1] if service else {}))
    shown = _shown(params, schema)
    if not _names_database(params, service):
        raise InvalidArgument(_names_no_database(shown, params, service))
    if schema is not None:
        check_schema(schema, shown)
    return Address(make_conninfo("", **params), schema, shown, tuple(dict.fromkeys(s for s in secrets if s)))


def _read(text: str, *, holds_secret: bool) -> dict[str, Any]:
    """libpq's reading of ``text``; if it cannot, ``InvalidArgument`` quoting libpq's words only when
    the text holds no secret: they quote the piece of the text where libpq stopped, and a password
    that a ``&`` (in a URL) or a space (in key=value) ended early is where it stops."""
    try:
        return conninfo_to_dict(text)
    except ProgrammingError as exc:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        why = "(libpq's words are not shown: the address holds a password)" if holds_secret else f"({said})"
        raise InvalidArgument(f"the PostgreSQL address cannot be read {why}: check its options against libpq's "
                              f"({_LIBPQ_OPTIONS}); in key=value form quote a value holding a space ('...'), in a "
                              "URL percent-encode a value holding & or @ (in Python: urllib.parse.quote(value, "
                              "safe='')); nothing was opened") from None


def _names_database(params: Mapping[str, Any], service: tuple[Path, dict[str, str]] | None) -> bool:
    """Whether the address names its database, or its service does (or may: a service this process
    cannot find is libpq's to resolve, from the folder it was built with, or to refuse)."""
    if params.get("dbname"):
        return True
    return bool(service[1].get("dbname")) if service is not None else bool(params.get("service"))


def _names_no_database(shown: str, params: Mapping[str, Any], service: tuple[Path, dict[str, str]] | None) -> str:
    if service is not None:
        return (f"{shown} names no database, nor does service {params['service']} in {service[0]}: add dbname= to "
                "that service, or name one in the address (dbname=, or postgresql://user@host:5432/database)")
    return (f"{shown} is not a PostgreSQL ledger URL: it names no database; give one such as "
            "postgresql://user@host:5432/database (optionally ?schema=tenant)")


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
    """``text`` with every secret cut out: a long one wherever it appears, a short one only where
    no letter or digit touches it (``LONG_SECRET``), so no word of libpq's loses letters."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= LONG_SECRET:
            text = text.replace(secret, "***")
        elif secret:
            text = re.sub(rf"(?<![^\W_]){re.escape(secret)}(?![^\W_])", "***", text)
    return text


def _shown(params: Mapping[str, Any], schema: str | None) -> str:
    user = f"{params['user']}@" if params.get("user") else ""
    hosts = str(params.get("host") or params.get("hostaddr") or "").split(",")
    ports = str(params.get("port") or "").split(",")
    where = ",".join(f"{'[' + h + ']' if ':' in h else h}{':' + p if p else ''}"
                     for h, p in zip(hosts, ports + [ports[-1]] * (len(hosts) - len(ports))))
    query = [f"service={quote(str(params['service']), safe='')}"] if params.get("service") else []
    query += [f"schema={schema}"] if schema is not None else []
    return f"postgresql://{user}{where}/{params.get('dbname') or ''}" + ("?" + "&".join(query) if query else "")


def _service(params: Mapping[str, Any]) -> tuple[Path, dict[str, str]] | None:
    """The service file the address's service is in and its options there, read as libpq reads them
    (the first file that defines it: the ``servicefile`` option where libpq has one, else
    PGSERVICEFILE, else ~/.pg_service.conf; then PGSYSCONFDIR/pg_service.conf; within it, the
    first value of each option), or None: no service, or none this process can see defines it
    (libpq may also look in the folder it was built with, and says so at connect if not found)."""
    name = params.get("service")
    if not name:
        return None
    user = params.get("servicefile") or os.environ.get("PGSERVICEFILE") or os.path.expanduser("~/.pg_service.conf")
    system = os.environ.get("PGSYSCONFDIR")
    for path in (Path(user), *([Path(system, "pg_service.conf")] if system else [])):
        entry = _service_entry(path, str(name))
        if entry is not None:
            return path, entry
    return None


MAX_SERVICE_FILE = 1 << 20
"""A service file is a few lines: a larger one (or a device, a pipe) is not read here; libpq decides."""


def _service_entry(path: Path, name: str) -> dict[str, str] | None:
    """The options of the ``[name]`` section of the service file at ``path`` (None if it has none)."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as file:
            data = file.read(MAX_SERVICE_FILE + 1)
    except OSError:
        return None
    if len(data) > MAX_SERVICE_FILE:
        return None
    entry: dict[str, str] | None = None
    for line in (raw.strip() for raw in data.decode(errors="replace").split("\n")):
        if line.startswith("["):
            if entry is not None:
                break
            entry = {} if line.startswith(f"[{name}]") else None
        elif entry is not None and line and not line.startswith("#"):
            key, _, value = line.partition("=")
            entry.setdefault(key, value)
    return entry


def _secret_values(params: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(params[k]) for k in _options()[1] if params.get(k))


def _secret_pieces(text: str, is_url: bool) -> tuple[str, ...]:
    """What in the text may be a secret, however libpq would read it: in a URL, everything after
    the user name up to the last ``@`` (a password may hold ``/``, ``?``, ``#``, ``@`` unencoded), and
    each value of an option libpq hides (``password=``, ``sslpassword=``, ...; in a URL's query its
    name may be percent-encoded)."""
    hidden = "|".join(sorted(_options()[1]))
    found = re.findall(rf"(?<![^\W_])(?:{hidden})\s*=\s*('(?:[^'\\]|\\.)*'|[^&\s]+)",
                       f"{text} {unquote(text)}" if is_url else text, re.IGNORECASE)
    pieces = [unquote(v) for v in found] + [v.strip("'") for v in found]
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
