"""``ctxf explain`` (issue 14): the pieces of the diagnosis, and its invariants on real runs.

Pure pieces first (prohibitions, path matching, ranking, the verdict rule, event ids), then the
diagnosis of the sample agent run under gemma-7b (a constraint evicted before the edit that broke
it) and under its recorded model (nothing lost), each figure checked against the command that
measures it on its own (``ctxf facts``, ``ctxf replay``, ``ctxf replay --at``).
"""

from __future__ import annotations

import json
import re

import pytest

import context_forensics as ctxf
from context_forensics.analysis.explain.evidence import event_id
from context_forensics.analysis.explain.verdict import Reason, decide, rank
from context_forensics.analysis.explain.violations import is_prohibition, path_matches, prohibition
from helpers import OVERFLOW, PAIR_BAD, PAIR_GOOD, cli

NO_TESTS = "Never modify files under tests/."
NO_TOUCH = "Do not touch the tests; they define the contract."




# ============================================================================ prohibitions

@pytest.mark.parametrize("text, paths, commands", [
    ("Never modify files under tests/.", ("tests/",), ()),
    ("You must not edit setup.py", ("setup.py",), ()),
    ("Do not run `git push --force`.", (), ("git push --force",)),
    ("Do not use `sudo`.", (), ("sudo",)),
    ("DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)", ("pyproject.toml", "setup.cfg"),
     ()),
    ("Edit src/app.py as you need. Never touch ./docs/.", ("docs/",), ()),
    ("Avoid touching docs/*.md", ("docs/*.md",), ()),
])
def test_a_prohibition_names_what_an_action_may_not_touch(text, paths, commands):
    p = prohibition(text)
    assert p is not None and p.paths == paths and p.commands == commands


@pytest.mark.parametrize("text", [
    "ascii.qdp assumes that commands are upper case, whereas QDP itself is not case sensitive.",  # negates no action
    "Always run `pytest -q` before you say you are done.",  # an obligation
    "Edit src/app.py to add the discount.",  # an instruction, nothing forbidden
    "Never be rude to the user.",  # forbids nothing an action can touch
    "Do not rename the function \"parse_rows\".",  # a name, not a path or a command
])
def test_what_is_not_a_checkable_prohibition(text):
    assert prohibition(text) is None


def test_is_prohibition_wants_a_negated_action():
    assert is_prohibition("Never modify files under tests/.")
    assert not is_prohibition("QDP is not case sensitive.")


@pytest.mark.parametrize("path, target, hit", [
    ("tests/test_x.py", "tests/", True), ("/repo/tests/unit/test_x.py", "tests/", True),
    ("src/attests/x.py", "tests/", False), ("tests_old/x.py", "tests/", False),
    ("a/b/setup.py", "setup.py", True), ("setup.py.bak", "setup.py", False),
    ("docs/a.md", "docs/*.md", True), ("docs/a.txt", "docs/*.md", False),
    ("pkg/src/core/api.py", "src/core/api.py", True), ("pkg/src/core/api2.py", "src/core/api.py", False),
])
def test_path_matches(path, target, hit):
    assert path_matches(path, target) is hit


# ============================================================================ ranking and verdict

def test_ranking_puts_what_decides_first_and_a_push_under_its_loss():
    reasons = [
        Reason("followed_result", "f", step=9),
        Reason("window_complete", "w", step=9),
        Reason("pushed_out_by_tool_output", "p", step=4, detail={"left_step": 4}),
        Reason("goal_lost", "g", step=4, weight="strong", detail={"left_step": 4}),
        Reason("constraint_lost", "c", step=2, weight="strong", detail={"left_step": 2}),
    ]
    kinds = [r.kind for r in rank(reasons)]
    assert kinds == ["constraint_lost", "goal_lost", "pushed_out_by_tool_output", "window_complete", "followed_result"]
    assert [r.rank for r in rank(reasons)] == [1, 2, 3, 4, 5]


def test_the_verdict_rule():
    strong = Reason("constraint_lost", "c", weight="strong")
    weak = Reason("loss_before", "l")
    assert decide([weak])[0] == "not_limiting"
    assert decide([strong, weak])[0] == "contributed"
    v, words = decide([Reason("no_model", "m", weight="unknown"), strong])
    assert v == "unknown" and "model is not known" in words


def test_event_ids_name_the_nth_event_of_a_type():
    events = [{"type": "eviction"}, {"type": "clearing"}, {"type": "eviction"}]
    assert [event_id(7, events, i) for i in range(3)] == ["eviction@7#1", "clearing@7", "eviction@7#2"]


# ============================================================================ the sample agent run (real parts)

def _edit_of_tests_step(ws, sid):
    """The first model call whose tool call edits a file under tests/ (read from the log)."""
    from context_forensics.analysis.replay import message_steps

    msgs = ws.store.messages(sid)
    for sm, (step, _) in zip(msgs, message_steps(msgs)):
        for c in sm.message.tool_calls:
            if "edit" in c.name and '"tests/' in c.arguments:
                return step, sm.seq
    raise AssertionError("the sample run has no edit of tests/")


@pytest.mark.integration
def test_a_constraint_evicted_before_the_edit_that_broke_it(tmp_path):
    with ctxf.open_store(tmp_path / "s.db") as ws:
        res = ctxf.explain(OVERFLOW, model="gemma-7b", facts=[NO_TESTS, NO_TOUCH], store=ws)
        d = res.to_dict()
        sid = d["session"]["id"]
        step, seq = _edit_of_tests_step(ws, sid)
        assert d["verdict"] == "contributed"
        dec = d["decisive_step"]
        assert (dec["step"], dec["seq"], dec["why"]) == (step, seq, "rule")
        assert dec["violation"]["fact"] == NO_TESTS and dec["files"] == ["tests/test_pricing.py"]
        # the lost constraint: where `ctxf facts` says it left, by the event the replay has there
        facts = ctxf.facts(OVERFLOW, [NO_TOUCH], model="gemma-7b", store=ws).to_dict()["facts"][0]
        lost = next(r for r in d["reasons"] if r["kind"] == "constraint_lost")
        assert lost["rank"] == 1 and lost["detail"]["fact"] == NO_TOUCH
        assert lost["evidence"]["step"] == facts["disappeared_at"] < step
        rep = ctxf.replay(OVERFLOW, model="gemma-7b", store=ws).to_dict()["replays"][0]
        at = rep["steps"][lost["evidence"]["step"] - 1]
        assert lost["evidence"]["event"].split("@")[0] in {e["type"] for e in at["events"]}
        assert lost["evidence"]["seq"] in at["evicted"]
        # the window at the decisive step is replay's
        st = rep["steps"][step - 1]
        assert (d["window"]["tokens"], d["window"]["utilization"]) == (st["window_tokens"], st["utilization"])
        n_lost = sum(1 for s in rep["steps"][:step] for _ in s["newly_lost"])
        assert d["window"]["lost_count"] == n_lost > 0
        # every reason's evidence points into the run
        n = len(rep["steps"])
        for r in d["reasons"]:
            ev = r["evidence"]
            assert ev["step"] is None or 1 <= ev["step"] <= n, r
            assert ev["seq"] is None or 0 <= ev["seq"] < len(ws.store.messages(sid)), r
        # a counterfactual that keeps the constraint does: its window at the step holds a source
        keeping = [c for c in d["counterfactuals"] if c.get("keeps_all")]
        assert keeping, d["counterfactuals"]
        assert any(NO_TOUCH in c.get("restated", []) for c in keeping)  # goal anchoring's row, checked below
        sources = next(c["sources"] for c in d["constraints"] if c["text"] == NO_TOUCH)
        for c in keeping:
            policy = None if c["label"] == "a larger window" else c["policy"]
            win = ctxf.window(OVERFLOW, step, model=c["model"], policy=policy, params=c["params"],
                              store=ws).to_dict()
            kept = {m["seq"] for m in win["messages"] if m["state"] in ("kept", "outside_local")}
            if NO_TOUCH in c.get("restated", []):
                # goal anchoring: no source message is in view, its re-sent copy is: the policy
                # pinned a source and the window counts the restatement's tokens
                assert not kept & set(sources), c
                rep = ctxf.replay(OVERFLOW, model=c["model"], policy=policy, params=c["params"],
                                  store=ws).to_dict()["replays"][0]
                assert set(rep["params"]["pinned"]) & set(sources), rep["params"]
                restated = [p for p in win["window_parts"] if p["label"].startswith("restated goal")]
                assert restated and restated[0]["tokens"] > 0, win["window_parts"]
            else:
                assert kept & set(sources), c
        # and one that loses it does not
        losing = [c for c in d["counterfactuals"] if NO_TOUCH in c.get("lost", [])]
        for c in losing:
            win = ctxf.window(OVERFLOW, step, model=c["model"], policy=c["policy"], params=c["params"],
                              store=ws).to_dict()
            kept = {m["seq"] for m in win["messages"] if m["state"] in ("kept", "outside_local")}
            assert not kept & set(sources), c


@pytest.mark.integration
def test_nothing_lost_under_the_recorded_model_is_not_limiting(tmp_path):
    with ctxf.open_store(tmp_path / "s.db") as ws:
        d = ctxf.explain(OVERFLOW, facts=[NO_TESTS, NO_TOUCH], store=ws).to_dict()
        rep = ctxf.replay(OVERFLOW, store=ws).to_dict()["replays"][0]
    assert rep["summary"]["first_loss_step"] is None
    assert d["verdict"] == "not_limiting" and d["verdict_words"] == "context did not limit this run"
    top = d["reasons"][0]
    assert top["kind"] == "window_complete"
    st = rep["steps"][d["decisive_step"]["step"] - 1]
    assert f"{st['window_tokens']:,} tokens" in top["text"]
    assert d["counterfactuals"] == []  # nothing lost, nothing to rescue
    assert any(r["kind"] == "violated_in_view" for r in d["reasons"])  # the rule was broken in full view


@pytest.mark.integration
def test_the_json_is_the_api_and_the_text_fits_80_columns(tmp_path, monkeypatch):
    db = tmp_path / "s.db"
    r = cli(monkeypatch, "explain", OVERFLOW, "-m", "gemma-7b", "--fact", NO_TOUCH, "--db", db, "--json")
    assert r.exit_code == 0, r.output
    api = ctxf.explain(OVERFLOW, model="gemma-7b", facts=[NO_TOUCH], db=db).to_dict()
    assert json.loads(r.stdout) == api  # and the same twice: deterministic
    for width in (80, 120):
        r = cli(monkeypatch, "explain", OVERFLOW, "-m", "gemma-7b", "--fact", NO_TOUCH, "--db", db, width=width)
        assert r.exit_code == 0
        lines = r.stdout.splitlines()
        assert max(len(x) for x in lines) <= width, [x for x in lines if len(x) > width]
        assert next(x for x in lines if x.startswith("Verdict:")).startswith("Verdict: context likely contributed")
        assert f"ctxf replay {api['session']['id']} --at {api['decisive_step']['step']} --model gemma-7b" in \
            " ".join(lines)
        # a what-if's window figure is marked when its count is not exact, and the mark is explained
        for c in api["counterfactuals"]:
            exact = c["window_tokens_kind"] == "exact"
            assert any(re.search(rf"{'' if exact else '≈'}{c['window_tokens']:,}\b", x) for x in lines), c
        assert any(c["window_tokens_kind"] != "exact" for c in api["counterfactuals"])
        assert "≈ estimated" in r.stdout


def test_at_out_of_range_and_against_itself_are_usage_errors(tmp_path, monkeypatch, hashing):
    db = tmp_path / "s.db"
    r = cli(monkeypatch, "explain", OVERFLOW, "--at", "99", "--db", db)
    assert r.exit_code == 2 and "step 99 is out of range: this session has 12 step(s)" in r.stderr
    assert "Traceback" not in r.output
    r = cli(monkeypatch, "explain", OVERFLOW, "--against", OVERFLOW, "--db", db)
    assert r.exit_code == 2 and "--against names the session itself" in r.stderr


def test_a_rule_no_action_is_checked_against_is_said_so(tmp_path, hashing):
    """OpenHands' system prompt says "The assistant MUST NOT include comments in the code unless
    they are necessary to describe non-obvious behavior."; the corpus' django-11206 run added two
    comment lines in its decisive edit. It names no path and no command (and "unless" makes it a
    condition), so explain checks no action against it, nor an obligation: it says so, rather
    than list them "present" as if they had been kept."""
    rule = ("The assistant MUST NOT include comments in the code unless they are necessary to describe "
            "non-obvious behavior.")
    run_tests = "Always run `pytest -q` before you say you are done."
    assert prohibition(rule) is None and prohibition(run_tests) is None
    facts = [rule, NO_TESTS, run_tests, "Tiered discounts: 5% over 100 EUR, 10% over 500 EUR."]
    d = ctxf.explain(OVERFLOW, facts=facts, db=tmp_path / "s.db").to_dict()
    said = [n for n in d["notes"] if "not checked against what the run did" in n]
    assert len(said) == 1, d["notes"]
    assert said[0].startswith("2 tracked rule(s) on actions") and "MUST NOT include comments" in said[0]
    assert "pytest -q" in said[0]
    assert "tests/" not in said[0] and "Tiered" not in said[0]  # a path is checked; a figure rules no action
    d = ctxf.explain(OVERFLOW, facts=[NO_TESTS], db=tmp_path / "s.db").to_dict()
    assert not [n for n in d["notes"] if "not checked against what the run did" in n]


def test_at_names_the_decisive_step(tmp_path, hashing):
    d = ctxf.explain(OVERFLOW, at=4, db=tmp_path / "s.db").to_dict()
    assert d["decisive_step"]["step"] == 4 and d["decisive_step"]["why"] == "at"
    assert d["window"]["step"] == 4


def test_a_good_run_of_the_same_task_is_found_in_the_store(tmp_path, hashing):
    with ctxf.open_store(tmp_path / "s.db") as ws:
        ctxf.ingest([PAIR_GOOD], outcome="success", task="csv-42", store=ws)
        ctxf.ingest([PAIR_BAD], outcome="failure", task="csv-42", store=ws)
        d = ctxf.explain(PAIR_BAD, store=ws).to_dict()
        good = ws.resolve(str(PAIR_GOOD))
    assert d["divergence"]["good"] == good
    assert any(re.search(r"a success of task csv-42", n) for n in d["notes"])
    assert d["divergence"]["decisive"] is not None


def test_the_good_run_and_this_run_are_named_not_a_and_b():
    """diverge names its two runs A and B; explain says "the good run" and "this run" (on the
    corpus' OpenHands django-11206 run it printed "decisive edit: step 10 (theirs 16), the same
    file(s); A's command does not show its change", A being the good run)."""
    from context_forensics.analysis.explain.engine import as_this_run

    assert as_this_run("the same file(s); A's command does not show its change") == \
        "the same file(s); the good run's command does not show its change"
    assert as_this_run("the same file(s); B's command does not show its change") == \
        "the same file(s); this run's command does not show its change"
    assert as_this_run("run B made no further edit to the source files; run A did") == \
        "this run made no further edit to the source files; the good run did"
    assert as_this_run("run A stopped here; run B went on (edit A.java)") == \
        "the good run stopped here; this run went on (edit A.java)"
    assert as_this_run("the runs made the same 2 edit(s); the fix to a.py at step 3 is not in run B's submission") \
        == "the runs made the same 2 edit(s); the fix to a.py at step 3 is not in this run's submission"
    assert as_this_run("different files") == "different files" and as_this_run(None) is None


def test_the_divergence_names_where_the_final_patches_differ(tmp_path, hashing):
    """The first differing edit can be undone later (the corpus' mini-swe-agent django-11276 run
    put its step 13 back at step 20); explain also names the edit of each run that wrote the first
    hunk only its final patch has, as diverge does (there: step 25, explain's own decisive step)."""
    from helpers import FIXTURES

    good, bad = FIXTURES / "diverge" / "fix_a.json", FIXTURES / "diverge" / "fix_b.json"  # as test_diverge reads them
    with ctxf.open_store(tmp_path / "s.db") as ws:
        ctxf.ingest([good], fmt="generic_json", outcome="success", task="fix", store=ws)
        ctxf.ingest([bad], fmt="generic_json", outcome="failure", task="fix", store=ws)
        d = ctxf.explain(ws.resolve(str(bad)), store=ws).to_dict()
        dv = ctxf.diverge(ws.resolve(str(good)), ws.resolve(str(bad)), store=ws).to_dict()
    fin = dv["decisive"]["final"]
    assert (fin["a"]["step"], fin["b"]["step"]) == (6, 6)
    assert d["divergence"]["decisive"]["final"] == {"a": 6, "b": 6}


def _run(*calls):
    """A tool-calling run: each call a (tool, arguments dict, result text) turn."""
    from context_forensics.analysis.diverge.events import extract_events
    from context_forensics.records import Message, ToolCall

    msgs = [Message("system", "You are a coding agent. Never modify files under tests/."), Message("user", "Fix it.")]
    for i, (tool, args, result) in enumerate(calls):
        msgs.append(Message("assistant", "", tool_calls=(ToolCall(tool, json.dumps(args), f"c{i}"),)))
        msgs.append(Message("tool", result, tool_call_id=f"c{i}"))
    return extract_events(msgs, "openai_chat")


def test_a_file_put_back_breaks_no_prohibition():
    from context_forensics.analysis.explain.checks import effective_edits
    from context_forensics.analysis.explain.violations import violations

    rev = _run(("bash", {"command": "git checkout tests/test_a.py"}, "Updated 1 path from the index"),
               ("bash", {"command": "sed -i 's/a/b/' src/app.py"}, ""))
    assert [e.op for a in effective_edits(rev) for e in a.edits] == ["revert", "replace"]  # the edit is seen
    assert violations(rev, effective_edits(rev), [NO_TESTS]) == []
    rev = _run(("bash", {"command": "sed -i 's/a/b/' src/app.py"}, ""),
               ("bash", {"command": "sed -i 's/1/2/' tests/test_a.py"}, ""))
    (v,) = violations(rev, effective_edits(rev), [NO_TESTS])
    assert (v.step, v.files, v.target) == (2, ("tests/test_a.py",), "tests/")


def test_a_forbidden_command_is_a_violation_and_a_similar_word_is_not():
    from context_forensics.analysis.explain.checks import effective_edits
    from context_forensics.analysis.explain.violations import violations

    rule = "Do not run `git push --force`."
    rev = _run(("bash", {"command": "git push origin main"}, ""), ("bash", {"command": "git push --force origin"}, ""))
    (v,) = violations(rev, effective_edits(rev), [rule])
    assert v.step == 2 and v.target == "git push --force"
    rev = _run(("bash", {"command": "echo pseudocode"}, ""))
    assert violations(rev, effective_edits(rev), ["Do not use `sudo`."]) == []


def test_an_agent_that_edits_and_says_done_submits_its_last_edit():
    from context_forensics.analysis.diverge.events import extract_events
    from context_forensics.analysis.explain.checks import failing_action
    from context_forensics.records import Message, ToolCall

    def run(*turns):
        msgs = [Message("user", "Fix the rounding in src/app.py.")]
        for i, args in enumerate(turns):
            msgs.append(Message("assistant", "", tool_calls=(ToolCall("bash", json.dumps(args), f"c{i}"),)))
            msgs.append(Message("tool", "def total(x):\n    return round(x)\n", tool_call_id=f"c{i}"))
        msgs.append(Message("assistant", "Done: the rounding is fixed."))
        return extract_events(msgs, "openai_chat")

    d = failing_action(run({"command": "cat src/app.py"}, {"command": "sed -i 's/round(x)/round(x, 2)/' src/app.py"},
                           {"command": "cat src/app.py"}), {"outcome": "failure", "metadata": {}})
    assert (d.why, d.step, d.files, d.submission_step) == ("submission", 2, ["src/app.py"], 4)
    # a run that only read and answered hands in no change: nothing to decide on, labelled or not
    assert failing_action(run({"command": "cat src/app.py"}), {"outcome": "failure", "metadata": {}}) is None


def test_timeline_state_at_is_its_row(tmp_path):
    """``Timeline.state_at`` (one message at one step, what explain and diverge read) equals the
    expanded row ``states(i)`` for every message and step of a run that evicts (gemma-7b)."""
    from context_forensics.analysis.replay import Timeline, prepare
    from context_forensics.analysis.replay.policies import NOT_YET

    with ctxf.open_store(tmp_path / "s.db") as ws:
        ctxf.ingest([OVERFLOW], store=ws)
        sid = ws.resolve(str(OVERFLOW))
        prep = prepare(ws.store, sid, "gemma-7b")
        results, _ = prep.run()
        tl = Timeline.from_results(prep.inp, results)
    n = len(results)
    changed = 0
    for i in range(prep.inp.n):
        row = tl.states(i)
        assert [tl.state_at(i, k) for k in range(1, n + 1)] == row.tolist()
        changed += any(int(x) not in (NOT_YET, row[-1]) for x in row)
    assert changed  # some message changed state along the way: the comparison covers changes


def _text_harness_run(path):
    """A mini-swe-agent run (observations are user messages, no tool role): the task, a listing,
    one huge file dump, an edit, the submission."""
    big = "\n".join(f"    value_{i} = compute_rate({i}, region='eu')  # rate row {i}" for i in range(900))
    msgs = [
        {"role": "system", "content": "You are a helpful assistant that can run bash commands."},
        {"role": "user", "content": "<pr_description>Round the discount in shopcart/pricing.py to cents; "
                                    "never change the public signature of apply_discount.</pr_description>"},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls shopcart\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\npricing.py\nrates.py\n</output>"},
        {"role": "assistant", "content": "THOUGHT: read the rates\n\n```bash\ncat shopcart/rates.py\n```"},
        {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{big}\n</output>"},
        {"role": "assistant",
         "content": "THOUGHT: fix\n\n```bash\nsed -i 's/round(x)/round(x, 2)/' shopcart/pricing.py\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
        {"role": "assistant", "content": "THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
    ]
    path.write_text(json.dumps({"info": {"exit_status": "Submitted", "submission": "diff --git a/shopcart/pricing.py "
                                         "b/shopcart/pricing.py\n"},
                                "messages": msgs, "trajectory_format": "mini-swe-agent-1", "instance_id": "x__y-1"}))
    return path


def test_a_text_harness_observation_that_pushes_the_goal_out_is_named(tmp_path, hashing):
    path = _text_harness_run(tmp_path / "run.traj.json")
    with ctxf.open_store(tmp_path / "s.db") as ws:
        d = ctxf.explain(path, model="gemma-7b", store=ws).to_dict()
        msgs = ws.store.messages(ws.resolve(str(path)))
    dump = next(sm.seq for sm in msgs if "value_899" in sm.message.text)
    assert msgs[dump].message.role == "user"  # an observation, not a tool message
    kinds = [r["kind"] for r in d["reasons"]]
    assert d["verdict"] == "contributed" and "goal_lost" in kinds, d["reasons"]
    pushed = next(r for r in d["reasons"] if r["kind"] == "pushed_out_by_tool_output")
    assert pushed["evidence"]["seq"] == dump


def test_the_last_reply_of_a_conversation_is_no_submission():
    """A person spoke again after the agent began: its last answer does not hand in an edit made
    earlier (a real Pi session's last reply came 90 steps after its last edit)."""
    from context_forensics.analysis.diverge.events import extract_events
    from context_forensics.analysis.explain.checks import failing_action
    from context_forensics.records import Message, ToolCall

    msgs = [Message("user", "Fix the rounding in src/app.py."),
            Message("assistant", "", tool_calls=(ToolCall("bash", json.dumps(
                {"command": "sed -i 's/round(x)/round(x, 2)/' src/app.py"}), "c0"),)),
            Message("tool", "", tool_call_id="c0"),
            Message("assistant", "Done."),
            Message("user", "Thanks. Now explain how the cart is priced."),
            Message("assistant", "The cart sums its lines, then applies the discount.")]
    assert failing_action(extract_events(msgs, "openai_chat"), {"outcome": "unknown", "metadata": {}}) is None
    one_task = extract_events(msgs[:4], "openai_chat")
    assert failing_action(one_task, {"outcome": "unknown", "metadata": {}}).step == 1


def test_the_harness_s_user_text_does_not_make_a_run_a_conversation():
    """Issue 30, verdicts read against the logs: Cline sends its environment details as user text
    after every tool result (the ui_messages importer keeps them as user messages), Aider its file
    lists and reflections. They are no person speaking again: a one-task run whose person never wrote
    again still hands in its work with its "done"; the first message the person did write is the
    step explain names (Cline-Xray task_sample said "at step 2", an environment-details block; the
    person's "do not write code. just the doc" is read at step 4)."""
    from context_forensics.analysis.diverge.applied import effective_edits as applied_edits
    from context_forensics.analysis.diverge.events import extract_events
    from context_forensics.analysis.explain.checks import failing_action
    from context_forensics.analysis.explain.findings import _no_decisive
    from context_forensics.records import Message, ToolCall

    env = "<environment_details>\n# Visual Studio Code Visible Files\nsrc/app.py\n</environment_details>"
    edit = ToolCall("execute_command", json.dumps({"command": "sed -i 's/round(x)/round(x, 2)/' src/app.py"}), "c0")
    msgs = [Message("user", "<task>\nFix the rounding in src/app.py.\n</task>"),
            Message("assistant", "", tool_calls=(edit,)),
            Message("tool", "", tool_call_id="c0"),
            Message("user", env),
            Message("assistant", "Done: src/app.py rounds to two places.")]
    rev = extract_events(msgs, "openai_chat")
    assert [e.person for e in rev.events if e.type == "user"] == [True, False]
    assert failing_action(rev, {"outcome": "unknown", "metadata": {}}).step == 1  # its "done" hands in step 1's edit
    talk = msgs + [Message("user", "<feedback>\nnow make it round half up\n</feedback>\n\n" + env),
                   Message("assistant", "Rounded half up.")]
    rev = extract_events(talk, "openai_chat")
    assert failing_action(rev, {"outcome": "unknown", "metadata": {}}) is None
    said = _no_decisive(rev, applied_edits(rev))
    assert "the person wrote again after the run began, at step 3" in said, said


@pytest.mark.parametrize(("rel", "step"), [("cline/Cline-Xray/task_sample/ui_messages.json", 4),
                                          ("cline/Cline-Xray/9dbbc27/ui_messages.json", 3),
                                          ("aider/Simple-Calulator/.aider.llm.history", 4)])
def test_corpus_the_step_a_person_wrote_again(rel, step, tmp_path):
    """The corpus sessions whose person wrote again: the step explain names is the person's first
    message after the run began, as the log shows it (task_sample: "do not write code. just the doc"
    in api_req_started 4; 9dbbc27: the user_feedback "generate report.md" in api_req_started 3;
    Simple-Calulator: the dark/light-mode request, the 4th TO LLM record; before: steps 2, 3 and 2)."""
    from context_forensics.analysis.diverge.applied import effective_edits as applied_edits
    from context_forensics.analysis.diverge.events import extract_events
    from context_forensics.analysis.explain.findings import _no_decisive
    from helpers import corpus

    path = corpus(rel)
    with ctxf.open_store(tmp_path / "s.db") as ws:
        sid = ws.resolve(str(path))
        row = ws.store.session(sid)
        rev = extract_events(ws.store.messages(sid), row["format"], sid, row.get("metadata"))
    said = _no_decisive(rev, applied_edits(rev))
    assert f"the person wrote again after the run began, at step {step}:" in said, said
