"""Inspect ``ChatMessage`` dicts as Messages: content items (text, reasoning, images, server-side
tool use, audio, video, documents), tool calls and tool errors; and the attachment text that
a log moved out to ``attachments`` (``attachment://<hash>``, earlier ``tc://<hash>``) put back.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from ...records import Message, ToolCall
from .._images import image_part
from ..base import as_list, as_str

BASE64_REMOVED = "<base64-data-removed>"
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)


def attachment_resolver(attachments: dict[str, Any]) -> Callable[[Any], Any]:
    """A function that puts attachment text back wherever a reference stands."""

    def one(s: str) -> str:
        if s.startswith("attachment://"):
            found = attachments.get(s[13:], s)
        elif s.startswith("tc://"):  # the v1 name for the same thing
            found = attachments.get(s[5:], s)
        else:
            return s
        return found if isinstance(found, str) else s

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return one(value) if "://" in value[:16] else value
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return walk


def _content(content: Any, role: str) -> tuple[str, list[dict[str, Any]]]:
    """Text (text items joined by newlines, as Inspect's ``.text``) and non-text parts."""
    parts: list[dict[str, Any]] = []
    if content is None:
        return "", parts
    if isinstance(content, str):
        if role == "assistant":
            m = _THINK.match(content)
            if m:  # Inspect lifts a leading <think> block out as reasoning
                parts.append({"type": "thinking", "text": m.group(1).strip()})
                content = content[m.end():]
        return content, parts
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False), parts
    texts: list[str] = []
    for item in content:
        if isinstance(item, str):
            texts.append(item)
            continue
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text":
            texts.append(str(item.get("text") or ""))
        elif kind == "reasoning":
            reasoning = str(item.get("reasoning") or "")
            if item.get("redacted"):
                part: dict[str, Any] = {"type": "redacted_thinking", "bytes": len(reasoning)}
                if item.get("summary"):
                    part["summary"] = item["summary"]
                parts.append(part)
            else:
                parts.append({"type": "thinking", "text": reasoning})
        elif kind == "image":
            image = item.get("image")
            image = image if isinstance(image, str) else ""
            if image.startswith("data:") or image.startswith("http"):
                parts.append(image_part(url=image, detail=item.get("detail")))
            else:  # removed from the log, or a local path
                part = image_part(detail=item.get("detail"))
                if image == BASE64_REMOVED:
                    part["removed"] = True
                elif image:
                    part["path"] = image
                parts.append(part)
        elif kind == "tool_use":  # a server-side tool the provider ran (web search, MCP)
            parts.append(
                {
                    "type": "server_tool_use",
                    "tool_type": item.get("tool_type"),
                    "name": item.get("name"),
                    "id": item.get("id"),
                    "arguments": item.get("arguments"),
                    "result": item.get("result"),
                    **({"error": item["error"]} if item.get("error") else {}),
                }
            )
        elif kind in ("audio", "video"):
            parts.append({"type": kind, "format": item.get("format")})
        elif kind == "document":
            parts.append(
                {"type": "document", "filename": item.get("filename"), "media_type": item.get("mime_type")}
            )
        else:  # "data" (provider-internal payloads) and future content types
            parts.append({"type": str(kind or "unknown")})
    return "\n".join(texts), parts


def _arguments(args: Any) -> str:
    if isinstance(args, str):
        return args
    return json.dumps(args if args is not None else {}, ensure_ascii=False)


def chat_message(raw: dict[str, Any]) -> Message | None:
    """One Inspect ChatMessage (attachments already resolved) as a Message."""
    role = raw.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        return None
    text, parts = _content(raw.get("content"), role)
    meta: dict[str, Any] = {}
    if raw.get("id"):
        meta["id"] = raw["id"]
    if raw.get("source"):
        meta["source"] = raw["source"]
    if not isinstance(role, str):
        return None
    tool_calls: list[ToolCall] = []
    name = None
    tool_call_id = None
    if role == "assistant":
        reasoning = raw.get("reasoning")  # the pre-2025 field for reasoning text
        if isinstance(reasoning, str) and reasoning:
            parts.insert(0, {"type": "thinking", "text": reasoning})
        for tc in as_list(raw.get("tool_calls")):
            if not isinstance(tc, dict):
                continue
            tool_calls.append(
                ToolCall(
                    name=str(tc.get("function") or ""),
                    arguments=_arguments(tc.get("arguments")),
                    id=as_str(tc.get("id")),
                )
            )
            if tc.get("parse_error"):
                meta.setdefault("parse_errors", []).append(tc["parse_error"])
    elif role == "tool":
        name = as_str(raw.get("function"))
        tool_call_id = as_str(raw.get("tool_call_id"))
        error = raw.get("error")
        if not error and raw.get("tool_error"):  # pre-0.3.40 logs
            error = {"type": "unknown", "message": raw["tool_error"]}
        if isinstance(error, dict):
            meta["error"] = error
            if not text.strip():  # what the providers send in place of an empty result
                text = f"Error: {error.get('message', '')}"
    elif role == "user" and raw.get("tool_call_id"):
        meta["tool_call_ids"] = raw["tool_call_id"]  # tool output sent as a user message
    return Message(
        role=role,
        text=text,
        name=name,
        tool_calls=tuple(tool_calls),
        tool_call_id=tool_call_id,
        parts=tuple(parts),
        model=as_str(raw.get("model")) if role == "assistant" else None,
        meta=meta,
    )


def content_key(raw: dict[str, Any]) -> tuple:
    """What two copies of the same assistant message share, for matching without ids."""
    text, _ = _content(raw.get("content"), "assistant")
    calls = tuple(
        (tc.get("function"), _arguments(tc.get("arguments")))
        for tc in as_list(raw.get("tool_calls"))
        if isinstance(tc, dict)
    )
    return (text.strip(), calls)
