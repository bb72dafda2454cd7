"""A trajectory's conversation, from whichever layout it has: ``history[]`` (what the model was
sent, every agent's messages; demonstrations marked ``is_demo``), else the last step's
``query`` plus its response (SWE-agent 1.x ``trajectory[]``), else the steps'
thought / action / observation rebuilt as assistant and user messages.
"""

from __future__ import annotations

import json
from typing import Any

from ...records import Message
from .._agent_messages import convert_message
from ..base import RECORD_ERRORS, ImportContext


def _swe_history_message(entry: dict, ctx: ImportContext, names: dict[str, str], index: int) -> list[Message]:
    meta: dict[str, Any] = {"index": index}
    for key in ("agent", "message_type"):
        if isinstance(entry.get(key), str):
            meta[key] = entry[key]
    if entry.get("is_demo"):
        meta["is_demo"] = True
    if isinstance(entry.get("tags"), list) and entry["tags"]:
        meta["tags"] = [str(t) for t in entry["tags"]]
    return convert_message(entry, ctx, names=names, meta=meta)


def _from_trajectory(steps: list, ctx: ImportContext) -> tuple[list[Message], str]:
    """Messages when a traj has no history[]: the last query + response, else the steps."""
    last = steps[-1] if steps and isinstance(steps[-1], dict) else {}
    query = last.get("query")
    if not isinstance(query, list):  # before SWE-agent 1.1 the step kept "messages"
        query = last.get("messages")
    if isinstance(query, list) and query and all(isinstance(q, dict) and "role" in q for q in query):
        names: dict[str, str] = {}
        msgs = []
        for i, q in enumerate(query):
            try:
                msgs.extend(_swe_history_message(q, ctx, names, i))
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what="query message", index=i)
        reply = r if isinstance(r := last.get("response"), str) else ""
        msgs.append(Message(role="assistant", text=reply,
                            meta={"action": last.get("action")} if last.get("action") else {}))
        return msgs, "trajectory.query"
    msgs = []
    for i, step in enumerate(steps):
        try:
            if not isinstance(step, dict):
                ctx.skip("malformed step")
                continue
            response = step.get("response")
            if not isinstance(response, str) or not response:
                thought = step.get("thought") or ""
                action = step.get("action") or ""
                response = f"{str(thought).rstrip()}\n\n```\n{str(action).strip()}\n```" if action else str(thought)
            msgs.append(Message(role="assistant", text=response, meta={"step": i}))
            observation = step.get("observation")
            if observation is not None:
                msgs.append(Message(role="user", text=observation if isinstance(observation, str)
                                    else json.dumps(observation, ensure_ascii=False), meta={"step": i}))
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="step", index=i)
    return msgs, "trajectory"


def messages_by_agent(
    history: Any, steps: list[Any], ctx: ImportContext
) -> tuple[dict[str, list[Message]], str, str]:
    """The conversation of each agent (the first agent named is the main one: ``""`` when none
    is), the main agent, and where it came from: ``history``, ``trajectory.query`` or
    ``trajectory`` (rebuilt, with a warning), or ``empty``."""
    by_agent: dict[str, list[Message]] = {}
    if isinstance(history, list) and history:
        source = "history"
        names: dict[str, dict[str, str]] = {}
        main_agent = None
        for i, entry in enumerate(history):
            try:
                if not isinstance(entry, dict):
                    ctx.skip("malformed history entry")
                    continue
                agent = entry.get("agent") if isinstance(entry.get("agent"), str) else None
                if main_agent is None:
                    main_agent = agent or ""
                key = agent if agent is not None else main_agent
                by_agent.setdefault(key, []).extend(
                    _swe_history_message(entry, ctx, names.setdefault(key, {}), i))
            except RECORD_ERRORS as e:  # an entry of unexpected shape: skipped, the rest kept
                ctx.bad_record(e, what="history entry", index=i)
        if main_agent is None:
            main_agent = ""
    elif steps:
        msgs, source = _from_trajectory(steps, ctx)
        ctx.warn(f"no history[]; rebuilt the conversation from trajectory[] ({source})")
        main_agent = ""
        by_agent[main_agent] = msgs
    else:
        source, main_agent = "empty", ""
        by_agent[main_agent] = []
        ctx.warn("trajectory has no history and no steps; the session is empty")
    return by_agent, main_agent, source
