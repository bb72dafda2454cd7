"""Fact timelines: for each fact (a constraint, a number, a name), its state at every step.

The question this answers: "the agent broke constraint X at step 57 — was X even in its window
then, and when did it leave?" A fact is judged inside each step's replayed window.

States at step k (``STATES``), from the replayed window of that step:

``present``     a supporting message is in the window, within local attention and not deep in
                the middle of a long window;
``at_risk``     every supporting message in the window is either outside a local attention
                window (``outside_local_window``: only global layers reach it) or deep in the
                middle of a long window (``middle_of_long_window``: the window holds at least
                ``middle_min_tokens`` and the supporting chunk sits between ``middle_band``, by
                default 25%-75%, of it — "lost in the middle");
``summarized``  no original source is in the window, but a compaction summary in the window
                supports the fact (recorded compactions: judged on the summary's own text), or
                its sources were summarized by a simulated compaction (what-if: the simulated
                summary's content is unknown, so this is an assumption);
``gone``        none of the above, after it had been in the window before;

Under ``goal_anchoring`` a source the anchor restates is in view at every step from the one it
joined on (its copy is re-sent at the end of each window): ``present``, with the reason
``restated by goal anchoring`` at steps where only the copy holds it.

``not_yet``     before it first appeared.

A cleared tool result's content is gone (its placeholder stays), unless the log recorded the
clearing, in which case the stored text is the placeholder the model saw. When a step's sources
are at risk for both reasons, the reason given is ``middle_of_long_window`` (local attention still
reaches that one). A message's position is its in-window token offset plus the supporting chunk's
share of the message; a simulated compaction's summary is counted at the front of the window.

Per fact: ``first_appeared`` (first step not ``not_yet``), ``last_present`` (last step
``present`` or ``at_risk``), ``disappeared_at`` and ``cause`` (the first step it lost ground:
present/at_risk -> summarized/gone, or summarized -> gone; the cause names the policy event —
eviction, clearing, compaction recorded or simulated — and the seqs whose state change removed
it; ``departures`` lists every such step), ``restated`` (a new supporting message joins the
history while the fact is gone or only summarized), ``recollections`` (the model's own message at
a step whose window no longer holds the fact supports it: recalled without the source in view),
``near_misses`` (texts semantically close but missing the fact's numbers or names, a changed
budget, saying it the other way round: "polarity differs: 'Do not rename' vs 'You may
rename'", or not carrying a statement of the fact, a ban first: "does not carry the
prohibition 'no ad-hoc SQL outside migrations'"; a compaction summary is judged by the same rule,
so a summary that keeps the topic and drops the ban leaves the fact ``gone``, not
``summarized``). Per step, ``score`` is the best cosine of a supporting text in view (a recorded
summary counts), null when none is; a source holding the fact verbatim (``matching.verbatim``)
is marked ``verbatim``.

The presence rule (which texts support a fact) is ``presence``'s; this module turns its
supporters into per-step states over a replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...embed import EmbedStats, ProgressFn
from ...errors import UsageError
from ...matching.lexical import LexicalTokens
from ...matching.text import presence_text
from ...records import KIND_CLEARED_TOOL_RESULT, KIND_COMPACTION_SUMMARY
from .positions import Positions
from .presence import DEFAULT_THRESHOLD, SPAN_FLOOR, SPAN_OVERLAP, score_presence

if TYPE_CHECKING:  # pragma: no cover
    from ...embed import Embedder
    from ...store.db import Store, StoredMessage
    from ..replay import Prepared, Timeline

STATES = ("not_yet", "present", "at_risk", "summarized", "gone")
NOT_YET, PRESENT, AT_RISK, SUMMARIZED_F, GONE = range(5)
REASON_OUTSIDE_LOCAL = "outside_local_window"
REASON_MIDDLE = "middle_of_long_window"
REASON_RESTATED = "restated by goal anchoring"  # present: only the anchor's copy of its source is in view

# "Lost in the middle" (Liu et al., 2023) is a U-shaped recall curve over position; it is worth a
# warning only once a window is long. Both are parameters of ``track_facts``.
MIDDLE_MIN_TOKENS = 32_000
MIDDLE_BAND = (0.25, 0.75)


@dataclass
class FactTimeline:
    """One fact over a session's steps."""

    fact: str
    tokens: LexicalTokens
    state: np.ndarray  # int8 per step, index into STATES
    score: np.ndarray  # float32 per step, nan when no supporting text is in view
    source: np.ndarray  # int64 per step: seq of the best supporting message in view, -1 if none
    reason: list[str | None]  # per step: why at_risk
    first_appeared: int | None = None
    last_present: int | None = None
    first_at_risk: int | None = None
    disappeared_at: int | None = None
    cause: dict[str, Any] | None = None
    departures: list[dict[str, Any]] = field(default_factory=list)
    restated: list[dict[str, Any]] = field(default_factory=list)
    recollections: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    near_misses: list[dict[str, Any]] = field(default_factory=list)

    def state_at(self, step: int) -> str:
        """The fact's state at ``step`` (1-based)."""
        return STATES[int(self.state[step - 1])]

    @property
    def final_state(self) -> str | None:
        """The state at the last step (None for a session without steps)."""
        return STATES[int(self.state[-1])] if len(self.state) else None

    def to_dict(self, step_seqs: Sequence[int]) -> dict[str, Any]:
        timeline = []
        for k in range(len(self.state)):
            sc = self.score[k]
            src = int(self.source[k])
            timeline.append({
                "step": k + 1,
                "message_seq": int(step_seqs[k]),
                "state": STATES[int(self.state[k])],
                "score": None if np.isnan(sc) else round(float(sc), 4),
                "source_seq": src if src >= 0 else None,
                "reason": self.reason[k],
            })
        return {
            "fact": self.fact,
            "tokens": self.tokens.to_dict(),
            "first_appeared": self.first_appeared,
            "last_present": self.last_present,
            "first_at_risk": self.first_at_risk,
            "disappeared_at": self.disappeared_at,
            "cause": self.cause,
            "final_state": self.final_state,
            "departures": self.departures,
            "restated": self.restated,
            "recollections": self.recollections,
            "sources": self.sources,
            "near_misses": self.near_misses,
            "timeline": timeline,
        }


@dataclass
class FactReport:
    """Every fact's timeline over one replay, and how it was judged (``ctxf facts --json``)."""

    facts: list[FactTimeline]
    step_seqs: list[int]
    threshold: float
    model: str
    policy: str
    embedding: dict[str, str]
    stats: EmbedStats
    middle_min_tokens: int
    middle_band: tuple[float, float]
    spans: dict[str, Any] = field(default_factory=dict)  # what span scoring cost (score_presence)
    # which method ran (prefiltered or exhaustive) and how many unique chunks were encoded of how many
    method: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "policy": self.policy,
            "threshold": self.threshold,
            "embedding": self.embedding,
            "middle": {"min_tokens": self.middle_min_tokens, "band": list(self.middle_band)},
            "steps": len(self.step_seqs),
            "facts": [f.to_dict(self.step_seqs) for f in self.facts],
            "embed_stats": self.stats.to_dict(),
            "spans": self.spans,
            "method": self.method,
        }


def track_facts(
    prepared: Prepared,
    facts: Sequence[str],
    embedder: Embedder,
    store: Store | None = None,
    *,
    timeline: Timeline | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    middle_min_tokens: int = MIDDLE_MIN_TOKENS,
    middle_band: tuple[float, float] = MIDDLE_BAND,
    cache_enabled: bool = True,
    ttl_hours: float = 0,
    progress: ProgressFn | None = None,
    stats: EmbedStats | None = None,
    exhaustive: bool = False,
) -> FactReport:
    """Each fact's state at every step of a replay (the module docstring gives the states;
    ``presence`` the presence rule). Only the chunks that could support a fact are embedded
    (``prefilter``) unless ``exhaustive`` asks for the full method (every chunk embedded; near
    misses searched among all of them)."""
    from ..replay import Timeline as _Timeline, get_policy
    from ..replay.policies import CLEARED, KEPT, OUTSIDE_LOCAL, SUMMARIZED

    if not facts:
        raise UsageError("no facts to track",
                         hint="give --fact TEXT, --facts-file FILE or a `facts:` list in the config; "
                              "`ctxf facts suggest SESSION` proposes some")
    lo_band, hi_band = middle_band
    if not 0 <= lo_band <= hi_band <= 1:
        raise UsageError(f"middle_band must be 0 <= lo <= hi <= 1, got {middle_band!r}")
    if timeline is None:
        results, _ = prepared.run()
        timeline = _Timeline.from_results(prepared.inp, results)
    inp = prepared.inp
    msgs = prepared.messages
    m = len(timeline.steps)
    step_seqs = [int(s) for s in timeline.steps]
    step_of_seq = {s: k + 1 for k, s in enumerate(step_seqs)}
    stats = stats if stats is not None else EmbedStats()

    # Only messages that enter some window, or that make a call (recollection), can matter.
    texts = [presence_text(sm.message) for sm in msgs]
    skip = [not (int(timeline.joins[i]) > 0 or i in step_of_seq) for i in range(len(msgs))]
    pres = score_presence(facts, texts, embedder, store, threshold=threshold, skip=skip,
                          cache_enabled=cache_enabled, ttl_hours=ttl_hours, progress=progress,
                          stats=stats, prefilter=not exhaustive)
    simulated = prepared.policy != "recorded"
    # goal anchoring re-sends some messages at every call: their content stays in view
    restates = getattr(get_policy(prepared.policy), "restated", None)
    restated = set(restates(inp, prepared.params)[0]) if restates is not None else set()
    precleared = {i for i, sm in enumerate(msgs) if sm.message.kind == KIND_CLEARED_TOOL_RESULT}
    window = np.array([r.window_tokens for r in timeline.results], dtype=np.int64)
    long_steps = window >= middle_min_tokens
    positions = Positions(inp, timeline) if long_steps.any() else None

    out: list[FactTimeline] = []
    for f, fact in enumerate(facts):
        sup = [int(i) for i in pres.supporters(f)]
        summaries = [i for i in sup if msgs[i].message.kind == KIND_COMPACTION_SUMMARY]
        sources = [i for i in sup if msgs[i].message.kind != KIND_COMPACTION_SUMMARY]
        state_rows = {i: timeline.states(i) for i in sup}
        sc = {i: float(pres.score[f, i]) for i in sup}

        best = np.full(m, -np.inf, dtype=np.float32)
        best_src = np.full(m, -1, dtype=np.int64)
        kept_ok = np.zeros(m, dtype=bool)
        kept_mid = np.zeros(m, dtype=bool)
        outside = np.zeros(m, dtype=bool)
        in_view: dict[int, np.ndarray] = {}

        mid_rows: dict[int, np.ndarray] = {}
        if positions is not None and sources:
            cand = [i for i in sources if np.any((state_rows[i] == KEPT) & long_steps)]
            if cand:
                offs = positions.offsets(cand)
                total = positions.extra + positions.in_window
                for row, i in zip(offs, cand):
                    ch = pres.chunked.chunks[int(pres.chunk[f, i])]
                    inside = ch.start / max(len(texts[i]), 1)
                    pos = row + inside * int(inp.tokens[i])
                    rel = np.divide(pos, total, out=np.zeros(m), where=total > 0)
                    mid_rows[i] = long_steps & (rel >= lo_band) & (rel <= hi_band)

        by_anchor = np.zeros(m, dtype=bool)  # in view only as goal anchoring's restatement
        for i in sources:
            st = state_rows[i]
            kept = st == KEPT
            if i in precleared:
                kept = kept | (st == CLEARED)
            out_l = st == OUTSIDE_LOCAL
            view = kept | out_l
            if i in restated:  # its copy is re-sent at the end of every window from the call it joined
                by_anchor |= (st >= 0) & ~view
                view = st >= 0
                kept_ok |= view
            in_view[i] = view
            mid = mid_rows.get(i)
            if mid is not None:
                kept_ok |= kept & ~mid
                kept_mid |= kept & mid
            else:
                kept_ok |= kept
            outside |= out_l
            better = view & (sc[i] > best)
            best[better] = sc[i]
            best_src[better] = i
        summary_view = np.zeros(m, dtype=bool)
        summary_best = np.full(m, -np.inf, dtype=np.float32)
        summary_src = np.full(m, -1, dtype=np.int64)
        for i in summaries:
            st = state_rows[i]
            view = (st == KEPT) | (st == OUTSIDE_LOCAL)
            in_view[i] = view
            summary_view |= view
            better = view & (sc[i] > summary_best)
            summary_best[better] = sc[i]
            summary_src[better] = i
        assumed = np.zeros(m, dtype=bool)
        if simulated:
            for i in sources:
                assumed |= state_rows[i] == SUMMARIZED

        state = np.full(m, NOT_YET, dtype=np.int8)
        present = kept_ok
        at_risk = ~present & (kept_mid | outside)
        summarized = ~present & ~at_risk & (summary_view | assumed)
        has = present | at_risk | summarized
        seen_before = np.concatenate([[False], np.cumsum(has)[:-1] > 0]) if m else np.zeros(0, bool)
        state[present] = PRESENT
        state[at_risk] = AT_RISK
        state[summarized] = SUMMARIZED_F
        state[~has & seen_before] = GONE
        reason: list[str | None] = [None] * m
        for k in np.flatnonzero(at_risk).tolist():
            reason[k] = REASON_MIDDLE if kept_mid[k] else REASON_OUTSIDE_LOCAL
        if restated:
            direct = np.zeros(m, dtype=bool)
            for i in sources:
                direct |= (state_rows[i] == KEPT) | (state_rows[i] == OUTSIDE_LOCAL)
            for k in np.flatnonzero(present & by_anchor & ~direct).tolist():
                reason[k] = REASON_RESTATED
        score = np.where(present | at_risk, best, np.nan).astype(np.float32)
        source = np.where(present | at_risk, best_src, -1)
        by_summary = summarized & summary_view
        score[by_summary] = summary_best[by_summary]
        source[by_summary] = summary_src[by_summary]

        ft = FactTimeline(fact=fact, tokens=pres.tokens[f], state=state, score=score, source=source,
                          reason=reason)
        idx = np.flatnonzero(has)
        if idx.size:
            ft.first_appeared = int(idx[0]) + 1
        idx = np.flatnonzero(present | at_risk)
        if idx.size:
            ft.last_present = int(idx[-1]) + 1
        idx = np.flatnonzero(at_risk)
        if idx.size:
            ft.first_at_risk = int(idx[0]) + 1
        _departures(ft, prepared, timeline, msgs, in_view, state_rows)
        if ft.departures:
            ft.disappeared_at = ft.departures[0]["step"]
            ft.cause = ft.departures[0]["cause"]
        # Restated: a new source joins while the fact is gone or only summarized.
        for i in sources:
            j = int(timeline.joins[i])
            if j >= 2 and state[j - 2] in (GONE, SUMMARIZED_F) and state[j - 1] in (PRESENT, AT_RISK):
                ft.restated.append({"step": j, "seq": i, "role": msgs[i].message.role,
                                    "score": round(sc[i], 4)})
        ft.restated.sort(key=lambda r: (r["step"], r["seq"]))
        # Recollection: the model states the fact at a step whose window no longer holds it.
        for i in sup:
            k = step_of_seq.get(i)
            if k is not None and state[k - 1] == GONE:
                ft.recollections.append({"step": k, "seq": i, "score": round(sc[i], 4)})
        ft.sources = [{"seq": i, "role": msgs[i].message.role, "kind": msgs[i].message.kind,
                       "joins_step": int(timeline.joins[i]) or None, "score": round(sc[i], 4),
                       "chunk": pres.chunked.chunks[int(pres.chunk[f, i])].text,
                       "span": pres.matched_text(f, i), "verbatim": (f, i) in pres.verbatim}
                      for i in sup]
        near = sorted(pres.near[f].items(), key=lambda kv: -kv[1][0])
        ft.near_misses = []
        for t, (s, c, miss) in near[:10]:
            conflict = pres.conflicts[f].get(t)
            drop = pres.dropped[f].get(t)
            ft.near_misses.append({
                "seq": t, "role": msgs[t].message.role, "joins_step": int(timeline.joins[t]) or None,
                "score": round(s, 4), "missing": miss,
                "polarity": conflict.to_dict() if conflict is not None else None,
                "dropped": drop.to_dict() if drop is not None else None,
                "reason": near_reason(miss, conflict, drop),
                "chunk": pres.chunked.chunks[c].text, "span": pres.matched_text(f, t, near=True)})
        out.append(ft)
    return FactReport(
        facts=out, step_seqs=step_seqs, threshold=threshold, model=prepared.spec.name,
        policy=prepared.policy,
        embedding={"model": embedder.name, "revision": str(embedder.revision)},
        stats=stats, middle_min_tokens=middle_min_tokens, middle_band=(lo_band, hi_band),
        spans={"pairs_split": pres.spans_scored, "span_texts": pres.span_texts, "floor": SPAN_FLOOR,
               "overlap": SPAN_OVERLAP},
        method=pres.plan,
    )


def near_reason(missing: Sequence[str], conflict: Any, dropped: Any) -> str:
    """Why a close text does not hold the fact: the tokens it lacks, the polarity it flips, or
    the statement of the fact it does not carry."""
    if conflict is not None:
        return conflict.reason
    if dropped is not None:
        return dropped.reason
    return "missing " + ", ".join(missing)


_CAUSE_OF_STATE = {"evicted": "eviction", "cleared": "clearing", "summarized": "compaction"}
_STATE_OF_CAUSE = {v: k for k, v in _CAUSE_OF_STATE.items()}


def _departures(ft: FactTimeline, prepared: Prepared, timeline: Timeline, msgs: list[StoredMessage],
                in_view: dict[int, np.ndarray], state_rows: dict[int, np.ndarray]) -> None:
    """Each step where the fact lost ground (present/at_risk -> summarized/gone, or
    summarized -> gone), with the policy event and the messages whose change caused it."""
    from ..replay.policies import STATE_NAMES

    rank = {PRESENT: 2, AT_RISK: 2, SUMMARIZED_F: 1, GONE: 0, NOT_YET: 0}
    st = ft.state
    for k in range(1, len(st)):
        before, after = int(st[k - 1]), int(st[k])
        if rank[after] >= rank[before]:
            continue
        removed = [i for i, v in in_view.items() if v[k - 1] and not v[k]]
        by_type: dict[str, list[int]] = {}
        for i in sorted(removed):
            name = STATE_NAMES[int(state_rows[i][k])]
            by_type.setdefault(_CAUSE_OF_STATE.get(name, name), []).append(i)
        events = timeline.results[k].events
        cause = None
        for kind in ("compaction", "eviction", "clearing"):
            if kind in by_type:
                ev = next((e for e in events if e.get("type") == kind), None)
                if ev is None:  # a recorded history edit evicts or summarizes what it lists
                    ev = next((e for e in events if e.get("type") == "history_edit"
                               and e.get("action") == _STATE_OF_CAUSE.get(kind)), None)
                if ev is None and kind in ("eviction", "clearing"):  # an agent's edit the log did not record
                    ev = next((e for e in events if e.get("type") == "unrecorded_truncation"), None)
                if ev is None and kind == "eviction":  # what the harness never sends again
                    ev = next((e for e in events if e.get("type") == "left_out"
                               and set(e.get("seqs") or ()) & set(by_type[kind])), None)
                cause = {
                    "type": (ev or {}).get("type", kind),
                    "policy": (ev or {}).get("policy", prepared.policy),
                    "recorded": bool((ev or {}).get("recorded", prepared.policy == "recorded")),
                    "seqs": by_type[kind],
                    "roles": [msgs[i].message.role for i in by_type[kind]],
                    "event": ev,
                }
                break
        if cause is None and by_type:  # e.g. a source outside the local window, then evicted
            kind, seqs = next(iter(by_type.items()))
            cause = {"type": kind, "policy": prepared.policy, "recorded": prepared.policy == "recorded",
                     "seqs": seqs, "roles": [msgs[i].message.role for i in seqs], "event": None}
        ft.departures.append({"step": k + 1, "from": STATES[before], "to": STATES[after], "cause": cause})
