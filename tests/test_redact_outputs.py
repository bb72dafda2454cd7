"""Issue 31, credentials: secrets no label names (an AWS secret key in prose, a provider token
pasted bare), a token in a file's name, and every output a user reads (the store, the HTML report,
the view page, show / replay --at / explain / diverge / facts suggest in text and JSON, ingest's
own report) holding none of them. Secrets are built at test time from the providers' documented
formats with a seeded generator: no credential is committed."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.store.gitleaks_rules import LEFT_OUT, TABLE, load, re2_to_python
from context_forensics.store.redact import Redactor, gitleaks_table

_rng = random.Random(31)
_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"


def _r(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


# The 13 shapes of the issue, bare (no api_key= beside them), by each provider's documented format.
BARE = {
    "pypi": "pypi-AgEIcHlwaS5vcmc" + _r(70, _ALNUM + "-_"),  # macaroon for pypi.org, base64url
    "npm": "npm_" + _r(36),  # granular / automation token
    "sendgrid": "SG." + _r(22, _ALNUM + "-_") + "." + _r(43, _ALNUM + "-_"),
    "twilio": "SK" + _r(32, _HEX),  # API key SID
    "google-oauth-client-secret": "GOCSPX-" + _r(28, _ALNUM + "-_"),
    "digitalocean": "dop_v1_" + _r(64, _HEX),  # personal access token
    "databricks": "dapi" + _r(32, _HEX),
    "shopify": "shpat_" + _r(32, _HEX),  # Admin API access token
    "telegram": _r(10, string.digits) + ":AA" + _r(33, _ALNUM + "-_"),  # bot id : secret
    "huggingface": "hf_" + _r(34, string.ascii_letters),
    "azure-storage": _r(86, _ALNUM + "+/") + "==",  # a storage account key: 64 bytes, base64
    "openai": "sk-proj-" + _r(74, _ALNUM + "-_") + "T3BlbkFJ" + _r(74, _ALNUM + "-_"),
    "github": "ghp_" + _r(36),
}
PASTED = {name: f"here it is: {v}" for name, v in BARE.items()}
PASTED["azure-storage"] = ("DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
                           f"{BARE['azure-storage']};EndpointSuffix=core.windows.net")
PASTED["telegram"] = f"curl https://api.telegram.org/bot{BARE['telegram']}/getMe"
AWS_SECRET = "".join(_rng.choice(string.ascii_uppercase) + _rng.choice(string.ascii_lowercase)
                     + _rng.choice("0123456789/+")
                     for _ in range(14))[:40]
PROSE = f"For the deploy, the AWS secret key is {AWS_SECRET} and the region is us-east-1."


@pytest.mark.parametrize("name", sorted(BARE))
def test_each_common_credential_shape_is_redacted_bare(name):
    """Before: 11 of these 13 went into the store as they were (all but openai, github)."""
    r = Redactor()
    out = r.text(PASTED[name])
    assert BARE[name] not in out and "[redacted:" in out, out
    assert r.may_hold(PASTED[name])


@pytest.mark.parametrize("text", [PROSE, f"aws secret: {AWS_SECRET}", f"Secret access key (AWS) = {AWS_SECRET}\n"])
def test_an_aws_secret_key_in_prose_is_redacted(text):
    out = Redactor().text(text)
    assert AWS_SECRET not in out and "[redacted:aws-secret]" in out


@pytest.mark.parametrize("text", [
    "the aws deploy commit is 3f786850e387550fdab836ed7e6dc881de23001b",  # a SHA: one case, no secret
    "aws secret manager ARN arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db",
    "the AWS secret key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",  # AWS's documented example
])
def test_aws_prose_rule_leaves_what_is_no_key(text):
    assert Redactor().text(text) == text


def test_gitleaks_table_every_rule_converts_and_compiles():
    import tomllib

    with TABLE.open("rb") as f:
        doc = tomllib.load(f)
    usable = [r for r in doc["rules"] if "regex" in r and "path" not in r and r["id"] not in LEFT_OUT]
    assert len(doc["rules"]) >= 200 and len(load()) == len(usable)
    assert {r.name for r in gitleaks_table()} == {r["id"] for r in usable}
    # every allowlist regex too (load compiled them; a bad one would have raised)
    assert all(a.regexes or a.stopwords for r in load() for a in r["allowlists"])


@pytest.mark.parametrize(("re2", "py"), [
    (r"\b(p8e-(?i)[a-z0-9]{32})(?:x|$)", r"\b(p8e-(?i:[a-z0-9]{32}))(?:x|$)"),
    (r"^/Users/(?i)[a-z]+/x$", r"^/Users/(?i:[a-z]+/x$)"),
    (r"(a(?i)b|c)d", r"(a(?i:b)|(?i:c))d"),
    (r"pat[[:alnum:]]{14}", r"pat[a-zA-Z0-9]{14}"),
    (r"x\z", r"x\Z"),
    (r"[^]x[&]", r"[^\]x\[\&]"),
])
def test_re2_syntax_converted(re2, py):
    assert re2_to_python(re2) == py


def test_gitleaks_rules_keep_their_allowlists():
    r = Redactor()
    assert r.text("key AKIAIOSFODNN7EXAMPLE") == "key AKIAIOSFODNN7EXAMPLE"  # both tables' example rule
    fake = "SK" + "0" * 32  # twilio's shape, no entropy
    assert r.text(f"sid {fake}") == f"sid {fake}"


# ---------------------------------------------------------------- every output


def _chat(path: Path, secret_line: str, answer: str) -> Path:
    """An OpenAI chat request/response log (the openai_chat importer's shape, as tests/test_redact.py)."""
    doc = {"model": "gpt-4o-2024-08-06", "messages": [
        {"role": "system", "content": "You are a deploy assistant."},
        {"role": "user", "content": secret_line},
        {"role": "assistant", "content": "I will configure it."},
        {"role": "user", "content": f"Also paste {BARE['npm']} and {BARE['sendgrid']} into .npmrc and mail.env."},
    ], "response": {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
                    "model": "gpt-4o-2024-08-06",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                                                  "content": answer}}],
                    "usage": {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140}}}
    path.write_text(json.dumps(doc))
    return path


def test_no_output_holds_a_secret_of_the_log_or_its_file_name(tmp_path):
    """Before: the prose AWS key reached the store, the report, the view page and its <title>, and
    show, replay --at, explain, diverge, facts suggest; the token in the file's name was printed by
    ingest --json and stored as the session's source."""
    logs = tmp_path / "logs"
    logs.mkdir()
    name_token = "ghp_" + _r(36)
    a = _chat(logs / f"deploy-{name_token}.json", PROSE, f"Configured; {BARE['databricks']} is set too.")
    b = _chat(logs / "deploy-b.json", f"the AWS secret key is {AWS_SECRET}; use it", "Failed to configure.")
    secrets = [AWS_SECRET, name_token, BARE["npm"], BARE["sendgrid"], BARE["databricks"]]
    db = str(tmp_path / "c.db")
    runner = CliRunner()
    outputs: dict[str, str] = {}

    def run(label: str, *args: str) -> str:
        res = runner.invoke(app, [*args, "--db", db])
        assert res.exit_code in (0, 3), (label, res.output)
        outputs[label] = res.stdout + (res.stderr or "")
        return res.stdout

    ing = json.loads(run("ingest --json", "ingest", str(a), str(b), "--json"))
    run("ingest", "ingest", str(a), str(b), "--force")
    sids = [s for f in ing["files"] for s in f["sessions"]]
    assert len(sids) == 2 and any("[redacted:github-token~" in f["path"] for f in ing["files"])
    run("sessions", "sessions")
    run("sessions --json", "sessions", "--json")
    for sid in sids:
        run(f"show {sid}", "show", sid)
        run(f"show --json {sid}", "show", sid, "--json")
        run(f"replay --at {sid}", "replay", sid, "--at", "1", "--full")
        run(f"replay --at --json {sid}", "replay", sid, "--at", "1", "--json")
        run(f"explain {sid}", "explain", sid)
        run(f"explain --json {sid}", "explain", sid, "--json")
        run(f"facts suggest {sid}", "facts", "suggest", sid)
        run(f"facts suggest --json {sid}", "facts", "suggest", sid, "--json")
        html = tmp_path / f"report-{sid}.html"
        run(f"report {sid}", "report", sid, "--html", str(html))
        outputs[f"report html {sid}"] = html.read_text()
        page = tmp_path / f"view-{sid}.html"
        run(f"view {sid}", "view", sid, "-o", str(page))
        outputs[f"view page {sid}"] = page.read_text()
        run(f"view --json {sid}", "view", sid, "--json")
    run("diverge", "diverge", *sids)
    run("diverge --json", "diverge", *sids, "--json")
    outputs["store"] = b"".join(p.read_bytes() for p in tmp_path.glob("c.db*")).decode("utf-8", "replace")
    assert "<title>" in outputs[f"view page {sids[0]}"]
    leaks = {label: [s[:8] for s in secrets if s in text] for label, text in outputs.items()}
    assert {k: v for k, v in leaks.items() if v} == {}
    assert "[redacted:aws-secret]" in outputs["store"] and "[redacted:npm-access-token]" in outputs["store"]


def test_audit_never_prints_a_token_of_a_file_name(tmp_path):
    """``ctxf audit PATH`` reads files it was given by path: a token in a file's name (a log saved
    under a name holding a key) reaches none of its text, JSON, JUnit or Markdown outputs, on a
    file that ingests and on one that fails."""
    logs = tmp_path / "logs"
    logs.mkdir()
    name_token = "ghp_" + _r(36)
    bad_token = "glpat-" + _r(20)
    _chat(logs / f"deploy-{name_token}.json", "deploy the service", "Deployed.")
    (logs / f"broken-{bad_token}.jsonl").write_text('{"type": "user", "message": {"role": "user", "content": [1, 2')
    runner = CliRunner()
    outputs: dict[str, str] = {}
    junit, md = tmp_path / "audit.xml", tmp_path / "audit.md"
    for label, extra in (("text", []), ("json", ["--json"]),
                         ("files", ["--junit", str(junit), "--markdown", str(md)])):
        res = runner.invoke(app, ["audit", str(logs), *extra, "--db", str(tmp_path / f"{label}.db")])
        assert res.exit_code in (0, 1, 2, 3), (label, res.output)
        outputs[label] = res.stdout + (res.stderr or "")
    outputs["junit"], outputs["markdown"] = junit.read_text(), md.read_text()
    assert "deploy-" in outputs["json"] and "broken-" in outputs["json"]  # the files are named, redacted
    leaks = {label: [t[:8] for t in (name_token, bad_token) if t in text] for label, text in outputs.items()}
    assert {k: v for k, v in leaks.items() if v} == {}


# ---------------------------------------------------------------- a secret a title's cut falls in


def _first_user_text(db: Path) -> list[str]:
    from context_forensics.store.db import Store

    out = []
    with Store.open(db) as st:
        for ses in st.sessions():
            t = next((sm.message.text for sm in st.messages(ses["id"])
                      if sm.message.role == "user" and len(sm.message.text) >= 12), None)
            if t:
                out.append(t)
    return out


def test_a_secret_a_titles_cut_falls_in_is_never_stored_in_part(tmp_path):
    """A session's title is its first request cut to 80 or 100 characters, cut before the redactor
    ran: "... the AWS secret key is q8Vt2Lr9Xm4Kp7Wz1Nc5Hb3" kept 24 of the key's 40 characters
    in the store (no rule knows a 24-character key). Over the fixtures of every format whose first
    request lies in the file as it is read: the first request becomes one whose secret runs from
    character 70 to 110, and no part of the secret (its first 12 characters) is anywhere in the
    store's files, while the session keeps a title."""
    import context_forensics as ctxf

    fixtures = Path(__file__).parent / "fixtures"
    secret = AWS_SECRET
    request = "Please deploy the service for me now, all of it: " + "the AWS secret key is " + secret + \
        " and the region is us-east-1, thanks a lot for all of your help with this deploy today."
    assert 60 < request.index(secret) < 80 and request.index(secret) + 40 > 100
    covered = set()
    for i, f in enumerate(sorted(p for p in fixtures.rglob("*") if p.is_file() and p.stat().st_size < 2_000_000)):
        if "bad" in f.parts or "gitleaks" in f.parts or f.suffix in (".db", ".sqlite", ".eval", ".gz", ".zip"):
            continue
        before = tmp_path / f"b{i}.db"
        res = ctxf.ingest(f, db=before).to_dict()
        fmt = (res["files"] or [{}])[0].get("format")
        if not fmt or res["totals"]["ingested"] != 1 or fmt in covered:
            continue
        firsts = _first_user_text(before)
        raw = f.read_text(encoding="utf-8", errors="strict")
        first = next((t for t in firsts if json.dumps(t)[1:-1] in raw), None)
        if first is None:
            continue
        work = tmp_path / f"w{i}"
        work.mkdir()
        (work / f.name).write_text(raw.replace(json.dumps(first)[1:-1], json.dumps(request)[1:-1], 1))
        db = tmp_path / f"a{i}.db"
        after = ctxf.ingest(work / f.name, db=db).to_dict()
        if after["totals"]["ingested"] != 1 or request not in [
                t.replace("[redacted:aws-secret]", secret) for t in _first_user_text(db)]:
            continue  # the text sits elsewhere too (an index, a summary): not this format's first request
        stored = b"".join(p.read_bytes() for p in tmp_path.glob(f"a{i}.db*"))
        assert secret[:12].encode() not in stored, (fmt, f)
        covered.add(fmt)
    assert len(covered) >= 10, sorted(covered)
