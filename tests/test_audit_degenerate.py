"""An audit's exit code says what happened (issue 30, item 12): a rule that cannot judge a
session (no messages, no assistant message, only tool messages, no usage) is ``skipped`` with
its reason, never an ``error``; exit 1 only with a listed error; exit 3 when a ``--fail-on``
rule fails. Every rule of ``RULES`` runs here on every degenerate session."""

from __future__ import annotations

import json

import pytest

from context_forensics.analysis.audit import RULES, audit_many, rules as rules_mod
from context_forensics.config.audit_rules import RULE_PARAMS, RuleConfig
from context_forensics.config.settings import load_config
from context_forensics.errors import CtxfError
from context_forensics.records import Message, Session, ToolCall, Usage
from context_forensics.store.db import Store
from helpers import cli

CALL = ToolCall("bash", '{"command": "ls"}', "call_1")
# name -> (messages, outcome): every shape a rule must judge or skip without raising
DEGENERATE: dict[str, tuple[list[Message], str]] = {
    "no_messages": ([], "failure"),
    "system_only": ([Message("system", "You are a coding agent.")], "failure"),
    "user_only": ([Message("user", "Fix the failing test in parser.py.")], "failure"),
    "assistant_only": ([Message("assistant", "Done.")], "failure"),
    "no_assistant": ([Message("system", "You are a coding agent."), Message("user", "Fix parser.py."),
                      Message("tool", "a.py b.py", tool_call_id="call_1")], "failure"),
    "only_tool": ([Message("tool", "a.py b.py", tool_call_id="call_1"), Message("tool", "(no output)")], "failure"),
    "empty_texts": ([Message("user", ""), Message("assistant", "")], "failure"),
    "no_usage": ([Message("user", "List the files."), Message("assistant", "", tool_calls=(CALL,)),
                  Message("tool", "a.py b.py", tool_call_id="call_1"), Message("assistant", "Two files.")], "failure"),
    "usage_zero": ([Message("user", "Hi"), Message("assistant", "Hello", usage=Usage(0, 0))], "success"),
}
FACTS = ["The service listens on port 8080."]


def _rule(name: str) -> RuleConfig:
    params = dict(RULE_PARAMS[name])
    if name == "facts_must_persist":
        params["facts"] = FACTS
    if name == "context_caused_failure":
        params["facts"] = FACTS
        params["only_failed"] = False
    return RuleConfig(name, params)


def _store(path, sessions: dict[str, tuple[list[Message], str]]) -> list[str]:
    with Store.open(path) as store, store.transaction():
        for name, (msgs, outcome) in sessions.items():
            store.write_session(Session(name, "test", messages=iter(msgs), title=name, task="t-" + name,
                                        outcome=outcome), sid=name, source=name, source_hash=name, parent_id=None)
    return list(sessions)


@pytest.fixture()
def degenerate_db(tmp_path):
    db = tmp_path / "degenerate.db"
    _store(db, DEGENERATE)
    return db


def test_every_rule_on_every_degenerate_session_is_a_verdict_or_a_skip_with_its_reason(degenerate_db, hashing):
    rules = [_rule(name) for name in RULES]
    report = audit_many(str(degenerate_db), list(DEGENERATE), load_config(None), rules)
    assert len(report["sessions"]) == len(DEGENERATE)
    for s in report["sessions"]:
        assert [r["rule"] for r in s["results"]] == list(RULES)
        for res in s["results"]:
            where = f"{s['id']} {res['rule']}: {res['message']}"
            assert res["status"] in ("pass", "fail", "skipped"), where
            if res["status"] == "skipped":
                assert res["message"].strip(), where  # a skip always says why
    assert report["errors"] == [] and report["exit_code"] == 0


def test_a_session_with_no_messages_skips_the_rules_that_cannot_judge_it(degenerate_db, hashing):
    report = audit_many(str(degenerate_db), ["no_messages"], load_config(None), [_rule(n) for n in RULES])
    by_rule = {r["rule"]: r for r in report["sessions"][0]["results"]}
    for name in ("max_utilization", "no_overflow", "max_compactions", "max_tool_output_share", "facts_must_persist"):
        assert by_rule[name]["status"] == "skipped", by_rule[name]
        assert "no model call" in by_rule[name]["message"], by_rule[name]
    drift = by_rule["max_drift"]
    assert drift["status"] == "skipped" and drift["figure"] == "no_goal" and drift["detail"]["reason"] == "no_text"
    assert "no system or user text" in drift["message"]


def test_cli_audit_of_a_store_with_an_empty_session_exits_0_with_no_errors(degenerate_db, monkeypatch, hashing):
    r = cli(monkeypatch, "audit", "--db", degenerate_db, "--json")
    report = json.loads(r.stdout)
    assert r.exit_code == 0, (report["errors"], report["totals"])
    assert report["exit_code"] == 0 and report["errors"] == [] and report["totals"]["error"] == 0
    drift = {s["id"]: {x["rule"]: x for x in s["results"]}["max_drift"] for s in report["sessions"]}
    assert drift["no_messages"]["status"] == "skipped" and drift["no_messages"]["message"]


def test_exit_1_only_with_a_listed_error(degenerate_db, monkeypatch, hashing):
    def broken(ctx, rule):
        raise CtxfError("the replay cache is corrupt", hint="re-ingest the session")

    monkeypatch.setitem(rules_mod.RULES, "max_compactions", broken)
    r = cli(monkeypatch, "audit", "--db", degenerate_db, "--json")
    report = json.loads(r.stdout)
    assert r.exit_code == 1 and report["exit_code"] == 1
    listed = [e for e in report["errors"] if e.get("kind") == "rule"]
    assert len(listed) == len(DEGENERATE) and report["totals"]["error"] == len(DEGENERATE)
    assert {e["session"] for e in listed} == set(DEGENERATE) and {e["rule"] for e in listed} == {"max_compactions"}
    assert all("corrupt" in e["error"] and e["hint"] == "re-ingest the session" for e in listed)
    # the terminal view says which session and rule, and names no unreadable input
    r = cli(monkeypatch, "audit", "--db", degenerate_db)
    assert r.exit_code == 1 and "max_compactions" in r.stdout and "unreadable" not in r.stdout


def test_a_rule_that_raises_unexpectedly_is_a_listed_error_not_a_traceback(degenerate_db, monkeypatch, hashing):
    def broken(ctx, rule):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setitem(rules_mod.RULES, "max_compactions", broken)
    r = cli(monkeypatch, "audit", "--db", degenerate_db, "--json")
    report = json.loads(r.stdout)
    assert r.exit_code == 1
    listed = [e for e in report["errors"] if e.get("kind") == "rule"]
    assert listed and all("ZeroDivisionError" in e["error"] for e in listed)


def test_exit_3_when_a_fail_on_rule_fails_and_0_when_it_is_not_named(tmp_path, monkeypatch, hashing):
    db = tmp_path / "orphans.db"
    # a call that never got its result, followed by another model call: no_orphan_tool_results fails
    _store(db, {"unanswered": ([Message("user", "List the files."), Message("assistant", "", tool_calls=(CALL,)),
                                Message("user", "Go on."), Message("assistant", "Done.")], "unknown"),
                **{k: DEGENERATE[k] for k in ("no_messages", "only_tool")}})
    r = cli(monkeypatch, "audit", "--db", db, "--json")
    report = json.loads(r.stdout)
    res = {s["id"]: {x["rule"]: x for x in s["results"]} for s in report["sessions"]}
    assert res["unanswered"]["no_orphan_tool_results"]["status"] == "fail"
    assert r.exit_code == 0 and report["errors"] == []
    r = cli(monkeypatch, "audit", "--db", db, "--json", "--fail-on", "no_orphan_tool_results")
    assert r.exit_code == 3 and json.loads(r.stdout)["errors"] == []
