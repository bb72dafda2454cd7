"""``left_truncation``: drop the oldest messages until the request fits.

What most chat frameworks and hand-written agents do (trim history from the front),
keeping system messages when ``preserve_system`` is set. A tool call and its results
leave together. The group of the most recent message is never dropped; if the window
still does not fit, the overflow is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._common import evict_oldest, eviction_event, report_overflow
from .base import Engine, Policy, register_policy


@dataclass(slots=True)
class _Cursor:
    cursor: int = 0  # everything before it is evicted or preserved


@register_policy
class LeftTruncation(Policy):
    name = "left_truncation"
    description = "drop the oldest non-system messages until the window fits"
    as_of = "2025-11-01"
    source = "common framework behaviour (e.g. LangChain trim_messages strategy='last')"

    def start(self, eng: Engine, p: dict) -> None:
        eng.set_policy_state(_Cursor())

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        budget = eng.inp.budget
        if eng.total() <= budget:
            return 0
        st = eng.policy_state(_Cursor)
        st.cursor, dropped = evict_oldest(eng, st.cursor, p["preserve_system"], lambda: eng.total() <= budget)
        eviction_event(eng, self.name, dropped)
        return report_overflow(eng, "even the most recent messages")
