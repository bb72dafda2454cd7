"""How the analyses report progress: counts, and a step with no count (a model load).

A progress sink is a callable ``progress(done, total)``. A sink may also have ``step(label)``, a
context manager around a piece of work that has no count, such as loading the embedding model:
``step`` reports it to such a sink and does nothing for a plain callable, so a ``lambda`` stays a
valid sink. ``part`` and ``steps_only`` adapt a sink for an inner call: the inner call's counts
mapped into the whole, or dropped (its steps still shown). The sinks themselves (a bar on a
terminal, heartbeat lines elsewhere) live in ``render.progress``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any, Callable

# (done, total): how the analyses report progress.
ProgressFn = Callable[[int, int], None]


def step(progress: ProgressFn | None, label: str) -> AbstractContextManager[Any]:
    """A context manager reporting ``label`` as a step of its own to a sink that shows steps."""
    fn = getattr(progress, "step", None)
    return fn(label) if fn is not None else nullcontext()


class _Adapted:
    """A sink that passes its steps on and maps (or drops) its counts."""

    def __init__(self, progress: ProgressFn, count: Callable[[int, int], tuple[int, int] | None]) -> None:
        self.progress = progress
        self.count = count

    def __call__(self, done: int, total: int) -> None:
        mapped = self.count(done, total)
        if mapped is not None:
            self.progress(*mapped)

    def step(self, label: str) -> AbstractContextManager[Any]:
        return step(self.progress, label)


def part(progress: ProgressFn | None, before: int, size: int, whole: int) -> ProgressFn | None:
    """The sink for an inner call that handles ``size`` items after ``before`` of ``whole``.

    The inner call counts only the items it still has to do (``embed_texts``: the cache misses),
    so the ``size - total`` others count as done from its first report on.
    """
    if progress is None:
        return None
    return _Adapted(progress, lambda done, total: (before + size - total + done, whole))


def steps_only(progress: ProgressFn | None) -> ProgressFn | None:
    """The sink for an inner call whose counts are not the whole's (its steps still shown)."""
    if progress is None:
        return None
    return _Adapted(progress, lambda done, total: None)
