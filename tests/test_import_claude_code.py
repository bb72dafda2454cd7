"""Claude Code transcripts: main path, split calls, parallel tools, compaction, sub-agents."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from pathlib import Path

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers.base import ImportContext, read_head
from helpers import CORPUS, FIXTURES, corpus, parse

HERE = FIXTURES / "claude_code"
SID = "11111111-2222-4333-8444-555555555555"
SUBAGENTS = HERE / SID / "subagents"


def shape(messages):
    return [(m.role, m.kind) for m in messages]


# ---------------------------------------------------------------- hand-written fixtures


def test_session_fixture_follows_the_main_path():
    fmt, sessions, ctx = parse(HERE / "session.jsonl")
    assert fmt == "claude_code"
    (s,) = sessions
    assert shape(s.messages) == [
        ("user", "message"),
        ("assistant", "message"),  # msg_A: 4 records (thinking, text, Read, Grep)
        ("tool", "message"),
        ("tool", "message"),
        ("assistant", "message"),  # msg_B: Edit
        ("tool", "message"),
        ("user", "message"),  # the rewound prompt, not the abandoned one
        ("assistant", "message"),
        ("system", "compaction_boundary"),
        ("user", "compaction_summary"),
        ("user", "message"),  # local-command caveat (isMeta)
        ("user", "message"),  # /model command
        ("user", "message"),  # system/local_command output, sent as user text
        ("user", "message"),  # text + image
        ("assistant", "message"),
    ]
    texts = " ".join(m.text for m in s.messages)
    assert "pytest-timeout" not in texts  # the abandoned branch
    assert "API Error" not in texts  # synthetic error message
    assert "sidechain prompt" not in texts
    assert ctx.skipped["off-chain"] == 2
    assert ctx.skipped["sidechain"] == 1
    assert ctx.skipped["api error message"] == 1
    assert ctx.skipped["progress"] == 2
    assert ctx.skipped["file-history-snapshot"] == 1
    assert ctx.skipped["queue-operation"] == 1
    assert ctx.skipped["system:stop_hook_summary"] == 1
    assert ctx.skipped["system:turn_duration"] == 1
    assert ctx.skipped["weird-new-thing"] == 1
    assert any("sidechain" in w for w in ctx.warnings)


def test_split_call_merged_with_usage_once():
    _, (s,), _ = parse(HERE / "session.jsonl")
    a = s.messages[1]
    assert a.text == "I'll read the test and grep for sleeps."
    assert [(c.name, c.id) for c in a.tool_calls] == [("Read", "toolu_1"), ("Grep", "toolu_2")]
    assert a.tool_calls[0].arguments == '{"file_path": "tests/test_login.py"}'
    assert a.parts == ({"type": "thinking", "text": "The test probably sleeps.", "signature_bytes": 12},)
    # input 10 + cache_creation 100 + cache_read 1000; the last record has the final output count
    assert a.usage.to_dict() == {
        "prompt_tokens": 1110, "completion_tokens": 42, "cache_read_tokens": 1000, "cache_creation_tokens": 100,
    }
    assert a.meta["records"] == 4 and a.meta["request"] == {"model": "claude-opus-4-6"}
    assert a.model == "claude-opus-4-6"
    assert sum(1 for m in s.messages if m.usage) == 4  # msg_A, msg_B, msg_D, msg_E


def test_parallel_tool_results_and_names():
    _, (s,), _ = parse(HERE / "session.jsonl")
    read, grep, edit = s.messages[2], s.messages[3], s.messages[5]
    assert (read.name, read.tool_call_id) == ("Read", "toolu_1")  # hangs off a sibling record
    assert read.text.startswith("1\u2192def test_login():")
    assert (grep.name, grep.text) == ("Grep", "tests/test_login.py:2")
    assert grep.parts[0]["type"] == "image" and (grep.parts[0]["width"], grep.parts[0]["height"]) == (640, 480)
    assert "data" not in grep.parts[0]  # never the base64 payload
    assert edit.meta["is_error"] is True and edit.name == "Edit"


def test_compaction_and_command_records():
    _, (s,), _ = parse(HERE / "session.jsonl")
    boundary, summary = s.messages[8], s.messages[9]
    assert boundary.meta["trigger"] == "auto" and boundary.meta["preTokens"] == 1500
    assert boundary.meta["compactMetadata"] == {"trigger": "auto", "preTokens": 1500}
    assert summary.text.startswith("This session is being continued")
    caveat, command, stdout, shot = s.messages[10:14]
    assert caveat.meta["is_meta"] is True
    assert command.meta["command"] == "/model"
    assert stdout.meta == {"uuid": "l-01", "system_subtype": "local_command", "command_wrapper": "local-command-stdout"}
    assert shot.text == "What does this screenshot show?"
    assert (shot.parts[0]["width"], shot.parts[0]["height"]) == (1280, 720)


def test_session_fields():
    _, (s,), _ = parse(HERE / "session.jsonl")
    assert s.external_id == SID and s.global_id is True and s.parent_external_id is None
    assert s.title == "Fix the flaky login test"  # the summary record
    assert s.model == "claude-opus-4-6"  # 3 calls, against 1 sonnet call
    assert s.started_at == "2026-02-01T10:01:00.000Z"  # the first conversation record, not the hook
    assert s.metadata["versions"] == ["2.1.40"]
    assert s.metadata["cwd"] == "/home/dev/proj" and s.metadata["gitBranch"] == "main"
    assert s.metadata["model_calls"] == {"claude-opus-4-6": 3, "claude-sonnet-4-5-20250929": 1}
    assert s.metadata["records"]["progress"] == 2


def test_messages_stream_lazily():
    path = HERE / "session.jsonl"
    ctx = ImportContext(path=path)
    (s,) = list(importers.get("claude_code").parse(path, ctx))
    assert inspect.isgenerator(s.messages)
    assert next(iter(s.messages)).text.startswith("Fix the flaky")


def test_subagent_file_is_a_child_session():
    _, (s,), ctx = parse(SUBAGENTS / "agent-a1b2c3d.jsonl")
    assert (s.external_id, s.parent_external_id, s.global_id) == ("a1b2c3d", SID, False)
    assert s.metadata["role"] == "subagent"
    assert s.title == "Find every call to time.sleep in tests/"
    assert shape(s.messages) == [("user", "message"), ("assistant", "message"), ("tool", "message"),
                                 ("assistant", "message")]
    assert s.messages[2].name == "Grep"
    assert s.model == "claude-haiku-4-5-20251001"
    assert ctx.skipped == Counter({"progress": 1})


def test_compaction_call_file_keeps_records_with_outside_parents():
    _, (s,), ctx = parse(SUBAGENTS / "agent-acompact-0f0f0f.jsonl")
    assert s.external_id == "acompact-0f0f0f" and s.parent_external_id == SID
    assert s.metadata["role"] == "compaction_call"
    assert shape(s.messages) == [("user", "message")] * 2 + [("assistant", "message")]
    assert s.messages[0].meta["is_meta"] is True
    assert s.messages[2].usage.prompt_tokens == 1482
    assert not ctx.warnings


def test_truncated_last_line_is_a_warning():
    _, (s,), ctx = parse(HERE / "truncated.jsonl")
    assert [m.text for m in s.messages] == ["hello", "hi"]
    assert ctx.skipped["truncated line"] == 1
    assert any("truncated" in w and ":3:" in w for w in ctx.warnings)


def test_malformed_middle_line_is_skipped_counted_and_named():
    # Issue 9 item 11: one bad line used to fail the whole file; now it is skipped with its
    # line number and whole reason, and the rest is kept.
    _, (s,), ctx = parse(HERE / "broken.jsonl", "claude_code")
    assert [m.text for m in s.messages] == ["hello", "hi"]
    assert ctx.skipped["invalid JSON line"] == 1 and "truncated line" not in ctx.skipped
    (w,) = ctx.warnings
    assert w.endswith("broken.jsonl:2: invalid JSON (Expecting property name enclosed in double quotes at "
                      "column 23); skipped this line, kept the rest")


def _chain(tmp_path, bad: str) -> Path:
    """u1 -> a1 -> u2 -> a2, with a1's line replaced by ``bad(a1_line)``."""
    def rec(uid, parent, role, text):
        msg = {"role": role, "content": [{"type": "text", "text": text}]}
        if role == "assistant":
            msg.update(id=f"msg_{uid}", model="claude-opus-4-6", usage={"input_tokens": 5, "output_tokens": 1})
        return json.dumps({"parentUuid": parent, "isSidechain": False, "sessionId": "s", "type": role,
                           "message": msg, "uuid": uid, "timestamp": "2026-02-01T10:00:00.000Z"})
    lines = [rec("u1", None, "user", "fix the bug"), rec("a1", "u1", "assistant", "CTRL"),
             rec("u2", "a1", "user", "and the test"), rec("a2", "u2", "assistant", "done")]
    lines[1] = bad(lines[1])
    p = tmp_path / "chain.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_chain_record_with_a_raw_control_character_is_skipped_and_the_chain_kept(tmp_path):
    p = _chain(tmp_path, lambda line: line.replace("CTRL", "a\x01b"))
    _, (s,), ctx = parse(p, "claude_code")
    # its uuid and parent are read from the raw line, so the records after it still reach u1
    assert [m.text for m in s.messages] == ["fix the bug", "and the test", "done"]
    assert ctx.skipped["invalid JSON line"] == 1
    col = p.read_text().splitlines()[1].index("\x01") + 1
    assert ctx.warnings == [f"{p}:2: invalid JSON (Invalid control character at column {col}); skipped this "
                            "line, kept the rest"]


def test_a_truncated_chain_record_is_bridged_and_the_guess_is_said(tmp_path):
    p = _chain(tmp_path, lambda line: line[:60])  # its own uuid (written last) is lost
    _, (s,), ctx = parse(p, "claude_code")
    assert [m.text for m in s.messages] == ["fix the bug", "and the test", "done"]
    assert ctx.skipped["invalid JSON line"] == 1
    bad, joined = ctx.warnings
    assert "chain.jsonl:2: invalid JSON (" in bad
    assert "chain.jsonl:2: parent record a1 of line 3 is not in this file; taken to be the unreadable line 2" in joined


def test_a_file_with_no_readable_line_is_an_error(tmp_path):
    p = tmp_path / "junk.jsonl"
    p.write_text('{"type": "user", oops\n{"type":\n')
    with pytest.raises(InputError, match="no line could be read: 2 line") as e:
        parse(p, "claude_code")
    assert e.value.where.endswith("junk.jsonl:1:18")


def test_corpus_session_with_a_bad_line_in_the_middle_keeps_the_rest(tmp_path):
    # The 2.9 MB session with a raw control character written into a main-chain assistant
    # record (line 806, one text block of call msg_01MZw…; the call's other record, line 807,
    # stays): 324 messages as without the damage, one skipped line.
    src = corpus(f"{SPOTTER}/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    lines = src.read_bytes().split(b"\n")
    assert json.loads(lines[805])["type"] == "assistant"
    lines[805] = lines[805].replace(b'"type":"text"', b'"type":"te\x01xt"', 1)
    p = tmp_path / "damaged.jsonl"
    p.write_bytes(b"\n".join(lines))
    _, (s,), ctx = parse(p, "claude_code")
    assert len(s.messages) == 324
    assert ctx.skipped["invalid JSON line"] == 1 and "off-chain" not in ctx.skipped
    col = lines[805].decode().index("\x01") + 1  # the whole reason, with the column: nothing cut
    assert ctx.warnings == [f"{p}:806: invalid JSON (Invalid control character at column {col}); skipped this "
                            "line, kept the rest"]


def test_empty_file_is_an_error(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_text("\n\n")
    with pytest.raises(InputError, match="empty"):
        parse(p, "claude_code")


def test_odd_records_do_not_crash(tmp_path):
    p = tmp_path / "odd.jsonl"
    p.write_text(
        '[1, 2]\n'
        '{"type":"user","uuid":"a","parentUuid":null,"sessionId":"s","message":{"content":42}}\n'
        '{"type":"assistant","uuid":"b","parentUuid":"a","sessionId":"s","message":{"id":"m","content":"plain '
        'text","usage":{"output_tokens":"x"}}}\n{"type":"user","uuid":"c","parentUuid":"b","sessionId":"s","message":{"content":[{"type":"tool_result","tool_use_id":"nope","content":{"k":1}}]}}\n'
    )
    _, (s,), ctx = parse(p, "claude_code")
    assert shape(s.messages) == [("assistant", "message"), ("tool", "message")]
    assert s.messages[0].text == "plain text" and s.messages[0].usage is None
    assert s.messages[1].text == '{"k": 1}' and s.messages[1].name is None
    assert ctx.skipped["malformed record"] == 1 and ctx.skipped["malformed user record"] == 1
    assert s.global_id is False  # "s" is not a UUID


def test_sniff():
    imp = importers.get("claude_code")
    for p in [HERE / "session.jsonl", HERE / "truncated.jsonl", *SUBAGENTS.glob("*.jsonl")]:
        assert imp.sniff(p, read_head(p)), p
    for p in (FIXTURES / "codex").glob("*.jsonl"):
        assert not imp.sniff(p, read_head(p)), p
    assert not imp.sniff(Path("x.jsonl"), b'{"type": "user", "content": "hi"}\n')
    assert imp.sniff(Path("x.jsonl"), b'{"type":"summary","summary":"s","leafUuid":"u"}\n')
    # a first record longer than the 64 KiB head: decided on the key combination
    huge = b'{"parentUuid":null,"isSidechain":false,"sessionId":"s","type":"user","message":{"content":"' + b"x" * 70000
    assert imp.sniff(Path("x.jsonl"), huge[: 64 * 1024])


# ---------------------------------------------------------------- the real corpus
# Expected numbers were counted independently of the importer with a short script over the
# raw records: user/assistant records by type, tool_result blocks, compact_boundary records,
# and usage per message.id (prompt = input + cache_creation + cache_read, output = the
# largest output_tokens among a call's records, summed over distinct message.ids).

SPOTTER = "claude-code-jsonl/spotter"


def test_corpus_short_session():
    _, (s,), ctx = parse(corpus(f"{SPOTTER}/short.jsonl"))
    assert s.external_id == "55604662-cf2a-4331-851a-ec234028f8ca"
    # 1 prompt, 1 call in 5 records (Bash + Glob on a side branch), 2 rejected tool uses,
    # the interrupt notice, and 2 system/local_command records (/model)
    assert [m.role for m in s.messages] == ["user", "assistant", "tool", "tool", "user", "user", "user"]
    a = s.messages[1]
    assert a.meta["records"] == 5 and [c.name for c in a.tool_calls] == ["Bash", "Glob"]
    assert (a.usage.prompt_tokens, a.usage.completion_tokens) == (3 + 13835 + 11515, 13)
    assert [m.name for m in s.messages[2:4]] == ["Bash", "Glob"]
    assert all(m.meta.get("is_error") for m in s.messages[2:4])
    assert s.messages[5].meta["command"] == "/model"
    assert ctx.skipped == Counter({"progress": 3, "file-history-snapshot": 1})
    assert s.title == "mix phx.server doesnt seem to start"


def test_corpus_tool_heavy_parallel_calls():
    _, (s,), ctx = parse(corpus(f"{SPOTTER}/tool_heavy.jsonl"))
    # 13 user records = 6 tool results + 7 user texts; 9 assistant records = 4 calls;
    # 2 system/local_command records become user text
    assert Counter(m.role for m in s.messages) == Counter({"user": 9, "tool": 6, "assistant": 4})
    web = s.messages[12]
    assert [c.name for c in web.tool_calls] == ["WebSearch", "Glob"]  # Glob is off the parent chain
    assert {m.name for m in s.messages[13:15]} == {"WebSearch", "Glob"}
    assert sum(m.usage.completion_tokens for m in s.messages if m.usage) == 212
    assert "off-chain" not in ctx.skipped


@pytest.mark.parametrize(
    "name, n, counts, out_sum, prompt_max, trigger, pre_tokens, model",
    [
        # 180 user records = 177 tool results + 2 prompts + 1 compact summary; 278 assistant
        # records = 143 calls
        ("8463c716-a2ea-4c14-9efa-87158ebd9f20", 324,
         {"assistant": 143, "tool": 177, "user": 3, "system": 1}, 40320, 167094, "auto", 167731,
         "claude-opus-4-6"),
        # 249 user records = 242 tool results + 6 user texts + 1 compact summary; 408
        # assistant records = 217 calls (133 haiku, 84 opus)
        ("ae4a77f8-aedd-4bc1-888f-c94edc91af04", 467,
         {"assistant": 217, "tool": 242, "user": 7, "system": 1}, 49467, 141787, "manual", 142431,
         "claude-haiku-4-5-20251001"),
    ],
)
def test_corpus_long_sessions_with_compaction(name, n, counts, out_sum, prompt_max, trigger, pre_tokens, model):
    _, (s,), ctx = parse(corpus(f"{SPOTTER}/{name}.jsonl"))
    ms = s.messages
    assert len(ms) == n
    assert Counter(m.role for m in ms) == Counter(counts)
    assert s.external_id == name and s.global_id and s.model == model
    with_usage = [m for m in ms if m.usage]
    assert len(with_usage) == counts["assistant"]
    assert sum(m.usage.completion_tokens for m in with_usage) == out_sum
    assert max(m.usage.prompt_tokens for m in with_usage) == prompt_max
    (b,) = [i for i, m in enumerate(ms) if m.kind == "compaction_boundary"]
    assert (ms[b].meta["trigger"], ms[b].meta["preTokens"]) == (trigger, pre_tokens)
    assert ms[b + 1].kind == "compaction_summary"
    assert ms[b + 1].text.startswith("This session is being continued from a previous conversation")
    assert b > 100  # the pre-compaction history is kept, before the boundary
    assert "off-chain" not in ctx.skipped and not ctx.warnings
    tool_ids = {c.id for m in ms for c in m.tool_calls}
    assert all(m.tool_call_id in tool_ids for m in ms if m.role == "tool")


def test_corpus_long_session_skips():
    _, _, ctx = parse(corpus(f"{SPOTTER}/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"))
    assert ctx.skipped == Counter({
        "progress": 1117, "file-history-snapshot": 13, "queue-operation": 1,
        "system:stop_hook_summary": 2, "system:turn_duration": 1,
    })


@pytest.mark.parametrize(
    "rel, n, role, roles",
    [
        ("8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-a7be2f0.jsonl", 33, "subagent",
         {"user": 1, "assistant": 13, "tool": 19}),
        ("8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-acompact-f46190.jsonl", 7, "compaction_call",
         {"user": 6, "assistant": 1}),
        ("ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl", 16, "subagent",
         {"user": 1, "assistant": 3, "tool": 12}),
        ("ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-acompact-946d2b.jsonl", 2, "compaction_call",
         {"user": 1, "assistant": 1}),
    ],
)
def test_corpus_subagent_files(rel, n, role, roles):
    _, (s,), _ = parse(corpus(f"{SPOTTER}/{rel}"))
    assert len(s.messages) == n and Counter(m.role for m in s.messages) == Counter(roles)
    assert s.parent_external_id == rel.split("/")[0]
    assert s.external_id == Path(rel).stem.removeprefix("agent-")
    assert s.metadata["role"] == role and s.global_id is False


def test_sniff_claims_only_claude_code_files_in_the_corpus():
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    imp = importers.get("claude_code")
    for p in sorted(CORPUS.rglob("*")):
        if p.is_file():
            mine = p.relative_to(CORPUS).parts[0] == "claude-code-jsonl"
            assert imp.sniff(p, read_head(p)) == mine, p


def test_summary_of_another_session_is_not_the_title(tmp_path):
    # Claude Code writes summaries of earlier sessions at the top of a new file
    lines = (HERE / "truncated.jsonl").read_text().splitlines()[:2]
    p = tmp_path / "s.jsonl"
    p.write_text('{"type":"summary","summary":"Somebody else","leafUuid":"elsewhere"}\n' + "\n".join(lines) + "\n")
    _, (s,), ctx = parse(p)
    assert s.title == "hello"
    assert ctx.skipped["summary"] == 1


def test_agent_id_alone_does_not_make_a_main_file_a_subagent(tmp_path):
    lines = (HERE / "truncated.jsonl").read_text().splitlines()[:2]
    first = json.loads(lines[0])
    first["agentId"] = "zzz"  # a stray field on a non-sidechain record
    p = tmp_path / "main.jsonl"
    p.write_text(json.dumps(first) + "\n" + lines[1] + "\n")
    _, (s,), _ = parse(p)
    assert s.parent_external_id is None and s.global_id and "role" not in s.metadata


def test_records_without_parent_links_are_read_in_file_order():
    # hand-made transcripts (no parentUuid, a "tool_result" record type, string contents)
    fmt, (s,), ctx = parse(HERE / "no_links.jsonl")
    assert fmt == "claude_code"
    assert [(m.role, m.text) for m in s.messages] == [
        ("user", "Implement the lanes feature"),
        ("assistant", "I'll spawn a helper"),
        ("assistant", ""),
        ("tool", "Agent spawned"),
        ("assistant", "Done"),
    ]
    assert s.messages[2].tool_calls[0].name == "Task" and s.messages[3].name == "Task"
    assert ctx.skipped == Counter({"system:other": 1})


def test_a_bad_line_does_not_make_a_sidechain_file_a_main_session(tmp_path):
    # Sub-agent records in a file not named agent-*.jsonl: all sidechain records with an agentId.
    # The stub an unreadable line leaves in the index is no record of either kind.
    lines = (SUBAGENTS / "agent-a1b2c3d.jsonl").read_text().splitlines()
    p = tmp_path / "renamed.jsonl"
    p.write_text("\n".join(lines[:2] + ['{"isSidechain": true, oops'] + lines[2:]) + "\n")
    _, (clean,), _ = parse(SUBAGENTS / "agent-a1b2c3d.jsonl")
    _, (s,), ctx = parse(p, "claude_code")
    assert s.metadata["role"] == "subagent" and s.parent_external_id == SID
    assert [m.text for m in s.messages] == [m.text for m in clean.messages]
    assert ctx.skipped["invalid JSON line"] == 1


MICRO = HERE / "microcompact" / "session.jsonl"


def test_microcompact_boundary_is_a_recorded_edit_that_clears_the_named_tool_results(tmp_path):
    """Claude Code's microcompact_boundary (microcompactMetadata: trigger, preTokens, tokensSaved,
    compactedToolIds) clears the results it names from the history sent from there on: a recorded
    history edit (type microcompact, action cleared) the replay applies at the marker and counts as
    a compaction. Before: the record was skipped as system:microcompact_boundary and every window
    after it held the cleared results in full."""
    from context_forensics.analysis.replay import replay_session
    from context_forensics.records import COMPACTION_EDIT_TYPES, read_history_edit
    from context_forensics.store.db import Store
    from context_forensics.store.ingest import ingest_paths

    fmt, [s], ctx = parse(MICRO)
    assert fmt == "claude_code" and not ctx.skipped and not ctx.warnings
    msgs = s.messages
    (at,) = [i for i, m in enumerate(msgs) if m.kind == "history_edit"]
    edit = read_history_edit(msgs[at].meta, at)
    assert (edit.type, edit.action, edit.source) == ("microcompact", "cleared", "claude_code:microcompact_boundary")
    cleared = [i for a, b in edit.ranges for i in range(a, b)]
    assert [msgs[i].tool_call_id for i in cleared] == ["toolu_01", "toolu_02"] and all(msgs[i].role == "tool"
                                                                                       for i in cleared)
    assert edit.figures["tokens_before"] == 39050 and edit.figures["tokens_saved"] == 17900
    assert edit.figures["trigger"] == "auto" and "microcompact" in COMPACTION_EDIT_TYPES
    db = tmp_path / "s.db"
    with Store.open(db) as st:
        ingest_paths(st, [MICRO])
        (row,) = st.sessions()
        rep = replay_session(st, row["id"], None, policy="recorded")
    last = rep.steps[-1]
    assert last["cleared"] == cleared and rep.summary["compactions"] == 1
    (ev,) = [e for e in last["events"] if e["type"] == "history_edit"]
    assert ev["edit"] == "microcompact" and ev["removed"] == 2 and ev["recorded_tokens_before"] == 39050
    assert ev["parted_pairs"] == 0  # a cleared result stays beside its call
    # the window after the boundary is what Claude Code sent: the recorded prompt, not the results in full
    assert last["window_tokens"] < rep.steps[-2]["window_tokens"]
    assert abs(last["window_tokens"] - last["recorded_prompt_tokens"]) <= 0.02 * last["recorded_prompt_tokens"]


def test_microcompact_boundary_naming_an_unknown_tool_id_says_so(tmp_path):
    lines = MICRO.read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    for r in recs:
        if r.get("subtype") == "microcompact_boundary":
            r["microcompactMetadata"]["compactedToolIds"] = ["toolu_01", "toolu_gone"]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    _, [s], ctx = parse(path)
    (m,) = [m for m in s.messages if m.kind == "history_edit"]
    assert m.meta["history_edit"]["unmatched_tool_ids"] == 1 and len(m.meta["history_edit"]["ranges"]) == 1
    assert any("1 of 2 compacted tool id(s)" in w for w in ctx.warnings)
