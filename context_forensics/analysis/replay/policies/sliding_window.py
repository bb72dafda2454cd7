"""``sliding_window``: keep only the last N messages and/or the last N tokens of the conversation.

What client-side memory buffers do: LangChain ``ConversationBufferWindowMemory(k)`` and
``trim_messages(strategy="last", max_tokens=...)``, AutoGen ``BufferedChatCompletionContext
(buffer_size)`` / ``MessageHistoryLimiter(max_messages)`` and ``TokenLimitedChatCompletionContext``,
LlamaIndex ``ChatMemoryBuffer(token_limit)``. The window is a suffix of the conversation:

- ``max_messages`` (default 20; null for no count limit): at most N conversation messages
  stay (preserved system messages are extra and do not count);
- ``max_tokens`` (default null): the conversation messages that stay total at most N tokens
  (again not counting preserved system messages, nor the fixed per-call overhead);
- and, whatever N is, the window must still fit the budget (limit − reserved output).

A tool call and its results leave together (AutoGen drops a leading tool result for the same
reason), so a window can hold fewer than N messages. The newest group always stays, even if
it alone is larger than N; if the window still does not fit the budget the overflow is
reported. Evicted messages never come back (the client dropped them from its memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ._common import check_int, evict_oldest, eviction_event, report_overflow
from .base import KEPT, Engine, Policy, register_policy


@dataclass(slots=True)
class _WindowState:
    cursor: int = 0
    sys_seen: int = 0  # history scanned up to here for preserved system messages: they never leave
    sys_count: int = 0
    sys_tokens: int = 0
    marker_count: int = 0  # markers in the history: never lost, and no message the window holds


@register_policy
class SlidingWindow(Policy):
    name = "sliding_window"
    description = "keep the last N messages and/or the last N tokens (whole tool-call groups)"
    as_of = "2025-11-01"
    source = ("LangChain ConversationBufferWindowMemory / trim_messages(strategy='last'); "
              "AutoGen BufferedChatCompletionContext, MessageHistoryLimiter; "
              "LlamaIndex ChatMemoryBuffer(token_limit)")
    defaults: ClassVar[dict[str, Any]] = {"max_messages": 20, "max_tokens": None}

    def params(self, given: dict[str, Any] | None) -> dict[str, Any]:
        p = super().params(given)
        check_int("max_messages", p["max_messages"], minimum=1, optional=True)
        check_int("max_tokens", p["max_tokens"], minimum=1, optional=True)
        return p

    def start(self, eng: Engine, p: dict) -> None:
        eng.set_policy_state(_WindowState())

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        preserve = p["preserve_system"]
        st = eng.policy_state(_WindowState)
        is_sys, is_marker, state, tokens = eng.is_sys, eng.is_marker, eng.state, eng.tokens
        for i in range(st.sys_seen, eng.end):
            if is_marker[i]:
                st.marker_count += 1
            elif preserve and is_sys[i] and state[i] == KEPT:
                st.sys_count += 1
                st.sys_tokens += tokens[i]
        st.sys_seen = eng.end
        max_messages, max_tokens, budget = p["max_messages"], p["max_tokens"], eng.inp.budget
        counts = eng.counts

        # This policy only ever has KEPT and EVICTED messages. ``over`` is asked after every
        # group evicted, so it is a plain test; the event names the reasons once.
        def over() -> bool:
            return ((max_messages is not None and counts["kept"] - st.sys_count - st.marker_count > max_messages)
                    or (max_tokens is not None and eng.window - st.sys_tokens > max_tokens)
                    or eng.total() > budget)

        if over():
            why = []
            if max_messages is not None and counts["kept"] - st.sys_count - st.marker_count > max_messages:
                why.append("max_messages")
            if max_tokens is not None and eng.window - st.sys_tokens > max_tokens:
                why.append("max_tokens")
            if eng.total() > budget:
                why.append("budget")
            st.cursor, dropped = evict_oldest(eng, st.cursor, preserve, lambda: not over())
            eviction_event(eng, self.name, dropped, reason=why)
        return report_overflow(eng, "even the most recent messages")
