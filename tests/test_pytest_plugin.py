"""The pytest plugin (context_forensics/pytest_plugin.py), driven with ``pytester``: inner suites
write small OpenAI-chat logs into a folder and the plugin audits them at the end of the run.

The config is tiny: two replay rules under a 512-token model with the real o200k tokenizer, so
no embedding model loads except in the fixture test that tracks a fact."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET

import pytest

from context_forensics.pytest_plugin import NAME

pytest_plugins = ["pytester"]

CONFIG = """\
model_mappings:
  tiny-512:
    tokenizer: o200k_base
    context_limit: 512
    reserved_output: 64
    eviction_strategy: left_truncation
audit:
  rules:
    no_overflow: {model: tiny-512, fail: true}
    max_utilization: {threshold: 0.5, model: tiny-512}
"""

SHORT = {"model": "gpt-4o-mini", "messages": [
    {"role": "system", "content": "You edit settings.py. Never modify files under tests/."},
    {"role": "user", "content": "Rename the config key retry_limit to max_retries in settings.py."},
    {"role": "assistant", "content": "Renamed retry_limit to max_retries in settings.py."},
]}
# About 1,500 tokens of tool output: past the 448-token budget of tiny-512.
LONG = {"model": "gpt-4o-mini", "messages": [
    {"role": "system", "content": "You edit settings.py. Never modify files under tests/."},
    {"role": "user", "content": "Show me settings.py, then rename retry_limit to max_retries."},
    {"role": "assistant", "content": "Here is the file:\n" + "\n".join(
        f"SETTING_{i} = {i * 7}  # the value of setting number {i}" for i in range(150))},
    {"role": "user", "content": "Now rename it."},
    {"role": "assistant", "content": "Renamed retry_limit to max_retries."},
]}


def _suite(pytester: pytest.Pytester, logs: dict[str, dict], *, extra: str = "") -> None:
    """An inner suite whose one test writes ``logs`` into ./sessions, plus the config file."""
    pytester.makefile(".yaml", ctxf_config=CONFIG)
    pytester.makepyfile(test_agent=f"""
import json, pathlib

def test_agent_runs():
    out = pathlib.Path("sessions")
    out.mkdir(exist_ok=True)
    for name, log in {logs!r}.items():
        (out / name).write_text(json.dumps(log))
{extra}
""")


def test_without_its_options_the_plugin_adds_nothing(pytester):
    _suite(pytester, {"long.openai.json": LONG})
    res = pytester.runpytest_subprocess("-v")  # the entry point loads the plugin in a fresh process
    res.assert_outcomes(passed=1)
    out = res.stdout.str()
    # nothing of the plugin: no audit item, no section (the word "ctxf" itself may be in the
    # interpreter's path -v prints, in a checkout named ctxf)
    assert NAME not in out and "ctxf audit" not in out and "ctxf:" not in out
    assert "test_agent_runs" in out
    help_out = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--ctxf-audit=DIR" in help_out  # loaded through pytest11, not -p


def test_findings_fail_the_run_and_reach_the_summary_and_junit(pytester):
    _suite(pytester, {"long.openai.json": LONG, "short.openai.json": SHORT})
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml",
                                        "--junitxml", "junit.xml", "-rA")
    res.assert_outcomes(passed=1, failed=1)
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    out = res.stdout.str()
    summary = out[out.index("= ctxf audit ="):]
    assert "no_overflow at step" in summary and "[fails the run]" in summary
    assert "long.openai.json" in summary and "short.openai.json" not in summary
    assert "2 session(s)" in summary
    # it ran after the suite's own test
    assert out.index("test_agent.py") < out.index("ctxf-audit[sessions]")
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    assert set(cases) == {"test_agent_runs", "ctxf-audit[sessions]"}
    failure = cases["ctxf-audit[sessions]"].find("failure")
    assert failure is not None and "no_overflow" in (failure.text or "") + failure.get("message", "")


def test_a_rule_not_gating_is_listed_but_passes(pytester):
    # The same overflowing log with no_overflow not marked `fail: true`: the run passes and the
    # summary lists the finding; --ctxf-fail-on no_overflow makes it gate again.
    _suite(pytester, {"long.openai.json": LONG})
    pytester.makefile(".yaml", ctxf_config=CONFIG.replace("fail: true", "fail: false"))
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml")
    res.assert_outcomes(passed=2)
    summary = res.stdout.str()[res.stdout.str().index("= ctxf audit ="):]
    assert "no_overflow at step 2" in summary and "[fails the run]" not in summary
    assert "audit exit code 0" in summary
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml",
                                        "--ctxf-fail-on", "no_overflow")
    res.assert_outcomes(passed=1, failed=1)
    out = res.stdout.str()
    assert "no_overflow at step 2 [fails the run]" in out and "audit exit code 3" in out


def test_clean_logs_pass(pytester):
    _suite(pytester, {"short.openai.json": SHORT})
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml")
    res.assert_outcomes(passed=2)
    assert res.ret == pytest.ExitCode.OK
    res.stdout.fnmatch_lines(["*ctxf audit of sessions: 1 session(s), 2 rule(s): nothing failed*"])


def test_an_unknown_fail_on_rule_is_a_usage_error_before_the_tests(pytester):
    _suite(pytester, {"short.openai.json": SHORT})
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml",
                             "--ctxf-fail-on", "no_overflw")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert "--ctxf-fail-on names unknown rule(s): no_overflw" in err and "known rules:" in err
    assert not (pytester.path / "sessions").exists()  # no test ran
    res = pytester.runpytest_subprocess("--ctxf-fail-on", "no_overflow")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--ctxf-fail-on goes with --ctxf-audit DIR" in res.stderr.str()


def test_a_missing_folder_fails_and_an_unreadable_log_fails(pytester):
    pytester.makefile(".yaml", ctxf_config=CONFIG)
    pytester.makepyfile(test_agent="def test_nothing_written():\n    pass\n")
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*sessions does not exist: the suite wrote no session logs there*"])
    (pytester.path / "sessions").mkdir()
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml")
    res.assert_outcomes(passed=1, skipped=1)  # an empty folder: nothing audited, said so
    (pytester.path / "sessions" / "cut.json").write_text('{"model": "gpt-4o", "messages": [')
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*unreadable: *cut.json*"])


def test_the_audit_item_survives_deselection_and_runs_last(pytester):
    _suite(pytester, {"long.openai.json": LONG}, extra="\ndef test_zzz_later():\n    pass\n")
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml",
                             "-k", "agent_runs", "-v", "-p", "no:randomly")
    res.assert_outcomes(passed=1, failed=1, deselected=1)
    lines = [ln for ln in res.stdout.lines if "PASSED" in ln or "FAILED" in ln]
    assert "ctxf-audit[sessions]" in lines[-1] and "test_agent_runs" in lines[0]


def test_the_fixture_gives_the_api_on_a_private_store(pytester):
    pytester.makefile(".yaml", ctxf_config=CONFIG)
    log = pytester.path / "short.openai.json"
    log.write_text(json.dumps(SHORT))
    pytester.makepyfile(test_fixture=f"""
def test_fact_kept(ctxf):
    assert ctxf.facts({str(log)!r}, "Never modify files under tests/.").final_state == "present"
    assert ctxf.workspace.path is None  # in memory: the default store is not touched
    assert len(ctxf.workspace.sessions()) == 1

def test_audit_under_the_plugin_config(ctxf):
    res = ctxf.audit([{str(log)!r}])
    assert [r["name"] for r in res.rules] == ["no_overflow", "max_utilization"]
    assert res.exit_code == 0
""")
    res = pytester.runpytest_subprocess("--ctxf-config", "ctxf_config.yaml", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=2)
    assert not (pytester.path / "forensics_data").exists()


def test_final_state_needs_one_fact():
    from context_forensics.api.results import FactsResult

    class Report:  # the two facts of a report: final_state cannot pick one
        facts = [type("T", (), {"final_state": "present"})(), type("T", (), {"final_state": "gone"})()]

    from context_forensics.errors import UsageError

    with pytest.raises(UsageError, match="2 facts"):
        FactsResult(1, {}, Report(), None, []).final_state  # noqa: B018
    Report.facts = Report.facts[1:]
    assert FactsResult(1, {}, Report(), None, []).final_state == "gone"


def test_importing_the_plugin_imports_nothing_heavy():
    import subprocess

    heavy = ["numpy", "sqlite_utils", "tiktoken", "yaml", "torch", "sentence_transformers", "typer", "rich",
             "context_forensics.store", "context_forensics.analysis", "context_forensics.config"]
    code = f"import sys, context_forensics.pytest_plugin; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_under_xdist_the_controller_audits_after_every_worker(pytester):
    pytest.importorskip("xdist")
    _suite(pytester, {"long.openai.json": LONG}, extra="\ndef test_two():\n    pass\n\ndef test_three():\n    pass\n")
    res = pytester.runpytest_subprocess("-n", "2", "--ctxf-audit", "sessions", "--ctxf-config", "ctxf_config.yaml",
                                        "--junitxml", "junit.xml")
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    res.stdout.fnmatch_lines(["*no_overflow at step 2 ?fails the run?*", "*1 failed, 3 passed*"])
    names = [c.get("name") for c in ET.parse(pytester.path / "junit.xml").iter("testcase")]
    assert names.count("ctxf-audit[sessions]") == 1 and len(names) == 4


def test_an_invalid_config_is_a_usage_error_naming_the_key(pytester):
    _suite(pytester, {"short.openai.json": SHORT})
    pytester.makefile(".yaml", bad="audit:\n  rules:\n    no_overflow: {modle: tiny-512}\n")
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "bad.yaml")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "bad.yaml" in res.stderr.str() and "modle" in res.stderr.str()
    assert not (pytester.path / "sessions").exists()
    res = pytester.runpytest_subprocess("--ctxf-audit", "sessions", "--ctxf-config", "missing.yaml")
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "missing.yaml: no such file" in res.stderr.str()
