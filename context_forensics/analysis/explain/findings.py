"""Findings: the measured statements about the decisive step that the verdict is built from.

Each becomes a ``Reason`` with its evidence (``verdict``). What is looked at, at the decisive step:
whether the log's model is known; each tracked constraint's state and when and how it left; the
goal messages' states; whether a long tool result joined as they left; the losses shortly before;
whether the action edited a file whose only read had left the window; the drift; a good run's
decisive divergence and the context events before it in each run; the result that led the action.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...config.settings import Config
from ..diverge.decisive import unsubmitted_words
from ..diverge.edits import EditAction
from ..diverge.events import RunEvents
from ..facts.timeline import MIDDLE_MIN_TOKENS
from .counterfactuals import Lost
from .decisive import Decisive
from .evidence import LEFT_BY, event_id
from .verdict import Reason, decide, rank

LOSS_STEPS = 3  # a loss at most this many steps before the decisive one is "shortly before" it
PUSH_SHARE = 0.2  # a tool result of at least this share of the budget, joining as a loss happens, pushed it out
_GONE = ("evicted", "cleared")


@dataclass
class Findings:
    verdict: str
    words: str
    reasons: list[Reason]
    loss_before: dict[str, Any] | None = None
    lost_items: list[Lost] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _q(text: str, n: int = 60) -> str:
    t = " ".join(text.split())
    return "“" + (t if len(t) <= n else t[: n - 1] + "…") + "”"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.0f}%" if x >= 0.01 or x == 0 else "<1%"


def _pushed(run: Any, rev: RunEvents, left: int, why: str) -> Reason | None:
    """The long tool result (a tool message, or a text harness's observation: the run's result
    events) that joined the window at the step a message was evicted there."""
    if not 1 <= left <= len(run.steps):
        return None
    hi = run.steps[left - 1]["message_seq"]
    lo = run.steps[left - 2]["message_seq"] if left >= 2 else -1
    tokens = run.prep.counted.computed.tokens
    budget = run.prep.spec.budget
    best = None
    for e in rev.events:
        if e.type == "result" and lo < e.seq < hi:
            t = int(tokens[e.seq])
            if best is None or t > best[1]:
                best = (e.seq, t)
    if best is None or best[1] < PUSH_SHARE * budget:
        return None
    return Reason("pushed_out_by_tool_output",
                  f"it left as the tool result seq {best[0]} joined: {best[1]:,} tokens, "
                  f"{best[1] / budget:.0%} of the {budget:,}-token budget ({why})",
                  step=left, seq=best[0], detail={"left_step": left, "tokens": best[1], "share": best[1] / budget})


def _unseen_edit(run: Any, rev: RunEvents, dec: Decisive) -> Reason | None:
    """The decisive edit changed a file whose reads had all been evicted or cleared by then."""
    if not dec.files:
        return None
    step = dec.step
    for f in dec.files:
        base = f.rsplit("/", 1)[-1]
        reads = [e for e in rev.events if e.type == "result" and e.parent is not None and e.seq < dec.seq
                 and base in rev.events[e.parent].text and rev.events[e.parent].key.startswith("action:view")]
        if not reads:
            continue
        states = [(e, run.state_name(e.seq, step)) for e in reads]
        if any(s in ("kept", "outside_local") for _, s in states):
            continue
        gone = [(e, s) for e, s in states if s in _GONE]
        if not gone:
            continue
        e, s = gone[-1]
        left = run.left_step(e.seq, step)
        return Reason("loss_before", f"step {step} changed {f}, but every read of it had left the window: the "
                      f"last (seq {e.seq}) was {s} at step {left}", step=left, seq=e.seq, weight="strong",
                      detail={"file": f, "left_step": left, "state": s})
    return None


NO_OUTCOME = "the log records no outcome, so whether the run failed is not known"


def _no_decisive(rev: RunEvents, edits: list[EditAction], outcome: str | None = None) -> str:
    """Why no step is decisive, as the log shows it: the run's edits of its repository (counted),
    or that it edited no file at all (a chat, an investigation: its submit action hands in no
    change), no check it never got past, no submission (a conversation's last answer is none), and
    that the log records no outcome when it does not. Only a user message a person wrote makes a
    conversation (``Event.person``, ``matching.person.human_text``): a harness's note written as
    user text (Claude Code's <task-notification>, Gemini CLI's "System: Please continue.") does not."""
    unknown = f"; {NO_OUTCOME}" if outcome in (None, "unknown") else ""
    live = rev.aligned()
    if not edits:
        submit = next((e for e in reversed(live) if e.type == "action" and e.key == "action:submit"), None)
        handed = (f"; its submit action at step {submit.step} hands in no change" if submit is not None
                  else "; it handed in no submission")
        return (f"no decisive step: the run edited no file and ran no check it never got past{handed}{unknown}; "
                "name one with --at STEP")
    mine = [a for a in edits if any(x.in_repo for x in a.edits)]
    made = (f"the run made {len(mine)} edit(s) of its repository (the last at step {mine[-1].event.step}), but "
            if mine else "the run made no edit of its repository, ")
    first = next((e.seq for e in live if e.type in ("action", "answer")), None)
    later = next((e for e in live if e.person and first is not None and e.seq > first), None)
    return (f"no decisive step: {made}ran no check it never got past and handed in no submission"
            + (f" (the person wrote again after the run began, at step {later.step}: the last answer of a "
               "conversation is no submission)" if later is not None and mine else "") + unknown
            + "; name one with --at STEP")


def findings(run: Any, rev: RunEvents, dec: Decisive | None, window: dict[str, Any] | None,
             constraints: list[dict[str, Any]], goal: dict[str, Any] | None, drift: dict[str, Any] | None,
             divergence: dict[str, Any] | None, cfg: Config, edits: list[EditAction] | None = None,
             unsubmitted: list[dict[str, Any]] | None = None, outcome: str | None = "failure") -> Findings:
    """The reasons at the decisive step, ranked, and the verdict; ``edits``: the run's edits that
    applied; ``unsubmitted``: its own changes its submission lacks (``diverge.decisive.unsubmitted``);
    ``outcome``: the session's (a note says when the log records none: the verdict then says
    whether context limited what the model saw, not that the run failed)."""
    spec = run.prep.spec
    reasons: list[Reason] = []
    notes: list[str] = []
    lost_items: list[Lost] = []
    if constraints and all(c["source"] == "suggested" for c in constraints):
        notes.append(f"no constraint given or configured: tracking the {len(constraints)} sentence(s) `facts "
                     "suggest` proposes (marked suggested); give --fact TEXT for what the run had to keep")
    for c in constraints:
        if c["first_appeared"] is None:
            notes.append(f"constraint {_q(c['text'])} is not said anywhere in the log: it cannot have left the window")
    recorded_events = any(e.get("recorded") for s in run.steps for e in (s["events"] or []))
    for u in unsubmitted or []:
        if u["by"]:  # said whatever the decisive step: the run's own fix is not what it handed in
            reasons.append(Reason("fix_not_submitted", unsubmitted_words(u), step=u["by_step"], seq=u["by_seq"],
                                  detail=dict(u)))
    if dec is None:
        reasons.append(Reason("no_decisive_step", _no_decisive(rev, edits or [], outcome), weight="unknown"))
        ranked = rank(reasons)
        v, w = decide(ranked)
        return Findings(v, w, ranked, notes=notes)
    if outcome in (None, "unknown"):
        notes.append(f"{NO_OUTCOME}: the verdict says whether context limited what the model saw up to step "
                     f"{dec.step}, not that the run failed")
    step = dec.step
    assert window is not None
    if spec.assumed and not recorded_events:
        reasons.append(Reason("no_model", f"the model is not in the table ({spec.assumed}): the "
                              f"{spec.context_limit:,}-token window is assumed and the log records no context "
                              f"event, so what was lost rests on a guess; name the model with --model",
                              step=step, seq=dec.seq, weight="unknown",
                              detail={"window_tokens": window["tokens"], "assumed_limit": spec.context_limit}))
    # constraints at the decisive step
    goal_gone = goal is not None and all(s in _GONE for s in goal["states"].values())
    for c in constraints:
        tag = " (suggested)" if c["source"] == "suggested" else ""
        left, eid = c["left_step"], c["event"]
        if (c["state"] == "gone" and c["source"] == "suggested" and goal_gone and goal is not None
                and set(c["sources"]) <= set(goal["seqs"])):
            continue  # a sentence of the task statement: the goal_lost reason says it
        ago = f", {step - left} step(s) before" if left is not None and left < step else ""
        if c["state"] == "gone":
            kind = "constraint_summarized" if c["event_type"] == "compaction" else "constraint_lost"
            how = ("with the compaction" + (" the log recorded" if c["recorded"] else "") +
                   ", whose summary does not carry it") if kind == "constraint_summarized" else f"by {c['event_type']}"
            reasons.append(Reason(kind, f"constraint{tag} {_q(c['text'])} had left the window at step {left} "
                                  f"{how}{ago}", step=left, seq=(c["removed_seqs"] or [None])[0], event=eid,
                                  weight="strong", detail={"fact": c["text"], "left_step": left,
                                                           "source": c["source"]}))
            lost_items.append(Lost(c["text"], tuple(c["sources"]), how=c["event_type"]))
            if c["event_type"] == "eviction" and left is not None:
                p = _pushed(run, rev, left, "the constraint was evicted")
                if p:
                    reasons.append(p)
        elif c["state"] == "summarized" and not c["recorded"]:
            reasons.append(Reason("constraint_at_risk", f"constraint{tag} {_q(c['text'])} was only in a simulated "
                                  f"summary at step {step} (its text is not in the log)", step=left, event=eid,
                                  detail={"fact": c["text"]}))
        elif c["state"] == "at_risk":
            reasons.append(Reason("constraint_at_risk", f"constraint{tag} {_q(c['text'])} was in the window at step "
                                  f"{step} but at risk (deep in a long window or outside local attention)",
                                  step=step, detail={"fact": c["text"]}))
    if dec.violation is not None:  # was the rule it broke in view?
        broke = next((c for c in constraints if c["text"] == dec.violation.fact), None)
        if broke is not None and broke["state"] in ("present", "at_risk"):
            src = next((q for q in broke["sources"] if run.state_name(q, step) in ("kept", "outside_local")), None)
            reasons.append(Reason("violated_in_view", f"the constraint step {step} broke, {_q(broke['text'])}, was in "
                                  f"the window then" + (f" (seq {src})" if src is not None else ""), step=step, seq=src,
                                  detail={"fact": broke["text"], "state": broke["state"]}))
    # the goal
    if goal is not None:
        states = list(goal["states"].values())
        if states and all(s in _GONE for s in states):
            left = goal["left_step"]
            eid, _ = _event_for_state(run, left, states[-1])
            reasons.append(Reason("goal_lost", f"the goal (the task statement, seq {', '.join(goal['states'])}) had "
                                  f"left the window at step {left}" + (f", {step - left} step(s) before" if left and
                                                                       left < step else ""),
                                  step=left, seq=goal["seqs"][0], event=eid, weight="strong",
                                  detail={"left_step": left}))
            lost_items.append(Lost("the goal (task statement)", tuple(goal["seqs"]), "goal",
                                   how=LEFT_BY.get(states[-1])))
            if left:
                p = _pushed(run, rev, left, "the goal was evicted")
                if p:
                    reasons.append(p)
        elif states and all(s in _GONE + ("summarized",) for s in states):
            reasons.append(Reason("goal_lost", f"the goal was only in a compaction summary at step {step}",
                                  step=goal["left_step"], seq=goal["seqs"][0], detail={"left_step": goal["left_step"]}))
    # the edit of a file no longer in view; losses shortly before
    unseen = _unseen_edit(run, rev, dec)
    if unseen:
        reasons.append(unseen)
    loss_before = None
    for s in reversed(run.steps[max(0, step - 1 - LOSS_STEPS): step]):
        if s["newly_lost"]:
            events = s["events"] or []
            ids = [event_id(s["step"], events, i) for i, e in enumerate(events) if e.get("type") != "overflow"]
            loss_before = {"step": s["step"], "steps_before": step - s["step"], "seqs": s["newly_lost"],
                           "events": ids}
            tracked = {q for c in constraints if c["state"] == "gone" for q in c["removed_seqs"]}
            if not (set(s["newly_lost"]) & tracked) and not unseen:
                when = ("at the decisive step" if s["step"] == step else
                        f"{step - s['step']} step(s) before the decisive one")
                reasons.append(Reason("loss_before", f"step {s['step']} removed {len(s['newly_lost'])} message(s) "
                                      f"(seq {_seqs(s['newly_lost'])}), {when}"
                                      + ("; none of them a tracked constraint" if constraints else ""),
                                      step=s["step"], seq=s["newly_lost"][0], event=ids[0] if ids else None))
            break
    # a good run
    if divergence is not None and divergence.get("decisive"):
        dv = divergence["decisive"]
        failed = [e for e in divergence["failed_events"] if e["lost"]]
        good = [e for e in divergence["good_events"] if e["lost"]]
        if failed and not good:
            e = failed[-1]
            reasons.append(Reason("diverged_after_loss", f"the decisive divergence from {divergence['good'][:12]} "
                                  f"(step {dv['b_step']}) follows {e['event']}, which removed {e['lost']} "
                                  "message(s); the good run lost nothing by its step " + str(dv["a_step"]),
                                  step=dv["b_step"], event=e["event"], weight="strong"))
        else:
            reasons.append(Reason("divergence_without_loss", f"the decisive divergence from "
                                  f"{divergence['good'][:12]} (step {dv['b_step']}, theirs {dv['a_step']}) follows no "
                                  "context event the good run did not have", step=dv["b_step"]))
    strong = any(r.weight == "strong" for r in reasons)
    if not strong and not any(r.weight == "unknown" for r in reasons):
        util = f"{window['tokens']:,} tokens, {_pct(window['utilization'])} of the {window['limit']:,}-token window"
        if window["lost_count"] == 0:
            reasons.append(Reason("window_complete", f"nothing had left the window by step {step}: it held {util} "
                                  f"(peak {_pct(window['peak_utilization'])} at step {window['peak_step']})",
                                  step=step, seq=dec.seq))
            if not constraints and window["tokens"] >= MIDDLE_MIN_TOKENS:
                reasons.append(Reason("no_constraints", "no constraint is tracked (none given, configured or "
                                      f"suggested), and at {window['tokens']:,} tokens one can sit deep in the middle "
                                      "of the window, which is judged per constraint: give --fact TEXT",
                                      step=step, weight="unknown",
                                      detail={"window_tokens": window["tokens"], "long_window": MIDDLE_MIN_TOKENS}))
        elif constraints or goal is not None:
            what = "every tracked constraint and the goal" if constraints else "the goal"
            reasons.append(Reason("constraints_present", f"{window['lost_count']} message(s) had left the window "
                                  f"by step {step}, but {what} were in it ({util})", step=step, seq=dec.seq))
            if not constraints:
                reasons.append(Reason("no_constraints", "messages had left the window and no constraint is tracked "
                                      "to tell whether they mattered; give --fact TEXT", step=step, weight="unknown"))
        else:
            reasons.append(Reason("no_constraints", f"{window['lost_count']} message(s) had left the window by step "
                                  f"{step}, and no constraint or goal is tracked to tell whether they mattered; "
                                  "give --fact TEXT", step=step, weight="unknown"))
    if drift is not None and window["lost_count"] == 0:
        bad = _drifted(drift, step)
        if bad is not None:
            reasons.append(Reason("drift_without_loss", f"the output drifted from the goal ({bad[1]} at step "
                                  f"{bad[0]}, score {bad[2]}) while nothing had left the window: the model moved, "
                                  "the window did not", step=bad[0]))
    follow = _followed(rev, run, dec)
    if follow is not None:
        reasons.append(follow)
    seen: set[tuple[int | None, int | None]] = set()
    unique = []
    for r in reasons:  # one long tool result can push out several things: said once
        if r.kind == "pushed_out_by_tool_output":
            if (r.step, r.seq) in seen:
                continue
            seen.add((r.step, r.seq))
        unique.append(r)
    ranked = rank(unique)
    v, w = decide(ranked)
    return Findings(v, w, ranked, loss_before=loss_before, lost_items=lost_items, notes=notes)


def _event_for_state(run: Any, step: int | None, state: str) -> tuple[str | None, Any]:
    from .evidence import event_for

    return event_for(run.steps, step, state) if step else (None, None)


def _seqs(seqs: list[int], n: int = 4) -> str:
    return ", ".join(map(str, seqs[:n])) + (f" … +{len(seqs) - n}" if len(seqs) > n else "")


def _drifted(drift: dict[str, Any], step: int) -> tuple[int, str, int] | None:
    """The first step at or before ``step`` whose drift is SEVERE or worse (step, verdict, score)."""
    first = drift.get("first_severe")
    return (first["step"], first["verdict"], first["score"]) if first else None


def _followed(rev: RunEvents, run: Any, dec: Decisive) -> Reason | None:
    """The result that led the decisive edit (``followed_result``), else a reason saying none did
    (``no_result_led``).

    The last real failing check before the edit (a test or build that failed for the code, not the
    environment: ``checks``' own verdict) led it, when no check after it passed. Else a result that
    pointed at the file unasked: the last tool result before the edit that names a file it changes
    while its action did not (a search that found it, a listing, a traceback; not the output of a
    command that named the file itself, an editor's confirmation, the file's own content, or an
    environment failure), when it was in the window. Else no result in the log led it."""
    from ..diverge.edits import editor_action
    from .checks import checks, env_cause, names_in

    if not dec.files:
        return None
    names = {f.rsplit("/", 1)[-1] for f in dec.files}
    told = [c for c in checks(rev) if c.result_seq is not None and c.result_seq < dec.seq
            and c.passed is not None and not c.environment]
    if told and told[-1].passed is False:
        c = told[-1]
        state = run.state_name(c.result_seq, dec.step)
        where = "in the window" if state in ("kept", "outside_local") else f"{state} from the window by then"
        shown = " ".join(c.command.split())
        shown = shown if len(shown) <= 60 else shown[:59] + "…"
        return Reason("followed_result", f"the result that led the decisive edit: the failing {c.kind} of step "
                      f"{c.step} (`{shown}`, seq {c.result_seq}: {c.summary}), the last real failure before it, "
                      f"{where}", step=dec.step, seq=c.result_seq,
                      detail={"led_by": "failing_check", "check": c.to_dict(), "state": state,
                              "file": sorted(names)[0]})
    swe = rev.format == "swe_agent"
    last = None
    for e in rev.events:
        if e.seq >= dec.seq:
            break
        if e.type != "result" or e.skip is not None or e.parent is None:
            continue
        parent = rev.events[e.parent]
        if editor_action(parent, swe):
            continue  # an editor's own reply (a confirmation, a refusal, the file's content): not a pointer to it
        named = [f for f in names_in(e.text, dec.files) if not _asked(parent.text, f)]
        if named and env_cause(e.text, frozenset()) is None:  # named unasked, and not an environment failure
            last = (e, named[0].rsplit("/", 1)[-1])
    if last is not None and run.state_name(last[0].seq, dec.step) in ("kept", "outside_local"):
        e, f = last
        return Reason("followed_result", f"the decisive edit of {f} came after the result seq {e.seq} that named "
                      f"it unasked ({e.display[:40]}), in the window: a complete window can still mislead",
                      step=dec.step, seq=e.seq, detail={"led_by": "pointer", "file": f})
    passed = f"; the last check before it passed (step {told[-1].step})" if told else ""
    gone = (f"; the last output that named it unasked (seq {last[0].seq}) had left the window" if last is not None
            else "")
    return Reason("no_result_led", f"no result in the log led the decisive edit of {', '.join(sorted(names))}: no "
                  "test or build failed before it for the code (environment failures are not counted), and no "
                  f"output in the window named the file unasked{passed}{gone}", step=dec.step, seq=dec.seq,
                  detail={"last_check": told[-1].to_dict() if told else None,
                          "pointer_seq": last[0].seq if last is not None else None})


def _asked(command: str, path: str) -> bool:
    """Whether an action's text names a file itself (its path, its name, or its name without the
    extension: ``find -name html.py``, ``ls -R | grep numberformat``): a result that names it back
    answers the question, it does not point the run at the file."""
    base = path.rsplit("/", 1)[-1]
    stem = base.rsplit(".", 1)[0]
    return any(re.search(r"(?<![\w-])" + re.escape(w) + r"(?![\w-])", command) for w in {path, base, stem} if w)
