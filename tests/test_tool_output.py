"""One notion of tool output (issue 9, item 18): ``tool_output.tool_outputs`` decides per message,
and diverge and the audit's ``max_tool_output_share`` both use it, so a mini-swe-agent v1 text
trajectory (observations sent as user messages) no longer reads 0% tool output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from context_forensics.analysis.diverge import extract_events
from context_forensics.analysis.replay import Timeline, prepare
from context_forensics.analysis.replay.policies import IN_WINDOW
from context_forensics.cli import app
from context_forensics.records import KIND_CLEARED_TOOL_RESULT, Message, ToolCall
from context_forensics.store.db import Store
from context_forensics.store.ingest import resolve_session
from context_forensics.tool_output import tool_outputs
from helpers import CORPUS, FIXTURES

TEXT_HARNESS = FIXTURES / "audit" / "text-harness" / "owner__repo-9.traj.json"
SHARE_ONLY = "audit:\n  rules:\n    max_tool_output_share: {max: 0.5}\n"


def m(role: str, text: str = "", **kw) -> Message:
    return Message(role=role, text=text, **kw)


def test_tool_role_and_cleared_results_are_tool_output_in_any_format():
    msgs = [m("user", "Find the bug"), m("assistant", "", tool_calls=(ToolCall("bash", '{"cmd": "ls"}', "c1"),)),
            m("tool", "a.py b.py", tool_call_id="c1"), m("tool", "[cleared]", kind=KIND_CLEARED_TOOL_RESULT),
            m("user", "<returncode>0</returncode><output>x</output>")]  # a tool-calling run: never an observation
    out = tool_outputs(msgs, "openai_chat")
    assert out.protocol == "tools" and out.flags == (False, False, True, True, False)


def test_a_text_harness_observation_is_tool_output_and_its_feedback_task_and_submission_are_not():
    msgs = [m("system", "You are a shell agent."), m("user", "<pr_description>Fix x</pr_description>"),
            m("assistant", "THOUGHT: look\n\n```bash\nls\n```"),
            m("user", "<returncode>0</returncode>\n<output>\nx\n</output>"),  # observation
            m("assistant", "I think I am done."),  # no action ...
            m("user", "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."),  # ... feedback
            m("assistant", "```bash\ncat x\n```"),
            m("user", "Please always provide EXACTLY ONE action in triple backticks."),  # feedback after an action
            m("assistant", "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```"),
            m("user", "diff --git a/x b/x\n", meta={"exit": True})]  # the submission record
    out = tool_outputs(msgs, "mini_swe_agent")
    assert out.protocol == "text"
    assert [i for i, f in enumerate(out.flags) if f] == [3]


def test_outside_a_text_harness_format_an_observation_needs_its_look():
    """A chat log whose assistant writes fenced shell blocks: the next user message is an
    observation only when it opens like one (or the importer recorded a returncode)."""
    msgs = [m("user", "Help me list files"), m("assistant", "Run:\n```bash\nls\n```"),
            m("user", "That printed nothing, why?"),  # a person answering: not tool output
            m("assistant", "Try:\n```sh\nls -a\n```"), m("user", "OBSERVATION:\n.git .env"),
            m("assistant", "```bash\nwc -l .env\n```"), m("user", "3 .env", meta={"returncode": 0}),
            m("user", "<returncode>0</returncode>")]  # a second user message after one action is not
    out = tool_outputs(msgs, "sharegpt")
    assert out.protocol == "text" and [i for i, f in enumerate(out.flags) if f] == [4, 6]
    assert not any(tool_outputs([m("user", "hi"), m("assistant", "Hello!"), m("user", "<output>x</output>")],
                                "sharegpt").flags)  # no action at all: chat


def _share_by_hand(store: Store, sid: str, fmt: str) -> float:
    """The peak share of the window held by tool output, from the replay's own per-message states."""
    prep = prepare(store, sid, None, policy="recorded")
    results, _ = prep.run()
    tl = Timeline.from_results(prep.inp, results)
    flags = tool_outputs(prep.messages, fmt).flags
    share = []
    for k, r in enumerate(results):
        inside = [i for i in range(prep.inp.n) if flags[i] and np.isin(tl.states(i)[k], IN_WINDOW)]
        share.append(sum(int(prep.inp.tokens[i]) for i in inside) / max(r.window_tokens, 1))
    return max(share)


def test_max_tool_output_share_counts_a_text_harness_observations(tmp_path):
    db, cfg = tmp_path / "s.db", tmp_path / "c.yaml"
    cfg.write_text(SHARE_ONLY)
    r = CliRunner().invoke(app, ["audit", str(TEXT_HARNESS), "--db", str(db), "--config", str(cfg), "--json"])
    (session,) = json.loads(r.stdout)["sessions"]
    (res,) = session["results"]
    assert session["format"] == "mini_swe_agent" and res["detail"]["protocol"] == "text"
    assert res["detail"]["observations"] == 2  # the two <returncode> replies, not the task nor the submission
    with Store.open(db) as store:
        expected = _share_by_hand(store, session["id"], "mini_swe_agent")
    assert expected > 0.5  # the 260-line `nl -ba` output fills most of the window (it read 0% before)
    assert res["figure"] == pytest.approx(expected, abs=1e-4) and res["status"] == "fail"
    assert "observation" in res["message"]


GEMINI_RUNS = sorted(CORPUS.glob("swebench-pairs/*/mini-swe-agent_gemini-3-pro/*.traj.json"))


@pytest.mark.skipif(not GEMINI_RUNS, reason="corpus not available")
def test_on_the_corpus_mini_swe_agent_runs_audit_and_diverge_agree_on_tool_output(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(SHARE_ONLY)
    db = tmp_path / "s.db"
    r = CliRunner().invoke(app, ["audit", *map(str, GEMINI_RUNS), "--db", str(db), "--config", str(cfg), "--json"])
    report = json.loads(r.stdout)
    assert len(report["sessions"]) == len(GEMINI_RUNS) == 5
    with Store.open(db) as store:
        for s in report["sessions"]:
            (res,) = s["results"]
            sid = resolve_session(store, s["source"])
            msgs = store.messages(sid)
            flags = tool_outputs(msgs, s["format"]).flags
            results = {e.seq for e in extract_events(msgs, s["format"]).events if e.type == "result"}
            assert results == {sm.seq for sm, f in zip(msgs, flags) if f} and results  # one notion
            assert res["figure"] == pytest.approx(_share_by_hand(store, sid, s["format"]), abs=1e-4)
            assert res["figure"] > 0.2, (Path(s["source"]).name, res)  # every run reads files into its window


def test_cline_results_kept_as_user_text_are_tool_output_and_answer_their_call():
    """cline/Online-Card-Architecture: native tool calls, each result a user text block
    "[tool for 'path'] Result:"; the UI's names (editedExistingFile) answer the API's."""
    msgs = [m("user", "<task>\nAdd actions\n</task>"),
            m("assistant", "", tool_calls=(ToolCall("write_to_file", json.dumps({"absolutePath": "/w/a.cs"}), "t1"),)),
            m("user", "[write_to_file for '/w/a.cs'] Result:\nThe content was successfully saved to /w/a.cs."),
            m("assistant", "", tool_calls=(ToolCall("editedExistingFile", json.dumps({"path": "b.cs"})),)),
            m("user", "[replace_in_file for 'b.cs'] Result:\nThe content was successfully saved to b.cs."),
            m("user", "[read_file for 'c.cs'] Result:\nnot after a call of read_file")]
    # The last is Cline's result text with no call of its own left to answer: still a result (one
    # notion for every rule, issue 30 item 6), of the latest reply, as XML-tool Cline's results are.
    assert tool_outputs(msgs, "cline").flags == (False, False, True, False, True, True)
    rev = extract_events(msgs, "cline")
    results = [e for e in rev.events if e.type == "result"]
    assert [rev.events[r.parent].tool if r.parent is not None else None for r in results] == [
        "write_to_file", "editedExistingFile", None]


def test_aider_code_blocks_are_code_not_actions():
    msgs = [m("user", "how do I install it?"), m("assistant", "Run:\n```bash\nnpm install styled-components\n```"),
            m("user", "ok")]
    assert tool_outputs(msgs, "aider_chat").protocol == "chat" and not any(tool_outputs(msgs, "aider_chat").flags)
    assert [e.type for e in extract_events(msgs, "aider_chat").events] == ["user", "answer", "user"]
