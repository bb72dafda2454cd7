"""`ctxf export --to atif|openai|jsonl`: every corpus session written out and read back by the importer
`ctxf ingest` detects for the export (the parse half of ingest; the store's text is redacted already)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from typer.testing import CliRunner

from context_forensics import api, importers
from context_forensics.cli import app
from context_forensics.records import KIND_COMPACTION_BOUNDARY, KIND_HISTORY_EDIT
from helpers import FIXTURES, parse

pytestmark = pytest.mark.integration

SUFFIX = {"atif": ".json", "openai": ".json", "jsonl": ".jsonl"}


def _usage(m):
    return m.usage.to_dict() if m.usage else None


def _whole(m):
    """What a lossless export keeps: the message's content hash (role, kind, name, text, tool calls
    with their ids and arguments, tool_call_id, parts) and its recorded usage."""
    return (m.hash, _usage(m))


def _openai_view(m):
    """What an OpenAI messages list can hold: role, text, tool calls (ids, names, arguments) and the
    id a tool message answers. It cannot hold usage, kinds (a summary is a plain message; markers the
    model never read are left out), parts (images, thinking), names of tool messages."""
    return (m.role, m.text, [(c.id, c.name, c.arguments) for c in m.tool_calls],
            m.tool_call_id if m.role == "tool" else None)


@pytest.fixture(scope="module")
def stored(corpus_ingest):
    db, r = corpus_ingest
    assert r.exit_code == 0
    with api.open_store(db) as ws:
        rows = ws.sessions()
        yield ws, [(row["id"], [m.message for m in ws.store.messages(row["id"])]) for row in rows]


@pytest.mark.parametrize("to", ["atif", "jsonl", "openai"])
def test_every_corpus_session_round_trips(stored, to, tmp_path):
    ws, sessions = stored
    assert len(sessions) > 100
    wrong = []
    formats = set()
    for sid, before in sessions:
        out = api.export(sid, to=to, store=ws)
        path = tmp_path / f"{sid}{SUFFIX[to]}"
        path.write_text(out.text, encoding="utf-8")
        if to == "openai" and importers.detect(path) is None:
            # openai_chat leaves a file starting "You are OpenHands agent" to the openhands importer
            # (_sniffing.foreign_document): the export of an OpenHands session reads with --format openai_chat.
            assert before[0].text.startswith("You are OpenHands agent"), sid
            fmt, back, ctx = parse(path, "openai_chat")
        else:
            fmt, back, ctx = parse(path)
        formats.add(fmt)
        assert len(back) == 1, sid
        after = back[0].messages
        if to == "openai":
            keep = [m for m in before if m.kind not in (KIND_HISTORY_EDIT, KIND_COMPACTION_BOUNDARY)]
            if [_openai_view(m) for m in keep] != [_openai_view(m) for m in after]:
                wrong.append(sid)
        elif [_whole(m) for m in before] != [_whole(m) for m in after] or ctx.skipped:
            wrong.append(sid)
    assert wrong == []
    assert formats == {"atif": {"atif"}, "jsonl": {"ctxf_jsonl"}, "openai": {"openai_chat"}}[to]


def test_atif_export_is_conformant_in_shape(stored):
    ws, sessions = stored
    for sid, msgs in sessions:
        doc = json.loads(api.export(sid, to="atif", store=ws).text)
        assert doc["schema_version"] == "ATIF-v1.8" and isinstance(doc["agent"]["name"], str)
        ids = [s["step_id"] for s in doc["steps"]]
        assert ids == list(range(1, len(ids) + 1))  # sequential from 1 (Harbor validates it)
        for s in doc["steps"]:
            assert s["source"] in ("user", "agent", "system")
            calls = {c["tool_call_id"] for c in s.get("tool_calls", [])}
            for r in s.get("observation", {}).get("results", []):
                assert r.get("source_call_id") is None or r["source_call_id"] in calls
            assert "metrics" not in s or s["source"] == "agent"
        recorded = [m.usage.prompt_tokens for m in msgs if m.role == "assistant" and m.usage
                    and m.usage.prompt_tokens is not None]
        assert [s["metrics"]["prompt_tokens"] for s in doc["steps"]
                if "prompt_tokens" in s.get("metrics", {})] == recorded


def test_cli_export_writes_a_private_file(tmp_path):
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(FIXTURES / "atif"), "--db", db]).exit_code == 0
    out = tmp_path / "out" / "run.atif.json"
    r = runner.invoke(app,
                      ["export", "run-7f3a" if False else _only_id(db), "--to", "atif", "-o", str(out), "--db", db])
    assert r.exit_code == 0, r.output
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert json.loads(out.read_text())["steps"][2]["metrics"]["cached_tokens"] == 1000
    r = runner.invoke(app, ["export", _only_id(db), "--to", "yaml", "--db", db])
    assert r.exit_code == 2 and "atif, openai, jsonl" in r.output
    r = runner.invoke(app, ["export", _only_id(db), "--to", "openai", "--db", db])
    assert json.loads(r.stdout)["model"] == "claude-sonnet-4-5"


def _only_id(db):
    with api.open_store(db) as ws:
        (row,) = ws.sessions()
        return row["id"]
