"""Pi coding agent sessions (v1-v3): the current branch, compactions as recorded history edits,
model and thinking-level changes, recorded usage, a torn line recovered.

Fixtures (tests/fixtures/pi/) are written from pi-mono's docs/session.md and
packages/coding-agent/src/core/session-manager.ts: ``v3_tree`` (a tree with an abandoned branch,
a branch summary, a model and thinking-level change, a compaction by ``firstKeptEntryId``,
extension entries, a label and a session name), ``v2_hook`` (the v2 ``hookMessage`` role, ``!`` and
``!!`` bash executions, an image, an aborted call), ``v2_cycle`` (parent links in a loop) and
``v1_torn`` (the legacy linear layout, a compaction by ``firstKeptEntryIndex`` and two entries run
together on the last line, as in the real ``session.jsonl``).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from context_forensics import importers
from context_forensics.cli import app
from context_forensics.errors import InputError
from context_forensics.importers.base import ImportContext, read_head
from context_forensics.importers.pi.reader import MAX_CANDIDATES, split_torn
from context_forensics.records import KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT
from helpers import FIXTURES, corpus, parse

HERE = FIXTURES / "pi"
V3 = HERE / "v3_tree.jsonl"
V2 = HERE / "v2_hook.jsonl"
CYCLE = HERE / "v2_cycle.jsonl"
V1 = HERE / "v1_torn.jsonl"


def edits(messages):
    return [(i, m.meta["history_edit"]) for i, m in enumerate(messages) if m.kind == KIND_HISTORY_EDIT]


# ---------------------------------------------------------------- v3: the tree


def test_v3_follows_the_current_branch_and_leaves_the_abandoned_one_out():
    fmt, (s,), ctx = parse(V3)
    assert fmt == "pi" and s.metadata["agent"] == "pi" and s.metadata["version"] == 3
    texts = [m.text for m in s.messages]
    # b0000001 / b0000002 are the branch the user left through /tree: not in any later call's context.
    assert not any("rewriting" in t.lower() for t in texts)
    assert s.metadata["entries_off_branch"] == 2 and ctx.skipped["entry on another branch"] == 2
    assert s.metadata["leaves"] == 2
    assert [(m.role, m.kind) for m in s.messages] == [
        ("user", "message"), ("assistant", "message"), ("tool", "message"), ("assistant", "message"),
        ("user", "message"),  # branch_summary, as Pi wraps it for the model
        ("user", "message"), ("assistant", "message"),  # c1 (first kept), c2
        ("system", KIND_HISTORY_EDIT), ("user", KIND_COMPACTION_SUMMARY),
        ("user", "message"),  # custom_message (extension text in the context)
        ("user", "message"), ("assistant", "message"),
    ]
    assert s.messages[4].text.startswith("The following is a summary of a branch")
    assert "rewrite of cart.py was tried and abandoned" in s.messages[4].text
    assert s.messages[9].text == "Open todos: 2" and s.messages[9].meta["custom_type"] == "todo-ext"
    # custom (extension state), label and session_info make no message; the name is the title.
    assert s.title == "Coupon after tax" and s.metadata["name"] == "Coupon after tax"
    assert "open" not in " ".join(texts)


def test_v3_compaction_is_a_recorded_edit_of_the_messages_before_the_first_kept_entry():
    _, (s,), _ = parse(V3)
    ((at, edit),) = edits(s.messages)
    assert at == 7
    # firstKeptEntryId c0000001 is message 5: messages 0-4 were summarized.
    assert edit == {"type": "compaction", "action": "summarized", "ranges": [[0, 5]],
                    "source": "pi:compaction.firstKeptEntryId", "tokens_before": 2700}
    assert s.messages[5].meta["entry"] == "c0000001"
    summary = s.messages[at + 1]
    assert summary.kind == KIND_COMPACTION_SUMMARY and summary.meta["tokens_before"] == 2700
    assert summary.text.startswith("The conversation history before this point was compacted")
    assert "public API of cart.py must not change" in summary.text
    assert s.metadata["compactions"] == 1


def test_v3_model_and_thinking_level_changes_and_usage_with_cost():
    _, (s,), ctx = parse(V3)
    calls = [m for m in s.messages if m.role == "assistant"]
    assert [m.model for m in calls] == ["claude-sonnet-4-5", "claude-sonnet-4-5", "gpt-5.1-codex", "gpt-5.1-codex"]
    assert [m.meta["provider"] for m in calls] == ["anthropic", "anthropic", "openai", "openai"]
    assert [m.meta["thinking_level"] for m in calls] == ["low", "low", "high", "high"]
    assert [c["model"] for c in s.metadata["model_changes"]] == ["claude-sonnet-4-5", "gpt-5.1-codex"]
    assert s.metadata["thinking_level_changes"] == 2
    assert any("model changed" in w for w in ctx.warnings)
    # Pi's input excludes the cached part: the call read input + cacheRead + cacheWrite.
    u = calls[0].usage
    assert (u.prompt_tokens, u.completion_tokens, u.cache_read_tokens, u.cache_creation_tokens) == (2412, 40, 0, 2400)
    assert calls[1].usage.prompt_tokens == 8 + 2400 + 120
    assert calls[3].usage.prompt_tokens == 300 + 1024
    assert calls[0].meta["cost"]["total"] == pytest.approx(0.009636) and calls[0].meta["total_tokens"] == 2452
    assert calls[0].meta["stop_reason"] == "toolUse"
    assert calls[0].tool_calls[0].name == "read" and json.loads(calls[0].tool_calls[0].arguments) == {"path": "cart.py"}
    assert calls[0].parts == ({"type": "thinking", "text": "Read cart.py first.", "signature_bytes": 4},)
    assert s.messages[2].tool_call_id == "call_1" and s.messages[2].name == "read"
    assert s.metadata["recorded_calls"] == 4


# ---------------------------------------------------------------- v2


def test_v2_hook_message_bash_executions_images_and_an_aborted_call():
    fmt, (s,), ctx = parse(V2)
    assert fmt == "pi" and s.metadata["version"] == 2
    assert s.metadata["parent_session"].endswith("_11111111-2222-4333-8444-555555555555.jsonl")
    roles = [m.role for m in s.messages]
    assert roles == ["user", "user", "user", "assistant", "assistant"]
    img = s.messages[0]
    assert img.text == "What is in this screenshot?" and img.parts[0]["type"] == "image"
    assert (img.parts[0]["width"], img.parts[0]["height"]) == (1, 1)
    assert s.messages[1].text == "branch main, 2 files changed" and s.messages[1].meta["source"] == "hookMessage"
    # A `!` command is sent as Pi's text of it; a `!!` one (excludeFromContext) is not sent at all.
    assert s.messages[2].text == "Ran `git diff --stat`\n```\napi.py | 4 ++--\n```\n\nCommand exited with code 1"
    assert "netrc" not in " ".join(m.text for m in s.messages)
    assert ctx.skipped["bashExecution excluded from the context (!!)"] == 1
    aborted, answer = s.messages[3], s.messages[4]
    assert aborted.usage is None and aborted.meta["stop_reason"] == "aborted"  # zeros are no usage
    assert answer.usage.prompt_tokens == 1005 and s.metadata["recorded_calls"] == 1


def test_a_parent_link_cycle_is_cut_with_a_warning():
    _, (s,), ctx = parse(CYCLE)
    assert [m.text for m in s.messages] == ["first", "second", "third"]
    assert any("cycle at entry f0000003" in w for w in ctx.warnings)


# ---------------------------------------------------------------- v1 and the torn line


def test_v1_torn_line_yields_both_entries_and_warns_with_its_line():
    _, (s,), ctx = parse(V1)
    assert s.metadata["version"] == 1 and "leaves" not in s.metadata
    assert [m.text for m in s.messages[-2:]] == ["Tests ported.", "Thanks."]
    assert ctx.skipped["torn line recovered"] == 1
    assert any(w.startswith(f"{V1}:11: 2 JSON objects run together") for w in ctx.warnings)
    # firstKeptEntryIndex 6 (the header is entry 0) is the user's "Do the parser now." (message 4).
    ((at, edit),) = edits(s.messages)
    assert at == 6 and edit["ranges"] == [[0, 4]] and edit["tokens_before"] == 3400
    assert edit["source"] == "pi:compaction.firstKeptEntryIndex"
    assert s.messages[4].text == "Do the parser now."
    assert [m.meta.get("thinking_level") for m in s.messages if m.role == "assistant"] == [
        "off", "off", "medium", "medium"]


def test_split_torn_is_exact_and_bounded():
    a, b = b'{"type":"message","x":"}{"}', b'{"type":"label","y":[{"z":1}]}'
    assert split_torn(a + b) == [{"type": "message", "x": "}{"}, {"type": "label", "y": [{"z": 1}]}]
    assert split_torn(a + b + a) is not None and len(split_torn(a + b + a)) == 3
    assert split_torn(a) is None  # one valid value: nothing torn
    assert split_torn(a + b'{"type":"mess') is None  # the second object cut off: not explained
    assert split_torn(b"[1]" + b) is None
    # More boundaries than the bound, none of them a real one: given up, not searched.
    hostile = b'{"a":"' + b"}{" * (MAX_CANDIDATES + 5) + b'"'
    assert split_torn(hostile) is None


def test_a_torn_last_line_cut_short_is_a_truncated_line_and_bad_lines_cost_only_themselves(tmp_path):
    lines = V1.read_bytes().splitlines()
    p = tmp_path / "s.jsonl"
    p.write_bytes(b"\n".join(lines[:3] + [b"[1, 2]", b"{not json"] + lines[3:10]) + b"\n" + lines[10][:-20] + b"\n")
    _, (s,), ctx = parse(p, "pi")
    assert any("invalid JSON" in w for w in ctx.warnings)
    assert any("not a JSON object" in w for w in ctx.warnings)
    assert any("last line is truncated" in w for w in ctx.warnings)
    # The cut line held the last two entries: neither is read; everything before it is.
    assert s.messages[-1].text == "Now the tests." and len(s.messages) == 9


def test_no_header_is_an_error_naming_the_file(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text(V3.read_text().split("\n", 1)[1])
    assert not importers.get("pi").sniff(p, read_head(p))
    with pytest.raises(InputError) as e:
        list(importers.get("pi").parse(p, ImportContext(path=p)))
    assert str(p) in str(e.value.where) and "session header" in str(e.value)


def test_sniff_takes_pi_files_only():
    pi = importers.get("pi")
    for f in (V1, V2, V3, CYCLE):
        assert importers.detect(f).name == "pi"
    for other in FIXTURES.rglob("*.jsonl"):
        if "pi" not in other.relative_to(FIXTURES).parts:  # fixtures/pi and fixtures/usage/pi
            assert not pi.sniff(other, read_head(other)), other


# ---------------------------------------------------------------- replay


def _replay(tmp_path, path, *args):
    db = str(tmp_path / "s.db")
    run = CliRunner().invoke
    r = run(app, ["ingest", str(path), "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    sid = json.loads(r.stdout)["files"][0]["sessions"][0]
    r = run(app, ["replay", sid, "--db", db, "--json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_replay_shows_the_compaction_and_the_window_after_it_drops_what_it_summarized(tmp_path):
    rep = _replay(tmp_path, V3)["replays"][0]
    assert rep["policy"] == "recorded"
    steps = rep["steps"]
    assert [st["message_seq"] for st in steps] == [1, 3, 6, 11]
    assert all(not st["events"] for st in steps[:3])
    (ev,) = steps[3]["events"]
    assert (ev["type"], ev["edit"], ev["action"], ev["recorded"], ev["removed"], ev["recorded_tokens_before"]) == (
        "history_edit", "compaction", "summarized", True, 5, 2700)
    assert steps[3]["summarized"] == [0, 1, 2, 3, 4]
    at = _replay(tmp_path, V3, "--at", "4")
    in_window = {m["seq"] for m in at["messages"] if m["in_window"]}
    assert in_window.isdisjoint({0, 1, 2, 3, 4})
    assert {5, 6, 8, 9, 10} <= in_window  # the kept tail, the summary, what came after


def test_replay_of_the_v1_compaction_by_index(tmp_path):
    steps = _replay(tmp_path, V1)["replays"][0]["steps"]
    hit = [st for st in steps if st["events"]]
    assert len(hit) == 1 and hit[0]["message_seq"] == 9 and hit[0]["summarized"] == [0, 1, 2, 3]


# ---------------------------------------------------------------- the real files (v1)


def _counts(s):
    return Counter(m.role if m.kind == "message" else m.kind for m in s.messages)


def test_corpus_before_compaction_two_compactions():
    _, (s,), ctx = parse(corpus("pi/pi-mono/before-compaction.jsonl"))
    # 990 message entries (484 assistant, 448 toolResult, 55 user, 3 bashExecution) + 2 markers
    # + 2 summaries; 471 assistant messages record non-zero usage (13 aborted ones record zeros).
    assert len(s.messages) == 994
    assert _counts(s) == {"assistant": 484, "tool": 448, "user": 58, KIND_HISTORY_EDIT: 2,
                          KIND_COMPACTION_SUMMARY: 2}
    assert s.metadata["recorded_calls"] == 471
    # firstKeptEntryIndex 293 and 551: the user messages "i reviwed ..." and "can leave it".
    assert [(at, e["ranges"], e["tokens_before"]) for at, e in edits(s.messages)] == [
        (354, [[0, 288]], 175004), (624, [[0, 547]], 185014)]
    assert s.messages[288].text.startswith("i reviwed what we have") and s.messages[547].text == "can leave it"
    assert s.metadata["model_changes"] and s.metadata["thinking_level_changes"] == 5
    assert not ctx.warnings


def test_corpus_large_session():
    _, (s,), _ = parse(corpus("pi/pi-mono/large-session.jsonl"))
    assert len(s.messages) == 914 and _counts(s) == {"assistant": 453, "tool": 373, "user": 88}
    assert s.metadata["recorded_calls"] == 439 and s.metadata["thinking_level_changes"] == 103
    assert s.messages[1].model == "gpt-5.1-codex" and s.messages[1].meta["stop_reason"] == "aborted"
    assert s.model == "claude-sonnet-4-5"


def test_corpus_session_torn_line_recovered():
    path = corpus("pi/pi-mono/session.jsonl")
    _, (s,), ctx = parse(path)
    # 463 lines; line 440 holds an assistant entry and a user entry run together: 454 message
    # entries in all, + the compaction's marker and summary.
    assert len(s.messages) == 456
    assert _counts(s) == {"assistant": 220, "tool": 189, "user": 45, KIND_HISTORY_EDIT: 1, KIND_COMPACTION_SUMMARY: 1}
    assert [w for w in ctx.warnings if "run together" in w] == [
        f"{path}:440: 2 JSON objects run together on one line (a write that lost its newline); read each of them"]
    done = next(i for i, m in enumerate(s.messages) if m.timestamp and m.timestamp.startswith("2025-12-17T20:52:31"))
    assert s.messages[done].text == "Done." and s.messages[done + 1].text == "ok"
    ((at, e),) = edits(s.messages)
    assert at == 454 and e["ranges"] == [[0, 346]] and e["tokens_before"] == 186045
