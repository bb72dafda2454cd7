"""OpenCode (JSON storage tree, opencode.db) and Goose (sessions.db, legacy JSONL) sessions.

No real session store of either agent is public: the fixtures are written from the agents' source
(tests/fixtures/opencode/README.md, tests/fixtures/goose/README.md). The SQLite stores are built here
from the tables the source creates (OpenCode's session.sql.ts @ 063e8306; Goose's
session_manager.rs ``create()`` @ 01643006, schema version 5), never committed as binaries.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import context_forensics as ctxf
from context_forensics.errors import InputError
from context_forensics.importers import claimants, get
from context_forensics.importers.base import ImportContext
from context_forensics.records import KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT, KIND_SCRIPTED
from helpers import FIXTURES

STORAGE = FIXTURES / "opencode" / "storage"
SESSION = "ses_7a1e0c3d9ffeA1b2C3d4E5f6g7"
GOOSE_JSONL = FIXTURES / "goose" / "20250110_1.jsonl"

# OpenCode's tables (session.sql.ts; Timestamps = time_created, time_updated), the columns read here.
OPENCODE_SCHEMA = """
CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL, vcs TEXT, name TEXT,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, sandboxes TEXT NOT NULL DEFAULT '[]');
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL REFERENCES project(id) ON DELETE CASCADE,
  workspace_id TEXT, parent_id TEXT, slug TEXT NOT NULL, directory TEXT NOT NULL, path TEXT, title TEXT NOT NULL,
  version TEXT NOT NULL, share_url TEXT, summary_additions INTEGER, summary_deletions INTEGER,
  summary_files INTEGER, summary_diffs TEXT, cost REAL NOT NULL DEFAULT 0, tokens_input INTEGER NOT NULL DEFAULT 0,
  tokens_output INTEGER NOT NULL DEFAULT 0, tokens_reasoning INTEGER NOT NULL DEFAULT 0,
  tokens_cache_read INTEGER NOT NULL DEFAULT 0, tokens_cache_write INTEGER NOT NULL DEFAULT 0, revert TEXT,
  permission TEXT, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, time_compacting INTEGER,
  time_archived INTEGER);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL REFERENCES message(id) ON DELETE CASCADE,
  session_id TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
CREATE TABLE todo (session_id TEXT NOT NULL, content TEXT NOT NULL, status TEXT NOT NULL, priority TEXT NOT NULL,
  position INTEGER NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
  PRIMARY KEY (session_id, position));
"""

# Goose's SessionStorage::create() at schema version 5.
GOOSE_SCHEMA = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',
  user_set_name BOOLEAN DEFAULT FALSE, session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  extension_data TEXT DEFAULT '{}', total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
  accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
  schedule_id TEXT, recipe_json TEXT, user_recipe_values_json TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
  role TEXT NOT NULL, content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
  timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT);
CREATE INDEX idx_messages_session ON messages(session_id);
CREATE INDEX idx_messages_timestamp ON messages(timestamp);
CREATE INDEX idx_sessions_updated ON sessions(updated_at DESC);
CREATE INDEX idx_sessions_type ON sessions(session_type);
"""


def opencode_db(path: Path) -> Path:
    """opencode.db holding the fixture tree, row by row as json-migration.ts moves it (ids from the
    paths, ``data`` the JSON minus its ids)."""
    conn = sqlite3.connect(path)
    conn.executescript(OPENCODE_SCHEMA)
    for f in (STORAGE / "project").glob("*.json"):
        d = json.loads(f.read_text())
        conn.execute("INSERT INTO project (id, worktree, vcs, time_created, time_updated) VALUES (?,?,?,?,?)",
                     (f.stem, d["worktree"], d.get("vcs"), d["time"]["created"], d["time"]["updated"]))
    for f in (STORAGE / "session").glob("*/*.json"):
        d = json.loads(f.read_text())
        conn.execute("INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, "
                     "time_updated) VALUES (?,?,?,?,?,?,?,?,?)",
                     (f.stem, f.parent.name, d.get("parentID"), d.get("slug", ""), d.get("directory", ""),
                      d.get("title", ""), d.get("version", ""), d["time"]["created"], d["time"]["updated"]))
    for f in (STORAGE / "message").glob("*/*.json"):
        d = json.loads(f.read_text())
        t = d["time"]["created"]
        for k in ("id", "sessionID"):
            d.pop(k)
        conn.execute("INSERT INTO message VALUES (?,?,?,?,?)", (f.stem, f.parent.name, t, t, json.dumps(d)))
    for f in (STORAGE / "part").glob("*/*.json"):
        d = json.loads(f.read_text())
        sid = d["sessionID"]
        for k in ("id", "messageID", "sessionID"):
            d.pop(k)
        conn.execute("INSERT INTO part VALUES (?,?,?,?,?,?)", (f.stem, f.parent.name, sid, 0, 0, json.dumps(d)))
    conn.commit()
    conn.close()
    return path


V, HIDDEN, AGENT_ONLY, USER_ONLY = ({"userVisible": u, "agentVisible": a} for u, a in
                                    ((True, True), (True, False), (False, True), (True, False)))


def goose_message(role: str, created: int, content: list, metadata: dict) -> tuple:
    return role, json.dumps(content), created, json.dumps(metadata)


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def tool_request(i: str, name: str, args: dict) -> dict:
    return {"type": "toolRequest", "id": i,
            "toolCall": {"status": "success", "value": {"name": name, "arguments": args}}}


def goose_db(path: Path) -> Path:
    """sessions.db with a compacted session (Goose's compact_messages: the compacted messages
    agent-invisible, the summary agent-only, the continuation agent-only) and a sub-agent's."""
    conn = sqlite3.connect(path)
    conn.executescript(GOOSE_SCHEMA)
    conn.execute("INSERT INTO schema_version (version) VALUES (5)")
    conn.execute("INSERT INTO sessions (id, name, session_type, working_dir, created_at, updated_at, total_tokens, "
                 "input_tokens, output_tokens, accumulated_total_tokens, accumulated_input_tokens, "
                 "accumulated_output_tokens) VALUES ('20250111_1', 'Fix calc', 'user', '/home/dev/calc', "
                 "'2025-01-11 09:00:00', '2025-01-11 09:05:00', 3140, 3100, 40, 9000, 8700, 300)")
    conn.execute("INSERT INTO sessions (id, name, session_type, working_dir, created_at) VALUES "
                 "('20250111_2', 'subagent: run tests', 'sub_agent', '/home/dev/calc', '2025-01-11 09:03:00')")
    rows = [
        goose_message("user", 100, [text("Fix add in calc.py")], HIDDEN),
        goose_message("assistant", 101, [tool_request("t1", "developer__shell", {"command": "cat calc.py"})], HIDDEN),
        goose_message("user", 102, [{"type": "toolResponse", "id": "t1", "toolResult": {"status": "success", "value": {
            "content": [text("def add(a, b):\n    return a - b\n")], "isError": False}}}], HIDDEN),
        goose_message("assistant", 103, [text("Fixed: add() now returns a + b.")], HIDDEN),
        goose_message("user", 104, [text("Summary: add() in calc.py subtracted; fixed to a + b.")], AGENT_ONLY),
        goose_message("assistant", 104, [text("The previous message contains a summary of the conversation so far. "
                                              "Continue.")], AGENT_ONLY),
        goose_message("user", 105, [text("Now run the tests")], V),
        goose_message("user", 105, [{"type": "systemNotification", "notificationType": "inlineMessage",
                                     "msg": "Compacted"}], USER_ONLY),
        goose_message("assistant", 106, [{"type": "thinking", "thinking": "run pytest", "signature": "s"},
                                         tool_request("t2", "developer__shell", {"command": "pytest -q"})], V),
        goose_message("user", 107, [{"type": "toolResponse", "id": "t2",
                                     "toolResult": {"status": "error", "error": "-32603: exit code 1"}}], V),
        goose_message("assistant", 108, [text("Tests pass after the fix.")], V),
    ]
    for n, (role, content, created, meta) in enumerate(rows):
        conn.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp, timestamp, "
                     "metadata_json) VALUES ('20250111_1', ?, ?, ?, ?, ?)",
                     (role, content, created, f"2025-01-11 09:00:{n:02d}", meta))
    for n, (role, content) in enumerate((("user", [text("run the tests")]), ("assistant", [text("2 passed")]))):
        conn.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp, timestamp, "
                     "metadata_json) VALUES ('20250111_2', ?, ?, 200, ?, ?)",
                     (role, json.dumps(content), f"2025-01-11 09:03:{n:02d}",
                                                                 json.dumps(V)))
    conn.commit()
    conn.close()
    return path


def parse(fmt: str, path: Path) -> tuple[list, ImportContext]:
    ctx = ImportContext(path)
    sessions = list(get(fmt).parse(path, ctx))
    for s in sessions:
        s.messages = list(s.messages)
    return sessions, ctx


def edits(messages: list) -> list[dict]:
    return [m.meta["history_edit"] for m in messages if m.kind == KIND_HISTORY_EDIT]


# ---------------------------------------------------------------- OpenCode


@pytest.fixture
def storage(tmp_path) -> Path:
    """The storage tree in a data folder of its own (the fixture's has the opencode.db beside it)."""
    import shutil

    return Path(shutil.copytree(STORAGE, tmp_path / "data" / "storage"))


def test_opencode_storage_is_claimed_by_opencode_alone(storage):
    assert [i.name for i in claimants(storage)] == ["opencode"]
    assert [i.name for i in claimants(storage.parent)] == ["opencode"]  # the data folder holding storage/
    assert claimants(storage / "session") == []
    # a data folder with opencode.db beside its storage is walked into: each is a unit of its own
    assert claimants(STORAGE.parent) == [] and [i.name for i in claimants(STORAGE)] == ["opencode"]


def test_opencode_storage_steps_usage_and_recorded_edits(storage):
    [s], ctx = parse("opencode", storage)
    msgs = s.messages
    assert s.external_id == SESSION and s.title == "Fix the failing add() test" and s.model == "claude-sonnet-4-5"
    calls = [m for m in msgs if m.role == "assistant"]
    # one model call per step-start ... step-finish; prompt = input + cache.read + cache.write
    assert [m.usage.prompt_tokens for m in calls] == [2300, 2360, 2425, 2500, 2740, 2790]
    assert [m.usage.completion_tokens for m in calls] == [40, 45, 18, 30, 22, 20]
    assert calls[0].usage.cache_creation_tokens == 1100 and calls[0].usage.reasoning_tokens == 12
    assert calls[0].parts == ({"type": "thinking", "text": "I should read calc.py first."},)
    assert [c.name for m in calls for c in m.tool_calls] == ["read", "edit", "bash"]
    tools = [m for m in msgs if m.role == "tool"]
    assert [t.tool_call_id for t in tools] == ["toolu_01", "toolu_02", "toolu_03"]
    assert tools[2].text == "Error: exit code 1: 1 failed"
    # the compaction request is sent as OpenCode's prompt; the summary is an ordinary reply (a call)
    req = next(i for i, m in enumerate(msgs) if m.meta.get("compaction_request"))
    assert msgs[req].text == "What did we do so far?"
    prune, compaction = edits(msgs)
    assert prune["type"] == "prune" and prune["action"] == "cleared"
    assert prune["ranges"] == [[msgs.index(tools[0]), msgs.index(tools[0]) + 1]]
    assert compaction == {**compaction, "type": "compaction", "action": "summarized", "auto": True,
                          "ranges": [[0, req]]}
    assert msgs[req + 1].meta.get("opencode_summary") and msgs[req + 2].kind == KIND_HISTORY_EDIT
    # the pruning came before the compaction request (time.compacted < its time.created)
    assert [m.kind for m in msgs[req - 1:req]] == [KIND_HISTORY_EDIT]
    assert ctx.skipped["patch part"] == 1 and ctx.skipped["file part read as text"] == 1
    assert dict(ctx.unknown) == {"part of type 'future-part'": 1}
    assert s.metadata["calls_with_usage"] == 6 and s.metadata["compactions"] == 1


def test_opencode_db_reads_as_the_storage_tree(tmp_path, storage):
    db = opencode_db(tmp_path / "opencode.db")
    assert [i.name for i in claimants(db)] == ["opencode_db"]
    [a], _ = parse("opencode", storage)
    [b], ctx = parse("opencode_db", db)
    assert b.external_id == a.external_id and b.title == a.title and b.started_at == a.started_at
    assert [(m.role, m.kind, m.text, m.tool_calls, m.tool_call_id, m.usage) for m in b.messages] == \
           [(m.role, m.kind, m.text, m.tool_calls, m.tool_call_id, m.usage) for m in a.messages]
    assert edits(b.messages) == edits(a.messages)
    assert dict(ctx.unknown) == {"part of type 'future-part'": 1}


def test_opencode_db_with_a_view_for_a_table_is_refused(tmp_path):
    db = tmp_path / "opencode.db"
    conn = sqlite3.connect(db)
    conn.executescript("CREATE TABLE session (id TEXT, title TEXT, directory TEXT);"
                       "CREATE TABLE m (id TEXT, session_id TEXT, data TEXT);"
                       "CREATE VIEW message AS SELECT * FROM m;"
                       "CREATE TABLE part (id TEXT, message_id TEXT, session_id TEXT, data TEXT);")
    conn.close()
    assert [i.name for i in claimants(db)] == ["opencode_db"]
    with pytest.raises(InputError, match="'message' is a view"):
        parse("opencode_db", db)


# ---------------------------------------------------------------- Goose


def test_goose_db_compaction_and_last_call_usage(tmp_path):
    db = goose_db(tmp_path / "sessions.db")
    assert [i.name for i in claimants(db)] == ["goose_db"]
    (s, sub), ctx = parse("goose_db", db)
    msgs = s.messages
    assert s.external_id == "20250111_1" and s.title == "Fix calc" and s.started_at == "2025-01-11T09:00:00Z"
    [edit] = edits(msgs)
    e = next(i for i, m in enumerate(msgs) if m.kind == KIND_HISTORY_EDIT)
    # the four agent-invisible messages (user, call, its result, reply) leave at the summary
    assert edit["type"] == "compaction" and edit["action"] == "summarized" and edit["ranges"] == [[0, 4]]
    assert [m.role for m in msgs[:4]] == ["user", "assistant", "tool", "assistant"]
    assert msgs[e + 1].kind == KIND_COMPACTION_SUMMARY and msgs[e + 1].role == "user"
    assert msgs[e + 2].kind == KIND_SCRIPTED and msgs[e + 2].role == "assistant"
    assert ctx.skipped["systemNotification item"] == 1 and not ctx.unknown
    # no per-call usage: the sessions row's last-call figures on the last reply only
    used = [m for m in msgs if m.usage]
    assert used == [msgs[-1]] and (msgs[-1].usage.prompt_tokens, msgs[-1].usage.completion_tokens) == (3100, 40)
    assert s.metadata["accumulated_input_tokens"] == 8700 and s.metadata["compactions"] == 1
    tool = [m for m in msgs if m.role == "tool"]
    assert tool[-1].text == "-32603: exit code 1" and tool[-1].meta == {"is_error": True}
    assert msgs[e + 4].parts == ({"type": "thinking", "text": "run pytest"},)
    assert sub.external_id == "20250111_2" and sub.metadata["session_type"] == "sub_agent"
    assert [m.usage for m in sub.messages] == [None, None]


def test_goose_legacy_jsonl():
    assert [i.name for i in claimants(GOOSE_JSONL)] == ["goose"]
    [s], ctx = parse("goose", GOOSE_JSONL)
    msgs = s.messages
    assert s.title == "Fix add in calc.py" and s.metadata["working_dir"] == "/home/dev/calc"
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[1].tool_calls[0].name == "developer__text_editor"
    assert msgs[2].tool_call_id == "toolu_g1" and msgs[2].text.startswith("def add(a, b):")
    assert msgs[-1].usage.prompt_tokens == 2080 and msgs[-1].usage.completion_tokens == 60
    assert not ctx.skipped


def test_a_goose_file_of_unknown_items_is_counted_unknown(tmp_path):
    f = tmp_path / "20250112_1.jsonl"
    recs = [{"working_dir": "/w", "description": "x", "message_count": 2},
            {"role": "user", "created": 1, "content": [text("hi")], "metadata": V},
            {"role": "assistant", "created": 2,
             "content": [text("hello"), {"type": "conversationCompacted", "msg": ""}],
             "metadata": V}]
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    [s], ctx = parse("goose", f)
    assert [m.text for m in s.messages] == ["hi", "hello"]
    assert ctx.skipped["conversationCompacted item"] == 1 and not ctx.unknown


# ---------------------------------------------------------------- discovery and the command line


def test_discover_finds_opencode_and_goose_stores(tmp_path):
    home = tmp_path / "home"
    data = home / ".local" / "share"
    import shutil
    shutil.copytree(STORAGE, data / "opencode" / "storage")
    opencode_db(data / "opencode" / "opencode.db")
    (data / "opencode" / "log").mkdir()
    (data / "opencode" / "log" / "x.log").write_text("not a log")
    goose_db((data / "goose" / "sessions").mkdir(parents=True) or data / "goose" / "sessions" / "sessions.db")
    shutil.copyfile(GOOSE_JSONL, data / "goose" / "sessions" / GOOSE_JSONL.name)
    res = ctxf.discover(["opencode", "goose"], env={"HOME": str(home)}, cwd=tmp_path).to_dict()
    found = {a["agent"]: sorted(Path(f["path"]).name for f in a["found"]) for a in res["agents"]}
    assert found == {"opencode": ["opencode.db", "storage"], "goose": [GOOSE_JSONL.name, "sessions.db"]}
    mac = home / "Library" / "Application Support" / "Block" / "goose" / "sessions"
    mac.mkdir(parents=True)
    shutil.copyfile(GOOSE_JSONL, mac / GOOSE_JSONL.name)
    root = tmp_path / "groot"
    (root / "data" / "sessions").mkdir(parents=True)
    shutil.copyfile(GOOSE_JSONL, root / "data" / "sessions" / "a.jsonl")
    res = ctxf.discover(["goose"], env={"HOME": str(home), "GOOSE_PATH_ROOT": str(root)}, cwd=tmp_path).to_dict()
    assert [Path(f["path"]).name for f in res["agents"][0]["found"]] == ["a.jsonl"]  # the override alone


def test_goose_db_with_a_view_for_messages_is_refused(tmp_path):
    db = tmp_path / "sessions.db"
    conn = sqlite3.connect(db)
    conn.executescript("CREATE TABLE sessions (id TEXT, working_dir TEXT);"
                       "CREATE TABLE m (session_id TEXT, role TEXT, content_json TEXT, created_timestamp INTEGER);"
                       "CREATE VIEW messages AS SELECT * FROM m;")
    conn.close()
    assert [i.name for i in claimants(db)] == ["goose_db"]
    with pytest.raises(InputError, match="'messages' is a view"):
        parse("goose_db", db)


def test_rows_of_no_session_are_counted_not_read(tmp_path):
    db = goose_db(tmp_path / "sessions.db")
    conn = sqlite3.connect(db)
    for sid in ("00000000_0", "99999999_9"):  # before and after every session id
        conn.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp) "
                     "VALUES (?, 'user', ?, 1)",
                     (sid, json.dumps([text("orphan")])))
    conn.commit()
    conn.close()
    sessions, ctx = parse("goose_db", db)
    assert ctx.skipped["message of no session"] == 2
    assert all(m.text != "orphan" for s in sessions for m in s.messages)
    odb = opencode_db(tmp_path / "opencode.db")
    conn = sqlite3.connect(odb)
    conn.execute("INSERT INTO message VALUES ('msg_zz', 'ses_none', 1, 1, ?)", (json.dumps({"role": "user"}),))
    conn.execute("INSERT INTO part VALUES ('prt_zz', 'msg_a01', ?, 1, 1, ?)",
                 (SESSION, json.dumps({"type": "text", "text": "stray"})))  # a part of a message of this session
    conn.execute("INSERT INTO part VALUES ('prt_zy', 'msg_none', ?, 1, 1, ?)",
                 (SESSION, json.dumps({"type": "text", "text": "no message"})))
    conn.commit()
    conn.close()
    [s], ctx = parse("opencode_db", odb)
    assert ctx.skipped["message of no session"] == 1 and ctx.skipped["part of no message"] == 1
    assert s.messages[0].text.endswith("\nstray")  # parts are read in id order within their message


def _stored(db: Path) -> list:
    """What ingest stores of ``db``, its path and ids aside."""
    from context_forensics import api

    with api.open_store(db) as st:
        return [(s["format"], s["external_id"], s["title"],
                 [(m.role, m.kind, m.text) for m in st.store.messages(s["id"])])
                for s in sorted(st.store.sessions(), key=lambda s: s["external_id"])]


@pytest.mark.parametrize("fixture, build", [("opencode/opencode.db", "opencode_db"), ("goose/sessions.db", "goose_db")])
def test_the_committed_databases_are_what_the_builders_make(fixture, build, tmp_path):
    """The fuzz takes its seeds from the fixtures: the two databases kept there read as the
    builders above make them (rebuild them with those functions when the builders change)."""
    from context_forensics import api

    built = globals()[build](tmp_path / Path(fixture).name)
    api.ingest([FIXTURES / fixture], db=tmp_path / "committed.db")
    api.ingest([built], db=tmp_path / "built.db")
    committed = _stored(tmp_path / "committed.db")
    assert committed and committed == _stored(tmp_path / "built.db")


def test_a_data_folder_with_the_database_and_its_old_storage_reads_each_session_once(tmp_path):
    """OpenCode >= 1.1.53 migrates storage/ into opencode.db and leaves the JSON behind: a walk of the
    data folder reads the database, and the storage's sessions the database holds are skipped and
    counted, not read a second time (nor is the database hidden inside a storage unit)."""
    from context_forensics import api

    res = api.ingest([FIXTURES / "opencode"], db=tmp_path / "s.db", recursive=True).to_dict()
    by_format = {f["format"]: f for f in res["files"]}
    assert set(by_format) == {"opencode", "opencode_db"}
    assert by_format["opencode_db"]["messages"] == 14 and len(by_format["opencode_db"]["sessions"]) == 1
    assert by_format["opencode"]["skipped"] == {"session opencode.db beside it holds (read from there)": 1}
    assert by_format["opencode"]["messages"] == 0
    with api.open_store(tmp_path / "s.db") as ws:
        assert len(ws.sessions()) == 1


def test_a_storage_folder_without_the_database_is_read_whole(tmp_path):
    import shutil

    from context_forensics import api

    shutil.copytree(FIXTURES / "opencode" / "storage", tmp_path / "data" / "storage")
    res = api.ingest([tmp_path / "data"], db=tmp_path / "s.db", recursive=True).to_dict()
    assert [(f["format"], f["messages"]) for f in res["files"]] == [("opencode", 14)]
