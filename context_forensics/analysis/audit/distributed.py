"""The driver of an audit of files: list them, hand them to an executor in tasks, stream back.

The driver never parses a log. It groups the listed units into tasks (``group_units``), runs
``tasks.run_audit_job`` on each through an executor (serial, worker processes, Ray), and as
each task's result arrives, in task order: writes its sessions' lines to ``--jsonl``, stores
its parsed units when the sessions are kept (one writer: this process), adds the vectors the
worker encoded to its embedding cache, and reports progress. A task that raised, or whose
worker died past its retries, is an error row for each of its files (exit 1), never the end of
the run. Ctrl-C cancels the tasks still running; the report of what finished is still built
(``interrupted``) and the exit code is 130. The sessions of the report are in store order
(``tasks.order_key``) whatever the executor, so every executor gives the same report.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from ...config.audit_rules import RuleConfig
from ...config.schema import Config
from ...store.db import Store
from .runner import SECONDS_KEY
from .tasks import CROSS_SESSION_RULES, AuditJob, AuditTaskResult, run_audit_job

TARGET_TASK_BYTES = 4 << 20  # a task's files: about this many bytes ...
MAX_TASK_FILES = 16  # ... and at most this many files
TASKS_PER_WORKER = 4  # at least this many tasks per worker, so a slow one does not leave others idle


def group_units(units: list[Any], workers: int) -> list[list[Any]]:
    """The sources in tasks (``sources.group``: in order, a source with its companions never
    cut) of about ``TARGET_TASK_BYTES`` and at most ``MAX_TASK_FILES``, smaller when that leaves
    fewer than ``TASKS_PER_WORKER`` tasks per worker (a slow task must not leave the rest idle)."""
    from ...store.sources import group

    want = max(1, workers * TASKS_PER_WORKER)
    total = sum(getattr(u, "size", 0) or 0 for u in units)
    per_task_bytes = max(1, min(TARGET_TASK_BYTES, total // want))
    per_task_files = max(1, min(MAX_TASK_FILES, -(-len(units) // want)))
    return [g for g in group(units, target_bytes=per_task_bytes, max_files=per_task_files) if g]


# Rules that judge drift, whose goal sets aside what opens the sessions of other tasks too (a
# harness's template): that is a count over every session of the run, not of one task's store.
TEMPLATE_RULES = ("max_drift", "context_caused_failure")


def run_templates(jobs: list[AuditJob], store: Store, executor: Any) -> dict:
    """Drift's template indexes over the whole run: a first pass of the tasks (``openings_job``:
    each reads its files and returns its sessions' opening groups), merged here with the groups of
    the sessions already in the driver's store, as an audit in that one store would count them.
    A task that failed here fails again, by file, in the audit pass."""
    from ...executors import in_order
    from ..drift.templates import index_from_groups, merge_groups, template_groups
    from .tasks import openings_job

    merged: dict[tuple[str, bool], dict[int, set[int]]] = {}
    for out in in_order(executor.run(openings_job, jobs)):
        for key, groups in (out.value or {}).items():
            merge_groups(merged.setdefault(key, {}), groups)
    for fmt, keyed in list(merged):
        merge_groups(merged[(fmt, keyed)], template_groups(store, fmt, keyed))
    return {key: index_from_groups(key[0], groups) for key, groups in merged.items()}


CLASSIFY_CHUNK = 256  # walked files whose heads one listing task reads


def classify_job(job: tuple[list[str], str | None]) -> list[tuple[str, str | None]]:
    """A listing task: what each walked file is (``ingest.classify``), on a worker."""
    from pathlib import Path

    from ...store.ingest import classify

    paths, fmt = job
    return classify([Path(p) for p in paths], fmt)


def classifier(executor: Any, fmt: str | None = None) -> Callable[[list[Any]], list[tuple[str, str | None]]] | None:
    """``expand``'s ``classify_many`` on ``executor``: the walked files' heads read (their format
    sniffed, a few ms a file) by the workers, in chunks, not one by one here: on a run of many
    files that reading is what would make the driver the bottleneck. None for ``serial``. A
    chunk whose task failed is read here."""
    if getattr(executor, "name", "serial") == "serial":
        return None

    def classify_many(paths: list[Any]) -> list[tuple[str, str | None]]:
        from ...executors import in_order
        from ...store.ingest import classify

        if len(paths) < CLASSIFY_CHUNK:
            return classify(list(paths), fmt)
        step = max(CLASSIFY_CHUNK // 4, min(CLASSIFY_CHUNK, -(-len(paths) // (4 * max(1, executor.workers)))))
        chunks = [[str(p) for p in paths[i:i + step]] for i in range(0, len(paths), step)]
        out: list[tuple[str, str | None]] = []
        for res in in_order(executor.run(classify_job, [(c, fmt) for c in chunks])):
            out += res.value if res.error is None else classify([Path(p) for p in chunks[res.index]], fmt)
        return out

    from pathlib import Path

    return classify_many


def _unit_name(unit: Any) -> str:
    return str(getattr(unit, "url", None) or getattr(unit, "path", unit))


@dataclass
class DriverStats:
    """The driver's own cost (listing excluded): its seconds handling results, per session."""

    seconds: float = 0.0
    sessions: int = 0
    tasks: int = 0
    failed_tasks: int = 0
    stored: int = 0  # parsed units written into the store
    vectors: int = 0  # embedding vectors added to the driver's cache
    cache_unreachable: int = 0  # tasks whose worker could not read the driver's cache
    duplicates: int = 0  # sessions a later task read again through another path (kept once)
    worker_seconds: dict[str, float] = field(default_factory=lambda: {"ingest": 0.0, "audit": 0.0})
    workers_seen: set[tuple] = field(default_factory=set)

    def to_dict(self, wall: float) -> dict[str, Any]:
        return {
            # measured (wall clock): keys ending in "seconds", the only figures two runs may differ in
            "wall_seconds": round(wall, 3),
            "driver_seconds": round(self.seconds, 3),
            "driver_per_session_seconds": round(self.seconds / self.sessions, 6) if self.sessions else None,
            "worker_seconds": {k: round(v, 3) for k, v in self.worker_seconds.items()},
            "workers_seen": len(self.workers_seen),
            "tasks": self.tasks, "failed_tasks": self.failed_tasks, "stored_units": self.stored,
            "vectors_cached": self.vectors, "cache_unreachable_tasks": self.cache_unreachable,
            "duplicates": self.duplicates,
        }


def audit_units(units: list[Any], store: Store, config: Config, rules: list[RuleConfig], *, executor: Any,
                task: str | None = None, redact: Any = True, keep: bool = True,
                jsonl: IO[str] | None = None, progress: Callable[..., None] | None = None
                ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], Store | None, bool]:
    """Audit ``units`` on ``executor``: (session results in store order, the ingest report
    {"files", "ignored"}, the run's figures, the store holding the paired sessions for the
    divergence reports or None, whether Ctrl-C stopped the run).

    ``keep`` writes every parsed unit into ``store`` (the sessions stay, as ``ctxf ingest``
    would leave them); without it only the vectors the workers encoded are written there, and
    the units holding a session of a task with an outcome go to a private in-memory store for
    the divergence reports.
    """
    from ...embed.cache import EmbeddingCache
    from ...store import ingest as ing
    from ...store.units import shown

    t_start = time.perf_counter()
    stats = DriverStats()
    # the sessions of a task with an outcome, in one store here: the divergence reports, and the
    # cross-session rules the workers leave to the driver (``tasks.deferred_rules``)
    diverging = any(r.name == "divergence" or r.name in CROSS_SESSION_RULES for r in rules)
    paired_store: Store | None = store if keep else (Store.open(":memory:") if diverging else None)
    cache_path = str(store.path) if store.path is not None else None
    groups = group_units(units, getattr(executor, "workers", 1))
    jobs = [AuditJob(g, config, rules, task=task, redact=redact, keep=keep, keep_paired=diverging and not keep,
                     cache=cache_path) for g in groups]
    stats.tasks = len(jobs)
    templates = None
    if any(r.name in TEMPLATE_RULES for r in rules):
        templates = run_templates(jobs, store, executor)
        for job in jobs:
            job.templates = templates
    held: list[dict[str, Any]] = []  # sessions with a rule left to the driver: their JSONL line waits
    files: list[dict[str, Any]] = []
    done: list[tuple[tuple, int, dict[str, Any]]] = []  # (order key, arrival, result)
    cache = EmbeddingCache(store)
    files_total = len(units)
    seen_ids: set[str] = set()
    seen_runs: set[tuple] = set()
    failures = 0
    interrupted = False
    _report(progress, 0, files_total, 0, 0, executor)
    from ...executors import in_order

    try:
        for out in in_order(executor.run(run_audit_job, jobs)):
            t0 = time.perf_counter()
            job = jobs[out.index]
            if out.error is not None:
                stats.failed_tasks += 1
                for u in job.units:
                    files.append(_task_failed(u, out.error, out.attempts))
                failures += len(job.units)
            else:
                res: AuditTaskResult = out.value
                by_path = {}
                for parsed in res.parsed:
                    target = store if keep else paired_store
                    if target is None:
                        continue
                    fr = shown(ing.write_parsed(target, parsed), redact)  # its path as the task's result names it
                    if keep:
                        stats.stored += 1
                        by_path[fr.path] = fr.to_dict()
                for f in res.files:
                    f = by_path.get(f["path"], f)  # the driver store's word: ingested or unchanged
                    files.append(f)
                    failures += f.get("status") == "failed"
                if res.vectors:
                    stats.vectors += cache.put_rows(res.vectors)
                if cache_path and not res.cache_reachable:
                    stats.cache_unreachable += 1
                for key, s, run in zip(res.order, res.sessions, res.runs or [None] * len(res.sessions)):
                    if s["id"] in seen_ids or (run is not None and run in seen_runs):
                        stats.duplicates += 1  # read through another path in an earlier task: kept once
                        continue
                    seen_ids.add(s["id"])
                    if run is not None:
                        seen_runs.add(run)
                    deferred = any(r["status"] == "deferred" for r in s["results"])
                    if jsonl is not None and not deferred:  # before the report's row: a Ctrl-C between
                        # the two then leaves the report no session the JSONL lacks
                        jsonl.write(json.dumps(_line(s), ensure_ascii=False, sort_keys=True) + "\n")
                    done.append((key, len(done), s))
                    if deferred:
                        held.append(s)
                stats.sessions = len(done)
                for k in ("ingest", "audit"):
                    stats.worker_seconds[k] += res.seconds.get(k, 0.0)
                stats.workers_seen.add((res.worker.get("host"), res.worker.get("pid")))
            if jsonl is not None:
                jsonl.flush()
            stats.seconds += time.perf_counter() - t0
            _report(progress, len(files), files_total, stats.sessions, failures, executor)
    except KeyboardInterrupt:
        interrupted = True
        executor.cancel()
    judge_deferred(held, paired_store, config, rules, templates, interrupted)
    if jsonl is not None:
        for s in held:
            jsonl.write(json.dumps(_line(s), ensure_ascii=False, sort_keys=True) + "\n")
        jsonl.flush()
    t0 = time.perf_counter()
    done.sort(key=lambda d: (d[0], d[1]))
    sessions = [d[2] for d in done]
    stats.seconds += time.perf_counter() - t0
    figures = {"executor": {**executor.describe(), "retries": executor.retries}, **stats.to_dict(
        time.perf_counter() - t_start)}
    return sessions, {"files": files}, figures, paired_store, interrupted


def _line(session: dict[str, Any]) -> dict[str, Any]:
    """A session's JSONL line: its result without the measured seconds (the report's ``timing``)."""
    return {k: v for k, v in session.items() if k != SECONDS_KEY}


def judge_deferred(held: list[dict[str, Any]], store: Store | None, config: Config, rules: list[RuleConfig],
                   templates: dict | None, interrupted: bool) -> None:
    """The rules the workers left to the driver (``tasks.deferred_rules``), run here on the store
    that holds every session of a task with an outcome, as an audit in one store runs them."""
    from ..drift.templates import fixed_templates
    from .rules import Ctx, Result, run_rule

    by_name = {r.name: r for r in rules}
    for s in held:
        for i, res in enumerate(s["results"]):
            if res["status"] != "deferred":
                continue
            rule = by_name[res["rule"]]
            if interrupted or store is None:
                out = Result(rule.name, "skipped", message="not judged: the run was stopped before the driver "
                             "judged this cross-session rule")
            else:
                with fixed_templates(templates):
                    out = run_rule(Ctx(store, s["id"], config, store.session(s["id"])), rule)
            s["results"][i] = out.to_dict()


def _report(progress: Callable[..., None] | None, files_done: int, files_total: int, sessions: int,
            failures: int, executor: Any) -> None:
    if progress is None:
        return
    update = getattr(progress, "update", None)
    if update is not None:
        update(files_done=files_done, files_total=files_total, sessions=sessions, failures=failures,
               retries=getattr(executor, "retries", 0))
    else:
        progress(files_done, files_total)


def _task_failed(unit: Any, error: Any, attempts: int) -> dict[str, Any]:
    """The file row of a unit whose task raised or whose worker died: failed, saying why."""
    name = _unit_name(unit)
    if error.type == "WorkerDied":
        what = f"{name}: its audit task's worker died ({error.message})"
        hint = "a file that kills its worker every time (memory?) is left out; audit it alone to see why"
    else:
        what = f"{name}: its audit task failed: {error.type}: {error.message}"
        hint = "this is a ctxf bug or a resource problem, not your log's fault; report it with the file if you can"
    return {"path": name, "format": None, "status": "failed", "sessions": [], "messages": 0,
            "error": f"{what}\nhint: {hint}", "attempts": attempts}
