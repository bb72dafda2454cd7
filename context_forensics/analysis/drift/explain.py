"""Drift explanations: one or two lines per step saying why it got its verdict.

**Explanation.** The window's three signals (``verdicts``: similarity, goal words, keyword
cover) and, below MILD, the one that weighs most against the goal (``verdicts.driver``); goal
keywords (content words and identifiers of the segment's goal, user-message words and identifiers
first) missing from the window's text, and new dominant topics (frequent content words of the
window that no goal in force uses). Goal-drift phrases ("is there anything else I can help you
with") are flagged when the reply saying them scores below MILD on its own: an offer to move on
that made no progress toward the goal.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection

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


def window_terms(kw: list[tuple[str, str]], goal_stems: Collection[str], window: list[Terms | None]
                 ) -> tuple[list[str], list[str]]:
    """(goal keywords absent from the window's text, the window's frequent terms the goals in force never use)."""
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
    fresh = [stem for stem in seen if stem not in goal_stems]
    fresh.sort(key=lambda stem: (-seen[stem], stem not in latest, -len(stem), stem))
    return missing, [surface[stem] for stem in fresh[:SHOWN_WORDS]]


# How the explanation names each signal (``verdicts.SIGNALS``).
SIGNAL_NAMES = {"similarity": "similarity", "goal_words": "goal words", "keyword_cover": "keywords"}


def figures(signals: dict[str, float]) -> str:
    """The three signals as the explanation prints them: "similarity 0.31, goal words 24%, keywords 50%"."""
    return (f"similarity {signals['similarity']:.2f}, goal words {signals['goal_words']:.0%}, "
            f"keywords {signals['keyword_cover']:.0%}")


def explain(v: str | None, signals: dict[str, float] | None, drv: str | None, kw: list[tuple[str, str]],
            missing: list[str], topics: list[str], phrases: list[str], any_window: bool) -> str:
    """One or two short lines saying why the step got its verdict: the signals, the one that weighs
    most against the goal (below MILD), the goal keywords missing, new topics, drift phrases."""
    if not any_window or signals is None:
        return "no assistant text to judge yet"
    if v == "FRESH":
        present = [surf for _, surf in kw if surf not in missing][:SHOWN_WORDS]
        return f"on goal ({figures(signals)})" + (": still about " + ", ".join(present) if present else "")
    line1 = figures(signals)
    if missing:
        gone = missing[:SHOWN_WORDS]
        line1 += "; missing: " + ", ".join(gone) + (f" (+{len(missing) - len(gone)})"
                                                    if len(missing) > len(gone) else "")
    elif kw:
        line1 += "; goal keywords still present"
    rest = []
    if drv and v not in ("FRESH", "MILD"):
        rest.append(f"weakest: {SIGNAL_NAMES[drv]}")
    if topics and v != "MILD":
        rest.append("new topics: " + ", ".join(topics))
    if phrases:
        rest.append(f'"{shorten(phrases[0], 48)}" with no progress toward the goal')
    return line1 + ("\n" + "; ".join(rest) if rest else "")


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut (explanations quote with it)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
