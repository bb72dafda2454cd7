"""A replay policy keeps its own typed state (``Engine.set_policy_state``), never attributes of its own
on the shared engine: one policy run under another (goal_anchoring's ``under``) cannot clash with it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from context_forensics.analysis.replay.policies import Engine, ReplayInput, policies


def _input() -> ReplayInput:
    # system, user, a call with two results, a reply, user, a reply: steps at the three model calls
    roles = ("system", "user", "assistant", "tool", "tool", "assistant", "user", "assistant")
    tokens = np.array([50, 400, 30, 900, 700, 60, 300, 40], dtype=np.int64)
    group = np.array([0, 1, 2, 2, 2, 5, 6, 7], dtype=np.int64)
    return ReplayInput(tokens=tokens, roles=roles, kinds=("message",) * len(roles), group=group,
                       steps=np.array([2, 5, 7], dtype=np.int64), limit=1_500, placeholder_tokens=5,
                       tool_names=(None, None, None, "Read", "Bash", None, None, None))


@dataclass
class _A:
    n: int = 0


@dataclass
class _B:
    n: int = 0


def test_a_state_is_found_by_its_class_and_states_of_two_classes_sit_side_by_side():
    eng = Engine(_input())
    a = eng.set_policy_state(_A(1))
    b = eng.set_policy_state(_B(2))
    assert eng.policy_state(_A) is a and eng.policy_state(_B) is b
    eng.policy_state(_A).n += 1
    assert (a.n, b.n) == (2, 2)


def test_a_state_never_set_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no _A on this engine"):
        Engine(_input()).policy_state(_A)


@pytest.mark.parametrize("name", sorted(policies()))
def test_a_policy_run_adds_no_attribute_to_the_engine(name):
    inp = _input()
    pol = policies()[name]
    params = {"under": "sliding_window", "under_params": {"max_messages": 2}, "pinned": [1]} \
        if name == "goal_anchoring" else {}
    p = pol.params(params)
    eng = Engine(inp)
    before = set(vars(eng))
    pol.start(eng, p)
    for j, seq in enumerate(inp.steps.tolist(), start=1):
        eng.step_index = j - 1
        eng.advance(seq)
        pol.fit(eng, j, p)
        eng.snapshot(j, seq)
    pol.after_last_call(eng, p)
    assert set(vars(eng)) == before
