"""Writing rows behind the ledger's back, as a forger who knows the chain's encoding would.

Tests of the fold's own checks (a purge of a live table, an undrop behind its watermark)
must reach the fold: a row with a wrong chain hash would be stopped by the chain first.
So these helpers hash what they insert exactly as the store does (``ledger.chain``,
documented for auditors, so a forger knows it too). Only a checkpoint kept outside the
ledger catches a forger like this one (``verify(against=...)``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ledger.chain import GENESIS, event_hash
from ledger.persistence.stores import is_url


class _Raw:
    """A plain connection to a ledger's store, SQLite or PostgreSQL, as a forger would hold
    (``?`` placeholders either way)."""

    def __init__(self, path: Path | str) -> None:
        self.pg = is_url(str(path))
        if self.pg:
            import psycopg
            base, _, schema = str(path).partition("?schema=")
            self.conn: Any = psycopg.connect(base)
            if schema:
                self.conn.execute(f'SET search_path TO "{schema}"')
        else:
            self.conn = sqlite3.connect(path)

    def execute(self, sql: str, params: tuple = ()) -> Any:
        return self.conn.execute(sql.replace("?", "%s") if self.pg else sql, params)

    def commit(self) -> None:
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()


def forge(path: Path | str, *, stream: str, type: str, payload: str, version: int | None = None,
          schema_version: int = 1, time: object = None, actor: str = "tamperer", seq: int | None = None,
          hash: str | None = None) -> int:
    """Append one row with a valid chain hash (unless ``hash`` is given); returns its seq."""
    raw = _Raw(path)
    try:
        last = raw.execute("SELECT seq, time, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        last_seq, last_time, previous = last if last else (0, 0, None)
        if version is None:
            version = raw.execute("SELECT coalesce(max(version), 0) + 1 FROM events WHERE stream = ?",
                                  (stream,)).fetchone()[0]
        seq = last_seq + 1 if seq is None else seq
        time = last_time + 1 if time is None else time
        if hash is None:
            try:
                hash = event_hash(bytes.fromhex(previous) if previous else GENESIS, seq, stream, version, type,
                                  schema_version, time, actor, payload).hex()
            except Exception:  # a field the encoding cannot hold (the test is about that field)
                hash = "0" * 64
        raw.execute("INSERT INTO events(seq, stream, version, type, schema_version, time, actor, payload, hash) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (seq, stream, version, type, schema_version, time, actor, payload, hash))
        raw.commit()
        return seq
    finally:
        raw.close()


def rehash(path: Path | str, after: int = 0) -> None:
    """Recompute every stored hash after event ``after`` (a forger covering an edit)."""
    raw = sqlite3.connect(path)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        previous = GENESIS
        if after:
            previous = bytes.fromhex(raw.execute("SELECT hash FROM events WHERE seq = ?", (after,)).fetchone()[0])
        rows = raw.execute("SELECT seq, stream, version, type, schema_version, time, actor, payload FROM events "
                           "WHERE seq > ? ORDER BY seq", (after,)).fetchall()
        for row in rows:
            previous = event_hash(previous, *row)
            raw.execute("UPDATE events SET hash = ? WHERE seq = ?", (previous.hex(), row[0]))
        raw.execute("CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
                    "BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END")
        raw.commit()
    finally:
        raw.close()
