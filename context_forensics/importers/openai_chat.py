"""OpenAI Chat Completions message arrays, request/response logs and fine-tuning JSONL.

Accepted shapes:

- a bare JSON list of messages (``[{"role": "system", ...}, ...]``) -> one session;
- ``{"messages": [...], "model", "tools"/"functions", ...}``, optionally with the call's
  result as ``"response": {chat.completion}`` or merged in as ``"choices"`` + ``"usage"``;
- a JSON list of such objects -> one session each;
- JSONL with one ``{"messages": [...]}`` conversation per line (fine-tuning data, the Batch
  API's ``{"custom_id", "body": {...}}`` input lines, DPO ``{"input": {"messages"}}`` lines)
  -> one session per line; or one message per line -> one session, streamed.

Message features: ``tool_calls`` (function and custom tools), role ``tool`` with
``tool_call_id``, the legacy ``function`` role and ``function_call``, ``name``, content parts
(text, image_url with detail, input_audio, file, refusal), message-level ``refusal``,
``reasoning_content`` from OpenAI-compatible servers, and ``usage``.

``convert_messages``, ``convert_response`` and ``usage_from_openai`` are reused by the cassette
importer; ``partial_json`` is the tolerant head parser the provider sniffers share.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import Message, Session, ToolCall, Usage
from .base import (
    ImportContext,
    Importer,
    as_int,
    head_text,
    image_part,
    first_jsonl_value,
    iter_jsonl,
    load_json,
    read_head,
    register,
)

# ---------------------------------------------------------------- tolerant head parsing

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+|"')
_LIST_KEEP = 8  # elements kept per list while sniffing; the rest is parsed and dropped


def partial_json(head: bytes | str) -> Any:
    """Parse as much of a (possibly truncated) JSON document as the head holds.

    Containers cut off by the head end are returned as far as they go; lists keep their
    first few elements. Returns None when the head does not start like JSON. Cheap enough
    for ``sniff``: one regex pass over at most 64 KiB.
    """
    text = head_text(head) if isinstance(head, bytes) else head.lstrip("\ufeff").lstrip()
    if not text or text[0] not in "[{":
        return None
    stack: list[list[Any]] = []  # [container, pending key, expecting_key]
    root: Any = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in "{[":
            value: Any = {} if tok == "{" else []
            if stack:
                if not _put(stack[-1], value):
                    return root
            else:
                root = value
            stack.append([value, None, tok == "{"])
            continue
        if tok in "}]":
            if not stack:
                return root
            stack.pop()
            if not stack:
                return root
            continue
        if not stack:
            return root
        top = stack[-1]
        if tok == ",":
            if isinstance(top[0], dict):
                top[2] = True
            continue
        if tok == ":":
            top[2] = False
            continue
        if tok == '"':  # unterminated string: the head ends inside it
            return root
        if tok.startswith('"'):
            try:
                value = json.loads(tok)
            except json.JSONDecodeError:
                value = tok[1:-1]
        else:
            value = {"true": True, "false": False, "null": None}.get(tok, tok)
            if isinstance(value, str):
                try:
                    value = json.loads(tok)
                except json.JSONDecodeError:
                    return root
        if isinstance(top[0], dict) and top[2]:
            top[1] = value if isinstance(value, str) else str(value)
            continue
        _put(top, value)
    return root


def _put(frame: list[Any], value: Any) -> bool:
    container = frame[0]
    if isinstance(container, dict):
        if frame[1] is None:
            return False
        container[frame[1]] = value
        frame[1] = None
    elif len(container) < _LIST_KEEP:
        container.append(value)
    # else: past the kept elements; the value is still parsed (for structure) and dropped
    return True


def looks_like_jsonl(path: Path, head: bytes) -> bool:
    """A JSONL file: a .jsonl/.ndjson name, or a complete JSON first line with more after it."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return True
    text = head_text(head)
    first, sep, rest = text.partition("\n")
    if not sep or not rest.strip() or not first.strip().startswith("{"):
        return False
    try:
        json.loads(first)
    except json.JSONDecodeError:
        return False
    return True


def head_records(path: Path, head: bytes) -> tuple[str, Any]:
    """("jsonl", first record) or ("json", partial document) for sniffing."""
    if looks_like_jsonl(path, head):
        line = head_text(head).split("\n", 1)[0]
        return "jsonl", partial_json(line)
    return "json", partial_json(head)


# Keys of a turn record (generic_json's list of turns), not of a conversation.
TURN_KEYS = frozenset({"turn", "turn_id", "turn_index", "step"})

# Keys that mark another format's document even though it has a "messages" list.
FOREIGN_KEYS = frozenset(
    {
        "info", "trajectory", "trajectory_format", "history", "instance_id",  # SWE-agent family
        "kwargs", "args", "cost", "fncall_messages",  # OpenHands llm_completions
        "eval", "samples", "plan", "results", "stats", "reductions",  # Inspect
        "mapping", "chat_messages", "conversations", "current_node",  # chat exports, ShareGPT
        "payload", "environment", "replay_config", "events", "log", "turns",
    }
)


# Files of a Cline / Roo Code / Kilo Code task folder (``tasks/<id>/``): the conversation is a
# list of Anthropic MessageParams with the extension's extras (modelInfo, metrics); it belongs to
# that task folder, not to the plain provider importers.
AGENT_TASK_FILES = frozenset({"api_conversation_history.json", "ui_messages.json", "task_metadata.json"})


def foreign_document(path: Path, head: bytes, doc: Any) -> bool:
    """True for files other importers own (OpenHands per-call logs, agent trajectories)."""
    if path.parent.name == "llm_completions" or path.name in AGENT_TASK_FILES:
        return True
    if b"You are OpenHands agent" in head[:4096]:
        return True
    return isinstance(doc, dict) and bool(FOREIGN_KEYS & doc.keys())


# ---------------------------------------------------------------- conversion

OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
ROLE_ALIASES = {
    "human": "user",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "ipython": "tool",  # Llama 3 tool output role
    "observation": "tool",
}
# Content-part or block types that only Anthropic messages carry.
ANTHROPIC_BLOCK_TYPES = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
     "web_search_tool_result", "document", "search_result"}
)


def usage_from_responses(d: Any) -> Usage | None:
    """Usage from a Responses API ``usage`` object."""
    if not isinstance(d, dict):
        return None
    itd = d.get("input_tokens_details") if isinstance(d.get("input_tokens_details"), dict) else {}
    otd = d.get("output_tokens_details") if isinstance(d.get("output_tokens_details"), dict) else {}
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
    ptd = d.get("prompt_tokens_details") if isinstance(d.get("prompt_tokens_details"), dict) else {}
    ctd = (
        d.get("completion_tokens_details")
        if isinstance(d.get("completion_tokens_details"), dict)
        else {}
    )
    cached = as_int(ptd.get("cached_tokens"))
    if cached is None:  # litellm's passthrough of Anthropic fields, DeepSeek's cache hits
        cached = as_int(d.get("cache_read_input_tokens"))
    if cached is None:
        cached = as_int(d.get("prompt_cache_hit_tokens"))
    u = Usage(
        prompt_tokens=as_int(d.get("prompt_tokens")),
        completion_tokens=as_int(d.get("completion_tokens")),
        cache_read_tokens=cached,
        cache_creation_tokens=as_int(d.get("cache_creation_input_tokens")),
        reasoning_tokens=as_int(ctd.get("reasoning_tokens")),
    )
    return None if u.is_empty() else u


def _arguments(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _tool_call(tc: Any) -> ToolCall | None:
    if not isinstance(tc, dict):
        return None
    if tc.get("type") == "custom" or isinstance(tc.get("custom"), dict):
        c = tc.get("custom") or {}
        return ToolCall(name=str(c.get("name") or ""), arguments=_arguments(c.get("input")), id=tc.get("id"))
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
    name = fn.get("name")
    if not name and not fn.get("arguments"):
        return None
    return ToolCall(name=str(name or ""), arguments=_arguments(fn.get("arguments")), id=tc.get("id"))


def _file_part(f: dict) -> dict:
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


def content_parts(content: Any) -> tuple[str, list[dict]]:
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
            a = p.get("input_audio") if isinstance(p.get("input_audio"), dict) else {}
            part = {"type": "audio"}
            if a.get("format"):
                part["format"] = a["format"]
            if isinstance(a.get("data"), str):
                part["bytes"] = len(a["data"]) * 3 // 4
            parts.append(part)
        elif t == "file":
            parts.append(_file_part(p.get("file") if isinstance(p.get("file"), dict) else {}))
        elif t == "image" and isinstance(p.get("source"), dict):  # an Anthropic block passed through
            s = p["source"]
            parts.append(image_part(base64_data=s.get("data"), url=s.get("url"), media_type=s.get("media_type")))
        elif isinstance(t, str):
            parts.append({"type": t})
    return "\n".join(texts), parts


def convert_message(
    m: Any,
    ctx: ImportContext,
    *,
    line: int | None = None,
    tool_names: dict[str, str] | None = None,
) -> Message | None:
    """One Chat Completions message dict -> Message (None for a non-message)."""
    if not isinstance(m, dict):
        ctx.warn("message is not an object; skipped", line=line)
        ctx.skip("malformed message")
        return None
    raw_role = str(m.get("role") or "").lower()
    role = ROLE_ALIASES.get(raw_role, raw_role)
    meta: dict[str, Any] = {}
    if role not in OPENAI_ROLES:
        ctx.warn(f"unknown role {m.get('role')!r}; read as user", line=line)
        meta["role"] = m.get("role")
        role = "user"
    elif raw_role != role:
        meta["role"] = raw_role
    text, parts = content_parts(m.get("content"))
    reasoning = m.get("reasoning_content")
    if not isinstance(reasoning, str):
        reasoning = m.get("reasoning") if isinstance(m.get("reasoning"), str) else None
    thinking = []
    if reasoning:
        thinking.append({"type": "thinking", "text": reasoning})
    for block in m.get("thinking_blocks") or []:  # litellm's Anthropic passthrough
        if isinstance(block, dict) and block.get("type") == "thinking":
            thinking.append({"type": "thinking", "text": str(block.get("thinking") or "")})
        elif isinstance(block, dict) and block.get("type") == "redacted_thinking":
            thinking.append({"type": "redacted_thinking", "bytes": len(str(block.get("data") or ""))})
    parts = thinking + parts
    refusal = m.get("refusal")
    if isinstance(refusal, str) and refusal:
        meta["refusal"] = True
        if not text:
            text = refusal
        else:
            parts.append({"type": "refusal", "text": refusal})
    audio = m.get("audio")
    if isinstance(audio, dict):
        parts.append({"type": "audio", **({"id": audio["id"]} if audio.get("id") else {})})
        if not text and isinstance(audio.get("transcript"), str):
            text = audio["transcript"]
    calls: list[ToolCall] = []
    for tc in m.get("tool_calls") or []:
        call = _tool_call(tc)
        if call is not None:
            calls.append(call)
    if isinstance(m.get("function_call"), dict):
        call = _tool_call(m["function_call"])
        if call is not None:
            calls.append(call)
    if tool_names is not None:
        for c in calls:
            if c.id:
                tool_names[c.id] = c.name
    name = m.get("name") if isinstance(m.get("name"), str) else None
    tool_call_id = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
    if role == "function":
        role = "tool"
        meta.setdefault("role", "function")
    if role == "tool" and name is None and tool_call_id and tool_names:
        name = tool_names.get(tool_call_id)
    if role != "assistant" and calls:
        meta["tool_calls_on_role"] = role
    for key in ("weight", "id"):
        if m.get(key) is not None and isinstance(m[key], (int, str)):
            meta[key] = m[key]
    usage = usage_from_openai(m.get("usage"))
    return Message(
        role=role,
        text=text,
        name=name,
        tool_calls=tuple(calls) if role == "assistant" else (),
        tool_call_id=tool_call_id if role == "tool" else None,
        parts=tuple(parts),
        usage=usage,
        model=m.get("model") if isinstance(m.get("model"), str) else None,
        meta=meta,
    )


def convert_messages(items: list, ctx: ImportContext, *, line: int | None = None) -> list[Message]:
    """Convert a Chat Completions ``messages`` array, resolving tool names from call ids."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for m in items if isinstance(items, list) else []:
        msg = convert_message(m, ctx, line=line, tool_names=names)
        if msg is not None:
            out.append(msg)
    return out


def convert_response(resp: Any, ctx: ImportContext, *, line: int | None = None) -> list[Message]:
    """The assistant message(s) of a ``chat.completion`` object, with its usage on the first.

    Only the first choice is kept (``n`` > 1 is noted in meta); a legacy completion's
    ``choices[].text`` becomes the assistant text.
    """
    if not isinstance(resp, dict):
        return []
    choices = resp.get("choices") if isinstance(resp.get("choices"), list) else []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    msg_dict = choice.get("message") if isinstance(choice.get("message"), dict) else None
    if msg_dict is None and isinstance(choice.get("delta"), dict):
        msg_dict = choice["delta"]
    if msg_dict is None and isinstance(choice.get("text"), str):
        msg_dict = {"role": "assistant", "content": choice["text"]}
    usage = usage_from_openai(resp.get("usage"))
    if msg_dict is None:
        if usage is None:
            return []
        msg_dict = {"role": "assistant", "content": None}
    msg_dict = {**msg_dict, "role": msg_dict.get("role") or "assistant"}
    m = convert_message(msg_dict, ctx, line=line)
    if m is None:
        return []
    meta = dict(m.meta)
    if choice.get("finish_reason"):
        meta["finish_reason"] = choice["finish_reason"]
    if len(choices) > 1:
        meta["choices"] = len(choices)
    if resp.get("id"):
        meta["response_id"] = resp["id"]
    model = resp.get("model") if isinstance(resp.get("model"), str) else m.model
    return [replace(m, usage=usage or m.usage, model=model, timestamp=_epoch_iso(resp.get("created")), meta=meta)]


def _epoch_iso(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    from datetime import datetime, timezone

    try:
        return datetime.fromtimestamp(value, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


# Request parameters worth keeping next to a recorded call (token counting and replay).
REQUEST_KEYS = (
    "model", "tools", "functions", "tool_choice", "function_call", "max_tokens",
    "max_completion_tokens", "max_output_tokens", "temperature", "top_p", "n", "stream",
    "response_format", "reasoning_effort", "reasoning", "parallel_tool_calls", "seed", "stop",
    "thinking", "tool_config", "text", "truncation", "store", "prompt_cache_key",
    "service_tier", "modalities", "audio", "prediction", "web_search_options", "verbosity",
)


def request_params(body: dict) -> dict[str, Any]:
    return {k: body[k] for k in REQUEST_KEYS if k in body and body[k] is not None}


def _title(messages: list[Message]) -> str | None:
    first = next((m.text for m in messages if m.role == "user" and m.text), "")
    return first[:80] or None


# ---------------------------------------------------------------- the importer


def _is_message(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("role"), str) and (
        "content" in d or "tool_calls" in d or "function_call" in d
    )


# Item and part types of the Responses API; a Chat Completions log never has them.
RESPONSES_SIGNALS = (
    "function_call_output", "custom_tool_call", "input_text", "output_text", "input_image",
    "web_search_call", "reasoning", "item_reference", "function_call",
)


def _responses_signals(text: str) -> bool:
    return any(f'"type": "{t}"' in text or f'"type":"{t}"' in text for t in RESPONSES_SIGNALS)


def _anthropic_signals(doc: Any, text: str) -> bool:
    if isinstance(doc, dict) and ("system" in doc or "anthropic_version" in doc):
        return True
    return any(f'"type": "{t}"' in text or f'"type":"{t}"' in text for t in ANTHROPIC_BLOCK_TYPES)


def _conversation_body(rec: dict) -> dict | None:
    """The request-like dict with "messages" inside a JSONL/list record, or None."""
    if isinstance(rec.get("messages"), list):
        return rec
    for key in ("body", "input", "request"):  # Batch API input, DPO data, logged requests
        inner = rec.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("messages"), list):
            return inner
    return None


@register
class OpenAIChat(Importer):
    name = "openai_chat"
    description = "OpenAI Chat Completions messages: arrays, request/response logs, fine-tuning JSONL"
    extensions = (".json", ".jsonl")
    priority = 72

    def sniff(self, path: Path, head: bytes) -> bool:
        kind, doc = head_records(path, head)
        if doc is None or foreign_document(path, head, doc):
            return False
        text = head_text(head)
        if '"token_count"' in text:  # per-message recorded counts: the generic_json format
            return False
        if _responses_signals(text):  # Responses API items: openai_responses
            return False
        if kind == "jsonl":
            if not isinstance(doc, dict):
                return False
            if _is_message(doc):
                return doc["role"].lower() in OPENAI_ROLES and not _anthropic_signals(doc, text)
            body = _conversation_body(doc)
            return body is not None and self._messages_ok(body, text)
        if isinstance(doc, list):
            if not doc:
                return False
            first = doc[0]
            if _is_message(first):
                return str(first["role"]).lower() in OPENAI_ROLES and not _anthropic_signals({}, text)
            if isinstance(first, dict) and not ((FOREIGN_KEYS | TURN_KEYS) & first.keys()):
                body = _conversation_body(first)
                return body is not None and self._messages_ok(body, text)
            return False
        if isinstance(doc, dict):
            if doc.get("object") == "chat.completion" and isinstance(doc.get("choices"), list):
                return True
            return isinstance(doc.get("messages"), list) and self._messages_ok(doc, text)
        return False

    @staticmethod
    def _messages_ok(body: dict, text: str) -> bool:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs or not _is_message(msgs[0]):
            return False
        if str(msgs[0]["role"]).lower() not in OPENAI_ROLES:
            return False
        return not _anthropic_signals(body, text)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        if looks_like_jsonl(path, read_head(path)):
            yield from self._parse_jsonl(path, ctx)
            return
        data = load_json(path, ctx)
        if isinstance(data, list):
            if not data:
                return
            if any(_is_message(d) for d in data[:5]):
                msgs = convert_messages(data, ctx)
                yield self._session(path.stem, msgs, {}, ctx)
                return
            for i, rec in enumerate(data):
                s = self._from_record(rec, ctx, ext=f"{i}", line=None)
                if s is not None:
                    yield s
            return
        if isinstance(data, dict):
            s = self._from_record(data, ctx, ext=path.stem, line=None)
            if s is None:
                raise InputError(
                    "expected a 'messages' list (OpenAI Chat Completions)",
                    where=str(path),
                    hint="force another format with --format",
                )
            yield s
            return
        raise InputError("expected a JSON list of messages or an object with 'messages'", where=str(path))

    def _parse_jsonl(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        first = first_jsonl_value(path)
        if first is None:
            return
        line, rec = first
        if _is_message(rec):
            # One message per line: one session, streamed.
            def messages() -> Iterator[Message]:
                names: dict[str, str] = {}
                for ln, r in iter_jsonl(path, ctx):
                    if not _is_message(r):
                        ctx.warn("line is not a chat message; skipped", line=ln)
                        ctx.skip("malformed message")
                        continue
                    m = convert_message(r, ctx, line=ln, tool_names=names)
                    if m is not None:
                        yield m

            yield Session(external_id=path.stem, format=self.name, messages=messages(),
                          metadata={"layout": "message per line"})
            return
        for ln, r in iter_jsonl(path, ctx):
            s = self._from_record(r, ctx, ext=None, line=ln)
            if s is not None:
                yield s

    def _from_record(self, rec: Any, ctx: ImportContext, *, ext: str | None, line: int | None) -> Session | None:
        if not isinstance(rec, dict):
            ctx.warn("record is not an object; skipped", line=line)
            ctx.skip("malformed record")
            return None
        if rec.get("object") == "chat.completion" and "messages" not in rec:
            msgs = convert_response(rec, ctx, line=line)
            return self._session(ext or str(rec.get("id") or f"line-{line}"), msgs, {}, ctx)
        body = _conversation_body(rec)
        if body is None:
            ctx.warn("record has no 'messages' list; skipped", line=line)
            ctx.skip("record without messages")
            return None
        msgs = convert_messages(body["messages"], ctx, line=line)
        params = request_params(body)
        response = rec.get("response") if isinstance(rec.get("response"), dict) else None
        if response is None and isinstance(body.get("response"), dict):
            response = body["response"]
        if response is not None and isinstance(response.get("body"), dict):  # Batch API output
            response = response["body"]
        if response is None and isinstance(rec.get("choices"), list):
            response = rec
        out: list[Message] = []
        if response is not None:
            out = convert_response(response, ctx, line=line)
        elif isinstance(rec.get("preferred_output"), list):  # preference (DPO) data
            out = convert_messages(rec["preferred_output"], ctx, line=line)
        elif isinstance(rec.get("usage"), dict) and msgs and msgs[-1].role == "assistant" and msgs[-1].usage is None:
            # A logged conversation whose last assistant message is the call's output.
            msgs[-1] = replace(msgs[-1], usage=usage_from_openai(rec["usage"]))
            out = [msgs.pop()]
        if out:
            first = out[0]
            meta = dict(first.meta)
            if params:
                meta["request"] = params
            out[0] = replace(first, meta=meta)
        msgs.extend(out)
        ext_id = ext or str(rec.get("custom_id") or rec.get("id") or f"line-{line}")
        metadata: dict[str, Any] = {}
        if line is not None:
            metadata["line"] = line
        if params.get("tools") or params.get("functions"):
            metadata["tools"] = params.get("tools") or params.get("functions")
        if isinstance(rec.get("non_preferred_output"), list):
            metadata["non_preferred_output"] = len(rec["non_preferred_output"])
        return self._session(ext_id, msgs, metadata, ctx, model=params.get("model"))

    def _session(self, ext: str, msgs: list[Message], metadata: dict, ctx: ImportContext,
                 model: str | None = None) -> Session:
        model = model or next((m.model for m in msgs if m.model), None)
        return Session(
            external_id=str(ext),
            format=self.name,
            messages=msgs,
            title=_title(msgs),
            model=model,
            started_at=next((m.timestamp for m in msgs if m.timestamp), None),
            metadata=metadata,
        )


__all__ = [
    "OpenAIChat",
    "content_parts",
    "convert_message",
    "convert_messages",
    "convert_response",
    "partial_json",
    "usage_from_openai",
]
