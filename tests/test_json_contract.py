"""Every ``--json`` document is one JSON object with a ``version`` key: a listing is under its own
name (``{"version": 1, "sessions": [...]}``), so a reader can tell a contract's version apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app

SAMPLES = Path(__file__).parent.parent / "sample_logs"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("json") / "s.db"
    r = run("ingest", SAMPLES / "agent-overflow", "--recursive", "--db", db, "--json")
    assert r.exit_code in (0, 1), r.output
    sid = json.loads(run("sessions", "--db", db, "--json").stdout)["sessions"][0]["id"]
    return db, sid


def test_every_json_document_is_an_object_with_a_version(store, tmp_path):
    db, sid = store
    commands = {
        "ingest": ["ingest", SAMPLES / "drift-chat", "--recursive", "--db", db],
        "sessions": ["sessions", "--db", db], "show": ["show", sid, "--db", db],
        "formats": ["formats"], "formats --db": ["formats", "--db", db],
        "models": ["models"], "models NAME": ["models", "gpt-4o"],
        "replay": ["replay", sid, "--db", db], "check": ["check", sid, "--db", db],
        "facts suggest": ["facts", "suggest", sid, "--db", db],
        "config show": ["config", "show"], "config check": ["config", "check"],
        "audit": ["audit", "--db", db, "--config", Path(__file__).parent / "fixtures" / "audit" / "small_window.yaml"],
    }
    listings = {"sessions": "sessions", "formats": "formats", "formats --db": "formats", "models": "models",
                "models NAME": "models", "facts suggest": "suggestions"}
    for name, args in commands.items():
        r = run(*args, "--json")
        assert r.exit_code in (0, 3), (name, r.output)
        doc = json.loads(r.stdout)
        assert isinstance(doc, dict) and doc.get("version") == 1, (name, str(doc)[:200])
        if name in listings:
            assert isinstance(doc[listings[name]], list), name


def test_rm_and_config_check_say_what_they_did_in_json(store, tmp_path):
    db, _ = store
    copy = tmp_path / "copy.db"
    copy.write_bytes(Path(db).read_bytes())
    before = json.loads(run("sessions", "--db", copy, "--json").stdout)["sessions"]
    r = run("rm", before[0]["id"], "--db", copy, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"version": 1, "removed": [before[0]["id"]], "count": 1}
    after = json.loads(run("sessions", "--db", copy, "--json").stdout)["sessions"]
    assert [s["id"] for s in after] == [s["id"] for s in before[1:]]
    ok = json.loads(run("config", "check", "--json").stdout)
    assert ok["ok"] is True and ok["version"] == 1
