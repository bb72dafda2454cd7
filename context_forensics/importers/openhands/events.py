"""OpenHands V1 conversations (Software Agent SDK, OpenHands CLI): an ``events/`` folder.

The SDK persists a conversation as ``<conversation>/base_state.json`` plus ``events/``, one
JSON file per event named ``event-NNNNN-<event id>.json`` (``persistence_const.EVENT_NAME_RE``
of OpenHands/software-agent-sdk @ 611629e6999ad398dc49c761721eefe18d5e6bd9, checked against
the event classes in ``openhands-sdk/openhands/sdk/event/``). The same events one per line
(a JSONL file) read the same way.

What becomes what (the event's ``to_llm_message`` in the SDK):

- ``SystemPromptEvent``: the system message (``system_prompt`` then ``dynamic_context``);
  ``tools`` go to ``metadata["tools"]``.
- ``MessageEvent``: ``llm_message`` (role, content parts, ``thinking_blocks``,
  ``reasoning_content``) plus ``extended_content``; ``sender`` is the message's name.
- ``ActionEvent``: the assistant's tool call (``tool_call``), its ``thought`` as text and its
  reasoning as parts. The actions of one LLM response (one ``llm_response_id``, parallel tool
  calls) are one assistant message: one model call.
- ``ObservationEvent`` / ``UserRejectObservation`` / ``AgentErrorEvent``: a tool result
  (``observation.content``, a terminal's framed by its metadata lines and an error's after the
  SDK's error header, as ``to_llm_content`` sends them; "Action rejected: <reason>"; the error).
- ``Condensation``: a recorded history edit: the events named in ``forgotten_event_ids`` left the
  view; its ``summary`` (the SDK inserts it as a user message at ``summary_offset`` of the
  view) follows the marker as a compaction summary. ``CondensationSummaryEvent``: a summary.
- Everything else (``CondensationRequest``, ``PauseEvent``, ``ConversationStateUpdateEvent``,
  ``TokenEvent``, hook and streaming events, unknown kinds): not read by the model; skipped and
  counted by kind.

Usage: the events carry none (nor the model). ``base_state.json`` (beside ``events/``) holds the SDK's
``stats.usage_to_metrics.<llm>.token_usages``, one per completion with its ``response_id``;
each goes on the message of the events with that ``llm_response_id`` (once per response). In a
JSONL, a ``ConversationStateUpdateEvent`` whose ``value`` holds ``usage_to_metrics`` (key
``stats`` or ``full_state``) does the same. A token usage of no event's response (the condenser's
own calls, named by a Condensation's ``llm_response_id``) is kept in ``metadata["condenser_usage"]``,
any other in ``metadata["unattached_usage"]`` (with a warning).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Iterator

from ...errors import InputError
from ...records import KIND_COMPACTION_SUMMARY, Message, Session, ToolCall, Usage, history_edit, position_runs
from .._agent_calls import usage_from
from .._agent_messages import _thinking_parts, convert_message, split_content
from .._sniffing import head_jsonl_records, mostly, partial_json
from .._text import title_line
from ..base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    as_int,
    as_list,
    as_str,
    iter_jsonl,
    json_text,
    load_json,
    read_head,
    register,
)
from ._shared import ERROR_HEADER, command_output

EVENT_NAME = re.compile(r"^event-(\d{5,})-([0-9a-fA-F\-]{8,})\.json$")
SOURCE = "openhands_v1"
# Event kinds that are a message the model reads (the SDK's LLMConvertibleEvent subclasses).
READ_KINDS = frozenset({"SystemPromptEvent", "MessageEvent", "ActionEvent", "ObservationEvent",
                        "UserRejectObservation", "AgentErrorEvent", "Condensation", "CondensationSummaryEvent"})
# Event kinds of the SDK that the model never reads (skipped, counted by kind).
OTHER_KINDS = frozenset({"CondensationRequest", "PauseEvent", "InterruptEvent", "ConversationStateUpdateEvent",
                         "TokenEvent", "StreamingDeltaEvent", "HookExecutionEvent", "LLMCompletionLogEvent",
                         "ConversationErrorEvent", "ACPToolCallEvent"})
KINDS = READ_KINDS | OTHER_KINDS
_SCAN = 50


def is_event(value: Any) -> bool:
    """An SDK event record: an id, a source and a ``kind`` of the SDK's events."""
    return (isinstance(value, dict) and value.get("kind") in KINDS and isinstance(value.get("id"), str)
            and "source" in value)


def is_event_file(path: Path, head: bytes) -> bool:
    """An ``event-NNNNN-<id>.json`` file holding that event (a system prompt event outgrows the head
    before its ``kind``: then its ``id``, the one in its name, and its ``source`` say it)."""
    m = EVENT_NAME.match(path.name)
    doc = partial_json(head)
    return m is not None and (is_event(doc) or (isinstance(doc, dict) and doc.get("id") == m.group(2)
                                                and "source" in doc))


def event_files(folder: Path) -> list[Path]:
    """The ``event-NNNNN-<id>.json`` files of a folder, in index order."""
    try:
        found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := EVENT_NAME.match(p.name)) and p.is_file()]
    except OSError:
        return []
    return [p for _, p in sorted(found)]


def events_folder(path: Path) -> Path | None:
    """The events folder ``path`` is or holds (a conversation folder's ``events/``), or None."""
    for folder in (path / "events", path):
        if not folder.is_dir():
            continue
        files = event_files(folder)[:_SCAN]
        for f in files[:3]:
            try:
                if is_event_file(f, read_head(f, 4096)):
                    return folder
            except OSError:
                continue
    return None


def _text(content: Any) -> str:
    return split_content(content).text


def token_usages(stats: Any) -> list[dict[str, Any]]:
    """The per-completion ``token_usages`` of an SDK ``ConversationStats`` (all its LLMs)."""
    out: list[dict[str, Any]] = []
    for metrics in as_dict(as_dict(stats).get("usage_to_metrics")).values():
        out.extend(u for u in as_list(as_dict(metrics).get("token_usages")) if isinstance(u, dict))
    return out


def sdk_usage(u: dict[str, Any]) -> Usage | None:
    """A ``Usage`` from an SDK ``TokenUsage`` (prompt_tokens as litellm reported it, with the cache
    reads and writes beside it: the litellm rule of ``usage_from`` decides whether they are in it)."""
    usage = usage_from({"prompt_tokens": u.get("prompt_tokens"), "completion_tokens": u.get("completion_tokens"),
                        "cache_read_input_tokens": u.get("cache_read_tokens"),
                        "cache_creation_input_tokens": u.get("cache_write_tokens"),
                        "reasoning_tokens": u.get("reasoning_tokens")})
    window = as_int(u.get("context_window"))
    if usage is not None and window:
        d = usage.to_dict()
        d["context_window"] = window
        usage = Usage.from_dict(d)
    return usage


class Converter:
    """SDK events in order -> Messages (see the module doc)."""

    def __init__(self, ctx: ImportContext) -> None:
        self.ctx = ctx
        self.out: list[Message] = []
        self.at: dict[str, list[int]] = {}  # event id -> positions of its messages
        self.response_at: dict[str, int] = {}  # llm_response_id -> its assistant message's position
        self.tools: list[Any] | None = None
        self.first_time: str | None = None
        self.condensations = 0
        self.condenser_rids: set[str] = set()  # the llm_response_id of each Condensation: the condenser's calls
        self.usages: list[dict[str, Any]] = []  # token usages read from state-update events

    def _add(self, m: Message, eid: str | None) -> int:
        self.out.append(m)
        if eid:
            self.at.setdefault(eid, []).append(len(self.out) - 1)
        return len(self.out) - 1

    def event(self, e: Any) -> None:
        if not isinstance(e, dict):
            self.ctx.skip("non-event record", unknown=True)
            return
        kind = e.get("kind")
        if kind not in READ_KINDS:
            if kind == "ConversationStateUpdateEvent":
                value = as_dict(e.get("value"))
                self.usages.extend(token_usages(value.get("stats") if "stats" in value else value))
            known = isinstance(kind, str) and kind in KINDS
            self.ctx.skip(f"{kind}" if known else "unknown event kind", unknown=not known)
            return
        self.first_time = self.first_time or as_str(e.get("timestamp"))
        getattr(self, "_" + kind)(e, as_str(e.get("id")), as_str(e.get("timestamp")))

    def _SystemPromptEvent(self, e: dict, eid: str | None, ts: str | None) -> None:
        texts = [_text([e.get("system_prompt")] if isinstance(e.get("system_prompt"),
                                                              dict) else e.get("system_prompt"))]
        if e.get("dynamic_context"):
            texts.append(_text([e["dynamic_context"]] if isinstance(e["dynamic_context"],
                                                                    dict) else e["dynamic_context"]))
        if isinstance(e.get("tools"), list):
            self.tools = e["tools"]
        self._add(Message(role="system", text="\n\n".join(t for t in texts if t), timestamp=ts,
                          meta={"event_id": eid, "event": "SystemPromptEvent"}), eid)

    def _MessageEvent(self, e: dict, eid: str | None, ts: str | None) -> None:
        m = dict(as_dict(e.get("llm_message")))
        if not m:
            raise ValueError("MessageEvent without llm_message")
        extended = as_list(e.get("extended_content"))
        if extended:
            content = m.get("content")
            m["content"] = (as_list(content) if not isinstance(content,
                                                               str) else [{"type": "text", "text": content}]) + extended
        meta: dict[str, Any] = {"event_id": eid, "event": "MessageEvent"}
        rid = as_str(e.get("llm_response_id"))
        if rid:
            meta["llm_response_id"] = rid
        if as_list(e.get("activated_skills")):
            meta["activated_skills"] = e["activated_skills"]
        if as_str(e.get("sender")):
            m["name"] = e["sender"]
        for msg in convert_message(m, self.ctx, names={}, meta=meta, timestamp=ts):
            pos = self._add(msg, eid)
            if msg.role == "assistant" and rid and rid not in self.response_at:
                self.response_at[rid] = pos

    def _ActionEvent(self, e: dict, eid: str | None, ts: str | None) -> None:
        call = as_dict(e.get("tool_call"))
        name = as_str(call.get("name")) or as_str(e.get("tool_name"))
        if name is None:
            raise ValueError("ActionEvent without tool_call.name or tool_name")
        tc = ToolCall(name=name, arguments=json_text(call.get("arguments")),
                      id=as_str(call.get("id")) or as_str(e.get("tool_call_id")))
        rid = as_str(e.get("llm_response_id"))
        thought = _text(e.get("thought"))
        last = self.out[-1] if self.out else None
        if rid and rid in self.response_at and self.response_at[rid] == len(self.out) - 1 and last is not None:
            # another action of the same response (parallel tool calls): the same call's message
            meta = dict(last.meta)
            meta.setdefault("event_ids", [meta.get("event_id")]).append(eid)
            text = "\n".join(t for t in (last.text, thought) if t)
            self.out[-1] = Message(role="assistant", text=text, tool_calls=last.tool_calls + (tc,), parts=last.parts,
                                   timestamp=last.timestamp, meta=meta)
            if eid:
                self.at.setdefault(eid, []).append(len(self.out) - 1)
            return
        meta = {"event_id": eid, "event": "ActionEvent"}
        if rid:
            meta["llm_response_id"] = rid
        for key in ("security_risk", "summary"):
            if as_str(e.get(key)):
                meta[key] = e[key]
        parts = tuple(_thinking_parts(e))
        pos = self._add(Message(role="assistant", text=thought, tool_calls=(tc,), parts=parts, timestamp=ts,
                                meta=meta), eid)
        if rid and rid not in self.response_at:
            self.response_at[rid] = pos

    def _tool(self, e: dict, eid: str | None, ts: str | None, text: str, **meta: Any) -> None:
        self._add(Message(role="tool", text=text, tool_call_id=as_str(e.get("tool_call_id")),
                          name=as_str(e.get("tool_name")), timestamp=ts,
                          meta={"event_id": eid, "event": e.get("kind"), **meta}), eid)

    def _ObservationEvent(self, e: dict, eid: str | None, ts: str | None) -> None:
        obs = as_dict(e.get("observation"))
        meta: dict[str, Any] = {"is_error": True} if obs.get("is_error") else {}
        text = _text(as_list(obs.get("content")))
        if obs.get("kind") == "TerminalObservation" and isinstance(obs.get("metadata"), dict):
            # TerminalObservation.to_llm_content: the output framed by its metadata (output truncation aside)
            text = command_output(text, obs["metadata"])
            meta["text_from"] = "TerminalObservation.to_llm_content"
        if obs.get("is_error"):
            text = ERROR_HEADER + text  # Observation.to_llm_content puts it first
        extended = _text(as_list(e.get("extended_content")))
        text = "\n".join(t for t in (text, extended) if t)
        if isinstance(obs.get("exit_code"), int):
            meta["returncode"] = obs["exit_code"]
        self._tool(e, eid, ts, text, **meta)

    def _UserRejectObservation(self, e: dict, eid: str | None, ts: str | None) -> None:
        reason = as_str(e.get("rejection_reason")) or "User rejected the action"
        self._tool(e, eid, ts, f"Action rejected: {reason}", rejection_source=e.get("rejection_source"))

    def _AgentErrorEvent(self, e: dict, eid: str | None, ts: str | None) -> None:
        self._tool(e, eid, ts, as_str(e.get("error")) or "", is_error=True)

    def _Condensation(self, e: dict, eid: str | None, ts: str | None) -> None:
        forgotten = [i for i in as_list(e.get("forgotten_event_ids")) if isinstance(i, str)]
        positions = sorted({p for i in forgotten for p in self.at.get(i, ())})
        unknown = sum(1 for i in forgotten if i not in self.at)
        summary = as_str(e.get("summary"))
        figures: dict[str, Any] = {"event_id": eid, "forgotten_events": len(forgotten)}
        if unknown:
            figures["forgotten_not_in_log"] = unknown
            self.ctx.warn(f"Condensation {eid}: {unknown} of its {len(forgotten)} forgotten events are not in the log")
        if e.get("summary_offset") is not None:
            figures["summary_offset"] = e.get("summary_offset")
        if as_str(e.get("llm_response_id")):
            figures["llm_response_id"] = e["llm_response_id"]
            self.condenser_rids.add(e["llm_response_id"])
        self._add(history_edit("condense", "summarized" if summary else "evicted", position_runs(positions),
                               f"{SOURCE}:Condensation",
                               f"OpenHands condensed the history: {len(positions)} message(s) of "
                               f"{len(forgotten)} event(s) {'summarized' if summary else 'forgotten'}",
                               **figures), eid)
        self.condensations += 1
        if summary:
            # CondensationSummaryEvent.to_llm_message: a user message at summary_offset of the view
            self._add(Message(role="user", text=summary, kind=KIND_COMPACTION_SUMMARY, timestamp=ts,
                              meta={"event_id": eid, "source": "Condensation.summary"}), eid)

    def _CondensationSummaryEvent(self, e: dict, eid: str | None, ts: str | None) -> None:
        self._add(Message(role="user", text=as_str(e.get("summary")) or "", kind=KIND_COMPACTION_SUMMARY,
                          timestamp=ts, meta={"event_id": eid, "source": "CondensationSummaryEvent"}), eid)

    def attach_usage(self, usages: Iterable[dict[str, Any]]) -> tuple[list[Message], int, list[dict], list[dict]]:
        """The messages with each response's usage on its assistant message; (messages, calls with
        usage, the condenser calls' usages, usages of no event's response)."""
        out = list(self.out)
        attached = 0
        unattached: list[dict[str, Any]] = []
        condenser: list[dict[str, Any]] = []
        seen: set[str | None] = set()
        for u in usages:
            rid = as_str(u.get("response_id"))
            usage = sdk_usage(u)
            pos = self.response_at.get(rid or "")
            if usage is None:
                continue
            if pos is None or rid in seen:
                kept = {k: u.get(k) for k in ("response_id", "model", "prompt_tokens", "completion_tokens",
                                              "cache_read_tokens", "cache_write_tokens")}
                (condenser if rid in self.condenser_rids else unattached).append(kept)
                continue
            seen.add(rid)
            m = out[pos]
            out[pos] = Message(role=m.role, text=m.text, kind=m.kind, name=m.name, tool_calls=m.tool_calls,
                               tool_call_id=m.tool_call_id, parts=m.parts, usage=usage, timestamp=m.timestamp,
                               model=as_str(u.get("model")) or m.model, meta=m.meta)
            attached += 1
        return out, attached, condenser, unattached


def _read_events(files: list[Path], ctx: ImportContext) -> Iterator[tuple[str, Any]]:
    for f in files:
        try:
            yield f.name, load_json(f, ctx)
        except InputError as e:
            ctx.warn(f"{f.name}: {e.message}; skipped this event")
            ctx.skip("unreadable event file")


def _base_state(folder: Path, ctx: ImportContext) -> dict[str, Any]:
    for d in (folder.parent, folder):
        f = d / "base_state.json"
        if f.is_file():
            try:
                return as_dict(load_json(f, ctx))
            except InputError as e:
                ctx.warn(f"{f}: {e.message}; read the events without it (no usage)")
    return {}


@register
class OpenHandsV1(Importer):
    name = "openhands_v1"
    description = ("OpenHands V1 (Software Agent SDK / OpenHands CLI) conversations: an events/ folder of "
                   "event-NNNNN-<id>.json (usage from base_state.json stats), or the events as JSONL")
    extensions = (".json", ".jsonl")
    priority = 19
    handles_directories = True

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return events_folder(path) is not None
        if EVENT_NAME.match(path.name):
            return is_event_file(path, head)
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            return mostly(head_jsonl_records(head), is_event)
        return False

    def sidecars(self, path: Path) -> list[Path]:
        folder = events_folder(path) if path.is_dir() else None
        if folder is None:
            return []
        return [d / "base_state.json" for d in (folder.parent, folder) if (d / "base_state.json").is_file()]

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        conv = Converter(ctx)
        state: dict[str, Any] = {}
        if path.is_dir() or EVENT_NAME.match(path.name):
            folder = events_folder(path) if path.is_dir() else path.parent
            if folder is None:
                raise InputError("no OpenHands event files (event-NNNNN-<id>.json) in this folder", where=str(path),
                                 hint="point at a conversation folder, its events/ folder, or one event file")
            if not path.is_dir():
                ctx.warn(f"an event file is one event of {folder}: read the whole folder")
            records: Iterable[tuple[Any, Any]] = _read_events(event_files(folder), ctx)
            state = _base_state(folder, ctx)
            ext = folder.parent.name if folder.name == "events" else folder.name
        else:
            records = iter_jsonl(path, ctx)
            ext = path.stem
        for where, e in records:
            try:
                conv.event(e)
            except RECORD_ERRORS as err:
                ctx.bad_record(err, what="event", index=where)
        if not conv.out:
            raise InputError("no event the model reads (system prompt, message, action, observation)",
                             where=str(path), hint="an OpenHands V1 conversation's events/ folder holds them")
        usages = token_usages(state.get("stats")) + conv.usages
        messages, with_usage, condenser, unattached = conv.attach_usage(usages)
        metadata: dict[str, Any] = {"events": sum(len(v) > 0 for v in conv.at.values()),
                                    "llm_responses": len(conv.response_at), "calls_with_usage": with_usage}
        if conv.tools:
            metadata["tools"] = conv.tools
        if conv.condensations:
            metadata["condensations"] = conv.condensations
        if condenser:
            metadata["condenser_usage"] = condenser  # the condenser's own calls: no step of the agent
        if unattached:
            metadata["unattached_usage"] = unattached
            ctx.warn(f"{len(unattached)} recorded token usage(s) match no event's llm_response_id; kept in "
                     "metadata['unattached_usage']")
        if state:
            metadata["base_state"] = "base_state.json"
            if as_str(state.get("execution_status")):
                metadata["execution_status"] = state["execution_status"]
        model = as_str(as_dict(as_dict(state.get("agent")).get("llm")).get("model"))
        model = model or next((m.model for m in messages if m.model), None)
        first_user = next((m.text for m in messages if m.role == "user" and m.kind == "message"), "")
        yield Session(external_id=as_str(state.get("id")) or ext, format=self.name, messages=messages,
                      title=title_line(first_user) or ext, model=model, started_at=conv.first_time,
                      metadata=metadata)
