"""The verdict: the reasons a diagnosis found, ranked, and the verdict they give.

Every reason is a measured statement about one step (``Reason``: kind, weight, text, evidence:
step, seq and event id, so ``ctxf replay --at STEP`` or ``ctxf view`` at ``#step=STEP`` shows
it). The verdict, in this order:

``unknown``       no decisive step (``no_decisive_step``); or the model is not in the table and
                  the log records no context event, so every window figure rests on an assumed
                  limit (``no_model``); or no constraint is tracked (none given, configured or
                  suggested) while messages had left the window, or while the window is long
                  enough (32,000 tokens) for one to sit deep in its middle (``no_constraints``);
``contributed``   a strong reason: a tracked constraint had left the window before the decisive
                  step (``constraint_lost``; through a compaction whose summary does not carry it:
                  ``constraint_summarized``), the goal had left it (``goal_lost``), or, against a
                  good run, the decisive divergence follows a context event the good run did not
                  have (``diverged_after_loss``);
``not_limiting``  none of those: nothing had left the window (``window_complete``), or only what no
                  tracked constraint and not the goal came from (``constraints_present``).

Weak reasons are said but decide nothing: a loss shortly before the step (``loss_before``), the
long tool result a loss came with (``pushed_out_by_tool_output``, ranked under the loss it
explains), drift from the goal while nothing was lost (``drift_without_loss``), the result that
led the decisive edit (``followed_result``: the last real failing check before it, else an output
that named its file unasked; a complete window can still mislead) or that none did
(``no_result_led``), a
constraint only at risk or only in a simulated summary (``constraint_at_risk``), a decisive
divergence with no context event before it (``divergence_without_loss``), a broken constraint
that was in the window when it was broken (``violated_in_view``), the run's own fix that a ``git
commit`` left out of its submission (``fix_not_submitted``: what failed, whatever the window held). One weak reason is
strong: the decisive edit changed a file whose every read had been evicted or cleared
(``loss_before``, naming the file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VERDICTS = ("contributed", "not_limiting", "unknown")
VERDICT_WORDS = {"contributed": "context likely contributed", "not_limiting": "context did not limit this run",
                 "unknown": "unknown"}
STRONG = ("constraint_lost", "constraint_summarized", "goal_lost", "diverged_after_loss")
UNKNOWN = ("no_decisive_step", "no_model", "no_constraints")
# the order reasons of equal weight are listed in
_ORDER = ("no_decisive_step", "no_model", "no_constraints", "constraint_lost", "constraint_summarized", "goal_lost",
          "pushed_out_by_tool_output", "diverged_after_loss", "fix_not_submitted", "loss_before", "window_complete",
          "constraints_present", "violated_in_view", "constraint_at_risk", "drift_without_loss",
          "divergence_without_loss",
          "followed_result", "no_result_led")


@dataclass
class Reason:
    """One ranked statement of the diagnosis, with the step, message and event it rests on."""

    kind: str
    text: str
    step: int | None = None
    seq: int | None = None
    event: str | None = None
    weight: str = "weak"  # strong | weak | unknown
    detail: dict[str, Any] = field(default_factory=dict)
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "kind": self.kind, "weight": self.weight, "text": self.text,
                "evidence": {"step": self.step, "seq": self.seq, "event": self.event}, "detail": self.detail}


def rank(reasons: list[Reason]) -> list[Reason]:
    """Unknown first (they decide), then strong, then weak; within a weight, in ``_ORDER``, a
    ``pushed_out_by_tool_output`` right under the loss it explains."""
    weight = {"unknown": 0, "strong": 1, "weak": 2}
    base = sorted(reasons, key=lambda r: (weight[r.weight], _ORDER.index(r.kind), r.step or 0))
    pushed = [r for r in base if r.kind == "pushed_out_by_tool_output"]
    out = [r for r in base if r.kind != "pushed_out_by_tool_output"]
    for p in pushed:
        at = next((i for i, r in enumerate(out) if r.weight == "strong" and r.detail.get("left_step") == p.step), None)
        out.insert(len(out) if at is None else at + 1, p)
    for i, r in enumerate(out, 1):
        r.rank = i
    return out


def decide(reasons: list[Reason]) -> tuple[str, str]:
    """The verdict and its words from the ranked reasons."""
    unknown = [r for r in reasons if r.weight == "unknown"]
    if unknown:
        why = {"no_decisive_step": "no decisive step", "no_model": "the model is not known",
               "no_constraints": "no constraint is tracked"}
        return "unknown", "unknown: " + "; ".join(why[r.kind] for r in unknown)
    if any(r.weight == "strong" for r in reasons):
        return "contributed", VERDICT_WORDS["contributed"]
    return "not_limiting", VERDICT_WORDS["not_limiting"]
