"""The read-only questions a ledger answers, over one folded state: now, or as of a past point.

``Ledger`` asks them of the state caught up with the log; ``AsOf`` (``Ledger.as_of``)
of the state folded up to an earlier event (R17). Both are this one class, so the past
answers exactly the questions the present does, in the same words, and equals the
fold of the log up to that point by construction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime, timedelta
from typing import Callable, Iterator, TypeVar

from .clock import from_micros, to_micros
from .core.model import State
from .core.tables import Instance, require_live
from .core.versions import Version, choose, parse_manifest, read_manifest
from .errors import InvalidArgument, LedgerCorrupt, TableNotFound
from .names import LEDGER, Scope, table_id as valid_table_id, table_name
from .persistence.contract import EventStore
from .persistence.snapshot import prefetch_instances, read_all
from .views import FileEntry, TableInstance, TableVersion, WriteView

_T = TypeVar("_T")


class Catalog(ABC):
    """Queries over ``_current()``, the state they answer from (subclasses say which)."""

    store: EventStore
    _recorded_root: str
    """The root recorded when the ledger was created: the warehouse until a move is recorded."""

    @abstractmethod
    def _current(self) -> State:
        """The folded state the queries answer from."""

    def _root(self, state: State) -> str:
        """The warehouse root that state's locations are under."""
        return state.warehouse.root or self._recorded_root

    # --- tables ---------------------------------------------------------------------------

    def table(self, name: str) -> TableInstance:
        """The live instance bound to ``name``."""
        state = self._current()
        return TableInstance.of(state, require_live(state, name), self._root(state))

    def instance(self, table_id: str) -> TableInstance:
        """Any instance by id, live, dropped or purged."""
        state = self._current()
        return TableInstance.of(state, self._instance(state, table_id), self._root(state))

    def tables(self, *, database: str | None = None) -> list[TableInstance]:
        """Live tables, by name."""
        state = self._current()
        prefix = None if database is None else Scope.database(database).key + "."
        root = self._root(state)
        ids = [i for name, i in sorted(state.tables.bindings.items()) if prefix is None or name.startswith(prefix)]
        prefetch_instances(state, ids)
        instances = state.tables.instances
        return [TableInstance.of(state, instances[i], root) for i in ids]

    def dropped_tables(self, *, database: str | None = None, name: str | None = None) -> list[TableInstance]:
        """Dropped, unpurged instances, newest drop first."""
        state = self._current()
        found = state.tables.dropped_instances(
            database=None if database is None else Scope.database(database).key,
            name=None if name is None else table_name(name))
        root = self._root(state)
        return [TableInstance.of(state, inst, root) for inst in found]

    # --- watermarks and retention -------------------------------------------------------------

    def watermark(self, scope: Scope | str | None = LEDGER) -> datetime | None:
        """The watermark set at exactly ``scope`` (``"ledger"``, ``"database:<name>"``, ``"table:<id>"``),
        or None if none was ever set there. What blocks an instance is the latest of the ones that
        cover it (``TableInstance.effective_watermark``)."""
        found = self._current().guard.watermark(self._known_scope(scope))
        return None if found is None else from_micros(found)

    def retention(self, scope: Scope | str | None = LEDGER) -> timedelta | None:
        """The retention set at exactly this scope (None: not set here; see ``effective_retention``)."""
        found = self._current().guard.retentions.get(str(self._known_scope(scope)))
        return None if found is None else timedelta(seconds=found)

    def effective_retention(self, scope: Scope | str | None = LEDGER) -> tuple[timedelta, str]:
        """The retention that applies at a scope, and where it comes from (the scope itself, a
        wider one, or ``default``): what a table dropped there would get."""
        where = self._known_scope(scope)
        state = self._current()
        if where.kind == "table":
            instance = state.tables.instance(where.key)
            assert instance is not None  # _known_scope refused a table scope of no instance
            source, seconds = state.guard.retention_source(instance)
        elif where.kind == "database" and str(where) in state.guard.retentions:
            source, seconds = str(where), state.guard.retentions[str(where)]
        else:
            source, seconds = state.guard.ledger_retention()
        return timedelta(seconds=seconds), source

    def _known_scope(self, scope: Scope | str | None) -> Scope:
        where = Scope.parse(scope)
        if where.kind == "table" and not self._current().tables.has_id(where.key):
            raise TableNotFound(f"scope {where}: there is no table with id {where.key}")
        return where

    # --- versions and writes --------------------------------------------------------------

    def versions(self, name: str | None = None, *, table_id: str | None = None) -> list[TableVersion]:
        """Every version of the live table ``name``, or of any instance by ``table_id`` (a dropped
        one too: what an undrop would bring back), newest first (``expired`` ones included)."""
        state = self._current()
        if (name is None) == (table_id is None):
            raise InvalidArgument("versions needs a live table's name, or table_id= for any instance (a dropped "
                                  "one's id is in dropped_tables)")
        inst = require_live(state, name) if name is not None else self._instance(state, table_id)
        return [TableVersion.of(state, v, self._files_of(state)) for v in state.data.history(inst.id)]

    @staticmethod
    def _instance(state: State, table_id: object) -> Instance:
        key = valid_table_id(table_id)
        inst = state.tables.instance(key)
        if inst is None:
            raise TableNotFound(f"there is no table with id {key}")
        return inst

    def version(self, name: str, *, version: int | None = None, as_of: datetime | None = None) -> TableVersion:
        """The version a read would use: the current one, version ``version``, or the newest one
        committed at or before ``as_of``. An expired one is ``VersionExpired`` (R12)."""
        state = self._current()
        inst = require_live(state, name)
        chosen = choose(state, inst, version, None if as_of is None else to_micros(as_of))
        return TableVersion.of(state, chosen, self._files_of(state))

    def retention_mark(self, name: str) -> datetime | None:
        """The live table's retention mark (R12): versions committed at or before it are expired.
        None if it never moved."""
        state = self._current()
        found = state.data.mark(require_live(state, name).id)
        return None if found is None else from_micros(found)

    def open_writes(self, *, name: str | None = None) -> list[WriteView]:
        """Writes registered and not yet committed, aborted or swept, oldest first."""
        state = self._current()
        table_id = None if name is None else require_live(state, name).id
        root = self._root(state)
        return [WriteView.of(state, w, root) for w in state.data.open_writes(table_id)]

    def _files_of(self, state: State) -> Callable[[Version], tuple[FileEntry, ...]]:
        """Every file a version names, read (when first asked) from the manifests stored with its
        commits, as the version was in ``state``."""
        def files(v: Version) -> tuple[FileEntry, ...]:
            return tuple(FileEntry(path, size) for path, size in self._version_files(state, v))
        return files

    def _version_files(self, state: State, v: Version,
                       read: dict[str, list[tuple[str, int]]] | None = None) -> list[tuple[str, int]]:
        """A version's ``(path, size)`` pairs, sorted: its chain's lists, less what its replaces removed.
        ``read``: lists already read, by digest (a caller walking many versions reads each list once)."""
        def listed(digest: str) -> list[tuple[str, int]]:
            if read is None:
                return self._manifest(digest)
            if digest not in read:
                read[digest] = self._manifest(digest)
            return read[digest]
        removed = {path for digest in state.data.removals(v) for path, _ in listed(digest)}
        found = [(path, size) for _write, digest in state.data.parts(v) for path, size in listed(digest)
                 if path not in removed]
        return sorted(found)

    def _manifest(self, digest: str) -> list[tuple[str, int]]:
        """A stored file list, checked against the digest its hashed commit carries every time it is
        read: an edited list must never make a read return fewer rows (R11), nor make the vacuum
        take a file the log names for a straggler (R15)."""
        return self._checked(digest, parse_manifest)

    def _manifest_pairs(self, digest: str) -> Iterator[tuple[str, int]]:
        """``_manifest``'s pairs one at a time, for a reader that takes each once (the vacuum's driver,
        R20): checked against the digest before the first, never held parsed whole."""
        return self._pairs(digest, read_manifest(self._checked(digest, lambda data: data)))

    def _checked(self, digest: str, parse: Callable[[bytes], _T]) -> _T:
        return self.store.checked_blob(digest, f"{self.store.path}: the file list {digest}", parse,
                                       "does not match the digest its commit carries (it was edited)")

    def _pairs(self, digest: str, pairs: Iterator[tuple[str, int]]) -> Iterator[tuple[str, int]]:
        try:
            yield from pairs
        except (ValueError, TypeError) as exc:
            raise LedgerCorrupt(f"{self.store.path}: the file list {digest} cannot be read ({exc}); restore the "
                                "ledger from a backup") from None


class AsOf(Catalog):
    """The catalog as it was after event ``seq`` (R17): read-only, answering the same queries as
    the present. ``time`` is that event's time (None before the first event)."""

    def __init__(self, store: EventStore, state: State, recorded_root: str) -> None:
        self.store = store
        self._state = state
        self._recorded_root = recorded_root

    @property
    def seq(self) -> int:
        return self._state.seq

    @property
    def time(self) -> datetime | None:
        return from_micros(self._state.last_time) if self._state.seq else None

    @property
    def state(self) -> State:
        """The folded state, read in full (it borrows from the present's stored snapshot), as
        ``Ledger.state`` is."""
        read_all(self._state)
        return self._state

    @property
    def warehouse(self) -> str:
        """The warehouse root as it was then (a later move does not change past locations)."""
        return self._root(self._state)

    def now(self) -> datetime | None:
        """The as-of point's time: what "now" was for these answers."""
        return self.time

    def _current(self) -> State:
        return self._state

    def __repr__(self) -> str:
        return f"<AsOf seq={self.seq} time={self.time.isoformat() if self.time else None}>"
