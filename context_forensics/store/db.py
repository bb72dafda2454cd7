"""The SQLite store: sessions, messages and ingested files, migrated on every open.

Plain SQLite through sqlite-utils, so ``sqlite3``, ``sqlite-utils`` and Datasette can
browse it. Writes of one ingested file happen in one transaction: a failure leaves the
store as it was. The connection runs in autocommit mode and transactions are explicit,
because sqlite-utils' ``with conn:`` blocks would otherwise commit half a file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson
import sqlite_utils

from ..errors import NotFoundError, StoreError
from ..hashing import ALGO, json_text, short_id
from ..records import Message, Session, ToolCall, Usage, dumps

# ---------------------------------------------------------------- migrations

MIGRATIONS: list[tuple[str, Callable[[sqlite_utils.Database], None]]] = []


def migration(fn: Callable[[sqlite_utils.Database], None]) -> Callable[[sqlite_utils.Database], None]:
    """Register a migration; names are ``mNNN_what`` and run once each, in order."""
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_initial(db: sqlite_utils.Database) -> None:
    db["sessions"].create(
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
    db["messages"].create(
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
    db["sessions"].create_index(["task"])
    db["sessions"].create_index(["source"])
    db["files"].create(
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
    db["replays"].create(
        {"key": str, "session_id": str, "model": str, "policy": str, "data": str, "created_at": str},
        pk="key",
    )
    db["replays"].create_index(["session_id"])


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


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations; return the names applied."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS _ctxf_migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
    )
    done = {r[0] for r in db.execute("SELECT name FROM _ctxf_migrations").fetchall()}
    applied = []
    for name, fn in sorted(MIGRATIONS, key=lambda m: m[0]):  # mNNN_ names run in number order
        if name in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            fn(db)
            db.execute(
                "INSERT INTO _ctxf_migrations (name, applied_at) VALUES (?, ?)", [name, _now()]
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------- records


def session_id(fmt: str, external_id: str, source: str | None = None) -> str:
    """Stable session id: from the external id alone when it is global, else with the source path."""
    return short_id(fmt, external_id) if source is None else short_id(fmt, source, external_id)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as read back from the store, with its position and hash."""

    session_id: str
    seq: int
    message: Message
    hash: str

    def __getattr__(self, item: str) -> Any:  # convenience: m.role, m.text, ...
        return getattr(self.message, item)


# What the read path selects, in the order ``_row_to_message`` unpacks (the usage counts are
# duplicated in ``usage`` and the session id is known: neither is read back).
_READ_COLUMNS = "seq, role, text, kind, name, tool_calls, tool_call_id, parts, usage, timestamp, model, meta, hash"


def _row_to_message(sid: str, row: tuple) -> StoredMessage:
    """One message from a plain-tuple row of ``_READ_COLUMNS`` (a replay reads thousands:
    tuples cost less than ``sqlite3.Row`` lookups by name)."""
    seq, role, text, kind, name, calls, tool_call_id, parts, usage, timestamp, model, meta, h = row
    loads = orjson.loads
    text = text or ""
    calls = tuple([ToolCall(**c) for c in loads(calls)]) if calls else ()
    parts = tuple(loads(parts)) if parts else ()
    usage = Usage.from_dict(loads(usage)) if usage else None
    meta = loads(meta) if meta else {}
    msg = Message(role, text, kind, name, calls, tool_call_id, parts, usage, timestamp, model, meta)
    return StoredMessage(sid, seq, msg, h)


_MESSAGE_COLUMNS = (
    "session_id, seq, role, kind, name, text, tool_calls, tool_call_id, parts, model, timestamp, "
    "prompt_tokens, completion_tokens, cache_read_tokens, cache_creation_tokens, usage, hash, meta"
)
_INSERT_MESSAGE = f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES ({', '.join('?' * 18)})"


def _message_row(sid: str, seq: int, m: Message, h: str) -> tuple:
    calls, parts, meta, u = m.tool_calls, m.parts, m.meta, m.usage
    if u is None:
        prompt = completion = cache_read = cache_creation = usage = None
    else:
        prompt, completion = u.prompt_tokens, u.completion_tokens
        cache_read, cache_creation = u.cache_read_tokens, u.cache_creation_tokens
        usage = json_text(d) if (d := u.to_dict()) else None
    return (
        sid, seq, m.role, m.kind, m.name, m.text,
        json_text([c.to_dict() for c in calls]) if calls else None,
        m.tool_call_id,
        json_text(list(parts)) if parts else None,
        m.model, m.timestamp,
        prompt, completion, cache_read, cache_creation, usage,
        h,
        json_text(meta) if meta else None,
    )


# Binding None to a statement goes through sqlite3's adaptation protocol unless an adapter
# is registered for NoneType: each NULL parameter cost a failed ``__adapt__``/``__conform__``
# lookup, an AttributeError built and dropped, about half the time of binding a message row
# (most columns of most messages are NULL). ``{}.get`` maps None to None in C, so NULL is still
# bound; the registration is process-wide and changes no value anywhere.
sqlite3.register_adapter(type(None), {}.get)


@dataclass
class WriteResult:
    session_id: str
    messages: int
    replaced: bool  # an older version of this session was replaced
    unchanged: bool  # the replacement had exactly the same content
    content_hash: str = ""  # of the messages written (``sessions.content_hash``)


class Store:
    """One SQLite file. Open with ``Store.open(path)``; use as a context manager to close."""

    BATCH = 2000

    def __init__(self, db: sqlite_utils.Database, path: Path | None, max_sessions: int | None = None):
        self.db = db
        self.path = path
        self.max_sessions = max_sessions

    @classmethod
    def open(cls, path: str | Path, *, max_sessions: int | None = None) -> "Store":
        p = Path(path) if str(path) != ":memory:" else None
        try:
            if p is not None:
                p.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(p), isolation_level=None, check_same_thread=False)
            else:
                conn = sqlite3.connect(":memory:", isolation_level=None)
            conn.row_factory = sqlite3.Row
            db = sqlite_utils.Database(conn)
            if p is not None:
                db.enable_wal()
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA busy_timeout = 30000")  # parallel audit workers share the file
            db.execute("PRAGMA synchronous = NORMAL")
            migrate(db)
        except sqlite3.DatabaseError as e:
            raise StoreError(
                f"cannot open the store: {e}",
                where=str(path),
                hint="point --db (or storage.path in the config) at a ctxf SQLite file or a new path",
            ) from None
        except OSError as e:
            raise StoreError(f"cannot create the store: {e.strerror}", where=str(path)) from None
        return cls(db, p, max_sessions)

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One explicit transaction; rolled back on any exception (KeyboardInterrupt too)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def write_rows(self, sql: str, rows: list[tuple]) -> bool:
        """``executemany`` inside the caller's transaction, or in one of its own.

        Returns False when the store refuses the write (read-only, locked): callers use this
        for caches, which may lose persistence but never a result.
        """
        conn = self.db.conn
        try:
            if conn.in_transaction:  # inside a caller's transaction: join it
                conn.executemany(sql, rows)
            else:
                with self.transaction():
                    conn.executemany(sql, rows)
        except sqlite3.OperationalError:
            return False
        return True

    def file_record(self, file_hash: str) -> dict | None:
        row = self.db.execute("SELECT * FROM files WHERE hash = ?", [file_hash]).fetchone()
        return dict(row) if row else None

    def session_count(self) -> int:
        return self.db.execute("SELECT count(*) FROM sessions").fetchone()[0]

    def write_session(
        self,
        session: Session,
        *,
        sid: str,
        source: str,
        source_hash: str,
        parent_id: str | None,
    ) -> WriteResult:
        """Write one session and stream its messages in batches. Call inside ``transaction()``."""
        old = self.db.execute("SELECT content_hash FROM sessions WHERE id = ?", [sid]).fetchone()
        if old is None and self.max_sessions is not None and self.session_count() >= self.max_sessions:
            raise StoreError(
                f"the store already holds {self.max_sessions} sessions (storage.max_sessions)",
                where=str(self.path or ":memory:"),
                hint="raise storage.max_sessions in the config, or remove sessions with `ctxf rm`",
            )
        if old is not None:
            self.db.execute("DELETE FROM messages WHERE session_id = ?", [sid])
            self.db.execute("DELETE FROM replays WHERE session_id = ?", [sid])
        row: dict[str, Any] = {
            "id": sid,
            "external_id": session.external_id,
            "format": session.format,
            "source": source,
            "source_hash": source_hash,
            "title": session.title,
            "started_at": session.started_at,
            "task": session.task,
            "outcome": session.outcome or "unknown",
            "parent_id": parent_id,
            "metadata": dumps(session.metadata) if session.metadata else None,
            "ingested_at": _now(),
        }
        # The session row goes first (messages reference it); counts are filled in after
        # its messages have streamed through.
        self.db.execute(
            f"INSERT OR REPLACE INTO sessions ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        digest = hashlib.blake2b(digest_size=16)
        models: dict[str, int] = {}
        count = steps = with_usage = 0
        batch: list[tuple] = []
        hashes: list[str] = []  # of the batch: the digest takes them in one update
        executemany, size, row_of = self.db.conn.executemany, self.BATCH, _message_row
        for seq, m in enumerate(session.messages):
            h = m.hash
            hashes.append(h)
            row = row_of(sid, seq, m, h)
            batch.append(row)
            if m.role == "assistant" and m.kind == "message":
                steps += 1
                if m.model:
                    models[m.model] = models.get(m.model, 0) + 1
            if row[15] is not None:  # the usage column
                with_usage += 1
            if len(batch) >= size:
                digest.update("".join(hashes).encode())
                executemany(_INSERT_MESSAGE, batch)
                count += len(batch)
                batch.clear()
                hashes.clear()
        if batch:
            digest.update("".join(hashes).encode())
            executemany(_INSERT_MESSAGE, batch)
            count += len(batch)
        content = f"{ALGO}:{digest.hexdigest()}"
        model = session.model or (max(models, key=models.get) if models else None)
        self.db.execute(
            "UPDATE sessions SET model = ?, models = ?, message_count = ?, step_count = ?, "
            "usage_count = ?, content_hash = ? WHERE id = ?",
            [model, dumps(sorted(models)) if models else None, count, steps, with_usage, content, sid],
        )
        return WriteResult(sid, count, old is not None, old is not None and old[0] == content, content)

    def same_run(self, sid: str, fmt: str, external_id: str, content_hash: str) -> dict | None:
        """Another stored session with this format, external id and (non-empty) content: the
        same run read through another path. The earliest ingested one, or None."""
        row = self.db.execute(
            "SELECT id, source FROM sessions WHERE content_hash = ? AND format = ? AND external_id = ? "
            "AND id != ? AND message_count > 0 ORDER BY ingested_at, id LIMIT 1",
            [content_hash, fmt, external_id, sid],
        ).fetchone()
        return dict(row) if row else None

    def missing_sessions(self, ids: list[str]) -> list[str]:
        """The ids among ``ids`` that are not in the store."""
        if not ids:
            return []
        rows = self.db.execute(
            "SELECT value FROM json_each(?) WHERE value NOT IN (SELECT id FROM sessions)", [dumps(ids)]
        ).fetchall()
        return [r[0] for r in rows]

    def sources_other_than(self, ids: list[str], source: str) -> list[dict[str, str]]:
        """``[{"session", "source"}]`` for the sessions among ``ids`` stored from another source."""
        if not ids:
            return []
        rows = self.db.execute(
            "SELECT id, source FROM sessions WHERE id IN (SELECT value FROM json_each(?)) AND source != ? "
            "ORDER BY id", [dumps(ids), source],
        ).fetchall()
        return [{"session": r[0], "source": r[1]} for r in rows]

    def relabel(self, sid: str, *, task: str | None, outcome: str | None) -> None:
        """Set a stored session's task and/or outcome (``ingest --task/--outcome``)."""
        if task is not None:
            self.db.execute("UPDATE sessions SET task = ? WHERE id = ?", [task, sid])
        if outcome is not None:
            self.db.execute("UPDATE sessions SET outcome = ? WHERE id = ?", [outcome, sid])

    def record_file(self, *, file_hash: str, path: str, fmt: str, size: int, sessions: list[str],
                    messages: int, warnings: list[str], skipped: dict[str, int]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO files (hash, path, format, size, sessions, message_count, "
            "warnings, skipped, ingested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [file_hash, path, fmt, size, dumps(sessions), messages, dumps(warnings[:200]),
             dumps(skipped), _now()],
        )

    def remove_stale(self, source: str, keep: Iterable[str]) -> int:
        """Delete sessions an earlier version of ``source`` produced that it no longer does."""
        keep = set(keep)
        ids = [r[0] for r in self.db.execute("SELECT id FROM sessions WHERE source = ?", [source])]
        return self.delete_sessions([i for i in ids if i not in keep])

    def delete_session(self, sid: str) -> None:
        self.delete_sessions([sid])

    def delete_sessions(self, ids: Iterable[str]) -> int:
        """Delete sessions with their messages and replays, and forget the file records that
        list them (see ``forget_files``). Call inside ``transaction()``; returns the count."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        # Sub-sessions in other files lose their link to a deleted parent: their file records
        # go too, so re-ingesting them links them again once the parent is back.
        orphans: list[str] = []
        for sid in ids:
            self.db.execute("DELETE FROM replays WHERE session_id = ?", [sid])
            self.db.execute("DELETE FROM messages WHERE session_id = ?", [sid])
            self.db.execute("DELETE FROM sessions WHERE id = ?", [sid])
            orphans += [r[0] for r in self.db.execute("SELECT id FROM sessions WHERE parent_id = ?", [sid])]
            self.db.execute("UPDATE sessions SET parent_id = NULL WHERE parent_id = ?", [sid])
        self.forget_files(ids + orphans)
        return len(ids)

    def forget_files(self, session_ids: Iterable[str], *, keep_hash: str | None = None) -> int:
        """Delete the file records that list any of these sessions (except ``keep_hash``).

        A file record is what lets a re-ingest say "unchanged" without reading the file, so it
        may only stay while every session it lists still holds what that file produced: after
        ``ctxf rm`` (or a session rewritten from another version of its file) a re-ingest must
        read the file again and store what it holds.
        """
        ids = list(dict.fromkeys(session_ids))
        if not ids:
            return 0
        cur = self.db.execute(
            "DELETE FROM files WHERE hash != ? AND hash IN (SELECT f.hash FROM files f, "
            "json_each(CASE WHEN json_valid(f.sessions) THEN f.sessions ELSE '[]' END) j "
            "WHERE j.value IN (SELECT value FROM json_each(?)))",
            [keep_hash or "", dumps(ids)],
        )
        return cur.rowcount

    def replay_lookup(self, key: str) -> dict | None:
        row = self.db.execute("SELECT data FROM replays WHERE key = ?", [key]).fetchone()
        return json.loads(row[0]) if row else None

    def replay_save(self, key: str, sid: str, model: str, policy: str, data: dict) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT OR REPLACE INTO replays (key, session_id, model, policy, data, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [key, sid, model, policy, json.dumps({**data, "session_id": sid}, separators=(",", ":")), _now()],
            )

    # ------------------------------------------------------------ reading

    def sessions(self, *, fmt: str | None = None, task: str | None = None,
                 outcome: str | None = None) -> list[dict]:
        where, args = [], []
        for col, val in (("format", fmt), ("task", task), ("outcome", outcome)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = "SELECT * FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY coalesce(started_at, ingested_at), id"
        return [_session_dict(r) for r in self.db.execute(sql, args).fetchall()]

    def session(self, sid: str) -> dict:
        row = self.db.execute("SELECT * FROM sessions WHERE id = ?", [sid]).fetchone()
        if row is None:
            raise NotFoundError(f"no session {sid!r} in the store", hint="list them with `ctxf sessions`")
        return _session_dict(row)

    def messages(self, sid: str) -> list[StoredMessage]:
        cur = self.db.conn.cursor()
        cur.row_factory = None  # plain tuples (see _row_to_message)
        rows = cur.execute(
            f"SELECT {_READ_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq", [sid]
        ).fetchall()
        return [_row_to_message(sid, r) for r in rows]

    def find_sessions(self, prefix: str) -> list[str]:
        rows = self.db.execute(
            "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY id",
            [prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"],
        ).fetchall()
        return [r[0] for r in rows]


def _session_dict(row: sqlite3.Row) -> dict:
    d = dict(row)
    d["models"] = json.loads(d["models"]) if d.get("models") else []
    d["metadata"] = json.loads(d["metadata"]) if d.get("metadata") else {}
    return d
