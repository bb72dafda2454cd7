"""Text from a log made inert, the one rule for every place ctxf shows it.

A log is untrusted input: a model name, a tool name, a title, a file path or a message can hold
terminal escape sequences (an OSC 52 clipboard write, a clear-screen, an OSC 8 link), C1
controls that some terminals obey, BiDi overrides that reorder what is read, zero-width
characters that hide text, and characters XML cannot carry. ``inert`` shows each of them as
its escape instead (``\\x1b``, ``\\x9b``, ``\\u202e``), so the text stays visible and
unambiguous and nothing acts on it. The terminal views (``render.safe``), ``--json``, the
JUnit and Markdown reports, the HTML report and the plots all go through it.
"""

from __future__ import annotations

import re
from typing import Any

# Every control (Cc), format (Cf), surrogate (Cs) and line/paragraph separator (Zl, Zp)
# character of Unicode 14 but tab and newline: C0 (CR and backspace rewrite a line), DEL and
# C1; the format characters that reorder or hide text (soft hyphen, the Arabic, Syriac and
# Kaithi number marks, the Arabic letter mark, the Mongolian vowel separator, zero-width space,
# LRM/RLM, the BiDi embeddings, overrides and isolates, word joiner and invisible operators,
# the BOM, interlinear annotation, Egyptian, shorthand and musical format controls, the tag
# characters); and the two noncharacters XML forbids. ZWJ and ZWNJ are kept: they shape emoji
# and several scripts. (tests/test_inert_output.py checks the list against ``unicodedata``.)
_CHARS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
          "\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ufffe\uffff\ud800-\udfff"
          "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
          "\U000e0000-\U000e007f")
CONTROL = re.compile(f"[{_CHARS}]")
CONTROL_OR_NEWLINE = re.compile(f"[{_CHARS}\t\n]")


def escape(ch: str) -> str:
    """One character's visible escape: ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def _sub(m: re.Match[str]) -> str:
    return escape(m.group())


def inert(text: Any, *, newlines: bool = True) -> str:
    """``text`` with every character a terminal, a viewer or an XML parser could act on shown
    as its escape. ``newlines=False`` escapes tab and newline too (a name, one line)."""
    s = "" if text is None else str(text)
    return (CONTROL if newlines else CONTROL_OR_NEWLINE).sub(_sub, s)


def inert_tree(obj: Any) -> Any:
    """Every string in a JSON-shaped value (keys too) made inert; other values as they are."""
    if isinstance(obj, str):
        return inert(obj)
    if isinstance(obj, dict):
        return {inert_tree(k): inert_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [inert_tree(v) for v in obj]
    return obj


def _json_escape(m: re.Match[str]) -> str:
    o = ord(m.group())
    if o < 0x10000:
        return f"\\u{o:04x}"
    o -= 0x10000
    return f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}"


def inert_json(text: str) -> str:
    """JSON text (``json.dumps`` with ``ensure_ascii=False``) with the characters above written
    as ``\\uXXXX`` escapes: the same data once parsed, no such character in its bytes. (JSON
    escapes C0 itself; these characters can only stand inside its strings.)"""
    return CONTROL.sub(_json_escape, text)


__all__ = ["CONTROL", "CONTROL_OR_NEWLINE", "escape", "inert", "inert_json", "inert_tree"]
