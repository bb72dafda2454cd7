"""Importers and policies as plugins (issue 32): the worked example in tests/plugin_example is
installed (pip, offline, into a folder on PYTHONPATH) and the real CLI, as a subprocess, lists
its importer and policy and ingests a file with it; a plugin that fails to load is one warning
naming it, and ctxf goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXAMPLE = HERE / "plugin_example"
ROOT = HERE.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--no-index", "--target", str(target), str(EXAMPLE)],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert r.returncode == 0, r.stderr
    return target


def ctxf(site: Path, *args: str, extra_path: str = "") -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (str(ROOT), str(site), extra_path) if p)  # this worktree's code first
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "context_forensics", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def test_the_installed_plugin_importer_is_listed_and_reads_a_file(site, tmp_path):
    r = ctxf(site, "formats", "--json")
    assert r.returncode == 0, r.stderr
    assert "tiny_transcript" in [f["name"] for f in json.loads(r.stdout)["formats"]], r.stdout
    log = tmp_path / "run.tiny"
    log.write_text("#tiny-transcript\nsystem: be brief\nuser: hi\nassistant: hello [tokens 12/3]\n")
    db = str(tmp_path / "c.db")
    r = ctxf(site, "ingest", str(log), "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)["files"][0]
    assert (f["format"], f["status"], f["messages"]) == ("tiny_transcript", "ingested", 3)
    r = ctxf(site, "show", str(log), "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert [m["role"] for m in shown["messages"]] == ["system", "user", "assistant"], shown


def test_the_installed_plugin_policy_replays(site, tmp_path):
    from helpers import OVERFLOW

    db = str(tmp_path / "c.db")
    r = ctxf(site, "replay", str(OVERFLOW), "--policy", "keep_all", "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    (rep,) = json.loads(r.stdout)["replays"]
    assert rep["policy"] == "keep_all" and rep["steps"], rep.keys()


def test_a_plugin_that_fails_to_load_is_one_warning_naming_it(site, tmp_path):
    broken = tmp_path / "broken"
    (broken / "ctxf_broken-0.1.dist-info").mkdir(parents=True)
    (broken / "ctxf_broken-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ctxf-broken\nVersion: 0.1\n")
    (broken / "ctxf_broken-0.1.dist-info" / "entry_points.txt").write_text(
        "[ctxf.importers]\nbroken_one = ctxf_broken_missing:Nope\n")
    r = ctxf(site, "formats", "--json", extra_path=str(broken))
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "importer plugin 'broken_one'" in r.stderr and "ctxf_broken_missing" in r.stderr, r.stderr
    assert "tiny_transcript" in r.stdout  # the other plugin still loads


def test_help_loads_no_plugin(site):
    r = ctxf(site, "--help")
    assert r.returncode == 0 and "warning" not in r.stderr
