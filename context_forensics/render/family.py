"""Parent and children of a session (sub-agents) as the HTML report's meta table lists them."""

from __future__ import annotations

from typing import Any, Callable


def spawn_words(s: dict[str, Any]) -> str:
    """``Task toolu_01… “description” (Explore, completed)``: what the logs say of the call that
    started a session; "" when they say nothing."""
    words = " ".join(v for v in (s.get("tool"), s.get("tool_call_id")) if v)
    if s.get("description"):
        words += f" \u201c{s['description']}\u201d"
    extra = [v for v in (s.get("subagent_type"), s.get("status")) if v]
    if extra:
        words += f" ({', '.join(extra)})"
    return words.strip()


def html_rows(session: dict[str, Any], escape: Callable[[Any], str]) -> list[list[str]]:
    """``[["parent", html], ["children", html]]`` for a session JSON object (``session_json``);
    [] for a session with neither. Every text from a log goes through ``escape``."""
    rows = []
    parent = session.get("parent")
    if parent:
        text = escape(parent["id"])
        if spawn_words(parent):
            text += " · " + escape(spawn_words(parent))
        if not parent.get("stored", True):
            text += " <span class='muted'>(not in the store)</span>"
        rows.append(["parent", text])
    children = session.get("children") or []
    if children:
        items = []
        for c in children:
            words = " ".join(w for w in (c.get("role"), c.get("agent_id"), spawn_words(c)) if w)
            steps = c.get("step_count") or 0
            items.append(f"{escape(c['id'])} <span class='muted'>{escape(words)} · {steps} model call"
                         f"{'' if steps == 1 else 's'}</span>")
        rows.append(["children", "<br>".join(items)])
    return rows
