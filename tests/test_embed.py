"""Embeddings: chunking, the store cache, similarity reductions (HashingEmbedder), real MiniLM."""

from __future__ import annotations

import base64
import json
import random
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from context_forensics.embed import (
    CHUNK_TOKENS,
    GROUP_TOKENS,
    MAX_WORDPIECES,
    Embedder,
    EmbeddingCache,
    EmbedStats,
    HashingEmbedder,
    chunk_many,
    chunk_text,
    edge_words,
    embed_chunks,
    embed_texts,
    estimate_tokens,
    group_max,
    has_clause_cut,
    normalize,
    similarity,
    sub_spans,
    word_count,
)
from context_forensics.errors import UsageError
from context_forensics.store.db import Store
from helpers import CORPUS, FIXTURES

FACT = "The staging deploy must never run migrations on Fridays after 16:00 UTC."


def _tool_output(tokens: int = 5000, seed: int = 0) -> str:
    """A long, realistic tool output: pytest log lines, a traceback, a JSON blob, a listing."""
    rnd = random.Random(seed)
    parts = []
    while estimate_tokens("\n".join(parts)) < tokens:
        k = rnd.randrange(4)
        if k == 0:
            parts.append(f"tests/test_models.py::test_case_{rnd.randrange(999)} PASSED [{rnd.randrange(100)}%]")
        elif k == 1:
            parts.append(
                f'  File "/repo/django/db/models/query.py", line {rnd.randrange(2000)}, in _fetch_all\n'
                "    self._result_cache = list(self._iterable_class(self))"
            )
        elif k == 2:
            parts.append(json.dumps({"id": rnd.randrange(10**6), "status": "ok", "items": list(range(5))}))
        else:
            parts.append(f"-rw-r--r-- 1 root root {rnd.randrange(99999):5d} Mar  9 16:43 module_{rnd.randrange(99)}.py")
    return "\n".join(parts)


# ============================================================================ chunking


COMPOUND = ("We are eight people travelling to Lisbon in June, the total budget is capped at 4,500 euros for "
            "the whole group, and nobody can eat peanuts.")


def test_sub_spans_hold_a_verbatim_fact_inside_a_compound_sentence():
    fact = "the total budget is capped at 4,500 euros"
    spans = [COMPOUND[a:b] for a, b in sub_spans(COMPOUND, word_count(fact))]
    assert fact in spans  # its own window
    assert "the total budget is capped at 4,500 euros for the whole group" in spans  # its clause
    assert "and nobody can eat peanuts." in spans and COMPOUND not in spans
    assert all(s == s.strip() and s for s in spans)
    # windows stay inside a clause: no span splices "... June, the total ..."
    assert not any("June, the" in s or "group, and" in s for s in spans if word_count(s) == word_count(fact))
    crossing = [COMPOUND[a:b] for a, b in sub_spans(COMPOUND, 8, cross_clauses=True)]
    assert "in June, the total budget is capped at" in crossing
    # anchored on the fact's first or last word, a chunk keeps a few windows, the fact's among them
    anchored = [COMPOUND[a:b] for a, b in sub_spans(COMPOUND, word_count(fact), anchors=edge_words(fact))]
    assert fact in anchored and set(anchored) < set(spans)
    windows = [s for s in anchored if word_count(s) == word_count(fact)]
    assert all(s.split()[0].lower() == "the" or s.split()[-1].strip(".,") == "euros" for s in windows)
    assert edge_words('"Never" push to main, ever.') == ("never", "ever")
    # a text no longer than the fact is its own span
    assert sub_spans(fact, word_count(fact)) == [] and sub_spans("a b", 0) == []
    assert has_clause_cut("Never push to main; open a pull request.") and not has_clause_cut("Never push to main.")


@given(st.text(alphabet="ab ,;:\n.", max_size=80), st.integers(1, 6))
def test_sub_span_invariants(text, n):
    for a, b in sub_spans(text, n):
        assert 0 <= a < b <= len(text) and text[a:b].strip() == text[a:b]


def test_fact_buried_in_a_5000_token_tool_output_is_its_own_chunk():
    head, tail = _tool_output(2500, seed=1), _tool_output(2500, seed=2)
    text = f"{head}\n{FACT} Everything else passed.\n{tail}"
    assert estimate_tokens(text) >= 5000
    chunks = chunk_text(text)
    assert len(chunks) > 100
    assert [c.text for c in chunks if FACT in c.text] == [FACT]
    assert all(c.tokens <= CHUNK_TOKENS for c in chunks)
    # With the literal "group up to 128" it still sits whole in one chunk of <= 128.
    holding = [c for c in chunk_text(text, group_tokens=128) if FACT in c.text]
    assert len(holding) == 1 and 30 < holding[0].tokens <= 128


def test_sentences_up_to_the_cap_are_never_cut_and_short_units_are_packed():
    long_sentence = " ".join(["word"] * 100) + "."
    text = f"ok\nfine\n{long_sentence}\nyes\nno\n"
    chunks = [c.text for c in chunk_text(text)]
    assert chunks == ["ok\nfine", long_sentence, "yes\nno"]
    run_on = " ".join(["word"] * 400)  # over the cap: cut into word groups
    chunks = chunk_text(run_on)
    assert len(chunks) == 25 and all(c.tokens == GROUP_TOKENS for c in chunks)


def test_offsets_index_the_source_and_chunks_are_ordered():
    text = _tool_output(1500) + "\n\nSome prose. More prose here! And a question? Yes."
    chunks = chunk_text(text)
    prev_end = 0
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert c.start >= prev_end and c.text == c.text.strip()
        prev_end = c.end
    # Nothing dropped: every non-space character is in some chunk.
    assert "".join(c.text for c in chunks).split() == "".join(
        text[c.start : c.end] for c in chunks
    ).split()
    assert "".join("".join(c.text.split()) for c in chunks) == "".join(text.split())


def test_code_and_log_lines_are_never_cut_in_the_middle():
    code = (FIXTURES / "embed" / "sample_code.py").read_text()
    log = (FIXTURES / "embed" / "sample_log.txt").read_text()
    for text in (code, log):
        chunks = chunk_text(text, 48, group_tokens=48)
        assert len(chunks) > 3
        for c in chunks:
            assert c.tokens <= 48
            assert c.end == len(text) or text[c.end] == "\n"
            assert c.start == 0 or text[: c.start].rstrip(" \t").endswith("\n") or text[c.start - 1] == "\n"


def test_sentences_are_grouped_up_to_the_budget_and_paragraphs_break_when_half_full():
    sentences = [f"Sentence number {i} talks about topic {i}." for i in range(40)]
    text = " ".join(sentences)
    chunks = chunk_text(text, group_tokens=40)
    assert all(c.text.endswith(".") for c in chunks)  # only cut at sentence ends
    assert all(c.tokens <= 40 for c in chunks)
    assert all(c.tokens > 20 for c in chunks[:-1])  # greedy packing, not one sentence each
    para = "First paragraph sentence one. Sentence two of it.\n\nSecond paragraph starts here."
    assert [c.text for c in chunk_text(para, group_tokens=20)] == [
        "First paragraph sentence one. Sentence two of it.",
        "Second paragraph starts here.",
    ]
    assert len(chunk_text(para, group_tokens=128)) == 1


def test_bullet_lists_and_markdown():
    text = "## Plan\n\n- step one: read the file\n- step two: fix the bug\n* step three\n1. numbered\n"
    assert [c.text for c in chunk_text(text)] == [
        "## Plan\n\n- step one: read the file", "- step two: fix the bug\n* step three\n1. numbered"]
    assert [c.text for c in chunk_text(text, group_tokens=128)] == [text.strip()]


def test_long_lines_without_punctuation_and_blobs_without_spaces_are_cut_to_budget():
    words = " ".join(random.Random(3).choice(["alpha", "beta", "gamma", "delta"]) for _ in range(3000))
    chunks = chunk_text(words)
    assert len(chunks) > 100 and all(c.tokens <= GROUP_TOKENS for c in chunks)
    minified = json.dumps([{"key": i, "name": f"item_{i}", "v": [1, 2, 3]} for i in range(300)],
                          separators=(",", ":"))
    chunks = chunk_text(minified)
    assert len(chunks) > 100 and all(c.tokens <= GROUP_TOKENS for c in chunks)
    assert "".join(c.text for c in chunks) == minified  # cut, never lost
    # cuts prefer separators
    assert sum(c.text[-1] in ",}]" for c in chunks[:-1]) >= 0.8 * len(chunks)


def test_base64_blobs_are_dropped_but_the_words_around_them_kept():
    blob = base64.b64encode(random.Random(0).randbytes(30000)).decode()
    text = f"Screenshot attached.\ndata:image/png;base64,{blob}\n{FACT}"
    chunks = chunk_text(text)
    assert any("Screenshot" in c.text for c in chunks) and any(FACT in c.text for c in chunks)
    assert sum(len(c.text) for c in chunks) < 200
    assert len(chunk_text(text, drop_noise=False)) > 1000
    hexdump = "\n".join(f"{i:04x}: " + "deadbeef0123456789abcdef" * 3 for i in range(50))
    chunks = chunk_text(hexdump)
    assert len(chunks) == 50 and all(len(c.text) == 5 for c in chunks)  # no chunk spans a run


@pytest.mark.parametrize("text", ["", " ", "\n\n\t  \n"])
def test_empty_text_has_no_chunks(text):
    assert chunk_text(text) == []


def test_chunking_is_deterministic_and_chunk_many_keeps_owners():
    texts = [_tool_output(600, seed=5), "", "short one.", _tool_output(600, seed=5)]
    assert chunk_text(texts[0]) == chunk_text(texts[0])
    cm = chunk_many(texts)
    assert cm.n_texts == 4 and len(cm) == len(cm.owner)
    assert list(np.unique(cm.owner)) == [0, 2, 3]
    assert cm.of(1) == () and [c.text for c in cm.of(2)] == ["short one."]
    assert cm.of(0) == cm.of(3) == tuple(chunk_text(texts[0]))
    assert np.all(np.diff(cm.owner) >= 0)


_PIECES = list("abcXYZ019 .,;:!?{}[]\"'_-/\n\t") + ["é", "中", "😀", "word ", ". ", "\n\n", "deadbeef" * 7]
_texty = st.lists(st.sampled_from(_PIECES), max_size=600).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texty, budget=st.integers(min_value=1, max_value=200),
       group=st.integers(min_value=1, max_value=200))
def test_chunk_invariants(text, budget, group):
    chunks = chunk_text(text, budget, group_tokens=group, drop_noise=False)
    prev = 0
    for c in chunks:
        assert 0 < c.tokens <= budget
        assert text[c.start : c.end] == c.text and c.text.strip() == c.text and c.text
        assert c.start >= prev
        prev = c.end
    assert "".join("".join(c.text.split()) for c in chunks) == "".join(text.split())
    if all(estimate_tokens(w) <= min(budget, group) for w in text.split()):  # no word was cut
        assert sum(c.tokens for c in chunks) == estimate_tokens(text)


@pytest.mark.integration
def test_corpus_chunks_stay_under_minilm_truncation_with_the_real_tokenizer(tmp_path):
    """The token estimate is a heuristic; check it against MiniLM's own tokenizer on real logs."""
    tokenizers = pytest.importorskip("tokenizers")
    from context_forensics.store.ingest import ingest_paths
    from context_forensics.tokens.assets import resolve_model_path

    if not CORPUS.is_dir():
        pytest.skip("corpus not available")
    try:
        model_dir = resolve_model_path(None)
    except UsageError as e:
        pytest.skip(str(e))
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    with Store.open(tmp_path / "c.db") as store:
        ingest_paths(store, [CORPUS], recursive=True)
        texts = [m.text for s in store.sessions() for m in store.messages(s["id"]) if m.text]
    chunked = chunk_many(texts)
    assert len(chunked) > 1000
    real = np.array([len(e.ids) for e in tok.encode_batch(chunked.texts, add_special_tokens=False)])
    assert real.max() <= MAX_WORDPIECES
    est = np.array([c.tokens for c in chunked.chunks])
    assert np.percentile(real / est, 99) < 1.5  # the estimate tracks the tokenizer
    # and with the literal 128-token grouping
    grouped = chunk_many(texts, group_tokens=CHUNK_TOKENS)
    real = [len(e.ids) for e in tok.encode_batch(grouped.texts, add_special_tokens=False)]
    assert max(real) <= MAX_WORDPIECES and np.mean(real) > 60


# ============================================================================ encoders


def test_hashing_embedder_is_a_deterministic_normalised_stand_in():
    e = HashingEmbedder()
    assert isinstance(e, Embedder)
    v = e.encode(["the cat sat on the mat", "the cat sat on a mat", "quarterly revenue grew 5%", ""])
    assert v.dtype == np.float32 and v.shape == (4, e.dim)
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0) and not v[3].any()
    assert np.array_equal(v, HashingEmbedder().encode(["the cat sat on the mat", "the cat sat on a mat",
                                                       "quarterly revenue grew 5%", ""]))
    s = similarity(v[:1], v[1:3])[0]
    assert s[0] > 0.7 and s[1] < 0.3


def test_real_embedder_knows_name_revision_and_dim_without_importing_torch():
    code = (
        "import sys, json\n"
        "from context_forensics.embed import SentenceTransformerEmbedder\n"
        "e = SentenceTransformerEmbedder()\n"
        "print(json.dumps([e.name, e.revision, e.dim, 'torch' in sys.modules,"
        " 'sentence_transformers' in sys.modules]))\n"
    )
    try:
        from context_forensics.tokens.assets import resolve_model_path

        resolve_model_path(None)
    except UsageError as e:
        pytest.skip(str(e))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    name, rev, dim, torch_loaded, st_loaded = json.loads(out.stdout)
    assert name == "all-MiniLM-L6-v2" and rev.startswith("b2:") and dim == 384
    assert not torch_loaded and not st_loaded


def test_a_missing_model_is_a_clear_error(tmp_path):
    from context_forensics.embed import SentenceTransformerEmbedder

    with pytest.raises(UsageError) as err:
        SentenceTransformerEmbedder(str(tmp_path / "no-such-model"))
    assert "never downloads" in str(err.value) and "pip install" in str(err.value)


# ============================================================================ cache


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "s.db") as s:
        yield s


def _queries(store: Store) -> list[str]:
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    return seen


def test_the_embeddings_table_exists_with_its_key(store):
    cols = store.db["embeddings"].columns_dict
    assert set(cols) == {"hash", "model", "revision", "dim", "vector", "created_at"}
    assert store.db["embeddings"].pks == ["hash", "model", "revision"]


def test_second_call_encodes_nothing_and_returns_identical_vectors(store):
    e = HashingEmbedder()
    texts = [f"message {i} about topic {i % 7}" for i in range(50)]
    cold_stats, warm_stats = EmbedStats(), EmbedStats()
    cold = embed_texts(texts, e, store, stats=cold_stats)
    calls = e.calls
    warm = embed_texts(texts, e, store, stats=warm_stats)
    assert e.calls == calls and warm_stats.encoded == warm_stats.encoder_calls == 0
    assert warm_stats.hits == 50 and cold_stats.encoded == 50 and cold_stats.written == 50
    assert warm.dtype == np.float32 and np.array_equal(cold, warm)
    assert np.array_equal(cold, e.encode(texts))


def test_duplicates_and_blanks_are_encoded_once_and_order_is_restored(store):
    e = HashingEmbedder()
    texts = ["bb", "a", "", "bb", "ccc ccc", "a", "  \n", "bb"]
    stats = EmbedStats()
    out = embed_texts(texts, e, store, stats=stats, batch_size=2)
    assert sorted(e.encoded) == ["a", "bb", "ccc ccc"]  # each once, no blanks
    assert e.encoded == ["ccc ccc", "bb", "a"]  # longest first
    assert stats.unique == 3 and stats.blank == 2 and stats.encoder_calls == 2
    assert len(set(stats.encoded_hashes)) == len(stats.encoded_hashes)
    ref = {t: e.encode([t])[0] for t in ("a", "bb", "ccc ccc")}
    for t, v in zip(texts, out):
        assert np.array_equal(v, ref[t]) if t.strip() else not v.any()


def test_ttl_expired_rows_are_recomputed(store):
    e = HashingEmbedder()
    texts = ["old fact", "another old fact"]
    embed_texts(texts, e, store, ttl_hours=1)
    stats = EmbedStats()
    embed_texts(texts, e, store, ttl_hours=1, stats=stats)
    assert stats.hits == 2 and stats.encoded == 0
    store.db.execute("UPDATE embeddings SET created_at = '2020-01-01T00:00:00+00:00'")
    stats = EmbedStats()
    embed_texts(texts, e, store, ttl_hours=1, stats=stats)
    assert stats.expired == 2 and stats.encoded == 2 and stats.written == 2
    fresh = [r[0] for r in store.db.execute("SELECT created_at FROM embeddings")]
    assert all(c > "2020-01-01T00:00:00+00:00" for c in fresh) and len(fresh) == 2
    store.db.execute("UPDATE embeddings SET created_at = '2020-01-01T00:00:00+00:00'")
    stats = EmbedStats()
    embed_texts(texts, e, store, ttl_hours=0, stats=stats)  # 0 = never expires
    assert stats.hits == 2 and stats.encoded == 0


def test_another_model_or_revision_does_not_hit(store):
    texts = ["same text", "other text"]
    embed_texts(texts, HashingEmbedder(), store)
    for other in (HashingEmbedder(name="another-model"), HashingEmbedder(dim=128)):
        stats = EmbedStats()
        out = embed_texts(texts, other, store, stats=stats)
        assert stats.hits == 0 and stats.encoded == 2 and out.shape == (2, other.dim)
    rows = store.db.execute("SELECT model, revision, count(*) FROM embeddings GROUP BY 1, 2").fetchall()
    assert len(rows) == 3


def test_cache_disabled_neither_reads_nor_writes(store):
    e = HashingEmbedder()
    embed_texts(["x y z"], e, store)
    stats = EmbedStats()
    embed_texts(["x y z", "new"], e, store, cache_enabled=False, stats=stats)
    assert stats.hits == 0 and stats.encoded == 2 and stats.written == 0
    assert store.db.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 1


def test_reads_are_bulk_and_writes_are_one_transaction(store):
    e = HashingEmbedder(dim=32)
    texts = [f"text number {i}" for i in range(1200)]
    seen = _queries(store)
    embed_texts(texts, e, store, batch_size=100)
    selects = [q for q in seen if q.lstrip().upper().startswith("SELECT") and "embeddings" in q]
    assert len(selects) == 3  # ceil(1200 / 500)
    assert sum(q.strip().upper().startswith("BEGIN") for q in seen) == 1
    assert e.calls == 12
    seen.clear()
    embed_texts(texts, e, store)
    assert not any(q.strip().upper().startswith(("BEGIN", "INSERT")) for q in seen)
    store.db.conn.set_trace_callback(None)


def test_progress_counts_texts_to_encode(store):
    e = HashingEmbedder()
    calls: list[tuple[int, int]] = []
    embed_texts([f"t{i}" for i in range(10)], e, store, batch_size=4, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 10), (4, 10), (8, 10), (10, 10)]
    calls.clear()
    embed_texts([f"t{i}" for i in range(10)], e, store, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 0)]


def test_an_interrupted_run_keeps_what_it_encoded(store):
    class Flaky(HashingEmbedder):
        def encode(self, texts):
            if self.calls == 1:
                raise KeyboardInterrupt
            return super().encode(texts)

    texts = [f"text {i}" for i in range(6)]
    with pytest.raises(KeyboardInterrupt):
        embed_texts(texts, Flaky(), store, batch_size=3)
    assert store.db.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 3
    stats = EmbedStats()
    embed_texts(texts, HashingEmbedder(), store, stats=stats)
    assert stats.hits == 3 and stats.encoded == 3


def test_vectors_round_trip_bit_exact_and_bad_rows_are_misses(store):
    e = HashingEmbedder(dim=16)
    v = embed_texts(["round trip"], e, store)
    cache = EmbeddingCache(store)
    from context_forensics.hashing import content_hash

    h = content_hash("round trip")
    found, _ = cache.get_many([h], e.name, e.revision, dim=16)
    assert found[h].dtype == np.float32 and np.array_equal(found[h], v[0])
    assert cache.get_many([h], e.name, e.revision, dim=8)[0] == {}
    store.db.execute("UPDATE embeddings SET vector = x'00'")
    stats = EmbedStats()
    embed_texts(["round trip"], e, store, stats=stats)
    assert stats.encoded == 1


def test_a_read_only_store_still_returns_vectors(tmp_path):
    path = tmp_path / "ro.db"
    Store.open(path).close()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    import sqlite_utils

    ro = Store(sqlite_utils.Database(conn), path)
    cache = EmbeddingCache(ro)
    out = embed_texts(["a b c"], HashingEmbedder(), cache)
    assert out.shape == (1, 256) and cache.write_failed
    conn.close()


def test_without_a_store_an_embedding_cache_object_still_dedupes_across_calls():
    e = HashingEmbedder()
    cache = EmbeddingCache(None)
    a = embed_texts(["p q", "r s"], e, cache)
    stats = EmbedStats()
    b = embed_texts(["r s", "p q"], e, cache, stats=stats)
    assert stats.encoded == 0 and np.array_equal(a[::-1], b)
    stats = EmbedStats()
    embed_texts(["p q"], e, None, stats=stats)  # no store: nothing to look up
    assert stats.encoded == 1


def test_purge(store):
    e = HashingEmbedder()
    embed_texts(["a", "b"], e, store)
    embed_texts(["a"], HashingEmbedder(name="other"), store)
    cache = EmbeddingCache(store)
    assert cache.purge(model="other") == 1
    store.db.execute("UPDATE embeddings SET created_at = '2020-01-01T00:00:00+00:00' WHERE rowid = 1")
    assert cache.purge(older_than_hours=24) == 1
    assert store.db.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 1


def test_empty_input():
    e = HashingEmbedder()
    assert embed_texts([], e, None).shape == (0, e.dim)
    chunked, vecs = embed_chunks(["", " "], e)
    assert len(chunked) == 0 and vecs.shape == (0, e.dim)


# ============================================================================ similarity


def test_similarity_shape_and_values():
    rng = np.random.default_rng(0)
    a, b = normalize(rng.normal(size=(3, 8))), normalize(rng.normal(size=(5, 8)))
    s = similarity(a, b)
    assert s.shape == (3, 5) and s.dtype == np.float32
    assert np.allclose(s, np.array([[x @ y for y in b] for x in a]), atol=1e-6)
    assert np.allclose(np.diag(similarity(a, a)), 1.0)
    assert similarity(a[0], b).shape == (1, 5)
    assert not normalize(np.zeros((2, 4))).any()


def test_group_max_hand_made():
    scores = np.array([[0.1, 0.5, 0.2, 0.9, 0.9, 0.3],
                       [0.7, 0.1, 0.4, 0.0, 0.2, 0.2]], dtype=np.float32)
    owner = np.array([0, 0, 1, 3, 3, 3])
    best, arg = group_max(scores, owner, 5)
    assert best.shape == arg.shape == (2, 5)
    assert np.allclose(best[0, [0, 1, 3]], [0.5, 0.2, 0.9]) and np.allclose(best[1, [0, 1, 3]], [0.7, 0.4, 0.2])
    assert np.all(np.isneginf(best[:, [2, 4]])) and np.all(arg[:, [2, 4]] == -1)
    assert arg[0].tolist() == [1, 2, -1, 3, -1]  # first of the tied 0.9s
    assert arg[1].tolist() == [0, 2, -1, 4, -1]
    b1, a1 = group_max(scores[0], owner, 5, fill=0.0)
    assert b1.shape == (5,) and b1[2] == 0.0 and a1.tolist() == arg[0].tolist()
    # unsorted owners give the same answer, with argmax in the caller's chunk numbering
    perm = np.array([5, 2, 0, 4, 1, 3])
    shuffled = scores[:, perm]
    bp, ap = group_max(shuffled, owner[perm], 5)
    assert np.array_equal(bp, best) and np.array_equal(ap < 0, arg < 0)
    rows = np.arange(2)[:, None]
    assert np.array_equal(shuffled[rows, ap][:, [0, 1, 3]], best[:, [0, 1, 3]])
    assert np.all(owner[perm][ap[:, [0, 1, 3]]] == [0, 1, 3])


def test_group_max_matches_a_loop_on_random_data():
    rng = np.random.default_rng(1)
    owner = np.sort(rng.integers(0, 40, size=300))
    scores = rng.normal(size=(7, 300)).astype(np.float32)
    best, arg = group_max(scores, owner, 45)
    for g in range(45):
        idx = np.where(owner == g)[0]
        if idx.size == 0:
            assert np.all(arg[:, g] == -1)
            continue
        assert np.array_equal(best[:, g], scores[:, idx].max(axis=1))
        assert np.array_equal(arg[:, g], idx[scores[:, idx].argmax(axis=1)])
    assert group_max(np.zeros((2, 0)), np.zeros(0, dtype=int), 3)[0].shape == (2, 3)
    with pytest.raises(ValueError):
        group_max(scores, owner[:-1], 45)


def test_fact_in_a_long_message_is_found_through_its_chunk(store):
    e = HashingEmbedder()
    messages = [_tool_output(3000, seed=7) + "\n" + FACT + "\n" + _tool_output(2000, seed=8),
                _tool_output(3000, seed=9), "Let me look at the migrations folder."]
    chunked, vecs = embed_chunks(messages, e, store)
    facts = e.encode([FACT, "The database password is hunter2."])
    best, arg = group_max(similarity(facts, vecs), chunked.owner, len(messages))
    assert best.shape == (2, 3)
    assert best[0].argmax() == 0 and best[0, 0] > best[0, 1] + 0.2
    assert FACT in chunked.chunks[arg[0, 0]].text
    # one vector for the whole message dilutes the fact far below what its chunk gets
    assert similarity(facts[:1], e.encode(messages[:1]))[0, 0] < best[0, 0] / 2


# ============================================================================ real model


@pytest.mark.integration
def test_real_minilm_ranks_paraphrases_and_round_trips_through_the_cache(store, minilm):
    e = minilm
    fact = "Never deploy to production on Fridays."
    texts = [
        "Deployments to prod are forbidden on Friday.",  # paraphrase
        "The cat sat on the warm windowsill all afternoon.",
        "Quarterly revenue grew by five percent.",
    ]
    stats = EmbedStats()
    cold = embed_texts([fact, *texts], e, store, stats=stats)
    assert cold.shape == (4, 384) and cold.dtype == np.float32 and stats.encoded == 4
    assert np.allclose(np.linalg.norm(cold, axis=1), 1.0, atol=1e-5)
    s = similarity(cold[:1], cold[1:])[0]
    assert s[0] > 0.6 and s[0] > s[1] + 0.3 and s[0] > s[2] + 0.3
    warm_stats = EmbedStats()
    warm = embed_texts([fact, *texts], e, store, stats=warm_stats)
    assert warm_stats.encoded == 0 and np.array_equal(cold, warm)
    # A fact buried in a long tool output: found by its chunk, lost by whole-message truncation.
    message = _tool_output(1500, seed=11) + "\n" + fact + "\n" + _tool_output(1500, seed=12)
    chunked, vecs = embed_chunks([message, texts[1]], e, store)
    best, arg = group_max(similarity(cold[:1], vecs), chunked.owner, 2)
    assert best[0, 0] > 0.9 and fact in chunked.chunks[arg[0, 0]].text
    assert similarity(cold[:1], e.encode([message]))[0, 0] < 0.5
