"""Chat framing per format: what a message costs besides its text, planned without a tokenizer.

A message is *planned* into the strings to tokenize (whose token sum the cache keeps) and a
structural constant (per-message overhead, images) that is recomputed from its structure on
every count. One planner per chat format (OpenAI, Anthropic, open-weights templates), and the
constants each call adds (reply priming, tool schemas, tool choice).

How OpenAI frames tool traffic, fitted to the corpus' Inspect logs and OpenAI cassettes, where
the exact request and the recorded ``prompt_tokens`` are both known (all 23 calls match to the
token), and to published API counts for nested schemas and ``tool_choice``:

- tool schemas: a ``namespace functions { ... }`` block (TypeScript-like types; nested objects
  unindented, with their descriptions), each description line as ``// line`` (stripped, blank
  lines ``//``); +9 tokens, -4 when the prompt has a system message; ``tool_choice`` "none" +1,
  a forced function +7 + its name (Chat Completions) or +4 (Responses);
- an assistant turn with one tool call: ``assistant to=functions.NAME`` as the role, the
  arguments as content, +1;
- with several calls: one ``assistant to=multi_tool_use.parallel`` message whose content is the
  compact JSON ``{"tool_uses":[{"recipient_name":"functions.NAME","parameters":{...}}, ...]}``;
- a tool result: ``functions.NAME`` as the role;
- a Responses-API reasoning item (Codex): as many tokens as its call recorded as reasoning.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..records import (
    KIND_CLEARED_TOOL_RESULT,
    KIND_REASONING,
    MARKER_KINDS,
    Message,
)
from .images import UNKNOWN_IMAGE_OTHER, anthropic_image_part, openai_image_part

# Bump when a framing formula changes: old cached sums then simply stop matching.
FORMULA_VERSION = 1

# OpenAI constants (see the module docstring).
OPENAI_PER_MESSAGE = 3
OPENAI_PER_NAME = 1
OPENAI_REPLY_PRIMING = 3
OPENAI_TOOLS_OVERHEAD = 9
OPENAI_TOOLS_WITH_SYSTEM = -4
OPENAI_SINGLE_CALL_EXTRA = 1
OPENAI_TOOL_CHOICE_NONE = 1
OPENAI_TOOL_CHOICE_FORCED = 7  # + the function name's tokens (Chat Completions)
OPENAI_TOOL_CHOICE_FORCED_RESPONSES = 4  # Responses API: one corpus call

# Anthropic: rough framing (the tokenizer is a stand-in anyway; calibration absorbs the rest).
ANTHROPIC_PER_MESSAGE = 4
ANTHROPIC_REPLY_PRIMING = 4
ANTHROPIC_PER_TOOL_USE = 12
ANTHROPIC_PER_TOOL_RESULT = 8
ANTHROPIC_TOOL_PROMPT = {"auto": 346, "none": 346, "any": 313, "tool": 313}  # Claude docs, 4.x models

# Open-weights chat templates: (per message besides role and text, per call).
TEMPLATE_OVERHEAD = {
    "llama3": (4, 5),  # <|start_header_id|>role<|end_header_id|>\n\n ... <|eot_id|>; <|begin_of_text|>
    "qwen3": (4, 3),  # <|im_start|>role\n ... <|im_end|>\n; <|im_start|>assistant\n
}
GENERIC_PER_MESSAGE = 4
GENERIC_REPLY_PRIMING = 3


# --------------------------------------------------------------------------------------------
# planning a message


@dataclass(slots=True)  # one per message per count
class Plan:
    """One message planned for counting: what to tokenize, a constant, and what was assumed."""

    texts: list[str] = field(default_factory=list)  # tokenized; their sum is what is cached
    const: int = 0  # structure, images: recomputed on every count
    flags: list[str] = field(default_factory=list)  # what had to be assumed (makes it estimated)


def _compact_json(args: str) -> Any:
    try:
        return json.loads(args) if args.strip() else {}
    except (json.JSONDecodeError, AttributeError):
        return args


def plan_openai(m: Message, model: str | None) -> Plan:
    kind = m.kind
    if kind in MARKER_KINDS:  # a marker the model never read
        return Plan()
    if kind == KIND_REASONING:
        # A reasoning item sent back to the Responses API: only its summary text is readable.
        return Plan([m.text], 0, ["reasoning item: counted its readable summary only"])
    role = m.role
    if role == "tool" or kind == KIND_CLEARED_TOOL_RESULT:
        p = Plan([f"functions.{m.name}" if m.name else "tool", m.text], OPENAI_PER_MESSAGE)
    elif m.tool_calls:
        p = Plan()
        if m.text:  # text before the call travels as its own assistant message
            p.const += OPENAI_PER_MESSAGE
            p.texts += [role, m.text]
            p.flags.append("assistant text beside tool calls: framing estimated")
        p.const += OPENAI_PER_MESSAGE
        if len(m.tool_calls) == 1:
            c = m.tool_calls[0]
            p.texts += [f"{role} to=functions.{c.name}", c.arguments]
            p.const += OPENAI_SINGLE_CALL_EXTRA
        else:
            uses = [{"recipient_name": f"functions.{c.name}", "parameters": _compact_json(c.arguments)}
                    for c in m.tool_calls]
            p.texts += [f"{role} to=multi_tool_use.parallel",
                        json.dumps({"tool_uses": uses}, ensure_ascii=False, separators=(",", ":"))]
    elif m.name:
        p = Plan([role, m.text, m.name], OPENAI_PER_MESSAGE + OPENAI_PER_NAME)
    else:
        p = Plan([role, m.text], OPENAI_PER_MESSAGE)
    if m.parts:  # most messages have none
        _parts_openai(m, p, model)
    return p


def _parts_openai(m: Message, p: Plan, model: str | None) -> None:
    for part in m.parts:
        t = part.get("type")
        if t == "image":
            tokens, flag = openai_image_part(part, model)
            p.const += tokens
            if flag:
                p.flags.append(flag)
        elif t in ("thinking", "redacted_thinking", "refusal", "encrypted_reasoning"):
            continue  # not sent back to Chat Completions / already in the text
        elif t in ("audio", "file", "document", "video"):
            # Their cost depends on content the log does not keep (duration, pages).
            p.flags.append(f"{t} part: not counted")


def plan_anthropic(m: Message) -> Plan:
    p = Plan()
    if m.kind in MARKER_KINDS:
        return p
    if m.kind == KIND_REASONING:
        p.texts.append(m.text)
        return p
    p.const += ANTHROPIC_PER_MESSAGE
    p.texts.append(m.text)
    if m.role == "tool" or m.kind == KIND_CLEARED_TOOL_RESULT:
        p.const += ANTHROPIC_PER_TOOL_RESULT
    for c in m.tool_calls:
        p.texts += [c.name, c.arguments]
        p.const += ANTHROPIC_PER_TOOL_USE
    for part in m.parts:
        t = part.get("type")
        if t == "image":
            tokens, flag = anthropic_image_part(part)
            p.const += tokens
            if flag:
                p.flags.append(flag)
        elif t == "thinking":
            p.texts.append(str(part.get("text") or ""))
        elif t in ("redacted_thinking", "encrypted_reasoning", "refusal"):
            continue
        elif t:
            blob = json.dumps(part, ensure_ascii=False, default=str)
            p.texts.append(blob)
    return p


def plan_generic(m: Message, per_message: int) -> Plan:
    p = Plan()
    if m.kind in MARKER_KINDS:
        return p
    p.const += per_message
    p.texts += [m.role, m.text]
    for c in m.tool_calls:
        p.texts.append(json.dumps({"name": c.name, "arguments": _compact_json(c.arguments)},
                                  ensure_ascii=False))
    for part in m.parts:
        t = part.get("type")
        if t == "image":
            p.const += UNKNOWN_IMAGE_OTHER
            p.flags.append(f"image: estimated {UNKNOWN_IMAGE_OTHER}")
        elif t == "thinking":
            p.texts.append(str(part.get("text") or ""))
    return p


def recorded_reasoning(messages: Sequence[Message], tokens: np.ndarray, plans: list[Plan]) -> None:
    """Size reasoning items by the reasoning tokens their call recorded.

    A reasoning item sent back to the Responses API (Codex) is encrypted; the model reads the
    full reasoning, whose size the producing call's usage records (``reasoning_tokens`` of the
    assistant message that follows in the same call). The first item of a call gets that
    figure, later items of the same call 0. Without a recorded figure the readable summary
    stays as the (flagged) estimate.
    """
    n = len(messages)
    i = 0
    while i < n:
        if messages[i].kind != KIND_REASONING:
            i += 1
            continue
        j = i
        while j < n and messages[j].kind == KIND_REASONING:
            j += 1
        r = None
        k = j  # the call's usage sits on one of the assistant messages right after its reasoning
        while k < n and messages[k].role == "assistant" and messages[k].kind != KIND_REASONING:
            if messages[k].usage is not None:
                r = messages[k].usage.reasoning_tokens
                break
            k += 1
        if r is not None:
            for k in range(i, j):
                tokens[k] = r if k == i else 0
                plans[k].flags = ["reasoning item: sized by its call's recorded reasoning tokens"]
        i = j
