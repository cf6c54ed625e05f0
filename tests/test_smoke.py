from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ledger import Ledger

BOTH_SESSIONS = True  # the Spark part runs on a classic session and on a Spark Connect one (R24)

REPO = Path(__file__).resolve().parent.parent


def test_open_create_drop_undrop_round_trip(ledger: Ledger) -> None:
    created = ledger.create_table("sales.orders")
    ledger.drop_table("sales.orders")
    restored = ledger.undrop_table("sales.orders")
    assert restored.id == created.id and restored.is_live
    assert ledger.event_count() == 3


@pytest.mark.spark
def test_write_read_and_the_log_on_spark(ledger: Ledger, spark) -> None:
    from spark_ops import read_log, read_table, write_table

    version = write_table(spark.range(5), ledger, "sales.orders")
    assert version.number == 1 and read_table(spark, ledger, "sales.orders").count() == 5
    assert read_log(spark, ledger).count() == ledger.event_count()


# --- the base install (``pip install -e .``, README's first command) -----------------------------

TOUR = """
    import json, os, sys
    for name in json.loads(os.environ["NOT_IN_THE_BASE_INSTALL"]):
        sys.modules.setdefault(name, None)  # what an import of a package that is not installed meets

    from datetime import timedelta
    from ledger import Ledger, ManualClock
    from spark_ops import attach, detach, erase, local_session, read_log, read_table, vacuum, write_table

    spark = local_session()  # classic: what `pip install -e .` alone gives
    clock = ManualClock()
    with Ledger.open("ledger.db", clock=clock) as led:
        frame = spark.range(100).selectExpr("id", "id % 7 AS customer_id")
        write_table(frame.repartition(2), led, "sales.orders")
        write_table(frame.limit(3), led, "sales.orders", mode="overwrite")
        read_table(spark, led, "sales.orders", version=1).count()
        led.restore_table("sales.orders", version=1)
        attach(spark, led)
        spark.sql("SELECT count(*) FROM sales.orders").first()
        spark.sql("SELECT * FROM ledger_versions('sales.orders')").collect()
        detach(spark, led)
        erase(spark, led, "sales.orders", "customer_id = 3", reason="a test")
        write_table(frame, led, "staging.events")
        led.drop_table("staging.events")
        clock.advance(timedelta(days=8))
        vacuum(spark, led, dry_run=True)
        deleted = vacuum(spark, led).files  # on Spark's executors (mapInArrow)
        read_log(spark, led).count()
        with led.pin("sales.orders"):
            pass
        led.maintain()
        led.verify()
    spark.stop()
    print(json.dumps({"deleted": deleted}))
"""


def base_install() -> set[str]:
    """Every distribution ``pip install .`` brings: pyproject.toml's dependencies (no extras of
    ours), theirs with the extras they ask for, and so on, as the installed metadata says."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    seen: set[tuple[str, frozenset[str]]] = set()
    wanted = [Requirement(text) for text in project["dependencies"]]
    while wanted:
        requirement = wanted.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(key[0]) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            inner = Requirement(text)
            if inner.marker is None or any(inner.marker.evaluate({"extra": extra}) for extra in key[1] or {""}):
                wanted.append(inner)
    return {name for name, _ in seen}


@pytest.mark.spark
def test_the_readme_calls_run_with_only_what_the_base_install_brings(tmp_path: Path) -> None:
    """Issue 57: README's first command died at the vacuum in a fresh virtualenv, because
    ``mapInArrow`` needs pandas in the driver and pandas came only with the ``connect`` extra
    (which the test extra brings, so no test saw it). Here the calls of the README's tour run in a
    process of their own in which every installed package the base install does not bring (by
    pyproject.toml's dependencies) cannot be imported, as in a virtualenv made with
    ``pip install -e .`` alone; CI also runs the demo in such a virtualenv (.ci/run)."""
    brought = base_install()
    ours = {"ledger", "spark_ops", "retention_ledger", "vacuum_work", "arrow_ops"}
    absent = sorted(module for module, dists in metadata.packages_distributions().items()
                    if module not in ours and module not in sys.stdlib_module_names
                    and not {canonicalize_name(d) for d in dists} & brought)
    assert "pytest" in absent and "pyspark" not in absent  # the line is where it should be
    (tmp_path / "tour.py").write_text(textwrap.dedent(TOUR))
    env = {**os.environ, "PYTHONPATH": str(REPO), "NOT_IN_THE_BASE_INSTALL": json.dumps(absent)}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("SPARK_REMOTE", None)
    done = subprocess.run([sys.executable, "tour.py"], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["deleted"] > 0  # the vacuum ran on Spark
