"""OpenAI Chat Completions importer: message arrays, request/response logs, JSONL."""

from __future__ import annotations

import json

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers._openai_shapes import usage_from_openai
from context_forensics.importers._sniffing import partial_json
from context_forensics.importers.base import ImportContext, read_head
from context_forensics.records import Usage
from helpers import FIXTURES, parse

HERE = FIXTURES / "openai_chat"


@pytest.mark.parametrize(
    "name",
    ["messages_list.json", "request_response.json", "legacy_functions.json", "finetune.jsonl",
     "message_per_line.jsonl"],
)
def test_detected(name):
    imp = importers.detect(HERE / name)
    assert imp is not None and imp.name == "openai_chat"


def test_messages_list_parts_tools_and_refusal():
    fmt, sessions, ctx = parse(HERE / "messages_list.json")
    assert fmt == "openai_chat" and len(sessions) == 1
    msgs = sessions[0].messages
    assert [m.role for m in msgs] == [
        "system", "developer", "user", "assistant", "tool", "tool", "assistant", "assistant"
    ]
    user = msgs[2]
    assert user.name == "alice" and user.text == "What's the weather here?"
    image, audio, file = user.parts
    # The data URL is a 3x2 PNG: dimensions come from its header, the pixels are not kept.
    assert image == {"type": "image", "source": "base64", "bytes": 75, "media_type": "image/png",
                     "detail": "low", "width": 3, "height": 2}
    assert "data" not in json.dumps(image)
    assert audio["type"] == "audio" and audio["format"] == "wav"
    assert file["type"] == "file" and file["filename"] == "notes.pdf" and file["media_type"] == "application/pdf"
    calls = msgs[3].tool_calls
    assert [(c.name, c.arguments, c.id) for c in calls] == [
        ("get_weather", '{"city": "Oslo"}', "call_1"),
        ("shell", "ls -la", "call_2"),  # a custom tool: its raw input is the argument string
    ]
    # Tool results get their tool's name from the call id.
    assert [(m.tool_call_id, m.name, m.text) for m in msgs[4:6]] == [
        ("call_1", "get_weather", "12 C, rain"),
        ("call_2", "shell", "total 0"),
    ]
    assert msgs[6].text == "I can't share that." and msgs[6].meta["refusal"] is True
    assert msgs[7].parts == ({"type": "thinking", "text": "The user wants the weather."},)
    assert ctx.warnings == []


def test_request_with_response_carries_usage_and_request_params():
    _, sessions, _ = parse(HERE / "request_response.json")
    (s,) = sessions
    assert s.model == "gpt-4o-2024-08-06"
    assert [m.role for m in s.messages] == ["system", "user", "assistant"]
    reply = s.messages[-1]
    assert reply.text == "Lima."
    assert reply.usage == Usage(prompt_tokens=1234, completion_tokens=56, cache_read_tokens=1024,
                                reasoning_tokens=32)
    assert reply.meta["request"]["max_tokens"] == 256
    assert reply.meta["request"]["tools"][0]["function"]["name"] == "lookup"
    assert reply.meta["finish_reason"] == "stop"
    assert reply.timestamp == "2023-11-14T22:13:20Z"
    assert s.metadata["tools"][0]["function"]["name"] == "lookup"


def test_legacy_function_role_and_unknown_role():
    _, sessions, ctx = parse(HERE / "legacy_functions.json")
    msgs = sessions[0].messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "user"]
    assert msgs[1].tool_calls[0].name == "get_time" and msgs[1].tool_calls[0].id is None
    assert msgs[2].name == "get_time" and msgs[2].meta["role"] == "function" and msgs[2].text == "12:00"
    assert msgs[4].meta["role"] == "narrator"
    assert any("unknown role 'narrator'" in w for w in ctx.warnings)


def test_finetune_jsonl_one_session_per_line_and_truncated_tail():
    _, sessions, ctx = parse(HERE / "finetune.jsonl")
    assert [len(s.messages) for s in sessions] == [3, 4, 4]
    assert sessions[1].metadata["tools"][0]["function"]["name"] == "get_weather"
    assert sessions[1].messages[2].name == "get_weather"
    assert [m.meta.get("weight") for m in sessions[2].messages] == [None, 0, None, 1]
    assert ctx.skipped["truncated line"] == 1
    assert any(":4:" in w and "truncated" in w for w in ctx.warnings)


def test_message_per_line_streams_one_session():
    imp = importers.get("openai_chat")
    ctx = ImportContext(path=HERE / "message_per_line.jsonl")
    (s,) = list(imp.parse(HERE / "message_per_line.jsonl", ctx))
    assert not isinstance(s.messages, list)  # a generator: the file is read lazily
    msgs = list(s.messages)
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    assert msgs[2].tool_calls[0].arguments == '{"cmd": "ls"}'  # object arguments become JSON text
    assert msgs[3].name == "shell"
    assert msgs[4].usage == Usage(prompt_tokens=50, completion_tokens=3)


def test_bad_shape_is_an_input_error():
    assert importers.detect(HERE / "bad_shape.json") is None
    with pytest.raises(InputError) as e:
        parse(HERE / "bad_shape.json", "openai_chat")
    assert "messages" in str(e.value)


def test_sniff_rejects_other_provider_shapes(tmp_path):
    imp = importers.get("openai_chat")
    anthropic = tmp_path / "a.json"
    anthropic.write_text(json.dumps([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]},
    ]))
    responses = tmp_path / "r.json"
    responses.write_text(json.dumps([
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c", "name": "x", "arguments": "{}"},
    ]))
    counted = tmp_path / "g.json"
    counted.write_text(json.dumps([{"role": "user", "content": "hi", "token_count": 1}]))
    for p in (anthropic, responses, counted):
        assert not imp.sniff(p, read_head(p)), p.name


def test_sniff_rejects_agent_trajectories_with_messages(tmp_path):
    imp = importers.get("openai_chat")
    traj = tmp_path / "x.traj.json"
    traj.write_text(json.dumps({"info": {"exit_status": "Submitted"}, "messages": [{"role": "user", "content": "x"}],
                                "trajectory_format": "mini-swe-agent-1"}))
    per_call = tmp_path / "llm_completions" / "call-1.json"
    per_call.parent.mkdir()
    per_call.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}], "response": {}}))
    assert not imp.sniff(traj, read_head(traj))
    assert not imp.sniff(per_call, read_head(per_call))


def test_usage_from_openai_variants():
    assert usage_from_openai(None) is None
    assert usage_from_openai({}) is None
    # litellm passes Anthropic's cache fields through on an OpenAI-shaped usage
    assert usage_from_openai(
        {"prompt_tokens": 10, "completion_tokens": 2, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 3}
    ) == Usage(prompt_tokens=10, completion_tokens=2, cache_read_tokens=4, cache_creation_tokens=3)
    # Responses-style keys are understood too
    assert usage_from_openai({"input_tokens": 7, "output_tokens": 1}) == Usage(prompt_tokens=7, completion_tokens=1)


def test_partial_json_survives_a_cut_head():
    doc = partial_json(b'{"model": "m", "messages": [{"role": "user", "content": "hel')
    assert doc == {"model": "m", "messages": [{"role": "user"}]}
    assert partial_json(b"not json") is None
    assert partial_json(b'[1, 2, {"a": [true, null, -1.5e3]}]') == [1, 2, {"a": [True, None, -1500.0]}]
