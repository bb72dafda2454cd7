"""Reading commands: they never create a store, and their filter values are checked.

A command that only reads (sessions, show, replay, facts, drift, diverge, report, audit without
paths) exits 2 with one line naming the missing store and the `ctxf ingest` that makes it, and
creates nothing. `sessions --format / --outcome / --agent` with a value no session can have
exits 2 naming the allowed values and the closest one, instead of listing nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import context_forensics as ctxf
from context_forensics.cli import app
from context_forensics.errors import ExitCode, NotFoundError, UsageError
from context_forensics.records import OUTCOMES
from helpers import FIXTURES

SHAREGPT = FIXTURES / "sharegpt_small.json"
CLAUDE = FIXTURES / "claude_code" / "session.jsonl"

READ_COMMANDS = [
    ["sessions"],
    ["sessions", "--json"],
    ["show", "abc123"],
    ["replay", "abc123"],
    ["replay", "abc123", "--at", "1"],
    ["facts", "abc123", "--fact", "x"],
    ["facts", "suggest", "abc123"],
    ["drift", "abc123"],
    ["diverge", "abc123", "def456"],
    ["diverge", "--task", "t"],
    ["diverge", "--all-tasks"],
    ["report", "abc123", "--html", "REPORT"],
    ["audit"],
]


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("cmd", READ_COMMANDS, ids=lambda c: " ".join(c))
def test_read_command_on_missing_store_creates_nothing(tmp_path, cmd):
    db = tmp_path / "no" / "such" / "x.db"
    args = [str(tmp_path / "r.html") if a == "REPORT" else a for a in cmd]
    r = run(*args, "--db", db)
    assert r.exit_code == ExitCode.USAGE == NotFoundError.exit_code, r.output
    lines = r.stderr.strip().splitlines()
    assert lines == [f"error: no store at {db}: ingest logs first with `ctxf ingest LOGS --db {db}`"], r.stderr
    assert r.stdout == ""
    assert tree(tmp_path) == []  # no folder, no database, no report


def test_default_store_missing_is_named_without_db(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXF_CONFIG", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    r = run("sessions")
    assert r.exit_code == ExitCode.USAGE, r.output
    assert f"no store at {tmp_path / 'data' / 'ctxf' / 'sessions.db'} (the user-level store: " in r.stderr
    assert "`ctxf ingest LOGS`" in r.stderr  # the default store: no --db to repeat
    assert tree(tmp_path) == []


def test_api_read_call_creates_nothing(tmp_path):
    db = tmp_path / "sub" / "x.db"
    with pytest.raises(NotFoundError, match="no store at"):
        ctxf.replay("abc123", db=db)
    with pytest.raises(NotFoundError):
        ctxf.open_store(db, create=False)
    assert tree(tmp_path) == []
    with ctxf.open_store(db) as ws:  # the default still creates it (then ingest)
        assert ws.sessions() == []
    assert db.exists()


def test_memory_store_still_works_for_reads():
    with ctxf.open_store(":memory:", create=False) as ws:
        assert ws.sessions() == []
        assert ws.path is None


def test_log_file_argument_still_ingests_into_a_new_store(tmp_path):
    db = tmp_path / "new" / "x.db"
    r = run("show", CLAUDE, "--db", db, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["session"]["format"] == "claude_code"
    assert db.exists()


def test_ingest_and_audit_with_paths_create_the_store(tmp_path):
    db = tmp_path / "a" / "x.db"
    r = run("ingest", SHAREGPT, "--db", db)
    assert r.exit_code == 0, r.output
    assert db.exists()
    db2 = tmp_path / "b" / "y.db"
    r = run("audit", CLAUDE, "--db", db2, "--json")
    assert r.exit_code in (0, 3), r.output
    assert db2.exists()
    assert len(json.loads(r.stdout)["sessions"]) == 1


@pytest.fixture()
def store(tmp_path):
    db = tmp_path / "s.db"
    r = run("ingest", SHAREGPT, CLAUDE, "--db", db)
    assert r.exit_code == 0, r.output
    return db


@pytest.mark.parametrize("option,value,closest,allowed", [
    ("--format", "claude-code", "claude_code", ["claude_code", "sharegpt", "codex"]),
    ("--outcome", "failed", "failure", list(OUTCOMES)),
    ("--agent", "claude_cod", "claude-code", ["claude-code", "codex", "cline"]),
])
def test_unknown_filter_value_exits_2_naming_allowed(store, option, value, closest, allowed):
    r = run("sessions", option, value, "--db", store, "--json")
    assert r.exit_code == ExitCode.USAGE == UsageError.exit_code, r.output
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    what = option.lstrip("-")
    assert lines[0].startswith(f"error: unknown {what} {value!r}: did you mean {closest!r}? allowed: ")
    names = lines[0].split("allowed: ", 1)[1].split(", ")
    assert set(allowed) <= set(names)
    assert value not in names


@pytest.mark.parametrize("option,value,fmt", [
    ("--format", "claude_code", "claude_code"),
    ("--format", "sharegpt", "sharegpt"),
    ("--outcome", "unknown", None),
    ("--agent", "claude-code", "claude_code"),
    ("--agent", "Claude_Code", "claude_code"),  # agent names compare as before: case, _ as -
])
def test_known_filter_values_still_filter(store, option, value, fmt):
    r = run("sessions", option, value, "--db", store, "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["sessions"]
    assert rows
    if fmt is not None:
        assert {row["format"] for row in rows} == {fmt}


def test_valid_filter_matching_nothing_is_empty_not_an_error(store):
    r = run("sessions", "--format", "codex", "--outcome", "failure", "--db", store, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"version": 1, "sessions": []}


def test_agent_named_only_in_the_store_is_allowed(tmp_path):
    # An importer may name any agent (an OpenTelemetry trace's service name): a name found in
    # the store's sessions is a filter value even when no format's table lists it.
    with ctxf.open_store(":memory:") as ws:
        from context_forensics.api.checks import check_filters

        check_filters([{"format": "otel", "metadata": {"agent": "my-bot"}}], fmt=None, outcome=None, agent="my-bot")
        with pytest.raises(UsageError, match="unknown agent 'my-bto'"):
            check_filters([], fmt=None, outcome=None, agent="my-bto")
        assert ws.sessions(agent="codex") == []
