"""Pi entries as Messages: what ``buildSessionContext`` and ``convertToLlm`` hand the model.

- ``message`` entries: ``user`` and ``toolResult`` as they are; ``assistant`` with its text,
  ``thinking`` blocks (parts), ``toolCall`` blocks (tool calls), its ``model`` and recorded
  ``usage`` (input / output / cacheRead / cacheWrite; the call read input + cacheRead + cacheWrite,
  except where pi-ai's ``input`` holds the cached part: ``INPUT_HOLDS_CACHE``) and ``cost``;
  ``bashExecution`` (a ``!`` command) as the user text Pi sends (``Ran `cmd` ...``), left out when
  ``excludeFromContext`` (``!!``); ``custom`` (v3; ``hookMessage`` in v2) as a user message.
- ``custom_message`` and ``branch_summary`` entries as the user messages Pi makes of them.
- ``compaction``: a ``history_edit`` marker (type compaction, summarized, the messages before the
  first kept entry, the recorded ``tokensBefore``) followed by the summary as Pi wraps it
  (kind ``compaction_summary``).
- ``model_change`` / ``thinking_level_change`` set what the next calls run with (the thinking
  level is kept in each assistant message's meta); ``label``, ``session_info`` (the name is the
  title) and ``custom`` (extension state, never in the context) make no message.

Assistant messages Pi recorded as ``error`` or ``aborted`` are kept (the call was made), with
``meta["stop_reason"]``; pi-ai leaves them out of later requests.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

from ...records import KIND_COMPACTION_SUMMARY, Message, ToolCall, Usage, history_edit
from .._images import image_part
from .._text import title_line
from ..base import RECORD_ERRORS, ImportContext, as_dict, as_int, as_list, as_str, epoch_iso, json_text, str_or_none
from .entries import Branch, Entry

# packages/coding-agent/src/core/messages.ts (convertToLlm): the text the model reads for these.
COMPACTION_PREFIX = ("The conversation history before this point was compacted into the following summary:\n\n"
                     "<summary>\n")
COMPACTION_SUFFIX = "\n</summary>"
BRANCH_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUFFIX = "</summary>"
WRAPPER_NOTE = ("pi messages.ts COMPACTION_SUMMARY_PREFIX/SUFFIX (current source; older pi versions may word it "
                "otherwise)")

NO_MESSAGE = frozenset({"label", "session_info", "custom", "model_change", "thinking_level_change"})


@dataclass(slots=True)
class State:
    """What the entries read so far set: the model, thinking level, and where entries landed."""

    provider: str | None = None
    model: str | None = None
    thinking: str | None = None
    count: int = 0  # messages emitted so far (the next one's position)
    first_at: dict[str, int] = field(default_factory=dict)  # entry id -> position of its first message
    models: Counter = field(default_factory=Counter)
    model_changes: list[dict[str, Any]] = field(default_factory=list)
    thinking_changes: int = 0
    compactions: int = 0
    calls: int = 0  # assistant messages with recorded usage
    name: str | None = None
    title: str | None = None


def _content(content: Any) -> tuple[str, tuple[dict[str, Any], ...]]:
    """Text and parts of a user / tool result content (a string or text and image blocks)."""
    if isinstance(content, str):
        return content, ()
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for b in as_list(content):
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            texts.append(str_or_none(b.get("text")) or "")
        elif t == "image":
            parts.append(image_part(base64_data=str_or_none(b.get("data")) or "", media_type=as_str(b.get("mimeType"))))
        else:
            parts.append({"type": t if isinstance(t, str) else "unknown"})
    return "\n".join(texts), tuple(parts)


# Where pi-ai's ``usage.input`` already holds ``cacheRead`` (so the call read input + cacheWrite),
# by the message's ``api``: the Google providers pass ``promptTokenCount``, which includes
# ``cachedContentTokenCount`` (packages/ai/src/providers/google.ts and google-vertex.ts, pi-mono
# 2026-03-15: "input: chunk.usageMetadata.promptTokenCount"); google-gemini-cli.ts did until
# commit 2a0283ec (2025-12-20, "promptTokenCount includes cachedContentTokenCount, so subtract"),
# openai-completions.ts and openai-responses.ts until 989af797 (2025-12-03, pi 0.12.7: "Previously
# input included cached tokens, causing double-counting"). Value: the time (ms) the fix was
# committed, None for "still so". A message from after a fix but written by an older pi cannot
# be told apart; cacheRead above input can only be the newer reading and is read so.
INPUT_HOLDS_CACHE: dict[str, int | None] = {
    "google-generative-ai": None,
    "google-vertex": None,
    "google-gemini-cli": 1766262858000,  # 2025-12-20T20:34:18Z
    "openai-completions": 1764778282000,  # 2025-12-03T16:11:22Z
    "openai-responses": 1764778282000,
}


def _input_holds_cache(api: str | None, written_ms: int | None) -> bool:
    if api not in INPUT_HOLDS_CACHE:
        return False
    fixed = INPUT_HOLDS_CACHE[api]
    return fixed is None or (written_ms is not None and written_ms < fixed)


def usage_of(u: Any, api: str | None = None, written_ms: int | None = None) -> tuple[Usage | None, dict[str, Any]]:
    """Pi's recorded usage as a Usage (None when nothing or only zeros were recorded: an aborted
    call reports no usage), and its cost. ``api`` and ``written_ms`` (the message's ``api`` and
    ``timestamp``) say whether ``input`` holds the cache reads (``INPUT_HOLDS_CACHE``)."""
    u = as_dict(u)
    inp, out = as_int(u.get("input")), as_int(u.get("output"))
    cr, cw = as_int(u.get("cacheRead")), as_int(u.get("cacheWrite"))
    cost = as_dict(u.get("cost"))
    extra: dict[str, Any] = {"cost": cost} if cost else {}
    if not any((inp, out, cr, cw)):
        return None, extra
    if inp is None and cr is None and cw is None:
        prompt = None
    elif _input_holds_cache(api, written_ms) and (cr or 0) <= (inp or 0):
        prompt = (inp or 0) + (cw or 0)
    else:
        prompt = (inp or 0) + (cr or 0) + (cw or 0)
    total = as_int(u.get("totalTokens"))
    if total is not None:
        extra["total_tokens"] = total
    return Usage(prompt_tokens=prompt, completion_tokens=out, cache_read_tokens=cr, cache_creation_tokens=cw), extra


def _assistant(m: dict[str, Any], ts: str | None, st: State, base: dict[str, Any]) -> Message:
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    for b in as_list(m.get("content")):
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            texts.append(str_or_none(b.get("text")) or "")
        elif t == "thinking":
            part: dict[str, Any] = {"type": "thinking", "text": str_or_none(b.get("thinking")) or ""}
            sig = b.get("thinkingSignature")
            if isinstance(sig, str) and sig:
                part["signature_bytes"] = len(sig)
            parts.append(part)
        elif t == "toolCall":
            calls.append(ToolCall(name=str_or_none(b.get("name")) or "", arguments=json_text(b.get("arguments")),
                                  id=as_str(b.get("id"))))
        elif t == "image":
            parts.append(image_part(base64_data=str_or_none(b.get("data")) or "", media_type=as_str(b.get("mimeType"))))
        else:
            parts.append({"type": t if isinstance(t, str) else "unknown"})
    model = as_str(m.get("model")) or st.model
    provider = as_str(m.get("provider")) or st.provider
    usage, extra = usage_of(m.get("usage"), as_str(m.get("api")), as_int(m.get("timestamp")))
    meta = {**base, **extra}
    for key, name in (("stopReason", "stop_reason"), ("errorMessage", "error_message"), ("api", "api")):
        v = as_str(m.get(key))
        if v:
            meta[name] = v
    if provider:
        meta["provider"] = provider
    if st.thinking:
        meta["thinking_level"] = st.thinking
    if model:
        st.models[model] += 1
        st.model, st.provider = model, provider
    if usage is not None:
        st.calls += 1
    return Message(role="assistant", text="\n".join(texts), tool_calls=tuple(calls), parts=tuple(parts),
                   usage=usage, timestamp=ts, model=model, meta=meta)


def _message(e: Entry, ts: str | None, st: State, ctx: ImportContext) -> Message | None:
    m = e.rec.get("message")
    if not isinstance(m, dict):
        ctx.warn("message entry without a message object; skipped", line=e.line)
        ctx.skip("malformed entry")
        return None
    role = m.get("role")
    if ts is None and isinstance(m.get("timestamp"), (int, float)) and not isinstance(m["timestamp"], bool):
        ts = epoch_iso(m["timestamp"] / 1000)  # the message's own clock (Unix ms) when the entry has none
    base: dict[str, Any] = {"entry": e.id} if e.rec.get("id") is not None else {"line": e.line}
    if role == "assistant":
        return _assistant(m, ts, st, base)
    if role == "user":
        text, parts = _content(m.get("content"))
        if st.title is None and text.strip():
            st.title = title_line(text)
        return Message(role="user", text=text, parts=parts, timestamp=ts, meta=base)
    if role == "toolResult":
        text, parts = _content(m.get("content"))
        if m.get("isError") is True:
            base["is_error"] = True
        return Message(role="tool", text=text, parts=parts, tool_call_id=as_str(m.get("toolCallId")),
                       name=as_str(m.get("toolName")), timestamp=ts, meta=base)
    if role == "bashExecution":
        if m.get("excludeFromContext") is True:
            ctx.skip("bashExecution excluded from the context (!!)")
            return None
        return Message(role="user", text=bash_text(m), timestamp=ts, meta={**base, "source": "bashExecution"})
    if role in ("custom", "hookMessage"):
        text, parts = _content(m.get("content"))
        return Message(role="user", text=text, parts=parts, timestamp=ts,
                       meta={**base, "source": role, "custom_type": as_str(m.get("customType"))})
    if role == "branchSummary":
        return Message(role="user", text=BRANCH_PREFIX + (str_or_none(m.get("summary")) or "") + BRANCH_SUFFIX,
                       timestamp=ts, meta={**base, "source": "branchSummary"})
    if role == "compactionSummary":
        return Message(role="user", kind=KIND_COMPACTION_SUMMARY, timestamp=ts,
                       text=COMPACTION_PREFIX + (str_or_none(m.get("summary")) or "") + COMPACTION_SUFFIX,
                       meta={**base, "source": "compactionSummary"})
    ctx.skip(f"message role {role!r}", unknown=True)
    return None


def bash_text(m: dict[str, Any]) -> str:
    """messages.ts ``bashExecutionToText``: what the model reads of a ``!`` command."""
    text = f"Ran `{str_or_none(m.get('command')) or ''}`\n"
    output = str_or_none(m.get("output"))
    text += f"```\n{output}\n```" if output else "(no output)"
    code = as_int(m.get("exitCode"))
    if m.get("cancelled") is True:
        text += "\n\n(command cancelled)"
    elif code not in (None, 0):
        text += f"\n\nCommand exited with code {code}"
    if m.get("truncated") is True and as_str(m.get("fullOutputPath")):
        text += f"\n\n[Output truncated. Full output: {m['fullOutputPath']}]"
    return text


def _compaction(e: Entry, ts: str | None, br: Branch, st: State, ctx: ImportContext) -> list[Message]:
    rec = e.rec
    kept_id = as_str(rec.get("firstKeptEntryId"))
    kept_index = as_int(rec.get("firstKeptEntryIndex"))
    source = "pi:compaction.firstKeptEntryId"
    if kept_id is None and kept_index is not None:
        kept_id, source = str(kept_index), "pi:compaction.firstKeptEntryIndex"
    end = _first_position(kept_id, br, e, st)
    if end is None:
        ctx.warn(f"compaction: its first kept entry ({kept_id}) is not on the branch before it; every "
                 "earlier message counts as summarized (as Pi builds the context)", line=e.line)
        end = st.count
    tokens_before = as_int(rec.get("tokensBefore"))
    figures: dict[str, Any] = {}
    if tokens_before is not None:
        figures["tokens_before"] = tokens_before
    st.compactions += 1
    what = f"messages 0-{end - 1}" if end > 0 else "no messages"
    marker = history_edit("compaction", "summarized", [(0, end)] if end > 0 else [], source,
                          f"Pi compacted the history: {what} summarized"
                          + (f" ({tokens_before:,} tokens before)" if tokens_before is not None else ""),
                          **figures)
    marker.meta.update({"entry": e.id, "timestamp": ts} if ts else {"entry": e.id})
    meta: dict[str, Any] = {"entry": e.id, "source": "compaction", "wrapper": WRAPPER_NOTE}
    if tokens_before is not None:
        meta["tokens_before"] = tokens_before
    if rec.get("fromHook") is True:
        meta["from_hook"] = True
    summary = Message(role="user", kind=KIND_COMPACTION_SUMMARY, timestamp=ts, meta=meta,
                      text=COMPACTION_PREFIX + (str_or_none(rec.get("summary")) or "") + COMPACTION_SUFFIX)
    return [marker, summary]


def _first_position(kept_id: str | None, br: Branch, comp: Entry, st: State) -> int | None:
    """The position of the first message at or after the kept entry, on the branch before the
    compaction; None when the kept entry is not there."""
    if kept_id is None:
        return None
    found = False
    for e in br.entries:
        if e is comp:
            return st.count if found else None
        if e.id == kept_id:
            found = True
        if found and e.id in st.first_at:
            return st.first_at[e.id]
    return None


def messages(br: Branch, st: State, ctx: ImportContext) -> Iterator[Message]:
    """The branch's messages, in order (``st`` collects what the session's metadata reports)."""
    st.provider = as_str(br.header.get("provider"))
    st.model = as_str(br.header.get("modelId"))
    st.thinking = as_str(br.header.get("thinkingLevel"))
    for e in br.entries:
        try:
            out = _entry(e, br, st, ctx)
        except RECORD_ERRORS as err:  # one entry of unexpected shape: skipped, the rest kept
            ctx.bad_record(err, what="entry", line=e.line)
            continue
        if out:
            st.first_at[e.id] = st.count
            st.count += len(out)
            yield from out


def _entry(e: Entry, br: Branch, st: State, ctx: ImportContext) -> list[Message]:
    rec = e.rec
    t = rec.get("type")
    ts = str_or_none(rec.get("timestamp"))
    if t == "message":
        m = _message(e, ts, st, ctx)
        return [m] if m is not None else []
    if t == "compaction":
        return _compaction(e, ts, br, st, ctx)
    if t == "custom_message":
        text, parts = _content(rec.get("content"))
        return [Message(role="user", text=text, parts=parts, timestamp=ts,
                        meta={"entry": e.id, "source": "custom_message", "custom_type": as_str(rec.get("customType"))})]
    if t == "branch_summary":
        summary = str_or_none(rec.get("summary"))
        if not summary:
            return []
        return [Message(role="user", text=BRANCH_PREFIX + summary + BRANCH_SUFFIX, timestamp=ts,
                        meta={"entry": e.id, "source": "branch_summary", "from_id": as_str(rec.get("fromId"))})]
    if t == "model_change":
        st.provider = as_str(rec.get("provider")) or st.provider
        st.model = as_str(rec.get("modelId")) or st.model
        st.model_changes.append({"entry": e.id, "provider": st.provider, "model": st.model, "timestamp": ts})
    elif t == "thinking_level_change":
        st.thinking = as_str(rec.get("thinkingLevel")) or st.thinking
        st.thinking_changes += 1
    elif t == "session_info":
        name = as_str(rec.get("name"))
        if name:
            st.name = name.strip()
    if t not in NO_MESSAGE:
        ctx.skip(f"entry type {t!r}" if isinstance(t, str) else "entry without a type", unknown=True)
    else:
        ctx.skip(str(t))
    return []
