"""An agent's unlogged overhead, measured on a capture of its requests.

A transcript (a Claude Code JSONL, a Codex rollout) records the conversation, not the system
prompt and tool definitions the agent sent beside it on every call. A request capture of the
same agent (a HAR file of its API traffic, ``importers/har.py``) holds them whole. ``Captured``
is those parts as a capture shows them; ``captured_tokens`` counts them with a replay's counter
(its tokenizer and chat format), and ``count_session`` adds to every call the parts the
transcript lacks: the system prompt where the log holds no system message, the tool definitions
where no call of the log lists any. They are counted exactly for the capture; applied to another
session they are an estimate (the prompt can hold the session's working folder, date or
memory files), which the session's recorded usage, where it has any, calibrates further.

Which capture applies to which transcript is decided in ``analysis/replay/captures.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records import KIND_MESSAGE, Message
from .counter import TokenCounter
from .tool_schemas import normalize_tools


@dataclass(frozen=True)
class Captured:
    """The parts of a captured request the model read beside the conversation."""

    system: tuple[str, ...]  # the system / developer messages (a Responses call's instructions)
    tools: Any  # the tool definitions as sent (a list), or None
    # where they come from: the capture session, its entry, user agent, agent and version, and
    # how it was chosen ("same agent version", or "asked" with --overhead-from)
    source: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CapturedTokens:
    system: int  # tokens of the system messages (their framing included); 0 when not added
    tools: int  # tokens of the tool definitions (their framing included); 0 when not added
    n_tools: int
    parts: tuple[str, ...]  # what was added: "system_prompt", "tool_definitions"

    @property
    def total(self) -> int:
        return self.system + self.tools


def has_system_prompt(msgs: Sequence[Message]) -> bool:
    """Whether a log holds a system prompt: a system or developer message that is a message (not
    a compaction's boundary marker or a recorded edit, which some logs write with that role)."""
    return any(m.role in ("system", "developer") and m.kind == KIND_MESSAGE for m in msgs)


def captured_tokens(counter: TokenCounter, cap: Captured, msgs: Sequence[Message],
                    logged_tools: bool) -> CapturedTokens:
    """What ``cap`` adds to each call of a session whose messages are ``msgs`` (``logged_tools``:
    whether a call of the log lists its tool definitions), counted by ``counter``."""
    parts: list[str] = []
    system = tools = n_tools = 0
    if cap.system and not has_system_prompt(msgs):
        counts = counter.count_messages([Message(role="system", text=t) for t in cap.system])
        system = int(counts.tokens.sum())
        parts.append("system_prompt")
    if cap.tools and not logged_tools:
        functions, others = normalize_tools(cap.tools)
        tools = counter.tools_tokens(functions, others)[0]
        n_tools = len(cap.tools) if isinstance(cap.tools, list) else 0
        parts.append("tool_definitions")
    return CapturedTokens(system, tools, n_tools, tuple(parts))


def captured_words(cap: Captured, got: CapturedTokens, tokenizer: str) -> str:
    """What the added tokens rest on, in a line."""
    src = cap.source
    what = " + ".join(
        ([f"system prompt {got.system:,}"] if got.system else [])
        + ([f"{got.n_tools} tool definition(s) {got.tools:,}"] if got.tools else []))
    who = " ".join(str(x) for x in (src.get("agent"), src.get("version")) if x) or src.get("user_agent") or "an agent"
    how = ("a capture of the same agent version" if src.get("match") == "same agent version"
           else f"the capture asked for ({src['match']})" if src.get("match") else "a capture")
    return (f"{what} tokens from {how}: session {src.get('session', '?')}, entry {src.get('entry', '?')} "
            f"({who}), counted by {tokenizer}; an estimate for this session")


__all__ = ["Captured", "CapturedTokens", "captured_tokens", "captured_words", "has_system_prompt"]
