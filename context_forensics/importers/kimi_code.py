"""Kimi Code CLI wire journals (``<session>/agents/<agent>/wire.jsonl``) and their ``state.json``.

Read from MoonshotAI/kimi-code at d723cc47ee43e5ca3c3c4ec2473f205d44acede2 (2026-08-22):
``packages/agent-core/src/agent/records/types.ts`` (the record kinds, ``AGENT_WIRE_PROTOCOL_VERSION``
1.4), ``agent/context/index.ts`` (how the history is rebuilt from them), ``kosong/src/usage.ts``
(``TokenUsage``) and ``agent/compaction/`` (``CompactionResult``). The first line is
``{type: metadata, protocol_version, created_at}``; each later line one flat record ``{type, ..., time}``.

How the history is rebuilt (``ContextMemory``):

- ``config.update`` / ``profile.bind`` with ``systemPrompt``: the system prompt (a system message;
  a changed one replaces it, a recorded edit);
- ``context.append_message``: a message (user, assistant, tool) appended, unless a tool exchange
  is open: then it waits until the last result of that exchange (``deferredMessages``);
- ``context.append_loop_event``: ``step.begin`` opens an assistant message (one model call),
  ``content.part`` adds its text or ``think`` part, ``tool.call`` a tool call, ``tool.result``
  appends the tool message, ``step.end`` closes it with the call's ``usage``;
- ``usage.record`` {model, usage, usageScope}: ``turn`` = the usage of the step just ended (the
  same figures as its ``step.end``), ``session``/absent = a call outside the loop (a compaction).
  ``TokenUsage`` splits the prompt: ``inputOther`` + ``inputCacheRead`` + ``inputCacheCreation``
  is everything the call read (``inputTotal``), ``output`` its completion: ground truth per call;
- ``context.apply_compaction`` {summary, contextSummary, compactedCount, tokensBefore, tokensAfter,
  keptUserMessageCount, keptHeadUserMessageCount}: the history becomes the kept user messages and
  a user-role summary (``contextSummary``): a recorded compaction (edit + summary). Without
  ``keptUserMessageCount`` (older records) the summary replaced the first ``compactedCount``
  messages. The agent may have cut a kept user message to its budget: ctxf keeps it whole;
- ``context.clear``: the history emptied; ``context.undo`` {count}: the newest messages back to the
  ``count``-th real user input removed (stopping at a compaction summary): recorded edits.

Everything else is the agent's own state or a trace (``llm.request`` once per outbound request,
retries included; ``llm.tools_snapshot`` the tool table sent, kept as the session's tools;
``turn.*``, ``permission.*``, ``token_counting.*`` ...): counted in the metadata. A record kind not
known here is skipped and counted. A step that ended with no content, no tool call and no usage (a
cancelled request) is no model call the log can show: counted, not kept.

A journal of ``agents/<id>/`` other than ``main`` is a sub-agent: its own session, whose parent
is the session's main agent when ``state.json`` (``agents[id].parentAgentId``) says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..records import KIND_COMPACTION_SUMMARY, Message, Session, ToolCall, Usage, history_edit, position_runs
from ._sniffing import head_jsonl_records, looks_like_jsonl, mostly
from ._text import title_line
from .base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    as_int,
    as_list,
    as_str,
    epoch_iso,
    first_jsonl_record,
    iter_jsonl,
    json_text,
    register,
    text_of,
)

SOURCE = "kimi-code d723cc47 (packages/agent-core, wire protocol 1.4)"
# Records that are state or traces, not the conversation (agent-core records/types.ts and
# agent-core-v2's wire manifest, protocol 1.5).
STATE_RECORDS = frozenset({
    "forked", "turn.prompt", "turn.steer", "turn.cancel", "turn.ended", "config.update", "profile.bind",
    "tools.reset_active_tools", "permission.set_mode", "permission.record_approval_result", "full_compaction.begin",
    "full_compaction.cancel", "full_compaction.complete", "micro_compaction.apply", "plan_mode.enter",
    "plan_mode.cancel", "plan_mode.exit", "swarm_mode.enter", "swarm_mode.exit", "tower_mode.enter",
    "tower_mode.exit", "tools.register_user_tool", "tools.unregister_user_tool", "tools.set_active_tools",
    "tools.update_store", "context.update_token_count", "goal.create", "goal.update", "goal.clear",
    "llm.tools_snapshot", "llm.request", "mcp.tools_discovered", "plugin.session_start", "runtime.set_binding",
    "token_counting.measured", "token_counting.rebased", "token_counting.truncated", "token_counting.turn_recorded",
    "cron.add", "cron.cursor", "cron.delete", "interaction.request", "interaction.resolved", "plan.revision",
    "prompt.accepted", "task.started", "task.terminated",
})
CONTEXT_RECORDS = frozenset({"context.append_message", "context.append_loop_event", "context.apply_compaction",
                             "context.clear", "context.undo", "usage.record"})
KNOWN = STATE_RECORDS | CONTEXT_RECORDS
TRIMMED = ("[trimmed]", "[trimmed for fixture]")


def _is_record(r: Any) -> bool:
    return isinstance(r, dict) and (r.get("type") in KNOWN or r.get("type") == "metadata")


def usage_of(u: Any) -> Usage | None:
    """A ``TokenUsage`` as ctxf's usage: the prompt is inputOther + inputCacheRead + inputCacheCreation."""
    d = as_dict(u)
    other, out, read, made = (as_int(d.get(k)) for k in ("inputOther", "output", "inputCacheRead",
                                                         "inputCacheCreation"))
    if other is None and read is None and made is None:
        return None
    prompt = (other or 0) + (read or 0) + (made or 0)
    if not prompt and not out:
        return None  # zero usage (a content filter): no recorded call figures
    return Usage(prompt_tokens=prompt, completion_tokens=out, cache_read_tokens=read, cache_creation_tokens=made)


@dataclass
class _Step:
    """An assistant message being built from loop events."""

    timestamp: str | None
    meta: dict[str, Any]
    text: list[str] = field(default_factory=list)
    parts: list[dict[str, Any]] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    model: str | None = None

    def empty(self) -> bool:
        return not self.text and not self.parts and not self.calls and self.usage is None

    def message(self) -> Message:
        return Message(role="assistant", text="".join(self.text), tool_calls=tuple(self.calls),
                       parts=tuple(self.parts), usage=self.usage, timestamp=self.timestamp, model=self.model,
                       meta=self.meta)


@dataclass
class _Edit:
    type: str
    action: str
    removed: list[int]  # slot indices
    text: str
    figures: dict[str, Any]
    source: str


class _Journal:
    def __init__(self, ctx: ImportContext) -> None:
        self.ctx = ctx
        self.slots: list[Any] = []  # Message | _Step | _Edit, in order
        self.live: list[int] = []  # slot indices in Kimi's history
        self.user_real: set[int] = set()  # slots that are real user input
        self.summaries: set[int] = set()
        self.steps: dict[str, int] = {}  # open step uuid -> slot
        self.last_step: int | None = None
        self.pending: set[str] = set()
        self.deferred: list[Message] = []
        self.system: str | None = None
        self.model: str | None = None
        self.models: list[str] = []
        self.counts: dict[str, int] = {}
        self.tools: list[Any] | None = None
        self.tool_tables = 0
        self.requests = {"loop": 0, "compaction": 0, "retries": 0}
        self.other_calls: list[dict[str, Any]] = []
        self.usage_records = {"turn": 0, "matched": 0}
        self.turns_ended: list[dict[str, Any]] = []
        self.token_counts: list[dict[str, Any]] = []
        self.prompt_origins: list[str] = []
        self.protocol: str | None = None
        self.created_at: str | None = None
        self.compactions = 0
        self.trimmed = 0
        self.agent_ids: set[str] = set()

    def bump(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def push(self, item: Any, *, real_user: bool = False) -> None:
        self.live.append(len(self.slots))
        if real_user:
            self.user_real.add(len(self.slots))
        self.slots.append(item)

    def note_trim(self, text: str) -> None:
        if any(t in text for t in TRIMMED):
            self.trimmed += 1

    def record(self, r: dict[str, Any]) -> None:
        t = r["type"]
        ts = epoch_iso(r["time"] / 1000) if isinstance(r.get("time"), (int, float)) else None
        if isinstance(r.get("agentId"), str):
            self.agent_ids.add(r["agentId"])
        if t not in KNOWN and t != "metadata":
            self.ctx.skip(f"unknown record {t!r}", unknown=True)
            return
        self.bump(t)
        if t == "metadata":
            self.protocol = as_str(r.get("protocol_version"))
            self.created_at = (epoch_iso(r["created_at"] / 1000) if isinstance(r.get("created_at"), (int, float))
                               else None)
        elif t in ("config.update", "profile.bind"):
            prompt = as_str(r.get("systemPrompt"))
            if as_str(r.get("modelAlias")):
                self.model = r["modelAlias"]
            if prompt is not None and prompt != self.system:
                old = [i for i in self.live if isinstance(self.slots[i], Message) and self.slots[i].role == "system"]
                if old:
                    self.edit(_Edit("system_prompt", "evicted", old, "Kimi Code replaced its system prompt", {},
                                    f"kimi_code:{t}.systemPrompt"))
                self.system = prompt
                self.note_trim(prompt)
                self.live.insert(0, len(self.slots))
                self.slots.append(Message(role="system", text=prompt, timestamp=ts, meta={"source": t}))
        elif t == "turn.prompt":
            self.prompt_origins.append(str(as_dict(r.get("origin")).get("kind")))
            if as_dict(r.get("origin")).get("name") == "subagent":
                self.counts["subagent prompt"] = 1
        elif t == "context.append_message":
            self.append_message(as_dict(r.get("message")), ts)
        elif t == "context.append_loop_event":
            self.loop_event(as_dict(r.get("event")), ts)
        elif t == "usage.record":
            self.usage_record(r, ts)
        elif t == "context.apply_compaction":
            self.compaction(r, ts)
        elif t == "context.clear":
            self.edit(_Edit("clear", "evicted", list(self.live), "Kimi Code cleared the context", {},
                            "kimi_code:context.clear"))
            self.live, self.pending, self.deferred, self.steps = [], set(), [], {}
        elif t == "context.undo":
            self.undo(as_int(r.get("count")) or 0)
        elif t == "llm.request":
            kind = "compaction" if r.get("kind") == "compaction" else "loop"
            self.requests[kind] += 1
            if r.get("attempt") is not None:
                self.requests["retries"] += 1
            if as_str(r.get("model")) and r["model"] not in self.models:
                self.models.append(r["model"])
        elif t == "llm.tools_snapshot":
            self.tool_tables += 1
            self.tools = [x for x in as_list(r.get("tools")) if isinstance(x, dict)]
        elif t == "turn.ended":
            self.turns_ended.append({"turn": r.get("turnId"), "reason": r.get("reason")})
        elif t.startswith("token_counting."):
            self.token_counts.append({"type": t, "length": r.get("length"), "tokens": r.get("tokens")})

    def append_message(self, m: dict[str, Any], ts: str | None) -> None:
        role = m.get("role")
        if role not in ("user", "assistant", "tool", "system"):
            raise ValueError(f"a context message's role must be user, assistant, tool or system, not {role!r}")
        content = m.get("content")
        text, parts = self.content(content)
        calls = tuple(ToolCall(name=str(c.get("name") or as_dict(c.get("function")).get("name") or ""),
                               arguments=json_text(c.get("arguments")), id=as_str(c.get("id")))
                      for c in as_list(m.get("toolCalls")) if isinstance(c, dict))
        origin = as_dict(m.get("origin"))
        meta = {"origin": origin} if origin else {}
        msg = Message(role=role, text=text, parts=tuple(parts), tool_calls=calls,
                      tool_call_id=as_str(m.get("toolCallId")), timestamp=ts, meta=meta)
        if self.pending:
            self.deferred.append(msg)
            return
        self.push_message(msg)

    def push_message(self, msg: Message) -> None:
        kind = (msg.meta.get("origin") or {}).get("kind")
        real = msg.role == "user" and (kind is None or kind == "user"
                                       or (kind in ("skill_activation", "plugin_command")
                                           and msg.meta["origin"].get("trigger") == "user-slash"))
        self.push(msg, real_user=real)

    def content(self, content: Any) -> tuple[str, list[dict[str, Any]]]:
        if isinstance(content, str):
            self.note_trim(content)
            return content, []
        texts: list[str] = []
        parts: list[dict[str, Any]] = []
        for p in as_list(content):
            p = as_dict(p)
            if p.get("type") == "text":
                texts.append(str(p.get("text") or ""))
            elif p.get("type") == "think":
                parts.append({"type": "thinking", "text": str(p.get("think") or "")})
                self.note_trim(parts[-1]["text"])
            elif p.get("type") in ("image_url", "image"):
                parts.append({"type": "image"})
            else:
                parts.append({"type": str(p.get("type") or "part"), "omitted": True})
        text = "\n".join(texts)
        self.note_trim(text)
        return text, parts

    def loop_event(self, e: dict[str, Any], ts: str | None) -> None:
        et = e.get("type")
        self.bump(f"loop event {et}")
        if et == "step.begin":
            for cid in list(self.pending):  # closed in place as interrupted, as the agent does
                self.pending.discard(cid)
            step = _Step(ts, {"step_uuid": e.get("uuid"), "turn": e.get("turnId"), "step": e.get("step")},
                         model=self.model)
            self.steps[str(e.get("uuid"))] = len(self.slots)
            self.push(step)
        elif et == "step.end":
            at = self.steps.pop(str(e.get("uuid")), None)
            if at is None:
                raise ValueError("step.end for a step that was not begun")
            step = self.slots[at]
            step.usage = usage_of(e.get("usage"))
            if step.usage is not None:
                step.meta["usage_source"] = "step.end.usage"
            for k in ("finishReason", "messageId", "llmFirstTokenLatencyMs", "llmStreamDurationMs"):
                if e.get(k) is not None:
                    step.meta[k] = e[k]
            self.last_step = at
            self.flush()
        elif et in ("content.part", "tool.call"):
            at = self.steps.get(str(e.get("stepUuid")))
            if at is None:
                raise ValueError(f"{et} for a step that is not open")
            step = self.slots[at]
            if et == "content.part":
                text, parts = self.content([e.get("part")])
                step.text.append(text)
                step.parts.extend(parts)
            else:
                cid = str(e.get("toolCallId"))
                step.calls.append(ToolCall(name=str(e.get("name") or ""), arguments=json_text(e.get("args")), id=cid))
                self.pending.add(cid)
        elif et == "tool.result":
            cid = str(e.get("toolCallId"))
            if cid not in self.pending:
                self.bump("tool.result without an open call (dropped, as the agent does)")
                return
            res = as_dict(e.get("result"))
            out = res.get("output")
            text = text_of(out) if not isinstance(out, str) else out
            self.note_trim(text)
            meta = {k: res[k] for k in ("isError", "note", "truncated") if res.get(k) is not None}
            self.push(Message(role="tool", text=text, tool_call_id=cid, timestamp=ts, meta=meta))
            self.pending.discard(cid)
            self.flush()
        else:
            raise ValueError(f"unknown loop event {et!r}")

    def flush(self) -> None:
        if not self.pending and self.deferred:
            for m in self.deferred:
                self.push_message(m)
            self.deferred = []

    def usage_record(self, r: dict[str, Any], ts: str | None) -> None:
        u = usage_of(r.get("usage"))
        scope = r.get("usageScope")
        step = self.slots[self.last_step] if self.last_step is not None else None
        if scope == "turn":
            self.usage_records["turn"] += 1
            if step is not None and step.usage == u:
                self.usage_records["matched"] += 1
                return
            if step is not None and step.usage is None and u is not None:
                step.usage = u
                step.meta["usage_source"] = "usage.record (turn)"
                self.usage_records["matched"] += 1
                return
        self.other_calls.append({"model": r.get("model"), "scope": scope, "timestamp": ts,
                                 "usage": u.to_dict() if u else None})

    def edit(self, e: _Edit) -> None:
        self.slots.append(e)

    def compaction(self, r: dict[str, Any], ts: str | None) -> None:
        self.compactions += 1
        kept_n = as_int(r.get("keptUserMessageCount"))
        head_n = as_int(r.get("keptHeadUserMessageCount")) or 0
        users = [i for i in self.live if i in self.user_real and i not in self.summaries]
        if kept_n is None:  # older records: the summary replaced the first compactedCount messages
            n = as_int(r.get("compactedCount")) or 0
            removed, kept = self.live[:n], self.live[n:]
        else:
            keep = set(users[:head_n]) | set(users[len(users) - (kept_n - head_n):] if kept_n > head_n else [])
            # the system prompt is no message of Kimi's history: it stays
            removed = [i for i in self.live if i not in keep
                       and not (isinstance(self.slots[i], Message) and self.slots[i].role == "system")]
            kept = [i for i in self.live if i not in removed]
        figures = {k2: as_int(r.get(k1)) for k1, k2 in (("tokensBefore", "tokens_before"),
                                                        ("tokensAfter", "tokens_after"),
                                                        ("compactedCount", "compacted_count"),
                                                        ("keptUserMessageCount", "kept_user_messages"),
                                                        ("droppedCount", "dropped_count"))
                   if as_int(r.get(k1)) is not None}
        self.edit(_Edit("compaction", "summarized", removed,
                        f"Kimi Code compacted the context: {len(removed)} message(s) summarized"
                        + (f", {kept_n} user message(s) kept" if kept_n is not None else "")
                        + (f" ({figures['tokens_before']:,} tokens before)" if "tokens_before" in figures else ""),
                        figures, "kimi_code:context.apply_compaction"))
        self.live = kept
        text = as_str(r.get("contextSummary")) or str(r.get("summary") or "")
        meta: dict[str, Any] = {"source": "context.apply_compaction", **figures}
        calls = [c for c in self.other_calls if not c.get("attached")]
        if calls:  # the compaction call's usage, recorded just before
            calls[-1]["attached"] = True
            meta["compaction_call_usage"] = calls[-1]["usage"]
        self.summaries.add(len(self.slots))
        self.push(Message(role="user", kind=KIND_COMPACTION_SUMMARY, text=text, timestamp=ts, meta=meta))
        self.pending, self.deferred, self.steps = set(), [], {}

    def undo(self, count: int) -> None:
        removed, users = [], 0
        for i in reversed(self.live):
            item = self.slots[i]
            if isinstance(item, Message) and (item.meta.get("origin") or {}).get("kind") == "injection":
                continue
            if i in self.summaries or (isinstance(item, Message) and item.role == "system"):
                break
            removed.append(i)
            if i in self.user_real:
                users += 1
                if users >= count:
                    break
        self.live = [i for i in self.live if i not in removed]
        self.edit(_Edit("undo", "evicted", sorted(removed), f"Kimi Code undid {users} prompt(s): "
                        f"{len(removed)} message(s) left the context", {"count": count}, "kimi_code:context.undo"))

    def messages(self) -> tuple[list[Message], int]:
        """The slots as messages (empty steps dropped), edits with their ranges in final positions."""
        pos: dict[int, int] = {}
        out: list[Message] = []
        empty = 0
        for i, item in enumerate(self.slots):
            if isinstance(item, _Step):
                if item.empty():
                    empty += 1
                    continue
                pos[i] = len(out)
                out.append(item.message())
            elif isinstance(item, _Edit):
                ranges = position_runs(sorted(pos[j] for j in item.removed if j in pos))
                out.append(history_edit(item.type, item.action, ranges, item.source, item.text, **item.figures))
            else:
                pos[i] = len(out)
                out.append(item)
        return out, empty


def _state_file(path: Path) -> Path:
    """``<session>/state.json`` for ``<session>/agents/<id>/wire.jsonl``; else a ``state.json`` beside."""
    if path.parent.parent.name == "agents":
        return path.parent.parent.parent / "state.json"
    return path.parent / "state.json"


@register
class KimiCode(Importer):
    """Kimi Code CLI wire journals (protocol 1.x) with the session's state.json."""

    name = "kimi_code"
    description = ("Kimi Code CLI wire journals (~/.kimi-code/sessions/<workdir>/session_<id>/agents/<agent>/"
                   "wire.jsonl, protocol 1.4) with the session's state.json")
    extensions = (".jsonl",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        if not looks_like_jsonl(path, head):
            return False
        first = first_jsonl_record(head)
        if not (first and first.get("type") == "metadata" and isinstance(first.get("protocol_version"), str)):
            return False
        records = head_jsonl_records(head)
        return len(records) > 1 and mostly(records, _is_record)

    def sidecars(self, path: Path) -> list[Path]:
        p = _state_file(path)
        return [p] if p.is_file() else []

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        j = _Journal(ctx)
        for line, r in iter_jsonl(path, ctx):
            try:
                if not isinstance(r, dict) or not isinstance(r.get("type"), str):
                    raise TypeError("a wire record must be an object with a type")
                j.record(r)
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what="record", line=line)
        messages, empty = j.messages()
        yield self._session(path, ctx, j, messages, empty)

    def _session(self, path: Path, ctx: ImportContext, j: _Journal, messages: list[Message], empty: int) -> Session:
        agent = path.parent.name if path.parent.parent.name == "agents" else None
        if agent is None and len(j.agent_ids) == 1:
            agent = next(iter(j.agent_ids))
        subagent = bool(j.counts.get("subagent prompt")) or (agent is not None and agent != "main")
        state, session_id, parent = self._state(path, ctx, agent, subagent)
        metadata: dict[str, Any] = {
            "agent": "kimi-code",
            "layout": "wire.jsonl",
            "protocol_version": j.protocol,
            "source_checked": SOURCE,
            "agent_id": agent,
            "subagent": subagent or None,
            "records": j.counts,
            "requests": j.requests,
            "models": j.models,
            "tools": j.tools,
            "tool_tables": j.tool_tables if j.tool_tables > 1 else None,
            "usage_records": j.usage_records,
            "calls_without_a_step": [{k: v for k, v in c.items() if k != "attached"} for c in j.other_calls],
            "empty_steps": empty or None,
            "turns_ended": j.turns_ended,
            "token_counting": j.token_counts,
            "compactions": j.compactions or None,
            "trimmed_texts": j.trimmed or None,
            "state": state,
        }
        if j.trimmed:
            ctx.warn(f"{j.trimmed} text(s) carry a '[trimmed]' marker: the journal was cut after it was written "
                     "(a fixture), so the windows hold less than the calls read")
        first = next((m for m in messages if m.role == "user" and m.text.strip()), None)
        title = as_str(as_dict(state).get("title")) if not subagent else None
        ext = f"{session_id}/{agent}" if session_id and subagent else session_id or f"kimi:{path.stem}"
        return Session(
            external_id=ext,
            format=self.name,
            messages=messages,
            title=title or (title_line(first.text) if first else None),
            model=j.models[0] if j.models else j.model,
            started_at=j.created_at,
            parent_external_id=parent,
            global_id=session_id is not None,
            metadata={k: v for k, v in metadata.items() if v not in (None, {}, [], "")},
        )

    @staticmethod
    def _state(path: Path, ctx: ImportContext, agent: str | None,
               subagent: bool) -> tuple[dict[str, Any] | None, str | None, str | None]:
        """The state.json entry of this journal's agent (None when it names no such agent), the
        session id and the parent session's external id."""
        p = _state_file(path)
        if not p.is_file():
            return None, None, None
        try:
            state = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            ctx.warn(f"{p.name} beside the journal could not be read ({e}); read the journal alone")
            return None, None, None
        agents = as_dict(as_dict(state).get("agents"))
        key = agent if agent in agents else ("main" if agent is None and not subagent and "main" in agents else None)
        if key is None:
            return {"note": f"{p.name} beside the journal names no agent of it (it lists {sorted(agents)})"}, None, None
        entry = as_dict(agents[key])
        home = str(entry.get("homedir") or "")
        sid = next((part[len("session_"):] for part in Path(home).parts if part.startswith("session_")), None)
        if sid is None and path.parent.parent.name == "agents" \
                and path.parent.parent.parent.name.startswith("session_"):
            sid = path.parent.parent.parent.name[len("session_"):]
        parent = None
        if entry.get("parentAgentId") and sid:
            pa = str(entry["parentAgentId"])
            parent = sid if pa == "main" else f"{sid}/{pa}"
        kept = {k: state.get(k) for k in ("title", "createdAt", "updatedAt", "workDir", "lastPrompt")}
        kept["agent"] = {"id": key, "type": entry.get("type"), "parent_agent_id": entry.get("parentAgentId")}
        return {k: v for k, v in kept.items() if v is not None}, sid, parent


__all__ = ["KimiCode", "usage_of"]
