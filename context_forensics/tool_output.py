"""What counts as tool output: one decision per message, shared by every analysis.

A message is *tool output* (what the environment answered to an action, as opposed to what a
person or the harness asked) when

- its role is ``tool`` (a tool or function result; a cleared one too, whatever its kind), or its
  kind is ``cleared_tool_result``;
- or it is the user-role *observation* of a text-action harness: the first user message after an
  assistant message whose action is a fenced shell block (mini-swe-agent v1, classic SWE-agent,
  Aider-style "<returncode>… <output>…" replies), in a session that makes no tool calls, when the
  format is a text-action harness (``TEXT_AGENT_FORMATS``), the importer recorded a
  ``returncode``, or the text opens like an observation (``<returncode>``, ``<output>``,
  ``OBSERVATION:``). Harness feedback ("Please always provide EXACTLY ONE action …", a recorded
  ``FormatError``) and a harness's final submission record (``meta.exit``) are not observations.

``diverge`` (a run's ``result`` events), the audit's ``max_tool_output_share`` and anything else
that asks "is this tool output?" call ``tool_outputs``, so the answer is the same everywhere.
Token counting (``tokens/``) and the ``tool_result_clearing`` policy keep to the role on
purpose: a provider formats and clears by the role it is sent, and a text harness sends its
observations as user messages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .records import KIND_CLEARED_TOOL_RESULT, KIND_MESSAGE

_FENCE = re.compile(r"```[ \t]*(?P<lang>[\w+-]*)[ \t]*\n(?P<body>.*?)```", re.DOTALL)
SHELL_FENCES = ("bash", "sh", "shell", "console", "zsh", "")

# Harnesses whose assistant acts by writing a shell block and gets the result as a user message.
TEXT_AGENT_FORMATS = frozenset({"mini_swe_agent", "swe_agent"})
# Aider: the model edits by writing SEARCH/REPLACE blocks or file listings in its reply, and a
# fenced block in a reply is code, never a command it runs (a chat, not a text-action harness)
AIDER_FORMATS = frozenset({"aider", "aider_chat"})
# Cline's API history keeps a tool's result as user text: ``[write_to_file for 'x'] Result:``
_CLINE_RESULT = re.compile(r"^\[([A-Za-z_][\w-]*)(?: for '[^\n]*?')?\] Result:")
_FEEDBACK = re.compile(
    r"^\s*(?:Please always provide EXACTLY ONE action"
    r"|No tool calls found in the response"
    r"|Please continue working on the task on whatever approach you think is suitable"
    r"|Your (?:last )?output (?:was not formatted correctly|did not use any tool calls?))"
)
# Cline's UI names for the API tools (a ui_messages-only session calls ``editedExistingFile``)
_CLINE_UI_NAMES = {"replace_in_file": {"editedexistingfile"}, "write_to_file": {"newfilecreated", "editedexistingfile"},
                   "read_file": {"readfile"}, "list_files": {"listfilestoplevel", "listfilesrecursive"},
                   "search_files": {"searchfiles"}, "list_code_definition_names": {"listcodedefinitionnames"},
                   "execute_command": {"command"}}
_OBSERVATION = re.compile(r"^\s*(?:<returncode>|OBSERVATION:|Observation:|<output>)")


def text_action(text: str) -> str | None:
    """The command of a text-protocol action: the last bash/sh (or unlabeled) fenced block."""
    found = [m.group("body") for m in _FENCE.finditer(text) if m.group("lang").lower() in SHELL_FENCES]
    return found[-1].strip() if found else None


def is_feedback(m: Any) -> bool:
    """A harness's complaint about the last reply's format (not an input, not an observation)."""
    return (m.meta or {}).get("interrupt_type") == "FormatError" or bool(_FEEDBACK.match(m.text))


@dataclass(frozen=True)
class ToolOutputs:
    """Per message of a session (in order): whether it is tool output, and the action protocol."""

    protocol: str  # tools (tool calls) | text (fenced shell actions) | chat (neither)
    flags: tuple[bool, ...]

    def __getitem__(self, i: int) -> bool:
        return self.flags[i]

    def __len__(self) -> int:
        return len(self.flags)


def cline_result_tool(text: str) -> str | None:
    """The tool a Cline result kept as user text names (``[read_file for 'a.py'] Result:``), or None."""
    m = _CLINE_RESULT.match(text)
    return m.group(1) if m else None


def answers_call(call_name: str | None, named: str) -> bool:
    """Whether a Cline result naming tool ``named`` answers a call of ``call_name`` (the API's
    name, or the UI's for the same tool)."""
    low, want = (call_name or "").lower(), named.lower()
    return low == want or low in _CLINE_UI_NAMES.get(want, ())


def action_protocol(messages: Sequence[Any], fmt: str) -> str:
    """``tools`` when any assistant message calls a tool, ``text`` when the harness acts through
    fenced shell blocks (a text-action format, or any tool-less reply holding one; never Aider,
    whose fenced blocks are code), else ``chat``."""
    if any(m.tool_calls for m in messages if m.role == "assistant"):
        return "tools"
    if fmt in AIDER_FORMATS:
        return "chat"
    if fmt in TEXT_AGENT_FORMATS or any(text_action(m.text) for m in messages if m.role == "assistant"):
        return "text"
    return "chat"


def tool_outputs(messages: Sequence[Any], fmt: str) -> ToolOutputs:
    """Which messages are tool output (see the module docstring).

    ``messages`` are ``Message``s or ``StoredMessage``s (anything with ``.message`` is unwrapped).
    """
    msgs = [getattr(m, "message", m) for m in messages]
    protocol = action_protocol(msgs, fmt)
    text_agent = fmt in TEXT_AGENT_FORMATS
    flags: list[bool] = []
    pending = False  # the latest assistant message was a text action still waiting for its observation
    called: set[str] = set()  # the tools the latest assistant message called (Cline's text results)
    for m in msgs:
        flags.append(m.role == "tool" or m.kind == KIND_CLEARED_TOOL_RESULT)
        if m.kind != KIND_MESSAGE or m.role in ("system", "developer"):
            continue  # context mechanics and system text neither answer nor end an action
        if m.role == "tool":
            pending = False
        elif m.role == "assistant":
            pending = protocol == "text" and not m.tool_calls and text_action(m.text) is not None
            called = {c.name.lower() for c in m.tool_calls or ()}
        elif m.role == "user":
            meta = m.meta or {}
            if pending and not is_feedback(m) and not meta.get("exit") and (
                    text_agent or "returncode" in meta or _OBSERVATION.match(m.text)):
                flags[-1] = True
            elif called and (named := cline_result_tool(m.text)) is not None and any(
                    answers_call(c, named) for c in called):
                flags[-1] = True  # Cline's result of the call before, kept as user text
            pending = False
            called = set()
    return ToolOutputs(protocol, tuple(flags))
