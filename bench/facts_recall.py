"""Recall of the facts prefilter against the full method (issue 17), real MiniLM.

    python bench/facts_recall.py [--corpus PATH] [--work DIR] [--limit N] [--json FILE]

A prefilter that drops a chunk the full method would call present is a fidelity bug, so this
compares ``track_facts(..., exhaustive=True)`` (every chunk embedded) with the default
(prefiltered) on:

- the calibration pairs (tests/fixtures/facts/pairs.csv): ``score_presence`` on each pair at the
  default threshold, full vs prefiltered: same supporting verdict;
- the labelled fact fixtures (tests/fixtures/facts/*.openai.json and the Claude Code compaction
  of summary_drops_ban.claude_code.jsonl, the facts of tests/test_facts.py and
  tests/test_fact_statements.py and the fixtures' config), under the fixtures' small-window
  models and the recorded replay;
- every corpus session (ingested into a scratch store under ``--work``) x its own suggested
  facts (``suggest_facts``) plus the hand-written ``HAND`` facts, recorded replay.

Per (session, fact): per-step states, final_state and the set of supporting messages must be
identical ("recall" counts the (session, fact) pairs that are). Both runs share one store, so
the prefiltered run reads the exhaustive run's vectors from the embedding cache: the comparison
is about verdicts, not time. Near misses are compared too (the first one), as information: the
prefilter searches them among its candidates only.

It also measures what the word gate (``prefilter.WORD_GATE``) rests on: over every (fact without
lexical tokens, unique chunk) pair whose MiniLM cosine reaches the default threshold less
``MARGIN`` while holding fewer than ``SPAN_OVERLAP`` of the fact's content stems (the pairs the
stem gate alone would drop), how many share a content stem with the fact, and for those that
share none the lowest word closeness (``StaticMiniLM.closeness``): the gate must sit below it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _common import CORPUS, FIXTURES, ROOT, print_table  # first: puts this checkout's package on sys.path

from context_forensics.analysis.facts import (
    DEFAULT_THRESHOLD,
    SPAN_OVERLAP,
    content_stems,
    lexical_tokens,
    load_pairs,
    presence_text,
    score_presence,
    suggest_facts,
    track_facts,
)
from context_forensics.analysis.facts.prefilter import WORD_GATE, static_model
from context_forensics.analysis.replay import Timeline, prepare
from context_forensics.config.settings import load_config
from context_forensics.embed import chunk_many, embed_texts, similarity
from context_forensics.embed.embedders import get_embedder
from context_forensics.store.db import Store
from context_forensics.store.ingest import resolve_session

# Hand-written facts of the kinds users track: with and without numbers and names.
HAND = [
    "Never push directly to the main branch; open a pull request instead.",
    "Do not modify the existing tests.",
    "Run the full test suite before finishing.",
    "Keep the public API backwards compatible.",
    "Ask the user before deleting any files.",
    "Do not add new dependencies.",
    "The maximum line length is 100 characters.",
    "Use Python 3.11 for this project.",
    "Write the summary to README.md.",
    "Only edit files under src/.",
    "Respond in English.",
    "The answer must be concise.",
]
# the facts tests/test_facts.py tracks on the fixtures
FIXTURE_FACTS = {
    "release.openai.json": ["Never push directly to the main branch; open a pull request instead.",
                            "The total budget for cloud spend is 4,500 EUR.", "The cloud spend budget is 3,000 EUR.",
                            "Direct pushes to main are not allowed; use a pull request.",
                            "Use the blue-green deployment strategy for every release."],
    "long_tool_output.openai.json": ["The payments API allows at most 20 requests per second.",
                                     "The payments API allows at most 50 requests per second."],
    "negation_compound.openai.json": ["Do not rename any public function.", "You may rename any public function."],
    "summary_drops_ban.claude_code.jsonl": [
        "Use Ash resources and SQLite migrations; no ad-hoc SQL outside migrations.",
        "Keep `render/1` call sites compatible; do not change the persistence schema.",
        "Hook scripts must never block Claude execution; failures are logged and skipped."],
}


def compare(ex, pf, step_seqs) -> tuple[bool, bool]:
    """(verdicts identical, first near miss identical) for one fact's two timelines."""
    same = (np.array_equal(ex.state, pf.state) and ex.final_state == pf.final_state
            and {s["seq"] for s in ex.sources} == {s["seq"] for s in pf.sources})
    a = ex.near_misses[0]["seq"] if ex.near_misses else None
    b = pf.near_misses[0]["seq"] if pf.near_misses else None
    return same, a == b


MARGIN = 0.02  # pairs this far below the threshold count too: the two backends differ by < 1e-3


def gate_margin(facts: list[str], texts: list[str], skip: list[bool], emb, store) -> list[tuple[int, float]]:
    """(shared content stems, word closeness) of the (plain fact, chunk) pairs the word gate
    must keep (see the module docstring)."""
    plain = [f for f in facts if not lexical_tokens(f)]
    sm = static_model()
    if not plain or sm is None:
        return []
    use = ["" if s else t for t, s in zip(texts, skip)]
    uniq = list(dict.fromkeys(chunk_many(use).texts))
    if not uniq:
        return []
    vecs = embed_texts(uniq, emb, store)  # cache hits after the exhaustive run
    fv = embed_texts(plain, emb, store)
    full = similarity(fv, vecs)
    ids = sm.ids(uniq)
    stems = [content_stems(u) for u in uniq]
    out = []
    for f, fact in enumerate(plain):
        fs = content_stems(fact)
        close = None
        for k in np.flatnonzero(full[f] >= DEFAULT_THRESHOLD - MARGIN):
            if fs and len(fs & stems[k]) < SPAN_OVERLAP * len(fs):
                if close is None:
                    close = sm.closeness(fact, ids)
                out.append((len(fs & stems[k]), float(close[k])))
    return out


def run_session(store, sid, facts, emb, cfg=None, model=None):
    prep = prepare(store, sid, model, config=cfg)
    results, _ = prep.run()
    tl = Timeline.from_results(prep.inp, results)
    t0 = time.perf_counter()
    ex = track_facts(prep, facts, emb, store, timeline=tl, exhaustive=True)
    t1 = time.perf_counter()
    pf = track_facts(prep, facts, emb, store, timeline=tl)
    t2 = time.perf_counter()
    rows = [compare(a, b, ex.step_seqs) for a, b in zip(ex.facts, pf.facts)]
    texts = [presence_text(sm.message) for sm in prep.messages]
    step_of = set(int(s) for s in tl.steps)
    skip = [not (int(tl.joins[i]) > 0 or i in step_of) for i in range(len(texts))]
    return rows, ex.method, pf.method, (t1 - t0, t2 - t1), gate_margin(facts, texts, skip, emb, store)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--work", type=Path, default=Path("/tmp/facts_recall"))
    ap.add_argument("--limit", type=int, default=0, help="at most N corpus sessions (0: all)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    emb = get_embedder()  # the default backend (ONNX Runtime where it runs), as a user's ctxf
    print(f"embedder: {emb!r}", flush=True)
    table = []
    failures = []
    margins: list[float] = []
    print(f"load average {os.getloadavg()[0]:.2f} at start", flush=True)

    # 1. calibration pairs
    pairs = load_pairs(FIXTURES / "facts" / "pairs.csv")
    with Store.open(a.work / "pairs.db") as store:
        facts = list(dict.fromkeys(p.fact for p in pairs))
        fi = {f: i for i, f in enumerate(facts)}
        texts = [p.text for p in pairs]
        mask = np.zeros((len(facts), len(texts)), dtype=bool)
        for t, p in enumerate(pairs):
            mask[fi[p.fact], t] = True
        got = {}
        for pre in (False, True):
            pres = score_presence(facts, texts, emb, store, threshold=DEFAULT_THRESHOLD, mask=mask, prefilter=pre)
            got[pre] = (np.array([np.isfinite(pres.score[fi[p.fact], t]) for t, p in enumerate(pairs)]), pres.plan)
        same = int((got[False][0] == got[True][0]).sum())
        table.append(["calibration pairs", str(len(pairs)), "-", str(len(pairs)), f"{same}/{len(pairs)}", "-",
                      str(got[False][1]["encoded"]), str(got[True][1]["encoded"])])
        failures += [f"pair {t}: {pairs[t].fact!r} / {pairs[t].text[:60]!r}"
                     for t in np.flatnonzero(got[False][0] != got[True][0])]
        print(f"pairs done: {same}/{len(pairs)}", flush=True)

    # 2. labelled fixtures (the tests' small-window models, and the recorded replay)
    cfg = load_config(FIXTURES / "facts" / "config.yaml")
    with Store.open(a.work / "fixtures.db") as store:
        n = same = nm = enc_ex = enc_pf = 0
        for name, facts in FIXTURE_FACTS.items():
            sid = resolve_session(store, str(FIXTURES / "facts" / name))
            for model in (None, "tiny", "tiny-local", "tiny-compact", "gpt-4o"):
                rows, mex, mpf, _, mg = run_session(store, sid, facts + list(cfg.facts), emb, cfg, model)
                margins += mg
                n += len(rows)
                same += sum(r[0] for r in rows)
                nm += sum(r[1] for r in rows)
                enc_ex += mex["encoded"]
                enc_pf += mpf["encoded"]
                failures += [f"fixture {name} {model}: {f!r}" for f, r in zip(facts, rows) if not r[0]]
        table.append(["labelled fixtures", "-", f"{len(FIXTURE_FACTS)}x5 replays", str(n), f"{same}/{n}",
                      f"{nm}/{n}", str(enc_ex), str(enc_pf)])
        print(f"fixtures done: {same}/{n}", flush=True)

    # 3. the corpus
    db = a.work / "corpus.db"
    if not db.exists():
        # this checkout's importers (the `ctxf` on PATH may be another checkout's)
        subprocess.run([sys.executable, "-m", "context_forensics", "ingest", str(a.corpus), "--recursive", "--db",
                        str(db), "--json"], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    with Store.open(db) as store:
        sessions = [r["id"] for r in store.sessions()]
        if a.limit:
            sessions = sessions[: a.limit]
        n = same = nm = enc_ex = enc_pf = 0
        t_ex = t_pf = 0.0
        n_facts = 0
        for i, sid in enumerate(sessions, 1):
            msgs = store.messages(sid)
            facts = list(dict.fromkeys([s.text for s in suggest_facts(msgs)] + HAND))
            n_facts += len(facts)
            try:
                rows, mex, mpf, (te, tp), mg = run_session(store, sid, facts, emb)
            except Exception as e:  # noqa: BLE001 - a session the replay cannot take is reported, not hidden
                failures.append(f"session {sid}: error {type(e).__name__}: {e}")
                print(f"[{i}/{len(sessions)}] {sid}: error {e}", flush=True)
                continue
            margins += mg
            n += len(rows)
            same += sum(r[0] for r in rows)
            nm += sum(r[1] for r in rows)
            enc_ex += mex["encoded"]
            enc_pf += mpf["encoded"]
            t_ex += te
            t_pf += tp
            failures += [f"session {sid}: {f!r}" for f, r in zip(facts, rows) if not r[0]]
            print(f"[{i}/{len(sessions)}] {sid}: {sum(r[0] for r in rows)}/{len(rows)} same, "
                  f"chunks {mex['encoded']} -> {mpf['encoded']}, load {os.getloadavg()[0]:.2f}", flush=True)
        table.append(["corpus sessions", "-", str(len(sessions)), str(n), f"{same}/{n}", f"{nm}/{n}",
                      str(enc_ex), str(enc_pf)])

    print()
    print_table(["set", "pairs", "sessions", "(session, fact)", "verdicts identical", "1st near miss identical",
                 "chunks encoded exhaustive", "prefiltered"], table)
    none = [c for n, c in margins if n == 0]
    failures += [f"word gate: a pair sharing no content stem has word closeness {c:.3f} < {WORD_GATE}"
                 for c in none if c < WORD_GATE]
    print(f"\nword gate {WORD_GATE}: (fact without numbers or names, chunk) pairs at cosine >= "
          f"{DEFAULT_THRESHOLD - MARGIN:g} holding < {SPAN_OVERLAP} of its content stems: {len(margins)}; "
          f"{len(margins) - len(none)} share a content stem, {len(none)} none, their lowest word closeness "
          f"{min(none) if none else float('nan'):.3f}")
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    if failures:
        print("\nDIFFERENT VERDICTS:")
        for f in failures:
            print("  " + f)
    if a.json:
        a.json.write_text(json.dumps({"table": table, "failures": failures, "gate_pairs": len(margins),
                                      "no_shared_stem_closeness": sorted(c for n, c in margins if n == 0),
                                      "word_gate": WORD_GATE}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
