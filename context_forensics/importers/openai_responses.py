"""OpenAI Responses API item lists, request bodies and response objects.

Accepted shapes:

- a JSON list of input/output items -> one session;
- a request body ``{"input": [...] | str, "instructions", "model", "tools", ...}``, optionally
  with the call's result (``"output": [...]`` + ``"usage"``, or ``"response": {...}``);
- a response object ``{"object": "response", "output": [...], "usage", "instructions"}``;
- JSONL of items (one session, streamed) or of request/response objects (one session each).

Items: ``message`` (input_text / output_text / input_image / input_file / refusal parts, or a
plain string), ``function_call`` / ``function_call_output``, ``custom_tool_call`` / output,
``reasoning`` (kind="reasoning": summary and reasoning text as thinking parts, encrypted
content by length), built-in tool calls (web_search_call, file_search_call, computer_call,
code_interpreter_call, image_generation_call, local_shell_call, shell_call, apply_patch_call,
mcp_call) as assistant tool calls, and their ``*_output`` items as tool messages.
Consecutive tool-call items that follow an assistant message join it, as one turn.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..records import KIND_COMPACTION_SUMMARY, KIND_REASONING, Message, Session, ToolCall
from ._documents import DocumentImporter
from ._images import image_part
from ._openai_shapes import content_parts, epoch_iso_z, request_params, usage_from_responses
from ._sniffing import FOREIGN_KEYS, foreign_document, head_jsonl_records, head_records, mostly
from .base import RECORD_ERRORS, ImportContext, iter_jsonl, json_text, register, str_or_none

ITEM_TYPES = frozenset(
    {
        "message", "function_call", "function_call_output", "reasoning", "custom_tool_call",
        "custom_tool_call_output", "web_search_call", "file_search_call", "computer_call",
        "computer_call_output", "code_interpreter_call", "image_generation_call",
        "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
        "apply_patch_call", "apply_patch_call_output", "mcp_call", "mcp_list_tools",
        "mcp_approval_request", "mcp_approval_response", "item_reference", "compaction",
    }
)
RESPONSES_PART_TYPES = ("input_text", "output_text", "input_image", "input_file", "summary_text")
_SKIPPED = {"mcp_list_tools", "mcp_approval_request", "mcp_approval_response"}
_BUILTIN_NAMES = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "computer_call": "computer",
    "code_interpreter_call": "code_interpreter",
    "image_generation_call": "image_generation",
    "local_shell_call": "local_shell",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
}


def _parts(content: Any) -> tuple[str, list[dict]]:
    """(text, parts) from a Responses message content (a string or a list of parts)."""
    if not isinstance(content, list):
        return content_parts(content)
    texts: list[str] = []
    parts: list[dict] = []
    rest: list[Any] = []
    for p in content:
        if not isinstance(p, dict):
            rest.append(p)
            continue
        t = p.get("type")
        if t in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            texts.append(str(p.get("text") or ""))
        elif t == "input_image":
            url = p.get("image_url")
            if isinstance(url, str):
                parts.append(image_part(url=url, detail=p.get("detail")))
            else:
                part: dict[str, Any] = {"type": "image", "source": "file"}
                if p.get("file_id"):
                    part["file_id"] = p["file_id"]
                if p.get("detail"):
                    part["detail"] = p["detail"]
                parts.append(part)
        elif t == "input_file":
            part = {"type": "file"}
            for key in ("file_id", "filename", "file_url"):
                if p.get(key):
                    part[key] = p[key]
            if isinstance(p.get("file_data"), str):
                part["bytes"] = len(p["file_data"].partition(",")[2] or p["file_data"]) * 3 // 4
            parts.append(part)
        else:
            rest.append(p)
    if rest:
        t2, p2 = content_parts(rest)
        if t2:
            texts.append(t2)
        parts.extend(p2)
    return "\n".join(texts), parts


def _output_text(output: Any) -> tuple[str, list[dict]]:
    """A tool output: a string, a list of content parts, or a structured object."""
    if isinstance(output, list):
        shell = [o for o in output if isinstance(o, dict) and ("stdout" in o or "stderr" in o)]
        if shell:
            return "\n".join(str(o.get("stdout") or "") + str(o.get("stderr") or "") for o in shell), []
        return _parts(output)
    if isinstance(output, dict):
        if output.get("type") == "computer_screenshot":
            url = output.get("image_url")
            return "", [image_part(url=url) if isinstance(url, str) else {"type": "image", "source": "file"}]
        return json_text(output), []
    return json_text(output), []


def _reasoning(item: dict) -> Message:
    parts: list[dict] = []
    content_text = _parts(item.get("content"))[0] if isinstance(item.get("content"), list) else ""
    if content_text:
        parts.append({"type": "thinking", "text": content_text})
    summary = item.get("summary")
    summary_text = _parts(summary)[0] if isinstance(summary, list) else (summary if isinstance(summary, str) else "")
    if summary_text:
        parts.append({"type": "thinking", "text": summary_text, "summary": True})
    enc = item.get("encrypted_content")
    if isinstance(enc, str) and enc:
        parts.append({"type": "redacted_thinking", "bytes": len(enc)})
    meta = {"item_id": item["id"]} if item.get("id") else {}
    return Message(role="assistant", kind=KIND_REASONING, parts=tuple(parts), meta=meta)


def _call_from_item(item: dict, t: str) -> tuple[ToolCall, list[dict]]:
    """A tool-call item -> (ToolCall, extra parts such as built-in tool outputs)."""
    extra: list[dict] = []
    call_id = item.get("call_id") or item.get("id")
    if t == "function_call":
        return ToolCall(str(item.get("name") or ""), json_text(item.get("arguments")), call_id), extra
    if t == "custom_tool_call":
        return ToolCall(str(item.get("name") or ""), json_text(item.get("input")), call_id), extra
    if t == "mcp_call":
        return ToolCall(str(item.get("name") or ""), json_text(item.get("arguments")), item.get("id")), extra
    name = _BUILTIN_NAMES.get(t) or t.removesuffix("_call")
    if t == "web_search_call":
        args = item.get("action") if item.get("action") is not None else {}
        return ToolCall(name, json_text(args), item.get("id")), extra
    if t == "file_search_call":
        args = {"queries": item.get("queries")}
        results = item.get("results")
        if isinstance(results, list) and results:
            extra.append({
                "type": "file_search_results",
                "results": [{k: r.get(k) for k in ("filename", "file_id", "score")}
                            for r in results if isinstance(r, dict)],
                "text": "\n".join(str(r.get("text") or "") for r in results if isinstance(r, dict)),
            })
        return ToolCall(name, json_text(args), item.get("id")), extra
    if t == "code_interpreter_call":
        outputs = item.get("outputs")
        if isinstance(outputs, list):
            logs = [str(o.get("logs") or "") for o in outputs if isinstance(o, dict) and o.get("type") == "logs"]
            if logs:
                extra.append({"type": "code_interpreter_output", "text": "\n".join(logs)})
            for o in outputs:
                if isinstance(o, dict) and o.get("type") == "image" and isinstance(o.get("url"), str):
                    extra.append(image_part(url=o["url"]))
        return ToolCall(name, json_text({"code": item.get("code")}), item.get("id")), extra
    if t == "image_generation_call":
        if isinstance(item.get("result"), str) and item["result"]:
            extra.append(image_part(base64_data=item["result"]))
        return ToolCall(name, "", item.get("id")), extra
    if t == "apply_patch_call":
        return ToolCall(name, json_text(item.get("operation")), call_id), extra
    args = item.get("action") if "action" in item else item.get("arguments", item.get("input"))
    return ToolCall(name, json_text(args if args is not None else {}), call_id), extra


def iter_items(items: Iterable[tuple[int | None, Any]], ctx: ImportContext) -> Iterator[Message]:
    """Convert ``(line, item)`` pairs lazily; tool-call items join the assistant turn before them.

    A response writes its ``reasoning`` items before its message and tool calls; they are the call's
    output, which the next call reads and the call itself did not: each follows the assistant turn
    of its run of output items (as the Codex importer writes them), so that the call's window, all
    that comes before its assistant message, does not hold them. A reasoning item with no assistant
    turn after it (before the next input) stays where it is."""
    names: dict[str, str] = {}
    pending: Message | None = None  # an assistant message that later call items may join
    reasoning: list[Message] = []  # reasoning items waiting for the assistant turn they precede

    def flush() -> Iterator[Message]:  # the assistant turn, then its reasoning
        nonlocal pending
        if pending is not None:
            yield pending
            pending = None
        yield from reasoning
        reasoning.clear()

    for index, (line, item) in enumerate(items):
        try:
            if not isinstance(item, dict):
                ctx.warn("item is not an object; skipped", line=line)
                ctx.skip("malformed item")
                continue
            t = item.get("type")
            if t is None and "role" in item:
                t = "message"
            if t in _SKIPPED:
                ctx.skip(str(t))
                continue
            if t == "item_reference":
                ctx.warn(f"item_reference {item.get('id')!r} points at a stored item that is not in this file; "
                         "skipped", line=line)
                ctx.skip("item_reference")
                continue
            if isinstance(t, str) and t.endswith("_call"):
                call, extra = _call_from_item(item, t)
                if call.id:
                    names[call.id] = call.name
                if pending is not None and pending.kind == "message":
                    pending = replace(pending, tool_calls=pending.tool_calls + (call,),
                                      parts=pending.parts + tuple(extra))
                else:
                    pending = Message(role="assistant", tool_calls=(call,), parts=tuple(extra))
                if t == "mcp_call" and (item.get("output") is not None or item.get("error")):
                    yield from flush()
                    text = json_text(item.get("output") if item.get("output") is not None else item.get("error"))
                    meta: dict[str, Any] = {"is_error": True} if item.get("error") else {}
                    yield Message(role="tool", text=text, name=call.name, tool_call_id=call.id, meta=meta)
                continue
            if t == "reasoning":
                reasoning.append(_reasoning(item))
                continue
            if t == "message" and str(item.get("role") or "user").lower() == "assistant":
                if pending is not None:  # a second message of the run: the first one's turn ends
                    yield pending
                    pending = None
            else:
                yield from flush()
            if t == "message":
                role = str(item.get("role") or "user").lower()
                meta = {}
                if role not in ("user", "assistant", "system", "developer"):
                    ctx.warn(f"unknown role {item.get('role')!r}; read as user", line=line)
                    meta["role"] = item.get("role")
                    role = "user"
                text, parts = _parts(item.get("content"))
                if any(p.get("type") == "refusal" for p in parts):
                    meta["refusal"] = True
                if item.get("phase"):
                    meta["phase"] = item["phase"]
                msg = Message(role=role, text=text, parts=tuple(parts), meta=meta)
                if role == "assistant":
                    pending = msg
                else:
                    yield msg
            elif isinstance(t, str) and t.endswith("_call_output"):
                call_id = item.get("call_id") or item.get("id")
                text, parts = _output_text(item.get("output"))
                meta = {"status": item["status"]} if isinstance(item.get("status"), str) else {}
                yield Message(role="tool", text=text, parts=tuple(parts), tool_call_id=call_id,
                              name=names.get(call_id) if isinstance(call_id, str) else None, meta=meta)
            elif t in ("compaction", "compaction_summary"):
                enc = item.get("encrypted_content")
                blob = ({"type": "encrypted_compaction", "bytes": len(enc)},) if isinstance(enc, str) else ()
                yield Message(role="user", kind=KIND_COMPACTION_SUMMARY, text=str(item.get("summary") or ""),
                              parts=blob)
            else:
                ctx.warn(f"unknown item type {t!r}; skipped", line=line)
                ctx.skip(f"item {t}", unknown=True)
        except RECORD_ERRORS as e:  # an item of unexpected shape: skipped, counted, the rest kept
            ctx.bad_record(e, what="item", index=index, line=line)

    yield from flush()


def convert_items(items: Any, ctx: ImportContext, *, line: int | None = None) -> list[Message]:
    """Convert a Responses ``input``/``output`` list (a plain string input is one user message)."""
    if isinstance(items, str):
        return [Message(role="user", text=items)]
    if not isinstance(items, list):
        return []
    return list(iter_items(((line, it) for it in items), ctx))


def request_messages(body: dict[str, Any], ctx: ImportContext, *, line: int | None = None) -> list[Message]:
    """The context a request sends: ``instructions`` as a system message, then ``input``."""
    out: list[Message] = []
    instr = body.get("instructions")
    if isinstance(instr, str) and instr:
        out.append(Message(role="system", text=instr, meta={"source": "instructions"}))
    elif isinstance(instr, list):  # a prompt given as input items
        out.extend(convert_items(instr, ctx, line=line))
    out.extend(convert_items(body.get("input"), ctx, line=line))
    return out


def answer_index(msgs: list[Message]) -> int:
    """The position of a call's answer among its output messages (see ``convert_response``)."""
    return next((i for i, m in enumerate(msgs) if m.role == "assistant" and m.kind != KIND_REASONING), 0)


def convert_response(resp: Any, ctx: ImportContext, *, line: int | None = None) -> list[Message]:
    """A response object's ``output`` items, with the call's usage on its answer: the first
    assistant message that is not a reasoning item (replay's step for the call), else the first.
    A reasoning model's output starts with a ``reasoning`` item; usage put there would leave the
    step without its recorded prompt."""
    if not isinstance(resp, dict):
        return []
    out = convert_items(resp.get("output") or [], ctx, line=line)
    usage = usage_from_responses(resp.get("usage"))
    if not out:
        if usage is None and resp.get("status") not in ("incomplete", "failed"):
            return []
        out = [Message(role="assistant")]
    k = answer_index(out)
    meta = dict(out[k].meta)
    if resp.get("id"):
        meta["response_id"] = resp["id"]
    if resp.get("status") and resp["status"] != "completed":
        meta["status"] = resp["status"]
    if isinstance(resp.get("incomplete_details"), dict):
        meta["incomplete_details"] = resp["incomplete_details"]
    model = resp.get("model") if isinstance(resp.get("model"), str) else None
    out[k] = replace(out[k], usage=usage, meta=meta, timestamp=epoch_iso_z(resp.get("created_at")))
    return [replace(m, model=model) if m.role == "assistant" else m for m in out]


def _is_item(d: Any) -> bool:
    if not isinstance(d, dict) or "payload" in d or "record_type" in d:
        return False
    t = d.get("type")
    if isinstance(t, str) and t in ITEM_TYPES:
        return t != "message" or "role" in d
    if t is None and "role" in d and isinstance(d.get("content"), list):
        return any(isinstance(p, dict) and isinstance(p.get("type"), str) and p["type"] in RESPONSES_PART_TYPES
                   for p in d["content"])
    return False


def _is_record(d: Any) -> bool:
    """A JSONL line of this format: an item, a response, or a request of items or text."""
    return _is_item(d) or _is_response(d) or (
        _is_request(d) and (isinstance(d["input"], str) or _items_ok(d["input"])))


def _is_request(d: Any) -> bool:
    return isinstance(d, dict) and "input" in d and (
        isinstance(d["input"], list) or "instructions" in d or "model" in d
    ) and not (FOREIGN_KEYS & d.keys())


def _is_response(d: Any) -> bool:
    return isinstance(d, dict) and d.get("object") == "response" and isinstance(d.get("output"), list)


@register
class OpenAIResponses(DocumentImporter):
    name = "openai_responses"
    description = "OpenAI Responses API input/output items, request bodies and response objects"
    extensions = (".json", ".jsonl")
    priority = 73
    not_a_record = "expected Responses API items ('input' or 'output')"
    not_a_document = "expected a JSON list of items or a request/response object"

    def sniff(self, path: Path, head: bytes) -> bool:
        kind, doc = head_records(path, head)
        if doc is None or foreign_document(path, head, doc):
            return False
        if kind == "jsonl":
            return mostly(head_jsonl_records(head), _is_record)
        if isinstance(doc, list):
            return bool(doc) and any(_is_item(d) for d in doc) and all(
                isinstance(d, dict) and ("type" in d or "role" in d) for d in doc
            )
        if isinstance(doc, dict):
            if _is_response(doc):
                return True
            if _is_request(doc):
                inp = doc["input"]
                return isinstance(inp, str) or _items_ok(inp)
        return False

    def list_session(self, path: Path, items: list[Any], ctx: ImportContext) -> Session | None:
        return self.session(path.stem, convert_items(items, ctx), {})

    def stream_session(self, path: Path, first: Any, ctx: ImportContext) -> Session | None:
        if not _is_item(first):
            return None
        return Session(external_id=path.stem, format=self.name, messages=iter_items(iter_jsonl(path, ctx), ctx),
                       metadata={"layout": "item per line"})

    def record_session(
        self, rec: dict[str, Any], ctx: ImportContext, *, ext: str | None, line: int | None
    ) -> Session | None:
        ext_id = ext or str(rec.get("id") or f"line-{line}")
        if _is_response(rec):
            msgs: list[Message] = []
            if isinstance(rec.get("instructions"), str) and rec["instructions"]:
                msgs.append(Message(role="system", text=rec["instructions"], meta={"source": "instructions"}))
            msgs.extend(convert_response(rec, ctx, line=line))
            return self.session(ext_id, msgs, _metadata(rec, line), model=str_or_none(rec.get("model")))
        if not _is_request(rec):
            ctx.warn("record is neither Responses items nor a request/response; skipped", line=line)
            ctx.skip("malformed record")
            return None
        msgs = request_messages(rec, ctx, line=line)
        params = request_params(rec)
        out: list[Message] = []
        if isinstance(rec.get("response"), dict):
            out = convert_response(rec["response"], ctx, line=line)
        elif isinstance(rec.get("output"), list):
            out = convert_response(rec, ctx, line=line)
        if out and params:
            k = answer_index(out)
            out[k] = replace(out[k], meta={**out[k].meta, "request": params})
        msgs.extend(out)
        return self.session(ext_id, msgs, _metadata(rec, line), model=str_or_none(params.get("model")))


def _items_ok(items: Any) -> bool:
    return isinstance(items, list) and bool(items) and (
        _is_item(items[0]) or (isinstance(items[0], dict) and "role" in items[0] and "content" in items[0])
    )


def _metadata(rec: dict, line: int | None) -> dict[str, Any]:
    md: dict[str, Any] = {}
    if line is not None:
        md["line"] = line
    if rec.get("tools"):
        md["tools"] = rec["tools"]
    if rec.get("previous_response_id"):
        md["previous_response_id"] = rec["previous_response_id"]
    return md
