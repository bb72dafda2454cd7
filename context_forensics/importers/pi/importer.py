"""The ``pi`` importer: sniffs a Pi session file and yields its session (the current branch)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from ...records import Session
from ..base import ImportContext, Importer, as_str, first_jsonl_record, head_text, register
from .convert import State, messages
from .entries import branch
from .reader import iter_entries

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
# A header line longer than the head holds is no Pi header (Pi's is a few hundred bytes).
_HEADER = re.compile(r'^\{"type":\s*"session",')
_ENTRY_TYPES = ("message", "model_change", "thinking_level_change", "compaction", "branch_summary", "custom",
                "custom_message", "label", "session_info")


def is_header(rec: Any) -> bool:
    """A Pi session header: ``{"type": "session", "id": ..., "timestamp": ..., "cwd" | "version"}``."""
    return (isinstance(rec, dict) and rec.get("type") == "session" and isinstance(rec.get("id"), str)
            and isinstance(rec.get("timestamp"), str) and ("cwd" in rec or isinstance(rec.get("version"), int)))


@register
class Pi(Importer):
    """Pi coding agent sessions, versions 1-3: one session per file."""

    name = "pi"
    description = ("Pi coding agent sessions (~/.pi/agent/sessions/--<cwd>--/<time>_<uuid>.jsonl; v1-v3, "
                   "the current branch of the id/parentId tree)")
    extensions = (".jsonl",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        rec = first_jsonl_record(head)
        if rec is None:
            return False
        if not is_header(rec):
            return False
        text = head_text(head)
        second = text.split("\n", 2)[1:2]
        # A header alone (a session with no entry yet) or one followed by a Pi entry.
        return not second or not second[0].strip() or any(f'"type":"{t}"' in second[0] for t in _ENTRY_TYPES)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        values = list(iter_entries(path, ctx))
        br = branch(values, ctx)
        h = br.header
        if not h:
            raise InputError("no Pi session header (a first line {\"type\": \"session\", ...})", where=f"{path}:1",
                             hint="the file is not a Pi session, or its first line was lost; force another "
                             "format with --format")
        ext = as_str(h.get("id")) or path.stem
        st = State()
        msgs = list(messages(br, st, ctx))
        model = st.models.most_common(1)[0][0] if st.models else as_str(h.get("modelId"))
        if len(st.models) > 1:
            ctx.warn(f"model changed during the session: {', '.join(st.models)}")
        metadata: dict[str, Any] = {
            "agent": "pi",
            "version": br.version,
            "cwd": as_str(h.get("cwd")),
            "provider": as_str(h.get("provider")),
            "thinking_level": as_str(h.get("thinkingLevel")),
            "parent_session": as_str(h.get("parentSession")) or as_str(h.get("branchedFrom")),
            "name": st.name,
            "models": dict(st.models),
            "model_changes": st.model_changes,
            "thinking_level_changes": st.thinking_changes,
            "compactions": st.compactions,
            "recorded_calls": st.calls,
            "entries_on_branch": len(br.entries),
            "entries_off_branch": br.off_branch,
            "leaves": br.branches if br.version >= 2 or br.off_branch else None,
        }
        yield Session(
            external_id=ext,
            format=self.name,
            messages=msgs,
            title=st.name or st.title,
            model=model,
            started_at=as_str(h.get("timestamp")),
            global_id=bool(UUID_RE.match(ext)),
            metadata={k: v for k, v in metadata.items() if v not in (None, {}, [], "")},
        )
