"""``ctxf check``: what the log records against what ctxf reconstructs, every disagreement listed.

Each check (``CHECKS``) sets two independent signals about one session side by side and lists
where they disagree (``Inconsistency``: the step, the figures, and whether ctxf already reports it
elsewhere). The checks read the session's recorded replay (the log's own model and records) and
its messages; ``facts`` adds the facts check (a fact found verbatim in a window but reported
absent). ``check_session`` runs them; ``quick_checks`` are those cheap enough for the header of
``replay`` and ``view`` (no embedding model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ...config.audit_rules import CHECK_NAMES
from ...config.settings import Config
from ...records import KIND_MESSAGE
from ...store.db import Store
from . import facts_check, log_checks, replay_checks, totals_check
from .base import CHECK_VERSION, CheckFn, Inconsistency, NotApplicable, SessionCheck

CHECKS: dict[str, CheckFn] = {
    "prompt_vs_window": replay_checks.prompt_vs_window,
    "recorded_shrink": replay_checks.recorded_shrink,
    "calibration": replay_checks.calibration,
    "totals": totals_check.totals,
    "compactions": replay_checks.compactions,
    "summary_counts": replay_checks.summary_counts,
    "edits": log_checks.edits,
    "tool_pairs": log_checks.tool_pairs,
    "final_window": replay_checks.final_window,
    "facts": facts_check.facts,
}
if tuple(CHECKS) != CHECK_NAMES:  # the config validates rule parameters against CHECK_NAMES
    raise RuntimeError("analysis.check.CHECKS is out of step with config.audit_rules.CHECK_NAMES")
# What each check compares, for help texts and the docs (docs/commands/audit.md).
DESCRIPTIONS = {
    "prompt_vs_window": "a recorded prompt size against the rebuilt window of that call (beyond 25%)",
    "recorded_shrink": "a recorded prompt that falls with no recorded edit of the history",
    "calibration": "the calibration's sign and plausibility (a ratio between 0.5 and 2)",
    "totals": "the totals a log records for the run (model calls, prompt tokens) against the steps and the sum of "
              "the rebuilt windows, each within a stated tolerance",
    "compactions": "the log's compaction records against the compactions the replay counts",
    "summary_counts": "the replay summary's counts against the events and losses its steps list",
    "edits": "the successful edit calls the log holds against the edits explain and diverge see",
    "tool_pairs": "the log's tool calls against their results, as every rule pairs them",
    "final_window": "the window the log records at the end of the session (Letta's in-context list) against the "
                    "replay's window at the end",
    "facts": "a fact reported absent at a step whose window holds it verbatim (with --fact; loads the embedding model)",
}


@dataclass
class CheckInput:
    """One session as the checks read it: the store, the row, the config, and what is computed
    once for all of them (the recorded replay, the messages)."""

    store: Store
    sid: str
    session: dict[str, Any]
    config: Config | None = None
    facts: list[str] = field(default_factory=list)
    embedder: Any = None
    given_replay: Any = None  # the recorded replay, when the caller computed it already

    @cached_property
    def messages(self) -> list[Any]:
        return self.store.messages(self.sid)

    @cached_property
    def replay(self) -> Any:
        if self.given_replay is not None:
            return self.given_replay
        from ..replay import replay_session

        return replay_session(self.store, self.sid, None, config=self.config, policy="recorded")

    def step_models(self) -> list[str | None]:
        """The model each step's call recorded (the session's when the call names none)."""
        default = self.session.get("model")
        msgs = self.messages
        return [getattr(msgs[s["message_seq"]].message, "model", None) or default
                if 0 <= s["message_seq"] < len(msgs) else default for s in self.replay.steps]


def check_session(store: Store, sid: str, *, config: Config | None = None, only: list[str] | None = None,
                  facts: list[str] | None = None, embedder: Any = None, replay: Any = None) -> SessionCheck:
    """Run the checks (``only``: those named) on one session; ``replay``: its recorded replay,
    when the caller has it."""
    session = store.session(sid)
    inp = CheckInput(store, sid, session, config, list(facts or []), embedder, replay)
    # the facts check runs when there are facts to check (it loads the embedding model)
    names = list(only or [n for n in CHECKS if n != "facts" or inp.facts])
    ran: list[str] = []
    skipped: dict[str, str] = {}
    found: list[Inconsistency] = []
    steps = sum(1 for sm in inp.messages if sm.message.role == "assistant" and sm.message.kind == KIND_MESSAGE)
    for name in names:
        if not steps and name != "compactions":
            skipped[name] = "the session has no model call"
            continue
        try:
            found.extend(CHECKS[name](inp))
        except NotApplicable as e:
            skipped[name] = str(e)
            continue
        ran.append(name)
    return SessionCheck(session, ran, skipped, found)


def quick_checks(store: Store, sid: str, *, config: Config | None = None, replay: Any = None) -> SessionCheck:
    """The checks cheap enough to run on every replay and view (no embedding model)."""
    return check_session(store, sid, config=config, only=[n for n in CHECKS if n != "facts"], replay=replay)


__all__ = ["CHECKS", "CHECK_VERSION", "DESCRIPTIONS", "CheckInput", "Inconsistency", "NotApplicable",
           "SessionCheck", "check_session", "quick_checks"]
