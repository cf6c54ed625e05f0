"""Helpers shared by the benchmark scripts: where to put scratch files, and how to print.

Benchmarks report; they never gate. Every script prints a small table and one
``PASS``/``MISS`` line per target from DESIGN.md ("Performance"), and exits 0
whatever the figures are.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent

# Make ``import ledger`` work when a script is run as ``python benchmarks/x.py`` from a
# checkout that is not installed (it normally is, editable).
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


@contextlib.contextmanager
def scratch_dir(where: str | None = None, *, keep: bool = False) -> Iterator[Path]:
    """A fresh folder for ledger files, removed afterwards unless ``keep``.

    ``where`` given: a new folder inside it. Otherwise the system temporary
    folder if it is on the same filesystem as the repository (so fsync costs what
    it costs for a ledger kept beside the code), else a hidden folder in the repo.
    """
    if where is not None:
        parent = Path(where)
        parent.mkdir(parents=True, exist_ok=True)
    else:
        tmp = Path(tempfile.gettempdir())
        parent = tmp if os.stat(tmp).st_dev == os.stat(REPO_ROOT).st_dev else REPO_ROOT
    path = Path(tempfile.mkdtemp(prefix=".ledger-bench-", dir=parent))
    try:
        yield path
    finally:
        if keep:
            print(f"(kept scratch files in {path})")
        else:
            shutil.rmtree(path, ignore_errors=True)


def environment() -> str:
    """One line saying what the figures were measured on, and how busy the machine was."""
    return (f"python {platform.python_version()} ({platform.python_implementation()}), "
            f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs, {load()}, {interpreter_speed()}")


def interpreter_speed() -> str:
    """How fast this interpreter runs plain bytecode here: ns per iteration of ``x += i``.

    A yardstick for comparing figures across machines (a recent laptop with
    CPython 3.11 does about 30-40 ns); it takes a fraction of a second.
    """
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        x = 0
        for i in range(2_000_000):
            x += i
        best = min(best, time.perf_counter() - start)
    return f"interpreter yardstick {best / 2_000_000 * 1e9:.0f} ns per loop step"


def load() -> str:
    """The 1-minute load average, flagged when other work competes for the CPUs."""
    try:
        one = os.getloadavg()[0]
    except (AttributeError, OSError):
        return "load average unknown"
    busy = one > 0.5 * (os.cpu_count() or 1)
    return f"load average {one:.2f}" + (" (busy machine: figures are noisy)" if busy else "")


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain fixed-width table: first column left-aligned, the rest right-aligned."""
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}" if value >= 0.01 else f"{value:.2g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def warm(spark) -> None:
    """Before any timing: ship the vacuum's executor code to the session and start its Python
    workers, with pyarrow loaded, by a job shaped as the vacuum's (a ``mapInArrow``): a pipeline
    pays both once per session (R19), not once per vacuum. Works on either kind of session."""
    from spark_ops.vacuum_job import ship

    def echo(batches):  # nested: cloudpickle sends it by value (workers cannot import this module)
        yield from batches

    ship.ship(spark)
    spark.range(0, 100, numPartitions=8).mapInArrow(echo, "id long").collect()


def verdict(what: str, measured: float, target: float, *, higher_is_better: bool, unit: str = "") -> bool:
    """Print one ``PASS``/``MISS`` line and return whether the target was met."""
    ok = measured >= target if higher_is_better else measured < target
    op = ">=" if higher_is_better else "<"
    print(f"{'PASS' if ok else 'MISS'}  {what}: {measured:,.3f}{unit} (target {op} {target:,}{unit})")
    return ok


UNDROP_READS = r"""
ids = entry("tables.dropped", name)
instance = entry("tables.instances", ids[-1])
database = name.split(".")[0]
for part, key in [("tables.bindings", name), ("guard.watermarks", "ledger"),
                  ("guard.watermarks", "database:" + database), ("guard.watermarks", "table:" + ids[-1]),
                  ("streams", "catalog"), ("streams", "watermark:ledger"),
                  ("streams", "watermark:database:" + database), ("streams", "watermark:table:" + ids[-1])]:
    entry(part, key)
db.close()
print(json.dumps({"floor": time.perf_counter() - start, "ok": instance is not None}))
"""
"""The end of an open floor's child script (``fold.py``, ``postgres.py``): given ``db`` and
``entry(part, key)`` (the newest stored entry of a key), read every stored entry an undrop of
``name`` decides on, close, and print the seconds since ``start``."""
