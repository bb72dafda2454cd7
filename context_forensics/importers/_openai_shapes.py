"""OpenAI's shapes that other formats carry too: ``usage`` objects (Chat Completions and
Responses), content parts, tool calls, request parameters and ``created`` times.

Chat Completions is the lingua franca of LLM logs: Responses items, generic message logs,
cassettes of OpenAI-compatible servers and agent harnesses all write these shapes, so the
importers that meet them read them here rather than through the ``openai_chat`` importer.
"""

from __future__ import annotations

import json
from typing import Any

from ..records import ToolCall, Usage
from ._images import image_part
from .base import as_dict, as_int, epoch_iso, json_text


def usage_from_responses(d: Any) -> Usage | None:
    """Usage from a Responses API ``usage`` object."""
    if not isinstance(d, dict):
        return None
    itd = as_dict(d.get("input_tokens_details"))
    otd = as_dict(d.get("output_tokens_details"))
    u = Usage(
        prompt_tokens=as_int(d.get("input_tokens")),
        completion_tokens=as_int(d.get("output_tokens")),
        cache_read_tokens=as_int(itd.get("cached_tokens")),
        reasoning_tokens=as_int(otd.get("reasoning_tokens")),
    )
    return None if u.is_empty() else u


def usage_from_openai(d: Any) -> Usage | None:
    """Usage from a Chat Completions ``usage`` object (also tolerates Responses-style keys)."""
    if not isinstance(d, dict):
        return None
    if "prompt_tokens" not in d and ("input_tokens" in d or "output_tokens" in d):
        return usage_from_responses(d)
    ptd = as_dict(d.get("prompt_tokens_details"))
    ctd = as_dict(d.get("completion_tokens_details"))
    cached = as_int(ptd.get("cached_tokens"))
    if cached is None:  # litellm's passthrough of Anthropic fields, DeepSeek's cache hits
        cached = as_int(d.get("cache_read_input_tokens"))
    if cached is None:
        cached = as_int(d.get("prompt_cache_hit_tokens"))
    prompt = as_int(d.get("prompt_tokens"))
    created = as_int(d.get("cache_creation_input_tokens"))
    if prompt is not None and "cache_read_input_tokens" in d:
        # litellm's Anthropic passthrough: versions disagree on whether prompt_tokens holds the
        # cache (a proxy's holds reads and writes; direct Anthropic input + reads); add what a
        # prompt smaller than its parts leaves out (as _agent_calls.usage_from does).
        cr, cc = cached or 0, created or 0
        if prompt < cr:
            prompt += cr + cc
        elif prompt < cr + cc:
            prompt += cc
    u = Usage(
        prompt_tokens=prompt,
        completion_tokens=as_int(d.get("completion_tokens")),
        cache_read_tokens=cached,
        cache_creation_tokens=created,
        reasoning_tokens=as_int(ctd.get("reasoning_tokens")),
    )
    return None if u.is_empty() else u


def tool_call(tc: Any) -> ToolCall | None:
    """A Chat Completions tool call (function or custom tool), or a legacy ``function_call``."""
    if not isinstance(tc, dict):
        return None
    if tc.get("type") == "custom" or isinstance(tc.get("custom"), dict):
        c = tc.get("custom") or {}
        return ToolCall(name=str(c.get("name") or ""), arguments=json_text(c.get("input")), id=tc.get("id"))
    fn = inner if isinstance(inner := tc.get("function"), dict) else tc
    name = fn.get("name")
    if not name and not fn.get("arguments"):
        return None
    return ToolCall(name=str(name or ""), arguments=json_text(fn.get("arguments")), id=tc.get("id"))


def _file_part(f: dict[str, Any]) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "file"}
    for key in ("file_id", "filename"):
        if f.get(key):
            part[key] = f[key]
    data = f.get("file_data")
    if isinstance(data, str):
        header, _, payload = data.partition(",") if data.startswith("data:") else ("", "", data)
        if header:
            part["media_type"] = header[5:].split(";")[0]
        part["bytes"] = len(payload) * 3 // 4
    return part


def content_parts(content: Any) -> tuple[str, list[dict[str, Any]]]:
    """(text, non-text parts) from a Chat Completions ``content`` value."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False), []
    texts: list[str] = []
    parts: list[dict] = []
    for p in content:
        if isinstance(p, str):
            texts.append(p)
            continue
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        if t in ("text", "input_text", "output_text") or (t is None and isinstance(p.get("text"), str)):
            if isinstance(p.get("text"), str):
                texts.append(p["text"])
        elif t == "refusal":
            texts.append(str(p.get("refusal") or ""))
            parts.append({"type": "refusal"})
        elif t == "image_url":
            iu = p.get("image_url")
            if isinstance(iu, str):
                iu = {"url": iu}
            iu = iu if isinstance(iu, dict) else {}
            parts.append(image_part(url=iu.get("url"), detail=iu.get("detail")))
        elif t == "input_audio":
            a = as_dict(p.get("input_audio"))
            part: dict[str, Any] = {"type": "audio"}
            if a.get("format"):
                part["format"] = a["format"]
            if isinstance(a.get("data"), str):
                part["bytes"] = len(a["data"]) * 3 // 4
            parts.append(part)
        elif t == "file":
            parts.append(_file_part(as_dict(p.get("file"))))
        elif t == "image" and isinstance(p.get("source"), dict):  # an Anthropic block passed through
            s = p["source"]
            parts.append(image_part(base64_data=s.get("data"), url=s.get("url"), media_type=s.get("media_type")))
        elif isinstance(t, str):
            parts.append({"type": t})
    return "\n".join(texts), parts


# Request parameters worth keeping next to a recorded call (token counting and replay).
REQUEST_KEYS = (
    "model", "tools", "functions", "tool_choice", "function_call", "max_tokens",
    "max_completion_tokens", "max_output_tokens", "temperature", "top_p", "n", "stream",
    "response_format", "reasoning_effort", "reasoning", "parallel_tool_calls", "seed", "stop",
    "thinking", "tool_config", "text", "truncation", "store", "prompt_cache_key",
    "service_tier", "modalities", "audio", "prediction", "web_search_options", "verbosity",
)


def request_params(body: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a Chat Completions / Responses request worth keeping (``REQUEST_KEYS``)."""
    return {k: body[k] for k in REQUEST_KEYS if k in body and body[k] is not None}


def epoch_iso_z(value: Any) -> str | None:
    """A unix ``created`` time as ISO-8601 UTC with a ``Z`` suffix, or None."""
    iso = epoch_iso(value)
    return iso.replace("+00:00", "Z") if iso else None


__all__ = [
    "REQUEST_KEYS",
    "content_parts",
    "epoch_iso_z",
    "request_params",
    "tool_call",
    "usage_from_openai",
    "usage_from_responses",
]
