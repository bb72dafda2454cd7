"""Which stored request capture tells a transcript's unlogged overhead (``tokens/overhead.py``).

A HAR capture of an agent's API traffic (``importers/har.py``) names the agent and its version in
each request's ``User-Agent``, which the importer reads into its ``captures``; a transcript names its agent by
its format and its version in its metadata (Claude Code's ``versions``, Codex's ``cli_version``).
A replay takes a capture's system prompt and tool definitions only for a transcript of the same
agent and version (the prompt and tools change between releases), or the capture the user names
(``--overhead-from``), and its header says which and on what it rests.

Candidates of the same agent version: one of the transcript's model first, then the one sending
the most tool definitions (an agent's main loop, not its title or summary calls), then the
longest system prompt, then the session id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...store.agents import agent_of, normal

if TYPE_CHECKING:  # pragma: no cover
    from ...store.db import Store
    from ...tokens.overhead import Captured

NONE = "none"  # ``--overhead-from none``: no capture, not even a matching one

# agent -> the metadata key its transcripts record the agent's version under
VERSION_KEYS = {"claude-code": "versions", "codex": "cli_version", "aider": "aider_version",
                "copilot-cli": "copilot_version", "mini-swe-agent": "mini_version"}


def agent_versions(fmt: str | None, metadata: Any) -> tuple[str | None, list[str]]:
    """A transcript's agent and the versions of it its log records."""
    meta = metadata if isinstance(metadata, dict) else {}
    agent = agent_of(fmt, meta)
    raw = meta.get(VERSION_KEYS.get(agent or "", ""))
    versions = [v for v in (raw if isinstance(raw, list) else [raw]) if isinstance(v, str) and v.strip()]
    return agent, versions


def _capture_rows(store: Store) -> list[dict[str, Any]]:
    rows = store.sessions(fmt="har")
    return [r for r in rows if isinstance(r.get("metadata"), dict) and r["metadata"].get("captures")]


def _first_capture(row: dict[str, Any]) -> dict[str, Any]:
    caps = [c for c in row["metadata"]["captures"] if isinstance(c, dict)]
    return caps[0] if caps else {}


def captured_of(store: Store, row: dict[str, Any], match: str) -> Captured | None:
    """The system prompt and tool definitions capture session ``row`` sent, or None if it sent neither."""
    from ...tokens.overhead import Captured

    system = []
    for sm in store.messages(row["id"]):
        if sm.message.role not in ("system", "developer"):
            break
        if sm.message.text:
            system.append(sm.message.text)
    tools = row["metadata"].get("tools")
    tools = tools if isinstance(tools, list) and tools else None
    if not system and tools is None:
        return None
    cap = _first_capture(row)
    agent, version = cap.get("agent"), cap.get("agent_version")
    source = {"session": row["id"], "entry": cap.get("entry"), "user_agent": cap.get("user_agent"),
              "agent": agent, "version": version, "model": row.get("model"), "match": match,
              "content_hash": row.get("content_hash")}
    return Captured(tuple(system), tools, source)


def find_capture(store: Store, session: dict[str, Any], asked: str | None = None) -> Captured | None:
    """The capture whose overhead a replay of ``session`` takes: the one ``asked`` (a session id;
    ``none``: no capture), else one of the same agent version, else None."""
    from ...errors import UsageError

    if asked is not None:
        if asked.strip().lower() == NONE:
            return None
        row = store.session(asked)
        if not (isinstance(row.get("metadata"), dict) and row["metadata"].get("captures")):
            raise UsageError(f"session {asked} is not a request capture (a HAR file's session)",
                             hint="ctxf sessions --format har lists the captures in this store")
        agent, versions = agent_versions(session.get("format"), session.get("metadata"))
        cap = _first_capture(row)
        same = (agent and cap.get("agent") and normal(agent) == normal(cap["agent"])
                and cap.get("agent_version") in versions)
        words = "same agent version" if same else (
            f"asked; the transcript is {agent or 'of no named agent'} {', '.join(versions) or '(no version)'}, "
            f"the capture {cap.get('agent') or cap.get('user_agent') or 'names no agent'} "
            f"{cap.get('agent_version') or ''}".rstrip())
        found = captured_of(store, row, words)
        if found is None:
            raise UsageError(f"capture {asked} sent no system prompt and no tool definitions: nothing to add")
        return found
    if session.get("format") == "har":
        return None
    agent, versions = agent_versions(session.get("format"), session.get("metadata"))
    if not agent or not versions:
        return None
    rows = []
    for r in _capture_rows(store):
        cap = _first_capture(r)
        if cap.get("agent") and normal(cap["agent"]) == normal(agent) and cap.get("agent_version") in versions:
            rows.append((r, cap))
    if not rows:
        return None
    model = session.get("model")
    rows.sort(key=lambda rc: (rc[0].get("model") != model, -int((rc[1].get("tools") or {}).get("count") or 0),
                              -int((rc[1].get("system") or {}).get("chars") or 0), rc[0]["id"]))
    for r, _ in rows:
        found = captured_of(store, r, "same agent version")
        if found is not None:
            return found
    return None


__all__ = ["NONE", "VERSION_KEYS", "agent_versions", "captured_of", "find_capture"]
