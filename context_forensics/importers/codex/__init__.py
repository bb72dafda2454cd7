"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``).

Two layouts, both sniffed:

- Modern (``RolloutLine``): ``{"timestamp", "type", "payload"}`` per line, ``type`` one of
  ``session_meta``, ``turn_context`` (model, effort, cwd of the next request),
  ``response_item`` (a Responses API item: message, reasoning, function_call,
  function_call_output, custom_tool_call(_output), local_shell_call, web_search_call,
  ghost_snapshot, compaction), ``event_msg`` (UI events; ``token_count`` carries usage,
  ``user_message``/``agent_message``/``agent_reasoning`` repeat response items) and
  ``compacted`` (the summary, and in newer versions the replacement history).
- Legacy (up to about Sep 2025): a first line ``{id, timestamp, instructions, git}``, then
  bare response items and ``{"record_type": "state"}`` lines; no usage.

A model call's output is the run of assistant-side items (reasoning, assistant message,
tool calls) between two inputs; it becomes one assistant Message, its reasoning items their
own ``kind="reasoning"`` messages right after it (the next call reads them, not the call). ``token_count`` events are
written either before the call's items (0.5x: usage at stream end, items after tool execution) or
after them (newer: items as they stream); the first event decides which, and repeats of
the same running total are not new calls. A shell call's output keeps the JSON the model was
sent (``{"output": ..., "metadata": {"exit_code": N}}``) as its text; the exit code is also
``meta["returncode"]``.

The package: ``rollout`` (records as Messages, in one pass), ``prescan`` (the facts read
before streaming) and ``importer`` (the registered ``codex``).
"""

from __future__ import annotations

from .importer import Codex
from .prescan import Head, prescan
from .rollout import Stream

__all__ = ["Codex", "Head", "Stream", "prescan"]
