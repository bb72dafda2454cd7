"""The drift report: per step scores, verdicts and explanations, and the session summary.

``DriftReport.to_dict`` is the ``ctxf drift --json`` shape (version ``DRIFT_VERSION``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...embed import EmbedStats
from .goal import Goal
from .verdicts import BANDS, INTERCEPT, PRIOR, VERDICTS, WEIGHTS, at_or_worse

DRIFT_VERSION = 1

@dataclass
class DriftStep:
    """One step of the curve: its score and verdict, the window behind them, and why."""

    step: int
    message_seq: int
    score: int | None
    verdict: str | None
    similarity: float | None  # the window's
    message_similarity: float | None  # this step's own output (None: not judged)
    judged: bool
    window: list[int]  # message seqs of the judged outputs in the window, oldest first
    explanation: str
    missing_keywords: list[str]
    new_topics: list[str]
    phrases: list[str]
    events: list[dict[str, Any]]
    segment: int = 0  # the goal segment (``DriftReport.segments``) the step belongs to
    goal_seqs: list[int] = field(default_factory=list)  # the goals in force: the messages it was scored against
    probability: float | None = None  # P(on topic) of the window (``verdicts``); score = round(100 * probability)
    signals: dict[str, float] | None = None  # the window's similarity, goal_words, keyword_cover
    message_score: int | None = None  # this step's own reply scored alone (None: not judged)
    driver: str | None = None  # the signal that weighs most against the window being on topic
    without_goal: bool = False  # no usable goal in force (not in the JSON: summary.steps_without_goal counts them)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "without_goal"}


@dataclass
class Segment:
    """A stretch of steps scored against one goal: the opening's, or a new task the user gave."""

    index: int
    start_step: int  # 1-based, inclusive
    end_step: int  # inclusive (start_step - 1 when the segment has no step)
    opened_by: str  # "opening" | "new_task" | "option" (--goal) | "config" (drift.goal)
    goal: Goal
    keywords: list[str]
    similarity_to_previous: float | None = None  # a new task's similarity to the goal it replaced
    request: int = -1  # internal: the request (``segments.requests``) that opened it

    @property
    def judged(self) -> bool:
        return self.goal.state == "judged"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "start_step": self.start_step, "end_step": self.end_step,
                "opened_by": self.opened_by, "similarity_to_previous": self.similarity_to_previous,
                "goal": {**self.goal.to_dict(), "keywords": self.keywords}}


@dataclass
class DriftReport:
    """A session's drift curve: the goal, the mapping it was scored with, and every step."""

    session_id: str
    goal: Goal
    keywords: list[str]
    window_size: int
    on_topic_similarity: float
    off_topic_similarity: float
    model: str | None
    policy: str | None
    embedder: str
    steps: list[DriftStep]
    embed_stats: EmbedStats = field(default_factory=EmbedStats)
    goal_chunks: int = 0
    chunks: int = 0
    segments: list[Segment] = field(default_factory=list)
    # each user request after the opening: {"seq", "step", "similarity" (to the goal in force),
    # "new_task", "why"} (``segments``); [] with an explicit goal
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def state(self) -> str:
        """``judged`` when some segment's goal is judged, else ``no_goal`` (``goal.explanation`` says why)."""
        if self.segments:
            return "judged" if any(s.judged for s in self.segments) else "no_goal"
        return self.goal.state

    def summary(self) -> dict[str, Any]:
        """Final, worst and mean scores, the first step at each band and the goal's exit."""
        scored = [s for s in self.steps if s.score is not None]
        last = scored[-1] if scored else None
        worst = min(scored, key=lambda s: (s.score, s.step)) if scored else None  # the first lowest
        first_at = {band: next((s.step for s in scored if at_or_worse(s.verdict, band)), None)
                    for band in VERDICTS[1:]}
        left = next((s.step for s in self.steps for e in s.events if e["type"] == "goal_left_window"), None)
        return {
            "state": self.state,
            "steps": len(self.steps),
            "judged_steps": sum(s.judged for s in self.steps),
            "segments": len(self.segments),
            "steps_without_goal": sum(s.without_goal for s in self.steps),
            "final_score": last.score if last else None,
            "final_verdict": last.verdict if last else None,
            "worst_step": worst.step if worst else None,
            "worst_score": worst.score if worst else None,
            "worst_verdict": worst.verdict if worst else None,
            "mean_score": round(float(np.mean([s.score for s in scored])), 1) if scored else None,
            "first_step_at": first_at,
            "goal_left_window_step": left,
            "drift_phrase_steps": [s.step for s in self.steps if s.phrases],
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": DRIFT_VERSION,
            "state": self.state,
            "goal": {**self.goal.to_dict(), "keywords": self.keywords, "chunks": self.goal_chunks},
            "model": self.model,
            "policy": self.policy,
            "embedding_model": self.embedder,
            "window_size": self.window_size,
            "mapping": {
                "on_topic_similarity": self.on_topic_similarity,
                "off_topic_similarity": self.off_topic_similarity,
                "formula": ("score = round(100 * p), p = 1 / (1 + exp(-z)), z = intercept + log(prior / (1 - prior)) "
                            "+ w_similarity * (s - off) / (on - off) + w_goal_words * goal_words "
                            "+ w_keyword_cover * keyword_cover"),
                "weights": dict(WEIGHTS),
                "intercept": INTERCEPT,
                "prior": PRIOR,
                "bands": {name: floor for name, floor in BANDS},
            },
            "segments": [g.to_dict() for g in self.segments],
            "requests": self.requests,
            "steps": [s.to_dict() for s in self.steps],
            "summary": self.summary(),
            "embedding": self.embed_stats.to_dict() | {"chunks": self.chunks},
        }
