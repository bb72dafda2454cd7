"""Benchmark embedding: MiniLM throughput by batch size, and cold vs warm cache on one session.

Not a test (pytest does not collect it). Run from the repo root:

    .venv/bin/python bench/embed.py throughput [--reps 3]
    .venv/bin/python bench/embed.py session PATH [--group-tokens 16]
    .venv/bin/python bench/embed.py backends PATH [--limit 600] [--reps 2]

``backends`` (issue 17): torch, ONNX Runtime fp32 and its dynamic int8 quantization on ``--limit``
chunks of the session at PATH: a cold process's load seconds, chunks/s, peak RSS, calibration F1,
how far each one's vectors are from the reference (fp32 vs torch, int8 vs fp32: the cosine of a
text's two vectors, the change of pairwise cosines), the ONNX batching by token budget, and the
first export's seconds.

Prints one JSON object. Numbers on a shared machine are noisy: throughput keeps the best of
``--reps`` interleaved runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import CORPUS, ROOT, add_corpus_option  # first: puts this checkout's package on sys.path

from context_forensics.embed import (
    CHUNK_TOKENS,
    GROUP_TOKENS,
    EmbedStats,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    chunk_many,
    embed_texts,
)
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths


def _wordpieces(e: SentenceTransformerEmbedder, texts: list[str]) -> np.ndarray:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(e.path / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return np.array([len(x.ids) for x in tok.encode_batch(texts, add_special_tokens=False)])


def _corpus_texts(corpus: Path = CORPUS) -> list[str]:
    with tempfile.TemporaryDirectory() as d, Store.open(Path(d) / "c.db") as store:
        ingest_paths(store, [corpus], recursive=True)
        return [m.text for s in store.sessions() for m in store.messages(s["id"]) if m.text]


def throughput(reps: int, corpus: Path = CORPUS) -> dict:
    e = SentenceTransformerEmbedder()
    texts = _corpus_texts(corpus)
    pool = list(dict.fromkeys(chunk_many(texts, group_tokens=8).texts + chunk_many(texts, group_tokens=128).texts))
    wp = _wordpieces(e, pool)
    rng = np.random.default_rng(0)
    sets = {}
    for label, lo, hi, n in (("short ~15 wp", 12, 18, 384), ("chunk ~120 wp", 112, 128, 96)):
        idx = rng.permutation(np.where((wp >= lo) & (wp <= hi))[0])[:n]
        sets[label] = ([pool[i] for i in idx], float(wp[idx].mean()))
    t0 = time.perf_counter()
    model = e._model()
    load_s = time.perf_counter() - t0
    model.encode(sets["short ~15 wp"][0][:32])  # warm up
    sizes = (8, 16, 32, 64, 128)
    best: dict[tuple[str, int], float] = {}
    for _ in range(reps):
        for label, (xs, _) in sets.items():
            for bs in sizes:
                e.batch_size = bs
                t = time.perf_counter()
                e.encode(xs)
                rate = len(xs) / (time.perf_counter() - t)
                best[(label, bs)] = max(best.get((label, bs), 0.0), rate)
    out = {"model_load_s": round(load_s, 2), "cpus": os.cpu_count(), "reps": reps,
           "loadavg_end": os.getloadavg()}
    for label, (xs, mean_wp) in sets.items():
        out[label] = {f"bs{bs}": {"texts_per_s": round(best[(label, bs)], 1),
                                  "wordpieces_per_s": round(best[(label, bs)] * mean_wp)}
                      for bs in sizes}
        out[label]["n"] = len(xs)
        out[label]["mean_wordpieces"] = round(mean_wp, 1)
    return out


_WARM = """
import json, sys, time
t = time.perf_counter()
from context_forensics.embed import SentenceTransformerEmbedder, EmbedStats, embed_texts
from context_forensics.store.db import Store
texts = json.load(open(sys.argv[2]))
st = EmbedStats()
with Store.open(sys.argv[1]) as store:
    embed_texts(texts, SentenceTransformerEmbedder(), store, stats=st)
print(json.dumps({"wall_s": time.perf_counter() - t, "encoded": st.encoded, "hits": st.hits,
                  "torch_imported": "torch" in sys.modules}))
"""


def session(path: Path, group_tokens: int) -> dict:
    e = SentenceTransformerEmbedder()
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "s.db"
        with Store.open(db) as store:
            ingest_paths(store, [path])
            (sess,) = store.sessions()
            messages = [m.text for m in store.messages(sess["id"])]
            t = time.perf_counter()
            chunked = chunk_many(messages, CHUNK_TOKENS, group_tokens=group_tokens)
            chunk_s = time.perf_counter() - t
            texts = chunked.texts
            t = time.perf_counter()
            e._model()
            load_s = time.perf_counter() - t
            cold = EmbedStats()
            t = time.perf_counter()
            embed_texts(texts, e, store, stats=cold)
            cold_s = time.perf_counter() - t
            warm = EmbedStats()
            t = time.perf_counter()
            embed_texts(texts, e, store, stats=warm)
            warm_s = time.perf_counter() - t
        tf = Path(d) / "texts.json"
        tf.write_text(json.dumps(texts))
        proc = subprocess.run([sys.executable, "-c", _WARM, str(db), str(tf)], capture_output=True,
                              text=True, check=True, cwd=ROOT)
        fresh = json.loads(proc.stdout.strip().splitlines()[-1])
        db_mb = db.stat().st_size / 1e6
    uniq = list(dict.fromkeys(texts))
    wp = _wordpieces(e, uniq)
    return {
        "session": str(path), "messages": len(messages), "group_tokens": group_tokens,
        "chunks": len(texts), "unique_chunks": len(uniq), "unique_wordpieces": int(wp.sum()),
        "chunk_s": round(chunk_s, 3), "model_load_s": round(load_s, 2),
        "cold": {"wall_s": round(cold_s, 2), **cold.to_dict(),
                 "wordpieces_per_s": round(wp.sum() / cold.encode_seconds)},
        "warm_same_process": {"wall_s": round(warm_s, 3), **warm.to_dict()},
        "warm_fresh_process": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in fresh.items()},
        "db_mb": round(db_mb, 2), "loadavg_end": os.getloadavg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--reps", type=int, default=3)
    add_corpus_option(t)
    s = sub.add_parser("session")
    s.add_argument("path", type=Path)
    s.add_argument("--group-tokens", type=int, default=GROUP_TOKENS)
    b = sub.add_parser("backends")
    b.add_argument("path", type=Path)
    b.add_argument("--limit", type=int, default=600)
    b.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    if args.cmd == "backends":
        print(json.dumps(backends(args.path, args.limit, args.reps), indent=2))
        return
    out = throughput(args.reps, args.corpus) if args.cmd == "throughput" else session(args.path, args.group_tokens)
    print(json.dumps(out, indent=2))


# --- backends: torch vs ONNX Runtime fp32 vs int8 (issue 17) ----------------------------------

_COLD = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[4])
from context_forensics.embed import embedders as em
backend, graph = sys.argv[1], sys.argv[3]
if backend == "torch":
    e = em.SentenceTransformerEmbedder()
else:
    e = em.OnnxEmbedder()
    if graph:
        from context_forensics.embed.onnx_backend import OnnxEncoder
        e._encoder = OnnxEncoder(e.path, e.name, e.torch.revision, graph=__import__("pathlib").Path(graph))
e.load()
load_s = time.perf_counter() - t0
texts = json.load(open(sys.argv[2]))
t = time.perf_counter()
for lo in range(0, len(texts), e.batch_size):
    e.encode(texts[lo : lo + e.batch_size])
enc_s = time.perf_counter() - t
print(json.dumps({"load_s": load_s, "encode_s": enc_s, "n": len(texts),
                  # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so a child of
                  # this (torch-loaded) bench would report at least the parent's size
                  "peak_rss_mb": int(next(l.split()[1] for l in open("/proc/self/status")
                                          if l.startswith("VmHWM:"))) / 1024,
                  "torch_imported": "torch" in sys.modules,
                  "fallback": getattr(e, "fallback_reason", None)}))
"""


def _int8_graph(folder: Path) -> Path:
    """The dynamic int8 quantization of the cached fp32 export (onnxruntime.quantization)."""
    from context_forensics.embed import onnx_backend as ob

    e = OnnxEmbedder()
    e.load()
    src = ob.export_dir(e.name, e.torch.revision) / ob.GRAPH
    out = folder / "model.int8.onnx"
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(out), weight_type=QuantType.QInt8)
    return out


class _GraphEmbedder:
    """An OnnxEmbedder on another graph (the int8 one), cached under its own revision."""

    def __init__(self, graph: Path, tag: str) -> None:
        from context_forensics.embed.onnx_backend import OnnxEncoder

        base = OnnxEmbedder()
        self.name, self.dim, self.batch_size = base.name, base.dim, base.batch_size
        self.revision = f"{base.revision}+{tag}"
        self.enc = OnnxEncoder(base.path, base.name, base.torch.revision, graph=graph)

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.enc.encode(texts)


def _f1(embedder: object) -> dict:
    from context_forensics.analysis.facts.calibration import calibrate, load_pairs

    res = calibrate(load_pairs(ROOT / "tests" / "fixtures" / "facts" / "pairs.csv"), embedder, None, current=0.6)
    cur = res["current"]
    return {"f1_at_0.6": round(cur["f1"], 4), "precision": round(cur["precision"], 4),
            "recall": round(cur["recall"], 4), "best_threshold": res["recommended"]["threshold"],
            "best_f1": round(res["recommended"]["f1"], 4)}


def _agreement(ref: object, other: object, texts: list[str]) -> dict:
    """How far ``other``'s vectors are from ``ref``'s on the same texts: the cosine of each text's
    two vectors, and the change of every pairwise cosine (what the thresholds are set on)."""
    a = np.concatenate([ref.encode(texts[lo : lo + 32]) for lo in range(0, len(texts), 32)])
    b = np.concatenate([other.encode(texts[lo : lo + 32]) for lo in range(0, len(texts), 32)])
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    same = (a * b).sum(axis=1)
    iu = np.triu_indices(len(texts), 1)
    delta = np.abs((a @ a.T)[iu] - (b @ b.T)[iu])
    return {"same_text_cosine_min": round(float(same.min()), 4), "same_text_cosine_mean": round(float(same.mean()), 4),
            "pairwise_abs_delta_mean": round(float(delta.mean()), 4),
            "pairwise_abs_delta_p99": round(float(np.quantile(delta, 0.99)), 4),
            "pairwise_abs_delta_max": round(float(delta.max()), 4)}


def _openvino(e: OnnxEmbedder, texts: list[str], reps: int) -> dict:
    """OpenVINO on the same exported graph, tokenizer, batching and pooling as ONNX Runtime (when
    the ``openvino`` package is importable; ctxf does not use it: ``import openvino`` makes a
    process that opens a UDP socket to the DNS server, strace shows, and ctxf opens none)."""
    try:
        import openvino as ov
    except ImportError:
        return {"status": "not installed"}
    from context_forensics.embed import onnx_backend as ob

    enc = e._encoder
    t = time.perf_counter()
    cm = ov.Core().compile_model(str(ob.export_dir(e.name, e.torch.revision) / ob.GRAPH), "CPU",
                                 {"INFERENCE_NUM_THREADS": enc.threads, "PERFORMANCE_HINT": "LATENCY"})
    req = cm.create_infer_request()
    compile_s = time.perf_counter() - t
    names = [i.get_any_name() for i in cm.inputs]

    def run(ids: list[list[int]]) -> np.ndarray:
        n, width = len(ids), max(map(len, ids))
        a, m = np.zeros((n, width), np.int64), np.zeros((n, width), np.int64)
        for r, row in enumerate(ids):
            a[r, : len(row)], m[r, : len(row)] = row, 1
        feed = {"input_ids": a, "attention_mask": m}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(a)
        return ob.pool(req.infer(feed)[cm.outputs[0]], m, enc.pipe.pooling)

    best = {"onnxruntime": float("inf"), "openvino": float("inf")}
    vecs = {}
    for _ in range(reps):
        for label in best:
            t = time.perf_counter()
            if label == "openvino":
                orig, enc._run = enc._run, run  # the same batching, another runtime
                try:
                    v = enc.encode(texts)
                finally:
                    enc._run = orig
            else:
                v = enc.encode(texts)
            best[label] = min(best[label], time.perf_counter() - t)
            vecs[label] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return {"version": getattr(ov, "__version__", "?"), "compile_s": round(compile_s, 2),
            "chunks_per_s": {k: round(len(texts) / v, 1) for k, v in best.items()},
            "cosine_to_onnxruntime_min": round(float((vecs["onnxruntime"] * vecs["openvino"]).sum(1).min()), 5)}


def backends(session_path: Path, limit: int, reps: int) -> dict:
    """Per backend: a cold process's load seconds (imports included), chunks/s on real chunk
    texts and peak RSS; calibration F1 at 0.6; and the ORT batching: token budget vs fixed 32."""
    st = SentenceTransformerEmbedder()
    with tempfile.TemporaryDirectory() as d:
        with Store.open(Path(d) / "s.db") as store:
            ingest_paths(store, [session_path])
            msgs = [m.text for s in store.sessions() for m in store.messages(s["id"]) if m.text]
        pool = list(dict.fromkeys(chunk_many(msgs, CHUNK_TOKENS, group_tokens=GROUP_TOKENS).texts))
        rng = np.random.default_rng(0)
        texts = [pool[i] for i in sorted(rng.permutation(len(pool))[:limit])]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # as embed_texts sends them
        texts = [texts[i] for i in order]
        tf = Path(d) / "texts.json"
        tf.write_text(json.dumps(texts))
        OnnxEmbedder().load()  # the export exists before any timed run (its first making is timed below)
        int8 = _int8_graph(Path(d))
        rows = {}
        for label, backend, graph in (("torch", "torch", ""), ("onnx fp32", "onnx", ""),
                                      ("onnx int8", "onnx", str(int8))):
            runs = []
            for _ in range(reps):
                proc = subprocess.run([sys.executable, "-c", _COLD, backend, str(tf), graph, str(ROOT)],
                                      capture_output=True, text=True, check=True, cwd=ROOT)
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            b = min(runs, key=lambda r: r["encode_s"])
            rows[label] = {"model_load_s_cold_process": round(min(r["load_s"] for r in runs), 2),
                           "chunks_per_s": round(b["n"] / b["encode_s"], 1),
                           "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs)),
                           "torch_imported": b["torch_imported"], "fallback": b["fallback"]}
        rows["torch"].update(_f1(st))
        rows["onnx fp32"].update(_f1(OnnxEmbedder()))
        rows["onnx int8"].update(_f1(_GraphEmbedder(int8, "int8-dynamic")))
        rows["onnx fp32"]["vs_torch"] = _agreement(st, OnnxEmbedder(), texts)
        rows["onnx int8"]["vs_fp32"] = _agreement(OnnxEmbedder(), _GraphEmbedder(int8, "int8-dynamic"), texts)
        # ORT batching, in this process: fixed 32 texts per batch vs batches by token budget
        e = OnnxEmbedder()
        e.load()
        batching = {}
        for label, bs, budget in (("fixed 32", 32, 1 << 30), ("budget 512", 128, 512), ("budget 1024", 128, 1024),
                                  ("budget 2048", 128, 2048), ("budget 4096", 128, 4096)):
            best_s = float("inf")
            for _ in range(reps):
                t = time.perf_counter()
                for lo in range(0, len(texts), bs):
                    e._encoder.encode(texts[lo : lo + bs], token_budget=budget)
                best_s = min(best_s, time.perf_counter() - t)
            batching[label] = round(len(texts) / best_s, 1)
        openvino = _openvino(e, texts, reps)
        # the first export, timed in a fresh cache folder
        code = ("import sys, time; sys.path.insert(0, sys.argv[1]); t = time.perf_counter()\n"
                "from context_forensics.embed.embedders import OnnxEmbedder\n"
                "e = OnnxEmbedder(); e.load(); print(time.perf_counter() - t, e.fallback_reason)")
        proc = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, check=True,
                              env={**os.environ, "CTXF_CACHE_DIR": str(Path(d) / "fresh")})
        export_s = float(proc.stdout.split()[0])
    return {"session": str(session_path), "texts": len(texts), "reps": reps, "cpus": len(os.sched_getaffinity(0)),
            "backends": rows, "onnx_batching_texts_per_s": batching, "openvino": openvino,
            "first_export_s_cold_process": round(export_s, 1), "loadavg_end": os.getloadavg()}


if __name__ == "__main__":
    main()
