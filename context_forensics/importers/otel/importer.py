"""The ``otel`` importer: OTLP/JSON GenAI telemetry, one session per conversation or trace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ...records import Session
from .._documents import first_user_title
from ..base import ImportContext, Importer, as_str, epoch_iso, head_text, register
from .calls import chain, events_by_span, is_call, is_tool, read_call, tool_spans_by_call
from .otlp import Span, read_telemetry

_OTLP_START = re.compile(r'^\[?\s*\{\s*"resource(?:Spans|Logs|Metrics)"')
_CONSOLE_START = re.compile(r'^\[?\s*\{\s*"name"\s*:')
MARKERS = ('"gen_ai.', '"llm.input_messages', '"llm.output_messages', '"openinference.span.kind"')
CONTAINERS = ('"resourceSpans"', '"resourceLogs"')


def _conversation(span: Span, by_id: dict[str, Span]) -> str | None:
    """The span's ``gen_ai.conversation.id`` (``session.id`` for OpenInference), or its nearest
    ancestor's: an agent span carries it for the chat spans under it."""
    seen = 0
    s: Span | None = span
    while s is not None and seen < 1000:
        cid = as_str(s.attrs.get("gen_ai.conversation.id")) or as_str(s.attrs.get("session.id"))
        if cid:
            return cid
        s = by_id.get(s.parent_id) if s.parent_id else None
        seen += 1
    return None


def _wrapping_calls(spans: list[Span], by_id: dict[str, Span]) -> set[str]:
    """Call spans with another call span under them: one call recorded twice, by a framework's
    instrumentation (LangChain, LlamaIndex, LiteLLM as OpenInference ``LLM`` spans) around the
    provider SDK's. The innermost span, nearest the API, is the one kept, so its usage counts once."""
    out: set[str] = set()
    for s in spans:
        if not is_call(s):
            continue
        p, seen = (by_id.get(s.parent_id) if s.parent_id else None), 0
        while p is not None and seen < 1000:
            if is_call(p):
                out.add(p.span_id)
            p = by_id.get(p.parent_id) if p.parent_id else None
            seen += 1
    return out


def _agent(spans: list[Span]) -> str:
    for s in spans:
        name = as_str(s.resource.get("service.name"))
        if name and not name.startswith("unknown_service"):
            return name
    for s in spans:
        for k in ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"):
            v = as_str(s.attrs.get(k))
            if v:
                return v
    return "otel"


@register
class OpenTelemetryGenAI(Importer):
    """OpenTelemetry GenAI spans and events (OTLP/JSON): each chat span is one recorded call."""

    name = "otel"
    description = ("OpenTelemetry GenAI spans/events as OTLP/JSON (collector file exporter, OTLP JSON file "
                   "exporters, OpenLLMetry / OpenInference exports; the Python console exporter)")
    extensions = (".jsonl", ".json", ".ndjson")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if _OTLP_START.match(text):
            return any(c in text for c in CONTAINERS) and any(m in text for m in MARKERS)
        # the SDK console exporter's spans
        return bool(_CONSOLE_START.match(text)) and '"context"' in text and '"trace_id"' in text and \
            any(m in text for m in MARKERS)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        spans, logs = read_telemetry(path, ctx)
        by_id = {s.span_id: s for s in spans}
        events = events_by_span(spans, logs)
        groups: dict[str, list[Span]] = {}
        wrappers = _wrapping_calls(spans, by_id)
        if wrappers:
            ctx.skip("call span wrapping another call span (one call recorded twice)", len(wrappers))
        for s in spans:
            if s.span_id in wrappers:
                continue
            if is_call(s) or is_tool(s):
                key = _conversation(s, by_id) or s.trace_id
                groups.setdefault(key, []).append(s)
        # log records whose span was not exported: events grouped by their trace alone
        orphan: dict[str, Any] = {}
        for r in logs:
            if r.span_id and r.span_id not in by_id and r.event_name.startswith("gen_ai."):
                orphan.setdefault(r.span_id, r)
        for sid, rec in orphan.items():
            span = Span(rec.trace_id or sid, sid, None, "", rec.time, rec.time, {}, rec.resource)
            by_id[sid] = span
            groups.setdefault(span.trace_id, []).append(span)
        if not groups:
            ctx.skip("span without GenAI content", len(spans))
        for key, members in groups.items():
            with ctx.record("conversation", index=key):
                session = self._session(path, key, members, by_id, events, ctx)
                if session is not None:
                    yield session

    def _session(self, path: Path, key: str, members: list[Span], by_id: dict[str, Span],
                 events: dict[str, list], ctx: ImportContext) -> Session | None:
        members.sort(key=lambda s: (s.start, s.end))
        calls = [read_call(s, events.get(s.span_id, [])) for s in members if not is_tool(s)]
        tools = tool_spans_by_call([s for s in members if is_tool(s)])
        if not calls:
            ctx.skip("tool span without a model call", len(members))
            return None
        msgs, differs = chain(calls, tools)
        uncaptured = sum(c.request is None for c in calls)
        if uncaptured:
            ctx.warn(f"conversation {key}: {uncaptured} call(s) recorded no message content (the instrumentation "
                     "captures it only when told to, e.g. OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT); "
                     "kept their answers and usage")
        conv = next((_conversation(s, by_id) for s in members if _conversation(s, by_id)), None)
        metadata: dict[str, Any] = {
            "agent": _agent(members),
            "traces": sorted({s.trace_id for s in members}),
            "model_calls": len(calls),
            "tool_spans": sum(is_tool(s) for s in members),
            "forms": sorted({c.form for c in calls}),
        }
        if conv:
            metadata["conversation_id"] = conv
        if differs:
            metadata["calls_with_different_input"] = differs
        model = next((c.model for c in calls if c.model), None)
        return Session(external_id=key, format=self.name, messages=msgs, title=first_user_title(msgs), model=model,
                       started_at=epoch_iso(members[0].start / 1e9) if members[0].start else None,
                       metadata=metadata)
