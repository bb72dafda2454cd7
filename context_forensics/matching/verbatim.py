"""Verbatim presence: a fact copied into a text, exactly or up to layout, is in it.

The facts analysis decides presence by embedding chunks of a message, which can miss a sentence
copied word for word: a task statement wrapped over lines is cut into line-sized chunks, so no
chunk holds the whole sentence, its names fall outside the span that matched, or a negation sits
on the line before ("a package with no\\n__init__.py ..."). So before anything is embedded, each
fact is looked up in each message's whole text (``verbatim_span``):

- **Normalized words.** Both texts are read as words: runs of letters, digits and ``_``, joined by
  an inner ``. , : ' / - + @`` (``pkgutil.iter_modules``, ``4,500``, ``don't``, ``ad-hoc``,
  ``3.11``), compared case-insensitively, with typographic quotes and apostrophes as ASCII ones.
  Whitespace, line breaks and every other punctuation mark (brackets, commas between words,
  backticks, quotes, a final full stop) are layout: "use pkgutil.iter_modules (), instead of
  direct\\nfilesystem access" holds "Use pkgutil.iter_modules(), instead of direct filesystem
  access." The fact's words must appear consecutively, as whole words ("main" is not in
  "domain").
- **Polarity.** An occurrence counts only when the clauses it lies in say it the same way round
  (``polarity.polarity_conflict`` on them): "Never push to main" does not hold the fact "push to
  main", and "You may not rename X" does not hold "rename X".

The returned span is in the text's own coordinates, from the first word's first character to the
last word's last one. ``ctxf check`` uses the same function: a fact found verbatim in a step's
window and reported absent there is an inconsistency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice

from .polarity import clause_scope, polarity_conflict

_WORD = re.compile(r"\w+(?:[.,:'/+@-]\w+)*")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201b": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"',
                         "\u2010": "-", "\u2011": "-"})
_SEP = "\x00"  # joins the words: never inside a word


_TYPOGRAPHIC = re.compile("[" + "".join(chr(c) for c in _QUOTES) + "]")


def _ascii(text: str) -> str:
    """Typographic quotes and hyphens as ASCII ones (same length: offsets do not move)."""
    return text.translate(_QUOTES) if _TYPOGRAPHIC.search(text) else text


@dataclass(frozen=True)
class Words:
    """A text read as normalized words: ``joined`` is ``SEP w1 SEP w2 ... SEP`` in lower case;
    ``text`` the text they were read from (quotes made ASCII, same offsets)."""

    joined: str
    text: str

    def span(self, first: int, count: int) -> tuple[int, int]:
        """(start, end) in the text of words ``first`` .. ``first + count - 1``."""
        found = islice(_WORD.finditer(self.text), first, first + count)
        ms = list(found)
        return ms[0].start(), ms[-1].end()


def words(text: str) -> Words:
    """``text`` as normalized words (see the module docstring)."""
    plain = _ascii(text)
    ws = _WORD.findall(plain)
    return Words(_SEP + _SEP.join(ws).lower() + _SEP if ws else "", plain)


@lru_cache(maxsize=1 << 12)
def _fact_needle(fact: str) -> str:
    return words(fact).joined  # SEP w1 SEP ... SEP: matches whole words only


def screen(text: str) -> str:
    """``text`` as ``fact_key`` is looked for in it (lower case, ASCII quotes): a text that lacks
    a fact's key cannot hold the fact verbatim, and reading it as words costs more."""
    return _ascii(text).lower()


@lru_cache(maxsize=1 << 12)
def fact_key(fact: str) -> str:
    """The longest word of ``fact`` as ``screen`` writes it ("" for a fact without words)."""
    return max(_fact_needle(fact).split(_SEP), key=len)


def _scope(text: str, a: int, b: int, reach: int = 400) -> str:
    """The clauses ``text[a:b]`` lies in, read with the occurrence's line breaks as spaces: inside
    a copied sentence a line break is layout, not the clause cut it is elsewhere ("a package with
    no\n__init__.py is ...")."""
    lo, hi = max(0, a - reach), min(len(text), b + reach)
    flat = " ".join(text[a:b].split())
    local = text[lo:a] + flat + text[b:hi]
    return clause_scope(local, a - lo, a - lo + len(flat), reach=reach)


def _edges(fact: str, text: str, a: int, b: int) -> tuple[int, int]:
    """The span widened by the punctuation the fact has before its first word or after its last
    one, where the text has the same ("Use `pytest -q`." keeps its backtick and full stop)."""
    found = list(_WORD.finditer(fact))
    head = fact[: found[0].start()].strip()
    tail = fact[found[-1].end() :].strip()
    if head and text[max(0, a - len(head)) : a] == head:
        a -= len(head)
    if tail and text[b : b + len(tail)] == tail:
        b += len(tail)
    return a, b


def find_verbatim(fact: str, text: str, text_words: Words) -> tuple[int, int] | None:
    """``verbatim_span`` on a text already read as ``words(text)`` (many facts, one text)."""
    needle = _fact_needle(fact)
    if not needle:
        return None
    hay = text_words.joined
    n_words = needle.count(_SEP) - 1
    pos = hay.find(needle)
    while pos >= 0:
        a, b = text_words.span(hay.count(_SEP, 0, pos), n_words)  # the words before it, then its own
        if polarity_conflict(fact, _scope(text, a, b)) is None:
            return _edges(fact, text, a, b)
        pos = hay.find(needle, pos + 1)
    return None


def verbatim_span(fact: str, text: str) -> tuple[int, int] | None:
    """The (start, end) in ``text`` of an exact or normalized occurrence of ``fact`` whose
    clauses say it the same way round (module docstring), or None when there is none."""
    if not fact or not text:
        return None
    return find_verbatim(fact, text, words(text))
