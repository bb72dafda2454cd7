"""Drift verdicts: the similarity -> 0-100 score map and its bands.

**Score.** A straight line through two calibrated anchors, clipped to 0..100::

    score = 35 + 40 * (s - off_topic_similarity) / (on_topic_similarity - off_topic_similarity)

A window at ``on_topic_similarity`` (0.28) scores 75, the lowest MILD; one at
``off_topic_similarity`` (0.14) scores 35, the lowest SEVERE; s = 0.21 scores 55, s >= 0.3325
scores 90+ (FRESH), s <= 0.0175 scores 0. Bands: FRESH >= 90, MILD 75-89, MODERATE 55-74,
SEVERE 35-54, CRITICAL < 35.

**Calibration** (all-MiniLM-L6-v2, window 5; ``bench/drift.py calibrate`` reprints every figure).
On-topic windows, each session against its own goal: SWE-bench trajectories (mini-swe-agent,
live-swe-agent, OpenHands, SWE-agent; 288 windows) p5 0.305, p10 0.329, median 0.391 -> 98.6%
score >= MILD; MT-Bench reference answers (59) p5 0.273, p10 0.338, median 0.544 -> 93.2%;
the on-topic fixtures (coding agent, wedding toast, focused cover letter) 0.32-0.70, every
step >= 86. Off-topic windows, a goal paired with another session's assistant output: MT-Bench
questions x SWE-bench agent steps (3,456) median 0.038, p95 0.108 -> 98.6% CRITICAL; MT-Bench
question x answers of another category (1,180) median 0.065, p90 0.147 -> 87.9% CRITICAL (of
the same category: median 0.127, 55.7%); the off-topic fixtures end at 0.08-0.12 (scores
17-28). 0.28 sits under ~95% of on-topic windows, 0.14 over ~90-99% of off-topic ones.
Labelled calibration (issue 30; ``bench/drift.py calibrate`` on ``bench/data/drift_labels.yaml``:
sessions of ten agents labelled by hand, scored against the labelled goal in force, fit/test
split): on-topic windows p10/median 0.205/0.314 (fit), 0.198/0.329 (test); constructed off-topic
pairs of coding sessions median/p90 0.194/0.275 (fit), 0.123/0.345 (test). They overlap: the fit
split's balanced cut is 0.263, beside these anchors, which are kept; at them 64-71% of on-topic
windows are FRESH/MILD and 51-66% of off-topic ones SEVERE/CRITICAL (README, ``ctxf drift``).
Known limit: when the goal is mostly an agent framework's boilerplate, another issue's
trajectory in the same scaffold still looks on-topic (SWE-bench issue x another issue's run:
median 0.324, 0% CRITICAL); the explanation's missing goal keywords (the issue's identifiers)
are the signal there.
"""

from __future__ import annotations

from ...config.settings import DriftConfig

BANDS = (("FRESH", 90), ("MILD", 75), ("MODERATE", 55), ("SEVERE", 35), ("CRITICAL", 0))
VERDICTS = tuple(name for name, _ in BANDS)

_DEFAULTS = DriftConfig()


def score_from_similarity(s: float, on_topic: float = _DEFAULTS.on_topic_similarity,
                          off_topic: float = _DEFAULTS.off_topic_similarity) -> int:
    """The documented linear map: ``on_topic`` -> 75, ``off_topic`` -> 35, clipped to 0..100."""
    raw = 35.0 + 40.0 * (s - off_topic) / (on_topic - off_topic)
    return int(round(min(100.0, max(0.0, raw))))


def verdict(score: int | None) -> str | None:
    """The band of a 0-100 score: FRESH >= 90, MILD >= 75, MODERATE >= 55, SEVERE >= 35, CRITICAL."""
    if score is None:
        return None
    for name, floor in BANDS:
        if score >= floor:
            return name
    return "CRITICAL"


def at_or_worse(v: str | None, band: str) -> bool:
    """Whether verdict ``v`` is ``band`` or a worse one."""
    return v is not None and VERDICTS.index(v) >= VERDICTS.index(band)
