"""The drift curve: per step, how far the recent assistant output has moved from the session's goal.

The goal (``goal``), the score bands (``verdicts``) and the explanations (``explain``) have
their own modules; this one measures.

**What is measured.** Each step's assistant output is its text plus the string values of its
tool-call arguments (a ``{"query": "banana bread"}`` call is about banana bread; JSON keys,
tool names and reasoning records are left out). An output with fewer than ``MIN_WORDS`` words
(``ls -la``, ``{"element_id": 151}``, "No") cannot be judged by an embedding: it is marked
unjudged and the step keeps the window of the outputs before it.

**Similarity.** The goal and every judged output are chunked (``embed.chunk_text``: sentences,
short lines packed to ~16 wordpieces) and each unique chunk is embedded once (cached in the
store). The goal's *references* are its centroid (normalised mean of its chunk vectors) and the
centroid of each of its sections (runs of up to ``SECTION_CHUNKS`` = 8 chunks, ~128 wordpieces,
within one goal message). A reply's similarity is the best, over the references, of the *mean
cosine of its chunks* with the reference (the dot product of the reply's un-normalised mean
vector with it).

- Mean cosine, not the cosine of a re-normalised reply centroid, because only the mean is
  length-neutral: a re-normalised centroid of many varied chunks shrinks toward what all text
  shares and so moves toward every reference as a reply gets longer (measured: four off-topic
  replies at 0.05-0.15 each scored 0.28 joined into one). With the mean, a reply of N chunks
  scores the average of its parts, whatever N.
- Sections, because agent goals are mostly scaffold: a SWE-bench goal is a few lines of issue
  inside ~6,000 characters of instructions. Against the whole goal's centroid, gpt-5-mini
  reading exactly the right files (``nl -ba django/contrib/messages/storage/base.py``) scores
  window medians 0.24-0.32 (4-86% of steps >= MILD); against the issue's own section 0.31-0.40
  (93-100%). A chat goal of one or two short messages has one section per message.
- Chunks are sampled evenly down to ``MAX_CHUNKS_PER_MESSAGE`` (goal: ``MAX_GOAL_CHUNKS``)
  first: a mean over 32 evenly spread chunks is already stable, and a 3,000-line file an agent
  writes would otherwise cost minutes of MiniLM for no change in the score. Everything after the
  embedding is matrix arithmetic.

**Window.** The similarity ``s`` of step k is a weighted mean over the last ``window_size``
judged outputs up to k, with linear recency weights 1, 2, ..., n (the newest weighs most):
"where the conversation is now", smoothed so that one short or odd reply does not swing the
verdict. Each reply counts once whatever its length.

**Replay.** With a ``Timeline`` (``replay.prepare(...).run()``) the report marks the step at
which a goal message left the window under the replayed policy (``goal_left_window``), or came
back (``goal_returned``): under the ``recorded`` policy what the log says happened, under a
model's policy a what-if. An explicit goal text has no messages, so no such events.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ...config.settings import DriftConfig
from ...embed import Embedder, EmbedStats, ProgressFn, chunk_text, embed_texts, normalize
from ...matching.text import json_strings
from .explain import drift_phrases, explain, window_terms
from .goal import Goal, assess_goal, explicit_goal, goal_from_messages, no_text_goal
from .report import DriftReport, DriftStep
from .templates import template_index
from .terms import goal_keywords, terms
from .verdicts import score_from_similarity, verdict

if TYPE_CHECKING:  # pragma: no cover
    from ...records import Message
    from ..replay import Prepared, Timeline
    from ...store.db import Store

MIN_WORDS = 3
MAX_CHUNKS_PER_MESSAGE = 32
MAX_GOAL_CHUNKS = 256
SECTION_CHUNKS = 8  # a goal section: up to 8 chunks (~128 wordpieces) of one goal message
# A word, for MIN_WORDS.
_WORD = re.compile(r"[^\W\d_]{2,}")

_DEFAULTS = DriftConfig()
T = TypeVar("T")


def assistant_output(m: Message) -> str:
    """What an assistant message said: its text and the string values of its tool-call arguments."""
    parts = [m.text] if m.text and not m.text.isspace() else []
    for call in m.tool_calls:
        parts.extend(_argument_strings(call.arguments))
    return "\n".join(parts)


def _argument_strings(arguments: str) -> list[str]:
    """The non-blank string values of a tool call's JSON arguments (the arguments as they are when not JSON)."""
    if not arguments:
        return []
    try:
        value = json.loads(arguments)
    except (ValueError, TypeError):
        return [arguments]
    return [v for v in json_strings(value) if v.strip()]


def _sample(chunks: list[T], limit: int) -> list[T]:
    """At most ``limit`` chunks, evenly spread over the text (first and last kept)."""
    if len(chunks) <= limit:
        return chunks
    idx = np.unique(np.round(np.linspace(0, len(chunks) - 1, limit)).astype(int))
    return [chunks[i] for i in idx]


def _goal_chunks(goal: Goal) -> tuple[list[str], np.ndarray]:
    """The goal's chunk texts (evenly sampled to MAX_GOAL_CHUNKS) and each chunk's section: runs of
    SECTION_CHUNKS consecutive chunks within one goal message."""
    parts = goal.parts or (("user", goal.text),)
    pairs = [(i, c.text) for i, (_, text) in enumerate(parts) for c in chunk_text(text)]
    pairs = _sample(pairs, MAX_GOAL_CHUNKS)
    sections: list[int] = []
    sec, prev_part, run = -1, None, 0
    for part, _ in pairs:
        if part != prev_part or run == SECTION_CHUNKS:
            sec, prev_part, run = sec + 1, part, 0
        sections.append(sec)
        run += 1
    return [t for _, t in pairs], np.asarray(sections, dtype=np.int64)


def _means(vecs: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Mean of each owner's rows (float64); an owner with no rows gets a zero vector."""
    sums = np.zeros((n, vecs.shape[1]), dtype=np.float64)
    np.add.at(sums, owner, vecs)
    counts = np.bincount(owner, minlength=n)[:, None]
    return np.divide(sums, counts, out=sums, where=counts > 0)


def _centroids(vecs: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Normalised mean of each owner's rows: a direction to compare against."""
    return normalize(_means(vecs, owner, n))


def _goal_events(goal: Goal, timeline: Timeline | None, n_steps: int) -> dict[int, list[dict[str, Any]]]:
    """Step (1-based) -> goal_left_window / goal_returned events, from each goal message's states."""
    if timeline is None or not goal.seqs or n_steps == 0:
        return {}
    from ..replay.policies import IN_WINDOW, STATE_NAMES

    states = {sq: timeline.states(sq)[:n_steps] for sq in goal.seqs}
    inside = {sq: np.isin(st, IN_WINDOW) for sq, st in states.items()}
    out: dict[int, list[dict[str, Any]]] = {}
    for k in range(n_steps):
        left = [sq for sq in goal.seqs if not inside[sq][k] and (k == 0 or inside[sq][k - 1])
                and int(states[sq][k]) >= 0]
        back = [sq for sq in goal.seqs if k > 0 and inside[sq][k] and not inside[sq][k - 1]
                and int(states[sq][k - 1]) >= 0]  # joining late (NOT_YET -> KEPT) is not a return
        remaining = [sq for sq in goal.seqs if inside[sq][k]]
        if left:
            out.setdefault(k + 1, []).append({
                "type": "goal_left_window", "seqs": left,
                "states": {str(sq): STATE_NAMES[int(states[sq][k])] for sq in left},
                "remaining": remaining, "all_gone": not remaining,
            })
        if back:
            out.setdefault(k + 1, []).append({"type": "goal_returned", "seqs": back, "remaining": remaining})
    return out


def drift_curve(
    prepared: Prepared,
    timeline: Timeline | None,
    embedder: Embedder,
    store: Store | None,
    goal: Goal | str | None = None,
    window_size: int = _DEFAULTS.window_size,
    *,
    on_topic_similarity: float = _DEFAULTS.on_topic_similarity,
    off_topic_similarity: float = _DEFAULTS.off_topic_similarity,
    progress: ProgressFn | None = None,
    cache_enabled: bool = True,
    ttl_hours: float = 0,
    stats: EmbedStats | None = None,
) -> DriftReport:
    """Score every step of a prepared session against its goal (see the module docstring).

    ``timeline`` (from ``prepared.run()``) adds the goal_left_window events; None skips them.
    ``goal`` is a ``Goal``, a text (source "option"), or None for the session's opening.
    """
    from ...errors import UsageError

    if window_size < 1:
        raise UsageError(f"window size must be >= 1, got {window_size}")
    if on_topic_similarity <= off_topic_similarity:
        raise UsageError("on_topic_similarity must be above off_topic_similarity")
    messages = prepared.messages
    if isinstance(goal, str):
        goal = explicit_goal(goal, "option")
    if goal is None:
        opening = goal_from_messages(messages)
        if opening is None:  # nothing to judge against: reported as such, never an error
            goal = no_text_goal()
        else:
            fmt = prepared.session.get("format")
            keyed = bool(prepared.session.get("task"))
            goal = assess_goal(opening, template_index(store, fmt, keyed) if store is not None and fmt else None)
    step_seqs = [int(s) for s in prepared.inp.steps]
    n = len(step_seqs)
    if goal.state == "no_goal":  # nothing to measure against: no embedding, no score, no verdict
        return _not_judged(prepared, timeline, embedder, goal, window_size, step_seqs,
                           on_topic_similarity, off_topic_similarity, stats)
    by_seq = {sm.seq: sm for sm in messages}
    outputs = [assistant_output(by_seq[sq].message) for sq in step_seqs]
    judged = [len(_WORD.findall(o)) >= MIN_WORDS for o in outputs]

    # One embedding call: the goal's chunks, then the judged outputs' chunks (owner k).
    goal_chunks, goal_sections = _goal_chunks(goal)
    if not goal_chunks:
        raise UsageError("the goal has no text to embed", hint="pass the goal with --goal TEXT")
    texts = list(goal_chunks)
    owner: list[int] = []
    for k, o in enumerate(outputs):
        if judged[k]:
            cs = _sample(chunk_text(o), MAX_CHUNKS_PER_MESSAGE)
            if not cs:
                judged[k] = False
            texts.extend(c.text for c in cs)
            owner.extend([k] * len(cs))
    st = stats if stats is not None else EmbedStats()
    g = len(goal_chunks)
    if len(texts) == g:  # no reply to judge: embedding the goal alone could not change anything
        texts = []
        if progress:
            progress(0, 0)
    vecs = embed_texts(texts, embedder, store, cache_enabled=cache_enabled, ttl_hours=ttl_hours,
                       progress=progress, stats=st) if texts else np.zeros((g, int(embedder.dim)), np.float32)
    references = np.vstack([_centroids(vecs[:g], np.zeros(g, dtype=np.int64), 1),  # the goal as a whole
                            _centroids(vecs[:g], goal_sections, int(goal_sections.max()) + 1)])  # its sections
    # Not re-normalised: a reply's mean vector . a reference = the mean cosine of its chunks with it.
    means = _means(vecs[g:], np.asarray(owner, dtype=np.int64), n)
    msg_sim = (means @ references.T).max(axis=1) if n else np.zeros(0)

    # Lexical side: goal keywords, per-output terms (computed once each).
    kw = goal_keywords(goal.task_parts or goal.parts or (("user", goal.text),))
    goal_terms = terms(goal.text)
    out_terms = [terms(o) if judged[k] else None for k, o in enumerate(outputs)]
    events = _goal_events(goal, timeline, n)

    steps: list[DriftStep] = []
    recent: list[int] = []  # indices of judged outputs, newest last, at most window_size
    for k in range(n):
        if judged[k]:
            recent.append(k)
            del recent[:-window_size]
        own = float(msg_sim[k]) if judged[k] else None
        if recent:
            w = np.arange(1, len(recent) + 1, dtype=np.float64)
            s = float(np.dot(w, msg_sim[recent]) / w.sum())
            score = score_from_similarity(s, on_topic_similarity, off_topic_similarity)
        else:
            s, score = None, None
        v = verdict(score)
        phrases = []
        if own is not None and score_from_similarity(own, on_topic_similarity, off_topic_similarity) < 75:
            phrases = drift_phrases(by_seq[step_seqs[k]].message.text)
        missing, topics = window_terms(kw, goal_terms, [out_terms[i] for i in recent])
        steps.append(DriftStep(
            step=k + 1, message_seq=step_seqs[k], score=score, verdict=v,
            similarity=None if s is None else round(s, 4), message_similarity=None if own is None else round(own, 4),
            judged=judged[k], window=[step_seqs[i] for i in recent],
            explanation=explain(v, s, kw, missing, topics, phrases, bool(recent)),
            missing_keywords=missing, new_topics=topics, phrases=phrases, events=events.get(k + 1, []),
        ))
    return DriftReport(
        session_id=prepared.session["id"], goal=goal, keywords=[surf for _, surf in kw], window_size=window_size,
        on_topic_similarity=on_topic_similarity, off_topic_similarity=off_topic_similarity,
        model=prepared.spec.name if timeline is not None else None,
        policy=prepared.policy if timeline is not None else None,
        embedder=getattr(embedder, "name", "?"), steps=steps, embed_stats=st, goal_chunks=len(goal_chunks),
        chunks=len(texts),
    )


def _not_judged(prepared: Prepared, timeline: Timeline | None, embedder: Embedder, goal: Goal, window_size: int,
                step_seqs: list[int], on_topic: float, off_topic: float, stats: EmbedStats | None) -> DriftReport:
    """The report of a session whose goal cannot be judged: every step unscored, the reason in each."""
    events = _goal_events(goal, timeline, len(step_seqs))  # where the opening left the window is still a fact
    steps = [DriftStep(step=k + 1, message_seq=sq, score=None, verdict=None, similarity=None, message_similarity=None,
                       judged=False, window=[], explanation="not judged: no usable goal (" + (goal.reason or "") + ")",
                       missing_keywords=[], new_topics=[], phrases=[], events=events.get(k + 1, []))
             for k, sq in enumerate(step_seqs)]
    return DriftReport(
        session_id=prepared.session["id"], goal=goal,
        keywords=[surf for _, surf in goal_keywords(goal.task_parts or goal.parts or (("user", goal.text),))],
        window_size=window_size,
        on_topic_similarity=on_topic, off_topic_similarity=off_topic,
        model=prepared.spec.name if timeline is not None else None,
        policy=prepared.policy if timeline is not None else None,
        embedder=getattr(embedder, "name", "?"), steps=steps, embed_stats=stats if stats is not None else EmbedStats(),
    )


def drift_session(
    store: Store,
    session_id: str,
    model: str | None = None,
    *,
    config: Any = None,
    policy: str | None = None,
    params: dict[str, Any] | None = None,
    goal: str | None = None,
    window_size: int | None = None,
    embedder: Embedder | None = None,
    progress: ProgressFn | None = None,
    stats: EmbedStats | None = None,
    replay: bool = True,
    prepared: Prepared | None = None,
    timeline: Timeline | None = None,
) -> DriftReport:
    """Prepare, replay and score one session; settings default to the config's ``drift`` section.

    ``model`` None replays under the session's model; ``policy`` None means the model's own
    (the CLI passes "recorded" when no model is named, as ``ctxf replay`` does).
    """
    from ...config.settings import Config
    from ...embed.embedders import embedder_for
    from ..replay import Timeline, prepare

    cfg = config if config is not None else Config()
    dc = cfg.drift
    if prepared is not None:  # a caller that already replayed (the audit) passes its replay in
        prep = prepared
    else:
        prep = prepare(store, session_id, model, config=cfg, policy=policy, params=params)
        if replay:
            results, _ = prep.run()
            timeline = Timeline.from_results(prep.inp, results)
    goal_obj: Goal | str | None = None
    if goal is not None:
        goal_obj = explicit_goal(goal, "option")
    elif dc.goal is not None:
        goal_obj = explicit_goal(dc.goal, "config")
    return drift_curve(
        prep, timeline, embedder if embedder is not None else embedder_for(cfg), store,
        goal_obj, window_size if window_size is not None else dc.window_size,
        on_topic_similarity=dc.on_topic_similarity, off_topic_similarity=dc.off_topic_similarity,
        progress=progress, cache_enabled=cfg.embedding.cache_enabled, ttl_hours=cfg.embedding.cache_ttl_hours,
        stats=stats,
    )
