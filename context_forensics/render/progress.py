"""Progress bars on stderr for the long commands (ingest, embedding, the audit), only on a terminal.

The core reports ``progress(done, total)``; a ``ProgressBar`` is such a callback that draws a
transient rich bar on stderr, and nothing when stderr is not a terminal (a pipe, CI), so the
data on stdout and the messages on stderr stay clean.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from ..inert import inert


class ProgressBar:
    """A ``progress(done, total)`` callback drawing a transient bar on stderr, only on a terminal.

    The bar appears at the first report of something to do (``total`` > 0), so a step with
    nothing to do (a warm embedding cache) draws none. ``clock`` adds the elapsed or the
    remaining time; ``detail`` a column for what is being worked on (``file``).

    >>> with ProgressBar(stderr_console(), "embedding", clock="remaining") as progress:
    ...     track_facts(..., progress=progress)
    """

    def __init__(self, console: Console, label: str, *, clock: str | None = None, detail: bool = False) -> None:
        if clock not in (None, "elapsed", "remaining"):
            raise ValueError(f"clock must be 'elapsed', 'remaining' or None, not {clock!r}")
        self.console = console
        self.label = label
        self.clock = clock
        self.detail = detail
        self.bar: Any = None  # rich Progress, once started
        self.task: Any = None

    def __enter__(self) -> ProgressBar:
        return self

    def __call__(self, done: int, total: int, description: str = "") -> None:
        if not total or not self.console.is_terminal:
            return
        if self.bar is None:
            self._start()
        self.bar.update(self.task, completed=done, total=total, description=inert(description, newlines=False))

    def file(self, path: str, done: int, total: int) -> None:
        """The ingest's report: the file being read (its name is shown, inert: file names come
        from wherever the logs came from), how many are done."""
        self(done, total, Path(path).name if path else "")

    def _start(self) -> None:
        from rich.progress import (
            BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
        )

        columns: list[Any] = [TextColumn(self.label), BarColumn(), MofNCompleteColumn()]
        if self.clock == "elapsed":
            columns.append(TimeElapsedColumn())
        elif self.clock == "remaining":
            columns.append(TimeRemainingColumn())
        if self.detail:
            columns.append(TextColumn("{task.description}", markup=False))
        self.bar = Progress(*columns, console=self.console, transient=True)
        self.bar.start()
        self.task = self.bar.add_task("", total=None)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
