"""The process environment, changed only for a block: what ctxf needs set while a library reads it.

Libraries ctxf loads read switches from the environment once, when they are imported
(onnxruntime's ``ORT_DISABLE_TELEMETRY``, huggingface_hub's ``HF_HUB_OFFLINE`` and telemetry
switch, matplotlib's ``MPLCONFIGDIR``). ctxf is also a library, imported into notebooks, test suites
and the pytest plugin: it sets those switches for the import (``scoped``) and leaves the
environment as it found it, never for the rest of its host's life.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

_LOCK = threading.RLock()  # one block at a time: another thread's block must not restore ours


@contextmanager
def scoped(force: Mapping[str, str] | None = None, default: Mapping[str, str] | None = None) -> Iterator[None]:
    """In the block, ``force``'s variables are set and ``default``'s are set where unset; after
    it, every one of them is as it was (unset again when it was unset)."""
    force, default = dict(force or {}), dict(default or {})
    with _LOCK:
        saved = {k: os.environ.get(k) for k in (*force, *default)}
        os.environ.update(force)
        for k, v in default.items():
            os.environ.setdefault(k, v)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
