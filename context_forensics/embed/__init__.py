"""Embeddings: chunking, the embedders (the packaged MiniLM loaded offline, a hashing stand-in),
the content-hash keyed cache, sub-sentence spans and similarity.

The modules, in the order they build on each other:

- ``chunking``: split a message into sentence-sized chunks (``chunk_text``, ``chunk_many``) with
  a tokenizer-free wordpiece estimate (``estimate_tokens``);
- ``spans``: the clauses and fact-sized windows inside a chunk (``sub_spans``);
- ``embedders``: the ``Embedder`` protocol, ``SentenceTransformerEmbedder`` (local files only;
  torch is imported at the first encode), ``HashingEmbedder`` for tests, ``get_embedder``;
- ``cache``: ``embed_texts`` (each unique text once, cached by content hash, model and
  revision in the store), ``EmbeddingCache``, ``EmbedStats``;
- ``similarity``: cosine as one matrix product, ``group_max`` per message.

Code that wants a stand-in embedder to take effect in tests looks ``get_embedder`` up in
``embed.embedders`` at call time (``from ..embed.embedders import get_embedder`` inside the
function); tests patch ``context_forensics.embed.embedders.get_embedder``.
"""

from .cache import EmbeddingCache, EmbedStats, ProgressFn, embed_chunks, embed_texts
from .chunking import (
    CHUNK_TOKENS,
    GROUP_TOKENS,
    MAX_WORDPIECES,
    Chunk,
    ChunkedTexts,
    chunk_many,
    chunk_text,
    estimate_tokens,
)
from .embedders import (
    DEFAULT_BATCH_SIZE,
    Embedder,
    HashingEmbedder,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    get_embedder,
    normalize,
)
from .similarity import group_max, similarity
from .spans import edge_words, has_clause_cut, sub_spans, word_count

__all__ = [
    "CHUNK_TOKENS",
    "DEFAULT_BATCH_SIZE",
    "GROUP_TOKENS",
    "MAX_WORDPIECES",
    "Chunk",
    "ChunkedTexts",
    "EmbedStats",
    "Embedder",
    "EmbeddingCache",
    "HashingEmbedder",
    "OnnxEmbedder",
    "ProgressFn",
    "SentenceTransformerEmbedder",
    "chunk_many",
    "chunk_text",
    "edge_words",
    "embed_chunks",
    "embed_texts",
    "estimate_tokens",
    "get_embedder",
    "group_max",
    "has_clause_cut",
    "normalize",
    "similarity",
    "sub_spans",
    "word_count",
]
