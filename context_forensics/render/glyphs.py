"""Emoji in log text, shown by name where a font may have no glyph for them.

A log's text holds emoji (agents print ✅ and 🚀); the HTML report and the plots are read where
no colour emoji font exists (headless Chromium in CI, a minimal Linux, matplotlib's DejaVu
Sans), and there an emoji is an empty box: the reader loses it without knowing. So the emoji
that are drawn as pictures by default (Unicode's Emoji_Presentation characters: everything
from U+1F000 up that is a pictograph, and the BMP list below) are shown by their Unicode name
in brackets, ``[rocket]``, whole sequences at once (``[man + personal computer]``,
``[flag FR]``, ``[thumbs up, medium skin tone]``). Symbols with a text presentation (⚠ ✓ ✗ ❤),
which the common text fonts draw, stay as they are.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# The BMP characters whose default presentation is emoji (Emoji_Presentation=Yes, Unicode 15).
_BMP = ("\u231a\u231b\u23e9-\u23ec\u23f0\u23f3\u25fd\u25fe\u2614\u2615\u2648-\u2653\u267f\u2693\u26a1"
        "\u26aa\u26ab\u26bd\u26be\u26c4\u26c5\u26ce\u26d4\u26ea\u26f2\u26f3\u26f5\u26fa\u26fd\u2705"
        "\u270a\u270b\u2728\u274c\u274e\u2753-\u2755\u2757\u2795-\u2797\u27b0\u27bf\u2b1b\u2b1c"
        "\u2b50\u2b55")
_PICTO = f"[{_BMP}\U0001f000-\U0001f1e5\U0001f200-\U0001f3fa\U0001f400-\U0001faff]"
_FLAG = "[\U0001f1e6-\U0001f1ff]{2}"
_ONE = f"{_PICTO}\ufe0f?[\U0001f3fb-\U0001f3ff]?"
EMOJI = re.compile(f"{_FLAG}|{_ONE}(?:\u200d{_ONE})*")
_TONES = {0x1F3FB: "light", 0x1F3FC: "medium-light", 0x1F3FD: "medium", 0x1F3FE: "medium-dark", 0x1F3FF: "dark"}


def emoji_name(cluster: str) -> str:
    """``[rocket]`` for 🚀: the Unicode names of an emoji sequence, lower case."""
    if len(cluster) == 2 and all(0x1F1E6 <= ord(c) <= 0x1F1FF for c in cluster):
        return "[flag " + "".join(chr(ord(c) - 0x1F1E6 + 65) for c in cluster) + "]"
    names = []
    for part in cluster.split("\u200d"):
        tone = next((_TONES[ord(c)] for c in part if ord(c) in _TONES), None)
        base = "".join(c for c in part if ord(c) not in _TONES and c != "\ufe0f")
        name = " ".join(unicodedata.name(c, f"U+{ord(c):04X}").lower() for c in base)
        names.append(name + (f", {tone} skin tone" if tone else ""))
    return "[" + " + ".join(names) + "]"


def split_emoji(text: str) -> list[tuple[str, str | None]]:
    """``text`` as pieces: ``(text, None)`` for plain text, ``(emoji, name)`` for each emoji."""
    out: list[tuple[str, str | None]] = []
    at = 0
    for m in EMOJI.finditer(text):
        if m.start() > at:
            out.append((text[at:m.start()], None))
        out.append((m.group(), emoji_name(m.group())))
        at = m.end()
    if at < len(text):
        out.append((text[at:], None))
    return out


def name_emoji(text: str) -> str:
    """``text`` with each emoji replaced by its name: ``done ✅`` → ``done [white heavy check mark]``."""
    return EMOJI.sub(lambda m: emoji_name(m.group()), text)


@lru_cache(maxsize=4)
def font_charmap(path: str) -> frozenset[int]:
    """The code points a font file has glyphs for (matplotlib's FreeType wrapper)."""
    from matplotlib.ft2font import FT2Font

    return frozenset(FT2Font(path).get_charmap())
