"""Executors: how the audit's per-session jobs run, in this process or in worker processes.

An executor maps a job function over jobs and returns the results in job order, calling
``progress(done, total)`` before the first job starts and as each one finishes. A session's
audit is a pure function of its job (store file, session id, config, rules), so the process
executor only needs the function and the jobs to pickle; a distributed engine is one more
executor of the same shape.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

J = TypeVar("J")
R = TypeVar("R")
Progress = Callable[[int, int], None]
Executor = Callable[[Callable[[J], R], Sequence[J], "Progress | None"], list[R]]


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


def run_processes(fn: Callable[[J], R], jobs: Sequence[J], progress: Progress | None = None, *,
                  workers: int) -> list[R]:
    """The jobs in ``workers`` spawned processes; results in job order."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    done: list[R] = []
    # spawn, not fork: a parent that already loaded torch (or holds SQLite handles) must not
    # be forked — forked torch thread pools deadlock.
    ctx = multiprocessing.get_context("spawn")
    if progress:
        progress(0, len(jobs))
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for i, res in enumerate(pool.map(fn, jobs)):  # map keeps the input order
            done.append(res)
            if progress:
                progress(i + 1, len(jobs))
    return done


def executor_for(workers: int, n_jobs: int) -> Executor:
    """Worker processes when there are several workers and several jobs, else this process."""
    if workers > 1 and n_jobs > 1:
        return functools.partial(run_processes, workers=workers)
    return run_serial


def default_workers() -> int:
    """A worker count for this machine: its cores, at most 4."""
    return max(1, min(4, os.cpu_count() or 1))
