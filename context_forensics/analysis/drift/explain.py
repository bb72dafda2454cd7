"""Drift explanations: one or two lines per step saying why it got its verdict.

**Explanation.** Lexical and cheap: goal keywords (content words and identifiers of the goal,
user-message words and identifiers first) missing from the window's text, and new dominant
topics (frequent content words of the window absent from the goal). Goal-drift phrases ("is
there anything else I can help you with") are flagged when the message saying them is itself
below MILD: an offer to move on that made no progress toward the goal.
"""

from __future__ import annotations

import re
from collections import Counter

from .terms import Terms

SHOWN_WORDS = 4  # keywords / topics shown in an explanation line

# Offers to move on. They matter only when the reply made no progress toward the goal.
DRIFT_PHRASES = re.compile(
    r"\b(?:is there anything else(?: (?:i|we) can (?:help|do|assist)[^.?!\n]*)?"
    r"|(?:let me know|tell me) if (?:there(?:'s| is) anything else|you (?:need|have|want) anything else"
    r"|you have any other questions)"
    r"|anything else (?:you(?:'d| would) like|i can (?:help|do)[^.?!\n]*)"
    r"|what else can i (?:help|do)[^.?!\n]*"
    r"|how else can i help[^.?!\n]*"
    r"|(?:i'm|i am) happy to help with anything else)",
    re.IGNORECASE,
)


def drift_phrases(text: str) -> list[str]:
    """Goal-drift phrases in a reply, as written."""
    return [m.group().strip() for m in DRIFT_PHRASES.finditer(text or "")]


def window_terms(kw: list[tuple[str, str]], goal_terms: Terms, window: list[Terms | None]
                 ) -> tuple[list[str], list[str]]:
    """(goal keywords absent from the window's text, the window's frequent terms absent from the goal)."""
    if not window:
        return [], []
    seen: Counter[str] = Counter()
    latest: set[str] = set()
    surface: dict[str, str] = {}
    for i, t in enumerate(window):
        if t is None:
            continue
        seen.update(t.counts)
        for stem, s in t.surface.items():
            surface.setdefault(stem, s)
        if i == len(window) - 1:
            latest = set(t.counts)
    missing = [surf for stem, surf in kw if stem not in seen]
    fresh = [stem for stem in seen if stem not in goal_terms.counts]
    fresh.sort(key=lambda stem: (-seen[stem], stem not in latest, -len(stem), stem))
    return missing, [surface[stem] for stem in fresh[:SHOWN_WORDS]]


def explain(v: str | None, s: float | None, kw: list[tuple[str, str]], missing: list[str], topics: list[str],
            phrases: list[str], any_window: bool) -> str:
    """One or two short lines saying why the step got its verdict."""
    if not any_window or s is None:
        return "no assistant text to judge yet"
    if v == "FRESH":
        present = [surf for _, surf in kw if surf not in missing][:SHOWN_WORDS]
        line = f"on goal (similarity {s:.2f})"
        return line + (": still about " + ", ".join(present) if present else "")
    line1 = f"similarity {s:.2f} to the goal"
    if missing:
        gone = missing[:SHOWN_WORDS]
        line1 += "; missing: " + ", ".join(gone) + (f" (+{len(missing) - len(gone)})" if len(missing) > len(gone) else "")
    elif kw:
        line1 += "; goal keywords still present"
    rest = []
    if topics and v != "MILD":
        rest.append("new topics: " + ", ".join(topics))
    if phrases:
        rest.append(f'"{shorten(phrases[0], 48)}" with no progress toward the goal')
    return line1 + ("\n" + "; ".join(rest) if rest else "")


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut (explanations quote with it)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
