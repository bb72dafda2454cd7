"""Secrets never reach the store: the rule table (store/redact.py), its precision on the real
corpus, the bytes of a store holding logs full of planted secrets, and token figures that do not
move (a replay with and without redaction is the same replay)."""

from __future__ import annotations

import json
import random
import re
import sqlite3
import string
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from context_forensics import api
from context_forensics.cli import app
from context_forensics.config.settings import validate
from context_forensics.errors import ConfigError
from context_forensics.records import Message, Session, ToolCall
from context_forensics.store.redact import PLACEHOLDER, RULES, Redactor, custom_rule, plausible
from helpers import CORPUS

# ---------------------------------------------------------------- planted secrets
# Built at test time from a seeded generator: no credential-shaped string is committed.

_rng = random.Random(11)
_ALNUM = string.ascii_letters + string.digits


def _rand(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _b64url(n: int) -> str:
    return _rand(n, _ALNUM + "-_")


SECRETS: dict[str, str] = {
    "openai-key": "sk-proj-" + _b64url(74) + "T3BlbkFJ" + _b64url(74),
    "openai-legacy": "sk-" + _rand(48),
    "anthropic-key": "sk-ant-api03-" + _b64url(93) + "AA",
    "google-api-key": "AIza" + _b64url(35),
    "groq-key": "gsk_" + _rand(48),
    "huggingface-token": "hf_" + "".join(_rng.choice(string.ascii_uppercase if i % 2 else string.ascii_lowercase)
                                         for i in range(34)),
    "xai-key": "xai-" + _rand(80),
    "github-token": "ghp_" + _rand(36),
    "github-pat": "github_pat_11" + _rand(20) + "_" + _rand(59),
    "gitlab-token": "glpat-" + _b64url(20),
    "slack-token": "xoxb-" + _rand(12, string.digits) + "-" + _rand(13, string.digits) + "-" + _rand(24),
    "slack-webhook": "T0" + _rand(8, string.ascii_uppercase) + "/B0" + _rand(8,
                                                                             string.ascii_uppercase) + "/" + _rand(24),
    "stripe-key": "sk_live_" + _rand(24),
    "aws-access-key-id": "AKIA" + _rand(16, string.ascii_uppercase + "234567"),
    "aws-secret": _rand(40, _ALNUM + "/+"),
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ" + _b64url(40) + "." + _b64url(43),
    "private-key-body": _rand(64, _ALNUM + "+/"),
    "bearer": _rand(12) + "." + _rand(20),
    "x-api-key": _rand(32),
    "db-password": "Pq7" + _rand(9) + "!x",
    "url-password": "u" + _rand(11),
    "access-token": _rand(28),
}
# What the cassette importer never stores (it keeps no request headers): absent either way.
HEADER_ONLY = "hdr" + _rand(29)

PEM = ("-----BEGIN RSA PRIVATE KEY-----\n" + SECRETS["private-key-body"] + "\n" + _rand(64, _ALNUM + "+/")
       + "\n" + _rand(40, _ALNUM + "+/") + "==\n-----END RSA PRIVATE KEY-----")
DOTENV = (f"OPENAI_API_KEY={SECRETS['openai-key']}\nANTHROPIC_API_KEY={SECRETS['anthropic-key']}\n"
          f"DB_PASSWORD={SECRETS['db-password']}\nAWS_ACCESS_KEY_ID={SECRETS['aws-access-key-id']}\n"
          f"AWS_SECRET_ACCESS_KEY={SECRETS['aws-secret']}\nDEBUG=true\nPORT=8080\n")


def _openai_chat(d: Path) -> Path:
    """OpenAI chat request/response JSON: the key in a user message, a Bearer header in a tool
    call's arguments, a .env read in the tool result, a key in a tool definition."""
    tools = [{"type": "function", "function": {
        "name": "shell", "description": f"Run a command. The deploy hook is https://hooks.slack.com/services/"
                                        f"{SECRETS['slack-webhook']}",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]
    doc = {
        "model": "gpt-4o-2024-08-06", "tools": tools,
        "messages": [
            {"role": "system", "content": "You are a deploy assistant."},
            {"role": "user", "content": f"My key is {SECRETS['openai-legacy']}; the Groq one {SECRETS['groq-key']}. "
                                        "Check the service."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "shell", "arguments": json.dumps({"cmd": "curl -H 'Authorization: Bearer "
                                                         f"{SECRETS['bearer']}' https://api.internal/v1/health"})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "cat .env\n" + DOTENV},
            {"role": "user", "content": f"Also the Slack bot token {SECRETS['slack-token']} and "
                                        f"stripe {SECRETS['stripe-key']}."},
        ],
        "response": {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
                     "model": "gpt-4o-2024-08-06",
                     "choices": [{"index": 0, "finish_reason": "stop", "message": {
                         "role": "assistant", "content": f"Done. Rotate {SECRETS['github-token']} too."}}],
                     "usage": {"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920}},
    }
    p = d / "chat.json"
    p.write_text(json.dumps(doc, indent=1))
    return p


def _claude_code(d: Path) -> Path:
    """Claude Code JSONL: secrets in a title, a tool_use input, a tool_result (a .env file and a
    private key read by the agent)."""
    sid = "22222222-3333-4444-8555-666666666666"
    base = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/app", "sessionId": sid,
            "version": "2.1.40", "gitBranch": "main"}
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000,
             "output_tokens": 30}

    def rec(uuid, parent, typ, message, **extra):
        return {**base, "parentUuid": parent, "type": typ, "uuid": uuid,
                "timestamp": f"2026-02-01T10:0{len(uuid)}:00.000Z", "message": message, **extra}

    def asst(uuid, parent, content, mid):
        return rec(uuid, parent, "assistant", {"model": "claude-sonnet-4-5", "id": mid, "type": "message",
                                               "role": "assistant", "content": content, "usage": usage},
                   requestId=f"req_{mid}")

    lines = [
        {"type": "summary", "summary": f"Deploy with {SECRETS['gitlab-token']}", "leafUuid": "a-3"},
        rec("u-1", None, "user", {"role": "user", "content": "Deploy the app; credentials are in .env and deploy.pem"}),
        asst("a-1", "u-1", [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                             "input": {"command": f"export GITHUB_TOKEN={SECRETS['github-pat']} && cat .env"}}], "m1"),
        rec("r-1", "a-1", "user", {"role": "user", "content": [
            {"tool_use_id": "toolu_1", "type": "tool_result", "content": DOTENV}]}),
        asst("a-2", "r-1", [{"type": "tool_use", "id": "toolu_2", "name": "Read",
                             "input": {"file_path": "deploy.pem"}}], "m2"),
        rec("r-2", "a-2", "user", {"role": "user", "content": [
            {"tool_use_id": "toolu_2", "type": "tool_result", "content": PEM}]}),
        asst("a-3", "r-2", [{"type": "text", "text": f"The session token is {SECRETS['jwt']}; Google key "
                                                      f"{SECRETS['google-api-key']}, HF "
                                                      f"{SECRETS['huggingface-token']}."}],
             "m3"),
    ]
    p = d / f"{sid}.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


def _mini_swe_agent(d: Path) -> Path:
    """mini-swe-agent (v1 text format): an observation full of credentials."""
    def obs(out):
        return {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{out}</output>"}

    def act(thought, cmd, n):
        return {"role": "assistant", "content": f"THOUGHT: {thought}\n\n```bash\n{cmd}\n```",
                "extra": {"response": {"id": f"gen-{n}", "model": "google/gemini-3-pro-preview",
                                       "usage": {"prompt_tokens": 500 + 100 * n, "completion_tokens": 20}}}}

    doc = {
        "info": {"exit_status": "Submitted", "submission": "diff --git a/x b/x\n",
                 "model_stats": {"instance_cost": 0.01, "api_calls": 3}, "mini_version": "1.15.0",
                 "config": {"model": {"model_name": "google/gemini-3-pro-preview"}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "<pr_description>Fix the settings loader</pr_description>"},
            act("look at the settings", "cat settings.yaml", 1),
            obs(f"database:\n  url: postgres://app:{SECRETS['url-password']}@db.internal:5432/app\n"
                f"  password: {SECRETS['db-password']}\nxai:\n  api_key: {SECRETS['xai-key']}\n"),
            act("check the token file", "cat token.json", 2),
            obs(json.dumps({"access_token": SECRETS["access-token"], "token_type": "bearer", "expires_in": 3600})),
            act("done", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", 3),
        ],
        "trajectory_format": "mini-swe-agent-1",
    }
    p = d / "owner__repo-1.traj.json"
    p.write_text(json.dumps(doc, indent=1))
    return p


def _cassette(d: Path) -> Path:
    """A VCR cassette: the Authorization header (never stored) and an x-api-key in the content."""
    body = {"model": "gpt-4o-mini", "messages": [
        {"role": "user", "content": f"Why does curl -H \"x-api-key: {SECRETS['x-api-key']}\" https://api.x/v1 fail?"}]}
    answer = {"id": "chatcmpl-9", "object": "chat.completion", "created": 1731368634, "model": "gpt-4o-mini",
              "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": "The key is revoked."}}],
              "usage": {"prompt_tokens": 31, "completion_tokens": 6, "total_tokens": 37}}
    doc = {"interactions": [{
        "request": {"body": json.dumps(body), "method": "POST", "uri": "https://api.openai.com/v1/chat/completions",
                    "headers": {"authorization": [f"Bearer {HEADER_ONLY}"], "content-type": ["application/json"]}},
        "response": {"body": {"string": json.dumps(answer)}, "headers": {"Content-Type": ["application/json"]},
                     "status": {"code": 200, "message": "OK"}}}], "version": 1}
    p = d / "cassette.yaml"
    p.write_text(yaml.safe_dump(doc, width=1000))
    return p


@pytest.fixture
def planted(tmp_path: Path) -> list[Path]:
    d = tmp_path / "logs"
    d.mkdir()
    return [_openai_chat(d), _claude_code(d), _mini_swe_agent(d), _cassette(d)]


# ---------------------------------------------------------------- the store's bytes


def _store_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists())


def _present(data: bytes) -> set[str]:
    return {name for name, value in SECRETS.items() if value.encode() in data}


def test_planted_logs_parse_into_the_formats_meant(planted):
    res = api.ingest(planted, db=":memory:", redact=False).to_dict()
    assert [f["format"] for f in res["files"]] == ["openai_chat", "claude_code", "mini_swe_agent", "vcr_cassette"]
    assert all(f["status"] == "ingested" and f["messages"] for f in res["files"]), res["files"]


def test_no_planted_secret_reaches_the_store_db_or_wal(planted, tmp_path):
    db = tmp_path / "store.db"
    with api.open_store(db) as ws:  # open: the WAL still holds what the ingest wrote
        res = api.ingest(planted, store=ws).to_dict()
        assert res["totals"]["failed"] == 0
        assert Path(f"{db}-wal").exists()
        assert _present(_store_bytes(db)) == set()
        ws.store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert _present(_store_bytes(db)) == set()
    data = _store_bytes(db)
    assert _present(data) == set() and HEADER_ONLY.encode() not in data
    assert b"[redacted:openai-key]" in data and b"[redacted:private-key]" in data


def test_with_no_redact_every_planted_secret_is_stored_as_is(planted, tmp_path):
    db = tmp_path / "raw.db"
    out = CliRunner().invoke(app, ["ingest", *map(str, planted), "--db", str(db), "--no-redact", "--json"])
    assert out.exit_code == 0, out.output
    assert all(f["redacted"] is None for f in json.loads(out.stdout)["files"])
    data = _store_bytes(db)
    assert _present(data) == set(SECRETS)
    assert HEADER_ONLY.encode() not in data  # the cassette importer keeps no request headers at all


def test_ingest_counts_redactions_per_file_and_never_prints_a_secret(planted, tmp_path):
    runner = CliRunner()
    db = str(tmp_path / "s.db")
    out = runner.invoke(app, ["ingest", *map(str, planted), "--db", db, "--json"])
    assert out.exit_code == 0, out.output
    files = {Path(f["path"]).name: f["redacted"] for f in json.loads(out.stdout)["files"]}
    assert files["cassette.yaml"] == {"api-key": 2}  # the user message and the title made of it
    assert files["owner__repo-1.traj.json"] == {"password": 1, "token": 1, "url-password": 1, "xai-key": 1}
    assert json.loads(out.stdout)["totals"]["redacted"] == sum(sum(c.values()) for c in files.values())
    human = runner.invoke(app, ["ingest", *map(str, planted), "--db", str(tmp_path / "h.db")])
    assert human.exit_code == 0
    assert ("secrets redacted in owner__repo-1.traj.json: password ×1, token ×1, url-password ×1, xai-key ×1"
            in " ".join(human.stdout.split())), human.stdout
    for o in (out, human):
        assert not {v for v in SECRETS.values() if v in o.stdout + o.stderr}


def test_a_file_ingested_as_is_is_read_again_when_redaction_is_on(planted, tmp_path):
    db = tmp_path / "s.db"
    api.ingest(planted[2], db=db, redact=False)
    again = api.ingest(planted[2], db=db).to_dict()["files"][0]
    assert again["status"] == "ingested" and again["redacted"]  # not "unchanged": the rules differ
    with sqlite3.connect(db) as conn:
        text = "".join(r[0] or "" for r in conn.execute("SELECT text FROM messages"))
    assert SECRETS["xai-key"] not in text and "[redacted:xai-key]" in text


# ---------------------------------------------------------------- token figures do not move

MODELS = [None, "gpt-4o", "gpt-4", "claude-sonnet-4-5", "gemini-2.5-pro", "llama-3.1-70b", "qwen3-32b"]


def _figures(d: dict) -> dict:
    """A replay's --json without what describes the stored (redacted) text itself: the session's
    content hash, title and metadata, message texts, and its id (its content's: ``session_id``)."""
    if isinstance(d, dict):
        return {k: _figures(v) for k, v in d.items()
                if k not in ("content_hash", "title", "metadata", "text", "tool_calls")
                and not (k in ("id", "session") and isinstance(v, str))}
    if isinstance(d, list):
        return [_figures(v) for v in d]
    return d


def _replays(db: Path, files: list[Path]) -> list[dict]:
    out = []
    with api.open_store(db) as ws:
        by_source = {s["source"]: s["id"] for s in ws.sessions()}
        for f in files:
            sid = by_source[str(f.resolve())]
            for m in MODELS:
                rep = api.replay(sid, model=m, store=ws).to_dict()
                steps = len(rep["replays"][0]["steps"])
                wins = [api.window(sid, k, model=m, store=ws).to_dict() for k in range(1, steps + 1)]
                out.append(_figures({"file": f.name, "model": m, "replay": rep, "windows": wins}))
    return out


def _all_schemes(tmp_path: Path):
    from context_forensics.config.settings import load_config

    p = tmp_path / "all.yaml"
    p.write_text("storage:\n  redact_originals: all\n")
    return load_config(p)


def test_replays_are_the_same_with_and_without_redaction(planted, tmp_path):
    """``storage.redact_originals: all``: under every model of every counting scheme."""
    api.ingest(planted, db=tmp_path / "raw.db", redact=False)
    api.ingest(planted, db=tmp_path / "red.db", config=_all_schemes(tmp_path))
    raw, red = _replays(tmp_path / "raw.db", planted), _replays(tmp_path / "red.db", planted)
    assert len(raw) == len(planted) * len(MODELS)
    for a, b in zip(raw, red):
        assert a == b, (a["file"], a["model"])


def test_by_default_the_logs_own_model_replays_the_same_and_the_others_say_so(planted, tmp_path):
    """The default (``model``): a replay under the recorded model equals the unredacted one; under
    another model it is the same, or it differs and its flags say a redacted message was counted
    as stored. At least one of the other models differs here (the control)."""
    api.ingest(planted, db=tmp_path / "raw.db", redact=False)
    api.ingest(planted, db=tmp_path / "red.db")
    raw, red = _replays(tmp_path / "raw.db", planted), _replays(tmp_path / "red.db", planted)
    differ = 0
    for a, b in zip(raw, red):
        flagged = any("no original count recorded" in f for r in b["replay"]["replays"] for f in r["flags"])
        if a["model"] is None:
            assert a == b and not flagged, a["file"]
        elif a != b:
            differ += 1
            assert flagged, (a["file"], a["model"])
    assert differ


def test_without_the_original_counts_the_figures_would_move(planted, tmp_path):
    """The control: the store's own redactor (no counter, as a caller of store.ingest without the
    API gets) counts the placeholders, and says so."""
    from context_forensics.store.db import Store
    from context_forensics.store.ingest import ingest_paths

    api.ingest(planted, db=tmp_path / "raw.db", redact=False)
    with Store.open(tmp_path / "bare.db") as st:
        ingest_paths(st, planted, redact=Redactor())
    moved = [a["file"] for a, b in zip(_replays(tmp_path / "raw.db", planted), _replays(tmp_path / "bare.db", planted))
             if a != b]
    assert {"chat.json", "owner__repo-1.traj.json", "22222222-3333-4444-8555-666666666666.jsonl"} <= set(moved)
    kinds = {}
    for name in ("raw.db", "bare.db"):
        with api.open_store(tmp_path / name) as ws:
            sid = next(s["id"] for s in ws.sessions() if s["format"] == "mini_swe_agent")
            rep = api.replay(sid, model="gpt-4o", store=ws).to_dict()
            kinds[name] = [s["window_tokens_kind"] for s in rep["replays"][0]["steps"]]
    # redacted messages counted as stored: the session's figures are labelled estimates
    assert kinds == {"raw.db": ["exact"] * 3, "bare.db": ["estimated"] * 3}


# ---------------------------------------------------------------- the rule table

# (text, what it becomes): one or more per rule; the parts around a secret stay.
TRUE_POSITIVES = [
    (f"key: {SECRETS['openai-key']}", "key: [redacted:openai-key]"),
    (f"OPENAI_API_KEY={SECRETS['openai-legacy']}", "OPENAI_API_KEY=[redacted:openai-key]"),
    (f"x-api-key: {SECRETS['anthropic-key']}", "x-api-key: [redacted:anthropic-key]"),
    ("OPENROUTER_API_KEY=sk-or-v1-" + "0123456789abcdef" * 4, "OPENROUTER_API_KEY=[redacted:openrouter-key]"),
    ("DEEPSEEK_API_KEY=sk-" + "9f86d081884c7d659a2feaa0c55ad015", "DEEPSEEK_API_KEY=[redacted:api-key]"),
    (f"?key={SECRETS['google-api-key']}&alt=json", "?key=[redacted:google-api-key]&alt=json"),
    (f"groq {SECRETS['groq-key']}.", "groq [redacted:groq-key]."),
    (f"--token {SECRETS['huggingface-token']}", "--token [redacted:huggingface-token]"),
    (f"XAI_API_KEY='{SECRETS['xai-key']}'", "XAI_API_KEY='[redacted:xai-key]'"),
    (f"git clone https://{SECRETS['github-token']}@github.com/o/r",
     "git clone https://[redacted:github-token]@github.com/o/r"),
    (f"token={SECRETS['github-pat']}", "token=[redacted:github-token]"),
    (f"PRIVATE-TOKEN: {SECRETS['gitlab-token']}", "PRIVATE-TOKEN: [redacted:gitlab-token]"),
    (f"SLACK_BOT_TOKEN={SECRETS['slack-token']}", "SLACK_BOT_TOKEN=[redacted:slack-token]"),
    ("xapp-1-A052FGTS2DL-5171572773297-610b6a11f4b7eb819e87b767d80e6575", "[redacted:slack-token]"),
    (f"url: https://hooks.slack.com/services/{SECRETS['slack-webhook']}",
     "url: https://hooks.slack.com/services/[redacted:slack-webhook]"),
    (f"stripe.api_key = '{SECRETS['stripe-key']}'", "stripe.api_key = '[redacted:stripe-key]'"),
    (f"aws_access_key_id = {SECRETS['aws-access-key-id']}", "aws_access_key_id = [redacted:aws-access-key-id]"),
    (f'"SecretAccessKey": "{SECRETS["aws-secret"]}"', '"SecretAccessKey": "[redacted:aws-secret]"'),
    (f"aws_secret_key={SECRETS['aws-secret']}", "aws_secret_key=[redacted:aws-secret]"),
    (f"Cookie: session={SECRETS['jwt']}", "Cookie: session=[redacted:jwt]"),
    (f"key:\n{PEM}\nnext", "key:\n[redacted:private-key]\nnext"),
    (f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRETS['private-key-body']}\n{SECRETS['private-key-body']}",
     "[redacted:private-key]"),  # cut short (a truncated tool output): the body still goes
    (f"Authorization: Bearer {SECRETS['bearer']}", "Authorization: Bearer [redacted:auth-header]"),
    ("authorization:\n      - Basic dXNlcjpQcTdzM2NyZXQhMjAyNA==",
     "authorization:\n      - Basic [redacted:auth-header]"),
    (f'curl -H "X-API-Key: {SECRETS["x-api-key"]}"', 'curl -H "X-API-Key: [redacted:api-key]"'),
    (f"DB_PASSWORD={SECRETS['db-password']}\nDEBUG=1", "DB_PASSWORD=[redacted:password]\nDEBUG=1"),
    (f'{{"password": "{SECRETS["db-password"]}"}}', '{"password": "[redacted:password]"}'),
    (f"login(user, pwd='{SECRETS['db-password']}')", "login(user, pwd='[redacted:password]')"),
    (f"mysql --password {SECRETS['db-password']} db", "mysql --password [redacted:password] db"),
    (f"redis://:{SECRETS['url-password']}@cache:6379", "redis://:[redacted:url-password]@cache:6379"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Date=20260129T000000Z&X-Amz-Signature=" + "d48db03e7d9b19bc" * 4 + "&x=1",
     "https://b.s3.amazonaws.com/k?X-Amz-Date=20260129T000000Z&X-Amz-Signature=[redacted:url-signature]&x=1"),
    ("SECRET_KEY = 'django-insecure-8f$2k!x9z@q#w1e'", "SECRET_KEY = '[redacted:secret]'"),
    (f"client_secret: {SECRETS['access-token']}", "client_secret: [redacted:secret]"),
    (f"export API_TOKEN={SECRETS['access-token']}", "export API_TOKEN=[redacted:token]"),
    ("client_secret=GOCSPX-" + "k3Jq9ZtX0bR7mW2pL5vN8cY1dF4h", "client_secret=[redacted:google-oauth-secret]"),
    ("https://api.telegram.org/bot6012345678:AAG" + "k3Jq9ZtX0bR7mW2pL5vN8cY1dF4hS6uE",
     "https://api.telegram.org/bot[redacted:telegram-bot-token]"),
    ("AccountName=a;AccountKey=" + "k3Jq9ZtX0bR7mW2pL5vN8cY1dF4hS6uE+/Qa" * 2 + "Tq7Zx2Wc9Vb4Nm==;EndpointSuffix=x",
     "AccountName=a;AccountKey=[redacted:azure-storage-key];EndpointSuffix=x"),
    (f"{{\\\"access_token\\\": \\\"{SECRETS['access-token']}\\\"}}",  # JSON inside JSON
     '{\\"access_token\\": \\"[redacted:token]\\"}'),
]

NOT_SECRETS = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "session 123e4567-e89b-12d3-a456-426614174000 started",
    "data:image/png;base64,"
    + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==" * 20,
    "password=None", "password=<your password>", "password = getpass()", "password='secret'",
    "passwd = conn_params.get('password', '')", "'password': 'test_password'", "PASSWORD=${DB_PASSWORD}",
    "export ANTHROPIC_API_KEY=sk-ant-...", "OPENAI_API_KEY=your_openai_api_key_here", "api_key: YOUR_API_KEY",
    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "'Authorization': `Bearer ${apiInfo.token}`", 'headers = {"Authorization": f"Bearer {token}"}',
    "Authorization: Bearer REDACTED", "max_tokens: 4096", '{"prompt_tokens": 1234, "total_tokens": 1290}',
    "next_page_token: Option<String>", "tokenizer.pad_token = tokenizer.eos_token", 'eos_token = "</s>"',
    '{"token": "Hello", "logprob": -0.25}', "github_token: ${{ secrets.GITHUB_TOKEN }}",
    "SECRET_KEY = 'django_tests_secret_key'", "const apiKey = await getApiKeyForModel(model);",
    "postgres://postgres:postgres@localhost:5432/db", "https://user:password@example.com/",
    "if line.startswith('-----BEGIN PRIVATE KEY-----'):", "task-sk-notification-1770847511283",
    "disk-" + "a" * 48, "hf_requiredCharacteristicTypesForDisplayMet", "PWD=/home/dev/app", "OLDPWD=/tmp",
    "eyJhbGciOiJIUzI1NiJ9 is a JWT header", "sk_test_xxxxxxxxxxxxxxxxxxxxxxxx",
]


@pytest.mark.parametrize(("text", "expected"), TRUE_POSITIVES)
def test_each_rule_redacts_its_shape(text, expected):
    r = Redactor()
    assert r.may_hold(text)  # the one look a whole message gets first lets it through
    assert r.text(text) == expected
    assert sum(r.counts.values()) == expected.count("[redacted:")


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_what_is_not_a_secret_stays(text):
    r = Redactor()
    assert r.text(text) == text, r.counts
    assert not r.counts


def test_every_rule_of_the_table_has_a_true_positive():
    names = {re.search(r"\[redacted:([a-z0-9-]+)\]", e).group(1) for _, e in TRUE_POSITIVES}
    names |= {m for _, e in TRUE_POSITIVES for m in re.findall(r"\[redacted:([a-z0-9-]+)\]", e)}
    assert {r.name for r in RULES} <= names


def test_redacted_tool_arguments_stay_valid_json():
    args = json.dumps({"path": "deploy.pem", "content": PEM + "\n", "env": DOTENV, "note": 'say "hi"'})
    out = Redactor().text(args)
    assert json.loads(out)["content"] == "[redacted:private-key]\n"
    assert "[redacted:openai-key]" in json.loads(out)["env"] and json.loads(out)["note"] == 'say "hi"'


def test_plausible_values():
    assert plausible("Pq7s3cret!x") and plausible("Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB")
    for v in ("hunter", "1234567890", "self.token", "os.environ", "aaaaaaaa1", "${TOKEN}", "<token>", "None"):
        assert not plausible(v), v


def test_message_hashes_the_importer_took_are_mapped_to_the_redacted_ones():
    """An Inspect call's input_hashes and a request's tools_hash name content the redactor changed."""
    tools = [{"type": "function", "function": {"name": "f", "description": f"uses {SECRETS['github-token']}"}}]
    first = Message("user", f"my key {SECRETS['openai-key']}")
    plain = Message("user", "nothing to hide here")
    from context_forensics.hashing import content_hash

    call = Message("assistant", "ok", meta={"request": {"input_hashes": [first.hash, plain.hash], "input_differs": True,
                                                         "tools_count": 1, "tools_hash": content_hash(tools)}})
    s = Session("x", "test", messages=iter([first, plain, call]), metadata={"tools": tools})
    r = Redactor(measure=lambda m, models: {"scheme": 7}, measure_tools=lambda t, models: {"tools-scheme": 9})
    r.session(s)
    out = list(s.messages)
    request = out[2].meta["request"]
    assert request["input_hashes"] == [out[0].hash, plain.hash] and out[0].hash != first.hash
    assert request["tools_hash"] == content_hash(s.metadata["tools"]) != content_hash(tools)
    assert out[0].meta["redaction"] == {"secrets": {"openai-key": 1}, "text_changed": True, "tokens": {"scheme": 7}}
    assert s.metadata["redaction"] == {"secrets": {"github-token": 1}, "tokens": {"tools-scheme": 9}}
    assert out[1] is plain  # nothing to redact: the same record


def test_tool_call_arguments_parts_and_meta_are_redacted():
    m = Message("assistant", "", tool_calls=(ToolCall("sh", json.dumps({"cmd": f"echo {SECRETS['groq-key']}"}), "c1"),),
                parts=({"type": "thinking", "text": f"the token is {SECRETS['slack-token']}"},),
                meta={"recorded_response": {"text": f"key {SECRETS['stripe-key']}"}})
    out = Redactor().message(m)
    blob = json.dumps([out.tool_calls[0].to_dict(), list(out.parts), out.meta])
    assert not {n for n, v in SECRETS.items() if v in blob}
    assert out.meta["redaction"]["secrets"] == {"groq-key": 1, "slack-token": 1, "stripe-key": 1}


# ---------------------------------------------------------------- config


def test_config_turns_redaction_off_and_adds_patterns(tmp_path, planted):
    off = validate({"storage": {"redact": False}}, "test.yaml")
    api.ingest(planted[2], db=tmp_path / "off.db", config=off)
    assert _present(_store_bytes(tmp_path / "off.db")) >= {"xai-key", "db-password"}
    log = tmp_path / "internal.jsonl"
    log.write_text(json.dumps({"messages": [{"role": "user", "content": "the build uses itk_" + "a1B2" * 8},
                                            {"role": "assistant", "content": "noted"}]}) + "\n")
    cfg = {"storage": {"redact_patterns": [{"name": "internal-token", "regex": r"itk_[A-Za-z0-9]{32}"},
                                           {"name": "ticket", "regex": r"ticket=(?P<secret>\d{6})"}]}}
    res = api.ingest(log, db=tmp_path / "custom.db", config=cfg).to_dict()["files"][0]
    assert res["redacted"] == {"internal-token": 2}, res  # the message, and the title made of it
    assert b"itk_a1B2" not in _store_bytes(tmp_path / "custom.db")
    r = Redactor([custom_rule("ticket", r"ticket=(?P<secret>\d{6})")])
    assert r.text("see ticket=123456 now") == "see ticket=" + PLACEHOLDER.format("ticket") + " now"


@pytest.mark.parametrize(("patterns", "key", "says"), [
    ([{"name": "x", "regex": "itk_[A-Z"}], "storage.redact_patterns[0].regex", "not a valid regular expression"),
    ([{"name": "x", "regex": "a*"}], "storage.redact_patterns[0].regex", "matches the empty string"),
    ([{"name": "Bad Name", "regex": "x+"}], "storage.redact_patterns[0].name", "lower-case letters"),
    ([{"regex": "x+"}], "storage.redact_patterns[0].name", "is missing"),
    ([{"name": "x", "regex": "x+", "flags": "i"}], "storage.redact_patterns[0].flags", "unknown key"),
    ("itk_.*", "storage.redact_patterns", "must be a list"),
])
def test_bad_redact_patterns_are_config_errors_naming_the_key(patterns, key, says):
    with pytest.raises(ConfigError) as e:
        validate({"storage": {"redact_patterns": patterns}}, "cfg.yaml")
    assert f"cfg.yaml: {key}" in str(e.value) and says in str(e.value)


def test_redact_must_be_a_boolean():
    with pytest.raises(ConfigError, match="storage.redact"):
        validate({"storage": {"redact": "no"}}, "cfg.yaml")


# ---------------------------------------------------------------- precision on the real corpus


def _corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not available: {CORPUS}")
    return [p for p in sorted(CORPUS.rglob("*")) if p.is_file()]


# What the rules find in the public corpus, each looked at by hand and judged a credential.
# The two Gemini CLI transcripts (fourth wave) hold Figma API answers with presigned S3 thumbnail
# URLs: X-Amz-Credential names a real long-term AWS access key id (AKIA..., the key's public half,
# which gitleaks flags too) and X-Amz-Signature is a bearer capability for 7 days (X-Amz-Expires
# 604800) from when it was recorded. The same URL appears on two lines of 49bdd49a (two calls).
CORPUS_TRUE_POSITIVES = {
    "gemini-cli-stream-json/metaphi-figma-eval-49bdd49a/transcript.jsonl": {"aws-access-key-id": 2,
                                                                           "url-signature": 2},
    "gemini-cli-stream-json/metaphi-figma-eval-d00f7a9b/transcript.jsonl": {"aws-access-key-id": 1,
                                                                           "url-signature": 1},
}


def test_the_public_corpus_holds_no_secret_but_the_reviewed_ones():
    """Every corpus file, line by line as raw text: the public logs were sanitized by their
    authors, so any redaction beyond the reviewed ``CORPUS_TRUE_POSITIVES`` is a false positive (each
    near miss was looked at: see the Secrets section of docs/commands/ingest.md; the who-and-when group chats'
    ``SystemEntropyOriginTrialToken`` is a browser origin-trial token, public by design)."""
    r = Redactor()
    found: dict[str, dict[str, int]] = {}
    for p in _corpus_files():
        for line in p.read_text("utf-8", "replace").splitlines():
            r.text(line)
        if r.counts:
            found[str(p.relative_to(CORPUS))] = dict(r.reset())
    assert found == CORPUS_TRUE_POSITIVES


def test_a_presigned_url_loses_its_signature_and_key_id_but_not_its_scope():
    url = ("https://s3-alpha.figma.com/thumbnails/9eee?X-Amz-Algorithm=AWS4-HMAC-SHA256"
           "&X-Amz-Credential=AKIAQ4GOSFWCV44OTG5P%2F20260129%2Fus-west-2%2Fs3%2Faws4_request"
           "&X-Amz-Date=20260129T000000Z&X-Amz-Expires=604800&X-Amz-SignedHeaders=host"
           "&X-Amz-Signature=b7d03621ea5905bb195491dcc75f756d97baeee6d87e60be6abf7b66b8597ed3")
    r = Redactor()
    out = r.text(url)
    assert "AKIAQ4GOSFWCV44OTG5P" not in out and "b7d03621ea5905bb" not in out
    assert "%2F20260129%2Fus-west-2%2Fs3%2Faws4_request" in out  # the scope is no secret
    assert dict(r.counts) == {"aws-access-key-id": 1, "url-signature": 1}


def test_an_origin_trial_token_is_public_but_a_token_beside_it_is_not():
    trial = "A1L3tx5CzccqjN3lK6st/fXMwhf9EeokCPf8XCt0DVI8JPbg37BWq0zKvlqgkdm8YEUbthoGkC/xdR1"
    r = Redactor()
    assert r.text(f'"SystemEntropyOriginTrialToken": "{trial}"') == f'"SystemEntropyOriginTrialToken": "{trial}"'
    assert "[redacted:token]" in r.text(f'"session_token": "{trial}"')


# As stored (unescaped): gitleaks' atlassian-api-token rule finds a real Atlassian Cloud API token
# (ATATT3 + 186 characters, beside the company's atlassian.net URL and an e-mail address) in Rust
# code a Cline task wrote; in the raw file it sits inside JSON escaped twice (\\\"ATATT3…\\\"), which
# the rule's end-of-secret class does not take, so the raw-line scan above does not see it.
# The Gemini CLI stream-json captures (fourth wave) hold presigned S3 URLs of Figma thumbnails in a
# tool's output (X-Amz-Algorithm=AWS4-HMAC-SHA256, X-Amz-Credential=AKIA.../20260129/us-west-2/s3,
# X-Amz-Signature=...): whoever holds such a URL can fetch the object until it expires, so its
# signature and the access key id in its credential scope go (3 URLs, 2 in one file, 1 in the other).
CORPUS_STORED_TRUE_POSITIVES = {
    "cline/Cline-Xray/94013f8": {"atlassian-api-token": 1},
    "gemini-cli-stream-json/metaphi-figma-eval-49bdd49a/transcript.jsonl": {"aws-access-key-id": 2, "url-signature": 2},
    "gemini-cli-stream-json/metaphi-figma-eval-d00f7a9b/transcript.jsonl": {"aws-access-key-id": 1, "url-signature": 1},
}


def test_the_ingested_corpus_is_stored_unredacted_and_unchanged(tmp_path):
    """What the store keeps of the corpus (message text, arguments, meta: unescaped) meets no rule
    but the reviewed ``CORPUS_STORED_TRUE_POSITIVES``."""
    _corpus_files()
    res = api.ingest(CORPUS, recursive=True, db=tmp_path / "c.db").to_dict()
    assert res["totals"]["ingested"] > 0
    found = {str(Path(f["path"]).relative_to(CORPUS)): f["redacted"] for f in res["files"] if f["redacted"]}
    assert found == CORPUS_STORED_TRUE_POSITIVES
