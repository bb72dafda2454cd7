"""simonw llm logs.db. No real sample exists in the corpus, so every database here is built
with the ``llm`` package's own migrations (and, for the message store, its own LogStore)."""

from __future__ import annotations

import json
import sqlite3
import struct

import pytest

sqlite_utils = pytest.importorskip("sqlite_utils")
llm_migrations = pytest.importorskip("llm.migrations")

from context_forensics import importers  # noqa: E402
from context_forensics.importers.base import read_head  # noqa: E402
from context_forensics.records import Usage  # noqa: E402
from helpers import parse  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 40,
                                                                           20) + b"\x08\x06\x00\x00\x00" + b"\0" * 8


def _db(path, upto: str | None = None):
    """A logs.db migrated by llm itself: fully, or only up to the named migration."""
    db = sqlite_utils.Database(path)
    if upto is None:
        llm_migrations.migrate(db)
        return db
    llm_migrations.ensure_migrations_table(db)
    for fn in llm_migrations.MIGRATIONS:
        fn(db)
        if fn.__name__ == upto:
            break
    return db


def _response(db, **values):
    """Insert a responses row using only the columns the migrated schema has."""
    cols = db["responses"].columns_dict
    unknown = set(values) - set(cols)
    assert not unknown, f"not in this schema: {unknown}"
    db["responses"].insert(values)


@pytest.fixture
def legacy_db(tmp_path):
    path = tmp_path / "logs.db"
    db = _db(path)
    db["conversations"].insert({"id": "01conv", "name": "weather chat", "model": "gpt-4o"})
    db["conversations"].insert({"id": "01empty", "name": "never used", "model": "gpt-4o"})
    db["fragments"].insert({"id": 1, "hash": "f1", "content": "Context: Oslo.", "datetime_utc": "x", "source": "s"})
    db["fragments"].insert({"id": 2, "hash": "f2", "content": "Always cite units.", "datetime_utc": "x", "source": "s"})
    db["tools"].insert({"id": 1, "hash": "t", "name": "weather", "description": "Get weather",
                        "input_schema": json.dumps({"type": "object"}), "plugin": None})
    db["attachments"].insert({"id": "att1", "type": "image/png", "path": None, "url": None, "content": PNG})
    base = dict(prompt_json=None, response_json=None, schema_id=None, resolved_model=None, duration_ms=7)
    _response(db, id="01r1", model="gpt-4o", prompt="Weather?", system="Be brief.", options_json='{"max_tokens": 100}',
              response="", conversation_id="01conv", datetime_utc="2025-01-01 10:00:00.000001+00:00",
              input_tokens=50, output_tokens=9, token_details='{"prompt_tokens_details": {"cached_tokens": 32}}',
              reasoning="User wants weather.", **base)
    db["system_fragments"].insert({"response_id": "01r1", "fragment_id": 2, "order": 0})
    db["prompt_fragments"].insert({"response_id": "01r1", "fragment_id": 1, "order": 0})
    db["prompt_attachments"].insert({"response_id": "01r1", "attachment_id": "att1", "order": 0})
    db["tool_responses"].insert({"tool_id": 1, "response_id": "01r1"})
    db["tool_calls"].insert({"id": 1, "response_id": "01r1", "tool_id": 1, "name": "weather",
                             "arguments": '{"city": "Oslo"}', "tool_call_id": "call_1"})
    # the next prompt carries the tool result and no typed text; same system prompt
    _response(db, id="01r2", model="gpt-4o", prompt="", system="Be brief.", options_json="{}",
              response="It is 3C in Oslo.", conversation_id="01conv", datetime_utc="2025-01-01 10:00:05+00:00",
              input_tokens=80, output_tokens=8, token_details=None, reasoning=None, **base)
    db["system_fragments"].insert({"response_id": "01r2", "fragment_id": 2, "order": 0})
    db["tool_results"].insert({"id": 1, "response_id": "01r2", "tool_id": 1, "name": "weather", "output": "3C",
                               "tool_call_id": "call_1", "instance_id": None, "exception": None})
    # a changed system prompt, an Anthropic model reporting cache counts
    _response(db, id="01r3", model="claude-3-5-haiku", prompt="And tomorrow?", system="Be very brief.",
              options_json=None, response="Colder.", conversation_id="01conv",
              datetime_utc="2025-01-01 10:01:00+00:00", input_tokens=10, output_tokens=2,
              token_details='{"cache_creation_input_tokens": 100, "cache_read_input_tokens": 400}',
              reasoning=None, **base)
    # a response logged outside any conversation
    _response(db, id="01r4", model="gpt-4o-mini", prompt="ping", system=None, options_json=None, response="pong",
              conversation_id=None, datetime_utc="2025-01-02 00:00:00+00:00", input_tokens=None,
              output_tokens=None, token_details=None, reasoning=None, **base)
    return path


def test_legacy_responses(legacy_db):
    fmt, sessions, ctx = parse(legacy_db)
    assert fmt == "llm_logs"
    conv, orphan = sessions
    assert ctx.skipped["conversation without responses"] == 1
    assert conv.external_id == "01conv" and conv.global_id and conv.title == "weather chat"
    assert conv.started_at == "2025-01-01T10:00:00.000001+00:00"
    assert [m.role for m in conv.messages] == [
        "system", "user", "assistant", "tool", "assistant", "system", "user", "assistant"
    ]
    system, user, call, result, answer, system2, user2, answer2 = conv.messages
    assert system.text == "Always cite units.\n\nBe brief."  # system fragments, then system
    assert user.text == "Context: Oslo.\nWeather?"  # prompt fragments, then prompt
    (img,) = user.parts
    assert img["type"] == "image" and (img["width"], img["height"]) == (40, 20) and img["bytes"] == len(PNG)
    assert call.tool_calls[0].name == "weather" and call.tool_calls[0].id == "call_1"
    assert json.loads(call.tool_calls[0].arguments) == {"city": "Oslo"}
    assert call.parts == ({"type": "thinking", "text": "User wants weather."},)
    assert call.usage == Usage(prompt_tokens=50, completion_tokens=9, cache_read_tokens=32)
    assert call.meta["request"]["tools"] == [{"name": "weather", "description": "Get weather",
                                              "input_schema": {"type": "object"}}]
    assert call.meta["request"]["max_tokens"] == 100
    assert result.tool_call_id == "call_1" and result.text == "3C" and result.name == "weather"
    assert answer.text == "It is 3C in Oslo." and answer.usage == Usage(prompt_tokens=80, completion_tokens=8)
    assert system2.text == "Be very brief."
    # Anthropic: input_tokens excludes the cache, the prompt does not
    assert answer2.usage == Usage(prompt_tokens=510, completion_tokens=2, cache_read_tokens=400,
                                  cache_creation_tokens=100)
    assert answer2.timestamp == "2025-01-01T10:01:00+00:00"
    assert orphan.external_id == "01r4" and [m.text for m in orphan.messages] == ["ping", "pong"]
    assert orphan.messages[1].usage is None


def test_old_schema_without_tools_or_reasoning(tmp_path):
    path = tmp_path / "old.db"
    db = _db(path, upto="m013_usage")
    assert "reasoning" not in db["responses"].columns_dict and "tool_calls" not in db.table_names()
    db["conversations"].insert({"id": "c1", "name": "old", "model": "gpt-3.5-turbo"})
    _response(db, id="r1", model="gpt-3.5-turbo", prompt="hi", system=None, prompt_json=None, options_json=None,
              response="hello", response_json=None, conversation_id="c1", duration_ms=1,
              datetime_utc="2023-07-01T12:00:00.5", input_tokens=3, output_tokens=1, token_details=None)
    assert importers.detect(path).name == "llm_logs"
    _, (s,), _ = parse(path)
    assert [(m.role, m.text) for m in s.messages] == [("user", "hi"), ("assistant", "hello")]
    assert s.messages[1].usage == Usage(prompt_tokens=3, completion_tokens=1)
    assert s.started_at == "2023-07-01T12:00:00.5+00:00"  # naive datetime_utc is UTC


def test_message_store_threads_turns_and_forks(tmp_path):
    from llm.logs import LogStore
    from llm.models import Attachment
    from llm.parts import AttachmentPart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

    path = tmp_path / "new.db"
    db = _db(path)
    store = LogStore(db)
    novel = "Call me Ishmael. " * 20
    inputs = [
        Message("system", [TextPart("Be brief.")]),
        Message("user", [TextPart(novel + "Who speaks?"), AttachmentPart(Attachment(type="image/png", content=PNG))]),
    ]
    p1 = store.ensure_chain(inputs, fragments=[novel])  # the novel is stored once, as a fragment
    t1 = store.ensure_chain(
        [Message("assistant", [ReasoningPart("", redacted=True), TextPart("Searching."),
                               ToolCallPart(name="web_search", arguments={"q": "Ishmael"},
                                            tool_call_id="s1", server_executed=True),
                               ToolResultPart(name="web_search", output="Moby-Dick narrator",
                                              tool_call_id="s1", server_executed=True),
                               TextPart("Ishmael."),
                               ToolCallPart(name="lookup", arguments={"who": "Ishmael"}, tool_call_id="c1")])],
        parent=p1,
    )
    p2 = store.ensure_chain([Message("tool", [ToolResultPart(name="lookup", output="a sailor", tool_call_id="c1")])],
                            parent=t1)
    t2 = store.ensure_chain([Message("assistant", [TextPart("A sailor.")])], parent=p2)
    main = store.create_thread(name="moby", tip=t2, id="01thread")
    fork_tip = store.ensure_chain(
        [Message("user", [TextPart("Louder!")]), Message("assistant", [TextPart("A SAILOR.")])], parent=t2
    )
    store.create_thread(name="moby fork", tip=fork_tip, forked_from=main, id="01fork")
    db["tools"].insert({"id": 1, "hash": "h", "name": "lookup", "description": "Look up", "input_schema": "{}",
                        "plugin": None})
    turn = dict(thread_id=main, model="claude-sonnet-4", resolved_model=None, schema_id=None,
                duration_ms=10, response_json=None, options_json='{"max_tokens": 200}')
    db["turns"].insert(dict(turn, id="T1", parent_message_hash=p1, tip_message_hash=t1, input_tokens=300,
                            output_tokens=40, token_details='{"cache_read_input_tokens": 1000}',
                            datetime_utc="2025-02-01 09:00:00+00:00"))
    db["turn_tools"].insert({"turn_id": "T1", "tool_id": 1, "instance_id": None})
    db["turns"].insert(dict(turn, id="T2", parent_message_hash=p2, tip_message_hash=t2, input_tokens=1400,
                            output_tokens=5, token_details=None, datetime_utc="2025-02-01 09:00:05+00:00"))
    db["turns"].insert(dict(turn, id="T3", thread_id="01fork", parent_message_hash=t2, tip_message_hash=fork_tip,
                            input_tokens=1500, output_tokens=6, token_details=None,
                            datetime_utc="2025-02-01 09:01:00+00:00"))

    fmt, sessions, ctx = parse(path)
    assert fmt == "llm_logs"
    thread, fork = sessions
    assert thread.external_id == "01thread" and thread.title == "moby" and thread.model == "claude-sonnet-4"
    assert [m.role for m in thread.messages] == ["system", "user", "assistant", "tool",
                                                 "assistant", "tool", "assistant"]
    system, user, searching, server_result, answer, tool, final = thread.messages
    assert user.text == novel + "Who speaks?"  # fragment reference resolved
    assert user.parts[0]["type"] == "image" and user.parts[0]["width"] == 40
    assert searching.text == "Searching." and searching.tool_calls[0].name == "web_search"
    assert searching.parts == ({"type": "redacted_thinking", "bytes": 0},)
    assert server_result.text == "Moby-Dick narrator" and server_result.meta["server_executed"]
    assert answer.text == "Ishmael." and answer.tool_calls[0].id == "c1"
    # the turn's usage sits on the last assistant message of its output
    assert searching.usage is None
    assert answer.usage == Usage(prompt_tokens=1300, completion_tokens=40, cache_read_tokens=1000)
    assert answer.meta["request"]["input_messages"] == 2
    assert answer.meta["request"]["tools"][0]["name"] == "lookup"
    assert answer.meta["request"]["max_tokens"] == 200
    assert tool.tool_call_id == "c1" and tool.text == "a sailor"
    assert final.usage == Usage(prompt_tokens=1400, completion_tokens=5)
    assert thread.metadata == {"layout": "threads", "turns": 2}
    # the fork shares the prefix (and its recorded usage) and adds its own turn
    assert [m.text for m in fork.messages][-2:] == ["Louder!", "A SAILOR."]
    assert fork.messages[-1].usage == Usage(prompt_tokens=1500, completion_tokens=6)
    assert fork.metadata["forked_from"] == "01thread" and fork.metadata["turns"] == 3
    assert not ctx.warnings


def test_thread_continuing_a_legacy_conversation(tmp_path):
    from llm.logs import LogStore
    from llm.parts import Message, TextPart

    path = tmp_path / "upgraded.db"
    db = _db(path)
    db["conversations"].insert({"id": "01same", "name": "upgraded", "model": "gpt-4o"})
    _response(db, id="r1", model="gpt-4o", prompt="one", system=None, prompt_json=None, options_json=None,
              response="first", response_json=None, conversation_id="01same", duration_ms=1,
              datetime_utc="2024-12-01 00:00:00+00:00", input_tokens=5, output_tokens=1, token_details=None,
              schema_id=None, resolved_model=None, reasoning=None)
    store = LogStore(db)
    parent = store.ensure_chain([Message("user", [TextPart("one")]), Message("assistant", [TextPart("first")]),
                                 Message("user", [TextPart("two")])])
    tip = store.ensure_chain([Message("assistant", [TextPart("second")])], parent=parent)
    store.create_thread(name="upgraded", tip=tip, id="01same")
    db["turns"].insert({"id": "T9", "thread_id": "01same", "parent_message_hash": parent, "tip_message_hash": tip,
                        "model": "gpt-4o", "resolved_model": None, "options_json": None, "schema_id": None,
                        "input_tokens": 12, "output_tokens": 1, "token_details": None, "duration_ms": 1,
                        "datetime_utc": "2025-01-01 00:00:00+00:00", "response_json": None})
    _, sessions, _ = parse(path)
    (s,) = sessions  # one session, not the thread plus the legacy conversation
    assert [m.text for m in s.messages] == ["one", "first", "two", "second"]
    assert s.messages[1].usage == Usage(prompt_tokens=5, completion_tokens=1)  # lent by the legacy row
    assert s.messages[3].usage == Usage(prompt_tokens=12, completion_tokens=1)


def test_sniff(tmp_path, legacy_db):
    imp = importers.get("llm_logs")
    assert imp.sniff(legacy_db, read_head(legacy_db))
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("create table responses (id text)")
    conn.commit()
    conn.close()
    assert not imp.sniff(other, read_head(other))  # no conversations table
    fake = tmp_path / "fake.db"
    fake.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    assert not imp.sniff(fake, read_head(fake))
    text = tmp_path / "logs.json"
    text.write_text("{}")
    assert not imp.sniff(text, read_head(text))


def test_database_is_opened_read_only(legacy_db):
    before = legacy_db.read_bytes()
    parse(legacy_db, "llm_logs")
    assert legacy_db.read_bytes() == before
