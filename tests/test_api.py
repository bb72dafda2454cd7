"""The Python API: each call's ``to_dict()`` is exactly the matching command's ``--json`` (over the
real corpus and sample_logs/), its errors are the CLI's, its reference is typed and documented,
and the worked example of docs/api.md prints what the page says."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import context_forensics as ctxf
from context_forensics import api
from context_forensics.cli import app
from context_forensics.errors import ConfigError, NotFoundError, UsageError
from helpers import CORPUS

ROOT = Path(__file__).parent.parent
SAMPLES = ROOT / "sample_logs"
OVERFLOW = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"
API_PAGE = (ROOT / "docs" / "api.md").read_text()  # the worked example lives there


def _scrub(value):
    """Wall-clock figures (keys ending in ``seconds``, and the audit's ``timing``: which session was
    slowest is measured too) are the only part allowed to differ."""
    if isinstance(value, dict):
        return {k: ("<seconds>" if k.endswith("seconds") or k == "timing" else _scrub(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _cli(db: Path, *args: str) -> tuple[int, object]:
    r = CliRunner().invoke(app, [*args, "--json", "--db", str(db)])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    assert r.stdout, f"ctxf {' '.join(args)}: no output (exit {r.exit_code}): {r.stderr}"
    return r.exit_code, json.loads(r.stdout)


def same(result, cli_json) -> None:
    """``result.to_dict()`` is plain JSON (no default= needed) and equals the CLI's output."""
    text = json.dumps(result.to_dict(), ensure_ascii=False)  # raises on a non-JSON type
    assert _scrub(json.loads(text)) == _scrub(cli_json)


# ---------------------------------------------------------------- the reference


def test_the_package_exports_the_api_with_types_and_docstrings():
    import importlib
    import pkgutil

    # Importing a subpackage binds it to its parent's attribute of the same name: no module of
    # the package may shadow an API function at the root (why the analyses live in analysis/).
    for mod in pkgutil.walk_packages(ctxf.__path__, "context_forensics."):
        if not mod.name.endswith("__main__"):
            importlib.import_module(mod.name)
    for name in ("open_store", "ingest", "discover", "replay", "window", "facts", "drift", "diverge", "divergences",
                 "audit"):
        fn = getattr(ctxf, name)
        assert fn is getattr(api, name) and name in ctxf.__all__
        assert fn.__doc__ and len(fn.__doc__.split()) >= 10, f"{name} has no reference docstring"
        sig = inspect.signature(fn)
        assert sig.return_annotation is not inspect.Signature.empty, f"{name} has no return type"
        untyped = [p for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty]
        assert untyped == [], f"{name}: untyped parameters {untyped}"
    for cls in (ctxf.IngestResult, ctxf.DiscoverResult, ctxf.ReplayResult, ctxf.WindowResult, ctxf.FactsResult,
                ctxf.DriftResult,
                ctxf.DivergeResult, ctxf.DivergencesResult, ctxf.AuditResult, ctxf.Workspace):
        assert cls.__doc__, cls


def test_the_api_type_checks(tmp_path):
    """The hints are checked, not only present: mypy over api/ (the modules it imports are
    followed silently: their own errors are not this test's)."""
    pytest.importorskip("mypy", reason="mypy is a dev dependency: pip install -e '.[dev]'")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
         "--cache-dir", str(tmp_path / "mypy"), str(ROOT / "context_forensics" / "api")],
        capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_py_typed_is_shipped():
    assert (ROOT / "context_forensics" / "py.typed").is_file()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()


def test_the_license_is_an_spdx_expression_with_its_file():
    """Issue 34: setuptools stops building the table form of ``license`` after 2027-02-18."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in project["classifiers"])
    assert sum(d.split(">")[0].split("=")[0] == "pyyaml" for ds in [project["dependencies"],
               *project["optional-dependencies"].values()] for d in ds) == 1  # listed once


def test_the_sdist_carries_what_its_tests_need(tmp_path):
    """Issue 34: an sdist's tests run from it alone (conftest, helpers, fixtures, sample logs,
    the benches and fuzz harness some tests run), and it holds no bytecode."""
    pytest.importorskip("build")
    import shutil
    import tarfile

    # from a copy without the checkout's own build state: setuptools reuses an egg-info's file list
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "*.egg-info", "build", "dist", "forensics_data", ".*_cache", ".hypothesis", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--skip-dependency-check",
                        "-o", str(tmp_path), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    need = {"tests/conftest.py", "tests/helpers.py", "forensics_config.yaml", "Makefile", "LICENSE",
            "fuzz/__init__.py", "bench/_common.py", "context_forensics/py.typed",
            "mkdocs.yml", "docs/index.md", "docs/api.md", "docs/commands/audit.md"}  # the docs tests read
    assert need <= names, need - names
    assert any(n.startswith("tests/fixtures/") for n in names) and any(n.startswith("sample_logs/") for n in names)
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def test_importing_the_api_loads_nothing_heavy():
    code = ("import sys, context_forensics\n"
            "print(','.join(m for m in ('torch', 'sentence_transformers', 'tiktoken', 'numpy', 'typer', 'rich')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------- errors are the CLI's


def test_errors_are_ctxf_errors_with_the_cli_exit_codes(tmp_path):
    db = tmp_path / "s.db"
    with pytest.raises(UsageError, match="gpt-4o") as e:
        ctxf.replay(OVERFLOW, model="gpt4o", db=db)
    assert int(e.value.exit_code) == 2
    assert not db.exists() or ctxf.open_store(db).sessions() == []  # nothing ingested before the check
    with pytest.raises(NotFoundError):
        ctxf.replay("no-such-session", db=db)
    with pytest.raises(UsageError, match="two runs"):
        ctxf.diverge("only-a", db=db)
    with pytest.raises(UsageError, match="two runs"):
        ctxf.diverge("a", "b", task="t", db=db)
    with pytest.raises(ConfigError, match="unknown key"):
        ctxf.open_store(db, config={"analysis_thresholds": {"no_such": 1}})
    with pytest.raises(UsageError, match="unknown rule"):
        ctxf.audit(OVERFLOW, fail_on="no_such_rule", db=db)
    with ctxf.open_store(db) as ws:
        with pytest.raises(UsageError, match="not both"):
            ctxf.replay(OVERFLOW, store=ws, db=db)
        with pytest.raises(UsageError, match="no facts"):
            ctxf.facts(OVERFLOW, [], store=ws)
        with pytest.raises(UsageError, match="out of range"):
            ctxf.window(OVERFLOW, 99, store=ws)
        one = ctxf.facts(OVERFLOW, "Do not touch the tests.", store=ws)  # one text is one fact
        assert [f.fact for f in one.facts] == ["Do not touch the tests."]


def test_a_store_passed_in_stays_open_and_its_config_is_used(tmp_path):
    config = {"model_mappings": {"tiny": {"base": "gemma-7b", "context_limit": 4000}}}
    with ctxf.open_store(tmp_path / "s.db", config=config) as ws:
        ing = ctxf.ingest(SAMPLES, recursive=True, store=ws)
        assert ing.exit_code == 0 and len(ing.sessions) == len(ws.sessions()) == 5
        rep = ctxf.replay(OVERFLOW, model="tiny", store=ws)  # the mapping is known through ws
        assert rep.replay.to_dict()["limit"] == 4000
        again = ctxf.ingest(SAMPLES, recursive=True, store=ws)  # still open: re-ingest adds nothing
        assert again.to_dict()["totals"]["ingested"] == 0 and again.sessions == ing.sessions


def test_an_in_memory_store_is_audited_on_its_own_connection(tmp_path):
    with ctxf.open_store(":memory:") as ws:
        memory = ctxf.audit(SAMPLES, store=ws)
        with pytest.raises(UsageError, match="worker processes"):
            ctxf.audit(store=ws, workers=2)
    on_file = ctxf.audit(SAMPLES, db=tmp_path / "s.db")
    assert memory.totals["sessions"] == 5 and memory.errors == []
    assert _scrub(memory.to_dict()) == _scrub(on_file.to_dict())


# ---------------------------------------------------------------- to_dict() == --json


def test_every_call_matches_its_command_on_sample_logs(tmp_path, monkeypatch):
    # Two stores fed the same calls in the same order: the embedding cache's hit counts (part of
    # the JSON) then agree too.
    from context_forensics.embed import HashingEmbedder

    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: HashingEmbedder())
    db, cli_db = tmp_path / "api.db", tmp_path / "cli.db"
    code, out = _cli(cli_db, "ingest", str(SAMPLES), "--recursive")
    ing = ctxf.ingest([SAMPLES], recursive=True, db=db)
    assert code == ing.exit_code == 0
    same(ing, out)
    sid = ctxf.ingest(OVERFLOW, db=db).sessions[0]
    calls = [
        (lambda: ctxf.replay(sid, db=db), ["replay", sid]),
        (lambda: ctxf.replay(OVERFLOW, model=["gemma-7b", "gpt-4o-mini"], db=db),
         ["replay", str(OVERFLOW), "-m", "gemma-7b", "-m", "gpt-4o-mini"]),
        (lambda: ctxf.replay(sid, policy="sliding_window", params={"max_messages": 4}, db=db),
         ["replay", sid, "--policy", "sliding_window", "--param", "max_messages=4"]),
        (lambda: ctxf.window(sid, 7, model="gemma-7b", db=db), ["replay", sid, "--at", "7", "-m", "gemma-7b"]),
        (lambda: ctxf.window(sid, 7, model=["gemma-7b", "gpt-4o"], db=db),
         ["replay", sid, "--at", "7", "-m", "gemma-7b", "-m", "gpt-4o"]),
        (lambda: ctxf.facts(sid, ["Do not touch the tests."], model="gemma-7b", db=db),
         ["facts", sid, "--fact", "Do not touch the tests.", "-m", "gemma-7b"]),
        (lambda: ctxf.drift(sid, db=db), ["drift", sid]),
        (lambda: ctxf.drift(sid, goal="tiered discounts", model="gemma-7b", db=db),
         ["drift", sid, "--goal", "tiered discounts", "-m", "gemma-7b"]),
        (lambda: ctxf.diverge(task="acme__csvtool-42", db=db), ["diverge", "--task", "acme__csvtool-42"]),
        (lambda: ctxf.divergences(db=db), ["diverge", "--all-tasks"]),
        (lambda: ctxf.view(sid, model=["gemma-7b"], facts=["Do not touch the tests."], drift=True, db=db),
         ["view", sid, "-m", "gemma-7b", "--fact", "Do not touch the tests.", "--drift"]),
    ]
    for call, args in calls:
        code, out = _cli(cli_db, *args)
        assert code == 0, args
        same(call(), out)
    code, out = _cli(cli_db, "audit", str(SAMPLES))
    result = ctxf.audit(SAMPLES, db=db)
    assert code == result.exit_code
    same(result, out)
    assert result.ingest is not None and result.totals["sessions"] == 5


def _two_stores(tmp_path: Path) -> tuple[Path, Path]:
    """The corpus and sample_logs/ ingested into an API store and a CLI store."""
    if not CORPUS.exists():
        pytest.skip(f"corpus not found at {CORPUS}")
    db, cli_db = tmp_path / "api.db", tmp_path / "cli.db"
    ing = ctxf.ingest([CORPUS, SAMPLES], recursive=True, db=db)
    code, out = _cli(cli_db, "ingest", str(CORPUS), str(SAMPLES), "--recursive")
    assert code == ing.exit_code
    same(ing, out)
    return db, cli_db


@pytest.mark.integration
def test_replay_and_window_match_the_cli_over_the_corpus(tmp_path):
    db, cli_db = _two_stores(tmp_path)
    with ctxf.open_store(db) as ws:
        rows = ws.sessions()
        assert len(rows) > 100
        for row in rows:
            sid = row["id"]
            code, out = _cli(cli_db, "replay", sid)
            assert code == 0, sid
            same(ctxf.replay(sid, store=ws), out)
            steps = out["replays"][0]["summary"]["steps"]
            if steps:
                k = (steps + 1) // 2
                code, out = _cli(cli_db, "replay", sid, "--at", str(k), "-m", "gemma-7b")
                assert code == 0, sid
                same(ctxf.window(sid, k, model="gemma-7b", store=ws), out)


@pytest.mark.integration
def test_facts_drift_diverge_and_audit_match_the_cli_over_the_corpus(tmp_path, minilm):
    db, cli_db = _two_stores(tmp_path)
    with ctxf.open_store(db) as ws:
        first_of_format: dict[str, str] = {}
        for row in ws.sessions():
            if row["step_count"]:
                first_of_format.setdefault(row["format"], row["id"])
        assert len(first_of_format) >= 12  # 14 formats with model calls today
        for fmt, sid in sorted(first_of_format.items()):  # the real MiniLM, a session per format
            code, suggested = _cli(cli_db, "facts", "suggest", sid, "--limit", "2")
            facts = [s["text"] for s in suggested["suggestions"]] or ["the task"]
            code, out = _cli(cli_db, "facts", sid, *[a for f in facts for a in ("--fact", f)])
            assert code == 0, fmt
            same(ctxf.facts(sid, facts, store=ws), out)
            code, out = _cli(cli_db, "drift", sid)
            assert code == 0, fmt
            same(ctxf.drift(sid, store=ws), out)
        code, out = _cli(cli_db, "diverge", "--all-tasks")
        pairs = ctxf.divergences(store=ws)
        same(pairs, out)
        assert pairs.pairs, "the corpus has tasks with both outcomes"
        for p in pairs.pairs[:6]:
            code, out = _cli(cli_db, "diverge", p["a"], p["b"])
            assert code == 0
            result = ctxf.diverge(p["a"], p["b"], store=ws)
            same(result, out)
            assert result.diverged == (out["divergence"] is not None)
    folders = sorted(p for p in CORPUS.iterdir() if p.is_dir())[:4]
    code, out = _cli(cli_db, "audit", *map(str, folders))
    result = ctxf.audit(folders, db=db)
    assert code == result.exit_code
    same(result, out)


# ---------------------------------------------------------------- the docs' worked example (docs/api.md)


def _readme_example() -> tuple[str, str]:
    section = API_PAGE
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    output = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    return code, output


def test_the_api_page_example_prints_what_the_page_says(tmp_path, minilm):
    code, expected = _readme_example()
    (tmp_path / "sample_logs").symlink_to(SAMPLES)  # the example runs from a checkout's root
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected
    assert "gone: 'Do not touch the tests.'" in out.stdout  # the constraint the window lost
