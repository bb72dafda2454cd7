"""`ctxf audit`: rules, exit codes, JUnit / Markdown / JSON outputs, workers."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.config.audit_rules import parse_audit
from context_forensics.errors import ConfigError
from helpers import FIXTURES

SAMPLES = Path(__file__).parent.parent / "sample_logs"
CONFIG = FIXTURES / "audit" / "small_window.yaml"
OVERFLOW = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture()
def db(tmp_path):
    return tmp_path / "store.db"


def by_session(report):
    return {s["source"].rsplit("/", 1)[-1]: {r["rule"]: r for r in s["results"]} for s in report["sessions"]}


def test_audit_findings_and_exit_code(db, tmp_path):
    junit, md = tmp_path / "out" / "junit.xml", tmp_path / "out" / "summary.md"
    r = run("audit", SAMPLES, "--db", db, "--config", CONFIG, "--json", "--junit", junit, "--markdown", md)
    assert r.exit_code == 3, r.stderr  # no_overflow is marked fail: true and the overflow sample breaks it
    report = json.loads(r.stdout)
    assert report["version"] == 1 and report["exit_code"] == 3
    res = by_session(report)
    over = res["shopcart-tiered-discounts.openai.json"]
    assert over["no_overflow"]["status"] == "fail" and over["no_overflow"]["step"] >= 1
    assert over["no_overflow"]["detail"]["model"] == "gemma-7b" and over["no_overflow"]["detail"]["policy"] == "reject"
    assert over["max_utilization"]["status"] == "fail" and over["max_utilization"]["figure"] > 0.8
    assert over["max_tool_output_share"]["status"] == "fail"
    for name, rules in res.items():
        if name != "shopcart-tiered-discounts.openai.json":
            assert {r["status"] for r in rules.values()} == {"pass"}, name
    assert report["totals"]["failing"] == 1  # only the fail: true rule counts

    # JUnit: well-formed, one testcase per session × rule, failures carry figure and step
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    assert len(cases) == 5 * 5
    failures = root.findall(".//failure")
    assert len(failures) == 3 and all("step" in f.get("message") for f in failures)
    assert "| session |" in md.read_text() and "❌" in md.read_text()


def test_fail_on_changes_only_the_exit_code(db, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG.read_text().replace("fail: true", "fail: false"))
    r = run("audit", SAMPLES, "--db", db, "--config", cfg, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["totals"]["fail"] == 3
    r = run("audit", "--db", db, "--config", cfg, "--json", "--fail-on", "max_tool_output_share")
    assert r.exit_code == 3
    r = run("audit", "--db", db, "--config", cfg, "--fail-on", "no_such_rule")
    assert r.exit_code == 2 and "unknown rule" in r.stderr


def test_workers_give_the_same_report_in_the_same_order(db):
    one = run("audit", SAMPLES, "--db", db, "--config", CONFIG, "--json")
    two = run("audit", SAMPLES, "--db", db, "--config", CONFIG, "--json", "--workers", "2")
    three = run("audit", "--db", db, "--config", CONFIG, "--json", "--workers", "2")
    assert json.loads(two.stdout)["sessions"] == json.loads(three.stdout)["sessions"]
    assert json.loads(one.stdout)["sessions"] == json.loads(two.stdout)["sessions"]


def test_unreadable_input_is_exit_1(db, tmp_path):
    # No line of it parses (a JSONL with one good line among bad ones is read, with a warning).
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "conversations": [{"from": "human"\n{"oops"\n{"more": 1\n')
    r = run("audit", bad, OVERFLOW, "--db", db, "--config", CONFIG)
    assert r.exit_code == 1


def test_human_view(db):
    r = run("audit", SAMPLES, "--db", db, "--config", CONFIG)
    assert "fails the build" in r.stdout and "overflow = no_overflow" in " ".join(r.stdout.split())


@pytest.mark.parametrize("raw, key, needle", [
    ({"rules": {"nope": {}}}, "audit.rules.nope", "known rules"),
    ({"rules": {"max_compactions": {"max": -1}}}, "audit.rules.max_compactions.max", "≥ 0"),
    ({"rules": {"max_drift": {"verdict": "BAD"}}}, "audit.rules.max_drift.verdict", "CRITICAL"),
    ({"rules": {"no_overflow": {"fail": "yes"}}}, "audit.rules.no_overflow.fail", "true or false"),
    ({"rules": {"max_utilization": {"treshold": 1}}}, "audit.rules.max_utilization.treshold", "allowed keys"),
    ({"extra": 1}, "audit.extra", "allowed keys: rules"),
])
def test_audit_config_errors(raw, key, needle):
    with pytest.raises(ConfigError) as e:
        parse_audit(raw, "cfg.yaml")
    assert f"cfg.yaml: {key}" in str(e.value) and needle in str(e.value)


def test_config_check_validates_the_audit_section(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("audit:\n  rules:\n    max_compactions: {max: many}\n")
    r = run("config", "check", "--config", cfg)
    assert r.exit_code == 2 and "audit.rules.max_compactions.max" in r.stderr


def test_html_report_is_self_contained_and_well_formed(db, tmp_path):
    out = tmp_path / "r.html"
    r = run("report", OVERFLOW, "--html", out, "--db", db, "--model", "gemma-7b")
    assert r.exit_code == 0, r.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    import re

    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing to fetch
    assert "<metadata>" not in page
    assert "<script" not in page
    from html.parser import HTMLParser

    class Check(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack = []

        def handle_starttag(self, tag, attrs):
            if tag not in ("meta", "br", "img", "input", "link", "hr", "path", "use", "rect", "line", "circle",
                           "ellipse", "polyline", "polygon", "stop"):
                self.stack.append(tag)

        def handle_endtag(self, tag):
            if tag in ("path", "use", "rect", "line", "circle", "ellipse", "polyline", "polygon", "stop"):
                return
            assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> after {self.stack[-3:]}"
            self.stack.pop()

    c = Check()
    c.feed(page)
    c.close()
    assert c.stack == []
    assert "gemma-7b" in page and "fullest step" in page


def test_html_report_renders_in_headless_chromium(db, tmp_path):
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian package: chromium)")
    out, shot = tmp_path / "r.html", tmp_path / "r.png"
    assert run("report", OVERFLOW, "--html", out, "--db", db).exit_code == 0
    # Chromium puts a Unix socket under $TMPDIR and aborts when that path is too long for one.
    env = {**os.environ, "TMPDIR": "/tmp"} if os.path.isdir("/tmp") else None
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,1600", out.as_uri()], check=True, capture_output=True, timeout=120, env=env)
    from PIL import Image

    img = Image.open(shot).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 100  # not a blank page: dark text and chart lines on a light background
    colors = img.getcolors(maxcolors=1 << 16) or []
    assert len(colors) > 20


# ---------------------------------------------------------------- unreadable inputs (issue 9, item 19)

UNREADABLE = FIXTURES / "audit" / "unreadable"


def test_every_unreadable_input_is_a_row_of_the_json_junit_and_markdown_reports(db, tmp_path):
    """A folder with one good log, a crashed (truncated) log, a JSON file of no known layout and an
    export that is detected by its head but fails mid-parse: the two broken ones are errors in
    every report, the well-formed file of an unknown layout is listed as not read (a skipped
    JUnit testcase, never an error), the good one is audited, and the exit code is 1."""
    junit, md = tmp_path / "out" / "junit.xml", tmp_path / "out" / "summary.md"
    r = run("audit", UNREADABLE, "--db", db, "--config", UNREADABLE / "audit.yaml", "--json", "--junit", junit,
            "--markdown", md, "--fail-on", "max_compactions")
    assert r.exit_code == 1, r.stderr
    report = json.loads(r.stdout)
    assert report["exit_code"] == 1 and [s["source"].rsplit("/", 1)[-1] for s in report["sessions"]] == [
        "good.openai.json"]
    bad = {Path(e["path"]).name: e for e in report["errors"]}
    assert set(bad) == {"crashed.openai.json", "export-cut.json"}
    assert report["totals"]["unreadable"] == 2
    assert "invalid JSON at line 6, column 15" in bad["crashed.openai.json"]["error"]
    assert bad["export-cut.json"]["format"] == "chatgpt_export" and "malformed JSON" in bad["export-cut.json"]["error"]
    assert all(e["path"] in e["error"] for e in report["errors"])  # each names its file
    (unknown,) = report["not_read"]
    assert Path(unknown["path"]).name == "metrics.json" and report["totals"]["not_read"] == 1
    assert "no importer reads" in unknown["reason"] and "ctxf formats" in unknown["hint"]
    # not logs: a README is left alone, and so is the config file the audit itself reads
    assert sorted(Path(p).name for p in report["ignored"]) == ["NOTES.md", "audit.yaml"]

    root = ET.parse(junit).getroot()
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    inputs = suites["ctxf.inputs"]
    cases = {Path(c.get("name")).name: c for c in inputs.findall("testcase")}
    assert set(cases) == set(bad) | {"metrics.json"}
    assert all(cases[n].find("error") is not None and cases[n].find("error").get("message") for n in bad)
    assert cases["metrics.json"].find("error") is None and cases["metrics.json"].find("skipped") is not None
    assert (inputs.get("errors"), inputs.get("skipped"), inputs.get("tests")) == ("2", "1", "3")
    errors = root.findall(".//error")
    assert int(root.get("errors")) == len(errors) == sum(int(s.get("errors")) for s in suites.values()) == 2
    assert int(root.get("tests")) == len(root.findall(".//testcase")) == 3 + 2  # + good log × 2 rules

    text = md.read_text()
    assert "2 unreadable input(s)" in text
    rows = [line for line in text.splitlines() if "unreadable:" in line]
    assert len(rows) == 2 and all(line.startswith("| ⚠️ `") and line.count("|") == 4 for line in rows)
    assert any("crashed.openai.json" in line and "line 6, column 15" in line for line in rows)
    assert "1 log-like file(s) of a layout no importer reads were left alone" in text and "metrics.json" in text
    assert "crashed.openai.json" in r.stderr  # and on stderr, as ingest reports it


def test_files_of_an_unknown_layout_beside_good_logs_do_not_fail_the_audit(db, tmp_path):
    """Run metadata beside the logs (a results summary, a harness config) is no unreadable log:
    the audit lists it and exits 0, as `ctxf ingest` leaves it alone."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "good.openai.json").write_bytes((UNREADABLE / "good.openai.json").read_bytes())
    (folder / "results_summary.json").write_text(json.dumps({"resolved": 3, "total": 5, "ids": ["a", "b"]}))
    (folder / "trace.jsonl").write_text('{"span": 1, "name": "x"}\n{"span": 2, "name": "y"}\n')
    junit = tmp_path / "junit.xml"
    r = run("audit", folder, "--db", db, "--config", UNREADABLE / "audit.yaml", "--json", "--junit", junit)
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["errors"] == [] and report["exit_code"] == 0
    assert sorted(Path(x["path"]).name for x in report["not_read"]) == ["results_summary.json", "trace.jsonl"]
    skipped = ET.parse(junit).getroot().findall(".//testsuite[@name='ctxf.inputs']/testcase/skipped")
    assert len(skipped) == 2
    # the same folder with a JSONL file of no readable line is an unreadable input again
    (folder / "torn.jsonl").write_text('{"span": 1, "na\n{"span"\n')
    r = run("audit", folder, "--db", db, "--config", UNREADABLE / "audit.yaml", "--json")
    assert r.exit_code == 1
    (row,) = json.loads(r.stdout)["errors"]
    assert Path(row["path"]).name == "torn.jsonl" and "no line is valid JSON (line 1" in row["error"]


def test_unreadable_inputs_in_the_terminal_view_and_alone(db):
    r = CliRunner().invoke(app, ["audit", str(UNREADABLE / "metrics.json"), str(UNREADABLE / "crashed.openai.json"),
                                 "--db", str(db), "--config", str(UNREADABLE / "audit.yaml")],
                           env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert r.exit_code == 1
    assert "0 session(s)" in r.stdout and "2 unreadable input(s)" in r.stdout
    assert sum("unreadable " in line and "metrics.json" in line for line in r.stdout.splitlines()) == 1


def test_audit_divergence_rows_carry_the_decisive_edit_and_patches(db, tmp_path):
    """The audit's divergence report is diverge's: the earliest divergence, the first differing
    edit (file, steps) and the two patches, in the JSON and as a Markdown column."""
    md = tmp_path / "summary.md"
    r = run("audit", SAMPLES / "pair-csv-bom", "--db", db, "--json", "--markdown", md)
    (d,) = json.loads(r.stdout)["divergences"]
    assert d["task"] == "acme__csvtool-42" and d["divergence"]["cause"] == "assistant_action"
    dec = d["decisive"]
    assert dec["differs"] and (dec["a_step"], dec["b_step"]) == (3, 3)
    assert dec["a"]["files"] == ["csvtool/reader.py"] and dec["b"]["files"] == ["csvtool/writer.py"]
    assert d["patches"]["a"]["source"] == "submission"
    row = next(line for line in md.read_text().splitlines() if line.startswith("| acme__csvtool-42"))
    assert row.endswith("| csvtool/reader.py, csvtool/writer.py: step 3 / 3 |")


def test_timing_is_nearest_rank_over_the_measured_sessions_and_names_the_slowest():
    from io import StringIO

    from rich.console import Console

    from context_forensics.analysis.audit.runner import timing
    from context_forensics.render.audit import run_notes

    assert timing([]) is None
    tm = timing([(f"s{i}", i / 10) for i in range(20, 0, -1)])  # 0.1 .. 2.0 s, given slowest first
    assert tm["sessions_timed"] == 20 and tm["median_seconds"] == 1.0  # the 10th of 20
    assert tm["p95_seconds"] == 1.9 and tm["max_seconds"] == 2.0 and tm["slowest"] == "s20"  # 19th: ceil(0.95 * 20)
    out = StringIO()
    report = {"timing": tm, "totals": {"sessions": 20}, "executor": {"name": "serial"}}
    run_notes(Console(file=out, width=200), report)
    assert "median 1.00, p95 1.90, slowest 2.0 (s20)" in out.getvalue()
    quick = StringIO()
    run_notes(Console(file=quick, width=200), {**report, "timing": timing([("a", 0.2), ("b", 0.4)])})
    assert quick.getvalue() == ""  # a serial run of quick sessions prints nothing
