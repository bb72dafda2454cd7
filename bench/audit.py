"""Audit throughput: sessions audited per minute, with and without the embedding rules, 1 and 2 workers.

    python bench/audit.py                    # the corpus (../shared/corpus), all sessions
    python bench/audit.py --corpus PATH

Each configuration runs in a fresh store copy, so replay snapshots and embedding caches from one
run do not speed up the next ("cold"); a second run on the same store is reported as "warm".
Embedding rules: facts_must_persist (with three facts) and max_drift; without them the audit
only replays (utilization, overflow, compactions, tool-output share, orphan results).

    python bench/audit.py cold [--checkout PATH] [--corpus PATH] [--baseline FILE | --no-baseline] [--json]

Issue 17: the same two rule sets as `ctxf audit --db <copy of a store the corpus was ingested
into> --config RULES --json` subprocesses of ``--checkout`` (see bench/_cold.py), serial, each on
a fresh copy (no embedding cached): sessions per minute from spawn to exit (start-up and model
load included), against "today" (``--baseline``, bench/baselines/issue17_today.json: a
worktree of d935ccd). Target: >= 4x today's sessions/min with the embedding rules.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import add_corpus_option, print_table  # first: puts this checkout's package on sys.path

import _cold
from context_forensics.analysis.audit import audit_many
from context_forensics.config.audit_rules import parse_audit
from context_forensics.config.settings import Config
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths

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


# ---------------------------------------------------------------------------------------------
# Issue 17's audit target as subprocesses (``python bench/audit.py cold``).

TARGET_AUDIT_SPEEDUP = 4.0
BASELINE = Path(__file__).resolve().parent / "baselines" / "issue17_today.json"


def _config(path: Path, rules: dict) -> Path:
    import json

    path.write_text("audit:\n  rules:\n" + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in rules.items()))
    return path


def run_cold(checkout: Path, corpus: Path) -> dict:
    """`ctxf ingest` of the corpus into a store, then per rule set a copy of that store (no embedding
    cached) audited by `ctxf audit --db COPY --config RULES --json` (serial), a subprocess of ``checkout``."""
    pkg = _cold.check_checkout(checkout)
    serial = ["--executor", "serial"] if _cold.has_option(checkout, ["audit"], "--executor") else []
    out: dict = {"checkout": str(checkout), "commit": _cold.commit_of(checkout), "package": pkg,
                 "corpus": str(corpus), "cpus": os.cpu_count(), "loadavg_start": _cold.loadavg(), "runs": {}}
    with tempfile.TemporaryDirectory() as d:
        base = Path(d) / "base.db"
        ing = _cold.ctxf(checkout, ["ingest", str(corpus), "--recursive", "--db", str(base), "--json"])
        if ing["rc"] not in (0, 1):
            sys.exit(f"ingest of {corpus} failed: {ing['stderr_tail']}")
        out["ingest"] = {"wall_s": ing["wall_s"], "peak_rss_mb": ing["peak_rss_mb"], "rc": ing["rc"]}
        for key, rules in (("replay_rules", REPLAY_RULES), ("embedding_rules", EMBED_RULES)):
            db = Path(d) / f"{key}.db"
            shutil.copy(base, db)
            r = _cold.ctxf(checkout, ["audit", *serial, "--db", str(db), "--config",
                                      str(_config(Path(d) / f"{key}.yaml", rules)), "--json"])
            js = r.pop("json") or {}
            sessions = js.get("sessions")
            n = len(sessions) if isinstance(sessions, list) else (js.get("summary") or {}).get("sessions")
            r.update({"sessions": n, "loadavg": _cold.loadavg(),
                      "sessions_per_min": round(n / r["wall_s"] * 60, 1) if n else None})
            if r["rc"] not in (0, 3):
                r["error"] = " | ".join(r["stderr_tail"]) or f"exit {r['rc']}"
            out["runs"][key] = r
            print(f"  audit, {key}: {n} sessions, {r['wall_s']} s, {r['peak_rss_mb']} MB, exit {r['rc']}, "
                  f"load {r['loadavg']}", file=sys.stderr)
    out["loadavg_end"] = _cold.loadavg()
    return out


def main_cold(argv: list[str]) -> None:
    import json

    ap = argparse.ArgumentParser(prog="bench/audit.py cold", description=run_cold.__doc__)
    _cold.add_checkout_option(ap)
    add_corpus_option(ap)
    ap.add_argument("--baseline", type=Path, default=BASELINE,
                    help="a --json of an earlier run (the 'today' figures; default: %(default)s, when present)")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    r = run_cold(args.checkout, args.corpus)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    base = None
    if not args.no_baseline and args.baseline.is_file():
        whole = json.loads(args.baseline.read_text())
        base = {**whole.get("audit", whole), "recorded": whole.get("recorded", "?")}
    b = (base or {}).get("runs", {})
    print(f"cold audits of {r['checkout']} ({r['commit']}), {r['corpus']}, serial, {r['cpus']} CPUs; load average "
          f"{r['loadavg_start']} -> {r['loadavg_end']}; ingest {r['ingest']['wall_s']} s (not in the audits)"
          + (f"; today = {base['commit']} (recorded {base['recorded']})" if base else ""))
    head = ["rules", "sessions", "cold s", "sessions/min", "peak MB", "today sessions/min", "x"]
    rows = []
    for key, row in r["runs"].items():
        t = b.get(key)
        x = (f"{row['sessions_per_min'] / t['sessions_per_min']:.2f}"
             if t and row["sessions_per_min"] and t.get("sessions_per_min") else "n/a")
        rows.append([key.replace("_", " "), str(row["sessions"]), f"{row['wall_s']:.1f}", str(row["sessions_per_min"]),
                     f"{row['peak_rss_mb']:.0f}", str(t["sessions_per_min"]) if t else "n/a", x])
    print_table(head, rows)
    row, t = r["runs"]["embedding_rules"], b.get("embedding_rules")
    x = (row["sessions_per_min"] / t["sessions_per_min"]
         if t and row["sessions_per_min"] and t.get("sessions_per_min") else None)
    print(f"\ntargets (issue 17):\n  audit with embedding rules, cold: >= {TARGET_AUDIT_SPEEDUP:g}x today's "
          f"sessions/min ({'n/a' if x is None else f'{x:.2f}x'}) -> "
          f"{_cold.verdict(None if x is None else x >= TARGET_AUDIT_SPEEDUP)}")


def main() -> None:
    if sys.argv[1:2] == ["cold"]:
        main_cold(sys.argv[2:])
        return
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
