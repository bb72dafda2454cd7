"""Divergence speed: aligning two generated runs of 2,000 logical events each.

    python bench/diverge.py                 # 500, 2000 and 5000 events per run
    python bench/diverge.py --sizes 2000 --minilm

Each run is a tool-calling agent session (system, task, then action/result pairs; actions drawn
from a small vocabulary of shell commands, so many repeat; results are random text). Three
pairs per size:

- ``similar``: B is A until the middle (5% of its outputs with an extra line, which only the
  embedding model can call the same answer), then 10% of B's actions are changed, a few steps
  are inserted or dropped, and one command is retried; results differ only by run-specific
  noise (durations) except where the action changed;
- ``disjoint``: two unrelated runs (no common start: the whole DP table is filled);
- ``identical``: B == A (the common-prefix fast path).

Columns: events per run; extract (both runs' events from their messages); align (the DP
alone); compare (content similarity of the substituted pairs up to the divergence: the
hashing stand-in, or MiniLM with ``--minilm``, cold cache); embedded (pairs the model decided);
total (``diverge_runs``: everything without the store and the replay). The store path (``diverge()``: replay of both
runs, token counting) is timed on a fresh store at the largest size. Target (issue): alignment of two 2,000-event runs <
2 s.

Then the real SWE-bench pairs of ``../shared/corpus/swebench-pairs`` (skipped when absent), each
through ``diverge()`` on a fresh store: the earliest divergence, the decisive edit (the first
differing edit of the source files, and the steps that wrote the first hunk only each final
patch has), the patch comparison, and the time per pair.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from _common import CORPUS, best  # first: puts this checkout's package on sys.path

from context_forensics.analysis.diverge import (
    EVENT_TYPES,
    Comparer,
    align,
    diverge,
    diverge_runs,
    extract_events,
)
from context_forensics.config.settings import Config
from context_forensics.embed import HashingEmbedder
from context_forensics.records import Message, Session, ToolCall
from context_forensics.store.db import Store

WORDS = ["context", "window", "token", "eviction", "compaction", "summary", "tool", "result", "assistant", "user",
         "function", "argument", "budget", "constraint", "pipeline", "replay", "fact", "drift", "divergence", "error",
         "file", "line", "test"]
FILES = [f"pkg/mod_{i}.py" for i in range(40)]
COMMANDS = ["cat {f}", "grep -n {w} {f}", "python -m pytest tests/test_{w}.py", "sed -n '1,80p' {f}", "ls -la",
            "git diff", "python run_{w}.py", "find . -name '*{w}*'"]


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def _command(rng: random.Random) -> str:
    return rng.choice(COMMANDS).format(f=rng.choice(FILES), w=rng.choice(WORDS))


def make_steps(n_events: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(_command(rng), "\n".join(_text(rng, 4, 12) for _ in range(rng.randint(2, 30))) + "\n5 passed in 0.12s")
            for _ in range((n_events - 2) // 2)]


def mutate(steps: list[tuple[str, str]], seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    half = len(steps) // 2
    # before the divergence, 5% of the outputs differ by an extra line: only the model can tell
    # they are the same answer (pairs the comparison has to embed)
    out = [(cmd, res + "\nwarning: cache miss, rebuilt") if rng.random() < 0.05 else (cmd, res)
           for cmd, res in steps[:half]]
    for cmd, res in steps[half:]:
        r = rng.random()
        res = res.replace("0.12s", f"{rng.random():.2f}s")  # noise the normalizer removes
        if r < 0.10:
            out.append((_command(rng), res))  # a different decision
        elif r < 0.13:
            out.append((_command(rng), _text(rng, 5, 20)))  # an inserted step
            out.append((cmd, res))
        elif r < 0.15:
            continue  # a dropped step
        elif r < 0.16:
            out.append((cmd, "INTERNALERROR> flaky"))  # a retry
            out.append((cmd, res))
        else:
            out.append((cmd, res))
    return out


def to_messages(steps: list[tuple[str, str]]) -> list[Message]:
    msgs = [Message(role="system", text="You are a careful agent."), Message(role="user", text="Fix the bug.")]
    for k, (cmd, res) in enumerate(steps):
        cid = f"c{k}"
        msgs.append(Message(role="assistant", text="",
                            tool_calls=(ToolCall("bash", json.dumps({"command": cmd}), cid),)))
        msgs.append(Message(role="tool", text=res, tool_call_id=cid, name="bash"))
    return msgs


def bench_pair(name: str, a_msgs: list[Message], b_msgs: list[Message], embedder) -> dict:
    t_extract, (ra, rb) = best(lambda: (extract_events(a_msgs, "openai_chat"), extract_events(b_msgs, "openai_chat")))
    ea, eb = ra.aligned(), rb.aligned()
    codes: dict[str, int] = {}
    tcode = {t: k for k, t in enumerate(EVENT_TYPES)}
    args = ([tcode[e.type] for e in ea], [codes.setdefault(e.key, len(codes)) for e in ea],
            [tcode[e.type] for e in eb], [codes.setdefault(e.key, len(codes)) for e in eb])
    t_align, _ = best(lambda: align(*args))
    t_total, rep = best(lambda: diverge_runs(ra, rb, Comparer(embedder, None)),
                        repeat=1 if embedder.name != "hashing-bow"
                        else 3)
    subs = sum(1 for r in rep.aligned if r["measure"] == "embedding")
    d = rep.divergence
    return {"pair": name, "events": (len(ea), len(eb)), "extract": t_extract, "align": t_align,
            "total": t_total, "compare": max(t_total - t_align, 0.0), "embedded_pairs": subs,
            "divergence": f"{d['cause']} @ {d['a_step']}/{d['b_step']}" if d else "none"}


def store_path(size: int) -> tuple[float, float]:
    a = make_steps(size, 1)
    b = mutate(a, 2)
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "s.db") as store:
        ids = []
        with store.transaction():
            for name, steps in (("a", a), ("b", b)):
                sid = f"bench-{name}"
                store.write_session(Session(external_id=sid, format="openai_chat", messages=to_messages(steps),
                                            model="gpt-4o"), sid=sid, source=name, source_hash=name, parent_id=None)
                ids.append(sid)
        emb = HashingEmbedder()
        t0 = time.perf_counter()
        diverge(store, ids[0], ids[1], config=Config(), embedder=emb)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        diverge(store, ids[0], ids[1], config=Config(), embedder=emb)
        warm = time.perf_counter() - t0
    return cold, warm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 5000])
    ap.add_argument("--minilm", action="store_true", help="compare with the real MiniLM (cold cache)")
    args = ap.parse_args()
    if args.minilm:
        from context_forensics.embed.embedders import get_embedder

        embedder = get_embedder()
        embedder.encode(["warm up"])  # model load is not alignment
    else:
        embedder = HashingEmbedder()
    print(f"{'pair':10} {'events A/B':>12} {'extract':>9} {'align':>9} {'compare':>9} {'total':>9} "
          f"{'embedded':>9}  divergence")
    for size in args.sizes:
        a = make_steps(size, 1)
        for name, b in (("similar", mutate(a, 2)), ("disjoint", make_steps(size, 3)), ("identical", list(a))):
            r = bench_pair(name, to_messages(a), to_messages(b), embedder)
            print(f"{r['pair']:10} {r['events'][0]:>5}/{r['events'][1]:<6} {r['extract']:>8.3f}s {r['align']:>8.3f}s "
                  f"{r['compare']:>8.3f}s {r['total']:>8.3f}s {r['embedded_pairs']:>9}  {r['divergence']}")
    cold, warm = store_path(max(args.sizes))
    print(f"\nstore path at {max(args.sizes)} events (replay of both runs, token counting, hashing embedder): "
          f"cold {cold:.2f}s, warm {warm:.2f}s")
    real_pairs(embedder)


def real_pairs(embedder) -> None:
    from context_forensics.analysis.diverge import task_pairs
    from context_forensics.store.ingest import ingest_paths

    root = CORPUS / "swebench-pairs"
    if not root.is_dir():
        print(f"\nreal pairs: {root} not found, skipped")
        return
    print(f"\nreal pairs ({root.name}): earliest · decisive edit (final hunks written at) · patches "
          "(hunks both/only A/only B) · time")
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "s.db") as store:
        ingest_paths(store, [root], recursive=True)
        for task, a, b in task_pairs(store):
            t0 = time.perf_counter()
            rep = diverge(store, a, b, config=Config(), embedder=embedder)
            took = time.perf_counter() - t0
            d, dec, pt = rep.divergence or {}, rep.decisive, rep.patches
            final = dec.get("final") or {}
            fin = "/".join(str((final.get(s) or {}).get("step") or "–") for s in ("a", "b"))
            h = pt.get("hunks") or {}
            print(f"{task:24} {rep.b['harness']:21} {d.get('cause', 'none')} @ {d.get('a_step')}/{d.get('b_step')}"
                  f" · edit #{dec.get('index')} @ {dec.get('a_step')}/{dec.get('b_step')} ({fin})"
                  f" · {h.get('common')}/{h.get('only_a')}/{h.get('only_b')} · {took:.2f}s")


if __name__ == "__main__":
    main()
