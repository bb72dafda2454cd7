"""The lexical check: the numbers, identifiers and quoted strings a supporting text must hold.

A budget of "4,500" is not present in a chunk saying "3,000", however close the embeddings are,
so the presence rule (``presence``) requires every lexical token of a fact (``lexical_tokens``)
in the text that matched (``missing_tokens``).

Lexical tokens of a fact:

- numbers written with digits, normalised: ``4,500`` == ``4500`` == ``4.5k`` == ``4500.00``
  (thousands separators ``,`` ``_`` and thin/no-break spaces are dropped; a ``k``/``K`` suffix
  is x1,000, ``M`` x1,000,000; other unit letters are ignored, so ``16GB`` is 16; the sign is
  ignored). In the searched text, number words (``zero`` .. ``twenty``, ``thirty`` ..
  ``ninety``, ``hundred``, ``thousand``) count as their digits, so "at most 3 retries" is
  found in "three retries at most"; number words in the fact itself are not required.
- times (``16:00``), dates (``2024-05-01``) and versions (``3.11.2``), verbatim;
- identifiers: ``snake_case``, ``camelCase`` / ``PascalCase``, dotted names (``os.path``,
  ``pricing.py``), paths (``tests/``, ``src/app.py``, ``/etc/hosts``), URLs, and names mixing
  letters and digits that start with a letter (``VIP0``, ``gpt-4o``);
- anything in backticks, double quotes or single quotes (``'...'`` not inside a word).

Identifiers and quoted strings match case-insensitively, whitespace-normalised, and not as part
of a longer identifier (``apply_discount`` is not found in ``apply_discount_v2``). A fact's
tokens are only those this match finds in the fact itself, so a text holding the fact's words
always passes: no piece of a longer token is required ("xxMB" of "1xxMB", "a6" of the hash
"01422066a6").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
                      "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000})

_SEP = "[,_\u2009\u202f\u00a0]"
_LEX = re.compile(
    r"(?P<url>\bhttps?://[^\s<>\"'`)\]]+)"
    r"|`(?P<tick>[^`\n]{1,120})`"
    r"|\"(?P<dq>[^\"\n]{1,120})\""
    r"|\u201c(?P<cq>[^\u201d\n]{1,120})\u201d"
    r"|(?<![\w'])'(?P<sq>[^'\n]{1,120})'(?![\w])"
    r"|(?<![\w.:/-])(?P<date>\d{4}-\d{2}-\d{2})(?![\w])"
    r"|(?<![\w.:])(?P<time>\d{1,2}:\d{2}(?::\d{2})?)(?![\w:])"
    r"|(?<![\w.])(?P<version>v?\d+\.\d+\.\d+(?:\.\d+)*)(?![\w]|\.\w)"
    rf"|(?<![\w.,])(?P<num>\d{{1,3}}(?:{_SEP}\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<unit>[A-Za-z]{{1,3}})?(?![\w])(?!\.\d)"
    r"|(?P<path>(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*)"
    r"|(?P<word>[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)"
)
# Numbers in a searched text: dates, times and versions are consumed first so their parts are
# not read as numbers; numbers inside quotes or paths still count.
_NUMS = re.compile(
    r"(?<![\w.:/-])(?P<date>\d{4}-\d{2}-\d{2})(?![\w])"
    r"|(?<![\w.:])(?P<time>\d{1,2}:\d{2}(?::\d{2})?)(?![\w:])"
    r"|(?<![\w.])(?P<version>v?\d+\.\d+\.\d+(?:\.\d+)*)(?![\w]|\.\w)"
    rf"|(?<![\w.,])(?P<num>\d{{1,3}}(?:{_SEP}\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<unit>[A-Za-z]{{1,3}})?(?![\w])(?!\.\d)"
)
_SNAKE = re.compile(r"^_*[A-Za-z0-9]+(?:_+[A-Za-z0-9]+)+_*$|^__\w+__$")
_CAMEL = re.compile(r"^[a-z]+[A-Z]\w*$|^[A-Z][a-z0-9]+[A-Z]\w*$")
_MIXED = re.compile(r"^[A-Za-z][\w-]*\d[\w-]*$")
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.I)


def _norm_number(digits: str, unit: str | None) -> str | None:
    raw = re.sub(_SEP, "", digits)
    try:
        value = Decimal(raw)
    except InvalidOperation:
        return None
    if unit in ("k", "K"):
        value *= 1000
    elif unit == "M":
        value *= 1_000_000
    value = value.normalize()
    if value == value.to_integral_value():
        return str(int(value))
    return format(value, "f")


def _is_path(tok: str) -> bool:
    if tok.startswith(("/", "./", "../", "~/")) or tok.endswith("/"):
        return len(tok.strip("/.~")) > 0
    segments = [s for s in tok.split("/") if s]
    return len(segments) >= 3 or (len(segments) >= 2 and "." in segments[-1].strip("."))


def _is_dotted(tok: str) -> bool:
    parts = tok.split(".")
    return len(parts) >= 2 and all(parts) and max(map(len, parts)) >= 2


def _norm_literal(s: str) -> str:
    return " ".join(s.split()).lower()


@dataclass(frozen=True)
class LexicalTokens:
    """What the lexical check requires of a supporting chunk: numbers (normalised) and literals."""

    numbers: tuple[str, ...] = ()
    literals: tuple[str, ...] = ()  # identifiers, quoted strings, times, dates, versions, URLs

    def __bool__(self) -> bool:
        return bool(self.numbers or self.literals)

    def to_dict(self) -> dict[str, list[str]]:
        return {"numbers": list(self.numbers), "literals": list(self.literals)}


def lexical_tokens(fact: str) -> LexicalTokens:
    """The numbers, identifiers and quoted strings of a fact (see the module docstring)."""
    numbers: list[str] = []
    literals: list[str] = []
    for m in _LEX.finditer(fact):
        kind = m.lastgroup
        if kind == "unit":  # lastgroup is the last group that matched: a number with a unit
            kind = "num"
        if kind == "num":
            n = _norm_number(m.group("num"), m.group("unit"))
            if n is not None:
                numbers.append(n)
        elif kind in ("tick", "dq", "cq", "sq"):
            lit = _norm_literal(m.group(kind))
            if lit:
                literals.append(lit)
        elif kind in ("url", "date", "time", "version"):
            literals.append(m.group(kind).lower().rstrip(".,;:"))
        elif kind == "path":
            tok = m.group("path").rstrip(".,;:")
            if _is_path(tok):
                literals.append(tok.lower())
        elif kind == "word":
            tok = m.group("word").rstrip(".-")
            if _SNAKE.match(tok) or _CAMEL.match(tok) or _MIXED.match(tok) or (
                    "." in tok and _is_dotted(tok)):
                literals.append(tok.lower())
    # Only what the check can find in the fact itself: a piece of a longer token ("xxMB" of
    # "1xxMB", "a6" of the hash "01422066a6", the "00" of "UTC-5:00") is no token of it, and
    # requiring it would turn down the fact's own words (issue 30: verbatim text was missed).
    have = text_numbers(fact) if numbers else set()
    numbers = [n for n in numbers if n in have]
    literals = [lit for lit in literals if _literal_pattern(lit).search(fact)]
    return LexicalTokens(tuple(dict.fromkeys(numbers)), tuple(dict.fromkeys(literals)))


def text_numbers(text: str) -> set[str]:
    """Every number in a text, normalised like a fact's, with number words as digits."""
    out: set[str] = set()
    for m in _NUMS.finditer(text):
        if m.group("num") is not None:
            n = _norm_number(m.group("num"), m.group("unit"))
            if n is not None:
                out.add(n)
    if any(c.isalpha() for c in text):
        for m in _NUMBER_WORD.finditer(text):
            out.add(str(_NUMBER_WORDS[m.group(1).lower()]))
    return out


_literal_patterns: dict[str, re.Pattern[str]] = {}


def _literal_pattern(lit: str) -> re.Pattern[str]:
    pat = _literal_patterns.get(lit)
    if pat is None:
        body = r"\s+".join(re.escape(w) for w in lit.split())
        head = r"(?<![A-Za-z0-9_])" if re.match(r"\w", lit) else ""
        tail = r"(?![A-Za-z0-9_])" if re.search(r"\w$", lit) else ""
        pat = _literal_patterns[lit] = re.compile(head + body + tail, re.I)
    return pat


def missing_tokens(tokens: LexicalTokens, text: str, numbers: set[str] | None = None) -> list[str]:
    """The fact tokens not found in ``text`` (empty: the lexical check passes)."""
    missing = []
    if tokens.numbers:
        have = text_numbers(text) if numbers is None else numbers
        missing += [n for n in tokens.numbers if n not in have]
    missing += [lit for lit in tokens.literals if not _literal_pattern(lit).search(text)]
    return missing
