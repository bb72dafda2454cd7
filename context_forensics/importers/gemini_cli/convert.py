"""Gemini CLI message records (``MessageRecord``) as Messages.

A ``user`` record is what the user turn sent (``content``; ``displayContent``, what the terminal
showed, e.g. ``/init``, is kept in meta). A ``gemini`` record is one model call's reply: its text
parts, its ``toolCalls`` as tool calls, each call's ``result`` (the ``functionResponse`` parts the
next request carried) as a tool message after it, and its ``tokens`` as the call's recorded usage.
``info`` / ``error`` / ``warning`` records are the terminal's notices ("Request cancelled."): the
model never read them, so they are counted, not kept as messages. ``thoughts`` are summaries of
the model's thinking; Gemini CLI strips thoughts from the history it sends back, so they are kept
in meta, not as parts a later window would count.

Tokens (chatRecordingService.recordMessageTokens): ``input`` = promptTokenCount, which already
includes ``cached`` (cachedContentTokenCount); ``output`` = candidatesTokenCount, which excludes
``thoughts`` (thoughtsTokenCount); ``tool`` = toolUsePromptTokenCount (built-in tools' results the
model read); ``total`` = input + output + thoughts + tool. As for every Gemini usage in ctxf
(cassette/gemini.usage_from_gemini): prompt_tokens = input + tool, completion_tokens = output +
thoughts, cache_read_tokens = cached, reasoning_tokens = thoughts. A record whose tokens are all
zero (or null) is no recorded call: it gets no usage.
"""

from __future__ import annotations

import json
from typing import Any

from ...records import KIND_COMPACTION_SUMMARY, Message, ToolCall, Usage
from ..base import ImportContext, as_dict, as_int, as_list, as_str, str_or_none, text_of
from ..cassette.gemini import gemini_content, usage_from_gemini

NOTICE_TYPES = ("info", "error", "warning")
TOKEN_KEYS = ("input", "output", "cached", "thoughts", "tool", "total")


def parts_of(content: Any) -> list[Any]:
    """A ``PartListUnion`` (a string, a Part, or a list of both) as a list of parts."""
    if content is None:
        return []
    if isinstance(content, (str, dict)):
        return [content]
    if isinstance(content, list):
        return content
    raise TypeError(f"content must be text, a part or a list of parts, not {type(content).__name__}")


def usage_of(tokens: Any) -> Usage | None:
    """The recorded usage of a ``tokens`` summary; None when it records no call (all zero)."""
    t = as_dict(tokens)
    figures = {k: as_int(t.get(k)) for k in TOKEN_KEYS}
    if not any(figures.values()):
        return None
    return usage_from_gemini({
        "promptTokenCount": figures["input"],
        "candidatesTokenCount": figures["output"],
        "cachedContentTokenCount": figures["cached"],
        "thoughtsTokenCount": figures["thoughts"],
        "toolUsePromptTokenCount": figures["tool"],
    })


class Converter:
    """Turns one session's message records into Messages, in order.

    ``answered`` holds the tool-call ids whose results were emitted already, so a user record
    that repeats a ``functionResponse`` (newer CLIs mirror the whole model history) does not
    add the same result twice.
    """

    def __init__(self, ctx: ImportContext) -> None:
        self.ctx = ctx
        self.answered: set[str] = set()
        self.models: list[str] = []
        self.notices: dict[str, int] = {}
        self.calls = 0  # gemini records with recorded usage

    def record(self, rec: dict[str, Any], *, summary: bool = False) -> list[Message]:
        t = rec.get("type")
        if t in NOTICE_TYPES:
            self.notices[t] = self.notices.get(t, 0) + 1
            self.ctx.skip(f"{t} message (shown in the terminal, never sent to the model)")
            return []
        ts = str_or_none(rec.get("timestamp"))
        meta: dict[str, Any] = {"id": rec.get("id")}
        if t == "gemini":
            return self._gemini(rec, ts, meta, summary)
        if t != "user":
            self.ctx.skip(f"message of type {t!r}" if isinstance(t, str) else "message without a type", unknown=True)
            return []
        parts = parts_of(rec.get("content"))
        kept = []
        for p in parts:
            fr = p.get("functionResponse") if isinstance(p, dict) else None
            if isinstance(fr, dict) and isinstance(fr.get("id"), str) and fr["id"] in self.answered:
                continue  # the result is the tool message of its call already
            kept.append(p)
        if parts and not kept:
            return []
        out = gemini_content({"role": "user", "parts": kept}, self.ctx)
        display = rec.get("displayContent")
        if display is not None:
            shown = text_of(parts_of(display))
            if shown != text_of(kept):
                meta["display"] = shown
        msgs = []
        for m in out:
            if m.role == "tool" and m.tool_call_id:
                self.answered.add(m.tool_call_id)
            kind = KIND_COMPACTION_SUMMARY if summary and m.role == "user" else m.kind
            msgs.append(Message(role=m.role, text=m.text, kind=kind, name=m.name, tool_call_id=m.tool_call_id,
                                parts=m.parts, timestamp=ts, meta=dict(meta)))
        return msgs

    def _gemini(self, rec: dict[str, Any], ts: str | None, meta: dict[str, Any], summary: bool) -> list[Message]:
        (reply,) = gemini_content({"role": "model", "parts": parts_of(rec.get("content"))}, self.ctx)
        calls = list(reply.tool_calls)
        results: list[Message] = []
        for i, tc in enumerate(as_list(rec.get("toolCalls"))):
            if not isinstance(tc, dict):
                raise TypeError(f"toolCalls[{i}] is not an object")
            call_id = as_str(tc.get("id"))
            name = str(tc.get("name") or "")
            args = tc.get("args")
            calls.append(ToolCall(name=name, arguments=args if isinstance(args, str) else json.dumps(
                args if args is not None else {}, ensure_ascii=False), id=call_id))
            results += self._result(tc, call_id, name, ts)
        model = as_str(rec.get("model"))
        if model and model not in self.models:
            self.models.append(model)
        usage = usage_of(rec.get("tokens"))
        if usage is not None:
            self.calls += 1
        if isinstance(rec.get("tokens"), dict):
            meta["tokens"] = rec["tokens"]
        thoughts = [{"subject": th.get("subject"), "description": th.get("description")}
                    for th in as_list(rec.get("thoughts")) if isinstance(th, dict)]
        if thoughts:
            meta["thoughts"] = thoughts
        msg = Message(role="assistant", text=reply.text, kind=KIND_COMPACTION_SUMMARY if summary else reply.kind,
                      tool_calls=tuple(calls), parts=reply.parts, usage=usage, timestamp=ts, model=model, meta=meta)
        return [msg, *results]

    def _result(self, tc: dict[str, Any], call_id: str | None, name: str, ts: str | None) -> list[Message]:
        """A tool call's recorded result as tool messages (none while it had no result)."""
        result = tc.get("result")
        status = str_or_none(tc.get("status"))
        if result is None:
            self.ctx.skip("tool call without a recorded result")
            return []
        tmeta: dict[str, Any] = {"status": status} if status else {}
        if isinstance(result, str):
            out = [Message(role="tool", text=result, name=name, tool_call_id=call_id)]
        else:
            out = gemini_content({"role": "user", "parts": parts_of(result)}, self.ctx)
        msgs = []
        for m in out:
            if m.role == "tool":
                cid = m.tool_call_id or call_id
                if cid:
                    self.answered.add(cid)
                msgs.append(Message(role="tool", text=m.text, name=m.name or name, tool_call_id=cid, parts=m.parts,
                                    timestamp=str_or_none(tc.get("timestamp")) or ts, meta=dict(tmeta)))
            else:  # parts beside the functionResponse (an image a tool read) travel in the same turn
                msgs.append(Message(role="tool", text=m.text, name=name, tool_call_id=call_id, parts=m.parts,
                                    timestamp=ts, meta={**tmeta, "beside_function_response": True}))
        return msgs
