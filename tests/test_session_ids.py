"""A session's id is its content's, never its file's path (issue 34): the same log from two folders,
in one store or two, is one id; another run under the same external id is another; a re-ingest
adds nothing; a grown log replaces its older version; a store written before keeps its ids."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.hashing import short_id
from context_forensics.records import Message, Session
from context_forensics.store.db import Store, session_id
from helpers import FIXTURES

SHAREGPT = FIXTURES / "sharegpt_small.json"  # two sessions, ids "small-1" and "small-2" (not global)
CLAUDE_CODE = FIXTURES / "claude_code" / "session.jsonl"  # a global id (the sessionId, a UUID)


@pytest.fixture()
def runner():
    return CliRunner()


def ingest(runner, db, *paths):
    r = runner.invoke(app, ["ingest", *map(str, paths), "--db", str(db), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)["files"]


def rows(db):
    with sqlite3.connect(db) as c:
        return c.execute("SELECT id, external_id, source FROM sessions ORDER BY external_id, id").fetchall()


def count(db, table):
    with sqlite3.connect(db) as c:
        return c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def copies(tmp_path, src, *folders):
    out = []
    for folder in folders:
        (tmp_path / folder).mkdir()
        out.append(tmp_path / folder / src.name)
        shutil.copy(src, out[-1])
    return out


@pytest.mark.parametrize("src", [SHAREGPT, CLAUDE_CODE], ids=["content-id", "global-id"])
def test_the_same_file_in_two_folders_has_one_id_in_two_stores_and_is_one_session_in_one(runner, tmp_path, src):
    a, b = copies(tmp_path, src, "a", "b")
    (fa,) = ingest(runner, tmp_path / "a.db", a)
    (fb,) = ingest(runner, tmp_path / "b.db", b)
    assert fa["sessions"] == fb["sessions"] and fa["sessions"]
    # the sources differ (each store records where it read the file), the ids do not
    assert [r[2] for r in rows(tmp_path / "a.db")] == [str(a.resolve())] * len(fa["sessions"])
    assert [r[2] for r in rows(tmp_path / "b.db")] == [str(b.resolve())] * len(fa["sessions"])
    # one store, both folders: one session each, kept from the first folder, the second says so
    one = tmp_path / "one.db"
    ingest(runner, one, a)
    (again,) = ingest(runner, one, b)
    assert again["status"] == "unchanged" and again["sessions"] == fa["sessions"]
    assert again["same_as"] == [{"session": s, "source": str(a.resolve())} for s in fa["sessions"]]
    assert count(one, "sessions") == len(fa["sessions"]) and count(one, "messages") == fa["messages"]
    (third,) = ingest(runner, one, b)  # a re-ingest adds nothing
    assert third["status"] == "unchanged" and count(one, "sessions") == len(fa["sessions"])


def test_a_content_id_is_the_format_the_external_id_and_the_messages(runner, tmp_path):
    (f,) = ingest(runner, tmp_path / "s.db", SHAREGPT)
    with sqlite3.connect(tmp_path / "s.db") as c:
        stored = c.execute("SELECT id, format, external_id, content_hash FROM sessions").fetchall()
    assert sorted(f["sessions"]) == sorted(sid for sid, *_ in stored)
    assert all(sid == session_id(fmt, ext, content) for sid, fmt, ext, content in stored)


def test_two_files_sharing_an_external_id_with_other_content_are_two_sessions(runner, tmp_path):
    data = json.loads(SHAREGPT.read_text())
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(data[:1]))
    data[0]["conversations"][-1]["value"] = "13."  # the same id "small-1", another answer
    b.write_text(json.dumps(data[:1]))
    db = tmp_path / "s.db"
    (fa,), (fb,) = ingest(runner, db, a), ingest(runner, db, b)
    assert fa["sessions"] != fb["sessions"] and fb["status"] == "ingested" and fb["same_as"] == []
    assert [r[1] for r in rows(db)] == ["small-1", "small-1"] and count(db, "messages") == 6


def test_one_file_holding_two_runs_under_one_external_id_stores_both_and_a_repeat_once(runner, tmp_path):
    data = json.loads(SHAREGPT.read_text())
    other = json.loads(json.dumps(data[0]))
    other["conversations"][-1]["value"] = "13."
    f = tmp_path / "runs.json"
    f.write_text(json.dumps([data[0], other, data[0]]))  # small-1, another small-1, small-1 again
    (res,) = ingest(runner, tmp_path / "s.db", f)
    assert len(res["sessions"]) == 2 and res["messages"] == 6
    assert res["warnings"] == [f"{f}: session 'small-1' appears twice with the same content; stored once"]
    assert count(tmp_path / "s.db", "sessions") == 2 and count(tmp_path / "s.db", "messages") == 6


def _grow(path, line):
    with path.open("a") as fh:
        fh.write(line + "\n")


def test_a_grown_log_replaces_its_older_version_under_its_new_content_id(runner, tmp_path):
    log = tmp_path / "chat.jsonl"
    log.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n')
    db = tmp_path / "s.db"
    (first,) = ingest(runner, db, log)
    _grow(log, '{"role": "user", "content": "and now?"}')
    (grown,) = ingest(runner, db, log)
    # another content, another id; the older version of this file's session is gone (replaced)
    assert grown["status"] == "ingested" and grown["sessions"] != first["sessions"] and grown["replaced"] == 1
    assert [r[0] for r in rows(db)] == grown["sessions"] and count(db, "messages") == 3
    (again,) = ingest(runner, db, log)
    assert again["status"] == "unchanged" and again["sessions"] == grown["sessions"]
    # the same grown log from elsewhere, into a store of its own: the same id
    other = tmp_path / "elsewhere"
    other.mkdir()
    shutil.copy(log, other / log.name)
    assert ingest(runner, tmp_path / "t.db", other / log.name)[0]["sessions"] == grown["sessions"]


def test_a_grown_log_with_a_global_id_keeps_it(runner, tmp_path):
    (log,) = copies(tmp_path, CLAUDE_CODE, "proj")
    db = tmp_path / "s.db"
    (first,) = ingest(runner, db, log)
    before = count(db, "messages")
    _grow(log, json.dumps({"parentUuid": "a-08", "sessionId": "11111111-2222-4333-8444-555555555555",
                           "type": "user", "uuid": "u-late", "timestamp": "2026-02-01T11:00:00.000Z",
                           "message": {"role": "user", "content": "one more thing"}}))
    (grown,) = ingest(runner, db, log)
    assert grown["sessions"] == first["sessions"] and grown["replaced"] == 1
    assert count(db, "sessions") == 1 and count(db, "messages") == before + 1


def _old_id(fmt, source, external_id):
    """A session id as ctxf wrote it before ids were their content's: with its file's path."""
    return short_id(fmt, source, external_id)


def _old_store(db, source):
    """A store written before: SHAREGPT's first session under the id of its path."""
    data = json.loads(SHAREGPT.read_text())[0]
    roles = {"system": "system", "human": "user", "gpt": "assistant"}
    msgs = [Message(roles[t["from"]], t["value"]) for t in data["conversations"]]
    old = _old_id("sharegpt", source, "small-1")
    with Store.open(db) as store, store.transaction():
        store.write_session(Session("small-1", "sharegpt", messages=msgs), sid=old, source=source,
                            source_hash="h-old", parent_id=None)
    return old


def test_a_store_written_before_keeps_its_ids_and_finds_the_same_run_from_another_folder(runner, tmp_path):
    db = tmp_path / "s.db"
    old = _old_store(db, "/logs/old/sharegpt_small.json")
    (res,) = ingest(runner, db, SHAREGPT)
    # small-1 is stored already (under its old id, from its old path): kept; small-2 is new
    assert res["same_as"] == [{"session": old, "source": "/logs/old/sharegpt_small.json"}]
    assert old in res["sessions"] and len(res["sessions"]) == 2 and count(db, "sessions") == 2


def test_a_store_written_before_gives_a_changed_file_content_ids(runner, tmp_path):
    f = tmp_path / SHAREGPT.name
    shutil.copy(SHAREGPT, f)
    db = tmp_path / "s.db"
    old = _old_store(db, str(f.resolve()))
    (res,) = ingest(runner, db, f)  # the file holds more than that store read of it: read again
    assert old not in res["sessions"] and len(res["sessions"]) == 2 and res["same_as"] == []
    assert sorted(r[0] for r in rows(db)) == sorted(res["sessions"]) and count(db, "messages") == 5


def test_a_long_session_is_renamed_to_its_content_id_at_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(Store, "BATCH", 4)
    msgs = [Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(11)]
    with Store.open(tmp_path / "s.db") as store:
        with store.transaction():
            w = store.write_session(Session("x", "test", messages=iter(msgs)), sid=None, source="a",
                                    source_hash="h", parent_id=None)
        assert w.session_id == session_id("test", "x", w.content_hash) and w.messages == 11
        assert [r[0] for r in store.db.execute("SELECT DISTINCT session_id FROM messages")] == [w.session_id]
        assert [r[0] for r in store.db.execute("SELECT id FROM sessions")] == [w.session_id]
        with store.transaction():  # the same content again, from another source: nothing written
            again = store.write_session(Session("x", "test", messages=iter(msgs)), sid=None, source="b",
                                        source_hash="h", parent_id=None)
        assert again.session_id == w.session_id and again.stored_source == "a"
        assert tuple(store.db.execute("SELECT count(*), min(session_id) FROM messages").fetchone()) \
            == (11, w.session_id)
        assert store.session(w.session_id)["source"] == "a"


def test_empty_sessions_are_told_apart_by_what_their_log_says_of_them(tmp_path):
    with Store.open(tmp_path / "s.db") as store, store.transaction():
        ids = [store.write_session(Session("x", "test", title=t), sid=None, source=t, source_hash="h",
                                   parent_id=None).session_id for t in ("one", "two", "one")]
    assert ids[0] != ids[1] and ids[0] == ids[2]
