"""A version that replaces some files of its base (issue 47, item 1): R11 and R13 unchanged.

``commit_write(..., mode="replace", removes=[...])`` names the current version's files minus
``removes`` plus the write's own. No write deletes anything (R11): the removed files stay named
by the older versions; and no vacuum's expiry ever takes a folder a version it leaves unexpired
names, even partly (R13). The ledger alone decides here: no Spark, no files on disk (a plan
names folders; the test checks them against what the kept versions name).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ledger import Ledger, ManualClock
from ledger.errors import Conflict, InvalidArgument, LedgerCorrupt, SchemaMismatch
from tests.conftest import T0
from tests.test_versions import _forge_blob

DAY = timedelta(days=1)


@pytest.fixture
def led(tmp_path: Path, clock: ManualClock):
    with Ledger.open(tmp_path / "ledger.db", clock=clock, actor="test") as ledger:
        ledger.create_table("sales.orders")
        yield ledger


def commit(led: Ledger, *names: str, mode: str = "append", removes: tuple[str, ...] = (),
           name: str = "sales.orders", schema: str | None = None) -> tuple[int, list[str]]:
    """A write of files ``names`` (10 bytes each) committed by hand: the version's number and the paths."""
    w = led.begin_write(name)
    paths = [f"{w.relative_folder}/{n}" for n in names]
    v = led.commit_write(w.id, [(p, 10) for p in paths], mode=mode, removes=removes, schema=schema)
    return v.number, paths


def files_of(led: Ledger, number: int, name: str = "sales.orders") -> set[str]:
    return {f.path for f in led.version(name, version=number).files}


# --- what a replace version names ---------------------------------------------------------

def test_r11_a_replace_names_its_base_minus_the_removed_plus_its_own_and_the_older_versions_keep_theirs(led) -> None:
    one, (a, b, c) = commit(led, "a", "b", "c")
    two, (d,) = commit(led, "d")
    three, (e,) = commit(led, "e", mode="replace", removes=(b, d))
    assert files_of(led, three) == {a, c, e}
    assert files_of(led, two) == {a, b, c, d} and files_of(led, one) == {a, b, c}  # R11: nothing deleted
    version = led.version("sales.orders")
    assert (version.mode, version.file_count, version.bytes) == ("replace", 3, 30)
    four, (f,) = commit(led, "f")  # an append on a replace keeps what the replace kept
    assert files_of(led, four) == {a, c, e, f}
    five, _ = commit(led, mode="replace", removes=(a, f))  # adds nothing: the table keeps c and e
    assert files_of(led, five) == {c, e} and led.version("sales.orders").file_count == 2
    restored = led.restore_table("sales.orders", version=two)
    assert {x.path for x in restored.files} == {a, b, c, d}
    six, (g,) = commit(led, "g", mode="replace", removes=(b,))  # a replace of a restore
    assert files_of(led, six) == {a, c, d, g}
    assert [v.file_count for v in led.versions("sales.orders")] == [4, 4, 2, 4, 3, 4, 3]
    assert all(v.file_count == len(v.files) for v in led.versions("sales.orders"))
    led.verify()
    led.close()
    with Ledger.open(led.path, clock=led.clock) as again:  # folded again from the log
        assert files_of(again, six) == {a, c, d, g} and files_of(again, three) == {a, c, e}
        again.verify()


def test_r11_a_replace_on_a_reopened_ledger_and_as_of_reads_the_same_files(led, clock) -> None:
    commit(led, "a", "b")
    clock.advance(DAY)
    before = led.now()
    _, (a, b) = commit(led, "a2", "b2", mode="overwrite")
    clock.advance(DAY)
    three, (c,) = commit(led, "c", mode="replace", removes=(a,))
    assert {f.path for f in led.as_of(time=led.now()).version("sales.orders").files} == {b, c}
    assert led.as_of(time=before).version("sales.orders").file_count == 2


def test_r11_history_says_a_replace_and_its_counts(led) -> None:
    _, (a, b) = commit(led, "a", "b")
    commit(led, "c", mode="replace", removes=(a,))
    entry = led.history("sales.orders", type="VersionCommitted")[-1]
    assert "committed (replace)" in entry.text and "in place of 1 file" in entry.text


# --- refusals: typed, one line, nothing recorded ------------------------------------------

@pytest.mark.parametrize("case", ["not-a-file", "twice", "everything-for-nothing", "not-replace", "no-version",
                                  "a-path-string", "other-table"])
def test_r11_a_replace_that_cannot_be_is_refused_typed_and_records_nothing(led, case: str) -> None:
    led.create_table("sales.other")
    if case != "no-version":
        _, (a, b) = commit(led, "a", "b")
    _, (x,) = commit(led, "x", name="sales.other")
    w = led.begin_write("sales.orders")
    mine = [(f"{w.relative_folder}/n", 10)]
    removes, files, mode = {
        "not-a-file": ((f"{w.relative_folder}/zzz",), mine, "replace"),
        "twice": (("a", "a"), mine, "replace"),
        "everything-for-nothing": (("a", "b"), [], "replace"),
        "not-replace": (("a",), mine, "append"),
        "no-version": ((), mine, "replace"),
        "a-path-string": ("a", mine, "replace"),
        "other-table": ((x,), mine, "replace"),
    }[case]
    if case in ("twice", "everything-for-nothing", "not-replace"):
        removes = tuple(a if r == "a" else b for r in removes)
    events = led.event_count()
    with pytest.raises(InvalidArgument) as refused:
        led.commit_write(w.id, files, mode="replace" if mode == "replace" else mode, removes=removes)
    message = str(refused.value)
    assert "\n" not in message and len(message) < 300
    assert {"not-a-file": "is not a file of version 1", "twice": "named twice", "everything-for-nothing":
            "overwrite with no files", "not-replace": "only mode='replace' removes", "no-version": "no version yet",
            "a-path-string": "removes must be paths", "other-table": "is not a file of version"}[case] in message
    assert led.event_count() == events  # nothing recorded
    assert led.open_writes(name="sales.orders")[0].id == w.id  # the write is still open: it may commit again


def test_r11_a_replace_keeps_the_tables_columns_as_an_append_does(led) -> None:
    schema = '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}'
    _, (a,) = commit(led, "a", schema=schema)
    events = led.event_count()
    with pytest.raises(SchemaMismatch) as refused:
        commit(led, "b", mode="replace", removes=(a,), schema=schema.replace("long", "string"))
    # it says what the write did (a partition overwrite that lost a race to an overwrite of other
    # columns is refused here: it said "cannot append" and suggested a merge, which it cannot take)
    said = str(refused.value)
    assert said.startswith("cannot replace files of sales.orders") and "merge_schema" not in said, said
    assert led.event_count() == events + 1  # the write was begun, nothing committed
    number, _ = commit(led, "b", mode="replace", removes=(a,))  # no schema: the table's
    assert led.version("sales.orders").schema == schema and number == 2


def test_r4_a_replace_decided_on_a_version_no_longer_current_is_decided_again_on_the_new_one(led) -> None:
    """Another commit landing between reading the base's files and appending: the API reads the new
    current version and decides again (an append kept the removed file: the replace still applies);
    once an overwrite took it, the replace is refused, naming the file."""
    from ledger.core.versions import CommitWrite
    _, (a, b) = commit(led, "a", "b")
    w = led.begin_write("sales.orders")
    stale = CommitWrite(w.id, ((f"{w.relative_folder}/n", 1),), "replace", removes=(a,), base=1,
                        base_files=((a, 10), (b, 10)))
    commit(led, "c")
    with pytest.raises(Conflict, match="version 2 is current now"):
        led.runner.run(stale)
    v = led.commit_write(w.id, [(f"{w.relative_folder}/n", 1)], mode="replace", removes=[a])
    assert {f.path for f in v.files} == {b, f"{w.relative_folder}/n", *files_of(led, 2) - {a, b}}
    w2 = led.begin_write("sales.orders")
    commit(led, "z", mode="overwrite")
    with pytest.raises(InvalidArgument, match="is not a file of version 4"):
        led.commit_write(w2.id, [(f"{w2.relative_folder}/n", 1)], mode="replace", removes=[b])


def test_r4_a_replace_given_its_base_is_refused_if_another_commit_landed_and_records_nothing(led) -> None:
    """A partition overwrite chose its removes from version 1; an append to the same partition
    landed first. With ``base=1`` the replace is a ``Conflict`` (the caller chooses again), not
    decided again with removes that would leave the append's file in the overwritten partition."""
    _, (a,) = commit(led, "day=1/a")
    w = led.begin_write("sales.orders")
    commit(led, "day=1/late")
    events = led.event_count()
    new = [(f"{w.relative_folder}/day=1/n", 1)]
    with pytest.raises(Conflict, match="chosen from version 1, but the table's current version is now 2"):
        led.commit_write(w.id, new, mode="replace", removes=[a], base=1)
    assert led.event_count() == events and led.version("sales.orders").number == 2
    late = next(p for p in files_of(led, 2) if p.endswith("late"))
    v = led.commit_write(w.id, new, mode="replace", removes=[a, late], base=2)
    assert {f.path for f in v.files} == {new[0][0]}
    with pytest.raises(InvalidArgument, match="for mode='replace' or 'overwrite', not 3 with mode='append'"):
        led.commit_write(led.begin_write("sales.orders").id, [], mode="append", base=3)


# --- verify: the removed list is checked as the file lists are ----------------------------


def _replace(table_id: str, number: int, write_id: str, own: str, files: int, removes: str, removed: int) -> str:
    return (f'{{"table_id":"{table_id}","number":{number},"mode":"replace","write_id":"{write_id}",'
            f'"manifest":"{own}","files":{files},"bytes":{files * 10},"schema":null,"removes":"{removes}",'
            f'"removed_files":{removed},"removed_bytes":{removed * 10}}}')


@pytest.mark.parametrize("forged", ["not-in-base", "twice", "wrong-size", "everything-for-nothing", "more-than-base"])
def test_r11_r16_verify_refuses_a_chained_replace_whose_removed_list_its_commit_could_not_have_made(
        tmp_path: Path, clock, forged: str) -> None:
    from tests.forge import forge
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as led:
        table = led.create_table("sales.orders")
        _, (a, b) = commit(led, "a", "b")
        w = led.begin_write("sales.orders")
        led.verify()
    own = _forge_blob(path, [] if forged == "everything-for-nothing" else [(f"{w.relative_folder}/n", 10)])
    removed = {"not-in-base": [(f"{w.relative_folder}/zz", 10)], "twice": [(a, 10), (a, 10)],
               "wrong-size": [(a, 11)], "everything-for-nothing": [(a, 10), (b, 10)],
               "more-than-base": [(a, 10), (b, 10)]}[forged]
    count = {"more-than-base": 3}.get(forged, len(removed))
    removes = _forge_blob(path, removed)
    files = 0 if forged == "everything-for-nothing" else 1
    forge(path, stream=f"data:{table.id}", type="VersionCommitted", schema_version=3,
          payload=_replace(table.id, 2, w.id, own, files, removes, count))
    with pytest.raises(LedgerCorrupt) as refused:
        with Ledger.open(path, clock=clock) as led:
            led.verify()
    assert {"not-in-base": "not a file of version 1", "twice": "twice", "wrong-size": "not a file of version 1",
            "everything-for-nothing": "with none", "more-than-base": "which holds 2"}[forged] in str(refused.value)


def test_r16_an_old_commit_event_reads_as_removing_nothing() -> None:
    from ledger.core.events import decode_event
    from ledger.core.versions import VersionCommitted
    e = decode_event(1, "VersionCommitted", 2, '{"table_id":"t","number":1,"mode":"append","write_id":"w",'
                                               '"manifest":"m","files":1,"bytes":1,"schema":null}')
    assert isinstance(e, VersionCommitted) and (e.removes, e.removed_files, e.removed_bytes) == (None, 0, 0)


# --- R13: the expiry never takes a folder an unexpired version names, even partly ---------

def test_r13_a_folder_a_replace_kept_some_files_of_is_not_expired_while_the_replace_is_unexpired(led, clock) -> None:
    _, (a, b) = commit(led, "a", "b")
    clock.advance(DAY)
    _, (c,) = commit(led, "c", mode="replace", removes=(a,))  # version 2 names b: write 1's folder stays
    clock.advance(DAY)
    commit(led, "d")
    clock.advance(timedelta(days=30))
    plan = led.plan_vacuum()
    assert all(folder.path != a.rsplit("/", 1)[0] for e in plan.expiries for folder in e.folders)
    assert _planned_paths_named(led, plan) == set()


def _unexpired_paths(led: Ledger, name: str, mark: object) -> set[str]:
    """Every path a version left unexpired under ``mark`` names (the current one always)."""
    found: set[str] = set()
    for v in led.versions(name):
        if v.current or mark is None or v.committed_at > mark:
            found |= {f.path for f in v.files}
    return found


def _planned_paths_named(led: Ledger, plan) -> set[str]:
    """The paths an unexpired version names (after the plan's mark) inside a folder the plan expires."""
    touched: set[str] = set()
    for expiry in plan.expiries:
        inst = led.instance(expiry.table_id)
        mark = expiry.mark if expiry.mark is not None else led.state.data.mark(inst.id)
        from ledger import from_micros
        named = _unexpired_paths(led, inst.name, None if mark is None else from_micros(mark))
        for folder in expiry.folders:
            touched |= {p for p in named if p.startswith(folder.path.rstrip("/") + "/")}
    return touched


STEPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3)),
    st.tuples(st.just("overwrite"), st.integers(0, 3)),
    st.tuples(st.just("replace"), st.integers(0, 3), st.lists(st.integers(0, 50), max_size=4)),
    st.tuples(st.just("restore"), st.integers(1, 20)),
    st.tuples(st.just("mark"), st.integers(0, 20)),
    st.tuples(st.just("vacuum"), st.integers(0, 10)),
    st.tuples(st.just("wait"), st.integers(1, 10)),
), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(steps=STEPS)
def test_r13_r11_no_planned_expiry_ever_touches_a_file_an_unexpired_version_names(steps) -> None:
    """Random appends, overwrites, replaces, restores, mark advances and vacuums (started and finished,
    so folders are recorded deleted as a run would): after every step, no folder a vacuum plans to
    expire holds a file that a version it leaves unexpired names, and every version lists exactly the
    files its base's list and its own write make."""
    from vacuum_work import Result
    clock = ManualClock(T0)
    with Ledger.open(":memory:", clock=clock, actor="prop") as led:
        led.create_table("sales.orders")
        expected: dict[int, set[str]] = {}
        serial = 0
        for step in steps:
            clock.advance(timedelta(hours=1))
            kind = step[0]
            current = led.table("sales.orders").current_version
            if kind in ("append", "overwrite", "replace"):
                serial += 1
                names = [f"f{serial}-{i}" for i in range(step[1])]
                base = expected[current] if current else set()
                removes: tuple[str, ...] = ()
                if kind == "replace":
                    pool = sorted(base)
                    removes = tuple(dict.fromkeys(pool[i % len(pool)] for i in step[2])) if pool else ()
                    if current is None or (base and set(removes) == base and not names):
                        continue
                number, paths = commit(led, *names, mode=kind, removes=removes)
                expected[number] = set(paths) | (base - set(removes) if kind != "overwrite" else set())
            elif kind == "restore" and current:
                wanted = step[1] % current + 1
                version = led.versions("sales.orders")[current - wanted]
                if wanted == current or version.expired:
                    continue
                expected[led.restore_table("sales.orders", version=wanted).number] = expected[wanted]
            elif kind == "mark" and current:
                led.advance_retention_mark("sales.orders", led.now() - timedelta(hours=step[1]))
            elif kind == "vacuum":
                plan = led.plan_vacuum(retention=timedelta(hours=step[1]), override_floor=True,
                                       uncommitted=False)
                assert _planned_paths_named(led, plan) == set()
                run = led.start_vacuum(retention=timedelta(hours=step[1]), override_floor=True, uncommitted=False)
                assert _planned_paths_named(led, run.plan) == set()
                if run.plan.run_id is not None:
                    run.finish([Result(e, len(e.folders), 0) for e in run.plan.expiries])
            elif kind == "wait":
                clock.advance(timedelta(hours=step[1]))
            for v in led.versions("sales.orders"):
                if not v.expired:
                    assert {f.path for f in v.files} == expected[v.number], v.number
        plan = led.plan_vacuum(retention=timedelta(hours=1), override_floor=True)
        assert _planned_paths_named(led, plan) == set()
        led.verify()
