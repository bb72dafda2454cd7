"""``left_truncation``: drop the oldest messages until the request fits.

What most chat frameworks and hand-written agents do (trim history from the front),
keeping system messages when ``preserve_system`` is set. A tool call and its results
leave together. The group of the most recent message is never dropped; if the window
still does not fit, the overflow is reported.
"""

from __future__ import annotations

from .base import EVICTED, KEPT, Engine, Policy, register_policy


@register_policy
class LeftTruncation(Policy):
    name = "left_truncation"
    description = "drop the oldest non-system messages until the window fits"
    as_of = "2025-11-01"
    source = "common framework behaviour (e.g. LangChain trim_messages strategy='last')"

    def start(self, eng: Engine, p: dict) -> None:
        eng.cursor = 0  # everything before it is evicted or preserved

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        budget = eng.inp.budget
        if eng.total() <= budget:
            return 0
        last_group = int(eng.inp.group[eng.end - 1]) if eng.end else -1
        dropped = []
        i = eng.cursor
        while eng.total() > budget and i < eng.end:
            if eng.state[i] != KEPT or (p["preserve_system"] and eng.inp.is_system(i)):
                i += 1
                continue
            if int(eng.inp.group[i]) == last_group:
                break
            eng.move_group(i, EVICTED)
            dropped.append(i)
            i += 1
        eng.cursor = i
        if dropped:
            eng.event("eviction", policy=self.name, count=len(dropped), first=dropped[0], last=dropped[-1])
        over = eng.total() - budget
        if over > 0:
            eng.event("overflow", would_fail=True, overflow=over,
                      message=f"even the most recent messages exceed the budget by {over:,} tokens")
        return max(over, 0)
