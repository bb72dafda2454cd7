"""Token counts of what a log held before its secrets were redacted (``store/redact.py``).

The store keeps redacted text, but every token figure must be the one the model read: for a
message the redactor changes, ingest records here the original's token sum under every
counting scheme a replay may use (each tokenizer × each chat format, the keys
``TokenCounter.scheme`` / ``tools_scheme``), in ``meta["redaction"]["tokens"]``; the counter
takes a figure from there before it tokenizes anything. Only files that held a secret pay.

``measure`` counts a file's redacted records in one batch, one vocabulary at a time, and lets
each go before the next loads (the encodings this process held before stay): all fourteen
held at once are ~360 MB (a 1 KB file with one secret peaked at 401 MB, 61 MB without), one at
a time the largest, the tekken file's parse (~140 MB). The price is their load (~2.5 s of CPU)
once per file that holds a secret, not once per process.

The store may not import this package (tokens comes after store), so the API hands ``measure``
to the store's ``Redactor``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..config.models import (
    CHAT_ANTHROPIC, CHAT_DEEPSEEK, CHAT_GEMINI, CHAT_GENERIC, CHAT_MISTRAL, CHAT_OPENAI, DEEPSEEK_TOKENIZERS,
    MISTRAL_TOKENIZERS, ModelSpec,
)
from ..config.schema import TOKENIZERS
from ..records import Message
from .cache import TokenCache
from .counter import REDACTION, TokenCounter
from .tokenizers import VOCABULARIES, Tokenizer

CHAT_FORMATS = (CHAT_OPENAI, CHAT_ANTHROPIC, CHAT_GEMINI, CHAT_GENERIC)


def _formats(name: str) -> tuple[str, ...]:
    """The chat formats a tokenizer is counted in: a vendor vocabulary only in its vendor's
    framing (config/models_vendor.py), the others in every generic one."""
    if name in MISTRAL_TOKENIZERS:
        return (CHAT_MISTRAL,)
    if name in DEEPSEEK_TOKENIZERS:
        return (CHAT_DEEPSEEK,)
    return CHAT_FORMATS


def _groups() -> list[list[str]]:
    """The tokenizer names by what they load (an encoding, or a vendor file): o200k_base, the
    Claude and Gemini stand-ins share one encoding, loaded once for the three."""
    by: dict[str, list[str]] = {}
    for name in TOKENIZERS:
        voc = VOCABULARIES.get(name)
        key = f"file:{voc.package}/{voc.path}" if voc is not None else (
            f"encoding:{_encoding(name)}" if _encoding(name) else f"none:{name}")
        by.setdefault(key, []).append(name)
    return list(by.values())


def _encoding(name: str) -> str | None:
    if name == "claude":
        from .claude_standin import ENCODING

        return ENCODING
    from .tokenizers import TOKENIZER_ENCODINGS

    return TOKENIZER_ENCODINGS[name][0] if name in TOKENIZER_ENCODINGS else None


def _tokenizer(name: str) -> Any:
    """A tokenizer of its own (not the process's shared ``get_tokenizer``), so it can be let go."""
    if name == "claude":
        from .claude_standin import ClaudeStandIn

        return ClaudeStandIn()
    return Tokenizer(name)


@contextmanager
def _transient() -> Iterator[None]:
    """Encodings loaded inside are let go at its end; those loaded before stay (a replay's)."""
    from . import assets, encodings

    try:
        import quicktok

        qt: dict = getattr(quicktok, "_CACHE", {})  # quicktok keeps what it loads, by name
    except ImportError:  # pragma: no cover - quicktok is a dependency
        qt = {}
    caches = (encodings._LOADED, assets._encodings, qt)
    before = [set(c) for c in caches]
    try:
        yield
    finally:
        for c, keys in zip(caches, before):
            for k in [k for k in c if k not in keys]:
                c.pop(k, None)
        gc.collect()


def measure(messages: list[Message], tools: list[Any]) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """Each message's token sum (what ``TokenCounter.count_messages`` caches) under every scheme,
    and each tool definitions' token count under every tools scheme (``Redactor.settle``)."""
    from .tool_schemas import normalize_tools

    message_sums: list[dict[str, int]] = [{} for _ in messages]
    tools_sums: list[dict[str, int]] = [{} for _ in tools]
    normalized = [normalize_tools(t) for t in tools]
    for group in _groups():
        with _transient():  # the group's tokenizers and counters die with _measure_group's frame
            _measure_group(group, messages, message_sums, normalized, tools_sums)
    return message_sums, tools_sums


def _measure_group(group: list[str], messages: list[Message], message_sums: list[dict[str, int]],
                   normalized: list[tuple[Any, Any]], tools_sums: list[dict[str, int]]) -> None:
    for name in group:
        tokenizer = _tokenizer(name)
        try:
            tokenizer.count("probe")
        except Exception:  # noqa: BLE001 - a tokenizer without its assets: no replay can use it either
            continue
        for fmt in _formats(name):
            spec = ModelSpec(name="redaction-originals", tokenizer=name, context_limit=1,
                             reserved_output=0, policy="reject", chat_format=fmt)
            counter = TokenCounter(spec, cache=TokenCache(None), tokenizer=tokenizer)
            _count(counter, messages, message_sums)
            for (functions, others), out in zip(normalized, tools_sums):
                out[counter.tools_scheme] = counter.tools_tokens(functions, others)[0]


def _count(counter: TokenCounter, messages: list[Message], out: list[dict[str, int]]) -> None:
    """Each message's token sum under ``counter``'s scheme into ``out``: the distinct texts of
    all of them counted in one batch."""
    texts = [[t for t in counter.plan(m).texts if t] for m in messages]
    unique = list(dict.fromkeys(t for ts in texts for t in ts))
    count_of = dict(zip(unique, counter.tokenizer.count_batch(unique).tolist())) if unique else {}
    for ts, sums in zip(texts, out):
        sums[counter.scheme] = int(sum(count_of[t] for t in ts))


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
