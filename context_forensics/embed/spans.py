"""Sub-sentence spans: the clauses and fact-sized word windows of a chunk, to score a fact on.

Mean pooling dilutes a fact inside a long sentence, so the presence rule (``facts.presence``)
also scores a chunk's clauses and the windows of the fact's length inside it (``sub_spans``).
``word_count``, ``has_clause_cut`` and ``edge_words`` are the measures of a fact that decide
which windows it gets.
"""

from __future__ import annotations

import re

from .chunking import ATOM

# Sub-sentence spans (``sub_spans``): a clause ends at , ; : and line breaks, and before a
# conjunction that can start one.
_SPAN_CUT = re.compile(r"[,;:]\s+|\n\s*|(?<=[.!?])\s+|\s+(?=(?:and|or|but|so|because|while|whereas|"
                       r"although|though|unless|then)\b)", re.IGNORECASE)


def word_count(text: str) -> int:
    """Whitespace-separated words: the unit of ``sub_spans`` windows."""
    return sum(1 for _ in ATOM.finditer(text))


def has_clause_cut(text: str) -> bool:
    """Whether ``text`` has more than one clause in the sense of ``sub_spans``."""
    return _SPAN_CUT.search(text.strip()) is not None


def _edge_word(atom: str) -> str:
    """A word as a window's edge is compared: lower case, without the punctuation around it."""
    return atom.strip(".,;:!?\"'`()[]{}").lower()


def edge_words(fact: str) -> tuple[str, str]:
    """The first and last words of a fact, as ``sub_spans`` anchors its windows on them."""
    atoms = ATOM.findall(fact)
    return (_edge_word(atoms[0]), _edge_word(atoms[-1])) if atoms else ("", "")


def sub_spans(text: str, n_words: int, *, cross_clauses: bool = False,
              anchors: tuple[str, str] | None = None) -> list[tuple[int, int]]:
    """(start, end) spans inside ``text`` to score a fact of ``n_words`` words against: every
    clause (cut at , ; : line breaks, sentence ends and before and/or/but/so/because/...), and
    every window of ``n_words`` consecutive words inside a clause (across clauses only with
    ``cross_clauses``, for a fact that has several itself: a window astride a cut splices two
    statements, "…at most 20 requests per second, and the payments API…"). Mean pooling
    dilutes a fact inside a long sentence (MiniLM: a verbatim fact scores 0.49 inside the
    compound sentence of tests/fixtures/facts), while its own window scores 1.0. Empty when
    ``text`` has no more words than ``n_words`` (the text is its own best span). Deduplicated,
    in order of position; the whole text is never among them, and no span starts or ends with
    a space. With ``anchors`` (the fact's ``edge_words``) only the windows that start with its
    first word or end with its last are kept: the fact's own window does both, and a chunk has
    a few such windows instead of one per word.
    """
    atoms = [m.span() for m in ATOM.finditer(text)]
    if n_words < 1 or len(atoms) <= n_words:
        return []
    clauses: list[tuple[int, int]] = []
    pos = 0
    for m in _SPAN_CUT.finditer(text):
        clauses.append((pos, m.start()))
        pos = m.end()
    clauses.append((pos, len(text)))
    out: set[tuple[int, int]] = set()
    for a, b in clauses:
        part = text[a:b]
        if part.strip():
            out.add((a + len(part) - len(part.lstrip()), b - len(part) + len(part.rstrip())))
    groups = [atoms] if cross_clauses else [[s for s in atoms if a <= s[0] < b] for a, b in clauses]
    for g in groups:
        for i in range(len(g) - n_words + 1):
            first, last = g[i], g[i + n_words - 1]
            if anchors is None or _edge_word(text[first[0]:first[1]]) == anchors[0] \
                    or _edge_word(text[last[0]:last[1]]) == anchors[1]:
                out.add((first[0], last[1]))
    out.discard((atoms[0][0], atoms[-1][1]))
    return sorted(s for s in out if s[1] > s[0])
