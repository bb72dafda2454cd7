"""simonw ``llm`` logs.db: the SQLite log the ``llm`` CLI and library write.

Two layouts, both read (a database upgraded in place can hold both):

- **Legacy tables** (llm 0.13 - 0.2x): ``conversations`` and ``responses``, one row per model
  call, with ``prompt``/``system``/``response``, ``input_tokens``/``output_tokens``/
  ``token_details``, fragments (``prompt_fragments``/``system_fragments``), attachments
  (``prompt_attachments``) and tools (``tool_calls``/``tool_results``/``tool_responses``).
  One session per conversation; per response, in order: a system message when the system
  prompt (system fragments + system) first appears or changes, the tool results the prompt
  carried, the user prompt (prompt fragments + prompt, as llm sends it), then the assistant
  reply with its tool calls and usage.
- **Message store** (llm 0.3x): ``threads``, ``turns``, and content-addressed ``messages``/
  ``parts``. One session per thread: the chain from the thread's tip back to its root. Each
  turn (one model call) delimits its output messages (after ``parent_message_hash`` up to
  ``tip_message_hash``); its usage goes on the last assistant message of that output. A
  thread that continues a legacy conversation has the same id; its chain already holds the
  older history, so the legacy rows only lend their usage to the matching replies.

Usage: ``prompt_tokens`` = ``input_tokens``, plus the Anthropic cache counts when
``token_details`` reports them (Anthropic's input count excludes cached tokens);
cache reads and reasoning tokens are taken from ``token_details`` where the plugin recorded
them (OpenAI ``prompt_tokens_details``/``completion_tokens_details``, Gemini
``thoughtsTokenCount``/``cachedContentTokenCount``).

The database is opened read-only; nothing is written to it.

The package: ``database`` (the open database and what both layouts share), ``responses``
(the legacy tables), ``threads`` (the message store) and ``importer`` (the registered
``llm_logs``).
"""

from __future__ import annotations

from .database import LogsDB, is_llm_logs
from .importer import LLMLogs, sessions

__all__ = ["LLMLogs", "LogsDB", "is_llm_logs", "sessions"]
