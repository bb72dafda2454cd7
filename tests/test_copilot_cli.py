"""GitHub Copilot CLI: the events.jsonl event stream and the legacy session JSON, recorded
usage, the shutdown's totals, and truncation / compaction as recorded history edits in replay.

Fixtures under fixtures/copilot_cli/ are hand-written in the shapes of the corpus files and of
the Copilot SDK's generated event schema (github/copilot-sdk, nodejs/src/generated/
session-events.ts); the corpus tests read ../shared/corpus.
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
from context_forensics.importers.copilot_cli import CopilotCli
from context_forensics.records import KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT, read_history_edit
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from helpers import FIXTURES, corpus, parse_all

F = FIXTURES / "copilot_cli"
EVENTS = F / "events.jsonl"
ONE_CALL = F / "one-call.jsonl"
LEGACY = F / "legacy-session.json"
IMP = CopilotCli()
SPEC = ModelSpec("tiny", "approx", 100_000, 0, "left_truncation")


def _parse(path: Path):
    return parse_all(IMP, path)


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sniff_takes_both_layouts_and_nothing_else(tmp_path):
    for p in (EVENTS, ONE_CALL, LEGACY):
        assert IMP.sniff(p, read_head(p)), p
    others = [p for p in FIXTURES.rglob("*.json*") if "copilot_cli" not in p.parts and p.is_file()]
    assert others and not [p for p in others if IMP.sniff(p, read_head(p))]
    # an OpenAI chat file has messages, not chatMessages; a Codex line has a payload, not data + parentId
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    codex = tmp_path / "rollout.jsonl"
    codex.write_text(json.dumps({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}}) + "\n")
    assert not IMP.sniff(chat, read_head(chat)) and not IMP.sniff(codex, read_head(codex))


def test_events_what_the_model_saw():
    (s,), ctx = _parse(EVENTS)
    m = s.messages
    assert [(x.role, x.kind) for x in m] == [
        ("system", "message"), ("user", "message"), ("assistant", "message"), ("tool", "message"),
        ("assistant", "message"), ("user", "message"), ("system", KIND_HISTORY_EDIT), ("assistant", "message"),
        ("tool", "message"), ("system", KIND_HISTORY_EDIT), ("user", KIND_COMPACTION_SUMMARY), ("user", "message"),
        ("assistant", "message")]
    # the system prompt once: its identical copy before the second user turn is the same prompt
    assert m[0].text == "You are the GitHub Copilot CLI. Never push to main."
    assert ctx.skipped["system.message (the same prompt again)"] == 1
    # the text the model got is transformedContent; what the user typed stays in meta
    assert m[1].text.startswith("<current_datetime>") and "list the files" in m[1].text
    assert m[1].meta["typed_content"] == "list the files" and m[1].meta["text_source"] == "transformedContent"
    assert m[5].text == "You have not yet marked the task as complete." and m[5].meta["typed_content"] == ""
    # a reply: tool requests, reasoning as a thinking part, the opaque part's size only
    assert [(c.name, c.id, json.loads(c.arguments)) for c in m[2].tool_calls] == [("bash", "call_1", {"command": "ls"})]
    assert m[2].parts == ({"type": "thinking", "text": "I should look."},) and m[2].meta["reasoning_opaque_chars"] == 4
    # a tool result is result.content (what the LLM got), not the UI's detailedContent
    assert (m[3].tool_call_id, m[3].name, m[3].text) == ("call_1", "bash", "a.py\nb.py")
    assert m[3].meta["detailed_content_chars"] == len("diff --git a.py b.py (UI only)")
    # two chunks of one API call (one apiCallId) are one reply
    assert m[7].text == "Thinking done.\nNow reading a.py." and m[7].meta["chunks"] == 2
    assert [c.id for c in m[7].tool_calls] == ["call_2"]
    # a failed tool: the error message is what came back
    assert m[8].text == "file not found: a.py" and m[8].meta["success"] is False and m[8].name == "view"
    assert s.external_id == "11111111-2222-4333-8444-555555555555" and s.global_id
    assert s.model == "claude-sonnet-4.6" and s.title == "list the files"
    assert s.started_at == "2026-04-23T17:00:00.000Z"
    assert all(x.model == "claude-sonnet-4.6" for x in m if x.role == "assistant")


def test_recorded_usage_is_output_tokens_per_reply():
    (s,), _ = _parse(EVENTS)
    replies = [x for x in s.messages if x.role == "assistant"]
    assert [x.usage.to_dict() for x in replies] == [{"completion_tokens": n} for n in (40, 12, 30, 8)]
    assert s.metadata["recorded_check"] == {"replies": 4, "requests_at_shutdown": 4,
                                            "output_tokens_of_replies": 90, "output_tokens_at_shutdown": 120}


def test_shutdown_totals_and_context_split_are_kept_with_what_they_measure():
    (s,), _ = _parse(EVENTS)
    sd = s.metadata["shutdown"]
    assert sd["model_metrics"]["claude-sonnet-4.6"]["usage"]["inputTokens"] == 5000
    ctx = sd["context_at_shutdown"]
    assert (ctx["total"], ctx["system"], ctx["conversation"], ctx["tool_definitions"]) == (700, 300, 150, 248)
    assert "not the recorded usage of any call" in ctx["what"] and "sums over every API request" in sd[
        "model_metrics_what"]
    # sums over 4 requests are no one call's usage: no reply got a prompt size from them
    assert not [x for x in s.messages if x.usage and x.usage.prompt_tokens is not None]
    assert s.metadata["agent"] == "copilot-cli" and s.metadata["layout"] == "events"


def test_a_one_call_session_gets_the_shutdown_totals_as_its_usage_and_a_new_prompt_replaces_the_old():
    (s,), ctx = _parse(ONE_CALL)
    m = s.messages
    assert [(x.role, x.kind) for x in m] == [("system", "message"), ("user", "message"), ("assistant", "message"),
                                             ("system", KIND_HISTORY_EDIT), ("system", "message")]
    assert m[2].usage.to_dict() == {"prompt_tokens": 9000, "completion_tokens": 3, "cache_read_tokens": 8000,
                                    "cache_creation_tokens": 100}
    assert m[2].meta["usage_source"].startswith("session.shutdown.modelMetrics[gpt-5]") and m[2].model == "gpt-5"
    edit = read_history_edit(m[3].meta, 3)
    assert (edit.type, edit.action, edit.ranges) == ("system_prompt", "evicted", ((0, 1),))
    assert m[4].text.endswith("plan mode.")


def test_history_edits_name_the_messages_they_removed():
    (s,), _ = _parse(EVENTS)
    m = s.messages
    trunc = read_history_edit(m[6].meta, 6)
    assert (trunc.type, trunc.action, trunc.ranges, trunc.source) == (
        "truncation", "evicted", ((1, 4),), "copilot_cli:session.truncation")
    assert (trunc.figures["tokens_before"], trunc.figures["tokens_after"],
            trunc.figures["token_limit"]) == (900, 500, 1000)
    comp = read_history_edit(m[9].meta, 9)
    # the 4 oldest messages left in the history: 4, 5, then 7, 8 (the marker at 6 is no message)
    assert (comp.type, comp.action, comp.ranges) == ("compaction", "summarized", ((4, 6), (7, 9)))
    assert (comp.figures["tokens_before"], comp.figures["tokens_after"],
            comp.figures["trigger"]) == (800, 120, "threshold")
    assert m[10].text.startswith("Summary:") and m[10].kind == KIND_COMPACTION_SUMMARY


def test_bad_and_sub_agent_events_cost_only_themselves(tmp_path):
    (s,), ctx = _parse(EVENTS)
    assert ctx.skipped["malformed event"] == 1 and ctx.skipped["sub-agent event"] == 1
    assert any("line 21" in w or ":21:" in w for w in ctx.warnings)  # the user.message with a list for content
    assert "sub-agent talk" not in [x.text for x in s.messages] and s.metadata["subagent_events_skipped"] == 1
    bad = tmp_path / "events.jsonl"
    lines = EVENTS.read_text().splitlines()
    bad.write_text("\n".join(lines[:4] + ["{not json"] + lines[4:]) + "\n")
    (s2,), ctx2 = _parse(bad)
    assert len(s2.messages) == len(s.messages) and ctx2.skipped["invalid JSON line"] == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InputError):
        _parse(empty)


def test_a_bad_reply_costs_itself_not_the_event_after_it(tmp_path):
    evs = _events(EVENTS)
    reply = next(e for e in evs if e["type"] == "assistant.message" and e["data"]["messageId"] == "m2")
    reply["data"]["toolRequests"] = [{"toolCallId": "x", "name": 7}]  # a tool name that is no string
    p = tmp_path / "events.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in evs))
    (s,), ctx = _parse(p)
    assert ctx.skipped["malformed event"] == 2  # this reply and line 21's user.message
    # the field in the log's words, not Python's (issue 31: it was "ToolCall.name must be a string")
    assert any(w.startswith(f"{p}:11:") and "a tool call's name is a number, not text" in w for w in ctx.warnings)
    texts = [m.text for m in s.messages]
    assert "Two files: a.py and b.py." not in texts
    # the events after it are kept: the autopilot nudge, the edits, the last reply
    assert "You have not yet marked the task as complete." in texts and texts[-1] == "You're welcome."


def test_a_session_without_start_takes_its_folder_name(tmp_path):
    d = tmp_path / "99999999-8888-4777-8666-555555555555"
    d.mkdir()
    p = d / "events.jsonl"
    # no session.start, and the turn_end of line 9 lost: the next event's parentId names it
    p.write_text("\n".join(line for line in EVENTS.read_text().splitlines()
                           if '"session.start"' not in line and '"id": "e09"' not in line) + "\n")
    # without session.start the first event is a model change: still a Copilot stream
    assert IMP.sniff(p, read_head(p))
    (s,), ctx = _parse(p)
    assert s.external_id == d.name and s.global_id
    assert any("sessionId" in w for w in ctx.warnings) and s.metadata["parent_chain_breaks"] == 1


def test_legacy_json_merges_a_reply_and_takes_timestamps_from_the_timeline():
    (s,), ctx = _parse(LEGACY)
    m = s.messages
    assert [x.role for x in m] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    # the reply's text and its two tool calls were three stored messages: one model call
    assert m[1].text == "Let me look first." and [c.name for c in m[1].tool_calls] == ["str_replace_editor", "bash"]
    assert m[1].meta["chat_messages"] == [1, 2, 3] and m[1].timestamp == "2025-10-11T11:40:31.603Z"
    assert (m[2].tool_call_id, m[2].name, m[2].timestamp) == ("toolu_1",
                                                              "str_replace_editor", "2025-10-11T11:40:32.000Z")
    assert m[0].timestamp == "2025-10-11T11:40:24.449Z" and "<reminder>" in m[0].text
    assert m[4].timestamp is None and m[6].text == "Done: memory use is down."
    assert not any(x.usage for x in m) and s.model is None
    missing = s.metadata["timeline_not_in_chat"]  # for ctxf check's totals: the counts and the entries
    assert (missing["tool_calls"], missing["reply_texts"]) == (1, 0)
    assert missing["entries"] == [{"type": "tool_call", "name": "bash", "timestamp": "2025-10-11T12:00:00.000Z"}]
    assert any("not in chatMessages" in w for w in ctx.warnings)
    assert s.external_id == "06141331-0000-4000-8000-000000000001" and s.metadata["agent"] == "copilot-cli"


def test_replay_shows_both_edits_and_the_window_drops_their_messages(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        report = ingest_paths(store, [EVENTS], fmt="copilot_cli")
        # the fixture holds one malformed event on purpose: stored in part, "partial" (issue 32)
        assert [(f.status, f.unread) for f in report.files] == [("partial", {"malformed event": 1})]
        sid = store.sessions(fmt="copilot_cli")[0]["id"]
        rep = replay_session(store, sid, SPEC, policy="recorded")
        events = [(s["message_seq"], e) for s in rep.steps for e in s["events"] if e["type"] == "history_edit"]
        assert [(seq, e["edit"], e["action"], e["removed"], e["recorded"]) for seq, e in events] == [
            (7, "truncation", "evicted", 3, True), (12, "compaction", "summarized", 4, True)]
        _, last = prepare(store, sid, SPEC, policy="recorded").run()
        states = [STATE_NAMES[int(x)] for x in last[:11]]
        assert states[0] == "kept" and states[1:4] == ["evicted"] * 3
        assert [states[i] for i in (4, 5, 7, 8)] == ["summarized"] * 4 and states[10] == "kept"


def test_cli_ingest_and_sessions_by_agent(tmp_path):
    db = str(tmp_path / "c.db")
    r = CliRunner().invoke(app, ["ingest", str(F), "--recursive", "--db", db, "--json"])
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert sorted(f["format"] for f in data["files"]) == ["copilot_cli"] * 4
    assert sum(f["messages"] for f in data["files"]) == 13 + 5 + 7 + 21  # + the timeline-only legacy log
    r = CliRunner().invoke(app, ["sessions", "--db", db, "--agent", "copilot-cli", "--json"])
    assert r.exit_code == 0, r.stderr
    assert len(json.loads(r.stdout)["sessions"]) == 4


# ---------------------------------------------------------------- the real corpus (counted by hand)

MODERN = "copilot-cli/VibeCodingTracker/test_conversation_copilot.jsonl"
OLD = "copilot-cli-legacy/VibeCodingTracker/2025-10-11-full/test_conversation_copilot.json"


def test_corpus_events_file():
    p = corpus(MODERN)
    assert IMP.sniff(p, read_head(p))
    (s,), ctx = _parse(p)
    roles = [m.role for m in s.messages]
    # 51 events: 2 system.message (the second the same 37,833 characters), 2 user.message,
    # 6 assistant.message, 11 tool.execution_complete
    assert (len(roles), roles.count("system"), roles.count("user"), roles.count("assistant"), roles.count("tool")) == (
        20, 1, 2, 6, 11)
    assert len(s.messages[0].text) == 37_833
    assert [m.usage.completion_tokens for m in s.messages if m.role == "assistant"] == [311, 170, 141, 153, 1379, 694]
    # the replies' outputTokens add up to the shutdown's total; 6 replies, 6 requests
    assert s.metadata["recorded_check"] == {"replies": 6, "requests_at_shutdown": 6,
                                            "output_tokens_of_replies": 2848, "output_tokens_at_shutdown": 2848}
    c = s.metadata["shutdown"]["context_at_shutdown"]
    assert (c["total"], c["system"], c["conversation"], c["tool_definitions"]) == (35322, 9891, 10223, 15204)
    u = s.metadata["shutdown"]["model_metrics"]["claude-sonnet-4.6"]["usage"]
    assert (u["inputTokens"], u["cacheReadTokens"]) == (186809, 151738)
    # the second user turn was injected by autopilot: nothing typed, the model got the nudge
    second = [m for m in s.messages if m.role == "user"][1]
    assert second.meta["typed_content"] == "" and "task_complete" in second.text
    assert sum(len(m.tool_calls) for m in s.messages) == 11 and not ctx.warnings
    assert s.metadata["copilot_version"] == "1.0.34" and "parent_chain_breaks" not in s.metadata


def test_corpus_legacy_file():
    p = corpus(OLD)
    assert IMP.sniff(p, read_head(p))
    (s,), ctx = _parse(p)
    roles = [m.role for m in s.messages]
    # 148 chatMessages: 1 user, 56 tool, 91 assistant in 45 runs (a reply's text and each of its
    # tool calls were stored as their own assistant message)
    assert (len(roles), roles.count("user"), roles.count("assistant"), roles.count("tool")) == (102, 1, 45, 56)
    assert sum(len(m.tool_calls) for m in s.messages) == 56
    assert sum(len(m.meta["chat_messages"]) for m in s.messages if m.role == "assistant") == 91
    # the timeline's Makefile episode (3 tool calls, 2 texts) is not in what the model was sent
    missing = s.metadata["timeline_not_in_chat"]
    assert (missing["tool_calls"], missing["reply_texts"]) == (3, 2) and len(ctx.warnings) == 1
    assert len(missing["entries"]) == 5 and missing["entries"][0]["timestamp"] == "2025-10-11T12:15:45.082Z"


# ---------------------------------------------------------------- an empty chatMessages (issue 30, item 13)

# The shape of a legacy log whose chatMessages is empty while its timeline holds the request, 5
# replies and 15 tool calls with their results: entries written as the corpus file's timeline
# writes them (info / user / copilot / tool_call_completed {callId, name, toolTitle,
# intentionSummary, arguments, result {type, log}}; a reply's entries stamped within 1 ms; one
# reply's text listed out of order, as the corpus file lists its final summary), content made up.
TIMELINE_ONLY = F / "legacy-timeline-only.json"


def test_a_legacy_log_with_an_empty_chat_is_read_from_its_timeline_and_says_so():
    (s,), ctx = _parse(TIMELINE_ONLY)
    m = s.messages
    roles = [x.role for x in m]
    assert (len(m), roles.count("user"), roles.count("assistant"), roles.count("tool")) == (21, 1, 5, 15)
    replies = [x for x in m if x.role == "assistant"]
    assert [len(r.tool_calls) for r in replies] == [3, 2, 4, 6, 0]
    assert replies[1].text.startswith("The cache keeps") and replies[2].text == ""  # sorted back; a reply of calls only
    assert [x.timestamp for x in m] == sorted(x.timestamp for x in m)
    for r in replies:  # each reply is followed by its calls' results, in order, with the calls' ids
        at = m.index(r)
        assert [x.tool_call_id for x in m[at + 1: at + 1 + len(r.tool_calls)]] == [c.id for c in r.tool_calls]
    doc = json.loads(TIMELINE_ONLY.read_text())
    logs = {e["callId"]: e["result"]["log"] for e in doc["timeline"] if e["type"] == "tool_call_completed"}
    assert {x.tool_call_id: x.text for x in m if x.role == "tool"} == logs
    # the label `show` and `replay` print after "reconstructed": from the UI timeline, not recorded exactly
    assert s.metadata["reconstructed"].startswith("from the UI timeline") and s.metadata["chat_messages"] == 0
    assert "what the model saw is not recorded exactly" in s.metadata["reconstructed"]
    assert "1 of 22 entries" in s.metadata["timeline_order"]
    assert any("reconstructed from the UI timeline" in w for w in ctx.warnings)


def test_show_sessions_and_the_audit_of_a_reconstructed_session(tmp_path, monkeypatch):
    from helpers import cli

    db = tmp_path / "s.db"
    r = cli(monkeypatch, "ingest", TIMELINE_ONLY, "--db", db, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["files"][0]["messages"] == 21
    (row,) = json.loads(cli(monkeypatch, "sessions", "--db", db, "--json").stdout)["sessions"]
    assert row["reconstructed"].startswith("from the UI timeline") and row["message_count"] == 21
    listed = cli(monkeypatch, "sessions", "--db", db, width=80).stdout
    assert "21*" in listed and "reconstructed from what the agent displayed" in " ".join(listed.split())
    shown = cli(monkeypatch, "show", row["id"], "--db", db, width=80).stdout
    assert "reconstructed" in shown.split("messages")[0]  # in the head, before the messages
    shown_json = json.loads(cli(monkeypatch, "show", row["id"], "--db", db, "--json").stdout)
    assert shown_json["session"]["reconstructed"] == row["reconstructed"]
    assert "reconstructed from the UI timeline" in " ".join(shown.split())
    replayed = " ".join(cli(monkeypatch, "replay", row["id"], "--db", db, width=80).stdout.split())
    head = replayed.split(" step ")[0]  # above the table: the replay says its messages are rebuilt
    assert "reconstructed from the UI timeline" in head and "not recorded exactly" in head
    replay_json = json.loads(cli(monkeypatch, "replay", row["id"], "--db", db, "--json").stdout)
    assert replay_json["session"]["reconstructed"] == row["reconstructed"]
    cfg = tmp_path / "c.yaml"
    cfg.write_text("audit:\n  rules:\n    no_orphan_tool_results: {}\n    max_tool_output_share: {max: 0.5}\n")
    report = json.loads(cli(monkeypatch, "audit", "--db", db, "--config", cfg, "--json").stdout)
    res = {x["rule"]: x for x in report["sessions"][0]["results"]}
    assert res["no_orphan_tool_results"]["status"] == "pass" and res["max_tool_output_share"]["figure"] > 0


def test_corpus_legacy_timeline_read_alone_agrees_with_its_chat_messages(tmp_path):
    """The corpus legacy file read twice: from its chatMessages, and from its timeline alone (a
    copy with chatMessages emptied, in tmp_path). Where both hold a reply they agree: the same
    45 replies, texts and tool call ids in order; a bash result is the same text, a
    str_replace_editor result is the terminal's diff-style rendering (the 31 both hold differ); the
    user's request lacks the CLI's injected reminders. The timeline also holds a later episode
    (3 replies, 3 calls) that chatMessages never got."""
    src = corpus(OLD)
    (chat,), _ = _parse(src)
    blank = tmp_path / "blank.json"
    blank.write_text(json.dumps({**json.loads(src.read_text()), "chatMessages": []}))
    (tl,), _ = _parse(blank)
    ca = [x for x in chat.messages if x.role == "assistant"]
    ta = [x for x in tl.messages if x.role == "assistant"]
    assert (len(ca), len(ta)) == (45, 48) and len(tl.messages) == 108
    assert all([c.id for c in a.tool_calls] == [c.id for c in b.tool_calls] and a.text.strip() == b.text.strip()
               for a, b in zip(ca, ta))
    got = {x.tool_call_id: x for x in chat.messages if x.role == "tool"}
    same = {name: sum(1 for x in tl.messages if x.role == "tool" and x.name == name and x.tool_call_id in got
                      and got[x.tool_call_id].text.strip() == x.text.strip())
            for name in ("bash", "str_replace_editor")}
    assert same == {"bash": 25, "str_replace_editor": 0}
    assert sum(1 for x in tl.messages if x.role == "tool" and x.tool_call_id not in got) == 3
    (cu,), (tu,) = [x for x in chat.messages if x.role == "user"], [x for x in tl.messages if x.role == "user"]
    assert cu.text.startswith(tu.text.strip()) and "<reminder>" in cu.text and "<reminder>" not in tu.text
    assert tl.metadata["reconstructed"] and "reconstructed" not in chat.metadata
