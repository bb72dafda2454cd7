"""`ctxf replay` end to end: JSON contract, what-if models, --at, plots, cache, fidelity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from helpers import corpus

SAMPLES = Path(__file__).parent.parent / "sample_logs"
OVERFLOW = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"


@pytest.fixture()
def db(tmp_path):
    return str(tmp_path / "store.db")


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def replay_json(db, ref, *args):
    r = run("replay", ref, "--db", db, "--json", *args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_json_contract_and_invariants_under_a_small_window(db):
    data = replay_json(db, OVERFLOW, "--model", "gemma-7b")
    assert data["version"] == 1 and data["session"]["format"] == "openai_chat"
    (rep,) = data["replays"]
    assert (rep["model"], rep["policy"], rep["limit"],
            rep["reserved_output"]) == ("gemma-7b", "left_truncation", 8192, 1024)
    steps = rep["steps"]
    shown = run("show", OVERFLOW, "--db", db, "--json")
    messages = json.loads(shown.stdout)["messages"]
    assistant_seqs = [m["seq"] for m in messages if m["role"] == "assistant"]
    assert [s["step"] for s in steps] == list(range(1, len(assistant_seqs) + 1))
    assert [s["message_seq"] for s in steps] == assistant_seqs
    lost_so_far: set[int] = set()
    for s in steps:
        for key in ("window_tokens", "window_tokens_kind", "limit", "reserved_output", "utilization", "counts",
                    "evicted", "cleared", "summarized", "outside_local", "newly_lost", "events"):
            assert key in s
        assert s["window_tokens"] <= rep["budget"]  # left truncation keeps the window in budget
        assert not set(s["evicted"]) & lost_so_far  # a seq is evicted once, at one step
        assert set(s["newly_lost"]) == set(s["evicted"])  # left truncation only evicts
        assert all(seq < s["message_seq"] for seq in s["evicted"])
        lost_so_far |= set(s["evicted"])
        assert s["counts"]["evicted"] == len(lost_so_far)
    assert 0 not in lost_so_far  # the system prompt is preserved
    summary = rep["summary"]
    assert summary["first_loss_step"] == next(s["step"] for s in steps if s["newly_lost"])
    assert summary["peak_utilization"] == max(s["utilization"] for s in steps)


def test_the_user_constraint_leaves_the_small_window_but_not_a_large_one(db):
    data = replay_json(db, OVERFLOW, "--model", "gemma-7b", "--model", "gpt-4o-mini")
    small, large = data["replays"]
    gone = {seq for s in small["steps"] for seq in s["evicted"]}
    assert 1 in gone  # "Do not touch the tests" is gone by the end
    assert large["summary"]["first_loss_step"] is None
    assert all(s["evicted"] == [] for s in large["steps"])
    assert len(small["steps"]) == len(large["steps"])


def test_at_step_prints_the_window_with_states(db):
    full = replay_json(db, OVERFLOW, "--model", "gemma-7b")["replays"][0]["steps"]
    k = full[-1]["step"]
    r = run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b", "--at", k, "--json")
    assert r.exit_code == 0
    win = json.loads(r.stdout)
    assert win["step"]["window_tokens"] == full[-1]["window_tokens"]
    states = {m["seq"]: m["state"] for m in win["messages"]}
    assert sorted(s for s, st in states.items() if st == "evicted") == sorted(
        seq for s in full for seq in s["evicted"])
    assert sum(m["tokens"] for m in win["messages"] if m["in_window"]) <= win["step"]["window_tokens"]
    human = run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b", "--at", k)
    assert "evicted" in human.stdout and "kept" in human.stdout
    bad = run("replay", OVERFLOW, "--db", db, "--at", 999)
    assert bad.exit_code == 2 and "out of range" in bad.stderr


def test_policy_override_and_params(db):
    data = replay_json(db, OVERFLOW, "--model", "gemma-7b", "--policy", "sliding_window", "--param", "max_messages=6")
    rep = data["replays"][0]
    assert rep["policy"] == "sliding_window" and rep["params"]["max_messages"] == 6
    bad = run("replay", OVERFLOW, "--db", db, "--policy", "nope")
    assert bad.exit_code == 2 and "known policies" in bad.stderr
    bad = run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b", "--policy", "sliding_window", "--param", "bogus=1")
    assert bad.exit_code == 2 and "bogus" in bad.stderr
    bad = run("replay", OVERFLOW, "--db", db, "--param", "novalue")
    assert bad.exit_code == 2


def test_reject_marks_would_fail(db):
    rep = replay_json(db, OVERFLOW, "--model", "gemma-7b", "--policy", "reject")["replays"][0]
    failing = [s for s in rep["steps"] if s["overflow"] > 0]
    assert failing and rep["summary"]["would_fail_steps"] == [s["step"] for s in failing]
    for s in failing:
        assert s["overflow"] == s["window_tokens"] - rep["budget"]
        assert any(e["type"] == "overflow" and e["would_fail"] for e in s["events"])


def test_repeated_replay_is_a_stored_lookup(db, monkeypatch):
    first = replay_json(db, OVERFLOW, "--model", "gemma-7b")
    import context_forensics.tokens.fidelity as tokens

    def boom(*a, **k):
        raise AssertionError("replay recomputed instead of reading the stored snapshot")

    monkeypatch.setattr(tokens, "count_session", boom)
    second = replay_json(db, OVERFLOW, "--model", "gemma-7b")
    assert second["replays"] == first["replays"]


def test_plot_png_and_svg(db, tmp_path):
    png, svg = tmp_path / "u.png", tmp_path / "u.svg"
    assert run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b", "--model", "gpt-4o", "--plot", png).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert run("replay", OVERFLOW, "--db", db, "--plot", svg).exit_code == 0
    assert b"<svg" in svg.read_bytes()[:500]
    bad = run("replay", OVERFLOW, "--db", db, "--plot", tmp_path / "u.txt")
    assert bad.exit_code == 2


def test_human_view_has_curve_and_summary(db):
    r = run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b")
    assert r.exit_code == 0
    assert "summary" in r.stdout and "first loss" in r.stdout and "█" in r.stdout


def test_models_command_lists_dated_entries():
    r = run("models", "--json")
    rows = {m["name"]: m for m in json.loads(r.stdout)["models"]}
    assert rows["gpt-4o"]["tokenizer"] == "o200k_base" and rows["gpt-4"]["tokenizer"] == "cl100k_base"
    assert rows["gemma-7b"]["context_limit"] == 8192
    assert all(m["as_of"] for m in rows.values() if m["origin"] == "built-in")


@pytest.mark.integration
def test_recorded_compaction_in_a_real_claude_code_session(db):
    path = corpus("claude-code-jsonl/spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    rep = replay_json(db, path)["replays"][0]
    assert rep["policy"] == "recorded"
    s = rep["summary"]
    # One compact_boundary in the file (verified by reading it): one recorded compaction,
    # after which everything before the boundary is summarized.
    assert s["compactions"] == 1
    step = next(st for st in rep["steps"] if any(e["type"] == "compaction" for e in st["events"]))
    assert all(e["recorded"] for e in step["events"] if e["type"] == "compaction")
    assert step["summarized"] and step["counts"]["evicted"] == 0
    assert rep["token_kind"] == "calibrated"
    assert rep["fidelity"]["median_pct_error"] <= 3.0


def test_a_recorded_compaction_shows_the_log_s_own_figure_and_labels_ctxf_s_as_estimated(db):
    """The replay said "the log records a compaction at message 160: 183,371 → 40,547 tokens" of
    claude-code-jsonl/spotter/8463c716 (the report and the view print it), whose boundary records
    preTokens 167,731: both figures were ctxf's calibrated window, not the log's. Pi's compactions
    (tokensBefore 175,004 and 185,014 in pi/pi-mono/before-compaction.jsonl) read the same way.
    The event now carries the log's figure (``recorded_tokens_before``) and the words tell the two apart."""
    from context_forensics.render.events import event_detail

    fixture = Path(__file__).parent / "fixtures" / "claude_code" / "session.jsonl"  # compactMetadata.preTokens 1500
    rep = replay_json(db, fixture)["replays"][0]
    (e,) = [e for st in rep["steps"] for e in st["events"] if e["type"] == "compaction"]
    assert e["recorded"] and e["recorded_tokens_before"] == 1500
    said = event_detail(e)
    assert (said.startswith("the log records a compaction at message ")
            and "(1,500 tokens before, as the log records)" in said)
    assert f"the replay's window: {e['tokens_before']:,} → {e['tokens_after']:,} tokens (estimated)" in said
    # Pi: a history edit whose figure the log records
    pi = {"type": "history_edit", "policy": "recorded", "recorded": True, "at": 354, "edit": "compaction",
          "action": "summarized", "source": "pi:compaction.firstKeptEntryIndex", "removed": 288,
          "tokens_before": 178445,
          "tokens_after": 26862, "parted_pairs": 0, "recorded_tokens_before": 175004}
    said = event_detail(pi)
    assert "(175,004 tokens before, as the log records)" in said
    assert "the replay's window: 178,445 → 26,862 tokens (estimated)" in said
    # no figure recorded: the replay's alone, still labelled
    said = event_detail({k: v for k, v in pi.items() if k != "recorded_tokens_before"})
    assert "as the log records" not in said and "the replay's window: 178,445 → 26,862 tokens (estimated)" in said


@pytest.mark.integration
def test_openai_fidelity_is_exact_on_inspect_calls(db):
    path = corpus("inspect-ai-log/json/2025-05-12T20-27-36-04-00_browser.json")
    rep = replay_json(db, path)["replays"][0]
    steps = [s for s in rep["steps"] if s["recorded_prompt_tokens"] is not None]
    assert len(steps) == 5 and rep["token_kind"] == "exact"
    assert all(abs(s["prompt_error"]) <= 2 for s in steps)


def test_the_collector_is_paused_during_a_replay_and_left_as_it_was():
    import gc

    from context_forensics.analysis.replay import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested (or another thread's replay)
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # the caller had it off
    finally:
        gc.enable()
