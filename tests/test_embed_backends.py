"""The embedding backends: the packaged MiniLM on ONNX Runtime gives torch's vectors, is exported
offline into ctxf's cache and verified by hash, runs without torch once exported, and falls back
to torch when it cannot run; the backend is part of the cache key; threads follow the machine.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from context_forensics.embed import embed_texts, embedders as emb_mod, onnx_backend as ob
from context_forensics.embed.chunking import chunk_many
from context_forensics.errors import ConfigError, UsageError
from context_forensics.store.db import Store

ROOT = Path(__file__).parent.parent
PAIRS = ROOT / "tests" / "fixtures" / "facts" / "pairs.csv"

pytestmark = pytest.mark.integration


def _model_or_skip():
    try:
        return emb_mod.SentenceTransformerEmbedder()
    except UsageError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    """A fresh ctxf cache folder holding the export of the packaged MiniLM, made once here."""
    pytest.importorskip("onnxruntime")
    st = _model_or_skip()
    cache = tmp_path_factory.mktemp("ctxf-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("CTXF_CACHE_DIR", str(cache))
    try:
        enc = ob.OnnxEncoder(st.path, st.name, st.revision)
        assert ob.check_export(enc.folder, st.revision) is None
        yield cache
    finally:
        mp.undo()


@pytest.fixture()
def in_cache(onnx_cache, monkeypatch):
    monkeypatch.setenv("CTXF_CACHE_DIR", str(onnx_cache))
    return onnx_cache


def _fixture_texts() -> list[str]:
    with open(PAIRS, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return list(dict.fromkeys([r["fact"] for r in rows] + [r["text"] for r in rows]))


def _corpus_texts(tmp_path: Path, limit: int = 300) -> list[str]:
    from context_forensics.store.ingest import ingest_paths
    from helpers import CORPUS

    path = CORPUS / "claude-code-jsonl" / "spotter" / "tool_heavy.jsonl"
    if not path.is_file():
        return []
    with Store.open(tmp_path / "c.db") as store:
        ingest_paths(store, [path])
        texts = [m.text for s in store.sessions() for m in store.messages(s["id"]) if m.text]
    return list(dict.fromkeys(chunk_many(texts).texts))[:limit]


def test_onnx_vectors_match_torch_on_real_texts(in_cache, minilm, tmp_path):
    texts = _fixture_texts()
    corpus = _corpus_texts(tmp_path)
    assert len(texts) > 100
    texts += corpus
    assert not corpus or len(texts) > 250  # a few hundred real texts
    texts.append("x " * 400)  # past max_seq_length: both truncate at the same wordpiece
    onnx = emb_mod.OnnxEmbedder()
    a = onnx.encode(texts)
    b = minilm.encode(texts)
    assert onnx.fallback_reason is None and onnx._encoder is not None
    assert a.shape == b.shape == (len(texts), 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = np.sum(a * b, axis=1)
    worst = int(np.argmin(cos))
    assert cos.min() >= 1 - 1e-3, f"cosine {cos.min():.6f} on {texts[worst][:80]!r}"


def test_batches_by_token_budget_give_the_same_vectors(in_cache):
    texts = _fixture_texts()[:120]
    enc = emb_mod.OnnxEmbedder()
    enc.load()
    whole = enc._encoder.encode(texts, token_budget=1 << 30)  # one batch, padded to the longest
    small = enc._encoder.encode(texts, token_budget=64)  # many batches, each padded to its own
    one = np.stack([enc._encoder.encode([t])[0] for t in texts[:20]])  # no padding at all
    assert np.abs(whole - small).max() < 1e-4
    assert np.abs(one - small[:20]).max() < 1e-4


def test_a_cached_export_runs_without_torch(in_cache):
    code = (
        "import sys, json\n"
        "from context_forensics.embed.embedders import get_embedder\n"
        "e = get_embedder()\n"
        "v = e.encode(['the tests must not be touched', 'deploy on friday'])\n"
        "print(json.dumps([type(e).__name__, e.revision, v.shape[1], float((v[0] * v[1]).sum()),"
        " 'torch' in sys.modules, 'sentence_transformers' in sys.modules, 'transformers' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "CTXF_CACHE_DIR": str(in_cache)})
    kind, rev, dim, cos, torch_loaded, st_loaded, tf_loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert kind == "OnnxEmbedder" and rev.endswith("+" + ob.RECIPE) and dim == 384 and cos < 0.9
    assert not torch_loaded and not st_loaded and not tf_loaded
    assert "note:" not in out.stderr


def test_the_backend_is_part_of_the_cache_key(in_cache, minilm, tmp_path):
    onnx = emb_mod.OnnxEmbedder()
    assert onnx.name == minilm.name and onnx.revision != minilm.revision
    with Store.open(tmp_path / "s.db") as store:
        embed_texts(["keep the api stable"], minilm, store)
        embed_texts(["keep the api stable"], onnx, store)
        rows = store.db.execute("SELECT model, revision FROM embeddings").fetchall()
    assert sorted(r[1] for r in rows) == sorted([minilm.revision, onnx.revision])


def test_a_tampered_export_is_detected_and_made_again(in_cache, tmp_path, monkeypatch):
    st = _model_or_skip()
    folder = ob.export_dir(st.name, st.revision)
    copy = tmp_path / "cache"
    shutil.copytree(in_cache, copy)
    monkeypatch.setenv("CTXF_CACHE_DIR", str(copy))
    target = ob.export_dir(st.name, st.revision)
    assert target != folder and ob.check_export(target, st.revision) is None
    graph = target / ob.GRAPH
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))
    problem = ob.check_export(target, st.revision)
    assert problem is not None and "does not match its manifest" in problem
    # a stale recipe is caught too
    man = json.loads((target / ob.MANIFEST).read_text())
    assert "stale" in ob.check_export(target, "b2:another-revision")
    # loading re-exports: the graph hashes to its manifest again
    ob.OnnxEncoder(st.path, st.name, st.revision)
    assert ob.check_export(target, st.revision) is None
    assert json.loads((target / ob.MANIFEST).read_text())["source_sha256"] == man["source_sha256"]


def test_an_unusable_export_falls_back_to_torch_with_a_note(in_cache, minilm, monkeypatch, capsys):
    def broken(*a, **k):
        raise ob.BackendUnavailable("export failed (simulated)")

    monkeypatch.setattr(ob, "OnnxEncoder", broken)
    monkeypatch.setattr(emb_mod, "_onnx_encoders", {})  # none opened yet in this process
    e = emb_mod.OnnxEmbedder()
    v = e.encode(["never push to main"])
    assert e.fallback_reason and "simulated" in e.fallback_reason
    assert e.revision == minilm.revision  # its vectors are torch's, cached as torch's
    assert np.allclose(v, minilm.encode(["never push to main"]), atol=1e-6)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("note: embedding on torch") and "simulated" in err


def test_without_onnxruntime_auto_is_torch_and_onnx_is_a_clear_error(monkeypatch):
    _model_or_skip()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    assert not ob.onnxruntime_importable()
    monkeypatch.delenv("CTXF_EMBEDDING_BACKEND", raising=False)
    assert type(emb_mod.get_embedder()) is emb_mod.SentenceTransformerEmbedder
    assert type(emb_mod.get_embedder(backend="auto")) is emb_mod.SentenceTransformerEmbedder
    with pytest.raises(UsageError, match="onnxruntime is not installed"):
        emb_mod.get_embedder(backend="onnx")


def test_the_backend_comes_from_the_config_or_the_environment(in_cache, monkeypatch):
    from context_forensics.config.settings import validate

    cfg = validate({"embedding": {"backend": "torch"}}, "test.yaml")
    assert cfg.embedding.backend == "torch"
    assert type(emb_mod.get_embedder(cfg.embedding.model, backend=cfg.embedding.backend)) \
        is emb_mod.SentenceTransformerEmbedder
    assert type(emb_mod.get_embedder(backend="onnx")) is emb_mod.OnnxEmbedder
    # the commands' lookup: embedder_for(cfg) reads the config's backend ...
    assert type(emb_mod.embedder_for(cfg)) is emb_mod.SentenceTransformerEmbedder
    assert type(emb_mod.embedder_for(validate({}, "test.yaml"))) is emb_mod.OnnxEmbedder
    # ... and the environment variable overrides the config file, as it does for CTXF_CONFIG
    monkeypatch.setenv("CTXF_EMBEDDING_BACKEND", "torch")
    assert type(emb_mod.get_embedder()) is emb_mod.SentenceTransformerEmbedder
    assert type(emb_mod.embedder_for(validate({"embedding": {"backend": "onnx"}}, "test.yaml"))) \
        is emb_mod.SentenceTransformerEmbedder
    monkeypatch.setenv("CTXF_EMBEDDING_BACKEND", "auto")
    assert type(emb_mod.get_embedder()) is emb_mod.OnnxEmbedder
    assert type(emb_mod.embedder_for(cfg)) is emb_mod.OnnxEmbedder
    monkeypatch.delenv("CTXF_EMBEDDING_BACKEND")
    with pytest.raises(ConfigError) as ei:
        validate({"embedding": {"backend": "cuda"}}, "test.yaml")
    assert "embedding.backend" in str(ei.value) and "auto, onnx, torch" in str(ei.value.hint)
    with pytest.raises(UsageError, match="unknown embedding backend"):
        emb_mod.get_embedder(backend="cuda")
    monkeypatch.setenv("CTXF_EMBEDDING_BACKEND", "cuda")
    with pytest.raises(UsageError, match="unknown embedding backend"):
        emb_mod.get_embedder()


def test_threads_follow_the_cpus_and_one_in_a_worker(in_cache, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert ob.usable_cpus() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert ob.usable_cpus() == 1
    e = emb_mod.OnnxEmbedder()
    e.load()
    assert e._encoder.threads == 1
    # a run uses one thread; the encoder runs ``threads`` batches at once (one in a worker)
    assert e._encoder.session.get_session_options().intra_op_num_threads == 1


def test_batches_run_on_threads_give_the_one_thread_vectors(in_cache):
    st = emb_mod.SentenceTransformerEmbedder()
    one = ob.OnnxEncoder(st.path, st.name, st.revision, threads=1)
    two = ob.OnnxEncoder(st.path, st.name, st.revision, threads=2)
    texts = _fixture_texts()[:120]
    a, b = one.encode(texts, token_budget=64), two.encode(texts, token_budget=64)
    assert a.shape == b.shape == (120, 384) and np.abs(a - b).max() < 1e-5
    # fewer batches than threads: the work is split so that each thread has a batch, same vectors
    few = texts[:3]
    assert np.abs(one.encode(few) - two.encode(few)).max() < 1e-5
    assert np.abs(two.encode(few) - b[:3]).max() < 1e-4


def test_the_export_opens_no_socket(tmp_path):
    pytest.importorskip("onnxruntime")
    _model_or_skip()
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (.ci/run installs it)")
    from test_offline import _sockets

    trace = tmp_path / "trace.txt"
    code = ("from context_forensics.embed.embedders import OnnxEmbedder\n"
            "e = OnnxEmbedder(); e.encode(['offline always'])\n"
            "assert e.fallback_reason is None, e.fallback_reason\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["CTXF_CACHE_DIR"] = str(tmp_path / "cache")  # empty: this run exports
    run = subprocess.run(["strace", "-f", "-qq", "-e", "trace=socket,socketpair,connect,sendto,sendmsg,bind",
                          "-o", str(trace), sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert list((tmp_path / "cache" / "onnx").glob("*/" + ob.GRAPH)), "nothing was exported"
    assert _sockets(trace) == []
    # what a user sees on the first run: one note saying what happens, none of the tracer's warnings
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("note: exporting the embedding model to ONNX once"), lines


def test_an_unsupported_pipeline_is_not_run_on_onnx(tmp_path):
    (tmp_path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]))
    with pytest.raises(ob.BackendUnavailable, match="Dense"):
        ob.read_pipeline(tmp_path)


def test_pooling_follows_the_config_modes():
    hidden = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    mask = np.array([[1, 1, 0], [1, 1, 1]])
    mean = ob.pool(hidden, mask, ("mean",))
    assert np.allclose(mean[0], hidden[0, :2].mean(axis=0)) and np.allclose(mean[1], hidden[1].mean(axis=0))
    both = ob.pool(hidden, mask, ("cls", "max"))
    assert both.shape == (2, 4) and np.allclose(both[0], [0, 1, 2, 3])


def test_one_encoder_per_model_and_process(in_cache, monkeypatch):
    """An audit makes an embedder per session: the export is verified and the ONNX session made
    once per process (per model, revision, threads and export folder), not once per session."""
    monkeypatch.setattr(emb_mod, "_onnx_encoders", {})
    made = []
    real = ob.OnnxEncoder

    def counting(*a, **k):
        made.append(a)
        return real(*a, **k)

    monkeypatch.setattr(ob, "OnnxEncoder", counting)
    vecs = [emb_mod.OnnxEmbedder().encode(["keep the public API"]) for _ in range(3)]
    assert len(made) == 1
    assert all(np.array_equal(v, vecs[0]) for v in vecs)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # a worker's thread count: an encoder of its own
    emb_mod.OnnxEmbedder().encode(["keep the public API"])
    assert len(made) == 2
