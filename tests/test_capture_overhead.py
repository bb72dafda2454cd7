"""An agent's unlogged overhead (system prompt, tool definitions) taken from a request capture of
the same agent version (``tokens/overhead.py``, ``analysis/replay/captures.py``).

The capture is a HAR file of Claude Code's request (its User-Agent ``claude-cli/2.1.40``), built
here; the transcript is the Claude Code fixture, whose records say version 2.1.40.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_forensics import api
from context_forensics.errors import UsageError
from context_forensics.importers.har import agent_of_user_agent
from context_forensics.records import KIND_COMPACTION_BOUNDARY, Message
from context_forensics.tokens.overhead import has_system_prompt
from helpers import FIXTURES, cli

TRANSCRIPT = FIXTURES / "claude_code" / "session.jsonl"
SYSTEM = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
          {"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering "
                                   "tasks. Use the tools available to you. " * 20}]
TOOLS = [{"name": n, "description": f"The {n} tool: reads, writes or runs what it is given. " * 8,
          "input_schema": {"type": "object", "properties": {"path": {"type": "string", "description": "a path"}},
                           "required": ["path"]}} for n in ("Read", "Write", "Edit", "Bash")]


def _har(path: Path, ua: str = "claude-cli/2.1.40 (external, cli)") -> Path:
    body = {"model": "claude-opus-4-6", "max_tokens": 32000, "system": SYSTEM, "tools": TOOLS,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]}
    resp = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": "Hi!"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1200, "output_tokens": 3}}
    entry = {"startedDateTime": "2026-02-01T09:00:00.000Z", "time": 900,
             "request": {"method": "POST", "url": "https://api.anthropic.com/v1/messages?beta=true",
                         "headers": [{"name": "User-Agent", "value": ua},
                                     {"name": "content-type", "value": "application/json"}],
                         "postData": {"mimeType": "application/json", "text": json.dumps(body)}},
             "response": {"status": 200, "headers": [{"name": "content-type", "value": "application/json"}],
                          "content": {"mimeType": "application/json", "text": json.dumps(resp)}}}
    path.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "mitmproxy", "version": "11.0.0"},
                                        "entries": [entry]}}))
    return path


def _transcript(path: Path, *, version: str = "2.1.40", usage: bool = True) -> Path:
    """The Claude Code fixture, its version changed or its recorded usage taken out."""
    out = []
    for line in TRANSCRIPT.read_text().splitlines():
        rec = json.loads(line)
        if "version" in rec:
            rec["version"] = version
        if not usage and isinstance(rec.get("message"), dict):
            rec["message"].pop("usage", None)
        out.append(json.dumps(rec))
    path.write_text("\n".join(out) + "\n")
    return path


def _ingest(tmp_path: Path, **kw) -> tuple[str, str, Path]:
    db = tmp_path / "s.db"
    api.ingest([_har(tmp_path / "cc.har"), _transcript(tmp_path / "t.jsonl", **kw)], db=db)
    with api.open_store(db) as ws:
        ids = {r["format"]: r["id"] for r in ws.sessions()}
    return ids["har"], ids["claude_code"], db


def _replay(db: Path, sid: str, **kw) -> dict:
    return api.replay(sid, db=db, **kw).to_dict()["replays"][0]


@pytest.mark.parametrize("ua,want", [
    ("claude-cli/2.1.40 (external, cli)", ("claude-code", "2.1.40")),
    ("codex_cli_rs/0.58.0 (Ubuntu 22.4.0; x86_64) xterm-256color", ("codex", "0.58.0")),
    ("codex_exec/0.46.0 (Mac OS 15.1.0; arm64) unknown", ("codex", "0.46.0")),
    ("GeminiCLI/0.9.0/gemini-2.5-pro (linux; x64)", ("gemini-cli", "0.9.0")),
    ("opencode/0.15.0", ("opencode", "0.15.0")),
    ("Anthropic/JS 0.65.0", (None, None)),
    ("python-httpx/0.27.0", (None, None)),
    (None, (None, None)),
])
def test_the_user_agent_names_the_agent_and_version(ua, want):
    assert agent_of_user_agent(ua) == want


def test_the_capture_names_its_agent_and_what_it_sent(tmp_path):
    har, _, db = _ingest(tmp_path)
    with api.open_store(db) as ws:
        row = next(r for r in ws.sessions() if r["id"] == har)
    assert row["metadata"]["agent"] == "claude-code"
    cap = row["metadata"]["captures"][0]
    assert (cap["agent"], cap["agent_version"], cap["user_agent"]) == (
        "claude-code", "2.1.40", "claude-cli/2.1.40 (external, cli)")
    assert cap["tools"]["names"] == ["Read", "Write", "Edit", "Bash"] and cap["system"]["messages"] >= 1


def test_a_capture_of_the_same_version_adds_its_system_prompt_and_tools_to_every_call(tmp_path):
    """No recorded usage to calibrate: every window grows by exactly the capture's tokens, and the
    windows no longer say they lack the system prompt and the tool definitions."""
    har, sid, db = _ingest(tmp_path, usage=False)
    with_cap = _replay(db, sid)
    without = _replay(db, sid, overhead_from="none")
    over = with_cap["overhead"]
    assert over["capture"]["session"] == har and over["capture"]["match"] == "same agent version"
    assert over["parts"] == ["system_prompt", "tool_definitions"] and over["n_tools"] == 4
    assert over["tokens"] == over["system_tokens"] + over["tools_tokens"] > 500
    assert without["overhead"] is None
    assert [s["window_tokens"] - t["window_tokens"] for s, t in zip(with_cap["steps"], without["steps"])] == \
        [over["tokens"]] * len(without["steps"])
    assert {x["part"] for x in without["window_lacks"]} == {"system_prompt", "tool_definitions"}
    assert with_cap["window_lacks"] == []
    win = api.window(sid, 2, db=db).windows[0]
    rows = {r["kind"]: r for r in win["window_parts"]}
    assert rows["not_in_log"]["tokens"] == over["tokens"] and "capture" in rows["not_in_log"]["label"]
    assert sum(r["tokens"] for r in win["window_parts"]) == win["step"]["window_tokens"]


def test_another_version_takes_no_capture_unless_asked(tmp_path):
    har, sid, db = _ingest(tmp_path, version="2.1.41", usage=False)
    assert _replay(db, sid)["overhead"] is None
    asked = _replay(db, sid, overhead_from=har[:6])["overhead"]
    assert asked["capture"]["session"] == har
    assert asked["capture"]["match"].startswith(
        "asked; the transcript is claude-code 2.1.41, the capture claude-code 2.1.40")


def test_with_recorded_usage_the_capture_is_added_before_the_calibration(tmp_path):
    """The fixture's calls record their prompt size: the capture's tokens join each call's
    computed figure before the calibration is fitted (or rejected), and the tokenizer's error
    against the recorded figures is measured with them; the window's parts still add up."""
    _, sid, db = _ingest(tmp_path)
    with_cap, without = _replay(db, sid), _replay(db, sid, overhead_from="none")
    over = with_cap["overhead"]
    for a, b in zip(with_cap["fidelity"]["steps"], without["fidelity"]["steps"]):
        assert a["computed"] - b["computed"] == over["tokens"] and a["recorded"] == b["recorded"]
    win = api.window(sid, 2, db=db).windows[0]
    row = next(r for r in win["window_parts"] if r["kind"] == "not_in_log")
    assert "capture" in row["label"] and row["figure"] == "estimated"
    assert sum(r["tokens"] for r in win["window_parts"]) == win["step"]["window_tokens"]


def test_a_log_with_a_system_prompt_gets_only_the_tools():
    boundary = Message(role="system", text="Conversation compacted", kind=KIND_COMPACTION_BOUNDARY)
    assert not has_system_prompt([Message(role="user", text="hi"), boundary])
    assert has_system_prompt([Message(role="system", text="You are a helper."), Message(role="user", text="hi")])


def test_asking_for_a_session_that_is_no_capture_is_a_clear_error(tmp_path, monkeypatch):
    _, sid, db = _ingest(tmp_path)
    with pytest.raises(UsageError, match="is not a request capture"):
        _replay(db, sid, overhead_from=sid)
    res = cli(monkeypatch, "replay", sid, "--db", db, "--overhead-from", sid)
    assert res.exit_code == 2 and "is not a request capture" in res.stderr and "Traceback" not in res.stderr
    res = cli(monkeypatch, "replay", sid, "--db", db, "--overhead-from", "none", "--compare-policies")
    assert res.exit_code == 2 and "--overhead-from" in res.stderr


def test_the_replay_header_says_where_the_overhead_comes_from(tmp_path, monkeypatch):
    har, sid, db = _ingest(tmp_path, usage=False)
    out = cli(monkeypatch, "replay", sid, "--db", db, width=80)
    assert out.exit_code == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "tokens per call not in the log: system prompt" in text
    assert f"from a capture of the same agent version: session {har}" in text and "(claude-code 2.1.40)" in text


CODEX_CAPTURE = FIXTURES / "har" / "codex_0.58.0_capture.har"


def test_codex_capture_from_source_explains_part_of_a_real_rollouts_unlogged_prompt(tmp_path):
    """The real Codex 0.58.0 rollout of the corpus (gpt-5.1-codex) and the request codex-rs 0.58.0
    builds (the fixture, from source): its instructions and seven tools are added to every call,
    and the tokenizer's error against the rollout's recorded prompts falls (measured: median
    8,861 -> 5,740 tokens; the rest, which the calibration fits, is what the fixture cannot know:
    the user's MCP tools, the real environment context)."""
    from helpers import CORPUS

    rollouts = sorted((CORPUS / "codex-rollout-jsonl").rglob("*.jsonl")) if CORPUS.is_dir() else []
    if not rollouts:
        pytest.skip("the shared corpus's Codex rollout is absent")
    db = tmp_path / "x.db"
    api.ingest([CODEX_CAPTURE, rollouts[0]], db=db)
    with api.open_store(db) as ws:
        sid = next(r["id"] for r in ws.sessions() if r["format"] == "codex")
    with_cap, without = _replay(db, sid), _replay(db, sid, overhead_from="none")
    over = with_cap["overhead"]
    assert over["capture"]["agent"] == "codex" and over["capture"]["version"] == "0.58.0"
    assert over["parts"] == ["system_prompt", "tool_definitions"] and over["n_tools"] == 7
    assert 2000 < over["system_tokens"] < 2700 and over["tools_tokens"] > 500
    err = [r["fidelity"]["computed"]["median_abs"] for r in (with_cap, without)]
    assert err[0] < err[1] - 2000, err
