"""Compaction fidelity: each agent's preset fires where that agent's recorded compaction did.

Fixtures (tests/fixtures/compaction, written by make_fixtures.py): one small session per agent
whose recorded compaction sits where the agent's own rule puts it. The corpus tests check the
issue's targets over every automatic compaction the real logs recorded.
"""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from context_forensics.analysis.replay.compaction_fidelity import (
    check_session,
    compaction_fidelity,
    fidelity_summary,
    recorded_compactions,
)
from context_forensics.analysis.replay.engine import replay_session
from context_forensics.analysis.replay.policies import ReplayInput, get_policy
from context_forensics.analysis.replay.policies._compaction_presets import get_preset, pick_preset
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from helpers import CORPUS, FIXTURES

HERE = FIXTURES / "compaction"
FIXTURE_FILES = {"claude_code": HERE / "claude_code.jsonl", "pi": HERE / "pi" / "session.jsonl",
                 "cline": HERE / "cline" / "task"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with Store.open(tmp_path_factory.mktemp("cf") / "cf.db") as st:
        for p in FIXTURE_FILES.values():
            ingest_paths(st, [p])
        yield st


def _session(store, fmt):
    return next(s["id"] for s in store.sessions() if s["format"] == fmt)


@pytest.mark.parametrize("fmt,preset", [("claude_code", "claude_code_2_1"), ("pi", "pi_0_14"), ("cline", "cline")])
def test_preset_lands_on_the_recorded_step(store, fmt, preset):
    checks = check_session(store, _session(store, fmt))
    assert len(checks) == 1
    c = checks[0]
    assert c.preset == preset and c.automatic
    assert c.simulated_step == c.recorded.step and c.step_error == 0
    # the quantity the preset compared is the one the agent recorded (Claude Code preTokens,
    # Pi tokensBefore; Cline's previous request's usage)
    assert c.simulated_basis == "recorded usage" and c.tokens_error == 0


def test_the_version_decides(store):
    """Claude Code 2.0's rule (155k) and Pi 0.13's (after every reply) fire earlier on the same logs."""
    for fmt, older in (("claude_code", "claude_code_2_0"), ("pi", "pi_0_13")):
        c = check_session(store, _session(store, fmt), preset_for=lambda rc, o=older: (o, "test"))[0]
        assert c.simulated_step is not None and c.simulated_step < c.recorded.step, (fmt, c.to_dict())


def test_recorded_compactions_read_the_logs_figures(store):
    rc = recorded_compactions(store, _session(store, "claude_code"))[0]
    assert (rc.agent, rc.version, rc.trigger, rc.tokens_source) == ("claude_code", "2.1.39", "auto", "preTokens")
    msgs = store.messages(rc.session_id)
    assert msgs[rc.seq].message.kind == "compaction_boundary"
    steps_before = sum(1 for m in msgs[:rc.seq] if m.message.role == "assistant" and m.message.kind == "message")
    assert rc.step == steps_before + 1
    pi = recorded_compactions(store, _session(store, "pi"))[0]
    assert (pi.agent, pi.tokens_source, pi.trigger) == ("pi", "tokensBefore", "not recorded")


def test_manual_compaction_is_listed_not_counted(tmp_path):
    lines = FIXTURE_FILES["claude_code"].read_text().splitlines()
    out = []
    for line in lines:
        rec = json.loads(line)
        if rec.get("subtype") == "compact_boundary":
            rec["compactMetadata"]["trigger"] = "manual"
        out.append(json.dumps(rec))
    f = tmp_path / "manual.jsonl"
    f.write_text("\n".join(out) + "\n")
    with Store.open(tmp_path / "m.db") as st:
        ingest_paths(st, [f])
        checks = compaction_fidelity(st)
    assert [c.recorded.trigger for c in checks] == ["manual"] and not checks[0].automatic
    assert fidelity_summary(checks)["automatic"] == 0


def test_pick_preset_by_version_and_date():
    assert pick_preset("claude_code", "2.1.39")[0] == "claude_code_2_1"
    assert pick_preset("claude_code", "2.1.21")[0] == "claude_code_2_1"
    assert pick_preset("claude_code", "2.1.20")[0] == "claude_code_2_0"
    assert pick_preset("claude_code", "2.0.77")[0] == "claude_code_2_0"
    assert pick_preset("pi", None, "2025-12-08T23:22:54Z")[0] == "pi_0_13"
    assert pick_preset("pi", None, "2025-12-17T21:23:29Z")[0] == "pi_0_14"
    assert pick_preset("codex", "0.58.0")[0] == "codex"
    assert pick_preset("openhands", None)[0] == "generic"
    assert get_preset("claude_code").name == "claude_code_2_1" and get_preset("pi").name == "pi_0_14"
    # thresholds on a 200k window, from the agents' sources
    assert get_preset("claude_code_2_1").threshold(200_000, 200_000) == 167_000
    assert get_preset("pi_0_14").threshold(200_000, 200_000) == 183_616
    assert get_preset("cline").threshold(200_000, 200_000) == 160_000
    assert get_preset("cline").threshold(128_000, 128_000) == 98_000
    assert get_preset("inspect_trim").threshold(100_000, 90_000) == 90_000


def test_replay_with_preset_auto_says_which(store):
    rep = replay_session(store, _session(store, "claude_code"), policy="auto_compaction",
                         params={"preset": "auto"}, use_cache=False)
    assert rep.params["preset"] == "claude_code_2_1"
    assert "Claude Code 2.1.39" in rep.params["preset_picked"]
    rc = recorded_compactions(store, _session(store, "claude_code"))[0]
    assert rep.summary["compaction_steps"][0] == rc.step


def _inp(roles, tokens, limit, groups=None):
    n = len(roles)
    steps = [i for i, r in enumerate(roles) if r == "assistant"]
    return ReplayInput(tokens=np.array(tokens, dtype=np.int64), roles=tuple(roles), kinds=("message",) * n,
                       group=np.array(groups if groups is not None else list(range(n)), dtype=np.int64),
                       steps=np.array(steps, dtype=np.int64), limit=limit)


def test_inspect_edit_clears_all_but_the_newest_three_tool_results():
    roles, groups = ["user"], [0]
    for k in range(5):  # five tool uses: assistant call + its result
        roles += ["assistant", "tool"]
        groups += [len(roles) - 2, len(roles) - 2]
    roles += ["assistant"]
    groups += [len(roles) - 1]
    inp = _inp(roles, [10] + [5, 30] * 5 + [0], 200, groups)
    res, states = get_policy("auto_compaction").run(inp, {"preset": "inspect_edit"})
    ev = [e for r in res for e in r.events if e["type"] == "compaction"]
    assert ev and ev[0]["action"] == "clear_tool_results" and ev[0]["threshold"] == 180
    tools = [i for i, r in enumerate(roles) if r == "tool"]
    assert [int(states[i]) for i in tools] == [2, 2, 0, 0, 0]  # CLEARED, CLEARED, then KEPT


def test_inspect_trim_keeps_the_prefix_and_the_newest_eighty_percent():
    roles = ["system", "user"] + ["assistant", "user"] * 10 + ["assistant"]
    inp = _inp(roles, [5, 5] + [10, 10] * 10 + [0], 200)
    res, states = get_policy("auto_compaction").run(inp, {"preset": "inspect_trim"})
    last = res[-1]
    assert int(states[0]) == 0 and int(states[1]) == 0  # the prefix stays
    conv = list(range(2, len(roles) - 1))
    gone = [i for i in conv if int(states[i]) == 1]
    assert gone == conv[:len(gone)] and 0 < len(gone) <= len(conv) // 5 + 1  # the oldest fifth or so
    assert last.window_tokens <= 200


def test_cline_truncation_keeps_the_first_pair_and_half_the_rest():
    roles = ["user", "assistant"] * 10 + ["user", "assistant"]
    inp = _inp(roles, [10] * 21 + [0], 215)
    res, states = get_policy("auto_compaction").run(inp, {"preset": "cline"})
    ev = next(e for r in res for e in r.events if e["type"] == "compaction")
    assert ev["action"] == "truncate" and ev["threshold"] == int(max(215 - 40_000, 215 * 0.8))
    first = next(r for r in res if r.events)
    end = int(inp.steps[first.step - 1])
    assert int(states[0]) == 0 and int(states[1]) == 0  # the first user–assistant pair stays
    removed = [i for i in range(2, end) if int(states[i]) == 1]
    assert removed and removed == list(range(2, 2 + len(removed))) and len(removed) % 2 == 0


# -- the real corpus: every automatic compaction it recorded

@pytest.fixture(scope="module")
def corpus_checks(tmp_path_factory):
    folders = [CORPUS / "claude-code-jsonl", CORPUS / "pi", CORPUS / "cline", CORPUS / "codex-rollout-jsonl",
               CORPUS / "gemini-cli"]
    if not all(f.exists() for f in folders[:3]):
        pytest.skip("corpus not available")
    with Store.open(tmp_path_factory.mktemp("cfc") / "corpus.db") as st:
        ingest_paths(st, [f for f in folders if f.exists()], recursive=True)
        yield compaction_fidelity(st)


def test_corpus_compactions_found(corpus_checks):
    agents = {c.recorded.agent for c in corpus_checks}
    assert {"claude_code", "pi", "cline"} <= agents
    manual = [c for c in corpus_checks if c.recorded.trigger == "manual"]
    assert manual and not any(c.automatic for c in manual)


def test_corpus_median_step_error_is_zero(corpus_checks):
    errs = [c.step_error for c in corpus_checks if c.automatic]
    assert errs and None not in errs
    assert statistics.median(errs) == 0
    # the quantity compared is the agent's own wherever the preset fired on the recorded step
    for c in corpus_checks:
        if c.automatic and c.step_error == 0:
            assert c.tokens_error == 0, c.to_dict()


def test_corpus_cline_truncations_land_on_the_recorded_step(corpus_checks):
    """Cline's four truncations, with its duplicate-file-read optimisation rebuilt from the task
    folder (_cline_context): request 27 is over the limit but its rewrites save 35.29%, so the
    truncation comes at 33 as recorded; request 52's saving is 25.85% (a pasted image counts)."""
    cline = [c for c in corpus_checks if c.recorded.agent == "cline" and c.automatic]
    assert [c.recorded.step for c in cline] == [18, 33, 39, 52]
    assert [(c.step_error, c.tokens_error) for c in cline] == [(0, 0)] * 4, [c.to_dict() for c in cline]


@pytest.mark.xfail(strict=True, reason=(
    "Pi's compaction at step 221 of pi-mono session.jsonl is not reproduced. Pi's rule from a38e6190 through "
    "e7097d91 (0.22.5, the build before d5dde00d, which was committed with this session) fires at the agent_end "
    "of step 212 (calculateContextTokens = totalTokens 183,629 > 200,000 - 16,384). The log records no "
    "compaction there: the next prompt came 12.4 s later, while an auto-compaction disables submit "
    "(interactive-mode.ts auto_compaction_start) and takes 21-24 s on these sessions, so it was most likely "
    "cancelled with Esc, which Pi writes nowhere. The rule's next firing is step 221 (214-218 end in the "
    "aborted 219, skipped), but a cancelled compaction cannot be told from the log: left as a miss"))
def test_corpus_no_compaction_off_by_more_than_two_steps(corpus_checks):
    off = [c.to_dict() for c in corpus_checks if c.automatic and (c.step_error is None or abs(c.step_error) > 2)]
    assert off == []


def test_gemini_cli_threshold_follows_its_release():
    assert [pick_preset("gemini_cli", v)[0] for v in ("0.1.9", "0.12.0", "0.13.0", "0.17.1", "0.18.0", "0.30.0")] == [
        "gemini_cli_0_1", "gemini_cli_0_1", "gemini_cli_0_13", "gemini_cli_0_17", "gemini_cli_0_18", "gemini_cli_0_18"]
    assert pick_preset("gemini_cli", None, "2025-11-15T08:00:00Z")[0] == "gemini_cli_0_17"
    assert [get_preset(n).threshold(1_000_000, 1_000_000) for n in ("gemini_cli_0_1",
                                                                    "gemini_cli_0_13", "gemini_cli")] \
        == [700_000, 200_000, 500_000]


def test_gemini_cli_compares_the_last_prompt_and_keeps_the_newest_thirty_percent():
    roles = ["user", "assistant"] * 10 + ["user", "assistant"]
    inp = _inp(roles, [10] * 21 + [0], 100)
    inp = ReplayInput(**{**inp.__dict__, "recorded_prompt": tuple(10 + 20 * k for k in range(11)),
                         "answered": (True,) * 11, "recorded_output": (10,) * 11})
    res, states = get_policy("auto_compaction").run(inp, {"preset": "gemini_cli", "summary_tokens": 5})
    ev = next(e for r in res for e in r.events if e["type"] == "compaction")
    # the previous call's prompt alone (no reply added) reaches 0.5 × 100
    assert ev["threshold"] == 50 and ev["trigger_tokens"] == 50 and ev["trigger_basis"] == "recorded usage"
    step = next(r.step for r in res if r.events)
    _, states = get_policy("auto_compaction").run(inp, {"preset": "gemini_cli", "summary_tokens": 5}, upto=step)
    kept = [i for i in range(int(inp.steps[step - 1])) if int(states[i]) == 0]
    assert kept and kept == list(range(kept[0], int(inp.steps[step - 1])))  # a recent suffix stays verbatim


def test_roo_condense_keeps_the_first_message_and_the_last_three():
    assert get_preset("roo").threshold(200_000, 200_000) == 171_808  # 0.9 × 200k − 8,192
    roles = ["user", "assistant"] * 10 + ["user", "assistant"]
    inp = _inp(roles, [10] * 21 + [0], 200)
    res, _ = get_policy("auto_compaction").run(inp, {"preset": "roo", "summary_tokens": 5})
    first = next(r for r in res if r.events)
    _, states = get_policy("auto_compaction").run(inp, {"preset": "roo", "summary_tokens": 5}, upto=first.step)
    end = int(inp.steps[first.step - 1])
    assert int(states[0]) == 0  # the first message
    assert [int(states[i]) for i in range(end - 3, end)] == [0, 0, 0]  # the last three
    assert all(int(states[i]) == 3 for i in range(1, end - 3))  # the rest summarized


def test_codex_fires_at_ninety_percent_of_the_input_window():
    # gpt-5-codex: 400k window, 128k output: Codex's context_window is 272,000 and it compacts at 244,800
    assert get_preset("codex").threshold(400_000, 272_000) == 244_800


def test_an_agents_undated_preset_follows_the_sessions_version(store, tmp_path):
    # claude_code on a Claude Code 2.0 session is that version's rule, said so
    lines = [json.loads(x) for x in FIXTURE_FILES["claude_code"].read_text().splitlines()]
    f = tmp_path / "old.jsonl"
    f.write_text("".join(json.dumps({**r, "version": "2.0.50"} if "version" in r else r) + "\n" for r in lines))
    with Store.open(tmp_path / "o.db") as st:
        ingest_paths(st, [f])
        sid = st.sessions()[0]["id"]
        rep = replay_session(st, sid, policy="auto_compaction", params={"preset": "claude_code"}, use_cache=False)
        assert rep.params["preset"] == "claude_code_2_0" and "2.0.50" in rep.params["preset_picked"]
        named = replay_session(st, sid, policy="auto_compaction", params={"preset": "claude_code_2_1"}, use_cache=False)
        assert named.params["preset"] == "claude_code_2_1" and named.params["preset_picked"] is None


def test_cline_preset_says_when_the_task_folder_it_rebuilds_from_is_gone(tmp_path):
    """The 30% rule is rebuilt from the task folder; a session whose folder is gone is replayed
    without it, and the preset line says so instead of silently dropping the check."""
    from context_forensics.analysis.replay.policies.auto_compaction import AutoCompaction

    pol = AutoCompaction()
    gone = str(tmp_path / "moved-away")
    for asked in ("cline", "auto"):
        p = pol.for_session(pol.params({"preset": asked}), {"format": "cline", "source": gone})
        assert p["cline_task"] is None
        assert "not modelled" in p["preset_picked"] and gone in p["preset_picked"]
    there = tmp_path / "task"
    there.mkdir()
    (there / "ui_messages.json").write_text("[]")
    p = pol.for_session(pol.params({"preset": "cline"}), {"format": "cline", "source": str(there)})
    assert p["cline_task"] == str(there) and "not modelled" not in (p.get("preset_picked") or "")


def test_a_preset_whose_trigger_is_below_zero_compacts_only_when_the_window_would_not_fit(monkeypatch, tmp_path):
    """claude_code reserves 20-32k and a 13k buffer: on an 8k model its trigger is negative, and
    compacting at every call would be no what-if at all. It compacts when the window would not
    fit the budget instead, and the event says why."""
    from helpers import FIXTURES, cli

    case = FIXTURES / "policies" / "constraint_lost.openai.json"
    r = cli(monkeypatch, "replay", case, "--model", "gemma-7b", "--policy", "auto_compaction",
            "--db", tmp_path / "s.db", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)["replays"][0]
    events = [(st["step"], e) for st in rep["steps"] for e in st["events"] if e["type"] == "compaction"]
    assert events, "the history outgrows gemma-7b's budget: a compaction is due"
    for step, e in events:
        assert e["threshold"] == rep["budget"] and "below zero" in e["note"]
        assert e["tokens_before"] > rep["budget"]  # it fired because the window would not fit
    assert events[0][0] > 1


def test_a_gemini_cli_older_than_every_sourced_release_says_so():
    """It took the "no version or date" branch and said so of a session that recorded 0.1.5."""
    from context_forensics.analysis.replay.policies._compaction_presets import pick_preset

    name, why = pick_preset("gemini_cli", "0.1.5")
    assert name == "gemini_cli_0_1" and "before 0.1.9 no preset is sourced" in why
