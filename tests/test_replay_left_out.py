"""What a harness never sends again is out of every later window, and the replay says so (issue 30).

Pi records a reply it cut off (``stopReason`` ``aborted`` / ``error``: the user pressed Esc, the
provider failed) and pi-ai's ``transformMessages`` skips it in every later request (pi-mono
packages/ai/src/providers/transform-messages.ts, "Skip errored/aborted assistant messages
entirely"). The call that produced it read its window as recorded; the next calls did not read it.

Fixture: tests/fixtures/pi/v2_hook.jsonl (a Pi v2 session: an aborted reply, then the answer).
"""

from __future__ import annotations

import json

import pytest

from context_forensics.analysis.replay import replay_session
from context_forensics.store.db import Store
from context_forensics.tool_output import CUT_OFF_STOPS
from helpers import FIXTURES, replay_json, run

V2 = FIXTURES / "pi" / "v2_hook.jsonl"


def test_a_cut_off_pi_reply_is_out_of_the_next_window_and_the_replay_says_so(tmp_path):
    db = tmp_path / "s.db"
    rep = replay_json(V2, db)
    first, second = rep["steps"]
    assert first["message_seq"] == 3 and second["message_seq"] == 4  # the aborted reply is call 1
    (e,) = [e for e in second["events"] if e["type"] == "left_out"]
    assert e["seqs"] == [3] and e["count"] == 1 and e["recorded"] is False and "transformMessages" in e["reason"]
    assert second["newly_lost"] == [3] and second["counts"]["evicted"] == 1
    assert not [e for e in first["events"] if e["type"] == "left_out"]  # its own call read its window
    at = json.loads(run("replay", V2, "--db", db, "--at", "2", "--json").stdout)
    (row,) = [m for m in at["messages"] if m["seq"] == 3]
    assert not row["in_window"] and row["left_by"]["type"] == "left_out" and row["left_step"] == 2
    out = " ".join(run("replay", V2, "--db", db, width=80).stdout.split())
    assert "1 cut-off reply left out (not recorded)" in out


@pytest.mark.integration
def test_no_corpus_pi_session_counts_a_cut_off_reply_in_a_later_window(corpus_ingest):
    """Every Pi session of the corpus, under its recorded replay: each reply Pi recorded as
    aborted / error leaves the window at the very next call and never counts again; no session of
    another agent leaves anything out this way."""
    db, _ = corpus_ingest
    cut_total = 0
    with Store.open(db) as st:
        for ses in st.sessions():
            if not ses["step_count"]:
                continue
            msgs = [sm.message for sm in st.messages(ses["id"])]
            rep = replay_session(st, ses["id"], policy="recorded", use_cache=False)
            events = {s["step"]: [e for e in s["events"] if e["type"] == "left_out"] for s in rep.steps}
            if ses["format"] != "pi":
                assert not any(events.values()), ses["source"]
                continue
            calls = [i for i, m in enumerate(msgs) if m.role == "assistant" and m.kind == "message"]
            cut = {i: k for k, i in enumerate(calls, start=1) if msgs[i].meta.get("stop_reason") in CUT_OFF_STOPS}
            cut_total += len(cut)
            left = {q: s for s, evs in events.items() for e in evs for q in e["seqs"]}
            assert left == {i: k + 1 for i, k in cut.items() if k < len(calls)}, ses["source"]
            lost: set[int] = set()
            for s in rep.steps:  # from the next call on, the reply is no part of any window
                lost.update(s["newly_lost"])
                assert all(q in lost for q, at in left.items() if at <= s["step"]), (ses["source"], s["step"])
    assert cut_total >= 40  # 47 in the corpus: 45 aborted, 2 error
