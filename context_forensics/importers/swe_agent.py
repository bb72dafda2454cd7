"""SWE-agent ``.traj`` trajectories (classic v0.x and 1.x), plus the SWE-bench helpers shared
by the agent-trajectory importers (``mini_swe_agent``, ``openhands``).

A ``.traj`` is one JSON object: ``history[]`` (the chat messages of every agent, as SWE-agent
keeps them: ``role``, ``content``, ``agent``, ``message_type``, ``is_demo``, ``thought``,
``action``, ``tool_calls``, ``tool_call_ids``, ``thinking_blocks``), ``trajectory[]`` (one
step per model call: ``thought``/``action``/``observation``/``response``, and in 1.x the
``query`` the model saw), ``info`` (``exit_status``, ``submission``, aggregate
``model_stats``) and, in 1.x, ``replay_config`` (a JSON string or object naming the model and
the problem statement id). A RetryAgent run adds ``attempts[]`` (one traj per attempt; the top
level is a copy of the best one).

The submission is kept as a message of kind ``submission`` holding the diff: the result of the
final ``submit`` action when the conversation has it (function calling records it as a tool
message), else appended after the last model call from the submit step's ``observation`` in
``trajectory[]`` (classic ``history[]`` ends with the submit call), else from
``info.submission`` (an auto-submission). It is no model call: the steps are unchanged.

What we import: ``history[]`` when present (it is what the model was sent, before SWE-agent's
history processors elide old observations), split by ``agent`` (the first agent is the main
session; any other agent becomes a child session). Demonstrations stay in the context and are
marked ``meta["is_demo"]``. Without ``history[]`` we use the last step's ``query`` plus its
response, else rebuild the conversation from thought/action/observation. SWE-agent records no
per-call usage, only ``info.model_stats`` totals, which go into the session metadata.

Task and outcome: the instance id comes from ``replay_config.problem_statement.id``, a
predictions file next to the traj (``all_preds.jsonl``, ``*.all_preds.jsonl``, ``preds.json``,
``<id>.pred``) or the file stem when it looks like a SWE-bench id; a SWE-bench verdict next to
the traj (``report.json``, an eval log, a results summary; see :func:`swebench_verdict`) sets
the outcome.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import InputError
from ..hashing import content_hash
from ..records import KIND_MESSAGE, KIND_REASONING, KIND_SUBMISSION, Message, Session, ToolCall, Usage
from .base import ImportContext, Importer, as_int, head_text, image_part, json_text, load_json, register

# ------------------------------------------------------------------ shared: SWE-bench verdicts

# owner__repo-123 (SWE-bench), also owner__repo-i1 (SWE-agent's test instance)
SWEBENCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*__[A-Za-z0-9_.-]+-[A-Za-z0-9]+$")

_MAX_SIDECAR_BYTES = 50 * 1024 * 1024
_RESULT_LINE = re.compile(r"Result for (\S+): resolved: (True|False)")
_RESOLVED_FLAG = re.compile(r"resolved['\"]?:\s*(True|False|true|false)")
_SUMMARY_NAMES = ("results.json", "results_summary.json", "summary.json")
_FAILED_ID_KEYS = ("unresolved_ids", "error_ids", "empty_patch_ids", "unresolved", "errors")


@dataclass(frozen=True)
class Verdict:
    """A SWE-bench harness verdict: the instance it is about, the outcome, the file it came from."""

    task: str | None
    outcome: str  # "success" | "failure"
    source: Path


def looks_like_instance_id(name: str | None) -> bool:
    return bool(name) and bool(SWEBENCH_ID.match(name))  # type: ignore[arg-type]


def _load_small_json(path: Path) -> Any:
    """A sidecar JSON document, or None. Cached: a run folder shares one report for many trajs."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not path.is_file() or st.st_size > _MAX_SIDECAR_BYTES:
        return None
    return _load_cached(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _load_cached(path: str, mtime_ns: int, size: int) -> Any:
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        return None


def _outcome(flag: Any) -> str | None:
    if isinstance(flag, bool):
        return "success" if flag else "failure"
    if isinstance(flag, str) and flag.lower() in ("true", "false"):
        return "success" if flag.lower() == "true" else "failure"
    return None


def _verdict_from_json(data: Any, instance_id: str | None, source: Path) -> Verdict | None:
    """Read the SWE-bench report shapes: per-instance, flat, and run summaries."""
    if not isinstance(data, dict):
        return None
    # flat per-instance report (mini-swe-agent logs/<id>/report.json)
    if "resolved" in data and _outcome(data["resolved"]) is not None:
        return Verdict(instance_id, _outcome(data["resolved"]), source)  # type: ignore[arg-type]
    # official harness report.json: {instance_id: {"resolved": bool, ...}}
    if instance_id and isinstance(data.get(instance_id), dict):
        out = _outcome(data[instance_id].get("resolved"))
        if out:
            return Verdict(instance_id, out, source)
    per_instance = {k: v for k, v in data.items() if isinstance(v, dict) and "resolved" in v}
    if not instance_id and len(per_instance) == 1:
        key, value = next(iter(per_instance.items()))
        out = _outcome(value.get("resolved"))
        if out:
            return Verdict(key, out, source)
    if not instance_id:
        return None
    # run summaries: {"resolved_ids": [...], "unresolved_ids": [...]} (harness, sb-cli),
    # {"resolved": [...]} (older SWE-agent results.json), {"instances": [{instance_id, resolved}]}
    resolved = data.get("resolved_ids", data.get("resolved"))
    if isinstance(resolved, list):
        if instance_id in resolved:
            return Verdict(instance_id, "success", source)
        for key in _FAILED_ID_KEYS:
            if isinstance(data.get(key), list) and instance_id in data[key]:
                return Verdict(instance_id, "failure", source)
        for key in ("completed_ids", "submitted_ids"):
            if isinstance(data.get(key), list) and instance_id in data[key]:
                return Verdict(instance_id, "failure", source)
    instances = data.get("instances")
    if isinstance(instances, list):
        for item in instances:
            if isinstance(item, dict) and item.get("instance_id") == instance_id:
                out = _outcome(item.get("resolved"))
                if out:
                    return Verdict(instance_id, out, source)
    return None


def _verdict_from_log(path: Path, instance_id: str | None) -> Verdict | None:
    """The last ``resolved: True/False`` of a SWE-bench eval log (OpenHands, harness)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size > 4 * 1024 * 1024:
                f.seek(size - 1024 * 1024)
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    results = _RESULT_LINE.findall(text)
    if results:
        iid, flag = results[-1]
        if instance_id and iid != instance_id:
            return None
        return Verdict(iid, _outcome(flag), path)  # type: ignore[arg-type]
    flags = _RESOLVED_FLAG.findall(text)
    if not flags:
        return None
    name_id = None
    for prefix in ("eval_instance_", "instance_"):
        if path.name.startswith(prefix) and path.suffix == ".log":
            name_id = path.name[len(prefix) : -len(".log")]
    if instance_id and name_id and name_id != instance_id:
        return None
    return Verdict(instance_id or name_id, _outcome(flags[-1]), path)  # type: ignore[arg-type]


def find_verdict(directory: Path, instance_id: str | None = None) -> Verdict | None:
    """The SWE-bench verdict in ``directory`` for ``instance_id`` (or the only one there).

    Looks at ``report.json`` (per-instance or flat), eval logs (``eval_instance_<id>.log``,
    ``instance_<id>.log``, ``run_instance.log``, ``output.swebench_eval.logs/instance_<id>.log``)
    and run summaries (``results.json``, ``results_summary.json``, ``summary.json``).
    """
    if not directory.is_dir():
        return None
    verdict = _verdict_from_json(_load_small_json(directory / "report.json"), instance_id,
                                 directory / "report.json")
    if verdict:
        return verdict
    logs: list[Path] = []
    if instance_id:
        logs += [directory / f"eval_instance_{instance_id}.log", directory / f"instance_{instance_id}.log",
                 directory / "output.swebench_eval.logs" / f"instance_{instance_id}.log"]
    else:
        try:
            found = sorted(directory.glob("eval_instance_*.log"))
        except OSError:
            found = []
        if len(found) == 1:
            logs += found
    logs.append(directory / "run_instance.log")
    for log in logs:
        if log.is_file():
            verdict = _verdict_from_log(log, instance_id)
            if verdict:
                return verdict
    for name in _SUMMARY_NAMES:
        verdict = _verdict_from_json(_load_small_json(directory / name), instance_id, directory / name)
        if verdict:
            return verdict
    return None


def verdict_near(path: Path, instance_id: str | None = None) -> Verdict | None:
    """The verdict next to a trajectory file, or one level up when the file sits in its own
    ``<instance_id>/`` folder (SWE-agent 1.x and mini-swe-agent batch layouts)."""
    verdict = find_verdict(path.parent, instance_id)
    if verdict is None and instance_id and path.parent.name == instance_id:
        verdict = find_verdict(path.parent.parent, instance_id)
    return verdict


def swebench_verdict(directory: Path, instance_id: str | None = None) -> tuple[str | None, str] | None:
    """``(task, outcome)`` from a SWE-bench verdict next to a trajectory, or None.

    ``task`` is the instance id the verdict names (``instance_id`` for a flat report that names
    none); ``outcome`` is ``"success"`` (resolved) or ``"failure"``.
    """
    verdict = find_verdict(Path(directory), instance_id)
    return (verdict.task, verdict.outcome) if verdict else None


# ------------------------------------------------------------------ shared: usage, timestamps


def iso_time(value: Any) -> str | None:
    """ISO-8601 UTC string from a unix time (seconds or ms) or pass an ISO string through."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        ts = float(value)
        if ts > 1e11:  # milliseconds
            ts /= 1000.0
        try:
            return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        return value
    return None


def _get(d: Any, key: str) -> Any:
    return d.get(key) if isinstance(d, dict) else None


def usage_from(u: Any) -> Usage | None:
    """A ``Usage`` from any usage shape the agent logs carry.

    OpenAI chat (``prompt_tokens``, ``prompt_tokens_details.cached_tokens``,
    ``completion_tokens_details.reasoning_tokens``), litellm's Anthropic fields
    (``cache_read_input_tokens`` / ``cache_creation_input_tokens``), OpenAI Responses
    (``input_tokens``, ``input_tokens_details``), raw Anthropic (``input_tokens`` + cache
    fields) and Gemini ``usageMetadata``. ``prompt_tokens`` always ends up as everything the
    call read, cached or not.
    """
    if not isinstance(u, dict) or not u:
        return None
    ptd, ctd = _get(u, "prompt_tokens_details"), _get(u, "completion_tokens_details")
    cache_read = as_int(u.get("cache_read_input_tokens"))
    cache_create = as_int(u.get("cache_creation_input_tokens"))
    anthropic_cache = cache_read is not None or cache_create is not None
    reasoning = as_int(_get(ctd, "reasoning_tokens"))
    if reasoning is None:
        reasoning = as_int(u.get("reasoning_tokens"))
    prompt = as_int(u.get("prompt_tokens"))
    completion = as_int(u.get("completion_tokens"))
    if prompt is not None or completion is not None:
        if cache_read is None:
            cache_read = as_int(_get(ptd, "cached_tokens"))
        if cache_create is None:
            cache_create = as_int(_get(ptd, "cache_creation_tokens"))
            if cache_create is None:
                cache_create = as_int(_get(ptd, "cache_write_tokens"))
        if prompt is not None and anthropic_cache:
            # litellm versions disagree on whether prompt_tokens already holds the cache
            # reads/writes (proxies: all of it; direct Anthropic: input + cache reads).
            cr, cc = cache_read or 0, cache_create or 0
            if prompt < cr:
                prompt += cr + cc
            elif prompt < cr + cc:
                prompt += cc
    elif "input_tokens" in u or "output_tokens" in u:
        inp, completion = as_int(u.get("input_tokens")), as_int(u.get("output_tokens"))
        if anthropic_cache:  # raw Anthropic: input_tokens excludes the cache
            prompt = (inp or 0) + (cache_read or 0) + (cache_create or 0)
        else:  # OpenAI Responses: input_tokens includes cached tokens
            prompt = inp
            cache_read = as_int(_get(_get(u, "input_tokens_details"), "cached_tokens"))
            if reasoning is None:
                reasoning = as_int(_get(_get(u, "output_tokens_details"), "reasoning_tokens"))
    elif "promptTokenCount" in u or "candidatesTokenCount" in u:  # Gemini usageMetadata
        prompt = as_int(u.get("promptTokenCount"))
        thoughts = as_int(u.get("thoughtsTokenCount"))
        candidates = as_int(u.get("candidatesTokenCount"))
        completion = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
        cache_read = as_int(u.get("cachedContentTokenCount"))
        reasoning = thoughts
    else:
        return None
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_create,
        reasoning_tokens=reasoning,
    )
    return None if usage.is_empty() else usage


def tools_summary(tools: Any) -> dict[str, Any]:
    """Count and content hash of a request's tool schemas (for ``meta["request"]``)."""
    if not isinstance(tools, list) or not tools:
        return {}
    return {"tools_count": len(tools), "tools_hash": content_hash(tools)}


def scalar_params(params: Any, skip: Iterable[str] = ()) -> dict[str, Any]:
    """The scalar request parameters (temperature, max_tokens, stop, ...) of a kwargs dict."""
    if not isinstance(params, dict):
        return {}
    skip = set(skip)
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key in skip or key in ("messages", "tools", "api_key", "extra_headers", "client"):
            continue
        if isinstance(value, (str, int, float, bool)) or value is None:
            out[key] = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value) and len(value) <= 16:
            out[key] = list(value)
    return out


# ------------------------------------------------------------------ shared: chat messages

ROLE_MAP = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
}

_TEXT_TYPES = ("text", "input_text", "output_text")


def as_id(value: Any) -> str | None:
    """A tool-call id as a string (ids are strings or ints in the wild; anything else is None)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (str, int)):
        return str(value)
    return None


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def tool_calls_of(raw: Any) -> tuple[ToolCall, ...]:
    """ToolCalls from OpenAI ``tool_calls`` (nested ``function``) or flat ``{name, arguments}``."""
    if not isinstance(raw, list):
        return ()
    calls = []
    for call in raw:
        if not isinstance(call, dict):
            continue
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        calls.append(ToolCall(name=name, arguments=json_text(fn.get("arguments", fn.get("input"))),
                              id=as_id(call.get("id")) or as_id(call.get("call_id"))))
    return tuple(calls)


def _thinking_parts(m: dict) -> list[dict[str, Any]]:
    """Thinking/reasoning of an assistant message as parts (litellm and OpenRouter shapes)."""
    parts: list[dict[str, Any]] = []
    blocks = m.get("thinking_blocks")
    if isinstance(blocks, list):
        for b in blocks:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "redacted_thinking":
                parts.append({"type": "redacted_thinking", "bytes": len(str(b.get("data") or ""))})
            elif isinstance(b.get("thinking"), str) and b["thinking"]:
                parts.append({"type": "thinking", "text": b["thinking"]})
    if not parts:
        for key in ("reasoning_content", "reasoning"):
            if isinstance(m.get(key), str) and m[key].strip():
                parts.append({"type": "thinking", "text": m[key]})
                break
    details = m.get("reasoning_details")
    if isinstance(details, list):
        for d in details:
            if not isinstance(d, dict):
                continue
            if d.get("type") == "reasoning.text" and not parts and isinstance(d.get("text"), str):
                parts.append({"type": "thinking", "text": d["text"]})
            elif d.get("type") == "reasoning.encrypted":
                parts.append({"type": "redacted_thinking", "bytes": len(str(d.get("data") or ""))})
    return parts


@dataclass
class _Content:
    text: str
    parts: list[dict[str, Any]]
    tool_calls: list[ToolCall]
    tool_results: list[tuple[str | None, str, bool]]  # (tool_use_id, text, is_error)
    cache_control: bool


def _image(item: dict) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "image_url" or kind == "input_image":
        ref = item.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        detail = (ref.get("detail") if isinstance(ref, dict) else None) or item.get("detail")
        return image_part(url=url if isinstance(url, str) else None, detail=detail)
    source = item.get("source") if isinstance(item.get("source"), dict) else {}
    if source.get("type") == "base64":
        return image_part(base64_data=source.get("data"), media_type=source.get("media_type"))
    return image_part(url=source.get("url") if isinstance(source.get("url"), str) else None)


def split_content(content: Any) -> _Content:
    """Text, non-text parts, tool_use blocks and tool_result blocks of a content value."""
    out = _Content("", [], [], [], False)
    if content is None:
        return out
    if isinstance(content, str):
        out.text = content
        return out
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        out.text = json.dumps(content, ensure_ascii=False)
        return out
    texts: list[str] = []
    for item in content:
        if isinstance(item, str):
            texts.append(item)
            continue
        if not isinstance(item, dict):
            continue
        if item.get("cache_control"):
            out.cache_control = True
        kind = item.get("type")
        if kind in _TEXT_TYPES or (kind is None and isinstance(item.get("text"), str)):
            texts.append(str(item.get("text") or ""))
        elif kind in ("image_url", "input_image", "image"):
            out.parts.append(_image(item))
        elif kind == "tool_use":
            out.tool_calls.append(ToolCall(name=str(item.get("name") or ""),
                                           arguments=json_text(item.get("input")),
                                           id=as_id(item.get("id"))))
        elif kind == "tool_result":
            inner = split_content(item.get("content"))
            out.parts.extend(inner.parts)
            out.tool_results.append((as_id(item.get("tool_use_id")), inner.text, bool(item.get("is_error"))))
        elif kind == "thinking":
            out.parts.append({"type": "thinking", "text": str(item.get("thinking") or "")})
        elif kind == "redacted_thinking":
            out.parts.append({"type": "redacted_thinking", "bytes": len(str(item.get("data") or ""))})
        elif kind == "refusal":
            texts.append(str(item.get("refusal") or ""))
        else:
            out.parts.append({"type": str(kind or "unknown")})
    out.text = "\n".join(texts)
    return out


def _responses_items(
    items: list, *, names: dict[str, str], usage: Usage | None, meta: dict, model: str | None,
    timestamp: str | None,
) -> list[Message]:
    """Messages from the ``output`` items of an OpenAI Responses API response."""
    msgs: list[Message] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "reasoning":
            summary = as_list(item.get("summary"))
            text = "\n".join(str(s.get("text") or "") for s in summary if isinstance(s, dict))
            parts = ()
            if item.get("encrypted_content"):
                parts = ({"type": "redacted_thinking", "bytes": len(str(item["encrypted_content"]))},)
            msgs.append(Message(role="assistant", kind=KIND_REASONING, text=text, parts=parts,
                                model=model, timestamp=timestamp))
        elif kind == "message":
            texts.append(split_content(item.get("content")).text)
        elif kind == "function_call":
            calls.extend(tool_calls_of([item]))
    for c in calls:
        if c.id:
            names[c.id] = c.name
    if texts or calls or not msgs:
        msgs.append(Message(role="assistant", text="\n".join(texts), tool_calls=tuple(calls), usage=usage,
                            model=model, timestamp=timestamp, meta=meta))
    elif usage is not None:  # only reasoning came back: the usage still belongs to this call
        last = msgs[-1]
        msgs[-1] = Message(role=last.role, kind=last.kind, text=last.text, parts=last.parts, usage=usage,
                           model=model, timestamp=timestamp, meta=meta)
    return msgs


def convert_message(
    m: dict,
    ctx: ImportContext,
    *,
    names: dict[str, str],
    usage: Usage | None = None,
    meta: dict[str, Any] | None = None,
    model: str | None = None,
    timestamp: str | None = None,
    line: int | None = None,
) -> list[Message]:
    """Normalise one chat message dict (OpenAI chat, litellm, Anthropic blocks, Responses items).

    ``names`` maps tool-call ids to tool names; assistant tool calls add to it and tool
    results read it. ``usage``/``meta``/``model``/``timestamp`` go on the assistant message
    the call produced. Returns the messages in order (an Anthropic user message with
    tool_result blocks becomes one tool message per result, then the user text).
    """
    meta = dict(meta or {})
    if m.get("object") == "response" and isinstance(m.get("output"), list):
        return _responses_items(m["output"], names=names, usage=usage, meta=meta, model=model,
                                timestamp=timestamp)
    kind = m.get("type")
    if "role" not in m and kind in ("function_call", "reasoning"):
        return _responses_items([m], names=names, usage=usage, meta=meta, model=model, timestamp=timestamp)
    if kind == "function_call_output":
        call_id = as_id(m.get("call_id"))
        output = m.get("output")
        text = output if isinstance(output, str) else split_content(output).text
        return [Message(role="tool", text=text, tool_call_id=call_id, name=names.get(call_id or ""),
                        timestamp=timestamp, meta=meta)]
    raw_role = str(m.get("role") or "").lower()
    role = ROLE_MAP.get(raw_role)
    if role is None:
        ctx.warn(f"unknown message role {raw_role!r}; read as user", line=line)
        meta["source_role"] = raw_role
        role = "user"
    content = split_content(m.get("content"))
    if content.cache_control or m.get("cache_control"):
        meta["cache_control"] = True
    if role == "assistant":
        calls = list(tool_calls_of(m.get("tool_calls"))) + content.tool_calls
        fc = m.get("function_call")
        if isinstance(fc, dict) and isinstance(fc.get("name"), str):
            calls.append(ToolCall(name=fc["name"], arguments=json_text(fc.get("arguments"))))
        for c in calls:
            if c.id:
                names[c.id] = c.name
        parts = _thinking_parts(m) + content.parts
        if isinstance(m.get("refusal"), str) and m["refusal"] and not content.text:
            parts.append({"type": "refusal", "text": m["refusal"]})
        return [Message(role="assistant", text=content.text, tool_calls=tuple(calls), parts=tuple(parts),
                        usage=usage, model=model, timestamp=timestamp, meta=meta,
                        name=m.get("name") if isinstance(m.get("name"), str) else None)]
    if role == "tool":
        call_id = as_id(m.get("tool_call_id"))
        ids = [as_id(i) for i in as_list(m.get("tool_call_ids")) if as_id(i)]
        if call_id is None and ids:
            call_id = ids[0]
            if len(ids) > 1:
                meta["tool_call_ids"] = ids
        name = _str_or_none(m.get("name")) or names.get(call_id or "")
        return [Message(role="tool", text=content.text, tool_call_id=call_id, name=name,
                        parts=tuple(content.parts), timestamp=timestamp, meta=meta)]
    out: list[Message] = []
    for tool_use_id, text, is_error in content.tool_results:
        tmeta = {"is_error": True} if is_error else {}
        out.append(Message(role="tool", text=text, tool_call_id=tool_use_id,
                           name=names.get(tool_use_id or ""), timestamp=timestamp, meta=tmeta))
    if not content.tool_results or content.text or content.parts:
        out.append(Message(role=role, text=content.text, parts=tuple(content.parts), timestamp=timestamp,
                           meta=meta, name=m.get("name") if isinstance(m.get("name"), str) else None))
    return out


def messages_equal_key(m: dict) -> tuple[str, str]:
    """(role, text) of a raw chat message: what the prefix checks compare."""
    return (str(m.get("role") or ""), split_content(m.get("content")).text)


# ------------------------------------------------------------------ SWE-agent

_CLASSIC_RUN_DIR = re.compile(r"^(.+?)__.+__t-[\d.]+__p-[\d.]+__c-[\d.]+")


def _replay_config(raw: Any) -> dict:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _dig(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


@dataclass
class _Prediction:
    instance_id: str | None = None
    model: str | None = None
    source: Path | None = None


@lru_cache(maxsize=8)
def _preds_index(path: str, mtime_ns: int, size: int) -> tuple[dict[str, str | None], int]:
    """``{instance_id: model_name_or_path}`` of an ``all_preds.jsonl``, and its row count."""
    index: dict[str, str | None] = {}
    rows = 0
    try:
        with open(path, "rb") as f:
            for raw in f:
                try:
                    row = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(row, dict) and isinstance(row.get("instance_id"), str):
                    rows += 1
                    index[row["instance_id"]] = _str_or_none(row.get("model_name_or_path"))
    except OSError:
        pass
    return index, rows


def _read_predictions(path: Path) -> _Prediction:
    """The instance id / model name a predictions file next to the traj gives for it."""
    stem = path.name[: -len(".traj")] if path.name.endswith(".traj") else path.stem
    parent = path.parent
    for cand in (parent / f"{stem}.all_preds.jsonl", parent / "all_preds.jsonl"):
        try:
            st = cand.stat()
        except OSError:
            continue
        index, rows = _preds_index(str(cand), st.st_mtime_ns, st.st_size)
        if stem in index:
            return _Prediction(stem, index[stem], cand)
        if cand.name.startswith(stem + ".") and rows == 1:  # <stem>.all_preds.jsonl with one other id
            (iid, model), = index.items()
            return _Prediction(iid, model, cand)
    pred = _load_small_json(parent / f"{stem}.pred")
    if isinstance(pred, dict) and isinstance(pred.get("instance_id"), str):
        return _Prediction(pred["instance_id"], _str_or_none(pred.get("model_name_or_path")), parent / f"{stem}.pred")
    preds = _load_small_json(parent / "preds.json")
    if isinstance(preds, dict) and isinstance(preds.get(stem), dict):
        return _Prediction(stem, _str_or_none(preds[stem].get("model_name_or_path")), parent / "preds.json")
    return _Prediction()


def _model_from_run_name(name: str | None) -> str | None:
    m = _CLASSIC_RUN_DIR.match(name) if isinstance(name, str) else None
    return m.group(1) if m else None


def _args_yaml_model(path: Path) -> str | None:
    args = path.parent / "args.yaml"
    if not args.is_file():
        return None
    try:
        import yaml

        data = yaml.safe_load(args.read_text(encoding="utf-8", errors="replace"))
    except Exception:  # a broken sidecar must not break the import  # noqa: BLE001
        return None
    name = _dig(data, "agent", "model", "model_name")
    return name if isinstance(name, str) else None


def _swe_history_message(entry: dict, ctx: ImportContext, names: dict[str, str], index: int) -> list[Message]:
    meta: dict[str, Any] = {"index": index}
    for key in ("agent", "message_type"):
        if isinstance(entry.get(key), str):
            meta[key] = entry[key]
    if entry.get("is_demo"):
        meta["is_demo"] = True
    if isinstance(entry.get("tags"), list) and entry["tags"]:
        meta["tags"] = [str(t) for t in entry["tags"]]
    return convert_message(entry, ctx, names=names, meta=meta)


def _from_trajectory(steps: list, ctx: ImportContext) -> tuple[list[Message], str]:
    """Messages when a traj has no history[]: the last query + response, else the steps."""
    last = steps[-1] if steps and isinstance(steps[-1], dict) else {}
    query = last.get("query")
    if not isinstance(query, list):  # before SWE-agent 1.1 the step kept "messages"
        query = last.get("messages")
    if isinstance(query, list) and query and all(isinstance(q, dict) and "role" in q for q in query):
        names: dict[str, str] = {}
        msgs = []
        for i, q in enumerate(query):
            msgs.extend(_swe_history_message(q, ctx, names, i))
        response = last.get("response") if isinstance(last.get("response"), str) else ""
        msgs.append(Message(role="assistant", text=response,
                            meta={"action": last.get("action")} if last.get("action") else {}))
        return msgs, "trajectory.query"
    msgs = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            ctx.skip("malformed step")
            continue
        response = step.get("response")
        if not isinstance(response, str) or not response:
            thought = step.get("thought") or ""
            action = step.get("action") or ""
            response = f"{str(thought).rstrip()}\n\n```\n{str(action).strip()}\n```" if action else str(thought)
        msgs.append(Message(role="assistant", text=response, meta={"step": i}))
        observation = step.get("observation")
        if observation is not None:
            msgs.append(Message(role="user", text=observation if isinstance(observation, str)
                                else json.dumps(observation, ensure_ascii=False), meta={"step": i}))
    return msgs, "trajectory"


def _is_submit(action: Any) -> bool:
    return isinstance(action, str) and action.strip().split(" ", 1)[0] == "submit"


def _mark_submission(msgs: list[Message], steps: list, info: dict) -> None:
    """Keep the run's submission as a ``submission`` message after its last model call (in place)."""
    last = next((j for j in range(len(msgs) - 1, -1, -1)
                 if msgs[j].role == "assistant" and msgs[j].kind == KIND_MESSAGE), None)
    if last is None:
        return
    call = msgs[last]
    submission = info.get("submission") if isinstance(info.get("submission"), str) else None
    step = steps[-1] if steps and isinstance(steps[-1], dict) else {}
    observation = step.get("observation") if _is_submit(step.get("action")) else None
    observation = observation if isinstance(observation, str) and observation.strip() else None
    submit_calls = [c for c in call.tool_calls if c.name == "submit"]
    meta: dict[str, Any] = {"exit": True}
    if isinstance(info.get("exit_status"), str):
        meta["exit_status"] = info["exit_status"]
    after = msgs[last + 1:]
    if after:  # the conversation kept the submit's result: mark it
        result = after[-1]
        is_result = len(after) == 1 and (
            (result.role == "tool" and result.tool_call_id in {c.id for c in submit_calls if c.id})
            or (observation is not None and result.text.strip() == observation.strip())
            or (bool(submission and submission.strip()) and result.text.strip() == submission.strip()))  # type: ignore[union-attr]
        if is_result:
            msgs[-1] = replace(result, kind=KIND_SUBMISSION, meta={**result.meta, **meta})
        return
    if observation is not None:
        text, meta["from"] = observation, "trajectory"
    elif submission:
        text, meta["from"] = submission, "info.submission"
    else:
        return
    if len(submit_calls) == 1 and submit_calls[0].id:  # function calling: the submit call's result
        msgs.append(Message(role="tool", text=text, kind=KIND_SUBMISSION, tool_call_id=submit_calls[0].id,
                            name="submit", meta=meta))
    else:  # classic: observations are user messages
        msgs.append(Message(role="user", text=text, kind=KIND_SUBMISSION, meta=meta))


@register
class SweAgent(Importer):
    name = "swe_agent"
    description = "SWE-agent .traj trajectories (classic v0.x and 1.x: history[] / trajectory[])"
    extensions = (".traj",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if not text.startswith("{") or '"trajectory_format"' in text or '"mini_version"' in text:
            return False
        if path.name.endswith(".traj"):
            return any(k in text for k in ('"history"', '"trajectory"', '"info"'))
        if '"trajectory"' in text and '"observation"' in text and '"action"' in text:
            return '"thought"' in text or '"response"' in text
        return '"history"' in text and '"message_type"' in text and '"agent"' in text

    def sidecars(self, path: Path) -> list[Path]:
        if path.is_dir():
            return []
        out = []
        pred = _read_predictions(path)
        if pred.source:
            out.append(pred.source)
        if (path.parent / "args.yaml").is_file():
            out.append(path.parent / "args.yaml")
        verdict = verdict_near(path, self._instance_id(path, pred))
        if verdict:
            out.append(verdict.source)
        return out

    @staticmethod
    def _stem(path: Path) -> str:
        return path.name[: -len(".traj")] if path.name.endswith(".traj") else path.stem

    def _instance_id(self, path: Path, pred: _Prediction, replay: dict | None = None) -> str | None:
        stem = self._stem(path)
        return (as_id(_dig(replay, "problem_statement", "id")) if replay else None) or pred.instance_id or (
            stem if looks_like_instance_id(stem) else None)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        data = load_json(path, ctx)
        if not isinstance(data, dict):
            raise InputError("a SWE-agent .traj must be a JSON object", where=str(path),
                             hint="expected {history: [...], trajectory: [...], info: {...}}")
        attempts = data.get("attempts") if isinstance(data.get("attempts"), list) else []
        if not any(isinstance(data.get(k), list) for k in ("history", "trajectory")) and not attempts:
            raise InputError("not a SWE-agent trajectory: no history[] or trajectory[]", where=str(path),
                             hint="force another format with --format")
        replay = _replay_config(data.get("replay_config"))
        pred = _read_predictions(path)
        stem = self._stem(path)
        instance_id = self._instance_id(path, pred, replay)
        verdict = verdict_near(path, instance_id)
        if verdict and verdict.task and not instance_id:
            instance_id = verdict.task
        model = (_str_or_none(_dig(replay, "agent", "model", "name")) or _args_yaml_model(path)
                 or _model_from_run_name(pred.model) or _model_from_run_name(path.parent.name))
        ext = instance_id or stem
        outcome = verdict.outcome if verdict else "unknown"

        if isinstance(data.get("history"), list) or isinstance(data.get("trajectory"), list):
            best = _dig(data, "info", "best_attempt_idx")
            yield from self._sessions(data, ctx, ext=ext, model=model, task=instance_id, outcome=outcome,
                                      replay=replay, verdict=verdict, attempts=len(attempts))
            for i, attempt in enumerate(attempts):
                if i == best or not isinstance(attempt, dict):
                    continue
                yield from self._sessions(attempt, ctx, ext=f"{ext}#attempt{i}", model=model, task=instance_id,
                                          outcome="unknown", replay=_replay_config(attempt.get("replay_config"))
                                          or replay, verdict=None, attempts=0, parent=ext, attempt=i)
        else:
            for i, attempt in enumerate(attempts):
                if isinstance(attempt, dict):
                    yield from self._sessions(attempt, ctx, ext=f"{ext}#attempt{i}", model=model,
                                              task=instance_id, outcome="unknown", replay=replay, verdict=None,
                                              attempts=0, parent=None, attempt=i)

    def _sessions(
        self,
        data: dict,
        ctx: ImportContext,
        *,
        ext: str,
        model: str | None,
        task: str | None,
        outcome: str,
        replay: dict,
        verdict: Verdict | None,
        attempts: int,
        parent: str | None = None,
        attempt: int | None = None,
    ) -> Iterator[Session]:
        info = data.get("info") if isinstance(data.get("info"), dict) else {}
        history = data.get("history")
        steps = data.get("trajectory") if isinstance(data.get("trajectory"), list) else []
        by_agent: dict[str, list[Message]] = {}
        if isinstance(history, list) and history:
            source = "history"
            names: dict[str, dict[str, str]] = {}
            main_agent = None
            for i, entry in enumerate(history):
                if not isinstance(entry, dict):
                    ctx.skip("malformed history entry")
                    continue
                agent = entry.get("agent") if isinstance(entry.get("agent"), str) else None
                if main_agent is None:
                    main_agent = agent or ""
                key = agent if agent is not None else main_agent
                by_agent.setdefault(key, []).extend(
                    _swe_history_message(entry, ctx, names.setdefault(key, {}), i))
            if main_agent is None:
                main_agent = ""
        elif steps:
            msgs, source = _from_trajectory(steps, ctx)
            ctx.warn(f"no history[]; rebuilt the conversation from trajectory[] ({source})")
            main_agent = ""
            by_agent[main_agent] = msgs
        else:
            source, main_agent = "empty", ""
            by_agent[main_agent] = []
            ctx.warn("trajectory has no history and no steps; the session is empty")
        meta: dict[str, Any] = {"source": source, "steps": len(steps)}
        for key in ("exit_status", "swe_agent_version", "swe_agent_hash", "swe_rex_version"):
            if info.get(key) is not None:
                meta[key] = info[key]
        if isinstance(info.get("model_stats"), dict):
            meta["model_stats"] = info["model_stats"]
        submission = info.get("submission")
        if isinstance(submission, str):
            meta["submission_chars"] = len(submission)
            meta["submission"] = submission[:8000]
        if data.get("environment") is not None:
            meta["environment"] = data["environment"]
        processors = _dig(replay, "agent", "history_processors") or _dig(replay, "agent", "history_processor")
        if processors:
            meta["history_processors"] = processors
        if steps and isinstance(steps[-1], dict) and isinstance(steps[-1].get("query"), list):
            meta["steps_have_query"] = True
        if attempts:
            meta["attempts"] = attempts
            if info.get("best_attempt_idx") is not None:
                meta["best_attempt_idx"] = info["best_attempt_idx"]
        if attempt is not None:
            meta["attempt"] = attempt
        if verdict:
            meta["verdict_source"] = verdict.source.name
        if by_agent.get(main_agent):
            _mark_submission(by_agent[main_agent], steps, info)
        demos = sum(1 for m in by_agent.get(main_agent, []) if m.meta.get("is_demo"))
        if demos:
            meta["demo_messages"] = demos
        for agent, msgs in by_agent.items():
            is_main = agent == main_agent
            smeta = dict(meta) if is_main else {"source": source}
            if agent:
                smeta["agent"] = agent
            yield Session(
                external_id=ext if is_main else f"{ext}:{agent}",
                format=self.name,
                messages=msgs,
                title=task or ext,
                model=model,
                task=task,
                outcome=outcome if is_main else "unknown",
                parent_external_id=parent if is_main else ext,
                metadata=smeta,
            )
