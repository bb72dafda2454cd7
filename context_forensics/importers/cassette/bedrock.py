"""Amazon Bedrock's Converse shapes (``converse``, ``converse-stream``, Nova ``invoke``).

Converse content blocks are rewritten into Anthropic's block shape, so the Anthropic Messages
converter reads both; usage is Bedrock's, whose ``inputTokens`` leaves out cache reads and
writes.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ...records import Message, Usage
from .. import anthropic_messages as anth
from ..base import ImportContext, as_dict, as_int
from .container import model_from_uri


def _converse_block(b: Any) -> Any:
    """A Converse content block in Anthropic's block shape (so one converter serves both)."""
    if not isinstance(b, dict):
        return b
    if "text" in b:
        return {"type": "text", "text": b.get("text") or ""}
    if isinstance(b.get("toolUse"), dict):
        u = b["toolUse"]
        return {"type": "tool_use", "id": u.get("toolUseId"), "name": u.get("name"), "input": u.get("input")}
    if isinstance(b.get("toolResult"), dict):
        r = b["toolResult"]
        content = []
        for c in r.get("content") or []:
            if isinstance(c, dict) and "json" in c:
                content.append({"type": "text", "text": json.dumps(c["json"], ensure_ascii=False)})
            else:
                content.append(_converse_block(c))
        return {"type": "tool_result", "tool_use_id": r.get("toolUseId"), "content": content,
                "is_error": r.get("status") == "error"}
    for kind in ("image", "document"):
        if isinstance(b.get(kind), dict):
            x = b[kind]
            src = as_dict(x.get("source"))
            fmt = x.get("format") or ""
            media = f"image/{fmt}" if kind == "image" and fmt else fmt
            data = src.get("bytes") if isinstance(src.get("bytes"), str) else ""
            out: dict[str, Any] = {"type": kind, "source": {"type": "base64", "media_type": media, "data": data}}
            if x.get("name"):
                out["title"] = x["name"]
            return out
    if isinstance(b.get("reasoningContent"), dict):
        rc = b["reasoningContent"]
        if "redactedContent" in rc:
            return {"type": "redacted_thinking", "data": str(rc.get("redactedContent") or "")}
        rt = as_dict(rc.get("reasoningText"))
        return {"type": "thinking", "thinking": rt.get("text") or ""}
    keys = [k for k in b if k != "cachePoint"]
    return {"type": keys[0]} if keys else None


def _converse_message(m: Any) -> Any:
    if not isinstance(m, dict):
        return m
    content = m.get("content")
    if isinstance(content, list):
        content = [c for c in (_converse_block(b) for b in content) if c is not None]
    return {"role": m.get("role"), "content": content}


def converse_messages(body: dict[str, Any], ctx: ImportContext) -> list[Message]:
    """A Converse request's ``system`` and ``messages`` as Messages, in the order the model reads them."""
    system = body.get("system")
    if isinstance(system, list):
        system = [{"type": "text", "text": s["text"]} for s in system if isinstance(s, dict) and "text" in s]
    return anth.convert_messages(system, [_converse_message(m) for m in body.get("messages") or []], ctx)


def converse_params(body: dict[str, Any], uri: str) -> dict[str, Any]:
    """The Converse request parameters worth keeping (model, inference config, tools, ...)."""
    params: dict[str, Any] = {}
    model = model_from_uri(uri) or body.get("modelId")
    if model:
        params["model"] = model
    inf = body.get("inferenceConfig")
    if isinstance(inf, dict):
        params["inference_config"] = inf
        if inf.get("maxTokens") is not None:
            params["max_tokens"] = inf["maxTokens"]
    tc = body.get("toolConfig")
    if isinstance(tc, dict) and tc.get("tools"):
        params["tools"] = tc["tools"]
    for key in ("additionalModelRequestFields", "guardrailConfig", "performanceConfig"):
        if body.get(key) is not None:
            params[key] = body[key]
    return params


def usage_from_converse(u: Any) -> Usage | None:
    """Bedrock usage; like Anthropic's, inputTokens leaves out cache reads and writes."""
    if not isinstance(u, dict):
        return None
    inp = as_int(u.get("inputTokens"))
    read = as_int(u.get("cacheReadInputTokens"))
    write = as_int(u.get("cacheWriteInputTokens"))
    usage = Usage(
        prompt_tokens=None if inp is None else inp + (read or 0) + (write or 0),
        completion_tokens=as_int(u.get("outputTokens")),
        cache_read_tokens=read,
        cache_creation_tokens=write,
    )
    return None if usage.is_empty() else usage


def converse_response(resp: Any, ctx: ImportContext) -> list[Message]:
    """A Converse response's message, with the call's usage and stop reason on it."""
    if not isinstance(resp, dict):
        return []
    output = as_dict(resp.get("output"))
    message = output.get("message") if isinstance(output.get("message"), dict) else {"content": []}
    msgs = anth.convert_message({**_converse_message(message), "role": "assistant"}, ctx, tool_names={})
    if not msgs:
        return []
    meta = {**msgs[0].meta, **({"stop_reason": resp["stopReason"]} if resp.get("stopReason") else {})}
    return [replace(msgs[0], usage=usage_from_converse(resp.get("usage")), meta=meta)]
