"""OpenHands V1 events folders / JSONL (``openhands_v1``) and OpenHands 0.x trajectory exports
(``openhands_trajectory``): what the model read, recorded usage once per call, condensation as a
recorded history edit.

The corpus files (../shared/corpus, PROVENANCE.md fourth wave) were counted by hand; the fixtures
under fixtures/openhands_v1/ are hand-written from the SDK source (their README names the commit).
"""

from __future__ import annotations

import json

import pytest

from context_forensics import importers
from context_forensics.importers.base import read_head
from context_forensics.importers.openhands import OpenHands, OpenHandsTrajectory, OpenHandsV1
from context_forensics.records import KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT, read_history_edit
from helpers import FIXTURES, corpus, parse_all, replay_json

F = FIXTURES / "openhands_v1"
V1, TRAJ = OpenHandsV1(), OpenHandsTrajectory()

# corpus folder -> (messages, model calls, tool calls, tool results), counted from the event files:
# confirmation_mode: system, 3 user, 3 actions (one response each), 3 observations, 3 agent replies
V1_CORPUS = {"confirmation_mode": (13, 6, 3, 3), "creating_agent_plan": (7, 3, 2, 2)}
# trajectory export -> (messages, distinct model responses = calls with usage, prompt tokens of each in order)
TRAJ_CORPUS = {
    "basic.json": (4, [3486, 4646]),
    "basic_interactions.json": (6, [2473]),  # two agent replies without tool_call_metadata: no usage logged
    "wrong_initial_state.json": (8, [3475, 3616, 3804, 3933]),
}


@pytest.mark.parametrize("name", sorted(V1_CORPUS))
def test_v1_corpus_folders(name):
    folder = corpus(f"openhands-v1-events/OpenHands-CLI/{name}")
    assert importers.detect(folder) is V1 or importers.detect(folder).name == "openhands_v1"
    (s,), ctx = parse_all(V1, folder)
    n, calls, tool_calls, results = V1_CORPUS[name]
    m = s.messages
    assert len(m) == n and not ctx.skipped and not ctx.warnings
    assert m[0].role == "system" and m[0].text.startswith("You are OpenHands agent")
    assert [t["title"] for t in s.metadata["tools"]][:3] == ["terminal", "file_editor", "task_tracker"]
    assistant = [x for x in m if x.role == "assistant"]
    assert len(assistant) == calls == s.metadata["llm_responses"]
    assert sum(len(x.tool_calls) for x in assistant) == tool_calls
    tools = [x for x in m if x.role == "tool"]
    assert len(tools) == results
    # every tool result answers a tool call made before it
    made = set()
    for x in m:
        made.update(c.id for c in x.tool_calls)
        if x.role == "tool":
            assert x.tool_call_id in made
    assert all(x.usage is None for x in m) and s.model is None  # the events name neither
    for x in tools:  # a terminal's output as TerminalObservation.to_llm_content frames it
        if x.name == "terminal":
            assert x.text.startswith("hello world\n[The command completed with exit code 0.]\n[Current working")
            assert x.text.endswith("[Command finished with exit code 0]")
    # an action's reasoning (where the event has some) is kept as a part
    events = [json.loads(p.read_text()) for p in sorted(folder.iterdir())]
    thinking = sum(1 for e in events if e["kind"] == "ActionEvent" and e.get("reasoning_content"))
    assert thinking and sum(1 for x in assistant if any(p["type"] == "thinking" for p in x.parts)) == thinking


def test_v1_single_event_file_reads_its_folder():
    folder = corpus("openhands-v1-events/OpenHands-CLI/creating_agent_plan")
    one = sorted(folder.iterdir())[3]
    assert importers.detect(one).name == "openhands_v1"
    (s,), ctx = parse_all(V1, one)
    assert len(s.messages) == 7 and any("read the whole folder" in w for w in ctx.warnings)


@pytest.mark.parametrize("name", sorted(TRAJ_CORPUS))
def test_trajectory_exports_count_each_call_once(name):
    path = corpus(f"openhands-trajectory-export/OpenHands/{name}")
    assert importers.detect(path).name == "openhands_trajectory"
    (s,), ctx = parse_all(TRAJ, path)
    n, prompts = TRAJ_CORPUS[name]
    assert len(s.messages) == n and not ctx.warnings
    events = json.loads(path.read_text())
    responses = {e["tool_call_metadata"]["model_response"]["id"] for e in events if e.get("tool_call_metadata")}
    with_usage = [x for x in s.messages if x.usage]
    assert len(with_usage) == len(responses) == s.metadata["calls_with_usage"]
    assert [x.usage.prompt_tokens for x in with_usage] == prompts
    assert len({x.meta["response_id"] for x in with_usage}) == len(with_usage)
    # each observation follows the call that asked for it
    made = set()
    for x in s.messages:
        made.update(c.id for c in x.tool_calls)
        if x.role == "tool":
            assert x.tool_call_id in made
    assert s.messages[0].role == "user" and s.metadata["system_prompt_logged"] is False


def test_trajectory_anthropic_cache_fields_read():
    path = corpus("openhands-trajectory-export/OpenHands/wrong_initial_state.json")
    (s,), _ = parse_all(TRAJ, path)
    u = [x.usage for x in s.messages if x.usage][1]
    assert (u.prompt_tokens, u.completion_tokens, u.cache_read_tokens,
            u.cache_creation_tokens) == (3616, 111, 3471, 139)


def _check_condensed(s):
    m = s.messages
    roles = [(x.role, x.kind) for x in m]
    assert roles[:2] == [("system", "message"), ("user", "message")]
    # one response with two parallel tool calls is one assistant message
    assert [c.id for c in m[2].tool_calls] == ["toolu_a", "toolu_b"] and m[2].text.startswith("Let me look")
    marker = next(i for i, x in enumerate(m) if x.kind == KIND_HISTORY_EDIT)
    edit = read_history_edit(m[marker].meta, marker)
    assert edit.type == "condense" and edit.action == "summarized"
    assert edit.ranges == ((2, 5),)  # the action message and its two results: the four forgotten events
    assert edit.figures["forgotten_events"] == 4 and edit.figures["summary_offset"] == 2
    assert m[marker + 1].kind == KIND_COMPACTION_SUMMARY and m[marker + 1].role == "user"
    used = [x for x in m if x.usage]
    assert [x.usage.prompt_tokens for x in used] == [2050, 2440, 2190, 2300]
    assert used[0].usage.cache_creation_tokens == 2040 and used[0].usage.context_window == 200000
    assert [u["response_id"] for u in s.metadata["condenser_usage"]] == ["chatcmpl-c1"]
    assert "unattached_usage" not in s.metadata and s.metadata["condensations"] == 1
    assert s.model == "litellm_proxy/claude-sonnet-4-5-20250929"


def test_fixture_folder_condensation_and_usage():
    (s,), ctx = parse_all(V1, F / "condensed-conv")
    _check_condensed(s)
    assert s.external_id == "5d0c1f8e9a7b4c3d8e2f1a0b9c8d7e6f"  # base_state.json's id
    assert ctx.skipped == {"CondensationRequest": 1, "ConversationStateUpdateEvent": 1}
    assert V1.sidecars(F / "condensed-conv") == [F / "condensed-conv" / "base_state.json"]


def test_fixture_jsonl_reads_like_the_folder():
    path = F / "condensed-conv.events.jsonl"
    assert V1.sniff(path, read_head(path))
    (s,), ctx = parse_all(V1, path)
    _check_condensed(s)
    (f,), _ = parse_all(V1, F / "condensed-conv")
    assert [x.hash for x in s.messages] == [x.hash for x in f.messages]


def test_replay_applies_the_recorded_condensation(tmp_path):
    rep = replay_json(F / "condensed-conv", tmp_path / "c.db")
    steps = {s["step"]: s for s in rep["steps"]}
    assert steps[3]["summarized"] == steps[3]["newly_lost"] == [2, 3, 4]
    (event,) = steps[3]["events"]
    assert (event["recorded"], event["edit"], event["removed"]) == (True, "condense", 3)
    assert steps[2]["summarized"] == [] and steps[4]["counts"]["summarized"] == 3


def test_sniffers_keep_to_their_own():
    v1_file = F / "condensed-conv" / "events" / sorted(p.name for p in (F / "condensed-conv" / "events").iterdir())[0]
    traj = corpus("openhands-trajectory-export/OpenHands/basic.json")
    assert not TRAJ.sniff(v1_file, read_head(v1_file)) and not V1.sniff(traj, read_head(traj))
    own = FIXTURES / "openhands_trajectory" / "create-hello.json"  # the trajectory fixture (a fuzz seed)
    assert TRAJ.sniff(own, read_head(own)) and not V1.sniff(own, read_head(own))
    others = [p for p in FIXTURES.rglob("*.json*") if p.is_file()
              and "openhands_v1" not in p.parts and "openhands_trajectory" not in p.parts]
    assert others
    assert not [p for p in others if V1.sniff(p, read_head(p)) or TRAJ.sniff(p, read_head(p))]
    # the llm_completions importer keeps its own files and leaves these alone
    assert not OpenHands().sniff(F / "condensed-conv", b"") and not OpenHands().sniff(traj, read_head(traj))


def test_trajectory_tool_results_as_the_model_read_them(tmp_path):
    """An oh_aci edit's result is its formatted_output_and_error (the event's content is the UI's
    diff); a command's result carries its metadata lines (CmdOutputObservation.to_agent_observation).
    With them the replay of the corpus exports follows the recorded prompts to a median of 5.5 tokens
    over wrong_initial_state's 4 calls (84 with the raw content) once the unlogged system prompt is
    calibrated."""
    (s,), _ = parse_all(TRAJ, corpus("openhands-trajectory-export/OpenHands/basic.json"))
    edit = next(x for x in s.messages if x.role == "tool")
    assert edit.text == "File created successfully at: /workspace/game_2048.py"
    path = corpus("openhands-trajectory-export/OpenHands/wrong_initial_state.json")
    (s,), _ = parse_all(TRAJ, path)
    run_result = next(x for x in s.messages if x.role == "tool" and x.meta["observation"] == "run")
    assert run_result.text.endswith("[Command finished with exit code 0]") and run_result.meta["returncode"] == 0
    rep = replay_json(path, tmp_path / "c.db")
    assert rep["fidelity"]["calls"] == 4 and rep["fidelity"]["median_abs_error"] <= 10


def _claimants(path):
    head = read_head(path)
    return [imp.name for imp in importers.registry().values()
            if (imp.handles_directories or not path.is_dir()) and imp.sniff(path, head)]


def test_every_corpus_file_of_these_formats_has_one_claimant():
    v1 = corpus("openhands-v1-events")
    traj = corpus("openhands-trajectory-export")
    folders = sorted(p for p in v1.rglob("*") if p.is_dir() and any(p.glob("event-*.json")))
    assert len(folders) == 2
    for folder in folders:
        assert _claimants(folder) == ["openhands_v1"], folder
        for f in folder.iterdir():
            assert _claimants(f) == ["openhands_v1"], f
    files = sorted(traj.rglob("*.json"))
    assert len(files) == 3 and all(_claimants(f) == ["openhands_trajectory"] for f in files)
