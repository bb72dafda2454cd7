"""Shared test helpers: parse a file through the importer registry, find the corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from context_forensics import importers
from context_forensics.importers.base import ImportContext

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
CORPUS = Path(os.environ.get("CTXF_CORPUS", HERE.parent.parent / "shared" / "corpus"))
SAMPLES = HERE.parent / "sample_logs"
OVERFLOW = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"  # an agent run gemma-7b evicts from
PAIR_GOOD = SAMPLES / "pair-csv-bom" / "success" / "acme__csvtool-42.traj.json"  # a success and a failure
PAIR_BAD = SAMPLES / "pair-csv-bom" / "failure" / "acme__csvtool-42.traj.json"  # of one task
# a real Claude Code session with a recorded compaction (skip when the corpus is absent)
COMPACTED = CORPUS / "claude-code-jsonl" / "spotter" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


def corpus(rel: str) -> Path:
    """A path in ../shared/corpus, or skip the test when the corpus is absent."""
    p = CORPUS / rel
    if not p.exists():
        pytest.skip(f"corpus file not available: {p}")
    return p


def parse(path: Path, fmt: str | None = None, **options):
    """Parse a path with the named (or detected) importer; return (format, sessions, ctx).

    Each session's messages are materialised into a list.
    """
    imp = importers.get(fmt) if fmt else importers.detect(path)
    assert imp is not None, f"no importer detected for {path}"
    ctx = ImportContext(path=path, options=options)
    sessions = []
    for s in imp.parse(path, ctx):
        s.messages = list(s.messages)
        sessions.append(s)
    return imp.name, sessions, ctx


def parse_all(imp, path):
    """Every session ``imp`` reads from ``path``, messages as lists, and the finished context."""
    from context_forensics.importers import ImportContext

    ctx = ImportContext(path=path)
    sessions = list(imp.parse(path, ctx))
    for s in sessions:
        s.messages = list(s.messages)
    ctx.finish()
    return sessions, ctx


def cli(monkeypatch, *args, width: int = 120):
    """Run ``ctxf ARGS`` in-process at ``width`` columns, without colour; the result has
    ``exit_code``, ``stdout`` and ``stderr``."""
    from typer.testing import CliRunner

    from context_forensics.cli import app

    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("NO_COLOR", "1")
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def run(*args, width: int = 100):
    """Run ``ctxf ARGS`` in-process at ``width`` columns, without monkeypatch (the environment is
    the runner's); the result has ``exit_code``, ``stdout`` and ``stderr``."""
    from typer.testing import CliRunner

    from context_forensics.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False,
                              env={"COLUMNS": str(width), "NO_COLOR": "1"})


def replay_json(path, db, *args) -> dict:
    """The first replay of ``ctxf replay PATH --db DB --json ARGS``."""
    import json

    r = run("replay", path, "--db", db, "--json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["replays"][0]


def cline_without_ranges(tmp_path: Path) -> Path:
    """The corpus Cline task ``Cline-Xray/task_sample`` (Cline 3.57, ui_messages.json only, four
    truncations recorded as ``conversationHistoryDeletedRange``) with those records removed: a Cline
    log whose recorded prompt falls while its history only grows. Built in ``tmp_path`` (skips
    when the corpus is absent); the corpus file is never copied into the repository."""
    import json

    src = corpus("cline/Cline-Xray/task_sample/ui_messages.json")
    items = json.loads(src.read_text(encoding="utf-8"))
    for item in items:
        item.pop("conversationHistoryDeletedRange", None)
    folder = tmp_path / "task_sample"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ui_messages.json").write_text(json.dumps(items), encoding="utf-8")
    return folder


# Root passes every permission check: a test of what a user cannot read runs ctxf as that user
# when the tests are not root, and as root without the capabilities that override file
# permissions (setpriv drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH) when they are.
NO_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def unprivileged() -> list[str]:
    """The command prefix that makes a child process bound by file permissions (skips the test
    when the tests run as root and the capabilities cannot be dropped)."""
    if os.geteuid() != 0:
        return []
    import shutil
    import subprocess

    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: cannot run ctxf as a user whom permissions bind")
    probe = subprocess.run([*NO_OVERRIDE, "sh", "-c", "test ! -w /proc/1/status"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("setpriv cannot drop the capabilities that override permissions here")
    return NO_OVERRIDE
