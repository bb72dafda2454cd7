"""Goose sessions: the SQLite store (``<data>/sessions/sessions.db``) and the legacy
``<data>/sessions/<name>.jsonl`` files, ``<data>`` being ``$GOOSE_PATH_ROOT/data`` or the platform's data
folder of goose (``~/.local/share/goose``; ``~/Library/Application Support/Block/goose``;
``%APPDATA%\\Block\\goose\\data``).

Read from block/goose: ``crates/goose/src/session/session_manager.rs`` @ 0164300649cf5e4ab327105d9155779ab8bfde4b
(schema version 5: ``sessions`` {id ``YYYYMMDD_N``, name, description, session_type, working_dir, created_at,
total/input/output_tokens, accumulated_*_tokens, ...}, ``messages`` {id, session_id, role, content_json,
created_timestamp, timestamp, tokens, metadata_json}, ``schema_version``; a conversation is its rows
in ``timestamp`` order, rows of other roles left out), ``crates/goose/src/session/legacy.rs``
@ 0fc5e54062be2712f705269265e928c17bceee83 (legacy JSONL: the first line the session's metadata, then
one Message per line), ``crates/goose/src/conversation/message.rs`` and ``tool_result_serde.rs``
@ 05132966065f7dd80b97af7d080a41328d103073 (Message {role, created, content, metadata {userVisible,
agentVisible}}; content items tagged ``type``) and ``context_mgmt`` (compaction). No real Goose
session file is public: the fixtures are written from this code.

Content items: ``text``; ``image`` (a placeholder part); ``toolRequest`` {id, toolCall {status success,
value {name, arguments}} or {status error, error}} (a tool call); ``toolResponse`` {id, toolResult
{status, value: a CallToolResult {content} or, older, a list of contents}} (a tool message; Goose keeps
them in user-role messages); ``thinking`` / ``redactedThinking`` (reasoning parts).
``toolConfirmationRequest``, ``actionRequired``, ``frontendToolRequest`` and ``systemNotification`` are
the UI's, ``conversationCompacted`` (before 1.14) a marker Goose itself drops: counted, not read.

Compactions (ground truth): Goose compacts by keeping every message but marking the compacted ones
``agentVisible: false``, then adding the summary (``agentVisible`` only, a compaction summary) and a
continuation text (an assistant message the harness wrote, scripted). Where agent-visible messages
follow agent-invisible ones, those left the history there: a recorded edit (``compaction``,
summarized, when a summary follows; ``truncation``, evicted, otherwise).

Usage: Goose stores no per-call usage. ``sessions.input_tokens`` / ``output_tokens`` are the usage of
the last provider call (``update_session_metrics`` after each reply) and ``accumulated_*`` the sums:
the last figures are read as the usage of the session's last assistant message when that message is
a model reply (not a compaction's); the sums are kept in the session's metadata.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..records import (
    KIND_COMPACTION_SUMMARY,
    KIND_SCRIPTED,
    Message,
    Session,
    ToolCall,
    Usage,
    history_edit,
    position_runs,
)
from ._json import parse_json
from ._sniffing import head_jsonl_records, looks_like_jsonl, mostly
from ._sqlite import SessionRows, read_store, sniff_sqlite, sqlite_names, sqlite_tables, table_columns
from ._text import title_line
from .base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    as_int,
    as_list,
    as_str,
    epoch_iso,
    iter_jsonl,
    json_text,
    register,
    text_of,
)

SOURCE = "goose 01643006 (session_manager.rs, schema 5), 0fc5e540 (legacy.rs)"
CONTENT_TYPES = frozenset({"text", "image", "toolRequest", "toolResponse", "toolConfirmationRequest", "actionRequired",
                           "frontendToolRequest", "thinking", "redactedThinking", "systemNotification",
                           "conversationCompacted", "summarizationRequested"})
UI_ITEMS = frozenset({"toolConfirmationRequest", "actionRequired", "frontendToolRequest", "systemNotification",
                      "conversationCompacted", "summarizationRequested"})
MESSAGE_KEYS = frozenset({"id", "role", "created", "content", "metadata"})
TOKEN_FIELDS = ("total_tokens", "input_tokens", "output_tokens", "accumulated_total_tokens",
                "accumulated_input_tokens", "accumulated_output_tokens")


def is_goose_message(r: Any) -> bool:
    """A Goose Message as serde writes it: role user/assistant, ``created`` seconds, typed content items."""
    if not isinstance(r, dict) or r.get("role") not in ("user", "assistant"):
        return False
    content = r.get("content")
    if not isinstance(r.get("created"), int) or not isinstance(content, list):
        return False
    return set(r) <= MESSAGE_KEYS and all(isinstance(c, dict) and c.get("type") in CONTENT_TYPES for c in content)


def is_session_metadata(r: Any) -> bool:
    return isinstance(r, dict) and "role" not in r and "working_dir" in r and any(
        k in r for k in ("description", "message_count", "total_tokens", "schedule_id"))


def _result_text(result: Any) -> tuple[str, bool]:
    """A toolResponse's ``toolResult`` as (text, is_error)."""
    r = as_dict(result)
    if r.get("status") == "error":
        return as_str(r.get("error")) or "", True
    value = r.get("value")
    if isinstance(value, dict):
        return text_of(as_list(value.get("content"))), value.get("isError") is True
    return text_of(as_list(value)), False  # legacy: a list of contents


class Converter:
    """A Goose conversation (Message dicts in order) into ctxf messages."""

    def __init__(self, ctx: ImportContext) -> None:
        self.ctx = ctx
        self.out: list[Message] = []
        self.hidden: list[int] = []  # positions of agent-invisible messages not yet taken out
        self.compactions = 0
        self.last_reply: int | None = None  # position of the last model reply

    def convert(self, messages: Iterable[tuple[str, Any]]) -> list[Message]:
        for where, m in messages:
            with self.ctx.record("message", index=where):
                self._message(m)
        return self.out

    def _message(self, m: Any) -> None:
        if not isinstance(m, dict):
            raise TypeError(f"a message is {type(m).__name__}, not an object")
        role = m.get("role")
        if role not in ("user", "assistant"):
            self.ctx.skip(f"message of role {role!r}", unknown=True)
            return
        meta = as_dict(m.get("metadata"))
        agent_visible = meta.get("agentVisible", True) is not False
        user_visible = meta.get("userVisible", True) is not False
        ts = epoch_iso(m.get("created"))
        texts: list[str] = []
        parts: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        results: list[Message] = []
        for item in as_list(m.get("content")):
            kind = as_dict(item).get("type")
            if kind == "text":
                texts.append(as_str(item.get("text")) or "")
            elif kind == "image":
                parts.append({"type": "image", "mime": as_str(item.get("mimeType")) or ""})
            elif kind == "toolRequest":
                call = as_dict(item.get("toolCall"))
                value = as_dict(call.get("value"))
                if call.get("status") == "error":
                    calls.append(ToolCall(name="(invalid tool call)", arguments=as_str(call.get("error")) or "",
                                          id=as_str(item.get("id"))))
                else:
                    calls.append(ToolCall(name=as_str(value.get("name")) or "?",
                                          arguments=json_text(value.get("arguments") or {}), id=as_str(item.get("id"))))
            elif kind == "toolResponse":
                text, err = _result_text(item.get("toolResult"))
                results.append(Message(role="tool", text=text, tool_call_id=as_str(item.get("id")), timestamp=ts,
                                       meta={"is_error": True} if err else {}))
            elif kind == "thinking":
                parts.append({"type": "thinking", "text": as_str(item.get("thinking")) or ""})
            elif kind == "redactedThinking":
                parts.append({"type": "redacted_thinking"})
            elif kind in UI_ITEMS:
                self.ctx.skip(f"{kind} item")
            else:
                self.ctx.skip(f"content item of type {kind!r}", unknown=True)
        made: list[Message] = list(results)
        if texts or parts or calls:
            kind_ = "message"
            if agent_visible and not user_visible:
                if self.hidden:  # the summary a compaction wrote, after the messages it replaced
                    kind_ = KIND_COMPACTION_SUMMARY
                elif role == "assistant" and self.out and self.out[-1].kind == KIND_COMPACTION_SUMMARY:
                    kind_ = KIND_SCRIPTED  # its continuation text, written by Goose
            made.insert(0, Message(role=role, text="\n".join(texts), kind=kind_, tool_calls=tuple(calls),
                                   parts=tuple(parts), timestamp=ts,
                                   meta={} if user_visible else {"user_visible": False}))
        if not made:
            self.ctx.skip("message without content the model reads")
            return
        if agent_visible and self.hidden:
            summarized = made[0].kind == KIND_COMPACTION_SUMMARY
            if summarized:
                self.compactions += 1
            self.out.append(history_edit(
                "compaction" if summarized else "truncation", "summarized" if summarized else "evicted",
                position_runs(self.hidden), f"{SOURCE}: metadata.agentVisible false",
                f"Goose marked {len(self.hidden)} message(s) agent-invisible"
                + (": a compaction summary replaces them" if summarized else "")))
            self.hidden = []
        for msg in made:
            if not agent_visible:
                self.hidden.append(len(self.out))
            if msg.role == "assistant" and msg.kind == "message" and agent_visible:
                self.last_reply = len(self.out)
            self.out.append(msg)

    def attach_last_usage(self, row: dict[str, Any]) -> bool:
        """The session row's last-call figures as the usage of the last message, when it is a model reply."""
        inp, out = as_int(row.get("input_tokens")), as_int(row.get("output_tokens"))
        if inp is None or self.last_reply is None or self.last_reply != len(self.out) - 1:
            return False
        m = self.out[self.last_reply]
        self.out[self.last_reply] = Message(
            role=m.role, text=m.text, kind=m.kind, name=m.name, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
            parts=m.parts, usage=Usage(prompt_tokens=inp, completion_tokens=out), timestamp=m.timestamp,
            model=m.model, meta={**m.meta, "usage_source": "sessions.input_tokens/output_tokens (the last call's)"})
        return True


def _session(fmt: str, sid: str, row: dict[str, Any], messages: Iterable[tuple[str, Any]], ctx: ImportContext,
             extra: dict[str, Any]) -> Session | None:
    conv = Converter(ctx)
    out = conv.convert(messages)
    if not out:
        ctx.skip("session without messages")
        return None
    usage = conv.attach_last_usage(row)
    metadata: dict[str, Any] = {"agent": "goose", "source": SOURCE, "compactions": conv.compactions,
                                "calls_with_usage": int(usage),
                                "recorded": "no system prompt, tools or model (Goose does not store them); usage of "
                                            "the last call only",
                                **{k: row[k] for k in TOKEN_FIELDS if row.get(k) is not None}, **extra}
    for key in ("working_dir", "session_type", "schedule_id"):
        if as_str(row.get(key)):
            metadata[key] = row[key]
    name = as_str(row.get("name")) or as_str(row.get("description"))
    title = name or next((title_line(m.text) for m in out if m.role == "user" and m.text), None)
    started = row.get("created_at")
    return Session(external_id=sid, format=fmt, messages=out, title=title,
                   started_at=_iso(started) if isinstance(started, str) else None, metadata=metadata)


def _iso(value: str) -> str | None:
    """SQLite/chrono timestamps ("2026-01-05 10:00:00" or RFC 3339) as ISO-8601."""
    if len(value) >= 19 and value[10] in " T":
        v = value[:10] + "T" + value[11:]
        return v if v.endswith("Z") or "+" in v[19:] else v + "Z"
    return None


# ---------------------------------------------------------------- sessions.db


def _is_goose_db(conn: sqlite3.Connection) -> bool:
    names = set(sqlite_names(conn))
    return ({"sessions", "messages"} <= names
            and {"session_id", "role", "content_json", "created_timestamp"} <= table_columns(conn, "messages")
            and {"id", "working_dir"} <= table_columns(conn, "sessions"))


@register
class GooseDatabase(Importer):
    """Goose's session store (sessions.db, schema version 5)."""

    name = "goose_db"
    description = ("Goose session store (<data>/sessions/sessions.db, SQLite: sessions + messages; "
                   "session_manager.rs 01643006, schema 5)")
    extensions = (".db",)
    priority = 18

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_sqlite(path, head, _is_goose_db)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        return read_store(path, ("sessions", "messages"), "a Goose session store",
                          lambda conn: self._sessions(conn, ctx), "Goose")

    def _sessions(self, conn: sqlite3.Connection, ctx: ImportContext) -> Iterator[Session]:
        version = None
        if "schema_version" in sqlite_tables(conn):
            version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        if isinstance(version, int) and version > 5:
            ctx.warn(f"schema version {version}: ctxf knows Goose's schema 5; its columns are read by name")
        mcols = table_columns(conn, "messages")
        order = "timestamp, id" if "timestamp" in mcols else "id"
        meta_col = ", metadata_json" if "metadata_json" in mcols else ", NULL"
        # one ordered scan of each table, side by side by session id (no query per session)
        messages = SessionRows(conn.execute(f"SELECT session_id, id, role, content_json, created_timestamp{meta_col} "
                                            f"FROM messages ORDER BY session_id, {order}"))
        for r in conn.execute("SELECT * FROM sessions ORDER BY id"):
            row = dict(r)
            sid = str(row.get("id"))
            with ctx.record("session", index=sid):
                msgs = messages.take(sid, ctx, "message of no session")
                session = _session(self.name, sid, row, self._messages(msgs, ctx), ctx,
                                   {"schema_version": version, "layout": "sessions.db"})
                if session is not None:
                    yield session
        messages.rest(ctx, "message of no session")

    def _messages(self, rows: list[Any], ctx: ImportContext) -> Iterator[tuple[str, Any]]:
        for _, rid, role, content_json, created, meta in rows:
            try:
                content = parse_json(content_json, ctx) if isinstance(content_json, (str, bytes)) else None
                if not isinstance(content, list):
                    raise TypeError("content_json is not a JSON list of content items")
                metadata = parse_json(meta, ctx) if isinstance(meta, (str, bytes)) and meta else {}
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what="message", index=str(rid))
                continue
            yield str(rid), {"role": role, "created": created, "content": content, "metadata": metadata}


# ---------------------------------------------------------------- legacy sessions/*.jsonl


@register
class GooseJSONL(Importer):
    """Goose's legacy session files (sessions/<name>.jsonl: a metadata line, then one Message per line)."""

    name = "goose"
    description = ("Goose legacy session JSONL (<data>/sessions/<name>.jsonl: SessionMetadata line + Messages; "
                   "legacy.rs 0fc5e540)")
    extensions = (".jsonl",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        if not looks_like_jsonl(path, head):
            return False
        records = head_jsonl_records(head)
        if records and is_session_metadata(records[0]):
            records = records[1:]
            return not records or mostly(records, is_goose_message)
        return mostly(records, is_goose_message)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        header: dict[str, Any] = {}
        lines = iter_jsonl(path, ctx)

        def messages() -> Iterator[tuple[str, Any]]:
            for n, rec in lines:
                if n == 1 and is_session_metadata(rec):
                    header.update(rec)
                    continue
                yield f"line {n}", rec

        items = list(messages())
        row = {**header, "name": header.get("description")}
        session = _session(self.name, path.stem, row, items, ctx, {"layout": "legacy jsonl"})
        if session is not None:
            yield session
