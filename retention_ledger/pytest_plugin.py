"""Fixtures for testing your own pipeline against a ledger (loaded by pytest on its own once
retention-ledger is installed: the ``pytest11`` entry point).

    def test_my_job(ledger, ledger_clock, advance_time, warehouse, spark):
        my_job.run(spark, ledger)              # writes through spark_ops.write_table
        ledger.drop_table("sales.orders")
        advance_time("8d")                     # a week and a day pass, instantly
        spark_ops.vacuum(spark, ledger)
        ...

* ``ledger_clock``: a ``ManualClock`` that starts at ``LEDGER_CLOCK_START`` (a fixed time,
  so runs are repeatable) and moves only when told.
* ``advance_time``: ``advance_time("7d")`` (or a ``timedelta``, or seconds) moves that clock
  forward and returns the new time.
* ``warehouse``: a fresh folder for the ledger's table data (a ``pathlib.Path``).
* ``ledger``: a throw-away ledger: a real SQLite file in the test's own temporary folder,
  on ``ledger_clock``, with ``warehouse`` as its root, closed after the test.
* ``spark``: one local SparkSession for the whole test session (``local[2]``, UI off, UTC),
  started on first use, so tests that do not ask for it never pay for it. To run the same tests
  on a Spark Connect server (as a Databricks or Snowpark Connect job runs), give
  ``--spark-remote sc://host:port`` or set PySpark's own ``SPARK_REMOTE``: ``spark`` is then a
  Connect session on that server, and ``spark_ops`` works on it as on a local one.

Any of them can be overridden by a fixture of the same name in your own ``conftest.py``.
Nothing is imported until a fixture is used: installing the package costs other test
suites nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Union

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ledger import Ledger, ManualClock

LEDGER_CLOCK_START = datetime(2026, 1, 1, tzinfo=timezone.utc)
"""Where ``ledger_clock`` starts: fixed, so a test's times (and its failures) repeat."""

LEDGER_ACTOR = "pytest"


@pytest.fixture
def ledger_clock() -> ManualClock:
    """A clock that moves only when told (``advance_time``, or ``ledger_clock.advance``)."""
    from ledger import ManualClock
    return ManualClock(LEDGER_CLOCK_START)


@pytest.fixture
def advance_time(ledger_clock: ManualClock) -> Callable[[Union[str, timedelta, float]], datetime]:
    """``advance_time("7d")``: move the ledger's clock forward by a duration (``"90m"``,
    ``"36h"``, a ``timedelta``, or seconds); returns the new time."""
    from ledger import parse_duration

    def advance(duration: Union[str, timedelta, float]) -> datetime:
        return ledger_clock.advance(parse_duration(duration))
    return advance


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """An empty folder, the ``ledger`` fixture's warehouse root."""
    root = tmp_path / "warehouse"
    root.mkdir()
    return root


@pytest.fixture
def ledger(tmp_path: Path, warehouse: Path, ledger_clock: ManualClock) -> Iterator[Ledger]:
    """A throw-away ledger on a real file, on the manual clock, rooted at ``warehouse``."""
    from ledger import Ledger
    with Ledger.open(tmp_path / "ledger.db", warehouse=warehouse, clock=ledger_clock, actor=LEDGER_ACTOR) as led:
        yield led


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--spark-remote", default=None, metavar="sc://HOST:PORT",
                     help="retention-ledger's spark fixture: a Spark Connect session on this server instead of a "
                          "local one (default: PySpark's SPARK_REMOTE, if set)")


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """One SparkSession for the test session, stopped at the end: local (``local[2]``, UI off,
    UTC), or a Spark Connect one on ``--spark-remote`` (or ``SPARK_REMOTE``)."""
    from spark_ops import local_session
    session = local_session("retention-ledger-tests", remote=request.config.getoption("--spark-remote"))
    yield session
    session.stop()
