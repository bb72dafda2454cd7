"""Benchmark embedding: MiniLM throughput by batch size, and cold vs warm cache on one session.

Not a test (pytest does not collect it). Run from the repo root:

    .venv/bin/python bench/embed.py throughput [--reps 3]
    .venv/bin/python bench/embed.py session PATH [--group-tokens 16]

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
    SentenceTransformerEmbedder,
    chunk_many,
    embed_texts,
)
from context_forensics.store.ingest import ingest_paths
from context_forensics.store.db import Store


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
    args = ap.parse_args()
    out = throughput(args.reps, args.corpus) if args.cmd == "throughput" else session(args.path, args.group_tokens)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
