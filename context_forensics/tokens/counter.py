"""``TokenCounter``: a model's per-message token counts and per-call overhead, cached.

Counting is split so the expensive part is cached: a message is planned (``framing.py``) into
strings to tokenize plus a structural constant. Only the strings' token sum is stored, keyed by
the message's content hash and a scheme key (``<tokenizer>/<chat format>/v<formula>``), in the
store's ``token_counts`` table (``cache.py``); the constant is recomputed from the message's
structure, which needs no tokenizer. Each figure is labelled (``labels.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config.models import CHAT_ANTHROPIC, CHAT_DEEPSEEK, CHAT_GENERIC, CHAT_MISTRAL, CHAT_OPENAI, ModelSpec
from ..hashing import content_hash
from ..records import KIND_CLEARED_TOOL_RESULT, Message
from ..store.redact import META_KEY as REDACTION
from .cache import TokenCache
from .framing import (
    ANTHROPIC_REPLY_PRIMING,
    ANTHROPIC_SCHEMA_TOOLS,
    ANTHROPIC_SERVER_TOOLS,
    ANTHROPIC_THINKING_PROMPT,
    FORMULA_VERSION,
    GENERIC_PER_MESSAGE,
    GENERIC_REPLY_PRIMING,
    OPENAI_REPLY_PRIMING,
    OPENAI_TOOL_CHOICE_FORCED,
    OPENAI_TOOL_CHOICE_FORCED_RESPONSES,
    OPENAI_TOOL_CHOICE_NONE,
    OPENAI_TOOLS_OVERHEAD,
    OPENAI_TOOLS_WITH_SYSTEM,
    TEMPLATE_OVERHEAD,
    Plan,
    anthropic_tool_prompt,
    keeps_thinking,
    plan_anthropic,
    plan_generic,
    plan_openai,
    recorded_reasoning,
)
from .labels import ESTIMATED, EXACT
from .tokenizers import Tokenizer, get_tokenizer
from .tool_schemas import normalize_tools, render_anthropic_functions, render_openai_functions, request_tools
from .vendor_framing import (
    DEEPSEEK_BOS,
    DEEPSEEK_REPLY_PRIMING,
    MISTRAL_AVAILABLE_TOOLS,
    MISTRAL_BOS,
    MISTRAL_VERSION,
    flag_mistral_runs,
    mistral_tools_json,
    plan_deepseek,
    plan_mistral,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..store.db import Store

@dataclass(frozen=True)
class MessageCounts:
    """Per-message token counts (overhead included) for one tokenizer and chat format."""

    tokens: np.ndarray  # int64[n]
    estimated: np.ndarray  # bool[n]: the figure is an estimate (stand-in tokenizer or a flag)
    flags: tuple[tuple[int, str], ...]  # (message index, what was assumed)
    tokenizer: str

    @property
    def kinds(self) -> list[str]:
        return [ESTIMATED if e else EXACT for e in self.estimated]

    @property
    def total(self) -> int:
        return int(self.tokens.sum())

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class CallOverhead:
    """Tokens a model call adds besides its messages: reply priming, tool schemas, tool choice.

    ``tools`` is the part that comes with the tool definitions (the schemas, the framing a
    provider wraps them in, tool choice); ``tokens - tools`` is the reply priming. A replay
    shows the two on rows of their own, so that a window's rows add up to its total.
    """

    tokens: int
    kind: str
    flags: tuple[str, ...] = ()
    tools: int = 0  # tokens of the tool definitions, included in ``tokens``
    n_tools: int = 0  # how many tool definitions the call sent (functions and others)


class TokenCounter:
    """Counts messages and per-call overhead for a model, with cached tokenization.

    >>> counter = TokenCounter(resolve_model("gpt-4o-mini"), store=store)
    >>> counts = counter.count_messages(messages)   # counts.tokens: int64 per message
    >>> fixed = counter.call_overhead(request=step.meta.get("request"), has_system=True)
    """

    def __init__(self, spec: ModelSpec, *, store: Store | None = None,
                 tokenizer: Tokenizer | None = None, cache: TokenCache | None = None) -> None:
        self.spec = spec
        self.tokenizer = tokenizer or get_tokenizer(spec.tokenizer)  # claude: the weighted stand-in
        self.chat_format = spec.chat_format
        self.cache = cache or TokenCache(store)
        # Claude models that keep earlier turns' thinking count it: a scheme of their own, so a
        # message's cached sum never mixes the two.
        self.keep_thinking = self.chat_format == CHAT_ANTHROPIC and keeps_thinking(spec.name)
        fmt = f"{self.chat_format}+thinking" if self.keep_thinking else self.chat_format
        self.scheme = f"{self.tokenizer.key}/{fmt}/v{FORMULA_VERSION}"
        self.tools_scheme = f"{self.tokenizer.key}/{self.chat_format}-tools/v{FORMULA_VERSION}"

    # -- messages

    def _per_message_generic(self) -> int:
        return TEMPLATE_OVERHEAD.get(self.tokenizer.name, (GENERIC_PER_MESSAGE, 0))[0]

    def plan(self, m: Message) -> Plan:
        """The strings to tokenize and the constant of one message, in this counter's chat format."""
        if self.chat_format == CHAT_OPENAI:
            return plan_openai(m, self.spec.name)
        if self.chat_format == CHAT_ANTHROPIC:
            return plan_anthropic(m, self.keep_thinking)
        if self.chat_format == CHAT_MISTRAL:
            return plan_mistral(m, MISTRAL_VERSION.get(self.tokenizer.name, 7))
        if self.chat_format == CHAT_DEEPSEEK:
            return plan_deepseek(m)
        return plan_generic(m, self._per_message_generic())

    def count_messages(self, messages: Sequence[Message], hashes: Sequence[str] | None = None) -> MessageCounts:
        """Count each message (tokens int64[n], estimated flags); each unique content once.

        ``hashes`` may pass precomputed ``Message.hash`` values (the store keeps them).
        """
        n = len(messages)
        hashes = list(hashes) if hashes is not None else [m.hash for m in messages]
        plans = [self.plan(m) for m in messages]
        if self.chat_format == CHAT_MISTRAL:
            flag_mistral_runs(messages, plans)
        # A message whose secrets the store redacted: its original's sum, recorded at ingest
        # (store/redact.py, tokens/originals.py), never the redacted text's, nor cached by its hash.
        original = self._originals(messages, plans)
        cached = self.cache.get_many([h for i, h in enumerate(hashes) if i not in original], self.scheme)
        todo: dict[str, int] = {}  # hash -> index of a message to tokenize
        for i, h in enumerate(hashes):
            if h not in cached and h not in todo and i not in original:
                todo[h] = i
        if todo:
            unique = list(dict.fromkeys([t for i in todo.values() for t in plans[i].texts if t]))
            count_of = dict(zip(unique, self.tokenizer.count_batch(unique).tolist()))
            fresh = {h: sum([count_of[t] for t in plans[i].texts if t]) for h, i in todo.items()}
            self.cache.put_many(fresh, self.scheme)
            cached = {**cached, **fresh}
        tokens = np.array([(original[i] if i in original else cached[h]) + p.const
                           for i, (h, p) in enumerate(zip(hashes, plans))] if original else
                          [cached[h] + p.const for h, p in zip(hashes, plans)], dtype=np.int64)
        if self.tokenizer.own_vocabulary:  # a vendor vocabulary's label is settled per session (fidelity.py)
            estimated = np.array([bool(p.flags) for p in plans], dtype=bool)
        else:
            estimated = np.ones(n, dtype=bool)
        recorded_reasoning(messages, tokens, plans)
        if self.keep_thinking:
            self._full_thinking(messages, tokens, plans)
        flags = tuple((i, f) for i, p in enumerate(plans) for f in p.flags)
        return MessageCounts(tokens, estimated, flags, self.tokenizer.name)

    def _full_thinking(self, messages: Sequence[Message], tokens: np.ndarray, plans: list[Plan]) -> None:
        """Size kept thinking by what its call produced, not by the summary the log holds.

        The API re-reads the full thinking (decrypted from the block's signature), while a log
        keeps the summary the response showed (extended-thinking docs, "Summarized thinking").
        The call that wrote the message recorded its output: thinking tokens when the usage has
        them, else output tokens less the visible reply (text and tool calls) as counted here.
        """
        for i, m in enumerate(messages):
            if m.role != "assistant" or m.usage is None or not m.usage.completion_tokens:
                continue
            thoughts = [str(p.get("text") or "") for p in m.parts if p.get("type") == "thinking"]
            if not thoughts and not any(p.get("type") == "redacted_thinking" for p in m.parts):
                continue
            summary = int(self.tokenizer.count_batch(thoughts).sum()) if thoughts else 0
            if m.usage.reasoning_tokens is not None:
                full = int(m.usage.reasoning_tokens)
            else:
                visible = int(tokens[i]) - plans[i].const - summary
                full = int(m.usage.completion_tokens) - visible
            if full > summary:
                tokens[i] += full - summary
                plans[i].flags = [f for f in plans[i].flags if "thinking" not in f] + [
                    "earlier thinking kept by this model: sized from its call's output tokens "
                    "(the log holds a summary)"]

    def _originals(self, messages: Sequence[Message], plans: list[Plan]) -> dict[int, int]:
        """Index -> the original's token sum under this scheme, for redacted messages; a redacted
        message without one (stored by a caller that gave the store no counter) is flagged."""
        out: dict[int, int] = {}
        for i, m in enumerate(messages):
            meta = m.meta
            if not meta or REDACTION not in meta:
                continue
            record = meta[REDACTION]
            if not isinstance(record, dict) or not record.get("text_changed"):
                continue
            sums = record.get("tokens")
            if isinstance(sums, dict) and isinstance(sums.get(self.scheme), int):
                out[i] = sums[self.scheme]
            else:
                plans[i].flags.append("secrets redacted, no original count recorded for this tokenizer (ingest counts "
                                      "the log's model; storage.redact_originals: all counts every one): "
                                      "counted as stored")
        return out

    def count_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Token counts of plain texts (no framing), cached by text hash."""
        hashes = [content_hash(t) for t in texts]
        key = f"{self.tokenizer.key}/text/v{FORMULA_VERSION}"
        cached = self.cache.get_many(hashes, key)
        todo = {h: t for h, t in zip(hashes, texts) if h not in cached}
        if todo:
            counts = self.tokenizer.count_batch(list(todo.values()))
            fresh = {h: int(c) for h, c in zip(todo, counts)}
            self.cache.put_many(fresh, key)
            cached = {**cached, **fresh}
        return np.fromiter((cached[h] for h in hashes), dtype=np.int64, count=len(hashes))

    # -- per call

    def tools_tokens(self, functions: list[dict[str, Any]], others: list[Any],
                     original: Mapping[str, int] | None = None) -> tuple[int, list[str]]:
        """Tokens of tool definitions (and what was assumed). ``original``: the token counts of
        the definitions before the store redacted secrets in them, by tools scheme."""
        flags: list[str] = []
        fixed = 0  # Anthropic-schema tools: their documented cost, not their JSON
        if self.chat_format == CHAT_OPENAI:
            blob = render_openai_functions(functions) if functions else ""
        elif self.chat_format == CHAT_MISTRAL:
            blob = mistral_tools_json(functions) if functions else ""
        elif self.chat_format == CHAT_ANTHROPIC:
            blob = render_anthropic_functions(functions) if functions else ""
            rest = []
            for t in others:
                kind = str(t.get("type") or "") if isinstance(t, Mapping) else ""
                cost = next((v for k, v in ANTHROPIC_SCHEMA_TOOLS.items() if kind.startswith(k)), None)
                if cost is None:
                    rest.append(t)
                else:
                    fixed += cost
                if kind.startswith(ANTHROPIC_SERVER_TOOLS):
                    # count_tokens docs: "Server tool token counts only apply to the first sampling call"
                    flags.append(f"server tool {kind}: what the server adds (its results) is in the recorded "
                                 "usage, not in the log")
            others = rest
        else:
            blob = json.dumps(functions, ensure_ascii=False, separators=(",", ":")) if functions else ""
        if others:
            blob += json.dumps(others, ensure_ascii=False, separators=(",", ":"), default=str)
            flags.append(f"{len(others)} non-function tool(s): schema cost estimated")
        if not blob:
            return fixed, flags
        if original is not None and isinstance(original.get(self.tools_scheme), int):
            return int(original[self.tools_scheme]) + fixed, flags
        h = content_hash(blob)
        got = self.cache.get_many([h], self.tools_scheme)
        if h not in got:
            got[h] = self.tokenizer.count(blob)
            self.cache.put_many({h: got[h]}, self.tools_scheme)
        return got[h] + fixed, flags

    def call_overhead(self, request: Mapping[str, Any] | None = None, *, tools: Any = None,
                      has_system: bool = False, originals: Mapping[str, Any] | None = None) -> CallOverhead:
        """Fixed tokens of one call: reply priming, tool schemas (``request["tools"]`` or
        ``tools``), tool choice. ``has_system``: the prompt has a system/developer message.
        ``originals``: the tool definitions' token counts before redaction, ``{"request": {scheme:
        n}, "session": {scheme: n}}`` (the call's and the session's, when the store redacted them)."""
        request = request or {}
        raw_tools, flags = request_tools(request, tools)
        original = None
        if originals and raw_tools is not None:
            original = originals.get("request" if raw_tools is request.get("tools") else "session")
        functions, others = normalize_tools(raw_tools) if raw_tools else ([], [])
        choice = request.get("tool_choice")
        fmt = self.chat_format
        priming = 0
        if fmt == CHAT_OPENAI:
            total = priming = OPENAI_REPLY_PRIMING
            if functions or others:
                t, fl = self.tools_tokens(functions, others, original)
                flags += fl
                total += t + OPENAI_TOOLS_OVERHEAD + (OPENAI_TOOLS_WITH_SYSTEM if has_system else 0)
                if choice == "none":
                    total += OPENAI_TOOL_CHOICE_NONE
                elif isinstance(choice, Mapping) and choice.get("type") in ("function", "tool"):
                    if "responses" in str(request.get("endpoint", "")):
                        total += OPENAI_TOOL_CHOICE_FORCED_RESPONSES
                    else:
                        fn = f if isinstance(f := choice.get("function"), Mapping) else choice
                        total += OPENAI_TOOL_CHOICE_FORCED + int(self.count_texts([str(fn.get("name") or "")])[0])
                elif choice == "required":
                    flags.append("tool_choice=required: its overhead is not known")
        elif fmt == CHAT_ANTHROPIC:
            total = priming = ANTHROPIC_REPLY_PRIMING
            if functions or others:
                t, fl = self.tools_tokens(functions, others, original)
                flags += fl
                prompt, flag = anthropic_tool_prompt(self._prompt_model(request), choice)
                if flag:
                    flags.append(flag)
                total += t + prompt
            thinking = request.get("thinking")
            if isinstance(thinking, Mapping) and thinking.get("type") in ANTHROPIC_THINKING_PROMPT:
                # its own system prompt (the docs give no size: measured on cassettes, framing.py)
                extra = ANTHROPIC_THINKING_PROMPT[str(thinking["type"])]
                total += extra
                priming += extra
        elif fmt in (CHAT_MISTRAL, CHAT_DEEPSEEK):
            # <s> (Mistral: no reply priming); DeepSeek: BOS and <｜Assistant｜> (vendor_framing.py)
            total = priming = MISTRAL_BOS if fmt == CHAT_MISTRAL else DEEPSEEK_BOS + DEEPSEEK_REPLY_PRIMING
            if functions or others:
                t, fl = self.tools_tokens(functions, others, original)
                flags += fl
                if fmt == CHAT_MISTRAL:
                    total += t + MISTRAL_AVAILABLE_TOOLS
                else:
                    total += t
                    flags.append("tool definitions: DeepSeek's template does not render them (counted as JSON)")
        else:
            total = priming = TEMPLATE_OVERHEAD.get(self.tokenizer.name, (0, GENERIC_REPLY_PRIMING))[1]
            if functions or others:
                t, fl = self.tools_tokens(functions, others, original)
                flags += fl
                total += t
        known_framing = fmt in (CHAT_OPENAI, CHAT_MISTRAL, CHAT_DEEPSEEK) or (
            # open-weights templates are known, but render tools in model-specific ways
            fmt == CHAT_GENERIC and self.tokenizer.name in TEMPLATE_OVERHEAD and not (functions or others))
        kind = EXACT if self.tokenizer.own_vocabulary and known_framing and not flags else ESTIMATED
        return CallOverhead(int(total), kind, tuple(flags), int(total - priming), len(functions) + len(others))

    def _prompt_model(self, request: Mapping[str, Any]) -> str:
        """The model id whose tool-use prompt a call gets: the request's own id when it names the
        counter's model (it can tell Claude 3.5 Sonnet's June and October releases apart), else
        the model counted for (a what-if replays the log under another model)."""
        recorded = str(request.get("model") or "")
        return recorded if self.spec.name and self.spec.name in recorded else self.spec.name

    def placeholder_tokens(self, text: str) -> int:
        """Tokens of a short placeholder (a cleared tool result) framed as a tool message."""
        return int(self.count_messages([Message(role="tool", text=text,
                                                kind=KIND_CLEARED_TOOL_RESULT)]).tokens[0])
