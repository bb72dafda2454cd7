"""The facts prefilter (issue 17): only the chunks that could support a fact are embedded, and the
verdicts are those of the full method (``exhaustive``).

Unit tests use the deterministic ``HashingEmbedder`` (with it, facts without lexical tokens have
no cheap gate: every chunk is a candidate for them, so the unit tests that count encodes track
facts with numbers or names); the ``integration`` tests use the real MiniLM, on the labelled
fixtures and on one corpus session (skipped where the corpus is absent).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from context_forensics.analysis.facts import (
    SPAN_OVERLAP,
    content_stems,
    lexical_tokens,
    missing_tokens,
    presence_text,
    score_presence,
    suggest_facts,
    track_facts,
)
from context_forensics.analysis.replay import prepare
from context_forensics.cli import (
    app,
    facts as cli_facts,  # noqa: F401 - registers `ctxf facts`
)
from context_forensics.config.settings import load_config, validate
from context_forensics.embed import HashingEmbedder, chunk_many
from context_forensics.errors import ConfigError
from context_forensics.records import Message, Session
from context_forensics.store.db import Store
from context_forensics.store.ingest import resolve_session
from helpers import CORPUS, FIXTURES

FACTS = FIXTURES / "facts"
CONFIG = FACTS / "config.yaml"
FIXTURE_FACTS = {
    "release.openai.json": ["The total budget for cloud spend is 4,500 EUR.", "The cloud spend budget is 3,000 EUR."],
    "long_tool_output.openai.json": ["The payments API allows at most 20 requests per second.",
                                     "The payments API allows at most 50 requests per second."],
    "negation_compound.openai.json": ["The total budget is capped at 4,500 euros.",
                                      "We are 8 people travelling to Lisbon in June."],
    # a recorded compaction whose summary keeps the topic of two bans (issue 30 item 9)
    "summary_drops_ban.claude_code.jsonl": [
        "Keep `render/1` call sites compatible; do not change the persistence schema.",
        "The migration is priv/repo/migrations/20260212093000_add_co_change_groups.exs."],
}
PLAIN = ["Never push directly to the main branch; open a pull request instead.", "Do not rename any public function."]


@pytest.fixture()
def store(tmp_path):
    with Store.open(tmp_path / "s.db") as s:
        yield s


@pytest.fixture(scope="module")
def cfg():
    return load_config(CONFIG)


def _both(store_path, name, facts, model, cfg, embedder_factory):
    """(exhaustive report, its embedder, prefiltered report, its embedder), each on a fresh store
    (no shared cache: each embedder's ``encoded`` is everything that run needed)."""
    out = []
    for i, exhaustive in enumerate((True, False)):
        with Store.open(store_path / f"{name}-{model}-{i}.db") as st:
            sid = resolve_session(st, str(FACTS / name))
            e = embedder_factory()
            rep = track_facts(prepare(st, sid, model, config=cfg), facts, e, st, exhaustive=exhaustive)
            out += [rep, e]
    return out


def _same_verdicts(ex, pf):
    for a, b in zip(ex.facts, pf.facts):
        assert np.array_equal(a.state, b.state), a.fact
        assert a.final_state == b.final_state
        assert [s["seq"] for s in a.sources] == [s["seq"] for s in b.sources]
        assert [s["score"] for s in a.sources] == [s["score"] for s in b.sources]
        assert a.disappeared_at == b.disappeared_at and a.cause == b.cause


@pytest.mark.parametrize("name", sorted(FIXTURE_FACTS))
@pytest.mark.parametrize("model", [None, "tiny", "tiny-local", "tiny-compact"])
def test_prefiltered_verdicts_equal_the_exhaustive_ones_and_fewer_texts_are_encoded(tmp_path, cfg, name, model):
    ex, e_ex, pf, e_pf = _both(tmp_path, name, FIXTURE_FACTS[name], model, cfg, HashingEmbedder)
    _same_verdicts(ex, pf)
    assert any(f.sources for f in ex.facts)  # the fixture holds some of its facts: the comparison bites
    assert set(e_pf.encoded) < set(e_ex.encoded)  # a strict subset: fewer texts, none the full run lacks
    assert ex.method["method"] == "exhaustive" and ex.method["encoded"] == ex.method["chunks"]
    assert pf.method["method"] == "prefiltered" and pf.method["encoded"] < pf.method["chunks"]
    assert pf.method["chunks"] == ex.method["chunks"] and pf.method["near_misses"] == "encoded candidates only"


def test_facts_without_lexical_tokens_keep_the_full_method_without_a_measured_gate(tmp_path, cfg):
    """The static gate is measured for the packaged MiniLM only: with another embedder a fact
    without numbers or names makes every chunk a candidate (the full method), said in the JSON."""
    ex, e_ex, pf, e_pf = _both(tmp_path, "release.openai.json", PLAIN + FIXTURE_FACTS["release.openai.json"],
                               "tiny", cfg, HashingEmbedder)
    _same_verdicts(ex, pf)
    assert set(e_pf.encoded) == set(e_ex.encoded)
    assert pf.method["facts_without_gate"] == 2 and pf.method["static_gate"] is None


def _write(store, sid, msgs):
    with store.transaction():
        store.write_session(Session(sid, "test", messages=iter(msgs)), sid=sid, source=sid, source_hash=sid,
                            parent_id=None)
    return sid


def test_a_fact_with_a_number_never_encodes_chunks_lacking_the_number(store):
    fact = "The total budget for cloud spend is 4,500 EUR."
    msgs = [Message("system", "You are a finance agent."),
            Message("user", "Plan the quarter. The total budget for cloud spend is 4,500 EUR.")]
    for i in range(12):
        msgs += [Message("assistant", f"Checking invoice batch {i} for the storage team now."),
                 Message("user", f"Batch {i} holds {100 + i} invoices from the vendor portal.")]
    msgs += [Message("assistant", "Noted: the cloud spend budget total is 3,000 EUR now."),  # same words, other number
             Message("assistant", "Spending stays under 4500 as agreed."), Message("user", "ok")]
    sid = _write(store, "budget", msgs)
    e = HashingEmbedder()
    rep = track_facts(prepare(store, sid, "gpt-4o"), [fact], e, store)
    toks = lexical_tokens(fact)
    stems = content_stems(fact)
    texts = [presence_text(m) for m in msgs]
    chunked = chunk_many(texts)
    hood = {}  # each chunk text -> the neighbourhoods it occurs in
    for c, ch in enumerate(chunked.chunks):
        lo = c - 1 if c > 0 and chunked.owner[c - 1] == chunked.owner[c] else c
        hi = c + 1 if c + 1 < len(chunked) and chunked.owner[c + 1] == chunked.owner[c] else c
        t = texts[int(chunked.owner[c])]
        hood.setdefault(ch.text, []).append(t[chunked.chunks[lo].start : chunked.chunks[hi].end])
    encoded = [t for t in e.encoded if t in hood]
    # the rest: the fact and sub-sentence spans of encoded chunks
    assert all(t == fact or any(t in c for c in encoded) for t in e.encoded if t not in hood)
    assert encoded and len(encoded) < len(hood) - 10  # most chunks never reach the encoder
    for t in encoded:
        # a candidate holds the number (in its neighbourhood), or is a near-miss candidate: half the
        # fact's content words (the "3,000 EUR" sentence)
        has_number = any(not missing_tokens(toks, h) for h in hood[t])
        assert has_number or len(stems & content_stems(t)) >= SPAN_OVERLAP * len(stems), t
    assert not any("invoice" in t for t in e.encoded)
    assert "Spending stays under 4500 as agreed." in e.encoded  # holds the number: judged
    (f,) = rep.facts
    assert [s["seq"] for s in f.sources] == [1]
    assert f.near_misses and f.near_misses[0]["missing"] == ["4500"]  # the 3,000 update is still a near miss
    assert rep.method["near_misses"] == "encoded candidates only"


def test_score_presence_prefilter_equals_full_on_pairs_with_a_mask():
    facts = ["The total budget for cloud spend is 4,500 EUR.", "Call `apply_discount` once per order."]
    texts = ["Our cloud budget is 4,500 EUR in total.", "The cloud budget is 3,000 EUR.",
             "Call apply_discount once per order.", "Call apply_discount_v2 once.", "Unrelated chatter about lunch."]
    mask = np.array([[1, 1, 0, 0, 1], [0, 0, 1, 1, 1]], dtype=bool)
    full = score_presence(facts, texts, HashingEmbedder(), mask=mask)
    e = HashingEmbedder()
    pre = score_presence(facts, texts, e, mask=mask, prefilter=True)
    assert np.array_equal(np.isfinite(full.score), np.isfinite(pre.score))
    assert np.isfinite(full.score).sum() == 2  # the comparison is not empty
    assert "Unrelated chatter about lunch." not in e.encoded
    assert full.plan["method"] == "exhaustive" and pre.plan["method"] == "prefiltered"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_cli_exhaustive_flag_and_the_json_says_which_method_ran(tmp_path, hashing):
    release = FACTS / "release.openai.json"
    fact = FIXTURE_FACTS["release.openai.json"][0]
    conf = tmp_path / "c.yaml"  # the fixtures' models without their `facts:` (a fact without numbers or names)
    conf.write_text(CONFIG.read_text().split("\nfacts:")[0] + "\n")
    base = ("facts", release, "--config", conf, "--model", "tiny", "--fact", fact, "--json")
    pre = json.loads(run(*base, "--db", tmp_path / "a.db").stdout)
    full = json.loads(run(*base, "--db", tmp_path / "b.db", "--exhaustive").stdout)
    assert pre["method"]["method"] == "prefiltered" and full["method"]["method"] == "exhaustive"
    assert pre["method"]["encoded"] < pre["method"]["chunks"] == full["method"]["chunks"] == full["method"]["encoded"]
    assert [t["state"] for t in pre["facts"][0]["timeline"]] == [t["state"] for t in full["facts"][0]["timeline"]]
    text = run(*base[:-1], "--db", tmp_path / "a.db").stdout
    assert f"embedded {pre['method']['encoded']} of {pre['method']['chunks']} unique chunks" in text
    assert "--exhaustive" not in run(*base[:-1], "--db", tmp_path / "b.db", "--exhaustive").stdout


def test_audit_rule_exhaustive_switch_is_validated_and_used(tmp_path, cfg, monkeypatch):
    from context_forensics.analysis.audit.rules import Ctx, _facts_persist as audit_rule
    from context_forensics.config.audit_rules import RULE_PARAMS, RuleConfig

    with pytest.raises(ConfigError, match="exhaustive"):
        validate({"audit": {"rules": {"facts_must_persist": {"exhaustive": "yes"}}}}, "c.yaml")
    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: HashingEmbedder())
    fact = FIXTURE_FACTS["release.openai.json"][0]
    got = {}
    for exhaustive in (False, True):
        with Store.open(tmp_path / f"{exhaustive}.db") as st:
            sid = resolve_session(st, str(FACTS / "release.openai.json"))
            ctx = Ctx(st, sid, cfg, st.session(sid))
            params = {**RULE_PARAMS["facts_must_persist"], "exhaustive": exhaustive}
            got[exhaustive] = audit_rule(ctx, RuleConfig("facts_must_persist", params, model="tiny"), [fact])
    assert got[False].detail["method"]["method"] == "prefiltered"
    assert got[True].detail["method"]["method"] == "exhaustive"
    assert (got[False].status, got[False].step) == (got[True].status, got[True].step) == ("fail", 5)


# ============================================================================ integration (real MiniLM)


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(FIXTURE_FACTS))
def test_real_minilm_prefilter_equals_full_on_the_fixtures(tmp_path, cfg, minilm, name):
    facts = FIXTURE_FACTS[name] + PLAIN + ["Direct pushes to main are not allowed; use a pull request.",
                                           "Use Ash resources and SQLite migrations; no ad-hoc SQL outside migrations."]
    ex, _, pf, _ = _both(tmp_path, name, facts, "tiny", cfg, lambda: minilm)
    _same_verdicts(ex, pf)
    assert pf.method["static_gate"] is not None  # MiniLM: the static gate ran for the plain facts


SESSION = (CORPUS / "swebench-pairs" / "django__django-11206" / "mini-swe-agent_gemini-3-pro"
           / "django__django-11206.traj.json")


@pytest.mark.integration
def test_real_minilm_on_a_corpus_session_same_verdicts_fewer_chunks(tmp_path, minilm):
    if not SESSION.exists():
        pytest.skip("corpus not available")
    with Store.open(tmp_path / "c.db") as st:
        sid = resolve_session(st, str(SESSION))
        facts = [s.text for s in suggest_facts(st.messages(sid))][:8]
        facts += ["Do not modify the existing tests.", "Use Python 3.11 for this project."]
        prep = prepare(st, sid)
        ex = track_facts(prep, facts, minilm, st, exhaustive=True)
        pf = track_facts(prep, facts, minilm, st)  # the exhaustive run's vectors are cached: verdicts only
    _same_verdicts(ex, pf)
    assert any(f.sources for f in ex.facts)
    assert pf.method["encoded"] < ex.method["encoded"] == ex.method["chunks"]


# ================================================================ the word gate (packaged weights)


def _plan(facts, texts, embedder_name):
    from context_forensics.analysis.facts.prefilter import plan_encoding

    chunked = chunk_many(texts)
    uniq = list(dict.fromkeys(chunked.texts))
    index = {t: i for i, t in enumerate(uniq)}
    inverse = np.array([index[t] for t in chunked.texts])
    plan = plan_encoding(facts, [lexical_tokens(f) for f in facts], chunked, texts, inverse, uniq,
                         embedder_name=embedder_name, threshold=0.6, overlap=SPAN_OVERLAP)
    return {t for t, e in zip(uniq, plan.encode) if e}, plan


def test_a_fact_carried_by_its_numbers_keeps_every_chunk_holding_them():
    """The word gate is for facts without lexical tokens only: a chunk holding a fact's numbers
    and none of its words can still reach the threshold (a corpus case: 0.63 under MiniLM), so
    under MiniLM too every chunk whose neighbourhood holds the numbers is a candidate; one
    lacking a number never is (unless it holds half the fact's words: a near-miss candidate)."""
    fact = "The vertices of a triangle are at points (0, 0), (-1, 1), and (3, 3)."
    texts = ["In this case, the coordinates are A(0, 0), B(-1, 1), and C(3, 3).",  # numbers, no word
             "Step 0 of the build finished.",                                     # some numbers only
             "The vertices of a triangle are at points (0, 0), (-1, 1), and (4, 4)."]  # half the words
    enc, plan = _plan([fact], texts, "all-MiniLM-L6-v2")
    assert not plan.static  # no fact without lexical tokens here: the word gate did not run
    assert enc == {texts[0], texts[2]}
    plain = "Keep the vertices of the triangle in clockwise order."
    enc2, plan2 = _plan([fact, plain], texts, "all-MiniLM-L6-v2")
    assert plan2.static and texts[0] in enc2  # the word gate for the plain fact narrows nothing for the other


def test_word_closeness_from_float16_rows_is_within_1e_3_of_the_float32_weights():
    """StaticMiniLM keeps the word embeddings as float16 unit rows read by blocks from the
    safetensors file; its closeness must equal float32 arithmetic on safetensors' own reading of
    the same tensor (the gate at 0.45 sits 0.13 below the closest pair it must keep)."""
    from safetensors import safe_open

    from context_forensics.analysis.facts.prefilter import WORD_GATE, static_model
    from context_forensics.tokens.assets import packaged_model_path

    sm = static_model()
    assert sm is not None and sm.unit.dtype == np.float16
    with safe_open(str(packaged_model_path() / "model.safetensors"), framework="numpy") as f:
        w = f.get_tensor(next(k for k in f.keys() if k.endswith("word_embeddings.weight"))).astype(np.float32)
    ref = w / np.linalg.norm(w, axis=1, keepdims=True)
    assert ref.shape == sm.unit.shape
    chunks = ["We will purchase the licence tomorrow.", "Remove the db file before the release.",
              "The weather is nice today.", "render/1 keeps its default arguments", ""]
    ids = sm.ids(chunks)
    for fact in ["Do not buy anything.", "Never delete the database.", "render/1 stays backward compatible."]:
        got = sm.closeness(fact, ids)
        content = [i for i in sm.ids([fact])[0] if sm._content[i]]
        want = np.array([(ref[c] @ ref[content].T).max() if c else -1.0 for c in ids])
        assert np.abs(got - want).max() < 1e-3, fact
    assert sm.closeness("Do not buy anything.", ids)[0] >= WORD_GATE  # purchase ~ buy
    assert sm.closeness("Do not buy anything.", ids)[2] < WORD_GATE
