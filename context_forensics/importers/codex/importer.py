"""The ``codex`` importer: sniffs a rollout (modern or legacy layout) and yields its session,
messages streamed from one pass over the file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from ...records import Message, Session
from .._json import parse_json
from .._text import title_line
from ..base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_str,
    first_jsonl_record,
    head_text,
    iter_jsonl,
    read_head,
    register,
    str_or_none,
)
from .prescan import Head, prescan
from .rollout import Stream

MODERN_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
LEGACY_META_KEYS = frozenset({"id", "timestamp", "instructions", "git"})
LEGACY_ITEM_TYPES = frozenset(
    {"message", "reasoning", "function_call", "function_call_output", "local_shell_call",
     "custom_tool_call", "custom_tool_call_output", "web_search_call"}
)
UUID_IN_NAME = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", re.I)
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_MODERN_HEAD = re.compile(r'^\{"timestamp":\s*"[^"]*",\s*"type":\s*"session_meta",\s*"payload":\s*\{')


def _find_key(value: Any, key: str, depth: int = 0) -> Any:
    if depth > 4:
        return None
    if isinstance(value, dict):
        if key in value and value[key]:
            return value[key]
        for v in value.values():
            found = _find_key(v, key, depth + 1)
            if found:
                return found
    return None


def _is_legacy_meta(rec: dict[str, Any] | None) -> bool:
    return (
        isinstance(rec, dict)
        and "type" not in rec
        and "id" in rec
        and "timestamp" in rec
        and set(rec) <= LEGACY_META_KEYS | {"cwd", "originator", "cli_version"}
    )


@register
class Codex(Importer):
    """OpenAI Codex CLI rollouts: one session per file, streamed."""

    name = "codex"
    description = "OpenAI Codex CLI rollouts (~/.codex/sessions/**/rollout-*.jsonl, modern and legacy)"
    extensions = (".jsonl",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        rec = first_jsonl_record(head)
        if rec is None:
            # A session_meta line longer than the head (long base instructions).
            return bool(_MODERN_HEAD.match(head_text(head)[:300]))
        if isinstance(rec.get("type"), str) and rec["type"] in MODERN_TYPES and isinstance(rec.get("payload"), dict):
            return True
        if not _is_legacy_meta(rec):
            return False
        if path.name.startswith("rollout-"):
            return True
        # Without the file name, the second line must look like a Codex item.
        lines = head_text(head).split("\n")
        for line in lines[1:6]:
            try:
                nxt = parse_json(line)
            except json.JSONDecodeError:
                continue
            if isinstance(nxt, dict):
                return nxt.get("record_type") == "state" or nxt.get("type") in LEGACY_ITEM_TYPES
        return False

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        first = first_jsonl_record(read_head(path))
        legacy = _is_legacy_meta(first)
        head = prescan(path, legacy)
        meta = head.meta if isinstance(head.meta, dict) else {}

        ext = meta.get("id") if isinstance(meta.get("id"), str) else None
        if not ext:
            m = UUID_IN_NAME.search(path.name)
            ext = m.group(1) if m else path.stem
            ctx.warn("no session id in the file; used the file name")
        global_id = bool(UUID_RE.match(ext))
        title = title_line(head.title) if head.title and head.title.strip() else None
        model = head.models.most_common(1)[0][0] if head.models else as_str(meta.get("model"))
        parent = _find_key(meta.get("source"), "parent_thread_id") or meta.get("parent_thread_id")

        metadata: dict[str, Any] = {
            "layout": "legacy" if legacy else "modern",
            "cli_version": meta.get("cli_version"),
            "originator": meta.get("originator"),
            "source": meta.get("source"),
            "model_provider": meta.get("model_provider"),
            "cwd": meta.get("cwd"),
            "git": meta.get("git"),
            "models": dict(head.models),
            "records": dict(head.types),
            "forked_from_id": meta.get("forked_from_id"),
            # the running total of the last token_count event: ctxf check sets it beside the calls' own figures
            "total_token_usage": head.total_usage,
        }
        if head.extra_meta:
            metadata["extra_session_meta"] = head.extra_meta
        yield Session(
            external_id=ext,
            format=self.name,
            messages=self._messages(path, ctx, legacy, meta, head),
            title=title,
            model=model,
            started_at=meta.get("timestamp") if isinstance(meta.get("timestamp"), str) else None,
            parent_external_id=str(parent) if parent else None,
            global_id=global_id,
            metadata={k: v for k, v in metadata.items() if v not in (None, {}, [], "")},
        )

    def _messages(
        self, path: Path, ctx: ImportContext, legacy: bool, meta: dict[str, Any], head: Head
    ) -> Iterator[Message]:
        stream = Stream(ctx, legacy)
        ts0 = str_or_none(meta.get("timestamp"))
        base = meta.get("base_instructions")
        base = base.get("text") if isinstance(base, dict) else base
        if isinstance(base, str) and base.strip():
            yield Message(role="system", text=base, timestamp=ts0, meta={"source": "base_instructions"})
        instructions = meta.get("instructions")
        if isinstance(instructions, str) and instructions.strip():
            if head.user_instructions_in_items and not legacy:
                ctx.skip("session_meta.instructions (also sent as a user message)")
            else:
                yield Message(role="system", text=instructions, timestamp=ts0,
                              meta={"source": "session_meta.instructions"})
        for index, (line, rec) in enumerate(iter_jsonl(path, ctx)):
            try:
                if not isinstance(rec, dict):
                    ctx.warn("record is not a JSON object; skipped", line=line)
                    ctx.skip("malformed record")
                    continue
                if legacy:
                    if index == 0:
                        continue  # the meta line, read already
                    if rec.get("record_type") == "state":
                        ctx.skip("state")
                        continue
                    stream.response_item(rec, str_or_none(rec.get("timestamp")), line)
                else:
                    self._modern(stream, rec, line, ctx)
                if stream.out:
                    yield from stream.drain()
            except RECORD_ERRORS as e:  # a record of unexpected shape: skipped, the rest kept
                ctx.bad_record(e, line=line)
        yield from stream.finish()
        if len(stream.models) > 1:
            ctx.warn(f"model changed during the session: {' -> '.join(stream.models)}")

    @staticmethod
    def _modern(stream: Stream, rec: dict[str, Any], line: int, ctx: ImportContext) -> None:
        t = rec.get("type")
        p = rec.get("payload")
        ts = str_or_none(rec.get("timestamp"))
        if not isinstance(t, str):
            t = None
        if not isinstance(p, dict):
            if t in MODERN_TYPES:
                ctx.warn(f"{t} record without a payload object; skipped", line=line)
            ctx.skip(f"{t}" if t else "unknown record", unknown=t not in MODERN_TYPES)
            return
        if t == "response_item":
            stream.response_item(p, ts, line)
        elif t == "event_msg":
            stream.event(p, ts)
        elif t == "turn_context":
            stream.turn_context(p)
        elif t == "compacted":
            stream.compacted(p, ts)
        elif t == "inter_agent_communication":
            stream.inter_agent(p, ts)
        elif t == "session_meta":
            ctx.skip("session_meta")
        else:
            ctx.skip(f"{t}", unknown=True)
