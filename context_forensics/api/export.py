"""``ctxf export``: a stored session written out as ATIF, an OpenAI chat-completions request, or
ctxf's own lossless JSONL (``context_forensics/export.py`` says what each holds)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import on_disk
from .workspace import ConfigLike, Workspace, using


@dataclass
class ExportResult:
    """The export's text (``text``), its format and the session it holds. ``to_dict()`` is what
    ``ctxf export --json`` would print: the session, the format and the document's size."""

    session: str
    format: str
    text: str
    messages: int

    def to_dict(self) -> dict[str, Any]:
        return {"session": self.session, "format": self.format, "messages": self.messages,
                "bytes": len(self.text.encode("utf-8"))}


def export(session: str | Path, *, to: str = "atif", fmt: str | None = None, store: Workspace | None = None,
           db: str | Path | None = None, config: ConfigLike = None) -> ExportResult:
    """Write ``session`` out in format ``to`` (``atif``, ``openai`` or ``jsonl``): what the store
    holds (its text redacted at ingest)."""
    from ..errors import UsageError
    from ..export import FORMATS, render

    if to not in FORMATS:
        raise UsageError(f"unknown export format {to!r}", hint="use one of: " + ", ".join(FORMATS))
    with using(store, db, config, create=on_disk(session)) as ws:
        sid, row = ws.session(str(session), fmt)
        messages = [m.message for m in ws.store.messages(sid)]
        return ExportResult(session=sid, format=to, text=render(to, row, messages), messages=len(messages))
