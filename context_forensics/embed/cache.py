"""Cached embedding: each unique text encoded once per model, its vector kept by content hash.

Embedding is the dominant cost of every semantic analysis (MiniLM on 2 CPU cores encodes a few
thousand tokens a second), so it is never done twice. ``embed_texts`` dedupes texts by content
hash, reads cached vectors in bulk, encodes only the misses (longest first, in batches), and
writes them back in one transaction, also when interrupted. A warm run loads no model at all:
the cache key (hash, model name, model revision) is known from the model's files.
``EmbeddingCache`` is that cache: the store's ``embeddings`` table, or memory without a store.
``embed_chunks`` chunks messages (``chunking``) and embeds the chunks.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from ..hashing import content_hash
from .chunking import CHUNK_TOKENS, GROUP_TOKENS, ChunkedTexts, chunk_many
from .embedders import DEFAULT_BATCH_SIZE, Embedder, sorted_by_length
from .progress import ProgressFn, step as progress_step

if TYPE_CHECKING:  # pragma: no cover
    from ..store.db import Store


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
        _read_rows(self.store.db.conn, hashes, model, revision, dim, cutoff, found, expired)
        if _SHARED:  # a worker's private store misses: ask the driver's cache (read-only)
            rest = [h for h in hashes if h not in found and h not in expired]
            for shared in _SHARED:
                if rest:
                    shared.lookup(rest, model, revision, dim, cutoff, found, expired)
                    rest = [h for h in rest if h not in found and h not in expired]
        return found, expired

    def new_rows(self) -> list[tuple]:
        """Every vector row of this cache's store: (hash, model, revision, dim, vector, created_at).
        On a worker's private store these are the vectors the worker encoded (hits on the
        driver's cache are not copied into it), which go back to the driver's cache."""
        if self.store is None:
            return []
        return [tuple(r) for r in self.store.db.conn.execute(
            "SELECT hash, model, revision, dim, vector, created_at FROM embeddings").fetchall()]

    def put_rows(self, rows: Sequence[tuple]) -> int:
        """Store rows of ``new_rows`` (a worker's encodings) in one transaction; return rows written."""
        if not rows or self.store is None:
            return 0
        sql = ("INSERT OR REPLACE INTO embeddings (hash, model, revision, dim, vector, created_at) "
               "VALUES (?, ?, ?, ?, ?, ?)")
        if not self.store.write_rows(sql, list(rows)):
            self.write_failed = True
            return 0
        return len(rows)

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



_CHUNK = 500  # hashes per query


def _read_rows(conn: Any, hashes: Sequence[str], model: str, revision: str, dim: int | None, cutoff: str | None,
               found: dict[str, np.ndarray], expired: set[str]) -> None:
    """The cached vectors of ``hashes`` on an SQLite connection, into ``found`` (and the expired
    ones into ``expired``): one query per 500 hashes, one frombuffer per row size."""
    for i in range(0, len(hashes), _CHUNK):
        part = hashes[i : i + _CHUNK]
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


class SharedCache:
    """The driver's embedding cache, read-only, for a worker whose private store misses
    (``shared_cache``): the store file at ``path`` when the worker can open it (the same
    machine), else nothing (the worker encodes, and its vectors go back to the driver)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._conn: Any = None
        self.reachable = False
        if path:
            import os
            import sqlite3

            if os.path.isfile(path):
                try:
                    self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
                    self._conn.execute("SELECT 1 FROM embeddings LIMIT 1").fetchall()
                    self.reachable = True
                except sqlite3.Error:
                    self._conn = None

    def lookup(self, hashes: Sequence[str], model: str, revision: str, dim: int | None, cutoff: str | None,
               found: dict[str, np.ndarray], expired: set[str]) -> None:
        if self._conn is None:
            return
        import sqlite3

        try:
            _read_rows(self._conn, hashes, model, revision, dim, cutoff, found, expired)
        except sqlite3.Error:  # busy or gone: the worker encodes instead
            pass

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


_SHARED: list[SharedCache] = []  # the caches a worker consults on a miss (``shared_cache``)


@contextmanager
def shared_cache(path: str | None) -> Iterator[SharedCache]:
    """While the block runs, every ``EmbeddingCache`` of this process also reads the driver's
    cache at ``path`` on a miss (read-only)."""
    shared = SharedCache(path)
    _SHARED.append(shared)
    try:
        yield shared
    finally:
        _SHARED.remove(shared)
        shared.close()

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
    ``progress(done, total)`` counts texts to encode (``total`` is 0 on a warm run), one report
    per batch; an embedder with a ``load()`` not yet ``loaded`` is loaded first, as a step of its
    own (``progress.step``), and only when something is to be encoded.
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
    load = getattr(embedder, "load", None)
    if total and load is not None and not getattr(embedder, "loaded", False):
        # the model load is a step of its own (seconds, no count), not 0 of the encoding
        with progress_step(progress, f"loading embedding model {embedder.name}"):
            load()
    if progress:
        progress(0, total)
    if total:
        step = max(1, int(batch_size or getattr(embedder, "batch_size", 0) or DEFAULT_BATCH_SIZE))
        order = [missing[k] for k in sorted_by_length([u_texts[j] for j in missing])]
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
