"""Where the audit's per-session jobs run: ``run_serial`` for a store only this process can open
(``:memory:``); everything else goes through ``context_forensics.executors`` (serial, worker
processes, Ray), whose ``default_workers`` this re-exports."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ...executors import default_workers

J = TypeVar("J")
R = TypeVar("R")
Progress = Callable[[int, int], None]

__all__ = ["default_workers", "run_serial"]


def run_serial(fn: Callable[[J], R], jobs: Sequence[J], progress: Progress | None = None) -> list[R]:
    """Each job in turn, in this process."""
    done: list[R] = []
    if progress:
        progress(0, len(jobs))
    for i, job in enumerate(jobs):
        done.append(fn(job))
        if progress:
            progress(i + 1, len(jobs))
    return done
