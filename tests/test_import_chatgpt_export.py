"""ChatGPT data export conversations.json."""

from __future__ import annotations

from collections import Counter

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers.base import read_head
from helpers import FIXTURES, corpus, parse

HERE = FIXTURES / "chatgpt_export"


def test_single_conversation_branches_tools_and_images():
    fmt, (s,), ctx = parse(HERE / "single_conversation.json")
    assert fmt == "chatgpt_export"
    assert s.external_id == "11111111-2222-3333-4444-555555555555" and s.global_id
    assert s.title == "Harbour weather" and s.model == "o1"
    assert s.started_at == "2023-11-14T22:13:20+00:00"
    # the regenerated "old" branch and the reasoning_recap / empty widget are skipped
    assert ctx.skipped == Counter(
        {"message on another branch": 1, "reasoning_recap": 1, "content type 'super_widget'": 1}
    )
    roles = [(m.role, m.kind) for m in s.messages]
    assert roles == [
        ("system", "message"),
        ("user", "message"),
        ("user", "message"),
        ("assistant", "reasoning"),
        ("assistant", "message"),
        ("tool", "message"),
        ("assistant", "message"),
    ]
    system, custom, user, thoughts, call, result, final = s.messages
    assert system.meta["hidden"] and system.text == ""
    assert custom.meta["hidden"] and custom.text == "I am a sailor.\n\nAnswer in one line."
    assert user.text == "What is the weather where this photo was taken?"
    assert user.parts[0]["type"] == "image" and (user.parts[0]["width"], user.parts[0]["height"]) == (512, 256)
    assert thoughts.parts == ({"type": "thinking", "text": "Locating\nThe photo shows a harbour."},)
    assert call.text == "" and call.tool_calls[0].name == "browser"
    assert call.tool_calls[0].arguments == 'search("harbour weather")'
    assert result.name == "browser" and result.tool_call_id == call.tool_calls[0].id
    assert result.text == "Sunny, 21C"
    assert final.text == "It is sunny, 21C." and final.model == "o1"


def test_list_with_code_tool_missing_current_node_and_junk():
    _, sessions, ctx = parse(HERE / "list_edge_cases.json", "chatgpt_export")
    code, leaf = sessions
    assert [m.role for m in code.messages] == ["user", "assistant", "tool", "tool"]
    assert code.messages[1].tool_calls[0].name == "python"
    assert code.messages[1].tool_calls[0].arguments == "print(1)"
    assert code.messages[2].tool_call_id == code.messages[1].tool_calls[0].id
    assert code.messages[3].text == "TimeoutError: took too long"
    # no current_node: the newest leaf is followed
    assert [m.text for m in leaf.messages] == ["hi", "newer reply"]
    assert any("no valid current_node" in w for w in ctx.warnings)
    assert ctx.skipped["malformed conversation"] == 1


def test_truncated_export_is_an_input_error():
    with pytest.raises(InputError) as e:
        parse(HERE / "truncated.json", "chatgpt_export")
    assert "truncated.json:" in str(e.value)


def test_corpus_code_interpreter_conversation():
    # mapping has 45 nodes, one a message-less root and no branches: 44 messages on the path;
    # authors: assistant 23 (11 with recipient "python" = code), tool "python" 11, user 8,
    # system 2 (both hidden, empty).
    path = corpus("chatgpt-export/chatgpt2graph/conversations.json")
    fmt, (s,), ctx = parse(path)
    assert fmt == "chatgpt_export"
    assert s.external_id == "966da5c4-5bb7-4e4d-ab6d-a7316b96266e"
    assert s.title == "Average Distance in U(0,1)" and s.model == "gpt-4-code-interpreter"
    assert len(s.messages) == 44
    assert Counter(m.role for m in s.messages) == {"assistant": 23, "tool": 11, "user": 8, "system": 2}
    calls = [m for m in s.messages if m.tool_calls]
    assert len(calls) == 11 and {c.tool_calls[0].name for c in calls} == {"python"}
    tools = [m for m in s.messages if m.role == "tool"]
    assert [t.tool_call_id for t in tools] == [c.tool_calls[0].id for c in calls]
    assert sum(1 for m in s.messages if m.meta.get("hidden")) == 2
    assert s.messages[2].text.startswith("given two random independent variables")
    assert s.messages[2].timestamp == "2023-09-21T19:57:53.969279+00:00"
    assert all(m.usage is None for m in s.messages)
    assert not ctx.warnings and not ctx.skipped


def test_sniff_claims_only_chatgpt_exports():
    root = corpus("chatgpt-export").parent
    imp = importers.get("chatgpt_export")
    for p in sorted(root.rglob("*")):
        if p.is_file():
            assert imp.sniff(p, read_head(p)) == p.is_relative_to(root / "chatgpt-export"), p
    for p in (FIXTURES / "claude_ai_export").glob("*.json"):
        assert not imp.sniff(p, read_head(p)), p
