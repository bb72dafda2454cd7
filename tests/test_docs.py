"""The README documents every command, every format and every exit code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import typer.main

from context_forensics.cli import app
from context_forensics.errors import ExitCode
from context_forensics.importers import format_names

README = (Path(__file__).parent.parent / "README.md").read_text()


def _commands(group, prefix=""):
    cmd = typer.main.get_command(group)
    for name, sub in cmd.commands.items():
        if hasattr(sub, "commands"):
            for subname in sub.commands:
                yield f"{prefix}{name} {subname}"
        else:
            yield f"{prefix}{name}"


def test_every_command_is_in_the_readme_and_has_help():
    cmd = typer.main.get_command(app)
    for name in _commands(app):
        assert f"ctxf {name}" in README, f"`ctxf {name}` missing from README"
    for name, sub in cmd.commands.items():
        assert sub.help, f"{name} has no help text"


def test_every_format_is_in_the_readme():
    for name in format_names():
        assert f"| `{name}` |" in README, f"format {name} missing from the README formats table"


def test_every_exit_code_is_documented():
    for code in ExitCode:
        assert re.search(rf"^\| {int(code)} \|", README, re.M), f"exit code {int(code)} not in README"


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
