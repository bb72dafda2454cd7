"""The Copilot CLI event stream (``events.jsonl``) as Messages, in one pass.

What the model saw, as ground truth: the system prompt of ``system.message`` (written again
before each user turn; an identical copy is the same prompt, a changed one replaces it: a
recorded edit), each user turn's ``transformedContent`` (the typed ``content`` stays in meta),
each reply (``assistant.message``: text, reasoning, tool requests; the chunks of one reply
share an ``apiCallId`` and become one message), each tool result's ``result.content``.

Recorded usage: ``outputTokens`` is the reply's completion tokens. ``assistant.usage`` (one
per API call, with input and cache tokens) is ephemeral, not written to disk by the CLI; when
a file has it anyway it is that call's usage. ``session.shutdown.modelMetrics`` holds per-model
sums over the session's requests, which give a call's prompt size only when the session made
one call. Its ``currentTokens`` / ``systemTokens`` / ``conversationTokens`` /
``toolDefinitionsTokens`` are the CLI's own count of its context at shutdown, no call's usage:
kept in the session metadata (``Stream.metadata``), saying what they measure.

Events of a sub-agent (``agentId``, or the deprecated ``parentToolCallId``) belong to another
conversation than the main window and are skipped and counted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ...records import (
    KIND_COMPACTION_SUMMARY,
    FieldTypeError,
    Message,
    ToolCall,
    Usage,
    history_edit,
    position_runs,
)
from .._text import title_line
from ..base import RECORD_ERRORS, ImportContext, as_dict, as_int, as_list, as_str, json_text, str_or_none

SOURCE = "copilot_cli"

# Events that carry nothing the model read (their content, if any, goes to the metadata).
QUIET = frozenset({
    "assistant.turn_start", "assistant.turn_end", "tool.execution_start", "session.info",
    "session.mode_changed", "session.idle", "assistant.idle", "session.warning", "session.error",
    "tool.execution_progress", "tool.execution_partial_result", "session.usage_info",
    "session.usage_checkpoint", "session.compaction_start", "session.title_changed",
    "session.context_changed", "session.workspace_file_changed", "session.plan_changed",
    "session.todos_changed", "hook.start", "hook.end", "abort", "session.resume",
})

CONTEXT_WHAT = (
    "Copilot CLI's own count of the tokens in its context window when the session ended "
    "(system prompt, non-system messages, tool definitions; its parts need not add up to the "
    "total): the size a next call would have read, not the recorded usage of any call"
)
METRICS_WHAT = (
    "per model, sums over every API request of the session (requests.count): inputTokens is "
    "everything the calls read (cache reads included: they are part of it), outputTokens what "
    "they wrote, cacheReadTokens / cacheWriteTokens the prompt-cache part"
)


class Stream:
    """Turns events into Messages (``out``) and gathers the session's metadata."""

    def __init__(self, ctx: ImportContext) -> None:
        self.ctx = ctx
        self.out: list[Message] = []
        self.live: list[int] = []  # positions of non-system messages still in the history
        self.system_at: int | None = None
        self.system_text: str | None = None
        self.model: str | None = None
        self.models: list[str] = []
        self.effort: str | None = None
        self.tool_names: dict[str, str] = {}
        self.types: Counter = Counter()
        self.start: dict[str, Any] = {}
        self.shutdown: dict[str, Any] | None = None
        self.task_complete: dict[str, Any] | None = None
        self.modes: list[str] = []
        self.turn: str | None = None
        self.pending: list[tuple[dict[str, Any], str | None, str | None]] = []  # chunks of one reply
        self.pending_line: int | None = None  # the line of its first chunk
        self.usage_events: list[dict[str, Any]] = []
        self.prev_id: str | None = None
        self.chain_breaks = 0
        self.subagent_events = 0
        self.first_ts: str | None = None
        self.title: str | None = None
        self.edits = 0
        self.failed_compactions = 0

    # ------------------------------------------------------------ dispatch

    def event(self, rec: dict[str, Any], line: int) -> None:
        t = rec.get("type")
        if not isinstance(t, str):
            raise TypeError(f"event type is {type(t).__name__}, not a string")
        data = as_dict(rec.get("data"))
        ts = str_or_none(rec.get("timestamp"))
        eid = str_or_none(rec.get("id"))
        parent = rec.get("parentId")
        if self.prev_id is not None and parent != self.prev_id:
            self.chain_breaks += 1
        self.prev_id = eid
        self.first_ts = self.first_ts or ts
        self.types[t] += 1
        if rec.get("agentId") is not None or data.get("parentToolCallId") is not None:
            self.subagent_events += 1
            self.ctx.skip("sub-agent event")
            return
        if t != "assistant.message":
            self.flush()
        if t == "assistant.message":
            self.assistant(data, ts, eid, line)
        elif t == "user.message":
            self.user(data, ts, eid)
        elif t == "system.message":
            self.system(data, ts, eid)
        elif t == "tool.execution_complete":
            self.tool_result(data, ts, eid)
        elif t == "tool.execution_start":
            call_id, name = str_or_none(data.get("toolCallId")), as_str(data.get("toolName"))
            if call_id and name:
                self.tool_names.setdefault(call_id, name)
            self.ctx.skip("tool.execution_start")
        elif t == "session.start":
            self.start = data
        elif t == "session.model_change":
            self.set_model(as_str(data.get("newModel")))
            self.effort = as_str(data.get("reasoningEffort")) or self.effort
        elif t == "session.mode_changed":
            if as_str(data.get("newMode")):
                self.modes.append(data["newMode"])
            self.ctx.skip(t)
        elif t == "assistant.turn_start":
            self.turn = str_or_none(data.get("turnId"))
            self.ctx.skip(t)
        elif t == "assistant.usage":
            self.usage_events.append(data)
        elif t == "session.shutdown":
            self.shutdown = data
        elif t == "session.task_complete":
            self.task_complete = {k: data[k] for k in ("success", "summary") if k in data}
        elif t == "session.truncation":
            self.truncation(data, ts, eid)
        elif t == "session.compaction_complete":
            self.compaction(data, ts, eid)
        elif t == "session.context_cleared":
            self.cleared(data, ts, eid)
        else:
            self.ctx.skip(t if t in QUIET else f"{t} (not read)", unknown=t not in QUIET)

    def set_model(self, model: str | None) -> None:
        if model:
            self.model = model
            if model not in self.models:
                self.models.append(model)

    def add(self, m: Message) -> None:
        if m.role != "system":
            self.live.append(len(self.out))
        self.out.append(m)

    # ------------------------------------------------------------ what the model read

    def system(self, data: dict[str, Any], ts: str | None, eid: str | None) -> None:
        text = data.get("content")
        if not isinstance(text, str):
            raise TypeError(f"system.message content is {type(text).__name__}, not a string")
        if text == self.system_text:
            self.ctx.skip("system.message (the same prompt again)")
            return
        role = "developer" if data.get("role") == "developer" else "system"
        if self.system_at is not None:
            # A changed prompt replaces the one before it: the next call reads the new one only.
            self.out.append(history_edit(
                "system_prompt", "evicted", [(self.system_at, self.system_at + 1)],
                f"{SOURCE}:system.message", "Copilot CLI sent a changed system prompt; the previous one left",
            ))
            self.edits += 1
        self.system_at = len(self.out)
        self.system_text = text
        meta = {"event_id": eid}
        if isinstance(data.get("metadata"), dict):
            meta["prompt_metadata"] = data["metadata"]
        self.out.append(Message(role=role, text=text, timestamp=ts, meta=meta))

    def user(self, data: dict[str, Any], ts: str | None, eid: str | None) -> None:
        typed = data.get("content")
        sent = data.get("transformedContent")
        text = sent if isinstance(sent, str) and sent else typed
        if not isinstance(text, str):
            raise TypeError(f"user.message content is {type(text).__name__}, not a string")
        from_sent = text is sent  # a bool: `if text is sent` would narrow text to sent's type
        meta: dict[str, Any] = {"event_id": eid, "text_source": "transformedContent" if from_sent else "content"}
        if from_sent:
            meta["typed_content"] = typed
        for key, name in (("interactionId", "interaction_id"), ("agentMode", "agent_mode"), ("source", "source"),
                          ("isAutopilotContinuation", "autopilot_continuation"), ("delivery", "delivery")):
            if data.get(key) not in (None, "", []):
                meta[name] = data[key]
        if as_list(data.get("attachments")):
            meta["attachments"] = data["attachments"]
        if self.title is None and isinstance(typed, str) and typed.strip():
            self.title = title_line(typed)
        self.add(Message(role="user", text=text, timestamp=ts, meta=meta))

    def assistant(self, data: dict[str, Any], ts: str | None, eid: str | None, line: int) -> None:
        api = as_str(data.get("apiCallId"))
        if self.pending and (api is None or as_str(self.pending[-1][0].get("apiCallId")) != api):
            self.flush()
        if not self.pending:
            self.pending_line = line
        self.pending.append((data, ts, eid))
        count = as_int(data.get("chunkCount"))
        if api is None or count in (None, 1) or as_int(data.get("chunkIndex")) == count - 1:
            self.flush()

    def flush(self) -> None:
        """The reply whose chunks are pending, as one assistant message; a reply of unexpected
        shape is skipped and counted at the line of its first chunk (not the event after it)."""
        if not self.pending:
            return
        chunks, self.pending = self.pending, []
        try:
            self._reply(chunks)
        except RECORD_ERRORS as e:
            self.ctx.bad_record(e, what="event", line=self.pending_line)

    def _reply(self, chunks: list[tuple[dict[str, Any], str | None, str | None]]) -> None:
        texts, calls, parts = [], [], []
        tokens: list[int] = []
        opaque = 0
        for data, _, _ in chunks:
            content = data.get("content")
            if content is not None and not isinstance(content, str):
                raise TypeError(f"assistant.message content is {type(content).__name__}, not a string")
            if content:
                texts.append(content)
            reasoning = data.get("reasoningText")
            if isinstance(reasoning, str) and reasoning:
                parts.append({"type": "thinking", "text": reasoning})
            for key in ("reasoningOpaque", "encryptedContent"):
                if isinstance(data.get(key), str):
                    opaque += len(data[key])
            for req in as_list(data.get("toolRequests")):
                req = as_dict(req)
                name = req.get("name")
                if not isinstance(name, str):
                    raise FieldTypeError("ToolCall", "name", name)
                call_id = str_or_none(req.get("toolCallId"))
                calls.append(ToolCall(name=name, arguments=json_text(req.get("arguments")), id=call_id))
                if call_id:
                    self.tool_names[call_id] = name
            n = as_int(data.get("outputTokens"))
            if n is not None:
                tokens.append(n)
        first, ts, eid = chunks[0]
        model = as_str(first.get("model")) or self.model
        self.set_model(model)
        meta: dict[str, Any] = {"event_id": eid}
        for key, name in (("messageId", "message_id"), ("requestId", "request_id"), ("apiCallId", "api_call_id"),
                          ("interactionId", "interaction_id"), ("phase", "phase")):
            if first.get(key) not in (None, ""):
                meta[name] = first[key]
        if self.turn is not None:
            meta["turn_id"] = self.turn
        if opaque:
            meta["reasoning_opaque_chars"] = opaque
        usage = None
        if len(chunks) > 1:
            meta["chunks"] = len(chunks)
            meta["chunk_output_tokens"] = tokens
        # One figure per reply; chunks that each carry one would be counted twice if summed.
        if len(tokens) == 1 or (tokens and len(set(tokens)) == 1):
            usage = Usage(completion_tokens=tokens[0])
        elif tokens:
            self.ctx.warn(f"reply {meta.get('message_id')}: its chunks carry different outputTokens {tokens}; "
                          "kept them in meta, recorded no usage for it")
        self.add(Message(role="assistant", text="\n".join(texts), tool_calls=tuple(calls), parts=tuple(parts),
                         usage=usage, timestamp=ts, model=model, meta=meta))

    def tool_result(self, data: dict[str, Any], ts: str | None, eid: str | None) -> None:
        call_id = str_or_none(data.get("toolCallId"))
        result = as_dict(data.get("result"))
        text = result.get("content")
        success = data.get("success")
        if not isinstance(text, str):
            error = as_dict(data.get("error"))
            text = m if isinstance(m := error.get("message"), str) else json_text(data.get("error"))
        meta: dict[str, Any] = {"event_id": eid, "success": success}
        if isinstance(result.get("detailedContent"), str) and result["detailedContent"] != text:
            meta["detailed_content_chars"] = len(result["detailedContent"])
        if data.get("error") is not None:
            meta["error"] = data["error"]
        self.set_model(as_str(data.get("model")))
        self.add(Message(role="tool", text=text, tool_call_id=call_id, name=self.tool_names.get(call_id or ""),
                         timestamp=ts, meta=meta))

    # ------------------------------------------------------------ recorded history edits

    def take(self, n: int | None) -> list[tuple[int, int]]:
        """The oldest ``n`` messages still in the history (all for None), as ranges; they leave it."""
        gone = self.live if n is None else self.live[:max(0, n)]
        self.live = [] if n is None else self.live[max(0, n):]
        return position_runs(gone)

    def _edit_count(self, n: int | None, what: str) -> int | None:
        if n is not None and n > len(self.live):
            self.ctx.warn(f"{what} removed {n} messages; only {len(self.live)} were in the history read so far")
        return n

    def truncation(self, data: dict[str, Any], ts: str | None, eid: str | None) -> None:
        n = self._edit_count(as_int(data.get("messagesRemovedDuringTruncation")), "session.truncation")
        if not n:
            self.ctx.skip("session.truncation (nothing removed)")
            return
        ranges = self.take(n)
        figures = _figures(data, tokens_before="preTruncationTokensInMessages",
                           tokens_after="postTruncationTokensInMessages",
                           tokens_removed="tokensRemovedDuringTruncation",
                           messages_before="preTruncationMessagesLength", messages_after="postTruncationMessagesLength",
                           token_limit="tokenLimit", performed_by="performedBy")
        self.out.append(history_edit("truncation", "evicted", ranges, f"{SOURCE}:session.truncation",
                                     f"Copilot CLI truncated the history: {n} oldest message(s) removed",
                                     event_id=eid, timestamp=ts, **figures))
        self.edits += 1

    def compaction(self, data: dict[str, Any], ts: str | None, eid: str | None) -> None:
        if data.get("success") is False:
            self.failed_compactions += 1
            self.ctx.skip("session.compaction_complete (failed)")
            return
        n = self._edit_count(as_int(data.get("messagesRemoved")), "session.compaction_complete")
        summary = data.get("summaryContent")
        summary = summary if isinstance(summary, str) and summary else None
        figures = _figures(data, tokens_before="preCompactionTokens", tokens_after="postCompactionTokens",
                           tokens_removed="tokensRemoved", messages_before="preCompactionMessagesLength",
                           messages_removed="messagesRemoved", token_limit="tokenLimit", trigger="trigger",
                           checkpoint="checkpointNumber", compaction_call="compactionTokensUsed")
        if n is None:
            figures["assumed"] = "messagesRemoved not recorded: every message before it taken as compacted"
        ranges = self.take(n)
        self.out.append(history_edit("compaction", "summarized" if summary else "evicted", ranges,
                                     f"{SOURCE}:session.compaction_complete",
                                     f"Copilot CLI compacted the history: {sum(b - a for a, b in ranges)} message(s) "
                                     f"{'summarized' if summary else 'removed'}", event_id=eid, timestamp=ts,
                                     **figures))
        self.edits += 1
        if summary:
            # The schema does not say which role carries the summary into the next call.
            self.add(Message(role="user", text=summary, kind=KIND_COMPACTION_SUMMARY, timestamp=ts,
                             meta={"event_id": eid, "source": "session.compaction_complete.summaryContent",
                                   "role": "assumed: user"}))

    def cleared(self, data: dict[str, Any], ts: str | None, eid: str | None) -> None:
        ranges = self.take(None)
        figures = _figures(data, messages_cleared="messagesCleared", initial_message="initialMessage")
        self.out.append(history_edit("truncation", "evicted", ranges, f"{SOURCE}:session.context_cleared",
                                     "Copilot CLI cleared the conversation", event_id=eid, timestamp=ts, **figures))
        self.edits += 1

    # ------------------------------------------------------------ the end

    def finish(self) -> list[Message]:
        self.flush()
        self._usage_events()
        self._single_call_usage()
        return self.out

    def _usage_events(self) -> None:
        """``assistant.usage`` records (ephemeral; in a file only when written by another tool):
        each is its call's usage, matched to the reply by ``apiCallId``."""
        if not self.usage_events:
            return
        by_api = {m.meta.get("api_call_id"): i for i, m in enumerate(self.out) if m.role == "assistant"}
        unmatched = 0
        for u in self.usage_events:
            i = by_api.get(as_str(u.get("apiCallId")))
            if i is None:
                unmatched += 1
                continue
            m = self.out[i]
            old = m.usage or Usage()
            self.out[i] = _with_usage(m, Usage(
                prompt_tokens=as_int(u.get("inputTokens")),
                completion_tokens=as_int(u.get("outputTokens")) if as_int(u.get("outputTokens")) is not None
                else old.completion_tokens,
                cache_read_tokens=as_int(u.get("cacheReadTokens")),
                cache_creation_tokens=as_int(u.get("cacheWriteTokens")),
                reasoning_tokens=as_int(u.get("reasoningTokens")),
            ), "assistant.usage")
        if unmatched:
            self.ctx.warn(f"{unmatched} assistant.usage record(s) name no reply of this file (apiCallId); kept none of "
                          "them")

    def _single_call_usage(self) -> None:
        """A session of one call: the shutdown's sums are that call's usage."""
        metrics = as_dict(as_dict(self.shutdown).get("modelMetrics"))
        calls = [i for i, m in enumerate(self.out) if m.role == "assistant"]
        if len(metrics) != 1 or len(calls) != 1:
            return
        (name, metric), = metrics.items()
        metric = as_dict(metric)
        usage = as_dict(metric.get("usage"))
        m = self.out[calls[0]]
        if as_int(as_dict(metric.get("requests")).get("count")) != 1 or (m.usage and m.usage.prompt_tokens is not None):
            return
        self.out[calls[0]] = _with_usage(m, Usage(
            prompt_tokens=as_int(usage.get("inputTokens")),
            completion_tokens=(m.usage.completion_tokens if m.usage else None) or as_int(usage.get("outputTokens")),
            cache_read_tokens=as_int(usage.get("cacheReadTokens")),
            cache_creation_tokens=as_int(usage.get("cacheWriteTokens")),
            reasoning_tokens=as_int(usage.get("reasoningTokens")),
        ), f"session.shutdown.modelMetrics[{name}] (the session's only request)")

    def metadata(self) -> dict[str, Any]:
        start = self.start
        meta: dict[str, Any] = {
            "agent": "copilot-cli",
            "layout": "events",
            "copilot_version": start.get("copilotVersion"),
            "producer": start.get("producer"),
            "event_schema_version": start.get("version"),
            "context": start.get("context"),
            "models": self.models,
            "reasoning_effort": self.effort,
            "modes": self.modes,
            "events": dict(self.types),
            "task_complete": self.task_complete,
        }
        if self.chain_breaks:
            meta["parent_chain_breaks"] = self.chain_breaks
        if self.subagent_events:
            meta["subagent_events_skipped"] = self.subagent_events
        if self.failed_compactions:
            meta["failed_compactions"] = self.failed_compactions
        replies = [m.usage.completion_tokens for m in self.out
                   if m.role == "assistant" and m.usage and m.usage.completion_tokens is not None]
        if self.shutdown is not None:
            sd = self.shutdown
            metrics = as_dict(sd.get("modelMetrics"))
            meta["shutdown"] = {
                "shutdown_type": sd.get("shutdownType"),
                "error_reason": sd.get("errorReason"),
                "current_model": sd.get("currentModel"),
                "premium_requests": sd.get("totalPremiumRequests"),
                "api_duration_ms": sd.get("totalApiDurationMs"),
                "code_changes": sd.get("codeChanges"),
                "model_metrics": metrics,
                "model_metrics_what": METRICS_WHAT,
                "context_at_shutdown": {
                    "total": as_int(sd.get("currentTokens")), "system": as_int(sd.get("systemTokens")),
                    "conversation": as_int(sd.get("conversationTokens")),
                    "tool_definitions": as_int(sd.get("toolDefinitionsTokens")), "what": CONTEXT_WHAT,
                },
            }
            total_out = sum(as_int(as_dict(as_dict(v).get("usage")).get("outputTokens")) or 0 for v in metrics.values())
            total_requests = sum(as_int(as_dict(as_dict(v).get("requests")).get("count")) or 0
                                 for v in metrics.values())
            meta["recorded_check"] = {
                "replies": sum(1 for m in self.out if m.role == "assistant"), "requests_at_shutdown": total_requests,
                "output_tokens_of_replies": sum(replies), "output_tokens_at_shutdown": total_out,
            }
        return {k: v for k, v in meta.items() if v not in (None, {}, [], "")}


def _figures(data: dict[str, Any], **names: str) -> dict[str, Any]:
    return {ours: data[theirs] for ours, theirs in names.items() if data.get(theirs) is not None}


def _with_usage(m: Message, usage: Usage, source: str) -> Message:
    meta = dict(m.meta)
    meta["usage_source"] = source
    return Message(role=m.role, text=m.text, kind=m.kind, name=m.name, tool_calls=m.tool_calls,
                   tool_call_id=m.tool_call_id, parts=m.parts, usage=usage, timestamp=m.timestamp, model=m.model,
                   meta=meta)
