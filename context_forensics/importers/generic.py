"""Generic message logs: JSON/JSONL of ``{role, content, token_count}`` and SQLite tables.

``generic_json`` reads what home-grown loggers write:

- a list (or JSONL) of turns, each ``{"messages": [{role, content, token_count?}], ...}``;
  a turn that repeats the previous turn's messages (a cumulative context dump) contributes
  only its new messages;
- an object ``{"turns": [...]}`` or ``{"messages": [...]}``;
- a flat list or JSONL of ``{role, content, token_count?}`` messages.

``token_count`` (also ``tokens`` / ``num_tokens`` / ``n_tokens``) is a recorded per-message
count and is kept in ``meta["token_count"]``.

``sqlite_table`` reads the rows of one SQLite table with ``role`` and ``content`` columns
(plus optional token count, session/conversation id and ordering columns). The table comes
from ``ctx.options["table"]`` (``--table NAME``); without it, a database with exactly one such
table is read and one with several is an error that names them.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import KINDS, Message, Session
from ._documents import DocumentImporter, first_model, first_user_title
from ._json import parse_json
from ._openai_shapes import tool_call, usage_from_openai
from ._sniffing import FOREIGN_KEYS, foreign_document, head_records
from ._sqlite import (
    SQLITE_ERRORS,
    SQLITE_MAGIC,
    computed_error,
    open_sqlite_readonly,
    quote_name,
    sniff_sqlite,
    sqlite_computed,
    sqlite_names,
    sqlite_tables,
)
from .base import RECORD_ERRORS, ImportContext, Importer, as_int, int_text, iter_jsonl, read_head, register, text_of
from .llm_logs.database import is_llm_logs

ROLE_MAP = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "gpt": "assistant",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
}
TOKEN_KEYS = ("token_count", "tokens", "num_tokens", "n_tokens")
TURN_KEYS = ("turn", "turn_id", "turn_index", "step", "index")
MESSAGE_KEYS = frozenset(
    {"role", "content", "text", "name", "timestamp", "created_at", "id", "tool_call_id",
     "tool_calls", "model", "kind", "metadata", "meta", *TOKEN_KEYS}
)


def _token_count(d: dict) -> int | None:
    for key in TOKEN_KEYS:
        n = as_int(d.get(key))
        if n is not None:
            return n
    return None


def _is_message(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("role"), str) and ("content" in d or "text" in d)


def convert_message(d: Any, ctx: ImportContext, *, line: int | None = None) -> Message | None:
    if not _is_message(d):
        ctx.warn("entry is not a {role, content} message; skipped", line=line)
        ctx.skip("malformed message")
        return None
    raw = d["role"].strip().lower()
    role = ROLE_MAP.get(raw)
    meta: dict[str, Any] = {}
    if role is None:
        ctx.warn(f"unknown role {d['role']!r}; read as user", line=line)
        role = "user"
    if raw != role:
        meta["role"] = d["role"]
    content = d.get("content", d.get("text"))
    text = content if isinstance(content, str) else text_of(content)
    n = _token_count(d)
    if n is not None:
        meta["token_count"] = n
    if isinstance(d.get("id"), (str, int)):
        meta["id"] = d["id"]
    calls = tuple(c for c in (tool_call(tc) for tc in d.get("tool_calls") or []) if c is not None)
    kind = d.get("kind") if d.get("kind") in KINDS else "message"
    ts = d.get("timestamp", d.get("created_at"))
    return Message(
        role=role,
        text=text,
        kind=kind,
        name=d.get("name") if isinstance(d.get("name"), str) else None,
        tool_calls=calls if role == "assistant" else (),
        tool_call_id=d.get("tool_call_id") if role == "tool" and isinstance(d.get("tool_call_id"), str) else None,
        timestamp=str(ts) if isinstance(ts, (str, int, float)) and not isinstance(ts, bool) else None,
        model=d.get("model") if isinstance(d.get("model"), str) else None,
        meta=meta,
    )


def _key(d: Any) -> Any:
    if isinstance(d, dict):
        return (d.get("role"), json.dumps(d.get("content", d.get("text")), sort_keys=True, default=str))
    return repr(d)


def _converted(items: list[Any], ctx: ImportContext, *, line: int | None = None) -> list[Message]:
    """``convert_message`` of each item; one of unexpected shape is skipped and counted."""
    out = []
    for i, d in enumerate(items):
        try:
            m = convert_message(d, ctx, line=line)
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="message", index=i, line=line)
            continue
        if m is not None:
            out.append(m)
    return out


def _turn_messages(turns: Any, ctx: ImportContext) -> Iterator[Message]:
    """Messages of a list of turns, new ones only when a turn repeats the previous context."""
    prev: list[Any] = []
    for i, (line, turn) in enumerate(turns):
        try:
            new, prev = _turn(i, line, turn, prev, ctx)
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="turn", index=i, line=line)
            continue
        yield from new


def _turn(i: int, line: int | None, turn: Any, prev: list[Any], ctx: ImportContext) -> tuple[list[Message], list[Any]]:
    """The new messages of one turn, and the keys of its context (``prev`` for the next turn)."""
    if not isinstance(turn, dict) or not isinstance(turn.get("messages"), list):
        ctx.warn(f"turn {i} has no 'messages' list; skipped", line=line)
        ctx.skip("malformed turn")
        return [], prev
    msgs = turn["messages"]
    keys = [_key(m) for m in msgs]
    start = len(prev) if prev and len(keys) > len(prev) and keys[: len(prev)] == prev else 0
    prev = keys
    new = _converted(msgs[start:], ctx, line=line)
    if not new:
        return [], prev
    usage = usage_from_openai(turn.get("usage"))
    extra: dict[str, Any] = {}
    n = _token_count(turn)
    if n is not None:
        extra["turn_token_count"] = n
    turn_id = next((turn[k] for k in TURN_KEYS if isinstance(turn.get(k), (int, str))), None)
    if turn_id is not None:
        extra["turn"] = turn_id
    if usage is not None or extra:
        idx = max((j for j, m in enumerate(new) if m.role == "assistant"), default=len(new) - 1)
        last = new[idx]
        new[idx] = replace(last, usage=usage or last.usage, meta={**last.meta, **extra})
    return new, prev


def _jsonl_messages(path: Path, ctx: ImportContext, turns: bool) -> Iterator[Message]:
    if turns:
        yield from _turn_messages(iter_jsonl(path, ctx), ctx)
        return
    for line, rec in iter_jsonl(path, ctx):
        try:
            m = convert_message(rec, ctx, line=line)
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="message", line=line)
            continue
        if m is not None:
            yield m


def _generic_doc_ok(doc: Any) -> bool:
    if isinstance(doc, list):
        if not doc or not isinstance(doc[0], dict):
            return False
        first = doc[0]
        if _is_message(first):
            return True
        msgs = first.get("messages")
        return isinstance(msgs, list) and bool(msgs) and _is_message(msgs[0]) and not (FOREIGN_KEYS & first.keys())
    if isinstance(doc, dict):
        if (FOREIGN_KEYS - {"turns"}) & doc.keys():
            return False
        turns = doc.get("turns")
        if isinstance(turns, list):
            return bool(turns) and isinstance(turns[0], dict) and (
                _is_message(turns[0]) or isinstance(turns[0].get("messages"), list)
            )
        msgs = doc.get("messages")
        return isinstance(msgs, list) and bool(msgs) and _is_message(msgs[0])
    return False


@register
class GenericJSON(DocumentImporter):
    name = "generic_json"
    description = "generic JSON/JSONL of {role, content, token_count} messages or turns"
    extensions = (".json", ".jsonl")
    priority = 85
    fallback = True
    not_a_record = "expected a 'turns' or 'messages' list"
    not_a_document = "expected a JSON list of messages or turns"

    def sniff(self, path: Path, head: bytes) -> bool:
        kind, doc = head_records(path, head)
        if doc is None:
            return False
        # "turns" marks other formats' documents for the provider importers, not for this one.
        keys = {k: 1 for k in doc if k != "turns"} if isinstance(doc, dict) else doc
        if foreign_document(path, head, keys):
            return False
        if kind == "jsonl":
            if not isinstance(doc, dict):
                return False
            if _is_message(doc):
                return set(doc) <= MESSAGE_KEYS
            msgs = doc.get("messages")
            return isinstance(msgs, list) and bool(msgs) and _is_message(msgs[0]) and not (FOREIGN_KEYS & doc.keys())
        if isinstance(doc, list) and doc and _is_message(doc[0]):
            return set(doc[0]) <= MESSAGE_KEYS
        return _generic_doc_ok(doc)

    def stream_session(self, path: Path, first: Any, ctx: ImportContext) -> Session | None:
        turns = isinstance(first, dict) and isinstance(first.get("messages"), list)
        return Session(external_id=path.stem, format=self.name, messages=_jsonl_messages(path, ctx, turns),
                       metadata={"layout": "turn per line" if turns else "message per line"})

    def list_session(self, path: Path, items: list[Any], ctx: ImportContext) -> Session | None:
        return self._session(path.stem, items, {}, ctx)

    def record_session(
        self, rec: dict[str, Any], ctx: ImportContext, *, ext: str | None, line: int | None
    ) -> Session | None:
        """The document object: ``{"turns": [...]}`` or ``{"messages": [...]}``, with its id,
        title, model, task and outcome."""
        meta: dict[str, Any] = {}
        for key in ("id", "title", "model", "task", "outcome"):
            if isinstance(rec.get(key), (str, int)):
                meta[key] = rec[key]
        items = rec.get("turns") if isinstance(rec.get("turns"), list) else rec.get("messages")
        if not isinstance(items, list):
            return None
        return self._session(str(ext), items, meta, ctx)

    def _session(self, ext: str, items: list[Any], meta: dict[str, Any], ctx: ImportContext) -> Session:
        head = [t for t in items[:5] if isinstance(t, dict)]
        if any(isinstance(t.get("messages"), list) for t in head) and not any(_is_message(t) for t in head):
            msgs = list(_turn_messages(((None, t) for t in items), ctx))
        else:
            msgs = _converted(items, ctx)
        outcome = o if (o := meta.get("outcome")) in ("success", "failure", "unknown") else "unknown"
        return Session(
            external_id=str(meta.get("id") or ext),
            format=self.name,
            messages=msgs,
            title=str(meta["title"]) if meta.get("title") else first_user_title(msgs),
            model=str(meta["model"]) if meta.get("model") else first_model(msgs),
            task=str(meta["task"]) if meta.get("task") else None,
            outcome=outcome,
            metadata={"messages_with_token_count": sum(1 for m in msgs if "token_count" in m.meta)},
        )


# ---------------------------------------------------------------- SQLite tables

ROLE_COLUMNS = ("role", "speaker", "author", "sender", "author_role")
CONTENT_COLUMNS = ("content", "text", "message", "body", "content_text")
TOKEN_COLUMNS = TOKEN_KEYS + ("token_len", "length_tokens")
SESSION_COLUMNS = ("session_id", "conversation_id", "thread_id", "chat_id", "dialog_id", "run_id",
                   "session", "conversation", "thread", "chat", "dialog")
ORDER_COLUMNS = ("seq", "sequence", "position", "pos", "idx", "index", "turn", "turn_index",
                 "message_index", "ordinal", "step", "id", "created_at", "timestamp", "ts", "time",
                 "created", "date")
def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")]


def _order_column(conn: sqlite3.Connection, table: str) -> str | None:
    """The column that orders messages; a text ``id`` (a UUID) orders nothing, so skip it."""
    types = {r[1].lower(): (r[1], (r[2] or "").upper()) for r in conn.execute(f"PRAGMA table_info({_q(table)})")}
    for w in ORDER_COLUMNS:
        if w in types:
            name, decl = types[w]
            if w == "id" and "INT" not in decl:
                continue
            return name
    return None


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    try:
        conn.execute(f"SELECT rowid FROM {_q(table)} LIMIT 1").fetchall()
    except SQLITE_ERRORS:
        return False
    return True


_q = quote_name


def _pick(columns: list[str], wanted: tuple[str, ...]) -> str | None:
    lower = {c.lower(): c for c in columns}
    return next((lower[w] for w in wanted if w in lower), None)


def candidate_tables(conn: sqlite3.Connection, names: list[str] | None = None) -> list[str]:
    """Stored tables (or the objects ``names``) with a role column and a content column."""
    out = []
    for t in sqlite_tables(conn) if names is None else names:
        cols = _columns(conn, t)
        if _pick(cols, ROLE_COLUMNS) and _pick(cols, CONTENT_COLUMNS):
            out.append(t)
    return out


def _owned_elsewhere(conn: sqlite3.Connection) -> bool:
    """ctxf's own store, or an ``llm`` logs.db (the llm_logs importer reads those)."""
    tables = set(sqlite_names(conn))
    return "_ctxf_migrations" in tables or is_llm_logs(tables)


def _computed_candidates(conn: sqlite3.Connection) -> list[str]:
    """Views and computed tables with role and content columns: claimed, to be refused clearly."""
    return candidate_tables(conn, list(sqlite_computed(conn)))


@register
class SQLiteTable(Importer):
    name = "sqlite_table"
    description = "rows of an SQLite table with role + content columns (--table NAME picks the table)"
    extensions = (".db", ".sqlite", ".sqlite3")
    priority = 88
    fallback = True

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_sqlite(path, head, lambda conn: not _owned_elsewhere(conn)
                            and bool(candidate_tables(conn) or _computed_candidates(conn)))

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        warned: set[str] = set()  # unknown role values, warned about once each
        if not read_head(path, 16).startswith(SQLITE_MAGIC):
            raise InputError("not an SQLite database", where=str(path), hint="force another format with --format")
        try:
            conn = open_sqlite_readonly(path)
        except SQLITE_ERRORS as e:
            raise InputError(f"cannot open SQLite database: {e}", where=str(path)) from None
        try:
            table, cols = self._table(conn, path, ctx)
            order_c = _order_column(conn, table)
            rowid = _has_rowid(conn, table)
        except SQLITE_ERRORS as e:
            raise InputError(f"cannot read SQLite database: {e}", where=str(path)) from None
        finally:
            conn.close()
        role_c = _pick(cols, ROLE_COLUMNS)
        content_c = _pick(cols, CONTENT_COLUMNS)
        if role_c is None or content_c is None:
            raise InputError(
                f"table {table!r} has no role and content columns (columns: {', '.join(cols)})",
                where=str(path),
                hint="pick a table with role + content columns with --table NAME",
            )
        session_c = _pick(cols, SESSION_COLUMNS)
        spec = {
            "role": role_c,
            "content": content_c,
            "token_count": _pick(cols, TOKEN_COLUMNS),
            "session": session_c,
            "order": order_c,
            "name": _pick(cols, ("name",)),
            "tool_call_id": _pick(cols, ("tool_call_id",)),
            "timestamp": _pick(cols, ("timestamp", "created_at", "ts", "time", "created", "date")),
            "model": _pick(cols, ("model",)),
        }
        order = [_q(session_c)] if session_c else []
        if order_c:
            order.append(_q(order_c))
        if rowid:
            order.append("rowid")
        select = ", ".join(f"{_q(c)} AS {_q(k)}" for k, c in spec.items() if c is not None)
        sql = f"SELECT {select} FROM {_q(table)}"
        if order:
            sql += " ORDER BY " + ", ".join(order)
        metadata = {"table": table, "columns": {k: v for k, v in spec.items() if v}}
        if session_c is None:
            yield Session(external_id=table, format=self.name, messages=self._rows(path, sql, ctx, warned),
                          title=table, metadata=metadata)
            return
        # Rows come sorted by session, so one session's rows are in memory at a time.
        current: Any = object()
        msgs: list[Message] = []
        for row in self._row_iter(path, sql):
            key = row["session"]
            if key != current:
                if msgs:
                    yield self._session(table, current, msgs, metadata)
                current, msgs = key, []
            m = self._guarded(row, ctx, warned)
            if m is not None:
                msgs.append(m)
        if msgs:
            yield self._session(table, current, msgs, metadata)

    def _table(self, conn: sqlite3.Connection, path: Path, ctx: ImportContext) -> tuple[str, list[str]]:
        wanted = ctx.options.get("table")
        tables = sqlite_tables(conn)
        if wanted:
            refused = computed_error(conn, [wanted], path, "a table of messages")
            if refused:
                raise refused
            if wanted not in tables:
                raise InputError(
                    f"no table {wanted!r} in this database (tables: {', '.join(tables) or 'none'})",
                    where=str(path),
                    hint="pass one of the listed tables with --table NAME",
                )
            return wanted, _columns(conn, wanted)
        cands = candidate_tables(conn)
        if len(cands) == 1:
            return cands[0], _columns(conn, cands[0])
        if not cands:
            refused = computed_error(conn, _computed_candidates(conn), path, "a table of messages")
            if refused:
                raise refused
            raise InputError(
                f"no table has role and content columns (tables: {', '.join(tables) or 'none'})",
                where=str(path),
                hint="pass the table to read with --table NAME",
            )
        raise InputError(
            f"several tables have role and content columns: {', '.join(cands)}",
            where=str(path),
            hint="pick one with --table NAME",
        )

    def _row_iter(self, path: Path, sql: str) -> Iterator[sqlite3.Row]:
        conn = open_sqlite_readonly(path)
        try:
            yield from conn.execute(sql)
        except SQLITE_ERRORS as e:
            raise InputError(f"cannot read SQLite table: {e}", where=str(path)) from None
        finally:
            conn.close()

    def _rows(self, path: Path, sql: str, ctx: ImportContext, warned: set[str]) -> Iterator[Message]:
        for row in self._row_iter(path, sql):
            m = self._guarded(row, ctx, warned)
            if m is not None:
                yield m

    def _guarded(self, row: sqlite3.Row, ctx: ImportContext, warned: set[str]) -> Message | None:
        try:
            return self._message(row, ctx, warned)
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="row")
            return None

    def _message(self, row: sqlite3.Row, ctx: ImportContext, warned: set[str]) -> Message | None:
        keys = row.keys()
        raw_role = row["role"]
        if raw_role is None:
            ctx.skip("row without role")
            return None
        raw = str(raw_role).strip().lower()
        role = ROLE_MAP.get(raw)
        meta: dict[str, Any] = {}
        if role is None:
            if raw not in warned:
                warned.add(raw)
                ctx.warn(f"unknown role {raw_role!r} in table rows; read as user")
            role = "user"
        if raw != role:
            meta["role"] = raw_role
        content = row["content"]
        if isinstance(content, bytes):
            content = content.decode("utf-8", errors="replace")
        text = "" if content is None else str(content)
        if text[:1] == "[":  # content stored as a JSON list of parts
            try:
                value = parse_json(text, ctx)
            except json.JSONDecodeError:
                value = None
            if isinstance(value, list) and value and all(isinstance(p, dict) and "type" in p for p in value):
                text = text_of(value)
        if "token_count" in keys:
            n = as_int(row["token_count"])
            if n is None:
                n = int_text(row["token_count"])
            if n is not None:
                meta["token_count"] = n
        if "order" in keys and row["order"] is not None:
            meta["order"] = row["order"]
        ts = row["timestamp"] if "timestamp" in keys else None
        return Message(
            role=role,
            text=text,
            name=str(row["name"]) if "name" in keys and row["name"] is not None else None,
            tool_call_id=str(row["tool_call_id"]) if role == "tool" and "tool_call_id" in keys
            and row["tool_call_id"] is not None else None,
            timestamp=str(ts) if ts is not None else None,
            model=str(row["model"]) if "model" in keys and row["model"] is not None else None,
            meta=meta,
        )

    def _session(self, table: str, key: Any, msgs: list[Message], metadata: dict) -> Session:
        return Session(
            external_id=f"{table}:{key}",
            format=self.name,
            messages=msgs,
            title=first_user_title(msgs),
            model=first_model(msgs),
            started_at=next((m.timestamp for m in msgs if m.timestamp), None),
            metadata={**metadata, "session": key if isinstance(key, (str, int, float)) else str(key)},
        )

