"""``ctxf check``: each check finds the disagreement it is for, on sessions built to hold one, and
finds nothing on a session that agrees with itself. The corpus sweep is ``test_check_corpus.py``."""

from __future__ import annotations

import json

import pytest

from context_forensics.analysis.check import CHECKS, check_session
from context_forensics.analysis.check.replay_checks import recorded_compactions
from context_forensics.analysis.check.totals_check import NO_TOTALS
from context_forensics.records import (
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    Message,
    Session,
    Usage,
    history_edit,
)
from context_forensics.store.db import Store, StoredMessage
from helpers import cli


@pytest.fixture()
def store(tmp_path):
    with Store.open(tmp_path / "s.db") as s:
        yield s


def _write(store, sid, msgs, model="gpt-4o"):
    with store.transaction():
        store.write_session(Session(sid, "test", messages=iter(msgs), model=model), sid=sid, source=sid,
                            source_hash=sid, parent_id=None)
    return sid


WORDS = "the parser keeps every token of the input and reports each error with its line " * 4


def _turns(n, prompts=None):
    """n user/assistant turns; assistant k records prompts[k] when given."""
    out = [Message("system", "You are a coding agent.")]
    for k in range(n):
        out.append(Message("user", f"step {k}: " + WORDS))
        usage = Usage(prompt_tokens=prompts[k], completion_tokens=5) if prompts else None
        out.append(Message("assistant", f"done {k}", usage=usage, model="gpt-4o"))
    return out


def _names(found):
    return sorted({f.check for f in found})


def _honest_prompts(store, n):
    """The prompt sizes the replay itself computes for ``_turns(n)`` (so the log agrees with it)."""
    from context_forensics.analysis.replay import replay_session

    sid = _write(store, "probe", _turns(n))
    return [s["window_tokens"] for s in replay_session(store, sid, None, policy="recorded").steps]


def test_a_session_that_agrees_with_itself_has_no_inconsistency(store):
    prompts = _honest_prompts(store, 6)
    sid = _write(store, "ok", _turns(6, prompts))
    res = check_session(store, sid)
    assert res.found == [] and res.consistent
    # the facts check runs with facts to check; totals with totals the log records (this one has none);
    # final_window with a window the log records at the end (Letta's in-context list; this one has none)
    assert res.ran == [n for n in CHECKS if n not in ("facts", "totals", "final_window")]
    assert res.skipped == {"totals": NO_TOTALS, "final_window": "the log records no final window"}


def test_a_recorded_prompt_far_from_the_window_is_listed_with_its_figures(store):
    prompts = _honest_prompts(store, 6)
    prompts[3] = prompts[3] * 2  # the log says the call read twice what ctxf rebuilds
    sid = _write(store, "far", _turns(6, prompts))
    found = [f for f in check_session(store, sid).found if f.check == "prompt_vs_window"]
    assert [f.step for f in found] == [4]
    assert found[0].figures["recorded"] == prompts[3] and found[0].figures["error"] < -0.25


def test_a_prompt_that_shrinks_with_no_recorded_edit_is_an_unrecorded_truncation(store):
    prompts = [10_000, 12_000, 14_000, 6_000, 8_000]  # history only grows, the prompt halves at step 4
    sid = _write(store, "shrink", _turns(5, prompts))
    found = [f for f in check_session(store, sid, only=["recorded_shrink"]).found]
    assert [(f.step, f.figures["recorded_before"], f.figures["recorded_after"]) for f in found] == [(4, 14_000, 6_000)]
    assert "no edit of the history" in found[0].message


def test_a_shrink_the_log_records_an_edit_for_is_no_inconsistency(store):
    msgs = _turns(3, [10_000, 12_000, 14_000])
    msgs += [history_edit("truncation", "evicted", [(1, 5)], "test:deleted_range", "dropped 1-4"),
             Message("user", "go on"), Message("assistant", "ok", usage=Usage(prompt_tokens=6_000), model="gpt-4o")]
    sid = _write(store, "edited", msgs)
    assert check_session(store, sid, only=["recorded_shrink"]).found == []


def test_a_small_fall_is_no_shrink(store):
    sid = _write(store, "small", _turns(4, [10_000, 12_000, 11_800, 13_000]))  # −200 tokens: a rounding
    assert check_session(store, sid, only=["recorded_shrink"]).found == []


def test_the_log_s_compaction_records_count_one_each_and_one_after_the_last_call_too():
    msgs = [Message("user", "a"), Message("assistant", "b"),
            Message("system", "", kind=KIND_COMPACTION_BOUNDARY),
            Message("user", "summary", kind=KIND_COMPACTION_SUMMARY),
            Message("assistant", "c"),
            history_edit("compaction", "summarized", [(0, 5)], "pi:compaction", "compacted"),
            Message("user", "summary 2", kind=KIND_COMPACTION_SUMMARY),
            history_edit("rewind", "evicted", [(0, 2)], "gemini_cli:$rewindTo", "rewound"),  # a user's rewind
            Message("user", "orphan summary", kind=KIND_COMPACTION_SUMMARY),  # the rewind's: no compaction
            Message("assistant", "d"),
            history_edit("truncation", "evicted", [(0, 2)], "cline:deleted", "dropped")]  # the agent cut it
    stored = [StoredMessage("s", i, m, m.hash) for i, m in enumerate(msgs)]
    assert recorded_compactions(stored) == [2, 5, 10]


def test_a_compaction_after_the_last_call_is_counted_or_listed(store):
    msgs = _turns(2) + [history_edit("compaction", "summarized", [(0, 4)], "pi:compaction", "compacted"),
                        Message("user", "the summary", kind=KIND_COMPACTION_SUMMARY)]
    sid = _write(store, "late", msgs)
    from context_forensics.analysis.replay import replay_session

    counted = replay_session(store, sid, None, policy="recorded").summary["compactions"]
    comp = check_session(store, sid, only=["compactions"]).found
    # the log holds one compaction; the check lists the replay's count when it is not one
    assert (counted == 1) == (comp == [])
    if comp:
        assert comp[0].figures["recorded"] == 1 and comp[0].figures["after_last_call"] == [len(msgs) - 2]


def test_an_implausible_calibration_is_listed():
    from context_forensics.analysis.check.replay_checks import calibration

    class Rep:
        fidelity = {"calibration": {"claude@0": {"offset": 72298.0, "ratio": -0.051, "method": "affine_ls", "n": 20},
                                    "claude@40": {"offset": 1200.0, "ratio": 1.08, "method": "affine_ls", "n": 20}}}

    class Inp:
        replay = Rep()

    found = calibration(Inp())
    assert [f.figures["groups"] for f in found] == [["claude@0"]]
    assert "-0.051" in found[0].message


def test_a_session_with_no_model_call_skips_the_checks_that_need_one(store):
    sid = _write(store, "empty", [Message("user", "hello")])
    res = check_session(store, sid)
    assert res.found == [] and "prompt_vs_window" in res.skipped and res.skipped["prompt_vs_window"]


def test_the_command_lists_findings_and_exits_3_with_fail(store, tmp_path, monkeypatch):
    sid = _write(store, "shrink", _turns(5, [10_000, 12_000, 14_000, 6_000, 8_000]))
    store.close()
    db = tmp_path / "s.db"
    r = cli(monkeypatch, "check", sid, "--db", db, "--json")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["version"] == 1 and data["totals"]["sessions"] == 1 and not data["consistent"]
    assert data["sessions"][0]["counts"]["recorded_shrink"] == 1
    r = cli(monkeypatch, "check", sid, "--db", db, "--fail", width=80)
    assert r.exit_code == 3
    assert "recorded_shrink" in r.stdout and "step 4" in r.stdout
    r = cli(monkeypatch, "check", sid, "--db", db, "--check", "nope")
    assert r.exit_code == 2 and "known checks" in r.stderr


def test_two_sessions_of_the_same_text_do_not_share_a_replay(store):
    """The replay cache was keyed by the messages' content hash, which leaves usage out: a second
    session of the same text got the first one's replay, its recorded prompts and its id."""
    from context_forensics.analysis.replay import replay_session

    a = _write(store, "a", _turns(3))
    b = _write(store, "b", _turns(3, [500, 600, 700]))
    ra = replay_session(store, a, None, policy="recorded")
    rb = replay_session(store, b, None, policy="recorded")
    assert [s["recorded_prompt_tokens"] for s in ra.steps] == [None, None, None]
    assert [s["recorded_prompt_tokens"] for s in rb.steps] == [500, 600, 700]
    assert rb.session_id == "b"


def test_a_call_the_log_never_answers_and_a_result_of_no_call_are_listed(store):
    from context_forensics.records import ToolCall

    msgs = [Message("user", "fix it"),
            Message("assistant", "reading", tool_calls=(ToolCall("read", '{"path": "a.py"}', "c1"),)),
            Message("user", "go on"),  # c1 never answered
            Message("assistant", "running", tool_calls=(ToolCall("bash", '{"command": "ls"}', "c2"),)),
            Message("tool", "a.py", tool_call_id="c2"),
            Message("tool", "stray", tool_call_id="c9"),  # answers no call
            Message("assistant", "done")]
    sid = _write(store, "pairs", msgs)
    found = check_session(store, sid, only=["tool_pairs"]).found
    assert [(f.step, f.seq, f.figures["call_id"]) for f in found] == [(1, 1, "c1"), (None, 5, "c9")]


def test_the_facts_check_lists_a_fact_reported_gone_where_the_window_holds_it_verbatim():
    """The check itself, on a report built to disagree with the window: a fact the window holds
    word for word (spacing and case aside) reported gone is listed at each such step."""
    from types import SimpleNamespace

    import numpy as np

    from context_forensics.analysis.check.facts_check import verbatim_but_absent
    from context_forensics.analysis.facts import GONE, PRESENT
    from context_forensics.analysis.replay.policies import KEPT

    fact = "Never modify files under tests/."
    msgs = [SimpleNamespace(message=Message("user", "Rules:\nnever  modify files under tests/ ...")),
            SimpleNamespace(message=Message("assistant", "ok"))]
    timeline = SimpleNamespace(joins=np.array([1, 0]), states=lambda i: np.array([KEPT, KEPT]))
    report = SimpleNamespace(facts=[SimpleNamespace(fact=fact, state=np.array([GONE, PRESENT]))])
    assert verbatim_but_absent(SimpleNamespace(messages=msgs), timeline, report) == [(fact, 1, 0)]
    report.facts[0].state = np.array([PRESENT, PRESENT])  # reported present: nothing to list
    assert verbatim_but_absent(SimpleNamespace(messages=msgs), timeline, report) == []


@pytest.mark.integration
def test_check_with_a_fact_runs_the_facts_check_with_the_real_model(store, tmp_path, monkeypatch):
    msgs = [Message("system", "Never modify files under tests/."), Message("user", "Fix the parser."),
            Message("assistant", "Reading parser.py first."), Message("user", "go on"), Message("assistant", "Done.")]
    sid = _write(store, "rule", msgs)
    store.close()
    r = cli(monkeypatch, "check", sid, "--db", tmp_path / "s.db", "--fact", "never modify files under tests/",
            "--json")
    assert r.exit_code == 0, r.stderr
    row = json.loads(r.stdout)["sessions"][0]
    assert "facts" in row["checks"] and row["counts"].get("facts", 0) == 0
