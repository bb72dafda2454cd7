"""Fact suggestions: constraint-like sentences of a session's opening, to track as facts.

``ctxf facts suggest`` proposes them from the system prompt(s) and the first user message, best
first: sentences with constraint words (must, never, at most, ...), numbers, identifiers or
quoted strings. A demonstration the harness replays before the task (SWE-agent's ``is_demo``
messages: a solved task, its files listed line by line) is not the opening: it is passed over,
as drift's goal and the pinning policies pass over it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ...matching.lexical import lexical_tokens
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


def suggest_facts(messages: Sequence[Any], *, limit: int = 20) -> list[Suggestion]:
    """Constraint-like sentences from the system prompt(s) and the first user message (a
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
            picked.append((seq, m.role, m.text or ""))
            break
        else:
            break
    out: list[tuple[float, int, Suggestion]] = []
    seen: set[str] = set()
    order = 0
    for seq, role, text in picked:
        for s in _sentences(text):
            words = s.split()
            if len(words) < 3 or len(s) > 300:
                continue
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
