"""The ``letta`` importer: Letta agent files (``.af``), one session per agent.

Checked against the three schema generations of the corpus (letta-ai/agent-file) and Letta's
source (letta-ai/letta @ 56ba9c25552605eec89de8ed3dc6394b625c1993, the last commit before the
repository was archived: ``letta/schemas/agent_file.py``, ``letta/system.py``,
``letta/prompts/prompt_generator.py``):

- 0.6.47 and 0.7.10: one agent object at the top level {agent_type, core_memory, llm_config,
  messages[], in_context_message_indices (ints into messages), tools, tool_rules, system, version,
  ...}. ``messages`` holds every stored message, those outside the window included.
- 1.0: {agents[], groups[], blocks[], tools[], files, sources, mcp_servers, skills, metadata}; each
  agent has ``messages`` (string ids ``message-N``) and ``in_context_message_ids``, its blocks and
  tools by id (``block_ids``, ``tool_ids``). Letta exports only the messages of ``message_ids``
  (``AgentSchema.from_agent_state``), in their in-context order.

What the model saw:

- The window at the end of the session is the in-context list (``in_context_message_indices`` /
  ``_ids``): the session's ``metadata["final_window"]`` holds those messages' positions, and
  ``ctxf check`` (``final_window``) sets the replay's window at the end beside it. Stored messages
  outside it left the window: before a summary, Letta's summariser evicted them (its summary is a
  user message holding a ``system_alert`` JSON, "Note: prior messages ... have been hidden from view
  due to conversation memory constraints. The following is a summary ...",
  ``system.package_summarize_message``): a ``history_edit`` marker (type ``compaction``,
  summarized) takes them out just before that summary, which follows as the edit's
  ``compaction_summary``. Those after the last summary (a workflow agent's
  ``message_buffer_autoclear``) left at a point the file does not record: an ``eviction`` marker
  at the end of the session takes them out, saying so. A summary whose evicted messages are not in
  the file (a 1.0 export holds only the window) is a ``compaction_summary`` of its own, with the
  counts its text gives.
- The memory blocks (core memory) are compiled into the system message
  (``PromptGenerator.compile_system_message_async``: ``Memory.compile`` renders each block, the
  memory metadata follows, in place of ``{CORE_MEMORY}`` or appended): the stored system message is
  that compiled text, as last rebuilt. ``metadata["memory_blocks"]`` lists the blocks and whether
  the system message holds each one's value (a block edited after the last rebuild is not).
- The tools' JSON schemas go to the provider as the request's tools: ``metadata["tools"]``.
- ``llm_config`` gives the model, ``context_window`` (the limit Letta ran the agent under, and
  summarises before, whatever the model's own) and ``max_tokens`` (the output it reserved):
  ``metadata["context_window"]`` / ``["max_output_tokens"]``, which a replay under the session's own
  model uses in place of the table's (``replay.spec.with_log_limit``; its header says so).

Groups (1.0): each agent is its own session; a group's manager and members are listed in each
member's ``metadata["group"]``, and a sleep-time agent (``manager_type`` sleeptime) is a child of
its manager (``parent_external_id``): it runs in the background on the manager's transcript.

No token usage anywhere in the format.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import KIND_COMPACTION_SUMMARY, Message, Session, ToolCall, history_edit, position_runs
from ._sniffing import partial_json
from .base import ImportContext, Importer, as_dict, as_int, as_list, as_str, json_text, load_json, register

SOURCE = "letta in_context_message_ids"
# The summariser's alert (letta/system.py package_summarize_message*): every variant says this.
_HIDDEN = "hidden from view"
# The counts its variants give: "prior messages (H of T total messages)", "N messages from the
# beginning", "N prior messages with the user", "a summary of the previous S messages".
_COUNTS = (("hidden", re.compile(r"prior messages \((\d+) of \d+ total messages\)")),
           ("total", re.compile(r"prior messages \(\d+ of (\d+) total messages\)")),
           ("hidden", re.compile(r"Note: (\d+) (?:messages from the beginning|prior messages with the user)")),
           ("summarized", re.compile(r"summary of the previous (\d+) messages")))


def _is_pre_1_0(doc: Any) -> bool:
    return isinstance(doc, dict) and "agent_type" in doc and "llm_config" in doc and (
        "in_context_message_indices" in doc or "core_memory" in doc)


def _is_1_0(doc: Any) -> bool:
    if not isinstance(doc, dict) or not isinstance(doc.get("agents"), list) or not doc["agents"]:
        return False
    first = doc["agents"][0]
    return isinstance(first, dict) and "tool_ids" in first and "block_ids" in first


def summary_alert(text: str) -> dict[str, Any] | None:
    """The ``system_alert`` of Letta's summariser a user message's text holds, or None."""
    if _HIDDEN not in text or "system_alert" not in text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or value.get("type") != "system_alert":
        return None
    msg = value.get("message")
    return value if isinstance(msg, str) and _HIDDEN in msg else None


def rendered_in(value: Any, system_text: str) -> bool:
    """Whether a memory block's value is in the system message as ``Memory.compile`` renders it:
    as it is, or line-numbered (``{i}→ {line}``: sleeptime, memgpt_v2 and letta_v1 agents on
    Anthropic models, ``_render_memory_blocks_line_numbered``)."""
    if not isinstance(value, str):
        return False
    numbered = "".join(f"{i}→ {line}\n" for i, line in enumerate(value.split("\n"), start=1)) if value else ""
    return value.strip() in system_text or (bool(numbered) and numbered in system_text)


def _by_ids(ids: Any, table: dict[Any, dict[str, Any]], what: str, ctx: ImportContext) -> list[dict[str, Any]]:
    """The records of a 1.0 file's top-level list (blocks, tools) an agent names by id; an id the
    file holds no record of is skipped and counted."""
    out = []
    for i in as_list(ids):
        if i in table:
            out.append(table[i])
        else:
            ctx.skip(f"{what} id without a {what}")
    return out


@register
class LettaAgentFile(Importer):
    name = "letta"
    description = "Letta agent file (.af, schema 0.6.47, 0.7.10, 1.0): one session per agent"
    extensions = (".af",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        doc = partial_json(head)
        return _is_pre_1_0(doc) or _is_1_0(doc)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        doc = load_json(path, ctx)
        if _is_pre_1_0(doc):
            yield from self._pre_1_0(doc, ctx)
        elif _is_1_0(doc):
            yield from self._v1(doc, ctx)
        else:
            raise InputError("not a Letta agent file", where=str(path),
                             hint="expected an agent object (schema < 1.0) or {agents: [...]} (schema 1.0)")

    # ------------------------------------------------------------ schema generations

    def _pre_1_0(self, doc: dict[str, Any], ctx: ImportContext) -> Iterator[Session]:
        raw = as_list(doc.get("messages"))
        indices = [i for i in as_list(doc.get("in_context_message_indices")) if type(i) is int]
        bad = [i for i in indices if not 0 <= i < len(raw)]
        if bad:
            ctx.warn(f"in_context_message_indices name {len(bad)} message(s) the file does not hold "
                     f"({bad[:5]}): left out of the final window")
        blocks = [(as_str(b.get("label")) or "?", b.get("value")) for b in as_list(doc.get("core_memory"))
                  if isinstance(b, dict)]
        tools = [t for t in as_list(doc.get("tools")) if isinstance(t, dict)]
        name = as_str(doc.get("name")) or "agent"
        yield self._session(ctx, ext=name, name=name, doc=doc, agent=doc, raw=raw,
                            in_context=[i for i in indices if 0 <= i < len(raw)], blocks=blocks, tools=tools,
                            version=as_str(doc.get("version")) or "pre-1.0", extra={})

    def _v1(self, doc: dict[str, Any], ctx: ImportContext) -> Iterator[Session]:
        blocks_by_id = {b.get("id"): b for b in as_list(doc.get("blocks")) if isinstance(b, dict)}
        tools_by_id = {t.get("id"): t for t in as_list(doc.get("tools")) if isinstance(t, dict)}
        groups = [g for g in as_list(doc.get("groups")) if isinstance(g, dict)]
        agents = as_list(doc.get("agents"))
        names = {a.get("id"): as_str(a.get("name")) for a in agents if isinstance(a, dict)}
        for idx, agent in enumerate(agents):
            with ctx.record("agent", index=idx):
                if not isinstance(agent, dict):
                    ctx.skip("malformed agent")
                    continue
                aid = as_str(agent.get("id")) or f"agent-{idx}"
                raw = as_list(agent.get("messages"))
                position = {m.get("id"): i for i, m in enumerate(raw) if isinstance(m, dict) and as_str(m.get("id"))}
                ids = [i for i in as_list(agent.get("in_context_message_ids")) if isinstance(i, str)]
                missing = [i for i in ids if i not in position]
                if missing:
                    ctx.warn(f"agent {aid}: in_context_message_ids name {len(missing)} message(s) the file does "
                             f"not hold ({missing[:3]}): left out of the final window")
                blocks = [(as_str(b.get("label")) or "?", b.get("value"))
                          for b in _by_ids(agent.get("block_ids"), blocks_by_id, "block", ctx)]
                tools = _by_ids(agent.get("tool_ids"), tools_by_id, "tool", ctx)
                extra: dict[str, Any] = {}
                parent = None
                for g in groups:
                    mc = as_dict(g.get("manager_config"))
                    manager = mc.get("manager_agent_id")
                    members = [m for m in as_list(g.get("agent_ids")) if isinstance(m, str)]
                    if aid != manager and aid not in members:
                        continue
                    extra["group"] = {"id": g.get("id"), "manager_type": mc.get("manager_type"),
                                      "manager": manager, "members": members,
                                      "role": "manager" if aid == manager else "member",
                                      **({"sleeptime_agent_frequency": mc["sleeptime_agent_frequency"]}
                                         if as_int(mc.get("sleeptime_agent_frequency")) is not None else {})}
                    if aid != manager and isinstance(manager, str):
                        parent = manager
                yield self._session(ctx, ext=aid, name=names.get(aid) or aid, doc=doc, agent=agent, raw=raw,
                                    in_context=[position[i] for i in ids if i in position], blocks=blocks,
                                    tools=tools, version="1.0", extra=extra, parent=parent)

    # ------------------------------------------------------------ one agent

    def _session(self, ctx: ImportContext, *, ext: str, name: str, doc: dict[str, Any], agent: dict[str, Any],
                 raw: list[Any], in_context: list[int], blocks: list[tuple[str, Any]], tools: list[dict[str, Any]],
                 version: str, extra: dict[str, Any], parent: str | None = None) -> Session:
        llm = as_dict(agent.get("llm_config"))
        model = as_str(llm.get("model"))
        window = as_int(llm.get("context_window"))
        max_out = as_int(llm.get("max_tokens"))
        kept = set(in_context)
        # Each stored message: converted, or None (skipped and counted).
        converted: list[Message | None] = []
        for i, m in enumerate(raw):
            msg = None
            with ctx.record("message", index=i):
                msg = self._message(m, ctx, model)
            converted.append(msg)
        summaries = [i for i, m in enumerate(converted) if m is not None and m.kind == KIND_COMPACTION_SUMMARY]
        out: list[Message] = []
        final: list[int] = []  # positions in ``out`` of the in-context messages
        position: dict[int, int] = {}  # stored index -> position in ``out``
        pending: list[int] = []  # positions of stored messages outside the window, not yet taken out
        for i, m in enumerate(converted):
            if m is None:
                continue
            if i in summaries and pending:
                out.append(history_edit(
                    "compaction", "summarized", position_runs(pending), SOURCE,
                    f"Letta's summariser took {len(pending)} message(s) out of the window (the summary follows; "
                    "the file's in-context list leaves them out)", removed=len(pending)))
                pending = []
            position[i] = len(out)
            if i not in kept:
                pending.append(len(out))
            out.append(m)
        if pending:
            autoclear = bool(agent.get("message_buffer_autoclear"))
            out.append(history_edit(
                "eviction", "evicted", position_runs(pending), SOURCE,
                f"{len(pending)} stored message(s) are outside Letta's in-context list at export"
                + (" (message_buffer_autoclear: the buffer is cleared after each run)" if autoclear else "")
                + "; the file does not record when they left", removed=len(pending),
                rests_on="the agent file's in-context list, which leaves them out at export"
                + ("; message_buffer_autoclear clears Letta's buffer after each run" if autoclear else "")))
        final = [position[i] for i in in_context if i in position]
        if [position[i] for i in sorted(kept) if i in position] != final:
            ctx.warn(f"agent {ext}: the in-context order differs from the stored order; the session keeps "
                     "the stored order")
        system_text = next((m.text for m in out if m.role == "system"), "")
        memory = [{"label": label, "chars": len(value) if isinstance(value, str) else None,
                   "in_system_message": rendered_in(value, system_text)} for label, value in blocks]
        if any(not b["in_system_message"] for b in memory):
            ctx.warn(f"agent {ext}: {sum(not b['in_system_message'] for b in memory)} memory block(s) are not in "
                     "the stored system message (edited after Letta last rebuilt it?): the window holds the "
                     "stored text")
        schemas = [{"type": "function", "function": t["json_schema"]} for t in tools
                   if isinstance(t.get("json_schema"), dict)]
        metadata: dict[str, Any] = {
            "agent": "letta",
            "schema_version": version,
            "agent_type": as_str(agent.get("agent_type")),
            "agent_name": name,
            "stored_messages": len(raw),
            "in_context_messages": len(final),
            "final_window": final,
            "final_window_source": SOURCE if version == "1.0" else "letta in_context_message_indices",
            "memory_blocks": memory,
            "tool_names": [as_str(t.get("name")) for t in tools],
            **({"context_window": window, "limit_source": "Letta llm_config.context_window"
                + (", max_tokens" if max_out is not None else "")} if window else {}),
            **({"max_output_tokens": max_out} if max_out is not None and window else {}),
            **({"tools": schemas} if schemas else {}),
            **({"summaries": len(summaries)} if summaries else {}),
            **extra,
        }
        if agent.get("message_buffer_autoclear"):
            metadata["message_buffer_autoclear"] = True
        started = next((m.timestamp for m in out if m.timestamp), None) or as_str(agent.get("created_at")) \
            or as_str(doc.get("created_at"))
        return Session(external_id=ext, format=self.name, messages=out, title=name, model=model,
                       started_at=started, parent_external_id=parent, metadata=metadata)

    def _message(self, m: Any, ctx: ImportContext, agent_model: str | None) -> Message | None:
        if not isinstance(m, dict):
            ctx.skip("malformed message")
            return None
        role = m.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            ctx.skip(f"message role {role!r}", unknown=True)
            return None
        texts: list[str] = []
        parts: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        content = m.get("content")
        if isinstance(content, str):
            texts.append(content)
        for p in as_list(content):
            kind = p.get("type") if isinstance(p, dict) else None
            if kind == "text" and isinstance(p.get("text"), str):
                texts.append(p["text"])
            elif kind == "reasoning" and isinstance(p.get("reasoning"), str):
                parts.append({"type": "thinking", "text": p["reasoning"]})
            elif kind in ("redacted_reasoning", "omitted_reasoning"):
                parts.append({"type": "redacted_thinking"})
            elif kind == "summarized_reasoning":
                summary = "\n".join(s.get("text", "") for s in as_list(p.get("summary")) if isinstance(s, dict))
                parts.append({"type": "thinking", "text": summary})
            elif kind == "tool_call" and isinstance(p.get("name"), str):
                calls.append(ToolCall(name=p["name"], arguments=json_text(p.get("input")), id=as_str(p.get("id"))))
            else:
                ctx.skip(f"content part {kind!r}", unknown=True)
        for c in as_list(m.get("tool_calls")):
            fn = as_dict(c.get("function")) if isinstance(c, dict) else {}
            if not isinstance(fn.get("name"), str):
                ctx.skip("malformed tool call")
                continue
            calls.append(ToolCall(name=fn["name"], arguments=json_text(fn.get("arguments")), id=as_str(c.get("id"))))
        text = "\n".join(texts)
        kind = "message"
        meta: dict[str, Any] = {}
        if as_str(m.get("id")):
            meta["letta_id"] = m["id"]
        if role == "user":
            alert = summary_alert(text)
            if alert is not None:
                kind = KIND_COMPACTION_SUMMARY
                said = {k: int(hit.group(1)) for k, rx in _COUNTS if (hit := rx.search(alert["message"]))}
                meta["letta_summary"] = {**said,
                                         **{k: v for k, v in alert.items() if k in ("time", "compaction_stats")}}
        name = as_str(m.get("name")) if role == "tool" else None
        return Message(role=role, text=text, kind=kind, name=name, tool_calls=tuple(calls),
                       tool_call_id=as_str(m.get("tool_call_id")) if role == "tool" else None,
                       parts=tuple(parts), timestamp=as_str(m.get("created_at")),
                       model=(as_str(m.get("model")) or agent_model) if role == "assistant" else None, meta=meta)


__all__ = ["LettaAgentFile", "summary_alert"]
