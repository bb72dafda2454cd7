"""Gemini CLI: session JSON and JSONL (later copies, $set, $rewindTo), sub-agent chats,
checkpoints, recorded usage, and the rewind as a recorded history edit in replay.

Fixtures under fixtures/gemini_cli/ are hand-written in the shapes of chatRecordingService.ts
(google-gemini/gemini-cli) and the corpus files; the corpus tests read ../shared/corpus.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.analysis.replay import prepare, replay_session
from context_forensics.analysis.replay.policies import STATE_NAMES
from context_forensics.cli import app
from context_forensics.config.models import ModelSpec
from context_forensics.errors import InputError
from context_forensics.importers.base import read_head
from context_forensics.importers.gemini_cli import GeminiCli
from context_forensics.records import KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT, read_history_edit
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from helpers import FIXTURES, corpus, parse_all

F = FIXTURES / "gemini_cli"
MAIN = F / "chats" / "session-2026-05-02T09-00-0a1b2c3d.jsonl"
CHILD = F / "chats" / "0a1b2c3d-0000-4000-8000-000000000001" / "5e5e5e5e-0000-4000-8000-000000000002.jsonl"
LEGACY = F / "session-2025-09-30T08-00-legacy.json"
TOOL_CHECKPOINT = F / "checkpoints" / "2026-05-02T09-01-04_000Z-parser.py-replace.json"
IMP = GeminiCli()
SPEC = ModelSpec("tiny", "approx", 100_000, 0, "left_truncation")


def _parse(path: Path):
    return parse_all(IMP, path)


def test_sniff_takes_every_layout_and_nothing_else(tmp_path):
    for p in (MAIN, CHILD, LEGACY, TOOL_CHECKPOINT, F / "checkpoint-mytag.json", F / "checkpoint-wrapped.json"):
        assert IMP.sniff(p, read_head(p)), p
    others = [p for p in FIXTURES.rglob("*.json*") if "gemini_cli" not in p.parts and p.is_file()]
    assert others and not [p for p in others if IMP.sniff(p, read_head(p))]
    # a Gemini Content list only under a checkpoint's name; a Claude Code line is no session header
    contents = tmp_path / "contents.json"
    contents.write_text((F / "checkpoint-mytag.json").read_text())
    assert not IMP.sniff(contents, read_head(contents))
    cc = tmp_path / "cc.jsonl"
    cc.write_text(json.dumps({"sessionId": "x", "parentUuid": None, "type": "user"}) + "\n")
    assert not IMP.sniff(cc, read_head(cc))


def test_jsonl_later_copy_replaces_in_place_and_the_rewind_is_a_marker():
    (s,), ctx = _parse(MAIN)
    m = s.messages
    assert [(x.role, x.kind) for x in m] == [
        ("user", "message"), ("assistant", "message"), ("tool", "message"), ("assistant", "message"),
        ("user", "message"), ("assistant", "message"), ("tool", "message"),
        ("system", KIND_HISTORY_EDIT), ("user", "message"), ("assistant", "message")]
    # g1's first copy had all-zero tokens and no tool calls: its later copy (tokens, the call) won
    assert m[1].usage.prompt_tokens == 5200 and [c.name for c in m[1].tool_calls] == ["read_file"]
    assert m[2].tool_call_id == "c1" and m[2].text == "def parse(x):\n    return x\n"
    assert m[1].meta["thoughts"] == [{"subject": "Reading", "description": "Look at the parser first"}]
    assert "Look at the parser" not in m[1].text and not m[1].parts  # thoughts are not sent back
    edit = read_history_edit(m[7].meta, 7)
    assert (edit.type, edit.action, edit.ranges, edit.source) == ("rewind", "evicted", ((4, 7),),
                                                                  "gemini_cli:$rewindTo")
    assert edit.figures == {"rewind_to": "u2"}
    assert s.metadata["rewinds"] == 1 and s.metadata["records"]["later copies"] == 1
    assert s.metadata["notices"] == {"info": 1} and "Request cancelled." not in [x.text for x in m]
    assert s.title == "Add a parser test" and s.metadata["agent"] == "gemini-cli"
    assert not ctx.warnings


def test_usage_per_call_and_model_per_message():
    (s,), _ = _parse(MAIN)
    calls = [x for x in s.messages if x.usage is not None]
    assert [x.meta["id"] for x in calls] == ["g1", "g2", "g3", "g4"] and s.metadata["recorded_calls"] == 4
    u = calls[0].usage
    # input (promptTokenCount) already includes cached; output excludes thoughts
    assert (u.prompt_tokens, u.cache_read_tokens, u.completion_tokens, u.reasoning_tokens) == (5200, 4096, 160, 120)
    assert [x.model for x in calls] == ["gemini-2.5-flash", "gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-pro"]
    assert s.model == "gemini-2.5-flash" and s.metadata["models"] == ["gemini-2.5-flash", "gemini-2.5-pro"]
    (legacy,), _ = _parse(LEGACY)
    last = legacy.messages[-1].usage
    assert last.prompt_tokens == 7100 + 40  # toolUsePromptTokenCount was read by the model too
    assert legacy.messages[-1].meta["tokens"]["tool"] == 40


def test_an_all_zero_tokens_record_is_no_call(tmp_path):
    p = tmp_path / "session-z.jsonl"
    lines = MAIN.read_text().splitlines()
    p.write_text("\n".join(lines[:4]) + "\n")  # header, u1, $set, g1's all-zero first copy
    (s,), _ = _parse(p)
    assert [x.role for x in s.messages] == ["user", "assistant"]
    assert s.messages[1].usage is None and s.metadata.get("recorded_calls", 0) == 0


def test_legacy_json_error_notice_and_failed_tool():
    (s,), ctx = _parse(LEGACY)
    assert [x.role for x in s.messages] == ["user", "assistant", "tool", "assistant"]
    assert s.messages[2].text == "File not found" and s.messages[2].meta["status"] == "error"
    assert s.metadata["layout"] == "json" and s.metadata["notices"] == {"error": 1}
    assert s.external_id == "7c7c7c7c-0000-4000-8000-000000000003" and s.global_id


def test_sub_agent_is_a_child_of_its_folder_session():
    (s,), _ = _parse(CHILD)
    assert s.parent_external_id == "0a1b2c3d-0000-4000-8000-000000000001"
    assert s.metadata["kind"] == "subagent"
    (main,), _ = _parse(MAIN)
    assert main.parent_external_id is None


def test_checkpoints_are_the_clients_history():
    (s,), _ = _parse(TOOL_CHECKPOINT)
    assert [x.role for x in s.messages] == ["user", "assistant", "user", "assistant"]
    assert s.messages[0].text.startswith("This is the Gemini CLI")  # in no chat file: only here
    assert [c.id for c in s.messages[-1].tool_calls] == ["c2"]
    assert s.metadata["session_id"] == "0a1b2c3d-0000-4000-8000-000000000001"
    assert s.metadata["tool_call"]["name"] == "replace" and s.external_id.startswith("checkpoint:")
    (bare,), _ = _parse(F / "checkpoint-mytag.json")
    assert [x.role for x in bare.messages] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert bare.messages[4].tool_call_id == "k1"
    (wrapped,), _ = _parse(F / "checkpoint-wrapped.json")
    assert [x.text for x in wrapped.messages] == ["Hello", "Hi, how can I help?"]


def test_set_messages_that_drops_records_is_a_compaction(tmp_path):
    p = tmp_path / "session-c.jsonl"
    head = MAIN.read_text().splitlines()[:9]  # through g3 and its tool call
    summary = {"id": "sum1", "timestamp": "t", "type": "user", "content": [{"text": "Summary: fix the parser test."}]}
    keep = json.loads(head[8])
    p.write_text("\n".join(head + [json.dumps({"$set": {"messages": [summary, keep]}})]) + "\n")
    (s,), _ = _parse(p)
    i = next(k for k, x in enumerate(s.messages) if x.kind == KIND_HISTORY_EDIT)
    edit = read_history_edit(s.messages[i].meta, i)
    assert (edit.type, edit.action, edit.ranges) == ("compaction", "summarized", ((0, 5),))
    assert s.messages[i + 1].kind == KIND_COMPACTION_SUMMARY and s.messages[i + 1].text.startswith("Summary")


def test_bad_records_cost_only_themselves(tmp_path):
    p = tmp_path / "session-b.jsonl"
    lines = MAIN.read_text().splitlines()
    lines.insert(2, json.dumps({"id": "u9", "type": "user", "content": 42}))
    lines.insert(3, "[1, 2]")
    p.write_text("\n".join(lines) + "\n")
    (s,), ctx = _parse(p)
    assert len(s.messages) == 10 and ctx.bad == 2
    assert sorted(w.split(": ", 1)[0] for w in ctx.warnings) == [f"{p}:3", f"{p}:4"]  # each by its line
    empty = tmp_path / "session-e.json"
    empty.write_text('{"sessionId": "a", "projectHash": "b", "messages": 3}')
    with pytest.raises((InputError, TypeError)):
        _parse(empty)


def test_replay_shows_the_rewind_and_the_window_drops_the_rewound_messages(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        report = ingest_paths(store, [MAIN], fmt="gemini_cli")
        assert [f.status for f in report.files] == ["ingested"]
        sid = store.sessions(fmt="gemini_cli")[0]["id"]
        rep = replay_session(store, sid, SPEC, policy="recorded")
        events = [(s["message_seq"], e) for s in rep.steps for e in s["events"] if e["type"] == "history_edit"]
        assert len(events) == 1
        seq, e = events[0]
        assert seq == 9 and e["at"] == 7 and (e["edit"], e["action"], e["removed"],
                                              e["recorded"]) == ("rewind", "evicted", 3, True)
        _, last = prepare(store, sid, SPEC, policy="recorded").run()
        assert [STATE_NAMES[int(x)] for x in last[:7]] == ["kept"] * 4 + ["evicted"] * 3


def test_cli_ingest_and_sessions_by_agent(tmp_path):
    db = str(tmp_path / "c.db")
    r = CliRunner().invoke(app, ["ingest", str(F), "--recursive", "--db", db, "--json"])
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert sorted(f["format"] for f in data["files"]) == ["gemini_cli"] * 6
    assert sum(f["messages"] for f in data["files"]) == 10 + 2 + 4 + 6 + 2 + 4


# ---------------------------------------------------------------- the real corpus (counted by hand)

CORPUS_FILES = {
    # file: (messages, user, assistant, tool, recorded calls, rewinds)
    # 1 user + 18 gemini records, tokens on each; no toolCalls in this file
    "gemini-cli/VibeCodingTracker/2025-10-05/test_conversation_gemini.json": (19, 1, 18, 0, 18, 0),
    # 28 lines: 1 header, 16 message records (5 ids twice: 6 gemini, 3 user, 2 info), 11 $set;
    # tool calls 5 + 3 + 1 + 1 + 2 = 12 with results; the 2 info notices are not messages
    "gemini-cli/VibeCodingTracker/test_conversation_gemini.jsonl": (21, 3, 6, 12, 6, 0),
    # hand-written (littlebearapps/token-audit, shape only): 2 user + 2 gemini with one tool call each
    "gemini-cli/token-audit/session-sample.json": (6, 2, 2, 2, 2, 0),
}


@pytest.mark.parametrize("rel", sorted(CORPUS_FILES))
def test_corpus_files(rel):
    p = corpus(rel)
    assert IMP.sniff(p, read_head(p))
    (s,), ctx = _parse(p)
    roles = [m.role for m in s.messages]
    n, user, assistant, tool, calls, rewinds = CORPUS_FILES[rel]
    assert (len(roles), roles.count("user"), roles.count("assistant"),
            roles.count("tool")) == (n, user, assistant, tool)
    assert sum(1 for m in s.messages if m.usage is not None) == calls == s.metadata["recorded_calls"]
    assert s.metadata["rewinds"] == rewinds and not ctx.warnings
    # each call's prompt is the recorded input (promptTokenCount, cached included) plus tool prompt
    for m in s.messages:
        if m.usage is not None:
            t = m.meta["tokens"]
            assert m.usage.prompt_tokens == t["input"] + t["tool"] >= m.usage.cache_read_tokens == t["cached"]
            if "token-audit" not in rel:  # the hand-written sample adds cached to its second total
                assert t["total"] == t["input"] + t["output"] + t["thoughts"] + t["tool"]


def test_corpus_jsonl_switches_model_mid_session():
    (s,), _ = _parse(corpus("gemini-cli/VibeCodingTracker/test_conversation_gemini.jsonl"))
    models = [m.model for m in s.messages if m.role == "assistant"]
    assert models == ["gemini-3-flash-preview"] * 5 + ["gemini-3.1-pro-preview"]
    assert s.metadata["records"] == {"metadata lines": 1, "message records": 16, "later copies": 5, "$set": 11}
    assert s.messages[0].meta["display"] == "/init"
