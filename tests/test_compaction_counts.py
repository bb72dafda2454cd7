"""Every compaction a log records is counted, of every record type and after the last call too:
in the replay's summary, the ``max_compactions`` rule and the views (issue 30, item 7)."""

from __future__ import annotations

import json

import pytest

from context_forensics.analysis.replay import is_compaction, replay_session
from context_forensics.analysis.replay.compaction_fidelity import recorded_compactions
from context_forensics.store.db import Store
from helpers import FIXTURES, run

# A Pi v3 session (the shape of the corpus' pi-mono session.jsonl): a compaction between its
# second and third calls, and a second one written after its last call.
AFTER = FIXTURES / "pi" / "compaction_after_last_call.jsonl"



def test_a_pi_compaction_and_one_after_the_last_call_are_both_counted(tmp_path):
    db = tmp_path / "s.db"
    rep = json.loads(run("replay", AFTER, "--db", db, "--json").stdout)["replays"][0]
    s = rep["summary"]
    assert (s["compactions"], s["compaction_steps"], s["compactions_after_last_call"]) == (2, [3], 1)
    (step_event,) = rep["steps"][2]["events"]
    assert (step_event["type"], step_event["edit"]) == ("history_edit", "compaction")  # typed history_edit, counted
    (after,) = rep["after_last_call"]
    assert (after["type"], after["edit"], after["at"], after["recorded_tokens_before"]) == (
        "history_edit", "compaction", 10, 1540)
    out = run("replay", AFTER, "--db", db, width=80).stdout
    assert "after the last call: compaction (recorded)" in " ".join(out.split())


def test_max_compactions_counts_them_too(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("audit:\n  rules:\n    max_compactions: {max: 1}\n")
    r = run("audit", AFTER, "--db", tmp_path / "s.db", "--config", cfg, "--json")
    (ses,) = json.loads(r.stdout)["sessions"]
    (res,) = [x for x in ses["results"] if x["rule"] == "max_compactions"]
    assert (res["status"], res["figure"]) == ("fail", 2)
    assert res["detail"]["compaction_steps"] == [3] and res["detail"]["compactions_after_last_call"] == 1
    assert "1 after the last call" in res["message"]


def test_the_report_and_the_view_say_it(tmp_path):
    db = tmp_path / "s.db"
    html = tmp_path / "r.html"
    run("report", AFTER, "--db", db, "--html", html)
    page = html.read_text()
    assert "2 (recorded) at step(s) 3, 1 after the last call" in page and "after the last call</td>" in page
    data = json.loads(run("view", AFTER, "--db", db, "--json").stdout)
    (md,) = data["runs"][0]["models"]
    assert md["summary"]["compactions"] == 2 and len(md["after_last_call"]) == 1


def _compaction_events(rep) -> tuple[int, int]:
    at_steps = sum(1 for st in rep.steps for e in st["events"] if is_compaction(e))
    return at_steps, sum(1 for e in rep.after_last_call if is_compaction(e))


@pytest.mark.integration
def test_every_corpus_session_counts_the_events_it_lists_and_every_recorded_compaction(corpus_ingest):
    db, _ = corpus_ingest
    checked = with_records = 0
    with Store.open(db) as store:
        for ses in store.sessions():
            if not ses["step_count"]:
                continue
            rep = replay_session(store, ses["id"], policy="recorded", use_cache=False)
            s = rep.summary
            at_steps, after = _compaction_events(rep)
            assert s["compactions"] == at_steps + after, ses["source"]
            assert s["compactions_after_last_call"] == after, ses["source"]
            assert s["compaction_steps"] == sorted({st["step"] for st in rep.steps
                                                    if any(is_compaction(e) for e in st["events"])}), ses["source"]
            assert s["unrecorded_truncations"] == sum(
                1 for st in rep.steps if any(e["type"] == "unrecorded_truncation" for e in st["events"]))
            # every compaction the log records is one of them, at its step or after the last call
            found = recorded_compactions(store, ses["id"])
            recorded = sum(1 for st in rep.steps for e in st["events"] if is_compaction(e) and e.get("recorded"))
            recorded += sum(1 for e in rep.after_last_call if is_compaction(e) and e.get("recorded"))
            assert recorded == len(found), (ses["source"], recorded, len(found))
            with_records += bool(found)
            checked += 1
    assert checked > 100 and with_records >= 5
