"""Anthropic Messages API request bodies, responses, bare message lists and batch JSONL.

Accepted shapes:

- a request body ``{"system": str | blocks, "messages": [...], "model", "tools", ...}``,
  optionally with the call's result next to it (``"response": {message}``), or
  ``{"request": {...}, "response": {...}}``; a JSON list of those -> one session each;
- a bare JSON list of Anthropic messages (told apart from OpenAI messages by block types
  such as ``tool_use``, ``tool_result``, ``thinking``);
- a bare response ``{"type": "message", "role": "assistant", "content": [...], "usage"}``;
- Message Batches JSONL: ``{"custom_id", "params": {...}}`` input lines or
  ``{"custom_id", "result": {"message": {...}}}`` result lines -> one session per line.

Blocks: text, image (base64/url/file), document, search_result, tool_use, tool_result (string
or block content, ``is_error``), thinking, redacted_thinking, server_tool_use / mcp_tool_use
and the server tool results (web_search_tool_result, code_execution_tool_result, ...).
A user message's tool_result blocks become one role="tool" message each, followed by a user
message for the rest. ``convert_messages``, ``convert_response`` and ``usage_from_anthropic``
are reused by the cassette importer.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..records import Message, Session, ToolCall, Usage
from ._documents import DocumentImporter
from ._images import image_part
from ._sniffing import ANTHROPIC_BLOCK_TYPES, FOREIGN_KEYS, foreign_document, head_records, mentions_type
from .base import RECORD_ERRORS, ImportContext, as_dict, as_int, head_text, json_text, register

REQUEST_KEYS = (
    "model", "max_tokens", "tools", "tool_choice", "thinking", "temperature", "top_p", "top_k",
    "stop_sequences", "stream", "metadata", "service_tier", "context_management", "container",
    "mcp_servers", "output_format", "anthropic_version", "betas",
)


def usage_from_anthropic(d: Any) -> Usage | None:
    """Usage from an Anthropic ``usage`` object; prompt = input + cache creation + cache read."""
    if not isinstance(d, dict):
        return None
    inp = as_int(d.get("input_tokens"))
    created = as_int(d.get("cache_creation_input_tokens"))
    read = as_int(d.get("cache_read_input_tokens"))
    prompt = None if inp is None else inp + (created or 0) + (read or 0)
    u = Usage(
        prompt_tokens=prompt,
        completion_tokens=as_int(d.get("output_tokens")),
        cache_read_tokens=read,
        cache_creation_tokens=created,
    )
    return None if u.is_empty() else u


def request_params(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in REQUEST_KEYS if k in body and body[k] is not None}


def _source_part(block: dict) -> dict:
    src = as_dict(block.get("source"))
    st = src.get("type")
    if block.get("type") == "image":
        if st == "base64":
            return image_part(base64_data=src.get("data"), media_type=src.get("media_type"))
        if st == "url":
            return image_part(url=src.get("url"))
        image: dict[str, Any] = {"type": "image", "source": st or "unknown"}
        if src.get("file_id"):
            image["file_id"] = src["file_id"]
        return image
    part: dict[str, Any] = {"type": "document"}
    if st:
        part["source"] = st
    for key in ("title", "context"):
        if isinstance(block.get(key), str):
            part[key] = block[key]
    if src.get("media_type"):
        part["media_type"] = src["media_type"]
    if st == "base64" and isinstance(src.get("data"), str):
        part["bytes"] = len(src["data"]) * 3 // 4
    elif st == "text" and isinstance(src.get("data"), str):
        part["text"] = src["data"]  # plain-text documents are read as text
    elif st == "content":
        part["text"] = _blocks_text(src.get("content"))
    elif st == "url":
        part["url"] = src.get("url")
    elif src.get("file_id"):
        part["file_id"] = src["file_id"]
    return part


def _blocks_text(content: Any, sep: str = "\n") -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return sep.join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))


def _server_result_part(block: dict) -> dict:
    """A server tool's result block, without encrypted payloads."""
    t = block.get("type")
    part: dict[str, Any] = {"type": t, "tool_use_id": block.get("tool_use_id")}
    content = block.get("content")
    if isinstance(content, list):
        results = [
            {k: r[k] for k in ("title", "url", "page_age") if r.get(k) is not None}
            for r in content
            if isinstance(r, dict)
        ]
        if any(results):
            part["results"] = results
        text = _blocks_text(content)
        if text:
            part["text"] = text
    elif isinstance(content, dict):
        if content.get("error_code"):
            part["error_code"] = content["error_code"]
        if isinstance(content.get("url"), str):
            part["url"] = content["url"]
        if isinstance(content.get("content"), dict):  # web_fetch_result: a fetched document
            doc = _source_part(content["content"])
            for key in ("title", "media_type", "text"):
                if key in doc:
                    part[key] = doc[key]
        out = [str(content[k]) for k in ("stdout", "stderr") if content.get(k)]
        if isinstance(content.get("content"), (str, list)):
            txt = _blocks_text(content["content"]) if isinstance(content["content"], list) else content["content"]
            if txt:
                out.append(txt)
        if out:
            part["text"] = "\n".join(out)
        if content.get("return_code") is not None:
            part["return_code"] = content["return_code"]
    elif isinstance(content, str):
        part["text"] = content
    if block.get("is_error"):
        part["is_error"] = True
    return part


def convert_message(
    msg: Any, ctx: ImportContext, *, tool_names: dict[str, str], line: int | None = None
) -> list[Message]:
    """One Anthropic message -> Messages (a user turn with tool results becomes several)."""
    if not isinstance(msg, dict):
        ctx.warn("message is not an object; skipped", line=line)
        ctx.skip("malformed message")
        return []
    role = str(msg.get("role") or "").lower()
    if role not in ("user", "assistant", "system"):
        ctx.warn(f"unknown role {msg.get('role')!r}; read as user", line=line)
        role = "user"
    content = msg.get("content")
    if content is None:
        content = []
    if isinstance(content, str):
        return [Message(role=role, text=content)]
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return [Message(role=role, text=json.dumps(content, ensure_ascii=False))]
    out: list[Message] = []
    texts: list[str] = []
    parts: list[dict] = []
    calls: list[ToolCall] = []
    server_ids: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, dict):
            continue
        t = block.get("type")
        if t == "text" or (t is None and isinstance(block.get("text"), str)):
            texts.append(str(block.get("text") or ""))
        elif t == "thinking":
            parts.append({"type": "thinking", "text": str(block.get("thinking") or "")})
        elif t == "redacted_thinking":
            parts.append({"type": "redacted_thinking", "bytes": len(str(block.get("data") or ""))})
        elif t in ("tool_use", "server_tool_use", "mcp_tool_use"):
            call = ToolCall(name=str(block.get("name") or ""), arguments=json_text(block.get("input")),
                            id=block.get("id"))
            calls.append(call)
            if call.id:
                tool_names[call.id] = call.name
                if t != "tool_use":
                    server_ids.append(call.id)
        elif t == "tool_result":
            out.append(_tool_result(block, tool_names))
        elif t in ("image", "document"):
            parts.append(_source_part(block))
        elif t == "search_result":
            parts.append({"type": "search_result", "title": block.get("title"), "source": block.get("source"),
                          "text": _blocks_text(block.get("content"))})
        elif isinstance(t, str) and t.endswith("_tool_result"):
            parts.append(_server_result_part(block))
        elif isinstance(t, str):
            parts.append({"type": t})
    # Assistant text blocks are fragments of one answer (citations split them); user blocks
    # are separate inputs.
    text = ("" if role == "assistant" else "\n").join(texts)
    if role == "assistant":
        meta: dict[str, Any] = {"server_tool_ids": server_ids} if server_ids else {}
        out.append(Message(role="assistant", text=text, tool_calls=tuple(calls), parts=tuple(parts), meta=meta))
    elif text or parts or not out:
        meta = {"tool_calls_on_role": role} if calls else {}
        out.append(Message(role=role, text=text, parts=tuple(parts), meta=meta))
    return out


def _tool_result(block: dict, tool_names: dict[str, str]) -> Message:
    tid = block.get("tool_use_id")
    content = block.get("content")
    parts: list[dict] = []
    if isinstance(content, list):
        texts = []
        for b in content:
            if not isinstance(b, dict):
                if isinstance(b, str):
                    texts.append(b)
                continue
            if b.get("type") == "text":
                texts.append(str(b.get("text") or ""))
            elif b.get("type") in ("image", "document"):
                parts.append(_source_part(b))
            elif b.get("type") == "search_result":
                parts.append({"type": "search_result", "title": b.get("title"), "source": b.get("source"),
                              "text": _blocks_text(b.get("content"))})
            elif isinstance(b.get("type"), str):
                parts.append({"type": b["type"]})
        text = "\n".join(texts)
    elif content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    else:
        text = json.dumps(content, ensure_ascii=False)
    meta = {"is_error": True} if block.get("is_error") else {}
    return Message(
        role="tool",
        text=text,
        name=tool_names.get(tid) if isinstance(tid, str) else None,
        tool_call_id=tid if isinstance(tid, str) else None,
        parts=tuple(parts),
        meta=meta,
    )


def system_messages(system: Any) -> list[Message]:
    """The ``system`` parameter (a string or text blocks) as one system message."""
    if system is None or system == "" or system == []:
        return []
    if isinstance(system, str):
        return [Message(role="system", text=system)]
    if isinstance(system, dict):
        system = [system]
    if isinstance(system, list):
        return [Message(role="system", text=_blocks_text(system, "\n"))]
    return [Message(role="system", text=str(system))]


def convert_messages(system: Any, messages: Any, ctx: ImportContext, *, line: int | None = None) -> list[Message]:
    """A request's ``system`` and ``messages`` -> Messages, in the order the model reads them."""
    out = system_messages(system)
    names: dict[str, str] = {}
    _extend(out, messages if isinstance(messages, list) else [], names, ctx, line)
    return out


def _extend(out: list[Message], messages: list[Any], names: dict[str, str], ctx: ImportContext,
            line: int | None) -> None:
    """``out`` plus each of ``messages`` converted; one of unexpected shape is skipped and counted."""
    for i, m in enumerate(messages):
        try:
            out.extend(convert_message(m, ctx, tool_names=names, line=line))
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="message", index=i, line=line)


def convert_response(resp: Any, ctx: ImportContext, *, line: int | None = None,
                     tool_names: dict[str, str] | None = None) -> list[Message]:
    """A Messages API response -> one assistant Message carrying the call's usage."""
    if not isinstance(resp, dict):
        return []
    msgs = convert_message({"role": "assistant", "content": resp.get("content") or []}, ctx,
                           tool_names=tool_names if tool_names is not None else {}, line=line)
    if not msgs:
        return []
    m = msgs[0]
    meta = dict(m.meta)
    for key, name in (("stop_reason", "stop_reason"), ("id", "response_id")):
        if resp.get(key):
            meta[name] = resp[key]
    if isinstance(resp.get("usage"), dict):
        server = resp["usage"].get("server_tool_use")
        if isinstance(server, dict) and server:
            meta["server_tool_use"] = server
    model = resp.get("model") if isinstance(resp.get("model"), str) else None
    return [replace(m, usage=usage_from_anthropic(resp.get("usage")), model=model, meta=meta)]


def is_anthropic_message_list(items: Any) -> bool:
    """Messages whose blocks only Anthropic uses (tool_use, tool_result, thinking, ...)."""
    if not isinstance(items, list):
        return False
    for m in items:
        if isinstance(m, dict) and isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and isinstance(b.get("type"), str) and (
                    b["type"] in ANTHROPIC_BLOCK_TYPES
                    or (b["type"] in ("image", "document") and isinstance(b.get("source"), dict))
                ):
                    return True
    return False


def _is_response(d: Any) -> bool:
    return isinstance(d, dict) and d.get("type") == "message" and d.get("role") == "assistant" and "content" in d


def _request_of(rec: dict) -> dict | None:
    if isinstance(rec.get("messages"), list):
        return rec
    for key in ("params", "request", "body"):
        inner = rec.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("messages"), list):
            return inner
    return None


def _looks_anthropic_request(body: dict, text: str) -> bool:
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return False
    if msgs and not (isinstance(msgs[0], dict) and "role" in msgs[0]):
        return False
    if "system" in body or "anthropic_version" in body:
        return True
    if is_anthropic_message_list(msgs):
        return True
    return mentions_type(text, ANTHROPIC_BLOCK_TYPES)


@register
class AnthropicMessages(DocumentImporter):
    name = "anthropic_messages"
    description = "Anthropic Messages API request bodies / responses, message lists, batch JSONL"
    extensions = (".json", ".jsonl")
    priority = 74
    not_a_record = "expected an Anthropic request ('messages') or response ('content')"
    not_a_document = "expected a JSON object or list"

    def sniff(self, path: Path, head: bytes) -> bool:
        kind, doc = head_records(path, head)
        if doc is None or foreign_document(path, head, doc):
            return False
        text = head_text(head)
        if kind == "jsonl":
            if not isinstance(doc, dict) or "custom_id" not in doc:
                return False
            if isinstance(doc.get("params"), dict):
                return isinstance(doc["params"].get("messages"), list)
            res = doc.get("result")
            return isinstance(res, dict) and ("message" in res or res.get("type") in ("errored", "expired", "canceled"))
        if isinstance(doc, list):
            if not doc or not isinstance(doc[0], dict):
                return False
            first = doc[0]
            if "role" in first and "content" in first:
                return str(first["role"]).lower() in ("user", "assistant") and (
                    is_anthropic_message_list(doc)
                    or mentions_type(text, ANTHROPIC_BLOCK_TYPES)
                )
            if FOREIGN_KEYS & first.keys():
                return False
            req = _request_of(first)
            return req is not None and _looks_anthropic_request(req, text)
        if isinstance(doc, dict):
            if _is_response(doc):
                return True
            req = _request_of(doc)
            return req is not None and _looks_anthropic_request(req, text)
        return False

    def list_session(self, path: Path, items: list[Any], ctx: ImportContext) -> Session | None:
        if items and all(isinstance(m, dict) and "role" in m for m in items[:5]):
            return self.session(path.stem, convert_messages(None, items, ctx), {})
        return None

    def record_session(
        self, rec: dict[str, Any], ctx: ImportContext, *, ext: str | None, line: int | None
    ) -> Session | None:
        ext_id = ext or str(rec.get("custom_id") or rec.get("id") or f"line-{line}")
        if _is_response(rec):
            return self.session(ext_id, convert_response(rec, ctx, line=line), {})
        result = rec.get("result")
        if isinstance(result, dict) and "custom_id" in rec and "params" not in rec:
            if not _is_response(result.get("message")):
                ctx.skip(f"batch result {result.get('type')}")
                return None
            return self.session(ext_id, convert_response(result["message"], ctx, line=line), {})
        req = _request_of(rec)
        if req is None:
            ctx.warn("record has no 'messages' list; skipped", line=line)
            ctx.skip("record without messages")
            return None
        names: dict[str, str] = {}
        msgs = system_messages(req.get("system"))
        _extend(msgs, req["messages"], names, ctx, line)
        params = request_params(req)
        response = rec.get("response") if isinstance(rec.get("response"), dict) else None
        if response is not None and not _is_response(response) and isinstance(response.get("body"), dict):
            response = response["body"]
        if response is not None:
            out = convert_response(response, ctx, line=line, tool_names=names)
            if out and params:
                out[0] = replace(out[0], meta={**out[0].meta, "request": params})
            msgs.extend(out)
        metadata: dict[str, Any] = {}
        if params.get("tools"):
            metadata["tools"] = params["tools"]
        if line is not None:
            metadata["line"] = line
        return self.session(ext_id, msgs, metadata, model=params.get("model") or None)
