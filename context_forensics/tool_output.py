"""What counts as a tool call and its result: one pairing per session, shared by every analysis.

A message is a *tool result* (tool output: what the environment answered to an action, as
opposed to what a person or the harness asked) when

- its role is ``tool`` (a tool or function result; a cleared one too, whatever its kind), or its
  kind is ``cleared_tool_result``;
- or it is a user-role message the harness wrote a result into as text:

  - the *observation* of a text-action harness: the first user message after an assistant
    message whose action is a fenced shell block (mini-swe-agent v1, classic SWE-agent,
    Aider-style "<returncode>… <output>…" replies), in a session that makes no tool calls, when
    the format is a text-action harness (``TEXT_AGENT_FORMATS``), the importer recorded a
    ``returncode``, or the text opens like an observation (``<returncode>``, ``<output>``,
    ``OBSERVATION:``). Harness feedback ("Please always provide EXACTLY ONE action …", a
    recorded ``FormatError``) and a harness's final submission record (``meta.exit``) are not
    observations;
  - a result Cline, Roo Code or Kilo Code wrote as user text (``TEXT_RESULT``): it opens with
    the call's description, ``[read_file for 'src/app.ts'] Result:``, ``[attempt_completion]
    Result:``, or with the refusal of a call, ``Tool [read_file] was not executed because …``,
    ``Skipping tool … due to user rejecting a previous tool``. The Cline importer stores these
    blocks as tool messages; a log of Cline's requests read by another importer keeps them as
    user text, and they are results all the same;
  - in Aider's logs (``AIDER_FORMATS``), what Aider answers to a reply's edits and commands
    (``AIDER_RESULT``): "I committed the changes with git hash …", "I updated the files.",
    "I ran this command: … And got this output: …", "# Fix any errors below, if possible." (the
    lint run), "# N SEARCH/REPLACE blocks failed to match!".

Each result answers one *call* (``pair_tools``): a result naming a call id answers that call (a
result naming an id no earlier call has, or coming before any model call, is an orphan); a
result without an id answers the first
call of the latest model call still without a result (the one of its tool's name first), and,
when that reply made no tool call (an XML tool tag, a text action, an edit block), a *text call*
of that reply named after the tool the result names. So a text result is never "a call without
a result", and a tool call whose result was written as text is answered.

``diverge`` (a run's ``result`` events and their actions), the audit's ``max_tool_output_share``
and ``no_orphan_tool_results``, the replay's groups (a call and its results leave the window
together) and ``ctxf check`` (``tool_pairs``) all read this one pairing. Token counting
(``tokens/``) and the ``tool_result_clearing`` policy keep to the role on purpose: a provider
formats and clears by the role it is sent, and a text harness sends its results as user messages.
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
# Aider's logs: its answers to a reply's edits and commands are user messages (``AIDER_RESULT``).
AIDER_FORMATS = frozenset({"aider", "aider_chat"})
# Cline's API history keeps a tool's result as user text: ``[write_to_file for 'x'] Result:``
_CLINE_RESULT = re.compile(r"^\[([A-Za-z_][\w-]*)(?: for '[^\n]*?')?\] Result:")
_FEEDBACK = re.compile(
    r"^\s*(?:Please always provide EXACTLY ONE action"
    r"|No tool calls found in the response"
    r"|Please continue working on the task on whatever approach you think is suitable"
    r"|Your (?:last )?output (?:was not formatted correctly|did not use any tool calls?)"
    r"|\[ERROR\] You did not use a tool in your previous response"  # Cline's noToolsUsed
    r"|I didn't see any properly formatted edits in your reply)"  # Aider's files_content_gpt_no_edits
)
# Cline's UI names for the API tools (a ui_messages-only session calls ``editedExistingFile``)
_CLINE_UI_NAMES = {"replace_in_file": {"editedexistingfile"}, "write_to_file": {"newfilecreated", "editedexistingfile"},
                   "read_file": {"readfile"}, "list_files": {"listfilestoplevel", "listfilesrecursive"},
                   "search_files": {"searchfiles"}, "list_code_definition_names": {"listcodedefinitionnames"},
                   "execute_command": {"command"}}
_OBSERVATION = re.compile(r"^\s*(?:<returncode>|OBSERVATION:|Observation:|<output>)")
# Cline / Roo / Kilo (src/core/task/tools/utils/ToolResultUtils.ts pushToolResult: "${description}
# Result:\n${text}", the description being "[${name} for '${arg}']" or "[${name}]"; prompts/
# responses.ts toolAlreadyUsed; ToolExecutor createToolRejectionMessage, and the older "Skipping
# tool [desc] due to user rejecting a previous tool."), cline/cline at d3e1065 (2026-01-21).
_NAME = r"[A-Za-z_][\w.:/-]{0,80}"
TEXT_RESULT = re.compile(
    rf"^\[(?P<result>{_NAME})(?: for .{{0,4000}}?)?\] Result:"
    rf"|^Tool \[(?P<refused>{_NAME})\] was not executed because"
    rf"|^(?:Skipping tool|Tool was interrupted and not executed)\b[^\n]{{0,300}}?"
    rf"(?:\[(?P<rejected>{_NAME})[^\n]{{0,300}}?)?due to user rejecting a previous tool",
    re.DOTALL)
# Aider (aider/coders/base_prompts.py, aider/prompts.py run_output, aider/linter.py,
# aider/coders/editblock_coder.py), Aider-AI/aider at 02c48fa.
AIDER_RESULT = re.compile(
    r"^(?:(?P<edit>I committed the changes with git hash |I updated the files\.|# \d+ SEARCH/REPLACE blocks? "
    r"failed to match)|(?P<shell>I ran this command:\n)|(?P<lint># Fix any errors below, if possible\.))")
# A reply the harness cut off (Pi's stopReason): its calls never ran, and the harness does not
# send the reply again (pi-mono packages/ai/src/providers/transform-messages.ts skips it).
CUT_OFF_STOPS = frozenset({"error", "aborted"})


def text_action(text: str) -> str | None:
    """The command of a text-protocol action: the last bash/sh (or unlabeled) fenced block."""
    found = [m.group("body") for m in _FENCE.finditer(text) if m.group("lang").lower() in SHELL_FENCES]
    return found[-1].strip() if found else None


def is_feedback(m: Any) -> bool:
    """A harness's complaint about the last reply's format (not an input, not an observation)."""
    return (m.meta or {}).get("interrupt_type") == "FormatError" or bool(_FEEDBACK.match(m.text))


def text_result_tool(text: str, fmt: str | None) -> str | None:
    """The tool a user-role message written as a tool's result names (``TEXT_RESULT``, and
    ``AIDER_RESULT`` in Aider's formats), or None when the text is no such result."""
    hit = TEXT_RESULT.match(text)
    if hit:
        return hit.group("result") or hit.group("refused") or hit.group("rejected") or "tool"
    if fmt in AIDER_FORMATS:
        hit = AIDER_RESULT.match(text)
        if hit:
            return next(k for k in ("edit", "shell", "lint") if hit.group(k))
    return None


@dataclass(frozen=True)
class Call:
    """One call of a session: a tool call, or the action a text result answers (``written``
    ``text``: a fenced shell block, an XML tool tag, an edit block; no id)."""

    pos: int  # the calling assistant message's index in the session's messages
    seq: int
    step: int  # its model call (1-based)
    tool: str
    call_id: str | None
    written: str  # "call" (a tool call of the reply) | "text" (an action written in the reply's text)
    cut_off: bool = False  # the reply was cut off (``CUT_OFF_STOPS``): its calls never ran


@dataclass(frozen=True)
class Pairing:
    """Every call of a session and the result answering it (see the module docstring)."""

    protocol: str  # tools (tool calls) | text (fenced shell actions) | chat (neither)
    seqs: tuple[int, ...]  # each message's seq
    flags: tuple[bool, ...]  # each message: a tool result
    answers: tuple[int | None, ...]  # each message: the index in ``calls`` of the call it answers
    calls: tuple[Call, ...]
    orphans: tuple[int, ...]  # positions of results naming a call id no earlier call has, or before any model call
    last_step: int | None  # position of the last model call (its calls may still be running)
    as_text: int = 0  # results written as user-role text (observations, Cline's and Aider's)

    def unanswered(self) -> list[Call]:
        """Tool calls that never got a result, but the last model call's and cut-off replies'."""
        got = {a for a in self.answers if a is not None}
        return [c for i, c in enumerate(self.calls)
                if i not in got and c.written == "call" and c.pos != self.last_step and not c.cut_off]

    def cut_off(self) -> list[Call]:
        """Calls without a result in replies the harness cut off (never run, never sent again)."""
        got = {a for a in self.answers if a is not None}
        return [c for i, c in enumerate(self.calls) if i not in got and c.cut_off and c.pos != self.last_step]


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


def action_protocol(messages: Sequence[Any], fmt: str | None) -> str:
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


def pair_tools(messages: Sequence[Any], fmt: str | None) -> Pairing:
    """Every call and result of a session, paired (see the module docstring).

    ``messages`` are ``Message``s or ``StoredMessage``s (anything with ``.message`` is unwrapped;
    a stored message's ``seq`` is kept, a plain message's is its index)."""
    seqs = tuple(getattr(m, "seq", i) for i, m in enumerate(messages))
    msgs = [getattr(m, "message", m) for m in messages]
    protocol = action_protocol(msgs, fmt)
    text_agent = fmt in TEXT_AGENT_FORMATS
    flags: list[bool] = []
    answers: list[int | None] = []
    calls: list[Call] = []
    orphans: list[int] = []
    by_id: dict[str, int] = {}  # call id -> index in calls (the latest call of that id)
    answered: set[int] = set()
    latest: int | None = None  # position of the latest model call
    latest_calls: list[int] = []  # its calls (indices in calls)
    step = 0
    pending = False  # the latest model call was a text action still waiting for its observation

    def text_call(tool: str) -> int:
        assert latest is not None
        calls.append(Call(latest, seqs[latest], step, tool, None, "text"))
        latest_calls.append(len(calls) - 1)
        return len(calls) - 1

    def answer_latest(tool: str | None) -> int | None:
        """The call a result without an id answers: the latest model call's first one still
        without a result (of the result's tool first), else a text call of that reply."""
        if latest is None:
            return None
        free = [i for i in latest_calls if i not in answered]
        same = [i for i in free if tool and calls[i].tool == tool]
        if same or free:
            return (same or free)[0]
        return text_call(tool or "tool")

    for pos, m in enumerate(msgs):
        result = m.role == "tool" or m.kind == KIND_CLEARED_TOOL_RESULT
        call: int | None = None
        if result:
            pending = False
            if m.tool_call_id:
                call = by_id.get(m.tool_call_id)
                if call is None:
                    orphans.append(pos)
            else:
                call = answer_latest(m.name)
                if call is None:
                    orphans.append(pos)
        elif m.kind != KIND_MESSAGE or m.role in ("system", "developer"):
            pass  # context mechanics and system text neither answer nor end an action
        elif m.role == "assistant":
            step += 1
            latest, latest_calls = pos, []
            cut = (m.meta or {}).get("stop_reason") in CUT_OFF_STOPS
            for c in m.tool_calls:
                calls.append(Call(pos, seqs[pos], step, c.name, c.id, "call", cut))
                latest_calls.append(len(calls) - 1)
                if c.id:
                    by_id[c.id] = len(calls) - 1
            pending = protocol == "text" and not m.tool_calls and text_action(m.text) is not None
        elif m.role == "user":
            meta = m.meta or {}
            if pending and not is_feedback(m) and not meta.get("exit") and (
                    text_agent or "returncode" in meta or _OBSERVATION.match(m.text)):
                result, call = True, text_call("bash")
            elif not is_feedback(m) and (tool := text_result_tool(m.text, fmt)) is not None:
                result, call = True, answer_latest(tool)
            pending = False
        if call is not None:
            answered.add(call)
        flags.append(result)
        answers.append(call)
    return Pairing(protocol, seqs, tuple(flags), tuple(answers), tuple(calls), tuple(orphans), latest,
                   sum(f and m.role == "user" for f, m in zip(flags, msgs)))


def tool_outputs(messages: Sequence[Any], fmt: str | None) -> ToolOutputs:
    """Which messages are tool output (see the module docstring).

    ``messages`` are ``Message``s or ``StoredMessage``s (anything with ``.message`` is unwrapped).
    """
    p = pair_tools(messages, fmt)
    return ToolOutputs(p.protocol, p.flags)


def tool_pairs(messages: Sequence[Any], fmt: str | None = None) -> dict[str, Any]:
    """A session's calls and results as every rule pairs them (``pair_tools``), for ``ctxf check``:
    ``{"calls", "results", "unanswered": [{"seq", "step", "tool", "call_id"}], "orphan_results":
    [{"seq", "call_id"}]}``. ``unanswered`` leaves out the last model call's calls (the session
    may have ended while they ran) and a cut-off reply's (``CUT_OFF_STOPS``: never run)."""
    msgs = [getattr(m, "message", m) for m in messages]
    p = pair_tools(messages, fmt)
    return {
        "calls": len(p.calls),
        "results": sum(p.flags),
        "unanswered": [{"seq": c.seq, "step": c.step, "tool": c.tool, "call_id": c.call_id} for c in p.unanswered()],
        "orphan_results": [{"seq": p.seqs[pos], "call_id": msgs[pos].tool_call_id} for pos in p.orphans],
    }
