"""Store: migrations on open, plain-SQLite schema, transactions, idempotent re-ingest."""

from __future__ import annotations

import sqlite3

import pytest
import sqlite_utils
from hypothesis import HealthCheck, given, settings, strategies as st

from context_forensics.errors import StoreCorruptError, StoreError, StoreVersionError
from context_forensics.records import Message, Session, ToolCall, Usage
from context_forensics.store.db import MIGRATIONS, SCHEMA_VERSION, Store
from context_forensics.store.ingest import ingest_paths


def test_blank_db_gets_every_migration_and_the_columns(tmp_path):
    path = tmp_path / "s.db"
    with Store.open(path):
        pass
    db = sqlite_utils.Database(path)
    applied = [r["name"] for r in db["_ctxf_migrations"].rows]
    assert applied == sorted(name for name, _ in MIGRATIONS)
    assert {"id", "format", "source", "task", "outcome", "parent_id", "metadata", "started_at",
            "model", "title"} <= set(db["sessions"].columns_dict)
    assert {"session_id", "seq", "role", "kind", "name", "text", "parts", "tool_calls", "tool_call_id",
            "prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_creation_tokens",
            "timestamp", "hash"} <= set(db["messages"].columns_dict)
    assert db.journal_mode == "wal"


def test_reopen_applies_nothing_twice(tmp_path):
    path = tmp_path / "s.db"
    Store.open(path).close()
    Store.open(path).close()
    with sqlite3.connect(path) as c:
        names = [r[0] for r in c.execute("SELECT name FROM _ctxf_migrations")]
    assert len(names) == len(set(names)) == len(MIGRATIONS)


def test_partial_old_store_is_migrated_forward(tmp_path):
    """A store written by a version that knew only the first migration is brought up to date."""
    path = tmp_path / "old.db"
    db = sqlite_utils.Database(path)
    db.execute("CREATE TABLE _ctxf_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    name, first = min(MIGRATIONS)
    first(db)
    db.execute("INSERT INTO _ctxf_migrations VALUES (?, 'then')", [name])
    db.conn.commit()
    db.conn.close()
    with Store.open(path) as store:
        rows = store.db.execute("SELECT name FROM _ctxf_migrations").fetchall()
    assert [r[0] for r in rows] == sorted(n for n, _ in MIGRATIONS)


def test_store_of_the_last_release_gets_the_content_index_and_keeps_its_sessions(tmp_path):
    """m005 adds an index only: a store made before it opens with its rows as they were."""
    path = tmp_path / "m004.db"
    db = sqlite_utils.Database(path)
    db.execute("CREATE TABLE _ctxf_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    for name, fn in sorted(MIGRATIONS):
        if name < "m005":
            fn(db)
            db.execute("INSERT INTO _ctxf_migrations VALUES (?, 'then')", [name])
    db["sessions"].insert({"id": "s1", "format": "f", "source": "p", "outcome": "unknown", "content_hash": "b2:x"})
    db["files"].insert({"hash": "h1", "path": "p", "sessions": '["s1"]'})
    db.conn.commit()
    db.conn.close()
    with Store.open(path) as store:
        indexes = {r[1] for r in store.db.execute("PRAGMA index_list(sessions)")}
        assert "idx_sessions_content_hash" in indexes
        assert [r["id"] for r in store.sessions()] == ["s1"] and store.file_record("h1") is not None


def test_deleting_sessions_forgets_the_file_records_that_list_them(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        with store.transaction():
            for sid in ("a", "b", "c"):
                store.write_session(Session(sid, "test", messages=[Message(role="user", text=sid)]), sid=sid,
                                    source="src", source_hash="h", parent_id=None)
            for h, ids in (("h_ab", ["a", "b"]), ("h_c", ["c"]), ("h_junk", None)):
                store.record_file(file_hash=h, path="src", fmt="test", size=1, sessions=ids or [], messages=1,
                                  warnings=[], skipped={})
            store.db.execute("UPDATE files SET sessions = 'not json' WHERE hash = 'h_junk'")
            assert store.delete_sessions(["b"]) == 1
        assert store.file_record("h_ab") is None  # it listed b: a re-ingest must read the file again
        assert store.file_record("h_c") is not None and store.file_record("h_junk") is not None
        assert [r["id"] for r in store.sessions()] == ["a", "c"]


def test_round_trip_of_every_field(tmp_path):
    msgs = [
        Message(role="system", text="be careful"),
        Message(role="user", text="look", parts=({"type": "image", "width": 10, "height": 20},)),
        Message(role="assistant", text="", tool_calls=(ToolCall("ls", '{"path": "."}', "c1"),),
                usage=Usage(prompt_tokens=100, completion_tokens=5, cache_read_tokens=80), model="m1",
                meta={"request": {"tools": 1}}),
        # a time in the stored shape (UTC, to the microsecond): another is stored in it (test_times_*)
        Message(role="tool", text="a b", tool_call_id="c1", name="ls", timestamp="2025-01-01T00:00:00.000000Z"),
    ]
    with Store.open(tmp_path / "s.db") as store:
        with store.transaction():
            store.write_session(Session("x", "test", messages=iter(msgs)), sid="sid1", source="src",
                                source_hash="h", parent_id=None)
        back = store.messages("sid1")
        row = store.session("sid1")
    assert [b.message for b in back] == msgs
    assert [b.hash for b in back] == [m.hash for m in msgs]
    assert back[2].message.meta == {"request": {"tools": 1}}
    assert row["model"] == "m1" and row["step_count"] == 1 and row["usage_count"] == 1


def test_messages_read_back_are_ordinary_records(tmp_path):
    """The read path fills the records' slots itself (for speed): they must behave as built ones."""
    import pickle
    from dataclasses import FrozenInstanceError, replace

    msg = Message(role="tool", text="a b", tool_call_id="c1", name="ls", meta={"k": [1]})
    with Store.open(tmp_path / "s.db") as store:
        with store.transaction():
            store.write_session(Session("x", "test", messages=[msg]), sid="sid1", source="src",
                                source_hash="h", parent_id=None)
        (back,) = store.messages("sid1")
    assert back.message == msg and back.message.meta == {"k": [1]} and back.seq == 0
    assert back.role == "tool" and back.session_id == "sid1" and back.hash == msg.hash
    assert pickle.loads(pickle.dumps(back)) == back
    assert replace(back.message, text="x") == replace(msg, text="x")
    with pytest.raises(FrozenInstanceError):
        back.message.text = "x"  # type: ignore[misc]


def test_a_row_no_message_could_hold_still_fails_on_read(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        with store.transaction():
            store.write_session(Session("x", "test", messages=[Message(role="user", text="hi")]), sid="sid1",
                                source="src", source_hash="h", parent_id=None)
        store.db.execute("UPDATE messages SET role = 'robot' WHERE session_id = 'sid1'")  # edited by hand
        with pytest.raises(ValueError, match="role must be one of"):
            store.messages("sid1")
        store.db.execute("UPDATE messages SET role = 'user', kind = 'memo' WHERE session_id = 'sid1'")
        with pytest.raises(ValueError, match="kind must be one of"):
            store.messages("sid1")


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_conv = st.lists(
    st.fixed_dictionaries({"from": st.sampled_from(["human", "gpt", "system"]), "value": _text}),
    min_size=1, max_size=6,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(convs=st.lists(_conv, min_size=1, max_size=4), repeats=st.integers(min_value=2, max_value=3))
def test_reingest_adds_no_rows(tmp_path_factory, convs, repeats):
    import json

    d = tmp_path_factory.mktemp("h")
    f = d / "c.json"
    f.write_text(json.dumps([{"id": f"c{i}", "conversations": c} for i, c in enumerate(convs)]))
    with Store.open(d / "s.db") as store:
        counts = []
        for i in range(repeats):
            ingest_paths(store, [f], force=i % 2 == 1)  # --force re-reads: still nothing new
            counts.append((store.session_count(),
                           store.db.execute("SELECT count(*) FROM messages").fetchone()[0]))
    assert len(set(counts)) == 1
    assert counts[0] == (len(convs), sum(len(c) for c in convs))


# ---------------------------------------------------------------- stores this ctxf must not write


def _versioned_store(path, *, user_version=None, extra_migration=None):
    with Store.open(path) as store:
        store.db.execute("INSERT INTO sessions (id, format, source) VALUES ('s1', 'f', 'p')")
        if user_version is not None:
            store.db.execute(f"PRAGMA user_version = {user_version}")
        if extra_migration:
            store.db.execute("INSERT INTO _ctxf_migrations VALUES (?, 'later')", [extra_migration])


@pytest.mark.parametrize("newer", [{"user_version": SCHEMA_VERSION + 1}, {"extra_migration": "m900_from_the_future"}])
def test_a_store_from_a_newer_ctxf_is_refused_and_left_as_it_is(tmp_path, newer):
    from typer.testing import CliRunner

    from context_forensics.cli import app
    from store_checks import file_bytes

    path = tmp_path / "s.db"
    _versioned_store(path, **newer)
    before = file_bytes(path)
    for read_only in (None, True):
        with pytest.raises(StoreVersionError) as e:
            Store.open(path, read_only=read_only)
        assert "newer ctxf" in str(e.value) and "upgrade ctxf" in str(e.value) and str(path) in str(e.value)
    for args in (["sessions"], ["ingest", tmp_path / "none.json"]):
        r = CliRunner().invoke(app, [*map(str, args), "--db", str(path)])
        assert r.exit_code == 1 and "newer ctxf" in r.stderr and "Traceback" not in r.output + r.stderr
    assert file_bytes(path) == before


def test_a_store_of_an_earlier_release_opens_and_gets_the_schema_version(tmp_path):
    path = tmp_path / "s.db"
    _versioned_store(path, user_version=0)  # as every store before user_version was set
    with Store.open(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert [s["id"] for s in store.sessions()] == ["s1"]


def test_an_sqlite_file_that_is_not_a_ctxf_store_is_refused_and_left_as_it_is(tmp_path):
    from store_checks import file_bytes

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE notes (body TEXT)")
    before = file_bytes(path)
    with pytest.raises(StoreError, match="not a ctxf store"):
        Store.open(path)
    assert file_bytes(path) == before and "_ctxf_migrations" not in sqlite_utils.Database(path).table_names()


def _corrupt_messages_table(path):
    """Overwrite the page type of the messages table's root page: the schema still reads, the
    table does not."""
    with sqlite3.connect(path) as c:
        root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
        page_size = c.execute("PRAGMA page_size").fetchone()[0]
    with open(path, "r+b") as f:
        f.seek((root - 1) * page_size + (100 if root == 1 else 0))
        f.write(b"\xff")


def test_a_store_failing_its_integrity_check_is_never_written_into(tmp_path):
    from typer.testing import CliRunner

    from context_forensics.cli import app
    from store_checks import file_bytes, integrity, write_sharegpt

    path = tmp_path / "s.db"
    write_sharegpt(tmp_path / "a.json", n_sessions=3, seed=1)
    write_sharegpt(tmp_path / "b.json", n_sessions=2, seed=2)
    with Store.open(path) as store:
        sid = ingest_paths(store, [tmp_path / "a.json"]).files[0].sessions[0]
    _corrupt_messages_table(path)
    assert integrity(path) != ["ok"]
    before = file_bytes(path)
    runner = CliRunner()
    ingest = runner.invoke(app, ["ingest", str(tmp_path / "b.json"), "--db", str(path), "--json"])
    assert ingest.exit_code == 1
    assert "fails SQLite's integrity check" in ingest.stdout + ingest.stderr
    assert "re-ingest" in ingest.stdout + ingest.stderr
    rm = runner.invoke(app, ["rm", sid, "--db", str(path)])
    assert rm.exit_code == 1 and "fails SQLite's integrity check" in rm.stderr and "restore it" in rm.stderr
    assert file_bytes(path) == before
    with Store.open(path) as store:  # reading is not refused: what can be read still is
        assert len(store.sessions()) == 3
        with pytest.raises(StoreCorruptError):
            with store.transaction():
                pass


def test_a_new_store_has_16k_pages_and_an_existing_one_keeps_its_own(tmp_path):
    new = tmp_path / "new.db"
    Store.open(new).close()
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as c:
        c.execute("PRAGMA page_size = 4096")
        c.execute("CREATE TABLE _ctxf_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    with Store.open(new) as a, Store.open(old) as b:
        assert a.db.execute("PRAGMA page_size").fetchone()[0] == 16384
        assert b.db.execute("PRAGMA page_size").fetchone()[0] == 4096
        assert [r["name"] for r in b.db["_ctxf_migrations"].rows] == sorted(n for n, _ in MIGRATIONS)


def _undated_chat(path, n):
    """An OpenAI request body: no time anywhere, so its session has no start of its own."""
    path.write_text('{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "A haiku about tide '
                    f'pools, number {n}."}}, {{"role": "assistant", "content": "Water holds the sky."}}]}}')
    return path


@pytest.mark.parametrize("seconds", [("2026-01-02T03:04:05+00:00",) * 2,
                                     ("2026-01-02T03:04:05+00:00", "2026-01-02T03:04:06+00:00")],
                         ids=["one second", "a second turns between them"])
def test_sessions_with_no_start_list_by_id_whatever_the_clock(tmp_path, monkeypatch, seconds):
    """Sessions whose logs record no start list after the dated ones, by id: the same order in every
    store of the same logs. (They were placed at the second they were stored: stored in one second
    they tied and went by id, with a second turning between them in the order stored, so two stores
    of the same files listed them differently; a clean-clone CI run failed on it.)"""
    import context_forensics.store.db as db

    files = [_undated_chat(tmp_path / f"chat{n}.json", n) for n in (1, 2)]
    with Store.open(tmp_path / "ids.db") as scratch:  # which id is larger: store that file first
        ingest_paths(scratch, [str(f) for f in files])
        by_source = {s["source"]: s["id"] for s in scratch.sessions()}
    first, second = sorted(files, key=lambda f: by_source[str(f.resolve())], reverse=True)
    clock = iter(seconds)
    now = next(clock)
    monkeypatch.setattr(db, "_now", lambda: now)
    with Store.open(tmp_path / "s.db") as store:
        assert ingest_paths(store, [str(first)]).exit_code == 0
        now = next(clock)
        assert ingest_paths(store, [str(second)]).exit_code == 0
        with store.transaction():  # started after both were stored: still listed before them
            store.write_session(Session("dated", "test", messages=[Message(role="user", text="a dated session")],
                                        started_at="2099-01-01T00:00:00Z"),
                                sid="dated", source="dated.jsonl", source_hash="h", parent_id=None)
        listed = [s["id"] for s in store.sessions()]
        assert [s["ingested_at"] for s in store.db.execute(
            "SELECT ingested_at FROM sessions WHERE started_at IS NULL ORDER BY rowid")] == list(seconds)
    undated = [by_source[str(second.resolve())], by_source[str(first.resolve())]]
    assert undated == sorted(undated)  # stored the larger id first
    assert listed[1:] == undated and len(listed) == 3
