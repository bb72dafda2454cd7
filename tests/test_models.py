"""Model names and limits (issue 9, items 1-4): unknown names are errors, unplaceable recorded
names are assumed limits said on every output, newer names say which entry lends its figures,
and a call the provider answered is never an overflow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.config.models import (
    BUILTIN,
    FAMILIES,
    UnknownModelError,
    builtin_spec,
    resolve_model,
    session_spec,
)
from context_forensics.config.settings import load_config
from context_forensics.errors import ConfigError, ExitCode
from helpers import CORPUS, FIXTURES, corpus

HERE = FIXTURES / "models"
SHAREGPT = FIXTURES / "sharegpt_small.json"
GPT4_OVER = HERE / "answered_gpt4_over_the_table.json"
SONNET_150K = HERE / "answered_sonnet_150k.json"
UNKNOWN_RECORDED = HERE / "recorded_unknown_model.json"
NEWER_OPUS = HERE / "recorded_newer_opus.json"
COMPACT_CALL = "claude-code-jsonl/spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-acompact-f46190.jsonl"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture()
def db(tmp_path):
    return tmp_path / "store.db"


@pytest.fixture()
def table(tmp_path):
    """A config with no mappings: the built-in table alone (not the repo's forensics_config.yaml)."""
    p = tmp_path / "empty.yaml"
    p.write_text("")
    return p


def write_config(tmp_path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def replay(db, path, table, *args) -> dict:
    r = run("replay", path, "--db", db, "--config", table, "--json", *args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)["replays"][0]


# ---------------------------------------------------------------- item 1: unknown names


@pytest.mark.parametrize("name, close", [("gpt4o", "gpt-4o"), ("claude-sonet-4-5", "claude-sonnet-4-5"),
                                          ("gpt-99", "gpt-5")])
def test_an_unknown_model_is_exit_2_with_the_closest_names(db, table, name, close):
    r = run("replay", SHAREGPT, "--db", db, "--config", table, "--model", name)
    assert r.exit_code == ExitCode.USAGE
    assert f"unknown model {name!r}: did you mean" in r.stderr and close in r.stderr.split("did you mean")[1]
    assert "Traceback" not in r.stderr
    # checked before the file was ingested: nothing was written to the store
    assert json.loads(run("sessions", "--db", db, "--config", table, "--json").stdout)["sessions"] == []


def test_suggestions_include_aliases_and_mappings(tmp_path):
    cfg = load_config(write_config(tmp_path, "model_mappings:\n  my-local-llm: {context_limit: 32768}\n"))
    with pytest.raises(UnknownModelError, match="my-local-llm"):
        resolve_model("my-locall-llm", cfg)
    with pytest.raises(UnknownModelError, match="chatgpt-4o-latest"):
        resolve_model("chatgpt4o-latest")


@pytest.mark.parametrize("command", [("facts", "--fact", "11 is prime"), ("drift",), ("report", "--html", "x.html")])
def test_every_command_taking_model_rejects_an_unknown_one(db, table, tmp_path, command):
    r = run(command[0], SHAREGPT, *command[1:], "--db", db, "--config", table, "--model", "gpt4o")
    assert r.exit_code == ExitCode.USAGE and "did you mean gpt-4o" in r.stderr


def test_config_check_catches_an_unknown_audit_rule_model(tmp_path):
    p = write_config(tmp_path, "audit:\n  rules:\n    no_overflow: {model: gpt4o, fail: true}\n")
    r = run("config", "check", "--config", p)
    assert r.exit_code == ExitCode.USAGE
    assert f"{p}:3: audit.rules.no_overflow.model" in r.stderr and "did you mean gpt-4o" in r.stderr


def test_config_check_catches_an_unknown_mapping_base(tmp_path):
    p = write_config(tmp_path, "model_mappings:\n  proxy:\n    base: claude-sonet-4-5\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert f"{p}:3: model_mappings.proxy.base" in str(e.value) and "claude-sonnet-4-5" in str(e.value)


def test_a_new_model_needs_a_window(tmp_path):
    p = write_config(tmp_path, "model_mappings:\n  my-llm:\n    tokenizer: llama3\n")
    with pytest.raises(ConfigError, match="needs context_limit") as e:
        load_config(p)
    assert f"{p}:2: model_mappings.my-llm" in str(e.value)


def test_a_mapping_with_a_new_name_defines_a_model(db, tmp_path):
    p = write_config(tmp_path, "model_mappings:\n  my-llm: {context_limit: 32768, reserved_output: 1024}\n"
                               "audit:\n  rules:\n    no_overflow: {model: my-llm, fail: true}\n")
    assert run("config", "check", "--config", p).exit_code == 0
    rep = replay(db, SHAREGPT.parent / "models" / "recorded_unknown_model.json", p, "--model", "my-llm")
    assert (rep["model"], rep["limit"], rep["reserved_output"], rep["tokenizer"]) == ("my-llm", 32768, 1024, "approx")
    assert rep["entry"]["match"] == "mapping" and rep["assumed"] is None and rep["model_notes"] == []
    r = run("audit", UNKNOWN_RECORDED, "--db", db, "--config", p, "--json")
    res = {x["rule"]: x for x in json.loads(r.stdout)["sessions"][0]["results"]}
    assert res["no_overflow"]["status"] == "pass" and res["no_overflow"]["detail"]["model"] == "my-llm"


def test_a_partial_mapping_keeps_the_table_figures_it_leaves_out(tmp_path):
    # Before, the left-out keys took the mapping defaults: gpt-4o lost its 16,384 reserved
    # output and its tokenizer silently.
    cfg = load_config(write_config(tmp_path, "model_mappings:\n  gpt-4o: {context_limit: 64000}\n"
                                             "  proxy-sonnet: {base: claude-sonnet-4-5, context_limit: 1000000}\n"))
    gpt = resolve_model("gpt-4o-2024-08-06", cfg)
    assert (gpt.context_limit, gpt.reserved_output, gpt.tokenizer, gpt.policy) == (64000, 16384, "o200k_base", "reject")
    proxy = resolve_model("proxy-sonnet", cfg)
    assert (proxy.context_limit, proxy.reserved_output, proxy.tokenizer) == (1_000_000, 64000, "claude")
    r = run("config", "show", "--config", tmp_path / "c.yaml", "--json")
    shown = json.loads(r.stdout)["model_mappings"]
    assert shown["gpt-4o"]["reserved_output"] == 16384 and shown["proxy-sonnet"]["base"] == "claude-sonnet-4-5"


def test_a_mapping_whose_table_reserve_exceeds_its_window_is_an_error(tmp_path):
    p = write_config(tmp_path, "model_mappings:\n  gpt-4o: {context_limit: 10000}\n")
    with pytest.raises(ConfigError, match=r"reserved_output \(16,384\) must be below context_limit \(10,000\)"):
        load_config(p)


# ---------------------------------------------------------------- item 2: no model in the log


def test_a_session_without_a_model_says_its_limits_are_assumed(db, table):
    r = run("replay", SHAREGPT, "--db", db, "--config", table, "--json")
    assert r.exit_code == 2  # the file holds two sessions
    sid = r.stderr.split("pick one by id: ")[1].split(",")[0].strip()
    rep = replay(db, sid, table)
    assert rep["assumed"] == {"reason": "the log names no model", "limit": 128000, "reserved_output": 0,
                              "tokenizer": "approx", "policy": "reject",
                              "hint": "pass --model or map it in model_mappings"}
    assert rep["entry"]["match"] == "assumed"
    human = run("replay", sid, "--db", db, "--config", table).stdout
    assert "model unknown: assumed 128,000-token window" in " ".join(human.split())
    assert "pass --model or map it in model_mappings" in " ".join(human.split())
    # a --model is no assumption
    assert replay(db, sid, table, "--model", "gpt-4o")["assumed"] is None


def test_a_recorded_name_the_table_cannot_place_is_assumed_not_a_crash(db, table):
    rep = replay(db, UNKNOWN_RECORDED, table)
    assert rep["model"] == "some-local-model" and rep["limit"] == 128000
    assert "the recorded model 'some-local-model' is not in the model table" in rep["assumed"]["reason"]
    assert session_spec("some-local-model").is_assumed and session_spec(None).is_assumed


@pytest.mark.parametrize("path, fmt", [
    (FIXTURES / "codex" / "rollout-2025-08-20T09-15-00-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl", "codex"),
    (UNKNOWN_RECORDED, "openai_chat"),
])
def test_assumed_limits_are_said_by_every_view(db, table, tmp_path, monkeypatch, path, fmt):
    from context_forensics.embed import HashingEmbedder

    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: HashingEmbedder())
    rep = replay(db, path, table)
    assert rep["assumed"] is not None
    note = "model unknown: assumed 128,000-token window"
    flat = lambda out: " ".join(out.split())  # noqa: E731 - the views wrap long lines
    at = run("replay", path, "--db", db, "--config", table, "--at", 1, "--json")
    assert json.loads(at.stdout)["assumed"] is not None
    assert note in flat(run("replay", path, "--db", db, "--config", table, "--at", 1).stdout)
    facts = run("facts", path, "--fact", "a prime above 10", "--db", db, "--config", table, "--json")
    assert json.loads(facts.stdout)["assumed"] is not None
    assert note in flat(run("facts", path, "--fact", "a prime above 10", "--db", db, "--config", table).stdout)
    drift = run("drift", path, "--db", db, "--config", table, "--json")
    assert any(n.startswith(note) for n in json.loads(drift.stdout)["model_notes"])
    html = tmp_path / "r.html"
    assert run("report", path, "--html", html, "--db", db, "--config", table).exit_code == 0
    assert note in html.read_text()


def _big_sharegpt(tmp_path) -> Path:
    """One ShareGPT conversation of about 140,000 approx tokens: over an assumed 128k window."""
    text = "word " * 112_000  # 560,000 characters, ~4 per approx token
    p = tmp_path / "big_sharegpt.json"
    p.write_text(json.dumps([{"id": "big", "conversations": [
        {"from": "human", "value": "Summarise this log:\n" + text},
        {"from": "gpt", "value": "It repeats one word."}]}]))
    return p


def test_an_audit_never_fails_a_rule_on_an_assumed_limit(db, tmp_path, table):
    big = _big_sharegpt(tmp_path)
    r = run("audit", big, "--db", db, "--config", table, "--fail-on", "no_overflow,max_utilization", "--json",
            "--junit", tmp_path / "j.xml", "--markdown", tmp_path / "m.md")
    report = json.loads(r.stdout)
    assert r.exit_code == 0 and report["exit_code"] == 0  # was 3: a made-up 128k window "overflowed"
    s = report["sessions"][0]
    assert s["assumed"]["reason"] == "the log names no model"
    res = {x["rule"]: x for x in s["results"]}
    for rule in ("no_overflow", "max_utilization"):
        assert res[rule]["status"] == "skipped" and res[rule]["assumed"]["limit"] == 128000
        assert res[rule]["detail"]["verdict"] == "fail" and res[rule]["message"].startswith("not judged: model unknown")
    assert res["no_orphan_tool_results"]["assumed"] is None  # no limit in that figure
    assert report["totals"]["assumed"] == 2
    assert "not judged: model unknown" in (tmp_path / "j.xml").read_text()
    assert "assumed limits: not judged" in (tmp_path / "m.md").read_text()
    human = run("audit", big, "--db", db, "--config", table).stdout
    assert "~ = on assumed limits, not judged" in " ".join(human.split())


def test_a_rule_naming_a_model_judges_an_unknown_session(db, tmp_path):
    big = _big_sharegpt(tmp_path)
    cfg = write_config(tmp_path, "audit:\n  rules:\n    no_overflow: {model: gpt-4o, fail: true}\n")
    r = run("audit", big, "--db", db, "--config", cfg, "--json")
    res = json.loads(r.stdout)["sessions"][0]["results"][0]
    assert r.exit_code == 3 and res["status"] == "fail" and res["assumed"] is None
    assert res["detail"]["model"] == "gpt-4o"


# ---------------------------------------------------------------- item 3: names newer than the table


@pytest.mark.parametrize("name, entry, match", [
    ("claude-opus-4-6", "claude-opus-4-6", "exact"),
    ("claude-haiku-4-5-20251001", "claude-haiku-4-5", "snapshot"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", "snapshot"),
    ("claude-opus-4-5-20251101", "claude-opus-4-5", "snapshot"),
    ("claude-opus-4-1-20250805", "claude-opus-4-1", "snapshot"),
    ("claude-sonnet-4.6", "claude-sonnet-4-6", "exact"),
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet", "snapshot"),
    ("litellm_proxy/anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet", "snapshot"),
    ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet", "snapshot"),
    ("gpt-5.1-codex", "gpt-5.1-codex", "exact"),
    ("gpt-5-mini-2025-08-07", "gpt-5-mini", "snapshot"),
    ("openai/gpt-5-mini", "gpt-5-mini", "exact"),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", "snapshot"),
    ("gpt-4", "gpt-4", "exact"),
    ("gpt-4-1106-preview", "gpt-4-turbo", "alias"),
    ("gpt-3.5-turbo-0125", "gpt-3.5-turbo", "snapshot"),
    ("google/gemini-3-pro-preview", "gemini-3-pro", "snapshot"),
    ("gemini-3-flash-preview", "gemini-3-flash", "snapshot"),
    ("gemini-3.1-pro-preview", "gemini-3.1-pro", "snapshot"),
    ("gemini-2.5-pro", "gemini-2.5-pro", "exact"),
    ("gemini/gemini-2.5-pro-exp-03-25", "gemini-2.5-pro", "snapshot"),
    ("openai/google_genai.gemini-2.5-pro-preview-05-06", "gemini-2.5-pro", "snapshot"),
    ("gemini-2.0-pro-exp", "gemini-2.0-pro", "snapshot"),
    ("gpt-4-code-interpreter", "gpt-4", "variant"),
    ("llama-3.2-1b", "llama-3.2", "variant"),
    ("claude-opus-4-7", "claude-opus-4-6", "family"),
    ("gpt-5.2", "gpt-5.1", "family"),
    ("gpt-5.2-codex", "gpt-5.1-codex", "family"),
])
def test_names_find_their_entry_by_the_documented_rules(name, entry, match):
    spec = builtin_spec(name)
    assert spec is not None and (spec.entry, spec.match) == (entry, match)
    assert spec.name == name  # the name as given is kept; the entry says whose figures these are


def test_claude_opus_4_6_has_its_own_entry_and_a_newer_opus_says_whose_figures_it_takes():
    # Before, claude-opus-4-6 fell back to claude-opus-4-1 (32,000 reserved) without a word.
    opus = builtin_spec("claude-opus-4-6")
    assert (opus.entry, opus.match, opus.context_limit, opus.reserved_output) == ("claude-opus-4-6", "exact",
                                                                               200_000, 128_000)
    assert opus.as_of == "2026-12-01" and "platform.claude.com" in opus.source
    assert builtin_spec("claude-opus-4-6[1m]").context_limit == 1_000_000
    newer = builtin_spec("claude-opus-4-7")
    assert (newer.reserved_output, newer.rule) == (opus.reserved_output, "claude-opus-4-N")
    for gone in ("claude", "gemini-1.0-pro", "llama-2-7b", "mistral-huge", "gpt-99"):  # no catch-all families
        assert builtin_spec(gone) is None, gone


def test_every_replay_header_names_a_borrowed_entry(db, table):
    rep = replay(db, NEWER_OPUS, table)
    assert rep["entry"] == {**rep["entry"], "name": "claude-opus-4-6", "match": "family", "rule": "claude-opus-4-N"}
    assert rep["reserved_output"] == 128_000
    human = " ".join(run("replay", NEWER_OPUS, "--db", db, "--config", table).stdout.split())
    assert "claude-opus-4-7 → table entry claude-opus-4-6 (family claude-opus-4-N, as of 2026-12-01)" in human


def test_models_command_looks_names_up(table):
    r = run("models", "claude-opus-4-7", "claude-haiku-4-5-20251001", "--config", table, "--json")
    found = json.loads(r.stdout)["models"]
    assert [(m["entry"], m["match"], m["rule"]) for m in found] == [
        ("claude-opus-4-6", "family", "claude-opus-4-N"), ("claude-haiku-4-5", "snapshot", None)]
    human = " ".join(run("models", "claude-opus-4-7", "--config", table).stdout.split())
    assert "claude-opus-4-7 → family claude-opus-4-N: table entry claude-opus-4-6" in human
    assert run("models", "gpt4o", "--config", table).exit_code == ExitCode.USAGE
    listing = " ".join(run("models", "--config", table).stdout.split())
    assert all(f"{label} → {entry}" in listing for label, _, entry in FAMILIES)


def test_every_entry_is_dated_and_sourced():
    for m in BUILTIN:
        assert m.as_of and m.source and m.reserved_output < m.context_limit, m.name


@pytest.mark.integration
def test_every_model_the_corpus_records_has_an_entry(db, table):
    if not CORPUS.exists():
        pytest.skip(f"corpus not available: {CORPUS}")
    r = run("ingest", CORPUS, "-r", "--db", db, "--config", table)
    assert r.exit_code in (0, 1), r.stderr
    names = {n for s in json.loads(run("sessions", "--db", db, "--config", table, "--json").stdout)["sessions"]
             for n in [s["model"], *(s["models"] or [])] if n}
    assert names, "the corpus names models"
    # "gpt4" (SWE-agent 0.x's shorthand) is read as the model it stands for, gpt-4-1106-preview
    unplaced = {n for n in names if builtin_spec(n) is None}
    assert unplaced == set(), unplaced


# ---------------------------------------------------------------- item 4: an answered call is no overflow


@pytest.mark.integration
def test_the_compaction_call_claude_code_recorded_is_no_overflow(db, table, tmp_path):
    path = corpus(COMPACT_CALL)
    rep = replay(db, path, table)
    # Before: reserved 32,000 (borrowed from claude-opus-4-1), "overflow +1,910" on the one call.
    assert rep["summary"]["overflow_steps"] == [] and not any(e["type"] == "overflow"
                                                              for e in rep["steps"][0]["events"])
    assert (rep["limit"], rep["reserved_output"], rep["budget"]) == (200_000, 30_090, 169_910)
    assert rep["bound"] == {"step": 1, "message_seq": rep["steps"][0]["message_seq"], "recorded_prompt_tokens": 169_910,
                            "reserved_output": {"table": 128_000, "bound": 30_090}, "limit": None}
    human = " ".join(run("replay", path, "--db", db, "--config", table).stdout.split())
    assert "reserved ≤ 30,090: step 1 was accepted with 169,910 tokens" in human and "overflow" not in human
    rules = write_config(tmp_path, "audit:\n  rules:\n    no_overflow: {}\n    max_utilization: {}\n")
    r = run("audit", path, "--db", db, "--config", rules, "--fail-on", "no_overflow", "--json")
    assert r.exit_code == 0, r.stdout  # was 3
    res = {x["rule"]: x for x in json.loads(r.stdout)["sessions"][0]["results"]}
    assert res["no_overflow"]["status"] == "pass" and res["max_utilization"]["figure"] == round(169_910 / 200_000, 4)
    # a what-if under another model (here one reserving 128,000 of a 200,000 window) may overflow
    what_if = replay(db, path, table, "--model", "claude-opus-4-7")
    assert what_if["bound"] is None and what_if["summary"]["would_fail_steps"] == [1]


@pytest.mark.integration
def test_no_corpus_session_overflows_on_a_call_it_recorded_as_answered(db, table):
    from context_forensics.analysis.replay import is_answered, replay_session
    from context_forensics.store.db import Store

    root = corpus("claude-code-jsonl")
    assert run("ingest", root, "-r", "--db", db, "--config", table).exit_code == 0
    cfg = load_config(table)
    with Store.open(db) as store:
        checked, calls = 0, sum(s["step_count"] for s in store.sessions())
        for s in store.sessions():
            rep = replay_session(store, s["id"], config=cfg, policy="recorded", use_cache=False)
            answered = {sm.seq for sm in store.messages(s["id"]) if is_answered(sm.message)}
            bad = [st["step"] for st in rep.steps if st["overflow"] > 0 and st["message_seq"] in answered]
            assert not bad, (s["id"], s["model"], bad)
            checked += len(answered)
    assert checked == calls > 0  # Claude Code records usage and an answer on every call


@pytest.mark.parametrize("path, limit, reserved, note", [
    (SONNET_150K, 200_000, 50_000, "reserved ≤ 50,000: step 1 was accepted with 150,000 tokens (table: 64,000)"),
    (GPT4_OVER, 9_000, 0, "limit ≥ 9,000: step 1 was accepted with 9,000 tokens (table: 8,192), so 0 reserved"),
])
def test_recorded_usage_bounds_the_budget(db, table, tmp_path, path, limit, reserved, note):
    # Before, both reported an overflow on the one call the provider answered.
    for args in ((), ("--model", json.loads(path.read_text())["model"])):  # the recorded model, named or not
        rep = replay(db, path, table, *args)
        assert (rep["limit"], rep["reserved_output"]) == (limit, reserved)
        assert rep["summary"]["overflow_steps"] == [] and note in rep["model_notes"]
    rules = write_config(tmp_path, "audit:\n  rules:\n    no_overflow: {}\n")
    assert run("audit", path, "--db", db, "--config", rules, "--fail-on", "no_overflow").exit_code == 0


def test_an_answered_call_is_no_overflow_in_the_policies():
    import numpy as np

    from context_forensics.analysis.replay.policies import ReplayInput, get_policy

    def inp(answered, kinds=("message",) * 3):
        return ReplayInput(tokens=np.array([10, 200, 5]), roles=("system", "user", "assistant"), kinds=kinds,
                           group=np.arange(3), steps=np.array([2]), limit=150, answered=answered)

    for name in ("recorded", "reject"):
        over, _ = get_policy(name).run(inp((False,)))
        fine, _ = get_policy(name).run(inp((True,)))
        assert over[0].overflow > 0 and fine[0].overflow == 0 and not fine[0].events, name
    # after a compaction record, reject's window is no longer the one the log recorded
    compacted = ("message", "compaction_summary", "message")
    res, _ = get_policy("reject").run(inp((True,), compacted))
    assert res[0].overflow > 0


@pytest.mark.parametrize("width", (60, 80, 120))
def test_the_notes_fit_the_terminal_and_keep_their_indent(db, table, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    out = run("replay", UNKNOWN_RECORDED, "--db", db, "--config", table).stdout.splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("  model unknown: assumed"))
    note = []
    for line in out[start:]:
        if not line.startswith("  ") or not line.strip():
            break
        note.append(line)
    assert all(len(line) <= width and line == line.rstrip() for line in note)
    assert "pass --model or map it in model_mappings" in " ".join(" ".join(note).split())


def test_diverge_says_what_each_runs_limits_rest_on(db, table, monkeypatch):
    from context_forensics.embed import HashingEmbedder

    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: HashingEmbedder())
    r = run("diverge", UNKNOWN_RECORDED, NEWER_OPUS, "--db", db, "--config", table, "--json")
    data = json.loads(r.stdout)
    assert data["a"]["replay"]["model_notes"][0].startswith("model unknown: assumed 128,000-token window")
    assert data["b"]["replay"]["model_notes"][0].startswith("claude-opus-4-7 → table entry claude-opus-4-6")
    human = " ".join(run("diverge", UNKNOWN_RECORDED, NEWER_OPUS, "--db", db, "--config", table).stdout.split())
    assert "A: model unknown: assumed 128,000-token window" in human and "B: claude-opus-4-7 → table entry" in human
