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
requests: precision 0.21, recall 0.44; docs/commands/drift.md's table), so nothing is scored against a segment's
goal alone. An explicit goal (``--goal``, ``drift.goal``) is the goal of the whole session: no
request joins it and no segment is opened after it.

**Human text** (``matching.person.human_text``): the part of a user message a person wrote, not
the tool results and harness notes several agents write as user text (the rules, agent by agent,
are in that module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ...matching.person import human_text, new_human_text, reply_key  # noqa: F401  (human_text: re-exported)
from .goal import goal_words

# A user message with fewer content words is an acknowledgement or a short steer, never a new task.
MIN_REQUEST_WORDS = 2
# A request whose similarity to the goal in force is below this opens a new segment (calibrated on the
# labelled user messages of bench/data/drift_labels.yaml: `bench/drift.py calibrate` prints the table).
NEW_TASK_SIMILARITY = 0.20



@dataclass(frozen=True)
class Request:
    """A user message that could open a new segment: before step index ``step`` (0-based)."""

    seq: int
    step: int
    text: str
    answers: str = ""  # the text of the assistant reply the request answers (the last one before it)


def person_messages(messages: Sequence[Any], step_seqs: Sequence[int]) -> list[Request]:
    """Every user message a person wrote after the first model call (``human_text``), each with the
    step it precedes; a text sent again (the opening or an earlier message Aider sends with every
    call) is not a new message. A message after the last step precedes none and is left out."""
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
            replies.add(reply_key(m.text))
            last_reply = m.text
        if k >= len(step_seqs):
            continue
        text = new_human_text(m, seen, replies)
        if text and sm.seq > first:
            out.append(Request(seq=sm.seq, step=k, text=text, answers=last_reply))
    return out


def requests(messages: Sequence[Any], step_seqs: Sequence[int]) -> list[Request]:
    """The person's messages after the first model call (``person_messages``) with at least
    MIN_REQUEST_WORDS content words, each with the step it precedes."""
    return [r for r in person_messages(messages, step_seqs) if len(goal_words(r.text)[0]) >= MIN_REQUEST_WORDS]
