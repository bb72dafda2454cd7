"""Anthropic Messages importer: request bodies with responses, message lists, batch JSONL."""

from __future__ import annotations

import json

import pytest

from context_forensics import importers
from context_forensics.importers.anthropic_messages import convert_messages, usage_from_anthropic
from context_forensics.importers.base import ImportContext, read_head
from context_forensics.records import Usage
from helpers import FIXTURES, parse

HERE = FIXTURES / "anthropic_messages"


@pytest.mark.parametrize("name", ["request_response.json", "messages_list.json", "batch.jsonl"])
def test_detected(name):
    imp = importers.detect(HERE / name)
    assert imp is not None and imp.name == "anthropic_messages"


def test_request_and_response():
    _, sessions, ctx = parse(HERE / "request_response.json")
    (s,) = sessions
    msgs = s.messages
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "tool", "user", "assistant"]
    assert msgs[0].text == "You are a careful assistant.\nThe budget is 42 dollars."
    image, doc = msgs[1].parts
    assert (image["width"], image["height"], image["media_type"]) == (4, 5, "image/png")
    assert doc == {"type": "document", "source": "text", "title": "spec", "media_type": "text/plain",
                   "text": "limit: 42"}
    a = msgs[2]
    assert a.text == "Reading."
    assert a.parts == ({"type": "thinking", "text": "I should read the file."},
                       {"type": "redacted_thinking", "bytes": 10})
    assert [(c.name, c.arguments, c.id) for c in a.tool_calls] == [
        ("read_file", '{"path": "config.yaml"}', "toolu_1"),
        ("read_file", '{"path": "missing.yaml"}', "toolu_2"),
    ]
    # tool_result blocks become tool messages, in order, before the rest of the user turn
    t1, t2, rest = msgs[3], msgs[4], msgs[5]
    assert (t1.tool_call_id, t1.name, t1.text) == ("toolu_1", "read_file", "port: 8080")
    assert t1.parts == ({"type": "image", "source": "url", "url": "https://example.com/a.png"},)
    assert (t2.tool_call_id, t2.text, t2.meta) == ("toolu_2", "not found", {"is_error": True})
    assert rest.text == "Now summarise."
    reply = msgs[6]
    # prompt = input 100 + cache creation 2000 + cache read 3000
    assert reply.usage == Usage(prompt_tokens=5100, completion_tokens=50, cache_read_tokens=3000,
                                cache_creation_tokens=2000)
    assert reply.model == "claude-sonnet-4-5-20250929"
    assert reply.meta["request"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert reply.meta["request"]["max_tokens"] == 1024
    assert s.model == "claude-sonnet-4-5"
    assert ctx.warnings == []


def test_bare_message_list():
    _, sessions, _ = parse(HERE / "messages_list.json")
    msgs = sessions[0].messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[2].name == "calc" and msgs[2].tool_call_id == "toolu_a" and msgs[2].text == "4"


def test_batch_jsonl():
    _, sessions, _ = parse(HERE / "batch.jsonl")
    assert [s.external_id for s in sessions] == ["req-1", "req-2"]
    assert [[m.role for m in s.messages] for s in sessions] == [["user"], ["system", "user"]]
    assert sessions[1].messages[0].text == "Talk like a pirate."


def test_broken_request_warns_and_keeps_going():
    _, sessions, ctx = parse(HERE / "broken.json", "anthropic_messages")
    msgs = sessions[0].messages
    assert [m.role for m in msgs] == ["system", "tool", "user", "user"]
    assert msgs[1].text == '{"weird": true}' and msgs[1].name is None
    assert msgs[2].parts == ({"type": "mystery_block"},)
    assert msgs[3].text == "beep"
    assert ctx.skipped["malformed message"] == 1
    assert any("robot" in w for w in ctx.warnings)


def test_server_tools_and_citations_stay_in_the_assistant_turn():
    ctx = ImportContext(path=HERE)
    msgs = convert_messages(
        None,
        [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "sf"}},
                {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": [
                    {"type": "web_search_result", "title": "SF", "url": "https://x", "encrypted_content": "Zm9v"}]},
                {"type": "text", "text": "It is "},
                {"type": "text", "text": "foggy.", "citations": [{"type": "web_search_result_location"}]},
            ]},
        ],
        ctx,
    )
    a = msgs[1]
    assert a.text == "It is foggy."  # citation-split blocks of one answer join without separators
    assert a.tool_calls[0].name == "web_search" and a.meta["server_tool_ids"] == ["srv_1"]
    assert a.parts == ({"type": "web_search_tool_result", "tool_use_id": "srv_1",
                        "results": [{"title": "SF", "url": "https://x"}]},)
    assert "encrypted" not in json.dumps(a.parts)


def test_code_execution_and_web_fetch_results_keep_readable_text():
    ctx = ImportContext(path=HERE)
    (a,) = convert_messages(None, [{"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srv_2", "name": "bash_code_execution", "input": {"command": "echo 6"}},
        {"type": "bash_code_execution_tool_result", "tool_use_id": "srv_2", "content": {
            "type": "bash_code_execution_result", "stdout": "6\n", "stderr": "", "return_code": 0, "content": []}},
        {"type": "server_tool_use", "id": "srv_3", "name": "web_fetch", "input": {"url": "https://x.org"}},
        {"type": "web_fetch_tool_result", "tool_use_id": "srv_3", "content": {
            "type": "web_fetch_result", "url": "https://x.org", "content": {
                "type": "document", "title": "X",
                "source": {"type": "text", "media_type": "text/plain", "data": "hello"}}}},
    ]}], ctx)
    code, fetch = a.parts
    assert code == {"type": "bash_code_execution_tool_result", "tool_use_id": "srv_2", "text": "6\n", "return_code": 0}
    assert fetch == {"type": "web_fetch_tool_result", "tool_use_id": "srv_3", "url": "https://x.org", "title": "X",
                     "media_type": "text/plain", "text": "hello"}
    assert [c.name for c in a.tool_calls] == ["bash_code_execution", "web_fetch"]


def test_sniff_rejects_openai_and_claude_code_shapes(tmp_path):
    imp = importers.get("anthropic_messages")
    openai = tmp_path / "o.json"
    openai.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "model": "gpt-4o"}))
    cc = tmp_path / "s.jsonl"
    cc.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]}}) + "\n" + json.dumps({"type": "user"}) + "\n")
    for p in (openai, cc):
        assert not imp.sniff(p, read_head(p)), p.name


def test_sniff_leaves_agent_task_folders_alone(tmp_path):
    """A Cline / Roo / Kilo task's conversation is Anthropic-shaped but belongs to its task folder
    (read whole by the cline importer)."""
    imp = importers.get("anthropic_messages")
    body = (HERE / "messages_list.json").read_bytes()
    plain = tmp_path / "conversation.json"
    plain.write_bytes(body)
    assert imp.sniff(plain, read_head(plain))
    task = tmp_path / "tasks" / "1769053680585"
    task.mkdir(parents=True)
    for name in ("api_conversation_history.json", "ui_messages.json"):
        (task / name).write_bytes(body)
        p = task / name
        assert not imp.sniff(p, read_head(p)), name
        found = importers.detect(p, read_head(p))
        # the conversation is the task folder's importer's; a ui_messages.json holding messages
        # instead of ui events is nobody's
        assert (found.name if found else None) == ("cline" if name == "api_conversation_history.json" else None), name


def test_usage_from_anthropic():
    assert usage_from_anthropic({"input_tokens": 3, "output_tokens": 1}) == Usage(prompt_tokens=3, completion_tokens=1)
    assert usage_from_anthropic({"output_tokens": 9}) == Usage(completion_tokens=9)
    assert usage_from_anthropic(None) is None
