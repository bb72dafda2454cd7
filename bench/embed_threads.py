"""How ONNX Runtime's threads are best spent on MiniLM: each batch shared by the threads (intra-op),
or each thread running whole batches (``onnx_backend.OnnxEncoder``), on the texts drift embeds.

    python bench/embed_threads.py [--corpus PATH] [--sessions N] [--rounds R]

Collects the chunk texts ``ctxf drift`` embeds for the first N sessions of each format of the corpus
(a temporary store; nothing cached), then encodes them R times, the ways interleaved in each round,
and prints chunks/s per way and round, and the ratio to the intra-op way measured in the same round.
Not a test: figures vary with the machine's load; compare within a round.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import add_corpus_option, print_table  # first: puts this checkout's package on sys.path


def drift_texts(corpus: Path, per_format: int) -> list[str]:
    from context_forensics.analysis.drift import curve
    from context_forensics.config.settings import Config
    from context_forensics.store.db import Store
    from context_forensics.store.ingest import ingest_paths

    seen: list[str] = []

    def record(texts, *a, **k):  # the texts drift asks for; no vector is computed here
        seen.extend(texts)
        import numpy as np

        return np.zeros((len(texts), 384), dtype=np.float32)

    with tempfile.TemporaryDirectory() as d:
        store = Store.open(Path(d) / "s.db")
        ingest_paths(store, [str(corpus)], recursive=True)
        per: dict[str, int] = {}
        real = curve.embed_texts
        curve.embed_texts = record
        try:
            for s in store.sessions():
                if per.get(s["format"], 0) >= per_format:
                    continue
                per[s["format"]] = per.get(s["format"], 0) + 1
                try:
                    curve.drift_session(store, s["id"], config=Config())
                except Exception:  # noqa: BLE001  a session drift cannot judge adds no texts
                    pass
        finally:
            curve.embed_texts = real
        store.close()
    return list(dict.fromkeys(t for t in seen if t and not t.isspace()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_corpus_option(ap)
    ap.add_argument("--sessions", type=int, default=3, help="sessions per format (default 3)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from context_forensics.embed import onnx_backend as ob
    from context_forensics.embed.embedders import SentenceTransformerEmbedder

    texts = drift_texts(Path(args.corpus), args.sessions)
    st = SentenceTransformerEmbedder()
    enc = ob.OnnxEncoder(st.path, st.name, st.revision, threads=1)  # the session: one intra-op thread
    n = ob.usable_cpus()
    intra = ob._onnxruntime().InferenceSession(
        str(enc.folder / ob.GRAPH), sess_options=ob.session_options(n), providers=["CPUExecutionProvider"])
    ids = [e.ids for e in enc.tokenizer.encode_batch([t.lower() if enc.pipe.lowercase_input else t for t in texts])]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    batches, lo = [], 0
    while lo < len(order):
        take = max(1, ob.TOKEN_BUDGET // len(ids[order[lo]]))
        batches.append([ids[i] for i in order[lo:lo + take]])
        lo += take

    def shared() -> None:  # each batch on n intra-op threads
        session = enc.session
        enc.session = intra
        try:
            for b in batches:
                enc._run(b)
        finally:
            enc.session = session

    def whole() -> None:  # n one-thread runs at once (what encode does)
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(enc._run, batches))

    rows = []
    for r in range(1, args.rounds + 1):
        got = {}
        for name, fn in (("intra-op threads", shared), ("threads run batches", whole)):
            t0 = time.perf_counter()
            fn()
            got[name] = len(texts) / (time.perf_counter() - t0)
        base = got["intra-op threads"]
        rows += [[str(r), name, f"{v:,.0f}", f"{v / base:.2f}x"] for name, v in got.items()]
    print(f"{len(texts):,} drift chunks of {args.sessions} session(s) per format, {n} CPU(s), "
          f"token budget {ob.TOKEN_BUDGET}")
    print_table(["round", "way", "chunks/s", "vs intra-op"], rows, left=2)


if __name__ == "__main__":
    sys.exit(main())
