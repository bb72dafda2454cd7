"""Claude Code records as Messages: a model call's records (one content block each, sharing
``message.id``) as one assistant message with its usage once; a user record as its tool
results (one tool message each) and its text; compaction boundaries, local commands and
attachments; API error notices and other system records left out and counted.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...records import (
    KIND_CLEARED_TOOL_RESULT,
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    Message,
    ToolCall,
    Usage,
    history_edit,
    position_runs,
)
from .._images import image_part
from ..base import ImportContext, as_dict, as_int, str_or_none
from .kinds import COMMAND_TAG_RE, base_kind

COMMAND_NAME_RE = re.compile(r"<command-name>\s*([^<]*?)\s*</command-name>")
CLEARED_MARKERS = ("[Old tool result content cleared]",)


def _str(v: Any) -> str | None:
    """A string field (a timestamp) as it is; any other value (a list, a number) as None."""
    return v if type(v) is str else None


def _block_part(b: dict) -> dict[str, Any]:
    """A non-text content block as a small part dict; never a base64 payload."""
    bt = b.get("type")
    if type(bt) is not str or not bt:
        bt = "unknown"
    if bt == "image":
        src = as_dict(b.get("source"))
        if src.get("type") == "base64":
            return image_part(base64_data=src.get("data") or "", media_type=src.get("media_type"))
        return image_part(url=src.get("url"), media_type=src.get("media_type"))
    if bt == "document":
        src = as_dict(b.get("source"))
        part: dict[str, Any] = {"type": "document"}
        if src.get("media_type"):
            part["media_type"] = src["media_type"]
        data = src.get("data")
        if isinstance(data, str):
            part["bytes"] = len(data) * 3 // 4 if src.get("type") == "base64" else len(data)
        if b.get("title"):
            part["title"] = b["title"]
        return part
    if bt == "thinking":
        part = {"type": "thinking", "text": b.get("thinking") or ""}
        if isinstance(b.get("signature"), str) and b["signature"]:
            part["signature_bytes"] = len(b["signature"])
        return part
    if bt == "redacted_thinking":
        return {"type": "redacted_thinking", "bytes": len(b.get("data") or "")}
    if bt == "server_tool_use":
        return {"type": "server_tool_use", "id": b.get("id"), "name": b.get("name"),
                "input": b.get("input")}
    if bt.endswith("_tool_result"):  # web_search_tool_result etc., inside assistant content
        return {"type": bt, "tool_use_id": b.get("tool_use_id"),
                "chars": len(json.dumps(b.get("content"), ensure_ascii=False))}
    return {"type": bt}


def _command_meta(text: str, meta: dict[str, Any]) -> None:
    m = COMMAND_TAG_RE.match(text)
    if m:
        meta["command_wrapper"] = m.group(1)
        name = COMMAND_NAME_RE.search(text)
        if name:
            meta["command"] = name.group(1)
    elif text.startswith("[Request interrupted by user"):
        meta["interrupted"] = True


def _int(v: Any) -> int | None:
    """``as_int`` with the common case (a plain int) first."""
    return v if type(v) is int else as_int(v)


def _usage(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    inp = _int(u.get("input_tokens"))
    cc = _int(u.get("cache_creation_input_tokens"))
    cr = _int(u.get("cache_read_input_tokens"))
    out = _int(u.get("output_tokens"))
    if inp is None and cc is None and cr is None:
        if out is None:
            return None  # Usage.is_empty(): nothing recorded
        prompt = None
    else:
        prompt = (inp or 0) + (cc or 0) + (cr or 0)
    return Usage(prompt_tokens=prompt, completion_tokens=out, cache_read_tokens=cr, cache_creation_tokens=cc)


def _json_encoder() -> Any:
    """``json.dumps(value, ensure_ascii=False)`` for parsed JSON values, without its per-call setup.

    ``dumps`` builds a JSONEncoder and then a C encoder on every call; this builds the C
    encoder once, with the same settings. Without circular-reference markers: a value parsed
    from JSON has no cycles.
    """
    from json.encoder import (  # type: ignore[attr-defined]  # private C accelerator, absent from typeshed
        c_make_encoder,
        encode_basestring,
    )

    encoder = json.JSONEncoder(ensure_ascii=False)
    if c_make_encoder is None:
        return encoder.encode
    c_encode = c_make_encoder(
        None, encoder.default, encode_basestring, None, encoder.key_separator, encoder.item_separator,
        encoder.sort_keys, encoder.skipkeys, encoder.allow_nan,
    )
    join = "".join

    def dumps(value: Any) -> str:
        if isinstance(value, str):
            return encoder.encode(value)
        return join(c_encode(value, 0))

    return dumps


_ARGUMENTS_JSON = _json_encoder()


class Converter:
    """Turns the planned records into Messages; remembers tool names by tool_use id.

    Each method returns its messages (a Message, a list, or None) rather than being a
    generator: this runs once per record of a large file.
    """

    def __init__(self, ctx: ImportContext, cwd: str | None = None) -> None:
        self.ctx = ctx
        self.tool_names: dict[str, str] = {}
        self.cwd = cwd  # the session's working folder (its metadata's): a call made elsewhere says so
        # the position in the session of each message given out so far (``emitted``), and of each
        # tool result by its tool_use id: a microcompact_boundary names the results it cleared
        self.emitted = 0
        self.result_at: dict[str, list[int]] = {}

    def emitted_one(self, m: Message) -> Message:
        """Note a message the session gets, at the next position."""
        if m.role == "tool" and m.tool_call_id:
            self.result_at.setdefault(m.tool_call_id, []).append(self.emitted)
        self.emitted += 1
        return m

    # -- assistant: one model call, possibly several records
    def call(self, recs: list[dict] | tuple[dict, ...]) -> Message | None:
        first = recs[0]
        for r in recs:
            if r.get("isApiErrorMessage"):
                self.ctx.skip("api error message")
                return None
        texts: list[str] = []
        parts: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        model = None
        stop_reason = None
        best_usage, best_out = None, -1
        tool_names = self.tool_names
        for rec in recs:
            msg = rec.get("message")
            if not isinstance(msg, dict):
                msg = {}
            m = msg.get("model")
            if m and type(m) is str:
                model = m
            stop_reason = msg.get("stop_reason") or stop_reason
            usage = msg.get("usage")
            if isinstance(usage, dict):
                # Each record repeats the call's usage; the last has the final output count.
                out = _int(usage.get("output_tokens")) or 0
                if out >= best_out:
                    best_usage, best_out = usage, out
            content = msg.get("content")
            if isinstance(content, str):  # one text block
                if content.strip():
                    texts.append(content)
                continue
            if not isinstance(content, list):
                continue
            for b in content:
                if isinstance(b, str):
                    if b.strip():
                        texts.append(b)
                    continue
                if not isinstance(b, dict):
                    continue
                bt = b.get("type")
                if bt == "text":
                    t = b.get("text")
                    if isinstance(t, str) and t.strip():
                        texts.append(t)
                elif bt == "tool_use":
                    name = str(b.get("name") or "")
                    tid = b.get("id")
                    if not isinstance(tid, str):
                        tid = None
                    if tid:
                        tool_names[tid] = name
                    args = b.get("input", {})
                    arguments = args if isinstance(args, str) else _ARGUMENTS_JSON(args)
                    calls.append(ToolCall(name, arguments, tid))
                else:
                    parts.append(_block_part(b))
        synthetic = model == "<synthetic>"
        meta: dict[str, Any] = {
            "uuid": first.get("uuid"),
            "message_id": (first.get("message") or {}).get("id"),
        }
        if len(recs) > 1:
            meta["records"] = len(recs)
        if first.get("requestId"):
            meta["request_id"] = first["requestId"]
        cwd = first.get("cwd")
        if isinstance(cwd, str) and cwd and cwd != self.cwd:  # the shell had moved (``cd``): its relative paths
            meta["cwd"] = cwd
        if stop_reason:
            meta["stop_reason"] = stop_reason
        if synthetic:
            meta["synthetic"] = True
        elif model:
            meta["request"] = {"model": model}
        return Message(
            role="assistant",
            text="\n\n".join(texts),
            tool_calls=tuple(calls),
            parts=tuple(parts),
            usage=None if synthetic else _usage(best_usage),
            timestamp=_str(first.get("timestamp")),
            model=None if synthetic else model,
            meta=meta,
        )

    # -- a single user / system / attachment record
    def record(self, rec: dict, line: int, kind: str) -> list[Message]:
        t = base_kind(kind)
        if t == "user":
            return self.user(rec, line)
        m = None
        if t == "assistant":  # an assistant record without message.id
            m = self.call((rec,))
        elif t == "system":
            m = self._system(rec)
        elif t == "attachment":
            m = self._attachment(rec)
        return [m] if m is not None else []

    def user(self, rec: dict, line: int) -> list[Message]:
        msg = rec.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            blocks: list = [content]  # one text block
        elif isinstance(content, list):
            blocks = content
        else:
            self.ctx.warn("user record without message content; skipped", line=line)
            self.ctx.skip("malformed user record")
            return []
        ts = _str(rec.get("timestamp"))
        meta: dict[str, Any] = {"uuid": rec.get("uuid")}
        if rec.get("isMeta"):
            meta["is_meta"] = True
        if rec.get("isVisibleInTranscriptOnly"):
            meta["transcript_only"] = True
        out: list[Message] = []
        texts: list[str] = []
        parts: list[dict[str, Any]] = []
        for b in blocks:
            if isinstance(b, str):
                texts.append(b)
                continue
            if not isinstance(b, dict):
                continue
            bt = b.get("type")
            if bt == "tool_result":
                out.append(self._tool_result(b, ts, rec.get("uuid")))
            elif bt == "text":
                if isinstance(b.get("text"), str):
                    texts.append(b["text"])
            else:
                parts.append(_block_part(b))
        if not texts and not parts:
            return out
        text = "\n".join(texts)
        kind = KIND_COMPACTION_SUMMARY if rec.get("isCompactSummary") else "message"
        if kind == "message":
            _command_meta(text, meta)
        out.append(Message(role="user", text=text, kind=kind, parts=tuple(parts), timestamp=ts, meta=meta))
        return out

    def _tool_result(self, b: dict, ts: Any, uuid: Any) -> Message:
        tid = b.get("tool_use_id")
        if not isinstance(tid, str):
            tid = None
        content = b.get("content")
        parts: list[dict[str, Any]] = []
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            texts = []
            for c in content:
                if isinstance(c, str):
                    texts.append(c)
                elif isinstance(c, dict) and c.get("type") == "text":
                    texts.append(str(c.get("text") or ""))
                elif isinstance(c, dict):
                    parts.append(_block_part(c))
            text = "\n".join(texts)
        elif content is None:
            text = ""
        else:
            text = json.dumps(content, ensure_ascii=False)
        meta: dict[str, Any] = {"uuid": uuid}
        if b.get("is_error"):
            meta["is_error"] = True
        kind = KIND_CLEARED_TOOL_RESULT if text.strip() in CLEARED_MARKERS else "message"
        return Message(
            role="tool",
            text=text,
            kind=kind,
            name=self.tool_names.get(tid) if tid else None,
            tool_call_id=tid,
            parts=tuple(parts),
            timestamp=ts,
            meta=meta,
        )

    def _system(self, rec: dict) -> Message | None:
        sub = rec.get("subtype")
        content = str_or_none(rec.get("content")) or ""
        meta: dict[str, Any] = {"uuid": rec.get("uuid")}
        if sub == "compact_boundary":
            cm = as_dict(rec.get("compactMetadata"))
            meta["compactMetadata"] = cm
            for key in ("trigger", "preTokens"):
                if key in cm:
                    meta[key] = cm[key]
            return Message(
                role="system",
                text=content or "Conversation compacted",
                kind=KIND_COMPACTION_BOUNDARY,
                timestamp=_str(rec.get("timestamp")),
                meta=meta,
            )
        if sub == "microcompact_boundary":
            return self._microcompact(rec, content)
        if sub == "local_command":
            # Sent to the model as user text, like the <command-name> user records.
            meta["system_subtype"] = "local_command"
            _command_meta(content, meta)
            return Message(role="user", text=content, timestamp=_str(rec.get("timestamp")), meta=meta)
        return None

    def _microcompact(self, rec: dict, content: str) -> Message:
        """A ``microcompact_boundary``: Claude Code cleared the results of the tool calls it names
        (``microcompactMetadata.compactedToolIds``) from the history it sends from here on, without
        a summary (Claude Code's ``createMicrocompactBoundaryMessage``: trigger, preTokens,
        tokensSaved, compactedToolIds, clearedAttachmentUUIDs). A recorded edit of the history
        (type ``microcompact``, action ``cleared``): those results stay in the log in full, and the
        replay clears them at the marker. Ids no earlier result answers are counted in the marker."""
        raw = rec.get("microcompactMetadata")
        mm = raw if isinstance(raw, dict) else {}
        ids = [i for i in mm.get("compactedToolIds") or () if isinstance(i, str)] \
            if isinstance(mm.get("compactedToolIds"), list) else []
        at = sorted(p for i in dict.fromkeys(ids) for p in self.result_at.get(i, ()))
        missing = [i for i in dict.fromkeys(ids) if i not in self.result_at]
        figures: dict[str, Any] = {"uuid": rec.get("uuid"), "compacted_tool_ids": len(ids)}
        for key, name in (("preTokens", "tokens_before"), ("tokensSaved", "tokens_saved")):
            if _int(mm.get(key)) is not None:
                figures[name] = _int(mm.get(key))
        if isinstance(mm.get("trigger"), str):
            figures["trigger"] = mm["trigger"]
        attachments = mm.get("clearedAttachmentUUIDs")
        if isinstance(attachments, list) and attachments:
            figures["cleared_attachments"] = len(attachments)  # not modelled: attachments are user text here
        if missing:
            figures["unmatched_tool_ids"] = len(missing)
            self.ctx.warn(f"microcompact_boundary {rec.get('uuid')}: {len(missing)} of {len(ids)} compacted tool "
                          "id(s) answer no earlier tool result of the session; those are not cleared")
        saved = f", {figures['tokens_saved']:,} tokens saved" if "tokens_saved" in figures else ""
        text = (content or "Context microcompacted") + f" ({len(at)} tool result(s) cleared{saved})"
        m = history_edit("microcompact", "cleared", position_runs(at), "claude_code:microcompact_boundary", text,
                         **figures)
        return Message(role=m.role, text=m.text, kind=m.kind, timestamp=_str(rec.get("timestamp")), meta=m.meta)

    def _attachment(self, rec: dict) -> Message | None:
        att = as_dict(rec.get("attachment"))
        atype = att.get("type") or "unknown"
        text = next((att[k] for k in ("content", "text", "prompt") if isinstance(att.get(k), str)), None)
        if not text:
            self.ctx.skip(f"attachment:{atype}")
            return None
        return Message(
            role="user",
            text=text,
            timestamp=_str(rec.get("timestamp")),
            meta={"uuid": rec.get("uuid"), "attachment": atype, "is_meta": True},
        )
