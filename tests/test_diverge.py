"""`ctxf diverge`: event extraction and normalization across formats, the alignment, the cause
classes on labelled synthetic pairs, the JSON contract, and the real SWE-bench pairs."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import context_forensics.cli.diverge  # noqa: F401  (registers `ctxf diverge` on the app)
from context_forensics.analysis.diverge import (
    CAUSES,
    Comparer,
    align,
    canonical_call,
    canonical_shell,
    diverge,
    diverge_runs,
    extract_events,
    is_read_only,
    normalize_output,
    task_pairs,
)
from context_forensics.cli import app
from context_forensics.config.settings import Config, Thresholds
from context_forensics.embed import HashingEmbedder, embedders as embed
from context_forensics.records import Message, ToolCall
from context_forensics.store.db import Store
from context_forensics.store.ingest import resolve_session
from helpers import CORPUS, FIXTURES

FX = FIXTURES / "diverge"
LABELS = json.loads((FX / "labels.json").read_text())


@pytest.fixture()
def store():
    with Store.open(":memory:") as s:
        yield s


def sid(store, name: str, fmt: str = "generic_json") -> str:
    return resolve_session(store, str(FX / f"{name}.json"), fmt=fmt)


def report(store, a: str, b: str, fmt: str = "generic_json", **kw) -> dict:
    return diverge(store, sid(store, a, fmt), sid(store, b, fmt), config=Config(), embedder=HashingEmbedder(),
                   **kw).to_dict()


def run(*args, env=None):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False, env=env)


@pytest.fixture()
def hashing_model(monkeypatch):
    """The CLI builds its embedder from the config; unit tests swap in the hashing stand-in."""
    monkeypatch.setattr(embed, "get_embedder", lambda *a, **k: HashingEmbedder())


# ============================================================================ normalization


@pytest.mark.parametrize("a, b", [
    ("cat shop/pricing.py", "cd /testbed && cat   /testbed/shop/pricing.py"),
    ("cat -n a/b.py", "cat /workspace/django__django__3.0/a/b.py"),
    ("nl -ba a/b.py | sed -n '10,20p'", "sed -n 10,20p ./a/b.py"),
    ("python3 -m pytest tests/t.py -q", "cd /testbed; python -m pytest tests/t.py -q"),
    ("cd /testbed/pkg && grep -n \"x y\" mod.py", "grep -n 'x y' pkg/mod.py"),
    ("head -n 30 a.py", "head -30 a.py"),
    ("ls -la", "ls -al ."),
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
     "echo MINI_SWE_AGENT_FINAL_OUTPUT"),
])
def test_equivalent_shell_commands_share_a_key(a, b):
    assert canonical_shell(a) == canonical_shell(b)


@pytest.mark.parametrize("a, b", [
    ("cat a.py", "cat b.py"),
    ("ls -R", "ls -la"),  # a different listing: a different output
    ("sed -n '1,20p' a.py", "sed -n '1,40p' a.py"),
    ("grep -n 'x y' a.py", "grep -n x y a.py"),  # quoting that changes the arguments
    ("python a.py", "python b.py"),
])
def test_different_shell_commands_keep_different_keys(a, b):
    assert canonical_shell(a) != canonical_shell(b)


def test_editor_tools_and_shell_equivalents_map_to_one_verb():
    root = "/workspace/shop__repo__1.0"

    def call(name, **args):
        return canonical_call(name, json.dumps(args))[0]

    assert call("str_replace_editor", command="view", path=f"{root}/a/b.py") == canonical_shell("cat a/b.py") \
        == call("Read", file_path="/testbed/a/b.py") == "view a/b.py"
    assert call("str_replace_editor", command="view", path=f"{root}/a/b.py", view_range=[5, 9]) \
        == canonical_shell("nl -ba a/b.py | sed -n '5,9p'") == "view a/b.py[5:9]"
    assert call("str_replace_editor", command="create", path=f"{root}/r.py", file_text="print(1)\nprint(2)\n") \
        == canonical_shell("cat <<'EOF' > r.py\nprint(1)\nprint(2)\nEOF")
    assert call("str_replace_editor", command="create", path="r.py", file_text="print(3)") \
        != canonical_shell("cat <<'EOF' > r.py\nprint(1)\nEOF")  # the content counts
    edit = call("str_replace_editor", command="str_replace", path=f"{root}/a.py", old_str="x = 1", new_str="x = 2")
    assert edit == canonical_shell("sed -i 's/x = 1/x = 2/' a.py") == call("Edit", file_path="/testbed/a.py",
                                                                         old_string="x = 1", new_string="x = 2")
    assert edit != canonical_shell("sed -i 's/x = 1/x = 3/' a.py")
    assert call("execute_bash",
                command="cd /workspace/shop__repo__1.0 && python3 r.py") == canonical_shell("python r.py")
    assert call("bash", command="ls") == call("shell", command=["bash", "-lc", "ls"]) == "list ."
    assert call("finish") == call("submit") == "submit"
    listing = canonical_call("str_replace_editor", json.dumps({"command": "view", "path": root}),
                             "Here's the files and directories up to 2 levels deep in /workspace/x, excluding hidden")
    assert listing[0] == "list . (2 levels)" != canonical_shell("ls")


def test_tool_output_wrappers_and_noise_are_removed():
    mini = normalize_output("<returncode>1</returncode>\n<output>\nFAILED in 0.12s at 2024-05-01 10:00:01\n"
                            "/testbed/a.py:3 0x7f3a2b1c\n</output>")
    oh = normalize_output("python t.py\r\n\x1b[0;31mFAILED\x1b[0m in 2.50s at 2025-01-02T03:04:05Z\r\n"
                          "/workspace/pkg__pkg__1.0/a.py:3 0x55d1\n[Python Interpreter: /opt/conda/bin/python]\n"
                          "root@openhands-workspace:/workspace/pkg__pkg__1.0 # \n[Command finished with exit code 1]",
                          command="python t.py")
    assert (mini.rc, mini.body) == (1, "FAILED in <dur> at <time>\na.py:3 <addr>")
    assert (oh.rc, oh.body) == (mini.rc, mini.body)
    view = normalize_output("Here's the result of running `cat -n` on /testbed/a.py:\n     1\tx = 1\n     2\ty = 2\n")
    assert view.body == normalize_output("<returncode>0</returncode>\n<output>\nx = 1\ny = 2\n</output>").body
    cut = normalize_output("<returncode>0</returncode>\n<warning>too long</warning><output_head>\na\n</output_head>"
                           "\n<elided_chars>\n900 characters elided\n</elided_chars>\n<output_tail>\nz\n</output_tail>")
    assert cut.truncated and cut.body == "a\n<elided>\nz"


def test_read_only_actions():
    for key in ("view a.py", "list . -R", "shell: grep -n x a.py | head", "shell: git diff", "shell: find . -name x",
                "find_file {\"file_name\": \"x\"}"):
        assert is_read_only("action:" + key), key
    for key in ("edit a.py #0", "create r.py #0", "shell: python r.py", "shell: sed -i s/a/b/ f", "shell: ls > out",
                "shell: git checkout f", "shell: find . -delete", "submit"):
        assert not is_read_only("action:" + key), key


def _m(role, text="", **kw):
    return Message(role=role, text=text, **kw)


def test_text_protocol_events_feedback_and_retries():
    msgs = [
        _m("system", "agent"), _m("user", "task"),
        _m("assistant", "THOUGHT: a\n```bash\nls\n```\n```bash\npwd\n```"),  # two blocks: the harness rejects it
        _m("user", "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."),
        _m("assistant", "THOUGHT: b\n```bash\npython t.py\n```"),
        _m("user", "<returncode>1</returncode>\n<output>\nboom\n</output>"),
        _m("assistant", "THOUGHT: again\n```bash\npython t.py\n```"),
        _m("user", "<returncode>0</returncode>\n<output>\nok\n</output>"),
        _m("user", "Also add a test."),
        _m("assistant", "Done, all good."),
    ]
    rev = extract_events(msgs, "mini_swe_agent")
    assert rev.protocol == "text"
    got = [(e.type, e.seq, e.step, e.skip) for e in rev.events]
    assert got == [("system", 0, 1, None), ("user", 1, 1, None), ("action", 2, 1, "rejected"),
                   ("user", 3, 2, "feedback"), ("action", 4, 2, "retry"), ("result", 5, 3, "retry"),
                   ("action", 6, 3, None), ("result", 7, 4, None), ("user", 8, 4, None), ("answer", 9, 4, None)]
    assert rev.events[7].rc == 0 and rev.events[7].parent == 6


def test_tool_calling_events_pair_results_by_call_id():
    msgs = [
        _m("user", "task"),
        _m("assistant", "two at once", tool_calls=(ToolCall("bash", '{"command": "ls"}', "c1"),
                                                 ToolCall("bash", '{"command": "pwd"}', "c2"))),
        _m("tool", "/testbed", tool_call_id="c2", name="bash"), _m("tool", "a.py", tool_call_id="c1", name="bash"),
        _m("user", "No tool calls found in the response. Every response MUST include at least one tool call.",
           meta={"interrupt_type": "FormatError"}),
    ]
    rev = extract_events(msgs, "openai_chat")
    assert rev.protocol == "tools"
    acts = [e for e in rev.events if e.type == "action"]
    results = [e for e in rev.events if e.type == "result"]
    assert [a.display for a in acts] == ["list .", "shell: pwd"]
    assert [(r.parent, r.text) for r in results] == [(acts[1].index, "."), (acts[0].index, "a.py")]
    assert rev.events[-1].skip == "feedback"
    assert all(e.skip is None for e in acts)  # results came back: the feedback rejected no turn


# ============================================================================ alignment


def _score(pairs, ta, ka, tb, kb, match=2, mismatch=-1, gap=-1):
    s = 0
    for i, j in pairs:
        if i < 0 or j < 0:
            s += gap
        elif ka[i] == kb[j]:
            s += match
        else:
            assert ta[i] == tb[j], "only events of one type pair up"
            s += mismatch
    return s


def _reference_nw(ta, ka, tb, kb, match=2, mismatch=-1, gap=-1):
    n, m = len(ka), len(kb)
    h = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 or j == 0:
                h[i][j] = (i + j) * gap
                continue
            s = match if ka[i - 1] == kb[j - 1] else (mismatch if ta[i - 1] == tb[j - 1] else -10**6)
            h[i][j] = max(h[i - 1][j - 1] + s, h[i - 1][j] + gap, h[i][j - 1] + gap)
    return h[n][m]


def test_alignment_is_optimal_and_covers_both_runs_in_order():
    rng = random.Random(7)
    for _ in range(300):
        n, m = rng.randint(0, 12), rng.randint(0, 12)
        ta = [rng.randint(0, 2) for _ in range(n)]
        tb = [rng.randint(0, 2) for _ in range(m)]
        ka = [t * 10 + rng.randint(0, 3) for t in ta]
        kb = [t * 10 + rng.randint(0, 3) for t in tb]
        pairs = align(ta, ka, tb, kb)
        assert [i for i, _ in pairs if i >= 0] == list(range(n))
        assert [j for _, j in pairs if j >= 0] == list(range(m))
        assert _score(pairs, ta, ka, tb, kb) == _reference_nw(ta, ka, tb, kb)


def test_alignment_prefers_the_longest_common_start():
    # A: x y y   B: x y — the tie is broken towards matching early: B simply ended
    assert align([0, 0, 0], [1, 2, 2], [0, 0], [1, 2]) == [(0, 0), (1, 1), (2, -1)]
    # an inserted step in B does not shift the rest
    assert align([0, 1, 0, 1], [1, 2, 3, 4], [0, 1, 0, 1, 0, 1], [1, 2, 5, 6, 3, 4]) == \
        [(0, 0), (1, 1), (-1, 2), (-1, 3), (2, 4), (3, 5)]
    # events of different types never pair, whatever their keys
    assert (0, 0) not in align([0], [1], [1], [1])


# ============================================================================ labelled pairs


@pytest.mark.parametrize("name", sorted(LABELS))
def test_labelled_pair(store, name):
    lab = LABELS[name]
    rep = report(store, lab.get("a", "base"), name, lab.get("format", "generic_json"))
    d = rep["divergence"]
    if lab["cause"] is None:
        assert d is None
        return
    assert {k: d[k] for k in ("cause", "a_step", "b_step", "a_seq", "b_seq")} == \
        {k: lab[k] for k in ("cause", "a_step", "b_step", "a_seq", "b_seq")}
    assert [p["cause"] for p in rep["preexisting"]] == lab.get("preexisting", [])
    if "word_diff" in lab:
        assert [{k: c[k] for k in ("deleted", "inserted")} for c in d["word_diff"]] == [lab["word_diff"]]
    if "decisive" in lab:
        want, dec = lab["decisive"], rep["decisive"]
        assert dec["differs"] and (dec["index"], dec["a_step"], dec["b_step"]) == \
            (want["index"], want["a_step"], want["b_step"])
        assert (dec["a"]["files"], dec["b"]["files"]) == (want["a_files"], want["b_files"])
        assert dec["a"]["in_other_patch"] is want["a_in_other_patch"]
        assert dec["b"]["hunk_source"] == want["b_hunk_source"] and dec["b"]["hunk"]
    if "patches" in lab:
        want, pt = lab["patches"], rep["patches"]
        assert {k: pt[k] for k in ("files_a", "files_b", "common_files", "hunks")} == \
            {k: want[k] for k in ("files_a", "files_b", "common_files", "hunks")}
        assert (pt["a"]["source"], pt["b"]["source"]) == (want["a_source"], want["b_source"])
    if "what_if" in lab:
        w = report(store, "base", name, model=lab["what_if"]["model"])["divergence"]
        assert w["cause"] == lab["what_if"]["cause"]
        assert (w["a_seq"], w["b_seq"]) == (lab["a_seq"], lab["b_seq"])


def test_every_cause_class_has_a_labelled_pair():
    causes = {lab["cause"] for lab in LABELS.values()} | {lab["what_if"]["cause"] for lab in LABELS.values()
                                                         if "what_if" in lab}
    assert set(CAUSES) <= causes


def test_identical_runs_and_run_with_noise_never_diverge(store):
    rep = report(store, "base", "same_noise")
    assert rep["divergence"] is None
    assert {r["op"] for r in rep["aligned"]} == {"match"}
    assert all(p["similarity"] == 1.0 for p in rep["curve"])


def test_retry_is_skipped_and_listed(store):
    rep = report(store, "base", "retry")
    assert rep["divergence"] is None
    assert [(s["seq"], s["type"], s["reason"]) for s in rep["skipped"]["b"]] == [(6, "action", "retry"),
                                                                                 (7, "result", "retry")]


def test_context_window_reports_what_left_one_window(store):
    d = report(store, "base", "compaction")["divergence"]
    lost = d["detail"]["lost_in_one_window"]
    assert {x["run"] for x in lost} == {"b"}
    assert (1, "user") in {(x["b_seq"], x["type"]) for x in lost}  # the task left B's window
    ctx = d["context"]
    assert ctx["a"]["lost_events"] == [] and ctx["a"]["counts"]["summarized"] == 0
    assert 1 in {e["seq"] for e in ctx["b"]["lost_events"]} and ctx["b"]["counts"]["summarized"] >= 1
    assert ctx["a"]["facts_gone"] is None and "no facts" in ctx["a"]["facts_note"]
    # without the compaction the same decision is just a decision
    assert report(store, "base", "action")["divergence"]["cause"] == "assistant_action"


def test_curve_falls_when_one_window_loses_events(store):
    rep = report(store, "base", "compaction")
    sims = {(p["a_step"], p["b_step"]): p["similarity"] for p in rep["curve"]}
    assert sims[(3, 3)] == 1.0  # same history, same window
    assert sims[(4, 4)] < 0.5  # B's window kept the system prompt and the reminder only
    ok = report(store, "base", "action")["curve"]
    assert [p["similarity"] for p in ok][:4] == [1.0, 1.0, 1.0, 1.0]


def test_cross_format_runs_align_step_for_step(store):
    rep = report(store, "xfmt_text", "xfmt_tools")
    assert rep["settings"]["cross_harness"] and rep["a"]["protocol"] == "text" and rep["b"]["protocol"] == "tools"
    before = rep["aligned"][: rep["divergence"]["row"]]
    assert [r["op"] for r in before if r["type"] == "action"] == ["match"] * 6
    # a create through the editor and a heredoc say different things when they succeed
    assert "tool_format" in {r["measure"] for r in before}
    d = rep["divergence"]
    assert (d["a_event"]["returncode"], d["b_event"]["returncode"]) == (0, 1)
    assert any(line.startswith("+FAILED") for line in d["diff"])


def test_the_free_text_threshold_comes_from_the_config(store):
    # generated free text (the assistant's answers) is matched by embedding similarity
    base = [_m("system", "s"), _m("user", "task"),
            _m("assistant", "", tool_calls=(ToolCall("bash", '{"command": "ls"}', "c1"),)),
            _m("tool", "a.py", tool_call_id="c1")]
    a = extract_events(base + [_m("assistant", "Done: the public function names are unchanged.")], "openai_chat")
    b = extract_events(base + [_m("assistant", "Done: the public function names stay unchanged.")], "openai_chat")
    sim = Comparer(HashingEmbedder()).compare([(a.events[-1], b.events[-1])])[0][0]
    assert 0.5 < sim < 1.0
    below = diverge_runs(a, b, Comparer(HashingEmbedder(), threshold=sim - 0.01))
    above = diverge_runs(a, b, Comparer(HashingEmbedder(), threshold=sim + 0.01))
    assert below.divergence is None and below.aligned[-1]["op"] == "similar"
    assert below.aligned[-1]["method"] == "embedding" and f"≥ threshold {sim - 0.01:.2f}" in below.aligned[-1]["reason"]
    d = above.divergence
    assert d["cause"] == "assistant_action" and d["similarity"] == sim
    assert (d["method"], d["threshold"]) == ("embedding", sim + 0.01)


def test_given_inputs_are_compared_as_text_never_by_cosine(store):
    """Issue 9 item 13: a user's words are given, not generated: a paraphrase the embedding
    would call the same is a different input (a ``user_input`` divergence with a word diff)."""
    base = [_m("system", "s"), _m("user", "task"),
            _m("assistant", "", tool_calls=(ToolCall("bash", '{"command": "ls"}', "c1"),)),
            _m("tool", "a.py", tool_call_id="c1")]
    a = extract_events(base + [_m("user", "Reminder: keep the public function names unchanged.")], "openai_chat")
    b = extract_events(base + [_m("user", "Reminder: the public function names must stay unchanged.")], "openai_chat")
    spaced = extract_events(base + [_m("user", "Reminder:  keep the public\n function names unchanged. ")],
                            "openai_chat")
    lazy = Comparer(HashingEmbedder(), threshold=0.01)  # any cosine would pass this threshold
    d = diverge_runs(a, b, lazy).divergence
    assert d["cause"] == "user_input" and (d["method"], d["similarity"], d["threshold"]) == ("text", None, None)
    assert [(c["deleted"], c["inserted"]) for c in d["word_diff"]] == [("keep", ""), ("", "must stay")]
    assert lazy.embedded == 0
    assert diverge_runs(a, spaced, lazy).divergence is None  # whitespace alone is no difference


def _tool_run(steps):
    msgs = [_m("system", "s"), _m("user", "task")]
    for k, (cmd, out) in enumerate(steps):
        msgs += [_m("assistant", "", tool_calls=(ToolCall("bash", json.dumps({"command": cmd}), f"c{k}"),)),
                 _m("tool", out, tool_call_id=f"c{k}")]
    return extract_events(msgs, "openai_chat")


def test_read_only_detours_that_rejoin_are_tolerated_unless_strict():
    tail = [("cat a.py", "x = 1"), ("sed -i 's/x = 1/x = 2/' a.py", ""), ("python a.py", "ok")]
    a = _tool_run([("ls", "a.py"), *tail])
    b = _tool_run([("ls -la", "-rw-r--r-- 1 root root 6 a.py"), ("grep -rn x .", "a.py:1:x = 1"), *tail])
    lenient = diverge_runs(a, b, Comparer(HashingEmbedder()))
    assert lenient.divergence is None
    assert lenient.detours == [{"a_steps": [1], "b_steps": [1, 2], "a": ["list ."],
                                "b": ["list . -al", "shell: grep -rn x ."],
                                "rejoined": {"a_step": 2, "b_step": 3, "a_seq": 4, "b_seq": 6}}]
    strict = diverge_runs(a, b, Comparer(HashingEmbedder()), tolerate_detours=False).divergence
    assert (strict["cause"], strict["a_step"], strict["b_step"]) == ("assistant_action", 1, 1)
    # a detour that writes something is a divergence
    c = _tool_run([("ls", "a.py"), ("touch b.py", ""), *tail])
    assert diverge_runs(a, c, Comparer(HashingEmbedder())).divergence["b_step"] == 2


def test_only_pairs_that_decide_the_divergence_are_embedded():
    start = [_m("system", "s"), _m("user", "task")]

    def run_of(cmds_and_outputs):
        msgs = list(start)
        for k, (cmd, out) in enumerate(cmds_and_outputs):
            msgs += [_m("assistant", "", tool_calls=(ToolCall("bash", json.dumps({"command": cmd}), f"c{k}"),)),
                     _m("tool", out, tool_call_id=f"c{k}")]
        return extract_events(msgs, "openai_chat")

    shared = [(f"python step{k}.py", f"line one of {k}\nline two of {k}\nok") for k in range(6)]
    a = run_of([("python fix_a.py", "done")] + shared)
    # B decides differently at step 1, then runs the same commands, whose outputs differ a bit
    b = run_of([("python fix_b.py", "done")] + [(c, o.replace("ok", "ok (cached)")) for c, o in shared])
    lazy = Comparer(HashingEmbedder())
    rep = diverge_runs(a, b, lazy)
    assert rep.divergence["cause"] == "assistant_action" and rep.divergence["a_step"] == 1
    assert lazy.embedded == 0
    later = [r for r in rep.aligned if r["type"] == "result" and r["a_step"] and r["a_step"] > 2]
    assert later and {r["measure"] for r in later} == {"not_compared"}
    # a comparison that was not made says so, and claims no figure (issue 9 item 12)
    assert {(r["method"], r["similarity"]) for r in later} == {("n/a", None)}
    assert all(r["reason"].startswith("not embedded: outside the pairs that decide") for r in later)
    eager = Comparer(HashingEmbedder())
    full = diverge_runs(a, b, eager, full=True)
    assert eager.embedded > 0 and {r["measure"] for r in full.aligned if r["type"] == "result"
                                   and r["a_step"] and r["a_step"] > 2} == {"embedding"}
    assert full.divergence["a_seq"] == rep.divergence["a_seq"]


def test_facts_gone_at_the_divergence(store):
    pytest.importorskip("context_forensics.analysis.facts")
    fact = "totals must round half up to whole cents"
    cfg = Config(facts=(fact,), analysis_thresholds=Thresholds(fact_presence_cosine=0.5))
    d = diverge(store, sid(store, "base"), sid(store, "compaction"), config=cfg,
                embedder=HashingEmbedder()).to_dict()["divergence"]
    assert d["context"]["a"]["facts_gone"] == []
    assert d["context"]["b"]["facts_gone"] == [fact]


# ============================================================================ store: pairs


def _ingest(db, name, task, outcome):
    r = run("ingest", FX / f"{name}.json", "--format", "generic_json", "--task", task, "--outcome", outcome,
            "--db", db)
    assert r.exit_code == 0, r.output


def test_task_pairs_pick_success_against_each_failure(tmp_path):
    db = tmp_path / "s.db"
    _ingest(db, "base", "T1", "success")
    _ingest(db, "action", "T1", "failure")
    _ingest(db, "tool", "T1", "failure")
    _ingest(db, "system", "T2", "success")  # no failure: no pair
    with Store.open(db) as store:
        pairs = task_pairs(store)
        by_source = {s["id"]: Path(s["source"]).stem for s in store.sessions()}
    assert sorted((t, by_source[a], by_source[b]) for t, a, b in pairs) == [("T1", "base", "action"),
                                                                           ("T1", "base", "tool")]


# ============================================================================ CLI


def test_cli_json_contract(tmp_path, hashing_model):
    r = run("diverge", FX / "base.json", FX / "action.json", "--format", "generic_json", "--json",
            "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert {"version", "a", "b", "divergence", "aligned", "curve"} <= data.keys()
    d = data["divergence"]
    assert {"a_step", "b_step", "a_seq", "b_seq", "cause", "similarity", "a_event", "b_event"} <= d.keys()
    assert d["cause"] == "assistant_action" and d["a_event"]["display"] == "edit shop/pricing.py"
    assert d["b_event"]["display"] == "edit tests/test_pricing.py"
    assert {"op", "type", "a_seq", "b_seq", "a_step", "b_step", "similarity"} <= data["aligned"][0].keys()
    assert {"a_step", "b_step", "similarity"} <= data["curve"][0].keys()


def test_cli_no_divergence_is_null_and_exit_0(tmp_path, hashing_model):
    r = run("diverge", FX / "base.json", FX / "same_noise.json", "--format", "generic_json", "--json",
            "--db", tmp_path / "s.db")
    assert r.exit_code == 0 and json.loads(r.stdout)["divergence"] is None
    text = run("diverge", FX / "base.json", FX / "same_noise.json", "--format", "generic_json",
               "--db", tmp_path / "s.db")
    assert text.exit_code == 0 and "no divergence" in text.stdout


def test_cli_task_and_all_tasks(tmp_path, hashing_model):
    db = tmp_path / "s.db"
    _ingest(db, "base", "T1", "success")
    _ingest(db, "tool", "T1", "failure")
    _ingest(db, "xfmt_text", "T2", "success")
    _ingest(db, "xfmt_tools", "T2", "failure")
    one = run("diverge", "--task", "T1", "--json", "--db", db)
    assert one.exit_code == 0 and json.loads(one.stdout)["divergence"]["cause"] == "tool_output"
    assert json.loads(one.stdout)["a"]["outcome"] == "success"
    allj = json.loads(run("diverge", "--all-tasks", "--json", "--db", db).stdout)
    assert [(p["task"], p["cause"], p["a_step"], p["b_step"]) for p in allj["pairs"]] == [
        ("T1", "tool_output", 4, 4), ("T2", "tool_output", 7, 7)]
    table = run("diverge", "--all-tasks", "--db", db, env={"COLUMNS": "200"})
    blocks = re.split(r"^(?=T\d )", table.stdout, flags=re.M)[1:]
    assert [b.split()[0] for b in blocks] == ["T1", "T2"]
    for b, p in zip(blocks, allj["pairs"]):  # each pair: its earliest and its decisive divergence
        assert re.search(rf"earliest\s+tool_output at A step {p['a_step']} · B step {p['b_step']}", b), b
        assert re.search(r"^\s+decisive\s+\S", b, re.M) and re.search(r"^\s+patches\s+\S", b, re.M), b
    assert {"decisive", "patches"} <= allj["pairs"][0].keys()


@pytest.mark.parametrize("args", [[], ["only-a"], ["--task", "T", "--all-tasks"], ["a", "b", "--task", "T"]])
def test_cli_usage_errors(tmp_path, args):
    r = run("diverge", *args, "--db", tmp_path / "s.db")
    assert r.exit_code == 2


def test_cli_unknown_task_is_a_usage_error(tmp_path):
    import context_forensics as ctxf

    ctxf.open_store(tmp_path / "s.db").close()  # a store without that task (a missing store is its own error)
    r = run("diverge", "--task", "nope", "--db", tmp_path / "s.db")
    assert r.exit_code == 2 and "no pair" in r.stderr


def test_cli_text_view_is_inert_and_side_by_side(tmp_path, hashing_model):
    evil = json.loads((FX / "action.json").read_text())
    evil[9]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"command": "str_replace", "path": "tests/[bold red]x[/bold red].py", "old_str": "\x1b[31mA", "new_str": "B"})
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(evil))
    r = run("diverge", FX / "base.json", path, "--format", "generic_json", "--db", tmp_path / "s.db",
            env={"COLUMNS": "160"})
    assert r.exit_code == 0
    assert "assistant_action" in r.stdout and "[bold red]x[/bold red]" in r.stdout
    assert "\x1b" not in r.stdout
    assert "step 4 · seq 9" in r.stdout  # both positions, in the panels


# ============================================================================ how pairs were compared (item 12)

METHOD_NAMES = ("exact", "text", "embedding", "lexical", "status", "n/a")


def test_results_of_different_harness_formats_are_not_comparable(store):
    """An editor's "File created successfully at: f" and a shell's empty output were printed as
    similarity 1.00 "≈"; they were never compared: ``n/a`` with the reason."""
    rep = report(store, "xfmt_text", "xfmt_tools")
    formats = [r for r in rep["aligned"] if r["measure"] == "tool_format"]
    assert formats
    for r in formats:
        assert r["similarity"] is None and r["op"] == "not_comparable" and r["method"] == "n/a"
        assert r["reason"] == "different harness result formats: not comparable (both succeeded)"
    # every compared pair says how; a figure only where one was computed and decided the row
    for r in rep["aligned"]:
        if r["a"] is not None and r["b"] is not None:
            assert r["method"] in METHOD_NAMES and r["reason"], r
        if r["method"] in ("n/a", "status") or (r["method"] == "text" and r["op"] != "preexisting"):
            assert r["similarity"] is None, r
        if r["op"] == "preexisting":
            assert (r["method"], r["measure"]) == ("text", "lines")  # the figure is the line overlap


def test_a_lexical_score_never_stands_beside_the_embedding_threshold(tmp_path, hashing_model):
    args = ["diverge", FX / "base.json", FX / "action.json", "--format", "generic_json", "--db", tmp_path / "s.db"]
    d = json.loads(run(*args, "--json").stdout)["divergence"]
    assert (d["method"], d["measure"], d["threshold"]) == ("lexical", "lexical", None)
    assert 0 < d["similarity"] < 1
    text = run(*args, env={"COLUMNS": "120", "NO_COLOR": "1"}).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("compared:"))
    assert f"lexical {d['similarity']:.2f}" in line and "threshold" not in line and "cosine" not in line


# ============================================================================ given inputs (item 13)


def test_a_system_prompt_one_sentence_longer_is_a_divergence_at_step_0(store):
    rep = report(store, "long_system", "long_system_sentence")
    d = rep["divergence"]
    assert (d["cause"], d["a_step"], d["b_step"], d["method"], d["similarity"]) == ("system_prompt", 0, 0, "text",
                                                                                  None)
    assert d["detail"]["read_at_step"] == {"a": 1, "b": 1} and d["context"]["a"]["step"] == 1
    assert rep["inputs"]["system_prompt"]["equal"] is False and rep["inputs"]["user_input"]["equal"] is True
    assert rep["settings"]["embedded_chunks"] == 0  # decided without the model


def test_tool_definitions_are_compared_as_text(store):
    rep = report(store, "tools_a.openai", "tools_b.openai", "openai_chat")
    d = rep["divergence"]
    assert (d["cause"], d["a_step"], d["b_step"], d["method"]) == ("tool_definitions", 0, 0, "text")
    # the schemas' JSON, word by word: the description's closing quote goes with its last word
    assert [(c["deleted"], c["inserted"]) for c in d["word_diff"]] == [('repository.",',
                                                                        'repository. Network access is off.",')]
    assert rep["inputs"]["tool_definitions"]["a_tools"] == ["bash", "str_replace_editor"]
    same = report(store, "tools_a.openai", "tools_a.openai", "openai_chat")
    assert same["divergence"] is None and same["inputs"]["tool_definitions"]["equal"] is True


# ============================================================================ edits and patches (item 14)


@pytest.mark.parametrize("cmd, edits", [
    ("rm docs/refactor.md 2>/dev/null; echo done", [("docs/refactor.md", "delete")]),
    ("rm -f a.md >/dev/null 2>&1", [("a.md", "delete")]),
    ("rm a.md &>/dev/null", [("a.md", "delete")]),
    ("sed -i 's/a/b/' x.py 2>/dev/null", [("x.py", "replace")]),
    ("git checkout x.py 2> /dev/null", [("x.py", "revert")]),
    ("rm a.py b.py", [("a.py", "delete"), ("b.py", "delete")]),
])
def test_a_redirection_is_not_a_file_the_command_changes(cmd, edits):
    """``2>/dev/null`` lexes to ``2``, ``>``, ``/dev/null``: neither ``2`` nor ``/dev/null`` is
    removed, reverted or edited (a real Pi session's `rm f 2>/dev/null` counted an edit of "2")."""
    from context_forensics.analysis.diverge import shell_edits

    assert [(e.path, e.op) for e in shell_edits(cmd)] == edits


def test_shell_edits_read_what_the_command_shows():
    from context_forensics.analysis.diverge import shell_edits

    def ops(cmd, created=None):
        return [(e.path, e.op, e.via, e.old, e.new, e.in_repo) for e in shell_edits(cmd, created)]

    assert ops("cd /testbed && sed -i 's/a = 1/a = 2/g' pkg/m.py && sed -i '3,4d' pkg/m.py") == [
        ("pkg/m.py", "replace", "sed", "a = 1", "a = 2", True), ("pkg/m.py", "changed", "sed", None, None, True)]
    assert ops("sed -i 's/import json/import html\\nimport json/' m.py") == [
        ("m.py", "replace", "sed", "import json", "import html\nimport json", True)]
    assert ops("cat <<'EOF' > /testbed/r.py\nprint(1)\nEOF\npython r.py") == [
        ("r.py", "create", "heredoc", None, "print(1)\n", True)]
    assert ops("cat <<'EOF' > /tmp/x.py\n1\nEOF")[0][-1] is False  # outside the repository
    script = "python - <<'PY'\nfrom pathlib import Path\np = Path('pkg/m.py')\ns = p.read_text()\n" \
             "old = 'a = 1'\np.write_text(s.replace(old, 'a = 2'))\nPY"
    assert ops(script) == [("pkg/m.py", "replace", "script", "a = 1", "a = 2", True)]
    regex = script.replace("s.replace(old, 'a = 2')", "re.sub(old, 'a = 2', s)")
    assert ops(regex) == [("pkg/m.py", "changed", "script", None, None, True)]
    reader = "python - <<'PY'\nprint(open('pkg/m.py').read())\nPY"
    assert ops(reader) == []  # reads only
    created: dict = {}
    assert ops("cat > fix.py <<'EOF'\nopen('pkg/m.py', 'w').write('x')\nEOF", created)[0][:2] == ("fix.py", "create")
    assert ops("python3 fix.py", created) == [("pkg/m.py", "changed", "script", None, None, True)]
    assert ops("rm -f r.py && git checkout -- pkg/m.py") == [("r.py", "delete", "shell", None, None, True),
                                                             ("pkg/m.py", "revert", "shell", None, None, True)]
    assert ops("echo x > notes.txt; ls > /dev/null") == [("notes.txt", "changed", "shell", None, None, True)]


def _bash_run(*commands):
    """A tool-calling run of bash commands (each answered with an empty result), as events."""
    msgs = [Message("system", "s"), Message("user", "Fix it.")]
    for i, cmd in enumerate(commands):
        msgs.append(Message("assistant", "", tool_calls=(ToolCall("bash", json.dumps({"command": cmd}), f"c{i}"),)))
        msgs.append(Message("tool", "", tool_call_id=f"c{i}"))
    return extract_events(msgs, "openai_chat")


def test_a_decisive_edit_a_later_checkout_put_back_says_so():
    """The corpus' mini-swe-agent django-11276 run made the good run's change (stdlib html.escape)
    at step 13, put the file back with `git checkout django/utils/html.py` at step 20 after the
    repository's own test_escape failed, and submitted a different one: its "first differing edit"
    is step 13, a change its final patch no longer holds, and the decisive edit says so."""
    from context_forensics.analysis.diverge.applied import effective_edits
    from context_forensics.analysis.diverge.decisive import decisive_edit, final_patch

    good = _bash_run("sed -i 's/return esc(t)/return html.escape(t)/' m.py")
    bad = _bash_run("sed -i 's/return esc(t)/return html.escape(t, quote=True)/' m.py", "python t.py",
                    "git checkout m.py", "sed -i 's/return esc(t)/return compat(t)/' m.py")
    ea, eb = effective_edits(good), effective_edits(bad)
    dec = decisive_edit(ea, eb, final_patch(good, None, ea), final_patch(bad, None, eb))
    assert dec["differs"] and (dec["a_step"], dec["b_step"]) == (1, 1)
    assert dec["b"]["reverted"] == {"step": 3, "seq": dec["b"]["reverted"]["seq"],
                                    "display": "shell: git checkout m.py"}
    assert dec["a"]["reverted"] is None
    assert "B's step 1 was put back at step 3 (shell: git checkout m.py)" in dec["reason"]
    assert dec["final"]["b"]["step"] == 4  # where the final patches differ: the edit after the checkout


def test_patch_hunks_are_change_blocks_and_rebuilds_fold_edits():
    from context_forensics.analysis.diverge import Block, Rebuild, compare_patches, parse_patch

    text = ("diff --git a/m.py b/m.py\nindex 1..2 100644\n--- a/m.py\n+++ b/m.py\n@@ -1,5 +1,5 @@\n-a = 1\n+a = 2\n"
            " b = 1\n c = 1\n-d = 1\n+d  =  2\n e = 1\n"
            "diff --git a/new.py b/new.py\nnew file mode 100644\nindex 0..3\n--- /dev/null\n+++ b/new.py\n"
            "@@ -0,0 +1 @@\n+print(1)\n")
    files = parse_patch(text)
    assert {p: (f.status, f.blocks) for p, f in files.items()} == {
        "m.py": ("modified", [Block("m.py", ("a = 1",), ("a = 2",)), Block("m.py", ("d = 1",), ("d  =  2",))]),
        "new.py": ("added", [Block("new.py", (), ("print(1)",))])}
    assert parse_patch("") == {} and parse_patch("no diff here") is None
    r = Rebuild()
    r.replace("m.py", "a = 1", "a = 5")
    r.replace("m.py", "a = 5", "a = 2")  # rewrites what the first edit wrote: one change, 1 -> 2
    r.create("scratch.py", "x")
    r.delete("scratch.py")
    r.replace("t.py", "x", "y")
    r.revert("t.py")
    r.changed("c.py")
    rebuilt = r.patch("test")
    assert rebuilt.reconstructed and sorted(rebuilt.files) == ["c.py", "m.py"]
    assert rebuilt.files["m.py"].blocks == [Block("m.py", ("a = 1",), ("a = 2",))] and rebuilt.files["c.py"].unknown
    from context_forensics.analysis.diverge import Patch

    cmp = compare_patches(Patch("submission", files, ""), rebuilt)
    assert cmp["common_files"] == ["m.py"] and cmp["hunks"] == {"common": 1, "only_a": 2, "only_b": 0}
    assert "B: c.py" in cmp["note"]  # its change is not countable, and says so


def test_decisive_edit_and_patches_in_the_cli(tmp_path, hashing_model):
    db = tmp_path / "s.db"
    args = ["diverge", FX / "fix_a.json", FX / "fix_b.json", "--format", "generic_json", "--db", db]
    data = json.loads(run(*args, "--json").stdout)
    assert data["divergence"]["cause"] == "assistant_action" and data["divergence"]["a_step"] == 3
    dec = data["decisive"]
    assert dec["a"]["hunk"] == ["-    return round(total, 2)",
                                "+    return total.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)"]
    assert dec["b"]["hunk"] == ["-    return round(total, 2)", "+    return round(total + Decimal('0.001'), 2)"]
    assert (dec["a"]["same_edit_in_other"], dec["b"]["same_edit_in_other"]) == (False, False)
    assert dec["same_before"] == 1 and dec["final"]["a"]["step"] == 6 and dec["final"]["b"]["step"] == 6
    text = run(*args, env={"COLUMNS": "80", "NO_COLOR": "1"}).stdout
    for heading in ("earliest divergence: assistant_action", "decisive divergence: the first differing edit: A step "
                    "6, B step 6", "final patches", "hunks: 1 in common, 1 only in A, 3 only in B"):
        assert heading in text, heading
    assert all(len(line) <= 80 for line in text.splitlines())
    assert not re.search(r"\d[\d,.%]*…", text)


def test_all_tasks_prints_earliest_and_decisive_at_80_columns(tmp_path, hashing_model):
    db = tmp_path / "s.db"
    _ingest(db, "fix_a", "T1", "success")
    _ingest(db, "fix_b", "T1", "failure")
    text = run("diverge", "--all-tasks", "--db", db, env={"COLUMNS": "80", "NO_COLOR": "1"}).stdout
    assert re.search(r"earliest\s+assistant_action at A step 3 · B step 3", text)
    assert re.search(r"decisive\s+edit #2 at A step 6 · B step 6: shop/pricing.py", text)
    assert re.search(r"patches\s+files A 1 · B 3 · in both 1; hunks in both 1 · only A 1 · only B 3", text)
    assert all(len(line) <= 80 for line in text.splitlines())


# ============================================================================ real corpus, real model


@pytest.fixture(scope="module")
def pairs_report(tmp_path_factory, minilm):
    """Every success/failure pair of ../shared/corpus/swebench-pairs, through the real model."""
    from context_forensics.store.ingest import ingest_paths

    root = CORPUS / "swebench-pairs"
    if not root.is_dir():
        pytest.skip(f"corpus not available: {root}")
    with Store.open(tmp_path_factory.mktemp("pairs") / "s.db") as store:
        ingest_paths(store, [root], recursive=True)
        out = []
        for task, a, b in task_pairs(store):
            rep = diverge(store, a, b, config=Config(), embedder=minilm).to_dict()
            out.append((task, rep))
    return out


@pytest.mark.integration
def test_real_pairs_all_run_with_mixed_formats(pairs_report):
    assert len(pairs_report) >= 5
    assert len({t for t, _ in pairs_report}) >= 4
    harnesses = {r[s]["harness"] for _, r in pairs_report for s in ("a", "b")}
    assert {"openhands/tools", "mini_swe_agent/text", "mini_swe_agent/tools"} <= harnesses
    for task, rep in pairs_report:
        assert rep["a"]["outcome"] == "success" and rep["b"]["outcome"] == "failure"
        d = rep["divergence"]
        assert d is not None and d["cause"] in CAUSES
        assert d["a_event"] is not None and d["b_event"] is not None
        assert len(rep["curve"]) > 3 and all(0 <= p["similarity"] <= 1 for p in rep["curve"])
        assert rep["curve"][0]["similarity"] > rep["curve"][-1]["similarity"]
        assert d["context"]["a"]["window_tokens"] > 0 and d["context"]["b"]["window_tokens"] > 0


@pytest.mark.integration
def test_real_pairs_do_not_diverge_on_harness_framing(pairs_report):
    for task, rep in pairs_report:
        d = rep["divergence"]
        # different harnesses: the instructions and the task template differ by construction
        assert d["cause"] not in ("system_prompt", "user_input"), task
        assert d["a_step"] >= 1 and d["b_step"] >= 1 and d["a_event"]["type"] in ("action", "answer", "result")
        if rep["settings"]["cross_harness"]:
            assert {p["cause"] for p in rep["preexisting"]} <= {"system_prompt", "user_input", "tool_definitions"}
            assert rep["preexisting"], task


@pytest.mark.integration
def test_real_pairs_normalize_across_formats(pairs_report):
    """A full-file view by mini-swe-agent (cut head/tail) and by OpenHands' editor (cat -n)
    compare as the same output; the same `view` with a different range is the same look."""
    measures = {r["measure"] for _, rep in pairs_report for r in rep["aligned"] if r["op"] == "similar"}
    assert {"truncated", "same_output"} <= measures
    # results of one action worded by different harnesses: not comparable, no similarity claimed
    formats = [r for _, rep in pairs_report for r in rep["aligned"] if r["measure"] == "tool_format"]
    assert formats and all(r["similarity"] is None and r["method"] in ("n/a", "status") for r in formats)
    assert {r["op"] for r in formats if r["method"] == "n/a"} == {"not_comparable"}
    by_task = {(t, rep["b"]["id"]): rep for t, rep in pairs_report}
    rep = next(r for (t, _), r in by_task.items() if t == "django__django-15127")
    assert rep["detours"] and rep["divergence"]["a_step"] == 4  # ls -la vs ls -R, then the same two views


@pytest.mark.integration
def test_minilm_decides_free_text_matches(store, minilm):
    base = [_m("system", "s"), _m("user", "Fix the rounding bug in shop/pricing.py."),
            _m("assistant", "", tool_calls=(ToolCall("bash", '{"command": "ls"}', "c1"),)),
            _m("tool", "a.py", tool_call_id="c1")]
    said = "I kept the public function names in shop/pricing.py unchanged."
    a = extract_events(base + [_m("assistant", said)], "openai_chat")
    para = extract_events(base + [_m("assistant", "I did not rename the public functions in shop/pricing.py.")],
                          "openai_chat")
    other = extract_events(base + [_m("assistant", "I rewrote the old tests to expect truncation.")], "openai_chat")
    comparer = Comparer(minilm, threshold=0.85)
    same = diverge_runs(a, para, comparer)
    assert same.divergence is None and same.aligned[-1]["op"] == "similar" and same.aligned[-1]["similarity"] > 0.85
    diff = diverge_runs(a, other, comparer).divergence
    assert diff["cause"] == "assistant_action" and diff["method"] == "embedding" and diff["similarity"] < 0.7
    # the same paraphrase as a *given* input is a different input, whatever the model says
    given = diverge_runs(extract_events(base + [_m("user", said)], "openai_chat"),
                         extract_events(base + [_m("user", "I did not rename the public functions in "
                                                           "shop/pricing.py.")], "openai_chat"), comparer)
    assert given.divergence["cause"] == "user_input" and given.divergence["method"] == "text"
    # the labelled free-text pair agrees with the hashing stand-in
    assert diverge(store, sid(store, "base"), sid(store, "user"), config=Config(),
                   embedder=minilm).divergence["cause"] == "user_input"


def test_alignment_keeps_a_long_common_prefix():
    # the common start is matched without the DP; the rest goes through it
    rng = np.random.default_rng(0)
    ka = rng.integers(0, 50, 600).tolist()
    pairs = align([0] * 600, ka, [0] * 600, ka[:300] + rng.integers(50, 90, 300).tolist())
    assert pairs[:300] == [(i, i) for i in range(300)]


# The decisive edits of the real pairs, checked against the trajectories by reading them:
# (A step, B step) of the first differing edit of the source files, and of the edits that wrote
# the first hunk only that run's final patch has (None: not traceable from the commands).
# - astropy-14365: A's sed makes _line_type_re case-insensitive and "NO" upper-cased; B puts
#   "(?i)" inside _command_re, which is embedded mid-pattern (and leaves "no" unhandled).
# - django-11206: A's patch script (step 15, run at 16) zeroes only >200-digit tiny numbers;
#   B returns "0.00..." whenever exponent < -decimal_pos, which also hits ordinary numbers.
# - django-11276 vs gemini: both add "import html" first (the same edit); A then returns
#   html.escape(..., quote=True), B's step-13 edit is equivalent but B reverts it (steps 20,
#   24) and at step 25 writes .replace('&#x27;', '&#39;'), the hunk that fails the new tests.
# - django-11276 vs gpt-5-mini: B's scripts (steps 7-8; its step-4 heredoc never applied) import
#   html.escape under another name and keep '&#39;'; none shows its change, so the final hunk is
#   not traced.
# - django-11815: A subscripts the enum by name (step 7); B's step 5 does the same, but its
#   step 14 narrows it to lazy-translation values only: the hunk that fails test_serialize_enums.
# - django-15127: A adds a setting_changed receiver that refreshes LEVEL_TAGS (step 13's script
#   never ran: its heredoc was cut at EOF, a SyntaxError; step 14's is then A's only edit that
#   can have written the hunk); B's sed recomputes the tags in level_tag and leaves
#   LEVEL_TAGS stale (test_override_settings_level_tags fails).
REAL_DECISIVE = {
    ("astropy__astropy-14365", "openhands/tools"): (1, (11, 8), (11, 8), 0),
    ("django__django-11206", "openhands/tools"): (1, (16, 10), (16, 10), 0),
    ("django__django-11276", "mini_swe_agent/text"): (2, (14, 13), (14, 25), 2),
    ("django__django-11276", "mini_swe_agent/tools"): (1, (13, 7), (13, None), 0),
    ("django__django-11815", "mini_swe_agent/tools"): (1, (7, 5), (7, 14), 0),
    ("django__django-15127", "mini_swe_agent/text"): (1, (14, 11), (14, 11), 0),
}


@pytest.mark.integration
def test_real_pairs_decisive_edit_and_patches(pairs_report):
    seen = set()
    for task, rep in pairs_report:
        key = (task, rep["b"]["harness"])
        if key not in REAL_DECISIVE:
            continue
        seen.add(key)
        index, steps, final, common = REAL_DECISIVE[key]
        dec, pt = rep["decisive"], rep["patches"]
        assert dec["differs"] and dec["index"] == index and (dec["a_step"], dec["b_step"]) == steps, key
        assert (dec["final"]["a"]["step"], dec["final"]["b"]["step"]) == final, key
        # the earliest divergence is exploration, well before the decisive edit
        assert rep["divergence"]["a_step"] < dec["a_step"] and rep["divergence"]["b_step"] < dec["b_step"], key
        assert pt["comparable"] and pt["hunks"]["common"] == common, key
        assert set(dec["a"]["files"]) <= set(pt["common_files"]), key
        reconstructed = {s for s in "ab" if rep[s]["format"] == "openhands"}
        assert {s for s in "ab" if pt[s]["reconstructed"]} == reconstructed, key  # no patch in OpenHands logs
    assert seen == set(REAL_DECISIVE)


@pytest.mark.integration
def test_real_pairs_say_how_each_pair_was_compared(pairs_report):
    for task, rep in pairs_report:
        d = rep["divergence"]
        assert d["method"] in METHOD_NAMES and d["reason"], task
        assert (d["threshold"] is None) == (d["method"] != "embedding"), task
        for r in rep["aligned"]:
            if r["a"] is not None and r["b"] is not None:
                assert r["method"] in METHOD_NAMES, (task, r)
            if r["method"] in ("n/a", "status"):
                assert r["similarity"] is None, (task, r)
    astropy = next(rep for t, rep in pairs_report if t == "astropy__astropy-14365")
    created = [r for r in astropy["aligned"] if r["b"] and r["b"].startswith("File created successfully")]
    assert created and all((r["method"], r["op"], r["similarity"]) == ("n/a", "not_comparable", None)
                           for r in created)


@pytest.mark.integration
def test_real_pairs_a_decision_is_not_said_to_follow_the_same_window(pairs_report):
    """Every corpus pair diverges first on a decision (``assistant_action``), across harnesses or
    models: the two windows at that step differ (18,544 vs 4,675 tokens on django-11276, other
    system prompts), so the explanation speaks of the aligned history and what of it either
    window lost, never of "the same window" (it said "same history and window" before)."""
    decisions = 0
    for task, rep in pairs_report:
        d = rep["divergence"]
        if d["cause"] != "assistant_action":
            continue
        decisions += 1
        ctx = d["context"]
        assert ctx["a"]["window_tokens"] != ctx["b"]["window_tokens"], task
        assert not re.search(r"same [^,;]*window", d["explanation"]), (task, d["explanation"])
        assert "aligned history" in d["explanation"], (task, d["explanation"])
        assert not ctx["a"]["lost_events"] and not ctx["b"]["lost_events"], task  # what "none of it lost" rests on
    assert decisions >= 5


def test_a_decision_without_replayed_windows_says_the_windows_were_not_compared():
    from context_forensics.analysis.diverge.causes import explain as cause_words

    assert "not compared" in cause_words("assistant_action", None, None, {})
    assert "none of it lost" in cause_words("assistant_action", None, None, {"windows_compared": True})


@pytest.mark.integration
def test_real_pairs_compare_given_inputs_as_text(pairs_report):
    by_key = {(t, rep["b"]["harness"]): rep for t, rep in pairs_report}
    # mini-swe-agent 1.x and live-swe-agent send the same system prompt; their task templates differ
    inputs = by_key[("django__django-15127", "mini_swe_agent/text")]["inputs"]
    assert inputs["system_prompt"]["equal"] is True and inputs["user_input"]["equal"] is False
    # OpenHands and live-swe-agent both record tool schemas, different by construction
    rep = by_key[("django__django-11276", "mini_swe_agent/tools")]
    assert "tool_definitions" in {p["cause"] for p in rep["preexisting"]}
    assert rep["inputs"]["tool_definitions"]["inferred"] == ["B"]


@pytest.mark.integration
def test_minilm_would_have_called_the_one_sentence_longer_prompt_the_same(minilm):
    """Why given inputs are compared as text: the embedding rule (cosine >= 0.85) matched these."""
    lab = json.loads((FX / "long_system_sentence.json").read_text())[0]["content"]
    ref = json.loads((FX / "long_system.json").read_text())[0]["content"]
    sim = Comparer(minilm)._embedding_similarity([(ref, lab)])[0]
    assert sim >= Config().analysis_thresholds.divergence_cosine


def test_free_text_said_the_other_way_round_does_not_match():
    """Issue 9 item 15 in diverge: two answers on the same words, one negating the other, are
    different answers whatever their cosine (facts' polarity rule, ``polarity.polarity_flip``)."""
    base = [_m("system", "s"), _m("user", "task"),
            _m("assistant", "", tool_calls=(ToolCall("bash", '{"command": "ls"}', "c1"),)),
            _m("tool", "a.py", tool_call_id="c1")]
    did = extract_events(base + [_m("assistant", "Done: I renamed the public functions in shop/pricing.py.")],
                         "openai_chat")
    did_not = extract_events(base + [_m("assistant", "Done: I did not rename the public functions in "
                                                     "shop/pricing.py.")], "openai_chat")
    same_way = extract_events(base + [_m("assistant", "Done: the public functions in shop/pricing.py keep "
                                                      "their names.")], "openai_chat")
    lazy = Comparer(HashingEmbedder(), threshold=0.01)  # any cosine would pass this threshold
    d = diverge_runs(did, did_not, lazy).divergence
    assert d["cause"] == "assistant_action" and (d["method"], d["similarity"]) == ("polarity", None)
    assert "polarity differs: 'renamed' vs 'I did not rename'" in d["reason"]
    assert lazy.embedded == 0  # decided by the words, before any embedding
    # a paraphrase without a flip is still left to the embedding
    assert diverge_runs(did_not, same_way, lazy).divergence is None and lazy.embedded > 0
