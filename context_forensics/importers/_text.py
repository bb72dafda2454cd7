"""Cutting a log's text to a title or a short field before it is stored.

The redactor (``store/redact.py``) runs on what an importer returns. A cut made before it can
leave part of a secret that no rule recognises any more: "the AWS secret key is q8Vt2Lr9Xm4K"
(a title cut at 80 characters kept 24 of the key's 40, and the store held them). ``clip`` never
cuts inside a word: a word the limit falls in is dropped whole, so a secret is either kept whole
(and redacted) or not kept at all.
"""

from __future__ import annotations

import re

_LAST_SPACE = re.compile(r"\s(?=\S*$)")


def clip(text: str, limit: int, more: str = "") -> str:
    """``text`` cut to at most ``limit`` characters, at a word boundary (then ``more`` appended).
    A first word longer than the limit leaves nothing (empty): its head may be a token's."""
    if len(text) <= limit:
        return text
    if text[limit].isspace():
        return text[:limit].rstrip() + more
    head = text[:limit]
    m = _LAST_SPACE.search(head)
    if m is None or not head[:m.start()].strip():
        return ""
    return head[:m.start()].rstrip() + more


# A skipped kind or a warning quotes a log's value: one of millions of characters (a fuzzed
# ``type``) was printed whole, and wrapping it took the terminal renderer 27 s and 680 MB.
MAX_KIND = 100
MAX_WARNING = 1_000


def short(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to ``limit`` characters, marked with "…"."""
    if len(text) <= limit:
        return text
    return (clip(text, limit - 1) or "(a long value)") + "…"


def title_line(text: str, limit: int = 100) -> str | None:
    """The first non-empty line of ``text``, clipped (``clip``): a title; None when blank."""
    for line in text.strip().splitlines():
        if line.strip():
            return clip(line.strip(), limit) or None
    return None


__all__ = ["MAX_KIND", "MAX_WARNING", "clip", "short", "title_line"]
