"""Plain records shared by importers, the store and every analysis.

Frozen dataclasses, no validation beyond construction: importers normalise whatever a log
format says into these, and everything downstream reads only these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .hashing import canonical_json, content_hash, json_text

ROLES = ("system", "developer", "user", "assistant", "tool")

# Message.kind values. "message" is an ordinary conversation item; the others are special
# records the replay treats as events rather than plain context.
KIND_MESSAGE = "message"
KIND_COMPACTION_SUMMARY = "compaction_summary"  # text that replaced earlier history
KIND_COMPACTION_BOUNDARY = "compaction_boundary"  # marker: history before this was compacted
KIND_CLEARED_TOOL_RESULT = "cleared_tool_result"  # a tool result the framework blanked out
KIND_REASONING = "reasoning"  # a reasoning item the API returned as its own record
KINDS = (
    KIND_MESSAGE,
    KIND_COMPACTION_SUMMARY,
    KIND_COMPACTION_BOUNDARY,
    KIND_CLEARED_TOOL_RESULT,
    KIND_REASONING,
)

OUTCOMES = ("success", "failure", "unknown")


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

    def to_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__ if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Usage | None:
        if not d:
            return None
        return cls(**{k: d[k] for k in cls.__slots__ if d.get(k) is not None})

    def is_empty(self) -> bool:
        return not self.to_dict()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the assistant asked for. ``arguments`` is the raw argument string (usually JSON)."""

    name: str
    arguments: str = ""
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


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

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {self.role!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {self.kind!r}")

    @property
    def hash(self) -> str:
        """Content hash of what the model reads: role, name, kind, text, tool calls and parts.

        Fields are joined with a separator that JSON-free text cannot forge (NUL), and the
        structured fields go through canonical JSON only when present: this runs once per
        message on ingest, so it must be cheap.
        """
        head = f"{self.role}\0{self.kind}\0{self.name or ''}\0{self.tool_call_id or ''}\0"
        tail = ""
        if self.tool_calls or self.parts:
            tail = canonical_json([[c.to_dict() for c in self.tool_calls], list(self.parts)])
        return content_hash(f"{head}{len(self.text)}\0{self.text}\0{tail}")


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
