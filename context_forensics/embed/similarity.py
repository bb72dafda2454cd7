"""Similarity: cosine of unit vectors as one matrix product, and its reduction per message.

``similarity`` scores facts x chunks (or any two sets of rows) with no Python loop per pair;
``group_max`` reduces chunk scores to message scores, the best chunk of each message.
"""

from __future__ import annotations

import numpy as np


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
