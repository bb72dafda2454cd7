"""The ``copilot_cli`` importer: sniffs an ``events.jsonl`` event stream or a legacy session
JSON and yields its one session."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from ...records import Session
from ..base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    as_str,
    first_jsonl_record,
    head_text,
    iter_jsonl,
    load_json,
    read_head,
    register,
)
from .events import Stream
from .legacy import is_legacy, legacy_messages

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
# The event types a Copilot CLI session file starts with.
FIRST_TYPES = frozenset({"session.start", "session.resume", "session.info", "session.model_change", "system.message",
                         "user.message"})
_LEGACY_HEAD = re.compile(r'^\{\s*"sessionId"\s*:\s*"[^"]*"\s*,\s*"startTime"\s*:\s*"[^"]*"\s*,'
                          r'\s*"chatMessages"\s*:\s*\[')


def _is_event(rec: dict[str, Any] | None) -> bool:
    return (isinstance(rec, dict) and rec.get("type") in FIRST_TYPES and isinstance(rec.get("data"), dict)
            and "parentId" in rec and isinstance(rec.get("id"), str) and "timestamp" in rec)


@register
class CopilotCli(Importer):
    """GitHub Copilot CLI sessions: one session per file."""

    name = "copilot_cli"
    description = ("GitHub Copilot CLI sessions (~/.copilot/session-state/<id>/events.jsonl; legacy "
                   "~/.copilot/history-session-state/<id>.json)")
    extensions = (".jsonl", ".json")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if text.startswith("{") and _LEGACY_HEAD.match(text[:400]):
            return True
        rec = first_jsonl_record(head)
        if rec is None and text.startswith("{") and '"chatMessages"' in text and path.suffix == ".json":
            # A legacy JSON whose keys come in another order: its head must still read as one.
            return '"timeline"' in text or '"sessionId"' in text
        return _is_event(rec)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        if _is_event(first_jsonl_record(read_head(path))):
            yield self._events(path, ctx)
        else:
            yield self._legacy(path, ctx)

    def _events(self, path: Path, ctx: ImportContext) -> Session:
        stream = Stream(ctx)
        for line, rec in iter_jsonl(path, ctx):
            try:
                if not isinstance(rec, dict):
                    raise TypeError(f"event is {type(rec).__name__}, not an object")
                stream.event(rec, line)
            except RECORD_ERRORS as e:  # one event of unexpected shape: skipped, the rest kept
                ctx.bad_record(e, what="event", line=line)
        messages = stream.finish()
        metadata = stream.metadata()
        ext = as_str(stream.start.get("sessionId"))
        if ext is None:
            ext = path.parent.name if path.name == "events.jsonl" and UUID_RE.match(path.parent.name) else path.stem
            ctx.warn("no session.start with a sessionId; used the file's name")
        if len(stream.models) > 1:
            ctx.warn(f"model changed during the session: {' -> '.join(stream.models)}")
        return Session(
            external_id=ext,
            format=self.name,
            messages=messages,
            title=stream.title,
            model=as_str(as_dict(stream.shutdown).get("currentModel")) or stream.model,
            started_at=as_str(stream.start.get("startTime")) or stream.first_ts,
            global_id=bool(UUID_RE.match(ext)),
            metadata=metadata,
        )

    def _legacy(self, path: Path, ctx: ImportContext) -> Session:
        doc = load_json(path, ctx)
        if not is_legacy(doc):
            raise InputError("not a Copilot CLI session: no chatMessages list", where=str(path),
                             hint="force another format with --format")
        messages, metadata = legacy_messages(doc, ctx)
        ext = as_str(doc.get("sessionId")) or path.stem
        return Session(
            external_id=ext,
            format=self.name,
            messages=messages,
            title=metadata.pop("title", None),
            started_at=as_str(doc.get("startTime")),
            global_id=bool(UUID_RE.match(ext)),
            metadata=metadata,
        )
