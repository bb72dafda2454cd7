"""tau-bench results (``tau_bench``): one session per trial, reward as the outcome, the task as
the key that pairs a success with a failure for ``diverge --task`` and ``explain --against``.

The corpus file (a ReAct/text run, PROVENANCE.md fourth wave) was counted by hand; the fixture
fixtures/tau_bench/toolcalling-retail.json is hand-written from tau-bench's source (its README).
"""

from __future__ import annotations

import json

from context_forensics import importers
from context_forensics.importers.base import read_head
from context_forensics.importers.tau_bench import TauBench, outcome_of, react_action
from helpers import FIXTURES, corpus, parse_all, run

FIX = FIXTURES / "tau_bench" / "toolcalling-retail.json"
IMP = TauBench()


def test_reward_rule():
    assert [outcome_of(r) for r in (1.0, 1, 0.0, 0, 0.5, None, True, "1")] == [
        "success", "success", "failure", "failure", "unknown", "unknown", "unknown", "unknown"]


def test_corpus_react_runs():
    path = corpus("tau-bench/tau-bench-phase3/template_result.json")
    assert importers.detect(path).name == "tau_bench"
    sessions, ctx = parse_all(IMP, path)
    assert not ctx.skipped and not ctx.warnings
    raw = json.loads(path.read_text())
    assert [(s.task, s.outcome, len(s.messages)) for s in sessions] == [
        ("tau-bench/airline/2", "success", 28), ("tau-bench/airline/3", "failure", 22)]
    for s, r in zip(sessions, raw):
        assert [m.text for m in s.messages] == [m["content"] for m in r["traj"]]  # the text the model read, whole
        assert s.metadata["env_source"] == "system prompt heading" and s.metadata["agent_format"] == "react"
        assert s.metadata["reward_info"] == r["info"]["reward_info"]
        assistant = [m for m in s.messages if m.role == "assistant"]
        assert assistant and not any(m.tool_calls for m in assistant)  # text actions, no API tool calls
        acted = [m for m in assistant if "react_action" in m.meta]
        assert acted and all(m.text.rstrip().endswith("}") for m in acted)
        outputs = [m for m in s.messages if m.meta.get("environment_output")]
        assert outputs and all(m.role == "user" and m.text.startswith("API output: ") for m in outputs)
    assert [sum(m.role == "assistant" for m in s.messages) for s in sessions] == [13, 10]


def test_react_action_parse():
    assert react_action('Thought: x\nAction:\n{"name": "think", "arguments": {"a": 1}}') == {
        "name": "think", "arguments": {"a": 1}}
    assert react_action("Action:\n{not json}") is None and react_action("no action") is None


def test_fixture_tool_calling_runs():
    sessions, ctx = parse_all(IMP, FIX)
    assert [(s.external_id, s.outcome) for s in sessions] == [
        ("tau-bench/retail/5/trial-0", "success"), ("tau-bench/retail/9/trial-0", "success"),
        ("tau-bench/retail/5/trial-1", "failure")]
    assert ctx.skipped == {"run without trajectory": 1}
    assert any("RateLimitError" in w for w in ctx.warnings)
    good, _, bad = sessions
    assert good.metadata["env_source"] == "file name" and good.metadata["agent_format"] == "tool_calling"
    calls = [c.name for m in bad.messages for c in m.tool_calls]
    assert calls == ["find_user_id_by_email", "get_order_details", "cancel_pending_order"]
    results = [m for m in bad.messages if m.role == "tool"]
    assert [m.name for m in results] == calls and all(m.tool_call_id for m in results)
    assert good.metadata["user_instruction"].startswith("You are Yara Silva")
    # the simulator's instruction is not a message: the agent never read it
    assert not any("You are Yara Silva" in m.text for m in good.messages)


def test_sniff_only_result_lists(tmp_path):
    assert IMP.sniff(FIX, read_head(FIX))
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    scored = tmp_path / "scores.json"
    scored.write_text(json.dumps([{"task_id": 1, "reward": 1.0, "messages": []}]))
    assert not IMP.sniff(chat, read_head(chat)) and not IMP.sniff(scored, read_head(scored))
    others = [p for p in FIXTURES.rglob("*.json*") if p.is_file() and "tau_bench" not in p.parts]
    assert others and not [p for p in others if IMP.sniff(p, read_head(p))]


def test_diverge_pairs_the_trials_of_a_task(tmp_path):
    db = tmp_path / "c.db"
    assert run("ingest", FIX, "--db", db).exit_code == 0
    r = run("diverge", "--task", "tau-bench/retail/5", "--db", db, "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert {report["a"]["outcome"], report["b"]["outcome"]} == {"success", "failure"}
    assert report["a"]["task"] == report["b"]["task"] == "tau-bench/retail/5"
    d = report["divergence"]
    # the failure cancelled without asking: the runs part at step 3, an answer in the success, an action in the failure
    assert (d["a_step"], d["b_step"], d["cause"]) == (3, 3, "assistant_action")
    assert (d["a_event"]["type"], d["b_event"]["type"]) == ("answer", "action")


def test_the_corpus_file_has_one_claimant():
    path = corpus("tau-bench/tau-bench-phase3/template_result.json")
    head = read_head(path)
    assert [imp.name for imp in importers.registry().values() if imp.sniff(path, head)] == ["tau_bench"]
