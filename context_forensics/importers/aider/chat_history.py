"""The ``aider_chat`` importer: Aider's chat history, ``.aider.chat.history.md``.

What Aider writes (Aider-AI/aider ``aider/io.py``): ``# aider chat started at <local time>`` at
the start of every run; the user's input as ``#### `` lines (``user_input``; a line break is two
spaces at the end of a line); the model's reply as plain text after a blank line
(``ai_output``); Aider's own output as ``> `` lines (``tool_output`` / ``tool_error``; a
multi-line one has the ``> `` on its first line only and ends at the line that ends with the
two-space break). Aider reads the file back the same way (``utils.split_chat_history_markdown``,
for ``--restore-chat-history``), leaving its own output out: so does this importer, which keeps
user and assistant messages only. Unlike Aider's reader, a ``#### `` line is user input only
when it ends with the two-space break (every input line does; a reply's own ``#### `` heading
does not).

One session per run. Commands (``#### /...``, ``#### !...``) are not sent to the model as they
are (``/code x``, ``/ask x`` are followed by ``#### x``): they are no messages. ``> Aider v...``,
``> Main model: X with Y edit format`` and ``> Editor model: X with Y edit format`` name the
version and the models (each reply gets the model in force).

The history each call reads follows Aider's own code (Aider-AI/aider v0.83.1, the version of the
corpus log, unchanged in these parts to v0.86): the chat history shows the messages, not the
request, so where Aider's code rather than the log decides a window, the marker or message says so
(``meta["aider_source"]``):

- ``/clear`` and ``/reset`` (or a prefix Aider resolves to one, ``/res``: ``Commands.run`` runs the
  one command a prefix matches; "Ambiguous command" / "Invalid command" after it: it did not run;
  its output "All chat history cleared." / "All files dropped and chat history cleared." confirms
  it) empty the chat (``commands._clear_chat_history``): a ``history_edit`` marker (type
  ``clear``) evicts the history the next call would have read.
- ``--restore-chat-history``: a Coder made with no chat (``Coder.__init__``, ``if not
  self.done_messages and restore_chat_history``) reloads the whole chat history file as its chat
  (``utils.split_chat_history_markdown``: every ``#### `` line, commands included, and every reply,
  of every run so far). A new Coder is made from the current one by ``/ask x``, ``/code x``,
  ``/architect x``, ``/context x``, ``/ok``, ``/chat-mode``, ``/model`` (``Coder.create(from_coder=)``)
  and at start-up; so after a ``/clear`` such a command brings the cleared chat back. The chat
  history does not record the option: the LLM history beside it does (a request whose message is a
  command line of this file, which Aider sends only when it reloaded the file); the session's
  ``metadata["restore_chat_history"]`` says what was found. The reloaded messages are added again
  (``meta["aider_restored"]``; a reply as ``scripted``: no call) after a ``history_edit`` of type
  ``restore`` that takes nothing out and names the code (``rests_on``).
- ``/architect``: the architect's reply is handed to an editor Coder made with an empty chat
  (``architect_coder.reply_completed``: ``editor_coder.done_messages = []``) that reads it as its
  user message (written to this file as ``#### `` lines, the architect's reply again). That call's
  window is the editor's own: a ``history_edit`` (type ``editor``) evicts the chat before the
  proposal, and after the editor's reply another takes the editor's messages out and the
  architect's chat is sent again (``meta["aider_resent"]``; ``meta["copy_of"]``: the position of
  the message it copies), followed by the pair Aider adds (``move_back_cur_messages("I made those
  changes to the files.")`` and ``"Ok."``), which the file does not show.

Not modelled (the chat history holds no trace of them): the summary Aider makes of a long chat
(``ChatSummary``; the LLM history records it) and the messages Aider sends without writing them
here (the files it added on the model's mention, its reflections).

Usage: ``> Tokens: 3.2k sent, 1.1k cache write, 2.0k cache hit, 222 received. Cost: $0.0014
message, $0.0071 session.`` (``base_coder.calculate_and_show_tokens_and_cost``; the ``Cost:``
part only for models with prices, on its own line when both cache figures are given). Aider
prints the counts rounded (``utils.format_tokens``: below 1,000 as they are, below 10,000 to
0.1k, above to 1k; versions before 0.60 printed them whole with commas), so they are recorded on
the reply before them as ``meta["usage_rounded"]`` with each figure's rounding error
(``prompt_tokens_error``: 0, 50 or 500 tokens), and as the reply's ``Message.usage`` with that
error as the error bar (``Usage.prompt_tokens_error`` / ``completion_tokens_error``: the replay
calibrates on it and ``ctxf check`` compares with it as a range, never as an exact figure; the
cache figures stay in the meta). "sent" is the
sum of the calls of one user message (a reply cut at the length limit and continued is two
calls), and Aider's own estimate when the provider returned no usage. The cost figures are kept
as printed (``meta["cost_rounded"]``). The exact prompts of the same calls are in the LLM
history (``aider``); this file does not show the system prompt, the repo map or the files.

Edits: the model writes them in its reply (SEARCH/REPLACE blocks, or whole-file listings in the
``whole`` edit format); what Aider did with them is its own output after the reply
(``base_coder.apply_updates``): ``> Applied edit to PATH`` per file (``meta["edits_applied"]``),
and for a block it could not apply, ``## SearchReplaceNoExactMatch: This SEARCH block failed to
exactly match lines in PATH`` with the block (``meta["edits_failed"]``: path and SEARCH text) and
``# The other N SEARCH/REPLACE blocks were applied successfully`` (``meta["edits_others_applied"]``).
Each reply also carries the edit format in force (``meta["edit_format"]``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ...records import KIND_MESSAGE, KIND_SCRIPTED, Message, Session, Usage, history_edit, position_runs
from .._text import clip, title_line
from ..base import RECORD_ERRORS, ImportContext, Importer, head_text, register

CHAT_FILE = ".aider.chat.history.md"
STARTED = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)\s*$")
_N = r"[\d][\d,]*(?:\.\d+)?k?"
TOKENS = re.compile(
    rf"Tokens: (?P<sent>{_N}) sent(?:, (?P<write>{_N}) cache write)?(?:, (?P<hit>{_N}) cache hit)?"
    rf", (?P<recv>{_N}) received")
COST = re.compile(r"Cost: \$(?P<message>[\d.]+) message, \$(?P<session>[\d.]+) session")
MODEL = re.compile(r"^(?:Main model|Model): (\S+)(?: with (\S+) edit format)?")
VERSION = re.compile(r"^Aider v(\S+)")
APPLIED = re.compile(r"^Applied edit to (.+?)\s*$")
# a block Aider could not apply (``editblock_coder.apply_edits``): its file, then the block
FAILED = re.compile(r"^## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in (.+?)\s*\n"
                    r"<{5,9} SEARCH\s*\n(.*?)^={5,9}\s*$", re.MULTILINE | re.DOTALL)
OTHERS_APPLIED = re.compile(r"^# The other (\d+) SEARCH/REPLACE blocks? (?:were|was) applied successfully",
                            re.MULTILINE)
CLEARING = ("/clear", "/reset")
EDITOR = re.compile(r"^Editor model: (\S+) with (\S+) edit format")
# Aider's commands (aider/commands.py ``cmd_*``, v0.83.1 and v0.86): a typed prefix runs the one
# command it matches (``Commands.matching_commands``)
COMMANDS = ("/add", "/architect", "/ask", "/chat-mode", "/clear", "/code", "/commit", "/context", "/copy",
            "/copy-context", "/diff", "/drop", "/edit", "/editor", "/editor-model", "/exit", "/git", "/help",
            "/lint", "/load", "/ls", "/map", "/map-refresh", "/model", "/models", "/multiline-mode", "/ok",
            "/paste", "/quit", "/read-only", "/reasoning-effort", "/report", "/reset", "/run", "/save",
            "/settings", "/test", "/think-tokens", "/tokens", "/undo", "/voice", "/weak-model", "/web")
# the commands that make a new Coder from the current one (``_generic_chat_command``, ``SwitchCoder``)
NEW_CODER = ("/ask", "/code", "/architect", "/context", "/ok", "/chat-mode", "/model", "/editor-model",
             "/weak-model")
# what Aider prints when it cleared the chat (``cmd_clear`` since v0.85.2, ``cmd_reset`` since v0.52)
CLEARED = {"All chat history cleared.": "/clear", "All files dropped and chat history cleared.": "/reset"}
NOT_RUN = ("Ambiguous command:", "Invalid command:")
EDITOR_DONE = "I made those changes to the files."  # architect_coder.reply_completed
ARCHITECT_SRC = "aider/coders/architect_coder.py ArchitectCoder.reply_completed (v0.58-v0.86)"
RESTS_ON = f"Aider's code ({ARCHITECT_SRC})"
RESTORE_SRC = "aider/coders/base_coder.py Coder.__init__: restore_chat_history, utils.split_chat_history_markdown"


def resolve_command(word: str) -> str | None:
    """The command Aider runs for a typed word: itself, or the one command it is a prefix of."""
    if word in COMMANDS:
        return word
    matches = [c for c in COMMANDS if c.startswith(word)]
    return matches[0] if len(matches) == 1 else None


def _same_text(a: str, b: str) -> bool:
    """Whether two texts are the same up to Aider's line breaks (the trailing spaces of a line)."""
    return [x.rstrip() for x in a.strip().splitlines()] == [x.rstrip() for x in b.strip().splitlines()]


def restore_evidence(path: Path, commands: set[str]) -> tuple[bool | None, str]:
    """Whether Aider ran with ``--restore-chat-history``, and what says so: the LLM history beside
    the chat history (``.aider.llm.history``, or a name that begins so, of ``TO LLM`` records) sends
    one of this file's command lines as a message (the line after ``-------``) only when Aider
    reloaded this file as the chat; None when no LLM history is beside it (the chat history does not
    record the option; an LLM history under another name is not looked for)."""
    unknown = (None, "the chat history does not record --restore-chat-history and no LLM history is beside it: "
                     "Aider's default (off) is followed")
    try:
        entries = sorted(p for p in path.parent.glob(".aider.llm.history*") if p != path and p.is_file())
    except OSError:
        return unknown
    seen: list[str] = []
    for other in entries:
        try:
            with open(other, encoding="utf-8", errors="replace") as f:
                if not f.readline().startswith("TO LLM "):
                    continue
                seen.append(other.name)
                prev = ""
                for lineno, raw in enumerate(f, start=2):
                    line = raw.rstrip("\r\n")
                    if prev == "-------" and line.startswith("USER /") and line[5:].rstrip() in commands:
                        return True, (f"{other.name}:{lineno} sends the command line {clip(line[5:].rstrip(), 40)!r} "
                                      "as a message: Aider reloaded the chat history file")
                    prev = line
        except OSError:
            continue
    if seen:
        return False, f"{seen[0]} beside it sends none of this file's command lines as a message: no reload"
    return unknown


def figure(text: str) -> tuple[int, int]:
    """A count as Aider printed it, and its rounding error (half the last unit printed)."""
    if text.endswith("k"):
        num = text[:-1].replace(",", "")
        decimals = len(num.partition(".")[2])
        return round(float(num) * 1000), 500 // 10**decimals if decimals <= 2 else 0
    return int(text.replace(",", "")), 0


def parse_tokens_line(text: str) -> dict[str, Any] | None:
    """The rounded usage of a ``Tokens:`` line (and its ``Cost:``), or None."""
    m = TOKENS.search(text)
    if m is None:
        return None
    out: dict[str, Any] = {}
    for group, key in (("sent", "prompt_tokens"), ("recv", "completion_tokens"), ("write", "cache_creation_tokens"),
                       ("hit", "cache_read_tokens")):
        if m.group(group):
            value, error = figure(m.group(group))
            out[key] = value
            out[f"{key}_error"] = error
    out["text"] = m.group(0) + "."
    out["rounded"] = any(v for k, v in out.items() if k.endswith("_error"))
    return out


def rounded_usage(u: dict[str, Any]) -> Usage | None:
    """A ``Tokens:`` line as the call's recorded usage, each figure with its rounding as the error
    bar (``Usage.prompt_tokens_error``: 2.4k is 2,400 ± 50). The cache figures stay in
    ``meta["usage_rounded"]`` only (Usage has no error bar for them)."""
    if u.get("prompt_tokens") is None and u.get("completion_tokens") is None:
        return None
    return Usage(prompt_tokens=u.get("prompt_tokens"), completion_tokens=u.get("completion_tokens"),
                 prompt_tokens_error=u.get("prompt_tokens_error") or None,
                 completion_tokens_error=u.get("completion_tokens_error") or None)


def run_headers(path: Path) -> list[dict[str, Any]]:
    """Each run of a chat history: its start (ISO, local time), version and models, from the
    ``# aider chat started at`` and ``> Main model:`` lines (for the ``aider`` importer)."""
    runs: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("# aider chat started at "):
                    m = STARTED.match(line)
                    if m:
                        runs.append({"started_at": f"{m.group(1)}T{m.group(2)}", "models": []})
                elif runs and line.startswith("> "):
                    body = line[2:].strip()
                    mm = MODEL.match(body)
                    if mm and mm.group(1) not in runs[-1]["models"]:
                        runs[-1]["models"].append(mm.group(1))
                    mv = VERSION.match(body)
                    if mv and "aider_version" not in runs[-1]:
                        runs[-1]["aider_version"] = mv.group(1)
    except OSError:
        return []
    return runs


class _Run:
    """One run being read: its messages and what Aider said about it.

    ``live`` is the chat the main Coder's next call reads (its done and cur messages), as positions
    in ``messages``; ``chat`` the file's messages so far as Aider reads the file back (shared by the
    runs of one file); ``restore`` the evidence that ``--restore-chat-history`` was in force."""

    def __init__(self, started_at: str | None, line: int, chat: list[tuple[str, str]] | None = None,
                 restore: str | None = None) -> None:
        self.started_at = started_at
        self.line = line
        self.messages: list[Message] = []
        self.model: str | None = None
        self.models: list[str] = []
        self.version: str | None = None
        self.commands = 0
        self.usage_lines = 0
        self.unattached_usage = 0
        self.clears = 0
        self.last_reply: int | None = None  # position of the reply a Tokens line belongs to
        self.edit_reply: int | None = None  # the reply Aider's "Applied edit to" lines report on
        self.edit_format: str | None = None  # "> Main model: X with Y edit format"
        self.editor_model: str | None = None  # "> Editor model: X with Y edit format"
        self.editor_format: str | None = None
        self.chat = chat if chat is not None else []
        self.restore = restore
        self.live: list[int] = []
        self.editor: tuple[list[int], list[int]] | None = None  # (the architect's chat, the editor's messages)
        self.pending_clear: str | None = None  # a clearing command whose output may say it did not run
        self.editor_calls = 0
        self.restores = 0
        self.restore_said: tuple[bool | None, str] = (bool(restore) or None, restore or "")
        if restore and self.chat:  # start-up: the main Coder reloads the file's earlier runs
            self._restore("start-up")

    def _add(self, m: Message) -> int:
        self.messages.append(m)
        self.live.append(len(self.messages) - 1)
        return len(self.messages) - 1

    def settle(self) -> None:
        """What Aider did before the next input: the clear a command made, the architect's chat
        back after its editor's call."""
        if self.pending_clear is not None:
            word, self.pending_clear = self.pending_clear, None
            self._end_editor()
            if self.live:
                self.clears += 1
                first, last = self.live[0], self.live[-1]
                self.messages.append(history_edit(
                    "clear", "evicted", position_runs(self.live), f"aider_chat:{word}",
                    f"{word}: Aider cleared the chat history it sends (messages {first}-{last})"
                    + ("" if self.restore else "; unless Aider ran with --restore-chat-history, which the chat "
                       "history does not record: then the next /ask, /code, /architect, /chat-mode or /model "
                       "reloads it from the file")))
                self.live = []
        self._end_editor()

    def _restore(self, why: str) -> None:
        """A Coder made with no chat reloads the whole chat history file as its chat."""
        self.restores += 1
        source = f"{RESTORE_SRC}; evidence: {self.restore}"
        self.messages.append(history_edit(
            "restore", "evicted", [], f"aider_chat:{why}",
            f"{why}: Aider made a Coder with no chat, which reloads the chat history file as its chat "
            f"(--restore-chat-history): {len(self.chat)} message(s) of the file, commands included, are sent again",
            rests_on=f"Aider's code ({RESTORE_SRC}); {self.restore}"))
        for role, text in self.chat:
            self._add(Message(role=role, text=text, kind=KIND_MESSAGE if role == "user" else KIND_SCRIPTED,
                              meta={"aider_restored": why, "aider_source": source}))

    def _end_editor(self) -> None:
        """After the editor's call: its messages leave, the architect's chat is sent again with the
        pair Aider adds to it."""
        if self.editor is None:
            return
        saved, mine = self.editor
        self.editor = None
        self.messages.append(history_edit(
            "editor", "evicted", position_runs(mine), "aider_chat:architect",
            f"the editor's {len(mine)} message(s) are not in the architect's chat; Aider sends the architect's "
            f"chat again, with \"{EDITOR_DONE}\" and \"Ok.\" ({ARCHITECT_SRC})", rests_on=RESTS_ON))
        self.live = []
        for p in saved:
            m = self.messages[p]
            self._add(Message(role=m.role, text=m.text, kind=KIND_SCRIPTED if m.role == "assistant" else m.kind,
                              model=m.model, meta={"aider_resent": True, "copy_of": p, "aider_source": ARCHITECT_SRC}))
        self._add(Message(role="user", text=EDITOR_DONE, meta={"aider_source": ARCHITECT_SRC}))
        self._add(Message(role="assistant", text="Ok.", kind=KIND_SCRIPTED, meta={"aider_source": ARCHITECT_SRC}))

    def user(self, text: str) -> None:
        prev = self.messages[-1] if self.messages else None
        if (self.editor is None and self.pending_clear is None and prev is not None and prev.role == "assistant"
                and prev.kind == KIND_MESSAGE and _same_text(text, prev.text)):
            # the architect's reply handed to its editor: a Coder with a chat of its own
            self.editor_calls += 1
            saved = list(self.live)
            if saved:
                self.messages.append(history_edit(
                    "editor", "evicted", position_runs(saved), "aider_chat:architect",
                    f"the architect hands its reply to the editor, a Coder with an empty chat: the editor's call "
                    f"reads its system prompt, the files and this proposal, not the chat's {len(saved)} message(s) "
                    f"({ARCHITECT_SRC})", rests_on=RESTS_ON))
            self.live = []
            self._add(Message(role="user", text=text, meta={"aider_editor": True, "aider_source": ARCHITECT_SRC}))
            self.editor = (saved, [len(self.messages) - 1])
            self.last_reply = self.edit_reply = None
            return
        self.settle()
        self._add(Message(role="user", text=text))
        self.last_reply = self.edit_reply = None

    def reply(self, text: str) -> None:
        if self.editor is None:
            self.settle()
        meta: dict[str, Any] = {"edit_format": self.edit_format} if self.edit_format else {}
        model = self.model
        if self.editor is not None:  # the editor Coder: the editor model and edit format
            meta = {"aider_coder": "editor", "aider_source": ARCHITECT_SRC,
                    **({"edit_format": self.editor_format or self.edit_format}
                       if self.editor_format or self.edit_format else {})}
            model = self.editor_model or self.model
        self.last_reply = self.edit_reply = self._add(Message(role="assistant", text=text, model=model, meta=meta))
        if self.editor is not None:
            self.editor[1].append(self.last_reply)

    def _note(self, key: str, value: Any) -> None:
        """Add ``value`` to the list ``meta[key]`` of the reply Aider's output reports on."""
        if self.edit_reply is None:
            return
        m = self.messages[self.edit_reply]
        meta = dict(m.meta)
        meta[key] = [*meta.get(key, []), value]
        self.messages[self.edit_reply] = Message(role=m.role, text=m.text, kind=m.kind, model=m.model, meta=meta,
                                                 usage=m.usage)

    def command(self, text: str) -> None:
        self.commands += 1
        if self.pending_clear is not None:  # the architect's chat comes back at the next call, not at a command
            self.settle()
        typed = text.split(None, 1)
        word = resolve_command(typed[0]) if typed[0].startswith("/") else None
        if word in CLEARING:
            self.pending_clear = word
        elif word in NEW_CODER and self.restore and not self.live:
            self._restore(typed[0])
        self.last_reply = None

    def output(self, text: str, ctx: ImportContext, line: int) -> None:
        if text.startswith(NOT_RUN):
            self.pending_clear = None
        elif text.strip() in CLEARED:
            self.pending_clear = CLEARED[text.strip()]
        usage = parse_tokens_line(text) if "Tokens: " in text else None
        if usage is not None:
            self.usage_lines += 1
            cost = COST.search(text)
            if self.last_reply is None:
                self.unattached_usage += 1
                return
            m = self.messages[self.last_reply]
            meta = dict(m.meta)
            meta["usage_rounded"] = usage
            if cost:
                meta["cost_rounded"] = {"message_usd": float(cost.group("message")),
                                        "session_usd": float(cost.group("session")), "text": cost.group(0) + "."}
            self.messages[self.last_reply] = Message(role=m.role, text=m.text, kind=m.kind, model=m.model, meta=meta,
                                                     usage=rounded_usage(usage))
            self.last_reply = None  # one Tokens line per reply
            return
        applied = APPLIED.match(text)
        if applied:  # the edits of the last reply Aider applied (``edits_applied``), and those it could not
            self._note("edits_applied", applied.group(1))
            return
        for failed in FAILED.finditer(text):
            self._note("edits_failed", {"path": failed.group(1), "search": failed.group(2)})
        if (others := OTHERS_APPLIED.search(text)) is not None:
            self._note("edits_others_applied", int(others.group(1)))
        mm = MODEL.match(text)
        if mm:
            self.model = mm.group(1)
            self.edit_format = mm.group(2) or self.edit_format
            if self.model not in self.models:
                self.models.append(self.model)
        me = EDITOR.match(text)
        if me:
            self.editor_model, self.editor_format = me.group(1), me.group(2)
            if self.editor_model not in self.models:
                self.models.append(self.editor_model)
        mv = VERSION.match(text)
        if mv and self.version is None:
            self.version = mv.group(1)


def _command_lines(path: Path) -> set[str]:
    """The commands typed in a chat history (its ``#### /...`` lines, as Aider sends them back)."""
    out: set[str] = set()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for raw in f:
                if raw.startswith("#### /"):
                    out.add(raw[5:].rstrip())
    except OSError:
        pass
    return out


def _chunks(path: Path, ctx: ImportContext) -> Iterator[tuple[str, int, str]]:
    """``(kind, line, text)`` blocks of the file: ``start``, ``user``, ``output``, ``reply``."""
    kind: str | None = None
    buf: list[str] = []
    at = 0
    open_output = False  # a multi-line output not yet ended by its two-space break

    def flush() -> Iterator[tuple[str, int, str]]:
        nonlocal kind, buf
        if kind is not None:
            text = "\n".join(buf)
            if kind == "reply":
                text = text.strip("\n")
            if text.strip() or kind == "user":
                yield kind, at, text
        kind, buf = None, []

    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, raw in enumerate(f, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            if open_output:
                buf.append(line.removesuffix("  "))
                if line.endswith("  "):
                    open_output = False
                continue
            if STARTED.match(line):
                yield from flush()
                yield "start", lineno, line
                continue
            # Aider ends every line of the user's input with the two-space break; a reply's own
            # "#### " markdown heading has none.
            if line.startswith("#### ") and line.endswith("  ") or line in ("####", "#### "):
                if kind != "user":
                    yield from flush()
                    kind, at = "user", lineno
                buf.append(line[5:].removesuffix("  "))
                continue
            if line.startswith("> ") or line == ">":
                yield from flush()
                kind, at = "output", lineno
                body = line[2:]
                buf.append(body.removesuffix("  "))
                open_output = not body.endswith("  ") and bool(body.strip())
                yield from flush() if not open_output else ()
                if open_output:
                    kind = "output"
                continue
            if kind != "reply":
                yield from flush()
                kind, at = "reply", lineno
            buf.append(line)
    if open_output:
        ctx.warn("the last output of Aider did not end (a run cut short?)")
    yield from flush()


@register
class AiderChat(Importer):
    """Aider's chat history markdown: one session per run, rounded recorded usage."""

    name = "aider_chat"
    description = ("Aider chat history (.aider.chat.history.md in the repo where aider ran): the chat as shown, "
                   "with Aider's rounded token and cost lines")
    extensions = (".md",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        first = head_text(head).partition("\n")[0]
        return STARTED.match(first.rstrip("\r")) is not None

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        run: _Run | None = None
        runs = 0
        chat: list[tuple[str, str]] = []  # the file as Aider reads it back (every run so far)
        in_force, evidence = restore_evidence(path, _command_lines(path))
        restore = evidence if in_force else None
        for kind, line, text in _chunks(path, ctx):
            try:
                if kind == "start":
                    if run is not None:
                        yield self._session(path, run, ctx)
                    m = STARTED.match(text)
                    run = _Run(f"{m.group(1)}T{m.group(2)}" if m else None, line, chat, restore)
                    run.restore_said = (in_force, evidence)
                    runs += 1
                    continue
                if run is None:
                    run = _Run(None, line, chat, restore)
                    run.restore_said = (in_force, evidence)
                if kind != "output" and text.strip():
                    chat.append(("user" if kind == "user" else "assistant", text))
                if kind == "user":
                    if text.startswith(("/", "!")):
                        run.command(text)
                    else:
                        run.user(text)
                elif kind == "output":
                    run.output(text, ctx, line)
                else:
                    run.reply(text)
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what=kind, line=line)
        if run is not None:  # what Aider would do after the last call (a clear, the editor's end) is no window
            yield self._session(path, run, ctx)

    def _session(self, path: Path, run: _Run, ctx: ImportContext) -> Session:
        msgs = run.messages
        if run.unattached_usage:
            ctx.warn(f"run at line {run.line}: {run.unattached_usage} Tokens line(s) follow no reply; not attached")
            ctx.skip("Tokens line without a reply", run.unattached_usage)
        if run.commands:
            ctx.skip("aider command (not sent to the model)", run.commands)
        title = next((title_line(m.text, 80) for m in msgs
                      if m.role == "user" and m.text and "aider_restored" not in m.meta), None)
        metadata: dict[str, Any] = {
            "agent": "aider",
            "usage_lines": run.usage_lines,
            "usage": "rounded (Aider prints 3.2k): each reply's usage, with each figure's error (prompt_tokens_error)",
            "timestamps": "local time of the machine Aider ran on (no zone recorded)",
            "first_line": run.line,
        }
        if run.models:
            metadata["models"] = run.models
        if run.version:
            metadata["aider_version"] = run.version
        if run.clears:
            metadata["clears"] = run.clears
        if run.editor_calls:
            metadata["editor_calls"] = run.editor_calls
        in_force, evidence = run.restore_said
        metadata["restore_chat_history"] = {"in_force": in_force, "evidence": evidence,
                                            **({"restores": run.restores} if in_force else {})}
        return Session(
            external_id=f"{path.name}@{run.started_at or f'line {run.line}'}",
            format=self.name,
            messages=msgs,
            title=title,
            model=run.models[0] if run.models else None,
            started_at=run.started_at,
            metadata=metadata,
        )
