"""Chat messages as agent harnesses log them, normalised: OpenAI chat messages (``tool_calls``,
``function_call``, the ``tool`` role) as litellm writes them, with Anthropic content blocks
(``tool_use``, ``tool_result``, thinking) and OpenAI Responses items mixed in, and the
reasoning fields of litellm and OpenRouter.

Shared by the ``swe_agent``, ``mini_swe_agent`` and ``openhands`` importers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..records import KIND_REASONING, Message, ToolCall, Usage
from ._images import image_part
from .base import ImportContext, as_dict, as_list, json_text, str_or_none

ROLE_MAP = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
}


_TEXT_TYPES = ("text", "input_text", "output_text")


def as_id(value: Any) -> str | None:
    """A tool-call id as a string (ids are strings or ints in the wild; anything else is None)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (str, int)):
        return str(value)
    return None


def tool_calls_of(raw: Any) -> tuple[ToolCall, ...]:
    """ToolCalls from OpenAI ``tool_calls`` (nested ``function``) or flat ``{name, arguments}``."""
    if not isinstance(raw, list):
        return ()
    calls = []
    for call in raw:
        if not isinstance(call, dict):
            continue
        fn = sub if isinstance(sub := call.get("function"), dict) else call
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        calls.append(ToolCall(name=name, arguments=json_text(fn.get("arguments", fn.get("input"))),
                              id=as_id(call.get("id")) or as_id(call.get("call_id"))))
    return tuple(calls)


def _thinking_parts(m: dict) -> list[dict[str, Any]]:
    """Thinking/reasoning of an assistant message as parts (litellm and OpenRouter shapes)."""
    parts: list[dict[str, Any]] = []
    blocks = m.get("thinking_blocks")
    if isinstance(blocks, list):
        for b in blocks:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "redacted_thinking":
                parts.append({"type": "redacted_thinking", "bytes": len(str(b.get("data") or ""))})
            elif isinstance(b.get("thinking"), str) and b["thinking"]:
                parts.append({"type": "thinking", "text": b["thinking"]})
    if not parts:
        for key in ("reasoning_content", "reasoning"):
            if isinstance(m.get(key), str) and m[key].strip():
                parts.append({"type": "thinking", "text": m[key]})
                break
    details = m.get("reasoning_details")
    if isinstance(details, list):
        for d in details:
            if not isinstance(d, dict):
                continue
            if d.get("type") == "reasoning.text" and not parts and isinstance(d.get("text"), str):
                parts.append({"type": "thinking", "text": d["text"]})
            elif d.get("type") == "reasoning.encrypted":
                parts.append({"type": "redacted_thinking", "bytes": len(str(d.get("data") or ""))})
    return parts


@dataclass
class _Content:
    text: str
    parts: list[dict[str, Any]]
    tool_calls: list[ToolCall]
    tool_results: list[tuple[str | None, str, bool]]  # (tool_use_id, text, is_error)
    cache_control: bool


def _image(item: dict) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "image_url" or kind == "input_image":
        ref = item.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        detail = (ref.get("detail") if isinstance(ref, dict) else None) or item.get("detail")
        return image_part(url=url if isinstance(url, str) else None, detail=detail)
    source = as_dict(item.get("source"))
    if source.get("type") == "base64":
        return image_part(base64_data=source.get("data"), media_type=source.get("media_type"))
    return image_part(url=source.get("url") if isinstance(source.get("url"), str) else None)


def split_content(content: Any) -> _Content:
    """Text, non-text parts, tool_use blocks and tool_result blocks of a content value."""
    out = _Content("", [], [], [], False)
    if content is None:
        return out
    if isinstance(content, str):
        out.text = content
        return out
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        out.text = json.dumps(content, ensure_ascii=False)
        return out
    texts: list[str] = []
    for item in content:
        if isinstance(item, str):
            texts.append(item)
            continue
        if not isinstance(item, dict):
            continue
        if item.get("cache_control"):
            out.cache_control = True
        kind = item.get("type")
        if kind in _TEXT_TYPES or (kind is None and isinstance(item.get("text"), str)):
            texts.append(str(item.get("text") or ""))
        elif kind in ("image_url", "input_image", "image"):
            out.parts.append(_image(item))
        elif kind == "tool_use":
            out.tool_calls.append(ToolCall(name=str(item.get("name") or ""),
                                           arguments=json_text(item.get("input")),
                                           id=as_id(item.get("id"))))
        elif kind == "tool_result":
            inner = split_content(item.get("content"))
            out.parts.extend(inner.parts)
            out.tool_results.append((as_id(item.get("tool_use_id")), inner.text, bool(item.get("is_error"))))
        elif kind == "thinking":
            out.parts.append({"type": "thinking", "text": str(item.get("thinking") or "")})
        elif kind == "redacted_thinking":
            out.parts.append({"type": "redacted_thinking", "bytes": len(str(item.get("data") or ""))})
        elif kind == "refusal":
            texts.append(str(item.get("refusal") or ""))
        else:
            out.parts.append({"type": str(kind or "unknown")})
    out.text = "\n".join(texts)
    return out


def _responses_items(
    items: list, *, names: dict[str, str], usage: Usage | None, meta: dict, model: str | None,
    timestamp: str | None,
) -> list[Message]:
    """Messages from the ``output`` items of an OpenAI Responses API response: the assistant message,
    then the reasoning items (the response writes them first, but they are the call's output, which
    the next call reads: the call's own window, all before its assistant message, must not hold them)."""
    msgs: list[Message] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "reasoning":
            summary = as_list(item.get("summary"))
            text = "\n".join(str(s.get("text") or "") for s in summary if isinstance(s, dict))
            parts: tuple[dict[str, Any], ...] = ()
            if item.get("encrypted_content"):
                parts = ({"type": "redacted_thinking", "bytes": len(str(item["encrypted_content"]))},)
            msgs.append(Message(role="assistant", kind=KIND_REASONING, text=text, parts=parts,
                                model=model, timestamp=timestamp))
        elif kind == "message":
            texts.append(split_content(item.get("content")).text)
        elif kind == "function_call":
            calls.extend(tool_calls_of([item]))
    for c in calls:
        if c.id:
            names[c.id] = c.name
    if texts or calls or not msgs:
        msgs.insert(0, Message(role="assistant", text="\n".join(texts), tool_calls=tuple(calls), usage=usage,
                               model=model, timestamp=timestamp, meta=meta))
    elif usage is not None:  # only reasoning came back: the usage still belongs to this call
        last = msgs[-1]
        msgs[-1] = Message(role=last.role, kind=last.kind, text=last.text, parts=last.parts, usage=usage,
                           model=model, timestamp=timestamp, meta=meta)
    return msgs


def convert_message(
    m: dict,
    ctx: ImportContext,
    *,
    names: dict[str, str],
    usage: Usage | None = None,
    meta: dict[str, Any] | None = None,
    model: str | None = None,
    timestamp: str | None = None,
    line: int | None = None,
) -> list[Message]:
    """Normalise one chat message dict (OpenAI chat, litellm, Anthropic blocks, Responses items).

    ``names`` maps tool-call ids to tool names; assistant tool calls add to it and tool
    results read it. ``usage``/``meta``/``model``/``timestamp`` go on the assistant message
    the call produced. Returns the messages in order (an Anthropic user message with
    tool_result blocks becomes one tool message per result, then the user text).
    """
    meta = dict(meta or {})
    if m.get("object") == "response" and isinstance(m.get("output"), list):
        return _responses_items(m["output"], names=names, usage=usage, meta=meta, model=model,
                                timestamp=timestamp)
    kind = m.get("type")
    if "role" not in m and kind in ("function_call", "reasoning"):
        return _responses_items([m], names=names, usage=usage, meta=meta, model=model, timestamp=timestamp)
    if kind == "function_call_output":
        call_id = as_id(m.get("call_id"))
        output = m.get("output")
        text = output if isinstance(output, str) else split_content(output).text
        return [Message(role="tool", text=text, tool_call_id=call_id, name=names.get(call_id or ""),
                        timestamp=timestamp, meta=meta)]
    raw_role = str(m.get("role") or "").lower()
    role = ROLE_MAP.get(raw_role)
    if role is None:
        ctx.warn(f"unknown message role {raw_role!r}; read as user", line=line)
        meta["source_role"] = raw_role
        role = "user"
    content = split_content(m.get("content"))
    if content.cache_control or m.get("cache_control"):
        meta["cache_control"] = True
    if role == "assistant":
        calls = list(tool_calls_of(m.get("tool_calls"))) + content.tool_calls
        fc = m.get("function_call")
        if isinstance(fc, dict) and isinstance(fc.get("name"), str):
            calls.append(ToolCall(name=fc["name"], arguments=json_text(fc.get("arguments"))))
        for c in calls:
            if c.id:
                names[c.id] = c.name
        parts = _thinking_parts(m) + content.parts
        if isinstance(m.get("refusal"), str) and m["refusal"] and not content.text:
            parts.append({"type": "refusal", "text": m["refusal"]})
        return [Message(role="assistant", text=content.text, tool_calls=tuple(calls), parts=tuple(parts),
                        usage=usage, model=model, timestamp=timestamp, meta=meta,
                        name=m.get("name") if isinstance(m.get("name"), str) else None)]
    if role == "tool":
        call_id = as_id(m.get("tool_call_id"))
        ids = [as_id(i) for i in as_list(m.get("tool_call_ids")) if as_id(i)]
        if call_id is None and ids:
            call_id = ids[0]
            if len(ids) > 1:
                meta["tool_call_ids"] = ids
        name = str_or_none(m.get("name")) or names.get(call_id or "")
        return [Message(role="tool", text=content.text, tool_call_id=call_id, name=name,
                        parts=tuple(content.parts), timestamp=timestamp, meta=meta)]
    out: list[Message] = []
    for tool_use_id, text, is_error in content.tool_results:
        tmeta = {"is_error": True} if is_error else {}
        out.append(Message(role="tool", text=text, tool_call_id=tool_use_id,
                           name=names.get(tool_use_id or ""), timestamp=timestamp, meta=tmeta))
    if not content.tool_results or content.text or content.parts:
        out.append(Message(role=role, text=content.text, parts=tuple(content.parts), timestamp=timestamp,
                           meta=meta, name=m.get("name") if isinstance(m.get("name"), str) else None))
    return out


def messages_equal_key(m: dict[str, Any]) -> tuple[str, str]:
    """(role, text) of a raw chat message: what the prefix checks compare."""
    return (str(m.get("role") or ""), split_content(m.get("content")).text)
