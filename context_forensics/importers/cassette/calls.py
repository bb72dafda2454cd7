"""A cassette's interactions as model calls: which API each request called, its request as
the messages the model read (with the parameters worth keeping), and its answer.

Supported: OpenAI ``/chat/completions``, ``/responses`` and legacy ``/completions``;
Anthropic ``/v1/messages`` (also Claude on Bedrock ``invoke`` / Vertex ``rawPredict``); Gemini /
Vertex ``generateContent`` and ``streamGenerateContent``; Bedrock ``converse`` /
``converse-stream`` (and Nova ``invoke``); Ollama ``/api/chat``. Other interactions are counted
as skipped; failed calls and error bodies are warned about and skipped; a call whose answer
was not recorded is kept with a ``no_response`` placeholder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ...records import Message, Usage
from .. import anthropic_messages as anth, openai_chat as oai, openai_responses as resp_api
from .._json import parse_json
from .._openai_shapes import request_params
from ..base import RECORD_ERRORS, ImportContext, as_dict, as_int, decode
from .bedrock import converse_messages, converse_params, converse_response
from .container import body_bytes, date_iso, decompress, interactions, load_cassette, lower_headers, model_from_uri
from .gemini import gemini_messages, gemini_params, gemini_response
from .payloads import bedrock_stream_events, is_eventstream, json_or_stream
from .streams import (
    assemble_anthropic,
    assemble_converse,
    assemble_gemini,
    assemble_ollama,
    assemble_openai_chat,
    assemble_responses,
)


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
    user_agent: str | None = None  # the request's User-Agent header


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
        params = request_params(body)
        if kind == "ollama" and isinstance(body.get("options"), dict):
            params["options"] = body["options"]
        return msgs, params
    if kind == "openai_completions":
        prompt = body.get("prompt")
        text = prompt if isinstance(prompt, str) else "\n".join(str(p) for p in prompt) if isinstance(prompt, list) \
            else json.dumps(prompt)
        return [Message(role="user", text=text)], request_params(body)
    if kind == "openai_responses":
        return resp_api.request_messages(body, ctx), request_params(body)
    if kind == "anthropic":
        params = anth.request_params(body)
        model = params.get("model") or model_from_uri(uri)
        return anth.convert_messages(body.get("system"), body["messages"], ctx), {
            **params, **({"model": model} if model else {})}
    if kind == "bedrock_converse":
        return converse_messages(body, ctx), converse_params(body, uri)
    return gemini_messages(body, ctx), gemini_params(body, uri)


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


def read_calls(path: Path, ctx: ImportContext) -> tuple[list[Call], dict[str, Any]]:
    """Every model call in a cassette, in recorded order (other interactions are counted)."""
    items, info = interactions(load_cassette(path, ctx), path)
    return calls_of(items, ctx), info


def _header(headers: Any, name: str) -> str | None:
    value = headers.get(name) if isinstance(headers, dict) else None
    if isinstance(value, list):
        value = value[0] if value else None
    return value.strip()[:500] or None if isinstance(value, str) else None


def calls_of(items: list[Any], ctx: ImportContext, *, noun: str = "interaction") -> list[Call]:
    """The model calls of recorded exchanges, each ``{"request": {"uri", "method", "headers",
    "body"}, "response": {"status", "headers", "body"}, "recorded_at"?}`` as a cassette holds them
    (a HAR file's entries are put in this shape by ``har``); ``noun`` names one in warnings."""
    calls: list[Call] = []
    for i, it in enumerate(items):
        try:
            what = f"{noun} {i}"
            if not isinstance(it, dict) or not isinstance(it.get("request"), dict):
                ctx.warn(f"{what} has no request; skipped")
                ctx.skip(f"malformed {noun}")
                continue
            req = it["request"]
            res = as_dict(it.get("response"))
            uri = str(req.get("uri") or req.get("url") or "")
            method = str(req.get("method") or "POST")
            rh, sh = lower_headers(req.get("headers")), lower_headers(res.get("headers"))
            raw = body_bytes(req.get("body"))
            body: Any = None
            if raw:
                raw = decompress(raw, rh.get("content-encoding", ""), ctx, what)
                if raw:
                    try:
                        body = parse_json(raw, ctx)
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
                if rraw and ("eventstream" in sh.get("content-type", "") or is_eventstream(rraw)):
                    stream = bedrock_stream_events(rraw)
                elif rraw:
                    doc, stream = json_or_stream(decode(rraw, ctx))
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
                    timestamp=date_iso(sh, it.get("recorded_at")),
                    instructions=instr if isinstance(instr, str) else None,
                    user_agent=_header(rh, "user-agent"),
                )
            )
        except RECORD_ERRORS as e:  # an interaction of unexpected shape: skipped, the rest kept
            ctx.bad_record(e, what=noun, index=i)
    return calls
