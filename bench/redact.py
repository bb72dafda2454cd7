"""Secret redaction (store/redact.py): precision on the real corpus, speed, and what it moves.

    python bench/redact.py                    # all three tables
    python bench/redact.py --skip-embeddings  # without the MiniLM drift/facts comparison
    python bench/redact.py --corpus PATH

1. Precision: every corpus file, line by line as raw text, and the corpus as the store keeps it
   (ingested): redactions per rule, and the candidates each rule's regex found but its value
   check rejected (the near misses a reader should eyeball).
2. Speed: the redactor over the stored text of the corpus (MB/s), and ``ingest_paths`` of the
   corpus with redaction on and off (best of 3).
3. Embeddings: drift scores and fact states of real sessions with a ``.env`` dump planted in one
   tool output, stored with and without redaction. Embeddings are computed on the stored text,
   so they can move: this says by how much.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import string
import tempfile
import time
from pathlib import Path

from _common import add_corpus_option, best, print_table  # first: puts this checkout's package on sys.path

from context_forensics import api
from context_forensics.analysis.facts.suggest import suggest_facts
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from context_forensics.store.redact import RULES, Redactor


def precision(corpus: Path) -> None:
    files = [p for p in sorted(corpus.rglob("*")) if p.is_file()]
    redacted: collections.Counter[str] = collections.Counter()
    rejected: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    r = Redactor()
    for p in files:
        text = p.read_text("utf-8", "replace")
        for line in text.splitlines():
            r.text(line)
        low = text.lower()
        for rule in RULES:  # what each regex met, and what its check turned down
            for m in rule.regex.finditer(low if rule.icase else text):
                a, b = m.span(rule.group)
                value = text[a:b]
                if a >= 0 and rule.check is not None and not (
                        rule.check(value, text[m.start():m.end()]) if rule.check_match else rule.check(value)):
                    rejected[rule.name][value[:40]] += 1
    redacted.update(r.reset())
    with tempfile.TemporaryDirectory() as d:
        rep = api.ingest(corpus, recursive=True, db=Path(d) / "c.db").to_dict()
    stored: collections.Counter[str] = collections.Counter()
    for f in rep["files"]:
        stored.update(f["redacted"] or {})
    names = list(dict.fromkeys(rule.name for rule in RULES))
    print(f"## precision: {len(files)} corpus files (raw), {rep['totals']['ingested']} ingested, "
          f"{rep['totals']['messages']} messages stored\n")
    print_table(["rule", "raw lines", "stored", "near misses", "examples of near misses"],
                [[n, str(redacted[n]), str(stored[n]), str(sum(rejected[n].values())),
                  ", ".join(repr(v) for v, _ in rejected[n].most_common(4))] for n in names], left=1)
    print()


def speed(corpus: Path) -> None:
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "raw.db"
        api.ingest(corpus, recursive=True, db=db, redact=False)
        with Store.open(db) as st:
            rows = st.db.execute("SELECT text, tool_calls, parts, meta FROM messages").fetchall()
        texts = [c for row in rows for c in row if c]
        size = sum(len(t) for t in texts) / 1e6
        r = Redactor()
        t, _ = best(lambda: [r.text(x) for x in texts])

        def ingest(redact: bool) -> float:
            with tempfile.TemporaryDirectory() as dd, Store.open(Path(dd) / "s.db") as st:
                t0 = time.perf_counter()
                ingest_paths(st, [corpus], recursive=True, redact=redact)
                return time.perf_counter() - t0

        on = min(ingest(True) for _ in range(3))
        off = min(ingest(False) for _ in range(3))
    print("## speed\n")
    print_table(["what", "figure"], [
        ["stored text of the corpus (text, arguments, parts, meta)", f"{size:.1f} MB in {len(texts):,} strings"],
        ["redactor over it", f"{t:.3f} s = {size / t:.0f} MB/s"],
        ["ingest of the corpus, redaction off", f"{off:.2f} s"],
        ["ingest of the corpus, redaction on", f"{on:.2f} s ({(on / off - 1) * 100:+.0f}%)"],
    ])
    print()


def _plant(src: Path, dst: Path, seed: int) -> None:
    """A copy of a mini-swe-agent trajectory with a .env dump in its second tool output."""
    rng = random.Random(seed)
    alnum = string.ascii_letters + string.digits

    def rand(n: int) -> str:
        return "".join(rng.choice(alnum) for _ in range(n))

    dotenv = (f"\nOPENAI_API_KEY=sk-proj-{rand(74)}T3BlbkFJ{rand(74)}\nAWS_ACCESS_KEY_ID=AKIA{rand(16).upper()}\n"
              f"AWS_SECRET_ACCESS_KEY={rand(40)}\nDB_PASSWORD=Pq7{rand(10)}\nGITHUB_TOKEN=ghp_{rand(36)}\n")
    doc = json.loads(src.read_text())
    seen = 0
    for m in doc["messages"]:
        if m.get("role") == "user" and "<returncode>" in str(m.get("content")):
            seen += 1
            if seen == 2:
                m["content"] = str(m["content"]) + dotenv
                break
    dst.write_text(json.dumps(doc))


def embeddings(corpus: Path) -> None:
    runs = sorted(corpus.glob("swebench-pairs/*/mini-swe-agent_gemini-3-pro/*.traj.json"))
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for i, src in enumerate(runs):
            dst = Path(d) / src.name
            _plant(src, dst, i)
            out = {}
            for mode in (False, True):
                db = Path(d) / f"{src.stem}-{mode}.db"
                api.ingest(dst, db=db, redact=mode)
                with api.open_store(db) as ws:
                    sid = ws.sessions()[0]["id"]
                    drift = api.drift(sid, store=ws).to_dict()
                    facts = [s.text for s in suggest_facts([m.message for m in ws.store.messages(sid)], limit=5)]
                    fr = api.facts(sid, facts, store=ws).to_dict() if facts else {"facts": []}
                out[mode] = (drift, fr)
            (d0, f0), (d1, f1) = out[False], out[True]
            scores = [(a.get("score"), b.get("score")) for a, b in zip(d0["steps"], d1["steps"])]
            moved = [abs(a - b) for a, b in scores if a is not None and b is not None]
            states = [(a["state"], b["state"], a.get("score"), b.get("score"))
                      for x, y in zip(f0["facts"], f1["facts"]) for a, b in zip(x["timeline"], y["timeline"])]
            fmoved = [abs(a - b) for _, _, a, b in states if a is not None and b is not None]
            rows.append([src.parent.parent.name, str(len(d0["steps"])), str(len(moved)),
                         f"{max(moved, default=0)}", f"{d0['summary']['final_score']} → {d1['summary']['final_score']}",
                         f"{len(states)}", str(sum(a != b for a, b, _, _ in states)),
                         f"{max(fmoved, default=0):.4f}"])
    print("## embeddings: real mini-swe-agent runs with a .env dump planted in one tool output\n")
    print_table(["run", "steps", "judged", "max |Δ drift score|", "final score", "fact×step", "states changed",
                 "max |Δ fact cosine|"], rows)
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_option(ap)
    ap.add_argument("--skip-embeddings", action="store_true", help="skip the MiniLM drift/facts comparison")
    args = ap.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus}")
    precision(args.corpus)
    speed(args.corpus)
    if not args.skip_embeddings:
        embeddings(args.corpus)


if __name__ == "__main__":
    main()
