"""Display: how texts are shown in a divergence report. One-line previews, capped texts, the
words two given inputs differ by, and capped unified diffs; nothing here decides a match."""

from __future__ import annotations

import difflib

DIFF_LINES = 60  # lines of a unified diff in a report
WORD_DIFF_CONTEXT = 6  # words shown either side of a change
WORD_DIFF_LIMIT = 20  # changes listed


def cap(s: str, limit: int = 600) -> str:
    """``s`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return s if len(s) <= limit else s[: limit - 1] + "…"


def one_line(s: str, limit: int = 120) -> str:
    """``s`` on one line (whitespace collapsed), capped."""
    return cap(" ".join(s.split()), limit)


def word_diff(a: str, b: str) -> list[dict[str, str]]:
    """The words deleted from ``a`` and inserted in ``b`` (``difflib`` over words), each change
    with a few words of context: ``{"op", "deleted", "inserted", "before", "after"}``."""
    wa, wb = a.split(), b.split()
    out: list[dict[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if len(out) == WORD_DIFF_LIMIT:
            out.append({"op": "more", "deleted": "", "inserted": "", "before": "", "after": "",
                        "note": "further changes not listed"})
            break
        out.append({"op": tag, "deleted": cap(" ".join(wa[i1:i2])), "inserted": cap(" ".join(wb[j1:j2])),
                    "before": " ".join(wa[max(0, i1 - WORD_DIFF_CONTEXT):i1]),
                    "after": " ".join(wa[i2:i2 + WORD_DIFF_CONTEXT])})
    return out


def line_diff(a: list[str], b: list[str]) -> list[str]:
    """A unified diff of two texts' lines (one line of context), capped at ``DIFF_LINES``."""
    lines = list(difflib.unified_diff(a, b, "a", "b", lineterm="", n=1))
    return lines if len(lines) <= DIFF_LINES else lines[:DIFF_LINES] + [f"… {len(lines) - DIFF_LINES} more line(s)"]
