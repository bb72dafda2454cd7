"""The BPE encodings every counter shares: loaded once per process, quicktok's when installed.

``load_encoding`` gives quicktok's encoding (parallel batch counting) when quicktok is installed
and has it, else tiktoken's from the offline assets; the config tokenizers (``tokenizers``) and
the Claude stand-in (``claude_standin``) count with the same loaded object.
"""

from __future__ import annotations

import threading
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
