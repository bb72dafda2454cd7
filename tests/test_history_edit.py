"""Recorded history edits (records.history_edit markers): what the recorded policy, the token
counts, the fidelity comparison and the facts make of a truncation, a rewind or a condensing the
log recorded. The importers that write them (Cline, Roo, Gemini CLI, Pi) test their own."""

from __future__ import annotations

import pytest

from context_forensics.analysis.replay import prepare, replay_session
from context_forensics.analysis.replay.policies import STATE_NAMES
from context_forensics.config.models import ModelSpec
from context_forensics.records import (
    KIND_COMPACTION_SUMMARY,
    KIND_HISTORY_EDIT,
    Message,
    Session,
    ToolCall,
    Usage,
    history_edit,
    read_history_edit,
)
from context_forensics.store.db import Store
from context_forensics.tokens.counter import TokenCounter
from context_forensics.tokens.fidelity import step_tokens
from context_forensics.tokens.history import context_starts, edited_out

SPEC = ModelSpec("tiny", "approx", 100_000, 0, "left_truncation")


@pytest.fixture()
def store(tmp_path):
    with Store.open(tmp_path / "s.db") as s:
        yield s


def _write(store, sid, msgs):
    with store.transaction():
        store.write_session(Session(sid, "test", messages=iter(msgs)), sid=sid, source=sid, source_hash=sid,
                            parent_id=None)
    return sid


def _truncated():
    return [
        Message("system", "You are a coding agent."),                       # 0
        Message("user", "Fix the failing test in parser.py."),             # 1
        Message("assistant", "Reading it.", tool_calls=(ToolCall("read", '{"path": "parser.py"}', "c1"),)),  # 2
        Message("tool", "def parse(x):\n    return x\n" * 40, tool_call_id="c1"),  # 3
        Message("user", "Also keep the public API unchanged."),            # 4
        Message("assistant", "Noted."),                                    # 5  step 2
        history_edit("truncation", "evicted", [(2, 4)], "test:deleted_range",
                     "the agent deleted messages 2-3 from the history"),  # 6
        Message("user", "Go on."),                                         # 7
        Message("assistant", "Done."),                                     # 8  step 3
    ]


def test_a_marker_reads_back_with_its_ranges_clipped_to_earlier_messages():
    m = history_edit("rewind", "evicted", [(3, 9), (-2, 1)], "gemini_cli:$rewindTo", "rewound", tokens_before=500)
    assert m.kind == KIND_HISTORY_EDIT and m.role == "system"
    e = read_history_edit(m.meta, 5)
    assert e.ranges == ((3, 5), (0, 1)) and e.action == "evicted" and e.figures == {"tokens_before": 500}
    assert read_history_edit({"history_edit": {"ranges": [["a", 2], [4, 4]]}}, 9).ranges == ()
    assert read_history_edit({}, 3) is None
    with pytest.raises(ValueError):
        history_edit("x", "deleted", [], "s", "t")


def test_recorded_policy_evicts_exactly_what_the_edit_lists_and_says_so(store):
    sid = _write(store, "trunc", _truncated())
    rep = replay_session(store, sid, SPEC, policy="recorded")
    steps = rep.steps
    assert [s["message_seq"] for s in steps] == [2, 5, 8]
    edit = [e for s in steps for e in s["events"] if e["type"] == "history_edit"]
    assert len(edit) == 1 and steps[2]["events"] == edit
    e = edit[0]
    assert (e["edit"], e["action"], e["source"], e["removed"], e["recorded"]) == (
        "truncation", "evicted", "test:deleted_range", 2, True)
    assert e["parted_pairs"] == 0  # the call and its result left together
    prep = prepare(store, sid, SPEC, policy="recorded")
    assert e["tokens_before"] - e["tokens_after"] == int(prep.inp.tokens[2] + prep.inp.tokens[3]) > 0
    assert steps[2]["window_tokens"] == steps[2]["history_tokens"] - e["tokens_before"] + e["tokens_after"]
    assert sorted(steps[2]["newly_lost"]) == [2, 3]
    _, last = prep.run()
    assert [STATE_NAMES[int(x)] for x in last[:8]] == ["kept", "kept", "evicted", "evicted", "kept", "kept",
                                                       "kept", "kept"]


def test_the_marker_counts_no_tokens_and_is_no_step(store):
    sid = _write(store, "trunc", _truncated())
    prep = prepare(store, sid, SPEC, policy="recorded")
    assert int(prep.inp.tokens[6]) == 0
    assert 6 not in prep.inp.steps.tolist()


def test_simulated_policies_leave_the_markers_alone(store):
    sid = _write(store, "trunc", _truncated())
    rep = replay_session(store, sid, SPEC, policy="left_truncation")
    assert not [e for s in rep.steps for e in s["events"] if e["type"] == "history_edit"]
    assert all(not s["newly_lost"] for s in rep.steps)  # 100k tokens: nothing needs to go


def test_an_edit_that_parts_a_tool_call_from_its_result_follows_the_record(store):
    msgs = _truncated()
    msgs[6] = history_edit("truncation", "evicted", [(3, 4)], "test:deleted_range", "result only")
    sid = _write(store, "parted", msgs)
    rep = replay_session(store, sid, SPEC, policy="recorded")
    e = next(e for s in rep.steps for e in s["events"] if e["type"] == "history_edit")
    assert e["removed"] == 1 and e["parted_pairs"] == 1
    assert rep.steps[2]["newly_lost"] == [3]


def test_a_condensing_summarizes_and_its_summary_is_no_second_compaction(store):
    msgs = _truncated()[:6] + [
        history_edit("condense", "summarized", [(1, 6)], "test:condenseParent", "condensed 1-5"),
        Message("user", "Summary: fix the parser test, keep the public API.", kind=KIND_COMPACTION_SUMMARY),
        Message("assistant", "Continuing."),
    ]
    sid = _write(store, "condensed", msgs)
    rep = replay_session(store, sid, SPEC, policy="recorded")
    events = [e for s in rep.steps for e in s["events"]]
    assert [e["type"] for e in events] == ["history_edit"]  # no compaction event besides it
    assert events[0]["action"] == "summarized" and events[0]["removed"] == 5
    prep = prepare(store, sid, SPEC, policy="recorded")
    _, last = prep.run()
    assert STATE_NAMES[int(last[0])] == "kept" and {STATE_NAMES[int(x)] for x in last[1:6]} == {"summarized"}


def test_fidelity_counts_the_edited_history_as_sent(store):
    msgs = _truncated()
    msgs[8] = Message("assistant", "Done.", usage=Usage(prompt_tokens=1))
    assert edited_out(msgs, [2, 5, 8])[2].tolist() == [2, 3]
    assert edited_out(msgs[:6], [2, 5]) is None
    assert context_starts(msgs).tolist() == [0] * 9
    counter = TokenCounter(SPEC)
    steps, counts = step_tokens(msgs, counter)
    full = int(counts.tokens[:8].sum())
    assert steps[2].context == full - int(counts.tokens[2] + counts.tokens[3])
    assert steps[2].sent == (0, 1, 4, 5, 6, 7)
    assert steps[1].sent is None  # before the edit: the whole history


def test_a_summary_after_an_edit_does_not_restart_the_history():
    msgs = [Message("user", "a"), Message("assistant", "b"),
            history_edit("condense", "summarized", [(0, 2)], "s", "t"),
            Message("user", "sum", kind=KIND_COMPACTION_SUMMARY), Message("assistant", "c")]
    assert context_starts(msgs).tolist() == [0, 0, 0, 0, 0]
    # without the marker the summary starts the history afresh
    assert context_starts([msgs[0], msgs[1], msgs[3], msgs[4]]).tolist() == [0, 0, 0, 2]


def test_a_fact_the_edit_took_out_names_the_recorded_edit_as_its_cause(store):
    from context_forensics.analysis.facts import track_facts
    from context_forensics.embed import HashingEmbedder

    fact = "Also keep the public API unchanged."
    msgs = _truncated()
    msgs[6] = history_edit("truncation", "evicted", [(4, 6)], "test:deleted_range", "dropped 4-5")
    sid = _write(store, "fact", msgs)
    rep = track_facts(prepare(store, sid, SPEC, policy="recorded"), [fact], HashingEmbedder(), store)
    f = rep.facts[0]
    assert f.disappeared_at == 3
    assert f.cause["type"] == "history_edit" and f.cause["recorded"] is True and f.cause["seqs"] == [4]
    assert f.cause["event"]["edit"] == "truncation"


def test_replay_prints_the_recorded_edit(store, tmp_path):
    from typer.testing import CliRunner

    from context_forensics.cli import app

    sid = _write(store, "trunc", _truncated())
    store.close()
    r = CliRunner().invoke(app, ["replay", sid, "--db", str(tmp_path / "s.db"), "--model", "gpt-4o",
                                 "--policy", "recorded"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "truncation (recorded): 2 out" in " ".join(r.stdout.split())


def _twice_compacted():
    """Two recorded compactions in a row, the second summarizing everything before it, the first's
    marker included (Pi's before-compaction log: its compaction at step 304 summarizes the history
    that holds the marker of the one at step 174)."""
    return [
        Message("user", "Port the parser to the new API."),                 # 0
        Message("assistant", "Reading the old one."),                       # 1  step 1
        history_edit("compaction", "summarized", [(0, 2)], "test:compaction", "compacted 0-1"),  # 2
        Message("user", "Summary: port the parser.", kind=KIND_COMPACTION_SUMMARY),  # 3
        Message("assistant", "Porting."),                                   # 4  step 2
        history_edit("compaction", "summarized", [(0, 5)], "test:compaction", "compacted 0-4"),  # 5
        Message("user", "Summary: the parser is ported.", kind=KIND_COMPACTION_SUMMARY),  # 6
        Message("assistant", "Done."),                                      # 7  step 3
    ]


@pytest.mark.parametrize("policy", ["recorded", "left_truncation", "middle_out", "rolling_summary",
                                    "auto_compaction", "constraint_selection"])
def test_a_marker_is_never_lost(store, policy):
    """A marker is no text the model read: no edit, recorded or simulated, makes it a lost message
    (before, the second compaction counted the first one's marker among the messages it summarized)."""
    sid = _write(store, "twice", _twice_compacted())
    tiny = ModelSpec("tiny", "approx", 28, 0, "left_truncation")  # small enough that every policy acts
    rep = replay_session(store, sid, SPEC if policy == "recorded" else tiny, policy=policy)
    lost = {q for s in rep.steps for q in s["newly_lost"]}
    assert not lost & {2, 5}, (policy, lost)
    if policy == "recorded":
        assert lost == {0, 1, 3, 4}
        assert rep.summary["lost_messages"] == 4
        assert [e["removed"] for s in rep.steps for e in s["events"]] == [2, 2]  # 0-1, then 3-4: no marker
        prep = prepare(store, sid, SPEC, policy="recorded")
        _, last = prep.run()
        assert STATE_NAMES[int(last[2])] == "kept"  # where it is, a marker of no tokens
    for s in rep.steps:
        c = s["counts"]
        assert c["evicted"] + c["cleared"] + c["summarized"] == len({q for t in rep.steps[: s["step"]]
                                                                    for q in t["newly_lost"]}), (policy, s)


@pytest.mark.integration
def test_no_corpus_session_counts_a_marker_as_lost(corpus_ingest):
    """Every session of every agent in the corpus, under its recorded replay: no compaction boundary
    or history-edit marker is ever among the lost messages (Pi's before-compaction counted its first
    compaction's marker among the 259 messages its second one summarized, and in its 547 lost)."""
    from context_forensics.records import MARKER_KINDS

    db, _ = corpus_ingest
    markers_seen = 0
    with Store.open(db) as st:
        for ses in st.sessions():
            if not ses["step_count"]:
                continue
            kinds = [sm.message.kind for sm in st.messages(ses["id"])]
            markers_seen += sum(k in MARKER_KINDS for k in kinds)
            rep = replay_session(st, ses["id"], policy="recorded", use_cache=False)
            lost = {q for s in rep.steps for q in s["newly_lost"]}
            assert not [q for q in lost if kinds[q] in MARKER_KINDS], ses["source"]
            assert rep.summary["lost_messages"] == len(lost)
    assert markers_seen >= 5
