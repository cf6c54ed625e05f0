"""The pure core, tested without SQLite: events, evolve/fold, decide."""

from __future__ import annotations

import itertools

import pytest

from ledger import IncompatibleLedger, LedgerCorrupt, TableExists, UndropBlocked
from ledger.core.events import UPCASTERS, Recorded, decode, encode, type_of
from ledger.core.guard import AdvanceWatermark, RetentionSet, WatermarkAdvanced
from ledger.core.model import State, decide, evolve, fold, fold_placed
from ledger.core.tables import (
    CATALOG_STREAM, CreateTable, DatabaseDropped, DropDatabase, DatabaseUndropped, DropTable, TableCreated,
    TableDropped, TablePurged, TableUndropped, UndropTable,
)
from ledger.core.vacuums import VacuumFinished, VacuumStarted
from ledger.names import Scope
from vacuum_work import Result

ID_A, ID_B = "a" * 16, "b" * 16
ROOT = "/warehouse"
"""The warehouse root a vacuum's plan is made under (the core touches no file)."""


def recorded(*events_and_streams) -> list[Recorded]:
    """Number events as a store would: seq, per-stream version, time = seq * 10."""
    versions: dict[str, int] = {}
    out = []
    for seq, item in enumerate(events_and_streams, start=1):
        stream, event = item if isinstance(item, tuple) else (CATALOG_STREAM, item)
        versions[stream] = versions.get(stream, 0) + 1
        out.append(Recorded(seq, stream, versions[stream], seq * 10, "t", event))
    return out


EVERY_EVENT = [
    TableCreated(ID_A, "db.t", ID_A), TableDropped(ID_A, "db.t"), TableUndropped(ID_A, "db.u"),
    DatabaseDropped("db", (ID_A,)), DatabaseUndropped("db", (ID_A,)),
    WatermarkAdvanced("ledger", 5), RetentionSet("database:db", 86400),
    TablePurged(ID_A, "run", 2, 30), VacuumStarted("run", (ID_A,), {"ledger": 5}, "db", 3),
    VacuumFinished("run", 1, 0, 2, 30),
]


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e).__name__)
def test_every_event_round_trips_through_its_payload(event) -> None:
    name, version = type_of(event)
    back = decode(7, "s", 1, name, version, 123, "me", encode(event))
    assert back == Recorded(7, "s", 1, 123, "me", event)


def test_old_schema_versions_are_upcast(monkeypatch) -> None:
    monkeypatch.setitem(UPCASTERS, ("TableDropped", 0), lambda d: {"table_id": d["id"], "name": d["table"]})
    old = decode(1, "catalog", 1, "TableDropped", 0, 5, "me", '{"id": "x", "table": "db.t"}')
    assert old.event == TableDropped("x", "db.t")


@pytest.mark.parametrize("schema_version, payload, named", [
    (1, '{"table_id": "x", "name": "db.t", "colour": "blue"}', "unknown field `colour`"),
    (1, '{"table_id": ["x"], "name": "db.t"}', "Expected `str`, got `array` - at `$.table_id`"),
    (1, '{"table_id": "x"}', "missing required field `name`"),
    (0, '{"id": "x", "table": "db.t", "colour": "blue"}', "unknown field `colour`"),
    (0, '{"id": 7, "table": "db.t"}', "Expected `str`, got `int` - at `$.table_id`"),
], ids=["extra", "wrong-type", "missing", "upcast-extra", "upcast-wrong-type"])
def test_r10_a_payload_that_does_not_fit_its_event_is_corrupt_naming_the_field(
        monkeypatch, schema_version: int, payload: str, named: str) -> None:
    def upcast(old: dict) -> dict:  # renames two fields and passes the rest on, as an upcaster may
        rest = {key: value for key, value in old.items() if key not in ("id", "table")}
        return {"table_id": old["id"], "name": old["table"], **rest}
    monkeypatch.setitem(UPCASTERS, ("TableDropped", 0), upcast)
    with pytest.raises(LedgerCorrupt, match="event #4 \\(TableDropped\\) has a payload that does not fit") as caught:
        decode(4, "catalog", 1, "TableDropped", schema_version, 5, "me", payload)
    assert named in str(caught.value)


def test_newer_schema_version_is_refused() -> None:
    with pytest.raises(IncompatibleLedger, match="schema version 2.*upgrade"):
        decode(1, "catalog", 1, "TableDropped", 2, 5, "me", '{"table_id": "x", "name": "db.t"}')


def test_evolve_is_pure_and_fold_equals_repeated_evolve() -> None:
    log = recorded(TableCreated(ID_A, "db.t", ID_A), TableDropped(ID_A, "db.t"),
                   TableCreated(ID_B, "db.t", ID_B), (("watermark:ledger"), WatermarkAdvanced("ledger", 20)))
    empty = State()
    one = evolve(empty, log[0])
    assert empty == State() and one.tables.live("db.t").id == ID_A
    stepwise = empty
    for rec in log:
        stepwise = evolve(stepwise, rec)
    assert stepwise == fold(empty, log)
    assert stepwise.tables.dropped["db.t"] == (ID_A,) and stepwise.tables.bindings["db.t"] == ID_B
    assert stepwise.guard.is_blocked(stepwise.tables.instances[ID_A])


def _contents(state: State) -> dict[str, dict]:
    """Every map of every slice of ``state``, copied into plain dicts (what it holds, not where)."""
    import attrs
    slices = [getattr(state, f.name) for f in attrs.fields(State) if attrs.has(type(getattr(state, f.name)))]
    return {f"{type(part).__name__}.{f.name}": dict(getattr(part, f.name).items())
            for part in slices for f in attrs.fields(type(part)) if hasattr(getattr(part, f.name), "items")}


def test_a_command_folded_back_as_placed_is_its_recorded_fold_and_leaves_every_state_held_before_as_it_was() -> None:
    """A command folds its own events back as the store placed them (``fold_placed``, no
    ``Recorded`` envelope): the same state as ``fold``, and no state anyone held before (an earlier
    ``as_of``, the state a caller was given) sees a change made after it."""
    log = recorded(TableCreated(ID_A, "db.t", ID_A), ("watermark:ledger", WatermarkAdvanced("ledger", 5)),
                   TableDropped(ID_A, "db.t"), TableCreated(ID_B, "db.t", ID_B),
                   ("watermark:database:db", WatermarkAdvanced("database:db", 25)), TableDropped(ID_B, "db.t"),
                   TableUndropped(ID_A, "db.t"))
    held, state = [], State()
    for rec in log:
        held.append((state, _contents(state), state.seq, state.streams))
        state = fold_placed(state, [(rec.seq, rec.stream, rec.version, rec.time, rec.event)])
    assert state == fold(State(), log)
    for before, contents, seq, streams in held:
        assert _contents(before) == contents and before.seq == seq and before.streams is streams
    with pytest.raises(LedgerCorrupt, match="wrong type"):
        fold_placed(state, [(state.seq + 1, CATALOG_STREAM, state.version(CATALOG_STREAM) + 1, 1000,
                            TableCreated(7, "db.x", "p"))])


def _maps(state: State) -> dict[str, object]:
    """Every map of every slice of ``state``, as the very object the state holds."""
    import attrs
    slices = [getattr(state, f.name) for f in attrs.fields(State) if attrs.has(type(getattr(state, f.name)))]
    return {f"{type(part).__name__}.{f.name}": getattr(part, f.name)
            for part in slices for f in attrs.fields(type(part)) if hasattr(getattr(part, f.name), "items")}


@pytest.mark.parametrize("tables", [3, 5000], ids=["persistent-maps", "maps-over-a-replay's-dicts"])
def test_a_fold_shares_every_map_its_events_leave_alone_and_never_changes_one_it_shares(tables: int) -> None:
    """Copy-on-write per map: a fold makes a new map only of the maps its events change; every
    other map of the state after is the very object the state before holds, and folding on from
    either state, in any order, never changes a map another state holds (with 5,000 tables the
    maps are frozen over the plain dicts a replay built, ``fold.HOLD_AT``)."""
    ids = [f"{i:016x}" for i in range(tables)]
    base = fold(State(), recorded(*[TableCreated(id_, f"db.t{i}", id_) for i, id_ in enumerate(ids)],
                                  ("watermark:ledger", WatermarkAdvanced("ledger", 5))))

    def one(state: State, stream: str, event: object) -> State:
        return fold_placed(state, [(state.seq + 1, stream, state.version(stream) + 1, state.last_time + 10, event)])

    watermark = one(base, "watermark:database:db", WatermarkAdvanced("database:db", 7))
    created = one(base, CATALOG_STREAM, TableCreated(ID_A, "db.new", ID_A))
    dropped = one(created, CATALOG_STREAM, TableDropped(ids[0], "db.t0"))
    undropped = one(dropped, CATALOG_STREAM, TableUndropped(ids[0], "db.t0"))
    held = {name: (state, _contents(state), _maps(state))
            for name, state in [("base", base), ("watermark", watermark), ("created", created), ("dropped", dropped)]}
    changed = {"watermark": {"Guard.watermarks"}, "created": {"Tables.instances", "Tables.bindings"},
               "dropped": {"Tables.instances", "Tables.bindings", "Tables.dropped"}}
    for name, after_one in changed.items():
        before = {"watermark": base, "created": base, "dropped": created}[name]
        after, previous = _maps(held[name][0]), _maps(before)
        assert {field for field in after if after[field] is not previous[field]} == after_one, name
    one(dropped, CATALOG_STREAM, TableCreated(ID_B, "db.other", ID_B))  # a second branch off ``dropped``
    one(watermark, "watermark:ledger", WatermarkAdvanced("ledger", 9))
    for name, (state, contents, maps) in held.items():
        assert _contents(state) == contents, name
        assert all(now is maps[field] for field, now in _maps(state).items()), name
    assert undropped.tables.bindings["db.t0"] == ids[0] and "db.t0" not in dropped.tables.bindings
    assert dropped.tables.dropped["db.t0"] == (ids[0],) and "db.t0" not in undropped.tables.dropped


@pytest.mark.parametrize("mangle, message", [
    (lambda log: [log[0], log[0]], "sequence numbers must run without gaps"),
    (lambda log: [log[0], Recorded(2, "catalog", 2, 10, "t", log[1].event)], "times must increase"),
    (lambda log: [log[0], Recorded(2, "catalog", 3, 20, "t", log[1].event)], "expected 2"),
    (lambda log: [Recorded(1, "catalog", 1, 10, "t", TableDropped(ID_A, "db.t"))], "never created"),
])
def test_fold_refuses_an_inconsistent_log(mangle, message) -> None:
    log = recorded(TableCreated(ID_A, "db.t", ID_A), TableDropped(ID_A, "db.t"))
    with pytest.raises(LedgerCorrupt, match=message):
        fold(State(), mangle(log))


def test_r4_decide_undrop_reads_its_database_catalog_and_all_three_watermark_scopes() -> None:
    state = fold(State(), recorded(TableCreated(ID_A, "db.t", ID_A), TableDropped(ID_A, "db.t")))
    decision = decide(state, UndropTable("db.t"))
    assert decision.events == (("catalog:db", TableUndropped(ID_A, "db.t")),)
    assert decision.reads == {CATALOG_STREAM, "catalog:db", "watermark:ledger", "watermark:database:db",
                              f"watermark:table:{ID_A}"}
    # Into another database: the ledger-wide stream, which every catalog decision reads (R4, R7).
    across = decide(state, UndropTable("db.t", None, "other.t"))
    assert across.events == ((CATALOG_STREAM, TableUndropped(ID_A, "other.t")),)
    assert {"catalog:db", "catalog:other", CATALOG_STREAM} <= across.reads


def test_r18_catalog_decisions_in_different_databases_read_nothing_the_other_writes() -> None:
    """Hosts working in different databases never make each other retry: a create, drop or
    write in one database neither reads nor writes another's stream."""
    state = fold(State(), recorded(TableCreated(ID_A, "a.t", ID_A), TableCreated(ID_B, "b.t", ID_B)))
    decisions = [decide(state, CreateTable("a.new", "c" * 16)), decide(state, DropTable("a.t")),
                 decide(state, DropDatabase("a"))]
    others = [decide(state, CreateTable("b.new", "d" * 16)), decide(state, DropTable("b.t"))]
    for one in decisions:
        for other in others:
            assert not {s for s, _ in one.events} & other.reads and not {s for s, _ in other.events} & one.reads


def test_decide_guard_and_names_without_any_storage() -> None:
    state = fold(State(), recorded(
        TableCreated(ID_A, "db.t", ID_A), TableDropped(ID_A, "db.t"),
        ("watermark:database:db", WatermarkAdvanced("database:db", 20))))
    with pytest.raises(UndropBlocked, match="scope database:db"):
        decide(state, UndropTable("DB.T"))
    state = evolve(state, Recorded(4, CATALOG_STREAM, 3, 40, "t", TableCreated(ID_B, "db.t", ID_B)))
    with pytest.raises(TableExists):
        decide(state, CreateTable("db.t", "c" * 16))
    assert decide(state, DropTable("db.t")).events[0][1] == TableDropped(ID_B, "db.t")


def test_decide_advance_is_fetch_and_set() -> None:
    scope = Scope.parse("ledger")
    state = State()
    first = decide(state, AdvanceWatermark(scope, 100, 1000))
    assert first.result is None and first.events[0][1] == WatermarkAdvanced("ledger", 100)
    state = fold(state, recorded(("watermark:ledger", first.events[0][1])))
    again = decide(state, AdvanceWatermark(scope, 50, 1000))
    assert again.events == () and again.result == 100


def test_database_drop_gives_every_table_one_drop_time() -> None:
    ids = ["%016x" % i for i in range(3)]
    log = recorded(*(TableCreated(i, f"db.t{n}", i) for n, i in enumerate(ids)),
                   DatabaseDropped("db", tuple(ids)))
    state = fold(State(), log)
    assert {state.tables.instances[i].dropped_at for i in ids} == {40}
    assert state.tables.database_drops["db"].table_ids == tuple(ids)
    assert sorted(itertools.chain.from_iterable(state.tables.dropped.values())) == ids


def test_vacuum_plan_honours_retention_to_the_microsecond() -> None:
    from ledger.core.vacuums import StartVacuum, plan_vacuum

    week = 7 * 86_400 * 1_000_000
    state = fold(State(), recorded(TableCreated(ID_A, "db.t", ID_A), TableDropped(ID_A, "db.t")))
    dropped_at = state.tables.instances[ID_A].dropped_at
    assert plan_vacuum(state, StartVacuum("r", dropped_at + week - 1, ROOT)).purges == ()
    due = plan_vacuum(state, StartVacuum("r", dropped_at + week, ROOT))
    assert [p.table_id for p in due.purges] == [ID_A] and dict(due.watermarks) == {"ledger": dropped_at}
    state = fold(state, [Recorded(3, "retention:database:db", 1, 30, "t", RetentionSet("database:db", 30 * 86_400))])
    assert plan_vacuum(state, StartVacuum("r", dropped_at + 29 * 86_400 * 1_000_000, ROOT)).purges == ()


def test_a_plan_says_once_whether_a_vacuum_has_anything_to_do() -> None:
    """``Plan.empty``: nothing a run would record (a run taken over is something); ``Plan.idle``:
    no Spark job is needed, the one condition the CLI and the driver ask (a dry run still lists
    the foreign files of the tables it looked at; a run never deletes them)."""
    from vacuum_work import ForeignScan, Plan
    nothing = Plan(run_id=None, root=ROOT, now=0)
    foreign = Plan(run_id=None, root=ROOT, now=0, foreign=(ForeignScan(ID_A, "db.t", ID_A),))
    resumed = Plan(run_id=None, root=ROOT, now=0, resumes=("an-earlier-run",))
    assert nothing.empty and nothing.idle(dry_run=False) and nothing.idle(dry_run=True)
    assert foreign.empty and foreign.idle(dry_run=False) and not foreign.idle(dry_run=True)
    assert not resumed.empty and not resumed.idle(dry_run=False) and not resumed.idle(dry_run=True)

def _decided(state: State, command) -> list[Recorded]:
    """A decision's events numbered on from ``state`` as a store would (time = seq * 10)."""
    records = []
    for offset, (stream, event) in enumerate(decide(state, command).events, start=1):
        seq = state.seq + offset
        version = state.streams.get(stream, 0) + sum(r.stream == stream for r in records) + 1
        records.append(Recorded(seq, stream, version, seq * 10, "t", event))
    return records


def test_r16_a_replay_of_thousands_of_tables_leaves_every_purge_archived_for_its_snapshot() -> None:
    """A replay from nothing keeps its big maps as it built them (an ``OverlayMap`` over the dict, not
    a copy into a persistent map). What a stored snapshot keeps of it must still be what the same
    log folded command by command gives: every purged instance in the archive, none left among
    the instances (R8: purged is final, and stays in the history)."""
    from ledger.core.fold import HOLD_AT
    from ledger.core.vacuums import FinishVacuum, StartVacuum

    ids = ["%016x" % i for i in range(HOLD_AT + 2)]
    commands = [CreateTable(f"db.t{n}", i) for n, i in enumerate(ids)]
    commands += [DropTable(f"db.t{n}") for n in range(len(ids) - 1)]  # the last table stays live
    stepwise, log = State(), []
    for command in commands:
        records = _decided(stepwise, command)
        stepwise, log = fold(stepwise, records), log + records
    start = StartVacuum("run", stepwise.last_time + 7 * 86_400 * 1_000_000, ROOT)
    purges = decide(stepwise, start).result.purges
    assert sorted(p.table_id for p in purges) == ids[:-1]
    for command in (start, FinishVacuum("run", tuple(Result(p, 1, 10) for p in purges))):
        records = _decided(stepwise, command)
        stepwise, log = fold(stepwise, records), log + records

    replayed = fold(State(), log)
    assert replayed == stepwise
    from ledger.persistence.archive import for_snapshot
    kept, expected = for_snapshot(replayed.tables), for_snapshot(stepwise.tables)
    assert kept == expected
    assert set(kept.instances) == {ids[-1]}
    assert sorted(i.id for i in kept.archive.values()) == ids[:-1]
    assert all(i.purged_at is not None for i in kept.archive.values())


def test_r16_a_fold_in_steps_is_the_fold_at_every_stop_and_tells_what_changed_since_the_last() -> None:
    """``fold_in_steps`` keeps its maps from stop to stop (``maintain`` storing, or ``verify``
    checking, history snapshots): at each look its state is the fold of the log so far, and it
    tells exactly the keys of each map that changed since the last look (what an encoder
    re-encodes): every key, the first time."""
    from ledger.core.fold import HOLD_AT
    from ledger.core.model import fold_in_steps
    from ledger.core.vacuums import FinishVacuum, StartVacuum

    ids = ["%016x" % i for i in range(HOLD_AT + 50)]
    commands = [CreateTable(f"db.t{n}", i) for n, i in enumerate(ids)]
    commands += [DropTable(f"db.t{n}") for n in range(0, len(ids), 3)]
    state, log = State(), []
    for command in commands:
        records = _decided(state, command)
        state, log = fold(state, records), log + records
    start = StartVacuum("run", state.last_time + 7 * 86_400 * 1_000_000, ROOT)
    purges = [p for p in decide(state, start).result.purges if p.table_id in ids[:30:3]]
    assert sorted(p.table_id for p in purges) == ids[:30:3]
    for command in (start, FinishVacuum("run", tuple(Result(p, 1, 10) for p in purges))):
        records = _decided(state, command)
        state, log = fold(state, records), log + records
    rows = [(r.seq, r.stream, r.version, *type_of(r.event), r.time, r.actor, encode(r.event)) for r in log]

    steps, previous = fold_in_steps(State()), {}
    for start, stop in itertools.pairwise([0, 5, HOLD_AT - 1, HOLD_AT + 20, len(rows) - 3, len(rows) - 1, len(rows)]):
        assert steps.fold_rows(rows[start:stop]) == stop
        looked, changed = steps.look()
        assert looked == fold(State(), log[:stop]) and looked.seq == stop
        now = dict(looked.tables.instances.items())
        expected = {k for k in now.keys() | previous.keys() if now.get(k) is not previous.get(k)}
        assert changed.get("tables.instances", set()) == expected
        previous = now
    assert steps.fold_rows([]) == len(rows)
    again, changed = steps.look()
    assert again == looked and not any(changed.values())  # nothing more: nothing changed


@pytest.mark.parametrize("text", ["a.b", "Sales.Orders_2", "_.x", "x" * 64 + ".y", "x" * 65 + ".y", "a.b.c", "1a.b",
                                  "a.", ".b", "ab", "a.b\n", "a.b ", "a-b.c", "é.b", "a." + "b" * 64, "a." + "b" * 65])
def test_a_table_name_checked_in_one_match_is_what_the_part_by_part_checks_say(text: str) -> None:
    """``table_name`` accepts a valid name in one match (a command's hot path); every name it
    accepts or refuses that way is accepted, or refused with a message, by the checks of each part."""
    from ledger import InvalidName
    from ledger.names import database_name, table_name
    parts = text.split(".")
    try:
        expected: str | None = f"{database_name(parts[0])}.{database_name(parts[1])}" if len(parts) == 2 else None
    except InvalidName:
        expected = None
    if expected is None:
        with pytest.raises(InvalidName, match=r"(database|table) part of|must be 'database.table'"):
            table_name(text)
    else:
        assert table_name(text) == expected == text.lower()


def test_the_system_clock_is_read_as_whole_microseconds_without_a_datetime(monkeypatch) -> None:
    """Every caller of ``read_clock`` gets the cheap read of the system clock (a command reads it
    once): the system time floored to whole microseconds, as ``system_clock`` gives it, without
    making a datetime; any other clock is still asked, and must answer with an aware time."""
    import time
    from datetime import datetime, timezone

    import ledger.clock as clock
    from ledger import InvalidTime

    class NoNow(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            raise AssertionError("the system clock was read through a datetime")

    assert clock.read_clock(lambda: datetime(2026, 1, 1, tzinfo=timezone.utc)) == 1_767_225_600_000_000
    for us in (clock.MIN_MICROS, -1, 0, 1_767_225_600_123_456, clock.MAX_MICROS):  # and back, to the microsecond
        assert clock.to_micros(clock.from_micros(us)) == us
    with pytest.raises(InvalidTime, match="clock returned a bad time"):
        clock.read_clock(lambda: datetime(2026, 1, 1))
    monkeypatch.setattr(clock, "datetime", NoNow)
    before = time.time_ns() // 1000
    read = clock.read_clock(clock.system_clock)
    assert before <= read <= time.time_ns() // 1000
