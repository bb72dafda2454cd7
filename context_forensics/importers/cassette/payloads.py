"""What a recorded response body holds: one JSON document, or the payloads of a stream.

Streams come as server-sent events (``data:`` lines; ``[DONE]`` and pings dropped), NDJSON
(Ollama) or the AWS binary event stream (Bedrock ``invoke-with-response-stream`` and
``converse-stream``, whose Anthropic events ride base64-encoded in ``bytes`` chunks).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import Any

from .._json import parse_json


def json_or_stream(text: str) -> tuple[Any, list[Any] | None]:
    """(a JSON document, or None; the stream payloads, or None)."""
    stripped = text.strip()
    if not stripped:
        return None, None
    if _looks_sse(stripped):
        return None, parse_sse(stripped)
    try:
        return parse_json(stripped), None
    except json.JSONDecodeError:
        pass
    chunks = []
    for line in stripped.splitlines():  # NDJSON (Ollama)
        line = line.strip()
        if not line:
            continue
        try:
            chunks.append(parse_json(line))
        except json.JSONDecodeError:
            return None, None
    return None, chunks or None


def parse_sse(text: str) -> list[Any]:
    """The JSON payloads of a server-sent-event stream (``[DONE]`` and pings dropped)."""
    events: list[Any] = []
    data: list[str] = []

    def flush() -> None:
        if not data:
            return
        joined = "\n".join(data)
        data.clear()
        if joined.strip() in ("", "[DONE]"):
            return
        try:
            events.append(parse_json(joined))
            return
        except json.JSONDecodeError:
            pass
        for piece in joined.split("\n"):  # several payloads without blank lines between
            try:
                events.append(parse_json(piece))
            except json.JSONDecodeError:
                continue

    for line in text.splitlines():
        if not line.strip():
            flush()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif line.startswith("event:"):
            flush()
    flush()
    return events


def _looks_sse(text: str) -> bool:
    start = text.lstrip()[:200]
    return start.startswith(("data:", "event:", ":", "id:", "retry:")) and "data:" in text


def is_eventstream(data: bytes) -> bool:
    """An AWS event-stream body: a binary prelude whose total length fits the data."""
    if len(data) < 16 or data[:1] in (b"{", b"[", b"d", b"e"):
        return False
    total, hlen = struct.unpack(">II", data[:8])
    return 16 <= total <= len(data) and hlen < total


def parse_eventstream(data: bytes) -> list[tuple[dict[str, Any], bytes]]:
    """AWS ``application/vnd.amazon.eventstream`` frames -> (headers, payload) pairs."""
    frames: list[tuple[dict[str, Any], bytes]] = []
    i = 0
    while i + 16 <= len(data):
        total, hlen = struct.unpack(">II", data[i : i + 8])
        if total < 16 or i + total > len(data):
            break
        raw = data[i + 12 : i + 12 + hlen]
        headers: dict[str, Any] = {}
        j = 0
        while j < len(raw):
            n = raw[j]
            name = raw[j + 1 : j + 1 + n].decode("utf-8", errors="replace")
            j += 1 + n
            if j >= len(raw):
                break
            t = raw[j]
            j += 1
            if t in (6, 7):  # bytes, string: 2-byte length
                (vlen,) = struct.unpack(">H", raw[j : j + 2])
                value: Any = raw[j + 2 : j + 2 + vlen]
                headers[name] = value.decode("utf-8", errors="replace") if t == 7 else value
                j += 2 + vlen
            elif t in (0, 1):
                headers[name] = t == 0
            else:
                size = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}.get(t)
                if size is None:
                    break
                j += size
        frames.append((headers, data[i + 12 + hlen : i + total - 4]))
        i += total
    return frames


def bedrock_stream_events(data: bytes) -> list[Any]:
    """Event-stream frames -> event dicts: Anthropic events (base64 ``bytes`` chunks of
    InvokeModelWithResponseStream) or ``{event_type: payload}`` (ConverseStream, Nova)."""
    events: list[Any] = []
    for headers, payload in parse_eventstream(data):
        try:
            body = parse_json(payload.decode("utf-8", errors="replace")) if payload else {}
        except json.JSONDecodeError:
            continue
        if isinstance(body, dict) and isinstance(body.get("bytes"), str):
            try:
                body = parse_json(base64.b64decode(body["bytes"]))
            except (binascii.Error, ValueError):
                continue
            events.append(body)
            continue
        etype = headers.get(":event-type") or headers.get(":exception-type")
        if isinstance(body, dict) and "type" not in body and etype and etype not in body:
            events.append({etype: body})
        else:
            events.append(body)
    return events
