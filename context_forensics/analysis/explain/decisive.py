"""The decisive step: the failing action a diagnosis looks at, and why it is that one.

In this order (the first that applies):

1. ``at``: the step the user names (``--at``);
2. ``rule``: the first action that broke a tracked prohibition (``violations``);
3. ``failing_check`` / ``submission`` / ``unsubmitted``: the last edit before a failing test or
   build the run never got past, else the final submission and the last edit it carries, or the
   ``git commit`` / ``git stash`` that took the run's own fix out of it (``checks.failing_action``).

None when nothing applies (a chat without an edit, a check or a submission): the diagnosis then
says so (``no_decisive_step``) instead of picking a step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..diverge.events import RunEvents
from .violations import Violation

WHY_WORDS = {
    "at": "the step asked for (--at)",
    "rule": "the first action that broke a tracked constraint",
    "failing_check": "the last edit before a failing check the run never got past",
    "submission": "the change the final submission carries",
    "unsubmitted": "the command that took the run's own fix out of its submission",
}


@dataclass
class Decisive:
    """The decisive step and why it was chosen."""

    step: int
    seq: int
    why: str  # at | rule | failing_check | submission | unsubmitted
    action: str  # the action on one line ("" when the step made none)
    text: str  # one sentence: why this step, with step numbers
    files: list[str] = field(default_factory=list)
    violation: Violation | None = None
    check: dict[str, Any] | None = None  # the failing check (failing_check)
    submission_step: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "seq": self.seq, "why": self.why, "why_words": WHY_WORDS[self.why],
                "action": self.action, "text": self.text, "files": self.files,
                "violation": self.violation.to_dict() if self.violation else None,
                "check": self.check, "submission_step": self.submission_step}


def _step_action(rev: RunEvents, step: int) -> str:
    """What the model did at ``step``: its first action, else its answer, on one line."""
    for e in rev.events:
        if e.step == step and e.type in ("action", "answer") and not e.submission:
            return e.display
    return ""


def decisive_step(rev: RunEvents, n_steps: int, *, at: int | None = None, broken: list[Violation] | None = None,
                  row: dict[str, Any] | None = None) -> Decisive | None:
    """The decisive step of a run (see the module docstring); ``broken`` are its violations,
    ``row`` its session row (whether its final answer was graded)."""
    from .checks import failing_action

    if at is not None:
        seq = rev.step_seqs[at - 1] if at <= len(rev.step_seqs) else -1
        return Decisive(at, seq, "at", _step_action(rev, at), f"step {at}, as asked (--at {at})")
    if broken:
        v = broken[0]
        where = f"changed {', '.join(v.files)}" if v.files else f"ran `{v.target}`"
        return Decisive(v.step, v.seq, "rule", v.action,
                        f"step {v.step} {where}, which a tracked constraint forbids: {v.fact!r}",
                        files=list(v.files), violation=v)
    d = failing_action(rev, row)
    if d is None or d.step is None or not 1 <= d.step <= n_steps:
        return None
    check = d.check
    return Decisive(d.step, d.seq, d.why, d.action, d.text, files=list(d.files),
                    check=check.to_dict() if check is not None and hasattr(check, "to_dict") else None,
                    submission_step=getattr(d, "submission_step", None))
