"""The divergence report of two runs: the ``Divergence`` result and its JSON, built from two
runs' events (``diverge_runs``, pure) or from two stored sessions (``diverge``), and the
success/failure pairs of a store's tasks (``task_pairs``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .actions import is_read_only
from .alignment import OPS_SAME, Alignment, align_runs, block_end, in_preamble, position, preamble_end
from .applied import effective_edits
from .causes import classify, event_diff, explain, pair_similarity
from .compare import Comparer
from .context import RunContext, context_curve, context_state, run_context, track_run_facts
from .decisive import decisive_edit, final_patch
from .display import word_diff
from .events import GIVEN_TYPES, RunEvents, extract_events
from .inputs import given_inputs
from .patches import compare_patches

if TYPE_CHECKING:  # pragma: no cover
    from ...config.settings import Config
    from ...embed import Embedder, ProgressFn
    from ...store.db import Store

DIVERGE_VERSION = 1


@dataclass
class Divergence:
    """The divergence report of two runs; ``to_dict`` is ``ctxf diverge --json``."""

    version: int
    a: dict[str, Any]
    b: dict[str, Any]
    divergence: dict[str, Any] | None
    aligned: list[dict[str, Any]]
    curve: list[dict[str, Any]]
    preexisting: list[dict[str, Any]]
    detours: list[dict[str, Any]]
    skipped: dict[str, list[dict[str, Any]]]
    settings: dict[str, Any]
    decisive: dict[str, Any] = field(default_factory=dict)  # the first differing edit of the source files
    patches: dict[str, Any] = field(default_factory=dict)  # the two final patches compared
    inputs: dict[str, Any] = field(default_factory=dict)  # the given inputs compared as text

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (the CLI's ``--json``)."""
        return {"version": self.version, "a": self.a, "b": self.b, "divergence": self.divergence,
                "decisive": self.decisive, "patches": self.patches, "inputs": self.inputs,
                "aligned": self.aligned, "curve": self.curve, "preexisting": self.preexisting,
                "detours": self.detours, "skipped": self.skipped, "settings": self.settings}

    def summary(self, task: str | None = None) -> dict[str, Any]:
        """One line of ``--all-tasks``: the pair, the cause and where, the decisive edit, patches."""
        d = self.divergence or {}
        return {"task": task if task is not None else self.a.get("task"), "a": self.a["id"], "b": self.b["id"],
                "a_outcome": self.a.get("outcome"), "b_outcome": self.b.get("outcome"),
                "cause": d.get("cause"), "a_step": d.get("a_step"), "b_step": d.get("b_step"),
                "a_seq": d.get("a_seq"), "b_seq": d.get("b_seq"), "similarity": d.get("similarity"),
                "method": d.get("method"), "diverged": self.divergence is not None,
                "decisive": self.decisive, "patches": self.patches}


def _run_dict(row: dict[str, Any], rev: RunEvents, ctx: RunContext | None) -> dict[str, Any]:
    """A run as the report names it: the session, its harness, counts and replay."""
    return {"id": row["id"], "format": row["format"], "task": row.get("task"), "outcome": row.get("outcome"),
            "model": row.get("model"), "source": row.get("source"), "harness": rev.harness,
            "protocol": rev.protocol, "steps": len(rev.step_seqs), "events": len(rev.events),
            "aligned_events": len(rev.aligned()),
            "replay": {"model": ctx.model, "policy": ctx.policy} if ctx else None}


def diverge_runs(a: RunEvents, b: RunEvents, comparer: Comparer, *, ctx_a: RunContext | None = None,
                 ctx_b: RunContext | None = None, a_row: dict[str, Any] | None = None,
                 b_row: dict[str, Any] | None = None, facts_a: dict[str, Any] | None = None,
                 facts_b: dict[str, Any] | None = None, tolerate_detours: bool = True,
                 full: bool = False) -> Divergence:
    """The divergence report of two runs' events (pure: no store access)."""
    al = align_runs(a, b, comparer, tolerate_detours=tolerate_detours, full=full)
    div = _event_divergence(al, a, b, comparer, ctx_a, ctx_b, facts_a, facts_b)
    inputs, tools_div = given_inputs(al, a, b, a_row, b_row)
    if tools_div is not None and not (div and div["cause"] == "system_prompt" and div["a_step"] == 0):
        # the tool schemas go with the system prompt, before the task: an earlier divergence
        if div is not None:
            tools_div["detail"]["event_divergence"] = {k: div[k] for k in ("cause", "a_step", "b_step", "a_seq",
                                                                            "b_seq")}
        if ctx_a is not None and ctx_b is not None:
            tools_div["context"] = {"a": context_state(ctx_a, 1 if a.step_seqs else None, a.aligned(), facts_a),
                                    "b": context_state(ctx_b, 1 if b.step_seqs else None, b.aligned(), facts_b)}
        div = tools_div
    edits_a, edits_b = effective_edits(a), effective_edits(b)  # an edit that did not apply is never decisive
    patch_a, patch_b = final_patch(a, a_row, edits_a), final_patch(b, b_row, edits_b)
    curve = context_curve(al, ctx_a, ctx_b) if ctx_a is not None and ctx_b is not None else []
    skipped = {side: [{"seq": e.seq, "type": e.type, "reason": e.skip, "event": e.display}
                      for e in rev.events if e.skip] for side, rev in (("a", a), ("b", b))}
    return Divergence(
        version=DIVERGE_VERSION,
        a=_run_dict(a_row or {"id": a.session_id, "format": a.format}, a, ctx_a),
        b=_run_dict(b_row or {"id": b.session_id, "format": b.format}, b, ctx_b),
        divergence=div,
        aligned=[r.to_dict() for r in al.rows],
        curve=curve,
        preexisting=al.preexisting,
        detours=al.detours,
        skipped=skipped,
        settings={"divergence_cosine": comparer.threshold, "cross_harness": al.cross_harness,
                  "tolerate_detours": tolerate_detours, "compared": "all" if full else "to_divergence",
                  "embedded_chunks": comparer.embedded},
        decisive=decisive_edit(edits_a, edits_b, patch_a, patch_b),
        patches=compare_patches(patch_a, patch_b),
        inputs=inputs,
    )


def _event_divergence(al: Alignment, a: RunEvents, b: RunEvents, comparer: Comparer, ctx_a: RunContext | None,
                      ctx_b: RunContext | None, facts_a: dict[str, Any] | None, facts_b: dict[str, Any] | None
                      ) -> dict[str, Any] | None:
    """The report's ``divergence`` from the aligned events (None when the runs never part): the
    cause, the two events, how they compare, where the runs rejoin and each run's context."""
    if al.first is None:
        return None
    cause, ev_a, ev_b, detail = classify(al, ctx_a, ctx_b)
    end = block_end(al.rows, al.first)
    detail["rejoined"] = position(al.rows[end]) if end < len(al.rows) else None
    change = next((r for r in al.rows[al.first:] if r.op not in OPS_SAME and r.op != "detour"
                   and any(e is not None and e.type == "action" and not is_read_only(e.key) for e in (r.a, r.b))),
                  None)
    if change is not None:  # where the two environments parted (the first differing write)
        detail["first_state_change"] = {**position(change), "a": change.a.display if change.a else None,
                                        "b": change.b.display if change.b else None}
    sim, measure, method, reason = pair_similarity(comparer, ev_a, ev_b, al.rows)
    if cause == "run_ended":
        ended = detail["ended"]
        if ended == "a":
            ev_a = None
        else:
            ev_b = None
    a_step, b_step = (ev_a.step if ev_a else None), (ev_b.step if ev_b else None)
    if cause in ("system_prompt", "user_input") and in_preamble(al.rows[al.first], preamble_end(a.events),
                                                                preamble_end(b.events)):
        # given before the first model call: step 0 (the window shown is the first call's)
        detail["read_at_step"] = {"a": a_step, "b": b_step}
        a_step = b_step = 0
    div: dict[str, Any] = {
        "cause": cause,
        "a_step": a_step,
        "b_step": b_step,
        "a_seq": ev_a.seq if ev_a else None,
        "b_seq": ev_b.seq if ev_b else None,
        "similarity": sim,
        "measure": measure,
        "method": method,
        "reason": reason,
        "threshold": comparer.threshold if method == "embedding" else None,
        "a_event": ev_a.to_dict() if ev_a else None,
        "b_event": ev_b.to_dict() if ev_b else None,
        "row": al.first,
        "diff": event_diff(ev_a, ev_b),
        "detail": detail,
        "explanation": explain(cause, ev_a, ev_b, detail),
    }
    if cause in ("system_prompt", "user_input"):
        div["word_diff"] = word_diff(ev_a.text if ev_a and ev_a.type in GIVEN_TYPES else "",
                                     ev_b.text if ev_b and ev_b.type in GIVEN_TYPES else "")
    if ctx_a is not None and ctx_b is not None:
        sa = ev_a.step if ev_a else _last_step(a)
        sb = ev_b.step if ev_b else _last_step(b)
        div["context"] = {"a": context_state(ctx_a, sa, a.aligned(), facts_a),
                          "b": context_state(ctx_b, sb, b.aligned(), facts_b)}
    return div


def _last_step(rev: RunEvents) -> int | None:
    """A run's last model call (None: it made none)."""
    return len(rev.step_seqs) or None


def diverge(store: Store, a_id: str, b_id: str, *, model: str | None = None, config: Config | None = None,
            embedder: Embedder | Callable[[], Embedder] | None = None, policy: str | None = None,
            progress: ProgressFn | None = None, with_context: bool = True,
            tolerate_detours: bool = True, full: bool = False) -> Divergence:
    """Compare two stored runs: alignment, earliest divergence and its cause, context states.

    Pairs only the embedding model can decide are embedded up to the end of the diverging
    block; later ones are left ``not_compared`` unless ``full``.

    Without ``model`` each run is replayed under its recorded model with the ``recorded``
    policy (ground truth); with ``model`` both are replayed under that model (what-if).
    ``embedder`` may be a factory: the model is then created only if some pair needs it.
    """
    from ...config.settings import Config as _Config

    cfg = config or _Config()
    if embedder is None:
        def config_embedder() -> Embedder:
            from ...embed.embedders import embedder_for

            return embedder_for(cfg)

        embedder = config_embedder
    comparer = Comparer(embedder, store, threshold=cfg.analysis_thresholds.divergence_cosine,
                        cache_enabled=cfg.embedding.cache_enabled, ttl_hours=cfg.embedding.cache_ttl_hours,
                        progress=progress)
    rows = {sid: store.session(sid) for sid in (a_id, b_id)}
    runs = {sid: extract_events(store.messages(sid), rows[sid]["format"], sid, rows[sid].get("metadata"))
            for sid in (a_id, b_id)}
    ctx: dict[str, RunContext | None] = {a_id: None, b_id: None}
    facts: dict[str, dict[str, Any] | None] = {a_id: None, b_id: None}
    if with_context:
        for sid in (a_id, b_id):
            ctx[sid] = run = run_context(store, sid, model, cfg, policy)
            facts[sid] = track_run_facts(run, cfg, comparer, store)
    return diverge_runs(runs[a_id], runs[b_id], comparer, ctx_a=ctx[a_id], ctx_b=ctx[b_id], a_row=rows[a_id],
                        b_row=rows[b_id], facts_a=facts[a_id], facts_b=facts[b_id],
                        tolerate_detours=tolerate_detours, full=full)


def task_pairs(store: Store, task: str | None = None) -> list[tuple[str, str, str]]:
    """(task, success id, failure id) for every task with both outcomes.

    Each failure is paired with the task's first success in store order (``Store.sessions``: by
    start time, then id; sessions whose logs record no start after them, by id); with
    ``task`` only that task's pairs are returned.
    """
    by_task: dict[str, dict[str, list[str]]] = {}
    for r in store.sessions(task=task):
        if not r.get("task") or r.get("parent_id"):
            continue
        by_task.setdefault(r["task"], {}).setdefault(r["outcome"], []).append(r["id"])
    out: list[tuple[str, str, str]] = []
    for t in sorted(by_task):
        succ, fail = by_task[t].get("success", []), by_task[t].get("failure", [])
        if succ and fail:
            out.extend((t, succ[0], f) for f in fail)
    return out
