"""The goal of a session: the reference drift is measured against, and whether it can be judged.

**Reference (the goal).** ``--goal TEXT``, else ``drift.goal`` from the config, else the session's
opening: every system, developer and user message before the first model call (the system
prompt and the first user message, plus any user messages sent before the first reply). An
opening is judged only when it says what the session is for (``assess_goal``: harness
boilerplate shared with other tasks of the format in the store is set aside, and a chat opener
or a task statement under MIN_GOAL_WORDS content words is not a goal): otherwise the report's
state is ``no_goal``, with the reason, and no step gets a score or a verdict.

A goal taken from the session's opening is judged only when it says what the session is for.
Three documented rules decide (``assess_goal``), in this order:

1. Harness boilerplate. The openings of the other sessions of the same format in the store are
   compared word 6-gram by word 6-gram (``TemplateIndex``): a whole message, or a run of at least
   TEMPLATE_MIN_WORDS words, that also opens a session of another task (the task key when the log
   has one, else another opening) is the harness's, not this session's. It is set aside and the
   rest, the task statement, is the goal. Nothing left:
   ``no_goal`` (``boilerplate``). Runs of one task (same task key) share their task statement by
   right, so they never count as each other's template; without task keys, two runs of one task
   with *different* harness wrappers would see each other's task as template (a known limit).
   With no other task of the format in the store nothing can be compared, and the explanation
   says so.
2. A chat opener ("What is up?", "hi", "hello", "can you help me"): every sentence of it is a
   greeting or an offer to ask, not a task: ``no_goal`` (``chat_opener``).
3. Too short: fewer than MIN_GOAL_WORDS distinct content words (words of 3+ letters that are not
   stop words; "Implement spotter-gqc" has 3): an embedding of a few words is too unstable a
   reference (such a goal swung one Claude Code session between FRESH and CRITICAL): ``no_goal``
   (``too_short``).

A session with no system, developer or user text at all (no messages, only replies, only tool
results) has no opening to judge: ``no_goal`` (``no_text``).

``--goal`` / ``drift.goal`` (and the audit's ``max_drift.goal``) always win: an explicit goal is
judged as given. A ``no_goal`` session gets no score and no verdict at any step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from .explain import shorten
from .templates import TemplateIndex
from .terms import content_words

MIN_GOAL_WORDS = 5
NO_GOAL_REASONS = ("too_short", "chat_opener", "boilerplate", "no_text")
_FIX = "pass --goal or set drift.goal"


@dataclass(frozen=True)
class Goal:
    """The reference a session is measured against, and whether it can be judged at all."""

    text: str
    source: str  # "messages" | "option" | "config"
    seqs: tuple[int, ...] = ()  # the goal messages (source "messages")
    parts: tuple[tuple[str, str], ...] = ()  # (role, text) of each goal message
    state: str = "judged"  # "judged" | "no_goal" (see assess_goal)
    reason: str | None = None  # no_goal: "too_short" | "chat_opener" | "boilerplate" | "no_text"
    explanation: str = ""  # one sentence: what the goal is, or why it is not judged and the fix
    content_words: int | None = None  # of the task statement
    template: dict[str, Any] | None = None  # the harness template found in the opening, if any
    task_parts: tuple[tuple[str, str], ...] = ()  # the opening without that template (keywords come from it)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "seqs": list(self.seqs), "text": self.text, "state": self.state,
                "reason": self.reason, "explanation": self.explanation, "content_words": self.content_words,
                "template": self.template}


def no_text_goal() -> Goal:
    """The goal of a session with no system, developer or user text: none to judge (``no_text``)."""
    return Goal(text="", source="messages", state="no_goal", reason="no_text", content_words=0,
                explanation=f"no goal: the session has no system or user text to take as its goal; {_FIX}")


def goal_from_messages(messages: Sequence[Any]) -> Goal | None:
    """System, developer and user messages before the first model call; else the first user message.

    A demonstration the harness replays before the task (SWE-agent's ``is_demo`` messages) is an
    example of another task, not this session's goal, and is left out. ``messages`` are
    ``StoredMessage`` rows (``.seq``, ``.message``). The goal is not yet assessed
    (``assess_goal`` decides whether it can be judged).
    """
    from ...records import KIND_MESSAGE

    def text_of(m: Any) -> bool:
        return m.kind == KIND_MESSAGE and bool(m.text.strip()) and not (m.meta or {}).get("is_demo")

    picked = []
    for sm in messages:
        m = sm.message
        if m.role == "assistant" and m.kind == KIND_MESSAGE:
            break
        if m.role in ("system", "developer", "user") and text_of(m):
            picked.append(sm)
    if not any(sm.message.role == "user" for sm in picked):
        first_user = next((sm for sm in messages if sm.message.role == "user" and text_of(sm.message)), None)
        if first_user is not None:
            picked.append(first_user)
    if not picked:
        return None
    parts = tuple(("user" if sm.message.role == "user" else "system", sm.message.text) for sm in picked)
    return Goal(text="\n\n".join(t for _, t in parts), source="messages",
                seqs=tuple(sm.seq for sm in picked), parts=parts)


def explicit_goal(text: str, source: str) -> Goal:
    """A goal given with --goal (``option``) or drift.goal (``config``): always judged, whatever its length."""
    where = "--goal" if source == "option" else "drift.goal in the config"
    return Goal(text=text, source=source, parts=(("user", text),), content_words=len(content_words(text)),
                explanation=f"given with {where}")


_OPENER = re.compile(
    r"(?:please )?(?:"
    r"hi|hello|hey|heya|hiya|howdy|yo|sup|greetings|good (?:morning|afternoon|evening|day)"
    r"|what'?s up|what is up|wassup|how are you(?: doing)?(?: today)?|how'?s it going|how are things"
    r"|are you there|you there|test(?:ing)?|ping|thanks|thank you|ok|okay"
    r"|(?:can|could|would|will) you (?:help|assist)(?: me)?(?: (?:with something|out|please))?"
    r"|help(?: me)?|i need (?:some |your )?help|i have a (?:quick )?question|quick question"
    r"|(?:there|again|friend|buddy|mate|claude|chatgpt|gpt|bot|assistant|everyone|all)"  # "good morning, assistant"
    r")(?: (?:there|again|friend|buddy|mate|claude|chatgpt|gpt|bot|assistant|everyone|all))?(?: please)?"
)


def is_chat_opener(text: str) -> bool:
    """Whether every sentence of ``text`` is a greeting or an offer to ask ("What is up?", "Hi! Can you help me?")."""
    norm = text.lower().replace("\u2019", "'")
    pieces = [" ".join(p.split()) for p in re.split(r"[.!?,;:…]+", norm)]
    pieces = [p for p in pieces if p]
    return bool(pieces) and all(_OPENER.fullmatch(p) for p in pieces)


def _quote(text: str, limit: int = 60) -> str:
    return repr(shorten(" ".join(text.split()), limit))


def assess_goal(goal: Goal, index: TemplateIndex | None = None) -> Goal:
    """Whether a goal taken from the session's opening can be judged (the rules above).

    The decision rests on the task statement: the opening without the harness template ``index``
    finds in it. A judged goal is still *scored* against the whole opening, as the mapping was
    calibrated: an agent's replies are about the scaffold's commands as much as the issue. Scored
    against the task statement alone, the corpus' 12 SWE-bench runs (mini-swe-agent, live-swe-agent,
    OpenHands, all on task) went from 85-100% of steps >= MILD (median 100%, none ending below
    MILD) to 25-100% (median 89%; 5 ending below MILD, 4 reaching CRITICAL): made-up drift. The
    task statement decides and gives the explanations' goal keywords (``task_parts``), whose
    absence is the signal when another task's run in the same scaffold still looks on-topic.
    """
    from dataclasses import replace

    if goal.source != "messages":
        return goal
    where = "seq " + ",".join(map(str, goal.seqs))
    others = 0
    template = None
    parts, seqs = goal.parts, goal.seqs
    if index is not None and index.tasks > 1:
        kept_parts, kept_seqs, removed, total = [], [], 0, 0
        for sq, (role, text) in zip(goal.seqs, goal.parts):
            runs, gone, n, k = index.split(text)
            removed, total, others = removed + gone, total + n, max(others, k)
            if runs:
                kept_parts.append((role, "\n".join(runs)))
                kept_seqs.append(sq)
        if removed:
            parts, seqs = tuple(kept_parts), tuple(kept_seqs)
            template = {"other_tasks": others, "words_set_aside": removed, "words": total, "task_seqs": list(seqs),
                        "task_text": "\n\n".join(t for _, t in parts)}
    text = "\n\n".join(t for _, t in parts)
    words = content_words(text)
    shared = (f" once the template it shares with {others} other task(s) of this format in the store is set aside"
              if template else "")
    verdictless = {"state": "no_goal", "content_words": len(words), "template": template, "task_parts": parts}
    if not parts:
        return replace(goal, **verdictless, reason="boilerplate",
                       explanation=f"goal is harness boilerplate: the opening ({where}) also opens {others} other "
                                   f"task(s) of this format in the store, nothing in it is this session's own; {_FIX}")
    if is_chat_opener(text):
        return replace(goal, **verdictless, reason="chat_opener",
                       explanation=f"goal is a chat opener ({_quote(text)}), not a task{shared}; {_FIX}")
    if len(words) < MIN_GOAL_WORDS:
        return replace(goal, **verdictless, reason="too_short",
                       explanation=f"goal too short{shared}: {len(words)} content word(s) ({_quote(text)}); {_FIX}")
    if template:
        what = (f"the session opening ({where}); its task statement (seq {','.join(map(str, seqs))}) is what the "
                f"{others} other task(s) of this format in the store do not share: {template['words_set_aside']} of "
                f"its {template['words']} words are harness template")
    elif index is not None and index.tasks > 1:
        what = (f"the session opening ({where}), none of it shared with the {index.tasks - 1} other task(s) "
                "of this format in the store")
    else:
        what = (f"the session opening ({where}); no other task of this format in the store to tell a harness "
                "template from (sessions with a task key and without one are compared apart)")
    return replace(goal, content_words=len(words), template=template, task_parts=parts if template else (),
                   explanation=f"{what}; {len(words)} content words")
