"""Fact suggestions: constraint-like sentences of a session's opening, to track as facts.

``ctxf facts suggest`` proposes them from the system prompt(s) and the first user message a
person wrote, best first: sentences with constraint words (must, never, at most, ...), numbers,
identifiers or quoted strings. Of a user message only the person's words count
(``matching.person.human_text``): what a harness writes into it is no constraint the person set
(Cline's ``<environment_details>`` with its clock, ``2/8/2026, 2:02:53 PM (America/New_York,
UTC-5:00)``, and its ``# task_progress`` todo-list instructions; Codex's
``<environment_context>``; Aider's file lists; Copilot CLI's ``<current_datetime>``), and a user
message with none of them (Codex's environment context, Aider's prompts, Claude Code's hook
notes) is passed over for the next one. Of a SWE-bench harness's task template (OpenHands' and
mini-swe-agent's ``<pr_description>``, SWE-agent's ``ISSUE:``) only the issue it quotes counts,
not the template's instructions. A sentence needs words
of prose (``clauses.prose_words``): a time stamp or a list of names is no constraint. A
demonstration the harness replays before the task (SWE-agent's ``is_demo`` messages: a solved
task, its files listed line by line) is not the opening either, as drift's goal and the pinning
policies pass over it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ...matching.clauses import prose_words
from ...matching.lexical import lexical_tokens
from ...matching.person import human_text
from ...records import not_own

_CONSTRAINT = re.compile(
    r"\b(must|never|always|only|at most|at least|no more than|no less than|do not|don't|"
    r"mustn't|shall|should not|shouldn't|required?|forbidden|prohibited|exactly|limit(?:ed)?|"
    r"maximum|minimum|max|min|budget|deadline|before|after|unless|without|avoid|keep|ensure|"
    r"make sure|not allowed|cannot|can't|important)\b",
    re.I,
)
_STRONG = {"must", "never", "always", "only", "at most", "at least", "no more than", "do not", "don't",
           "mustn't", "forbidden", "prohibited", "exactly", "not allowed", "cannot", "can't"}
# A date or a time of day: a sentence whose only numbers and names these are, with no constraint
# word, is a time stamp ("Current date: 2025-05-04" of Aider's system prompt).
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+Z?)?|\d{1,2}/\d{1,2}/\d{2,4}"
                    r"|\d{1,2}:\d{2}(?::\d{2})?(?:\s*[AP]M)?", re.IGNORECASE)
# The issue a SWE-bench harness's task template quotes (the words of the person who filed it): inside
# <pr_description> (OpenHands, mini-swe-agent), after ISSUE: up to INSTRUCTIONS: (SWE-agent)
_QUOTED_TASK = re.compile(r"<pr_description>\s*(?:Consider the following PR description:\s*)?(.*?)\s*</pr_description>"
                          r"|^ISSUE:\s*\n(.*?)\n\s*INSTRUCTIONS:", re.DOTALL | re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|[a-z][.)])\s+")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`(])")


@dataclass(frozen=True)
class Suggestion:
    """A proposed fact: the sentence, the message it came from, its score and why."""

    text: str
    seq: int
    role: str
    score: float
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "seq": self.seq, "role": self.role, "score": self.score,
                "reasons": list(self.reasons)}


def _sentences(text: str) -> Iterable[str]:
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        for s in _SENT_SPLIT.split(line):
            s = s.strip()
            if s:
                yield s


def _quoted_task(m: Any) -> str:
    """The issue a harness's task template quotes (``_QUOTED_TASK``), '' when it quotes none or the
    importer flagged the message as the harness's own (``meta``: a skill prompt, injected context;
    SWE-agent records its task template as an ``observation``, which the template's form tells)."""
    meta = m.meta or {}
    if any(meta.get(k) for k in ("is_meta", "injected", "command_wrapper")):
        return ""
    got = _QUOTED_TASK.search(m.text or "")
    return next((g for g in got.groups() if g), "") if got else ""


def suggest_facts(messages: Sequence[Any], *, limit: int = 20) -> list[Suggestion]:
    """Constraint-like sentences from the system prompt(s) and the person's words in the first
    user message that has any (``human_text``, or the issue a harness's task template quotes; a
    demonstration before it, ``meta["is_demo"]``, is skipped).

    A sentence scores for constraint words (must, never, always, only, at most, ...), numbers,
    identifiers and quoted strings; sentences with none are not proposed. Best first, then in
    order of appearance; at most ``limit``.
    """
    picked: list[tuple[int, str, str]] = []
    for sm in messages:
        m = sm.message if hasattr(sm, "message") else sm
        seq = getattr(sm, "seq", len(picked))
        if m.kind != "message" or not_own(m.meta):
            continue
        if m.role in ("system", "developer"):
            picked.append((seq, m.role, m.text or ""))
        elif m.role == "user":
            said = human_text(m) or _quoted_task(m)
            if not said.strip():
                continue  # the harness wrote all of it: the person's first message is still to come
            picked.append((seq, m.role, said))
            break
        else:
            break
    out: list[tuple[float, int, Suggestion]] = []
    seen: set[str] = set()
    order = 0
    for seq, role, text in picked:
        for s in _sentences(text):
            words = s.split()
            if len(words) < 3 or len(s) > 300 or len(prose_words(s)) < 2:
                continue  # no sentence: a time stamp, a list of names
            key = s.lower()
            if key in seen:
                continue
            seen.add(key)
            reasons: list[str] = []
            score = 0.0
            found = {w.lower() for w in _CONSTRAINT.findall(s)}
            strong = sorted(found & _STRONG)
            weak = sorted(found - _STRONG)
            if strong:
                score += 2.0 + 0.5 * (len(strong) - 1)
                reasons += strong
            if weak:
                score += 0.5 * len(weak)
                reasons += weak
            tok = lexical_tokens(s)
            if not found and _STAMP.search(s):
                rest = lexical_tokens(_STAMP.sub(" ", s))
                if not (rest.numbers or rest.literals):
                    continue  # a time stamp
            if tok.numbers:
                score += 1.0
                reasons.append("numbers")
            if tok.literals:
                score += 1.0
                reasons.append("names")
            if score < 1.0:
                continue
            if role in ("system", "developer"):
                score += 0.25
            out.append((score, order, Suggestion(s, seq, role, round(score, 2), tuple(reasons))))
            order += 1
    out.sort(key=lambda x: (-x[0], x[1]))
    return [s for _, _, s in out[:limit]]
