"""Where a message sits in each step's window: in-window token offsets, for "lost in the middle".

A fact's supporting message is ``at_risk`` (``middle_of_long_window``) when a long window holds
it deep in its middle; ``Positions`` gives the in-window tokens before any set of messages at
every step of a replay, from the timeline's joins and state changes, without an n x m pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ...records import KIND_CLEARED_TOOL_RESULT

if TYPE_CHECKING:  # pragma: no cover
    from ..replay import Timeline


def _cost_fn(inp: Any) -> Callable[[int, int], int]:
    """The tokens message i holds in a window in a given replay state."""
    from ..replay.policies import CLEARED, KEPT, OUTSIDE_LOCAL

    pre = [k == KIND_CLEARED_TOOL_RESULT for k in inp.kinds]
    tokens = inp.tokens

    def cost(i: int, state: int) -> int:
        if state in (KEPT, OUTSIDE_LOCAL):
            return int(tokens[i])
        if state == CLEARED:
            return int(tokens[i]) if pre[i] else min(int(tokens[i]), inp.placeholder_tokens)
        return 0

    return cost


class Positions:
    """Token offsets of messages within each step's window, for the "middle" test.

    ``offsets(seqs)`` gives, for each asked message, the in-window tokens before it at every
    step: the join/transition deltas of earlier messages accumulated, without an n x m pass.
    Synthetic content (a simulated compaction's summary) is counted at the front.
    """

    def __init__(self, inp: Any, timeline: Timeline) -> None:
        from ..replay.policies import KEPT

        m = len(timeline.steps)
        cost = _cost_fn(inp)
        seqs, steps, deltas = [], [], []
        for j in range(inp.n):
            join = int(timeline.joins[j])
            if join == 0:
                continue
            prev = cost(j, KEPT)
            seqs.append(j)
            steps.append(join)
            deltas.append(prev)
            for step, state in timeline.changes.get(j, []):
                now = cost(j, state)
                if now != prev:
                    seqs.append(j)
                    steps.append(step)
                    deltas.append(now - prev)
                prev = now
        self.seq = np.asarray(seqs, dtype=np.int64)
        self.step = np.asarray(steps, dtype=np.int64)
        self.delta = np.asarray(deltas, dtype=np.int64)
        per_step = np.zeros(m + 1, dtype=np.int64)
        np.add.at(per_step, self.step, self.delta)
        self.in_window = np.cumsum(per_step)[1:]  # tokens of messages in the window, per step
        results = timeline.results
        window = np.array([r.window_tokens for r in results], dtype=np.int64)
        fixed = inp.fixed[: m] if inp.fixed is not None else np.zeros(m, dtype=np.int64)
        self.extra = np.maximum(window - self.in_window - fixed, 0)
        self.window = window
        self.m = m

    def offsets(self, seqs: Sequence[int]) -> np.ndarray:
        """(len(seqs), m) in-window tokens before each message, plus the synthetic front."""
        asked = np.asarray(seqs, dtype=np.int64)
        order = np.argsort(asked, kind="stable")
        ss = asked[order]
        # a transition of message j shifts every asked message after j
        row = np.searchsorted(ss, self.seq, side="right")
        acc = np.zeros((len(ss) + 1, self.m + 1), dtype=np.int64)
        np.add.at(acc, (row, self.step), self.delta)
        acc = np.cumsum(np.cumsum(acc, axis=0), axis=1)[: len(ss), 1:]
        out = np.empty_like(acc)
        out[order] = acc
        return out + self.extra[None, :]
