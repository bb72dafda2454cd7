"""Multi-agent group chats (``group_chat``): each agent a named speaker, the Who&When labels kept
for comparison with explain, and ordinary chat lists left to ``openai_chat``.

The corpus (40 Who&When runs, PROVENANCE.md fourth wave) is read file by file against the files'
own fields; fixtures/group_chat/ag2-groupchat.json is hand-written (its README).
"""

from __future__ import annotations

import json

import pytest

from context_forensics import importers
from context_forensics.importers.base import read_head
from context_forensics.importers.group_chat import GroupChat, agent_and_channel
from helpers import CORPUS, FIXTURES, parse_all

IMP = GroupChat()
FIX = FIXTURES / "group_chat" / "ag2-groupchat.json"
WHO = CORPUS / "multi-agent-group-chat" / "who-and-when"
FILES = sorted(WHO.glob("*/*.json")) if WHO.is_dir() else []


def test_corpus_has_the_forty_runs():
    if not WHO.is_dir():
        pytest.skip("corpus not available")
    assert len(FILES) == 40


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_who_and_when_run(path):
    raw = json.loads(path.read_text())
    assert importers.detect(path).name == "group_chat"
    (s,), ctx = parse_all(IMP, path)
    assert not ctx.skipped and not ctx.warnings
    history = raw["history"]
    assert len(s.messages) == len(history)
    for i, (m, t) in enumerate(zip(s.messages, history)):
        assert m.text == t["content"] and m.meta["history_index"] == i
        speaker = t.get("name") or t["role"]
        agent = agent_and_channel(speaker)[0]
        assert m.meta["speaker"] == speaker
        if speaker == "human":
            assert m.role == "user"
        elif "terminal" in agent.lower():
            assert (m.role, m.name, m.meta["executor_output"]) == ("user", agent, True)
        else:
            assert m.role == "assistant" and m.name == agent
    assert s.task == raw["question_ID"] and s.metadata["question"] == raw["question"]
    assert s.outcome == "failure"  # every Who&When run failed (is_correct / is_corrected false)
    label = s.metadata["labelled_mistake"]
    step = int(raw["mistake_step"])
    assert (label["agent"], label["step"], label["message"]) == (raw["mistake_agent"], step, step)
    assert label["reason"] == raw["mistake_reason"][:2000]
    mistaken = s.messages[step]
    assert label["speaker"] == mistaken.meta["speaker"]
    if mistaken.role == "assistant":
        assert label["call_step"] == sum(1 for m in s.messages[: step + 1] if m.role == "assistant")
    else:  # a label on an executor's turn (Algorithm-Generated/14.json: the agent's code ran there)
        assert "call_step" not in label
    if "system_prompt" in raw:
        assert s.metadata["system_prompts"] == raw["system_prompt"]
        assert not any(m.role == "system" for m in s.messages)  # each agent's own prompt: not the shared window


def test_labelled_turns_are_mostly_the_labelled_agents():
    """The label's step names the labelled agent's own turn in 38 of the 40 runs (the data set's labels,
    kept as they are): in Algorithm-Generated/14.json the step is the executor's output of the agent's
    code, in Hand-Crafted/49.json (agent WebSurfer, step 12) the Assistant's turn."""
    if not FILES:
        pytest.skip("corpus not available")
    off = []
    for path in FILES:
        (s,), _ = parse_all(IMP, path)
        label = s.metadata["labelled_mistake"]
        if s.messages[label["message"]].name != label["agent"]:
            off.append(f"{path.parent.name}/{path.name}")
    assert off == ["Algorithm-Generated/14.json", "Hand-Crafted/49.json"]


def test_magentic_one_channels():
    assert agent_and_channel("Orchestrator (-> WebSurfer)") == ("Orchestrator", "-> WebSurfer")
    assert agent_and_channel("Orchestrator (thought)") == ("Orchestrator", "thought")
    assert agent_and_channel("WebSurfer") == ("WebSurfer", None)


def test_ag2_group_chat_fixture():
    assert IMP.sniff(FIX, read_head(FIX)) and importers.detect(FIX).name == "group_chat"
    (s,), ctx = parse_all(IMP, FIX)
    assert [(m.role, m.name) for m in s.messages] == [
        ("user", "User"), ("assistant", "Planner"), ("assistant", "Coder"), ("user", "Computer_terminal"),
        ("assistant", "Researcher"), ("assistant", "Critic")]
    assert s.metadata["agents"] == ["Coder", "Critic", "Planner", "Researcher"]
    assert s.outcome == "unknown" and s.task is None and "labelled_mistake" not in s.metadata
    assert s.messages[1].meta["logged_role"] == "user"  # as the chat manager logged it


def test_ordinary_chat_lists_are_not_group_chats(tmp_path):
    cases = {
        "chat": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "hello"}],
        "one_name": [{"role": "user", "name": "alice", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        "tools": [{"role": "user", "name": "a", "content": "x"}, {"role": "assistant", "name": "b", "content": None,
                  "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
        "messages": {"messages": [{"role": "user", "name": "a", "content": "x"},
                                  {"role": "assistant", "name": "b", "content": "y"}]},
    }
    for name, doc in cases.items():
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(doc))
        assert not IMP.sniff(p, read_head(p)), name
    p = tmp_path / "chat.json"
    p.write_text(json.dumps(cases["chat"]))
    assert importers.detect(p).name == "openai_chat"
    others = [p for p in FIXTURES.rglob("*.json*") if p.is_file() and "group_chat" not in p.parts]
    assert others and not [p for p in others if IMP.sniff(p, read_head(p))]


def test_every_corpus_file_has_one_claimant():
    if not FILES:
        pytest.skip("corpus not available")
    for path in FILES:
        head = read_head(path)
        assert [imp.name for imp in importers.registry().values() if imp.sniff(path, head)] == ["group_chat"], path
