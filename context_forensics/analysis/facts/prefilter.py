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
- **a fact without lexical tokens**: a chunk that shares a content stem with the fact, or holds
  a word close to one of the fact's content words under a cheap model, is a candidate for route
  (a). The cheap model is MiniLM's own input word embeddings (``embeddings.word_embeddings.weight``
  of the packaged weights, read from the safetensors file into numpy, no torch): a chunk's
  wordpiece whose cosine to a content wordpiece of the fact reaches ``WORD_GATE`` (a synonym,
  another form of the word) makes it a candidate. It is set from measurement
  (bench/facts_recall.py; the figures are in the comment at ``WORD_GATE``), with a safety
  margin, and only valid for the packaged MiniLM at a presence threshold >=
  ``STATIC_MIN_THRESHOLD``: with any other embedder, or a lower threshold, every chunk is a
  candidate for such a fact (the full method).
- **route (b)**, every fact: a chunk holding ``SPAN_OVERLAP`` of the fact's content stems is a
  candidate (exactly route (b)'s stem condition).

Measured and not adopted: the word gate on top of the lexical one for facts with lexical tokens
(2026-12-03, corpus sessions x their suggested facts + 12 hand-written): of the 693 (fact,
chunk) pairs at cosine >= 0.58 that pass the lexical check with less than half the fact's
content stems, 38 share no stem and hold no word within 0.45; the numbers carry such facts
("The vertices of a triangle are at points (0, 0), (-1, 1), and (3, 3)." is 0.63 to "the
coordinates are A(0, 0), B(-1, 1), and C(3, 3)"), and no share of words in the fact separated
them with a margin (one at 8 content words of 10).

Near misses (close texts that fail a check) are searched among the encoded chunks only: for a
fact with lexical tokens, the chunks holding ``SPAN_OVERLAP`` of its content stems are encoded
too, so a changed number ("3,000" for "4,500") in a sentence about the same thing is still
found. ``Presence.plan`` (the JSON report's ``method``) says which method ran, how many unique
chunks were encoded of how many, and that near misses came from the candidates only.
"""

from __future__ import annotations

import json
import struct
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
# on 2026-12-02 over every message of 189 corpus sessions x their suggested facts + 12
# hand-written + the audit bench's 3, and the calibration pairs (ONNX MiniLM): of the 484
# (fact, chunk) pairs with MiniLM cosine >= 0.58 (0.02 below the default threshold) holding less
# than half the fact's content stems, 476 share a content stem with the fact and 8 (one text,
# repeated) none; those 8 hold a word at cosine 0.577 to one of the fact's. 0.45 leaves a 0.127
# margin; over all (fact, chunk) pairs the gate keeps 7.7% (the mean-pooled static cosine tried
# before it needed 0.3 and kept 92%). bench/facts_recall.py measures the same on the texts that
# enter a window (2026-12-03: 476 pairs, 468 sharing a stem, 8 holding one of the fact's
# wordpieces inside a longer word, closeness 1.0) and fails below the gate.
WORD_GATE = 0.45
STATIC_GATE = WORD_GATE  # the JSON report's name for it ("static_gate")
# Minimum presence threshold the word gate was measured for (below it: the full method for a
# fact without lexical tokens).
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
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(_MAX_WORDPIECES)
        # kept as float16 unit rows (23 MB, not 47; it stays loaded across an audit's sessions):
        # cosines 7.6e-5 at most from float32's on the spotter session's chunks (the test allows
        # 1e-3: tests/test_facts_prefilter.py), the gate's margin is 0.13
        self.unit = _unit_rows_f16(path / "model.safetensors", "word_embeddings.weight")
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
        lens = np.fromiter((len(c) for c in chunk_ids), dtype=np.int64, count=len(chunk_ids))
        out = np.full(len(chunk_ids), -1.0, dtype=np.float32)
        has = lens > 0
        if has.any():
            flat = np.fromiter((x for c in chunk_ids for x in c), dtype=np.int64, count=int(lens.sum()))
            # the best cosine of each wordpiece the chunks hold (only those: float32 arithmetic
            # on a few thousand rows, not the whole vocabulary)
            pieces, where = np.unique(flat, return_inverse=True)
            fact_vecs = self.unit[content].astype(np.float32)
            best = (self.unit[pieces].astype(np.float32) @ fact_vecs.T).max(axis=1)
            starts = np.concatenate([[0], np.cumsum(lens[has])[:-1]])
            out[has] = np.maximum.reduceat(best[where], starts)
        return out


def _unit_rows_f16(file: Path, suffix: str, block_rows: int = 2048) -> np.ndarray:
    """The rows of the float32 / float16 tensor whose name ends with ``suffix`` in a safetensors
    file, L2-normalised, as float16. Read by blocks with plain file reads (the format: an 8-byte
    little-endian header size, a JSON header of dtypes, shapes and byte offsets, the data), so
    the process never holds more than the result and one block (a mapping of the file, as
    safetensors' own reader makes, would count the 47 MB it touches in the resident set)."""
    with open(file, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        key = next(k for k in header if k != "__metadata__" and k.endswith(suffix))
        info = header[key]
        dtype = {"F32": np.float32, "F16": np.float16}[info["dtype"]]
        rows, dim = info["shape"]
        start, end = info["data_offsets"]
        if end - start != rows * dim * np.dtype(dtype).itemsize:
            raise ValueError(f"{file}: {key} holds {end - start} bytes, not {rows} x {dim} {info['dtype']}")
        out = np.empty((rows, dim), dtype=np.float16)
        f.seek(8 + size + start)
        for lo in range(0, rows, block_rows):
            n = min(block_rows, rows - lo)
            block = np.frombuffer(f.read(n * dim * np.dtype(dtype).itemsize), dtype=dtype).reshape(n, dim)
            block = block.astype(np.float32)
            out[lo : lo + n] = block / np.maximum(np.linalg.norm(block, axis=1, keepdims=True), 1e-12)
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
    # route (a)'s word gate for the facts without lexical tokens, per (fact, unique chunk): a
    # shared content stem, or a word close to one of the fact's (None: no valid cheap gate here)
    sem: np.ndarray | None = None
    sm = static_model() if plain and static_ok else None
    if sm is not None:
        sem = stem_ok.copy()
        chunk_ids = sm.ids(uniq)
        for f in plain:
            sem[f] |= np.fromiter((bool(fact_stems[f] & st) for st in chunk_stems), dtype=bool, count=U)
            sem[f] |= sm.closeness(facts[f], chunk_ids) >= WORD_GATE
    if plain:
        if sem is None:
            encode[:] = True  # no valid cheap semantic gate: every chunk is a candidate for these facts
            return EncodePlan(encode, "prefiltered", False, plain)
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
    return EncodePlan(encode, "prefiltered", sem is not None, [])
