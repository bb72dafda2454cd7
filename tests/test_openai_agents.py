"""OpenAI Agents SDK SQLiteSession databases (format ``openai_agents_sqlite``): one session per
``session_id``, its stored Responses items in ``id`` order through the Responses item conversion,
read-only, a bad row costing only itself, and no other importer's file claimed.

The fixtures under fixtures/openai_agents/ were written by scripts/make_agents_fixtures.py with the
SDK's own SQLiteSession (README there: versions); the last test regenerates them when the
``fixtures`` extra is installed and compares the rows.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.errors import InputError
from context_forensics.importers import detect, get, registry
from context_forensics.importers.base import read_head
from helpers import CORPUS, FIXTURES, parse_all

F = FIXTURES / "openai_agents"
ITEMS, RUN = F / "items.db", F / "run.db"
IMP = get("openai_agents_sqlite")
ROOT = Path(__file__).resolve().parent.parent


def parse(path: Path):
    return parse_all(IMP, path)


def rows(path: Path) -> list[tuple]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT id, session_id, message_data FROM agent_messages ORDER BY id").fetchall()
    finally:
        conn.close()


def shape(msgs) -> list[tuple]:
    return [(m.role, m.kind, m.text, tuple((c.name, c.arguments, c.id) for c in m.tool_calls), m.tool_call_id)
            for m in msgs]


def test_the_fixtures_are_this_format_and_no_other_fixture_or_corpus_file_is():
    for p in (ITEMS, RUN):
        assert detect(p).name == IMP.name
        # no other importer's sniff takes them either (sqlite_table needs a role column)
        assert [n for n, i in registry().items() if i.sniff(p, read_head(p))] == [IMP.name]
    others = [p for p in FIXTURES.rglob("*") if p.is_file() and p.parent != F]
    if CORPUS.exists():
        others += [p for p in CORPUS.rglob("*") if p.is_file()]
    claimed = [p for p in others if IMP.sniff(p, read_head(p))]
    assert claimed == []


def test_add_items_sessions_in_order_with_the_items_converted():
    sessions, ctx = parse(ITEMS)
    assert ctx.warnings == [] and not ctx.skipped
    assert [s.external_id for s in sessions] == ["conv-items", "conv-other"]
    first, other = sessions
    assert shape(first.messages) == [
        ("user", "message", "What is the weather in Paris?", (), None),
        ("assistant", "message", "", (("get_weather", '{"city": "Paris"}', "call_1"),), None),
        ("assistant", "reasoning", "", (), None),  # after its turn (79ce3f7): the call's output
        ("tool", "message", "The weather in Paris is sunny, 21 C.", (), "call_1"),
        ("assistant", "message", "It is sunny in Paris, 21 C.", (), None),
        ("user", "message", "Thanks!", (), None),
    ]
    assert first.messages[2].parts[0]["text"] == "Use the weather tool."
    assert first.messages[3].name == "get_weather"
    assert [m.role for m in other.messages] == ["system", "user", "assistant"]
    # every stored row is one item, and no call recorded usage (the SDK stores none)
    assert sum(s.metadata["items"] for s in sessions) == len(rows(ITEMS)) == 9
    assert all(m.usage is None for s in sessions for m in s.messages)
    for s in sessions:
        assert s.metadata["agent"] == "openai-agents"
        assert s.format == "openai_agents_sqlite" and s.title and s.started_at.endswith("Z")


def test_a_runner_session_is_the_conversation_both_runs_wrote():
    (s,), ctx = parse(RUN)
    assert s.external_id == "run-1" and ctx.warnings == []
    assert [(m.role, m.kind) for m in s.messages] == [
        ("user", "message"), ("assistant", "message"), ("assistant", "reasoning"), ("tool", "message"),
        ("assistant", "message"), ("user", "message"), ("assistant", "message")]
    # the call's reasoning follows its turn (79ce3f7): the call's own window does not hold what it produced
    call = s.messages[1].tool_calls[0]
    assert (call.name, call.id) == ("get_weather", "call_a") and s.messages[3].tool_call_id == "call_a"
    assert s.messages[-1].text == "You asked about Tokyo."
    # the agent's instructions are not stored: no system message is made up
    assert not any(m.role == "system" for m in s.messages)


def test_reading_writes_nothing(tmp_path):
    db = tmp_path / "run.db"
    shutil.copy(RUN, db)
    before = db.read_bytes()
    parse(db)
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.db"]


def test_a_wal_mode_database_is_read_and_left_as_it_was(tmp_path):
    db = tmp_path / "s.db"
    shutil.copy(ITEMS, db)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")  # as the SDK leaves its files
    conn.close()
    before = db.read_bytes()
    sessions, _ = parse(db)
    assert [s.external_id for s in sessions] == ["conv-items", "conv-other"]
    assert db.read_bytes() == before


def test_a_bad_row_costs_only_itself(tmp_path):
    db = tmp_path / "s.db"
    shutil.copy(ITEMS, db)
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO agent_messages (session_id, message_data) VALUES ('conv-other', '{not json')")
    conn.execute("INSERT INTO agent_messages (session_id, message_data) VALUES ('conv-other', '[1, 2]')")
    conn.execute("INSERT INTO agent_messages (session_id, message_data) VALUES ('conv-other', ?)",
                 (json.dumps({"role": "user", "content": "still here"}),))
    conn.commit()
    conn.close()
    sessions, ctx = parse(db)
    other = sessions[1]
    assert [m.text for m in other.messages][-1] == "still here"
    assert ctx.bad == 1 and "conv-other#10" in ctx.warnings[0]
    assert ctx.skipped["malformed item"] == 2  # the bad JSON and the list that is no item
    assert len(sessions[0].messages) == 6


def test_custom_table_names_are_read_and_a_session_without_items_is_left_out(tmp_path):
    db = tmp_path / "custom.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE s (session_id TEXT PRIMARY KEY, created_at TIMESTAMP, updated_at TIMESTAMP)")
    conn.execute("CREATE TABLE m (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, message_data TEXT, "
                 "created_at TIMESTAMP)")
    conn.execute("INSERT INTO s VALUES ('a', '2026-01-02 03:04:05', '2026-01-02 03:04:06'), ('empty', NULL, NULL)")
    conn.execute("INSERT INTO m (session_id, message_data) VALUES ('a', ?)",
                 (json.dumps({"role": "user", "content": "hi"}),))
    conn.commit()
    conn.close()
    assert detect(db).name == IMP.name
    (s,), _ = parse(db)
    assert s.external_id == "a" and s.started_at == "2026-01-02T03:04:05Z" and s.messages[0].text == "hi"


def test_a_database_without_the_sdk_tables_is_not_claimed_and_a_broken_file_fails_naming_it(tmp_path):
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE messages (id INTEGER, session_id TEXT, message_data TEXT)")  # no sessions table
    conn.close()
    assert not IMP.sniff(db, read_head(db))
    broken = tmp_path / "broken.db"
    broken.write_bytes(ITEMS.read_bytes()[:2000])
    with pytest.raises(InputError) as e:
        parse(broken)
    assert str(broken) in str(e.value.where)


def test_cli_ingest_and_sessions_by_agent(tmp_path):
    db = str(tmp_path / "s.db")
    r = CliRunner().invoke(app, ["ingest", str(ITEMS), str(RUN), "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["sessions", "--agent", "openai-agents", "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    assert sorted(x["external_id"] for x in json.loads(r.output)["sessions"]) == ["conv-items", "conv-other", "run-1"]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.skipif(not _importable("agents"), reason="the fixtures extra (openai-agents) is not installed")
def test_the_generator_writes_the_committed_rows(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_agents_fixtures.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("items.db", "run.db"):
        assert rows(tmp_path / name) == rows(F / name), name  # created_at is the run's time: rows, not bytes


def test_an_advanced_session_file_is_read_by_its_base_tables_and_says_what_it_leaves(tmp_path):
    db = tmp_path / "adv.db"
    shutil.copy(ITEMS, db)
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE message_structure (id INTEGER PRIMARY KEY, session_id TEXT, message_id INTEGER, "
                 "branch_id TEXT, message_type TEXT, sequence_number INTEGER)")
    conn.execute("CREATE TABLE turn_usage (id INTEGER PRIMARY KEY, session_id TEXT, input_tokens INTEGER)")
    conn.commit()
    conn.close()
    sessions, ctx = parse(db)
    assert [len(s.messages) for s in sessions] == [6, 3]
    assert len(ctx.warnings) == 1 and "AdvancedSQLiteSession" in ctx.warnings[0]
