"""Chunking: split a message into sentence-sized pieces to embed, without a tokenizer.

A sentence or line is kept whole up to ``CHUNK_TOKENS`` (128) MiniLM wordpieces and short ones
are packed up to ``GROUP_TOKENS`` (16); run-on lines are cut by words, then characters. So a fact
buried in a 5,000-token tool output is scored on its own sentence, not diluted by its
neighbours, and nothing is lost to MiniLM's 256-wordpiece truncation. Chunking needs no
tokenizer: a cheap estimate (``estimate_tokens``), checked against the real tokenizer on the
corpus, keeps every chunk below the limit. Runs of base64 or hex are dropped: nothing a sentence
embedding can match.

``chunk_text`` chunks one text, ``chunk_many`` many (each distinct text once) into a flat
``ChunkedTexts`` whose ``owner`` maps every chunk back to its text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

import numpy as np

# Chunk sizes in MiniLM wordpieces (estimated). A sentence up to CHUNK_TOKENS stays whole (MiniLM
# truncates at 256 wordpieces with [CLS] and [SEP]; 128 leaves room for the estimate being off by
# 2x); only units smaller than GROUP_TOKENS are packed together. Mean pooling dilutes: measured
# with MiniLM, a fact sentence inside a 128-token chunk of log/prose/code scores cosine 0.41-0.47
# against itself (paraphrases 0.33), no better than unrelated chunks (0.28-0.41); packed up to 16
# it scores 1.00 (paraphrases 0.68). Small chunks cost no more: repeated lines dedupe, and the
# corpus' unique chunks total 421k wordpieces at 16 against 503k at 128.
CHUNK_TOKENS = 128
GROUP_TOKENS = 16
MAX_WORDPIECES = 254

# A whitespace-free run: the unit of the estimate, and the word of ``spans.sub_spans`` windows.
ATOM = re.compile(r"\S+")
# BERT's basic tokenizer splits every punctuation/symbol character off (``_`` included), so a
# "word" for the estimate is a run of letters and digits.
_WORD = re.compile(r"[^\W_]+")
# An atom that ends a sentence: ``end.``, ``done!``, ``"quoted."``, ``(see above.)``.
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f][\"'\u201d\u2019)\]]*$")
# Where to cut an over-long atom (minified JSON, a long path) when there is a choice.
_CUT_AFTER = ",;}])>|&"
# Encoded binary (base64 images, hex dumps): long runs with no words in them.
_BLOB = re.compile(r"[A-Za-z0-9+/=_-]{48,}")
_HAS_DIGIT = re.compile(r"\d")
_HEX = re.compile(r"[0-9a-fA-F]+")


def _word_cost(w: str) -> int:
    """Estimated wordpieces of a run of letters/digits (fitted on the corpus, biased high).

    Measured with MiniLM's tokenizer: ASCII words of <= 5 letters are ~1.15 pieces, a 10-letter
    word ~2.1, a 20-letter one ~6.7; digit runs are cut into pieces of 1-3 digits; mixed runs
    (hex, ids) ~0.5 per character; non-Latin scripts can fall apart into single characters.
    """
    n = len(w)
    if not w.isascii():
        return n
    if w.isalpha():
        return 1 if n <= 5 else 1 + (n - 3) // 3
    if w.isdigit():
        return (n + 1) // 2
    return (2 * n + 2) // 3


def _atom_cost_uncached(atom: str) -> int:
    if atom.isascii() and atom.isalpha():
        return _word_cost(atom)
    words = _WORD.findall(atom)
    cost = len(atom) - sum(map(len, words))  # one piece per punctuation/symbol character
    for w in words:
        cost += _word_cost(w)
    return max(cost, 1)


_atom_cost_cached = lru_cache(maxsize=1 << 16)(_atom_cost_uncached)


def _atom_cost(atom: str) -> int:
    """Estimated wordpieces of one whitespace-free run. Short runs are cached (logs and code
    repeat them a lot); long ones are not, so a blob never stays alive in the cache."""
    return _atom_cost_cached(atom) if len(atom) <= 64 else _atom_cost_uncached(atom)


def estimate_tokens(text: str) -> int:
    """A cheap upper-leaning estimate of MiniLM (BERT uncased) wordpieces in ``text``."""
    return sum(_atom_cost(m.group()) for m in ATOM.finditer(text))


def _is_noise(text: str) -> bool:
    """Mostly base64 or hex: nothing a sentence embedding can match a fact against.

    Such runs only cost encoder time (a 100 KB base64 screenshot is thousands of chunks, minutes
    of MiniLM on 2 cores), so ``chunk_text`` drops them; identifiers inside them are the lexical
    check's job.
    """
    if len(text) < 48:
        return False
    covered = 0
    for m in _BLOB.finditer(text):
        run = m.group()
        if not _HAS_DIGIT.search(run):
            continue  # a long snake_case name, not a blob
        if _HEX.fullmatch(run) or (run.lower() != run and run.upper() != run):
            covered += len(run)
    if not covered:
        return False
    return covered >= 0.8 * (len(text) - text.count(" ") - text.count("\n"))


_PARA, _HARD = 1, 2


@dataclass(frozen=True, slots=True)
class Chunk:
    """A span of a text to embed: ``text == source[start:end]``, ``tokens`` estimated."""

    start: int
    end: int
    text: str
    tokens: int


def _split_atom(text: str, start: int, end: int, budget: int) -> list[tuple[int, int, int]]:
    """Cut one over-long whitespace-free run into pieces within ``budget``, preferring to cut
    after a separator (``,``, ``}``, ...) in the second half of each piece. Linear in the run's
    length: piece sizes come from the run's average characters per token."""
    chars_per_token = (end - start) / _atom_cost(text[start:end])
    out = []
    pos = start
    while pos < end:
        size = max(1, min(end - pos, int(budget * chars_per_token)))
        while True:
            hi = pos + size
            if hi < end:
                cut = max(text.rfind(c, pos + size // 2, hi) for c in _CUT_AFTER)
                if cut >= 0:
                    hi = cut + 1
            cost = _atom_cost(text[pos:hi])
            if cost <= budget or size == 1:
                break
            size = max(1, size * 3 // 4)
        out.append((pos, hi, cost))
        pos = hi
    return out


def chunk_text(text: str, max_tokens: int = CHUNK_TOKENS, *, group_tokens: int = GROUP_TOKENS,
               drop_noise: bool = True) -> list[Chunk]:
    """Split ``text`` into chunks of at most ``max_tokens`` estimated wordpieces.

    Units are sentences within lines (a line break always ends one, so code and log lines are
    units). A unit up to ``max_tokens`` is never cut; consecutive units are packed greedily while
    they fit in ``group_tokens``, and a blank line starts a new chunk once the current one is
    half full. A unit over ``max_tokens`` (a run-on line) is packed word by word up to
    ``group_tokens``, and a word over that is cut by characters. Whitespace-free runs that are
    mostly base64/hex are skipped unless ``drop_noise`` is false. Deterministic;
    ``text[c.start:c.end] == c.text``.
    """
    if max_tokens < 1 or group_tokens < 1:
        raise ValueError("max_tokens and group_tokens must be >= 1")
    group_tokens = min(group_tokens, max_tokens)
    if not text or text.isspace():
        return []
    # Pass 1: units as (start, end, cost, break_before), each within the budget. break_before
    # is PARA after a blank line, HARD after a dropped blob (a chunk never spans one).
    units: list[tuple[int, int, int, int]] = []
    u_start = u_end = u_cost = -1
    u_atoms: list[tuple[int, int, int]] = []
    brk = 0
    prev_end = 0

    def close() -> None:
        nonlocal u_start, u_atoms, brk
        if u_start < 0:
            return
        if u_cost <= max_tokens:
            units.append((u_start, u_end, u_cost, brk))
        else:  # an over-long sentence or line: its atoms become the units
            first = True
            for a_start, a_end, a_cost in u_atoms:
                pieces = [(a_start, a_end, a_cost)] if a_cost <= group_tokens else _split_atom(
                    text, a_start, a_end, group_tokens)
                for p in pieces:
                    units.append((*p, brk if first else 0))
                    first = False
        u_start, u_atoms, brk = -1, [], 0

    for m in ATOM.finditer(text):
        start, end = m.span()
        newlines = text.count("\n", prev_end, start)
        if newlines:
            close()
            if newlines > 1 and units:
                brk = max(brk, _PARA)
        atom = m.group()
        if drop_noise and len(atom) >= 48 and _is_noise(atom):
            close()
            brk = _HARD
            prev_end = end
            continue
        cost = _atom_cost(atom)
        if u_start < 0:
            u_start, u_cost = start, 0
        u_end = end
        u_cost += cost
        u_atoms.append((start, end, cost))
        prev_end = end
        if _SENTENCE_END.search(atom):
            close()
    close()

    # Pass 2: pack units greedily.
    chunks: list[Chunk] = []
    c_start, c_end, c_cost = -1, -1, 0
    half = group_tokens // 2
    for start, end, cost, brk_before in units:
        if c_start >= 0 and (c_cost + cost > group_tokens or brk_before == _HARD
                             or (brk_before == _PARA and c_cost >= half)):
            chunks.append(Chunk(c_start, c_end, text[c_start:c_end], c_cost))
            c_start = -1
        if c_start < 0:
            c_start, c_cost = start, 0
        c_end = end
        c_cost += cost
    if c_start >= 0:
        chunks.append(Chunk(c_start, c_end, text[c_start:c_end], c_cost))
    return chunks


@dataclass(frozen=True)
class ChunkedTexts:
    """The chunks of many texts, flattened in order, with the index of each chunk's text.

    ``owner`` is sorted (a text's chunks are consecutive); a text with no chunks (empty,
    whitespace) has none, so ``group_max`` reports it as ``fill``.
    """

    chunks: tuple[Chunk, ...]
    owner: np.ndarray  # int64, len(chunks)
    n_texts: int

    @property
    def texts(self) -> list[str]:
        return [c.text for c in self.chunks]

    def __len__(self) -> int:
        return len(self.chunks)

    def of(self, i: int) -> tuple[Chunk, ...]:
        """The chunks of text ``i``."""
        lo, hi = np.searchsorted(self.owner, [i, i + 1])
        return self.chunks[lo:hi]


def chunk_many(texts: Iterable[str], max_tokens: int = CHUNK_TOKENS, *,
               group_tokens: int = GROUP_TOKENS, drop_noise: bool = True) -> ChunkedTexts:
    """Chunk every text; texts seen before in this call are chunked once."""
    chunks: list[Chunk] = []
    owner: list[int] = []
    memo: dict[str, list[Chunk]] = {}
    n = 0
    for i, t in enumerate(texts):
        n = i + 1
        cs = memo.get(t)
        if cs is None:
            cs = memo[t] = chunk_text(t, max_tokens, group_tokens=group_tokens, drop_noise=drop_noise)
        chunks.extend(cs)
        owner.extend([i] * len(cs))
    return ChunkedTexts(tuple(chunks), np.asarray(owner, dtype=np.int64), n)
