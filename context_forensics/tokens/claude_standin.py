"""The Claude stand-in: o200k_base tokens, weighted by what each token is.

Anthropic publishes no tokenizer for Claude 3 and later. Counted with o200k_base, English prose
comes out at Claude's own size: the corpus' and llm-anthropic's cassettes, whose exact request
and recorded ``input_tokens`` are both known, fit a scale of 1.00 on their prose prompts ("Two
names for a pet pelican, be brief" 10 -> 17 and "Say just hello" 3 -> 10 differ by exactly the
7 tokens of text between them), and Anthropic's own count_tokens examples agree. Code, paths,
JSON and tool output do not: over the OpenHands logs (Claude 3.5 Sonnet, whole requests logged)
one flat scale needs 1.23. A vocabulary smaller than o200k's splits the same words but more of
everything else, so a token that is a plain word (letters, with or without its leading space)
counts 1 and any other token ``OTHER_SCALE``:

- ``WORD_SCALE`` 1.0: the prose cassettes (above);
- ``OTHER_SCALE`` 1.36: fitted on the OpenHands logs (64 calls, 4 sessions) with the word scale
  fixed at 1.0: their median error 0.84% (one flat scale: 2.5%). Fitted on two of the sessions
  (1.34, resp. 1.38), the other two come out at 1.1-2.3% median.

Over the Claude 4.x sessions that are calibrated (Pi, Cline, Claude Code: a hidden system prompt
and tools), the held-out calibrated error is about the same with either stand-in: 0.5-1.4% per
source with these weights, 0.4-1.4% with a flat 1.2 (Cline's Opus 4.6 session aside: 11% with
both), so those logs neither confirm nor refute the weights.

Measured and not adopted (bench/fidelity.py's sources, 2026-12): cl100k_base fits worse; the
Claude 2 vocabulary that old ``anthropic`` SDKs shipped (tokenizer.json, also inside the
``anthropic-tokenizer`` package) is no better than o200k on the same logs (1.7% median on
OpenHands at its best scale) and would add a dependency.
"""

from __future__ import annotations

import hashlib
import io
import re
import threading
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from .encodings import _count_threads, load_encoding, no_surrogates
from .labels import ESTIMATED

WORD_SCALE = 1.0
OTHER_SCALE = 1.36
ENCODING = "o200k_base"
_WORD = re.compile(rb" ?[A-Za-z]+")
_WORD_STR = re.compile(r" ?[A-Za-z]+")


def _word_mask(enc: Any) -> np.ndarray:
    """Which token ids are plain words. tiktoken: from its ranks (bytes -> id, 0.04 s); quicktok
    decodes the ordinary ids (0 .. n-1 in o200k) in one batch (0.2 s; a word is ASCII, so a lossy
    decode of a partial UTF-8 token never matches); otherwise, and for any id past them, one id at
    a time (0.5 s)."""
    n = int(enc.max_token_value) + 1
    word = np.zeros(n, dtype=bool)
    ranks = getattr(enc, "_mergeable_ranks", None)
    if isinstance(ranks, dict):
        match = _WORD.fullmatch
        for b, i in ranks.items():
            if match(b) is not None:
                word[i] = True
        return word
    start = 0
    if hasattr(enc, "token_byte_values") and hasattr(enc, "decode_batch"):
        try:
            m = len(enc.token_byte_values())
            texts = enc.decode_batch([[i] for i in range(m)])
        except Exception:  # noqa: BLE001 - an id in 0..m-1 that is not ordinary: the slow path
            m, texts = 0, None
        if texts is not None and len(texts) == m:
            match_str = _WORD_STR.fullmatch
            word[:m] = np.fromiter((match_str(t) is not None for t in texts), dtype=bool, count=m)
            start = m
    for i in range(start, n):
        try:
            b = enc.decode_single_token_bytes(i)
        except Exception:  # noqa: BLE001 - an id with no bytes (a gap, a special token)
            continue
        word[i] = _WORD.fullmatch(b) is not None
    return word


def cached_word_mask(enc: Any, fast: bool) -> np.ndarray:
    """``_word_mask(enc)``, kept in ctxf's cache folder for quicktok's encoding (0.37 s to derive
    there, 0.25 ms to read, measured) as ``<cache>/tokens/word-mask-o200k_base-quicktok-VERSION-
    N-SHA.npy``, the sha256 of the mask in its name checked on every read (a file that does not
    match is made again). tiktoken's path derives it from its ranks in 0.04 s: not cached."""
    if not fast:
        return _word_mask(enc)
    from .assets import atomic_target, cache_dir

    try:
        import quicktok

        version = str(getattr(quicktok, "__version__", "0"))
    except ImportError:  # pragma: no cover - fast means quicktok loaded
        version = "0"
    n = int(enc.max_token_value) + 1
    stem = f"word-mask-{ENCODING}-quicktok-{version}-{n}-"
    try:
        folder = cache_dir() / "tokens"
    except (OSError, RuntimeError):  # no home folder to put a cache in: derive it each time
        return _word_mask(enc)
    try:
        for path in folder.glob(stem + "*.npy"):
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest()[:16] == path.stem[len(stem):]:
                mask = np.load(io.BytesIO(data), allow_pickle=False)
                if mask.dtype == bool and mask.shape == (n,):
                    return mask
    except (OSError, ValueError):
        pass
    mask = _word_mask(enc)
    try:
        buf = io.BytesIO()
        np.save(buf, mask, allow_pickle=False)
        data = buf.getvalue()
        with atomic_target(folder / f"{stem}{hashlib.sha256(data).hexdigest()[:16]}.npy") as tmp:
            tmp.write_bytes(data)
    except OSError:  # a read-only cache folder: derived again next time
        pass
    return mask


class ClaudeStandIn:
    """Counts like ``tokenizers.Tokenizer`` for the ``claude`` config name: estimated counts,
    o200k_base tokens weighted by ``WORD_SCALE`` (plain words) and ``OTHER_SCALE`` (the rest)."""

    name = "claude"
    encoding = ENCODING
    kind = ESTIMATED
    status = "stand-in"
    scale = None  # per token class, see the module docstring
    exact = False
    unverified = False
    own_vocabulary = False
    vocabulary = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._enc: Any = None
        self._fast = False
        self._word: np.ndarray | None = None

    @property
    def key(self) -> str:
        """Cache key part: the name, the encoding and both scales (a change never reuses a sum)."""
        return f"claude~{ENCODING}*w{WORD_SCALE:g}/o{OTHER_SCALE:g}"

    def _backend(self) -> tuple[Any, np.ndarray]:
        with self._lock:
            if self._enc is None:  # the o200k tokenizer's own encoding (encodings.py): loaded once for both
                enc, self._fast = load_encoding(ENCODING)
                self._enc, self._word = enc, cached_word_mask(enc, self._fast)
            return self._enc, self._word  # type: ignore[return-value]

    def _ids(self, enc: Any, texts: list[str]) -> list[np.ndarray]:
        if self._fast:
            threads = _count_threads(texts)  # this thread for a small batch, as tokenizers does
            try:
                tokens, offsets = enc.encode_batch(texts, threads)
            except (TypeError, UnicodeError):
                tokens, offsets = enc.encode_batch([no_surrogates(t) for t in texts], threads)
            tokens, offsets = np.asarray(tokens, dtype=np.int64), np.asarray(offsets, dtype=np.int64)
            return [tokens[offsets[i]:offsets[i + 1]] for i in range(len(texts))]
        return [np.asarray(enc.encode_ordinary(no_surrogates(t)), dtype=np.int64) for t in texts]

    def count_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Weighted token counts of many texts, int64 (special-token text counts as plain text)."""
        texts = list(texts)
        if not texts:
            return np.zeros(0, dtype=np.int64)
        enc, word = self._backend()
        out = np.empty(len(texts), dtype=np.int64)
        for i, ids in enumerate(self._ids(enc, texts)):
            w = int(word[ids].sum()) if len(ids) else 0
            out[i] = int(np.rint(WORD_SCALE * w + OTHER_SCALE * (len(ids) - w)))
        return out

    def count(self, text: str) -> int:
        return int(self.count_batch([text])[0]) if text else 0

    def __repr__(self) -> str:
        return f"ClaudeStandIn(encoding={ENCODING!r}, word={WORD_SCALE:g}, other={OTHER_SCALE:g})"


@cache
def claude_standin() -> ClaudeStandIn:
    """The shared Claude stand-in counter."""
    return ClaudeStandIn()
