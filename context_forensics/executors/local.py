"""The executors of one machine: this process (``serial``) and spawned worker processes (``process``)."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..environ import handed
from .base import Executor, Outcome, TaskError, call, worker_setup


def default_workers() -> int:
    """A worker count for this machine: its cores, at most 4."""
    return max(1, min(4, os.cpu_count() or 1))


def _worker_start(handed: Mapping[str, str] | None) -> None:
    """A process worker ignores Ctrl-C: a terminal's SIGINT reaches the whole process group, and
    a worker it stopped printed its traceback (multiprocessing's), or cut a result it was writing
    in half. The driver that gets it cancels the pool and stops the workers itself (``cancel``)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker_setup(handed)


class SerialExecutor(Executor):
    """Each job in turn, in this process."""

    name = "serial"

    def run(self, fn: Callable[[Any], Any], jobs: Sequence[Any]) -> Iterator[Outcome]:
        for i, job in enumerate(jobs):
            value, error = call(fn, job)
            yield Outcome(i, value, error)


class ProcessExecutor(Executor):
    """The jobs in ``workers`` spawned processes, at most ``4 * workers`` queued at a time.

    A worker that dies (killed, out of memory) breaks the pool: the jobs it had in flight run
    again in a new one, each alone, so the job that kills its worker is the one charged; after
    ``max_retries`` such deaths it is an error (``WorkerDied``) and the others go on.
    """

    name = "process"

    def __init__(self, workers: int, *, max_retries: int = 3) -> None:
        super().__init__()
        self.workers = max(1, workers)
        self.max_retries = max_retries
        self._pool: Any = None

    def _new_pool(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: a parent that already loaded torch (or holds SQLite handles) must not
        # be forked — forked torch thread pools deadlock.
        # the workers take over what this process hands down (the notes it said), not through
        # the environment: that is the host's
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_start, initargs=(handed(),))

    def run(self, fn: Callable[[Any], Any], jobs: Sequence[Any]) -> Iterator[Outcome]:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        queue: deque[int] = deque(range(len(jobs)))
        suspects: set[int] = set()  # in flight when a worker died: run alone until they finish
        deaths = [0] * len(jobs)  # deaths while running alone: the job's own
        attempts = [0] * len(jobs)
        pending: dict[Any, int] = {}
        limit = 4 * self.workers
        while queue or pending:
            if self._pool is None:
                self._pool = self._new_pool()
            while queue and len(pending) < limit:
                solo = queue[0] in suspects
                if solo and pending:
                    break  # a suspect waits for an empty pool, and runs alone
                i = queue.popleft()
                attempts[i] += 1
                if attempts[i] > 1:
                    self.retries += 1
                pending[self._pool.submit(call, fn, jobs[i])] = i
                if solo:
                    break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken = False
            for fut in done:
                i = pending.pop(fut)
                try:
                    value, error = fut.result()
                except BrokenProcessPool:
                    broken = True
                    if i in suspects and len(done) == 1 and not pending:
                        deaths[i] += 1
                    if deaths[i] > self.max_retries:
                        why = (f"its worker process died {deaths[i]} times (killed, or out of memory?); "
                               f"given up after {self.max_retries} retries")
                        yield Outcome(i, None, TaskError("WorkerDied", why), attempts[i])
                        suspects.discard(i)
                    else:
                        suspects.add(i)
                        queue.appendleft(i)
                    continue
                suspects.discard(i)
                yield Outcome(i, value, error, attempts[i])
            if broken:  # every job still in flight in the broken pool runs again, alone
                for fut, i in pending.items():
                    suspects.add(i)
                    queue.appendleft(i)
                pending.clear()
                self._drop_pool()

    def _drop_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())  # no public way to stop them now
        results = getattr(pool, "_result_queue", None)  # shutdown forgets it
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        # A worker stopped while it wrote a result (Ctrl-C reaches the whole process group, or the
        # terminate above) leaves half a message in the result pipe: the pool's manager thread then
        # waits for the rest forever, and the interpreter's exit joins that thread, so an interrupted
        # audit never exits. With the workers gone, closing this process's copy of the pipe's write
        # end turns that wait into end-of-file: the thread finds the pool broken and ends.
        writer = getattr(results, "_writer", None)
        if writer is not None:
            writer.close()

    def cancel(self) -> None:
        self._drop_pool()

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
