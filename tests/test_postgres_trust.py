"""PostgreSQL you can trust (R18, R23), on the real server the tests start: tenants never
crossed, a password never shown, libpq's address forms, acknowledgements never wrong,
hosts that do not meet never waiting for each other, and every host held to the server's clock.

Each test began as something a hostile tester or a new user met in 0.3.0: one tenant opening
another's ledger, passwords printed by most refusals, ``Conflict ... pg_namespace_nspname_index``
when hosts made a new schema at once, ``TableExists`` for a table the caller itself created.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import psycopg
import pytest

from ledger import (ClockSkew, Conflict, InvalidArgument, Ledger, LedgerError, LedgerNotFound, ManualClock,
                    UndropBlocked, copy_ledger)

from .pg import PostgresServer, fresh_url
from .pgproxy import PostgresProxy

REPO = Path(__file__).resolve().parent.parent


def _raw(url: str) -> psycopg.Connection[Any]:
    base, _, schema = url.partition("?schema=")
    conn = psycopg.connect(base, autocommit=True)
    if schema:
        conn.execute(f'SET search_path TO "{schema}"')
    return conn


def _schemas(base: str) -> set[str]:
    with psycopg.connect(base, autocommit=True) as conn:
        return {name for (name,) in conn.execute("SELECT nspname FROM pg_namespace").fetchall()}


# --- tenants (R23) -----------------------------------------------------------------------------

@pytest.mark.parametrize("schema, says", [
    ("t" * 63 + "A", "is not a ledger's schema name"), ("t" * 64, "at most 63 bytes"),
    ("Tenant_A", "perhaps tenant_a?"), ("tenant-a", "is not a ledger's schema name"),
    ("pg_tenant", "not beginning pg_"), ("ténant", "ASCII letters"), ("", "is empty"),
])
def test_r23_a_schema_name_postgresql_would_cut_or_fold_is_refused_and_nothing_made(
        postgres: PostgresServer, tmp_path: Path, schema: str, says: str) -> None:
    base = postgres.database("tenants")
    before = _schemas(base)
    with pytest.raises(InvalidArgument, match=says):
        Ledger.open(f"{base}?schema={quote(schema)}", warehouse=tmp_path)
    assert _schemas(base) == before


def test_r23_two_tenants_whose_names_share_63_bytes_never_meet(postgres: PostgresServer, tmp_path: Path) -> None:
    """PostgreSQL cut both to the same 63 bytes (silently, in search_path): B listed A's tables."""
    base = postgres.database("tenants")
    with Ledger.open(f"{base}?schema={'t' * 63}", warehouse=tmp_path / "a") as a:
        a.create_table("sales.orders")
    for longer in ("t" * 63 + "a", "t" * 63 + "b"):
        with pytest.raises(InvalidArgument, match="at most 63 bytes"):
            Ledger.open(f"{base}?schema={longer}", warehouse=tmp_path / "b")


def test_r23_a_schema_injection_is_refused_and_drops_nothing(postgres: PostgresServer, tmp_path: Path) -> None:
    """The name is checked before it is used, and still quoted where it is: nothing is executed."""
    base = postgres.database("tenants")
    with Ledger.open(f"{base}?schema=victim", warehouse=tmp_path / "v") as victim:
        victim.create_table("sales.orders")
    attack = 'x"; DROP SCHEMA victim CASCADE; --'
    with pytest.raises(InvalidArgument, match="is not a ledger's schema name"):
        Ledger.open(f"{base}?schema={quote(attack)}", warehouse=tmp_path / "x")
    with Ledger.open(f"{base}?schema=victim") as victim:
        assert [t.name for t in victim.tables()] == ["sales.orders"]


def _open_fresh(url: str, warehouse: str, out: Any) -> None:
    try:
        with Ledger.open(url, warehouse=warehouse) as led:
            led.create_table(f"h{os.getpid()}.t")
        out.put("ok")
    except Exception as exc:  # noqa: BLE001 - the point is what comes out
        out.put(f"{type(exc).__name__}: {exc}")


def test_r18_hosts_opening_a_new_schema_at_once_one_makes_it_the_others_find_it(
        postgres: PostgresServer, tmp_path: Path) -> None:
    """The lock key was hashtext(current_schema()), NULL before the schema existed: every round of
    four processes failed with Conflict ... pg_namespace_nspname_index."""
    base = postgres.database("fresh")
    context = multiprocessing.get_context("spawn")
    for round_ in range(3):
        url, out = f"{base}?schema=fresh_{round_}", context.Queue()
        hosts = [context.Process(target=_open_fresh, args=(url, str(tmp_path / "wh"), out)) for _ in range(4)]
        for host in hosts:
            host.start()
        for host in hosts:
            host.join(120)
        assert sorted(out.get(timeout=5) for _ in hosts) == ["ok"] * 4
        with Ledger.open(url) as led:
            assert len(led.tables()) == 4 and led.verify().events == 4


def test_r18_every_host_takes_the_schemas_lock_from_its_first_open(postgres: PostgresServer, tmp_path: Path) -> None:
    """The host that made the schema kept a NULL lock key, so its appends never took the ledger's lock."""
    base = postgres.database("fresh")
    url = f"{base}?schema=locked"
    with Ledger.open(url, warehouse=tmp_path, busy_timeout=0.5, max_attempts=1) as maker, _raw(base) as conn:
        [key] = conn.execute("SELECT hashtext('locked')").fetchone()
        conn.execute("BEGIN")
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (0x524C4447, key))  # the ledger's lock, held
        with pytest.raises(Conflict, match="stayed locked by another writer"):
            maker.create_table("a.t")  # the maker waits on the lock every host takes
        conn.execute("ROLLBACK")
        assert maker.create_table("a.t").is_live


@pytest.mark.parametrize("where", ["database", "schema"])
def test_r18_a_database_or_schema_holding_an_applications_tables_is_refused_in_one_line(
        postgres: PostgresServer, tmp_path: Path, where: str) -> None:
    base = postgres.database("app")
    url = base if where == "database" else f"{base}?schema=app"
    with _raw(base) as conn:
        if where == "schema":
            conn.execute("CREATE SCHEMA app")
            conn.execute("SET search_path TO app")
        conn.execute("CREATE TABLE meta (id int, note text)")
        conn.execute("INSERT INTO meta VALUES (1, 'the application''s own')")
    for attempt in (lambda: Ledger.open(url, warehouse=tmp_path), lambda: Ledger.open(url)):
        with pytest.raises(InvalidArgument, match=r"holds tables that are not a ledger's \(meta\): a ledger needs a "
                                                  "database or a schema of its own"):
            attempt()
    with _raw(url) as conn:
        tables = {n for (n,) in conn.execute("SELECT table_name FROM information_schema.tables WHERE "
                                             "table_schema = current_schema()").fetchall()}
        assert tables == {"meta"} and conn.execute("SELECT count(*) FROM meta").fetchone()[0] == 1
    done = subprocess.run([sys.executable, "-m", "retention_ledger.cli", "--ledger", url, "tables"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: InvalidArgument: ") and "not a ledger's" in done.stderr


# --- secrets (R23) -----------------------------------------------------------------------------

SECRET = "Alpha{}Bravo"
"""A password with a character in its middle; neither half may appear anywhere."""


def _forms(port: int, database: str, role: str, sep: str) -> list[str]:
    """Every URL form libpq accepts with a password, the password unencoded as users write it."""
    pw = SECRET.format(sep)
    return [f"postgresql://{role}:{pw}@127.0.0.1:{port}/{database}",
            f"postgres://{role}@127.0.0.1:{port}/{database}?password={quote(pw, safe='')}",
            f"postgresql+psycopg://{role}:{pw}@127.0.0.1:{port}/{database}",
            f"host=127.0.0.1 port={port} dbname={database} user={role} password='{pw}'",
            f"connect_timeout=5 host=127.0.0.1 port={port} dbname={database} user={role} password='{pw}'"]


def _assert_hidden(*texts: str) -> None:
    for text in texts:
        for piece in ("Alpha", "Bravo"):
            assert piece not in text, f"{piece!r} shown in: {text}"


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _secret_database(postgres: PostgresServer, tmp_path: Path) -> str:
    """A database with a ledger in schema ``kept`` and an application's table in schema ``app``."""
    made = postgres.database("secret")
    with Ledger.open(f"{made}?schema=kept", warehouse=tmp_path / "kept") as led:
        led.create_table("a.t")
    with _raw(made) as conn:
        conn.execute("CREATE SCHEMA app")
        conn.execute("CREATE TABLE app.meta (x int)")
    return made.rsplit("/", 1)[1]


def _refusals(postgres: PostgresServer, tmp_path: Path, database: str) -> list[tuple[str, Callable[[str], Any]]]:
    """Every way Ledger.open, the store and a copy refuse an address (each given the address)."""
    unreachable = str(postgres.port + 1 if postgres.port < 65535 else 1)
    ahead = ManualClock(datetime.now(timezone.utc) + timedelta(days=8))

    def ahead_create(url: str) -> None:
        with Ledger.open(url, clock=ahead) as led:
            led.create_table("fast.t")
    return [
        ("holds no ledger yet", lambda u: Ledger.open(u + _opt(u, "schema=nothing_yet"))),
        ("create=False", lambda u: Ledger.open(u + _opt(u, "schema=nothing_yet"), create=False)),
        ("another warehouse", lambda u: Ledger.open(u + _opt(u, "schema=kept"), warehouse=tmp_path / "other")),
        ("an application's tables", lambda u: Ledger.open(u + _opt(u, "schema=app"), warehouse=tmp_path)),
        ("no such database", lambda u: Ledger.open(u.replace(database, "no_such_db"), warehouse=tmp_path)),
        ("cannot reach", lambda u: Ledger.open(u.replace(str(postgres.port), unreachable), warehouse=tmp_path)),
        ("bad option value", lambda u: Ledger.open(u + _opt(u, "sslmode=requre"), warehouse=tmp_path)),
        ("unknown option", lambda u: Ledger.open(u + _opt(u, "sslmod=require"), warehouse=tmp_path)),
        ("bad schema", lambda u: Ledger.open(u + _opt(u, "schema=Bad-Name"), warehouse=tmp_path)),
        ("wrong password", lambda u: Ledger.open(u.replace("Alpha", "Alphx"), warehouse=tmp_path)),
        ("clock ahead", lambda u: ahead_create(u + _opt(u, "schema=kept"))),
        ("copy into a ledger with events", lambda u: copy_ledger(u + _opt(u, "schema=kept"),
                                                                 u + _opt(u, "schema=kept"))),
    ]


def _opt(url: str, option: str) -> str:
    if "://" not in url:
        return " " + option
    return ("&" if "?" in url else "?") + option


@pytest.mark.parametrize("sep", ["", "#", "?", ":"], ids=["plain", "hash", "question", "colon"])
def test_r23_a_password_is_never_shown_by_any_refusal_in_any_form(
        postgres: PostgresServer, tmp_path: Path, sep: str) -> None:
    role = postgres.password_role(SECRET.format(sep))
    database = _secret_database(postgres, tmp_path)
    captured = _Captured()
    logging.getLogger().addHandler(captured)
    try:
        for url in _forms(postgres.port, database, role, sep):
            with Ledger.open(url, warehouse=tmp_path / "w") as led:  # each form opens
                led.create_table(f"ok.t{led.event_count()}")
                _assert_hidden(led.path, repr(led), str([t.to_dict() for t in led.tables()]))
            for what, refusal in _refusals(postgres, tmp_path, database):
                with pytest.raises(LedgerError) as refused:
                    refusal(url)
                _assert_hidden(str(refused.value), repr(refused.value), "".join(refused.value.args))
                assert "\n" not in str(refused.value), what
    finally:
        logging.getLogger().removeHandler(captured)
    _assert_hidden(*captured.lines)


@pytest.mark.parametrize("sep", ["@", "/"])
def test_r23_a_password_with_an_unencoded_at_or_slash_is_refused_without_showing_the_url(
        postgres: PostgresServer, tmp_path: Path, sep: str) -> None:
    """libpq would take part of it for the host, the port or the database, and show it there."""
    role = postgres.password_role(SECRET.format(sep))
    url = f"postgresql://{role}:{SECRET.format(sep)}@127.0.0.1:{postgres.port}/postgres"
    with pytest.raises(InvalidArgument, match="not percent-encoded") as refused:
        Ledger.open(url, warehouse=tmp_path)
    _assert_hidden(str(refused.value), repr(refused.value))
    encoded = f"postgresql://{role}:{quote(SECRET.format(sep), safe='')}@127.0.0.1:{postgres.port}/" + \
        postgres.database("secret").rsplit("/", 1)[1]
    with Ledger.open(encoded, warehouse=tmp_path) as led:
        assert led.create_table("a.t").is_live
        _assert_hidden(led.path)


def test_r23_the_command_line_never_shows_a_password_in_text_or_json(postgres: PostgresServer, tmp_path: Path) -> None:
    role = postgres.password_role(SECRET.format("#"))
    database = _secret_database(postgres, tmp_path)
    for url in _forms(postgres.port, database, role, "#"):
        kept = url + _opt(url, "schema=kept")
        for args in (["tables"], ["--json", "tables"], ["--json", "create", "a.t"], ["create", "a.t"],
                     ["--ledger", url.replace(database, "nowhere"), "--json", "tables"],
                     ["--ledger", kept, "--warehouse", str(tmp_path / "other"), "--json", "tables"],
                     ["--ledger", kept, "create", "a.t"], ["copy", kept, kept]):
            done = subprocess.run([sys.executable, "-m", "retention_ledger.cli", "--ledger", url, *args], cwd=REPO,
                                  capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                                  env={**os.environ, "RETENTION_LEDGER": url})
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
            _assert_hidden(done.stdout, done.stderr)


@pytest.mark.parametrize("form", ["host in the query", "postgres scheme", "driver style", "key=value"])
def test_r18_libpq_address_forms_open_the_same_ledger(postgres: PostgresServer, tmp_path: Path, form: str) -> None:
    base = postgres.database("forms")
    name = base.rsplit("/", 1)[1]
    with Ledger.open(f"{base}?schema=shared", warehouse=tmp_path) as led:
        made = led.create_table("sales.orders").id
    url = {"host in the query": f"postgresql:///{name}?host=127.0.0.1&port={postgres.port}&user=postgres"
                                "&schema=shared",
           "postgres scheme": f"postgres://postgres@127.0.0.1:{postgres.port}/{name}?schema=shared",
           "driver style": f"postgresql+psycopg://postgres@127.0.0.1:{postgres.port}/{name}?schema=shared",
           "key=value": f"host=127.0.0.1 port={postgres.port} user=postgres dbname={name} schema=shared"}[form]
    with Ledger.open(url) as led:
        assert led.table("sales.orders").id == made
        assert led.path == f"postgresql://postgres@127.0.0.1:{postgres.port}/{name}?schema=shared"
    assert not Path(url).exists() and not list(Path.cwd().glob("postgresql+psycopg*"))  # never taken for a file


@pytest.mark.parametrize("option, name", [("sslmode=requre", "sslmode"), ("sslmod=require", "sslmod"),
                                          ("port=abc", "port")])
def test_r18_a_typo_in_the_address_is_the_addresses_fault_naming_the_option(
        postgres: PostgresServer, tmp_path: Path, option: str, name: str) -> None:
    """It used to be LedgerUnavailable: "cannot reach the server ... check that it runs"."""
    with pytest.raises(InvalidArgument, match=name):
        Ledger.open(f"{postgres.url}?{option}", warehouse=tmp_path)


# --- what libpq reads is PostgreSQL, and a service is an address (R18, R23; issue 44) --------

@pytest.mark.parametrize("first", ["connect_timeout=5", "application_name=etl", "target_session_attrs=any"])
def test_r18_a_key_value_address_beginning_with_any_libpq_option_opens_the_shared_ledger(
        postgres: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str) -> None:
    """Only a few first keywords were known: this address became a new SQLite file in the working
    folder named after the whole string, so that host wrote alone while the others shared the
    real ledger, and its path showed the password."""
    role = postgres.password_role(SECRET.format("#"))
    base = postgres.database("kv")
    name = base.rsplit("/", 1)[1]
    with Ledger.open(f"{base}?schema=shared", warehouse=tmp_path / "wh") as led:
        made = led.create_table("sales.orders").id
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    address = (f"{first} host=127.0.0.1 port={postgres.port} dbname={name} user={role} "
               f"password='{SECRET.format('#')}' schema=shared")
    with Ledger.open(address) as led:
        assert led.table("sales.orders").id == made
        assert led.path == f"postgresql://{role}@127.0.0.1:{postgres.port}/{name}?schema=shared"
    assert list((tmp_path / "work").iterdir()) == []


@pytest.mark.parametrize("address", [
    "sslmod=require host=127.0.0.1 port={port} dbname=postgres user=postgres",
    "application_name=nightly etl host=127.0.0.1 port={port} dbname=postgres user=postgres",
    "host=127.0.0.1 port={port} dbname=postgres user=postgres application_name='nightly",
], ids=["typo in the first option", "unquoted space", "unterminated quote"])
def test_r18_an_address_libpq_cannot_read_is_refused_never_taken_for_a_file(
        postgres: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgument, match="the PostgreSQL address cannot be read .*nothing was opened"):
        Ledger.open(address.format(port=postgres.port), warehouse=tmp_path / "wh")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["dt=2026-01-01/ledger.db", "run id=7.db", "x=1 y=2.db", "./user=bob.db"])
def test_r18_a_file_name_holding_an_equals_sign_but_no_libpq_option_is_still_a_sqlite_ledger(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Hive-style folders (dt=...) are common beside a pipeline's data; only a word libpq knows
    (host=, user=, ...) makes a connection string."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dt=2026-01-01").mkdir()
    with Ledger.open(name) as led:
        led.create_table("a.t")
        assert led.path == name
    assert (tmp_path / name).is_file()


SPLIT = ("postgresql://postgres@127.0.0.1:{port}/postgres?password=se&cret99Xy",
         "host=127.0.0.1 port={port} dbname=postgres user=postgres password=se cret99Xy")
"""A password holding a character that ends it (``&`` in a URL's query, a space in key=value)."""


@pytest.mark.parametrize("address", SPLIT, ids=["url", "key=value"])
def test_r23_a_mistyped_password_is_refused_without_any_piece_of_it(
        postgres: PostgresServer, tmp_path: Path, address: str) -> None:
    """libpq's words quoted "cret99Xy", and the scrubber cut "se" out of them (***parator)."""
    with pytest.raises(InvalidArgument, match="the PostgreSQL address cannot be read") as refused:
        Ledger.open(address.format(port=postgres.port), warehouse=tmp_path)
    said = str(refused.value)
    assert "cret99Xy" not in said and not re.search(r"(?<![A-Za-z0-9])se(?![A-Za-z0-9])", said), said
    assert "***" not in said and "percent-encode" in said and "quote" in said, said


def test_r23_the_command_line_refuses_a_mistyped_password_without_any_piece_of_it(
        postgres: PostgresServer, tmp_path: Path) -> None:
    for address in SPLIT:
        for args in (["tables"], ["--json", "tables"], ["--json", "--warehouse", str(tmp_path), "create", "a.t"]):
            done = subprocess.run([sys.executable, "-m", "retention_ledger.cli", "--ledger",
                                   address.format(port=postgres.port), *args], cwd=tmp_path, capture_output=True,
                                  text=True, timeout=120, stdin=subprocess.DEVNULL,
                                  env={**os.environ, "PYTHONPATH": str(REPO)})
            assert done.returncode == 1 and done.stderr.startswith("error: InvalidArgument: the PostgreSQL "
                                                                   "address cannot be read"), done.stderr
            shown = done.stdout + done.stderr
            assert "cret99Xy" not in shown and not re.search(r"(?<![A-Za-z0-9])se(?![A-Za-z0-9])", shown), shown
            assert list(tmp_path.iterdir()) == []


def test_r23_a_short_password_is_not_cut_out_of_the_servers_words(postgres: PostgresServer, tmp_path: Path) -> None:
    """A wrong password "se": the server's 'for user "ledger_pw"' read 'for u***r'."""
    role = postgres.password_role(SECRET.format(""))
    with pytest.raises(LedgerError, match="the server refused the login") as refused:
        Ledger.open(f"postgresql://{role}:se@127.0.0.1:{postgres.port}/postgres", warehouse=tmp_path)
    said = str(refused.value)
    assert f'for user "{role}"' in said and "***" not in said, said
    assert not re.search(r"(?<![A-Za-z0-9])se(?![A-Za-z0-9])", said), said


def _service_file(path: Path, port: int, role: str, database: str) -> Path:
    path.write_text("# services of this host\n[other]\ndbname=elsewhere\n\n"
                    f"[tenant]\nhost=127.0.0.1\nport={port}\nuser={role}\npassword={SECRET.format('#')}\n"
                    f"dbname={database}\n"
                    f"[nodb]\nhost=127.0.0.1\nport={port}\nuser={role}\n")
    return path


@pytest.mark.parametrize("where", ["PGSERVICEFILE", "PGSYSCONFDIR"])
def test_r18_a_service_address_opens_the_ledger_libpq_resolves_and_shows_the_service(
        postgres: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """It was refused ("it names no database") though libpq resolves one, and service=x dbname=d
    showed as postgresql:///d, losing the service."""
    role = postgres.password_role(SECRET.format("#"))
    base = postgres.database("svc")
    name = base.rsplit("/", 1)[1]
    services = _service_file(tmp_path / "pg_service.conf", postgres.port, role, name)
    monkeypatch.delenv("PGSERVICEFILE", raising=False)
    monkeypatch.delenv("PGSERVICE", raising=False)
    monkeypatch.setenv(where, str(services) if where == "PGSERVICEFILE" else str(tmp_path))
    with Ledger.open("service=tenant", warehouse=tmp_path / "wh") as led:
        made = led.create_table("sales.orders").id
        assert led.path == "postgresql:///?service=tenant"
    with Ledger.open("postgresql:///?service=tenant") as led:
        assert led.table("sales.orders").id == made and led.drop_table("sales.orders").id == made
    with Ledger.open(base) as led:  # the same ledger, named in full
        assert led.dropped_tables()[0].id == made
    with Ledger.open(f"service=tenant schema=t2", warehouse=tmp_path / "wh") as led:
        assert led.create_table("a.t").is_live and led.path == "postgresql:///?service=tenant&schema=t2"
    with pytest.raises(LedgerNotFound) as refused:
        Ledger.open("service=tenant dbname=no_such_db", warehouse=tmp_path / "wh")
    assert str(refused.value).startswith("postgresql:///no_such_db?service=tenant: ")
    _assert_hidden(str(refused.value))
    with pytest.raises(InvalidArgument, match="names no database.*service nodb") as refused:
        Ledger.open("service=nodb", warehouse=tmp_path / "wh")
    with pytest.raises(InvalidArgument, match='service "missing"') as refused:
        Ledger.open("postgresql:///?service=missing", warehouse=tmp_path / "wh")
    _assert_hidden(str(refused.value))


# --- acknowledgements (R18) --------------------------------------------------------------------

def test_r18_an_append_still_running_when_its_connection_broke_is_applied_once_and_the_caller_told_so(
        postgres: PostgresServer, tmp_path: Path) -> None:
    """The client is cut while its append runs (held here for 2 s by a slow trigger, holding the
    ledger's lock): the lookup used to run at once, find nothing, append again, wait on the lock,
    find its streams moved by its own first append, and decide again on a state holding its own
    effect (TableExists for the table it created; a watermark advance answering the value it set)."""
    proxy = PostgresProxy(postgres.port)
    url = fresh_url()
    path = url.split(str(postgres.port), 1)[1]
    try:
        with Ledger.open(proxy.url(path), warehouse=tmp_path) as led:
            with _raw(url) as conn:
                conn.execute("CREATE FUNCTION slow_append() RETURNS trigger LANGUAGE plpgsql AS "
                             "$$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$")
                conn.execute("CREATE TRIGGER slow_append AFTER INSERT ON attempts FOR EACH STATEMENT "
                             "EXECUTE FUNCTION slow_append()")
            proxy.cut_in_flight()
            created = led.create_table("sales.orders")
            assert proxy.fired == 1 and created.is_live
            proxy.cut_in_flight()
            previous = led.advance_watermark(led.now() - timedelta(seconds=1), scope="database:sales")
            assert proxy.fired == 2 and previous is None  # the value it found, not the one it set
            assert [e.data["name"] for e in led.history(type="TableCreated")] == ["sales.orders"]
            assert len(led.history(type="WatermarkAdvanced")) == 1 and led.verify().events == 2
    finally:
        proxy.close()


def _copy(source: str, destination: str, out: Any) -> None:
    try:
        copy_ledger(source, destination)
        out.put("copied")
    except LedgerError as exc:
        out.put(f"{type(exc).__name__}: {exc}")


def test_r18_two_copies_racing_into_one_destination_the_loser_is_told_it_is_not_empty(
        postgres: PostgresServer, tmp_path: Path) -> None:
    """Past one batch (20,000 events) the loser got LedgerCorrupt ("was something else writing?")."""
    source = tmp_path / "big.db"
    with Ledger.open(source, clock=ManualClock(datetime(2026, 1, 1, tzinfo=timezone.utc))) as led:
        for i in range(12_000):
            led.create_table(f"d{i % 50}.t{i}")
            led.drop_table(f"d{i % 50}.t{i}")
    destination = fresh_url()
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    copies = [context.Process(target=_copy, args=(str(source), destination, out)) for _ in range(2)]
    for c in copies:
        c.start()
    for c in copies:
        c.join(300)
    said = sorted(out.get(timeout=5) for _ in copies)
    assert said[1] == "copied", said
    assert said[0].startswith("InvalidArgument: ") and ("is not empty" in said[0] or "already holds" in said[0]), said
    with Ledger.open(destination) as copied:
        assert copied.verify().events == 24_000


def test_r18_a_lost_connection_is_said_in_the_log_and_on_the_command_lines_stderr(
        postgres: PostgresServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    proxy = PostgresProxy(postgres.port)
    path = fresh_url().split(str(postgres.port), 1)[1]
    try:
        with Ledger.open(proxy.url(path), warehouse=tmp_path) as led, caplog.at_level(logging.WARNING, "ledger"):
            proxy.lose_commit()
            led.create_table("sales.orders")
        [said] = [r.getMessage() for r in caplog.records if r.name.startswith("ledger")]
        assert "lost the connection to the PostgreSQL server" in said and "reconnecting, for up to 30 s" in said
        script = ("import sys; from tests.pgproxy import PostgresProxy; from retention_ledger.cli import main; "
                  f"p = PostgresProxy({postgres.port}); p.lose_commit(); "
                  f"main(['--ledger', p.url({path!r}), 'create', 'sales.items'])")
        done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stderr.startswith("warning: ") and "reconnecting, for up to 30 s" in done.stderr
        assert done.stdout.startswith("created sales.items")
    finally:
        proxy.close()


# --- time across hosts (R6, R18) ---------------------------------------------------------------

def test_r6_r18_a_host_whose_clock_runs_ahead_cannot_move_the_fleets_time(postgres: PostgresServer,
                                                                          tmp_path: Path) -> None:
    """Host B's clock is 8 days ahead: it used to create a table timed 8 days on, which moved every
    host's now, and host A's own vacuum then purged a table A had dropped a minute before."""
    url = fresh_url()
    with Ledger.open(url, warehouse=tmp_path, actor="host-a") as a:
        a.create_table("sales.orders")
        dropped = a.drop_table("sales.orders")
        fast = ManualClock(datetime.now(timezone.utc) + timedelta(days=8))
        with Ledger.open(url, clock=fast, actor="host-b") as b:
            count = b.event_count()
            with pytest.raises(ClockSkew, match=r"this host's clock reads \S+Z, 691[12]\d\d\.\d s ahead of the "
                                                r"PostgreSQL server's \S+Z \(at most 60 s is allowed\).*nothing was "
                                                "recorded"):
                b.create_table("crm.contacts")
            assert b.event_count() == count
        plan = a.start_vacuum().plan
        assert plan.purges == () and a.undrop_table("sales.orders").id == dropped.id
        slow = ManualClock(datetime.now(timezone.utc) - timedelta(hours=1))
        with Ledger.open(url, clock=slow) as behind, pytest.raises(ClockSkew, match="behind the PostgreSQL"):
            behind.drop_table("sales.orders")
        # What the check prevents, let through on purpose (max_clock_skew=None, as a test that drives
        # its own clock says): B's one event moves A's time, and A's vacuum purges what A just dropped.
        a.drop_table("sales.orders")
        with Ledger.open(url, clock=fast, max_clock_skew=None, actor="host-b") as told:
            told.create_table("crm.contacts")
        assert [t.name for t in a.start_vacuum().plan.purges] == ["sales.orders"]
        with pytest.raises(UndropBlocked):
            a.undrop_table("sales.orders")


def test_r6_one_sqlite_file_has_one_hosts_clock_and_the_tolerance_is_checked(tmp_path: Path) -> None:
    ahead = ManualClock(datetime.now(timezone.utc) + timedelta(days=8))
    with Ledger.open(tmp_path / "one-host.db", clock=ahead) as led:  # no server clock to hold it to
        assert led.create_table("a.t").created_at == ahead()
    with pytest.raises(InvalidArgument, match="max_clock_skew 'soon' is not a duration"):
        Ledger.open(tmp_path / "x.db", max_clock_skew="soon")
    assert not (tmp_path / "x.db").exists()
