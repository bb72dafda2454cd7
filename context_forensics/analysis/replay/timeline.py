"""``Timeline``: each message's state at every step of a policy run, without an n × m matrix."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .policies import ReplayInput, StepResult


@dataclass
class Timeline:
    """Each message's state at every step, from a policy run, without an n × m matrix.

    ``joins[i]`` is the first step (1-based) whose history holds message i (0: never);
    ``changes[i]`` the (step, state) transitions after that. ``states(i)`` expands one message
    to an int8 array over steps, which is what fact tracking needs for a few messages.
    """

    steps: np.ndarray  # message seq of each step
    joins: np.ndarray
    changes: dict[int, list[tuple[int, int]]]
    results: list[StepResult]

    @classmethod
    def from_results(cls, inp: ReplayInput, results: list[StepResult]) -> "Timeline":
        from .policies import STATE_NAMES as names

        code = {v: k for k, v in names.items()}
        steps = inp.steps[: len(results)]
        # message i joins at the first step whose seq is greater than i
        joins = np.searchsorted(steps, np.arange(inp.n), side="right") + 1
        joins[joins > len(steps)] = 0
        changes: dict[int, list[tuple[int, int]]] = {}
        for r in results:
            for state, seqs in r.new.items():
                for sq in seqs:
                    changes.setdefault(sq, []).append((r.step, code[state]))
        return cls(steps, joins, changes, results)

    def state_at(self, i: int, step: int) -> int:
        """Message i's state at ``step`` (1-based; NOT_YET before it joins), without expanding
        its whole row."""
        from .policies import KEPT, NOT_YET

        j = int(self.joins[i]) if i < len(self.joins) else 0
        if j == 0 or step < j:
            return NOT_YET
        state = KEPT
        for at, st in self.changes.get(i, ()):
            if at > step:
                break
            state = st
        return state

    def states(self, i: int) -> np.ndarray:
        """Message i's state at steps 1..m (NOT_YET before it joins)."""
        from .policies import KEPT, NOT_YET

        out = np.full(len(self.steps), NOT_YET, dtype=np.int8)
        j = int(self.joins[i])
        if j == 0:
            return out
        out[j - 1:] = KEPT
        for step, state in self.changes.get(i, []):
            out[step - 1:] = state
        return out
