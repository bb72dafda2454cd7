"""Executors: where the per-task work of an audit or an ingest runs, streamed back to one driver.

An executor runs a module-level function over jobs and yields an ``Outcome`` per job as each
one finishes (``run``), in completion order; ``in_order`` turns that stream back into job
order with a small buffer. A job that raises is an ``Outcome`` with a ``TaskError``, never the
end of the run; a worker that dies is retried (``Executor.retries`` counts the retries) up to
``max_retries`` times, then its job is an error too. ``cancel`` stops what is still queued or
running (Ctrl-C).

- ``serial``: each job in turn, in this process;
- ``process``: spawned worker processes on this machine (``--workers N``);
- ``ray``: Ray tasks, on a local Ray started with N CPUs or on the cluster at ``--ray-address``
  (the optional extra ``context-forensics[ray]``; ``ray`` is imported only here, when chosen).

>>> with make_executor("process", workers=2) as ex:
...     for out in in_order(ex.run(fn, jobs)):
...         print(out.index, out.value or out.error)
"""

from __future__ import annotations

from .base import EXECUTORS, Executor, Outcome, TaskError, in_order
from .local import ProcessExecutor, SerialExecutor, default_workers

__all__ = ["EXECUTORS", "Executor", "Outcome", "ProcessExecutor", "SerialExecutor", "TaskError",
           "default_workers", "in_order", "make_executor"]


def make_executor(name: str, *, workers: int | None = None, ray_address: str | None = None,
                  max_retries: int = 3) -> Executor:
    """The executor ``name`` (``serial``, ``process`` or ``ray``).

    ``workers``: processes for ``process`` (default: this machine's cores, at most 4); the CPUs
    of a local Ray for ``ray`` (default: this machine's). ``ray_address`` joins a running Ray
    cluster (``auto``: the one this job runs in); only for ``ray``. A missing ``ray`` package is
    a ``UsageError`` naming the install command.
    """
    from ..errors import UsageError

    if name not in EXECUTORS:
        raise UsageError(f"unknown executor {name!r}", hint="use one of: " + ", ".join(EXECUTORS))
    if ray_address is not None and name != "ray":
        raise UsageError("--ray-address is for --executor ray", hint="add --executor ray, or drop --ray-address")
    if name == "serial":
        return SerialExecutor()
    if name == "process":
        return ProcessExecutor(workers or default_workers(), max_retries=max_retries)
    from .ray_backend import RayExecutor

    return RayExecutor(workers=workers, address=ray_address, max_retries=max_retries)
