"""Drift: how far a session's recent assistant output has moved from its goal, step by step.

The modules, in the order they build on each other:

- ``verdicts``: a window's signals -> P(on topic) -> 0-100 score -> band (``probability``,
  ``score``, ``verdict``, ``at_or_worse``);
- ``terms``: content words, identifiers and goal keywords (``content_words``, ``terms``);
- ``explain``: the per-step explanation and goal-drift phrases (``drift_phrases``);
- ``templates``: the harness boilerplate that opens sessions of other tasks in the store
  (``TemplateIndex``, ``template_index``);
- ``goal``: the reference and whether it can be judged (``Goal``, ``goal_from_messages``,
  ``explicit_goal``, ``assess_goal``, ``is_chat_opener``);
- ``report``: ``DriftStep``, ``DriftReport`` (the ``ctxf drift --json`` shape);
- ``curve``: the per-step similarity curve (``drift_curve``) and one session end to end
  (``drift_session``).
"""

from .curve import MAX_CHUNKS_PER_MESSAGE, MIN_WORDS, assistant_output, drift_curve, drift_session
from .explain import DRIFT_PHRASES, drift_phrases
from .goal import MIN_GOAL_WORDS, NO_GOAL_REASONS, Goal, assess_goal, explicit_goal, goal_from_messages, is_chat_opener
from .report import DRIFT_VERSION, DriftReport, DriftStep
from .templates import TemplateIndex, template_index
from .terms import STOPWORDS, content_words, goal_keywords, terms
from .verdicts import BANDS, SIGNALS, VERDICTS, at_or_worse, probability, scaled_similarity, score, verdict

__all__ = [
    "BANDS",
    "DRIFT_PHRASES",
    "DRIFT_VERSION",
    "MAX_CHUNKS_PER_MESSAGE",
    "MIN_GOAL_WORDS",
    "MIN_WORDS",
    "NO_GOAL_REASONS",
    "SIGNALS",
    "STOPWORDS",
    "VERDICTS",
    "DriftReport",
    "DriftStep",
    "Goal",
    "TemplateIndex",
    "assess_goal",
    "assistant_output",
    "at_or_worse",
    "content_words",
    "drift_curve",
    "drift_phrases",
    "drift_session",
    "explicit_goal",
    "goal_from_messages",
    "goal_keywords",
    "is_chat_opener",
    "probability",
    "scaled_similarity",
    "score",
    "template_index",
    "terms",
    "verdict",
]
