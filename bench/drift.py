"""Drift: the calibration figures behind the drift score mapping (analysis/drift/verdicts.py), and the cost of a drift curve.

Not a test (pytest does not collect it). Run from the repo root:

    .venv/bin/python bench/drift.py calibrate [--db PATH]   # similarity distributions, per source
    .venv/bin/python bench/drift.py timing [--db PATH]      # cold vs warm, chunks embedded

``calibrate`` measures window similarities (the ``s`` the score maps) with all-MiniLM-L6-v2:
on-topic = each session against its own goal (SWE-bench trajectories, MT-Bench answers, the
labelled fixtures); off-topic = a goal paired with *another* session's assistant output (chat
goals x agent steps, MT-Bench question x other questions' answers, SWE-bench issue x another
issue's trajectory). It prints percentiles and the share of windows each anchor separates, as
JSON. Embeddings are cached in the store (default a temporary one), so a rerun is fast.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import FIXTURES, SAMPLES, add_corpus_option  # first: puts this checkout's package on sys.path

from context_forensics.config.settings import Config
from context_forensics.analysis.drift import (
    drift_curve,
    goal_from_messages,
    score_from_similarity,
)
from context_forensics.embed import EmbedStats
from context_forensics.embed.embedders import get_embedder
from context_forensics.store.ingest import ingest_paths
from context_forensics.analysis.replay import prepare
from context_forensics.store.db import Store

DRIFT_FIXTURES = FIXTURES / "drift"
DRIFT_SAMPLES = SAMPLES / "drift-chat"


def _group(row: dict) -> str | None:
    src = row["source"]
    if "swebench-pairs" in src or "openhands-llm-completions" in src or row["format"] == "swe_agent":
        return "swebench"
    if row["format"] == "mt_bench":
        return "mt_bench"
    if "drift" in src:
        return "fixture"
    return None


def _pct(a: list[float]) -> dict:
    x = np.asarray(a, dtype=float)
    if not len(x):
        return {"n": 0}
    return {"n": int(len(x)), **{f"p{q}": round(float(np.percentile(x, q)), 3) for q in (5, 10, 25, 50, 75, 90, 95)}}


def calibrate(db: Path, corpus: Path) -> dict:
    cfg = Config()
    e = get_embedder()
    with Store.open(db) as store:
        ingest_paths(store, [corpus, DRIFT_FIXTURES, DRIFT_SAMPLES], recursive=True)
        rows = [r for r in store.sessions() if r["step_count"] > 0 and _group(r)]
        preps = {r["id"]: prepare(store, r["id"], config=cfg, policy="recorded") for r in rows}
        groups = {r["id"]: _group(r) for r in rows}
        goals = {sid: goal_from_messages(p.messages) for sid, p in preps.items()}

        def windows(sid: str, goal) -> list[float]:
            rep = drift_curve(preps[sid], None, e, store, goal)
            return [s.similarity for s in rep.steps if s.similarity is not None]

        on: dict[str, list[float]] = {"swebench": [], "mt_bench": []}
        fixtures: dict[str, dict] = {}
        for sid, g in groups.items():
            if g == "fixture":
                rep = drift_curve(preps[sid], None, e, store)
                fixtures[Path(store.session(sid)["source"]).name] = {
                    "scores": [s.score for s in rep.steps], "window_similarity": [s.similarity for s in rep.steps]}
            else:  # its own opening, passed as is: the calibration measures similarity, not goal usability
                on[g] += windows(sid, goals[sid])
        off: dict[str, list[float]] = {"chat goal x agent steps": [],
                                       "mt_bench question x answers of another category": [],
                                       "mt_bench question x answers of the same category": [],
                                       "swebench issue x other issue's run": []}
        category = {r["id"]: (r["metadata"] or {}).get("category") for r in rows}
        mt = [s for s, g in groups.items() if g == "mt_bench"]
        swe = [s for s, g in groups.items() if g == "swebench"]
        for a in mt[:12]:
            for b in swe:
                off["chat goal x agent steps"] += windows(b, goals[a])
        for a in mt:
            for b in mt:
                if a != b:
                    same = "the same" if category[a] == category[b] else "another"
                    off[f"mt_bench question x answers of {same} category"] += windows(b, goals[a])
        task = {r["id"]: r["task"] for r in rows}
        for a in swe:
            for b in swe:
                if a != b and not (task[a] and task[a] == task[b]):
                    off["swebench issue x other issue's run"] += windows(b, goals[a])
    dc = cfg.drift
    return {
        "embedding_model": e.name,
        "anchors": {"on_topic_similarity": dc.on_topic_similarity, "off_topic_similarity": dc.off_topic_similarity},
        "on_topic_windows": {k: _pct(v) | {"share_at_least_MILD": round(float(np.mean(
            [score_from_similarity(x) >= 75 for x in v])), 3)} for k, v in on.items()},
        "off_topic_windows": {k: _pct(v) | {"share_CRITICAL": round(float(np.mean(
            [score_from_similarity(x) < 35 for x in v])), 3)} for k, v in off.items()},
        "fixture_scores": fixtures,
        # sessions `ctxf drift` itself leaves unjudged (state no_goal), by format and reason
        "no_goal": _no_goal_counts(store_path=db, sessions=list(preps)),
    }


def _no_goal_counts(store_path: Path, sessions: list[str]) -> dict[str, int]:
    from collections import Counter

    from context_forensics.analysis.drift import assess_goal, template_index

    out: Counter = Counter()
    with Store.open(store_path) as store:
        for sid in sessions:
            row = store.session(sid)
            g = assess_goal(goal_from_messages(store.messages(sid)), template_index(store, row["format"],
                                                                                      bool(row["task"])))
            if g.state == "no_goal":
                out[f"{row['format']}:{g.reason}"] += 1
    return dict(sorted(out.items()))


def timing(db: Path, corpus: Path) -> dict:
    """Cold (empty cache) and warm drift curves over the corpus' largest sessions."""
    cfg = Config()
    out = []
    with Store.open(db) as store:
        ingest_paths(store, [corpus], recursive=True)
        rows = sorted(store.sessions(), key=lambda r: -r["step_count"])[:4]
        for r in rows:
            prep = prepare(store, r["id"], config=cfg, policy="recorded")
            t_replay = time.perf_counter()
            prep.run()
            t_replay = time.perf_counter() - t_replay
            res = {"session": r["id"], "format": r["format"], "steps": r["step_count"], "replay_s": round(t_replay, 3)}
            for label in ("cold", "warm"):
                e = get_embedder()
                st = EmbedStats()
                t0 = time.perf_counter()
                rep = drift_curve(prep, None, e, store, stats=st)
                res[label] = {"seconds": round(time.perf_counter() - t0, 2), "chunks": rep.chunks,
                              "unique": st.unique, "encoded": st.encoded, "encode_s": round(st.encode_seconds, 2)}
            out.append(res)
    return {"sessions": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("calibrate", "timing"))
    ap.add_argument("--db", type=Path, help="store to use (default: a temporary one)")
    add_corpus_option(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        db = args.db or Path(d) / "drift.db"
        result = (calibrate if args.what == "calibrate" else timing)(db, args.corpus)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
