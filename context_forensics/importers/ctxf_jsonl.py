"""ctxf's own export (``ctxf export SESSION --to jsonl``): a header line ``{"ctxf_export": "jsonl",
"version": 1, "session": {...}}``, then one ``{"message": {...}}`` line per message with every field
the store holds (role, text, kind, name, tool calls, tool_call_id, parts, usage, timestamp, model,
meta). Read back whole: the same messages, usage and session fields (``context_forensics/export.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import OUTCOMES, Message, Session, ToolCall, Usage
from .base import ImportContext, Importer, as_dict, as_list, as_str, iter_jsonl, register, str_or_none

VERSIONS = (1,)


@register
class CtxfJsonlImporter(Importer):
    name = "ctxf_jsonl"
    description = "ctxf's own lossless export (`ctxf export --to jsonl`: a header line, one message per line)"
    extensions = (".jsonl",)
    priority = 5

    def sniff(self, path: Path, head: bytes) -> bool:
        # The header may be longer than the head (a session's metadata): its first key decides.
        return head.lstrip(b"\xef\xbb\xbf").startswith(b'{"ctxf_export": "jsonl"')

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        header: dict[str, Any] | None = None
        messages: list[Message] = []
        for lineno, rec in iter_jsonl(path, ctx):
            if header is None:
                if not isinstance(rec, dict) or rec.get("ctxf_export") != "jsonl":
                    raise InputError("no ctxf export header on the first line", where=f"{path}:{lineno}",
                                     hint="a ctxf jsonl export starts with its header line")
                if rec.get("version") not in VERSIONS:
                    raise InputError(f"ctxf export version {rec.get('version')!r} is not one this ctxf reads "
                                     f"({', '.join(map(str, VERSIONS))})", where=f"{path}:{lineno}",
                                     hint="export it again with this ctxf")
                header = as_dict(rec.get("session"))
                continue
            m = rec.get("message") if isinstance(rec, dict) else None
            if not isinstance(m, dict):
                ctx.skip("malformed line (no message)")
                continue
            with ctx.record("message", line=lineno):
                messages.append(Message(
                    role=m["role"], text=m.get("text") or "", kind=m.get("kind") or "message", name=m.get("name"),
                    tool_calls=tuple(ToolCall(name=c["name"], arguments=c.get("arguments") or "", id=c.get("id"))
                                     for c in as_list(m.get("tool_calls"))),
                    tool_call_id=m.get("tool_call_id"),
                    parts=tuple(p for p in as_list(m.get("parts")) if isinstance(p, dict)),
                    usage=Usage.from_dict(as_dict(m.get("usage"))), timestamp=m.get("timestamp"), model=m.get("model"),
                    meta=as_dict(m.get("meta"))))
        if header is None:
            raise InputError("empty file", where=str(path), hint="nothing to ingest")
        ctx.finish()
        outcome = o if (o := header.get("outcome")) in OUTCOMES else "unknown"
        metadata = dict(as_dict(header.get("metadata")))
        metadata["exported_from"] = {"id": header.get("id"), "format": header.get("format")}
        yield Session(external_id=str(header.get("external_id") or header.get("id") or path.stem),
                      format=self.name, messages=messages, title=str_or_none(header.get("title")),
                      model=as_str(header.get("model")), started_at=str_or_none(header.get("started_at")),
                      task=str_or_none(header.get("task")), outcome=outcome, metadata=metadata)
