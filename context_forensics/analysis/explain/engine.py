"""One session end to end: replay, constraints, decisive step, drift, divergence, verdict.

``explain_session`` replays the session (its recorded model under the ``recorded`` policy, or
``model`` under its own policy: a what-if), tracks the constraints (``--fact``, the config's
``facts:``, else the ``facts suggest`` sentences, marked ``suggested``), finds the decisive step
(``decisive``), reads the window there (what had left it, when and by which event), the goal
messages' states, the drift curve at that step, a good run's divergence when there is one, and
the counterfactual replays; ``verdict`` ranks the reasons into the verdict. Deterministic: the
same store, config and arguments give the same report; no model is asked to judge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...config.settings import Config
from ...store.db import Store
from .decisive import Decisive
from .evidence import LEFT_BY, STATE_OF, event_for, event_id
from .verdict import Reason

EXPLAIN_VERSION = 1
SUGGESTED = 5  # suggested constraints tracked when none are given or configured
LOST_LISTED = 12  # lost messages listed in the window block (the counts cover them all)


@dataclass
class ExplainReport:
    """The diagnosis of one session (``ctxf explain --json`` is ``to_dict``)."""

    session: dict[str, Any]
    verdict: str
    verdict_words: str
    reasons: list[Reason]
    decisive: Decisive | None
    replay: dict[str, Any]
    window: dict[str, Any] | None
    constraints: list[dict[str, Any]]
    goal: dict[str, Any] | None
    drift: dict[str, Any] | None
    loss_before: dict[str, Any] | None
    divergence: dict[str, Any] | None
    counterfactuals: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"version": EXPLAIN_VERSION, "session": self.session, "verdict": self.verdict,
                "verdict_words": self.verdict_words, "reasons": [r.to_dict() for r in self.reasons],
                "decisive_step": self.decisive.to_dict() if self.decisive else None, "replay": self.replay,
                "window": self.window, "constraints": self.constraints, "goal": self.goal, "drift": self.drift,
                "loss_before": self.loss_before, "divergence": self.divergence,
                "counterfactuals": self.counterfactuals, "notes": self.notes}


@dataclass
class _Run:
    """The replay the diagnosis reads: prepared input, per-step records, states."""

    prep: Any
    steps: list[dict[str, Any]]
    summary: dict[str, Any]
    timeline: Any  # replay.Timeline: each message's state at any step

    def state_name(self, seq: int, step: int) -> str:
        from ..replay.policies import STATE_NAMES

        return STATE_NAMES[int(self.timeline.state_at(seq, step))]

    def left_step(self, seq: int, step: int) -> int | None:
        """The step (≤ ``step``) of the message's last state change."""
        at = None
        for s, _ in self.timeline.changes.get(seq, ()):
            if s > step:
                break
            at = s
        return at


def _replay(store: Store, sid: str, model: str | None, cfg: Config, prepared: Any = None) -> _Run:
    from ..replay import Timeline, prepare, replay_prepared

    prep = prepared or prepare(store, sid, model, config=cfg, policy=None if model else "recorded")
    rep, results = replay_prepared(sid, prep, cfg.analysis_thresholds.min_context_utilization_alert)
    tl = Timeline.from_results(prep.inp, results)
    return _Run(prep, rep.steps, rep.summary, tl)


def _window(run: _Run, step: int) -> dict[str, Any]:
    """The window at ``step``: its figures and what had left it, when and by which event."""
    st = run.steps[step - 1]
    spec = run.prep.spec
    lost = []
    by_event: dict[str, int] = {}
    for sm in run.prep.messages[: st["message_seq"]]:
        name = run.state_name(sm.seq, step)
        if name not in LEFT_BY:
            continue
        at = run.left_step(sm.seq, step)
        eid, ev = event_for(run.steps, at, name) if at else (None, None)
        by_event[eid or name] = by_event.get(eid or name, 0) + 1
        lost.append({"seq": sm.seq, "role": sm.message.role, "kind": sm.message.kind, "state": name,
                     "left_step": at, "event": eid, "recorded": bool((ev or {}).get("recorded"))})
    return {"step": step, "seq": st["message_seq"], "tokens": st["window_tokens"],
            "tokens_kind": st["window_tokens_kind"], "utilization": st["utilization"], "limit": spec.context_limit,
            "budget": spec.budget, "assumed": spec.assumed_dict(), "counts": st["counts"],
            "lost_count": len(lost), "lost_by_event": by_event, "lost": lost[-LOST_LISTED:],
            "peak_utilization": max((s["utilization"] for s in run.steps[:step]), default=0),
            "peak_step": max(run.steps[:step], key=lambda s: s["utilization"])["step"] if step else None}


def _gather(given: list[str] | None, cfg: Config, messages: list[Any]) -> list[tuple[str, str]]:
    """The constraints to track and where each came from: given, config, else suggested."""
    from ..facts import gather_facts
    from ..facts.suggest import suggest_facts

    out: list[tuple[str, str]] = []
    for text in gather_facts(given, None, None):
        out.append((text, "given"))
    seen = {t for t, _ in out}
    for text in gather_facts(None, None, cfg.facts):
        if text not in seen:
            out.append((text, "config"))
    if not out:
        out = [(s.text, "suggested") for s in suggest_facts(messages, limit=SUGGESTED)]
    return out


def _constraints(run: _Run, report: Any, sources: dict[str, str], step: int | None) -> list[dict[str, Any]]:
    """Each tracked constraint's state at the decisive step, and when and how it left."""
    out = []
    for ft in report.facts:
        state = ft.state_at(step) if step else ft.final_state
        dep = None
        for d in ft.departures:
            if step is None or d["step"] <= step:
                dep = d
        cause: dict[str, Any] = (dep or {}).get("cause") or {}
        eid = None
        if dep and cause:
            eid, _ = event_for(run.steps, dep["step"], STATE_OF.get(cause.get("type", ""), ""))
            eid = eid or f"{cause.get('type')}@{dep['step']}"
        out.append({"text": ft.fact, "source": sources.get(ft.fact, "given"), "state": state,
                    "first_appeared": ft.first_appeared,
                    "left_step": dep["step"] if dep and state != "present" else None,
                    "event": eid if state != "present" else None,
                    "event_type": cause.get("type") if state != "present" else None,
                    "recorded": cause.get("recorded") if state != "present" else None,
                    "sources": [s["seq"] for s in ft.sources], "removed_seqs": cause.get("seqs", []),
                    "restated": ft.restated})
    return out


def explain_session(store: Store, sid: str, *, model: str | None = None, config: Config | None = None,
                    facts: list[str] | None = None, goal: str | None = None, against: str | None = None,
                    at: int | None = None, embedder: Any = None, progress: Any = None,
                    prepared: Any = None) -> ExplainReport:
    """The diagnosis of one stored session (see the module docstring)."""
    from ...embed.embedders import embedder_for
    from ..diverge.decisive import final_patch
    from ..diverge.events import extract_events
    from ..drift import drift_session, goal_from_messages
    from ..facts import track_facts
    from .checks import effective_edits
    from .decisive import decisive_step
    from .findings import findings
    from .violations import unchecked, violations

    cfg = config or Config()
    row = store.session(sid)
    run = _replay(store, sid, model, cfg, prepared)  # prepared: a replay the caller shares (audit)
    n = len(run.steps)
    if at is not None and not 1 <= at <= n:
        from ...errors import UsageError

        raise UsageError(f"step {at} is out of range: this session has {n} step(s)",
                         hint="steps are model calls, numbered from 1")
    notes: list[str] = []
    rev = extract_events(run.prep.messages, row["format"], sid, row.get("metadata"))
    emb = embedder if embedder is not None else embedder_for(cfg)

    gathered = _gather(facts, cfg, run.prep.messages)
    sources = dict(gathered)
    report = None
    if gathered and n:
        report = track_facts(run.prep, [t for t, _ in gathered], emb, store, timeline=run.timeline,
                             threshold=cfg.analysis_thresholds.fact_presence_cosine,
                             cache_enabled=cfg.embedding.cache_enabled, ttl_hours=cfg.embedding.cache_ttl_hours,
                             progress=progress)
    edits = effective_edits(rev)
    broken = violations(rev, edits, [t for t, _ in gathered])
    blind = unchecked(t for t, _ in gathered)
    if blind:
        shown = "; ".join(repr(t if len(t) <= 70 else t[:69] + "…") for t in blind[:2])
        notes.append(f"{len(blind)} tracked rule(s) on actions not checked against what the run did (explain checks "
                     f"only a prohibition that names a path or a `command`), so whether the run kept them is not "
                     f"known: {shown}"
                     + (f" and {len(blind) - 2} more" if len(blind) > 2 else ""))
    dec = decisive_step(rev, n, at=at, broken=broken, row=row) if n else None
    step = dec.step if dec else None

    window = _window(run, step) if step else None
    constraints = _constraints(run, report, sources, step) if report is not None else []
    drift = None
    if n:
        dr = drift_session(store, sid, model, config=cfg, policy=None if model else "recorded", goal=goal,
                           embedder=emb, prepared=run.prep, timeline=run.timeline, progress=progress)
        summ = dr.summary()
        at_step = dr.steps[step - 1] if step and step <= len(dr.steps) else None
        drift = {"state": dr.state, "goal_source": dr.goal.source, "explanation": dr.goal.explanation,
                 "at_step": None if at_step is None else {"step": at_step.step, "score": at_step.score,
                                                           "verdict": at_step.verdict,
                                                           "explanation": at_step.explanation},
                 "first_severe": next(({"step": s.step, "score": s.score, "verdict": s.verdict} for s in dr.steps
                                       if s.verdict in ("SEVERE", "CRITICAL") and (not step or s.step <= step)), None),
                 "worst_step": summ["worst_step"], "worst_score": summ["worst_score"],
                 "worst_verdict": summ["worst_verdict"], "first_step_at": summ["first_step_at"]}
    goal_obj = goal_from_messages(run.prep.messages)
    goal_info = None
    goal_text = goal if goal is not None else cfg.drift.goal
    judged = drift is None or drift["state"] == "judged"  # a goal drift cannot judge ("/mode") is no task statement
    seqs = _goal_seqs(goal_obj, goal_text, run.prep.messages) if goal_obj is not None and judged else []
    if seqs and step:
        states = {sq: run.state_name(sq, step) for sq in seqs}
        goal_info = {"seqs": seqs, "states": {str(k): v for k, v in states.items()},
                     "source": "goal" if goal_text is not None else "opening",
                     "left_step": max((run.left_step(sq, step) or 0 for sq in seqs), default=0) or None}
    elif goal_obj is not None and goal_text is not None and judged:
        notes.append("the goal text is not found in the session's opening messages: whether it left the window "
                     "is not judged (only the drift is)")
    divergence = None
    good = against
    if good is None:
        good = _good_run(store, sid, row)
        if good is not None:
            notes.append(f"compared with {good}, a success of task {row.get('task')} in the store "
                         "(--against names another)")
    if good is not None:  # named (--against) or found: compared even without a decisive step
        divergence = _divergence(store, good, sid, model, cfg, emb, run)
    out = findings(run, rev, dec, window, constraints, goal_info, drift, divergence, cfg, edits=edits,
                   unsubmitted=final_patch(rev, row, edits).unsubmitted, outcome=row.get("outcome"))
    cf: list[dict[str, Any]] = []
    if out.lost_items and step:
        from .counterfactuals import counterfactuals

        cf = counterfactuals(store, sid, step, out.lost_items, model=model, policy=run.prep.policy,
                             recorded_model=row.get("model"), limit=run.prep.spec.context_limit,
                             history_tokens=int(run.steps[step - 1]["history_tokens"]), config=cfg)
    notes.extend(out.notes)
    replay_info = {"model": run.prep.spec.name, "policy": run.prep.policy, "steps": n,
                   "assumed": run.prep.spec.assumed_dict(), "what_if": model is not None,
                   "first_loss_step": run.summary["first_loss_step"],
                   "peak_utilization": run.summary["peak_utilization"],
                   "peak_step": run.summary["peak_step"], "compaction_steps": run.summary["compaction_steps"],
                   "token_kind": run.steps[0]["window_tokens_kind"] if run.steps else None}
    return ExplainReport(session=row, verdict=out.verdict, verdict_words=out.words, reasons=out.reasons,
                         decisive=dec, replay=replay_info, window=window, constraints=constraints, goal=goal_info,
                         drift=drift, loss_before=out.loss_before, divergence=divergence, counterfactuals=cf,
                         notes=notes)


GOAL_COVER = 0.5  # an opening message holds the goal when it has this share of the goal's content words


def _goal_seqs(goal_obj: Any, goal_text: str | None, messages: list[Any]) -> list[int]:
    """The messages that state the task: with a goal text (``--goal``, ``drift.goal``), the opening
    messages that hold at least half of its content words; else the opening's user messages (a
    system prompt the policy always keeps is not the task), or all of them when it has none."""
    from ..drift import content_words

    if goal_text is not None:
        want = {w.lower() for w in content_words(goal_text)}
        if not want:
            return []
        return [sq for sq in goal_obj.seqs
                if len(want & {w.lower() for w in content_words(messages[sq].message.text)}) >= GOAL_COVER * len(want)]
    return [sq for sq in goal_obj.seqs if messages[sq].message.role == "user"] or list(goal_obj.seqs)


def _good_run(store: Store, sid: str, row: dict[str, Any]) -> str | None:
    """A success of the same task in the store, when this run failed."""
    from ..diverge import task_pairs

    if not row.get("task") or row.get("outcome") != "failure":
        return None
    return next((a for _, a, b in task_pairs(store, row["task"]) if b == sid), None)


# diverge's words for its two runs: "run A", "A's" (the good run here) and "run B", "B's" (this run)
_SIDE = re.compile(r"\brun ([AB])\b|\b([AB])'s\b")


def as_this_run(text: str | None) -> str | None:
    """diverge's sentence in explain's words: the good run (diverge's A) and this run (its B)."""
    if not text:
        return text
    return _SIDE.sub(lambda m: ("the good run" if (m.group(1) or m.group(2)) == "A" else "this run")
                     + ("'s" if m.group(2) else ""), text)


def _divergence(store: Store, good: str, sid: str, model: str | None, cfg: Config, emb: Any,
                run: _Run) -> dict[str, Any]:
    """The earliest and decisive divergence from the good run, and the context events before the
    decisive one in each run (losses the good run did not have)."""
    from ..diverge import diverge

    rep = diverge(store, good, sid, model=model, config=cfg, embedder=emb)
    d = rep.divergence or {}
    dec = rep.decisive or {}
    good_run = _replay(store, good, model, cfg)
    b_step = (dec.get("b") or {}).get("step") or dec.get("b_step") or d.get("b_step")
    a_step = (dec.get("a") or {}).get("step") or dec.get("a_step") or d.get("a_step")

    def losses(r: _Run, upto: Any) -> list[dict[str, Any]]:
        if not isinstance(upto, int):
            return []
        out = []
        for s in r.steps[:upto]:
            for i, e in enumerate(s["events"] or []):
                if e.get("type") in ("eviction", "clearing", "compaction", "history_edit", "unrecorded_truncation",
                                         "left_out"):
                    out.append({"step": s["step"], "event": event_id(s["step"], s["events"], i),
                                "type": e.get("type"), "lost": len(s["newly_lost"])})
        return out

    earliest = {k: d.get(k) for k in ("cause", "a_step", "b_step", "a_seq", "b_seq", "explanation")} if d else None
    if earliest:
        earliest["explanation"] = as_this_run(earliest["explanation"])
    return {"good": good, "earliest": earliest,
            "decisive": {"a_step": a_step, "b_step": b_step, "reason": as_this_run(dec.get("reason")),
                         "a": (dec.get("a") or {}).get("display"), "b": (dec.get("b") or {}).get("display"),
                         # where the final patches first differ, and the edit of each run that wrote it
                         "final": {side: ((dec.get("final") or {}).get(side) or {}).get("step") for side in "ab"}}
            if dec.get("differs") else None,
            "failed_events": losses(run, b_step), "good_events": losses(good_run, a_step),
            "good_model": good_run.prep.spec.name}
