"""Replay speed: generated sessions of 100 → 10,000 messages, 4 policies, against a naive rebuild.

    python bench/replay.py                # sizes 100, 1000, 5000, 10000
    python bench/replay.py --sizes 100 1000

For each size it measures, in one process:
- tokenize once: the time to tokenize every unique text once with tiktoken (the floor a
  straightforward replay pays), and with quicktok's batch counter (what ctxf uses: identical
  counts, verified in tests/test_assets.py);
- replay: a full `replay_session` per policy from the store with a cold token cache (counting
  with per-message overhead, building the input, running the policy, writing the snapshot);
- naive: what a straightforward script does — at every step re-tokenize the accumulated history
  and trim it from the front until it fits. At 5,000+ messages the naive run is timed on 40
  evenly spaced steps and scaled to all steps (its cost per step is linear in the history, so
  the sample is unbiased); the table marks those figures "est.".
Targets (issue 3): ≥ 100× faster than naive at 5,000 messages; cost linear in messages;
replay ≤ 1.5× tokenize-once.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from _common import print_table  # first: puts this checkout's package on sys.path

from context_forensics.analysis.replay import replay_session
from context_forensics.config.models import resolve_model
from context_forensics.records import Message, Session, ToolCall
from context_forensics.store.db import Store
from context_forensics.tokens.tokenizers import get_tokenizer

POLICIES = ("left_truncation", "sliding_window", "tool_result_clearing", "auto_compaction")
WORDS = ("context window token eviction compaction summary tool result assistant user function "
         "argument budget constraint pipeline replay fact drift divergence error file line test").split()


def make_session(n: int, seed: int = 0) -> list[Message]:
    rng = random.Random(seed)

    def text(lo: int, hi: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) + f" #{rng.random():.6f}"

    msgs = [Message(role="system", text="You are a careful agent. " + text(20, 40)),
            Message(role="user", text=text(20, 60))]
    i = 0
    while len(msgs) < n:
        i += 1
        cid = f"call_{i}"
        msgs.append(Message(role="assistant", text=text(5, 30),
                            tool_calls=(ToolCall("bash", f'{{"command": "grep -rn {rng.choice(WORDS)} ."}}', cid),)))
        if len(msgs) < n:
            msgs.append(Message(role="tool", text=text(40, 400), tool_call_id=cid, name="bash"))
    return msgs[:n]


def naive_seconds(msgs: list[Message], budget: int, sample: int | None) -> tuple[float, bool]:
    """Per step: re-encode the whole history, then drop from the front until it fits."""
    from context_forensics.tokens.assets import get_encoding

    enc = get_encoding("o200k_base")  # tiktoken, as a straightforward script would use
    steps = [i for i, m in enumerate(msgs) if m.role == "assistant"]
    chosen = steps if sample is None or sample >= len(steps) else \
        [steps[round(k * (len(steps) - 1) / (sample - 1))] for k in range(sample)]
    t = time.perf_counter()
    for s in chosen:
        history = msgs[:s]
        counts = [len(enc.encode_ordinary(m.text)) + 4 for m in history]
        total, start = sum(counts), 0
        while total > budget and start < len(counts) - 1:
            total -= counts[start]
            start += 1
    elapsed = time.perf_counter() - t
    if chosen is steps:
        return elapsed, False
    return elapsed * len(steps) / len(chosen), True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000, 10000])
    ap.add_argument("--model", default="gpt-4o-mini")
    ap.add_argument("--limit", type=int, default=32_000, help="context limit for the replays (forces evictions)")
    args = ap.parse_args()
    base = resolve_model(args.model)
    from dataclasses import replace

    spec = replace(base, context_limit=args.limit, reserved_output=min(base.reserved_output, args.limit // 8))
    tok = get_tokenizer(spec.tokenizer)
    tok.count_batch(["warm up"])  # load the vocabulary outside the timings
    from context_forensics.tokens.assets import get_encoding

    tiktoken_enc = get_encoding("o200k_base")
    # Import every module a replay touches outside the timings, as the tokenizer is loaded above
    # (this environment may compile modules from source on first import).
    with tempfile.TemporaryDirectory() as d:
        store = Store.open(Path(d) / "warm.db")
        with store.transaction():
            store.write_session(Session("warm", "bench", messages=make_session(20)), sid="w", source="bench",
                                source_hash="-", parent_id=None)
        for policy in POLICIES:
            replay_session(store, "w", spec, policy=policy, use_cache=False)
        store.close()
    rows = []
    for n in args.sizes:
        msgs = make_session(n, seed=n)
        with tempfile.TemporaryDirectory() as d:
            store = Store.open(Path(d) / "bench.db")
            with store.transaction():
                store.write_session(Session(f"bench-{n}", "bench", messages=msgs), sid=f"s{n}", source="bench",
                                    source_hash="-", parent_id=None)
            texts = list(dict.fromkeys(m.text for m in msgs))
            t = time.perf_counter()
            tok.count_batch(texts)
            once_fast = time.perf_counter() - t
            t = time.perf_counter()
            for text in texts:
                tiktoken_enc.encode_ordinary(text)
            once = time.perf_counter() - t
            timings = {}
            for policy in POLICIES:
                store.db.execute("DELETE FROM token_counts")  # cold: every replay counts from scratch
                t = time.perf_counter()
                rep = replay_session(store, f"s{n}", spec, policy=policy, use_cache=False)
                timings[policy] = time.perf_counter() - t
                assert len(rep.steps) == sum(m.role == "assistant" for m in msgs)
            t = time.perf_counter()
            replay_session(store, f"s{n}", spec, policy="left_truncation", use_cache=False)
            warm = time.perf_counter() - t
            store.close()
        naive, estimated = naive_seconds(msgs, spec.budget, None if n <= 1000 else 40)
        rows.append((n, once, once_fast, timings, warm, naive, estimated))
        print(f"done {n}", file=sys.stderr)

    head = ["messages", "tiktoken once s", "quicktok once s"] + [f"{p} s" for p in POLICIES] + \
        ["warm s", "replay/once", "naive s", "naive/replay", "µs/msg"]
    table = []
    for n, once, once_fast, timings, warm, naive, est in rows:
        worst = max(timings.values())
        table.append([f"{n:,}", f"{once:.3f}", f"{once_fast:.3f}"] + [f"{timings[p]:.3f}" for p in POLICIES] +
                     [f"{warm:.3f}", f"{worst / once:.2f}×", f"{naive:,.2f}" + (" est." if est else ""),
                      f"{naive / worst:,.0f}×", f"{worst / n * 1e6:,.0f}"])
    print_table(head, table, left=0)
    print("replay/once = slowest policy / tiktoken tokenize-once; naive/replay uses the slowest policy; "
          "warm = token counts cached in the store", file=sys.stderr)


if __name__ == "__main__":
    main()
