"""The ``gemini_cli`` importer: sniffs Gemini CLI session files and checkpoints and yields their
sessions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from ...records import Message, Session, history_edit
from .._text import title_line
from ..base import (
    ImportContext,
    Importer,
    as_dict,
    as_list,
    as_str,
    first_jsonl_record,
    head_text,
    load_json,
    register,
)
from ..cassette.gemini import gemini_content
from .convert import Converter
from .log import Log, read_log

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_RECORD_HEAD = re.compile(r'^\{\s*"sessionId"\s*:\s*"[^"]*"\s*,\s*"projectHash"\s*:')
_TOOL_CHECKPOINT_HEAD = re.compile(r'^\{\s*"(history|clientHistory)"\s*:\s*\[')
PROMPT_ID_SEP = "########"  # a prompt id is <sessionId>########<n> (useGeminiStream)


def _is_content(v: Any) -> bool:
    return isinstance(v, dict) and isinstance(v.get("parts"), list) and set(v) <= {"role", "parts"}


@register
class GeminiCli(Importer):
    """Gemini CLI chats (JSON and JSONL), sub-agent chats, /chat save and tool checkpoints."""

    name = "gemini_cli"
    description = ("Gemini CLI sessions (~/.gemini/tmp/<project>/chats/session-*.json[l], sub-agents in "
                   "chats/<session>/, checkpoint-*.json, checkpoints/*.json)")
    extensions = (".json", ".jsonl")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if text.startswith("{"):
            rec = first_jsonl_record(head)
            if rec is not None:
                if isinstance(rec.get("sessionId"), str) and isinstance(rec.get("projectHash"), str):
                    return "messages" in rec or "startTime" in rec or "kind" in rec or "lastUpdated" in rec
                return self._checkpoint_object(path, rec)
            if _RECORD_HEAD.match(text):  # a pretty-printed ConversationRecord
                return True
            if path.name.startswith("checkpoint-") and re.match(r'^\{\s*"history"\s*:\s*\[\s*(\]|\{\s*"(role|parts)")',
                                                                 text):
                return True
            return path.parent.name == "checkpoints" and bool(_TOOL_CHECKPOINT_HEAD.match(text)) and (
                '"clientHistory"' in text or '"toolCall"' in text or len(head) >= 64 * 1024)
        if text.startswith("[") and path.name.startswith("checkpoint-"):
            return bool(re.match(r'^\[\s*(\]|\{\s*"(role|parts)"\s*:)', text))
        return False

    @staticmethod
    def _checkpoint_object(path: Path, rec: dict[str, Any]) -> bool:
        if isinstance(rec.get("clientHistory"), list) and isinstance(rec.get("toolCall"), dict):
            return True
        return (path.name.startswith("checkpoint-") and isinstance(rec.get("history"), list)
                and all(_is_content(c) for c in rec["history"][:5]))

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        text = head_text(path.read_bytes()[:4096]) if path.stat().st_size else ""
        rec = first_jsonl_record(text.encode()) if text.startswith("{") else None
        single = rec is not None and "\n" not in text.strip()[:4096]
        if text.startswith("[") or (path.name.startswith("checkpoint-") and not _RECORD_HEAD.match(text)) or (
                path.parent.name == "checkpoints" and _TOOL_CHECKPOINT_HEAD.match(text)):
            yield self._checkpoint(path, ctx)
            return
        # A JSONL log has a complete JSON record on its first line; a pretty-printed record does not.
        jsonl = path.suffix == ".jsonl" or (rec is not None and not single)
        log = read_log(path, ctx, jsonl=jsonl)
        if not log.metadata.get("sessionId") and not log.slots:
            raise InputError("no Gemini CLI session metadata and no message in the file", where=str(path),
                             hint="a session file starts with its sessionId and projectHash; force another "
                             "format with --format")
        yield self._session(path, ctx, log)

    def _session(self, path: Path, ctx: ImportContext, log: Log) -> Session:
        md = log.metadata
        conv = Converter(ctx)
        messages: list[Message] = []
        spans: list[tuple[int, int]] = []
        rewinds = 0
        for i, slot in enumerate(log.slots):
            start = len(messages)
            if slot.edit is not None:
                e = slot.edit
                ranges = _merge([spans[j] for j in e.removed if spans[j][0] < spans[j][1]])
                n = sum(b - a for a, b in ranges)
                if e.type == "rewind":
                    rewinds += 1
                    what = f"to before message {e.target}" if e.found else f"to {e.target} (not in the history: all)"
                    text = f"Gemini CLI rewound the conversation {what}; {n} message(s) left the history"
                    figures = {"rewind_to": e.target}
                else:
                    text = (f"Gemini CLI replaced the history ({e.type}); {n} message(s) left it"
                            + (", a summary follows" if e.type == "compaction" else ""))
                    figures = {}
                messages.append(history_edit(e.type, "summarized" if e.type == "compaction" else "evicted", ranges,
                                             e.source, text, **figures))
            else:
                assert slot.record is not None
                with ctx.record("message", line=slot.line, index=None if slot.line else i):
                    messages.extend(conv.record(slot.record, summary=slot.summary))
            spans.append((start, len(messages)))
        sid = as_str(md.get("sessionId")) or path.stem
        parent = None
        if md.get("kind") == "subagent" or (path.parent.name != "chats" and path.parent.parent.name == "chats"):
            parent = path.parent.name if path.parent.parent.name == "chats" else None
        title = as_str(md.get("summary"))
        if title is None:
            first = next((m for m in messages if m.role == "user" and m.text.strip()), None)
            title = title_line(first.text) if first else None
        metadata: dict[str, Any] = {
            "agent": "gemini-cli",
            "layout": log.layout,
            "project_hash": md.get("projectHash"),
            "kind": md.get("kind"),
            "last_updated": md.get("lastUpdated"),
            "directories": md.get("directories"),
            "summary": md.get("summary"),
            "models": conv.models,
            "recorded_calls": conv.calls,
            "rewinds": rewinds,
            "notices": conv.notices,
            "records": log.counts,
        }
        return Session(
            external_id=sid,
            format=self.name,
            messages=messages,
            title=title,
            model=conv.models[0] if conv.models else None,
            started_at=as_str(md.get("startTime")),
            parent_external_id=parent,
            global_id=bool(UUID_RE.match(sid)),
            metadata={k: v for k, v in metadata.items() if v not in (None, {}, [], "")},
        )

    def _checkpoint(self, path: Path, ctx: ImportContext) -> Session:
        data = load_json(path, ctx)
        metadata: dict[str, Any] = {"agent": "gemini-cli"}
        if isinstance(data, list):
            contents, metadata["layout"] = data, "checkpoint (Content list)"
        elif isinstance(data, dict) and isinstance(data.get("clientHistory"), list):
            contents, metadata["layout"] = data["clientHistory"], "tool checkpoint (clientHistory)"
            tool = as_dict(data.get("toolCall"))
            metadata["tool_call"] = {"name": tool.get("name"), "args": tool.get("args")}
            metadata["commit_hash"] = data.get("commitHash")
            prompt = as_str(data.get("messageId"))
            if prompt:
                metadata["prompt_id"] = prompt
                if PROMPT_ID_SEP in prompt:
                    metadata["session_id"] = prompt.split(PROMPT_ID_SEP, 1)[0]
        elif isinstance(data, dict) and isinstance(data.get("history"), list) and path.parent.name != "checkpoints":
            contents, metadata["layout"] = data["history"], "checkpoint ({history})"
            if data.get("authType") is not None:
                metadata["auth_type"] = data["authType"]
        else:
            raise InputError("a Gemini CLI checkpoint without a model history (clientHistory, history or a "
                             "list of Content)", where=str(path),
                             hint="tool checkpoints written before clientHistory existed hold only the "
                             "terminal's history, which is not what the model saw")
        metadata["window"] = ("the model client's history when the checkpoint was written: the messages are "
                              "exactly what the next call was sent")
        messages: list[Message] = []
        for i, c in enumerate(as_list(contents)):
            with ctx.record("content", index=i):
                if not isinstance(c, dict):
                    raise TypeError(f"a Content must be an object, not {type(c).__name__}")
                messages.extend(gemini_content(c, ctx))
        model = None
        return Session(
            external_id=f"checkpoint:{path.stem}",
            format=self.name,
            messages=messages,
            title=f"checkpoint {path.stem}",
            model=model,
            metadata={k: v for k, v in metadata.items() if v not in (None, {}, [], "")},
        )


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
