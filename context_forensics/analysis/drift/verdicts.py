"""Drift verdicts: three signals of a window -> the probability it is on topic -> a 0-100 score -> a band.

**Signals** (``curve`` measures them over a step's window of recent judged replies, newest
weighing most; each reply against the goals in force when it was written):

- ``similarity``: the mean over a reply's chunks of their cosine with the goal (all-MiniLM-L6-v2;
  the best over the goals in force and their sections), read on the config's scale
  ``(s - off_topic_similarity) / (on_topic_similarity - off_topic_similarity)`` (0 at 0.14, 1 at 0.28);
- ``goal_words``: the share of a reply's content words (identifiers, file and function names,
  nouns: ``terms``) that the goals in force use, i.e. that the user or the session's opening wrote;
- ``keyword_cover``: the best, over the goals in force, of the share of a goal's keywords (up to
  12, ``goal_keywords``) that the window's replies mention.

**Probability.** A logistic model fitted on the labelled fit split (``bench/drift.py calibrate``,
``bench/data/drift_labels.yaml``: on-topic windows of real sessions of twelve agents, off-topic
windows of constructed pairs, one session's goals against another project's replies), with
on-topic and off-topic windows weighing the same, then a prior::

    z = INTERCEPT + sum(WEIGHTS[k] * signal[k]) + log(PRIOR / (1 - PRIOR))
    p = 1 / (1 + exp(-z))        score = round(100 * p)

``PRIOR`` (0.9) says nine windows in ten are on topic before their signals are read: real sessions
mostly are (no labelled real session wanders off on its own), and a verdict people act on should
need strong evidence of drift. It is chosen on the fit split: the fewest labelled on-topic sessions
reaching SEVERE (what the default ``max_drift`` rule fails) while every constructed off-topic pair
still reaches it and >= 80% of off-topic windows are SEVERE/CRITICAL, then the most on-topic windows
at FRESH/MILD; ``calibrate`` prints the table it was chosen from.

**Bands** are probability ranges: FRESH p >= 0.90, MILD 0.75-0.89, MODERATE 0.55-0.74, SEVERE
0.35-0.54, CRITICAL < 0.35.

**Calibration** (every figure reprinted by ``bench/drift.py calibrate``; the drift page, docs/commands/drift.md,
has the tables). Windows: on-topic 924 fit / 673 held-out test, off-topic 167 / 838. AUC of each
signal, fit / test: similarity 0.93 / 0.91, goal words 0.99 / 0.99, keyword cover 0.93 / 0.95; the
model 0.994 / 0.995. On-topic windows at FRESH/MILD: fit 98.5%, test 97.6% (SEVERE/CRITICAL 0.3%,
1.1%); off-topic at SEVERE/CRITICAL: fit 82.1%, test 84.7% (FRESH/MILD 6.0%, 3.7%). Labelled
on-topic sessions reaching SEVERE at some step (the default ``max_drift`` fails them): fit 1 of 13,
test 3 of 11 judged; constructed off-topic pairs reaching it: 14 of 14. The similarity-only line
these replace (``35 + 40 (s - 0.14) / (0.28 - 0.14)``) put 64% / 71% of on-topic windows at
FRESH/MILD and 51% / 66% of off-topic ones at SEVERE/CRITICAL.
"""

from __future__ import annotations

import math

from ...config.settings import DriftConfig

BANDS = (("FRESH", 90), ("MILD", 75), ("MODERATE", 55), ("SEVERE", 35), ("CRITICAL", 0))
VERDICTS = tuple(name for name, _ in BANDS)

SIGNALS = ("similarity", "goal_words", "keyword_cover")
# Fitted by `bench/drift.py calibrate` on the fit split of bench/data/drift_labels.yaml (logistic
# regression, L2 penalty 1, on- and off-topic windows weighing the same); similarity on the config's scale.
WEIGHTS = {"similarity": 2.92, "goal_words": 6.9, "keyword_cover": 3.71}
INTERCEPT = -7.22
PRIOR = 0.9
# The median of each signal over the on-topic windows of the fit split: what the explanation compares with.
ON_TOPIC_MEDIAN = {"similarity": 1.56, "goal_words": 0.7, "keyword_cover": 0.67}

_DEFAULTS = DriftConfig()


def scaled_similarity(s: float, on_topic: float = _DEFAULTS.on_topic_similarity,
                      off_topic: float = _DEFAULTS.off_topic_similarity) -> float:
    """The similarity signal on the config's scale: 0 at ``off_topic``, 1 at ``on_topic``."""
    return (s - off_topic) / (on_topic - off_topic)


def probability(signals: dict[str, float]) -> float:
    """P(on topic) of a window from its signals (``similarity`` already scaled: ``scaled_similarity``)."""
    z = INTERCEPT + sum(WEIGHTS[k] * signals[k] for k in SIGNALS) + math.log(PRIOR / (1 - PRIOR))
    return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0


def score(p: float) -> int:
    """The 0-100 score of a probability: ``round(100 * p)``."""
    return int(round(100 * min(1.0, max(0.0, p))))


def driver(signals: dict[str, float]) -> str:
    """The signal that weighs most against the window being on topic: the lowest
    ``WEIGHTS[k] * (signal - on-topic median)`` (the one that, brought to its on-topic median,
    would raise the probability most)."""
    return min(SIGNALS, key=lambda k: (WEIGHTS[k] * (signals[k] - ON_TOPIC_MEDIAN[k]), k))


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
