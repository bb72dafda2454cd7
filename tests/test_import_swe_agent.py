"""SWE-agent .traj importer, the SWE-bench verdict helper, and the swebench-pairs labels."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers._agent_calls import usage_from
from context_forensics.importers._swebench import find_verdict, swebench_verdict
from context_forensics.importers.base import read_head
from context_forensics.records import KIND_SUBMISSION, Usage
from helpers import CORPUS, FIXTURES, corpus, parse

FX = FIXTURES / "swe_agent"
CLASSIC = FX / "gpt4__dev-easy__default__t-0.00__p-0.95__c-3.00__install-1"


# ------------------------------------------------------------------ fixtures


def test_classic_history_demo_and_subroutine():
    fmt, sessions, ctx = parse(CLASSIC / "owner__repo-1.traj")
    assert fmt == "swe_agent"
    assert not ctx.warnings
    main, sub = sessions
    # history has 9 entries: 6 of agent "primary", 3 of the "edit_subroutine" agent; the history
    # ends with the submit call, and the submit step's observation (the diff) follows it
    assert [m.role for m in main.messages] == ["system", "user", "user", "assistant", "user", "assistant", "user"]
    assert [m.kind for m in main.messages].count(KIND_SUBMISSION) == 1
    submission = main.messages[-1]
    assert submission.kind == KIND_SUBMISSION and submission.text == "diff --git a/a.py b/a.py\n"
    assert submission.meta == {"exit": True, "exit_status": "submitted", "from": "trajectory"}
    assert main.messages[1].meta["is_demo"] is True
    assert not any(m.meta.get("is_demo") for m in main.messages[2:])
    assert main.metadata["demo_messages"] == 1
    assert main.external_id == main.task == "owner__repo-1"  # all_preds.jsonl + file stem
    # the classic run-folder name in model_name_or_path says "gpt4": SWE-agent 0.x's own shortcut
    # for gpt-4-1106-preview (its models.py SHORTCUTS), the model it called
    assert main.model == "gpt-4-1106-preview" and main.metadata["model_shortcut"] == "gpt4"
    assert main.outcome == "success"  # report.json {"owner__repo-1": {"resolved": true}}
    assert main.metadata["model_stats"]["tokens_sent"] == 1200
    assert all(m.usage is None for m in main.messages)  # SWE-agent has no per-call usage
    assert [m.text for m in sub.messages] == ["You are the edit subroutine.", "Edit a.py", "edited"]
    assert sub.parent_external_id == "owner__repo-1"
    assert sub.external_id == "owner__repo-1:edit_subroutine"
    sidecars = {p.name for p in importers.get("swe_agent").sidecars(CLASSIC / "owner__repo-1.traj")}
    assert sidecars == {"all_preds.jsonl", "report.json"}


def test_classic_model_shortcuts_are_the_models_swe_agent_called():
    """SWE-agent 0.x ran `--model_name gpt4` and called SHORTCUTS["gpt4"] = gpt-4-1106-preview
    (sweagent/agent/models.py, OpenAIModel and AnthropicModel); the run folder and args.yaml keep
    the shortcut. A name that is no shortcut is the model's own."""
    from context_forensics.importers.swe_agent.sidecars import classic_model

    assert classic_model("gpt4") == "gpt-4-1106-preview"
    assert classic_model("gpt4-legacy") == "gpt-4-0613"
    assert classic_model("gpt4o") == "gpt-4o-2024-05-13"
    assert classic_model("claude-sonnet-3.5") == "claude-3-5-sonnet-20240620"
    assert classic_model("gpt-4o") == "gpt-4o" and classic_model("azure:gpt4") == "azure:gpt4"
    assert classic_model(None) is None


def test_v1_function_calling_tools_images_thinking():
    fmt, (s,), ctx = parse(FX / "v1" / "owner__repo-2" / "owner__repo-2.traj")
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    user, call, result, last = s.messages[1], s.messages[2], s.messages[3], s.messages[4]
    # the submit call's result is not in history[] nor trajectory[]: info.submission answers it
    submitted = s.messages[5]
    assert (submitted.kind, submitted.tool_call_id, submitted.name, submitted.text) == (
        KIND_SUBMISSION, "call_2", "submit", "diff")
    assert submitted.meta["from"] == "info.submission"
    assert user.text == "Fix the bug shown here:"
    assert user.parts == ({"type": "image", "source": "base64", "bytes": 75, "media_type": "image/png",
                           "width": 2, "height": 3},)
    assert call.tool_calls[0].name == "bash" and call.tool_calls[0].id == "call_1"
    assert call.tool_calls[0].arguments == '{"command": "ls"}'
    assert call.parts == ({"type": "thinking", "text": "I should list files."},)
    assert result.tool_call_id == "call_1" and result.name == "bash" and result.meta["cache_control"]
    assert last.tool_calls[0].name == "submit"
    # replay_config is a JSON string: model + problem statement id
    assert s.model == "claude-sonnet-4" and s.task == "owner__repo-2"
    # results.json one level up (the 1.x <run>/<id>/<id>.traj layout) lists it as unresolved
    assert s.outcome == "failure"
    assert s.metadata["history_processors"] == [{"type": "cache_control", "last_n_messages": 2}]
    assert s.metadata["steps_have_query"] is True


def test_retry_agent_attempts_become_child_sessions():
    _, sessions, _ = parse(FX / "retry" / "owner__repo-3.traj")
    assert [s.external_id for s in sessions] == ["owner__repo-3", "owner__repo-3#attempt0"]
    best, other = sessions
    assert best.messages[-1].text == "attempt 1 answer"  # top level is the best attempt (index 1)
    assert other.messages[-1].text == "attempt 0 answer" and other.parent_external_id == "owner__repo-3"
    assert best.metadata["attempts"] == 2 and best.metadata["best_attempt_idx"] == 1


def test_legacy_trajectory_only_is_rebuilt_with_a_warning():
    _, (s,), ctx = parse(FX / "legacy_trajectory_only.traj", "swe_agent")
    assert [m.role for m in s.messages] == ["assistant", "user", "assistant", "user"]
    assert s.messages[0].text == "I will list.\n\n```\nls\n```"  # no response: thought + action
    assert s.messages[2].text == "Submit now.\n```\nsubmit\n```"  # response when recorded
    assert s.metadata["source"] == "trajectory"
    assert any("no history[]" in w for w in ctx.warnings)


@pytest.mark.parametrize("name", ["broken.traj", "no_history.traj"])
def test_bad_files_raise_input_error(name):
    with pytest.raises(InputError):
        parse(FX / name, "swe_agent")


# ------------------------------------------------------------------ corpus


def test_corpus_pydicom_classic_gpt4_run():
    path = corpus("swe-agent-traj/sweagent-testdata/pydicom__pydicom-1458.traj")
    _, (s,), ctx = parse(path)
    # history[]: 26 entries, all agent "primary": 1 system, 13 user (1 is_demo), 12 assistant;
    # then the submit step's observation from trajectory[]: the 803-character diff
    assert Counter(m.role for m in s.messages) == {"system": 1, "user": 14, "assistant": 12}
    submission = s.messages[-1]
    assert submission.kind == KIND_SUBMISSION and submission.meta["from"] == "trajectory"
    assert submission.text == json.loads(path.read_text())["trajectory"][-1]["observation"]
    assert submission.text.strip() == json.loads(path.read_text())["info"]["submission"].strip()
    steps = sum(1 for m in s.messages if m.role == "assistant" and m.kind == "message")
    assert steps == s.metadata["model_stats"]["api_calls"] == 12
    assert sum(1 for m in s.messages if m.meta.get("is_demo")) == 1
    assert s.task == "pydicom__pydicom-1458" and s.outcome == "unknown"
    # model_name_or_path "gpt4__swe-bench-dev-easy_first_only__..." in all_preds: SWE-agent 0.x's
    # shortcut for gpt-4-1106-preview; the log's cost is that model's price in SWE-agent's table
    # ($1e-5 per prompt token, $3e-5 per completion token): 122,612 and 1,369 tokens cost 1.26719
    assert s.model == "gpt-4-1106-preview" and s.metadata["model_shortcut"] == "gpt4"
    assert s.metadata["model_stats"] == {"total_cost": 1.26719, "instance_cost": 1.26719,
                                         "tokens_sent": 122612, "tokens_received": 1369, "api_calls": 12}
    assert round(122612 * 1e-5 + 1369 * 3e-5, 5) == s.metadata["model_stats"]["instance_cost"]
    assert s.metadata["steps"] == 12 and s.metadata["exit_status"] == "submitted"
    sidecars = importers.get("swe_agent").sidecars(path)
    assert [p.name for p in sidecars] == ["pydicom__pydicom-1458.all_preds.jsonl"]


def test_corpus_pydicom_windows_add_up_to_the_tokens_sent_it_records(tmp_path):
    """SWE-agent 0.x adds each call's usage.prompt_tokens to model_stats.tokens_sent. Replayed as
    gpt-4-1106-preview (what "gpt4" called: cl100k_base, exact), the 12 rebuilt windows of the
    pydicom run add up to its tokens_sent, 122,612, to the token: history[] is what was sent.
    Before, "gpt4" was an unknown model: an assumed 128,000-token window, the approx tokenizer
    (125,519 in all, +2.4%), and explain's verdict "unknown: the model is not known"."""
    import context_forensics as ctxf

    path = corpus("swe-agent-traj/sweagent-testdata/pydicom__pydicom-1458.traj")
    rep = ctxf.replay(str(path), db=tmp_path / "s.db").to_dict()
    r = rep["replays"][0]
    assert r["assumed"] is None and r["tokenizer"] == "cl100k_base" and r["limit"] == 128_000
    sent = rep["session"]["metadata"]["model_stats"]["tokens_sent"]
    assert sum(s["window_tokens"] for s in r["steps"]) == sent == 122_612


def test_corpus_function_calling_demo_tool_names():
    _, (s,), _ = parse(corpus("swe-agent-traj/sweagent-demos/function_calling_simple.traj"))
    # 12 history entries: system, user, then 5 x (assistant with one tool call, tool result)
    assert [m.role for m in s.messages] == ["system", "user"] + ["assistant", "tool"] * 5
    tools = [m for m in s.messages if m.role == "tool"]
    assert [m.name for m in tools] == ["find_file", "open", "edit", "bash", "submit"]
    # the submit call's result, already in history[], is the submission (no info in this demo)
    assert [m.kind for m in tools] == ["message"] * 4 + [KIND_SUBMISSION]
    assert tools[-1].text.lstrip().startswith("diff --git a/tests/missing_colon.py")
    calls = [m.tool_calls[0] for m in s.messages if m.role == "assistant"]
    assert [t.tool_call_id for t in tools] == [c.id for c in calls]


def test_corpus_marshmallow_replay_config():
    _, (s,), _ = parse(corpus(
        "swe-agent-traj/sweagent-demos/marshmallow-code__marshmallow-1867.function_calling_replace.traj"))
    assert Counter(m.role for m in s.messages) == {"system": 1, "user": 1, "assistant": 11, "tool": 11}
    # the last tool result answers the submit call: the diff (with SWE-agent's prompt footer)
    last = s.messages[-1]
    assert last.kind == KIND_SUBMISSION and last.tool_call_id == "call_submit"
    assert s.metadata["submission"].strip() in last.text
    assert s.metadata["model_stats"]["api_calls"] == 11 == sum(1 for m in s.messages if m.role == "assistant")
    assert s.model == "gpt-4o" and s.task == "marshmallow-code__marshmallow-1867"
    assert s.metadata["history_processors"] == {"n": 5, "type": "last_n_observations"}


def test_corpus_test_repo_run():
    path = corpus("swe-agent-traj/sweagent-testdata/swe-agent__test-repo-i1.traj")
    _, (s,), ctx = parse(path)
    # history[]: 1 system, 6 user, 5 assistant (the 5th calls submit); + the submit's diff
    assert Counter(m.role for m in s.messages) == {"system": 1, "user": 7, "assistant": 5}
    assert s.metadata["model_stats"]["tokens_received"] == 326
    assert s.metadata["model_stats"]["api_calls"] == 5 == sum(1 for m in s.messages if m.role == "assistant")
    submission = s.messages[-1]
    assert submission.kind == KIND_SUBMISSION and submission.role == "user"
    assert submission.text.strip() == json.loads(path.read_text())["info"]["submission"].strip()
    assert not ctx.skipped and not ctx.warnings


# ------------------------------------------------------------------ sniffing


def _corpus_claims(name: str) -> list[str]:
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    imp = importers.get(name)
    out = []
    for p in sorted(CORPUS.rglob("*")):
        if p.is_dir() and not imp.handles_directories:
            continue
        if imp.sniff(p, read_head(p)):
            out.append(p.relative_to(CORPUS).as_posix())
    return out


def test_sniff_claims_only_swe_agent_files():
    claims = _corpus_claims("swe_agent")
    assert claims == [
        "swe-agent-traj/sweagent-demos/function_calling_simple.traj",
        "swe-agent-traj/sweagent-demos/marshmallow-code__marshmallow-1867.function_calling_replace.traj",
        "swe-agent-traj/sweagent-testdata/pydicom__pydicom-1458.traj",
        "swe-agent-traj/sweagent-testdata/swe-agent__test-repo-i1.traj",
    ]


# ------------------------------------------------------------------ verdicts


def test_verdict_shapes(tmp_path: Path):
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "report.json").write_text('{"resolved": true, "patch_exists": true}')
    assert swebench_verdict(tmp_path / "flat", "a__b-1") == ("a__b-1", "success")
    assert swebench_verdict(tmp_path / "flat") == (None, "success")

    (tmp_path / "keyed").mkdir()
    (tmp_path / "keyed" / "report.json").write_text('{"a__b-2": {"resolved": false}}')
    assert swebench_verdict(tmp_path / "keyed") == ("a__b-2", "failure")
    assert swebench_verdict(tmp_path / "keyed", "a__b-2") == ("a__b-2", "failure")
    assert swebench_verdict(tmp_path / "keyed", "x__y-9") is None  # a verdict about another instance

    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "eval_instance_a__b-3.log").write_text(
        "report: {'a__b-3': {'resolved': False}}\nResult for a__b-3: resolved: True\n")
    assert swebench_verdict(tmp_path / "log") == ("a__b-3", "success")  # the last line wins

    (tmp_path / "summary").mkdir()
    (tmp_path / "summary" / "results.json").write_text(
        '{"resolved_ids": ["a__b-4"], "completed_ids": ["a__b-4", "a__b-5"], "error_ids": ["a__b-6"]}')
    assert swebench_verdict(tmp_path / "summary", "a__b-4") == ("a__b-4", "success")
    assert swebench_verdict(tmp_path / "summary", "a__b-5") == ("a__b-5", "failure")
    assert swebench_verdict(tmp_path / "summary", "a__b-6") == ("a__b-6", "failure")
    assert swebench_verdict(tmp_path / "summary", "a__b-7") is None
    assert swebench_verdict(tmp_path / "summary") is None  # a run summary needs the instance id

    (tmp_path / "instances").mkdir()
    (tmp_path / "instances" / "results_summary.json").write_text(
        '{"instances": [{"instance_id": "a__b-8", "resolved": false}]}')
    assert swebench_verdict(tmp_path / "instances", "a__b-8") == ("a__b-8", "failure")

    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "report.json").write_text('{"resolved": tr')
    assert swebench_verdict(tmp_path / "broken") is None
    assert swebench_verdict(tmp_path / "missing") is None


# PROVENANCE.md, "SWE-bench success/failure pairs": resolved / unresolved per instance and system
PAIRS = [
    ("astropy__astropy-14365", "mini-swe-agent_gemini-3-pro", "success"),
    ("astropy__astropy-14365", "openhands-codeact_claude-3-5-sonnet", "failure"),
    ("django__django-11206", "mini-swe-agent_gemini-3-pro", "success"),
    ("django__django-11206", "openhands-codeact_claude-3-5-sonnet", "failure"),
    ("django__django-11276", "openhands-codeact_claude-3-5-sonnet", "success"),
    ("django__django-11276", "live-swe-agent_gpt-5-mini", "failure"),
    ("django__django-11276", "mini-swe-agent_gemini-3-pro", "failure"),
    ("django__django-11815", "mini-swe-agent_gemini-3-pro", "success"),
    ("django__django-11815", "live-swe-agent_gpt-5-mini", "failure"),
    ("django__django-15127", "live-swe-agent_gpt-5-mini", "success"),
    ("django__django-15127", "mini-swe-agent_gemini-3-pro", "failure"),
]


@pytest.mark.parametrize(("instance", "system", "outcome"), PAIRS, ids=[f"{i}/{s}" for i, s, _ in PAIRS])
def test_swebench_pairs_task_and_outcome(instance, system, outcome):
    folder = corpus(f"swebench-pairs/{instance}/{system}")
    if system.startswith("openhands"):
        path, expected_format = folder, "openhands"  # the system folder itself (llm_completions/ inside)
    else:
        path, expected_format = folder / f"{instance}.traj.json", "mini_swe_agent"
    fmt, sessions, ctx = parse(path)  # auto-detected
    assert fmt == expected_format
    assert len(sessions) == 1
    (s,) = sessions
    assert (s.task, s.outcome) == (instance, outcome)
    assert s.external_id == instance
    # live-swe-agent logs calls answered with a format error in api_calls only: said once
    unrecorded = [w for w in ctx.warnings if "left no output in the log" in w]
    assert len(unrecorded) == (1 if system.startswith("live") else 0) and len(ctx.warnings) == len(unrecorded)
    # the verdict file is reported as consumed, so a directory walk does not flag it
    names = {p.name for p in importers.get(fmt).sidecars(path)}
    assert names & {"report.json", f"eval_instance_{instance}.log"}


def test_swebench_pairs_cover_every_instance_and_system():
    root = corpus("swebench-pairs")
    on_disk = {(p.parent.name, p.name) for p in root.glob("*__*/*") if p.is_dir()}
    assert on_disk == {(i, s) for i, s, _ in PAIRS}


def test_corpus_openhands_eval_log_helper():
    folder = corpus("openhands-llm-completions/django__django-10973")
    assert swebench_verdict(folder) == ("django__django-10973", "success")
    assert find_verdict(folder / "llm_completions") is None  # the log is one level up


# ------------------------------------------------------------------ usage shapes


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # OpenAI chat (gpt-5-mini in live-swe-agent)
        ({"prompt_tokens": 4452, "completion_tokens": 678, "prompt_tokens_details": {"cached_tokens": 3840},
          "completion_tokens_details": {"reasoning_tokens": 640}},
         Usage(4452, 678, 3840, None, 640)),
        # litellm proxy for Anthropic: prompt_tokens already includes cache reads and writes
        ({"prompt_tokens": 7598, "completion_tokens": 381, "cache_creation_input_tokens": 6246,
          "cache_read_input_tokens": 1348, "prompt_tokens_details": {"cached_tokens": 1348}},
         Usage(7598, 381, 1348, 6246)),
        # litellm direct Anthropic: prompt_tokens = input + cache reads (writes added back)
        ({"prompt_tokens": 1400, "completion_tokens": 5, "cache_creation_input_tokens": 600,
          "cache_read_input_tokens": 1390}, Usage(2000, 5, 1390, 600)),
        # raw input_tokens reported as prompt_tokens: both cache figures added back
        ({"prompt_tokens": 10, "completion_tokens": 5, "cache_creation_input_tokens": 600,
          "cache_read_input_tokens": 1390}, Usage(2000, 5, 1390, 600)),
        # raw Anthropic
        ({"input_tokens": 10, "output_tokens": 7, "cache_creation_input_tokens": 600, "cache_read_input_tokens": 1390},
         Usage(2000, 7, 1390, 600)),
        # OpenAI Responses
        ({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 25}, "output_tokens": 40,
          "output_tokens_details": {"reasoning_tokens": 30}}, Usage(100, 40, 25, None, 30)),
        # Gemini usageMetadata: completion = candidates + thoughts
        ({"promptTokenCount": 50, "candidatesTokenCount": 10, "thoughtsTokenCount": 5, "cachedContentTokenCount": 20},
         Usage(50, 15, 20, None, 5)),
        ({"total_tokens": 5}, None),
        (None, None),
        ("junk", None),
    ],
)
def test_usage_from(raw, expected):
    assert usage_from(raw) == expected


def test_trajectory_query_fallback(tmp_path: Path):
    # a 1.x traj saved without history[]: the last step's query is what the model saw
    traj = tmp_path / "a__b-1.traj"
    traj.write_text(
        '{"trajectory": [{"action": "ls", "observation": "x", "thought": "t", "response": "Listing.",'
        ' "query": [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]}],'
        ' "info": {"exit_status": "submitted"}}')
    _, (s,), ctx = parse(traj, "swe_agent")
    assert [(m.role, m.text) for m in s.messages] == [("system", "sys"), ("user", "task"), ("assistant", "Listing.")]
    assert s.metadata["source"] == "trajectory.query"
    assert s.task == "a__b-1"  # the stem looks like an instance id


def test_the_agent_of_a_trajectory_is_swe_agent_and_its_role_is_kept(tmp_path):
    """SWE-agent names the agent inside a run ("main", "primary"): that is its role, kept as
    ``agent_role``; the session's agent, which `sessions --agent` filters on, is swe-agent (a
    store written before kept the role under ``agent``: still read as swe-agent)."""
    import context_forensics as ctxf
    from context_forensics.store.agents import agent_of

    traj = FX / "retry" / "owner__repo-3.traj"  # a retry run: one session per agent (main and its attempts)
    ing = ctxf.ingest(traj, db=tmp_path / "s.db")
    with ctxf.open_store(tmp_path / "s.db") as ws:
        rows = ws.sessions(agent="swe-agent")
    assert sorted(r["id"] for r in rows) == sorted(ing.sessions) and len(rows) == 2
    assert all(r["agent"] == "swe-agent" for r in rows)
    assert "agent" not in rows[0]["metadata"]
    assert agent_of("swe_agent", {"agent": "main"}) == "swe-agent"
    assert agent_of("cline", {"agent": "roo"}) == "roo"
