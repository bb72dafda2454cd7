"""Streamed answers reassembled into the one response each API returns unstreamed.

Chat Completions chunks, Messages API events, Responses API events, Gemini
``streamGenerateContent`` chunks, Ollama NDJSON and Bedrock ConverseStream events each become
the response object their API's converter reads: text, tool calls (arguments joined from their
deltas), reasoning and usage included.
"""

from __future__ import annotations

import json
from typing import Any

from .._json import parse_json
from ..base import as_dict, as_int


def assemble_openai_chat(chunks: list[Any]) -> dict[str, Any]:
    """Chat Completions stream chunks -> one ``chat.completion`` dict."""
    out: dict[str, Any] = {"object": "chat.completion"}
    content: list[str] = []
    refusal: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict] = {}
    fn_call: dict[str, str] | None = None
    role, finish, usage = "assistant", None, None
    for ch in chunks:
        if not isinstance(ch, dict):
            continue
        for key in ("id", "model", "created", "system_fingerprint"):
            if ch.get(key) and key not in out:
                out[key] = ch[key]
        if isinstance(ch.get("usage"), dict):
            usage = ch["usage"]
        for c in ch.get("choices") or []:
            if not isinstance(c, dict) or c.get("index", 0) != 0:
                continue
            d = delta if isinstance(delta := c.get("delta"), dict) else c.get("message") or {}
            role = d.get("role") or role
            if isinstance(d.get("content"), str):
                content.append(d["content"])
            if isinstance(d.get("refusal"), str):
                refusal.append(d["refusal"])
            r = d.get("reasoning_content", d.get("reasoning"))
            if isinstance(r, str):
                reasoning.append(r)
            for tc in d.get("tool_calls") or []:
                if not isinstance(tc, dict):
                    continue
                slot = calls.setdefault(as_int(tc.get("index")) or 0 if "index" in tc else len(calls),
                                        {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                if tc.get("id"):
                    slot["id"] = tc["id"]
                fn = as_dict(tc.get("function"))
                if fn.get("name") and not slot["function"]["name"]:
                    slot["function"]["name"] = fn["name"]
                if isinstance(fn.get("arguments"), str):
                    slot["function"]["arguments"] += fn["arguments"]
            if isinstance(d.get("function_call"), dict):
                fn_call = fn_call or {"name": "", "arguments": ""}
                fn_call["name"] = fn_call["name"] or d["function_call"].get("name") or ""
                fn_call["arguments"] += d["function_call"].get("arguments") or ""
            finish = c.get("finish_reason") or finish
    message: dict[str, Any] = {"role": role, "content": "".join(content) if content else None}
    if refusal:
        message["refusal"] = "".join(refusal)
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    if fn_call:
        message["function_call"] = fn_call
    out["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
    if usage is not None:
        out["usage"] = usage
    return out


def assemble_anthropic(events: list[Any]) -> dict[str, Any]:
    """Messages API stream events -> one message dict with content blocks and merged usage."""
    msg: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    blocks: dict[int, dict] = {}
    partial: dict[int, list[str]] = {}
    for ev in events:
        if not isinstance(ev, dict):
            continue
        t = ev.get("type")
        if t == "message_start" and isinstance(ev.get("message"), dict):
            m = ev["message"]
            msg.update({k: v for k, v in m.items() if k not in ("content", "usage")})
            usage.update({k: v for k, v in (m.get("usage") or {}).items() if v is not None})
            for i, b in enumerate(m.get("content") or []):
                if isinstance(b, dict):
                    blocks[i] = dict(b)
        elif t == "content_block_start" and isinstance(ev.get("content_block"), dict):
            idx = as_int(ev.get("index"))
            idx = len(blocks) if idx is None else idx
            blocks[idx] = dict(ev["content_block"])
        elif t == "content_block_delta" and isinstance(ev.get("delta"), dict):
            idx = as_int(ev.get("index")) or 0
            b = blocks.setdefault(idx, {"type": "text", "text": ""})
            d = ev["delta"]
            dt = d.get("type")
            if dt == "text_delta":
                b["text"] = str(b.get("text") or "") + str(d.get("text") or "")
            elif dt == "input_json_delta":
                partial.setdefault(idx, []).append(str(d.get("partial_json") or ""))
            elif dt == "thinking_delta":
                b["thinking"] = str(b.get("thinking") or "") + str(d.get("thinking") or "")
            elif dt == "signature_delta":
                b["signature"] = d.get("signature")
            elif dt == "citations_delta":
                b.setdefault("citations", []).append(d.get("citation"))
        elif t == "message_delta":
            if isinstance(ev.get("delta"), dict):
                msg.update({k: v for k, v in ev["delta"].items() if v is not None})
            if isinstance(ev.get("usage"), dict):
                usage.update({k: v for k, v in ev["usage"].items() if v is not None})
        elif t == "error":
            msg["error"] = ev.get("error")
    for idx, pieces in partial.items():
        raw = "".join(pieces)
        if raw.strip():
            try:
                blocks[idx]["input"] = parse_json(raw)
            except json.JSONDecodeError:
                blocks[idx]["input"] = raw  # a cut-off stream: keep the raw argument text
    msg["content"] = [blocks[i] for i in sorted(blocks)]
    msg.setdefault("role", "assistant")
    if usage:
        msg["usage"] = usage
    return msg


def assemble_responses(events: list[Any]) -> dict[str, Any]:
    """Responses API stream events -> the final response object."""
    final: dict | None = None
    base: dict = {}
    items: dict[int, Any] = {}
    for ev in events:
        if not isinstance(ev, dict):
            continue
        t = str(ev.get("type") or "")
        if t in ("response.completed", "response.incomplete", "response.failed", "response.done"):
            if isinstance(ev.get("response"), dict):
                final = ev["response"]
        elif t in ("response.created", "response.in_progress") and isinstance(ev.get("response"), dict):
            base = ev["response"]
        elif t == "response.output_item.done" and isinstance(ev.get("item"), dict):
            idx = as_int(ev.get("output_index"))
            items[len(items) if idx is None else idx] = ev["item"]
        elif ev.get("object") == "response":  # a stream that sends whole responses
            final = ev
    out = dict(final or base)
    if not out.get("output") and items:
        out["output"] = [items[i] for i in sorted(items)]
    return out


def assemble_gemini(chunks: list[Any]) -> dict[str, Any]:
    """``streamGenerateContent`` chunks -> one GenerateContentResponse (first candidate)."""
    parts: list[dict] = []
    out: dict[str, Any] = {}
    finish = None
    for ch in chunks:
        if not isinstance(ch, dict):
            continue
        cands = ch.get("candidates") or []
        if cands and isinstance(cands[0], dict):
            content = as_dict(cands[0].get("content"))
            for p in content.get("parts") or []:
                if not isinstance(p, dict):
                    continue
                prev = parts[-1] if parts else None
                if (
                    prev is not None and "text" in p and "text" in prev
                    and bool(p.get("thought")) == bool(prev.get("thought"))
                    and set(p) <= {"text", "thought", "thoughtSignature"}
                ):
                    prev["text"] = str(prev["text"]) + str(p["text"])
                    if p.get("thoughtSignature"):
                        prev["thoughtSignature"] = p["thoughtSignature"]
                else:
                    parts.append(dict(p))
            finish = cands[0].get("finishReason") or finish
        for key in ("usageMetadata", "modelVersion", "responseId", "createTime", "promptFeedback"):
            if ch.get(key):
                out[key] = ch[key]
    out["candidates"] = [{"content": {"role": "model", "parts": parts}, "finishReason": finish}]
    return out


def assemble_ollama(chunks: list[Any]) -> dict[str, Any]:
    """Ollama ``/api/chat`` NDJSON chunks -> one response with the final counts."""
    out: dict[str, Any] = {}
    content: list[str] = []
    thinking: list[str] = []
    calls: list[Any] = []
    for ch in chunks:
        if not isinstance(ch, dict):
            continue
        m = as_dict(ch.get("message"))
        if isinstance(m.get("content"), str):
            content.append(m["content"])
        if isinstance(m.get("thinking"), str):
            thinking.append(m["thinking"])
        calls.extend(m.get("tool_calls") or [])
        out.update({k: v for k, v in ch.items() if k != "message"})
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    if calls:
        message["tool_calls"] = calls
    out["message"] = message
    return out


def assemble_converse(events: list[Any]) -> dict[str, Any]:
    """ConverseStream (or Nova stream) events -> one Converse response."""
    blocks: dict[int, dict] = {}
    partial: dict[int, list[str]] = {}
    out: dict[str, Any] = {}
    role = "assistant"
    for ev in events:
        if not isinstance(ev, dict):
            continue
        for key, v in ev.items():
            if not isinstance(v, dict):
                continue
            idx = as_int(v.get("contentBlockIndex")) or 0
            if key == "messageStart":
                role = v.get("role") or role
            elif key == "contentBlockStart":
                start = as_dict(v.get("start"))
                if isinstance(start.get("toolUse"), dict):
                    blocks[idx] = {"toolUse": {**start["toolUse"], "input": {}}}
            elif key == "contentBlockDelta":
                d = as_dict(v.get("delta"))
                if "text" in d:
                    b = blocks.setdefault(idx, {"text": ""})
                    b["text"] = str(b.get("text") or "") + str(d["text"] or "")
                elif isinstance(d.get("toolUse"), dict):
                    blocks.setdefault(idx, {"toolUse": {"input": {}}})
                    partial.setdefault(idx, []).append(str(d["toolUse"].get("input") or ""))
                elif isinstance(d.get("reasoningContent"), dict):
                    rc = d["reasoningContent"]
                    b = blocks.setdefault(idx, {"reasoningContent": {"reasoningText": {"text": ""}}})
                    if "redactedContent" in rc:
                        b["reasoningContent"] = {"redactedContent": rc["redactedContent"]}
                    elif "text" in rc and "reasoningText" in b["reasoningContent"]:
                        b["reasoningContent"]["reasoningText"]["text"] += str(rc["text"] or "")
            elif key == "messageStop":
                out["stopReason"] = v.get("stopReason")
            elif key == "metadata":
                out["usage"] = v.get("usage")
            elif key.endswith("Exception"):
                out["error"] = v
    for idx, pieces in partial.items():
        raw = "".join(pieces)
        if raw.strip() and "toolUse" in blocks[idx]:
            try:
                blocks[idx]["toolUse"]["input"] = parse_json(raw)
            except json.JSONDecodeError:
                blocks[idx]["toolUse"]["input"] = raw
    out["output"] = {"message": {"role": role, "content": [blocks[i] for i in sorted(blocks)]}}
    return out
