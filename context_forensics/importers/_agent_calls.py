"""What an agent harness logs about a model call besides its messages: the usage (in any of
the shapes litellm passes through), the time, and the request's parameters and tool schemas.

Shared by the agent-trajectory importers (``mini_swe_agent``, ``openhands``).
"""

from __future__ import annotations

from typing import Any, Iterable

from ..hashing import content_hash
from ..records import Usage
from .base import as_int, epoch_iso


def iso_time(value: Any) -> str | None:
    """ISO-8601 UTC string from a unix time (seconds or ms) or pass an ISO string through."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        ts = float(value)
        if ts > 1e11:  # milliseconds
            ts /= 1000.0
        return epoch_iso(ts)
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
