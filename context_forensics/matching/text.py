"""What a message shows the model, as text to search (fact presence, pins)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..records import MARKER_KINDS, Message


def presence_text(m: Message) -> str:
    """What a message shows the model, as text to search: its text and tool-call arguments
    (string values of JSON arguments, so an edit's content reads as text, not escaped JSON)."""
    if m.kind in MARKER_KINDS:
        return ""
    parts = [m.text] if m.text else []
    for call in m.tool_calls:
        args = call.arguments or ""
        try:
            value = json.loads(args) if args.lstrip().startswith(("{", "[")) else args
        except ValueError:
            value = args
        parts.extend(json_strings(value))
    return "\n".join(p for p in parts if p and not p.isspace())


def json_strings(value: Any) -> Iterable[str]:
    """Every string inside a decoded JSON value (dict values, list items), depth first, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from json_strings(v)
