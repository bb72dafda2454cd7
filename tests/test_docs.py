"""The docs (docs/, the site `mkdocs build` makes; README.md links into it) document every command,
every format and every exit code; the README keeps the exit codes' table too."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import typer.main

from context_forensics.cli import app
from context_forensics.errors import ExitCode
from context_forensics.importers import format_names

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
DOCS = "\n".join(p.read_text() for p in sorted((ROOT / "docs").rglob("*.md")))
FORMATS_PAGE = (ROOT / "docs" / "formats.md").read_text()
SCRIPTING_PAGE = (ROOT / "docs" / "scripting.md").read_text()


def _commands(group, prefix=""):
    cmd = typer.main.get_command(group)
    for name, sub in cmd.commands.items():
        if hasattr(sub, "commands"):
            for subname in sub.commands:
                yield f"{prefix}{name} {subname}"
        else:
            yield f"{prefix}{name}"


def test_every_command_is_in_the_docs_and_has_help():
    cmd = typer.main.get_command(app)
    for name in _commands(app):
        assert f"ctxf {name}" in DOCS, f"`ctxf {name}` missing from docs/"
    for name, sub in cmd.commands.items():
        assert sub.help, f"{name} has no help text"


def test_every_format_is_in_the_formats_page():
    for name in format_names():
        assert f"| `{name}` |" in FORMATS_PAGE, f"format {name} missing from the tables of docs/formats.md"


def test_every_exit_code_is_documented():
    for code in ExitCode:
        assert re.search(rf"^\| {int(code)} \|", README, re.M), f"exit code {int(code)} not in README"
        assert re.search(rf"^\| {int(code)} \|", SCRIPTING_PAGE,
                         re.M), f"exit code {int(code)} not in docs/scripting.md"


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from context_forensics.cli import app\n"
        "CliRunner().invoke(app, ['--help'])\n"
        "CliRunner().invoke(app, ['formats'])\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'tiktoken', 'numpy') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
