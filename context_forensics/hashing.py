"""Content hashes with an algorithm tag, so a change of algorithm is detectable in the store."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import orjson

ALGO = "b2"


def _digest(data: bytes) -> str:
    return f"{ALGO}:{hashlib.blake2b(data, digest_size=16).hexdigest()}"


_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and compact separators: equal values give equal strings."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS, default=str).decode()
    except TypeError:  # e.g. non-string keys or integers beyond 64 bits
        return _CANONICAL.encode(obj)


def json_text(obj: Any) -> str:
    """Compact JSON text, fast (orjson) with the standard encoder as the fallback."""
    try:
        return orjson.dumps(obj, default=str).decode()
    except TypeError:
        return _COMPACT.encode(obj)


def content_hash(obj: Any) -> str:
    """Hash a string, or a JSON-able value canonically (sorted keys, compact separators)."""
    if not isinstance(obj, str):
        obj = canonical_json(obj)
    return _digest(obj.encode("utf-8", "surrogatepass"))


def file_hash(path: Path, chunk: int = 1 << 20) -> str:
    """Hash a file's bytes without reading it into memory at once."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return f"{ALGO}:{h.hexdigest()}"


def short_id(*parts: str, length: int = 12) -> str:
    """A short stable id from some strings (session ids)."""
    h = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=16)
    return h.hexdigest()[:length]
