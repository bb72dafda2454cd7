"""The legacy Copilot CLI session JSON (``~/.copilot/history-session-state/<id>.json``).

``chatMessages`` is the OpenAI-style message list the CLI sent to the model: ground truth.
It stores one reply as several assistant messages in a row (its text, then one message per
tool call); a run of assistant messages between two inputs is one model call, so it becomes one
assistant message (the stored indices stay in meta). There is no system prompt, no model name
and no token usage in this layout. ``timeline`` is what the terminal showed: it gives the
timestamps (a tool result by its ``callId``, a reply by its text, the user's first message),
and what it holds beyond ``chatMessages`` is counted in the metadata and warned about.

A file whose ``chatMessages`` is empty while its ``timeline`` holds the conversation (the CLI
saved the terminal's record only) is read from the timeline (``timeline_messages``), and the
session says it is reconstructed (``metadata["reconstructed"]``). The timeline's entries, as
the corpus file of 2025-10-11 (Copilot CLI 0.0.3xx) writes them: ``user`` (the typed request,
without the ``<current_datetime>`` / ``<reminder>`` text the CLI added for the model),
``copilot`` (a reply's text), ``tool_call_completed`` (``callId``, ``name``, ``arguments``,
``result`` {``type``, ``log``}: the terminal's log of the call, for ``str_replace_editor``
``view`` a diff-style rendering of the file, not the text the model read), ``info`` (the CLI's
notices: not sent to the model). A reply's entries carry one timestamp (within 1 ms in the
corpus file; its 45 replies are 5 s or more apart), so a reply is a ``copilot`` entry and the
tool calls stamped with it, or tool calls stamped together (a reply without text):
``REPLY_GAP_MS``. Entries are read in timestamp order (the file lists a late reply last).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from ...records import FieldTypeError, Message, ToolCall
from .._text import clip, title_line
from ..base import ImportContext, as_dict, as_list, as_str, json_text, str_or_none, text_of

# Entries of one reply are stamped within this of each other; replies further apart (each one a
# model call, after its tools ran) are new replies.
REPLY_GAP_MS = 500
RECONSTRUCTED = ("from the UI timeline (what the terminal showed; what the model saw is not recorded exactly): "
                 "chatMessages, what the model was sent, is empty; "
                 "the user's text lacks the reminders the CLI added, a tool's result is the terminal's log of it "
                 "(a file view is a diff-style rendering, not the text the model read)")

ROLES = {"user": "user", "assistant": "assistant", "tool": "tool", "system": "system", "developer": "developer"}


def legacy_messages(doc: dict[str, Any], ctx: ImportContext) -> tuple[list[Message], dict[str, Any]]:
    chat = doc.get("chatMessages")
    if not isinstance(chat, list):
        raise TypeError("chatMessages is not a list")
    timeline = [e for e in as_list(doc.get("timeline")) if isinstance(e, dict)]
    if not chat and any(e.get("type") in CONVERSATION for e in timeline):
        return timeline_messages(timeline, ctx)
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
        for i, m in run:
            t = text_of(m.get("content"))
            if t:
                texts.append(t)
            for k, c in enumerate(as_list(m.get("tool_calls"))):
                with ctx.record("tool call", index=f"{k} of chat message {i}"):  # that call skipped, not the reply
                    c = as_dict(c)
                    fn = as_dict(c.get("function"))
                    call_id = str_or_none(c.get("id"))
                    name = fn.get("name")
                    if not isinstance(name, str):
                        raise FieldTypeError("ToolCall", "name", name)
                    calls.append(ToolCall(name=name, arguments=json_text(fn.get("arguments")), id=call_id))
                    if call_id:
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
    extra = [e for e in timeline if (e.get("type") == "tool_call_completed" and e.get("callId") in call_ts
                                     and e.get("callId") not in seen_calls)
             or (e.get("type") == "copilot" and isinstance(e.get("text"), str)
                 and e["text"].strip() not in seen_replies)]
    extra_calls = sum(1 for e in extra if e.get("type") == "tool_call_completed")
    extra_texts = len(extra) - extra_calls
    if extra_calls or extra_texts:
        ctx.warn(f"the timeline shows {extra_calls} tool call(s) and {extra_texts} reply text(s) that are not in "
                 "chatMessages (what the model was sent); read chatMessages only")
    return out, _metadata(out, kinds, len(chat), timeline_not_in_chat={"tool_calls": extra_calls,
                                                                       "reply_texts": extra_texts,
                                                                       "entries": [_entry(e) for e in extra]})


def _entry(e: dict[str, Any]) -> dict[str, Any]:
    """A timeline entry chatMessages lacks, for ``ctxf check``: a tool call's name, command and path,
    a reply's first words, and when."""
    if e.get("type") != "tool_call_completed":
        return {"type": "reply", "timestamp": str_or_none(e.get("timestamp")), "text": clip(str(e.get("text")), 120)}
    args = as_dict(e.get("arguments"))
    return {k: v for k, v in {"type": "tool_call", "timestamp": str_or_none(e.get("timestamp")),
                              "name": str_or_none(e.get("name")), "command": str_or_none(args.get("command")),
                              "path": str_or_none(args.get("path"))}.items() if v is not None}


def _metadata(out: list[Message], kinds: Counter[str], chat_messages: int, **more: Any) -> dict[str, Any]:
    """A legacy session's metadata: its title (the first request's first line), the counts, ``more``."""
    title = next((title_line(m.text) for m in out if m.role == "user" and m.text.strip()), None)
    return {"agent": "copilot-cli", "layout": "legacy", "title": title, "chat_messages": chat_messages,
            "timeline": dict(kinds), **more, "recorded": "no system prompt, model or token usage in this layout"}


CONVERSATION = ("user", "copilot", "tool_call_completed")  # the timeline entries that are the conversation


def _ms(ts: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


def timeline_messages(timeline: list[dict[str, Any]], ctx: ImportContext) -> tuple[list[Message], dict[str, Any]]:
    """The conversation as the timeline shows it (``chatMessages`` is empty): each user request,
    each reply (its text and the tool calls stamped with it) and each call's result, in
    timestamp order (see the module docstring)."""
    stamps = [_ms(e.get("timestamp")) for e in timeline]
    order = list(range(len(timeline)))
    known = [t for t in stamps if t is not None]
    if len(known) == len(stamps):
        order.sort(key=lambda i: known[i])  # stable: entries of one moment keep their order
    late = 0  # entries listed after a later-stamped one: the sort moves them back
    newest = None
    for t in stamps:
        if t is not None and newest is not None and t < newest:
            late += 1
        newest = t if t is not None and (newest is None or t > newest) else newest
    out: list[Message] = []
    reply: dict[str, Any] | None = None  # the reply being read: its text, calls and results

    def flush() -> None:
        nonlocal reply
        if reply is None:
            return
        out.append(Message(role="assistant", text=reply["text"], tool_calls=tuple(reply["calls"]),
                           timestamp=reply["ts"], meta={"timeline": reply["entries"]}))
        out.extend(reply["results"])
        reply = None

    kinds: Counter[str] = Counter()
    for i in order:
        e = timeline[i]
        kind = str(e.get("type"))
        kinds[kind] += 1
        with ctx.record("timeline entry", index=i):
            ts, at = str_or_none(e.get("timestamp")), stamps[i]
            if kind == "user":
                flush()
                out.append(Message(role="user", text=text_of(e.get("text")), timestamp=ts, meta={"timeline": [i]}))
            elif kind == "copilot":
                flush()
                reply = {"text": text_of(e.get("text")), "calls": [], "results": [], "ts": ts, "at": at, "entries": [i]}
            elif kind == "tool_call_completed":
                if reply is None or at is None or reply["at"] is None or at - reply["at"] > REPLY_GAP_MS:
                    flush()  # a reply with no text: its calls are stamped together
                    reply = {"text": "", "calls": [], "results": [], "ts": ts, "at": at, "entries": []}
                call_id = str_or_none(e.get("callId"))
                name = as_str(e.get("name")) or as_str(e.get("toolTitle")) or "tool"
                result = as_dict(e.get("result"))
                reply["calls"].append(ToolCall(name=name, arguments=json_text(e.get("arguments")), id=call_id))
                reply["results"].append(Message(
                    role="tool", text=text_of(result.get("log") if "log" in result else result.get("error")),
                    name=name, tool_call_id=call_id, timestamp=ts,
                    meta={"timeline": [i], "result_type": as_str(result.get("type")), "shown_as": "terminal log"}))
                reply["entries"].append(i)
                reply["at"] = at if at is not None else reply["at"]
    flush()
    other = {k: n for k, n in kinds.items() if k not in CONVERSATION and k != "info"}
    if other:
        left = ", ".join(f"{k} ({n})" for k, n in sorted(other.items()))
        ctx.warn(f"timeline entries of unknown kinds left out: {left}")
    ctx.warn("chatMessages is empty: the conversation is reconstructed from the UI timeline (what the terminal "
             "showed), not what the model was sent")
    how = (f"sorted by timestamp: {late} of {len(timeline)} entries were listed after a later one" if late
             else "as written")
    return out, _metadata(out, kinds, 0, reconstructed=RECONSTRUCTED, timeline_order=how)


def is_legacy(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("chatMessages"), list) and (
        "timeline" in doc or as_str(doc.get("sessionId")) is not None)
