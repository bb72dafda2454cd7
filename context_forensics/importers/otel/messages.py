"""The messages of one GenAI call, in each of the forms instrumentations record them.

- Semantic conventions 1.37+: ``gen_ai.system_instructions`` (a list of parts),
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON lists of ``{role, parts,
  finish_reason}``, parts typed ``text``, ``tool_call``, ``tool_call_response``, ``reasoning``,
  ``blob`` / ``uri`` / ``file``), as span attributes or on a
  ``gen_ai.client.inference.operation.details`` event.
- Semantic conventions up to 1.36: one event per message (``gen_ai.system.message``,
  ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
  ``gen_ai.choice``) as log records or span events, bodies ``{content, tool_calls, id}``.
- OpenLLMetry (Traceloop): ``gen_ai.prompt.N.role`` / ``.content`` / ``.tool_calls.M.*`` and
  ``gen_ai.completion.N.*`` span attributes.
- OpenInference (Arize): ``llm.input_messages.N.message.role`` / ``.content`` /
  ``.contents.M.message_content.*`` / ``.tool_calls.M.tool_call.*`` and ``llm.output_messages``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...records import Message, ToolCall
from .._json import parse_json
from ..base import as_dict, as_list, as_str, json_text, text_of

ROLE_ALIASES = {"model": "assistant", "ai": "assistant", "human": "user", "function": "tool"}
EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
               "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


def _role(value: Any, default: str = "user") -> str:
    r = as_str(value)
    r = ROLE_ALIASES.get(r.lower(), r.lower()) if r else default
    return r if r in ("system", "developer", "user", "assistant", "tool") else default


def json_value(v: Any) -> Any:
    """An attribute that holds JSON as text, parsed (through the guard); other values as they are."""
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return parse_json(v)
        except json.JSONDecodeError:
            return v
    return v


# ---------------------------------------------------------------- semconv 1.37+ parts


def parts_message(raw: Any, default_role: str = "user") -> list[Message]:
    """A ``{role, parts}`` message as ctxf messages: tool-call responses become tool messages."""
    m = as_dict(raw)
    role = _role(m.get("role"), default_role)
    texts: list[str] = []
    calls: list[ToolCall] = []
    extra: list[dict[str, Any]] = []
    out: list[Message] = []
    for p in as_list(m.get("parts")):
        if isinstance(p, str):
            texts.append(p)
            continue
        p = as_dict(p)
        kind = p.get("type")
        if kind == "text":
            texts.append(json_text(p.get("content")))
        elif kind == "tool_call":
            calls.append(ToolCall(name=as_str(p.get("name")) or "", arguments=json_text(p.get("arguments")),
                                  id=as_str(p.get("id"))))
        elif kind == "tool_call_response":
            resp = p.get("response", p.get("result"))
            out.append(Message(role="tool", text=json_text(resp), tool_call_id=as_str(p.get("id"))))
        elif kind == "reasoning":
            extra.append({"type": "thinking", "thinking": json_text(p.get("content"))})
        else:  # blob, uri, file, server tool calls: kept as they are, not read as text
            extra.append({k: v for k, v in p.items() if k != "content" or not isinstance(v, str) or len(v) < 200})
    name = as_str(m.get("name"))
    if texts or calls or extra or not out:
        first = Message(role=role, text="\n".join(texts), name=name, tool_calls=tuple(calls), parts=tuple(extra),
                        meta={"finish_reason": m["finish_reason"]} if as_str(m.get("finish_reason")) else {})
        out.insert(0, first) if role != "tool" else out.append(first)
    return out


def parts_messages(value: Any, default_role: str = "user") -> list[Message] | None:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` as messages, or None when absent."""
    value = json_value(value)
    if not isinstance(value, list):
        return None
    out: list[Message] = []
    for raw in value:
        out += parts_message(raw, default_role)
    return out


def system_instructions(value: Any) -> list[Message]:
    value = json_value(value)
    if value is None:
        return []
    if isinstance(value, str):
        return [Message(role="system", text=value)]
    parts = value if isinstance(value, list) else [value]
    text = "\n".join(json_text(as_dict(p).get("content")) if isinstance(p, dict) else json_text(p) for p in parts)
    return [Message(role="system", text=text)]


# ---------------------------------------------------------------- semconv <= 1.36 events


def _openai_calls(value: Any) -> tuple[ToolCall, ...]:
    calls = []
    for c in as_list(json_value(value)):
        c = as_dict(c)
        fn = as_dict(c.get("function"))
        calls.append(ToolCall(name=as_str(fn.get("name")) or as_str(c.get("name")) or "",
                              arguments=json_text(fn.get("arguments", c.get("arguments"))), id=as_str(c.get("id"))))
    return tuple(calls)


def event_message(name: str, body: Any, attrs: dict[str, Any]) -> Message | None:
    """One message event (log record body, or a span event's attributes when it has no body)."""
    b = as_dict(json_value(body)) if body is not None else {}
    if not b:  # span events put the body's fields among the attributes
        b = {k: json_value(v) for k, v in attrs.items() if not k.startswith("gen_ai.") and k != "event.name"}
        for k in ("content", "tool_calls", "id", "message", "role"):
            if f"gen_ai.event.{k}" in attrs:
                b.setdefault(k, json_value(attrs[f"gen_ai.event.{k}"]))
    if name == "gen_ai.choice":
        msg = as_dict(json_value(b.get("message"))) or b
        return Message(role="assistant", text=text_of(msg.get("content")),
                       tool_calls=_openai_calls(msg.get("tool_calls")),
                       meta={"finish_reason": b["finish_reason"]} if as_str(b.get("finish_reason")) else {})
    role = EVENT_ROLES.get(name)
    if role is None:
        return None
    role = _role(b.get("role"), role) if role != "tool" else "tool"
    return Message(role=role, text=text_of(b.get("content")), tool_calls=_openai_calls(b.get("tool_calls")),
                   tool_call_id=as_str(b.get("id")) if role == "tool" else None)


# ---------------------------------------------------------------- indexed attributes

_INDEXED = re.compile(r"^(\d+)\.(.+)$")


def indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``{prefix}N.rest`` attributes grouped by N (in order): ``[{rest: value}, ...]``."""
    groups: dict[int, dict[str, Any]] = {}
    for k, v in attrs.items():
        if k.startswith(prefix):
            m = _INDEXED.match(k[len(prefix):])
            if m:
                groups.setdefault(int(m.group(1)), {})[m.group(2)] = v
    return [groups[i] for i in sorted(groups)]


def _indexed_calls(fields: dict[str, Any], prefix: str, name: str, args: str, cid: str) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(name=as_str(c.get(name)) or "", arguments=json_text(c.get(args)), id=as_str(c.get(cid)))
                 for c in indexed(fields, prefix))


def openllmetry_messages(attrs: dict[str, Any], prefix: str, default_role: str) -> list[Message]:
    """``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` (OpenLLMetry)."""
    out = []
    for f in indexed(attrs, prefix):
        role = _role(f.get("role"), default_role)
        content = json_value(f.get("content"))
        out.append(Message(role=role, text=text_of(content), name=as_str(f.get("name")),
                           tool_calls=_indexed_calls(f, "tool_calls.", "name", "arguments", "id"),
                           tool_call_id=as_str(f.get("tool_call_id")) if role == "tool" else None,
                           meta={"finish_reason": f["finish_reason"]} if as_str(f.get("finish_reason")) else {}))
    return out


def openinference_messages(attrs: dict[str, Any], prefix: str, default_role: str) -> list[Message]:
    """``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*`` (OpenInference)."""
    out = []
    for f in indexed(attrs, prefix):
        f = {k[len("message."):]: v for k, v in f.items() if k.startswith("message.")}
        role = _role(f.get("role"), default_role)
        text = as_str(f.get("content"))
        if text is None:
            text = "\n".join(json_text(c.get("message_content.text")) for c in indexed(f, "contents.")
                             if c.get("message_content.type", "text") == "text")
        out.append(Message(role=role, text=text, name=as_str(f.get("name")),
                           tool_calls=_indexed_calls(f, "tool_calls.", "tool_call.function.name",
                                                     "tool_call.function.arguments", "tool_call.id"),
                           tool_call_id=as_str(f.get("tool_call_id")) if role == "tool" else None))
    return out
