"""The store's schema: migrations ``mNNN_what``, applied on open, each once, under the write lock.

The ``_ctxf_migrations`` table names the migrations applied and ``PRAGMA user_version`` holds
the number of the last one (``SCHEMA_VERSION``). Opening checks both without a lock (the usual
case: nothing to do) and, when something is pending, takes the write lock (``BEGIN IMMEDIATE``)
and reads them again inside the transaction: several processes opening a new store at once
then migrate it once, the others find it done. Every pending migration runs in that one
transaction, so a store is never half-migrated. A store from a newer ctxf (a migration this
version does not know, or a ``user_version`` past ``SCHEMA_VERSION``) is refused, never read or
written as if it were current.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

import sqlite_utils

from ..errors import StoreError, StoreVersionError
from ..version import __version__

MIGRATIONS: list[tuple[str, Callable[[sqlite_utils.Database], None]]] = []


def migration(fn: Callable[[sqlite_utils.Database], None]) -> Callable[[sqlite_utils.Database], None]:
    """Register a migration; names are ``mNNN_what`` and run once each, in number order."""
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_initial(db: sqlite_utils.Database) -> None:
    db.table("sessions").create(
        {
            "id": str,
            "external_id": str,
            "format": str,
            "source": str,
            "source_hash": str,
            "title": str,
            "model": str,
            "models": str,  # JSON list of every model seen
            "started_at": str,
            "task": str,
            "outcome": str,
            "parent_id": str,
            "message_count": int,
            "step_count": int,  # assistant messages = model calls
            "usage_count": int,  # messages with recorded usage
            "content_hash": str,
            "metadata": str,
            "ingested_at": str,
        },
        pk="id",
        not_null={"format", "source", "outcome"},
        defaults={"outcome": "unknown", "message_count": 0, "step_count": 0, "usage_count": 0},
    )
    db.table("messages").create(
        {
            "session_id": str,
            "seq": int,
            "role": str,
            "kind": str,
            "name": str,
            "text": str,
            "tool_calls": str,  # JSON list of {id, name, arguments}
            "tool_call_id": str,
            "parts": str,  # JSON list of non-text parts (images, thinking, ...)
            "model": str,
            "timestamp": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cache_read_tokens": int,
            "cache_creation_tokens": int,
            "usage": str,  # JSON of every recorded usage field
            "hash": str,
            "meta": str,
        },
        pk=("session_id", "seq"),
        foreign_keys=[("session_id", "sessions", "id")],
        not_null={"role", "kind", "hash"},
    )
    db.table("sessions").create_index(["task"])
    db.table("sessions").create_index(["source"])
    db.table("files").create(
        {
            "hash": str,
            "path": str,
            "format": str,
            "size": int,
            "sessions": str,  # JSON list of session ids
            "message_count": int,
            "warnings": str,
            "skipped": str,
            "ingested_at": str,
        },
        pk="hash",
    )


@migration
def m003_replays(db: sqlite_utils.Database) -> None:
    # Replay snapshots: keyed by session content + model spec + policy parameters.
    db.table("replays").create(
        {"key": str, "session_id": str, "model": str, "policy": str, "data": str, "created_at": str},
        pk="key",
    )
    db.table("replays").create_index(["session_id"])


@migration
def m002_token_counts(db: sqlite_utils.Database) -> None:
    # Token counts by content hash and counting scheme (tokenizer, chat format, formula
    # version: see tokens/cache.py), so each unique text is tokenized once across sessions and runs.
    db.execute(
        "CREATE TABLE IF NOT EXISTS token_counts ("
        "hash TEXT NOT NULL, tokenizer TEXT NOT NULL, count INTEGER NOT NULL, "
        "PRIMARY KEY (hash, tokenizer)) WITHOUT ROWID"
    )


@migration
def m004_embeddings(db: sqlite_utils.Database) -> None:
    # Embedding vectors by content hash of the embedded text (a chunk) and model name + revision,
    # so each unique text is embedded once per model across sessions and runs (see embed/cache.py).
    # ``vector`` holds ``dim`` little-endian float32 values. A rowid table on purpose: rows of
    # ~1.5 KB are past the size where SQLite recommends WITHOUT ROWID.
    db.execute(
        "CREATE TABLE IF NOT EXISTS embeddings ("
        "hash TEXT NOT NULL, model TEXT NOT NULL, revision TEXT NOT NULL, dim INTEGER NOT NULL, "
        "vector BLOB NOT NULL, created_at TEXT NOT NULL, "
        "PRIMARY KEY (hash, model, revision))"
    )


@migration
def m005_sessions_by_content(db: sqlite_utils.Database) -> None:
    # Ingest looks a session up by its content (the same run reached by another path is one
    # session, see store/ingest.py): one lookup per written session, so it needs an index.
    db.execute("CREATE INDEX IF NOT EXISTS idx_sessions_content_hash ON sessions (content_hash)")


def _number(name: str) -> int:
    return int(name[1:4])


SCHEMA_VERSION = max(_number(name) for name, _ in MIGRATIONS)
"""``PRAGMA user_version`` of a store this ctxf wrote: the number of its last migration."""

_TABLE = "_ctxf_migrations"


@dataclass(frozen=True)
class State:
    """What a store says of its schema."""

    applied: frozenset[str]
    user_version: int
    has_table: bool  # the migrations table exists
    other_tables: bool  # tables besides it (a database that is not empty)

    @property
    def pending(self) -> list[str]:
        """Migrations to apply, in order (empty when the store is current)."""
        return [name for name, _ in sorted(MIGRATIONS) if name not in self.applied]

    @property
    def current(self) -> bool:
        return not self.pending and self.user_version == SCHEMA_VERSION


def read_state(db: sqlite_utils.Database) -> State:
    names = {r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall()}
    applied: frozenset[str] = frozenset()
    if _TABLE in names:
        applied = frozenset(r[0] for r in db.execute(f"SELECT name FROM {_TABLE}").fetchall())
    version = db.execute("PRAGMA user_version").fetchone()[0]
    return State(applied, version, _TABLE in names, bool(names - {_TABLE}))


def check(state: State, where: str) -> None:
    """Refuse a store this ctxf cannot read or write as it is (``StoreVersionError``, exit 1)."""
    known = {name for name, _ in MIGRATIONS}
    unknown = sorted(state.applied - known)
    if unknown or state.user_version > SCHEMA_VERSION:
        what = (f"migrations {', '.join(unknown)}" if unknown
                else f"schema version {state.user_version}")
        raise StoreVersionError(
            f"this store was written by a newer ctxf ({what}; ctxf {__version__} knows schema "
            f"version {SCHEMA_VERSION}); it is left as it is",
            where=where,
            hint="upgrade ctxf (pip install -U context-forensics) to use this store, "
            "or give another one with --db",
        )
    if not state.has_table and state.other_tables:
        raise StoreError(
            "an SQLite database, but not a ctxf store (it has no _ctxf_migrations table); it is left as it is",
            where=where,
            hint="point --db (or storage.path in the config) at a ctxf store or a new path; "
            "to read this database as logs, `ctxf ingest` it",
        )


def migrate(db: sqlite_utils.Database, *, where: str = "store",
            begin: Callable[[], None] | None = None) -> list[str]:
    """Bring the store up to ``SCHEMA_VERSION``; return the names applied (none when current).

    ``begin`` takes the write lock (``BEGIN IMMEDIATE``, by default without waiting beyond the
    connection's busy timeout); the state is read again under it, so a migration another
    process applied meanwhile is not applied twice.
    """
    state = read_state(db)
    check(state, where)
    if state.current:
        return []
    (begin or (lambda: db.execute("BEGIN IMMEDIATE")))()
    try:
        state = read_state(db)
        check(state, where)
        if state.current:  # another process migrated it while this one waited for the lock
            db.execute("ROLLBACK")
            return []
        db.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (name TEXT PRIMARY KEY, applied_at TEXT)")
        applied = state.pending
        for name, fn in sorted(MIGRATIONS):  # mNNN_ names run in number order
            if name in applied:
                fn(db)
                db.execute(f"INSERT INTO {_TABLE} (name, applied_at) VALUES (?, ?)", [name, now()])
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        if db.conn.in_transaction:
            db.execute("ROLLBACK")
        raise
    return applied


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
