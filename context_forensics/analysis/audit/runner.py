"""The audit runner: every rule over many sessions, the task-level divergences, the exit code.

Each session's audit is a pure function of (store file, session id, audit config, rules)
(``audit_session``), so the sessions run on an executor (``context_forensics.executors``:
serially, in worker processes, on Ray). Only failures of rules listed in ``--fail-on`` or marked
``fail: true`` make the exit code 3; an error, or an input the audit could not read, makes it 1.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, Callable

from ...config.audit_rules import RuleConfig
from ...config.schema import Config
from ...errors import CtxfError, ExitCode, UsageError
from ...store.db import Store
from .executors import run_serial
from .rules import Ctx, run_rule

AUDIT_VERSION = 1


def audit_session(db_path: str, sid: str, config: Config, rules: list[RuleConfig]) -> dict[str, Any]:
    """Audit one session: a pure function of (store file, session id, config, rules)."""
    with Store.open(db_path) as store:
        return audit_in(store, sid, config, rules)


# Who is told what the audit is doing (``reporting``): the rule and the session under way, for a
# progress line. Rules run in this process under the serial executor; a worker process's are not seen.
_ACTIVITY: list[Callable[[str], None]] = []


@contextmanager
def reporting(say: Callable[[str], None] | None) -> Iterator[None]:
    """While in the block, ``say(text)`` hears each rule as it starts on a session of this process
    ("max_drift on 4e34e5f24e96 (pi, 484 calls)")."""
    if say is None:
        yield
        return
    _ACTIVITY.append(say)
    try:
        yield
    finally:
        _ACTIVITY.remove(say)


def audit_in(store: Store, sid: str, config: Config, rules: list[RuleConfig]) -> dict[str, Any]:
    """Audit one session of an open store."""
    from ...config.models import session_spec
    from ...store.agents import agent_of

    session = store.session(sid)
    ctx = Ctx(store, sid, config, session)
    results = []
    t0 = time.perf_counter()
    for rule in rules:
        for say in _ACTIVITY:
            say(f"{rule.name} on {sid} ({session['format']}, {session.get('step_count') or 0:,} calls)")
        results.append(run_rule(ctx, rule))

    own = session_spec(session.get("model"), config)
    return {
        "id": sid,
        "title": session.get("title"),
        "format": session["format"],
        "agent": agent_of(session["format"], session.get("metadata")),
        "source": session["source"],
        "task": session.get("task"),
        "outcome": session.get("outcome"),
        "model": session.get("model"),
        # the session's own model is one the table cannot place: its default replays assume limits
        "assumed": own.assumed_dict(),
        "results": [r.to_dict() for r in results],
        # measured: the rules' wall seconds here (taken out by ``take_seconds`` into the report's timing)
        SECONDS_KEY: round(time.perf_counter() - t0, 4),
    }


SECONDS_KEY = "_seconds"


def take_seconds(session: dict[str, Any]) -> float | None:
    """A session result's measured audit seconds, taken out of it (a result carries none in a report:
    two runs of the same audit give equal sessions)."""
    return session.pop(SECONDS_KEY, None)


def timing(seconds: list[tuple[str, float]]) -> dict[str, Any] | None:
    """Per-session audit seconds (the rules' wall time in the process that ran them, ingest not
    included): how many were timed, median, p95 (nearest rank), the slowest. None when none was timed."""
    if not seconds:
        return None
    vals = sorted(v for _, v in seconds)
    n = len(vals)
    sid, worst = max(seconds, key=lambda p: p[1])
    return {"sessions_timed": n, "median_seconds": round(vals[(n - 1) // 2], 3),
            "p95_seconds": round(vals[max(0, -(-95 * n // 100) - 1)], 3), "max_seconds": round(worst, 3),
            "slowest": sid, "measured": "wall seconds of each session's rules in the process that ran them; "
                                        "reading its files is not included"}


def _worker(args: tuple) -> dict[str, Any]:
    return audit_session(*args)


def audit_many(db_path: str, session_ids: list[str], config: Config, rules: list[RuleConfig], *,
               workers: int = 1, fail_on: set[str] | None = None,
               progress: Callable[[int, int], None] | None = None,
               unreadable: list[dict[str, Any]] | None = None,
               ignored: list[str] | None = None,
               not_read: list[dict[str, Any]] | None = None,
               store: Store | None = None, executor: Any = None) -> dict[str, Any]:
    """Audit sessions (in worker processes when ``workers`` > 1); output order follows ``session_ids``.

    ``store``, an open store with no file (``:memory:``), is audited in this process instead
    of opening ``db_path`` (worker processes cannot share it: ``workers`` must be 1).
    ``executor`` (``executors.make_executor``) runs the sessions' audits instead of ``workers``.

    ``unreadable`` are the inputs that could not be read (``unreadable_inputs``): each is a row of
    the report (``errors``) and makes the exit code 1, since the audit could not see them.
    ``not_read`` are well-formed log-like files of a layout no importer reads: listed
    (``not_read``, and skipped testcases in JUnit), never an error.
    """
    if store is not None:
        if workers > 1:
            raise UsageError("an in-memory store cannot be shared with worker processes",
                             hint="use workers=1, or a store file (open_store('audit.db'))")
        done: list[dict[str, Any]] = run_serial(lambda sid: audit_in(store, sid, config, rules), session_ids,
                                                progress)
    else:
        jobs = [(db_path, sid, config, rules) for sid in session_ids]
        if executor is not None:
            done = _on(executor, jobs, progress)
        else:
            from ...executors import make_executor

            with make_executor("process" if workers > 1 and len(jobs) > 1 else "serial", workers=workers) as ex:
                done = _on(ex, jobs, progress)
    divergences = []
    if any(r.name == "divergence" for r in rules):
        divergences = _divergences(db_path, done, config, store)
    return build_report(done, rules, fail_on=fail_on, unreadable=unreadable, ignored=ignored, not_read=not_read,
                        divergences=divergences)


def _on(executor: Any, jobs: list[tuple], progress: Callable[[int, int], None] | None) -> list[dict[str, Any]]:
    """The store's sessions audited on an executor: in job order; a job that raised is the
    session's error result for every rule (exit 1)."""
    from ...executors import in_order

    done: list[dict[str, Any]] = []
    if progress:
        progress(0, len(jobs))
    for out in in_order(executor.run(_worker, jobs)):
        if out.error is not None:
            _, sid, _, rules = jobs[out.index]
            done.append({"id": sid, "title": None, "format": None, "agent": None, "source": None, "task": None,
                         "outcome": None, "model": None, "assumed": None,
                         "results": [{"rule": r.name, "status": "error", "figure": None, "step": None,
                                      "message": f"the audit task failed: {out.error.type}: {out.error.message}",
                                      "detail": {}, "assumed": None} for r in rules]})
        else:
            done.append(out.value)
        if progress:
            progress(len(done), len(jobs))
    return done


def build_report(done: list[dict[str, Any]], rules: list[RuleConfig], *, fail_on: set[str] | None = None,
                 unreadable: list[dict[str, Any]] | None = None, ignored: list[str] | None = None,
                 not_read: list[dict[str, Any]] | None = None,
                 divergences: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The audit's JSON report from its session results: totals and the exit code (3 a failing
    rule found something, 1 an error or an unreadable input, which wins). ``timing`` summarises the
    sessions' measured seconds, taken out of the results here (``take_seconds``).

    Exit 1 always has its cause listed in ``errors``: each unreadable input (``kind``
    ``unreadable``) and each rule that raised on a session (``kind`` ``rule``, with its
    ``session`` and ``rule``). A rule that cannot judge a session is ``skipped``, never an error."""
    divergences = list(divergences or ())
    seconds = [(s["id"], t) for s in done if (t := take_seconds(s)) is not None]
    failing = {r.name for r in rules if r.fail} | set(fail_on or ())
    counted = [(s["id"], res["rule"]) for s in done for res in s["results"]
               if res["status"] == "fail" and res["rule"] in failing]
    unreadable = [{**row, "kind": "unreadable"} for row in unreadable or ()]
    rule_errors = [rule_error_row(s, res) for s in done for res in s["results"] if res["status"] == "error"]
    code = ExitCode.ERROR if rule_errors or unreadable else ExitCode.FINDINGS if counted else ExitCode.OK
    totals = {status: sum(res["status"] == status for s in done for res in s["results"])
              for status in ("pass", "fail", "skipped", "error")}
    return {
        "version": AUDIT_VERSION,
        "rules": [{"name": r.name, "params": r.params, "fail": r.name in failing, "model": r.model,
                   "policy": r.policy} for r in rules],
        "sessions": done,
        "divergences": divergences,
        "errors": unreadable + rule_errors,
        "ignored": list(ignored or ()),
        "not_read": list(not_read or ()),
        "totals": {"sessions": len(done), **totals, "failing": len(counted), "unreadable": len(unreadable),
                   "not_read": len(not_read or ()),
                   # results on assumed limits (reported as skipped: never judged)
                   "assumed": sum(bool(res.get("assumed")) for s in done for res in s["results"])},
        "exit_code": int(code),
        "timing": timing(seconds),
    }


def rule_error_row(session: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    """An ``errors`` row for a rule that raised on a session (its result is ``error``)."""
    message = res.get("message") or "the rule failed"
    return {"kind": "rule", "session": session["id"], "rule": res["rule"], "path": session.get("source"),
            "format": session.get("format"), "error": message.split("\n  hint: ")[0],
            "hint": (res.get("detail") or {}).get("hint")}


def is_unreadable(row: dict[str, Any]) -> bool:
    """An ``errors`` row for an input the audit could not read (not a rule's error)."""
    return row.get("kind", "unreadable") == "unreadable"


def _divergences(db_path: str, sessions: list[dict[str, Any]], config: Config,
                 open_store: Store | None = None) -> list[dict[str, Any]]:
    """One divergence report per task that has both a success and a failure among the audited sessions."""
    by_task: dict[str, dict[str, list[str]]] = {}
    for s in sessions:
        if s.get("task") and s.get("outcome") in ("success", "failure"):
            by_task.setdefault(s["task"], {"success": [], "failure": []})[s["outcome"]].append(s["id"])
    out: list[dict[str, Any]] = []
    pairs = [(t, o) for t, o in sorted(by_task.items()) if o["success"] and o["failure"]]
    if not pairs:
        return out
    from ..diverge import diverge

    with nullcontext(open_store) if open_store is not None else Store.open(db_path) as store:
        for task, o in pairs:
            try:
                d = diverge(store, o["success"][0], o["failure"][0], config=config).summary(task)
                div = {k: d[k] for k in ("cause", "a_step", "b_step", "a_seq", "b_seq", "similarity")}
                out.append({"task": task, "a": d["a"], "b": d["b"], "divergence": div if d["diverged"] else None,
                            "decisive": d.get("decisive"), "patches": d.get("patches")})
            except CtxfError as e:
                out.append({"task": task, "a": o["success"][0], "b": o["failure"][0], "error": str(e)})
    return out
