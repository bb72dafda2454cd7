"""Human views at the widths people's terminals have: nothing cut, no figure lost.

Rich shrinks every column alike when a table is too wide, which on an 80-column terminal
printed "5,8…" for 5,835 and split headers mid-word; render.fit_columns lays tables out instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from helpers import FIXTURES

SAMPLES = Path(__file__).parent.parent / "sample_logs"
OVERFLOW = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"
WIDTHS = (60, 80, 100, 160)
CUT_NUMBER = re.compile(r"\d[\d,.%]*…")  # a figure rich ran out of room for


def run(monkeypatch, width, *args):
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("NO_COLOR", "1")
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("widths") / "store.db"
    r = CliRunner().invoke(app, ["ingest", str(SAMPLES), "-r", "--db", str(path)])
    assert r.exit_code == 0, r.stderr
    return path


@pytest.mark.parametrize("width", WIDTHS)
def test_replay_step_table_keeps_every_figure_whole(monkeypatch, db, width):
    data = json.loads(run(monkeypatch, 120, "replay", OVERFLOW, "--model", "gemma-7b", "--db", db, "--json").stdout)
    steps = data["replays"][0]["steps"]
    r = run(monkeypatch, width, "replay", OVERFLOW, "--model", "gemma-7b", "--db", db)
    assert r.exit_code == 0, r.stderr
    assert not CUT_NUMBER.search(r.stdout), r.stdout
    assert all(len(line) <= width for line in r.stdout.splitlines())
    rows = [line.split() for line in r.stdout.splitlines() if re.match(r"^\s+\d+\s", line)]
    shown = {row[0]: row for row in rows}
    loss = [s for s in steps if s["newly_lost"]]
    assert loss, "the sample loses messages under gemma-7b"
    for s in loss:  # the steps that lost something are always shown, with their window and loss list
        row = shown[str(s["step"])]
        assert f"{s['window_tokens']:,}" in row and f"{s['utilization']:.0%}" in row
        assert ",".join(map(str, s["newly_lost"][:6])) in row
    if width >= 160:
        assert "left out at this width" not in r.stdout
    else:
        assert "left out at this width" in r.stdout


@pytest.mark.parametrize("width", WIDTHS)
def test_replay_summary_names_every_model_whole(monkeypatch, db, width):
    r = run(monkeypatch, width, "replay", OVERFLOW, "--model", "gemma-7b", "--model", "gpt-4o-mini", "--db", db)
    assert r.exit_code == 0, r.stderr
    summary = r.stdout[r.stdout.index("summary"):]
    assert re.search(r"^\s+gemma-7b\s+", summary, re.M) and re.search(r"^\s+gpt-4o-mini\s+", summary, re.M)
    assert not CUT_NUMBER.search(r.stdout)


@pytest.mark.parametrize("width", WIDTHS)
def test_audit_table_shows_every_rule_and_session(monkeypatch, db, width):
    config = FIXTURES / "audit" / "small_window.yaml"
    report = json.loads(run(monkeypatch, 120, "audit", SAMPLES, "--db", db, "--config", config, "--json").stdout)
    r = run(monkeypatch, width, "audit", SAMPLES, "--db", db, "--config", config)
    assert r.exit_code == 3
    out = r.stdout
    assert all(len(line) <= width for line in out.splitlines())
    assert not CUT_NUMBER.search(out)
    for s in report["sessions"]:
        assert out.count(s["id"]) >= 1
    legend = " ".join(out.split())
    for rule in report["rules"]:  # each rule has a column, named in the legend when its label is short
        assert rule["name"] in legend
    assert "⚑" in out  # no_overflow fails the build in this config
    failing = [res for s in report["sessions"] for res in s["results"] if res["status"] == "fail"]
    assert failing
    for res in failing:  # each failure shows its step, beside the figure or folded under it
        assert f"@{res['step']}" in out


@pytest.mark.parametrize("width", (60, 80, 120, 160))
def test_sessions_list_keeps_ids_whole(monkeypatch, db, width):
    sessions = json.loads(run(monkeypatch, 120, "sessions", "--db", db, "--json").stdout)["sessions"]
    r = run(monkeypatch, width, "sessions", "--db", db)
    out = r.stdout
    assert all(len(line) <= width for line in out.splitlines())
    assert all(s["id"] in out for s in sessions)  # the id is what every other command takes
    lines = out.splitlines()
    header = next(line for line in lines if line.split()[:1] == ["id"])
    names = header.split()
    starts = [header.index(f" {n} ") + 1 if f" {n} " in header else header.index(n) for n in names]
    body = [line for line in lines[lines.index(header) + 2:] if line.strip()][:-1]  # without the note
    rows: list[list[str]] = []  # a row and the lines under it (a model or task moved there)
    for line in body:
        if line[2:14].strip():  # an id starts a row
            rows.append([])
        rows[-1].append(line)

    def cell(row: list[str], col: str) -> str:  # a cell of the row's own line
        i = names.index(col)
        lo, hi = starts[i], starts[i + 1] if i + 1 < len(starts) else None
        return row[0][lo:hi].strip()

    by_id = {r[0].split()[0]: r for r in rows}
    for s in sessions:
        for key in ("model", "task"):  # whole on one line: in its column, or on a line of its own
            if s[key] and key in names:
                assert cell(by_id[s["id"]], key) == s[key], (key, s[key])
            elif s[key]:
                assert [key, s[key]] in [line.split() for line in by_id[s["id"]][1:]], (key, s[key])
    assert "task" in names and ("model" in names or width < 100)
    note = " ".join(out.split())
    assert ("title" in names) == ("titles on a wider terminal" not in note)
    if width >= 160:
        assert "title" in header.split() and "format" in header.split()


@pytest.mark.parametrize("width", (80, 120))
def test_ingest_summary_folds_paths_and_keeps_counts(monkeypatch, tmp_path, width):
    monkeypatch.chdir(SAMPLES.parent)
    r = run(monkeypatch, width, "ingest", "sample_logs", "-r", "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.stderr
    assert all(len(line) <= width for line in r.stdout.splitlines())
    agent = "sample_logs/agent-overflow/shopcart-tiered-discounts.openai.json"
    if width < 100:  # a line per file, its figures under it: the path is never sliced
        lines = r.stdout.splitlines()
        at = next(i for i, line in enumerate(lines) if line.strip() == agent)
        assert re.search(r"openai_chat · ingested · 1 session\(s\) · 25 msgs · 0 skipped · 0 warn\.",
                         lines[at + 1])
        assert "sample_logs/pair-csv-bom/failure/acme__csvtool-42.traj.json" in r.stdout
    else:
        # the file column gives every path whole on its row (relative to the cwd), never folded
        column = [line.split()[0] for line in r.stdout.splitlines()
                  if line.startswith("  ") and line.split() and not line.strip().startswith(("file", "─"))]
        for path in (agent, "sample_logs/pair-csv-bom/failure/acme__csvtool-42.traj.json"):
            assert path in column
        # the agent run's counts, whole (skipped and warnings, all zero, are in the totals line)
        assert re.search(r"ingested\s+1\s+25(\s+0\s+0)?\s*$", r.stdout, re.M)


@pytest.mark.parametrize("width", (80, 160))
def test_ingest_summary_names_the_common_folder_once(monkeypatch, tmp_path, width):
    """Paths outside the working directory are shown under their common folder, named in the
    title: deep folders (a corpus, a CI workspace) left 13 columns to the path at 80."""
    deep = tmp_path / "runs" / "2026-12-01" / "nightly-evaluation-batch"
    for sub in ("agent-overflow", "drift-chat"):
        src = SAMPLES / sub
        dst = deep / sub
        dst.mkdir(parents=True)
        for f in src.iterdir():
            (dst / f.name).write_bytes(f.read_bytes())
    work = tmp_path / "elsewhere"
    work.mkdir()
    monkeypatch.chdir(work)
    r = run(monkeypatch, width, "ingest", deep, "-r", "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert f"pathsunder{deep}" in "".join(out.split())  # named once (folded at the edge if long)
    assert all(len(line) <= width for line in out.splitlines())
    joined = "".join(out.split())  # folding may split a path, never drop a character of it
    for rel in ("agent-overflow/shopcart-tiered-discounts.openai.json",
                "drift-chat/cover-letter-drift.sharegpt.json"):
        assert rel in joined
    for fmt in ("openai_chat", "sharegpt", "anthropic_messages"):
        assert re.search(rf"(^|\s){fmt}(\s|$)", out, re.M), fmt  # a format name is never folded


@pytest.mark.parametrize("width", (60, 80, 120))
def test_models_table_keeps_model_and_policy_names_whole(monkeypatch, width):
    """A model name is what --model takes: at 80 columns 'claude-3-5-haiku' printed as
    'claude-3-5-' over 'haiku'. Columns that do not fit are dropped and named instead."""
    names = {m["name"]: m for m in json.loads(run(monkeypatch, 120, "models", "--json").stdout)["models"]}
    r = run(monkeypatch, width, "models")
    assert r.exit_code == 0
    assert all(len(line) <= width for line in r.stdout.splitlines())
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()
            if line.startswith(" ") and line.split() and line.split()[0] in names}
    assert set(rows) == set(names)
    for name, row in rows.items():
        assert f"{names[name]['context_limit']:,}" in row
        if width >= 80:  # below, a long policy name (local_global_attention) may fold
            assert names[name]["policy"] in row
            assert names[name]["tokenizer"] in row  # what the counts are worth (issue 15): kept at 80
