"""Embedders: what maps texts to unit vectors, and the one the config names.

``Embedder`` is the protocol every analysis takes (``name`` and ``revision`` key the cache).
``SentenceTransformerEmbedder`` is a sentence-transformers model from local files on torch, the
packaged all-MiniLM-L6-v2 by default (``tokens.assets`` finds and loads it offline);
``OnnxEmbedder`` is the same model on ONNX Runtime (``onnx_backend``: exported once into ctxf's
cache, verified by hash, run without torch), falling back to torch with a one-line note when the
export cannot be made or used. Constructing either loads nothing, and ``revision`` and ``dim``
come from the model's files, so a fully cached run never imports torch, sentence-transformers or
onnxruntime. The backend is part of ``revision``: vectors of the two backends never mix in the
cache. ``HashingEmbedder`` is a deterministic, dependency-free stand-in for tests.
``get_embedder`` turns the ``embedding.model`` and ``embedding.backend`` config values into an
embedder: commands look it up here, lazily, so tests can swap in a stand-in by patching
``context_forensics.embed.embedders.get_embedder``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from ..config.schema import EMBEDDING_BACKENDS


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
# ONNX Runtime: texts per encode call; the encoder splits a call by a token budget
# (onnx_backend.TOKEN_BUDGET), so short texts run in big batches and long chunks in small ones.
ONNX_BATCH_SIZE = 128
BACKENDS = EMBEDDING_BACKENDS  # auto, onnx, torch (the config key embedding.backend)


def set_torch_threads() -> None:
    """torch's intra-op threads: the CPUs this process may use, 1 in an executor's worker
    (``OMP_NUM_THREADS=1``), as ONNX Runtime's (``onnx_backend.usable_cpus``)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    from .onnx_backend import usable_cpus

    n = usable_cpus()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


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
        set_torch_threads()
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


class OnnxEmbedder:
    """The model of a ``SentenceTransformerEmbedder`` on ONNX Runtime (``onnx_backend``).

    Same name and dim; ``revision`` is the model's plus the export recipe, so its vectors are
    cached apart from torch's. ``load`` verifies (or makes) the export; when that fails it says so
    in one line on stderr and the embedder becomes the torch one, revision included.
    """

    backend = "onnx"

    def __init__(self, model: str | Path | None = None, *, batch_size: int = ONNX_BATCH_SIZE,
                 token_budget: int | None = None, torch: SentenceTransformerEmbedder | None = None) -> None:
        self.torch = torch if torch is not None else SentenceTransformerEmbedder(model)
        self.path, self.name = self.torch.path, self.torch.name
        self.batch_size = batch_size
        self.token_budget = token_budget
        self._encoder: Any = None
        self.fallback_reason: str | None = None

    @property
    def revision(self) -> str:
        from .onnx_backend import RECIPE

        if self.fallback_reason is not None:
            return self.torch.revision
        return f"{self.torch.revision}+{RECIPE}"

    @property
    def dim(self) -> int:
        return self.torch.dim

    @property
    def loaded(self) -> bool:
        return self._encoder is not None or self.torch.loaded

    def load(self) -> None:
        """Verify (or make) the export and open it; on failure, load torch instead (a note on stderr)."""
        if self.loaded:
            return
        try:
            self._encoder = _onnx_encoder(self.path, self.name, self.torch.revision)
        except Exception as e:  # any failure of the fast path leaves the exact one (torch) working
            self.fallback_reason = f"{type(e).__name__}: {e}"
            print(f"note: embedding on torch: the ONNX Runtime backend of {self.name} is unusable "
                  f"({self.fallback_reason})", file=sys.stderr, flush=True)
            self.batch_size = DEFAULT_BATCH_SIZE
            self.torch.load()

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        if self._encoder is None:
            return self.torch.encode(texts)
        from .onnx_backend import TOKEN_BUDGET

        return self._encoder.encode(texts, token_budget=self.token_budget or TOKEN_BUDGET)

    def __repr__(self) -> str:
        return f"OnnxEmbedder({self.name!r}, path={str(self.path)!r})"


_onnx_encoders: dict[tuple[str, str, str, int, str], Any] = {}  # ... and the export's folder
_onnx_lock = threading.Lock()


def _onnx_encoder(path: Path, name: str, revision: str) -> Any:
    """One ``OnnxEncoder`` per model, revision and thread count in a process: the export is
    verified (sha256 of the graph) and the session made once, not once per session an audit
    or a sweep embeds for (each time 0.14 s to open the session and 0.05 s to hash the
    graph: 110 times in a corpus audit, profiled)."""
    from .onnx_backend import OnnxEncoder, export_dir, usable_cpus

    threads = usable_cpus()
    key = (str(path), name, revision, threads, str(export_dir(name, revision)))
    with _onnx_lock:
        enc = _onnx_encoders.get(key)
        if enc is None:
            enc = _onnx_encoders[key] = OnnxEncoder(path, name, revision, threads=threads)
        return enc


def choose_backend(model: str | Path | None = None, backend: str = "auto", *,
                   torch: SentenceTransformerEmbedder | None = None) -> tuple[str, str | None]:
    """(``"onnx"`` or ``"torch"``, why not onnx) for a config's ``embedding.backend``, loading
    nothing. auto is onnx when onnxruntime is importable and the export exists or can be made."""
    from ..errors import UsageError

    if backend not in BACKENDS:
        raise UsageError(f"unknown embedding backend {backend!r}", hint="allowed: " + ", ".join(BACKENDS))
    if backend == "torch":
        return "torch", "embedding.backend is torch"
    from .onnx_backend import backend_status

    probe = torch if torch is not None else SentenceTransformerEmbedder(model)
    why = backend_status(probe.path, probe.revision, probe.name)
    if why is None:
        return "onnx", None
    if backend == "onnx":
        raise UsageError(f"embedding.backend is onnx but {probe.name} cannot run on ONNX Runtime: {why}",
                         hint="pip install onnxruntime, or set embedding.backend: auto (or torch)")
    return "torch", why


def get_embedder(model: str | Path | None = None, backend: str | None = None,
                 **kwargs: Any) -> SentenceTransformerEmbedder | OnnxEmbedder:
    """The embedder for the ``embedding.model`` and ``embedding.backend`` config values (cheap;
    loads nothing yet). ``$CTXF_EMBEDDING_BACKEND``, when set, overrides ``backend`` (as an
    environment variable overrides the config file); neither set is auto."""
    backend = os.environ.get("CTXF_EMBEDDING_BACKEND") or backend or "auto"
    if kwargs.get("device", "cpu") != "cpu":  # ONNX Runtime runs here on the CPU only
        backend = "torch" if backend == "auto" else backend
    st = SentenceTransformerEmbedder(model, **kwargs)
    chosen, _ = choose_backend(model, backend, torch=st)
    return OnnxEmbedder(model, torch=st) if chosen == "onnx" else st


def embedder_for(cfg: Any) -> SentenceTransformerEmbedder | OnnxEmbedder:
    """``get_embedder`` for a loaded config's ``embedding`` section (looked up at call time, so a
    test's stand-in for ``get_embedder`` applies here too)."""
    return sys.modules[__name__].get_embedder(cfg.embedding.model, backend=cfg.embedding.backend)
