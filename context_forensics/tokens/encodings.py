"""The BPE encodings every counter shares: loaded once per process, quicktok's when installed.

``load_encoding`` gives quicktok's encoding (parallel batch counting) when quicktok is installed
and has it, else tiktoken's from the offline assets; the config tokenizers (``tokenizers``) and
the Claude stand-in (``claude_standin``) count with the same loaded object.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

_LOCK = threading.Lock()
_LOADED: dict[str, tuple[Any, bool]] = {}


def load_encoding(name: str) -> tuple[Any, bool]:
    """``(encoding, is_quicktok)`` for an encoding name such as ``o200k_base``."""
    with _LOCK:
        if name not in _LOADED:
            try:
                import quicktok

                _LOADED[name] = (quicktok.get_encoding(name), True)
            except Exception:  # noqa: BLE001 - not installed, or lacks this encoding: tiktoken
                from .assets import get_encoding

                _LOADED[name] = (get_encoding(name), False)
        return _LOADED[name]


def no_surrogates(text: str) -> str:
    """What tiktoken does with text it cannot encode: lone surrogates become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


# quicktok counts a batch on threads of its own (``threads=0``: one per core), started on each
# call: ~100 µs, more than a small batch costs on one thread (measured here, 2 cores: 50 texts of
# 300 characters 244 µs on all cores, 103 µs on one; 500 of them, 150 KB, 1,338 µs against
# 1,606 µs). So a batch under PARALLEL_CHARS characters is counted on this thread, a larger one
# on all cores; a worker of the process or Ray executor, whose one CPU is its own, counts on one
# thread always (``CTXF_COUNT_THREADS=1``, set by ``executors.worker_setup``), or two workers
# would fight over each other's cores.
PARALLEL_CHARS = 128_000


def _count_threads(texts: Sequence[str]) -> int:
    """quicktok's ``threads`` for this batch: 1 (this thread) or 0 (one per core)."""
    if os.environ.get("CTXF_COUNT_THREADS") == "1":
        return 1
    total = 0
    for t in texts:
        total += len(t)
        if total >= PARALLEL_CHARS:
            return 0
    return 1

