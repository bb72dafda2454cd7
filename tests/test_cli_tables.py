"""Issue 13, "Terminal output": tables at 80, 120 and 200 columns, and piped.

An id, a task or a model name is what other commands take: it is shown whole on one line,
never cut ("astropy__astropy-76…") nor folded into slices; a column empty in every row is
left out; an ingest path is never sliced beside its figures; piped output follows $COLUMNS,
else is wide enough that no row wraps; when replay must leave columns out, the all-zero ones
go first (a compaction read "evicted 0" while its "summ." column was the one dropped).
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from helpers import FIXTURES

WIDTHS = (80, 120, 200)
LONG_MODEL = "litellm_proxy/claude-3-5-sonnet-20241022"
RUNS = (  # (instance id = the task, model)
    ("astropy__astropy-7671-with-a-long-instance-name", LONG_MODEL),
    ("django__django-11815", "openai/gpt-5-mini"),
)


def run(monkeypatch, width: int | None, *args):
    if width is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(width))
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _mini_traj(task: str, model: str) -> dict:
    """A small mini-swe-agent trajectory (the shape of tests/fixtures/mini_swe_agent/v1)."""
    return {
        "instance_id": task,
        "info": {"exit_status": "Submitted", "config": {"model": {"model_name": model}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "<pr_description>Fix the reader</pr_description>"},
            {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode><output>setup.py</output>"},
            {"role": "assistant",
             "content": "THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
        ],
        "trajectory_format": "mini-swe-agent-1",
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tables")
    for task, model in RUNS:
        (root / f"{task}.traj.json").write_text(json.dumps(_mini_traj(task, model)))
    db = root / "s.db"
    r = CliRunner().invoke(app, ["ingest", str(root), "-r", "--db", str(db), "--json"])
    assert r.exit_code == 0, r.stderr
    return db


def _sessions(monkeypatch, db) -> list[dict]:
    return json.loads(run(monkeypatch, 120, "sessions", "--db", db, "--json").stdout)["sessions"]


def _whole_on_a_line(out: str, value: str) -> bool:
    return any(re.search(rf"(^|\s){re.escape(value)}(\s|$)", line) for line in out.splitlines())


# ------------------------------------------------------------------------- item 1: sessions


@pytest.mark.parametrize("width", WIDTHS)
def test_sessions_shows_ids_tasks_and_models_whole(monkeypatch, store, width):
    sessions = _sessions(monkeypatch, store)
    assert {s["task"] for s in sessions} == {t for t, _ in RUNS}
    out = run(monkeypatch, width, "sessions", "--db", store).stdout
    assert all(len(line) <= width for line in out.splitlines()), out
    for s in sessions:
        for value in (s["id"], s["task"], s["model"]):
            assert _whole_on_a_line(out, value), (value, out)
    assert "…" not in out  # nothing is cut: a title that only repeats the task is not shown again
    if width >= 200:  # room for everything: each session on one line with its id, model and task
        for s in sessions:
            assert any(s["id"] in line and s["model"] in line and s["task"] in line for line in out.splitlines())
        assert "on a wider terminal" not in out


def test_sessions_leaves_out_columns_empty_in_every_row(monkeypatch, tmp_path):
    db = tmp_path / "s.db"
    chat = FIXTURES / "openai_chat" / "messages_list.json"  # no agent, no task
    assert run(monkeypatch, 120, "ingest", chat, "--db", db).exit_code == 0
    (row,) = _sessions(monkeypatch, db)
    assert not row["task"] and not row["agent"]
    for width in WIDTHS:
        out = run(monkeypatch, width, "sessions", "--db", db).stdout
        header = next(line for line in out.splitlines() if line.split()[:1] == ["id"]).split()
        assert "task" not in header and "agent" not in header, out
        assert "format" in header and "steps" in header


@pytest.mark.parametrize("width, below", ((120, ["model"]), (80, ["model", "task"])))
def test_sessions_moves_a_value_that_does_not_fit_onto_its_own_line(monkeypatch, store, width, below):
    """The model, then the task, go under their row, whole, rather than being folded."""
    sessions = _sessions(monkeypatch, store)
    out = run(monkeypatch, width, "sessions", "--db", store).stdout
    lines = out.splitlines()
    for s in sessions:
        at = next(i for i, line in enumerate(lines) if line.split()[:1] == [s["id"]])
        for key in ("model", "task"):
            assert (s[key] in lines[at].split()) == (key not in below), (key, out)
        assert [line.split() for line in lines[at + 1:at + 1 + len(below)]] == [[k, s[k]] for k in below]


# --------------------------------------------------------------------- item 2: ingest paths


@pytest.mark.parametrize("width", WIDTHS)
def test_ingest_summary_shows_each_path_whole_relative_to_the_cwd(monkeypatch, tmp_path, width):
    work = tmp_path / "work"
    deep = work / "runs" / "2026-12-01" / "nightly-evaluation-batch-with-a-long-name" / "swebench-verified"
    deep.mkdir(parents=True)
    for task, model in RUNS:
        (deep / f"{task}.traj.json").write_text(json.dumps(_mini_traj(task, model)))
    monkeypatch.chdir(work)
    r = run(monkeypatch, width, "ingest", "runs", "-r", "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    for task, _ in RUNS:
        rel = os.path.join("runs", "2026-12-01", "nightly-evaluation-batch-with-a-long-name", "swebench-verified",
                           f"{task}.traj.json")
        assert len(rel) > 80 - 6
        assert any(line.split()[:1] == [rel] for line in lines), (rel, r.stdout)  # whole, at a line's start
        assert str(work) not in r.stdout  # relative to the working directory
    if width >= 200:  # everything fits: a table, a row per file with its figures
        assert any(line.split()[:2] == [rel, "mini_swe_agent"] for line in lines)


# ------------------------------------------------------------------------- item 3: the width


def test_stdout_console_follows_columns_then_the_terminal_else_is_wide(monkeypatch):
    from context_forensics.render.common import WIDE, is_natural, stdout_console

    monkeypatch.setenv("COLUMNS", "77")
    assert stdout_console().width == 77 and not is_natural(stdout_console())

    monkeypatch.delenv("COLUMNS")
    console = stdout_console()  # pytest's captured stdout is no terminal: piped
    assert not console.is_terminal and console.width == WIDE and is_natural(console)

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdout", Tty())
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=0: os.terminal_size((97, 30)))
    console = stdout_console()
    assert console.is_terminal and console.width == 97 and not is_natural(console)


def test_piped_sessions_without_columns_keeps_every_row_on_one_line(monkeypatch, store):
    sessions = _sessions(monkeypatch, store)
    out = run(monkeypatch, None, "sessions", "--db", store).stdout
    rows = [line for line in out.splitlines() if line.split()[:1] and line.split()[0] in {s["id"] for s in sessions}]
    assert len(rows) == len(sessions)
    for s in sessions:  # `ctxf sessions | grep ID` gets the whole row: id, format, agent, model, task, title
        (row,) = [line for line in rows if line.split()[0] == s["id"]]
        for value in (s["format"], s["agent"], s["model"], s["task"], s["title"]):
            assert value in row, (value, row)
    assert "on a wider terminal" not in out
    assert max(len(line) for line in out.splitlines()) < 300  # as wide as the rows, not WIDE


def test_piped_panels_take_the_width_they_need(monkeypatch, tmp_path):
    """A view of expanding panels (diverge) piped without $COLUMNS is not drawn WIDE columns wide."""
    samples = Path(__file__).parent.parent / "sample_logs" / "pair-csv-bom"
    db = tmp_path / "s.db"
    ingest = json.loads(run(monkeypatch, 120, "ingest", samples, "-r", "--db", db, "--json").stdout)
    a, b = (f["sessions"][0] for f in ingest["files"] if f["sessions"])
    r = run(monkeypatch, None, "diverge", a, b, "--db", db)
    assert r.exit_code == 0, r.stderr
    assert "╭" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) < 1000


# ------------------------------------------------------------------------ item 4: replay


def _step_table(out: str) -> tuple[list[str], list[list[str]]]:
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["step", "seq"])
    header = lines[at].split()
    if "local" in header:  # "out" sits on the line above "local"
        header[header.index("local")] = "out local"
    rows = [line.split() for line in lines[at + 2:] if re.match(r"^\s+\d+\s", line)]
    return header, rows


@pytest.mark.parametrize("width", (80, 120, 200))
def test_replay_leaves_out_all_zero_columns_before_any_figure(monkeypatch, tmp_path, width):
    """The Claude Code fixture has a recorded compaction: 8 messages summarized, none evicted."""
    session = FIXTURES / "claude_code" / "session.jsonl"
    db = tmp_path / "s.db"
    data = json.loads(run(monkeypatch, 120, "replay", session, "--db", db, "--json").stdout)
    steps = data["replays"][0]["steps"]
    compaction = next(s for s in steps if any(e["type"] == "compaction" for e in s["events"]))
    assert compaction["counts"]["summarized"] > 0 and all(s["counts"]["evicted"] == 0 for s in steps)
    out = run(monkeypatch, width, "replay", session, "--db", db).stdout
    header, rows = _step_table(out)
    note = " ".join(out.split())
    dropped = re.search(r"left out at this width \(([^)]*)\)", note)
    dropped_names = dropped.group(1).split(", ") if dropped else []
    shown_steps = {int(r[0]) for r in rows}
    keys = {"kept": "kept", "evicted": "evicted", "cleared": "cleared", "summ.": "summarized",
            "out local": "outside_local"}
    zero = {h for h, k in keys.items() if all(s["counts"][k] == 0 for s in steps if s["step"] in shown_steps)}
    assert "summ." in header  # the compaction's figure is never the one left out here
    for name in dropped_names:  # nothing with a figure went while a column of zeros stayed
        if name in keys and name not in zero:
            assert not (zero & set(header)), (name, header)
    if width >= 200:
        assert not dropped_names
    if width == 80:
        assert "evicted" not in header and "evicted" in dropped_names
        row = next(r for r in rows if int(r[0]) == compaction["step"])
        assert row[header.index("summ.")] == str(compaction["counts"]["summarized"])
