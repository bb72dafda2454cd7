"""`ctxf audit PATHS --executor serial|process|ray`: the driver lists the files, tasks ingest them
into private stores and audit them, results stream back. Every executor gives the serial
report, in the same order (sample logs, and the real corpus on a real local Ray); --jsonl has a
line per session; a task that raises is an error row for its files; Ctrl-C writes the partial
report and exits 130; the embeddings workers encode come back to the driver's cache."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics import api
from context_forensics.analysis.audit.distributed import audit_units
from context_forensics.cli import app
from context_forensics.config.audit_rules import parse_audit
from context_forensics.executors import make_executor
from context_forensics.store.db import Store
from context_forensics.store.sources import Source, list_sources
from helpers import FIXTURES

ROOT = Path(__file__).parent.parent
SAMPLES = ROOT / "sample_logs"
CORPUS = ROOT.parent / "shared" / "corpus"
CONFIG = FIXTURES / "audit" / "small_window.yaml"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _report(tmp_path, name, *, paths=(SAMPLES,), keep=False, **kw):
    res = api.audit(list(paths), config=CONFIG, db=tmp_path / f"{name}.db", executor=name, keep=keep, **kw)
    return res.to_dict()


def test_serial_executor_gives_the_in_store_audit_report(tmp_path):
    """The task pipeline (private stores) against the audit of the same sessions in one store."""
    tasks = _report(tmp_path, "serial", keep=True)
    stored = api.audit(config=CONFIG, db=tmp_path / "serial.db").to_dict()  # the store the run kept
    # The store orders undated sessions by the second they were written (then id): compare by id.
    by_id = lambda report: sorted(report["sessions"], key=lambda s: s["id"])  # noqa: E731
    assert tasks["sessions"] and by_id(tasks) == by_id(stored)
    assert tasks["stored"] is True and stored["stored"] is None


def test_process_executor_gives_the_serial_report_in_the_same_order(tmp_path):
    serial = _report(tmp_path, "serial")
    process = _report(tmp_path, "process", workers=2)
    assert process["sessions"] == serial["sessions"] and len(serial["sessions"]) >= 5
    assert process["totals"] == serial["totals"] and process["exit_code"] == serial["exit_code"]
    assert process["executor"]["name"] == "process" and process["executor"]["workers"] == 2
    assert process["run"]["tasks"] >= 2  # the files were spread over tasks, not one
    for report in (serial, process):  # each session's audit measured where it ran, summed up here
        tm, ids = report["timing"], {s["id"] for s in report["sessions"]}
        assert tm["sessions_timed"] == report["totals"]["sessions"] and tm["slowest"] in ids
        assert 0 <= tm["median_seconds"] <= tm["p95_seconds"] <= tm["max_seconds"]
        assert not any("_seconds" in s for s in report["sessions"])  # a result holds no timing


def test_jsonl_has_one_line_per_session_as_in_the_report(tmp_path):
    out = tmp_path / "out" / "audit.jsonl"
    r = run("audit", SAMPLES, "--db", tmp_path / "s.db", "--config", CONFIG, "--executor", "process",
            "--workers", "2", "--jsonl", out, "--json")
    assert r.exit_code == 3, r.stderr  # no_overflow fails the overflow sample
    report = json.loads(r.stdout)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(lines, key=lambda s: s["id"]) == sorted(report["sessions"], key=lambda s: s["id"])
    assert not any("_seconds" in line for line in lines) and report["timing"]["sessions_timed"] == len(lines)
    assert oct(out.stat().st_mode & 0o777) == "0o600"  # it holds the logs' words


def test_kept_sessions_are_the_ones_a_plain_ingest_stores(tmp_path):
    _report(tmp_path, "process", keep=True, workers=2)
    plain = tmp_path / "plain.db"
    assert run("ingest", SAMPLES, "--recursive", "--db", plain).exit_code == 0
    with Store.open(tmp_path / "process.db") as a, Store.open(plain) as b:
        ids = sorted(s["id"] for s in a.sessions())
        assert ids == sorted(s["id"] for s in b.sessions())
        assert all([m.text for m in a.messages(i)] == [m.text for m in b.messages(i)] for i in ids)
    again = api.audit([SAMPLES], config=CONFIG, db=tmp_path / "process.db", executor="process", workers=2)
    assert {f["status"] for f in again.ingest["files"]} == {"unchanged"}  # re-audit: the store adds nothing
    with Store.open(tmp_path / "process.db") as a:
        assert sorted(s["id"] for s in a.sessions()) == ids


def test_no_store_keeps_no_session(tmp_path):
    r = run("audit", SAMPLES, "--db", tmp_path / "s.db", "--config", CONFIG, "--executor", "process",
            "--workers", "2", "--no-store", "--json")
    assert json.loads(r.stdout)["stored"] is False
    with Store.open(tmp_path / "s.db") as s:
        assert s.sessions() == []


def test_a_task_that_raises_is_an_error_row_for_its_files_and_the_rest_go_on(tmp_path):
    """A source naming an importer that does not exist makes its task raise on the worker."""
    listing = list_sources([SAMPLES])
    bad = Source(url=str(tmp_path / "bad.json"), local=str(tmp_path / "bad.json"), size=10, importer="no-such")
    with api.open_store(tmp_path / "s.db", config=CONFIG) as ws:
        rules = parse_audit(ws.cfg.audit, ws.cfg.source, ws.cfg)
        with make_executor("process", workers=2) as ex:
            sessions, report, figures, _, stopped = audit_units(
                [bad, *listing.sources], ws.store, ws.cfg, rules, executor=ex, keep=False)
    failed = [f for f in report["files"] if f["status"] == "failed"]
    assert [f["path"] for f in failed] == [bad.url]
    assert "its audit task failed" in failed[0]["error"] and "hint:" in failed[0]["error"]
    assert len(sessions) >= 5 and not stopped and figures["failed_tasks"] == 1


def test_the_cli_reports_a_failed_task_as_exit_1_with_the_file_named(tmp_path, monkeypatch):
    broken = tmp_path / "logs"
    broken.mkdir()
    (broken / "truncated.jsonl").write_text('{"type": "user", "message": {"role"')
    r = run("audit", broken, SAMPLES / "drift-chat", "--db", tmp_path / "s.db", "--config", CONFIG,
            "--executor", "process", "--workers", "2", "--json")
    report = json.loads(r.stdout)
    assert r.exit_code == 1
    assert [e["path"] for e in report["errors"]] == [str(broken / "truncated.jsonl")]
    assert report["totals"]["sessions"] == 2


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT as a terminal's foreground job gets it: a suite run in the background (``cmd &`` in
    a non-interactive shell) has it ignored, and an ignored signal stays ignored across exec."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_cancels_writes_the_partial_report_and_exits_130(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    src = json.loads((SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json").read_text())
    user = next(m for m in src["messages"] if m["role"] == "user")
    text = user["content"]
    # distinct runs: enough that Ctrl-C comes before the end: the same run twice would be one session
    for i in range(2000):
        user["content"] = f"{text} (run {i})"
        (logs / f"run{i:03d}.openai.json").write_text(json.dumps(src))
    out, md = tmp_path / "a.jsonl", tmp_path / "a.md"
    env = {**os.environ, "COLUMNS": "80"}
    p = subprocess.Popen([sys.executable, "-m", "context_forensics", "audit", str(logs), "--db",
                          str(tmp_path / "s.db"), "--config", str(CONFIG), "--executor", "process", "--workers",
                          "2", "--jsonl", str(out), "--markdown", str(md), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True, preexec_fn=_ctrl_c_as_in_a_terminal)
    deadline = time.time() + 120
    while time.time() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
        time.sleep(0.2)
    assert out.exists(), "no result arrived in 120 s"
    os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the driver and its workers
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 130, stderr
    report = json.loads(stdout)
    assert report["interrupted"] is True and 1 <= report["totals"]["sessions"] < 2000
    assert md.exists() and "Traceback" not in stderr and "interrupted" in stderr
    assert len(out.read_text().splitlines()) >= report["totals"]["sessions"] - 0  # whole lines only
    for line in out.read_text().splitlines():
        json.loads(line)


@pytest.mark.integration
def test_ray_gives_the_serial_report_on_the_sample_logs(tmp_path, ray_cluster):
    serial = _report(tmp_path, "serial")
    on_ray = _report(tmp_path, "ray")
    assert on_ray["sessions"] == serial["sessions"] and on_ray["totals"] == serial["totals"]
    assert on_ray["executor"]["name"] == "ray" and on_ray["executor"]["workers"] == 2
    assert on_ray["stored"] is False  # keep=False here; the CLI's default without --db on Ray


@pytest.mark.integration
@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not here")
def test_ray_gives_the_serial_report_on_the_real_corpus(tmp_path, ray_cluster):
    serial = _report(tmp_path, "serial", paths=(CORPUS,))
    on_ray = _report(tmp_path, "ray", paths=(CORPUS,))
    assert len(serial["sessions"]) > 100
    assert on_ray["sessions"] == serial["sessions"]
    assert on_ray["errors"] == serial["errors"] and on_ray["not_read"] == serial["not_read"]
    assert on_ray["totals"] == serial["totals"] and on_ray["exit_code"] == serial["exit_code"]


@pytest.mark.integration
def test_embeddings_encoded_on_workers_come_back_so_a_second_run_encodes_nothing(tmp_path, minilm):
    cfg = tmp_path / "drift.yaml"
    cfg.write_text("audit:\n  rules:\n    max_drift: {}\n")
    paths = [SAMPLES / "drift-chat"]
    first = api.audit(paths, config=cfg, db=tmp_path / "s.db", executor="process", workers=2, keep=False)
    assert first.run["vectors_cached"] > 0
    with Store.open(tmp_path / "s.db") as s:
        cached = s.db.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    assert 0 < cached <= first.run["vectors_cached"]  # two workers may encode the same goal text
    second = api.audit(paths, config=cfg, db=tmp_path / "s.db", executor="process", workers=2, keep=False)
    assert second.run["vectors_cached"] == 0 and second.run["cache_unreachable_tasks"] == 0
    assert second.sessions == first.sessions


def test_the_same_run_through_two_paths_in_two_tasks_is_one_session(tmp_path):
    """As in one store (``Store.same_run``): a copy read by another task is not audited twice."""
    logs = tmp_path / "logs"
    (logs / "copy").mkdir(parents=True)
    src = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"
    (logs / "run.openai.json").write_bytes(src.read_bytes())
    (logs / "copy" / "run.openai.json").write_bytes(src.read_bytes())
    (logs / "other.sharegpt.json").write_bytes((SAMPLES / "drift-chat" / "cover-letter-drift.sharegpt.json")
                                               .read_bytes())
    assert run("ingest", logs, "--recursive", "--db", tmp_path / "one.db").exit_code == 0
    one_store = api.audit(config=CONFIG, db=tmp_path / "one.db")  # the truth: one store's sessions
    spread = api.audit([logs], config=CONFIG, db=tmp_path / "b.db", executor="process", workers=2, keep=False)
    assert spread.run["tasks"] == 3  # one file per task: the copy is read in a task of its own
    assert spread.totals["sessions"] == one_store.totals["sessions"] == 2
    assert spread.run["duplicates"] == 1
    assert sorted(s["id"] for s in spread.sessions) == sorted(s["id"] for s in one_store.sessions)


def test_the_walked_files_formats_sniffed_on_workers_give_the_driver_s_own_listing(tmp_path):
    """``classifier``: the heads of a big walk read by the workers, in chunks; the listing (units,
    formats, ignored files, order) is the one the driver reads itself."""
    from context_forensics.analysis.audit.distributed import CLASSIFY_CHUNK, classifier

    src = json.loads((SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json").read_text())
    for i in range(CLASSIFY_CHUNK + 40):
        sub = tmp_path / f"d{i % 7}"
        sub.mkdir(exist_ok=True)
        src["messages"][1]["content"] = f"run {i}"
        (sub / f"r{i:03d}.json").write_text(json.dumps(src))
        if i % 50 == 0:
            (sub / f"notes{i}.md").write_text("not a log")
            (sub / f"meta{i}.json").write_text('{"run": 1}')
    mine = list_sources([tmp_path])
    with make_executor("process", workers=2) as ex:
        theirs = list_sources([tmp_path], classify_many=classifier(ex))
    assert len(mine.sources) > CLASSIFY_CHUNK  # big enough to be read in chunks
    assert [(s.url, s.importer) for s in theirs.sources] == [(s.url, s.importer) for s in mine.sources]
    assert theirs.ignored == mine.ignored and len(mine.ignored) >= 6


@pytest.mark.integration
@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not here")
def test_drift_templates_are_counted_over_the_whole_run_as_in_one_store(tmp_path, minilm):
    """max_drift sets aside what opens other tasks' sessions too (a harness's template): a count
    over every session, which a task's private store cannot make alone. The two long spotter
    sessions share their opening and are in different tasks: still no_goal, as in one store."""
    spotter = CORPUS / "claude-code-jsonl" / "spotter"
    cfg = tmp_path / "drift.yaml"
    cfg.write_text("audit:\n  rules:\n    max_drift: {verdict: SEVERE}\n")
    assert run("ingest", spotter, "--recursive", "--db", tmp_path / "one.db").exit_code == 0
    one_store = api.audit(config=cfg, db=tmp_path / "one.db")
    spread = api.audit([spotter], config=cfg, db=tmp_path / "b.db", executor="process", workers=2, keep=False)
    assert spread.run["tasks"] >= 2
    by_id = lambda r: sorted(r.sessions, key=lambda s: s["id"])  # noqa: E731
    assert by_id(spread) == by_id(one_store)
    skipped = [s for s in spread.sessions if s["results"][0]["figure"] == "no_goal"]
    assert len(skipped) >= 2


@pytest.mark.integration
def test_a_failed_run_is_explained_against_its_task_s_success_from_another_task(tmp_path, minilm):
    """context_caused_failure compares a failed run with its task's success: with each file in
    a task of its own, the driver judges it on the store that holds both, as one store would."""
    cfg = tmp_path / "explain.yaml"
    cfg.write_text("model_mappings:\n  gemma-7b: {tokenizer: approx, context_limit: 8192, reserved_output: 1024, "
                   "eviction_strategy: left_truncation}\naudit:\n  rules:\n    context_caused_failure: "
                   "{model: gemma-7b}\n")
    pair = SAMPLES / "pair-csv-bom"
    assert run("ingest", pair, "--recursive", "--db", tmp_path / "one.db").exit_code == 0
    one_store = api.audit(config=cfg, db=tmp_path / "one.db")
    out = tmp_path / "a.jsonl"
    spread = api.audit([pair], config=cfg, db=tmp_path / "b.db", executor="process", workers=2, keep=False,
                       jsonl=out)
    assert spread.run["tasks"] == 2  # the success and the failure in tasks of their own
    by_id = lambda sessions: sorted(sessions, key=lambda s: s["id"])  # noqa: E731
    assert by_id(spread.sessions) == by_id(one_store.sessions)
    failed = next(s for s in spread.sessions if s["outcome"] == "failure")
    assert failed["results"][0]["status"] != "deferred" and failed["results"][0]["detail"]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert by_id(lines) == by_id(spread.sessions)  # the held line is written once judged
