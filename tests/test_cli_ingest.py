"""CLI behaviour of ingest/sessions/show on good and bad input (CliRunner, real store)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from helpers import FIXTURES

BAD = FIXTURES / "bad"
SHAREGPT = FIXTURES / "sharegpt_small.json"


@pytest.fixture()
def runner():
    return CliRunner()


@pytest.fixture()
def db(tmp_path):
    return str(tmp_path / "store.db")


def run(runner, *args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def count(db, table):
    with sqlite3.connect(db) as c:
        return c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_ingest_then_reingest_adds_nothing(runner, db):
    r = run(runner, "ingest", SHAREGPT, "--db", db, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["totals"]["sessions"] == 2
    assert data["totals"]["messages"] == 5
    before = (count(db, "sessions"), count(db, "messages"))
    r = run(runner, "ingest", SHAREGPT, "--db", db, "--json")
    assert r.exit_code == 0
    assert json.loads(r.stdout)["files"][0]["status"] == "unchanged"
    assert (count(db, "sessions"), count(db, "messages")) == before == (2, 5)


def test_changed_file_replaces_its_sessions(runner, db, tmp_path):
    f = tmp_path / "conv.json"
    shutil.copy(SHAREGPT, f)
    assert run(runner, "ingest", f, "--db", db).exit_code == 0
    data = json.loads(f.read_text())
    data = data[:1]
    data[0]["conversations"].append({"from": "human", "value": "one more"})
    f.write_text(json.dumps(data))
    r = run(runner, "ingest", f, "--db", db, "--json")
    assert r.exit_code == 0
    res = json.loads(r.stdout)["files"][0]
    assert res["status"] == "ingested" and res["replaced"] == 2  # one updated, one gone
    assert count(db, "sessions") == 1
    assert count(db, "messages") == 4


def test_unknown_format_is_usage_error_listing_formats(runner, db):
    r = run(runner, "ingest", BAD / "notes.txt", "--db", db)
    assert r.exit_code == 2
    assert "cannot tell which log format" in r.stderr
    assert "--format" in r.stderr and "sharegpt" in r.stderr


def test_unknown_format_name(runner, db):
    r = run(runner, "ingest", SHAREGPT, "--format", "nope", "--db", db)
    assert r.exit_code == 2
    assert "unknown format 'nope'" in r.stderr


def test_malformed_json_names_line_and_column(runner, db):
    r = run(runner, "ingest", BAD / "malformed.json", "--format", "sharegpt", "--db", db)
    assert r.exit_code == 1
    assert "malformed.json:4:38" in r.stderr
    assert count(db, "sessions") == 0 and count(db, "files") == 0


def test_truncated_last_jsonl_line_is_a_warning(runner, db):
    r = run(runner, "ingest", BAD / "truncated.jsonl", "--db", db, "--json")
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)["files"][0]
    assert res["status"] == "partial"  # stored in part (issue 32): the torn line's content is lost
    assert len(res["sessions"]) == 1 and res["messages"] == 2
    assert res["skipped"] == {"truncated line": 1}
    assert "truncated.jsonl:2" in r.stderr and "truncated" in r.stderr


def test_bad_line_in_the_middle_is_skipped_counted_and_the_rest_kept(runner, db):
    # Issue 9 item 11 (this test used to expect the whole file to fail): the bad line is
    # skipped and counted with its line number, the two good conversations are stored, exit 0.
    r = run(runner, "ingest", BAD / "middle_bad.jsonl", "--format", "sharegpt", "--db", db, "--json")
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)["files"][0]
    assert res["status"] == "partial" and len(res["sessions"]) == 2 and res["messages"] == 2  # in part (issue 32)
    assert res["skipped"] == {"invalid JSON line": 1}
    assert res["warnings"] == [f"{BAD / 'middle_bad.jsonl'}:2: invalid JSON (Expecting value at column 8); "
                               "skipped this line, kept the rest"]
    assert "middle_bad.jsonl:2: invalid JSON (Expecting value at column 8)" in " ".join(r.stderr.split())
    assert count(db, "sessions") == 2 and count(db, "messages") == 2


def test_a_jsonl_file_with_no_readable_line_fails_and_writes_nothing(runner, db, tmp_path):
    p = tmp_path / "junk.jsonl"
    p.write_text('{"id": broken}\n\n{"id": also broken}\n')
    r = run(runner, "ingest", p, "--format", "sharegpt", "--db", db, "--json")
    assert r.exit_code == 1
    res = json.loads(r.stdout)["files"][0]
    assert res["status"] == "failed"
    assert res["error"].startswith(f"{p}:1:8: no line could be read: 2 line(s), none valid JSON; line 1: "
                                   "Expecting value at column 8")
    assert count(db, "sessions") == 0 and count(db, "files") == 0


def test_invalid_utf8_is_replaced_and_warned(runner, db):
    r = run(runner, "ingest", BAD / "bad_utf8.jsonl", "--format", "sharegpt", "--db", db, "--json")
    assert r.exit_code == 0
    assert "invalid UTF-8" in r.stderr
    with sqlite3.connect(db) as c:
        text = c.execute("SELECT text FROM messages WHERE seq = 0").fetchone()[0]
    assert text == "caf\ufffd bad byte"


def test_empty_file_is_a_clear_error(runner, db):
    r = run(runner, "ingest", BAD / "empty.json", "--format", "sharegpt", "--db", db)
    assert r.exit_code == 1
    assert "empty" in r.stderr and "empty.json" in r.stderr


def test_one_bad_file_never_loses_the_others(runner, db):
    r = run(runner, "ingest", BAD / "malformed.json", SHAREGPT, "--format", "sharegpt", "--db", db, "--json")
    assert r.exit_code == 1
    statuses = [f["status"] for f in json.loads(r.stdout)["files"]]
    assert statuses == ["failed", "ingested"]
    assert count(db, "sessions") == 2


def _anthropic_exchange(usage: dict) -> str:
    return json.dumps({
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": "hi"}],
        "response": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "text", "text": "hello"}], "usage": usage},
    })


def test_token_counts_beyond_64_bits_never_abort_the_ingest(runner, db, tmp_path):
    huge, summed = tmp_path / "huge.json", tmp_path / "summed.json"
    huge.write_text(_anthropic_exchange({"input_tokens": 2**70, "output_tokens": 5}))
    # each count fits in 64 bits, their sum (the prompt) does not
    summed.write_text(_anthropic_exchange({"input_tokens": 2**62, "cache_read_input_tokens": 2**62,
                                           "cache_creation_input_tokens": 2**62, "output_tokens": 5}))
    r = run(runner, "ingest", huge, summed, "--format", "anthropic_messages", "--db", db, "--json")
    files = {f["path"].rsplit("/", 1)[-1]: f for f in json.loads(r.stdout)["files"]}
    assert r.exit_code == 0
    # a count no integer column holds is no count: the session is kept without it
    assert files["huge.json"]["status"] == "ingested"
    # a sum that overflows is dropped the same way (the store refused it; the file was read again
    # in careful mode), with a warning naming the file; the rest of the message is kept
    # (a recorded figure lost: stored in part, "partial" since issue 32; the flag said so before)
    assert files["summed.json"]["status"] == "partial" and files["summed.json"]["partial"]
    assert any("summed.json" in w and "64-bit" in w for w in files["summed.json"]["warnings"])
    assert files["summed.json"]["skipped"] == {"malformed field": 1}
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT prompt_tokens, completion_tokens, cache_read_tokens FROM messages "
                         "WHERE role = 'assistant' ORDER BY prompt_tokens").fetchall() == [
                             (None, 5, None), (None, 5, 2**62)]
    assert count(db, "sessions") == 2
    assert "Traceback" not in r.output


def test_missing_path(runner, db):
    r = run(runner, "ingest", BAD / "does-not-exist.json", "--db", db)
    assert r.exit_code == 1
    assert "no such file" in r.stderr


def test_no_traceback_reaches_the_user(runner, db, tmp_path):
    # A corrupt store file: a clear error, no traceback.
    bogus = tmp_path / "bogus.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    r = run(runner, "sessions", "--db", bogus)
    assert r.exit_code == 1
    assert "Traceback" not in r.output + r.stderr
    assert "cannot open the store" in r.stderr


def test_log_text_never_acts_as_markup_or_escape(runner, db):
    assert run(runner, "ingest", BAD / "escapes.json", "--db", db).exit_code == 0
    r = run(runner, "show", BAD / "escapes.json", "--db", db)
    assert r.exit_code == 0
    assert "[bold red]not markup[/]" in r.stdout
    assert "\x1b" not in r.stdout
    assert "\\x1b[31m" in r.stdout


def test_sessions_json_contract(runner, db):
    r = run(runner, "sessions", "--db", db, "--json")  # no store yet: a reading command creates none
    assert r.exit_code == 2 and r.stdout == "" and not Path(db).exists()
    from context_forensics.api import open_store

    open_store(db).close()  # an empty store lists []
    r = run(runner, "sessions", "--db", db, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == {"version": 1, "sessions": []}
    run(runner, "ingest", SHAREGPT, "--db", db)
    rows = json.loads(run(runner, "sessions", "--db", db, "--json").stdout)["sessions"]
    assert len(rows) == 2
    for row in rows:
        for key in ("id", "format", "source", "task", "outcome", "message_count", "model"):
            assert key in row
        assert row["format"] == "sharegpt" and row["outcome"] == "unknown"


def test_show_by_path_prefix_and_id(runner, db):
    run(runner, "ingest", SHAREGPT, "--db", db)
    rows = json.loads(run(runner, "sessions", "--db", db, "--json").stdout)["sessions"]
    sid = rows[0]["id"]
    for ref in (sid, sid[:6]):
        r = run(runner, "show", ref, "--db", db, "--json")
        assert r.exit_code == 0
        data = json.loads(r.stdout)
        assert data["session"]["id"] == sid
        assert [m["seq"] for m in data["messages"]] == list(range(len(data["messages"])))
    r = run(runner, "show", "zzzz", "--db", db)
    assert r.exit_code == 2 and "no session matches" in r.stderr
    # A file holding two sessions asks which one.
    r = run(runner, "show", SHAREGPT, "--db", db)
    assert r.exit_code == 2 and "holds 2 sessions" in r.stderr


def test_task_and_outcome_flags(runner, db):
    r = run(runner, "ingest", SHAREGPT, "--db", db, "--task", "t1", "--outcome", "failure")
    assert r.exit_code == 0
    rows = json.loads(run(runner, "sessions", "--db", db, "--json", "--task", "t1").stdout)["sessions"]
    assert {r["outcome"] for r in rows} == {"failure"} and len(rows) == 2
    r = run(runner, "ingest", SHAREGPT, "--db", db, "--outcome", "maybe")
    assert r.exit_code == 2


def test_max_sessions_refuses_and_writes_nothing(runner, tmp_path):
    cfg = tmp_path / "c.yaml"
    db = tmp_path / "s.db"
    cfg.write_text(f"storage:\n  path: {db}\n  max_sessions: 1\n")
    r = run(runner, "ingest", SHAREGPT, "--config", cfg)
    assert r.exit_code == 1
    assert "max_sessions" in r.stderr
    assert count(str(db), "sessions") == 0  # the file's transaction was rolled back


def test_help_lists_every_command(runner):
    r = run(runner, "--help")
    for cmd in ("ingest", "sessions", "show", "config", "formats", "rm"):
        assert cmd in r.stdout


# ---------------------------------------------------------------- identity by content (issue 9, items 8-9)

OPENHANDS = FIXTURES / "openhands"
CLAUDE_CODE = FIXTURES / "claude_code"


def ingest_json(runner, db, *paths):
    r = run(runner, "ingest", *paths, "--db", db, "--json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def sources(db):
    with sqlite3.connect(db) as c:
        return [r[0] for r in c.execute("SELECT source FROM sessions ORDER BY source")]


@pytest.mark.parametrize("first, second", [("llm_completions", "."), (".", "llm_completions")])
def test_one_openhands_run_through_two_paths_is_one_session(runner, db, first, second):
    # The llm_completions/ folder and its parent are two units with two hashes (the parent
    # also holds the eval log); they used to become two sessions with one content hash.
    run_dir = OPENHANDS / "single"
    a = ingest_json(runner, db, run_dir / first)["files"][0]
    b = ingest_json(runner, db, run_dir / second)["files"][0]
    assert a["status"] == "ingested" and a["same_as"] == []
    assert b["status"] == "unchanged" and b["sessions"] == a["sessions"] and b["messages"] == a["messages"]
    assert b["same_as"] == [{"session": a["sessions"][0], "source": str((run_dir / first).resolve())}]
    assert sources(db) == [str((run_dir / first).resolve())]  # the first path is the one kept
    assert count(db, "sessions") == 1 and count(db, "messages") == a["messages"]
    # either path finds it, and a third look through the second path is a plain lookup
    for ref in (run_dir / first, run_dir / second):
        shown = json.loads(run(runner, "show", ref, "--db", db, "--json").stdout)
        assert shown["session"]["id"] == a["sessions"][0]
    again = ingest_json(runner, db, run_dir / second)["files"][0]
    assert again["status"] == "unchanged" and again["same_as"] == b["same_as"]


def test_a_run_folder_holding_an_ingested_instance_adds_only_the_other(runner, db):
    instance = OPENHANDS / "run" / "llm_completions" / "owner__repo-9"
    (one,) = ingest_json(runner, db, instance)["files"][0]["sessions"]
    res = ingest_json(runner, db, OPENHANDS / "run")["files"][0]
    # the fixture's run holds an unreadable call file: stored in part, "partial" (issue 32)
    assert res["status"] == "partial" and len(res["sessions"]) == 2 and one in res["sessions"]
    assert res["unread"] == {"unreadable call file": 1}
    assert res["same_as"] == [{"session": one, "source": str(instance.resolve())}]
    assert count(db, "sessions") == 2


def test_symlink_relative_path_and_reserialised_copy_are_the_same_sessions(runner, db, tmp_path, monkeypatch):
    first = ingest_json(runner, db, SHAREGPT)["files"][0]
    link = tmp_path / "link.json"
    link.symlink_to(SHAREGPT)
    monkeypatch.chdir(SHAREGPT.parent)
    copy = tmp_path / "elsewhere" / SHAREGPT.name  # the same conversations, other bytes
    copy.parent.mkdir()
    copy.write_text(json.dumps(json.loads(SHAREGPT.read_text()), indent=2))
    twin = tmp_path / "twin.json"  # byte-identical: its file hash is already known
    shutil.copy(SHAREGPT, twin)
    for ref in (link, SHAREGPT.name, copy, twin):
        res = ingest_json(runner, db, ref)["files"][0]
        assert res["status"] == "unchanged", ref
        assert sorted(res["sessions"]) == sorted(first["sessions"])
        # a path that is not the stored source names the stored sessions and where they are from
        other = str(Path(ref).resolve()) != str(SHAREGPT.resolve())
        assert {s["source"] for s in res["same_as"]} == ({str(SHAREGPT.resolve())} if other else set()), ref
    assert count(db, "sessions") == 2 and sources(db) == [str(SHAREGPT.resolve())] * 2
    r = run(runner, "show", twin, "--db", db)  # two sessions: found, and asked which one
    assert r.exit_code == 2 and "holds 2 sessions" in r.stderr


def test_rm_then_reingest_stores_the_session_again(runner, db):
    (sid,) = ingest_json(runner, db, OPENHANDS / "single")["files"][0]["sessions"]
    r = run(runner, "rm", sid, "--db", db)
    assert r.exit_code == 0 and "removed 1 session(s)" in r.stderr
    assert count(db, "sessions") == 0 and count(db, "files") == 0
    res = ingest_json(runner, db, OPENHANDS / "single")["files"][0]
    assert res["status"] == "ingested" and res["sessions"] == [sid]
    assert count(db, "sessions") == 1


def test_rm_one_of_a_files_sessions_restores_it_without_duplicating_the_other(runner, db):
    first = ingest_json(runner, db, SHAREGPT)["files"][0]
    kept, removed = first["sessions"]
    assert run(runner, "rm", removed, "--db", db).exit_code == 0
    assert count(db, "sessions") == 1
    res = ingest_json(runner, db, SHAREGPT)["files"][0]
    assert res["status"] == "ingested" and res["sessions"] == [kept, removed] and res["replaced"] == 0
    assert (count(db, "sessions"), count(db, "messages")) == (2, first["messages"])


def test_rm_of_a_session_reached_through_two_paths_forgets_both(runner, db):
    run_dir = OPENHANDS / "single"
    (sid,) = ingest_json(runner, db, run_dir / "llm_completions")["files"][0]["sessions"]
    ingest_json(runner, db, run_dir)
    assert count(db, "files") == 2
    assert run(runner, "rm", sid, "--db", db).exit_code == 0
    assert count(db, "files") == 0
    res = ingest_json(runner, db, run_dir)["files"][0]
    assert res["status"] == "ingested" and res["same_as"] == [] and sources(db) == [str(run_dir.resolve())]


def test_rm_of_a_parent_then_reingest_links_its_sub_agents_again(runner, db, tmp_path):
    root = tmp_path / "project"
    shutil.copytree(CLAUDE_CODE / "11111111-2222-4333-8444-555555555555", root / "11111111-2222-4333-8444-555555555555")
    shutil.copy(CLAUDE_CODE / "session.jsonl", root / "session.jsonl")

    def links():
        with sqlite3.connect(db) as c:
            return c.execute("SELECT count(*) FROM sessions WHERE parent_id IS NOT NULL").fetchone()[0]

    res = ingest_json(runner, db, root, "--recursive")
    parent = next(f["sessions"][0] for f in res["files"] if f["path"].endswith("session.jsonl"))
    assert count(db, "sessions") == 3 and links() == 2
    assert run(runner, "rm", parent, "--db", db).exit_code == 0
    assert count(db, "sessions") == 2 and links() == 0
    res = ingest_json(runner, db, root, "--recursive")
    assert [f["status"] for f in res["files"]] == ["ingested"] * 3
    assert count(db, "sessions") == 3 and links() == 2


def test_a_file_changed_and_changed_back_is_read_again(runner, db, tmp_path):
    # v1's file record must not answer "unchanged" once v2 has rewritten the sessions it lists.
    f = tmp_path / "conv.json"
    v1 = SHAREGPT.read_text()
    f.write_text(v1)
    first = ingest_json(runner, db, f)["files"][0]
    data = json.loads(v1)[:1]
    data[0]["conversations"].append({"from": "human", "value": "one more"})
    f.write_text(json.dumps(data))
    assert ingest_json(runner, db, f)["files"][0]["status"] == "ingested"
    f.write_text(v1)
    res = ingest_json(runner, db, f)["files"][0]
    assert res["status"] == "ingested" and res["sessions"] == first["sessions"]
    assert (count(db, "sessions"), count(db, "messages")) == (2, first["messages"])


def test_a_failure_mid_file_rolls_the_whole_file_back(db, tmp_path, monkeypatch):
    # One transaction per file: a session already written when the importer fails is undone.
    from context_forensics.errors import InputError as Bad
    from context_forensics.records import Message, Session
    from context_forensics.store.db import Store
    from context_forensics.store.ingest import Unit, ingest_unit

    class Half:
        name = "half"

        def parse(self, path, ctx):
            yield Session("one", "half", messages=[Message(role="user", text="kept?")])
            raise Bad("broken after the first session", where=f"{path}:9")

    f = tmp_path / "half.log"
    f.write_text("x")
    with Store.open(db) as store:
        res = ingest_unit(store, Unit(f, Half(), True))
        assert res.status == "failed" and "broken after the first session" in res.error
        assert store.session_count() == 0
        assert store.db.execute("SELECT count(*) FROM files").fetchone()[0] == 0


JSONL_CASES = {  # format: two good lines of that format
    "openai_chat": ['{"role": "user", "content": "hi"}', '{"role": "assistant", "content": "hello"}'],
    "openai_responses": ['{"type": "message", "role": "user", "content": "hi"}',
                         '{"type": "message", "role": "assistant", "content": "hello"}'],
    "generic_json": ['{"role": "user", "content": "hi"}', '{"role": "assistant", "content": "hello"}'],
    "sharegpt": ['{"id": "a", "conversations": [{"from": "human", "value": "hi"}]}',
                 '{"id": "b", "conversations": [{"from": "human", "value": "hello"}]}'],
}


@pytest.mark.parametrize("where", ["first", "middle"])
@pytest.mark.parametrize("fmt", sorted(JSONL_CASES))
def test_every_jsonl_importer_skips_and_counts_a_bad_line_once(runner, db, tmp_path, fmt, where):
    # The shared rule (base.JsonlLines), also where an importer looks at the first line to pick
    # a layout and then reads the file again: one bad line, one warning, one count.
    good = JSONL_CASES[fmt]
    lines = ['{"role": broken'] + good if where == "first" else [good[0], '{"role": broken', good[1]]
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join(lines) + "\n")
    res = ingest_json(runner, db, p, "--format", fmt)["files"][0]
    bad = lines.index('{"role": broken') + 1
    assert res["status"] == "partial" and res["messages"] == 2  # stored in part (issue 32)
    assert res["skipped"] == {"invalid JSON line": 1}
    assert res["warnings"] == [f"{p}:{bad}: invalid JSON (Expecting value at column 10); skipped this line, "
                               "kept the rest"]


def test_a_store_left_by_an_older_rm_reads_the_file_again(runner, db):
    # Before rm forgot file records, it left them behind: re-ingesting said "unchanged" and
    # listed a session the store no longer held. Such a record now answers nothing.
    (sid,) = ingest_json(runner, db, OPENHANDS / "single")["files"][0]["sessions"]
    with sqlite3.connect(db) as c:  # what the old `ctxf rm` did: the session only
        c.execute("DELETE FROM messages WHERE session_id = ?", [sid])
        c.execute("DELETE FROM sessions WHERE id = ?", [sid])
    assert count(db, "files") == 1
    res = ingest_json(runner, db, OPENHANDS / "single")["files"][0]
    assert res["status"] == "ingested" and res["sessions"] == [sid] and count(db, "sessions") == 1
