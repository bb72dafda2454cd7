"""Audit throughput: sessions audited per minute, with and without the embedding rules, 1 and 2 workers.

    python bench/audit.py                    # the corpus (../shared/corpus), all sessions
    python bench/audit.py --corpus PATH

Each configuration runs in a fresh store copy, so replay snapshots and embedding caches from one
run do not speed up the next ("cold"); a second run on the same store is reported as "warm".
Embedding rules: facts_must_persist (with three facts) and max_drift; without them the audit
only replays (utilization, overflow, compactions, tool-output share, orphan results).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import add_corpus_option, print_table  # first: puts this checkout's package on sys.path

from context_forensics.analysis.audit import audit_many
from context_forensics.config.audit_rules import parse_audit
from context_forensics.config.settings import Config
from context_forensics.store.ingest import ingest_paths
from context_forensics.store.db import Store

REPLAY_RULES = {"max_utilization": {}, "no_overflow": {}, "max_compactions": {"max": 1},
                "max_tool_output_share": {}, "no_orphan_tool_results": {}}
EMBED_RULES = {**REPLAY_RULES, "max_drift": {},
               "facts_must_persist": {"facts": ["Never modify the tests.", "Run the test suite before finishing.",
                                                "Keep the public API unchanged."]}}


def run(db: Path, ids: list[str], rules_raw: dict, workers: int) -> float:
    rules = parse_audit({"rules": rules_raw}, "bench")
    t = time.perf_counter()
    audit_many(str(db), ids, Config(), rules, workers=workers)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_option(ap)
    ap.add_argument("--limit", type=int, default=0, help="audit at most this many sessions (0: all)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        base = Path(d) / "base.db"
        with Store.open(base) as store:
            ingest_paths(store, [args.corpus], recursive=True)
            ids = [s["id"] for s in store.sessions() if s["step_count"] > 0]
        if args.limit:
            ids = ids[: args.limit]
        rows = []
        for label, rules in (("replay rules only", REPLAY_RULES), ("with embedding rules", EMBED_RULES)):
            for workers in (1, 2):
                db = Path(d) / f"run-{len(rows)}.db"
                shutil.copy(base, db)
                cold = run(db, ids, rules, workers)
                warm = run(db, ids, rules, workers)
                rows.append((label, workers, len(ids), cold, warm))
                print(f"done {label} × {workers}", file=sys.stderr)
    head = ["rules", "workers", "sessions", "cold s", "cold sessions/min", "warm s", "warm sessions/min"]
    table = [[label, str(w), str(n), f"{c:.1f}", f"{n / c * 60:,.0f}", f"{wa:.1f}", f"{n / wa * 60:,.0f}"]
             for label, w, n, c, wa in rows]
    print_table(head, table)


if __name__ == "__main__":
    main()
