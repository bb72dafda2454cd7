"""What the API calls return: one dataclass per command, whose ``to_dict()`` is exactly the JSON
that command prints with ``--json`` (plain JSON types: ``json.dumps(r.to_dict())`` works).

Each keeps the analysis objects too (``Replay``, ``FactReport``, ``DriftReport``,
``Divergence``), for code that wants more than the JSON, and a few accessors for the questions
people ask of them in a notebook (``FactsResult.gone_at``, ``AuditResult.failures``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - the analysis types load with the analyses
    from ..analysis.diverge import Divergence
    from ..analysis.drift import DriftReport
    from ..analysis.facts import FactReport, FactTimeline
    from ..analysis.replay import Replay
    from ..store.discover import Discovery
    from ..store.ingest import IngestReport


@dataclass
class IngestResult:
    """``ctxf ingest --json``: a row per file read (ingested, unchanged, failed, skipped); with
    ``--discover``, what was found per agent too (``discovered``, as ``DiscoverResult``)."""

    report: IngestReport
    discovered: Discovery | None = None

    @property
    def exit_code(self) -> int:
        """0, or the documented code of the worst failed file (1 unreadable, 2 unknown format)."""
        return int(self.report.exit_code)

    @property
    def sessions(self) -> list[str]:
        """The ids of the sessions the files hold (ingested now or unchanged), in file order."""
        return [sid for f in self.report.files for sid in f.sessions]

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict()
        if self.discovered is not None:
            data["discovered"] = self.discovered.to_dict()
        return data


@dataclass
class DiscoverResult:
    """``ctxf ingest --discover --dry-run --json``: each agent's places and the logs found there
    (files, bytes, newest modification), nothing read or stored."""

    discovery: Discovery

    @property
    def found(self) -> list[str]:
        """Every log found (a file, or a folder read as one log), in agent order."""
        return [str(f.path) for a in self.discovery.agents for f in a.found]

    def to_dict(self) -> dict[str, Any]:
        return self.discovery.to_dict()


@dataclass
class ReplayResult:
    """``ctxf replay --json``: the session and one replay per model (the recorded one by default)."""

    version: int
    session: dict[str, Any]
    replays: list[Replay]
    # What ``ctxf check`` finds on the session (its log against the recorded replay; no embedding model)
    check: dict[str, Any] | None = None

    @property
    def replay(self) -> Replay:
        """The first (often the only) replay."""
        return self.replays[0]

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "session": self.session, "replays": [r.to_dict() for r in self.replays],
                "check": self.check}


@dataclass
class WindowResult:
    """``ctxf replay --at STEP --json``: the exact window of one step, under each model asked for.

    Every window lists its ``messages`` (state, tokens, text; a lost one says at which step it
    left and by which event) and its ``window_parts``, which add up to the step's tokens.
    """

    windows: list[dict[str, Any]]

    @property
    def window(self) -> dict[str, Any]:
        """The first model's window."""
        return self.windows[0]

    def to_dict(self) -> dict[str, Any]:
        # One model: its window. Several: the first one's keys, and every window.
        return self.windows[0] if len(self.windows) == 1 else {**self.windows[0], "windows": self.windows}


@dataclass
class FactsResult:
    """``ctxf facts --json``: each fact's state at every step of one replay.

    States (``facts.STATES``): ``not_yet``, ``present``, ``at_risk``, ``summarized``, ``gone``.
    """

    version: int
    session: dict[str, Any]
    report: FactReport
    assumed: dict[str, Any] | None  # the limits the windows rest on, when the model is unknown
    model_notes: list[str]

    @property
    def facts(self) -> list[FactTimeline]:
        """One timeline per fact, in the order given."""
        return self.report.facts

    @property
    def final_state(self) -> str | None:
        """The last step's state of the one fact tracked (``facts(log, "...").final_state ==
        "present"``); with several facts, ``UsageError`` (each ``.facts[i]`` has its own)."""
        if len(self.report.facts) != 1:
            from ..errors import UsageError

            raise UsageError(f"final_state is that of one fact; {len(self.report.facts)} facts were tracked",
                             hint="read each fact's own: [f.final_state for f in result.facts]")
        return self.report.facts[0].final_state

    @property
    def steps(self) -> int:
        """The number of steps (model calls) replayed."""
        return len(self.report.step_seqs)

    def state_at(self, step: int) -> dict[str, str]:
        """Each fact's state at ``step`` (1-based), by fact text."""
        self._check(step)
        return {f.fact: f.state_at(step) for f in self.report.facts}

    def gone_at(self, step: int) -> list[FactTimeline]:
        """The facts that had left the window by ``step``: they had appeared, and no source of
        them (nor a summary supporting them) is in that step's window. Each says when it left
        (``disappeared_at``) and why (``cause``)."""
        self._check(step)
        return [f for f in self.report.facts if f.state_at(step) == "gone"]

    def _check(self, step: int) -> None:
        if not 1 <= step <= self.steps:
            from ..errors import UsageError

            raise UsageError(f"step {step} is out of range: this session has {self.steps} step(s)",
                             hint="steps are model calls, numbered from 1")

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "session": self.session, **self.report.to_dict(),
                "assumed": self.assumed, "model_notes": self.model_notes}


@dataclass
class DriftResult:
    """``ctxf drift --json``: the goal, a score and verdict per step, and the reasons."""

    session: dict[str, Any]
    report: DriftReport
    model_notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict()
        data["model_notes"] = self.model_notes
        return {"version": data.pop("version"), "session": self.session, **data}


@dataclass
class DivergeResult:
    """``ctxf diverge A B --json`` (or ``--task KEY``): where run B first parted from run A.

    ``notes`` says what the call chose for you (e.g. which of a task's pairs it compared); it is
    printed on stderr by the CLI and is not part of the JSON.
    """

    divergence: Divergence
    model_notes: dict[str, list[str]]  # "a" / "b": the limits each run's window figures rest on
    notes: list[str] = field(default_factory=list)

    @property
    def diverged(self) -> bool:
        """True when the runs part ways (``divergence`` then says where and why)."""
        return self.divergence.divergence is not None

    def to_dict(self) -> dict[str, Any]:
        data = self.divergence.to_dict()
        for side, notes in self.model_notes.items():
            run = data[side]
            if run.get("replay") is not None:
                data[side] = {**run, "replay": {**run["replay"], "model_notes": notes}}
        return data


@dataclass
class DivergencesResult:
    """``ctxf diverge --all-tasks --json``: one line per success/failure pair of every task."""

    version: int
    pairs: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "pairs": self.pairs}


@dataclass
class AuditResult:
    """``ctxf audit --json``: every rule over every session, the task divergences, the exit code.

    ``exit_code`` is the CLI's: 0 clean, 3 a failing rule found something (``fail: true`` or
    ``fail_on``), 1 an input could not be read or a rule errored. ``ingest`` is the report of
    the paths ingested on the fly (None when the audit read the store only).
    """

    version: int
    rules: list[dict[str, Any]]
    sessions: list[dict[str, Any]]
    divergences: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    ignored: list[str]
    not_read: list[dict[str, Any]]
    totals: dict[str, int]
    exit_code: int
    ingest: dict[str, Any] | None = None
    # where it ran: {"name": serial|process|ray, "workers", "address", "retries"}
    executor: dict[str, Any] | None = None
    # an audit of files: wall and driver seconds, sessions/s, tasks, the vectors cached (``distributed``)
    run: dict[str, Any] | None = None
    interrupted: bool = False  # Ctrl-C stopped it: the report holds the sessions that finished
    stored: bool | None = None  # the files' sessions were kept in the store (None: the store was audited)
    # measured per-session audit seconds: sessions_timed, median, p95, max, the slowest (``runner.timing``)
    timing: dict[str, Any] | None = None

    def failures(self, rule: str | None = None) -> list[dict[str, Any]]:
        """Every failed result (of ``rule``, or of any), each with its session's ``id`` and
        ``title`` beside the result's ``rule``, ``figure``, ``step`` and ``message``."""
        return [{"session": s["id"], "title": s.get("title"), **res}
                for s in self.sessions for res in s["results"]
                if res["status"] == "fail" and (rule is None or res["rule"] == rule)]

    def junit(self) -> str:
        """The report as JUnit XML (``--junit``)."""
        from ..analysis.audit import junit_xml

        return junit_xml(self.to_dict())

    def markdown(self) -> str:
        """The report as a Markdown summary (``--markdown``)."""
        from ..analysis.audit import markdown

        return markdown(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "rules": self.rules, "sessions": self.sessions,
                "divergences": self.divergences, "errors": self.errors, "ignored": self.ignored,
                "not_read": self.not_read, "totals": self.totals, "exit_code": self.exit_code,
                "executor": self.executor, "run": self.run, "interrupted": self.interrupted, "stored": self.stored,
                "timing": self.timing}
