"""Tokenizers by config name: the offline encodings, the stand-ins and the ``approx`` count.

A config tokenizer name (``config.TOKENIZERS``) maps to the encoding that counts it, whether
its counts are exact or an estimate, and the scale a stand-in's counts are multiplied by.
``Tokenizer.count_batch`` is the one path to an encoder (quicktok's parallel counter when it
is installed, tiktoken otherwise, both from offline assets).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from ..errors import UsageError
from .labels import ESTIMATED, EXACT

# Config tokenizer name -> (encoding used, kind, scale). Claude's and Gemini's tokenizers are
# not published: they are counted with o200k_base, scaled by the recorded/computed ratio
# measured on the corpus (bench/fidelity.py: Claude 3.5 Sonnet in OpenHands 1.23-1.25,
# Claude 4.x in Claude Code 1.19-1.45 beside a hidden prefix; Gemini 3 Pro in mini-swe-agent
# 1.12-1.19). cl100k_base and llama3 fit no better once calibrated.
TOKENIZER_ENCODINGS: dict[str, tuple[str | None, str, float]] = {
    "o200k_base": ("o200k_base", EXACT, 1.0),
    "cl100k_base": ("cl100k_base", EXACT, 1.0),
    "llama3": ("llama3", EXACT, 1.0),
    "qwen3": ("qwen3", EXACT, 1.0),
    "claude": ("o200k_base", ESTIMATED, 1.2),
    "gemini": ("o200k_base", ESTIMATED, 1.15),
    "approx": (None, ESTIMATED, 1.0),
}


def _no_surrogates(text: str) -> str:
    # What tiktoken does with text it cannot encode: lone surrogates become U+FFFD.
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _approx_count(text: str) -> int:
    # ~4 bytes of UTF-8 per token: right for English prose, conservative for CJK.
    return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4


class Tokenizer:
    """Counts tokens for one config tokenizer name; ``kind`` says whether counts are exact.

    A stand-in (``claude``, ``gemini``) scales its encoding's counts by ``scale``.
    ``count_batch`` is the only path to the encoder (quicktok's parallel counter when
    installed, tiktoken otherwise), which keeps caching testable: a spy on it sees every
    tokenizer call.
    """

    def __init__(self, name: str) -> None:
        if name not in TOKENIZER_ENCODINGS:
            raise UsageError(
                f"unknown tokenizer {name!r}", hint="known: " + ", ".join(TOKENIZER_ENCODINGS)
            )
        self.name = name
        self.encoding, self.kind, self.scale = TOKENIZER_ENCODINGS[name]
        self._lock = threading.Lock()
        self._fast: Any = None  # quicktok tokenizer
        self._slow: Any = None  # tiktoken Encoding

    @property
    def key(self) -> str:
        """Cache key part: the config name, plus the stand-in encoding when it is an estimate."""
        if self.encoding is None:
            return f"{self.name}~bytes4"
        if self.encoding == self.name:
            return self.name
        return f"{self.name}~{self.encoding}" + (f"*{self.scale:g}" if self.scale != 1 else "")

    @property
    def exact(self) -> bool:
        return self.kind == EXACT

    def _backend(self) -> tuple[Any, Any]:
        with self._lock:
            if self._fast is None and self._slow is None:
                try:
                    import quicktok

                    self._fast = quicktok.get_encoding(self.encoding)
                except Exception:  # noqa: BLE001 - not installed, or lacks this encoding: tiktoken
                    from .assets import get_encoding

                    self._slow = get_encoding(self.encoding)
            return self._fast, self._slow

    def count_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Token counts of many texts (special-token text counts as plain text), int64."""
        texts = list(texts)
        if not texts:
            return np.zeros(0, dtype=np.int64)
        if self.encoding is None:
            return np.fromiter((_approx_count(t) for t in texts), dtype=np.int64, count=len(texts))
        fast, slow = self._backend()
        if fast is not None:
            import quicktok

            try:
                counts = np.asarray(quicktok.count_batch(fast, texts), dtype=np.int64)
            except (TypeError, UnicodeError):  # lone surrogates (from \ud800-style JSON escapes)
                counts = np.asarray(quicktok.count_batch(fast, [_no_surrogates(t) for t in texts]),
                                    dtype=np.int64)
        else:
            counts = np.fromiter((len(slow.encode_ordinary(t)) for t in texts), dtype=np.int64,
                                 count=len(texts))
        if self.scale != 1:
            counts = np.rint(counts * self.scale).astype(np.int64)
        return counts

    def count(self, text: str) -> int:
        return int(self.count_batch([text])[0]) if text else 0

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r}, encoding={self.encoding!r}, kind={self.kind!r})"


@cache
def get_tokenizer(name: str) -> Tokenizer:
    """The shared ``Tokenizer`` for a config tokenizer name (see ``config.TOKENIZERS``)."""
    return Tokenizer(name)
