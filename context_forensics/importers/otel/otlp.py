"""OTLP/JSON files as flat spans and log records.

Layouts read: JSON Lines of OTLP export requests (the collector's file exporter, the Python
``opentelemetry-exporter-otlp-json-file``, Gemini CLI's telemetry outfile: each line a
``{"resourceSpans": ...}`` or ``{"resourceLogs": ...}`` object); one such document, pretty or
not; a JSON list of them; and the Python SDK ``ConsoleSpanExporter``'s output (span objects with
``context.trace_id``, one after another or in a list). OTLP ``AnyValue`` attributes are decoded
to plain values (``intValue`` strings to ints, ``kvlistValue`` to dicts, ``arrayValue`` to lists).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from .._json import IntGuard, decode, parse_json
from ..base import RECORD_ERRORS, ImportContext, as_dict, as_list, as_str, int_text, iter_jsonl


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int  # unix nanoseconds (0 when not recorded)
    end: int
    attrs: dict[str, Any]
    resource: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)  # (name, time, attributes)


@dataclass
class LogRecord:
    trace_id: str | None
    span_id: str | None
    event_name: str
    time: int
    attrs: dict[str, Any]
    body: Any
    resource: dict[str, Any]


def any_value(v: Any) -> Any:
    """A plain value from an OTLP/JSON ``AnyValue``."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        x = v["intValue"]
        n = int_text(x)
        return x if n is None else n
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [any_value(x) for x in as_list(as_dict(v["arrayValue"]).get("values"))]
    if "kvlistValue" in v:
        return key_values(as_dict(v["kvlistValue"]).get("values"))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def key_values(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in as_list(items):
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = any_value(kv.get("value"))
    return out


def _nanos(v: Any) -> int:
    n = int_text(v)
    if n is not None and n >= 0:
        return n
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and v:  # the console exporter's ISO times
        try:
            return int(datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() * 1e9)
        except ValueError:
            return 0
    return 0


def _hex_id(v: Any) -> str | None:
    s = as_str(v)
    if s is None:
        return None
    s = s[2:] if s.startswith("0x") else s
    return None if not s.strip("0") else s


def is_otlp(doc: Any) -> bool:
    return isinstance(doc, dict) and ("resourceSpans" in doc or "resourceLogs" in doc)


def is_console_span(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("context"), dict) and "trace_id" in doc["context"]


def _from_request(doc: dict, spans: list[Span], logs: list[LogRecord], ctx: ImportContext, where: str) -> None:
    for i, rs in enumerate(as_list(doc.get("resourceSpans"))):
        resource = key_values(as_dict(as_dict(rs).get("resource")).get("attributes"))
        for ss in as_list(as_dict(rs).get("scopeSpans")):
            for j, sp in enumerate(as_list(as_dict(ss).get("spans"))):
                with ctx.record("span", index=f"{where}resourceSpans[{i}] span {j}"):
                    tid, sid = _hex_id(sp["traceId"]), _hex_id(sp["spanId"])
                    if tid is None or sid is None:
                        raise ValueError("the span has no traceId or spanId")
                    events = [(str(e.get("name") or ""), _nanos(e.get("timeUnixNano")), key_values(e.get("attributes")))
                              for e in as_list(sp.get("events")) if isinstance(e, dict)]
                    spans.append(Span(tid, sid, _hex_id(sp.get("parentSpanId")), str(sp.get("name") or ""),
                                      _nanos(sp.get("startTimeUnixNano")), _nanos(sp.get("endTimeUnixNano")),
                                      key_values(sp.get("attributes")), resource, events))
    for i, rl in enumerate(as_list(doc.get("resourceLogs"))):
        resource = key_values(as_dict(as_dict(rl).get("resource")).get("attributes"))
        for sl in as_list(as_dict(rl).get("scopeLogs")):
            for j, lr in enumerate(as_list(as_dict(sl).get("logRecords"))):
                with ctx.record("log record", index=f"{where}resourceLogs[{i}] record {j}"):
                    attrs = key_values(lr.get("attributes"))
                    name = as_str(lr.get("eventName")) or as_str(attrs.get("event.name")) or ""
                    logs.append(LogRecord(_hex_id(lr.get("traceId")), _hex_id(lr.get("spanId")), name,
                                          _nanos(lr.get("timeUnixNano")) or _nanos(lr.get("observedTimeUnixNano")),
                                          attrs, any_value(lr.get("body")), resource))


def _from_console(doc: dict, spans: list[Span], ctx: ImportContext, where: str) -> None:
    with ctx.record("span", index=where.rstrip(": ") or None):
        c = doc["context"]
        tid, sid = _hex_id(c.get("trace_id")), _hex_id(c.get("span_id"))
        if tid is None or sid is None:
            raise ValueError("the span has no trace_id or span_id")
        events = [(str(e.get("name") or ""), _nanos(e.get("timestamp")), as_dict(e.get("attributes")))
                  for e in as_list(doc.get("events")) if isinstance(e, dict)]
        spans.append(Span(tid, sid, _hex_id(doc.get("parent_id")), str(doc.get("name") or ""),
                          _nanos(doc.get("start_time")), _nanos(doc.get("end_time")), as_dict(doc.get("attributes")),
                          as_dict(as_dict(doc.get("resource")).get("attributes")), events))


def _documents(path: Path, ctx: ImportContext) -> Iterator[tuple[str, Any]]:
    """(place, document) for every top-level value: JSONL lines, one document or a list, or
    concatenated pretty-printed objects (the console exporter)."""
    with open(path, "rb") as f:
        first = b""
        for raw in f:  # the first non-blank line decides: one JSON value on it is a JSONL file
            if raw.strip():
                first = raw
                break
    if not first:
        raise InputError("empty file", where=str(path), hint="nothing to ingest; check the export")
    try:
        one_per_line = isinstance(parse_json(first.rstrip(b"\r\n").lstrip(b"\xef\xbb\xbf")), dict)
    except json.JSONDecodeError:
        one_per_line = False
    if one_per_line:  # streamed: a large collector file is never held twice
        for lineno, d in iter_jsonl(path, ctx):
            yield f"line {lineno}: ", d
        return
    data = path.read_bytes()
    try:
        doc = parse_json(data[3:] if data.startswith(b"\xef\xbb\xbf") else data, ctx)
    except json.JSONDecodeError:
        doc = None
    else:
        for i, d in enumerate(doc if isinstance(doc, list) else [doc]):
            yield (f"item {i}: " if isinstance(doc, list) else ""), d
        return
    text = decode(data, ctx)
    ints = IntGuard()  # an integer of thousands of digits reads as null, not a ValueError for the file
    decoder, i, n, k = json.JSONDecoder(parse_int=ints), 0, len(text), 0
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            return
        try:
            d, i = decoder.raw_decode(text, i)
        except (json.JSONDecodeError, RecursionError) as e:
            line = text.count("\n", 0, i) + 1
            if k == 0:
                raise InputError(f"malformed JSON: {e}", where=f"{path}:{line}",
                                 hint="an OTLP/JSON export holds one JSON object per line, or one document") from None
            ctx.warn(f"malformed JSON after object {k} ({e}); ignored the rest of the file", line=line)
            ctx.skip("malformed object")
            return
        ints.warn(ctx)
        yield f"object {k}: ", parse_json(json.dumps(d), ctx)  # through the guard
        k += 1


def read_telemetry(path: Path, ctx: ImportContext) -> tuple[list[Span], list[LogRecord]]:
    spans: list[Span] = []
    logs: list[LogRecord] = []
    for where, doc in _documents(path, ctx):
        try:
            if is_otlp(doc):
                _from_request(doc, spans, logs, ctx, where)
            elif is_console_span(doc):
                _from_console(doc, spans, ctx, where)
            elif isinstance(doc, dict) and isinstance(doc.get("resourceMetrics"), list):
                ctx.skip("metrics record")
            else:
                ctx.skip("non-OTLP record")
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="record", index=where.rstrip(": ") or None)
    return spans, logs
