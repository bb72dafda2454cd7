"""The labelled case for the context strategies, and ``ctxf replay --compare-policies`` (issue 15, item 6).

tests/fixtures/policies/constraint_lost.openai.json (make_fixture.py says how it is built): two
constraints stated early (the task, seq 1; CONTRIBUTING.md read by a tool, seq 3), then six long
module reads. Under gemma-7b (budget 7,168) left truncation evicts both statements at step 8;
constraint selection pins them and keeps both to the last step; goal anchoring keeps them only
through its restatement. Run with the real tokenizer and the real embedding model.
"""

from __future__ import annotations

import json

import pytest

import context_forensics as ctxf
from helpers import FIXTURES, cli, corpus

CASE = FIXTURES / "policies" / "constraint_lost.openai.json"
FACTS_FILE = FIXTURES / "policies" / "facts.txt"
FACTS = ["Never modify files under tests/.", "Do not add new dependencies to requirements.txt."]
MODEL = "gemma-7b"


@pytest.fixture()
def db(tmp_path):
    return tmp_path / "s.db"


def facts_json(monkeypatch, db, policy):
    r = cli(monkeypatch, "facts", CASE, "--model", MODEL, "--policy", policy, "--facts-file", FACTS_FILE,
            "--db", db, "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    return {f["fact"]: f for f in json.loads(r.stdout)["facts"]}


def test_left_truncation_loses_the_constraints_constraint_selection_keeps_them(monkeypatch, db, minilm):
    lt = facts_json(monkeypatch, db, "left_truncation")
    cs = facts_json(monkeypatch, db, "constraint_selection")
    for fact in FACTS:
        assert lt[fact]["final_state"] == "gone" and lt[fact]["disappeared_at"] == 8, lt[fact]
        assert lt[fact]["cause"]["type"] == "eviction"
        assert cs[fact]["final_state"] == "present" and cs[fact]["disappeared_at"] is None, cs[fact]
    assert lt[FACTS[0]]["cause"]["seqs"] == [1] and lt[FACTS[1]]["cause"]["seqs"] == [3]
    # the replay says what it pinned, and the pins are where the facts were stated
    r = cli(monkeypatch, "replay", CASE, "--model", MODEL, "--policy", "constraint_selection", "--param",
            "facts=" + json.dumps(FACTS), "--db", db, "--json")
    params = json.loads(r.stdout)["replays"][0]["params"]
    assert params["pinned"] == [1, 3] and params["pinned_facts"] == {FACTS[0]: [1], FACTS[1]: [3]}


def test_goal_anchoring_keeps_them_through_the_restatement(monkeypatch, db, minilm):
    ga = facts_json(monkeypatch, db, "goal_anchoring")
    for fact in FACTS:
        f = ga[fact]
        assert f["final_state"] == "present" and f["disappeared_at"] is None
        last = f["timeline"][-1]
        assert last["reason"] == "restated by goal anchoring", last  # the originals are evicted by then
    r = cli(monkeypatch, "replay", CASE, "--model", MODEL, "--policy", "goal_anchoring", "--param",
            "facts=" + json.dumps(FACTS), "--db", db, "--json")
    rep = json.loads(r.stdout)["replays"][0]
    assert all(st["parts"]["compaction_summary"] > 0 for st in rep["steps"])  # counted at every call
    assert any(e["type"] == "anchoring" for st in rep["steps"] for e in st["events"])
    # the terminal table says so too: the fact is in view only through the simulated copy
    r = cli(monkeypatch, "facts", CASE, "--model", MODEL, "--policy", "goal_anchoring", "--facts-file", FACTS_FILE,
            "--db", db)
    for fact in FACTS:
        anchored = [t["step"] for t in ga[fact]["timeline"] if t["reason"] == "restated by goal anchoring"]
        assert f"in view only as goal anchoring's restatement (simulated text) at {len(anchored)} steps, " \
               f"from step {anchored[0]} to {anchored[-1]}" in " ".join(r.stdout.split()), r.stdout


def test_rolling_summary_folds_them_into_its_summary(monkeypatch, db, minilm):
    rs = facts_json(monkeypatch, db, "rolling_summary")
    for fact in FACTS:
        assert rs[fact]["final_state"] == "summarized"
        assert rs[fact]["cause"]["type"] == "compaction" and rs[fact]["cause"]["event"]["rolling"] is True


def test_compare_policies_shows_which_keep_them(monkeypatch, db, minilm):
    r = cli(monkeypatch, "replay", CASE, "--model", MODEL, "--compare-policies", "--facts-file", FACTS_FILE,
            "--db", db, "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    data = json.loads(r.stdout)
    rows = {p["policy"]: p for p in data["policies"]}
    from context_forensics.analysis.facts.compare import policies_compared

    assert set(rows) == set(policies_compared()) | {"recorded"}
    assert {"constraint_selection", "goal_anchoring", "rolling_summary"} <= set(rows)
    assert rows["constraint_selection"]["kept"] == 2 and rows["left_truncation"]["kept"] == 0
    lost = {f["fact"]: f for f in rows["left_truncation"]["facts"]}
    assert all(lost[f]["lost_at"] == 8 and lost[f]["final_state"] == "gone" for f in FACTS)
    assert all(f["restated"] for f in rows["goal_anchoring"]["facts"])
    ga, lt = rows["goal_anchoring"], rows["left_truncation"]
    assert ga["synthetic_tokens_sent"] > 0 and lt["synthetic_tokens_sent"] == 0
    steps = lt["steps"]
    assert ga["total_tokens_sent"] == pytest.approx(ga["mean_window_tokens"] * steps, abs=steps)
    # the API's result is the --json
    with ctxf.open_store(db) as ws:
        res = ctxf.compare_policies(CASE, model=MODEL, facts_file=FACTS_FILE, store=ws)
    assert res.to_dict() == data
    assert "constraint_selection" in res.kept_by(FACTS[0]) and "left_truncation" not in res.kept_by(FACTS[0])
    # the table at 80 columns
    r = cli(monkeypatch, "replay", CASE, "--model", MODEL, "--compare-policies", "--facts-file", FACTS_FILE,
            "--db", db, width=80)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    row = {ln.split()[0]: ln.split() for ln in lines if ln.split() and ln.split()[0] in rows}
    assert row["constraint_selection"][1:3] == ["kept", "kept"]
    assert row["left_truncation"][1:5] == ["lost", "8", "lost", "8"]
    assert row["goal_anchoring"][1:3] == ["kept*", "kept*"]


def test_compare_policies_without_facts_says_how_to_give_them(monkeypatch, db, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("facts: []\n")
    r = cli(monkeypatch, "replay", CASE, "--model", MODEL, "--compare-policies", "--db", db, "--config", cfg)
    assert r.exit_code == 2
    assert "no facts" in r.stderr and "--fact" in r.stderr and "facts:" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


@pytest.mark.parametrize("args, words", [
    (["--fact", "x"], "--compare-policies"),
    (["--compare-policies", "--fact", "x", "--policy", "reject"], "--policy"),
    (["--compare-policies", "--fact", "x", "--at", "2"], "--at"),
    (["--compare-policies", "--fact", "x", "-m", "gpt-4o", "-m", "gemma-7b"], "several --model"),
])
def test_compare_policies_option_clashes_are_usage_errors(monkeypatch, db, args, words):
    r = cli(monkeypatch, "replay", CASE, *args, "--db", db)
    assert r.exit_code == 2 and words in r.stderr, r.stderr


def test_compare_policies_on_a_real_run(monkeypatch, db, minilm):
    """A real mini-swe-agent run (gpt-5-mini, SWE-bench django__django-11815) replayed under gemma-7b:
    its task statement's 'DO NOT MODIFY: Tests, configuration files' is evicted by left truncation,
    pinned by constraint selection."""
    path = corpus("swebench-pairs/django__django-11815/live-swe-agent_gpt-5-mini/django__django-11815.traj.json")
    fact = "DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)"
    with ctxf.open_store(db) as ws:
        res = ctxf.compare_policies(path, model=MODEL, facts=[fact], store=ws)
    rows = {r.policy: r for r in res.comparison.rows}
    assert rows["left_truncation"].facts[0]["final_state"] == "gone"
    assert rows["constraint_selection"].facts[0]["kept_to_end"]
    assert rows["constraint_selection"].overflow_steps == 0
    assert rows["goal_anchoring"].facts[0]["kept_to_end"] and rows["goal_anchoring"].synthetic_tokens_sent > 0


def test_explain_counterfactuals_say_goal_anchoring_keeps_them_only_as_a_restatement(tmp_path):
    """explain's what-ifs include goal anchoring: a constraint left truncation evicted at step 8
    is kept at step 10 by its restated copy, which the row says ("restated"), while constraint
    selection keeps the message itself."""
    from context_forensics.analysis.explain.counterfactuals import Lost, counterfactuals
    from context_forensics.store.db import Store
    from context_forensics.store.ingest import ingest_paths

    with Store.open(tmp_path / "s.db") as store:
        ingest_paths(store, [CASE])
        (ses,) = store.sessions()
        lost = [Lost(FACTS[0], (1,), how="eviction"), Lost(FACTS[1], (3,), how="eviction")]
        rows = {r["label"]: r for r in counterfactuals(
            store, ses["id"], 10, lost, model=MODEL, policy="left_truncation", recorded_model=None,
            limit=8192, history_tokens=0)}
    ga, cs = rows["goal_anchoring"], rows["constraint_selection"]
    assert ga["keeps_all"] and sorted(ga["restated"]) == sorted(FACTS) and sorted(ga["kept"]) == sorted(FACTS)
    assert cs["keeps_all"] and cs["restated"] == []
    assert "left_truncation" not in rows  # the diagnosis' own policy is no alternative
    assert rows["sliding_window"]["lost"] and not rows["sliding_window"]["restated"]
