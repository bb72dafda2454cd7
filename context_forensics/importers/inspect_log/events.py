"""Inspect's transcript events: the model calls in order with where they ran (the solver, a
nested tool or subtask, a scorer), compaction events in their place, and what each call was
sent, answered and used.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ...records import Usage
from ..base import as_int

_SCORER_TYPES = {"scorer", "scorers"}


# Inspect 0.3.184 (inspect_ai commit bf26615eb, 2026-02-26, "Normalize handling of cached tokens
# in ModelUsage") made ``input_tokens`` exclude the cache for every provider: "Input tokens
# charged at full rate (excludes cached tokens) ... The true total input token count is:
# input_tokens + input_tokens_cache_read + input_tokens_cache_write" (model/_model_output.py);
# _openai.py, _openai_responses.py and providers/google.py subtract the cached tokens since.
INSPECT_INPUT_EXCLUDES_CACHE = (0, 3, 184)


def _version(v: Any) -> tuple[int, ...] | None:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", v) if isinstance(v, str) else None
    return tuple(int(g) for g in m.groups()) if m else None


def model_usage(u: Any, model: str | None, inspect_version: Any = None) -> Usage | None:
    """Inspect's ModelUsage as a Usage whose prompt counts every token the call read.

    From Inspect 0.3.184 ``input_tokens`` leaves the cache out for every provider
    (``INSPECT_INPUT_EXCLUDES_CACHE``). Before, providers filled it differently: OpenAI/Google
    included cached tokens, Anthropic excluded them (and then total_tokens = input + cache
    write + cache read + output). Without a version the total decides; the provider name is
    the tie-breaker.
    """
    if not isinstance(u, dict):
        return None
    inp = as_int(u.get("input_tokens"))
    out = as_int(u.get("output_tokens"))
    total = as_int(u.get("total_tokens"))
    cr = as_int(u.get("input_tokens_cache_read"))
    cw = as_int(u.get("input_tokens_cache_write"))
    cache = (cr or 0) + (cw or 0)
    prompt = inp
    version = _version(inspect_version)
    if inp is not None and cache:
        if version is not None and version >= INSPECT_INPUT_EXCLUDES_CACHE:
            prompt = inp + cache
        elif total is not None and total == inp + (out or 0) + cache:
            prompt = inp + cache
        elif total is not None and total == inp + (out or 0):
            prompt = inp
        elif (cr or 0) > inp or "anthropic" in (model or "") or "claude" in (model or ""):
            prompt = inp + cache
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=out,
        cache_read_tokens=cr,
        cache_creation_tokens=cw,
        reasoning_tokens=as_int(u.get("reasoning_tokens")),
    )
    return None if usage.is_empty() else usage


def model_calls(events: list[Any]) -> list[tuple[dict[str, Any], str]]:
    """Model events in order with where they ran: "main", "scorer" or "nested";
    compaction events are listed in their place too, as "compaction".

    Handles both event layouts: the flat span layout (span_begin/span_end with
    span_id/parent_id, 2025-) and the step layout (step begin/end, tool and subtask
    events with their own nested ``events``).
    """
    spans: dict[str, tuple[str | None, str | None]] = {}  # id -> (type, parent)
    out: list[tuple[dict[str, Any], str]] = []

    def in_scorer_span(span_id: Any) -> bool:
        seen = 0
        while isinstance(span_id, str) and span_id in spans and seen < 256:
            kind, parent = spans[span_id]
            if isinstance(kind, str) and kind in _SCORER_TYPES:
                return True
            span_id, seen = parent, seen + 1
        return False

    def walk(items: list[Any], nested: bool) -> None:
        steps: list[str | None] = []
        for ev in items:
            if not isinstance(ev, dict):
                continue
            kind = ev.get("event")
            if kind == "span_begin" and isinstance(ev.get("id"), str):
                spans[ev["id"]] = (ev.get("type"), ev.get("parent_id"))
            elif kind == "step":
                if ev.get("action") == "begin":
                    steps.append(ev.get("type"))
                elif steps:
                    steps.pop()
            elif kind == "compaction":
                out.append((ev, "compaction"))
            elif kind == "model":
                if any(isinstance(t, str) and t in _SCORER_TYPES for t in steps) or in_scorer_span(
                    ev.get("span_id")
                ):
                    out.append((ev, "scorer"))
                else:
                    out.append((ev, "nested" if nested else "main"))
            if kind in ("tool", "subtask") and isinstance(ev.get("events"), list):  # pre-span layout
                walk(ev["events"], True)

    walk(events, False)
    return out


def output_message(ev: dict[str, Any]) -> dict[str, Any] | None:
    """The message a model event's output gave (``output.choices[0].message``), or None."""
    output = ev.get("output")
    if not isinstance(output, dict):
        return None
    choices = output.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    msg = choices[0].get("message")
    return msg if isinstance(msg, dict) else None


def request_of(ev: dict[str, Any], resolve: Callable[[Any], Any], n_input: int) -> dict[str, Any]:
    """What a model event sent (model, tools, tool choice, config, message count)."""
    request: dict[str, Any] = {"model": ev.get("model")}
    tools = ev.get("tools")
    if tools:
        request["tools"] = resolve(tools)
    if tools or (isinstance(ev.get("tool_choice"), (str, dict)) and ev.get("tool_choice") != "none"):
        request["tool_choice"] = ev.get("tool_choice")
    config = ev.get("config")
    if isinstance(config, dict):
        config = {k: v for k, v in config.items() if v is not None}
        if config:
            request["config"] = config
            if "max_tokens" in config:
                request["max_tokens"] = config["max_tokens"]
    request["input_messages"] = n_input
    if ev.get("cache"):
        request["cache"] = ev["cache"]
    return request
