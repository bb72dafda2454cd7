"""Pass 1 over a transcript: every line read once into a compact index of its records.

The index keeps a few numbers a record (byte offset, line, kind, hashed uuid and parent, the
model call's message id, tool_use / tool_result ids) and the session facts (ids, versions,
working directories, titles); the records stay on disk, to be read again at their offsets in
pass 2. The line rules are ``base.iter_jsonl_at``'s (through ``JsonlLines``), inlined for speed;
a line that is not valid JSON keeps its place in the tree as a stub.
"""

from __future__ import annotations

import json
import re
import sys
from array import array
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from .._json import nested_too_deep
from .._text import clip
from ..base import SKIP, ImportContext, JsonlLines, loads_line
from .kinds import COMMAND_TAG_RE, CONVERSATION_TYPES, UNREADABLE

TITLE_CANDIDATES = 32  # typed prompts kept as title candidates
AGENT_TOOLS = frozenset({"Task", "Agent"})  # the tools that start a sub-agent ("Agent" in newer versions)
SPAWNS_KEPT = 500  # sub-agent starts recorded per session at most (the metadata stays small)
_AGENT_ID_RE = re.compile(r"\bagent_?[iI]d:\s*([\w@.-]+)")  # "agentId: a7be2f0" in a Task result's text


class Index:
    """Per-record facts small enough to keep for a huge file; the records stay on disk.

    Everything is a typed array (a few 8-byte numbers a record): ids are kept as
    ``hash(str)`` ints, since on a 1 GB transcript the id strings and dict slots alone would
    cost hundreds of MB. 64-bit hashes of uuids do not collide in practice. ``finish()``
    resolves parents with one sort once the whole file has been seen.
    """

    __slots__ = (
        "offset", "line", "kind", "uid", "puid", "msg", "model", "models", "tu_rec", "tu_id",
        "tr_rec", "tr_id", "sidechain", "titles", "summaries", "linked", "parent", "unreadable",
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
        # Stub records of lines that are not valid JSON, with what could be read of their
        # uuid (True) or not (False): the conversation's tree passes through them.
        self.unreadable: dict[int, bool] = {}

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


class Facts:
    """Session-level facts gathered in pass 1 (ids, versions, counts): see ``build_index``."""

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
        # The sub-agents this transcript started: agentId -> {tool_call_id, tool, description,
        # subagent_type, status}, from the Task / Agent call, its result and its progress records.
        self.spawns: dict[str, dict[str, Any]] = {}


_CHUNK = 4096  # records buffered in lists before they go to the index arrays
_PARENT_RE = re.compile(rb'"parentUuid"\s*:\s*"([^"\\]+)"')


def salvage_links(raw: bytes) -> tuple[str | None, str | None, bool]:
    """``(uuid, parentUuid, exact)`` of a line that is not valid JSON, as far as it can be read.

    A raw control character in a string (a writer that did not escape it) still parses with
    ``strict=False``: both ids are exact. Otherwise (a truncated or torn object) only the
    ``parentUuid``, the first key Claude Code writes, is taken from the raw text; the record's
    own ``uuid`` comes after its message and is not guessed.
    """
    try:
        rec = json.loads(raw.decode("utf-8", errors="replace"), strict=False)
    except (ValueError, RecursionError):
        rec = None
    if isinstance(rec, dict):
        uid, parent = rec.get("uuid"), rec.get("parentUuid") or rec.get("logicalParentUuid")
        return (uid if isinstance(uid, str) else None, parent if isinstance(parent, str) else None, True)
    m = _PARENT_RE.search(raw)
    return None, (m.group(1).decode("utf-8", errors="replace") if m else None), False


def build_index(path: Path, ctx: ImportContext) -> tuple[Index, Facts]:
    """Pass 1: read every record once into the index and the session facts.

    This loop runs once per record of a file that may hold millions: the line reading of
    ``iter_jsonl_at`` (with its rules, through ``JsonlLines``) is inlined, and the index
    numbers are buffered in lists and added to the arrays a chunk at a time.
    """
    idx, facts = Index(), Facts()
    types = facts.types
    session_ids, versions, cwds, branches = facts.session_ids, facts.versions, facts.cwds, facts.branches
    agent_id = slug = first_ts = last_ts = None
    last_seen: tuple = ()  # (sessionId, version, cwd, gitBranch) of the last record
    sidechain, titles, summaries, models = idx.sidechain, idx.titles, idx.summaries, idx.models
    model_codes: dict[str, int] = {}
    kinds: dict[str, str] = {}  # interned kind strings
    conversation = CONVERSATION_TYPES
    columns = (idx.offset, idx.line, idx.uid, idx.puid, idx.msg, idx.model)
    bufs: tuple[list, ...] = ([], [], [], [], [], [])
    offset_add, line_add, uid_add, puid_add, msg_add, model_add = (b.append for b in bufs)
    kind_add = idx.kind.append
    tu_rec_add, tu_id_add = idx.tu_rec.append, idx.tu_id.append
    tr_rec_add, tr_id_add = idx.tr_rec.append, idx.tr_id.append
    linked = False
    agent_calls: dict[str, tuple[str, Any]] = {}  # Task / Agent tool_use id -> (tool, input)
    spawned: dict[str, dict[str, Any]] = {}  # agentId -> {tool_call_id, status}
    n = 0  # records indexed
    lines = JsonlLines(path, ctx)
    pending = False
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    pos = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            offset = pos
            pos += len(raw)
            try:
                rec = loads(raw)
            except decode_error:
                rec = lines.slow(raw, lineno)
                pending = lines.pending is not None
            else:
                if nested_too_deep(raw, rec):  # the guard orjson leaves to us
                    rec = lines.deep(raw, lineno)  # SKIP
                    pending = False
            if rec is SKIP:
                if (pending and lines.pending[0] == lineno) or lines.rejected == lineno:  # type: ignore[index]
                    # Not valid JSON (or nested too deep): skipped and counted by ``lines``. A
                    # stub keeps its place in the tree, so the records after it still reach
                    # the ones before.
                    uid_s, parent_s, exact = salvage_links(raw)
                    idx.unreadable[n] = exact and uid_s is not None
                    n += 1
                    offset_add(offset)
                    line_add(lineno)
                    kind_add(UNREADABLE)
                    uid_add(hash(uid_s) if uid_s is not None else 0)
                    puid_add(hash(parent_s) if parent_s is not None else 0)
                    linked = linked or parent_s is not None
                    msg_add(0)
                    model_add(-1)
                    if n % _CHUNK == 0:
                        for column, buf in zip(columns, bufs):
                            column.fromlist(buf)
                            buf.clear()
                continue
            elif pending:  # the bad line before this one was not the last: skipped and counted
                lines.skip_pending()
                pending = False
            lines.any_line = True
            if not isinstance(rec, dict):
                ctx.warn("record is not a JSON object; skipped", line=lineno)
                ctx.skip("malformed record")
                continue
            get = rec.get
            t0 = get("type")
            msg = get("message")
            if t0 == "user" or t0 == "assistant":
                t = kind = t0
            else:
                t = t0 if isinstance(t0, str) else "unknown"
                if t not in conversation:
                    role = msg.get("role") if isinstance(msg, dict) else None
                    if role in ("user", "assistant"):
                        t = role  # e.g. hand-made "type": "tool_result" records: read by role
                kind = t
                if t == "system":
                    kind = f"system:{get('subtype') or 'other'}"
            types[kind] += 1
            # The first (up to 20) distinct ids, versions, working directories and branches.
            # Most records repeat the last record's four values: one comparison. A value equal
            # to the last record's cannot be added now (it was then, or it was not for a reason
            # that still holds), so only a change needs the checks.
            seen = (get("sessionId"), get("version"), get("cwd"), get("gitBranch"))
            if seen != last_seen:
                last_seen = seen
                for v, bucket in zip(seen, (session_ids, versions, cwds, branches)):
                    if v and (not bucket or v != bucket[-1]) and isinstance(v, str) and v not in bucket \
                            and len(bucket) < 20:
                        bucket.append(v)
            if agent_id is None:
                v = get("agentId")
                if isinstance(v, str):
                    agent_id = v
            if slug is None:
                v = get("slug")
                if isinstance(v, str):
                    slug = v
            ts = get("timestamp")
            if isinstance(ts, str) and type(t0) is str and t0 in conversation:
                first_ts = first_ts or ts
                last_ts = ts
            uuid = get("uuid")
            if not isinstance(uuid, str):
                uuid = None
            if t not in conversation:
                if t == "progress":  # a running sub-agent's progress names it and its Task call
                    data = get("data")
                    if isinstance(data, dict) and data.get("type") == "agent_progress":
                        _spawned(spawned, data.get("agentId"), get("parentToolUseID"), None)
                if t == "summary":
                    if isinstance(get("summary"), str):
                        summaries.append((get("leafUuid"), rec["summary"]))
                    continue
                if t == "custom-title":
                    title = get("customTitle") or get("title")
                    if isinstance(title, str) and title.strip():
                        facts.custom_title = title.strip()
                    continue
                if uuid is None:
                    continue  # file-history-snapshot, queue-operation, ...: counted, never indexed
            i = n
            n += 1
            offset_add(offset)
            line_add(lineno)
            k = kinds.get(kind)
            if k is None:
                k = kinds[kind] = sys.intern(kind)
            kind_add(k)
            parent = get("parentUuid")
            if not isinstance(parent, str):
                logical = get("logicalParentUuid")  # compact_boundary: the history it replaced
                parent = logical if isinstance(logical, str) else None
            uid_add(hash(uuid) if uuid is not None else 0)
            if parent is not None:
                puid_add(hash(parent))
                linked = True
            else:
                puid_add(0)
            if get("isSidechain"):
                sidechain.add(i)
            mid_hash, model_code = 0, -1
            if t == "assistant":
                if isinstance(msg, dict):
                    mid = msg.get("id")
                    if isinstance(mid, str):
                        mid_hash = hash(mid)
                        model = msg.get("model")
                        if isinstance(model, str):
                            model_code = model_codes.get(model, -1)
                            if model_code < 0:
                                models.append(sys.intern(model))
                                model_code = model_codes[model] = len(models) - 1
                    content = msg.get("content")
                    if isinstance(content, list):  # a string is one text block: no tool_use
                        for b in content:
                            if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                                tu_rec_add(i)
                                tu_id_add(hash(b["id"]))
                                name = b.get("name")
                                if isinstance(name, str) and name in AGENT_TOOLS and len(agent_calls) < SPAWNS_KEPT:
                                    agent_calls[b["id"]] = (b["name"], b.get("input"))
            elif t == "user":
                answered = False
                content = msg.get("content") if isinstance(msg, dict) else None
                if isinstance(content, list):
                    for b in content:
                        if isinstance(b, dict) and b.get("type") == "tool_result" and \
                                isinstance(b.get("tool_use_id"), str):
                            tr_rec_add(i)
                            tr_id_add(hash(b["tool_use_id"]))
                            answered = True
                            if b["tool_use_id"] in agent_calls:  # a sub-agent's result: which agent
                                result = get("toolUseResult")
                                aid = result.get("agentId") if isinstance(result, dict) else None
                                if not isinstance(aid, str):
                                    found = _AGENT_ID_RE.search(_result_text(b.get("content")))
                                    aid = found.group(1) if found else None
                                status = result.get("status") if isinstance(result, dict) else None
                                _spawned(spawned, aid, b["tool_use_id"], status)
                if not answered and len(titles) < TITLE_CANDIDATES:
                    text = _prompt_text(rec)
                    if text:
                        titles.append((i, clip(text, 200)))
            msg_add(mid_hash)
            model_add(model_code)
            if n % _CHUNK == 0:
                for column, buf in zip(columns, bufs):
                    column.fromlist(buf)
                    buf.clear()
    for column, buf in zip(columns, bufs):
        column.fromlist(buf)
    lines.finish()
    idx.linked = linked
    facts.agent_id, facts.slug, facts.first_ts, facts.last_ts = agent_id, slug, first_ts, last_ts
    facts.spawns = _spawns(spawned, agent_calls)
    idx.finish()
    return idx, facts


def _spawned(spawned: dict[str, dict[str, Any]], agent_id: Any, tool_call_id: Any, status: Any) -> None:
    """Note that ``agent_id`` was started by the tool call ``tool_call_id`` (with ``status``)."""
    if not isinstance(agent_id, str) or not agent_id:
        return
    entry = spawned.get(agent_id)
    if entry is None:
        if len(spawned) >= SPAWNS_KEPT:
            return
        entry = spawned[agent_id] = {}
    if isinstance(tool_call_id, str) and "tool_call_id" not in entry:
        entry["tool_call_id"] = tool_call_id
    if isinstance(status, str):
        entry["status"] = status


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _spawns(spawned: dict[str, dict[str, Any]], calls: dict[str, tuple[str, Any]]) -> dict[str, dict[str, Any]]:
    """agentId -> what started it: the call's id, tool, description and sub-agent type, its status."""
    out: dict[str, dict[str, Any]] = {}
    for agent_id, entry in spawned.items():
        tool, args = calls.get(entry.get("tool_call_id", ""), (None, None))
        args = args if isinstance(args, dict) else {}
        row = {"tool_call_id": entry.get("tool_call_id"), "tool": tool,
               "description": args.get("description"), "subagent_type": args.get("subagent_type"),
               "status": entry.get("status")}
        out[agent_id] = {k: v for k, v in row.items() if isinstance(v, str) and v}
    return out


def read_at(f: BinaryIO, offset: int, line: int, ctx: ImportContext) -> Any:
    """The record at ``offset`` (line ``line``), read again in pass 2."""
    f.seek(offset)
    return loads_again(f.readline(), line, ctx)


def loads_again(raw: bytes, line: int, ctx: ImportContext) -> Any:
    """A record read again in pass 2 (pass 1 already warned about bad UTF-8)."""
    try:
        return loads_line(raw, None, line)
    except json.JSONDecodeError:  # the file changed between the two passes
        ctx.warn("record changed while reading the file; skipped", line=line)
        ctx.skip("unreadable record")
        return None
