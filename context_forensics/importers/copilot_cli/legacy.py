"""The legacy Copilot CLI session JSON (``~/.copilot/history-session-state/<id>.json``).

``chatMessages`` is the OpenAI-style message list the CLI sent to the model: ground truth.
It stores one reply as several assistant messages in a row (its text, then one message per
tool call); a run of assistant messages between two inputs is one model call, so it becomes one
assistant message (the stored indices stay in meta). There is no system prompt, no model name
and no token usage in this layout. ``timeline`` is what the terminal showed: it gives the
timestamps (a tool result by its ``callId``, a reply by its text, the user's first message),
and what it holds beyond ``chatMessages`` is counted in the metadata and warned about.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ...records import Message, ToolCall
from ..base import ImportContext, as_dict, as_list, as_str, json_text, str_or_none, text_of

ROLES = {"user": "user", "assistant": "assistant", "tool": "tool", "system": "system", "developer": "developer"}


def legacy_messages(doc: dict[str, Any], ctx: ImportContext) -> tuple[list[Message], dict[str, Any]]:
    chat = doc.get("chatMessages")
    if not isinstance(chat, list):
        raise TypeError("chatMessages is not a list")
    timeline = [e for e in as_list(doc.get("timeline")) if isinstance(e, dict)]
    call_ts = {e.get("callId"): str_or_none(e.get("timestamp")) for e in timeline
               if e.get("type") == "tool_call_completed" and isinstance(e.get("callId"), str)}
    reply_ts: dict[str, str | None] = {}
    user_ts: dict[str, str | None] = {}
    for e in timeline:
        text = e.get("text")
        if isinstance(text, str):
            target = reply_ts if e.get("type") == "copilot" else user_ts if e.get("type") == "user" else None
            if target is not None:
                target.setdefault(text.strip(), str_or_none(e.get("timestamp")))

    out: list[Message] = []
    names: dict[str, str] = {}
    run: list[tuple[int, dict[str, Any]]] = []
    seen_calls: set[str] = set()
    seen_replies: set[str] = set()

    def flush() -> None:
        if not run:
            return
        texts, calls = [], []
        for _, m in run:
            t = text_of(m.get("content"))
            if t:
                texts.append(t)
            for c in as_list(m.get("tool_calls")):
                c = as_dict(c)
                fn = as_dict(c.get("function"))
                call_id = str_or_none(c.get("id"))
                name = fn.get("name")
                calls.append(ToolCall(name=name, arguments=json_text(fn.get("arguments")), id=call_id))
                if call_id and isinstance(name, str):
                    names[call_id] = name
        text = "\n".join(texts)
        ts = next((reply_ts[t.strip()] for t in texts if t.strip() in reply_ts), None)
        seen_replies.update(t.strip() for t in texts)
        meta: dict[str, Any] = {"chat_messages": [i for i, _ in run]}
        out.append(Message(role="assistant", text=text, tool_calls=tuple(calls), timestamp=ts, meta=meta))
        run.clear()

    for i, m in enumerate(chat):
        with ctx.record("chat message", index=i):
            if not isinstance(m, dict):
                raise TypeError(f"a chat message is {type(m).__name__}, not an object")
            role = ROLES.get(m.get("role"))  # type: ignore[arg-type]
            if role is None:
                raise ValueError(f"unknown role {m.get('role')!r}")
            if role == "assistant":
                run.append((i, m))
                continue
            flush()
            text = text_of(m.get("content"))
            if role == "tool":
                call_id = str_or_none(m.get("tool_call_id"))
                seen_calls.add(call_id or "")
                out.append(Message(role="tool", text=text, tool_call_id=call_id, name=names.get(call_id or ""),
                                   timestamp=call_ts.get(call_id), meta={"chat_message": i}))
            else:
                ts = next((v for k, v in user_ts.items() if k and text.startswith(k)), None) if role == "user" else None
                out.append(Message(role=role, text=text, timestamp=ts, meta={"chat_message": i}))
    flush()

    kinds = Counter(str(e.get("type")) for e in timeline)
    extra_calls = sum(1 for c in call_ts if c not in seen_calls)
    extra_texts = sum(1 for e in timeline if e.get("type") == "copilot" and isinstance(e.get("text"), str)
                      and e["text"].strip() not in seen_replies)
    if extra_calls or extra_texts:
        ctx.warn(f"the timeline shows {extra_calls} tool call(s) and {extra_texts} reply text(s) that are not in "
                 "chatMessages (what the model was sent); read chatMessages only")
    title = next((m.text.strip().splitlines()[0][:100] for m in out if m.role == "user" and m.text.strip()), None)
    metadata = {
        "agent": "copilot-cli",
        "layout": "legacy",
        "title": title,
        "chat_messages": len(chat),
        "timeline": dict(kinds),
        "timeline_not_in_chat": {"tool_calls": extra_calls, "reply_texts": extra_texts},
        "recorded": "no system prompt, model or token usage in this layout",
    }
    return out, metadata


def is_legacy(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("chatMessages"), list) and (
        "timeline" in doc or as_str(doc.get("sessionId")) is not None)
