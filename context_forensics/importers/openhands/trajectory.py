"""OpenHands 0.x trajectory exports: the event stream of one conversation as one JSON list.

What OpenHands (All-Hands-AI/OpenHands 0.2x; the corpus files are its ``tests/runtime/trajs/``
@ 156d0686c46a) writes when a trajectory is saved or exported: every event a dict with ``id``,
``timestamp``, ``source`` (user / agent / environment), ``message`` and either ``action`` +
``args`` or ``observation`` + ``content`` + ``extras`` (+ ``cause``, the action's id). An event
that an LLM call produced carries ``tool_call_metadata`` {function_name, tool_call_id,
total_calls_in_response, model_response}: ``model_response`` is the whole chat.completion,
``usage`` included. An action and its observation carry the same response (and a response with
several tool calls, several actions): the call is counted once, its assistant message built
from ``model_response.choices[0].message`` (its text and every tool call) at the first event
that carries it, with its usage.

- ``action: "message"``: a user message (source user) or an assistant reply (source agent; with
  no ``tool_call_metadata`` it has no usage: OpenHands does not keep it).
- ``action: "system"`` (later 0.x versions): the system prompt (``args.content``; ``args.tools``
  to metadata).
- an observation with ``tool_call_metadata``: the tool result, as OpenHands' conversation memory
  wrote it (``observation_text``: an ``oh_aci`` edit's ``formatted_output_and_error``, a command's
  output with its metadata lines, else ``content``).
- ``action: "condensation"``: a recorded history edit (``forgotten_event_ids`` or the range
  ``forgotten_events_start_id`` .. ``forgotten_events_end_id``; ``summary``).
- anything else (agent state changes, observations no tool call asked for, actions of no
  LLM call): not what the model read; skipped and counted by action / observation type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from ...records import KIND_COMPACTION_SUMMARY, Message, Session, ToolCall, history_edit, position_runs
from .._agent_calls import usage_from
from .._agent_messages import convert_message
from .._sniffing import partial_json
from .._stream import iter_json_array
from .._text import title_line
from ..base import RECORD_ERRORS, ImportContext, Importer, as_dict, as_int, as_list, as_str, json_text, register
from ._shared import command_output

SOURCE = "openhands_trajectory"


def _is_event(e: Any) -> bool:
    return (isinstance(e, dict) and isinstance(e.get("id"), int) and e.get("source") in ("user", "agent", "environment")
            and ("action" in e or "observation" in e) and "timestamp" in e)


def observation_text(e: dict[str, Any], meta: dict[str, Any]) -> str:
    """The tool result the model read for an observation event, as OpenHands 0.2x's conversation memory
    wrote it: an ``oh_aci`` file edit's ``extras.formatted_output_and_error`` (``FileEditObservation.__str__``:
    its ``content`` is a diff for the UI), a command's output with its ``extras.metadata`` prefix, suffix
    and the working directory / interpreter / exit-code lines (``CmdOutputObservation.to_agent_observation``);
    any other observation its ``content`` (else ``message``). ``meta["text_from"]`` names the rule used."""
    extras = as_dict(e.get("extras"))
    content = c if isinstance(c := e.get("content"), str) else as_str(e.get("message")) or ""
    if e.get("observation") == "edit" and extras.get("impl_source") == "oh_aci" \
            and isinstance(extras.get("formatted_output_and_error"), str):
        meta["text_from"] = "extras.formatted_output_and_error (FileEditObservation.__str__, oh_aci)"
        return extras["formatted_output_and_error"]
    md = extras.get("metadata")
    if e.get("observation") == "run" and isinstance(md, dict):
        text = command_output(content, md)
        meta["text_from"] = "content with extras.metadata (CmdOutputObservation.to_agent_observation)"
        return text
    return content


class _Reader:
    def __init__(self, ctx: ImportContext) -> None:
        self.ctx = ctx
        self.out: list[Message] = []
        self.at: dict[int, list[int]] = {}
        self.responses: set[str] = set()
        self.calls_with_usage = 0
        self.models: list[str] = []
        self.tools: list[Any] | None = None
        self.condensations = 0

    def _add(self, m: Message, eid: int | None) -> None:
        self.out.append(m)
        if eid is not None:
            self.at.setdefault(eid, []).append(len(self.out) - 1)

    def event(self, e: Any) -> None:
        if not _is_event(e):
            self.ctx.skip("non-event item", unknown=True)
            return
        eid, ts = e["id"], as_str(e.get("timestamp"))
        tcm = as_dict(e.get("tool_call_metadata"))
        args = as_dict(e.get("args"))
        if "observation" in e:
            if not tcm:
                self.ctx.skip(f"observation {e.get('observation')} (no tool call)")
                return
            meta: dict[str, Any] = {"event_id": eid, "observation": e.get("observation"), "cause": e.get("cause")}
            text = observation_text(e, meta)
            code = as_int(as_dict(as_dict(e.get("extras")).get("metadata")).get("exit_code"))
            if code is not None:
                meta["returncode"] = code
            self._add(Message(role="tool", text=text, tool_call_id=as_str(tcm.get("tool_call_id")),
                              name=as_str(tcm.get("function_name")), timestamp=ts, meta=meta), eid)
            return
        action = e.get("action")
        if tcm:
            self._llm_action(e, tcm, eid, ts)
            return
        if action == "message":
            text = c if isinstance(c := args.get("content"), str) else as_str(e.get("message")) or ""
            role = "user" if e.get("source") == "user" else "assistant"
            meta = {"event_id": eid, "action": "message"}
            if role == "assistant":
                meta["usage_not_logged"] = True  # a reply without tool_call_metadata: its call is not in the export
            self._add(Message(role=role, text=text, timestamp=ts, meta=meta), eid)
        elif action == "system":
            if isinstance(args.get("tools"), list):
                self.tools = args["tools"]
            self._add(Message(role="system", text=as_str(args.get("content")) or "", timestamp=ts,
                              meta={"event_id": eid, "action": "system"}), eid)
        elif action == "condensation":
            self._condensation(args, eid, ts)
        else:
            self.ctx.skip(f"action {action} (no LLM call)")

    def _llm_action(self, e: dict, tcm: dict, eid: int, ts: str | None) -> None:
        resp = as_dict(tcm.get("model_response"))
        rid = as_str(resp.get("id"))
        if rid and rid in self.responses:
            if self.out:  # eid is an int (_is_event)
                self.at.setdefault(eid, [])
            return  # another action of a response already read: the call is counted once
        choices = as_list(resp.get("choices"))
        msg = as_dict(as_dict(choices[0]).get("message")) if choices else {}
        usage = usage_from(resp.get("usage"))
        model = as_str(resp.get("model"))
        meta = {"event_id": eid, "action": e.get("action"), "response_id": rid}
        if msg:
            converted = convert_message({**msg, "role": "assistant"}, self.ctx, names={}, usage=usage, meta=meta,
                                        model=model, timestamp=ts)
        else:  # no response kept: the action's own tool call, no usage
            converted = [Message(role="assistant", text=as_str(as_dict(e.get("args")).get("thought")) or "",
                                 tool_calls=(ToolCall(name=as_str(tcm.get("function_name")) or "?",
                                                      arguments=json_text(e.get("args")),
                                                      id=as_str(tcm.get("tool_call_id"))),),
                                 timestamp=ts, meta=meta)]
            usage = None
        for m in converted:
            self._add(m, eid)
        if rid:
            self.responses.add(rid)
        if usage is not None:
            self.calls_with_usage += 1
        if model:
            self.models.append(model)

    def _condensation(self, args: dict, eid: int, ts: str | None) -> None:
        ids = [i for i in as_list(args.get("forgotten_event_ids")) if isinstance(i, int)]
        start, end = as_int(args.get("forgotten_events_start_id")), as_int(args.get("forgotten_events_end_id"))
        if not ids and start is not None and end is not None:
            ids = [i for i in self.at if start <= i <= end]
        positions = sorted({p for i in ids for p in self.at.get(i, ())})
        summary = as_str(args.get("summary"))
        self.out.append(history_edit("condense", "summarized" if summary else "evicted", position_runs(positions),
                                     f"{SOURCE}:condensation",
                                     f"OpenHands condensed the history: {len(positions)} message(s) of "
                                     f"{len(ids)} event(s) {'summarized' if summary else 'forgotten'}",
                                     event_id=eid, forgotten_events=len(ids)))
        self.condensations += 1
        if summary:
            self._add(Message(role="user", text=summary, kind=KIND_COMPACTION_SUMMARY, timestamp=ts,
                              meta={"event_id": eid, "source": "condensation.summary"}), eid)


@register
class OpenHandsTrajectory(Importer):
    name = "openhands_trajectory"
    description = ("OpenHands 0.x trajectory exports (the event stream as one JSON list; per-call usage from "
                   "tool_call_metadata.model_response, each call once)")
    extensions = (".json",)
    priority = 19

    def sniff(self, path: Path, head: bytes) -> bool:
        doc = partial_json(head)
        if not isinstance(doc, list) or not doc:
            return False
        items = [x for x in doc if isinstance(x, dict)]
        return bool(items) and len(items) == len(doc) and all(_is_event(x) for x in items)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        reader = _Reader(ctx)
        for i, e in iter_json_array(path, ctx):
            try:
                reader.event(e)
            except RECORD_ERRORS as err:
                ctx.bad_record(err, what="event", index=i)
        if not reader.out:
            raise InputError("no event the model reads (message, LLM action, tool observation)", where=str(path),
                             hint="an OpenHands trajectory export is a JSON list of events")
        metadata: dict[str, Any] = {"llm_calls": len(reader.responses), "calls_with_usage": reader.calls_with_usage,
                                    "system_prompt_logged": any(m.role == "system" for m in reader.out)}
        if reader.tools:
            metadata["tools"] = reader.tools
        if reader.condensations:
            metadata["condensations"] = reader.condensations
        first_user = next((m.text for m in reader.out if m.role == "user"), "")
        yield Session(external_id=path.stem, format=self.name, messages=reader.out,
                      title=title_line(first_user) or path.stem, model=reader.models[-1] if reader.models else None,
                      started_at=next((m.timestamp for m in reader.out if m.timestamp), None), metadata=metadata)
