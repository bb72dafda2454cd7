"""`ctxf ingest --discover` on a fake home folder, and `ctxf sessions --agent`.

The home holds a small log in every place an agent writes to, beside files that are no logs
(which must not be listed). Claude Code and Codex logs are valid logs of importers that exist;
for the agents whose importer may not be registered yet (Gemini CLI, Cline / Roo / Kilo, Pi,
Copilot CLI, Aider) the test asserts they are found and listed, and checks the ingest of each
only when its importer is registered.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

import context_forensics as ctxf
from context_forensics.cli import app
from context_forensics.importers import registry
from context_forensics.store.agents import agent_of
from context_forensics.store.discover import AGENTS, TASK_FILES
from helpers import FIXTURES

CLAUDE_FIXTURE = FIXTURES / "claude_code" / "no_links.jsonl"
CODEX_FIXTURE = FIXTURES / "codex" / "rollout-2025-11-01T08-00-00-019a0000-1111-7222-8333-444444444444.jsonl"
CODEX_OLD = FIXTURES / "codex" / "rollout-2026-01-05T10-00-00-019b0000-aaaa-7bbb-8ccc-123456789abc.jsonl"
KIMI_SESSION = FIXTURES / "kimi_code" / "session_0a0b0c0d-1111-4222-8333-444455556666"
OPENHANDS_CONVERSATION = FIXTURES / "openhands_v1" / "condensed-conv"

# Variables a discovery reads besides HOME: cleared so the machine's own never leak in.
OVERRIDES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "PI_CODING_AGENT_DIR", "COPILOT_HOME",
             "XDG_STATE_HOME", "XDG_CONFIG_HOME", "CLINE_DIR", "CLINE_DATA_DIR", "APPDATA", "USERPROFILE",
             "XDG_DATA_HOME", "GOOSE_PATH_ROOT", "KIMI_CODE_HOME", "OH_CONVERSATIONS_PATH")

GEMINI_SESSION = {
    "sessionId": "eefc44a3-0832-4bc0-ac33-fa668f038213", "projectHash": "ab14fe",
    "startTime": "2025-10-05T07:11:03.979Z", "lastUpdated": "2025-10-05T07:16:07.473Z",
    "messages": [
        {"id": "u1", "timestamp": "2025-10-05T07:11:03.980Z", "type": "user", "content": "list the files"},
        {"id": "g1", "timestamp": "2025-10-05T07:11:31.572Z", "type": "gemini", "content": "a.txt and b.txt",
         "model": "gemini-2.5-pro",
         "tokens": {"input": 120, "output": 8, "cached": 0, "thoughts": 0, "tool": 0, "total": 128}},
    ],
}
CLINE_API = [
    {"role": "user", "content": [{"type": "text", "text": "<task>\nlist the files\n</task>"}], "ts": 1769064454625},
    {"role": "assistant", "content": [{"type": "text", "text": "a.txt and b.txt"}], "ts": 1769064456000},
]
CLINE_UI = [
    {"ts": 1769064454625, "type": "say", "say": "text", "text": "list the files"},
    {"ts": 1769064454700, "type": "say", "say": "api_req_started",
     "text": json.dumps({"request": "list the files", "tokensIn": 120, "tokensOut": 8, "cacheWrites": 0,
                         "cacheReads": 0, "cost": 0.001})},
    {"ts": 1769064456000, "type": "say", "say": "text", "text": "a.txt and b.txt"},
]
PI_SESSION = [
    {"type": "session", "id": "5fd1e58c-9635-410e-a644-133a96057c90", "timestamp": "2025-12-17T19:39:21.535Z",
     "cwd": "/tmp/p", "provider": "anthropic", "modelId": "claude-opus-4-5", "thinkingLevel": "off"},
    {"type": "message", "timestamp": "2025-12-17T19:39:22.000Z",
     "message": {"role": "user", "content": [{"type": "text", "text": "list the files"}], "timestamp": 1766000362000}},
    {"type": "message", "timestamp": "2025-12-17T19:39:25.000Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "a.txt and b.txt"}],
                 "api": "anthropic-messages", "provider": "anthropic", "model": "claude-opus-4-5",
                 "usage": {"input": 120, "output": 8, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 128,
                           "cost": {"total": 0.001}},
                 "stopReason": "stop", "timestamp": 1766000365000}},
]
COPILOT_EVENTS = [
    {"type": "session.start", "data": {"sessionId": "96ef38f0-9d09-45c3-8124-6448c36090ed", "version": 1,
                                       "producer": "copilot-agent", "copilotVersion": "1.0.34",
                                       "startTime": "2026-04-23T17:08:08.893Z", "context": {"cwd": "/tmp/p"}},
     "id": "e1", "timestamp": "2026-04-23T17:08:08.908Z", "parentId": None},
    {"type": "user.message", "data": {"content": "list the files", "transformedContent": "list the files"},
     "id": "e2", "timestamp": "2026-04-23T17:08:10.000Z", "parentId": "e1"},
    {"type": "assistant.message", "data": {"messageId": "m1", "content": "a.txt and b.txt", "toolRequests": [],
                                           "outputTokens": 8},
     "id": "e3", "timestamp": "2026-04-23T17:08:12.000Z", "parentId": "e2"},
]
COPILOT_LEGACY = {
    "sessionId": "06141331-92e8-4e9e-8bbb-9b7a729eb01a", "startTime": "2025-10-11T11:40:20.882Z",
    "chatMessages": [{"role": "user", "content": "list the files"}, {"role": "assistant", "content": "a.txt"}],
    "timeline": [],
}
AIDER_CHAT = ("\n# aider chat started at 2025-05-04 17:02:36\n\n#### list the files\n\na.txt and b.txt\n\n"
              "> Tokens: 1.2k sent, 22 received.\n")
AIDER_LLM = ("TO LLM 2025-05-04T17:06:58\n-------\nSYSTEM Act as an expert software developer.\n-------\n"
             "USER list the files\n-------\nLLM RESPONSE 2025-05-04T17:07:03\nASSISTANT a.txt and b.txt\n")

MTIME = 1_767_225_600  # 2026-01-01T00:00:00Z, set on every log so "newest" is known


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, Path):
        shutil.copyfile(content, path)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif isinstance(content, list) and path.suffix == ".jsonl":  # compact, as the tools write it
        path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in content), encoding="utf-8")
    else:
        path.write_text(json.dumps(content, indent=2), encoding="utf-8")
    return path


def task(folder: Path, *, api: bool = True, ui: bool = True) -> Path:
    """A task folder whose conversation names its id (each task a run of its own)."""
    mark = lambda rows: json.loads(json.dumps(rows).replace("list the files", f"list the files of {folder.name}"))  # noqa: E731
    if api:
        write(folder / "api_conversation_history.json", mark(CLINE_API))
    if ui:
        write(folder / "ui_messages.json", mark(CLINE_UI))
    return folder


def make_home(tmp: Path) -> tuple[Path, Path, dict[str, set[Path]]]:
    """A fake home with logs in every agent's places, a repository to run in, and the logs each
    agent must list (files, or task folders)."""
    home = tmp / "home"
    repo = tmp / "repo"
    cwd = repo / "sub"
    cwd.mkdir(parents=True)
    (repo / ".git").mkdir()
    gs = lambda base, app, ext: home / base / app / "User" / "globalStorage" / ext / "tasks"  # noqa: E731
    kimi = home / ".kimi-code/sessions/p_3f2a1c9b" / KIMI_SESSION.name
    shutil.copytree(KIMI_SESSION, kimi)
    openhands = home / ".openhands/conversations/0c9d4a5e1f2b4c3d8e7f6a5b4c3d2e1f"
    shutil.copytree(OPENHANDS_CONVERSATION, openhands)
    want = {
        "claude-code": {
            write(home / ".claude/projects/-tmp-p/00000000-0000-4000-8000-00000000000a.jsonl", CLAUDE_FIXTURE),
        },
        "codex": {
            write(home / ".codex/sessions/2025/11/01" / CODEX_FIXTURE.name, CODEX_FIXTURE),
            write(home / ".codex/archived_sessions" / CODEX_OLD.name, CODEX_OLD),
        },
        "gemini-cli": {
            write(home / ".gemini/tmp/ab14fe/chats/session-2025-10-05T07-11-eefc44a3.json", GEMINI_SESSION),
            write(home / ".gemini/tmp/ab14fe/chats/eefc44a3/session-2025-10-05T07-12-child.json",
                  {**GEMINI_SESSION, "sessionId": "child-1"}),
            write(home / ".gemini/tmp/ab14fe/checkpoint-mytag.json",
                  [{"role": "user", "parts": [{"text": "list the files"}]}]),
            write(home / ".gemini/tmp/ab14fe/checkpoints/2025-10-05T07-13-00-000Z-x.json",
                  {"clientHistory": [{"role": "user", "parts": [{"text": "list the files"}]}],
                   "toolCall": {"name": "write_file", "args": {"file_path": "/tmp/p/a.txt", "content": "a"}}}),
        },
        "cline": {
            task(gs(".config", "Code", "saoudrizwan.claude-dev") / "1769064454625"),
            task(gs(".config", "Code - Insiders", "saoudrizwan.claude-dev") / "1769064454626", api=False),
            task(home / ".cline/data/tasks/1769064454627"),
        },
        "roo": {task(gs(".config", "Cursor", "rooveterinaryinc.roo-cline") / "1769064454628")},
        "kilo": {task(gs("Library/Application Support", "VSCodium", "kilocode.kilo-code") / "1769064454629", ui=False)},
        "pi": {write(home / ".pi/agent/sessions/--tmp-p--/2025-12-17T19-39-21-535Z_5fd1e58c.jsonl", PI_SESSION)},
        "copilot-cli": {
            write(home / ".copilot/session-state/96ef38f0-9d09-45c3-8124-6448c36090ed/events.jsonl", COPILOT_EVENTS),
            write(home / ".copilot/history-session-state/session_06141331.json", COPILOT_LEGACY),
        },
        "kimi-code": {
            kimi / "agents" / "main" / "wire.jsonl",
            kimi / "agents" / "agent-0" / "wire.jsonl",
        },
        "openhands": {openhands},
        "aider": {
            write(repo / ".aider.chat.history.md", AIDER_CHAT),
            write(repo / ".aider.llm.history", AIDER_LLM),
            write(cwd / ".aider.chat.history.md", AIDER_CHAT.replace("list the files", "and the folders")),
        },
    }
    # Beside them, files that are no logs, and folders that are no tasks: never listed.
    write(home / ".claude/projects/-tmp-p/notes.txt", "not a log")
    write(home / ".claude/settings.json", {})
    write(home / ".codex/sessions/2025/11/01/other.jsonl", CODEX_FIXTURE)
    write(home / ".gemini/tmp/ab14fe/logs.json", [])
    write(home / ".gemini/tmp/ab14fe/shell_history", "ls\n")
    (gs(".config", "Code", "saoudrizwan.claude-dev") / "1769064454999").mkdir()  # an empty task folder
    write(gs(".config", "Code", "saoudrizwan.claude-dev").parent / "state" / "taskHistory.json", [])
    write(home / ".pi/agent/settings.json", {})
    write(home / ".copilot/config.json", {})
    write(repo / ".aider.input.history", "list the files\n")
    write(home / ".kimi-code/sessions/p_3f2a1c9b/session_x/notes.jsonl", "{}\n")  # not agents/<id>/wire.jsonl
    write(home / ".kimi-code/config.toml", "")
    (home / ".openhands/conversations/no-events").mkdir()  # a folder without events/: no conversation
    write(home / ".openhands/settings.json", {})
    for paths in want.values():
        for p in paths:
            for f in ([p] if p.is_file() else list(p.rglob("*"))) + [p]:
                os.utime(f, (MTIME, MTIME))
    return home, cwd, want


def found(result: ctxf.DiscoverResult | dict, agent: str) -> set[Path]:
    data = result if isinstance(result, dict) else result.to_dict()
    [a] = [a for a in data["agents"] if a["agent"] == agent]
    return {Path(f["path"]) for f in a["found"]}


def size_of(p: Path) -> int:
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    """The fake home as the process's home, its repository as the current folder."""
    home, cwd, want = make_home(tmp_path)
    for name in OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CTXF_CONFIG", raising=False)
    monkeypatch.chdir(cwd)
    return home, cwd, want


def run(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def tree(root: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in root.rglob("*") if not p.is_symlink()}


# ---------------------------------------------------------------- finding


def test_every_agent_is_found_in_its_places_and_nothing_else(fake):
    home, cwd, want = fake
    res = ctxf.discover(env={"HOME": str(home)}, cwd=cwd)
    data = res.to_dict()
    assert [a["agent"] for a in data["agents"]] == list(AGENTS)
    for agent, paths in want.items():
        assert found(res, agent) == paths, agent
        [a] = [a for a in data["agents"] if a["agent"] == agent]
        assert a["files"] == len(paths)
        assert a["bytes"] == sum(size_of(p) for p in paths)  # measured: the files' sizes
        assert a["newest"] == datetime.fromtimestamp(MTIME, timezone.utc).isoformat(timespec="seconds")
        assert a["readable"] == any(f in registry() for f in a["formats"])
        assert any(p["exists"] for p in a["places"])
    assert data["totals"]["files"] == sum(len(p) for p in want.values())
    assert sorted(res.found) == sorted(str(p) for ps in want.values() for p in ps)


def test_windows_layout_from_appdata_and_userprofile(tmp_path):
    profile = tmp_path / "Users" / "me"
    roaming = tmp_path / "Roaming"
    a = task(roaming / "Code" / "User/globalStorage/saoudrizwan.claude-dev/tasks/1")
    b = task(profile / "AppData/Roaming/Cursor/User/globalStorage/kilocode.kilo-code/tasks/2")
    claude = write(profile / ".claude/projects/C--src-app/s.jsonl", CLAUDE_FIXTURE)
    env = {"USERPROFILE": str(profile), "APPDATA": str(roaming)}  # no HOME, as on Windows
    res = ctxf.discover(env=env, cwd=tmp_path)
    assert found(res, "cline") == {a}
    assert found(res, "claude-code") == {claude}
    assert found(res, "kilo") == set()  # APPDATA set: the roaming folder is APPDATA's
    res = ctxf.discover(env={"USERPROFILE": str(profile)}, cwd=tmp_path)
    assert found(res, "kilo") == {b}  # without APPDATA: %USERPROFILE%\AppData\Roaming


def test_macos_layout(tmp_path):
    home = tmp_path / "home"
    t = task(home / "Library/Application Support/Code - Insiders/User/globalStorage/rooveterinaryinc.roo-cline"
             / "tasks/3")
    assert found(ctxf.discover(["roo"], env={"HOME": str(home)}, cwd=tmp_path), "roo") == {t}


def test_each_tools_own_override_is_honoured(tmp_path):
    home, alt = tmp_path / "home", tmp_path / "alt"
    write(home / ".claude/projects/p/old.jsonl", CLAUDE_FIXTURE)  # CLAUDE_CONFIG_DIR replaces ~/.claude
    logs = {
        "claude-code": write(alt / "claude/projects/p/s.jsonl", CLAUDE_FIXTURE),
        "codex": write(alt / "codex/sessions/2025/01/01/rollout-x.jsonl", CODEX_FIXTURE),
        "gemini-cli": write(alt / "gemini-home/.gemini/tmp/h/chats/session-1.json", GEMINI_SESSION),
        "pi": write(alt / "pi/sessions/--p--/s.jsonl", PI_SESSION),
        "copilot-cli": write(alt / "state/.copilot/session-state/id/events.jsonl", COPILOT_EVENTS),
        "cline": task(alt / "cline/data/tasks/9"),
        "roo": task(alt / "xdg/Code/User/globalStorage/rooveterinaryinc.roo-cline/tasks/8"),
    }
    env = {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(alt / "claude"), "CODEX_HOME": str(alt / "codex"),
           "GEMINI_CLI_HOME": str(alt / "gemini-home"), "PI_CODING_AGENT_DIR": str(alt / "pi"),
           "XDG_STATE_HOME": str(alt / "state"), "CLINE_DIR": str(alt / "cline"), "XDG_CONFIG_HOME": str(alt / "xdg")}
    res = ctxf.discover(env=env, cwd=tmp_path)
    for agent, path in logs.items():
        assert found(res, agent) == {path}, agent
    env2 = {"HOME": str(home), "COPILOT_HOME": str(alt / "state/.copilot"),
            "CLINE_DATA_DIR": str(alt / "cline/data"), "PI_CODING_AGENT_DIR": "~/nowhere"}
    res = ctxf.discover(["copilot-cli", "cline", "pi"], env=env2, cwd=tmp_path)
    assert found(res, "copilot-cli") == {logs["copilot-cli"]} and found(res, "cline") == {logs["cline"]}
    [pi] = [a for a in res.to_dict()["agents"] if a["agent"] == "pi"]
    assert pi["places"][0]["path"] == str(home / "nowhere" / "sessions")  # ~ is the env's home


def test_links_are_not_followed_round_and_fifos_are_not_listed(tmp_path):
    home = tmp_path / "home"
    log = write(home / ".claude/projects/p/s.jsonl", CLAUDE_FIXTURE)
    (home / ".claude/projects/p/up").symlink_to("..")  # a loop back up
    (home / ".claude/projects/p/again.jsonl").symlink_to(log)  # a second way to the same file
    os.mkfifo(home / ".claude/projects/p/pipe.jsonl")  # opening it would block: never listed
    repo = tmp_path / "repo"
    repo.mkdir()
    os.mkfifo(repo / ".aider.chat.history.md")
    res = ctxf.discover(env={"HOME": str(home)}, cwd=repo)
    [one] = found(res, "claude-code")  # the file once, by whichever name the walk met first
    assert one.resolve() == log.resolve()
    [claude] = [a for a in res.to_dict()["agents"] if a["agent"] == "claude-code"]
    assert claude["links_skipped"] == 2
    assert found(res, "aider") == set()


def test_agent_names_limit_and_unknown_ones_are_usage_errors(tmp_path):
    from context_forensics.errors import ExitCode, UsageError

    res = ctxf.discover(["Codex", "pi", "CLAUDE_CODE"], env={"HOME": str(tmp_path)}, cwd=tmp_path)
    assert [a["agent"] for a in res.to_dict()["agents"]] == ["claude-code", "codex", "pi"]  # table order
    with pytest.raises(UsageError) as e:
        ctxf.discover(["claude"], env={"HOME": str(tmp_path)}, cwd=tmp_path)
    assert e.value.exit_code == ExitCode.USAGE and "claude-code" in str(e.value.hint)


# ---------------------------------------------------------------- the command


def test_dry_run_lists_and_writes_nothing(fake, tmp_path):
    home, cwd, want = fake
    before = tree(tmp_path)
    r = run("ingest", "--discover", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == ctxf.discover().to_dict()
    assert tree(tmp_path) == before  # no store, no forensics_data/, nothing touched
    r = run("ingest", "--discover", "--dry-run", "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.stderr
    assert not (tmp_path / "s.db").exists() and tree(tmp_path) == before
    for agent, paths in want.items():
        assert agent in r.stdout
    assert "nothing read or stored" in r.stdout
    r = run("ingest", "--discover", "--dry-run", "-v")
    assert all(str(p) in r.stdout.replace("\n", "") for ps in want.values() for p in ps) or \
        all(p.name in r.stdout for ps in want.values() for p in ps)


def test_agent_option_limits_and_unknown_agent_exits_2(fake, tmp_path):
    home, cwd, want = fake
    r = run("ingest", "--discover", "--dry-run", "--json", "--agent", "codex", "--agent", "aider")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert [a["agent"] for a in data["agents"]] == ["codex", "aider"]
    assert found(data, "codex") == want["codex"]
    before = tree(tmp_path)
    for args in (("--discover", "--agent", "claude"), ("--discover", "--dry-run", "--agent", "nope")):
        r = run("ingest", *args, "--db", tmp_path / "s.db")
        assert r.exit_code == 2
        assert "unknown agent" in r.stderr and "claude-code" in r.stderr and "copilot-cli" in r.stderr
    assert tree(tmp_path) == before  # refused before the store was opened


def test_usage_errors_without_discover(fake, tmp_path):
    for args in ((), ("--dry-run",), ("--agent", "codex", str(CODEX_FIXTURE)), ("--dry-run", "--discover", "x")):
        r = run("ingest", *args, "--db", tmp_path / "s.db")
        assert r.exit_code == 2, args
    assert not (tmp_path / "s.db").exists()


def test_discover_ingests_through_the_same_path(fake, tmp_path, monkeypatch):
    home, cwd, want = fake
    db = tmp_path / "s.db"

    def no_socket(*a, **k):
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket, "socket", no_socket)
    r = run("ingest", "--discover", "--db", db, "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    data = json.loads(r.stdout)
    assert data["discovered"] == ctxf.discover().to_dict()
    rows = {Path(f["path"]): f for f in data["files"]}
    for agent in ("claude-code", "codex"):
        for p in want[agent]:
            assert rows[p]["status"] == "ingested" and rows[p]["sessions"], (agent, p)
    # Explicit paths give the same rows (the same ingest): unchanged now, same sessions.
    again = json.loads(run("ingest", *want["codex"], "--db", db, "--json").stdout)
    for f in again["files"]:
        assert f["status"] == "unchanged" and f["sessions"] == rows[Path(f["path"])]["sessions"]
    readable = {a["agent"]: a["readable"] for a in data["discovered"]["agents"]}
    sessions = json.loads(run("sessions", "--db", db, "--json").stdout)["sessions"]
    by_agent: dict[str, set[str]] = {}
    for s in sessions:
        by_agent.setdefault(s["agent"], set()).add(s["id"])
        assert s["agent"] == agent_of(s["format"], s["metadata"])
    units = lambda p: {p} if p.is_file() else {p, *(p / n for n in TASK_FILES)}  # noqa: E731
    for agent, paths in want.items():
        taken = [rows[u] for p in paths for u in units(p) if u in rows]
        if not readable[agent]:  # no importer for it in this ctxf yet: listed, not read
            assert taken == [] and not set(data["ignored"]) & {str(u) for p in paths for u in units(p)}
            continue
        # Every log found is read as its agent's format, and its sessions carry the agent's name.
        assert len(taken) == len(paths), agent
        for f in taken:
            assert f["status"] == "ingested" and f["sessions"], (agent, f)
            assert {s for s in f["sessions"]} <= by_agent[agent], (agent, f["path"])
    ingested = {a: {sid for p in want[a] for sid in rows[p]["sessions"]} for a in ("claude-code", "codex")}
    for agent, ids in ingested.items():
        assert by_agent[agent] == ids
        r = run("sessions", "--db", db, "--json", "--agent", agent)
        assert {s["id"] for s in json.loads(r.stdout)["sessions"]} == ids
    r = run("sessions", "--db", db, "--agent", "CODEX")
    assert r.exit_code == 0 and all(i in r.stdout for i in ingested["codex"])
    assert not any(i in r.stdout for i in ingested["claude-code"])
    r = run("sessions", "--db", db, "--json", "--agent", "nobody")  # no agent of that name: a usage error
    assert r.exit_code == 2 and "codex" in r.stderr and r.stdout == ""
    text = run("ingest", "--discover", "--db", db)
    assert text.exit_code == 0 and "discover" in text.stdout and "unchanged" in text.stdout


def test_the_api_ingest_with_discover_equals_the_command(fake, tmp_path):
    home, cwd, want = fake
    res = ctxf.ingest(discover=True, agents="codex", db=tmp_path / "a.db")
    assert res.exit_code == 0
    d = res.to_dict()
    assert [a["agent"] for a in d["discovered"]["agents"]] == ["codex"]
    assert {Path(f["path"]) for f in d["files"]} == want["codex"]
    cli = json.loads(run("ingest", "--discover", "--agent", "codex", "--db", tmp_path / "b.db", "--json").stdout)
    strip = lambda d: {**d, "files": [{k: v for k, v in f.items() if k != "sessions"} for f in d["files"]]}  # noqa: E731
    assert strip(cli) == strip(d)


# ---------------------------------------------------------------- the agent of a session


def test_agent_of_prefers_the_importers_name():
    assert agent_of("claude_code", {}) == "claude-code"
    assert agent_of("swe_agent", None) == "swe-agent"
    assert agent_of("cline", {"agent": "roo"}) == "roo"
    assert agent_of("otel", {"agent": "openai"}) == "openai"
    assert agent_of("openai_chat", {}) is None  # an API log names no agent
    assert agent_of("cline", {"agent": ["not", "a", "name"]}) == "cline"


def test_sessions_agent_filter_reads_metadata(tmp_path):
    from context_forensics.records import Message, Session

    with ctxf.open_store(tmp_path / "s.db") as ws:
        for i, (fmt, meta) in enumerate((("cline", {"agent": "roo"}), ("cline", {}), ("codex", {}))):
            s = Session(external_id=f"x{i}", format=fmt, metadata=meta,
                        messages=[Message(role="user", text="hi")])
            with ws.store.transaction():
                ws.store.write_session(s, sid=f"s{i}", source=f"/x{i}", source_hash=f"h{i}", parent_id=None)
        assert [s["id"] for s in ws.sessions(agent="roo")] == ["s0"]
        assert [s["id"] for s in ws.sessions(agent="cline")] == ["s1"]
        assert [s["agent"] for s in ws.sessions()] == ["roo", "cline", "codex"]
        # the audit's session objects name it too (a CI summary groups by agent)
        audited = ctxf.audit(store=ws).to_dict()["sessions"]
        assert {s["id"]: s["agent"] for s in audited} == {"s0": "roo", "s1": "cline", "s2": "codex"}


@pytest.mark.parametrize("width", (60, 80, 120))
def test_the_dry_run_table_keeps_every_figure_whole(fake, monkeypatch, width):
    """At 80 columns the sizes and times printed cut ("2.6 M…", "2026-12-01 1…")."""
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("NO_COLOR", "1")
    data = json.loads(run("ingest", "--discover", "--dry-run", "--json").stdout)
    r = run("ingest", "--discover", "--dry-run")
    assert r.exit_code == 0
    out = r.stdout
    assert "…" not in out and all(len(line) <= width for line in out.splitlines())
    from context_forensics.render.discover import size_text

    header = next(line for line in out.splitlines() if line.split()[:1] == ["agent"])
    for a in data["agents"]:
        if a["files"]:
            row = next(line for line in out.splitlines() if line.split()[:1] == [a["agent"]])
            assert size_text(a["bytes"]) in row
            if "newest" in header:  # narrower, the column is left out and said so
                assert a["newest"].replace("T", " ")[:16] in row
    assert "newest" in header or "left out at this width (note, newest (UTC))" in " ".join(out.split())
