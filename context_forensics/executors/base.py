"""What every executor shares: the outcome of a job, the error of one that raised, job order."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..environ import take_over

EXECUTORS = ("serial", "process", "ray")


@dataclass(frozen=True)
class TaskError:
    """Why a job has no result: the exception it raised (type, message, the worker's traceback),
    or its worker died more often than the executor retries (``type`` ``WorkerDied``)."""

    type: str
    message: str
    traceback: str = ""

    @classmethod
    def of(cls, e: BaseException) -> TaskError:
        return cls(type(e).__name__, str(e), "".join(traceback.format_exception(e)))

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


@dataclass
class Outcome:
    """One finished job: its index in the job list, and its value or its error."""

    index: int
    value: Any = None
    error: TaskError | None = None
    attempts: int = 1  # runs of the job (more than 1: its worker died and it was retried)


def call(fn: Callable[[Any], Any], job: Any) -> tuple[Any, TaskError | None]:
    """Run one job where an executor runs it: an exception is the job's error, not the worker's
    end (Ctrl-C and exits still propagate)."""
    try:
        return fn(job), None
    except Exception as e:  # noqa: BLE001 - any failure of one job is that job's error row
        return None, TaskError.of(e)


# Thread pools a worker's libraries would size to the whole machine (read when they load).
_POOL_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS")


def worker_setup(handed: Mapping[str, str] | None = None) -> None:
    """A worker of the process or Ray executor owns one CPU: its token counter, and the thread
    pools of the libraries it loads later (torch for the embedder, BLAS), use one thread, so two
    workers on two cores do not each start threads on both (a setting the user made stands).
    ``handed``: what the process that started it handed down (``environ.handed``: the notes it
    said). The worker's environment is ctxf's own to set; its host's never is."""
    import sys

    take_over(handed)
    os.environ["CTXF_COUNT_THREADS"] = "1"  # read by tokens.encodings on each batch
    for name in _POOL_ENV:
        os.environ.setdefault(name, "1")
    torch = sys.modules.get("torch")
    if torch is not None and os.environ.get("OMP_NUM_THREADS") == "1":
        torch.set_num_threads(1)


class Executor:
    """Runs a module-level function over jobs; ``run`` yields ``Outcome``s as jobs finish.

    ``name`` and ``workers`` describe it (for the report); ``retries`` counts the jobs run again
    after their worker died. Use it as a context manager: ``close`` frees its workers.
    """

    name = "executor"
    workers = 1
    address: str | None = None

    def __init__(self) -> None:
        self.retries = 0

    def run(self, fn: Callable[[Any], Any], jobs: Sequence[Any]) -> Iterator[Outcome]:
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop the jobs still queued or running (after Ctrl-C)."""

    def close(self) -> None:
        """Free the workers."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "workers": self.workers, "address": self.address}

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            self.cancel()
        self.close()


def in_order(outcomes: Iterable[Outcome]) -> Iterator[Outcome]:
    """The outcomes in job order, each as soon as every earlier one is in (a buffer holds the
    ones that finished early)."""
    waiting: dict[int, Outcome] = {}
    nxt = 0
    for out in outcomes:
        waiting[out.index] = out
        while nxt in waiting:
            yield waiting.pop(nxt)
            nxt += 1
    for i in sorted(waiting):  # an executor that skipped an index (cancelled): the rest, in order
        yield waiting[i]
