"""mini-swe-agent / live-swe-agent *.traj.json importer."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers.base import read_head
from context_forensics.importers.mini_swe_agent import BASH_TOOL
from context_forensics.records import KIND_REASONING, KIND_SUBMISSION, Usage
from helpers import CORPUS, FIXTURES, corpus, parse

FX = FIXTURES / "mini_swe_agent"


# ------------------------------------------------------------------ fixtures


def test_v1_text_actions_usage_and_final_submission():
    fmt, (s,), ctx = parse(FX / "v1" / "owner__repo-4.traj.json")
    assert fmt == "mini_swe_agent" and not ctx.warnings
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "user", "assistant", "user",
                                            "assistant", "user"]
    a1, a2, a3 = (m for m in s.messages if m.role == "assistant")
    assert a1.usage == Usage(prompt_tokens=1354, completion_tokens=201, cache_read_tokens=0, reasoning_tokens=156)
    assert a2.usage == Usage(prompt_tokens=1500, completion_tokens=10, cache_read_tokens=1200)
    assert a3.usage == Usage(prompt_tokens=1600, completion_tokens=20)
    # the reasoning came back in extra.response only: kept as parts, flagged
    assert a1.parts == ({"type": "thinking", "text": "Thinking about x."}, {"type": "redacted_thinking", "bytes": 8})
    assert a1.meta["thinking_from_response"] is True
    assert a1.meta["request"] == {"model": "google/gemini-3-pro-preview", "temperature": 0.0}
    assert a1.model == "google/gemini-3-pro-preview" and a1.timestamp == "2025-11-18T23:43:42+00:00"
    assert s.messages[-1].meta["exit"] is True  # the Submitted message equals info.submission
    assert s.messages[-1].kind == KIND_SUBMISSION and s.messages[-1].role == "user"
    assert [m.kind for m in s.messages[:-1]] == ["message"] * 7
    assert s.task == s.external_id == "owner__repo-4"
    assert s.outcome == "failure"  # flat report.json with "resolved": false
    assert s.started_at == "2025-11-18T23:43:42+00:00"
    assert "unrecorded_calls" not in s.metadata  # api_calls 3 == 3 assistant messages
    assert [p.name for p in importers.get("mini_swe_agent").sidecars(FX / "v1" / "owner__repo-4.traj.json")] == [
        "report.json"]


def test_v2_tool_calls_exit_and_dropped_call():
    _, (s,), ctx = parse(FX / "v2" / "owner__repo-5.traj.json")
    assert not ctx.skipped  # the exit record is kept (it used to be skipped)
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "tool", "user", "assistant", "tool"]
    call, result, err, last = s.messages[2], s.messages[3], s.messages[4], s.messages[5]
    # role: exit holds the output of the last call's submit command: that call's result
    exit_ = s.messages[6]
    assert (exit_.kind, exit_.text, exit_.tool_call_id, exit_.name) == (KIND_SUBMISSION, "diff", "toolu_2", "bash")
    assert exit_.meta == {"index": 6, "exit": True, "source_role": "exit", "exit_status": "Submitted"}
    (w,) = ctx.warnings
    assert w.endswith("info.model_stats.api_calls is 4 but messages[] holds 2 model calls: 2 left no output in "
                      "the log (1 format-error replies of the harness stand for them); the steps are the 2 "
                      "recorded calls")
    assert call.text == "" and call.tool_calls[0].name == "bash" and call.tool_calls[0].id == "toolu_1"
    assert call.parts == ({"type": "thinking", "text": "Let me list."},)  # thinking_blocks win over reasoning_content
    # litellm Anthropic: prompt_tokens 2000 >= read 0 + write 1990, so it already holds everything
    assert call.usage == Usage(prompt_tokens=2000, completion_tokens=50, cache_read_tokens=0,
                               cache_creation_tokens=1990)
    assert call.timestamp == "2026-03-09T16:28:44.500000+00:00"
    assert call.meta["request"]["max_tokens"] == 4096 and call.meta["request"]["tools_count"] == 1
    assert result.tool_call_id == "toolu_1" and result.name == "bash" and result.meta["returncode"] == 0
    assert err.usage is None
    assert err.meta["dropped_call"] == {"usage": {"prompt_tokens": 2100, "completion_tokens": 30}}
    assert last.usage == Usage(prompt_tokens=2150, completion_tokens=40, cache_read_tokens=1990,
                               cache_creation_tokens=150)
    assert s.metadata["unrecorded_calls"] == 2  # api_calls 4, 2 assistant messages recorded
    assert s.metadata["tools"] == [BASH_TOOL] and s.metadata["tools_inferred"] is True
    assert (s.task, s.outcome) == ("owner__repo-5", "success")


def test_responses_api_items():
    _, (s,), ctx = parse(FX / "responses" / "owner__repo-6.traj.json")
    assert [(m.role, m.kind) for m in s.messages] == [
        ("system", "message"), ("user", "message"), ("assistant", "message"), ("assistant", KIND_REASONING),
        ("tool", "message"), ("user", KIND_SUBMISSION)]  # the call's reasoning after its answer: its output
    answer, reasoning, result, exit_ = s.messages[2:]
    # Submitted with an empty submission, and the last call already answered: a user record
    assert exit_.text == "" and exit_.tool_call_id is None and exit_.meta["exit_status"] == "Submitted"
    assert reasoning.text == "Plan: run ls." and reasoning.parts == ({"type": "redacted_thinking", "bytes": 4},)
    assert answer.text == "Running ls." and answer.tool_calls[0].id == "fc_1"
    assert answer.usage == Usage(prompt_tokens=100, completion_tokens=40, cache_read_tokens=25, reasoning_tokens=30)
    assert result.tool_call_id == "fc_1" and result.name == "bash"
    assert s.task == "owner__repo-6"  # from the file stem: no instance_id key
    assert s.metadata["tools"][0]["name"] == "bash"  # the Responses API (flat) schema


def test_legacy_unversioned_file():
    fmt, (s,), _ = parse(FX / "legacy" / "owner__repo-7.traj.json")
    assert fmt == "mini_swe_agent"
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "user"]
    assert all(m.usage is None for m in s.messages)
    assert s.outcome == "unknown" and s.metadata["exit_status"] == "LimitsExceeded"


def test_broken_file_raises_input_error():
    with pytest.raises(InputError):
        parse(FX / "broken" / "owner__repo-8.traj.json")


# ------------------------------------------------------------------ corpus


def test_corpus_v1_gemini_astropy():
    path = corpus("swebench-pairs/astropy__astropy-14365/mini-swe-agent_gemini-3-pro/astropy__astropy-14365.traj.json")
    _, (s,), ctx = parse(path)
    # messages[]: 44 = 1 system, 22 user (incl. the final submission), 21 assistant with extra.response.usage
    assert Counter(m.role for m in s.messages) == {"system": 1, "user": 22, "assistant": 21}
    assistants = [m for m in s.messages if m.role == "assistant"]
    assert all(m.usage is not None for m in assistants)
    # first and last usage, read from extra.response.usage in the file
    assert assistants[0].usage == Usage(prompt_tokens=1813, completion_tokens=115, cache_read_tokens=0,
                                        reasoning_tokens=78)
    assert assistants[-1].usage == Usage(prompt_tokens=18781, completion_tokens=89, cache_read_tokens=18292,
                                         reasoning_tokens=0)
    # only the first response carries reasoning text (choices[0].message.reasoning)
    assert sum(1 for m in assistants if any(p["type"] == "thinking" for p in m.parts)) == 1
    assert s.model == "google/gemini-3-pro-preview"
    assert s.metadata["mini_version"] == "1.15.0" and s.metadata["model_stats"]["api_calls"] == 21
    assert s.messages[-1].meta["exit"] is True
    assert s.messages[-1].kind == KIND_SUBMISSION
    assert s.messages[-1].text == json.loads(path.read_text())["info"]["submission"]  # the patch, whole


def test_corpus_v2_live_gpt5_mini_format_errors():
    path = corpus("swebench-pairs/django__django-15127/live-swe-agent_gpt-5-mini/django__django-15127.traj.json")
    _, (s,), ctx = parse(path)
    # 136 raw messages: system 1, user 77 (1 task + 76 FormatError), assistant 29, tool 28, exit 1
    # (the submission: the last call's result; it used to be skipped)
    assert not ctx.skipped
    assert Counter(m.role for m in s.messages) == {"system": 1, "user": 77, "assistant": 29, "tool": 29}
    assert sum(1 for m in s.messages if m.meta.get("interrupt_type") == "FormatError") == 76
    assert s.metadata["unrecorded_calls"] == 76  # api_calls 105 - 29 recorded
    assistants = [m for m in s.messages if m.role == "assistant"]
    assert all(m.usage and len(m.tool_calls) == 1 for m in assistants)
    # raw message 2 and raw message 10 (the 4th assistant) usage
    assert assistants[0].usage == Usage(prompt_tokens=1551, completion_tokens=25, cache_read_tokens=0,
                                        reasoning_tokens=0)
    assert assistants[3].usage == Usage(prompt_tokens=4452, completion_tokens=678, cache_read_tokens=3840,
                                        reasoning_tokens=640)
    assert sum(m.usage.completion_tokens for m in assistants) == 11914
    assert sum(m.usage.prompt_tokens for m in assistants) == 388166
    assert assistants[0].model == "gpt-5-mini-2025-08-07" and s.model == "openai/gpt-5-mini"
    tools = [m for m in s.messages if m.role == "tool"]
    call_ids = [m.tool_calls[0].id for m in assistants]
    assert [t.tool_call_id for t in tools] == call_ids and all(t.name == "bash" for t in tools)
    assert [t.kind for t in tools] == ["message"] * 28 + [KIND_SUBMISSION]
    assert tools[-1].text == json.loads(path.read_text())["info"]["submission"]


def test_corpus_v2_live_11815_counts():
    path = corpus("swebench-pairs/django__django-11815/live-swe-agent_gpt-5-mini/django__django-11815.traj.json")
    _, (s,), _ = parse(path)
    # 64 raw: assistant 28, tool 27, user 7, system 1, exit 1 (kept as the last call's result)
    assert Counter(m.role for m in s.messages) == {"assistant": 28, "tool": 28, "user": 7, "system": 1}
    assert s.metadata["unrecorded_calls"] == 34 - 28


def test_sniff_claims_only_mini_swe_agent_files():
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    imp = importers.get("mini_swe_agent")
    claims = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*")
                    if p.is_file() and imp.sniff(p, read_head(p)))
    expected = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.glob("swebench-pairs/*/*/*.traj.json"))
    assert len(expected) == 8
    assert claims == expected


def test_anthropic_content_blocks_are_split(tmp_path):
    traj = tmp_path / "a__b-1.traj.json"
    traj.write_text("""{"trajectory_format": "mini-swe-agent-1.1", "info": {"mini_version": "2.0.0"},
      "messages": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Run it."},
          {"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"command": "ls"}}],
         "extra": {"response": {"usage": {"input_tokens": 5, "output_tokens": 9, "cache_read_input_tokens": 100,
                                          "cache_creation_input_tokens": 20}}}},
        {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "tu_1", "content": [{"type": "text", "text": "a.py"}]},
          {"type": "text", "text": "keep going"}]}]}""")
    _, (s,), _ = parse(traj)
    assert [(m.role, m.text) for m in s.messages] == [
        ("user", "task"), ("assistant", "Run it."), ("tool", "a.py"), ("user", "keep going")]
    call, result = s.messages[1], s.messages[2]
    assert call.tool_calls[0].arguments == '{"command": "ls"}' and call.parts == ({"type": "thinking", "text": "hmm"},)
    assert call.usage == Usage(prompt_tokens=125, completion_tokens=9, cache_read_tokens=100, cache_creation_tokens=20)
    assert result.tool_call_id == "tu_1" and result.name == "bash"


# Per corpus trajectory: (steps = assistant messages, info.model_stats.api_calls); live-swe-agent
# (gpt-5-mini) calls answered with a format error are in api_calls only and said in a warning.
STEPS = {
    "astropy__astropy-14365/mini-swe-agent_gemini-3-pro": (21, 21),
    "django__django-11206/mini-swe-agent_gemini-3-pro": (24, 24),
    "django__django-11276/mini-swe-agent_gemini-3-pro": (32, 32),
    "django__django-11815/mini-swe-agent_gemini-3-pro": (27, 27),
    "django__django-15127/mini-swe-agent_gemini-3-pro": (18, 18),
    "django__django-11276/live-swe-agent_gpt-5-mini": (15, 21),
    "django__django-11815/live-swe-agent_gpt-5-mini": (28, 34),
    "django__django-15127/live-swe-agent_gpt-5-mini": (29, 105),
}


@pytest.mark.parametrize("rel", sorted(STEPS))
def test_corpus_submission_is_kept_and_steps_match_recorded_calls(rel):
    instance = rel.split("/")[0]
    path = corpus(f"swebench-pairs/{rel}/{instance}.traj.json")
    data = json.loads(path.read_text())
    _, (s,), ctx = parse(path)
    steps, api_calls = STEPS[rel]
    assert data["info"]["model_stats"]["api_calls"] == api_calls
    assert sum(1 for m in data["messages"] if m.get("role") == "assistant") == steps  # read from the file
    assert sum(1 for m in s.messages if m.role == "assistant" and m.kind == "message") == steps
    (submission,) = [m for m in s.messages if m.kind == KIND_SUBMISSION]
    assert submission is s.messages[-1] and submission.text == data["info"]["submission"]
    assert not ctx.skipped  # nothing of the file is left out
    if steps < api_calls:
        (w,) = ctx.warnings
        fe = sum(1 for m in data["messages"] if (m.get("extra") or {}).get("interrupt_type") == "FormatError")
        assert f"{api_calls - steps} left no output in the log ({fe} format-error" in w
        assert s.metadata["unrecorded_calls"] == api_calls - steps == fe
    else:
        assert not ctx.warnings and "unrecorded_calls" not in s.metadata
