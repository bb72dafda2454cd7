"""A recorded prompt that falls while the history only grows, with no edit recorded, is an event
(an unrecorded truncation), never a silent "lost 0"; a Cline log's recorded replay follows Cline's
own context policy (issue 30, items 4 and 5).

Fixtures: tests/fixtures/unrecorded/cline_task (written for this test: a Cline 3.57-style
task folder with ui_messages.json only, as the corpus' Cline-Xray task_sample, whose recorded
prompt falls at request 12 with no deleted range recorded); the Pi compaction fixture with its
compaction entry taken out (built in tmp_path); the corpus task_sample without its recorded
ranges (``helpers.cline_without_ranges``, built in tmp_path).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_forensics.analysis.replay import replay_session
from context_forensics.analysis.replay.unrecorded import SHRINK_FRACTION, SHRINK_TOKENS
from context_forensics.records import KIND_HISTORY_EDIT, read_history_edit
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from context_forensics.tokens.calibration import PLAUSIBLE_RATIO
from helpers import FIXTURES, cline_without_ranges, replay_json, run

TASK = FIXTURES / "unrecorded" / "cline_task"
PI = FIXTURES / "compaction" / "pi" / "session.jsonl"
WITHIN = 0.25  # the window within 25% of the recorded prompt ...
SHARE = 0.90  # ... on at least 90% of the recorded calls




def events(rep, kind="unrecorded_truncation"):
    return {st["step"]: e for st in rep["steps"] for e in st["events"] if e["type"] == kind}


def test_a_cline_truncation_the_log_does_not_record_is_an_event_and_the_replay_follows_cline(tmp_path):
    rep = replay_json(TASK, tmp_path / "s.db")
    (step, e), = events(rep).items()
    assert step == 12
    assert (e["recorded"], e["recorded_before"], e["recorded_after"], e["policy"], e["applied"]) == (
        False, 170_000, 95_000, "cline", True)
    assert e["tokens_gone"] == 170_000 + e["tokens_added"] - 95_000 and e["tokens_added"] > 0
    # Cline keeps the first user-assistant pair and drops half the rest: API-history messages 2-11
    assert e["would_drop"] == list(range(2, 12)) and e["figures"]["deleted_range"] == [2, 11]
    assert rep["steps"][11]["newly_lost"] == list(range(2, 12))
    s = rep["summary"]
    assert (s["unrecorded_truncations"], s["unrecorded_truncation_steps"], s["lost_messages"]) == (1, [12], 10)
    at = json.loads(run("replay", TASK, "--db", tmp_path / "s.db", "--at", "12", "--json").stdout)
    window = at["windows"][0] if "windows" in at else at
    gone = {m["seq"] for m in window["messages"] if not m["in_window"]}
    assert gone == set(range(2, 12))
    assert all(m["left_by"]["type"] == "unrecorded_truncation" for m in window["messages"] if m["seq"] in gone)
    out = " ".join(run("replay", TASK, "--db", tmp_path / "s.db", width=80).stdout.split())
    assert "truncation (not recorded)" in out and "10 out" in out


def test_the_same_truncation_recorded_is_no_event_and_drops_the_same(tmp_path):
    items = json.loads((TASK / "ui_messages.json").read_text())
    calls = [i for i, x in enumerate(items) if x.get("say") == "api_req_started"]
    for x in items[calls[11] + 1:]:  # Cline writes the range on the entries after the call it was made for
        x["conversationHistoryDeletedRange"] = [2, 11]
    folder = tmp_path / "recorded"
    folder.mkdir()
    (folder / "ui_messages.json").write_text(json.dumps(items))
    rep = replay_json(folder, tmp_path / "s.db")
    assert events(rep) == {}
    (edit,) = [e for e in rep["steps"][11]["events"] if e["type"] == "history_edit"]
    assert edit["edit"] == "truncation" and edit["removed"] == 10


def _pi_without_compaction(tmp_path: Path) -> Path:
    rows = [json.loads(line) for line in PI.read_text().splitlines()]
    parent = {r["id"]: r["parentId"] for r in rows if r.get("type") == "compaction"}
    out = []
    for r in rows:
        if r.get("type") == "compaction":
            continue
        if r.get("parentId") in parent:
            r["parentId"] = parent[r["parentId"]]
        out.append(r)
    path = tmp_path / "pi.jsonl"
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in out))
    return path


def test_another_agent_gets_the_event_and_what_its_policy_would_drop_without_applying_it(tmp_path):
    rep = replay_json(_pi_without_compaction(tmp_path), tmp_path / "s.db")
    (step, e), = events(rep).items()
    assert (e["policy"], e["applied"], e["recorded_before"], e["recorded_after"]) == ("pi_0_14", False, 187_400, 29_900)
    assert e["would_drop"] and e["would_drop"] == sorted(e["would_drop"])
    assert rep["steps"][step - 1]["newly_lost"] == []  # the log holds no summary: nothing is removed
    assert rep["summary"]["unrecorded_truncations"] == 1 and rep["summary"]["compactions"] == 0
    fid = rep["fidelity"]
    assert fid["unfit_calls"] == 1 and [s["step"] for s in fid["steps"] if s.get("unfit")] == [step]
    assert any("left out of the calibration" in f for f in rep["flags"])


def test_the_report_says_it(tmp_path):
    html = tmp_path / "r.html"
    run("report", TASK, "--db", tmp_path / "s.db", "--html", html)
    page = html.read_text()
    assert "truncation (not recorded)" in page and "the recorded prompt fell from 170,000 to 95,000" in page


# ---------------------------------------------------------------- the corpus


def _within(rep) -> tuple[int, int]:
    rec = [s for s in rep.steps if s["recorded_prompt_tokens"]]
    ok = sum(abs(s["window_tokens"] - s["recorded_prompt_tokens"]) <= WITHIN * s["recorded_prompt_tokens"] for s in rec)
    return ok, len(rec)


@pytest.mark.integration
def test_the_corpus_cline_task_without_its_records_is_followed_as_cline_truncated(tmp_path):
    folder = cline_without_ranges(tmp_path)
    with Store.open(tmp_path / "s.db") as store:
        from helpers import corpus

        (sid,) = ingest_paths(store, [folder]).files[0].sessions
        (real_sid,) = ingest_paths(store, [corpus("cline/Cline-Xray/task_sample")]).files[0].sessions
        rep = replay_session(store, sid, policy="recorded", use_cache=False)
        # what Cline recorded, as seqs of the variant (the same API-history messages)
        real_msgs = [sm.message for sm in store.messages(real_sid)]
        var_msgs = [sm.message for sm in store.messages(sid)]
        seq_of: dict[int, list[int]] = {}  # an API-history message may be several stored ones (its results)
        for i, m in enumerate(var_msgs):
            if m.meta.get("history_index") is not None:
                seq_of.setdefault(m.meta["history_index"], []).append(i)
        recorded: dict[int, list[int]] = {}
        before: set[int] = set()  # deleted by earlier ranges
        k = 0
        for i, m in enumerate(real_msgs):
            if m.role == "assistant" and m.kind == "message":
                k += 1
            if m.kind == KIND_HISTORY_EDIT:
                a, b = read_history_edit(m.meta, i).figures["deleted_range"]
                recorded[k + 1] = [q for h in range(a, b + 1) for q in seq_of[h] if q not in before]
                before.update(recorded[k + 1])
        real_rep = replay_session(store, real_sid, policy="recorded", use_cache=False)
    ev = {st["step"]: e for st in rep.steps for e in st["events"] if e["type"] == "unrecorded_truncation"}
    assert sorted(ev) == [18, 27, 33, 39, 52]
    assert recorded.keys() == {18, 33, 39, 52}
    for step, seqs in recorded.items():  # the truncations Cline made, message for message
        assert ev[step]["would_drop"] == sorted(seqs) and ev[step]["applied"], step
    assert ev[27]["would_drop"] == [] and ev[27]["rewritten"]  # Cline's 30% rule: rewrites, no truncation
    assert rep.summary["compactions"] == 4 and rep.summary["compaction_steps"] == [18, 33, 39, 52]
    # the windows follow the recorded prompt as closely as with the records
    ok, n = _within(rep)
    assert ok >= SHARE * n, (ok, n)
    assert [s["window_tokens"] for s in rep.steps] == [s["window_tokens"] for s in real_rep.steps]
    for cal in rep.fidelity["calibration"].values():
        assert cal["plausible"] and PLAUSIBLE_RATIO[0] <= cal["ratio"] <= PLAUSIBLE_RATIO[1]


@pytest.mark.integration
def test_every_corpus_cline_session_stays_within_a_quarter_of_its_recorded_prompt(corpus_ingest):
    db, _ = corpus_ingest
    with Store.open(db) as store:
        cline = [s for s in store.sessions() if s["format"] == "cline" and s["usage_count"]]
        assert len(cline) >= 5
        for ses in cline:
            rep = replay_session(store, ses["id"], policy="recorded", use_cache=False)
            ok, n = _within(rep)
            assert ok >= SHARE * n, (ses["source"], ok, n)


def _falls(messages) -> set[int]:
    """Steps whose recorded prompt fell (beyond the thresholds) with no edit recorded since the
    previous recorded call of the same model: read from the log here, apart from the replay."""
    out, prev, marked, k = set(), None, False, 0
    for m in messages:
        if m.kind in ("compaction_boundary", "compaction_summary", "history_edit", "cleared_tool_result"):
            marked = True
        if m.role != "assistant" or m.kind != "message":
            continue
        k += 1
        r = m.usage.prompt_tokens if m.usage else None
        if not r:
            continue
        if prev and not marked and (prev[1] == m.model or not prev[1] or not m.model):
            if prev[0] - r >= max(SHRINK_TOKENS, SHRINK_FRACTION * prev[0]):
                out.add(k)
        prev, marked = (r, m.model), False
    return out


@pytest.mark.integration
def test_every_corpus_session_shows_each_unrecorded_fall_and_only_those(corpus_ingest):
    db, _ = corpus_ingest
    seen = 0
    with Store.open(db) as store:
        for ses in store.sessions():
            if not ses["step_count"]:
                continue
            rep = replay_session(store, ses["id"], policy="recorded", use_cache=False)
            ev = {st["step"]: e for st in rep.steps for e in st["events"] if e["type"] == "unrecorded_truncation"}
            assert set(ev) == _falls([sm.message for sm in store.messages(ses["id"])]), ses["source"]
            for step, e in ev.items():
                assert e["recorded"] is False and e["recorded_before"] > e["recorded_after"]
                assert rep.steps[step - 1]["recorded_prompt_tokens"] == e["recorded_after"]
                assert rep.steps[e["previous_step"] - 1]["recorded_prompt_tokens"] == e["recorded_before"]
            seen += len(ev)
            # item 4: a calibration applied to the windows is a plausible one, and no parts row
            # shows a scale beyond what its ratio allows
            cals = (rep.fidelity or {}).get("calibration") or {}
            for name, cal in cals.items():
                if cal["plausible"]:
                    assert PLAUSIBLE_RATIO[0] <= cal["ratio"] <= PLAUSIBLE_RATIO[1], (ses["source"], name)
            for st in rep.steps:
                p = st["parts"]
                shown = p["messages"] + p["cleared_placeholders"] + p["tool_definitions"] + p["framing"]
                assert abs(p["calibration_scale"]) <= (1 - PLAUSIBLE_RATIO[0]) * max(shown, 1) + 2, (
                    ses["source"], st["step"], p)
    assert seen >= 1  # the corpus' Cline rewrite (task_sample, step 27)


def test_a_fact_that_left_with_it_names_it_as_its_cause(tmp_path, hashing):
    """A fact read at request 4 leaves the window with Cline's truncation at step 12: its cause is
    that truncation, which the log did not record."""
    r = run("facts", TASK, "--db", tmp_path / "s.db", "--fact", "def part_4(): return 4", "--json")
    (fact,) = json.loads(r.stdout)["facts"]
    (dep,) = [d for d in fact["departures"] if d["step"] == 12]
    assert dep["cause"]["type"] == "unrecorded_truncation" and dep["cause"]["recorded"] is False


# A rewrite-only event as Cline-Xray task_sample's step 27 has it: the recorded prompt fell, and
# Cline's ContextManager only rewrote duplicate file reads (nothing dropped).
REWRITE_ONLY = {"type": "unrecorded_truncation", "policy": "cline", "recorded": False, "applied": True,
                "recorded_before": 167668, "recorded_after": 129005, "previous_step": 26, "tokens_added": 17215,
                "tokens_gone": 55878, "would_drop": [], "would_drop_tokens": 54570, "rewritten": [62, 66, 69],
                "tokens_before": 184499, "tokens_after": 129929, "basis": "Cline's ContextManager on the task folder"}


def test_a_rewrite_the_log_does_not_record_is_named_a_rewrite_not_a_truncation():
    """The JSON type stays ``unrecorded_truncation`` (a contract); what a person reads says what
    happened: duplicate file reads rewritten, nothing taken out."""
    from context_forensics.render.events import event_label
    from context_forensics.render.replay import _events_text

    label = event_label(REWRITE_ONLY)
    assert label.startswith("duplicate file reads rewritten (not recorded)") and "truncation" not in label
    cell = _events_text({"events": [REWRITE_ONLY]}).plain
    assert cell.startswith("duplicate file reads rewritten (not recorded)") and "truncation" not in cell
    assert "3 rewritten" in cell and "−55,878 tok" in cell
    dropped = {**REWRITE_ONLY, "would_drop": [2, 3], "rewritten": []}
    assert event_label(dropped).startswith("truncation (not recorded)")
    assert _events_text({"events": [dropped]}).plain.startswith("truncation (not recorded)")


@pytest.mark.integration
def test_cline_task_sample_step_27_reads_as_a_rewrite_in_the_table_report_and_view(tmp_path):
    from helpers import corpus

    task = corpus("cline/Cline-Xray/task_sample")
    db = tmp_path / "s.db"
    rep = replay_json(task, db)
    e = events(rep)[27]
    assert e["type"] == "unrecorded_truncation" and e["would_drop"] == [] and e["rewritten"]
    table = " ".join(run("replay", task, "--db", db, width=200).stdout.split())
    assert "duplicate file reads rewritten (not recorded)" in table and "truncation (not recorded)" not in table
    page = tmp_path / "r.html"
    assert run("report", task, "--db", db, "--html", page).exit_code == 0
    html = page.read_text()
    assert "duplicate file reads rewritten (not recorded)" in html and "truncation (not recorded)" not in html
    check = json.loads(run("replay", task, "--db", db, "--json").stdout)["check"]
    (fall,) = [i for i in check["inconsistencies"] if i["check"] == "recorded_shrink" and i["step"] == 27]
    assert "rewrite of duplicate file reads" in fall["accounted"] and "truncation" not in fall["accounted"]
    view = tmp_path / "v.html"
    assert run("view", task, "--db", db, "-o", view).exit_code == 0
    text = view.read_text()
    assert "duplicate file reads rewritten (not recorded)" in text and "truncation (not recorded)" not in text



def _ui(ts: int, say: str, text: str = "", kind: str = "say", **extra) -> dict:
    return {"ts": ts, "type": kind, kind: say, "text": text, **extra}


def test_a_cline_call_whose_record_was_removed_on_resume_is_named(tmp_path):
    """Cline-Xray task_sample, ui entries 38-50 (Cline 3.57): call 3 answers and its turn ends at a
    checkpoint (entry 44); a reply follows (reasoning, text: entries 45-46) with no api_req_started
    before it, the user resumes the task (47) and call 4 re-sends the tool result. Cline's
    resumeTaskFromHistory removes the last api_req_started when it has no cost and no cancelReason:
    the log implies a model call it does not record. The import warns, the replay names it at the
    step whose answer holds its reply, and no call is invented (steps stay the log's)."""
    req = lambda r, **k: json.dumps({"request": r, "tokensIn": 10, "tokensOut": 20, "cacheReads": 900,  # noqa: E731
                                     "cacheWrites": 0, "cost": 0.01, **k})
    ui = [_ui(1000, "task", "Read a.ts, then write the doc."),
          _ui(1001, "api_req_started", req("<task>Read a.ts, then write the doc.</task>"), conversationHistoryIndex=-1),
          _ui(1002, "reasoning", "Read it first.", conversationHistoryIndex=0),
          _ui(1003, "tool", json.dumps({"tool": "readFile", "path": "a.ts"}), conversationHistoryIndex=0),
          _ui(1004, "checkpoint_created", conversationHistoryIndex=1),
          _ui(1005, "reasoning", "Now I will write everything.", conversationHistoryIndex=2),
          _ui(1006, "text", "Writing the doc and the code.", conversationHistoryIndex=2),
          _ui(1007, "resume_task", kind="ask", conversationHistoryIndex=2),
          _ui(1008, "user_feedback", "just the doc", conversationHistoryIndex=2),
          _ui(1009, "api_req_started", req("[read_file for 'a.ts'] Result:\nexport const a = 1"),
              conversationHistoryIndex=1),
          _ui(1010, "completion_result", "Wrote the doc.", conversationHistoryIndex=2)]
    task = tmp_path / "1770000000000"
    task.mkdir()
    (task / "ui_messages.json").write_text(json.dumps(ui))
    db = tmp_path / "s.db"
    r = run("ingest", task, "--db", db, "--json")
    assert r.exit_code == 0 and "ui entry 5: a reply after the checkpoint of entry 4" in r.stdout
    rep = replay_json(task, db)
    assert len(rep["steps"]) == 2
    (e,) = [e for e in rep["steps"][0]["events"] if e["type"] == "unrecorded_call"]
    assert (e["ui_index"], e["after_checkpoint"], e["recorded"]) == (5, 4, False)
    assert not [e for e in rep["steps"][1]["events"] if e["type"] == "unrecorded_call"]
    out = " ".join(run("replay", task, "--db", db, "--all-steps", width=80).stdout.split())
    assert "then a model call the log does not record (ui entry 5)" in out


@pytest.mark.integration
def test_every_corpus_cline_task_names_the_calls_it_implies_and_does_not_record(corpus_ingest):
    """Every Cline session of the corpus: a reply after a checkpoint with no api_req_started before it
    is named at its step, and nowhere else (task_sample: ui entry 45, after call 3's checkpoint at 44)."""
    db, _ = corpus_ingest
    named: dict[str, list[tuple[int, int]]] = {}
    with Store.open(db) as st:
        for ses in st.sessions():
            if ses["format"] != "cline" or not ses["step_count"]:
                continue
            rep = replay_session(st, ses["id"], use_cache=False)
            found = [(s["step"],
                      e["ui_index"]) for s in rep.steps for e in s["events"] if e["type"] == "unrecorded_call"]
            implied = []
            ui_path = Path(ses["source"]) / "ui_messages.json"
            if ui_path.exists() and not (Path(ses["source"]) / "api_conversation_history.json").exists():
                ui = json.loads(ui_path.read_text())
                call, checkpoint = 0, None
                for i, e in enumerate(ui):
                    kind = e.get("say") if e.get("type") == "say" else e.get("ask")
                    if kind == "api_req_started":
                        call, checkpoint = call + 1, None
                    elif kind == "checkpoint_created" and call:
                        checkpoint = i
                    elif checkpoint is not None and e.get("type") == "say" and e.get("text") and kind in (
                            "reasoning", "text", "completion_result", "tool", "command"):
                        implied.append((call, i))
                        checkpoint = None
            assert found == implied, ses["source"]
            named[Path(ses["source"]).name] = found
    assert named.get("task_sample") == [(3, 45)]
