"""The last check between an importer and the store: what a session carries must be storable.

Every session passes ``check_session``: its string fields (title, model, start time, parent)
are strings or nothing, else the field is dropped with a warning naming the session (and
counted as a ``malformed field``); its id is text. (A message's own fields are checked when it
is built, ``records.Message``, so that an importer skips the one record.)

When the store still refuses a value — a lone UTF-16 surrogate that slipped past the readers
(a YAML escape, a file name that is not UTF-8), an integer beyond SQLite's 64 bits — the ingest
rolls the file back and reads it again in *careful* mode: ``careful_session`` then also
replaces every lone surrogate with U+FFFD and drops the integers no SQLite column holds,
message by message, with one warning per kind of repair. Normal reads pay nothing for it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Iterator

from ..importers._json import has_surrogates, replace_surrogates, scrub
from ..importers.base import ImportContext
from ..records import OUTCOMES, Message, Session, ToolCall, Usage

_INT64 = 2**63
_OPTIONAL_TEXT = ("title", "model", "started_at", "task", "parent_external_id")


def check_session(session: Session, ctx: ImportContext) -> None:
    """Make the session's own fields storable: drop (and warn about) the wrong-typed ones."""
    if not isinstance(session.external_id, str):
        ctx.warn(f"a session id is {type(session.external_id).__name__}, not text; stored as its text")
        session.external_id = str(session.external_id)
    for key in _OPTIONAL_TEXT:
        value = getattr(session, key)
        if value is not None and not isinstance(value, str):
            ctx.warn(f"session {session.external_id!r}: its {key} is a {type(value).__name__}, not text; dropped")
            ctx.skip("malformed field")
            setattr(session, key, None)
    if session.outcome not in OUTCOMES:
        session.outcome = "unknown"
    if not isinstance(session.metadata, dict):
        session.metadata = {}


def careful_session(session: Session, ctx: ImportContext, repairs: Counter) -> None:
    """``check_session`` plus the repairs of careful mode, for the session and (as they stream)
    its messages; ``repairs`` counts them by kind."""
    check_session(session, ctx)
    session.external_id = _text(session.external_id, repairs)
    for key in _OPTIONAL_TEXT:
        value = getattr(session, key)
        if value is not None:
            setattr(session, key, _text(value, repairs))
    _deep(session.metadata, repairs)
    session.messages = _careful_messages(session.messages, repairs)


def careful_source(source: str, repairs: Counter) -> str:
    """A path as the store can hold it (a file name that is not UTF-8 decodes to surrogates)."""
    return _text(source, repairs)


def repair_warnings(repairs: Counter, ctx: ImportContext) -> None:
    """One warning per kind of careful-mode repair."""
    if repairs["surrogate"]:
        ctx.warn(f"{repairs['surrogate']} text value(s) held a lone UTF-16 surrogate, which no UTF-8 store "
                 "holds; replaced it with U+FFFD")
    if repairs["integer"]:
        ctx.warn(f"{repairs['integer']} number(s) were beyond what SQLite's 64-bit integers hold; dropped")
        ctx.skip("malformed field", repairs["integer"])


def _careful_messages(messages: Iterable[Message], repairs: Counter) -> Iterator[Message]:
    for m in messages:
        yield _careful_message(m, repairs)


def _careful_message(m: Message, repairs: Counter) -> Message:
    calls = tuple(ToolCall(_text(c.name, repairs), _text(c.arguments, repairs),
                           None if c.id is None else _text(c.id, repairs)) for c in m.tool_calls)
    parts = tuple(_deep(p, repairs) for p in m.parts)
    return Message(
        role=m.role,
        text=_text(m.text, repairs),
        kind=m.kind,
        name=_opt(m.name, repairs),
        tool_calls=calls,
        tool_call_id=_opt(m.tool_call_id, repairs),
        parts=parts,
        usage=_usage(m.usage, repairs),
        timestamp=_opt(m.timestamp, repairs),
        model=_opt(m.model, repairs),
        meta=_deep(m.meta, repairs),
    )


def _text(value: Any, repairs: Counter) -> str:
    text = value if isinstance(value, str) else str(value)
    if has_surrogates(text):
        repairs["surrogate"] += 1
        return replace_surrogates(text)
    return text


def _opt(value: str | None, repairs: Counter) -> str | None:
    return None if value is None else _text(value, repairs)


def _usage(u: Usage | None, repairs: Counter) -> Usage | None:
    if u is None:
        return None
    values = []
    for key in Usage.__slots__:
        v = getattr(u, key)
        if isinstance(v, int) and not -_INT64 <= v < _INT64:
            repairs["integer"] += 1
            v = None
        values.append(v)
    fixed = Usage(*values)
    return None if fixed.is_empty() else fixed


def _deep(value: Any, repairs: Counter) -> Any:
    """A JSON-like value (parts, meta, metadata) with its lone surrogates replaced, in place."""
    try:
        value, n = scrub(value)
    except ValueError:  # nested past the readers' bound: cannot be a value a reader let through
        return {}
    repairs["surrogate"] += n
    return value


__all__ = ["careful_session", "careful_source", "check_session", "repair_warnings"]
