"""Facts: is a constraint, a number or a name still in the model's window at each step?

The modules, in the order they build on each other:

- ``sources``: the facts to track, from ``--fact``, facts files and the config (``gather_facts``);
- ``lexical``: the numbers, identifiers and quoted strings a supporting text must hold
  (``lexical_tokens``, ``missing_tokens``);
- ``polarity``: whether a text says a fact the same way round (``polarity_conflict``);
- ``clauses``: whether a text carries every statement of a fact, bans first (``dropped_clause``);
- ``verbatim``: a fact copied into a text, exactly or up to layout (``verbatim_span``);
- ``presence``: which texts support a fact: verbatim copies first, then at chunk and
  sub-sentence span level by cosine and the checks above (``score_presence``);
- ``positions`` and ``timeline``: each fact's state at every step of a replay (``track_facts``,
  ``FactReport``);
- ``suggest``: constraint-like sentences of a session's opening to track (``suggest_facts``);
- ``calibration``: precision and recall of the presence rule per threshold on labelled pairs
  (``calibrate``, ``load_pairs``).
"""

from ...matching.lexical import LexicalTokens, lexical_tokens, missing_tokens, text_numbers
from ...matching.polarity import Conflict, clause_spans, content_stems, polarity_conflict, polarity_flip
from ...matching.text import presence_text
from .calibration import SUBSET_THRESHOLDS, Pair, calibrate, calibration_thresholds, load_pairs
from .presence import (
    DEFAULT_THRESHOLD,
    FACTS_VERSION,
    SPAN_FLOOR,
    SPAN_OVERLAP,
    Presence,
    score_presence,
)
from .sources import gather_facts, load_facts_file, parse_facts_text
from .suggest import Suggestion, suggest_facts
from .timeline import (
    AT_RISK,
    GONE,
    MIDDLE_BAND,
    MIDDLE_MIN_TOKENS,
    NOT_YET,
    PRESENT,
    STATES,
    SUMMARIZED_F,
    FactReport,
    FactTimeline,
    track_facts,
)

__all__ = [
    "AT_RISK",
    "DEFAULT_THRESHOLD",
    "FACTS_VERSION",
    "GONE",
    "MIDDLE_BAND",
    "MIDDLE_MIN_TOKENS",
    "NOT_YET",
    "PRESENT",
    "SPAN_FLOOR",
    "SPAN_OVERLAP",
    "STATES",
    "SUBSET_THRESHOLDS",
    "SUMMARIZED_F",
    "Conflict",
    "FactReport",
    "FactTimeline",
    "LexicalTokens",
    "Pair",
    "Presence",
    "Suggestion",
    "calibrate",
    "calibration_thresholds",
    "clause_spans",
    "content_stems",
    "gather_facts",
    "lexical_tokens",
    "load_facts_file",
    "load_pairs",
    "missing_tokens",
    "parse_facts_text",
    "polarity_conflict",
    "polarity_flip",
    "presence_text",
    "score_presence",
    "suggest_facts",
    "text_numbers",
    "track_facts",
]
