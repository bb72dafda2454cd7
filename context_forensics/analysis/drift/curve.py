"""The drift curve: per step, how far the recent assistant output has moved from the session's goal.

The goal (``goal``), the score bands (``verdicts``) and the explanations (``explain``) have
their own modules; this one measures.

**What is measured.** Each step's assistant output is its text plus the string values of its
tool-call arguments (a ``{"query": "banana bread"}`` call is about banana bread; JSON keys,
tool names and reasoning records are left out). An output with fewer than ``MIN_WORDS`` words
(``ls -la``, ``{"element_id": 151}``, "No") cannot be judged by an embedding: it is marked
unjudged and the step keeps the window of the outputs before it.

**Similarity.** The goal, each request and every judged output are chunked (``embed.chunk_text``:
sentences, short lines packed to ~16 wordpieces) and each unique chunk is embedded once (cached in the
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

**Goals in force.** A reply is measured against the goals in force when it was written: the
opening (when it is usable, ``goal``) and every request the user sent before it (``segments``:
person-typed user messages; a request too short to be a goal alone still joins, by its embedding
and its words; one that is only a URL, a path, a command or a greeting joins by its words, of which
it has none). Its similarity is the best over them. A new request that is unlike the goals before
it opens a goal *segment*, a label for the reader: the goals before it stay in force, so a follow-up
taken for a new task, or a new task taken for a follow-up, moves no score (new-task detection by
similarity is weak: docs/commands/drift.md's table). Until a usable goal is in force a step is not judged.

**Signals and score** (``verdicts``). Besides the similarity, two lexical signals: *goal words*,
the share of a reply's content-word occurrences (``terms``) that the goals in force use (the
opening's user messages, each request and the reply it answers: "let's start" means what that reply
proposed); *keyword cover*, the best over the goals in force of the share of a goal's keywords
(``goal_keywords``) the window's replies mention. The window's three signals give P(on topic) and
the score (``verdicts.probability``).

**Window.** Step k's signals are weighted means over the last ``window_size`` judged replies up to
k (keyword cover: over their words together), with linear recency weights 1, 2, ..., n (the newest
weighs most): "where the conversation is now", smoothed so that one short or odd reply does not
swing the verdict. Each reply counts once whatever its length. The window does not restart at a
segment.

**Replay.** With a ``Timeline`` (``replay.prepare(...).run()``) the report marks the step at
which a message of a goal in force then (the opening, every request before the step) left the
window under the replayed policy (``goal_left_window``), or came back (``goal_returned``): under
the ``recorded`` policy what the log says happened, under a model's policy a what-if. An explicit
goal text has no messages, so no such events.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence, TypeVar

import numpy as np

from ...config.settings import DriftConfig
from ...embed import Embedder, EmbedStats, ProgressFn, chunk_text, embed_texts, normalize
from ...matching.text import json_strings
from .explain import drift_phrases, explain, window_terms
from .goal import (
    Goal,
    assess_goal,
    explicit_goal,
    goal_from_messages,
    language_goal,
    no_text_goal,
    reads_language,
    request_goal,
    without_blocks,
)
from .report import DriftReport, DriftStep, Segment
from .segments import NEW_TASK_SIMILARITY, Request, requests
from .templates import template_index
from .terms import Terms, goal_keywords, terms
from .verdicts import driver, probability, scaled_similarity, score, verdict

if TYPE_CHECKING:  # pragma: no cover
    from ...records import Message
    from ...store.db import Store
    from ..replay import Prepared, Timeline

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


def _goal_events(goal: Goal, timeline: Timeline | None, n_steps: int,
                 in_force: Sequence[Collection[int]] | None = None) -> dict[int, list[dict[str, Any]]]:
    """Step (1-based) -> goal_left_window / goal_returned events, from each goal message's states.
    ``in_force``: per step, the messages of the goals in force then (the opening and every request
    before it, ``_goals_in_force``); None: ``goal``'s messages at every step."""
    if timeline is None or n_steps == 0:
        return {}
    per_step = [sorted(set(in_force[k])) for k in range(n_steps)] if in_force is not None \
        else [list(goal.seqs)] * n_steps
    every = sorted({sq for seqs in per_step for sq in seqs})
    if not every:
        return {}
    from ..replay.policies import IN_WINDOW, STATE_NAMES

    states = {sq: timeline.states(sq)[:n_steps] for sq in every}
    inside = {sq: np.isin(st, IN_WINDOW) for sq, st in states.items()}
    out: dict[int, list[dict[str, Any]]] = {}
    for k in range(n_steps):
        seqs = per_step[k]
        left = [sq for sq in seqs if not inside[sq][k] and (k == 0 or inside[sq][k - 1])
                and int(states[sq][k]) >= 0]
        back = [sq for sq in seqs if k > 0 and inside[sq][k] and not inside[sq][k - 1]
                and int(states[sq][k - 1]) >= 0]  # joining late (NOT_YET -> KEPT) is not a return
        remaining = [sq for sq in seqs if inside[sq][k]]
        if left:
            out.setdefault(k + 1, []).append({
                "type": "goal_left_window", "seqs": left,
                "states": {str(sq): STATE_NAMES[int(states[sq][k])] for sq in left},
                "remaining": remaining, "all_gone": not remaining,
            })
        if back:
            out.setdefault(k + 1, []).append({"type": "goal_returned", "seqs": back, "remaining": remaining})
    return out


def session_goal(prepared: Prepared, store: Store | None, embedder_name: str) -> Goal:
    """The goal a session's opening sets, assessed (``goal.assess_goal``, with the store's harness
    templates of its format) and checked for a language ``embedder_name`` reads."""
    opening = goal_from_messages(prepared.messages)
    if opening is None:
        return no_text_goal()
    fmt = prepared.session.get("format")
    keyed = bool(prepared.session.get("task"))
    goal = assess_goal(opening, template_index(store, fmt, keyed) if store is not None and fmt else None)
    return language_goal(goal, embedder_name)


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
    new_tasks: Sequence[int] | None = None,
    requests_from: Sequence[Request] | None = None,
) -> DriftReport:
    """Score every step of a prepared session against the goal in force (see the module docstring).

    ``timeline`` (from ``prepared.run()``) adds the goal_left_window events; None skips them.
    ``goal`` is a ``Goal``, a text (source "option"), or None for the session's opening and the
    requests its user sends later (``segments``); a given goal is the whole session's. The labelled
    calibration (``bench/drift.py``) passes ``new_tasks`` (user message seqs: which requests open a
    segment, instead of the similarity test) and, for its constructed off-topic pairs, another
    session's opening as ``goal`` and its requests as ``requests_from`` (measured as if that user had
    sent them before the same steps). Nothing raises on a session with no goal: every step is then
    unscored and the report says why.
    """
    from ...errors import UsageError

    if window_size < 1:
        raise UsageError(f"window size must be >= 1, got {window_size}")
    if on_topic_similarity <= off_topic_similarity:
        raise UsageError("on_topic_similarity must be above off_topic_similarity")
    messages = prepared.messages
    ename = str(getattr(embedder, "name", "?"))
    explicit = goal is not None
    if isinstance(goal, str):
        goal = explicit_goal(goal, "option")
    if goal is None:
        goal = session_goal(prepared, store, ename)
    step_seqs = [int(s) for s in prepared.inp.steps]
    n = len(step_seqs)
    reqs = list(requests_from) if requests_from is not None else [] if explicit else requests(messages, step_seqs)
    req_goals = [language_goal(request_goal(r.seq, r.text), ename) for r in reqs]
    st = stats if stats is not None else EmbedStats()
    if goal.state != "judged" and not any(g.state == "judged" for g in req_goals):
        # nothing to measure against: no embedding, no score, no verdict
        seg = Segment(0, 1, n, "opening", goal, _keywords(goal), None)
        return _report(prepared, timeline, embedder, [seg], [_unjudged(k, sq, seg) for k, sq in enumerate(step_seqs)],
                       window_size, on_topic_similarity, off_topic_similarity, st, 0, 0, timeline_events=True)
    by_seq = {sm.seq: sm for sm in messages}
    outputs = [assistant_output(by_seq[sq].message) for sq in step_seqs]
    judged = [len(_WORD.findall(o)) >= MIN_WORDS and reads_language(ename, o) for o in outputs]

    # One embedding call: the goal's chunks, every request's, then the judged outputs' chunks (owner k).
    goals = [goal, *req_goals]
    chunked = [_goal_chunks(g) if (i or g.state == "judged") else ([], np.zeros(0, np.int64))
               for i, g in enumerate(goals)]
    if goal.state == "judged" and not chunked[0][0]:
        raise UsageError("the goal has no text to embed", hint="pass the goal with --goal TEXT")
    texts = [t for c, _ in chunked for t in c]
    g = len(texts)
    owner: list[int] = []
    for k, o in enumerate(outputs):
        if judged[k]:
            cs = _sample(chunk_text(o), MAX_CHUNKS_PER_MESSAGE)
            if not cs:
                judged[k] = False
            texts.extend(c.text for c in cs)
            owner.extend([k] * len(cs))
    if not any(judged) and not reqs:  # no reply to judge and nothing to segment: embedding cannot change anything
        texts = []
        if progress:
            progress(0, 0)
    vecs = embed_texts(texts, embedder, store, cache_enabled=cache_enabled, ttl_hours=ttl_hours,
                       progress=progress, stats=st) if texts else np.zeros((g, int(embedder.dim)), np.float32)
    refs, req_means, at = [], [], 0
    for i, (c, sections) in enumerate(chunked):
        block = vecs[at:at + len(c)]
        at += len(c)
        refs.append(_references(block, sections) if len(c) else None)
        if i:
            req_means.append(block.astype(np.float64).mean(axis=0) if len(c) else None)
    means = _means(vecs[g:], np.asarray(owner, dtype=np.int64), n)

    out_terms = [terms(o) if judged[k] else None for k, o in enumerate(outputs)]
    segments, req_log = _segment(goal, "option" if goal.source == "option" else "config" if goal.source == "config"
                        else "opening", refs[0], reqs, req_goals, refs[1:], req_means, n, new_tasks)
    seg_of = np.zeros(n, dtype=np.int64)
    for seg in segments:
        seg_of[seg.start_step - 1:seg.end_step] = seg.index
    # The goals in force at each step (module docstring): the opening when it is usable and every request
    # of the user before the step. Each judged reply is measured once, against the goals in force when it
    # was written.
    forced = _goals_in_force(goal, refs[0], reqs, req_goals, refs[1:], n)
    msg_sim = np.full(n, np.nan)
    words = np.full(n, np.nan)
    for k in range(n):
        f = forced[k]
        t = out_terms[k]  # None: not judged
        if judged[k] and f.usable and t is not None:
            msg_sim[k] = max(float((means[k] @ r.T).max()) for r in f.refs)
            words[k] = _goal_word_share(t, f.stems)
    steps: list[DriftStep] = []
    # a goal message leaving the window: any goal in force then (the opening stays one after a new
    # task opened a segment), the segment's own goal too
    in_force = [set(forced[k].seqs) | set(segments[int(seg_of[k])].goal.seqs) for k in range(n)]
    goal_events = _goal_events(goal, timeline, n, in_force)
    recent: list[int] = []  # judged and measured replies, newest last
    for k in range(n):
        f, seg = forced[k], segments[int(seg_of[k])]
        events = goal_events
        if not f.usable:  # no usable goal yet: nothing to measure against
            steps.append(_unjudged(k, step_seqs[k], seg, events))
            continue
        if not np.isnan(msg_sim[k]):
            recent.append(k)
            del recent[:-window_size]
        own = None if np.isnan(msg_sim[k]) else float(msg_sim[k])
        kw = f.keywords.get(seg.request) or f.keywords[f.latest]
        window = [out_terms[i] for i in recent]
        s = signals = p = sc = drv = msg_score = None
        if recent:
            w = np.arange(1, len(recent) + 1, dtype=np.float64)
            s = float(np.dot(w, msg_sim[recent]) / w.sum())
            signals = {"similarity": s, "goal_words": float(np.dot(w, words[recent]) / w.sum()),
                       "keyword_cover": _keyword_cover(window, f.keyword_stems)}
            p, drv = _probability(signals, on_topic_similarity, off_topic_similarity)
            sc = score(p)
        if own is not None:
            own_signals = {"similarity": own, "goal_words": float(words[k]),
                           "keyword_cover": _keyword_cover([out_terms[k]], f.keyword_stems)}
            msg_score = score(_probability(own_signals, on_topic_similarity, off_topic_similarity)[0])
        v = verdict(sc)
        phrases = drift_phrases(by_seq[step_seqs[k]].message.text) if msg_score is not None and msg_score < 75 else []
        missing, topics = window_terms(kw, f.stems, window)
        steps.append(DriftStep(
            step=k + 1, message_seq=step_seqs[k], score=sc, verdict=v,
            similarity=None if s is None else round(s, 4),
            message_similarity=None if own is None else round(own, 4), judged=judged[k],
            window=[step_seqs[i] for i in recent],
            explanation=explain(v, signals, drv, kw, missing, topics, phrases, bool(recent)),
            missing_keywords=missing, new_topics=topics, phrases=phrases, events=events.get(k + 1, []),
            segment=seg.index, goal_seqs=list(f.seqs),
            probability=None if p is None else round(p, 4),
            signals=None if signals is None else {k2: round(x, 4) for k2, x in signals.items()},
            message_score=msg_score, driver=drv,
        ))
    rep = _report(prepared, timeline, embedder, segments, steps, window_size, on_topic_similarity,
                  off_topic_similarity, st, len(chunked[0][0]), len(texts))
    rep.requests = req_log
    return rep


@dataclass
class _InForce:
    """The goals in force at a step: what its reply is measured against."""

    usable: bool  # a usable goal is in force (the opening's or a request's): the step can be judged
    refs: list[np.ndarray]  # embedding references: the opening's (when usable), each request's (not a bare URL, ...)
    stems: frozenset[str]  # content terms of the opening (when usable) and of every request so far
    keyword_stems: list[list[str]]  # per goal text in force, its keywords (stems)
    keywords: dict[int, list[tuple[str, str]]]  # request index (-1: the opening) -> its keywords (stem, surface)
    latest: int  # the newest goal text in force (request index, -1: the opening)
    seqs: tuple[int, ...]  # the messages of the goals in force


def _goals_in_force(goal: Goal, goal_refs: np.ndarray | None, reqs: list[Request], req_goals: list[Goal],
                    req_refs: list[np.ndarray | None], n: int) -> list[_InForce]:
    """Per step, the goals in force: the opening when it can be judged, and every request the user
    sent before the step, by its words and by its embedding (a request too short to be a goal of its
    own, "what's a good book to read on the train?", joins those before it; one that is only a URL,
    a path, a command or a greeting joins by its words, which it has none of). A step is judged once
    a usable goal (the opening, or a request that could be one) is in force."""
    refs: list[np.ndarray] = []
    stems: set[str] = set()
    kstems: list[list[str]] = []
    kws: dict[int, list[tuple[str, str]]] = {}
    seqs: list[int] = []
    latest = -1
    usable = False
    if goal.state == "judged" and goal_refs is not None:
        usable = True
        refs.append(goal_refs)
        # by its words, the opening is what the user wrote in it (a system prompt is the harness's
        # vocabulary, which every reply in that harness shares): its user messages, all of it without
        # one, harness blocks (<environment_context>, <system-reminder>, ...) set aside
        said = [(r, t) for r, t in goal.parts if r == "user"] or list(goal.parts) or [("user", goal.text)]
        stems |= set(terms("\n".join(t for _, t in said)).counts)
        kws[-1] = _keywords_of(goal)
        kstems.append([st for st, _ in goal_keywords([(r, without_blocks(t)) for r, t in said])])
        seqs.extend(goal.seqs)
    out: list[_InForce] = []
    i = 0
    for k in range(n):
        changed = not out
        while i < len(reqs) and reqs[i].step <= k:
            r, g = reqs[i], req_goals[i]
            if (g.state == "judged" or g.reason == "too_short") and (ref := req_refs[i]) is not None:
                refs.append(ref)
            usable = usable or g.state == "judged"
            stems |= set(terms(r.text).counts) | set(terms(r.answers).counts)  # "let's start" means what it answers
            kws[i] = goal_keywords((("user", r.text),))
            if kws[i]:
                kstems.append([st for st, _ in kws[i]])
            seqs.append(r.seq)
            latest, i, changed = i, i + 1, True
        out.append(_InForce(usable, list(refs), frozenset(stems), list(kstems), dict(kws), latest, tuple(seqs))
                   if changed else out[-1])
    return out


def _goal_word_share(t: Terms, stems: frozenset[str]) -> float:
    """The share of a reply's content-term occurrences that the goals in force use (0 for a reply without any)."""
    total = sum(t.counts.values())
    return sum(c for st, c in t.counts.items() if st in stems) / total if total else 0.0


def _keyword_cover(window: Sequence[Terms | None], keyword_stems: list[list[str]]) -> float:
    """The best, over the goals in force, of the share of a goal's keywords the window's replies mention."""
    seen: set[str] = set()
    for t in window:
        if t is not None:
            seen |= t.words()
    return max((sum(st in seen for st in ks) / len(ks) for ks in keyword_stems if ks), default=0.0)


def _probability(signals: dict[str, float], on_topic: float, off_topic: float) -> tuple[float, str]:
    """(P(on topic), the signal that weighs most against it) of raw signals (similarity unscaled)."""
    scaled = dict(signals, similarity=scaled_similarity(signals["similarity"], on_topic, off_topic))
    return probability(scaled), driver(scaled)


def _references(vecs: np.ndarray, sections: np.ndarray) -> np.ndarray:
    """A goal's references: the centroid of all its chunks, then the centroid of each section."""
    g = len(vecs)
    return np.vstack([_centroids(vecs, np.zeros(g, dtype=np.int64), 1),
                      _centroids(vecs, sections, int(sections.max()) + 1)])


def _keywords_of(goal: Goal) -> list[tuple[str, str]]:
    """A goal's keywords (stem, surface): of its task statement, harness blocks set aside."""
    return goal_keywords(tuple((r, without_blocks(t)) for r, t in (goal.task_parts or goal.parts or
                                                                    (("user", goal.text),))))


def _keywords(goal: Goal) -> list[str]:
    return [surf for _, surf in _keywords_of(goal)]


def _segment(goal: Goal, opened_by: str, goal_refs: np.ndarray | None, reqs: list[Request], req_goals: list[Goal],
             req_refs: list[np.ndarray | None], req_means: list[np.ndarray | None], n: int,
             forced: Sequence[int] | None = None) -> tuple[list[Segment], list[dict[str, Any]]]:
    """The goal segments (``segments`` module docstring): the opening's, then one per new task; and
    each request's record (its similarity to the goal in force and whether it opened a segment)."""
    opened: list[tuple[int, int, Goal, str, float | None, int]] = [(0, -1, goal, opened_by, None, -1)]
    current = goal_refs
    log: list[dict[str, Any]] = []
    for i, (r, g) in enumerate(zip(reqs, req_goals)):
        cur_goal = opened[-1][2]
        sim = None
        if cur_goal.state == "judged" and current is not None and req_means[i] is not None:
            sim = round(float((req_means[i] @ current.T).max()), 4)
        if forced is not None:
            new = r.seq in forced
            why = "labelled a new task" if new else "labelled a follow-up"
        elif cur_goal.state == "judged":
            new = sim is not None and sim < NEW_TASK_SIMILARITY
            why = (f"similarity {sim:.2f} to the goal in force is {'below' if new else 'at or above'} "
                   f"{NEW_TASK_SIMILARITY}") if sim is not None else "nothing to compare"
        else:
            new = g.state == "judged"  # a goal-less segment gives way only to a usable goal
            why = "the goal in force is not judged" + ("; this request is a usable goal" if new else
                                                       " and this request is no usable goal either")
        log.append({"seq": r.seq, "step": r.step + 1, "similarity": sim, "new_task": new, "why": why})
        if not new:
            continue
        if opened[-1][0] == r.step:  # the previous segment got no step: this request replaces it
            opened.pop()
        opened.append((r.step, r.seq, g, "new_task", None if sim is None else round(sim, 4), i))
        current = req_refs[i]
    out = []
    for j, (start, seq, g, by, sim, i) in enumerate(opened):
        end = opened[j + 1][0] if j + 1 < len(opened) else n
        out.append(Segment(j, start + 1, end, by, g, _keywords(g), sim, request=i))
    return out, log


def _unjudged(k: int, seq: int, seg: Segment, events: dict[int, list[dict[str, Any]]] | None = None) -> DriftStep:
    """A step with no usable goal in force: unscored, the reason (its segment's goal's) in its explanation."""
    return DriftStep(step=k + 1, message_seq=seq, score=None, verdict=None, similarity=None, message_similarity=None,
                     judged=False, window=[], explanation="not judged: " + seg.goal.explanation,
                     missing_keywords=[], new_topics=[], phrases=[], events=(events or {}).get(k + 1, []),
                     segment=seg.index, without_goal=True)


def _report(prepared: Prepared, timeline: Timeline | None, embedder: Embedder, segments: list[Segment],
            steps: list[DriftStep], window_size: int, on_topic: float, off_topic: float, stats: EmbedStats,
            goal_chunks: int, chunks: int, timeline_events: bool = False) -> DriftReport:
    if timeline_events:  # where the opening left the window is still a fact when nothing is judged
        events = _goal_events(segments[0].goal, timeline, len(steps))
        for s in steps:
            s.events = events.get(s.step, [])
    return DriftReport(
        session_id=prepared.session["id"], goal=segments[0].goal, keywords=segments[0].keywords,
        window_size=window_size, on_topic_similarity=on_topic, off_topic_similarity=off_topic,
        model=prepared.spec.name if timeline is not None else None,
        policy=prepared.policy if timeline is not None else None,
        embedder=getattr(embedder, "name", "?"), steps=steps, embed_stats=stats, goal_chunks=goal_chunks,
        chunks=chunks, segments=segments,
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
