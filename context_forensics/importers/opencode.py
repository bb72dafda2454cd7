"""OpenCode sessions: the legacy JSON storage tree (``<data>/storage/``) and the SQLite store
(``<data>/opencode.db``), ``<data>`` being ``$XDG_DATA_HOME/opencode`` (``~/.local/share/opencode``).

Read from anomalyco/opencode (formerly sst/opencode): ``packages/opencode/src/storage/json-migration.ts``
@ 062aa8c024a00b7348dd3160c0b4fbbfce074ee2 (the JSON layout and how it maps onto the tables),
``packages/opencode/src/session/message-v2.ts`` @ 007a9409bafea06d6b9084ff1f6d1fe9f5e3a803 (message and
part shapes; ``toModelMessages``, what a later call is sent; ``filterCompacted``, where a compaction cuts
the history) and ``packages/opencode/src/session/session.sql.ts`` @ 063e8306d9895af9bdd175306cfa4fa3291fd83a
(the tables). No real session store of OpenCode is public: the fixtures are written from this code.

Layout. JSON tree: ``session/<projectID>/<sessionID>.json`` (title, directory, parentID, time),
``message/<sessionID>/<messageID>.json`` (one message's info), ``part/<messageID>/<partID>.json`` (its
parts). SQLite: tables ``session``, ``message`` {id, session_id, time_created, data} and ``part`` {id,
message_id, session_id, data}, ``data`` being the same JSON minus the ids. Messages are read in
(time created, id) order, parts in id order, as OpenCode does.

What the model saw (``toModelMessages``):

- a user message: its text parts (not ``ignored``), its files (a placeholder part; text/plain and
  directories were already turned into text parts), a ``compaction`` part as the text "What did we
  do so far?", a ``subtask`` part as "The following tool was executed by the user";
- an assistant message: one model call per ``step-start`` ... ``step-finish`` (the AI SDK's steps),
  each with its text, reasoning and tool calls; a ``tool`` part gives the call (``state.input``) and
  its result (``state.output``; ``error``; a pending or running tool as "[Tool execution was
  interrupted]"). ``step-finish.tokens`` is that call's recorded usage: ``input`` (without the cache),
  ``cache.read``, ``cache.write`` (the prompt is their sum, as OpenCode's ``getUsage`` splits it),
  ``output``, ``reasoning``. An assistant message with an ``error`` is not sent again (unless aborted
  after some output): a recorded edit drops it after its call.

Compactions (ground truth): a user message with a ``compaction`` part {auto, overflow, tail_start_id}
asks for a summary; the assistant message answering it (``summary: true``, finished, no error) is
the summary. From the next call on, the history starts at that compaction message (or at
``tail_start_id``, a kept tail): a recorded edit (``compaction``, summarized) right after the summary.
OpenCode's pruning sets ``state.time.compacted`` on old tool results, which later calls read as
"[Old tool result content cleared]": a recorded edit (``prune``, cleared) before the first message
created after that time.

Other parts (``step-start``, ``snapshot``, ``patch``, ``agent``, ``retry``) are OpenCode's own state:
counted, not read; a part type not known here is skipped and counted as unknown. The project,
todo, permission and share records are not conversation.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import InputError
from ..records import Message, Session, ToolCall, Usage, history_edit, position_runs
from ._json import parse_json
from ._sqlite import SessionRows, read_store, sniff_sqlite, sqlite_names, table_columns
from ._text import title_line
from .base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    as_int,
    as_str,
    epoch_iso,
    json_text,
    load_json,
    register,
)

DB_NAME = "opencode.db"  # the SQLite store's name in OpenCode's data folder
SOURCE = "opencode 062aa8c0 (storage/json-migration.ts), 007a9409 (session/message-v2.ts)"
COMPACTION_PROMPT = "What did we do so far?"  # message-v2.ts: a compaction part's text
SUBTASK_PROMPT = "The following tool was executed by the user"
INTERRUPTED = "[Tool execution was interrupted]"
STATE_PARTS = frozenset({"step-start", "snapshot", "patch", "agent", "retry"})
KNOWN_PARTS = STATE_PARTS | {"text", "reasoning", "file", "tool", "step-finish", "compaction", "subtask"}
TABLES = ("session", "message", "part")


def _ms_iso(value: Any) -> str | None:
    """OpenCode's times are unix milliseconds."""
    n = as_int(value)
    return epoch_iso(n / 1000) if n is not None else None


def usage_of(tokens: Any) -> Usage | None:
    """A step-finish's (or message's) ``tokens`` as a Usage: prompt = input + cache read + cache write."""
    t = as_dict(tokens)
    cache = as_dict(t.get("cache"))
    inp, out = as_int(t.get("input")), as_int(t.get("output"))
    read, write, reasoning = as_int(cache.get("read")), as_int(cache.get("write")), as_int(t.get("reasoning"))
    if inp is None and out is None:
        return None
    if not any((inp, out, read, write)):
        return None  # all zero: no call's figures (a message that never reached the provider)
    return Usage(prompt_tokens=(inp or 0) + (read or 0) + (write or 0), completion_tokens=out,
                 cache_read_tokens=read, cache_creation_tokens=write, reasoning_tokens=reasoning or None)


@dataclass
class _Step:
    texts: list[str] = field(default_factory=list)
    parts: list[dict[str, Any]] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[tuple[str, str, str, Any]] = field(default_factory=list)  # call id, tool, text, compacted at
    usage: Usage | None = None
    finish: str | None = None
    cost: Any = None

    def empty(self) -> bool:
        return not (self.texts or self.parts or self.calls or self.usage)


class Converter:
    """One session's messages (info, parts) into ctxf messages, in order."""

    def __init__(self, ctx: ImportContext) -> None:
        self.ctx = ctx
        self.out: list[Message] = []
        self.first_pos: dict[str, int] = {}  # OpenCode message id -> its first position
        self.tool_pos: dict[str, int] = {}  # tool call id -> its result's position
        self.prunes: list[tuple[int, str]] = []  # (time compacted, call id), not yet applied
        self.compaction_requests: dict[str, dict[str, Any]] = {}  # user message id -> compaction part
        self.compactions = 0
        self.calls = 0
        self.model: str | None = None

    def convert(self, messages: Iterable[tuple[dict[str, Any], list[dict[str, Any]]]]) -> list[Message]:
        for info, parts in messages:
            with self.ctx.record("message", index=as_str(info.get("id")) or "?"):
                self._apply_prunes(as_int(as_dict(info.get("time")).get("created")))
                role = info.get("role")
                mid = str(info.get("id") or "")
                self.first_pos.setdefault(mid, len(self.out))
                if role == "user":
                    self._user(info, parts)
                elif role == "assistant":
                    self._assistant(info, parts)
                else:
                    self.ctx.skip(f"message of role {role!r}", unknown=True)
        self._apply_prunes(None)
        return self.out

    # ------------------------------------------------------------ user

    def _user(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        texts: list[str] = []
        extra: list[dict[str, Any]] = []
        for p in parts:
            kind = p.get("type")
            if kind == "text":
                if p.get("ignored"):
                    self.ctx.skip("ignored text part")
                    continue
                texts.append(as_str(p.get("text")) or "")
            elif kind == "file":
                mime = as_str(p.get("mime")) or ""
                if mime in ("text/plain", "application/x-directory"):
                    self.ctx.skip("file part read as text")  # OpenCode sent its text as a text part
                    continue
                extra.append({"type": "file", "mime": mime, "filename": as_str(p.get("filename")) or ""})
            elif kind == "compaction":
                texts.append(COMPACTION_PROMPT)
                self.compaction_requests[str(info.get("id"))] = p
            elif kind == "subtask":
                texts.append(SUBTASK_PROMPT)
            else:
                self._other_part(kind)
        if not texts and not extra:
            self.ctx.skip("user message without sent content")
            return
        meta = {"opencode_id": info.get("id"), "agent": info.get("agent")}
        if info.get("id") in self.compaction_requests:
            meta["compaction_request"] = True
        self.out.append(Message(role="user", text="\n".join(texts), parts=tuple(extra),
                                timestamp=_ms_iso(as_dict(info.get("time")).get("created")), meta=meta))

    # ------------------------------------------------------------ assistant

    def _assistant(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        model = as_str(info.get("modelID"))
        provider = as_str(info.get("providerID"))
        self.model = model or self.model
        steps: list[_Step] = []
        cur = _Step()
        stepped = False
        for p in parts:
            kind = p.get("type")
            if kind == "step-start":
                stepped = True
                if not cur.empty():
                    steps.append(cur)
                cur = _Step()
            elif kind == "step-finish":
                stepped = True
                cur.usage = usage_of(p.get("tokens"))
                cur.finish = as_str(p.get("reason"))
                cur.cost = p.get("cost")
                steps.append(cur)
                cur = _Step()
            elif kind == "text":
                cur.texts.append(as_str(p.get("text")) or "")
            elif kind == "reasoning":
                cur.parts.append({"type": "thinking", "text": as_str(p.get("text")) or ""})
            elif kind == "tool":
                self._tool(p, cur)
            else:
                self._other_part(kind)
        if not cur.empty():
            steps.append(cur)
        if not stepped and len(steps) == 1 and steps[0].usage is None:
            steps[0].usage = usage_of(info.get("tokens"))  # no step records: the message's own figures
        start = len(self.out)
        ts = _ms_iso(as_dict(info.get("time")).get("created"))
        error = as_dict(info.get("error"))
        base_meta: dict[str, Any] = {"opencode_id": info.get("id"), "provider": provider}
        if info.get("summary"):
            base_meta["opencode_summary"] = True
        if error:
            base_meta["error"] = as_str(error.get("name")) or "error"
        for step in steps:
            meta = dict(base_meta)
            if step.finish:
                meta["finish"] = step.finish
            if step.cost is not None:
                meta["cost"] = step.cost
            if step.usage is not None:
                self.calls += 1
            self.out.append(Message(role="assistant", text="\n".join(step.texts), tool_calls=tuple(step.calls),
                                    parts=tuple(step.parts), usage=step.usage, timestamp=ts, model=model,
                                    meta=meta))
            for call_id, tool, text, compacted in step.results:
                self.tool_pos[call_id] = len(self.out)
                self.out.append(Message(role="tool", text=text, name=tool, tool_call_id=call_id, timestamp=ts))
                if compacted is not None:
                    self.prunes.append((compacted, call_id))
        if not steps:
            self.ctx.skip("assistant message without content")
            return
        kept_after_abort = error.get("name") == "MessageAbortedError" and any(
            p.get("type") not in ("step-start", "reasoning") for p in parts)
        if error and not kept_after_abort:
            # toModelMessages leaves a failed message out of every later call
            self.out.append(history_edit(
                "failed_call", "evicted", [(start, len(self.out))], f"{SOURCE}: assistant error",
                f"OpenCode left this failed reply ({base_meta['error']}) out of later calls"))
            return
        parent = str(info.get("parentID") or "")
        if info.get("summary") and info.get("finish") and parent in self.compaction_requests:
            self._compaction(parent, self.compaction_requests.pop(parent))

    def _tool(self, p: dict[str, Any], step: _Step) -> None:
        state = as_dict(p.get("state"))
        call_id = as_str(p.get("callID")) or as_str(p.get("id")) or ""
        tool = as_str(p.get("tool")) or "?"
        status = state.get("status")
        step.calls.append(ToolCall(name=tool, arguments=json_text(state.get("input") or {}), id=call_id))
        compacted = None
        if status == "completed":
            text = as_str(state.get("output")) or ""
            compacted = as_int(as_dict(state.get("time")).get("compacted"))
        elif status == "error":
            meta = as_dict(state.get("metadata"))
            out = meta.get("output") if meta.get("interrupted") is True else None
            text = out if isinstance(out, str) else as_str(state.get("error")) or ""
        elif status in ("pending", "running"):
            text = INTERRUPTED
        else:
            self.ctx.skip(f"tool state {status!r}", unknown=True)
            text = ""
        step.results.append((call_id, tool, text, compacted))

    def _other_part(self, kind: Any) -> None:
        if kind in STATE_PARTS:
            self.ctx.skip(f"{kind} part")
        else:
            self.ctx.skip(f"part of type {kind!r}", unknown=True)

    # ------------------------------------------------------------ edits

    def _compaction(self, request_id: str, part: dict[str, Any]) -> None:
        req = self.first_pos.get(request_id)
        if req is None:
            return
        tail = as_str(part.get("tail_start_id"))
        end = self.first_pos.get(tail, req) if tail else req
        end = min(end, req)
        self.compactions += 1
        figures: dict[str, Any] = {"auto": part.get("auto") is True, "overflow": part.get("overflow") is True}
        if tail:
            figures["tail_start_id"] = tail
        kept = " (a tail from tail_start_id kept)" if tail and tail in self.first_pos else ""
        self.out.append(history_edit(
            "compaction", "summarized", [(0, end)] if end > 0 else [], f"{SOURCE}: compaction part + summary",
            f"OpenCode compaction ({'auto' if figures['auto'] else 'manual'}): later calls start at the "
            f"compaction request and its summary{kept}", **figures))

    def _apply_prunes(self, before: int | None) -> None:
        """Apply the prunings recorded (``time.compacted``) up to ``before`` (all when None)."""
        due = [(t, c) for t, c in self.prunes if before is None or t <= before]
        if not due:
            return
        positions = sorted(self.tool_pos[c] for _, c in due if c in self.tool_pos)
        self.prunes = [x for x in self.prunes if x not in due]
        if positions:
            self.out.append(history_edit(
                "prune", "cleared", position_runs(positions), f"{SOURCE}: tool state.time.compacted",
                f"OpenCode pruned {len(positions)} old tool output(s): later calls read "
                f"'[Old tool result content cleared]'", compacted_at=_ms_iso(max(t for t, _ in due))))


def _session(fmt: str, sid: str, info: dict[str, Any], messages: list[tuple[dict[str, Any], list[dict[str, Any]]]],
             ctx: ImportContext, extra: dict[str, Any]) -> Session | None:
    if not messages:
        ctx.skip("session without messages")
        return None
    conv = Converter(ctx)
    out = conv.convert(messages)
    times = as_dict(info.get("time"))
    metadata: dict[str, Any] = {"agent": "opencode", "source": SOURCE, "opencode_messages": len(messages),
                                "calls_with_usage": conv.calls, "compactions": conv.compactions,
                                "recorded": "no system prompt or tool definitions (OpenCode does not store them)",
                                **extra}
    for key in ("directory", "version", "slug"):
        if as_str(info.get(key)):
            metadata[key] = info[key]
    title = as_str(info.get("title")) or next((title_line(m.text) for m in out if m.role == "user" and m.text), None)
    return Session(external_id=sid, format=fmt, messages=out, title=title, model=conv.model,
                   started_at=_ms_iso(times.get("created")), parent_external_id=as_str(info.get("parentID")),
                   global_id=True, metadata=metadata)


# ---------------------------------------------------------------- the JSON storage tree


def storage_root(path: Path) -> Path | None:
    """The storage folder at ``path`` (or ``path/storage``): one with ``session/<project>/*.json`` and
    ``message/``. A data folder holding opencode.db beside its storage is no storage folder: a walk
    goes in and reads the two (``OpenCodeStorage`` leaves to the database what it holds)."""
    for root in (path, path / "storage"):
        if root is not path and (path / DB_NAME).is_file():
            continue
        try:
            if not ((root / "session").is_dir() and (root / "message").is_dir()):
                continue
            for project in (root / "session").iterdir():
                if project.is_dir() and any(f.suffix == ".json" for f in project.iterdir()):
                    return root
        except OSError:
            continue
    return None


def _json_files(folder: Path) -> list[Path]:
    try:
        return sorted(f for f in folder.iterdir() if f.suffix == ".json" and f.is_file())
    except OSError:
        return []


def _record_file(f: Path, what: str, ctx: ImportContext) -> dict[str, Any] | None:
    """A message or part file's JSON, its id from the file name (as the migration takes it); an
    unreadable one warned about and counted."""
    try:
        record = as_dict(load_json(f, ctx))
    except InputError as e:
        ctx.warn(f"{what} {f.name}: {e}; skipped it")
        ctx.skip(f"unreadable {what} file")
        return None
    record["id"] = f.stem
    return record


def _sort_key(info: dict[str, Any]) -> tuple[int, str]:
    return (as_int(as_dict(info.get("time")).get("created")) or 0, str(info.get("id") or ""))


@register
class OpenCodeStorage(Importer):
    """OpenCode's JSON storage tree: a session per session/<project>/<id>.json."""

    name = "opencode"
    description = ("OpenCode session storage folder (<data>/storage: session/, message/, part/ JSON files; "
                   "opencode 062aa8c0 / message-v2 007a9409)")
    handles_directories = True
    priority = 18

    def sniff(self, path: Path, head: bytes) -> bool:
        return path.is_dir() and storage_root(path) is not None

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        root = storage_root(path) if path.is_dir() else None
        if root is None:
            raise InputError("no OpenCode storage here (session/<project>/<id>.json and message/)", where=str(path),
                             hint="point at <data>/storage, e.g. ~/.local/share/opencode/storage")
        in_db = _db_sessions(root.parent / DB_NAME, ctx)
        held = 0
        for project in sorted(p for p in (root / "session").iterdir() if p.is_dir()):
            for f in _json_files(project):
                if f.stem in in_db:  # migrated: OpenCode >= 1.1.53 reads it from the database, and so does ctxf
                    held += 1
                    ctx.skip("session opencode.db beside it holds (read from there)")
                    continue
                with ctx.record("session", index=f.stem):
                    session = self._session(root, project.name, f, ctx)
                    if session is not None:
                        yield session
        if held:
            ctx.warn(f"{held} session(s) of this storage are also in {root.parent / DB_NAME} (OpenCode migrated "
                     "them): read from the database, not twice")

    def _session(self, root: Path, project: str, f: Path, ctx: ImportContext) -> Session | None:
        info = as_dict(load_json(f, ctx))
        sid = f.stem  # ids come from the paths, as the migration says
        messages = []
        for mf in _json_files(root / "message" / sid):
            minfo = _record_file(mf, "message", ctx)
            if minfo is None:
                continue
            parts = [p for p in (_record_file(pf, "part", ctx) for pf in _json_files(root / "part" / mf.stem)) if p]
            messages.append((minfo, parts))
        messages.sort(key=lambda m: _sort_key(m[0]))
        return _session(self.name, sid, info, messages, ctx, {"project": project, "layout": "json storage"})


def _db_sessions(db: Path, ctx: ImportContext) -> set[str]:
    """The session ids of the opencode.db beside a storage folder (none when there is none, or it
    cannot be read as one: then the storage's sessions are all read, and the warning says why)."""
    if not db.is_file():
        return set()
    try:
        return set(read_store(db, TABLES, "an OpenCode store",
                              lambda conn: (str(r[0]) for r in conn.execute("SELECT id FROM session")), "OpenCode"))
    except InputError as e:
        ctx.warn(f"{db} beside this storage cannot be read ({e}); every session of the storage is read")
        return set()


# ---------------------------------------------------------------- the SQLite store


def _is_opencode_db(conn: sqlite3.Connection) -> bool:
    names = set(sqlite_names(conn))
    if not set(TABLES) <= names:
        return False
    return ({"id", "session_id", "data"} <= table_columns(conn, "message")
            and {"id", "message_id", "session_id", "data"} <= table_columns(conn, "part")
            and {"id", "title", "directory"} <= table_columns(conn, "session"))


@register
class OpenCodeDatabase(Importer):
    """OpenCode's SQLite store (opencode.db): tables session, message, part."""

    name = "opencode_db"
    description = ("OpenCode SQLite store (<data>/opencode.db: tables session, message, part with JSON data; "
                   "session.sql.ts 063e8306)")
    extensions = (".db",)
    priority = 18

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_sqlite(path, head, _is_opencode_db)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        return read_store(path, TABLES, "an OpenCode store", lambda conn: self._sessions(conn, ctx), "OpenCode")

    def _sessions(self, conn: sqlite3.Connection, ctx: ImportContext) -> Iterator[Session]:
        # Three ordered scans, walked side by side by session id: a lookup per message would scan
        # the part table again each time in a file without OpenCode's indexes (the work budget).
        scols = table_columns(conn, "session")
        wanted = [c for c in ("id", "parent_id", "title", "directory", "version", "slug", "time_created",
                              "project_id") if c in scols]
        sessions = conn.execute(f"SELECT {', '.join(wanted)} FROM session ORDER BY id")
        order = "time_created, id" if "time_created" in table_columns(conn, "message") else "id"
        messages = SessionRows(conn.execute(f"SELECT session_id, id, data FROM message ORDER BY session_id, {order}"))
        parts = SessionRows(conn.execute("SELECT session_id, message_id, id, data FROM part "
                                     "ORDER BY session_id, message_id, id"))
        for row in sessions:
            s = dict(row)
            sid = str(s["id"])
            with ctx.record("session", index=sid):
                by_message: dict[str, list[dict[str, Any]]] = {}
                for pr in parts.take(sid, ctx, "part of no session"):
                    part = self._data(pr[2], pr[3], "part", ctx)
                    if part is not None:
                        part["id"] = str(pr[2])
                        by_message.setdefault(str(pr[1]), []).append(part)
                convo = []
                for r in messages.take(sid, ctx, "message of no session"):
                    info = self._data(r[1], r[2], "message", ctx)
                    if info is not None:
                        info["id"] = str(r[1])
                        convo.append((info, by_message.pop(str(r[1]), [])))
                if by_message:
                    ctx.skip("part of no message", sum(len(v) for v in by_message.values()))
                info = {"title": s.get("title"), "directory": s.get("directory"), "version": s.get("version"),
                        "slug": s.get("slug"), "parentID": s.get("parent_id"),
                        "time": {"created": s.get("time_created")}}
                if order == "id":  # no time column: OpenCode's own order, by the messages' times
                    convo.sort(key=lambda m: _sort_key(m[0]))
                session = _session(self.name, sid, info, convo, ctx,
                                   {"project": s.get("project_id"), "layout": "opencode.db"})
                if session is not None:
                    yield session
        messages.rest(ctx, "message of no session")
        parts.rest(ctx, "part of no session")

    def _data(self, rid: Any, data: Any, what: str, ctx: ImportContext) -> dict[str, Any] | None:
        try:
            if not isinstance(data, (str, bytes)):
                raise TypeError(f"data is {type(data).__name__}, not JSON text")
            value = parse_json(data, ctx)
            if not isinstance(value, dict):
                raise TypeError(f"data is {type(value).__name__}, not an object")
            return value
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what=what, index=str(rid))
            return None

