"""Claude.ai data export conversations.json."""

from __future__ import annotations

import json

from context_forensics import importers
from context_forensics.importers.base import read_head
from helpers import FIXTURES, corpus, parse

HERE = FIXTURES / "claude_ai_export"


def test_server_tools_split_attachments_and_branches():
    fmt, sessions, ctx = parse(HERE / "conversations.json")
    assert fmt == "claude_ai_export"
    search, branches = sessions  # the empty conversation is skipped
    assert ctx.skipped["empty conversation"] == 1
    assert search.external_id == "aaaaaaaa-0000-0000-0000-000000000001" and search.global_id
    assert [m.role for m in search.messages] == ["user", "assistant", "tool", "assistant", "user"]
    user, call, result, answer, thanks = search.messages
    # the attachment's extracted text is what Claude read
    assert "[attachment: notes.txt]\nBudget is 4000 EUR max." in user.text
    assert [p["type"] for p in user.parts] == ["attachment", "file"]
    # content blocks win over the flat text; split at the tool_result
    assert call.text == "Let me look that up."
    assert call.parts == ({"type": "thinking", "text": "I need to search."},)
    assert call.tool_calls[0].name == "web_search"
    assert json.loads(call.tool_calls[0].arguments) == {"query": "budget news"}
    assert result.tool_call_id == call.tool_calls[0].id == "m2:1"
    assert result.name == "web_search" and "Prices rose." in result.text
    assert answer.text == "Your budget is 4000 EUR max; prices rose."
    assert thanks.text == "Thanks!"  # no content blocks: the flat text
    assert ctx.skipped["content block 'voice_note'"] == 1
    assert ctx.skipped["sender 'system'"] == 1
    # parent_message_uuid chain to current_leaf_message_uuid
    assert [m.text for m in branches.messages] == ["Pick a number", "42"]
    assert ctx.skipped["message on another branch"] == 1


def test_projects_json_is_not_claimed():
    p = HERE / "projects.json"
    head = read_head(p)
    for name in ("claude_ai_export", "chatgpt_export", "inspect", "mt_bench", "llm_logs"):
        assert not importers.get(name).sniff(p, head), name


def test_corpus_export_with_thinking():
    # 1 conversation, 2 chat messages: human text; assistant [thinking, text]
    path = corpus("claude-ai-export/anthropic-data/conversations.json")
    fmt, (s,), ctx = parse(path)
    assert fmt == "claude_ai_export"
    assert s.external_id == "b49c0fc0-85d8-475c-bd2d-ee89f31f592c"
    assert s.title == "Bleep bloop" and s.started_at == "2025-07-06T03:10:13.076141Z"
    assert [m.role for m in s.messages] == ["user", "assistant"]
    reply = s.messages[1]
    assert reply.text.startswith("Dog saliva does contain some antibacterial compounds")
    assert not reply.text.startswith("The user is asking")  # thinking is not in the text
    (thinking,) = reply.parts
    assert thinking["type"] == "thinking" and thinking["text"].startswith("The user is asking")
    assert not ctx.warnings and not ctx.skipped


def test_sniff_claims_only_claude_exports():
    root = corpus("claude-ai-export").parent
    imp = importers.get("claude_ai_export")
    for p in sorted(root.rglob("*")):
        if p.is_file():
            assert imp.sniff(p, read_head(p)) == p.is_relative_to(root / "claude-ai-export"), p
