"""explain's "the result that led the decisive edit" (``followed_result``, else ``no_result_led``).

The result that led an edit is the last real failing check before it (a test or build that failed
for the code: ``checks``' own verdict, never an environment failure), else an output that named
the file unasked (a search that found it: not a listing the run asked for by the file's name, not
an editor's reply, not an environment failure); else no result led it, and explain says so.
issue 30: on the mini-swe-agent django-11276 run explain cited the ``find`` listing at seq 3 (the
run asked for html.py by name) instead of the test failure at seq 33; on the OpenHands
django-11206 run a settings-not-configured traceback (seq 11).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import context_forensics as ctxf
from context_forensics.analysis.diverge.events import extract_events
from context_forensics.analysis.explain.checks import checks, names_in
from context_forensics.analysis.explain.decisive import decisive_step
from context_forensics.analysis.explain.engine import _replay
from context_forensics.analysis.explain.findings import _asked, _followed
from context_forensics.config.settings import Config
from context_forensics.store.db import Store
from helpers import CORPUS, corpus


def _call(i: int, tool: str, args: dict) -> dict:
    return {"id": f"call_{i}", "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}


def _session(tmp_path: Path, turns: list[tuple[str, dict, str]]) -> dict:
    """An OpenAI-messages agent run (the shape of sample_logs' and the explain cases' runs) of
    ``turns`` (tool, arguments, result), ending in a submit; ingested as a failure, explained."""
    msgs: list[dict] = [{"role": "system", "content": "You are a coding agent. Submit when done."},
                        {"role": "user", "content": "escape() must produce &#39; for a single quote. Fix it."}]
    for i, (tool, args, out) in enumerate(turns, 1):
        msgs.append({"role": "assistant", "content": "", "tool_calls": [_call(i, tool, args)]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": out})
    msgs.append({"role": "assistant", "content": "", "tool_calls": [_call(99, "submit", {})]})
    msgs.append({"role": "tool", "tool_call_id": "call_99", "content": "Submitted."})
    path = tmp_path / "run.openai.json"
    path.write_text(json.dumps({"messages": msgs}))
    db = tmp_path / "s.db"
    ctxf.ingest(path, outcome="failure", db=db)
    return ctxf.explain(str(path), db=db, facts=["escape() must produce &#39;"]).to_dict()


FIND = ("bash", {"command": "find . -name html.py"}, "./django/utils/html.py\n[Command finished with exit code 0]")
ENV = ("bash", {"command": "python -m pytest tests/test_html.py"},
       "E   django.core.exceptions.ImproperlyConfigured: Requested setting DEBUG, but settings are not configured.\n"
       "ERROR tests/test_html.py - django.core.exceptions.ImproperlyConfigured\n=== 1 error in 0.3s ===\n"
       "[Command finished with exit code 2]")
REAL = ("bash", {"command": "./tests/runtests.py utils_tests.test_html"},
        "FAIL: test_escape (utils_tests.test_html.TestUtilsHtml)\nAssertionError: '&#x27;' != '&#39;'\n\n"
        "Ran 16 tests in 0.1s\n\nFAILED (failures=1)\n[Command finished with exit code 1]")
EDIT = ("str_replace_editor", {"command": "str_replace", "path": "django/utils/html.py", "old_str": "&#x27;",
                               "new_str": "&#39;"}, "The file django/utils/html.py has been edited.")


def _led(rep: dict) -> dict:
    return next(r for r in rep["reasons"] if r["kind"] in ("followed_result", "no_result_led"))


def test_the_last_real_failing_check_led_the_edit_not_the_listing_or_the_environment(tmp_path):
    """The 11276 shape: a listing the run asked for by the file's name, the real test failure,
    then an environment failure of the same tests, then the edit: the real failure led it."""
    rep = _session(tmp_path, [FIND, REAL, ENV, EDIT])
    assert rep["decisive_step"]["files"] == ["django/utils/html.py"]
    led = _led(rep)
    assert led["kind"] == "followed_result" and led["detail"]["led_by"] == "failing_check", led
    assert led["evidence"]["seq"] == 5 and "'&#x27;' != '&#39;'" in led["text"], led


def test_an_environment_failure_or_a_listing_asked_for_by_name_led_nothing(tmp_path):
    """The 11206 shape: only a listing the run asked for and a settings-not-configured failure
    name the file before the edit: no result led it, and explain says so."""
    rep = _session(tmp_path, [FIND, ENV, EDIT])
    led = _led(rep)
    assert led["kind"] == "no_result_led" and "no result in the log led the decisive edit of html.py" in led["text"]
    assert not [r for r in rep["reasons"] if r["kind"] == "followed_result"]


def test_a_check_that_passed_after_the_failure_means_it_led_nothing(tmp_path):
    passed = ("bash", {"command": "./tests/runtests.py utils_tests.test_html"},
              "Ran 16 tests in 0.1s\n\nOK\n[Command finished with exit code 0]")
    led = _led(_session(tmp_path, [REAL, passed, EDIT]))
    assert led["kind"] == "no_result_led" and "the last check before it passed" in led["text"], led


def test_a_search_that_found_the_file_unasked_led_it(tmp_path):
    grep = ("bash", {"command": "grep -rn '&#x27;' django"}, "django/utils/html.py:33:    ord(\"'\"): '&#x27;',\n"
            "[Command finished with exit code 0]")
    led = _led(_session(tmp_path, [FIND, grep, EDIT]))
    assert led["kind"] == "followed_result" and led["detail"]["led_by"] == "pointer" and led["evidence"]["seq"] == 5


@pytest.mark.parametrize("command, asked", [("find . -name html.py", True), ("ls -R django/utils | grep numberformat",
                                                                              True),
                                             ("grep -rn _html_escapes django", False),
                                             ("cat django/utils/html.py", True),
                                             ("grep -rn LEVEL_TAGS .", False)])
def test_a_command_asks_for_a_file_by_its_path_name_or_stem(command, asked):
    path = "django/utils/html.py" if "numberformat" not in command else "django/utils/numberformat.py"
    assert _asked(command, path) is asked


# --- the corpus -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def store(corpus_ingest):
    db, r = corpus_ingest
    assert r.exit_code == 0, r.stderr
    return db


def _sid(db: str, rel: str) -> str:
    with Store.open(db) as st:
        return next(s["id"] for s in st.sessions() if s["source"] == str(corpus(rel)))


def test_corpus_the_11276_test_failure_led_the_submitted_edit(store):
    sid = _sid(store, "swebench-pairs/django__django-11276/mini-swe-agent_gemini-3-pro/django__django-11276.traj.json")
    led = _led(ctxf.explain(sid, db=store).to_dict())
    assert led["kind"] == "followed_result" and led["evidence"]["seq"] == 33, led
    assert "'&#x27;' != '&#39;'" in led["text"] and led["detail"]["check"]["environment"] is False


def test_corpus_the_11206_settings_traceback_led_nothing(store):
    sid = _sid(store, "swebench-pairs/django__django-11206/openhands-codeact_claude-3-5-sonnet")
    led = _led(ctxf.explain(sid, db=store).to_dict())
    assert led["kind"] == "no_result_led" and led["evidence"]["seq"] == 20, led


def test_corpus_every_result_said_to_lead_an_edit_is_a_real_failure_or_an_unasked_pointer(store):
    """Over every session of every agent with a decisive edit: a failing check cited is one the
    classifier marks failed for the code and the last check before the edit; a pointer cited names
    the edited file, was not asked for by name, is no environment failure, and no real failing
    check came before the edit."""
    cfg = Config()
    seen = {"failing_check": 0, "pointer": 0, "none": 0}
    with Store.open(store) as st:
        for row in st.sessions():
            if not row["step_count"]:
                continue
            rev = extract_events(st.messages(row["id"]), row["format"], row["id"], row.get("metadata"))
            dec = decisive_step(rev, len(rev.step_seqs), row=row)
            if dec is None or not dec.files:
                continue
            r = _followed(rev, _replay(st, row["id"], None, cfg), dec)
            assert r is not None, row["source"]
            told = [c for c in checks(rev) if c.result_seq is not None and c.result_seq < dec.seq
                    and c.passed is not None and not c.environment]
            if r.kind == "no_result_led":
                seen["none"] += 1
                assert not told or told[-1].passed, (row["source"], r.text)
                continue
            by = r.detail["led_by"]
            seen[by] += 1
            if by == "failing_check":
                assert told and told[-1].result_seq == r.seq and told[-1].passed is False, (row["source"], r.text)
            else:
                res = next(e for e in rev.events if e.seq == r.seq and e.type == "result")
                parent = rev.events[res.parent]
                named = names_in(res.text, dec.files)
                assert named and not all(_asked(parent.text, f) for f in named), (row["source"], r.text)
                assert not told or told[-1].passed, (row["source"], r.text)
    assert all(seen.values()), seen  # not vacuous: each kind occurs in the corpus
    assert CORPUS.exists()
