"""The facts of a rollout read before it is streamed: its ``session_meta``, the models its turns
used, its title (the first typed prompt), its record counts. Cheap byte tests on every line;
JSON only for the few small lines that hold these facts.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from .._json import parse_json
from .rollout import INJECTED_RE, content_text

TITLE_SCAN_LINES = 2000


class Head:
    """Facts read before streaming: cheap byte tests, JSON only for a few small lines."""

    def __init__(self) -> None:
        self.meta: dict[str, Any] | None = None
        self.models: Counter = Counter()
        self.title: str | None = None
        self.user_instructions_in_items = False
        self.types: Counter = Counter()
        self.extra_meta = 0
        # the last token_count event's running total (total_token_usage): what the session used in all
        self.total_usage: dict[str, Any] | None = None


_TOP_TYPE = re.compile(rb'"type"\s*:\s*"([a-z_]+)"')
_USER_ROLE = re.compile(rb'"role"\s*:\s*"user"')


def prescan(path: Path, legacy: bool) -> Head:
    """The facts of the rollout at ``path`` (``legacy``: its first line is the session meta)."""
    head = Head()
    fallback_title: str | None = None
    first = True
    last_total: bytes | None = None
    with open(path, "rb") as f:
        for n, raw in enumerate(f):
            if not raw.strip():
                continue
            if first and legacy:
                head.meta = _json_or_none(raw)
                first = False
                continue
            first = False
            m = _TOP_TYPE.search(raw, 0, 200)
            top = m.group(1).decode() if m else ("state" if b'"record_type"' in raw[:200] else "other")
            head.types[top] += 1
            if top == "event_msg" and b'"total_token_usage"' in raw:
                last_total = raw  # parsed once, after the scan
            is_user = _USER_ROLE.search(raw) is not None
            if is_user and (b"<user_instructions>" in raw or b"# AGENTS.md instructions" in raw):
                head.user_instructions_in_items = True
            if top == "session_meta":
                rec = _json_or_none(raw)
                payload = rec.get("payload") if isinstance(rec, dict) else None
                if head.meta is None and isinstance(payload, dict):
                    head.meta = payload
                else:
                    head.extra_meta += 1
            elif top == "turn_context":
                rec = _json_or_none(raw)
                payload = rec.get("payload") if isinstance(rec, dict) else None
                if isinstance(payload, dict) and isinstance(payload.get("model"), str):
                    head.models[payload["model"]] += 1
            elif head.title is None and n < TITLE_SCAN_LINES:
                if b'"user_message"' in raw and top == "event_msg":
                    rec = _json_or_none(raw)
                    payload = rec.get("payload") if isinstance(rec, dict) else None
                    msg = payload.get("message") if isinstance(payload, dict) else None
                    if isinstance(msg, str) and msg.strip():
                        head.title = msg
                elif fallback_title is None and is_user:
                    rec = _json_or_none(raw)
                    item = rec.get("payload", rec) if isinstance(rec, dict) else None
                    if isinstance(item, dict):
                        text, _ = content_text(item.get("content"))
                        if text.strip() and not INJECTED_RE.match(text):
                            fallback_title = text
    head.title = head.title or fallback_title
    if last_total is not None:
        rec = _json_or_none(last_total)
        info = (rec.get("payload") or {}).get("info") if isinstance(rec,
                                                                    dict) and isinstance(rec.get("payload"), dict) \
            else None
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        head.total_usage = total if isinstance(total, dict) else None
    return head


def _json_or_none(raw: bytes) -> Any:
    try:
        return parse_json(raw)
    except json.JSONDecodeError:  # malformed, or nested too deep: the stream reports it
        return None
