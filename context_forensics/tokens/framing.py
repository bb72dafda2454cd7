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

How Anthropic frames a request (its tokenizer is unpublished, so texts are counted with the
``claude`` stand-in and the constants below are in Claude tokens). Each constant rests on an
exact API figure: Anthropic's documented ``count_tokens`` examples (platform.claude.com/docs/en/
build-with-claude/token-counting: system "You are a scientist" + user "Hello, Claude" = 14; the
extended-thinking example, three messages with the earlier turn's thinking dropped, = 88) and
the corpus' Anthropic cassettes (llm-anthropic's recordings, whose exact request is logged):

- a user or assistant turn +4, the system prompt its text only, the reply priming +3: the
  cassettes' prose prompts (10 tokens of text -> 17, 3 -> 10, three turns of 17 -> 32); on the
  count_tokens examples this gives 14 (documented 14), 413 (403, with tools) and 93 (88, with
  thinking: its digits and symbols weigh as code does);
- tools: the tool-use system prompt Anthropic adds, per model and ``tool_choice``
  (``ANTHROPIC_TOOL_PROMPTS``, the docs' table), plus each definition rendered as the JSON-schema
  line the prompt lists (``tool_schemas.render_anthropic_functions``); Anthropic-schema tools
  (bash, text editor, computer use) at their documented cost;
- a ``tool_use`` block its name and input, a ``tool_result`` block its output, plus
  ``ANTHROPIC_PER_TOOL_USE`` / ``ANTHROPIC_PER_TOOL_RESULT`` (the ids, the invoke and result
  markup, the result's share of its user turn), fitted on the cassettes' two tool rounds (one
  call and its result cost 41 beyond their text, two parallel ones 58 each: ~50 a pair, split
  evenly, as no log tells the two apart);
- extended thinking on: a thinking system prompt ("a specialized system prompt is automatically
  included", the extended-thinking docs; its size is not published): ``thinking.type`` enabled
  +29 (the cassettes' same prompt with and without thinking, Sonnet 4.5 and Haiku 4.5: 46 - 17),
  adaptive +17 (Opus 4.6 in llm-anthropic's cassettes: 34 - 17); earlier turns' thinking blocks
  are kept only by the models that keep them (``keeps_thinking``; sized by the output tokens of
  the call that wrote them, ``TokenCounter._full_thinking``), dropped by the others (which keep
  the current tool loop's: not counted, as a message's count cannot depend on the step);
- an image per Claude's area rule (``images.py``) + ``ANTHROPIC_PER_IMAGE`` (llm-anthropic's
  cassettes: a 166x282 PNG, 63 by the rule, costs 69 alone in a turn and 71 beside a text block);
  a plain-text document or search result as its
  text; a PDF's cost depends on pages the log does not keep (flagged, not counted).

Not modelled (each seen in llm-anthropic's cassettes): a request that ends with an assistant
prefill (its turn and the reply priming are one: +4 too many), structured outputs
(``output_config.format``: a schema prompt of ~210 tokens), and a server tool's results (the
usage of a web_search call includes the pages the server added: the request alone is 2,039 of
its 10,423 input tokens).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..records import (
    KIND_CLEARED_TOOL_RESULT,
    KIND_MESSAGE,
    KIND_REASONING,
    MARKER_KINDS,
    Message,
)
from .images import UNKNOWN_IMAGE_OTHER, anthropic_image_part, openai_image_part

# Bump when a framing formula changes: old cached sums then simply stop matching.
FORMULA_VERSION = 3

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

# Anthropic constants (see the module docstring for what each rests on).
ANTHROPIC_PER_MESSAGE = 4  # a user or assistant turn; the system prompt adds its text only
ANTHROPIC_REPLY_PRIMING = 3
ANTHROPIC_PER_TOOL_USE = 25  # the cassettes' tool rounds cost ~50 per call + result: split evenly
ANTHROPIC_PER_TOOL_RESULT = 25
ANTHROPIC_THINKING_PROMPT = {"enabled": 29, "adaptive": 17}  # measured on cassettes (docstring)
ANTHROPIC_PER_IMAGE = 6  # beside the area rule: llm-anthropic's 166x282 PNG alone in a turn, 69 = 63 + 6

# The tool-use system prompt per model: (pattern on the model id, (auto/none, any/tool)).
# Anthropic's table "Tool use system prompt token count" (platform.claude.com/docs/en/agents-and-
# tools/tool-use/overview#pricing, as of 2026-07; retired models from the same page as of
# 2025-11: Sonnet 3.7, Sonnet 3.5 (Oct 346/313, June 294/261), Claude 3 Opus/Sonnet/Haiku).
# The 2026 revision raised Haiku/Sonnet/Opus 4.5 from 346 to 496: the corpus' Haiku 4.5
# cassettes (2025-11) agree with 496 (346 would leave them 28% short). First match wins.
ANTHROPIC_TOOL_PROMPTS: tuple[tuple[str, tuple[int, int]], ...] = (
    (r"opus-4-8", (290, 410)),
    (r"opus-4-7", (675, 804)),
    (r"(opus|sonnet)-4-6", (497, 589)),
    (r"(opus|sonnet|haiku)-4-5", (496, 588)),
    (r"(opus-4|sonnet-4)(-1)?($|-2025|-v|@|:)", (313, 315)),
    (r"sonnet-5", (354, 474)),
    (r"3-7-sonnet", (346, 313)),
    (r"3-5-sonnet-20240620", (294, 261)),
    (r"3-5-sonnet", (346, 313)),  # Oct 2024 (20241022, "-latest", "v2")
    (r"3-5-haiku", (264, 355)),
    (r"3-opus", (530, 281)),
    (r"3-sonnet", (159, 235)),
    (r"3-haiku", (264, 340)),
)
ANTHROPIC_TOOL_PROMPT_DEFAULT = (497, 589)  # a newer or unknown Claude: the latest 4.x figures
_TOOL_PROMPT_RES = tuple((re.compile(p), v) for p, v in ANTHROPIC_TOOL_PROMPTS)

# Anthropic-schema client tools: the documented tokens each definition adds (same page as the
# table above); the server tools (web_search, web_fetch, code_execution) publish none.
ANTHROPIC_SCHEMA_TOOLS = {"bash_": 245, "text_editor_": 700, "computer_": 735}
ANTHROPIC_SERVER_TOOLS = ("web_search_", "web_fetch_", "code_execution_", "tool_search_")


def anthropic_tool_prompt(model: str | None, choice: Any) -> tuple[int, str | None]:
    """Tokens of the tool-use system prompt for a model and ``tool_choice``, and a flag when the
    model is not in Anthropic's table (then the latest 4.x figures are assumed)."""
    ctype = choice.get("type") if isinstance(choice, dict) else (choice or "auto")
    forced = str(ctype) in ("any", "tool")
    name = (model or "").lower()
    for rx, pair in _TOOL_PROMPT_RES:
        if rx.search(name):
            return pair[forced], None
    pair = ANTHROPIC_TOOL_PROMPT_DEFAULT
    return pair[forced], (f"tool-use system prompt of {model or 'an unnamed model'} not documented: "
                          f"assumed {pair[forced]}")


def keeps_thinking(model: str | None) -> bool:
    """Whether the API keeps earlier assistant turns' thinking blocks in the prompt by default.

    Claude docs, extended thinking, "Thinking block preservation by model"
    (platform.claude.com/docs/en/build-with-claude/extended-thinking): Opus 4.5 and later Opus
    models and Sonnet 4.6 and later Sonnet models keep all prior thinking; Opus 4.1 and earlier,
    Sonnet 4.5 and earlier and every Haiku through 4.5 keep only the current tool-use loop's
    (a plain user message strips them).
    """
    name = (model or "").lower()
    m = re.search(r"(opus|sonnet|haiku)-(\d+)(?:-(\d))?(?!\d)", name)
    if not m or "claude-3" in name:
        return False
    family, major, minor = m.group(1), int(m.group(2)), int(m.group(3) or 0)
    if family == "haiku":
        return (major, minor) > (4, 5)
    if family == "opus":
        return (major, minor) >= (4, 5)
    return (major, minor) >= (4, 6)

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


def plan_anthropic(m: Message, keep_thinking: bool = False) -> Plan:
    """One message as Anthropic frames it (see the module docstring). ``keep_thinking``: the
    model keeps earlier turns' thinking in the prompt (``keeps_thinking``); otherwise a thinking
    part counts nothing (the API drops it once a user message follows)."""
    p = Plan()
    if m.kind in MARKER_KINDS:
        return p
    if m.kind == KIND_REASONING:
        if keep_thinking:
            p.texts.append(m.text)
        return p
    p.texts.append(m.text)
    if m.role == "tool" or m.kind == KIND_CLEARED_TOOL_RESULT:
        p.const += ANTHROPIC_PER_TOOL_RESULT  # a block of a user turn: its share of the turn inside
    elif m.role not in ("system", "developer"):
        p.const += ANTHROPIC_PER_MESSAGE
    for c in m.tool_calls:
        p.texts += [c.name, c.arguments]
        p.const += ANTHROPIC_PER_TOOL_USE
    for part in m.parts:
        t = part.get("type")
        if t == "image":
            tokens, flag = anthropic_image_part(part)
            p.const += tokens + ANTHROPIC_PER_IMAGE
            if flag:
                p.flags.append(flag)
        elif t == "thinking":
            if keep_thinking:
                p.texts.append(str(part.get("text") or ""))
                p.flags.append("earlier thinking kept by this model: counted as logged (the API re-reads "
                               "the full thinking; a log may hold its summary)")
        elif t in ("redacted_thinking", "encrypted_reasoning"):
            if keep_thinking:
                p.flags.append(f"{t} kept by this model: its size is not in the log, not counted")
        elif t == "refusal":
            continue
        elif isinstance(t, str) and (t in ("document", "search_result") or t.endswith("_tool_result")):
            text = part.get("text")
            if isinstance(text, str) and text:
                p.texts += [text] + [str(part[k]) for k in ("title", "context") if isinstance(part.get(k), str)]
            else:
                what = "PDF" if "pdf" in str(part.get("media_type") or "") else str(t)
                p.flags.append(f"{what} part: its content is not in the log, not counted")
        elif t:
            p.texts.append(json.dumps(part, ensure_ascii=False, default=str))
            p.flags.append(f"{t} part: counted as its JSON (framing unknown)")
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
    generic_parts(m, p)
    return p


def generic_parts(m: Message, p: Plan) -> None:
    """A message's parts in a chat template that says nothing of them (open weights, Mistral,
    DeepSeek): an image at a flat estimate, thinking as text, what the log does not keep (audio,
    files, documents, video) flagged, not counted."""
    for part in m.parts:
        t = part.get("type")
        if t == "image":
            p.const += UNKNOWN_IMAGE_OTHER
            p.flags.append(f"image: estimated {UNKNOWN_IMAGE_OTHER}")
        elif t == "thinking":
            p.texts.append(str(part.get("text") or ""))
        elif t in ("audio", "file", "document", "video"):
            p.flags.append(f"{t} part: not counted")


def recorded_reasoning(messages: Sequence[Message], tokens: np.ndarray, plans: list[Plan]) -> None:
    """Size reasoning items by the reasoning tokens their call recorded.

    A reasoning item sent back to the Responses API (Codex) is encrypted; the model reads the
    full reasoning, whose size the producing call's usage records (``reasoning_tokens`` of the
    call's assistant message: the one right before the reasoning, as the Codex importer writes a
    call, else the ones right after it, as formats that write the reasoning first do). The first
    item of a call gets that figure, later items of the same call 0. Without a recorded figure
    the readable summary stays as the (flagged) estimate.
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
        k = i - 1  # the call's assistant message right before its reasoning (Codex)
        if k >= 0 and messages[k].role == "assistant" and messages[k].kind == KIND_MESSAGE \
                and (u := messages[k].usage) is not None:
            r = u.reasoning_tokens
        else:
            k = j  # else its usage sits on one of the assistant messages right after its reasoning
            while k < n and messages[k].role == "assistant" and messages[k].kind != KIND_REASONING:
                if (u := messages[k].usage) is not None:
                    r = u.reasoning_tokens
                    break
                k += 1
        if r is not None:
            for k in range(i, j):
                tokens[k] = r if k == i else 0
                plans[k].flags = ["reasoning item: sized by its call's recorded reasoning tokens"]
        i = j
