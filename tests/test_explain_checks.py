"""analysis/explain/checks.py: which actions are tests or builds and whether they passed, the edits
that applied, the files the task is about, and the failing action of a failed run.

Small fixtures (tests/fixtures/explain_checks/, written by its make_fixtures.py) make each case;
the corpus tests assert the decisive steps read from the logs (/work/notes/p14_corpus_truth.md)."""

from __future__ import annotations

import pytest

from context_forensics.analysis.diverge.edits import run_edits
from context_forensics.analysis.diverge.events import extract_events
from context_forensics.analysis.explain.checks import (
    Check,
    Decision,
    applied_edits,
    checks,
    command_kind,
    effective_edits,
    failing_action,
    judge,
    source_edits,
    task_files,
)
from helpers import FIXTURES, corpus, parse

HERE = FIXTURES / "explain_checks"


def _run(path, pick=None):
    """(RunEvents, row) of the session in ``path`` (``pick``: the one whose external id ends so)."""
    fmt, sessions, _ = parse(path)
    s = next(x for x in sessions if pick is None or x.external_id.endswith(pick))
    return extract_events(s.messages, fmt, s.external_id), {"metadata": s.metadata, "outcome": s.outcome}


def _fixture(name):
    return _run(HERE / name)


# --- the classifier -----------------------------------------------------------------------

@pytest.mark.parametrize("cmd, kind", [
    ("pytest tests/test_x.py -q", "test"),
    ("python -m pytest -q tests/migrations/test_writer.py::WriterTests::test_serialize_enums", "test"),
    ("python3 -m unittest tests.utils_tests.test_html", "test"),
    ("python manage.py test polls", "test"),
    ("./tests/runtests.py utils_tests.test_html", "test"),
    ("python tests/runtests.py migrations.test_writer --parallel 1", "test"),
    ("cd /testbed && PYTHONPATH=. timeout 300 python -m pytest -x", "test"),
    ("poetry run pytest", "test"),
    ("tox -e py311", "test"),
    ("nox -s tests", "test"),
    ("npm test", "test"),
    ("npm run test -- --watch=false", "test"),
    ("yarn test", "test"),
    ("pnpm run test:unit", "test"),
    ("npx jest src/app.test.ts", "test"),
    ("npx vitest run", "test"),
    ("go test ./...", "test"),
    ("cargo test --release 2>&1 | tail -20", "test"),
    ("make test", "test"),
    ("make -C build check", "test"),
    ("ctest --output-on-failure", "test"),
    ("mvn -q test", "test"),
    ("./gradlew test", "test"),
    ("bundle exec rspec spec/models", "test"),
    ("vendor/bin/phpunit", "test"),
    ("mix test test/foo_test.exs", "test"),
    ("npm run build", "build"),
    ("npm run build -w @scope/pkg 2>&1 | head -30", "build"),
    ("npm run publish", "build"),
    ("npm run check", "build"),
    ("go build ./cmd/...", "build"),
    ("cargo build", "build"),
    ("make", "build"),
    ("make -j8", "build"),
    ("tsc --noEmit", "build"),
    ("npx tsc -p tsconfig.json", "build"),
    ("mvn package", "build"),
    ("gradle build", "build"),
    ("cmake --build build", "build"),
    ("ls && cd pkg && pytest", "test"),
    ("bash -c 'cd /repo && python -m pytest -q'", "test"),
    ("sh ./run_tests.sh", "test"),
    ("python -m django test --settings=test_sqlite", "test"),
    ("uvx pytest", "test"),
    ("yarn build", "build"),
    ("bun run build", "build"),
    ("npm t", "test"),
    # not checks: they look at tests, install runners, or only mention them
    ("cat tests/test_x.py", None),
    ("grep -rn pytest setup.cfg", None),
    ("grep pytest", None),
    ("pip install pytest", None),
    ("pip install -e . && echo ok", None),
    ("pytest --version", None),
    ("which pytest", None),
    ("echo 'run pytest later'", None),
    ("git commit -m 'make test pass'", None),
    ("python reproduce.py", None),
    ("python -c 'import django; print(django.VERSION)'", None),
    ("npm install", None),
    ("npm run dev", None),
    ("npm run lint", None),
    ("bash -c 'ls -la'", None),
    ("sh install.sh", None),
    ("python -m django --version", None),
    ("make clean", None),
    ("sed -n '1,40p' tests/runtests.py", None),
    ("find . -name 'test_*.py'", None),
    ("cat > run.sh <<'EOF'\npytest -q\nEOF", None),  # a heredoc body is data, not a command
])
def test_command_kind(cmd, kind):
    assert command_kind(cmd) == kind


@pytest.mark.parametrize("cmd, out, rc, passed, env", [
    ("pytest", "collected 3 items\n\n===== 3 passed in 0.03s =====", None, True, False),
    ("pytest", "FAILED t.py::test_a - assert 0 == 4\n===== 1 failed, 2 passed in 0.05s =====", None, False, False),
    ("pytest", "===== 2 passed in 0.1s =====", 1, False, False),  # a non-zero return code wins
    ("pytest", "", 0, True, False),
    ("pytest", "", 1, False, False),
    ("pytest", "collected 0 items\n\n==== no tests ran in 0.01s ====", 5, None, False),
    ("python -m unittest t", "....\n----------------------------------------------------------------------\n"
                             "Ran 4 tests in 0.001s\n\nOK", None, True, False),
    ("python -m unittest t", "======================================================================\n"
                             "FAIL: test_a (t.T)\n" + "-" * 70 + "\n"
                             "Traceback (most recent call last):\nAssertionError: 1 != 2\n\nFAILED (failures=1)",
     None, False, False),
    ("tsc --noEmit", "src/a.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.", None, False,
     False),
    ("npm run build", "> tsc\nnpm ERR! code ELIFECYCLE\nnpm ERR! errno 2", None, False, False),
    ("go test ./...", "--- FAIL: TestAdd (0.00s)\nFAIL\nFAIL\texample.com/calc\t0.002s", None, False, False),
    ("go test ./...", "ok  \texample.com/calc\t0.002s", None, True, False),
    ("cargo test", "test result: ok. 5 passed; 0 failed; 0 ignored", None, True, False),
    ("cargo test", "test result: FAILED. 4 passed; 1 failed; 0 ignored", None, False, False),
    ("npx jest", "Tests:       1 failed, 4 passed, 5 total", None, False, False),
    ("mvn test", "[INFO] BUILD SUCCESS", None, True, False),
    ("mvn test", "[ERROR] BUILD FAILURE", None, False, False),
    ("rspec", "5 examples, 0 failures", None, True, False),
    ("mix test", "14 doctests, 106 tests, 2 failures", None, False, False),
    ("npm run check 2>&1 | tail -3", "> check\nDone.", 0, None, False),  # a pipe hides the check's return code
    ("pytest 2>&1 | grep FAILED", "", 1, None, False),  # grep found nothing: not a failure of the tests
    ("pytest 2>&1 | tail -1", "===== 1 failed, 3 passed in 0.2s =====", 0, False, False),
    # the environment, not the code under test
    ("pytest -q t.py", "/usr/bin/python: No module named pytest", 1, False, True),
    ("pytest", "bash: pytest: command not found", 127, False, True),
    ("python -m unittest tests.t", "======================================================================\n"
                                   "ERROR: setUpClass (tests.t.T)\n-----------------------------------------\n"
                                   "Traceback (most recent call last):\ndjango.core.exceptions.ImproperlyConfigured: "
                                   "Requested setting DATABASES, but settings are not configured.\n\n"
                                   "FAILED (errors=1)", 1, False, True),
    ("python -m unittest tests.w", "ERROR: test_writer (unittest.loader._FailedTest)\nImportError: Failed to import "
                                   "test module: test_writer\nModuleNotFoundError: No module named "
                                   "'custom_migration_operations'\n\nFAILED (errors=1)", 1, False, True),
    ("./runtests.py t", "======================================================================\n"
                        "ERROR: test_files (t.T)\n-----------------------------------------\nTraceback:\n"
                        "UnicodeDecodeError: 'ascii' codec can't decode byte 0xe2\n\nFAILED (errors=1)",
     1, False, True),
    ("tests/runtests.py t -q", "runtests.py: error: unrecognized arguments: -q", 2, False, True),
])
def test_judge(cmd, out, rc, passed, env):
    got_passed, got_env, summary = judge(cmd, out, rc)
    assert (got_passed, got_env) == (passed, env), summary
    assert summary and "\n" not in summary


def test_a_missing_module_the_run_changed_is_the_codes_fault():
    out = "ModuleNotFoundError: No module named 'calc.core'\n\nFAILED (errors=1)"
    assert judge("python -m unittest", out, 1, {"calc"})[:2] == (False, False)
    assert judge("python -m unittest", out, 1, {"other"})[:2] == (False, True)


def test_a_code_failure_beside_an_environment_one_is_the_codes():
    out = ("======================================================================\nERROR: test_f (t.T)\n---\n"
           "UnicodeDecodeError: 'ascii' codec can't decode byte 0xe2\n"
           "======================================================================\nFAIL: test_escape (t.T)\n---\n"
           "AssertionError: '&#x27;' != '&#39;'\n\nFAILED (failures=1, errors=1)")
    passed, env, summary = judge("./runtests.py t", out, 1)
    assert (passed, env) == (False, False)
    assert "AssertionError" in summary


# --- fixtures: checks, effective edits, the failing action --------------------------------

def test_checks_list_the_test_runs_with_their_steps_and_results():
    rev, _ = _fixture("fail_then_pass_then_submit.openai.json")
    found = checks(rev)
    assert [(c.step, c.kind, c.passed, c.environment) for c in found] == [(3, "test", False, False),
                                                                          (5, "test", True, False)]
    assert all(isinstance(c, Check) and c.result_seq == c.seq + 1 and c.result_step == c.step + 1 for c in found)
    assert "1 failed" in found[0].summary and "3 passed" in found[1].summary
    assert found[0].to_dict()["passed"] is False


def test_checks_run_through_other_tools_count():
    rev, _ = _fixture("other_tools.openai.json")
    assert [(c.step, c.kind, c.command, c.passed) for c in checks(rev)] == [
        (3, "test", "npm test", False), (5, "test", "run_tests\npath: tests/test_calc.py", True)]
    assert failing_action(rev) is None  # the last check passed and nothing was submitted


def test_a_heredoc_cut_at_end_of_file_never_applied():
    rev, _ = _fixture("heredoc_never_applied.openai.json")
    assert [a.event.step for a in run_edits(rev)] == [2, 3]  # diverge's edits count the failed command
    assert [a.event.step for a in effective_edits(rev)] == [3]
    (first, done, why), _ = applied_edits(rev)
    assert first.event.step == 2 and done is None and "heredoc" in why
    d = failing_action(rev)
    assert (d.step, d.why, d.files) == (3, "submission", ["src/calc.py"])


def test_an_edit_that_applied_before_a_later_bash_error_is_kept():
    rev, _ = _fixture("applied_before_bash_error.openai.json")
    assert [a.event.step for a in effective_edits(rev)] == [2]
    assert [why for _, _, why in applied_edits(rev)] == [None]
    assert failing_action(rev).step == 2


def test_a_script_that_raised_before_its_write_or_a_sed_that_did_not_parse_changed_nothing():
    rev, _ = _fixture("scripts_that_raised.openai.json")
    outcome = {a.event.step: (done, why) for a, done, why in applied_edits(rev)}
    assert sorted(outcome) == [2, 3, 4]
    done, why = outcome[2]
    assert done is not None and done.files == ["/tmp/fix.py"]  # the script was written; it never patched
    assert "line 3, before its first write" in why
    assert outcome[3] == (outcome[3][0], None) and outcome[3][0].files == ["src/calc.py"]  # raised after writing
    assert outcome[4][0] is None and outcome[4][1].startswith("sed failed")
    assert [a.event.step for a in source_edits(rev)] == [3]
    assert failing_action(rev).step == 3


def test_rule_a_picks_the_edit_a_failing_check_names():
    rev, _ = _fixture("edit_then_failing_test.openai.json")
    d = failing_action(rev)
    assert isinstance(d, Decision)
    assert (d.step, d.why, d.files) == (2, "failing_check", ["src/calc.py"])
    assert d.check is not None and d.check.step == 3 and d.check.passed is False and d.submission_step is None
    assert "step 3" in d.text and "step 2" in d.text


def test_rule_a_does_not_take_an_unrelated_earlier_edit():
    """Trap 5 in small: a test-helper edit five steps before the failing publish is not its cause."""
    rev, _ = _fixture("unrelated_edit_then_failing_build.openai.json")
    assert [a.event.step for a in source_edits(rev)] == [2]
    d = failing_action(rev)
    assert (d.step, d.why, d.files) == (7, "failing_check", [])
    assert d.check.kind == "build" and "error TS2305" in d.check.summary
    assert d.action.startswith("shell: npm run publish")


def test_a_check_that_failed_for_the_environment_leaves_the_decision_to_the_submission():
    rev, _ = _fixture("environment_failure_then_submit.openai.json")
    (c,) = checks(rev)
    assert (c.step, c.passed, c.environment) == (5, False, True)
    assert "No module named pytest" in c.summary
    # reproduce.py is the run's own script: not a file the task is about
    assert task_files(rev)[0] == {"src/calc.py"}
    d = failing_action(rev)
    assert (d.step, d.why, d.check, d.submission_step) == (3, "submission", None, 6)
    assert "step 6" in d.text and d.to_dict()["submission_step"] == 6


def test_a_later_passing_check_means_the_run_got_past_the_failure():
    """Trap 2 in small: the tests fail after the first edit and pass after the second; the
    submission carries the second, so rule A does not apply."""
    rev, _ = _fixture("fail_then_pass_then_submit.openai.json")
    d = failing_action(rev)
    assert (d.step, d.why) == (4, "submission")


def test_an_edit_after_the_last_failing_check_leaves_the_decision_to_the_submission():
    rev, _ = _fixture("fail_then_edit_then_submit.openai.json")
    assert [(c.step, c.passed) for c in checks(rev)] == [(3, False)]
    d = failing_action(rev)
    assert (d.step, d.why) == (4, "submission")


def test_a_chat_has_no_failing_action():
    rev, _ = _fixture("chat_only.openai.json")
    assert checks(rev) == [] and effective_edits(rev) == []
    assert failing_action(rev) is None
    # graded, its one reply is the final answer that was scored
    d = failing_action(rev, {"outcome": "failure", "metadata": {}})
    assert (d.step, d.why, d.files) == (1, "submission", [])


# --- the corpus (skipped when absent) -----------------------------------------------------

SWE = "swebench-pairs/{}/{}"
TRUTH = [  # (task, run, decisive step): read from the logs
    ("astropy__astropy-14365", "openhands-codeact_claude-3-5-sonnet", 8),
    ("django__django-11206", "openhands-codeact_claude-3-5-sonnet", 10),
    ("django__django-11276", "mini-swe-agent_gemini-3-pro/django__django-11276.traj.json", 25),
    ("django__django-11276", "live-swe-agent_gpt-5-mini/django__django-11276.traj.json", 8),
    ("django__django-11815", "live-swe-agent_gpt-5-mini/django__django-11815.traj.json", 14),
    ("django__django-15127", "mini-swe-agent_gemini-3-pro/django__django-15127.traj.json", 11),
]


@pytest.mark.parametrize("task, run, step", TRUTH, ids=[f"{t}:{r.split('_')[0]}" for t, r, _ in TRUTH])
def test_corpus_swebench_failures_decide_at_the_last_edit_the_submission_carries(task, run, step):
    rev, row = _run(corpus(SWE.format(task, run)))
    d = failing_action(rev, row)
    assert (d.step, d.why) == (step, "submission"), d.text
    assert d.files and all(f.endswith(".py") and not f.startswith("repro") for f in d.files)


def test_corpus_trap2_the_last_check_failed_only_for_the_environment():
    rev, row = _run(corpus(SWE.format("django__django-11276", TRUTH[2][1])))
    found = {c.step: c for c in checks(rev)}
    assert (found[16].passed, found[16].environment) == (False, False)  # the stale tests reject the step-13 edit
    assert "AssertionError" in found[16].summary
    assert (found[27].passed, found[27].environment) == (False, True)  # only the ASCII-locale error is left
    assert max(found) == 27


def test_corpus_trap4_the_failed_heredoc_at_step_4_never_applied():
    rev, row = _run(corpus(SWE.format("django__django-11276", TRUTH[3][1])))
    assert [a.event.step for a in run_edits(rev)][:2] == [4, 5]
    assert [a.event.step for a in source_edits(rev, row)] == [7, 8]
    env = {c.step: c for c in checks(rev)}
    assert env[12].environment and "ImproperlyConfigured" in env[12].summary


def test_corpus_the_step_5_patch_that_printed_patched_before_a_bash_error_applied():
    rev, row = _run(corpus(SWE.format("django__django-11815", TRUTH[4][1])))
    assert [a.event.step for a in source_edits(rev, row)] == [5, 14]
    found = {c.step: c for c in checks(rev)}
    assert 14 not in found  # its pytest was on the line bash could not parse: it never ran
    assert found[16].environment and found[22].environment


@pytest.mark.parametrize("rel, pick", [
    ("inspect-ai-log/json/2025-05-12T20-28-13-04-00_popularity.json", ":3:1"),
    ("inspect-ai-log/eval/2025-02-11T15-17-00-05-00_popularity_dPiJifoWeEQBrfWsAopzWr.eval", ":3:1"),
    ("inspect-ai-log/eval/2025-02-11T15-17-00-05-00_popularity_dPiJifoWeEQBrfWsAopzWr.eval", ":7:1"),
])
def test_corpus_inspect_samples_decide_at_their_one_answer(rel, pick):
    rev, row = _run(corpus(rel), pick)
    d = failing_action(rev, row)
    assert (d.step, d.why, d.files) == (1, "submission", [])


def test_corpus_pi_the_failing_publish_not_the_test_script_edit():
    rev, row = _run(corpus("pi/pi-mono/large-session.jsonl"))
    d = failing_action(rev, row)
    assert (d.step, d.why) == (447, "failing_check"), d.text
    assert d.check.kind == "build" and "error TS" in d.check.summary
    assert d.files == []
    assert any(a.event.step == 441 for a in effective_edits(rev))  # the red herring is an edit, not the decision
