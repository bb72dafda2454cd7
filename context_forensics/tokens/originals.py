"""Token counts of what a log held before its secrets were redacted (``store/redact.py``).

The store keeps redacted text, but every token figure must be the one the model read: for a
message the redactor changes, ingest records here the original's token sum under the counting
schemes a replay may use (``TokenCounter.scheme`` / ``tools_scheme``), in
``meta["redaction"]["tokens"]``; the counter takes a figure from there before it tokenizes
anything, and flags a message whose scheme is missing (counted as stored).

Which schemes (``storage.redact_originals``): ``model``, the default, those of the models the
session and the message recorded (or the assumed tokenizer when the log names none): what a
replay of the session uses unless told another model, with the tokenizers it loads anyway, so a
file holding a secret costs one vocabulary, not fourteen (each 10-120 MB resident and 0.2-1 s of
CPU to load, held for the process). ``all``: every tokenizer × chat format besides, for replays
under other models (``--model``) that must equal the unredacted ones; all fourteen vocabularies
load on the first secret (about 360 MB, 4 s).

The store may not import this package (tokens comes after store), so the API hands these
functions to the store's ``Redactor`` (``api/redaction.Originals``).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from ..config.models import (
    CHAT_ANTHROPIC,
    CHAT_DEEPSEEK,
    CHAT_GEMINI,
    CHAT_GENERIC,
    CHAT_MISTRAL,
    CHAT_OPENAI,
    DEEPSEEK_TOKENIZERS,
    MISTRAL_TOKENIZERS,
    ModelSpec,
    session_spec,
)
from ..config.schema import TOKENIZERS
from ..records import Message
from .cache import TokenCache
from .counter import REDACTION, TokenCounter
from .tokenizers import VOCABULARIES
from .tool_schemas import normalize_tools

if TYPE_CHECKING:  # pragma: no cover
    from ..config.schema import Config

CHAT_FORMATS = (CHAT_OPENAI, CHAT_ANTHROPIC, CHAT_GEMINI, CHAT_GENERIC)


@cache
def _every_counter() -> tuple[TokenCounter, ...]:
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
            counter = _loaded(spec)
            if counter is not None:
                out.append(counter)
    return tuple(out)


def _loaded(spec: ModelSpec) -> TokenCounter | None:
    counter = TokenCounter(spec, cache=TokenCache(None))
    try:
        counter.tokenizer.count("probe")
    except Exception:  # noqa: BLE001 - a tokenizer without its assets: no replay can use it either
        return None
    return counter


_MODEL_COUNTERS: dict[tuple[str, ...], TokenCounter | None] = {}


def _model_counter(spec: ModelSpec) -> TokenCounter | None:
    """The counter a replay under ``spec`` uses (its scheme: tokenizer, chat format, thinking kept),
    one per distinct framing (the tokenizers themselves are loaded once per process)."""
    key = (spec.name, spec.tokenizer, spec.chat_format)
    if key not in _MODEL_COUNTERS:
        _MODEL_COUNTERS[key] = _loaded(spec)
    return _MODEL_COUNTERS[key]


def counters(models: tuple[str, ...], config: Config | None = None, *, every: bool = False) -> list[TokenCounter]:
    """The counters whose schemes a redacted message's original is counted under: those of the
    recorded ``models`` (as a replay resolves them; none: the assumed one), and every scheme
    when ``every``."""
    specs = [session_spec(n, config) for n in models] or [session_spec(None, config)]
    out = [c for c in map(_model_counter, specs) if c is not None]
    if every:
        out += _every_counter()
    seen: dict[str, TokenCounter] = {}
    for c in out:
        seen.setdefault(f"{c.scheme}|{c.tools_scheme}", c)
    return list(seen.values())


def message_sums(m: Message, using: list[TokenCounter]) -> dict[str, int]:
    """``m``'s token sum (what ``TokenCounter.count_messages`` caches) under each counter's scheme."""
    out: dict[str, int] = {}
    for counter in using:
        if counter.scheme in out:
            continue
        texts = [t for t in counter.plan(m).texts if t]
        counts = counter.tokenizer.count_batch(list(dict.fromkeys(texts))).tolist() if texts else []
        count_of = dict(zip(dict.fromkeys(texts), counts))
        out[counter.scheme] = int(sum(count_of[t] for t in texts))
    return out


def tools_sums(tools: Any, using: list[TokenCounter]) -> dict[str, int]:
    """The token count of tool definitions ``tools`` under each counter's tools scheme."""
    out: dict[str, int] = {}
    functions, others = normalize_tools(tools)
    for counter in using:
        if counter.tools_scheme not in out:
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
