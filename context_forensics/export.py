"""A stored session written out: ATIF, an OpenAI chat-completions request, or ctxf's own JSONL.

What the store holds is what is written: its text was redacted at ingest (unless the store was
made with redaction off), so an export holds no secret the store does not.

- ``atif``: an ATIF-v1.8 document (Harbor RFC 0001). Each message is a step (assistant ->
  ``agent`` with its tool calls, its recorded usage as ``metrics``, a thinking part as
  ``reasoning_content``; system and developer -> ``system``; user -> ``user``); a tool message
  answering a call of the step before it is that step's observation result; a user message ctxf
  read from an ATIF observation without a call goes back there. A history edit (a compaction,
  a truncation) is a system step with ``extra.context_management``; a compaction summary is a
  step with ``is_copied_context``. What ATIF has no field for (a message's kind, name, parts, a
  history edit's ranges, usage beyond prompt / completion / cached) is kept under ``extra.ctxf``
  so that ``ctxf ingest`` reads back the same messages.
- ``openai``: ``{"model", "messages"}``, the chat-completions request that would replay the
  session: roles, text, ``tool_calls`` and ``tool`` messages. It cannot hold recorded usage,
  timestamps, per-message models, a message's kind (a compaction summary is a plain message,
  a history-edit marker is left out: the model never read it), non-text parts or a reasoning item.
- ``jsonl``: ctxf's own lossless form: a header line ``{"ctxf_export": "jsonl", "version": 1,
  "session": {...}}``, then one ``{"message": {...}}`` line per stored message with every field.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from .records import (
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    KIND_HISTORY_EDIT,
    KIND_MESSAGE,
    Message,
)

FORMATS = ("atif", "openai", "jsonl")
ATIF_VERSION = "ATIF-v1.8"
JSONL_VERSION = 1
SESSION_FIELDS = ("external_id", "format", "title", "model", "started_at", "task", "outcome", "metadata")
_USAGE_EXTRA = ("cache_creation_tokens", "reasoning_tokens", "context_window", "prompt_tokens_error",
                "completion_tokens_error")


def message_dict(m: Message) -> dict[str, Any]:
    """Every field of a message, as JSON (``jsonl``)."""
    return {"role": m.role, "text": m.text, "kind": m.kind, "name": m.name,
            "tool_calls": [c.to_dict() for c in m.tool_calls], "tool_call_id": m.tool_call_id,
            "parts": list(m.parts), "usage": m.usage.to_dict() if m.usage else None,
            "timestamp": m.timestamp, "model": m.model, "meta": m.meta}


def session_header(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row.get("id"), "external_id": row.get("external_id"), "format": row.get("format"),
            "title": row.get("title"), "model": row.get("model"), "started_at": row.get("started_at"),
            "task": row.get("task"), "outcome": row.get("outcome"), "metadata": row.get("metadata") or {}}


def to_jsonl(row: dict[str, Any], messages: Iterable[Message]) -> str:
    lines = [json.dumps({"ctxf_export": "jsonl", "version": JSONL_VERSION, "session": session_header(row)},
                        ensure_ascii=False)]
    lines += [json.dumps({"message": message_dict(m)}, ensure_ascii=False) for m in messages]
    return "\n".join(lines) + "\n"


def to_openai(row: dict[str, Any], messages: Iterable[Message]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.kind in (KIND_HISTORY_EDIT, KIND_COMPACTION_BOUNDARY):
            continue
        d: dict[str, Any] = {"role": m.role, "content": m.text}
        if m.name and m.role != "tool":
            d["name"] = m.name
        if m.tool_calls:
            d["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                               for c in m.tool_calls]
            if not m.text:
                d["content"] = None
        if m.role == "tool":
            d["tool_call_id"] = m.tool_call_id
        out.append(d)
    return {"model": row.get("model"), "messages": out}


def _ctxf_extra(m: Message, *, observation: bool = False) -> dict[str, Any]:
    """What ATIF has no field for, for ``extra.ctxf``."""
    d: dict[str, Any] = {}
    if m.kind != KIND_MESSAGE:
        d["kind"] = m.kind
    if m.name is not None:
        d["name"] = m.name
    if m.parts:
        d["parts"] = list(m.parts)
    if m.role == "developer":
        d["role"] = "developer"
    if observation:
        d["role"] = m.role
        if m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        if m.timestamp is not None:
            d["timestamp"] = m.timestamp
    meta = {k: v for k, v in m.meta.items() if k not in ("step_id", "cost_usd", "atif_observation")}
    if meta:
        d["meta"] = meta
    return d


def _metrics(m: Message) -> dict[str, Any] | None:
    """An ATIF step's metrics from the message's usage: ATIF's names where it has them, the rest
    (``_USAGE_EXTRA``) under ``extra``."""
    if m.usage is None:
        return None
    usage = m.usage.to_dict()
    d: dict[str, Any] = {k: usage.pop(k) for k in ("prompt_tokens", "completion_tokens") if k in usage}
    if "cache_read_tokens" in usage:
        d["cached_tokens"] = usage.pop("cache_read_tokens")
    if isinstance(m.meta.get("cost_usd"), (int, float)):
        d["cost_usd"] = m.meta["cost_usd"]
    if usage:
        d["extra"] = usage
    return d


def to_atif(row: dict[str, Any], messages: Iterable[Message], *, version: str = "") -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    last_agent: dict[str, Any] | None = None  # the step a tool result may answer
    totals = {"prompt": 0, "completion": 0, "cached": 0, "any": False}
    models: list[str] = []
    for m in messages:
        if m.role == "tool" or (m.role == "user" and "atif_observation" in m.meta):
            calls = {c.get("tool_call_id") for c in (last_agent or {}).get("tool_calls", [])}
            answers = last_agent is not None and (m.role == "user" or m.tool_call_id in calls)
            result: dict[str, Any] = {"content": m.text}
            if m.role == "tool" and answers:
                result["source_call_id"] = m.tool_call_id
            extra = _ctxf_extra(m, observation=True)
            if answers:
                extra.pop("role", None)
                if m.role == "tool":
                    extra.pop("tool_call_id", None)
                if extra:
                    result["extra"] = {"ctxf": extra}
                assert last_agent is not None  # what answers says
                last_agent.setdefault("observation", {"results": []})["results"].append(result)
                continue
            # A tool result with no call in the step before it: a system step holding it.
            result["extra"] = {"ctxf": extra}
            steps.append({"step_id": len(steps) + 1, "source": "system", "message": "",
                          "observation": {"results": [result]}, "extra": {"ctxf": {"kind": "observation_only"}}})
            if m.timestamp is not None:
                steps[-1]["timestamp"] = m.timestamp
            last_agent = None
            continue
        step: dict[str, Any] = {"step_id": len(steps) + 1}
        if m.timestamp is not None:
            step["timestamp"] = m.timestamp
        step["source"] = {"assistant": "agent", "user": "user"}.get(m.role, "system")
        if m.model and m.role == "assistant":
            step["model_name"] = m.model
            if m.model not in models:
                models.append(m.model)
        step["message"] = m.text
        thinking = [t for p in m.parts if p.get("type") == "thinking" and isinstance(t := p.get("text"), str)]
        if thinking and m.role == "assistant":
            step["reasoning_content"] = "\n".join(thinking)
        if m.tool_calls:
            step["tool_calls"] = [{"tool_call_id": c.id or f"call_{len(steps) + 1}_{i}", "function_name": c.name,
                                   "arguments": _arguments(c.arguments)} for i, c in enumerate(m.tool_calls)]
        metrics = _metrics(m) if m.role == "assistant" else None
        if metrics:
            step["metrics"] = metrics
            u = m.usage
            assert u is not None  # _metrics is None without usage
            totals["any"] = True
            totals["prompt"] += u.prompt_tokens or 0
            totals["completion"] += u.completion_tokens or 0
            totals["cached"] += u.cache_read_tokens or 0
        if m.kind == KIND_COMPACTION_SUMMARY:
            step["is_copied_context"] = True
        extra = {}
        if m.kind in (KIND_HISTORY_EDIT, KIND_COMPACTION_BOUNDARY):
            step["source"] = "system"
            edit = e if isinstance(e := m.meta.get("history_edit"), dict) else {}
            extra["context_management"] = {"type": str(edit.get("type") or "compaction"), "boundary": "replace"}
        ctxf = _ctxf_extra(m)
        if any(c.id is None for c in m.tool_calls):
            ctxf["tool_call_ids"] = [c.id for c in m.tool_calls]
        if any(not isinstance(_arguments(c.arguments), dict) or
               json.dumps(_arguments(c.arguments), ensure_ascii=False) != c.arguments for c in m.tool_calls):
            ctxf["arguments"] = [c.arguments for c in m.tool_calls]
        if ctxf:
            extra["ctxf"] = ctxf
        if extra:
            step["extra"] = extra
        steps.append(step)
        last_agent = step if m.role == "assistant" else None
    doc: dict[str, Any] = {
        "schema_version": version or ATIF_VERSION,
        "session_id": str(row.get("external_id") or row.get("id")),
        "agent": {"name": str((row.get("metadata") or {}).get("agent", {}).get("name")
                              if isinstance((row.get("metadata") or {}).get("agent"), dict)
                              else (row.get("metadata") or {}).get("agent") or row.get("format") or "unknown"),
                  "version": "unknown", "model_name": row.get("model") or (models[0] if models else None),
                  "extra": {"exported_by": "ctxf", "source_format": row.get("format")}},
        "steps": steps,
    }
    if doc["agent"]["model_name"] is None:
        del doc["agent"]["model_name"]
    if totals["any"]:
        doc["final_metrics"] = {"total_prompt_tokens": totals["prompt"],
                                "total_completion_tokens": totals["completion"],
                                "total_cached_tokens": totals["cached"], "total_steps": len(steps)}
    doc["extra"] = {"ctxf": {"title": row.get("title"), "task": row.get("task"), "outcome": row.get("outcome"),
                             "model": row.get("model"), "metadata": {"exported_from": row.get("id")}}}
    return doc


def _arguments(text: str) -> Any:
    """A tool call's arguments as ATIF holds them (an object); text that is no JSON object
    stays text (kept exactly in ``extra.ctxf.arguments``)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {"input": text}
    return value if isinstance(value, dict) else {"input": text}


def render(fmt: str, row: dict[str, Any], messages: list[Message]) -> str:
    """The export of ``fmt`` as text."""
    if fmt == "jsonl":
        return to_jsonl(row, messages)
    doc = to_atif(row, messages) if fmt == "atif" else to_openai(row, messages)
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
