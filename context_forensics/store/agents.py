"""Which agent wrote a session: the name ``ctxf sessions --agent`` filters on.

An importer that knows the agent sets ``session.metadata["agent"]`` (Cline's folder reader sets
``cline``, ``roo`` or ``kilo`` by the extension that wrote the task; an OpenTelemetry trace sets
its ``gen_ai.system`` or service name). Otherwise the format says it: one agent writes Claude
Code transcripts, one writes Codex rollouts. Formats of API requests and data sets (OpenAI
chat messages, ShareGPT, generic JSON, cassettes ...) name no agent: their sessions have none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# format -> the agent that writes it, for sessions whose importer did not name one
FORMAT_AGENTS: dict[str, str] = {
    "claude_code": "claude-code",
    "codex": "codex",
    "openhands": "openhands",
    "openhands_v1": "openhands",
    "openhands_trajectory": "openhands",
    "kimi_code": "kimi-code",
    "gemini_cli_stream": "gemini-cli",
    "opencode": "opencode",
    "opencode_db": "opencode",
    "goose": "goose",
    "goose_db": "goose",
    "letta": "letta",
    "tau_bench": "tau-bench",
    "swe_agent": "swe-agent",
    "mini_swe_agent": "mini-swe-agent",
    "inspect": "inspect",
    "llm_logs": "llm",
    "chatgpt_export": "chatgpt",
    "claude_ai_export": "claude-ai",
    "gemini_cli": "gemini-cli",
    "cline": "cline",
    "aider": "aider",
    "aider_chat": "aider",
    "pi": "pi",
    "copilot_cli": "copilot-cli",
    "otel": "otel",
    "openai_agents_sqlite": "openai-agents",
    "pydantic_ai": "pydantic-ai",
}


# Formats whose sessions in stores written before issue 13 carry another meaning under
# metadata["agent"]: SWE-agent's own name for the agent within a run ("main", "primary"), now
# ``agent_role``. Their agent is the format's.
_ROLE_NOT_AGENT = frozenset({"swe_agent"})


def agent_of(fmt: str | None, metadata: Mapping[str, Any] | None) -> str | None:
    """The agent of a session of format ``fmt`` with ``metadata``: the importer's
    ``metadata["agent"]`` when it set one (a non-empty string), else the format's agent, else None."""
    named = (metadata or {}).get("agent") if isinstance(metadata, Mapping) else None
    if isinstance(named, str) and named.strip() and fmt not in _ROLE_NOT_AGENT:
        return named.strip()
    return FORMAT_AGENTS.get(fmt or "")


def matching_agent(rows: Iterable[Mapping[str, Any]], agent: str | None) -> list[Mapping[str, Any]]:
    """The stored session rows whose agent is ``agent`` (all of them when None); the name is
    taken case-insensitively, ``_`` as ``-``."""
    if agent is None:
        return list(rows)
    want = normal(agent)
    return [r for r in rows if normal(agent_of(r["format"], r["metadata"]) or "\0") == want]


def normal(name: str) -> str:
    """An agent name as compared: lower case, ``_`` as ``-``, no surrounding blanks."""
    return name.strip().lower().replace("_", "-")


__all__ = ["FORMAT_AGENTS", "agent_of", "matching_agent", "normal"]
