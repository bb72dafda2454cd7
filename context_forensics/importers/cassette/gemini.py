"""Gemini / Vertex AI ``generateContent`` shapes: ``Content`` lists, parts and ``usageMetadata``.

Fields are read by their camelCase or snake_case names (REST and SDK logs differ);
``functionResponse`` parts become tool messages, thoughts become thinking parts, and inline
or file data become image and file placeholders.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from ...records import Message, ToolCall, Usage
from .._images import image_part
from ..base import ImportContext, as_int
from .container import model_from_uri

GEMINI_KEYS = ("tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent", "labels")


def usage_from_gemini(u: Any) -> Usage | None:
    """Usage from ``usageMetadata``; completion includes thoughts, as OpenAI's includes reasoning."""
    if not isinstance(u, dict):
        return None
    prompt = as_int(u.get("promptTokenCount"))
    tool_prompt = as_int(u.get("toolUsePromptTokenCount"))
    if prompt is not None and tool_prompt:
        prompt += tool_prompt  # grounding / tool results the model read
    cand = as_int(u.get("candidatesTokenCount"))
    thoughts = as_int(u.get("thoughtsTokenCount"))
    completion = None if cand is None and thoughts is None else (cand or 0) + (thoughts or 0)
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cache_read_tokens=as_int(u.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )
    return None if usage.is_empty() else usage


def _g(d: dict, camel: str) -> Any:
    """A Gemini field by its camelCase or snake_case name."""
    if camel in d:
        return d[camel]
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
    return d.get(snake)


def _gemini_blob(p: dict, kind: str) -> dict:
    blob = _g(p, kind) if isinstance(_g(p, kind), dict) else {}
    mime = _g(blob, "mimeType") or ""
    if kind == "inlineData":
        if mime.startswith("image/"):
            return image_part(base64_data=blob.get("data"), media_type=mime)
        part = {"type": "file", "media_type": mime}
        if isinstance(blob.get("data"), str):
            part["bytes"] = len(blob["data"]) * 3 // 4
        return part
    uri = _g(blob, "fileUri")
    if mime.startswith("image/"):
        return image_part(url=uri, media_type=mime)
    return {"type": "file", "media_type": mime, "url": uri}


def _function_response_text(resp: Any) -> str:
    if isinstance(resp, dict) and len(resp) == 1:
        (only,) = resp.values()
        if isinstance(only, str):
            return only
    if isinstance(resp, str):
        return resp
    return json.dumps(resp, ensure_ascii=False)


def gemini_content(c: Any, ctx: ImportContext) -> list[Message]:
    """One Gemini ``Content`` -> Messages (function responses become tool messages)."""
    if isinstance(c, str):
        return [Message(role="user", text=c)]
    if not isinstance(c, dict):
        ctx.skip("malformed content")
        return []
    role = str(c.get("role") or "user").lower()
    parts = c.get("parts") or []
    if isinstance(parts, dict):
        parts = [parts]
    texts: list[str] = []
    extra: list[dict] = []
    calls: list[ToolCall] = []
    tools: list[Message] = []
    for p in parts:
        if isinstance(p, str):
            texts.append(p)
            continue
        if not isinstance(p, dict):
            continue
        fc = _g(p, "functionCall")
        fr = _g(p, "functionResponse")
        if isinstance(fc, dict):
            calls.append(ToolCall(name=str(fc.get("name") or ""), arguments=json.dumps(fc.get("args") or {},
                                  ensure_ascii=False), id=fc.get("id")))
        elif isinstance(fr, dict):
            tools.append(Message(role="tool", text=_function_response_text(fr.get("response")),
                                 name=fr.get("name"), tool_call_id=fr.get("id")))
        elif "text" in p:
            if p.get("thought"):
                extra.append({"type": "thinking", "text": str(p.get("text") or "")})
            else:
                texts.append(str(p.get("text") or ""))
        elif _g(p, "inlineData") is not None:
            extra.append(_gemini_blob(p, "inlineData"))
        elif _g(p, "fileData") is not None:
            extra.append(_gemini_blob(p, "fileData"))
        elif isinstance(_g(p, "executableCode"), dict):
            code = _g(p, "executableCode")
            extra.append({"type": "executable_code", "language": code.get("language"), "text": code.get("code")})
        elif isinstance(_g(p, "codeExecutionResult"), dict):
            res = _g(p, "codeExecutionResult")
            extra.append({"type": "code_execution_result", "outcome": res.get("outcome"), "text": res.get("output")})
        else:
            keys = [k for k in p if k not in ("thoughtSignature", "thought_signature")]
            if keys:
                extra.append({"type": keys[0]})
    if role in ("model", "assistant"):
        return [Message(role="assistant", text="".join(texts), tool_calls=tuple(calls), parts=tuple(extra))]
    out = tools
    if texts or extra or not tools:
        out = out + [Message(role="system" if role == "system" else "user", text="\n".join(texts),
                             parts=tuple(extra))]
    return out


def gemini_messages(body: dict[str, Any], ctx: ImportContext) -> list[Message]:
    """A ``generateContent`` request's system instruction and contents as Messages."""
    out: list[Message] = []
    sys = _g(body, "systemInstruction")
    if isinstance(sys, str) and sys:
        out.append(Message(role="system", text=sys))
    elif isinstance(sys, dict):
        out.extend(replace(m, role="system") for m in gemini_content({**sys, "role": "user"}, ctx))
    contents = body.get("contents")
    if isinstance(contents, dict):
        contents = [contents]
    for c in contents if isinstance(contents, list) else [contents] if isinstance(contents, str) else []:
        out.extend(gemini_content(c, ctx))
    return out


def gemini_response(resp: Any, ctx: ImportContext) -> list[Message]:
    """The first candidate of a ``GenerateContentResponse``, with the call's usage on it."""
    if not isinstance(resp, dict):
        return []
    cands = resp.get("candidates") or []
    c0 = cands[0] if cands and isinstance(cands[0], dict) else {}
    content = c if isinstance(c := c0.get("content"), dict) else {"parts": []}
    msgs = gemini_content({**content, "role": "model"}, ctx)
    m = msgs[0]
    meta: dict[str, Any] = {}
    if _g(c0, "finishReason") is not None:
        meta["finish_reason"] = _g(c0, "finishReason")
    if _g(resp, "responseId"):
        meta["response_id"] = _g(resp, "responseId")
    fb = _g(resp, "promptFeedback")
    if isinstance(fb, dict) and fb.get("blockReason") is not None:
        meta["block_reason"] = fb["blockReason"]
    model = _g(resp, "modelVersion")
    return [replace(m, usage=usage_from_gemini(_g(resp, "usageMetadata")), model=model if isinstance(model, str)
                    else None, timestamp=_g(resp, "createTime"), meta=meta)]


def gemini_params(body: dict[str, Any], uri: str) -> dict[str, Any]:
    """The request parameters worth keeping: tools, generation config (its maxOutputTokens as
    ``max_tokens``), safety settings, ..., and the model from the URI or the body."""
    params: dict[str, Any] = {}
    for key in GEMINI_KEYS:
        v = _g(body, key)
        if v is not None:
            params[key] = v
    gc = _g(body, "generationConfig")
    if isinstance(gc, dict) and _g(gc, "maxOutputTokens") is not None:
        params["max_tokens"] = _g(gc, "maxOutputTokens")
    model = model_from_uri(uri) or body.get("model")
    if model:
        params["model"] = model
    return params
