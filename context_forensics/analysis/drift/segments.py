"""Goal segments and requests: what the user asks after the opening.

Each user message a *person* wrote after the first model call (``human_text``: not a tool result
written as user text, not a harness's reminder, not a command's output) that says enough to be a
request (``MIN_REQUEST_WORDS`` content words or more: "ok", "yes", "continue", "wow" never are) is a
``Request``, with the text of the assistant reply it answers ("let's start" means what that reply
proposed). Every request joins the goals the later replies are measured against (``curve``): a user
who gives the agent a new task is no drift, whatever this module decides.

A request is compared with the goal in force, by the same measure a reply is (the mean over its
chunks of the best cosine to the goal's references): below ``NEW_TASK_SIMILARITY`` it opens a new
*segment* whose goal is that message, assessed by the same rules as an opening (``goal.unusable``: a
bare URL, path or slash command, a chat opener, or too few words is no goal of its own, and says so);
a segment with no usable goal gives way to the next request that is one ("/mode" then "read theme.md
... port the selector"). A segment is a label for the reader, not a reset: the similarity of a
request to the goal separates new tasks from follow-ups poorly with MiniLM (the labelled held-out
requests: precision 0.21, recall 0.44; the README's table), so nothing is scored against a segment's
goal alone. An explicit goal (``--goal``, ``drift.goal``) is the goal of the whole session: no
request joins it and no segment is opened after it.

**Human text.** Several agents write tool results and harness notes as user messages. Set aside,
by what the log records: ``meta`` flags of the importers (Claude Code ``is_meta`` skill prompts,
``command_wrapper`` local-command records, ``interrupted``; mini-swe-agent ``interrupt_type`` format
errors, ``exit``; Pi ``bashExecution`` output the user ran; Codex ``injected`` environment context;
SWE-agent ``observation`` / ``is_demo``), and by the harnesses' fixed framings (``HARNESS``): Cline's
``[tool for 'x'] Result:`` (of which only the ``<feedback>`` / ``<user_message>`` a person typed is
kept), mini-swe-agent's ``<returncode>``, Claude Code's ``<system-reminder>`` / ``<task-notification>``
/ ``<local-command-…>``, Gemini CLI's "System: Please continue." (the CLI sends it when its
next-speaker check says the model should go on), SWE-agent's ``(Open file: …)`` footer, aider's
file-list prompts. A user
message that repeats an earlier assistant reply (aider's architect mode hands the architect's reply
to the editor as user text) is the harness's too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from .goal import goal_words

# A user message with fewer content words is an acknowledgement or a short steer, never a new task.
MIN_REQUEST_WORDS = 2
# A request whose similarity to the goal in force is below this opens a new segment (calibrated on the
# labelled user messages of bench/data/drift_labels.yaml: `bench/drift.py calibrate` prints the table).
NEW_TASK_SIMILARITY = 0.20

_HARNESS_META = ("is_meta", "is_demo", "command_wrapper", "interrupted", "interrupt_type", "exit",
                 "transcript_only", "injected")
_HARNESS_SOURCES = ("bashExecution", "compaction")

# Fixed framings harnesses write as user text (the agent each comes from in the module docstring).
HARNESS = re.compile(
    r"\A\s*(?:"
    r"\[[\w ./-]+(?: for '[^'\n]*')?\] Result:"  # Cline tool result
    r"|The user provided the following feedback:"  # Cline feedback on a denied tool call
    r"|<(?!task>|user_message>|feedback>)[a-z][\w-]*(?:\s[^>\n]*)?>"  # <returncode>, <system-reminder>, ...
    r"|\[[^\]\n]{1,80}\](?!\()"  # [File: ...] (SWE-agent), [ERROR] / [Tool] (Cline), [Request interrupted ...]
    r"|I have \*added these files to the chat\*|Here are summaries of some files present in my git repository"
    r"|I switched to a new code base|I added these files to the chat|I made those changes to the files"
    r"|I updated the files"  # aider's prompts (aider/coders/base_prompts.py)
    r"|Ran `"  # Pi: a shell command the user ran with "!"
    r"|System: Please continue\.\s*\Z"  # Gemini CLI's own continuation (core/client.ts)
    r")"
    r"|\(Open file: [^)\n]*\)\s*\(Current directory:",  # SWE-agent's observation footer, anywhere
    re.IGNORECASE,
)
# What a person typed inside a Cline tool result: feedback on a completion or a denied call, a message.
_CLINE_HUMAN = re.compile(r"(?:feedback on the results\.[^<]{0,300}|following feedback:\s*)<feedback>\s*(.*?)\s*</feedback>"
                          r"|<user_message>\s*(.*?)\s*</user_message>", re.DOTALL)
_TASK_TAG = re.compile(r"\A\s*<task>\s*(.*?)\s*</task>", re.DOTALL)


def human_text(message: Any, earlier_replies: set[str] | None = None) -> str:
    """The part of a user message a person wrote ('' when the harness or a tool wrote all of it)."""
    from ...records import KIND_MESSAGE

    if message.role != "user" or message.kind != KIND_MESSAGE:
        return ""
    meta = message.meta or {}
    if any(meta.get(k) for k in _HARNESS_META) or meta.get("source") in _HARNESS_SOURCES \
            or meta.get("message_type") == "observation":
        return ""
    text = message.text or ""
    if earlier_replies and _key(text) in earlier_replies:
        return ""
    if HARNESS.search(text):
        kept = [a or b for a, b in _CLINE_HUMAN.findall(text)]
        return "\n".join(k for k in kept if k.strip())
    task = _TASK_TAG.match(text)
    return task.group(1) if task else text.strip()


def _key(text: str) -> str:
    return " ".join(text.split())[:200]


@dataclass(frozen=True)
class Request:
    """A user message that could open a new segment: before step index ``step`` (0-based)."""

    seq: int
    step: int
    text: str
    answers: str = ""  # the text of the assistant reply the request answers (the last one before it)


def requests(messages: Sequence[Any], step_seqs: Sequence[int]) -> list[Request]:
    """Human user messages after the first model call with at least MIN_REQUEST_WORDS content words,
    each with the step it precedes (a message after the last step precedes none and is left out)."""
    if not step_seqs:
        return []
    first, out = step_seqs[0], []
    replies: set[str] = set()
    seen: set[str] = set()
    k = 0
    last_reply = ""
    for sm in messages:
        m = sm.message
        while k < len(step_seqs) and step_seqs[k] < sm.seq:
            k += 1
        if m.role == "assistant" and m.text:
            replies.add(_key(m.text))
            last_reply = m.text
        if sm.seq < first or k >= len(step_seqs):
            continue
        text = human_text(m, replies)
        if not text or _key(text) in seen:  # a message sent again is not a new task
            continue
        seen.add(_key(text))
        if len(goal_words(text)[0]) >= MIN_REQUEST_WORDS:
            out.append(Request(seq=sm.seq, step=k, text=text, answers=last_reply))
    return out
