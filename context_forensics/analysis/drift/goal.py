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
2b. A reference, not a task: once URLs, file paths and a leading slash command are set aside,
   nothing is left (``url``, ``path``, ``command``: "https://github.com/x/y", "/mode",
   "'/var/folders/…/Screenshot.png'"); a URL's words never count toward rule 3 (a long URL has
   five "words" and was scored CRITICAL as a goal), a path counts as its file name.
3. Too short: fewer than MIN_GOAL_WORDS distinct content words (words of 3+ letters that are not
   stop words; "Implement spotter-gqc" has 3): an embedding of a few words is too unstable a
   reference (such a goal swung one Claude Code session between FRESH and CRITICAL): ``no_goal``
   (``too_short``).
4. A language the embedder does not read (``language``, checked in ``curve`` where the embedder is
   known): all-MiniLM-L6-v2 was trained on English; a goal whose person-typed letters (``person_text``:
   its user messages, the harness's blocks set aside) are mostly of another script (Chinese,
   Cyrillic, ...) gets similarities that mean nothing (a Copilot CLI session asked in Chinese,
   answered in English, read MODERATE/SEVERE at every step while on task).

A session with no system or user text at all is ``no_goal`` (``no_text``). ``--goal`` /
``drift.goal`` (and the audit's ``max_drift.goal``) always win: an explicit goal is judged as
given. A ``no_goal`` goal gets no score and no verdict at any step it covers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from .explain import shorten
from .templates import TemplateIndex
from .terms import content_words

MIN_GOAL_WORDS = 5
NO_GOAL_REASONS = ("too_short", "chat_opener", "boilerplate", "url", "path", "command", "language", "no_text")
_FIX = "pass --goal or set drift.goal"


@dataclass(frozen=True)
class Goal:
    """The reference a session is measured against, and whether it can be judged at all."""

    text: str
    source: str  # "messages" | "option" | "config"
    seqs: tuple[int, ...] = ()  # the goal messages (source "messages")
    parts: tuple[tuple[str, str], ...] = ()  # (role, text) of each goal message
    state: str = "judged"  # "judged" | "no_goal" (see assess_goal)
    reason: str | None = None  # no_goal: one of NO_GOAL_REASONS
    explanation: str = ""  # one sentence: what the goal is, or why it is not judged and the fix
    content_words: int | None = None  # of the task statement
    template: dict[str, Any] | None = None  # the harness template found in the opening, if any
    task_parts: tuple[tuple[str, str], ...] = ()  # the opening without that template (keywords come from it)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "seqs": list(self.seqs), "text": self.text, "state": self.state,
                "reason": self.reason, "explanation": self.explanation, "content_words": self.content_words,
                "template": self.template}


def goal_from_messages(messages: Sequence[Any]) -> Goal | None:
    """System, developer and user messages before the first model call; else the first user message.

    A demonstration the harness replays before the task (SWE-agent's ``is_demo`` messages) is an
    example of another task, not this session's goal, and is left out. ``messages`` are
    ``StoredMessage`` rows (``.seq``, ``.message``). The goal is not yet assessed
    (``assess_goal`` decides whether it can be judged).
    """
    from ...records import KIND_MESSAGE, not_own

    def text_of(m: Any) -> bool:
        return m.kind == KIND_MESSAGE and bool(m.text.strip()) and not not_own(m.meta)

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


# References that say where, not what: set aside before the words of a goal are counted.
_URL = re.compile(r"(?:\b(?:https?|ftp|file)://|\bwww\.)[^\s<>\"'`)\]]+", re.IGNORECASE)
# A quoted path (a dropped screenshot: '/var/folders/.../Screenshot 2025-11-21 at 01.27.21.png'), or an
# unquoted token with a directory separator ("@packages/coding-agent/src/main.ts", "src\\app.py", "~/x").
_PATH = re.compile(r"""(['"`])(?:[~.]{0,2}[/\\]|[A-Za-z]:[/\\])[^'"`\n]*\1"""
                   r"|(?<![\w/])[@~.]{0,2}[\w.+-]*(?:[/\\][\w.+@-]+)+[/\\]?")
_COMMAND = re.compile(r"^\s*/[A-Za-z][\w:-]*(?=\s|$)")  # "/mode", "/compact ...": a client command, not a path


def goal_words(text: str, *, stems: bool = True) -> tuple[list[str], list[str]]:
    """(the content words of ``text`` once URLs, paths and a leading slash command are set aside,
    the kinds set aside in the order met: "command", "url", "path"). A path keeps its file name's
    stem as one word ("src/main.ts" -> "main": it names what the task is about; ``stems=False``
    drops it too); a URL keeps nothing."""
    kinds: list[str] = []
    m = _COMMAND.match(text)
    if m:
        kinds.append("command")
        text = text[m.end():]
    if _URL.search(text):
        kinds.append("url")
        text = _URL.sub(" ", text)

    def stem(p: re.Match) -> str:
        name = re.split(r"[/\\]", p.group().strip("'\"`/\\"))[-1]
        return " " + name.split(".")[0] + " " if stems else " "

    if _PATH.search(text):
        kinds.append("path")
        text = _PATH.sub(stem, text)
    return content_words(text), kinds


_WHAT = {"url": "a URL", "path": "a file path", "command": "a slash command"}
_SET_ASIDE = {"url": "URLs", "path": "paths", "command": "a slash command"}


def unusable(text: str) -> tuple[str, str] | None:
    """Why ``text`` (a task statement) cannot be a goal, as (reason, the phrase saying so), or None:
    a chat opener, a bare URL / path / slash command, or too few content words (rules 2-3)."""
    if is_chat_opener(text):
        return "chat_opener", f"a chat opener ({_quote(text)}), not a task"
    words, kinds = goal_words(text)
    if kinds and not goal_words(text, stems=False)[0]:
        return kinds[0], f"{_WHAT[kinds[0]]} ({_quote(text)}), not a task"
    if len(words) < MIN_GOAL_WORDS:
        aside = f" once {' and '.join(_SET_ASIDE[k] for k in kinds)} are set aside" if kinds else ""
        return "too_short", f"too short: {len(words)} content word(s){aside} ({_quote(text)})"
    return None


# Letters the embedder reads: Latin script (all-MiniLM-L6-v2's training text is English).
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
ENGLISH_ONLY = ("all-MiniLM-L6-v2",)  # embedders known to read English only (the packaged one)


def latin_share(text: str) -> float:
    """The share of ``text``'s letters that are Latin script (1.0 for a text without letters)."""
    letters = [c for c in text if c.isalpha()]
    return sum(bool(_LATIN.match(c)) for c in letters) / len(letters) if letters else 1.0


def reads_language(embedder_name: str, text: str) -> bool:
    """Whether an embedder can compare ``text`` at all: an English-only one needs mostly Latin letters."""
    return embedder_name not in ENGLISH_ONLY or latin_share(text) >= 0.5


def request_goal(seq: int, text: str) -> Goal:
    """The goal a user's new request mid-session sets (``segments``), judged by the rules of an opening."""
    words = len(goal_words(text)[0])
    base = Goal(text=text, source="messages", seqs=(seq,), parts=(("user", text),), content_words=words)
    why = unusable(text)
    if why is None:
        return replace(base, explanation=f"the user's new request at seq {seq}; {words} content words")
    reason, phrase = why
    return replace(base, state="no_goal", reason=reason,
                   explanation=f"the user's new request at seq {seq} is {phrase}; {_FIX}")


def no_text_goal() -> Goal:
    """The goal of a session with no system or user text: not judged, saying so."""
    return Goal(text="", source="messages", state="no_goal", reason="no_text", content_words=0,
                explanation=f"the session has no system or user text to take as its goal; {_FIX}")


# A block a harness writes into a user message around the person's words, seen in the corpus' openings:
# Cline's <environment_details>, Codex's <environment_context> / <user_instructions>, Claude Code's
# <system-reminder> / <command-name> / <command-message>, Copilot CLI's <current_datetime> / <reminder>,
# mini-swe-agent's <instructions>, OpenHands' <uploaded_files>. Set aside before a goal's language is
# read and its words are counted; any other block (<task>, <pr_description>, <command-args>) is unwrapped.
_BLOCK = re.compile(r"<([A-Za-z][\w-]*)(?:\s[^<>]*)?>(.*?)</\1\s*>", re.DOTALL)
HARNESS_BLOCKS = frozenset({"environment_details", "environment_context", "user_instructions", "system-reminder",
                            "command-name", "command-message", "local-command-stdout", "local-command-stderr",
                            "current_datetime", "reminder", "instructions", "uploaded_files"})


def without_blocks(text: str) -> str:
    """``text`` with the harness's blocks (``HARNESS_BLOCKS``) set aside and any other block unwrapped."""
    return _BLOCK.sub(lambda m: " " if m.group(1).lower() in HARNESS_BLOCKS else f" {without_blocks(m.group(2))} ",
                      text)


def person_text(goal: Goal) -> str:
    """The words of a goal a person wrote, to read its language by: its user messages (the system
    prompt is the harness's; all parts when there is no user message), harness blocks set aside."""
    parts = goal.task_parts or goal.parts
    text = "\n\n".join(t for role, t in parts if role == "user") or "\n\n".join(t for _, t in parts) or goal.text
    return without_blocks(text)


def language_goal(goal: Goal, embedder_name: str) -> Goal:
    """``goal`` not judged (``language``) when ``embedder_name`` cannot read the words a person wrote
    in it (``person_text``); else ``goal``."""
    if goal.state != "judged" or goal.source != "messages":
        return goal
    text = person_text(goal)
    if reads_language(embedder_name, text):
        return goal
    share = 1 - latin_share(text)
    return replace(goal, state="no_goal", reason="language",
                   explanation=f"goal is written in a language {embedder_name} does not read ({share:.0%} of its "
                               f"letters are not Latin script: {_quote(text, 40)}); its similarities would mean "
                               f"nothing; pass --goal in English or set drift.goal")


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
    words = goal_words(text)[0]
    shared = (f" once the template it shares with {others} other task(s) of this format in the store is set aside"
              if template else "")

    def verdictless(reason: str, explanation: str) -> Goal:
        return replace(goal, state="no_goal", content_words=len(words), template=template, task_parts=parts,
                       reason=reason, explanation=explanation)

    if not parts:
        return verdictless("boilerplate",
                           f"goal is harness boilerplate: the opening ({where}) also opens {others} other "
                           f"task(s) of this format in the store, nothing in it is this session's own; {_FIX}")
    why = unusable(text)
    if why is not None:
        reason, phrase = why
        said = (f"goal {phrase.replace(': ', shared + ': ', 1)}" if reason == "too_short"
                else f"goal is {phrase}{shared}")
        return verdictless(reason, f"{said}; {_FIX}")
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
