"""Pydantic AI message histories: the JSON ``ModelMessagesTypeAdapter.dump_json(result.all_messages())``
writes, one session per file.

The file is a JSON list of ``ModelRequest`` (``"kind": "request"``) and ``ModelResponse``
(``"kind": "response"``) objects, each with ``parts`` told apart by ``part_kind``:

- request parts: ``system-prompt`` (a system message), ``user-prompt`` (text, or a list of text
  and ``image-url`` / ``binary`` / ``document-url`` ... items), ``tool-return`` (a tool message; an
  ``outcome`` of ``failed`` or ``retried`` reaches the model as ``{"error": ...}``, as Pydantic AI
  renders it), the legacy ``retry-prompt`` (a tool message when it names a tool, else a user
  message, with Pydantic AI's "Fix the errors and try again." wording), ``retry-feedback`` (a user
  message), ``compaction`` (a compaction summary); the bookkeeping parts (instruction and tool
  availability deltas, ...) are counted and skipped. A request's ``instructions`` (sent as the
  system prompt of that call, not stored as a part) is a system message where it first appears
  or changes.
- response parts: ``text``, ``tool-call`` and ``builtin-tool-call`` (tool calls), ``thinking``
  (thinking parts), ``builtin-tool-return`` (a tool message after the reply), ``file``.

Usage: each response's ``usage`` is that call's (a ``RequestUsage``): ``prompt_tokens`` =
``input_tokens``, which in Pydantic AI already includes cache reads and writes (``usage.py``:
"this total includes cached tokens"), ``cache_read_tokens`` / ``cache_write_tokens``,
``output_reasoning_tokens``; the pre-1.0 names ``request_tokens`` / ``response_tokens`` are read
too. A response whose ``unmeasured_requests`` is set omitted usage: none is recorded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import KIND_COMPACTION_SUMMARY, Message, Session, ToolCall, Usage
from ._documents import first_user_title
from ._images import image_part
from ._sniffing import partial_json
from ._stream import iter_json_array
from .base import (
    HEAD_BYTES,
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    as_int,
    as_list,
    as_str,
    head_text,
    json_text,
    register,
)

ERROR_OUTCOMES = ("failed", "retried")
_CUT_FIRST_PART = re.compile(r'\[\s*\{\s*"parts"\s*:\s*\[\s*\{\s*"content"\s*:\s*"')
_BOOKKEEPING = {"instruction", "instruction-delta", "instruction-baseline", "instruction-digest",
                "tool-availability-delta", "capability-load-delta", "model-settings-delta"}


def usage_of(d: Any) -> Usage | None:
    """A ``RequestUsage`` dict as Usage (``input_tokens`` includes cached tokens in Pydantic AI)."""
    if not isinstance(d, dict) or as_int(d.get("unmeasured_requests")):
        return None
    inp = as_int(d.get("input_tokens"))
    if inp is None:
        inp = as_int(d.get("request_tokens"))
    out = as_int(d.get("output_tokens"))
    if out is None:
        out = as_int(d.get("response_tokens"))
    u = Usage(prompt_tokens=inp, completion_tokens=out,
              cache_read_tokens=as_int(d.get("cache_read_tokens")) or None,
              cache_creation_tokens=as_int(d.get("cache_write_tokens")) or None,
              reasoning_tokens=as_int(d.get("output_reasoning_tokens")) or None)
    return None if u.is_empty() else u


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _user_content(content: Any) -> tuple[str, list[dict]]:
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    parts: list[dict] = []
    for item in as_list(content):
        if isinstance(item, str):
            texts.append(item)
            continue
        item = as_dict(item)
        kind = item.get("kind")
        if kind in ("text-content", "structured-content"):
            texts.append(str(item.get("content") or ""))
        elif kind == "image-url":
            parts.append(image_part(url=as_str(item.get("url"))))
        elif kind == "binary" and str(item.get("media_type") or "").startswith("image/"):
            parts.append(image_part(base64_data=as_str(item.get("data")), media_type=item.get("media_type")))
        elif kind is not None:
            part: dict[str, Any] = {"type": str(kind)}
            for key in ("url", "media_type", "file_id"):
                if as_str(item.get(key)):
                    part[key] = item[key]
            if isinstance(item.get("data"), str):
                part["bytes"] = len(item["data"]) * 3 // 4
            parts.append(part)
    return "\n".join(texts), parts


def _tool_return_text(part: dict) -> str:
    content = part.get("content")
    text = content if isinstance(content, str) else ("" if content is None else _dump(content))
    if part.get("outcome") in ERROR_OUTCOMES:
        err = content if part.get("outcome") == "retried" and content is not None and not isinstance(
            content, str) else text
        return _dump({"error": err})
    return text


def _retry_prompt_text(part: dict) -> str:
    content = part.get("content")
    if isinstance(content, str):
        desc = content if part.get("tool_name") else f"Validation feedback:\n{content}"
    else:
        errors = as_list(content)
        desc = (f"{len(errors)} validation error{'s' if len(errors) != 1 else ''}:\n```json\n"
                f"{json.dumps(errors, indent=2, ensure_ascii=False)}\n```")
    return f"{desc}\n\nFix the errors and try again."


def _tool_message(part: dict, text: str, meta: dict[str, Any]) -> Message:
    return Message(role="tool", text=text, name=as_str(part.get("tool_name")),
                   tool_call_id=as_str(part.get("tool_call_id")), timestamp=as_str(part.get("timestamp")), meta=meta)


def request_messages(req: dict, ctx: ImportContext) -> list[Message]:
    out: list[Message] = []
    for part in as_list(req.get("parts")):
        part = as_dict(part)
        kind = part.get("part_kind")
        ts = as_str(part.get("timestamp"))
        if kind == "system-prompt":
            out.append(Message(role="system", text=str(part.get("content") or ""), timestamp=ts))
        elif kind == "user-prompt":
            text, parts = _user_content(part.get("content"))
            out.append(Message(role="user", text=text, parts=tuple(parts), timestamp=ts))
        elif kind in ("tool-return", "tool-search-return", "capability-load-return"):
            meta = {"outcome": part["outcome"]} if as_str(part.get("outcome")) and part["outcome"] != "success" else {}
            if meta.get("outcome") in ERROR_OUTCOMES:
                meta["is_error"] = True
            out.append(_tool_message(part, _tool_return_text(part), meta))
        elif kind == "retry-prompt":
            text = _retry_prompt_text(part)
            if part.get("tool_name"):
                out.append(_tool_message(part, text, {"retry": True, "is_error": True}))
            else:
                out.append(Message(role="user", text=text, timestamp=ts, meta={"retry": True}))
        elif kind == "retry-feedback":
            content = part.get("content")
            out.append(Message(role="user", text=content if isinstance(content, str) else _dump(content),
                               timestamp=ts, meta={"retry": True}))
        elif kind == "compaction":
            out.append(Message(role="user", kind=KIND_COMPACTION_SUMMARY, text=str(part.get("content") or "")))
        elif kind in _BOOKKEEPING:
            ctx.skip(f"{kind} part")
        else:
            ctx.skip(f"unknown request part {kind!r}", unknown=True)
    return out


def response_messages(resp: dict, ctx: ImportContext) -> list[Message]:
    texts: list[str] = []
    calls: list[ToolCall] = []
    parts: list[dict] = []
    after: list[Message] = []
    for part in as_list(resp.get("parts")):
        part = as_dict(part)
        kind = part.get("part_kind")
        if kind == "text":
            texts.append(str(part.get("content") or ""))
        elif kind in ("tool-call", "builtin-tool-call", "tool-search-call", "builtin-tool-search-call",
                      "capability-load-call"):
            calls.append(ToolCall(str(part.get("tool_name") or ""), json_text(part.get("args")),
                                  as_str(part.get("tool_call_id"))))
        elif kind == "thinking":
            if part.get("content"):
                parts.append({"type": "thinking", "text": str(part["content"])})
            elif as_str(part.get("signature")):
                parts.append({"type": "redacted_thinking", "bytes": len(part["signature"])})
        elif kind in ("builtin-tool-return", "builtin-tool-search-return"):
            after.append(_tool_message(part, _tool_return_text(part), {"builtin": True}))
        elif kind == "file":
            c = as_dict(part.get("content"))
            parts.append(image_part(base64_data=as_str(c.get("data")), media_type=c.get("media_type"))
                         if str(c.get("media_type") or "").startswith("image/") else {"type": "file"})
        elif kind == "compaction":
            after.append(Message(role="user", kind=KIND_COMPACTION_SUMMARY, text=str(part.get("content") or "")))
        else:
            ctx.skip(f"unknown response part {kind!r}", unknown=True)
    meta: dict[str, Any] = {}
    for key in ("finish_reason", "provider_name", "provider_response_id"):
        if as_str(resp.get(key)):
            meta[key] = resp[key]
    msg = Message(role="assistant", text="\n".join(texts), tool_calls=tuple(calls), parts=tuple(parts),
                  usage=usage_of(resp.get("usage")), model=as_str(resp.get("model_name")),
                  timestamp=as_str(resp.get("timestamp")), meta=meta)
    return [msg, *after]


def is_message(d: Any) -> bool:
    return isinstance(d, dict) and d.get("kind") in ("request", "response") and isinstance(d.get("parts"), list)


@register
class PydanticAI(Importer):
    """Pydantic AI ``all_messages()`` dumps: requests and responses as one conversation."""

    name = "pydantic_ai"
    description = ("Pydantic AI message history JSON (ModelMessagesTypeAdapter.dump_json(result.all_messages()), "
                   "wherever the application saved it)")
    extensions = (".json",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if not text.startswith("["):
            return False
        doc = partial_json(text)
        if not isinstance(doc, list) or not doc or not isinstance(doc[0], dict):
            return False
        parts = doc[0].get("parts")
        if not isinstance(parts, list) or not parts or not isinstance(parts[0], dict):
            return False
        if is_message(doc[0]):
            return isinstance(parts[0].get("part_kind"), str)
        # Pydantic AI writes a message's "kind" after its parts, and a part's "part_kind" after its
        # content: a first prompt longer than the head leaves both out. Then the head is cut inside
        # the first part, which starts as Pydantic AI's parts do.
        return len(head) >= HEAD_BYTES and len(doc) == 1 and "part_kind" not in parts[-1] and \
            bool(_CUT_FIRST_PART.match(text))

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        msgs: list[Message] = []
        runs: list[str] = []
        conversations: list[str] = []
        instructions: str | None = None
        calls = 0
        read = 0
        for index, rec in iter_json_array(path, ctx):
            try:
                if not is_message(rec):
                    ctx.warn(f"item {index}: not a ModelRequest/ModelResponse (no 'kind' and 'parts'); skipped")
                    ctx.skip("malformed item")
                    continue
                for key, seen in (("run_id", runs), ("conversation_id", conversations)):
                    v = as_str(rec.get(key))
                    if v and v not in seen:
                        seen.append(v)
                if rec["kind"] == "request":
                    new = request_messages(rec, ctx)
                    instr = rec.get("instructions")
                    if isinstance(instr, str) and instr and instr != instructions:
                        instructions = instr
                        new.insert(0, Message(role="system", text=instr, meta={"source": "instructions"}))
                else:
                    new = response_messages(rec, ctx)
                    calls += 1
                msgs.extend(new)
                read += 1
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what="message", index=index)
        if not read and not ctx.bad:
            raise InputError("no ModelRequest / ModelResponse in the list", where=str(path),
                             hint="force another format with --format")
        if not read:
            return
        metadata: dict[str, Any] = {"agent": "pydantic-ai", "model_calls": calls}
        if runs:
            metadata["runs"] = runs
        if conversations:
            metadata["conversation_id"] = conversations[0]
        yield Session(external_id=conversations[0] if len(conversations) == 1 else path.stem, format=self.name,
                      messages=msgs, title=first_user_title(msgs),
                      model=next((m.model for m in msgs if m.model), None),
                      started_at=next((m.timestamp for m in msgs if m.timestamp), None), metadata=metadata)
