"""Built-in model table: tokenizer, window, reserved output and overflow policy per model.

Each entry is dated: providers change windows and behaviours, so ``as_of`` says when the
figures were last checked, and ``source`` where. ``model_mappings`` in the config overrides
or extends this table. Names match by exact name first, then by the longest known prefix
after stripping a provider prefix ("openai/gpt-4o-mini-2024-07-18" → "gpt-4o-mini").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from .config import Config, ModelConfig

# How a model's chat is framed, for per-message overhead and tool schema counting.
CHAT_OPENAI = "openai"
CHAT_ANTHROPIC = "anthropic"
CHAT_GEMINI = "gemini"
CHAT_GENERIC = "generic"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    tokenizer: str
    context_limit: int
    reserved_output: int
    policy: str
    chat_format: str = CHAT_GENERIC
    params: dict[str, Any] = field(default_factory=dict)
    preserve_system: bool = True
    as_of: str = ""
    source: str = ""
    origin: str = "built-in"  # or the config file that defined it

    @property
    def budget(self) -> int:
        return self.context_limit - self.reserved_output

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "tokenizer": self.tokenizer, "context_limit": self.context_limit,
            "reserved_output": self.reserved_output, "policy": self.policy, "params": self.params,
            "chat_format": self.chat_format, "preserve_system": self.preserve_system,
            "as_of": self.as_of, "source": self.source, "origin": self.origin,
        }


def _m(name, tokenizer, limit, reserved, policy, chat, as_of, source, **params) -> ModelSpec:
    return ModelSpec(name, tokenizer, limit, reserved, policy, chat, params, True, as_of, source)


_OPENAI_DOCS = "platform.openai.com/docs/models"
_ANTHROPIC_DOCS = "docs.anthropic.com/en/docs/about-claude/models"
_GEMINI_DOCS = "ai.google.dev/gemini-api/docs/models"

BUILTIN: tuple[ModelSpec, ...] = (
    # OpenAI: real encodings; the API rejects oversize prompts.
    _m("gpt-4o", "o200k_base", 128_000, 16_384, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-4o-mini", "o200k_base", 128_000, 16_384, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-4.1", "o200k_base", 1_047_576, 32_768, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-4.1-mini", "o200k_base", 1_047_576, 32_768, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-4.1-nano", "o200k_base", 1_047_576, 32_768, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-5", "o200k_base", 400_000, 128_000, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-5-mini", "o200k_base", 400_000, 128_000, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-5-nano", "o200k_base", 400_000, 128_000, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-5-codex", "o200k_base", 400_000, 128_000, "auto_compaction", CHAT_OPENAI, "2025-11-01",
       "Codex CLI: auto-compaction at 90% of the window", preset="codex"),
    _m("gpt-5.1", "o200k_base", 400_000, 128_000, "reject", CHAT_OPENAI, "2025-11-13", _OPENAI_DOCS),
    _m("gpt-5.1-codex", "o200k_base", 400_000, 128_000, "auto_compaction", CHAT_OPENAI, "2025-11-13",
       "Codex CLI: auto-compaction at 90% of the window", preset="codex"),
    _m("o3", "o200k_base", 200_000, 100_000, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("o4-mini", "o200k_base", 200_000, 100_000, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-4-turbo", "cl100k_base", 128_000, 4_096, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-4", "cl100k_base", 8_192, 0, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-3.5-turbo", "cl100k_base", 16_385, 4_096, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    # Anthropic: no offline tokenizer, so counts are estimates (calibrated when usage is recorded).
    _m("claude-3-5-sonnet", "claude", 200_000, 8_192, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-3-5-haiku", "claude", 200_000, 8_192, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-3-7-sonnet", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-sonnet-4", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-sonnet-4-5", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-haiku-4-5", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-opus-4", "claude", 200_000, 32_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-opus-4-1", "claude", 200_000, 32_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-opus-4-5", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2025-11-24", _ANTHROPIC_DOCS),
    # Claude Code wraps Claude models in auto-compaction.
    _m("claude-code", "claude", 200_000, 32_000, "auto_compaction", CHAT_ANTHROPIC, "2025-11-01",
       "Claude Code auto-compact (window - reserved output - buffer)", preset="claude_code"),
    # Google
    _m("gemini-2.5-pro", "gemini", 1_048_576, 65_536, "reject", CHAT_GEMINI, "2025-11-01", _GEMINI_DOCS),
    _m("gemini-2.5-flash", "gemini", 1_048_576, 65_536, "reject", CHAT_GEMINI, "2025-11-01", _GEMINI_DOCS),
    _m("gemini-3-pro", "gemini", 1_048_576, 65_536, "reject", CHAT_GEMINI, "2025-11-18", _GEMINI_DOCS),
    _m("gemma-7b", "approx", 8_192, 1_024, "left_truncation", CHAT_GENERIC, "2024-02-21",
       "ai.google.dev/gemma/docs (8k context)"),
    _m("gemma-2", "approx", 8_192, 1_024, "local_global_attention", CHAT_GENERIC, "2024-06-27",
       "Gemma 2 report: 4,096-token local layers alternating 1:1 with global", preset="gemma-2"),
    _m("gemma-3", "approx", 131_072, 8_192, "local_global_attention", CHAT_GENERIC, "2025-03-12",
       "Gemma 3 report: 1,024-token local layers, 5 local : 1 global", preset="gemma-3"),
    # Open weights with real tokenizers.
    _m("mistral-7b", "approx", 8_192, 1_024, "local_global_attention", CHAT_GENERIC, "2023-10-10",
       "Mistral 7B paper: sliding-window attention, 4,096 tokens", preset="mistral-7b"),
    _m("llama-3.1", "llama3", 131_072, 4_096, "left_truncation", CHAT_GENERIC, "2024-07-23",
       "Meta Llama 3.1 model card (128k)"),
    _m("llama-3.3", "llama3", 131_072, 4_096, "left_truncation", CHAT_GENERIC, "2024-12-06",
       "Meta Llama 3.3 model card (128k)"),
    _m("qwen2.5", "qwen3", 32_768, 8_192, "left_truncation", CHAT_GENERIC, "2024-09-19",
       "Qwen2.5 model card (32k native)"),
    _m("qwen3", "qwen3", 32_768, 8_192, "left_truncation", CHAT_GENERIC, "2025-04-29",
       "Qwen3 model card (32k native, 131k with YaRN)"),
    _m("deepseek-chat", "approx", 128_000, 8_192, "reject", CHAT_OPENAI, "2025-09-29",
       "api-docs.deepseek.com (DeepSeek-V3.2, 128k)"),
)
_BY_NAME = {m.name: m for m in BUILTIN}

# Family defaults for names the table does not know (longest prefix wins).
_FAMILIES = (
    ("gpt-4o", "gpt-4o"), ("gpt-4.1", "gpt-4.1"), ("gpt-5", "gpt-5"), ("gpt-4", "gpt-4"),
    ("gpt-3.5", "gpt-3.5-turbo"), ("o1", "o3"), ("o3", "o3"), ("o4", "o4-mini"),
    ("claude-3-5-sonnet", "claude-3-5-sonnet"), ("claude-3-5-haiku", "claude-3-5-haiku"),
    ("claude-3", "claude-3-5-sonnet"), ("claude-sonnet", "claude-sonnet-4-5"),
    ("claude-haiku", "claude-haiku-4-5"), ("claude-opus", "claude-opus-4-1"), ("claude", "claude-sonnet-4-5"),
    ("gemini", "gemini-2.5-pro"), ("gemma-3", "gemma-3"), ("gemma-2", "gemma-2"), ("gemma", "gemma-7b"),
    ("mistral", "mistral-7b"), ("llama", "llama-3.1"), ("meta-llama", "llama-3.1"),
    ("qwen3", "qwen3"), ("qwen", "qwen2.5"), ("deepseek", "deepseek-chat"),
)

_DATE_SUFFIX = re.compile(r"-(20\d{6}|\d{4}-\d{2}-\d{2}|latest|preview.*)$")


def normalize(name: str) -> str:
    """'openai/gpt-4o-mini-2024-07-18' -> 'gpt-4o-mini-2024-07-18' (provider prefix stripped, lowercased)."""
    n = name.strip().lower()
    if "/" in n:
        n = n.rsplit("/", 1)[1]
    return n.replace("claude-3.5", "claude-3-5").replace("claude-3.7", "claude-3-7")


def builtin_spec(name: str) -> ModelSpec | None:
    """The table entry for a model name (exact, without a date suffix, then by family), or None."""
    n = normalize(name)
    for candidate in (n, _DATE_SUFFIX.sub("", n)):
        if candidate in _BY_NAME:
            return _BY_NAME[candidate]
    best = None
    for prefix, target in _FAMILIES:
        if n.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, target)
    if best is not None:
        return replace(_BY_NAME[best[1]], name=n, source=_BY_NAME[best[1]].source + f" (family {best[0]})")
    return None


def _from_config(name: str, mc: ModelConfig, base: ModelSpec | None, source: str) -> ModelSpec:
    chat = base.chat_format if base else (CHAT_OPENAI if mc.tokenizer in ("o200k_base", "cl100k_base")
                                          else CHAT_GENERIC)
    params = dict(base.params if base and base.policy == mc.eviction_strategy else {})
    params.update(mc.params)
    return ModelSpec(name=name, tokenizer=mc.tokenizer, context_limit=mc.context_limit,
                     reserved_output=mc.reserved_output, policy=mc.eviction_strategy, chat_format=chat,
                     params=params, preserve_system=mc.preserve_system,
                     as_of=base.as_of if base else "", source=base.source if base else "", origin=source)


def resolve_model(name: str, config: Config | None = None) -> ModelSpec:
    """The spec for a model name: the config's ``model_mappings`` first, then the built-in table.

    An unknown name falls back to a generic 128k model with an ``approx`` tokenizer and says so
    in ``source``.
    """
    if config is not None:
        for key, mc in config.model_mappings.items():
            if normalize(key) == normalize(name):
                return _from_config(name, mc, builtin_spec(name), config.source)
    spec = builtin_spec(name)
    if spec is not None:
        return spec
    return ModelSpec(name=name, tokenizer="approx", context_limit=128_000, reserved_output=0, policy="reject",
                     chat_format=CHAT_GENERIC, source="unknown model: generic 128k estimate", origin="fallback")


def all_models(config: Config | None = None) -> list[ModelSpec]:
    """The built-in table with the config's mappings laid over it (for ``ctxf models``)."""
    out = {m.name: m for m in BUILTIN}
    if config is not None:
        for key, mc in config.model_mappings.items():
            out[key] = _from_config(key, mc, builtin_spec(key), config.source)
    return sorted(out.values(), key=lambda m: m.name)
