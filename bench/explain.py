"""`ctxf explain` on real runs: the time of a cold diagnosis (empty embedding cache, the model
loaded once beforehand) and a warm one (the same store again), per session.

    python bench/explain.py                 # the sample logs and the corpus's failed runs
    python bench/explain.py --corpus PATH

Sessions: the sample agent run under gemma-7b (a constraint evicted before the edit that broke
it), the sample pair's failed run, and every session the corpus's stores mark failed (SWE-bench
pairs, Inspect) plus the 453-step Pi session. Columns: steps, verdict, decisive step, constraints
tracked, counterfactual replays, cold and warm seconds (best of 3 for warm).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import CORPUS, SAMPLES, add_corpus_option, best, print_table  # first: this checkout's package

import context_forensics as ctxf
from context_forensics.embed.embedders import get_embedder


def _cases(corpus: Path) -> list[tuple[str, Path, dict]]:
    out = [("sample agent run (gemma-7b)", SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json",
            {"model": "gemma-7b", "facts": ["Never modify files under tests/."]}),
           ("sample pair, failed run", SAMPLES / "pair-csv-bom" / "failure" / "acme__csvtool-42.traj.json", {})]
    if corpus.is_dir():
        pairs = corpus / "swebench-pairs"
        for traj in sorted(pairs.glob("*/*gemini*/*.traj.json")) + sorted(pairs.glob("*/*gpt-5-mini*/*.traj.json")):
            out.append((traj.parent.parent.name + " · " + traj.parent.name.split("_")[0], traj, {}))
        pi = corpus / "pi" / "pi-mono" / "large-session.jsonl"
        if pi.is_file():
            out.append(("pi large-session (453 steps)", pi, {}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_option(ap)
    ap.add_argument("--limit", type=int, default=0, help="at most this many sessions (0: all)")
    args = ap.parse_args()
    emb = get_embedder(None)
    emb.encode(["warm the model up"])  # the model load is not the diagnosis
    rows = []
    cases = _cases(args.corpus if args.corpus else CORPUS)
    if args.limit:
        cases = cases[: args.limit]
    for name, path, kw in cases:
        with tempfile.TemporaryDirectory() as tmp:
            with ctxf.open_store(Path(tmp) / "s.db") as ws:
                ctxf.ingest([path], store=ws)
                t0 = time.perf_counter()
                d = ctxf.explain(path, store=ws, **kw).to_dict()
                cold = time.perf_counter() - t0
                warm, _ = best(lambda: ctxf.explain(path, store=ws, **kw))
        dec = d["decisive_step"]
        rows.append([name, str(d["replay"]["steps"]), d["verdict"], str(dec["step"]) if dec else "-",
                     str(len(d["constraints"])), str(len(d["counterfactuals"])), f"{cold:.2f}", f"{warm:.2f}"])
    print_table(["session", "steps", "verdict", "decisive", "constraints", "what-ifs", "cold s", "warm s"], rows)


if __name__ == "__main__":
    main()
