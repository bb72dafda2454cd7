"""Token counts of what a log held before its secrets were redacted (``store/redact.py``).

The store keeps redacted text, but every token figure must be the one the model read: for a
message the redactor changes, ingest records here the original's token sum under every
counting scheme a replay may use (each tokenizer × each chat format, the keys
``TokenCounter.scheme`` / ``tools_scheme``), in ``meta["redaction"]["tokens"]``; the counter
takes a figure from there before it tokenizes anything. Only messages that held a secret pay
(and the tokenizers load on the first such message).

The store may not import this package (tokens comes after store), so the API hands these
functions to the store's ``Redactor`` (``measure=``, ``measure_tools=``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..config.models import (
    CHAT_ANTHROPIC, CHAT_DEEPSEEK, CHAT_GEMINI, CHAT_GENERIC, CHAT_MISTRAL, CHAT_OPENAI, DEEPSEEK_TOKENIZERS,
    MISTRAL_TOKENIZERS, ModelSpec,
)
from ..config.schema import TOKENIZERS
from ..records import Message
from .cache import TokenCache
from .counter import REDACTION, TokenCounter
from .tokenizers import VOCABULARIES
from .tool_schemas import normalize_tools

CHAT_FORMATS = (CHAT_OPENAI, CHAT_ANTHROPIC, CHAT_GEMINI, CHAT_GENERIC)


@cache
def _counters() -> tuple[TokenCounter, ...]:
    """One counter per tokenizer × chat format whose tokenizer loads here (offline assets)."""
    out = []
    # The vendor vocabularies read from JSON first (deepseek's tokenizer.json, tekken files): their
    # parse is the largest passing allocation, made while little else is held. All fourteen
    # loaded: peak resident memory 434 MB in the order of TOKENIZERS, 361 MB in this one.
    json_first = sorted(TOKENIZERS, key=lambda n: n not in VOCABULARIES or VOCABULARIES[n].backend == "sentencepiece")
    for name in json_first:
        # a vendor vocabulary is only ever counted in its vendor's framing (config/models_vendor.py)
        own = (CHAT_MISTRAL,) if name in MISTRAL_TOKENIZERS else (CHAT_DEEPSEEK,) if name in DEEPSEEK_TOKENIZERS else ()
        for fmt in own or CHAT_FORMATS:
            spec = ModelSpec(name="redaction-originals", tokenizer=name, context_limit=1, reserved_output=0,
                             policy="reject", chat_format=fmt)
            counter = TokenCounter(spec, cache=TokenCache(None))
            try:
                counter.tokenizer.count("probe")
            except Exception:  # noqa: BLE001 - a tokenizer without its assets: no replay can use it either
                continue
            out.append(counter)
    return tuple(out)


def message_sums(m: Message) -> dict[str, int]:
    """``m``'s token sum (what ``TokenCounter.count_messages`` caches) under every scheme."""
    out: dict[str, int] = {}
    for counter in _counters():
        texts = [t for t in counter.plan(m).texts if t]
        counts = counter.tokenizer.count_batch(list(dict.fromkeys(texts))).tolist() if texts else []
        count_of = dict(zip(dict.fromkeys(texts), counts))
        out[counter.scheme] = int(sum(count_of[t] for t in texts))
    return out


def tools_sums(tools: Any) -> dict[str, int]:
    """The token count of tool definitions ``tools`` under every tools scheme."""
    out: dict[str, int] = {}
    functions, others = normalize_tools(tools)
    for counter in _counters():
        out[counter.tools_scheme] = counter.tools_tokens(functions, others)[0]
    return out


def call_originals(m: Message, session: dict[str, int] | None) -> dict[str, Any] | None:
    """The tool definitions' pre-redaction token counts a call's overhead takes (see
    ``TokenCounter.call_overhead``): the call's own request's, and the session's."""
    record = m.meta.get(REDACTION) if isinstance(m.meta, dict) else None
    request = record.get("tokens") if isinstance(record, dict) else None
    if not request and not session:
        return None
    return {"request": request, "session": session}


def session_originals(metadata: Any) -> dict[str, int] | None:
    """A session's tool definitions' pre-redaction token counts, from its stored metadata."""
    record = metadata.get(REDACTION) if isinstance(metadata, dict) else None
    tokens = record.get("tokens") if isinstance(record, dict) else None
    return tokens if isinstance(tokens, dict) else None
