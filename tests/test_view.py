"""``ctxf view``: the page's data rebuilds every step's window exactly, the page is self-contained
and inert, and the command's errors are usage errors before any work (the browser tests are
tests/test_view_browser.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import context_forensics as ctxf
from context_forensics.analysis.replay import STATE_NAMES
from context_forensics.cli import app
from context_forensics.render.view import data_json, view_html
from helpers import COMPACTED, FIXTURES, OVERFLOW, PAIR_BAD as BAD, PAIR_GOOD as GOOD

XSS = FIXTURES / "view" / "xss.openai.json"
LOST = {"evicted", "summarized"}


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)



def page_states(run_data: dict, mi: int, step: int) -> list[tuple[int, str, int]]:
    """What the page computes for one step (view.js windowAt), in Python: a message joins at the
    first step after it, then takes the state of each change at or before the step."""
    md = run_data["models"][mi]
    steps = run_data["steps"]
    out = []
    for seq in range(steps[step - 1]):
        state = "kept"
        for s, code in md["changes"].get(str(seq), []):
            if s <= step:
                state = STATE_NAMES[code]
        tokens = md["tokens"][seq]
        kind = run_data["messages"][seq][2]
        left = md.get("rewritten", {}).get(str(seq))  # rewritten in place by the agent (Cline)
        cleared = (tokens if kind == "cleared_tool_result" else left if left is not None
                   else min(tokens, md["placeholder_tokens"]))
        cost = tokens if state in ("kept", "outside_local") else cleared if state == "cleared" else 0
        out.append((seq, state, cost))
    return out


def check_against_replay_at(log: Path, models: list[str], steps_to_check, tmp_path) -> dict:
    db = tmp_path / "v.db"
    data = ctxf.view(log, model=models, db=db).to_dict()
    (r,) = data["runs"]
    assert [m["model"] for m in r["models"]][1:] == models and r["models"][0]["policy"] == "recorded"
    for mi, md in enumerate(r["models"]):
        m = len(r["steps"])
        assert len(md["steps"]) == len(md["parts"]) == m
        for step in range(1, m + 1):  # every step: the parts add up to the window, messages to their part
            fields = dict(zip(data["step_fields"], md["steps"][step - 1]))
            parts = {p[0]: p[2] for p in md["parts"][step - 1]}
            assert sum(parts.values()) == fields["window_tokens"], (mi, step)
            costs = sum(c for _, _, c in page_states(r, mi, step))
            assert costs == parts.get("messages", 0) + parts.get("cleared_placeholders", 0), (mi, step)
        name = None if mi == 0 else md["model"]
        policy = "recorded" if mi == 0 else None
        for step in steps_to_check(m):  # an independent run of the policy up to the step: replay --at
            w = ctxf.window(log, step, model=name, policy=policy, db=db).to_dict()
            want = [(x["seq"], x["state"], x["window_tokens"]) for x in w["messages"]]
            assert page_states(r, mi, step) == want, (md["model"], step)
            assert [[p["kind"], p["tokens"]] for p in w["window_parts"]] == \
                [[p[0], p[2]] for p in md["parts"][step - 1]]
    return data


def test_the_intervals_rebuild_every_window_as_replay_at_prints_it(tmp_path):
    """The sample agent run under its own record, a model that evicts (gemma-7b's 8k window) and
    one whose policy rejects: every step against `replay --at`."""
    data = check_against_replay_at(OVERFLOW, ["gemma-7b", "gpt-4o-mini"], lambda m: range(1, m + 1), tmp_path)
    gemma = data["runs"][0]["models"][1]
    assert gemma["summary"]["first_loss_step"] is not None  # the case is not trivial: messages are lost
    assert any(STATE_NAMES[c] in LOST for ch in gemma["changes"].values() for _, c in ch)


@pytest.mark.integration
def test_a_cline_rewrite_and_truncation_the_log_did_not_record_are_rebuilt_step_by_step(tmp_path):
    """The corpus Cline task without its recorded ranges: the replay infers Cline's truncations and
    its duplicate-file-read rewrites (a rewritten message costs what is left of it, not the
    placeholder); the page rebuilds those windows as replay --at prints them."""
    from helpers import cline_without_ranges

    data = check_against_replay_at(cline_without_ranges(tmp_path), [], lambda m: [1, 17, 18, 26, 27, 28, 33, 39, 52, m],
                                   tmp_path)
    rec = data["runs"][0]["models"][0]
    assert rec["rewritten"] and all(int(v) < rec["tokens"][int(k)] for k, v in rec["rewritten"].items())
    assert {int(k) for k, evs in rec["events"].items() for e in evs if e["type"] == "unrecorded_truncation"} == {
        18, 27, 33, 39, 52}


@pytest.mark.integration
def test_a_recorded_compaction_is_rebuilt_step_by_step(tmp_path):
    """A real Claude Code session with a recorded compaction (ground truth) and a what-if under
    a smaller window; the steps around the compaction and a spread of others against replay --at."""
    if not COMPACTED.exists():
        pytest.skip(f"corpus file not available: {COMPACTED}")

    def some(m):
        return sorted({1, 2, 70, 71, 72, 73, m // 2, m - 1, m})

    data = check_against_replay_at(COMPACTED, ["gpt-4o-mini"], some, tmp_path)
    rec = data["runs"][0]["models"][0]
    (compaction,) = [e for evs in rec["events"].values() for e in evs if e["type"] == "compaction"]
    assert compaction["recorded"] and compaction["tokens_before"] > compaction["tokens_after"]
    # the summary the page shows is the log's: a compaction_summary message after the boundary
    kinds = {m[0]: m[2] for m in data["runs"][0]["messages"]}
    assert kinds[compaction["at"]] == "compaction_boundary" and kinds[compaction["at"] + 1] == "compaction_summary"


def test_each_message_text_is_stored_once_not_per_step(tmp_path):
    data = ctxf.view(OVERFLOW, model=["gemma-7b"], db=tmp_path / "v.db").to_dict()
    text = json.dumps(data)
    r = data["runs"][0]
    longest = max((m[4] for m in r["messages"] if m[4]), key=len)
    assert text.count(json.dumps(longest)[1:-1]) == 1
    # per-model data holds numbers per step and changes per message, no texts
    for md in r["models"]:
        assert longest not in json.dumps({k: v for k, v in md.items() if k != "model_notes" and k != "flags"})


def test_the_page_is_self_contained_and_its_csp_allows_only_its_own_script(tmp_path):
    out = tmp_path / "v.html"
    r = run("view", OVERFLOW, "--db", tmp_path / "v.db", "-o", out)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert str(out) in r.stdout and "12 steps" in r.stdout
    kb = re.search(r"\((\d+) kB;", r.stdout)  # a small page in kB, not "0.0 MB"
    assert kb and int(kb.group(1)) == round(out.stat().st_size / 1e3)
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=", page, re.I)
    assert not re.search(r"\b(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", page.split('id="ctxf-data"')[0], re.I)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "unsafe" not in csp
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "document.write" not in script
    assert oct(out.stat().st_mode & 0o777) == "0o600"  # it holds the log's text


def test_no_log_text_can_end_the_data_block():
    hostile = "</script><script>alert(1)</script><!-- \u2028\u2029 & <b>"
    data = {"runs": [{"session": {"id": "x", "title": hostile}}], "ctxf": "t", "kind": "session"}
    block = data_json(data)
    assert "<" not in block and ">" not in block and "\u2028" not in block
    assert json.loads(block) == data
    page = view_html(data)
    body = page.split('<script id="ctxf-data" type="application/json">', 1)[1]
    assert body.index("</script>") == len(data_json(data))  # the first </script> is the block's own
    assert "<title>ctxf view: &lt;/script&gt;" in page


def test_log_payloads_stay_data_in_the_page(tmp_path):
    out = tmp_path / "x.html"
    assert run("view", XSS, "--db", tmp_path / "v.db", "-o", out).exit_code == 0
    page = out.read_text()
    head, rest = page.split('<script id="ctxf-data" type="application/json">', 1)
    block, tail = rest.split("</script>", 1)
    # no tag outside the JSON data holds a payload: the title's copy is escaped text
    assert not re.search(r"<[^>]*__pwned", head) and "__pwned" not in tail
    assert "&lt;img src=x onerror=" in head
    assert "onerror" in block and "<" not in block
    data = json.loads(block)
    assert any("<script>window.__pwned = 1" in (m[4] or "") for m in data["runs"][0]["messages"])


def test_two_runs_carry_their_divergence(tmp_path):
    data = ctxf.view(GOOD, BAD, db=tmp_path / "v.db").to_dict()
    assert data["kind"] == "diverge" and len(data["runs"]) == 2
    dv = data["divergence"]
    d = ctxf.diverge(GOOD, BAD, db=tmp_path / "v.db").to_dict()
    assert dv["divergence"] == d["divergence"] and dv["aligned"] == d["aligned"]
    row = dv["aligned"][dv["divergence"]["row"]]
    assert (row["a_step"], row["b_step"]) == (dv["divergence"]["a_step"], dv["divergence"]["b_step"])


def test_facts_and_drift_follow_each_models_window(tmp_path, hashing):
    fact = "Add tiered discounts (5% over 100 EUR, 10% over 500 EUR)"  # the user's request: gemma-7b evicts it
    data = ctxf.view(OVERFLOW, model=["gemma-7b"], facts=[fact], drift=True, db=tmp_path / "v.db").to_dict()
    r = data["runs"][0]
    rec, gemma = r["models"]
    for md, name, policy in ((rec, None, None), (gemma, "gemma-7b", None)):
        want = ctxf.facts(OVERFLOW, [fact], model=name, db=tmp_path / "v.db").to_dict()["facts"][0]
        (got,) = md["facts"]
        assert got["disappeared_at"] == want["disappeared_at"]
        per_step = {s: st for a, b, st, _ in got["runs"] for s in range(a, b + 1)}
        assert per_step == {t["step"]: t["state"] for t in want["timeline"]}
    assert rec["facts"][0]["disappeared_at"] != gemma["facts"][0]["disappeared_at"]  # gemma's 8k window loses it
    drift = ctxf.drift(OVERFLOW, db=tmp_path / "v.db").to_dict()
    assert [s[:2] for s in r["drift"]["steps"]] == [[s["step"], s["score"]] for s in drift["steps"]]


def test_view_json_is_the_api_data_and_writes_no_page(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "v.db"
    r = run("view", OVERFLOW, "--db", db, "--json")
    assert r.exit_code == 0
    assert json.loads(r.stdout)["runs"][0]["models"] == ctxf.view(OVERFLOW, db=db).to_dict()["runs"][0]["models"]
    assert list(tmp_path.glob("*.html")) == []
    r = run("view", OVERFLOW, "--db", db)  # without -o: ctxf-view-ID.html in the current folder
    (page,) = tmp_path.glob("*.html")
    assert page.name == \
        f"ctxf-view-{json.loads(run('sessions', '--db', db, '--json').stdout)['sessions'][0]['id']}.html"
    assert page.name in r.stdout


def test_an_output_that_cannot_be_written_is_a_usage_error_before_any_work(tmp_path):
    db = tmp_path / "v.db"
    (tmp_path / "a-file").write_text("x")
    r = run("view", OVERFLOW, "--db", db, "-o", tmp_path / "a-file" / "v.html")
    assert r.exit_code == 2 and "is a file, not a folder" in r.output and "a-file/v.html" in r.output
    assert not db.exists()  # checked before the log was ingested
    r = run("view", OVERFLOW, "--db", db, "-o", tmp_path)
    assert r.exit_code == 2 and "is a folder" in r.output and not db.exists()
    r = run("view", OVERFLOW, "--db", db, "-o", "/proc/ctxf-view.html")  # a folder nobody can write, root included
    assert r.exit_code == 2 and "cannot write in /proc" in r.output and not db.exists()
    r = run("view", OVERFLOW, "--db", db, "-o", tmp_path / "new" / "v.html")  # a missing folder is made
    assert r.exit_code == 0 and (tmp_path / "new" / "v.html").exists()


def test_a_missing_store_or_session_is_named(tmp_path):
    r = run("view", "abc123", "--db", tmp_path / "none.db")
    assert r.exit_code == 2 and "no store at" in r.output and not (tmp_path / "none.db").exists()
    run("ingest", OVERFLOW, "--db", tmp_path / "s.db")
    r = run("view", "zzzz", "--db", tmp_path / "s.db")
    assert r.exit_code != 0 and "no session matches 'zzzz'" in r.output


def test_open_without_a_display_says_where_the_page_is(tmp_path, monkeypatch):
    import webbrowser

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    opened = []
    monkeypatch.setattr(webbrowser, "open", lambda *a, **k: opened.append(a) or True)
    out = tmp_path / "v.html"
    r = run("view", OVERFLOW, "--db", tmp_path / "v.db", "-o", out, "--open")
    assert r.exit_code == 0 and out.exists() and opened == []
    assert "no display" in r.stderr and str(out.resolve()) in r.stderr
    monkeypatch.setenv("DISPLAY", ":0")
    r = run("view", OVERFLOW, "--db", tmp_path / "v.db", "-o", out, "--open")
    assert r.exit_code == 0 and opened == [(out.resolve().as_uri(),)]


def test_params_go_to_the_what_if_replays_and_notes_say_what_is_not_drawn(tmp_path):
    db = tmp_path / "v.db"
    data = ctxf.view(OVERFLOW, model=["gemma-7b"], policy="sliding_window", params={"max_messages": 6}, db=db).to_dict()
    rec, what_if = data["runs"][0]["models"]
    assert (rec["policy"], what_if["policy"]) == ("recorded", "sliding_window")
    assert ctxf.replay(OVERFLOW, model="gemma-7b", policy="sliding_window", params={"max_messages": 6},
                       db=db).to_dict()["replays"][0]["summary"] == what_if["summary"]
    assert data["notes"] == ["no drift curve: add --drift (the default goal) or --goal TEXT"]
    two = ctxf.view(GOOD, BAD, facts=["BOM"], db=db).to_dict()
    assert all(md["facts"] is None for r in two["runs"] for md in r["models"])
    assert two["notes"] and "view of one session" in two["notes"][0]


def test_the_command_prints_the_notes_on_stderr(tmp_path):
    r = run("view", GOOD, BAD, "--fact", "BOM", "--db", tmp_path / "v.db", "-o", tmp_path / "d.html")
    assert r.exit_code == 0 and "divergence view" in r.stdout
    assert "note: facts and the drift curve are drawn in the view of one session" in r.stderr
