"""What the JSON importers' sniffers share: a tolerant parser for a file's head, JSONL
detection, and the marks of documents that belong to another importer.

The provider importers (``openai_chat``, ``openai_responses``, ``anthropic_messages``,
``generic_json``) all read "a JSON document or JSONL of records"; each decides from the first
64 KiB whether a file is its own. ``head_records`` gives them the same view of that head,
``foreign_document`` the same list of files that other, more specific importers own.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any, Iterable

from ..errors import InputError
from ._json import IntGuard, decode
from .base import _json_error, as_str, head_text

# ---------------------------------------------------------------- tolerant head parsing

_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[{}\[\]:,]|[^\s{}\[\]:,"]+|"')  # possessive: see _json._BRACKETS
_LIST_KEEP = 8  # elements kept per list while sniffing; the rest is parsed and dropped


def partial_json(head: bytes | str) -> Any:
    """Parse as much of a (possibly truncated) JSON document as the head holds.

    Containers cut off by the head end are returned as far as they go; lists keep their
    first few elements. Returns None when the head does not start like JSON. Cheap enough
    for ``sniff``: one regex pass over at most 64 KiB, once per head: the sniffers that read
    the same head share one parse (the last few are kept; callers only read the result).
    """
    return _partial_json(head)


@functools.lru_cache(maxsize=4)
def _partial_json(head: bytes | str) -> Any:
    text = head_text(head) if isinstance(head, bytes) else head.lstrip("\ufeff").lstrip()
    if not text or text[0] not in "[{":
        return None
    stack: list[list[Any]] = []  # [container, pending key, expecting_key]
    root: Any = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in "{[":
            value: Any = {} if tok == "{" else []
            if stack:
                if not _put(stack[-1], value):
                    return root
            else:
                root = value
            stack.append([value, None, tok == "{"])
            continue
        if tok in "}]":
            if not stack:
                return root
            stack.pop()
            if not stack:
                return root
            continue
        if not stack:
            return root
        top = stack[-1]
        if tok == ",":
            if isinstance(top[0], dict):
                top[2] = True
            continue
        if tok == ":":
            top[2] = False
            continue
        if tok == '"':  # unterminated string: the head ends inside it
            return root
        if tok.startswith('"'):
            if "\\" not in tok:  # no escape: the string is what the quotes hold (most keys and values)
                value = tok[1:-1]
            else:
                try:
                    value = json.loads(tok, parse_int=IntGuard())
                except json.JSONDecodeError:
                    value = tok[1:-1]
        else:
            value = {"true": True, "false": False, "null": None}.get(tok, tok)
            if isinstance(value, str):
                try:
                    value = json.loads(tok, parse_int=IntGuard())
                except json.JSONDecodeError:
                    return root
        if isinstance(top[0], dict) and top[2]:
            top[1] = value if isinstance(value, str) else str(value)
            continue
        _put(top, value)
    return root


def _put(frame: list[Any], value: Any) -> bool:
    container = frame[0]
    if isinstance(container, dict):
        if frame[1] is None:
            return False
        container[frame[1]] = value
        frame[1] = None
    elif len(container) < _LIST_KEEP:
        container.append(value)
    # else: past the kept elements; the value is still parsed (for structure) and dropped
    return True


def looks_like_jsonl(path: Path, head: bytes) -> bool:
    """A JSONL file: a .jsonl/.ndjson name, or a complete JSON first line with more after it."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return True
    text = head_text(head)
    first, sep, rest = text.partition("\n")
    if not sep or not rest.strip() or not first.strip().startswith("{"):
        return False
    try:
        json.loads(first, parse_int=IntGuard())
    except json.JSONDecodeError:
        return False
    return True


def head_records(path: Path, head: bytes) -> tuple[str, Any]:
    """("jsonl", first record) or ("json", partial document) for sniffing."""
    if looks_like_jsonl(path, head):
        line = head_text(head).split("\n", 1)[0]
        return "jsonl", partial_json(line)
    return "json", partial_json(head)


def head_jsonl_records(head: bytes, limit: int = 64) -> list[Any]:
    """The records of a JSONL head's lines, at most ``limit`` (a line that does not parse, such
    as the one the head cuts off, is left out)."""
    out: list[Any] = []
    for line in head_text(head).split("\n"):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line, parse_int=IntGuard()))
        except (json.JSONDecodeError, RecursionError):
            continue
        if len(out) >= limit:
            break
    return out


# A sniffer claims a JSONL file only when this share of the records its head holds are its kinds:
# a file whose first record happens to look like one (a Gemini CLI stream-json transcript starts
# with a {"type": "message", "role": ...} line) is another format's.
RECORD_SHARE = 0.9


def mostly(records: list[Any], is_mine: Any) -> bool:
    """Whether at least ``RECORD_SHARE`` of ``records`` (and at least one) pass ``is_mine``."""
    if not records:
        return False
    return sum(1 for r in records if is_mine(r)) >= RECORD_SHARE * len(records)


# A file no importer takes is read whole, to say why, up to this size (beyond it: "unknown format").
_DIAGNOSE_BYTES = 256 << 20


def unreadable_document(path: Path, head: bytes) -> InputError | None:
    """Why a file no importer's ``sniff`` accepts cannot be read, when the file itself says: it
    is empty (or blank), or it is JSON (named ``.json``/``.jsonl``, or starting like JSON) that
    does not parse, with its line and column. None: a well-formed file of no known shape.

    The sniffers see only a lenient parse of the head, so without this a syntax error reads as
    "cannot tell which log format this is", and only ``--format`` showed where the file breaks.
    """
    try:
        if path.is_dir() or path.stat().st_size > _DIAGNOSE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    if not body.strip():
        return InputError("empty file" + (" (only whitespace)" if body else ""), where=str(path),
                          hint="nothing to ingest; check the log was written (or exported) whole")
    suffix = path.suffix.lower()
    if suffix not in (".json", ".jsonl", ".ndjson") and body.lstrip()[:1] not in (b"{", b"["):
        return None
    if suffix in (".jsonl", ".ndjson") or looks_like_jsonl(path, head):
        # One record a line: the first one is what the sniffers judged.
        lineno, raw = next((n, r) for n, r in enumerate(body.split(b"\n"), start=1) if r.strip())
        try:
            json.loads(decode(raw, None), parse_int=IntGuard())
        except json.JSONDecodeError as e:
            return _json_error(path, e, line=lineno)
        except RecursionError:
            return None
        return None
    try:
        json.loads(decode(body, None), parse_int=IntGuard())
    except json.JSONDecodeError as e:
        return _json_error(path, e)
    except RecursionError:  # nested past any log: ``importers.nested_head`` says so
        return None
    return None


# Keys of a turn record (generic_json's list of turns), not of a conversation.
TURN_KEYS = frozenset({"turn", "turn_id", "turn_index", "step"})

# Keys that mark another format's document even though it has a "messages" list.
FOREIGN_KEYS = frozenset(
    {
        "info", "trajectory", "trajectory_format", "history", "instance_id",  # SWE-agent family
        "kwargs", "args", "cost", "fncall_messages",  # OpenHands llm_completions
        "eval", "samples", "plan", "results", "stats", "reductions",  # Inspect
        "mapping", "chat_messages", "conversations", "current_node",  # chat exports, ShareGPT
        "payload", "environment", "replay_config", "events", "log", "turns",
        # Letta agent files (.af): the stored messages are not the window (in_context_message_indices is)
        "agent_type", "core_memory", "in_context_message_indices", "in_context_message_ids", "memory_blocks",
    }
)


# Files of a Cline / Roo Code / Kilo Code task folder (``tasks/<id>/``): the conversation is a
# list of Anthropic MessageParams with the extension's extras (modelInfo, metrics); it belongs to
# that task folder, not to the plain provider importers.
AGENT_TASK_FILES = frozenset({"api_conversation_history.json", "ui_messages.json", "task_metadata.json",
                              "context_history.json"})  # the ``cline`` importer reads the folder


# A multi-agent group chat (group_chat.py): turns of named agents, owned by no chat format.
CHAT_ROLES = frozenset({"system", "developer", "user", "human", "assistant", "ai", "model", "tool", "function",
                        "ipython"})
CHAT_TURN_KEYS = frozenset({"content", "role", "name"})


def speaker_of(turn: dict[str, Any]) -> str | None:
    """Who spoke a turn: its ``name``, else its ``role`` when that is no chat role (as written)."""
    name = as_str(turn.get("name"))
    if name:
        return name
    role = as_str(turn.get("role"))
    # case-sensitive: chat APIs write roles in lower case; Magentic-One has an agent named "Assistant"
    return role if role and role not in CHAT_ROLES else None


def is_chat_turn(t: Any) -> bool:
    return isinstance(t, dict) and "content" in t and ("role" in t or "name" in t) and set(t) <= CHAT_TURN_KEYS


def looks_like_group_chat(turns: list[Any]) -> bool:
    """Turns only (``content`` with ``role`` / ``name``, nothing else: no tool calls) and at least
    two distinct named speakers that are no chat role."""
    if not turns or not all(is_chat_turn(t) for t in turns):
        return False
    speakers = {s for t in turns if (s := speaker_of(t)) and s not in CHAT_ROLES}
    return len(speakers) >= 2


def foreign_document(path: Path, head: bytes, doc: Any) -> bool:
    """True for files other importers own (OpenHands per-call logs, agent trajectories)."""
    if path.parent.name == "llm_completions" or path.name in AGENT_TASK_FILES:
        return True
    if b"You are OpenHands agent" in head[:4096]:
        return True
    if isinstance(doc, list) and looks_like_group_chat(doc):
        return True
    return isinstance(doc, dict) and bool(FOREIGN_KEYS & doc.keys())


# Content-part or block types that only Anthropic messages carry.
ANTHROPIC_BLOCK_TYPES = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
     "web_search_tool_result", "document", "search_result"}
)


def mentions_type(text: str, types: Iterable[str]) -> bool:
    """Whether the head text holds a ``"type": "<t>"`` pair for one of ``types``."""
    return any(f'"type": "{t}"' in text or f'"type":"{t}"' in text for t in types)


__all__ = [
    "AGENT_TASK_FILES",
    "ANTHROPIC_BLOCK_TYPES",
    "CHAT_ROLES",
    "FOREIGN_KEYS",
    "TURN_KEYS",
    "foreign_document",
    "head_jsonl_records",
    "head_records",
    "is_chat_turn",
    "looks_like_group_chat",
    "looks_like_jsonl",
    "mentions_type",
    "mostly",
    "partial_json",
    "speaker_of",
    "unreadable_document",
]
