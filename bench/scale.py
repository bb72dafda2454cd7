"""Measured scaling of ``ctxf audit PATHS``: sessions/s by executor, with and without embedding rules,
and the driver's own cost per result.

    python bench/scale.py                               # sizes 1000,10000; embedding rules at 1000
    python bench/scale.py --sizes 1000 --modes serial,ray2
    python bench/scale.py --embed-sizes 0               # no embedding runs
    python bench/scale.py --quick                       # 200 sessions, replay rules only (smoke run)
    python bench/scale.py --repeat 3                    # the fastest of 3 runs per cell

For each size, ``bench/_scale_gen.py`` writes that many synthetic sessions (mixed formats,
realistic lengths; reused when already there with the same seed) under ``--work`` (default
/tmp/ctxf-scale, deleted at the end unless ``--keep``; never in the repository). Each run is
``ctxf audit DIR --config <bench config> --jsonl F --no-store --json`` as a subprocess of this
checkout, timed wall-clock from start to exit (Python and Ray start-up included): the JSON report
goes to a file, not rendered as a table. Once per size a serial run with ``--db`` (a fresh file)
measures what writing the store adds. Before ``ctxf audit`` had ``--executor``/``--jsonl``/
``--no-store``, the runs fall back to ``--workers N`` with a throw-away ``--db`` and say so.

Modes: serial; process2 (2 processes); ray1, ray2 (a local Ray with 1 or 2 CPUs).
Rules: "replay" = no_overflow, max_utilization, max_compactions, max_tool_output_share,
no_orphan_tool_results under a 16k o200k model with left truncation; "embed" adds
facts_must_persist (2 facts) and max_drift (MiniLM; slow on a small machine, hence only at
``--embed-sizes``).

The driver's cost per result is measured on the serial run's own results: unpickling one (what a
process or Ray driver receives), writing it as a JSONL line, the JUnit and Markdown writers over
the whole report divided by its sessions, and the store write from the ``--db`` run's extra time.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import pickle
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, print_table  # first: puts this checkout's package on sys.path

from _scale_gen import FACTS, generate

MODEL = """model_mappings:
  bench-16k:
    tokenizer: o200k_base
    context_limit: 16384
    reserved_output: 2048
    eviction_strategy: left_truncation
    preserve_system: true
"""
REPLAY = """audit:
  rules:
    no_overflow: {model: bench-16k}
    max_utilization: {threshold: 0.8, model: bench-16k}
    max_compactions: {max: 0}
    max_tool_output_share: {max: 0.8}
    no_orphan_tool_results: {}
"""
EMBED = (f"    facts_must_persist: {{facts: {json.dumps(list(FACTS))}, model: bench-16k}}\n"
         "    max_drift: {}\n")

# mode -> (cores it uses, arguments with --executor, arguments without it or None: not available)
MODES: dict[str, tuple[int, list[str], list[str] | None]] = {
    "serial": (1, ["--executor", "serial"], []),
    "process2": (2, ["--executor", "process", "--workers", "2"], ["--workers", "2"]),
    "ray1": (1, ["--executor", "ray", "--workers", "1"], None),
    "ray2": (2, ["--executor", "ray", "--workers", "2"], None),
}
TARGET_PER_CORE_HOUR = 10_000
TARGET_RAY2_SPEEDUP = 1.7


def ctxf_cmd() -> list[str]:
    return [sys.executable, "-m", "context_forensics"]


def ctxf_env() -> dict[str, str]:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="120")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def audit_features() -> set[str]:
    """Which of the new ``ctxf audit`` options this checkout has (read from its ``--help``)."""
    out = subprocess.run([*ctxf_cmd(), "audit", "--help"], capture_output=True, text=True, env=ctxf_env()).stdout
    return {f for f in ("--executor", "--jsonl", "--no-store", "--ray-address") if f in out}


def machine() -> str:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    try:
        ray = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        ray = "not installed"
    return (f"machine: {os.cpu_count()} CPUs ({usable} usable), {platform.machine()}, "
            f"Python {platform.python_version()}, Ray {ray}, {platform.platform()}")


def dataset(work: Path, n: int, seed: int) -> Path:
    """``work/n<size>`` with ``n`` generated sessions; reused when its stamp says same n and seed."""
    d = work / f"n{n}"
    stamp = work / f"n{n}.manifest.json"  # beside the folder: the audit must see logs only
    if d.is_dir() and stamp.is_file() and json.loads(stamp.read_text()).get("seed") == seed:
        return d
    shutil.rmtree(d, ignore_errors=True)
    t = time.perf_counter()
    man = generate(d, n, seed)
    dt = time.perf_counter() - t
    stamp.write_text(json.dumps({"seed": seed, "sessions": man.sessions, "files": man.files, "bytes": man.bytes}))
    print(f"generated {man.n_sessions:,} sessions in {man.n_files:,} files ({man.bytes / 1e6:,.0f} MB) "
          f"in {dt:.1f} s", file=sys.stderr)
    return d


def run_audit(data: Path, config: Path, mode: str, features: set[str], out: Path, *,
              db: Path | None = None, cache: Path | None = None) -> dict[str, Any]:
    """One timed ``ctxf audit`` subprocess; its sessions, seconds, exit code and report."""
    cores, new_args, old_args = MODES[mode]
    args = new_args if "--executor" in features else old_args
    if args is None:
        return {"skipped": "ctxf audit has no --executor yet"}
    if mode.startswith("ray") and importlib.util.find_spec("ray") is None:
        return {"skipped": "ray is not installed"}
    jsonl = out.with_suffix(".jsonl")
    report = out.with_suffix(".json")
    tmp_db = None
    cmd = [*ctxf_cmd(), "audit", str(data), "--config", str(config), *args, "--json"]
    if "--jsonl" in features:
        cmd += ["--jsonl", str(jsonl)]
    if db is not None:
        db.unlink(missing_ok=True)
        cmd += ["--db", str(db)]
    elif "--no-store" in features:
        # every run gets a store of its own (its embedding cache cold), unless ``cache`` names the
        # one a previous run filled (a warm run); --no-store keeps no session in it
        if cache is None:
            tmp_db = out.with_suffix(".db")
            tmp_db.unlink(missing_ok=True)
            cache_db = tmp_db
        else:
            cache_db = cache
        cmd += ["--db", str(cache_db), "--no-store"]
    else:  # before --no-store: a fresh throw-away store
        tmp_db = out.with_suffix(".db")
        tmp_db.unlink(missing_ok=True)
        cmd += ["--db", str(tmp_db)]
    print(f"run {mode} on {data.name}: {' '.join(cmd[3:])}", file=sys.stderr)
    load = os.getloadavg()[0]  # the machine may be shared: say how busy it was
    with report.open("w") as so, out.with_suffix(".stderr").open("w") as se:
        t = time.perf_counter()
        rc = subprocess.run(cmd, stdout=so, stderr=se, env=ctxf_env(), cwd=out.parent).returncode
        dt = time.perf_counter() - t
    if tmp_db is not None and cache is None and not str(out.name).startswith("embed-"):
        tmp_db.unlink(missing_ok=True)  # an embedding run's store is kept for its warm run
    try:
        rep = json.loads(report.read_text())
    except (OSError, json.JSONDecodeError):
        tail = out.with_suffix(".stderr").read_text()[-600:]
        return {"skipped": f"exit {rc}, no JSON report: {tail.strip()}"}
    n = rep.get("totals", {}).get("sessions", len(rep.get("sessions", ())))
    lines = None
    if jsonl.is_file():  # the per-session lines: the driver benchmark's input when the report omits them
        rows = [json.loads(line) for line in jsonl.open() if line.strip()]
        lines = len(rows)
        if not rep.get("sessions"):
            rep["sessions"] = rows
    return {"sessions": n, "jsonl_lines": lines, "seconds": dt, "rc": rc, "cores": cores, "report": rep, "load": load,
            "errors": len(rep.get("errors", ())) + rep.get("totals", {}).get("error", 0), "run": rep.get("run")}


def best_of(repeat: int, run: Any) -> dict[str, Any]:
    """The fastest of ``repeat`` runs (a shared machine only ever slows a run down)."""
    runs = [run() for _ in range(max(1, repeat))]
    done = [r for r in runs if "seconds" in r]
    return min(done, key=lambda r: r["seconds"]) if done else runs[-1]


def driver_costs(rep: dict[str, Any], work: Path) -> list[tuple[str, float]]:
    """Seconds per result for the driver-side steps, measured on this report's results."""
    from context_forensics.analysis.audit.reports import junit_xml, markdown

    sessions = rep["sessions"]
    n = len(sessions)
    blobs = [pickle.dumps(s) for s in sessions]
    out: list[tuple[str, float]] = []
    t = time.perf_counter()
    for b in blobs:
        pickle.loads(b)
    out.append(("unpickle a result (process/Ray transfer)", (time.perf_counter() - t) / n))
    t = time.perf_counter()
    with (work / "driver.jsonl").open("w") as f:
        for s in sessions:
            f.write(json.dumps(s) + "\n")
    out.append(("write its JSONL line", (time.perf_counter() - t) / n))
    t = time.perf_counter()
    json.dumps(rep)
    out.append(("its share of the --json report", (time.perf_counter() - t) / n))
    t = time.perf_counter()
    junit_xml(rep)
    out.append(("its share of the JUnit report", (time.perf_counter() - t) / n))
    t = time.perf_counter()
    markdown(rep)
    out.append(("its share of the Markdown report", (time.perf_counter() - t) / n))
    for key in ("timing", "driver"):  # if the audit reports its own driver time, show it too
        if isinstance(rep.get(key), dict):
            for k, v in rep[key].items():
                if isinstance(v, (int, float)):
                    out.append((f"audit's own {key}.{k} (as reported)", float(v)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000",
                    help="session counts for the replay-rule runs (default: 1000,10000)")
    ap.add_argument("--embed-sizes", default="1000",
                    help="session counts for the embedding-rule runs; 0 for none (default: 1000)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)} (default: all)")
    ap.add_argument("--embed-modes", default=None, help="modes for the embedding runs (default: --modes)")
    ap.add_argument("--no-db-run", action="store_true", help="skip the serial run with --db (store write cost)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell; the fastest is shown (default: 1)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default: 0)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/ctxf-scale"),
                    help="scratch folder (default: /tmp/ctxf-scale)")
    ap.add_argument("--keep", action="store_true", help="keep the generated data and reports")
    ap.add_argument("--quick", action="store_true", help="a smoke run: --sizes 200 --embed-sizes 0")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.embed_sizes = "200", "0"
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    embed_sizes = [int(s) for s in args.embed_sizes.split(",") if s.strip() and int(s) > 0]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    embed_modes = [m.strip() for m in (args.embed_modes or args.modes).split(",") if m.strip()]
    bad = [m for m in modes + embed_modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode {bad[0]!r}; modes: {', '.join(MODES)}")
    work = args.work.resolve()
    if ROOT in work.parents or work == ROOT:
        ap.error("--work must be outside the repository")
    work.mkdir(parents=True, exist_ok=True)
    features = audit_features()
    print(machine())
    print(f"ctxf audit options found: {', '.join(sorted(features)) or 'none of --executor/--jsonl/--no-store'}")
    configs = {"replay": work / "replay.yaml", "embed": work / "embed.yaml"}
    configs["replay"].write_text(MODEL + REPLAY)
    configs["embed"].write_text(MODEL + REPLAY + EMBED)

    plan = [(n, "replay", modes) for n in sizes] + [(n, "embed", embed_modes) for n in embed_sizes]
    rows: list[list[str]] = []
    notes: list[str] = []
    results: dict[tuple[int, str, str], dict[str, Any]] = {}
    costs: list[tuple[str, float]] = []
    store_cost: float | None = None
    try:
        for n, rules, run_modes in plan:
            data = dataset(work, n, args.seed)
            # serial first: every other mode's speed-up is measured against it
            for mode in sorted(run_modes, key=lambda m: m != "serial"):
                r = best_of(args.repeat, lambda: run_audit(data, configs[rules], mode, features,
                                                           work / f"{rules}-{n}-{mode}"))
                results[(n, rules, mode)] = r
                if "skipped" in r:
                    notes.append(f"{n} {rules} {mode}: not run ({r['skipped']})")
                    continue
                if r["sessions"] != n or r["errors"] or r["rc"] not in (0, 3):
                    notes.append(f"{n} {rules} {mode}: {r['sessions']} sessions of {n}, exit {r['rc']}, "
                                 f"{r['errors']} error rows (see {work}/{rules}-{n}-{mode}.stderr)")
                if r["jsonl_lines"] is not None and r["jsonl_lines"] != r["sessions"]:
                    notes.append(f"{n} {rules} {mode}: {r['jsonl_lines']} JSONL lines for {r['sessions']} sessions")
                base = results.get((n, rules, "serial"), {})
                speedup = f"{base['seconds'] / r['seconds']:.2f}x" if "seconds" in base else "-"
                rate = r["sessions"] / r["seconds"]
                rows.append([f"{n:,}", mode, rules, f"{r['sessions']:,}", f"{r['seconds']:.1f}", f"{rate:,.1f}",
                             f"{rate * 3600 / r['cores']:,.0f}", speedup, f"{r['load']:.1f}"])
                print(f"  {mode}: {r['seconds']:.1f} s", file=sys.stderr)
                if mode == "serial" and rules == "replay" and not costs:
                    costs = driver_costs(r["report"], work)
                r.pop("report", None)
                if rules == "embed":  # again on the store the cold run filled: nothing left to encode
                    out = work / f"{rules}-{n}-{mode}"
                    w = run_audit(data, configs[rules], mode, features, work / f"warm-{rules}-{n}-{mode}",
                                  cache=out.with_suffix(".db"))
                    if "seconds" in w:
                        wrate = w["sessions"] / w["seconds"]
                        enc = (w.get("run") or {}).get("vectors_cached")
                        rows.append([f"{n:,}", f"{mode} warm", rules, f"{w['sessions']:,}", f"{w['seconds']:.1f}",
                                     f"{wrate:,.1f}", f"{wrate * 3600 / w['cores']:,.0f}",
                                     f"{base['seconds'] / w['seconds']:.2f}x" if "seconds" in base else "-",
                                     f"{w['load']:.1f}"])
                        notes.append(f"{n} embed {mode} warm: {enc} vector(s) encoded (the cold run's store "
                                     f"as cache)")
                    out.with_suffix(".db").unlink(missing_ok=True)
            if rules == "replay" and not args.no_db_run and "serial" in run_modes \
                    and "seconds" in results.get((n, rules, "serial"), {}):
                r = best_of(args.repeat, lambda: run_audit(data, configs[rules], "serial", features, work / f"db-{n}",
                                                           db=work / f"store-{n}.db"))
                if "seconds" in r:
                    rate = r["sessions"] / r["seconds"]
                    rows.append([f"{n:,}", "serial --db", rules, f"{r['sessions']:,}", f"{r['seconds']:.1f}",
                                 f"{rate:,.1f}", f"{rate * 3600:,.0f}",
                                 f"{results[(n, rules, 'serial')]['seconds'] / r['seconds']:.2f}x", f"{r['load']:.1f}"])
                    if "--no-store" in features:
                        store_cost = (r["seconds"] - results[(n, rules, "serial")]["seconds"]) / r["sessions"]
                    (work / f"store-{n}.db").unlink(missing_ok=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print_table(["size", "mode", "rules", "sessions", "seconds", "sessions/s", "sessions/hour/core", "vs serial",
                 "load"],
                rows, left=3)
    print("seconds: wall clock of the ctxf audit process (start-up, listing, ingest into private stores, "
          "audit, JSON report); sessions/hour/core divides by the mode's cores (serial 1, process2 2, ray1 1, ray2 2); "
          "load: the 1-minute load average when the run started (other work on the machine slows every figure).")
    if embed_sizes:
        print(f"embedding rules run at {', '.join(f'{n:,}' for n in embed_sizes)} sessions only (MiniLM on CPU is "
              "slow).")
    if "--no-store" not in features:
        print("note: this ctxf audit has no --no-store: every run wrote a throw-away --db, so 'serial --db' "
              "equals serial and the store write cost is not separable.")
    for line in notes:
        print("note:", line)

    print("\ndriver's own cost per result (measured on the serial replay run's results):")
    for label, sec in costs:
        print(f"  {label:<45} {sec * 1e6:9.1f} µs")
    if store_cost is not None:
        print(f"  {'store write (serial --db minus --no-store)':<45} {store_cost * 1e6:9.1f} µs")
    else:
        print("  store write: not measured (needs --no-store and the --db run)")
    if costs:  # estimates: sums of the measured steps, not a measured driver
        per = sum(s for _, s in costs[:2])
        print(f"  => estimate: one driver core keeps up with about {1 / per:,.0f} results/s with --no-store "
              "(unpickle + JSONL line)")
        if store_cost is not None and store_cost > 0:
            print(f"     and about {1 / (per + store_cost):,.0f} results/s when it also writes the store (--db)")

    print("\ntargets:")
    replay = [(k, v) for k, v in results.items() if k[1] == "replay" and "seconds" in v]
    for (n, _, mode), r in sorted(replay, key=lambda kv: (kv[0][0], list(MODES).index(kv[0][2]))):
        per_core = r["sessions"] / r["seconds"] * 3600 / r["cores"]
        ok = "met" if per_core >= TARGET_PER_CORE_HOUR else "NOT met"
        print(f"  >= {TARGET_PER_CORE_HOUR:,} sessions/hour/core without embeddings, {n:,} {mode}: {per_core:,.0f} -> "
              f"{ok}")
    s, r2 = results.get((10_000, "replay", "serial"), {}), results.get((10_000, "replay", "ray2"), {})
    if "seconds" in s and "seconds" in r2:
        sp = s["seconds"] / r2["seconds"]
        print(f"  Ray 2 CPUs >= {TARGET_RAY2_SPEEDUP}x serial on 10,000 sessions: {sp:.2f}x -> "
              f"{'met' if sp >= TARGET_RAY2_SPEEDUP else 'NOT met'}")
    else:
        print(f"  Ray 2 CPUs >= {TARGET_RAY2_SPEEDUP}x serial on 10,000 sessions: not measured in this run")
    if args.keep:
        print(f"\ndata and reports kept in {work}")


if __name__ == "__main__":
    main()
