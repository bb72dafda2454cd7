"""Issue 33's cost ratios: each figure against a cheaper command of the same run, never a timed test.

    python bench/ratios.py [--checkout PATH] [--corpus PATH] [--quick] [--json FILE]

Every command is a cold ``ctxf`` subprocess of ``--checkout`` (see bench/_cold.py: wall seconds
from spawn to exit, the child's peak RSS, an empty working folder, so no forensics_config.yaml:
the built-in defaults; ``CTXF_CONFIG`` is unset for the children), all with ``--json``:

- ``ctxf ingest -r CORPUS --db EMPTY`` (timed; the store it fills is the template), and
  ``ctxf audit CORPUS --db EMPTY`` as a user runs it (default rules, default executor, the
  sessions ingested on the fly and kept). Target: audit <= 4x ingest; p95 per session < 1 s;
  peak RSS < 500 MB. The p95 is the audit's own (``timing`` in ``audit --json``: each session's
  rules, wall seconds in the process that ran them; reading the files not included).
- per corpus session of more than 100 model calls (``step_count`` in ``ctxf sessions --json``):
  ``ctxf explain SESSION`` against ``ctxf replay SESSION --no-cache``. Target: <= 3x on every one.
- on the longest Claude Code session (format claude_code, most steps): ``ctxf facts show SESSION
  --fact ...`` and ``ctxf drift SESSION`` against its replay. Target: <= 2x each. No fact is
  configured, so the facts are the ones explain tracks by default: ``ctxf facts suggest SESSION
  --limit 5`` (run beforehand on its own copy, not in the ratio); when it proposes none, the three
  facts of bench/audit.py. Drift runs twice: as is (the default goal; on a session whose first
  message is too short a goal it judges nothing, state no_goal, and loads no model) and with
  ``--goal`` the session's title (its first user message, as ``ctxf sessions`` lists it).

Each timed command but ingest and audit gets its own copy of the template store (nothing cached:
no replay snapshot, embedding or token count of one command helps another). ``--quick``: explain
only on the longest Claude Code session.

**The floor.** Each command that embeds (audit, explain, facts, drift) runs a second time through
bench/_free_encoder.py: the same run with MiniLM's forward pass free (everything else done: model
load, tokenizing, the cache, every analysis). Its time over the base is the ratio the command
would have if encoding cost nothing (``floor``); the real time minus it is what the forward passes
cost, and ``needed`` says how many times faster they would have to run for the target
((real - free) / (target x base - free); "unreachable" when the floor alone is over the target).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import add_corpus_option, print_table  # first: puts this checkout's package on sys.path

import _cold

FREE_ENCODER = Path(__file__).resolve().parent / "_free_encoder.py"
MAX_AUDIT_X, MAX_EXPLAIN_X, MAX_FACTS_DRIFT_X = 4.0, 3.0, 2.0
MAX_P95_S, MAX_RSS_MB, MIN_CALLS = 1.0, 500.0, 100
SUGGESTED = 5  # explain tracks this many suggested facts when none is given (analysis/explain/engine.py)
DRIFT_ROWS = (("facts_show", "facts"), ("drift", "drift"), ("drift_goal", "drift --goal"))
FALLBACK_FACTS = ["Never modify the tests.", "Run the test suite before finishing.", "Keep the public API unchanged."]


class Runner:
    """Runs ``ctxf ARGS --db STORE --json`` and keeps each run (command, figures, error)."""

    def __init__(self, checkout: Path, tmp: Path) -> None:
        self.checkout, self.tmp, self.n, self.failures = checkout, tmp, 0, []

    def run(self, label: str, args: list[str], *, template: Path | None = None, ok: tuple[int, ...] = (0,),
            keep: Path | None = None, free: bool = False) -> dict[str, Any]:
        """On a copy of ``template`` (or an empty store, ``keep`` when given, else thrown away).
        ``free``: through bench/_free_encoder.py (MiniLM's forward pass free: the floor)."""
        self.n += 1
        db = keep or self.tmp / f"run-{self.n}.db"
        if template is not None:
            shutil.copy(template, db)
        full = [*args, "--db", str(db), "--json"]
        r = _cold.ctxf(self.checkout, full, entry=[str(FREE_ENCODER)] if free else None)
        r["command"] = ("bench/_free_encoder.py " if free else "ctxf ") + shlex.join(full)
        if free:
            r["asked"] = _asked(r["stderr_tail"])
            label += " (encoder free)"
        r["ok"] = r["rc"] in ok and r["json"] is not None
        if not r["ok"]:
            r["error"] = " | ".join(r["stderr_tail"]) or f"exit {r['rc']}, no JSON on stdout"
            self.failures.append(r)
        if keep is None:
            db.unlink(missing_ok=True)
        print(f"  {label}: {r['wall_s']} s, {r['peak_rss_mb']} MB, exit {r['rc']}, load {_cold.loadavg()}",
              file=sys.stderr)
        return r


def ratio(cmd: dict, base: dict, limit: float, free: dict | None = None) -> dict[str, Any]:
    """``cmd`` against ``base``, and with ``free`` (the same command, encoder free) the floor and the
    encoder speed-up the target needs."""
    both = cmd["ok"] and base["ok"] and base["wall_s"] > 0
    x = round(cmd["wall_s"] / base["wall_s"], 2) if both else None
    out: dict[str, Any] = {"x": x, "target": limit, "met": None if x is None else x <= limit}
    if free is not None:
        out["free"] = {**figures(free), "asked": free.get("asked")}
        ok = both and free["ok"]
        out["floor_x"] = round(free["wall_s"] / base["wall_s"], 2) if ok else None
        encoding = cmd["wall_s"] - free["wall_s"]  # what the forward passes cost in the real run
        budget = limit * base["wall_s"] - free["wall_s"]  # what the target leaves them
        out["encoding_s"] = round(encoding, 2) if ok else None
        out["budget_s"] = round(budget, 2) if ok else None
        out["needed"] = None if not ok else 1.0 if x is not None and x <= limit else (
            round(encoding / budget, 1) if budget > 0 else "unreachable")
    return out


def _asked(tail: list[str]) -> dict[str, int] | None:
    """``free encoder: N texts, W wordpieces, C calls`` (bench/_free_encoder.py's last line) as numbers."""
    for line in reversed(tail):
        m = re.match(r"free encoder: (\d+) texts, (\d+) wordpieces, (\d+) calls", line)
        if m:
            return {"texts": int(m[1]), "wordpieces": int(m[2]), "calls": int(m[3])}
    return None


def figures(r: dict) -> dict[str, Any]:
    return {k: r[k] for k in ("command", "wall_s", "peak_rss_mb", "rc", "ok", "error") if k in r}


def measure(checkout: Path, corpus: Path, quick: bool) -> dict[str, Any]:
    pkg = _cold.check_checkout(checkout)
    out: dict[str, Any] = {"checkout": str(checkout), "commit": _cold.commit_of(checkout), "package": pkg,
                           "corpus": str(corpus), "cpus": os.cpu_count(), "quick": quick,
                           "loadavg_start": _cold.loadavg()}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        run = Runner(checkout, Path(d))
        template = Path(d) / "template.db"
        ing = run.run("ingest", ["ingest", "-r", str(corpus)], ok=(0, 1), keep=template)
        if not ing["ok"]:
            sys.exit(f"{ing['command']} failed: {ing['error']}")
        # audit DIR as a user runs it: an empty store, the default rules and executor
        aud = run.run("audit", ["audit", str(corpus)], ok=(0, 3))
        aud_free = run.run("audit", ["audit", str(corpus)], ok=(0, 3), free=True)
        js = aud.get("json") or {}
        n = len(js.get("sessions") or [])
        worker = ((js.get("run") or {}).get("worker_seconds") or {}).get("audit")
        out["audit"] = {
            "ingest": figures(ing), "audit": figures(aud), "sessions": n, "executor": js.get("executor"),
            "totals": js.get("totals"), **ratio(aud, ing, MAX_AUDIT_X, aud_free),
            "timing": js.get("timing"),
            "p95_session_s": (js.get("timing") or {}).get("p95_seconds"),
            "p95_met": None if not js.get("timing") else js["timing"]["p95_seconds"] < MAX_P95_S,
            "mean_session_s": round(aud["wall_s"] / n, 3) if n else None,
            "mean_session_audit_only_s": round(worker / n, 3) if n and worker is not None else None,
            "rss_met": aud["peak_rss_mb"] < MAX_RSS_MB if aud["ok"] else None}

        listing = run.run("sessions", ["sessions"], template=template)
        if not listing["ok"]:
            sys.exit(f"{listing['command']} failed: {listing['error']}")
        sessions = listing["json"]["sessions"]
        cc = [s for s in sessions if s["format"] == "claude_code"]
        longest_cc = max(cc, key=lambda s: s["step_count"]) if cc else None
        big = sorted((s for s in sessions if s["step_count"] > MIN_CALLS), key=lambda s: -s["step_count"])
        chosen = [longest_cc] if quick and longest_cc else big
        replays: dict[str, dict] = {}

        def replay_of(s: dict) -> dict:
            if s["id"] not in replays:
                replays[s["id"]] = run.run(f"replay {s['id']} ({s['step_count']} steps)",
                                           ["replay", s["id"], "--no-cache"], template=template)
            return replays[s["id"]]

        out["explain"] = []
        for s in chosen:
            rep = replay_of(s)
            exp = run.run(f"explain {s['id']}", ["explain", s["id"]], template=template)
            exp_free = run.run(f"explain {s['id']}", ["explain", s["id"]], template=template, free=True)
            out["explain"].append({"session": s["id"], "format": s["format"], "steps": s["step_count"],
                                   "source": s["source"], "verdict": (exp.get("json") or {}).get("verdict"),
                                   "explain": figures(exp), "replay": figures(rep),
                                   **ratio(exp, rep, MAX_EXPLAIN_X, exp_free)})

        out["facts_drift"] = None
        if longest_cc:
            s = longest_cc
            sug = run.run(f"facts suggest {s['id']} (not timed in a ratio)",
                          ["facts", "suggest", s["id"], "--limit", str(SUGGESTED)], template=template)
            facts = [f["text"] for f in (sug.get("json") or {}).get("suggestions", [])]
            source = ("ctxf facts suggest --limit 5 (explain's default)" if facts
                      else "bench/audit.py's three (none suggested)")
            facts = facts or FALLBACK_FACTS
            rep = replay_of(s)
            fargs = ["facts", "show", s["id"], *[a for f in facts for a in ("--fact", f)]]
            fa = run.run(f"facts {s['id']}", fargs, template=template)
            fa_free = run.run(f"facts {s['id']}", fargs, template=template, free=True)
            dr = run.run(f"drift {s['id']}", ["drift", s["id"]], template=template)
            dr_free = run.run(f"drift {s['id']}", ["drift", s["id"]], template=template, free=True)
            goal = s.get("title") or ""
            dg = run.run(f"drift --goal {s['id']}", ["drift", s["id"], "--goal", goal], template=template)
            dg_free = run.run(f"drift --goal {s['id']}", ["drift", s["id"], "--goal", goal], template=template,
                              free=True)
            out["facts_drift"] = {"session": s["id"], "steps": s["step_count"], "source": s["source"],
                                  "facts": facts, "facts_from": source, "suggest": figures(sug),
                                  "replay": figures(rep),
                                  "facts_show": {**figures(fa), **ratio(fa, rep, MAX_FACTS_DRIFT_X, fa_free)},
                                  "drift": {**figures(dr), **ratio(dr, rep, MAX_FACTS_DRIFT_X, dr_free),
                                            "state": (dr.get("json") or {}).get("state")},
                                  "drift_goal": {**figures(dg), **ratio(dg, rep, MAX_FACTS_DRIFT_X, dg_free),
                                                 "goal": goal, "state": (dg.get("json") or {}).get("state")}}
        out["failures"] = [figures(f) for f in run.failures]
    out["loadavg_end"] = _cold.loadavg()
    out["bench_s"] = round(time.perf_counter() - t0, 1)
    return out


def _x(r: dict) -> str:
    return "n/a" if r["x"] is None else f"{r['x']:.2f}x"


def _all(rows: list[dict]) -> bool | None:
    if not rows or any(r["met"] is None for r in rows):
        return None
    return all(r["met"] for r in rows)


def report(r: dict) -> None:
    a = r["audit"]
    print(f"issue 33 ratios: {r['checkout']} ({r['commit']}), {r['corpus']}, {r['cpus']} CPUs, load average "
          f"{r['loadavg_start']} -> {r['loadavg_end']}; cold subprocesses, one run each, fresh store per command\n")
    head = ["figure", "session", "steps", "cmd s", "cmd MB", "base", "base s", "base MB", "ratio", "target", "verdict"]
    rows = [["audit DIR", f"corpus ({a['sessions']} sessions)", "-", f"{a['audit']['wall_s']:.2f}",
             f"{a['audit']['peak_rss_mb']:.0f}", "ingest -r DIR", f"{a['ingest']['wall_s']:.2f}",
             f"{a['ingest']['peak_rss_mb']:.0f}", _x(a), f"<= {a['target']:g}x", _cold.verdict(a["met"])]]
    for e in r["explain"]:
        rows.append(["explain", f"{e['session']} {e['format']}", str(e["steps"]), f"{e['explain']['wall_s']:.2f}",
                     f"{e['explain']['peak_rss_mb']:.0f}", "replay", f"{e['replay']['wall_s']:.2f}",
                     f"{e['replay']['peak_rss_mb']:.0f}", _x(e), f"<= {e['target']:g}x", _cold.verdict(e["met"])])
    fd = r["facts_drift"]
    if fd:
        for key, name in DRIFT_ROWS:
            c = fd[key]
            rows.append([name, f"{fd['session']} claude_code", str(fd["steps"]), f"{c['wall_s']:.2f}",
                         f"{c['peak_rss_mb']:.0f}", "replay", f"{fd['replay']['wall_s']:.2f}",
                         f"{fd['replay']['peak_rss_mb']:.0f}", _x(c), f"<= {c['target']:g}x", _cold.verdict(c["met"])])
    print_table(head, rows, left=2)

    print("\nthe floor: each command again with MiniLM's forward pass free (bench/_free_encoder.py); "
          "needed: how many times\nfaster the forward passes must run for the target, (cmd - free) / "
          "(target x base - free)\n")
    head = ["figure", "session", "cmd s", "free s", "base s", "ratio", "floor", "target", "texts", "wordpieces",
            "encoding s", "budget s", "needed"]
    floor = [("audit DIR", "corpus", a, a["audit"]["wall_s"], a["ingest"])]
    floor += [("explain", e["session"], e, e["explain"]["wall_s"], e["replay"]) for e in r["explain"]]
    if fd:
        floor += [(name, fd["session"], fd[key], fd[key]["wall_s"], fd["replay"]) for key, name in DRIFT_ROWS]
    rows = []
    for name, sess, c, cmd_s, base in floor:
        if "free" not in c:
            continue
        asked = c["free"].get("asked") or {}
        need = c.get("needed")
        rows.append([name, sess, f"{cmd_s:.2f}", f"{c['free']['wall_s']:.2f}", f"{base['wall_s']:.2f}", _x(c),
                     "n/a" if c.get("floor_x") is None else f"{c['floor_x']:.2f}x", f"<= {c['target']:g}x",
                     str(asked.get("texts", "?")), str(asked.get("wordpieces", "?")), str(c.get("encoding_s")),
                     str(c.get("budget_s")), "n/a" if need is None else need if isinstance(need, str)
                     else "met" if need <= 1 else f"{need:g}x"])
    print_table(head, rows, left=2)

    ex = r["explain"]
    n_met = sum(1 for e in ex if e["met"])
    print(f"\naudit: executor {(a['executor'] or {}).get('name', '?')}, exit {a['audit']['rc']}; peak RSS is the "
          "largest single process of the audit")
    tm = a.get("timing") or {}
    print(f"  per session (the audit's timing: rules only): median {tm.get('median_seconds')} s, p95 "
          f"{tm.get('p95_seconds')} s, slowest {tm.get('max_seconds')} s ({tm.get('slowest')}); mean "
          f"{a['mean_session_s']} s/session from spawn to exit (ingest and model load included)")
    if fd:
        print(f"facts: {fd['facts_from']}: " + "; ".join(repr(f) for f in fd["facts"]))
        print(f"drift: default goal -> state {fd['drift']['state']}; with --goal (the session's title, its first "
              f"user message as `ctxf sessions` lists it) -> state {fd['drift_goal']['state']}")
    print(f"\ntargets (issue 33):\n"
          f"  audit DIR <= {MAX_AUDIT_X:g}x ingest -r DIR ({_x(a)}) -> {_cold.verdict(a['met'])}\n"
          f"  audit p95 per session < {MAX_P95_S:g} s ({a['p95_session_s']} s) -> {_cold.verdict(a['p95_met'])}\n"
          f"  audit peak RSS < {MAX_RSS_MB:g} MB ({a['audit']['peak_rss_mb']:.0f} MB) -> "
          f"{_cold.verdict(a['rss_met'])}\n  explain <= {MAX_EXPLAIN_X:g}x replay on every session > {MIN_CALLS} calls "
          f"({n_met}/{len(ex)} met{', --quick: longest Claude Code session only' if r['quick'] else ''}) "
          f"-> {_cold.verdict(_all(ex))}")
    if fd:
        for key, name in DRIFT_ROWS:
            print(f"  {name} <= {MAX_FACTS_DRIFT_X:g}x replay on {fd['session']} ({_x(fd[key])}) "
                  f"-> {_cold.verdict(fd[key]['met'])}")
    else:
        print("  facts / drift: n/a (no claude_code session in the corpus)")
    for f in r["failures"]:
        print(f"\nFAILED (exit {f['rc']}): {f['command']}\n  {f['error']}")
    print(f"\nbench took {r['bench_s']:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _cold.add_checkout_option(ap)
    add_corpus_option(ap)
    ap.add_argument("--quick", action="store_true", help="explain only on the longest Claude Code session")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE")
    args = ap.parse_args()
    os.environ.pop("CTXF_CONFIG", None)  # the children's config: the built-in defaults
    r = measure(args.checkout, args.corpus.resolve(), args.quick)
    report(r)
    if args.json:
        args.json.write_text(json.dumps(r, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
