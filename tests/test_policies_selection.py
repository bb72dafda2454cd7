"""constraint_selection, goal_anchoring, rolling_summary: their own rules and invariants (issue 15, item 6).

The invariants every policy keeps (budget, tool pairs, system messages, determinism, per-step
figures) run over these three in test_policies.py; here are the ones particular to each: pins
stay while they fit, the anchor is counted at every call, a fold never grows the window and the
summary stays within its bound; and the lexical pin finder (replay.pins).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from context_forensics.analysis.replay.pins import find_pins
from context_forensics.analysis.replay.policies import (
    EVICTED,
    IN_WINDOW,
    KEPT,
    get_policy,
)
from context_forensics.records import MARKER_KINDS, Message
from test_policies import build, names, sessions


def run(name, inp, **params):
    return get_policy(name).run(inp, params)


def in_window(states, i):
    return int(states[i]) in IN_WINDOW


# -- constraint_selection


def test_constraint_selection_keeps_a_pinned_message_left_truncation_drops():
    # s, the goal (pinned), a constraint statement in a tool result (pinned), then long outputs
    msgs = [("s", 10), ("u", 20), ("c", 5), ("t", 15), ("c", 5), ("t", 40), ("c", 5), ("t", 40), ("a", 5)]
    inp = build(msgs, 110)
    _, lt = run("left_truncation", inp)
    assert names(lt[1:4]) == ["evicted"] * 3
    res, cs = run("constraint_selection", inp, pinned=[1, 3])
    assert names(cs[[1, 2, 3]]) == ["kept"] * 3  # the pinned result brings its call
    assert cs[4] == EVICTED and cs[5] == EVICTED  # the oldest unpinned group makes the room
    assert res[-1].window_tokens <= inp.budget
    ev = [e for r in res for e in r.events if e["type"] == "eviction"]
    assert ev and ev[-1]["policy"] == "constraint_selection" and ev[-1]["pinned_kept"] == ev[-1]["pinned"]


def test_constraint_selection_skips_a_large_group_for_older_small_ones():
    # left truncation stops at the first message that does not fit; lethes' greedy goes on
    msgs = [("u", 10), ("a", 10), ("u", 10), ("a", 10), ("c", 5), ("t", 60), ("u", 10), ("a", 5)]
    inp = build(msgs, 70)
    _, lt = run("left_truncation", inp)
    _, cs = run("constraint_selection", inp, pin_goal=False)
    assert names(lt[:4]) == ["evicted"] * 4
    assert cs[4] == EVICTED and cs[5] == EVICTED  # the 65-token group does not fit beside the newest
    assert all(cs[i] == KEPT for i in (0, 1, 2, 3, 6))  # the older small turns are kept instead


def test_constraint_selection_brings_the_user_message_a_kept_reply_answers():
    # u0 12, call 1 + result 2 (25), a3 10 answering u0, u4 20 (the newest): budget 60.
    # newest first: u4, then a3 brings u0 (18 left), and the 25-token pair no longer fits. Without
    # the dependency the pair would have taken the room and u0 been dropped.
    inp = build([("u", 12), ("c", 5), ("t", 20), ("a", 10), ("u", 20), ("a", 5)], 60, steps=[1, 3, 5])
    _, cs = run("constraint_selection", inp, pin_goal=False)
    assert names(cs[:5]) == ["kept", "evicted", "evicted", "kept", "kept"]


def test_constraint_selection_brings_back_what_fits_again():
    # the selection is made afresh at every call: a pin that was too big comes back when room is made
    inp = build([("u", 50), ("a", 10), ("u", 60), ("a", 5), ("u", 1), ("a", 1)], 120, steps=[1, 3, 5])
    res, st_ = run("constraint_selection", inp, pinned=[0])
    assert int(st_[0]) == KEPT
    assert all(r.overflow == 0 for r in res)


def test_constraint_selection_drops_the_oldest_pins_when_they_alone_do_not_fit():
    inp = build([("u", 40), ("u", 40), ("u", 40), ("a", 5)], 100)
    res, st_ = run("constraint_selection", inp, pinned=[0, 1])
    assert names(st_) == ["evicted", "kept", "kept", "not_yet"]
    ev = [e for e in res[-1].events if e["type"] == "pins_dropped"]
    assert ev and ev[0]["seqs"] == [0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_pins_are_never_evicted_while_they_fit(data):
    inp = data.draw(sessions(), label="session")
    pinned = data.draw(st.lists(st.integers(0, inp.n - 1), unique=True, max_size=4), label="pinned")
    preserve = data.draw(st.booleans(), label="preserve_system")
    pol = get_policy("constraint_selection")
    for k in range(1, len(inp.steps) + 1):
        res, states = pol.run(inp, {"pinned": pinned, "preserve_system": preserve}, upto=k)
        seq = int(inp.steps[k - 1])
        r = res[-1]
        fixed = int(inp.fixed[k - 1]) if inp.fixed is not None else 0
        # what is taken before any pin: system messages, the newest group, the last user message
        last = int(inp.group[seq - 1])
        users = [i for i in range(seq) if inp.roles[i] == "user" and inp.kinds[i] == "message"]
        # (and the markers: never lost, whatever tokens a drawn session gives them)
        must = {i for i in range(seq) if (preserve and inp.is_system(i)) or inp.group[i] == last
                or inp.kinds[i] in MARKER_KINDS}
        must |= {m for m in range(seq) if users and inp.group[m] == inp.group[users[-1]]}
        pins = {m for p in pinned if p < seq for m in range(seq) if inp.group[m] == inp.group[p]}
        need = sum(int(inp.tokens[i]) for i in must | pins) + fixed
        if need <= inp.budget:
            assert all(in_window(states, i) for i in pins), (k, pinned, names(states[:seq]))
            assert r.overflow == 0
        assert r.overflow == max(0, r.window_tokens - inp.budget)
        if preserve:
            assert all(in_window(states, i) for i in range(seq) if inp.is_system(i))


# -- goal_anchoring


def test_goal_anchoring_restates_at_every_call_and_counts_it():
    msgs = [("s", 10), ("u", 20), ("c", 5), ("t", 15), ("c", 5), ("t", 40), ("c", 5), ("t", 40), ("a", 5)]
    inp = build(msgs, 120)
    res, st_ = run("goal_anchoring", inp, pinned=[1, 3])
    for r, seq in zip(res, inp.steps.tolist()):
        assert r.extra == sum(int(inp.tokens[i]) for i in (1, 3) if i < seq)  # every call, not once
        assert r.window_tokens <= inp.budget
    assert st_[1] == EVICTED  # the truncation under it still drops the original
    ev = [e for r in res for e in r.events if e["type"] == "anchoring"]
    assert [e["added"] for e in ev] == [[1], [3]] and all(e["simulated"] for e in ev)


def test_goal_anchoring_leaves_out_a_message_too_long_to_restate():
    inp = build([("u", 20), ("c", 5), ("t", 500), ("a", 5)], 2000)
    res, _ = run("goal_anchoring", inp, pinned=[0, 2], max_restated_tokens=100)
    assert res[-1].extra == 20
    ev = [e for r in res for e in r.events if e["type"] == "anchoring"]
    assert ev[-1]["skipped"] == [2]


def test_goal_anchoring_checks_the_underlying_policy():
    with pytest.raises(ValueError, match="under"):
        get_policy("goal_anchoring").params({"under": "auto_compaction"})
    with pytest.raises(ValueError, match="max_messages"):
        get_policy("goal_anchoring").params({"under": "sliding_window", "under_params": {"max_messages": 0}})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_goal_anchoring_anchor_is_the_restated_messages_joined(data):
    inp = data.draw(sessions(), label="session")
    pinned = data.draw(st.lists(st.integers(0, inp.n - 1), unique=True, max_size=4), label="pinned")
    cap = data.draw(st.integers(0, 200), label="max_restated_tokens")
    res, _ = run("goal_anchoring", inp, pinned=pinned, max_restated_tokens=cap)
    for r, seq in zip(res, inp.steps.tolist()):
        assert r.extra == sum(int(inp.tokens[i]) for i in pinned if i < seq and inp.tokens[i] <= cap)
        assert r.overflow == max(0, r.window_tokens - inp.budget)


# -- rolling_summary


def test_rolling_summary_folds_the_oldest_into_a_bounded_summary():
    msgs = [("s", 10), ("u", 30), ("a", 30), ("u", 30), ("a", 30), ("u", 30), ("a", 30), ("u", 5), ("a", 5)]
    inp = build(msgs, 200, steps=[2, 4, 6, 8])
    res, st_ = run("rolling_summary", inp, trigger=120, summary_tokens=20, keep_recent_tokens=20)
    folds = [e for r in res for e in r.events if e["type"] == "compaction"]
    assert folds and all(e["rolling"] and not e["recorded"] for e in folds)
    assert len(folds) >= 2  # continuous: more than one call folds
    assert st_[0] == KEPT  # the system message stays
    assert all(r.extra <= 20 for r in res)
    assert all(r.window_tokens <= 120 for r in res)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_fold_never_grows_the_window_and_the_summary_stays_bounded(data):
    inp = data.draw(sessions(), label="session")
    cap = data.draw(st.integers(0, 300), label="summary_tokens")
    trigger = data.draw(st.one_of(st.floats(0.05, 1.0), st.integers(1, 1500)), label="trigger")
    res, _ = run("rolling_summary", inp, trigger=trigger, summary_tokens=cap)
    summarized: set[int] = set()
    for r in res:
        assert r.extra <= cap
        for e in r.events:
            if e["type"] == "compaction":
                assert e["tokens_after"] <= e["tokens_before"]
                assert e["summary_tokens"] <= cap
        assert not summarized & set(r.new.get("kept", []))  # a folded message never comes back
        summarized |= set(r.new.get("summarized", []))
        assert r.overflow == max(0, r.window_tokens - inp.budget)


# -- the pin finder


def _stored(*msgs):
    return [SimpleNamespace(seq=i, message=Message(role=role, text=text)) for i, (role, text) in enumerate(msgs)]


def test_find_pins_is_lexical_and_skips_the_model_repeating_a_rule():
    msgs = _stored(("system", "You are a coding agent."),
                   ("user", "Fix the parser. Never modify files under tests/."),
                   ("assistant", "I will never modify files under tests/."),
                   ("tool", "CONTRIBUTING: do not add new dependencies to requirements.txt"),
                   ("user", "Please keep the test folder as it is."))
    pins = find_pins(msgs, ["Never modify files under tests/.", "Do not add new dependencies to requirements.txt.",
                            "Use port 8080."])
    assert pins.goal == 1
    assert pins.facts["Never modify files under tests/."] == (1,)  # not the assistant's echo (2)
    assert pins.facts["Do not add new dependencies to requirements.txt."] == (3,)
    assert pins.unmatched == ["Use port 8080."]  # stated nowhere: not pinned, and said so
    assert pins.seqs() == [1, 3]


def test_find_pins_needs_the_numbers_and_names():
    msgs = _stored(("user", "Keep the timeout at 30 seconds."), ("user", "Keep the timeout at 45 seconds."))
    pins = find_pins(msgs, ["Keep the timeout at 45 seconds."])
    assert pins.facts["Keep the timeout at 45 seconds."] == (1,)
    assert pins.goal == 0
