"""OpenAI Agents SDK ``SQLiteSession`` databases: one session per ``session_id``.

``agents.memory.SQLiteSession(session_id, db_path)`` keeps a conversation's items in two tables
(names configurable, ``agent_sessions`` and ``agent_messages`` by default)::

    agent_sessions(session_id TEXT PRIMARY KEY, created_at, updated_at)
    agent_messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, message_data TEXT, created_at)

``message_data`` is one Responses API input item as JSON (``json.dumps(item)``): the user's input,
then each run's new items (``message``, ``function_call`` / ``function_call_output``,
``reasoning``, built-in tool calls, ``compaction``), in ``id`` order. They are converted by the
``openai_responses`` importer's item conversion. What the SDK does not store: the agent's
instructions and tools (sent with every call), the model, usage, and which items a call saw when
``SessionSettings(limit=N)`` cut the history; so this log is the conversation, with no recorded
usage. An ``AdvancedSQLiteSession`` file (extra ``message_structure`` / ``turn_usage`` tables) is
read by its base tables, every item of a session in order; its branches and per-turn usage are
not separated (a warning says so).

The database is opened read-only; nothing is written to it.
"""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import Session
from ._documents import first_user_title
from ._json import parse_json
from ._sqlite import (
    SQLITE_ERRORS,
    computed_error,
    open_sqlite_readonly,
    quote_name,
    sniff_sqlite,
    sqlite_names,
    sqlite_tables,
)
from .base import RECORD_ERRORS, ImportContext, Importer, register
from .openai_responses import iter_items

ITEM_COLUMNS = {"id", "session_id", "message_data"}
SESSION_COLUMNS = {"session_id", "created_at", "updated_at"}
ADVANCED_TABLES = {"message_structure", "turn_usage"}


_q = quote_name


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")}


def item_tables(conn: sqlite3.Connection, *, stored: bool = True) -> tuple[list[str], list[str]]:
    """(item tables, session tables): tables with the SDK's item columns, and with its session
    columns. A file is the SDK's when it has both. ``stored=False``: views and computed tables
    too (what the sniff matches, so that such a file is claimed and refused clearly)."""
    items, sessions = [], []
    for t in sqlite_tables(conn) if stored else sqlite_names(conn):
        cols = _columns(conn, t)
        if ITEM_COLUMNS <= cols:
            items.append(t)
        elif SESSION_COLUMNS <= cols:
            sessions.append(t)
    return items, sessions


def _is_agents_db(conn: sqlite3.Connection) -> bool:
    items, sessions = item_tables(conn, stored=False)
    return bool(items) and bool(sessions)


def _iso(value: Any) -> str | None:
    """SQLite's CURRENT_TIMESTAMP ("2026-12-01 15:40:41", UTC) as ISO-8601 with ``Z``."""
    if not isinstance(value, str) or len(value) < 19 or value[10] != " ":
        return None
    return value[:10] + "T" + value[11:] + "Z"


@register
class OpenAIAgentsSQLite(Importer):
    """OpenAI Agents SDK SQLiteSession files: each session's stored Responses items in order."""

    name = "openai_agents_sqlite"
    description = ("OpenAI Agents SDK SQLiteSession database (SQLite: agent_sessions + agent_messages, "
                   "the db_path given to SQLiteSession; one session per session_id)")
    extensions = (".db", ".sqlite", ".sqlite3")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_sqlite(path, head, _is_agents_db)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        try:
            conn = open_sqlite_readonly(path)
        except SQLITE_ERRORS as e:
            raise InputError(f"cannot open SQLite database: {e}", where=str(path)) from None
        try:
            yield from self._sessions(conn, path, ctx)
        except SQLITE_ERRORS as e:
            raise InputError(f"cannot read the Agents SDK session database: {e}", where=str(path),
                             hint="the database may be corrupt or not written by SQLiteSession") from None
        finally:
            conn.close()

    def _sessions(self, conn: sqlite3.Connection, path: Path, ctx: ImportContext) -> Iterator[Session]:
        tables = set(sqlite_tables(conn))
        items, session_tables = item_tables(conn)
        every_items, every_sessions = item_tables(conn, stored=False)
        refused = computed_error(conn, every_items + every_sessions, path, "an Agents SDK session store")
        if refused:
            raise refused
        if not items:
            raise InputError("no table with the SDK's session_id / message_data columns", where=str(path),
                             hint="force another format with --format")
        if ADVANCED_TABLES <= tables:
            ctx.warn("an AdvancedSQLiteSession file: its branches (message_structure) and per-turn usage "
                     "(turn_usage) are not read; every stored item of a session is read in order")
        times: dict[str, tuple[Any, Any]] = {}
        for t in session_tables:
            for r in conn.execute(f"SELECT session_id, created_at, updated_at FROM {_q(t)}"):
                times.setdefault(str(r[0]), (r[1], r[2]))
        for table in items:
            # One query for every session's items, sessions in the order of their first item: a
            # query per session scans the whole table each time when session_id has no index.
            rows = conn.execute(
                f"SELECT session_id, id, message_data, MIN(id) OVER (PARTITION BY session_id) AS first "
                f"FROM {_q(table)} ORDER BY first, session_id, id"
            )
            for sid, group in itertools.groupby(rows, key=lambda r: r[0]):
                with ctx.record("session", index=str(sid)):
                    session = self._session(table, sid, list(group), times.get(str(sid)), len(items) > 1, ctx)
                    if session is not None:
                        yield session

    def _session(self, table: str, sid: Any, rows: list[Any], times: tuple[Any, Any] | None,
                 name_table: bool, ctx: ImportContext) -> Session | None:
        pairs: list[tuple[None, Any]] = []
        for r in rows:
            try:
                data = r[2]
                if not isinstance(data, (str, bytes)):
                    raise TypeError(f"message_data is {type(data).__name__}, not JSON text")
                pairs.append((None, parse_json(data, ctx)))
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what="item", index=f"{sid}#{r[1]}")
        if not pairs:
            ctx.skip("session without readable items")
            return None
        msgs = list(iter_items(pairs, ctx))
        created, updated = times or (None, None)
        metadata: dict[str, Any] = {"agent": "openai-agents", "table": table, "items": len(pairs),
                                    "recorded": "conversation items only (no instructions, tools, model "
                                                "or usage)"}
        if _iso(updated):
            metadata["updated_at"] = _iso(updated)
        ext = f"{table}:{sid}" if name_table else str(sid)
        return Session(external_id=ext, format=self.name, messages=msgs, title=first_user_title(msgs),
                       started_at=_iso(created), metadata=metadata)
