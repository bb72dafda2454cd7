"""OpenAI Responses API importer: item lists, request bodies, response objects, JSONL."""

from __future__ import annotations

import pytest

from context_forensics import importers
from context_forensics.importers._openai_shapes import usage_from_responses
from context_forensics.importers.base import ImportContext
from context_forensics.importers.openai_responses import convert_items
from context_forensics.records import Usage
from helpers import FIXTURES, parse

HERE = FIXTURES / "openai_responses"


@pytest.mark.parametrize("name", ["items.json", "request.json", "response.json", "items.jsonl"])
def test_detected(name):
    imp = importers.detect(HERE / name)
    assert imp is not None and imp.name == "openai_responses"


def test_item_list():
    fmt, sessions, ctx = parse(HERE / "items.json")
    msgs = sessions[0].messages
    assert [(m.role, m.kind) for m in msgs] == [
        ("developer", "message"),
        ("user", "message"),
        ("assistant", "message"),  # the web search call
        ("assistant", "message"),  # text + the two tool calls that followed it
        ("assistant", "reasoning"),  # written first, the call's output: after its turn (the next call reads it)
        ("tool", "message"),
        ("tool", "message"),
        ("assistant", "message"),  # the refusal
    ]
    user = msgs[1]
    assert user.text == "Plot the sales and search the web."
    assert user.parts == (
        {"type": "image", "source": "url", "url": "https://example.com/chart.png", "detail": "high"},
        {"type": "file", "file_id": "file-123", "filename": "sales.csv"},
    )
    reasoning = msgs[4]
    assert reasoning.text == ""
    assert reasoning.parts == (
        {"type": "thinking", "text": "Need to search first.", "summary": True},
        {"type": "redacted_thinking", "bytes": 26},  # len of the encrypted_content string
    )
    assert [(c.name, c.id) for c in msgs[2].tool_calls] == [("web_search", "ws_1")]
    assert msgs[2].tool_calls[0].arguments == '{"type": "search", "query": "sales 2024"}'
    turn = msgs[3]
    assert turn.text == "Searched. Running code."
    assert [(c.name, c.arguments, c.id) for c in turn.tool_calls] == [
        ("run_python", '{"code": "plot()"}', "call_1"),
        ("apply_patch", "*** Begin Patch", "call_2"),
    ]
    assert [(m.tool_call_id, m.name, m.text) for m in msgs[5:7]] == [
        ("call_1", "run_python", "plotted"),
        ("call_2", "apply_patch", "patched"),
    ]
    assert msgs[7].text == "I won't do that." and msgs[7].meta["refusal"] is True
    assert ctx.skipped == {"item_reference": 1, "mcp_list_tools": 1, "item mystery_item": 1}
    assert any("item_reference" in w for w in ctx.warnings)


def test_request_with_output_puts_usage_on_the_answer_not_the_reasoning_item():
    _, sessions, _ = parse(HERE / "request.json")
    (s,) = sessions
    msgs = s.messages
    assert [(m.role, m.kind) for m in msgs] == [
        ("system", "message"), ("user", "message"), ("assistant", "message"), ("assistant", "reasoning")
    ]
    assert msgs[0].text == "You are a coding agent." and msgs[0].meta["source"] == "instructions"
    # The call's answer (the step replay compares with the usage) carries it, not the reasoning
    # item (its output, after it); everything before the answer is the request.
    assert msgs[2].usage == Usage(prompt_tokens=2000, completion_tokens=300, cache_read_tokens=1500,
                                  reasoning_tokens=256)
    assert msgs[2].meta["request"]["max_output_tokens"] == 4000
    assert msgs[2].meta["request"]["reasoning"] == {"effort": "medium"}
    assert msgs[3].usage is None and msgs[2].tool_calls[0].name == "shell"
    assert s.model == "gpt-5" and s.metadata["tools"][0]["name"] == "shell"


def test_response_object():
    _, sessions, _ = parse(HERE / "response.json")
    msgs = sessions[0].messages
    assert [m.role for m in msgs] == ["system", "assistant"]
    assert msgs[1].text == "Paris" and msgs[1].model == "gpt-4.1-2025-04-14"
    assert msgs[1].usage == Usage(prompt_tokens=36, completion_tokens=2, cache_read_tokens=0, reasoning_tokens=0)
    assert msgs[1].timestamp == "2025-03-08T23:29:02Z"
    assert sessions[0].external_id == "response"


def test_items_jsonl_streams_and_keeps_lines_before_a_truncated_tail():
    imp = importers.get("openai_responses")
    ctx = ImportContext(path=HERE / "items.jsonl")
    (s,) = list(imp.parse(HERE / "items.jsonl", ctx))
    assert not isinstance(s.messages, list)
    msgs = list(s.messages)
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[2].name == "shell" and msgs[2].text == "3 passed"
    assert ctx.skipped["truncated line"] == 1


def test_convert_items_string_input_and_builtin_tools():
    ctx = ImportContext(path=HERE)
    assert [(m.role, m.text) for m in convert_items("hello", ctx)] == [("user", "hello")]
    msgs = convert_items(
        [
            {"type": "computer_call", "id": "cu_1", "call_id": "cc_1", "action": {"type": "click", "x": 1, "y": 2}},
            {"type": "computer_call_output", "call_id": "cc_1",
             "output": {"type": "computer_screenshot", "image_url": "https://example.com/s.png"}},
            {"type": "mcp_call", "id": "mcp_1", "name": "search_docs", "arguments": "{}", "server_label": "docs",
             "output": "found 3"},
            {"type": "local_shell_call", "id": "ls_1", "call_id": "lsc_1",
             "action": {"type": "exec", "command": ["ls"]}},
            {"type": "local_shell_call_output", "id": "lsc_1", "output": "a b"},
            {"type": "compaction", "encrypted_content": "xyz"},
        ],
        ctx,
    )
    assert [(m.role, m.kind) for m in msgs] == [
        ("assistant", "message"), ("tool", "message"), ("assistant", "message"), ("tool", "message"),
        ("assistant", "message"), ("tool", "message"), ("user", "compaction_summary"),
    ]
    assert msgs[0].tool_calls[0].name == "computer" and msgs[0].tool_calls[0].id == "cc_1"
    assert msgs[1].name == "computer" and msgs[1].parts[0]["url"] == "https://example.com/s.png"
    assert (msgs[3].name, msgs[3].tool_call_id, msgs[3].text) == ("search_docs", "mcp_1", "found 3")
    assert msgs[5].tool_call_id == "lsc_1" and msgs[5].name == "local_shell"
    assert msgs[6].parts == ({"type": "encrypted_compaction", "bytes": 3},)


def test_usage_from_responses():
    assert usage_from_responses({"input_tokens": 5}) == Usage(prompt_tokens=5)
    assert usage_from_responses({"foo": 1}) is None
    assert usage_from_responses("x") is None


def test_a_jsonl_whose_first_line_alone_looks_like_an_item_is_not_claimed(tmp_path):
    """A Gemini CLI stream-json transcript starts with {"type": "message", "role": ...}; its other
    records (init, tool_use, tool_result, result) are no Responses items, so the file is not ours."""
    import json

    recs = [{"type": "message", "role": "user", "content": "Build it"},
            {"type": "init", "session_id": "s", "model": "gemini-3-pro-preview"},
            *[{"type": "tool_use", "tool_name": "read_file", "tool_id": f"t{i}", "parameters": {}} for i in range(4)],
            *[{"type": "tool_result", "tool_id": f"t{i}", "status": "success", "output": ""} for i in range(4)],
            {"type": "result", "status": "success", "stats": {"total_tokens": 10}}]
    f = tmp_path / "transcript.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    imp = importers.get("openai_responses")
    assert not imp.sniff(f, f.read_bytes())
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(json.dumps(r) for r in (recs[0], {"type": "function_call", "name": "f",
                                                                 "call_id": "c", "arguments": "{}"})) + "\n")
    assert imp.sniff(items, items.read_bytes())


def test_a_calls_own_reasoning_is_not_in_its_window(tmp_path):
    """The response writes its reasoning before its function call; the call did not read it (the next
    one does). request.json: the reasoning (256 reasoning tokens by the usage) is after the answer, so
    step 1's window is the instructions and the user message only."""
    from context_forensics.analysis.replay import window_at
    from context_forensics.store.db import Store
    from context_forensics.store.ingest import ingest_paths

    db = tmp_path / "s.db"
    with Store.open(db) as st:
        ingest_paths(st, [HERE / "request.json"])
        (ses,) = st.sessions()
        w = window_at(st, ses["id"], 1)
        msgs = [sm.message for sm in st.messages(ses["id"])]
    assert w["step"]["message_seq"] == 2
    assert [(m["role"], m["kind"]) for m in w["messages"]] == [("system", "message"), ("user", "message")]
    assert msgs[3].kind == "reasoning"


def test_agent_messages_put_a_responses_calls_reasoning_after_its_answer():
    """The harness-log path (OpenHands, SWE-agent, mini-swe-agent: ``_agent_messages``) reads a
    Responses API response the same way: its answer first (with the usage), then its reasoning."""
    from context_forensics.importers._agent_messages import convert_message

    resp = {"object": "response", "output": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Running ls."}]},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"}]}
    usage = Usage(prompt_tokens=100, completion_tokens=40, reasoning_tokens=30)
    out = convert_message(resp, ImportContext(path=HERE), names={}, usage=usage)
    assert [(m.kind, m.text) for m in out] == [("message", "Running ls."), ("reasoning", "Plan.")]
    assert out[0].usage == usage and out[0].tool_calls[0].name == "bash" and out[1].usage is None
    only = convert_message({"object": "response", "output": [resp["output"][0]]}, ImportContext(path=HERE),
                           names={}, usage=usage)
    assert [m.kind for m in only] == ["reasoning"] and only[0].usage == usage  # nothing else came back
