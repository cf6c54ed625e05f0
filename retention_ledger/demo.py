"""The quickstart behind ``retention-ledger demo``: the whole promise in one minute.

Three tables are written with Spark (each write a version); one is overwritten by
mistake and restored; two are dropped; a week later a vacuum purges the two and
expires the overwritten version; an undrop of a purged table and a restore of the
expired version are refused, while the third table comes back whole.

It runs on simulated time (a ``ManualClock`` that starts ten days ago), because
the story needs a week to pass between a drop and the vacuum that purges it.
Everything else is real: a SQLite ledger file, Parquet files written by a
local SparkSession, and a vacuum that deletes them.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from ledger import Ledger, LedgerError, ManualClock, UndropBlocked, format_bytes, iso_utc
from ledger.errors import VersionExpired
from spark_ops import local_session, read_table, vacuum, write_table
from spark_ops.session import starting

MARKER = ".retention-ledger-demo"


def run_demo(folder: str | Path, *, echo: Callable[[str], None] | None = print,
             jvm_log: str | None = None, spark_started: Callable[[], Any] | None = None,
             scratch: str | None = None) -> dict[str, Any]:
    say = echo or (lambda _line: None)
    root = _fresh_folder(Path(folder))
    clock = ManualClock(datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=10))

    say(f"{starting()} ...")  # a local one, or what SPARK_REMOTE names (``demo --remote``)
    spark = local_session("retention-ledger-demo", jvm_log=jvm_log, scratch=scratch)
    if spark_started is not None:
        spark_started()
    with Ledger.open(root / "ledger.db", warehouse=root / "warehouse", clock=clock, actor="demo") as led:
        orders = spark.range(0, 10_000).selectExpr("id AS order_id", "id % 97 AS customer_id",
                                                  "round(rand(7) * 100, 2) AS amount")
        customers = spark.range(0, 97).selectExpr("id AS customer_id", "concat('customer-', id) AS name")
        events = spark.range(0, 5_000).selectExpr("id", "'click' AS kind")
        for name, frame in (("sales.orders", orders), ("sales.customers", customers),
                            ("staging.events", events)):
            write_table(frame.repartition(4), led, name)
            say(f"wrote {name:<16} {frame.count():>6} rows -> {led.table(name).location}")

        mistake = spark.range(0, 3).selectExpr("id AS customer_id", "'oops' AS name")
        write_table(mistake, led, "sales.customers", mode="overwrite")
        say(f"{_now(clock)}  overwrote sales.customers by mistake: version 2 has "
            f"{read_table(spark, led, 'sales.customers').count()} rows (version 1's files are still there)")
        restored_version = led.restore_table("sales.customers", version=1)
        say(f"{_now(clock)}  restored sales.customers to version 1: now version {restored_version.number}, "
            f"{read_table(spark, led, 'sales.customers').count()} rows")

        led.drop_table("sales.orders")
        led.drop_table("staging.events")
        say(f"{_now(clock)}  dropped sales.orders and staging.events (restorable for 7 days)")
        clock.advance(timedelta(days=8))
        led.drop_table("sales.customers")
        say(f"{_now(clock)}  (8 days later) dropped sales.customers")

        report = vacuum(spark, led)
        for item in report.purged:
            say(f"vacuum purged {item.name:<16} {item.files} files, {format_bytes(item.bytes)}")
        for scope, at in report.watermarks.items():
            say(f"vacuum set watermark {scope} to {iso_utc(at)} (the newest purged drop time)")
        for expiry in report.expired:
            say(f"vacuum expired {expiry.name} version(s) {', '.join(map(str, expiry.versions))} (overwritten over "
                f"a week ago) and deleted {len(expiry.folders)} write folder(s) no readable version names")

        try:
            led.undrop_table("sales.orders")
            refused = None
        except UndropBlocked as exc:
            refused = str(exc)
            say(f"undrop sales.orders    -> refused: {exc}")
        restored = led.undrop_table("sales.customers")
        rows = read_table(spark, led, "sales.customers").count()
        say(f"undrop sales.customers -> restored (id {restored.id}), {rows} rows read back")
        try:
            led.restore_table("sales.customers", version=2)
            restore_refused = None
        except VersionExpired as exc:
            restore_refused = str(exc)
            say(f"restore sales.customers to version 2 -> refused: {exc}")

        summary = {
            "ledger": str(root / "ledger.db"),
            "warehouse": led.warehouse,
            "purged": [item.name for item in report.purged],
            "files_deleted": report.files,
            "bytes_deleted": report.bytes,
            "watermarks": {s: iso_utc(at) for s, at in report.watermarks.items()},
            "undrop_refused": refused,
            "undrop_allowed": restored.name,
            "rows_after_undrop": rows,
            "versions_expired": {e.name: list(e.versions) for e in report.expired},
            "restore_refused": restore_refused,
            "events": led.event_count(),
        }
        led.verify()
    say(f"done: {summary['events']} events in {summary['ledger']}; try "
        f"`retention-ledger --ledger {summary['ledger']} history`")
    return summary


def _now(clock: ManualClock) -> str:
    return iso_utc(clock()) or ""


def _fresh_folder(folder: Path) -> Path:
    """Recreate a folder the demo made before; refuse to clear anyone else's."""
    folder = folder.resolve()
    if folder.exists() and any(folder.iterdir()):
        if not (folder / MARKER).exists():
            raise DemoFolderInUse(
                f"{folder} exists and was not made by the demo; pass --dir with a new folder")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text("made by `retention-ledger demo`; safe to delete\n")
    return folder


class DemoFolderInUse(LedgerError):
    """The demo's folder holds something the demo did not make."""
