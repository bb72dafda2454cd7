"""What a task folder's ``ui_messages.json`` records: each model call's usage, the edits of the
history, and (when the folder holds nothing else) the conversation as the UI showed it.

Every entry is ``{"ts", "type": "say"|"ask", "say"|"ask": <kind>, "text", ...}``. Cline adds
``conversationHistoryIndex`` (the API history's length minus one when the entry was written:
a call's ``api_req_started`` holds the index of the last message before the call's user
message, so that call's user message is at index + 1 and its answer at index + 2) and, once
the history was truncated, ``conversationHistoryDeletedRange`` (``[start, end]``, inclusive,
of the API history: Cline's ``ContextManager.getNextTruncationRange`` always keeps messages
0 and 1 and grows the range from 2; the range is carried on every later entry). A new range
first shows on the entry after the ``api_req_started`` of the call it was made for (the entry
is written before the range is computed), so the edit belongs to the last call started at or
before the first entry that carries it. Roo Code and Kilo Code write ``condense_context``
(``contextCondense``: cost, prevContextTokens, newContextTokens, summary, condenseId) and
``sliding_window_truncation`` (``contextTruncation``: truncationId, messagesRemoved,
prevContextTokens) entries, and ``apiProtocol`` in the call's usage.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from ...records import Usage
from .._json import parse_json
from ..base import RECORD_ERRORS, ImportContext, as_dict, as_int, as_str

CALL = "api_req_started"


@dataclass
class Call:
    """One ``api_req_started`` entry: a model call and what the UI recorded of it."""

    ui_index: int  # position of the entry in ui_messages.json
    ts: int | None
    history_index: int | None  # Cline's conversationHistoryIndex of the entry
    info: dict[str, Any]  # the entry's text, parsed (tokensIn, ..., request)
    model: str | None = None
    new_range: tuple[int, int] | None = None  # a deleted range first recorded for this call
    provider: str | None = None  # Cline's modelInfo.providerId of the entry

    @property
    def answer_index(self) -> int | None:
        """The API-history index of this call's answer (Cline), or None."""
        return None if self.history_index is None else self.history_index + 2

    def usage(self) -> Usage | None:
        return ui_usage(self.info, self.provider)

    def figures(self) -> dict[str, Any]:
        """The recorded extras of the call, for the answer's meta."""
        out: dict[str, Any] = {}
        cost = self.info.get("cost")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            out["cost"] = cost
        for key in ("cancelReason", "streamingFailedMessage", "apiProtocol"):
            if as_str(self.info.get(key)):
                out[key] = self.info[key]
        return out


# Cline providers whose handler yields ``inputTokens`` = the API's whole prompt (cache reads,
# and DeepSeek-style cache misses, inside it): src/core/api/providers/*.ts of cline/cline at
# d3e1065 (2026-01-21): openai.ts, fireworks.ts, doubao.ts, qwen.ts, hicap.ts, xai.ts, lmstudio.ts
# and zai.ts pass ``prompt_tokens`` with ``prompt_tokens_details.cached_tokens`` /
# ``prompt_cache_hit_tokens`` beside it; litellm.ts, oca.ts and requesty.ts pass ``prompt_tokens``
# (a litellm proxy's already holds Anthropic's cache reads and writes); openai-codex.ts passes
# ``input_tokens``. Every other handler leaves the cache out of ``inputTokens``: anthropic,
# vertex, bedrock, claude-code, minimax and sapaicore pass Anthropic's ``input_tokens``;
# openrouter, cline, vercel-ai-gateway, openai-native, deepseek, groq and gemini subtract the
# cached tokens first. Providers that report no cache figures make either sum the same.
CLINE_INPUT_HOLDS_CACHE = frozenset({
    "openai", "fireworks", "doubao", "qwen", "hicap", "xai", "lmstudio", "zai", "litellm", "oca",
    "requesty", "openai-codex",
})


def input_holds_cache(provider: str | None, protocol: Any = None) -> bool:
    """Whether a call's recorded ``tokensIn`` already counts its cache reads and writes.

    Roo / Kilo say so per call (``apiProtocol: "openai"``); Cline by the ``providerId`` of the
    entry's ``modelInfo`` (``CLINE_INPUT_HOLDS_CACHE``). Without either (older Cline, which
    wrote no modelInfo) the Anthropic reading: the cache is left out.
    """
    if protocol is not None:
        return protocol == "openai"
    return provider in CLINE_INPUT_HOLDS_CACHE


def ui_usage(info: dict[str, Any], provider: str | None = None) -> Usage | None:
    """A call's usage from its ``api_req_started`` figures.

    Cline's and Roo's Anthropic handlers record ``tokensIn`` as the request's ``input_tokens``,
    which leave the cache out, so the prompt is tokensIn + cacheReads + cacheWrites; a call Roo
    marks ``apiProtocol: "openai"``, or Cline made through a provider of
    ``CLINE_INPUT_HOLDS_CACHE``, counted the cached tokens inside tokensIn already. A figure
    that cannot be (cache reads above a tokensIn said to hold them) is read the other way.
    """
    tin = as_int(info.get("tokensIn"))
    tout = as_int(info.get("tokensOut"))
    reads = as_int(info.get("cacheReads"))
    writes = as_int(info.get("cacheWrites"))
    if tin is None and tout is None and reads is None and writes is None:
        return None
    holds = input_holds_cache(provider, info.get("apiProtocol"))
    return Usage(prompt_tokens=prompt_with_cache(tin, reads, writes, holds), completion_tokens=tout,
                 cache_read_tokens=reads, cache_creation_tokens=writes)


def prompt_with_cache(tin: int | None, reads: int | None, writes: int | None, holds: bool) -> int | None:
    """The whole prompt from an input figure and the cache figures beside it."""
    if tin is None:
        return None
    cache = (reads or 0) + (writes or 0)
    if holds and cache <= tin:
        return tin
    return tin + cache


@dataclass
class RooEvent:
    """A Roo / Kilo ``condense_context`` or ``sliding_window_truncation`` entry."""

    kind: str  # "condense" | "truncation"
    ts: int | None
    ident: str | None  # condenseId / truncationId
    figures: dict[str, Any]
    summary: str | None = None


@dataclass
class UiLog:
    """The parsed entries of ``ui_messages.json`` and what they record."""

    entries: list[dict[str, Any]] = field(default_factory=list)  # in order, objects only
    calls: list[Call] = field(default_factory=list)
    roo_events: list[RooEvent] = field(default_factory=list)
    has_history_index: bool = False
    cline_fields: bool = False  # conversationHistoryIndex / DeletedRange / modelInfo seen
    roo_fields: bool = False  # condense / truncation entries, apiProtocol seen
    restored_ranges: int = 0  # a deleted range that shrank or vanished (a checkpoint restore)

    def call_for_answer(self, index: int) -> Call | None:
        """The call whose answer is API-history message ``index`` (by conversationHistoryIndex)."""
        return self._by_answer.get(index) if hasattr(self, "_by_answer") else None

    def index_calls(self) -> None:
        by: dict[int, Call] = {}
        for c in self.calls:  # a retried call writes a second entry: the last one is the answer's
            if c.answer_index is not None:
                by[c.answer_index] = c
        self._by_answer = by


def _range(value: Any) -> tuple[int, int] | None:
    if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value) and value[0] <= value[1]:
        return value[0], value[1]
    return None


def read_ui(items: list[Any], ctx: ImportContext) -> UiLog:
    """The ui log of ``items`` (the JSON list); one entry of unexpected shape is skipped and counted."""
    log = UiLog()
    current: tuple[int, int] | None = None
    for i, raw in enumerate(items):
        try:
            if not isinstance(raw, dict):
                raise TypeError(f"entry is {type(raw).__name__}, not an object")
            kind = raw.get("say") if raw.get("type") == "say" else raw.get("ask")
            ts = as_int(raw.get("ts"))
            if "conversationHistoryIndex" in raw or "modelInfo" in raw or "conversationHistoryDeletedRange" in raw:
                log.cline_fields = True
            hidx = raw.get("conversationHistoryIndex")
            if type(hidx) is int:
                log.has_history_index = True
            else:
                hidx = None
            if kind == CALL:
                info = _call_info(raw.get("text"), ctx, i)
                if "apiProtocol" in info:
                    log.roo_fields = True
                mi = as_dict(raw.get("modelInfo"))
                log.calls.append(Call(i, ts, hidx, info, as_str(mi.get("modelId")),
                                      provider=as_str(mi.get("providerId"))))
            elif kind == "condense_context":
                log.roo_fields = True
                cc = as_dict(raw.get("contextCondense"))
                log.roo_events.append(RooEvent("condense", ts, as_str(cc.get("condenseId")), _figures(cc),
                                               as_str(cc.get("summary"))))
            elif kind == "sliding_window_truncation":
                log.roo_fields = True
                ct = as_dict(raw.get("contextTruncation"))
                figures = _figures(ct)
                if as_int(ct.get("messagesRemoved")) is not None:
                    figures["messages_removed"] = as_int(ct.get("messagesRemoved"))
                log.roo_events.append(RooEvent("truncation", ts, as_str(ct.get("truncationId")), figures))
            rng = _range(raw.get("conversationHistoryDeletedRange"))
            if rng is not None and (current is None or rng[1] > current[1]):
                if log.calls:
                    log.calls[-1].new_range = rng  # the latest call started was made with it
                else:
                    ctx.warn(f"ui entry {i}: a deleted range {list(rng)} before any model call; ignored it")
                current = rng
            elif rng is not None and current is not None and rng[1] < current[1]:
                log.restored_ranges += 1  # a checkpoint restore took the history back
                current = rng
            log.entries.append(raw)
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="ui entry", index=i)
    log.index_calls()
    return log


def _figures(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for src, dst in (("prevContextTokens", "tokens_before"), ("newContextTokens", "tokens_after")):
        if as_int(d.get(src)) is not None:
            out[dst] = as_int(d.get(src))
    cost = d.get("cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        out["cost"] = cost
    return out


def _call_info(text: Any, ctx: ImportContext, index: int) -> dict[str, Any]:
    """The JSON an ``api_req_started`` entry holds as its text ({} when it holds none)."""
    if not isinstance(text, str) or not text.strip().startswith("{"):
        return {}
    try:
        value = parse_json(text, ctx)
    except ValueError as e:  # json.JSONDecodeError: an entry the extension cut short
        ctx.warn(f"ui entry {index}: api_req_started text is not JSON ({e}); its usage is unknown")
        return {}
    return value if isinstance(value, dict) else {}


class Unnamed:
    """History indices no recorded edit has named yet, sorted. Cline's deleted ranges are
    cumulative (``[2, 9]``, then ``[2, 15]``, ...): each marker names only what its range adds,
    as what an earlier edit took out is out already (a replay leaves it out either way). So the
    markers of N calls cost what they add, not N times the history (a folder of 2,000 calls
    with growing ranges took 8 s and stored ~2 million position runs)."""

    def __init__(self, keys: Any = ()) -> None:
        self.live: list[int] = sorted(keys)

    def add(self, key: int) -> None:
        """``key`` can be named (again): a message at this history index was emitted."""
        at = bisect.bisect_left(self.live, key)
        if at == len(self.live) or self.live[at] != key:
            self.live.insert(at, key)

    def take(self, a: int, b: int) -> list[int]:
        """The indices in ``[a, b]`` (inclusive) not named before; named from now on."""
        lo, hi = bisect.bisect_left(self.live, a), bisect.bisect_right(self.live, b)
        out = self.live[lo:hi]
        del self.live[lo:hi]
        return out
