"""Parallel ingest (``ctxf ingest --executor process|ray``): units read on an executor's workers,
written by one writer, this process, in unit order, so the report is the serial one.

The driver hashes every unit first and leaves out the ones the store already holds
(``known_result``: reported ``unchanged``, never shipped); the others go out in jobs of a few
contiguous units, balanced by size, each worker running ``parse_unit`` on its units
(``ParsedUnit`` is picklable); the driver writes each as its job comes back (``in_order``),
one transaction per unit, so Ctrl-C keeps every unit written before it. Streams (pipes) and
refused paths are ingested here, where they were named. A unit whose job failed (its worker
died past the executor's retries) is read again in a job of its own after the others, so one
file that kills its worker fails alone; a unit whose read raised fails alone too.

Redaction crosses as a description (the config's extra rules and the token-count functions,
module-level, so picklable), rebuilt on each worker; its fingerprint is checked to match.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import CtxfError, ExitCode, UsageError
from ..executors import Executor, Outcome, TaskError, in_order
from ..records import OUTCOMES
from .db import Store
from .ingest import IngestReport, ProgressFn, ingest_unit
from .redact import RULES, Redactor, custom_rule, gitleaks_table
from .units import (
    FileResult,
    ParsedUnit,
    Unit,
    _fail,
    _redactor,
    _unchanged,
    known_result,
    parse_unit,
    shown,
    shown_path,
    write_parsed,
)

JOB_UNITS = 8  # at most this many units per job
JOBS_PER_WORKER = 4  # aim for this many jobs per worker, so the sizes even out


@dataclass(frozen=True)
class RedactSpec:
    """A ``Redactor`` as a worker rebuilds it: the rules beyond the built-in ones (from the
    config: ``custom_rule`` name and pattern) and the functions that count original tokens."""

    extra: tuple[tuple[str, str], ...] = ()
    measure: Callable[..., Any] | None = None
    measure_tools: Callable[..., Any] | None = None
    fingerprint: str = ""

    @classmethod
    def of(cls, red: Redactor) -> RedactSpec:
        extra = red.extra
        if red.rules[:len(red.rules) - len(extra)] != RULES + gitleaks_table():
            raise UsageError("this redactor does not start from the built-in rules; it cannot be rebuilt on a worker",
                             hint="ingest with --executor serial")
        spec = cls(tuple((r.name, r.regex.pattern) for r in extra), red.measure, red.measure_tools, red.fingerprint)
        if [vars_of(r) for r in spec.build().extra] != [vars_of(r) for r in extra]:
            raise UsageError("a redaction rule of this redactor is not a config pattern; it cannot be rebuilt on a "
                             "worker", hint="ingest with --executor serial")
        return spec

    def build(self) -> Redactor:
        red = Redactor([custom_rule(n, p) for n, p in self.extra], measure=self.measure,
                       measure_tools=self.measure_tools)
        if self.fingerprint and red.fingerprint != self.fingerprint:  # pragma: no cover - of() checked it
            raise RuntimeError("the redactor rebuilt on this worker differs from the driver's")
        return red


def vars_of(rule: Any) -> tuple:
    return (rule.name, rule.regex.pattern, rule.regex.flags, rule.keywords, rule.group, rule.icase, rule.check,
            rule.check_match)


@dataclass(frozen=True)
class UnitJob:
    """One unit as a worker reads it: no importer object, its registered name."""

    path: str
    importer: str | None
    explicit: bool
    companion: bool
    source: str
    key: tuple[str, int]


@dataclass(frozen=True)
class ParseJob:
    units: tuple[UnitJob, ...]
    options: dict | None
    redact: bool | RedactSpec


def parse_job(job: ParseJob) -> list[ParsedUnit]:
    """A worker's job: ``parse_unit`` on each of its units (module level: executors pickle it by name)."""
    from .. import importers

    red: bool | Redactor = job.redact.build() if isinstance(job.redact, RedactSpec) else job.redact
    out = []
    for u in job.units:
        unit = Unit(Path(u.path), importers.get(u.importer) if u.importer else None, u.explicit,
                    companion=u.companion)
        try:
            out.append(parse_unit(unit, options=job.options, redact=red, source=u.source, key=u.key))
        except Exception as e:  # noqa: BLE001 - a read that raised past parse_unit fails its unit alone
            out.append(_failed_parse(u, TaskError.of(e)))
    return out


def _failed_parse(u: UnitJob, error: TaskError) -> ParsedUnit:
    res = FileResult(path=u.path)
    where = "its worker died" if error.type == "WorkerDied" else "reading it on a worker failed"
    _fail(res, CtxfError(f"{where}: {error.type}: {error.message}", where=u.path), ExitCode.ERROR)
    return ParsedUnit(path=u.path, source=u.source, explicit=u.explicit, failed=res)


def batches(sizes: list[int], workers: int) -> list[list[int]]:
    """Contiguous runs of indices (job order is unit order), each at most ``JOB_UNITS`` long and
    about ``total / (workers * JOBS_PER_WORKER)`` bytes: a big unit gets a job of its own."""
    if not sizes:
        return []
    target = max(1, sum(sizes) // max(1, workers * JOBS_PER_WORKER))
    out: list[list[int]] = [[]]
    held = 0
    for i, size in enumerate(sizes):
        if out[-1] and (len(out[-1]) >= JOB_UNITS or held + size > target):
            out.append([])
            held = 0
        out[-1].append(i)
        held += size
    return out


def ingest_parallel(store: Store, units: list[Unit], *, executor: Executor, ignored: list[str] | None = None,
                    links_skipped: int = 0, task: str | None = None, outcome: str | None = None,
                    force: bool = False, options: dict | None = None, progress: ProgressFn | None = None,
                    redact: bool | Redactor = True) -> IngestReport:
    """``ingest_units`` with the reading on ``executor``'s workers and the writing here, in unit
    order: the same report and the same rows as the serial ingest. The report's ``executor``
    says which ran it and how many jobs were retried."""
    if outcome is not None and outcome not in OUTCOMES:
        raise UsageError(f"unknown outcome {outcome!r}", hint="use one of: " + ", ".join(OUTCOMES))
    red = _redactor(redact)
    rd: bool | Redactor = red if red is not None else False
    shipped: bool | RedactSpec = RedactSpec.of(red) if red is not None else False
    kw: dict[str, Any] = dict(task=task, outcome=outcome, force=force, options=options)
    report = IngestReport(ignored=list(ignored or []), links_skipped=links_skipped)
    plan: list[Any] = []  # per unit: "here", a known FileResult (with its key), or its place in `sent`
    sent: list[UnitJob] = []
    for unit in units:
        if unit.problem is not None or unit.stream:
            plan.append("here")
            continue
        source = str(unit.path.resolve())
        known, key = known_result(store, unit, redact=rd, source=source, **kw)
        if known is not None:
            plan.append((known, key, source))
        elif key is None:  # it cannot be hashed: reading it here says why
            plan.append("here")
        else:
            plan.append(len(sent))
            sent.append(UnitJob(str(unit.path), unit.importer.name if unit.importer else None, unit.explicit,
                                unit.companion, source, key))
    groups = batches([u.key[1] for u in sent], executor.workers)
    jobs = [ParseJob(tuple(sent[i] for i in g), options, shipped) for g in groups]
    where = {i: (j, k) for j, g in enumerate(groups) for k, i in enumerate(g)}
    stream = _Parsed(in_order(executor.run(parse_job, jobs)) if jobs else iter(()))
    again: list[int] = []  # units whose job failed as a whole: read again, one per job
    try:
        for n, unit in enumerate(units):
            if progress:
                progress(shown_path(str(unit.path), rd), n, len(units))
            step = plan[n]
            if step == "here":
                res = ingest_unit(store, unit, redact=rd, **kw)
            elif isinstance(step, tuple):  # known before anything was written: is it still?
                known, key, source = step
                res = (_unchanged(store, key[0], source, known.format, known.path, task=task, outcome=outcome,
                                  force=force)
                       or ingest_unit(store, unit, redact=rd, **kw))  # an earlier unit rewrote its sessions
            else:
                parsed, error = stream.get(*where[step])
                if error is not None and len(groups[where[step][0]]) > 1:
                    again.append(n)
                    res = FileResult(path=str(unit.path))  # placeholder until it is read alone
                else:
                    if error is not None:
                        parsed = _failed_parse(sent[step], error)
                    res = write_parsed(store, parsed, unit=unit, redact=rd, **kw)
            report.files.append(res)
        if again:
            solo = [ParseJob((sent[plan[n]],), options, shipped) for n in again]
            for out in in_order(executor.run(parse_job, solo)):
                n = again[out.index]
                parsed = out.value[0] if out.error is None else _failed_parse(sent[plan[n]], out.error)
                report.files[n] = write_parsed(store, parsed, unit=units[n], redact=rd, **kw)
    except KeyboardInterrupt:
        executor.cancel()  # what was written stays: one transaction per unit
        raise
    if progress:
        progress("", len(units), len(units))
    report.files = [shown(f, rd) for f in report.files]
    report.executor = {"name": executor.name, "workers": executor.workers, "retries": executor.retries}
    return report


class _Parsed:
    """The jobs' outcomes, pulled in job order as the units ask for them."""

    def __init__(self, outcomes: Iterator[Outcome]) -> None:
        self.outcomes = outcomes
        self.job = -1
        self.value: list[ParsedUnit] | None = None
        self.error: TaskError | None = None

    def get(self, job: int, k: int) -> tuple[ParsedUnit, TaskError | None]:
        while self.job < job:
            out = next(self.outcomes, None)
            if out is None:
                break
            self.job, self.value, self.error = out.index, out.value, out.error
        if self.job != job or self.value is None:  # no outcome for this job (cancelled)
            return _NOTHING, (self.error if self.job == job and self.error
                              else TaskError("NoResult", "no result came back"))
        return self.value[k], None


_NOTHING = ParsedUnit(path="", source="")
