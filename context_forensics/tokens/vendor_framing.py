"""Chat framing for the vendor vocabularies: Mistral (mistral-common's instruct encoding) and
DeepSeek (DeepSeek-V3's chat template), planned per message like ``framing.py``'s formats.

**Mistral.** What the Mistral API tokenizes is what mistral-common's
``MistralTokenizer.encode_chat_completion`` builds (mistral_common/tokens/tokenizers/instruct.py,
1.13.1): ``<s>``, then each message's text encoded on its own between control tokens, so a
call's count is a sum over messages plus a per-call constant, and each message's share can be
cached. Per version (the tokenizer name says which: ``mistral-v1`` v1, ``mistral-v2`` v2,
``mistral-v3`` and ``tekken-v3`` v3, ``mistral-v7`` and the ``tekken`` stand-in v7):

- user: ``[INST]`` text ``[/INST]`` (v1: the plain text ``"[INST] " + text + " [/INST]"``);
- system: v1-v3 join the system messages with a blank line and put them before the last user
  message's text (v1: the first's), so a system message costs its text plus ``"\\n\\n"``; v7:
  ``[SYSTEM_PROMPT]`` text ``[/SYSTEM_PROMPT]`` where it stands;
- assistant: its text (trailing spaces stripped) and ``</s>``; tool calls ``[TOOL_CALLS]`` and
  the JSON list of ``{"name", "arguments"[, "id"]}`` (v3+; ids from v3 on), then ``</s>``;
- tool result: v3 ``[TOOL_RESULTS]`` + JSON ``{"content", "call_id"}`` + ``[/TOOL_RESULTS]``;
  v7 ``[TOOL_RESULTS]`` id ``[TOOL_CONTENT]`` text ``[/TOOL_RESULTS]``;
- per call: ``<s>``, and the tool definitions once, before the last user message:
  ``[AVAILABLE_TOOLS]`` + JSON of ``[{"type": "function", "function": {name, description,
  parameters}}]`` + ``[/AVAILABLE_TOOLS]``. No reply priming: the reply follows ``[/INST]``.

Where this differs from mistral-common (tests/test_tokenizers_vendor.py measures it): the
system prompt is counted apart from the user text it is glued to (SentencePiece can merge a
token at that seam), and consecutive messages of one role, which mistral-common joins with a
blank line into one, are counted as separate messages. v1/v2 tool traffic (v2 drops calls and
results before the last user message) and the v7+ files' newer tool-call syntax are flagged.

**DeepSeek.** DeepSeek-V3's chat template (the ``chat_template`` of deepseek-ai/DeepSeek-V3's
tokenizer_config.json on Hugging Face): ``<｜begin▁of▁sentence｜>`` and the system messages
(joined by a blank line) without a tag, ``<｜User｜>`` text, ``<｜Assistant｜>`` text
``<｜end▁of▁sentence｜>``, tool calls as ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```<｜tool▁call▁end｜>`` (more calls after a ``\\n``) and
``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``, tool results ``<｜tool▁output▁begin｜>`` text
``<｜tool▁output▁end｜>`` inside ``<｜tool▁outputs▁begin｜>`` ... ``<｜tool▁outputs▁end｜>``, and
``<｜Assistant｜>`` to prompt the reply. Each special token is one token of the vocabulary. The
template does not render tool definitions: what the API does with them is not published, so a
call with tools is estimated. The template's ``ns.is_first`` and ``ns.is_output_first`` are never
reset, so it renders only a conversation's first tool turn with ``<｜Assistant｜><｜tool▁calls▁begin｜>``
and its first result with ``<｜tool▁outputs▁begin｜>``; ctxf frames every tool turn like the first
(the API's own encoding, V3.2's, is published separately and not modelled). No DeepSeek call in
the corpus records the provider's usage: Aider's "Tokens: N sent" for its
``openai/deepseek.deepseek-chat`` calls equals cl100k_base with OpenAI's framing to the rounding
(Aider's own count), ours is 0-3% above it, so it confirms nothing.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..records import KIND_CLEARED_TOOL_RESULT, KIND_REASONING, MARKER_KINDS, Message
from .framing import Plan, generic_parts

# tokenizer name -> mistral-common instruct version whose framing it counts with
MISTRAL_VERSION = {"mistral-v1": 1, "mistral-v2": 2, "mistral-v3": 3, "tekken-v3": 3, "mistral-v7": 7,
                   "tekken": 7}
MISTRAL_BOS = 1  # <s>, once per call
MISTRAL_INST = 2  # [INST] ... [/INST]
MISTRAL_SYSTEM_V7 = 2  # [SYSTEM_PROMPT] ... [/SYSTEM_PROMPT]
MISTRAL_EOS = 1  # </s> after an assistant message
MISTRAL_TOOL_CALLS = 1  # [TOOL_CALLS]
MISTRAL_TOOL_RESULTS_V3 = 2  # [TOOL_RESULTS] ... [/TOOL_RESULTS]
MISTRAL_TOOL_RESULTS_V7 = 3  # [TOOL_RESULTS] id [TOOL_CONTENT] ... [/TOOL_RESULTS]
MISTRAL_AVAILABLE_TOOLS = 2  # [AVAILABLE_TOOLS] ... [/AVAILABLE_TOOLS]
MISTRAL_JOIN = "\n\n"  # mistral-common's normalizer joins system prompts (and same-role runs) with it

DEEPSEEK_BOS = 1  # <｜begin▁of▁sentence｜>
DEEPSEEK_USER = 1  # <｜User｜>
DEEPSEEK_ASSISTANT = 2  # <｜Assistant｜> ... <｜end▁of▁sentence｜>
DEEPSEEK_TOOL_CALLS = 4  # <｜Assistant｜><｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜><｜end▁of▁sentence｜>
DEEPSEEK_PER_CALL = 3  # <｜tool▁call▁begin｜>function<｜tool▁sep｜> ... <｜tool▁call▁end｜>: 3 specials
DEEPSEEK_TOOL_OUTPUT = 2  # <｜tool▁output▁begin｜> ... <｜tool▁output▁end｜>
DEEPSEEK_REPLY_PRIMING = 1  # <｜Assistant｜>, or <｜tool▁outputs▁end｜> when the prompt ends in results


def _json_or_text(text: str) -> Any:
    """mistral-common's ``_parse_json_content``: JSON when the text parses, else the text."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text


def mistral_tool_call_json(m: Message, version: int) -> str:
    """The JSON mistral-common encodes after ``[TOOL_CALLS]`` (``json.dumps`` defaults)."""
    calls = []
    for c in m.tool_calls:
        d: dict[str, Any] = {"name": c.name, "arguments": _json_or_text(c.arguments)}
        if version >= 3 and c.id and c.id != "null":
            d["id"] = c.id
        calls.append(d)
    return json.dumps(calls, ensure_ascii=False)


def mistral_tools_json(functions: list[dict[str, Any]]) -> str:
    """The tool definitions as mistral-common encodes them after ``[AVAILABLE_TOOLS]``."""
    tools = [{"type": "function", "function": {"name": f["name"], "description": f.get("description") or "",
                                               "parameters": f.get("parameters") or {}}} for f in functions]
    return json.dumps(tools, ensure_ascii=False)


def plan_mistral(m: Message, version: int) -> Plan:
    p = Plan()
    if m.kind in MARKER_KINDS:
        return p
    if m.kind == KIND_REASONING:
        p.texts.append(m.text)
        p.flags.append("reasoning item: counted as text (mistral-common's think chunks not modelled)")
        return p
    role = m.role
    if role in ("system", "developer"):
        if version >= 7:
            p.texts.append(m.text)
            p.const += MISTRAL_SYSTEM_V7
        else:
            p.texts.append(m.text + MISTRAL_JOIN)
            if version == 1:  # inside the first user message's plain "[INST] ..." text: the seams differ
                p.flags.append("v1 system prompt: merged into the first user message's [INST] text (±2 tokens)")
    elif role == "tool" or m.kind == KIND_CLEARED_TOOL_RESULT:
        if version >= 7:
            p.texts += [m.tool_call_id or "", m.text]
            p.const += MISTRAL_TOOL_RESULTS_V7
            if not m.tool_call_id:
                p.flags.append("tool result without a call id: framing estimated")
        else:
            body: dict[str, Any] = {"content": _json_or_text(m.text), "call_id": m.tool_call_id}
            if version < 3:
                body = {"name": m.name, "content": _json_or_text(m.text)}
                p.flags.append("v2 tool result: mistral-common drops those before the last user message")
            p.texts.append(json.dumps(body if version >= 3 else [body], ensure_ascii=False))
            p.const += MISTRAL_TOOL_RESULTS_V3
    elif role == "assistant":
        if m.text:
            p.texts.append(m.text.rstrip(" ") if version >= 2 else m.text)
        if m.tool_calls:
            p.texts.append(mistral_tool_call_json(m, version))
            p.const += MISTRAL_TOOL_CALLS
            if version < 3:
                p.flags.append(f"v{version} tool call: mistral-common drops those before the last user message")
            elif m.text and version < 7:
                p.flags.append("assistant text beside tool calls: mistral-common v3 encodes no such message")
        p.const += MISTRAL_EOS
    else:  # user
        if version == 1:
            p.texts.append(f"[INST] {m.text} [/INST]")
        else:
            p.texts.append(m.text)
            p.const += MISTRAL_INST
    generic_parts(m, p)
    return p


def plan_deepseek(m: Message) -> Plan:
    p = Plan()
    if m.kind in MARKER_KINDS:
        return p
    if m.kind == KIND_REASONING:
        # DeepSeek's API does not put earlier turns' reasoning_content back into the context
        # (api-docs.deepseek.com/guides/reasoning_model), nor does the template.
        return p
    role = m.role
    if role in ("system", "developer"):
        p.texts.append(m.text)  # after <｜begin▁of▁sentence｜>, untagged; several join with "\n\n"
    elif role == "tool" or m.kind == KIND_CLEARED_TOOL_RESULT:
        # <｜tool▁output▁begin｜> text <｜tool▁output▁end｜>, and either the run's opening
        # <｜tool▁outputs▁begin｜> or the "\n" between two results: one token each way
        p.texts.append(m.text)
        p.const += DEEPSEEK_TOOL_OUTPUT + 1
    elif role == "assistant":
        text = m.text.split("</think>")[-1] if "</think>" in m.text else m.text  # R1 drops thinking
        if m.tool_calls:
            if text:
                p.texts.append(text)
            for k, c in enumerate(m.tool_calls):
                if k:
                    p.texts.append("\n")
                p.texts += ["function", f"{c.name}\n```json\n{c.arguments}\n```"]
                p.const += DEEPSEEK_PER_CALL
            p.const += DEEPSEEK_TOOL_CALLS
        else:
            p.texts.append(text)
            p.const += DEEPSEEK_ASSISTANT
    else:  # user
        p.texts.append(m.text)
        p.const += DEEPSEEK_USER
    generic_parts(m, p)
    return p


def flag_mistral_runs(messages: Sequence[Message], plans: list[Plan]) -> None:
    """Flag a user or assistant message that follows one of its own role: mistral-common's
    normalizer joins such a run into one message (its texts with a blank line), which costs a
    few tokens less or more than the separate messages counted here (tests measure it)."""
    prev = None
    for m, p in zip(messages, plans):
        if m.kind in MARKER_KINDS:
            continue
        role = "tool" if m.kind == KIND_CLEARED_TOOL_RESULT else m.role
        if role == prev and role in ("user", "assistant"):
            p.flags.append(f"consecutive {role} messages: mistral-common joins them into one (±2 tokens)")
        prev = role
