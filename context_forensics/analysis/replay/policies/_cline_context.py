"""Cline's context optimisation before a truncation, rebuilt from its source.

cline/cline src/core/context/context-management/ContextManager.ts at c093ca1760 (2026-01-22, the
code of Cline 3.57.x, the release of the corpus' task of 2026-02-08; the logic dates from
c2e91aa9c9, 2025-12-01). When the previous request's tokensIn + tokensOut + cacheWrites +
cacheReads reaches ``maxAllowedSize``, ``getNewContextMessagesAndMetadata`` first calls
``attemptFileReadOptimizationCore``:

- ``getPossibleDuplicateFileReads`` looks at the user messages from the first one after the
  deleted range (index 2 when none) on, skipping any already rewritten (a file mention partly
  rewritten aside). Only a message's FIRST block is parsed: ``^[tool for 'path'] Result:``; a
  ``read_file`` result becomes the header + "\\n" + the notice, a ``replace_in_file`` /
  ``write_to_file`` result has its first ``<final_file_content>`` body replaced by " notice ";
  otherwise ``<file_content path=…>`` mentions in blocks 0–2. The key is the path as the header
  (or mention) spells it, so a relative read and an absolute edit of one file are two keys.
- ``applyFileReadContextHistoryUpdates``: every key seen more than once has all but its last
  occurrence rewritten; the rewrites persist (context_history.json) whether or not a truncation
  follows.
- ``calculateContextOptimizationMetrics``: characters saved / characters counted, over messages
  [0, 2) and from the deleted range's end + 1 to the end (the deleted messages do not count).
  Counted: every text block (a tool_result's first inner text block), at its latest rewrite when
  one exists, at its length before this round's rewrite when rewritten now, and base64 image data
  by its length; tool_use and thinking blocks count nothing. The truncation notice Cline put
  into message 1 at the first truncation counts at the notice's length.
- ``needToTruncate = percentSaved < 0.3`` (or no rewrite at all); truncation then keeps the
  first pair and drops half the rest (``getNextTruncationRange``), a quarter kept when the usage
  is over twice the limit.

Messages are Anthropic MessageParam-shaped dicts (``{"role", "content": [blocks]}``), the
shape of Cline's api_conversation_history.json. ``api_history_from_ui`` rebuilds it from a task
whose folder holds only ui_messages.json: a request's user content from its ``request`` text
(blocks joined by "\\n\\n", images shown as "[Image]", their data on the ui entries before the
request), an assistant message from its text entries (with native tool calls, Cline's default
for Claude 4+, the tool calls are tool_use blocks, which count nothing).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

SAVED_FRACTION = 0.3  # attemptFileReadOptimizationCore: needToTruncate = percentSaved < 0.3
# src/core/prompts/responses.ts (c093ca1760)
DUPLICATE_FILE_READ_NOTICE = ("[[NOTE] This file read has been removed to save space in the context window. "
                              "Refer to the latest file read for the most up to date version of this file.]")
TRUNCATION_NOTICE = ("[NOTE] Some previous conversation history with the user has been removed to maintain optimal "
                     "context window length. The initial user task has been retained for continuity, while "
                     "intermediate conversation history has been removed. Keep this in mind as you continue "
                     "assisting the user. Pay special attention to the user's latest messages.")
_HEADER = re.compile(r"^\[([^\s]+) for '([^']+)'\] Result:")
_FINAL = re.compile(r'(<final_file_content path="[^"]*">)[\s\S]*?(</final_file_content>)')
_MENTION = re.compile(r'<file_content path="([^"]*)">([\s\S]*?)</file_content>')
# where Cline's formatContentBlockToMarkdown join ("\n\n") starts a new block of a user request
_BLOCK = re.compile(r"\n\n(?=\[[^\s\]]+(?: for '[^']*')?\] Result:|<environment_details>|<feedback>|"
                    r"\[TASK RESUMPTION\]|\[Image\]$|\[Image\]\n\n)")


def _block_text(block: dict[str, Any]) -> str | None:
    """ContextManager.getTextFromBlock: a text block, or a tool_result's first inner text block."""
    if block.get("type") == "text":
        return block.get("text") or ""
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list) and block["content"]:
        inner = block["content"][0]
        if isinstance(inner, dict) and inner.get("type") == "text":
            return inner.get("text") or ""
    return None


@dataclass
class Decision:
    request: int  # 1-based request whose previous usage reached the limit
    usage: int  # the previous request's tokensIn + tokensOut + cacheWrites + cacheReads
    start: int  # first message after the deleted range
    rewritten: int  # messages rewritten this round
    saved: int  # characters saved
    counted: int  # characters counted
    truncate: bool
    deleted_range: tuple[int, int] | None  # the new range when it truncates

    @property
    def fraction(self) -> float | None:
        return None if not self.rewritten else (self.saved / self.counted if self.counted else 0.0)


class ClineContext:
    """Cline's ContextManager state over one task: its rewrites and its deleted range."""

    def __init__(self, messages: list[dict[str, Any]]):
        self.messages = messages
        self.updates: dict[int, dict[int, list[str]]] = {}  # message -> block -> rewrites, oldest first
        self.deleted: tuple[int, int] | None = None
        self.last_rewritten: set[int] = set()  # the messages the last ``before_request`` rewrote

    def _reads(self, end: int, start: int) -> dict[str, list[tuple[int, str, str, int]]]:
        found: dict[str, list[tuple[int, str, str, int]]] = {}
        for i in range(start, end):
            if i in self.updates:
                continue
            msg = self.messages[i]
            blocks = msg.get("content")
            if msg.get("role") != "user" or not isinstance(blocks, list) or not blocks:
                continue
            first = _block_text(blocks[0])
            if first is None:
                continue
            hit = _HEADER.match(first)
            done = False
            if hit:
                tool, path = hit.group(1), hit.group(2)
                at = 0 if len(first) > hit.end() else 1
                if tool == "read_file":
                    rep = DUPLICATE_FILE_READ_NOTICE if at == 1 else hit.group(0) + "\n" + DUPLICATE_FILE_READ_NOTICE
                    found.setdefault(path, []).append((i, "", rep, at))
                    done = True
                elif tool in ("replace_in_file", "write_to_file"):
                    text = first if at == 0 else (_block_text(blocks[1]) if len(blocks) > 1 else None)
                    if text:
                        if _FINAL.search(text):
                            rep = _FINAL.sub(lambda m: f"{m.group(1)} {DUPLICATE_FILE_READ_NOTICE} {m.group(2)}",
                                             text, count=1)
                            found.setdefault(path, []).append((i, "", rep, at))
                        done = True
            if not done:
                for at in range(min(3, len(blocks))):
                    text = _block_text(blocks[at])
                    hits = list(_MENTION.finditer(text)) if text else []
                    for m in hits:
                        found.setdefault(m.group(1), []).append(
                            (i, m.group(0),
                             f'<file_content path="{m.group(1)}">{DUPLICATE_FILE_READ_NOTICE}</file_content>', at))
                    if hits:
                        break
        return found

    def _apply(self, found: dict[str, list[tuple[int, str, str, int]]]) -> set[int]:
        changed: set[int] = set()
        mentions: dict[int, tuple[str, int]] = {}
        for occurrences in found.values():
            for i, search, rep, at in occurrences[:-1]:
                changed.add(i)
                if search:
                    base = mentions.get(i, (_block_text(self.messages[i]["content"][at]) or "", at))[0]
                    mentions[i] = (base.replace(search, rep, 1), at)
                else:
                    self.updates.setdefault(i, {}).setdefault(at, []).append(rep)
        for i, (text, at) in mentions.items():
            self.updates.setdefault(i, {}).setdefault(at, []).append(text)
        return changed

    def _count(self, lo: int, hi: int, new: set[int]) -> tuple[int, int]:
        counted = saved = 0
        for i in range(lo, hi):
            blocks = self.messages[i].get("content")
            if isinstance(blocks, str):
                blocks = [{"type": "text", "text": blocks}]
            if not isinstance(blocks, list):
                continue
            for b, block in enumerate(blocks):
                text = _block_text(block)
                if text is not None:
                    ups = self.updates.get(i, {}).get(b)
                    if ups and i in new:
                        before = len(ups[-2]) if len(ups) > 1 else len(text)
                        saved += before - len(ups[-1])
                        counted += before
                    elif ups:
                        counted += len(ups[-1])
                    else:
                        counted += len(text)
                elif block.get("type") == "image" and isinstance(block.get("source"), dict):
                    src = block["source"]
                    if src.get("type") == "base64" and src.get("data"):
                        counted += len(src["data"])
        return counted, saved

    def saved_by_message(self, new: set[int]) -> dict[int, int]:
        """Characters each message rewritten in the last round lost (``_count``'s saving, by message)."""
        out: dict[int, int] = {}
        for i in new:
            blocks = self.messages[i].get("content")
            if isinstance(blocks, str):
                blocks = [{"type": "text", "text": blocks}]
            for b, ups in self.updates.get(i, {}).items():
                if not isinstance(blocks, list) or b >= len(blocks):
                    continue
                text = _block_text(blocks[b]) or ""
                before = len(ups[-2]) if len(ups) > 1 else len(text)
                out[i] = out.get(i, 0) + max(0, before - len(ups[-1]))
        return out

    def before_request(self, request: int, usage: int, max_allowed: int) -> Decision | None:
        """What Cline does before request ``request`` (1-based; its user message is message
        2·request − 2) given the previous request's usage; None when under the limit."""
        if usage < max_allowed:
            return None
        end = 2 * request - 1
        start = self.deleted[1] + 1 if self.deleted else 2
        new = self._apply(self._reads(end, start))
        self.last_rewritten = new
        counted = saved = 0
        if new:
            c1, s1 = self._count(0, 2, new)
            c2, s2 = self._count(start, end, new)
            counted, saved = c1 + c2, s1 + s2
        truncate = not new or (saved / counted if counted else 0.0) < SAVED_FRACTION
        rng = None
        if truncate:
            rest = end - start
            drop = rest * 3 // 4 // 2 * 2 if usage / 2 > max_allowed else rest // 4 * 2
            last = start + drop - 1
            if last < end and self.messages[last].get("role") != "assistant":
                last -= 1
            self.updates.setdefault(1, {}).setdefault(0,
                                                      [TRUNCATION_NOTICE])  # applyStandardContextTruncationNoticeChange
            rng = (2, last)
            self.deleted = rng
        return Decision(request, usage, start, len(new), saved, counted, truncate, rng)


def api_history_from_ui(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """A task's API history rebuilt from its ui_messages.json, and each request's recorded usage
    (tokensIn + tokensOut + cacheWrites + cacheReads). Native tool calls assumed (the assistant's
    text entries only): Cline's default for Claude 4+ models (state-keys.ts nativeToolCallEnabled)."""
    messages: list[dict[str, Any]] = []
    usage: list[int] = []
    prose: list[str] = []
    images: list[str] = []

    def close_assistant() -> None:
        if messages:
            text = "\n\n".join(prose)
            messages.append({"role": "assistant", "content": [{"type": "text", "text": text}] if text else []})

    for item in items:
        say = item.get("say")
        if say == "api_req_started":
            close_assistant()
            prose = []
            try:
                info = json.loads(item.get("text") or "{}")
            except ValueError:
                info = {}
            request = info.get("request") or ""
            blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in _BLOCK.split(request)
                                            if t != "[Image]"]
            blocks += [{"type": "image", "source": {"type": "base64", "data": d.split(",", 1)[-1]}} for d in images]
            images = []
            messages.append({"role": "user", "content": blocks})
            usage.append(sum(int(info.get(k) or 0) for k in ("tokensIn", "tokensOut", "cacheWrites", "cacheReads")))
            continue
        for data in item.get("images") or []:
            images.append(data)
        if say == "text" and item.get("type") == "say" and item.get("text"):
            prose.append(item["text"])
    close_assistant()
    return messages, usage


def api_history_from_store(messages: list[Any]) -> list[dict[str, Any]]:
    """A task's API history rebuilt from its stored messages (each carries the API-history index
    it came from, ``meta["history_index"]``), for a task whose folder is gone: text blocks only
    (a tool result as a tool_result block), so a pasted image's data counts nothing."""
    by_index: dict[int, dict[str, Any]] = {}
    for m in messages:
        hidx = m.meta.get("history_index") if isinstance(m.meta, dict) else None
        if type(hidx) is not int or m.kind != "message":
            continue
        msg = by_index.setdefault(hidx, {"role": "assistant" if m.role == "assistant" else "user", "content": []})
        if m.role == "tool":
            msg["content"].append({"type": "tool_result", "content": [{"type": "text", "text": m.text or ""}]})
        else:
            msg["content"].append({"type": "text", "text": m.text or ""})
    n = max(by_index, default=-1) + 1
    return [by_index.get(i, {"role": "user" if i % 2 == 0 else "assistant", "content": []}) for i in range(n)]


def load_task(folder: str | None) -> tuple[list[dict[str, Any]], list[int]] | None:
    """A Cline task folder's API history (api_conversation_history.json when it holds one, else
    rebuilt from ui_messages.json) and its requests' usage; None when the folder is not there.

    The store keeps neither a message's content blocks nor a pasted image's size, and both decide
    Cline's 30% rule, so the replay reads the folder the session was ingested from."""
    from pathlib import Path

    if not folder:
        return None
    base = Path(folder)
    ui = base / "ui_messages.json" if base.is_dir() else None
    if ui is None or not ui.is_file():
        return None
    try:
        items = json.loads(ui.read_text(encoding="utf-8"))
        rebuilt, usage = api_history_from_ui(items if isinstance(items, list) else [])
        api = base / "api_conversation_history.json"
        if api.is_file():
            history = json.loads(api.read_text(encoding="utf-8"))
            if isinstance(history, list) and all(isinstance(m, dict) for m in history):
                return history, usage
        return rebuilt, usage
    except (OSError, ValueError):
        return None


def skipped_requests(messages: list[dict[str, Any]], usage: list[int], max_allowed: int) -> dict[int, Decision]:
    """The requests (1-based) where the previous usage reached ``max_allowed`` but the file-read
    rewrites saved ≥ 30%, so Cline sent them untruncated; each with its decision."""
    cc = ClineContext(messages)
    out: dict[int, Decision] = {}
    for req in range(2, len(usage) + 1):
        if 2 * req - 1 > len(messages):
            break
        d = cc.before_request(req, usage[req - 2], max_allowed)
        if d is not None and not d.truncate:
            out[req] = d
    return out
