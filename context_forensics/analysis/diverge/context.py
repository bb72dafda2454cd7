"""Context: each run's replayed window, read at the divergence and along the alignment.

Context at the divergence, per run (``context_state``): the replayed window of the model call
that made (or first read) the diverging event: tokens, utilization, state counts, the aligned
events already lost, and the config's ``facts:`` that are gone (``facts.track_facts``; null when
none are set). The replay is the recorded policy under the run's own model, or ``--model`` as a
what-if (``run_context``).

Context similarity curve (``context_curve``): at each aligned pair of model calls, the Jaccard
similarity of the two windows, counting an aligned pair of events (matched, similar or
preexisting) as one shared item and every other event whose content is in a window as its own:
1.0 while the runs saw the same history, falling after the divergence, and lower when one
window lost events the other kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .alignment import OPS_SAME, Alignment
from .events import Event

if TYPE_CHECKING:  # pragma: no cover
    from ...config.settings import Config
    from ...store.db import Store
    from ..replay import Prepared, Timeline
    from .compare import Comparer

MAX_CURVE_POINTS = 2000


@dataclass
class RunContext:
    """A run's replay: per-step window figures, and each message's state at any step (from the
    timeline's joins and state changes: no message x step matrix)."""

    steps: list[dict[str, Any]]  # replay.step_dicts
    timeline: Timeline
    model: str
    policy: str
    prepared: Prepared

    def joined_at(self, seq: int) -> int:
        """The first step whose window holds message ``seq`` (0: none)."""
        joins = self.timeline.joins
        return int(joins[seq]) if seq < len(joins) else 0

    def state_at(self, seq: int, step: int) -> int:
        """The replay state of message ``seq`` in the window of ``step`` (``policies.base``)."""
        return self.timeline.state_at(seq, step)

    def lost_at(self, seq: int, step: int) -> bool:
        """Evicted, cleared or summarized from the window of ``step``."""
        from ..replay.policies.base import CLEARED, EVICTED, SUMMARIZED

        if not 1 <= step <= len(self.steps):
            return False
        return self.state_at(seq, step) in (EVICTED, CLEARED, SUMMARIZED)

    def holds(self, seqs: Sequence[int], steps: np.ndarray) -> np.ndarray:
        """(len(seqs), len(steps)) bool: the message's content is in the window at that step
        (kept, or only outside a local attention span; a cleared result's content is not)."""
        from ..replay.policies.base import KEPT, OUTSIDE_LOCAL

        out = np.zeros((len(seqs), len(steps)), dtype=bool)
        changes = self.timeline.changes
        for k, seq in enumerate(seqs):
            j = self.joined_at(seq)
            if j == 0:
                continue
            out[k, np.searchsorted(steps, j):] = True
            for at, st in changes.get(seq, ()):
                out[k, np.searchsorted(steps, at):] = st in (KEPT, OUTSIDE_LOCAL)
        return out


def context_curve(al: Alignment, ctx_a: RunContext, ctx_b: RunContext) -> list[dict[str, Any]]:
    """Per aligned pair of model calls: Jaccard similarity of the two windows over aligned events
    (an aligned pair counts once, when both windows hold it). Longer curves are sampled evenly
    down to ``MAX_CURVE_POINTS``."""
    ev_a = [r.a for r in al.rows if r.a is not None]
    ev_b = [r.b for r in al.rows if r.b is not None]
    pos_a = {id(e): k for k, e in enumerate(ev_a)}
    pos_b = {id(e): k for k, e in enumerate(ev_b)}
    shared = [(pos_a[id(r.a)], pos_b[id(r.b)]) for r in al.rows
              if r.op in OPS_SAME and r.a is not None and r.b is not None]
    sa_idx = np.array([p for p, _ in shared], dtype=np.int64)
    sb_idx = np.array([q for _, q in shared], dtype=np.int64)
    ma, mb = len(ctx_a.steps), len(ctx_b.steps)
    points: list[tuple[int, int]] = []
    last_a = last_b = None
    for r in al.rows:
        sa = r.a.step if r.a is not None and r.a.type in ("action", "answer") else None
        sb = r.b.step if r.b is not None and r.b.type in ("action", "answer") else None
        if sa is None and sb is None:
            continue
        last_a = sa if sa is not None else last_a
        last_b = sb if sb is not None else last_b
        if last_a is None or last_b is None or not (1 <= last_a <= ma and 1 <= last_b <= mb):
            continue
        if not points or points[-1] != (last_a, last_b):
            points.append((last_a, last_b))
    if len(points) > MAX_CURVE_POINTS:
        keep = np.linspace(0, len(points) - 1, MAX_CURVE_POINTS).round().astype(int)
        points = [points[k] for k in keep]
    if not points:
        return []
    steps_a = np.unique([p for p, _ in points])
    steps_b = np.unique([q for _, q in points])
    win_a = ctx_a.holds([e.seq for e in ev_a], steps_a)
    win_b = ctx_b.holds([e.seq for e in ev_b], steps_b)
    col_a = np.searchsorted(steps_a, [p for p, _ in points])
    col_b = np.searchsorted(steps_b, [q for _, q in points])
    count_a = win_a.sum(axis=0)[col_a]
    count_b = win_b.sum(axis=0)[col_b]
    both = (win_a[sa_idx][:, col_a] & win_b[sb_idx][:, col_b]).sum(axis=0) if len(shared) else np.zeros(len(points))
    out = []
    for k, (sa, sb) in enumerate(points):
        union = int(count_a[k]) + int(count_b[k]) - int(both[k])
        out.append({"a_step": sa, "b_step": sb, "similarity": round(int(both[k]) / union, 4) if union else 1.0,
                    "a_utilization": ctx_a.steps[sa - 1]["utilization"],
                    "b_utilization": ctx_b.steps[sb - 1]["utilization"]})
    return out


def run_context(store: Store, session_id: str, model: str | None, config: Config | None,
                policy: str | None = None) -> RunContext:
    """Replay one run: the recorded policy under its own model, or ``model``'s policy (what-if)."""
    from ..replay import Timeline, prepare, step_dicts

    if model is None and policy is None:
        policy = "recorded"
    alert = config.analysis_thresholds.min_context_utilization_alert if config else 0.9
    prep = prepare(store, session_id, model, config=config, policy=policy)
    results, _ = prep.run()
    timeline = Timeline.from_results(prep.inp, results)
    steps = step_dicts(results, prep.inp, prep.spec, alert, prep.counted.kind)
    return RunContext(steps=steps, timeline=timeline, model=prep.spec.name, policy=prep.policy, prepared=prep)


def context_state(ctx: RunContext, step: int | None, events: list[Event], facts: dict[str, Any] | None
                  ) -> dict[str, Any]:
    """A run's window at ``step``: its figures, the ``events`` already lost from it, and the
    facts gone (``facts``: what ``track_run_facts`` returned; None when not tracked)."""
    gone = _facts_at(facts, step) if facts else {"facts_gone": None}
    if step is None or not 1 <= step <= len(ctx.steps):
        return {"step": step, "window_tokens": None, "utilization": None, "limit": None, "counts": None,
                "lost_events": [], **gone}
    st = ctx.steps[step - 1]
    seen = [e for e in events if e.seq < st["message_seq"]]
    lost = [{"seq": e.seq, "type": e.type, "event": e.display} for e in seen if ctx.lost_at(e.seq, step)]
    return {"step": step, "message_seq": st["message_seq"], "window_tokens": st["window_tokens"],
            "window_tokens_kind": st["window_tokens_kind"], "utilization": st["utilization"], "limit": st["limit"],
            "counts": st["counts"], "lost_events": lost, **gone}


def _facts_at(facts: dict[str, Any], step: int | None) -> dict[str, Any]:
    """The facts' states at ``step`` and those gone (or the note saying why none were tracked)."""
    report = facts.get("report")
    if report is None:
        return {"facts_gone": None, "facts_note": facts.get("note")}
    if step is None or not 1 <= step <= len(report.step_seqs):
        return {"facts_gone": [], "facts": {}}
    states = {f.fact: f.state_at(step) for f in report.facts}
    return {"facts_gone": [f for f, s in states.items() if s == "gone"], "facts": states}


def track_run_facts(ctx: RunContext, config: Config | None, comparer: Comparer, store: Store) -> dict[str, Any]:
    """The config's ``facts:`` tracked over a run's replay: ``{"report": FactReport}``, or
    ``{"report": None, "note": why}``."""
    facts = list(getattr(config, "facts", ()) or ()) if config is not None else []
    if not facts:
        return {"report": None, "note": "no facts configured (`facts:` in the config)"}
    try:
        from ..facts import track_facts
    except ImportError:  # pragma: no cover - analysis/facts ships with ctxf; kept for partial installs
        return {"report": None, "note": "fact tracking is not available"}
    th = config.analysis_thresholds.fact_presence_cosine if config else 0.6
    emb = config.embedding if config else None
    report = track_facts(ctx.prepared, facts, comparer.embedder(), store, timeline=ctx.timeline, threshold=th,
                         cache_enabled=emb.cache_enabled if emb else True, ttl_hours=emb.cache_ttl_hours if emb else 0)
    return {"report": report}
