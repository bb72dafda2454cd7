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
are (``/code x``, ``/ask x`` are followed by ``#### x``): they are no messages; ``/clear`` and
``/reset`` empty the chat history Aider sends, and become a ``history_edit`` marker (type
``clear``) that evicts every earlier message. ``> Aider v...`` and ``> Main model: X with Y edit
format`` name the version and the model (each reply gets the model in force).

Usage: ``> Tokens: 3.2k sent, 1.1k cache write, 2.0k cache hit, 222 received. Cost: $0.0014
message, $0.0071 session.`` (``base_coder.calculate_and_show_tokens_and_cost``; the ``Cost:``
part only for models with prices, on its own line when both cache figures are given). Aider
prints the counts rounded (``utils.format_tokens``: below 1,000 as they are, below 10,000 to
0.1k, above to 1k; versions before 0.60 printed them whole with commas), so they are recorded on
the reply before them as ``meta["usage_rounded"]`` with each figure's rounding error
(``prompt_tokens_error``: 0, 50 or 500 tokens), never as exact ``Message.usage``. "sent" is the
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

from ...records import Message, Session, history_edit
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
OTHERS_APPLIED = re.compile(r"^# The other (\d+) SEARCH/REPLACE blocks? (?:were|was) applied successfully", re.MULTILINE)
CLEARING = ("/clear", "/reset")


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
    """One run being read: its messages and what Aider said about it."""

    def __init__(self, started_at: str | None, line: int) -> None:
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

    def user(self, text: str) -> None:
        self.messages.append(Message(role="user", text=text))
        self.last_reply = self.edit_reply = None

    def reply(self, text: str) -> None:
        meta = {"edit_format": self.edit_format} if self.edit_format else {}
        self.messages.append(Message(role="assistant", text=text, model=self.model, meta=meta))
        self.last_reply = self.edit_reply = len(self.messages) - 1

    def _note(self, key: str, value: Any) -> None:
        """Add ``value`` to the list ``meta[key]`` of the reply Aider's output reports on."""
        if self.edit_reply is None:
            return
        m = self.messages[self.edit_reply]
        meta = dict(m.meta)
        meta[key] = [*meta.get(key, []), value]
        self.messages[self.edit_reply] = Message(role=m.role, text=m.text, model=m.model, meta=meta)

    def command(self, text: str) -> None:
        self.commands += 1
        word = text.split(None, 1)[0]
        if word in CLEARING:
            n = len(self.messages)
            if n:
                self.clears += 1
                self.messages.append(history_edit(
                    "clear", "evicted", [(0, n)], f"aider_chat:{word}",
                    f"{word}: Aider cleared the chat history it sends (messages 0-{n - 1})"))
        self.last_reply = None

    def output(self, text: str, ctx: ImportContext, line: int) -> None:
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
            self.messages[self.last_reply] = Message(role=m.role, text=m.text, model=m.model, meta=meta)
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
        mv = VERSION.match(text)
        if mv and self.version is None:
            self.version = mv.group(1)


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
        for kind, line, text in _chunks(path, ctx):
            try:
                if kind == "start":
                    if run is not None:
                        yield self._session(path, run, ctx)
                    m = STARTED.match(text)
                    run = _Run(f"{m.group(1)}T{m.group(2)}" if m else None, line)
                    runs += 1
                    continue
                if run is None:
                    run = _Run(None, line)
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
        if run is not None:
            yield self._session(path, run, ctx)

    def _session(self, path: Path, run: _Run, ctx: ImportContext) -> Session:
        msgs = run.messages
        if run.unattached_usage:
            ctx.warn(f"run at line {run.line}: {run.unattached_usage} Tokens line(s) follow no reply; not attached")
            ctx.skip("Tokens line without a reply", run.unattached_usage)
        if run.commands:
            ctx.skip("aider command (not sent to the model)", run.commands)
        title = next((m.text.split("\n", 1)[0][:80] for m in msgs if m.role == "user" and m.text), None)
        metadata: dict[str, Any] = {
            "agent": "aider",
            "usage_lines": run.usage_lines,
            "usage": "rounded (Aider prints 3.2k): meta['usage_rounded'] on each reply, with each figure's error",
            "timestamps": "local time of the machine Aider ran on (no zone recorded)",
            "first_line": run.line,
        }
        if run.models:
            metadata["models"] = run.models
        if run.version:
            metadata["aider_version"] = run.version
        if run.clears:
            metadata["clears"] = run.clears
        return Session(
            external_id=f"{path.name}@{run.started_at or f'line {run.line}'}",
            format=self.name,
            messages=msgs,
            title=title,
            model=run.models[0] if run.models else None,
            started_at=run.started_at,
            metadata=metadata,
        )
