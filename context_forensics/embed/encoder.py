"""Sentence embeddings for fact presence and drift: chunking, encoders, a store cache, similarity.

Embedding is the dominant cost of every semantic analysis (MiniLM on 2 CPU cores encodes a few
thousand tokens a second), so the shape of this module is about never doing it twice:

- ``chunk_text`` splits a message into sentence-sized chunks (a sentence or line is kept whole up
  to 128 MiniLM wordpieces, short ones are packed up to 16; run-on lines are cut by words, then
  characters), so a fact buried in a 5,000-token tool output is scored on its own sentence,
  not diluted by its neighbours, and nothing is lost to MiniLM's 256-wordpiece truncation.
  Chunking needs no tokenizer: a cheap estimate, checked against the real tokenizer on the
  corpus, keeps every chunk below the limit.
- ``embed_texts`` dedupes texts by content hash, reads cached vectors from the store in bulk,
  encodes only the misses (longest first, in batches), and writes them back in one transaction.
  A warm run loads no model at all: the cache key (hash, model name, model revision) is known
  from the model's files.
- ``similarity`` and ``group_max`` are plain matrix operations: facts x chunks, then the max
  over each message's chunks, with no Python loop per pair.

``HashingEmbedder`` is a deterministic, dependency-free stand-in for tests. torch and
sentence-transformers are imported only when ``SentenceTransformerEmbedder`` first encodes.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import cached_property, lru_cache
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Iterable,
    Protocol,
    Sequence,
    runtime_checkable,
)

import numpy as np

from ..hashing import content_hash

if TYPE_CHECKING:  # pragma: no cover
    from ..store.db import Store

ProgressFn = Callable[[int, int], None]

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

# ============================================================================================
# chunking

_ATOM = re.compile(r"\S+")
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
    return sum(_atom_cost(m.group()) for m in _ATOM.finditer(text))


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

    for m in _ATOM.finditer(text):
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


# Sub-sentence spans (``sub_spans``): a clause ends at , ; : and line breaks, and before a
# conjunction that can start one.
_SPAN_CUT = re.compile(r"[,;:]\s+|\n\s*|(?<=[.!?])\s+|\s+(?=(?:and|or|but|so|because|while|whereas|"
                       r"although|though|unless|then)\b)", re.IGNORECASE)


def word_count(text: str) -> int:
    """Whitespace-separated words: the unit of ``sub_spans`` windows."""
    return sum(1 for _ in _ATOM.finditer(text))


def has_clause_cut(text: str) -> bool:
    """Whether ``text`` has more than one clause in the sense of ``sub_spans``."""
    return _SPAN_CUT.search(text.strip()) is not None


def _edge_word(atom: str) -> str:
    """A word as a window's edge is compared: lower case, without the punctuation around it."""
    return atom.strip(".,;:!?\"'`()[]{}").lower()


def edge_words(fact: str) -> tuple[str, str]:
    """The first and last words of a fact, as ``sub_spans`` anchors its windows on them."""
    atoms = _ATOM.findall(fact)
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
    atoms = [m.span() for m in _ATOM.finditer(text)]
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
            a, b = g[i], g[i + n_words - 1]
            if anchors is None or _edge_word(text[a[0]:a[1]]) == anchors[0] \
                    or _edge_word(text[b[0]:b[1]]) == anchors[1]:
                out.add((a[0], b[1]))
    out.discard((atoms[0][0], atoms[-1][1]))
    return sorted(s for s in out if s[1] > s[0])


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


# ============================================================================================
# encoders


@runtime_checkable
class Embedder(Protocol):
    """Anything that maps texts to L2-normalised float32 vectors of a fixed size.

    ``name`` and ``revision`` key the cache: a change of either means different vectors.
    """

    name: str
    revision: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows L2-normalised."""
        ...


def normalize(vecs: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    v = np.asarray(vecs, dtype=np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)


def _sorted_by_length(texts: Sequence[str]) -> np.ndarray:
    # Longest first, stable: batches of similar length pad little, and the biggest batch
    # (the memory peak) comes first.
    return np.argsort(-np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), kind="stable")


# Measured with MiniLM on the 2-core CPU this was built on (tests/fixtures/embed/bench_embed.py,
# best of 2): ~15-wordpiece texts 202/231/254/300/233 texts/s at batch 8/16/32/64/128, ~120-wordpiece
# chunks 41.5/41.9/36.9/34.0/35.7. 32 is within 15% of the best for both; batching by a token
# budget instead measured within noise of it.
DEFAULT_BATCH_SIZE = 32


class SentenceTransformerEmbedder:
    """A sentence-transformers model from local files: the packaged all-MiniLM-L6-v2 by default.

    Constructing one checks the model is installed (a clear error says how to install it) but
    loads nothing; ``revision`` and ``dim`` come from the model's files, so a fully cached run
    never imports torch.
    """

    def __init__(self, model: str | Path | None = None, *, batch_size: int = DEFAULT_BATCH_SIZE,
                 device: str = "cpu") -> None:
        from ..tokens.assets import PACKAGED_MODEL_NAMES, resolve_model_path

        self.path = resolve_model_path(model)
        packaged = model is None or str(model) in PACKAGED_MODEL_NAMES
        self.name = "all-MiniLM-L6-v2" if packaged else self.path.name
        self.batch_size = batch_size
        self.device = device

    @cached_property
    def revision(self) -> str:
        from ..tokens.assets import model_revision

        return model_revision(self.path)

    @cached_property
    def dim(self) -> int:
        d = _dim_from_files(self.path)
        if d is None:
            model = self._model()
            # sentence-transformers 6 renamed get_sentence_embedding_dimension.
            getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            d = int(getter())
        return d

    def _model(self) -> Any:
        from ..tokens.assets import load_embedder

        return load_embedder(self.path, device=self.device)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = _sorted_by_length(texts)
        vecs = self._model().encode(
            [texts[i] for i in order],
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
        out[order] = vecs
        return out

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.name!r}, path={str(self.path)!r})"


def _dim_from_files(path: Path) -> int | None:
    """The output size from a sentence-transformers folder: the last Dense layer's
    ``out_features``, else the Pooling layer's ``word_embedding_dimension``."""
    try:
        modules = json.loads((path / "modules.json").read_text())
    except (OSError, ValueError):
        return None
    dim = None
    for m in modules:
        kind = str(m.get("type", ""))
        cfg = path / m.get("path", "") / "config.json"
        try:
            conf = json.loads(cfg.read_text()) if m.get("path") else {}
        except (OSError, ValueError):
            conf = {}
        if kind.endswith("Pooling"):
            # The pooled vector concatenates one word-embedding-sized block per pooling mode.
            modes = sum(1 for k, v in conf.items() if k.startswith("pooling_mode_") and v is True)
            wd = conf.get("word_embedding_dimension") or conf.get("embedding_dimension")
            dim = int(wd) * max(modes, 1) if wd else None
        elif kind.endswith("Dense"):
            dim = int(conf["out_features"]) if "out_features" in conf else None
        elif not kind.endswith(("Transformer", "Normalize")):
            return None  # a module we cannot size from files: ask the model
    return dim


_HASH_TOKEN = re.compile(r"\w+")


class HashingEmbedder:
    """A deterministic stand-in for tests: hashed bag of words and character trigrams.

    Texts sharing words score high, unrelated texts near 0; no model, no randomness, no
    process-salted ``hash()``. Counts every call and text so tests can spy on encoding.
    """

    def __init__(self, dim: int = 256, *, name: str = "hashing-bow") -> None:
        self.dim = dim
        self.name = name
        self.revision = f"v1-d{dim}"
        self.calls = 0
        self.encoded: list[str] = []

    @staticmethod
    @lru_cache(maxsize=1 << 15)
    def _slot(feature: str, dim: int) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        h = int.from_bytes(digest, "little")
        return h % dim, (1.0 if (h >> 63) & 1 else -1.0)

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in _HASH_TOKEN.findall(text.lower()):
            i, s = self._slot("w:" + w, self.dim)
            v[i] += 2.0 * s
            padded = f"#{w}#"
            for k in range(len(padded) - 2):
                i, s = self._slot("c:" + padded[k : k + 3], self.dim)
                v[i] += 0.5 * s
        return v

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.encoded.extend(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize(np.stack([self._vector(t) for t in texts]))


def get_embedder(model: str | Path | None = None, **kwargs: Any) -> SentenceTransformerEmbedder:
    """The embedder for an ``embedding.model`` config value (cheap; loads nothing yet)."""
    return SentenceTransformerEmbedder(model, **kwargs)


# ============================================================================================
# cache


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="seconds")


@dataclass
class EmbedStats:
    """What ``embed_texts`` did; pass one in to accumulate over several calls."""

    requested: int = 0  # texts asked for
    unique: int = 0  # distinct non-blank texts (by content hash)
    blank: int = 0  # empty/whitespace texts: zero vectors, never encoded
    hits: int = 0  # unique texts found in the cache
    expired: int = 0  # cached but older than the TTL: recomputed
    encoded: int = 0  # texts sent to the encoder
    encoder_calls: int = 0
    written: int = 0  # vectors written to the store
    encode_seconds: float = 0.0
    cache_seconds: float = 0.0
    encoded_hashes: list[str] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "encoded_hashes"}
        d["encode_seconds"] = round(self.encode_seconds, 3)
        d["cache_seconds"] = round(self.cache_seconds, 3)
        return d


class EmbeddingCache:
    """Vectors by (content hash, model, revision): in the store's ``embeddings`` table, or in
    memory when there is no store. One query per batch of hashes, never one per text."""

    CHUNK = 500

    def __init__(self, store: Store | None = None) -> None:
        self.store = store
        self.memory: dict[tuple[str, str, str], tuple[np.ndarray, str]] = {}
        self.write_failed = False

    def get_many(self, hashes: Sequence[str], model: str, revision: str, *, dim: int | None = None,
                 ttl_hours: float = 0, now: datetime | None = None
                 ) -> tuple[dict[str, np.ndarray], set[str]]:
        """Return (vectors found, hashes found but expired). ``ttl_hours=0`` never expires;
        a row of another size than ``dim`` counts as missing."""
        cutoff = _iso((now or _utcnow()) - timedelta(hours=ttl_hours)) if ttl_hours > 0 else None
        found: dict[str, np.ndarray] = {}
        expired: set[str] = set()
        if self.store is None:
            for h in hashes:
                hit = self.memory.get((h, model, revision))
                if hit is None or (dim is not None and hit[0].shape[0] != dim):
                    continue
                if cutoff is not None and hit[1] < cutoff:
                    expired.add(h)
                else:
                    found[h] = hit[0]
            return found, expired
        conn = self.store.db.conn
        for i in range(0, len(hashes), self.CHUNK):
            part = hashes[i : i + self.CHUNK]
            rows = conn.execute(
                "SELECT hash, dim, vector, created_at FROM embeddings WHERE model = ? AND revision = ? "
                f"AND hash IN ({','.join('?' * len(part))})",
                [model, revision, *part],
            ).fetchall()
            good = []
            for h, d, blob, created in rows:
                if (dim is not None and d != dim) or len(blob) != 4 * d:
                    continue
                if cutoff is not None and created < cutoff:
                    expired.add(h)
                    continue
                good.append((h, d, blob))
            if good:
                # One frombuffer per row size, not one per row.
                by_dim: dict[int, list[tuple[str, bytes]]] = {}
                for h, d, blob in good:
                    by_dim.setdefault(d, []).append((h, blob))
                for d, items in by_dim.items():
                    mat = np.frombuffer(b"".join(b for _, b in items), dtype="<f4").reshape(len(items), d)
                    for (h, _), row in zip(items, mat):
                        found[h] = row
        return found, expired

    def put_many(self, hashes: Sequence[str], vectors: np.ndarray, model: str, revision: str,
                 *, now: datetime | None = None) -> int:
        """Store vectors (rows matching ``hashes``) in one transaction; return rows written.

        A read-only or busy store loses only the persistent cache, never the result.
        """
        if not len(hashes):
            return 0
        created = _iso(now or _utcnow())
        vecs = np.ascontiguousarray(vectors, dtype="<f4")
        if self.store is None:
            for h, v in zip(hashes, vecs):
                self.memory[(h, model, revision)] = (v.copy(), created)
            return len(hashes)
        d = vecs.shape[1]
        rows = [(h, model, revision, d, v.tobytes(), created) for h, v in zip(hashes, vecs)]
        sql = ("INSERT OR REPLACE INTO embeddings (hash, model, revision, dim, vector, created_at) "
               "VALUES (?, ?, ?, ?, ?, ?)")
        if not self.store.write_rows(sql, rows):
            self.write_failed = True
            return 0
        return len(rows)

    def purge(self, *, model: str | None = None, older_than_hours: float | None = None,
              now: datetime | None = None) -> int:
        """Delete cached vectors (of one model, and/or older than a TTL); return how many."""
        where, args = [], []
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if older_than_hours is not None:
            where.append("created_at < ?")
            args.append(_iso((now or _utcnow()) - timedelta(hours=older_than_hours)))
        if self.store is None:
            cutoff = args[-1] if older_than_hours is not None else None
            gone = [k for k, (_, c) in self.memory.items()
                    if (model is None or k[1] == model) and (cutoff is None or c < cutoff)]
            for k in gone:
                del self.memory[k]
            return len(gone)
        sql = "DELETE FROM embeddings" + (" WHERE " + " AND ".join(where) if where else "")
        with self.store.transaction():
            return self.store.db.conn.execute(sql, args).rowcount


def embed_texts(
    texts: Sequence[str],
    embedder: Embedder,
    store: Store | EmbeddingCache | None = None,
    *,
    cache_enabled: bool = True,
    ttl_hours: float = 0,
    progress: ProgressFn | None = None,
    stats: EmbedStats | None = None,
    batch_size: int | None = None,
) -> np.ndarray:
    """Vectors for ``texts`` in input order, (len(texts), dim) float32, each text encoded once.

    Texts are deduped by content hash; cached vectors (same model name and revision, younger
    than ``ttl_hours`` unless it is 0) are read in bulk; the rest are encoded longest first in
    batches of ``batch_size`` (default: the embedder's) and written back in one transaction,
    also when encoding is interrupted. Blank texts get zero vectors and are never encoded.
    ``progress(done, total)`` counts texts to encode (``total`` is 0 on a warm run).
    With ``cache_enabled=False`` the store is neither read nor written.
    """
    st = stats if stats is not None else EmbedStats()
    texts = list(texts)
    n = len(texts)
    st.requested += n
    dim = int(embedder.dim)
    out = np.zeros((n, dim), dtype=np.float32)
    if n == 0:
        if progress:
            progress(0, 0)
        return out

    # Dedupe: unique index per text (-1 for blank).
    first: dict[str, int] = {}
    u_hashes: list[str] = []
    u_texts: list[str] = []
    inverse = np.full(n, -1, dtype=np.int64)
    for i, t in enumerate(texts):
        if not t or t.isspace():
            st.blank += 1
            continue
        h = content_hash(t)
        j = first.get(h)
        if j is None:
            j = first[h] = len(u_hashes)
            u_hashes.append(h)
            u_texts.append(t)
        inverse[i] = j
    n_unique = len(u_hashes)
    st.unique += n_unique
    vecs = np.zeros((n_unique, dim), dtype=np.float32)

    cache = store if isinstance(store, EmbeddingCache) else EmbeddingCache(store)
    use_cache = cache_enabled and (cache.store is not None or isinstance(store, EmbeddingCache))
    missing = list(range(n_unique))
    if use_cache and n_unique:
        t0 = time.perf_counter()
        found, expired = cache.get_many(u_hashes, embedder.name, embedder.revision, dim=dim,
                                        ttl_hours=ttl_hours)
        st.cache_seconds += time.perf_counter() - t0
        st.hits += len(found)
        st.expired += len(expired)
        missing = []
        for j, h in enumerate(u_hashes):
            v = found.get(h)
            if v is None:
                missing.append(j)
            else:
                vecs[j] = v

    total = len(missing)
    if progress:
        progress(0, total)
    if total:
        step = max(1, int(batch_size or getattr(embedder, "batch_size", 0) or DEFAULT_BATCH_SIZE))
        order = [missing[k] for k in _sorted_by_length([u_texts[j] for j in missing])]
        done_idx: list[int] = []
        try:
            for lo in range(0, total, step):
                idx = order[lo : lo + step]
                t0 = time.perf_counter()
                got = np.asarray(embedder.encode([u_texts[j] for j in idx]), dtype=np.float32)
                st.encode_seconds += time.perf_counter() - t0
                if got.shape != (len(idx), dim):
                    raise ValueError(
                        f"embedder {embedder.name!r} returned shape {got.shape}, expected {(len(idx), dim)}"
                    )
                vecs[idx] = got
                done_idx.extend(idx)
                st.encoder_calls += 1
                st.encoded += len(idx)
                st.encoded_hashes.extend(u_hashes[j] for j in idx)
                if progress:
                    progress(len(done_idx), total)
        finally:
            # Keep what was encoded even when interrupted: the next run resumes from here.
            if use_cache and done_idx:
                t0 = time.perf_counter()
                st.written += cache.put_many([u_hashes[j] for j in done_idx], vecs[done_idx],
                                             embedder.name, embedder.revision)
                st.cache_seconds += time.perf_counter() - t0

    valid = inverse >= 0
    out[valid] = vecs[inverse[valid]]
    return out


def embed_chunks(
    texts: Sequence[str],
    embedder: Embedder,
    store: Store | EmbeddingCache | None = None,
    *,
    max_tokens: int = CHUNK_TOKENS,
    group_tokens: int = GROUP_TOKENS,
    **kwargs: Any,
) -> tuple[ChunkedTexts, np.ndarray]:
    """Chunk texts (messages) and embed every chunk: (chunks, (len(chunks), dim) vectors).

    Other keyword arguments go to ``embed_texts``.
    """
    chunked = chunk_many(texts, max_tokens, group_tokens=group_tokens)
    return chunked, embed_texts(chunked.texts, embedder, store, **kwargs)


# ============================================================================================
# similarity


def similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``a`` with every row of ``b``: (len(a), len(b)) float32.

    Rows must already be normalised (every ``Embedder`` returns them so); zero rows score 0.
    """
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    if a.ndim == 1:
        a = a[None, :]
    if b.ndim == 1:
        b = b[None, :]
    return a @ b.T


def group_max(scores: np.ndarray, owner: np.ndarray, n_groups: int, *,
              fill: float = -np.inf) -> tuple[np.ndarray, np.ndarray]:
    """Reduce chunk scores to group (message) scores: the max over each group's chunks.

    ``scores`` is (..., n_chunks) — a vector, or facts x chunks; ``owner[k]`` is chunk k's group.
    Returns (max, argmax) of shape (..., n_groups): the best score and the index of the chunk
    that reached it (first one on ties); a group with no chunks gets ``fill`` and -1.
    """
    scores = np.asarray(scores, dtype=np.float32)
    owner = np.asarray(owner, dtype=np.int64)
    lead = scores.shape[:-1]
    if scores.shape[-1] != owner.shape[0]:
        raise ValueError(f"scores have {scores.shape[-1]} chunks but owner has {owner.shape[0]}")
    best = np.full((*lead, n_groups), fill, dtype=np.float32)
    arg = np.full((*lead, n_groups), -1, dtype=np.int64)
    if owner.size == 0:
        return best, arg
    if owner.size > 1 and np.any(owner[1:] < owner[:-1]):
        perm = np.argsort(owner, kind="stable")
        owner, scores = owner[perm], scores[..., perm]
    else:
        perm = None
    groups, starts = np.unique(owner, return_index=True)
    seg_max = np.maximum.reduceat(scores, starts, axis=-1)  # (..., n_present)
    best[..., groups] = seg_max
    # argmax: first chunk in each segment whose score equals the segment max.
    seg_of_chunk = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, owner.size)))
    hit = scores == seg_max[..., seg_of_chunk]
    pos = np.where(hit, np.arange(owner.size), owner.size)
    first = np.minimum.reduceat(pos, starts, axis=-1)
    arg[..., groups] = first if perm is None else perm[first]
    return best, arg
