"""How ``arrow_ops.publish`` writes Iceberg metadata with pyiceberg (imported only once the
``iceberg`` extra is known to be installed).

A table's metadata is built in a pyiceberg ``Transaction`` over a staged table (nothing is
committed through pyiceberg): one overwrite snapshot per kept version, adding the files it has
that the previous one did not and deleting those it no longer has, each ``DataFile`` built from
the Parquet footer and the ledger's recorded partition values (``add_files`` would take the
partition from column statistics, which Spark's files do not carry). Two private pyiceberg 0.12
hooks are used, and the extra pins pyiceberg below 0.13 for them: a snapshot's id is set before
it is written (``_snapshot_id``: stable ids, derived from the ledger table id and version number,
so an id a reader holds means the same version after every republication), and its timestamp is
the version's commit time (the update ``_commit`` returns is rewritten). The metadata written has
its snapshot log ascending and ``last-updated-ms`` its last snapshot's time, an empty metadata log:
what Iceberg Java's ``TableMetadata`` checks on load.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from datetime import datetime, timedelta
from typing import Any, Callable
from urllib.parse import urlsplit

import attrs
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, TableAlreadyExistsError
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.io.pyarrow import (
    _ConvertToIcebergWithoutIDs, compute_statistics_plan, data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping, visit_pyarrow,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec, _to_partition_representation
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.serializers import FromInputFile, ToOutputFile
from pyiceberg.table import StagedTable, Transaction
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from sqlalchemy import delete, select, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ledger import (
    MAX_PIN_LEASE, InvalidArgument, Ledger, LedgerError, PinView, TableInstance, TableNotFound, TableVersion,
    parse_duration,
)
from .datasets import of_version
from .files import VersionFiles, filesystem_for, typed, version_files
from .reports import CatalogUnavailable, PublishReport
from .types import arrow_schema

log = logging.getLogger("arrow_ops.iceberg")

MARKER = ".retention-ledger-catalog"
"""The file that says whose a metadata folder is (a catalog's address and name)."""
SUPERSEDED = timedelta(days=1)
"""How long a table's superseded metadata files stay after a publication replaced them."""
ROUNDS = 5
"""How many times a table whose swap lost a race is read again and recomputed."""
PROPERTIES = {"gc.enabled": "false", "commit.retry.num-retries": "0", "format-version": "2"}
TABLE_ID, VERSIONS, PINS = "ledger.table-id", "ledger.versions", "ledger.pins"
UUID_SPACE = uuid.UUID("5b0c8f4e-8d2b-4f57-9a35-3d1f1e2f6a61")


class Conflict(Exception):
    """Another publisher moved the table's catalog row since it was read."""


class LeftOut(Exception):
    """This table cannot be published now; the message says why."""


@attrs.define
class Row:
    """A catalog row of this catalog name, and what its metadata says (if it is a ledger's)."""
    name: str
    location: str
    table_id: str | None = None
    versions: tuple[int, ...] = ()
    pins: dict[int, str] = attrs.field(factory=dict)


@attrs.define
class Plan:
    """What a table is to show: an instance's kept versions, each with the pin that holds it."""
    table: TableInstance
    kept: list[TableVersion]
    pins: dict[int, str] = attrs.field(factory=dict)
    new_pins: list[str] = attrs.field(factory=list)


def catalog_uri(catalog: str) -> str:
    """The SQLAlchemy URL of a catalog: a path or a relative ``sqlite:///`` made absolute (a
    republication from another folder must reach the same file), PostgreSQL through psycopg 3."""
    text = os.fspath(catalog)
    if "://" not in text:
        return "sqlite:///" + os.path.abspath(text)
    scheme = text.split("://", 1)[0].lower()
    if scheme.startswith("postgres"):
        _check_address(text)
    if scheme in ("postgresql", "postgres"):
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if scheme.startswith("sqlite"):
        url = make_url(text)
        if url.database and url.database != ":memory:" and not os.path.isabs(url.database):
            return str(url.set(database=os.path.abspath(url.database)).render_as_string(hide_password=False))
        return text
    if scheme.startswith("postgresql+"):
        return text
    raise InvalidArgument(f"an Iceberg SQL catalog is a SQLite file or a PostgreSQL database, not a {scheme}:// URL")


SECRETS = ("password", "sslpassword")
"""libpq's parameters that hold a secret (the login's, the SSL key's): never shown, never recorded."""


def _check_address(text: str) -> None:
    """Refuse, without showing it, a PostgreSQL catalog address SQLAlchemy would read wrongly: an
    ``@`` left in the password (the rest of it would be taken for the host, and shown as such) or
    several hosts (libpq's failover form, which SQLAlchemy's URL cannot hold)."""
    authority = text.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    if authority.count("@") > 1:
        raise InvalidArgument("an Iceberg catalog address has more than one '@' before its host: write an '@' "
                              "in the user or password as %40 (the address is not shown: it holds a password); "
                              "nothing was published")
    try:
        url = make_url(text)
        url.port  # noqa: B018 - a port SQLAlchemy cannot read fails here
    except Exception:
        raise InvalidArgument("an Iceberg catalog address must be one PostgreSQL server "
                              "(postgresql://user@host:port/database): several hosts, or a port that is not a "
                              "number, cannot be reached through SQLAlchemy (the address is not shown); nothing "
                              "was published") from None


def _bare(uri: str) -> Any:
    """The URL with no secret, in its user part or its query (``?password=``, ``?sslpassword=``)."""
    url = make_url(uri)
    query = {k: v for k, v in url.query.items() if k.lower() not in SECRETS}
    return URL.create(url.drivername, url.username, None, url.host, url.port, url.database, query)


def shown(uri: str) -> str:
    """The URL as a message shows it: its password, wherever it is, as ``***`` (R23)."""
    try:
        url = make_url(uri)
        hidden = url.password is not None or any(k.lower() in SECRETS for k in url.query)
        bare = _bare(uri)
        text = str(bare.render_as_string(hide_password=False))
        if url.password is not None:
            text = str(bare.set(password="***").render_as_string(hide_password=False)).replace("%2A%2A%2A", "***")
        return text + ("" if not hidden or url.password is not None else " (password hidden)")
    except Exception:
        return uri.split("://", 1)[0] + "://***"


def address(uri: str) -> str:
    """The catalog's address as the ledger records it: no password at all, in its user part or its
    query (R23). A publisher that republishes from the record (an erasure request's) reaches a
    PostgreSQL catalog with the password libpq finds (``PGPASSWORD``, ``~/.pgpass``)."""
    return str(_bare(uri).render_as_string(hide_password=False))


def snapshot_id(table_id: str, number: int) -> int:
    """A version's snapshot id: the same at every publication (a positive 63-bit number)."""
    digest = hashlib.sha256(f"{table_id}/{number}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2 ** 63 - 1) or 1


def millis(at: datetime) -> int:
    return int(at.timestamp() * 1000)


class Publisher:
    def __init__(self, ledger: Ledger, catalog: str, *, catalog_name: str, database: str | None,
                 tables: list[str] | None, metadata: str | None, lease: Any,
                 table_ids: list[str] | None = None) -> None:
        self.ledger = ledger
        self.uri = catalog_uri(catalog)
        self.shown = shown(catalog if "://" in os.fspath(catalog) else self.uri)
        self.catalog_name = catalog_name
        self.database = database
        self.names = None if tables is None else set(tables)
        self.lease = lease
        self.lease_length = parse_duration(lease, "a pin's lease", InvalidArgument)
        self.root = self._root(metadata)
        self._check(catalog_name, metadata, tables, database)
        self.written: list[str] = []
        self.unchanged: list[str] = []
        self.removed: list[str] = []
        self.left_out: dict[str, str] = {}
        self.taken = self.renewed = self.released = 0
        self.first_rows: dict[str, Row] = {}
        self.owned = False  # the metadata folder is this catalog's (checked): superseded metadata may go
        self.table_ids = None if table_ids is None else set(table_ids)
        self.erased: set[str] = set(self.table_ids or ())
        """The instances whose metadata before this publication may show what an erasure made
        unreadable: an erasure's republication's, and any whose catalog row shows an erased version."""

    def _check(self, catalog_name: str, metadata: str | None, tables: list[str] | None, database: str | None) -> None:
        """Refuse, before anything is pinned or recorded, what this publication could only fail at
        or get wrong: an empty name or folder, a lease no pin may have, a metadata folder inside the
        warehouse (the vacuum owns it: a purge would delete other tables' metadata with the files),
        and tables or a database the ledger never had (a publication of nothing is a typo)."""
        if not isinstance(catalog_name, str) or not catalog_name.strip():
            raise InvalidArgument(f"the catalog name must be a non-empty text (every reader loads the tables under "
                                  f"it; default 'ledger'), not {catalog_name!r}; nothing was published")
        if metadata is not None and not os.fspath(metadata).strip():
            raise InvalidArgument("metadata= must name a folder (or leave it out: beside a SQLite catalog), not an "
                                  "empty text; nothing was published")
        if not timedelta(seconds=1) <= self.lease_length <= MAX_PIN_LEASE:
            raise InvalidArgument(f"a publication's pins hold for its lease, which must be from 1 second to "
                                  f"{MAX_PIN_LEASE.days} days (a pin's longest), not {self.lease!r}: publish again "
                                  "within it to renew them; nothing was published")
        if _inside(self.root, self.ledger.warehouse):
            raise InvalidArgument(f"the metadata folder {self.root} is inside the ledger's warehouse "
                                  f"({self.ledger.warehouse}), whose files only the vacuum deletes (a purge would "
                                  "take Iceberg metadata with it): give a folder outside it (metadata=, --metadata); "
                                  "nothing was published")
        for name in sorted(set(tables or ())):
            try:
                self.ledger.table(name)
            except TableNotFound:
                if not self.ledger.dropped_tables(name=name):
                    raise TableNotFound(f"no table {name} in the ledger, live or dropped (`retention-ledger tables "
                                        "--all` lists them); nothing was published") from None
        if database is not None and not self.ledger.tables(database=database) \
                and not self.ledger.dropped_tables(database=database):
            raise TableNotFound(f"no table was ever in database {database} (`retention-ledger tables --all` lists "
                                "the databases); nothing was published")

    # --- the catalog and the metadata folder --------------------------------------------

    def _root(self, metadata: str | None) -> str:
        if metadata is None:
            url = make_url(self.uri)
            if url.get_backend_name() != "sqlite" or not url.database:
                raise InvalidArgument("publishing into a PostgreSQL catalog needs metadata= (a folder every reader "
                                      "can read, where the Iceberg metadata files go); nothing was published")
            base, _ = os.path.splitext(url.database)
            return base + ".iceberg"
        text = os.fspath(metadata)
        return os.path.abspath(text) if "://" not in text else text.rstrip("/")

    def _unavailable(self, exc: BaseException, what: str,
                     then: str = "nothing was published") -> CatalogUnavailable:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0] if str(exc).strip() else \
            type(exc).__name__
        url = make_url(self.uri)
        for password in (url.password, *(v for k, v in url.query.items() if k.lower() in SECRETS)):
            if password:
                reason = reason.replace(str(password), "***")
        return CatalogUnavailable(f"the Iceberg catalog {self.shown} {what}: {reason}; {then}")

    def _open(self) -> SqlCatalog:
        for attempt in range(3):
            try:
                catalog = SqlCatalog(self.catalog_name, uri=self.uri)
                break
            except Exception as exc:
                # Two publishers on a new catalog both create its tables: the one that lost finds them
                # there on its next try. Anything else fails the same way again.
                if attempt == 2:
                    raise self._unavailable(exc, "cannot be reached or written") from None
                time.sleep(0.1 * (attempt + 1))
        if "://" not in self.root:
            try:
                os.makedirs(self.root, exist_ok=True)
                probe = os.path.join(self.root, f".probe-{uuid.uuid4().hex}")
                with open(probe, "w"):
                    pass
                os.remove(probe)
                self._claim_folder()
            except OSError as exc:
                catalog.engine.dispose()
                raise CatalogUnavailable(f"the Iceberg metadata folder {self.root} cannot be written: "
                                         f"{exc.strerror or exc}; nothing was published") from None
            except InvalidArgument:
                catalog.engine.dispose()
                raise
        return catalog

    def _claim_folder(self) -> None:
        """Mark the metadata folder as this catalog's (its address and name), or refuse one another
        catalog marked: a publication deletes the metadata it superseded in its folder (``_prune``),
        which must never be another catalog's live metadata."""
        marker = os.path.join(self.root, MARKER)
        mine = f"{address(self.uri)}\n{self.catalog_name}\n"
        try:
            with open(marker, "x") as handle:
                handle.write(mine)
            self.owned = True
            return
        except FileExistsError:
            pass
        with open(marker) as handle:
            found = handle.read()
        if found != mine:
            where, _, name = found.partition("\n")
            raise InvalidArgument(f"the metadata folder {self.root} holds the Iceberg metadata of catalog "
                                  f"{name.strip()!r} at {shown(where)}: give each catalog a metadata folder of its own "
                                  "(metadata=, --metadata); nothing was published")
        self.owned = True

    # --- a publication ------------------------------------------------------------------

    def run(self) -> PublishReport:
        self.catalog = self._open()
        try:
            pending: set[str] | None = None
            for _ in range(ROUNDS):
                pending = self._round(pending)
                if not pending:
                    break
            for name in sorted(pending or ()):
                self._leave_out(name, f"another publisher moved it {ROUNDS} times while this one computed it")
            # On record as it is now, so that an erasure request anywhere republishes what this catalog
            # shows (R25), and no longer what left it.
            rows = self._rows() if self.written or self.removed else self.first_rows
            self._record(set(), rows=rows)
            if self.erased:
                self._forget_before(rows)
        finally:
            self.catalog.engine.dispose()
        return PublishReport(self.shown, self.catalog_name, tuple(sorted(set(self.written))),
                             tuple(sorted(set(self.unchanged) - set(self.written))), tuple(sorted(set(self.removed))),
                             dict(sorted(self.left_out.items())), self.taken, self.renewed, self.released)

    def _in_scope(self, name: str, table_id: str | None) -> bool:
        """Whether a live table or a catalog row (its name, and the instance it is) is this
        publication's to change: of ``database``, among ``tables``, among ``table_ids`` (an erasure's
        republication names instances: a row published under a name the instance no longer bears)."""
        if self.table_ids is not None:
            return table_id in self.table_ids
        if self.names is not None and name not in self.names:
            return False
        return self.database is None or name.split(".", 1)[0] == self.database

    def _round(self, only: set[str] | None) -> set[str]:
        """One pass over the tables (``only``: those that lost a race last pass); returns the names
        that lost a race this pass."""
        rows = self._rows()
        if only is None:
            self.first_rows = rows
        live = {t.name: t for t in self.ledger.tables(database=self.database) if self._in_scope(t.name, t.id)}
        if only is not None:
            live = {n: t for n, t in live.items() if n in only}
            rows = {n: r for n, r in rows.items() if n in only}
        pins = {p.id: p for p in self.ledger.pins()}
        plans: dict[str, Plan] = {}
        for name, table in live.items():
            row = rows.get(name)
            if name in self.left_out:
                continue  # left out in an earlier pass: only its removal is tried again
            if row is not None and row.table_id is None:
                self._leave_out(name, "the catalog has a table of that name that no ledger published; it is left "
                                      "as it is")
                continue
            due = self.ledger.now() - table.retention
            versions = self.ledger.versions(table_id=table.id)
            kept = sorted((v for v in versions if not v.expired and v.erased_by is None
                           and (v.current or v.superseded_at is None or v.superseded_at > due)),
                          key=lambda v: v.number)
            if row is not None and row.table_id == table.id and \
                    any(v.erased_by is not None and v.number in row.versions for v in versions):
                self.erased.add(table.id)  # it shows a version an erasure made unreadable (R25)
            if kept:
                plans[name] = Plan(table, kept)
        lost: set[str] = set()
        renew: list[str] = []
        changed: list[str] = []
        for name, plan in plans.items():
            row = rows.get(name)
            same = row is not None and row.table_id == plan.table.id
            for v in plan.kept:
                pin_id = row.pins.get(v.number) if row is not None and same else None
                if pin_id is not None and pin_id in pins:
                    plan.pins[v.number] = pin_id
                    if self._due(pins[pin_id]):
                        renew.append(pin_id)
            if same and row is not None and row.versions == tuple(v.number for v in plan.kept) \
                    and len(plan.pins) == len(plan.kept):
                self.unchanged.append(name)
            else:
                changed.append(name)
        self._renew(renew)
        waiting = list(changed)
        try:
            # On record before any table moves, so that an erasure request that lands while this
            # publication runs republishes what it is about to show (R25).
            self._record({plans[n].table.id for n in changed})
            while waiting:
                name = waiting[0]
                plan = plans[name]
                # Pinned just before its metadata names the pins: a publication killed mid-way
                # leaves only the pins of the table it was publishing (their ids in no catalog row)
                # until their lease ends, not those of every table it had yet to publish.
                self._take_pins({name: plan})
                if name in self.left_out:
                    waiting.pop(0)
                    continue
                try:
                    self._publish_table(name, plan, rows.get(name))
                except Conflict:
                    self._release(plan.new_pins)
                    lost.add(name)
                except LeftOut as exc:
                    self._release(plan.new_pins)
                    self._leave_out(name, str(exc))
                    row = rows.get(name)
                    if row is not None and row.table_id is not None:
                        # What it showed before is not renewed: it leaves the catalog rather than
                        # naming files once its pins run out.
                        try:
                            self._remove(name, row)
                        except Conflict:
                            lost.add(name)
                waiting.pop(0)
        except BaseException:
            # Any other failure ends the publication: the pins taken for what it did not show go now,
            # not at the end of their 7-day lease.
            self._release([p for n in waiting for p in plans[n].new_pins])
            raise
        for name, row in rows.items():
            if row.table_id is None or name in plans or not self._in_scope(name, row.table_id):
                continue
            try:
                self._remove(name, row)
            except Conflict:
                lost.add(name)
        return lost

    def _record(self, extra: set[str], rows: dict[str, Row] | None = None) -> None:
        """Record the instances the catalog shows (those of ``rows``, the first pass's by default)
        and ``extra``; the ledger appends nothing if that is what it holds already."""
        shown_ids = {r.table_id for r in (self.first_rows if rows is None else rows).values() if r.table_id}
        self.ledger.record_publication(address(self.uri), self.catalog_name, self.root, sorted(shown_ids | extra))

    def _due(self, pin: PinView) -> bool:
        """A pin is renewed once less than half its lease is left (a publication with nothing to
        change then appends nothing to the ledger most of the time)."""
        return bool(pin.expires_at - self.ledger.now() < pin.lease / 2)

    def _renew(self, pin_ids: list[str]) -> None:
        if pin_ids:
            views = self.ledger.renew_pins(pin_ids)
            self.renewed += sum(1 for v in views if v.live)

    def _release(self, pin_ids: list[str]) -> None:
        if pin_ids:
            self.ledger.release_pins(pin_ids)
            self.released += len(pin_ids)

    def _take_pins(self, plans: dict[str, Plan]) -> None:
        """Pin every version to show that no live pin holds: the current versions of the tables in
        one append, any other one by one."""
        current = [n for n, p in plans.items() if p.kept[-1].current and p.kept[-1].number not in p.pins]
        if current:
            try:
                for pin in self.ledger.pin_tables(current, lease=self.lease):
                    plan = plans[pin.table]
                    plan.new_pins.append(pin.id)
                    self.taken += 1
                    if pin.version == plan.kept[-1].number and pin.table_id == plan.table.id:
                        plan.pins[pin.version] = pin.id
            except LedgerError:
                pass  # one table changed in between: each is pinned on its own below
        for name, plan in plans.items():
            for v in plan.kept:
                if v.number in plan.pins:
                    continue
                try:
                    pin = self.ledger.pin(table_id=plan.table.id, version=v.number, lease=self.lease)
                except LedgerError as exc:
                    self._release(plan.new_pins)
                    plan.new_pins.clear()
                    self._leave_out(name, f"version {v.number} could not be pinned ({exc}); it is published as it "
                                          "was")
                    break
                plan.new_pins.append(pin.id)
                plan.pins[v.number] = pin.id
                self.taken += 1

    def _leave_out(self, name: str, why: str) -> None:
        log.warning("%s is not published: %s", name, why)
        self.left_out[name] = why

    # --- the catalog's rows ---------------------------------------------------------------

    def _rows(self) -> dict[str, Row]:
        try:
            with Session(self.catalog.engine) as session:
                found = session.execute(select(IcebergTables.table_namespace, IcebergTables.table_name,
                                               IcebergTables.metadata_location)
                                        .where(IcebergTables.catalog_name == self.catalog_name)).all()
        except Exception as exc:
            raise self._unavailable(exc, "cannot be read") from None
        rows = {}
        for namespace, table, location in found:
            name = f"{namespace}.{table}"
            if location is None:
                continue
            rows[name] = self._row(name, str(location))
        return rows

    def _row(self, name: str, location: str) -> Row:
        row = Row(name, location)
        try:
            with load_file_io({}, location).new_input(location).open() as handle:
                properties = json.load(handle).get("properties", {})
        except Exception:
            return row  # unreadable: not known to be a ledger's
        if TABLE_ID in properties:
            row.table_id = properties[TABLE_ID]
            row.versions = tuple(int(n) for n in properties.get(VERSIONS, "").split(",") if n)
            row.pins = {int(k): str(v) for k, v in json.loads(properties.get(PINS, "{}")).items()}
        return row

    def _swap(self, name: str, row: Row | None, location: str | None) -> None:
        """Point ``name`` at ``location`` (None: take it out), if its row is still what was read."""
        namespace, table = name.split(".", 1)
        try:
            if row is None:
                assert location is not None
                try:
                    self.catalog.create_namespace_if_not_exists(namespace)
                except (NamespaceAlreadyExistsError, IntegrityError):
                    raise Conflict(name) from None  # another publisher made it at the same time
                try:
                    self.catalog.register_table((namespace, table), location)
                except TableAlreadyExistsError:
                    raise Conflict(name) from None
                return
            where = (IcebergTables.catalog_name == self.catalog_name, IcebergTables.table_namespace == namespace,
                     IcebergTables.table_name == table, IcebergTables.metadata_location == row.location)
            with Session(self.catalog.engine) as session:
                if location is None:
                    result = session.execute(delete(IcebergTables).where(*where))
                else:
                    result = session.execute(update(IcebergTables).where(*where).values(
                        metadata_location=location, previous_metadata_location=row.location))
                if result.rowcount < 1:  # type: ignore[attr-defined]
                    session.rollback()
                    raise Conflict(name)
                session.commit()
        except (Conflict, LedgerError):
            raise
        except Exception as exc:
            raise self._unavailable(exc, "cannot be written", f"{name} was left as it was (tables before it in "
                                    "this publication were published; publish again)") from None

    def _remove(self, name: str, row: Row) -> None:
        self._swap(name, row, None)
        self.removed.append(name)
        self._release(list(row.pins.values()))

    def _publish_table(self, name: str, plan: Plan, row: Row | None) -> None:
        location = self._build(name, plan, row)
        self._swap(name, row, location)
        self.written.append(name)
        if self.owned:
            self._prune(location.rsplit("/", 1)[0])
        kept = set(plan.pins.values())
        # The pins it showed before and no longer needs, and any taken on a version that became
        # current after the read (a commit landed in between) and is not shown.
        self._release([p for p in (*(row.pins.values() if row is not None else ()), *plan.new_pins)
                       if p not in kept])

    def _forget_before(self, rows: dict[str, Row]) -> None:
        """After an erasure (R25), what the catalog showed before it must not stay
        readable, nor keep the person in its manifests' column bounds. For each table it covers,
        the catalog row's pointer to the previous metadata is cleared, and every file in the table's
        metadata folder that its metadata now does not name is deleted at once (not a day later,
        as ``_prune`` does for a reader that loaded it just before)."""
        for name, row in rows.items():
            if row.table_id not in self.erased:
                continue
            namespace, table = name.split(".", 1)
            try:
                with Session(self.catalog.engine) as session:
                    cleared = session.execute(update(IcebergTables).where(
                        IcebergTables.catalog_name == self.catalog_name, IcebergTables.table_namespace == namespace,
                        IcebergTables.table_name == table, IcebergTables.metadata_location == row.location,
                    ).values(previous_metadata_location=None))
                    session.commit()
            except Exception as exc:
                raise self._unavailable(exc, "cannot be written", f"{name}'s pointer to its metadata before the "
                                        "erasure was not cleared; publish again") from None
            if cleared.rowcount < 1:  # type: ignore[attr-defined]
                continue  # another publisher moved it since: its files are not this one's to judge
            if self.owned and row.location.startswith(f"{self.root}/{row.table_id}/"):
                self._prune(row.location.rsplit("/", 1)[0], keep=_named_by(row.location))

    def _prune(self, folder: str, keep: set[str] | None = None) -> None:
        """Delete the table's metadata files that a publication superseded more than ``SUPERSEDED``
        ago: each publication that changes a table writes all of its metadata anew, so every file
        in the folder older than that belongs to a metadata no catalog row names any more (a reader
        that loaded one that long ago loads the table again, as any Iceberg reader after an
        ``expire_snapshots``). The data files are never here: they are the ledger's, and only its
        vacuum deletes them. A file that cannot be deleted is left for the next publication.
        ``keep``: delete every file but those (by name), whatever its age."""
        filesystem, base = filesystem_for(folder)
        cutoff = time.time() - SUPERSEDED.total_seconds()
        try:
            found = filesystem.get_file_info(pafs.FileSelector(base, allow_not_found=True))
        except OSError:
            return
        for info in found:
            if info.type != pafs.FileType.File:
                continue
            old = info.mtime is not None and info.mtime.timestamp() < cutoff
            if (info.base_name not in keep) if keep is not None else old:
                try:
                    filesystem.delete_file(info.path)
                except OSError as exc:
                    log.warning("a superseded Iceberg metadata file %s was not deleted (%s): the next publication "
                                "tries again", info.path, exc)

    # --- the metadata -----------------------------------------------------------------------

    def _build(self, name: str, plan: Plan, row: Row | None) -> str:
        """Write the table's metadata anew (manifests, manifest lists, metadata JSON) and return
        the metadata file's location; nothing points at it yet."""
        table = plan.table
        location = f"{self.root}/{table.id}"
        io = load_file_io({}, location)
        layouts = [(v, version_files(table.location, v)) for v in plan.kept]
        columns = {files.columns for _, files in layouts}
        if len(columns) > 1:
            raise LeftOut(f"its kept versions are partitioned differently ({sorted(columns)}); the Iceberg "
                          "table would need partition spec evolution, which is not published")
        arrow_first = self._arrow_schema(table, layouts[0][0])
        schema = assign_fresh_schema_ids(self._iceberg_schema(arrow_first))
        partition_by = layouts[0][1].columns
        try:
            spec = PartitionSpec(*[PartitionField(source_id=schema.find_field(c).field_id, field_id=1000 + i,
                                                  transform=IdentityTransform(), name=c)
                                   for i, c in enumerate(partition_by)])
        except ValueError as exc:
            raise LeftOut(f"a partition column is not in its schema: {exc}") from None
        properties = {**PROPERTIES, TABLE_ID: table.id, VERSIONS: ",".join(str(v.number) for v in plan.kept),
                      PINS: json.dumps({str(n): p for n, p in sorted(plan.pins.items())}, separators=(",", ":")),
                      "schema.name-mapping.default": schema.name_mapping.model_dump_json()}
        number = _number(row.location) + 1 if row is not None and row.location.startswith(location + "/") else 0
        metadata_location = f"{location}/metadata/{number:05d}-{uuid.uuid4()}.metadata.json"
        start = new_table_metadata(schema=schema, partition_spec=spec, sort_order=UNSORTED_SORT_ORDER,
                                   location=location, properties=dict(properties),
                                   table_uuid=uuid.uuid5(UUID_SPACE, table.id))
        staged = StagedTable(identifier=tuple(name.split(".", 1)), metadata=start,
                             metadata_location=metadata_location, io=io, catalog=self.catalog)
        tx = Transaction(staged, autocommit=False)
        shown: dict[str, DataFile] = {}
        arrow_now = arrow_first
        last = 0
        for version, files in layouts:
            arrow = arrow_first if version is layouts[0][0] else self._arrow_schema(table, version)
            if arrow != arrow_now:
                try:
                    with tx.update_schema(allow_incompatible_changes=True) as change:
                        change.union_by_name(self._iceberg_schema(arrow))
                except Exception as exc:
                    raise LeftOut(f"version {version.number}'s schema cannot follow the one before it in Iceberg "
                                  f"({exc})") from None
                arrow_now = arrow
            wanted = self._wanted(files, version, table)
            metadata = tx.table_metadata
            stamp_ms = millis(version.committed_at)
            last = max(last, stamp_ms)
            summary = {"ledger.version": str(version.number), TABLE_ID: table.id,
                       "ledger.committed-at": version.committed_at.isoformat()}
            with tx.update_snapshot(snapshot_properties=summary).overwrite() as producer:
                producer._snapshot_id = snapshot_id(table.id, version.number)
                _stamp(producer, stamp_ms)
                for path in [p for p in shown if p not in wanted]:
                    producer.delete_data_file(shown.pop(path))
                for path, (source, size, values) in wanted.items():
                    if path not in shown:
                        shown[path] = self._data_file(metadata, files, path, source, size, values)
                        producer.append_data_file(shown[path])
        final = tx.table_metadata
        final_properties = {**final.properties,
                            "schema.name-mapping.default": final.schema().name_mapping.model_dump_json()}
        final = final.model_copy(update={"properties": final_properties, "last_updated_ms": last,
                                         "metadata_log": []})
        ToOutputFile.table_metadata(final, io.new_output(metadata_location))
        return metadata_location

    def _arrow_schema(self, table: TableInstance, version: TableVersion) -> pa.Schema:
        try:
            if version.schema is not None:
                return arrow_schema(version.schema)
            return of_version(table, version).schema
        except LedgerError as exc:
            raise LeftOut(f"version {version.number}: {exc}") from None

    @staticmethod
    def _iceberg_schema(arrow: pa.Schema) -> Schema:
        try:
            found = visit_pyarrow(arrow, _ConvertToIcebergWithoutIDs(format_version=2))
        except Exception as exc:
            raise LeftOut(f"its schema has no Iceberg form ({exc})") from None
        if not isinstance(found, Schema):
            raise LeftOut(f"its schema has no Iceberg form (it converts to {found})")
        return found

    @staticmethod
    def _wanted(files: VersionFiles, version: TableVersion,
                table: TableInstance) -> dict[str, tuple[str, int, tuple[str | None, ...]]]:
        """Each of the version's files by the path Iceberg names it: its path on its filesystem,
        its size as recorded, its partition folders' texts."""
        scheme = "" if files.local else urlsplit(table.location).scheme
        sizes = [entry.size for entry in version.files]
        return {(path if files.local else f"{scheme}://{path}"): (path, size, values)
                for path, size, values in zip(files.paths, sizes, files.values)}

    def _data_file(self, metadata: TableMetadata, files: VersionFiles, path: str, source: str, size: int,
                   texts: tuple[str | None, ...]) -> DataFile:
        schema = metadata.schema()
        try:
            with files.filesystem.open_input_file(source) as handle:
                footer = pq.read_metadata(handle)
        except (OSError, pa.ArrowException) as exc:
            raise LeftOut(f"its file {path} cannot be read ({exc}); a reader would fail on it") from None
        # Spark writes its timestamps as INT96 by default, whose statistics Iceberg has no form for:
        # those columns get none (a reader then prunes no file by them, and reads them all the same).
        int96 = {footer.schema.column(i).path for i in range(footer.num_columns)
                 if footer.schema.column(i).physical_type == "INT96"}
        plan = {**metadata.properties, **{f"write.metadata.metrics.column.{c}": "none" for c in int96}}
        stats = data_file_statistics_from_parquet_metadata(
            parquet_metadata=footer, stats_columns=compute_statistics_plan(schema, plan),
            parquet_column_mapping=parquet_path_to_id_mapping(schema))
        values = []
        for column, text in zip(files.columns, texts):
            field = schema.find_field(column)
            arrow_type = schema.as_arrow().field(column).type
            value = typed([text], arrow_type)[0]
            values.append(_to_partition_representation(field.field_type, value))
        found = DataFile.from_args(
            content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET, partition=Record(*values),
            file_size_in_bytes=size, sort_order_id=None, spec_id=metadata.default_spec_id, equality_ids=None,
            key_metadata=None, **stats.to_serialized_dict())
        found.spec_id = metadata.default_spec_id  # from_args leaves it unset; a deletion needs it
        return found


def _named_by(location: str) -> set[str]:
    """The names of the files a table's metadata at ``location`` reads: itself, its snapshots'
    manifest lists and their manifests (all in its metadata folder)."""
    io = load_file_io({}, location)
    metadata = FromInputFile.table_metadata(io.new_input(location))
    found = {location}
    for snapshot in metadata.snapshots:
        found.add(snapshot.manifest_list)
        found.update(manifest.manifest_path for manifest in snapshot.manifests(io))
    return {path.rsplit("/", 1)[-1] for path in found}


def _inside(folder: str, root: str) -> bool:
    """Whether ``folder`` is ``root`` or under it, on the same store (a local path with its links
    resolved; an object store's bucket and key, whichever of Hadoop's schemes names it)."""
    (store, path), (root_store, root_path) = _where(folder), _where(root)
    return store == root_store and (path == root_path or path.startswith(root_path.rstrip("/") + "/"))


def _where(location: str) -> tuple[str, str]:
    filesystem, path = filesystem_for(location)
    if isinstance(filesystem, pafs.LocalFileSystem):
        return "local", os.path.realpath(path)
    return filesystem.type_name, path


def _number(location: str) -> int:
    head = location.rsplit("/", 1)[-1].split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def _stamp(producer: Any, at_ms: int) -> None:
    """Make the snapshot ``producer`` commits carry ``at_ms`` as its timestamp (pyiceberg 0.12 has
    no public way: the snapshot in the update it returns is replaced by a copy)."""
    original: Callable[[], Any] = producer._commit

    def commit() -> Any:
        updates, requirements = original()
        snapshot = updates[0].snapshot.model_copy(update={"timestamp_ms": at_ms})
        return (type(updates[0])(snapshot=snapshot),) + tuple(updates[1:]), requirements

    setattr(producer, "_commit", commit)
