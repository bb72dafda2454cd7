"""Embedders: what maps texts to unit vectors, and the one the config names.

``Embedder`` is the protocol every analysis takes (``name`` and ``revision`` key the cache).
``SentenceTransformerEmbedder`` is a sentence-transformers model from local files, the packaged
all-MiniLM-L6-v2 by default (``tokens.assets`` finds and loads it offline); constructing one
loads nothing, and ``revision`` and ``dim`` come from the model's files, so a fully cached run
never imports torch or sentence-transformers. ``HashingEmbedder`` is a deterministic,
dependency-free stand-in for tests. ``get_embedder`` turns an ``embedding.model`` config value
into an embedder: commands look it up here, lazily, so tests can swap in a stand-in by patching
``context_forensics.embed.embedders.get_embedder``.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Anything that maps texts to L2-normalised float32 vectors of a fixed size.

    ``name`` and ``revision`` key the cache: a change of either means different vectors.
    """

    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows L2-normalised."""
        ...


def normalize(vecs: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    v = np.asarray(vecs, dtype=np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)


def sorted_by_length(texts: Sequence[str]) -> np.ndarray:
    """The order that encodes ``texts`` longest first (stable)."""
    # Batches of similar length pad little, and the biggest batch (the memory peak) comes first.
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

        model = load_embedder(self.path, device=self.device)
        self.loaded = True
        return model

    loaded = False  # the model is in memory (``embed_texts`` reports a load as a step of its own)

    def load(self) -> None:
        """Load the model now (seconds: torch and the weights) rather than at the first encode."""
        self._model()

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = sorted_by_length(texts)
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
