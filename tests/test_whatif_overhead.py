"""A what-if under another tokenizer family carries the part of each call the log does not hold (a
harness's system prompt and tools), labelled estimated with what it rests on, in the table, the
summary, --json, the report and the view (issue 30, item 8).

Fixtures: tests/fixtures/claude_code/session.jsonl (a Claude Code session with recorded usage:
its own calibration puts a part outside the log); tests/fixtures/compaction/claude_code.jsonl
(short texts under 150k-token recorded prompts: no plausible own calibration, nothing carried).
"""

from __future__ import annotations

import json

import pytest

from context_forensics.analysis.replay import replay_session
from context_forensics.store.db import Store
from helpers import FIXTURES, replay_json, run

SESSION = FIXTURES / "claude_code" / "session.jsonl"
NO_OWN = FIXTURES / "compaction" / "claude_code.jsonl"




def test_a_what_if_carries_the_own_replays_part_outside_the_log_converted_and_labelled(tmp_path):
    db = tmp_path / "s.db"
    own = replay_json(SESSION, db)
    what = replay_json(SESSION, db, "--model", "gpt-4o")
    over = what["overhead"]
    assert over["kind"] == "estimated" and over["source_step"] == 1
    assert over["source_tokens"] == own["steps"][0]["parts"]["not_in_log"] > 0
    assert (0.5 < over["tokenizer_ratio"] < 1.0 and "calibration" in over["rests_on"]
            and "o200k_base" in over["rests_on"])
    for st in what["steps"]:  # in every window, as its own part, never evicted, nothing scaled
        assert st["parts"]["not_in_log"] == over["tokens"] and st["parts"]["calibration_scale"] == 0
        assert sum(st["parts"].values()) == st["window_tokens"]
    assert what["summary"]["overhead_tokens"] == over["tokens"]
    assert any("carried as an estimate" in f and over["rests_on"] in f for f in what["flags"])
    at = json.loads(run("replay", SESSION, "--db", db, "--model", "gpt-4o", "--at", 1, "--json").stdout)
    (row,) = [p for p in at["window_parts"] if p["kind"] == "not_in_log"]
    assert row["figure"] == "estimated" and row["tokens"] == over["tokens"] and over["rests_on"] in row["label"]


def test_the_table_the_report_and_the_view_say_it(tmp_path):
    db = tmp_path / "s.db"
    over = replay_json(SESSION, db, "--model", "gpt-4o")["overhead"]
    out = " ".join(run("replay", SESSION, "--db", db, "--model", "gpt-4o", width=80).stdout.split())
    assert f"+ ≈{over['tokens']:,} tokens per call not in the log (harness system prompt, tools), estimated:" in out
    assert f"every window counts ≈{over['tokens']:,} estimated tokens the log does not hold" in out
    html = tmp_path / "r.html"
    assert run("report", SESSION, "--db", db, "--model", "gpt-4o", "--html", html).exit_code == 0
    page = html.read_text()
    assert f"carries ≈{over['tokens']:,} tokens not in the log" in page and "estimated" in page
    data = json.loads(run("view", SESSION, "--db", db, "--model", "gpt-4o", "--json").stdout)
    what = data["runs"][0]["models"][1]
    assert what["overhead"] == over and any("carried as an estimate" in f for f in what["flags"])
    assert data["runs"][0]["models"][0]["overhead"] is None  # the recorded replay is calibrated: nothing carried


def test_nothing_is_carried_where_the_own_calibration_puts_nothing_outside_the_log_and_it_says_why(tmp_path):
    what = replay_json(NO_OWN, tmp_path / "s.db", "--model", "gpt-4o")
    assert what["overhead"] is None and what["summary"]["overhead_tokens"] is None
    (flag,) = [f for f in what["flags"] if "nothing calibrates this replay" in f]
    assert "is not counted" in flag and "the session's own recorded calls calibrate nothing" in flag
    assert all(st["parts"]["not_in_log"] == 0 for st in what["steps"])


@pytest.mark.integration
def test_every_corpus_what_if_carries_the_overhead_and_it_brings_the_first_window_nearer(corpus_ingest):
    """Over every corpus session whose recorded usage gpt-4o cannot read: the overhead is carried
    exactly when the own replay puts a part outside the log, and the first recorded call's window
    moves toward its recorded prompt in gpt-4o's tokens (recorded x the tokenizers' ratio)."""
    db, _ = corpus_ingest
    carried = 0
    with Store.open(db) as store:
        for ses in store.sessions():
            if not ses["usage_count"] or not ses["step_count"]:
                continue
            what = replay_session(store, ses["id"], "gpt-4o", use_cache=False)
            if what.token_kind == "calibrated" or not any("nothing calibrates" in f for f in what.flags):
                continue  # gpt-4o reads this log's recorded usage: nothing to carry
            own = replay_session(store, ses["id"], policy="recorded", use_cache=False)
            over = what.overhead
            if over is None:  # the own replay puts nothing outside the log at its first call
                assert own.token_kind != "calibrated" or own.steps[0]["parts"]["not_in_log"] <= 0, ses["source"]
                continue
            assert over["source_tokens"] == own.steps[over["source_step"] - 1]["parts"]["not_in_log"] > 0
            carried += 1
            assert all(st["parts"]["not_in_log"] == over["tokens"] for st in what.steps), ses["source"]
            k = next(i for i, st in enumerate(what.steps) if st["recorded_prompt_tokens"])
            target = what.steps[k]["recorded_prompt_tokens"] * over["tokenizer_ratio"]
            w = what.steps[k]["window_tokens"]
            assert abs(w - target) < abs(w - over["tokens"] - target), (ses["source"], w, over["tokens"], target)
    assert carried >= 10
