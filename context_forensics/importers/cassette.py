"""VCR.py / pytest-recording cassettes of LLM API calls (also Ruby VCR and JSON cassettes).

Each recorded interaction is one model call: its request body is the exact context the model
read, and its response carries the recorded usage. Supported endpoints: OpenAI
``/chat/completions``, ``/responses`` and legacy ``/completions``; Anthropic ``/v1/messages``
(also via Bedrock ``invoke`` / Vertex ``rawPredict`` with an Anthropic body); Gemini / Vertex
``generateContent`` and ``streamGenerateContent``; Bedrock ``converse`` / ``converse-stream``
(and Nova ``invoke``); Ollama ``/api/chat``. Other interactions (auth, model listing, token
counting, embeddings) are skipped and counted, as are model APIs with other native bodies.

Bodies may be plain strings, ``!!binary`` base64 (often gzip: the magic bytes decide), or
``{"string": ...}``; streamed responses (SSE ``data:`` lines, Gemini JSON arrays, Ollama
NDJSON, AWS binary event streams) are reassembled into one response, text, tool calls and
usage included. A call whose answer was not recorded (an empty stream body) is kept without
usage and takes its answer from the next request that re-sends it.

Session layout: a call whose request repeats an earlier call's request plus that call's answer
(a tool-use chain, a multi-turn chat) continues that call's session; any other call starts a
new one. The first message a call produced carries its usage, ``meta["call_index"]`` (the
interaction's position in the cassette) and ``meta["request"]`` (endpoint, model, tools,
max_tokens, ...), and every message before it in the session is exactly that call's request
context. Where a later request re-sends an earlier answer, the session keeps the re-sent form
(what the model read from then on) and notes a differing recorded answer in
``meta["recorded_response"]``.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
import struct
import zlib
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote, urlsplit

from ..errors import InputError
from ..records import Message, Session, ToolCall, Usage
from . import anthropic_messages as anth
from . import openai_chat as oai
from . import openai_responses as resp_api
from .base import ImportContext, Importer, as_int, decode, head_text, image_part, register
from ._sniffing import partial_json

# ---------------------------------------------------------------- YAML / body decoding


def _yaml_loader() -> type:
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]
        """Safe loading; old cassettes' ``!!python/unicode`` style tags read as plain values."""

    def _python_tag(loader: Any, suffix: str, node: Any) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return loader.construct_scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_mapping(node, deep=True)

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", _python_tag)
    return Loader


def load_cassette(path: Path, ctx: ImportContext) -> Any:
    """The cassette document (YAML or JSON); errors name the file and line."""
    data = path.read_bytes()
    if not data.strip():
        raise InputError("file is empty", where=str(path), hint="nothing to ingest; check the cassette")
    text = decode(data, ctx)
    if text.lstrip()[:1] in "{[":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass  # YAML is a superset of JSON; let the YAML parser report the error
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        raise InputError(f"malformed YAML: {getattr(e, 'problem', None) or e}", where=where,
                         hint="the cassette must be valid YAML; check it was fully written") from None


def _headers(h: Any) -> dict[str, str]:
    """Lower-cased header names -> first value (VCR stores lists of values)."""
    out: dict[str, str] = {}
    if isinstance(h, dict):
        for k, v in h.items():
            if isinstance(v, list):
                v = v[0] if v else ""
            if isinstance(v, bytes):  # botocore cassettes store some headers as !!binary
                v = v.decode("utf-8", errors="replace")
            out[str(k).lower()] = str(v)
    return out


def body_bytes(body: Any) -> bytes | None:
    """The raw bytes of a recorded body, whatever way the cassette stored it."""
    if body is None:
        return None
    if isinstance(body, dict):
        if "string" in body:
            body = body["string"]
        elif "base64_string" in body:
            try:
                return base64.b64decode(str(body["base64_string"]))
            except (binascii.Error, ValueError):
                return None
        else:  # a cassette that stored the JSON itself
            return json.dumps(body).encode()
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8", errors="replace")
    if isinstance(body, list):
        return json.dumps(body).encode()
    return str(body).encode()


def decompress(data: bytes, encoding: str, ctx: ImportContext, what: str) -> bytes | None:
    """Undo gzip (by magic bytes), deflate, brotli or zstd; None with a warning if impossible."""
    enc = encoding.lower().strip()
    try:
        if data[:2] == b"\x1f\x8b":
            out, rest = b"", data
            while rest[:2] == b"\x1f\x8b":  # concatenated gzip members
                d = zlib.decompressobj(31)
                out += d.decompress(rest) + d.flush()
                rest = d.unused_data
            return out
        if enc == "deflate":
            try:
                return zlib.decompress(data)
            except zlib.error:
                return zlib.decompress(data, -15)
        if enc in ("br", "zstd"):
            return _optional_decompress(data, enc, ctx, what)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        ctx.warn(f"{what}: cannot decompress body ({e}); body ignored")
        return None
    return data


def _optional_decompress(data: bytes, enc: str, ctx: ImportContext, what: str) -> bytes | None:
    """Brotli / zstd need optional modules; a body the recorder already decoded passes through."""
    try:
        if enc == "br":
            import brotli  # type: ignore[import-not-found]

            return brotli.decompress(data)
        import zstandard  # type: ignore[import-not-found]

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 (the codecs raise their own error types)
        pass
    try:
        data.decode("utf-8")
        return data  # plain text already: the recorder decoded it but kept the header
    except UnicodeDecodeError:
        ctx.warn(f"{what}: {enc}-compressed body that cannot be decoded here; body ignored")
        return None


def parse_sse(text: str) -> list[Any]:
    """The JSON payloads of a server-sent-event stream (``[DONE]`` and pings dropped)."""
    events: list[Any] = []
    data: list[str] = []

    def flush() -> None:
        if not data:
            return
        joined = "\n".join(data)
        data.clear()
        if joined.strip() in ("", "[DONE]"):
            return
        try:
            events.append(json.loads(joined))
            return
        except json.JSONDecodeError:
            pass
        for piece in joined.split("\n"):  # several payloads without blank lines between
            try:
                events.append(json.loads(piece))
            except json.JSONDecodeError:
                continue

    for line in text.splitlines():
        if not line.strip():
            flush()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif line.startswith("event:"):
            flush()
    flush()
    return events


def _looks_sse(text: str) -> bool:
    start = text.lstrip()[:200]
    return start.startswith(("data:", "event:", ":", "id:", "retry:")) and "data:" in text


# ---------------------------------------------------------------- stream reassembly


def assemble_openai_chat(chunks: list[Any]) -> dict:
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
            d = c.get("delta") if isinstance(c.get("delta"), dict) else c.get("message") or {}
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
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
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


def assemble_anthropic(events: list[Any]) -> dict:
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
                blocks[idx]["input"] = json.loads(raw)
            except json.JSONDecodeError:
                blocks[idx]["input"] = raw  # a cut-off stream: keep the raw argument text
    msg["content"] = [blocks[i] for i in sorted(blocks)]
    msg.setdefault("role", "assistant")
    if usage:
        msg["usage"] = usage
    return msg


def assemble_responses(events: list[Any]) -> dict:
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


def assemble_gemini(chunks: list[Any]) -> dict:
    """``streamGenerateContent`` chunks -> one GenerateContentResponse (first candidate)."""
    parts: list[dict] = []
    out: dict[str, Any] = {}
    finish = None
    for ch in chunks:
        if not isinstance(ch, dict):
            continue
        cands = ch.get("candidates") or []
        if cands and isinstance(cands[0], dict):
            content = cands[0].get("content") if isinstance(cands[0].get("content"), dict) else {}
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


def assemble_ollama(chunks: list[Any]) -> dict:
    """Ollama ``/api/chat`` NDJSON chunks -> one response with the final counts."""
    out: dict[str, Any] = {}
    content: list[str] = []
    thinking: list[str] = []
    calls: list[Any] = []
    for ch in chunks:
        if not isinstance(ch, dict):
            continue
        m = ch.get("message") if isinstance(ch.get("message"), dict) else {}
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


# ---------------------------------------------------------------- Bedrock


def _is_eventstream(data: bytes) -> bool:
    """An AWS event-stream body: a binary prelude whose total length fits the data."""
    if len(data) < 16 or data[:1] in (b"{", b"[", b"d", b"e"):
        return False
    total, hlen = struct.unpack(">II", data[:8])
    return 16 <= total <= len(data) and hlen < total


def parse_eventstream(data: bytes) -> list[tuple[dict[str, Any], bytes]]:
    """AWS ``application/vnd.amazon.eventstream`` frames -> (headers, payload) pairs."""
    frames: list[tuple[dict[str, Any], bytes]] = []
    i = 0
    while i + 16 <= len(data):
        total, hlen = struct.unpack(">II", data[i : i + 8])
        if total < 16 or i + total > len(data):
            break
        raw = data[i + 12 : i + 12 + hlen]
        headers: dict[str, Any] = {}
        j = 0
        while j < len(raw):
            n = raw[j]
            name = raw[j + 1 : j + 1 + n].decode("utf-8", errors="replace")
            j += 1 + n
            if j >= len(raw):
                break
            t = raw[j]
            j += 1
            if t in (6, 7):  # bytes, string: 2-byte length
                (vlen,) = struct.unpack(">H", raw[j : j + 2])
                value: Any = raw[j + 2 : j + 2 + vlen]
                headers[name] = value.decode("utf-8", errors="replace") if t == 7 else value
                j += 2 + vlen
            elif t in (0, 1):
                headers[name] = t == 0
            else:
                size = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}.get(t)
                if size is None:
                    break
                j += size
        frames.append((headers, data[i + 12 + hlen : i + total - 4]))
        i += total
    return frames


def bedrock_stream_events(data: bytes) -> list[Any]:
    """Event-stream frames -> event dicts: Anthropic events (base64 ``bytes`` chunks of
    InvokeModelWithResponseStream) or ``{event_type: payload}`` (ConverseStream, Nova)."""
    events: list[Any] = []
    for headers, payload in parse_eventstream(data):
        try:
            body = json.loads(payload.decode("utf-8", errors="replace")) if payload else {}
        except json.JSONDecodeError:
            continue
        if isinstance(body, dict) and isinstance(body.get("bytes"), str):
            try:
                body = json.loads(base64.b64decode(body["bytes"]))
            except (binascii.Error, ValueError):
                continue
            events.append(body)
            continue
        etype = headers.get(":event-type") or headers.get(":exception-type")
        if isinstance(body, dict) and "type" not in body and etype and etype not in body:
            events.append({etype: body})
        else:
            events.append(body)
    return events


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
            src = x.get("source") if isinstance(x.get("source"), dict) else {}
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
        rt = rc.get("reasoningText") if isinstance(rc.get("reasoningText"), dict) else {}
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


def converse_messages(body: dict, ctx: ImportContext) -> list[Message]:
    system = body.get("system")
    if isinstance(system, list):
        system = [{"type": "text", "text": s["text"]} for s in system if isinstance(s, dict) and "text" in s]
    return anth.convert_messages(system, [_converse_message(m) for m in body.get("messages") or []], ctx)


def converse_params(body: dict, uri: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    model = _model_from_path(uri) or body.get("modelId")
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


def assemble_converse(events: list[Any]) -> dict:
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
                start = v.get("start") if isinstance(v.get("start"), dict) else {}
                if isinstance(start.get("toolUse"), dict):
                    blocks[idx] = {"toolUse": {**start["toolUse"], "input": {}}}
            elif key == "contentBlockDelta":
                d = v.get("delta") if isinstance(v.get("delta"), dict) else {}
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
                blocks[idx]["toolUse"]["input"] = json.loads(raw)
            except json.JSONDecodeError:
                blocks[idx]["toolUse"]["input"] = raw
    out["output"] = {"message": {"role": role, "content": [blocks[i] for i in sorted(blocks)]}}
    return out


def converse_response(resp: Any, ctx: ImportContext) -> list[Message]:
    if not isinstance(resp, dict):
        return []
    output = resp.get("output") if isinstance(resp.get("output"), dict) else {}
    message = output.get("message") if isinstance(output.get("message"), dict) else {"content": []}
    msgs = anth.convert_message({**_converse_message(message), "role": "assistant"}, ctx, tool_names={})
    if not msgs:
        return []
    meta = {**msgs[0].meta, **({"stop_reason": resp["stopReason"]} if resp.get("stopReason") else {})}
    return [replace(msgs[0], usage=usage_from_converse(resp.get("usage")), meta=meta)]


# ---------------------------------------------------------------- Gemini


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


def gemini_messages(body: dict, ctx: ImportContext) -> list[Message]:
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
    if not isinstance(resp, dict):
        return []
    cands = resp.get("candidates") or []
    c0 = cands[0] if cands and isinstance(cands[0], dict) else {}
    content = c0.get("content") if isinstance(c0.get("content"), dict) else {"parts": []}
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


# ---------------------------------------------------------------- interactions -> calls

GEMINI_KEYS = ("tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent", "labels")


@dataclass
class Call:
    """One recorded model call: the request context, the answer, and what to keep about it."""

    index: int  # position of the interaction in the cassette
    endpoint: str
    request: list[Message]
    response: list[Message]
    params: dict[str, Any]
    response_id: str | None = None
    previous_response_id: str | None = None
    timestamp: str | None = None
    instructions: str | None = None


def _endpoint(method: str, uri: str, body: Any) -> tuple[str | None, str]:
    """(the kind of model call, or None; the skip reason when None)."""
    path = urlsplit(uri).path.rstrip("/")
    if method and method.upper() != "POST" or not isinstance(body, dict):
        return None, "non-LLM interaction"
    if path.endswith("/chat/completions") and isinstance(body.get("messages"), list):
        return "openai_chat", ""
    if path.endswith("/responses") and ("input" in body or "instructions" in body):
        return "openai_responses", ""
    if path.endswith("/count_tokens") or ":countTokens" in path:
        return None, "non-LLM interaction"
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini", ""
    messages = isinstance(body.get("messages"), list)
    if messages and (path.endswith("/messages") or "anthropic_version" in body):
        return "anthropic", ""  # the Messages API, or Claude on Bedrock / Vertex
    if messages and path.endswith(("/converse", "/converse-stream")):
        return "bedrock_converse", ""
    if path.endswith(("/invoke", "/invoke-with-response-stream")):
        if messages and body.get("schemaVersion") == "messages-v1":
            return "bedrock_converse", ""  # Amazon Nova speaks the Converse shapes
        return None, "unsupported model API"  # Titan, Llama, Cohere, ... native bodies
    if path.endswith("/api/chat") and messages:
        return "ollama", ""
    if path.endswith("/completions") and "prompt" in body:
        return "openai_completions", ""
    if isinstance(body.get("contents"), list):
        return "gemini", ""
    return None, "non-LLM interaction"


def _model_from_path(uri: str) -> str | None:
    m = re.search(r"/models/([^/:?]+)", urlsplit(uri).path)
    if m:
        return m.group(1)
    m = re.search(r"/model/([^/]+)/(?:invoke|converse)", urlsplit(uri).path)  # Bedrock
    if m:
        return unquote(m.group(1))
    m = re.search(r"/deployments/([^/]+)/", urlsplit(uri).path)  # Azure OpenAI
    return m.group(1) if m else None


def _date_iso(headers: dict[str, str], recorded_at: Any) -> str | None:
    value = headers.get("date") or (recorded_at if isinstance(recorded_at, str) else None)
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).isoformat().replace("+00:00", "Z")
    except (TypeError, ValueError, IndexError):
        return None


def _json_or_stream(text: str) -> tuple[Any, list[Any] | None]:
    """(a JSON document, or None; the stream payloads, or None)."""
    stripped = text.strip()
    if not stripped:
        return None, None
    if _looks_sse(stripped):
        return None, parse_sse(stripped)
    try:
        return json.loads(stripped), None
    except json.JSONDecodeError:
        pass
    chunks = []
    for line in stripped.splitlines():  # NDJSON (Ollama)
        line = line.strip()
        if not line:
            continue
        try:
            chunks.append(json.loads(line))
        except json.JSONDecodeError:
            return None, None
    return None, chunks or None


def _ollama_images(m: Any) -> Any:
    if not isinstance(m, dict) or not isinstance(m.get("images"), list):
        return m
    parts: list[Any] = [{"type": "text", "text": m["content"]}] if isinstance(m.get("content"), str) else []
    parts += [{"type": "image_url", "image_url": {"url": "data:;base64," + i}} for i in m["images"]
              if isinstance(i, str)]
    return {**m, "content": parts}


def _request_of(kind: str, body: dict, uri: str, ctx: ImportContext) -> tuple[list[Message], dict[str, Any]]:
    if kind in ("openai_chat", "ollama"):
        raw_msgs = body["messages"]
        if kind == "ollama":  # images ride on the message as base64 strings
            raw_msgs = [_ollama_images(m) for m in raw_msgs]
        msgs = oai.convert_messages(raw_msgs, ctx)
        params = oai.request_params(body)
        if kind == "ollama" and isinstance(body.get("options"), dict):
            params["options"] = body["options"]
        return msgs, params
    if kind == "openai_completions":
        prompt = body.get("prompt")
        text = prompt if isinstance(prompt, str) else "\n".join(str(p) for p in prompt) if isinstance(prompt, list) \
            else json.dumps(prompt)
        return [Message(role="user", text=text)], oai.request_params(body)
    if kind == "openai_responses":
        return resp_api.request_messages(body, ctx), oai.request_params(body)
    if kind == "anthropic":
        params = anth.request_params(body)
        model = params.get("model") or _model_from_path(uri)
        return anth.convert_messages(body.get("system"), body["messages"], ctx), {
            **params, **({"model": model} if model else {})}
    if kind == "bedrock_converse":
        return converse_messages(body, ctx), converse_params(body, uri)
    params: dict[str, Any] = {}
    for key in GEMINI_KEYS:
        v = _g(body, key)
        if v is not None:
            params[key] = v
    gc = _g(body, "generationConfig")
    if isinstance(gc, dict) and _g(gc, "maxOutputTokens") is not None:
        params["max_tokens"] = _g(gc, "maxOutputTokens")
    model = _model_from_path(uri) or body.get("model")
    if model:
        params["model"] = model
    return gemini_messages(body, ctx), params


def _response_of(kind: str, doc: Any, stream: list[Any] | None, ctx: ImportContext) -> list[Message]:
    if kind in ("openai_chat", "openai_completions"):
        resp = assemble_openai_chat(stream) if stream is not None else doc
        return oai.convert_response(resp, ctx)
    if kind == "openai_responses":
        resp = assemble_responses(stream) if stream is not None else doc
        return resp_api.convert_response(resp, ctx)
    if kind == "anthropic":
        resp = assemble_anthropic(stream) if stream is not None else doc
        return anth.convert_response(resp, ctx)
    if kind == "bedrock_converse":
        resp = assemble_converse(stream) if stream is not None else doc
        return converse_response(resp, ctx)
    if kind == "ollama":
        resp = assemble_ollama(stream) if stream is not None else doc
        if not isinstance(resp, dict):
            return []
        msgs = oai.convert_messages([{**(resp.get("message") or {}), "role": "assistant"}], ctx)
        usage = Usage(prompt_tokens=as_int(resp.get("prompt_eval_count")),
                      completion_tokens=as_int(resp.get("eval_count")))
        return [replace(msgs[0], usage=None if usage.is_empty() else usage, model=resp.get("model"),
                        timestamp=resp.get("created_at"))] if msgs else []
    if stream is not None:
        doc = assemble_gemini(stream)
    elif isinstance(doc, list):
        doc = assemble_gemini(doc)
    return gemini_response(doc, ctx)


def _interactions(doc: Any, path: Path) -> tuple[list[dict], dict[str, Any]]:
    if not isinstance(doc, dict):
        raise InputError("expected a cassette with an 'interactions' list", where=str(path),
                         hint="force another format with --format")
    items = doc.get("interactions")
    if items is None:
        items = doc.get("http_interactions")  # Ruby VCR
    if not isinstance(items, list):
        raise InputError("expected a cassette with an 'interactions' list", where=str(path),
                         hint="force another format with --format")
    info = {k: doc[k] for k in ("version", "recorded_with") if isinstance(doc.get(k), (str, int))}
    return items, info


def read_calls(path: Path, ctx: ImportContext) -> tuple[list[Call], dict[str, Any]]:
    """Every model call in a cassette, in recorded order (other interactions are counted)."""
    items, info = _interactions(load_cassette(path, ctx), path)
    calls: list[Call] = []
    for i, it in enumerate(items):
        what = f"interaction {i}"
        if not isinstance(it, dict) or not isinstance(it.get("request"), dict):
            ctx.warn(f"{what} has no request; skipped")
            ctx.skip("malformed interaction")
            continue
        req = it["request"]
        res = it.get("response") if isinstance(it.get("response"), dict) else {}
        uri = str(req.get("uri") or req.get("url") or "")
        method = str(req.get("method") or "POST")
        rh, sh = _headers(req.get("headers")), _headers(res.get("headers"))
        raw = body_bytes(req.get("body"))
        body: Any = None
        if raw:
            raw = decompress(raw, rh.get("content-encoding", ""), ctx, what)
            if raw:
                try:
                    body = json.loads(decode(raw, ctx))
                except json.JSONDecodeError:
                    body = None
        kind, reason = _endpoint(method, uri, body)
        if kind is None:
            ctx.skip(reason)
            continue
        status = res.get("status")
        code = as_int(status.get("code")) if isinstance(status, dict) else as_int(status)
        if code is None:
            code = as_int(res.get("code")) or as_int(res.get("status_code"))
        if code is not None and code >= 400:
            ctx.warn(f"{what}: {kind} call failed with HTTP {code}; skipped")
            ctx.skip("failed call")
            continue
        request, params = _request_of(kind, body, uri, ctx)
        params = {"endpoint": urlsplit(uri).path or uri, **params}
        if kind == "gemini" and "stream" not in params and ":streamGenerateContent" in uri:
            params["stream"] = True
        rraw = body_bytes(res.get("body"))
        doc, stream = None, None
        if rraw:
            rraw = decompress(rraw, sh.get("content-encoding", ""), ctx, what)
            if rraw and ("eventstream" in sh.get("content-type", "") or _is_eventstream(rraw)):
                stream = bedrock_stream_events(rraw)
            elif rraw:
                doc, stream = _json_or_stream(decode(rraw, ctx))
        if isinstance(doc, dict) and (doc.get("error") or (kind == "bedrock_converse" and "message" in doc
                                                         and "output" not in doc)) and not (
            doc.get("choices") or doc.get("content") or doc.get("output") or doc.get("candidates")
        ):
            ctx.warn(f"{what}: {kind} call returned an error; skipped")
            ctx.skip("failed call")
            continue
        response = _response_of(kind, doc, stream, ctx) if doc is not None or stream is not None else []
        if not response:
            ctx.warn(f"{what}: response body is empty or unreadable; the call is kept without its answer")
            response = [Message(role="assistant", meta={"no_response": True})]
        rid = next((m.meta.get("response_id") for m in response if m.meta.get("response_id")), None)
        instr = body.get("instructions") if kind == "openai_responses" else None
        calls.append(
            Call(
                index=i,
                endpoint=kind,
                request=request,
                response=response,
                params=params,
                response_id=rid,
                previous_response_id=body.get("previous_response_id") if kind == "openai_responses" else None,
                timestamp=_date_iso(sh, it.get("recorded_at")),
                instructions=instr if isinstance(instr, str) else None,
            )
        )
    return calls, info


# ---------------------------------------------------------------- chaining calls into sessions


@dataclass
class _Chain:
    messages: list[Message]
    start: int  # where the last call's answer begins (= its request length)
    calls: list[Call]
    prefix_hashes: list[str]  # hashes of messages[:start], the last call's request


def _signature(msgs: list[Message]) -> tuple[list[str], list[str], str]:
    calls = [c for m in msgs for c in m.tool_calls]
    ids = sorted(c.id for c in calls if c.id)
    names = sorted(c.name for c in calls)
    text = " ".join(" ".join(m.text for m in msgs if m.kind == "message" and m.role == "assistant").split())
    return ids if len(ids) == len(calls) else [], names, text


def _same_answer(sent: list[Message], recorded: list[Message]) -> bool:
    """Whether the assistant turn a request re-sends is the recorded answer (loosely)."""
    if not sent:
        return False
    if all(m.meta.get("no_response") for m in recorded):
        return True  # the answer was not recorded; the re-sent one is all there is
    ids_s, names_s, text_s = _signature(sent)
    ids_r, names_r, text_r = _signature(recorded)
    if names_r or names_s:
        if ids_s and ids_r:
            return ids_s == ids_r
        return names_s == names_r
    return text_s == text_r


def _hashes(msgs: list[Message]) -> list[str]:
    return [m.hash for m in msgs]


def _answer(call: Call, msgs: list[Message], recorded: list[Message] | None = None) -> list[Message]:
    """``msgs`` (the call's answer as the session keeps it) with the call's facts on the first."""
    first = msgs[0]
    src = call.response[0]
    meta = {**first.meta, **src.meta, "call_index": call.index, "request": call.params}
    if recorded is not None and not src.meta.get("no_response") and _hashes(recorded) != _hashes(msgs):
        meta["recorded_response"] = {
            "text": "".join(m.text for m in recorded),
            "tool_calls": [c.to_dict() for m in recorded for c in m.tool_calls],
            "parts": [p for m in recorded for p in m.parts],
        }
    model = src.model or first.model or call.params.get("model")
    out = [replace(first, usage=src.usage, model=model if isinstance(model, str) else None,
                   timestamp=src.timestamp or call.timestamp, meta=meta)]
    return out + list(msgs[1:])


def _extend(chain: _Chain, call: Call, req_hashes: list[str], ctx: ImportContext) -> bool:
    """Append ``call`` to ``chain`` if its request continues the chain's last call."""
    last = chain.calls[-1]
    p = chain.start
    recorded = chain.messages[p:]
    if call.previous_response_id:
        if call.previous_response_id != last.response_id:
            return False
        new = call.request
        if call.instructions is not None and new and new[0].meta.get("source") == "instructions":
            new = new[1:]  # the session keeps the first call's instructions
            if chain.messages and chain.messages[0].text != call.instructions:
                ctx.warn(f"interaction {call.index}: instructions changed mid-chain; the session shows the "
                         "first call's instructions")
        call.request = chain.messages + new
        chain.start = len(call.request)
        chain.prefix_hashes = _hashes(call.request)
        chain.messages = call.request + _answer(call, call.response)
        chain.calls.append(call)
        return True
    req = call.request
    if len(req) <= p or req_hashes[:p] != chain.prefix_hashes:
        return False
    j = p
    while j < len(req) and req[j].role == "assistant":
        j += 1
    sent = req[p:j]
    if not _same_answer(sent, recorded):
        return False
    # Keep the earlier calls' messages (they carry usage) and the re-sent answer (what the
    # model read from now on), with the earlier call's facts moved onto it.
    adopted = _answer(last, sent, recorded=last.response)
    chain.messages = chain.messages[:p] + adopted + req[j:] + _answer(call, call.response)
    chain.start = len(req)
    chain.prefix_hashes = req_hashes
    chain.calls.append(call)
    return True


def chain_calls(calls: list[Call], ctx: ImportContext) -> list[_Chain]:
    chains: list[_Chain] = []
    for call in calls:
        req_hashes = _hashes(call.request)
        for chain in sorted(chains, key=lambda c: c.calls[-1].index, reverse=True):
            if _extend(chain, call, req_hashes, ctx):
                break
        else:
            if call.previous_response_id:
                ctx.warn(f"interaction {call.index}: continues response {call.previous_response_id!r}, which is "
                         "not in this cassette; its earlier context is missing")
            chains.append(_Chain(messages=call.request + _answer(call, call.response), start=len(call.request),
                                 calls=[call], prefix_hashes=req_hashes))
    return chains


CASSETTE_HINT = re.compile(r"^(?:http_)?interactions:", re.M)  # a top-level YAML key
LLM_HINTS = (
    "/chat/completions", "/responses", "/v1/messages", "/messages", "generateContent", "/api/chat",
    "/completions", "rawPredict", "/invoke", '"messages"', '"contents"', "messages:", "contents:",
)


@register
class VCRCassette(Importer):
    name = "vcr_cassette"
    description = "VCR.py / pytest-recording cassettes of OpenAI, Anthropic and Gemini API calls"
    extensions = (".yaml", ".yml", ".json")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if text.startswith("{"):
            doc = partial_json(head)
            items = doc.get("interactions", doc.get("http_interactions")) if isinstance(doc, dict) else None
            ok = isinstance(items, list) and bool(items) and isinstance(items[0], dict) and "request" in items[0]
        else:
            ok = bool(CASSETTE_HINT.search(text)) and "request:" in text
        return ok and any(h in text for h in LLM_HINTS)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        calls, info = read_calls(path, ctx)
        for chain in chain_calls(calls, ctx):
            first = chain.calls[0]
            msgs = chain.messages
            tools = next((c.params.get("tools") for c in reversed(chain.calls) if c.params.get("tools")), None)
            model = first.params.get("model") or next((m.model for m in msgs if m.model), None)
            first_user = next((m.text for m in msgs if m.role == "user" and m.text), "")
            metadata: dict[str, Any] = {
                "endpoint": sorted({c.endpoint for c in chain.calls}),
                "calls": [c.index for c in chain.calls],
                **({"cassette": info} if info else {}),
            }
            if tools:
                metadata["tools"] = tools
            yield Session(
                external_id=f"{path.stem}#{first.index}",
                format=self.name,
                messages=msgs,
                title=first_user[:80] or None,
                model=model if isinstance(model, str) else None,
                started_at=first.timestamp,
                metadata=metadata,
            )
