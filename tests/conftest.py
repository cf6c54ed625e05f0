"""Shared fixtures: real ledger files in a temporary folder, a controllable clock,
and Hypothesis profiles (``ci`` is used when CI=true; ``long`` by hand).

The plugin's fixtures (``retention_ledger.pytest_plugin``, the ones pipeline authors use) are
overridden here: ``ledger`` with this suite's actor and clock, and ``spark`` with a session of
either kind (a module that sets ``BOTH_SESSIONS`` runs its Spark tests on both: classic, and
Spark Connect on a server process the tests start)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, settings

from ledger import Ledger, ManualClock

from .connect import ConnectServer, connect_client
from .pg import MANUAL, PostgresServer, ledger_location, shared

settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""Java options for every Spark driver JVM the tests start: the session's own, each Connect server's,
and those of the processes the tests run (a CLI vacuum, a second host), which inherit this
environment. The suite's JVMs are short-lived and do little, so their start dominates: there C2's
compiler threads and G1's collector threads cost about as much CPU as the rest together (a local
session, a few small jobs and a Parquet round trip: 34-38 CPU-s, 19-20 with these, on two cores).
They change how the JVM compiles and collects, not what Spark does. ``SPARK_SUBMIT_OPTS`` is what
spark-submit gives the driver's ``java`` (the executors of a local-cluster are started without it),
and it prints nothing, where ``JAVA_TOOL_OPTIONS`` would say so on every JVM's stderr, which tests
read. A value already set (a developer's, or "" to measure without) is kept."""
os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_OPTIONS)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


STORES = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets ``BOTH_STORES = True`` runs each test that asks for ``store_kind`` (through
    ``ledger_path`` or ``ledger``) once per backend, unless the test is marked ``sqlite_only``
    (it reads the SQLite file itself)."""
    if "store_kind" in metafunc.fixturenames and getattr(metafunc.module, "BOTH_STORES", False) \
            and metafunc.definition.get_closest_marker("sqlite_only") is None:
        metafunc.parametrize("store_kind", STORES, indirect=True)
    # Likewise ``BOTH_SESSIONS = True``: each test that asks for ``spark`` runs on a classic session
    # and on a Spark Connect one (R24), unless marked ``classic_only`` (it says why).
    if "spark_kind" in metafunc.fixturenames and getattr(metafunc.module, "BOTH_SESSIONS", False) \
            and metafunc.definition.get_closest_marker("classic_only") is None:
        metafunc.parametrize("spark_kind", SESSIONS, indirect=True)


SESSIONS = ("classic", "connect")


@pytest.fixture
def spark_kind(request: pytest.FixtureRequest) -> str:
    """The kind of SparkSession this test's ``spark`` is: classic unless the module runs on both."""
    return getattr(request, "param", "classic")


@pytest.fixture(scope="session")
def classic_spark() -> Iterator[Any]:
    """One local classic SparkSession for the test session (``local[2]``, UI off, UTC)."""
    from spark_ops import local_session
    session = local_session("retention-ledger-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Spark Connect server in a process of its own (``local[2]``), started by the first test
    that needs it and killed at the end."""
    server = ConnectServer(tmp_path_factory.mktemp("connect") / "server.log")
    yield server
    server.close()


@pytest.fixture(scope="session")
def connect_spark(connect_server: ConnectServer) -> Any:
    """A Spark Connect session on the tests' server, as a Databricks or Snowpark Connect user has."""
    return connect_server.client(connect_client(connect_server.address))


@pytest.fixture
def spark(request: pytest.FixtureRequest, spark_kind: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """This test's SparkSession, of the kind it runs on (R24): a process holds one kind, as a
    user's does, so PySpark's Connect mark is set for a Connect test and cleared for a classic one."""
    session = request.getfixturevalue(f"{spark_kind}_spark")
    if spark_kind == "connect":
        monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    else:
        monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    return session


@pytest.fixture
def store_kind(request: pytest.FixtureRequest) -> str:
    """The backend of this test's ledger: SQLite unless the module runs on both (above)."""
    return getattr(request, "param", "sqlite")


@pytest.fixture
def postgres() -> PostgresServer:
    """The session's real PostgreSQL server (started by the first test that needs it)."""
    return shared()


@pytest.fixture
def ledger_path(tmp_path: Path, store_kind: str) -> Path | str:
    """A SQLite file's path (a ``Path``), or a PostgreSQL ledger's URL, made with its warehouse
    beside, as the file's would be."""
    if store_kind == "sqlite":
        return tmp_path / "ledger.db"
    return ledger_location(store_kind, tmp_path)


@pytest.fixture
def ledger(ledger_path: Path, clock: ManualClock):
    """A ledger on a real SQLite file with a clock that moves only when told."""
    with Ledger.open(ledger_path, clock=clock, max_clock_skew=MANUAL, actor="tester") as led:
        yield led

