"""Events: a run turned into the logical events two runs are aligned by.

Two runs (typically a success and a failure) are turned into **logical events** and aligned,
not their raw messages:

``system``   instructions (system / developer messages);
``user``     user inputs (the task statement and anything a person said later);
``action``   one assistant action: a tool call (tool name + normalized arguments), or the
             command of a text action for text-protocol agents (mini-swe-agent's bash block);
``result``   what the environment answered to an action (a tool message, or the observation a
             text-protocol harness sends back as a user message);
``answer``   assistant text that is not an action (a chat reply, a summary) and a harness's
             final submission record.

Events the alignment ignores (listed under ``skipped``): harness feedback (format errors, "no
tool calls found", OpenHands' "Please continue working on the task"), the assistant turn such
feedback rejected, and **retries**: an action followed, after only its own results, by the same
action again folds into that later attempt. So a run that retried a command and then went on
like the other run has not diverged. Compaction records, cleared results and reasoning items
are context mechanics, not events: the replay accounts for them.

Paths and texts lose the run's own root (``roots.run_roots``: the working folder the log records)
as well as the harness roots. A result carries the log's own verdict on it where the log has one
(``error``: Claude Code's and Pi's ``is_error``, Copilot CLI's ``success``, Gemini CLI's
``status``). Cline's results, which its history keeps as user text (``[write_to_file for 'x']
Result: ...``), answer the call they name. Aider's edits are no tool calls: each SEARCH/REPLACE
block (or whole-file listing) of a reply is an ``edit`` action (tool ``aider_edit``), applied or
not as Aider's own output says (``error`` on the action: the chat history's ``Applied edit to``
and failure lines, the LLM history's failure feedback).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...matching.person import new_human_text, reply_key
from ...records import KIND_MESSAGE, KIND_SUBMISSION
from ...tool_output import AIDER_FORMATS, is_feedback, pair_tools, text_action
from .actions import canonical_call, canonical_shell, tool_kind
from .display import cap, one_line
from .edit_formats import AIDER_FAILED, aider_blocks, aider_failed_blocks, aider_listings
from .normalize import content_key, given_text, normalize_output, normalize_text, short_hash
from .roots import run_roots

EVENT_TYPES = ("system", "user", "action", "result", "answer")
GIVEN_TYPES = ("system", "user")  # given to the model, not generated: compared as text, never by cosine
TEXT_LIMIT = 4000  # characters of an event's text in JSON output
# what a tool result that reports a failure says (when no return code tells)
_ERROR = re.compile(r"^(?:error|traceback|fatal)\b|no replacement was performed|no such file or directory"
                    r"|command not found|invalid `?path"
                    # SWE-agent's linting editor: the edit would break the file's syntax and was not applied
                    r"|your proposed edit has introduced new syntax error|your changes have not been applied"
                    # a person turned the call down (Cline, Claude Code); Cline's tool error
                    r"|the user denied this operation|doesn't want to proceed with this tool use"
                    r"|the tool execution failed",
                    re.IGNORECASE | re.MULTILINE)


@dataclass(slots=True)
class Event:
    """One logical event of a run."""

    index: int
    type: str  # system | user | action | result | answer
    key: str  # compared for exact matches (type-prefixed)
    text: str  # normalized comparable text (free text, tool output body, action command)
    display: str  # one readable line
    seq: int
    step: int | None  # action/answer: its own model call; input: the model call that reads it
    rc: int | None = None
    tool: str | None = None
    parent: int | None = None  # result -> index of its action
    skip: str | None = None  # why the alignment ignores it: retry | feedback | rejected | cut_off
    truncated: bool = False
    via: str | None = None  # result: the kind of tool that produced it (shell, editor, or a tool name)
    parent_key: str | None = None  # result: its action's key
    result: Event | None = field(default=None, repr=False)  # action: its (first) result
    arguments: str | None = field(default=None, repr=False)  # tool-call action: its raw arguments (edits)
    submission: bool = False  # answer: the harness's final submission (the patch), not generated text
    # result: the log's own verdict (True: it says the call failed; False: it says it succeeded);
    # an action with no result message (an Aider edit): whether Aider said it did not apply
    error: bool | None = None
    cwd: str | None = None  # action: the folder its shell was in, when the log records one apart (Claude Code)
    # user (or result): a person wrote it, or some of it (drift's ``new_human_text``: not a tool result or
    # harness note written as user text, not a text sent before; Cline's feedback inside a result is the
    # person's); a run a person wrote in again is a conversation
    person: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "seq": self.seq, "step": self.step, "key": self.key.split(":", 1)[1],
                "display": self.display, "text": cap(self.text, TEXT_LIMIT), "tool": self.tool, "returncode": self.rc}


@dataclass
class RunEvents:
    """A run's events, its action protocol, the seqs of its model calls and its submission."""

    session_id: str
    format: str
    protocol: str  # text | tools | chat
    events: list[Event]
    step_seqs: list[int]
    submission: str | None = None  # the final submission's text, when a message holds it
    submission_seq: int | None = None
    roots: tuple[str, ...] = ()  # the run's own roots (the working folder its log records)
    roots_source: str = ""  # where the log records them ("" when it does not)

    @property
    def harness(self) -> str:
        """``format/protocol``: runs of one harness get the same prompts and task templates."""
        return f"{self.format}/{self.protocol}"

    def aligned(self) -> list[Event]:
        """The events the alignment takes (not skipped)."""
        return [e for e in self.events if e.skip is None]


def _display_action(key: str) -> str:
    """An action key on one line without its content hashes."""
    return one_line(re.sub(r" #[0-9a-f]{10}\b", "", key))


def _next_step(step_seqs: list[int], seq: int) -> int | None:
    """The first model call after ``seq`` (the one that reads it), None after the last."""
    k = bisect_right(step_seqs, seq)
    return k + 1 if k < len(step_seqs) else None


def extract_events(messages: Sequence[Any], fmt: str, session_id: str = "",
                   metadata: dict[str, Any] | None = None) -> RunEvents:
    """A run's logical events, with retries, harness feedback and rejected turns marked ``skip``.

    ``messages`` are ``StoredMessage``s (``.seq`` and ``.message``) or plain ``Message``s;
    ``metadata`` is the session's (the working folder it records: ``roots``).
    """
    msgs = [(getattr(sm, "seq", i), getattr(sm, "message", sm)) for i, sm in enumerate(messages)]
    found = run_roots(fmt, metadata, [m for _, m in msgs])
    roots = found.paths
    step_seqs = [seq for seq, m in msgs if m.role == "assistant" and m.kind == KIND_MESSAGE]
    step_of = {seq: k + 1 for k, seq in enumerate(step_seqs)}
    pairs = pair_tools([m for _, m in msgs], fmt)  # which messages are results, of which calls (one notion)
    protocol = pairs.protocol

    events: list[Event] = []
    answers: dict[str, str] = {}  # tool_call_id -> the result's text (decides `view` of a folder)
    for _, m in msgs:
        if m.role == "tool" and m.tool_call_id and m.tool_call_id not in answers:
            answers[m.tool_call_id] = m.text
    action_of: dict[int, int] = {}  # index in pairs.calls -> its action event
    text_action_at: dict[int, int] = {}  # position of a reply whose text is an action -> its action event
    reply_actions: dict[int, list[int]] = {}  # position of a reply -> the events it made
    last_assistant: list[int] = []  # events of the latest assistant message
    answered = False  # something non-assistant happened after it

    def add(**kw: Any) -> Event:
        e = Event(index=len(events), **kw)
        events.append(e)
        return e

    def parent_of(call: int | None) -> int | None:
        """The action event of the call a result answers: a tool call's own event, a text
        action's event; none for a reply that is no action event (an answer)."""
        if call is None:
            return None
        if call in action_of:
            return action_of[call]
        pos = pairs.calls[call].pos
        if pos in text_action_at:
            return text_action_at[pos]
        if msgs[pos][1].tool_calls:  # a result more than the reply's calls: it answers none of them
            return None
        # a result answering a reply's edits made in its text (Aider's blocks): the reply's first action
        return next((i for i in reply_actions.get(pos, ()) if events[i].type == "action"), None)

    call_index: dict[tuple[int, int], int] = {}  # (position, k) -> index in pairs.calls of that reply's k-th tool call
    per_reply: dict[int, int] = {}
    for ci, c in enumerate(pairs.calls):
        if c.written == "call":
            k = per_reply.get(c.pos, 0)
            call_index[(c.pos, k)], per_reply[c.pos] = ci, k + 1

    submission: tuple[int, str] | None = None
    aider_mode: str | None = None  # the LLM history's edit format, from the system prompt in force
    said: set[str] = set()  # the person's texts so far (``new_human_text``)
    replies: set[str] = set()  # the assistant's texts so far (a reply handed back as user text is not the person's)
    for pos, (seq, m) in enumerate(msgs):
        meta = m.meta or {}
        if m.kind == KIND_SUBMISSION or (m.role == "user" and m.kind == KIND_MESSAGE and meta.get("exit")):
            # a harness's final submission record (the patch): compared under ``patches``
            submission = (seq, m.text)
            t = normalize_text(m.text, roots)
            add(type="answer", key="answer:" + content_key(t), text=t, display="submission: " + one_line(m.text),
                seq=seq, step=_next_step(step_seqs, seq), submission=True)
            answered = True
            continue
        if m.kind != KIND_MESSAGE:
            continue  # compaction records, cleared results, reasoning items: context mechanics
        if m.role in ("system", "developer"):
            aider_mode = _aider_mode(m.text) if fmt in AIDER_FORMATS else None
            t = given_text(m.text)
            add(type="system", key="system:" + content_key(t), text=t, display=one_line(m.text),
                seq=seq, step=_next_step(step_seqs, seq))
            answered = True
        elif m.role == "assistant":
            if m.text:
                replies.add(reply_key(m.text))
            step = step_of.get(seq)
            last_assistant = reply_actions[pos] = []
            answered = False
            if m.tool_calls:
                for k, c in enumerate(m.tool_calls):
                    result = answers.get(c.id) if c.id else None
                    key, readable = canonical_call(c.name, c.arguments, result, roots)
                    e = add(type="action", key="action:" + key, text=readable, display=_display_action(key),
                            seq=seq, step=step, tool=c.name, arguments=c.arguments,
                            cwd=meta["cwd"] if isinstance(meta.get("cwd"), str) else None)
                    action_of[call_index[(pos, k)]] = e.index
                    if result is None and pairs.calls[call_index[(pos, k)]].cut_off:
                        e.skip = "cut_off"  # a reply the harness cut off: the call never ran (CUT_OFF_STOPS)
                    last_assistant.append(e.index)
            elif fmt in AIDER_FORMATS and (edits := _aider_edits(m, aider_mode)):
                for name, arguments, error in edits:
                    key, readable = canonical_call(name, arguments, None, roots)
                    e = add(type="action", key="action:" + key, text=readable, display=_display_action(key),
                            seq=seq, step=step, tool=name, arguments=arguments, error=error)
                    last_assistant.append(e.index)
            else:
                cmd = text_action(m.text) if protocol == "text" else None
                if cmd is not None:
                    key = canonical_shell(cmd, roots)
                    e = add(type="action", key="action:" + key, text=cmd, display=_display_action(key),
                            seq=seq, step=step, tool="bash")
                    text_action_at[pos] = e.index
                    last_assistant.append(e.index)
                elif m.text.strip():
                    t = normalize_text(m.text, roots)
                    e = add(type="answer", key="answer:" + content_key(t), text=t, display=one_line(m.text),
                            seq=seq, step=step)
                    last_assistant.append(e.index)
        elif pairs.flags[pos]:  # a result (a tool message, or written as user text), of the call it answers
            if fmt in AIDER_FORMATS and AIDER_FAILED in m.text:  # Aider's feedback on blocks it could not apply
                _aider_failed(events, last_assistant, m.text)
            _add_result(add, events, m, seq, step_seqs, parent_of(pairs.answers[pos]), meta, roots)
            # Cline keeps the person's feedback on a completion inside that call's result
            events[-1].person = bool(new_human_text(m, said, replies))
            answered = True
        elif m.role == "tool":  # never: every tool message is a result
            continue
        else:  # user
            if is_feedback(m):
                add(type="user", key="user:feedback", text=normalize_text(m.text), display=one_line(m.text),
                    seq=seq, step=_next_step(step_seqs, seq), skip="feedback")
                if not answered:
                    for i in last_assistant:
                        events[i].skip = "rejected"
                last_assistant = []
                continue
            if fmt in AIDER_FORMATS and AIDER_FAILED in m.text:  # Aider's feedback on blocks it could not apply
                _aider_failed(events, last_assistant, m.text)
            t = given_text(m.text)
            add(type="user", key="user:" + content_key(t), text=t, display=one_line(m.text), seq=seq,
                step=_next_step(step_seqs, seq), person=bool(new_human_text(m, said, replies)))
            answered = True
    _mark_retries(events)
    return RunEvents(session_id, fmt, protocol, events, step_seqs, submission=submission[1] if submission else None,
                     submission_seq=submission[0] if submission else None, roots=roots, roots_source=found.source)




def _aider_mode(system: str) -> str | None:
    """The edit format an Aider system prompt asks for: ``whole``, ``diff`` or None (no edits: ask mode)."""
    if "*file listing*" in system:
        return "whole"
    if "SEARCH/REPLACE" in system:
        return "diff"
    return None


def _aider_edits(m: Any, mode: str | None) -> list[tuple[str, str, bool | None]]:
    """(tool, arguments, error) of each edit in an Aider reply: its SEARCH/REPLACE blocks, or its
    whole-file listings. The chat history says which Aider applied (``meta``: see the aider_chat
    importer): a block of a file it reported neither applying nor failing is no edit (a reply in
    ask mode, a code sample). The LLM history says nothing on success: its blocks stand unless
    Aider's feedback says they failed (``_aider_failed``)."""
    meta = m.meta or {}
    fmt = meta.get("edit_format") or mode
    applied = set(meta.get("edits_applied") or [])
    failed = [(f.get("path"), f.get("search") or "") for f in meta.get("edits_failed") or [] if isinstance(f, dict)]
    reported = "edits_applied" in meta or "edits_failed" in meta
    others = bool(meta.get("edits_others_applied"))
    out: list[tuple[str, str, bool | None]] = []
    if fmt == "whole":
        for path, content in aider_listings(m.text, names=applied):
            if reported and path not in applied:
                continue
            out.append(("aider_edit", json.dumps({"path": path, "content": content}), False if reported else None))
        return out
    if fmt is None and not reported:
        return out
    for b in aider_blocks(m.text):
        bad = any(p == b.path and s.strip() == b.search.strip() for p, s in failed)
        if bad:
            error: bool | None = True
        elif b.path in applied or (failed and others):
            error = False
        elif reported:
            continue  # Aider reported on this reply and not on this file: not an edit it made
        else:
            error = None
        out.append(("aider_edit", json.dumps({"path": b.path, "old_str": b.search, "new_str": b.replace}), error))
    return out


def _aider_failed(events: list[Event], last: list[int], text: str) -> None:
    """Mark the blocks of the last reply that Aider's feedback (the LLM history's next user
    message) says failed to match."""
    failed = aider_failed_blocks(text)
    for i in last:
        e = events[i]
        if e.tool != "aider_edit" or not e.arguments:
            continue
        args = json.loads(e.arguments)
        if any(p == args.get("path") and s == (args.get("old_str") or "").strip() for p, s in failed):
            e.error = True
        elif e.error is None:
            e.error = False


def _error_flag(meta: dict[str, Any]) -> bool | None:
    """The log's own verdict on a tool result: ``is_error`` (Claude Code, Pi), ``success``
    (Copilot CLI, Codex's older payloads), ``status`` (Gemini CLI); None when it has none."""
    if isinstance(meta.get("is_error"), bool):
        return meta["is_error"]
    if isinstance(meta.get("success"), bool):
        return not meta["success"]
    status = meta.get("status")
    if isinstance(status, str):
        return status.lower() not in ("success", "ok", "completed")
    return None


def _add_result(add: Callable[..., Event], events: list[Event], m: Any, seq: int, step_seqs: list[int],
                parent: int | None, meta: dict[str, Any], roots: tuple[str, ...] = ()) -> None:
    """Add the result event of message ``m``, answering the action ``parent`` (if known)."""
    command = None
    if parent is not None and tool_kind(events[parent].tool) == "shell":
        command = events[parent].text
    rc = meta.get("returncode") if isinstance(meta.get("returncode"), int) else None
    out = normalize_output(m.text, command, rc, roots)
    key = "result:" + short_hash(str(out.rc), out.body)
    first = out.body.split("\n", 1)[0] if out.body else "(empty)"
    display = (f"rc={out.rc} " if out.rc is not None else "") + one_line(first, 100)
    via = tool_kind(events[parent].tool) if parent is not None else None
    e = add(type="result", key=key, text=out.body, display=display, seq=seq, step=_next_step(step_seqs, seq),
            rc=out.rc, tool=m.name, parent=parent, truncated=out.truncated, via=via,
            parent_key=events[parent].key if parent is not None else None, error=_error_flag(meta))
    if parent is not None and events[parent].result is None:
        events[parent].result = e


def _mark_retries(events: list[Event]) -> None:
    """An action followed (after only its own results) by the same action is a retry: it and
    its results are skipped, the last attempt stands."""
    live = [e for e in events if e.skip is None]
    for k, e in enumerate(live):
        if e.type != "action":
            continue
        j = k + 1
        while j < len(live) and live[j].type == "result" and live[j].parent == e.index:
            j += 1
        if j < len(live) and live[j].type == "action" and live[j].key == e.key:
            e.skip = "retry"
            for r in live[k + 1:j]:
                r.skip = "retry"


def failed(e: Event) -> bool:
    """A tool result that reports a failure: the log flags it an error, a non-zero return code,
    or an error message."""
    return e.error is True or (e.rc is not None and e.rc != 0) or bool(_ERROR.search(e.text))
