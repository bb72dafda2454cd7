"""The ``aider`` importer: Aider's LLM history file, every main-model call's exact request.

Layout (Aider-AI/aider ``aider/io.py`` ``log_llm_history``, ``aider/utils.py``
``format_messages`` / ``format_content``)::

    TO LLM 2025-05-04T17:06:58          <- a call: local time, no zone
    -------                             <- each message opens with this line
    SYSTEM Act as an expert ...         <- its lines, prefixed by its upper-cased role
    USER ...
    LLM RESPONSE 2025-05-04T17:07:07    <- the reply (written in a ``finally``: empty when the
    ASSISTANT ...                          call failed, e.g. rate-limited and retried)

The text of a message is its lines without the role prefix, joined by newlines: exactly what was
sent up to line endings (``str.splitlines`` drops a trailing newline and reads ``\\r\\n`` as one
break). A line without the prefix continues the message (Aider writes the parts of a list
content as ``ROLE key: value``, the value unprefixed after its first line).

Aider rebuilds its prompt for every call (system prompt, examples, repo map, the files' current
contents, the chat so far, a reminder), so one call's request is seldom the last one's plus its
answer. The session keeps each message once, in the order it was first sent: a call adds the
messages of its request not already in the history (matched by content hash), then its answer.
Earlier messages a call did not send again (an older version of a file, a repo map, a cleared
chat, an empty failed answer) leave the history at a ``history_edit`` marker (type ``rebuild``,
``evicted``) placed before that call's new messages, so the recorded policy's window before
each answer holds exactly the messages that call was sent. Each answer's ``meta["request"]``
carries ``input_hashes`` (the content hashes of its request, in order, duplicates included),
``input_differs`` when that order is not the history's (the token figures then count exactly
what was sent), ``sent_at`` and ``messages``; ``meta["call_index"]`` is its place in the file.
Aider's few-shot examples (the messages between the system prompt and "I switched to a new code
base.") carry ``meta["is_demo"]``: another task's requests, not this session's.
A failed call (an empty ``LLM RESPONSE``) keeps its request and an empty answer with
``meta["no_response"]``.

Runs: the file is appended to by every run of Aider. When the chat history Aider writes beside
it (``.aider.chat.history.md``) is there, its ``# aider chat started at`` lines split the calls
into one session per run (and its ``Main model:`` lines name the run's models); otherwise the
file is one session. The file records no usage: that is in the chat history (``aider_chat``),
rounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ...records import KIND_MESSAGE, KIND_SCRIPTED, Message, Session, history_edit, position_runs
from .._text import title_line
from ..base import RECORD_ERRORS, ImportContext, Importer, head_text, register
from .chat_history import CHAT_FILE, run_headers

_TS = r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)"
REQUEST = re.compile(rf"^TO LLM {_TS}$")
RESPONSE = re.compile(rf"^LLM RESPONSE {_TS}$")
SEPARATOR = "-------"
ROLES = {"SYSTEM": "system", "USER": "user", "ASSISTANT": "assistant", "TOOL": "tool", "FUNCTION": "tool",
         "DEVELOPER": "developer"}
_ROLE_LINE = re.compile(r"^(SYSTEM|USER|ASSISTANT|TOOL|FUNCTION|DEVELOPER)(?: |$)")


@dataclass
class Call:
    """One ``TO LLM`` record and its ``LLM RESPONSE``."""

    index: int  # 0-based, in the file
    line: int  # of the TO LLM line
    sent_at: str
    request: list[Message] = field(default_factory=list)
    answer: str | None = None  # None: no LLM RESPONSE record followed
    answered_at: str | None = None


def _strip(line: str, prefix: str) -> str:
    if line.startswith(prefix + " "):
        return line[len(prefix) + 1:]
    return "" if line == prefix else line


def _message(lines: list[str], ts: str) -> Message:
    """A request message from its logged lines (raises ValueError when no line names a role)."""
    m = _ROLE_LINE.match(lines[0]) if lines else None
    if m is None:
        raise ValueError("a message of the request names no role")
    prefix = m.group(1)
    return Message(role=ROLES[prefix], text="\n".join(_strip(x, prefix) for x in lines), timestamp=ts)


# Aider's few-shot examples end with this pair (base_coder.format_chat_chunks, when the examples are
# messages rather than part of the system prompt)
EXAMPLES_END = "I switched to a new code base."
# The chunks of a request (base_coder.format_chat_chunks): system, examples, read-only files, repo map,
# done (the chat so far), chat files, cur (this turn), reminder. The fixed prompts that open the
# chunks before the chat (coders/base_prompts.py; "I am working with you ..." is the older repo prefix)
# and the chat files' block after it:
_BEFORE_CHAT = (EXAMPLES_END, "Here are summaries of some files present in my git repository",
                "I am working with you on code in a git repository", "Here are some READ ONLY files")
_CHAT_FILES = ("I have *added these files to the chat*", "I am not sharing any files",
               "I am not sharing the full contents", "Don't try and edit any existing code without asking")
# ChatSummary (aider/history.py) replaces the done messages by one user message with this prefix
# (aider/prompts.py summary_prefix)
SUMMARY_PREFIX = "I spoke to you previously about a number of things."


def _chat_part(request: list[Message]) -> list[int]:
    """The indices of a request's chat: its done and cur messages, between the chunks before the
    chat (system prompt, examples, read-only files, repo map, each with Aider's "Ok" after it) and
    the chat files' block, and after that block; not a system message (a reminder)."""
    start = 0
    for i, m in enumerate(request):
        if m.role == "system" or (m.meta or {}).get("is_demo") or (m.role == "user"
                                                                   and m.text.startswith(_BEFORE_CHAT)):
            start = i + 1
            if i + 1 < len(request) and request[i + 1].role == "assistant" and m.role == "user":
                start = i + 2  # Aider's "Ok" to it
    out = []
    skip = False
    for i in range(start, len(request)):
        m = request[i]
        if m.role == "user" and m.text.startswith(_CHAT_FILES):
            skip = True  # the block and Aider's "Ok" to it
            continue
        if skip and m.role == "assistant":
            skip = False
            continue
        skip = False
        if m.role != "system":
            out.append(i)
    return out


def _mark_examples(request: list[Message]) -> None:
    """Mark Aider's few-shot examples of a request ``is_demo``: the messages between its system
    prompt and the "I switched to a new code base." that closes them. They are another task's
    requests and answers, not this session's (drift's goal and requests leave them out)."""
    end = next((i for i, m in enumerate(request) if m.role == "user" and m.text.startswith(EXAMPLES_END)), None)
    if end is None or not request or request[0].role != "system":
        return
    for i in range(1, end):
        m = request[i]
        request[i] = Message(m.role, m.text, m.kind, m.name, m.tool_calls, m.tool_call_id, m.parts, m.usage,
                             m.timestamp, m.model, {**(m.meta or {}), "is_demo": True})


def _request(lines: list[str], ts: str, call: Call, ctx: ImportContext) -> None:
    groups: list[list[str]] = []
    for x in lines:
        if x == SEPARATOR:
            groups.append([])
        elif groups:
            groups[-1].append(x)
    for i, g in enumerate(groups):
        if g and g[-1] == "" and len(g) > 1:
            g = g[:-1]  # the blank line before a following record
        if not g:
            ctx.skip("request message without content")  # content None: nothing was logged of it
            continue
        try:
            call.request.append(_message(g, ts))
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what=f"message {i + 1} of the call", line=call.line)
    _mark_examples(call.request)


def read_calls(path: Path, ctx: ImportContext) -> list[Call]:
    """The calls of an LLM history file, in order."""
    calls: list[Call] = []
    cur: Call | None = None
    req_lines: list[str] = []
    resp_lines: list[str] | None = None
    stray = 0

    def close() -> None:
        nonlocal cur, resp_lines
        if cur is None:
            return
        try:
            _request(req_lines, cur.sent_at, cur, ctx)
            if resp_lines is not None:
                body = resp_lines[:-1] if resp_lines and resp_lines[-1] == "" else resp_lines
                cur.answer = "\n".join(_strip(x, "ASSISTANT") for x in body)
            calls.append(cur)
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="call", line=cur.line)
        cur, resp_lines = None, None

    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        for lineno, raw in enumerate(f, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            m = REQUEST.match(line)
            if m:
                close()
                cur = Call(index=len(calls), line=lineno, sent_at=m.group(1))
                req_lines = []
                continue
            m = RESPONSE.match(line)
            if m and cur is not None and resp_lines is None:
                cur.answered_at = m.group(1)
                resp_lines = []
                continue
            if cur is None:
                if line.strip():
                    stray += 1
                continue
            (req_lines if resp_lines is None else resp_lines).append(line)
    close()
    if stray:
        ctx.warn(f"{stray} line(s) outside any TO LLM record skipped")
        ctx.skip("line outside a call", stray)
    return calls


class _History:
    """The session being built: each message once, and which of them the last call sent."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.live: list[int] = []  # positions the last call sent (and its answer)
        self.chat: set[int] = set()  # the positions of the last call's chat (done, cur) and its answer

    def add_call(self, call: Call, k: int) -> None:
        # An assistant message of the prompt that is not an answer still in the history is text
        # Aider wrote into the prompt ("Ok.", the examples) or an old answer sent again after a
        # call left it out: scripted, never a step (only a call's own answer is one).
        live = {self.messages[p].hash for p in self.live}
        prompt = [m if m.role != "assistant" or m.kind != KIND_MESSAGE or m.hash in live else
                  Message(m.role, m.text, KIND_SCRIPTED, m.name, m.tool_calls, m.tool_call_id, m.parts, m.usage,
                          m.timestamp, m.model, m.meta)
                  for m in call.request]
        hashes = [m.hash for m in prompt]
        free: dict[str, list[int]] = {}
        for p in self.live:
            free.setdefault(self.messages[p].hash, []).append(p)
        sent: list[int | None] = []
        for h in hashes:
            ps = free.get(h)
            sent.append(ps.pop(0) if ps else None)
        gone = sorted(p for ps in free.values() for p in ps)
        # Aider summarized the chat (a new summary message): the chat turns the last call sent that
        # this one does not are summarized, at a compaction; the rest of what left was rebuilt
        summary = next((j for j, m in enumerate(prompt) if sent[j] is None and m.role == "user"
                        and m.text.startswith(SUMMARY_PREFIX)), None)
        summarized = [p for p in gone if p in self.chat] if summary is not None else []
        if summary is not None and summarized:
            said = prompt[summary]
            prompt[summary] = Message(said.role, said.text, said.kind, timestamp=said.timestamp,
                                      meta={**(said.meta or {}), "aider_summary": True})
            self.messages.append(history_edit(
                "compaction", "summarized", position_runs(summarized), "aider:TO LLM",
                f"Aider summarized the chat before call {k}: {len(summarized)} earlier message(s) replaced by "
                f"its summary (\"{SUMMARY_PREFIX}\")", messages=len(summarized)))
        rebuilt = [p for p in gone if p not in set(summarized)]
        if rebuilt:
            self.messages.append(history_edit(
                "rebuild", "evicted", position_runs(rebuilt), "aider:TO LLM",
                f"Aider's call {k} did not send {len(rebuilt)} earlier message(s) again (it rebuilds the prompt "
                "for every call: files' current contents, the repo map, the chat it keeps)",
                messages=len(rebuilt)))
        for j, m in enumerate(prompt):
            if sent[j] is None:
                sent[j] = len(self.messages)
                self.messages.append(m)
        # the answer joins the chat (Aider's done messages) unless the call failed: nothing of it is kept
        self.chat = {at for j in _chat_part(prompt) if (at := sent[j]) is not None} | (
            {len(self.messages)} if call.answer else set())
        positions = [p for p in sent if p is not None]
        request: dict[str, Any] = {"sent_at": call.sent_at, "messages": len(hashes), "input_hashes": hashes}
        if positions != sorted(positions):
            request["input_differs"] = True
        meta: dict[str, Any] = {"call_index": call.index, "request": request}
        if not call.answer:
            meta["no_response"] = True
        if call.answer is None:
            meta["no_response_record"] = True
        self.live = positions + [len(self.messages)]
        answer = Message(role="assistant", text=call.answer or "", timestamp=call.answered_at or call.sent_at,
                         meta=meta)
        self.messages.append(answer)


@register
class AiderLLMHistory(Importer):
    """Aider's LLM history (``--llm-history-file``): every main-model call's exact request."""

    name = "aider"
    description = ("Aider LLM history (.aider.llm.history, or the file --llm-history-file names, in the repo "
                   "where aider ran): each call's exact prompt")
    extensions = (".history", ".md", ".txt", ".log")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        first, _, rest = text.partition("\n")
        return REQUEST.match(first.rstrip("\r")) is not None and (rest.startswith(SEPARATOR)
                                                                   or "\nLLM RESPONSE " in rest)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        calls = read_calls(path, ctx)
        if not calls:
            from ...errors import InputError

            raise InputError("no call could be read (no TO LLM record with its messages)", where=str(path),
                             hint="the file must be an Aider LLM history; force another format with --format")
        unanswered = [c for c in calls if c.answer is None]
        if unanswered:
            ctx.warn(f"{len(unanswered)} call(s) have no LLM RESPONSE record (the last one: line "
                     f"{unanswered[-1].line}); kept with an empty answer")
        chat = path.with_name(CHAT_FILE)
        runs = run_headers(chat) if chat != path and chat.is_file() else []
        groups: list[tuple[dict[str, Any] | None, list[Call]]] = []
        for call in calls:
            run = None
            for r in runs:
                if r["started_at"] <= call.sent_at:
                    run = r
            if not groups or groups[-1][0] is not run:
                groups.append((run, []))
            groups[-1][1].append(call)
        failed = sum(1 for c in calls if not c.answer)
        for run, group in groups:
            session = None
            with ctx.record("run of calls", line=group[0].line):
                session = self._session(path, run, group, chat if runs else None)
            if session is not None:
                yield session
        if failed:
            ctx.skip("call without an answer (failed or interrupted)", failed)

    def _session(self, path: Path, run: dict[str, Any] | None, calls: list[Call], chat: Path | None) -> Session:
        hist = _History()
        for k, call in enumerate(calls, start=1):
            hist.add_call(call, k)
        users = [m for m in calls[0].request if m.role == "user" and m.text]
        title = title_line(users[-1].text, 80) if users else None
        metadata: dict[str, Any] = {
            "agent": "aider",
            "calls": len(calls),
            "failed_calls": sum(1 for c in calls if not c.answer),
            "first_call_line": calls[0].line,
            "timestamps": "local time of the machine Aider ran on (no zone recorded)",
        }
        model = None
        if run is not None:
            metadata["run_started_at"] = run["started_at"]
            metadata["runs_from"] = chat.name if chat else None
            if run["models"]:
                metadata["models"] = run["models"]
                model = run["models"][0]
            if run.get("aider_version"):
                metadata["aider_version"] = run["aider_version"]
        return Session(
            external_id=f"{path.name}@{calls[0].sent_at}",
            format=self.name,
            messages=hist.messages,
            title=title or None,
            model=model,
            started_at=run["started_at"] if run is not None else calls[0].sent_at,
            metadata=metadata,
        )
