"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON record per line. ``user``/``assistant``/``system`` records form a tree through
``uuid``/``parentUuid``; the conversation is the path from the newest record back to the
root (rewinds and abandoned branches hang off it). Other record types (``progress``,
``file-history-snapshot``, ``queue-operation``, ``summary``, ...) are bookkeeping.

Quirks handled here:

- One API response is written as several ``assistant`` records, one content block each,
  all sharing ``message.id`` and a copy of the usage; they become one Message, usage once.
- Parallel tool calls make side branches: the second ``tool_use`` block and the results of
  the earlier ones hang off siblings of the main path. Records of a model call that is on
  the main path (same ``message.id``) and results of its ``tool_use`` ids are kept; other
  off-path records are rewinds and are counted as ``off-chain``.
- ``system``/``compact_boundary`` has ``parentUuid: null`` and ``logicalParentUuid``
  pointing at the pre-compaction history; the walk follows it, so the boundary and the
  following ``isCompactSummary`` user record sit after the history they replaced.
- ``system``/``local_command`` records are sent to the model as user text (Claude Code's
  API normalisation turns them into user messages); other ``system`` records are not.
  ``isApiErrorMessage`` assistant records are Claude Code's own error notices, not model
  output: skipped and counted. ``attachment`` records with text become meta user messages.
- ``<session>/subagents/agent-*.jsonl`` are Task sub-agent sessions (child sessions of
  ``sessionId``); ``agent-acompact-*.jsonl`` is the compaction call itself. Its records hang
  off the parent session's tree, so all of them are kept in file order.

Streaming: pass 1 keeps a small index per record (offset, type, parent, message id, tool
ids); pass 2 seeks to the records on the main path and yields Messages lazily.
"""

from __future__ import annotations

import json
import re
import sys
from array import array
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from ..records import (
    KIND_CLEARED_TOOL_RESULT,
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    Message,
    Session,
    ToolCall,
    Usage,
)
from .base import (
    ImportContext, Importer, as_int, head_text, image_part, iter_jsonl_at, loads_line, register,
)

# Records that can carry conversation content. Everything else is skipped and counted.
CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "attachment"})
# Record types Claude Code writes; a sniffed record of any other type means another format.
KNOWN_TYPES = frozenset(
    {"user", "assistant", "system", "attachment", "progress", "summary", "custom-title",
     "file-history-snapshot", "queue-operation", "tag", "agent-name"}
)
SYSTEM_KEPT = frozenset({"compact_boundary", "local_command"})

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
AGENT_FILE_RE = re.compile(r"^agent-(.+)\.jsonl$")
# Tags Claude Code wraps slash commands, their output and !bash input in.
COMMAND_TAG_RE = re.compile(
    r"^\s*<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"local-command-caveat|bash-input|bash-stdout|bash-stderr|user-memory-input)>"
)
COMMAND_NAME_RE = re.compile(r"<command-name>\s*([^<]*?)\s*</command-name>")
CLEARED_MARKERS = ("[Old tool result content cleared]",)
TITLE_CANDIDATES = 32


# ---------------------------------------------------------------- pass 1: the index


class _Index:
    """Per-record facts small enough to keep for a huge file; the records stay on disk.

    Everything is a typed array (a few 8-byte numbers a record): ids are kept as
    ``hash(str)`` ints, since on a 1 GB transcript the id strings and dict slots alone would
    cost hundreds of MB. 64-bit hashes of uuids do not collide in practice. ``finish()``
    resolves parents with one sort once the whole file has been seen.
    """

    __slots__ = (
        "offset", "line", "kind", "uid", "puid", "msg", "model", "models", "tu_rec", "tu_id",
        "tr_rec", "tr_id", "sidechain", "titles", "summaries", "linked", "parent",
        "_sorted_uid", "_sorted_at",
    )

    def __init__(self) -> None:
        self.offset = array("q")  # byte offset of the record's line
        self.line = array("q")  # its line number (for messages)
        self.kind: list[str] = []  # "user", "assistant", "system:<subtype>", ... (interned)
        self.uid = array("q")  # hash(uuid), 0: none
        self.puid = array("q")  # hash(parentUuid), 0: none
        self.msg = array("q")  # assistant records: hash(message.id), else 0
        self.model = array("h")  # index into ``models``, -1: none
        self.models: list[str] = []
        self.tu_rec, self.tu_id = array("q"), array("q")  # (assistant record, hash(tool_use id))
        self.tr_rec, self.tr_id = array("q"), array("q")  # (user record, hash(answered id))
        self.sidechain: set[int] = set()
        self.titles: list[tuple[int, str]] = []  # (record, first prompt text) candidates
        self.summaries: list[tuple[str | None, str]] = []  # (leafUuid, summary)
        self.linked = False  # any record names a parent: the file is a tree
        self.parent: Any = None  # numpy int64 array after finish(): parent record or -1

    def __len__(self) -> int:
        return len(self.offset)

    def finish(self) -> None:
        import numpy as np  # lazily: importing the importers must stay cheap for `ctxf --help`

        uid = np.frombuffer(self.uid, dtype=np.int64) if len(self.uid) else np.zeros(0, np.int64)
        puid = np.frombuffer(self.puid, dtype=np.int64) if len(self.puid) else np.zeros(0, np.int64)
        self._sorted_at = np.argsort(uid, kind="stable")
        self._sorted_uid = uid[self._sorted_at]
        self.parent = np.full(len(uid), -1, dtype=np.int64)
        has = puid != 0
        self.parent[has] = self._lookup(puid[has])

    def _lookup(self, hashes: Any) -> Any:
        import numpy as np

        pos = np.searchsorted(self._sorted_uid, hashes)
        pos = np.minimum(pos, max(len(self._sorted_uid) - 1, 0))
        if not len(self._sorted_uid):
            return np.full(len(hashes), -1, dtype=np.int64)
        found = self._sorted_uid[pos] == hashes
        return np.where(found & (hashes != 0), self._sorted_at[pos], -1)

    def find(self, uuid: str | None) -> int | None:
        """The record with this uuid, or None."""
        if not isinstance(uuid, str):
            return None
        import numpy as np

        j = int(self._lookup(np.array([hash(uuid)], dtype=np.int64))[0])
        return j if j >= 0 else None

    def parent_of(self, i: int) -> tuple[int | None, bool]:
        """The parent's index (None at a root), and whether a named parent is missing from the file."""
        p = int(self.parent[i])
        if p >= 0:
            return p, False
        return None, self.puid[i] != 0


def _content_blocks(message: Any) -> list:
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _prompt_text(rec: dict) -> str | None:
    """The text of a user record if it is a real typed prompt (for the title), else None."""
    if rec.get("isMeta") or rec.get("isCompactSummary") or rec.get("toolUseResult") is not None:
        return None
    texts = []
    for b in _content_blocks(rec.get("message")):
        if isinstance(b, dict):
            if b.get("type") == "tool_result":
                return None
            if b.get("type") == "text" and isinstance(b.get("text"), str):
                texts.append(b["text"])
    text = "\n".join(texts).strip()
    if not text or COMMAND_TAG_RE.match(text) or text.startswith(("[Request interrupted", "<")):
        return None
    return text


class _Facts:
    """Session-level facts gathered in pass 1 (ids, versions, counts)."""

    def __init__(self) -> None:
        self.session_ids: list[str] = []
        self.agent_id: str | None = None
        self.versions: list[str] = []
        self.cwds: list[str] = []
        self.branches: list[str] = []
        self.slug: str | None = None
        self.custom_title: str | None = None
        self.first_ts: str | None = None
        self.last_ts: str | None = None
        self.types: Counter = Counter()

    def see(self, rec: dict) -> None:
        for key, bucket in (("sessionId", self.session_ids), ("version", self.versions),
                            ("cwd", self.cwds), ("gitBranch", self.branches)):
            v = rec.get(key)
            # Most records repeat the last value: check that first, the list only on a change.
            if v and (not bucket or v != bucket[-1]) and isinstance(v, str) and v not in bucket \
                    and len(bucket) < 20:
                bucket.append(v)
        if self.agent_id is None and isinstance(rec.get("agentId"), str):
            self.agent_id = rec["agentId"]
        if self.slug is None and isinstance(rec.get("slug"), str):
            self.slug = rec["slug"]
        ts = rec.get("timestamp")
        if isinstance(ts, str) and rec.get("type") in CONVERSATION_TYPES:
            self.first_ts = self.first_ts or ts
            self.last_ts = ts


def _index(path: Path, ctx: ImportContext) -> tuple[_Index, _Facts]:
    idx, facts = _Index(), _Facts()
    for lineno, offset, rec in iter_jsonl_at(path, ctx):
        if not isinstance(rec, dict):
            ctx.warn("record is not a JSON object; skipped", line=lineno)
            ctx.skip("malformed record")
            continue
        t = rec.get("type")
        t = t if isinstance(t, str) else "unknown"
        msg = rec.get("message")
        role = msg.get("role") if isinstance(msg, dict) else None
        if t not in CONVERSATION_TYPES and role in ("user", "assistant"):
            t = role  # e.g. hand-made "type": "tool_result" records: read by role
        kind = t
        if t == "system":
            kind = f"system:{rec.get('subtype') or 'other'}"
        facts.types[kind] += 1
        facts.see(rec)
        if t == "summary":
            if isinstance(rec.get("summary"), str):
                idx.summaries.append((rec.get("leafUuid"), rec["summary"]))
            continue
        if t == "custom-title":
            title = rec.get("customTitle") or rec.get("title")
            if isinstance(title, str) and title.strip():
                facts.custom_title = title.strip()
            continue
        uuid = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
        if uuid is None and t not in CONVERSATION_TYPES:
            continue  # file-history-snapshot, queue-operation, ...: counted, never indexed
        i = len(idx)
        idx.offset.append(offset)
        idx.line.append(lineno)
        idx.kind.append(sys.intern(kind))
        parent = rec.get("parentUuid")
        if not isinstance(parent, str):
            logical = rec.get("logicalParentUuid")  # compact_boundary: the history it replaced
            parent = logical if isinstance(logical, str) else None
        idx.uid.append(hash(uuid) if uuid is not None else 0)
        idx.puid.append(hash(parent) if parent is not None else 0)
        if parent is not None:
            idx.linked = True
        if rec.get("isSidechain"):
            idx.sidechain.add(i)
        mid_hash, model_code = 0, -1
        if t == "assistant":
            msg = rec.get("message")
            if isinstance(msg, dict):
                mid = msg.get("id")
                if isinstance(mid, str):
                    mid_hash = hash(mid)
                    model = msg.get("model")
                    if isinstance(model, str):
                        if model not in idx.models:
                            idx.models.append(sys.intern(model))
                        model_code = idx.models.index(model)
                for b in _content_blocks(msg):
                    if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                        idx.tu_rec.append(i)
                        idx.tu_id.append(hash(b["id"]))
        elif t == "user":
            answered = False
            for b in _content_blocks(rec.get("message")):
                if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                    idx.tr_rec.append(i)
                    idx.tr_id.append(hash(b["tool_use_id"]))
                    answered = True
            if not answered and len(idx.titles) < TITLE_CANDIDATES:
                text = _prompt_text(rec)
                if text:
                    idx.titles.append((i, text[:200]))
        idx.msg.append(mid_hash)
        idx.model.append(model_code)
    idx.finish()
    return idx, facts


# ---------------------------------------------------------------- the main path


def _base(kind: str) -> str:
    return kind.split(":", 1)[0]


def _main_path(path: Path, idx: _Index, *, sidechain: bool, keep_all: bool, ctx: ImportContext) -> array:
    """Indices of the records that make up the conversation, in file order."""
    n = len(idx)
    conv = bytearray(n)  # 1: a conversation record of this session (main or sidechain file)
    for i in range(n):
        if _base(idx.kind[i]) in CONVERSATION_TYPES and (keep_all or (i in idx.sidechain) == sidechain):
            conv[i] = 1
    if keep_all or not idx.linked:
        # The compaction call's records hang off the parent session's tree (their parents
        # are in another file), and a file without parent links has no tree: file order.
        return array("q", (i for i in range(n) if conv[i]))
    leaf = conv.rfind(1)
    if leaf < 0:
        return array("q")
    keep = bytearray(n)
    i: int | None = leaf
    while i is not None and not keep[i]:
        keep[i] = 1
        child = i
        i, missing = idx.parent_of(i)
        if missing:  # read the child again for the parent's uuid: ids are not kept as text
            with open(path, "rb") as f:
                rec = _read_at(f, idx.offset[child], idx.line[child], ctx) or {}
            ref = rec.get("parentUuid") or rec.get("logicalParentUuid") or "?"
            ctx.warn(f"parent record {ref} is not in this file; the conversation starts after it")
    # Parallel tool calls: keep the other blocks of calls on the path and their results.
    import numpy as np

    keep_np = np.frombuffer(keep, dtype=np.uint8).copy()
    conv_np = np.frombuffer(conv, dtype=np.uint8).astype(bool)
    msg = np.frombuffer(idx.msg, dtype=np.int64) if n else np.zeros(0, np.int64)
    on_path = np.unique(msg[(keep_np == 1) & (msg != 0)])
    keep_np[conv_np & (msg != 0) & np.isin(msg, on_path)] = 1
    if len(idx.tu_rec) and len(idx.tr_rec):
        tu_rec, tu_id = np.frombuffer(idx.tu_rec, np.int64), np.frombuffer(idx.tu_id, np.int64)
        tr_rec, tr_id = np.frombuffer(idx.tr_rec, np.int64), np.frombuffer(idx.tr_id, np.int64)
        answered = tu_id[keep_np[tu_rec] == 1]
        extra = tr_rec[conv_np[tr_rec] & (keep_np[tr_rec] == 0) & np.isin(tr_id, answered)]
        keep_np[extra] = 1
    keep = bytearray(keep_np.tobytes())
    return array("q", (i for i in range(n) if keep[i] and conv[i]))


def _plan(idx: _Index, included: array) -> tuple[array, dict[int, list[int]]]:
    """Emission order: record indices, and the later records of each split model call.

    A call (records sharing a message.id) is emitted where its first record is. Only calls
    split over several records get an entry in the returned dict (first record -> the rest),
    so a huge file of one-record calls costs no dict at all.
    """
    rest: dict[int, list[int]] = {}
    first_of: dict[int, int] = {}  # hash(message.id) -> first record, for the calls seen so far
    order = array("q")
    for i in included:
        mid = idx.msg[i]
        if mid == 0:
            order.append(i)
            continue
        first = first_of.setdefault(mid, i)
        if first == i:
            order.append(i)
        else:
            rest.setdefault(first, []).append(i)
    return order, rest


# ---------------------------------------------------------------- pass 2: messages


def _block_part(b: dict) -> dict[str, Any]:
    """A non-text content block as a small part dict; never a base64 payload."""
    bt = b.get("type") or "unknown"
    if bt == "image":
        src = b.get("source") if isinstance(b.get("source"), dict) else {}
        if src.get("type") == "base64":
            return image_part(base64_data=src.get("data") or "", media_type=src.get("media_type"))
        return image_part(url=src.get("url"), media_type=src.get("media_type"))
    if bt == "document":
        src = b.get("source") if isinstance(b.get("source"), dict) else {}
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


def _usage(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    inp = as_int(u.get("input_tokens"))
    cc = as_int(u.get("cache_creation_input_tokens"))
    cr = as_int(u.get("cache_read_input_tokens"))
    out = as_int(u.get("output_tokens"))
    parts = [x for x in (inp, cc, cr) if x is not None]
    usage = Usage(
        prompt_tokens=sum(parts) if parts else None,
        completion_tokens=out,
        cache_read_tokens=cr,
        cache_creation_tokens=cc,
    )
    return None if usage.is_empty() else usage


class _Converter:
    """Turns the planned records into Messages; remembers tool names by tool_use id."""

    def __init__(self, ctx: ImportContext):
        self.ctx = ctx
        self.tool_names: dict[str, str] = {}

    # -- assistant: one model call, possibly several records
    def call(self, recs: list[dict]) -> Iterator[Message]:
        first = recs[0]
        if any(r.get("isApiErrorMessage") for r in recs):
            self.ctx.skip("api error message")
            return
        texts: list[str] = []
        parts: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        model = None
        stop_reason = None
        best_usage, best_out = None, -1
        for rec in recs:
            msg = rec.get("message") if isinstance(rec.get("message"), dict) else {}
            model = msg.get("model") or model
            stop_reason = msg.get("stop_reason") or stop_reason
            usage = msg.get("usage")
            if isinstance(usage, dict):
                # Each record repeats the call's usage; the last has the final output count.
                out = as_int(usage.get("output_tokens")) or 0
                if out >= best_out:
                    best_usage, best_out = usage, out
            for b in _content_blocks(msg):
                if isinstance(b, str):
                    b = {"type": "text", "text": b}
                if not isinstance(b, dict):
                    continue
                bt = b.get("type")
                if bt == "text":
                    t = b.get("text")
                    if isinstance(t, str) and t.strip():
                        texts.append(t)
                elif bt == "tool_use":
                    name = str(b.get("name") or "")
                    tid = b.get("id") if isinstance(b.get("id"), str) else None
                    if tid:
                        self.tool_names[tid] = name
                    args = b.get("input", {})
                    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                    calls.append(ToolCall(name=name, arguments=arguments, id=tid))
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
        if stop_reason:
            meta["stop_reason"] = stop_reason
        if synthetic:
            meta["synthetic"] = True
        elif model:
            meta["request"] = {"model": model}
        yield Message(
            role="assistant",
            text="\n\n".join(texts),
            tool_calls=tuple(calls),
            parts=tuple(parts),
            usage=None if synthetic else _usage(best_usage),
            timestamp=first.get("timestamp"),
            model=None if synthetic else model,
            meta=meta,
        )

    # -- a single user / system / attachment record
    def record(self, rec: dict, line: int, kind: str) -> Iterator[Message]:
        t = _base(kind)
        if t == "user":
            yield from self._user(rec, line)
        elif t == "assistant":  # an assistant record without message.id
            yield from self.call([rec])
        elif t == "system":
            yield from self._system(rec)
        elif t == "attachment":
            yield from self._attachment(rec)

    def _user(self, rec: dict, line: int) -> Iterator[Message]:
        msg = rec.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, (str, list)):
            self.ctx.warn("user record without message content; skipped", line=line)
            self.ctx.skip("malformed user record")
            return
        ts = rec.get("timestamp")
        meta: dict[str, Any] = {"uuid": rec.get("uuid")}
        if rec.get("isMeta"):
            meta["is_meta"] = True
        if rec.get("isVisibleInTranscriptOnly"):
            meta["transcript_only"] = True
        texts: list[str] = []
        parts: list[dict[str, Any]] = []
        for b in _content_blocks(msg):
            if isinstance(b, str):
                texts.append(b)
                continue
            if not isinstance(b, dict):
                continue
            bt = b.get("type")
            if bt == "tool_result":
                yield self._tool_result(b, ts, rec.get("uuid"))
            elif bt == "text":
                if isinstance(b.get("text"), str):
                    texts.append(b["text"])
            else:
                parts.append(_block_part(b))
        if not texts and not parts:
            return
        text = "\n".join(texts)
        kind = KIND_COMPACTION_SUMMARY if rec.get("isCompactSummary") else "message"
        if kind == "message":
            _command_meta(text, meta)
        yield Message(role="user", text=text, kind=kind, parts=tuple(parts), timestamp=ts, meta=meta)

    def _tool_result(self, b: dict, ts: Any, uuid: Any) -> Message:
        tid = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None
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

    def _system(self, rec: dict) -> Iterator[Message]:
        sub = rec.get("subtype")
        content = rec.get("content") if isinstance(rec.get("content"), str) else ""
        meta: dict[str, Any] = {"uuid": rec.get("uuid")}
        if sub == "compact_boundary":
            cm = rec.get("compactMetadata") if isinstance(rec.get("compactMetadata"), dict) else {}
            meta["compactMetadata"] = cm
            for key in ("trigger", "preTokens"):
                if key in cm:
                    meta[key] = cm[key]
            yield Message(
                role="system",
                text=content or "Conversation compacted",
                kind=KIND_COMPACTION_BOUNDARY,
                timestamp=rec.get("timestamp"),
                meta=meta,
            )
        elif sub == "local_command":
            # Sent to the model as user text, like the <command-name> user records.
            meta["system_subtype"] = "local_command"
            _command_meta(content, meta)
            yield Message(role="user", text=content, timestamp=rec.get("timestamp"), meta=meta)

    def _attachment(self, rec: dict) -> Iterator[Message]:
        att = rec.get("attachment") if isinstance(rec.get("attachment"), dict) else {}
        atype = att.get("type") or "unknown"
        text = next((att[k] for k in ("content", "text", "prompt") if isinstance(att.get(k), str)), None)
        if not text:
            self.ctx.skip(f"attachment:{atype}")
            return
        yield Message(
            role="user",
            text=text,
            timestamp=rec.get("timestamp"),
            meta={"uuid": rec.get("uuid"), "attachment": atype, "is_meta": True},
        )


def _read_at(f: BinaryIO, offset: int, line: int, ctx: ImportContext) -> Any:
    f.seek(offset)
    try:
        return loads_line(f.readline(), None, line)
    except json.JSONDecodeError:  # the file changed between the two passes
        ctx.warn("record changed while reading the file; skipped", line=line)
        ctx.skip("unreadable record")
        return None


# ---------------------------------------------------------------- the importer


@register
class ClaudeCode(Importer):
    name = "claude_code"
    description = "Claude Code session transcripts (~/.claude/projects/*/<session>.jsonl, subagents/)"
    extensions = (".jsonl",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        lines = text.split("\n")
        complete = lines[:-1] if len(head) >= 64 * 1024 else lines
        for line in complete[:40]:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break  # not JSONL, or a first line cut by the head: use the key test below
            if not isinstance(rec, dict):
                return False
            t = rec.get("type")
            if "sessionId" in rec and "parentUuid" in rec and isinstance(t, str):
                return True
            if "sessionId" in rec and "uuid" in rec and isinstance(rec.get("message"), dict):
                return True  # records without parent links (hand-made or very old files)
            if t not in KNOWN_TYPES:
                return False
            if t == "summary" and "leafUuid" in rec:
                return True
            # file-history-snapshot / queue-operation: Claude Code's, but look for a second clue
        # A first record longer than the head: look for the key combination instead.
        return all(k in text for k in ('"parentUuid"', '"sessionId"', '"isSidechain"'))

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        idx, facts = _index(path, ctx)
        agent_match = AGENT_FILE_RE.match(path.name)
        # A sub-agent file: agent-*.jsonl, or records that are all sidechain with an agentId.
        all_sidechain = len(idx) > 0 and len(idx.sidechain) == len(idx)
        is_agent = bool(agent_match) or (facts.agent_id is not None and all_sidechain)
        agent_id = facts.agent_id or (agent_match.group(1) if agent_match else None)
        is_compaction = bool(agent_id and agent_id.startswith("acompact"))
        sidechain = is_agent or all_sidechain

        included = _main_path(path, idx, sidechain=sidechain, keep_all=is_compaction, ctx=ctx)
        inc = bytearray(len(idx))
        for i in included:
            inc[i] = 1
        self._count_skips(idx, facts, inc, sidechain, is_compaction, ctx)
        plan = _plan(idx, included)

        session_id = facts.session_ids[0] if facts.session_ids else None
        if is_agent:
            external_id = agent_id or path.stem
            parent = session_id or (path.parent.parent.name if path.parent.name == "subagents" else None)
            global_id = False
        else:
            external_id = session_id or path.stem
            parent = None
            global_id = bool(UUID_RE.match(external_id))

        first_model: dict[int, int] = {}  # one count per call, from its first record
        for i in included:
            if idx.msg[i] and idx.model[i] >= 0:
                first_model.setdefault(idx.msg[i], idx.model[i])
        calls = Counter(
            idx.models[code] for code in first_model.values() if idx.models[code] != "<synthetic>"
        )
        model = calls.most_common(1)[0][0] if calls else None
        title = facts.custom_title or self._summary_title(idx, inc)
        if not title:
            title = next((t for i, t in idx.titles if inc[i]), None)
            title = title or (idx.titles[0][1] if idx.titles else None)
            title = title.splitlines()[0][:100] if title else None

        metadata: dict[str, Any] = {
            "versions": facts.versions,
            "cwd": facts.cwds[0] if facts.cwds else None,
            "gitBranch": facts.branches[0] if facts.branches else None,
            "records": dict(facts.types),
            "model_calls": dict(calls),
            "main_path_records": len(included),
        }
        if len(facts.cwds) > 1:
            metadata["cwds"] = facts.cwds
        if len(facts.branches) > 1:
            metadata["gitBranches"] = facts.branches
        if len(facts.session_ids) > 1:
            metadata["session_ids"] = facts.session_ids
        if facts.slug:
            metadata["slug"] = facts.slug
        if facts.last_ts:
            metadata["ended_at"] = facts.last_ts
        if is_agent:
            metadata["role"] = "compaction_call" if is_compaction else "subagent"
            metadata["agent_id"] = agent_id

        yield Session(
            external_id=external_id,
            format=self.name,
            messages=self._messages(path, idx, plan, ctx),
            title=title,
            model=model,
            started_at=facts.first_ts,
            parent_external_id=parent,
            global_id=global_id,
            metadata={k: v for k, v in metadata.items() if v not in (None, [], {})},
        )

    @staticmethod
    def _summary_title(idx: _Index, inc: bytearray) -> str | None:
        """The ``summary`` record whose leaf is in this file (on the main path first).

        Summaries of other sessions (their leaf is elsewhere) are not this one's title.
        """
        here = [(j, summary) for j, summary in ((idx.find(leaf), summary) for leaf, summary in idx.summaries)
                if j is not None]
        for j, summary in reversed(here):
            if inc[j]:
                return summary
        return here[-1][1] if here else None

    @staticmethod
    def _count_skips(
        idx: _Index, facts: _Facts, inc: bytearray, sidechain: bool, keep_all: bool,
        ctx: ImportContext,
    ) -> None:
        for kind, n in facts.types.items():
            base = kind.split(":")[0]
            if base not in CONVERSATION_TYPES:
                ctx.skip(kind, n)
            elif base == "system" and kind.split(":", 1)[1] not in SYSTEM_KEPT:
                ctx.skip(kind, n)
        off_chain = sidechain_n = 0
        for i, kind in enumerate(idx.kind):
            base = kind.split(":")[0]
            if base not in CONVERSATION_TYPES or inc[i]:
                continue
            if base == "system" and kind.split(":", 1)[1] not in SYSTEM_KEPT:
                continue  # already counted by subtype
            if (i in idx.sidechain) != sidechain and not keep_all:
                sidechain_n += 1
            else:
                off_chain += 1
        if off_chain:
            ctx.skip("off-chain", off_chain)
        if sidechain_n:
            ctx.skip("sidechain", sidechain_n)
            ctx.warn(
                f"{sidechain_n} sidechain (sub-agent) records inside the main transcript were "
                "not imported; newer Claude Code versions write them to subagents/agent-*.jsonl"
            )

    @staticmethod
    def _messages(
        path: Path, idx: _Index, plan: tuple[array, dict[int, list[int]]], ctx: ImportContext
    ) -> Iterator[Message]:
        order, rest = plan
        conv = _Converter(ctx)
        with open(path, "rb") as f:
            for i in order:
                if idx.msg[i]:
                    recs = [_read_at(f, idx.offset[j], idx.line[j], ctx) for j in (i, *rest.get(i, ()))]
                    recs = [r for r in recs if isinstance(r, dict)]
                    if recs:
                        yield from conv.call(recs)
                else:
                    rec = _read_at(f, idx.offset[i], idx.line[i], ctx)
                    if isinstance(rec, dict):
                        yield from conv.record(rec, idx.line[i], idx.kind[i])
