"""A window adds up: `replay --at` lists every part of a step's window as a row, and the rows
sum to the window total; per-message figures are the tokenizer's, what calibration adds is on
rows of its own; `show` links seqs to steps; several models give several windows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.config.models import resolve_model
from context_forensics.records import Message
from context_forensics.tokens import TokenCounter
from helpers import CORPUS, FIXTURES, corpus

SAMPLES = Path(__file__).parent.parent / "sample_logs"
OVERFLOW = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"
ONE_CALL = FIXTURES / "cassette" / "anthropic_one_call.yaml"
SPOTTER = "claude-code-jsonl/spotter/"
COMPACT_CALL = SPOTTER + "8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-acompact-f46190.jsonl"
CUT_NUMBER = re.compile(r"\d[\d,.%]*…")


@pytest.fixture()
def db(tmp_path):
    return str(tmp_path / "store.db")


def run(*args, width=120):
    env = {"COLUMNS": str(width), "NO_COLOR": "1"}
    return CliRunner(env=env).invoke(app, [str(a) for a in args], catch_exceptions=False)


def at_json(db, ref, step, *args):
    r = run("replay", ref, "--db", db, "--at", step, "--json", *args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def check_adds_up(win):
    """The window's rows add up to its total, and the message rows to the messages part."""
    parts = {p["kind"]: p["tokens"] for p in win["window_parts"]}
    assert sum(parts.values()) == win["step"]["window_tokens"]
    assert win["step"]["parts"] == {**dict.fromkeys(win["step"]["parts"], 0), **parts}
    kept = [m for m in win["messages"] if m["state"] in ("kept", "outside_local")]
    assert sum(m["window_tokens"] for m in kept) == parts["messages"]
    cleared = [m for m in win["messages"] if m["state"] == "cleared"]
    assert sum(m["window_tokens"] for m in cleared) == parts.get("cleared_placeholders", 0)
    assert all(m["window_tokens"] == 0 for m in win["messages"] if not m["in_window"])
    return parts


# ------------------------------------------------------------------ fixtures


def test_every_step_of_the_sample_adds_up_and_lists_its_tool_definitions(db):
    tools = json.loads(OVERFLOW.read_text())["tools"]
    steps = json.loads(run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b",
                           "--json").stdout)["replays"][0]["steps"]
    for s in steps:
        assert sum(s["parts"].values()) == s["window_tokens"]
        win = at_json(db, OVERFLOW, s["step"], "--model", "gemma-7b")
        parts = check_adds_up(win)
        assert win["step"]["window_tokens"] == s["window_tokens"]
        (row,) = [p for p in win["window_parts"] if p["kind"] == "tool_definitions"]
        assert row["label"] == f"tool definitions ({len(tools)} tools, in the log)" and parts["tool_definitions"] > 0
        assert "calibration_scale" not in parts and "not_in_log" not in parts  # nothing is calibrated here


def test_lost_rows_come_after_the_window_and_say_when_they_left(db):
    steps = json.loads(run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b",
                           "--json").stdout)["replays"][0]["steps"]
    left_at = {seq: s["step"] for s in steps for seq in s["evicted"]}
    k = steps[-1]["step"]
    win = at_json(db, OVERFLOW, k, "--model", "gemma-7b")
    lost = [m for m in win["messages"] if m["state"] == "evicted"]
    assert lost and {m["seq"]: m["left_step"] for m in lost} == left_at
    assert all(m["left_by"] == {"type": "eviction", "policy": "left_truncation", "recorded": False} for m in lost)
    out = run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b", "--at", k).stdout
    lines = out.splitlines()
    total = next(i for i, line in enumerate(lines) if re.match(r"^\s+window\s+[\d,]+\s", line))
    assert f"{win['step']['window_tokens']:,}" in lines[total]
    first_lost = min(i for i, line in enumerate(lines) if re.match(r"^\s+\d+\s+\S+\s+\S+\s+evicted\s", line))
    last_kept = max(i for i, line in enumerate(lines) if re.match(r"^\s+\d+\s+\S+\s+\S+\s+kept\s", line))
    assert last_kept < total < first_lost
    assert f"[left @{left_at[lost[0]['seq']]}: eviction; {lost[0]['tokens']:,} tok]" in out


@pytest.mark.parametrize("width", (60, 80, 100))
def test_the_window_fits_the_terminal_and_its_total_is_the_sum_of_its_rows(db, width):
    win = at_json(db, OVERFLOW, 8, "--model", "gemma-7b")
    out = run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b", "--at", 8, width=width).stdout
    assert all(len(line) <= width for line in out.splitlines()), out
    assert not CUT_NUMBER.search(out), out
    figures = []  # the tokens column, read down the window section
    for line in out.splitlines():
        m = re.match(r"^\s+(?:\d+\s+(?:→?\d+)?\s+\S+\s+(?:kept|outside_local)|(?:tools|framing))\s+([\d,]+)\s", line)
        if m:
            figures.append(int(m.group(1).replace(",", "")))
        if re.match(r"^\s+window\s", line):
            assert int(line.split()[1].replace(",", "")) == sum(figures) == win["step"]["window_tokens"]
            break
    else:
        raise AssertionError("no window total row:\n" + out)


def test_full_prints_whole_texts(db):
    win = at_json(db, OVERFLOW, 8, "--model", "gemma-7b")
    long = max((m for m in win["messages"] if m["state"] == "kept"), key=lambda m: len(m["text"] or ""))
    text = " ".join(long["text"].split())
    others = [" ".join((m["text"] or "").split()) for m in win["messages"] if m is not long]
    # the last 40 characters of it that no other message holds (the sample's files end alike)
    tail = next(t for t in (text[i - 40:i] for i in range(len(text), 200, -1)) if not any(t in o for o in others))
    flat = lambda out: " ".join(out.split())  # noqa: E731 - folded lines joined back
    preview = run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b", "--at", 8).stdout
    full = run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b", "--at", 8, "--full").stdout
    assert tail not in flat(preview) and "--full prints whole texts" in preview
    assert tail.replace(" ", "") in full.replace(" ", "").replace("\n", "")


def test_at_with_two_models_shows_each_models_window(db):
    both = at_json(db, OVERFLOW, 8, "--model", "gemma-7b", "--model", "gpt-4o-mini")
    assert [w["model"] for w in both["windows"]] == ["gemma-7b", "gpt-4o-mini"]
    for w in both["windows"]:
        check_adds_up(w)
        assert w == at_json(db, OVERFLOW, 8, "--model", w["model"])
    small, large = both["windows"]
    assert any(m["state"] == "evicted" for m in small["messages"])
    assert all(m["state"] == "kept" for m in large["messages"])
    assert both["model"] == "gemma-7b" and both["messages"] == small["messages"]  # the one-model keys stay
    out = run("replay", OVERFLOW, "--db", db, "--model", "gemma-7b", "--model", "gpt-4o-mini", "--at", 8).stdout
    assert "model gemma-7b" in out and "model gpt-4o-mini" in out
    assert f"window {small['step']['window_tokens']:,} / 8,192" in out
    assert f"window {large['step']['window_tokens']:,} / 128,000" in out


def test_show_prints_the_step_of_each_seq(db):
    shown = json.loads(run("show", OVERFLOW, "--db", db, "--json").stdout)["messages"]
    steps = json.loads(run("replay", OVERFLOW, "--db", db, "--json").stdout)["replays"][0]["steps"]
    by_seq = {m["seq"]: m for m in shown}
    for s in steps:
        assert by_seq[s["message_seq"]]["step"] == s["step"]
    seqs = [s["message_seq"] for s in steps]
    for m in shown:  # a message joins the window of the first call after it
        later = [k for k, q in enumerate(seqs, start=1) if q > m["seq"]]
        assert m["joins_step"] == (later[0] if later else None)
        if m["seq"] not in seqs:
            assert m["step"] is None
    out = run("show", OVERFLOW, "--db", db, width=80).stdout
    rows = {int(line.split()[0]): line.split()[1] for line in out.splitlines()
            if re.match(r"^\s+\d+\s+(→?\d+)\s", line)}
    assert rows[seqs[2]] == "3" and rows[1] == "→1"
    assert all(len(line) <= 80 for line in out.splitlines())


def test_one_call_calibration_adds_an_offset_row_and_scales_no_message(db):
    win = at_json(db, ONE_CALL, 1)
    (msg,) = win["messages"]
    spec = resolve_model(win["model"])
    assert msg["tokens"] == TokenCounter(spec).count_messages([Message("user", "Invent a good dog")]).total
    parts = check_adds_up(win)
    assert win["step"]["window_tokens"] == win["step"]["recorded_prompt_tokens"] == 160
    assert parts["not_in_log"] == 160 - msg["tokens"] - parts["framing"] and "calibration_scale" not in parts
    row = next(p for p in win["window_parts"] if p["kind"] == "not_in_log")
    assert "1 call: the difference at that call; not a fit" in row["label"] and row["figure"] == "calibrated"
    rep = json.loads(run("replay", ONE_CALL, "--db", db, "--json").stdout)["replays"][0]
    fid = rep["fidelity"]
    assert (fid["measure"], fid["calls"], fid["fitted_calls"], fid["median_abs_error"]) == ("fitted", 0, 1, None)
    (step,) = rep["steps"]
    assert (step["prompt_check"], step["prompt_error"]) == ("fitted", None)
    summary = run("replay", ONE_CALL, "--db", db, width=160).stdout.split("summary")[-1]
    assert "fitted on its 1 call: no held-out error" in summary and " tok (" not in summary


# ------------------------------------------------------------------ the corpus


@pytest.mark.integration
@pytest.mark.parametrize("name",
                         ["8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"])
def test_a_real_claude_code_window_adds_up(db, name):
    path = corpus(SPOTTER + name)
    rep = json.loads(run("replay", path, "--db", db, "--json").stdout)["replays"][0]
    steps = rep["steps"]
    compaction = rep["summary"]["compaction_steps"][0]
    for k in sorted({1, compaction - 1, compaction, (compaction + len(steps)) // 2, len(steps)}):
        win = at_json(db, path, k)
        parts = check_adds_up(win)
        assert win["step"]["window_tokens"] == steps[k - 1]["window_tokens"]
        # Claude Code's system prompt and tools are not in its log: calibration says how much
        hidden = next(p for p in win["window_parts"] if p["kind"] == "not_in_log")
        assert parts["not_in_log"] > 10_000 and f"≈{parts['not_in_log']:,} by calibration" in hidden["label"]
        assert re.search(r"fitted on \d+ calls, held-out error \d+\.\d%", hidden["label"])
        if "calibration_scale" in parts:
            scale = next(p for p in win["window_parts"] if p["kind"] == "calibration_scale")
            n = int(re.search(r"fitted on (\d+) calls", scale["label"]).group(1))
            assert n >= 3
    out = run("replay", path, "--db", db, "--at", len(steps), width=80).stdout
    assert "not in the log (harness system prompt / tools)" in " ".join(out.split())
    assert all(len(line) <= 80 for line in out.splitlines())
    figures = set(re.findall(r"\s(-?[\d,]+)\s",
                             out))  # every figure of the window whole, a negative one (a scale below 1) too
    assert all(f"{p['tokens']:,}" in figures for p in win["window_parts"] if p["kind"] != "messages")
    assert all(f"{m['window_tokens']:,}" in figures for m in win["messages"] if m["state"] == "kept")


@pytest.mark.integration
def test_the_scale_a_row_names_is_the_scale_it_applies(db):
    """A calibration row "calibration scale ×r" adds (r - 1) times the tokenizer's count of the
    window. A fit with a negative offset (the mini-swe-agent gemini runs: -318.8 + ×1.0185 on
    django-11276) is applied as the ratio it implies at each call: at step 1 of that run the row
    took 288 tokens off a 1,667-token count (×0.83) while its label said ×1.02."""
    root = corpus("swebench-pairs")
    checked = 0
    for path in sorted(root.glob("*/*/*.traj.json")):
        steps = json.loads(run("replay", path, "--db", db, "--json").stdout)["replays"][0]["steps"]
        for k in (1, len(steps) // 2, len(steps)):
            win = at_json(db, path, k)
            parts = check_adds_up(win)
            row = next((p for p in win["window_parts"] if p["kind"] == "calibration_scale"), None)
            if row is None:
                continue
            r = float(re.search(r"×([\d.]+)", row["label"]).group(1))
            counted = win["step"]["window_tokens"] - parts["calibration_scale"] - parts.get("not_in_log", 0)
            # the label rounds r to 3 digits (×1.01 is 1.005-1.015): off by at most 0.005 of the count
            assert abs((r - 1) * counted - row["tokens"]) <= 0.005 * counted + 2, (path.parent.name, k, row)
            checked += 1
    assert checked >= 20


@pytest.mark.integration
def test_openhands_tool_definitions_are_a_row(db):
    folder = corpus("openhands-llm-completions/django__django-10973/llm_completions")
    first = json.loads(sorted(folder.glob("*.json"))[0].read_text())
    n_tools = len(first["kwargs"]["tools"])
    win = at_json(db, folder, 5)
    parts = check_adds_up(win)
    (row,) = [p for p in win["window_parts"] if p["kind"] == "tool_definitions"]
    assert row["label"] == f"tool definitions ({n_tools} tools, in the log)" and parts["tool_definitions"] > 500
    out = run("replay", folder, "--db", db, "--at", 5, width=80).stdout
    assert "tool definitions" in out and f"{parts['tool_definitions']:,}" in out


@pytest.mark.integration
def test_the_compaction_call_is_not_scaled_55_times(db):
    path = corpus(COMPACT_CALL)
    win = at_json(db, path, 1)
    prompt = next(m for m in win["messages"]
                  if (m["text"] or "").startswith("Your task is to create a detailed summary"))
    spec = resolve_model(win["model"])
    counted = TokenCounter(spec).count_messages([Message("user", prompt["text"])]).total
    assert prompt["tokens"] == counted and counted < 5_000  # was 121,291: one call's 55x ratio
    parts = check_adds_up(win)
    assert win["step"]["window_tokens"] == win["step"]["recorded_prompt_tokens"] == 169_910
    assert parts["not_in_log"] == 169_910 - parts["messages"] - parts["framing"]
    rep = json.loads(run("replay", path, "--db", db, "--json").stdout)["replays"][0]
    assert rep["fidelity"]["measure"] == "fitted" and rep["fidelity"]["median_pct_error"] is None
    summary = run("replay", path, "--db", db, width=160).stdout.split("summary")[-1]
    assert "fitted on its 1 call" in summary and " tok (" not in summary and "98" not in summary


@pytest.mark.integration
def test_a_thinking_budget_does_not_make_the_same_prompt_cost_more(db):
    """The same user text in two cassettes of one model: one with extended thinking, whose
    recorded usage is larger. The message's own figure is the tokenizer's in both."""
    a = corpus("llm-api-vcr-cassette/anthropic-messages/test_prompt.yaml")
    b = corpus("llm-api-vcr-cassette/anthropic-messages/test_thinking_prompt.yaml")
    wa, wb = at_json(db, a, 1), at_json(db, b, 1)
    (ma,), (mb,) = wa["messages"], wb["messages"]
    assert ma["text"] == mb["text"] and wa["model"] == wb["model"]
    assert ma["tokens"] == mb["tokens"]  # was 14 and 37
    for w in (wa, wb):
        check_adds_up(w)
        assert w["step"]["window_tokens"] == w["step"]["recorded_prompt_tokens"]


WHAT_IF = [(None, None), ("gpt-4o", None), ("gemma-7b", None), ("claude-sonnet-4-5", "auto_compaction"),
           ("gpt-4o-mini", "tool_result_clearing")]


@pytest.mark.integration
def test_every_step_of_every_corpus_session_adds_up(tmp_path):
    """sum(parts) == window_tokens at every step, under the recorded policy and what-ifs."""
    from context_forensics.analysis.replay import replay_session
    from context_forensics.store.db import Store
    from context_forensics.store.ingest import ingest_paths

    if not CORPUS.exists():
        pytest.skip("corpus not available")
    with Store.open(tmp_path / "s.db") as store:
        ingest_paths(store, [CORPUS], recursive=True)
        sessions = [s for s in store.sessions() if s["step_count"]]
        assert len(sessions) > 30
        checked = 0
        for ses in sessions:
            for model, policy in WHAT_IF:
                policy = policy or ("recorded" if model is None else None)
                rep = replay_session(store, ses["id"], model, policy=policy, use_cache=False)
                for s in rep.steps:
                    assert sum(s["parts"].values()) == s["window_tokens"], (ses["source"], model, s["step"])
                    neg = {k: v for k, v in s["parts"].items() if v < 0
                           and k not in ("not_in_log", "calibration_scale")}
                    assert not neg, (ses["source"], model, s["step"], neg)
                    checked += 1
                if rep.token_kind != "calibrated":  # nothing but a what-if's carried estimate is outside the log
                    carried = (rep.overhead or {}).get("tokens", 0)
                    assert all(s["parts"]["not_in_log"] == carried and s["parts"]["calibration_scale"] == 0
                               for s in rep.steps)
    assert checked == sum(len(WHAT_IF) * s["step_count"] for s in sessions)


@pytest.mark.integration
def test_a_what_if_carries_the_overhead_the_log_lacks_labelled_estimated(db):
    """Claude Code's recorded prompt sizes are Claude's counts: under gpt-4o nothing calibrates the
    window, and the harness's system prompt and tools are not in the log. The what-if carries them
    as an estimate (the own replay's "not in the log", converted to o200k_base) and says so, with
    what it rests on, in the window's rows, the notes, --json and the table (issue 30 item 8: it
    used to start at a 43-token window beside a recorded 25,897)."""
    path = corpus(SPOTTER + "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    own = at_json(db, path, 1)
    win = at_json(db, path, 1, "--model", "gpt-4o")
    own_parts, parts = check_adds_up(own), check_adds_up(win)
    rep = json.loads(run("replay", path, "--db", db, "--model", "gpt-4o", "--json").stdout)["replays"][0]
    over = rep["overhead"]
    assert over["kind"] == "estimated" and over["source_tokens"] == own_parts["not_in_log"]
    assert parts["not_in_log"] == over["tokens"]
    # the ratio is shown to 4 places
    assert abs(over["tokens"] - own_parts["not_in_log"] * over["tokenizer_ratio"]) <= 2
    assert 0.5 < over["tokenizer_ratio"] < 1.0  # o200k_base counts this session's text in fewer tokens
    (row,) = [p for p in win["window_parts"] if p["kind"] == "not_in_log"]
    assert row["figure"] == "estimated" and "calibration" in row["label"] and "o200k_base" in row["label"]
    assert all(s["parts"]["not_in_log"] == over["tokens"] for s in rep["steps"])
    assert rep["summary"]["overhead_tokens"] == over["tokens"]
    (note,) = win["notes"]
    assert "nothing calibrates this replay" in note and "carried as an estimate" in note and own["notes"] == []
    assert note in rep["flags"]
    out = " ".join(run("replay", path, "--db", db, "--model", "gpt-4o", width=80).stdout.split())
    assert f"+ ≈{over['tokens']:,} tokens per call not in the log" in out and "estimated:" in out
    assert f"every window counts ≈{over['tokens']:,} estimated tokens" in out
