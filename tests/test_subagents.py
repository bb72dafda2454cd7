"""Sub-agents: a Claude Code session file brings its ``<session>/subagents/`` along, and every
view of a session names the session that started it and the sessions it started.

The fixture (tests/fixtures/subagents/) is shaped like Claude Code 2.1's own files: a parent
transcript whose ``Task`` call has ``agent_progress`` records and a result with
``toolUseResult.agentId``, and whose ``Agent`` call (the tool's newer name) says its agent only
in the result text (``agentId: ...``); two ``agent-<id>.jsonl`` children, one with the
``agent-<id>.meta.json`` sidecar newer versions write. The real corpus files are used too when
present.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.store.db import Store, session_id
from helpers import FIXTURES, corpus, parse

HERE = FIXTURES / "subagents"
SID = "22222222-3333-4444-8555-666666666666"
PARENT = HERE / f"{SID}.jsonl"
KIDS = HERE / SID / "subagents"
PARENT_ID = session_id("claude_code", SID)
SPOTTER = "claude-code-jsonl/spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


def run(*args, width: int = 120):
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(width), "NO_COLOR": "1"},
                             catch_exceptions=False)
    return res


def ingest(db, *paths):
    res = run("ingest", "--db", db, "--json", *paths)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def sessions(db) -> dict[str, dict]:
    res = run("sessions", "--db", db, "--json")
    assert res.exit_code == 0, res.output
    return {s["external_id"]: s for s in json.loads(res.stdout)["sessions"]}


def count(db, table="sessions") -> int:
    with sqlite3.connect(db) as c:
        return c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.fixture
def db(tmp_path):
    return tmp_path / "s.db"


# ---------------------------------------------------------------- ingest


def test_ingesting_a_session_file_ingests_its_subagents(db):
    report = ingest(db, PARENT)
    paths = [Path(f["path"]).name for f in report["files"]]
    assert paths == [PARENT.name, "agent-b0c1d2e.jsonl", "agent-c3d4e5f.jsonl"]
    assert [f["status"] for f in report["files"]] == ["ingested"] * 3
    rows = sessions(db)
    assert set(rows) == {SID, "b0c1d2e", "c3d4e5f"}
    assert rows["b0c1d2e"]["parent_id"] == rows["c3d4e5f"]["parent_id"] == rows[SID]["id"] == PARENT_ID


def test_reingest_and_a_walk_of_the_project_folder_add_nothing(db):
    ingest(db, PARENT)
    before = count(db), count(db, "messages"), count(db, "files")
    for args in ([PARENT], [HERE], [HERE, "--recursive"], [PARENT, KIDS / "agent-b0c1d2e.jsonl"]):
        report = ingest(db, *args)
        assert report["totals"]["ingested"] == 0, args
        names = [Path(f["path"]).name for f in report["files"]]
        assert len(names) == len(set(names)) == 3, (args, names)  # each file once, never twice
        assert report["ignored"] == []  # the .meta.json sidecar is read with its transcript
    assert (count(db), count(db, "messages"), count(db, "files")) == before


def test_a_recursive_walk_reads_each_subagent_file_once(db):
    report = ingest(db, HERE, "--recursive")
    assert sorted(Path(f["path"]).name for f in report["files"]) == sorted(
        [PARENT.name, "agent-b0c1d2e.jsonl", "agent-c3d4e5f.jsonl"])
    assert count(db) == 3


def test_a_file_without_a_subagents_folder_brings_nothing_along(db):
    report = ingest(db, FIXTURES / "claude_code" / "session.jsonl")  # its sub-agents sit under another name
    assert len(report["files"]) == 1


def test_a_broken_subagent_file_fails_alone(db, tmp_path):
    root = tmp_path / "project"
    shutil.copytree(HERE, root)
    (root / SID / "subagents" / "agent-dead00.jsonl").write_text("{not json\n")
    report = run("ingest", "--db", db, "--json", root / PARENT.name)
    files = {Path(f["path"]).name: f for f in json.loads(report.stdout)["files"]}
    assert files["agent-dead00.jsonl"]["status"] == "failed"
    assert files[PARENT.name]["status"] == "ingested" and count(db) == 3
    # show PARENT.jsonl resolves to the parent: the broken companion does not stop it
    res = run("show", "--db", db, root / PARENT.name)
    assert res.exit_code == 0, res.output
    assert f"id          {PARENT_ID}" in res.stdout


# ---------------------------------------------------------------- what the logs say


def test_the_parent_log_names_the_call_that_started_each_subagent():
    _, [s], _ = parse(PARENT)
    spawns = s.metadata["subagents"]
    assert spawns["b0c1d2e"] == {"tool_call_id": "toolu_T1", "tool": "Task", "description": "Find sleeps in tests",
                                 "subagent_type": "Explore", "status": "completed"}
    # the Agent call's result says its agent in its text only
    assert spawns["c3d4e5f"] == {"tool_call_id": "toolu_A2", "tool": "Agent", "description": "Check the CI config",
                                 "subagent_type": "general-purpose"}


def test_the_meta_json_sidecar_is_read_with_the_subagent():
    _, [s], _ = parse(KIDS / "agent-c3d4e5f.jsonl")
    assert s.parent_external_id == SID
    assert (s.metadata["subagent_type"], s.metadata["spawn_depth"], s.metadata["tool_call_id"]) == (
        "general-purpose", 1, "toolu_A2")
    _, [plain], _ = parse(KIDS / "agent-b0c1d2e.jsonl")
    assert "spawn_depth" not in plain.metadata


def test_an_unreadable_meta_json_is_warned_about(tmp_path):
    folder = tmp_path / "subagents"
    folder.mkdir()
    shutil.copy(KIDS / "agent-c3d4e5f.jsonl", folder)
    (folder / "agent-c3d4e5f.meta.json").write_text("[1, 2")
    _, [s], ctx = parse(folder / "agent-c3d4e5f.jsonl")
    assert "subagent_type" not in s.metadata
    assert any("agent-c3d4e5f.meta.json: not read" in w for w in ctx.warnings)


# ---------------------------------------------------------------- the store and the JSON


def test_session_json_has_parent_and_children(db):
    ingest(db, PARENT)
    rows = sessions(db)
    parent, task, agent = rows[SID], rows["b0c1d2e"], rows["c3d4e5f"]
    assert parent["parent"] is None
    assert [(c["id"], c["agent_id"], c["role"]) for c in parent["children"]] == [
        (task["id"], "b0c1d2e", "subagent"), (agent["id"], "c3d4e5f", "subagent")]  # in start order
    first = parent["children"][0]
    assert (first["tool_call_id"], first["tool"], first["description"], first["subagent_type"], first["status"],
            first["step_count"]) == ("toolu_T1", "Task", "Find sleeps in tests", "Explore", "completed", 2)
    assert task["parent"] == {"id": PARENT_ID, "stored": True, "title": parent["title"], "tool_call_id": "toolu_T1",
                              "tool": "Task", "description": "Find sleeps in tests", "subagent_type": "Explore",
                              "status": "completed"}
    assert agent["parent"]["tool_call_id"] == "toolu_A2" and agent["parent"]["tool"] == "Agent"
    assert task["children"] == agent["children"] == []
    # show --json carries the same session object
    res = run("show", "--db", db, task["id"], "--json")
    assert json.loads(res.stdout)["session"]["parent"] == task["parent"]


def test_store_children_and_parent(db):
    ingest(db, PARENT)
    with Store.open(db) as store:
        kids = store.children(PARENT_ID)
        assert [c["agent_id"] for c in kids] == ["b0c1d2e", "c3d4e5f"]
        for c in kids:
            assert store.session(c["id"])["parent"]["id"] == PARENT_ID
        assert store.children(kids[0]["id"]) == []
        listed = {r["id"]: r for r in store.sessions()}
        assert listed[PARENT_ID]["children"] == kids  # the list and the one session agree


def test_a_child_ingested_before_its_parent_links_once_the_parent_is_in(db):
    ingest(db, KIDS / "agent-b0c1d2e.jsonl")
    child = sessions(db)["b0c1d2e"]
    assert child["parent"]["id"] == PARENT_ID and child["parent"]["stored"] is False
    assert child["parent"]["tool_call_id"] is None  # only the parent's log says which call it was
    ingest(db, PARENT)
    rows = sessions(db)
    assert rows["b0c1d2e"]["parent"]["stored"] is True
    assert rows["b0c1d2e"]["parent"]["tool_call_id"] == "toolu_T1"
    assert [c["agent_id"] for c in rows[SID]["children"]] == ["b0c1d2e", "c3d4e5f"]


# ---------------------------------------------------------------- the terminal


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


@pytest.mark.parametrize("width", [80, 120, 200])
def test_sessions_lists_children_under_their_parent(db, width):
    ingest(db, PARENT)
    rows = sessions(db)
    out = run("sessions", "--db", db, width=width).stdout
    ids = [re.match(r"^  (└ )?([0-9a-f]{12})\b", line) for line in _lines(out)]
    listed = [(bool(m.group(1)), m.group(2)) for m in ids if m]
    assert listed == [(False, rows[SID]["id"]), (True, rows["b0c1d2e"]["id"]), (True, rows["c3d4e5f"]["id"])]
    assert "2 started by another session" in " ".join(out.split())


def test_sessions_shows_a_child_whose_parent_is_not_stored_at_the_top(db):
    ingest(db, KIDS / "agent-b0c1d2e.jsonl")
    out = run("sessions", "--db", db).stdout
    assert "└" not in out and "started by another session" not in out


@pytest.mark.parametrize("width", [80, 120, 200])
def test_show_names_the_parent_and_lists_the_children(db, width):
    ingest(db, PARENT)
    rows = sessions(db)
    out = " ".join(run("show", "--db", db, PARENT_ID, width=width).stdout.split())  # folded lines joined
    task, agent = rows["b0c1d2e"]["id"], rows["c3d4e5f"]["id"]
    assert f"children {task} subagent b0c1d2e · Task toolu_T1 “Find sleeps in tests” (Explore, completed)" in out
    assert f"{agent} subagent c3d4e5f · Agent toolu_A2 “Check the CI config” (general-purpose)" in out
    assert "parent" not in out.split("messages")[0]
    child = " ".join(run("show", "--db", db, task, width=width).stdout.split())
    assert f"parent {PARENT_ID} · Task toolu_T1 “Find sleeps in tests” (Explore, completed)" in child
    assert "children" not in child.split("messages")[0]


def test_show_says_when_the_parent_or_a_child_is_not_stored(db):
    ingest(db, KIDS / "agent-b0c1d2e.jsonl")
    out = " ".join(run("show", "--db", db, sessions(db)["b0c1d2e"]["id"]).stdout.split())
    assert f"parent {PARENT_ID} (not in the store: ingest its log to see it)" in out
    db2 = db.with_name("other.db")
    alone = db.parent / "alone"
    alone.mkdir()
    shutil.copy(PARENT, alone)  # the parent without its subagents/ folder
    ingest(db2, alone / PARENT.name)
    out = " ".join(run("show", "--db", db2, PARENT_ID).stdout.split())
    assert "not stored sub-agents b0c1d2e, c3d4e5f started here, whose logs are not in the store" in out


# ---------------------------------------------------------------- report --html


def test_report_html_lists_parent_and_children(db, tmp_path):
    ingest(db, PARENT)
    rows = sessions(db)
    page = tmp_path / "r.html"
    assert run("report", "--db", db, PARENT_ID, "--html", page).exit_code == 0
    text = page.read_text()
    assert "<td>children</td>" in text
    assert rows["b0c1d2e"]["id"] in text and "Find sleeps in tests" in text and rows["c3d4e5f"]["id"] in text
    page2 = tmp_path / "c.html"
    assert run("report", "--db", db, rows["b0c1d2e"]["id"], "--html", page2).exit_code == 0
    child = page2.read_text()
    assert "<td>parent</td>" in child and PARENT_ID in child and "<td>children</td>" not in child


# ---------------------------------------------------------------- the real corpus


def test_corpus_session_file_brings_its_subagent_and_compaction_call(db):
    path = corpus(SPOTTER)
    report = ingest(db, path)
    assert sorted(Path(f["path"]).name for f in report["files"]) == sorted(
        [path.name, "agent-a7be2f0.jsonl", "agent-acompact-f46190.jsonl"])
    rows = sessions(db)
    parent = rows["8463c716-a2ea-4c14-9efa-87158ebd9f20"]
    roles = {c["agent_id"]: c["role"] for c in parent["children"]}
    assert roles == {"a7be2f0": "subagent", "acompact-f46190": "compaction_call"}
    task = rows["a7be2f0"]["parent"]
    assert (task["id"], task["tool_call_id"], task["tool"], task["description"], task["subagent_type"]) == (
        parent["id"], "toolu_017SvvKc8KLbhGMG3tXkf21Z", "Task", "Explore Tmux module and test setup", "Explore")
    again = ingest(db, path.parent, "--recursive")  # the whole project folder: other sessions too
    status = {Path(f["path"]).name: f["status"] for f in again["files"]}
    assert len(status) == len(again["files"])  # each file once
    assert [status[f] for f in (path.name, "agent-a7be2f0.jsonl", "agent-acompact-f46190.jsonl")] == ["unchanged"] * 3
    assert count(db) == len(rows) + again["totals"]["sessions"]
