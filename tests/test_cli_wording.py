"""Words in the terminal output as a new user reads them (issue 13, "Words").

Each test fails on the old text: a phrase said twice, a label doubled, "1 model calls", a
footer explaining figures that are not there, a near-miss note cut before its differing value.
"""

from __future__ import annotations

import json
import re

import pytest

from context_forensics.analysis.facts import text_numbers
from helpers import FIXTURES, cli

ONE_CALL = FIXTURES / "openai_chat" / "request_response.json"  # one call, usage recorded
NO_USAGE = FIXTURES / "wording" / "no_usage.openai.json"  # two calls, no usage recorded
COMPACTED = FIXTURES / "claude_code" / "session.jsonl"  # a recorded compaction at step 4
RELEASE = FIXTURES / "facts" / "release.openai.json"
FACTS_CONFIG = FIXTURES / "facts" / "config.yaml"
BUDGET = "The total budget for cloud spend is 4,500 EUR."
NEW_BUDGET = "The cloud spend budget is 3,000 EUR."
FOOTER = "prompt→completion as recorded"




def _repeated_phrase(text: str, words: int = 3) -> str | None:
    """A run of ``words`` words said twice in a row ("exceed the budget exceed the budget")."""
    w = text.split()
    for n in range(words, len(w) // 2 + 1):
        for i in range(len(w) - 2 * n + 1):
            if w[i : i + n] == w[i + n : i + 2 * n]:
                return " ".join(w[i : i + n])
    return None


def test_repeated_phrase_helper_finds_the_old_message():
    assert _repeated_phrase("even the most recent messages exceed the budget exceed the budget by 7 tokens") \
        == "exceed the budget"
    assert _repeated_phrase("even the most recent messages exceed the budget by 7 tokens") is None


@pytest.mark.parametrize("policy", ["left_truncation", "sliding_window", "local_global_attention", "middle_out",
                                    "tool_result_clearing", "auto_compaction", "recorded"])
def test_an_overflow_says_exceed_the_budget_once(monkeypatch, tmp_path, policy):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"model_mappings:\n  wee:\n    tokenizer: approx\n    context_limit: 60\n    reserved_output: 0\n"
                   f"    eviction_strategy: {policy}\n")
    args = ("replay", RELEASE, "--db", tmp_path / "s.db", "--config", cfg)
    r = cli(monkeypatch, *args, *(() if policy == "recorded" else ("--model", "wee")), "--json")
    assert r.exit_code == 0, r.output
    messages = [e["message"] for rep in json.loads(r.stdout)["replays"] for s in rep["steps"] for e in s["events"]
                if e["type"] == "overflow"]
    if policy != "recorded":  # the recorded window of this log fits the recorded model
        assert messages, "the 60-token window must overflow"
    for m in messages:
        assert m.count("exceed") == 1 and _repeated_phrase(m) is None, m
        assert re.fullmatch(r".+ exceed the budget by [\d,]+ tokens", m), m


def test_left_truncation_overflow_message_in_the_html_report(monkeypatch, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model_mappings:\n  wee:\n    tokenizer: approx\n    context_limit: 60\n    reserved_output: 0\n"
                   "    eviction_strategy: left_truncation\n")
    out = tmp_path / "r.html"
    r = cli(monkeypatch, "report", RELEASE, "--db", tmp_path / "s.db", "--config", cfg, "--model", "wee",
            "--html", out)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert "even the most recent messages exceed the budget by" in page
    assert "exceed the budget exceed the budget" not in page


def test_a_recorded_compaction_is_labelled_recorded_once(monkeypatch, tmp_path, hashing):
    r = cli(monkeypatch, "facts", COMPACTED, "--db", tmp_path / "s.db",
            "--fact", "Fix the flaky login test in tests/test_login.py")
    assert r.exit_code == 0, r.output
    notes = [ln for ln in r.stdout.splitlines() if "present → gone by" in ln]
    assert notes and "by compaction (recorded) of #0 user" in notes[0], r.stdout
    assert "[recorded]" not in r.stdout and "(recorded) [recorded]" not in r.stdout
    # a simulated departure still names the policy that made it
    r = cli(monkeypatch, "facts", RELEASE, "--db", tmp_path / "s.db", "--config", FACTS_CONFIG, "--model", "tiny",
            "--fact", BUDGET)
    assert "by eviction [left_truncation] of #1 user" in r.stdout, r.stdout


def test_show_says_one_model_call_and_two_model_calls(monkeypatch, tmp_path):
    db = tmp_path / "s.db"
    one = cli(monkeypatch, "show", ONE_CALL, "--db", db)
    assert one.exit_code == 0, one.output
    assert re.search(r"messages\s+3 \(1 model call\)", one.stdout), one.stdout
    assert "1 model calls" not in one.stdout
    two = cli(monkeypatch, "show", NO_USAGE, "--db", db)
    assert two.exit_code == 0, two.output
    assert re.search(r"messages\s+4 \(2 model calls\)", two.stdout), two.stdout


def test_html_report_says_one_model_call(monkeypatch, tmp_path):
    out = tmp_path / "r.html"
    r = cli(monkeypatch, "report", ONE_CALL, "--db", tmp_path / "s.db", "--html", out)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert "(1 model call)" in page and "1 model calls" not in page


def test_the_tokens_footer_only_when_a_figure_was_recorded(monkeypatch, tmp_path):
    db = tmp_path / "s.db"
    recorded = cli(monkeypatch, "show", ONE_CALL, "--db", db, width=200)
    assert "1,234→56" in recorded.stdout and FOOTER in recorded.stdout, recorded.stdout
    bare = cli(monkeypatch, "show", NO_USAGE, "--db", db, width=200)
    assert bare.exit_code == 0, bare.output
    assert not re.search(r"\d→\d", bare.stdout)  # no usage in this log: the tokens column is blank
    assert FOOTER not in bare.stdout and "tokens:" not in bare.stdout, bare.stdout
    assert "step: the model call an assistant message makes" in bare.stdout  # the rest of the footer stays


def test_quote_keeps_a_differing_value_past_the_cut_whole():
    from context_forensics.render.facts import _quote

    text = ("We went over the quarterly plan again with finance and the team leads; after a long talk "
            "the cloud spend budget is now 3,000 EUR for the rest of the year.")
    old_cut = " ".join(text.split())[:60]
    assert "3,000" not in old_cut  # the old 60-character preview lost it
    q = _quote(text, BUDGET)
    assert "3,000 EUR" in q and q.endswith("…") and len(q) < len(text)
    assert _quote("short text with 3,000 EUR", BUDGET) == "short text with 3,000 EUR"
    # a value the fact holds is no reason to keep going
    same = "x " * 40 + "the budget is 4,500 EUR as agreed, and more words follow here"
    assert _quote(same, BUDGET) == " ".join(same.split())[:60].rstrip() + "…"


@pytest.mark.parametrize("width", [80, 100, 160])
def test_a_near_miss_note_shows_the_differing_value_whole(monkeypatch, tmp_path, hashing, width):
    args = ("facts", RELEASE, "--db", tmp_path / "s.db", "--config", FACTS_CONFIG, "--model", "tiny",
            "--fact", BUDGET, "--fact", NEW_BUDGET)
    data = json.loads(cli(monkeypatch, *args, "--json").stdout)
    r = cli(monkeypatch, *args, width=width)
    assert r.exit_code == 0, r.output
    checked = 0
    for f in data["facts"]:
        for nm in f["near_misses"][:1]:
            span = " ".join((nm.get("span") or nm["chunk"]).split())
            for tok in re.findall(r"\d[\d,.]*\d|\d", span):
                if text_numbers(tok) - text_numbers(f["fact"]):  # a value the fact does not hold
                    assert re.search(rf"(?<![\d,]){re.escape(tok)}(?![\d,]|…)", r.stdout), (tok, r.stdout)
                    checked += 1
    assert checked >= 1  # 4,500 in the near miss of the 3,000 budget
    for line in r.stdout.splitlines():
        assert len(line) <= width, line


def test_import_warnings_say_one_model_call(tmp_path):
    """The importers' count warnings: "holds 1 model call", "records 1 model call", not "1 model calls"."""
    import shutil

    from helpers import parse

    traj = json.loads((FIXTURES / "mini_swe_agent" / "v2" / "owner__repo-5.traj.json").read_text())
    traj["messages"] = traj["messages"][:4]  # system, user, one assistant call, its tool result
    traj["info"]["model_stats"]["api_calls"] = 2
    path = tmp_path / "owner__repo-9.traj.json"
    path.write_text(json.dumps(traj))
    _, _, ctx = parse(path, "mini_swe_agent")
    (w,) = [w for w in ctx.warnings if "api_calls" in w]
    assert "holds 1 model call: 1 left no output" in w and w.endswith("; the step is the 1 recorded call"), w
    assert "1 model calls" not in w and "1 recorded calls" not in w

    roo = FIXTURES / "cline" / "roo_task" / "globalStorage" / "rooveterinaryinc.roo-cline" / "tasks" / "7f3c"
    task = tmp_path / "globalStorage" / "rooveterinaryinc.roo-cline" / "tasks" / "7f3c"
    shutil.copytree(roo, task)
    ui = json.loads((task / "ui_messages.json").read_text())
    first = next(i for i, x in enumerate(ui) if x.get("say") == "api_req_started")
    ui = [x for i, x in enumerate(ui) if x.get("say") != "api_req_started" or i == first]
    (task / "ui_messages.json").write_text(json.dumps(ui))
    _, _, ctx = parse(task, "cline")
    (w,) = [w for w in ctx.warnings if "paired them in order" in w]
    assert w.endswith(": ui_messages.json records 1 model call, the history 4 answers; paired them in order"), w
    assert "1 model calls" not in w
