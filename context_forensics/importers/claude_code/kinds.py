"""The record types Claude Code writes, and the kind names the index gives them.

A record's index kind is its ``type`` (``user``, ``assistant``, ...), ``system:<subtype>`` for
system records, or ``unreadable`` for a line that is not valid JSON.
"""

from __future__ import annotations

import re

# Records that can carry conversation content. Everything else is skipped and counted.
CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "attachment"})
# Record types Claude Code writes; a sniffed record of any other type means another format.
KNOWN_TYPES = frozenset(
    {"user", "assistant", "system", "attachment", "progress", "summary", "custom-title",
     "file-history-snapshot", "queue-operation", "tag", "agent-name"}
)
SYSTEM_KEPT = frozenset({"compact_boundary", "microcompact_boundary", "local_command"})
UNREADABLE = "unreadable"  # the index kind of a line that is not valid JSON
# Tags Claude Code wraps slash commands, their output and !bash input in.
COMMAND_TAG_RE = re.compile(
    r"^\s*<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"local-command-caveat|bash-input|bash-stdout|bash-stderr|user-memory-input)>"
)


def base_kind(kind: str) -> str:
    """The record type of an index kind (``system:compact_boundary`` -> ``system``)."""
    return kind.split(":", 1)[0]
