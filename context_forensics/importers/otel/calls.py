"""GenAI spans as model calls, and the calls of one conversation chained into a session.

A call is a span whose ``gen_ai.operation.name`` is ``chat`` / ``text_completion`` /
``generate_content`` (or an OpenLLMetry / OpenInference LLM span). Its request is exactly what it
recorded (system instructions + input messages, or the message events tied to the span); its
answer the output messages (or ``gen_ai.choice`` events); its usage ``gen_ai.usage.*``.
Chaining is the cassette importer's: a request that repeats the session so far continues it;
where a request re-sends the previous answer in another form, the session keeps the re-sent
form (what the model read from then on) and the recorded answer goes to
``meta["recorded_response"]``; a request that does not extend the session (history edited) adds
its new messages and carries ``input_differs`` + ``input_hashes`` (the hashes of what it sent).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ...records import Message, Usage
from ..base import as_int, as_str, epoch_iso, json_text
from .messages import (
    event_message,
    indexed,
    json_value,
    openinference_messages,
    openllmetry_messages,
    parts_messages,
    system_instructions,
)
from .otlp import LogRecord, Span

CALL_OPERATIONS = ("chat", "text_completion", "generate_content")
PARAMS = ("temperature", "max_tokens", "top_p", "top_k", "seed", "stop_sequences", "frequency_penalty",
          "presence_penalty", "choice.count", "stream")


@dataclass
class Call:
    span: Span
    request: list[Message] | None  # None: the content was not recorded
    response: list[Message]
    usage: Usage | None
    params: dict[str, Any]
    model: str | None
    form: str
    extra: dict[str, Any] = field(default_factory=dict)


def is_call(span: Span) -> bool:
    a = span.attrs
    op = a.get("gen_ai.operation.name")
    if isinstance(op, str):
        return op in CALL_OPERATIONS
    if a.get("openinference.span.kind") == "LLM":
        return True
    return any(k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in a) or \
        a.get("llm.request.type") in ("chat", "completion")


def is_tool(span: Span) -> bool:
    a = span.attrs
    return a.get("gen_ai.operation.name") == "execute_tool" or a.get("openinference.span.kind") == "TOOL"


def _usage(a: dict[str, Any]) -> Usage | None:
    prompt = as_int(a.get("gen_ai.usage.input_tokens"))
    if prompt is None:
        prompt = as_int(a.get("gen_ai.usage.prompt_tokens"))
    if prompt is None:
        prompt = as_int(a.get("llm.token_count.prompt"))
    out = as_int(a.get("gen_ai.usage.output_tokens"))
    if out is None:
        out = as_int(a.get("gen_ai.usage.completion_tokens"))
    if out is None:
        out = as_int(a.get("llm.token_count.completion"))
    cache_read = as_int(a.get("gen_ai.usage.cache_read.input_tokens"))
    if cache_read is None:
        cache_read = as_int(a.get("gen_ai.usage.cache_read_input_tokens"))
    if cache_read is None:
        cache_read = as_int(a.get("llm.token_count.prompt_details.cache_read"))
    cache_write = as_int(a.get("gen_ai.usage.cache_creation.input_tokens"))
    if cache_write is None:
        cache_write = as_int(a.get("gen_ai.usage.cache_creation_input_tokens"))
    if cache_write is None:
        cache_write = as_int(a.get("llm.token_count.prompt_details.cache_write"))
    reasoning = as_int(a.get("gen_ai.usage.reasoning.output_tokens"))
    if reasoning is None:
        reasoning = as_int(a.get("llm.token_count.completion_details.reasoning"))
    if prompt is not None and (cache_read or 0) + (cache_write or 0) > prompt:
        # The conventions say input_tokens "SHOULD include all types of input tokens, including
        # cached tokens" and each cache figure "SHOULD be included in gen_ai.usage.input_tokens"
        # (semantic-conventions gen-ai); an instrumentation that passed Anthropic's input_tokens
        # through left them out, which a cache figure above the input shows.
        prompt += (cache_read or 0) + (cache_write or 0)
    u = Usage(prompt_tokens=prompt, completion_tokens=out, cache_read_tokens=cache_read,
              cache_creation_tokens=cache_write, reasoning_tokens=reasoning)
    return None if u.is_empty() else u


def read_call(span: Span, events: list[tuple[str, dict[str, Any], Any]]) -> Call:
    """One call from its span and the message events tied to it ``(name, attributes, body)``."""
    a = dict(span.attrs)
    for name, attrs, _ in events:  # semconv 1.37+ may put the content on an event instead
        if name == "gen_ai.client.inference.operation.details":
            for k, v in attrs.items():
                a.setdefault(k, v)
    request: list[Message] | None = None
    response: list[Message] = []
    form = "gen_ai.input.messages"
    inputs = parts_messages(a.get("gen_ai.input.messages"), "user")
    outputs = parts_messages(a.get("gen_ai.output.messages"), "assistant")
    if inputs is not None or "gen_ai.system_instructions" in a:
        request = system_instructions(a.get("gen_ai.system_instructions")) + (inputs or [])
        response = outputs or []
    elif any(k.startswith("gen_ai.prompt.") for k in a):
        form = "openllmetry"
        request = openllmetry_messages(a, "gen_ai.prompt.", "user")
        response = openllmetry_messages(a, "gen_ai.completion.", "assistant")
    elif any(k.startswith("llm.input_messages.") for k in a):
        form = "openinference"
        request = openinference_messages(a, "llm.input_messages.", "user")
        response = openinference_messages(a, "llm.output_messages.", "assistant")
    elif any(name in ("gen_ai.choice",) or name.endswith(".message") for name, _, _ in events):
        form = "events"
        request, response = [], []
        for name, attrs, body in events:
            m = event_message(name, body, attrs)
            if m is not None:
                (response if name == "gen_ai.choice" else request).append(m)
    if outputs is not None and not response:
        response = outputs
    params: dict[str, Any] = {}
    for p in PARAMS:
        v = a.get(f"gen_ai.request.{p}")
        if v is not None:
            params[p] = v
    if isinstance(json_value(a.get("llm.invocation_parameters")), dict):
        params.update({k: v for k, v in json_value(a["llm.invocation_parameters"]).items() if k != "model"})
    tools = json_value(a.get("gen_ai.tool.definitions"))
    if tools is None:  # OpenInference's tool schemas, OpenLLMetry's llm.request.functions.N.*
        tools = [json_value(v) for k, v in sorted(a.items()) if k.startswith("llm.tools.")
                 and k.endswith(".tool.json_schema")] or [
            {"type": "function", "function": {"name": f.get("name"), "description": f.get("description"),
                                              "parameters": json_value(f.get("parameters"))}}
            for f in indexed(a, "llm.request.functions.")] or None
    if tools:
        params["tools"] = tools
    model = as_str(a.get("gen_ai.response.model")) or as_str(a.get("llm.model_name")) or \
        as_str(a.get("gen_ai.request.model"))
    request_model = as_str(a.get("gen_ai.request.model")) or as_str(a.get("llm.model_name"))
    extra: dict[str, Any] = {k: a[k] for k in ("gen_ai.response.id", "gen_ai.response.finish_reasons") if k in a}
    return Call(span, request, response, _usage(a), {**({"model": request_model} if request_model else {}), **params},
                model, form, extra)


def tool_spans_by_call(spans: list[Span]) -> dict[str, Span]:
    out: dict[str, Span] = {}
    for s in spans:
        cid = as_str(s.attrs.get("gen_ai.tool.call.id")) or as_str(s.attrs.get("tool_call.id"))
        if cid:
            out[cid] = s
    return out


def _tool_meta(span: Span) -> dict[str, Any]:
    a = span.attrs
    meta: dict[str, Any] = {"span_id": span.span_id, "tool_name": as_str(a.get("gen_ai.tool.name")) or span.name}
    for k in ("gen_ai.tool.type", "gen_ai.tool.call.arguments"):
        if k in a:
            meta[k.rsplit(".", 1)[-1] if k != "gen_ai.tool.call.arguments" else "arguments"] = a[k]
    return meta


def _answer(call: Call, msgs: list[Message], recorded: list[Message] | None = None) -> list[Message]:
    first = msgs[0]
    request = {**call.params, "source": f"otel:{call.form}", "trace_id": call.span.trace_id,
               "span_id": call.span.span_id, **({"content_recorded": False} if call.request is None else {})}
    meta = {**first.meta, "request": request, **call.extra}
    if recorded is not None and [m.hash for m in recorded] != [m.hash for m in msgs]:
        meta["recorded_response"] = {"text": "".join(m.text for m in recorded),
                                     "tool_calls": [c.to_dict() for m in recorded for c in m.tool_calls]}
    ts = epoch_iso(call.span.end / 1e9) if call.span.end else None
    return [replace(first, usage=call.usage, model=call.model, timestamp=ts, meta=meta)] + list(msgs[1:])


def chain(calls: list[Call], tool_spans: dict[str, Span]) -> tuple[list[Message], int]:
    """The session's messages and how many calls sent something else than the history."""
    msgs: list[Message] = []
    last_answer: tuple[int, Call, list[Message]] | None = None  # where the last answer starts
    differs = 0
    for call in calls:
        response = call.response or [Message(role="assistant", meta={"no_response": True})]
        req = call.request
        if req is None:
            msgs += _answer(call, response)
            last_answer = None
            continue
        hashes = [m.hash for m in msgs]
        rh = [m.hash for m in req]
        if rh[:len(hashes)] == hashes:
            msgs += req[len(hashes):]
        elif last_answer is not None and rh[:last_answer[0]] == hashes[:last_answer[0]] and \
                req[last_answer[0]:last_answer[0] + 1] and req[last_answer[0]].role == "assistant":
            p, prev, recorded = last_answer
            j = p
            while j < len(req) and req[j].role == "assistant":
                j += 1
            msgs = msgs[:p] + _answer(prev, req[p:j], recorded) + req[j:]
        else:
            have = set(hashes)
            msgs += [m for m in req if m.hash not in have]
            differs += 1
            call.params = {**call.params, "input_differs": True, "input_hashes": rh}
        start = len(msgs)
        msgs += _answer(call, response)
        last_answer = (start, call, response)
    return _with_tool_spans(msgs, tool_spans), differs


def _with_tool_spans(msgs: list[Message], tool_spans: dict[str, Span]) -> list[Message]:
    """Tool results: the execute_tool span's facts on the tool message it produced; a result
    only the span recorded (no later request re-sent it) added after the call that asked."""
    if not tool_spans:
        return msgs
    answered = {m.tool_call_id for m in msgs if m.role == "tool" and m.tool_call_id}
    out: list[Message] = []
    for i, m in enumerate(msgs):
        if m.role == "tool" and m.tool_call_id in tool_spans:
            m = replace(m, meta={**m.meta, "tool_span": _tool_meta(tool_spans[m.tool_call_id])})
        out.append(m)
        nxt = msgs[i + 1] if i + 1 < len(msgs) else None
        if nxt is not None and nxt.role == "tool":
            continue
        # the end of a run of tool results (or of an assistant turn): add the missing ones
        j = i
        while j >= 0 and msgs[j].role == "tool":
            j -= 1
        if j < 0 or msgs[j].role != "assistant":
            continue
        for c in msgs[j].tool_calls:
            span = tool_spans.get(c.id or "")
            if span is None or c.id is None or c.id in answered or "gen_ai.tool.call.result" not in span.attrs:
                continue
            answered.add(c.id)
            out.append(Message(role="tool", text=json_text(span.attrs["gen_ai.tool.call.result"]),
                               tool_call_id=c.id, name=c.name, meta={"tool_span": _tool_meta(span),
                                                                     "source": "otel:gen_ai.tool.call.result"}))
    return out


def events_by_span(spans: list[Span], logs: list[LogRecord]) -> dict[str, list[tuple[str, dict[str, Any], Any]]]:
    """Message events tied to each span: its own span events, then the log records naming it."""
    out: dict[str, list[tuple[str, dict[str, Any], Any]]] = {}
    for s in spans:
        for name, _, attrs in sorted(s.events, key=lambda e: e[1]):
            if name.startswith("gen_ai."):
                out.setdefault(s.span_id, []).append((name, attrs, None))
    for r in sorted(logs, key=lambda r: r.time):
        if r.span_id and r.event_name.startswith("gen_ai."):
            out.setdefault(r.span_id, []).append((r.event_name, r.attrs, r.body))
    return out
