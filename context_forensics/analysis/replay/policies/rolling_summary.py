"""``rolling_summary``: fold the oldest turns into a running summary of bounded size, continuously.

The "running summary" memory of chat frameworks: LangChain ``ConversationSummaryBufferMemory``
(``max_token_limit``: when the buffer exceeds it, the oldest messages are pruned from the buffer
and folded into ``moving_summary_buffer`` by ``predict_new_summary(pruned, existing_summary)``),
LlamaIndex ``ChatSummaryMemoryBuffer`` (``token_limit``: older messages summarized, the recent
ones kept verbatim). Unlike ``auto_compaction``, which replaces the whole history once at a
threshold, this folds at **every** call whose window exceeds the trigger, and only as many of
the oldest whole groups as it takes to get back under it:

- ``trigger`` (default 0.8): a float in (0, 1] is a fraction of the budget, an int tokens;
  the window never exceeds the budget either way (a window over it is folded too);
- ``keep_recent_tokens`` (default: a quarter of the budget): the newest messages worth at least
  this many tokens stay verbatim (folding stops before it would leave fewer), unless the window
  would otherwise not fit the budget; the newest group always stays;
- ``summary_tokens`` (default 1,000): the running summary's maximum size. Each fold makes the
  summary min(``summary_tokens``, previous summary + the tokens folded), so it never grows the
  window (a fold replaces at least what it adds). Until the summary reaches that size a fold
  saves nothing (no compression is assumed below it), so the first fold takes in at least
  ``summary_tokens`` worth of turns.

Folded messages are SUMMARIZED (a tool call and its results together); preserved system
messages stay. The summary's text is not in the log: its size is an estimate (the bound above),
and fact tracking counts a constraint carried only by it as ``summarized`` (an assumption).
Each fold is a ``compaction`` event (``recorded: false``, ``rolling: true``, as fact tracking and
``explain`` read compactions) with the tokens before and after, the tokens folded and the summary's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ._common import check_int, last_group, report_overflow
from .base import IN_WINDOW, SUMMARIZED, Engine, Policy, register_policy

DEFAULT_TRIGGER = 0.8
DEFAULT_SUMMARY = 1_000


@dataclass(slots=True)
class _RollingState:
    trigger: int  # tokens: the window folds above it
    keep_recent: int  # tokens of the newest messages that stay verbatim while the window fits
    cursor: int = 0  # messages before it are summarized or stay for good (system)
    sys_tokens: int = 0  # preserved system messages in the window
    sys_seen: int = 0


@register_policy
class RollingSummary(Policy):
    name = "rolling_summary"
    description = "fold the oldest turns into a bounded running summary whenever the window passes a trigger"
    as_of = "2025-12-02"
    source = ("LangChain ConversationSummaryBufferMemory (max_token_limit, moving_summary_buffer); "
              "LlamaIndex ChatSummaryMemoryBuffer (token_limit)")
    defaults: ClassVar[dict[str, Any]] = {"trigger": DEFAULT_TRIGGER, "summary_tokens": DEFAULT_SUMMARY,
                                          "keep_recent_tokens": None}

    def params(self, given: dict[str, Any] | None) -> dict[str, Any]:
        p = super().params(given)
        t = p["trigger"]
        if isinstance(t, float):
            if not 0 < t <= 1:
                raise ValueError(f"parameter 'trigger' as a fraction must be in (0, 1], not {t!r}")
        else:
            check_int("trigger", t, minimum=1)
        check_int("summary_tokens", p["summary_tokens"])
        check_int("keep_recent_tokens", p["keep_recent_tokens"], optional=True)
        return p

    def start(self, eng: Engine, p: dict) -> None:
        budget = eng.inp.budget
        t = p["trigger"]
        keep = p["keep_recent_tokens"]
        eng.set_policy_state(_RollingState(trigger=min(budget, int(t * budget) if isinstance(t, float) else t),
                                           keep_recent=budget // 4 if keep is None else keep))

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        preserve, is_sys, state = p["preserve_system"], eng.is_sys, eng.state
        st = eng.policy_state(_RollingState)
        if preserve:
            for i in range(st.sys_seen, eng.end):
                if is_sys[i] and state[i] in IN_WINDOW:
                    st.sys_tokens += eng.cost(i)
            st.sys_seen = eng.end
        budget = eng.inp.budget
        before = eng.total()
        if before <= st.trigger:
            return 0
        last = last_group(eng)
        cap, old, fixed = p["summary_tokens"], eng.extra, eng.fixed()
        folded: list[int] = []
        replaced = 0

        def total() -> int:  # the window if the summary took in what was folded so far
            return eng.window + (min(cap, old + replaced) if replaced else old) + fixed

        i = st.cursor
        while i < eng.end and total() > st.trigger:
            if state[i] not in IN_WINDOW or (preserve and is_sys[i]):
                i += 1
                continue
            if eng.group[i] == last:
                break
            group = [m for m in eng.members(i) if state[m] in IN_WINDOW and eng.movable(m)]
            cost = sum(eng.cost(m) for m in group)
            if eng.window - st.sys_tokens - cost < st.keep_recent and total() <= budget:
                break  # the newest keep_recent_tokens stay verbatim while the window fits
            for m in group:
                eng.move(m, SUMMARIZED)
                folded.append(m)
            replaced += cost
            i += 1
        st.cursor = i
        if folded:
            folded.sort()
            eng.extra = min(cap, old + replaced)
            eng.event("compaction", policy=self.name, recorded=False, rolling=True, trigger="threshold"
                      if before > st.trigger else "budget", threshold=st.trigger, tokens_before=before,
                      tokens_after=eng.total(), summarized=len(folded), first=folded[0], last=folded[-1],
                      folded_tokens=replaced, summary_tokens=eng.extra)
        return report_overflow(eng, "the running summary and the messages that stay")
