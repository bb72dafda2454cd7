"""Built-in model table (tokenizer, window, reserved output, overflow policy per model) and the
rules that place a model name in it.

Each entry is dated: providers change windows and behaviours, so ``as_of`` says when the figures were last checked
and ``source`` where, or what a figure rests on when no provider page states it. ``reserved_output`` is the most a
call can keep free for its reply (the documented max output where the provider counts the reply against the window);
a recorded call that was answered bounds it further for that session (see ``replay``). ``model_mappings`` in the
config overrides or extends this table: a mapping is the way to add a model.

How a name finds its entry (``lookup``); the first rule that matches wins:

1. **Normalize.** Case is ignored; a provider or router prefix is dropped (everything up to the
   last ``/``: ``openai/``, ``anthropic/``, ``gemini/``, ``google/``, ``litellm_proxy/``,
   ``vertex_ai/``, ``openrouter/anthropic/``, ``models/``), as is a dotted vendor prefix
   (``anthropic.``, ``us.anthropic.``, ``google_genai.``) and ``meta-`` before ``llama``. A dot
   between two digits reads as a dash, so ``claude-sonnet-4.6`` is ``claude-sonnet-4-6`` and
   ``gemini-2-5-pro`` is ``gemini-2.5-pro``.
2. **Exact** table name, then an **alias** (another name a provider uses for an entry:
   ``gpt-4-1106-preview`` → ``gpt-4-turbo``, ``chatgpt-4o-latest`` → ``gpt-4o``).
3. **Snapshot**: suffixes stripped from the end one at a time, trying 2. after each: a date
   (``-20251001``, ``-2024-07-18``, ``-05-06``, ``-0613``), ``-latest``, ``-preview``, ``-exp``,
   a Bedrock or Vertex version (``-v2:0``, ``@20241022``), a tag (``:8b``). A snapshot has its
   entry's figures: ``claude-haiku-4-5-20251001`` → ``claude-haiku-4-5``,
   ``gemini-3-pro-preview`` → ``gemini-3-pro``.
4. **Variant**: an entry's name, then ``-`` and anything that is not a version number:
   ``gpt-4o-mini-search-preview`` → ``gpt-4o-mini``, ``gemma-3-27b-it`` → ``gemma-3``,
   ``gpt-4-code-interpreter`` → ``gpt-4``; the longest such entry wins. ``claude-opus-4-7`` is no
   variant of ``claude-opus-4``: ``-7`` is a version.
5. **Family** (``FAMILIES``), for versions newer than the table: ``claude-opus-4-N`` →
   ``claude-opus-4-6``, ``claude-sonnet-4-N`` → ``claude-sonnet-4-6``, ``claude-haiku-4-N`` →
   ``claude-haiku-4-5``, ``gpt-5.N-codex`` → ``gpt-5.1-codex``, ``gpt-5.N`` → ``gpt-5.1``,
   ``gemini-3.N-pro`` → ``gemini-3.1-pro``, ``gemini-3.N-flash`` → ``gemini-3-flash`` (each the
   newest of its family in the table).

Rules 4 and 5 lend another model's figures, so every replay header says which entry they come
from ("claude-opus-4-7 → table entry claude-opus-4-6 (family claude-opus-4-N, as of …)"). A
``[1m]`` suffix (Claude Code's name for the 1M-context window) takes the entry's 1M window
where the table gives it one.

A name that matches nothing is an ``UnknownModelError`` (exit 2, with the closest known names)
when a user typed it. When a log recorded it, or names no model at all, it is no typo: the
session replays under ``assumed`` limits (``session_spec``), and every output says so.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError, UsageError
from .models_vendor import (
    CHAT_DEEPSEEK,
    CHAT_MISTRAL,
    DEEPSEEK_TOKENIZERS,
    MISTRAL_TOKENIZERS,
    VENDOR_ALIASES,
    vendor_models,
)
from .schema import Config, ModelConfig

# How a model's chat is framed, for per-message overhead and tool schema counting.
CHAT_OPENAI = "openai"
CHAT_ANTHROPIC = "anthropic"
CHAT_GEMINI = "gemini"
CHAT_GENERIC = "generic"

# What a replay assumes for a session whose model the table cannot place: a generic window
# that no provider promised, labelled "assumed" on every output (never a silent default).
ASSUMED_LIMIT = 128_000
ASSUMED_TOKENIZER = "approx"
ASSUMED_POLICY = "reject"
ASSUMED_HINT = "pass --model or map it in model_mappings"

# How a name matched (ModelSpec.match); the last three lend figures the name does not own.
MATCHES = ("exact", "alias", "snapshot", "mapping", "variant", "family", "assumed")
BORROWED = ("variant", "family")
BORROWED_HINT = "map {} in model_mappings for its own figures"


class UnknownModelError(UsageError):
    """A model name the table and the config's mappings cannot place (a typo, or a model to map)."""


@dataclass(frozen=True)
class ModelSpec:
    name: str  # as given (or recorded)
    tokenizer: str
    context_limit: int
    reserved_output: int
    policy: str
    chat_format: str = CHAT_GENERIC
    params: dict[str, Any] = field(default_factory=dict)
    preserve_system: bool = True
    as_of: str = ""
    source: str = ""
    origin: str = "built-in"  # or the config file that defined it, or "assumed"
    entry: str = ""  # the table entry (or mapping) whose figures these are; "" when assumed
    match: str = "exact"  # see MATCHES
    rule: str = ""  # the variant or family rule that matched
    assumed: str = ""  # why the limits are assumed (match "assumed")
    long_context: int | None = None  # the window of the entry's 1M variant (name[1m])
    # Set by a replay: the session's recorded usage that bounded reserved output (or the limit).
    bound: dict[str, Any] | None = None
    # Set when the log records the window its agent ran the model under (Letta's llm_config
    # context_window, max_tokens): {"limit", "reserved_output", "source", "table": {limit, reserved_output}}.
    log_limit: dict[str, Any] | None = None

    @property
    def budget(self) -> int:
        return self.context_limit - self.reserved_output

    @property
    def is_assumed(self) -> bool:
        return self.match == "assumed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "tokenizer": self.tokenizer, "context_limit": self.context_limit,
            "reserved_output": self.reserved_output, "policy": self.policy, "params": self.params,
            "chat_format": self.chat_format, "preserve_system": self.preserve_system,
            "as_of": self.as_of, "source": self.source, "origin": self.origin,
            "entry": self.entry, "match": self.match, "rule": self.rule or None,
            "assumed": self.assumed_dict(), "long_context": self.long_context, "bound": self.bound,
            "log_limit": self.log_limit,
        }

    def assumed_dict(self) -> dict[str, Any] | None:
        """What the replay assumed and why, or None when the limits come from the table or config."""
        if not self.is_assumed:
            return None
        return {"reason": self.assumed, "limit": self.context_limit, "reserved_output": self.reserved_output,
                "tokenizer": self.tokenizer, "policy": self.policy, "hint": ASSUMED_HINT}


def _m(name: str, tokenizer: str, limit: int, reserved: int, policy: str, chat: str, as_of: str, source: str,
       long_context: int | None = None, **params: Any) -> ModelSpec:
    return ModelSpec(name, tokenizer, limit, reserved, policy, chat, params, True, as_of, source,
                     entry=name, long_context=long_context)


_OPENAI_DOCS = "platform.openai.com/docs/models"
_ANTHROPIC_DOCS = "docs.anthropic.com/en/docs/about-claude/models"
_CLAUDE = "platform.claude.com/docs/en/models/"
_GEMINI_DOCS = "ai.google.dev/gemini-api/docs/models"
_GEMINI_IO = ("input token limit {:,}; the output limit ({:,}) is separate, so nothing is reserved "
              "from the input window")
_CLAUDE_1M = "; for a 1M session (context-1m beta, [1m] in Claude Code) name it {}[1m] or map it"

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
    _m("gpt-5-codex", "o200k_base", 400_000, 128_000, "auto_compaction", CHAT_OPENAI, "2026-12-01",
       "developers.openai.com/api/docs/models/gpt-5-codex (400,000 context, 128,000 max output); "
       "Codex CLI auto-compacts at 90% of its 272,000 input window (preset codex)", preset="codex"),
    _m("gpt-5.1", "o200k_base", 400_000, 128_000, "reject", CHAT_OPENAI, "2025-11-13", _OPENAI_DOCS),
    _m("gpt-5.1-codex", "o200k_base", 400_000, 128_000, "auto_compaction", CHAT_OPENAI, "2026-12-01",
       "OpenAI model page (400,000 context, 128,000 max output: a 272,000 input budget); the corpus's Codex CLI "
       "0.58 rollout records model_context_window 258,400 = 95% of that budget; Codex auto-compacts at 90% of "
       "the 272,000 (preset codex)",
       preset="codex"),
    _m("o1", "o200k_base", 200_000, 100_000, "reject", CHAT_OPENAI, "2026-12-01",
       "platform.openai.com/docs/models/o1 (200,000 context, 100,000 max output)"),
    _m("o1-mini", "o200k_base", 128_000, 65_536, "reject", CHAT_OPENAI, "2026-12-01",
       "platform.openai.com/docs/models/o1-mini (128,000 context, 65,536 max output)"),
    _m("o3", "o200k_base", 200_000, 100_000, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("o4-mini", "o200k_base", 200_000, 100_000, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-4-turbo", "cl100k_base", 128_000, 4_096, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    _m("gpt-4", "cl100k_base", 8_192, 0, "reject", CHAT_OPENAI, "2025-11-01",
       _OPENAI_DOCS + " (8,192 shared by prompt and reply: nothing reserved, a long prompt leaves a short reply)"),
    _m("gpt-4-32k", "cl100k_base", 32_768, 0, "reject", CHAT_OPENAI, "2026-12-01",
       "platform.openai.com/docs/models/gpt-4 (legacy gpt-4-32k snapshots: 32,768 shared, as gpt-4)"),
    _m("gpt-3.5-turbo", "cl100k_base", 16_385, 4_096, "reject", CHAT_OPENAI, "2025-11-01", _OPENAI_DOCS),
    # Anthropic: no offline tokenizer, so counts are estimates (calibrated when usage is recorded).
    _m("claude-3-opus", "claude", 200_000, 4_096, "reject", CHAT_ANTHROPIC, "2026-12-01",
       _CLAUDE + "overview, legacy models: claude-3-opus-20240229 (200K context, 4,096 max output)"),
    _m("claude-3-sonnet", "claude", 200_000, 4_096, "reject", CHAT_ANTHROPIC, "2026-12-01",
       _CLAUDE + "overview, legacy models: claude-3-sonnet-20240229 (200K context, 4,096 max output)"),
    _m("claude-3-haiku", "claude", 200_000, 4_096, "reject", CHAT_ANTHROPIC, "2026-12-01",
       _CLAUDE + "overview, legacy models: claude-3-haiku-20240307 (200K context, 4,096 max output)"),
    _m("claude-3-5-sonnet", "claude", 200_000, 8_192, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-3-5-haiku", "claude", 200_000, 8_192, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-3-7-sonnet", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-sonnet-4", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2025-11-01",
       _ANTHROPIC_DOCS + _CLAUDE_1M.format("claude-sonnet-4"), long_context=1_000_000),
    _m("claude-sonnet-4-5", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2026-12-01",
       _CLAUDE + "sonnet-4-5 (200K context, 64K max output)" + _CLAUDE_1M.format("claude-sonnet-4-5"),
       long_context=1_000_000),
    _m("claude-sonnet-4-6", "claude", 200_000, 128_000, "reject", CHAT_ANTHROPIC, "2026-12-01",
       _CLAUDE + "sonnet-4-6 (released 2026-02-17; 128K max output; lists a 1M context now): 200K is the "
       "window without the 1M beta, which harnesses of the time ran it with (Copilot CLI's model list: 200K)"
       + _CLAUDE_1M.format("claude-sonnet-4-6"), long_context=1_000_000),
    _m("claude-haiku-4-5", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-opus-4", "claude", 200_000, 32_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-opus-4-1", "claude", 200_000, 32_000, "reject", CHAT_ANTHROPIC, "2025-11-01", _ANTHROPIC_DOCS),
    _m("claude-opus-4-5", "claude", 200_000, 64_000, "reject", CHAT_ANTHROPIC, "2025-11-24", _ANTHROPIC_DOCS),
    _m("claude-opus-4-6", "claude", 200_000, 128_000, "reject", CHAT_ANTHROPIC, "2026-12-01",
       _CLAUDE + "opus-4-6 (released 2026-02-05; 128K max output; lists a 1M context now): 200K is the "
       "window without the 1M beta, which Claude Code 2.1 ran it with (this corpus's session auto-compacted "
       "at 167,731 tokens, Claude Code's 200K threshold)" + _CLAUDE_1M.format("claude-opus-4-6"),
       long_context=1_000_000),
    # Claude Code wraps Claude models in auto-compaction.
    _m("claude-code", "claude", 200_000, 32_000, "auto_compaction", CHAT_ANTHROPIC, "2025-11-01",
       "Claude Code auto-compact (preset claude_code: 2.1.21+, window - min(max output, 20k) - 13k; "
       "claude_code_2_0 for 2.0)", preset="claude_code"),
    # Google: the input limit is the window; the reply has its own limit.
    _m("gemini-2.0-flash", "gemini", 1_048_576, 0, "reject", CHAT_GEMINI, "2026-12-01",
       _GEMINI_DOCS + "/gemini-2.0-flash: " + _GEMINI_IO.format(1_048_576, 8_192)),
    _m("gemini-2.0-pro", "gemini", 2_097_152, 0, "reject", CHAT_GEMINI, "2026-12-01",
       "Gemini 2.0 Pro Experimental (gemini-2.0-pro-exp-02-05, no longer on Google's model pages): input "
       "2,097,152, output 8,192 as listed in Roo-Code's model table (PR #2079)"),
    _m("gemini-2.5-pro", "gemini", 1_048_576, 0, "reject", CHAT_GEMINI, "2026-12-01",
       "docs.cloud.google.com .../models/gemini/2-5-pro: " + _GEMINI_IO.format(1_048_576, 65_535)),
    _m("gemini-2.5-flash", "gemini", 1_048_576, 0, "reject", CHAT_GEMINI, "2026-12-01",
       _GEMINI_DOCS + "/gemini-2.5-flash: " + _GEMINI_IO.format(1_048_576, 65_536)),
    _m("gemini-3-pro", "gemini", 1_048_576, 0, "reject", CHAT_GEMINI, "2026-12-01",
       _GEMINI_DOCS + "/gemini-3-pro-preview: " + _GEMINI_IO.format(1_048_576, 65_536)),
    _m("gemini-3-flash", "gemini", 1_048_576, 0, "reject", CHAT_GEMINI, "2026-12-01",
       "docs.cloud.google.com .../models/gemini/3-flash (gemini-3-flash-preview): "
       + _GEMINI_IO.format(1_048_576, 65_536)),
    _m("gemini-3.1-pro", "gemini", 1_048_576, 0, "reject", CHAT_GEMINI, "2026-12-01",
       _GEMINI_DOCS + "/gemini-3.1-pro-preview: " + _GEMINI_IO.format(1_048_576, 65_536)),
    _m("gemma-7b", "approx", 8_192, 1_024, "left_truncation", CHAT_GENERIC, "2024-02-21",
       "ai.google.dev/gemma/docs (8k context)"),
    _m("gemma-2", "approx", 8_192, 1_024, "local_global_attention", CHAT_GENERIC, "2024-06-27",
       "Gemma 2 report: 4,096-token local layers alternating 1:1 with global", preset="gemma-2"),
    _m("gemma-3", "approx", 131_072, 8_192, "local_global_attention", CHAT_GENERIC, "2025-03-12",
       "Gemma 3 report: 1,024-token local layers, 5 local : 1 global", preset="gemma-3"),
    *vendor_models(_m),  # Mistral and DeepSeek (models_vendor.py)
    # Open weights with real tokenizers.
    _m("llama-3.1", "llama3", 131_072, 4_096, "left_truncation", CHAT_GENERIC, "2024-07-23",
       "Meta Llama 3.1 model card (128k)"),
    _m("llama-3.2", "llama3", 131_072, 4_096, "left_truncation", CHAT_GENERIC, "2024-09-25",
       "Meta Llama 3.2 model card (1B and 3B text models: 128k)"),
    _m("llama-3.3", "llama3", 131_072, 4_096, "left_truncation", CHAT_GENERIC, "2024-12-06",
       "Meta Llama 3.3 model card (128k)"),
    _m("qwen2.5", "qwen3", 32_768, 8_192, "left_truncation", CHAT_GENERIC, "2024-09-19",
       "Qwen2.5 model card (32k native)"),
    _m("qwen3", "qwen3", 32_768, 8_192, "left_truncation", CHAT_GENERIC, "2025-04-29",
       "Qwen3 model card (32k native, 131k with YaRN)"),
    # xAI: its tokenizer is in no installed package, so counts are the approx tokenizer's estimate.
    _m("grok-4.1-fast", "approx", 2_000_000, 30_000, "reject", CHAT_GENERIC, "2026-12-06",
       "docs.oracle.com .../generative-ai/xai-grok-4-1-fast.htm (a 2M-token context window); "
       "opencode.ai/data/xai/grok-4-1-fast (max output 30K)"),
    # Moonshot's Kimi K2.N (K2.5, K2.6, K2.7-code): its tokenizer (a tiktoken file of the model's
    # repository) is in no installed package, so counts are the approx tokenizer's estimate.
    _m("kimi-k2.5", "approx", 262_144, 0, "reject", CHAT_GENERIC, "2026-12-06",
       "promptfoo.dev/docs/providers/moonshot: Moonshot's Kimi K2 thinking models kimi-k2.5, kimi-k2.6 and "
       "kimi-k2.7-code have a 256k context; the Kimi Code CLI journals of the corpus (kimi-k2.7-code, protocol "
       "1.4) send maxTokens 262,144; no maximum output is published, so nothing is reserved for the reply"),
)

# Other names providers use for an entry (rule 2).
ALIASES: dict[str, str] = {
    "gpt-4-1106-preview": "gpt-4-turbo", "gpt-4-0125-preview": "gpt-4-turbo", "gpt-4-turbo-preview": "gpt-4-turbo",
    "gpt-4-vision-preview": "gpt-4-turbo", "gpt-4-1106-vision-preview": "gpt-4-turbo",
    "chatgpt-4o-latest": "gpt-4o", "gpt-3.5-turbo-16k": "gpt-3.5-turbo",
    # Cursor's names for Anthropic models (its model picker; a SpecStory export of a Cursor chat records them)
    "claude-4-sonnet": "claude-sonnet-4",
    **VENDOR_ALIASES,
}

# Rule 5: (label, pattern over the normalized name, entry). A pattern matches at the start of
# the name and ends at its end or at a "-".
FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("claude-opus-4-N", r"claude-opus-4-\d+", "claude-opus-4-6"),
    ("claude-sonnet-4-N", r"claude-sonnet-4-\d+", "claude-sonnet-4-6"),
    ("claude-haiku-4-N", r"claude-haiku-4-\d+", "claude-haiku-4-5"),
    ("gpt-5.N-codex", r"gpt-5-\d+-codex", "gpt-5.1-codex"),
    ("gpt-5.N", r"gpt-5-\d+", "gpt-5.1"),
    ("gemini-3.N-pro", r"gemini-3-\d+-pro", "gemini-3.1-pro"),
    ("gemini-3.N-flash", r"gemini-3-\d+-flash", "gemini-3-flash"),
    ("deepseek-v3.N", r"deepseek-v3-\d+", "deepseek-v3"),
    ("kimi-k2.N", r"kimi-k2-\d+", "kimi-k2.5"),
)

_VENDOR_PREFIX = re.compile(r"^(?:[a-z][a-z0-9_]*\.)+(?=[a-z])")  # anthropic., us.anthropic., google_genai.
_DOT_VERSION = re.compile(r"(?<=\d)\.(?=\d)")
_SNAPSHOT = re.compile(
    r"(?:@[\w.-]+|:[\w.-]+|-v\d+|-20\d{6}|-20\d{2}-\d{2}-\d{2}|-\d{2}-\d{2}"
    r"|-(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])|-latest|-preview|-exp)$"
)
_ONE_M = "[1m]"


def _key(name: str) -> str:
    """The normalized form names are compared in (rule 1)."""
    n = name.strip().lower()
    if "/" in n:
        n = n.rsplit("/", 1)[1]
    n = _VENDOR_PREFIX.sub("", n)
    if n.startswith("meta-llama"):
        n = n[len("meta-"):]
    return _DOT_VERSION.sub("-", n)


def normalize(name: str) -> str:
    """'openai/gpt-4o-mini-2024-07-18' -> 'gpt-4o-mini-2024-07-18'; 'claude-sonnet-4.6' -> 'claude-sonnet-4-6'."""
    return _key(name)


_BY_KEY = {_key(m.name): m for m in BUILTIN}
_ALIAS_KEYS = {_key(a): _BY_KEY[_key(t)] for a, t in ALIASES.items()}
_FAMILY_RES = tuple((label, re.compile(pattern + r"(?=$|-)"), _BY_KEY[_key(entry)])
                    for label, pattern, entry in FAMILIES)


def _snapshots(key: str) -> list[str]:
    """The key, then the key with one more snapshot suffix stripped, until none is left."""
    out = [key]
    while True:
        stripped = _SNAPSHOT.sub("", out[-1])
        if stripped == out[-1] or not stripped:
            return out
        out.append(stripped)


def _is_version(rest: str) -> bool:
    """Whether what follows an entry's name ("-7", "-7-thinking") starts with a version number."""
    token = rest[1:].split("-", 1)[0]
    return token.isdigit()


def _lookup(key: str) -> tuple[ModelSpec, str, str] | None:
    """(entry, match, rule) for a normalized name, by rules 2-5."""
    for i, k in enumerate(_snapshots(key)):
        if k in _BY_KEY:
            return _BY_KEY[k], "exact" if i == 0 else "snapshot", ""
        if k in _ALIAS_KEYS:
            return _ALIAS_KEYS[k], "alias", ""
    base = _snapshots(key)[-1]
    best: ModelSpec | None = None
    for k, spec in _BY_KEY.items():  # rule 4: the longest entry the name extends
        if base.startswith(k + "-") and not _is_version(base[len(k):]) and (best is None
                                                                            or len(k) > len(_key(best.name))):
            best = spec
    if best is not None:
        return best, "variant", f"{best.name}-*"
    for label, pattern, spec in _FAMILY_RES:
        if pattern.match(base):
            return spec, "family", label
    return None


def builtin_spec(name: str) -> ModelSpec | None:
    """The table's spec for a model name (rules 1-5 of the module docstring), or None.

    The spec keeps the name as given; ``entry``, ``match`` and ``rule`` say where its figures
    come from.
    """
    key = _key(name)
    one_m = key.endswith(_ONE_M)
    if one_m:
        key = key[: -len(_ONE_M)]
    found = _lookup(key)
    if found is None:
        return None
    spec, match, rule = found
    out = replace(spec, name=name.strip(), match=match, rule=rule)
    if one_m:
        if not spec.long_context:
            return None  # no 1M window on record for this entry
        out = replace(out, context_limit=spec.long_context, rule=(rule + " " if rule else "") + "[1m]",
                      source=spec.source + f"; [1m]: the {spec.long_context:,}-token window")
    return out


# ---------------------------------------------------------------- unknown names


def _squash(name: str) -> str:
    return re.sub(r"[-._ ]", "", _key(name))


def suggest(name: str, config: Config | None = None, n: int = 3) -> list[str]:
    """Up to n known names closest to ``name`` (table entries, aliases, the config's mappings)."""
    known = [m.name for m in BUILTIN] + list(ALIASES) + (list(config.model_mappings) if config else [])
    by_squash: dict[str, str] = {}
    for k in known:
        by_squash.setdefault(_squash(k), k)
    close = difflib.get_close_matches(_squash(name), list(by_squash), n=n, cutoff=0.6)
    return [by_squash[c] for c in close]


def unknown_model_message(name: str, config: Config | None = None) -> str:
    close = suggest(name, config)
    return f"unknown model {name!r}" + (f": did you mean {', '.join(close)}?" if close else "")


_UNKNOWN_HINT = "`ctxf models` lists the known models; a model_mappings entry in the config adds one"


# ---------------------------------------------------------------- the config's mappings

# What a mapping of a brand-new model (no base, a name the table does not know) gets for the
# keys it leaves out; context_limit it must give.
NEW_MODEL_DEFAULTS = {"tokenizer": "approx", "eviction_strategy": "reject", "reserved_output": 0,
                      "preserve_system": True}


def _mapping_base(name: str, mc: ModelConfig) -> ModelSpec | None:
    """The table entry a mapping takes the figures it leaves out from: its ``base``, else the
    entry its own name is (exactly, or as an alias or snapshot), else none."""
    if mc.base:
        return builtin_spec(mc.base)
    spec = builtin_spec(name)
    return spec if spec is not None and spec.match not in BORROWED else None


def _from_config(name: str, mc: ModelConfig, source: str, *, shown: str | None = None) -> ModelSpec:
    base = _mapping_base(name, mc)

    def pick(key: str) -> Any:
        value = getattr(mc, key)
        if value is not None:
            return value
        if base is not None:
            return {"tokenizer": base.tokenizer, "context_limit": base.context_limit,
                    "reserved_output": base.reserved_output, "eviction_strategy": base.policy,
                    "preserve_system": base.preserve_system}[key]
        if key == "context_limit":
            raise ConfigError("a new model needs context_limit (or base: a table model to take figures from)",
                              where=f"{source}: model_mappings.{name}",
                              hint="e.g. context_limit: 32768, or base: " + (suggest(name) or ["gpt-4o"])[0])
        return NEW_MODEL_DEFAULTS[key]

    tokenizer, limit, reserved = pick("tokenizer"), pick("context_limit"), pick("reserved_output")
    policy, preserve = pick("eviction_strategy"), pick("preserve_system")
    if base is not None and base.tokenizer == tokenizer:
        chat = base.chat_format
    else:
        chat = (CHAT_OPENAI if tokenizer in ("o200k_base", "cl100k_base") else CHAT_MISTRAL
                if tokenizer in MISTRAL_TOKENIZERS else CHAT_DEEPSEEK if tokenizer in DEEPSEEK_TOKENIZERS
                else CHAT_GENERIC)
    params = dict(base.params if base is not None and base.policy == policy else {})
    params.update(mc.params)
    over = f"mapping in {source}" + (f" over table entry {base.entry}" if base is not None else "")
    return ModelSpec(name=shown or name, tokenizer=tokenizer, context_limit=limit, reserved_output=reserved,
                     policy=policy, chat_format=chat, params=params, preserve_system=preserve,
                     as_of=base.as_of if base is not None else "",
                     source=over + (f" ({base.source})" if base is not None and base.source else ""),
                     origin=source, entry=name, match="mapping")


def check_mapping(name: str, mc: ModelConfig, source: str) -> ModelSpec:
    """Validate one ``model_mappings`` entry against the table: its base, its figures."""
    key = f"model_mappings.{name}"
    if mc.base is not None:
        spec = builtin_spec(mc.base)
        if spec is None:
            raise ConfigError(unknown_model_message(mc.base), where=f"{source}: {key}.base", hint=_UNKNOWN_HINT)
    out = _from_config(name, mc, source)
    if out.reserved_output >= out.context_limit:
        given = "reserved_output" if mc.reserved_output is not None else "context_limit"
        raise ConfigError(f"reserved_output ({out.reserved_output:,}) must be below context_limit "
                          f"({out.context_limit:,})", where=f"{source}: {key}.{given}",
                          hint="one of them comes from the table entry; set both" if mc.reserved_output is None
                          or mc.context_limit is None else None)
    return out


def _mapping(name: str, config: Config | None) -> tuple[str, ModelConfig] | None:
    """The config mapping for a name: same normalized name, then the name without snapshot suffixes."""
    if config is None or not config.model_mappings:
        return None
    keys = {_key(k): k for k in config.model_mappings}
    for k in _snapshots(_key(name)):
        if k in keys:
            return keys[k], config.model_mappings[keys[k]]
    return None


def check_name(name: str, config: Config | None, *, where: str) -> None:
    """A ConfigError naming ``where`` unless ``name`` is a known model (for an audit rule's ``model:``)."""
    if _mapping(name, config) is None and builtin_spec(name) is None:
        raise ConfigError(unknown_model_message(name, config), where=where, hint=_UNKNOWN_HINT)


# ---------------------------------------------------------------- resolution


def assumed_spec(name: str | None, reason: str) -> ModelSpec:
    """The generic limits a replay assumes when the table cannot place a session's model."""
    return ModelSpec(name=name or "unknown", tokenizer=ASSUMED_TOKENIZER, context_limit=ASSUMED_LIMIT,
                     reserved_output=0, policy=ASSUMED_POLICY, chat_format=CHAT_GENERIC, as_of="",
                     source=f"assumed: {reason}", origin="assumed", entry="", match="assumed", assumed=reason)


def resolve_model(name: str, config: Config | None = None, *, recorded: bool = False) -> ModelSpec:
    """The spec for a model name: the config's ``model_mappings`` first, then the built-in table.

    A name neither knows is an ``UnknownModelError`` naming the closest known names, unless it
    was ``recorded`` by a log: then the session replays under assumed limits (``assumed_spec``).
    """
    found = _mapping(name, config)
    if found is not None:
        return _from_config(found[0], found[1], config.source, shown=name.strip())  # type: ignore[union-attr]
    spec = builtin_spec(name)
    if spec is not None:
        return spec
    if recorded:
        close = suggest(name, config)
        return assumed_spec(name, f"the recorded model {name!r} is not in the model table"
                            + (f" (closest: {', '.join(close)})" if close else ""))
    raise UnknownModelError(unknown_model_message(name, config), hint=_UNKNOWN_HINT)


def session_spec(recorded: str | None, config: Config | None = None) -> ModelSpec:
    """The spec a session replays under by default: the model its log recorded. This is the one
    place that decides a replay's limits are assumed (no model in the log, or one the table and
    the config cannot place)."""
    if not recorded:
        return assumed_spec(None, "the log names no model")
    return resolve_model(recorded, config, recorded=True)


def same_model(recorded: str | None, spec: ModelSpec, config: Config | None = None) -> bool:
    """Whether a call recorded under the model ``recorded`` ran under ``spec``: the same table
    entry or mapping with the same window, and the same model, not one lending the other its
    figures (``claude-opus-4-7`` is not ``claude-opus-4-6``, though it borrows its entry)."""
    other = session_spec(recorded, config)
    if spec.log_limit:  # the session's own limits, recorded in its log: compare the table's
        t = spec.log_limit["table"]
        spec = replace(spec, context_limit=t["limit"], reserved_output=t["reserved_output"], log_limit=None)
    same_name = _snapshots(_key(other.name))[-1] == _snapshots(_key(spec.name))[-1]
    if other.is_assumed or spec.is_assumed:
        return other.is_assumed and spec.is_assumed and same_name
    if (other.entry, other.origin, other.context_limit) != (spec.entry, spec.origin, spec.context_limit):
        return False
    return same_name or (other.match not in BORROWED and spec.match not in BORROWED)


def spec_notes(spec: ModelSpec) -> list[str]:
    """What a replay header says about where a spec's figures come from (empty: an exact entry)."""
    notes = []
    if spec.is_assumed:
        notes.append(f"model unknown: assumed {spec.context_limit:,}-token window, {spec.reserved_output:,} reserved, "
                     f"{spec.tokenizer} tokenizer, {spec.policy} on overflow ({spec.assumed}); {ASSUMED_HINT}")
    elif spec.match in BORROWED:
        how = f"family {spec.rule}" if spec.match == "family" else f"variant {spec.rule}"
        notes.append(f"{spec.name} → table entry {spec.entry} ({how}, as of {spec.as_of}); "
                     f"{BORROWED_HINT.format(spec.name)}")
    elif spec.match == "mapping":
        if _key(spec.name) != _key(spec.entry):
            notes.append(f"{spec.name} → model_mappings entry {spec.entry} ({spec.origin})")
    elif spec.match in ("alias", "snapshot") or "[1m]" in spec.rule:
        notes.append(f"{spec.name} → table entry {spec.entry}" + (f" ({spec.rule})" if spec.rule else "")
                     + (f", as of {spec.as_of}" if spec.as_of else ""))
    if spec.log_limit:
        t = spec.log_limit["table"]
        notes.append(f"limit {spec.context_limit:,}, reserved {spec.reserved_output:,}: recorded in the log "
                     f"({spec.log_limit['source']}; table: {t['limit']:,}, {t['reserved_output']:,})")
    b = spec.bound
    if b:
        if b.get("limit") is not None:
            notes.append(f"limit ≥ {b['limit']['bound']:,}: step {b['step']} was accepted with "
                         f"{b['recorded_prompt_tokens']:,} tokens (table: {b['limit']['table']:,}), so 0 reserved")
        else:
            notes.append(f"reserved ≤ {b['reserved_output']['bound']:,}: step {b['step']} was accepted with "
                         f"{b['recorded_prompt_tokens']:,} tokens (table: {b['reserved_output']['table']:,})")
    return notes


def effective_mappings(config: Config) -> dict[str, dict[str, Any]]:
    """The config's mappings as ``config show`` prints them: every figure filled in (from the
    base, the table entry of the name, or the new-model defaults), with ``base`` and where each
    figure came from left in ``from_table`` (the keys the file leaves out)."""
    out = {}
    for name, mc in config.model_mappings.items():
        spec = _from_config(name, mc, config.source)
        base = _mapping_base(name, mc)
        out[name] = {"tokenizer": spec.tokenizer, "context_limit": spec.context_limit,
                     "eviction_strategy": spec.policy, "preserve_system": spec.preserve_system,
                     "reserved_output": spec.reserved_output, "params": spec.params,
                     "base": base.entry if base is not None else None,
                     "from_table": [k for k in ("tokenizer", "context_limit", "eviction_strategy", "preserve_system",
                                                "reserved_output") if getattr(mc, k) is None]}
    return out


def all_models(config: Config | None = None) -> list[ModelSpec]:
    """The built-in table with the config's mappings laid over it (for ``ctxf models``)."""
    out = {m.name: m for m in BUILTIN}
    if config is not None:
        for key, mc in config.model_mappings.items():
            out[key] = _from_config(key, mc, config.source)
    return sorted(out.values(), key=lambda m: m.name)


def family_rules() -> list[dict[str, str]]:
    """The family rules (rule 5), for ``ctxf models``."""
    return [{"family": label, "entry": entry} for label, _, entry in FAMILIES]
