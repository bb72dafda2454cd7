"""Pi coding agent sessions (``~/.pi/agent/sessions/--<cwd>--/<time>_<uuid>.jsonl``).

One JSONL file per session (spec: pi-mono ``packages/coding-agent/docs/session.md``): a
``session`` header line, then entries (``message``, ``model_change``,
``thinking_level_change``, ``compaction``, ``branch_summary``, ``custom``, ``custom_message``,
``label``, ``session_info``). Version 1 (no ``version`` field) is linear; version 2 links
entries into a tree by ``id`` / ``parentId``; version 3 renamed the ``hookMessage`` role to
``custom``. The session is the current branch (leaf to root), as Pi builds its context.

Ground truth: the messages on the branch are what Pi sent (through ``convertToLlm``); a
``compaction`` entry records which earlier messages its summary replaced (first kept entry)
and the context's size before it (``tokensBefore``); each assistant message records its call's
usage and cost.

The package: ``reader`` (lines, a torn line recovered), ``entries`` (the branch),
``convert`` (entries as Messages) and ``importer`` (the registered ``pi``).
"""

from __future__ import annotations

from .importer import Pi

__all__ = ["Pi"]
