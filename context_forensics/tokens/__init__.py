"""Token counting: tokenizers from offline assets, chat framing, cached counts, calibration and
recorded-vs-computed fidelity.

The modules follow a count from the bottom up:

- ``labels``: the four labels every figure carries (exact, recorded, calibrated, estimated);
- ``assets``: tokenizer vocabularies and the embedding model, offline;
- ``tokenizers``: ``Tokenizer`` / ``get_tokenizer`` by config name: the offline encodings, the
  vendor vocabularies (Mistral's tekken / SentencePiece files, DeepSeek's tokenizer.json), the
  stand-ins, ``approx``, and what each one's counts are worth (``tokenizer_status``);
- ``cache``: ``TokenCache``, token sums by content hash and scheme, in the store;
- ``images``, ``tool_schemas``: what images and tool definitions cost;
- ``framing``: each chat format's per-message plan and per-call constants (``vendor_framing``:
  Mistral's, as mistral-common encodes it, and DeepSeek's chat template);
- ``counter``: ``TokenCounter``, a model's message counts and call overhead;
- ``calibration``: ``fit_calibration``, a per-session fit scored leave-one-out;
- ``fidelity``: ``count_session`` (what a replay counts with) and recorded vs computed.

>>> from context_forensics.tokens import TokenCounter, fit_calibration

The names below are imported on first use, so that ``import context_forensics.tokens.assets``
(and ``ctxf --help``) stays free of numpy and the tokenizers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the submodule that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("EXACT", "RECORDED", "CALIBRATED", "ESTIMATED", "FIGURE_KINDS"), "labels"),
    **dict.fromkeys(("get_encoding", "load_embedder", "resolve_model_path"), "assets"),
    **dict.fromkeys(("TOKENIZER_ENCODINGS", "Tokenizer", "get_tokenizer"), "tokenizers"),
    "TokenCache": "cache",
    **dict.fromkeys(("openai_image_tokens", "anthropic_image_tokens"), "images"),
    **dict.fromkeys(("normalize_tools", "render_openai_functions"), "tool_schemas"),
    **dict.fromkeys(("TokenCounter", "MessageCounts", "CallOverhead"), "counter"),
    **dict.fromkeys(("CAL_METHODS", "IDENTITY", "Calibration", "fit_calibration"), "calibration"),
    **dict.fromkeys(("SessionCounts", "StepTokens", "calibrate_steps", "context_starts", "count_session",
                     "fidelity_text", "session_fidelity", "step_tokens", "summarize"), "fidelity"),
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # pragma: no cover - what the lazy imports below resolve to
    from .assets import get_encoding, load_embedder, resolve_model_path
    from .cache import TokenCache
    from .calibration import CAL_METHODS, IDENTITY, Calibration, fit_calibration
    from .counter import CallOverhead, MessageCounts, TokenCounter
    from .fidelity import (
        SessionCounts,
        StepTokens,
        calibrate_steps,
        context_starts,
        count_session,
        fidelity_text,
        session_fidelity,
        step_tokens,
        summarize,
    )
    from .images import anthropic_image_tokens, openai_image_tokens
    from .labels import CALIBRATED, ESTIMATED, EXACT, FIGURE_KINDS, RECORDED
    from .tokenizers import TOKENIZER_ENCODINGS, Tokenizer, get_tokenizer
    from .tool_schemas import normalize_tools, render_openai_functions


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
