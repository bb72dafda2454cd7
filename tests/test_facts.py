"""Fact timelines: lexical tokens, the presence rule, states per step, sources, suggest, calibrate, CLI.

Unit tests use the deterministic ``HashingEmbedder``; the ``integration`` tests at the end use
the real MiniLM model (loaded once for the suite, tests/conftest.py) on the labelled fixtures in
tests/fixtures/facts/ (regenerate them with ``make_fixtures.py`` there).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st
from typer.testing import CliRunner

from context_forensics.analysis.facts import (
    SPAN_FLOOR,
    SPAN_OVERLAP,
    Pair,
    calibrate,
    gather_facts,
    lexical_tokens,
    load_pairs,
    missing_tokens,
    parse_facts_text,
    score_presence,
    suggest_facts,
    text_numbers,
    track_facts,
)
from context_forensics.analysis.replay import Timeline, prepare, replay_session, window_at
from context_forensics.cli import (
    app,
    facts as cli_facts,  # noqa: F401 - registers `ctxf facts` and `ctxf calibrate`
)
from context_forensics.config.models import ModelSpec
from context_forensics.config.settings import load_config, validate
from context_forensics.embed import (
    EmbedStats,
    HashingEmbedder,
    chunk_many,
    edge_words,
    has_clause_cut,
    sub_spans,
    word_count,
)
from context_forensics.errors import ConfigError, InputError, UsageError
from context_forensics.matching.person import human_text
from context_forensics.matching.polarity import content_stems, polarity_conflict
from context_forensics.records import Message, Session, ToolCall
from context_forensics.render.facts import strip
from context_forensics.store.db import Store
from context_forensics.store.ingest import resolve_session
from helpers import FIXTURES

FACTS = FIXTURES / "facts"
RELEASE = FACTS / "release.openai.json"
LONG_OUTPUT = FACTS / "long_tool_output.openai.json"
CONFIG = FACTS / "config.yaml"
PAIRS = FACTS / "pairs.csv"
SAMPLE = Path(__file__).parent.parent / "sample_logs" / "agent-overflow" / "shopcart-tiered-discounts.openai.json"

CONSTRAINT = "Never push directly to the main branch; open a pull request instead."
BUDGET = "The total budget for cloud spend is 4,500 EUR."
NEW_BUDGET = "The cloud spend budget is 3,000 EUR."


@pytest.fixture()
def store(tmp_path):
    with Store.open(tmp_path / "s.db") as s:
        yield s


@pytest.fixture(scope="module")
def cfg():
    return load_config(CONFIG)


def _states(report, f):
    return [t["state"] for t in report.facts[f].to_dict(report.step_seqs)["timeline"]]


def _track(store, cfg, path, facts, model="tiny", embedder=None, **kw):
    sid = resolve_session(store, str(path))
    prep = prepare(store, sid, model, config=cfg, policy=kw.pop("policy", None), params=kw.pop("params", None))
    return track_facts(prep, facts, embedder or HashingEmbedder(), store, **kw)


# ============================================================================ lexical tokens


def test_numbers_are_normalised_so_a_budget_matches_however_it_is_written():
    assert lexical_tokens("The total budget is 4,500 EUR.").numbers == ("4500",)
    for same in ("4500", "4,500", "4.5k", "4500.00", "4_500", "4\u202f500"):
        assert missing_tokens(lexical_tokens("budget 4,500"), f"the budget: {same} euros") == [], same
    assert missing_tokens(lexical_tokens("budget 4,500"), "the budget is 3,000 EUR") == ["4500"]
    assert lexical_tokens("Use at most 3 retries and 16GB, 5% off, 2.50 each").numbers == ("3", "16", "5", "2.5")
    # number words in the searched text count; in the fact they are not required
    assert missing_tokens(lexical_tokens("at most 3 retries"), "retry three times at most") == []
    assert not lexical_tokens("at most three retries")
    assert text_numbers("twenty requests, v1.2.3 at 16:00 on 2024-05-01, VIP0") == {"20"}


@pytest.mark.parametrize("text", [
    # corpus lines whose own tokens the check could not find in them (issue 30): a piece of a
    # longer token was required ("xxmb", "a6", "e200", "fffd4", the "0" of "UTC-5:00")
    "11/18/2025, 9:17:44 AM (America/New_York, UTC-5:00)",
    "當計算分析結束後 記憶體佔用會飆升到 1xxMB 這就不合理了",
    "index 01422066a6..a46c57cd53 100644",
    "PASS: 1e200 uses scientific notation",
    "background-color: #7fffd4; /* light mode */",
    "UnicodeDecodeError: 'ascii' codec can't decode byte 0xc2 in position 257",
])
def test_a_text_holds_its_own_lexical_tokens(text):
    assert missing_tokens(lexical_tokens(text), text) == []


@given(st.text(alphabet="ab1_-.:/,# 'x9", max_size=40))
def test_any_text_holds_its_own_lexical_tokens(text):
    assert missing_tokens(lexical_tokens(text), text) == []


def test_identifiers_quotes_times_and_paths_are_literal_tokens():
    tok = lexical_tokens('Keep apply_discount, ShopCart and `send_email` in shopcart/pricing.py; say "I don\'t know" '
                         "before 16:00 on 2024-12-20 with Python 3.11.2, gpt-4o, os.path, tests/ and 'yes'.")
    assert set(tok.literals) == {"apply_discount", "shopcart", "send_email", "shopcart/pricing.py", "i don't know",
                                 "16:00", "2024-12-20", "3.11.2", "gpt-4o", "os.path", "tests/", "yes"}
    assert not lexical_tokens("Reply in formal English only, e.g. to customers, and/or partners.")
    # an identifier is not found inside a longer one; case and whitespace do not matter
    assert missing_tokens(lexical_tokens("keep apply_discount"),
                          "we renamed it apply_discount_v2") == ["apply_discount"]
    assert missing_tokens(lexical_tokens("keep apply_discount"), "APPLY_DISCOUNT(cart)") == []
    assert missing_tokens(lexical_tokens("never touch tests/"), "edited tests/test_x.py") == []
    assert missing_tokens(lexical_tokens('answer "I don\'t know"'), "say I  don't\nknow") == []


# ============================================================================ fact sources


def test_facts_files_are_yaml_lists_mappings_or_plain_lines(tmp_path):
    assert parse_facts_text("- Never push to main.\n- 'Budget: 4,500 EUR'\n") == ["Never push to main.",
                                                                                "Budget: 4,500 EUR"]
    assert parse_facts_text("facts:\n  - one fact here\n") == ["one fact here"]
    # plain text: a colon is no YAML mapping, comments and blanks are skipped
    assert parse_facts_text("# constraints\nBudget: 4,500 EUR\n\n  Never   push to main.\n") == [
        "Budget: 4,500 EUR", "Never push to main."]
    with pytest.raises(InputError, match="unknown key"):
        parse_facts_text("facts: [a]\nother: 1\n", "f.yaml")
    with pytest.raises(InputError, match=r"f.yaml: facts\[1\]"):
        parse_facts_text("- ok\n- 3\n", "f.yaml")
    path = tmp_path / "facts.txt"
    path.write_text("Never push to main.\nBudget is 4,500 EUR.\n")
    assert gather_facts(["Budget is 4,500 EUR.", "A"], [path], ["A", "C"]) == [
        "Budget is 4,500 EUR.", "A", "Never push to main.", "C"]



def test_facts_and_pairs_files_refuse_a_repeated_key(tmp_path):
    # issue 31: user-written YAML keeps no silent "last one wins"
    with pytest.raises(InputError, match=r"f.yaml:2:1: invalid YAML: duplicate key 'facts' \(at lines 1 and 2"):
        parse_facts_text("facts: [a]\nfacts: [b]\n", "f.yaml")
    p = tmp_path / "p.yaml"
    p.write_text("pairs:\n  - {fact: a, text: b, present: yes, present: no}\n")
    with pytest.raises(InputError, match=r"p.yaml:2:.*duplicate key 'present' \(at lines 2 and 2"):
        load_pairs(p)

def test_config_facts_list_is_validated_like_every_other_key():
    cfg = validate({"facts": ["Never push to main.", "  Budget  4,500 "]}, "c.yaml")
    assert cfg.facts == ("Never push to main.", "Budget 4,500")
    assert validate({}, "c.yaml").facts == ()
    with pytest.raises(ConfigError) as err:
        validate({"facts": "Never push"}, "c.yaml")
    assert "c.yaml: facts" in str(err.value) and "list of strings" in str(err.value)
    with pytest.raises(ConfigError) as err:
        validate({"facts": ["ok", 3]}, "c.yaml")
    assert "c.yaml: facts[1]" in str(err.value)
    with pytest.raises(ConfigError) as err:
        validate({"fact": ["x"]}, "c.yaml")
    assert "facts" in str(err.value)  # the allowed keys name it
    assert load_config(CONFIG).facts == (CONSTRAINT,)


# ============================================================================ presence


def test_presence_needs_the_semantic_and_the_lexical_test():
    e = HashingEmbedder()
    filler = "\n".join(f"tests/test_mod.py::test_case_{i} PASSED [{i}%]" for i in range(400))
    texts = [f"{filler}\n{BUDGET}\n{filler}", "The total budget for cloud spend is 3,000 EUR.", "Unrelated text."]
    p = score_presence([BUDGET], texts, e, threshold=0.6)
    assert p.score[0, 0] >= 0.99  # found at chunk level inside a long tool output
    assert BUDGET in p.chunked.chunks[p.chunk[0, 0]].text
    assert not np.isfinite(p.score[0, 1])  # same sentence, other number: not present
    s, _, missing = p.near[0][1]
    assert s >= 0.6 and missing == ["4500"]
    assert not np.isfinite(p.score[0, 2]) and 2 not in p.near[0]


TRIP = ("We are eight people travelling to Lisbon in June, the total budget is capped at 4,500 euros for the "
        "whole group, and nobody can eat peanuts.")
CAPPED = "The total budget is capped at 4,500 euros."
RENAME = "Do not rename any public function."


def test_a_fact_inside_a_compound_sentence_scores_as_itself():
    """Issue 9 item 16: the fact's own span of the sentence scores it, not the whole sentence."""
    p = score_presence([CAPPED, "Nobody can eat peanuts."], [TRIP, TRIP.replace("4,500", "3,000")], HashingEmbedder(),
                       threshold=0.75)
    assert p.score[0, 0] >= 0.95 and p.matched_text(0, 0) == "the total budget is capped at 4,500 euros"
    assert p.chunked.chunks[p.chunk[0, 0]].text == TRIP  # the chunk is still the whole sentence
    assert p.score[1, 0] >= 0.95 and p.matched_text(1, 0) == "nobody can eat peanuts."
    # the lexical check applies to the span that matched: another budget is no budget of 4,500
    assert not np.isfinite(p.score[0, 1]) and p.near[0][1][2] == ["4500"]
    assert p.spans_scored >= 2 and p.span_texts > 0
    # where the whole sentence already holds the fact at the threshold it is not split (the verdict
    # cannot change), unless every chunk's best score is asked for (calibrate). The sentence says
    # "capped to": TRIP holds the fact verbatim, which scores the occurrence itself (issue 30).
    near_copy = TRIP.replace("capped at", "capped to")
    low = score_presence([CAPPED], [near_copy], HashingEmbedder(), threshold=0.3)
    assert low.spans_scored == 0 and low.score[0, 0] == low.cosine[0, 0] < 0.95 and (0, 0) not in low.span
    assert not low.verbatim
    best = score_presence([CAPPED], [near_copy], HashingEmbedder(), threshold=0.3, all_spans=True)
    assert best.spans_scored == 1 and best.score[0, 0] >= 0.85
    copy = score_presence([CAPPED], [TRIP], HashingEmbedder(), threshold=0.3)
    assert copy.spans_scored == 0 and copy.verbatim[(0, 0)][3] and copy.score[0, 0] >= 0.99
    assert copy.matched_text(0, 0) == "the total budget is capped at 4,500 euros"


def test_a_polarity_flip_is_a_near_miss_that_says_why():
    """Issue 9 item 15: close in topic, said the other way round."""
    texts = ["You may rename any public function.", "Avoid renaming any public function.",
             "We agreed: you may rename any public function, and the tests stay as they are."]
    p = score_presence([RENAME], texts, HashingEmbedder(), threshold=0.5)
    assert p.cosine[0, 0] >= 0.5 and not np.isfinite(p.score[0, 0])
    assert p.conflicts[0][0].reason == "polarity differs: 'Do not rename' vs 'You may rename'"
    assert p.near[0][0][2] == []  # no token is missing: the polarity is what differs
    assert np.isfinite(p.score[0, 1])  # same polarity, other words
    # inside a longer sentence the check applies to the clause the span lies in
    assert not np.isfinite(p.score[0, 2]) and p.conflicts[0][2].text_phrase == "you may rename"


# ============================================================================ timelines


def test_a_fact_is_evicted_at_a_known_step_under_a_small_window(store, cfg):
    rep = _track(store, cfg, RELEASE, [CONSTRAINT, BUDGET, NEW_BUDGET])
    assert (rep.model, rep.policy, len(rep.step_seqs)) == ("tiny", "left_truncation", 10)
    c, b, nb = rep.facts
    assert _states(rep, 0) == ["present"] * 4 + ["gone"] * 6
    assert (c.first_appeared, c.last_present, c.disappeared_at) == (1, 4, 5)
    assert c.cause["type"] == "eviction" and c.cause["policy"] == "left_truncation"
    assert c.cause["seqs"] == [1] and c.cause["roles"] == ["user"] and c.cause["recorded"] is False
    assert c.cause["event"]["type"] == "eviction"
    assert (b.first_appeared, b.disappeared_at) == (1, 5)
    # the changed number: the 3,000 budget appears with the update (seq 10) and leaves with it
    assert _states(rep, 2) == ["not_yet"] * 4 + ["present"] * 4 + ["gone"] * 2
    assert (nb.first_appeared, nb.last_present, nb.disappeared_at, nb.cause["seqs"]) == (5, 8, 9, [10])
    assert [n["seq"] for n in nb.near_misses] == [1] and nb.near_misses[0]["missing"] == ["3000"]
    # the same steps as the replay's own record of what it evicted
    steps = replay_session(store, rep_sid(store), "tiny", config=cfg).steps
    assert next(s["step"] for s in steps if 1 in s["evicted"]) == 5
    assert next(s["step"] for s in steps if 10 in s["evicted"]) == 9


def rep_sid(store):
    return resolve_session(store, str(RELEASE))


def test_outside_the_local_attention_window_is_at_risk_not_gone(store, cfg):
    rep = _track(store, cfg, RELEASE, [BUDGET], model="tiny-local")
    states = _states(rep, 0)
    sid = rep_sid(store)
    expected = []
    for k in range(1, 11):
        seq1 = next(m for m in window_at(store, sid, k, "tiny-local", config=cfg)["messages"] if m["seq"] == 1)
        expected.append("at_risk" if seq1["state"] == "outside_local" else "present")
    assert states == expected and "at_risk" in states and states[0] == "present"
    f = rep.facts[0]
    assert f.disappeared_at is None and f.last_present == 10 and f.first_at_risk == states.index("at_risk") + 1
    reasons = {t["reason"] for t in f.to_dict(rep.step_seqs)["timeline"] if t["state"] == "at_risk"}
    assert reasons == {"outside_local_window"}


def test_middle_of_a_long_window_is_at_risk_by_position(store, cfg):
    """Checked against an independent computation from each step's window (``window_at``)."""
    lo, hi = 0.25, 0.75
    sid = rep_sid(store)
    text = store.messages(sid)[7].message.text  # a tool output: later windows put it ever further back
    fact = text.splitlines()[2]
    rep = _track(store, cfg, RELEASE, [fact], model="gpt-4o", middle_min_tokens=1, middle_band=(lo, hi))
    src = rep.facts[0].sources
    assert [s["seq"] for s in src] == [7]
    frac = text.index(src[0]["chunk"]) / len(text)
    expected = []
    for k in range(1, 11):
        win = window_at(store, sid, k, "gpt-4o", config=cfg)["messages"]
        inside = [m for m in win if m["in_window"]]
        if len(win) <= 7:
            expected.append("not_yet")
            continue
        before = sum(m["tokens"] for m in inside if m["seq"] < 7)
        rel = (before + frac * win[7]["tokens"]) / sum(m["tokens"] for m in inside)
        expected.append("at_risk" if lo <= rel <= hi else "present")
    states = _states(rep, 0)
    assert states == expected and "at_risk" in states and "present" in states
    assert {t["reason"] for t in rep.facts[0].to_dict(rep.step_seqs)["timeline"] if t["reason"]} == {
        "middle_of_long_window"}
    # the default threshold (32k tokens) leaves this short session alone
    assert set(_states(_track(store, cfg, RELEASE, [fact], model="gpt-4o"), 0)) == {"not_yet", "present"}


def test_simulated_compaction_summarizes_and_a_restatement_brings_the_fact_back(store, cfg):
    rep = _track(store, cfg, RELEASE, [CONSTRAINT], model="tiny-compact")
    f = rep.facts[0]
    assert rep.policy == "auto_compaction"
    states = _states(rep, 0)
    assert states[0] == "present" and f.disappeared_at == states.index("summarized") + 1
    assert f.cause["type"] == "compaction" and f.cause["recorded"] is False and 1 in f.cause["seqs"]
    assert f.departures[0]["to"] == "summarized"
    assert "gone" not in states  # a simulated summary is assumed to carry it


def _write(store, sid, msgs):
    with store.transaction():
        store.write_session(Session(sid, "test", messages=iter(msgs)), sid=sid, source=sid, source_hash=sid,
                            parent_id=None)
    return sid


def test_recorded_compaction_keeps_what_its_summary_says_and_drops_the_rest(store):
    keep, drop = "Never push directly to the main branch.", "The release budget is 4,500 EUR."
    sid = _write(store, "compacted", [
        Message("system", "You are a release agent."),
        Message("user", keep),
        Message("user", drop),
        Message("assistant", "Working on it."),
        Message("system", "Conversation compacted", kind="compaction_boundary"),
        Message("user", f"Summary of the conversation so far. {keep}", kind="compaction_summary"),
        Message("assistant", "Continuing."),
        Message("user", "Thanks."),
        Message("assistant", "Done."),
    ])
    prep = prepare(store, sid, "gpt-4o", policy="recorded")
    rep = track_facts(prep, [keep, drop], HashingEmbedder(), store)
    k, d = rep.facts
    assert _states(rep, 0) == ["present", "summarized", "summarized"]
    assert _states(rep, 1) == ["present", "gone", "gone"]
    for f in (k, d):
        assert f.disappeared_at == 2 and f.cause["type"] == "compaction" and f.cause["recorded"] is True
    assert k.cause["seqs"] == [1] and d.cause["seqs"] == [2]
    assert k.to_dict(rep.step_seqs)["timeline"][1]["source_seq"] == 5  # the summary carries it
    assert [s["kind"] for s in k.sources] == ["message", "compaction_summary"]


def test_recollection_and_restatement_after_the_source_is_gone(store):
    fact = "Never push directly to the main branch."
    filler = "\n".join(f"line {i}: build output for module_{i}" for i in range(30))
    msgs = [Message("system", "You are a release agent."), Message("user", fact)]
    for i in range(4):
        msgs += [Message("assistant", f"Step {i}.", tool_calls=(ToolCall("bash", '{"command": "make"}', f"c{i}"),)),
                 Message("tool", filler, tool_call_id=f"c{i}")]
    msgs += [Message("assistant", fact), Message("user", "ok"), Message("assistant", "Pushed.")]
    sid = _write(store, "recall", msgs)
    spec = ModelSpec("tiny", "approx", 600, 0, "left_truncation")
    rep = track_facts(prepare(store, sid, spec), [fact], HashingEmbedder(), store)
    f = rep.facts[0]
    states = _states(rep, 0)
    recall_step = rep.step_seqs.index(10) + 1
    assert f.disappeared_at is not None and states[recall_step - 1] == "gone"
    assert f.recollections == [{"step": recall_step, "seq": 10, "score": 1.0}]
    assert f.restated == [{"step": recall_step + 1, "seq": 10, "role": "assistant", "score": 1.0}]
    assert states[recall_step] == "present" and f.last_present == len(states)


def test_a_cleared_tool_result_takes_its_fact_with_it(store, cfg):
    sid = rep_sid(store) if False else resolve_session(store, str(RELEASE))
    line = store.messages(sid)[3].message.text.splitlines()[0]
    rep = _track(store, cfg, RELEASE, [line], model="gpt-4o", policy="tool_result_clearing",
                 params={"trigger": 150, "keep": 1})
    f = rep.facts[0]
    assert f.first_appeared == 2 and f.disappeared_at is not None
    assert f.cause["type"] == "clearing" and f.cause["seqs"] == [3] and f.cause["roles"] == ["tool"]
    assert _states(rep, 0)[f.disappeared_at - 1] == "gone"


def test_each_unique_chunk_is_encoded_once_and_a_warm_run_encodes_nothing(store, cfg):
    e = HashingEmbedder()
    stats = EmbedStats()
    _track(store, cfg, RELEASE, [CONSTRAINT, BUDGET], embedder=e, stats=stats)
    sid = rep_sid(store)
    msgs = store.messages(sid)
    from context_forensics.analysis.facts import presence_text

    chunks = set(chunk_many([presence_text(m.message) for m in msgs]).texts)
    # and the sub-sentence spans of the chunks past the documented span gate, recomputed here
    spans = set()
    for fact in (CONSTRAINT, BUDGET):
        fv = HashingEmbedder().encode([fact])[0]
        for ch in chunks:
            cos = float(HashingEmbedder().encode([ch])[0] @ fv)
            holds = cos >= 0.6 and not missing_tokens(lexical_tokens(fact), ch) and not polarity_conflict(fact, ch)
            if (cos >= SPAN_FLOOR and word_count(ch) > word_count(fact) and not holds
                    and len(content_stems(fact) & content_stems(ch)) >= SPAN_OVERLAP * len(content_stems(fact))):
                spans |= {ch[a:b] for a, b in sub_spans(ch, word_count(fact), cross_clauses=has_clause_cut(fact),
                                                        anchors=edge_words(fact))}
    assert spans  # the fixture's user message holds both facts in one longer sentence
    expected = chunks | spans | {CONSTRAINT, BUDGET}
    assert len(e.encoded) == len(set(e.encoded))  # never a text twice
    assert set(e.encoded) == expected
    assert stats.encoded == len(expected)
    warm, warm_stats = HashingEmbedder(), EmbedStats()
    _track(store, cfg, RELEASE, [CONSTRAINT, BUDGET], embedder=warm, stats=warm_stats)
    assert warm.encoded == [] and warm_stats.encoded == 0 and warm_stats.hits == len(expected)
    # a new fact costs one encode
    new = HashingEmbedder()
    _track(store, cfg, RELEASE, [CONSTRAINT, "A brand new fact."], embedder=new)
    assert new.encoded == ["A brand new fact."]


def test_messages_no_window_can_hold_are_not_embedded(store):
    sid = _write(store, "tail", [Message("user", "Never push to main."), Message("assistant", "ok"),
                                 Message("user", "A trailing message no model call ever read.")])
    e = HashingEmbedder()
    track_facts(prepare(store, sid, "gpt-4o"), ["Never push to main."], e, store)
    assert "A trailing message no model call ever read." not in e.encoded and "ok" in e.encoded


def test_timeline_uses_only_the_supporting_messages(store, cfg, monkeypatch):
    calls = []
    real = Timeline.states

    def spy(self, i):
        calls.append(i)
        return real(self, i)

    monkeypatch.setattr(Timeline, "states", spy)
    _track(store, cfg, RELEASE, [CONSTRAINT, BUDGET])
    assert sorted(set(calls)) == [1] and len(calls) == 2  # one expansion per (fact, source)


def test_no_facts_is_a_usage_error(store, cfg):
    with pytest.raises(UsageError, match="no facts"):
        _track(store, cfg, RELEASE, [])


def test_facts_must_persist_audit_rule(store, cfg, monkeypatch):
    from context_forensics.analysis.audit.rules import Ctx, _facts_persist as audit_rule
    from context_forensics.config.audit_rules import RuleConfig

    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: HashingEmbedder())
    sid = rep_sid(store)
    ctx = Ctx(store, sid, cfg, store.session(sid))
    never = "Use the blue-green deployment strategy for every release."
    res = audit_rule(ctx, RuleConfig("facts_must_persist", {}, model="tiny"), [CONSTRAINT, never])
    assert (res.status, res.figure, res.step) == ("fail", 1, 5)
    assert "eviction" in res.message and res.detail["never_present"] == [never]
    assert res.detail["facts"][0]["disappeared_at"] == 5
    ok = audit_rule(ctx, RuleConfig("facts_must_persist", {}, model="tiny-local"), [CONSTRAINT])
    assert ok.status == "pass" and ok.figure == 0  # outside local attention is at risk, not gone


# ============================================================================ suggest


def test_suggest_picks_constraints_from_the_system_prompt_and_first_user_message(store):
    sid = resolve_session(store, str(SAMPLE))
    got = suggest_facts(store.messages(sid))
    texts = [s.text for s in got]
    for want in ("Never modify files under tests/.", "The change budget is at most 4,500 changed lines.",
                 "Always run `pytest -q` before you say you are done.",
                 "Do not touch the tests; they define the contract.",
                 "Add tiered discounts (5% over 100 EUR, 10% over 500 EUR) to shopcart/pricing.py."):
        assert want in texts
    assert "Rules:" not in texts
    assert all(s.seq in (0, 1) for s in got)  # nothing after the first user message
    assert texts.index("The change budget is at most 4,500 changed lines.") < texts.index(
        "You are a coding agent working in the repository `shopcart`.")
    budget = next(s for s in got if s.text.startswith("The change budget"))
    assert {"at most", "numbers"} <= set(budget.reasons)
    assert suggest_facts([Message("user", "hello there, how are you today")]) == []


def test_suggest_reads_the_task_not_a_demonstration_the_harness_replays_before_it():
    """SWE-agent (classic) sends a demonstration as the first user message (``is_demo``: a solved
    marshmallow task, its files listed with line numbers) and the task after it, as
    swe-agent-traj/sweagent-testdata/pydicom__pydicom-1458.traj does. The demonstration is not
    the run's opening: its code lines are no constraints, and the task's sentences are."""
    msgs = [
        Message("system", "However, the environment does NOT support interactive session commands, so please "
                          "do not invoke them."),
        Message("user", "Here is a demonstration of how to correctly accomplish this task.\n"
                        "1463:            msg = 'The precision must be {} or \"{}\".'.format(\n"
                        "1539:                self.only = self.value_field.only\n",
                meta={"is_demo": True}),
        Message("user", "We're currently solving the following issue within our repository.\n"
                        "Pixel Representation shall be absent for Float Pixel Data, so never require it there."),
        Message("assistant", "I'll reproduce it first, and never edit the tests."),
    ]
    from types import SimpleNamespace

    got = suggest_facts([SimpleNamespace(seq=i, message=m) for i, m in enumerate(msgs)])  # as the store lists them
    assert [s.seq for s in got if s.seq == 1] == []  # nothing from the demonstration
    texts = [s.text for s in got]
    assert "Pixel Representation shall be absent for Float Pixel Data, so never require it there." in texts
    assert all(s.seq in (0, 2) for s in got)  # the system prompt and the task; no reply


@pytest.mark.integration
def test_no_corpus_session_is_suggested_a_fact_from_a_demonstration(corpus_ingest):
    """Over every corpus session of every agent: `facts suggest` (and explain's suggested
    constraints) never propose a sentence of a demonstration message, and a session whose
    opening has a demonstration still gets its task's sentences when the task has any. The task
    is the first user message after the demonstrations that holds the person's words (or the
    issue a SWE harness's template quotes): Aider's prompts after its examples (its file lists,
    "I am working with you on code in a git repository") are the harness's, not the task."""
    db, _ = corpus_ingest
    with Store.open(db) as st:
        demo_sessions = 0
        for row in st.sessions():
            msgs = st.messages(row["id"])
            demos = {sm.seq for sm in msgs if (sm.message.meta or {}).get("is_demo")}
            got = suggest_facts(msgs)
            assert not [s for s in got if s.seq in demos], (row["id"], [s.text for s in got if s.seq in demos][:3])
            if demos:
                demo_sessions += 1
                task = next(sm for sm in msgs if sm.message.role == "user" and sm.seq not in demos
                            and (human_text(sm.message) or re.search(r"<pr_description>|^ISSUE:", sm.message.text or "",
                                                                     re.M)))
                if suggest_facts([task]):  # the task alone has sentences to propose
                    assert any(s.seq == task.seq for s in got), (row["id"], [s.text for s in got][:3])
    assert demo_sessions >= 2  # the corpus' SWE-agent pydicom run and its marshmallow demonstration file


# ============================================================================ calibrate


def test_calibration_table_and_recommendation(tmp_path):
    pairs = [Pair(BUDGET, "The total budget for cloud spend is 4,500 EUR, approved.", True),
             Pair(BUDGET, "The total budget for cloud spend is 3,000 EUR.", False),
             Pair(CONSTRAINT, CONSTRAINT, True),
             Pair(CONSTRAINT, "The weather in Lisbon is sunny.", False)]
    out = calibrate(pairs, HashingEmbedder(), current=0.6)
    rows = out["table"]
    assert [r["threshold"] for r in rows] == sorted(r["threshold"] for r in rows)
    assert all(a["recall"] >= b["recall"] for a, b in zip(rows, rows[1:]))
    assert all(r["tp"] + r["fn"] == 2 and r["fp"] + r["tn"] == 2 for r in rows)
    assert out["recommended"]["f1"] == max(r["f1"] for r in rows) == 1.0
    changed = out["scores"][1]
    assert changed["lexical_ok"] is False and changed["missing"] == ["4500"] and changed["cosine"] > 0.6
    assert out["current"]["threshold"] == 0.6 and out["lexical_failures"] == 1


def test_calibration_reports_each_subset_at_060_075_and_the_current_threshold():
    pairs = [Pair(BUDGET, "The total budget for cloud spend is 4,500 EUR, approved.", True),
             Pair(BUDGET, "The total budget for cloud spend is 3,000 EUR.", False),
             Pair(RENAME, "You may rename any public function.", False, "negation"),
             Pair(RENAME, "Avoid renaming any public function.", True, "negation"),
             Pair(CAPPED, TRIP, True, "compound")]
    out = calibrate(pairs, HashingEmbedder(), current=0.65)
    subs = {s["subset"]: s for s in out["subsets"]}
    assert list(subs) == ["base", "negation", "compound", "all"]
    assert [(s["pairs"], s["positives"]) for s in subs.values()] == [(2, 1), (2, 1), (1, 1), (5, 3)]
    assert [a["threshold"] for a in subs["all"]["at"]] == [0.6, 0.75, 0.65]
    # the subsets add up to the whole, and "all" at a threshold is the table's row there
    for k in range(3):
        for key in ("tp", "fp", "fn", "tn"):
            assert sum(subs[n]["at"][k][key] for n in ("base", "negation", "compound")) == subs["all"]["at"][k][key]
    assert subs["all"]["at"][0] == next(r for r in out["table"] if r["threshold"] == 0.6)
    flip = out["scores"][2]
    assert flip["score"] is None and flip["polarity_ok"] is False and flip["lexical_ok"] is True
    assert flip["polarity"]["reason"] == "polarity differs: 'Do not rename' vs 'You may rename'"
    assert out["polarity_failures"] == 1 and out["lexical_failures"] == 1
    assert out["scores"][4]["span"] == "the total budget is capped at 4,500 euros" and out["scores"][4]["score"] > 0.95
    # a pairs file without subsets reports none
    assert calibrate(pairs[:2], HashingEmbedder())["subsets"] == []


def test_pairs_load_from_csv_tsv_jsonl_and_yaml(tmp_path):
    rows = [("Never push to main.", "Do not push to main, ever.", "yes"), ("Budget 4,500", "budget, 3,000", "no")]
    (tmp_path / "p.csv").write_text("fact,text,present\n" + "".join(f'"{a}","{b}",{c}\n' for a, b, c in rows))
    (tmp_path / "p.tsv").write_text("fact\ttext\tpresent\n" + "".join(f"{a}\t{b}\t{c}\n" for a, b, c in rows))
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"fact": a, "text": b, "present": c == "yes"}) + "\n"
                                              for a, b, c in rows))
    (tmp_path / "p.yaml").write_text("pairs:\n" + "".join(f"  - {{fact: '{a}', text: '{b}', present: {c}}}\n"
                                                          for a, b, c in rows))
    want = [Pair(a, b, c == "yes") for a, b, c in rows]
    for ext in ("csv", "tsv", "jsonl", "yaml"):
        assert load_pairs(tmp_path / f"p.{ext}") == want, ext
    (tmp_path / "bad.csv").write_text("fact,text,present\na,b,maybe\n")
    with pytest.raises(InputError, match=r"bad.csv:2.*yes/no"):
        load_pairs(tmp_path / "bad.csv")
    (tmp_path / "nohead.csv").write_text("a,b,c\n")
    with pytest.raises(InputError, match="fact, text, present"):
        load_pairs(tmp_path / "nohead.csv")
    assert len(load_pairs(PAIRS)) > 50
    # an optional subset column
    (tmp_path / "s.csv").write_text("fact,text,present,subset\na,b,yes,negation\nc,d,no,\n")
    assert load_pairs(tmp_path / "s.csv") == [Pair("a", "b", True, "negation"), Pair("c", "d", False)]
    from collections import Counter
    assert Counter(p.subset for p in load_pairs(PAIRS)) == {"": 66, "negation": 30, "compound": 20, "statements": 21,
                                                            "verbatim": 10}


# ============================================================================ rendering


def test_the_glyph_strip_downsamples_to_the_worst_state():
    states = ["not_yet"] * 3 + ["present"] * 5 + ["at_risk"] * 4 + ["gone"] * 188
    text, per = strip(states, 50)
    assert per == 4 and len(text.plain) == 50
    assert text.plain[:3] == "██▓" and set(text.plain[3:]) == {"·"}
    assert strip(["not_yet", "present", "summarized"], 60)[0].plain == " █▒"


# ============================================================================ CLI



def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_cli_json_contract(tmp_path, hashing):
    db = tmp_path / "s.db"
    ff = tmp_path / "facts.yaml"
    ff.write_text(f"facts:\n  - '{NEW_BUDGET}'\n  - '{BUDGET}'\n")
    r = run("facts", RELEASE, "--db", db, "--config", CONFIG, "--model", "tiny", "--fact", BUDGET,
            "--facts-file", ff, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["version"] == 1 and data["session"]["format"] == "openai_chat"
    assert (data["model"], data["policy"], data["threshold"], data["steps"]) == ("tiny", "left_truncation", 0.6, 10)
    # --fact, then --facts-file, then the config's facts; each once
    assert [f["fact"] for f in data["facts"]] == [BUDGET, NEW_BUDGET, CONSTRAINT]
    replay = json.loads(run("replay", RELEASE, "--db", db, "--config", CONFIG, "--model", "tiny", "--json").stdout)
    seqs = [s["message_seq"] for s in replay["replays"][0]["steps"]]
    for f in data["facts"]:
        for key in ("fact", "first_appeared", "last_present", "disappeared_at", "cause", "timeline"):
            assert key in f
        assert [t["step"] for t in f["timeline"]] == list(range(1, 11))
        assert [t["message_seq"] for t in f["timeline"]] == seqs
        for t in f["timeline"]:
            assert set(t) >= {"step", "message_seq", "state", "score"}
            assert (t["score"] is None) == (t["state"] in ("gone", "not_yet"))
    for f in (data["facts"][0], data["facts"][2]):
        assert f["disappeared_at"] == 5 and f["cause"]["type"] == "eviction" and f["cause"]["seqs"] == [1]
    assert data["facts"][1]["first_appeared"] == 5 and data["facts"][1]["disappeared_at"] == 9
    json.dumps(data)  # plain JSON all the way down


def test_cli_default_subcommand_show_suggest_and_help(tmp_path, hashing):
    db = tmp_path / "s.db"
    common = ("--db", db, "--config", CONFIG, "--model", "tiny", "--json")
    a = json.loads(run("facts", RELEASE, *common).stdout)
    b = json.loads(run("facts", "show", RELEASE, *common).stdout)
    c = json.loads(run("facts", "--json", RELEASE, "--db", db, "--config", CONFIG, "--model", "tiny").stdout)
    for d in (a, b, c):
        d.pop("embed_stats")  # the first run encodes, the others read the cache
    assert a == b == c
    help_out = run("facts", "--help").stdout
    assert "suggest" in help_out and "show" in help_out
    sug = run("facts", "suggest", SAMPLE, "--db", db, "--json")
    assert sug.exit_code == 0
    rows = json.loads(sug.stdout)["suggestions"]
    assert "Never modify files under tests/." in [r["text"] for r in rows]
    assert set(rows[0]) == {"text", "seq", "role", "score", "reasons"}
    table = run("facts", "suggest", SAMPLE, "--db", db)
    assert "Never modify files under tests/." in table.stdout


def test_cli_table_at_step_and_plot(tmp_path, hashing):
    db = tmp_path / "s.db"
    png = tmp_path / "facts.png"
    r = run("facts", RELEASE, "--db", db, "--config", CONFIG, "--model", "tiny", "--fact", BUDGET, "--at", 7,
            "--plot", png)
    assert r.exit_code == 0, r.output
    assert "████······" in r.stdout  # 4 steps present, then gone
    assert "@ step 7" in r.stdout and "eviction #1" in r.stdout
    assert "step 5: present → gone by eviction [left_truncation] of #1 user" in r.stdout
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    bad = run("facts", RELEASE, "--db", db, "--config", CONFIG, "--model", "tiny", "--at", 99)
    assert bad.exit_code == 2 and "out of range" in bad.stderr


def test_cli_without_facts_says_how_to_get_some(tmp_path, hashing):
    r = run("facts", SAMPLE, "--db", tmp_path / "s.db")
    assert r.exit_code == 2 and "no facts" in r.stderr and "ctxf facts suggest" in r.stderr


def test_cli_without_model_replays_the_recorded_policy(tmp_path, hashing):
    r = run("facts", RELEASE, "--db", tmp_path / "s.db", "--config", CONFIG, "--json")
    data = json.loads(r.stdout)
    assert data["policy"] == "recorded" and data["facts"][0]["disappeared_at"] is None


def test_cli_calibrate(tmp_path, hashing):
    r = run("calibrate", "--pairs", PAIRS, "--db", tmp_path / "s.db", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["pairs"] == len(load_pairs(PAIRS)) and data["current"]["threshold"] == 0.6
    assert data["recommended"]["threshold"] in [row["threshold"] for row in data["table"]]
    table = run("calibrate", "--pairs", PAIRS, "--db", tmp_path / "s.db")
    assert "recommended fact_presence_cosine" in table.stdout
    assert "by subset" in table.stdout and "@ 0.75" in table.stdout
    assert [ln.split()[0] for ln in table.stdout.splitlines()[-8:] if ln.strip()][-6:] == [
        "base", "negation", "compound", "statements", "verbatim", "all"]
    assert [s["subset"] for s in data["subsets"]] == ["base", "negation", "compound", "statements", "verbatim", "all"]
    missing = run("calibrate", "--pairs", tmp_path / "nope.csv", "--db", tmp_path / "s.db")
    assert missing.exit_code == 1 and "cannot read" in missing.stderr


@pytest.mark.parametrize("columns", [60, 80])
def test_cli_calibrate_fits_the_terminal_without_cutting_a_figure(tmp_path, hashing, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    out = run("calibrate", "--pairs", PAIRS, "--db", tmp_path / "s.db").stdout
    assert "…" not in out and max(map(len, out.splitlines())) <= columns
    data = json.loads(run("calibrate", "--pairs", PAIRS, "--db", tmp_path / "s.db", "--json").stdout)
    words = set(out.split())
    for sub in data["subsets"]:
        assert sub["subset"] in words
        for a in sub["at"]:
            assert {f"{a['precision']:.2f}", f"{a['recall']:.2f}", f"{a['f1']:.3f}"} <= words
    for row in data["table"]:
        assert {f"{row['threshold']:.2f}", f"{row['f1']:.3f}"} <= words


# ============================================================================ real model


@pytest.mark.integration
def test_real_minilm_paraphrase_recollection_and_changed_number(store, cfg, minilm):
    paraphrase = "Direct pushes to main are not allowed; use a pull request."
    rep = _track(store, cfg, RELEASE, [paraphrase, BUDGET, NEW_BUDGET], embedder=minilm)
    p, b, nb = rep.facts
    assert p.sources[0]["seq"] == 1 and p.sources[0]["score"] >= 0.6  # the paraphrase finds the user's rule
    assert (p.first_appeared, p.disappeared_at, p.cause["seqs"]) == (1, 5, [1])
    # step 7: the agent restates the rule from memory; from step 8 its own words carry it
    assert [r["step"] for r in p.recollections] == [7] and p.recollections[0]["seq"] == 15
    assert p.restated[0]["step"] == 8 and p.restated[0]["role"] == "assistant"
    assert _states(rep, 0)[4:8] == ["gone", "gone", "gone", "present"]
    # a number that changes: the 4,500 budget is not "present" in the 3,000 update, however close
    assert (b.disappeared_at, nb.first_appeared, nb.disappeared_at) == (5, 5, 9)
    assert nb.near_misses[0]["seq"] == 1 and nb.near_misses[0]["score"] > 0.8
    assert b.near_misses[0]["seq"] == 10


@pytest.mark.integration
def test_real_minilm_finds_a_fact_inside_a_long_tool_output(store, minilm):
    rate = "The payments API allows at most 20 requests per second."
    other = "The payments API allows at most 50 requests per second."
    sid = resolve_session(store, str(LONG_OUTPUT))
    prep = prepare(store, sid, "gpt-4o")
    assert prep.inp.tokens[3] > 4000  # the tool output is ~5,000 tokens
    rep = track_facts(prep, [rate, other], minilm, store)
    r, o = rep.facts
    assert _states(rep, 0) == ["not_yet", "present"]
    assert r.sources[0]["seq"] == 3 and r.sources[0]["score"] > 0.8 and "20 requests" in r.sources[0]["chunk"]
    assert _states(rep, 1) == ["not_yet", "not_yet"] and o.near_misses[0]["missing"] == ["50"]


@pytest.mark.integration
def test_real_minilm_calibration_supports_the_default_threshold(minilm):
    out = calibrate(load_pairs(PAIRS), minilm, current=0.6)
    assert 0.5 <= out["recommended"]["threshold"] <= 0.7
    at = {s["subset"]: {a["threshold"]: a for a in s["at"]} for s in out["subsets"]}
    # the 66 pairs of the base set (before issue 9: F1 0.933 at 0.6, and so asserted on the whole file)
    assert at["base"][0.6]["f1"] >= 0.9 and at["base"][0.6]["precision"] >= 0.9
    # issue 9 items 15-16 (before the polarity check and span scoring: negation F1 0.61 at 0.6, 0.63
    # at 0.75; compound 0.67 at 0.6, 0.35 at 0.75)
    assert at["negation"][0.6]["f1"] >= 0.9 and at["negation"][0.75]["f1"] >= 0.9
    assert at["compound"][0.6]["f1"] >= 0.85 and at["compound"][0.75]["f1"] >= 0.85
    assert at["compound"][0.75]["recall"] >= 0.9
    base = [s for s in out["scores"] if s["subset"] == ""]
    # every changed number, date, name or identifier of the base set is caught by the lexical check
    near = [s for s in base if not s["present"] and (s["cosine"] or 0) > 0.9]
    assert near and all(not s["lexical_ok"] and s["missing"] for s in near)
    # issue 30 items 9-10 (before: statements F1 0.571 at 0.6, 0.824 at 0.75; verbatim 0.615 and
    # 0.364): a text keeping the topic of a ban without the ban is no match, a copy up to layout is
    for name in ("statements", "verbatim"):
        assert at[name][0.6]["f1"] >= 0.95 and at[name][0.6]["precision"] == 1.0, name
    assert at["verbatim"][0.75]["recall"] == 1.0  # a copy holds the fact at any threshold
    # the polarity and statement checks turn down no pair that holds its fact (a false flip or
    # drop would hide it) ...
    assert all(s["polarity_ok"] and s["clauses_ok"] for s in out["scores"] if s["present"])
    # ... and most flips: 15 of the 17 negation pairs labelled absent (two are known misses, see
    # make_fixtures.py)
    flips = [s for s in out["scores"] if s["subset"] == "negation" and not s["present"]]
    assert sum(not s["polarity_ok"] for s in flips) >= 15


NEG_COMPOUND = FACTS / "negation_compound.openai.json"


@pytest.mark.integration
def test_real_minilm_through_ctxf_facts_a_flip_is_a_near_miss_and_a_compound_fact_is_found(tmp_path, minilm,
                                                                                          monkeypatch):
    """Issue 9 items 15-16 end to end: the user's "you may rename any public function" does not
    hold the ban (MiniLM 0.87: it did before), and the budget inside the compound sentence is
    found at 0.75 (whole sentence 0.51: it was not)."""
    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: minilm)
    args = ("facts", NEG_COMPOUND, "--db", tmp_path / "s.db", "--threshold", 0.75,
            "--fact", RENAME, "--fact", CAPPED, "--fact", "You may rename any public function.")
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    ban, budget, permission = data["facts"]
    # span scoring says what it cost: the trip sentence split for the budget, and what it embedded
    assert data["spans"]["pairs_split"] >= 1 and data["spans"]["span_texts"] >= 1
    assert ban["first_appeared"] is None and [t["state"] for t in ban["timeline"]] == ["not_yet", "not_yet"]
    nm = ban["near_misses"][0]
    assert nm["seq"] == 3 and nm["score"] > 0.8 and nm["missing"] == []
    assert nm["polarity"]["reason"] == nm["reason"] == "polarity differs: 'Do not rename' vs 'you may rename'"
    assert (nm["polarity"]["fact_stance"], nm["polarity"]["text_stance"]) == ("negated", "permitted")
    assert budget["first_appeared"] == 1 and budget["final_state"] == "present"
    src = budget["sources"][0]
    assert src["seq"] == 1 and src["score"] > 0.95 and src["span"] == "the total budget is capped at 4,500 euros"
    assert src["chunk"].startswith("We are eight people")
    # the same-polarity fact is there from the message that says it
    assert permission["first_appeared"] == 2 and permission["sources"][0]["seq"] == 3
    table = run(*args)
    assert "never in any window; closest text with other polarity: #3" in table.stdout
    assert "polarity differs: 'Do not rename' vs 'you may rename'" in table.stdout
