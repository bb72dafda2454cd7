"""Policies compared on one session: which keep each fact to the last call, and at what token cost.

``compare_policies`` replays one session under one model with every registered simulation policy
(its default parameters; ``constraint_selection`` and ``goal_anchoring`` pin or restate the facts
compared) and the log's own record (``recorded``), tracks the facts through each (``track_facts``:
the same presence rule as ``ctxf facts``; embeddings are cached, so each text is embedded once),
and reports per policy and fact:

- the fact's state at the last step, and whether it was **kept** to the end (``present`` or
  ``at_risk``: a supporting message in view). ``summarized`` is not kept: a simulated summary's
  text is not in the log, so whether it carried the fact is unknown;
- the step it first lost ground (``lost_at``) and how (the policy event);

and the cost: the mean and final window tokens, the tokens sent over all calls (the sum of the
windows), the synthetic tokens among them (simulated summaries, goal anchoring's restatements:
estimates), the calls over the budget and whether they would fail. Every token figure carries
the replay's kind (exact, calibrated or estimated).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ...errors import CtxfError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from ...config.settings import Config
    from ...embed import Embedder
    from ...store.db import Store

COMPARE_VERSION = 1
KEPT_STATES = ("present", "at_risk")
# Not compared: ``recorded`` is added once as "the log's record"; the rest replay with defaults.
RECORDED = "recorded"


@dataclass
class PolicyRow:
    """One policy's replay of the session: its facts at the end and its token cost."""

    policy: str
    label: str
    params: dict[str, Any]
    token_kind: str | None = None
    steps: int = 0
    mean_window_tokens: int | None = None
    final_window_tokens: int | None = None
    total_tokens_sent: int | None = None
    synthetic_tokens_sent: int | None = None
    overflow_steps: int = 0
    would_fail_steps: int = 0
    facts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def kept(self) -> int:
        return sum(1 for f in self.facts if f["kept_to_end"])

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "label": self.label, "params": self.params, "token_kind": self.token_kind,
                "steps": self.steps, "kept": self.kept, "facts": self.facts,
                "mean_window_tokens": self.mean_window_tokens, "final_window_tokens": self.final_window_tokens,
                "total_tokens_sent": self.total_tokens_sent, "synthetic_tokens_sent": self.synthetic_tokens_sent,
                "overflow_steps": self.overflow_steps, "would_fail_steps": self.would_fail_steps,
                "notes": self.notes, "error": self.error}


@dataclass
class PolicyComparison:
    """``ctxf replay SESSION --model M --compare-policies --json``."""

    model: str
    limit: int
    budget: int
    facts: list[str]
    rows: list[PolicyRow]
    assumed: dict[str, Any] | None = None
    embedding: dict[str, str] = field(default_factory=dict)
    threshold: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"version": COMPARE_VERSION, "model": self.model, "limit": self.limit, "budget": self.budget,
                "assumed": self.assumed, "facts": self.facts, "threshold": self.threshold,
                "embedding": self.embedding, "policies": [r.to_dict() for r in self.rows]}


def policies_compared() -> list[str]:
    """Every registered simulation policy, by name (``recorded`` is the log's record, added apart)."""
    from ..replay.policies import policies

    return [name for name in policies() if name != RECORDED]


def _row(store: Store, session_id: str, model: Any, policy: str, label: str, facts: Sequence[str],
         embedder: Embedder, config: Config | None, threshold: float, cache: bool,
         progress: Any = None) -> tuple[PolicyRow, Any]:
    from ..replay import Timeline, get_policy, prepare
    from .timeline import track_facts

    params: dict[str, Any] = {}
    if getattr(get_policy(policy), "uses_facts", False):
        params["facts"] = list(facts)
    prep = prepare(store, session_id, model, config=config, policy=policy, params=params)
    results, _ = prep.run()
    tl = Timeline.from_results(prep.inp, results)
    report = track_facts(prep, facts, embedder, store, timeline=tl, threshold=threshold, cache_enabled=cache,
                          progress=progress)
    windows = [r.window_tokens for r in results]
    shown = {k: v for k, v in prep.params.items() if k not in ("facts", "pinned_facts")}
    row = PolicyRow(policy=policy, label=label, params=shown, token_kind=prep.counted.kind, steps=len(results))
    if windows:
        row.mean_window_tokens = round(sum(windows) / len(windows))
        row.final_window_tokens = windows[-1]
        row.total_tokens_sent = sum(windows)
        row.synthetic_tokens_sent = sum(r.extra for r in results)
    row.overflow_steps = sum(1 for r in results if r.overflow)
    row.would_fail_steps = sum(1 for r in results if any(e.get("type") == "overflow" and e.get("would_fail")
                                                         for e in r.events))
    for ft in report.facts:
        restated = any(r == "restated by goal anchoring" for r in ft.reason)
        row.facts.append({
            "fact": ft.fact, "final_state": ft.final_state, "kept_to_end": ft.final_state in KEPT_STATES,
            "lost_at": ft.disappeared_at, "cause": (ft.cause or {}).get("type"),
            "restated": restated, "stated": ft.first_appeared is not None})
    pinned = prep.params.get("pinned_facts")
    if isinstance(pinned, dict):
        missing = [f for f, seqs in pinned.items() if not seqs]
        if missing:
            row.notes.append(f"no message states {len(missing)} fact(s) lexically, so they were not "
                             f"{'restated' if policy == 'goal_anchoring' else 'pinned'}: "
                             + "; ".join(repr(f) for f in missing))
    return row, prep


def compare_policies(store: Store, session_id: str, model: str | None, facts: Sequence[str], embedder: Embedder,
                     *, config: Config | None = None, threshold: float = 0.6, cache_enabled: bool = True,
                     policies: Sequence[str] | None = None, progress: Any = None) -> PolicyComparison:
    """Each policy's replay of the session under ``model``: the facts kept to the end and the cost."""
    from ..replay import resolve_spec

    if not facts:
        raise UsageError("no facts to compare the policies on",
                         hint="give --fact TEXT (repeatable) or --facts-file FILE, or list them under `facts:` "
                              "in the config; `ctxf facts suggest SESSION` proposes some")
    names = list(policies) if policies is not None else policies_compared()
    spec = resolve_spec(store.session(session_id), model, config)
    rows: list[PolicyRow] = []
    first = None
    for name in names + [RECORDED]:
        label = "the log's record" if name == RECORDED else name
        try:
            row, prep = _row(store, session_id, spec, name, label, facts, embedder, config, threshold,
                             cache_enabled, progress)
        except CtxfError as exc:  # a what-if ctxf cannot run is a row that says so
            rows.append(PolicyRow(policy=name, label=label, params={}, error=str(exc)))
            continue
        first = first or prep
        rows.append(row)
    bound = first.spec if first is not None else spec
    return PolicyComparison(model=bound.name, limit=bound.context_limit, budget=bound.budget, facts=list(facts),
                            rows=rows, assumed=bound.assumed_dict(), threshold=threshold,
                            embedding={"model": embedder.name, "revision": str(embedder.revision)})
