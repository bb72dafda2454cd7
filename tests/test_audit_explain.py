"""The `context_caused_failure` audit rule: `ctxf explain` on each failed session of an audit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.config.audit_rules import parse_audit
from context_forensics.errors import ConfigError
from helpers import FIXTURES

CASES = FIXTURES / "explain"
EVICTED = CASES / "c01_constraint_evicted.openai.json"  # the rule is evicted at step 8, broken at step 9
ERRED = CASES / "c06_model_erred.openai.json"  # nothing lost: the model simply erred
NO_MODEL = CASES / "c07_no_model.openai.json"  # the log names no model
RULE = "Never modify files under tests/."
GEMMA = ("model_mappings:\n  gemma-7b: {tokenizer: approx, context_limit: 8192, reserved_output: 1024,"
         " eviction_strategy: left_truncation, preserve_system: true}\n")


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)



def config(tmp_path, rule: str) -> str:
    p = tmp_path / "c.yaml"
    p.write_text(GEMMA + "audit:\n  rules:\n    context_caused_failure: " + rule + "\n")
    return str(p)


def ingest(db, *files, outcome=None):
    r = run("ingest", *files, "--db", db, *(["--outcome", outcome] if outcome else []))
    assert r.exit_code == 0, r.stderr


def results(stdout):
    report = json.loads(stdout)
    return report, {s["source"].rsplit("/", 1)[-1]: s["results"][0] for s in report["sessions"]}


def test_fails_on_a_failed_session_whose_constraint_was_evicted_before_the_edit(hashing, tmp_path):
    db = tmp_path / "s.db"
    ingest(db, EVICTED, ERRED, outcome="failure")
    cfg = config(tmp_path, f"{{model: gemma-7b, facts: [{json.dumps(RULE)}]}}")
    junit, md = tmp_path / "j.xml", tmp_path / "s.md"
    r = run("audit", "--db", db, "--config", cfg, "--json", "--fail-on", "context_caused_failure",
            "--junit", junit, "--markdown", md)
    assert r.exit_code == 3, r.stderr
    report, res = results(r.stdout)
    bad, ok = res[EVICTED.name], res[ERRED.name]
    assert (bad["status"], bad["figure"], bad["step"]) == ("fail", "contributed", 9)
    assert bad["detail"]["verdict"] == "contributed" and bad["detail"]["decisive_step"]["why"] == "rule"
    assert bad["detail"]["reasons"][0]["kind"] == "constraint_lost"
    # one line: the verdict words, the step, the top reason and its evidence
    assert "\n" not in bad["message"] and bad["message"].startswith("context likely contributed at step 9")
    assert "Never modify files under tests/." in bad["message"] and "eviction@8" in bad["message"]
    assert bad["detail"]["model"] == "gemma-7b"
    assert (ok["status"], ok["figure"]) == ("pass", "not_limiting")
    assert ok["message"].startswith("context did not limit this run")
    assert report["totals"]["failing"] == 1
    # the JUnit report names the rule and carries the failure; Markdown has its column
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite[@name='ctxf.context_caused_failure']")
    assert suite is not None and suite.get("failures") == "1" and suite.get("tests") == "2"
    failure = suite.find(".//failure")
    assert failure.get("type") == "context_caused_failure" and failure.get("message") == "contributed at step 9"
    assert "context likely contributed" in failure.text
    text = md.read_text()
    assert "context\\_caused\\_failure (fail)" in text or "context_caused_failure (fail)" in text
    assert "❌ contributed @ step 9" in text
    # without --fail-on (and no fail: true) the same finding is reported, the exit code is 0
    r = run("audit", "--db", db, "--config", cfg, "--json")
    assert r.exit_code == 0 and results(r.stdout)[1][EVICTED.name]["status"] == "fail"


def test_skipped_unless_the_session_failed(hashing, tmp_path):
    db = tmp_path / "s.db"
    ingest(db, EVICTED)  # outcome unknown
    cfg = config(tmp_path, f"{{model: gemma-7b, facts: [{json.dumps(RULE)}]}}")
    r = run("audit", "--db", db, "--config", cfg, "--json", "--fail-on", "context_caused_failure")
    assert r.exit_code == 0, r.stderr
    res = results(r.stdout)[1][EVICTED.name]
    assert res["status"] == "skipped" and "outcome unknown" in res["message"] and "only_failed" in res["message"]
    # only_failed: false explains it anyway: the same evicted constraint fails it
    cfg = config(tmp_path, f"{{model: gemma-7b, facts: [{json.dumps(RULE)}], only_failed: false}}")
    r = run("audit", "--db", db, "--config", cfg, "--json", "--fail-on", "context_caused_failure")
    assert r.exit_code == 3 and results(r.stdout)[1][EVICTED.name]["figure"] == "contributed"

    db2 = tmp_path / "s2.db"
    ingest(db2, EVICTED, outcome="success")
    r = run("audit", "--db", db2, "--config", config(tmp_path, "{model: gemma-7b}"), "--json",
            "--fail-on", "context_caused_failure")
    assert r.exit_code == 0 and results(r.stdout)[1][EVICTED.name]["status"] == "skipped"


def test_an_unknown_verdict_on_assumed_limits_is_skipped_not_failed(hashing, tmp_path):
    db = tmp_path / "s.db"
    ingest(db, NO_MODEL, outcome="failure")
    r = run("audit", "--db", db, "--config", config(tmp_path, "{}"), "--json", "--fail-on", "context_caused_failure")
    assert r.exit_code == 0, r.stderr
    report, res = results(r.stdout)
    res = res[NO_MODEL.name]
    assert (res["status"], res["figure"]) == ("skipped", "unknown")
    assert res["detail"]["verdict"] == "unknown" and any(x["kind"] == "no_model" for x in res["detail"]["reasons"])
    assert res["message"].startswith("not judged: unknown") and res["assumed"] is not None
    assert report["totals"]["assumed"] == 1


def test_a_simulated_policy_on_assumed_limits_is_not_judged(hashing, tmp_path):
    """With a policy of its own and no model, the losses come from an assumed window: the verdict
    is kept in detail, never a pass or a failure."""
    db = tmp_path / "s.db"
    ingest(db, NO_MODEL, outcome="failure")
    cfg = config(tmp_path, f"{{policy: left_truncation, facts: [{json.dumps(RULE)}]}}")
    r = run("audit", "--db", db, "--config", cfg, "--json", "--fail-on", "context_caused_failure")
    assert r.exit_code == 0, r.stderr
    res = results(r.stdout)[1][NO_MODEL.name]
    assert res["status"] == "skipped" and res["assumed"] is not None
    assert res["figure"] == "unknown" and res["message"].startswith("not judged: ")
    assert "model" in res["message"] and res["detail"]["policy"] == "left_truncation"


def test_the_rule_is_opt_in_and_its_settings_are_checked():
    assert "context_caused_failure" not in {r.name for r in parse_audit(None, "c.yaml")}
    (rule,) = parse_audit({"rules": {"context_caused_failure": {}}}, "c.yaml")
    assert rule.params == {"facts": None, "goal": None, "only_failed": True}
    for bad, key in (({"only_failed": "yes"}, "only_failed"), ({"facts": "x"}, "facts"), ({"goal": ""}, "goal"),
                     ({"fail_on": "unknown"}, "fail_on")):
        with pytest.raises(ConfigError) as e:
            parse_audit({"rules": {"context_caused_failure": bad}}, "c.yaml")
        assert f"audit.rules.context_caused_failure.{key}" in str(e.value)


@pytest.mark.integration
def test_with_the_real_embedder_the_overflow_sample_fails_under_gemma(tmp_path, minilm, monkeypatch):
    """sample_logs' overflow session, labelled failed: under gemma-7b the task statement is evicted
    at step 7 before the step-10 edit of tests/ (`ctxf explain ... --model gemma-7b`)."""
    from helpers import SAMPLES

    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: minilm)
    log = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"
    db = tmp_path / "s.db"
    ingest(db, log, outcome="failure")
    cfg = config(tmp_path, f"{{model: gemma-7b, facts: [{json.dumps(RULE)}], fail: true}}")
    r = run("audit", "--db", db, "--config", cfg, "--json")
    assert r.exit_code == 3, r.stderr
    res = results(r.stdout)[1][log.name]
    assert (res["status"], res["figure"], res["step"]) == ("fail", "contributed", 10)


def test_the_rule_reads_the_replay_the_other_rules_share(hashing, tmp_path, monkeypatch):
    """explain reads the audit's prepared replay of the session: the rule adds no prepare of it."""
    import context_forensics.analysis.replay as replay

    calls = []
    real = replay.prepare

    def counted(store, sid, model=None, **kw):
        calls.append((sid, model, kw.get("policy")))
        return real(store, sid, model, **kw)

    monkeypatch.setattr(replay, "prepare", counted)
    db = tmp_path / "s.db"
    ingest(db, ERRED, outcome="failure")
    p = tmp_path / "c.yaml"
    p.write_text(GEMMA + "audit:\n  rules:\n    max_utilization: {model: gemma-7b}\n"
                 f"    context_caused_failure: {{model: gemma-7b, facts: [{json.dumps(RULE)}]}}\n")
    r = run("audit", "--db", db, "--config", p, "--json")
    assert r.exit_code == 0, r.stderr
    assert [x["status"] for x in json.loads(r.stdout)["sessions"][0]["results"]] == ["pass", "pass"]
    assert [c for c in calls if c[1] == "gemma-7b" and c[2] is None] == [calls[0]]
