"""Eviction policies: hand-computed examples, and invariants over random sessions (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from context_forensics.analysis.replay.policies import (
    CLEARED,
    EVICTED,
    IN_WINDOW,
    KEPT,
    NOT_YET,
    OUTSIDE_LOCAL,
    STATE_NAMES,
    SUMMARIZED,
    ReplayInput,
    get_policy,
    policies,
)
from context_forensics.analysis.replay.policies._compaction_presets import NAMES as COMPACTION_PRESETS
from context_forensics.analysis.replay.policies.auto_compaction import initial_context, protected_messages
from context_forensics.config.settings import STRATEGIES
from context_forensics.records import MARKER_KINDS

# -- building inputs by hand
#
# Each message is (code, tokens[, tool name]):
#   s system, d developer, u user, a assistant (a model call), c assistant with tool calls
#   (a model call; the following t messages answer it), t tool result, x tool result the log
#   recorded as cleared, r reasoning item, B compaction boundary, S compaction summary.

ROLE = {"s": "system", "d": "developer", "u": "user", "a": "assistant", "c": "assistant",
        "t": "tool", "x": "tool", "r": "assistant", "B": "system", "S": "user"}
KIND = {"x": "cleared_tool_result", "r": "reasoning", "B": "compaction_boundary", "S": "compaction_summary"}


def build(msgs, limit, *, reserved=0, steps=None, fixed=None, placeholder=0, recorded_prompt=()):
    roles, kinds, group, tools, tokens = [], [], [], [], []
    call = None
    for i, m in enumerate(msgs):
        code, tok = m[0], m[1]
        roles.append(ROLE[code])
        kinds.append(KIND.get(code, "message"))
        tokens.append(tok)
        tools.append(m[2] if len(m) > 2 else None)
        if code == "c":
            call = i
        if code in "tx" and call is not None:
            group.append(call)
        else:
            group.append(i)
        if code not in "ctx":
            call = None
    if steps is None:
        steps = [i for i, m in enumerate(msgs) if m[0] in "ac"]
    return ReplayInput(
        tokens=np.array(tokens, dtype=np.int64), roles=tuple(roles), kinds=tuple(kinds),
        group=np.array(group, dtype=np.int64), steps=np.array(steps, dtype=np.int64), limit=limit,
        reserved=reserved, fixed=None if fixed is None else np.array(fixed, dtype=np.int64),
        tool_names=tuple(tools), placeholder_tokens=placeholder, recorded_prompt=tuple(recorded_prompt),
    )


def run(name, inp, **params):
    return get_policy(name).run(inp, params)


def names(states):
    return [STATE_NAMES[int(s)] for s in states]


def events(result, kind):
    return [e for e in result.events if e["type"] == kind]


# -- registry


def test_registry_matches_config_strategies():
    assert set(policies()) == set(STRATEGIES)


def test_every_policy_is_documented_and_dated():
    for name, pol in policies().items():
        mod = __import__(type(pol).__module__, fromlist=["_"])
        assert mod.__doc__ and len(mod.__doc__) > 100, name
        assert pol.as_of >= "2025-01-01" and pol.source and pol.description, name
        pol.params(None)  # the defaults validate


@pytest.mark.parametrize("name, params", [
    ("sliding_window", {"max_messages": 0}),
    ("sliding_window", {"window": 3}),
    ("middle_out", {"max_messages": "ten"}),
    ("tool_result_clearing", {"trigger": {"type": "turns", "value": 3}}),
    ("tool_result_clearing", {"exclude_tools": "read"}),
    ("auto_compaction", {"preset": "gemini"}),
    ("auto_compaction", {"threshold": 1.5}),
    ("local_global_attention", {"preset": "llama"}),
    ("local_global_attention", {"pattern": "five"}),
    ("local_global_attention", {"overflow": "middle_out"}),
])
def test_bad_parameters_name_the_parameter(name, params):
    with pytest.raises(ValueError, match=next(iter(params))):
        get_policy(name).params(params)


# -- base engine changes


def test_late_tool_result_joins_its_evicted_call():
    # The call (seq 2) is evicted at the step of seq 4; its result arrives only after it.
    inp = build([("u", 10), ("a", 10), ("c", 50), ("u", 10), ("a", 10), ("t", 5), ("a", 1)], 20,
                steps=[1, 4, 6])
    inp = ReplayInput(**{**inp.__dict__, "group": np.array([0, 1, 2, 3, 4, 2, 6])})
    res, st_ = run("left_truncation", inp)
    assert res[1].new == {"evicted": [0, 1, 2]}
    assert res[2].new == {"evicted": [5]}  # arrived in its group's state
    assert names(st_[:6]) == ["evicted"] * 3 + ["kept"] * 2 + ["evicted"]
    assert res[2].counts["evicted"] == 4 and res[2].window_tokens == 20


def test_recorded_cleared_result_costs_its_own_tokens():
    inp = build([("u", 10), ("c", 10), ("x", 7), ("a", 1)], 1000, placeholder=3)
    res, st_ = run("recorded", inp)
    assert st_[2] == CLEARED and res[-1].window_tokens == 27


# -- hand-computed examples


def test_sliding_window_last_n_messages():
    inp = build([("s", 10), ("u", 10), ("a", 10), ("u", 10), ("a", 10), ("u", 10), ("a", 10)], 1000)
    res, st_ = run("sliding_window", inp, max_messages=2)
    assert [r.new for r in res] == [{}, {"evicted": [1]}, {"evicted": [2, 3]}]
    assert names(st_) == ["kept", "evicted", "evicted", "evicted", "kept", "kept", "not_yet"]
    assert events(res[2], "eviction")[0]["reason"] == ["max_messages"]


def test_sliding_window_never_splits_a_group_and_keeps_the_newest():
    inp = build([("s", 10), ("u", 10), ("c", 10), ("t", 10), ("t", 10), ("a", 10), ("u", 10), ("a", 1)],
                1000, steps=[7])
    _, st_ = run("sliding_window", inp, max_messages=3)
    assert names(st_[:7]) == ["kept", "evicted", "evicted", "evicted", "evicted", "kept", "kept"]
    _, st_ = run("sliding_window", inp, max_messages=3, preserve_system=False)
    assert names(st_[:7]) == ["evicted"] * 5 + ["kept"] * 2
    # The newest group alone is bigger than N: it stays.
    inp = build([("u", 10), ("c", 10), ("t", 10), ("t", 10), ("a", 1)], 1000, steps=[4])
    res, st_ = run("sliding_window", inp, max_messages=1)
    assert names(st_[:4]) == ["evicted", "kept", "kept", "kept"] and res[0].overflow == 0


def test_sliding_window_tokens_and_budget():
    inp = build([("s", 5), ("u", 30), ("a", 30), ("u", 30), ("a", 1)], 1000, steps=[4])
    _, st_ = run("sliding_window", inp, max_messages=None, max_tokens=60)
    assert names(st_[:4]) == ["kept", "evicted", "kept", "kept"]
    # max_messages allows everything, but the budget (100 - 30 reserved) does not.
    inp = build([("s", 5), ("u", 30), ("a", 30), ("u", 30), ("a", 1)], 100, reserved=40, steps=[4])
    res, st_ = run("sliding_window", inp, max_messages=10)
    assert names(st_[:4]) == ["kept", "evicted", "evicted", "kept"]
    assert res[0].window_tokens == 35 and events(res[0], "eviction")[0]["reason"] == ["budget"]
    # Even system + newest message do not fit: overflow.
    res, _ = run("sliding_window", build([("s", 50), ("u", 60), ("a", 1)], 100, reserved=30), max_messages=10)
    assert res[0].overflow == 40 and events(res[0], "overflow")[0]["overflow"] == 40


def test_middle_out_removes_from_the_middle_alternating():
    msgs = [("s", 10)] + [("u", 10), ("a", 10)] * 3 + [("u", 10), ("a", 0)]
    inp = build(msgs, 50, steps=[8])
    res, st_ = run("middle_out", inp)
    # Removable units 1..6 (0 is system, 7 is the newest); middle = seq 3, then 4, then 2.
    assert names(st_[:8]) == ["kept", "kept", "evicted", "evicted", "evicted", "kept", "kept", "kept"]
    assert res[0].window_tokens == 50 and res[0].overflow == 0
    ev = events(res[0], "eviction")[0]
    assert (ev["count"], ev["first"], ev["last"], ev["removed_tokens"]) == (3, 2, 4, 30)


def test_middle_out_is_stateless_and_restores_when_the_middle_moves():
    msgs = [("s", 10)] + [("u", 10), ("a", 10)] * 3 + [("u", 10), ("a", 0), ("u", 0), ("a", 0)]
    inp = build(msgs, 50, steps=[8, 10])
    res, st_ = run("middle_out", inp)
    # Step 2: two 0-token messages join; 8 units removable (1..8), middle seq 4: removes 3, 4, 5.
    assert res[1].new == {"evicted": [5], "kept": [2]}
    assert events(res[1], "restored")[0]["first"] == 2
    assert names(st_[:10]) == ["kept", "kept", "kept", "evicted", "evicted", "evicted"] + ["kept"] * 4


def test_middle_out_message_count_limit_keeps_both_ends():
    msgs = [("u", 1), ("a", 1)] * 5 + [("u", 1), ("a", 1)]
    inp = build(msgs, 1000, steps=[11])
    res, st_ = run("middle_out", inp, max_messages=5)
    # 11 messages, units 0..9 removable, 10 newest: remove 6 around the middle (seq 4).
    assert names(st_[:11]) == ["kept"] * 2 + ["evicted"] * 6 + ["kept"] * 3
    assert res[0].counts["kept"] == 5


def test_middle_out_keeps_a_tool_call_with_its_results():
    msgs = [("u", 10), ("a", 10), ("c", 10), ("t", 10), ("t", 10), ("a", 10), ("u", 10), ("a", 0)]
    res, st_ = run("middle_out", build(msgs, 50, steps=[7]))
    # Units: 0, 1, [2,3,4], 5 (6 newest); 20 tokens to remove. The middle unit (seq 1) is not
    # enough, the next one is the whole call with its two results.
    assert names(st_[:7]) == ["kept", "evicted", "evicted", "evicted", "evicted", "kept", "kept"]
    assert res[0].window_tokens == 30


def tool_session():
    return [("s", 10), ("u", 10), ("c", 10), ("t", 100, "read"), ("c", 10), ("t", 100, "bash"),
            ("c", 10), ("t", 100, "read"), ("a", 0)]


def test_tool_result_clearing_keeps_the_newest_uses():
    inp = build(tool_session(), 1000, placeholder=5)
    res, st_ = run("tool_result_clearing", inp, trigger=200, keep=1)
    assert [r.window_tokens for r in res] == [20, 130, 145, 160]
    assert [r.new for r in res] == [{}, {}, {"cleared": [3]}, {"cleared": [5]}]
    assert names(st_[:8]) == ["kept"] * 3 + ["cleared", "kept", "cleared", "kept", "kept"]
    ev = events(res[2], "clearing")[0]
    assert (ev["count"], ev["tokens_cleared"], ev["recorded"]) == (1, 95, False)


def test_tool_result_clearing_options():
    inp = build(tool_session(), 1000, placeholder=5)
    res, _ = run("tool_result_clearing", inp, trigger=200, keep=1, exclude_tools=["bash"])
    assert res[3].new == {} and res[3].window_tokens == 255
    res, _ = run("tool_result_clearing", inp, trigger=200, keep=1, clear_at_least=100)
    assert res[2].new == {} and events(res[2], "clearing_skipped")[0]["would_clear"] == 95
    assert res[3].new == {"cleared": [3, 5]} and res[3].window_tokens == 160
    res, st_ = run("tool_result_clearing", inp, trigger={"type": "input_tokens", "value": 200},
                   keep={"type": "tool_uses", "value": 1}, clear_tool_inputs=True)
    assert res[2].new == {"cleared": [2, 3]} and res[2].window_tokens == 140
    assert names(st_[:8]) == ["kept", "kept", "cleared", "cleared", "cleared", "cleared", "kept", "kept"]
    res, _ = run("tool_result_clearing", inp, trigger={"type": "tool_uses", "value": 2}, keep=0)
    assert res[2].new == {} and res[3].new == {"cleared": [3, 5, 7]}


def test_tool_result_clearing_overflows_when_clearing_is_not_enough():
    res, _ = run("tool_result_clearing", build(tool_session(), 150, placeholder=5), trigger=200, keep=1)
    assert [r.overflow for r in res] == [0, 0, 0, 10]
    assert events(res[3], "overflow")[0]["would_fail"] is True


def test_auto_compaction_generic_keeps_recent_history():
    msgs = [("s", 10), ("u", 20), ("a", 20), ("u", 20), ("a", 20), ("u", 20), ("a", 0)]
    res, st_ = run("auto_compaction", build(msgs, 100), preset="generic", threshold=60,
                   summary_tokens=5, keep_recent_tokens=20)
    assert [r.window_tokens for r in res] == [30, 35, 35]
    assert [r.new for r in res] == [{}, {"summarized": [1, 2]}, {"summarized": [3, 4]}]
    ev = events(res[1], "compaction")[0]
    assert (ev["recorded"], ev["tokens_before"], ev["tokens_after"], ev["summary_tokens"]) == (False, 70, 35, 5)
    assert names(st_[:6]) == ["kept", "summarized", "summarized", "summarized", "summarized", "kept"]


def test_auto_compaction_claude_code_threshold_and_summary_only():
    msgs = [("s", 10), ("u", 20), ("a", 20), ("u", 20), ("a", 0)]
    inp = build(msgs, 100)
    # threshold = 100 - 10 reserved output - 20 buffer = 70; the second step reaches it.
    res, st_ = run("auto_compaction", inp, reserved_output_tokens=10, buffer_tokens=20, summary_tokens=5)
    assert res[0].new == {} and res[1].new == {"summarized": [1, 2, 3]}
    assert res[1].window_tokens == 15 and events(res[1], "compaction")[0]["threshold"] == 70
    assert names(st_[:4]) == ["kept", "summarized", "summarized", "summarized"]
    res, _ = run("auto_compaction", inp, reserved_output_tokens=9, buffer_tokens=20)
    assert res[1].new == {}
    # Claude Code 2.0 on a 200k window with no reserved output configured: 200k - 32k - 13k.
    big = build([("u", 154_999), ("a", 0), ("u", 1), ("a", 0)], 200_000)
    res, _ = run("auto_compaction", big, preset="claude_code_2_0")
    assert res[0].new == {} and res[1].new == {"summarized": [0, 1, 2]}
    assert events(res[1], "compaction")[0]["threshold"] == 155_000 and res[1].window_tokens == 2_000
    # 2.1.21+ (and the undated name): 200k - min(max output, 20k) - 13k = 167k
    res, _ = run("auto_compaction", big)
    assert res[1].new == {}
    big = build([("u", 166_999), ("a", 0), ("u", 1), ("a", 0)], 200_000)
    res, _ = run("auto_compaction", big, preset="claude_code_2_1")
    assert res[0].new == {} and res[1].new == {"summarized": [0, 1, 2]}
    assert events(res[1], "compaction")[0]["threshold"] == 167_000


def test_auto_compaction_codex_rebuilds_initial_context_bridge_and_summary():
    msgs = [("s", 10), ("u", 10), ("a", 20), ("u", 30), ("a", 20), ("u", 10), ("a", 0)]
    inp = build(msgs, 100, steps=[6])
    assert initial_context(inp) == [0, 1]
    res, st_ = run("auto_compaction", inp, preset="codex", summary_tokens=5, bridge_max_tokens=15)
    ev = events(res[0], "compaction")[0]
    assert (ev["threshold"], ev["bridge_tokens"], ev["summary_tokens"]) == (90, 15, 5)
    assert res[0].window_tokens == 40
    assert names(st_[:6]) == ["kept", "kept"] + ["summarized"] * 4


def test_auto_compaction_recorded_summary_length():
    msgs = [("u", 50), ("a", 0), ("B", 0), ("S", 30), ("a", 0), ("u", 50), ("a", 0)]
    res, _ = run("auto_compaction", build(msgs, 1000), preset="generic", threshold=60,
                 summary_tokens="recorded", keep_recent_tokens=0)
    assert events(res[1], "compaction")[0]["summary_tokens"] == 30


def test_local_global_attention_marks_outside_local_window():
    msgs = [("s", 10), ("u", 10), ("a", 10), ("u", 10), ("a", 10), ("a", 0)]
    inp = build(msgs, 1000, steps=[5])
    res, st_ = run("local_global_attention", inp, local_window=25)
    assert names(st_[:5]) == ["outside_local", "outside_local", "kept", "kept", "kept"]
    assert res[0].window_tokens == 50 and res[0].counts["outside_local"] == 2
    ev = events(res[0], "outside_local")[0]
    assert (ev["count"], ev["first"], ev["last"], ev["pattern"]) == (2, 0, 1, "1:1")


def test_local_global_attention_presets():
    pol = get_policy("local_global_attention")
    assert pol.params({"preset": "gemma-3"})["local_window"] == 1024
    assert pol.params({"preset": "gemma-3"})["pattern"] == "5:1"
    assert pol.params({"preset": "gemma-2"})["pattern"] == "1:1"
    assert pol.params({"preset": "mistral-7b", "local_window": 100})["local_window"] == 100
    inp = build([("u", 10), ("a", 600), ("u", 600), ("a", 0)], 8192, steps=[3])
    res, st_ = run("local_global_attention", inp, preset="mistral-7b")
    assert names(st_[:3]) == ["kept"] * 3
    res, st_ = run("local_global_attention", inp, preset="gemma-3")
    assert names(st_[:3]) == ["outside_local", "kept", "kept"]
    assert "1 in 6" in events(res[0], "outside_local")[0]["reach"]


def test_local_global_attention_overflow():
    msgs = [("s", 10), ("u", 10), ("a", 10), ("u", 10), ("a", 10), ("a", 0)]
    inp = build(msgs, 40, steps=[5])
    res, st_ = run("local_global_attention", inp, local_window=25)
    assert res[0].overflow == 10 and res[0].counts["evicted"] == 0
    res, st_ = run("local_global_attention", inp, local_window=25, overflow="left_truncation")
    assert res[0].overflow == 0 and res[0].window_tokens == 40
    assert names(st_[:5]) == ["outside_local", "evicted", "kept", "kept", "kept"]


def test_recorded_compaction_and_clearing():
    msgs = [("s", 10), ("u", 10), ("c", 10), ("t", 10), ("a", 10), ("B", 1), ("S", 20), ("u", 10),
            ("c", 10), ("x", 3), ("a", 0)]
    res, st_ = run("recorded", build(msgs, 1000))
    assert [r.new for r in res] == [{}, {}, {"summarized": [1, 2, 3, 4]}, {"cleared": [9]}]
    ev = events(res[2], "compaction")[0]
    assert (ev["recorded"], ev["at"], ev["tokens_before"], ev["tokens_after"]) == (True, 5, 50, 10)
    assert len(events(res[2], "compaction")) == 1  # the summary belongs to the boundary
    assert events(res[3], "clearing")[0]["recorded"] is True
    assert names(st_[:10]) == ["kept"] + ["summarized"] * 4 + ["kept"] * 4 + ["cleared"]
    assert res[3].window_tokens == 10 + 1 + 20 + 10 + 10 + 3


def test_recorded_summary_without_boundary_and_straddling_pair():
    res, st_ = run("recorded", build([("u", 10), ("a", 10), ("S", 5), ("a", 0)], 1000))
    assert res[1].new == {"summarized": [0, 1]}
    # The call's result is logged after the boundary: the pair stays until the next compaction.
    inp = build([("u", 10), ("c", 10), ("B", 0), ("t", 10), ("a", 10), ("B", 0), ("a", 0)], 1000,
                steps=[1, 4, 6])
    inp = ReplayInput(**{**inp.__dict__, "group": np.array([0, 1, 2, 1, 4, 5, 6])})
    res, st_ = run("recorded", inp)
    assert res[1].new == {"summarized": [0]}
    assert res[2].new == {"summarized": [1, 3, 4]}  # the older boundary is a system message
    assert names(st_[:6]) == ["summarized", "summarized", "kept", "summarized", "summarized", "kept"]


def test_recorded_reports_overflow_without_moving_anything():
    res, st_ = run("recorded", build([("s", 60), ("u", 60), ("a", 0)], 100))
    ev = events(res[0], "overflow")[0]
    assert res[0].overflow == 20 and ev["recorded"] is True and ev["would_fail"] is False
    assert names(st_[:2]) == ["kept", "kept"]


# -- invariants over random sessions


@st.composite
def sessions(draw):
    msgs = []
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["sys", "user", "asst", "call", "call", "compact", "summary", "reason"]))
        def tok():
            return draw(st.integers(0, 150))

        if kind == "sys":
            msgs.append((draw(st.sampled_from("sd")), tok()))
        elif kind == "user":
            msgs.append(("u", tok()))
        elif kind == "asst":
            msgs.append(("a", tok()))
        elif kind == "call":
            msgs.append(("c", tok()))
            for _ in range(draw(st.integers(1, 3))):  # parallel tool calls
                msgs.append((draw(st.sampled_from("ttx")), tok(), draw(st.sampled_from(["read", "bash", "grep"]))))
        elif kind == "compact":
            msgs += [("B", draw(st.integers(0, 5))), ("S", tok())]
        elif kind == "summary":
            msgs.append(("S", tok()))
        else:
            msgs.append(("r", tok()))
    msgs.append(("a", draw(st.integers(0, 50))))
    limit = draw(st.integers(20, 1500))
    reserved = draw(st.integers(0, limit // 4))
    steps = [i for i, m in enumerate(msgs) if m[0] in "ac"]
    fixed = draw(st.one_of(st.none(), st.lists(st.integers(0, 15), min_size=len(steps), max_size=len(steps))))
    return build(msgs, limit, reserved=reserved, fixed=fixed, placeholder=draw(st.integers(0, 8)))


def optional_int(lo, hi):
    return st.one_of(st.none(), st.integers(lo, hi))


PARAMS = {
    "reject": st.just({}),
    "left_truncation": st.fixed_dictionaries({"preserve_system": st.booleans()}),
    "sliding_window": st.fixed_dictionaries({
        "max_messages": optional_int(1, 10), "max_tokens": optional_int(1, 800),
        "preserve_system": st.booleans()}),
    "middle_out": st.fixed_dictionaries({"max_messages": optional_int(1, 15), "preserve_system": st.booleans()}),
    "tool_result_clearing": st.fixed_dictionaries({
        "trigger": st.one_of(st.integers(0, 1500),
                             st.builds(lambda v: {"type": "tool_uses", "value": v}, st.integers(0, 6))),
        "keep": st.integers(0, 4),
        "clear_at_least": optional_int(0, 300),
        "exclude_tools": st.one_of(st.none(), st.lists(st.sampled_from(["read", "bash"]), unique=True)),
        "clear_tool_inputs": st.one_of(st.booleans(), st.just(["read"]))}),
    "auto_compaction": st.fixed_dictionaries({
        "preset": st.sampled_from(COMPACTION_PRESETS),
        "threshold": st.one_of(st.none(), st.integers(0, 1500), st.floats(0.05, 1.0)),
        "summary_tokens": st.one_of(st.integers(0, 300), st.just("recorded")),
        "reserved_output_tokens": optional_int(0, 300),
        "buffer_tokens": st.integers(0, 300),
        "bridge_max_tokens": st.integers(0, 300),
        "keep_recent_tokens": optional_int(0, 500),
        "preserve_system": st.booleans()}),
    "local_global_attention": st.fixed_dictionaries({
        "preset": st.sampled_from([None, "mistral-7b", "gemma-2", "gemma-3"]),
        "local_window": st.integers(1, 400),
        "pattern": st.sampled_from(["1:1", "5:1", "1:0"]),
        "overflow": st.sampled_from(["reject", "left_truncation"]),
        "preserve_system": st.booleans()}),
    "recorded": st.fixed_dictionaries({"preserve_system": st.booleans()}),
    # pins are message seqs, bound from the session's text in a real replay (replay.pins)
    "constraint_selection": st.fixed_dictionaries({
        "pinned": st.one_of(st.none(), st.lists(st.integers(0, 30), unique=True)),
        "pin_goal": st.booleans(), "preserve_system": st.booleans()}),
    "goal_anchoring": st.fixed_dictionaries({
        "under": st.sampled_from(["left_truncation", "sliding_window", "middle_out", "tool_result_clearing"]),
        "pinned": st.one_of(st.none(), st.lists(st.integers(0, 30), unique=True)),
        "max_restated_tokens": st.integers(0, 300), "preserve_system": st.booleans()}),
    "rolling_summary": st.fixed_dictionaries({
        "trigger": st.one_of(st.floats(0.05, 1.0), st.integers(1, 1500)),
        "summary_tokens": st.integers(0, 300), "keep_recent_tokens": optional_int(0, 500),
        "preserve_system": st.booleans()}),
}


def test_every_policy_has_random_params():
    assert set(PARAMS) == set(policies())


def cost(inp, i, s):
    t = int(inp.tokens[i])
    if s in (KEPT, OUTSIDE_LOCAL):
        return t
    if s == CLEARED:
        return t if inp.kinds[i] == "cleared_tool_result" else min(t, inp.placeholder_tokens)
    return 0


def check_step(name, p, inp, r, states, j):
    """Invariants of step j (0-based) given the states right after it."""
    seq = int(inp.steps[j])
    budget = inp.budget
    fixed = int(inp.fixed[j]) if inp.fixed is not None else 0
    preserve = p.get("preserve_system", True)
    in_win = np.isin(states, IN_WINDOW)

    # states: history has one, the future none; counts match
    assert (states[:seq] != NOT_YET).all() and (states[seq:] == NOT_YET).all()
    for s, label in STATE_NAMES.items():
        if s != NOT_YET:
            assert r.counts[label] == int((states == s).sum()), label
    # token figures
    assert r.history_tokens == int(inp.tokens[:seq].sum()) + fixed
    msg_tokens = sum(cost(inp, i, int(states[i])) for i in range(seq))
    if name in ("auto_compaction", "rolling_summary", "goal_anchoring"):  # + synthetic text (summary, anchor)
        assert r.window_tokens >= msg_tokens + fixed
    else:
        assert r.window_tokens == msg_tokens + fixed
    # the budget holds unless an overflow is reported, and the overflow is exact
    assert r.overflow == max(0, r.window_tokens - budget)
    # a tool call and its results are in or out together (CLEARED counts as in)
    for g in set(inp.group[:seq].tolist()):
        members = [i for i in range(seq) if inp.group[i] == g]
        assert len({bool(in_win[i]) for i in members}) == 1, (g, names(states[members]))
    # preserved system messages never leave
    if preserve:
        for i in range(seq):
            if inp.is_system(i):
                assert in_win[i], i
    # overflow only when even what the policy may not remove exceeds the budget
    last = int(inp.group[seq - 1]) if seq else -1
    if name in ("reject", "recorded"):
        assert not (states == EVICTED).any()
    if name == "reject":
        assert (states[:seq] == KEPT).all() and r.window_tokens == r.history_tokens
    truncating = name in ("left_truncation", "sliding_window", "middle_out") or (
        name == "local_global_attention" and p["overflow"] == "left_truncation")
    if truncating and r.overflow:
        for i in range(seq):
            # a marker is never lost (it costs nothing, so it cannot be why the window overflows)
            if in_win[i] and inp.kinds[i] not in MARKER_KINDS:
                assert (preserve and inp.is_system(i)) or inp.group[i] == last, (i, names(states[:seq]))
    if name == "auto_compaction" and r.overflow:
        protected = protected_messages(p["preset"], inp)
        for i in range(seq):
            # a marker (compaction boundary, history edit) is no text the model reads and
            # costs nothing: a truncating preset leaves it, and it cannot be why the window overflows
            if in_win[i] and inp.kinds[i] not in MARKER_KINDS:
                assert (preserve and inp.is_system(i)) or i in protected, i
    if name == "sliding_window":
        conv = [i for i in range(seq) if in_win[i] and not (preserve and inp.is_system(i))
                and inp.kinds[i] not in MARKER_KINDS]  # a marker is no message the window holds
        if not all(inp.group[i] == last for i in conv):
            if p["max_messages"] is not None:
                assert len(conv) <= p["max_messages"]
            if p["max_tokens"] is not None:
                assert sum(int(inp.tokens[i]) for i in conv) <= p["max_tokens"]
    if name == "tool_result_clearing":
        assert not np.isin(states, (EVICTED, SUMMARIZED, OUTSIDE_LOCAL)).any()
        for i in np.flatnonzero(states == CLEARED):
            assert inp.roles[i] == "tool" or (p["clear_tool_inputs"] and inp.roles[i] == "assistant")
        trig = p["trigger"]
        tools = [i for i in range(seq) if inp.roles[i] == "tool"]
        fired = (r.history_tokens > trig) if isinstance(trig, int) else len(tools) > trig["value"]
        if fired and not p["clear_at_least"]:
            excluded = set(p["exclude_tools"] or ())
            for i in tools[:max(0, len(tools) - p["keep"])]:
                if inp.tool_names[i] not in excluded:
                    assert states[i] == CLEARED, i
    if name == "local_global_attention":
        assert not (states == SUMMARIZED).any()
        w = p["local_window"]
        for i in range(seq):
            if in_win[i]:
                after = sum(int(inp.tokens[k]) for k in range(i + 1, seq) if in_win[k])
                assert (states[i] == OUTSIDE_LOCAL) == (after >= w), i
    if name == "recorded":
        for i in range(seq):
            if inp.kinds[i] == "cleared_tool_result":
                assert states[i] in (CLEARED, SUMMARIZED), i
        bounds = [i for i in range(seq) if inp.kinds[i] == "compaction_boundary"]
        if bounds:
            b = bounds[-1]
            for i in range(b):
                straddles = any(inp.group[k] == inp.group[i] for k in range(b, inp.n))
                if inp.kinds[i] in MARKER_KINDS:  # a marker is never lost: it stays where it is
                    assert states[i] == KEPT, i
                elif not (preserve and inp.is_system(i)) and not straddles:
                    assert states[i] == SUMMARIZED, i


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_policy_invariants(name, data):
    inp = data.draw(sessions(), label="session")
    p = data.draw(PARAMS[name], label="params")
    pol = get_policy(name)
    full, final = pol.run(inp, p)
    again, final2 = pol.run(inp, p)  # deterministic
    assert [r.to_dict() for r in full] == [r.to_dict() for r in again]
    assert (final == final2).all()
    assert len(full) == len(inp.steps)
    pp = pol.params(p)
    for k in range(1, len(full) + 1):
        part, states = pol.run(inp, p, upto=k)
        assert [r.to_dict() for r in part] == [r.to_dict() for r in full[:k]]
        check_step(name, pp, inp, part[-1], states, k - 1)
