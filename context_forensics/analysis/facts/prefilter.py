"""The prefilter of ``score_presence``: which chunks could make a text support a fact, decided
before anything is embedded, so a cold ``ctxf facts`` embeds those chunks only.

A chunk supports a fact (``presence``) when (a) its own cosine reaches the threshold and the
lexical and polarity checks pass, or (b) a sub-sentence span of it does, which needs the chunk's
cosine >= ``SPAN_FLOOR`` and >= ``SPAN_OVERLAP`` of the fact's content stems in the chunk. So:

- **a fact with lexical tokens** (numbers, identifiers, quoted strings): the whole-chunk check
  looks for every token in the chunk or its neighbour chunks of the same text, and a span's
  check inside the span (a part of the chunk). A chunk whose neighbourhood lacks one can never
  support the fact: ``missing_tokens`` on that neighbourhood is the gate, exact (it is the check
  itself, run before the cosine instead of after).
- **a fact without lexical tokens**: a chunk holding ``SPAN_OVERLAP`` of the fact's content
  stems is a candidate (that is exactly route (b)'s stem condition); for route (a), a chunk that
  shares a content stem with the fact, or holds a word close to one of the fact's content words
  under a cheap model, also is. The cheap model is MiniLM's own input word embeddings
  (``embeddings.word_embeddings.weight`` of the packaged weights, read with safetensors into
  numpy, no torch): a chunk's wordpiece whose cosine to a content wordpiece of the fact reaches
  ``WORD_GATE`` (a synonym, another form of the word) makes it a candidate. Both are set from
  measurement (bench/facts_recall.py; the figures are in the comment at ``WORD_GATE``), with a
  safety margin; they are only valid for the packaged MiniLM at a presence threshold >=
  ``DEFAULT_THRESHOLD``: with any other embedder, or a lower threshold, every chunk is a
  candidate for such a fact (the full method).

Near misses (close texts that fail a check) are searched among the encoded chunks only: for a
fact with lexical tokens, the chunks holding ``SPAN_OVERLAP`` of its content stems are encoded
too, so a changed number ("3,000" for "4,500") in a sentence about the same thing is still
found. ``Presence.plan`` (the JSON report's ``method``) says which method ran, how many unique
chunks were encoded of how many, and that near misses came from the candidates only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from ...embed import ChunkedTexts
from ...matching.lexical import LexicalTokens, missing_tokens, text_numbers
from ...matching.polarity import content_stems

MINILM_NAME = "all-MiniLM-L6-v2"
# The word gate for facts without lexical tokens (route (a) of the module docstring). Measured
# with bench/facts_recall.py (2026-12-02, every message of 189 corpus sessions x their suggested
# facts + 12 hand-written + the audit bench's 3, the calibration pairs; ONNX MiniLM): of the 484
# (fact, chunk) pairs with MiniLM cosine >= 0.58 (0.02 below the default threshold) holding less
# than half the fact's content stems, 476 share a content stem with the fact and 8 (one text,
# repeated) none; those 8 hold a word at cosine 0.577 to one of the fact's. 0.45 leaves a 0.127
# margin; over all (fact, chunk) pairs the gate keeps 7.7% (the mean-pooled static cosine tried
# before it needed 0.3 and kept 92%).
WORD_GATE = 0.45
STATIC_GATE = WORD_GATE  # the JSON report's name for it ("static_gate")
# Minimum presence threshold the word gate was measured for (below it: the full method).
STATIC_MIN_THRESHOLD = 0.6
# wordpieces of a fact that are no content words (the word gate ignores them)
_FUNCTION_PIECES = frozenset(
    "a an the of to in on for and or but is are be been was were it its this that these those with by as at "
    "from into any all each every must should can may will not no never do does don t s".split())
_MAX_WORDPIECES = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2


@dataclass
class EncodePlan:
    """Which unique chunk texts to embed, and what the gate did."""

    encode: np.ndarray  # bool (U,)
    method: str  # "prefiltered" | "exhaustive"
    static: bool  # the static-embedding gate was used for facts without lexical tokens
    full_facts: list[int]  # facts without lexical tokens for which every chunk was a candidate

    def to_dict(self) -> dict:
        return {"method": self.method, "chunks": int(self.encode.size), "encoded": int(self.encode.sum()),
                "static_gate": STATIC_GATE if self.static else None,
                "facts_without_gate": len(self.full_facts),
                "near_misses": "all chunks" if self.method == "exhaustive" or bool(self.encode.all())
                else "encoded candidates only"}


class StaticMiniLM:
    """MiniLM's input word-embedding matrix (numpy and the tokenizers library, no torch): which
    chunks hold a wordpiece close to one of a fact's content wordpieces."""

    def __init__(self, path: Path) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(_MAX_WORDPIECES)
        with safe_open(str(path / "model.safetensors"), framework="numpy") as f:
            key = next(k for k in f.keys() if k.endswith("word_embeddings.weight"))
            w = np.asarray(f.get_tensor(key), dtype=np.float32)
        self.unit = w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-12)
        vocab = self.tokenizer.get_vocab()
        self._content = np.zeros(len(self.unit), dtype=bool)
        for piece, i in vocab.items():
            word = piece[2:] if piece.startswith("##") else piece
            if i < len(self._content) and len(word) >= 2 and word.isalpha() and word.isascii() \
                    and word.lower() == word and piece not in _FUNCTION_PIECES:
                self._content[i] = True

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def closeness(self, fact: str, chunk_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Per chunk: the highest cosine between one of its wordpieces and a content wordpiece of
        ``fact`` (all the fact's wordpieces when none is a content word)."""
        ids = self.ids([fact])[0]
        content = [i for i in ids if self._content[i]] or ids
        if not content or not chunk_ids:
            return np.full(len(chunk_ids), -1.0, dtype=np.float32)
        best = (self.unit[content] @ self.unit.T).max(axis=0)  # each vocabulary entry's best
        lens = np.fromiter((len(c) for c in chunk_ids), dtype=np.int64, count=len(chunk_ids))
        out = np.full(len(chunk_ids), -1.0, dtype=np.float32)
        has = lens > 0
        if has.any():
            flat = np.fromiter((x for c in chunk_ids for x in c), dtype=np.int64, count=int(lens.sum()))
            starts = np.concatenate([[0], np.cumsum(lens[has])[:-1]])
            out[has] = np.maximum.reduceat(best[flat], starts)
        return out


@lru_cache(maxsize=1)
def static_model() -> StaticMiniLM | None:
    """The packaged MiniLM's static embeddings, or None when its files cannot be read."""
    from ...tokens.assets import packaged_model_path

    try:
        return StaticMiniLM(packaged_model_path())
    except Exception:  # noqa: BLE001 - no gate then: the full method for those facts
        return None


def _neighbourhood(chunked: ChunkedTexts, texts: Sequence[str], c: int) -> str:
    """Chunk c and its neighbours in the same text (a fact's tokens may straddle a cut); the
    presence rule's lexical check reads the same text, so the gate keeps exactly what it could pass."""
    owner = chunked.owner
    lo = c - 1 if c > 0 and owner[c - 1] == owner[c] else c
    hi = c + 1 if c + 1 < len(owner) and owner[c + 1] == owner[c] else c
    src = texts[int(owner[c])]
    return src[chunked.chunks[lo].start : chunked.chunks[hi].end]


def plan_encoding(facts: Sequence[str], toks: Sequence[LexicalTokens], chunked: ChunkedTexts,
                  texts: Sequence[str], inverse: np.ndarray, uniq: Sequence[str], *, embedder_name: str,
                  threshold: float, overlap: float, mask: np.ndarray | None = None) -> EncodePlan:
    """The unique chunk texts (``uniq``, ``inverse`` maps each chunk to its index there, or past
    it for a chunk identical to a fact) that could support some fact, plus the near-miss
    candidates of facts with lexical tokens (see the module docstring)."""
    F, U = len(facts), len(uniq)
    encode = np.zeros(U, dtype=bool)
    if U == 0:
        return EncodePlan(encode, "prefiltered", False, [])
    static_ok = embedder_name == MINILM_NAME and threshold >= STATIC_MIN_THRESHOLD
    fact_stems = [content_stems(f) for f in facts]
    # the stem gate, per (fact, unique chunk): route (b)'s own condition
    need = [overlap * len(s) for s in fact_stems]
    stem_ok = np.zeros((F, U), dtype=bool)
    chunk_stems = [content_stems(text) for text in uniq]
    for k, st in enumerate(chunk_stems):
        for f in range(F):
            if not fact_stems[f] or len(fact_stems[f] & st) >= need[f]:
                stem_ok[f, k] = True
    lexical = [f for f in range(F) if toks[f]]
    plain = [f for f in range(F) if not toks[f]]
    sem = stem_ok
    static_used = False
    full: list[int] = []
    if plain and static_ok:
        sm = static_model()
        if sm is not None:
            sem = stem_ok.copy()
            chunk_ids = sm.ids(uniq)
            for f in plain:
                # route (a): a shared content stem, or a word close to one of the fact's
                sem[f] |= np.fromiter((bool(fact_stems[f] & st) for st in chunk_stems), dtype=bool, count=U)
                sem[f] |= sm.closeness(facts[f], chunk_ids) >= WORD_GATE
            static_used = True
    if plain and not static_used:
        full = plain  # no valid cheap semantic gate: every chunk is a candidate for these facts
        encode[:] = True
        return EncodePlan(encode, "prefiltered", False, full)
    for f in plain:
        encode |= sem[f]
    for f in lexical:
        encode |= stem_ok[f]  # near-miss candidates (a changed number in a sentence on the same thing)
    if lexical:
        cols = np.flatnonzero(inverse < U)  # chunks not identical to a fact
        pending = cols[~encode[inverse[cols]]]
        any_numbers = any(toks[f].numbers for f in lexical)
        for c in pending.tolist():
            k = int(inverse[c])
            if encode[k]:
                continue
            if mask is not None and not mask[:, int(chunked.owner[c])].any():
                continue
            hood = _neighbourhood(chunked, texts, c)
            nums = text_numbers(hood) if any_numbers else None
            for f in lexical:
                if mask is not None and not mask[f, int(chunked.owner[c])]:
                    continue
                if not missing_tokens(toks[f], hood, nums):
                    encode[k] = True
                    break
    return EncodePlan(encode, "prefiltered", static_used, full)
