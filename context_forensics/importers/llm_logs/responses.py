"""The legacy tables (llm 0.13 - 0.2x): ``conversations`` and ``responses``, one row per model
call. One session per conversation; per response, in order: a system message when the system
prompt (system fragments + system) first appears or changes, the tool results the prompt
carried, the user prompt (prompt fragments + prompt, as llm sends it), then the assistant reply
with its tool calls and usage.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Any, Iterator

from ...records import Message, Session, ToolCall
from .database import LogsDB, attachment_part, iso, llm_usage


def legacy_sessions(db: LogsDB, thread_ids: set[str]) -> Iterator[Session]:
    order = "datetime_utc, id" if "datetime_utc" in db.cols["responses"] else "id"
    convs = {r["id"]: r for r in db.q("select * from conversations")}
    seen = set()
    ids = db.q(
        "select conversation_id, min(datetime_utc) as first from responses "
        "group by conversation_id order by first"
        if "datetime_utc" in db.cols["responses"]
        else "select distinct conversation_id from responses"
    )
    for r in ids:
        cid = r["conversation_id"]
        seen.add(cid)
        if cid is None:  # responses logged outside any conversation: one session each
            for row in db.q(f"select * from responses where conversation_id is null order by {order}"):
                one = None
                with db.ctx.record("response", index=row["id"]):
                    one = legacy_session(db, row["id"], None, [row])
                if one is not None:
                    yield one
            continue
        if cid in thread_ids:
            continue  # the thread session already carries this history
        rows = db.q(f"select * from responses where conversation_id = ? order by {order}", [cid])
        session = None
        with db.ctx.record("conversation", index=cid):
            session = legacy_session(db, cid, convs.get(cid), rows)
        if session is not None:
            yield session
    empty = [c for c in convs if c not in seen and c not in thread_ids]
    if empty:
        db.ctx.skip("conversation without responses", len(empty))


def legacy_session(db: LogsDB, cid: str, conv: sqlite3.Row | None, rows: list[sqlite3.Row]) -> Session:
    messages: list[Message] = []
    last_system: str | None = None
    models: Counter = Counter()
    for row in rows:
        system, user, tool_msgs, assistant = legacy_turn(db, row)
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
        format=db.fmt,
        messages=messages,
        title=(conv["name"] if conv is not None else None) or None,
        model=model,
        started_at=iso(first["datetime_utc"]) if first is not None and "datetime_utc" in first.keys()
        else None,
        global_id=True,
        metadata={"layout": "responses", "responses": len(rows)},
    )


def legacy_turn(db: LogsDB, row: sqlite3.Row) -> tuple[str, Message | None, list[Message], Message]:
    rid = row["id"]
    keys = row.keys()
    fragments: dict[str, list[str]] = {"prompt": [], "system": []}
    if db.has("prompt_fragments", "system_fragments", "fragments"):
        for kind in ("prompt", "system"):
            for f in db.q(
                f'select fragments.content from {kind}_fragments pf join fragments on '
                f'pf.fragment_id = fragments.id where pf.response_id = ? order by pf."order"',
                [rid],
            ):
                fragments[kind].append(str(f["content"] or ""))
    system_bits = [b.strip() for b in fragments["system"] + [str(row["system"] or "")] if b.strip()]
    system = "\n\n".join(system_bits)

    tool_msgs: list[Message] = []
    if db.has("tool_results"):
        has_exc = "exception" in db.cols.get("tool_results", set())
        for tr in db.q("select * from tool_results where response_id = ? order by id", [rid]):
            parts: list[dict[str, Any]] = []
            if db.has("tool_results_attachments"):
                att_ids = [
                    a["attachment_id"]
                    for a in db.q(
                        "select attachment_id from tool_results_attachments"
                        ' where tool_result_id = ? order by "order"',
                        [tr["id"]],
                    )
                ]
                found = db.attachments(att_ids)
                parts = [attachment_part(found.get(a)) for a in att_ids]
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
    if db.has("prompt_attachments"):
        att_ids = [
            a["attachment_id"]
            for a in db.q(
                'select attachment_id from prompt_attachments where response_id = ? order by "order"', [rid]
            )
        ]
        found = db.attachments(att_ids)
        prompt_parts = [attachment_part(found.get(a)) for a in att_ids]
    ts = iso(row["datetime_utc"]) if "datetime_utc" in keys else None
    user = None
    if prompt_text or prompt_parts:
        user = Message(
            role="user", text=prompt_text, parts=tuple(prompt_parts), timestamp=ts, meta={"response_id": rid}
        )

    calls: list[ToolCall] = []
    if db.has("tool_calls"):
        for tc in db.q("select * from tool_calls where response_id = ? order by id", [rid]):
            calls.append(
                ToolCall(
                    name=str(tc["name"] or ""),
                    arguments=str(tc["arguments"] or "{}"),
                    id=str(tc["tool_call_id"]) if tc["tool_call_id"] is not None else None,
                )
            )
    parts = []
    if "reasoning" in keys and row["reasoning"]:
        parts.append({"type": "thinking", "text": row["reasoning"]})
    request = db.call_request(
        {"model": row["model"]},
        row["options_json"] if "options_json" in keys else None,
        tools=("tool_responses", "response_id", rid),
        schema_id=row["schema_id"] if "schema_id" in keys else None,
    )
    meta = {"response_id": rid, "request": request}
    if "duration_ms" in keys and row["duration_ms"] is not None:
        meta["duration_ms"] = row["duration_ms"]
    assistant = Message(
        role="assistant",
        text=str(row["response"] or ""),
        tool_calls=tuple(calls),
        parts=tuple(parts),
        usage=llm_usage(
            row["input_tokens"] if "input_tokens" in keys else None,
            row["output_tokens"] if "output_tokens" in keys else None,
            row["token_details"] if "token_details" in keys else None,
        ),
        timestamp=ts,
        model=(row["resolved_model"] if "resolved_model" in keys else None) or row["model"],
        meta=meta,
    )
    return system, user, tool_msgs, assistant
