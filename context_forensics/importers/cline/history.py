"""A task folder's ``api_conversation_history.json`` as the session's messages: the history the
model was sent, with each call's recorded usage and the recorded edits of that history.

Each item is an Anthropic MessageParam (converted as ``anthropic_messages`` does: a user turn
with tool results becomes tool messages plus the rest; a result Cline wrote as a text block,
``[read_file for 'a.ts'] Result:``, is a tool message too, answering the previous reply's
tool_use block of its tool: ``results``) with the extension's extras: Cline's
``modelInfo`` and ``metrics.tokens`` ({prompt, completion, cached}, cached = cache reads +
writes) on answers; Roo's ``ts``, ``isSummary`` / ``condenseId`` on a condense summary,
``condenseParent`` on the messages it replaced, ``isTruncationMarker`` / ``truncationId`` on a
sliding-window notice and ``truncationParent`` on the messages it hid (Roo keeps them all in
the file and leaves the tagged ones out of each request: ``getEffectiveApiHistory``).

Usage: the ui log's ``api_req_started`` of the call (``ui.ui_usage``), else ``metrics.tokens``.
Edits (``records.history_edit`` markers, placed before the first call that was sent the edited
history): Cline's deleted range (evicted; the call it was made for, ``ui.read_ui``); a Roo
condense (summarized, the summary follows the marker as a compaction summary) and a Roo
truncation (evicted, the notice the model read follows the marker). Roo stores the summary or
notice before the tail it kept (3 messages for a condense, about as many as it hid for a
truncation), so the call that first saw it is found by the ui entry's time when the folder has
one, else past that tail (``meta["placed"] = "after the kept tail"``).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ...records import KIND_COMPACTION_SUMMARY, Message, Usage, history_edit, position_runs
from ..anthropic_messages import convert_message
from ..base import RECORD_ERRORS, ImportContext, as_dict, as_int, as_str, epoch_iso
from .results import WRITTEN_AS, result_messages, split_turn
from .ui import Call, RooEvent, UiLog, Unnamed, input_holds_cache, prompt_with_cache

ROO_KEEP = 3  # N_MESSAGES_TO_KEEP of Roo's summarizeConversation
_HIDDEN = re.compile(r"\[Sliding window truncation: (\d+) messages hidden")


@dataclass
class Edit:
    target: int  # API-history index of the first call that was sent the edited history
    type: str
    action: str
    items: list[int]  # API-history indices that left
    source: str
    text: str
    figures: dict[str, Any] = field(default_factory=dict)
    moved: int | None = None  # a Roo summary / notice emitted after the marker, not where it is stored


def _ms_iso(ts: Any) -> str | None:
    ms = as_int(ts)
    return epoch_iso(ms / 1000) if ms is not None else None


def history_messages(items: list[Any], ui: UiLog | None, ctx: ImportContext) -> tuple[list[Message], dict[str, Any]]:
    """The session's messages from the API history ``items`` and the ui log; and counts."""
    names: dict[str, str] = {}
    converted: list[list[Message]] = []
    roles: list[str | None] = []
    calls: list[tuple[str | None, str]] = []  # the latest reply's tool_use blocks (id, name), for its results
    for i, item in enumerate(items):
        msgs: list[Message] = []
        role = None
        try:
            msgs = _convert(item, ctx, names, i, calls)
            role = item.get("role") if isinstance(item, dict) else None
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="message", index=i)
            msgs = []
        converted.append(msgs)
        roles.append(role)
        if role == "assistant":
            calls = [(c.id, c.name) for m in msgs for c in m.tool_calls]
        elif role == "user":
            calls = []
    stats = {"calls": 0, "ui_usage": 0, "metrics_usage": 0, "edits": 0,
             "results_as_text": sum(m.meta.get("written_as") == WRITTEN_AS for ms in converted for m in ms)}
    _attach_usage(items, converted, roles, ui, stats, ctx)
    edits = _cline_edits(ui, len(items)) + _roo_edits(items, roles, ui, ctx)
    stats["edits"] = len(edits)
    return _emit(converted, edits, ctx), stats


def _convert(item: Any, ctx: ImportContext, names: dict[str, str], i: int,
             calls: list[tuple[str | None, str]]) -> list[Message]:
    """One history item's messages; a user turn's results written as text become tool messages
    answering ``calls``, the previous reply's tool_use blocks (``results``)."""
    if isinstance(item, dict) and item.get("role") == "user" and isinstance(item.get("content"), list):
        results, rest = split_turn(item["content"])

        def convert(blocks: list[Any]) -> Message:  # a result's blocks, read as a user turn of them
            return convert_message({**item, "content": blocks}, ctx, tool_names=names)[-1]

        msgs = result_messages(results, calls, convert)
        if rest or not msgs:
            msgs += convert_message({**item, "content": rest}, ctx, tool_names=names)
    else:
        msgs = convert_message(item, ctx, tool_names=names)
    if not isinstance(item, dict):
        return msgs
    ts = _ms_iso(item.get("ts"))
    model = as_str(as_dict(item.get("modelInfo")).get("modelId"))
    extra = {k: item[k] for k in ("condenseParent", "condenseId", "truncationParent", "truncationId")
             if as_str(item.get(k))}
    for k in ("isSummary", "isTruncationMarker"):
        if item.get(k) is True:
            extra[k] = True
    out = []
    for m in msgs:
        meta = {**m.meta, "history_index": i, **extra}
        out.append(replace(m, timestamp=ts or m.timestamp, model=model if m.role == "assistant" else m.model,
                           meta=meta))
    if item.get("isSummary") is True:
        out = [replace(m, kind=KIND_COMPACTION_SUMMARY) if m.role == "assistant" else m for m in out]
    return out


def _attach_usage(items: list[Any], converted: list[list[Message]], roles: list[str | None], ui: UiLog | None,
                  stats: dict[str, Any], ctx: ImportContext) -> None:
    answers = [i for i, r in enumerate(roles) if r == "assistant" and not _is(items[i], "isSummary")]
    stats["calls"] = len(answers)
    by_order: dict[int, Call] = {}
    if ui is not None and not ui.has_history_index and ui.calls:
        # Roo writes no history index: the k-th call started is the k-th answer.
        if len(ui.calls) != len(answers):
            ctx.warn(f"ui_messages.json records {len(ui.calls)} model call{'' if len(ui.calls) == 1 else 's'}, "
                     f"the history {len(answers)} answer{'' if len(answers) == 1 else 's'}; "
                     "paired them in order")
        by_order = dict(zip(answers, ui.calls))
    for i in answers:
        call = ui.call_for_answer(i) if ui is not None and ui.has_history_index else by_order.get(i)
        usage, meta = None, {}
        if call is not None and (usage := call.usage()) is not None:
            meta = {"usage_source": "ui_messages api_req_started", **call.figures()}
            stats["ui_usage"] += 1
        tokens = as_dict(as_dict(items[i]).get("metrics")).get("tokens")
        if isinstance(tokens, dict):
            meta["metrics_tokens"] = {k: tokens[k] for k in ("prompt", "completion", "cached") if k in tokens}
            provider = as_str(as_dict(as_dict(items[i]).get("modelInfo")).get("providerId"))
            if usage is None and (usage := _metrics_usage(tokens, provider)) is not None:
                meta["usage_source"] = "api_conversation_history metrics.tokens"
                stats["metrics_usage"] += 1
        if usage is None and not meta:
            continue
        msgs = converted[i]
        for j, m in enumerate(msgs):
            if m.role == "assistant":
                msgs[j] = replace(m, usage=usage, meta={**m.meta, **meta})
                break


def _metrics_usage(tokens: dict[str, Any], provider: str | None = None) -> Usage | None:
    """Cline's ``metrics.tokens``: ``prompt`` is the call's ``inputTokens`` (the ui entry's
    tokensIn), ``cached`` its cache reads + writes; whether prompt holds them depends on the
    provider (``ui.input_holds_cache``)."""
    prompt, completion, cached = (as_int(tokens.get(k)) for k in ("prompt", "completion", "cached"))
    if prompt is None and completion is None:
        return None
    return Usage(prompt_tokens=prompt_with_cache(prompt, cached, None, input_holds_cache(provider)),
                 completion_tokens=completion)


def _is(item: Any, key: str) -> bool:
    return isinstance(item, dict) and item.get(key) is True


def _cline_edits(ui: UiLog | None, n: int) -> list[Edit]:
    out: list[Edit] = []
    prev_end = 1
    unnamed = Unnamed(range(n))
    # In the order the replay meets the markers (by target), so that each names what its range
    # adds to the ones before it (``Unnamed``); the text keeps the range as recorded.
    calls = [(min(c.answer_index, n), c.new_range) for c in (ui.calls if ui is not None else ())
             if c.new_range is not None and c.answer_index is not None]
    for target, (a, b) in sorted(calls, key=lambda c: c[0]):
        out.append(Edit(
            target=target, type="truncation", action="evicted",
            items=unnamed.take(a, b), source="cline:conversationHistoryDeletedRange",
            text=(f"Cline took API-history messages {a}-{b} out of the context (conversationHistoryDeletedRange"
                  + (f"; {a}-{prev_end} had left before)" if prev_end >= a else ")")),
            figures={"deleted_range": [a, b]}))
        prev_end = b
    return out


def _roo_edits(items: list[Any], roles: list[str | None], ui: UiLog | None, ctx: ImportContext) -> list[Edit]:
    events: dict[str, RooEvent] = {e.ident: e for e in (ui.roo_events if ui else ()) if e.ident}
    # The messages each summary or notice replaced, by (tag, id), found in one pass: a search
    # of the whole history per summary cost summaries x messages.
    tagged: dict[tuple[str, str], list[int]] = {}
    for j, it in enumerate(items):
        if isinstance(it, dict):
            for tag in ("condenseParent", "truncationParent"):
                if isinstance(it.get(tag), str):
                    tagged.setdefault((tag, it[tag]), []).append(j)
    answers = _Answers(items, roles)
    out: list[Edit] = []
    keys: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        if item.get("isSummary") is True and as_str(item.get("condenseId")):
            ident, parent, kind = item["condenseId"], "condenseParent", "condense"
            keep: int | None = ROO_KEEP
        elif item.get("isTruncationMarker") is True and as_str(item.get("truncationId")):
            ident, parent, kind = item["truncationId"], "truncationParent", "truncation"
            m = _HIDDEN.search(c if isinstance(c := item.get("content"), str) else "")
            keep = int(m.group(1)) if m else None
        else:
            continue
        gone = tagged.get((parent, ident), [])
        if keep is None:
            keep = len(gone)
        event = events.get(ident)
        target, placed = answers.target(i, keep, event)
        figures = dict(event.figures) if event else {}
        if placed:
            figures["placed"] = placed
        keys.append((parent, ident))
        if kind == "condense":
            out.append(Edit(target, "condense", "summarized", gone, "roo:condenseParent",
                            f"Roo condensed {len(gone)} messages into a summary", figures, moved=i))
        else:
            out.append(Edit(target, "truncation", "evicted", gone, "roo:truncationParent",
                            f"Roo's sliding window hid {len(gone)} messages", figures, moved=i))
    # A second summary or notice with the same id (a copied item) names what the first one,
    # in the order a replay meets them, took out already: nothing more (as for Cline's ranges).
    seen: set[tuple[str, str]] = set()
    for k in sorted(range(len(out)), key=lambda k: out[k].target):
        if keys[k] in seen:
            out[k].items = []
        seen.add(keys[k])
    return out


class _Answers:
    """The stored answers (assistant items, summaries left out) and their ``ts``, for finding
    the first answer after an item in O(log n): a scan per summary cost summaries x messages."""

    def __init__(self, items: list[Any], roles: list[str | None]) -> None:
        self.items = items
        self.at = [j for j in range(len(items)) if roles[j] == "assistant" and not _is(items[j], "isSummary")]
        self._lift: list[list[float]] | None = None  # max of ts over blocks of 2^level answers

    def _levels(self) -> list[list[float]]:
        if self._lift is None:
            ts = [as_int(as_dict(self.items[j]).get("ts")) for j in self.at]
            level: list[float] = [float("-inf") if t is None else t for t in ts]
            self._lift = [level]
            width = 1
            while width * 2 <= len(level):
                prev = self._lift[-1]
                self._lift.append([max(prev[k], prev[k + width]) for k in range(len(prev) - width)])
                width *= 2
        return self._lift

    def target(self, at: int, keep: int, event: RooEvent | None) -> tuple[int, str | None]:
        """The first answer after stored item ``at`` that was sent the edited history."""
        first = bisect.bisect_right(self.at, at)
        if event is not None and event.ts is not None:
            k = first
            levels = self._levels()
            for level in range(len(levels) - 1, -1, -1):  # skip blocks whose ts are all <= event.ts
                if k < len(levels[level]) and levels[level][k] <= event.ts:
                    k += 1 << level
            if k < len(self.at):
                return self.at[k], None
        k = bisect.bisect_left(self.at, max(at + 1 + keep, at + 1))
        if k < len(self.at):
            return self.at[k], "after the kept tail"
        return len(self.items), "after the kept tail"


def _emit(converted: list[list[Message]], edits: list[Edit], ctx: ImportContext) -> list[Message]:
    by_target: dict[int, list[Edit]] = {}
    for e in edits:
        by_target.setdefault(e.target, []).append(e)
    moved = {e.moved for e in edits if e.moved is not None}
    out: list[Message] = []
    pos: dict[int, list[int]] = {}  # API-history index -> its emitted positions

    def put(i: int) -> None:
        pos[i] = list(range(len(out), len(out) + len(converted[i])))
        out.extend(converted[i])

    def marker(e: Edit) -> None:
        places = sorted(p for i in e.items for p in pos.get(i, ()))
        missing = [i for i in e.items if i not in pos]
        if missing:
            ctx.warn(f"{e.source}: {len(missing)} message(s) it names are not in the history before the edit; "
                     "left them out of it")
        out.append(history_edit(e.type, e.action, position_runs(places), e.source, e.text, **e.figures))
        if e.moved is not None:
            put(e.moved)

    for i in range(len(converted)):
        for e in by_target.pop(i, ()):
            marker(e)
        if i not in moved:
            put(i)
    for target in sorted(by_target):
        for e in by_target[target]:
            marker(e)
    return out

