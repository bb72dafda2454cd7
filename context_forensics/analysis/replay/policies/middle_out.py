"""``middle_out``: OpenRouter's ``transforms: ["middle-out"]``.

OpenRouter documents it as: "removing or truncating messages from the middle of the prompt,
until the prompt fits within the model's context window", on the grounds that LLMs attend
least to the middle of a long prompt. It also handles providers that cap the *number* of
messages (Anthropic: 1,000): "the transform will keep half of the messages from the start
and half from the end of the conversation". Endpoints with a context of 8k tokens or less
use it by default. The model here:

- Removable units are the history's tool-call groups (a call and its results, contiguous;
  groups that interleave are merged into one unit), minus preserved system messages and
  minus the newest unit, which always stays.
- Units are removed from the middle outwards, alternating deterministically: the middle unit
  ``(L-1)//2`` of the ``L`` removable ones first, then the one after it, then the one before
  it, and so on, until the window fits the budget and, when ``max_messages`` is set, holds at
  most that many messages (system messages and the newest unit included). Removing k units
  thus always removes one contiguous run centred on the middle, so the beginning and the end
  of the conversation survive longest.
- Whole messages are removed; OpenRouter may also truncate a single oversize message, which
  this token-count-only replay does not model.
- The transform runs on every request over the full history the client sends (the client
  keeps everything), so it is stateless: as the conversation grows the middle moves and a
  message dropped at one step can be back in the window at a later one. Such messages show
  up in ``new["kept"]`` and in a ``restored`` event.

Cost: one binary search over prefix sums per step, plus the messages whose state changes
(the edges of the removed run move by about the number of new messages), so a session stays
O(messages + state changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ._common import check_int, report_overflow
from .base import EVICTED, KEPT, Engine, Policy, ReplayInput, register_policy


def units(inp: ReplayInput) -> tuple[np.ndarray, np.ndarray]:
    """Per message, the start and end (exclusive) seq of its unit: the smallest contiguous run
    of messages that contains it and every group overlapping it."""
    n = inp.n
    group = inp.group
    last_of = {}
    for i in range(n):
        last_of[int(group[i])] = i
    start = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    s, reach = 0, -1
    for i in range(n):
        if i > reach:  # nothing before i reaches past it: a new unit starts
            if i:
                end[s:i] = i
            s = i
        start[i] = s
        reach = max(reach, last_of[int(group[i])])
    if n:
        end[s:n] = n
    return start, end


def _span(mid: int, k: int) -> tuple[int, int]:
    """The run of unit indices [lo, hi] removed after k removals alternating around ``mid``."""
    return mid - (k - 1) // 2, mid + k // 2


@dataclass(slots=True)
class _MiddleState:
    u_start: np.ndarray  # per message, its unit's first seq (``units``)
    u_end: np.ndarray  # ... and its unit's end (exclusive)
    removable: np.ndarray  # bool per message: not a preserved system message, not a marker
    order: list[int] = field(default_factory=list)  # start seq of each removable unit, oldest first
    pt: list[int] = field(default_factory=lambda: [0])  # prefix sums of removable tokens over ``order``
    pc: list[int] = field(default_factory=lambda: [0])  # ... and of removable message counts
    next_unit: int = 0  # start seq of the first unit not yet appended
    lo: int = 0  # the removed run, as indices into ``order`` (lo > hi: empty)
    hi: int = -1


@register_policy
class MiddleOut(Policy):
    name = "middle_out"
    description = "remove messages from the middle of the prompt until it fits (OpenRouter)"
    as_of = "2025-11-01"
    source = "OpenRouter docs, Message Transforms (https://openrouter.ai/docs/transforms)"
    defaults: ClassVar[dict[str, Any]] = {"max_messages": None}

    def params(self, given: dict[str, Any] | None) -> dict[str, Any]:
        p = super().params(given)
        check_int("max_messages", p["max_messages"], minimum=1, optional=True)
        return p

    def start(self, eng: Engine, p: dict) -> None:
        inp = eng.inp
        u_start, u_end = units(inp)
        preserve = p["preserve_system"]
        # a marker is never lost (``Engine.movable``)
        removable = np.array([not (preserve and inp.is_system(i)) and eng.movable(i) for i in range(inp.n)],
                             dtype=bool)
        eng.set_policy_state(_MiddleState(u_start, u_end, removable))

    def _grow(self, eng: Engine, st: _MiddleState) -> None:
        """Append the units completed before the newest one (they no longer change)."""
        newest = int(st.u_start[eng.end - 1]) if eng.end else 0
        s = st.next_unit
        while s < newest:
            e = int(st.u_end[s])
            members = [i for i in range(s, e) if st.removable[i]]
            if members:
                st.order.append(s)
                st.pt.append(st.pt[-1] + int(sum(int(eng.tokens[i]) for i in members)))
                st.pc.append(st.pc[-1] + len(members))
            s = e
        st.next_unit = s

    def _set(self, eng: Engine, st: _MiddleState, a: int, b: int, state: int, out: list[int]) -> None:
        """Move the removable messages of units order[a..b] (inclusive) to ``state``."""
        for u in range(max(a, 0), b + 1):
            s = st.order[u]
            for i in range(s, int(st.u_end[s])):
                if st.removable[i] and eng.state[i] != state:
                    eng.move(i, state)
                    out.append(i)

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        st = eng.policy_state(_MiddleState)
        self._grow(eng, st)
        pt, pc, L = st.pt, st.pc, len(st.order)
        lo0, hi0 = st.lo, st.hi
        removed_t = pt[hi0 + 1] - pt[lo0] if hi0 >= lo0 else 0
        removed_c = pc[hi0 + 1] - pc[lo0] if hi0 >= lo0 else 0
        need_t = eng.total() + removed_t - eng.inp.budget  # tokens to remove from the full history
        in_window = eng.counts["kept"] + removed_c
        need_c = in_window - p["max_messages"] if p["max_messages"] is not None else 0
        mid = (L - 1) // 2

        def enough(k: int) -> bool:
            lo, hi = _span(mid, k)
            if k == 0:
                return need_t <= 0 and need_c <= 0
            return pt[hi + 1] - pt[lo] >= need_t and pc[hi + 1] - pc[lo] >= need_c

        a, b = 0, L  # smallest k in [0, L] that is enough (L if none is)
        while a < b:
            k = (a + b) // 2
            if enough(k):
                b = k
            else:
                a = k + 1
        lo1, hi1 = _span(mid, a)

        restored: list[int] = []
        evicted: list[int] = []
        if hi0 >= lo0:  # old run minus new run comes back
            self._set(eng, st, lo0, min(hi0, lo1 - 1), KEPT, restored)
            self._set(eng, st, max(lo0, hi1 + 1), hi0, KEPT, restored)
            self._set(eng, st, lo1, min(hi1, lo0 - 1), EVICTED, evicted)
            self._set(eng, st, max(lo1, hi0 + 1), hi1, EVICTED, evicted)
        else:
            self._set(eng, st, lo1, hi1, EVICTED, evicted)
        st.lo, st.hi = lo1, hi1

        removed_now = (pt[hi1 + 1] - pt[lo1], pc[hi1 + 1] - pc[lo1]) if a else (0, 0)
        if evicted or restored:
            first = st.order[lo1] if a else None
            last = int(st.u_end[st.order[hi1]]) - 1 if a else None
            data = {"removed_first": first, "removed_last": last,
                    "removed_tokens": removed_now[0], "removed_messages": removed_now[1]}
            if evicted:
                evicted.sort()
                eng.event("eviction", policy=self.name, count=len(evicted), first=evicted[0],
                          last=evicted[-1], **data)
            if restored:
                restored.sort()
                eng.event("restored", policy=self.name, count=len(restored), first=restored[0],
                          last=restored[-1], **data)
        if p["max_messages"] is not None and in_window - removed_now[1] > p["max_messages"]:
            eng.event("overflow", would_fail=True, overflow=0, reason="max_messages",
                      messages=in_window - removed_now[1], max_messages=p["max_messages"],
                      message=f"{in_window - removed_now[1]} messages remain, over the provider's "
                              f"limit of {p['max_messages']}")
        return report_overflow(eng, "the system messages and the newest messages")
