"""Audit: rules over many sessions, findings, and the exit code CI reads.

Each session's audit is a pure function of (store file, session id, audit config): it can
run in a worker process (``--workers``) or, later, on a distributed engine. Rules name the
model and policy they replay under; a rule's result is ``pass``, ``fail`` (with the figure
and the step), ``skipped`` (it does not apply) or ``error``. Only failures of rules listed in
``--fail-on`` or marked ``fail: true`` make the exit code 3.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from ..config.audit_rules import RuleConfig
from ..config.schema import Config
from ..errors import CtxfError, ExitCode
from ..store.db import Store

AUDIT_VERSION = 1


@dataclass
class Result:
    rule: str
    status: str  # pass | fail | skipped | error
    figure: Any = None
    step: int | None = None
    message: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    # The limits the figure was computed on were assumed (``ModelSpec.assumed_dict``): the
    # result is reported, never judged (status "skipped"; the verdict it would have is in detail).
    assumed: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "status": self.status, "figure": self.figure, "step": self.step,
                "message": self.message, "detail": self.detail, "assumed": self.assumed}


# ---------------------------------------------------------------- rules


@dataclass
class Ctx:
    """One session's audit: the store, the session, the config, replays cached per (model, policy)."""

    store: Store
    sid: str
    config: Config
    session: dict[str, Any]
    _prepared: dict[tuple, Any] = field(default_factory=dict)
    used: dict[str, Any] = field(default_factory=dict)  # rule name -> the Prepared replay it read

    def replay(self, rule: RuleConfig):
        """(prepared, results, timeline) under the rule's model and policy, computed once per pair."""
        from ..replay import Timeline, prepare

        policy = rule.policy or (None if rule.model else "recorded")
        key = (rule.model, policy)
        if key not in self._prepared:
            prep = prepare(self.store, self.sid, rule.model, config=self.config, policy=policy)
            results, _ = prep.run()
            self._prepared[key] = (prep, results, Timeline.from_results(prep.inp, results))
        self.used[rule.name] = self._prepared[key][0]
        return self._prepared[key]


# Rules whose figure is a share of, or a comparison with, the model's window; under a simulated
# policy every replayed rule's figure depends on it (what is evicted depends on the limit).
LIMIT_RULES = ("max_utilization", "no_overflow")
SIMULATED_LIMIT_RULES = ("max_compactions", "max_tool_output_share", "facts_must_persist")
AUDIT_ASSUMED_HINT = "set the rule's model: or map the model in model_mappings"


def _not_judged(res: Result, prep: Any) -> Result:
    """A result computed on assumed limits: kept as a figure, never a verdict (it cannot fail)."""
    spec = prep.spec
    verdict = res.status
    res.assumed = spec.assumed_dict()
    res.detail = {**res.detail, "verdict": verdict}
    res.status = "skipped"
    res.message = (f"not judged: model unknown, assumed {spec.context_limit:,}-token window ({spec.assumed}); "
                   f"{AUDIT_ASSUMED_HINT}; on those limits: {res.message} ({verdict})")
    return res


def _where(prep) -> dict[str, Any]:
    return {"model": prep.spec.name, "policy": prep.policy}


def rule_max_utilization(ctx: Ctx, rule: RuleConfig) -> Result:
    import numpy as np

    prep, results, _ = ctx.replay(rule)
    threshold = rule.params["threshold"]
    if threshold is None:
        threshold = ctx.config.analysis_thresholds.min_context_utilization_alert
    if not results:
        return Result(rule.name, "skipped", message="no model calls")
    util = [r.window_tokens / prep.spec.context_limit for r in results]
    peak = int(np.argmax(util))
    figure = round(util[peak], 4)
    status = "fail" if figure > threshold else "pass"
    return Result(rule.name, status, figure, results[peak].step,
                  f"peak utilization {figure:.0%} at step {results[peak].step} (threshold {threshold:.0%})",
                  {**_where(prep), "threshold": threshold})


def rule_no_overflow(ctx: Ctx, rule: RuleConfig) -> Result:
    if rule.policy is None and rule.model is not None:
        rule = RuleConfig(rule.name, rule.params, rule.fail, rule.model, "reject")
    prep, results, _ = ctx.replay(rule)
    over = [r for r in results if r.overflow > 0]
    if not over:
        return Result(rule.name, "pass", 0, None, "no step exceeds the budget", _where(prep))
    first = over[0]
    return Result(rule.name, "fail", len(over), first.step,
                  f"{len(over)} step(s) over the budget of {prep.spec.budget:,} tokens; first at step "
                  f"{first.step} (+{first.overflow:,})", {**_where(prep), "overflow_steps": [r.step for r in over]})


def rule_max_compactions(ctx: Ctx, rule: RuleConfig) -> Result:
    prep, results, _ = ctx.replay(rule)
    steps = [r.step for r in results if any(e["type"] == "compaction" for e in r.events)]
    limit = rule.params["max"]
    status = "fail" if len(steps) > limit else "pass"
    return Result(rule.name, status, len(steps), steps[limit] if status == "fail" else None,
                  f"{len(steps)} compaction(s) (max {limit})", {**_where(prep), "compaction_steps": steps})


def rule_max_tool_output_share(ctx: Ctx, rule: RuleConfig) -> Result:
    import numpy as np

    from ..replay.policies import IN_WINDOW
    from ..tool_output import tool_outputs

    prep, results, timeline = ctx.replay(rule)
    if not results:
        return Result(rule.name, "skipped", message="no model calls")
    tool_tokens = np.zeros(len(results), dtype=np.int64)
    in_window = np.array(IN_WINDOW, dtype=np.int8)
    # Tool output as diverge sees it: tool-role results and a text harness's user-role observations.
    outputs = tool_outputs(prep.messages, ctx.session["format"])
    for i, is_output in enumerate(outputs.flags):
        if is_output:
            states = timeline.states(i)[: len(results)]
            tool_tokens += np.where(np.isin(states, in_window), int(prep.inp.tokens[i]), 0)
    window = np.array([max(r.window_tokens, 1) for r in results], dtype=np.float64)
    share = tool_tokens / window
    peak = int(np.argmax(share))
    figure = round(float(share[peak]), 4)
    limit = rule.params["max"]
    status = "fail" if figure > limit else "pass"
    observations = sum(f and prep.inp.roles[i] == "user" for i, f in enumerate(outputs.flags))
    what = "tool output" + (f" (incl. {observations} user-role observation(s) of a text-action harness)"
                            if observations else "")
    return Result(rule.name, status, figure, results[peak].step,
                  f"{what} takes {figure:.0%} of the window at step {results[peak].step} (max {limit:.0%})",
                  {**_where(prep), "protocol": outputs.protocol, "tool_output_messages": sum(outputs.flags),
                   "observations": observations})


def rule_no_orphan_tool_results(ctx: Ctx, rule: RuleConfig) -> Result:
    calls: dict[str, int] = {}
    answered: set[str] = set()
    orphans: list[int] = []
    messages = ctx.store.messages(ctx.sid)
    for sm in messages:
        m = sm.message
        for c in m.tool_calls:
            if c.id:
                calls[c.id] = sm.seq
        if m.role == "tool" and m.tool_call_id:
            if m.tool_call_id in calls:
                answered.add(m.tool_call_id)
            else:
                orphans.append(sm.seq)
    last_assistant = max((sm.seq for sm in messages if sm.message.role == "assistant"), default=-1)
    unanswered = sorted(seq for cid, seq in calls.items() if cid not in answered and seq != last_assistant)
    if not orphans and not unanswered:
        return Result(rule.name, "pass", 0, None, "every tool result answers a call, every call has a result")
    first = min(orphans + unanswered)
    return Result(rule.name, "fail", len(orphans) + len(unanswered), None,
                  f"{len(orphans)} tool result(s) without their call, {len(unanswered)} call(s) without a "
                  f"result; first at message {first}", {"orphan_results": orphans, "unanswered_calls": unanswered})


def rule_facts_must_persist(ctx: Ctx, rule: RuleConfig) -> Result:
    facts = rule.params["facts"] if rule.params["facts"] is not None else list(getattr(ctx.config, "facts", ()))
    if not facts:
        return Result(rule.name, "skipped", message="no facts configured (audit.rules.facts_must_persist.facts or facts:)")
    return _facts_persist(ctx, rule, facts)


def _facts_persist(ctx: Ctx, rule: RuleConfig, facts: list[str]) -> Result:
    """The ``facts_must_persist`` audit rule: fail when a fact that was in the window is later
    gone from it (summarized and at-risk facts still count as carried). Facts a session never
    held are listed, not failed: config facts apply to every session."""
    import numpy as np

    from ..embed.embedders import get_embedder
    from ..facts.track import GONE, track_facts

    prep, _, timeline = ctx.replay(rule)
    cfg = ctx.config
    report = track_facts(prep, list(facts), get_embedder(cfg.embedding.model), ctx.store, timeline=timeline,
                         threshold=cfg.analysis_thresholds.fact_presence_cosine,
                         cache_enabled=cfg.embedding.cache_enabled, ttl_hours=cfg.embedding.cache_ttl_hours)
    lost = [f for f in report.facts if GONE in f.state]
    detail = {
        "model": report.model, "policy": report.policy, "threshold": report.threshold,
        "facts": [{"fact": f.fact, "first_appeared": f.first_appeared, "disappeared_at": f.disappeared_at,
                   "first_gone": int(np.argmax(f.state == GONE)) + 1 if GONE in f.state else None,
                   "final_state": f.final_state, "cause": f.cause} for f in report.facts],
        "never_present": [f.fact for f in report.facts if f.first_appeared is None],
    }
    if not lost:
        held = len(report.facts) - len(detail["never_present"])
        return Result(rule.name, "pass", 0, None, f"{held} fact(s) stayed in the window", detail)
    first = min(lost, key=lambda f: int(np.argmax(f.state == GONE)))
    step = int(np.argmax(first.state == GONE)) + 1
    cause = next((d["cause"] for d in first.departures if d["to"] == "gone"), None)
    how = f" ({cause['type']})" if cause else ""
    return Result(rule.name, "fail", len(lost), step,
                  f"{len(lost)} fact(s) left the window; first at step {step}{how}: {first.fact[:80]}", detail)


def rule_max_drift(ctx: Ctx, rule: RuleConfig) -> Result:
    from ..drift.curve import drift_session

    prep, _, timeline = ctx.replay(rule)  # shared with the other rules of this session
    rep = drift_session(ctx.store, ctx.sid, config=ctx.config, goal=rule.params["goal"],
                        prepared=prep, timeline=timeline)
    summary = rep.summary()
    band = rule.params["verdict"]
    if rep.state == "no_goal":  # no verdict can be built on it: neither a pass nor a failure (never exit 3)
        return Result(rule.name, "skipped", "no_goal", None,
                      f"not judged: {rep.goal.explanation} (or audit.rules.max_drift.goal)",
                      {"model": rep.model, "policy": rep.policy, "state": "no_goal", "reason": rep.goal.reason})
    if summary["judged_steps"] == 0:
        return Result(rule.name, "skipped", message="no assistant output long enough to judge")
    first = summary["first_step_at"].get(band) if band != "FRESH" else summary["worst_step"]
    detail = {"model": rep.model, "policy": rep.policy, "final_verdict": summary["final_verdict"],
              "worst_verdict": summary["worst_verdict"], "worst_score": summary["worst_score"],
              "goal_left_window_step": summary["goal_left_window_step"]}
    if first is None:
        return Result(rule.name, "pass", summary["worst_verdict"], None,
                      f"drift stays above {band}: worst {summary['worst_verdict']} ({summary['worst_score']}) "
                      f"at step {summary['worst_step']}", detail)
    return Result(rule.name, "fail", summary["worst_verdict"], first,
                  f"drift reaches {band} at step {first}; worst {summary['worst_verdict']} "
                  f"({summary['worst_score']}) at step {summary['worst_step']}, final {summary['final_verdict']}",
                  detail)


def rule_divergence(ctx: Ctx, rule: RuleConfig) -> Result:
    # Task-level: computed once per task in audit_many; per session it only says whether it applies.
    if not ctx.session.get("task") or ctx.session.get("outcome") not in ("success", "failure"):
        return Result(rule.name, "skipped", message="no task with both outcomes")
    return Result(rule.name, "pass", None, None, "see the divergence report for this task")


RULES: dict[str, Callable[[Ctx, RuleConfig], Result]] = {
    "max_utilization": rule_max_utilization,
    "no_overflow": rule_no_overflow,
    "facts_must_persist": rule_facts_must_persist,
    "max_drift": rule_max_drift,
    "max_compactions": rule_max_compactions,
    "max_tool_output_share": rule_max_tool_output_share,
    "no_orphan_tool_results": rule_no_orphan_tool_results,
    "divergence": rule_divergence,
}


# ---------------------------------------------------------------- running


def audit_session(db_path: str, sid: str, config: Config, rules: list[RuleConfig]) -> dict[str, Any]:
    """Audit one session: a pure function of (store file, session id, config, rules)."""
    with Store.open(db_path) as store:
        session = store.session(sid)
        ctx = Ctx(store, sid, config, session)
        results = []
        for rule in rules:
            try:
                res = RULES[rule.name](ctx, rule)
            except CtxfError as e:
                res = Result(rule.name, "error", message=str(e))
            prep = ctx.used.get(rule.name)
            if (prep is not None and prep.spec.is_assumed and res.status in ("pass", "fail")
                    and (rule.name in LIMIT_RULES or (prep.policy != "recorded" and rule.name in SIMULATED_LIMIT_RULES))):
                res = _not_judged(res, prep)
            results.append(res)
    from ..config.models import session_spec

    own = session_spec(session.get("model"), config)
    return {
        "id": sid,
        "title": session.get("title"),
        "format": session["format"],
        "source": session["source"],
        "task": session.get("task"),
        "outcome": session.get("outcome"),
        "model": session.get("model"),
        # the session's own model is one the table cannot place: its default replays assume limits
        "assumed": own.assumed_dict(),
        "results": [r.to_dict() for r in results],
    }


def _worker(args: tuple) -> dict[str, Any]:
    return audit_session(*args)


def audit_many(db_path: str, session_ids: list[str], config: Config, rules: list[RuleConfig], *,
               workers: int = 1, fail_on: set[str] | None = None,
               progress: Callable[[int, int], None] | None = None,
               unreadable: list[dict[str, Any]] | None = None,
               ignored: list[str] | None = None,
               not_read: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Audit sessions (in worker processes when ``workers`` > 1); output order follows ``session_ids``.

    ``unreadable`` are the inputs that could not be read (``unreadable_inputs``): each is a row of
    the report (``errors``) and makes the exit code 1, since the audit could not see them.
    ``not_read`` are well-formed log-like files of a layout no importer reads: listed
    (``not_read``, and skipped testcases in JUnit), never an error.
    """
    jobs = [(db_path, sid, config, rules) for sid in session_ids]
    done: list[dict[str, Any]] = []
    if workers > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: a parent that already loaded torch (or holds SQLite handles) must not
        # be forked — forked torch thread pools deadlock.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for i, res in enumerate(pool.map(_worker, jobs)):  # map keeps the input order
                done.append(res)
                if progress:
                    progress(i + 1, len(jobs))
    else:
        for i, job in enumerate(jobs):
            done.append(_worker(job))
            if progress:
                progress(i + 1, len(jobs))
    divergences = []
    if any(r.name == "divergence" for r in rules):
        divergences = _divergences(db_path, done, config)
    failing = {r.name for r in rules if r.fail} | set(fail_on or ())
    counted = [(s["id"], res["rule"]) for s in done for res in s["results"]
               if res["status"] == "fail" and res["rule"] in failing]
    errors = [(s["id"], res["rule"]) for s in done for res in s["results"] if res["status"] == "error"]
    unreadable = list(unreadable or ())
    code = ExitCode.ERROR if errors or unreadable else ExitCode.FINDINGS if counted else ExitCode.OK
    totals = {status: sum(res["status"] == status for s in done for res in s["results"])
              for status in ("pass", "fail", "skipped", "error")}
    return {
        "version": AUDIT_VERSION,
        "rules": [{"name": r.name, "params": r.params, "fail": r.name in failing, "model": r.model,
                   "policy": r.policy} for r in rules],
        "sessions": done,
        "divergences": divergences,
        "errors": unreadable,
        "ignored": list(ignored or ()),
        "not_read": list(not_read or ()),
        "totals": {"sessions": len(done), **totals, "failing": len(counted), "unreadable": len(unreadable),
                   "not_read": len(not_read or ()),
                   # results on assumed limits (reported as skipped: never judged)
                   "assumed": sum(bool(res.get("assumed")) for s in done for res in s["results"])},
        "exit_code": int(code),
    }


# Suffixes of the files importers read. A walked file with one of them that no importer
# recognises is either broken (it does not parse: a truncated or corrupt log, which the audit
# could not read) or a well-formed document of a layout ctxf does not read (run metadata, a
# format not supported yet), which is left alone and listed, as `ctxf ingest` does.
LOG_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson", ".traj", ".eval", ".yaml", ".yml", ".db", ".sqlite",
                          ".sqlite3"})
_DIAGNOSE_MAX_BYTES = 64 << 20  # larger files are not parsed again just to word the error
UNKNOWN_LAYOUT = "no importer reads this file's layout: left alone"
UNKNOWN_LAYOUT_HINT = ("`ctxf formats` lists the formats ctxf reads; name the file with `ctxf ingest FILE "
                       "--format NAME` to force one")


def unreadable_inputs(ingest: dict[str, Any], *, exclude: tuple[str, ...] = ()
                      ) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """(the inputs an audit could not read, the walked files left alone as not session logs,
    the log-like walked files of a layout no importer reads).

    ``ingest`` is an ``IngestReport.to_dict()``. Unreadable: every file that failed, and every
    walked file with a log suffix (``LOG_SUFFIXES``) that no importer recognised and that does
    not parse (empty, invalid JSON, a JSONL file without one valid line); ``exclude`` (e.g. the
    config file) is never one. A log-suffixed file that parses but whose layout no importer
    reads is not an error: it is listed (``{"path", "reason", "hint"}``) so a CI report shows
    what it did not look at. Each unreadable row is ``{"path", "format", "error", "hint"}``.
    """
    from pathlib import Path

    skip = {str(Path(p).resolve()) for p in exclude}
    rows: list[dict[str, Any]] = []
    for f in ingest.get("files", []):
        if f.get("status") == "failed":
            error, _, hint = (f.get("error") or "could not be read").partition("\n")
            rows.append({"path": f["path"], "format": f.get("format"), "error": error.strip(),
                         "hint": hint.strip().removeprefix("hint:").strip() or None})
    left_alone: list[str] = []
    not_read: list[dict[str, Any]] = []
    for path in ingest.get("ignored", []):
        p = Path(path)
        if p.suffix.lower() in LOG_SUFFIXES and str(p.resolve()) not in skip:
            broken = _diagnose(p)
            if broken is None:
                not_read.append({"path": path, "reason": UNKNOWN_LAYOUT, "hint": UNKNOWN_LAYOUT_HINT})
            else:
                rows.append({"path": path, "format": None, "error": f"{path}: {broken[0]}", "hint": broken[1]})
        else:
            left_alone.append(path)
    return sorted(rows, key=lambda r: r["path"]), left_alone, not_read


def _diagnose(p) -> tuple[str, str] | None:
    """Why a log-like file no importer took cannot be read (where it does not parse), or None
    when it parses and only its layout is unknown."""
    import json

    try:
        if p.stat().st_size == 0:
            return "the file is empty", "re-run the agent or remove the file; an empty log has nothing to audit"
        if p.stat().st_size > _DIAGNOSE_MAX_BYTES or p.suffix.lower() not in (".json", ".traj", ".jsonl", ".ndjson"):
            return None
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return f"cannot read it: {e.strerror}", "check the file's permissions"
    broken = "the log was not fully written (a crashed or killed run?) or is corrupt; repair or remove it"
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        first_bad = None
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                json.loads(line)
                return None  # a readable line: a JSONL log of a layout no importer reads
            except ValueError as e:
                first_bad = first_bad or (n, e)
        if first_bad is None:
            return "the file holds only blank lines", "re-run the agent or remove the file"
        n, e = first_bad
        return (f"no line is valid JSON (line {n}: {getattr(e, 'msg', e)}, column {getattr(e, 'colno', '?')})",
                broken)
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}", broken
    return None


def _divergences(db_path: str, sessions: list[dict[str, Any]], config: Config) -> list[dict[str, Any]]:
    """One divergence report per task that has both a success and a failure among the audited sessions."""
    by_task: dict[str, dict[str, list[str]]] = {}
    for s in sessions:
        if s.get("task") and s.get("outcome") in ("success", "failure"):
            by_task.setdefault(s["task"], {"success": [], "failure": []})[s["outcome"]].append(s["id"])
    out = []
    pairs = [(t, o) for t, o in sorted(by_task.items()) if o["success"] and o["failure"]]
    if not pairs:
        return out
    from ..diverge import core as diverge

    with Store.open(db_path) as store:
        for task, o in pairs:
            try:
                d = diverge.diverge(store, o["success"][0], o["failure"][0], config=config).summary(task)
                div = {k: d[k] for k in ("cause", "a_step", "b_step", "a_seq", "b_seq", "similarity")}
                out.append({"task": task, "a": d["a"], "b": d["b"], "divergence": div if d["diverged"] else None,
                            "decisive": d.get("decisive"), "patches": d.get("patches")})
            except CtxfError as e:
                out.append({"task": task, "a": o["success"][0], "b": o["failure"][0], "error": str(e)})
    return out


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


# ---------------------------------------------------------------- report files


def _figure(res: dict[str, Any]) -> str:
    f = res.get("figure")
    if isinstance(f, float):
        return f"{f:.0%}" if res["rule"] in ("max_utilization", "max_tool_output_share") else f"{f:g}"
    return "" if f is None else str(f)


def junit_xml(report: dict[str, Any]) -> str:
    """JUnit XML: one testcase per session × rule; failures carry the figure and the step. Each
    input the audit could not read is a testcase of the ``ctxf.inputs`` suite with an ``<error>``."""
    import xml.etree.ElementTree as ET

    counted = {r["name"] for r in report["rules"] if r["fail"]}
    suites = ET.Element("testsuites", name="ctxf audit")
    unreadable = report.get("errors") or []
    not_read = report.get("not_read") or []
    if unreadable or not_read:
        suite = ET.SubElement(suites, "testsuite", name="ctxf.inputs", tests=str(len(unreadable) + len(not_read)),
                              failures="0", errors=str(len(unreadable)), skipped=str(len(not_read)))
        for row in unreadable:
            case = ET.SubElement(suite, "testcase", classname="ctxf.inputs", name=row["path"])
            el = ET.SubElement(case, "error", message=row["error"][:200], type="unreadable")
            el.text = "\n".join([row["error"], *([f"hint: {row['hint']}"] if row.get("hint") else []),
                                 "the audit could not read this input: none of its sessions were checked"])
        for row in not_read:  # seen, not read: a CI report says what the audit did not look at
            case = ET.SubElement(suite, "testcase", classname="ctxf.inputs", name=row["path"])
            ET.SubElement(case, "skipped", message=row["reason"]).text = row["hint"]
    for rule in report["rules"]:
        name = rule["name"]
        cases = [(s, res) for s in report["sessions"] for res in s["results"] if res["rule"] == name]
        suite = ET.SubElement(
            suites, "testsuite", name=f"ctxf.{name}", tests=str(len(cases)),
            failures=str(sum(res["status"] == "fail" for _, res in cases)),
            errors=str(sum(res["status"] == "error" for _, res in cases)),
            skipped=str(sum(res["status"] == "skipped" for _, res in cases)),
        )
        for s, res in cases:
            label = s["id"] + (f" {s['title'][:60]}" if s.get("title") else "")
            case = ET.SubElement(suite, "testcase", classname=f"ctxf.{name}", name=label)
            text = f"{res['message']}\nsession {s['id']} ({s['source']})"
            if res.get("step") is not None:
                text += f"\nstep {res['step']}"
            if res["status"] == "fail":
                el = ET.SubElement(case, "failure", message=f"{_figure(res)} at step {res['step']}" if res.get("step")
                                   else _figure(res) or res["message"], type=name)
                el.text = text + ("" if name in counted else "\n(not in --fail-on: reported only)")
            elif res["status"] == "error":
                ET.SubElement(case, "error", message=res["message"][:200], type="error").text = text
            elif res["status"] == "skipped":
                ET.SubElement(case, "skipped", message=res["message"][:200])
    for key in ("tests", "failures", "errors", "skipped"):  # totals over the suites, for readers that want them
        suites.set(key, str(sum(int(suite.get(key, "0")) for suite in suites)))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _decisive_cell(dec: dict[str, Any] | None) -> str:
    """'file: step A / step B' of the first differing edit of the source files, or why there is none."""
    if not dec:
        return ""
    if not dec.get("differs"):
        return dec.get("reason") or "no differing edit"
    files = sorted({f for side in ("a", "b") for f in ((dec.get(side) or {}).get("files") or [])})
    return f"{', '.join(files)}: step {dec.get('a_step') or '–'} / {dec.get('b_step') or '–'}"


def markdown(report: dict[str, Any]) -> str:
    """A Markdown summary for a CI step summary (e.g. $GITHUB_STEP_SUMMARY)."""
    rules = [r["name"] for r in report["rules"]]
    counted = {r["name"] for r in report["rules"] if r["fail"]}
    t = report["totals"]
    icon = {"pass": "✅", "fail": "❌", "skipped": "➖", "error": "⚠️"}
    unreadable = report.get("errors") or []
    lines = ["## ctxf audit", "",
             f"{t['sessions']} session(s) · {t['pass']} passed · {t['fail']} failed "
             f"({t['failing']} failing the build) · {t['skipped']} skipped · {t['error']} error(s)"
             + (f" · ⚠️ {len(unreadable)} unreadable input(s)" if unreadable else ""), "",
             "| session | " + " | ".join(f"{r}{' (fail)' if r in counted else ''}" for r in rules) + " |",
             "|---|" + "---|" * len(rules)]
    for s in report["sessions"]:
        by_rule = {res["rule"]: res for res in s["results"]}
        cells = []
        for r in rules:
            res = by_rule.get(r)
            if res is None:
                cells.append("")
                continue
            fig = _figure(res)
            if res.get("figure") == "no_goal":  # drift not judged: say why in the cell
                fig += f" ({(res.get('detail') or {}).get('reason')})"
            step = f" @ step {res['step']}" if res.get("step") and res["status"] == "fail" else ""
            assumed = " (assumed limits: not judged)" if res.get("assumed") else ""
            cells.append(f"{icon[res['status']]} {_md(fig)}{step}{assumed}".strip())
        title = f" {_md((s.get('title') or '')[:40])}" if s.get("title") else ""
        lines.append(f"| `{s['id']}`{title} | " + " | ".join(cells) + " |")
    for row in unreadable:  # an input the audit could not read: no rule was checked on it
        error = row["error"].removeprefix(f"{row['path']}: ")
        lines.append(f"| ⚠️ `{_md(row['path'])}` unreadable: {_md(error)} | " + " | ".join(["⚠️"] * len(rules)) + " |")
    not_read = report.get("not_read") or []
    if not_read:  # seen but not read: say so, so the summary does not look like everything was checked
        lines += ["", f"{len(not_read)} log-like file(s) of a layout no importer reads were left alone:", ""]
        lines += [f"- `{_md(row['path'])}`" for row in not_read[:20]]
        if len(not_read) > 20:
            lines.append(f"- … {len(not_read) - 20} more (the JSON report lists them all)")
    if report.get("divergences"):
        lines += ["", "### Divergences (success vs failure of the same task)", "",
                  "| task | success | failure | cause | step (success / failure) | decisive edit (success / failure) |",
                  "|---|---|---|---|---|---|"]
        for d in report["divergences"]:
            div = d.get("divergence") or {}
            lines.append(f"| {_md(d['task'])} | `{d.get('a')}` | `{d.get('b')}` | {_md(div.get('cause', d.get('error', 'none')))} "
                         f"| {div.get('a_step', '')} / {div.get('b_step', '')} | {_md(_decisive_cell(d.get('decisive')))} |")
    return "\n".join(lines) + "\n"
