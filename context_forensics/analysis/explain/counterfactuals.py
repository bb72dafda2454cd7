"""Counterfactuals: under which models and policies the lost constraints would still have been in
the window at the decisive step.

For each alternative (the other overflow policies under the replay's model, the log's own record
when the diagnosis ran a what-if, and, when something was evicted for lack of room, the smallest
models of the table whose budget holds the whole history of the decisive step), the session is replayed up to that step
and each lost constraint's supporting messages are looked up in its window: **kept** when one is in view (a
cleared tool result's content is not; under goal anchoring, **restated** when only its re-sent copy
is, which counts as kept and is said), **summarized** when only a simulated compaction's summary
could carry it (its text is not in the log: not counted as kept), else **lost**. Nothing is
embedded again: the supporting messages are those the fact tracking found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...config.settings import Config
from ...errors import CtxfError
from ...store.db import Store

# the alternatives tried, besides the log's record and the larger models (policy, params, label)
_POLICIES: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("tool_result_clearing", {}, "tool_result_clearing"),
    ("auto_compaction", {"preset": "claude_code"}, "auto_compaction (claude_code)"),
    ("auto_compaction", {"preset": "codex"}, "auto_compaction (codex)"),
    ("middle_out", {}, "middle_out"),
    ("sliding_window", {}, "sliding_window"),
    ("left_truncation", {}, "left_truncation"),
    # pins the lost constraints' statements (found lexically: replay.pins) and the goal
    ("constraint_selection", {}, "constraint_selection"),
    ("rolling_summary", {}, "rolling_summary"),
    # restates the goal and the lost constraints' statements at every call: what it keeps is the
    # restated copy (simulated text), said as "restated", not as a message in the window
    ("goal_anchoring", {}, "goal_anchoring"),
)
MAX_MODELS = 2  # larger-window models tried


@dataclass(frozen=True)
class Lost:
    """A constraint (or the goal) lost at the decisive step, and the messages that said it."""

    text: str
    seqs: tuple[int, ...]
    kind: str = "constraint"  # constraint | goal
    how: str | None = None  # the event that removed it: eviction | clearing | compaction | ...


def _judge(timeline: Any, lost: Sequence[Lost], step: int, restated: frozenset[int] = frozenset()) -> dict[str, str]:
    """kept / restated (only goal anchoring's copy of a source is in view) / summarized / lost."""
    from ..replay.policies.base import KEPT, NOT_YET, OUTSIDE_LOCAL, SUMMARIZED

    out = {}
    for item in lost:
        states = [timeline.state_at(s, step) for s in item.seqs]
        if any(s in (KEPT, OUTSIDE_LOCAL) for s in states):
            out[item.text] = "kept"
        elif any(s in restated and st != NOT_YET for s, st in zip(item.seqs, states)):
            out[item.text] = "restated"
        elif any(s == SUMMARIZED for s in states):
            out[item.text] = "summarized"
        else:
            out[item.text] = "lost"
    return out


def _larger_models(history_tokens: int, current_limit: int, config: Config | None) -> list[str]:
    """The smallest table models (distinct windows) whose budget is above the history with a
    margin for another tokenizer's count (25%)."""
    from ...config.models import all_models

    need = int(history_tokens * 1.25)
    seen: set[int] = set()
    out = []
    for m in sorted(all_models(config), key=lambda m: (m.context_limit, m.name)):
        if m.budget < need or m.context_limit <= current_limit or m.context_limit in seen:
            continue
        seen.add(m.context_limit)
        out.append(m.name)
        if len(out) == MAX_MODELS:
            break
    return out


def counterfactuals(store: Store, session_id: str, step: int, lost: Sequence[Lost], *, model: str | None,
                    policy: str, recorded_model: str | None, limit: int, history_tokens: int,
                    config: Config | None = None) -> list[dict[str, Any]]:
    """Each alternative replay and the state of every lost item in its window at ``step``."""
    from ..replay import Timeline, get_policy, prepare

    if not lost:
        return []
    tries: list[tuple[str | None, str | None, dict[str, Any], str]] = []
    if policy != "recorded":
        tries.append((None, "recorded", {}, "the log's own record"))
    constraints = [item.text for item in lost if item.kind == "constraint"]
    for name, defaults, label in _POLICIES:
        if name != policy:
            if getattr(get_policy(name), "uses_facts", False):
                defaults = {**defaults, "facts": constraints}  # it pins what it is asked to keep
            tries.append((model, name, defaults, label))
    if any(item.how in ("eviction", None) for item in lost):  # a window too small: would a larger one do?
        for name in _larger_models(history_tokens, limit, config):
            tries.append((name, None, {}, "a larger window"))
    out: list[dict[str, Any]] = []
    for m, pol, params, label in tries:
        try:
            prep = prepare(store, session_id, m, config=config, policy=pol, params=dict(params))
        except CtxfError as exc:  # a what-if ctxf cannot run (a policy's parameters, a model) is said, not fatal
            out.append({"model": m, "policy": pol, "params": params, "label": label, "error": str(exc)})
            continue
        if step > len(prep.inp.steps):
            continue
        results, _ = prep.run(upto=step)
        tl = Timeline.from_results(prep.inp, results)
        r = results[-1]
        restates = getattr(get_policy(prep.policy), "restated", None)
        restated = frozenset(restates(prep.inp, prep.params)[0]) if restates is not None else frozenset()
        states = _judge(tl, lost, step, restated)
        out.append({
            "model": prep.spec.name, "policy": prep.policy, "params": params, "label": label,
            "limit": prep.spec.context_limit, "assumed": prep.spec.assumed_dict(),
            "window_tokens": r.window_tokens, "window_tokens_kind": prep.counted.kind, "overflow": bool(r.overflow),
            "kept": [t for t, s in states.items() if s in ("kept", "restated")],
            "restated": [t for t, s in states.items() if s == "restated"],  # of kept: only as a restatement
            "summarized": [t for t, s in states.items() if s == "summarized"],
            "lost": [t for t, s in states.items() if s == "lost"],
            # a window over the budget is no rescue: the call fails (reject) or the figures say it did not fit
            "keeps_all": all(s in ("kept", "restated") for s in states.values()) and not r.overflow,
        })
    return out
