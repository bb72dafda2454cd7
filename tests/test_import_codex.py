"""Codex CLI rollouts: modern (usage before / after the items) and legacy layouts."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from pathlib import Path

import pytest

from context_forensics import importers
from context_forensics.importers.base import ImportContext, read_head
from helpers import CORPUS, FIXTURES, corpus, parse

HERE = FIXTURES / "codex"
MODERN = HERE / "rollout-2026-01-05T10-00-00-019b0000-aaaa-7bbb-8ccc-123456789abc.jsonl"
BEFORE = HERE / "rollout-2025-11-01T08-00-00-019a0000-1111-7222-8333-444444444444.jsonl"
LEGACY = HERE / "rollout-2025-08-20T09-15-00-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl"


def shape(messages):
    return [(m.role, m.kind) for m in messages]


# ---------------------------------------------------------------- modern layout


def test_modern_fixture_messages():
    fmt, (s,), ctx = parse(MODERN)
    assert fmt == "codex"
    assert shape(s.messages) == [
        ("system", "message"),  # session_meta.base_instructions
        ("developer", "message"),
        ("user", "message"),  # <user_instructions>
        ("user", "message"),  # <environment_context>
        ("user", "message"),  # the prompt, with an image
        ("assistant", "message"),  # text + shell call: one model call
        ("assistant", "reasoning"),  # its reasoning (written first in the rollout), after it: the next call reads it
        ("tool", "message"),
        ("assistant", "message"),  # apply_patch (custom tool)
        ("tool", "message"),
        ("system", "compaction_boundary"),
        ("user", "compaction_summary"),
        ("user", "message"),
        ("assistant", "message"),
        ("assistant", "reasoning"),
    ]
    ms = s.messages
    assert [m.meta.get("injected") for m in ms[2:5]] == ["user_instructions", "environment_context", None]
    img = ms[4].parts[0]
    assert (img["type"], img["width"], img["height"], img["media_type"]) == ("image", 800, 600, "image/png")
    assert ms[6].text == "" and ms[6].parts == ({"type": "encrypted_reasoning", "bytes": 16},)
    call = ms[5]
    assert call.text == "Let me run it." and [(c.name, c.id) for c in call.tool_calls] == [("shell", "call_a")]
    assert call.tool_calls[0].arguments == '{"command":["make","test"]}'
    assert (ms[7].name, ms[7].tool_call_id) == ("shell", "call_a")
    patch = ms[8].tool_calls[0]
    assert (patch.name, patch.id) == ("apply_patch", "call_b") and patch.arguments.startswith("*** Begin Patch")
    assert (ms[9].name, ms[9].text) == ("apply_patch", "Success. Updated x.py")
    assert ms[13].parts == ({"type": "web_search_call", "action": {"type": "search", "query": "ruff E501"},
                             "status": "completed"},)
    assert not any(c.name == "web_search" for m in ms for c in m.tool_calls)


def test_modern_usage_after_items_and_after_the_output():
    _, (s,), ctx = parse(MODERN)
    ms = s.messages
    assert [i for i, m in enumerate(ms) if m.usage] == [5, 8, 13]
    assert ms[5].usage.to_dict() == {
        "prompt_tokens": 5000, "completion_tokens": 120, "cache_read_tokens": 0,
        "reasoning_tokens": 64, "context_window": 272000,
    }
    # token_count written after the tool output still belongs to the apply_patch call
    assert (ms[8].usage.prompt_tokens, ms[8].usage.completion_tokens,
            ms[8].usage.cache_read_tokens) == (5400, 180, 4800)
    assert (ms[13].usage.prompt_tokens, ms[13].usage.completion_tokens) == (2600, 50)
    assert ctx.skipped["event_msg:token_count (repeat)"] == 1
    assert ctx.skipped["event_msg:token_count (no usage)"] == 1


def test_modern_compaction_and_models():
    _, (s,), ctx = parse(MODERN)
    ms = s.messages
    assert ms[10].meta == {"source": "compacted"}
    summary = ms[11]
    assert summary.text.startswith("Why does make test fail?\n\nAnother language model")
    assert summary.meta["replacement_items"] == 2
    assert ctx.skipped["event_msg:context_compacted (with compacted)"] == 1
    assert ms[5].model == "gpt-5-codex" and ms[13].model == "gpt-5.1-codex-max"
    assert ms[5].meta["request"] == {"model": "gpt-5-codex", "effort": "medium", "summary": "auto"}
    assert s.model == "gpt-5-codex"  # 2 turn contexts against 1
    assert any("gpt-5-codex -> gpt-5.1-codex-max" in w for w in ctx.warnings)


def test_modern_session_fields_and_skips():
    _, (s,), ctx = parse(MODERN)
    assert s.external_id == "019b0000-aaaa-7bbb-8ccc-123456789abc" and s.global_id
    assert s.title == "Why does make test fail?"
    assert s.started_at == "2026-01-05T10:00:00.000Z"
    assert s.metadata["cli_version"] == "0.77.0" and s.metadata["layout"] == "modern"
    assert s.metadata["models"] == {"gpt-5-codex": 2, "gpt-5.1-codex-max": 1}
    # instructions are also in the <user_instructions> message, so not repeated
    assert ctx.skipped["session_meta.instructions (also sent as a user message)"] == 1
    assert ctx.skipped["ghost_snapshot"] == 1
    assert ctx.skipped["event_msg:user_message"] == 1 and ctx.skipped["event_msg:agent_message"] == 1
    assert ctx.skipped["response_item:some_future_item"] == 1
    assert ctx.skipped["event_msg:task_complete"] == 1 and ctx.skipped["weird_top"] == 1
    assert ctx.skipped["turn_context"] == 3


def test_usage_written_before_the_items():
    _, (s,), ctx = parse(BEFORE)
    assert shape(s.messages) == [
        ("user", "message"), ("assistant", "message"), ("assistant", "reasoning"),
        ("tool", "message"), ("assistant", "message"),
    ]
    first, last = s.messages[1], s.messages[4]
    assert first.tool_calls[0].name == "shell" and last.text == "a.txt and b.txt"
    assert (first.usage.prompt_tokens, first.usage.completion_tokens, first.usage.reasoning_tokens) == (1000, 30, 10)
    assert (last.usage.prompt_tokens, last.usage.cache_read_tokens, last.usage.context_window) == (1100, 900, 258400)
    assert s.messages[2].usage is None  # never on the reasoning item when the call has output
    assert ctx.skipped["event_msg:token_count (repeat)"] == 1 and ctx.skipped["event_msg:agent_reasoning"] == 1


def test_a_calls_own_reasoning_is_not_in_its_window(tmp_path):
    """A reasoning item is the output of the call it precedes in the rollout: the next call reads
    it, that call did not. In codex-rollout-jsonl/acidicsoil (39 calls) step 38's reasoning, 11,456
    tokens by its call's reasoning_output_tokens, counted in step 38's own window: 49,684 against
    the recorded 40,766 (+10,467 after calibration); step 39 recorded 52,645, the reasoning
    included. Every call's window held its own reasoning."""
    import context_forensics as ctxf

    db = str(tmp_path / "c.db")
    for path in (BEFORE, MODERN):
        _, (s,), _ = parse(path)
        reasoning = [i for i, m in enumerate(s.messages) if m.kind == "reasoning"]
        calls = [i for i, m in enumerate(s.messages) if m.role == "assistant" and m.kind == "message"]
        w1 = ctxf.window(str(path), 1, db=db).to_dict()
        assert [m for m in w1["messages"] if m["kind"] == "reasoning"] == []  # its own: not in step 1's window
        rows = ctxf.window(str(path), 2, db=db).to_dict()["messages"]
        first = next(m for m in rows if m["kind"] == "reasoning")
        assert (first["seq"], first["joined_step"], first["state"]) == (reasoning[0], 2, "kept")
        assert reasoning[0] > calls[0]  # it follows the call that made it


def test_messages_stream_lazily():
    ctx = ImportContext(path=MODERN)
    (s,) = list(importers.get("codex").parse(MODERN, ctx))
    assert inspect.isgenerator(s.messages)
    assert next(iter(s.messages)).text == "You are Codex, a coding agent."


# ---------------------------------------------------------------- legacy layout


@pytest.mark.parametrize("path", [LEGACY, HERE / "legacy_renamed.jsonl"])
def test_legacy_layout(path):
    fmt, (s,), ctx = parse(path)
    assert fmt == "codex"
    assert shape(s.messages) == [
        ("system", "message"),  # the meta line's instructions
        ("user", "message"),
        ("user", "message"),
        ("assistant", "message"),  # local_shell_call
        ("assistant", "reasoning"),  # its reasoning, after it
        ("tool", "message"),
        ("assistant", "message"),  # shell function_call
        ("tool", "message"),
        ("assistant", "message"),
    ]
    ms = s.messages
    assert ms[0].text == "Always run the tests before finishing."
    shell = ms[3].tool_calls[0]
    assert (shell.name, shell.id) == ("local_shell", "call_1")
    assert json.loads(shell.arguments)["command"] == ["bash", "-lc", "cat cli.py"]
    assert (ms[5].name, ms[5].tool_call_id) == ("local_shell", "call_1")
    assert ms[7].text == "patch rejected: context mismatch" and ms[7].meta == {"success": False}
    assert not any(m.usage for m in ms)
    assert s.external_id == "5973b6c0-94b8-487b-a530-2aeb6098ae0e" and s.global_id
    assert s.title == "Add a --verbose flag to cli.py" and s.model is None
    assert s.metadata["layout"] == "legacy" and s.metadata["git"]["branch"] == "main"
    assert ctx.skipped == Counter({"state": 2})


# ---------------------------------------------------------------- bad input


def test_truncated_last_line_is_a_warning():
    _, (s,), ctx = parse(HERE / "truncated.jsonl")
    assert [m.text for m in s.messages] == ["list the files"]
    assert ctx.skipped["truncated line"] == 1 and any(":4:" in w for w in ctx.warnings)


def test_malformed_middle_line_is_skipped_and_counted():
    # Issue 9 item 11: the JSONL line rules are shared (base.JsonlLines); a bad line in the
    # middle is skipped with its line number and whole reason, the rest kept.
    _, (s,), ctx = parse(HERE / "broken.jsonl", "codex")
    assert [m.text for m in s.messages] == ["list the files"]
    assert ctx.skipped["invalid JSON line"] == 1
    (w,) = ctx.warnings
    assert w.endswith("broken.jsonl:2: invalid JSON (Expecting property name enclosed in double quotes at "
                      "column 25); skipped this line, kept the rest")


def test_odd_records_do_not_crash(tmp_path):
    p = tmp_path / "rollout-odd.jsonl"
    lines = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "not-a-uuid"}},
        {"timestamp": "t", "type": "response_item", "payload": "oops"},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "critic", "content": "hi"}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "x",
                                                                "output": [{"type": "input_text", "text": "out"}]}},
        {"timestamp": "t", "type": "event_msg",
         "payload": {"type": "token_count", "info": {"last_token_usage": {"input_tokens": "NaN"}}}},
        [1, 2],
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    _, (s,), ctx = parse(p)
    assert shape(s.messages) == [("user", "message"), ("tool", "message")]
    assert s.messages[1].text == "out" and s.messages[1].name is None
    assert s.global_id is False
    assert ctx.skipped["malformed record"] == 1 and ctx.skipped["event_msg:token_count (no usage)"] == 1
    assert any("critic" in w for w in ctx.warnings)


def test_sniff():
    imp = importers.get("codex")
    for p in [MODERN, BEFORE, LEGACY, HERE / "legacy_renamed.jsonl", HERE / "truncated.jsonl"]:
        assert imp.sniff(p, read_head(p)), p
    for p in (FIXTURES / "claude_code").rglob("*.jsonl"):
        assert not imp.sniff(p, read_head(p)), p
    # an id + timestamp first line alone is not enough without a Codex-looking second line
    generic = b'{"id": "1", "timestamp": "2025-01-01"}\n{"foo": 1}\n'
    assert not imp.sniff(Path("events.jsonl"), generic)
    assert imp.sniff(Path("rollout-2025-01-01T00-00-00-x.jsonl"), generic)


# ---------------------------------------------------------------- the real corpus

ROLLOUT = "codex-rollout-jsonl/acidicsoil/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"


def test_corpus_rollout():
    _, (s,), ctx = parse(corpus(ROLLOUT))
    ms = s.messages
    # 2 user message items, 38 reasoning items, 39 function_call items (each its own model
    # call, answered by 39 function_call_output items); ghost_snapshot and events skipped
    assert len(ms) == 118
    assert Counter(shape(ms)) == Counter({
        ("assistant", "message"): 39, ("tool", "message"): 39, ("assistant", "reasoning"): 38,
        ("user", "message"): 2,
    })
    assert s.external_id == "019a93b9-f380-7600-98ff-940e6b99603c" and s.global_id
    assert s.model == "gpt-5.1-codex" and s.metadata["cli_version"] == "0.58.0"
    assert s.title.startswith("finish up the users work by rigging up the chatbot-ui")
    assert ctx.skipped["event_msg:agent_reasoning"] == 39
    assert ctx.skipped["event_msg:token_count (repeat)"] == 39  # 79 events: 1 empty, 39 new, 39 repeats


def test_corpus_rollout_usage_sums_to_the_recorded_total():
    path = corpus(ROLLOUT)
    _, (s,), _ = parse(path)
    usages = [m.usage for m in s.messages if m.usage]
    assert len(usages) == 39
    assert all(m.role == "assistant" and m.kind == "message" for m in s.messages if m.usage)
    # 0.58 writes each call's token_count before its items: the first call read the prompt
    first = s.messages[2]
    assert first.tool_calls and (first.usage.prompt_tokens, first.usage.completion_tokens) == (10128, 37)
    assert first.usage.context_window == 258400
    # each call counted once: the per-call usages add up to the last total_token_usage
    total = None
    for line in path.read_text().splitlines():
        p = json.loads(line).get("payload") or {}
        if p.get("type") == "token_count" and p.get("info"):
            total = p["info"]["total_token_usage"]
    assert total == {"input_tokens": 1099261, "cached_input_tokens": 1027328, "output_tokens": 22305,
                     "reasoning_output_tokens": 19520, "total_tokens": 1121566}
    assert sum(u.prompt_tokens for u in usages) == total["input_tokens"]
    assert sum(u.cache_read_tokens for u in usages) == total["cached_input_tokens"]
    assert sum(u.completion_tokens for u in usages) == total["output_tokens"]
    assert sum(u.reasoning_tokens for u in usages) == total["reasoning_output_tokens"]


def test_sniff_claims_only_codex_files_in_the_corpus():
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    imp = importers.get("codex")
    for p in sorted(CORPUS.rglob("*")):
        if p.is_file():
            mine = p.relative_to(CORPUS).parts[0] == "codex-rollout-jsonl"
            assert imp.sniff(p, read_head(p)) == mine, p


def test_local_compaction_in_the_before_layout(tmp_path):
    # 0.5x local compaction: the summarisation call writes a token_count but no items,
    # then the compacted record; its usage belongs to no recorded assistant message.
    def R(t, p):
        return {"timestamp": "2025-11-01T00:00:00Z", "type": t, "payload": p}

    def tc(n):
        u = {"input_tokens": n, "cached_input_tokens": 0, "output_tokens": 10, "reasoning_output_tokens": 0}
        return R("event_msg", {"type": "token_count", "info": {"total_token_usage": {**u, "total_tokens": n * 7},
                                                               "last_token_usage": u}})

    recs = [
        R("session_meta", {"id": "019a0000-0000-7000-8000-000000000001", "timestamp": "t"}),
        R("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}),
        tc(100),
        R("response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}),
        R("response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
        tc(200),  # the compaction call
        R("compacted", {"message": "SUMMARY"}),
        R("event_msg", {"type": "context_compacted"}),
        tc(300),
        R("response_item",
          {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}),
    ]
    p = tmp_path / "rollout-c.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    _, (s,), ctx = parse(p)
    assert shape(s.messages) == [
        ("user", "message"), ("assistant", "message"), ("tool", "message"),
        ("system", "compaction_boundary"), ("user", "compaction_summary"), ("assistant", "message"),
    ]
    assert s.messages[4].text == "SUMMARY"
    assert [m.usage.prompt_tokens for m in s.messages if m.usage] == [100, 300]
    assert ctx.skipped["token_count (no matching call)"] == 1


def test_sniff_session_meta_longer_than_the_head():
    meta = {"id": "x", "base_instructions": {"text": "y" * 70000}}
    line = json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": meta})
    head = line.encode()[: 64 * 1024]
    assert importers.get("codex").sniff(Path("a.jsonl"), head)
    assert not importers.get("claude_code").sniff(Path("a.jsonl"), head)


def test_a_shell_calls_exit_code_is_its_returncode_and_its_text_stays_what_the_model_read():
    _, (s,), _ = parse(MODERN)
    out = next(m for m in s.messages if m.role == "tool" and '"exit_code":2' in m.text)
    assert out.meta["returncode"] == 2 and out.text.startswith('{"output":"FAIL')
    _, (c,), _ = parse(corpus(ROLLOUT))
    codes = [m.meta.get("returncode") for m in c.messages if m.role == "tool"]
    assert len(codes) == 39 and codes.count(0) == sum('"exit_code":0' in m.text for m in c.messages if m.role == "tool")


NEWER = HERE / "rollout-2026-10-02T09-00-00-019c1111-2222-7333-8444-555566667777.jsonl"


def test_newer_record_kinds_are_read_as_what_the_model_saw():
    """Tool search (call and the tool definitions it loaded), image generation (a server-side part
    of the reply), agent messages and inter-agent communication of a multi-agent run (input the
    next call reads) are messages; delivery metadata and sub-agent UI events stay skipped and
    counted. Before: tool_search_output, image_generation_call, agent_message and
    inter_agent_communication were skipped, the loaded tools and the agents' reports missing from
    every later window."""
    fmt, [s], ctx = parse(NEWER)
    assert fmt == "codex"
    m = s.messages
    (search,) = [x for x in m if x.role == "assistant" and any(c.name == "tool_search" for c in x.tool_calls)]
    assert json.loads(search.tool_calls[0].arguments) == {"query": "calendar"} and search.tool_calls[0].id == "tsc_1"
    (loaded,) = [x for x in m if x.role == "tool" and x.tool_call_id == "tsc_1"]
    assert ("create_event" in loaded.text
            and loaded.meta["tool_search"] == {"execution": "client", "status": "completed", "tools": 1})
    assert loaded.name == "tool_search"
    (drawn,) = [x for x in m if any(p.get("type") == "image_generation_call" for p in x.parts)]
    part = next(p for p in drawn.parts if p["type"] == "image_generation_call")
    assert drawn.role == "assistant" and part["revised_prompt"].startswith("A banner") and part["result_bytes"] > 0
    agents = [x for x in m if "agent_message" in x.meta]
    assert [(x.role, x.meta["agent_message"]["author"], x.meta["source"]) for x in agents] == [
        ("user", "/root/designer", "inter_agent_communication"),
        ("user", "/root/reviewer", "response_item:agent_message")]
    assert agents[0].text == "Banner checked: contrast is fine." and agents[1].text == "The event date is right."
    calls = [x for x in m if x.role == "assistant"]
    assert len(calls) == 4 and all(x.usage is not None for x in calls)  # every token_count has its call
    assert ctx.skipped == Counter({"session_meta": 1, "turn_context": 1, "inter_agent_communication_metadata": 1,
                                   "event_msg:collab_agent_spawn_end": 1})
