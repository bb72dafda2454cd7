"""SQLite logs opened read-only: the file's magic bytes, a read-only (or immutable) connection,
its tables, and a sniff that opens, asks and closes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

SQLITE_MAGIC = b"SQLite format 3\x00"
# What reading an SQLite log can raise: SQLite's errors, and a corrupt file's error message that
# is not UTF-8 (the sqlite3 module fails to decode the message itself).
SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)


def open_sqlite_readonly(path: Path) -> sqlite3.Connection:
    """Open an SQLite log read-only; a WAL database in a read-only directory needs ``immutable=1``."""
    uri = path.resolve().as_uri()
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except SQLITE_ERRORS:
        conn = sqlite3.connect(f"{uri}?immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    # Text that is not UTF-8 reads as U+FFFD, as in every other log, instead of failing the
    # whole database ("Could not decode to UTF-8 column").
    conn.text_factory = _text
    return conn


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def sniff_sqlite(path: Path, head: bytes, accept: Callable[[sqlite3.Connection], bool]) -> bool:
    """Whether ``path`` is an SQLite database that ``accept`` takes (opened read-only, closed after)."""
    if not head.startswith(SQLITE_MAGIC):
        return False
    try:
        conn = open_sqlite_readonly(path)
        try:
            return accept(conn)
        finally:
            conn.close()
    except SQLITE_ERRORS:
        return False


def sqlite_tables(conn: sqlite3.Connection) -> list[str]:
    """User tables and views, by name (SQLite's own ``sqlite_*`` tables left out)."""
    return [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name"
    )]
