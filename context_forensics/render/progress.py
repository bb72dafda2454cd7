"""Progress on stderr for the long commands (ingest, embedding, the audit): a bar on a terminal,
a plain heartbeat line every 10 s elsewhere (CI), nothing on stdout.

The core reports ``progress(done, total)`` and, for work with no count (loading the embedding
model), ``progress.step(label)`` (``embed.progress``). A ``ProgressBar`` is such a sink. On a
terminal it draws a transient rich display: a line per step ("loading embedding model
all-MiniLM-L6-v2 …", then "done") and the bar of the count. When stderr is not a terminal it
draws nothing animated: while a step or a count runs it prints one line every
``HEARTBEAT_SECONDS`` ("ctxf facts: encoding 3,200/14,448 texts (22%), 41 s"), none in a run
shorter than that, and a last line for a step that had some. A background ticker prints them
also while the core is silent (a model load, a long batch); its time source can be replaced,
so the tests drive a fake clock.

A ``RunProgress`` is the sink of a run over many files whose sessions are counted as results
come back (the audit on workers): ``update(files_done=, files_total=, sessions=, failures=,
retries=)``, drawn as a bar on a terminal and as heartbeat lines elsewhere, with measured rates
and an ETA labelled as an estimate ("ETA ~3m 10s").
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.text import Text

from ..inert import inert

HEARTBEAT_SECONDS = 10.0  # between two heartbeat lines (and before the first)
TICK_SECONDS = 1.0  # how often the ticker thread looks at the clock; 0: no thread (tests)


def _now() -> float:
    return time.monotonic()


class _Running:
    """A step or a count being worked on, for the heartbeat."""

    def __init__(self, label: str, start: float, total: int | None = None) -> None:
        self.label = label
        self.start = start
        self.total = total
        self.done = 0
        self.description = ""
        self.beats = 0  # heartbeat lines printed about it
        self.said_done = -1  # ``done`` in the last of them


class _Ticking:
    """What both sinks share: the clock (replaceable), and off a terminal a background ticker
    that calls ``tick`` every ``TICK_SECONDS`` while the sink is open, so heartbeat lines come
    also while the core is silent. A sink sets ``_time``, ``terminal`` and ``interval``, and
    calls ``_init_ticking`` in its ``__init__``, ``_start_ticking`` on enter and
    ``_stop_ticking`` on exit."""

    _time: Callable[[], float] | None
    terminal: bool
    interval: float
    _thread_name = "ctxf-heartbeat"

    def _sink(self, console: Console, command: str, unit: str, heartbeat: float | None,
              time_source: Callable[[], float] | None) -> None:
        """The settings both sinks take (see ``ProgressBar``)."""
        self.console = console
        self.command = command
        self.unit = unit
        self.interval = HEARTBEAT_SECONDS if heartbeat is None else heartbeat
        self._time = time_source
        self.terminal = console.is_terminal
        self.bar: Any = None  # rich Progress, once started (a terminal only)

    def _init_ticking(self) -> None:
        self._lock = threading.RLock()
        self._last = self.now()  # the sink's start, then the last heartbeat line
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def now(self) -> float:
        return (self._time or _now)()

    def tick(self, now: float | None = None) -> None:
        raise NotImplementedError

    def _start_ticking(self) -> None:
        self._last = self.now()
        if not self.terminal and self.interval > 0 and TICK_SECONDS > 0:
            self._ticker = threading.Thread(target=self._loop, name=self._thread_name, daemon=True)
            self._ticker.start()

    def _loop(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self.tick()

    def _stop_ticking(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()


class ProgressBar(_Ticking):
    """A progress sink on stderr: a transient bar on a terminal, heartbeat lines elsewhere.

    ``progress(done, total)`` counts (the bar appears at the first report with something to do,
    so a warm embedding cache draws none); ``step(label)`` is a context manager around work with
    no count. ``clock`` adds the elapsed or the remaining time to the bar, ``detail`` a column for
    what is being worked on (``file``). ``command`` and ``unit`` word the heartbeat lines
    ("ctxf facts: encoding 3,200/14,448 texts (22%), 41 s"); ``time_source`` replaces the
    monotonic clock and ``heartbeat`` the interval (0: no heartbeat).

    >>> with ProgressBar(stderr_console(), "encoding", command="ctxf facts", unit="texts") as progress:
    ...     track_facts(..., progress=progress)
    """

    def __init__(self, console: Console, label: str, *, clock: str | None = None, detail: bool = False,
                 command: str = "ctxf", unit: str = "", heartbeat: float | None = None,
                 time_source: Callable[[], float] | None = None) -> None:
        if clock not in (None, "elapsed", "remaining"):
            raise ValueError(f"clock must be 'elapsed', 'remaining' or None, not {clock!r}")
        self.label = label
        self.clock = clock
        self.detail = detail
        self._sink(console, command, unit, heartbeat, time_source)
        self.task: Any = None  # the count's task in it
        self.lines: list[str] = []  # the heartbeat lines printed (for the tests)
        self._steps: list[_Running] = []  # the steps under way, innermost last
        self._count: _Running | None = None  # the count under way
        self._init_ticking()

    # the sink --------------------------------------------------------------------------------

    def __enter__(self) -> ProgressBar:
        self._start_ticking()
        return self

    def __call__(self, done: int, total: int, description: str = "") -> None:
        if not total:
            return
        with self._lock:
            if self.terminal:
                if self.bar is None:
                    self._start()
                if self.task is None:
                    self.task = self.bar.add_task("", total=total, label=self.label)
                self.bar.update(self.task, completed=done, total=total,
                                description=inert(description, newlines=False))
                return
            now = self.now()
            c = self._count
            if c is None or c.total != total or done < c.done:  # a new count (another call's)
                self._finish_count(now)
                c = self._count = _Running(self.label, now, total)
            c.done, c.description = done, description
            self.tick(now)
            if done >= total:
                self._finish_count(now)

    def doing(self, text: str) -> None:
        """What the count's current item is (the audit's rule and session): the count's description,
        shown with ``detail``."""
        with self._lock:
            text = inert(text, newlines=False)
            if self.terminal and self.bar is not None and self.task is not None:
                self.bar.update(self.task, description=text)
            elif self._count is not None:
                self._count.description = text

    def file(self, path: str, done: int, total: int) -> None:
        """The ingest's report: the file being read (its name is shown, inert: file names come
        from wherever the logs came from), how many are done."""
        self(done, total, Path(path).name if path else "")

    @contextmanager
    def step(self, label: str) -> Iterator[None]:
        """A step with no count (the model load): its own line on a terminal, "done" once over;
        heartbeat lines while it runs elsewhere."""
        label = inert(label, newlines=False)
        task = run = None
        with self._lock:
            if self.terminal:
                if self.bar is None:
                    self._start()
                task = self.bar.add_task("", total=None, label=label, state="…")
            else:
                run = _Running(label, self.now())
                self._steps.append(run)
        ok = False
        try:
            yield
            ok = True
        finally:
            with self._lock:
                if task is not None:
                    self.bar.update(task, state="done" if ok else "failed")
                    self.bar.stop_task(task)
                elif run is not None:
                    self._steps.remove(run)
                    now = self.now()
                    if ok and (run.beats or self._due(now)):  # a long step says when it is over
                        self._print(f"{self.command}: {run.label} done, {self._secs(now - run.start)}")

    def __exit__(self, *exc: object) -> None:
        self._stop_ticking()
        with self._lock:
            if self.bar is not None:
                self.bar.stop()
            if not exc[0]:
                self._finish_count(self.now())

    # the heartbeat ---------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> None:
        """Print a heartbeat line if one is due: ``interval`` seconds after the start or the
        last line, about the innermost step under way (or the count); nothing between steps."""
        if self.terminal or self.interval <= 0:
            return
        with self._lock:
            now = self.now() if now is None else now
            run = self._steps[-1] if self._steps else self._count
            if run is None or not self._due(now):
                return
            run.beats += 1
            run.said_done = run.done
            self._print(self._line(run, now))

    def _due(self, now: float) -> bool:
        return self.interval > 0 and now - self._last >= self.interval

    def _line(self, run: _Running, now: float) -> str:
        took = self._secs(now - run.start)
        if run.total is None:
            return f"{self.command}: {run.label} …, {took}"
        pct = 100 * run.done // run.total if run.total else 100
        unit = f" {self.unit}" if self.unit else ""
        what = f": {inert(run.description, newlines=False)}" if run.description and self.detail else ""
        return f"{self.command}: {run.label} {run.done:,}/{run.total:,}{unit} ({pct}%), {took}{what}"

    @staticmethod
    def _secs(seconds: float) -> str:
        return f"{max(0.0, seconds):.0f} s"

    def _print(self, line: str) -> None:
        self.lines.append(line)
        self._last = self.now()
        self.console.print(Text(line), soft_wrap=True, highlight=False)

    def _finish_count(self, now: float) -> None:
        c, self._count = self._count, None
        if c is not None and c.beats and c.done != c.said_done:  # its last state, unless just said
            self._print(self._line(c, now))

    # the terminal display --------------------------------------------------------------------

    def _start(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns: list[Any] = [TextColumn("{task.fields[label]}", markup=False),
                              _Counted(TextColumn("{task.fields[state]}", markup=False), steps=True),
                              _Counted(BarColumn()), _Counted(MofNCompleteColumn())]
        if self.clock == "elapsed":
            columns.append(TimeElapsedColumn())
        elif self.clock == "remaining":
            columns.append(_Counted(TimeRemainingColumn(), steps=TimeElapsedColumn()))
        if self.detail:
            columns.append(TextColumn("{task.description}", markup=False))
        self.bar = Progress(*columns, console=self.console, transient=True)
        self.bar.start()


class _Counted:
    """A column drawn for the count's task only (``steps=True``: for the steps' only; or another
    column for the steps), so a step with no count never reads "0/?"."""

    def __init__(self, column: Any, steps: Any = False) -> None:
        self.column = column
        self.steps = steps
        self.max_refresh = None

    def __call__(self, task: Any) -> Any:
        is_step = task.total is None
        if self.steps is True:
            return self.column(task) if is_step else Text("")
        if is_step:
            return self.steps(task) if self.steps else Text("")
        return self.column(task)

    def get_table_column(self) -> Any:
        return self.column.get_table_column()


# ---------------------------------------------------------------------------------------------
# the progress of a run over many files (the distributed audit)


def duration(seconds: float) -> str:
    """A duration in short words: "42s", "3m 10s", "2h 5m"."""
    s = int(max(0.0, seconds) + 0.5)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {s % 3600 // 60}m"


class RunProgress(_Ticking):
    """The progress sink of a run over many files whose sessions are counted as they come back
    (the audit on workers): on a terminal a transient bar (files done/total, sessions,
    sessions/s, ETA, failures, retries), elsewhere a heartbeat line every ``HEARTBEAT_SECONDS``
    and a last one at the end when any was printed:

        ctxf audit: 120/1,000 files, 1,410 sessions, 23.5 sessions/s, ETA ~6m 15s, 2 failed, 1 retried

    Rates are measured from the first ``update`` (call it with ``files_done=0`` when the tasks
    are submitted, so start-up is not counted) to the latest; the ETA is an estimate, labelled
    "~": the files left at the files rate so far. ``time_source`` replaces the monotonic clock
    and ``heartbeat`` the interval (0: no heartbeat), as for ``ProgressBar``.

    >>> with RunProgress(stderr_console()) as progress:
    ...     progress.update(files_done=0, files_total=len(sources), sessions=0)
    ...     for batch in finished(): progress.update(files_done=..., files_total=..., sessions=...)
    """

    def __init__(self, console: Console, command: str = "ctxf audit", *, unit: str = "files",
                 heartbeat: float | None = None, time_source: Callable[[], float] | None = None) -> None:
        self._sink(console, command, unit, heartbeat, time_source)
        self.task: Any = None
        self.lines: list[str] = []  # the heartbeat lines printed (for the tests)
        self.files_done = self.files_total = self.sessions = self.failures = self.retries = 0
        self.started: float | None = None  # the first update
        self.updated: float | None = None  # the latest update
        self.beats = 0
        self.activity = ""  # what the run is doing now (``doing``)
        self._init_ticking()

    _thread_name = "ctxf-run-heartbeat"

    def __enter__(self) -> RunProgress:
        self._start_ticking()
        return self

    def doing(self, text: str) -> None:
        """What the run is doing now (the audit's rule and session, ``runner.reporting``): shown
        after the figures, on the bar and in the heartbeat lines."""
        with self._lock:
            self.activity = inert(text, newlines=False)
            if self.terminal and self.bar is not None:
                self._draw()

    def update(self, *, files_done: int, files_total: int, sessions: int, failures: int = 0,
               retries: int = 0) -> None:
        """The run so far: files done of the total, sessions audited, files failed, tasks retried."""
        with self._lock:
            now = self.now()
            if self.started is None:  # the rates and the first heartbeat count from here
                self.started = self._last = now
            self.updated = now
            self.files_done, self.files_total, self.sessions = files_done, files_total, sessions
            self.failures, self.retries = failures, retries
            if self.terminal:
                self._draw()
            else:
                self.tick(now)

    # the figures -----------------------------------------------------------------------------

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the first update (0 before it)."""
        if self.started is None:
            return 0.0
        return max(0.0, (self.now() if now is None else now) - self.started)

    def rate(self, now: float | None = None) -> float | None:
        """Sessions per second so far, measured; None before any time has passed."""
        t = self.elapsed(now)
        return self.sessions / t if t > 0 else None

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left, estimated from the files rate so far; None until a file is done."""
        t = self.elapsed(now)
        if self.files_done <= 0 or t <= 0:
            return None
        return max(0, self.files_total - self.files_done) * t / self.files_done

    def figures(self, now: float | None = None, *, final: bool = False) -> str:
        """The state in words: "120/1,000 files, 1,410 sessions, 23.5 sessions/s, ETA ~6m 15s"."""
        parts = [f"{self.files_done:,}/{self.files_total:,} {self.unit}", f"{self.sessions:,} sessions"]
        rate = self.rate(now)
        if rate is not None:
            parts.append(f"{rate:,.1f} sessions/s")
        eta = None if final else self.eta(now)
        if eta is not None and self.files_done < self.files_total:
            parts.append(f"ETA ~{duration(eta)}")
        if final:
            parts.append(f"in {duration(self.elapsed(now))}")
        if self.failures:
            parts.append(f"{self.failures:,} failed")
        if self.retries:
            parts.append(f"{self.retries:,} retried")
        if self.activity and not final:
            parts.append(f"now: {self.activity}")
        return ", ".join(parts)

    # the heartbeat ---------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> None:
        """Print a heartbeat line if one is due (``interval`` seconds after the start or the last
        line), once the run has reported; nothing on a terminal."""
        if self.terminal or self.interval <= 0:
            return
        with self._lock:
            now = self.now() if now is None else now
            if self.started is None or now - self._last < self.interval:
                return
            self.beats += 1
            self._print(f"{self.command}: {self.figures(now)}")

    def _print(self, line: str) -> None:
        self.lines.append(line)
        self._last = self.now()
        self.console.print(Text(line), soft_wrap=True, highlight=False)

    def __exit__(self, *exc: object) -> None:
        self._stop_ticking()
        with self._lock:
            if self.bar is not None:
                self.bar.stop()
            if self.beats:  # a run long enough for a heartbeat says how it ended
                end = self.now()
                how = "interrupted at" if exc[0] is KeyboardInterrupt else "stopped at" if exc[0] else "done,"
                self._print(f"{self.command}: {how} {self.figures(end, final=True)}")

    # the terminal display --------------------------------------------------------------------

    def _draw(self) -> None:
        if self.bar is None:
            from rich.progress import BarColumn, Progress, TextColumn

            self.bar = Progress(TextColumn("{task.fields[label]}", markup=False), BarColumn(),
                                TextColumn("{task.fields[figures]}", markup=False),
                                console=self.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=self.files_total or None, label=self.command, figures="")
        self.bar.update(self.task, completed=self.files_done, total=self.files_total or None,
                        figures=self.figures())
