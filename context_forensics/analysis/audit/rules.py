"""The audit rules: one function per rule over one session, and the ``RULES`` table naming them.

A rule reads the session through a ``Ctx`` (the store, the session row, the config, and the
replays it shares with the session's other rules, one per model and policy) and returns a
``Result``: ``pass``, ``fail`` (with the figure and the step), ``skipped`` (it does not apply)
or ``error``. Rules name the model and policy they replay under; a result whose figure rests on
assumed limits is reported, never judged (``run_rule``). The rules' parameters and defaults are
the config's (``config/audit_rules.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ...config.audit_rules import RuleConfig
from ...config.schema import Config
from ...errors import CtxfError
from ...store.db import Store


@dataclass
class Result:
    """One rule's verdict on one session: the figure it measured, and the step it points at."""

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


@dataclass
class Ctx:
    """One session's audit: the store, the session, the config, replays cached per (model, policy)."""

    store: Store
    sid: str
    config: Config
    session: dict[str, Any]
    _prepared: dict[tuple, Any] = field(default_factory=dict)
    used: dict[str, Any] = field(default_factory=dict)  # rule name -> the Prepared replay it read

    def replay(self, rule: RuleConfig) -> tuple[Any, list[Any], Any]:
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
SIMULATED_LIMIT_RULES = ("max_compactions", "max_tool_output_share", "facts_must_persist", "context_caused_failure")
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


def _where(prep: Any) -> dict[str, Any]:
    return {"model": prep.spec.name, "policy": prep.policy}


NO_CALLS = "not judged: the session has no model call (no assistant message) to replay"


def rule_max_utilization(ctx: Ctx, rule: RuleConfig) -> Result:
    import numpy as np

    prep, results, _ = ctx.replay(rule)
    threshold = rule.params["threshold"]
    if threshold is None:
        threshold = ctx.config.analysis_thresholds.min_context_utilization_alert
    if not results:
        return Result(rule.name, "skipped", message=NO_CALLS)
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
    if not results:
        return Result(rule.name, "skipped", message=NO_CALLS)
    over = [r for r in results if r.overflow > 0]
    if not over:
        return Result(rule.name, "pass", 0, None, "no step exceeds the budget", _where(prep))
    first = over[0]
    return Result(rule.name, "fail", len(over), first.step,
                  f"{len(over)} step(s) over the budget of {prep.spec.budget:,} tokens; first at step "
                  f"{first.step} (+{first.overflow:,})", {**_where(prep), "overflow_steps": [r.step for r in over]})


def rule_max_compactions(ctx: Ctx, rule: RuleConfig) -> Result:
    """Every compaction the replay counts (``is_compaction``: recorded of any record type,
    simulated, an unrecorded truncation it applied), one after the last call included."""
    from ..replay import is_compaction

    prep, results, _ = ctx.replay(rule)
    if not results:
        return Result(rule.name, "skipped", message=NO_CALLS)
    at = [r.step for r in results for e in r.events if is_compaction(e)]  # one entry per compaction
    after = sum(1 for e in (results[-1].after_last_call if results else ()) if is_compaction(e))
    count = len(at) + after
    limit = rule.params["max"]
    status = "fail" if count > limit else "pass"
    step = (at[limit] if limit < len(at) else None) if status == "fail" else None
    words = f"{count} compaction(s) (max {limit})" + (f", {after} after the last call" if after else "")
    return Result(rule.name, status, count, step, words,
                  {**_where(prep), "compaction_steps": sorted(set(at)), "compactions_after_last_call": after})


def rule_max_tool_output_share(ctx: Ctx, rule: RuleConfig) -> Result:
    import numpy as np

    from ...tool_output import pair_tools
    from ..replay.policies import IN_WINDOW

    prep, results, timeline = ctx.replay(rule)
    if not results:
        return Result(rule.name, "skipped", message=NO_CALLS)
    tool_tokens = np.zeros(len(results), dtype=np.int64)
    in_window = np.array(IN_WINDOW, dtype=np.int8)
    # Tool output as every analysis pairs it: tool-role results and the results a harness wrote
    # as user text (a text-action harness's observations, Cline's and Aider's results).
    pairs = pair_tools(prep.messages, ctx.session["format"])
    for i, is_output in enumerate(pairs.flags):
        if is_output:
            states = timeline.states(i)[: len(results)]
            tool_tokens += np.where(np.isin(states, in_window), int(prep.inp.tokens[i]), 0)
    window = np.array([max(r.window_tokens, 1) for r in results], dtype=np.float64)
    share = tool_tokens / window
    peak = int(np.argmax(share))
    figure = round(float(share[peak]), 4)
    limit = rule.params["max"]
    status = "fail" if figure > limit else "pass"
    as_text = pairs.as_text
    how = ("user-role observation(s) of a text-action harness" if pairs.protocol == "text"
           else "result(s) the harness wrote as user text")
    what = "tool output" + (f" (incl. {as_text} {how})" if as_text else "")
    return Result(rule.name, status, figure, results[peak].step,
                  f"{what} takes {figure:.0%} of the window at step {results[peak].step} (max {limit:.0%})",
                  {**_where(prep), "protocol": pairs.protocol, "tool_output_messages": sum(pairs.flags),
                   "observations": as_text, "results_as_text": as_text})


def rule_no_orphan_tool_results(ctx: Ctx, rule: RuleConfig) -> Result:
    from ...tool_output import pair_tools

    messages = ctx.store.messages(ctx.sid)
    pairs = pair_tools(messages, ctx.session["format"])
    orphans = [pairs.seqs[pos] for pos in pairs.orphans]
    unanswered = sorted(c.seq for c in pairs.unanswered())  # one entry per call
    cut = pairs.cut_off()
    detail: dict[str, Any] = {"orphan_results": orphans, "unanswered_calls": unanswered, "calls": len(pairs.calls),
                              "results": sum(pairs.flags), "results_as_text": pairs.as_text,
                              "cut_off_calls": sorted({c.seq for c in cut})}
    # calls of a reply the harness cut off never ran: said, not failed
    note = (f"; {len(cut)} call(s) of {len(detail['cut_off_calls'])} reply(ies) cut off (stop_reason "
            f"error/aborted) never ran and have none" if cut else "")
    text = f" ({pairs.as_text} result(s) written as user text)" if pairs.as_text else ""
    if not orphans and not unanswered:
        return Result(rule.name, "pass", 0, None,
                      f"every tool result answers a call, every call has a result{text}{note}", detail)
    first = min(orphans + unanswered)
    return Result(rule.name, "fail", len(orphans) + len(unanswered), None,
                  f"{len(orphans)} tool result(s) without their call, {len(unanswered)} call(s) without a "
                  f"result; first at message {first}{text}{note}", detail)


def rule_facts_must_persist(ctx: Ctx, rule: RuleConfig) -> Result:
    facts = rule.params["facts"] if rule.params["facts"] is not None else list(getattr(ctx.config, "facts", ()))
    if not facts:
        return Result(rule.name, "skipped",
                      message="no facts configured (audit.rules.facts_must_persist.facts or facts:)")
    return _facts_persist(ctx, rule, facts)


def _facts_persist(ctx: Ctx, rule: RuleConfig, facts: list[str]) -> Result:
    """The ``facts_must_persist`` audit rule: fail when a fact that was in the window is later
    gone from it (summarized and at-risk facts still count as carried). Facts a session never
    held are listed, not failed: config facts apply to every session."""
    import numpy as np

    from ...embed.embedders import embedder_for
    from ..facts import GONE, track_facts

    prep, results, timeline = ctx.replay(rule)
    if not results:
        return Result(rule.name, "skipped", message=NO_CALLS)
    cfg = ctx.config
    report = track_facts(prep, list(facts), embedder_for(cfg), ctx.store, timeline=timeline,
                         threshold=cfg.analysis_thresholds.fact_presence_cosine,
                         cache_enabled=cfg.embedding.cache_enabled, ttl_hours=cfg.embedding.cache_ttl_hours,
                         exhaustive=bool(rule.params.get("exhaustive", False)))
    lost = [f for f in report.facts if GONE in f.state]
    detail: dict[str, Any] = {
        "model": report.model, "policy": report.policy, "threshold": report.threshold,
        "facts": [{"fact": f.fact, "first_appeared": f.first_appeared, "disappeared_at": f.disappeared_at,
                   "first_gone": int(np.argmax(f.state == GONE)) + 1 if GONE in f.state else None,
                   "final_state": f.final_state, "cause": f.cause} for f in report.facts],
        "never_present": [f.fact for f in report.facts if f.first_appeared is None],
        "method": report.method,
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
    from ..drift import drift_session

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


def rule_context_caused_failure(ctx: Ctx, rule: RuleConfig) -> Result:
    """``ctxf explain`` on a failed session: fail when context likely contributed (the decisive
    step, the verdict and the top reason with its evidence), pass when it did not limit the run,
    skipped when the verdict is unknown (no model, no constraint, no decisive step): never a
    failure built on a guess."""
    from ..explain.engine import explain_session

    outcome = ctx.session.get("outcome") or "unknown"
    if rule.params["only_failed"] and outcome != "failure":
        return Result(rule.name, "skipped", message=f"not a failed session (outcome {outcome}); "
                      "only_failed: false explains every session")
    prep, _, _ = ctx.replay(rule)  # the session's shared replay: explain reads it, it does not replay again
    rep = explain_session(ctx.store, ctx.sid, model=rule.model, config=ctx.config, facts=rule.params["facts"],
                          goal=rule.params["goal"], prepared=prep)
    dec = rep.decisive
    detail = {**_where(prep), "verdict": rep.verdict, "verdict_words": rep.verdict_words,
              "decisive_step": dec.to_dict() if dec else None, "reasons": [r.to_dict() for r in rep.reasons],
              "constraints": [{k: c.get(k) for k in ("text", "source", "state", "left_step", "event")}
                              for c in rep.constraints]}
    top = rep.reasons[0] if rep.reasons else None
    where = ", ".join(f"{k} {v}" for k, v in (("step", top.step), ("seq", top.seq), ("event", top.event))
                      if v is not None) if top else ""
    at = (f" (decisive step {dec.step})" if rep.verdict == "unknown" else f" at step {dec.step}") if dec else ""
    said = " ".join(f"{rep.verdict_words}{at}"
                    f"{f': {top.text}' if top else ''}{f' ({where})' if where else ''}".split())
    if rep.verdict == "unknown":
        res = Result(rule.name, "skipped", "unknown", dec.step if dec else None, f"not judged: {said}", detail)
        if any(r.kind == "no_model" for r in rep.reasons):  # rests on assumed limits: reported as such
            res.assumed = prep.spec.assumed_dict()
            res.message += f"; {AUDIT_ASSUMED_HINT}"
        return res
    return Result(rule.name, "fail" if rep.verdict == "contributed" else "pass", rep.verdict,
                  dec.step if dec else None, said, detail)


def rule_consistent(ctx: Ctx, rule: RuleConfig) -> Result:
    """``ctxf check`` on the session: fail when the log and ctxf's reconstruction disagree anywhere
    (``checks``: only those named); the figure is the number of inconsistencies."""
    from ..check import quick_checks
    from ..replay import replay_prepared

    rec = RuleConfig(rule.name, rule.params, rule.fail, None, "recorded")
    prep, results, _ = ctx.replay(rec)  # shared with the other rules that replay the log's record
    replay, _ = replay_prepared(ctx.sid, prep, ctx.config.analysis_thresholds.min_context_utilization_alert,
                                results)
    checked = quick_checks(ctx.store, ctx.sid, config=ctx.config, replay=replay)
    wanted = rule.params.get("checks")
    found = [f for f in checked.found if wanted is None or f.check in wanted]
    detail = {**_where(prep), "counts": checked.by_check(), "skipped": checked.skipped,
              "inconsistencies": [f.to_dict() for f in found[:50]]}
    if not found:
        return Result(rule.name, "pass", 0, None, "the log and the reconstruction agree "
                      f"({len(checked.ran)} check(s))", detail)
    first = min(found, key=lambda f: (f.step is None, f.step or 0))
    kinds = ", ".join(f"{k} {n}" for k, n in checked.by_check().items() if wanted is None or k in wanted)
    return Result(rule.name, "fail", len(found), first.step,
                  f"{len(found)} inconsistenc{'y' if len(found) == 1 else 'ies'} ({kinds}): {first.message}", detail)


RULES: dict[str, Callable[[Ctx, RuleConfig], Result]] = {
    "max_utilization": rule_max_utilization,
    "no_overflow": rule_no_overflow,
    "facts_must_persist": rule_facts_must_persist,
    "max_drift": rule_max_drift,
    "max_compactions": rule_max_compactions,
    "max_tool_output_share": rule_max_tool_output_share,
    "no_orphan_tool_results": rule_no_orphan_tool_results,
    "divergence": rule_divergence,
    "context_caused_failure": rule_context_caused_failure,
    "consistent": rule_consistent,
}


def run_rule(ctx: Ctx, rule: RuleConfig) -> Result:
    """One rule's result on one session: ``error`` when the rule raised (a domain error, or a bug:
    listed in the report's ``errors``, exit 1), and not
    judged (``skipped``, the verdict kept in its detail) when its figure rests on limits that
    were assumed for a model the table cannot place and that the figure depends on."""
    try:
        res = RULES[rule.name](ctx, rule)
    except CtxfError as e:
        res = Result(rule.name, "error", message=str(e), detail={"hint": e.hint} if e.hint else {})
    except Exception as e:  # a bug in a rule: this session's result says so, the others still run
        res = Result(rule.name, "error", message=f"the rule failed: {type(e).__name__}: {e}",
                     detail={"hint": "a ctxf bug: please report it with the session's log"})
    prep = ctx.used.get(rule.name)
    if (prep is not None and prep.spec.is_assumed and res.status in ("pass", "fail")
            and (rule.name in LIMIT_RULES or (prep.policy != "recorded" and rule.name in SIMULATED_LIMIT_RULES))):
        res = _not_judged(res, prep)
    return res
