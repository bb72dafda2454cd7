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

``convert_messages`` and ``convert_response`` are reused by the cassette importer. The OpenAI
shapes other formats share (usage, content parts, tool calls, request parameters) live in
``_openai_shapes``; the sniffing helpers the provider importers share in ``_sniffing``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from ..records import Message, Session, ToolCall
from ._documents import DocumentImporter
from ._openai_shapes import content_parts, epoch_iso_z, request_params, tool_call, usage_from_openai
from ._sniffing import ANTHROPIC_BLOCK_TYPES, FOREIGN_KEYS, TURN_KEYS, foreign_document, head_records, mentions_type
from .base import RECORD_ERRORS, ImportContext, as_list, head_text, iter_jsonl, register

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
        call = tool_call(tc)
        if call is not None:
            calls.append(call)
    if isinstance(m.get("function_call"), dict):
        call = tool_call(m["function_call"])
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


def convert_messages(items: Any, ctx: ImportContext, *, line: int | None = None) -> list[Message]:
    """Convert a Chat Completions ``messages`` array, resolving tool names from call ids."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(items if isinstance(items, list) else []):
        try:
            msg = convert_message(m, ctx, line=line, tool_names=names)
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="message", index=i, line=line)
            continue
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
    choices = as_list(resp.get("choices"))
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
    return [replace(m, usage=usage or m.usage, model=model, timestamp=epoch_iso_z(resp.get("created")), meta=meta)]


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
    return mentions_type(text, RESPONSES_SIGNALS)


def _anthropic_signals(doc: Any, text: str) -> bool:
    if isinstance(doc, dict) and ("system" in doc or "anthropic_version" in doc):
        return True
    return mentions_type(text, ANTHROPIC_BLOCK_TYPES)


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
class OpenAIChat(DocumentImporter):
    name = "openai_chat"
    description = "OpenAI Chat Completions messages: arrays, request/response logs, fine-tuning JSONL"
    extensions = (".json", ".jsonl")
    priority = 72
    not_a_record = "expected a 'messages' list (OpenAI Chat Completions)"
    not_a_document = "expected a JSON list of messages or an object with 'messages'"

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

    def list_session(self, path: Path, items: list[Any], ctx: ImportContext) -> Session | None:
        if items and any(_is_message(d) for d in items[:5]):
            return self.session(path.stem, convert_messages(items, ctx), {})
        return None

    def stream_session(self, path: Path, first: Any, ctx: ImportContext) -> Session | None:
        if not _is_message(first):
            return None

        # One message per line: one session, streamed.
        def messages() -> Iterator[Message]:
            names: dict[str, str] = {}
            for ln, r in iter_jsonl(path, ctx):
                if not _is_message(r):
                    ctx.warn("line is not a chat message; skipped", line=ln)
                    ctx.skip("malformed message")
                    continue
                try:
                    m = convert_message(r, ctx, line=ln, tool_names=names)
                except RECORD_ERRORS as e:
                    ctx.bad_record(e, what="message", line=ln)
                    continue
                if m is not None:
                    yield m

        return Session(external_id=path.stem, format=self.name, messages=messages(),
                       metadata={"layout": "message per line"})

    def record_session(
        self, rec: dict[str, Any], ctx: ImportContext, *, ext: str | None, line: int | None
    ) -> Session | None:
        if rec.get("object") == "chat.completion" and "messages" not in rec:
            msgs = convert_response(rec, ctx, line=line)
            return self.session(ext or str(rec.get("id") or f"line-{line}"), msgs, {})
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
        return self.session(ext_id, msgs, metadata, model=params.get("model") or None)


__all__ = ["OpenAIChat", "convert_message", "convert_messages", "convert_response"]
