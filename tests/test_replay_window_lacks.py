"""A window the log cannot rebuild whole says what it lacks, never a silent partial figure (issue 30).

Copilot CLI's events.jsonl records the system prompt and the tool results sent but not the tool
definitions, and no call's prompt size (only its output tokens); its legacy session JSON records
neither the system prompt nor the tools. Nothing calibrates such a replay, so every window figure
is below what the model read: the replay names the parts (``window_lacks``) and, where the log
states their size elsewhere (Copilot's ``session.shutdown`` context split), that size.

Fixtures: tests/fixtures/copilot_cli (events.jsonl: Copilot CLI 0.0.3xx events with a shutdown
context split; legacy-session.json: the pre-late-2025 layout; one-call.jsonl: a call whose prompt
size the log records, which calibrates); tests/fixtures/pi/v3_tree.jsonl (recorded usage).
"""

from __future__ import annotations

import pytest

from context_forensics.analysis.replay import prepare, replay_session
from context_forensics.store.agents import agent_of
from context_forensics.store.db import Store
from context_forensics.tokens.labels import CALIBRATED
from helpers import FIXTURES, replay_json, run

COPILOT = FIXTURES / "copilot_cli"


def test_copilot_events_say_every_window_lacks_the_tool_definitions_and_their_recorded_size(tmp_path):
    rep = replay_json(COPILOT / "events.jsonl", tmp_path / "s.db")
    assert rep["token_kind"] != CALIBRATED
    assert rep["window_lacks"] == [{"part": "tool_definitions", "tokens": 248,
                                    "why": "the log records the tool calls, not the tool definitions sent"}]
    out = " ".join(run("replay", COPILOT / "events.jsonl", "--db", tmp_path / "s.db", width=80).stdout.split())
    assert "every window lacks the tool definitions" in out and "248 tokens of them when the session ended" in out


def test_copilot_legacy_says_every_window_lacks_the_system_prompt_and_the_tools(tmp_path):
    rep = replay_json(COPILOT / "legacy-session.json", tmp_path / "s.db")
    assert [(x["part"], x["tokens"]) for x in rep["window_lacks"]] == [("system_prompt", None),
                                                                        ("tool_definitions", None)]
    out = " ".join(run("replay", COPILOT / "legacy-session.json", "--db", tmp_path / "s.db", width=80).stdout.split())
    assert "every window lacks the system prompt" in out


@pytest.mark.parametrize("path", [COPILOT / "one-call.jsonl", FIXTURES / "pi" / "v3_tree.jsonl"])
def test_a_replay_its_recorded_prompts_calibrate_lacks_nothing(tmp_path, path):
    rep = replay_json(path, tmp_path / "s.db")
    assert rep["token_kind"] == CALIBRATED and rep["window_lacks"] == []
    out = run("replay", path, "--db", tmp_path / "s.db", width=80).stdout
    assert "every window lacks" not in out


@pytest.mark.integration
def test_every_agent_session_the_log_cannot_rebuild_whole_says_what_its_windows_lack(corpus_ingest):
    """Every session of the corpus: an agent's session that nothing calibrates names the system prompt
    when the log holds none (Inspect's log holds the messages as sent) and the tool definitions when
    it holds tool calls but no definitions; a calibrated one, or a session of no agent, names none.
    Both Copilot CLI sessions lack the tool definitions (the events one with Copilot's own 15,204)."""
    db, _ = corpus_ingest
    copilot = []
    with Store.open(db) as st:
        for ses in st.sessions():
            if not ses["step_count"]:
                continue
            rep = replay_session(st, ses["id"], use_cache=False)
            parts = {x["part"]: x["tokens"] for x in rep.lacks}
            if rep.token_kind == CALIBRATED or not agent_of(ses["format"], ses["metadata"]):
                assert parts == {}, ses["source"]
                continue
            msgs = [sm.message for sm in st.messages(ses["id"])]
            # a system prompt is a system message that is a message: a recorded edit or a compaction's
            # marker written with that role (Aider's chat history, Claude Code) is none
            system = any(m.role in ("system", "developer") and m.kind == "message" for m in msgs) \
                or ses["format"] == "inspect"
            assert ("system_prompt" in parts) == (not system), ses["source"]
            if any(m.tool_calls for m in msgs):  # definitions in the session's metadata or a call's request
                tools = any(s.n_tools for s in prepare(st, ses["id"]).counted.steps)
                assert ("tool_definitions" in parts) == (not tools), ses["source"]
            if ses["format"] == "copilot_cli":
                copilot.append(parts)
    assert sorted(copilot, key=len) == [{"tool_definitions": 15204},
                                        {"system_prompt": None, "tool_definitions": None}]


def test_calls_of_another_model_are_named_with_their_own_window(tmp_path):
    """tests/fixtures/aider/chat.history.md, its first run: two calls under gemini/gemini-2.5-pro, then
    ``/model openai/qwen3:32b`` and two calls under it. The replay runs under the session's model;
    it says which steps ran under another one, with that model's own window and tokenizer."""
    from context_forensics.store.ingest import ingest_paths

    db = tmp_path / "s.db"
    with Store.open(db) as st:
        ingest_paths(st, [FIXTURES / "aider" / "chat.history.md"])
        (ses,) = [s for s in st.sessions() if s["model"] == "gemini/gemini-2.5-pro"]
        rep = replay_session(st, ses["id"]).to_dict()
    (other,) = rep["other_models"]
    assert (other["model"], other["steps"], other["limit"], other["tokenizer"]) == (
        "openai/qwen3:32b", [3, 4], 32_768, "qwen3")
    out = " ".join(run("replay", ses["id"], "--db", db, width=80).stdout.split())
    assert "step(s) 3, 4 ran under openai/qwen3:32b (its window 32,768, tokenizer qwen3)" in out


@pytest.mark.integration
def test_the_corpus_aider_chat_that_switched_models_names_each_models_steps(corpus_ingest):
    """Aider's chat history of Simple-Calulator (runs under gemini, then /model qwen3:32b and deepseek-chat):
    steps 9-12 ran under qwen3:32b, 13-20 under deepseek-chat; a session of one model names none."""
    db, _ = corpus_ingest
    seen = False
    with Store.open(db) as st:
        for ses in st.sessions():
            if not ses["step_count"] or ses["format"] not in ("aider_chat", "pi", "copilot_cli", "cline"):
                continue
            rep = replay_session(st, ses["id"]).to_dict()
            models = {m.model for m in (sm.message for sm in st.messages(ses["id"]))
                      if m.role == "assistant" and m.kind == "message" and m.model}
            got = {o["model"]: o["steps"] for o in rep["other_models"]}
            if len(models) <= 1:
                assert got == {}, ses["source"]
            if ses["source"].endswith("Simple-Calulator/.aider.chat.history.md"):
                seen = True
                assert got == {"openai/qwen3:32b": [9, 10, 11, 12],
                               "openai/deepseek.deepseek-chat": list(range(13, 21))}
    assert seen
