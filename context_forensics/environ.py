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
        saved: dict[str, str | None] = {k: os.environ.get(k) for k in (*force, *default)}
        os.environ.update(force)
        for k, v in default.items():
            os.environ.setdefault(k, v)
        try:
            yield
        finally:
            for k, old in saved.items():
                if old is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = old


@contextmanager
def kept() -> Iterator[None]:
    """In the block, a library ctxf imports or starts may set what it likes (Ray sets
    ``RAY_CLIENT_MODE`` when imported and ``PYTHONBREAKPOINT`` when started); after it, the
    environment is as it was, every variable added removed and every one changed restored."""
    with _LOCK:
        saved = dict(os.environ)
        try:
            yield
        finally:
            for k in [k for k in os.environ if k not in saved]:
                os.environ.pop(k, None)
            for k, v in saved.items():
                if os.environ.get(k) != v:
                    os.environ[k] = v


# ---------------------------------------------------------------- handed down to workers
#
# What a worker process ctxf starts (the process and Ray executors') takes over from the process
# that started it, such as the notes already said (``store.connection.notice_once``). It is kept
# here, not in ``os.environ``, which is the host's: the executors hand it to their workers.

_HANDED: dict[str, str] = {}


def handed_down(name: str) -> str | None:
    """The value ``name`` has in this process, set here (``hand_down``) or taken over from the
    process that started this worker; None when it has none."""
    return _HANDED.get(name)


def hand_down(name: str, value: str) -> None:
    """Give ``name`` the value ``value`` here and in the workers ctxf starts from now on."""
    _HANDED[name] = value


def handed() -> dict[str, str]:
    """Everything a new worker takes over (``take_over`` in the worker)."""
    return dict(_HANDED)


def take_over(values: Mapping[str, str] | None) -> None:
    """In a worker: what the process that started it handed down (``handed``)."""
    _HANDED.update(values or {})
