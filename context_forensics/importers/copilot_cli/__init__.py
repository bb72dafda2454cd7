"""GitHub Copilot CLI sessions, in two layouts (format ``copilot_cli``, agent ``copilot-cli``).

- Current: ``~/.copilot/session-state/<uuid>/events.jsonl``, one event per line
  ``{type, data, id, timestamp, parentId}`` (``parentId`` is the chronologically preceding
  event). Field meanings follow the generated schema of the Copilot SDK
  (``github/copilot-sdk`` ``nodejs/src/generated/session-events.ts``): ``system.message`` is
  "the system or developer prompt text sent as model input" (written again before each user
  turn); ``user.message.transformedContent`` is the "version of the message sent to the
  model" (``content`` is what the user typed, kept in meta); ``assistant.message`` is one
  model reply (``outputTokens``: "actual output token count from the API response"; a reply
  split at reasoning boundaries shares one ``apiCallId``); ``tool.execution_complete``'s
  ``result.content`` is the "tool result text sent to the LLM" (``detailedContent`` is for the
  UI); ``session.truncation``, ``session.compaction_complete`` and ``session.context_cleared``
  are recorded history edits; ``session.shutdown`` holds the session's totals (``events``).
- Legacy (up to late 2025): ``~/.copilot/history-session-state/<id>.json``, one object
  ``{sessionId, startTime, chatMessages, timeline}``: ``chatMessages`` is the OpenAI-style
  message list sent to the model, ``timeline`` what the terminal showed (``legacy``).

The package: ``events`` (the event stream as Messages), ``legacy`` (the session JSON) and
``importer`` (the registered ``copilot_cli``).
"""

from __future__ import annotations

from .importer import CopilotCli

__all__ = ["CopilotCli"]
