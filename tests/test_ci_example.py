"""The docs' "Use in CI" example (docs/commands/audit.md): its ctxf steps run as written, on sample_logs/."""

from __future__ import annotations

import re
import shlex
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from context_forensics.cli import app

ROOT = Path(__file__).parent.parent


def workflow() -> dict:
    page = (ROOT / "docs" / "commands" / "audit.md").read_text()
    block = re.search(r"## Use in CI.*?```yaml\n(.*?)```", page, re.S)
    assert block, "docs/commands/audit.md has no Use in CI workflow"
    return yaml.safe_load(block.group(1))


def ctxf_steps() -> list[list[str]]:
    steps = workflow()["jobs"]["audit"]["steps"]
    return [shlex.split(s["run"])[1:] for s in steps if str(s.get("run", "")).startswith("ctxf ")]


def test_the_workflow_names_ingest_audit_and_reports():
    commands = [c[0] for c in ctxf_steps()]
    assert commands == ["ingest", "audit"]
    audit = ctxf_steps()[1]
    assert "--junit" in audit and "--markdown" in audit and "--fail-on" in audit


@pytest.mark.integration
def test_the_example_commands_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXF_CONFIG", raising=False)
    shutil.copytree(ROOT / "sample_logs", tmp_path / "artifacts" / "sessions")
    runner = CliRunner()
    for args in ctxf_steps():
        r = runner.invoke(app, args, catch_exceptions=False)
        # The samples hold no overflow for their recorded models: the gate passes.
        assert r.exit_code == 0, (args, r.stdout, r.stderr)
    junit = ET.parse(tmp_path / "reports" / "ctxf.xml").getroot()
    assert len(junit.findall(".//testcase")) >= 5
    summary = (tmp_path / "reports" / "ctxf.md").read_text()
    assert summary.startswith("## ctxf audit") and "Divergences" in summary  # the csv-bom pair
