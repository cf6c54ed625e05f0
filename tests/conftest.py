"""Shared fixtures: real ledger files in a temporary folder, a controllable clock,
and Hypothesis profiles (``ci`` is used when CI=true; ``long`` by hand).

The session's SparkSession (``spark``) comes from the package's own pytest plugin
(``retention_ledger.pytest_plugin``), the one pipeline authors use; ``ledger`` here
overrides the plugin's with this suite's actor and clock."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from ledger import Ledger, ManualClock

from .pg import MANUAL, PostgresServer, ledger_location, shared

settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


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

