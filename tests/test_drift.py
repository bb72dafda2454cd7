"""Goal drift: the score mapping and bands, the window, the goal-left-window event, the explanation,
embedding economy, config, the CLI; and, with the real MiniLM, the labelled fixtures in
tests/fixtures/drift (on-topic stays >= MILD, off-topic ends CRITICAL) and the drift-chat samples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import context_forensics.cli.drift  # noqa: F401  registers `ctxf drift` (until cli.py imports it)
from context_forensics.analysis.drift import (
    MAX_CHUNKS_PER_MESSAGE,
    DriftReport,
    assistant_output,
    drift_curve,
    drift_phrases,
    drift_session,
    goal_from_messages,
    probability,
    scaled_similarity,
    score,
    verdict,
)
from context_forensics.analysis.replay import Timeline, prepare
from context_forensics.analysis.replay.policies import EVICTED, IN_WINDOW
from context_forensics.cli import app
from context_forensics.config.settings import Config, DriftConfig, ModelConfig, load_config
from context_forensics.embed import EmbedStats, HashingEmbedder, embedders as embed_mod, normalize
from context_forensics.errors import ConfigError, ExitCode
from context_forensics.records import Message, ToolCall
from context_forensics.store.db import Store
from context_forensics.store.ingest import resolve_session
from helpers import corpus

HERE = Path(__file__).parent
FIX = HERE / "fixtures" / "drift"
SAMPLES = HERE.parent / "sample_logs" / "drift-chat"
ON_TOPIC = ["agent-on-task.openai.json", "chat-on-topic-toast.sharegpt.json"]
VERDICTS_ALL = ("FRESH", "MILD", "MODERATE", "SEVERE", "CRITICAL")
OFF_TOPIC = ["agent-wanders-off.openai.json", "chat-drifts-to-travel.sharegpt.json"]


@pytest.fixture()
def store(tmp_path):
    with Store.open(tmp_path / "s.db") as s:
        yield s


def write_chat(tmp_path: Path, turns: list[tuple[str, str]], name: str = "chat.json", **extra) -> Path:
    """An OpenAI-chat session file from (role, text) turns."""
    p = tmp_path / name
    p.write_text(json.dumps({"model": "gpt-4o-mini", **extra,
                             "messages": [{"role": r, "content": t} for r, t in turns]}))
    return p


class TopicEmbedder:
    """Exact, hand-checkable vectors: one axis per topic word (alpha, beta, gamma, delta), summed."""

    name = "topic-axes"
    revision = "v1"
    dim = 4
    AXES = ("alpha", "beta", "gamma", "delta")

    def __init__(self):
        self.encoded: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.encoded.extend(texts)
        rows = [[t.lower().count(a) for a in self.AXES] for t in texts]
        return normalize(np.asarray(rows, dtype=np.float32))


def curve(store, path, embedder, *, goal=None, window_size=5, model=None, policy="recorded", config=None,
          timeline=True):
    sid = resolve_session(store, str(path))
    prep = prepare(store, sid, model, config=config, policy=policy)
    tl = Timeline.from_results(prep.inp, prep.run()[0]) if timeline else None
    return drift_curve(prep, tl, embedder, store, goal, window_size)


# ============================================================================ mapping and bands


def test_the_score_is_the_calibrated_probability_and_the_bands_are_its_ranges():
    """Issue 30, item 11: the score is 100 x P(on topic) of the window's three signals (the logistic
    model bench/drift.py calibrate fits on the labelled fit split), and a band is a probability range.
    Replaces the test of the old straight line through two similarity anchors (35 + 40 (s - off) /
    (on - off)): with similarity alone, 17 of 20 steps of a labelled on-topic session read MODERATE."""
    import math

    from context_forensics.analysis.drift import SIGNALS
    from context_forensics.analysis.drift.verdicts import INTERCEPT, ON_TOPIC_MEDIAN, PRIOR, WEIGHTS

    assert scaled_similarity(0.28) == pytest.approx(1) and scaled_similarity(0.14) == pytest.approx(0)
    assert scaled_similarity(0.5, on_topic=0.5, off_topic=0.1) == pytest.approx(1)
    sig = {"similarity": 0.7, "goal_words": 0.25, "keyword_cover": 0.4}
    z = INTERCEPT + sum(WEIGHTS[k] * sig[k] for k in SIGNALS) + math.log(PRIOR / (1 - PRIOR))
    assert probability(sig) == pytest.approx(1 / (1 + math.exp(-z)))
    for k in SIGNALS:  # more of any signal never lowers the probability
        ps = [probability({**sig, k: x}) for x in np.linspace(-1, 3, 41)]
        assert all(a < b for a, b in zip(ps, ps[1:])), k
    assert [score(p) for p in (0.0, 0.349, 0.35, 0.549, 0.55, 0.749, 0.75, 0.895, 0.9, 1.0)] == \
        [0, 35, 35, 55, 55, 75, 75, 90, 90, 100]
    assert [verdict(score(p)) for p in (0.34, 0.35, 0.55, 0.75, 0.9)] == ["CRITICAL", "SEVERE", "MODERATE", "MILD",
                                                                         "FRESH"]
    # the calibration's two ends: a window typical of the labelled on-topic ones reads FRESH; one with
    # nothing of the goal (no similarity above the off-topic anchor, none of its words) reads CRITICAL
    assert verdict(score(probability(ON_TOPIC_MEDIAN))) == "FRESH"
    assert verdict(score(probability({"similarity": 0.0, "goal_words": 0.0, "keyword_cover": 0.0}))) == "CRITICAL"


@pytest.mark.parametrize("score, band", [(100, "FRESH"), (90, "FRESH"), (89, "MILD"), (75, "MILD"),
                                         (74, "MODERATE"), (55, "MODERATE"), (54, "SEVERE"), (35, "SEVERE"),
                                         (34, "CRITICAL"), (0, "CRITICAL"), (None, None)])
def test_verdict_bands(score, band):
    assert verdict(score) == band


# ============================================================================ text pieces


def test_assistant_output_is_text_plus_argument_values_without_keys_or_tool_names():
    m = Message(role="assistant", text="Searching now.", tool_calls=(
        ToolCall("web_search", json.dumps({"query": "banana bread", "opts": {"lang": "en", "n": 3}, "tags": ["a b"]})),
        ToolCall("raw_tool", "not json at all"),
    ))
    out = assistant_output(m)
    assert out.splitlines() == ["Searching now.", "banana bread", "en", "a b", "not json at all"]
    assert "web_search" not in out and "query" not in out


def test_drift_phrases_are_found_as_written():
    text = "Bake it longer. Is there anything else I can help you with? Let me know if you need anything else!"
    assert drift_phrases(text) == ["Is there anything else I can help you with",
                                   "Let me know if you need anything else"]
    assert drift_phrases("The else branch handles anything odd.") == []


def test_goal_is_the_opening_system_and_user_messages(store, tmp_path):
    p = write_chat(tmp_path, [("system", "You are terse."), ("user", "Plan alpha."), ("user", "Also alpha beta."),
                              ("assistant", "ok alpha plan here"), ("user", "now gamma")])
    sid = resolve_session(store, str(p))
    g = goal_from_messages(store.messages(sid))
    assert g.seqs == (0, 1, 2) and g.source == "messages"
    assert g.parts == (("system", "You are terse."), ("user", "Plan alpha."), ("user", "Also alpha beta."))


def test_an_assistant_first_session_takes_its_first_user_message(store, tmp_path):
    p = write_chat(tmp_path, [("assistant", "Hello, how can I help?"),
                              ("user", "Explain alpha decay: which particle leaves the nucleus and why."),
                              ("assistant", "Alpha decay emits a helium nucleus.")])
    g = goal_from_messages(store.messages(resolve_session(store, str(p))))
    assert g.seqs == (1,) and g.text == "Explain alpha decay: which particle leaves the nucleus and why."
    rep = curve(store, p, TopicEmbedder())  # the goal joins the history at step 2: no event for that
    assert not any(s.events for s in rep.steps) and rep.steps[1].message_similarity == 1.0


def test_a_session_without_goal_text_is_not_judged_and_says_why(store, tmp_path):
    """Issue 30, item 12: a session drift cannot judge is "not judged" with the reason, never an
    exception (it used to raise UsageError, which made the audit's max_drift rule an error)."""
    p = write_chat(tmp_path, [("assistant", "alpha alpha alpha"), ("assistant", "beta beta beta")])
    e = TopicEmbedder()
    rep = curve(store, p, e)
    assert rep.state == "no_goal" and rep.goal.reason == "no_text" and "--goal" in rep.goal.explanation
    assert [s.verdict for s in rep.steps] == [None, None] and not e.encoded
    assert all(s.explanation.startswith("not judged: the session has no system or user text") for s in rep.steps)
    assert [s.score for s in rep.steps] == [None, None] and not any(s.judged for s in rep.steps)
    rep = curve(store, p, TopicEmbedder(), goal="alpha")
    assert rep.goal.source == "option" and [s.message_similarity for s in rep.steps] == [1.0, 0.0]


# ============================================================================ the window


def test_window_is_a_recency_weighted_mean_of_the_last_judged_replies(store, tmp_path):
    from context_forensics.analysis.drift import goal_keywords, terms

    sims = [1, 1, 1, 0, 0, 0, 1]  # alpha = on the goal, beta = off it
    goal = "alpha alpha alpha goal: the quarterly report summary"  # 5 content words: judged
    turns = [("user", goal)]
    replies = []
    for i, s in enumerate(sims):
        replies.append(f"reply {i} " + ("alpha alpha alpha" if s else "beta beta beta"))
        turns += [("assistant", replies[-1]), ("user", "next")]
    rep = curve(store, write_chat(tmp_path, turns), TopicEmbedder(), window_size=3)
    assert [s.message_similarity for s in rep.steps] == sims
    goal_stems = set(terms(goal).counts)
    kw = [st for st, _ in goal_keywords((("user", goal),))]
    shares = []
    for r in replies:  # the share of a reply's content words that the goal uses
        t = terms(r)
        shares.append(sum(c for st, c in t.counts.items() if st in goal_stems) / sum(t.counts.values()))
    assert shares[0] == 0.75 and shares[3] == 0.0  # "reply", "alpha" x3 / "reply", "beta" x3
    for k, st in enumerate(rep.steps):
        recent = list(range(max(0, k - 2), k + 1))
        w = np.arange(1, len(recent) + 1)
        assert st.similarity == pytest.approx(float(np.dot(w, [sims[i] for i in recent]) / w.sum()), abs=1e-4)
        assert st.signals["goal_words"] == pytest.approx(float(np.dot(w, [shares[i] for i in recent]) / w.sum()),
                                                         abs=1e-4)
        seen = set().union(*(terms(replies[i]).counts for i in recent))
        assert st.signals["keyword_cover"] == pytest.approx(sum(s in seen for s in kw) / len(kw), abs=1e-4)
        signals = {**st.signals, "similarity": scaled_similarity(st.similarity)}
        assert st.probability == pytest.approx(probability(signals), abs=1e-4)
        assert st.score == score(probability(signals)) and st.verdict == verdict(st.score)
        assert len(st.window) == len(recent) and st.window[-1] == st.message_seq
    v = [s.verdict for s in rep.steps]
    # on the goal: FRESH; [1,1,0] -> [1,0,0] -> [0,0,0] falls to CRITICAL; [0,0,1]: one on-goal reply after
    # two off-goal ones is already "where the conversation is now" and lifts the score
    assert v[:3] == ["FRESH"] * 3 and v[5] == "CRITICAL"
    scores = [s.score for s in rep.steps]
    assert scores[2] >= scores[3] >= scores[4] >= scores[5] < scores[6]
    s = rep.summary()
    assert s["final_verdict"] == v[6] and (s["worst_step"], s["worst_score"]) == (6, scores[5])
    assert s["first_step_at"]["CRITICAL"] <= 6


def test_replies_too_short_to_judge_keep_the_window_of_the_ones_before(store, tmp_path):
    turns = [("user", "alpha alpha task: the quarterly report summary"), ("assistant", "alpha alpha alpha plan"),
             ("user", "go"),
             ("assistant", "ok"), ("user", "go"), ("assistant", "beta beta beta tangent"), ("user", "go"),
             ("assistant", "{}")]
    rep = curve(store, write_chat(tmp_path, turns), TopicEmbedder())
    assert [s.judged for s in rep.steps] == [True, False, True, False]
    assert rep.steps[1].message_similarity is None and rep.steps[1].similarity == rep.steps[0].similarity
    assert rep.steps[3].similarity == rep.steps[2].similarity and rep.steps[3].window == rep.steps[2].window
    assert rep.summary()["judged_steps"] == 2


def test_no_judged_reply_yet_has_no_score_and_embeds_nothing(store, tmp_path):
    e = TopicEmbedder()
    rep = curve(store, write_chat(tmp_path, [("user", "alpha task: the quarterly report summary"),
                                             ("assistant", "ok")]), e)
    assert e.encoded == []
    (st,) = rep.steps
    assert st.score is None and st.verdict is None and "no assistant text" in st.explanation
    assert rep.summary()["final_verdict"] is None


def test_length_alone_does_not_move_a_reply(store, tmp_path):
    """The same content said once or fifty times (or padded with other on-goal sentences) scores the same."""
    e = HashingEmbedder()
    base = "The tiered discount applies five percent over one hundred euros in apply_discount."
    turns = [("user", "Add a tiered discount to apply_discount: five percent over one hundred euros."),
             ("assistant", base), ("user", "again"), ("assistant", "\n\n".join([base] * 50))]
    rep = curve(store, write_chat(tmp_path, turns), e)
    short, long = rep.steps[0].message_similarity, rep.steps[1].message_similarity
    assert long == pytest.approx(short, abs=1e-3)


def test_a_long_reply_is_sampled_evenly_and_its_chunks_embedded_once(store, tmp_path):
    e = TopicEmbedder()
    lines = [f"line {i} alpha beta {'gamma ' * (i % 3)}." for i in range(400)]
    turns = [("user", "alpha task: the quarterly report summary"), ("assistant", "\n".join(lines)), ("user", "go"),
             ("assistant", "\n".join(lines))]
    stats = EmbedStats()
    sid = resolve_session(store, str(write_chat(tmp_path, turns)))
    rep = drift_curve(prepare(store, sid, policy="recorded"), None, e, store, stats=stats)
    assert rep.chunks == 1 + 2 * MAX_CHUNKS_PER_MESSAGE
    assert stats.encoded == len(set(e.encoded)) == stats.unique <= 1 + MAX_CHUNKS_PER_MESSAGE
    assert rep.steps[0].message_similarity == rep.steps[1].message_similarity


def test_only_the_goal_and_assistant_output_are_embedded_and_a_rerun_embeds_nothing(store):
    e = TopicEmbedder()
    path = FIX / "agent-on-task.openai.json"
    curve(store, path, e)
    tool_outputs = [m.message.text for m in store.messages(resolve_session(store, str(path)))
                    if m.message.role == "tool"]
    assert not any(t in txt for t in e.encoded for txt in tool_outputs if len(t) > 20)
    assert not any("passed in" in t or "Traceback" in t for t in e.encoded)  # tool results never embedded
    assert len(e.encoded) == len(set(e.encoded))
    again = TopicEmbedder()
    stats = EmbedStats()
    sid = resolve_session(store, str(path))
    drift_curve(prepare(store, sid, policy="recorded"), None, again, store, stats=stats)
    assert again.encoded == [] and stats.encoded == 0 and stats.hits == stats.unique > 0


# ============================================================================ goal left the window


def tiny_config(preserve_system: bool) -> Config:
    return Config(model_mappings={"tiny": ModelConfig(tokenizer="approx", context_limit=700, reserved_output=100,
                                                      eviction_strategy="left_truncation",
                                                      preserve_system=preserve_system)})


@pytest.mark.parametrize("preserve_system", [True, False])
def test_goal_left_window_under_a_tiny_window_matches_the_replay(store, preserve_system):
    cfg = tiny_config(preserve_system)
    path = FIX / "agent-on-task.openai.json"
    rep = curve(store, path, HashingEmbedder(), model="tiny", policy=None, config=cfg)
    assert (rep.model, rep.policy) == ("tiny", "left_truncation")
    sid = resolve_session(store, str(path))
    prep = prepare(store, sid, "tiny", config=cfg)
    tl = Timeline.from_results(prep.inp, prep.run()[0])
    assert (tl.states(1) == EVICTED).any()  # the tiny window does evict the task
    expected = {sq: int(np.argmax(tl.states(sq) == EVICTED)) + 1 for sq in (0, 1) if (tl.states(sq) == EVICTED).any()}
    events = [(s.step, e) for s in rep.steps for e in s.events]
    seen = {sq: step for step, e in events for sq in e["seqs"]}
    assert seen == expected and all(e["states"][str(sq)] == "evicted" for _, e in events for sq in e["seqs"])
    assert rep.summary()["goal_left_window_step"] == min(expected.values()) == events[0][0]
    if preserve_system:
        assert set(expected) == {1} and all(np.isin(tl.states(0), IN_WINDOW))
        assert all(e["remaining"] == [0] and not e["all_gone"] for _, e in events)
    else:
        assert set(expected) == {0, 1} and events[-1][1]["all_gone"] and events[-1][1]["remaining"] == []
    assert all(e["type"] == "goal_left_window" for _, e in events)


def test_the_goal_leaving_the_window_is_any_goal_in_force_not_only_the_segment_s(store, tmp_path):
    """Every request joins the goals in force, so the opening still is one after a new task opened a
    segment. pi/pi-mono/before-compaction.jsonl: the recorded compaction at step 174 summarized the
    opening request (seq 0) and the ten requests after it, while the segment's own goal (seq 288,
    "i reviwed what we have, it's good. continue") stayed: drift said goal_left_window_step null."""
    pad = " ".join(["alpha"] * 150)
    turns = [("user", ALPHA_TASK), ("assistant", "alpha report draft " + pad),
             ("user", BETA_TASK), ("assistant", "beta beta memo draft " + " ".join(["beta"] * 150)),
             ("assistant", "beta memo budget " + " ".join(["beta"] * 150)),
             ("assistant", "beta memo finance " + " ".join(["beta"] * 150)),
             ("assistant", "beta memo done " + " ".join(["beta"] * 150))]
    path = write_chat(tmp_path, turns)
    cfg = tiny_config(False)
    rep = curve(store, path, TopicEmbedder(), model="tiny", policy=None, config=cfg)
    assert [g.opened_by for g in rep.segments] == ["opening", "new_task"]
    sid = resolve_session(store, str(path))
    prep = prepare(store, sid, "tiny", config=cfg)
    tl = Timeline.from_results(prep.inp, prep.run()[0])
    gone = int(np.argmax(tl.states(0) == EVICTED)) + 1
    assert (tl.states(0) == EVICTED).any() and rep.steps[gone - 1].segment == 1  # the opening left in segment 1
    assert 0 in rep.steps[gone - 1].goal_seqs
    (e,) = [e for e in rep.steps[gone - 1].events if e["type"] == "goal_left_window"]
    assert e["seqs"] == [0] and e["states"] == {"0": "evicted"} and not e["all_gone"] and 2 in e["remaining"]
    assert rep.summary()["goal_left_window_step"] == gone


def test_no_goal_events_under_the_recorded_policy_or_an_explicit_goal(store):
    path = FIX / "agent-on-task.openai.json"
    assert not any(s.events for s in curve(store, path, HashingEmbedder()).steps)
    cfg = tiny_config(False)
    rep = curve(store, path, HashingEmbedder(), goal="fix parse_invoice_date", model="tiny", policy=None, config=cfg)
    assert not any(s.events for s in rep.steps) and rep.summary()["goal_left_window_step"] is None


# ============================================================================ explanation and phrases


def test_explanation_names_missing_goal_keywords_new_topics_and_an_off_goal_phrase(store, tmp_path):
    turns = [("user", "Fix the Northwind invoice parser: parse_invoice_date rejects timezone offsets."),
             ("assistant", "I fixed parse_invoice_date in the Northwind invoice parser to accept offsets."),
             ("user", "thanks"),
             ("assistant", "Banana bread: mash bananas, add butter, sugar and flour, bake the bananas loaf. "
                           "Is there anything else I can help you with?")]
    rep = curve(store, write_chat(tmp_path, turns), HashingEmbedder(), window_size=1)
    first, last = rep.steps
    assert "parse_invoice_date" in rep.keywords and "northwind" in rep.keywords
    assert first.missing_keywords == [k for k in rep.keywords if k in ("rejects", "timezone")]
    assert {"parse_invoice_date", "northwind", "invoice", "parser"} <= set(last.missing_keywords)
    assert last.new_topics[0] == "banana" and "flour" in last.new_topics
    assert last.phrases == ["Is there anything else I can help you with"]
    lines = last.explanation.split("\n")
    assert len(lines) == 2 and "missing:" in lines[0] and "banana" in lines[1] and "no progress" in lines[1]
    assert first.phrases == [] and rep.summary()["drift_phrase_steps"] == [2]


def test_an_offer_to_help_after_on_goal_work_is_not_a_drift_phrase(store, tmp_path):
    turns = [("user", "alpha alpha task: the quarterly report summary"),
             ("assistant", "alpha alpha alpha done. Let me know if you need anything else.")]
    (st,) = curve(store, write_chat(tmp_path, turns), TopicEmbedder()).steps
    assert st.verdict == "FRESH" and st.phrases == []


# ============================================================================ config


def test_drift_config_defaults_and_values(tmp_path):
    assert Config().drift == DriftConfig(goal=None, window_size=5, on_topic_similarity=0.28, off_topic_similarity=0.14)
    p = tmp_path / "c.yaml"
    p.write_text("drift:\n  goal: Ship the invoice fix\n  window_size: 3\n  on_topic_similarity: 0.5\n"
                 "  off_topic_similarity: 0.1\n")
    assert load_config(p).drift == DriftConfig("Ship the invoice fix", 3, 0.5, 0.1)


@pytest.mark.parametrize("text, where, needle", [
    ("drift:\n  windowsize: 3\n", "drift.windowsize",
     "allowed keys: goal, window_size, on_topic_similarity, off_topic_similarity"),
    ("drift:\n  window_size: 0\n", "drift.window_size", "must be ≥ 1"),
    ("drift:\n  window_size: 2.5\n", "drift.window_size", "must be an integer"),
    ("drift:\n  goal: ''\n", "drift.goal", "non-empty string"),
    ("drift:\n  on_topic_similarity: 2\n", "drift.on_topic_similarity", "between -1.0 and 1.0"),
    ("drift:\n  on_topic_similarity: 0.1\n  off_topic_similarity: 0.3\n", "drift.on_topic_similarity",
     "must be above drift.off_topic_similarity"),
    ("drift: [1]\n", "drift", "must be a mapping"),
])
def test_bad_drift_config_names_file_key_and_fix(tmp_path, text, where, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    last = where.rsplit(".", 1)[-1]  # the line the key is on
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith(f"{last}:"))
    assert f"{p}:{line}: {where}" in msg and needle in msg and err.value.exit_code == ExitCode.USAGE


def test_drift_session_takes_goal_and_window_from_the_config(store):
    cfg = Config(drift=DriftConfig(goal="alpha alpha", window_size=2))
    sid = resolve_session(store, str(FIX / "chat-on-topic-toast.sharegpt.json"))
    rep = drift_session(store, sid, config=cfg, policy="recorded", embedder=TopicEmbedder())
    assert rep.goal.source == "config" and rep.window_size == 2 and max(len(s.window) for s in rep.steps) == 2
    rep = drift_session(store, sid, config=cfg, policy="recorded", embedder=TopicEmbedder(), goal="beta",
                        window_size=3)
    assert rep.goal.source == "option" and rep.goal.text == "beta" and rep.window_size == 3


# ============================================================================ CLI (stand-in embedder)


@pytest.fixture()
def hashing_cli(monkeypatch):
    monkeypatch.setattr(embed_mod, "get_embedder", lambda *a, **k: HashingEmbedder())


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


STEP_KEYS = {"step", "message_seq", "score", "verdict", "similarity", "message_similarity", "judged", "window",
             "explanation", "missing_keywords", "new_topics", "phrases", "events", "segment", "goal_seqs",
             "probability", "signals", "message_score", "driver"}  # issue 30: the calibrated score's parts
SUMMARY_KEYS = {"state", "steps", "judged_steps", "final_score", "final_verdict", "worst_step", "worst_score",
                "worst_verdict", "mean_score", "first_step_at", "goal_left_window_step", "drift_phrase_steps",
                "segments", "steps_without_goal"}  # issue 30: goal segments added (keys only added)


def test_json_contract(tmp_path, hashing_cli):
    r = run("drift", FIX / "agent-wanders-off.openai.json", "--db", tmp_path / "s.db", "--json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) == {"version", "session", "state", "goal", "model", "policy", "embedding_model", "window_size",
                         "mapping", "steps", "summary", "embedding", "model_notes", "segments", "requests"}
    (seg,) = data["segments"]  # the user only says "continue": one goal, the opening's
    assert set(seg) == {"index", "start_step", "end_step", "opened_by", "similarity_to_previous", "goal"}
    assert (seg["start_step"], seg["end_step"], seg["opened_by"]) == (1, 11, "opening")
    assert seg["goal"]["seqs"] == data["goal"]["seqs"] and data["requests"] == []
    assert data["model_notes"] == []  # gpt-4o-mini is a table entry: no assumed or borrowed limits
    assert data["state"] == "judged"
    assert data["version"] == 1 and data["session"]["format"] == "openai_chat"
    assert set(data["goal"]) == {"source", "seqs", "text", "keywords", "chunks", "state", "reason", "explanation",
                                 "content_words", "template"} and data["goal"]["seqs"] == [0, 1]
    assert (data["model"], data["policy"], data["window_size"]) == ("gpt-4o-mini", "recorded", 5)
    assert data["mapping"]["on_topic_similarity"] == 0.28 and data["mapping"]["bands"]["MILD"] == 75
    assert set(data["mapping"]) == {"on_topic_similarity", "off_topic_similarity", "formula", "bands", "weights",
                                    "intercept", "prior"}
    assert set(data["mapping"]["weights"]) == {"similarity", "goal_words", "keyword_cover"}
    assert data["embedding_model"] == "hashing-bow" and data["embedding"]["encoded"] > 0
    assert [s["step"] for s in data["steps"]] == list(range(1, 12))
    for s in data["steps"]:
        assert set(s) == STEP_KEYS
        assert 0 <= s["score"] <= 100 and s["verdict"] == verdict(s["score"])
        assert s["score"] == round(100 * s["probability"]) and s["driver"] in s["signals"]
        assert set(s["signals"]) == {"similarity", "goal_words", "keyword_cover"}
    assert set(data["summary"]) == SUMMARY_KEYS


def test_cli_options_and_table(tmp_path, hashing_cli):
    db = tmp_path / "s.db"
    r = run("drift", FIX / "agent-on-task.openai.json", "--db", db, "--json", "--goal", "fix the invoice dates",
            "--window-size", "2", "--model", "gemma-7b")
    data = json.loads(r.stdout)
    assert data["goal"]["source"] == "option" and data["goal"]["seqs"] == [] and data["window_size"] == 2
    assert (data["model"], data["policy"]) == ("gemma-7b", "left_truncation")
    r = CliRunner().invoke(app, ["drift", str(FIX / "agent-wanders-off.openai.json"), "--db", str(db),
                                 "--all-steps"], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert r.exit_code == 0
    out = r.stdout
    assert "goal (session opening, seq 0,1)" in out and "FRESH ≥90" in out and "SEVERE ≥35" in out
    table_steps = re.findall(r"^\s+(\d+)\s+\d+\s+\d+\s+(FRESH|MILD|MODERATE|SEVERE|CRITICAL)", out, re.MULTILINE)
    assert [int(s) for s, _ in table_steps] == list(range(1, 12))
    assert "final " in out


def test_cli_usage_errors(tmp_path, hashing_cli):
    db = tmp_path / "s.db"
    r = run("drift", FIX / "agent-on-task.openai.json", "--db", db, "--window-size", "0")
    assert r.exit_code == ExitCode.USAGE
    r = run("drift", FIX / "agent-on-task.openai.json", "--db", db, "--plot", tmp_path / "x.txt")
    assert r.exit_code == ExitCode.USAGE and "cannot plot" in r.stderr
    r = run("drift", "nosuchsession", "--db", db)
    assert r.exit_code == ExitCode.USAGE


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_files(tmp_path, hashing_cli, suffix):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"drift{suffix}"
    r = run("drift", FIX / "chat-drifts-to-travel.sharegpt.json", "--db", tmp_path / "s.db", "--plot", out)
    assert r.exit_code == 0 and out.stat().st_size > 1000
    head = out.read_bytes()[:200]
    assert head.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in out.read_bytes()[:2000]


def test_log_text_is_inert_in_the_table(tmp_path, hashing_cli):
    p = write_chat(tmp_path, [("user", "Fix [bold red]the parser[/] \x1b[31mnow"),
                              ("assistant", "Looking at [link=http://x]the parser[/link] \x1b]0;pwned\x07 today")])
    r = run("drift", p, "--db", tmp_path / "s.db")
    assert r.exit_code == 0 and "\x1b]0;" not in r.stdout and "[bold red]" in r.stdout


# ============================================================================ real MiniLM


@pytest.fixture(scope="module")
def real_store(tmp_path_factory):
    with Store.open(tmp_path_factory.mktemp("drift") / "real.db") as s:
        yield s


def real_curve(real_store, minilm, path, **kw) -> DriftReport:
    sid = resolve_session(real_store, str(path))
    return drift_curve(prepare(real_store, sid, policy="recorded"), None, minilm, real_store, **kw)


@pytest.mark.integration
@pytest.mark.parametrize("path", [FIX / n for n in ON_TOPIC] + [SAMPLES / "cover-letter-focused.anthropic.json"],
                         ids=lambda p: p.name)
def test_on_topic_sessions_stay_at_least_mild(real_store, minilm, path):
    rep = real_curve(real_store, minilm, path)
    assert rep.steps and all(s.score >= 75 for s in rep.steps), [(s.step, s.score) for s in rep.steps]
    assert not rep.summary()["drift_phrase_steps"]


@pytest.mark.integration
@pytest.mark.parametrize("path", [FIX / n for n in OFF_TOPIC] + [SAMPLES / "cover-letter-drift.sharegpt.json"],
                         ids=lambda p: p.name)
def test_off_topic_sessions_end_critical(real_store, minilm, path):
    """Against the opening goal, each session ends far from it. In the two chats it is the user who
    moves to travel, ramen, hiking and banana bread: issue 30 says a user's new task is no drift of
    the agent, so the opening is passed as the goal (the whole session's) to measure how far the
    conversation moved; without it, see test_a_conversation_the_user_moves_elsewhere_is_not_drift."""
    sid = resolve_session(real_store, str(path))
    opening = goal_from_messages(real_store.messages(sid))
    rep = real_curve(real_store, minilm, path, goal=opening.text if "sharegpt" in path.name else None)
    s = rep.summary()
    assert rep.steps[0].verdict == "FRESH"  # each starts on its goal ...
    assert s["final_verdict"] == "CRITICAL"  # ... and ends far from it
    assert s["first_step_at"]["MODERATE"] < s["first_step_at"]["CRITICAL"] <= len(rep.steps)
    assert s["drift_phrase_steps"] == [len(rep.steps)]  # "anything else?" closes an off-goal reply
    assert rep.steps[-1].missing_keywords and rep.steps[-1].new_topics


@pytest.mark.integration
def test_a_tangent_that_returns_dips_and_recovers(real_store, minilm):
    """Against the exam plan (the opening, passed as the goal), the book tangent dips and the return recovers."""
    path = FIX / "chat-tangent-returns.sharegpt.json"
    opening = goal_from_messages(real_store.messages(resolve_session(real_store, str(path))))
    rep = real_curve(real_store, minilm, path, goal=opening.text)
    scores = [s.score for s in rep.steps]
    assert scores[0] >= 90 and scores[1] < 75 and scores[-1] >= 75  # one off-goal reply in a window of two


@pytest.mark.integration
@pytest.mark.parametrize("name", ["chat-drifts-to-travel.sharegpt.json", "chat-tangent-returns.sharegpt.json"])
def test_a_conversation_the_user_moves_elsewhere_is_not_drift(real_store, minilm, name):
    """Issue 30: the user asks about Kyoto, ramen, a book: the agent answering is no drift. Each
    request is a new task or a follow-up that joins the goal in force, and no step is SEVERE."""
    from context_forensics.analysis.drift import at_or_worse

    rep = real_curve(real_store, minilm, FIX / name)
    assert rep.requests and not any(at_or_worse(s.verdict, "SEVERE") for s in rep.steps), \
        [(s.step, s.score, s.goal_seqs) for s in rep.steps]
    assert any(len(s.goal_seqs) > 1 or s.segment for s in rep.steps)  # scored against what the user asked later


@pytest.mark.integration
def test_a_long_on_topic_session_is_not_drift(real_store, minilm, tmp_path):
    """30 steps, replies from one sentence to ~800 words, all on the task: every step stays >= MILD,
    and a long reply scores within the range of the replies it is made of (no reward, no penalty
    for length). Joining off-topic replies does not pull them toward the goal either."""
    data = json.loads((FIX / "agent-on-task.openai.json").read_text())
    opening, steps = data["messages"][:2], data["messages"][2:]
    replies = [m["content"] for m in steps if m["role"] == "assistant" and m["content"]]
    long_reply = "\n\n".join(replies * 5)  # every on-task paragraph, five times over: ~800 words
    wander = json.loads((FIX / "agent-wanders-off.openai.json").read_text())["messages"]
    off_topic = [m["content"] for m in wander[-8:] if m["role"] == "assistant" and m["content"]]
    msgs = list(opening)
    for i in range(30):
        msgs += [{"role": "assistant", "content": long_reply if i % 3 == 0 else replies[i % len(replies)]},
                 {"role": "user", "content": "continue"}]
    for text in [*off_topic, "\n\n".join(off_topic * 3)]:
        msgs += [{"role": "assistant", "content": text}, {"role": "user", "content": "continue"}]
    p = tmp_path / "long.json"
    p.write_text(json.dumps({"model": "gpt-4o-mini", "messages": msgs}))
    rep = real_curve(real_store, minilm, p)
    on = rep.steps[:30]
    assert len(long_reply.split()) > 750 and all(s.score >= 75 for s in on), [s.score for s in on]
    long_sims = {s.message_similarity for i, s in enumerate(on) if i % 3 == 0}
    short_sims = [s.message_similarity for i, s in enumerate(on) if i % 3]
    (long_sim,) = long_sims
    assert min(short_sims) <= long_sim <= max(short_sims)
    assert all(s.message_score >= 75 for i, s in enumerate(on) if i % 3 == 0)  # the long reply alone too
    *parts, joined = [s.message_similarity for s in rep.steps[30:]]
    assert len(parts) == len(off_topic) and min(parts) - 0.01 <= joined <= max(parts) + 0.01, (parts, joined)


@pytest.mark.integration
@pytest.mark.parametrize("rel", [
    "swebench-pairs/astropy__astropy-14365/openhands-codeact_claude-3-5-sonnet",
    # gpt-5-mini calls bash with no prose at all ("nl -ba django/... | sed -n '1,240p'"): the
    # hardest on-topic case, still >= MILD at 9 steps in 10
    "swebench-pairs/django__django-15127/live-swe-agent_gpt-5-mini/django__django-15127.traj.json",
])
def test_swebench_trajectories_stay_on_their_issue(real_store, minilm, rel):
    rep = real_curve(real_store, minilm, corpus(rel))
    scores = [s.score for s in rep.steps if s.score is not None]
    assert len(scores) >= 10 and np.mean([x >= 75 for x in scores]) >= 0.9 and min(scores) >= 55, scores
    assert rep.summary()["final_verdict"] in ("FRESH", "MILD")


@pytest.mark.integration
def test_mt_bench_answers_score_high_on_their_own_question_and_low_on_another_category(real_store, minilm):
    """MT-Bench: one answer per category, scored against its own question and against the question
    of the next category (a goal it was never about). Questions too short to be a goal ("Given
    that f(x) = 4x^3 - 9x - 14, find the value of f(2).": 1 content word) are not judged at all
    (issue 9, item 17), so each category's first answer with a judged question is taken."""
    from context_forensics.analysis.drift import assess_goal
    from context_forensics.store.ingest import ingest_paths

    ingest_paths(real_store, [corpus("mt-bench/fastchat/mt_bench_reference_answer_gpt-4.jsonl")])
    by_cat: dict[str, dict] = {}
    for r in real_store.sessions(fmt="mt_bench"):
        if r["step_count"] == 2 and assess_goal(goal_from_messages(real_store.messages(r["id"]))).state == "judged":
            by_cat.setdefault((r["metadata"] or {}).get("category"), r)
    rows = list(by_cat.values())
    assert len(rows) >= 3
    own, other = [], []
    for a, b in zip(rows, rows[1:] + rows[:1]):
        prep = prepare(real_store, b["id"], policy="recorded")
        own.append(drift_curve(prep, None, minilm, real_store).summary()["final_score"])
        goal = goal_from_messages(real_store.messages(a["id"]))
        other.append(drift_curve(prep, None, minilm, real_store, goal).summary()["final_score"])
    assert all(x >= 75 for x in own) and all(x < 35 for x in other), (own, other)


@pytest.mark.integration
def test_cli_with_the_real_model_on_the_drifting_sample(tmp_path):
    goal = ("Help me write a cover letter for a data engineer job at Northwind Logistics. Keep it under 300 words "
            "and mention my five years of Airflow experience.")  # its opening: the user moves on later (issue 30)
    r = run("drift", SAMPLES / "cover-letter-drift.sharegpt.json", "--db", tmp_path / "s.db", "--json", "--goal", goal)
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["embedding_model"] == "all-MiniLM-L6-v2"
    assert data["summary"]["final_verdict"] == "CRITICAL" and data["steps"][0]["verdict"] == "FRESH"
    assert "northwind" in data["steps"][-1]["missing_keywords"]


# ============================================================================ is the goal usable? (issue 9, item 17)

GOALS = FIX / "goals"
SHORT_GOAL = GOALS / "implement-spotter-gqc.jsonl"
BEADS = [GOALS / "work-on-bead-spotter-4te.jsonl", GOALS / "work-on-bead-spotter-fum.jsonl"]


def test_content_words_and_chat_openers():
    from context_forensics.analysis.drift import content_words, is_chat_opener

    assert content_words("Implement spotter-gqc") == ["Implement", "spotter", "gqc"]
    assert content_words("What is up?") == [] and content_words("start phoenix in background") == ["phoenix",
                                                                                                    "background"]
    assert len(content_words("Пожалуйста, исправь ошибку в функции разбора дат")) >= 5  # any script counts
    for text in ["What is up?", "hi", "Hello!", "hey there", "Can you help me?", "Hi! How are you doing today?",
                 "good morning, assistant", "what’s up"]:
        assert is_chat_opener(text), text
    for text in ["Hi! Can you write a cover letter for a data analyst job at Northwind?", "Implement spotter-gqc",
                 "help me fix the parser", ""]:
        assert not is_chat_opener(text), text


def _opening_goal(text: str):
    from context_forensics.analysis.drift import Goal

    return Goal(text=text, source="messages", seqs=(0,), parts=(("user", text),))


@pytest.mark.parametrize("text, reason, needle", [
    ("Implement spotter-gqc", "too_short", "goal too short: 3 content word(s) ('Implement spotter-gqc'); "
                                           "pass --goal or set drift.goal"),
    ("What is up?", "chat_opener", "goal is a chat opener ('What is up?'), not a task; pass --goal or set drift.goal"),
    ("hello", "chat_opener", "chat opener"),
    ("mix phx.server doesnt seem to start", "too_short", "4 content word(s)"),
    ("Fix the flaky login test in tests/test_login.py by mocking the clock", None, "content words"),
])
def test_assess_goal_rules(text, reason, needle):
    from context_forensics.analysis.drift import assess_goal

    g = assess_goal(_opening_goal(text))
    assert g.reason == reason and g.state == ("judged" if reason is None else "no_goal")
    assert needle in g.explanation
    assert "no other task of this format" in g.explanation or reason is not None


def test_a_short_opening_is_not_judged_and_says_why(store):
    rep = drift_session(store, resolve_session(store, str(SHORT_GOAL)), policy="recorded", embedder=TopicEmbedder())
    assert rep.state == "no_goal" and rep.goal.reason == "too_short" and rep.goal.content_words == 3
    assert rep.steps and all(s.score is None and s.verdict is None and not s.judged for s in rep.steps)
    s = rep.summary()
    assert s["state"] == "no_goal" and s["final_verdict"] is None and s["worst_verdict"] is None
    assert rep.embed_stats.encoded == 0  # nothing embedded: there is nothing to measure against


def test_an_explicit_goal_always_wins(store):
    sid = resolve_session(store, str(SHORT_GOAL))
    for rep in (drift_session(store, sid, policy="recorded", embedder=HashingEmbedder(), goal="Implement spotter-gqc"),
                drift_session(store, sid, config=Config(drift=DriftConfig(goal="hi")), policy="recorded",
                              embedder=HashingEmbedder())):
        assert rep.state == "judged" and rep.goal.reason is None
        assert all(s.verdict is not None for s in rep.steps if s.judged) and rep.summary()["final_verdict"]


def test_a_template_shared_with_another_task_is_set_aside(store):
    """Two Claude Code sessions open with the same prompt around a bead id: the shared words are a
    template, and what is left ('Work on bead spotter-fum. Run bd show spotter-fum') is too short."""
    first = resolve_session(store, str(BEADS[0]))
    alone = drift_session(store, first, policy="recorded", embedder=HashingEmbedder())
    assert alone.state == "judged" and alone.goal.template is None
    assert "no other task of this format in the store" in alone.goal.explanation  # it says what it could not check
    second = resolve_session(store, str(BEADS[1]))
    for sid, bead in ((first, "spotter-4te"), (second, "spotter-fum")):
        rep = drift_session(store, sid, policy="recorded", embedder=HashingEmbedder())
        assert rep.state == "no_goal" and rep.goal.reason == "too_short"
        assert rep.goal.template["task_text"] == f"Work on bead {bead}. Run bd show {bead}"
        assert rep.goal.template["other_tasks"] == 1 and rep.goal.template["words_set_aside"] == 18
        assert "once the template it shares with 1 other task(s) of this format in the store is set aside" in \
            rep.goal.explanation


def write_harness_run(tmp_path: Path, name: str, task: str, issue: str, system: str | None = None) -> Path:
    """A tiny mini-swe-agent v1 run: a fixed system prompt, the task inside a fixed instruction template."""
    template = ("<pr_description>\nConsider the following PR description:\n{issue}\n</pr_description>\n\n"
                "<instructions>\nYou are working in a repository at /testbed. Make changes to non-test files to "
                "resolve the issue. Run one bash command per reply, in a fenced block, and explain your reasoning "
                "first. When done, submit with echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT.\n</instructions>")
    msgs = [{"role": "system", "content": system or "You are a helpful assistant that can interact multiple times "
                                                   "with a computer shell to solve programming tasks."},
            {"role": "user", "content": template.format(issue=issue)},
            {"role": "assistant", "content": f"THOUGHT: I will look at the code for {issue.split()[0]} first.\n\n"
                                             "```bash\ngrep -rn parse .\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n./app.py:3: def parse(x)\n</output>"},
            {"role": "assistant",
             "content": "THOUGHT: Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"}]
    d = tmp_path / name
    d.mkdir()
    (d / f"{task}.traj.json").write_text(json.dumps({"info": {"exit_status": "Submitted", "mini_version": "1.15.0"},
                                                     "messages": msgs, "trajectory_format": "mini-swe-agent-1",
                                                     "instance_id": task}))
    return d / f"{task}.traj.json"


def test_a_harness_template_is_told_from_the_task_statement_that_decides(store, tmp_path):
    """Three tasks in one harness: the system prompt and the instruction template are the harness's;
    the issue is what decides and what the keywords come from, while the score stays against the
    whole opening, as the mapping was calibrated."""
    issues = {"acme__dates-1": "parse_invoice_date rejects timezone offsets like +02:00 in Northwind invoices",
              "acme__cart-2": "apply_discount ignores the tiered discount above one hundred euros in the basket",
              "acme__csv-3": "read_rows drops the first column when the CSV file starts with a byte order mark"}
    paths = {t: write_harness_run(tmp_path, t, t, issue) for t, issue in issues.items()}
    for p in paths.values():
        resolve_session(store, str(p))
    rep = drift_session(store, resolve_session(store, str(paths["acme__dates-1"])), policy="recorded",
                        embedder=HashingEmbedder())
    t = rep.goal.template
    assert rep.state == "judged" and t["task_seqs"] == [1]  # the system prompt (seq 0) is the harness's
    assert t["task_text"].endswith(issues["acme__dates-1"])
    assert "You are working in a repository" not in t["task_text"] and "helpful assistant" not in t["task_text"]
    assert t["other_tasks"] == 2 and "are harness template" in rep.goal.explanation
    assert rep.goal.seqs == (0, 1) and "You are working in a repository" in rep.goal.text  # scored as calibrated
    assert "parse_invoice_date" in rep.keywords and "repository" not in rep.keywords
    assert all(s.verdict is not None for s in rep.steps if s.judged)


def test_runs_of_one_task_are_not_each_others_template_and_a_shared_whole_opening_is_boilerplate(store, tmp_path):
    issue = "parse_invoice_date rejects timezone offsets like +02:00 in Northwind invoices"
    a = write_harness_run(tmp_path, "a", "acme__dates-1", issue)
    b = write_harness_run(tmp_path, "b", "acme__dates-1", issue)  # the same task, run again
    for p in (a, b):
        resolve_session(store, str(p))
    rep = drift_session(store, resolve_session(store, str(a)), policy="recorded", embedder=HashingEmbedder())
    assert rep.state == "judged" and rep.goal.template is None and issue in rep.goal.text
    # a third task whose whole opening is the same text: nothing in it tells the tasks apart
    c = write_harness_run(tmp_path, "c", "acme__dates-2", issue)
    rep = drift_session(store, resolve_session(store, str(c)), policy="recorded", embedder=HashingEmbedder())
    assert rep.state == "no_goal" and rep.goal.reason == "boilerplate" and "harness boilerplate" in rep.goal.explanation


def test_cli_json_and_view_of_an_unjudged_goal(tmp_path, hashing_cli):
    db = tmp_path / "s.db"
    r = run("drift", SHORT_GOAL, "--db", db, "--json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["state"] == "no_goal" and data["summary"]["state"] == "no_goal"
    assert {"state", "reason", "explanation", "content_words", "template"} <= set(data["goal"])
    assert data["goal"]["reason"] == "too_short" and "'Implement spotter-gqc'" in data["goal"]["explanation"]
    assert all(s["score"] is None and s["verdict"] is None for s in data["steps"]) and len(data["steps"]) == 7
    r = CliRunner().invoke(app, ["drift", str(SHORT_GOAL), "--db", str(db)], env={"COLUMNS": "80", "NO_COLOR": "1"})
    out = r.stdout
    assert r.exit_code == 0 and "not judged" in out and "3 content word(s)" in " ".join(out.split())
    assert "FRESH" not in out and "CRITICAL" not in out and "≥" not in out  # no bands, no verdicts
    assert all(len(line) <= 80 for line in out.splitlines())
    r = run("drift", GOALS / "what-is-up.openai.json", "--db", db, "--json")
    assert json.loads(r.stdout)["goal"]["reason"] == "chat_opener"
    r = run("drift", SHORT_GOAL, "--db", db, "--json", "--goal", "Add a file heat map to the session sidebar")
    assert json.loads(r.stdout)["state"] == "judged" and json.loads(r.stdout)["summary"]["final_verdict"]


@pytest.mark.parametrize("suffix", [".svg"])
def test_plot_of_an_unjudged_goal_has_no_bands(tmp_path, hashing_cli, suffix):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"drift{suffix}"
    r = run("drift", SHORT_GOAL, "--db", tmp_path / "s.db", "--plot", out)
    svg = out.read_text()
    assert r.exit_code == 0 and "not judged" in svg and "CRITICAL" not in svg and "FRESH" not in svg


@pytest.mark.parametrize("width", (60, 80, 100, 160))
def test_drift_views_fit_the_terminal(tmp_path, hashing_cli, width):
    db = tmp_path / "s.db"
    for path in (FIX / "agent-wanders-off.openai.json", SHORT_GOAL):
        r = CliRunner().invoke(app, ["drift", str(path), "--db", str(db), "--all-steps"],
                               env={"COLUMNS": str(width), "NO_COLOR": "1"})
        assert r.exit_code == 0, r.stderr
        assert all(len(line) <= width for line in r.stdout.splitlines()), r.stdout


def test_audit_max_drift_skips_an_unjudged_goal_and_never_fails_the_build_on_it(tmp_path, hashing_cli):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("audit:\n  rules:\n    max_drift: {verdict: SEVERE}\n")
    junit = tmp_path / "j.xml"
    r = run("audit", SHORT_GOAL, "--db", tmp_path / "s.db", "--config", cfg, "--fail-on", "max_drift", "--json",
            "--junit", junit)
    assert r.exit_code == 0, r.stderr  # not a failure: nothing was judged
    report = json.loads(r.stdout)
    (res,) = report["sessions"][0]["results"]
    assert (res["status"], res["figure"], res["detail"]["state"], res["detail"]["reason"]) == (
        "skipped", "no_goal", "no_goal", "too_short")
    assert "goal too short: 3 content word(s)" in res["message"] and "audit.rules.max_drift.goal" in res["message"]
    assert report["totals"]["pass"] == 0 and report["totals"]["skipped"] == 1  # not a pass either
    import xml.etree.ElementTree as ET

    (case,) = ET.parse(junit).getroot().iter("testcase")
    md = tmp_path / "s.md"
    r = run("audit", SHORT_GOAL, "--db", tmp_path / "s.db", "--config", cfg, "--markdown", md)
    assert r.exit_code == 0 and "➖ no_goal (too_short)" in md.read_text()
    assert "max_drift: not judged: goal too short: 3 content word(s)" in " ".join(r.stdout.split())
    assert case.find("skipped") is not None and "goal too short" in case.find("skipped").get("message")
    cfg.write_text("audit:\n  rules:\n    max_drift: {verdict: SEVERE, goal: Add a file heat map to the sidebar}\n")
    r = run("audit", SHORT_GOAL, "--db", tmp_path / "s.db", "--config", cfg, "--json")
    (res,) = json.loads(r.stdout)["sessions"][0]["results"]
    assert res["status"] in ("pass", "fail") and res["figure"] in VERDICTS_ALL  # an explicit goal is judged


def test_corpus_goal_decisions(tmp_path):
    """Every corpus session's goal decision: the SWE-bench runs (an issue inside a harness
    template) are judged, with the template found; the spotter sessions opened by 3-13 word
    prompts ("start phoenix in background", "Work on bead spotter-4te. Run bd show ...") are not."""
    from context_forensics.analysis.drift import assess_goal, template_index
    from context_forensics.store.ingest import ingest_paths
    from helpers import CORPUS

    if not (CORPUS / "swebench-pairs").is_dir():
        pytest.skip("corpus not available")
    with Store.open(tmp_path / "c.db") as s:
        ingest_paths(s, [CORPUS], recursive=True)
        decided = {}
        for row in s.sessions():
            g = goal_from_messages(s.messages(row["id"]))
            if g is not None:
                decided[row["source"]] = assess_goal(g, template_index(s, row["format"], bool(row["task"])))
    swe = {src: g for src, g in decided.items() if "swebench-pairs" in src or "openhands-llm-completions" in src}
    assert len(swe) == 12
    for src, g in swe.items():
        assert g.state == "judged" and g.template is not None, src
        assert g.template["words_set_aside"] > g.template["words"] / 3 and g.content_words >= 15, (src, g.template)
    spotter = {Path(src).name: g for src, g in decided.items() if "claude-code-jsonl/spotter" in src}
    for name in ("short.jsonl", "tool_heavy.jsonl", "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
                 "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"):
        assert (spotter[name].state, spotter[name].reason) == ("no_goal", "too_short"), name
    for name in ("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"):
        assert spotter[name].template["other_tasks"] == 1  # "Work on bead X ..." opens both
    assert all(g.state == "judged" for name, g in spotter.items() if name.startswith("agent-a7") or
               name == "subagent.jsonl")  # their own long prompts


def test_audit_of_the_spotter_sessions_no_longer_fails_on_a_prompt_too_short_to_judge(tmp_path):
    """Before: drift against "Work on bead spotter-fum. Run bd show ..." went to CRITICAL on both
    long spotter sessions and `--fail-on max_drift` exited 3. Now both are skipped as no_goal."""
    paths = [corpus("claude-code-jsonl/spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"),
             corpus("claude-code-jsonl/spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")]
    cfg = tmp_path / "c.yaml"
    cfg.write_text("audit:\n  rules:\n    max_drift: {verdict: SEVERE}\n")
    r = run("audit", *paths, "--db", tmp_path / "s.db", "--config", cfg, "--fail-on", "max_drift", "--json")
    assert r.exit_code == 0, r.stdout[-2000:]
    report = json.loads(r.stdout)
    main = [s for s in report["sessions"] if s["source"] in map(str, paths)]
    assert len(main) == 2
    for s in main:
        (res,) = s["results"]
        assert (res["status"], res["figure"], res["detail"]["reason"]) == ("skipped", "no_goal", "too_short")
        assert "Work on bead" in res["message"] and "template" in res["message"]


def test_what_drift_encodes_is_exactly_the_goal_and_the_judged_replies(store, tmp_path):
    """Issue 17: nothing is encoded that cannot change the curve. The encoded set is the goal's
    chunks and each judged reply's (sampled) chunks; a reply too short to judge adds nothing."""
    from context_forensics.analysis.drift.curve import _goal_chunks, _sample
    from context_forensics.embed import chunk_text

    e = TopicEmbedder()
    long_reply = "\n".join(f"step {i}: alpha gamma work on the report section {i}." for i in range(90))
    turns = [("user", "alpha task: write the quarterly report summary for the board"),
             ("assistant", "Working on the alpha report now, beta next."), ("user", "go"),
             ("assistant", "ok"), ("user", "more"), ("assistant", long_reply)]
    sid = resolve_session(store, str(write_chat(tmp_path, turns)))
    prep = prepare(store, sid, policy="recorded")
    rep = drift_curve(prep, None, e, store)
    assert [s.judged for s in rep.steps] == [True, False, True]
    goal_texts, _ = _goal_chunks(rep.goal)
    judged = [turns[1][1], long_reply]
    expected = set(goal_texts) | {c.text for o in judged for c in _sample(chunk_text(o), MAX_CHUNKS_PER_MESSAGE)}
    assert set(e.encoded) == expected and len(e.encoded) == len(expected)
    assert "ok" not in e.encoded


# ============================================================================ issue 30: goals and goal segments


@pytest.mark.parametrize("text, reason, needle", [
    ("https://github.com/anthropics/skills", "url",
     "goal is a URL ('https://github.com/anthropics/skills'), not a task"),
    ("check out https://github.com/anthropics/skills/tree/main/document-skills/pdf/scripts", "url", "a URL"),
    ("'/var/folders/49/T/TemporaryItems/Screenshot 2025-11-21 at 01.27.21.png'", "path", "goal is a file path"),
    ("src/components/EmojiBubble.js", "path", "a file path"),
    ("/mode", "command", "goal is a slash command ('/mode'), not a task; pass --goal or set drift.goal"),
    ("hi there", "chat_opener", "chat opener"),
    ("see https://example.com/a/b/c/d/e/f/g/h", "url", "a URL"),
    ("fix the login, see https://example.com/issues/42/comments/7/details", "too_short", "once URLs are set aside"),
    ("Fix the flaky login test in tests/test_login.py by mocking the clock", None, "content words"),
])
def test_a_url_a_path_a_command_or_a_greeting_is_no_goal(text, reason, needle):
    """Issue 30, item 11: a bare URL was taken as a goal (its path words counted as content words)
    and scored CRITICAL; a URL, a path, a slash command or a greeting is no goal."""
    from context_forensics.analysis.drift import assess_goal

    g = assess_goal(_opening_goal(text))
    assert (g.reason, g.state) == (reason, "judged" if reason is None else "no_goal"), g.explanation
    assert needle in g.explanation


def test_a_goal_in_a_language_the_embedder_does_not_read_is_not_judged():
    from context_forensics.analysis.drift.goal import language_goal

    zh = _opening_goal("請幫我檢查一下所有代碼是否足夠簡潔 而不是一堆冗餘代碼 專案經過了多輪跌代")
    en = _opening_goal("Optimise the memory use of the analysis cache and remove dead code")
    got = language_goal(zh, "all-MiniLM-L6-v2")
    assert (got.state, got.reason) == ("no_goal", "language") and "does not read" in got.explanation
    assert language_goal(en, "all-MiniLM-L6-v2") is en and language_goal(zh, "a-multilingual-model") is zh


def test_the_language_of_a_goal_is_the_person_s_words_not_the_harness_around_them():
    """Issue 30, item 11: both Copilot CLI sessions of the corpus ask in Chinese and were still
    judged: Copilot wraps the person's words in English harness blocks (<current_datetime>,
    <reminder>, ...) and sends a 37,000-character English system prompt, so 69-89% of the opening's
    letters were Latin. The language is the person's: the user text with harness blocks set aside.
    (Imitates copilot-cli/VibeCodingTracker/test_conversation_copilot.jsonl, Copilot CLI 0.0.3xx.)"""
    from context_forensics.analysis.drift import Goal
    from context_forensics.analysis.drift.goal import language_goal

    system = "You are the GitHub Copilot CLI, a terminal assistant built by GitHub. " * 40
    user = ("<current_datetime>2026-04-24T01:11:16.237+08:00</current_datetime>\n\n"
            "請不要修改任何代碼 我希望你幫我調查一下 有沒有好一點的自動生成文檔可以給這個 rust 專案\n\n"
            "<reminder>\n<sql_tables>No tables currently exist. Default tables (todos, todo_deps) will be created "
            "automatically when you first use the SQL tool.</sql_tables>\nYou have the capability to call multiple "
            "tools in a single response.\n</reminder>")
    g = Goal(text=system + "\n\n" + user, source="messages", seqs=(0, 1), parts=(("system", system), ("user", user)))
    got = language_goal(g, "all-MiniLM-L6-v2")
    assert (got.state, got.reason) == ("no_goal", "language"), got.explanation
    # the same harness around an English request is judged; a task wrapped whole in <task> keeps its words
    en = user.replace("請不要修改任何代碼 我希望你幫我調查一下 有沒有好一點的自動生成文檔可以給這個 rust 專案",
                      "Do not change any code: find a documentation generator that suits this Rust project")
    g_en = Goal(text=en, source="messages", seqs=(0,), parts=(("user", en),))
    assert language_goal(g_en, "all-MiniLM-L6-v2") is g_en
    cline = ("<task>\nAdd an Open button to the Jira details header\n</task>\n"
             "<environment_details>x</environment_details>")
    g_task = Goal(text=cline, source="messages", seqs=(0,), parts=(("user", cline),))
    assert language_goal(g_task, "all-MiniLM-L6-v2") is g_task


ALPHA_TASK = "alpha task: write the alpha report summary for the quarterly board meeting"
BETA_TASK = "different job now: draft the beta budget memo for the finance team meeting"


def test_a_new_user_task_opens_a_goal_segment_and_a_follow_up_does_not(store, tmp_path):
    """Issue 30, item 11: a user who gives the agent a new task mid-session made the rest "drift"
    (before: the beta replies scored 0, CRITICAL, against the alpha goal). Now every request the user
    sends joins the goals the replies are measured against, and the new task opens a segment (a label
    for the reader); a follow-up about the goal in force and a confirmation do not."""
    turns = [("user", ALPHA_TASK), ("assistant", "alpha alpha alpha report draft"),
             ("user", "continue"), ("assistant", "alpha alpha summary section done"),
             ("user", "make the alpha summary shorter for the board please"),
             ("assistant", "alpha alpha alpha shorter"),
             ("user", BETA_TASK), ("assistant", "beta beta beta memo draft"), ("assistant", "beta beta memo budget")]
    rep = curve(store, write_chat(tmp_path, turns), TopicEmbedder())
    assert [(g.start_step, g.end_step, g.opened_by) for g in rep.segments] == [(1, 3, "opening"), (4, 5, "new_task")]
    assert rep.segments[1].goal.seqs == (6,) and rep.segments[1].goal.state == "judged"
    assert [s.segment for s in rep.steps] == [0, 0, 0, 1, 1]
    assert [s.verdict for s in rep.steps] == ["FRESH"] * 5
    # segments are labels, not resets (a missed or wrongly found new task must not move a score): the
    # window runs on, and the beta replies are on the beta request, which joined the goals in force
    assert rep.steps[3].window == [1, 3, 5, 7] and rep.steps[3].goal_seqs == [0, 4, 6]
    assert [(r["seq"], r["new_task"]) for r in rep.requests] == [(4, False), (6, True)]
    assert rep.requests[1]["similarity"] == 0.0 and "below" in rep.requests[1]["why"]
    data = rep.to_dict()
    assert data["segments"][1]["goal"]["text"] == BETA_TASK and data["steps"][3]["segment"] == 1
    # an explicit goal is the whole session's: no segment after it, and the beta replies are off it
    whole = curve(store, write_chat(tmp_path, turns), TopicEmbedder(), goal=ALPHA_TASK, window_size=1)
    assert len(whole.segments) == 1 and whole.steps[-1].verdict == "CRITICAL"


def test_tool_results_written_as_user_text_never_open_a_segment(store, tmp_path):
    """Cline writes tool results as user messages (and what the person typed inside them as
    <feedback>), mini-swe-agent writes <returncode> observations: only the person's words count."""
    turns = [("user", ALPHA_TASK), ("assistant", "alpha alpha reading the file"),
             ("user", "[read_file for 'beta.py'] Result: beta beta beta budget gamma gamma delta code here"),
             ("assistant", "alpha alpha alpha"),
             ("user", "<returncode>0</returncode>\n<output>beta beta budget finance delta gamma output</output>"),
             ("assistant", "alpha alpha alpha done"),
             ("user", "[attempt_completion] Result: The user has provided feedback on the results. Consider their "
                      "input to continue the task.\n<feedback>\n" + BETA_TASK + "\n</feedback>"),
             ("assistant", "beta beta memo")]
    rep = curve(store, write_chat(tmp_path, turns), TopicEmbedder())
    assert [r["seq"] for r in rep.requests] == [6]  # the feedback alone
    assert [g.opened_by for g in rep.segments] == ["opening", "new_task"] and rep.segments[1].goal.text == BETA_TASK


def test_the_harnesses_continue_prompts_are_no_request():
    """Gemini CLI sends "System: Please continue." itself (packages/core/src/core/client.ts: after an
    invalid stream and when its next-speaker check says the model should go on): in
    gemini-cli/VibeCodingTracker/test_conversation_gemini.jsonl (line 18, display empty) it joined the
    goals in force at step 5 as if the person had asked it. Claude Code's <task-notification> (the end
    of a background command, claude-code-jsonl/spotter/8463c716 line 1588) was already set aside."""
    from context_forensics.analysis.drift.segments import human_text

    assert human_text(Message("user", "System: Please continue.")) == ""
    assert human_text(Message("user", "<task-notification>\n<task-id>be613ab</task-id>\n</task-notification>")) == ""
    # what a person types is kept, "continue" too (it is no request by its length, not by who wrote it)
    assert human_text(Message("user", "Please continue with the refactor.")) == "Please continue with the refactor."
    assert human_text(Message("user", "System: please continue, but keep the old API")) != ""


def test_a_goal_less_opening_gives_way_to_the_first_usable_request(store, tmp_path):
    """Pi's large session opens with "/mode": not judged until the user's first real task."""
    turns = [("user", "/mode"), ("assistant", "alpha beta gamma mode set"), ("user", ALPHA_TASK),
             ("assistant", "alpha alpha alpha report"), ("user", "ok"), ("assistant", "alpha alpha more report")]
    rep = curve(store, write_chat(tmp_path, turns), TopicEmbedder())
    assert rep.state == "judged" and rep.goal.reason == "command"
    assert [(g.start_step, g.goal.state) for g in rep.segments] == [(1, "no_goal"), (2, "judged")]
    assert rep.steps[0].verdict is None and rep.steps[0].explanation.startswith("not judged: goal is a slash command")
    assert [s.verdict for s in rep.steps[1:]] == ["FRESH", "FRESH"]
    assert rep.summary()["steps_without_goal"] == 1


def test_an_empty_session_is_not_judged_by_drift_or_the_audit_rule(tmp_path, hashing_cli):
    """Issue 30, item 12: a 0-message session made max_drift an error; now it says why it is not judged."""
    p = tmp_path / "empty.json"
    p.write_text(json.dumps({"model": "gpt-4o-mini", "messages": []}))
    db = tmp_path / "s.db"
    r = run("drift", p, "--db", db, "--json")
    if r.exit_code == 0:  # an importer that stores the empty session: drift says why, in JSON and as text
        data = json.loads(r.stdout)
        assert data["state"] == "no_goal" and data["goal"]["reason"] == "no_text" and data["steps"] == []
        r = run("drift", p, "--db", db)
        assert r.exit_code == 0 and "not judged" in r.stdout and "Traceback" not in r.stdout + r.stderr
    with Store.open(db) as s:
        s.db["sessions"].insert({"id": "empty0000000", "source": "made-empty", "format": "openai_chat",
                                 "model": "gpt-4o-mini"}, alter=True)
        rep = drift_session(s, "empty0000000", policy="recorded", embedder=HashingEmbedder())
        assert rep.state == "no_goal" and rep.goal.reason == "no_text" and rep.steps == []
        from context_forensics.analysis.audit.rules import Ctx, rule_max_drift
        from context_forensics.config.audit_rules import RuleConfig

        res = rule_max_drift(Ctx(s, "empty0000000", Config(), s.session("empty0000000")),
                             RuleConfig(name="max_drift", params={"verdict": "SEVERE", "goal": None}))
        assert res.status == "skipped" and res.figure == "no_goal" and "no system or user text" in res.message


def test_a_follow_up_taken_for_a_new_task_does_not_make_on_topic_replies_drift(store, tmp_path):
    """Issue 30, item 11: new-task detection is weak (labelled held-out requests: precision 0.21,
    recall 0.44), so a wrong split must cost nothing. Pi's session.jsonl went CRITICAL when a complaint
    ("jesus, i gave you the full path, relative to the cwd ..") opened a segment whose goal was the
    complaint, and the replies about the task read off it. Now every request joins the goals in force
    and a segment is a label: the replies stay on the task."""
    turns = [("user", ALPHA_TASK), ("assistant", "alpha alpha alpha report draft"),
             ("user", "jesus, i gave you the full path relative to the working directory"),
             ("assistant", "alpha alpha alpha report section rewritten"), ("user", "go on"),
             ("assistant", "alpha alpha summary for the board"), ("user", "go on"),
             ("assistant", "alpha alpha alpha report done")]
    rep = curve(store, write_chat(tmp_path, turns), TopicEmbedder())
    assert rep.requests[0]["new_task"] and [g.opened_by for g in rep.segments] == ["opening", "new_task"]
    assert [s.segment for s in rep.steps] == [0, 1, 1, 1]  # labelled as a new request ...
    assert [s.verdict for s in rep.steps] == ["FRESH"] * 4  # ... and the replies still read on the task
    assert rep.steps[-1].goal_seqs == [0, 2]


def test_a_missed_new_task_does_not_make_on_topic_replies_drift(store, tmp_path):
    """The other way round: a new task the detector takes for a follow-up (forced here) still joins the
    goals in force, and the replies about it are on topic."""
    turns = [("user", ALPHA_TASK), ("assistant", "alpha alpha alpha report draft"), ("user", BETA_TASK),
             ("assistant", "beta beta beta memo draft"), ("user", "go on"), ("assistant", "beta beta memo budget")]
    sid = resolve_session(store, str(write_chat(tmp_path, turns)))
    rep = drift_curve(prepare(store, sid, policy="recorded"), None, TopicEmbedder(), store, new_tasks=[])
    assert len(rep.segments) == 1 and not rep.requests[0]["new_task"]
    assert [s.verdict for s in rep.steps] == ["FRESH"] * 3


def test_the_copilot_cli_sessions_asked_in_chinese_are_not_judged(tmp_path):
    """Issue 30, item 11 (corpus): both Copilot CLI sessions ask in Chinese (answered in English);
    the first pass still judged them (the harness's English around the question). Every corpus
    session whose person-typed opening is mostly CJK is `language`, and no other reason is given."""
    from context_forensics.analysis.drift.curve import session_goal
    from context_forensics.analysis.drift.goal import latin_share, person_text
    from context_forensics.store.ingest import ingest_paths
    from helpers import CORPUS

    if not (CORPUS / "copilot-cli").is_dir():
        pytest.skip("corpus not available")
    with Store.open(tmp_path / "c.db") as s:
        ingest_paths(s, [CORPUS], recursive=True)
        got = {}
        for row in s.sessions():
            g = session_goal(prepare(s, row["id"], policy="recorded"), s, "all-MiniLM-L6-v2")
            got[row["source"]] = g
    copilot = {src: g for src, g in got.items() if "/copilot-cli" in src}
    assert len(copilot) == 2 and all(g.reason == "language" for g in copilot.values()), \
        {src: g.explanation for src, g in copilot.items()}
    for src, g in got.items():  # the rule is the person's letters, for every agent
        if g.reason == "language":
            assert latin_share(person_text(g)) < 0.5, src


@pytest.mark.integration
def test_a_labelled_on_topic_pi_session_is_not_drift_and_its_goal_on_other_replies_is(real_store, minilm):
    """Issue 30, item 11, on the labelled data (bench/data/drift_labels.yaml): Pi's session.jsonl is
    documentation work the user steers step by step, on topic throughout. Before, it ended CRITICAL
    (a follow-up taken for a new task) with 74% of its 198 scored steps FRESH/MILD and 11 SEVERE or
    worse. Now >= 95% of its steps are FRESH/MILD and it ends there. The marshmallow issue's goal against the same
    replies (a constructed off-topic pair of the held-out split, the hardest of the 14: SWE-agent's user message is
    mostly its tool instructions, whose words Pi's replies about tools and docs share) is still caught by the default
    `max_drift`
    rule (SEVERE), and most of its steps are below MILD."""
    from context_forensics.analysis.drift import at_or_worse
    from context_forensics.analysis.drift.curve import session_goal

    path = corpus("pi/pi-mono/session.jsonl")
    rep = real_curve(real_store, minilm, path)
    v = [s.verdict for s in rep.steps if s.verdict is not None]
    assert len(v) > 200 and np.mean([x in ("FRESH", "MILD") for x in v]) >= 0.95, v
    assert rep.summary()["final_verdict"] in ("FRESH", "MILD")
    other = corpus("swe-agent-traj/sweagent-demos/marshmallow-code__marshmallow-1867.function_calling_replace.traj")
    goal = session_goal(prepare(real_store, resolve_session(real_store, str(other)), policy="recorded"), real_store,
                        minilm.name)
    off = real_curve(real_store, minilm, path, goal=goal)
    w = [s.verdict for s in off.steps if s.verdict is not None]
    assert any(at_or_worse(x, "SEVERE") for x in w) and np.mean([at_or_worse(x, "MODERATE") for x in w]) >= 0.75, w


# ============================================================================ issue 30: verdicts read against the logs
# The person's requests, as Cline and Aider record them: the harness's own user-role texts are no request.

def _user(text: str, **meta) -> Message:
    return Message(role="user", text=text, meta=meta)


@pytest.mark.parametrize(("text", "person"), [
    # Cline's focus chain (src/core/prompts/contextManagement + focus-chain prompts), pushed into the user turn
    ("\t\t\t\t# TODO LIST UPDATE REQUIRED - You MUST include the task_progress parameter in your NEXT tool call.\n\n"
     "\t\t\t\t**Current Progress: 4/6 items completed (67%)**\n\n- [x] Add bridge", ""),
    ("\n# task_progress RECOMMENDED\n\nWhen starting a new task, it is recommended to include a todo list", ""),
    ("# task_progress\n\nYou've made 12 API requests without a task_progress parameter.", ""),
    # Cline: feedback on a completion, split from its "[attempt_completion] Result:" (task_sample seq 100)
    ("<feedback>\ngreat implement it\n</feedback>\n\n<environment_details>\n# Visual Studio Code Visible Files\n"
     "(No visible files)\n</environment_details>", "great implement it"),
    # Aider (aider/prompts.py, aider/coders/base_prompts.py, editblock_coder.py, base_coder.py lint_edited)
    ("I spoke to you previously about a number of things.\n\n\nThe changes you've implemented introduce", ""),
    ("# 1 SEARCH/REPLACE block failed to match!\n\n## SearchReplaceNoExactMatch: This SEARCH block failed", ""),
    ("\n# Fix any errors below, if possible.\n\n\n## See relevant lines below marked with █.\n\nsrc/styles.css:", ""),
    ("Don't try and edit any existing code without asking me to add the files to the chat!\nTell me which files", ""),
    ("I am not sharing any files that you can edit yet.", ""),
    ("I am not sharing the full contents of any files with you yet.", ""),
    ("I am working with you on code in a git repository.\nHere are summaries of some files present in my git repo.",
     ""),
    ("Here are some READ ONLY files, provided for your reference.\nDo not edit these files!", ""),
    ("I committed the changes with git hash 26a3c45 & commit msg: add nyancat", ""),
    ("I didn't see any properly formatted edits in your reply?!", ""),
    ("I ran this command:\n\nnpm test\n\nAnd got this output:\n\nok\n", ""),
    # Aider appends its edit format's reminder to the person's message (base_coder.format_chat_chunks)
    ("add a nyancat animation in the background\n\n\n# *SEARCH/REPLACE block* Rules:\n\nEvery *SEARCH/REPLACE "
     "block* must use this format:", "add a nyancat animation in the background"),
    ("please continue what you were doing\n\nTo suggest changes to a file you MUST return the entire content of "
     "the updated file.\nYou MUST use this *file listing* format:", "please continue what you were doing"),
    ("/ask can you tell me the steps you would take", "can you tell me the steps you would take"),
    ("I want to use  langgraph can you show me\n\nReply in English.", "I want to use  langgraph can you show me"),
    ("do not write code. just the doc", "do not write code. just the doc"),  # a person's words stay
])
def test_human_text_sets_aside_the_cline_and_aider_harness(text, person):
    """Issue 30, verdicts read against the logs: drift took Cline's TODO-list reminder (task_sample
    seq 143) and Aider's summary, failed-match reflection, lint output and no-files prompt
    (Simple-Calulator's LLM history, seq 63, 85, 114, 156) for requests a person made, each opening a
    goal segment; a Cline feedback kept the environment details around it as the request."""
    from context_forensics.matching.person import human_text

    assert human_text(_user(text)) == person


def _aider_inputs(path: Path) -> list[str]:
    """The person's inputs an .aider.input.history records, the chat command before them dropped."""
    out: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            out.append([])
        elif line.startswith("+") and out:
            out[-1].append(line[1:])
    texts = ["\n".join(x) for x in out]
    return [re.sub(r"\A/(?:ask|code|architect|context)\s+", "", t) for t in texts if t and not t.startswith("/") or
            re.match(r"\A/(?:ask|code|architect|context)\s+\S", t)]


def _squash(text: str) -> str:
    return " ".join(text.split())


def test_the_requests_of_every_aider_and_cline_corpus_session_are_the_person_s(tmp_path):
    """Issue 30, verdicts read against the logs (corpus): every request drift finds in an Aider or
    Cline session is something the person typed, as the agent's own record of them says: an entry of
    Aider's .aider.input.history, a task or user_feedback entry of Cline's ui_messages.json (up to
    the first @-mention, which Cline expands). Before: 31 requests in Simple-Calulator's LLM history,
    18 of them Aider's own texts, reminders or examples; the TODO-list reminder in two Cline tasks."""
    from context_forensics.analysis.drift.segments import requests
    from context_forensics.store.ingest import ingest_paths
    from helpers import CORPUS

    if not (CORPUS / "aider").is_dir() or not (CORPUS / "cline").is_dir():
        pytest.skip("corpus not available")
    checked = {"aider": 0, "cline": 0}
    with Store.open(tmp_path / "c.db") as s:
        ingest_paths(s, [CORPUS / "aider", CORPUS / "cline"], recursive=True)
        for row in s.sessions():
            src = Path(row["source"])
            folder = src if src.is_dir() else src.parent
            p = prepare(s, row["id"], policy="recorded")
            found = requests(p.messages, [int(x) for x in p.inp.steps])
            agent = "cline" if row["format"] == "cline" else "aider"
            if agent == "aider":
                said = {_squash(t) for t in _aider_inputs(folder / ".aider.input.history")}
                for r in found:
                    assert _squash(r.text) in said, (src, r.seq, r.text[:120])
            else:
                ui = json.loads((folder / "ui_messages.json").read_text(encoding="utf-8"))
                said = [_squash(m.get("text") or "").split("@")[0].strip() for m in ui
                        if m.get("say") in ("task", "user_feedback")]
                for r in found:
                    assert any(x and _squash(r.text).startswith(x) for x in said), (src, r.seq, r.text[:120])
            checked[agent] += len(found)
    assert checked["aider"] >= 20 and checked["cline"] >= 6, checked
