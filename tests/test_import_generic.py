"""Generic importers: {role, content, token_count} JSON/JSONL and SQLite tables."""

from __future__ import annotations

import sqlite3

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers.base import ImportContext, read_head
from context_forensics.records import Usage
from helpers import CORPUS, FIXTURES, parse

HERE = FIXTURES / "generic"


@pytest.mark.parametrize("name", ["turns.json", "run.json", "flat.jsonl", "broken_turns.json"])
def test_detected(name):
    imp = importers.detect(HERE / name)
    assert imp is not None and imp.name == "generic_json"


def test_cumulative_turns_keep_only_new_messages():
    fmt, sessions, ctx = parse(HERE / "turns.json")
    (s,) = sessions
    msgs = s.messages
    assert [(m.role, m.text) for m in msgs] == [
        ("system", "You are terse."), ("user", "Q1: what is 6*7?"), ("assistant", "42"),
        ("user", "Q2: and 6*8?"), ("assistant", "48"),
    ]
    assert [m.meta["token_count"] for m in msgs] == [5, 9, 1, 7, 1]
    assert msgs[2].usage == Usage(prompt_tokens=14, completion_tokens=1) and msgs[2].meta["turn"] == 1
    assert msgs[4].meta["turn_token_count"] == 23 and msgs[4].meta["turn"] == 2
    assert ctx.warnings == []


def test_turns_object_with_session_fields():
    _, sessions, _ = parse(HERE / "run.json")
    (s,) = sessions
    assert (s.external_id, s.title, s.model, s.outcome) == ("run-7", "Arithmetic drill", "local-llama", "failure")
    assert [(m.role, m.text) for m in s.messages] == [
        ("user", "Say A"), ("assistant", "A"), ("user", "Say B"), ("assistant", "B")
    ]
    assert [m.meta.get("token_count") for m in s.messages] == [None, 1, None, 1]  # from "tokens"


def test_flat_jsonl_streams_and_survives_truncation():
    imp = importers.get("generic_json")
    ctx = ImportContext(path=HERE / "flat.jsonl")
    (s,) = list(imp.parse(HERE / "flat.jsonl", ctx))
    assert not isinstance(s.messages, list)
    msgs = list(s.messages)
    assert [m.meta["token_count"] for m in msgs] == [8, 6, 7, 4]
    assert ctx.skipped["truncated line"] == 1


def test_broken_turns_are_skipped_and_counted():
    _, sessions, ctx = parse(HERE / "broken_turns.json")
    msgs = sessions[0].messages
    assert [(m.role, m.text) for m in msgs] == [("user", "ok"), ("user", "zap")]
    assert msgs[1].meta["role"] == "wizard"
    assert ctx.skipped == {"malformed turn": 1, "malformed message": 1}


# ---------------------------------------------------------------- sqlite_table


def _db(path, script):
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.commit()
    conn.close()
    return path


def test_sqlite_groups_rows_by_conversation_in_id_order(tmp_path):
    db = _db(tmp_path / "chat.db", """
        CREATE TABLE chat_log (id INTEGER PRIMARY KEY, conversation_id TEXT, role TEXT, content TEXT,
                               token_count INTEGER, created_at TEXT);
        INSERT INTO chat_log VALUES (1, 'b', 'user', 'B question', 3, '2024-01-01T00:00:05');
        INSERT INTO chat_log VALUES (2, 'a', 'system', 'A rules', 2, '2024-01-01T00:00:00');
        INSERT INTO chat_log VALUES (3, 'a', 'user', 'A question', 4, '2024-01-01T00:00:01');
        INSERT INTO chat_log VALUES (4, 'b', 'assistant', 'B answer', 5, '2024-01-01T00:00:06');
        INSERT INTO chat_log VALUES (5, 'a', 'assistant', 'A answer', NULL, '2024-01-01T00:00:02');
        INSERT INTO chat_log VALUES (6, 'a', 'user', '[{"type": "text", "text": "A part"}]', 1, NULL);
    """)
    assert importers.detect(db).name == "sqlite_table"
    fmt, sessions, ctx = parse(db)
    assert [s.external_id for s in sessions] == ["chat_log:a", "chat_log:b"]
    a, b = sessions
    assert [(m.role, m.text) for m in a.messages] == [
        ("system", "A rules"), ("user", "A question"), ("assistant", "A answer"), ("user", "A part")
    ]
    assert [m.meta.get("token_count") for m in a.messages] == [2, 4, None, 1]
    assert a.started_at == "2024-01-01T00:00:00"
    assert [m.text for m in b.messages] == ["B question", "B answer"]
    assert a.metadata["columns"]["session"] == "conversation_id"


def test_sqlite_without_session_column_is_one_streamed_session(tmp_path):
    db = _db(tmp_path / "plain.sqlite", """
        CREATE TABLE log (speaker TEXT, text TEXT);
        INSERT INTO log VALUES ('human', 'hi');
        INSERT INTO log VALUES ('narrator', 'a pause');
        INSERT INTO log VALUES ('narrator', 'another');
        INSERT INTO log VALUES ('ai', 'hello');
    """)
    imp = importers.get("sqlite_table")
    ctx = ImportContext(path=db)
    (s,) = list(imp.parse(db, ctx))
    assert not isinstance(s.messages, list)
    assert [m.role for m in s.messages] == ["user", "user", "user", "assistant"]
    assert len(ctx.warnings) == 1 and "narrator" in ctx.warnings[0]  # warned once per unknown role


def test_sqlite_several_candidate_tables_need_table_option(tmp_path):
    db = _db(tmp_path / "multi.db", """
        CREATE TABLE drafts (role TEXT, content TEXT);
        CREATE TABLE messages (role TEXT, content TEXT, session_id TEXT, seq INTEGER);
        INSERT INTO messages VALUES ('assistant', 'second', 's1', 2);
        INSERT INTO messages VALUES ('user', 'first', 's1', 1);
        CREATE TABLE users (name TEXT);
    """)
    assert importers.get("sqlite_table").sniff(db, read_head(db))
    with pytest.raises(InputError) as e:
        parse(db, "sqlite_table")
    assert "drafts, messages" in str(e.value) and "--table" in str(e.value)
    _, sessions, _ = parse(db, "sqlite_table", table="messages")
    assert [m.text for m in sessions[0].messages] == ["first", "second"]
    with pytest.raises(InputError) as e:
        parse(db, "sqlite_table", table="nope")
    assert "users" in str(e.value)


def test_sqlite_sniff_leaves_other_databases_alone(tmp_path):
    imp = importers.get("sqlite_table")
    no_chat = _db(tmp_path / "other.db", "CREATE TABLE t (a TEXT, b TEXT);")
    store = _db(tmp_path / "store.db", "CREATE TABLE _ctxf_migrations (name TEXT); "
                                       "CREATE TABLE messages (role TEXT, text TEXT);")
    not_sqlite = tmp_path / "x.db"
    not_sqlite.write_bytes(b"garbage")
    for p in (no_chat, store, not_sqlite):
        assert not imp.sniff(p, read_head(p)), p.name


def test_generic_sniffs_claim_no_corpus_file():
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    json_imp, db_imp = importers.get("generic_json"), importers.get("sqlite_table")
    for f in sorted(CORPUS.rglob("*")):
        if f.is_file():
            head = read_head(f)
            assert not json_imp.sniff(f, head), f
            assert not db_imp.sniff(f, head), f
