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


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def ledger(ledger_path: Path, clock: ManualClock):
    """A ledger on a real SQLite file with a clock that moves only when told."""
    with Ledger.open(ledger_path, clock=clock, actor="tester") as led:
        yield led

