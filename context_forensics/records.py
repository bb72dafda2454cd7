"""Plain records shared by importers, the store and every analysis.

Frozen dataclasses, no validation beyond construction: importers normalise whatever a log
format says into these, and everything downstream reads only these. Construction checks the
types of the string fields (a ``TypeError`` naming the field), so a log value of the wrong type
(a list where a timestamp belongs) fails the one record an importer was converting, which it
skips and counts, rather than the store write of the whole file.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from hashlib import blake2b
from typing import Any, Callable, Iterable

from .hashing import ALGO, canonical_json, json_text

ROLES = ("system", "developer", "user", "assistant", "tool")

# Message.kind values. "message" is an ordinary conversation item; the others are special
# records the replay treats as events rather than plain context.
KIND_MESSAGE = "message"
KIND_COMPACTION_SUMMARY = "compaction_summary"  # text that replaced earlier history
KIND_COMPACTION_BOUNDARY = "compaction_boundary"  # marker: history before this was compacted
KIND_CLEARED_TOOL_RESULT = "cleared_tool_result"  # a tool result the framework blanked out
KIND_REASONING = "reasoning"  # a reasoning item the API returned as its own record
# The harness's final record of what a run submitted (a SWE-agent-family patch): the output
# of the last model call's submit action, read by no later call. Never an assistant message,
# so it is never a step; its text holds the submission whole.
KIND_SUBMISSION = "submission"
# A recorded edit of the history (a truncation, a rewind, a condensing that keeps a tail): a
# marker the model never read, placed where the edit happened. meta["history_edit"] says which
# earlier messages left the history (``HistoryEdit``); a summary that replaced them follows it
# as a compaction_summary (part of the same edit).
KIND_HISTORY_EDIT = "history_edit"
# An assistant-role message the harness wrote into a prompt (few-shot examples, canned
# acknowledgements such as Aider's "Ok.", an old answer sent again after a call left it out):
# the model read it, but no call produced it there, so it is never a step.
KIND_SCRIPTED = "scripted"
KINDS = (
    KIND_MESSAGE,
    KIND_COMPACTION_SUMMARY,
    KIND_COMPACTION_BOUNDARY,
    KIND_CLEARED_TOOL_RESULT,
    KIND_REASONING,
    KIND_SUBMISSION,
    KIND_HISTORY_EDIT,
    KIND_SCRIPTED,
)
# Message kinds that are markers, not text the model read: they count no tokens and hold no fact.
MARKER_KINDS = (KIND_COMPACTION_BOUNDARY, KIND_HISTORY_EDIT)

OUTCOMES = ("success", "failure", "unknown")

# Meta flags of a message whose text is not this session's own: another task's example the harness
# replays (``is_demo``), a copy Aider sends again of its chat (``aider_restored``, ``aider_resent``).
# Drift's goal, the replay's task pin and facts' suggestions skip them (``not_own``).
NOT_OWN_META = ("is_demo", "aider_restored", "aider_resent")


def not_own(meta: Any) -> bool:
    """Whether a message's meta marks its text as not this session's own (``NOT_OWN_META``)."""
    return isinstance(meta, dict) and any(meta.get(k) for k in NOT_OWN_META)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage recorded for the model call that produced a message.

    ``prompt_tokens`` is everything the call read, cached or not (for Anthropic:
    input + cache_creation + cache_read), so it compares directly with a window's size.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None
    context_window: int | None = None  # the window the log says the model had, if it says
    # A figure the log prints rounded (Aider's "Tokens: 2.4k sent"): the true count lies within
    # ± this of the figure above (2,400 ± 50: 2,350..2,450). None: the log records it exactly.
    prompt_tokens_error: int | None = None
    completion_tokens_error: int | None = None

    def __init__(
        self,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_creation_tokens: int | None = None,
        reasoning_tokens: int | None = None,
        context_window: int | None = None,
        prompt_tokens_error: int | None = None,
        completion_tokens_error: int | None = None,
    ) -> None:
        # The generated __init__ of a frozen dataclass, for less (see Message.__init__).
        (set_prompt, set_completion, set_cache_read, set_cache_creation, set_reasoning, set_window,
         set_prompt_error, set_completion_error) = _USAGE_SETTERS
        set_prompt(self, prompt_tokens)
        set_completion(self, completion_tokens)
        set_cache_read(self, cache_read_tokens)
        set_cache_creation(self, cache_creation_tokens)
        set_reasoning(self, reasoning_tokens)
        set_window(self, context_window)
        set_prompt_error(self, prompt_tokens_error)
        set_completion_error(self, completion_tokens_error)

    def to_dict(self) -> dict[str, int]:
        # {k: getattr(self, k) for k in self.__slots__ if ... is not None}, unrolled (once per message on ingest)
        d = {}
        if self.prompt_tokens is not None:
            d["prompt_tokens"] = self.prompt_tokens
        if self.completion_tokens is not None:
            d["completion_tokens"] = self.completion_tokens
        if self.cache_read_tokens is not None:
            d["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_creation_tokens is not None:
            d["cache_creation_tokens"] = self.cache_creation_tokens
        if self.reasoning_tokens is not None:
            d["reasoning_tokens"] = self.reasoning_tokens
        if self.context_window is not None:
            d["context_window"] = self.context_window
        if self.prompt_tokens_error:
            d["prompt_tokens_error"] = self.prompt_tokens_error
        if self.completion_tokens_error:
            d["completion_tokens_error"] = self.completion_tokens_error
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Usage | None:
        if not d:
            return None
        return cls(**{k: d[k] for k in cls.__slots__ if d.get(k) is not None})

    def is_empty(self) -> bool:
        return not self.to_dict()


def _slot_setters(cls: type[Any], names: tuple[str, ...]) -> tuple[Callable[[Any, Any], None], ...]:
    """The slot descriptors' setters of a slots dataclass whose fields are ``names``, in that order.

    The hand-written ``__init__`` methods here fill the slots through them; this check keeps
    them in step with the fields.
    """
    if tuple(f.name for f in fields(cls)) != names or cls.__slots__ != names:
        raise RuntimeError(f"{cls.__name__}.__init__ is out of step with its fields")
    return tuple(cls.__dict__[n].__set__ for n in names)


_USAGE_SETTERS = _slot_setters(
    Usage,
    ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens",
     "context_window", "prompt_tokens_error", "completion_tokens_error"),
)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the assistant asked for. ``arguments`` is the raw argument string (usually JSON)."""

    name: str
    arguments: str = ""
    id: str | None = None

    def __init__(self, name: str, arguments: str = "", id: str | None = None) -> None:
        # The generated __init__ of a frozen dataclass, for less (see Message.__init__).
        if not (isinstance(name, str) and isinstance(arguments, str) and (id is None or isinstance(id, str))):
            id = _id(id)
            _wrong_type("ToolCall", ("name", "arguments"), name=name, arguments=arguments, id=id)
        set_name, set_arguments, set_id = _TOOL_CALL_SETTERS
        set_name(self, name)
        set_arguments(self, arguments)
        set_id(self, id)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


_NO_META: Any = object()  # Message(meta=...) not given


@dataclass(frozen=True, slots=True)
class Message:
    """One item of a conversation, in order.

    ``text`` is the readable text (what a person would read, and what is tokenized);
    ``parts`` holds everything that is not plain text as JSON-able dicts: images as
    placeholders ``{"type": "image", "width": .., "height": .., "detail": ..}``, thinking
    blocks, redacted blocks, file references. ``meta`` keeps format-specific extras
    (record uuids, the request parameters of a recorded call, ...).
    """

    role: str
    text: str = ""
    kind: str = KIND_MESSAGE
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    parts: tuple[dict[str, Any], ...] = ()
    usage: Usage | None = None
    timestamp: str | None = None
    model: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __init__(
        self,
        role: str,
        text: str = "",
        kind: str = KIND_MESSAGE,
        name: str | None = None,
        tool_calls: tuple[ToolCall, ...] = (),
        tool_call_id: str | None = None,
        parts: tuple[dict[str, Any], ...] = (),
        usage: Usage | None = None,
        timestamp: str | None = None,
        model: str | None = None,
        meta: dict[str, Any] = _NO_META,  # a new dict each time
    ) -> None:
        # What the generated __init__ and __post_init__ did, for less: a frozen dataclass's
        # __init__ sets every field through object.__setattr__, and importers build one
        # Message per record of a large log. The slots are filled by their descriptors
        # (``_slot_setters``).
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        if not (isinstance(text, str) and (name is None or isinstance(name, str))
                and (tool_call_id is None or isinstance(tool_call_id, str))
                and (timestamp is None or isinstance(timestamp, str)) and (model is None or isinstance(model, str))):
            tool_call_id = _id(tool_call_id)
            _wrong_type("Message", ("text",), text=text, name=name, tool_call_id=tool_call_id, timestamp=timestamp,
                        model=model)
        (set_role, set_text, set_kind, set_name, set_calls, set_call_id, set_parts, set_usage, set_timestamp,
         set_model, set_meta) = _MESSAGE_SETTERS
        set_role(self, role)
        set_text(self, text)
        set_kind(self, kind)
        set_name(self, name)
        set_calls(self, tool_calls)
        set_call_id(self, tool_call_id)
        set_parts(self, parts)
        set_usage(self, usage)
        set_timestamp(self, timestamp)
        set_model(self, model)
        set_meta(self, {} if meta is _NO_META else meta)

    @property
    def hash(self) -> str:
        """Content hash of what the model reads: role, name, kind, text, tool calls and parts.

        Fields are joined with a separator that JSON-free text cannot forge (NUL), and the
        structured fields go through canonical JSON only when present: this runs once per
        message on ingest, so it must be cheap.
        """
        tail = ""
        if self.tool_calls or self.parts:
            tail = canonical_json([[c.to_dict() for c in self.tool_calls], list(self.parts)])
        text = self.text
        data = f"{self.role}\0{self.kind}\0{self.name or ''}\0{self.tool_call_id or ''}\0{len(text)}\0{text}\0{tail}"
        # hashing.content_hash(data), inlined
        return f"{ALGO}:{blake2b(data.encode('utf-8', 'surrogatepass'), digest_size=16).hexdigest()}"


def _id(value: Any) -> Any:
    """An id as text when it is an integer (ids are strings or integers in the wild)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class FieldTypeError(TypeError):
    """A record's field that is not text: ``field`` names it as a user reads it ("a tool call's
    name"), ``value`` is what it held (importers skip the record, ``ImportContext.bad_record``)."""

    def __init__(self, record: str, key: str, value: Any) -> None:
        super().__init__(f"{record}.{key} must be a string, not {type(value).__name__} ({_short(value)})")
        self.field = f"{_RECORD_WORDS.get(record, record)}'s {key.replace('_', ' ')}"
        self.value = value


_RECORD_WORDS = {"ToolCall": "a tool call", "Message": "a message"}


def _wrong_type(record: str, required: tuple[str, ...], **fields: Any) -> None:
    """Raise the ``FieldTypeError`` (a TypeError) for the first of ``fields`` that is not a
    string (those ``required`` must be one; the others may be None); return if none is."""
    for key, value in fields.items():
        if not isinstance(value, str) and (value is not None or key in required):
            raise FieldTypeError(record, key, value)


def _short(value: Any) -> str:
    return reprlib.repr(value)  # bounded, whatever the value's size


_TOOL_CALL_SETTERS = _slot_setters(ToolCall, ("name", "arguments", "id"))
_MESSAGE_SETTERS = _slot_setters(
    Message,
    ("role", "text", "kind", "name", "tool_calls", "tool_call_id", "parts", "usage", "timestamp", "model", "meta"),
)


@dataclass(slots=True)
class Session:
    """One recorded run, as an importer yields it.

    ``messages`` may be a generator: the store consumes it once, so a huge log streams.
    ``external_id`` is the id the source gives the run; when ``global_id`` is true it is
    unique across files (a Claude Code sessionId, a ChatGPT conversation id) and a changed
    file updates the stored session instead of adding a second one.
    """

    external_id: str
    format: str
    messages: Iterable[Message] = ()
    title: str | None = None
    model: str | None = None
    started_at: str | None = None
    task: str | None = None
    outcome: str = "unknown"
    parent_external_id: str | None = None
    global_id: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


def dumps(obj: Any) -> str:
    """Compact JSON for storage columns (orjson: every message of a 1 GB log goes through this)."""
    return json_text(obj)


# ---------------------------------------------------------------- recorded times

# What a session's metadata says when some of its times were recorded with no zone (``stored_time``).
NAIVE_TIMES_KEY = "naive_timestamps"
NAIVE_TIMES_NOTE = "local time, zone unknown"


def stored_time(value: Any) -> tuple[Any, bool]:
    """(a recorded time as the store keeps it, whether it is naive).

    One shape, so that times sort as text: ISO 8601 in UTC to the microsecond with a ``Z``
    (``2026-01-02T03:04:05.123000Z``; a finer fraction is cut to the microsecond). A time with an
    offset is converted to UTC; a unix time (a number, or a text of 9 or more digits: seconds,
    milliseconds, microseconds or nanoseconds by its size) is UTC. A time with no zone is never
    taken as UTC: it keeps its clock reading in the same shape without the ``Z`` and ``naive`` is
    True (a local time, zone unknown). Anything else (None, a date with no time, a text no ISO
    reader takes) is returned as it is, not naive.
    """
    if isinstance(value, str):
        s = value.strip()
        if len(s) == 27 and s[26] == "Z" and s[19] == "." and s[10] == "T":  # already stored shape
            return s, False
        digits = s.replace(".", "", 1)
        if len(s) >= 9 and digits.isascii() and digits.isdigit():
            return _epoch(float(s), value), False
        if "T" not in s and " " not in s:  # a date alone is no time of day
            return value, False
        try:
            t = datetime.fromisoformat(s)
        except ValueError:
            return value, False
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return _epoch(float(value), value), False
    else:
        return value, False
    offset = t.utcoffset()
    if offset is None:
        return t.isoformat(timespec="microseconds"), True
    if not offset and s[10] == "T":  # UTC already: the usual shapes by slicing (once per message on ingest)
        if len(s) == 24 and s[23] == "Z" and s[19] == ".":  # milliseconds, Z
            return s[:23] + "000Z", False
        if len(s) == 32 and s[19] == "." and s.endswith("+00:00"):  # microseconds, +00:00
            return s[:26] + "Z", False
        if len(s) == 20 and s[19] == "Z":  # seconds, Z
            return s[:19] + ".000000Z", False
    try:
        return t.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z", False
    except (OverflowError, ValueError):  # a zone offset past year 1 or 9999
        return value, False


def _epoch(number: float, value: Any) -> Any:
    """A unix time in seconds, ms, µs or ns (by its size) in the stored shape, else ``value``."""
    for scale in (1, 1e3, 1e6, 1e9):
        if number < 1e11 * scale:
            number /= scale
            break
    try:
        t = datetime.fromtimestamp(number, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return value
    return t.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


# ---------------------------------------------------------------- recorded history edits

# what became of the messages an edit took out: dropped, replaced by a summary, or kept with their
# content cleared (Claude Code's microcompact: a tool result's text replaced by a short notice)
EDIT_ACTIONS = ("evicted", "summarized", "cleared")
# The edit types that are a compaction in every count (a replay's summary, ``max_compactions``,
# compaction fidelity): a summary or truncation the agent made on its own or on /compact. A
# rewind (Gemini CLI) or a per-call rebuild (Aider) is an edit, not a compaction.
COMPACTION_EDIT_TYPES = ("compaction", "truncation", "condense", "compression", "microcompact")


@dataclass(frozen=True, slots=True)
class HistoryEdit:
    """A recorded history edit, as a ``history_edit`` marker's meta holds it.

    ``ranges``: half-open ``(start, end)`` positions of the session's earlier messages that left
    the history at the marker; ``action``: whether they were dropped (``evicted``: a truncation,
    a rewind) or replaced by a summary (``summarized``); ``type`` what the tool calls it
    (truncation, rewind, condense, compaction); ``source`` the format and field that recorded
    it; ``figures`` what the log recorded with it (``tokens_before``). An edit the log does not
    record but the agent's own code makes at a point the log does show (Aider's architect handing
    its proposal to an editor with a chat of its own) names that code in ``figures["rests_on"]``.
    """

    type: str
    action: str
    ranges: tuple[tuple[int, int], ...]
    source: str
    figures: dict[str, Any] = field(default_factory=dict)

    def to_meta(self) -> dict[str, Any]:
        return {"type": self.type, "action": self.action, "ranges": [list(r) for r in self.ranges],
                "source": self.source, **self.figures}


def position_runs(positions: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted positions as the half-open ``[start, end)`` runs a history edit's ranges are."""
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and runs[-1][1] == p:
            runs[-1] = (runs[-1][0], p + 1)
        else:
            runs.append((p, p + 1))
    return runs


def history_edit(type: str, action: str, ranges: Iterable[tuple[int, int]], source: str,
                 text: str, **figures: Any) -> Message:
    """The marker message of a recorded history edit (see ``HistoryEdit``); ``text`` says what
    happened, for a person (the model never read it)."""
    if action not in EDIT_ACTIONS:
        raise ValueError(f"action must be one of {EDIT_ACTIONS}, not {action!r}")
    edit = HistoryEdit(type, action, tuple((int(a), int(b)) for a, b in ranges), source, dict(figures))
    return Message(role="system", text=text, kind=KIND_HISTORY_EDIT, meta={"history_edit": edit.to_meta()})


def read_history_edit(meta: Any, at: int) -> HistoryEdit | None:
    """The edit a marker at position ``at`` records, its ranges clipped to the messages before it;
    None when its meta holds no readable edit."""
    raw = meta.get("history_edit") if isinstance(meta, dict) else None
    if not isinstance(raw, dict):
        return None
    ranges: list[tuple[int, int]] = []
    for r in raw.get("ranges") or ():
        if (isinstance(r, (list, tuple)) and len(r) == 2 and all(type(x) is int for x in r)):
            a, b = max(0, r[0]), min(r[1], at)
            if a < b:
                ranges.append((a, b))
    action = a if (a := raw.get("action")) in EDIT_ACTIONS else "evicted"
    figures = {k: v for k, v in raw.items() if k not in ("type", "action", "ranges", "source")}
    return HistoryEdit(str(raw.get("type") or "edit"), action, tuple(ranges), str(raw.get("source") or ""), figures)
