"""Evidence: how a statement names the replay event it rests on (``type@step``, ``#n`` for the
n-th of that type at one step), so that ``ctxf replay --at STEP`` or the view shows it."""

from __future__ import annotations

from typing import Any

# the event that moves a message into each lost state
LEFT_BY = {"evicted": "eviction", "cleared": "clearing", "summarized": "compaction"}
STATE_OF = {v: k for k, v in LEFT_BY.items()}  # the lost state each event moves a message into


def event_id(step: int, events: list[dict[str, Any]], index: int) -> str:
    """``type@step`` (``#n`` for the n-th of that type at the step): the event named in evidence."""
    e = events[index]
    same = [i for i, x in enumerate(events) if x.get("type") == e.get("type")]
    n = same.index(index) + 1
    return f"{e.get('type')}@{step}" + (f"#{n}" if len(same) > 1 else "")


def event_for(steps: list[dict[str, Any]], step: int, state: str) -> tuple[str | None, dict[str, Any] | None]:
    """The event of ``step`` that moved a message into ``state`` (its id and record)."""
    if not 1 <= step <= len(steps):
        return None, None
    events = steps[step - 1]["events"] or []
    kind = LEFT_BY.get(state, state)
    for i, e in enumerate(events):
        if e.get("type") == kind or (e.get("type") == "history_edit" and e.get("action") == state):
            return event_id(step, events, i), e
    for i, e in enumerate(events):  # the agent's own edit the log did not record (the replay applied it)
        if e.get("type") == "unrecorded_truncation" and state in ("evicted", "cleared"):
            return event_id(step, events, i), e
    for i, e in enumerate(events):  # what the harness never sends again (Pi's cut-off replies)
        if e.get("type") == "left_out" and state == "evicted":
            return event_id(step, events, i), e
    return None, None
