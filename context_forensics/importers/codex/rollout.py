"""Rollout records as Messages, in order, as one pass reads them.

A model call's output is the run of assistant-side items (reasoning, assistant message, tool
calls) between two inputs; it becomes one assistant Message, its reasoning items their own
``kind="reasoning"`` messages right after it (the call's output: the next call reads them, the
call itself did not, so its window must not hold them; the rollout writes them first). ``token_count`` events are
written either before the call's items (0.5x: usage at stream end, items after tool execution) or after them (newer:
items as they stream); the first event decides which, and repeats of the same running total
are not new calls. Compactions (``compacted`` records, ``compaction`` items,
``context_compacted`` events) become a boundary and the summary the model reads after it.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from ...records import (
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    KIND_REASONING,
    Message,
    ToolCall,
    Usage,
)
from .._images import image_part
from ..base import ImportContext, as_int, as_list, str_or_none

# Assistant-side response items: the output of a model call.
CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
# Server-side tools: no output item answers them, so they are parts of the reply, not ToolCalls.
SERVER_CALLS = frozenset({"web_search_call", "image_generation_call"})
# Context Codex injects as user messages (not typed by the user).
INJECTED_RE = re.compile(
    r"^\s*(?:<(environment_context|user_instructions|user_shell_command|turn_aborted|"
    r"permissions instructions|collaboration_mode|skill)\b|(# AGENTS\.md instructions))"
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def content_text(content: Any) -> tuple[str, list[dict[str, Any]]]:
    """Text and non-text parts of a message's ``content`` list."""
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    if not isinstance(content, list):
        return ("" if content is None else _dumps(content)), parts
    for c in content:
        if isinstance(c, str):
            texts.append(c)
            continue
        if not isinstance(c, dict):
            continue
        ct = c.get("type")
        if ct in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            texts.append(str(c.get("text") or ""))
        elif ct == "refusal":
            texts.append(str(c.get("refusal") or ""))
        elif ct in ("input_image", "image"):
            url = c.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
            parts.append(image_part(url=url if isinstance(url, str) else None, detail=c.get("detail")))
        else:
            parts.append({"type": ct or "unknown"})
    return "\n".join(texts), parts


def _usage(info: dict[str, Any], last: dict[str, Any]) -> Usage | None:
    usage = Usage(
        prompt_tokens=as_int(last.get("input_tokens")),  # includes cached_input_tokens
        completion_tokens=as_int(last.get("output_tokens")),
        cache_read_tokens=as_int(last.get("cached_input_tokens")),
        reasoning_tokens=as_int(last.get("reasoning_output_tokens")),
        context_window=as_int(info.get("model_context_window")),
    )
    return None if usage.is_empty() else usage


def _grew_by(total: dict[str, Any], before: Any) -> dict[str, Any]:
    """What a running ``total_token_usage`` grew by since ``before`` (the previous one, or None)."""
    if not isinstance(before, dict):
        return total
    out: dict[str, Any] = {}
    for k, v in total.items():
        a, b = as_int(v), as_int(before.get(k))
        out[k] = v if a is None or b is None else a - b
    return out


class _Call:
    """The items one model call produced, collected until the call is over."""

    def __init__(self, timestamp: Any, model: str | None, request: dict[str, Any]) -> None:
        self.timestamp = timestamp
        self.model = model
        self.request = request
        self.reasoning_before: list[Message] = []
        self.reasoning_after: list[Message] = []
        self.texts: list[str] = []
        self.parts: list[dict[str, Any]] = []
        self.calls: list[ToolCall] = []
        self.items = 0
        self.phases: list[str] = []

    @property
    def has_output(self) -> bool:
        return bool(self.texts or self.calls or self.parts)

    def add_reasoning(self, m: Message) -> None:
        (self.reasoning_after if self.has_output else self.reasoning_before).append(m)
        self.items += 1

    def build(self, usage: Usage | None) -> tuple[list[Message], int | None]:
        """The messages (the assistant message, then the call's reasoning), and the index of the
        one that carries the call's usage."""
        out: list[Message] = []
        meta: dict[str, Any] = {"request": self.request} if self.request else {}
        if self.items > 1:
            meta["items"] = self.items
        if self.phases:
            meta["phase"] = self.phases[-1]
        if self.has_output:
            out.append(
                Message(
                    role="assistant",
                    text="\n\n".join(t for t in self.texts if t),
                    tool_calls=tuple(self.calls),
                    parts=tuple(self.parts),
                    timestamp=self.timestamp,
                    model=self.model,
                    meta=meta,
                )
            )
        target = len(out) - 1 if out else None
        out.extend(self.reasoning_before)
        out.extend(self.reasoning_after)
        if target is None and out:
            target = len(out) - 1
        if usage is not None and target is not None:
            out[target] = replace(out[target], usage=usage)
        return out, target


class Stream:
    """State of one pass over a rollout: turns records into Messages in order.

    Messages go to ``self.out`` once final. A call's messages are held back while its usage
    may still arrive (usage written after the items); everything after them is held too,
    so order is kept.
    """

    def __init__(self, ctx: ImportContext, legacy: bool) -> None:
        self.ctx = ctx
        self.legacy = legacy
        self.out: list[Message] = []
        self.held: list[Message] = []  # a finished call lacking usage, and what followed it
        self.held_target: int | None = None  # index in held of the message to get usage
        self.call: _Call | None = None
        self.pending: Usage | None = None  # usage written before its call's items
        self.mode: str | None = "none" if legacy else None  # "before" | "after"
        self.last_total: Any = None
        self.names: dict[str, str] = {}
        self.model: str | None = None
        self.request: dict[str, Any] = {}
        self.last_kind: str | None = None  # kind of the last message emitted
        self.models: list[str] = []

    # -- output plumbing
    def _emit(self, m: Message) -> None:
        self.last_kind = m.kind
        if self.held_target is not None:
            self.held.append(m)
        else:
            self.out.append(m)

    def _flush_held(self) -> None:
        self.out.extend(self.held)
        self.held = []
        self.held_target = None

    def close_call(self) -> None:
        call, self.call = self.call, None
        if call is None:
            return
        usage = None
        if self.mode == "before" and self.pending is not None:
            usage, self.pending = self.pending, None
        msgs, target = call.build(usage)
        if not msgs:
            return
        if usage is None and self.mode in (None, "after") and target is not None:
            # Its usage may come in a later token_count: hold it (and what follows) back.
            self._flush_held()
            self.held = msgs
            self.held_target = target
            self.last_kind = msgs[-1].kind
            return
        for m in msgs:
            self._emit(m)

    def finish(self) -> list[Message]:
        self.close_call()
        if self.pending is not None:
            self.ctx.skip("token_count (no matching call)")
        self._flush_held()
        out, self.out = self.out, []
        return out

    def drain(self) -> list[Message]:
        out, self.out = self.out, []
        return out

    def _open_call(self, timestamp: Any) -> _Call:
        if self.call is None:
            if self.held_target is not None and self.mode in (None, "after"):
                self._flush_held()  # the previous call never got a usage event
            self.call = _Call(timestamp, self.model, dict(self.request))
        return self.call

    # -- records
    def turn_context(self, p: dict[str, Any]) -> None:
        self.close_call()
        model = p.get("model")
        if isinstance(model, str) and model:
            self.model = model
            if not self.models or self.models[-1] != model:
                self.models.append(model)
        self.request = {"model": self.model} if self.model else {}
        for key in ("effort", "reasoning_effort", "summary"):
            if isinstance(p.get(key), str):
                self.request[key] = p[key]
        self.ctx.skip("turn_context")

    def response_item(self, p: dict[str, Any], ts: Any, line: int | None) -> None:
        t = p.get("type")
        if t == "message":
            role = p.get("role")
            text, parts = content_text(p.get("content"))
            if role == "assistant":
                call = self._open_call(ts)
                call.items += 1
                if text:
                    call.texts.append(text)
                call.parts.extend(parts)
                if isinstance(p.get("phase"), str):
                    call.phases.append(p["phase"])
                return
            if role not in ("user", "developer", "system"):
                self.ctx.warn(f"message with unknown role {role!r}; read as user", line=line)
                role = "user"
            self.close_call()
            meta: dict[str, Any] = {}
            m = INJECTED_RE.match(text) if role == "user" else None
            if m:
                meta["injected"] = m.group(1) or "agents_md"
            self._emit(Message(role=role, text=text, parts=tuple(parts), timestamp=ts, meta=meta))
        elif t == "reasoning":
            summary, _ = content_text(p.get("summary"))
            parts = []
            raw, _ = content_text(p.get("content")) if p.get("content") else ("", [])
            if raw:
                parts.append({"type": "thinking", "text": raw})
            enc = p.get("encrypted_content")
            if isinstance(enc, str) and enc:
                parts.append({"type": "encrypted_reasoning", "bytes": len(enc)})
            call = self._open_call(ts)
            call.add_reasoning(
                Message(role="assistant", kind=KIND_REASONING, text=summary, parts=tuple(parts),
                        timestamp=ts, model=self.model)
            )
        elif t in CALL_ITEMS or t == "tool_search_call" or (
                isinstance(t, str) and t.endswith("_call") and "call_id" in p and t not in SERVER_CALLS):
            call = self._open_call(ts)
            call.items += 1
            call.calls.append(self._tool_call(t, p))
        elif t == "web_search_call":
            # Server-side tool: no output item comes back, so it is a part, not a ToolCall.
            call = self._open_call(ts)
            call.items += 1
            call.parts.append({"type": "web_search_call", "action": p.get("action"),
                               "status": p.get("status")})
        elif t == "image_generation_call":
            # Server-side tool like web search: its result (a base64 image) comes back inside the
            # item, read again by later calls as an image; the part keeps its size, not the bytes.
            call = self._open_call(ts)
            call.items += 1
            result = p.get("result")
            call.parts.append({"type": "image_generation_call", "status": p.get("status"),
                               "revised_prompt": p.get("revised_prompt") if isinstance(p.get("revised_prompt"), str)
                               else None, "result_bytes": len(result) if isinstance(result, str) else 0})
        elif isinstance(t, str) and t.endswith("_call_output"):
            self.close_call()
            self._emit(self._tool_output(p, ts))
        elif t == "tool_search_output":
            # The tool definitions a tool search loaded: what the model reads next (a client search
            # answers its tool_search_call by call_id; a server one may stand alone).
            self.close_call()
            call_id = str(p["call_id"]) if p.get("call_id") is not None else None
            tools = as_list(p.get("tools"))
            self._emit(Message(role="tool", text=_dumps(tools), name=self.names.get(call_id or "", "tool_search"),
                               tool_call_id=call_id, timestamp=ts,
                               meta={"tool_search": {"execution": p.get("execution"), "status": p.get("status"),
                                                     "tools": len(tools)}}))
        elif t == "agent_message":
            # A message from another agent of a multi-agent run (author -> recipient): input this
            # agent's next call reads, not a reply of its own.
            self.close_call()
            texts, parts = [], []
            for c in as_list(p.get("content")):
                if isinstance(c, dict) and isinstance(c.get("text"), str):
                    texts.append(c["text"])
                elif isinstance(c, dict) and isinstance(c.get("encrypted_content"), str):
                    parts.append({"type": "encrypted_agent_message", "bytes": len(c["encrypted_content"])})
            self._emit(self._agent_message("\n".join(texts), parts, p, ts, "response_item:agent_message"))
        elif t == "ghost_snapshot":
            self.ctx.skip("ghost_snapshot")
        elif t in ("compaction", "compaction_summary", "context_compaction"):
            self.close_call()
            enc = p.get("encrypted_content")
            blob = ({"type": "encrypted_compaction", "bytes": len(enc)},) if isinstance(enc, str) else ()
            self._boundary(ts, "response_item:compaction")
            self._emit(Message(role="user", kind=KIND_COMPACTION_SUMMARY, parts=blob, timestamp=ts,
                               meta={"source": "response_item:compaction"}))
        else:
            self.ctx.skip(f"response_item:{t}", unknown=True)  # what the model saw, unread

    def _agent_message(self, text: str, parts: list[dict[str, Any]], p: dict[str, Any], ts: Any,
                       source: str) -> Message:
        who = {k: p.get(k) for k in ("author", "recipient") if isinstance(p.get(k), str)}
        others = p.get("other_recipients")
        if isinstance(others, list) and others:
            who["other_recipients"] = [o for o in others if isinstance(o, str)]
        return Message(role="user", text=text, parts=tuple(parts), timestamp=ts,
                       meta={"agent_message": who, "source": source})

    def inter_agent(self, p: dict[str, Any], ts: Any) -> None:
        """A rollout's ``inter_agent_communication`` (Codex's multi-agent mailbox: author, recipient,
        other_recipients, content, trigger_turn): delivered to this agent as an agent message
        its next call reads."""
        self.close_call()
        content = p.get("content")
        parts = ([{"type": "encrypted_agent_message", "bytes": len(p["encrypted_content"])}]
                 if isinstance(p.get("encrypted_content"), str) else [])
        self._emit(self._agent_message(content if isinstance(content, str) else "", parts, p, ts,
                                       "inter_agent_communication"))

    def _tool_call(self, t: str, p: dict[str, Any]) -> ToolCall:
        call_id = p.get("call_id") or p.get("id")
        call_id = str(call_id) if call_id is not None else None
        if t == "function_call":
            name = str(p.get("name") or "")
            args = p.get("arguments")
            arguments = args if isinstance(args, str) else _dumps(args)
        elif t == "custom_tool_call":
            name = str(p.get("name") or "")
            inp = p.get("input")
            arguments = inp if isinstance(inp, str) else _dumps(inp)
        elif t == "local_shell_call":
            name = "local_shell"
            arguments = _dumps(p.get("action"))
        elif t == "tool_search_call":
            name = "tool_search"
            args = p.get("arguments")
            arguments = args if isinstance(args, str) else _dumps(args)
        else:
            name = str(p.get("name") or t[: -len("_call")])
            rest = {k: v for k, v in p.items() if k not in ("type", "id", "call_id", "status")}
            arguments = _dumps(rest.get("arguments", rest))
        if call_id:
            self.names[call_id] = name
        return ToolCall(name=name, arguments=arguments, id=call_id)

    def _tool_output(self, p: dict[str, Any], ts: Any) -> Message:
        call_id = p.get("call_id")
        call_id = str(call_id) if call_id is not None else None
        output = p.get("output")
        meta: dict[str, Any] = {}
        parts: list[dict[str, Any]] = []
        if isinstance(output, str):
            text = output
            rc = _exit_code(output)
            if rc is not None:
                meta["returncode"] = rc
        elif isinstance(output, list):
            text, parts = content_text(output)
        elif isinstance(output, dict):
            # Older payloads: {"content": str, "success": bool} (or content_items).
            content = output.get("content")
            if isinstance(content, str):
                text = content
            else:
                text, parts = content_text(output.get("content_items") or content)
            if output.get("success") is False:
                meta["success"] = False
        else:
            text = "" if output is None else _dumps(output)
        return Message(role="tool", text=text, name=self.names.get(call_id or ""),
                       tool_call_id=call_id, parts=tuple(parts), timestamp=ts, meta=meta)

    def _boundary(self, ts: Any, source: str) -> None:
        if self.last_kind == KIND_COMPACTION_BOUNDARY:
            return  # context_compacted event and compacted item for one compaction
        self._emit(Message(role="system", kind=KIND_COMPACTION_BOUNDARY, text="Context compacted",
                           timestamp=ts, meta={"source": source}))

    def compacted(self, p: dict[str, Any], ts: Any) -> None:
        self.close_call()
        message = str_or_none(p.get("message")) or ""
        history = p.get("replacement_history")
        meta: dict[str, Any] = {"source": "compacted"}
        text, parts = message, []
        if isinstance(history, list):
            # What the model reads after the compaction: the kept user messages and summary.
            texts = []
            for item in history:
                if not isinstance(item, dict):
                    continue
                if item.get("type") == "message":
                    t, ps = content_text(item.get("content"))
                    texts.append(t)
                    parts.extend(ps)
                elif item.get("type") in ("compaction", "compaction_summary"):
                    enc = item.get("encrypted_content")
                    parts.append({"type": "encrypted_compaction",
                                  "bytes": len(enc) if isinstance(enc, str) else 0})
            text = "\n\n".join(t for t in texts if t) or message
            meta["replacement_items"] = len(history)
            meta["summary_chars"] = len(message)
        self._boundary(ts, "compacted")
        self._emit(Message(role="user", kind=KIND_COMPACTION_SUMMARY, text=text, parts=tuple(parts),
                           timestamp=ts, meta=meta))

    def event(self, p: dict[str, Any], ts: Any) -> None:
        t = p.get("type")
        if t == "token_count":
            self._token_count(p)
        elif t == "context_compacted":
            if self.last_kind in (KIND_COMPACTION_SUMMARY, KIND_COMPACTION_BOUNDARY) and self.call is None:
                self.ctx.skip("event_msg:context_compacted (with compacted)")
                return
            self.close_call()
            self._boundary(ts, "context_compacted")
        else:
            self.ctx.skip(f"event_msg:{t}")

    def _token_count(self, p: dict[str, Any]) -> None:
        info = p.get("info")
        if isinstance(info, dict):
            total = info.get("total_token_usage")
            last = info.get("last_token_usage")
            if not isinstance(last, dict):
                # total_token_usage is the session's running sum: the call's own figures are
                # what it grew by since the last event (the whole of it for the first call).
                last = _grew_by(total, self.last_total) if isinstance(total, dict) else None
        elif "input_tokens" in p:  # early events: the usage itself, flattened
            info, total, last = {}, {k: p.get(k) for k in ("input_tokens", "output_tokens")}, p
        else:
            self.ctx.skip("event_msg:token_count (no usage)")
            return
        if total is not None and total == self.last_total:
            self.ctx.skip("event_msg:token_count (repeat)")
            return
        self.last_total = total
        usage = _usage(info, last) if isinstance(last, dict) else None
        if usage is None:
            self.ctx.skip("event_msg:token_count (no usage)")
            return
        if self.mode is None:
            self.mode = "after" if (self.call is not None or self.held_target is not None) else "before"
        if self.mode == "after":
            self.close_call()
            if self.held_target is None:
                self.ctx.skip("token_count (no matching call)")
                return
            self.held[self.held_target] = replace(self.held[self.held_target], usage=usage)
            self._flush_held()
        else:
            if self.call is not None:  # usage, items, usage: the pending one was this call's
                self.close_call()
            if self.pending is not None:
                self.ctx.skip("token_count (no matching call)")
            self.pending = usage


def _exit_code(output: str) -> int | None:
    """The exit code a shell call's output records: Codex sends the model the JSON
    ``{"output": ..., "metadata": {"exit_code": N, ...}}`` as the result's text (kept as it is)."""
    if not output.startswith('{"output"') or '"exit_code"' not in output[-200:]:
        return None
    try:
        doc = json.loads(output)
    except ValueError:
        return None
    md = doc.get("metadata") if isinstance(doc, dict) else None
    code = md.get("exit_code") if isinstance(md, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None
