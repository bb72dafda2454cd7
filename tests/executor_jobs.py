"""Job functions for the executor tests: module-level, so spawned processes and Ray workers
import them (tests/ is on their path)."""

from __future__ import annotations

import os
from pathlib import Path


def square(x: int) -> int:
    if x == 3:
        raise ValueError("three is refused")
    return x * x


def die_once(job: tuple[str, int]) -> int:
    """Kill this worker process the first time job ``n`` runs (a marker file remembers), then
    answer: the executor must run it again and count the retry."""
    marker, n = job
    mark = Path(marker) / f"ran-{n}"
    if n == 1 and not mark.exists():
        mark.write_text("killed")
        os.kill(os.getpid(), 9)
    return n * 10


def always_die(n: int) -> int:
    if n == 0:
        os.kill(os.getpid(), 9)
    return n


def thread_settings(_: int) -> tuple[str | None, str | None, int]:
    """What a worker counts tokens with: the one-thread switch, OMP's pool size, and the threads
    quicktok is given for a small batch."""
    from context_forensics.tokens.encodings import _count_threads

    return os.environ.get("CTXF_COUNT_THREADS"), os.environ.get("OMP_NUM_THREADS"), _count_threads(["x" * 200_000])


def say_notes(keys: list[str]) -> list[str]:
    """The notes this worker says for ``keys`` (``notice_once``): the ones its parent did not say."""
    from context_forensics.store import connection

    said: list[str] = []
    for key in keys:
        connection.notice_once(said.append, key, key)
    return said


def sigint_ignored(_: int) -> bool:
    """Whether this worker ignores Ctrl-C's SIGINT."""
    import signal

    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN
