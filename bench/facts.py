"""Fact tracking cost: a generated 200-step agent session with 5 facts, real MiniLM.

    python bench/facts.py [--steps 200] [--naive-sample 10] [--json]

Columns (all in one process, the model loaded and warmed up before any timing):

- ours, cold: ``prepare`` + replay + ``track_facts`` into an empty embedding cache (every unique
  chunk encoded once and written to the cache; token counts already cached, as for the others);
- ours, warm: the same again on the same store (cached vectors: nothing but lookups);
- embed each unique chunk once: the floor — chunk every message the tracker would look at,
  dedupe, encode each unique chunk once; no store, no replay, no similarity, and none of the
  sub-sentence spans ours also embeds for the few chunks past the span gate (counted below);
- naive: at every step, chunk and encode every message in that step's window (no cache, no
  dedupe across steps; batches of 32, like ours), then score the facts. Timed on
  ``--naive-sample`` evenly spaced steps and scaled to all steps by the number of chunks each
  step encodes (its cost is linear in them); those figures are marked "est.". Its encoder calls
  and texts are counted exactly for every step.

Then the presence rule's quality on the hand-labelled pairs (tests/fixtures/facts/pairs.csv,
``calibrate``): F1 per subset (base, negation, compound, all) at 0.60 and 0.75, and what
calibrating cost (spans included, cold cache).

Targets (facts issue): >= 10x fewer encoder calls and >= 10x less wall time than naive; a warm
second run >= 95% fewer encodes; cold wall within 1.2x of "embed each unique chunk once".
Numbers on a shared 2-core machine are noisy: ours and the embed-once floor alternate over
``--reps`` rounds (best of each), and the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import FIXTURES  # first: puts this checkout's package on sys.path

from context_forensics.embed import (
    DEFAULT_BATCH_SIZE,
    EmbedStats,
    SentenceTransformerEmbedder,
    chunk_many,
    group_max,
    similarity,
)
from context_forensics.analysis.facts import calibrate, load_pairs, presence_text, track_facts
from context_forensics.config.models import ModelSpec
from context_forensics.analysis.replay.policies import IN_WINDOW
from context_forensics.records import Message, Session, ToolCall
from context_forensics.analysis.replay import Timeline, prepare
from context_forensics.store.db import Store

SPEC = ModelSpec("bench-32k", "approx", 32_768, 0, "left_truncation")
PAIRS = FIXTURES / "facts" / "pairs.csv"

FACTS = [
    "Never push directly to the main branch.",                       # system prompt: preserved
    "The total budget for cloud spend is 4,500 EUR.",                # first user message: evicted early
    "The payments API allows at most 20 requests per second.",       # inside a long tool output
    "Replies to the user must be under 300 words.",                  # stated as a paraphrase
    "The rollout batch size is 25 hosts.",                           # a number that changes (50 -> 25)
]

_NOUNS = ("settlement ledger invoice refund merchant payout currency rounding batch webhook retry queue "
          "schema migration cache handler report customer account region tax fee").split()
_VERBS = ("reconciles validates rounds posts schedules retries caches serialises aggregates exports").split()


def _sentence(rnd: random.Random) -> str:
    n = rnd.sample(_NOUNS, 3)
    return (f"The {n[0]} {rnd.choice(_VERBS)} each {n[1]} before the {n[2]} is "
            f"{rnd.choice(['closed', 'exported', 'retried', 'posted', 'archived'])}.")


def _tool_output(rnd: random.Random, kind: int, lines: int) -> str:
    out = []
    for _ in range(lines):
        if kind == 0:
            out.append(f"tests/test_{rnd.choice(_NOUNS)}.py::test_{rnd.choice(_NOUNS)}_{rnd.randrange(200)} "
                       f"{rnd.choice(['PASSED', 'PASSED', 'PASSED', 'FAILED'])} [{rnd.randrange(100)}%]")
        elif kind == 1:
            out.append(f"commit {rnd.getrandbits(40):010x} {rnd.choice(['Fix', 'Add', 'Refactor'])} "
                       f"{rnd.choice(_NOUNS)} {rnd.choice(_NOUNS)} handling")
        elif kind == 2:
            f = rnd.choice(_NOUNS)
            out.append(f"def {f}_{rnd.randrange(99)}(self, {rnd.choice(_NOUNS)}, *, strict=True):\n"
                       f"    return self._{rnd.choice(_NOUNS)}.get({rnd.choice(_NOUNS)!r}, {rnd.randrange(999)})")
        elif kind == 3:
            out.append(json.dumps({"id": rnd.randrange(10**6), rnd.choice(_NOUNS): rnd.choice(_NOUNS),
                                   "amount": round(rnd.random() * 1000, 2), "status": rnd.choice(["ok", "held"])}))
        else:
            out.append(_sentence(rnd))
    return "\n".join(out)


def make_session(steps: int, seed: int = 0) -> list[Message]:
    rnd = random.Random(seed)
    msgs = [
        Message("system", "You are a release agent for the payments service.\nRules:\n- Never push directly "
                          "to the main branch.\n- Ask before deleting data."),
        Message("user", "Ship the settlement rounding fix. The total budget for cloud spend is 4,500 EUR. "
                        "Please keep your answers short: at most 300 words per reply."),
    ]
    status = _tool_output(rnd, 1, 8)  # a `git status`-like output the agent re-reads: dedupes
    for k in range(1, steps + 1):
        call = ToolCall("bash", json.dumps({"command": f"step {k}: {rnd.choice(['pytest', 'git log', 'cat', 'curl'])}"}),
                        f"c{k}")
        if k == steps:
            msgs.append(Message("assistant", "Done: the fix is merged behind a pull request."))
            break
        msgs.append(Message("assistant", _sentence(rnd), tool_calls=(call,)))
        if k == 30:
            body = (_tool_output(rnd, 4, 120) + "\nWARNING: the payments API allows at most 20 requests per "
                    "second per merchant.\n" + _tool_output(rnd, 4, 120))
        elif k % 10 == 0:
            body = status
        else:
            body = _tool_output(rnd, rnd.randrange(5), rnd.randrange(4, 40))
        msgs.append(Message("tool", body, tool_call_id=f"c{k}"))
        if k == 10:
            msgs.append(Message("user", "For the rollout, the batch size is 50 hosts."))
        if k == 120:
            msgs.append(Message("user", "Change of plan: the rollout batch size is now 25 hosts."))
    return msgs


def _write(store: Store, msgs: list[Message]) -> str:
    with store.transaction():
        store.write_session(Session("bench", "generated", messages=iter(msgs)), sid="bench", source="bench",
                            source_hash="bench", parent_id=None)
    return "bench"


def _wordpieces(e: SentenceTransformerEmbedder, texts: list[str]) -> int:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(e.path / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return int(sum(len(x.ids) for x in tok.encode_batch(texts, add_special_tokens=False)))


def _encode_batches(e: SentenceTransformerEmbedder, texts: list[str]) -> tuple[np.ndarray, int]:
    """Encode in batches of the default size; return (vectors, encoder calls)."""
    out, calls = [], 0
    for lo in range(0, len(texts), DEFAULT_BATCH_SIZE):
        out.append(e.encode(texts[lo : lo + DEFAULT_BATCH_SIZE]))
        calls += 1
    return (np.concatenate(out) if out else np.zeros((0, e.dim), np.float32)), calls


def run(steps: int, naive_sample: int, reps: int = 2) -> dict:
    e = SentenceTransformerEmbedder()
    t0 = time.perf_counter()
    e.encode(["warm up the model"])
    load_s = time.perf_counter() - t0
    msgs = make_session(steps)
    out: dict = {"steps": steps, "messages": len(msgs), "facts": len(FACTS), "model": SPEC.name,
                 "policy": SPEC.policy, "limit": SPEC.context_limit, "cpus": os.cpu_count(),
                 "model_load_s": round(load_s, 2), "reps": reps}
    with tempfile.TemporaryDirectory() as d, Store.open(Path(d) / "b.db") as store:
        sid = _write(store, msgs)
        prep0 = prepare(store, sid, SPEC)  # token counts cached: every column starts equal
        results, _ = prep0.run()
        timeline = Timeline.from_results(prep0.inp, results)
        texts = [presence_text(sm.message) for sm in prep0.messages]
        step_of = set(int(s) for s in timeline.steps)
        considered = [t if (int(timeline.joins[i]) > 0 or i in step_of) else "" for i, t in enumerate(texts)]

        # ours (cold, then warm on the same store) and the embed-once floor, alternated over
        # ``reps`` rounds, best of each: on a shared machine the load changes between phases.
        def ours_cold_warm() -> tuple:
            with tempfile.TemporaryDirectory() as d2, Store.open(Path(d2) / "o.db") as s2:
                _write(s2, msgs)
                prepare(s2, sid, SPEC)  # token counts: the same head start as the other columns
                runs = []
                for _ in range(2):
                    st = EmbedStats()
                    t = time.perf_counter()
                    rep = track_facts(prepare(s2, sid, SPEC), FACTS, e, s2, stats=st)
                    runs.append((time.perf_counter() - t, st, rep))
                return runs[0], runs[1]

        def embed_once() -> tuple[float, int, int]:
            t = time.perf_counter()
            todo = list(dict.fromkeys(chunk_many(considered).texts + FACTS))
            _, calls = _encode_batches(e, todo)
            return time.perf_counter() - t, calls, len(todo)

        best_cold = best_warm = best_once = None
        for rnd in range(reps):
            order = (ours_cold_warm, embed_once) if rnd % 2 == 0 else (embed_once, ours_cold_warm)
            for fn in order:
                got = fn()
                if fn is embed_once:
                    best_once = got if best_once is None or got[0] < best_once[0] else best_once
                else:
                    c, w = got
                    best_cold = c if best_cold is None or c[0] < best_cold[0] else best_cold
                    best_warm = w if best_warm is None or w[0] < best_warm[0] else best_warm
        cold_s, cold, rep = best_cold
        warm_s, warm, _ = best_warm
        once_s, once_calls, once_n = best_once
        uniq = list(dict.fromkeys(chunk_many(considered).texts))

        # naive: every window message re-encoded at every step
        fact_vecs = e.encode(FACTS)
        per_step_chunks = []
        window_msgs = []
        states_at = np.full(len(msgs), -1, dtype=np.int8)
        chunk_cache = {}
        for r in results:
            for state, seqs in r.new.items():
                code = {"kept": 0, "evicted": 1, "cleared": 2, "summarized": 3, "outside_local": 4}[state]
                states_at[seqs] = code
            for i in range(int(states_at.size)):
                if i < r.seq and states_at[i] == -1:
                    states_at[i] = 0
            inside = [i for i in range(r.seq) if states_at[i] in IN_WINDOW]
            window_msgs.append(inside)
            n = 0
            for i in inside:
                if i not in chunk_cache:
                    chunk_cache[i] = chunk_many([texts[i]]).texts
                n += len(chunk_cache[i])
            per_step_chunks.append(n)
        naive_texts = int(sum(per_step_chunks))
        naive_calls = int(sum(-(-n // DEFAULT_BATCH_SIZE) for n in per_step_chunks))
        sample = sorted(set(np.linspace(0, len(results) - 1, naive_sample).round().astype(int).tolist()))
        t = time.perf_counter()
        sampled = 0
        for k in sample:
            step_texts = [c for i in window_msgs[k] for c in chunk_many([texts[i]]).texts]
            owner = np.repeat(np.arange(len(window_msgs[k])),
                              [len(chunk_cache[i]) for i in window_msgs[k]])
            vecs, _ = _encode_batches(e, step_texts)
            group_max(similarity(fact_vecs, vecs), owner, len(window_msgs[k]))
            sampled += len(step_texts)
        naive_sample_s = time.perf_counter() - t
        naive_s = naive_sample_s * naive_texts / max(sampled, 1)

        wp = _wordpieces(e, uniq)
    out.update({
        "unique_chunks": len(uniq),
        "unique_wordpieces": wp,
        "ours_cold": {"wall_s": round(cold_s, 2), **cold.to_dict()},
        "ours_warm": {"wall_s": round(warm_s, 3), **warm.to_dict()},
        "embed_unique_once": {"wall_s": round(once_s, 2), "encoder_calls": once_calls, "encoded": once_n},
        "naive": {"wall_s_est": round(naive_s, 1), "encoder_calls": naive_calls, "encoded": naive_texts,
                  "sampled_steps": len(sample), "sampled_texts": sampled, "sample_wall_s": round(naive_sample_s, 2)},
        "throughput": {"chunks_per_s": round(cold.encoded / cold.encode_seconds, 1),
                       "wordpieces_per_s": round(wp / cold.encode_seconds)},
        "ratios": {
            "naive_calls_over_ours": round(naive_calls / max(cold.encoder_calls, 1), 1),
            "naive_wall_over_ours": round(naive_s / cold_s, 1),
            "warm_encode_reduction_pct": round(100 * (1 - warm.encoded / max(cold.encoded, 1)), 1),
            "cold_wall_over_unique_once": round(cold_s / once_s, 3),
        },
        "spans": rep.spans,
        "result": [{"fact": f.fact, "first_appeared": f.first_appeared, "disappeared_at": f.disappeared_at,
                    "final_state": f.final_state, "recollections": len(f.recollections)} for f in rep.facts],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
    })
    with tempfile.TemporaryDirectory() as d, Store.open(Path(d) / "c.db") as store:
        st = EmbedStats()
        t = time.perf_counter()
        cal = calibrate(load_pairs(PAIRS), e, store, current=0.6, stats=st)
        out["calibration"] = {
            "pairs": cal["pairs"], "wall_s": round(time.perf_counter() - t, 2), "encoded": st.encoded,
            "spans": cal["spans"],
            "subsets": [{"subset": s["subset"], "pairs": s["pairs"],
                         "f1": {str(a["threshold"]): a["f1"] for a in s["at"]}} for s in cal["subsets"]],
        }
    return out


def table(r: dict) -> str:
    c, w, o, n = r["ours_cold"], r["ours_warm"], r["embed_unique_once"], r["naive"]
    rows = [
        ("ours, cold", c["encoder_calls"], c["encoded"], f"{c['wall_s']:.2f}"),
        ("ours, warm", w["encoder_calls"], w["encoded"], f"{w['wall_s']:.3f}"),
        ("embed each unique chunk once", o["encoder_calls"], o["encoded"], f"{o['wall_s']:.2f}"),
        ("naive (re-encode every window message)", n["encoder_calls"], n["encoded"], f"{n['wall_s_est']:.1f} est."),
    ]
    lines = [f"fact tracking: {r['steps']} steps, {r['messages']} messages, {r['facts']} facts, "
             f"{r['unique_chunks']} unique chunks ({r['unique_wordpieces']:,} wordpieces), "
             f"{r['model']} / {r['policy']}, {r['cpus']} CPUs",
             "", f"{'':40} {'encoder calls':>14} {'texts encoded':>14} {'wall s':>12}"]
    lines += [f"{a:40} {b:>14,} {c_:>14,} {d:>12}" for a, b, c_, d in rows]
    ra = r["ratios"]
    lines += ["",
              f"naive / ours: {ra['naive_calls_over_ours']}x encoder calls, {ra['naive_wall_over_ours']}x wall "
              f"(naive timed on {n['sampled_steps']} steps, {n['sampled_texts']:,} texts, scaled by texts)",
              f"warm run: {ra['warm_encode_reduction_pct']}% fewer encodes; cold wall / embed-unique-once: "
              f"{ra['cold_wall_over_unique_once']}",
              f"encoder throughput (ours, cold): {r['throughput']['chunks_per_s']} chunks/s, "
              f"{r['throughput']['wordpieces_per_s']:,} wordpieces/s; load average {r['loadavg_end']}",
              f"sub-sentence spans (ours): {r['spans']['pairs_split']} (fact, chunk) pairs split, "
              f"{r['spans']['span_texts']} span texts embedded (in 'texts encoded', not in embed-once)"]
    for f in r["result"]:
        lines.append(f"  {f['fact'][:50]:50} first {f['first_appeared']}  left {f['disappeared_at']}  "
                     f"now {f['final_state']}")
    cal = r["calibration"]
    lines += ["", f"presence rule on {cal['pairs']} labelled pairs ({PAIRS.name}): {cal['encoded']} texts encoded "
                  f"cold ({cal['spans']['span_texts']} spans), {cal['wall_s']:.2f} s",
              f"  {'subset':10} {'pairs':>5} {'F1 @0.60':>9} {'F1 @0.75':>9}"]
    lines += [f"  {s['subset']:10} {s['pairs']:>5} {s['f1']['0.6']:>9.3f} {s['f1']['0.75']:>9.3f}"
              for s in cal["subsets"]]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--naive-sample", type=int, default=10)
    ap.add_argument("--reps", type=int, default=2, help="rounds of ours/embed-once, best of each")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = run(args.steps, args.naive_sample, args.reps)
    print(json.dumps(r, indent=2) if args.json else table(r))


if __name__ == "__main__":
    main()
