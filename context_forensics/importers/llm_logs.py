"""simonw ``llm`` logs.db: the SQLite log the ``llm`` CLI and library write.

Two layouts, both read (a database upgraded in place can hold both):

- **Legacy tables** (llm 0.13 - 0.2x): ``conversations`` and ``responses``, one row per model
  call, with ``prompt``/``system``/``response``, ``input_tokens``/``output_tokens``/
  ``token_details``, fragments (``prompt_fragments``/``system_fragments``), attachments
  (``prompt_attachments``) and tools (``tool_calls``/``tool_results``/``tool_responses``).
  One session per conversation; per response, in order: a system message when the system
  prompt (system fragments + system) first appears or changes, the tool results the prompt
  carried, the user prompt (prompt fragments + prompt, as llm sends it), then the assistant
  reply with its tool calls and usage.
- **Message store** (llm 0.3x): ``threads``, ``turns``, and content-addressed ``messages``/
  ``parts``. One session per thread: the chain from the thread's tip back to its root. Each
  turn (one model call) delimits its output messages (after ``parent_message_hash`` up to
  ``tip_message_hash``); its usage goes on the last assistant message of that output. A
  thread that continues a legacy conversation has the same id; its chain already holds the
  older history, so the legacy rows only lend their usage to the matching replies.

Usage: ``prompt_tokens`` = ``input_tokens``, plus the Anthropic cache counts when
``token_details`` reports them (Anthropic's input count excludes cached tokens);
cache reads and reasoning tokens are taken from ``token_details`` where the plugin recorded
them (OpenAI ``prompt_tokens_details``/``completion_tokens_details``, Gemini
``thoughtsTokenCount``/``cachedContentTokenCount``).

The database is opened read-only; nothing is written to it.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import InputError
from ..records import Message, Session, ToolCall, Usage
from .base import (
    SQLITE_MAGIC, ImportContext, Importer, as_int, image_part, open_sqlite_readonly, register, sqlite_tables,
)

_CHUNK = 500  # SQLite's default limit on bound parameters is 999


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"pragma table_info([{table}])")}


def _json(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return None


def _iso(value: Any) -> str | None:
    """llm's datetime_utc ("2024-05-01 12:00:00.1+00:00" or naive UTC) as ISO-8601."""
    if not isinstance(value, str) or not value:
        return None
    s = value.strip().replace(" ", "T", 1)
    tail = s[10:]
    if not (s.endswith("Z") or "+" in tail or "-" in tail):
        s += "+00:00"
    return s


def _usage(input_tokens: Any, output_tokens: Any, details_json: Any) -> Usage | None:
    details = _json(details_json)
    details = details if isinstance(details, dict) else {}
    prompt = as_int(input_tokens)
    cache_write = as_int(details.get("cache_creation_input_tokens"))
    cache_read = as_int(details.get("cache_read_input_tokens"))
    if prompt is not None and (cache_write or cache_read):  # Anthropic: input excludes cache
        prompt += (cache_write or 0) + (cache_read or 0)
    if cache_read is None:
        ptd = details.get("prompt_tokens_details") or details.get("input_tokens_details") or {}
        cache_read = as_int(ptd.get("cached_tokens")) if isinstance(ptd, dict) else None
        if cache_read is None:
            cache_read = as_int(details.get("cachedContentTokenCount"))
    ctd = details.get("completion_tokens_details") or details.get("output_tokens_details") or {}
    reasoning = as_int(ctd.get("reasoning_tokens")) if isinstance(ctd, dict) else None
    if reasoning is None:
        reasoning = as_int(details.get("thoughtsTokenCount"))
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=as_int(output_tokens),
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_write,
        reasoning_tokens=reasoning,
    )
    return None if usage.is_empty() else usage


def _attachment_part(row: sqlite3.Row | dict[str, Any] | None) -> dict[str, Any]:
    """An attachment row (content trimmed to its head by the query) as a part."""
    if row is None:
        return {"type": "attachment", "missing": True}
    row = dict(row)
    media = row.get("type")
    head = row.get("head")
    size = row.get("size")
    if media and str(media).startswith("image/"):
        if head:
            part = image_part(base64_data=base64.b64encode(bytes(head)).decode("ascii"), media_type=media)
            part["bytes"] = size
        else:
            part = image_part(url=row.get("url"), media_type=media)
            if row.get("path"):
                part["path"] = row["path"]
        return part
    part = {"type": "attachment", "media_type": media}
    for key in ("path", "url"):
        if row.get(key):
            part[key] = row[key]
    if size:
        part["bytes"] = size
    return part


_ATTACHMENT_COLS = "id, type, path, url, substr(content, 1, 65536) as head, length(content) as size"


@register
class LLMLogs(Importer):
    name = "llm_logs"
    description = "simonw llm logs.db (SQLite: conversations/responses, or threads/turns/messages)"
    extensions = (".db", ".sqlite", ".sqlite3")
    priority = 15

    def sniff(self, path: Path, head: bytes) -> bool:
        if not head.startswith(SQLITE_MAGIC):
            return False
        try:
            conn = open_sqlite_readonly(path)
            try:
                tables = set(sqlite_tables(conn))
            finally:
                conn.close()
        except sqlite3.Error:
            return False
        return {"responses", "conversations"} <= tables or {"threads", "turns", "messages", "parts"} <= tables

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        try:
            conn = open_sqlite_readonly(path)
            tables = set(sqlite_tables(conn))
        except sqlite3.Error as e:
            raise InputError(f"cannot open SQLite database: {e}", where=str(path)) from None
        try:
            reader = _Reader(conn, tables, self.name, ctx)
            yield from reader.sessions()
        except sqlite3.DatabaseError as e:
            raise InputError(
                f"cannot read llm logs.db: {e}",
                where=str(path),
                hint="the database may be corrupt or from an unknown llm version",
            ) from None
        finally:
            conn.close()


class _Reader:
    def __init__(self, conn: sqlite3.Connection, tables: set[str], fmt: str, ctx: ImportContext):
        self.conn = conn
        self.tables = tables
        self.fmt = fmt
        self.ctx = ctx
        self.cols = {t: _columns(conn, t) for t in ("responses", "tool_results", "turns") if t in tables}
        self._tools_by_id: dict[int, dict[str, Any]] | None = None

    def q(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    def has(self, *tables: str) -> bool:
        return all(t in self.tables for t in tables)

    # -- shared lookups

    def tools(self) -> dict[int, dict[str, Any]]:
        if self._tools_by_id is None:
            self._tools_by_id = {}
            if self.has("tools"):
                for r in self.q("select id, name, description, input_schema from tools"):
                    self._tools_by_id[r["id"]] = {
                        "name": r["name"],
                        "description": r["description"],
                        "input_schema": _json(r["input_schema"]) or {},
                    }
        return self._tools_by_id

    def attachments(self, ids: list[str]) -> dict[str, sqlite3.Row]:
        out: dict[str, sqlite3.Row] = {}
        if not self.has("attachments"):
            return out
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for r in self.q(f"select {_ATTACHMENT_COLS} from attachments where id in ({marks})", chunk):
                out[r["id"]] = r
        return out

    # -- sessions

    def sessions(self) -> Iterator[Session]:
        thread_ids: set[str] = set()
        if self.has("threads", "turns", "messages", "parts"):
            for t in self.q("select * from threads order by datetime_utc, id"):
                thread_ids.add(t["id"])
                session = self.thread_session(t)
                if session is not None:
                    yield session
        if self.has("responses", "conversations"):
            yield from self.legacy_sessions(thread_ids)

    # -- legacy tables

    def legacy_sessions(self, thread_ids: set[str]) -> Iterator[Session]:
        order = "datetime_utc, id" if "datetime_utc" in self.cols["responses"] else "id"
        convs = {r["id"]: r for r in self.q("select * from conversations")}
        seen = set()
        ids = self.q(
            "select conversation_id, min(datetime_utc) as first from responses "
            "group by conversation_id order by first"
            if "datetime_utc" in self.cols["responses"]
            else "select distinct conversation_id from responses"
        )
        for r in ids:
            cid = r["conversation_id"]
            seen.add(cid)
            if cid is None:  # responses logged outside any conversation: one session each
                for row in self.q(f"select * from responses where conversation_id is null order by {order}"):
                    yield self.legacy_session(row["id"], None, [row])
                continue
            if cid in thread_ids:
                continue  # the thread session already carries this history
            rows = self.q(f"select * from responses where conversation_id = ? order by {order}", [cid])
            yield self.legacy_session(cid, convs.get(cid), rows)
        empty = [c for c in convs if c not in seen and c not in thread_ids]
        if empty:
            self.ctx.skip("conversation without responses", len(empty))

    def legacy_session(self, cid: str, conv: sqlite3.Row | None, rows: list[sqlite3.Row]) -> Session:
        messages: list[Message] = []
        last_system: str | None = None
        models: Counter = Counter()
        for row in rows:
            system, user, tool_msgs, assistant = self.legacy_turn(row)
            if system and system != last_system:
                messages.append(Message(role="system", text=system, meta={"response_id": row["id"]}))
                last_system = system
            messages.extend(tool_msgs)
            if user is not None:
                messages.append(user)
            messages.append(assistant)
            models[row["model"]] += 1
        first = rows[0] if rows else None
        model = conv["model"] if conv is not None else None
        model = model or (models.most_common(1)[0][0] if models else None)
        return Session(
            external_id=str(cid),
            format=self.fmt,
            messages=messages,
            title=(conv["name"] if conv is not None else None) or None,
            model=model,
            started_at=_iso(first["datetime_utc"]) if first is not None and "datetime_utc" in first.keys()
            else None,
            global_id=True,
            metadata={"layout": "responses", "responses": len(rows)},
        )

    def legacy_turn(self, row: sqlite3.Row) -> tuple[str, Message | None, list[Message], Message]:
        rid = row["id"]
        keys = row.keys()
        fragments: dict[str, list[str]] = {"prompt": [], "system": []}
        if self.has("prompt_fragments", "system_fragments", "fragments"):
            for kind in ("prompt", "system"):
                for f in self.q(
                    f'select fragments.content from {kind}_fragments pf join fragments on '
                    f'pf.fragment_id = fragments.id where pf.response_id = ? order by pf."order"',
                    [rid],
                ):
                    fragments[kind].append(str(f["content"] or ""))
        system_bits = [b.strip() for b in fragments["system"] + [str(row["system"] or "")] if b.strip()]
        system = "\n\n".join(system_bits)

        tool_msgs: list[Message] = []
        if self.has("tool_results"):
            has_exc = "exception" in self.cols.get("tool_results", set())
            for tr in self.q("select * from tool_results where response_id = ? order by id", [rid]):
                parts: list[dict[str, Any]] = []
                if self.has("tool_results_attachments"):
                    att_ids = [
                        a["attachment_id"]
                        for a in self.q(
                            "select attachment_id from tool_results_attachments"
                            ' where tool_result_id = ? order by "order"',
                            [tr["id"]],
                        )
                    ]
                    found = self.attachments(att_ids)
                    parts = [_attachment_part(found.get(a)) for a in att_ids]
                meta: dict[str, Any] = {"response_id": rid}
                if has_exc and tr["exception"]:
                    meta["exception"] = tr["exception"]
                tool_msgs.append(
                    Message(
                        role="tool",
                        text=str(tr["output"] or ""),
                        name=tr["name"],
                        tool_call_id=tr["tool_call_id"],
                        parts=tuple(parts),
                        meta=meta,
                    )
                )

        prompt_text = "\n".join(fragments["prompt"] + ([str(row["prompt"])] if row["prompt"] else []))
        prompt_parts: list[dict[str, Any]] = []
        if self.has("prompt_attachments"):
            att_ids = [
                a["attachment_id"]
                for a in self.q(
                    'select attachment_id from prompt_attachments where response_id = ? order by "order"', [rid]
                )
            ]
            found = self.attachments(att_ids)
            prompt_parts = [_attachment_part(found.get(a)) for a in att_ids]
        ts = _iso(row["datetime_utc"]) if "datetime_utc" in keys else None
        user = None
        if prompt_text or prompt_parts:
            user = Message(
                role="user", text=prompt_text, parts=tuple(prompt_parts), timestamp=ts, meta={"response_id": rid}
            )

        calls: list[ToolCall] = []
        if self.has("tool_calls"):
            for tc in self.q("select * from tool_calls where response_id = ? order by id", [rid]):
                calls.append(
                    ToolCall(
                        name=str(tc["name"] or ""),
                        arguments=str(tc["arguments"] or "{}"),
                        id=str(tc["tool_call_id"]) if tc["tool_call_id"] is not None else None,
                    )
                )
        parts: list[dict[str, Any]] = []
        if "reasoning" in keys and row["reasoning"]:
            parts.append({"type": "thinking", "text": row["reasoning"]})
        request: dict[str, Any] = {"model": row["model"]}
        options = _json(row["options_json"]) if "options_json" in keys else None
        if options:
            request["options"] = options
            if "max_tokens" in options:
                request["max_tokens"] = options["max_tokens"]
        if self.has("tool_responses", "tools"):
            tools = self.tools()
            listed = [
                tools[t["tool_id"]]
                for t in self.q("select tool_id from tool_responses where response_id = ? order by tool_id", [rid])
                if t["tool_id"] in tools
            ]
            if listed:
                request["tools"] = listed
        if "schema_id" in keys and row["schema_id"] and self.has("schemas"):
            schema = self.q("select content from schemas where id = ?", [row["schema_id"]])
            if schema:
                request["schema"] = _json(schema[0]["content"])
        meta: dict[str, Any] = {"response_id": rid, "request": request}
        if "duration_ms" in keys and row["duration_ms"] is not None:
            meta["duration_ms"] = row["duration_ms"]
        assistant = Message(
            role="assistant",
            text=str(row["response"] or ""),
            tool_calls=tuple(calls),
            parts=tuple(parts),
            usage=_usage(
                row["input_tokens"] if "input_tokens" in keys else None,
                row["output_tokens"] if "output_tokens" in keys else None,
                row["token_details"] if "token_details" in keys else None,
            ),
            timestamp=ts,
            model=(row["resolved_model"] if "resolved_model" in keys else None) or row["model"],
            meta=meta,
        )
        return system, user, tool_msgs, assistant

    # -- message store

    def chain(self, tip: str) -> list[sqlite3.Row]:
        rows = self.q(
            """
            with recursive chain(hash, parent_hash, role, provider_metadata, depth) as (
              select hash, parent_hash, role, provider_metadata, 0 from messages where hash = ?
              union all
              select m.hash, m.parent_hash, m.role, m.provider_metadata, c.depth + 1
              from messages m join chain c on m.hash = c.parent_hash
              where c.depth < 1000000
            )
            select * from chain order by depth desc
            """,
            [tip],
        )
        return rows

    def parts_for(self, hashes: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Each message's parts as Part.to_dict() shapes, fragment and attachment refs resolved."""
        rows: list[sqlite3.Row] = []
        for i in range(0, len(hashes), _CHUNK):
            chunk = hashes[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows.extend(
                self.q(f"select * from parts where message_hash in ({marks}) order by message_hash, position", chunk)
            )
        payloads = []
        fragment_ids: set[int] = set()
        attachment_ids: set[str] = set()
        for r in rows:
            payload = _json(r["payload"])
            payload = payload if isinstance(payload, dict) else {}
            payload["type"] = r["type"]
            if r["text"] is not None:
                payload["text"] = r["text"]
            for piece in payload.get("text_ref") if isinstance(payload.get("text_ref"), list) else []:
                if isinstance(piece, dict) and isinstance(piece.get("fragment"), int):
                    fragment_ids.add(piece["fragment"])
            att = payload.get("attachment")
            if isinstance(att, dict) and isinstance(att.get("id"), str):
                attachment_ids.add(att["id"])
            for a in payload.get("attachments") if isinstance(payload.get("attachments"), list) else []:
                if isinstance(a, dict) and isinstance(a.get("id"), str):
                    attachment_ids.add(a["id"])
            payloads.append((r["message_hash"], payload))
        fragments: dict[int, str] = {}
        ids = sorted(fragment_ids)
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for f in self.q(f"select id, content from fragments where id in ({marks})", chunk):
                fragments[f["id"]] = f["content"] or ""
        attachments = self.attachments(sorted(attachment_ids))
        out: dict[str, list[dict[str, Any]]] = {}
        for h, payload in payloads:
            pieces = payload.pop("text_ref", None)
            if isinstance(pieces, list):
                payload["text"] = "".join(
                    str(p.get("literal", ""))
                    if "literal" in p
                    else (fragments.get(p["fragment"], "") if isinstance(p.get("fragment"), int) else "")
                    for p in pieces
                    if isinstance(p, dict)
                )
            att = payload.get("attachment")
            payload["attachment"] = attachments.get(att["id"]) if isinstance(att, dict) and isinstance(
                att.get("id"), str
            ) else None
            if isinstance(payload.get("attachments"), list):
                payload["attachments"] = [
                    attachments.get(a["id"]) if isinstance(a, dict) and isinstance(a.get("id"), str) else None
                    for a in payload["attachments"]
                ]
            else:
                payload["attachments"] = []
            out.setdefault(h, []).append(payload)
        return out

    def convert(self, role: str, parts: list[dict[str, Any]], h: str) -> list[Message]:
        """One stored message as Messages (tool results, and server-side tool results inside
        an assistant message, become their own tool messages)."""
        if role not in ("system", "user", "assistant", "tool"):
            self.ctx.skip(f"message role {role!r}")
            return []
        out: list[Message] = []
        texts: list[str] = []
        extra: list[dict[str, Any]] = []
        calls: list[ToolCall] = []

        def flush(force: bool = False) -> None:
            nonlocal texts, extra, calls
            if texts or extra or calls or force:
                out.append(
                    Message(
                        role=role,
                        text="\n".join(texts),
                        tool_calls=tuple(calls),
                        parts=tuple(extra),
                        meta={"hash": h},
                    )
                )
            texts, extra, calls = [], [], []

        for p in parts:
            kind = p.get("type")
            if kind == "text":
                texts.append(str(p.get("text") or ""))
            elif kind == "reasoning":
                if p.get("redacted"):
                    extra.append({"type": "redacted_thinking", "bytes": len(str(p.get("text") or ""))})
                else:
                    extra.append({"type": "thinking", "text": str(p.get("text") or "")})
            elif kind == "tool_call":
                args = p.get("arguments")
                calls.append(
                    ToolCall(
                        name=str(p.get("name") or ""),
                        arguments=args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False),
                        id=p.get("tool_call_id"),
                    )
                )
            elif kind == "tool_result":
                if role == "assistant":
                    flush()  # a server-executed result splits the assistant message
                meta: dict[str, Any] = {"hash": h}
                if p.get("exception"):
                    meta["exception"] = p["exception"]
                if p.get("server_executed"):
                    meta["server_executed"] = True
                out.append(
                    Message(
                        role="tool",
                        text=str(p.get("output") or ""),
                        name=p.get("name"),
                        tool_call_id=p.get("tool_call_id"),
                        parts=tuple(_attachment_part(a) for a in p.get("attachments") or []),
                        meta=meta,
                    )
                )
            elif kind == "attachment":
                extra.append(_attachment_part(p.get("attachment")))
            else:
                self.ctx.skip(f"part type {kind!r}")
        if role == "tool":
            if texts or extra or calls:  # stray non-result parts in a tool message
                out.append(Message(role="tool", text="\n".join(texts), parts=tuple(extra), meta={"hash": h}))
        else:
            flush(force=not out)  # an empty message still marks its turn
        return out

    def thread_session(self, t: sqlite3.Row) -> Session | None:
        tip = t["tip_message_hash"]
        if not tip:
            self.ctx.skip("thread without messages")
            return None
        chain = self.chain(tip)
        if not chain:
            self.ctx.warn(f"thread {t['id']}: tip message {tip} is missing; skipped")
            self.ctx.skip("thread with a missing tip")
            return None
        if chain[0]["parent_hash"] is not None:
            self.ctx.warn(
                f"thread {t['id']}: message {chain[0]['parent_hash']} is missing; the chain starts after it"
            )
        hashes = [r["hash"] for r in chain]
        position = {h: i for i, h in enumerate(hashes)}
        parts = self.parts_for(hashes)

        # converted messages, and for each stored message the index range it became
        messages: list[Message] = []
        spans: list[tuple[int, int]] = []
        for r in chain:
            start = len(messages)
            messages.extend(self.convert(r["role"], parts.get(r["hash"], []), r["hash"]))
            spans.append((start, len(messages)))

        # turns whose output ends on this chain
        turns: list[sqlite3.Row] = []
        for i in range(0, len(hashes), _CHUNK):
            chunk = hashes[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            turns.extend(self.q(f"select * from turns where tip_message_hash in ({marks})", chunk))
        turns.sort(key=lambda x: (x["datetime_utc"] or "", x["id"]))
        taken: set[int] = set()
        models: Counter = Counter()
        n_turns = 0
        for turn in turns:
            end = position[turn["tip_message_hash"]]
            parent = turn["parent_message_hash"]
            begin = position[parent] + 1 if parent in position else (0 if parent is None else None)
            if begin is None or begin > end:
                self.ctx.skip("turn not on the thread's chain")
                continue
            lo, hi = spans[begin][0], spans[end][1]
            target = next((k for k in range(hi - 1, lo - 1, -1) if messages[k].role == "assistant"), None)
            if target is None or target in taken:
                continue
            taken.add(target)
            n_turns += 1
            models[turn["model"]] += 1
            messages[target] = self._with_turn(messages[target], turn, input_messages=spans[begin][0])
        if "responses" in self.tables:
            self._legacy_usage(t["id"], messages)
        model = models.most_common(1)[0][0] if models else None
        started = _iso(t["datetime_utc"])
        if turns:
            started = min((_iso(x["datetime_utc"]) or started or "") for x in turns) or started
        return Session(
            external_id=str(t["id"]),
            format=self.fmt,
            messages=messages,
            title=t["name"] or None,
            model=model,
            started_at=started,
            global_id=True,
            metadata={
                k: v
                for k, v in {"layout": "threads", "turns": n_turns, "forked_from": t["forked_from"]}.items()
                if v is not None
            },
        )

    def _with_turn(self, msg: Message, turn: sqlite3.Row, *, input_messages: int) -> Message:
        keys = turn.keys()
        request: dict[str, Any] = {"model": turn["model"], "input_messages": input_messages}
        options = _json(turn["options_json"])
        if options:
            request["options"] = options
            if "max_tokens" in options:
                request["max_tokens"] = options["max_tokens"]
        if self.has("turn_tools", "tools"):
            tools = self.tools()
            listed = [
                tools[r["tool_id"]]
                for r in self.q(
                    "select tool_id from turn_tools where turn_id = ? order by tool_id", [turn["id"]]
                )
                if r["tool_id"] in tools
            ]
            if listed:
                request["tools"] = listed
        if turn["schema_id"] and self.has("schemas"):
            schema = self.q("select content from schemas where id = ?", [turn["schema_id"]])
            if schema:
                request["schema"] = _json(schema[0]["content"])
        meta = dict(msg.meta)
        meta.update({"turn_id": turn["id"], "request": request})
        if "duration_ms" in keys and turn["duration_ms"] is not None:
            meta["duration_ms"] = turn["duration_ms"]
        return Message(
            role=msg.role,
            text=msg.text,
            tool_calls=msg.tool_calls,
            parts=msg.parts,
            usage=_usage(turn["input_tokens"], turn["output_tokens"], turn["token_details"]),
            timestamp=_iso(turn["datetime_utc"]),
            model=turn["resolved_model"] or turn["model"],
            meta=meta,
        )

    def _legacy_usage(self, thread_id: str, messages: list[Message]) -> None:
        """Lend the usage of pre-upgrade responses to the thread replies they match."""
        rows = self.q("select * from responses where conversation_id = ? order by id", [thread_id])
        if not rows:
            return
        pointer = 0
        for row in rows:
            _, _, _, reply = self.legacy_turn(row)
            for k in range(pointer, len(messages)):
                m = messages[k]
                if m.role == "assistant" and m.text == reply.text:
                    pointer = k + 1
                    if m.usage is None:
                        meta = dict(m.meta)
                        meta.update(reply.meta)
                        messages[k] = Message(
                            role=m.role,
                            text=m.text,
                            tool_calls=m.tool_calls,
                            parts=m.parts,
                            usage=reply.usage,
                            timestamp=reply.timestamp,
                            model=reply.model,
                            meta=meta,
                        )
                    break
