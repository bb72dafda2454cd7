"""An llm ``logs.db`` opened read-only, and what both of its layouts share: the tables and
columns present, tools and attachments by id, llm's usage columns and timestamps.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from typing import Any, Iterable

from ...records import Usage
from .._images import image_part
from .._json import parse_json
from ..base import ImportContext, as_int

CHUNK = 500  # SQLite's default limit on bound parameters is 999


# Every table this importer reads: one of them a view or computed table fails the file (read
# through ``_sqlite.computed_error``) instead of being left out without a word.
LLM_TABLES = frozenset({
    "attachments", "conversations", "fragments", "messages", "parts", "prompt_attachments",
    "prompt_fragments", "responses", "schemas", "system_fragments", "threads", "tool_calls",
    "tool_responses", "tool_results", "tool_results_attachments", "tools", "turns", "turn_tools",
})


def is_llm_logs(tables: set[str]) -> bool:
    """Whether these tables are an llm logs.db's: the legacy tables, or the message store."""
    return {"responses", "conversations"} <= tables or {"threads", "turns", "messages", "parts"} <= tables


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"pragma table_info([{table}])")}


def json_value(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_json(value)
    except json.JSONDecodeError:  # malformed, or nested too deep
        return None


def iso(value: Any) -> str | None:
    """llm's datetime_utc ("2024-05-01 12:00:00.1+00:00" or naive UTC) as ISO-8601."""
    if not isinstance(value, str) or not value:
        return None
    s = value.strip().replace(" ", "T", 1)
    tail = s[10:]
    if not (s.endswith("Z") or "+" in tail or "-" in tail):
        s += "+00:00"
    return s


def llm_usage(input_tokens: Any, output_tokens: Any, details_json: Any) -> Usage | None:
    details = json_value(details_json)
    details = details if isinstance(details, dict) else {}
    prompt = as_int(input_tokens)
    cache_write = as_int(details.get("cache_creation_input_tokens"))
    cache_read = as_int(details.get("cache_read_input_tokens"))
    if prompt is not None and (cache_write or cache_read):  # Anthropic: input excludes cache
        prompt += (cache_write or 0) + (cache_read or 0)
    if cache_read is None:
        ptd = details.get("prompt_tokens_details") or details.get("input_tokens_details") or {}
        cache_read = as_int(ptd.get("cached_tokens")) if isinstance(ptd, dict) else None
        if cache_read is None:
            cache_read = as_int(details.get("cachedContentTokenCount"))
    ctd = details.get("completion_tokens_details") or details.get("output_tokens_details") or {}
    reasoning = as_int(ctd.get("reasoning_tokens")) if isinstance(ctd, dict) else None
    if reasoning is None:
        reasoning = as_int(details.get("thoughtsTokenCount"))
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=as_int(output_tokens),
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_write,
        reasoning_tokens=reasoning,
    )
    return None if usage.is_empty() else usage


def attachment_part(row: sqlite3.Row | dict[str, Any] | None) -> dict[str, Any]:
    """An attachment row (content trimmed to its head by the query) as a part."""
    if row is None:
        return {"type": "attachment", "missing": True}
    row = dict(row)
    media = row.get("type")
    head = row.get("head")
    size = row.get("size")
    if media and str(media).startswith("image/"):
        if head:
            part = image_part(base64_data=base64.b64encode(bytes(head)).decode("ascii"), media_type=media)
            part["bytes"] = size
        else:
            part = image_part(url=row.get("url"), media_type=media)
            if row.get("path"):
                part["path"] = row["path"]
        return part
    part = {"type": "attachment", "media_type": media}
    for key in ("path", "url"):
        if row.get(key):
            part[key] = row[key]
    if size:
        part["bytes"] = size
    return part


_ATTACHMENT_COLS = "id, type, path, url, substr(content, 1, 65536) as head, length(content) as size"


class LogsDB:
    """An open logs.db: its tables, the columns that vary between llm versions, and the lookups
    both layouts share (tools by id, attachments by id)."""

    def __init__(self, conn: sqlite3.Connection, tables: set[str], fmt: str, ctx: ImportContext) -> None:
        self.conn = conn
        self.tables = tables
        self.fmt = fmt
        self.ctx = ctx
        self.cols = {t: _columns(conn, t) for t in ("responses", "tool_results", "turns") if t in tables}
        self._tools_by_id: dict[int, dict[str, Any]] | None = None

    def q(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    def has(self, *tables: str) -> bool:
        return all(t in self.tables for t in tables)

    # -- shared lookups

    def tools(self) -> dict[int, dict[str, Any]]:
        if self._tools_by_id is None:
            self._tools_by_id = {}
            if self.has("tools"):
                for r in self.q("select id, name, description, input_schema from tools"):
                    self._tools_by_id[r["id"]] = {
                        "name": r["name"],
                        "description": r["description"],
                        "input_schema": json_value(r["input_schema"]) or {},
                    }
        return self._tools_by_id

    def call_request(
        self, request: dict[str, Any], options_json: Any, *, tools: tuple[str, str, Any], schema_id: Any
    ) -> dict[str, Any]:
        """``request`` (a model call's ``meta["request"]``) with what llm recorded of the call:
        its options (``max_tokens`` among them), the tools it offered (``tools``: the link
        table, its key column and the call's key) and its schema."""
        options = json_value(options_json)
        if options:
            request["options"] = options
            if "max_tokens" in options:
                request["max_tokens"] = options["max_tokens"]
        table, column, key = tools
        if self.has(table, "tools"):
            by_id = self.tools()
            listed = [
                by_id[r["tool_id"]]
                for r in self.q(f"select tool_id from {table} where {column} = ? order by tool_id", [key])
                if r["tool_id"] in by_id
            ]
            if listed:
                request["tools"] = listed
        if schema_id and self.has("schemas"):
            schema = self.q("select content from schemas where id = ?", [schema_id])
            if schema:
                request["schema"] = json_value(schema[0]["content"])
        return request

    def attachments(self, ids: list[str]) -> dict[str, sqlite3.Row]:
        out: dict[str, sqlite3.Row] = {}
        if not self.has("attachments"):
            return out
        for i in range(0, len(ids), CHUNK):
            chunk = ids[i : i + CHUNK]
            marks = ",".join("?" * len(chunk))
            for r in self.q(f"select {_ATTACHMENT_COLS} from attachments where id in ({marks})", chunk):
                out[r["id"]] = r
        return out
