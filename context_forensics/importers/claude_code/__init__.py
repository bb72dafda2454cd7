"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON record per line. ``user``/``assistant``/``system`` records form a tree through
``uuid``/``parentUuid``; the conversation is the path from the newest record back to the
root (rewinds and abandoned branches hang off it). Other record types (``progress``,
``file-history-snapshot``, ``queue-operation``, ``summary``, ...) are bookkeeping.

Quirks handled here:

- One API response is written as several ``assistant`` records, one content block each,
  all sharing ``message.id`` and a copy of the usage; they become one Message, usage once.
- Parallel tool calls make side branches: the second ``tool_use`` block and the results of
  the earlier ones hang off siblings of the main path. Records of a model call that is on
  the main path (same ``message.id``) and results of its ``tool_use`` ids are kept; other
  off-path records are rewinds and are counted as ``off-chain``.
- ``system``/``compact_boundary`` has ``parentUuid: null`` and ``logicalParentUuid``
  pointing at the pre-compaction history; the walk follows it, so the boundary and the
  following ``isCompactSummary`` user record sit after the history they replaced.
- ``system``/``local_command`` records are sent to the model as user text (Claude Code's
  API normalisation turns them into user messages); other ``system`` records are not.
  ``isApiErrorMessage`` assistant records are Claude Code's own error notices, not model
  output: skipped and counted. ``attachment`` records with text become meta user messages.
- Every record carries the working folder (``cwd``), which follows the Bash tool's ``cd``: the
  session's metadata keeps the first (``cwd``) and all of them (``cwds``); a model call made in
  another folder keeps its own (``meta["cwd"]``), what its shell commands' relative paths start from.
- ``<session>/subagents/agent-*.jsonl`` are Task sub-agent sessions (child sessions of
  ``sessionId``); ``agent-acompact-*.jsonl`` is the compaction call itself. Its records hang
  off the parent session's tree, so all of them are kept in file order.

Streaming: pass 1 keeps a small index per record (offset, type, parent, message id, tool
ids); pass 2 reads the records on the main path again (in file order, seeking only past the
others) and yields Messages lazily. Both passes run once per record of files that reach
gigabytes, so their loops are written for speed (inlined helpers, locals, no per-record
generators); the rules they follow are the ones stated here and in ``base.iter_jsonl_at``.

The package: ``kinds`` (the record types), ``index`` (pass 1), ``tree`` (the main path),
``convert`` (records as Messages) and ``importer`` (the registered ``claude_code``).
"""

from __future__ import annotations

from .convert import Converter
from .importer import ClaudeCode
from .index import Index, build_index
from .tree import main_path

__all__ = ["ClaudeCode", "Converter", "Index", "build_index", "main_path"]
