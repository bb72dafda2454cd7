"""A person's words in a log: the part of a user message a person wrote.

Several agents write tool results and harness notes as user messages, and Cline keeps a person's
feedback inside the result of the call it answers. ``human_text`` sets aside what the harness wrote,
by what the log records: ``meta`` flags of the importers (Claude Code ``is_meta`` skill prompts,
``command_wrapper`` local-command records, ``interrupted``; mini-swe-agent ``interrupt_type`` format
errors, ``exit``; Pi ``bashExecution`` output the user ran; Codex ``injected`` environment context;
SWE-agent ``observation`` / ``is_demo``; of a Copilot CLI message, its ``typed_content`` is what the
person typed, before the CLI framed it with ``<current_datetime>`` and ``<reminder>`` blocks), and by the harnesses'
fixed framings (``HARNESS``): Cline's ``[tool for 'x'] Result:`` (of which only the ``<feedback>`` / ``<user_message>``
a person typed is kept) and its todo-list reminders (``# TODO LIST UPDATE REQUIRED``, ``# task_progress``),
mini-swe-agent's ``<returncode>``, Claude Code's ``<system-reminder>`` / ``<task-notification>`` /
``<local-command-…>`` and its compaction prompt (the first words of an ``acompact`` subagent), Gemini CLI's "System:
Please continue." (the CLI sends it when its next-speaker check says the model should go on), SWE-agent's ``(Open file:
…)`` footer, aider's prompts (file lists, the no-files prompt, its chat summary, its reflection on edits that failed to
match, its lint output, commit and command reports). A Cline ``<feedback>`` keeps only what is inside it; an Aider
message loses the edit-format reminder Aider appends to it and the ``/ask`` / ``/code`` command before it, so
the copy Aider sends again without them is the same request. A user message that repeats an earlier
assistant reply (aider's architect mode hands the architect's reply to the editor as user text) is
the harness's too; Aider's few-shot examples are ``is_demo`` (the aider importer), and the chat
Aider sends again (``aider_restored``, ``aider_resent``: the aider_chat importer) is its own copy.

Drift's requests (``analysis/drift/segments.py``) and explain's "a person wrote again" (a
conversation's last answer is no submission: ``analysis/diverge/events.py`` marks ``Event.person``)
read it.
"""

from __future__ import annotations

import re
from typing import Any

_HARNESS_META = ("is_meta", "is_demo", "command_wrapper", "interrupted", "interrupt_type", "exit",
                 "transcript_only", "injected", "aider_restored", "aider_resent")
_HARNESS_SOURCES = ("bashExecution", "compaction")

# Fixed framings harnesses write as user text (the agent each comes from in the module docstring).
HARNESS = re.compile(
    r"\A\s*(?:"
    r"\[[\w ./-]+(?: for '[^'\n]*')?\] Result:"  # Cline tool result
    r"|The user provided the following feedback:"  # Cline feedback on a denied tool call
    r"|<(?!task>|user_message>|feedback>)[a-z][\w-]*(?:\s[^>\n]*)?>"  # <returncode>, <system-reminder>, ...
    r"|\[[^\]\n]{1,80}\](?!\()"  # [File: ...] (SWE-agent), [ERROR] / [Tool] (Cline), [Request interrupted ...]
    r"|#\s*TODO LIST UPDATE REQUIRED|#\s*task_progress\b"  # Cline's focus chain (its todo-list reminders)
    r"|I have \*added these files to the chat\*|Here are summaries of some files present in my git repository"
    r"|I switched to a new code base|I added these files to the chat|I made those changes to the files"
    r"|I updated the files|I am not sharing (?:any files|the full contents)|Here are some READ ONLY files"
    r"|I am working with you on code in a git repository|Don't try and edit any existing code without asking"
    r"|I committed the changes with git hash|I didn't see any properly formatted edits|I edited the files myself"
    r"|I ran this command:|I did `git reset --hard"  # aider's prompts (coders/base_prompts.py, prompts.py)
    r"|I spoke to you previously about a number of things"  # aider's chat summary (prompts.summary_prefix)
    r"|Your task is to create a detailed summary of the conversation so far"  # Claude Code's compaction prompt
    r"|# \d+ SEARCH/REPLACE blocks? failed to match"  # aider's reflection on edits that did not apply
    r"|# Fix any errors below, if possible"  # aider's lint output (base_coder.lint_edited)
    r"|Ran `"  # Pi: a shell command the user ran with "!"
    r"|System: Please continue\.\s*\Z"  # Gemini CLI's own continuation (core/client.ts)
    r")"
    r"|\(Open file: [^)\n]*\)\s*\(Current directory:",  # SWE-agent's observation footer, anywhere
    re.IGNORECASE,
)
# What a person typed inside a Cline tool result: feedback on a completion or a denied call, a message.
_CLINE_HUMAN = re.compile(r"(?:feedback on the results\.[^<]{0,300}|following "
                          r"feedback:\s*)<feedback>\s*(.*?)\s*</feedback>|<user_message>\s*(.*?)\s*</user_message>",
                          re.DOTALL)
# ... and inside the result of the call it answers (a tool message): the feedback on a completion (after
# its command's output), on a denied call, the answer to a follow-up question; never a file or an
# output that happens to quote such text (a read of a Cline history)
_CLINE_RESULT_HUMAN = re.compile(
    r"\A\s*(?:\[Tool\]\s*)?(?:\[attempt_completion\] Result:[\s\S]*feedback on the results\.[^<]{0,300}"
    r"<feedback>\s*(.*?)\s*</feedback>"
    r"|\[[^\]\n]+\] Result:\s*The user denied this operation and provided the following feedback:\s*"
    r"<feedback>\s*(.*?)\s*</feedback>"
    r"|\[ask_followup_question for '[^'\n]*'\] Result:\s*<answer>\s*(.*?)\s*</answer>)", re.DOTALL)
_TASK_TAG = re.compile(r"\A\s*<task>\s*(.*?)\s*</task>", re.DOTALL)
# Cline's feedback on a completion, once its "[attempt_completion] Result:" is a tool message of its own
_FEEDBACK_TAG = re.compile(r"\A\s*<feedback>\s*(.*?)\s*</feedback>", re.DOTALL)
# What Aider appends to the person's message (base_coder.format_chat_chunks: the edit format's
# system_reminder, when the model takes it as user text), and the chat command the person typed first
_AIDER_REMINDER = re.compile(r"\n\n+(?:(?:# \*SEARCH/REPLACE block\* Rules:|To suggest changes to a file you MUST "
                             r"return the entire content|# File editing rules:|You are diligent and tireless!"
                             r"|Pay careful attention to the scope of the user's request)[\s\S]*"
                             r"|Reply in [^\n]{1,40}\.\s*)\Z")  # its final_reminders: "Reply in English."
_AIDER_COMMAND = re.compile(r"\A/(?:ask|code|architect|context)\s+(?=\S)")


def human_text(message: Any, earlier_replies: set[str] | None = None) -> str:
    """The part of a user message a person wrote ('' when the harness or a tool wrote all of it).
    A tool result holds a person's words only where Cline puts them: the feedback on a completion or
    a denied call, a message, the answer to its follow-up question (the result of the call it
    answers once the importer pairs Cline's results with their calls)."""
    from ..records import KIND_MESSAGE

    if message.role not in ("user", "tool") or message.kind != KIND_MESSAGE:
        return ""
    meta = message.meta or {}
    if any(meta.get(k) for k in _HARNESS_META) or meta.get("source") in _HARNESS_SOURCES \
            or meta.get("message_type") == "observation":
        return ""
    text = message.text or ""
    if earlier_replies and text_key(text) in earlier_replies:
        return ""
    typed = meta.get("typed_content")  # Copilot CLI records what the person typed, before its framing
    if isinstance(typed, str) and message.role == "user":
        return typed
    if message.role == "tool":
        said = _CLINE_RESULT_HUMAN.match(text)
        return next((g for g in said.groups() if g and g.strip()), "") if said else ""
    if HARNESS.search(text):
        kept = [a or b for a, b in _CLINE_HUMAN.findall(text)]
        return "\n".join(k for k in kept if k.strip())
    task = _TASK_TAG.match(text) or _FEEDBACK_TAG.match(text)
    if task:
        return task.group(1)
    return _AIDER_COMMAND.sub("", _AIDER_REMINDER.sub("", text).strip())


def text_key(text: str) -> str:
    """A text as ``earlier_replies`` and ``seen`` hold it: its words, the first 200 characters."""
    return " ".join(text.split())[:200]


reply_key = text_key  # the key of an assistant reply in ``earlier_replies``


def new_human_text(message: Any, seen: set[str], earlier_replies: set[str] | None = None) -> str:
    """``human_text`` of a message, '' when the person's words in it were sent before (a text sent
    again, as Aider sends the opening request with every call, is not a new message); ``seen``
    gathers the texts met so far."""
    text = human_text(message, earlier_replies)
    if not text or text_key(text) in seen:
        return ""
    seen.add(text_key(text))
    return text
