"""A session from ``ui_messages.json`` alone (no API history in the folder): the conversation as
the UI showed it, which is no recorded window.

Each ``api_req_started`` is one model call: its ``request`` text is the user turn the call sent
(the extension writes the turn's blocks there as text joined by blank lines, tool results and
environment details included; each result, ``[read_file for 'a.ts'] Result:``, becomes a tool
message before the rest of the turn, ``results.split_request``), and the entries after it until the next call are the
answer as the UI showed it: ``reasoning`` (a thinking part), ``text`` / ``completion_result`` / a ``followup`` question
(text), ``tool`` / ``command`` (a tool call named by the entry: the UI's rendering, not the
tool_use block). The call's usage goes on the answer. User-side entries (feedback, command
output, checkpoints, task progress) are left out: the next call's request holds what the model
got of them. Cline's deleted range is placed as in the full folder, on the positions of the
API-history indices these messages stand for (a call's user turn at index + 1, its answer at
index + 2; without indices, 2k and 2k + 1).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...records import Message, ToolCall, history_edit, position_runs
from .._json import parse_json
from ..base import RECORD_ERRORS, ImportContext, as_dict, as_str, json_text
from .history import _ms_iso
from .results import result_messages, split_request
from .ui import CALL, Call, UiLog, Unnamed

ASSISTANT_TEXT = {"text", "completion_result", "followup", "plan_mode_respond", "error"}
TOOL_KINDS = {"tool", "command", "use_mcp_server", "browser_action_launch", "browser_action", "new_task"}


def ui_messages(ui: UiLog, ctx: ImportContext) -> tuple[list[Message], dict[str, Any]]:
    out: list[Message] = []
    pos: dict[int, list[int]] = {}  # pseudo API-history index -> its positions
    unnamed = Unnamed()  # the indices of pos no deleted range has named yet
    calls = {c.ui_index: c for c in ui.calls}
    current: Call | None = None
    answer: dict[str, Any] = {}
    k = -1

    def close() -> None:
        if current is None:
            return
        hidx = current.answer_index if current.answer_index is not None else 2 * k + 1
        if current.new_range is not None:
            a, b = current.new_range
            places = sorted(p for i in unnamed.take(a, b) for p in pos[i])
            out.append(history_edit("truncation", "evicted", position_runs(places),
                                    "cline:conversationHistoryDeletedRange",
                                    f"Cline took API-history messages {a}-{b} out of the context "
                                    "(conversationHistoryDeletedRange)", deleted_range=[a, b]))
        meta: dict[str, Any] = {"history_index": hidx, "source": "ui_messages"}
        if answer.get("unrecorded_calls"):
            meta["unrecorded_calls"] = answer["unrecorded_calls"]
        usage = current.usage()
        if usage is not None:
            meta.update({"usage_source": "ui_messages api_req_started", **current.figures()})
        pos[hidx] = [len(out)]
        unnamed.add(hidx)
        out.append(Message(role="assistant", text="\n\n".join(answer["texts"]), tool_calls=tuple(answer["calls"]),
                           parts=tuple(answer["parts"]), usage=usage, timestamp=answer["ts"],
                           model=current.model, meta=meta))

    skipped = as_text = 0
    checkpoint: int | None = None  # the checkpoint entry that ended the current call's answer
    for i, e in enumerate(ui.entries):
        try:
            kind = e.get("say") if e.get("type") == "say" else e.get("ask")
            text = e.get("text") if isinstance(e.get("text"), str) else ""
            if i in calls or kind == CALL:
                checkpoint = None
                close()
                k += 1
                current = calls.get(i) or Call(i, None, None, {})
                hidx = current.history_index + 1 if current.history_index is not None else 2 * k
                request = current.info.get("request")
                ts, meta = _ms_iso(e.get("ts")), {"history_index": hidx, "source": "ui_messages"}
                results, rest = split_request(_request_text(request))
                turn = [replace(m, timestamp=ts, meta={**m.meta, **meta}) for m in result_messages(results, [])]
                if rest or not turn:
                    turn.append(Message(role="user", text=rest, timestamp=ts, meta=meta))
                pos[hidx] = list(range(len(out), len(out) + len(turn)))
                unnamed.add(hidx)
                out.extend(turn)
                as_text += len(results)
                answer = {"texts": [], "calls": [], "parts": [], "ts": None}
                continue
            if current is None:
                continue  # the task as typed: the first call's request holds it
            if kind == "checkpoint_created" and e.get("type") == "say":
                checkpoint = i
            elif checkpoint is not None and e.get("type") == "say" and text and (
                    kind == "reasoning" or kind in ASSISTANT_TEXT or kind in TOOL_KINDS):
                # A reply after the checkpoint that ended this call's turn, with no api_req_started
                # before it: a model call whose record Cline removed when the task resumed (an
                # interrupted request with no cost and no cancelReason, resumeTaskFromHistory).
                answer.setdefault("unrecorded_calls", []).append({"ui_index": i, "after_checkpoint": checkpoint})
                ctx.warn(f"ui entry {i}: a reply after the checkpoint of entry {checkpoint} with no api_req_started "
                         f"before it: a model call the log does not record (its reply is kept with call {k + 1}'s)")
                checkpoint = None
            if kind == "reasoning" and text:
                answer["parts"].append({"type": "thinking", "text": text})
            elif kind in ASSISTANT_TEXT and text:
                answer["texts"].append(_question(text) if kind == "followup" else text)
            elif kind in TOOL_KINDS and text:
                answer["calls"].append(_tool_call(kind, text, ctx))
            else:
                skipped += 1
                continue
            answer["ts"] = answer["ts"] or _ms_iso(e.get("ts"))
        except RECORD_ERRORS as err:
            ctx.bad_record(err, what="ui entry", index=i)
    close()
    if skipped:
        ctx.skip("ui entry shown to the user only", skipped)
    return out, {"calls": len(ui.calls), "ui_usage": sum(c.usage() is not None for c in ui.calls),
                 "metrics_usage": 0, "edits": sum(c.new_range is not None for c in ui.calls),
                 "results_as_text": as_text}


def _request_text(request: Any) -> str:
    if not isinstance(request, str):
        return ""
    return request.removesuffix("\n\nLoading...")


def _question(text: str) -> str:
    if text.startswith("{"):
        try:
            q = as_str(as_dict(parse_json(text)).get("question"))
        except ValueError:
            q = None
        return q or text
    return text


def _tool_call(kind: str, text: str, ctx: ImportContext) -> ToolCall:
    name = kind
    if kind == "tool" and text.startswith("{"):
        try:
            name = as_str(as_dict(parse_json(text, ctx)).get("tool")) or kind
        except ValueError:
            pass
    elif kind == "command":
        name = "execute_command"
    return ToolCall(name=name, arguments=json_text(text))
