"""The message store (llm 0.3x): ``threads``, ``turns`` and content-addressed ``messages`` /
``parts``. One session per thread: the chain from the thread's tip back to its root. Each turn
(one model call) delimits its output messages (after ``parent_message_hash`` up to
``tip_message_hash``); its usage goes on the last assistant message of that output. A thread
that continues a legacy conversation has the same id; its chain already holds the older
history, so the legacy rows only lend their usage to the matching replies.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Any

from ...records import Message, Session, ToolCall
from ..base import as_list
from .database import CHUNK, LogsDB, attachment_part, iso, json_value, llm_usage
from .responses import legacy_turn


def chain_rows(db: LogsDB, tip: str, label: str = "") -> list[dict[str, Any]]:
    """The messages from the root of ``tip``'s chain to ``tip``, as ``{hash, parent_hash, role}``.

    The chain is followed in Python, one parent at a time, each message at most once: a
    ``parent_hash`` loop (a corrupt or hand-edited database) ends the chain where it closes,
    with a warning, as the ChatGPT and Claude.ai importers do. (SQLite's recursive query
    would follow the loop until its depth limit: millions of rows.)
    """
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    h: Any = tip
    while isinstance(h, str) and h not in seen:
        found = db.q("select hash, parent_hash, role from messages where hash = ? limit 1", [h])
        if not found:
            break
        seen.add(h)
        r = found[0]
        rows.append({"hash": r["hash"], "parent_hash": r["parent_hash"], "role": r["role"]})
        h = r["parent_hash"]
    if isinstance(h, str) and h in seen:
        db.ctx.warn(f"{label}parent_hash links form a cycle at message {h}; the chain starts after it")
        rows[-1]["parent_hash"] = None  # the cycle is cut there: the oldest message read is the root
    rows.reverse()
    return rows


def parts_for(db: LogsDB, hashes: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each message's parts as Part.to_dict() shapes, fragment and attachment refs resolved."""
    rows: list[sqlite3.Row] = []
    for i in range(0, len(hashes), CHUNK):
        chunk = hashes[i : i + CHUNK]
        marks = ",".join("?" * len(chunk))
        rows.extend(
            db.q(f"select * from parts where message_hash in ({marks}) order by message_hash, position", chunk)
        )
    payloads = []
    fragment_ids: set[int] = set()
    attachment_ids: set[str] = set()
    for r in rows:
        payload = json_value(r["payload"])
        payload = payload if isinstance(payload, dict) else {}
        payload["type"] = r["type"]
        if r["text"] is not None:
            payload["text"] = r["text"]
        for piece in as_list(payload.get("text_ref")):
            if isinstance(piece, dict) and isinstance(piece.get("fragment"), int):
                fragment_ids.add(piece["fragment"])
        att = payload.get("attachment")
        if isinstance(att, dict) and isinstance(att.get("id"), str):
            attachment_ids.add(att["id"])
        for a in as_list(payload.get("attachments")):
            if isinstance(a, dict) and isinstance(a.get("id"), str):
                attachment_ids.add(a["id"])
        payloads.append((r["message_hash"], payload))
    fragments: dict[int, str] = {}
    ids = sorted(fragment_ids)
    for i in range(0, len(ids), CHUNK):
        id_chunk = ids[i : i + CHUNK]
        marks = ",".join("?" * len(id_chunk))
        for f in db.q(f"select id, content from fragments where id in ({marks})", id_chunk):
            fragments[f["id"]] = f["content"] or ""
    attachments = db.attachments(sorted(attachment_ids))
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


def stored_message(db: LogsDB, role: str, parts: list[dict[str, Any]], h: str) -> list[Message]:
    """One stored message as Messages (tool results, and server-side tool results inside
    an assistant message, become their own tool messages)."""
    if role not in ("system", "user", "assistant", "tool"):
        db.ctx.skip(f"message role {role!r}", unknown=True)
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
                    parts=tuple(attachment_part(a) for a in p.get("attachments") or []),
                    meta=meta,
                )
            )
        elif kind == "attachment":
            extra.append(attachment_part(p.get("attachment")))
        else:
            db.ctx.skip(f"part type {kind!r}", unknown=True)
    if role == "tool":
        if texts or extra or calls:  # stray non-result parts in a tool message
            out.append(Message(role="tool", text="\n".join(texts), parts=tuple(extra), meta={"hash": h}))
    else:
        flush(force=not out)  # an empty message still marks its turn
    return out


def thread_session(db: LogsDB, t: sqlite3.Row) -> Session | None:
    tip = t["tip_message_hash"]
    if not tip:
        db.ctx.skip("thread without messages")
        return None
    chain = chain_rows(db, tip, f"thread {t['id']}: ")
    if not chain:
        db.ctx.warn(f"thread {t['id']}: tip message {tip} is missing; skipped")
        db.ctx.skip("thread with a missing tip")
        return None
    if chain[0]["parent_hash"] is not None:
        db.ctx.warn(
            f"thread {t['id']}: message {chain[0]['parent_hash']} is missing; the chain starts after it"
        )
    hashes = [r["hash"] for r in chain]
    position = {h: i for i, h in enumerate(hashes)}
    parts = parts_for(db, hashes)

    # converted messages, and for each stored message the index range it became
    messages: list[Message] = []
    spans: list[tuple[int, int]] = []
    for r in chain:
        start = len(messages)
        messages.extend(stored_message(db, r["role"], parts.get(r["hash"], []), r["hash"]))
        spans.append((start, len(messages)))

    # turns whose output ends on this chain
    turns: list[sqlite3.Row] = []
    for i in range(0, len(hashes), CHUNK):
        chunk = hashes[i : i + CHUNK]
        marks = ",".join("?" * len(chunk))
        turns.extend(db.q(f"select * from turns where tip_message_hash in ({marks})", chunk))
    turns.sort(key=lambda x: (x["datetime_utc"] or "", x["id"]))
    taken: set[int] = set()
    models: Counter = Counter()
    n_turns = 0
    for turn in turns:
        end = position[turn["tip_message_hash"]]
        parent = turn["parent_message_hash"]
        begin = position[parent] + 1 if parent in position else (0 if parent is None else None)
        if begin is None or begin > end:
            db.ctx.skip("turn not on the thread's chain")
            continue
        lo, hi = spans[begin][0], spans[end][1]
        target = next((k for k in range(hi - 1, lo - 1, -1) if messages[k].role == "assistant"), None)
        if target is None or target in taken:
            continue
        taken.add(target)
        n_turns += 1
        models[turn["model"]] += 1
        messages[target] = _with_turn(db, messages[target], turn, input_messages=spans[begin][0])
    if "responses" in db.tables:
        _lend_legacy_usage(db, t["id"], messages)
    model = models.most_common(1)[0][0] if models else None
    started = iso(t["datetime_utc"])
    if turns:
        started = min((iso(x["datetime_utc"]) or started or "") for x in turns) or started
    return Session(
        external_id=str(t["id"]),
        format=db.fmt,
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


def _with_turn(db: LogsDB, msg: Message, turn: sqlite3.Row, *, input_messages: int) -> Message:
    keys = turn.keys()
    request = db.call_request(
        {"model": turn["model"], "input_messages": input_messages},
        turn["options_json"],
        tools=("turn_tools", "turn_id", turn["id"]),
        schema_id=turn["schema_id"],
    )
    meta = dict(msg.meta)
    meta.update({"turn_id": turn["id"], "request": request})
    if "duration_ms" in keys and turn["duration_ms"] is not None:
        meta["duration_ms"] = turn["duration_ms"]
    return Message(
        role=msg.role,
        text=msg.text,
        tool_calls=msg.tool_calls,
        parts=msg.parts,
        usage=llm_usage(turn["input_tokens"], turn["output_tokens"], turn["token_details"]),
        timestamp=iso(turn["datetime_utc"]),
        model=turn["resolved_model"] or turn["model"],
        meta=meta,
    )


def _lend_legacy_usage(db: LogsDB, thread_id: str, messages: list[Message]) -> None:
    """Lend the usage of pre-upgrade responses to the thread replies they match."""
    rows = db.q("select * from responses where conversation_id = ? order by id", [thread_id])
    if not rows:
        return
    pointer = 0
    for row in rows:
        _, _, _, reply = legacy_turn(db, row)
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
