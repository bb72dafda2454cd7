"""Fuzz ctxf's importers and ingest: mutated real logs, a table of what escaped.

    .venv/bin/python -m fuzz --minutes 20                      # every importer, round-robin
    .venv/bin/python -m fuzz --minutes 10 --jobs 1 --cli       # and `ctxf ingest` as a subprocess
    .venv/bin/python fuzz/run.py --minutes 5 --importer llm_logs --seed 7
    .venv/bin/python fuzz/run.py --inputs 200 --quick          # what tests/test_fuzz.py runs
    .venv/bin/python fuzz/run.py --replay fuzz/out/codex/17-RecursionError/x.jsonl --importer codex
    .venv/bin/python fuzz/run.py --importer codex --seed 0 --only 17   # rebuild input 17 alone

Prints, per importer, the inputs tried, the escapes by exception type, hangs, out-of-memory
and crashes, the highest peak resident memory of one input and how many passed ``--rss-mb``,
the files failed whole for their layout, then each distinct escape (importer, where it was raised) with its saved input
and the one-line command that replays it. Escaping inputs go to ``fuzz/out/<importer>/``
(gitignored) with a ``repro.txt``; ``fuzz/out/report.md`` and ``summary.json`` hold the run.
Exit status: 0 when nothing escaped, 1 otherwise, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz import engine  # noqa: E402
from fuzz.seeds import DEFAULT_CORPUS  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, help="stop after this many minutes")
    p.add_argument("--inputs", type=int, help="inputs per importer (stop when every importer has had them)")
    p.add_argument("--importer", action="append", help="only this importer (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS),
                   help=f"folder of real logs used as seeds besides the repo's (default {DEFAULT_CORPUS}; 'none')")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="CPU seconds per input before it is a hang (or 6 times as many of wall time, for a process "
                        "stuck without working; default 20)")
    p.add_argument("--mem-mb", type=int, default=1536,
                   help="address space an input may take beyond what its worker holds (default 1536)")
    p.add_argument("--rss-mb", type=int, default=500,
                   help="report an input whose reading peaks above this resident memory (default 500)")
    p.add_argument("--cli", action="store_true",
                   help="also run `ctxf ingest` on each input as a subprocess: its exit code, no traceback or "
                        "'internal error' on stderr, its peak memory")
    p.add_argument("--max-hangs", type=int, help="stop fuzzing an importer after this many hangs")
    p.add_argument("--quick", action="store_true",
                   help="smaller inputs (JSONL windows of 128 KB, strings up to 1 MB), as the test suite runs")
    p.add_argument("--out", default=str(engine.OUT), help="where escaping inputs are saved (default fuzz/out)")
    p.add_argument("--json", help="also write the summary as JSON to this file")
    p.add_argument("--only", type=int, help="rebuild and check only input INDEX (of each --importer)")
    p.add_argument("--replay", help="check one saved input (a file or a folder) with the --importer given")
    args = p.parse_args(argv)
    if args.replay is None and args.only is None and args.minutes is None and args.inputs is None:
        p.error("give --minutes or --inputs (or --replay / --only)")
    if (args.replay or args.only is not None) and not args.importer:
        p.error("--replay and --only need --importer")
    from context_forensics import importers

    unknown = [n for n in args.importer or [] if n not in importers.format_names()]
    if unknown:
        p.error(f"unknown importer {', '.join(unknown)}; known: {', '.join(importers.format_names())}")
    return args


def options(args: argparse.Namespace) -> engine.Options:
    corpus = None if args.corpus.lower() == "none" else Path(args.corpus)
    if corpus is not None and not corpus.is_dir():
        if args.corpus != str(DEFAULT_CORPUS):
            sys.exit(f"fuzz/run.py: error: --corpus {args.corpus}: no such folder")
        print(f"note: no corpus at {corpus}; seeds from sample_logs/ and tests/fixtures only", file=sys.stderr)
        corpus = None
    opts = engine.Options(seed=args.seed, minutes=args.minutes, per_importer=args.inputs, importers=args.importer,
                          corpus=corpus, jobs=args.jobs, timeout=args.timeout, mem_mb=args.mem_mb,
                          out=Path(args.out), max_hangs=args.max_hangs, only=args.only, rss_mb=args.rss_mb,
                          cli=args.cli)
    if args.quick:
        opts.window_bytes, opts.string_cap = 128 << 10, 1 << 20
    if args.replay or args.only is not None:
        opts.jobs = 1
    return opts


def table(res: engine.Run) -> str:
    over = f">{res.opts.rss_mb}MB"
    rows = [("importer", "inputs", "escaping", "escapes by type", "hangs", "oom", "crash", "peak MB", over,
             "layout")]
    total = engine.Stats()
    for name, st in res.stats.items():
        by_type = ", ".join(f"{t} {n}" for t, n in st.escapes.most_common()) or "-"
        peak = max(st.peak_rss_mb, st.cli_peak_rss_mb)
        rows.append((name, str(st.inputs), str(st.escaping), by_type + (f" ({st.stopped})" if st.stopped else ""),
                     str(st.hangs), str(st.oom), str(st.crashes), str(peak) if peak > 0 else "-", str(st.over_rss),
                     str(st.layout)))
        total.inputs += st.inputs
        total.escaping += st.escaping
        total.escapes.update(st.escapes)
        total.hangs += st.hangs
        total.oom += st.oom
        total.crashes += st.crashes
        total.peak_rss_mb = max(total.peak_rss_mb, peak)
        total.over_rss += st.over_rss
        total.layout += st.layout
    rows.append(("total", str(total.inputs), str(total.escaping), str(sum(total.escapes.values())),
                 str(total.hangs), str(total.oom), str(total.crashes), str(total.peak_rss_mb), str(total.over_rss),
                 str(total.layout)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    widths[3] = min(widths[3], 70)
    out = []
    for i, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])] + [c.ljust(w) if j == 2 else c.rjust(w)
                                           for j, (c, w) in enumerate(zip(r[1:], widths[1:]))]
        out.append("  ".join(cells).rstrip())
        if i == 0 or i == len(rows) - 2:
            out.append("  ".join("-" * w for w in widths))
    out.append("peak MB: the highest peak resident memory of reading one input (the worker's VmHWM"
               + (", and the `ctxf ingest` subprocess's" if res.opts.cli else "")
               + "); layout: files failed whole for their layout, not for a record")
    confirmed = sum(st.confirmed for st in res.stats.values())
    if confirmed:
        out.append(f"{over}: decided by a fresh `ctxf ingest` of the input ({confirmed} input(s) whose worker peak "
                   f"passed {res.opts.rss_mb} MB, the worker holding what earlier inputs loaded)")
    harness = sum(st.harness_errors for st in res.stats.values())
    if harness:
        out.append(f"\nharness errors (bugs of fuzz/, not of ctxf): {harness}")
        out.extend("  " + e.strip().replace("\n", "\n  ") for e in res.harness_errors[:5])
    rate = res.inputs / res.elapsed if res.elapsed else 0.0
    out.append(f"\n{res.inputs} inputs in {res.elapsed:.0f} s: {rate:.1f} inputs/s with {res.opts.jobs} worker(s)"
               f" (seed {res.opts.seed}, timeout {res.opts.timeout:g} s of CPU, {res.opts.mem_mb} MB per input"
               + (", each also through `ctxf ingest` as a subprocess" if res.opts.cli else "") + ")"
               + (" - interrupted" if res.interrupted else ""))
    if res.inputs:
        per = res.cpu / res.inputs
        out.append(f"worker CPU {per * 1000:.0f} ms per input (hangs count their timeout"
                   + ("; with the `ctxf ingest` subprocess" if res.opts.cli else "") + "): 100,000 inputs take "
                   f"{per * 100_000 / 3600:.1f} CPU-hours, {per * 100_000 / 60 / max(1, res.opts.jobs):.0f} min on "
                   f"{res.opts.jobs} idle core(s)")
    return "\n".join(out)


def findings(res: engine.Run) -> str:
    out = []
    for f in sorted(res.findings.values(), key=lambda f: (f["importer"], -f["count"])):
        out.append(f"{f['importer']}: {f['type']} x{f['count']} via {f['via']} at {f['where']}")
        for ex in f["examples"][:1]:
            out.append(f"    {ex['message'][:160]}")
            out.append(f"    mutations: {'; '.join(ex['mutations'])[:200]}")
            out.append(f"    saved: {ex['input']}")
            out.append(f"    repro: {ex['repro']}")
    return "\n".join(out)


def report_md(res: engine.Run, text_table: str) -> str:
    lines = ["# ctxf fuzz run", "", "```", text_table, "```", "", "## Escapes", ""]
    for f in sorted(res.findings.values(), key=lambda f: (f["importer"], -f["count"])):
        lines.append(f"- **{f['importer']}**: `{f['type']}` x{f['count']} via {f['via']} at `{f['where']}`")
        for ex in f["examples"][:1]:
            lines += [f"  - {ex['message'][:200]}", f"  - mutations: {'; '.join(ex['mutations'])[:300]}",
                      f"  - saved: `{ex['input']}`", f"  - repro: `{ex['repro']}`"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    opts = options(args)
    last = [time.monotonic()]

    def progress(res: engine.Run) -> None:
        now = time.monotonic()
        if now - last[0] >= 10:
            last[0] = now
            esc = sum(s.escaping for s in res.stats.values())
            hangs = sum(s.hangs for s in res.stats.values())
            print(f"  ... {res.inputs} inputs, {esc} escaping, {hangs} hangs", file=sys.stderr, flush=True)

    res = engine.run(opts, progress=progress, replay=Path(args.replay) if args.replay else None)
    if args.replay or args.only is not None:
        for f in res.findings.values():
            for ex in f["examples"]:
                print((Path(ex["input"]).parent / "repro.txt").read_text())
        if not res.findings:
            print("no escape")
    text = table(res)
    opts.out.mkdir(parents=True, exist_ok=True)
    if not (args.replay or args.only is not None):
        (opts.out / "report.md").write_text(report_md(res, text))
        engine.write_json(res, opts.out / "summary.json")
    if args.json:
        engine.write_json(res, Path(args.json))
    print(text)
    if res.findings:
        print("\n" + findings(res))
    bad = any(s.escaping or s.harness_errors for s in res.stats.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
