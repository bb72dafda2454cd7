"""The SQLite store: sessions, messages and ingested files, migrated on every open.

Plain SQLite through sqlite-utils, so ``sqlite3``, ``sqlite-utils`` and Datasette can
browse it. Writes of one ingested file happen in one transaction: a failure leaves the
store as it was. The connection runs in autocommit mode and transactions are explicit,
because sqlite-utils' ``with conn:`` blocks would otherwise commit half a file.

The schema and its migrations are in ``migrations.py``; opening the file, transactions, the
write lock and the cache writes' fallback in ``base.py`` (``StoreFile``), on the mechanics of
``connection.py`` (private modes, read-only stores, the lock's wait, checkpoints).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable

import orjson

from ..errors import NotFoundError, StoreError
from ..hashing import ALGO, json_text, short_id
from ..records import NAIVE_TIMES_KEY, Message, Session, ToolCall, Usage, dumps, stored_time
from .base import StoreFile
from .migrations import MIGRATIONS, SCHEMA_VERSION, migrate, migration, now as _now

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Store", "StoredMessage", "WriteResult", "migrate", "migration",
           "session_id"]

# Sessions in the order they started (then by id), and after them those whose logs record no start,
# by id: an order of the logs alone, the same in every store of them. (Placed at the second they
# were stored, undated sessions moved with the clock: stored in one second they tied and went by
# id, with a second turning between them by when they were stored. The audit of files orders its
# report the same way without a store: ``audit.tasks.order_key``.)
_LISTING_ORDER = "started_at IS NULL, started_at, id"

# ---------------------------------------------------------------- records


def session_id(fmt: str, external_id: str, content: str | None = None) -> str:
    """A session's stable id, never from the path its file was read from.

    ``content`` None: from the format and the external id alone, for an id the format says is
    unique across files (``Session.global_id``: a changed file updates that session). Else from
    them and the session's content (``Store.write_session``: its messages' ``content_hash``, the
    identity ``Store.same_run`` has always used): the same run from any folder, any store, is one
    id; another run under the same external id, or a newer version of a file's run, another.
    """
    return short_id(fmt, external_id) if content is None else short_id(fmt, external_id, content)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as read back from the store, with its position and hash."""

    session_id: str
    seq: int
    message: Message
    hash: str

    def __getattr__(self, item: str) -> Any:  # convenience: m.role, m.text, ...
        return getattr(self.message, item)


# What the read path selects, in the order ``_row_to_message`` unpacks (the usage counts are
# duplicated in ``usage`` and the session id is known: neither is read back).
_READ_COLUMNS = "seq, role, text, kind, name, tool_calls, tool_call_id, parts, usage, timestamp, model, meta, hash"


def _row_to_message(sid: str, row: tuple) -> StoredMessage:
    """One message from a plain-tuple row of ``_READ_COLUMNS`` (a replay reads thousands:
    tuples cost less than ``sqlite3.Row`` lookups by name)."""
    seq, role, text, kind, name, calls, tool_call_id, parts, usage, timestamp, model, meta, h = row
    loads = orjson.loads
    text = text or ""
    calls = tuple([ToolCall(**c) for c in loads(calls)]) if calls else ()
    parts = tuple(loads(parts)) if parts else ()
    usage = Usage.from_dict(loads(usage)) if usage else None
    meta = loads(meta) if meta else {}
    msg = Message(role, text, kind, name, calls, tool_call_id, parts, usage, timestamp, model, meta)
    return StoredMessage(sid, seq, msg, h)


_MESSAGE_COLUMNS = (
    "session_id, seq, role, kind, name, text, tool_calls, tool_call_id, parts, model, timestamp, "
    "prompt_tokens, completion_tokens, cache_read_tokens, cache_creation_tokens, usage, hash, meta"
)
_INSERT_MESSAGE = f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES ({', '.join('?' * 18)})"
_USAGE_AT = 14  # the usage column's place in a ``_message_row``


def _message_row(seq: int, m: Message, h: str, timestamp: str | None) -> tuple:
    """A message's row without its session id (written with it: ``(sid, *row)``), its time as stored."""
    calls, parts, meta, u = m.tool_calls, m.parts, m.meta, m.usage
    if u is None:
        prompt = completion = cache_read = cache_creation = usage = None
    else:
        prompt, completion = u.prompt_tokens, u.completion_tokens
        cache_read, cache_creation = u.cache_read_tokens, u.cache_creation_tokens
        usage = json_text(d) if (d := u.to_dict()) else None
    return (
        seq, m.role, m.kind, m.name, m.text,
        json_text([c.to_dict() for c in calls]) if calls else None,
        m.tool_call_id,
        json_text(list(parts)) if parts else None,
        m.model, timestamp,
        prompt, completion, cache_read, cache_creation, usage,
        h,
        json_text(meta) if meta else None,
    )


# Binding None to a statement goes through sqlite3's adaptation protocol unless an adapter
# is registered for NoneType: each NULL parameter cost a failed ``__adapt__``/``__conform__``
# lookup, an AttributeError built and dropped, about half the time of binding a message row
# (most columns of most messages are NULL). ``{}.get`` maps None to None in C, so NULL is still
# bound; the registration is process-wide and changes no value anywhere.
_NULL: dict[None, None] = {}
sqlite3.register_adapter(type(None), _NULL.get)


@dataclass
class WriteResult:
    session_id: str
    messages: int
    replaced: bool  # an older version of this session was replaced
    unchanged: bool  # the replacement had exactly the same content
    content_hash: str = ""  # of the messages written (``sessions.content_hash``)
    # A content id already stored (the same run): nothing was written; the stored one's source.
    stored_source: str | None = None


class Store(StoreFile):
    """One SQLite file. Open with ``Store.open(path)``; use as a context manager to close."""

    BATCH = 2000

    def file_record(self, file_hash: str) -> dict | None:
        row = self.db.execute("SELECT * FROM files WHERE hash = ?", [file_hash]).fetchone()
        return dict(row) if row else None

    def session_count(self) -> int:
        return self.db.execute("SELECT count(*) FROM sessions").fetchone()[0]

    def write_session(
        self,
        session: Session,
        *,
        sid: str | None,
        source: str,
        source_hash: str,
        parent_id: str | None,
    ) -> WriteResult:
        """Write one session and stream its messages in batches. Call inside ``transaction()``.

        ``sid`` None: the id is the session's content's (``session_id``), known once its messages
        have streamed. The first ``BATCH`` of them are held until then (they are held as a batch
        anyway); a longer session is written under a provisional id and renamed at its end. A
        content id already stored is the same run: nothing is written (``stored_source`` says
        where the stored one is from). A given ``sid`` replaces what the store holds under it.

        Times are stored as ``records.stored_time`` says (UTC, one shape); a session with times of
        no zone says how many in its metadata (``NAIVE_TIMES_KEY``: local time, zone unknown).
        """
        started, naive_start = stored_time(session.started_at)
        naive = int(naive_start)
        row: dict[str, Any] = {
            "id": sid,
            "external_id": session.external_id,
            "format": session.format,
            "source": source,
            "source_hash": source_hash,
            "title": session.title,
            "started_at": started,
            "task": session.task,
            "outcome": session.outcome or "unknown",
            "parent_id": parent_id,
            "metadata": dumps(session.metadata) if session.metadata else None,
            "ingested_at": _now(),
        }
        target: str | None = None  # the id the rows are written under, once the session row is
        old = None  # what the store held under ``target`` before

        def begin(wid: str) -> Any:
            nonlocal target
            held = self.db.execute("SELECT content_hash FROM sessions WHERE id = ?", [wid]).fetchone()
            if held is None and self.max_sessions is not None and self.session_count() >= self.max_sessions:
                raise StoreError(
                    f"the store already holds {self.max_sessions} sessions (storage.max_sessions)",
                    where=str(self.path or ":memory:"),
                    hint="raise storage.max_sessions in the config, or remove sessions with `ctxf rm`",
                )
            if held is not None:
                self.db.execute("DELETE FROM messages WHERE session_id = ?", [wid])
                self.db.execute("DELETE FROM replays WHERE session_id = ?", [wid])
            # The session row goes first (messages reference it); counts are filled in after
            # its messages have streamed through.
            row["id"] = target = wid
            self.db.execute(
                f"INSERT OR REPLACE INTO sessions ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                list(row.values()),
            )
            return held

        if sid is not None:
            old = begin(sid)
        digest = hashlib.blake2b(digest_size=16)
        models: dict[str, int] = {}
        count = steps = with_usage = 0
        batch: list[tuple] = []
        hashes: list[str] = []  # of the batch: the digest takes them in one update
        executemany, size, row_of, when = self.db.conn.executemany, self.BATCH, _message_row, stored_time
        for seq, m in enumerate(session.messages):
            h = m.hash
            hashes.append(h)
            ts = m.timestamp
            if ts is not None:
                ts, local = when(ts)
                naive += local
            r = row_of(seq, m, h, ts)
            batch.append(r)
            if m.role == "assistant" and m.kind == "message":
                steps += 1
                if m.model:
                    models[m.model] = models.get(m.model, 0) + 1
            if r[_USAGE_AT] is not None:
                with_usage += 1
            if len(batch) >= size:
                if target is None:  # a long session whose content id is not known yet
                    begin(f"~writing-{secrets.token_hex(8)}")
                digest.update("".join(hashes).encode())
                executemany(_INSERT_MESSAGE, [(target, *r) for r in batch])
                count += len(batch)
                batch.clear()
                hashes.clear()
        if batch:
            digest.update("".join(hashes).encode())
        content = f"{ALGO}:{digest.hexdigest()}"
        if sid is None:
            total = count + len(batch)
            # An empty session has no content of its own but what its log says of it.
            ident = content if total else "\x1f".join((content, session.title or "", started or "",
                                                       row["metadata"] or ""))
            sid = session_id(session.format, session.external_id, ident)
            held = self.db.execute("SELECT source FROM sessions WHERE id = ?", [sid]).fetchone()
            if held is not None:  # the same run, stored before: drop what was written of this copy
                if target is not None:
                    self.db.execute("DELETE FROM messages WHERE session_id = ?", [target])
                    self.db.execute("DELETE FROM sessions WHERE id = ?", [target])
                if parent_id is not None:  # a link its parent's removal took away is made again
                    self.db.execute("UPDATE sessions SET parent_id = ? WHERE id = ? AND parent_id IS NULL",
                                    [parent_id, sid])
                return WriteResult(sid, total, True, True, content, stored_source=held[0])
            if target is None:
                begin(sid)
            else:  # rename the provisional rows (the messages' key is checked at commit)
                self.db.execute("PRAGMA defer_foreign_keys = ON")
                self.db.execute("UPDATE sessions SET id = ? WHERE id = ?", [sid, target])
                self.db.execute("UPDATE messages SET session_id = ? WHERE session_id = ?", [sid, target])
                target = sid
        if batch:
            executemany(_INSERT_MESSAGE, [(target, *r) for r in batch])
            count += len(batch)
        model = session.model or (max(models, key=models.__getitem__) if models else None)
        metadata = row["metadata"]
        if naive:
            metadata = dumps({**(session.metadata or {}), NAIVE_TIMES_KEY: naive})
        self.db.execute(
            "UPDATE sessions SET model = ?, models = ?, message_count = ?, step_count = ?, "
            "usage_count = ?, content_hash = ?, metadata = ? WHERE id = ?",
            [model, dumps(sorted(models)) if models else None, count, steps, with_usage, content, metadata, sid],
        )
        return WriteResult(sid, count, old is not None, old is not None and old[0] == content, content)

    def same_run(self, sid: str, fmt: str, external_id: str, content_hash: str, *,
                 other_than: str | None = None) -> dict | None:
        """Another stored session with this format, external id and (non-empty) content: the
        same run read through another path (not ``other_than``). The earliest ingested one, or None.

        Sessions written since ids are their content's (``session_id``) are found by id; this
        finds those of a store written before, whose ids were their path's."""
        row = self.db.execute(
            "SELECT id, source FROM sessions WHERE content_hash = ? AND format = ? AND external_id = ? "
            "AND id != ? AND source != ? AND message_count > 0 ORDER BY ingested_at, id LIMIT 1",
            [content_hash, fmt, external_id, sid, other_than or ""],
        ).fetchone()
        return dict(row) if row else None

    def missing_sessions(self, ids: list[str]) -> list[str]:
        """The ids among ``ids`` that are not in the store."""
        if not ids:
            return []
        rows = self.db.execute(
            "SELECT value FROM json_each(?) WHERE value NOT IN (SELECT id FROM sessions)", [dumps(ids)]
        ).fetchall()
        return [r[0] for r in rows]

    def sources_other_than(self, ids: list[str], source: str) -> list[dict[str, str]]:
        """``[{"session", "source"}]`` for the sessions among ``ids`` stored from another source."""
        if not ids:
            return []
        rows = self.db.execute(
            "SELECT id, source FROM sessions WHERE id IN (SELECT value FROM json_each(?)) AND source != ? "
            "ORDER BY id", [dumps(ids), source],
        ).fetchall()
        return [{"session": r[0], "source": r[1]} for r in rows]

    def relabel(self, sid: str, *, task: str | None, outcome: str | None) -> None:
        """Set a stored session's task and/or outcome (``ingest --task/--outcome``)."""
        if task is not None:
            self.db.execute("UPDATE sessions SET task = ? WHERE id = ?", [task, sid])
        if outcome is not None:
            self.db.execute("UPDATE sessions SET outcome = ? WHERE id = ?", [outcome, sid])

    def record_file(self, *, file_hash: str, path: str, fmt: str | None, size: int, sessions: list[str],
                    messages: int, warnings: list[str], skipped: dict[str, int]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO files (hash, path, format, size, sessions, message_count, "
            "warnings, skipped, ingested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [file_hash, path, fmt, size, dumps(sessions), messages, dumps(warnings[:200]),
             dumps(skipped), _now()],
        )

    def remove_stale(self, source: str, keep: Iterable[str]) -> int:
        """Delete sessions an earlier version of ``source`` produced that it no longer does."""
        keep = set(keep)
        ids = [r[0] for r in self.db.execute("SELECT id FROM sessions WHERE source = ?", [source])]
        return self.delete_sessions([i for i in ids if i not in keep])

    def delete_session(self, sid: str) -> None:
        self.delete_sessions([sid])

    def delete_sessions(self, ids: Iterable[str]) -> int:
        """Delete sessions with their messages and replays, and forget the file records that
        list them (see ``forget_files``). Call inside ``transaction()``; returns the count."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        # Sub-sessions in other files lose their link to a deleted parent: their file records
        # go too, so re-ingesting them links them again once the parent is back.
        orphans: list[str] = []
        for sid in ids:
            self.db.execute("DELETE FROM replays WHERE session_id = ?", [sid])
            self.db.execute("DELETE FROM messages WHERE session_id = ?", [sid])
            self.db.execute("DELETE FROM sessions WHERE id = ?", [sid])
            orphans += [r[0] for r in self.db.execute("SELECT id FROM sessions WHERE parent_id = ?", [sid])]
            self.db.execute("UPDATE sessions SET parent_id = NULL WHERE parent_id = ?", [sid])
        self.forget_files(ids + orphans)
        return len(ids)

    def forget_files(self, session_ids: Iterable[str], *, keep_hash: str | None = None) -> int:
        """Delete the file records that list any of these sessions (except ``keep_hash``).

        A file record is what lets a re-ingest say "unchanged" without reading the file, so it
        may only stay while every session it lists still holds what that file produced: after
        ``ctxf rm`` (or a session rewritten from another version of its file) a re-ingest must
        read the file again and store what it holds.
        """
        ids = list(dict.fromkeys(session_ids))
        if not ids:
            return 0
        cur = self.db.execute(
            "DELETE FROM files WHERE hash != ? AND hash IN (SELECT f.hash FROM files f, "
            "json_each(CASE WHEN json_valid(f.sessions) THEN f.sessions ELSE '[]' END) j "
            "WHERE j.value IN (SELECT value FROM json_each(?)))",
            [keep_hash or "", dumps(ids)],
        )
        return cur.rowcount

    def replay_lookup(self, key: str) -> dict | None:
        row = self.db.execute("SELECT data FROM replays WHERE key = ?", [key]).fetchone()
        return json.loads(row[0]) if row else None

    def replay_save(self, key: str, sid: str, model: str, policy: str, data: dict) -> bool:
        """Cache a replay; False when the store refuses it (read-only, locked), as ``write_rows``."""
        row = (key, sid, model, policy, json.dumps({**data, "session_id": sid}, separators=(",", ":")), _now())
        return self.write_rows("INSERT OR REPLACE INTO replays (key, session_id, model, policy, data, created_at) "
                               "VALUES (?, ?, ?, ?, ?, ?)", [row])

    # ------------------------------------------------------------ reading

    def sessions(self, *, fmt: str | None = None, task: str | None = None,
                 outcome: str | None = None) -> list[dict]:
        where, args = [], []
        for col, val in (("format", fmt), ("task", task), ("outcome", outcome)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = "SELECT * FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {_LISTING_ORDER}"
        return self._related([_session_dict(r) for r in self.db.execute(sql, args).fetchall()])

    def session(self, sid: str) -> dict:
        """One stored session's row, with its ``parent`` and ``children`` (see ``children``)."""
        row = self.db.execute("SELECT * FROM sessions WHERE id = ?", [sid]).fetchone()
        if row is None:
            raise NotFoundError(f"no session {sid!r} in the store", hint="list them with `ctxf sessions`")
        return self._related([_session_dict(row)])[0]

    def children(self, sid: str) -> list[dict]:
        """The sessions ``sid`` started (its sub-agents, a compaction call), in start order, each
        ``{id, role, agent_id, title, started_at, step_count}`` with what the logs say of the call
        that started it (``tool_call_id``, ``tool``, ``description``, ``subagent_type``, ``status``)."""
        return self.session(sid)["children"]

    def _related(self, rows: list[dict]) -> list[dict]:
        """``rows`` with ``parent`` (None, or ``{id, stored, title, ...the call that started this
        one}``) and ``children`` (``children``'s items) added: two queries for any number of rows.

        What started a child is in its parent's ``metadata["subagents"]`` (keyed by the child's
        ``agent_id``: the parent's log names the call) and in the child's own metadata (a
        sidecar's); the parent's word comes first."""
        ids = [r["id"] for r in rows]
        kids: dict[str, list[dict]] = {}
        for c in self.db.execute(
            "SELECT id, parent_id, title, started_at, step_count, metadata FROM sessions WHERE parent_id IN "
            f"(SELECT value FROM json_each(?)) ORDER BY {_LISTING_ORDER}", [dumps(ids)],
        ).fetchall():
            kids.setdefault(c["parent_id"], []).append(dict(c))
        known = {r["id"]: r for r in rows}
        wanted = [r["parent_id"] for r in rows if r.get("parent_id") and r["parent_id"] not in known]
        parents = {p["id"]: {"id": p["id"], "title": p["title"], "metadata": json.loads(p["metadata"] or "{}")}
                   for p in self.db.execute("SELECT id, title, metadata FROM sessions WHERE id IN "
                                            "(SELECT value FROM json_each(?))", [dumps(wanted)]).fetchall()}
        parents.update(known)
        for r in rows:
            spawns = (r.get("metadata") or {}).get("subagents") or {}
            r["children"] = []
            for c in kids.get(r["id"], []):
                meta = json.loads(c["metadata"]) if c["metadata"] else {}
                r["children"].append({"id": c["id"], "role": meta.get("role") or "subagent",
                                      "agent_id": meta.get("agent_id"), "title": c["title"],
                                      "started_at": c["started_at"], "step_count": c["step_count"],
                                      **_spawn(spawns, meta)})
            pid = r.get("parent_id")
            p = parents.get(pid) if pid else None
            r["parent"] = None if not pid else {
                "id": pid, "stored": p is not None, "title": p["title"] if p else None,
                **_spawn(((p or {}).get("metadata") or {}).get("subagents") or {}, r.get("metadata") or {})}
        return rows

    def messages(self, sid: str) -> list[StoredMessage]:
        cur = self.db.conn.cursor()
        cur.row_factory = None  # plain tuples (see _row_to_message)
        rows = cur.execute(
            f"SELECT {_READ_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq", [sid]
        ).fetchall()
        return [_row_to_message(sid, r) for r in rows]

    def find_sessions(self, prefix: str) -> list[str]:
        rows = self.db.execute(
            "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY id",
            [prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"],
        ).fetchall()
        return [r[0] for r in rows]


_SPAWN_KEYS = ("tool_call_id", "tool", "description", "subagent_type", "status")


def _spawn(spawns: dict, child_meta: dict) -> dict[str, Any]:
    """What started a child session: its parent's record of it (``spawns``, by agent id) first,
    then the child's own metadata; every key of ``_SPAWN_KEYS``, None where no log says."""
    agent = child_meta.get("agent_id")
    said = spawns.get(agent) if isinstance(agent, str) and isinstance(spawns, dict) else None
    said = said if isinstance(said, dict) else {}
    return {k: said.get(k) or child_meta.get(k) for k in _SPAWN_KEYS}


def _session_dict(row: sqlite3.Row) -> dict:
    d = dict(row)
    d["models"] = json.loads(d["models"]) if d.get("models") else []
    d["metadata"] = json.loads(d["metadata"]) if d.get("metadata") else {}
    return d
