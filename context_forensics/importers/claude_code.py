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
ids); pass 2 reads the records on the main path again (in file order, seeking only past the
others) and yields Messages lazily. Both passes run once per record of files that reach
gigabytes, so their loops are written for speed (inlined helpers, locals, no per-record
generators); the rules they follow are the ones stated here and in ``base.iter_jsonl_at``.
"""

from __future__ import annotations

import json
import re
import sys
from array import array
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import orjson

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
    SKIP, ImportContext, Importer, JsonlLines, as_int, head_text, image_part, loads_line, register,
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


class _Facts:
    """Session-level facts gathered in pass 1 (ids, versions, counts): see ``_index``."""

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


_CHUNK = 4096  # records buffered in lists before they go to the index arrays
UNREADABLE = "unreadable"  # the index kind of a line that is not valid JSON
_PARENT_RE = re.compile(rb'"parentUuid"\s*:\s*"([^"\\]+)"')


def _salvage_links(raw: bytes) -> tuple[str | None, str | None, bool]:
    """``(uuid, parentUuid, exact)`` of a line that is not valid JSON, as far as it can be read.

    A raw control character in a string (a writer that did not escape it) still parses with
    ``strict=False``: both ids are exact. Otherwise (a truncated or torn object) only the
    ``parentUuid``, the first key Claude Code writes, is taken from the raw text; the record's
    own ``uuid`` comes after its message and is not guessed.
    """
    try:
        rec = json.loads(raw.decode("utf-8", errors="replace"), strict=False)
    except ValueError:
        rec = None
    if isinstance(rec, dict):
        uid, parent = rec.get("uuid"), rec.get("parentUuid") or rec.get("logicalParentUuid")
        return (uid if isinstance(uid, str) else None, parent if isinstance(parent, str) else None, True)
    m = _PARENT_RE.search(raw)
    return None, (m.group(1).decode("utf-8", errors="replace") if m else None), False


def _index(path: Path, ctx: ImportContext) -> tuple[_Index, _Facts]:
    """Pass 1: read every record once into the index and the session facts.

    This loop runs once per record of a file that may hold millions: the line reading of
    ``iter_jsonl_at`` (with its rules, through ``JsonlLines``) is inlined, and the index
    numbers are buffered in lists and added to the arrays a chunk at a time.
    """
    idx, facts = _Index(), _Facts()
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
                if rec is SKIP:
                    if pending and lines.pending[0] == lineno:  # type: ignore[index]
                        # Not valid JSON: skipped and counted by ``lines``. A stub keeps its place
                        # in the tree, so the records after it still reach the ones before.
                        uid_s, parent_s, exact = _salvage_links(raw)
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
            else:
                if pending:  # the bad line before this one was not the last: skipped and counted
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
            if isinstance(ts, str) and t0 in conversation:
                first_ts = first_ts or ts
                last_ts = ts
            uuid = get("uuid")
            if not isinstance(uuid, str):
                uuid = None
            if t not in conversation:
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
                if not answered and len(titles) < TITLE_CANDIDATES:
                    text = _prompt_text(rec)
                    if text:
                        titles.append((i, text[:200]))
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
    idx.finish()
    return idx, facts


# ---------------------------------------------------------------- the main path


def _base(kind: str) -> str:
    return kind.split(":", 1)[0]


def _nonzero(mask: Any) -> array:
    """Positions of the set bytes of a uint8/bool numpy array, as an ``array("q")``."""
    import numpy as np

    out = array("q")
    out.frombytes(np.flatnonzero(mask).astype(np.int64).tobytes())
    return out


def _mask(n: int, positions: Any) -> bytearray:
    """A bytearray of ``n`` zeros with 1 at ``positions`` (an array("q") or a set of ints)."""
    import numpy as np

    out = np.zeros(n, dtype=np.uint8)
    if isinstance(positions, array):
        if len(positions):
            out[np.frombuffer(positions, dtype=np.int64)] = 1
    elif positions:
        out[np.fromiter(positions, dtype=np.int64, count=len(positions))] = 1
    return bytearray(out.tobytes())


def _conversation_mask(idx: _Index, *, sidechain: bool, keep_all: bool) -> bytearray:
    """1 for each conversation record of this session (main or sidechain file), else 0."""
    n = len(idx)
    is_conv = {k: _base(k) in CONVERSATION_TYPES for k in set(idx.kind)}
    conv = bytearray(map(is_conv.__getitem__, idx.kind))
    if not keep_all:
        if sidechain:  # only the sidechain records
            side = bytearray(n)
            for i in idx.sidechain:
                side[i] = conv[i]
            conv = side
        else:
            for i in idx.sidechain:
                conv[i] = 0
    return conv


def _main_path(path: Path, idx: _Index, *, sidechain: bool, keep_all: bool, ctx: ImportContext) -> array:
    """Indices of the records that make up the conversation, in file order."""
    import numpy as np

    n = len(idx)
    conv = _conversation_mask(idx, sidechain=sidechain, keep_all=keep_all)
    conv_np = np.frombuffer(conv, dtype=np.uint8).astype(bool) if n else np.zeros(0, bool)
    if keep_all or not idx.linked:
        # The compaction call's records hang off the parent session's tree (their parents
        # are in another file), and a file without parent links has no tree: file order.
        return _nonzero(conv_np)
    leaf = conv.rfind(1)
    if leaf < 0:
        return array("q")
    keep = bytearray(n)
    parent = array("q")
    parent.frombytes(idx.parent.astype(np.int64).tobytes())
    puid = idx.puid
    i: int | None = leaf
    while i is not None and not keep[i]:
        keep[i] = 1
        p = parent[i]
        if p >= 0:
            i = p
            continue
        child, i = i, None
        if puid[child] != 0:  # a named parent is missing from the file
            # Read the child again for the parent's uuid: ids are not kept as text.
            with open(path, "rb") as f:
                if idx.kind[child] == UNREADABLE:
                    f.seek(idx.offset[child])
                    ref = _salvage_links(f.readline())[1] or "?"
                else:
                    rec = _read_at(f, idx.offset[child], idx.line[child], ctx) or {}
                    ref = rec.get("parentUuid") or rec.get("logicalParentUuid") or "?"
            # An unreadable line before the child whose own uuid could not be read is most
            # likely that parent: join the conversation across it, and say so.
            stub = max((j for j, known in idx.unreadable.items() if not known and j < child and not keep[j]),
                       default=None)
            if stub is not None:
                ctx.warn(f"parent record {ref} of line {idx.line[child]} is not in this file; taken to be the "
                         f"unreadable line {idx.line[stub]} before it (its own uuid is lost), and the "
                         "conversation is joined across that line", line=idx.line[stub])
                i = stub
                continue
            ctx.warn(f"parent record {ref} is not in this file; the conversation starts after it")
    # Parallel tool calls: keep the other blocks of calls on the path and their results.
    keep_np = np.frombuffer(keep, dtype=np.uint8).copy()
    msg = np.frombuffer(idx.msg, dtype=np.int64) if n else np.zeros(0, np.int64)
    on_path = np.unique(msg[(keep_np == 1) & (msg != 0)])
    keep_np[conv_np & (msg != 0) & np.isin(msg, on_path)] = 1
    if len(idx.tu_rec) and len(idx.tr_rec):
        tu_rec, tu_id = np.frombuffer(idx.tu_rec, np.int64), np.frombuffer(idx.tu_id, np.int64)
        tr_rec, tr_id = np.frombuffer(idx.tr_rec, np.int64), np.frombuffer(idx.tr_id, np.int64)
        answered = tu_id[keep_np[tu_rec] == 1]
        extra = tr_rec[conv_np[tr_rec] & (keep_np[tr_rec] == 0) & np.isin(tr_id, answered)]
        keep_np[extra] = 1
    return _nonzero((keep_np == 1) & conv_np)


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
    from json.encoder import c_make_encoder, encode_basestring

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


class _Converter:
    """Turns the planned records into Messages; remembers tool names by tool_use id.

    Each method returns its messages (a Message, a list, or None) rather than being a
    generator: this runs once per record of a large file.
    """

    def __init__(self, ctx: ImportContext):
        self.ctx = ctx
        self.tool_names: dict[str, str] = {}

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
            model = msg.get("model") or model
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
            timestamp=first.get("timestamp"),
            model=None if synthetic else model,
            meta=meta,
        )

    # -- a single user / system / attachment record
    def record(self, rec: dict, line: int, kind: str) -> list[Message]:
        t = _base(kind)
        if t == "user":
            return self._user(rec, line)
        m = None
        if t == "assistant":  # an assistant record without message.id
            m = self.call((rec,))
        elif t == "system":
            m = self._system(rec)
        elif t == "attachment":
            m = self._attachment(rec)
        return [m] if m is not None else []

    def _user(self, rec: dict, line: int) -> list[Message]:
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
        ts = rec.get("timestamp")
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
        content = rec.get("content") if isinstance(rec.get("content"), str) else ""
        meta: dict[str, Any] = {"uuid": rec.get("uuid")}
        if sub == "compact_boundary":
            cm = rec.get("compactMetadata") if isinstance(rec.get("compactMetadata"), dict) else {}
            meta["compactMetadata"] = cm
            for key in ("trigger", "preTokens"):
                if key in cm:
                    meta[key] = cm[key]
            return Message(
                role="system",
                text=content or "Conversation compacted",
                kind=KIND_COMPACTION_BOUNDARY,
                timestamp=rec.get("timestamp"),
                meta=meta,
            )
        if sub == "local_command":
            # Sent to the model as user text, like the <command-name> user records.
            meta["system_subtype"] = "local_command"
            _command_meta(content, meta)
            return Message(role="user", text=content, timestamp=rec.get("timestamp"), meta=meta)
        return None

    def _attachment(self, rec: dict) -> Message | None:
        att = rec.get("attachment") if isinstance(rec.get("attachment"), dict) else {}
        atype = att.get("type") or "unknown"
        text = next((att[k] for k in ("content", "text", "prompt") if isinstance(att.get(k), str)), None)
        if not text:
            self.ctx.skip(f"attachment:{atype}")
            return None
        return Message(
            role="user",
            text=text,
            timestamp=rec.get("timestamp"),
            meta={"uuid": rec.get("uuid"), "attachment": atype, "is_meta": True},
        )


def _read_at(f: BinaryIO, offset: int, line: int, ctx: ImportContext) -> Any:
    f.seek(offset)
    return _loads_again(f.readline(), line, ctx)


def _loads_again(raw: bytes, line: int, ctx: ImportContext) -> Any:
    """A record read again in pass 2 (pass 1 already warned about bad UTF-8)."""
    try:
        return loads_line(raw, None, line)
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
        readable = len(idx) - len(idx.unreadable)  # the stubs of unreadable lines say nothing
        all_sidechain = readable > 0 and len(idx.sidechain) == readable
        is_agent = bool(agent_match) or (facts.agent_id is not None and all_sidechain)
        agent_id = facts.agent_id or (agent_match.group(1) if agent_match else None)
        is_compaction = bool(agent_id and agent_id.startswith("acompact"))
        sidechain = is_agent or all_sidechain

        included = _main_path(path, idx, sidechain=sidechain, keep_all=is_compaction, ctx=ctx)
        inc = _mask(len(idx), included)
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
        import numpy as np

        # Per kind: a conversation record that counts as off-chain or sidechain when it is not
        # included (system records of other subtypes were already counted by subtype).
        counted = {}
        for kind in set(idx.kind):
            base = kind.split(":")[0]
            counted[kind] = base in CONVERSATION_TYPES and not (
                base == "system" and kind.split(":", 1)[1] not in SYSTEM_KEPT
            )
        n = len(idx)
        left_out = np.frombuffer(bytearray(map(counted.__getitem__, idx.kind)), dtype=np.uint8).astype(bool)
        if n:
            left_out &= np.frombuffer(inc, dtype=np.uint8) == 0
        total = int(left_out.sum())
        sidechain_n = 0
        if not keep_all:
            side = np.frombuffer(_mask(n, idx.sidechain), dtype=np.uint8).astype(bool) if n else left_out
            sidechain_n = int((left_out & (side != sidechain)).sum())
        off_chain = total - sidechain_n
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
        """Pass 2: read the planned records again (in file order, mostly without a seek)."""
        order, rest = plan
        conv = _Converter(ctx)
        call, user, other = conv.call, conv._user, conv.record
        msg, offsets, lines, kinds = idx.msg, idx.offset, idx.line, idx.kind
        loads, decode_error = orjson.loads, orjson.JSONDecodeError
        is_user = {k: _base(k) == "user" for k in set(kinds)}
        with open(path, "rb") as f:
            readline, seek = f.readline, f.seek
            pos = 0  # where the file is: planned records mostly follow each other

            def read(j: int) -> Any:
                nonlocal pos
                off = offsets[j]
                if off != pos:
                    seek(off)
                raw = readline()
                pos = off + len(raw)
                try:
                    return loads(raw)  # as in pass 1, orjson succeeds where loads_line would
                except decode_error:
                    return _loads_again(raw, lines[j], ctx)

            for i in order:
                rec = read(i)
                if msg[i]:  # a model call: its first record, and the others of a split call
                    more = rest.get(i) if rest else None
                    if more is None:
                        if isinstance(rec, dict):
                            m = call((rec,))
                            if m is not None:
                                yield m
                        continue
                    recs = [rec] + [read(j) for j in more]
                    recs = [r for r in recs if isinstance(r, dict)]
                    if recs:
                        m = call(recs)
                        if m is not None:
                            yield m
                elif isinstance(rec, dict):
                    if is_user[kinds[i]]:
                        yield from user(rec, lines[i])
                    else:
                        yield from other(rec, lines[i], kinds[i])
